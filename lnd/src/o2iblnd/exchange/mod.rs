//! The data path of an o2iblnd NI as a pure state machine: the IMMEDIATE, PUT
//! (PUT_REQ, PUT_ACK or PUT_NAK, RDMA WRITE, PUT_DONE) and GET (GET_REQ, RDMA WRITE of the
//! REPLY, GET_DONE) exchanges over established connections, with their credits, buffers
//! and deadlines.
//!
//! [`Exchanges`] makes no verbs call, opens no socket, reads no clock (every event takes
//! `now`) and starts no task. It takes events — a send from the layer above
//! ([`Exchanges::send`]), a received message ([`Exchanges::on_receive`], then
//! [`Exchanges::on_header_decision`] once the layer above judged its LNet header), the
//! completion of a posted send ([`Exchanges::on_send_complete`]), the timer
//! ([`Exchanges::on_timer`]), a connection coming up or going away — and queues
//! [`Action`]s that the driver takes with [`Exchanges::poll_action`] and carries out in
//! order: post a message and the RDMA writes before it, deliver a message to LNet,
//! complete a send with its health status, close a connection, connect to a peer.
//! [`Exchanges::poll_timeout`] says when the timer is next due.
//!
//! Buffers are named by slot: message buffers (`IBLND_MSG_SIZE` bytes each), source bulk
//! buffers (the payload a PUT or REPLY is written from) and sink bulk buffers (where a PUT
//! is written to; the peer learns their address from PUT_ACK, see [`SinkRegion`]), each
//! [`BULK_BUFFER_BYTES`] long. A slot is free again once no posted work request covers it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnet::health::HealthStatus;
use lnet::{Header, Nid, ProcessId, WireHandle};
use tokio::time::Instant;

use super::config::{wait_for_conn_timeout, O2ibLndConfig, BULK_BUFFER_BYTES};
use super::credits::{ConnCredits, SendClass};
use super::status::{TxFailure, TxStage};
use super::wire::{Cookie, RdmaDesc, Version};
use crate::lnd::{TxCompletion, TxId};

mod recv;
mod send;
#[cfg(test)]
mod tests;

/// `-ENODATA`: a GET that matched nothing.
const ENODATA: i32 = 61;
/// `-EMSGSIZE`: an RDMA transfer that does not fit the descriptor.
const EMSGSIZE: i32 = 90;

/// The registered memory that sink bulk buffers live in, as a peer addresses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkRegion {
    /// The address of the region's first byte.
    pub addr: u64,
    /// The remote key.
    pub rkey: u32,
}

/// An established connection as the data path sees it.
#[derive(Debug, Clone)]
pub struct LinkParams {
    /// The peer NI.
    pub peer: Nid,
    /// The negotiated protocol version.
    pub version: Version,
    /// The peer's incarnation.
    pub peer_stamp: u64,
    /// Most RDMA fragments the peer handles.
    pub max_frags: u16,
    /// The connection's credits, as negotiated.
    pub credits: ConnCredits,
}

/// Why a connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseWhy {
    /// A tx on it passed its deadline, or its connect took too long.
    Timeout,
    /// The peer went away (disconnect, failed work completion, restart).
    PeerGone,
    /// This side found an error (protocol error from the peer, local verbs failure).
    Local,
    /// The RDMA device went away.
    Device,
    /// The NI stops.
    Stop,
}

impl CloseWhy {
    /// How a tx at `stage` on the closed connection fails.
    pub fn failure(self, stage: TxStage) -> TxFailure {
        match self {
            CloseWhy::Timeout => TxFailure::ConnTimeout(stage),
            CloseWhy::PeerGone => TxFailure::PeerGone(stage),
            CloseWhy::Local => TxFailure::ClosedLocally(stage),
            CloseWhy::Device => TxFailure::DeviceRemoved,
            CloseWhy::Stop => TxFailure::Stopped,
        }
    }

    /// The health status a peer-down report carries.
    pub fn down_status(self) -> HealthStatus {
        match self {
            CloseWhy::Timeout => HealthStatus::NetworkTimeout,
            CloseWhy::PeerGone => HealthStatus::RemoteDropped,
            CloseWhy::Local | CloseWhy::Device => HealthStatus::LocalError,
            CloseWhy::Stop => HealthStatus::LocalAborted,
        }
    }
}

/// What the driver does next, in the order the actions come.
#[derive(Debug)]
#[non_exhaustive]
pub enum Action {
    /// Post a message on a connection, after the RDMA writes it names.
    Post(PostSend),
    /// Hand a received message to the layer above.
    Deliver {
        /// The peer that sent it on this hop.
        from: ProcessId,
        /// Its LNet header.
        header: Header,
        /// Its payload.
        payload: Bytes,
    },
    /// Hand a PUT to the layer above: with `lend`, the `len` bytes at `offset` of the
    /// sink buffers themselves, as they are (no copy): that sink buffer stays out of use
    /// until the layer above lets go of them and the driver says so
    /// ([`Exchanges::sink_returned`]); otherwise a copy of them in `buf` (cleared first).
    /// Then deliver it as [`Action::Deliver`] would.
    DeliverSink {
        /// The peer that sent it on this hop.
        from: ProcessId,
        /// Its LNet header.
        header: Header,
        /// Where the payload starts in the sink buffers.
        offset: usize,
        /// Its length.
        len: usize,
        /// The buffer the layer above chose.
        buf: BytesMut,
        /// The sink buffer lent to the layer above, if it is lent.
        lend: Option<usize>,
    },
    /// A send of the layer above ended.
    Complete(TxCompletion),
    /// Close a connection (destroy its QP); the data path already dropped it and failed
    /// its txs.
    Close {
        /// The connection.
        conn: u32,
        /// Why.
        why: CloseWhy,
    },
    /// A tx waits for a connection to `peer`: start one unless one is under way.
    Connect {
        /// The peer NI.
        peer: Nid,
    },
    /// Txs waited too long for a connection to `peer` and failed.
    ConnectTimedOut {
        /// The peer NI.
        peer: Nid,
    },
}

/// One message to post, with the RDMA writes that go before it on the same QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostSend {
    /// The connection.
    pub conn: u32,
    /// The tx it belongs to; its completion is [`Exchanges::on_send_complete`].
    pub tx: u32,
    /// The message buffer to copy `msg` into and send from.
    pub msg_slot: usize,
    /// The encoded message.
    pub msg: Bytes,
    /// Bulk data to copy into a source buffer first.
    pub fill: Option<BulkFill>,
    /// RDMA WRITEs from the source buffers, posted (unsignalled) before the message.
    pub rdma: Vec<RdmaWrite>,
    /// The payload the RDMA WRITEs carry, and where it starts in the source buffers: a
    /// driver may write from the payload's own memory instead when it is registered
    /// (then it did not copy it there when the payload was filled, see [`BulkFill`]).
    pub rdma_payload: Option<(usize, Bytes)>,
}

/// A payload to copy into a source bulk buffer (unless its own memory is registered:
/// then the RDMA WRITEs go from there, see [`PostSend::rdma_payload`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkFill {
    /// The source buffer.
    pub slot: usize,
    /// The bytes, at most [`BULK_BUFFER_BYTES`].
    pub payload: Bytes,
}

/// One RDMA WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaWrite {
    /// Offset of the first byte in the source bulk buffers (slot × [`BULK_BUFFER_BYTES`]
    /// plus the offset in the slot).
    pub src_offset: usize,
    /// Bytes to write.
    pub len: u32,
    /// The peer's address to write to.
    pub remote_addr: u64,
    /// The peer's remote key.
    pub rkey: u32,
}

/// A received message whose LNet header the layer above judges
/// ([`crate::LndHandler::on_header`]) before [`Exchanges::on_header_decision`] goes on.
#[derive(Debug)]
pub struct HeaderQuery {
    conn: u32,
    from: ProcessId,
    header: Header,
    asked: Asked,
}

impl HeaderQuery {
    /// The connection it came on.
    pub fn conn(&self) -> u32 {
        self.conn
    }

    /// The peer that sent it on this hop.
    pub fn from(&self) -> ProcessId {
        self.from
    }

    /// Its LNet header.
    pub fn header(&self) -> Header {
        self.header
    }
}

#[derive(Debug)]
enum Asked {
    Immediate(Bytes),
    PutReq(Cookie),
    GetReq {
        cookie: Cookie,
        rd: RdmaDesc,
        return_wmd: WireHandle,
    },
}

/// Counters of the data path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExchangeStats {
    /// Messages received, by type code.
    pub rx_msgs: HashMap<u8, u64>,
    /// Messages posted, by type code.
    pub tx_msgs: HashMap<u8, u64>,
    /// Bytes written by RDMA (source side).
    pub rdma_bytes: u64,
    /// Most peer credits a connection had in use at once.
    pub peak_credits_in_use: u16,
    /// PUTs handed up in the sink buffer the peer wrote them to (no copy).
    pub sinks_lent: u64,
    /// PUTs handed up as a copy of their sink buffer (half the sink buffers were lent).
    pub sinks_copied: u64,
}

/// The receiver's side of a PUT: where the payload goes once PUT_DONE arrives.
#[derive(Debug)]
struct Sink {
    buf: BytesMut,
    header: Header,
    from: ProcessId,
    slot: usize,
    /// Lent to the layer above with the payload: freed by [`Exchanges::sink_returned`],
    /// not when the tx ends.
    lent: bool,
}

#[derive(Debug)]
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
    /// PUT_NAK or GET_DONE without data.
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

#[derive(Debug)]
struct Tx {
    upper: Option<TxId>,
    peer: Nid,
    kind: TxKind,
    deadline: Instant,
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

/// The data path of one established connection.
#[derive(Debug)]
struct Link {
    peer: Nid,
    version: Version,
    peer_stamp: u64,
    max_frags: u16,
    credits: ConnCredits,
    /// PUT_REQs waiting for a reserved credit.
    rsrvd: VecDeque<u32>,
    /// Messages that cost a credit.
    credit_q: VecDeque<u32>,
    /// Messages that cost none (answers, NOOPs).
    nocred: VecDeque<u32>,
    /// Posted txs, until they complete.
    active: Vec<u32>,
    last_send: Instant,
    /// Messages posted on it.
    tx_msgs: u64,
    /// Messages received on it.
    rx_msgs: u64,
}

impl Link {
    fn all_txs(&self) -> impl Iterator<Item = &u32> {
        self.active
            .iter()
            .chain(self.rsrvd.iter())
            .chain(self.credit_q.iter())
            .chain(self.nocred.iter())
    }
}

/// The established connections to one peer, as the kernel's peer NI lists them: the
/// newest first, and the one the last send went on, so that sends go round the list.
#[derive(Debug, Default)]
struct PeerLinks {
    /// Established connections, the newest first.
    conns: Vec<u32>,
    /// The connection the last send from the layer above was queued on.
    next: Option<u32>,
}

impl PeerLinks {
    /// The connection the next send goes on: the one after the last one used, or the
    /// first when the last one was the last of the list or is gone (the kernel's
    /// `kiblnd_get_conn_locked`).
    fn pick(&mut self) -> Option<u32> {
        let after = self
            .next
            .and_then(|n| self.conns.iter().position(|c| *c == n))
            .and_then(|i| self.conns.get(i + 1));
        let c = after.or_else(|| self.conns.first()).copied()?;
        self.next = Some(c);
        Some(c)
    }
}

#[derive(Debug)]
struct PendingSink {
    conn: u32,
    src_cookie: Cookie,
    buf: BytesMut,
    header: Header,
}

#[derive(Debug)]
struct PendingGet {
    conn: u32,
    cookie: Cookie,
    rd: RdmaDesc,
}

/// The IMMEDIATE, PUT and GET exchanges of one NI (see the module doc).
#[derive(Debug)]
pub struct Exchanges {
    me: Nid,
    incarnation: u64,
    timeout: Duration,
    wait_for_conn: Duration,
    keepalive: Option<Duration>,
    sink: SinkRegion,
    links: HashMap<u32, Link>,
    /// The established connections of each peer, in the order sends go round them.
    peer_links: HashMap<Nid, PeerLinks>,
    /// Txs waiting for a connection, by peer.
    waiting: HashMap<Nid, VecDeque<u32>>,
    txs: HashMap<u32, Tx>,
    msg_free: Vec<usize>,
    src_free: Vec<usize>,
    sink_free: Vec<usize>,
    /// Sink buffers lent to the layer above now, and the most that may be: half of
    /// them, so that what the layer above holds never starves the PUTs to come.
    lent: usize,
    max_lent: usize,
    pending_sinks: VecDeque<PendingSink>,
    pending_gets: HashMap<(Nid, WireHandle), PendingGet>,
    next_tx: u32,
    next_cookie: u64,
    msg_starved: bool,
    stats: ExchangeStats,
    actions: VecDeque<Action>,
}

impl Exchanges {
    /// The data path of the NI `cfg` describes: `cfg.ntx` message buffers and
    /// `cfg.bulk_buffers` source and sink buffers, the sinks in `sink`.
    pub fn new(cfg: &O2ibLndConfig, sink: SinkRegion) -> Exchanges {
        Exchanges {
            me: cfg.nid,
            incarnation: cfg.incarnation,
            timeout: cfg.timeout,
            wait_for_conn: wait_for_conn_timeout(cfg.timeout),
            keepalive: cfg.keepalive,
            sink,
            links: HashMap::new(),
            peer_links: HashMap::new(),
            waiting: HashMap::new(),
            txs: HashMap::new(),
            msg_free: (0..cfg.ntx).rev().collect(),
            src_free: (0..cfg.bulk_buffers).rev().collect(),
            sink_free: (0..cfg.bulk_buffers).rev().collect(),
            lent: 0,
            max_lent: cfg.bulk_buffers / 2,
            pending_sinks: VecDeque::new(),
            pending_gets: HashMap::new(),
            next_tx: 1,
            next_cookie: 1,
            msg_starved: false,
            stats: ExchangeStats::default(),
            actions: VecDeque::new(),
        }
    }

    /// The LND `timeout` the txs started from now on are bounded by.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Bounds the txs started from now on by `timeout` (`net set --lnd-timeout`): their
    /// wait for a connection and their deadline once queued on one. The txs there are keep
    /// their deadlines.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        self.wait_for_conn = wait_for_conn_timeout(timeout);
    }

    /// The next action to carry out, oldest first.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Exchanges::on_timer`] is next due: the earliest tx deadline or keepalive.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let deadlines = self.txs.values().map(|t| t.deadline);
        let keepalives = self
            .keepalive
            .into_iter()
            .flat_map(|k| self.links.values().map(move |l| l.last_send + k));
        deadlines.chain(keepalives).min()
    }

    /// The layer above let go of sink buffer `slot`, lent with a PUT
    /// ([`Action::DeliverSink`]): it takes the next PUT waiting for a sink.
    pub fn sink_returned(&mut self, now: Instant, slot: usize) {
        self.lent = self.lent.saturating_sub(1);
        self.sink_free.push(slot);
        self.start_sinks(now);
    }

    /// Sink buffers lent to the layer above now.
    pub fn sinks_lent_now(&self) -> usize {
        self.lent
    }

    /// The counters.
    pub fn stats(&self) -> &ExchangeStats {
        &self.stats
    }

    /// Whether txs wait for a connection to `peer`.
    pub fn has_waiting(&self, peer: Nid) -> bool {
        self.waiting.get(&peer).is_some_and(|q| !q.is_empty())
    }

    /// Messages posted on and received on `conn`, while it is established.
    pub fn conn_msgs(&self, conn: u32) -> Option<(u64, u64)> {
        self.links.get(&conn).map(|l| (l.tx_msgs, l.rx_msgs))
    }

    /// A connection came up: the txs waiting for `params.peer` all go on it (as the
    /// kernel's, the first connection up takes the sends that waited, whatever
    /// `conns_per_peer`); it heads the peer's list, which later sends go round. The driver
    /// calls [`Exchanges::flush`] once it fed what the connection received before.
    pub fn add_conn(&mut self, now: Instant, conn: u32, params: LinkParams) {
        let peer = params.peer;
        let list = self.peer_links.entry(peer).or_default();
        list.conns.retain(|c| *c != conn);
        list.conns.insert(0, conn);
        self.links.insert(
            conn,
            Link {
                peer,
                version: params.version,
                peer_stamp: params.peer_stamp,
                max_frags: params.max_frags,
                credits: params.credits,
                rsrvd: VecDeque::new(),
                credit_q: VecDeque::new(),
                nocred: VecDeque::new(),
                active: Vec::new(),
                last_send: now,
                tx_msgs: 0,
                rx_msgs: 0,
            },
        );
        let queue: Vec<u32> = self
            .waiting
            .remove(&peer)
            .map(Vec::from)
            .unwrap_or_default();
        for id in queue {
            self.queue_on_conn(now, conn, id);
        }
    }

    /// Posts what the credits of `conn` allow.
    pub fn flush(&mut self, now: Instant, conn: u32) {
        self.check_sends(now, conn);
    }

    /// The driver closes `conn`: its txs fail with `why`, its pending PUT sinks and GETs
    /// are dropped. No [`Action::Close`] follows.
    pub fn close_conn(&mut self, now: Instant, conn: u32, why: CloseWhy) {
        self.drop_link(now, conn, why);
    }

    /// The data path closes `conn` for `why`.
    fn close(&mut self, now: Instant, conn: u32, why: CloseWhy) {
        if self.links.contains_key(&conn) {
            self.actions.push_back(Action::Close { conn, why });
        }
        self.drop_link(now, conn, why);
    }

    fn drop_link(&mut self, now: Instant, conn: u32, why: CloseWhy) {
        let Some(link) = self.links.remove(&conn) else {
            return;
        };
        if let Some(list) = self.peer_links.get_mut(&link.peer) {
            list.conns.retain(|c| *c != conn);
            if list.next == Some(conn) {
                list.next = None;
            }
            if list.conns.is_empty() {
                self.peer_links.remove(&link.peer);
            }
        }
        let ids: Vec<u32> = link.all_txs().copied().collect();
        for id in ids {
            if let Some(tx) = self.txs.remove(&id) {
                let f = why.failure(tx.stage());
                self.release(&tx);
                self.complete(tx.peer, tx.upper, Err(f), "connection closed");
            }
        }
        self.pending_sinks.retain(|p| p.conn != conn);
        self.pending_gets.retain(|_, g| g.conn != conn);
        if why != CloseWhy::Stop {
            self.start_sinks(now);
        }
    }

    /// Fails the txs waiting for a connection to `peer` with `f`.
    pub fn fail_waiting(&mut self, peer: Nid, f: TxFailure) {
        let queue = self.waiting.remove(&peer).unwrap_or_default();
        for id in queue {
            if let Some(tx) = self.txs.remove(&id) {
                self.release(&tx);
                self.complete(peer, tx.upper, Err(f), "");
            }
        }
    }

    /// The timer: closes connections with a tx past its deadline, fails txs that waited
    /// too long for a connection, and posts keepalives and what freed buffers allow.
    pub fn on_timer(&mut self, now: Instant) {
        let mut late: Vec<u32> = self
            .links
            .iter()
            .filter(|(_, l)| {
                l.all_txs()
                    .any(|id| self.txs.get(id).is_some_and(|t| t.deadline <= now))
            })
            .map(|(c, _)| *c)
            .collect();
        late.sort_unstable();
        for c in late {
            tracing::warn!(conn = c, "o2iblnd: tx timed out, closing connection");
            self.close(now, c, CloseWhy::Timeout);
        }
        let mut peers: Vec<Nid> = self.waiting.keys().copied().collect();
        peers.sort_unstable();
        for peer in peers {
            let late: Vec<u32> = self.waiting.get(&peer).map_or_else(Vec::new, |q| {
                q.iter()
                    .copied()
                    .filter(|id| self.txs.get(id).is_some_and(|t| t.deadline <= now))
                    .collect()
            });
            if late.is_empty() {
                continue;
            }
            if let Some(q) = self.waiting.get_mut(&peer) {
                q.retain(|id| !late.contains(id));
                if q.is_empty() {
                    self.waiting.remove(&peer);
                }
            }
            for id in late {
                if let Some(tx) = self.txs.remove(&id) {
                    self.release(&tx);
                    self.complete(peer, tx.upper, Err(TxFailure::WaitedForConnection), "");
                }
            }
            self.actions.push_back(Action::ConnectTimedOut { peer });
        }
        self.check_all(now);
        self.start_sinks(now);
    }

    /// The NI stops: every tx left fails with [`TxFailure::Stopped`].
    pub fn shutdown(&mut self, now: Instant) {
        let mut conns: Vec<u32> = self.links.keys().copied().collect();
        conns.sort_unstable();
        for c in conns {
            self.drop_link(now, c, CloseWhy::Stop);
        }
        let peers: Vec<Nid> = self.waiting.keys().copied().collect();
        for peer in peers {
            self.fail_waiting(peer, TxFailure::Stopped);
        }
        let left: Vec<u32> = self.txs.keys().copied().collect();
        for id in left {
            if let Some(tx) = self.txs.remove(&id) {
                self.complete(tx.peer, tx.upper, Err(TxFailure::Stopped), "");
            }
        }
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

    fn add_tx(&mut self, now: Instant, peer: Nid, upper: Option<TxId>, kind: TxKind) -> u32 {
        let id = self.new_tx_id();
        let cookie = self.new_cookie();
        let class = kind.class();
        self.txs.insert(
            id,
            Tx {
                upper,
                peer,
                kind,
                deadline: now + self.wait_for_conn,
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

    fn release(&mut self, tx: &Tx) {
        self.msg_free.extend(tx.msg_slots.iter().copied());
        if let Some(s) = tx.src_slot {
            self.src_free.push(s);
            self.msg_starved = true;
        }
        if let TxKind::PutAck { sink, .. } = &tx.kind {
            if !sink.lent {
                self.sink_free.push(sink.slot);
            }
        }
    }

    fn complete(
        &mut self,
        peer: Nid,
        upper: Option<TxId>,
        result: Result<(), TxFailure>,
        why: &str,
    ) {
        let Some(id) = upper else { return };
        self.actions
            .push_back(Action::Complete(completion(self.me, peer, id, result, why)));
    }

    fn owe_credit(&mut self, c: u32) {
        if let Some(link) = self.links.get_mut(&c) {
            link.credits.owe_peer_credit();
        }
    }
}

/// The completion of the send `id` to `peer` on the NI `ni`: OK, or the failure's health
/// status with the failure (and `why`) as the reason.
pub fn completion(
    ni: Nid,
    peer: Nid,
    id: TxId,
    result: Result<(), TxFailure>,
    why: &str,
) -> TxCompletion {
    let (status, reason) = match result {
        Ok(()) => (HealthStatus::Ok, None),
        Err(f) => (f.status(), Some(format!("{f:?} {why}").trim().to_string())),
    };
    TxCompletion {
        id,
        ni,
        peer,
        status,
        reason,
    }
}

fn bump(map: &mut HashMap<u8, u64>, key: u8) {
    *map.entry(key).or_default() += 1;
}
