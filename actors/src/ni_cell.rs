//! What an NI or peer NI actor shares with the forwarding path: its tx credits, its
//! health value, its round-robin counter, when it was last heard from, and the messages
//! the forwarding path counted for it.
//!
//! The actor owns the cell (it creates it, writes the health value, and queues messages
//! that find no credit); the forwarding path reads it and charges credits in place,
//! without a message to the actor. The forwarding path only takes a credit that is free:
//! a message that would have to wait takes the actor's path and waits in its queue. A
//! credit the forwarding path gives back while messages wait in the actor's queue is
//! passed on by the actor ([`NiCell::give_back`] says when).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed};

use lnet::health::HealthValue;
use lnet::time::Millis;
use lnet::MsgType;

/// The shared part of one local NI or peer NI. See the module documentation.
#[derive(Debug)]
pub struct NiCell {
    credits: AtomicI32,
    min: AtomicI32,
    max: u32,
    health: AtomicU32,
    seq: AtomicU64,
    /// Milliseconds of the node's clock plus one; 0: never.
    last_alive: AtomicU64,
    counts: Counts,
}

/// Messages the forwarding path counted, by kind.
#[derive(Debug, Default)]
struct Counts {
    send: AtomicU64,
    recv: AtomicU64,
    sent: [AtomicU64; 5],
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
            credits: AtomicI32::new(full),
            min: AtomicI32::new(full),
            max,
            health: AtomicU32::new(HealthValue::MAX.get()),
            seq: AtomicU64::new(0),
            last_alive: AtomicU64::new(0),
            counts: Counts::default(),
        }
    }

    fn note_min(&self, now: i32) {
        self.min.fetch_min(now, Relaxed);
    }

    /// Charges a credit whether or not one is free (the actor's path): the credits
    /// after; negative means the message waits.
    pub(crate) fn take(&self) -> i32 {
        let now = self.credits.fetch_sub(1, Relaxed).saturating_sub(1);
        self.note_min(now);
        now
    }

    /// Charges a credit only if one is free (the forwarding path).
    pub(crate) fn try_take(&self) -> bool {
        let taken = self
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

    /// Gives a credit back. True when a message waits in the actor's queue for it: the
    /// actor must send it.
    pub(crate) fn give_back(&self) -> bool {
        self.credits.fetch_add(1, Relaxed) < 0
    }

    /// The credits now (negative: that many messages wait).
    pub fn credits(&self) -> i32 {
        self.credits.load(Relaxed)
    }

    /// The lowest the credits went.
    pub fn min_credits(&self) -> i32 {
        self.min.load(Relaxed)
    }

    /// The credits when idle.
    pub fn max_credits(&self) -> u32 {
        self.max
    }

    /// The health value (the actor writes it).
    pub fn health(&self) -> HealthValue {
        HealthValue::clamped(self.health.load(Relaxed))
    }

    pub(crate) fn set_health(&self, h: HealthValue) {
        self.health.store(h.get(), Relaxed);
    }

    /// The round-robin counter.
    pub fn seq(&self) -> u64 {
        self.seq.load(Relaxed)
    }

    /// Counts one pick for round robin.
    pub(crate) fn picked(&self) {
        self.seq.fetch_add(1, Relaxed);
    }

    /// Heard from at `now`.
    pub(crate) fn alive_at(&self, now: Millis) {
        self.last_alive.fetch_max(now.0.saturating_add(1), Relaxed);
    }

    /// When last heard from, as far as the forwarding path saw.
    pub fn last_alive(&self) -> Option<Millis> {
        match self.last_alive.load(Relaxed) {
            0 => None,
            n => Some(Millis(n - 1)),
        }
    }

    /// Counts a message of type `t` sent.
    pub(crate) fn count_sent(&self, t: MsgType) {
        self.counts.send.fetch_add(1, Relaxed);
        if let Some(n) = self.counts.sent.get(type_index(t)) {
            n.fetch_add(1, Relaxed);
        }
    }

    /// Counts a message of type `t` received.
    pub(crate) fn count_received(&self, t: MsgType) {
        self.counts.recv.fetch_add(1, Relaxed);
        if let Some(n) = self.counts.received.get(type_index(t)) {
            n.fetch_add(1, Relaxed);
        }
    }

    /// What the forwarding path counted.
    pub(crate) fn counts(&self) -> PathCounts {
        let load = |a: &[AtomicU64; 5]| a.each_ref().map(|n| n.load(Relaxed));
        PathCounts {
            send: self.counts.send.load(Relaxed),
            recv: self.counts.recv.load(Relaxed),
            sent: load(&self.counts.sent),
            received: load(&self.counts.received),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NiCell;

    #[test]
    fn the_forwarding_path_takes_only_free_credits_and_says_when_one_is_owed() {
        let c = NiCell::new(2);
        assert!(c.try_take());
        assert_eq!(c.take(), 0);
        assert!(!c.try_take(), "no credit free");
        assert_eq!(c.take(), -1, "the actor's message waits");
        assert_eq!(c.min_credits(), -1);
        assert!(c.give_back(), "a message waits: the actor sends it");
        assert!(!c.give_back());
        assert!(!c.give_back());
        assert_eq!((c.credits(), c.max_credits()), (2, 2));
    }
}
