//! `lnetctl stats show`, `global show`, `ping` and `debug recovery` (reference 4.5, 4.6,
//! 4.8).

use std::borrow::Cow;

use super::{cyaml_doc, netlink_doc};
use crate::config::yaml::{self, MapB, Node, Style};
use crate::config::{Config, Global};
use crate::nid::Nid;
use crate::tunables::Tunables;

/// The `lnetctl stats show` document: LNet's global counters, printed in this order.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsShow {
    /// `msgs_alloc`: messages allocated now.
    pub msgs_alloc: u64,
    /// `msgs_max`: the most messages allocated at once.
    pub msgs_max: u64,
    /// `rst_alloc`: response trackers allocated.
    pub rst_alloc: u64,
    /// `errors`.
    pub errors: u64,
    /// `send_count`.
    pub send_count: u64,
    /// `resend_count`.
    pub resend_count: u64,
    /// `response_timeout_count`.
    pub response_timeout_count: u64,
    /// `local_interrupt_count`.
    pub local_interrupt_count: u64,
    /// `local_dropped_count`.
    pub local_dropped_count: u64,
    /// `local_aborted_count`.
    pub local_aborted_count: u64,
    /// `local_no_route_count`.
    pub local_no_route_count: u64,
    /// `local_timeout_count`.
    pub local_timeout_count: u64,
    /// `local_error_count`.
    pub local_error_count: u64,
    /// `remote_dropped_count`.
    pub remote_dropped_count: u64,
    /// `remote_error_count`.
    pub remote_error_count: u64,
    /// `remote_timeout_count`.
    pub remote_timeout_count: u64,
    /// `network_timeout_count`.
    pub network_timeout_count: u64,
    /// `failed_resends` (newer kernels; `None` prints nothing, as 2.14 does).
    pub failed_resends: Option<u64>,
    /// `successful_resends` (newer kernels; `None` prints nothing, as 2.14 does).
    pub successful_resends: Option<u64>,
    /// `recv_count`.
    pub recv_count: u64,
    /// `route_count`.
    pub route_count: u64,
    /// `drop_count`.
    pub drop_count: u64,
    /// `send_length`, bytes.
    pub send_length: u64,
    /// `recv_length`, bytes.
    pub recv_length: u64,
    /// `route_length`, bytes.
    pub route_length: u64,
    /// `drop_length`, bytes.
    pub drop_length: u64,
}

/// cYAML keeps numbers as doubles and prints them with `%.0f`, so values above 2^53 come
/// out rounded (reference 4.5).
fn cyaml_number(v: u64) -> String {
    #[allow(clippy::cast_precision_loss)] // the rounding is what lnetctl prints
    let d = v as f64;
    format!("{d:.0}")
}

impl StatsShow {
    /// The counters since `base` was taken (`lnetctl stats reset`): each counter less its
    /// value in `base` (0 if it went below), the gauges (`msgs_alloc`, `msgs_max`,
    /// `rst_alloc`) as they are now.
    pub fn since(&self, base: &StatsShow) -> StatsShow {
        let d = |now: u64, then: u64| now.saturating_sub(then);
        let o = |now: Option<u64>, then: Option<u64>| now.map(|n| d(n, then.unwrap_or(0)));
        StatsShow {
            msgs_alloc: self.msgs_alloc,
            msgs_max: self.msgs_max,
            rst_alloc: self.rst_alloc,
            errors: d(self.errors, base.errors),
            send_count: d(self.send_count, base.send_count),
            resend_count: d(self.resend_count, base.resend_count),
            response_timeout_count: d(self.response_timeout_count, base.response_timeout_count),
            local_interrupt_count: d(self.local_interrupt_count, base.local_interrupt_count),
            local_dropped_count: d(self.local_dropped_count, base.local_dropped_count),
            local_aborted_count: d(self.local_aborted_count, base.local_aborted_count),
            local_no_route_count: d(self.local_no_route_count, base.local_no_route_count),
            local_timeout_count: d(self.local_timeout_count, base.local_timeout_count),
            local_error_count: d(self.local_error_count, base.local_error_count),
            remote_dropped_count: d(self.remote_dropped_count, base.remote_dropped_count),
            remote_error_count: d(self.remote_error_count, base.remote_error_count),
            remote_timeout_count: d(self.remote_timeout_count, base.remote_timeout_count),
            network_timeout_count: d(self.network_timeout_count, base.network_timeout_count),
            failed_resends: o(self.failed_resends, base.failed_resends),
            successful_resends: o(self.successful_resends, base.successful_resends),
            recv_count: d(self.recv_count, base.recv_count),
            route_count: d(self.route_count, base.route_count),
            drop_count: d(self.drop_count, base.drop_count),
            send_length: d(self.send_length, base.send_length),
            recv_length: d(self.recv_length, base.recv_length),
            route_length: d(self.route_length, base.route_length),
            drop_length: d(self.drop_length, base.drop_length),
        }
    }

    /// `lnetctl stats show`.
    pub fn to_yaml(&self) -> String {
        let n = |v: u64| cyaml_number(v);
        let mut m = MapB::default()
            .raw("msgs_alloc", n(self.msgs_alloc))
            .raw("msgs_max", n(self.msgs_max))
            .raw("rst_alloc", n(self.rst_alloc))
            .raw("errors", n(self.errors))
            .raw("send_count", n(self.send_count))
            .raw("resend_count", n(self.resend_count))
            .raw("response_timeout_count", n(self.response_timeout_count))
            .raw("local_interrupt_count", n(self.local_interrupt_count))
            .raw("local_dropped_count", n(self.local_dropped_count))
            .raw("local_aborted_count", n(self.local_aborted_count))
            .raw("local_no_route_count", n(self.local_no_route_count))
            .raw("local_timeout_count", n(self.local_timeout_count))
            .raw("local_error_count", n(self.local_error_count))
            .raw("remote_dropped_count", n(self.remote_dropped_count))
            .raw("remote_error_count", n(self.remote_error_count))
            .raw("remote_timeout_count", n(self.remote_timeout_count))
            .raw("network_timeout_count", n(self.network_timeout_count));
        if let Some(v) = self.failed_resends {
            m = m.raw("failed_resends", n(v));
        }
        if let Some(v) = self.successful_resends {
            m = m.raw("successful_resends", n(v));
        }
        let m = m
            .raw("recv_count", n(self.recv_count))
            .raw("route_count", n(self.route_count))
            .raw("drop_count", n(self.drop_count))
            .raw("send_length", n(self.send_length))
            .raw("recv_length", n(self.recv_length))
            .raw("route_length", n(self.route_length))
            .raw("drop_length", n(self.drop_length));
        cyaml_doc("statistics", m.done())
    }
}

/// The `lnetctl global show` document.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct GlobalShow {
    /// The 13 keys; `None` ones are not printed.
    pub global: Global,
}

impl GlobalShow {
    /// All 13 keys for these tunables, `lnd_timeout` derived as LNet derives it.
    pub fn from_tunables(t: &Tunables) -> GlobalShow {
        GlobalShow {
            global: Global::from_tunables(t),
        }
    }

    /// `lnetctl global show`.
    pub fn to_yaml(&self) -> String {
        Config {
            global: Some(self.global.clone()),
            ..Config::default()
        }
        .to_yaml()
    }
}

/// The result of `lnetctl ping NID`: the peer's primary NID, whether it is multi-rail, and
/// the NIDs its ping buffer lists.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PingShow {
    /// `primary nid`.
    pub primary_nid: Nid,
    /// `Multi-Rail`.
    pub multi_rail: bool,
    /// `peer_ni:` `- nid: ...`, in buffer order.
    pub peer_nis: Vec<Nid>,
}

/// The layout `lnetctl ping` prints in: libyaml's default indent 2, a sequence's dash at
/// its parent key's column.
const PING: Style = Style {
    map_step: 2,
    seq_offset: 0,
    dash: "- ",
};

impl PingShow {
    /// `lnetctl ping NID` for one pinged peer.
    pub fn to_yaml(&self) -> String {
        PingShow::list_to_yaml("ping", std::slice::from_ref(self), &[])
    }

    fn item(&self) -> Node {
        let nis = self
            .peer_nis
            .iter()
            .map(|nid| MapB::default().scalar("nid", nid).done())
            .collect();
        MapB::default()
            .scalar("primary nid", self.primary_nid)
            .flag("Multi-Rail", Some(self.multi_rail))
            .node("peer_ni", Some(Node::Seq(nis)))
            .done()
    }

    /// What `lnetctl ping NID,NID...` (`group` `ping`) or `lnetctl discover` (`discover`)
    /// prints: the peers that answered under `group:`, then, when some did not, a
    /// `manage:` list with the `errno` and `descr` of each failure.
    pub fn list_to_yaml(
        group: &'static str,
        answered: &[PingShow],
        failed: &[PingFailureShow],
    ) -> String {
        let mut top = Vec::new();
        if !answered.is_empty() {
            top.push((
                group.into(),
                Node::Seq(answered.iter().map(PingShow::item).collect()),
            ));
        }
        if !failed.is_empty() {
            let items = failed
                .iter()
                .map(|f| {
                    MapB::default()
                        .scalar(group, "")
                        .scalar("errno", f.errno)
                        .scalar("descr", &f.descr)
                        .done()
                })
                .collect();
            top.push(("manage".into(), Node::Seq(items)));
        }
        let mut out = String::new();
        yaml::write_map(&mut out, &top, 0, None, PING);
        out
    }
}

/// One NID that a ping or a discovery could not reach, as lnetctl reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingFailureShow {
    /// The negative errno (`-110` for a timeout).
    pub errno: i32,
    /// `failed to ping NID: Connection timed out`.
    pub descr: String,
}

/// Which queue `lnetctl debug recovery` shows.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RecoveryKind {
    /// `--local`: local NIs in recovery.
    Local,
    /// `--peer`: peer NIs in recovery.
    Peer,
}

/// The `lnetctl debug recovery --local|--peer` document: the NIDs on a recovery queue.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecoveryShow {
    /// The queue.
    pub kind: RecoveryKind,
    /// The NIDs on it, in queue order (`nid-0`, `nid-1`, ...).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub nids: Vec<Nid>,
}

impl RecoveryShow {
    /// `Local NI recovery:` / `Peer NI recovery:` with `nid-N` keys, in the netlink layout.
    /// An empty queue prints nothing (the reference does not show an empty answer).
    pub fn to_yaml(&self) -> String {
        if self.nids.is_empty() {
            return String::new();
        }
        let head = match self.kind {
            RecoveryKind::Local => "Local NI recovery",
            RecoveryKind::Peer => "Peer NI recovery",
        };
        let entries = self
            .nids
            .iter()
            .enumerate()
            .map(|(i, nid)| {
                (
                    Cow::Owned(format!("nid-{i}")),
                    Node::Scalar(yaml::plain(&nid.to_string())),
                )
            })
            .collect();
        netlink_doc(head, Node::Map(entries))
    }
}
