//! `lnetctl peer show [-v N]` (reference 4.2).

use super::{insert_after, netlink_doc, UdspInfo, Verbosity};
use crate::config::print;
use crate::config::yaml::{MapB, Node};
use crate::config::PeerNiState;
use crate::config::{MsgStats, NiStatistics, PeerNi, PeerNiCredits, PeerNiHealthStats};
use crate::nid::Nid;

/// The `peer show` document.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PeerShow {
    /// The peers, in output order.
    pub peers: Vec<ShowPeer>,
}

/// One item of `peer:`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShowPeer {
    /// `primary nid` (always).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub primary_nid: Nid,
    /// `Multi-Rail` (always).
    pub multi_rail: bool,
    /// `peer state`: the `lp_state` bitmask (from `-v 3`).
    pub peer_state: u32,
    /// `peer ni:`.
    pub nis: Vec<ShowPeerNi>,
}

/// One item of `peer ni:`, with every field; the verbosity picks what prints.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShowPeerNi {
    /// `nid` (always).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub nid: Nid,
    /// `udsp info:` (from `-v 4`; `None` on kernels without UDSP).
    pub udsp: Option<UdspInfo>,
    /// `state` (always): `up`/`down` for routers, else `NA`.
    pub state: PeerNiState,
    /// The credit counters (from `-v 1`).
    pub credits: PeerNiCredits,
    /// `statistics:` (from `-v 1`).
    pub statistics: NiStatistics,
    /// `sent_stats:` (from `-v 2`).
    pub sent_stats: MsgStats,
    /// `received_stats:` (from `-v 2`).
    pub received_stats: MsgStats,
    /// `dropped_stats:` (from `-v 2`).
    pub dropped_stats: MsgStats,
    /// `health stats:` (from `-v 2`).
    pub health_stats: PeerNiHealthStats,
}

impl ShowPeerNi {
    fn node(&self, v: Verbosity) -> Node {
        let v1 = v.at_least(1);
        let v2 = v.at_least(2);
        let ni = PeerNi {
            nid: self.nid,
            state: Some(self.state),
            credits: v1.then(|| self.credits.clone()),
            statistics: v1.then(|| self.statistics.clone()),
            sent_stats: v2.then(|| self.sent_stats.clone()),
            received_stats: v2.then(|| self.received_stats.clone()),
            dropped_stats: v2.then(|| self.dropped_stats.clone()),
            health_stats: v2.then(|| self.health_stats.clone()),
        };
        let mut node = print::peer_ni(&ni);
        if let (true, Some(u)) = (v.at_least(4), &self.udsp) {
            insert_after(&mut node, "nid", "udsp info", u.node());
        }
        node
    }
}

impl PeerShow {
    /// `lnetctl peer show -v N`.
    pub fn to_yaml(&self, v: Verbosity) -> String {
        let peers = self
            .peers
            .iter()
            .map(|p| {
                MapB::default()
                    .scalar("primary nid", p.primary_nid)
                    .flag("Multi-Rail", Some(p.multi_rail))
                    .opt("peer state", v.at_least(3).then_some(p.peer_state))
                    .node(
                        "peer ni",
                        Some(Node::Seq(p.nis.iter().map(|ni| ni.node(v)).collect())),
                    )
                    .done()
            })
            .collect();
        netlink_doc("peer", Node::Seq(peers))
    }
}
