//! Where the API's configuration changes are kept: the daemon plugs in its store, so that a
//! route, peer or tunable changed through the API comes back after a restart. A change is
//! acknowledged only once it is kept; when keeping it fails, the node's change is undone
//! and the request fails.

use lnet::config::UdspRule;
use lnet::fault::{FaultRule, RuleId};
use lnet::route::RouteSpec;
use lnet::tunables::TunableName;
use lnet::{Net, Nid};

use crate::events::SinkError;

/// The persistent configuration behind the API.
pub trait ConfigStore: Send + Sync + 'static {
    /// A route was added.
    fn add_route(&self, route: &RouteSpec) -> Result<(), SinkError>;
    /// A route was deleted.
    fn delete_route(&self, net: Net, gateway: Nid) -> Result<(), SinkError>;
    /// A global tunable was set.
    fn set_tunable(&self, name: TunableName, value: u32) -> Result<(), SinkError>;
    /// A peer was added (or replaced).
    fn put_peer(&self, primary: Nid, nids: &[Nid], multi_rail: bool) -> Result<(), SinkError>;

    /// Deletes peer `primary` (all of it when `nids` is empty, else those NIDs) from what
    /// is kept; a peer that was never kept (learnt from traffic) is not an error.
    fn delete_peer(&self, primary: Nid, nids: &[Nid]) -> Result<(), SinkError>;
    /// A fault rule was added under id `id` (of the local NI it names, or of every NI).
    fn put_fault_rule(&self, id: RuleId, rule: &FaultRule) -> Result<(), SinkError>;
    /// Fault rule `id` was removed.
    fn delete_fault_rule(&self, id: RuleId) -> Result<(), SinkError>;
    /// The UDSP rules are now `rules`, in list order (`lnetctl udsp add|del`).
    fn set_udsp(&self, rules: &[UdspRule]) -> Result<(), SinkError>;
    /// The router started draining (`true`) or its drain ended.
    fn set_draining(&self, draining: bool) -> Result<(), SinkError>;
}
