//! Path selection: which local NI and which peer NI (or gateway) the next attempt of a
//! message takes ([`lnet::selection::select_path`] over the live views of the NI
//! actors, UDSP preferences and NUMA distances).

use lnet::forward::final_hop_nids;
use lnet::health::HealthValue;
use lnet::selection::{
    select_path, LocalNiCandidate, LocalNiParams, PeerNetCandidate, PeerNiCandidate,
    LNET_MAX_SELECTION_PRIORITY,
};
use lnet::{Net, Nid};

use super::{LnetActor, OutMsg, Path};

impl LnetActor {
    /// Picks the local NI, the next hop and the header's destination for `msg`: a peer
    /// NI on a local net if the destination has one, else a gateway of a live route.
    pub(super) fn select(&self, msg: &OutMsg) -> Option<Path> {
        if let Some(gw) = msg.pin_peer.filter(|p| *p != msg.target) {
            if !self.has_net(msg.target.net) {
                // A response goes back through the gateway its request came from.
                let (ni, next_hop) = self.select_direct(msg, &[gw])?;
                return Some(Path {
                    ni,
                    next_hop,
                    dest: msg.target,
                });
            }
        }
        let peer_nids: Vec<Nid> = match msg.pin_peer {
            Some(p) if msg.forward.is_some() && p == msg.target => self.final_hop_nids(msg),
            Some(p) => vec![p],
            None if msg.forward.is_some() => vec![msg.target],
            None => match self.peers.get(&msg.target) {
                Some(peer) if peer.multi_rail => peer.nids.clone(),
                _ => vec![msg.target],
            },
        };
        let direct: Vec<Nid> = peer_nids
            .iter()
            .filter(|n| !self.is_local(n) && self.has_net(n.net))
            .copied()
            .collect();
        if !direct.is_empty() {
            let (ni, peer) = self.select_direct(msg, &direct)?;
            return Some(Path {
                ni,
                next_hop: peer,
                dest: peer,
            });
        }
        let (gateway, dest) = self.route_for(&peer_nids)?;
        let (ni, next_hop) = self.select_direct(msg, &[gateway])?;
        Some(Path { ni, next_hop, dest })
    }

    /// The peer NIs a forwarded message on its final hop may go to: the one addressed,
    /// or the destination's others as Multi-Rail forwarding allows
    /// ([`lnet::forward::final_hop_nids`], which the forwarding path applies too).
    fn final_hop_nids(&self, msg: &OutMsg) -> Vec<Nid> {
        let addressed = self
            .peer_nis
            .get(&msg.target)
            .map_or(HealthValue::MAX, |e| e.view.borrow().health);
        final_hop_nids(
            (msg.header.src_nid, msg.target),
            msg.header.msg_type(),
            addressed,
            |n| self.path.mr_peer(n),
            |n| self.has_net(n),
        )
        .into_vec()
    }

    pub(super) fn has_net(&self, net: Net) -> bool {
        self.nis.keys().any(|n| n.net == net)
    }

    /// Picks a local NI and one of `peer_nids` (all on local nets) by the Multi-Rail rules.
    pub(super) fn select_direct(&self, msg: &OutMsg, peer_nids: &[Nid]) -> Option<(Nid, Nid)> {
        let udsp = &self.config.udsp;
        let memory_node = if msg.forward.is_some() {
            None
        } else {
            self.config.memory_node
        };
        let local: Vec<LocalNiCandidate<Nid>> = self
            .nis
            .iter()
            .filter(|(nid, _)| msg.pin_local.is_none_or(|p| p == **nid))
            .map(|(nid, e)| {
                let v = e.view.borrow();
                LocalNiCandidate {
                    id: *nid,
                    net: nid.net,
                    fatal: self.routes.link_down(nid),
                    health: v.health,
                    sel_priority: udsp.local_ni_priority(nid),
                    dev_priority: LNET_MAX_SELECTION_PRIORITY,
                    numa_distance: self.config.numa.ni_distance(memory_node, e.numa_node),
                    tx_credits: e.cell.credits(),
                    seq: e.cell.seq(),
                }
            })
            .collect();
        let peers: Vec<PeerNiCandidate<Nid>> = peer_nids
            .iter()
            .map(|nid| {
                let (health, credits, seq) = match self.peer_nis.get(nid) {
                    Some(e) => {
                        let v = e.view.borrow();
                        (v.health, e.cell.credits(), e.cell.seq())
                    }
                    None => (HealthValue::MAX, 0, 0),
                };
                PeerNiCandidate {
                    id: *nid,
                    net: nid.net,
                    health,
                    sel_priority: udsp.peer_ni_priority(nid),
                    tx_credits: credits,
                    seq,
                }
            })
            .collect();
        let mut nets: Vec<Net> = peers.iter().map(|p| p.net).collect();
        nets.sort_by_key(|n| n.to_u32());
        nets.dedup();
        let net_candidates: Vec<PeerNetCandidate<Net>> = nets
            .into_iter()
            .map(|net| {
                let best = |it: &mut dyn Iterator<Item = HealthValue>| {
                    it.max().unwrap_or(HealthValue::ZERO)
                };
                PeerNetCandidate {
                    id: net,
                    peer_net_health: best(
                        &mut peers.iter().filter(|p| p.net == net).map(|p| p.health),
                    ),
                    peer_net_sel_priority: udsp.peer_net_priority(net),
                    local_net_health: best(
                        &mut local.iter().filter(|l| l.net == net).map(|l| l.health),
                    ),
                    local_net_sel_priority: udsp.local_net_priority(net),
                    peer_net_seq: 0,
                    local_net_seq: 0,
                }
            })
            .collect();
        let params = LocalNiParams {
            numa_range: self.config.tunables.numa_range(),
            gpu_memory: false,
        };
        let path = select_path(&net_candidates, &local, &peers, params, |p, l| {
            udsp.prefers_local(&p.id, &l.id)
        })?;
        Some((path.local_ni.id, path.peer_ni.id))
    }
}
