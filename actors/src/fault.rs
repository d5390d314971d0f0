//! Fault injection per local NI, as `lnetctl fault drop|delay add` does it (health
//! reference §2.11): rules match a message by source and destination NID (or net),
//! portal and message type, fire on every message, every Nth, one in each window of N
//! (`-r`) or with a probability, and drop it, delay it, or fail its send with a chosen
//! health status (`-e`). A node installs the rules into the LND of the NI named, when
//! that LND has fault hooks ([`FaultHooks`]): today the socket LND
//! ([`lnd::socklnd::SockLnd`]). The in-process test fabric keeps its rules on the fabric
//! itself (shared by all its NIs, [`lnd::fabric::Fabric::add_rule`]) and is driven there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lnd::socklnd::SockLnd;
use lnd::LndHandler;
use lnet::Nid;

pub use lnd::lnd::fault::{
    FaultAction, FaultAddError, FaultRule, Hooks, MsgTypes, NidMatch, RuleId, RuleStats, Trigger,
};

/// An LND that enforces fault rules on the messages of its NI.
pub trait FaultHooks: Send + Sync + 'static {
    /// Adds a rule; it applies to messages sent or received from now on.
    fn add_fault_rule(&self, rule: FaultRule) -> Result<RuleId, FaultAddError>;
    /// Removes a rule; whether it was there.
    fn remove_fault_rule(&self, id: RuleId) -> bool;
    /// Removes every rule.
    fn clear_fault_rules(&self);
    /// The rules and how often each matched and fired.
    fn fault_rules(&self) -> Vec<RuleStats>;
}

impl<H: LndHandler> FaultHooks for SockLnd<H> {
    fn add_fault_rule(&self, rule: FaultRule) -> Result<RuleId, FaultAddError> {
        SockLnd::add_fault_rule(self, rule)
    }

    fn remove_fault_rule(&self, id: RuleId) -> bool {
        SockLnd::remove_fault_rule(self, id)
    }

    fn clear_fault_rules(&self) {
        SockLnd::clear_fault_rules(self);
    }

    fn fault_rules(&self) -> Vec<RuleStats> {
        SockLnd::fault_rules(self)
    }
}

/// The fault hooks of a node's NIs, by NID: shared by the clones of a [`crate::Node`].
#[derive(Clone, Default)]
pub struct FaultHookTable {
    inner: Arc<Mutex<HashMap<Nid, Arc<dyn FaultHooks>>>>,
}

impl std::fmt::Debug for FaultHookTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut nids: Vec<Nid> = self.lock().keys().copied().collect();
        nids.sort();
        f.debug_struct("FaultHookTable")
            .field("nis", &nids)
            .finish()
    }
}

impl FaultHookTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<Nid, Arc<dyn FaultHooks>>> {
        // The map stays consistent whatever panicked while holding it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the hooks of NI `nid`.
    pub fn insert(&self, nid: Nid, hooks: Arc<dyn FaultHooks>) {
        self.lock().insert(nid, hooks);
    }

    /// Forgets the hooks of NI `nid`.
    pub fn remove(&self, nid: &Nid) {
        self.lock().remove(nid);
    }

    /// The hooks of NI `nid`, if it has any.
    pub fn get(&self, nid: &Nid) -> Option<Arc<dyn FaultHooks>> {
        self.lock().get(nid).cloned()
    }
}
