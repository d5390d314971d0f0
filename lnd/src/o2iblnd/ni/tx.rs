//! The send side: a tx from the layer above queued on a connection (or on its peer while
//! the connection comes up), credits checked, the message and its RDMA writes posted, and
//! the completions of posted sends drained from the completion queue.

use super::*;

impl<H: LndHandler> State<H> {
    pub(super) fn send(&mut self, req: TxRequest) {
        let peer = req.peer;
        if self.fatal {
            self.complete_upper(
                peer,
                Some(req.id),
                Err(TxFailure::DeviceRemoved),
                "RDMA device gone",
            );
            return;
        }
        // A REPLY to an optimised GET of this peer goes straight into its sink buffer.
        if let Message::Reply { dst_wmd } = req.header.msg {
            if let Some(pg) = self.pending_gets.remove(&(peer, dst_wmd)) {
                if self.conns.contains_key(&pg.conn) {
                    let id = self.add_tx(
                        peer,
                        Some(req.id),
                        TxKind::GetReply {
                            cookie: pg.cookie,
                            rd: pg.rd,
                            payload: req.payload,
                        },
                    );
                    self.queue_on_conn(pg.conn, id);
                    self.owe_credit(pg.conn);
                    self.check_sends(pg.conn);
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
        let id = self.add_tx(peer, Some(req.id), kind);
        self.launch(peer, id);
    }

    pub(super) fn established_conn(&self, peer: Nid) -> Option<u32> {
        let p = self.peers.get(&peer)?;
        p.conns.iter().copied().find(|c| {
            self.conns
                .get(c)
                .is_some_and(|c| c.state == ConnState::Established)
        })
    }

    pub(super) fn launch(&mut self, peer: Nid, id: u32) {
        if let Some(c) = self.established_conn(peer) {
            self.queue_on_conn(c, id);
            self.check_sends(c);
            return;
        }
        let p = self.peers.entry(peer).or_default();
        p.queue.push_back(id);
        if !p.connecting && p.retry_at.is_none() {
            self.start_connect(peer);
        }
    }

    pub(super) fn queue_on_conn(&mut self, c: u32, id: u32) {
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        tx.conn = Some(c);
        tx.queued = true;
        tx.deadline = Instant::now() + self.cfg.timeout;
        tx.class = tx.kind.class();
        match tx.kind {
            TxKind::PutReq { .. } => conn.rsrvd.push_back(id),
            TxKind::Immediate { .. } => conn.credit_q.push_back(id),
            _ => conn.nocred.push_back(id),
        }
    }

    pub(super) fn check_sends(&mut self, c: u32) {
        let keepalive = self.cfg.keepalive;
        loop {
            let Some(conn) = self.conns.get_mut(&c) else {
                return;
            };
            if conn.state != ConnState::Established {
                return;
            }
            while !conn.rsrvd.is_empty() && conn.credits.take_reserved() {
                if let Some(t) = conn.rsrvd.pop_front() {
                    conn.credit_q.push_back(t);
                }
            }
            let keepalive_due = keepalive.is_some_and(|k| conn.last_send.elapsed() >= k);
            let noop_queued = conn.nocred.iter().any(|t| {
                self.txs
                    .get(t)
                    .is_some_and(|t| matches!(t.kind, TxKind::Noop))
            });
            if !noop_queued
                && conn.credits.need_noop(
                    !conn.nocred.is_empty(),
                    conn.credit_q.is_empty(),
                    keepalive_due,
                )
            {
                let peer = conn.peer;
                let id = self.add_tx(peer, None, TxKind::Noop);
                self.queue_on_conn(c, id);
                continue;
            }
            let Some(conn) = self.conns.get_mut(&c) else {
                return;
            };
            let (id, from_nocred) = match (conn.nocred.front(), conn.credit_q.front()) {
                (Some(&t), _) => (t, true),
                (None, Some(&t)) => (t, false),
                (None, None) => return,
            };
            let Some(tx) = self.txs.get(&id) else {
                if from_nocred {
                    conn.nocred.pop_front();
                } else {
                    conn.credit_q.pop_front();
                }
                continue;
            };
            let class = tx.class;
            if class == SendClass::Noop
                && conn
                    .credits
                    .noop_surplus(conn.nocred.len() > 1, conn.credit_q.is_empty())
                && !keepalive_due
            {
                conn.nocred.pop_front();
                self.txs.remove(&id);
                continue;
            }
            if !conn.credits.can_post(class) {
                return;
            }
            if from_nocred {
                conn.nocred.pop_front();
            } else {
                conn.credit_q.pop_front();
            }
            match self.post_tx(c, id) {
                Ok(()) => {}
                Err(PostError::Starved) => {
                    if let Some(conn) = self.conns.get_mut(&c) {
                        if from_nocred {
                            conn.nocred.push_front(id);
                        } else {
                            conn.credit_q.push_front(id);
                        }
                    }
                    self.msg_starved = true;
                    return;
                }
                Err(PostError::Fatal(why)) => {
                    tracing::warn!(%why, "o2iblnd: post failed, closing connection");
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
            }
        }
    }

    pub(super) fn post_tx(&mut self, c: u32, id: u32) -> Result<(), PostError> {
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
        let (Some(conn), Some(tx)) = (self.conns.get_mut(&c), self.txs.get_mut(&id)) else {
            self.msg_free.push(msg_slot);
            if let Some(s) = src_slot {
                self.src_free.push(s);
            }
            return Ok(());
        };
        if let Some(s) = src_slot {
            tx.src_slot = Some(s);
            let payload = match &tx.kind {
                TxKind::PutReq { payload, .. } | TxKind::GetReply { payload, .. } => {
                    payload.clone()
                }
                _ => Bytes::new(),
            };
            if self
                .pools
                .src
                .write(s * BULK_BUFFER_BYTES, &payload)
                .is_none()
            {
                return Err(PostError::Fatal("payload larger than a bulk buffer".into()));
            }
        }
        let mut wrs = Vec::new();
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
                    self.pools.sink.rkey(),
                    self.pools.sink.addr(sink.slot * BULK_BUFFER_BYTES),
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
                    crate::o2iblnd::wire::IBLND_MSG_PUT_NAK => Body::PutNak(comp),
                    crate::o2iblnd::wire::IBLND_MSG_GET_DONE => Body::GetDone(comp),
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
                let status = match rdma_writes(
                    &self.pools.src,
                    src_off,
                    payload.len(),
                    rd,
                    conn.max_frags,
                    wr_id(WR_RDMA, c, id),
                ) {
                    Ok(w) => {
                        self.stats.rdma_bytes += payload.len() as u64;
                        wrs = w;
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
        let credits = conn.credits.on_post(class);
        let msg = KibMsg {
            version: conn.version,
            credits,
            srcnid: self.me.nid,
            srcstamp: self.me.incarnation,
            dstnid: conn.peer,
            dststamp: conn.peer_stamp,
            body,
        };
        let code = msg.msg_type().code();
        let bytes = match msg.encode() {
            Ok(b) => b,
            Err(e) => {
                conn.credits.on_post_failed(class);
                self.msg_free.push(msg_slot);
                return Err(PostError::Fatal(format!("encode: {e}")));
            }
        };
        let off = msg_slot * IBLND_MSG_SIZE;
        if self.pools.msgs.write(off, &bytes).is_none() {
            conn.credits.on_post_failed(class);
            self.msg_free.push(msg_slot);
            return Err(PostError::Fatal("message larger than a buffer".into()));
        }
        wrs.push(SendWr {
            addr: self.pools.msgs.addr(off),
            len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            lkey: self.pools.msgs.lkey(),
            wr_id: wr_id(WR_TX, c, id),
            rdma: None,
            signaled: true,
        });
        if let Err(e) = conn.id.post_send(&wrs) {
            conn.credits.on_post_failed(class);
            self.msg_free.push(msg_slot);
            return Err(PostError::Fatal(format!("ibv_post_send: {e}")));
        }
        bump(&mut self.stats.tx_msgs, code);
        self.stats.peak_credits_in_use = self
            .stats
            .peak_credits_in_use
            .max(conn.credits.peak_in_use());
        conn.last_send = Instant::now();
        tx.msg_slots.push_back(msg_slot);
        tx.queued = false;
        tx.sending += 1;
        tx.waiting = matches!(tx.kind, TxKind::PutReq { .. } | TxKind::PutAck { .. });
        if !conn.active.contains(&id) {
            conn.active.push(id);
        }
        Ok(())
    }

    pub(super) async fn drain_cq(&mut self) {
        let mut wcs = [ibv_wc::default(); POLL_BATCH];
        loop {
            let n = match self.cq.poll(&mut wcs) {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(error = %e, "o2iblnd: CQ poll failed");
                    self.fatal = true;
                    return;
                }
            };
            if n == 0 {
                if self.cq.arm().is_err() {
                    self.fatal = true;
                    return;
                }
                // A completion may have landed between the last poll and the re-arm.
                match self.cq.poll(&mut wcs) {
                    Ok(0) => return,
                    Ok(m) => {
                        for wc in wcs.iter().take(m).copied().collect::<Vec<_>>() {
                            self.on_wc(wc).await;
                        }
                        continue;
                    }
                    Err(_) => return,
                }
            }
            for wc in wcs.iter().take(n).copied().collect::<Vec<_>>() {
                self.on_wc(wc).await;
            }
        }
    }

    pub(super) async fn on_wc(&mut self, wc: ibv_wc) {
        let (kind, c, slot) = wr_split(wc.wr_id());
        if !self.conns.contains_key(&c) {
            return;
        }
        if let Some((status, vendor)) = wc.error() {
            let flushed = status == ibverbs::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
            if !flushed {
                self.stats.wc_errors += 1;
            }
            tracing::warn!(
                conn = c,
                kind,
                status,
                vendor,
                "o2iblnd: work completion failed"
            );
            self.close_conn(c, CloseWhy::PeerGone);
            return;
        }
        match kind {
            WR_TX => self.on_tx_done(c, slot),
            WR_RX => {
                let idx = usize::try_from(slot).unwrap_or(usize::MAX);
                let len = wc.len();
                let parked = match self.conns.get_mut(&c) {
                    Some(conn) if conn.state != ConnState::Established => {
                        conn.parked_rx.push((idx, len));
                        true
                    }
                    _ => false,
                };
                if !parked {
                    self.on_rx(c, idx, len).await;
                }
            }
            _ => {}
        }
    }

    pub(super) fn on_tx_done(&mut self, c: u32, id: u32) {
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        tx.sending = tx.sending.saturating_sub(1);
        if let Some(s) = tx.msg_slots.pop_front() {
            self.msg_free.push(s);
        }
        let class = tx.class;
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.credits.on_send_complete(class);
        }
        self.maybe_finish(c, id);
        if self.msg_starved {
            self.msg_starved = false;
            let all: Vec<u32> = self.conns.keys().copied().collect();
            for k in all {
                self.check_sends(k);
            }
        } else {
            self.check_sends(c);
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
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.active.retain(|t| *t != id);
        }
        self.release(&tx);
        let result = match tx.failed {
            Some(f) => Err(f),
            None => Ok(()),
        };
        self.complete_upper(tx.peer, tx.upper, result, "");
    }

    pub(super) fn release(&mut self, tx: &Tx) {
        self.msg_free.extend(tx.msg_slots.iter().copied());
        if let Some(s) = tx.src_slot {
            self.src_free.push(s);
            self.msg_starved = true;
        }
        if let TxKind::PutAck { sink, .. } = &tx.kind {
            self.sink_free.push(sink.slot);
        }
    }

    pub(super) fn owe_credit(&mut self, c: u32) {
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.credits.owe_peer_credit();
        }
    }
}

/// The RDMA WRITE work requests that copy `len` bytes at `src_off` of `src` into `rd`,
/// one request per destination fragment; the error is a positive errno.
fn rdma_writes(
    src: &Region,
    src_off: usize,
    len: usize,
    rd: &RdmaDesc,
    max_frags: u16,
    id: u64,
) -> Result<Vec<SendWr>, i32> {
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
        out.push(SendWr {
            addr: src.addr(src_off + done),
            len: u32::try_from(n).map_err(|_| EMSGSIZE)?,
            lkey: src.lkey(),
            wr_id: id,
            rdma: Some((frag.addr, rd.key)),
            signaled: false,
        });
        done += n;
    }
    if done < len {
        return Err(EMSGSIZE);
    }
    Ok(out)
}
