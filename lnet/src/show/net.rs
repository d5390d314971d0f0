//! `lnetctl net show [-v N]` (reference 4.1).

use super::{cyaml_doc, insert_after, netlink_doc, UdspInfo, Verbosity};
use crate::config::print;
use crate::config::yaml::{MapB, Node};
use crate::config::{Cpts, LndTunables, LocalNi, MsgStats, NiHealthStats, NiStatistics};
use crate::config::{NiStatus, NiTunables};
use crate::nid::{Net, Nid};

/// The layout of `net show`: the netlink/libyaml layout of current kernels, or the cYAML
/// layout of the ioctl fallback that older kernels (2.14) answer (reference 4.0, 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum NetLayout {
    /// Netlink + libyaml: `-     key`, indent 6.
    #[default]
    Netlink,
    /// The ioctl fallback: cYAML, indent 4, `map_on_demand` before `concurrent_sends`.
    Ioctl,
}

/// The `net show` document: every local net, `lo` first.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct NetShow {
    /// The nets, in output order.
    pub nets: Vec<ShowNet>,
}

/// One item of `net:`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShowNet {
    /// `net type`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub net_type: Net,
    /// `local NI(s):`.
    pub nis: Vec<ShowNi>,
}

/// One item of `local NI(s):`, with every field; the verbosity picks what prints.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShowNi {
    /// `nid` (always).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub nid: Nid,
    /// `status` (always).
    pub status: NiStatus,
    /// `interfaces:` `0: IFNAME` (always, when there is one; none for `lo`).
    pub interfaces: Vec<String>,
    /// `statistics:` (from `-v 1`).
    pub statistics: NiStatistics,
    /// `udsp info:` (from `-v 4`; `None` on kernels without UDSP).
    pub udsp: Option<UdspInfo>,
    /// `sent_stats:` (from `-v 2`).
    pub sent_stats: MsgStats,
    /// `received_stats:` (from `-v 2`).
    pub received_stats: MsgStats,
    /// `dropped_stats:` (from `-v 2`).
    pub dropped_stats: MsgStats,
    /// `health stats:` (from `-v 2`).
    pub health_stats: NiHealthStats,
    /// `tunables:` (from `-v 1`).
    pub tunables: NiTunables,
    /// `lnd tunables:` (from `-v 1`; `None` for `lo` on netlink kernels).
    pub lnd_tunables: Option<LndTunables>,
    /// `dev cpt` (from `-v 1`; -1 when the device has no CPT).
    pub dev_cpt: i32,
    /// `CPT` (from `-v 1`).
    pub cpt: Cpts,
}

impl ShowNi {
    fn node(&self, v: Verbosity, layout: NetLayout) -> Node {
        let v1 = v.at_least(1);
        let v2 = v.at_least(2);
        let ni = LocalNi {
            nid: Some(self.nid),
            status: Some(self.status),
            interfaces: self.interfaces.clone(),
            statistics: v1.then(|| self.statistics.clone()),
            sent_stats: v2.then(|| self.sent_stats.clone()),
            received_stats: v2.then(|| self.received_stats.clone()),
            dropped_stats: v2.then(|| self.dropped_stats.clone()),
            health_stats: v2.then(|| self.health_stats.clone()),
            tunables: v1.then(|| self.tunables.clone()),
            lnd_tunables: if v1 { self.lnd_tunables.clone() } else { None },
            dev_cpt: v1.then_some(self.dev_cpt),
            cpt: v1.then(|| self.cpt.clone()),
        };
        let mut node = print::local_ni(&ni);
        if let (true, Some(u)) = (v.at_least(4), &self.udsp) {
            insert_after(&mut node, "statistics", "udsp info", u.node());
        }
        if layout == NetLayout::Ioctl {
            ioctl_lnd_order(&mut node);
        }
        node
    }
}

/// The ioctl fallback prints `map_on_demand` before `concurrent_sends`.
fn ioctl_lnd_order(node: &mut Node) {
    let Node::Map(entries) = node else { return };
    let Some((_, Node::Map(lnd))) = entries.iter_mut().find(|(k, _)| k == "lnd tunables") else {
        return;
    };
    let cs = lnd.iter().position(|(k, _)| k == "concurrent_sends");
    let mod_ = lnd.iter().position(|(k, _)| k == "map_on_demand");
    if let (Some(cs), Some(m)) = (cs, mod_) {
        if m > cs {
            let entry = lnd.remove(m);
            lnd.insert(cs, entry);
        }
    }
}

impl NetShow {
    /// `lnetctl net show -v N` as a current (netlink) kernel prints it.
    pub fn to_yaml(&self, v: Verbosity) -> String {
        self.to_yaml_layout(v, NetLayout::Netlink)
    }

    /// `lnetctl net show -v N` in the given layout.
    pub fn to_yaml_layout(&self, v: Verbosity, layout: NetLayout) -> String {
        let nets = self
            .nets
            .iter()
            .map(|n| {
                MapB::default()
                    .scalar("net type", n.net_type)
                    .node(
                        "local NI(s)",
                        Some(Node::Seq(
                            n.nis.iter().map(|ni| ni.node(v, layout)).collect(),
                        )),
                    )
                    .done()
            })
            .collect();
        match layout {
            NetLayout::Netlink => netlink_doc("net", Node::Seq(nets)),
            NetLayout::Ioctl => cyaml_doc("net", Node::Seq(nets)),
        }
    }
}
