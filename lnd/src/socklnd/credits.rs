//! Transmit credits of one peer (`peer_credits`) or one NI (`credits`).
//!
//! A message takes a credit when it is handed to a connection and gives it back when the
//! LND completes it (for this router, which never asks for zero-copy: when its frame has
//! been handed to TCP, or when it fails). A message that finds no credit waits in a
//! bounded queue. As `lnetctl` shows them, the credit count goes negative by the number
//! of queued messages, and the lowest value seen is kept as a high-water mark.

/// A pool of transmit credits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxCredits {
    max: u32,
    in_use: u32,
    min_seen: i64,
}

impl TxCredits {
    /// A full pool of `max` credits.
    pub fn new(max: u32) -> TxCredits {
        TxCredits {
            max,
            in_use: 0,
            min_seen: i64::from(max),
        }
    }

    /// The pool size.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Credits not taken.
    pub fn available(&self) -> u32 {
        self.max - self.in_use
    }

    /// Takes one credit if there is one.
    pub fn try_take(&mut self) -> bool {
        if self.in_use < self.max {
            self.in_use += 1;
            self.note(0);
            true
        } else {
            false
        }
    }

    /// Gives one credit back. Returns false (and changes nothing) if none was taken: a
    /// double completion, which is a bug in the caller.
    pub fn give_back(&mut self) -> bool {
        if self.in_use == 0 {
            return false;
        }
        self.in_use -= 1;
        true
    }

    /// The credit count as `lnetctl` shows it: available minus `queued` waiting messages.
    pub fn credits(&self, queued: usize) -> i64 {
        i64::from(self.available()) - i64::try_from(queued).unwrap_or(i64::MAX)
    }

    /// Records the count with `queued` messages waiting, for the high-water mark.
    pub fn note(&mut self, queued: usize) {
        self.min_seen = self.min_seen.min(self.credits(queued));
    }

    /// The lowest credit count seen.
    pub fn min_seen(&self) -> i64 {
        self.min_seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_and_give_back() {
        let mut c = TxCredits::new(2);
        assert_eq!(c.max(), 2);
        assert!(c.try_take());
        assert!(c.try_take());
        assert!(!c.try_take());
        assert_eq!(c.available(), 0);
        c.note(3);
        assert_eq!(c.credits(3), -3);
        assert_eq!(c.min_seen(), -3);
        assert!(c.give_back());
        assert_eq!(c.available(), 1);
        assert!(c.give_back());
        assert!(!c.give_back(), "no double give-back");
        assert_eq!(c.available(), 2);
        assert_eq!(c.min_seen(), -3);
    }
}
