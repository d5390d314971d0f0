//! Closing a peer's connections: one that ended takes its siblings with it, sends are
//! completed or requeued, and the upper layer hears when the peer is down.

use super::tx::{Done, Queued};
use super::PeerTask;
use crate::lnd::{LndHandler, PeerDown};
use crate::socklnd::conn::end::ConnEnd;
use crate::socklnd::stats::CloseReason;
use crate::socklnd::status::TxFailure;

impl<H: LndHandler> PeerTask<H> {
    /// Connection `id` ended: close it and, as the kernel does, every other connection
    /// to the peer. Their unsent messages go back to the queue (a new set is opened for
    /// them); the sends being written fail as `end` says. Tells the upper layer if the
    /// peer is now down.
    pub(super) fn close_with_siblings(&mut self, id: u64, end: &ConnEnd) {
        if !self.conns.iter().any(|c| c.id == id) {
            return;
        }
        self.close_conn(id, end, false);
        let failure = end.failure();
        let siblings: Vec<u64> = self.conns.iter().map(|c| c.id).collect();
        if !siblings.is_empty() {
            tracing::info!(peer = %self.id, n = siblings.len(), "socklnd: closing the sibling connections of a closed connection");
        }
        for sib in siblings {
            self.close_conn(sib, &ConnEnd::Sibling(failure), false);
        }
        self.maybe_peer_down(failure, &end.to_string());
    }

    /// Tells the upper layer the peer is down if it has no connection, none is being set
    /// up, nothing waits to be sent, and it was not told already.
    pub(super) fn maybe_peer_down(&mut self, failure: TxFailure, why: &str) {
        let busy = self.reserved.values().any(|n| *n > 0) || !self.connects.is_empty();
        if self.down_reported || !self.conns.is_empty() || busy || !self.tx.lock().queue.is_empty()
        {
            return;
        }
        self.down_reported = true;
        tracing::info!(peer = %self.id, "socklnd: peer down: {why}");
        self.ni.handler.on_peer_down(PeerDown::new(
            self.ni.me.nid,
            self.id.nid,
            failure.status(),
            why.to_owned(),
        ));
    }

    pub(super) fn close_all(&mut self, end: impl Fn() -> ConnEnd) {
        let ids: Vec<u64> = self.conns.iter().map(|c| c.id).collect();
        for id in ids {
            self.close_conn(id, &end(), false);
        }
    }

    /// Drops connection `id`: sends written whole complete OK, those of the write under
    /// way fail as `end` says, the others (never started) go back to the queue (or fail
    /// as aborted when `stopping`).
    pub(super) fn close_conn(&mut self, id: u64, end: &ConnEnd, stopping: bool) {
        let Some(pos) = self.conns.iter().position(|c| c.id == id) else {
            return;
        };
        let conn = self.conns.remove(pos);
        // First the fence: from here on the writer starts no write, so a send it has not
        // started can be sent again elsewhere without reaching the peer twice.
        let under_way = conn.progress.close();
        for t in &conn.tasks {
            t.abort();
        }
        // The set changed: opening connections may help again.
        self.refusals = 0;
        if !stopping {
            let reason = CloseReason::of_end(end);
            self.ni.closes.count(reason);
            tracing::info!(peer = %self.id, ctype = ?conn.ctype, conn = id, ?reason, "socklnd: connection closed: {end}");
        }
        let mut done = Done::new();
        let busy = self.reserved.values().any(|n| *n > 0) || !self.connects.is_empty();
        {
            let mut st = self.tx.lock();
            // In the order they were handed out, which those sent again keep.
            let inflight = st.remove_conn(id).unwrap_or_default();
            let mut back = Vec::new();
            for inf in inflight {
                let seq = inf.seq;
                if conn.progress.is_done(seq) {
                    done.push((inf.tx, None));
                } else if stopping {
                    done.push((inf.tx, Some((TxFailure::Stopped, "NI stopped".to_owned()))));
                } else if under_way.as_ref().is_some_and(|r| r.contains(&seq)) {
                    done.push((inf.tx, Some((end.failure(), end.to_string()))));
                } else {
                    back.push(Queued {
                        tx: inf.tx,
                        since: inf.since,
                    });
                }
            }
            for q in back.into_iter().rev() {
                st.queue.push_front(q);
            }
            if st.has_no_conn() && !busy {
                // Nothing left of this incarnation of the peer.
                st.pending_noops.clear();
            }
        }
        if self.conns.is_empty() && !busy {
            self.record = None;
        }
        self.complete_all(done);
    }

    pub(super) fn shutdown(&mut self) {
        self.connects.abort_all();
        {
            let mut st = self.tx.lock();
            self.tx.stop(&mut st);
        }
        let ids: Vec<u64> = self.conns.iter().map(|c| c.id).collect();
        for id in ids {
            self.close_conn(id, &ConnEnd::Local, true);
        }
        self.fail_queue(TxFailure::Stopped, "NI stopped");
        self.tasks.abort_all();
    }
}
