//! The LNet endpoint: [`LnetActor`] and its handle [`Node`].
//!
//! A node has local NIs (several per net, on any LND) and knows peers, each a primary NID
//! and one or more peer NIs on one or more nets, Multi-Rail or not. It offers:
//!
//! * PUT (with or without ACK) and GET, each with a caller-given transaction timeout. The
//!   caller gets a [`Transaction`]: its events SEND, then ACK or REPLY, each with an
//!   [`Outcome`].
//! * Health: every completion goes through [`lnet::health::health_check`]; the local NI
//!   and peer NI actors apply the effects; a resendable failure is resent on the pair the
//!   selection picks next (from the same local NI for a non-Multi-Rail peer) while
//!   `retry_count` and the transaction timeout allow. A PUT that asked for an ACK is
//!   delivered to the receiver's MD at most once, however often it was sent: the receiver
//!   remembers the ACK handles it has seen (the handle names the sender's MD, and a resend
//!   keeps it) and only ACKs a repeat.
//! * The ping responder on the reserved portal 0 (match bits
//!   [`PING_MATCHBITS`](lnet::PING_MATCHBITS)), a ping client ([`Node::ping`]) and
//!   discovery ([`Node::discover`]: ping, then push with ACK; pushes received are ACKed
//!   and update the view of the sender). When this node's ping
//!   info changes (an NI is added, which bumps its sequence number, or an NI's status
//!   flips UP/DOWN, patched in place), it is pushed to every discovered Multi-Rail,
//!   discovery-capable peer.
//!
//! Routes ([`Node::add_route`]): a peer on a net this node has no NI on is reached through
//! a gateway. The router checker pings (and pushes to) each gateway every
//! `alive_router_check_interval`, and its replies and pushes decide which routes are alive
//! ([`lnet::route::route_status`], asymmetric route failure detection included). With
//! routing on, messages for other nodes are forwarded: the [`RouterActor`] holds their
//! buffers, and this actor sends them on to the destination or to a gateway, keeping the
//! end-to-end source and destination. Without routing they are dropped and counted. While
//! routing, this node advertises a local net DOWN in its ping info when the net went
//! silent ([`lnet::netcheck`]) or an NI's link is down, and pushes every change at once.
//! Local NI recovery pings go from the NI being recovered to a known peer NI on its net
//! (an LND does not send to its own NID).
//!
//! The actor's state is defined here ([`LnetActor`]); its work is spread over one
//! submodule per step of the data path, each an `impl LnetActor` block with the
//! messages it handles:
//!
//! * `lnd_glue`: what the LNDs call ([`NodeHandler`]) and the channels it feeds.
//! * `select`: path selection for the next attempt of a message.
//! * `send`: sending, completions (health, resend), and the ACK and REPLY sent back.
//! * `recv`: MDs ([`MdSpec`]) and the delivery of what arrives for this node.
//! * `txn`: transactions ([`Transaction`]), their events and their deadline timer.
//! * `discovery`: ping info, pings, discovery and pushes, recovery pings.
//! * `peers`: the peer table and the peer NI actors.
//! * `routes`, `router_check`, `forward`: routes and gateways; the router checker and
//!   the net check; forwarding and draining.
//! * `msgs`: the management messages (NIs, health, tunables, UDSP, NUMA, counters).
//! * `handle`: [`Node`], the API; `faults`: fault injection through it; `config`
//!   ([`NodeConfig`]) and `error` ([`NodeError`]).

mod config;
mod cpt;
mod discovery;
mod error;
mod fast_path;
mod faults;
mod forward;
mod handle;
mod held;
mod lnd_glue;
mod msg_table;
mod msgs;
mod peers;
mod publish;
mod recv;
mod router_check;
mod routes;
mod select;
mod send;
mod txn;

use config::NetCredits;
pub use config::{NiCredits, NodeConfig};
pub use discovery::{DiscoveredPeer, PingFailure, PingReply};
pub use error::{BadPeerReason, LndStartError, NodeError, PeerBusyReason};
pub use fast_path::ForwardingCounts;
pub use forward::Drained;
pub use handle::Node;
pub use lnd_glue::NodeHandler;
pub use peers::PeerView;
pub use recv::MdSpec;
pub use routes::{NetAdvert, RouteView, RoutingShow};
pub use send::{GetRequest, PutRequest};
pub use txn::{FailReason, MsgEvent, MsgEventKind, Outcome, Transaction};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use actix::prelude::*;
use arc_swap::ArcSwap;
use bytes::Bytes;
use lnd::{RxMessage, TxCompletion, TxId};
use lnet::recovery::{RecoveryConfig, RecoveryKind};
use lnet::time::Millis;
use lnet::{Header, Net, Nid, WireHandle};
use tokio::sync::{mpsc, watch};

use crate::clock::Clock;
use crate::driver::Driver;
use crate::events::EventBus;
use crate::fault::FaultRules;
use crate::ni::{LocalNiActor, LocalNiView, PeerNiActor, PeerNiView};
use crate::ni_cell::NiCell;
use crate::recovery::{PingDue, RecoveryActor};
use crate::router::{RouterActor, Ticket};
use lnd_glue::RxPolicy;
use peers::PeerTable;
use routes::Routes;

/// How many bytes a ping asks for (`lnetctl ping`'s cap).
pub const PING_SINK_LENGTH: u32 = 3960;
/// How many recently seen ACK handles a node remembers to suppress duplicate PUTs.
pub const SEEN_PUTS: usize = 4096;
/// Mailbox capacity of the LNet actor.
const LNET_MAILBOX: usize = 1024;

struct LocalNiEntry {
    addr: Addr<LocalNiActor>,
    driver: Arc<dyn Driver>,
    /// The NUMA node of its device, if known.
    numa_node: Option<u32>,
    view: watch::Receiver<LocalNiView>,
    cell: Arc<NiCell>,
}

struct PeerNiEntry {
    addr: Addr<PeerNiActor>,
    view: watch::Receiver<PeerNiView>,
    cell: Arc<NiCell>,
}

/// One message to send (a PUT, GET, ACK or REPLY) across its attempts.
struct OutMsg {
    header: Header,
    payload: Bytes,
    target: Nid,
    txn: Option<u64>,
    deadline: Millis,
    retries: u32,
    recovery_ping: bool,
    pin_local: Option<Nid>,
    pin_peer: Option<Nid>,
    attempt: Option<(TxId, Nid, Nid)>,
    abandoned: bool,
    /// A message this node forwards: the router buffer it holds. Its header goes on as
    /// it came (end-to-end source and destination).
    forward: Option<Ticket>,
}

/// What a health effect finishes: a send of a message of this type, or its receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A send is over: its type, and its bytes as its peer NI counted them queued
    /// ([`crate::ni_cell::tx_bytes`]).
    SendDone(lnet::MsgType, u64),
    Received(lnet::MsgType),
}

/// Where one attempt of a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Path {
    /// The local NI.
    ni: Nid,
    /// The next hop: the destination, or a gateway.
    next_hop: Nid,
    /// The header's destination.
    dest: Nid,
}

struct Txn {
    events: mpsc::Sender<MsgEvent>,
    want_response: bool,
    reply: bool,
    sent: bool,
    done: bool,
    retries: u32,
    last_peer_ni: Option<Nid>,
    msg: u64,
    request: lnet::response::Request,
    /// When the caller's transaction timeout ends it.
    deadline: Millis,
    /// When it started, in nanoseconds of the node's clock (its latencies count from
    /// here).
    started_ns: u64,
}

struct Md {
    spec: MdSpec,
    deliveries: mpsc::Sender<RxMessage>,
}

/// The LNet endpoint actor.
pub struct LnetActor {
    config: NodeConfig,
    clock: Clock,
    /// The node's fault rules, which its local NI actors apply to every send.
    faults: FaultRules,
    events: EventBus,
    completions: mpsc::Sender<TxCompletion>,
    nis: BTreeMap<Nid, LocalNiEntry>,
    ni_order: Vec<Nid>,
    peers: PeerTable,
    peer_nis: HashMap<Nid, PeerNiEntry>,
    msgs: msg_table::MsgTable<OutMsg>,
    attempts: HashMap<TxId, u64>,
    txns: HashMap<u64, Txn>,
    /// The open transactions by deadline; one timer, armed for the earliest of them.
    txn_deadlines: BTreeSet<(Millis, u64)>,
    txn_timer: Option<(Millis, SpawnHandle)>,
    next_id: u64,
    mds: Vec<Md>,
    seen: HashSet<WireHandle>,
    seen_order: VecDeque<WireHandle>,
    seqno: u32,
    local_recovery: Option<Addr<RecoveryActor>>,
    peer_recovery: Option<Addr<RecoveryActor>>,
    counters: BTreeMap<&'static str, u64>,
    router: Addr<RouterActor>,
    path: Arc<fast_path::ForwardPath>,
    policy: Arc<ArcSwap<RxPolicy>>,
    routes: Routes,
    /// Traffic the forwarding path heard, for the net check.
    path_heard: publish::PathHeard,
    /// The receives the LNDs wait on this node for, per net (see [`held`]).
    held: Arc<held::Held>,
    /// Each local net's credits for its peer NIs, as its first NI brought them.
    net_credits: HashMap<Net, NetCredits>,
}

impl std::fmt::Debug for LnetActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LnetActor")
            .field("nis", &self.ni_order)
            .finish()
    }
}

impl Actor for LnetActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(LNET_MAILBOX);
        ctx.run_interval(router_check::ROUTER_TICK, |act, ctx| {
            act.path_heard(ctx);
            act.router_tick(ctx);
            act.publish_forward();
        });
        let config = RecoveryConfig::from(&self.config.tunables);
        let me = ctx.address().recipient::<PingDue>();
        self.local_recovery = Some(
            RecoveryActor::new(
                RecoveryKind::LocalNi,
                config,
                self.clock,
                self.events.clone(),
                me.clone(),
            )
            .start(),
        );
        self.peer_recovery = Some(
            RecoveryActor::new(
                RecoveryKind::PeerNi,
                config,
                self.clock,
                self.events.clone(),
                me,
            )
            .start(),
        );
    }
}

fn bump(counters: &mut BTreeMap<&'static str, u64>, name: &'static str) {
    let n = counters.entry(name).or_default();
    *n = n.saturating_add(1);
}

impl LnetActor {
    fn next(&mut self) -> u64 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    /// Starts the NI or peer NI actor of `nid` on the arbiter of its CPT.
    fn place<A>(&self, nid: &Nid, actor: A) -> Addr<A>
    where
        A: Actor<Context = Context<A>> + Send,
    {
        cpt::start_on_cpt(&self.config.cpts, nid, actor)
    }

    fn is_local(&self, nid: &Nid) -> bool {
        self.nis.contains_key(nid)
    }

    /// Tells the receiving side this node's NIDs and whether it forwards.
    fn update_policy(&mut self) {
        let policy = RxPolicy {
            local: self.nis.keys().copied().collect(),
            routing: self.config.tunables.routing(),
        };
        self.policy.store(Arc::new(policy));
        self.publish_forward();
    }

    fn recovery(&self, kind: RecoveryKind) -> Option<&Addr<RecoveryActor>> {
        match kind {
            RecoveryKind::LocalNi => self.local_recovery.as_ref(),
            RecoveryKind::PeerNi => self.peer_recovery.as_ref(),
        }
    }
}
