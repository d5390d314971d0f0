//! The fault injection rules of one socklnd NI (tests), checked on send and on receive.

use std::sync::Mutex;

use crate::lnd::fault::{Direction, FaultAction, FaultSet};

/// The fault rules of one NI, behind a lock held only to check or change them.
#[derive(Debug, Default)]
pub(crate) struct Faults(Mutex<FaultSet>);

impl Faults {
    /// Runs `f` on the rules (a poisoned lock still holds usable rules).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut FaultSet) -> T) -> T {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut set)
    }

    /// The action of the first rule that fires on this message, if any.
    pub(crate) fn check(&self, dir: Direction, header: &lnet::Header) -> Option<FaultAction> {
        self.with(|set| {
            if set.is_empty() {
                None
            } else {
                set.check(dir, header)
            }
        })
    }
}
