//! What waits to be written on one connection, and whose turn it is to write it.
//!
//! The queue is shared by the connection's writer task and everyone who queues frames
//! on it (the peer's send side, under its lock). Exactly one of them writes at a time:
//! whoever takes the write turn writes what is queued, in order, and looks again before
//! giving the turn back, so a frame queued while somebody writes is written by them. A
//! reader forwarding what it read takes the turn itself ([`super::batch`]) and writes
//! without blocking; what the socket does not take at once (the rest of a frame cut
//! short, frames with large payloads, a write error to report) is left to the writer
//! task, which is woken only then, or when nobody else will write.
//!
//! A reader whose next frame waits for a credit may also stage what it takes: the frames
//! are encoded into the connection's staged bytes, their sends complete, and the bytes
//! go out ahead of anything queued after them, with the reader's next write (see
//! [`super::batch`]). Staged bytes are part of the connection's send buffer, as what TCP
//! holds is: bounded, and lost only with the connection.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::end::ConnEnd;
use super::item::WriteItem;
use crate::socklnd::wire::KsockHeader;

/// Frames taken for one round of writes at most.
pub(crate) const WRITE_BATCH: usize = 64;

/// Small frames written together, with where each LNET frame ends.
#[derive(Debug, Default)]
pub(crate) struct Coalesced {
    pub(crate) bytes: Vec<u8>,
    /// The send number of each LNET frame in `bytes` and the offset just past its end.
    pub(crate) ends: Vec<(u64, usize)>,
}

impl Coalesced {
    /// Appends the LNET frame of send number `seq`: its ksock and LNet headers, encoded
    /// in place in `form`, then `payload`. Nothing is appended if the header does not
    /// encode.
    pub(crate) fn push_frame(
        &mut self,
        seq: u64,
        form: lnet::HeaderForm,
        header: &lnet::Header,
        payload: &[u8],
    ) -> Result<(), lnet::HeaderError> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(&KsockHeader::lnet().encode());
        if let Err(e) = header.encode_into(form, &mut self.bytes) {
            self.bytes.truncate(start);
            return Err(e);
        }
        self.bytes.extend_from_slice(payload);
        self.ends.push((seq, self.bytes.len()));
        Ok(())
    }

    /// Empties it, keeping its allocations.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// What is left once the first `written` bytes are out: the frames not yet whole.
    pub(crate) fn split_off_rest(&mut self, written: usize) -> Coalesced {
        let bytes = self
            .bytes
            .get(written..)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let ends = self
            .ends
            .iter()
            .filter(|(_, end)| *end > written)
            .map(|(seq, end)| (*seq, end - written))
            .collect();
        self.bytes.clear();
        self.ends.clear();
        Coalesced { bytes, ends }
    }

    /// Whether nothing is in it.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// What the writer task is to do next.
pub(crate) enum Round {
    /// Write the frames put in the batch.
    Items,
    /// Write bytes whose frames left the queue already: the rest of a write that was cut
    /// short, or staged frames.
    Rest(Coalesced),
    /// Nothing to do now (or somebody else writes): wait to be woken.
    Wait,
    /// Stop: the connection closed, or a write failed (`Some`) and the peer task must hear.
    Stop(Option<ConnEnd>),
}

struct State {
    items: VecDeque<WriteItem>,
    /// Somebody holds the write turn.
    writing: bool,
    /// The rest of a write cut short, for the writer task.
    rest: Option<Coalesced>,
    /// Frames staged by a reader: their sends completed, their bytes not yet written.
    /// They go out before the queued items.
    staged: Coalesced,
    /// A write failed without the writer task: it reports it.
    failed: Option<ConnEnd>,
    /// A reader on some thread will write (see [`super::batch`]).
    deferred: bool,
    /// The connection closed: nothing is taken or written any more.
    closed: bool,
}

/// What [`Outbox::push`] asks of its caller.
pub(crate) enum Pushed {
    /// Somebody writes already, or will.
    Queued,
    /// Nobody writes: the caller arranges a write (defers it or wakes the writer task).
    Idle,
}

/// One connection's queue of frames and its write turn.
pub(crate) struct Outbox {
    state: Mutex<State>,
    /// Wakes the writer task.
    pub(crate) wake: Notify,
    capacity: usize,
}

impl Outbox {
    /// An empty queue of at most `capacity` frames.
    pub(crate) fn new(capacity: usize) -> Outbox {
        Outbox {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity),
                writing: false,
                rest: None,
                staged: Coalesced::default(),
                failed: None,
                deferred: false,
                closed: false,
            }),
            wake: Notify::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under this lock panics; a poisoned lock still holds consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item` if more than `keep` places are left; `defer` says whether the
    /// caller can defer a write (then the queue counts on it). None when the queue has
    /// no such room or is closed (the item is dropped).
    pub(crate) fn push(&self, item: WriteItem, keep: usize, defer: bool) -> Option<Pushed> {
        let mut st = self.lock();
        if st.closed || self.capacity.saturating_sub(st.items.len()) <= keep {
            return None;
        }
        st.items.push_back(item);
        if st.writing || st.rest.is_some() || st.failed.is_some() || st.deferred {
            return Some(Pushed::Queued);
        }
        if defer {
            st.deferred = true;
        }
        Some(Pushed::Idle)
    }

    /// Closes the queue: what it holds is dropped and the writer task stops.
    pub(crate) fn close(&self) {
        {
            let mut st = self.lock();
            st.closed = true;
            st.items.clear();
            st.rest = None;
            st.staged = Coalesced::default();
        }
        self.wake.notify_one();
    }

    /// Takes the turn for a write that must not block: the staged bytes, if any, are
    /// moved into `out` (which must be empty), and the small frames at the head of the
    /// queue (payloads of at most `max_payload` bytes) go into `batch`. False when
    /// somebody else writes, nothing is queued, or the head is for the writer task (woken
    /// then); also when only staged bytes are there, unless `staged_alone`.
    pub(crate) fn take_now(
        &self,
        batch: &mut Vec<WriteItem>,
        max_payload: usize,
        out: &mut Coalesced,
        staged_alone: bool,
    ) -> bool {
        let mut st = self.lock();
        st.deferred = false;
        if st.closed || st.writing || st.rest.is_some() || st.failed.is_some() {
            return false;
        }
        while batch.len() < WRITE_BATCH {
            let small = match st.items.front() {
                None => break,
                Some(WriteItem::Noop(_)) => true,
                Some(WriteItem::Lnet { payload, .. }) => payload.len() <= max_payload,
            };
            if !small {
                break;
            }
            if let Some(item) = st.items.pop_front() {
                batch.push(item);
            }
        }
        let only_staged = !st.staged.is_empty() && staged_alone;
        if batch.is_empty() && !only_staged {
            let queued = !st.items.is_empty();
            drop(st);
            if queued {
                self.wake.notify_one();
            }
            return false;
        }
        if !st.staged.is_empty() {
            // Moved out whole: a connection keeps no buffer between its writes.
            *out = std::mem::take(&mut st.staged);
        }
        st.writing = true;
        true
    }

    /// Gives the turn back, keeping `out` (frames whose sends completed) as the staged
    /// bytes, to be written first by whoever writes next; `out` is left empty, without
    /// a buffer. Whether more is queued.
    pub(crate) fn stage(&self, out: &mut Coalesced) -> bool {
        let mut st = self.lock();
        st.writing = false;
        if st.closed {
            out.clear();
            return false;
        }
        std::mem::swap(out, &mut st.staged);
        !st.items.is_empty()
    }

    /// Gives the turn back to the writer task (or to whoever takes it next).
    pub(crate) fn hand_off(&self) {
        let queued = {
            let mut st = self.lock();
            st.deferred = false;
            !st.items.is_empty()
                || st.rest.is_some()
                || st.failed.is_some()
                || !st.staged.is_empty()
        };
        if queued {
            self.wake.notify_one();
        }
    }

    /// The writer task's next round: frames go into `batch` (its turn taken).
    pub(crate) fn take_round(&self, batch: &mut Vec<WriteItem>) -> Round {
        let mut st = self.lock();
        if let Some(end) = st.failed.take() {
            return Round::Stop(Some(end));
        }
        if st.closed {
            return Round::Stop(None);
        }
        if st.writing {
            return Round::Wait;
        }
        st.deferred = false;
        if let Some(rest) = st.rest.take() {
            st.writing = true;
            return Round::Rest(rest);
        }
        if !st.staged.is_empty() {
            st.writing = true;
            return Round::Rest(std::mem::take(&mut st.staged));
        }
        if st.items.is_empty() {
            return Round::Wait;
        }
        while batch.len() < WRITE_BATCH {
            match st.items.pop_front() {
                Some(item) => batch.push(item),
                None => break,
            }
        }
        st.writing = true;
        Round::Items
    }

    /// Gives the turn back, leaving the writer task `rest` to write or `failed` to report;
    /// whether something is left to do (then the caller, unless it is the writer task,
    /// wakes it).
    pub(crate) fn release(&self, rest: Option<Coalesced>, failed: Option<ConnEnd>) -> bool {
        let mut st = self.lock();
        st.writing = false;
        if st.closed {
            return false;
        }
        if rest.as_ref().is_some_and(|r| !r.is_empty()) {
            st.rest = rest;
        }
        if failed.is_some() {
            st.failed = failed;
        }
        !st.items.is_empty() || st.rest.is_some() || st.failed.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socklnd::wire::KsockHeader;

    fn noop() -> WriteItem {
        WriteItem::Noop(KsockHeader::keepalive())
    }

    fn lnet(seq: u64, len: usize) -> WriteItem {
        WriteItem::Lnet {
            seq,
            header: crate::socklnd::conn::item::test_header(len),
            payload: bytes::Bytes::from(vec![0u8; len]),
        }
    }

    #[test]
    fn one_writer_at_a_time_and_frames_queued_meanwhile_stay_for_it() {
        let q = Outbox::new(4);
        assert!(matches!(q.push(lnet(1, 0), 0, true), Some(Pushed::Idle)));
        // Already noted for a deferred write: the second push counts on it.
        assert!(matches!(q.push(lnet(2, 0), 0, true), Some(Pushed::Queued)));
        let mut batch = Vec::new();
        assert!(q.take_now(&mut batch, 4096, &mut Coalesced::default(), true));
        assert_eq!(batch.len(), 2);
        // The turn is held: the writer task waits, a new frame is queued for the holder.
        let mut other = Vec::new();
        assert!(matches!(q.take_round(&mut other), Round::Wait));
        assert!(matches!(q.push(noop(), 0, false), Some(Pushed::Queued)));
        assert!(
            q.release(None, None),
            "the frame queued meanwhile is left to do"
        );
        assert!(matches!(q.take_round(&mut other), Round::Items));
        assert_eq!(other.len(), 1);
        assert!(!q.release(None, None));
    }

    #[test]
    fn a_write_cut_short_goes_to_the_writer_task_first() {
        let q = Outbox::new(4);
        let _ = q.push(lnet(1, 0), 0, true);
        let mut batch = Vec::new();
        assert!(q.take_now(&mut batch, 4096, &mut Coalesced::default(), true));
        // Two frames of 5 and 1 bytes.
        let mut out = Coalesced {
            bytes: vec![1, 2, 3, 4, 5, 6],
            ends: vec![(1, 5), (2, 6)],
        };
        let rest = out.split_off_rest(2);
        assert_eq!(rest.bytes, vec![3, 4, 5, 6]);
        assert_eq!(rest.ends, vec![(1, 3), (2, 4)]);
        let _ = q.push(lnet(3, 0), 0, false);
        assert!(q.release(Some(rest), None));
        // Nobody but the writer task writes until the rest is out.
        assert!(!q.take_now(&mut Vec::new(), 4096, &mut Coalesced::default(), true));
        let mut round = Vec::new();
        assert!(matches!(q.take_round(&mut round), Round::Rest(r) if r.ends.len() == 2));
        assert!(round.is_empty());
    }

    #[test]
    fn staged_frames_go_out_before_those_queued_after_them() {
        let q = Outbox::new(4);
        let _ = q.push(lnet(1, 0), 0, true);
        let mut batch = Vec::new();
        let mut out = Coalesced::default();
        assert!(q.take_now(&mut batch, 4096, &mut out, false));
        out.bytes.extend_from_slice(&[1, 2, 3]);
        assert!(!q.stage(&mut out), "nothing queued meanwhile");
        assert!(out.is_empty(), "the bytes stay with the queue");
        // Staged bytes alone are no round for a reader whose frame waits...
        assert!(!q.take_now(&mut Vec::new(), 4096, &mut out, false));
        // ...but are for its flush, and come first.
        let _ = q.push(lnet(2, 0), 0, true);
        batch.clear();
        // The writer's own buffer, empty, as a thread's scratch is.
        out.bytes.reserve(64);
        assert!(q.take_now(&mut batch, 4096, &mut out, true));
        assert_eq!((out.bytes.as_slice(), batch.len()), (&[1u8, 2, 3][..], 1));
        assert_eq!(
            q.lock().staged.bytes.capacity(),
            0,
            "no buffer kept once taken"
        );
        assert!(!q.release(None, None));
        // What a reader leaves staged, the writer task writes.
        out.clear();
        batch.clear();
        let _ = q.push(lnet(3, 0), 0, true);
        assert!(q.take_now(&mut batch, 4096, &mut out, false));
        out.bytes.push(9);
        assert!(!q.stage(&mut out));
        assert!(matches!(q.take_round(&mut batch), Round::Rest(r) if r.bytes == [9]));
        assert!(!q.release(None, None));
        // A closed queue keeps nothing staged.
        let _ = q.push(lnet(4, 0), 0, true);
        assert!(q.take_now(&mut batch, 4096, &mut out, false));
        q.close();
        out.bytes.push(7);
        assert!(!q.stage(&mut out));
        assert!(out.is_empty());
        assert!(matches!(q.take_round(&mut batch), Round::Stop(None)));
    }

    #[test]
    fn a_frame_is_encoded_in_place_after_the_others() {
        let WriteItem::Lnet {
            header, payload, ..
        } = lnet(7, 3)
        else {
            panic!("an LNET item");
        };
        let mut out = Coalesced::default();
        out.push_frame(7, lnet::HeaderForm::Nid4, &header, &payload)
            .unwrap();
        out.push_frame(8, lnet::HeaderForm::Nid4, &header, &[])
            .unwrap();
        let mut head = KsockHeader::lnet().encode().to_vec();
        header
            .encode_into(lnet::HeaderForm::Nid4, &mut head)
            .unwrap();
        let mut want = head.clone();
        want.extend_from_slice(&payload);
        want.extend_from_slice(&head);
        assert_eq!(out.bytes, want);
        assert_eq!(out.ends, vec![(7, head.len() + 3), (8, 2 * head.len() + 3)]);
        out.clear();
        assert!(out.is_empty() && out.ends.is_empty());
    }

    #[test]
    fn large_payloads_and_failures_are_for_the_writer_task() {
        let q = Outbox::new(4);
        let _ = q.push(lnet(1, 8192), 0, true);
        let mut batch = Vec::new();
        assert!(!q.take_now(&mut batch, 4096, &mut Coalesced::default(), true));
        assert!(matches!(q.take_round(&mut batch), Round::Items));
        assert!(!q.release(None, None));
        let _ = q.push(lnet(2, 0), 0, true);
        assert!(q.take_now(&mut Vec::new(), 4096, &mut Coalesced::default(), true));
        assert!(q.release(None, Some(ConnEnd::WriteStalled)));
        assert!(matches!(
            q.take_round(&mut Vec::new()),
            Round::Stop(Some(ConnEnd::WriteStalled))
        ));
    }

    #[test]
    fn a_full_or_closed_queue_gives_the_frame_back() {
        let q = Outbox::new(3);
        assert!(q.push(noop(), 1, false).is_some());
        assert!(q.push(noop(), 1, false).is_some());
        // One place left: kept for whoever may use it.
        assert!(q.push(noop(), 1, false).is_none());
        assert!(q.push(noop(), 0, false).is_some());
        assert!(q.push(noop(), 0, false).is_none());
        q.close();
        assert!(q.push(noop(), 0, false).is_none());
        assert!(matches!(q.take_round(&mut Vec::new()), Round::Stop(None)));
    }
}
