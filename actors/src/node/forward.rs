//! Forwarding, as a router: a message for another node goes on to its destination or
//! to the next gateway with its header as it came, or is dropped, counted and reported;
//! and draining: taking the node out of service (before it stops, or at run time) and
//! back.

use actix::prelude::*;
use bytes::Bytes;
use lnd::RxMessage;
use lnet::time::Millis;
use lnet::{Header, Net};

use super::{bump, LnetActor, OutMsg};
use crate::events::{Event, ForwardDrop, NetStatusReason};
use crate::router::Ticket;

impl LnetActor {
    /// Forwards a message for another node, holding router buffer `ticket`.
    pub(super) fn forward(&mut self, rx: RxMessage, ticket: Ticket) {
        let h = rx.header;
        let dest = h.dest_nid;
        if dest.net == rx.ni.net {
            // It should have gone direct: a protocol error the kernel refuses too.
            tracing::warn!(src = %h.src_nid, %dest, via = %rx.from.nid, "forward on the destination's own net refused");
            bump(&mut self.counters, "drop_count");
            self.path.pools.release(ticket);
            return;
        }
        self.path
            .counts
            .by_actor
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = self.clock.now();
        let id = self.forwarded(h, rx.payload, ticket, now);
        self.dispatch(id);
    }

    /// A message to forward, received at `received_at` and holding router buffer
    /// `ticket`, becomes one of this actor's messages (its header goes on as it came);
    /// its id.
    pub(super) fn forwarded(
        &mut self,
        header: Header,
        payload: Bytes,
        ticket: Ticket,
        received_at: Millis,
    ) -> u64 {
        let id = self.next();
        let deadline = received_at.saturating_add(Millis::from_secs(u64::from(
            self.config.tunables.transaction_timeout(),
        )));
        let dest = header.dest_nid;
        let pin_peer = self.has_net(dest.net).then_some(dest);
        self.msgs.insert(
            id,
            OutMsg {
                header,
                payload,
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
        id
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
}

#[derive(Message)]
#[rtype(result = "usize")]
pub(super) struct StartDrain;

/// Ends a drain; whether the node was draining.
#[derive(Message)]
#[rtype(result = "bool")]
pub(super) struct EndDrain;

#[derive(Message)]
#[rtype(result = "usize")]
pub(super) struct ForwardsInFlight;

/// Whether the node is draining, and the forwarded messages under way.
#[derive(Message)]
#[rtype(result = "(bool, usize)")]
pub(super) struct DrainState;

impl Handler<DrainState> for LnetActor {
    type Result = MessageResult<DrainState>;

    fn handle(&mut self, _: DrainState, _ctx: &mut Context<Self>) -> MessageResult<DrainState> {
        MessageResult((self.routes.draining, self.forwards_in_flight()))
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
            self.publish_forward();
        }
        self.forwards_in_flight()
    }
}

impl Handler<EndDrain> for LnetActor {
    type Result = bool;

    fn handle(&mut self, _: EndDrain, ctx: &mut Context<Self>) -> bool {
        let ended = self.end_drain();
        if ended {
            self.push_all(ctx);
        }
        ended
    }
}

impl LnetActor {
    /// Ends a drain, if one is under way: each net is advertised as it is again (UP
    /// unless its links are down or, while routing, it is silent) and the forwarding
    /// snapshot is republished; the caller pushes the ping info. Whether the node was
    /// draining.
    pub(super) fn end_drain(&mut self) -> bool {
        if !self.routes.draining {
            return false;
        }
        self.routes.draining = false;
        let routing = self.config.tunables.routing();
        let now = self.clock.now();
        let nets: Vec<(Net, bool)> = self
            .routes
            .nets
            .iter()
            .map(|(net, l)| (*net, !(routing && l.is_down()) && self.net_has_link(*net)))
            .collect();
        for (net, up) in nets {
            self.events.publish(Event::NetStatus {
                at: now,
                net,
                up,
                reason: NetStatusReason::Undrained,
            });
        }
        self.publish_forward();
        true
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
        self.msgs.values().filter(|m| m.forward.is_some()).count() + self.path.in_flight()
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
