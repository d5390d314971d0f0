//! The send side of one peer, shared by its task, the NI's senders and the peer's
//! writers: the queue and the sends handed to connections.
//!
//! socklnd counts no credits: the LNet layer above charges the NI and peer NI tx
//! credits (`credits`, `peer_credits`) and holds back what finds none, as the kernel
//! does. A send waits here only for a connection that may carry it and for room on that
//! connection's writer queue (`peer_credits` frames, with room kept for NOOPs).
//!
//! Whoever frees what a waiting send needs moves it on at once: a sender that finds a
//! connection with room queues its frame on that connection itself, and whoever writes a
//! round of frames (the connection's writer task, or a reader writing what it forwarded,
//! see `conn::batch`) completes those sends and dispatches what waits. The peer task is
//! woken only for what it alone does (opening connections, timing out the queue). The
//! lock is short, never held across an await, and completions run after it is released.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use lnet::{HeaderForm, Nid, ProcessId};
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::lnd::{LndHandler, TxCompletion, TxRequest};
use crate::socklnd::conn::item::WriteItem;
use crate::socklnd::conn::queue::ConnQueue;
use crate::socklnd::placement::{self, Candidate, Traffic};
use crate::socklnd::status::TxFailure;
use crate::socklnd::wire::{lnet_frame_len, KsockHeader};

/// A send waiting for a credit or a connection.
pub(crate) struct Queued {
    pub(crate) tx: TxRequest,
    pub(crate) since: Instant,
}

/// Places on a writer's queue kept for NOOPs: LNET frames use the rest.
pub(crate) const NOOP_ROOM: usize = 16;

/// A send handed to a connection's writer and not yet completed.
pub(crate) struct Inflight {
    /// The peer's send number.
    pub(crate) seq: u64,
    pub(crate) tx: TxRequest,
    pub(crate) since: Instant,
    pub(crate) frame_len: usize,
}

/// An established connection as the send side uses it: its writer's queue and the sends
/// handed to it, in the order the writer writes them (so that a round written whole
/// completes from the front, without a search).
struct Link {
    id: u64,
    writer: Arc<dyn ConnQueue>,
    inflight: VecDeque<Inflight>,
}

/// Settles sends `seqs` of `inflight`, in the order they were written, so most often from
/// the front: `each` sees every one found, which is then let go where it lies (the run
/// settled from the front is dropped together, in place, not moved out one by one).
fn settle(inflight: &mut VecDeque<Inflight>, seqs: &[u64], mut each: impl FnMut(&Inflight)) {
    // The first `front` sends are settled.
    let mut front = 0;
    for seq in seqs {
        match inflight.get(front) {
            Some(f) if f.seq == *seq => {
                each(f);
                front += 1;
            }
            _ => {
                // Out of order: wherever it is after the settled run.
                let found = inflight.iter().skip(front).position(|f| f.seq == *seq);
                if let Some(i) = found.map(|i| i + front) {
                    if let Some(f) = inflight.get(i) {
                        each(f);
                    }
                    inflight.remove(i);
                }
            }
        }
    }
    inflight.drain(..front);
}

/// What [`PeerTx::try_send`] did with a send.
pub(crate) enum Pushed {
    /// Queued (and dispatched if a writer had room).
    Taken,
    /// The queue is full: the send is back.
    Full(TxRequest),
    /// The peer task stopped: the send is back.
    Stopped(TxRequest),
}

/// Sends to complete once the lock is released, with why they failed if they did.
pub(crate) type Done = Vec<(TxRequest, Option<(TxFailure, String)>)>;

/// The send state behind the lock.
pub(crate) struct TxState {
    /// Each established connection, in the order of `cands`.
    links: Vec<Link>,
    /// Each established connection as placement sees it.
    pub(crate) cands: Vec<Candidate>,
    pub(crate) queue: VecDeque<Queued>,
    next_seq: u64,
    use_clock: u64,
    /// ZC-ACKs waiting for room on a writer.
    pub(crate) pending_noops: VecDeque<KsockHeader>,
    /// The peer task stopped: no send is taken any more.
    pub(crate) stopped: bool,
    /// A sender waits for room in the queue.
    senders_waiting: bool,
}

/// The shared send side of a peer.
pub(crate) struct PeerTx {
    state: Mutex<TxState>,
    /// Wakes the peer task: sends wait that it must act on.
    pub(crate) kick: Notify,
    /// Wakes senders waiting for room in the queue.
    room: Notify,
    min_bulk: usize,
    queue_limit: usize,
}

impl PeerTx {
    /// An empty send side queueing at most `queue_limit` sends; frames of at least
    /// `min_bulk` bytes prefer the bulk connections.
    pub(crate) fn new(min_bulk: usize, queue_limit: usize) -> PeerTx {
        PeerTx {
            state: Mutex::new(TxState {
                links: Vec::new(),
                cands: Vec::new(),
                queue: VecDeque::new(),
                next_seq: 1,
                use_clock: 0,
                pending_noops: VecDeque::new(),
                stopped: false,
                senders_waiting: false,
            }),
            kick: Notify::new(),
            room: Notify::new(),
            min_bulk,
            queue_limit,
        }
    }

    /// The state, for a short change that never awaits.
    pub(crate) fn lock(&self) -> MutexGuard<'_, TxState> {
        // Nothing under this lock panics; a poisoned lock still holds consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `tx` and dispatches what can go, waiting while the queue is full. Gives the
    /// send back if the peer task has stopped.
    pub(crate) async fn send(&self, mut tx: TxRequest) -> Result<(), TxRequest> {
        loop {
            let room = self.room.notified();
            match self.try_send(tx) {
                Pushed::Taken => return Ok(()),
                Pushed::Stopped(back) => return Err(back),
                Pushed::Full(back) => tx = back,
            }
            room.await;
        }
    }

    /// Queues `tx` and dispatches what can go, unless the queue is full or the peer task
    /// has stopped; never waits. A sender that finds the queue full is woken (through
    /// `room`) when it has room again.
    pub(crate) fn try_send(&self, tx: TxRequest) -> Pushed {
        let mut st = self.lock();
        if st.stopped {
            return Pushed::Stopped(tx);
        }
        if st.queue.len() >= self.queue_limit {
            st.senders_waiting = true;
            return Pushed::Full(tx);
        }
        let since = crate::socklnd::conn::batch::now();
        let was_empty = st.queue.is_empty();
        // Nothing waits before it: straight onto a connection with room, if there is one.
        st.flush_noops(self.min_bulk);
        if was_empty {
            if let Some(placed) = self.place(&mut st, &tx) {
                placed.keep(tx, since);
                return Pushed::Taken;
            }
        }
        st.queue.push_back(Queued { tx, since });
        self.dispatch(&mut st);
        // The task times out the queue and opens connections: it hears of a queue that
        // stopped being empty.
        let kick = was_empty && !st.queue.is_empty();
        drop(st);
        if kick {
            self.kick.notify_one();
        }
        Pushed::Taken
    }

    /// A writer of NI `ni` handed `seqs` to TCP whole on connection `conn`: what waits
    /// moves on, and the caller hands the returned completions up. Each send's payload is
    /// let go here, before its completion: the upper layer may use its memory again.
    pub(crate) fn written(&self, ni: Nid, conn: u64, seqs: &[u64]) -> Vec<TxCompletion> {
        let mut done = Vec::with_capacity(seqs.len());
        let mut st = self.lock();
        let TxState { links, cands, .. } = &mut *st;
        // A connection already closed had its sends settled when it closed.
        if let Some(i) = links.iter().position(|l| l.id == conn) {
            if let (Some(link), Some(c)) = (links.get_mut(i), cands.get_mut(i)) {
                settle(&mut link.inflight, seqs, |inf| {
                    c.queued_bytes = c.queued_bytes.saturating_sub(inf.frame_len);
                    done.push(TxCompletion {
                        id: inf.tx.id,
                        ni,
                        peer: inf.tx.peer,
                        status: lnet::health::HealthStatus::Ok,
                        reason: None,
                    });
                });
            }
        }
        self.dispatch(&mut st);
        let senders = st.senders_waiting && st.queue.len() < self.queue_limit;
        if senders {
            st.senders_waiting = false;
        }
        drop(st);
        if senders {
            self.room.notify_waiters();
        }
        done
    }

    /// Moves queued sends onto connections while their writers have room, and wakes the senders
    /// waiting for room if there is some; run by the task (every turn of its loop), which
    /// acts on what it finds next.
    pub(crate) fn dispatch_in_task(&self, st: &mut TxState) {
        self.dispatch(st);
        if st.senders_waiting && st.queue.len() < self.queue_limit {
            st.senders_waiting = false;
            self.room.notify_waiters();
        }
    }

    /// Stops taking sends and wakes every sender waiting for room.
    pub(crate) fn stop(&self, st: &mut TxState) {
        st.stopped = true;
        st.senders_waiting = false;
        self.room.notify_waiters();
    }

    /// Moves queued sends onto connections while their writers have room.
    fn dispatch(&self, st: &mut TxState) {
        st.flush_noops(self.min_bulk);
        while let Some(q) = st.queue.pop_front() {
            match self.place(st, &q.tx) {
                Some(placed) => placed.keep(q.tx, q.since),
                None => {
                    st.queue.push_front(q);
                    break;
                }
            }
        }
    }

    /// Hands `tx`'s frame to the writer of the connection placement picks, if it has
    /// room (`None` if not). The send is borrowed while it is placed: the caller moves
    /// it once, into that connection's sends ([`Placed::keep`]).
    fn place<'s>(&self, st: &'s mut TxState, tx: &TxRequest) -> Option<Placed<'s>> {
        let frame_len = lnet_frame_len(HeaderForm::Nid4, tx.payload.len());
        let traffic = Traffic::Lnet { frame_len };
        let i = placement::choose(&st.cands, traffic, self.min_bulk)?;
        let seq = st.next_seq;
        let item = WriteItem::Lnet {
            seq,
            header: tx.header,
            payload: tx.payload.clone(),
        };
        // LNET frames leave room on the writer's queue for NOOPs.
        let TxState { links, cands, .. } = st;
        let (Some(link), Some(c)) = (links.get_mut(i), cands.get_mut(i)) else {
            return None;
        };
        if !link.writer.push(item, NOOP_ROOM) {
            return None;
        }
        st.next_seq += 1;
        st.use_clock += 1;
        c.queued_bytes += frame_len;
        c.last_used = st.use_clock;
        Some(Placed {
            sends: &mut link.inflight,
            seq,
            frame_len,
        })
    }
}

/// A send whose frame a connection's writer took: it is kept with that connection's
/// sends until written.
struct Placed<'s> {
    sends: &'s mut VecDeque<Inflight>,
    seq: u64,
    frame_len: usize,
}

impl Placed<'_> {
    /// Keeps `tx`, the send placed, as the connection's last.
    fn keep(self, tx: TxRequest, since: Instant) {
        self.sends.push_back(Inflight {
            seq: self.seq,
            tx,
            since,
            frame_len: self.frame_len,
        });
    }
}

impl TxState {
    /// Starts using connection `id`'s writer.
    pub(crate) fn add_conn(&mut self, id: u64, writer: Arc<dyn ConnQueue>, cand: Candidate) {
        self.links.push(Link {
            id,
            writer,
            inflight: VecDeque::new(),
        });
        self.cands.push(cand);
    }

    /// Stops using connection `id`'s writer, which writes nothing more; the sends handed
    /// to it and not completed, oldest first (`None`: it was not in use).
    pub(crate) fn remove_conn(&mut self, id: u64) -> Option<VecDeque<Inflight>> {
        let pos = self.links.iter().position(|l| l.id == id)?;
        let link = self.links.remove(pos);
        link.writer.close();
        self.cands.remove(pos);
        Some(link.inflight)
    }

    /// Whether no connection is in use.
    pub(crate) fn has_no_conn(&self) -> bool {
        self.links.is_empty()
    }

    /// Sends handed to connections and not yet completed.
    pub(crate) fn in_flight(&self) -> usize {
        self.links.iter().map(|l| l.inflight.len()).sum()
    }

    /// Queues `item` on the connection at placement index `i`; whether it was taken.
    pub(crate) fn try_write(&mut self, i: usize, item: WriteItem) -> bool {
        let Some(link) = self.links.get(i) else {
            return false;
        };
        if !link.writer.push(item, 0) {
            return false;
        }
        self.use_clock += 1;
        let clock = self.use_clock;
        if let Some(c) = self.cands.get_mut(i) {
            c.last_used = clock;
        }
        true
    }

    /// Queues waiting NOOPs where NOOPs go.
    pub(crate) fn flush_noops(&mut self, min_bulk: usize) {
        while let Some(k) = self.pending_noops.front().copied() {
            let Some(i) = placement::choose_noop(&self.cands, min_bulk) else {
                break;
            };
            if !self.try_write(i, WriteItem::Noop(k)) {
                break;
            }
            self.pending_noops.pop_front();
        }
    }

    /// Takes every queued send out, to fail them.
    pub(crate) fn take_queue(&mut self) -> VecDeque<Queued> {
        std::mem::take(&mut self.queue)
    }
}

/// Completes `tx` (sent by NI `ni` to `peer`) with the upper layer.
fn complete<H: LndHandler>(
    handler: &H,
    ni: Nid,
    peer: ProcessId,
    tx: TxRequest,
    failure: Option<(TxFailure, String)>,
) {
    // The payload is let go first: the upper layer may use its memory again.
    let (id, to) = (tx.id, tx.peer);
    drop(tx);
    let (status, reason) = match failure {
        None => (lnet::health::HealthStatus::Ok, None),
        Some((f, why)) => (f.status(), Some(why)),
    };
    if let Some(why) = &reason {
        tracing::debug!(%peer, id = id.0, %status, "socklnd: send failed: {why}");
    }
    handler.on_send_complete(TxCompletion {
        id,
        ni,
        peer: to,
        status,
        reason,
    });
}

/// Completes every send of `done`.
pub(crate) fn complete_all<H: LndHandler>(handler: &H, ni: Nid, peer: ProcessId, done: Done) {
    for (tx, failure) in done {
        complete(handler, ni, peer, tx, failure);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lnd::TxId;
    use bytes::Bytes;

    fn inflight(seq: u64) -> Inflight {
        let nid: Nid = "10.0.0.1@tcp".parse().expect("nid");
        Inflight {
            seq,
            tx: TxRequest {
                id: TxId(seq),
                peer: nid,
                header: crate::socklnd::conn::item::test_header(0),
                payload: Bytes::new(),
            },
            since: Instant::now(),
            frame_len: 0,
        }
    }

    fn settled(q: &mut VecDeque<Inflight>, seqs: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let mut seen = Vec::new();
        settle(q, seqs, |f| seen.push(f.seq));
        (seen, q.iter().map(|f| f.seq).collect())
    }

    #[test]
    fn sends_complete_from_the_front_or_wherever_they_are() {
        let mut q: VecDeque<Inflight> = (1..=6).map(inflight).collect();
        // Each once, unknown ones skipped.
        assert_eq!(
            settled(&mut q, &[1, 3, 3, 9]),
            (vec![1, 3], vec![2, 4, 5, 6])
        );
        // A run from the front, then one behind it.
        assert_eq!(settled(&mut q, &[2, 4, 6]), (vec![2, 4, 6], vec![5]));
        // Settled already, and nothing asked.
        assert_eq!(settled(&mut q, &[1, 2]), (vec![], vec![5]));
        assert_eq!(settled(&mut q, &[]), (vec![], vec![5]));
        assert_eq!(settled(&mut q, &[5]), (vec![5], vec![]));
    }

    #[test]
    fn a_settled_send_lets_its_payload_go() {
        let payload = Bytes::from(vec![7u8; 64]);
        let mut q: VecDeque<Inflight> = (1..=3)
            .map(|seq| {
                let mut f = inflight(seq);
                f.tx.payload = payload.clone();
                f
            })
            .collect();
        settle(&mut q, &[1, 3], |_| {});
        // The unsettled send still holds it.
        assert!(!payload.is_unique());
        settle(&mut q, &[2], |_| {});
        assert!(q.is_empty());
        assert!(payload.is_unique());
    }
}
