//! Fault injection at the LNet layer (`lnetctl fault drop|delay add`, health reference
//! §2.11), for every LND: the node's rules ([`lnet::fault::FaultTable`]) in one
//! [`FaultRules`] shared by the [`crate::Node`] handle that changes them, the local NI
//! actors that check every send before handing it to the LND, and the
//! [`crate::NodeHandler`] that checks every received message before LNet processes it.
//!
//! On send (the local NI actor): a drop completes the send as a message lost on
//! the network does ([`HealthStatus::Ok`]: the message was handed off); a health error
//! completes it at once with that status; a delay hands it to the LND that much later.
//! On receive: a drop discards the message silently (its payload is read and thrown
//! away); a delay holds it (and the connection it came on) that long.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lnet::fault::{
    Direction, FaultAddError, FaultRule, FaultTable, FaultVerdict, RuleId, RuleStats,
};
use lnet::{Header, Nid};

use crate::clock::Clock;

/// The fault rules of one node, shared by its actors. Cheap to clone; clones share them.
#[derive(Debug, Clone)]
pub struct FaultRules {
    table: Arc<Mutex<FaultTable>>,
    /// How many rules the table holds, so that a node without rules checks a message
    /// without taking the lock.
    count: Arc<AtomicUsize>,
    clock: Clock,
}

impl FaultRules {
    /// No rules; time from `clock`.
    pub fn new(clock: Clock) -> FaultRules {
        FaultRules {
            table: Arc::new(Mutex::new(FaultTable::new())),
            count: Arc::new(AtomicUsize::new(0)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, FaultTable> {
        // The table stays consistent whatever panicked while holding it.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `change` on the table and keeps the rule count up to date.
    fn change<R>(&self, change: impl FnOnce(&mut FaultTable) -> R) -> R {
        let mut table = self.lock();
        let r = change(&mut table);
        self.count.store(table.rules().len(), Ordering::Release);
        r
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Adds a rule; it applies from now on.
    pub fn add(&self, rule: FaultRule) -> Result<RuleId, FaultAddError> {
        let now = self.clock.now();
        let id = self.change(|t| t.add(rule.clone(), now))?;
        tracing::info!(?id, ?rule, "fault rule added");
        Ok(id)
    }

    /// Adds a rule under id `id` (a rule kept across a restart).
    pub fn insert(&self, id: RuleId, rule: FaultRule) -> Result<(), FaultAddError> {
        let now = self.clock.now();
        self.change(|t| t.insert(id, rule.clone(), now))?;
        tracing::info!(?id, ?rule, "fault rule installed");
        Ok(())
    }

    /// Removes a rule; whether it was there.
    pub fn remove(&self, id: RuleId) -> bool {
        self.change(|t| t.remove(id))
    }

    /// Removes every rule; how many there were.
    pub fn clear(&self) -> usize {
        self.change(|t| t.remove_where(|_| true))
    }

    /// Zeroes the counters of the rules for which `which` is true (`lnetctl fault
    /// drop|delay reset`); how many.
    pub fn reset(&self, which: impl FnMut(&FaultRule) -> bool) -> usize {
        let now = self.clock.now();
        self.lock().reset_where(now, which)
    }

    /// The rules and how often each matched and fired.
    pub fn rules(&self) -> Vec<RuleStats> {
        self.lock().rules()
    }

    /// The verdict for a message at `dir` through local NI `ni`, if a rule fires on it.
    pub(crate) fn check(&self, dir: Direction, ni: Nid, header: &Header) -> Option<FaultVerdict> {
        if self.is_empty() {
            return None;
        }
        let now = self.clock.now();
        let mut table = self.lock();
        let verdict = table.check(dir, ni, header, now);
        if let Some(v) = verdict {
            tracing::debug!(%ni, ?dir, ?v, src = %header.src_nid, dst = %header.dest_nid, "fault rule fired");
        }
        verdict
    }
}
