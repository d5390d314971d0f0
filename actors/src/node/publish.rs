//! The LNet actor's side of the forwarding path ([`super::fast_path`]): the snapshot it
//! publishes, the sends it takes over, and the traffic the path heard, which the net
//! check counts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use actix::prelude::*;
use lnet::forward::{ForwardNi, ForwardRoute, ForwardTable, MrPeer};
use lnet::health::check::NiState;
use lnet::netcheck::Heard;
use lnet::route::GatewayAlive;
use lnet::time::Millis;
use lnet::{Net, Nid};

use super::fast_path::{Adopted, ForwardSnapshot, PathNi, PathPeerNi};
use super::peers::Peer;
use super::LnetActor;

/// When each local net was last heard from by the forwarding path, and how much of it
/// the net check has seen.
#[derive(Debug, Default)]
pub(super) struct PathHeard {
    nets: HashMap<Net, (Arc<AtomicU64>, u64)>,
}

impl LnetActor {
    /// Publishes what the forwarding path reads. Called whenever routes, gateway state,
    /// peers, local NIs or their status, or the routing setting change, and every router
    /// tick.
    pub(super) fn publish_forward(&mut self) {
        let routing = self.config.tunables.routing() && !self.routes.draining;
        let numa = &self.config.numa;
        let nis: Vec<ForwardNi> = self
            .nis
            .iter()
            .map(|(nid, e)| ForwardNi {
                nid: *nid,
                link_down: self.routes.link_down(nid),
                numa_distance: numa.ni_distance(None, e.numa_node),
            })
            .collect();
        let routes: Vec<ForwardRoute> = self
            .routes
            .table
            .iter()
            .map(|r| ForwardRoute {
                net: r.spec.net,
                gateway: r.spec.gateway,
                up: r.state.is_ok(),
                priority: r.spec.priority,
                hops: r.spec.hops,
            })
            .collect();
        let table = ForwardTable {
            nis,
            routes,
            udsp: self.config.udsp.clone(),
            numa_range: self.config.tunables.numa_range(),
        };
        let path_nis: rustc_hash::FxHashMap<Nid, Arc<PathNi>> = self
            .nis
            .iter()
            .map(|(nid, e)| {
                let quiet = e.view.borrow().state == NiState::Up
                    && !self.routes.advertised_down(nid, routing);
                let ni = PathNi {
                    cell: Arc::clone(&e.cell),
                    addr: e.addr.clone(),
                    sender: e.driver.sender(),
                    driver: Arc::clone(&e.driver),
                    quiet,
                };
                (*nid, Arc::new(ni))
            })
            .collect();
        let dead_gateways = self
            .routes
            .gateways
            .iter()
            .filter(|(_, g)| matches!(g.view.alive, GatewayAlive::Dead(_)))
            .map(|(n, _)| *n)
            .collect();
        for nid in self.nis.keys() {
            self.path_heard
                .nets
                .entry(nid.net)
                .or_insert_with(|| (Arc::new(AtomicU64::new(0)), 0));
        }
        let heard = self
            .path_heard
            .nets
            .iter()
            .map(|(net, (h, _))| (*net, Arc::clone(h)))
            .collect();
        self.path.snapshot.store(Arc::new(ForwardSnapshot {
            routing,
            table,
            nis: path_nis,
            dead_gateways,
            heard,
        }));
    }

    /// Peer `primary` changed (its NIDs, whether it is Multi-Rail, or which NIDs its
    /// peer gives DOWN), replacing the peers that held `replaced`: the forward decision
    /// sees it at once. Costs in the NIDs of the peers involved only.
    pub(super) fn publish_mr_peer(&self, primary: Nid, replaced: &[Nid]) {
        self.path.set_mr_peer(replaced, None);
        if let Some(p) = self.peers.get(&primary).filter(|p| p.multi_rail) {
            self.path.set_mr_peer(&p.nids, Some(&Arc::new(mr_peer(p))));
        }
    }

    /// Peer NIs `nids` belong to a known peer now: the forwarding path may use them.
    pub(super) fn publish_peer_nis(&self, nids: &[Nid]) {
        for nid in nids {
            if let Some(e) = self.peer_nis.get(nid) {
                let p = PathPeerNi {
                    cell: Arc::clone(&e.cell),
                    addr: e.addr.clone(),
                };
                self.path.add_peer_ni(*nid, p);
            }
        }
    }

    /// The forwarding path heard traffic on local nets since the last look: the net
    /// check counts it as the actor's own receive path would have.
    pub(super) fn path_heard(&mut self, ctx: &mut Context<Self>) {
        if !self.config.tunables.routing() {
            return;
        }
        let mut heard = Vec::new();
        for (net, (h, seen)) in &mut self.path_heard.nets {
            let at = h.load(Relaxed);
            if at <= *seen {
                continue;
            }
            *seen = at;
            heard.push((*net, Millis(at.saturating_sub(1))));
        }
        let mut up = false;
        for (net, when) in heard {
            up |= self.net_heard(net, when, Heard::Other);
        }
        if up {
            self.push_all(ctx);
        }
    }

    /// A send of the forwarding path that the actors must finish (a failure, or a health
    /// below the maximum): it becomes a forwarded message of this actor with that send
    /// as its attempt, and its completion is handled as any other.
    pub(super) fn adopt(&mut self, a: Adopted, ctx: &mut Context<Self>) {
        let id = self.forwarded(a.header, a.payload, a.ticket, a.received_at);
        if let Some(m) = self.msgs.get_mut(&id) {
            m.attempt = Some((a.done.id, a.done.ni, a.done.peer));
        }
        self.attempts.insert(a.done.id, id);
        self.on_completion(a.done, ctx);
    }
}

/// Peer `p` as the forward decision sees a Multi-Rail peer.
pub(super) fn mr_peer(p: &Peer) -> MrPeer {
    MrPeer {
        nids: p.nids.iter().map(|n| (*n, !p.down.contains(n))).collect(),
    }
}
