//! Receiving: the MDs this node exposes ([`MdSpec`], [`Attach`]), delivery of what
//! arrives for this node (PUT at most once per ACK handle, GET answered, ACK and REPLY
//! matched to their transaction, pings and pushes), and handing on what is to be
//! forwarded.

use actix::prelude::*;
use bytes::Bytes;
use lnd::RxMessage;
use lnet::health::check::Committed;
use lnet::health::{health_check, HealthStatus};
use lnet::ping::{INTERFACES_MAX_DEFAULT, RESERVED_PORTAL};
use lnet::time::Millis;
use lnet::{Header, Message as LnetMsg, Nid, PingInfo, WireHandle, PING_MATCHBITS};
use tokio::sync::mpsc;

use super::txn::{MsgEventKind, Outcome};
use super::{bump, LnetActor, Md, OutMsg, Step, SEEN_PUTS};
use crate::events::RouteCause;
use crate::ni::LatencyOp;
use crate::router::Ticket;

/// A memory descriptor this node exposes: PUTs matching it are delivered on the channel
/// [`Node::attach`](super::Node::attach) returns; GETs matching it are answered with `data`.
#[derive(Debug, Clone)]
pub struct MdSpec {
    /// The portal.
    pub portal: u32,
    /// The match bits.
    pub match_bits: u64,
    /// What a GET reads.
    pub data: Bytes,
    /// Capacity of the delivery channel: a PUT that finds it full (its consumer is that
    /// far behind) is dropped, counted in `drop_count`, and not ACKed.
    pub depth: usize,
}

#[derive(Message)]
#[rtype(result = "mpsc::Receiver<RxMessage>")]
pub(super) struct Attach(pub(super) MdSpec);

impl LnetActor {
    pub(super) fn on_received(
        &mut self,
        rx: RxMessage,
        ticket: Option<Ticket>,
        ctx: &mut Context<Self>,
    ) {
        let from = rx.from.nid;
        let h = rx.header;
        if h.check_lnet().is_err() {
            bump(&mut self.counters, "drop_count");
            if let Some(t) = ticket {
                self.path.pools.release(t);
            }
            return;
        }
        self.heard(&rx, ctx);
        if self.peers.get(&from).is_none() && !self.is_local(&from) {
            self.set_peer(from, vec![from], false, false);
        }
        self.ensure_peer_ni(from);
        if let Some(e) = self.peer_nis.get(&from) {
            // Heard from: its cached NI status is UP again.
            e.cell.set_status_up(true);
        }
        let probe = OutMsg {
            header: h,
            payload: Bytes::new(),
            target: from,
            txn: None,
            deadline: Millis(u64::MAX),
            retries: 0,
            recovery_ping: false,
            pin_local: None,
            pin_peer: None,
            attempt: None,
            abandoned: false,
            forward: None,
        };
        let hctx = self.health_ctx(&probe, from, Committed::Rx);
        let outcome = health_check(HealthStatus::Ok, &hctx, &self.config.tunables);
        let _ = self.apply(
            rx.ni,
            from,
            &outcome,
            HealthStatus::Ok,
            Step::Received(h.msg_type()),
        );
        if !self.is_local(&h.dest_nid) {
            match ticket {
                Some(t) if self.config.tunables.routing() => self.forward(rx, t),
                other => {
                    bump(&mut self.counters, "drop_count");
                    if let Some(t) = other {
                        self.path.pools.release(t);
                    }
                }
            }
            return;
        }
        if let Some(t) = ticket {
            // Granted while this NID was not yet local: not a forward after all.
            self.path.pools.release(t);
        }
        // `recv_length` of `stats show`: the payload bytes of messages received for this
        // node (forwarded ones count in `route_length`).
        let n = self.counters.entry("recv_length").or_default();
        *n = n.saturating_add(u64::from(h.payload_length));
        match h.msg {
            LnetMsg::Put {
                ack_wmd,
                match_bits,
                ptl_index,
                ..
            } => {
                let fresh = ack_wmd.is_none() || self.remember(ack_wmd);
                let accepted = if ptl_index == RESERVED_PORTAL && match_bits == PING_MATCHBITS {
                    if fresh {
                        match PingInfo::decode_validated(&rx.payload, INTERFACES_MAX_DEFAULT) {
                            Ok(info) => {
                                // The pusher is the header's source: a routed push is
                                // handed over by a router (`from`), whose own ping info
                                // this is not.
                                let origin = h.src_nid;
                                self.gateway_info(&info, origin, RouteCause::Push);
                                self.learn(info, origin);
                            }
                            Err(e) => tracing::debug!(%from, %e, "bad push"),
                        }
                    }
                    true
                } else if let Some(md) = self
                    .mds
                    .iter()
                    .find(|m| m.spec.portal == ptl_index && m.spec.match_bits == match_bits)
                {
                    // Like an MD with no room left: a message its consumer has no space
                    // for is dropped and not ACKed (the sender's transaction times out).
                    !fresh || md.deliveries.try_send(rx.clone()).is_ok()
                } else {
                    false
                };
                if !accepted {
                    bump(&mut self.counters, "drop_count");
                    tracing::debug!(%from, ptl_index, match_bits, "PUT matched no MD with room; dropped");
                }
                if accepted && !ack_wmd.is_none() {
                    let ack = Header {
                        dest_nid: h.src_nid,
                        src_nid: rx.ni,
                        dest_pid: h.src_pid,
                        src_pid: self.config.pid,
                        payload_length: 0,
                        msg: LnetMsg::Ack {
                            dst_wmd: ack_wmd,
                            match_bits,
                            mlength: h.payload_length,
                        },
                    };
                    self.send_response(ack, Bytes::new(), rx.ni, from);
                }
            }
            LnetMsg::Get {
                return_wmd,
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
            } => {
                let data: Option<Bytes> =
                    if ptl_index == RESERVED_PORTAL && match_bits == PING_MATCHBITS {
                        self.own_info().encode().ok().map(Bytes::from)
                    } else {
                        self.mds
                            .iter()
                            .find(|m| m.spec.portal == ptl_index && m.spec.match_bits == match_bits)
                            .map(|m| m.spec.data.clone())
                    };
                let Some(data) = data else {
                    return;
                };
                let start = usize::try_from(src_offset)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                let len = usize::try_from(sink_length)
                    .unwrap_or(usize::MAX)
                    .min(data.len().saturating_sub(start));
                let payload = data.slice(start..start.saturating_add(len));
                let reply = Header {
                    dest_nid: h.src_nid,
                    src_nid: rx.ni,
                    dest_pid: h.src_pid,
                    src_pid: self.config.pid,
                    payload_length: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                    msg: LnetMsg::Reply {
                        dst_wmd: return_wmd,
                    },
                };
                // `send_length` counts the data a GET served, as the kernel's.
                let n = self.counters.entry("send_length").or_default();
                *n = n.saturating_add(u64::try_from(payload.len()).unwrap_or(u64::MAX));
                self.send_response(reply, payload, rx.ni, from);
            }
            LnetMsg::Ack { dst_wmd, .. } => {
                let t = dst_wmd.object_cookie;
                if dst_wmd.interface_cookie == self.config.incarnation {
                    self.response(t, MsgEventKind::Ack, None, h.src_nid, (rx.ni, from));
                }
            }
            LnetMsg::Reply { dst_wmd } => {
                let t = dst_wmd.object_cookie;
                if dst_wmd.interface_cookie == self.config.incarnation {
                    let payload = Some(rx.payload.clone());
                    self.response(t, MsgEventKind::Reply, payload, h.src_nid, (rx.ni, from));
                }
            }
            LnetMsg::Hello { .. } => {}
        }
    }

    /// The ACK or REPLY (`kind`) of transaction `txn_id` came from `from`, received on
    /// local NI and from peer NI `via`.
    pub(super) fn response(
        &mut self,
        txn_id: u64,
        kind: MsgEventKind,
        payload: Option<Bytes>,
        from: Nid,
        via: (Nid, Nid),
    ) {
        let Some(t) = self.txns.get(&txn_id) else {
            return;
        };
        if t.want_response && t.reply == (kind == MsgEventKind::Reply) {
            let op = if t.reply {
                LatencyOp::GetRtt
            } else {
                LatencyOp::PutAck
            };
            self.record_latency(txn_id, op, via);
            if !t.sent {
                self.txn_event(txn_id, MsgEventKind::Send, Outcome::Ok, None, None);
            }
            self.txn_event(txn_id, kind, Outcome::Ok, payload, Some(from));
        }
    }

    /// Remembers a PUT's ACK handle; false if it was seen already.
    pub(super) fn remember(&mut self, wmd: WireHandle) -> bool {
        if !self.seen.insert(wmd) {
            return false;
        }
        self.seen_order.push_back(wmd);
        if self.seen_order.len() > SEEN_PUTS {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

impl Handler<Attach> for LnetActor {
    type Result = MessageResult<Attach>;

    fn handle(&mut self, Attach(spec): Attach, _ctx: &mut Context<Self>) -> MessageResult<Attach> {
        let (tx, rx) = mpsc::channel(spec.depth.max(1));
        self.mds
            .retain(|m| !(m.spec.portal == spec.portal && m.spec.match_bits == spec.match_bits));
        self.mds.push(Md {
            spec,
            deliveries: tx,
        });
        MessageResult(rx)
    }
}
