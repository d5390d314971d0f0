//! The receive side: a received message checked against its connection, its credits
//! taken, and its body acted on (IMMEDIATE, PUT_REQ/ACK/NAK/DONE, GET_REQ), with the layer
//! above asked about each LNet header.

use super::*;

impl<H: LndHandler> State<H> {
    pub(super) fn repost_rx(&mut self, c: u32, idx: usize) -> bool {
        let Some(conn) = self.conns.get(&c) else {
            return false;
        };
        let off = idx * IBLND_MSG_SIZE;
        conn.id
            .post_recv(
                wr_id(WR_RX, c, u32::try_from(idx).unwrap_or(u32::MAX)),
                self.pools.rx.addr(off),
                u32::try_from(IBLND_MSG_SIZE).unwrap_or(u32::MAX),
                self.pools.rx.lkey(),
            )
            .is_ok()
    }

    pub(super) async fn on_rx(&mut self, c: u32, idx: usize, len: usize) {
        let Some(raw) = self
            .pools
            .rx
            .read(idx * IBLND_MSG_SIZE, len.min(IBLND_MSG_SIZE))
        else {
            return;
        };
        let raw = Bytes::copy_from_slice(raw);
        if !self.repost_rx(c, idx) {
            self.close_conn(c, CloseWhy::Local);
            return;
        }
        let msg = match KibMsg::unpack_bytes(&raw) {
            Ok(u) => u.msg,
            Err(e) => {
                tracing::warn!(conn = c, error = %e, "o2iblnd: bad message, closing");
                self.close_conn(c, CloseWhy::Local);
                return;
            }
        };
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        if msg.srcnid != conn.peer
            || msg.dstnid != self.me.nid
            || msg.srcstamp != conn.peer_stamp
            || msg.dststamp != self.me.incarnation
            || msg.version != conn.version
        {
            tracing::warn!(conn = c, "o2iblnd: stale message, closing");
            self.close_conn(c, CloseWhy::Local);
            return;
        }
        if let Err(e) = conn.credits.on_rx_credits(msg.credits) {
            tracing::warn!(conn = c, error = %e, "o2iblnd: credit overflow, closing");
            self.close_conn(c, CloseWhy::Local);
            return;
        }
        let peer = conn.peer;
        let version = conn.version;
        bump(&mut self.stats.rx_msgs, msg.msg_type().code());
        let from = ProcessId::lustre(peer);
        match msg.body {
            Body::Noop => {
                if version == Version::V1 {
                    self.owe_credit(c);
                }
            }
            Body::Immediate { hdr, payload } => {
                if hdr.check_lnet().is_err() {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
                let decision = self.header(from, hdr).await;
                match decision {
                    RxDecision::Receive(mut buf) => {
                        buf.clear();
                        buf.extend_from_slice(&payload);
                        self.deliver(from, hdr, buf.freeze()).await;
                    }
                    RxDecision::Discard => {}
                    RxDecision::Close => {
                        self.close_conn(c, CloseWhy::Local);
                        return;
                    }
                }
                self.owe_credit(c);
            }
            Body::PutReq { hdr, cookie } => {
                if hdr.check_lnet().is_err() {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
                match self.header(from, hdr).await {
                    RxDecision::Receive(buf) if hdr.payload_length > 0 => {
                        self.pending_sinks.push_back(PendingSink {
                            conn: c,
                            src_cookie: cookie,
                            buf,
                            header: hdr,
                        });
                        self.start_sinks();
                    }
                    RxDecision::Receive(_) | RxDecision::Discard => {
                        let id = self.add_tx(
                            peer,
                            None,
                            TxKind::Completion {
                                code: crate::o2iblnd::wire::IBLND_MSG_PUT_NAK,
                                cookie,
                                status: 0,
                            },
                        );
                        self.queue_on_conn(c, id);
                        self.owe_credit(c);
                    }
                    RxDecision::Close => {
                        self.close_conn(c, CloseWhy::Local);
                        return;
                    }
                }
            }
            Body::PutAck {
                src_cookie,
                dst_cookie,
                rd,
            } => {
                let Some(id) =
                    self.find_waiting(c, src_cookie, |k| matches!(k, TxKind::PutReq { .. }))
                else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.credits.reserved_back();
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
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.active.retain(|t| *t != id);
                }
                self.queue_on_conn(c, id);
            }
            Body::PutNak(comp) => {
                let Some(id) =
                    self.find_waiting(c, comp.cookie, |k| matches!(k, TxKind::PutReq { .. }))
                else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.credits.reserved_back();
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
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                self.owe_credit(c);
                let mut delivery = None;
                if let Some(tx) = self.txs.get_mut(&id) {
                    tx.waiting = false;
                    if let TxKind::PutAck { sink, .. } = &mut tx.kind {
                        let want =
                            usize::try_from(sink.header.payload_length).unwrap_or(usize::MAX);
                        if usize::try_from(comp.status).ok() == Some(want) {
                            if let Some(data) =
                                self.pools.sink.read(sink.slot * BULK_BUFFER_BYTES, want)
                            {
                                let mut buf = std::mem::take(&mut sink.buf);
                                buf.clear();
                                buf.extend_from_slice(data);
                                delivery = Some((sink.from, sink.header, buf.freeze()));
                            }
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
                if let Some((from, hdr, payload)) = delivery {
                    self.deliver(from, hdr, payload).await;
                }
                self.start_sinks();
            }
            Body::GetReq { hdr, cookie, rd } => {
                let Message::Get { return_wmd, .. } = hdr.msg else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                if hdr.check_lnet().is_err() {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
                match self.header(from, hdr).await {
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
                        self.deliver(from, hdr, buf.freeze()).await;
                    }
                    RxDecision::Discard => {
                        let id = self.add_tx(
                            peer,
                            None,
                            TxKind::Completion {
                                code: crate::o2iblnd::wire::IBLND_MSG_GET_DONE,
                                cookie,
                                status: -ENODATA,
                            },
                        );
                        self.queue_on_conn(c, id);
                        self.owe_credit(c);
                    }
                    RxDecision::Close => {
                        self.close_conn(c, CloseWhy::Local);
                        return;
                    }
                }
            }
            Body::GetDone(_) | Body::ConnReq(_) | Body::ConnAck(_) => {
                // This NI never sends GET_REQ; a handshake message on a live QP is wrong.
                tracing::warn!(conn = c, "o2iblnd: unexpected message type, closing");
                self.close_conn(c, CloseWhy::Local);
                return;
            }
        }
        self.check_sends(c);
    }

    pub(super) async fn header(&self, from: ProcessId, header: Header) -> RxDecision {
        let h = self.handler.clone();
        h.on_header(RxHeader {
            ni: self.me.nid,
            from,
            header,
        })
        .await
    }

    pub(super) async fn deliver(&self, from: ProcessId, header: Header, payload: Bytes) {
        let h = self.handler.clone();
        h.on_message(RxMessage {
            ni: self.me.nid,
            from,
            header,
            payload,
        })
        .await;
    }

    pub(super) fn find_waiting(
        &self,
        c: u32,
        cookie: Cookie,
        kind: impl Fn(&TxKind) -> bool,
    ) -> Option<u32> {
        let conn = self.conns.get(&c)?;
        conn.active.iter().copied().find(|id| {
            self.txs
                .get(id)
                .is_some_and(|t| t.waiting && t.cookie == cookie && kind(&t.kind))
        })
    }

    /// Gives sink buffers to PUT_REQs that wait for one, and queues their PUT_ACKs.
    pub(super) fn start_sinks(&mut self) {
        while let Some(p) = self.pending_sinks.front() {
            if !self.conns.contains_key(&p.conn) {
                self.pending_sinks.pop_front();
                continue;
            }
            let Some(slot) = self.sink_free.pop() else {
                return;
            };
            let Some(p) = self.pending_sinks.pop_front() else {
                return;
            };
            let Some(peer) = self.conns.get(&p.conn).map(|c| c.peer) else {
                self.sink_free.push(slot);
                continue;
            };
            let id = self.add_tx(
                peer,
                None,
                TxKind::PutAck {
                    src_cookie: p.src_cookie,
                    sink: Sink {
                        buf: p.buf,
                        header: p.header,
                        from: ProcessId::lustre(peer),
                        slot,
                    },
                },
            );
            self.queue_on_conn(p.conn, id);
            self.check_sends(p.conn);
        }
    }
}
