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
            let h = self.handler.clone();
            let rx = RxHeader {
                ni: self.me.nid,
                from: query.from(),
                header: query.header(),
            };
            let mut judged: Parked = Box::pin(async move {
                let decision = h.on_header(rx).await;
                (query, decision)
            });
            // Most headers are judged at once; one that waits (for a router buffer) is
            // parked, and the ones behind it do not wait for it.
            match (&mut judged).now_or_never() {
                Some((query, decision)) => {
                    self.ex.on_header_decision(Instant::now(), query, decision);
                }
                None => self.parked.push(judged),
            }
        }
        self.run_actions().await;
    }

    /// The layer above judged a parked header.
    pub(super) fn on_judged(&mut self, query: HeaderQuery, decision: RxDecision) {
        self.ex.on_header_decision(Instant::now(), query, decision);
    }

    /// Hands a received message to the layer above, without waiting for it: a message
    /// it cannot take at once waits in order behind the ones before it.
    pub(super) fn deliver(&mut self, from: ProcessId, header: Header, payload: Bytes) {
        let h = self.handler.clone();
        let msg = RxMessage {
            ni: self.me.nid,
            from,
            header,
            payload,
            received_at: tokio::time::Instant::now(),
        };
        let mut handed: Delivery = Box::pin(async move { h.on_message(msg).await });
        match self
            .delivering
            .is_empty()
            .then(|| (&mut handed).now_or_never())
        {
            Some(Some(())) => {}
            _ => self.delivering.push_back(handed),
        }
    }
}
