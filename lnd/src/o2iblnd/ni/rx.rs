//! The receive side on verbs: a completed receive buffer read and posted again, its
//! message fed to the exchanges, the layer above asked about the LNet header the
//! exchanges hand back, and received messages delivered to it.

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

    /// The receive buffer `idx` of connection `c` holds a message of `len` bytes.
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
            self.run_actions().await;
            return;
        }
        if let Some(query) = self.ex.on_receive(Instant::now(), c, &raw) {
            let decision = self.header(query.from(), query.header()).await;
            self.ex.on_header_decision(Instant::now(), query, decision);
        }
        self.run_actions().await;
    }

    async fn header(&self, from: ProcessId, header: Header) -> RxDecision {
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
}
