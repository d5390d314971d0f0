//! The tx credits of a local NI or a peer NI and the messages waiting for one, as the NI
//! and peer NI actors keep them: a send takes a credit and goes at once while the count
//! stays at zero or above, else it waits (the count goes negative: that many wait); a
//! completed send gives its credit back and lets the oldest waiting message go, whose
//! credit was taken when it was queued.

use std::collections::VecDeque;

/// Credits and the queue of messages (`T`) waiting for one.
#[derive(Debug)]
pub(crate) struct TxCredits<T> {
    now: i32,
    max: u32,
    min: i32,
    waiting: VecDeque<T>,
}

impl<T> TxCredits<T> {
    /// `max` credits, none taken.
    pub(crate) fn new(max: u32) -> TxCredits<T> {
        let full = i32::try_from(max).unwrap_or(i32::MAX);
        TxCredits {
            now: full,
            max,
            min: full,
            waiting: VecDeque::new(),
        }
    }

    /// Charges a credit for `item`: `Some(item)` when it may go now, `None` when it waits.
    pub(crate) fn take(&mut self, item: T) -> Option<T> {
        self.now = self.now.saturating_sub(1);
        self.min = self.min.min(self.now);
        if self.now >= 0 {
            Some(item)
        } else {
            self.waiting.push_back(item);
            None
        }
    }

    /// Gives a credit back: the waiting item that may go now, if any.
    pub(crate) fn give_back(&mut self) -> Option<T> {
        self.now = self.now.saturating_add(1);
        self.waiting.pop_front()
    }

    /// The credits now (negative: that many items wait).
    pub(crate) fn now(&self) -> i32 {
        self.now
    }

    /// The credits when idle.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// The lowest the credits went.
    pub(crate) fn min(&self) -> i32 {
        self.min
    }
}

#[cfg(test)]
mod tests {
    use super::TxCredits;

    #[test]
    fn sends_beyond_the_credits_wait_and_go_in_order_as_credits_come_back() {
        let mut c = TxCredits::new(2);
        assert_eq!(c.take(1), Some(1));
        assert_eq!(c.take(2), Some(2));
        assert_eq!(c.take(3), None);
        assert_eq!(c.take(4), None);
        assert_eq!((c.now(), c.min(), c.max()), (-2, -2, 2));
        assert_eq!(c.give_back(), Some(3));
        assert_eq!(c.give_back(), Some(4));
        assert_eq!(c.give_back(), None);
        assert_eq!(c.give_back(), None);
        assert_eq!((c.now(), c.min()), (2, -2));
    }
}
