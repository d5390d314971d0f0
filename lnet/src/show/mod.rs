//! The `lnetctl ... show` documents as one typed model (reference Part 4): `net show -v N`
//! ([`NetShow`]), `peer show -v N` ([`PeerShow`]), `stats show` ([`StatsShow`]),
//! `global show` ([`GlobalShow`]), the `ping` result ([`PingShow`]) and
//! `debug recovery --local|--peer` ([`RecoveryShow`]).
//!
//! The model is pure: the caller fills in the values (from the router's live state) and
//! each document prints itself as YAML exactly as lnetctl does, through the printer of
//! [`crate::config`] (the netlink/libyaml layout for `net`, `peer` and `debug recovery`,
//! cYAML for `stats` and `global`, and the indent-2 layout `ping` uses). Every type also
//! derives [`serde::Serialize`], so the same model can be served as JSON; JSON carries
//! every field, whatever the verbosity.
//!
//! Each document can also be read back from lnetctl's text (`NetShow::parse` and so on,
//! errors as [`ConfigError`](crate::config::ConfigError)); blocks a lower verbosity left
//! out come back as defaults, so printing at the same verbosity reproduces the text.
//!
//! Not modelled: the answer to `debug recovery` for an empty queue (printed as nothing).
//! The `Preferred gateway NIDs` / `Preferred source NIDs` maps of `udsp info:` follow
//! lnetctl's code; no capture shows them.

mod export;
mod net;
mod other;
mod parse;
mod peer;

#[cfg(test)]
mod tests;

pub use export::{export, ExportSource};
pub use net::{NetLayout, NetShow, ShowNet, ShowNi};
pub use other::{GlobalShow, PingFailureShow, PingShow, RecoveryKind, RecoveryShow, StatsShow};
pub use peer::{PeerShow, ShowPeer, ShowPeerNi};

use crate::config::yaml::{self, Key, Node};
use crate::nid::Nid;

/// The verbosity of a `show` command: `-v` alone is 1, `-v N` is N, none is 0 (reference
/// 4.0). Levels above 4 print as 4.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Verbosity(pub u8);

impl Verbosity {
    /// Whether fields shown from `level` up are shown at this verbosity.
    pub const fn at_least(self, level: u8) -> bool {
        self.0 >= level
    }
}

/// `udsp info:` of an NI or a peer NI (shown from `-v 4`): the priorities that selection
/// policy rules gave it (-1 when no rule applies) and, when not empty, its preferred lists
/// (at most [`MAX_SHOWN_PREFERRED`] of each are printed, as lnetctl does).
///
/// The lists print as maps keyed `NID-0`, `NID-1`, …, gateways first, as lnetctl's ioctl
/// renderer does for a peer NI. A local NI's `Preferred gateway NIDs` comes from its net's
/// preferred-router list, which no rule fills, and a local NI has no source list. The
/// netlink kernels send only the gateway list, so `Preferred source NIDs` appears only in
/// the output of the ioctl era. Empty lists are left out of the JSON form too.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UdspInfo {
    /// `net priority`.
    pub net_priority: i32,
    /// `nid priority`.
    pub nid_priority: i32,
    /// `Preferred gateway NIDs` (UDSP `dst` + `rte` rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub preferred_gateways: Vec<Nid>,
    /// `Preferred source NIDs` (UDSP `src` + `dst` rules, or a non-Multi-Rail peer NI's
    /// preferred local NID).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub preferred_sources: Vec<Nid>,
}

/// The most NIDs of one preferred list `udsp info:` prints (`LNET_MAX_SHOW_NUM_NID`).
pub const MAX_SHOWN_PREFERRED: usize = 128;

impl Default for UdspInfo {
    /// No rule applies: both priorities -1, no preferred lists.
    fn default() -> UdspInfo {
        UdspInfo {
            net_priority: -1,
            nid_priority: -1,
            preferred_gateways: Vec::new(),
            preferred_sources: Vec::new(),
        }
    }
}

impl UdspInfo {
    fn node(&self) -> Node {
        fn list(nids: &[Nid]) -> Option<Node> {
            (!nids.is_empty()).then(|| {
                Node::Map(
                    nids.iter()
                        .take(MAX_SHOWN_PREFERRED)
                        .enumerate()
                        .map(|(i, n)| {
                            (
                                Key::Owned(format!("NID-{i}")),
                                Node::Scalar(yaml::plain(&n.to_string())),
                            )
                        })
                        .collect(),
                )
            })
        }
        yaml::MapB::default()
            .scalar("net priority", self.net_priority)
            .scalar("nid priority", self.nid_priority)
            .node("Preferred gateway NIDs", list(&self.preferred_gateways))
            .node("Preferred source NIDs", list(&self.preferred_sources))
            .done()
    }
}

/// Inserts `(key, value)` into a map node right after the entry named `after`, or at the
/// front if there is no such entry.
fn insert_after(node: &mut Node, after: &str, key: &'static str, value: Node) {
    if let Node::Map(entries) = node {
        let at = entries
            .iter()
            .position(|(k, _)| k == after)
            .map_or(0, |i| i + 1);
        entries.insert(at, (Key::from(key), value));
    }
}

/// One top-level document `key:` with `value`, in the netlink/libyaml layout.
fn netlink_doc(key: &'static str, value: Node) -> String {
    let mut out = String::new();
    yaml::write_map(&mut out, &[(key.into(), value)], 0, None, yaml::NETLINK);
    out
}

/// One top-level document `key:` with `value`, in the cYAML layout.
fn cyaml_doc(key: &'static str, value: Node) -> String {
    let mut out = String::new();
    yaml::write_cyaml(&mut out, &[(key.into(), value)], 0, false, false);
    out
}
