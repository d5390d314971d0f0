//! Fault injection through the node's handle (`lnetctl fault drop|delay add|del|show|
//! reset`): the node's rules, node-wide as in the kernel; a rule names a local NI
//! (`--local_nid`) to apply at that NI only. See [`crate::fault`] for where they apply.

use lnet::fault::{FaultRule, RuleId, RuleStats};

use super::error::NodeError;
use super::handle::Node;

impl Node {
    /// Adds a fault rule (`lnetctl fault drop|delay add`); it applies to the messages sent
    /// and received from now on, through every LND.
    pub fn add_fault_rule(&self, rule: FaultRule) -> Result<RuleId, NodeError> {
        self.faults.add(rule).map_err(NodeError::FaultRule)
    }

    /// Adds a fault rule under id `id`, as a restarted router installs the rules it kept.
    pub fn insert_fault_rule(&self, id: RuleId, rule: FaultRule) -> Result<(), NodeError> {
        self.faults.insert(id, rule).map_err(NodeError::FaultRule)
    }

    /// Removes a fault rule (`lnetctl fault drop|delay del`); whether it was there.
    pub fn remove_fault_rule(&self, id: RuleId) -> bool {
        self.faults.remove(id)
    }

    /// Removes every fault rule; how many there were.
    pub fn clear_fault_rules(&self) -> usize {
        self.faults.clear()
    }

    /// Zeroes the counters of the fault rules for which `which` is true and restarts
    /// their triggers (`lnetctl fault drop|delay reset`: the drop or the delay rules); how
    /// many.
    pub fn reset_fault_rules(&self, which: impl FnMut(&FaultRule) -> bool) -> usize {
        self.faults.reset(which)
    }

    /// The fault rules and how often each matched and fired (`lnetctl fault drop|delay
    /// show`).
    pub fn fault_rules(&self) -> Vec<RuleStats> {
        self.faults.rules()
    }
}
