//! The tx credits of a local NI or a peer NI and the messages waiting for one, as the NI
//! and peer NI actors keep them: a send takes a credit and goes at once while the count
//! stays at zero or above, else it waits (the count goes negative: that many wait); a
//! completed send gives its credit back and lets the oldest waiting message go, whose
//! credit was taken when it was queued. The count and the line of waiters are in the NI's
//! [`NiCell`], shared with the forwarding path: a credit may go to a message of either,
//! oldest first.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::ni_cell::{NiCell, Waiter};

/// Credits and the queue of messages (`T`) waiting for one.
#[derive(Debug)]
pub(crate) struct TxCredits<T> {
    cell: Arc<NiCell>,
    waiting: VecDeque<T>,
}

impl<T> TxCredits<T> {
    /// The credits of `cell`, nothing waiting.
    pub(crate) fn new(cell: Arc<NiCell>) -> TxCredits<T> {
        TxCredits {
            cell,
            waiting: VecDeque::new(),
        }
    }

    /// Charges a credit for `item`: `Some(item)` when it may go now, `None` when it waits.
    pub(crate) fn take(&mut self, item: T) -> Option<T> {
        let waiting = &mut self.waiting;
        // The cell keeps this item's place in the line; the item waits here.
        self.cell.take_or_queue(item, |item| {
            waiting.push_back(item);
            Waiter::Actor
        })
    }

    /// Gives a credit back: the waiting item that may go now, if it is one of ours (a
    /// send of the forwarding path owed the credit is resumed here).
    pub(crate) fn give_back(&mut self) -> Option<T> {
        match self.cell.give_back()? {
            Waiter::Actor => self.waiting.pop_front(),
            Waiter::Path(go) => {
                go();
                None
            }
        }
    }

    /// The forwarding path handed a credit to one of our waiting items: the oldest goes.
    pub(crate) fn passed_on(&mut self) -> Option<T> {
        self.waiting.pop_front()
    }

    /// The NI's shared cell.
    pub(crate) fn cell(&self) -> &NiCell {
        &self.cell
    }

    /// Whether the cell's cached NI status is UP.
    pub(crate) fn status_up(&self) -> bool {
        self.cell.status_up()
    }

    /// The credits now (negative: that many items wait).
    pub(crate) fn now(&self) -> i32 {
        self.cell.credits()
    }

    /// The credits when idle.
    pub(crate) fn max(&self) -> u32 {
        self.cell.max_credits()
    }

    /// The lowest the credits went.
    pub(crate) fn min(&self) -> i32 {
        self.cell.min_credits()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::TxCredits;
    use crate::ni_cell::NiCell;

    #[test]
    fn sends_beyond_the_credits_wait_and_go_in_order_as_credits_come_back() {
        let mut c = TxCredits::new(Arc::new(NiCell::new(2)));
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

    #[test]
    fn a_credit_the_forwarding_path_gives_back_goes_to_the_oldest_waiting_item() {
        let cell = Arc::new(NiCell::new(1));
        let mut c = TxCredits::new(Arc::clone(&cell));
        assert!(cell.try_take(), "the forwarding path's send");
        assert_eq!(c.take(7), None);
        assert!(
            matches!(cell.give_back(), Some(crate::ni_cell::Waiter::Actor)),
            "a waiting item is owed the credit"
        );
        assert_eq!(c.passed_on(), Some(7));
        assert_eq!(c.give_back(), None);
        assert_eq!(c.now(), 1);
    }
}
