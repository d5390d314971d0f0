//! Sending: the requests of PUT and GET ([`PutRequest`], [`GetRequest`]), handing each
//! attempt of a message to its LND, the completions (health check, health effects on
//! the NI actors, resend or finish), and the ACK or REPLY this node sends in answer.

use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use lnd::{TxCompletion, TxId, TxRequest};
use lnet::aliveness::{self, Outgoing, PeerNotAlive};
use lnet::health::check::{Committed, NoResend, Resend, ResendFrom};
use lnet::health::{health_check, HealthContext, HealthStatus};
use lnet::time::Millis;
use lnet::{Header, Nid};
use tokio::sync::oneshot;

use super::txn::{FailReason, MsgEventKind, Outcome};
use super::{bump, LnetActor, OutMsg, Path, Step};
use crate::events::{Event, ForwardDrop};
use crate::ni::LatencyOp;
use crate::ni::{tell, Apply, CountDropped, PeerTransmit};
use crate::ni_cell::tx_bytes;

/// A PUT.
#[derive(Debug, Clone)]
pub struct PutRequest {
    /// The destination: a peer's NID (any of its NIDs).
    pub dest: Nid,
    /// The portal.
    pub portal: u32,
    /// The match bits.
    pub match_bits: u64,
    /// Carried to the target.
    pub hdr_data: u64,
    /// The payload.
    pub payload: Bytes,
    /// Whether an ACK is wanted.
    pub ack: bool,
    /// The transaction timeout.
    pub timeout: Duration,
}

/// A GET.
#[derive(Debug, Clone)]
pub struct GetRequest {
    /// The destination.
    pub dest: Nid,
    /// The portal.
    pub portal: u32,
    /// The match bits.
    pub match_bits: u64,
    /// The most bytes wanted.
    pub sink_length: u32,
    /// The transaction timeout.
    pub timeout: Duration,
}

impl LnetActor {
    /// Sends the next attempt of message `id`.
    pub(super) fn dispatch(&mut self, id: u64) {
        let Some(msg) = self.msgs.get(&id) else {
            return;
        };
        let Some(path) = self.select(msg) else {
            if msg.forward.is_some() {
                let reason = self.no_path(msg.target.net);
                self.drop_forward(id, reason);
                return;
            }
            self.finish_msg(id, HealthStatus::LocalNoRoute, FailReason::NoPath);
            return;
        };
        let Path {
            ni,
            next_hop: peer,
            dest,
        } = path;
        if self.peer_not_alive(msg, peer) {
            self.drop_not_alive(id, ni, peer);
            return;
        }
        let tx_id = TxId(self.next());
        if let Some(e) = self.nis.get(&ni) {
            e.cell.picked();
        }
        self.ensure_peer_ni(peer);
        if let Some(e) = self.peer_nis.get(&peer) {
            e.cell.picked();
        }
        if peer != dest {
            self.routes.used(peer);
        }
        let Some(msg) = self.msgs.get_mut(&id) else {
            return;
        };
        msg.attempt = Some((tx_id, ni, peer));
        let mut header = msg.header;
        if msg.forward.is_none() {
            header.src_nid = ni;
        }
        // A forwarded message keeps its destination, but for another NI of a Multi-Rail
        // destination on its final hop.
        header.dest_nid = dest;
        let tx = TxRequest {
            id: tx_id,
            peer,
            header,
            payload: msg.payload.clone(),
        };
        if let Some(t) = msg.txn.and_then(|t| self.txns.get_mut(&t)) {
            t.last_peer_ni = Some(peer);
        }
        self.attempts.insert(tx_id, id);
        // Peer tx credit first, then the local NI's (either queues while it has none).
        if let (Some(p), Some(l)) = (self.peer_nis.get(&peer), self.nis.get(&ni)) {
            tell(
                &p.addr,
                PeerTransmit {
                    tx,
                    via: l.addr.clone(),
                },
            );
        }
    }

    /// Whether the peer NI aliveness rule drops `msg` on its way to `peer`.
    fn peer_not_alive(&self, msg: &OutMsg, peer: Nid) -> bool {
        let peer_timeout = self
            .net_credits
            .get(&peer.net)
            .map_or(0, |c| c.peer_timeout);
        let status_up = self.peer_nis.get(&peer).is_none_or(|e| e.cell.status_up());
        let out = Outgoing {
            forwarded: msg.forward.is_some(),
            target_pid: msg.header.dest_pid,
        };
        aliveness::check(self.config.tunables.routing(), peer_timeout, out, status_up).is_err()
    }

    /// Message `id`, about to leave on local NI `ni` for `peer`, is dropped by the peer
    /// NI aliveness rule: counted on both NIs (`dropped_stats`) and on the node
    /// (`drop_count`, `drop_length`), and reported. Only forwarded messages are.
    fn drop_not_alive(&mut self, id: u64, ni: Nid, peer: Nid) {
        let Some(msg) = self.msgs.get(&id) else {
            return;
        };
        let t = msg.header.msg_type();
        tracing::debug!(target_nid = %msg.header.dest_nid, %peer, errno = PeerNotAlive.errno(), "dropping message: peer not alive");
        if let Some(e) = self.nis.get(&ni) {
            tell(&e.addr, CountDropped(t));
        }
        if let Some(e) = self.peer_nis.get(&peer) {
            tell(&e.addr, CountDropped(t));
        }
        self.drop_forward(id, ForwardDrop::PeerNotAlive);
    }

    /// Takes message `id` out; a forwarded message gives its router buffer back.
    pub(super) fn retire(&mut self, id: u64) -> Option<OutMsg> {
        let mut msg = self.msgs.remove(&id)?;
        if let Some(t) = msg.forward.take() {
            self.path.pools.release(t);
        }
        Some(msg)
    }

    /// Message `id` failed for good (or could not be sent at all).
    pub(super) fn finish_msg(&mut self, id: u64, status: HealthStatus, reason: FailReason) {
        let forwarded = self.msgs.get(&id).is_some_and(|m| m.forward.is_some());
        if forwarded {
            self.drop_forward(id, ForwardDrop::SendFailed(status));
            return;
        }
        let Some(msg) = self.retire(id) else {
            return;
        };
        if let Some((tx, _, _)) = msg.attempt {
            self.attempts.remove(&tx);
        }
        if let Some(txn_id) = msg.txn {
            self.txn_event(
                txn_id,
                MsgEventKind::Send,
                Outcome::Failed { status, reason },
                None,
                None,
            );
        }
    }
}

impl LnetActor {
    pub(super) fn health_ctx(
        &self,
        msg: &OutMsg,
        peer_ni: Nid,
        committed: Committed,
    ) -> HealthContext {
        let peer = self.peers.get(&peer_ni);
        HealthContext {
            committed: Some(committed),
            past_deadline: lnet::timeouts::is_past_deadline(msg.deadline, self.clock.now()),
            ping_buffer_entries: u32::try_from(self.nis.len().saturating_add(1))
                .unwrap_or(u32::MAX),
            peer_ni_count: peer
                .map(|p| u32::try_from(p.nids.len()).unwrap_or(u32::MAX))
                .unwrap_or(1),
            peer_is_router: self.routes.is_gateway(&peer_ni),
            routing_enabled: self.config.tunables.routing(),
            dst_is_local: self.is_local(&peer_ni),
            retries_so_far: msg.retries,
            recovery_ping: msg.recovery_ping,
            no_resend: false,
            peer_multi_rail: peer.is_some_and(|p| p.multi_rail),
            forwarded: msg.forward.is_some(),
        }
    }

    /// Hands the health effects to the local NI and peer NI actors. The returned receivers
    /// fire once each actor has applied its effect.
    pub(super) fn apply(
        &self,
        ni: Nid,
        peer: Nid,
        outcome: &lnet::health::HealthOutcome,
        status: HealthStatus,
        step: Step,
    ) -> Vec<oneshot::Receiver<()>> {
        let sensitivity = self.config.tunables.health_sensitivity();
        let (send_done, sent_bytes, received, msg_type) = match step {
            Step::SendDone(t, bytes) => (true, bytes, false, t),
            Step::Received(t) => (false, 0, true, t),
        };
        let effect = |effect| Apply {
            effect,
            cause: status,
            sensitivity,
            send_done,
            sent_bytes,
            received,
            msg_type: Some(msg_type),
        };
        let mut applied = Vec::new();
        if let Some(e) = self.nis.get(&ni) {
            applied.push(applied_when(&e.addr, effect(outcome.local_ni)));
        }
        if let Some(e) = self.peer_nis.get(&peer) {
            applied.push(applied_when(&e.addr, effect(outcome.peer_ni)));
        }
        applied
    }

    pub(super) fn on_completion(&mut self, done: TxCompletion, ctx: &mut Context<Self>) {
        let Some(id) = self.attempts.remove(&done.id) else {
            return;
        };
        let Some(msg) = self.msgs.get(&id) else {
            return;
        };
        let hctx = self.health_ctx(msg, done.peer, Committed::Tx);
        let outcome = health_check(done.status, &hctx, &self.config.tunables);
        for c in &outcome.counters {
            use lnet::health::check::Counter;
            match c {
                Counter::SuccessfulResends => bump(&mut self.counters, "successful_resends"),
                Counter::FailedResends => bump(&mut self.counters, "failed_resends"),
                Counter::LateMessage => bump(&mut self.counters, "late_messages"),
                _ => {}
            }
        }
        // A PUT of this node's, sent at the first attempt: its egress latency.
        if let (true, None, 0, lnet::MsgType::Put, Some(t)) = (
            done.status.is_ok(),
            &msg.forward,
            msg.retries,
            msg.header.msg_type(),
            msg.txn,
        ) {
            self.record_latency(t, LatencyOp::PutEgress, (done.ni, done.peer));
        }
        let step = Step::SendDone(msg.header.msg_type(), tx_bytes(&msg.header));
        let waits = self.apply(done.ni, done.peer, &outcome, done.status, step);
        let txn = msg.txn;
        if msg.abandoned {
            self.retire(id);
            return;
        }
        match outcome.resend {
            Resend::No(NoResend::Delivered) => {
                if let Some(m) = self.msgs.get(&id).filter(|m| m.forward.is_some()) {
                    let len = u64::try_from(m.payload.len()).unwrap_or(u64::MAX);
                    bump(&mut self.counters, "route_count");
                    let n = self.counters.entry("route_length").or_default();
                    *n = n.saturating_add(len);
                }
                self.retire(id);
                if let Some(t) = txn {
                    self.txn_event(t, MsgEventKind::Send, Outcome::Ok, None, None);
                }
            }
            Resend::No(reason) => {
                self.finish_msg(id, done.status, FailReason::NoResend(reason));
            }
            Resend::Yes { from } => {
                bump(&mut self.counters, "resend_count");
                let Some(msg) = self.msgs.get_mut(&id) else {
                    return;
                };
                msg.retries = msg.retries.saturating_add(1);
                msg.attempt = None;
                if from == ResendFrom::SameLocalNi {
                    msg.pin_local = Some(done.ni);
                }
                let retry = msg.retries;
                if let Some(t) = txn.and_then(|t| self.txns.get_mut(&t)) {
                    t.retries = retry;
                }
                self.events.publish(Event::Resend {
                    at: self.clock.now(),
                    status: done.status,
                    from_ni: done.ni,
                    to_peer_ni: done.peer,
                    retry,
                });
                // Resend once the local NI has taken its health change, so that the
                // selection sees it.
                let fut = async move {
                    for applied in waits {
                        let _ = applied.await;
                    }
                };
                ctx.spawn(fut.into_actor(self).map(move |_, act, _| act.dispatch(id)));
            }
        }
    }

    /// Sends an ACK or REPLY (its header names the requester) through `via_ni` to `to`,
    /// the requester or the gateway its request came through.
    pub(super) fn send_response(&mut self, header: Header, payload: Bytes, via_ni: Nid, to: Nid) {
        let id = self.next();
        let deadline = self.clock.now().saturating_add(Millis::from_secs(u64::from(
            self.config.tunables.transaction_timeout(),
        )));
        self.msgs.insert(
            id,
            OutMsg {
                header,
                payload,
                target: header.dest_nid,
                txn: None,
                deadline,
                retries: 0,
                recovery_ping: false,
                pin_local: Some(via_ni),
                pin_peer: Some(to),
                attempt: None,
                abandoned: false,
                forward: None,
            },
        );
        self.dispatch(id);
        // Later attempts may take any pair.
        if let Some(m) = self.msgs.get_mut(&id) {
            m.pin_local = None;
            m.pin_peer = None;
        }
    }
}

/// Sends `msg` to `addr` without blocking; the receiver fires once it was handled.
pub(super) fn applied_when<A>(addr: &Addr<A>, msg: Apply) -> oneshot::Receiver<()>
where
    A: Actor<Context = Context<A>> + Handler<Apply>,
{
    let (done_tx, done_rx) = oneshot::channel();
    let addr = addr.clone();
    actix::spawn(async move {
        let _ = addr.send(msg).await;
        let _ = done_tx.send(());
    });
    done_rx
}
