//! The send side of the exchanges: a send from the layer above queued on its connection
//! (or for a connection to its peer), credits checked, NOOPs added for credits and
//! keepalive, the message encoded and posted with its RDMA writes, and a tx finished once
//! its sends completed and no answer is awaited.

use bytes::Bytes;
use lnet::{Message, Nid};
use tokio::time::Instant;

use super::{
    bump, Action, BulkFill, Exchanges, PeerLinks, PostSend, RdmaWrite, TxKind, BULK_BUFFER_BYTES,
    EMSGSIZE,
};
use crate::lnd::TxRequest;
use crate::o2iblnd::credits::SendClass;
use crate::o2iblnd::status::TxFailure;
use crate::o2iblnd::wire::{
    Body, Completion, KibMsg, RdmaDesc, IBLND_MAX_IMMEDIATE, IBLND_MSG_GET_DONE, IBLND_MSG_PUT_NAK,
    IBLND_MSG_SIZE,
};

/// Post outcome that is not a success.
enum PostError {
    /// Out of message or bulk buffers: try again when one is freed.
    Starved,
    /// The connection must be closed.
    Fatal(String),
}

impl Exchanges {
    /// A send from the layer above: a REPLY to an optimised GET of the peer is written into
    /// the GET's sink; anything else goes as an IMMEDIATE or, larger, as a PUT. Without an
    /// established connection to the peer the tx waits for one ([`Action::Connect`]).
    pub fn send(&mut self, now: Instant, req: TxRequest) {
        let peer = req.peer;
        if let Message::Reply { dst_wmd } = req.header.msg {
            if let Some(pg) = self.pending_gets.remove(&(peer, dst_wmd)) {
                if self.links.contains_key(&pg.conn) {
                    let id = self.add_tx(
                        now,
                        peer,
                        Some(req.id),
                        TxKind::GetReply {
                            cookie: pg.cookie,
                            rd: pg.rd,
                            payload: req.payload,
                        },
                    );
                    self.queue_on_conn(now, pg.conn, id);
                    self.owe_credit(pg.conn);
                    self.check_sends(now, pg.conn);
                    return;
                }
            }
        }
        let kind = if req.payload.len() <= IBLND_MAX_IMMEDIATE {
            TxKind::Immediate {
                hdr: req.header,
                payload: req.payload,
            }
        } else {
            TxKind::PutReq {
                hdr: req.header,
                payload: req.payload,
            }
        };
        let id = self.add_tx(now, peer, Some(req.id), kind);
        self.launch(now, peer, id);
    }

    /// Queues tx `id` on the next established connection to `peer`, round the peer's
    /// list, or keeps it waiting for one.
    fn launch(&mut self, now: Instant, peer: Nid, id: u32) {
        if let Some(c) = self.peer_links.get_mut(&peer).and_then(PeerLinks::pick) {
            self.queue_on_conn(now, c, id);
            self.check_sends(now, c);
            return;
        }
        self.waiting.entry(peer).or_default().push_back(id);
        self.actions.push_back(Action::Connect { peer });
    }

    pub(super) fn queue_on_conn(&mut self, now: Instant, c: u32, id: u32) {
        let Some(link) = self.links.get_mut(&c) else {
            return;
        };
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        tx.queued = true;
        tx.deadline = now + self.timeout;
        tx.class = tx.kind.class();
        match tx.kind {
            TxKind::PutReq { .. } => link.rsrvd.push_back(id),
            TxKind::Immediate { .. } => link.credit_q.push_back(id),
            _ => link.nocred.push_back(id),
        }
    }

    pub(super) fn check_all(&mut self, now: Instant) {
        let mut all: Vec<u32> = self.links.keys().copied().collect();
        all.sort_unstable();
        for c in all {
            self.check_sends(now, c);
        }
    }

    pub(super) fn check_sends(&mut self, now: Instant, c: u32) {
        let keepalive = self.keepalive;
        loop {
            let Some(link) = self.links.get_mut(&c) else {
                return;
            };
            while !link.rsrvd.is_empty() && link.credits.take_reserved() {
                if let Some(t) = link.rsrvd.pop_front() {
                    link.credit_q.push_back(t);
                }
            }
            let keepalive_due =
                keepalive.is_some_and(|k| now.saturating_duration_since(link.last_send) >= k);
            let noop_queued = link.nocred.iter().any(|t| {
                self.txs
                    .get(t)
                    .is_some_and(|t| matches!(t.kind, TxKind::Noop))
            });
            if !noop_queued
                && link.credits.need_noop(
                    !link.nocred.is_empty(),
                    link.credit_q.is_empty(),
                    keepalive_due,
                )
            {
                let peer = link.peer;
                let id = self.add_tx(now, peer, None, TxKind::Noop);
                self.queue_on_conn(now, c, id);
                continue;
            }
            let (id, from_nocred) = match (link.nocred.front(), link.credit_q.front()) {
                (Some(&t), _) => (t, true),
                (None, Some(&t)) => (t, false),
                (None, None) => return,
            };
            let Some(tx) = self.txs.get(&id) else {
                if from_nocred {
                    link.nocred.pop_front();
                } else {
                    link.credit_q.pop_front();
                }
                continue;
            };
            let class = tx.class;
            if class == SendClass::Noop
                && link
                    .credits
                    .noop_surplus(link.nocred.len() > 1, link.credit_q.is_empty())
                && !keepalive_due
            {
                link.nocred.pop_front();
                self.txs.remove(&id);
                continue;
            }
            if !link.credits.can_post(class) {
                return;
            }
            if from_nocred {
                link.nocred.pop_front();
            } else {
                link.credit_q.pop_front();
            }
            match self.post_tx(now, c, id) {
                Ok(()) => {}
                Err(PostError::Starved) => {
                    if let Some(link) = self.links.get_mut(&c) {
                        if from_nocred {
                            link.nocred.push_front(id);
                        } else {
                            link.credit_q.push_front(id);
                        }
                    }
                    self.msg_starved = true;
                    return;
                }
                Err(PostError::Fatal(why)) => {
                    tracing::warn!(%why, "o2iblnd: post failed, closing connection");
                    self.close(now, c, super::CloseWhy::Local);
                    return;
                }
            }
        }
    }

    fn post_tx(&mut self, now: Instant, c: u32, id: u32) -> Result<(), PostError> {
        let Some(msg_slot) = self.msg_free.pop() else {
            return Err(PostError::Starved);
        };
        let needs_src = self.txs.get(&id).is_some_and(|t| {
            matches!(t.kind, TxKind::PutReq { .. } | TxKind::GetReply { .. })
                && t.src_slot.is_none()
        });
        let src_slot = if needs_src {
            match self.src_free.pop() {
                Some(s) => Some(s),
                None => {
                    self.msg_free.push(msg_slot);
                    return Err(PostError::Starved);
                }
            }
        } else {
            None
        };
        let (Some(link), Some(tx)) = (self.links.get_mut(&c), self.txs.get_mut(&id)) else {
            self.msg_free.push(msg_slot);
            if let Some(s) = src_slot {
                self.src_free.push(s);
            }
            return Ok(());
        };
        let mut fill = None;
        if let Some(s) = src_slot {
            tx.src_slot = Some(s);
            let payload = match &tx.kind {
                TxKind::PutReq { payload, .. } | TxKind::GetReply { payload, .. } => {
                    payload.clone()
                }
                _ => Bytes::new(),
            };
            if payload.len() > BULK_BUFFER_BYTES {
                self.msg_free.push(msg_slot);
                return Err(PostError::Fatal("payload larger than a bulk buffer".into()));
            }
            fill = Some(BulkFill { slot: s, payload });
        }
        let mut rdma = Vec::new();
        let mut rdma_payload = None;
        let body = match &tx.kind {
            TxKind::Immediate { hdr, payload } => Body::Immediate {
                hdr: *hdr,
                payload: payload.clone(),
            },
            TxKind::PutReq { hdr, .. } => Body::PutReq {
                hdr: *hdr,
                cookie: tx.cookie,
            },
            TxKind::PutAck { src_cookie, sink } => Body::PutAck {
                src_cookie: *src_cookie,
                dst_cookie: tx.cookie,
                rd: RdmaDesc::single(
                    self.sink.rkey,
                    self.sink
                        .addr
                        .wrapping_add((sink.slot * BULK_BUFFER_BYTES) as u64),
                    sink.header.payload_length,
                ),
            },
            TxKind::Completion {
                code,
                cookie,
                status,
            } => {
                let comp = Completion {
                    cookie: *cookie,
                    status: *status,
                };
                match *code {
                    IBLND_MSG_PUT_NAK => Body::PutNak(comp),
                    IBLND_MSG_GET_DONE => Body::GetDone(comp),
                    _ => Body::PutDone(comp),
                }
            }
            TxKind::PutDone {
                dst_cookie,
                rd,
                payload,
            }
            | TxKind::GetReply {
                cookie: dst_cookie,
                rd,
                payload,
            } => {
                let src_off = tx.src_slot.unwrap_or_default() * BULK_BUFFER_BYTES;
                let status = match rdma_writes(src_off, payload.len(), rd, link.max_frags) {
                    Ok(w) => {
                        self.stats.rdma_bytes += payload.len() as u64;
                        rdma = w;
                        rdma_payload = Some((src_off, payload.clone()));
                        i32::try_from(payload.len()).unwrap_or(i32::MAX)
                    }
                    Err(e) => {
                        tx.failed = Some(TxFailure::LocalMapping);
                        -e
                    }
                };
                let comp = Completion {
                    cookie: *dst_cookie,
                    status,
                };
                if matches!(tx.kind, TxKind::GetReply { .. }) {
                    Body::GetDone(comp)
                } else {
                    Body::PutDone(comp)
                }
            }
            TxKind::Noop => Body::Noop,
        };
        let class = tx.class;
        let credits = link.credits.on_post(class);
        let msg = KibMsg {
            version: link.version,
            credits,
            srcnid: self.me,
            srcstamp: self.incarnation,
            dstnid: link.peer,
            dststamp: link.peer_stamp,
            body,
        };
        let code = msg.msg_type().code();
        let bytes = match msg.encode() {
            Ok(b) if b.len() <= IBLND_MSG_SIZE => b,
            Ok(_) => {
                link.credits.on_post_failed(class);
                self.msg_free.push(msg_slot);
                return Err(PostError::Fatal("message larger than a buffer".into()));
            }
            Err(e) => {
                link.credits.on_post_failed(class);
                self.msg_free.push(msg_slot);
                return Err(PostError::Fatal(format!("encode: {e}")));
            }
        };
        bump(&mut self.stats.tx_msgs, code);
        self.stats.peak_credits_in_use = self
            .stats
            .peak_credits_in_use
            .max(link.credits.peak_in_use());
        link.last_send = now;
        link.tx_msgs += 1;
        tx.msg_slots.push_back(msg_slot);
        tx.queued = false;
        tx.sending += 1;
        tx.waiting = matches!(tx.kind, TxKind::PutReq { .. } | TxKind::PutAck { .. });
        if !link.active.contains(&id) {
            link.active.push(id);
        }
        self.actions.push_back(Action::Post(PostSend {
            conn: c,
            tx: id,
            msg_slot,
            msg: Bytes::from(bytes),
            fill,
            rdma,
            rdma_payload,
        }));
        Ok(())
    }

    /// The signalled send of tx `id` on `conn` completed: its message buffer is free, and
    /// the tx ends if nothing more is awaited. A completion for a tx with no send in
    /// flight (a duplicate, or one of a tx already gone) changes nothing.
    pub fn on_send_complete(&mut self, now: Instant, conn: u32, id: u32) {
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        if tx.sending == 0 {
            return;
        }
        tx.sending -= 1;
        if let Some(s) = tx.msg_slots.pop_front() {
            self.msg_free.push(s);
        }
        let class = tx.class;
        if let Some(link) = self.links.get_mut(&conn) {
            link.credits.on_send_complete(class);
        }
        self.maybe_finish(conn, id);
        if self.msg_starved {
            self.msg_starved = false;
            self.check_all(now);
        } else {
            self.check_sends(now, conn);
        }
    }

    pub(super) fn maybe_finish(&mut self, c: u32, id: u32) {
        let done = self
            .txs
            .get(&id)
            .is_some_and(|t| !t.queued && t.sending == 0 && !t.waiting);
        if !done {
            return;
        }
        let Some(tx) = self.txs.remove(&id) else {
            return;
        };
        if let Some(link) = self.links.get_mut(&c) {
            link.active.retain(|t| *t != id);
        }
        self.release(&tx);
        let result = match tx.failed {
            Some(f) => Err(f),
            None => Ok(()),
        };
        self.complete(tx.peer, tx.upper, result, "");
    }
}

/// The RDMA WRITEs that copy `len` bytes at `src_off` of the source buffers into `rd`, one
/// per destination fragment; the error is a positive errno.
fn rdma_writes(
    src_off: usize,
    len: usize,
    rd: &RdmaDesc,
    max_frags: u16,
) -> Result<Vec<RdmaWrite>, i32> {
    let mut out = Vec::new();
    let mut done = 0usize;
    for frag in &rd.frags {
        if done >= len {
            break;
        }
        let n = (len - done).min(usize::try_from(frag.nob).unwrap_or(0));
        if n == 0 {
            continue;
        }
        if out.len() >= usize::from(max_frags) {
            return Err(EMSGSIZE);
        }
        out.push(RdmaWrite {
            src_offset: src_off + done,
            len: u32::try_from(n).map_err(|_| EMSGSIZE)?,
            remote_addr: frag.addr,
            rkey: rd.key,
        });
        done += n;
    }
    if done < len {
        return Err(EMSGSIZE);
    }
    Ok(out)
}
