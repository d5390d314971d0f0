//! Routes and gateways, as a user of routes: the route table, the view of each gateway
//! (from its ping replies and pushes, and from send failures), the choice of a gateway
//! for a peer on a remote net, and `route show` / `routing show`.

use std::collections::{BTreeMap, HashMap, HashSet};

use actix::prelude::*;
use lnd::lnd::PeerDown;
use lnet::health::HealthStatus;
use lnet::netcheck::{NetCheckMode, NetLiveness};
use lnet::route::{
    check_route, route_status, GatewayAlive, GatewayDown, GatewayPing, GatewayView, RouteDown,
    RouteSpec, RouterCheck,
};
use lnet::selection::{best_route, RouteCandidate};
use lnet::time::Millis;
use lnet::{Net, Nid, PingInfo};

use super::error::NodeError;
use super::LnetActor;
use crate::events::{Event, ForwardDrop, RouteCause};
use crate::router::RoutingView;

pub(super) struct RouteEntry {
    pub(super) spec: RouteSpec,
    pub(super) state: Result<(), RouteDown>,
}

pub(super) struct GatewayEntry {
    pub(super) view: GatewayView,
    pub(super) checking: bool,
    pub(super) last_check: Option<Millis>,
    pub(super) seq: u64,
    /// Pushes of the gateway's ping info received: a ping sent before the last one was
    /// answered with older info.
    pub(super) pushes: u64,
}

/// The routing state of a node.
pub(super) struct Routes {
    pub(super) table: Vec<RouteEntry>,
    pub(super) gateways: HashMap<Nid, GatewayEntry>,
    pub(super) nets: BTreeMap<Net, NetLiveness>,
    pub(super) link_down: HashSet<Nid>,
    pub(super) check: RouterCheck,
    pub(super) net_check: NetCheckMode,
    pub(super) draining: bool,
    /// When the router checker last ran.
    pub(super) last_tick: Option<Millis>,
}

impl Routes {
    pub(super) fn new(check: RouterCheck, net_check: NetCheckMode) -> Routes {
        Routes {
            table: Vec::new(),
            gateways: HashMap::new(),
            nets: BTreeMap::new(),
            link_down: HashSet::new(),
            check,
            net_check,
            draining: false,
            last_tick: None,
        }
    }

    /// Whether NI `nid`'s link is down.
    pub(super) fn link_down(&self, nid: &Nid) -> bool {
        self.link_down.contains(nid)
    }

    /// Whether `nid` is a gateway of some route.
    pub(super) fn is_gateway(&self, nid: &Nid) -> bool {
        self.gateways.contains_key(nid)
    }

    /// Gateway `gw` was picked for a message (round robin among equals).
    pub(super) fn used(&mut self, gw: Nid) {
        if let Some(g) = self.gateways.get_mut(&gw) {
            g.seq = g.seq.wrapping_add(1);
        }
    }

    /// Why a forwarded message for `net` found no path.
    pub(super) fn no_path_reason(&self, net: Net, local: bool) -> ForwardDrop {
        if local {
            ForwardDrop::SendFailed(HealthStatus::LocalNoRoute)
        } else if self.table.iter().any(|r| r.spec.net == net) {
            ForwardDrop::NoLiveRoute
        } else {
            ForwardDrop::NoRoute
        }
    }

    /// A net got its first NI at `now`.
    pub(super) fn net_added(&mut self, net: Net, now: Millis) {
        self.nets
            .entry(net)
            .or_insert_with(|| NetLiveness::new(now));
    }

    /// NI `nid` was removed; `last_on_net`: no NI is left on its net.
    pub(super) fn ni_removed(&mut self, nid: &Nid, last_on_net: bool) {
        self.link_down.remove(nid);
        if last_on_net {
            self.nets.remove(&nid.net);
        }
    }

    /// Whether the node is draining: every NI advertised DOWN, routing disabled in its
    /// ping info.
    pub(super) fn draining(&self) -> bool {
        self.draining
    }

    /// Whether NI `nid` is advertised DOWN for its link or (while routing) its net.
    pub(super) fn advertised_down(&self, nid: &Nid, routing: bool) -> bool {
        self.draining
            || self.link_down.contains(nid)
            || (routing && self.nets.get(&nid.net).is_some_and(NetLiveness::is_down))
    }

    /// Starts the silence of every net afresh (routing was just turned on).
    pub(super) fn restart_nets(&mut self, now: Millis) {
        for l in self.nets.values_mut() {
            l.restart(now);
        }
    }
}

/// A route as `route show -v` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteView {
    /// The route.
    pub spec: RouteSpec,
    /// `None`: up; else why it is down.
    pub down: Option<RouteDown>,
    /// Whether the gateway answers.
    pub gateway: GatewayAlive,
    /// Whether the gateway's ping info lists an NI on the remote net (`single-hop`);
    /// `None` before its first ping.
    pub single_hop: Option<bool>,
}

/// What this node advertises for one of its local nets while it routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetAdvert {
    /// The net.
    pub net: Net,
    /// Advertised UP.
    pub up: bool,
    /// When something that counts as a sign of life last arrived on it.
    pub last_heard: Millis,
}

/// `lnetctl routing show`, plus what this node advertises per net.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingShow {
    /// Whether this node forwards (the `routing` setting).
    pub enabled: bool,
    /// Whether it is draining: out of service, every NI advertised DOWN and routing
    /// disabled in its ping info, while it still forwards what it is sent.
    pub draining: bool,
    /// Buffers and credits.
    pub buffers: RoutingView,
    /// Per local net: its advertised status.
    pub nets: Vec<NetAdvert>,
}
impl LnetActor {
    /// The gateway and the header destination for a peer with `peer_nids`, none on a
    /// local net: the best live route to one of their nets.
    pub(super) fn route_for(&self, peer_nids: &[Nid]) -> Option<(Nid, Nid)> {
        let mut candidates = Vec::new();
        for dest in peer_nids.iter().filter(|n| !self.has_net(n.net)) {
            for r in self.routes.table.iter().filter(|r| r.spec.net == dest.net) {
                let gw = r.spec.gateway;
                let (health, credits) = match self.peer_nis.get(&gw) {
                    Some(e) => {
                        let v = e.view.borrow();
                        (v.health, e.cell.credits())
                    }
                    None => (lnet::health::HealthValue::MAX, 0),
                };
                let usable = self
                    .nis
                    .keys()
                    .any(|n| n.net == gw.net && !self.routes.link_down(n));
                candidates.push(RouteCandidate {
                    id: (gw, *dest),
                    alive: r.state.is_ok() && usable,
                    preferred: self.config.udsp.prefers_gateway(dest, &gw),
                    priority: r.spec.priority,
                    hops: r.spec.hops,
                    gateway_health: health,
                    gateway_tx_queued_bytes: 0,
                    gateway_tx_credits: credits,
                    seq: self.routes.gateways.get(&gw).map_or(0, |g| g.seq),
                });
            }
        }
        best_route(&candidates).map(|c| c.id)
    }
}

impl LnetActor {
    /// The LND lost a peer: its cached NI status is DOWN (the kernel's `lnet_notify` with
    /// `auto_down`) until it is heard from again, and a gateway among them is dead until
    /// it answers again.
    pub(super) fn on_peer_down(&mut self, down: PeerDown) {
        if let Some(e) = self.peer_nis.get(&down.peer) {
            e.cell.set_status_up(false);
        }
        if let Some(g) = self.routes.gateways.get_mut(&down.peer) {
            g.view.alive = GatewayAlive::Dead(GatewayDown::Unreachable(down.status));
            self.recompute_routes(RouteCause::PeerDown);
        }
    }
}

impl LnetActor {
    /// Ping info from `from` (a ping reply or a push): if it is one of our gateways, its
    /// view changes and the routes through it are recomputed.
    pub(super) fn gateway_info(&mut self, info: &PingInfo, from: Nid, cause: RouteCause) {
        let nids: HashSet<Nid> = info
            .statuses()
            .map(|(n, _)| n)
            .chain(std::iter::once(from))
            .collect();
        let ping = GatewayPing::from_info(info);
        let mut any = false;
        for (gw, g) in self.routes.gateways.iter_mut() {
            if nids.contains(gw) {
                g.view.alive = GatewayAlive::Alive;
                g.view.ping = Some(ping.clone());
                if cause == RouteCause::Push {
                    g.pushes = g.pushes.wrapping_add(1);
                }
                any = true;
            }
        }
        if any {
            self.recompute_routes(cause);
        }
    }

    /// Recomputes every route's state; each change is an event.
    pub(super) fn recompute_routes(&mut self, cause: RouteCause) {
        let now = self.clock.now();
        let check = self.routes.check;
        let mut changes = Vec::new();
        for r in &mut self.routes.table {
            let view = self
                .routes
                .gateways
                .get(&r.spec.gateway)
                .map(|g| g.view.clone())
                .unwrap_or_else(GatewayView::unchecked);
            let state = route_status(&r.spec, &view, &check);
            if state != r.state {
                r.state = state;
                changes.push((r.spec, state.err()));
            }
        }
        for (spec, down) in changes {
            self.events.publish(Event::Route {
                at: now,
                net: spec.net,
                gateway: spec.gateway,
                down,
                cause,
            });
        }
        self.publish_forward();
    }
}

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct AddRoute(pub(super) RouteSpec);

#[derive(Message)]
#[rtype(result = "bool")]
pub(super) struct DelRoute {
    pub(super) net: Net,
    pub(super) gateway: Nid,
}

#[derive(Message)]
#[rtype(result = "Vec<RouteView>")]
pub(super) struct ListRoutes;

#[derive(Message)]
#[rtype(result = "(bool, bool, Vec<NetAdvert>, Addr<crate::router::RouterActor>)")]
pub(super) struct RoutingState;

impl Handler<AddRoute> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, AddRoute(spec): AddRoute, ctx: &mut Context<Self>) -> Self::Result {
        let nets: Vec<Net> = self.nis.keys().map(|n| n.net).collect();
        let nids: Vec<Nid> = self.nis.keys().copied().collect();
        let specs: Vec<RouteSpec> = self.routes.table.iter().map(|r| r.spec).collect();
        check_route(&spec, &nets, &nids, &specs).map_err(|e| NodeError::Route { error: e })?;
        let gw = spec.gateway;
        let entry = self.routes.gateways.entry(gw).or_insert(GatewayEntry {
            view: GatewayView::unchecked(),
            checking: false,
            last_check: None,
            seq: 0,
            pushes: 0,
        });
        let state = route_status(&spec, &entry.view, &self.routes.check);
        self.routes.table.push(RouteEntry { spec, state });
        self.events.publish(Event::Route {
            at: self.clock.now(),
            net: spec.net,
            gateway: gw,
            down: state.err(),
            cause: RouteCause::Added,
        });
        // Adding a route checks its gateway at once.
        if self.routes.check.interval > Millis::ZERO {
            let checking = self.routes.gateways.get(&gw).is_some_and(|g| g.checking);
            if !checking {
                self.check_gateway(gw, ctx);
            }
        }
        Ok(())
    }
}

impl Handler<DelRoute> for LnetActor {
    type Result = bool;

    fn handle(&mut self, m: DelRoute, _ctx: &mut Context<Self>) -> bool {
        let before = self.routes.table.len();
        self.routes
            .table
            .retain(|r| !(r.spec.net == m.net && r.spec.gateway == m.gateway));
        let removed = self.routes.table.len() != before;
        if !self
            .routes
            .table
            .iter()
            .any(|r| r.spec.gateway == m.gateway)
        {
            self.routes.gateways.remove(&m.gateway);
        }
        removed
    }
}

impl Handler<ListRoutes> for LnetActor {
    type Result = MessageResult<ListRoutes>;

    fn handle(&mut self, _: ListRoutes, _ctx: &mut Context<Self>) -> MessageResult<ListRoutes> {
        MessageResult(
            self.routes
                .table
                .iter()
                .map(|r| {
                    let g = self.routes.gateways.get(&r.spec.gateway);
                    RouteView {
                        spec: r.spec,
                        down: r.state.err(),
                        gateway: g.map_or(GatewayAlive::Unchecked, |g| g.view.alive),
                        single_hop: g
                            .and_then(|g| g.view.ping.as_ref())
                            .map(|p| p.nis.iter().any(|(n, _)| n.net == r.spec.net)),
                    }
                })
                .collect(),
        )
    }
}

impl Handler<RoutingState> for LnetActor {
    type Result = MessageResult<RoutingState>;

    fn handle(&mut self, _: RoutingState, _ctx: &mut Context<Self>) -> MessageResult<RoutingState> {
        let routing = self.config.tunables.routing();
        let nets = self
            .routes
            .nets
            .iter()
            .map(|(net, l)| NetAdvert {
                net: *net,
                up: !(self.routes.draining || routing && l.is_down()) && self.net_has_link(*net),
                last_heard: l.last_heard(),
            })
            .collect();
        MessageResult((routing, self.routes.draining, nets, self.router.clone()))
    }
}
