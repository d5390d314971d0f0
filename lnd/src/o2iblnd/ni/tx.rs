//! The send side on verbs: a [`PostSend`] the exchanges decided turned into work requests
//! (the payload copied into its source buffer, the message into its message buffer, the
//! RDMA WRITEs and the SEND posted on the connection's QP), and the completion queue
//! drained into the exchanges and the receive side.

use super::*;
use crate::o2iblnd::exchange::{PostSend, RdmaWrite};

impl<H: LndHandler> State<H> {
    /// A send from the layer above.
    pub(super) fn send(&mut self, req: TxRequest) {
        if self.fatal {
            self.handler.on_send_complete(completion(
                self.me.nid,
                req.peer,
                req.id,
                Err(TxFailure::DeviceRemoved),
                "RDMA device gone",
            ));
            return;
        }
        self.ex.send(Instant::now(), req);
    }

    /// Posts `p` on its connection; a failure closes the connection.
    pub(super) fn post(&mut self, p: PostSend) {
        let c = p.conn;
        if let Err(why) = self.try_post(p) {
            tracing::warn!(%why, "o2iblnd: post failed, closing connection");
            self.close_conn(c, CloseWhy::Local);
        }
    }

    fn try_post(&mut self, p: PostSend) -> Result<(), String> {
        let Some(conn) = self.conns.get(&p.conn) else {
            // Closed since the exchanges decided: its txs already failed.
            return Ok(());
        };
        if let Some(fill) = &p.fill {
            // A payload in a registered buffer is written from where it lies (below).
            if self.in_place(&fill.payload).is_none() {
                self.pools
                    .src
                    .write(fill.slot * BULK_BUFFER_BYTES, &fill.payload)
                    .ok_or("payload larger than a bulk buffer")?;
            }
        }
        let off = p.msg_slot * IBLND_MSG_SIZE;
        self.pools
            .msgs
            .write(off, &p.msg)
            .ok_or("message larger than a buffer")?;
        let rdma_id = wr_id(WR_RDMA, p.conn, p.tx);
        let from = p
            .rdma_payload
            .as_ref()
            .filter(|_| !p.rdma.is_empty())
            .and_then(|(start, payload)| {
                let lkey = self.in_place(payload)?;
                Some((*start, payload.as_ptr() as u64, lkey))
            });
        if !p.rdma.is_empty() {
            if from.is_some() {
                self.stats.bulk_sent_in_place += 1;
            } else {
                self.stats.bulk_sent_copied += 1;
            }
        }
        let mut wrs: Vec<SendWr> = p
            .rdma
            .iter()
            .map(|w| match from {
                // The payload's own memory: the write's offset in it is its offset in
                // the source buffers less where the payload starts there.
                Some((start, addr, lkey)) => SendWr {
                    addr: addr.wrapping_add(w.src_offset.saturating_sub(start) as u64),
                    len: w.len,
                    lkey,
                    wr_id: rdma_id,
                    rdma: Some((w.remote_addr, w.rkey)),
                    signaled: false,
                },
                None => rdma_wr(&self.pools.src, w, rdma_id),
            })
            .collect();
        wrs.push(SendWr {
            addr: self.pools.msgs.addr(off),
            len: u32::try_from(p.msg.len()).unwrap_or(u32::MAX),
            lkey: self.pools.msgs.lkey(),
            wr_id: wr_id(WR_TX, p.conn, p.tx),
            rdma: None,
            signaled: true,
        });
        conn.id
            .post_send(&wrs)
            .map_err(|e| format!("ibv_post_send: {e}"))
    }

    /// The local key of `payload`'s memory when it lies in one of the layer above's
    /// registered buffers: then RDMA writes it from there.
    fn in_place(&self, payload: &Bytes) -> Option<u32> {
        if payload.is_empty() {
            return None;
        }
        self.registered
            .as_ref()?
            .key(payload.as_ptr() as usize, payload.len())
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

    async fn on_wc(&mut self, wc: ibv_wc) {
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
            self.run_actions().await;
            return;
        }
        match kind {
            WR_TX => {
                self.ex.on_send_complete(Instant::now(), c, slot);
                self.run_actions().await;
            }
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
}

/// The work request of one RDMA WRITE from the source buffers.
fn rdma_wr(src: &Region, w: &RdmaWrite, id: u64) -> SendWr {
    SendWr {
        addr: src.addr(w.src_offset),
        len: w.len,
        lkey: src.lkey(),
        wr_id: id,
        rdma: Some((w.remote_addr, w.rkey)),
        signaled: false,
    }
}
