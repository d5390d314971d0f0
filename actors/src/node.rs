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
//! * The ping responder on the reserved portal 0 (match bits [`PING_MATCHBITS`]), a ping
//!   client ([`Node::ping`]) and discovery ([`Node::discover`]: ping, then push with ACK;
//!   pushes received are ACKed and update the view of the sender). When this node's ping
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

mod peers;
mod routing;

pub use routing::{Drained, NetAdvert, RouteView, RoutingShow};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use lnd::lnd::fault::{FaultAddError, RuleId, RuleStats};
use lnd::{
    lnd::PeerDown, Lnd, LndHandler, RxDecision, RxHeader, RxMessage, TxCompletion, TxId, TxRequest,
};
use lnet::health::check::{Committed, NiState, NoResend, Resend, ResendFrom};
use lnet::health::{health_check, HealthContext, HealthStatus, HealthValue};
use lnet::netcheck::NetCheckMode;
use lnet::nid::PID_LUSTRE;
use lnet::numa::NumaTopology;
use lnet::ping::{INTERFACES_MAX_DEFAULT, RESERVED_PORTAL};
use lnet::recovery::{RecoveryConfig, RecoveryEntry, RecoveryKind};
use lnet::route::RouterCheck;
use lnet::rtrbuf::PoolKind;
use lnet::selection::{
    select_path, LocalNiCandidate, LocalNiParams, PeerNetCandidate, PeerNiCandidate,
    LNET_MAX_SELECTION_PRIORITY,
};
use lnet::time::Millis;
use lnet::tunables::Tunables;
use lnet::udsp::{UdspError, UdspPolicy};
use lnet::{
    Features, Header, Message as LnetMsg, Net, NiStatus, Nid, PingInfo, WireHandle, PING_MATCHBITS,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::Clock;
use crate::driver::{Driver, NiDriver};
use crate::events::{Event, EventBus, ForwardDrop, RouteCause};
use crate::fault::{FaultHookTable, FaultHooks, FaultRule};
use crate::ni::{
    tell, Apply, LocalNiActor, LocalNiView, PeerNiActor, PeerNiView, PeerTransmit, SetHealth,
};
use crate::recovery::{Configure, Forget, List, PingDue, RecoveryActor};
use crate::router::{Release, Reserve, RouterActor, Ticket};
use peers::{NidTaken, PeerTable};

/// How many bytes a ping asks for (`lnetctl ping`'s cap).
pub const PING_SINK_LENGTH: u32 = 3960;
/// How many recently seen ACK handles a node remembers to suppress duplicate PUTs.
pub const SEEN_PUTS: usize = 4096;
/// Mailbox capacity of the LNet actor.
const LNET_MAILBOX: usize = 1024;

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
    /// [`NodeError::Busy`].
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
    /// The UDSP rules, compiled ([`Node::set_udsp`] replaces them).
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

/// Why a node refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A route was refused.
    #[error("route refused: {error}")]
    Route {
        /// Why.
        error: lnet::route::RouteError,
    },
    /// The LND could not start the NI.
    #[error("NI could not start: {reason}")]
    NiStart {
        /// Why.
        reason: String,
    },
    /// An NI with this NID exists already.
    #[error("NI {nid} exists already")]
    NiExists {
        /// The NID.
        nid: Nid,
    },
    /// No local NI has this NID.
    #[error("no local NI {nid}")]
    NoSuchNi {
        /// The NID.
        nid: Nid,
    },
    /// No peer NI has this NID.
    #[error("no peer NI {nid}")]
    NoSuchPeerNi {
        /// The NID.
        nid: Nid,
    },
    /// A peer needs at least one NID, none of them this node's own.
    #[error("bad peer: {reason}")]
    BadPeer {
        /// Why.
        reason: String,
    },
    /// Too many sends in flight.
    #[error("too many messages in flight ({max})")]
    Busy {
        /// The limit.
        max: usize,
    },
    /// The node's actor is gone.
    #[error("the node is stopped")]
    Stopped,
    /// No local NI with this NID has fault hooks (it does not exist, or its LND has none,
    /// or it was not added with [`Node::add_ni_with_faults`]).
    #[error("no local NI {nid} with fault hooks")]
    NoFaultHooks {
        /// The NID.
        nid: Nid,
    },
    /// The LND refused a fault rule.
    #[error("fault rule refused: {0}")]
    FaultRule(FaultAddError),
    /// A UDSP rule list was refused.
    #[error("UDSP rules refused: {0}")]
    Udsp(UdspError),
}

impl From<MailboxError> for NodeError {
    fn from(_: MailboxError) -> NodeError {
        NodeError::Stopped
    }
}

/// Why a message failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailReason {
    /// `health_check` decided not to resend it (the class, or the gates).
    NoResend(NoResend),
    /// The transaction timeout ran out first.
    Timeout,
    /// No local NI and peer NI pair reaches the destination.
    NoPath,
}

/// How a step of a message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It went through.
    Ok,
    /// It failed for good.
    Failed {
        /// The health status of the last attempt (REMOTE_TIMEOUT for a missing ACK or
        /// REPLY).
        status: HealthStatus,
        /// Why there was no (further) resend.
        reason: FailReason,
    },
}

impl Outcome {
    /// Whether this is OK.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }
}

/// The kind of a message event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgEventKind {
    /// The PUT or GET was sent (or failed to be).
    Send,
    /// The ACK of a PUT arrived (or did not in time).
    Ack,
    /// The REPLY of a GET arrived (or did not in time).
    Reply,
}

/// One event of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgEvent {
    /// Which.
    pub kind: MsgEventKind,
    /// How it ended.
    pub status: Outcome,
    /// Resends made before this event.
    pub retries: u32,
    /// The REPLY's payload.
    pub payload: Option<Bytes>,
    /// The NID that sent the ACK or REPLY.
    pub from: Option<Nid>,
}

/// A PUT or GET in progress: its events arrive on a bounded channel; the last one is the
/// SEND event of a failed send, the ACK or REPLY event, or the SEND event of a PUT without
/// ACK.
#[derive(Debug)]
pub struct Transaction {
    /// The events.
    pub events: mpsc::Receiver<MsgEvent>,
    want_response: bool,
}

impl Transaction {
    /// Waits for every event of the transaction; there is a last one by the transaction
    /// timeout at the latest.
    pub async fn finish(mut self) -> Vec<MsgEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.events.recv().await {
            let last = !e.status.is_ok() || e.kind != MsgEventKind::Send || !self.want_response;
            out.push(e);
            if last {
                break;
            }
        }
        out
    }
}

/// A PUT.
#[derive(Debug, Clone)]
pub struct PutRequest {
    /// The destination: a peer's NID (any of its NIDs).
    pub dest: Nid,
    /// The portal.
    pub portal: u32,
    /// The match bits.
    pub match_bits: u64,
    /// Carried to the target.
    pub hdr_data: u64,
    /// The payload.
    pub payload: Bytes,
    /// Whether an ACK is wanted.
    pub ack: bool,
    /// The transaction timeout.
    pub timeout: Duration,
}

/// A GET.
#[derive(Debug, Clone)]
pub struct GetRequest {
    /// The destination.
    pub dest: Nid,
    /// The portal.
    pub portal: u32,
    /// The match bits.
    pub match_bits: u64,
    /// The most bytes wanted.
    pub sink_length: u32,
    /// The transaction timeout.
    pub timeout: Duration,
}

/// A memory descriptor this node exposes: PUTs matching it are delivered on the channel
/// [`Node::attach`] returns; GETs matching it are answered with `data`.
#[derive(Debug, Clone)]
pub struct MdSpec {
    /// The portal.
    pub portal: u32,
    /// The match bits.
    pub match_bits: u64,
    /// What a GET reads.
    pub data: Bytes,
    /// Capacity of the delivery channel: a PUT that finds it full (its consumer is that
    /// far behind) is dropped, counted in `drop_count`, and not ACKed.
    pub depth: usize,
}

/// The answer to a ping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingReply {
    /// The NID that answered.
    pub from: Nid,
    /// Its ping info.
    pub info: PingInfo,
}

impl PingReply {
    /// The peer's NIDs with their status, in the order of its ping info.
    pub fn nids(&self) -> Vec<(Nid, bool)> {
        self.info.statuses().map(|(n, s)| (n, s.is_up())).collect()
    }
}

/// Why a ping failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PingFailure {
    /// The node refused it.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The GET or its REPLY failed.
    #[error("ping failed: {0:?}")]
    Failed(Outcome),
    /// The REPLY was not a valid ping info.
    #[error("bad ping info: {0}")]
    BadInfo(String),
}

/// What discovery learned about a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredPeer {
    /// Its primary NID.
    pub primary: Nid,
    /// Its NIDs, with their status.
    pub nids: Vec<(Nid, bool)>,
    /// Whether it is Multi-Rail.
    pub multi_rail: bool,
    /// Whether our push to it was ACKed (only Multi-Rail, discovery-capable peers are
    /// pushed to).
    pub pushed: bool,
}

/// A peer as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerView {
    /// Its primary NID.
    pub primary: Nid,
    /// Whether it is Multi-Rail.
    pub multi_rail: bool,
    /// Its peer NIs.
    pub nis: Vec<PeerNiView>,
    /// Its NIDs with their status as its ping info or its last push gave it (true: up;
    /// NIDs added by hand are up).
    pub nids: Vec<(Nid, bool)>,
}

/// What the LNDs call: forwards completions and received messages to the node, through
/// bounded channels. A message for another node waits here for a router buffer
/// ([`RouterActor`]) before its payload is read, when the node forwards.
#[derive(Debug)]
pub struct NodeHandler {
    completions: mpsc::Sender<TxCompletion>,
    received: mpsc::Sender<Inbound>,
    policy: watch::Receiver<RxPolicy>,
    router: Addr<RouterActor>,
    /// Buffers granted to messages whose payload is being read, by local NI, peer and
    /// pool: buffers of one pool from one peer are interchangeable.
    pending: std::sync::Mutex<HashMap<(Nid, Nid, PoolKind), Vec<Ticket>>>,
}

/// What a receiving LND needs to know to place a payload: this node's NIDs and whether
/// it forwards.
#[derive(Debug, Clone, Default)]
pub(crate) struct RxPolicy {
    local: HashSet<Nid>,
    routing: bool,
}

/// What the LNDs hand the node.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A message, with the router buffer it holds when it is to be forwarded.
    Message(RxMessage, Option<Ticket>),
    /// The LND lost a peer.
    PeerDown(PeerDown),
}

impl NodeHandler {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<(Nid, Nid, PoolKind), Vec<Ticket>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl LndHandler for NodeHandler {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        let len = rx.header.payload_length;
        let buf =
            || RxDecision::Receive(BytesMut::with_capacity(usize::try_from(len).unwrap_or(0)));
        let forward = {
            let p = self.policy.borrow();
            p.routing && !p.local.contains(&rx.header.dest_nid)
        };
        if !forward {
            return buf();
        }
        // Store and forward: wait for a peer router-buffer credit and a buffer.
        let (tx, answer) = oneshot::channel();
        self.router.do_send(Reserve {
            peer: rx.from.nid,
            len,
            reply: tx,
        });
        match answer.await {
            Ok(Ok(ticket)) => {
                if let Some(pool) = PoolKind::for_payload(len) {
                    self.pending()
                        .entry((rx.ni, rx.from.nid, pool))
                        .or_default()
                        .push(ticket);
                }
                buf()
            }
            Ok(Err(e)) => {
                tracing::warn!(from = %rx.from.nid, %e, "message to forward refused");
                RxDecision::Close
            }
            Err(_) => RxDecision::Close,
        }
    }

    async fn on_message(&self, msg: RxMessage) {
        let ticket = PoolKind::for_payload(msg.header.payload_length).and_then(|pool| {
            let mut pending = self.pending();
            let key = (msg.ni, msg.from.nid, pool);
            let t = pending.get_mut(&key).and_then(Vec::pop);
            if pending.get(&key).is_some_and(Vec::is_empty) {
                pending.remove(&key);
            }
            t
        });
        let _ = self.received.send(Inbound::Message(msg, ticket)).await;
    }

    fn on_send_complete(&self, done: TxCompletion) {
        // At most one completion per send in flight, and the channel holds them all.
        if self.completions.try_send(done).is_err() {
            tracing::error!("completion channel full or closed");
        }
    }

    fn on_peer_down(&self, down: PeerDown) {
        // Buffers granted to messages from this peer that will never be read in full.
        let lost: Vec<Ticket> = {
            let mut pending = self.pending();
            let keys: Vec<_> = pending
                .keys()
                .filter(|(ni, peer, _)| *ni == down.ni && *peer == down.peer)
                .copied()
                .collect();
            keys.into_iter()
                .filter_map(|k| pending.remove(&k))
                .flatten()
                .collect()
        };
        for t in lost {
            self.router.do_send(Release(t));
        }
        if self.received.try_send(Inbound::PeerDown(down)).is_err() {
            tracing::warn!("peer-down report dropped: the node is busy");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Messages to the LNet actor.

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
struct AddNi {
    driver: Arc<dyn Driver>,
    credits: u32,
}

/// Takes NI `0` out of the node; answers its driver, to be stopped.
#[derive(Message)]
#[rtype(result = "Result<Arc<dyn Driver>, NodeError>")]
struct RemoveNi(Nid);

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
struct AddPeer {
    primary: Nid,
    nids: Vec<Nid>,
    multi_rail: bool,
}

#[derive(Message)]
#[rtype(result = "Result<Transaction, NodeError>")]
struct StartTxn {
    dest: Nid,
    msg: LnetMsg,
    payload: Bytes,
    timeout: Duration,
    want_response: bool,
}

#[derive(Message)]
#[rtype(result = "mpsc::Receiver<RxMessage>")]
struct Attach(MdSpec);

/// The receiving end of one of the LNDs' channels to the node, as a stream the LNet
/// actor reads directly (no task in between).
struct ChannelStream<T>(mpsc::Receiver<T>);

impl<T> Stream for ChannelStream<T> {
    type Item = T;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

#[derive(Message)]
#[rtype(result = "Vec<LocalNiView>")]
struct ListNis;

#[derive(Message)]
#[rtype(result = "Vec<PeerView>")]
struct ListPeers;

#[derive(Message)]
#[rtype(result = "Result<Vec<RecoveryEntry<Nid>>, NodeError>")]
struct ListRecovery(RecoveryKind);

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
struct SetNiHealth {
    local: bool,
    nid: Nid,
    value: HealthValue,
}

#[derive(Message)]
#[rtype(result = "PingInfo")]
struct OwnInfo;

#[derive(Message)]
#[rtype(result = "()")]
struct SetTunables(Tunables);

#[derive(Message)]
#[rtype(result = "()")]
struct LearnPeer(PingInfo, Nid);

#[derive(Message)]
#[rtype(result = "BTreeMap<&'static str, u64>")]
struct Counters;

/// A local NI's status flipped (UP/DOWN).
#[derive(Message)]
#[rtype(result = "()")]
struct NiStatusChanged;

/// The settings the show documents print: the default peer NI tx credits and the number
/// of CPTs.
#[derive(Message)]
#[rtype(result = "(u32, usize)")]
struct ShowSettings;

/// Replaces the UDSP rules.
#[derive(Message)]
#[rtype(result = "()")]
struct SetUdsp(UdspPolicy);

/// The UDSP rules in force.
#[derive(Message)]
#[rtype(result = "UdspPolicy")]
struct GetUdsp;

/// Sets the NUMA node of a local NI's device.
#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
struct SetNiNumaNode(Nid, Option<u32>);

// ---------------------------------------------------------------------------------------

struct LocalNiEntry {
    addr: Addr<LocalNiActor>,
    driver: Arc<dyn Driver>,
    /// The NUMA node of its device, if known.
    numa_node: Option<u32>,
    view: watch::Receiver<LocalNiView>,
    seq: u64,
}

struct PeerNiEntry {
    addr: Addr<PeerNiActor>,
    view: watch::Receiver<PeerNiView>,
    seq: u64,
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
    SendDone(lnet::MsgType),
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
}

struct Md {
    spec: MdSpec,
    deliveries: mpsc::Sender<RxMessage>,
}

/// The LNet endpoint actor.
pub struct LnetActor {
    config: NodeConfig,
    clock: Clock,
    events: EventBus,
    completions: mpsc::Sender<TxCompletion>,
    nis: BTreeMap<Nid, LocalNiEntry>,
    ni_order: Vec<Nid>,
    peers: PeerTable,
    peer_nis: HashMap<Nid, PeerNiEntry>,
    msgs: HashMap<u64, OutMsg>,
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
    next_cpt: usize,
    router: Addr<RouterActor>,
    policy: watch::Sender<RxPolicy>,
    routes: routing::Routes,
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
        ctx.run_interval(routing::ROUTER_TICK, |act, ctx| act.router_tick(ctx));
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

    /// Starts an NI or peer NI actor on the next CPT's arbiter.
    fn place<A>(&mut self, actor: A) -> Addr<A>
    where
        A: Actor<Context = Context<A>> + Send,
    {
        let n = self.config.cpts.len();
        if n == 0 {
            return actor.start();
        }
        let i = self.next_cpt % n;
        self.next_cpt = self.next_cpt.wrapping_add(1);
        match self.config.cpts.get(i) {
            Some(cpt) => A::start_in_arbiter(cpt, move |_| actor),
            None => actor.start(),
        }
    }

    fn is_local(&self, nid: &Nid) -> bool {
        self.nis.contains_key(nid)
    }

    /// Tells the receiving side this node's NIDs and whether it forwards.
    fn update_policy(&self) {
        let policy = RxPolicy {
            local: self.nis.keys().copied().collect(),
            routing: self.config.tunables.routing(),
        };
        self.policy.send_replace(policy);
    }

    fn recovery(&self, kind: RecoveryKind) -> Option<&Addr<RecoveryActor>> {
        match kind {
            RecoveryKind::LocalNi => self.local_recovery.as_ref(),
            RecoveryKind::PeerNi => self.peer_recovery.as_ref(),
        }
    }

    fn ensure_peer_ni(&mut self, nid: Nid) {
        if self.peer_nis.contains_key(&nid) {
            return;
        }
        let Some(recovery) = self.peer_recovery.clone() else {
            return;
        };
        let (actor, view) = PeerNiActor::new(
            nid,
            self.config.peer_credits,
            self.clock,
            self.events.clone(),
            recovery,
        );
        let addr = self.place(actor);
        self.peer_nis
            .insert(nid, PeerNiEntry { addr, view, seq: 0 });
    }

    /// Makes `nids` one peer (merging any peers that held one of them).
    fn set_peer(&mut self, primary: Nid, nids: Vec<Nid>, multi_rail: bool, configured: bool) {
        let nids: Vec<Nid> = nids.into_iter().filter(|n| !self.is_local(n)).collect();
        for nid in &nids {
            self.ensure_peer_ni(*nid);
        }
        self.peers.set(primary, nids, multi_rail, configured);
    }

    fn own_info(&self) -> PingInfo {
        let mut features = Features::NI_STATUS | Features::MULTI_RAIL | Features::DISCOVERY;
        if !self.config.tunables.routing() || self.routes.draining() {
            features |= Features::RTE_DISABLED;
        }
        let nis = self
            .ni_order
            .iter()
            .filter_map(|nid| self.nis.get(nid))
            .map(|e| {
                let v = e.view.borrow();
                let routing = self.config.tunables.routing();
                if v.state == NiState::Up && !self.routes.advertised_down(&v.nid, routing) {
                    NiStatus::up(v.nid)
                } else {
                    NiStatus::down(v.nid)
                }
            })
            .collect();
        PingInfo::new(self.config.pid, self.seqno, features, nis)
    }

    /// Picks the local NI, the next hop and the header's destination for `msg`: a peer
    /// NI on a local net if the destination has one, else a gateway of a live route.
    fn select(&self, msg: &OutMsg) -> Option<Path> {
        if let Some(gw) = msg.pin_peer.filter(|p| *p != msg.target) {
            if !self.has_net(msg.target.net) {
                // A response goes back through the gateway its request came from.
                let (ni, next_hop) = self.select_direct(msg, &[gw])?;
                return Some(Path {
                    ni,
                    next_hop,
                    dest: msg.target,
                });
            }
        }
        let peer_nids: Vec<Nid> = match msg.pin_peer {
            Some(p) => vec![p],
            None if msg.forward.is_some() => vec![msg.target],
            None => match self.peers.get(&msg.target) {
                Some(peer) if peer.multi_rail => peer.nids.clone(),
                _ => vec![msg.target],
            },
        };
        let direct: Vec<Nid> = peer_nids
            .iter()
            .filter(|n| !self.is_local(n) && self.has_net(n.net))
            .copied()
            .collect();
        if !direct.is_empty() {
            let (ni, peer) = self.select_direct(msg, &direct)?;
            return Some(Path {
                ni,
                next_hop: peer,
                dest: peer,
            });
        }
        let (gateway, dest) = self.route_for(&peer_nids)?;
        let (ni, next_hop) = self.select_direct(msg, &[gateway])?;
        Some(Path { ni, next_hop, dest })
    }

    fn has_net(&self, net: Net) -> bool {
        self.nis.keys().any(|n| n.net == net)
    }

    /// Picks a local NI and one of `peer_nids` (all on local nets) by the Multi-Rail rules.
    fn select_direct(&self, msg: &OutMsg, peer_nids: &[Nid]) -> Option<(Nid, Nid)> {
        let udsp = &self.config.udsp;
        let memory_node = if msg.forward.is_some() {
            None
        } else {
            self.config.memory_node
        };
        let local: Vec<LocalNiCandidate<Nid>> = self
            .nis
            .iter()
            .filter(|(nid, _)| msg.pin_local.is_none_or(|p| p == **nid))
            .map(|(nid, e)| {
                let v = e.view.borrow();
                LocalNiCandidate {
                    id: *nid,
                    net: nid.net,
                    fatal: self.routes.link_down(nid),
                    health: v.health,
                    sel_priority: udsp.local_ni_priority(nid),
                    dev_priority: LNET_MAX_SELECTION_PRIORITY,
                    numa_distance: self.config.numa.ni_distance(memory_node, e.numa_node),
                    tx_credits: v.tx_credits,
                    seq: e.seq,
                }
            })
            .collect();
        let peers: Vec<PeerNiCandidate<Nid>> = peer_nids
            .iter()
            .map(|nid| {
                let (health, credits, seq) = match self.peer_nis.get(nid) {
                    Some(e) => {
                        let v = e.view.borrow();
                        (v.health, v.tx_credits, e.seq)
                    }
                    None => (HealthValue::MAX, 0, 0),
                };
                PeerNiCandidate {
                    id: *nid,
                    net: nid.net,
                    health,
                    sel_priority: udsp.peer_ni_priority(nid),
                    tx_credits: credits,
                    seq,
                }
            })
            .collect();
        let mut nets: Vec<Net> = peers.iter().map(|p| p.net).collect();
        nets.sort_by_key(|n| n.to_u32());
        nets.dedup();
        let net_candidates: Vec<PeerNetCandidate<Net>> = nets
            .into_iter()
            .map(|net| {
                let best = |it: &mut dyn Iterator<Item = HealthValue>| {
                    it.max().unwrap_or(HealthValue::ZERO)
                };
                PeerNetCandidate {
                    id: net,
                    peer_net_health: best(
                        &mut peers.iter().filter(|p| p.net == net).map(|p| p.health),
                    ),
                    peer_net_sel_priority: udsp.peer_net_priority(net),
                    local_net_health: best(
                        &mut local.iter().filter(|l| l.net == net).map(|l| l.health),
                    ),
                    local_net_sel_priority: udsp.local_net_priority(net),
                    peer_net_seq: 0,
                    local_net_seq: 0,
                }
            })
            .collect();
        let params = LocalNiParams {
            numa_range: self.config.tunables.numa_range(),
            gpu_memory: false,
        };
        let path = select_path(&net_candidates, &local, &peers, params, |p, l| {
            udsp.prefers_local(&p.id, &l.id)
        })?;
        Some((path.local_ni.id, path.peer_ni.id))
    }

    /// Sends the next attempt of message `id`.
    fn dispatch(&mut self, id: u64) {
        let Some(msg) = self.msgs.get(&id) else {
            return;
        };
        let Some(path) = self.select(msg) else {
            if msg.forward.is_some() {
                let reason = self.no_path(msg.target.net);
                self.drop_forward(id, reason);
                return;
            }
            self.finish_msg(id, HealthStatus::LocalNoRoute, FailReason::NoPath);
            return;
        };
        let Path {
            ni,
            next_hop: peer,
            dest,
        } = path;
        let tx_id = TxId(self.next());
        if let Some(e) = self.nis.get_mut(&ni) {
            e.seq = e.seq.wrapping_add(1);
        }
        self.ensure_peer_ni(peer);
        if let Some(e) = self.peer_nis.get_mut(&peer) {
            e.seq = e.seq.wrapping_add(1);
        }
        if peer != dest {
            self.routes.used(peer);
        }
        let Some(msg) = self.msgs.get_mut(&id) else {
            return;
        };
        msg.attempt = Some((tx_id, ni, peer));
        let mut header = msg.header;
        if msg.forward.is_none() {
            header.src_nid = ni;
            header.dest_nid = dest;
        }
        let tx = TxRequest {
            id: tx_id,
            peer,
            header,
            payload: msg.payload.clone(),
        };
        if let Some(t) = msg.txn.and_then(|t| self.txns.get_mut(&t)) {
            t.last_peer_ni = Some(peer);
        }
        self.attempts.insert(tx_id, id);
        // Peer tx credit first, then the local NI's (either queues while it has none).
        if let (Some(p), Some(l)) = (self.peer_nis.get(&peer), self.nis.get(&ni)) {
            tell(
                &p.addr,
                PeerTransmit {
                    tx,
                    via: l.addr.clone(),
                },
            );
        }
    }

    /// Takes message `id` out; a forwarded message gives its router buffer back.
    fn retire(&mut self, id: u64) -> Option<OutMsg> {
        let mut msg = self.msgs.remove(&id)?;
        if let Some(t) = msg.forward.take() {
            self.router.do_send(Release(t));
        }
        Some(msg)
    }

    /// Message `id` failed for good (or could not be sent at all).
    fn finish_msg(&mut self, id: u64, status: HealthStatus, reason: FailReason) {
        let forwarded = self.msgs.get(&id).is_some_and(|m| m.forward.is_some());
        if forwarded {
            self.drop_forward(id, ForwardDrop::SendFailed(status));
            return;
        }
        let Some(msg) = self.retire(id) else {
            return;
        };
        if let Some((tx, _, _)) = msg.attempt {
            self.attempts.remove(&tx);
        }
        if let Some(txn_id) = msg.txn {
            self.txn_event(
                txn_id,
                MsgEventKind::Send,
                Outcome::Failed { status, reason },
                None,
                None,
            );
        }
    }

    fn txn_event(
        &mut self,
        txn_id: u64,
        kind: MsgEventKind,
        status: Outcome,
        payload: Option<Bytes>,
        from: Option<Nid>,
    ) {
        let Some(txn) = self.txns.get_mut(&txn_id) else {
            return;
        };
        if txn.done {
            return;
        }
        if kind == MsgEventKind::Send {
            txn.sent = true;
        }
        let last = !status.is_ok() || kind != MsgEventKind::Send || !txn.want_response;
        let _ = txn.events.try_send(MsgEvent {
            kind,
            status,
            retries: txn.retries,
            payload,
            from,
        });
        if last {
            txn.done = true;
            let msg = txn.msg;
            let deadline = txn.deadline;
            self.txns.remove(&txn_id);
            self.txn_deadlines.remove(&(deadline, txn_id));
            // A send still in the LND only changes health when it completes; one waiting
            // for its resend is dropped.
            let in_lnd = self.msgs.get(&msg).is_some_and(|m| m.attempt.is_some());
            if in_lnd {
                if let Some(m) = self.msgs.get_mut(&msg) {
                    m.txn = None;
                    m.abandoned = true;
                }
            } else {
                self.retire(msg);
            }
        }
    }

    fn health_ctx(&self, msg: &OutMsg, peer_ni: Nid, committed: Committed) -> HealthContext {
        let peer = self.peers.get(&peer_ni);
        HealthContext {
            committed: Some(committed),
            past_deadline: lnet::timeouts::is_past_deadline(msg.deadline, self.clock.now()),
            ping_buffer_entries: u32::try_from(self.nis.len().saturating_add(1))
                .unwrap_or(u32::MAX),
            peer_ni_count: peer
                .map(|p| u32::try_from(p.nids.len()).unwrap_or(u32::MAX))
                .unwrap_or(1),
            peer_is_router: self.routes.is_gateway(&peer_ni),
            routing_enabled: self.config.tunables.routing(),
            dst_is_local: self.is_local(&peer_ni),
            retries_so_far: msg.retries,
            recovery_ping: msg.recovery_ping,
            no_resend: false,
            peer_multi_rail: peer.is_some_and(|p| p.multi_rail),
            forwarded: msg.forward.is_some(),
        }
    }

    /// Hands the health effects to the local NI and peer NI actors. The returned receivers
    /// fire once each actor has applied its effect.
    fn apply(
        &self,
        ni: Nid,
        peer: Nid,
        outcome: &lnet::health::HealthOutcome,
        status: HealthStatus,
        step: Step,
    ) -> Vec<oneshot::Receiver<()>> {
        let sensitivity = self.config.tunables.health_sensitivity();
        let (send_done, received, msg_type) = match step {
            Step::SendDone(t) => (true, false, t),
            Step::Received(t) => (false, true, t),
        };
        let effect = |effect| Apply {
            effect,
            cause: status,
            sensitivity,
            send_done,
            received,
            msg_type: Some(msg_type),
        };
        let mut applied = Vec::new();
        if let Some(e) = self.nis.get(&ni) {
            applied.push(applied_when(&e.addr, effect(outcome.local_ni)));
        }
        if let Some(e) = self.peer_nis.get(&peer) {
            applied.push(applied_when(&e.addr, effect(outcome.peer_ni)));
        }
        applied
    }

    fn on_completion(&mut self, done: TxCompletion, ctx: &mut Context<Self>) {
        let Some(id) = self.attempts.remove(&done.id) else {
            return;
        };
        let Some(msg) = self.msgs.get(&id) else {
            return;
        };
        let hctx = self.health_ctx(msg, done.peer, Committed::Tx);
        let outcome = health_check(done.status, &hctx, &self.config.tunables);
        for c in &outcome.counters {
            use lnet::health::check::Counter;
            match c {
                Counter::SuccessfulResends => bump(&mut self.counters, "successful_resends"),
                Counter::FailedResends => bump(&mut self.counters, "failed_resends"),
                Counter::LateMessage => bump(&mut self.counters, "late_messages"),
                _ => {}
            }
        }
        let step = Step::SendDone(msg.header.msg_type());
        let waits = self.apply(done.ni, done.peer, &outcome, done.status, step);
        let txn = msg.txn;
        if msg.abandoned {
            self.retire(id);
            return;
        }
        match outcome.resend {
            Resend::No(NoResend::Delivered) => {
                if let Some(m) = self.msgs.get(&id).filter(|m| m.forward.is_some()) {
                    let len = u64::try_from(m.payload.len()).unwrap_or(u64::MAX);
                    bump(&mut self.counters, "route_count");
                    let n = self.counters.entry("route_length").or_default();
                    *n = n.saturating_add(len);
                }
                self.retire(id);
                if let Some(t) = txn {
                    self.txn_event(t, MsgEventKind::Send, Outcome::Ok, None, None);
                }
            }
            Resend::No(reason) => {
                self.finish_msg(id, done.status, FailReason::NoResend(reason));
            }
            Resend::Yes { from } => {
                bump(&mut self.counters, "resend_count");
                let Some(msg) = self.msgs.get_mut(&id) else {
                    return;
                };
                msg.retries = msg.retries.saturating_add(1);
                msg.attempt = None;
                if from == ResendFrom::SameLocalNi {
                    msg.pin_local = Some(done.ni);
                }
                let retry = msg.retries;
                if let Some(t) = txn.and_then(|t| self.txns.get_mut(&t)) {
                    t.retries = retry;
                }
                self.events.publish(Event::Resend {
                    at: self.clock.now(),
                    status: done.status,
                    from_ni: done.ni,
                    to_peer_ni: done.peer,
                    retry,
                });
                // Resend once the local NI has taken its health change, so that the
                // selection sees it.
                let fut = async move {
                    for applied in waits {
                        let _ = applied.await;
                    }
                };
                ctx.spawn(fut.into_actor(self).map(move |_, act, _| act.dispatch(id)));
            }
        }
    }

    /// Sends an ACK or REPLY (its header names the requester) through `via_ni` to `to`,
    /// the requester or the gateway its request came through.
    fn send_response(&mut self, header: Header, payload: Bytes, via_ni: Nid, to: Nid) {
        let id = self.next();
        let deadline = self.clock.now().saturating_add(Millis::from_secs(u64::from(
            self.config.tunables.transaction_timeout(),
        )));
        self.msgs.insert(
            id,
            OutMsg {
                header,
                payload,
                target: header.dest_nid,
                txn: None,
                deadline,
                retries: 0,
                recovery_ping: false,
                pin_local: Some(via_ni),
                pin_peer: Some(to),
                attempt: None,
                abandoned: false,
                forward: None,
            },
        );
        self.dispatch(id);
        // Later attempts may take any pair.
        if let Some(m) = self.msgs.get_mut(&id) {
            m.pin_local = None;
            m.pin_peer = None;
        }
    }

    fn on_received(&mut self, rx: RxMessage, ticket: Option<Ticket>, ctx: &mut Context<Self>) {
        let from = rx.from.nid;
        let h = rx.header;
        if h.check_lnet().is_err() {
            bump(&mut self.counters, "drop_count");
            if let Some(t) = ticket {
                self.router.do_send(Release(t));
            }
            return;
        }
        self.heard(&rx, ctx);
        if self.peers.get(&from).is_none() && !self.is_local(&from) {
            self.set_peer(from, vec![from], false, false);
        }
        self.ensure_peer_ni(from);
        let probe = OutMsg {
            header: h,
            payload: Bytes::new(),
            target: from,
            txn: None,
            deadline: Millis(u64::MAX),
            retries: 0,
            recovery_ping: false,
            pin_local: None,
            pin_peer: None,
            attempt: None,
            abandoned: false,
            forward: None,
        };
        let hctx = self.health_ctx(&probe, from, Committed::Rx);
        let outcome = health_check(HealthStatus::Ok, &hctx, &self.config.tunables);
        let _ = self.apply(
            rx.ni,
            from,
            &outcome,
            HealthStatus::Ok,
            Step::Received(h.msg_type()),
        );
        if !self.is_local(&h.dest_nid) {
            match ticket {
                Some(t) if self.config.tunables.routing() => self.forward(rx, t),
                other => {
                    bump(&mut self.counters, "drop_count");
                    if let Some(t) = other {
                        self.router.do_send(Release(t));
                    }
                }
            }
            return;
        }
        if let Some(t) = ticket {
            // Granted while this NID was not yet local: not a forward after all.
            self.router.do_send(Release(t));
        }
        match h.msg {
            LnetMsg::Put {
                ack_wmd,
                match_bits,
                ptl_index,
                ..
            } => {
                let fresh = ack_wmd.is_none() || self.remember(ack_wmd);
                let accepted = if ptl_index == RESERVED_PORTAL && match_bits == PING_MATCHBITS {
                    if fresh {
                        match PingInfo::decode_validated(&rx.payload, INTERFACES_MAX_DEFAULT) {
                            Ok(info) => {
                                self.gateway_info(&info, from, RouteCause::Push);
                                self.learn(info, from);
                            }
                            Err(e) => tracing::debug!(%from, %e, "bad push"),
                        }
                    }
                    true
                } else if let Some(md) = self
                    .mds
                    .iter()
                    .find(|m| m.spec.portal == ptl_index && m.spec.match_bits == match_bits)
                {
                    // Like an MD with no room left: a message its consumer has no space
                    // for is dropped and not ACKed (the sender's transaction times out).
                    !fresh || md.deliveries.try_send(rx.clone()).is_ok()
                } else {
                    false
                };
                if !accepted {
                    bump(&mut self.counters, "drop_count");
                    tracing::debug!(%from, ptl_index, match_bits, "PUT matched no MD with room; dropped");
                }
                if accepted && !ack_wmd.is_none() {
                    let ack = Header {
                        dest_nid: h.src_nid,
                        src_nid: rx.ni,
                        dest_pid: h.src_pid,
                        src_pid: self.config.pid,
                        payload_length: 0,
                        msg: LnetMsg::Ack {
                            dst_wmd: ack_wmd,
                            match_bits,
                            mlength: h.payload_length,
                        },
                    };
                    self.send_response(ack, Bytes::new(), rx.ni, from);
                }
            }
            LnetMsg::Get {
                return_wmd,
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
            } => {
                let data: Option<Bytes> =
                    if ptl_index == RESERVED_PORTAL && match_bits == PING_MATCHBITS {
                        self.own_info().encode().ok().map(Bytes::from)
                    } else {
                        self.mds
                            .iter()
                            .find(|m| m.spec.portal == ptl_index && m.spec.match_bits == match_bits)
                            .map(|m| m.spec.data.clone())
                    };
                let Some(data) = data else {
                    return;
                };
                let start = usize::try_from(src_offset)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                let len = usize::try_from(sink_length)
                    .unwrap_or(usize::MAX)
                    .min(data.len().saturating_sub(start));
                let payload = data.slice(start..start.saturating_add(len));
                let reply = Header {
                    dest_nid: h.src_nid,
                    src_nid: rx.ni,
                    dest_pid: h.src_pid,
                    src_pid: self.config.pid,
                    payload_length: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                    msg: LnetMsg::Reply {
                        dst_wmd: return_wmd,
                    },
                };
                self.send_response(reply, payload, rx.ni, from);
            }
            LnetMsg::Ack { dst_wmd, .. } => {
                let t = dst_wmd.object_cookie;
                if dst_wmd.interface_cookie == self.config.incarnation {
                    self.response(t, MsgEventKind::Ack, None, h.src_nid);
                }
            }
            LnetMsg::Reply { dst_wmd } => {
                let t = dst_wmd.object_cookie;
                if dst_wmd.interface_cookie == self.config.incarnation {
                    self.response(t, MsgEventKind::Reply, Some(rx.payload.clone()), h.src_nid);
                }
            }
            LnetMsg::Hello { .. } => {}
        }
    }

    fn response(&mut self, txn_id: u64, kind: MsgEventKind, payload: Option<Bytes>, from: Nid) {
        let Some(t) = self.txns.get(&txn_id) else {
            return;
        };
        if t.want_response && t.reply == (kind == MsgEventKind::Reply) {
            if !t.sent {
                self.txn_event(txn_id, MsgEventKind::Send, Outcome::Ok, None, None);
            }
            self.txn_event(txn_id, kind, Outcome::Ok, payload, Some(from));
        }
    }

    /// Remembers a PUT's ACK handle; false if it was seen already.
    fn remember(&mut self, wmd: WireHandle) -> bool {
        if !self.seen.insert(wmd) {
            return false;
        }
        self.seen_order.push_back(wmd);
        if self.seen_order.len() > SEEN_PUTS {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }

    fn learn(&mut self, info: PingInfo, from: Nid) {
        let nids: Vec<Nid> = info.statuses().map(|(n, _)| n).collect();
        let primary = nids.first().copied().unwrap_or(from);
        let mr = info.features.contains(Features::MULTI_RAIL);
        self.set_peer(
            primary,
            if nids.is_empty() { vec![from] } else { nids },
            mr,
            false,
        );
        let down: HashSet<Nid> = info
            .statuses()
            .filter(|(_, s)| !s.is_up())
            .map(|(n, _)| n)
            .collect();
        let push = mr && info.features.contains(Features::DISCOVERY);
        if let Some(peer) = self.peers.by_primary_mut(&primary) {
            peer.down = down;
            peer.push = push;
        }
    }

    /// This node's ping info changed (an NI was added, or an NI's status flipped): pushes
    /// it (a PUT with ACK on the reserved portal) to every discovered Multi-Rail,
    /// discovery-capable peer. Nobody waits for the ACKs.
    fn push_all(&mut self, ctx: &mut Context<Self>) {
        let targets: Vec<Nid> = self
            .peers
            .iter()
            .filter(|p| p.push && p.multi_rail)
            .map(|p| p.primary)
            .collect();
        if targets.is_empty() {
            return;
        }
        let payload = match self.own_info().encode() {
            Ok(p) => Bytes::from(p),
            Err(e) => {
                tracing::warn!(%e, "own ping info does not encode");
                return;
            }
        };
        let timeout = Duration::from_secs(u64::from(self.config.tunables.transaction_timeout()));
        for dest in targets {
            if let Err(e) = self.start_txn(push_request(dest, payload.clone(), timeout), None, ctx)
            {
                tracing::debug!(%dest, %e, "push not sent");
            }
        }
    }

    fn start_txn(
        &mut self,
        req: StartTxn,
        recovery: Option<(RecoveryKind, Option<Nid>, Option<Nid>)>,
        ctx: &mut Context<Self>,
    ) -> Result<Transaction, NodeError> {
        if self.msgs.len() >= self.config.max_in_flight {
            return Err(NodeError::Busy {
                max: self.config.max_in_flight,
            });
        }
        let txn_id = self.next();
        let msg_id = self.next();
        let wmd = WireHandle {
            interface_cookie: self.config.incarnation,
            object_cookie: txn_id,
        };
        let msg = match req.msg {
            LnetMsg::Put {
                ack_wmd,
                match_bits,
                hdr_data,
                ptl_index,
                offset,
            } => LnetMsg::Put {
                ack_wmd: if ack_wmd.is_none() { ack_wmd } else { wmd },
                match_bits,
                hdr_data,
                ptl_index,
                offset,
            },
            LnetMsg::Get {
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
                ..
            } => LnetMsg::Get {
                return_wmd: wmd,
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
            },
            other => other,
        };
        let reply = matches!(msg, LnetMsg::Get { .. });
        let request = match msg {
            LnetMsg::Get {
                ptl_index: RESERVED_PORTAL,
                match_bits: PING_MATCHBITS,
                ..
            } => lnet::response::Request::Ping,
            LnetMsg::Put {
                ptl_index: RESERVED_PORTAL,
                match_bits: PING_MATCHBITS,
                ..
            } => lnet::response::Request::DiscoveryPush,
            LnetMsg::Get { .. } => lnet::response::Request::Get,
            _ => lnet::response::Request::Put {
                ack: req.want_response,
            },
        };
        let header = Header {
            dest_nid: req.dest,
            src_nid: Nid::ANY,
            dest_pid: PID_LUSTRE,
            src_pid: self.config.pid,
            payload_length: u32::try_from(req.payload.len()).unwrap_or(u32::MAX),
            msg,
        };
        let timeout_ms = u64::try_from(req.timeout.as_millis()).unwrap_or(u64::MAX);
        let deadline = self.clock.now().saturating_add(Millis(timeout_ms));
        let (tx, rx) = mpsc::channel(3);
        self.txns.insert(
            txn_id,
            Txn {
                events: tx,
                want_response: req.want_response,
                reply,
                sent: false,
                done: false,
                retries: 0,
                last_peer_ni: None,
                msg: msg_id,
                request,
                deadline,
            },
        );
        self.txn_deadlines.insert((deadline, txn_id));
        let (pin_local, pin_peer) = recovery.map(|r| (r.1, r.2)).unwrap_or((None, None));
        self.msgs.insert(
            msg_id,
            OutMsg {
                header,
                payload: req.payload,
                target: req.dest,
                txn: Some(txn_id),
                deadline,
                retries: 0,
                recovery_ping: recovery.is_some(),
                pin_local,
                pin_peer,
                attempt: None,
                abandoned: false,
                forward: None,
            },
        );
        self.arm_txn_timer(ctx);
        self.dispatch(msg_id);
        Ok(Transaction {
            events: rx,
            want_response: req.want_response,
        })
    }

    /// Arms the transaction timer for the earliest open deadline, unless it is armed for
    /// that time or an earlier one already.
    fn arm_txn_timer(&mut self, ctx: &mut Context<Self>) {
        let Some(&(first, _)) = self.txn_deadlines.first() else {
            return;
        };
        if let Some((armed, handle)) = self.txn_timer.take() {
            if armed <= first {
                self.txn_timer = Some((armed, handle));
                return;
            }
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_later(self.clock.until(first), |act, ctx| {
            act.txn_timer = None;
            act.expire_due(ctx);
        });
        self.txn_timer = Some((first, handle));
    }

    /// Ends every transaction whose deadline has come, then re-arms the timer.
    fn expire_due(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        while let Some(&(deadline, txn_id)) = self.txn_deadlines.first() {
            if deadline > now {
                break;
            }
            self.txn_deadlines.pop_first();
            self.expire(txn_id);
        }
        self.arm_txn_timer(ctx);
    }

    fn expire(&mut self, txn_id: u64) {
        let Some(t) = self.txns.get(&txn_id) else {
            return;
        };
        if !t.sent {
            self.txn_event(
                txn_id,
                MsgEventKind::Send,
                Outcome::Failed {
                    status: HealthStatus::LocalTimeout,
                    reason: FailReason::Timeout,
                },
                None,
                None,
            );
            return;
        }
        // The caller's timeout always ends the transaction. When response tracking
        // covers the request, the next hop also loses health (no resend).
        let kind = if t.reply {
            MsgEventKind::Reply
        } else {
            MsgEventKind::Ack
        };
        let tracked =
            lnet::response::is_tracked(self.config.tunables.response_tracking(), t.request, None);
        let expiry = lnet::response::on_expiry();
        if tracked && expiry.bump_response_timeout_count {
            bump(&mut self.counters, "response_timeout_count");
        }
        let next_hop = if tracked { t.last_peer_ni } else { None };
        if let Some(e) = next_hop.and_then(|p| self.peer_nis.get(&p)) {
            tell(
                &e.addr,
                Apply {
                    effect: expiry.next_hop_peer_ni,
                    cause: HealthStatus::RemoteTimeout,
                    sensitivity: self.config.tunables.health_sensitivity(),
                    send_done: false,
                    received: false,
                    msg_type: None,
                },
            );
        }
        self.txn_event(
            txn_id,
            kind,
            Outcome::Failed {
                status: HealthStatus::RemoteTimeout,
                reason: FailReason::Timeout,
            },
            None,
            None,
        );
    }

    fn recovery_ping(&mut self, due: PingDue, ctx: &mut Context<Self>) {
        let (pin_local, pin_peer, dest) = match due.queue {
            RecoveryKind::LocalNi => {
                // Through the NI being recovered, to a known peer NI on its net.
                let Some(peer) = self
                    .peer_nis
                    .keys()
                    .filter(|p| p.net == due.nid.net)
                    .min()
                    .copied()
                else {
                    return;
                };
                (Some(due.nid), Some(peer), peer)
            }
            RecoveryKind::PeerNi => (None, Some(due.nid), due.nid),
        };
        let req = StartTxn {
            dest,
            msg: ping_get(),
            payload: Bytes::new(),
            timeout: Duration::from_secs(u64::from(self.config.tunables.transaction_timeout())),
            want_response: true,
        };
        let _ = self.start_txn(req, Some((due.queue, pin_local, pin_peer)), ctx);
    }
}

/// Sends `msg` to `addr` without blocking; the receiver fires once it was handled.
fn applied_when<A>(addr: &Addr<A>, msg: Apply) -> oneshot::Receiver<()>
where
    A: Actor<Context = Context<A>> + Handler<Apply>,
{
    let (done_tx, done_rx) = oneshot::channel();
    let addr = addr.clone();
    actix::spawn(async move {
        let _ = addr.send(msg).await;
        let _ = done_tx.send(());
    });
    done_rx
}

/// A discovery push of `payload` (this node's ping info) to `dest`: a PUT with ACK on the
/// reserved portal.
fn push_request(dest: Nid, payload: Bytes, timeout: Duration) -> StartTxn {
    StartTxn {
        dest,
        msg: LnetMsg::Put {
            // Any handle but NONE: start_txn puts the transaction's own there.
            ack_wmd: WireHandle {
                interface_cookie: 1,
                object_cookie: 1,
            },
            match_bits: PING_MATCHBITS,
            hdr_data: 0,
            ptl_index: RESERVED_PORTAL,
            offset: 0,
        },
        payload,
        timeout,
        want_response: true,
    }
}

fn ping_get() -> LnetMsg {
    LnetMsg::Get {
        return_wmd: WireHandle::NONE,
        match_bits: PING_MATCHBITS,
        ptl_index: RESERVED_PORTAL,
        src_offset: 0,
        sink_length: PING_SINK_LENGTH,
    }
}

// ---------------------------------------------------------------------------------------
// Handlers.

impl Handler<AddNi> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: AddNi, ctx: &mut Context<Self>) -> Result<(), NodeError> {
        let nid = m.driver.nid();
        if self.nis.contains_key(&nid) {
            return Err(NodeError::NiExists { nid });
        }
        let recovery = self.local_recovery.clone().ok_or(NodeError::Stopped)?;
        let driver = Arc::clone(&m.driver);
        let (actor, view) = LocalNiActor::new(
            m.driver,
            m.credits,
            self.clock,
            self.events.clone(),
            recovery,
            self.completions.clone(),
        );
        let addr = self.place(actor);
        // Watch the NI's status: a flip patches the ping info in place (same seqno) and
        // is pushed to the discovered peers.
        let mut status = view.clone();
        // A weak address: the NI actor must not keep the node alive.
        let me = ctx.address().downgrade();
        actix::spawn(async move {
            let mut last = status.borrow_and_update().state;
            while status.changed().await.is_ok() {
                let state = status.borrow_and_update().state;
                if state != last {
                    last = state;
                    let Some(addr) = me.upgrade() else {
                        break;
                    };
                    if addr.send(NiStatusChanged).await.is_err() {
                        break;
                    }
                }
            }
        });
        self.nis.insert(
            nid,
            LocalNiEntry {
                addr,
                driver,
                numa_node: None,
                view,
                seq: 0,
            },
        );
        self.ni_order.push(nid);
        self.routes.net_added(nid.net, self.clock.now());
        self.update_policy();
        self.seqno = self.seqno.wrapping_add(1);
        self.push_all(ctx);
        Ok(())
    }
}

impl Handler<RemoveNi> for LnetActor {
    type Result = Result<Arc<dyn Driver>, NodeError>;

    fn handle(&mut self, RemoveNi(nid): RemoveNi, ctx: &mut Context<Self>) -> Self::Result {
        let entry = self.nis.remove(&nid).ok_or(NodeError::NoSuchNi { nid })?;
        self.ni_order.retain(|n| *n != nid);
        let last_on_net = !self.has_net(nid.net);
        self.routes.ni_removed(&nid, last_on_net);
        if let Some(q) = &self.local_recovery {
            q.do_send(Forget { nid });
        }
        self.update_policy();
        // The ping info lost an entry: a new sequence number, pushed to the peers.
        self.seqno = self.seqno.wrapping_add(1);
        self.push_all(ctx);
        Ok(entry.driver)
    }
}

impl Handler<AddPeer> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: AddPeer, _ctx: &mut Context<Self>) -> Result<(), NodeError> {
        if m.nids.is_empty() || m.nids.iter().any(|n| self.is_local(n)) {
            return Err(NodeError::BadPeer {
                reason: "a peer needs NIDs, none of them this node's".into(),
            });
        }
        let mut nids = m.nids;
        if !nids.contains(&m.primary) {
            nids.insert(0, m.primary);
        }
        self.peers
            .check_configured(m.primary, &nids)
            .map_err(|NidTaken { nid, owner }| NodeError::BadPeer {
                reason: format!("{nid} belongs to peer {owner} already"),
            })?;
        self.set_peer(m.primary, nids, m.multi_rail, true);
        Ok(())
    }
}

impl Handler<StartTxn> for LnetActor {
    type Result = Result<Transaction, NodeError>;

    fn handle(&mut self, m: StartTxn, ctx: &mut Context<Self>) -> Result<Transaction, NodeError> {
        self.start_txn(m, None, ctx)
    }
}

impl Handler<Attach> for LnetActor {
    type Result = MessageResult<Attach>;

    fn handle(&mut self, Attach(spec): Attach, _ctx: &mut Context<Self>) -> MessageResult<Attach> {
        let (tx, rx) = mpsc::channel(spec.depth.max(1));
        self.mds
            .retain(|m| !(m.spec.portal == spec.portal && m.spec.match_bits == spec.match_bits));
        self.mds.push(Md {
            spec,
            deliveries: tx,
        });
        MessageResult(rx)
    }
}

impl StreamHandler<TxCompletion> for LnetActor {
    fn handle(&mut self, done: TxCompletion, ctx: &mut Context<Self>) {
        self.on_completion(done, ctx);
    }

    /// The node's handle is gone; the actor ends with its other work.
    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}

impl StreamHandler<Inbound> for LnetActor {
    fn handle(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        match inbound {
            Inbound::Message(rx, ticket) => self.on_received(rx, ticket, ctx),
            Inbound::PeerDown(down) => self.on_peer_down(down),
        }
    }

    /// The node's handle is gone; the actor ends with its other work.
    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}

impl Handler<PingDue> for LnetActor {
    type Result = ();

    fn handle(&mut self, due: PingDue, ctx: &mut Context<Self>) {
        self.recovery_ping(due, ctx);
    }
}

impl Handler<ListNis> for LnetActor {
    type Result = MessageResult<ListNis>;

    fn handle(&mut self, _: ListNis, _ctx: &mut Context<Self>) -> MessageResult<ListNis> {
        MessageResult(
            self.ni_order
                .iter()
                .filter_map(|n| self.nis.get(n))
                .map(|e| e.view.borrow().clone())
                .collect(),
        )
    }
}

impl Handler<ListPeers> for LnetActor {
    type Result = MessageResult<ListPeers>;

    fn handle(&mut self, _: ListPeers, _ctx: &mut Context<Self>) -> MessageResult<ListPeers> {
        MessageResult(
            self.peers
                .iter()
                .map(|p| PeerView {
                    primary: p.primary,
                    multi_rail: p.multi_rail,
                    nids: p.nids.iter().map(|n| (*n, !p.down.contains(n))).collect(),
                    nis: p
                        .nids
                        .iter()
                        .filter_map(|n| self.peer_nis.get(n))
                        .map(|e| e.view.borrow().clone())
                        .collect(),
                })
                .collect(),
        )
    }
}

impl Handler<ListRecovery> for LnetActor {
    type Result = ResponseFuture<Result<Vec<RecoveryEntry<Nid>>, NodeError>>;

    fn handle(
        &mut self,
        ListRecovery(kind): ListRecovery,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        let addr = self.recovery(kind).cloned();
        Box::pin(async move {
            let addr = addr.ok_or(NodeError::Stopped)?;
            Ok(addr.send(List).await?)
        })
    }
}

impl Handler<SetNiHealth> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: SetNiHealth, _ctx: &mut Context<Self>) -> Result<(), NodeError> {
        if m.local {
            let e = self
                .nis
                .get(&m.nid)
                .ok_or(NodeError::NoSuchNi { nid: m.nid })?;
            tell(&e.addr, SetHealth(m.value));
        } else {
            let e = self
                .peer_nis
                .get(&m.nid)
                .ok_or(NodeError::NoSuchPeerNi { nid: m.nid })?;
            tell(&e.addr, SetHealth(m.value));
        }
        Ok(())
    }
}

impl Handler<SetTunables> for LnetActor {
    type Result = ();

    fn handle(&mut self, SetTunables(t): SetTunables, _ctx: &mut Context<Self>) {
        let recovery = RecoveryConfig::from(&t);
        for addr in [&self.local_recovery, &self.peer_recovery]
            .into_iter()
            .flatten()
        {
            tell(addr, Configure(recovery));
        }
        if t.routing() && !self.config.tunables.routing() {
            self.routes.restart_nets(self.clock.now());
        }
        self.config.tunables = t;
        self.update_policy();
    }
}

impl Handler<OwnInfo> for LnetActor {
    type Result = MessageResult<OwnInfo>;

    fn handle(&mut self, _: OwnInfo, _ctx: &mut Context<Self>) -> MessageResult<OwnInfo> {
        MessageResult(self.own_info())
    }
}

impl Handler<LearnPeer> for LnetActor {
    type Result = ();

    fn handle(&mut self, LearnPeer(info, from): LearnPeer, _ctx: &mut Context<Self>) {
        self.gateway_info(&info, from, RouteCause::PingReply);
        self.learn(info, from);
    }
}

impl Handler<NiStatusChanged> for LnetActor {
    type Result = ();

    fn handle(&mut self, _: NiStatusChanged, ctx: &mut Context<Self>) {
        self.push_all(ctx);
    }
}

impl Handler<SetUdsp> for LnetActor {
    type Result = ();

    fn handle(&mut self, SetUdsp(policy): SetUdsp, _ctx: &mut Context<Self>) {
        self.config.udsp = policy;
    }
}

impl Handler<GetUdsp> for LnetActor {
    type Result = MessageResult<GetUdsp>;

    fn handle(&mut self, _: GetUdsp, _ctx: &mut Context<Self>) -> MessageResult<GetUdsp> {
        MessageResult(self.config.udsp.clone())
    }
}

impl Handler<SetNiNumaNode> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(
        &mut self,
        SetNiNumaNode(nid, node): SetNiNumaNode,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        let e = self.nis.get_mut(&nid).ok_or(NodeError::NoSuchNi { nid })?;
        e.numa_node = node;
        Ok(())
    }
}

impl Handler<ShowSettings> for LnetActor {
    type Result = MessageResult<ShowSettings>;

    fn handle(&mut self, _: ShowSettings, _ctx: &mut Context<Self>) -> MessageResult<ShowSettings> {
        MessageResult((self.config.peer_credits, self.config.cpts.len()))
    }
}

impl Handler<Counters> for LnetActor {
    type Result = MessageResult<Counters>;

    fn handle(&mut self, _: Counters, _ctx: &mut Context<Self>) -> MessageResult<Counters> {
        MessageResult(self.counters.clone())
    }
}

// ---------------------------------------------------------------------------------------

/// The handle of a node: the API of the LNet endpoint.
#[derive(Debug, Clone)]
pub struct Node {
    addr: Addr<LnetActor>,
    events: EventBus,
    handler: Arc<NodeHandler>,
    clock: Clock,
    faults: FaultHookTable,
}

impl Node {
    /// Starts a node's actors on the current arbiter (inside a running actix system).
    pub fn start(config: NodeConfig) -> Node {
        let clock = Clock::new();
        let events = EventBus::new(config.event_capacity);
        let cap = config.max_in_flight.saturating_mul(2).max(16);
        let (ctx_tx, ctx_rx) = mpsc::channel::<TxCompletion>(cap);
        let (rx_tx, rx_rx) = mpsc::channel::<Inbound>(256);
        let ncpts = config.cpts.len().max(1);
        let sizes = lnet::rtrbuf::per_cpt(
            [
                config
                    .tunables
                    .get(lnet::tunables::TunableName::TinyBuffers),
                config
                    .tunables
                    .get(lnet::tunables::TunableName::SmallBuffers),
                config
                    .tunables
                    .get(lnet::tunables::TunableName::LargeBuffers),
            ],
            u32::try_from(ncpts).unwrap_or(1),
        );
        let rtr_credits = if config.peer_buffer_credits > 0 {
            config.peer_buffer_credits
        } else {
            config.peer_credits
        };
        let router = RouterActor::new(sizes, ncpts, rtr_credits).start();
        let (policy_tx, policy_rx) = watch::channel(RxPolicy {
            local: HashSet::new(),
            routing: config.tunables.routing(),
        });
        let routes = routing::Routes::new(config.router_check, config.net_check);
        let actor = LnetActor {
            config,
            clock,
            events: events.clone(),
            completions: ctx_tx.clone(),
            nis: BTreeMap::new(),
            ni_order: Vec::new(),
            peers: PeerTable::default(),
            peer_nis: HashMap::new(),
            msgs: HashMap::new(),
            attempts: HashMap::new(),
            txns: HashMap::new(),
            txn_deadlines: BTreeSet::new(),
            txn_timer: None,
            next_id: 0,
            mds: Vec::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            seqno: 0,
            local_recovery: None,
            peer_recovery: None,
            counters: BTreeMap::new(),
            next_cpt: 0,
            router: router.clone(),
            policy: policy_tx,
            routes,
        };
        // The LNDs' completions and received messages go straight into the actor.
        let addr = LnetActor::create(move |ctx| {
            ctx.add_stream(ChannelStream(ctx_rx));
            ctx.add_stream(ChannelStream(rx_rx));
            actor
        });
        Node {
            addr,
            events,
            handler: Arc::new(NodeHandler {
                completions: ctx_tx,
                received: rx_tx,
                policy: policy_rx,
                router,
                pending: std::sync::Mutex::new(HashMap::new()),
            }),
            clock,
            faults: FaultHookTable::default(),
        }
    }

    /// The handler every LND of this node reports to.
    pub fn handler(&self) -> Arc<NodeHandler> {
        Arc::clone(&self.handler)
    }

    /// The events bus.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The node's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Starts an NI on LND `L` with `credits` tx credits; returns its NID.
    pub async fn add_ni<L: Lnd<Handler = NodeHandler>>(
        &self,
        config: L::Config,
        credits: u32,
    ) -> Result<Nid, NodeError> {
        let driver = self.start_lnd::<L>(config).await?;
        let nid = driver.nid();
        self.add_driver(driver, credits).await?;
        Ok(nid)
    }

    /// Starts LND `L` with this node's handler.
    async fn start_lnd<L: Lnd<Handler = NodeHandler>>(
        &self,
        config: L::Config,
    ) -> Result<Arc<NiDriver<L>>, NodeError> {
        let lnd = L::start(config, self.handler())
            .await
            .map_err(|e| NodeError::NiStart {
                reason: e.to_string(),
            })?;
        Ok(Arc::new(NiDriver::new(lnd)))
    }

    /// Adds an NI whose LND was started already (with [`Node::handler`] as its handler).
    pub async fn add_driver(&self, driver: Arc<dyn Driver>, credits: u32) -> Result<(), NodeError> {
        let nid = driver.nid();
        if let Err(e) = self
            .addr
            .send(AddNi {
                driver: Arc::clone(&driver),
                credits,
            })
            .await?
        {
            driver.stop().await;
            return Err(e);
        }
        tracing::debug!(%nid, "NI added");
        Ok(())
    }

    /// Takes local NI `nid` out of the node (`lnetctl net del`): it is no longer selected
    /// nor advertised (the new ping info is pushed to the discovered peers), leaves the
    /// recovery queue, and its LND is stopped (its connections closed, sends not yet on the
    /// wire aborted). Whether the LND stopped cleanly.
    pub async fn remove_ni(&self, nid: Nid) -> Result<bool, NodeError> {
        let driver = self.addr.send(RemoveNi(nid)).await??;
        self.faults.remove(&nid);
        Ok(driver.stop().await)
    }

    /// Removes every local NI ([`Node::remove_ni`]), as a stopping node does last. Whether
    /// every LND stopped cleanly.
    pub async fn stop_nis(&self) -> Result<bool, NodeError> {
        let mut clean = true;
        for ni in self.local_nis().await? {
            clean &= self.remove_ni(ni.nid).await?;
        }
        Ok(clean)
    }

    /// Adds (or replaces) a peer: its primary NID, its NIDs (on one or more nets), and
    /// whether it is Multi-Rail (`lnetctl peer add --prim_nid --nid [--non_mr]`).
    pub async fn add_peer(
        &self,
        primary: Nid,
        nids: Vec<Nid>,
        multi_rail: bool,
    ) -> Result<(), NodeError> {
        self.addr
            .send(AddPeer {
                primary,
                nids,
                multi_rail,
            })
            .await?
    }

    /// Exposes an MD: PUTs that match come out of the returned channel.
    pub async fn attach(&self, md: MdSpec) -> Result<mpsc::Receiver<RxMessage>, NodeError> {
        Ok(self.addr.send(Attach(md)).await?)
    }

    /// Sends a PUT.
    pub async fn put(&self, req: PutRequest) -> Result<Transaction, NodeError> {
        let ack_wmd = if req.ack {
            WireHandle {
                interface_cookie: 1,
                object_cookie: 1,
            }
        } else {
            WireHandle::NONE
        };
        self.addr
            .send(StartTxn {
                dest: req.dest,
                msg: LnetMsg::Put {
                    ack_wmd,
                    match_bits: req.match_bits,
                    hdr_data: req.hdr_data,
                    ptl_index: req.portal,
                    offset: 0,
                },
                payload: req.payload,
                timeout: req.timeout,
                want_response: req.ack,
            })
            .await?
    }

    /// Sends a GET.
    pub async fn get(&self, req: GetRequest) -> Result<Transaction, NodeError> {
        self.addr
            .send(StartTxn {
                dest: req.dest,
                msg: LnetMsg::Get {
                    return_wmd: WireHandle::NONE,
                    match_bits: req.match_bits,
                    ptl_index: req.portal,
                    src_offset: 0,
                    sink_length: req.sink_length,
                },
                payload: Bytes::new(),
                timeout: req.timeout,
                want_response: true,
            })
            .await?
    }

    /// Pings `nid` (`lnetctl ping`): a GET on the reserved portal; the REPLY's ping info.
    pub async fn ping(&self, nid: Nid, timeout: Duration) -> Result<PingReply, PingFailure> {
        let txn = self
            .get(GetRequest {
                dest: nid,
                portal: RESERVED_PORTAL,
                match_bits: PING_MATCHBITS,
                sink_length: PING_SINK_LENGTH,
                timeout,
            })
            .await?;
        let events = txn.finish().await;
        let Some(last) = events.last() else {
            return Err(PingFailure::Failed(Outcome::Failed {
                status: HealthStatus::LocalError,
                reason: FailReason::Timeout,
            }));
        };
        if last.kind != MsgEventKind::Reply || !last.status.is_ok() {
            return Err(PingFailure::Failed(last.status));
        }
        let payload = last.payload.clone().unwrap_or_default();
        let info = PingInfo::decode_validated(&payload, INTERFACES_MAX_DEFAULT)
            .map_err(|e| PingFailure::BadInfo(e.to_string()))?;
        Ok(PingReply {
            from: last.from.unwrap_or(nid),
            info,
        })
    }

    /// Discovers `nid`: pings it, records its NIDs and Multi-Rail flag as a peer, then,
    /// if it is Multi-Rail and discovery-capable, pushes this node's ping info to it and
    /// waits for the ACK.
    pub async fn discover(
        &self,
        nid: Nid,
        timeout: Duration,
    ) -> Result<DiscoveredPeer, PingFailure> {
        let reply = self.ping(nid, timeout).await?;
        let info = reply.info.clone();
        self.addr
            .send(LearnPeer(info.clone(), reply.from))
            .await
            .map_err(NodeError::from)?;
        let multi_rail = info.features.contains(Features::MULTI_RAIL);
        let nids = reply.nids();
        let primary = nids.first().map(|n| n.0).unwrap_or(nid);
        let mut pushed = false;
        if multi_rail && info.features.contains(Features::DISCOVERY) {
            let own = self.addr.send(OwnInfo).await.map_err(NodeError::from)?;
            let payload = own
                .encode()
                .map_err(|e| PingFailure::BadInfo(e.to_string()))?;
            let txn = self
                .put(PutRequest {
                    dest: primary,
                    portal: RESERVED_PORTAL,
                    match_bits: PING_MATCHBITS,
                    hdr_data: 0,
                    payload: Bytes::from(payload),
                    ack: true,
                    timeout,
                })
                .await?;
            let events = txn.finish().await;
            pushed = events
                .last()
                .is_some_and(|e| e.kind == MsgEventKind::Ack && e.status.is_ok());
        }
        Ok(DiscoveredPeer {
            primary,
            nids,
            multi_rail,
            pushed,
        })
    }

    /// Replaces the global tunables (`lnetctl set ...`, each value checked by
    /// [`Tunables::set`]); messages sent from now on follow them.
    pub async fn set_tunables(&self, tunables: Tunables) -> Result<(), NodeError> {
        Ok(self.addr.send(SetTunables(tunables)).await?)
    }

    /// This node's ping info as it would answer a ping now.
    pub async fn ping_info(&self) -> Result<PingInfo, NodeError> {
        Ok(self.addr.send(OwnInfo).await?)
    }

    /// The local NIs (`lnetctl net show`).
    pub async fn local_nis(&self) -> Result<Vec<LocalNiView>, NodeError> {
        Ok(self.addr.send(ListNis).await?)
    }

    /// The peers (`lnetctl peer show`).
    pub async fn peers(&self) -> Result<Vec<PeerView>, NodeError> {
        Ok(self.addr.send(ListPeers).await?)
    }

    /// A recovery queue's entries (`lnetctl debug recovery --local|--peer`).
    pub async fn recovery(&self, kind: RecoveryKind) -> Result<Vec<RecoveryEntry<Nid>>, NodeError> {
        self.addr.send(ListRecovery(kind)).await?
    }

    /// A recovery queue as `lnetctl debug recovery --local|--peer` lists it: its heading
    /// and `nid-0`, `nid-1`, … in queue order.
    pub async fn recovery_listing(
        &self,
        kind: RecoveryKind,
    ) -> Result<(&'static str, Vec<(String, Nid)>), NodeError> {
        let entries = self.recovery(kind).await?;
        let listing = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (format!("nid-{i}"), e.key))
            .collect();
        Ok((kind.heading(), listing))
    }

    /// Sets a local NI's health (`lnetctl net set --nid --health`).
    pub async fn set_local_ni_health(&self, nid: Nid, value: HealthValue) -> Result<(), NodeError> {
        self.addr
            .send(SetNiHealth {
                local: true,
                nid,
                value,
            })
            .await?
    }

    /// Sets a peer NI's health (`lnetctl peer set --nid --health`).
    pub async fn set_peer_ni_health(&self, nid: Nid, value: HealthValue) -> Result<(), NodeError> {
        self.addr
            .send(SetNiHealth {
                local: false,
                nid,
                value,
            })
            .await?
    }

    /// Node-wide counters (`resend_count`, `successful_resends`, `failed_resends`,
    /// `response_timeout_count`, `late_messages`, `drop_count`).
    pub async fn counters(&self) -> Result<BTreeMap<&'static str, u64>, NodeError> {
        Ok(self.addr.send(Counters).await?)
    }

    /// The default tx credits of a peer NI and the number of CPTs (for the show
    /// documents).
    pub(crate) async fn show_settings(&self) -> Result<(u32, usize), NodeError> {
        Ok(self.addr.send(ShowSettings).await?)
    }

    /// Replaces the UDSP rules (`udsp:`; `lnetctl udsp add|del`): they apply to every
    /// selection from now on. A bad list is refused whole, naming the rule and field.
    pub async fn set_udsp(&self, rules: &[lnet::config::UdspRule]) -> Result<(), NodeError> {
        let policy = UdspPolicy::new(rules).map_err(NodeError::Udsp)?;
        Ok(self.addr.send(SetUdsp(policy)).await?)
    }

    /// The UDSP rules in force.
    pub async fn udsp(&self) -> Result<UdspPolicy, NodeError> {
        Ok(self.addr.send(GetUdsp).await?)
    }

    /// Sets the NUMA node of local NI `nid`'s device (`None`: it has none), which the
    /// local NI choice compares with [`NodeConfig::memory_node`].
    pub async fn set_ni_numa_node(&self, nid: Nid, node: Option<u32>) -> Result<(), NodeError> {
        self.addr.send(SetNiNumaNode(nid, node)).await?
    }

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
