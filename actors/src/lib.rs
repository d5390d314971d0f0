//! Actix actors that own LNet's live state and apply the rules of the `lnet` crate to what
//! the LNDs of the `lnd` crate report.
//!
//! * [`ni::LocalNiActor`]: one per local NI (tx credits, health value, status, counters).
//! * [`ni::PeerNiActor`]: one per peer NI (tx credits, health value, counters); peer NIs
//!   are grouped under a peer with a primary NID and a Multi-Rail flag.
//! * [`recovery::RecoveryActor`]: the local NI and the peer NI recovery queues, pinging
//!   unhealthy NIs on the backoff schedule of [`lnet::recovery`].
//! * [`node::LnetActor`]: the LNet endpoint. It selects paths, sends PUTs and GETs with
//!   caller-given transaction timeouts, applies [`lnet::health::health_check`] to every
//!   completion (health, recovery, resend), answers pings on the reserved portal, pings,
//!   and runs discovery (ping then push). [`node::Node`] is its handle.
//! * [`show`]: the node's live state as the `lnetctl ... show` documents of
//!   [`lnet::show`] ([`Node::net_show`], [`Node::peer_show`], [`Node::stats_show`],
//!   [`Node::recovery_show`]).
//! * [`driver`]: a started LND as the node drives it, stoppable after it was handed over
//!   ([`node::Node::remove_ni`]).
//! * [`lnd_counters`]: what each local NI's LND counts of how its connections end
//!   ([`node::Node::lnd_counters`]), one view per LND kind.
//! * [`fault`]: fault injection (`lnetctl fault drop|delay add`): the node's rules,
//!   changed through [`node::Node::add_fault_rule`] and applied by the local NI actors on
//!   send and by [`node::NodeHandler`] on receive, for every LND.
//!
//! Time comes from [`clock::Clock`] (tokio's clock, pausable in tests); every change of
//! health, status and recovery is an [`events::Event`] on the bounded [`events::EventBus`].
//! Mailboxes and channels are bounded. A CPT is an actix Arbiter: every actor here can be
//! started on the arbiter of its CPT; today a node starts them on the current one.

mod by_runs;
pub mod clock;
pub mod driver;
pub mod events;
pub mod fault;
pub mod lnd_counters;
mod mailbox;
pub mod ni;
pub mod ni_cell;
pub mod node;
pub mod recovery;
pub mod router;
pub mod show;
mod tx_credits;

pub use clock::Clock;
pub use driver::{Driver, NiDriver};
pub use events::{Event, EventBus, NiKind};
pub use lnd_counters::{LndCounters, NiLndCounters};
pub use node::{
    BadPeerReason, DiscoveredPeer, FailReason, ForwardingCounts, GetRequest, LndStartError, MdSpec,
    MsgEvent, MsgEventKind, NiCredits, Node, NodeConfig, NodeError, NodeHandler, Outcome,
    PeerBusyReason, PeerView, PingReply, PutRequest, Transaction,
};
pub use node::{NetAdvert, RouteView, RoutingShow};
