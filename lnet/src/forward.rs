//! The forward decision of a router: where a message for another node goes next, from
//! a snapshot of the route table and the local NIs ([`ForwardTable`]) and the live health
//! and credits of the NIs and gateways involved (read through a closure, so that the
//! caller keeps them wherever it keeps them).
//!
//! A message whose destination is on a net this node has an NI on goes straight to the
//! destination NID, from the best local NI on that net (2.8.1); otherwise to the gateway
//! of the best live route to the destination's net (2.8.5), from the best local NI on the
//! gateway's net. The header goes on as it came.
//!
//! On that final hop the router keeps the peer NI the originator chose, except as the
//! kernel's Multi-Rail forwarding allows (lib-move.c `lnet_mr_forwarding_allowed` and
//! the send cases of `lnet_select_pathway`): when the originator and the destination are
//! both Multi-Rail peers of this node, the message is a PUT or GET (an ACK or REPLY goes
//! where it is addressed), and the addressed peer NI is below full health or its peer
//! gives it DOWN, the message goes to the best peer NI of the destination on a local net
//! (2.8.2, 2.8.3), and the header then names that NI as its destination.

use crate::health::HealthValue;
use crate::selection::{
    best_route, select_path, LocalNiCandidate, LocalNiParams, PeerNetCandidate, PeerNiCandidate,
    RouteCandidate, LNET_MAX_SELECTION_PRIORITY,
};
use crate::udsp::UdspPolicy;
use crate::{MsgType, Net, Nid};

use std::ops::Deref;
use std::sync::Arc;

use smallvec::{smallvec, SmallVec};

/// The few items of one decision (NIDs of a peer, candidates), kept off the heap: a
/// forward decision allocates nothing in the common case.
pub type Few<T> = SmallVec<[T; 4]>;

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

/// A Multi-Rail peer of this node as the forward decision sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MrPeer {
    /// Its NIDs, each with whether its peer last gave it UP (its ping info or push).
    pub nids: Vec<(Nid, bool)>,
}

/// A message to forward, as the decision reads its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardMsg {
    /// The originator (the header's source NID).
    pub src: Nid,
    /// The destination (the header's destination NID).
    pub dest: Nid,
    /// The net of the local NI it arrived on.
    pub arrived_on: Net,
    /// Its type.
    pub msg_type: MsgType,
}

/// What the forward decision reads, published whenever routes, gateway state, peers or
/// local NIs change.
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
    /// The peer NI it goes to: the destination, or a gateway.
    pub peer: Nid,
    /// The destination its header names from here: the one it came with, or on the
    /// final hop another NI of a Multi-Rail destination (see the module documentation).
    pub dest: Nid,
}

impl NextHop {
    /// Whether the next hop is a gateway rather than the destination.
    pub fn via_gateway(&self) -> bool {
        self.peer != self.dest
    }
}

/// The peer NIs a message of type `msg_type` from `src` for `dest` may go to on its
/// final hop: the one addressed, or, where Multi-Rail forwarding allows it, every peer NI
/// of the destination on a local net that its peer does not give DOWN (see the module
/// documentation). `addressed` is the health of the addressed peer NI; `mr(nid)` the
/// Multi-Rail peer of this node that has NID `nid`, asked only as far as the answer
/// matters; `local(net)` whether this node has an NI on `net`.
pub fn final_hop_nids<P: Deref<Target = MrPeer>>(
    (src, dest): (Nid, Nid),
    msg_type: MsgType,
    addressed: HealthValue,
    mr: impl Fn(&Nid) -> Option<P>,
    local: impl Fn(Net) -> bool,
) -> Few<Nid> {
    let only: Few<Nid> = smallvec![dest];
    if matches!(msg_type, MsgType::Ack | MsgType::Reply) {
        return only;
    }
    let Some(peer) = mr(&dest) else {
        return only;
    };
    let addressed_up = peer
        .nids
        .iter()
        .find(|(n, _)| *n == dest)
        .is_none_or(|(_, up)| *up);
    if (addressed_up && addressed.is_max()) || mr(&src).is_none() {
        return only;
    }
    let nids: Few<Nid> = peer
        .nids
        .iter()
        .filter(|(n, up)| *up && local(n.net))
        .map(|(n, _)| *n)
        .collect();
    if nids.is_empty() {
        only
    } else {
        nids
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

    /// The next hop of `msg`. `local(nid)` and `peer(nid)` give the live state of a
    /// local NI and of a peer NI (a gateway or the destination); `mr(nid)` the
    /// Multi-Rail peer of this node that has NID `nid`, if any (kept apart from the
    /// table: peers come and go one by one, and there can be many).
    pub fn next_hop(
        &self,
        msg: &ForwardMsg,
        mr: impl Fn(&Nid) -> Option<Arc<MrPeer>>,
        local: impl Fn(&Nid) -> Live,
        peer: impl Fn(&Nid) -> Live,
    ) -> Result<NextHop, NoHop> {
        let dest = msg.dest;
        if dest.net == msg.arrived_on {
            return Err(NoHop::OwnNet { dest });
        }
        if self.has_net(dest.net) {
            let nids = final_hop_nids((msg.src, dest), msg.msg_type, peer(&dest).health, mr, |n| {
                self.has_net(n)
            });
            return self
                .direct(&nids, &local, &peer)
                .ok_or(NoHop::NoLocalNi { dest });
        }
        let candidates: Few<RouteCandidate<Nid>> = self
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
        let hop = self
            .direct(&[gateway], &local, &peer)
            .ok_or(NoHop::NoLiveRoute { net: dest.net })?;
        Ok(NextHop { dest, ..hop })
    }

    /// The best local NI and peer NI to reach one of `to` (peer NIs on this node's
    /// nets), by the Multi-Rail rules; the header's destination is the peer NI picked.
    fn direct(
        &self,
        to: &[Nid],
        local: &impl Fn(&Nid) -> Live,
        peer: &impl Fn(&Nid) -> Live,
    ) -> Option<NextHop> {
        // One peer NI, and one local NI on its net: the rules have nothing to compare
        // (they rank candidates, they rule none out), so the choice is made without
        // reading their health and credits.
        if let [only] = to {
            let mut on_net = self.nis.iter().filter(|n| n.nid.net == only.net);
            if let (Some(ni), None) = (on_net.next(), on_net.next()) {
                return Some(NextHop {
                    ni: ni.nid,
                    peer: *only,
                    dest: *only,
                });
            }
        }
        self.select(to, local, peer)
    }

    /// [`ForwardTable::direct`] by the comparisons of [`select_path`].
    fn select(
        &self,
        to: &[Nid],
        local: &impl Fn(&Nid) -> Live,
        peer: &impl Fn(&Nid) -> Live,
    ) -> Option<NextHop> {
        let locals: Few<LocalNiCandidate<Nid>> = self
            .nis
            .iter()
            .filter(|n| to.iter().any(|t| t.net == n.nid.net))
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
        let peers: Few<PeerNiCandidate<Nid>> = to
            .iter()
            .map(|t| {
                let p = peer(t);
                PeerNiCandidate {
                    id: *t,
                    net: t.net,
                    health: p.health,
                    sel_priority: self.udsp.peer_ni_priority(t),
                    tx_credits: p.tx_credits,
                    seq: p.seq,
                }
            })
            .collect();
        let mut nets: Few<Net> = to.iter().map(|t| t.net).collect();
        nets.sort_by_key(|n| n.to_u32());
        nets.dedup();
        let best =
            |it: &mut dyn Iterator<Item = HealthValue>| it.max().unwrap_or(HealthValue::ZERO);
        let nets: Few<PeerNetCandidate<Net>> = nets
            .into_iter()
            .map(|net| PeerNetCandidate {
                id: net,
                peer_net_health: best(&mut peers.iter().filter(|p| p.net == net).map(|p| p.health)),
                peer_net_sel_priority: self.udsp.peer_net_priority(net),
                local_net_health: best(
                    &mut locals.iter().filter(|l| l.net == net).map(|l| l.health),
                ),
                local_net_sel_priority: self.udsp.local_net_priority(net),
                peer_net_seq: 0,
                local_net_seq: 0,
            })
            .collect();
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
            dest: path.peer_ni.id,
        })
    }
}

#[cfg(test)]
mod tests;
