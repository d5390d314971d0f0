//! Fault injection through the node's handle: LNDs with fault hooks, and the rules of
//! each local NI (`lnetctl fault`).

use std::sync::Arc;

use lnd::lnd::fault::{RuleId, RuleStats};
use lnd::Lnd;
use lnet::Nid;

use super::error::NodeError;
use super::handle::Node;
use super::lnd_glue::NodeHandler;
use crate::driver::{Driver, NiDriver};
use crate::fault::{FaultHooks, FaultRule};

impl Node {
    /// Starts an NI on LND `L`, as [`Node::add_ni`] does, and keeps its fault hooks so
    /// that [`Node::add_fault_rule`] and the others reach it.
    pub async fn add_ni_with_faults<L: Lnd<Handler = NodeHandler> + FaultHooks>(
        &self,
        config: L::Config,
        credits: u32,
    ) -> Result<Nid, NodeError> {
        let driver = self.start_lnd::<L>(config).await?;
        let nid = driver.nid();
        self.add_driver_with_faults(driver, credits).await?;
        Ok(nid)
    }

    /// [`Node::add_driver`] for an LND with fault hooks, kept as [`Node::add_ni_with_faults`]
    /// keeps them.
    pub async fn add_driver_with_faults<L: Lnd + FaultHooks>(
        &self,
        driver: Arc<NiDriver<L>>,
        credits: u32,
    ) -> Result<(), NodeError> {
        let nid = driver.nid();
        self.add_driver(driver.clone(), credits).await?;
        self.faults.insert(nid, driver);
        Ok(())
    }

    fn fault_hooks(&self, ni: Nid) -> Result<Arc<dyn FaultHooks>, NodeError> {
        self.faults
            .get(&ni)
            .ok_or(NodeError::NoFaultHooks { nid: ni })
    }

    /// Adds a fault rule on local NI `ni` (`lnetctl fault drop|delay add`): its LND
    /// checks it on every message the NI sends or receives from now on.
    pub fn add_fault_rule(&self, ni: Nid, rule: FaultRule) -> Result<RuleId, NodeError> {
        self.fault_hooks(ni)?
            .add_fault_rule(rule)
            .map_err(NodeError::FaultRule)
    }

    /// Removes a fault rule of local NI `ni` (`lnetctl fault drop|delay del`); whether it
    /// was there.
    pub fn remove_fault_rule(&self, ni: Nid, id: RuleId) -> Result<bool, NodeError> {
        Ok(self.fault_hooks(ni)?.remove_fault_rule(id))
    }

    /// Removes every fault rule of local NI `ni`.
    pub fn clear_fault_rules(&self, ni: Nid) -> Result<(), NodeError> {
        self.fault_hooks(ni)?.clear_fault_rules();
        Ok(())
    }

    /// The fault rules of local NI `ni` and how often each matched and fired
    /// (`lnetctl fault drop|delay show`).
    pub fn fault_rules(&self, ni: Nid) -> Result<Vec<RuleStats>, NodeError> {
        Ok(self.fault_hooks(ni)?.fault_rules())
    }
}
