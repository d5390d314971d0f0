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
//! Not modelled: the `Preferred gateway NIDs` / `Preferred source NIDs` keys of
//! `udsp info:` (their layout is in no capture), and the answer to `debug recovery` for an
//! empty queue (printed as nothing).

mod net;
mod other;
mod parse;
mod peer;

#[cfg(test)]
mod tests;

pub use net::{NetLayout, NetShow, ShowNet, ShowNi};
pub use other::{GlobalShow, PingShow, RecoveryKind, RecoveryShow, StatsShow};
pub use peer::{PeerShow, ShowPeer, ShowPeerNi};

use crate::config::print::{self, Key, Node};

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
/// policy rules gave it (-1 when no rule applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UdspInfo {
    /// `net priority`.
    pub net_priority: i32,
    /// `nid priority`.
    pub nid_priority: i32,
}

impl Default for UdspInfo {
    /// No rule applies: both priorities -1.
    fn default() -> UdspInfo {
        UdspInfo {
            net_priority: -1,
            nid_priority: -1,
        }
    }
}

impl UdspInfo {
    fn node(self) -> Node {
        print::MapB::default()
            .scalar("net priority", self.net_priority)
            .scalar("nid priority", self.nid_priority)
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
    print::write_map(&mut out, &[(key.into(), value)], 0, None, print::NETLINK);
    out
}

/// One top-level document `key:` with `value`, in the cYAML layout.
fn cyaml_doc(key: &'static str, value: Node) -> String {
    let mut out = String::new();
    print::write_cyaml(&mut out, &[(key.into(), value)], 0, false, false);
    out
}
