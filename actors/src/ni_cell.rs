//! What an NI or peer NI actor shares with the forwarding path: its tx credits, its
//! health value, its round-robin counter, when it was last heard from, the cached NI
//! status of a peer NI (UP until the LND reports it gone or its peer gives it DOWN, UP
//! again once heard from; [`lnet::aliveness`]), and the messages the forwarding path
//! counted for it.
//!
//! The actor owns the cell (it creates it and writes the health value); the forwarding
//! path reads it and charges credits in place, without a message to the actor. A message
//! that finds no credit waits, as in the kernel's credit queues, in one queue per cell in
//! arrival order, whichever path it took: the actor keeps its own messages and leaves a
//! [`Waiter::Actor`] mark here, the forwarding path leaves its message itself
//! ([`Waiter::Path`]). Whoever gives a credit back while messages wait is handed the
//! oldest waiter ([`NiCell::give_back`]) and lets it go: it tells the actor, or resumes
//! the forwarding path's send in place.
//!
//! The count is an atomic, taken without the lock while credits are free; a count that
//! goes below zero, and the queue behind it, change only under the queue's lock, so a
//! credit given back always finds the waiter it is owed.
//!
//! The cell is laid out by who writes what, each part on cache lines of its own: what
//! sending to (or through) it changes, written by the threads that forward to it; what
//! receiving from it changes, written by the thread reading its connection; and what
//! every decision reads and seldom changes (health, status). A flow in both directions
//! (PUTs one way, ACKs back) then has no line written by both its threads.

use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed,
};
use std::sync::{Mutex, MutexGuard, PoisonError};

use lnet::health::HealthValue;
use lnet::time::Millis;
use lnet::{Header, MsgType};

/// A message waiting for a credit of a cell.
pub(crate) enum Waiter {
    /// The oldest message in the owning actor's own queue.
    Actor,
    /// A send of the forwarding path: called once its credit is taken.
    Path(Box<dyn FnOnce() + Send>),
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Waiter::Actor => "Waiter::Actor",
            Waiter::Path(_) => "Waiter::Path",
        })
    }
}

/// The shared part of one local NI or peer NI. See the module documentation.
#[derive(Debug)]
pub struct NiCell {
    read: Lines<ReadMostly>,
    send: Lines<SendSide>,
    recv: Lines<RecvSide>,
    waiting: Mutex<VecDeque<Waiter>>,
}

/// A part of the cell on cache lines of its own (128 bytes: a line and the one the
/// hardware fetches with it).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Lines<T>(T);

impl<T> std::ops::Deref for Lines<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What every decision reads and seldom changes.
#[derive(Debug, Default)]
struct ReadMostly {
    max: u32,
    health: AtomicU32,
    /// The cached NI status is DOWN (a peer NI's; see the module documentation).
    down: AtomicBool,
}

/// What sending to it changes.
#[derive(Debug, Default)]
struct SendSide {
    credits: AtomicI32,
    min: AtomicI32,
    seq: AtomicU64,
    /// Bytes of the messages charged to this peer NI's tx credits (sent and not yet
    /// completed, or waiting for a credit), each counted with its header as the kernel's
    /// `lpni_txqnob`.
    tx_bytes: AtomicI64,
    /// Sent, by type (their sum is the count sent: one write per message).
    sent: [AtomicU64; 5],
}

/// What receiving from it changes.
#[derive(Debug, Default)]
struct RecvSide {
    /// Milliseconds of the node's clock plus one; 0: never.
    last_alive: AtomicU64,
    /// Received, by type (their sum is the count received).
    received: [AtomicU64; 5],
}

fn type_index(t: MsgType) -> usize {
    match t {
        MsgType::Put => 0,
        MsgType::Get => 1,
        MsgType::Reply => 2,
        MsgType::Ack => 3,
        MsgType::Hello => 4,
    }
}

/// The messages the forwarding path counted for one NI or peer NI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PathCounts {
    /// Sent.
    pub(crate) send: u64,
    /// Received.
    pub(crate) recv: u64,
    /// Sent, by type: PUT, GET, REPLY, ACK, HELLO.
    pub(crate) sent: [u64; 5],
    /// Received, by type.
    pub(crate) received: [u64; 5],
}

impl NiCell {
    /// `max` tx credits, none taken, full health.
    pub(crate) fn new(max: u32) -> NiCell {
        let full = i32::try_from(max).unwrap_or(i32::MAX);
        NiCell {
            read: Lines(ReadMostly {
                max,
                health: AtomicU32::new(HealthValue::MAX.get()),
                down: AtomicBool::new(false),
            }),
            send: Lines(SendSide {
                credits: AtomicI32::new(full),
                min: AtomicI32::new(full),
                ..SendSide::default()
            }),
            recv: Lines(RecvSide::default()),
            waiting: Mutex::new(VecDeque::new()),
        }
    }

    fn note_min(&self, now: i32) {
        // Read first: the low-water mark seldom moves.
        if now < self.send.min.load(Relaxed) {
            self.send.min.fetch_min(now, Relaxed);
        }
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<Waiter>> {
        // Nothing under this lock panics; a poisoned queue is still consistent.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Charges a credit for `item`: `Some(item)` when one was free and it may go now;
    /// otherwise `wrap(item)` waits in the queue (the count goes below zero) and `None`.
    pub(crate) fn take_or_queue<T>(&self, item: T, wrap: impl FnOnce(T) -> Waiter) -> Option<T> {
        if self.try_take() {
            return Some(item);
        }
        let mut waiting = self.queue();
        let before = self.send.credits.fetch_sub(1, Relaxed);
        self.note_min(before.saturating_sub(1));
        if before > 0 {
            return Some(item);
        }
        waiting.push_back(wrap(item));
        None
    }

    /// A message of `n` bytes ([`tx_bytes`]) took (or waits for) a tx credit of this
    /// peer NI: they count as queued until [`NiCell::sent_bytes`].
    pub(crate) fn queued_bytes(&self, n: u64) {
        self.send
            .tx_bytes
            .fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Relaxed);
    }

    /// The send of a message of `n` bytes counted by [`NiCell::queued_bytes`] is over.
    pub(crate) fn sent_bytes(&self, n: u64) {
        self.send
            .tx_bytes
            .fetch_sub(i64::try_from(n).unwrap_or(i64::MAX), Relaxed);
    }

    /// Bytes queued for this peer NI (`tx_q_num_of_buf`): its messages charged to its tx
    /// credits and not yet sent, headers included.
    pub fn tx_queued_bytes(&self) -> u64 {
        // A send's bytes are added before it is handed to the LND and taken off at its
        // completion, so the count is never below 0.
        u64::try_from(self.send.tx_bytes.load(Relaxed)).unwrap_or(0)
    }

    /// Charges a credit only if one is free.
    pub(crate) fn try_take(&self) -> bool {
        let taken = self
            .send
            .credits
            .fetch_update(Relaxed, Relaxed, |c| (c > 0).then(|| c - 1));
        match taken {
            Ok(before) => {
                self.note_min(before.saturating_sub(1));
                true
            }
            Err(_) => false,
        }
    }

    /// Gives a credit back: the oldest waiter, now holding that credit, if one waits.
    /// The caller lets it go: tells the actor ([`Waiter::Actor`]) or calls it.
    #[must_use = "a waiter handed the credit must be let go"]
    pub(crate) fn give_back(&self) -> Option<Waiter> {
        if self.send.credits.fetch_add(1, Relaxed) >= 0 {
            return None;
        }
        // The count went below zero under the lock, with its waiter queued before the
        // lock was let go: the waiter is there.
        self.queue().pop_front()
    }

    /// [`NiCell::give_back`] of `n` credits at once: the waiters handed one, oldest
    /// first.
    #[must_use = "a waiter handed the credit must be let go"]
    pub(crate) fn give_back_n(&self, n: u32) -> Vec<Waiter> {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        let before = self.send.credits.fetch_add(n, Relaxed);
        let owed = before.saturating_neg().min(n);
        if owed <= 0 {
            return Vec::new();
        }
        // As for one credit: each of them went below zero under the lock, with its
        // waiter queued.
        let mut waiting = self.queue();
        (0..owed).map_while(|_| waiting.pop_front()).collect()
    }

    /// The credits now (negative: that many messages wait).
    pub fn credits(&self) -> i32 {
        self.send.credits.load(Relaxed)
    }

    /// The lowest the credits went.
    pub fn min_credits(&self) -> i32 {
        self.send.min.load(Relaxed)
    }

    /// The credits when idle.
    pub fn max_credits(&self) -> u32 {
        self.read.max
    }

    /// The health value (the actor writes it).
    pub fn health(&self) -> HealthValue {
        HealthValue::clamped(self.read.health.load(Relaxed))
    }

    pub(crate) fn set_health(&self, h: HealthValue) {
        self.read.health.store(h.get(), Relaxed);
    }

    /// The round-robin counter: the actors' picks and the forwarding path's sends (each
    /// of which is a pick: one write per message, not two).
    pub fn seq(&self) -> u64 {
        self.send
            .sent
            .iter()
            .fold(self.send.seq.load(Relaxed), |s, n| {
                s.wrapping_add(n.load(Relaxed))
            })
    }

    /// Counts one pick for round robin by the actors (the forwarding path's picks are its
    /// counts sent).
    pub(crate) fn picked(&self) {
        self.send.seq.fetch_add(1, Relaxed);
    }

    /// Heard from at `now`: its cached NI status is UP again.
    pub(crate) fn alive_at(&self, now: Millis) {
        // Read first: within a millisecond many messages find it already set.
        let at = now.0.saturating_add(1);
        if self.recv.last_alive.load(Relaxed) < at {
            self.recv.last_alive.fetch_max(at, Relaxed);
        }
        self.set_status_up(true);
    }

    /// Sets the cached NI status (UP or DOWN).
    pub(crate) fn set_status_up(&self, up: bool) {
        if self.read.down.load(Relaxed) == up {
            self.read.down.store(!up, Relaxed);
        }
    }

    /// Whether the cached NI status is UP.
    pub fn status_up(&self) -> bool {
        !self.read.down.load(Relaxed)
    }

    /// When last heard from, as far as the forwarding path saw.
    pub fn last_alive(&self) -> Option<Millis> {
        match self.recv.last_alive.load(Relaxed) {
            0 => None,
            n => Some(Millis(n - 1)),
        }
    }

    /// Counts a message of type `t` sent.
    pub(crate) fn count_sent(&self, t: MsgType) {
        if let Some(n) = self.send.sent.get(type_index(t)) {
            n.fetch_add(1, Relaxed);
        }
    }

    /// Counts a message of type `t` received.
    pub(crate) fn count_received(&self, t: MsgType) {
        if let Some(n) = self.recv.received.get(type_index(t)) {
            n.fetch_add(1, Relaxed);
        }
    }

    /// What the forwarding path counted.
    pub(crate) fn counts(&self) -> PathCounts {
        let load = |a: &[AtomicU64; 5]| a.each_ref().map(|n| n.load(Relaxed));
        let (sent, received) = (load(&self.send.sent), load(&self.recv.received));
        let sum = |a: &[u64; 5]| a.iter().fold(0u64, |s, n| s.saturating_add(*n));
        PathCounts {
            send: sum(&sent),
            recv: sum(&received),
            sent,
            received,
        }
    }
}

/// Bytes a message of `header` counts for in a peer NI's queue: its payload and its
/// header, as the kernel counts `msg_len` and the header.
pub(crate) fn tx_bytes(header: &Header) -> u64 {
    u64::from(header.payload_length).saturating_add(lnet::header::HEADER_NID4_BYTES as u64)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;

    use super::{NiCell, Waiter};

    #[test]
    fn messages_beyond_the_credits_wait_in_arrival_order_whichever_path_took_them() {
        let c = NiCell::new(2);
        let went = Arc::new(AtomicUsize::new(0));
        let path = |n: usize| {
            let went = Arc::clone(&went);
            Waiter::Path(Box::new(move || went.store(n, Relaxed)))
        };
        assert!(c.try_take());
        assert_eq!(c.take_or_queue(1, |_| Waiter::Actor), Some(1));
        assert!(!c.try_take(), "no credit free");
        assert_eq!(c.take_or_queue(2, |_| Waiter::Actor), None);
        assert_eq!(c.take_or_queue(3, path), None);
        assert_eq!((c.credits(), c.min_credits()), (-2, -2));
        assert!(matches!(c.give_back(), Some(Waiter::Actor)), "the oldest");
        match c.give_back() {
            Some(Waiter::Path(go)) => go(),
            other => panic!("the path's send is next, not {other:?}"),
        }
        assert_eq!(went.load(Relaxed), 3);
        assert!(c.give_back().is_none());
        assert!(c.give_back().is_none());
        assert_eq!((c.credits(), c.max_credits(), c.min_credits()), (2, 2, -2));
    }

    #[test]
    fn credits_given_back_together_go_to_as_many_waiters_oldest_first() {
        let c = NiCell::new(2);
        assert!(c.try_take() && c.try_take());
        for n in 1..=3 {
            assert_eq!(c.take_or_queue(n, |_| Waiter::Actor), None);
        }
        assert_eq!(c.credits(), -3);
        // Two back: the two oldest waiters have them.
        assert_eq!(c.give_back_n(2).len(), 2);
        assert_eq!(c.credits(), -1);
        // Three more back: the last waiter has one, two are free.
        assert_eq!(c.give_back_n(3).len(), 1);
        assert_eq!(c.credits(), 2);
        assert!(c.give_back_n(0).is_empty());
        assert_eq!(c.credits(), 2);
    }

    #[test]
    fn every_credit_given_back_from_other_threads_finds_the_waiter_it_is_owed() {
        let c = Arc::new(NiCell::new(4));
        let went = Arc::new(AtomicUsize::new(0));
        let rounds = 20_000usize;
        let givers: Vec<_> = (0..2)
            .map(|_| {
                let (c, went) = (Arc::clone(&c), Arc::clone(&went));
                std::thread::spawn(move || {
                    for _ in 0..rounds {
                        let w = Arc::clone(&went);
                        let go = move || {
                            w.fetch_add(1, Relaxed);
                        };
                        if let Some(go) = c.take_or_queue(go, |go| Waiter::Path(Box::new(go))) {
                            go();
                        }
                        match c.give_back() {
                            Some(Waiter::Path(go)) => go(),
                            Some(Waiter::Actor) => panic!("no actor here"),
                            None => {}
                        }
                    }
                })
            })
            .collect();
        for g in givers {
            g.join().unwrap();
        }
        assert_eq!(went.load(Relaxed), 2 * rounds, "every message went once");
        assert_eq!(c.credits(), 4);
    }
}
