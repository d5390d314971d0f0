//! An o2iblnd NI over real verbs: [`O2ibLnd`] behind the [`Lnd`] trait.
//!
//! One tokio task owns the NI, like a kernel scheduler thread: the RDMA-CM event channel
//! (listener, active connects and every connection), one completion queue shared by all
//! connections, the registered pools (receive buffers, message buffers, source and sink
//! bulk buffers, each registered once at start-up), the peers and their connections. It
//! waits on the two descriptors, on the command channel that [`Lnd::send`] feeds, and on a
//! one-second tick for deadlines, reconnects and keepalives. Upper-layer calls
//! ([`LndHandler::on_header`], [`LndHandler::on_message`]) are awaited in the task: while
//! the layer above decides, the NI reads nothing more, and credits stop the peers.
//!
//! The IMMEDIATE, PUT and GET exchanges, their credits, buffers and deadlines are decided
//! by the pure state machine [`Exchanges`]; this task is the I/O layer that drives it: it
//! feeds it sends, received messages, send completions and the tick, and carries out its
//! [`Action`]s (post, deliver, complete, close, connect). The task loop is [`task`],
//! connection management [`conns`], posting and the completion queue [`tx`], the receive
//! buffers [`rx`]; this module holds the [`Lnd`] impl and the state they share.
//!
//! Work request ids carry the kind (receive, message send, RDMA write), the connection and
//! the buffer or tx, so a completion finds its owner; completions of a connection already
//! closed are ignored (its QP is destroyed before its buffers are reused).

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ibverbs::ibv_wc;
use lnet::health::HealthStatus;
use lnet::{Header, Nid, ProcessId};
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::{ConfigError, O2ibLndConfig, BULK_BUFFER_BYTES, RESOLVE_TIMEOUT};
use super::connect::{
    check_connack, check_connreq, connreq, on_reject, LocalNi, PassiveDecision, PeerView,
    RejectAction,
};
use super::credits::{clamp_concurrent_sends, ConnCredits};
use super::exchange::{
    completion, Action, CloseWhy, Exchanges, HeaderQuery, LinkParams, SinkRegion,
};
use super::stats::O2ibStats;
use super::status::{TxFailure, TxStage};
use super::sys::{
    CmEvent, CmEventKind, CmId, ConnectParams, Cq, EventChannel, Fd, Pd, QpCaps, Region, SendWr,
};
use super::tunables::LiveTunables;
use super::wire::{ConnParams, Rej, RejWhy, Version, IBLND_MAX_RDMA_FRAGS, IBLND_MSG_SIZE};
use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use futures_util::FutureExt;
mod conns;
mod domain;
mod lend;
mod rx;
mod task;
mod tx;

use self::domain::DomainGuard;
use self::lend::{SinkMemory, SinkReturns};
use crate::counters::LndCounters;
use crate::lnd::{
    Lnd, LndHandler, PeerDown, RxDecision, RxHeader, RxMessage, SendError, TryRefused, TxRequest,
};

/// IB CM reject reason: consumer defined (a `kib_rej` in the private data).
const IB_CM_REJ_CONSUMER_DEFINED: i32 = 28;
/// IB CM reject reason: invalid service id (no listener on the port).
const IB_CM_REJ_INVALID_SERVICE_ID: i32 = 8;
/// IB CM reject reason: stale connection.
const IB_CM_REJ_STALE_CONN: i32 = 10;
/// Reconnects after rejects before an active side gives up on one batch of sends.
const MAX_RECONNECTS: u32 = 20;
/// Commands queued to the NI task before [`Lnd::send`] waits.
const CMD_QUEUE: usize = 1024;
/// Completions taken per poll.
const POLL_BATCH: usize = 32;

const WR_TX: u64 = 1;
const WR_RX: u64 = 2;
const WR_RDMA: u64 = 3;

fn wr_id(kind: u64, conn: u32, slot: u32) -> u64 {
    (kind << 56) | (u64::from(conn & 0x00ff_ffff) << 32) | u64::from(slot)
}

fn wr_split(id: u64) -> (u64, u32, u32) {
    // Masks keep each part in range.
    (
        id >> 56,
        u32::try_from((id >> 32) & 0x00ff_ffff).unwrap_or_default(),
        u32::try_from(id & 0xffff_ffff).unwrap_or_default(),
    )
}

/// Why an o2iblnd NI did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration cannot run.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The host has no RDMA device.
    #[error("no RDMA device on this host")]
    NoDevice,
    /// No RDMA device has the NI's address: its interface has none (an Ethernet interface
    /// without RoCE, a name that is not IPoIB), or no interface of the host has it.
    #[error("no RDMA device has address {ip}: its interface has none ({source})")]
    NoDeviceFor {
        /// The NI's address.
        ip: std::net::Ipv4Addr,
        /// What `rdma_bind_addr` said.
        #[source]
        source: std::io::Error,
    },
    /// A verbs or RDMA-CM call failed while setting up.
    #[error("{what}: {source}")]
    Verbs {
        /// The step that failed.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The shared completion queue would need more entries than the device has.
    #[error(
        "{needed} completion entries needed for {connections} connections, the device has {max}"
    )]
    CqTooSmall {
        /// Entries the receives and sends of every connection need.
        needed: usize,
        /// `max_conns`.
        connections: usize,
        /// The device's `max_cqe`.
        max: usize,
    },
}

fn verbs(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
    move |source| StartError::Verbs { what, source }
}

/// What a live connection negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnInfo {
    /// The protocol version.
    pub version: Version,
    /// The queue depth.
    pub queue_depth: u16,
    /// `max_frags`.
    pub max_frags: u16,
    /// The peer's incarnation.
    pub peer_stamp: u64,
}

/// One connection to a peer, as [`O2ibLnd::peer_conns`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerConn {
    /// The NI's id of the connection (for [`O2ibLnd::close_conn`]).
    pub id: u32,
    /// Whether this NI opened it (an active connect), rather than accepted it.
    pub active: bool,
    /// Whether it is established (else in handshake).
    pub established: bool,
    /// What it negotiated (as offered, while in handshake).
    pub info: ConnInfo,
    /// Messages posted on it since it was established.
    pub tx_msgs: u64,
    /// Messages received on it since it was established.
    pub rx_msgs: u64,
}

enum Cmd {
    Send(TxRequest),
    Stats(oneshot::Sender<O2ibStats>),
    Conn(Nid, oneshot::Sender<Option<ConnInfo>>),
    Conns(Nid, oneshot::Sender<Vec<PeerConn>>),
    Close(u32, oneshot::Sender<bool>),
    Stop(oneshot::Sender<()>),
}

/// One o2iblnd NI.
pub struct O2ibLnd<H: LndHandler> {
    nid: Nid,
    tunables: Arc<LiveTunables>,
    cmd: mpsc::Sender<Cmd>,
    task: JoinHandle<()>,
    _handler: std::marker::PhantomData<H>,
}

impl<H: LndHandler> std::fmt::Debug for O2ibLnd<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("O2ibLnd")
            .field("nid", &self.nid)
            .finish_non_exhaustive()
    }
}

impl<H: LndHandler> O2ibLnd<H> {
    /// The NI's live `timeout`, which `net set --lnd-timeout` changes while it runs: the
    /// NI bounds by it the waits it starts after a change ([`LiveTunables`]).
    pub fn tunables(&self) -> Arc<LiveTunables> {
        Arc::clone(&self.tunables)
    }

    /// A snapshot of the NI's counters.
    pub async fn stats(&self) -> Option<O2ibStats> {
        let (tx, rx) = oneshot::channel();
        self.cmd.send(Cmd::Stats(tx)).await.ok()?;
        rx.await.ok()
    }

    /// What the established connection to `peer` negotiated, if there is one.
    pub async fn conn_info(&self, peer: Nid) -> Option<ConnInfo> {
        let (tx, rx) = oneshot::channel();
        self.cmd.send(Cmd::Conn(peer, tx)).await.ok()?;
        rx.await.ok().flatten()
    }

    /// The connections to `peer`, active and passive, established or in handshake, by id.
    pub async fn peer_conns(&self, peer: Nid) -> Vec<PeerConn> {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Conns(peer, tx)).await.is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Closes connection `id` (one of [`O2ibLnd::peer_conns`]), as the kernel's `lctl
    /// disconnect` closes a peer's connections: its txs fail, the peer's other connections
    /// carry on. Whether there was such a connection.
    pub async fn close_conn(&self, id: u32) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Close(id, tx)).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

impl<H: LndHandler> Lnd for O2ibLnd<H> {
    type Config = O2ibLndConfig;
    type Handler = H;
    type StartError = StartError;

    async fn start(config: O2ibLndConfig, handler: Arc<H>) -> Result<Self, StartError> {
        config.validate()?;
        if super::sys::rdma_device_count().unwrap_or(0) == 0 {
            return Err(StartError::NoDevice);
        }
        let ip = config
            .ip()
            .ok_or(ConfigError::NotO2ib { nid: config.nid })?;
        let ch = EventChannel::new().map_err(verbs("rdma_create_event_channel"))?;
        let listener = CmId::new(&ch).map_err(verbs("rdma_create_id"))?;
        let port = config.listen_port.unwrap_or(0);
        listener
            .bind(SocketAddrV4::new(ip, port))
            .map_err(|source| match source.raw_os_error() {
                Some(libc::ENODEV | libc::EADDRNOTAVAIL) => StartError::NoDeviceFor { ip, source },
                _ => StartError::Verbs {
                    what: "rdma_bind_addr",
                    source,
                },
            })?;
        if config.listen_port.is_some() {
            listener.listen(0).map_err(verbs("rdma_listen"))?;
        }
        let pd = Pd::on_device_of(&listener).map_err(verbs("ibv_alloc_pd"))?;
        let limits = pd.device_limits().map_err(verbs("ibv_query_device"))?;
        let rx_count = config.rx_per_conn() * config.max_conns;
        let max_send_wr = send_wrs(config.peer_credits, limits.max_qp_wr);
        // Every receive and every send work request (a flush completes even unsignalled
        // ones) of every connection fits in the shared CQ, or the NI refuses to start.
        let cq_entries = rx_count + max_send_wr as usize * config.max_conns;
        let max_cqe = usize::try_from(limits.max_cqe).unwrap_or(0);
        if cq_entries > max_cqe {
            return Err(StartError::CqTooSmall {
                needed: cq_entries,
                connections: config.max_conns,
                max: max_cqe,
            });
        }
        let cq = Cq::new(&pd, i32::try_from(cq_entries).unwrap_or(i32::MAX))
            .map_err(verbs("ibv_create_cq"))?;
        let rx = Region::new(&pd, rx_count * IBLND_MSG_SIZE).map_err(verbs("ibv_reg_mr rx"))?;
        let msgs = Region::new(&pd, config.ntx * IBLND_MSG_SIZE).map_err(verbs("ibv_reg_mr tx"))?;
        let src = Region::new(&pd, config.bulk_buffers * BULK_BUFFER_BYTES)
            .map_err(verbs("ibv_reg_mr bulk"))?;
        let sink = Region::new(&pd, config.bulk_buffers * BULK_BUFFER_BYTES)
            .map_err(verbs("ibv_reg_mr bulk"))?;
        let pd = Arc::new(pd);
        // The layer above's registered buffers: this NI sends from them in place.
        let registered = handler
            .registered_memory()
            .map(|memory| DomainGuard::join(memory, &pd));
        let cm_fd = super::sys::async_fd(ch.fd()).map_err(verbs("event channel"))?;
        let cq_fd = super::sys::async_fd(cq.fd()).map_err(verbs("completion channel"))?;
        let nid = config.nid;
        let me = LocalNi {
            nid,
            incarnation: config.incarnation,
            peer_credits: config.peer_credits,
        };
        let (cmd_tx, cmd_rx) = mpsc::channel(CMD_QUEUE);
        let tunables = Arc::new(LiveTunables::new(&config));
        let ex = Exchanges::new(
            &config,
            SinkRegion {
                addr: sink.addr(0),
                rkey: sink.rkey(),
            },
        );
        let state = State {
            conns: HashMap::new(),
            attempts: HashMap::new(),
            by_cm: HashMap::new(),
            rx_free: (0..config.max_conns).rev().collect(),
            pools: Pools {
                rx,
                msgs,
                src,
                sink: SinkMemory::new(sink),
            },
            returns: Arc::new(SinkReturns::default()),
            registered,
            cq,
            pd,
            listener_key: listener.key(),
            listener,
            ch,
            me,
            ip,
            cfg: config,
            live: Arc::clone(&tunables),
            handler,
            peers: HashMap::new(),
            next_conn: 1,
            ex,
            downs: Vec::new(),
            stats: O2ibStats::default(),
            limit_refused: HashMap::new(),
            max_send_wr,
            fatal: false,
            parked: FuturesUnordered::new(),
            delivering: FuturesOrdered::new(),
        };
        tracing::info!(%nid, "o2iblnd: NI up");
        let task = tokio::spawn(state.run(cm_fd, cq_fd, cmd_rx));
        Ok(O2ibLnd {
            nid,
            tunables,
            cmd: cmd_tx,
            task,
            _handler: std::marker::PhantomData,
        })
    }

    fn nid(&self) -> Nid {
        self.nid
    }

    async fn send(&self, tx: TxRequest) -> Result<(), SendError> {
        let ni = self.nid;
        check_send(ni, &tx)?;
        self.cmd
            .send(Cmd::Send(tx))
            .await
            .map_err(|_| SendError::Stopped { ni })
    }

    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused> {
        let ni = self.nid;
        check_send(ni, &tx).map_err(TryRefused::Refused)?;
        match self.cmd.try_send(Cmd::Send(tx)) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(Cmd::Send(tx))) => {
                Err(TryRefused::WouldWait(Box::new(tx)))
            }
            Err(_) => Err(TryRefused::Refused(SendError::Stopped { ni })),
        }
    }

    async fn stop(self) {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Stop(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let _ = self.task.await;
    }

    async fn counters(&self) -> Option<LndCounters> {
        self.stats()
            .await
            .map(|s| LndCounters::O2iblnd(Box::new(s)))
    }
}

/// Most send work requests of one QP. The kernel sizes it `(1 + max_frags) × queue_depth`
/// for peers that split a transfer into a WR per page; this NI's own descriptors have one
/// fragment, so each transfer is one RDMA WRITE per destination fragment plus the SEND.
const MAX_SEND_WRS_PER_QP: u32 = 512;

/// Send work requests of a QP: `(1 + max_frags) × queue_depth`, capped at
/// [`MAX_SEND_WRS_PER_QP`] and at the device's `max_qp_wr`.
fn send_wrs(queue_depth: u16, max_qp_wr: u32) -> u32 {
    ((1 + u32::from(IBLND_MAX_RDMA_FRAGS)) * u32::from(queue_depth))
        .min(MAX_SEND_WRS_PER_QP)
        .min(max_qp_wr)
}

struct Pools {
    rx: Region,
    msgs: Region,
    src: Region,
    sink: SinkMemory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    /// Active: connect sent, waiting for ESTABLISHED.
    Connecting,
    /// Passive: accepted, waiting for ESTABLISHED.
    Accepting,
    Established,
}

struct Conn {
    id: CmId,
    peer: Nid,
    state: ConnState,
    /// Opened by this NI (an active connect), not accepted.
    active: bool,
    version: Version,
    offered: ConnParams,
    peer_stamp: u64,
    max_frags: u16,
    /// The negotiated queue depth (the offered one until a CONNACK says otherwise).
    queue_depth: u16,
    rx_block: usize,
    /// Receives completed before the connection was established: (buffer, length).
    parked_rx: Vec<(usize, usize)>,
    started: Instant,
    /// How long it may stay in handshake: the connect timeout when it started.
    handshake_timeout: Duration,
    /// The requester's address, for a passive connection.
    addr: Option<std::net::Ipv4Addr>,
}

struct Attempt {
    id: CmId,
    peer: Nid,
    version: Version,
    params: ConnParams,
    peer_stamp: u64,
    started: Instant,
    /// How long it may take: the connect timeout when it started.
    handshake_timeout: Duration,
}

#[derive(Default)]
struct Peer {
    conns: Vec<u32>,
    /// Active connects under way (the kernel's `ibp_connecting`): from address
    /// resolution until the connection is established or the attempt fails.
    connecting: u32,
    stamp: Option<(u64, Version)>,
    version: Option<Version>,
    params: Option<ConnParams>,
    races: u32,
    reconnects: u32,
    retry_at: Option<Instant>,
    down_reported: bool,
}

// Field order is drop order: connections (QPs) go before the pools, the CQ and the PD,
// the listener before the event channel.
struct State<H: LndHandler> {
    conns: HashMap<u32, Conn>,
    attempts: HashMap<usize, Attempt>,
    by_cm: HashMap<usize, u32>,
    rx_free: Vec<usize>,
    pools: Pools,
    /// Sink buffers the layer above let go of (see [`lend`]).
    returns: Arc<SinkReturns>,
    /// This NI among the domains of the layer above's registered buffers (see
    /// [`domain`]): before the PD, which it must not outlive.
    registered: Option<DomainGuard>,
    cq: Cq,
    pd: Arc<Pd>,
    listener_key: usize,
    listener: CmId,
    ch: EventChannel,
    me: LocalNi,
    ip: std::net::Ipv4Addr,
    /// The configuration, with the `timeout` taken from `live` before each event.
    cfg: O2ibLndConfig,
    /// The `timeout` as `net set --lnd-timeout` leaves it.
    live: Arc<LiveTunables>,
    handler: Arc<H>,
    peers: HashMap<Nid, Peer>,
    next_conn: u32,
    /// The IMMEDIATE/PUT/GET exchanges: this task carries out what they decide.
    ex: Exchanges,
    /// Peer-down reports, told once the actions queued before them are carried out.
    downs: Vec<PeerDown>,
    stats: O2ibStats,
    /// CONNREQs refused by the per-address handshake bound, by address, while that
    /// address has connections in handshake (for logging the first and every 100th).
    limit_refused: HashMap<std::net::Ipv4Addr, u64>,
    max_send_wr: u32,
    fatal: bool,
    /// Headers the layer above is judging. The task goes on meanwhile: a receive that
    /// waits for a router buffer is parked (its credit is not returned to the peer until
    /// the decision is applied) while the messages behind it, on any connection, go on.
    parked: FuturesUnordered<Parked>,
    /// Messages being handed to the layer above, in arrival order.
    delivering: FuturesOrdered<Delivery>,
}

/// A header being judged by the layer above, with the exchange waiting for the answer.
type Parked =
    std::pin::Pin<Box<dyn std::future::Future<Output = (HeaderQuery, RxDecision)> + Send>>;
/// A message being handed to the layer above.
type Delivery = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

fn bump(map: &mut HashMap<u8, u64>, key: u8) {
    *map.entry(key).or_default() += 1;
}

/// Checks `tx` as [`Lnd::send`] does before the NI task sees it.
fn check_send(ni: Nid, tx: &TxRequest) -> Result<(), SendError> {
    if tx.peer.net != ni.net {
        return Err(SendError::WrongNet { peer: tx.peer, ni });
    }
    if tx.peer == ni {
        return Err(SendError::SelfSend { peer: tx.peer });
    }
    if tx.peer.addr_u32().is_none() {
        return Err(SendError::Unreachable { peer: tx.peer });
    }
    SendError::check_payload_length(tx)?;
    tx.header
        .check_lnet()
        .map_err(|source| SendError::BadHeader {
            peer: tx.peer,
            source,
        })?;
    if tx.payload.len() > BULK_BUFFER_BYTES {
        return Err(SendError::PayloadTooLarge {
            peer: tx.peer,
            len: tx.payload.len(),
            max: BULK_BUFFER_BYTES,
        });
    }
    Ok(())
}
