//! The forward decision of a router: where a message for another node goes next, from
//! a snapshot of the route table and the local NIs ([`ForwardTable`]) and the live health
//! and credits of the NIs and gateways involved (read through a closure, so that the
//! caller keeps them wherever it keeps them).
//!
//! A message whose destination is on a net this node has an NI on goes straight to the
//! destination NID (as addressed: a router does not re-pick the peer NI of the final
//! destination), from the best local NI on that net (2.8.1); otherwise to the gateway of
//! the best live route to the destination's net (2.8.5), from the best local NI on the
//! gateway's net. The header goes on as it came.

use crate::health::HealthValue;
use crate::selection::{
    best_route, select_path, LocalNiCandidate, LocalNiParams, PeerNetCandidate, PeerNiCandidate,
    RouteCandidate, LNET_MAX_SELECTION_PRIORITY,
};
use crate::udsp::UdspPolicy;
use crate::{Net, Nid};

/// A local NI as the forward decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardNi {
    /// Its NID.
    pub nid: Nid,
    /// Its link is down (it is never picked while another NI on its net is up).
    pub link_down: bool,
    /// The NUMA distance of its device from the forwarding path (router buffers have no
    /// memory node of their own, so this is the distance from "anywhere").
    pub numa_distance: u32,
}

/// A route as the forward decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardRoute {
    /// The remote net.
    pub net: Net,
    /// The gateway's NID (on a local net).
    pub gateway: Nid,
    /// Whether the route is up (2.9, asymmetric route failure detection included).
    pub up: bool,
    /// Its priority (lower is better).
    pub priority: u32,
    /// Its hop count.
    pub hops: Option<u32>,
}

/// What the forward decision reads, published whenever routes, gateway state or local NIs
/// change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardTable {
    /// The local NIs.
    pub nis: Vec<ForwardNi>,
    /// The routes.
    pub routes: Vec<ForwardRoute>,
    /// The UDSP rules.
    pub udsp: UdspPolicy,
    /// `numa_range`.
    pub numa_range: u32,
}

/// The live state of a local NI or peer NI the decision compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// Its health value.
    pub health: HealthValue,
    /// Its tx credits now.
    pub tx_credits: i32,
    /// Its round-robin counter.
    pub seq: u64,
}

impl Live {
    /// A NI nothing is known of yet: full health, no credit advantage.
    pub const UNKNOWN: Live = Live {
        health: HealthValue::MAX,
        tx_credits: 0,
        seq: 0,
    };
}

/// Where a forwarded message goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// The local NI it leaves on.
    pub ni: Nid,
    /// The peer NI it goes to: the destination itself, or a gateway.
    pub peer: Nid,
}

impl NextHop {
    /// Whether the next hop is a gateway rather than the destination.
    pub fn via_gateway(&self, dest: Nid) -> bool {
        self.peer != dest
    }
}

/// Why a forwarded message has no next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum NoHop {
    /// The message arrived on the destination's own net: it should have gone direct.
    #[error("message for {dest} arrived on its own net")]
    OwnNet {
        /// The destination.
        dest: Nid,
    },
    /// The destination's net is local but no local NI on it can send.
    #[error("no local NI can reach {dest}")]
    NoLocalNi {
        /// The destination.
        dest: Nid,
    },
    /// Routes to the destination's net exist but none is up.
    #[error("no route to {net} is up")]
    NoLiveRoute {
        /// The destination's net.
        net: Net,
    },
    /// No route to the destination's net.
    #[error("no route to {net}")]
    NoRoute {
        /// The destination's net.
        net: Net,
    },
}

impl ForwardTable {
    /// Whether this node has an NI on `net`.
    pub fn has_net(&self, net: Net) -> bool {
        self.nis.iter().any(|n| n.nid.net == net)
    }

    /// The next hop of a message for `dest` that arrived on local NI `arrived_on`.
    /// `local(nid)` and `peer(nid)` give the live state of a local NI and of a peer NI
    /// (a gateway or the destination).
    pub fn next_hop(
        &self,
        dest: Nid,
        arrived_on: Net,
        local: impl Fn(&Nid) -> Live,
        peer: impl Fn(&Nid) -> Live,
    ) -> Result<NextHop, NoHop> {
        if dest.net == arrived_on {
            return Err(NoHop::OwnNet { dest });
        }
        if self.has_net(dest.net) {
            return self
                .direct(dest, &local, &peer)
                .ok_or(NoHop::NoLocalNi { dest });
        }
        let candidates: Vec<RouteCandidate<Nid>> = self
            .routes
            .iter()
            .filter(|r| r.net == dest.net)
            .map(|r| {
                let gw = peer(&r.gateway);
                let usable = self
                    .nis
                    .iter()
                    .any(|n| n.nid.net == r.gateway.net && !n.link_down);
                RouteCandidate {
                    id: r.gateway,
                    alive: r.up && usable,
                    preferred: self.udsp.prefers_gateway(&dest, &r.gateway),
                    priority: r.priority,
                    hops: r.hops,
                    gateway_health: gw.health,
                    gateway_tx_queued_bytes: 0,
                    gateway_tx_credits: gw.tx_credits,
                    seq: gw.seq,
                }
            })
            .collect();
        if candidates.is_empty() {
            return Err(NoHop::NoRoute { net: dest.net });
        }
        let gateway = best_route(&candidates)
            .map(|c| c.id)
            .ok_or(NoHop::NoLiveRoute { net: dest.net })?;
        self.direct(gateway, &local, &peer)
            .ok_or(NoHop::NoLiveRoute { net: dest.net })
    }

    /// The best local NI to reach peer NI `to` on one of this node's nets.
    fn direct(
        &self,
        to: Nid,
        local: &impl Fn(&Nid) -> Live,
        peer: &impl Fn(&Nid) -> Live,
    ) -> Option<NextHop> {
        let locals: Vec<LocalNiCandidate<Nid>> = self
            .nis
            .iter()
            .filter(|n| n.nid.net == to.net)
            .map(|n| {
                let live = local(&n.nid);
                LocalNiCandidate {
                    id: n.nid,
                    net: n.nid.net,
                    fatal: n.link_down,
                    health: live.health,
                    sel_priority: self.udsp.local_ni_priority(&n.nid),
                    dev_priority: LNET_MAX_SELECTION_PRIORITY,
                    numa_distance: n.numa_distance,
                    tx_credits: live.tx_credits,
                    seq: live.seq,
                }
            })
            .collect();
        let p = peer(&to);
        let peers = [PeerNiCandidate {
            id: to,
            net: to.net,
            health: p.health,
            sel_priority: self.udsp.peer_ni_priority(&to),
            tx_credits: p.tx_credits,
            seq: p.seq,
        }];
        let best_local = locals
            .iter()
            .map(|l| l.health)
            .max()
            .unwrap_or(HealthValue::ZERO);
        let nets = [PeerNetCandidate {
            id: to.net,
            peer_net_health: p.health,
            peer_net_sel_priority: self.udsp.peer_net_priority(to.net),
            local_net_health: best_local,
            local_net_sel_priority: self.udsp.local_net_priority(to.net),
            peer_net_seq: 0,
            local_net_seq: 0,
        }];
        let params = LocalNiParams {
            numa_range: self.numa_range,
            gpu_memory: false,
        };
        let path = select_path(&nets, &locals, &peers, params, |p, l| {
            self.udsp.prefers_local(&p.id, &l.id)
        })?;
        Some(NextHop {
            ni: path.local_ni.id,
            peer: path.peer_ni.id,
        })
    }
}

#[cfg(test)]
mod tests;
