//! Routes, gateways and forwarding, as parts of the LNet actor.
//!
//! * As a user of routes: the route table, the view of each gateway (from its ping
//!   replies and pushes, and from send failures), the router checker that pings and
//!   pushes to each gateway on `alive_router_check_interval`, and the choice of a gateway
//!   for a peer on a remote net.
//! * As a router: forwarding a message to its destination or to the next gateway, keeping
//!   its header as it came; dropping what cannot be routed, with a counter and an event;
//!   and the status of each local net it advertises in its ping info (silent nets and
//!   links down are DOWN), pushed to its peers on every change.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use lnd::lnd::PeerDown;
use lnd::RxMessage;
use lnet::health::HealthStatus;
use lnet::netcheck::{Heard, NetChange, NetCheckMode, NetLiveness};
use lnet::ping::{INTERFACES_MAX_DEFAULT, RESERVED_PORTAL};
use lnet::route::{
    check_route, route_status, GatewayAlive, GatewayDown, GatewayPing, GatewayView, RouteDown,
    RouteSpec, RouterCheck,
};
use lnet::selection::{best_route, RouteCandidate};
use lnet::time::Millis;
use lnet::{Features, Message as LnetMsg, Net, Nid, PingInfo, PING_MATCHBITS};

use super::{
    bump, ping_get, push_request, LnetActor, MsgEvent, MsgEventKind, Node, NodeError, OutMsg,
    StartTxn,
};
use crate::events::{Event, ForwardDrop, NetStatusReason, RouteCause};
use crate::router::{Release, RoutingView, ShowBuffers, Ticket};

/// How often the router checker and the net check look at the clock.
pub(super) const ROUTER_TICK: Duration = Duration::from_millis(100);

struct RouteEntry {
    spec: RouteSpec,
    state: Result<(), RouteDown>,
}

struct GatewayEntry {
    view: GatewayView,
    checking: bool,
    last_check: Option<Millis>,
    seq: u64,
}

/// The routing state of a node.
pub(super) struct Routes {
    table: Vec<RouteEntry>,
    gateways: HashMap<Nid, GatewayEntry>,
    nets: BTreeMap<Net, NetLiveness>,
    link_down: HashSet<Nid>,
    check: RouterCheck,
    net_check: NetCheckMode,
    probe_rr: usize,
    draining: bool,
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
            probe_rr: 0,
            draining: false,
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
    /// Whether this node forwards.
    pub enabled: bool,
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
                        (v.health, v.tx_credits)
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

    /// Forwards a message for another node, holding router buffer `ticket`.
    pub(super) fn forward(&mut self, rx: RxMessage, ticket: Ticket) {
        let h = rx.header;
        let dest = h.dest_nid;
        if dest.net == rx.ni.net {
            // It should have gone direct: a protocol error the kernel refuses too.
            tracing::warn!(src = %h.src_nid, %dest, via = %rx.from.nid, "forward on the destination's own net refused");
            bump(&mut self.counters, "drop_count");
            self.router.do_send(Release(ticket));
            return;
        }
        let id = self.next();
        let deadline = self.clock.now().saturating_add(Millis::from_secs(u64::from(
            self.config.tunables.transaction_timeout(),
        )));
        let pin_peer = self.has_net(dest.net).then_some(dest);
        self.msgs.insert(
            id,
            OutMsg {
                header: h,
                payload: rx.payload,
                target: dest,
                txn: None,
                deadline,
                retries: 0,
                recovery_ping: false,
                pin_local: None,
                pin_peer,
                attempt: None,
                abandoned: false,
                forward: Some(ticket),
            },
        );
        self.dispatch(id);
    }

    /// A message being forwarded is dropped: counted, and an event says why.
    pub(super) fn drop_forward(&mut self, id: u64, reason: ForwardDrop) {
        let Some(msg) = self.retire(id) else {
            return;
        };
        bump(&mut self.counters, "drop_count");
        let len = u64::try_from(msg.payload.len()).unwrap_or(u64::MAX);
        let n = self.counters.entry("drop_length").or_default();
        *n = n.saturating_add(len);
        self.events.publish(Event::ForwardDropped {
            at: self.clock.now(),
            src: msg.header.src_nid,
            dest: msg.header.dest_nid,
            reason,
        });
    }

    /// Why a forwarded message for `net` has no path.
    pub(super) fn no_path(&self, net: Net) -> ForwardDrop {
        self.routes.no_path_reason(net, self.has_net(net))
    }

    /// Something arrived: a routed message from a dead gateway revives it; while routing,
    /// the net it came on is alive.
    pub(super) fn heard(&mut self, rx: &RxMessage, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let from = rx.from.nid;
        if rx.header.src_nid.net != from.net {
            if let Some(g) = self.routes.gateways.get_mut(&from) {
                if matches!(g.view.alive, GatewayAlive::Dead(_)) {
                    g.view.alive = GatewayAlive::Alive;
                    self.recompute_routes(RouteCause::Traffic);
                }
            }
        }
        if !self.config.tunables.routing() {
            return;
        }
        let ping = matches!(
            rx.header.msg,
            LnetMsg::Get {
                ptl_index: RESERVED_PORTAL,
                match_bits: PING_MATCHBITS,
                ..
            }
        ) && !self.is_local(&rx.header.src_nid);
        let what = if ping { Heard::Ping } else { Heard::Other };
        let mode = self.routes.net_check;
        let net = rx.ni.net;
        let change = self
            .routes
            .nets
            .get_mut(&net)
            .and_then(|l| l.heard(now, what, mode));
        if change == Some(NetChange::Up) {
            self.events.publish(Event::NetStatus {
                at: now,
                net,
                up: true,
                reason: NetStatusReason::Heard,
            });
            self.push_all(ctx);
        }
    }

    /// The LND lost a peer: a gateway among them is dead until it answers again.
    pub(super) fn on_peer_down(&mut self, down: PeerDown) {
        if let Some(g) = self.routes.gateways.get_mut(&down.peer) {
            g.view.alive = GatewayAlive::Dead(GatewayDown::Unreachable(down.status));
            self.recompute_routes(RouteCause::PeerDown);
        }
    }

    /// Every [`ROUTER_TICK`]: pings the gateways that are due, and (while routing)
    /// checks and probes the local nets.
    pub(super) fn router_tick(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let interval = self.routes.check.interval;
        if interval > Millis::ZERO {
            let due: Vec<Nid> = self
                .routes
                .gateways
                .iter()
                .filter(|(_, g)| {
                    !g.checking
                        && g.last_check
                            .is_none_or(|t| now.saturating_sub(t) >= interval)
                })
                .map(|(n, _)| *n)
                .collect();
            for gw in due {
                self.check_gateway(gw, ctx);
            }
        }
        if !self.config.tunables.routing() {
            return;
        }
        let mode = self.routes.net_check;
        let nets: Vec<Net> = self.routes.nets.keys().copied().collect();
        let mut changed = false;
        for net in nets {
            let can_probe = self.peer_nis.keys().any(|p| p.net == net);
            let Some(l) = self.routes.nets.get_mut(&net) else {
                continue;
            };
            let tick = l.tick(now, mode, can_probe);
            let silent = now.saturating_sub(l.last_heard());
            if tick.down {
                changed = true;
                self.events.publish(Event::NetStatus {
                    at: now,
                    net,
                    up: false,
                    reason: NetStatusReason::Silent {
                        for_ms: silent.as_millis(),
                    },
                });
            }
            if tick.probe {
                self.probe_net(net, ctx);
            }
        }
        if changed {
            self.push_all(ctx);
        }
    }

    /// Pings a known peer NI on silent net `net` (round robin), from an NI on that net.
    fn probe_net(&mut self, net: Net, ctx: &mut Context<Self>) {
        let mut peers: Vec<Nid> = self
            .peer_nis
            .keys()
            .filter(|p| p.net == net)
            .copied()
            .collect();
        peers.sort();
        let Some(ni) = self.nis.keys().find(|n| n.net == net).copied() else {
            return;
        };
        if peers.is_empty() {
            return;
        }
        self.routes.probe_rr = self.routes.probe_rr.wrapping_add(1);
        let Some(peer) = peers.get(self.routes.probe_rr % peers.len()).copied() else {
            return;
        };
        let timeout = match self.routes.net_check {
            NetCheckMode::Active { down_after, .. } => down_after,
            _ => Millis::from_secs(1),
        };
        let req = StartTxn {
            dest: peer,
            msg: ping_get(),
            payload: Bytes::new(),
            timeout: Duration::from_millis(timeout.as_millis().max(1)),
            want_response: true,
        };
        bump(&mut self.counters, "net_probes");
        // The reply itself marks the net alive (it arrives on the net).
        let _ = self.start_txn(
            req,
            Some((lnet::recovery::RecoveryKind::LocalNi, Some(ni), Some(peer))),
            ctx,
        );
    }

    /// Pings gateway `gw`; the reply (or its absence) updates its view.
    fn check_gateway(&mut self, gw: Nid, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let timeout = Duration::from_millis(self.routes.check.ping_timeout.as_millis().max(1));
        let req = StartTxn {
            dest: gw,
            msg: ping_get(),
            payload: Bytes::new(),
            timeout,
            want_response: true,
        };
        let Some(g) = self.routes.gateways.get_mut(&gw) else {
            return;
        };
        g.last_check = Some(now);
        match self.start_txn(req, None, ctx) {
            Ok(txn) => {
                if let Some(g) = self.routes.gateways.get_mut(&gw) {
                    g.checking = true;
                }
                ctx.spawn(
                    txn.finish()
                        .into_actor(self)
                        .map(move |events, act, ctx| act.gateway_checked(gw, events, ctx)),
                );
            }
            Err(e) => tracing::debug!(%gw, %e, "gateway ping not sent"),
        }
    }

    fn gateway_checked(&mut self, gw: Nid, events: Vec<MsgEvent>, ctx: &mut Context<Self>) {
        if let Some(g) = self.routes.gateways.get_mut(&gw) {
            g.checking = false;
        }
        let info = events
            .last()
            .filter(|e| e.kind == MsgEventKind::Reply && e.status.is_ok())
            .and_then(|e| e.payload.as_ref())
            .map(|p| PingInfo::decode_validated(p, INTERFACES_MAX_DEFAULT));
        match info {
            Some(Ok(info)) => {
                let push = info
                    .features
                    .contains(Features::MULTI_RAIL | Features::DISCOVERY);
                self.learn(info.clone(), gw);
                self.gateway_info(&info, gw, RouteCause::PingReply);
                if push {
                    self.push_to(gw, ctx);
                }
            }
            Some(Err(e)) => {
                // An invalid reply does not complete the check: ask again next tick.
                tracing::debug!(%gw, %e, "gateway ping info invalid");
                if let Some(g) = self.routes.gateways.get_mut(&gw) {
                    g.last_check = None;
                }
            }
            None => {
                let why = match events.last().map(|e| e.status) {
                    Some(super::Outcome::Failed {
                        reason: super::FailReason::Timeout,
                        ..
                    })
                    | None => GatewayDown::NoReply,
                    Some(super::Outcome::Failed { status, .. }) => GatewayDown::SendFailed(status),
                    Some(super::Outcome::Ok) => GatewayDown::NoReply,
                };
                if let Some(g) = self.routes.gateways.get_mut(&gw) {
                    g.view.alive = GatewayAlive::Dead(why);
                }
                self.recompute_routes(RouteCause::PingFailed);
            }
        }
    }

    /// Pushes this node's ping info to `dest` (discovery push; nobody waits for the ACK).
    fn push_to(&mut self, dest: Nid, ctx: &mut Context<Self>) {
        let payload = match self.own_info().encode() {
            Ok(p) => Bytes::from(p),
            Err(e) => {
                tracing::warn!(%e, "own ping info does not encode");
                return;
            }
        };
        let timeout = Duration::from_millis(self.routes.check.ping_timeout.as_millis().max(1));
        let req = push_request(dest, payload, timeout);
        if let Err(e) = self.start_txn(req, None, ctx) {
            tracing::debug!(%dest, %e, "push to gateway not sent");
        }
    }

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
    }

    /// Whether some NI on `net` has its link up.
    fn net_has_link(&self, net: Net) -> bool {
        self.nis
            .keys()
            .any(|n| n.net == net && !self.routes.link_down(n))
    }

    /// The NI's link went down or came up.
    pub(super) fn set_link(&mut self, nid: Nid, up: bool, ctx: &mut Context<Self>) {
        let changed = if up {
            self.routes.link_down.remove(&nid)
        } else {
            self.routes.link_down.insert(nid)
        };
        if !changed {
            return;
        }
        self.events.publish(Event::NetStatus {
            at: self.clock.now(),
            net: nid.net,
            up,
            reason: NetStatusReason::Link,
        });
        self.push_all(ctx);
    }
}

// ---------------------------------------------------------------------------------------
// Messages and handlers.

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
struct AddRoute(RouteSpec);

#[derive(Message)]
#[rtype(result = "bool")]
struct DelRoute {
    net: Net,
    gateway: Nid,
}

#[derive(Message)]
#[rtype(result = "Vec<RouteView>")]
struct ListRoutes;

#[derive(Message)]
#[rtype(result = "(bool, Vec<NetAdvert>, Addr<crate::router::RouterActor>)")]
struct RoutingState;

#[derive(Message)]
#[rtype(result = "usize")]
struct StartDrain;

#[derive(Message)]
#[rtype(result = "usize")]
struct ForwardsInFlight;

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
struct SetLink {
    nid: Nid,
    up: bool,
}

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
                up: !(routing && l.is_down()) && self.net_has_link(*net),
                last_heard: l.last_heard(),
            })
            .collect();
        MessageResult((routing, nets, self.router.clone()))
    }
}

impl Handler<SetLink> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: SetLink, ctx: &mut Context<Self>) -> Self::Result {
        if !self.nis.contains_key(&m.nid) {
            return Err(NodeError::NoSuchNi { nid: m.nid });
        }
        self.set_link(m.nid, m.up, ctx);
        Ok(())
    }
}

impl Handler<StartDrain> for LnetActor {
    type Result = usize;

    fn handle(&mut self, _: StartDrain, ctx: &mut Context<Self>) -> usize {
        if !self.routes.draining {
            self.routes.draining = true;
            for net in self.routes.nets.keys() {
                self.events.publish(Event::NetStatus {
                    at: self.clock.now(),
                    net: *net,
                    up: false,
                    reason: NetStatusReason::Draining,
                });
            }
            self.push_all(ctx);
        }
        self.forwards_in_flight()
    }
}

impl Handler<ForwardsInFlight> for LnetActor {
    type Result = usize;

    fn handle(&mut self, _: ForwardsInFlight, _ctx: &mut Context<Self>) -> usize {
        self.forwards_in_flight()
    }
}

impl LnetActor {
    fn forwards_in_flight(&self) -> usize {
        self.msgs.values().filter(|m| m.forward.is_some()).count()
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Forwarded messages under way when the drain began.
    pub in_flight_at_start: usize,
    /// Forwarded messages still under way when it ended (0 unless the bound was hit).
    pub left: usize,
}

impl Node {
    /// Drains the node before it stops: every NI is advertised DOWN and routing disabled
    /// in its ping info, which is pushed to its peers at once so that they route around
    /// it; it keeps forwarding for `grace` while they move, then waits (at most `bound`)
    /// for the messages it is forwarding to finish.
    pub async fn drain(&self, grace: Duration, bound: Duration) -> Result<Drained, NodeError> {
        let in_flight_at_start = self.addr.send(StartDrain).await?;
        tokio::time::sleep(grace).await;
        let step = Duration::from_millis(20);
        let mut waited = Duration::ZERO;
        loop {
            let left = self.addr.send(ForwardsInFlight).await?;
            if left == 0 || waited >= bound {
                return Ok(Drained {
                    in_flight_at_start,
                    left,
                });
            }
            tokio::time::sleep(step).await;
            waited += step;
        }
    }

    /// Adds a route (`lnetctl route add --net --gateway [--hop] [--priority]`): checked
    /// against this node's nets and routes; its gateway is checked at once.
    pub async fn add_route(&self, spec: RouteSpec) -> Result<(), NodeError> {
        self.addr.send(AddRoute(spec)).await?
    }

    /// Deletes a route; whether it existed.
    pub async fn del_route(&self, net: Net, gateway: Nid) -> Result<bool, NodeError> {
        Ok(self.addr.send(DelRoute { net, gateway }).await?)
    }

    /// The routes and their states (`lnetctl route show -v`).
    pub async fn routes(&self) -> Result<Vec<RouteView>, NodeError> {
        Ok(self.addr.send(ListRoutes).await?)
    }

    /// Router buffers, credits and the advertised status of each net (`lnetctl routing
    /// show`).
    pub async fn routing_show(&self) -> Result<RoutingShow, NodeError> {
        let (enabled, nets, router) = self.addr.send(RoutingState).await?;
        let buffers = router.send(ShowBuffers).await?;
        Ok(RoutingShow {
            enabled,
            buffers,
            nets,
        })
    }

    /// The link of local NI `nid` went down (`up` false) or came back: while down, the
    /// NI is advertised DOWN and not used, and the change is pushed to the peers at once.
    pub async fn set_ni_link(&self, nid: Nid, up: bool) -> Result<(), NodeError> {
        self.addr.send(SetLink { nid, up }).await?
    }
}
