//! Transactions: what a caller of PUT and GET gets back ([`Transaction`], its
//! [`MsgEvent`]s and their [`Outcome`]), how the LNet actor starts one ([`StartTxn`]),
//! reports its events, and ends it at its deadline with one timer for all of them.

use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use lnet::health::check::NoResend;
use lnet::health::HealthStatus;
use lnet::nid::PID_LUSTRE;
use lnet::ping::RESERVED_PORTAL;
use lnet::recovery::RecoveryKind;
use lnet::time::Millis;
use lnet::{Header, Message as LnetMsg, Nid, WireHandle, PING_MATCHBITS};
use tokio::sync::mpsc;

use super::error::NodeError;
use super::{bump, LnetActor, OutMsg, Txn};
use crate::ni::{tell, Apply, LatencyOp, RecordLatency};

/// Why a message failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailReason {
    /// `health_check` decided not to resend it (the class, or the gates).
    NoResend(NoResend),
    /// The transaction timeout ran out first.
    Timeout,
    /// No local NI and peer NI pair reaches the destination.
    NoPath,
}

/// How a step of a message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It went through.
    Ok,
    /// It failed for good.
    Failed {
        /// The health status of the last attempt (REMOTE_TIMEOUT for a missing ACK or
        /// REPLY).
        status: HealthStatus,
        /// Why there was no (further) resend.
        reason: FailReason,
    },
}

impl Outcome {
    /// Whether this is OK.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }
}

/// The kind of a message event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgEventKind {
    /// The PUT or GET was sent (or failed to be).
    Send,
    /// The ACK of a PUT arrived (or did not in time).
    Ack,
    /// The REPLY of a GET arrived (or did not in time).
    Reply,
}

/// One event of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgEvent {
    /// Which.
    pub kind: MsgEventKind,
    /// How it ended.
    pub status: Outcome,
    /// Resends made before this event.
    pub retries: u32,
    /// The REPLY's payload.
    pub payload: Option<Bytes>,
    /// The NID that sent the ACK or REPLY.
    pub from: Option<Nid>,
}

/// A PUT or GET in progress: its events arrive on a bounded channel; the last one is the
/// SEND event of a failed send, the ACK or REPLY event, or the SEND event of a PUT without
/// ACK.
#[derive(Debug)]
pub struct Transaction {
    /// The events.
    pub events: mpsc::Receiver<MsgEvent>,
    want_response: bool,
}

impl Transaction {
    /// Waits for every event of the transaction; there is a last one by the transaction
    /// timeout at the latest.
    pub async fn finish(mut self) -> Vec<MsgEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.events.recv().await {
            let last = !e.status.is_ok() || e.kind != MsgEventKind::Send || !self.want_response;
            out.push(e);
            if last {
                break;
            }
        }
        out
    }
}

#[derive(Message)]
#[rtype(result = "Result<Transaction, NodeError>")]
pub(super) struct StartTxn {
    pub(super) dest: Nid,
    pub(super) msg: LnetMsg,
    pub(super) payload: Bytes,
    pub(super) timeout: Duration,
    pub(super) want_response: bool,
    /// The local NI to send from (`lnetctl ping --source`), on every attempt; `None`:
    /// the selection picks one.
    pub(super) src: Option<Nid>,
}

impl LnetActor {
    pub(super) fn txn_event(
        &mut self,
        txn_id: u64,
        kind: MsgEventKind,
        status: Outcome,
        payload: Option<Bytes>,
        from: Option<Nid>,
    ) {
        let Some(txn) = self.txns.get_mut(&txn_id) else {
            return;
        };
        if txn.done {
            return;
        }
        if kind == MsgEventKind::Send {
            txn.sent = true;
        }
        let last = !status.is_ok() || kind != MsgEventKind::Send || !txn.want_response;
        let _ = txn.events.try_send(MsgEvent {
            kind,
            status,
            retries: txn.retries,
            payload,
            from,
        });
        if last {
            txn.done = true;
            let msg = txn.msg;
            let deadline = txn.deadline;
            self.txns.remove(&txn_id);
            self.txn_deadlines.remove(&(deadline, txn_id));
            // A send still in the LND only changes health when it completes; one waiting
            // for its resend is dropped.
            let in_lnd = self.msgs.get(&msg).is_some_and(|m| m.attempt.is_some());
            if in_lnd {
                if let Some(m) = self.msgs.get_mut(&msg) {
                    m.txn = None;
                    m.abandoned = true;
                }
            } else {
                self.retire(msg);
            }
        }
    }
}

impl LnetActor {
    /// Transaction `txn_id`'s operation `op` is over now, through local NI `ni` and peer
    /// NI `peer`: a latency sample for both, from the transaction's start.
    pub(super) fn record_latency(&self, txn_id: u64, op: LatencyOp, (ni, peer): (Nid, Nid)) {
        let Some(t) = self.txns.get(&txn_id) else {
            return;
        };
        let ns = self.clock.nanos().saturating_sub(t.started_ns);
        if let Some(e) = self.nis.get(&ni) {
            tell(&e.addr, RecordLatency(op, ns));
        }
        if let Some(e) = self.peer_nis.get(&peer) {
            tell(&e.addr, RecordLatency(op, ns));
        }
    }

    pub(super) fn start_txn(
        &mut self,
        req: StartTxn,
        recovery: Option<(RecoveryKind, Option<Nid>, Option<Nid>)>,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, NodeError> {
        if self.msgs.len() >= self.config.max_in_flight {
            return Err(NodeError::Busy {
                max: self.config.max_in_flight,
            });
        }
        if let Some(src) = req.src.filter(|s| !self.nis.contains_key(s)) {
            return Err(NodeError::NoSuchNi { nid: src });
        }
        let txn_id = self.next();
        let msg_id = self.next();
        let wmd = WireHandle {
            interface_cookie: self.config.incarnation,
            object_cookie: txn_id,
        };
        let msg = match req.msg {
            LnetMsg::Put {
                ack_wmd,
                match_bits,
                hdr_data,
                ptl_index,
                offset,
            } => LnetMsg::Put {
                ack_wmd: if ack_wmd.is_none() { ack_wmd } else { wmd },
                match_bits,
                hdr_data,
                ptl_index,
                offset,
            },
            LnetMsg::Get {
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
                ..
            } => LnetMsg::Get {
                return_wmd: wmd,
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
            },
            other => other,
        };
        let reply = matches!(msg, LnetMsg::Get { .. });
        let request = match msg {
            LnetMsg::Get {
                ptl_index: RESERVED_PORTAL,
                match_bits: PING_MATCHBITS,
                ..
            } => lnet::response::Request::Ping,
            LnetMsg::Put {
                ptl_index: RESERVED_PORTAL,
                match_bits: PING_MATCHBITS,
                ..
            } => lnet::response::Request::DiscoveryPush,
            LnetMsg::Get { .. } => lnet::response::Request::Get,
            _ => lnet::response::Request::Put {
                ack: req.want_response,
            },
        };
        let header = Header {
            dest_nid: req.dest,
            src_nid: Nid::ANY,
            dest_pid: PID_LUSTRE,
            src_pid: self.config.pid,
            payload_length: u32::try_from(req.payload.len()).unwrap_or(u32::MAX),
            msg,
        };
        // `send_length`: the payload of this node's own PUTs (a GET has none).
        let n = self.counters.entry("send_length").or_default();
        *n = n.saturating_add(u64::from(header.payload_length));
        let timeout_ms = u64::try_from(req.timeout.as_millis()).unwrap_or(u64::MAX);
        let deadline = self.clock.now().saturating_add(Millis(timeout_ms));
        let (tx, rx) = mpsc::channel(3);
        self.txns.insert(
            txn_id,
            Txn {
                events: tx,
                want_response: req.want_response,
                reply,
                sent: false,
                done: false,
                retries: 0,
                last_peer_ni: None,
                msg: msg_id,
                request,
                deadline,
                started_ns: self.clock.nanos(),
            },
        );
        self.txn_deadlines.insert((deadline, txn_id));
        let (pin_local, pin_peer) = recovery.map_or((req.src, None), |r| (r.1, r.2));
        self.msgs.insert(
            msg_id,
            OutMsg {
                header,
                payload: req.payload,
                target: req.dest,
                txn: Some(txn_id),
                deadline,
                retries: 0,
                recovery_ping: recovery.is_some(),
                pin_local,
                pin_peer,
                attempt: None,
                abandoned: false,
                forward: None,
            },
        );
        self.arm_txn_timer(ctx);
        self.dispatch(msg_id);
        Ok(Transaction {
            events: rx,
            want_response: req.want_response,
        })
    }

    /// Arms the transaction timer for the earliest open deadline, unless it is armed for
    /// that time or an earlier one already.
    pub(super) fn arm_txn_timer(&mut self, ctx: &mut Context<Self>) {
        let Some(&(first, _)) = self.txn_deadlines.first() else {
            return;
        };
        if let Some((armed, handle)) = self.txn_timer.take() {
            if armed <= first {
                self.txn_timer = Some((armed, handle));
                return;
            }
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_later(self.clock.until(first), |act, ctx| {
            act.txn_timer = None;
            act.expire_due(ctx);
        });
        self.txn_timer = Some((first, handle));
    }

    /// Ends every transaction whose deadline has come, then re-arms the timer.
    pub(super) fn expire_due(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        while let Some(&(deadline, txn_id)) = self.txn_deadlines.first() {
            if deadline > now {
                break;
            }
            self.txn_deadlines.pop_first();
            self.expire(txn_id);
        }
        self.arm_txn_timer(ctx);
    }

    pub(super) fn expire(&mut self, txn_id: u64) {
        let Some(t) = self.txns.get(&txn_id) else {
            return;
        };
        if !t.sent {
            self.txn_event(
                txn_id,
                MsgEventKind::Send,
                Outcome::Failed {
                    status: HealthStatus::LocalTimeout,
                    reason: FailReason::Timeout,
                },
                None,
                None,
            );
            return;
        }
        // The caller's timeout always ends the transaction. When response tracking
        // covers the request, the next hop also loses health (no resend).
        let kind = if t.reply {
            MsgEventKind::Reply
        } else {
            MsgEventKind::Ack
        };
        let tracked =
            lnet::response::is_tracked(self.config.tunables.response_tracking(), t.request, None);
        let expiry = lnet::response::on_expiry();
        if tracked && expiry.bump_response_timeout_count {
            bump(&mut self.counters, "response_timeout_count");
        }
        let next_hop = if tracked { t.last_peer_ni } else { None };
        if let Some(e) = next_hop.and_then(|p| self.peer_nis.get(&p)) {
            tell(
                &e.addr,
                Apply {
                    effect: expiry.next_hop_peer_ni,
                    cause: HealthStatus::RemoteTimeout,
                    sensitivity: self.config.tunables.health_sensitivity(),
                    send_done: false,
                    sent_bytes: 0,
                    received: false,
                    msg_type: None,
                },
            );
        }
        self.txn_event(
            txn_id,
            kind,
            Outcome::Failed {
                status: HealthStatus::RemoteTimeout,
                reason: FailReason::Timeout,
            },
            None,
            None,
        );
    }
}

impl Handler<StartTxn> for LnetActor {
    type Result = Result<Transaction, NodeError>;

    fn handle(&mut self, m: StartTxn, ctx: &mut Context<Self>) -> Result<Transaction, NodeError> {
        self.start_txn(m, None, ctx)
    }
}
