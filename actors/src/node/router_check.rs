//! The router checker and the net check: every [`ROUTER_TICK`] the gateways that are due
//! are pinged (and pushed to); while routing, each local net is checked for silence and
//! probed, links are set up or down, and every change of what this node advertises is
//! pushed to its peers.

use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use lnd::RxMessage;
use lnet::netcheck::{Heard, NetChange, NetCheckMode};
use lnet::ping::{INTERFACES_MAX_DEFAULT, RESERVED_PORTAL};
use lnet::route::{GatewayAlive, GatewayDown};
use lnet::time::Millis;
use lnet::{Features, Message as LnetMsg, Net, Nid, PingInfo, PING_MATCHBITS};

use super::discovery::{ping_get, push_request};
use super::error::NodeError;
use super::txn::{MsgEvent, MsgEventKind, StartTxn};
use super::{bump, LnetActor};
use crate::events::{Event, NetStatusReason, RouteCause};

/// How often the router checker and the net check look at the clock.
pub(super) const ROUTER_TICK: Duration = Duration::from_millis(100);

/// [`ROUTER_TICK`] in milliseconds.
fn tick_ms() -> u64 {
    u64::try_from(ROUTER_TICK.as_millis()).unwrap_or(u64::MAX)
}

impl LnetActor {
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
        if self.net_heard(rx.ni.net, now, what) {
            self.push_all(ctx);
        }
    }

    /// The net check counts `what`, heard on local net `net` at `at`: whether the net
    /// came UP with it (published as an event; the caller pushes).
    pub(super) fn net_heard(&mut self, net: Net, at: Millis, what: Heard) -> bool {
        let mode = self.routes.net_check;
        let change = self
            .routes
            .nets
            .get_mut(&net)
            .and_then(|l| l.heard(at, what, mode));
        if change != Some(NetChange::Up) {
            return false;
        }
        self.events.publish(Event::NetStatus {
            at: self.clock.now(),
            net,
            up: true,
            reason: NetStatusReason::Heard,
        });
        true
    }
}

impl LnetActor {
    /// Every [`ROUTER_TICK`]: pings the gateways that are due, and (while routing)
    /// checks and probes the local nets.
    pub(super) fn router_tick(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let since = self
            .routes
            .last_tick
            .replace(now)
            .map(|t| now.saturating_sub(t));
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
        // A check that ran more than a tick late could not count what arrived meanwhile
        // (this node was starved of CPU, or busy): the time it missed is not silence.
        if let Some(missed) = since
            .filter(|s| s.as_millis() > 2 * tick_ms())
            .map(|s| s.saturating_sub(Millis(tick_ms())))
        {
            for l in self.routes.nets.values_mut() {
                l.unobserved(now, missed);
            }
        }
        // A net whose peer's message this node holds while an LND waits on it (for a
        // router buffer, a credit of the next hop, ...) was heard, and the peer may be
        // unable to send more until the node reads on: such a net is not silent.
        let mut changed = false;
        for net in self.held.nets() {
            changed |= self.net_heard(net, now, Heard::Other);
        }
        let mode = self.routes.net_check;
        let nets: Vec<Net> = self.routes.nets.keys().copied().collect();
        for net in nets {
            let peers = self.peer_nis.keys().filter(|p| p.net == net).count();
            let Some(l) = self.routes.nets.get_mut(&net) else {
                continue;
            };
            let tick = l.tick(now, mode, peers);
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
            if let Some(peer) = tick.probe {
                self.probe_net(net, peer, ctx);
            }
        }
        if changed {
            self.push_all(ctx);
        }
    }

    /// Pings the `index`th (in NID order, modulo their number) known peer NI on quiet net
    /// `net`, from an NI on that net, waiting one probe interval for the answer.
    pub(super) fn probe_net(&mut self, net: Net, index: usize, ctx: &mut Context<Self>) {
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
        let Some(peer) = index
            .checked_rem(peers.len())
            .and_then(|i| peers.get(i))
            .copied()
        else {
            return;
        };
        let timeout = match self.routes.net_check {
            NetCheckMode::Active { probe_interval, .. } => probe_interval,
            _ => Millis::from_secs(1),
        };
        let req = StartTxn {
            dest: peer,
            msg: ping_get(),
            payload: Bytes::new(),
            timeout: Duration::from_millis(timeout.as_millis().max(1)),
            want_response: true,
            src: None,
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
    pub(super) fn check_gateway(&mut self, gw: Nid, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let timeout = Duration::from_millis(self.routes.check.ping_timeout.as_millis().max(1));
        let req = StartTxn {
            dest: gw,
            msg: ping_get(),
            payload: Bytes::new(),
            timeout,
            want_response: true,
            src: None,
        };
        let Some(g) = self.routes.gateways.get_mut(&gw) else {
            return;
        };
        g.last_check = Some(now);
        let pushes = g.pushes;
        match self.start_txn(req, None, ctx) {
            Ok(txn) => {
                if let Some(g) = self.routes.gateways.get_mut(&gw) {
                    g.checking = true;
                }
                ctx.spawn(txn.finish().into_actor(self).map(move |events, act, ctx| {
                    act.gateway_checked(gw, pushes, events, ctx);
                }));
            }
            Err(e) => tracing::debug!(%gw, %e, "gateway ping not sent"),
        }
    }

    /// The ping of gateway `gw` ended with `events`; `pushes`: the gateway's pushes
    /// received when it was sent.
    pub(super) fn gateway_checked(
        &mut self,
        gw: Nid,
        pushes: u64,
        events: Vec<MsgEvent>,
        ctx: &mut Context<Self>,
    ) {
        let mut pushed_since = false;
        if let Some(g) = self.routes.gateways.get_mut(&gw) {
            g.checking = false;
            pushed_since = g.pushes != pushes;
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
                // A push that came while the ping was out is at least as new as the
                // reply (the gateway may have built the reply before a change it pushed):
                // the push's view stands.
                if !pushed_since {
                    self.learn(info.clone(), gw);
                    self.gateway_info(&info, gw, RouteCause::PingReply);
                }
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
    pub(super) fn push_to(&mut self, dest: Nid, ctx: &mut Context<Self>) {
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
}

impl LnetActor {
    /// Whether some NI on `net` has its link up.
    pub(super) fn net_has_link(&self, net: Net) -> bool {
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

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct SetLink {
    pub(super) nid: Nid,
    pub(super) up: bool,
}

impl Handler<SetLink> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: SetLink, ctx: &mut Context<Self>) -> Self::Result {
        if !self.nis.contains_key(&m.nid) {
            return Err(NodeError::NoSuchNi { nid: m.nid });
        }
        self.set_link(m.nid, m.up, ctx);
        self.publish_forward();
        Ok(())
    }
}
