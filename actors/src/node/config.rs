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
    /// The CPTs: one actix arbiter each. An NI or peer NI actor runs on the one of its
    /// NID's CPT (`Nid::cpt`); empty: all on the current arbiter.
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

/// The credits a local NI is added with: its own tx credits and, for the peer NIs of its
/// net, their tx credits and router-buffer credits (its net's `peer_credits` and
/// `peer_buffer_credits` tunables, as the kernel takes them from the net; none given: the
/// node's defaults, [`NodeConfig::peer_credits`] and [`NodeConfig::peer_buffer_credits`]),
/// and its net's `peer_timeout` (none given: the LNDs' default,
/// [`lnet::aliveness::DEFAULT_PEER_TIMEOUT`]; 0 turns the peer NI aliveness rule off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NiCredits {
    /// The NI's tx credits (`credits`).
    pub credits: u32,
    /// Tx credits of each peer NI on the NI's net (`peer_credits`).
    pub peer_credits: Option<u32>,
    /// Router-buffer credits of each peer NI on the NI's net (`peer_buffer_credits`;
    /// 0: the peer NI's tx credits).
    pub peer_buffer_credits: Option<u32>,
    /// `peer_timeout` of the NI's net, seconds (0: the peer NI aliveness rule is off).
    pub peer_timeout: Option<u32>,
}

impl From<u32> for NiCredits {
    /// An NI with `credits` tx credits and the node's defaults for its peers.
    fn from(credits: u32) -> NiCredits {
        NiCredits {
            credits,
            peer_credits: None,
            peer_buffer_credits: None,
            peer_timeout: None,
        }
    }
}

/// A local net's tunables for its peer NIs: their tx credits (`peer_credits`), the
/// router-buffer credits as configured (`peer_buffer_credits`, 0: their tx credits) and
/// `peer_timeout` (seconds; above 0 the peer NI aliveness rule is on while routing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetCredits {
    pub(crate) peer_credits: u32,
    pub(crate) peer_buffer_credits: u32,
    pub(crate) peer_timeout: u32,
}

impl NodeConfig {
    /// The credits of the peer NIs of a net whose first NI came with `ni`: the net's own
    /// tunables, else the node's defaults.
    pub(crate) fn net_credits(&self, ni: &NiCredits) -> NetCredits {
        let positive = |v: Option<u32>| v.filter(|v| *v > 0);
        NetCredits {
            peer_credits: positive(ni.peer_credits).unwrap_or(self.peer_credits),
            peer_buffer_credits: positive(ni.peer_buffer_credits)
                .unwrap_or(self.peer_buffer_credits),
            peer_timeout: ni
                .peer_timeout
                .unwrap_or(lnet::aliveness::DEFAULT_PEER_TIMEOUT),
        }
    }
}

impl NetCredits {
    /// The router-buffer credits of each peer NI (the kernel's
    /// `lnet_peer_buffer_credits`: `peer_buffer_credits` if set, else `peer_credits`).
    pub(crate) fn router_credits(&self) -> u32 {
        if self.peer_buffer_credits > 0 {
            self.peer_buffer_credits
        } else {
            self.peer_credits
        }
    }
}
