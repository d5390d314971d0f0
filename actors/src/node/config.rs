//! The settings of a node ([`NodeConfig`]).

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use actix::prelude::*;
use lnet::netcheck::NetCheckMode;
use lnet::nid::PID_LUSTRE;
use lnet::numa::NumaTopology;
use lnet::route::RouterCheck;
use lnet::tunables::Tunables;
use lnet::udsp::UdspPolicy;

/// Settings of a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The global tunables (`retry_count`, `health_sensitivity`, recovery settings ...).
    pub tunables: Tunables,
    /// The node's pid (12345).
    pub pid: u32,
    /// The interface cookie of the node's wire handles: tells its MDs apart from those of
    /// an earlier run.
    pub incarnation: u64,
    /// Most sends accepted and not yet completed; a PUT or GET beyond it is refused with
    /// [`NodeError::Busy`](super::NodeError::Busy).
    pub max_in_flight: usize,
    /// Events kept for a slow subscriber of the bus.
    pub event_capacity: usize,
    /// Default tx credits of a peer NI.
    pub peer_credits: u32,
    /// The CPTs: one actix arbiter each. NI and peer NI actors are spread over them
    /// (round robin, in the order they are added); empty: all on the current arbiter.
    pub cpts: Vec<ArbiterHandle>,
    /// The router checker (gateway pings) of this node as a user of routes.
    pub router_check: RouterCheck,
    /// How this node, when it forwards, decides that a local net went silent.
    pub net_check: NetCheckMode,
    /// Router-buffer credits of each peer NI (`peer_buffer_credits`); 0: `peer_credits`.
    pub peer_buffer_credits: u32,
    /// The UDSP rules, compiled ([`Node::set_udsp`](super::Node::set_udsp) replaces them).
    pub udsp: UdspPolicy,
    /// The machine's NUMA distances.
    pub numa: NumaTopology,
    /// The NUMA node of the memory of messages this node sends itself (its process's
    /// node, when it runs on one); forwarded messages have none.
    pub memory_node: Option<u32>,
}

static INCARNATIONS: AtomicU64 = AtomicU64::new(1);

impl Default for NodeConfig {
    fn default() -> NodeConfig {
        let n = INCARNATIONS.fetch_add(1, AtomicOrdering::Relaxed);
        NodeConfig {
            tunables: Tunables::default(),
            pid: PID_LUSTRE,
            incarnation: (u64::from(std::process::id()) << 32) | n,
            max_in_flight: 1024,
            event_capacity: 4096,
            peer_credits: 8,
            cpts: Vec::new(),
            router_check: RouterCheck::default(),
            net_check: NetCheckMode::ACTIVE,
            peer_buffer_credits: 0,
            udsp: UdspPolicy::default(),
            numa: NumaTopology::default(),
            memory_node: None,
        }
    }
}
