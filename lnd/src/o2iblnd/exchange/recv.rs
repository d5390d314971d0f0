//! The receive side of the exchanges: a message checked against its connection (NIDs,
//! incarnations, version), its credits taken, and its body acted on — an LNet header
//! judged by the layer above first, a PUT given a sink buffer and answered with PUT_ACK or
//! PUT_NAK, a PUT_ACK turned into RDMA writes and PUT_DONE, a PUT_DONE delivered, a GET
//! remembered until its REPLY is sent.

use bytes::Bytes;
use lnet::{Message, ProcessId};
use tokio::time::Instant;

use super::{
    bump, Action, Asked, CloseWhy, Exchanges, HeaderQuery, PendingGet, PendingSink, Sink, TxKind,
    BULK_BUFFER_BYTES, ENODATA,
};
use crate::lnd::RxDecision;
use crate::o2iblnd::credits::SendClass;
use crate::o2iblnd::status::TxFailure;
use crate::o2iblnd::wire::{Body, Cookie, KibMsg, Version, IBLND_MSG_GET_DONE, IBLND_MSG_PUT_NAK};

impl Exchanges {
    /// A message arrived on `conn` (the bytes its receive buffer holds). A message that
    /// carries an LNet header comes back as a [`HeaderQuery`] for the layer above; its
    /// answer goes to [`Exchanges::on_header_decision`]. A malformed or stale message, a
    /// credit overflow, or an answer that matches no tx (cookie) closes the connection.
    pub fn on_receive(&mut self, now: Instant, conn: u32, raw: &Bytes) -> Option<HeaderQuery> {
        let c = conn;
        let msg = match KibMsg::unpack_bytes(raw) {
            Ok(u) => u.msg,
            Err(e) => {
                tracing::warn!(conn = c, error = %e, "o2iblnd: bad message, closing");
                self.close(now, c, CloseWhy::Local);
                return None;
            }
        };
        let link = self.links.get_mut(&c)?;
        if msg.srcnid != link.peer
            || msg.dstnid != self.me
            || msg.srcstamp != link.peer_stamp
            || msg.dststamp != self.incarnation
            || msg.version != link.version
        {
            tracing::warn!(conn = c, "o2iblnd: stale message, closing");
            self.close(now, c, CloseWhy::Local);
            return None;
        }
        if let Err(e) = link.credits.on_rx_credits(msg.credits) {
            tracing::warn!(conn = c, error = %e, "o2iblnd: credit overflow, closing");
            self.close(now, c, CloseWhy::Local);
            return None;
        }
        link.rx_msgs += 1;
        let peer = link.peer;
        let version = link.version;
        bump(&mut self.stats.rx_msgs, msg.msg_type().code());
        let from = ProcessId::lustre(peer);
        let query = |header, asked| {
            Some(HeaderQuery {
                conn: c,
                from,
                header,
                asked,
            })
        };
        match msg.body {
            Body::Noop => {
                if version == Version::V1 {
                    self.owe_credit(c);
                }
            }
            Body::Immediate { hdr, payload } => {
                if hdr.check_lnet().is_err() {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                }
                return query(hdr, Asked::Immediate(payload));
            }
            Body::PutReq { hdr, cookie } => {
                if hdr.check_lnet().is_err() {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                }
                return query(hdr, Asked::PutReq(cookie));
            }
            Body::GetReq { hdr, cookie, rd } => {
                let Message::Get { return_wmd, .. } = hdr.msg else {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                };
                if hdr.check_lnet().is_err() {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                }
                return query(
                    hdr,
                    Asked::GetReq {
                        cookie,
                        rd,
                        return_wmd,
                    },
                );
            }
            Body::PutAck {
                src_cookie,
                dst_cookie,
                rd,
            } => {
                let Some(id) =
                    self.find_waiting(c, src_cookie, |k| matches!(k, TxKind::PutReq { .. }))
                else {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                };
                if let Some(link) = self.links.get_mut(&c) {
                    link.credits.reserved_back();
                    link.active.retain(|t| *t != id);
                }
                if let Some(tx) = self.txs.get_mut(&id) {
                    let payload = match &tx.kind {
                        TxKind::PutReq { payload, .. } => payload.clone(),
                        _ => Bytes::new(),
                    };
                    tx.kind = TxKind::PutDone {
                        dst_cookie,
                        rd,
                        payload,
                    };
                    tx.waiting = false;
                    tx.class = SendClass::NoCredit;
                }
                self.queue_on_conn(now, c, id);
            }
            Body::PutNak(comp) => {
                let Some(id) =
                    self.find_waiting(c, comp.cookie, |k| matches!(k, TxKind::PutReq { .. }))
                else {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                };
                if let Some(link) = self.links.get_mut(&c) {
                    link.credits.reserved_back();
                }
                if let Some(tx) = self.txs.get_mut(&id) {
                    tx.waiting = false;
                    if comp.status < 0 {
                        tx.failed = Some(TxFailure::PeerError);
                    }
                }
                self.maybe_finish(c, id);
            }
            Body::PutDone(comp) => {
                let Some(id) =
                    self.find_waiting(c, comp.cookie, |k| matches!(k, TxKind::PutAck { .. }))
                else {
                    self.close(now, c, CloseWhy::Local);
                    return None;
                };
                self.owe_credit(c);
                let mut delivery = None;
                if let Some(tx) = self.txs.get_mut(&id) {
                    tx.waiting = false;
                    if let TxKind::PutAck { sink, .. } = &mut tx.kind {
                        let want =
                            usize::try_from(sink.header.payload_length).unwrap_or(usize::MAX);
                        if usize::try_from(comp.status).ok() == Some(want) {
                            sink.lent = self.lent < self.max_lent;
                            let lend = if sink.lent {
                                self.lent += 1;
                                self.stats.sinks_lent += 1;
                                Some(sink.slot)
                            } else {
                                self.stats.sinks_copied += 1;
                                None
                            };
                            delivery = Some(Action::DeliverSink {
                                from: sink.from,
                                header: sink.header,
                                offset: sink.slot * BULK_BUFFER_BYTES,
                                len: want,
                                buf: std::mem::take(&mut sink.buf),
                                lend,
                            });
                        } else {
                            tracing::warn!(
                                status = comp.status,
                                want,
                                "o2iblnd: PUT_DONE without the data, message dropped"
                            );
                        }
                    }
                }
                self.maybe_finish(c, id);
                // A sink copied from is free again, but the PUT_ACK that hands it out next
                // is posted after this delivery read it.
                self.actions.extend(delivery);
                self.start_sinks(now);
            }
            Body::GetDone(_) | Body::ConnReq(_) | Body::ConnAck(_) => {
                // This NI never sends GET_REQ; a handshake message on a live QP is wrong.
                tracing::warn!(conn = c, "o2iblnd: unexpected message type, closing");
                self.close(now, c, CloseWhy::Local);
                return None;
            }
        }
        self.check_sends(now, c);
        None
    }

    /// The layer above judged the LNet header of `query`: the message is delivered, its
    /// PUT given a sink (or refused with PUT_NAK), its GET remembered (or answered
    /// with GET_DONE −ENODATA), or its connection closed.
    pub fn on_header_decision(&mut self, now: Instant, query: HeaderQuery, decision: RxDecision) {
        let HeaderQuery {
            conn: c,
            from,
            header: hdr,
            asked,
        } = query;
        let Some(peer) = self.links.get(&c).map(|l| l.peer) else {
            return;
        };
        if matches!(decision, RxDecision::Close) {
            self.close(now, c, CloseWhy::Local);
            return;
        }
        match asked {
            Asked::Immediate(payload) => {
                if let RxDecision::Receive(mut buf) = decision {
                    buf.clear();
                    buf.extend_from_slice(&payload);
                    self.actions.push_back(Action::Deliver {
                        from,
                        header: hdr,
                        payload: buf.freeze(),
                    });
                }
                self.owe_credit(c);
            }
            Asked::PutReq(cookie) => match decision {
                RxDecision::Receive(buf) if hdr.payload_length > 0 => {
                    self.pending_sinks.push_back(PendingSink {
                        conn: c,
                        src_cookie: cookie,
                        buf,
                        header: hdr,
                    });
                    self.start_sinks(now);
                }
                _ => self.answer(now, c, IBLND_MSG_PUT_NAK, cookie, 0),
            },
            Asked::GetReq {
                cookie,
                rd,
                return_wmd,
            } => match decision {
                RxDecision::Receive(buf) => {
                    // The REPLY the layer above sends for this GET is written into `rd`.
                    self.pending_gets.insert(
                        (peer, return_wmd),
                        PendingGet {
                            conn: c,
                            cookie,
                            rd,
                        },
                    );
                    self.actions.push_back(Action::Deliver {
                        from,
                        header: hdr,
                        payload: buf.freeze(),
                    });
                }
                _ => self.answer(now, c, IBLND_MSG_GET_DONE, cookie, -ENODATA),
            },
        }
        self.check_sends(now, c);
    }

    /// Queues a PUT_NAK or GET_DONE without data.
    fn answer(&mut self, now: Instant, c: u32, code: u8, cookie: Cookie, status: i32) {
        let Some(peer) = self.links.get(&c).map(|l| l.peer) else {
            return;
        };
        let id = self.add_tx(
            now,
            peer,
            None,
            TxKind::Completion {
                code,
                cookie,
                status,
            },
        );
        self.queue_on_conn(now, c, id);
        self.owe_credit(c);
    }

    fn find_waiting(&self, c: u32, cookie: Cookie, kind: impl Fn(&TxKind) -> bool) -> Option<u32> {
        let link = self.links.get(&c)?;
        link.active.iter().copied().find(|id| {
            self.txs
                .get(id)
                .is_some_and(|t| t.waiting && t.cookie == cookie && kind(&t.kind))
        })
    }

    /// Gives sink buffers to PUT_REQs that wait for one, and queues their PUT_ACKs.
    pub(super) fn start_sinks(&mut self, now: Instant) {
        while let Some(p) = self.pending_sinks.front() {
            let Some(peer) = self.links.get(&p.conn).map(|l| l.peer) else {
                self.pending_sinks.pop_front();
                continue;
            };
            let Some(slot) = self.sink_free.pop() else {
                return;
            };
            let Some(p) = self.pending_sinks.pop_front() else {
                return;
            };
            let id = self.add_tx(
                now,
                peer,
                None,
                TxKind::PutAck {
                    src_cookie: p.src_cookie,
                    sink: Sink {
                        buf: p.buf,
                        header: p.header,
                        from: ProcessId::lustre(peer),
                        slot,
                        lent: false,
                    },
                },
            );
            self.queue_on_conn(now, p.conn, id);
            self.check_sends(now, p.conn);
        }
    }
}
