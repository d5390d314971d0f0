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
//! Work request ids carry the kind (receive, message send, RDMA write), the connection and
//! the buffer or tx, so a completion finds its owner; completions of a connection already
//! closed are ignored (its QP is destroyed before its buffers are reused).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ibverbs::ibv_wc;
use lnet::health::HealthStatus;
use lnet::{Header, Message, Nid, ProcessId, WireHandle};
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::{ConfigError, O2ibLndConfig, BULK_BUFFER_BYTES, RESOLVE_TIMEOUT};
use super::connect::{
    check_connack, check_connreq, connreq, on_reject, LocalNi, PassiveDecision, PeerView,
    RejectAction,
};
use super::credits::{clamp_concurrent_sends, ConnCredits, SendClass};
use super::status::{TxFailure, TxStage};
use super::sys::{
    CmEvent, CmEventKind, CmId, ConnectParams, Cq, EventChannel, Fd, Pd, QpCaps, Region, SendWr,
};
use super::wire::{
    Body, Completion, ConnParams, Cookie, KibMsg, RdmaDesc, Rej, RejWhy, Version,
    IBLND_MAX_IMMEDIATE, IBLND_MAX_RDMA_FRAGS, IBLND_MSG_SIZE,
};
use crate::lnd::{
    Lnd, LndHandler, PeerDown, RxDecision, RxHeader, RxMessage, SendError, TxCompletion, TxRequest,
};

/// `-ENODATA`: a GET that matched nothing.
const ENODATA: i32 = 61;
/// `-EMSGSIZE`: an RDMA transfer that does not fit the descriptor.
const EMSGSIZE: i32 = 90;
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
    /// A verbs or RDMA-CM call failed while setting up.
    #[error("{what}: {source}")]
    Verbs {
        /// The step that failed.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn verbs(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
    move |source| StartError::Verbs { what, source }
}

/// Counters of one NI, for tests and the layers above.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct O2ibStats {
    /// Connections established (both directions).
    pub conns_established: u64,
    /// Connections closed.
    pub conns_closed: u64,
    /// Rejects sent, by `why` code.
    pub rejects_sent: HashMap<u8, u64>,
    /// Rejects received by active connects, by `why` code (0: not a `kib_rej`).
    pub rejects_received: HashMap<u8, u64>,
    /// Messages received, by type code.
    pub rx_msgs: HashMap<u8, u64>,
    /// Messages sent, by type code.
    pub tx_msgs: HashMap<u8, u64>,
    /// Bytes written by RDMA (source side).
    pub rdma_bytes: u64,
    /// Most peer credits a connection had in use at once.
    pub peak_credits_in_use: u16,
    /// Receive or send completions that failed on a live connection.
    pub wc_errors: u64,
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

enum Cmd {
    Send(TxRequest),
    Stats(oneshot::Sender<O2ibStats>),
    Conn(Nid, oneshot::Sender<Option<ConnInfo>>),
    Stop(oneshot::Sender<()>),
}

/// One o2iblnd NI.
pub struct O2ibLnd<H: LndHandler> {
    nid: Nid,
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
            .map_err(verbs("rdma_bind_addr"))?;
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
            return Err(StartError::Verbs {
                what: "ibv_create_cq",
                source: std::io::Error::other(format!(
                    "{cq_entries} completion entries needed for {} connections, the device has {max_cqe}",
                    config.max_conns
                )),
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
        let cm_fd = super::sys::async_fd(ch.fd()).map_err(verbs("event channel"))?;
        let cq_fd = super::sys::async_fd(cq.fd()).map_err(verbs("completion channel"))?;
        let nid = config.nid;
        let me = LocalNi {
            nid,
            incarnation: config.incarnation,
            peer_credits: config.peer_credits,
        };
        let (cmd_tx, cmd_rx) = mpsc::channel(CMD_QUEUE);
        let state = State {
            conns: HashMap::new(),
            attempts: HashMap::new(),
            by_cm: HashMap::new(),
            rx_free: (0..config.max_conns).rev().collect(),
            msg_free: (0..config.ntx).rev().collect(),
            src_free: (0..config.bulk_buffers).rev().collect(),
            sink_free: (0..config.bulk_buffers).rev().collect(),
            pools: Pools {
                rx,
                msgs,
                src,
                sink,
            },
            cq,
            pd,
            listener_key: listener.key(),
            listener,
            ch,
            me,
            ip,
            cfg: config,
            handler,
            peers: HashMap::new(),
            txs: HashMap::new(),
            next_tx: 1,
            next_conn: 1,
            next_cookie: 1,
            pending_sinks: VecDeque::new(),
            pending_gets: HashMap::new(),
            stats: O2ibStats::default(),
            max_send_wr,
            fatal: false,
            msg_starved: false,
        };
        tracing::info!(%nid, "o2iblnd: NI up");
        let task = tokio::spawn(state.run(cm_fd, cq_fd, cmd_rx));
        Ok(O2ibLnd {
            nid,
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
        let bad = |reason: String| SendError::BadMessage {
            peer: tx.peer,
            reason,
        };
        if tx.peer.net != ni.net {
            return Err(SendError::WrongNet { peer: tx.peer, ni });
        }
        if tx.peer == ni {
            return Err(SendError::SelfSend { peer: tx.peer });
        }
        if tx.peer.addr_u32().is_none() {
            return Err(SendError::Unreachable { peer: tx.peer });
        }
        if usize::try_from(tx.header.payload_length).ok() != Some(tx.payload.len()) {
            return Err(bad(format!(
                "payload of {} bytes, header says {}",
                tx.payload.len(),
                tx.header.payload_length
            )));
        }
        tx.header.check_lnet().map_err(|e| bad(e.to_string()))?;
        if tx.payload.len() > BULK_BUFFER_BYTES {
            return Err(bad(format!("payload of {} bytes", tx.payload.len())));
        }
        self.cmd
            .send(Cmd::Send(tx))
            .await
            .map_err(|_| SendError::Stopped { ni })
    }

    async fn stop(self) {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Stop(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let _ = self.task.await;
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
    sink: Region,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    /// Active: connect sent, waiting for ESTABLISHED.
    Connecting,
    /// Passive: accepted, waiting for ESTABLISHED.
    Accepting,
    Established,
}

/// The receiver's side of a PUT: where the payload goes once PUT_DONE arrives.
struct Sink {
    buf: BytesMut,
    header: Header,
    from: ProcessId,
    slot: usize,
}

enum TxKind {
    Immediate {
        hdr: Header,
        payload: Bytes,
    },
    PutReq {
        hdr: Header,
        payload: Bytes,
    },
    PutDone {
        dst_cookie: Cookie,
        rd: RdmaDesc,
        payload: Bytes,
    },
    PutAck {
        src_cookie: Cookie,
        sink: Sink,
    },
    Completion {
        code: u8,
        cookie: Cookie,
        status: i32,
    },
    GetReply {
        cookie: Cookie,
        rd: RdmaDesc,
        payload: Bytes,
    },
    Noop,
}

impl TxKind {
    fn class(&self) -> SendClass {
        match self {
            TxKind::Immediate { .. } | TxKind::PutReq { .. } => SendClass::Credit,
            // A NOOP is free in v2 and costs a credit in v1 (see `ConnCredits`).
            TxKind::Noop => SendClass::Noop,
            _ => SendClass::NoCredit,
        }
    }
}

struct Tx {
    upper: Option<crate::lnd::TxId>,
    peer: Nid,
    kind: TxKind,
    deadline: Instant,
    conn: Option<u32>,
    queued: bool,
    sending: u32,
    waiting: bool,
    cookie: Cookie,
    /// Message buffers of posted sends, oldest first (sends complete in order).
    msg_slots: VecDeque<usize>,
    src_slot: Option<usize>,
    class: SendClass,
    /// A failure already decided (e.g. a negative completion from the peer).
    failed: Option<TxFailure>,
}

impl Tx {
    fn stage(&self) -> TxStage {
        if self.sending > 0 {
            TxStage::Sending
        } else if self.waiting {
            TxStage::Waiting
        } else {
            TxStage::Queued
        }
    }
}

struct Conn {
    id: CmId,
    peer: Nid,
    state: ConnState,
    version: Version,
    offered: ConnParams,
    peer_stamp: u64,
    max_frags: u16,
    credits: ConnCredits,
    rx_block: usize,
    rsrvd: VecDeque<u32>,
    credit_q: VecDeque<u32>,
    nocred: VecDeque<u32>,
    active: Vec<u32>,
    parked_rx: Vec<(usize, usize)>,
    last_send: Instant,
    started: Instant,
}

struct Attempt {
    id: CmId,
    peer: Nid,
    version: Version,
    params: ConnParams,
    peer_stamp: u64,
    started: Instant,
}

#[derive(Default)]
struct Peer {
    queue: VecDeque<u32>,
    conns: Vec<u32>,
    connecting: bool,
    stamp: Option<(u64, Version)>,
    version: Option<Version>,
    params: Option<ConnParams>,
    races: u32,
    reconnects: u32,
    retry_at: Option<Instant>,
    down_reported: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseWhy {
    Timeout,
    PeerGone,
    Local,
    Device,
    Stop,
}

impl CloseWhy {
    fn failure(self, stage: TxStage) -> TxFailure {
        match self {
            CloseWhy::Timeout => TxFailure::ConnTimeout(stage),
            CloseWhy::PeerGone => TxFailure::PeerGone(stage),
            CloseWhy::Local => TxFailure::ClosedLocally(stage),
            CloseWhy::Device => TxFailure::DeviceRemoved,
            CloseWhy::Stop => TxFailure::Stopped,
        }
    }

    fn down_status(self) -> HealthStatus {
        match self {
            CloseWhy::Timeout => HealthStatus::NetworkTimeout,
            CloseWhy::PeerGone => HealthStatus::RemoteDropped,
            CloseWhy::Local | CloseWhy::Device => HealthStatus::LocalError,
            CloseWhy::Stop => HealthStatus::LocalAborted,
        }
    }
}

struct PendingSink {
    conn: u32,
    src_cookie: Cookie,
    buf: BytesMut,
    header: Header,
}

struct PendingGet {
    conn: u32,
    cookie: Cookie,
    rd: RdmaDesc,
}

/// Post outcome that is not a success.
enum PostError {
    /// Out of message or bulk buffers: try again when one is freed.
    Starved,
    /// The connection must be closed.
    Fatal(String),
}

// Field order is drop order: connections (QPs) go before the pools, the CQ and the PD,
// the listener before the event channel.
struct State<H: LndHandler> {
    conns: HashMap<u32, Conn>,
    attempts: HashMap<usize, Attempt>,
    by_cm: HashMap<usize, u32>,
    rx_free: Vec<usize>,
    msg_free: Vec<usize>,
    src_free: Vec<usize>,
    sink_free: Vec<usize>,
    pools: Pools,
    cq: Cq,
    pd: Pd,
    listener_key: usize,
    listener: CmId,
    ch: EventChannel,
    me: LocalNi,
    ip: std::net::Ipv4Addr,
    cfg: O2ibLndConfig,
    handler: Arc<H>,
    peers: HashMap<Nid, Peer>,
    txs: HashMap<u32, Tx>,
    next_tx: u32,
    next_conn: u32,
    next_cookie: u64,
    pending_sinks: VecDeque<PendingSink>,
    pending_gets: HashMap<(Nid, WireHandle), PendingGet>,
    stats: O2ibStats,
    max_send_wr: u32,
    fatal: bool,
    msg_starved: bool,
}

fn bump(map: &mut HashMap<u8, u64>, key: u8) {
    *map.entry(key).or_default() += 1;
}

impl<H: LndHandler> State<H> {
    async fn run(mut self, cm_fd: AsyncFd<Fd>, cq_fd: AsyncFd<Fd>, mut cmds: mpsc::Receiver<Cmd>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let _keep = &self.listener;
        loop {
            tokio::select! {
                r = cm_fd.readable() => {
                    let Ok(mut guard) = r else { break };
                    guard.clear_ready();
                    self.drain_cm().await;
                }
                r = cq_fd.readable() => {
                    let Ok(mut guard) = r else { break };
                    guard.clear_ready();
                    self.cq.take_events();
                    self.drain_cq().await;
                }
                cmd = cmds.recv() => match cmd {
                    Some(Cmd::Send(tx)) => self.send(tx),
                    Some(Cmd::Stats(reply)) => {
                        let _ = reply.send(self.stats.clone());
                    }
                    Some(Cmd::Conn(peer, reply)) => {
                        let _ = reply.send(self.conn_info(peer));
                    }
                    Some(Cmd::Stop(reply)) => {
                        self.shutdown();
                        let _ = reply.send(());
                        break;
                    }
                    None => {
                        self.shutdown();
                        break;
                    }
                },
                _ = tick.tick() => self.on_tick(),
            }
        }
        drop(cm_fd);
        drop(cq_fd);
    }

    fn conn_info(&self, peer: Nid) -> Option<ConnInfo> {
        let p = self.peers.get(&peer)?;
        p.conns
            .iter()
            .filter_map(|c| self.conns.get(c))
            .find(|c| c.state == ConnState::Established)
            .map(|c| ConnInfo {
                version: c.version,
                queue_depth: c.credits.queue_depth(),
                max_frags: c.max_frags,
                peer_stamp: c.peer_stamp,
            })
    }

    fn new_tx_id(&mut self) -> u32 {
        loop {
            let id = self.next_tx;
            self.next_tx = self.next_tx.wrapping_add(1).max(1);
            if !self.txs.contains_key(&id) {
                return id;
            }
        }
    }

    fn new_cookie(&mut self) -> Cookie {
        self.next_cookie = self.next_cookie.wrapping_add(1);
        Cookie(self.next_cookie)
    }

    fn add_tx(&mut self, peer: Nid, upper: Option<crate::lnd::TxId>, kind: TxKind) -> u32 {
        let id = self.new_tx_id();
        let cookie = self.new_cookie();
        let class = kind.class();
        self.txs.insert(
            id,
            Tx {
                upper,
                peer,
                kind,
                deadline: Instant::now() + self.cfg.wait_for_conn_timeout(),
                conn: None,
                queued: false,
                sending: 0,
                waiting: false,
                cookie,
                msg_slots: VecDeque::new(),
                src_slot: None,
                class,
                failed: None,
            },
        );
        id
    }

    // ---------------------------------------------------------------- sends from above

    fn send(&mut self, req: TxRequest) {
        let peer = req.peer;
        if self.fatal {
            self.complete_upper(
                peer,
                Some(req.id),
                Err(TxFailure::DeviceRemoved),
                "RDMA device gone",
            );
            return;
        }
        // A REPLY to an optimised GET of this peer goes straight into its sink buffer.
        if let Message::Reply { dst_wmd } = req.header.msg {
            if let Some(pg) = self.pending_gets.remove(&(peer, dst_wmd)) {
                if self.conns.contains_key(&pg.conn) {
                    let id = self.add_tx(
                        peer,
                        Some(req.id),
                        TxKind::GetReply {
                            cookie: pg.cookie,
                            rd: pg.rd,
                            payload: req.payload,
                        },
                    );
                    self.queue_on_conn(pg.conn, id);
                    self.owe_credit(pg.conn);
                    self.check_sends(pg.conn);
                    return;
                }
            }
        }
        let kind = if req.payload.len() <= IBLND_MAX_IMMEDIATE {
            TxKind::Immediate {
                hdr: req.header,
                payload: req.payload,
            }
        } else {
            TxKind::PutReq {
                hdr: req.header,
                payload: req.payload,
            }
        };
        let id = self.add_tx(peer, Some(req.id), kind);
        self.launch(peer, id);
    }

    fn established_conn(&self, peer: Nid) -> Option<u32> {
        let p = self.peers.get(&peer)?;
        p.conns.iter().copied().find(|c| {
            self.conns
                .get(c)
                .is_some_and(|c| c.state == ConnState::Established)
        })
    }

    fn launch(&mut self, peer: Nid, id: u32) {
        if let Some(c) = self.established_conn(peer) {
            self.queue_on_conn(c, id);
            self.check_sends(c);
            return;
        }
        let p = self.peers.entry(peer).or_default();
        p.queue.push_back(id);
        if !p.connecting && p.retry_at.is_none() {
            self.start_connect(peer);
        }
    }

    fn queue_on_conn(&mut self, c: u32, id: u32) {
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        tx.conn = Some(c);
        tx.queued = true;
        tx.deadline = Instant::now() + self.cfg.timeout;
        tx.class = tx.kind.class();
        match tx.kind {
            TxKind::PutReq { .. } => conn.rsrvd.push_back(id),
            TxKind::Immediate { .. } => conn.credit_q.push_back(id),
            _ => conn.nocred.push_back(id),
        }
    }

    // ---------------------------------------------------------------- posting

    fn check_sends(&mut self, c: u32) {
        let keepalive = self.cfg.keepalive;
        loop {
            let Some(conn) = self.conns.get_mut(&c) else {
                return;
            };
            if conn.state != ConnState::Established {
                return;
            }
            while !conn.rsrvd.is_empty() && conn.credits.take_reserved() {
                if let Some(t) = conn.rsrvd.pop_front() {
                    conn.credit_q.push_back(t);
                }
            }
            let keepalive_due = keepalive.is_some_and(|k| conn.last_send.elapsed() >= k);
            let noop_queued = conn.nocred.iter().any(|t| {
                self.txs
                    .get(t)
                    .is_some_and(|t| matches!(t.kind, TxKind::Noop))
            });
            if !noop_queued
                && conn.credits.need_noop(
                    !conn.nocred.is_empty(),
                    conn.credit_q.is_empty(),
                    keepalive_due,
                )
            {
                let peer = conn.peer;
                let id = self.add_tx(peer, None, TxKind::Noop);
                self.queue_on_conn(c, id);
                continue;
            }
            let Some(conn) = self.conns.get_mut(&c) else {
                return;
            };
            let (id, from_nocred) = match (conn.nocred.front(), conn.credit_q.front()) {
                (Some(&t), _) => (t, true),
                (None, Some(&t)) => (t, false),
                (None, None) => return,
            };
            let Some(tx) = self.txs.get(&id) else {
                if from_nocred {
                    conn.nocred.pop_front();
                } else {
                    conn.credit_q.pop_front();
                }
                continue;
            };
            let class = tx.class;
            if class == SendClass::Noop
                && conn
                    .credits
                    .noop_surplus(conn.nocred.len() > 1, conn.credit_q.is_empty())
                && !keepalive_due
            {
                conn.nocred.pop_front();
                self.txs.remove(&id);
                continue;
            }
            if !conn.credits.can_post(class) {
                return;
            }
            if from_nocred {
                conn.nocred.pop_front();
            } else {
                conn.credit_q.pop_front();
            }
            match self.post_tx(c, id) {
                Ok(()) => {}
                Err(PostError::Starved) => {
                    if let Some(conn) = self.conns.get_mut(&c) {
                        if from_nocred {
                            conn.nocred.push_front(id);
                        } else {
                            conn.credit_q.push_front(id);
                        }
                    }
                    self.msg_starved = true;
                    return;
                }
                Err(PostError::Fatal(why)) => {
                    tracing::warn!(%why, "o2iblnd: post failed, closing connection");
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
            }
        }
    }

    fn post_tx(&mut self, c: u32, id: u32) -> Result<(), PostError> {
        let Some(msg_slot) = self.msg_free.pop() else {
            return Err(PostError::Starved);
        };
        let needs_src = self.txs.get(&id).is_some_and(|t| {
            matches!(t.kind, TxKind::PutReq { .. } | TxKind::GetReply { .. })
                && t.src_slot.is_none()
        });
        let src_slot = if needs_src {
            match self.src_free.pop() {
                Some(s) => Some(s),
                None => {
                    self.msg_free.push(msg_slot);
                    return Err(PostError::Starved);
                }
            }
        } else {
            None
        };
        let (Some(conn), Some(tx)) = (self.conns.get_mut(&c), self.txs.get_mut(&id)) else {
            self.msg_free.push(msg_slot);
            if let Some(s) = src_slot {
                self.src_free.push(s);
            }
            return Ok(());
        };
        if let Some(s) = src_slot {
            tx.src_slot = Some(s);
            let payload = match &tx.kind {
                TxKind::PutReq { payload, .. } | TxKind::GetReply { payload, .. } => {
                    payload.clone()
                }
                _ => Bytes::new(),
            };
            if self
                .pools
                .src
                .write(s * BULK_BUFFER_BYTES, &payload)
                .is_none()
            {
                return Err(PostError::Fatal("payload larger than a bulk buffer".into()));
            }
        }
        let mut wrs = Vec::new();
        let body = match &tx.kind {
            TxKind::Immediate { hdr, payload } => Body::Immediate {
                hdr: *hdr,
                payload: payload.clone(),
            },
            TxKind::PutReq { hdr, .. } => Body::PutReq {
                hdr: *hdr,
                cookie: tx.cookie,
            },
            TxKind::PutAck { src_cookie, sink } => Body::PutAck {
                src_cookie: *src_cookie,
                dst_cookie: tx.cookie,
                rd: RdmaDesc::single(
                    self.pools.sink.rkey(),
                    self.pools.sink.addr(sink.slot * BULK_BUFFER_BYTES),
                    sink.header.payload_length,
                ),
            },
            TxKind::Completion {
                code,
                cookie,
                status,
            } => {
                let comp = Completion {
                    cookie: *cookie,
                    status: *status,
                };
                match *code {
                    super::wire::IBLND_MSG_PUT_NAK => Body::PutNak(comp),
                    super::wire::IBLND_MSG_GET_DONE => Body::GetDone(comp),
                    _ => Body::PutDone(comp),
                }
            }
            TxKind::PutDone {
                dst_cookie,
                rd,
                payload,
            }
            | TxKind::GetReply {
                cookie: dst_cookie,
                rd,
                payload,
            } => {
                let src_off = tx.src_slot.unwrap_or_default() * BULK_BUFFER_BYTES;
                let status = match rdma_writes(
                    &self.pools.src,
                    src_off,
                    payload.len(),
                    rd,
                    conn.max_frags,
                    wr_id(WR_RDMA, c, id),
                ) {
                    Ok(w) => {
                        self.stats.rdma_bytes += payload.len() as u64;
                        wrs = w;
                        i32::try_from(payload.len()).unwrap_or(i32::MAX)
                    }
                    Err(e) => {
                        tx.failed = Some(TxFailure::LocalMapping);
                        -e
                    }
                };
                let comp = Completion {
                    cookie: *dst_cookie,
                    status,
                };
                if matches!(tx.kind, TxKind::GetReply { .. }) {
                    Body::GetDone(comp)
                } else {
                    Body::PutDone(comp)
                }
            }
            TxKind::Noop => Body::Noop,
        };
        let class = tx.class;
        let credits = conn.credits.on_post(class);
        let msg = KibMsg {
            version: conn.version,
            credits,
            srcnid: self.me.nid,
            srcstamp: self.me.incarnation,
            dstnid: conn.peer,
            dststamp: conn.peer_stamp,
            body,
        };
        let code = msg.msg_type().code();
        let bytes = match msg.encode() {
            Ok(b) => b,
            Err(e) => {
                conn.credits.on_post_failed(class);
                self.msg_free.push(msg_slot);
                return Err(PostError::Fatal(format!("encode: {e}")));
            }
        };
        let off = msg_slot * IBLND_MSG_SIZE;
        if self.pools.msgs.write(off, &bytes).is_none() {
            conn.credits.on_post_failed(class);
            self.msg_free.push(msg_slot);
            return Err(PostError::Fatal("message larger than a buffer".into()));
        }
        wrs.push(SendWr {
            addr: self.pools.msgs.addr(off),
            len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            lkey: self.pools.msgs.lkey(),
            wr_id: wr_id(WR_TX, c, id),
            rdma: None,
            signaled: true,
        });
        if let Err(e) = conn.id.post_send(&wrs) {
            conn.credits.on_post_failed(class);
            self.msg_free.push(msg_slot);
            return Err(PostError::Fatal(format!("ibv_post_send: {e}")));
        }
        bump(&mut self.stats.tx_msgs, code);
        self.stats.peak_credits_in_use = self
            .stats
            .peak_credits_in_use
            .max(conn.credits.peak_in_use());
        conn.last_send = Instant::now();
        tx.msg_slots.push_back(msg_slot);
        tx.queued = false;
        tx.sending += 1;
        tx.waiting = matches!(tx.kind, TxKind::PutReq { .. } | TxKind::PutAck { .. });
        if !conn.active.contains(&id) {
            conn.active.push(id);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- completions

    async fn drain_cq(&mut self) {
        let mut wcs = [ibv_wc::default(); POLL_BATCH];
        loop {
            let n = match self.cq.poll(&mut wcs) {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(error = %e, "o2iblnd: CQ poll failed");
                    self.fatal = true;
                    return;
                }
            };
            if n == 0 {
                if self.cq.arm().is_err() {
                    self.fatal = true;
                    return;
                }
                // A completion may have landed between the last poll and the re-arm.
                match self.cq.poll(&mut wcs) {
                    Ok(0) => return,
                    Ok(m) => {
                        for wc in wcs.iter().take(m).copied().collect::<Vec<_>>() {
                            self.on_wc(wc).await;
                        }
                        continue;
                    }
                    Err(_) => return,
                }
            }
            for wc in wcs.iter().take(n).copied().collect::<Vec<_>>() {
                self.on_wc(wc).await;
            }
        }
    }

    async fn on_wc(&mut self, wc: ibv_wc) {
        let (kind, c, slot) = wr_split(wc.wr_id());
        if !self.conns.contains_key(&c) {
            return;
        }
        if let Some((status, vendor)) = wc.error() {
            let flushed = status == ibverbs::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
            if !flushed {
                self.stats.wc_errors += 1;
            }
            tracing::warn!(
                conn = c,
                kind,
                status,
                vendor,
                "o2iblnd: work completion failed"
            );
            self.close_conn(c, CloseWhy::PeerGone);
            return;
        }
        match kind {
            WR_TX => self.on_tx_done(c, slot),
            WR_RX => {
                let idx = usize::try_from(slot).unwrap_or(usize::MAX);
                let len = wc.len();
                let parked = match self.conns.get_mut(&c) {
                    Some(conn) if conn.state != ConnState::Established => {
                        conn.parked_rx.push((idx, len));
                        true
                    }
                    _ => false,
                };
                if !parked {
                    self.on_rx(c, idx, len).await;
                }
            }
            _ => {}
        }
    }

    fn on_tx_done(&mut self, c: u32, id: u32) {
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        tx.sending = tx.sending.saturating_sub(1);
        if let Some(s) = tx.msg_slots.pop_front() {
            self.msg_free.push(s);
        }
        let class = tx.class;
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.credits.on_send_complete(class);
        }
        self.maybe_finish(c, id);
        if self.msg_starved {
            self.msg_starved = false;
            let all: Vec<u32> = self.conns.keys().copied().collect();
            for k in all {
                self.check_sends(k);
            }
        } else {
            self.check_sends(c);
        }
    }

    fn maybe_finish(&mut self, c: u32, id: u32) {
        let done = self
            .txs
            .get(&id)
            .is_some_and(|t| !t.queued && t.sending == 0 && !t.waiting);
        if !done {
            return;
        }
        let Some(tx) = self.txs.remove(&id) else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.active.retain(|t| *t != id);
        }
        self.release(&tx);
        let result = match tx.failed {
            Some(f) => Err(f),
            None => Ok(()),
        };
        self.complete_upper(tx.peer, tx.upper, result, "");
    }

    fn release(&mut self, tx: &Tx) {
        self.msg_free.extend(tx.msg_slots.iter().copied());
        if let Some(s) = tx.src_slot {
            self.src_free.push(s);
            self.msg_starved = true;
        }
        if let TxKind::PutAck { sink, .. } = &tx.kind {
            self.sink_free.push(sink.slot);
        }
    }

    fn complete_upper(
        &self,
        peer: Nid,
        upper: Option<crate::lnd::TxId>,
        result: Result<(), TxFailure>,
        why: &str,
    ) {
        let Some(id) = upper else { return };
        let (status, reason) = match result {
            Ok(()) => (HealthStatus::Ok, None),
            Err(f) => (f.status(), Some(format!("{f:?} {why}").trim().to_string())),
        };
        self.handler.on_send_complete(TxCompletion {
            id,
            ni: self.me.nid,
            peer,
            status,
            reason,
        });
    }

    fn owe_credit(&mut self, c: u32) {
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.credits.owe_peer_credit();
        }
    }

    fn repost_rx(&mut self, c: u32, idx: usize) -> bool {
        let Some(conn) = self.conns.get(&c) else {
            return false;
        };
        let off = idx * IBLND_MSG_SIZE;
        conn.id
            .post_recv(
                wr_id(WR_RX, c, u32::try_from(idx).unwrap_or(u32::MAX)),
                self.pools.rx.addr(off),
                u32::try_from(IBLND_MSG_SIZE).unwrap_or(u32::MAX),
                self.pools.rx.lkey(),
            )
            .is_ok()
    }

    async fn on_rx(&mut self, c: u32, idx: usize, len: usize) {
        let Some(raw) = self
            .pools
            .rx
            .read(idx * IBLND_MSG_SIZE, len.min(IBLND_MSG_SIZE))
        else {
            return;
        };
        let raw = Bytes::copy_from_slice(raw);
        if !self.repost_rx(c, idx) {
            self.close_conn(c, CloseWhy::Local);
            return;
        }
        let msg = match KibMsg::unpack_bytes(&raw) {
            Ok(u) => u.msg,
            Err(e) => {
                tracing::warn!(conn = c, error = %e, "o2iblnd: bad message, closing");
                self.close_conn(c, CloseWhy::Local);
                return;
            }
        };
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        if msg.srcnid != conn.peer
            || msg.dstnid != self.me.nid
            || msg.srcstamp != conn.peer_stamp
            || msg.dststamp != self.me.incarnation
            || msg.version != conn.version
        {
            tracing::warn!(conn = c, "o2iblnd: stale message, closing");
            self.close_conn(c, CloseWhy::Local);
            return;
        }
        if let Err(e) = conn.credits.on_rx_credits(msg.credits) {
            tracing::warn!(conn = c, error = %e, "o2iblnd: credit overflow, closing");
            self.close_conn(c, CloseWhy::Local);
            return;
        }
        let peer = conn.peer;
        let version = conn.version;
        bump(&mut self.stats.rx_msgs, msg.msg_type().code());
        let from = ProcessId::lustre(peer);
        match msg.body {
            Body::Noop => {
                if version == Version::V1 {
                    self.owe_credit(c);
                }
            }
            Body::Immediate { hdr, payload } => {
                if hdr.check_lnet().is_err() {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
                let decision = self.header(from, hdr).await;
                match decision {
                    RxDecision::Receive(mut buf) => {
                        buf.clear();
                        buf.extend_from_slice(&payload);
                        self.deliver(from, hdr, buf.freeze()).await;
                    }
                    RxDecision::Discard => {}
                    RxDecision::Close => {
                        self.close_conn(c, CloseWhy::Local);
                        return;
                    }
                }
                self.owe_credit(c);
            }
            Body::PutReq { hdr, cookie } => {
                if hdr.check_lnet().is_err() {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
                match self.header(from, hdr).await {
                    RxDecision::Receive(buf) if hdr.payload_length > 0 => {
                        self.pending_sinks.push_back(PendingSink {
                            conn: c,
                            src_cookie: cookie,
                            buf,
                            header: hdr,
                        });
                        self.start_sinks();
                    }
                    RxDecision::Receive(_) | RxDecision::Discard => {
                        let id = self.add_tx(
                            peer,
                            None,
                            TxKind::Completion {
                                code: super::wire::IBLND_MSG_PUT_NAK,
                                cookie,
                                status: 0,
                            },
                        );
                        self.queue_on_conn(c, id);
                        self.owe_credit(c);
                    }
                    RxDecision::Close => {
                        self.close_conn(c, CloseWhy::Local);
                        return;
                    }
                }
            }
            Body::PutAck {
                src_cookie,
                dst_cookie,
                rd,
            } => {
                let Some(id) =
                    self.find_waiting(c, src_cookie, |k| matches!(k, TxKind::PutReq { .. }))
                else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.credits.reserved_back();
                }
                if let Some(tx) = self.txs.get_mut(&id) {
                    let payload = match &tx.kind {
                        TxKind::PutReq { payload, .. } => payload.clone(),
                        _ => Bytes::new(),
                    };
                    tx.kind = TxKind::PutDone {
                        dst_cookie,
                        rd,
                        payload,
                    };
                    tx.waiting = false;
                    tx.class = SendClass::NoCredit;
                }
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.active.retain(|t| *t != id);
                }
                self.queue_on_conn(c, id);
            }
            Body::PutNak(comp) => {
                let Some(id) =
                    self.find_waiting(c, comp.cookie, |k| matches!(k, TxKind::PutReq { .. }))
                else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.credits.reserved_back();
                }
                if let Some(tx) = self.txs.get_mut(&id) {
                    tx.waiting = false;
                    if comp.status < 0 {
                        tx.failed = Some(TxFailure::PeerError);
                    }
                }
                self.maybe_finish(c, id);
            }
            Body::PutDone(comp) => {
                let Some(id) =
                    self.find_waiting(c, comp.cookie, |k| matches!(k, TxKind::PutAck { .. }))
                else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                self.owe_credit(c);
                let mut delivery = None;
                if let Some(tx) = self.txs.get_mut(&id) {
                    tx.waiting = false;
                    if let TxKind::PutAck { sink, .. } = &mut tx.kind {
                        let want =
                            usize::try_from(sink.header.payload_length).unwrap_or(usize::MAX);
                        if usize::try_from(comp.status).ok() == Some(want) {
                            if let Some(data) =
                                self.pools.sink.read(sink.slot * BULK_BUFFER_BYTES, want)
                            {
                                let mut buf = std::mem::take(&mut sink.buf);
                                buf.clear();
                                buf.extend_from_slice(data);
                                delivery = Some((sink.from, sink.header, buf.freeze()));
                            }
                        } else {
                            tracing::warn!(
                                status = comp.status,
                                want,
                                "o2iblnd: PUT_DONE without the data, message dropped"
                            );
                        }
                    }
                }
                self.maybe_finish(c, id);
                if let Some((from, hdr, payload)) = delivery {
                    self.deliver(from, hdr, payload).await;
                }
                self.start_sinks();
            }
            Body::GetReq { hdr, cookie, rd } => {
                let Message::Get { return_wmd, .. } = hdr.msg else {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                };
                if hdr.check_lnet().is_err() {
                    self.close_conn(c, CloseWhy::Local);
                    return;
                }
                match self.header(from, hdr).await {
                    RxDecision::Receive(buf) => {
                        // The REPLY the layer above sends for this GET is written into `rd`.
                        self.pending_gets.insert(
                            (peer, return_wmd),
                            PendingGet {
                                conn: c,
                                cookie,
                                rd,
                            },
                        );
                        self.deliver(from, hdr, buf.freeze()).await;
                    }
                    RxDecision::Discard => {
                        let id = self.add_tx(
                            peer,
                            None,
                            TxKind::Completion {
                                code: super::wire::IBLND_MSG_GET_DONE,
                                cookie,
                                status: -ENODATA,
                            },
                        );
                        self.queue_on_conn(c, id);
                        self.owe_credit(c);
                    }
                    RxDecision::Close => {
                        self.close_conn(c, CloseWhy::Local);
                        return;
                    }
                }
            }
            Body::GetDone(_) | Body::ConnReq(_) | Body::ConnAck(_) => {
                // This NI never sends GET_REQ; a handshake message on a live QP is wrong.
                tracing::warn!(conn = c, "o2iblnd: unexpected message type, closing");
                self.close_conn(c, CloseWhy::Local);
                return;
            }
        }
        self.check_sends(c);
    }

    async fn header(&self, from: ProcessId, header: Header) -> RxDecision {
        let h = self.handler.clone();
        h.on_header(RxHeader {
            ni: self.me.nid,
            from,
            header,
        })
        .await
    }

    async fn deliver(&self, from: ProcessId, header: Header, payload: Bytes) {
        let h = self.handler.clone();
        h.on_message(RxMessage {
            ni: self.me.nid,
            from,
            header,
            payload,
        })
        .await;
    }

    fn find_waiting(&self, c: u32, cookie: Cookie, kind: impl Fn(&TxKind) -> bool) -> Option<u32> {
        let conn = self.conns.get(&c)?;
        conn.active.iter().copied().find(|id| {
            self.txs
                .get(id)
                .is_some_and(|t| t.waiting && t.cookie == cookie && kind(&t.kind))
        })
    }

    /// Gives sink buffers to PUT_REQs that wait for one, and queues their PUT_ACKs.
    fn start_sinks(&mut self) {
        while let Some(p) = self.pending_sinks.front() {
            if !self.conns.contains_key(&p.conn) {
                self.pending_sinks.pop_front();
                continue;
            }
            let Some(slot) = self.sink_free.pop() else {
                return;
            };
            let Some(p) = self.pending_sinks.pop_front() else {
                return;
            };
            let Some(peer) = self.conns.get(&p.conn).map(|c| c.peer) else {
                self.sink_free.push(slot);
                continue;
            };
            let id = self.add_tx(
                peer,
                None,
                TxKind::PutAck {
                    src_cookie: p.src_cookie,
                    sink: Sink {
                        buf: p.buf,
                        header: p.header,
                        from: ProcessId::lustre(peer),
                        slot,
                    },
                },
            );
            self.queue_on_conn(p.conn, id);
            self.check_sends(p.conn);
        }
    }

    // ---------------------------------------------------------------- connections

    fn cm_params(&self) -> ConnectParams {
        ConnectParams {
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: 1,
            retry_count: self.cfg.retry_count,
            rnr_retry_count: self.cfg.rnr_retry_count,
        }
    }

    fn start_connect(&mut self, peer: Nid) {
        let Some(dst) = self.cfg.peer_addr(peer) else {
            self.fail_peer_queue(peer, TxFailure::ConnectUnreachable);
            return;
        };
        let p = self.peers.entry(peer).or_default();
        let version = p.version.unwrap_or(self.cfg.version);
        let params = p.params.unwrap_or(ConnParams {
            queue_depth: self.cfg.peer_credits,
            ..ConnParams::DEFAULT
        });
        let peer_stamp = p.stamp.map_or(0, |(s, _)| s);
        p.connecting = true;
        p.retry_at = None;
        let started = CmId::new(&self.ch).and_then(|id| {
            id.resolve_addr(
                SocketAddrV4::new(self.ip, 0),
                dst,
                i32::try_from(RESOLVE_TIMEOUT.as_millis()).unwrap_or(5000),
            )?;
            Ok(id)
        });
        match started {
            Ok(id) => {
                self.attempts.insert(
                    id.key(),
                    Attempt {
                        id,
                        peer,
                        version,
                        params,
                        peer_stamp,
                        started: Instant::now(),
                    },
                );
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "o2iblnd: connect failed");
                self.connect_failed(peer, TxFailure::ConnectLocal);
            }
        }
    }

    fn connect_failed(&mut self, peer: Nid, f: TxFailure) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.connecting = false;
            p.reconnects = 0;
        }
        self.fail_peer_queue(peer, f);
        self.report_down(peer, f.status(), format!("connect failed: {f:?}"));
    }

    fn fail_peer_queue(&mut self, peer: Nid, f: TxFailure) {
        let queue: Vec<u32> = self
            .peers
            .get_mut(&peer)
            .map(|p| p.queue.drain(..).collect())
            .unwrap_or_default();
        for id in queue {
            if let Some(tx) = self.txs.remove(&id) {
                self.release(&tx);
                self.complete_upper(peer, tx.upper, Err(f), "");
            }
        }
    }

    fn report_down(&mut self, peer: Nid, status: HealthStatus, reason: String) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        if p.down_reported || !p.conns.is_empty() || p.connecting || !p.queue.is_empty() {
            return;
        }
        p.down_reported = true;
        self.handler
            .on_peer_down(PeerDown::new(self.me.nid, peer, status, reason));
    }

    fn new_conn_id(&mut self) -> u32 {
        loop {
            let id = self.next_conn & 0x00ff_ffff;
            self.next_conn = self.next_conn.wrapping_add(1);
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// Creates the QP on `id`, posts every receive buffer, and files the connection.
    fn build_conn(
        &mut self,
        id: CmId,
        peer: Nid,
        state: ConnState,
        version: Version,
        params: ConnParams,
        peer_stamp: u64,
    ) -> Result<u32, (Option<CmId>, String)> {
        let Some(block) = self.rx_free.pop() else {
            return Err((Some(id), "no receive buffers left (max_conns)".into()));
        };
        let rx_per_conn = self.cfg.rx_per_conn();
        let caps = QpCaps {
            max_send_wr: self.max_send_wr,
            max_recv_wr: u32::try_from(rx_per_conn).unwrap_or(u32::MAX),
            max_send_sge: 2,
        };
        if let Err(e) = id.create_qp(&self.pd, &self.cq, caps) {
            self.rx_free.push(block);
            return Err((Some(id), format!("rdma_create_qp: {e}")));
        }
        let c = self.new_conn_id();
        let now = Instant::now();
        let concurrent =
            clamp_concurrent_sends(version, self.cfg.concurrent_sends, self.cfg.peer_credits);
        let conn = Conn {
            peer,
            state,
            version,
            offered: params,
            peer_stamp,
            max_frags: params.max_frags,
            credits: ConnCredits::new(
                version,
                params.queue_depth,
                self.cfg.peer_credits,
                self.cfg.peercredits_hiw,
                concurrent,
            ),
            rx_block: block,
            rsrvd: VecDeque::new(),
            credit_q: VecDeque::new(),
            nocred: VecDeque::new(),
            active: Vec::new(),
            parked_rx: Vec::new(),
            last_send: now,
            started: now,
            id,
        };
        self.by_cm.insert(conn.id.key(), c);
        self.conns.insert(c, conn);
        for i in 0..rx_per_conn {
            if !self.repost_rx(c, block * rx_per_conn + i) {
                self.rx_free.push(block);
                let conn = self.conns.remove(&c);
                if let Some(conn) = &conn {
                    self.by_cm.remove(&conn.id.key());
                }
                return Err((conn.map(|c| c.id), "ibv_post_recv failed".into()));
            }
        }
        self.peers.entry(peer).or_default().conns.push(c);
        Ok(c)
    }

    async fn drain_cm(&mut self) {
        loop {
            let ev = match self.ch.next_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(error = %e, "o2iblnd: rdma_get_cm_event failed");
                    return;
                }
            };
            self.on_cm_event(ev).await;
        }
    }

    async fn on_cm_event(&mut self, ev: CmEvent) {
        tracing::debug!(kind = ?ev.kind, status = ev.status, "o2iblnd: CM event");
        if ev.kind == CmEventKind::DeviceRemoval {
            tracing::error!(nid = %self.me.nid, "o2iblnd: RDMA device removed");
            self.fatal = true;
            let all: Vec<u32> = self.conns.keys().copied().collect();
            for c in all {
                self.close_conn(c, CloseWhy::Device);
            }
            let peers: Vec<Nid> = self.attempts.values().map(|a| a.peer).collect();
            self.attempts.clear();
            for p in peers {
                self.connect_failed(p, TxFailure::DeviceRemoved);
            }
            return;
        }
        if ev.kind == CmEventKind::ConnectRequest && ev.id == self.listener_key {
            if let Some(id) = ev.new_id {
                self.passive(id, &ev.private_data);
            }
            return;
        }
        if let Some(a) = self.attempts.remove(&ev.id) {
            self.on_attempt_event(a, ev);
            return;
        }
        let Some(&c) = self.by_cm.get(&ev.id) else {
            return;
        };
        match ev.kind {
            CmEventKind::Established => self.on_established(c, &ev.private_data).await,
            CmEventKind::Rejected => self.on_rejected(c, ev.status, &ev.private_data),
            CmEventKind::Unreachable | CmEventKind::ConnectError => {
                let state = self.conns.get(&c).map(|c| c.state);
                if state == Some(ConnState::Established) {
                    self.close_conn(c, CloseWhy::PeerGone);
                } else {
                    self.abort_connecting(c, Some(TxFailure::ConnectUnreachable));
                }
            }
            CmEventKind::Disconnected => self.close_conn(c, CloseWhy::PeerGone),
            _ => {}
        }
    }

    fn on_attempt_event(&mut self, a: Attempt, ev: CmEvent) {
        match ev.kind {
            CmEventKind::AddrResolved => {
                match a
                    .id
                    .resolve_route(i32::try_from(RESOLVE_TIMEOUT.as_millis()).unwrap_or(5000))
                {
                    Ok(()) => {
                        self.attempts.insert(a.id.key(), a);
                    }
                    Err(_) => self.connect_failed(a.peer, TxFailure::ConnectUnreachable),
                }
            }
            CmEventKind::RouteResolved => {
                let req = connreq(&self.me, a.peer, a.peer_stamp, a.version, a.params);
                let bytes = match req.encode() {
                    Ok(b) => b,
                    Err(_) => {
                        self.connect_failed(a.peer, TxFailure::ConnectLocal);
                        return;
                    }
                };
                let peer = a.peer;
                match self.build_conn(
                    a.id,
                    peer,
                    ConnState::Connecting,
                    a.version,
                    a.params,
                    a.peer_stamp,
                ) {
                    Ok(c) => {
                        if let Some(conn) = self.conns.get_mut(&c) {
                            conn.started = a.started;
                        }
                        let params = self.cm_params();
                        let ok = self
                            .conns
                            .get(&c)
                            .map(|conn| conn.id.connect(&params, &bytes));
                        if let Some(Err(e)) = ok {
                            tracing::warn!(%peer, error = %e, "o2iblnd: rdma_connect failed");
                            self.abort_connecting(c, Some(TxFailure::ConnectLocal));
                        }
                    }
                    Err((_id, why)) => {
                        tracing::warn!(%peer, %why, "o2iblnd: cannot build connection");
                        self.connect_failed(peer, TxFailure::ConnectLocal);
                    }
                }
            }
            _ => {
                // ADDR_ERROR, ROUTE_ERROR, UNREACHABLE: EHOSTUNREACH/ETIMEDOUT.
                tracing::info!(peer = %a.peer, kind = ?ev.kind, status = ev.status, "o2iblnd: connect failed");
                self.connect_failed(a.peer, TxFailure::ConnectUnreachable);
            }
        }
    }

    /// Removes a connection that never came up; `fail`: give up on the peer's queue too.
    fn abort_connecting(&mut self, c: u32, fail: Option<TxFailure>) {
        let Some(conn) = self.conns.remove(&c) else {
            return;
        };
        self.by_cm.remove(&conn.id.key());
        self.rx_free.push(conn.rx_block);
        let peer = conn.peer;
        drop(conn);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.conns.retain(|x| *x != c);
            p.connecting = false;
        }
        if let Some(f) = fail {
            self.connect_failed(peer, f);
        }
    }

    async fn on_established(&mut self, c: u32, private_data: &[u8]) {
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        let peer = conn.peer;
        match conn.state {
            ConnState::Connecting => {
                match check_connack(private_data, &self.me, peer, conn.version, conn.offered) {
                    Ok(acc) => {
                        conn.peer_stamp = acc.peer_stamp;
                        conn.max_frags = acc.params.max_frags;
                        let concurrent = clamp_concurrent_sends(
                            conn.version,
                            self.cfg.concurrent_sends,
                            self.cfg.peer_credits,
                        );
                        conn.credits = ConnCredits::new(
                            conn.version,
                            acc.params.queue_depth,
                            self.cfg.peer_credits,
                            self.cfg.peercredits_hiw,
                            concurrent,
                        );
                    }
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "o2iblnd: bad CONNACK, closing");
                        if let Some(p) = self.peers.get_mut(&peer) {
                            p.connecting = false;
                        }
                        self.close_conn(c, CloseWhy::Local);
                        self.fail_peer_queue(peer, TxFailure::ClosedLocally(TxStage::Queued));
                        return;
                    }
                }
            }
            ConnState::Accepting => {}
            ConnState::Established => return,
        }
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        conn.state = ConnState::Established;
        let (stamp, version, qd, frags) = (
            conn.peer_stamp,
            conn.version,
            conn.credits.queue_depth(),
            conn.max_frags,
        );
        let parked = std::mem::take(&mut conn.parked_rx);
        self.stats.conns_established += 1;
        tracing::info!(%peer, conn = c, ?version, qd, "o2iblnd: connection established");
        let p = self.peers.entry(peer).or_default();
        p.connecting = false;
        p.stamp = Some((stamp, version));
        p.version = Some(version);
        p.params = Some(ConnParams {
            queue_depth: qd,
            max_frags: frags,
            ..ConnParams::DEFAULT
        });
        p.races = 0;
        p.reconnects = 0;
        p.retry_at = None;
        p.down_reported = false;
        let queue: Vec<u32> = p.queue.drain(..).collect();
        for id in queue {
            self.queue_on_conn(c, id);
        }
        for (idx, len) in parked {
            self.on_rx(c, idx, len).await;
        }
        self.check_sends(c);
    }

    fn on_rejected(&mut self, c: u32, status: i32, private_data: &[u8]) {
        let Some(conn) = self.conns.get(&c) else {
            return;
        };
        if conn.state != ConnState::Connecting {
            self.close_conn(c, CloseWhy::PeerGone);
            return;
        }
        let (peer, version, offered, stamp) =
            (conn.peer, conn.version, conn.offered, conn.peer_stamp);
        let rej = if status == IB_CM_REJ_CONSUMER_DEFINED {
            Rej::decode(private_data).ok()
        } else {
            None
        };
        bump(
            &mut self.stats.rejects_received,
            rej.map_or(0, |r| r.why.to_u8()),
        );
        tracing::info!(%peer, status, why = ?rej.map(|r| r.why), "o2iblnd: connect rejected");
        self.abort_connecting(c, None);
        let action = match status {
            IB_CM_REJ_INVALID_SERVICE_ID => {
                self.connect_failed(peer, TxFailure::ConnectUnreachable);
                return;
            }
            IB_CM_REJ_STALE_CONN => RejectAction::Reconnect {
                version,
                params: offered,
                peer_stamp: stamp,
            },
            _ => on_reject(rej.as_ref(), version, offered, stamp),
        };
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        match action {
            RejectAction::Reconnect {
                version,
                params,
                peer_stamp,
            } => {
                p.reconnects += 1;
                if p.reconnects > MAX_RECONNECTS
                    || (p.queue.is_empty() && p.version == Some(version))
                {
                    p.reconnects = 0;
                    self.connect_failed(peer, TxFailure::ConnectRefused);
                    return;
                }
                p.version = Some(version);
                p.params = Some(params);
                if let Some(r) = rej.filter(|r| r.why == RejWhy::ConnStale) {
                    p.stamp = r.params.map(|rp| (rp.incarnation, version)).or(p.stamp);
                } else if peer_stamp != 0 {
                    p.stamp = Some((peer_stamp, version));
                }
                if !p.queue.is_empty() {
                    self.start_connect(peer);
                }
            }
            RejectAction::Later => {
                p.retry_at = Some(Instant::now() + Duration::from_secs(1));
            }
            _ => self.connect_failed(peer, TxFailure::ConnectRefused),
        }
    }

    fn passive(&mut self, id: CmId, private_data: &[u8]) {
        let decision = {
            let peers = &self.peers;
            let conns = &self.conns;
            check_connreq(private_data, &self.me, |nid| {
                let p = peers.get(&nid);
                PeerView {
                    connecting: p.is_some_and(|p| {
                        p.connecting
                            || p.conns.iter().any(|c| {
                                conns
                                    .get(c)
                                    .is_some_and(|c| c.state == ConnState::Connecting)
                            })
                    }),
                    races: p.map_or(0, |p| p.races),
                    known: p.and_then(|p| p.stamp),
                }
            })
        };
        match decision {
            PassiveDecision::Reject {
                rej,
                peer,
                peer_stamp,
                reason,
            } => {
                tracing::info!(?peer, why = ?rej.why, ?reason, "o2iblnd: refusing connection");
                bump(&mut self.stats.rejects_sent, rej.why.to_u8());
                let _ = id.reject(&rej.encode());
                drop(id);
                if let Some(peer) = peer {
                    if rej.why == RejWhy::ConnRace {
                        self.peers.entry(peer).or_default().races += 1;
                    }
                    if matches!(reason, super::connect::RefuseReason::PeerRestarted) {
                        let conns: Vec<u32> = self
                            .peers
                            .get(&peer)
                            .map(|p| p.conns.clone())
                            .unwrap_or_default();
                        for c in conns {
                            self.close_conn(c, CloseWhy::PeerGone);
                        }
                        if let (Some(p), Some(s)) = (self.peers.get_mut(&peer), peer_stamp) {
                            p.stamp = Some((s, rej.version));
                        }
                    }
                }
            }
            PassiveDecision::Accept {
                peer,
                peer_stamp,
                version,
                params,
                connack,
            } => {
                let bytes = match connack.encode() {
                    Ok(b) => b,
                    Err(_) => return,
                };
                match self.build_conn(id, peer, ConnState::Accepting, version, params, peer_stamp) {
                    Ok(c) => {
                        let cm = self.cm_params();
                        let res = self.conns.get(&c).map(|conn| conn.id.accept(&cm, &bytes));
                        if let Some(Err(e)) = res {
                            tracing::warn!(%peer, error = %e, "o2iblnd: rdma_accept failed");
                            self.abort_connecting(c, None);
                        }
                    }
                    Err((id, why)) => {
                        tracing::warn!(%peer, %why, "o2iblnd: cannot accept");
                        let rej = Rej {
                            magic: Default::default(),
                            version,
                            why: RejWhy::NoResources,
                            params: None,
                        };
                        bump(&mut self.stats.rejects_sent, RejWhy::NoResources.to_u8());
                        if let Some(id) = id {
                            let _ = id.reject(&rej.encode());
                        }
                    }
                }
            }
        }
    }

    fn close_conn(&mut self, c: u32, why: CloseWhy) {
        let Some(conn) = self.conns.remove(&c) else {
            return;
        };
        self.by_cm.remove(&conn.id.key());
        let _ = conn.id.disconnect();
        let peer = conn.peer;
        let was_connecting = conn.state == ConnState::Connecting;
        let mut ids: Vec<u32> = conn.active.clone();
        ids.extend(
            conn.rsrvd
                .iter()
                .chain(conn.credit_q.iter())
                .chain(conn.nocred.iter()),
        );
        self.rx_free.push(conn.rx_block);
        // Destroys the QP: the device no longer touches the buffers of this connection.
        drop(conn);
        self.stats.conns_closed += 1;
        tracing::info!(%peer, conn = c, ?why, "o2iblnd: connection closed");
        for id in ids {
            if let Some(tx) = self.txs.remove(&id) {
                let f = why.failure(tx.stage());
                self.release(&tx);
                self.complete_upper(peer, tx.upper, Err(f), "connection closed");
            }
        }
        self.pending_sinks.retain(|p| p.conn != c);
        self.pending_gets.retain(|_, g| g.conn != c);
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.conns.retain(|x| *x != c);
        if was_connecting {
            p.connecting = false;
        }
        if why == CloseWhy::Stop {
            return;
        }
        if p.conns.is_empty() && !p.queue.is_empty() && !p.connecting && !self.fatal {
            self.start_connect(peer);
        } else {
            self.report_down(
                peer,
                why.down_status(),
                format!("connection closed: {why:?}"),
            );
        }
        self.start_sinks();
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        // Connections with a tx past its deadline, or a connect that takes too long.
        let mut expired = Vec::new();
        let connreq_timeout = self.cfg.connreq_timeout();
        for (&c, conn) in &self.conns {
            if conn.state != ConnState::Established {
                if now.duration_since(conn.started) > connreq_timeout {
                    expired.push((c, true));
                }
                continue;
            }
            let late = conn
                .active
                .iter()
                .chain(conn.rsrvd.iter())
                .chain(conn.credit_q.iter())
                .chain(conn.nocred.iter())
                .any(|id| self.txs.get(id).is_some_and(|t| t.deadline <= now));
            if late {
                expired.push((c, false));
            }
        }
        for (c, connecting) in expired {
            if connecting {
                tracing::info!(conn = c, "o2iblnd: connect timed out");
                self.abort_connecting(c, Some(TxFailure::ConnectUnreachable));
            } else {
                tracing::warn!(conn = c, "o2iblnd: tx timed out, closing connection");
                self.close_conn(c, CloseWhy::Timeout);
            }
        }
        let stale_attempts: Vec<usize> = self
            .attempts
            .iter()
            .filter(|(_, a)| now.duration_since(a.started) > connreq_timeout)
            .map(|(k, _)| *k)
            .collect();
        for k in stale_attempts {
            if let Some(a) = self.attempts.remove(&k) {
                self.connect_failed(a.peer, TxFailure::ConnectUnreachable);
            }
        }
        // Sends that waited too long for a connection.
        let peers: Vec<Nid> = self.peers.keys().copied().collect();
        for peer in peers {
            let late: Vec<u32> = self.peers.get(&peer).map_or_else(Vec::new, |p| {
                p.queue
                    .iter()
                    .copied()
                    .filter(|id| self.txs.get(id).is_some_and(|t| t.deadline <= now))
                    .collect()
            });
            if !late.is_empty() {
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.queue.retain(|id| !late.contains(id));
                }
                for id in late {
                    if let Some(tx) = self.txs.remove(&id) {
                        self.release(&tx);
                        self.complete_upper(
                            peer,
                            tx.upper,
                            Err(TxFailure::WaitedForConnection),
                            "",
                        );
                    }
                }
                self.report_down(
                    peer,
                    HealthStatus::NetworkTimeout,
                    "no connection in time".into(),
                );
            }
            let retry = self.peers.get(&peer).is_some_and(|p| {
                p.retry_at.is_some_and(|t| t <= now) && !p.connecting && !p.queue.is_empty()
            });
            if retry {
                if self.established_conn(peer).is_some() {
                    if let Some(p) = self.peers.get_mut(&peer) {
                        p.retry_at = None;
                    }
                } else {
                    self.start_connect(peer);
                }
            }
        }
        // Keepalives and anything a freed buffer now allows.
        let all: Vec<u32> = self.conns.keys().copied().collect();
        for c in all {
            self.check_sends(c);
        }
        self.start_sinks();
    }

    fn shutdown(&mut self) {
        let all: Vec<u32> = self.conns.keys().copied().collect();
        for c in all {
            self.close_conn(c, CloseWhy::Stop);
        }
        self.attempts.clear();
        let peers: Vec<Nid> = self.peers.keys().copied().collect();
        for peer in peers {
            self.fail_peer_queue(peer, TxFailure::Stopped);
        }
        let left: Vec<u32> = self.txs.keys().copied().collect();
        for id in left {
            if let Some(tx) = self.txs.remove(&id) {
                self.complete_upper(tx.peer, tx.upper, Err(TxFailure::Stopped), "");
            }
        }
        tracing::info!(nid = %self.me.nid, "o2iblnd: NI stopped");
    }
}

/// The RDMA WRITE work requests that copy `len` bytes at `src_off` of `src` into `rd`,
/// one request per destination fragment; the error is a positive errno.
fn rdma_writes(
    src: &Region,
    src_off: usize,
    len: usize,
    rd: &RdmaDesc,
    max_frags: u16,
    id: u64,
) -> Result<Vec<SendWr>, i32> {
    let mut out = Vec::new();
    let mut done = 0usize;
    for frag in &rd.frags {
        if done >= len {
            break;
        }
        let n = (len - done).min(usize::try_from(frag.nob).unwrap_or(0));
        if n == 0 {
            continue;
        }
        if out.len() >= usize::from(max_frags) {
            return Err(EMSGSIZE);
        }
        out.push(SendWr {
            addr: src.addr(src_off + done),
            len: u32::try_from(n).map_err(|_| EMSGSIZE)?,
            lkey: src.lkey(),
            wr_id: id,
            rdma: Some((frag.addr, rd.key)),
            signaled: false,
        });
        done += n;
    }
    if done < len {
        return Err(EMSGSIZE);
    }
    Ok(out)
}
