//! One peer of a socklnd NI: its connection set, its send queue and its credits, driven
//! by one task.
//!
//! The task owns everything about the peer: messages wait in a bounded queue until a
//! connection that may carry them ([`super::placement`]), a peer credit and an NI credit
//! are there; connections are opened (1 CONTROL, then `conns_per_peer` BULK_IN and
//! BULK_OUT) when messages wait and are missing; incoming connections are registered or
//! refused ([`super::handshake::decide_passive`]); ZC-ACKs and keepalives are queued as
//! NOOPs; every accepted send is completed exactly once.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lnet::{HeaderForm, ProcessId};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};
use tokio::time::Instant;

mod close;
pub(crate) mod cmd;

use super::config::SockLndConfig;
use super::conn::end::ConnEnd;
use super::conn::{LastAlive, Reader, WriteItem, Writer, WriterProgress};
use super::credits::TxCredits;
use super::handshake::{self, ConnectError, Established, PassiveContext, PassiveDecision};
use super::placement::{self, Candidate, Traffic};
use super::stats::{CloseCounters, CloseReason, PeerStats};
use super::status::TxFailure;
use super::wire::{lnet_frame_len, ByteOrder, ConnType, KsockHeader, ProtoVersion};
use crate::lnd::{LndHandler, TxCompletion, TxRequest};
use cmd::PeerCmd;

/// After this many HELLO refusals in a row the peer stops opening connections if it has
/// any (`SOCKNAL_MAX_RETRIES`).
const MAX_REFUSALS: u32 = 3;
/// Least time between two keepalives whatever the configuration says.
const MIN_KEEPALIVE_RETRY: Duration = Duration::from_millis(10);
/// Commands a peer task can have waiting.
const CMD_QUEUE: usize = 256;
/// Sends handed to a peer task and not yet in its queue: senders wait beyond this.
const DATA_QUEUE: usize = 16;
/// Room on a writer queue beyond the peer credits, for NOOPs.
const NOOP_SLACK: usize = 16;
/// NOOPs (ZC-ACKs) waiting for room on a writer before the peer's connections are closed
/// as not draining.
const MAX_PENDING_NOOPS: usize = 1024;
/// TCP keepalive: idle time, interval, probes (socklnd `keepalive_idle/_intvl/_count`).
const TCP_KEEPALIVE: (Duration, Duration, u32) =
    (Duration::from_secs(30), Duration::from_secs(5), 5);

/// What the tasks of one NI share.
pub(crate) struct NiShared<H> {
    pub(crate) cfg: SockLndConfig,
    pub(crate) me: ProcessId,
    pub(crate) handler: Arc<H>,
    pub(crate) ni_credits: Arc<Semaphore>,
    pub(crate) next_conn: AtomicU64,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) peers: Mutex<Peers>,
    pub(crate) closes: CloseCounters,
}

/// The peers of an NI.
#[derive(Default)]
pub(crate) struct Peers {
    pub(crate) map: HashMap<ProcessId, PeerEntry>,
    pub(crate) stopped: bool,
}

/// How the NI reaches a peer task.
pub(crate) struct PeerEntry {
    pub(crate) cmd: mpsc::Sender<PeerCmd>,
    pub(crate) data: mpsc::Sender<TxRequest>,
    pub(crate) task: JoinHandle<()>,
}

/// The senders of a peer task.
#[derive(Clone)]
pub(crate) struct PeerHandle {
    pub(crate) cmd: mpsc::Sender<PeerCmd>,
    pub(crate) data: mpsc::Sender<TxRequest>,
}

impl<H: LndHandler> NiShared<H> {
    /// The peer task for `id`, started if there is none; `None` once the NI is stopping.
    pub(crate) fn peer(self: &Arc<Self>, id: ProcessId) -> Option<PeerHandle> {
        let mut peers = self.peers.lock().ok()?;
        if peers.stopped {
            return None;
        }
        if let Some(e) = peers.map.get(&id) {
            return Some(PeerHandle {
                cmd: e.cmd.clone(),
                data: e.data.clone(),
            });
        }
        let (cmd_tx, cmd_rx) = mpsc::channel(CMD_QUEUE);
        let (data_tx, data_rx) = mpsc::channel(DATA_QUEUE);
        let task = PeerTask::new(self.clone(), id, cmd_tx.clone());
        let run = task.run(cmd_rx, data_rx, self.stop.clone());
        let join = match self.cfg.cpts.of(&id.nid) {
            Some(cpt) => cpt.spawn(run),
            None => tokio::spawn(run),
        };
        peers.map.insert(
            id,
            PeerEntry {
                cmd: cmd_tx.clone(),
                data: data_tx.clone(),
                task: join,
            },
        );
        Some(PeerHandle {
            cmd: cmd_tx,
            data: data_tx,
        })
    }
}

struct Queued {
    tx: TxRequest,
    since: Instant,
}

struct Inflight {
    tx: TxRequest,
    since: Instant,
    conn: u64,
    frame_len: usize,
    _permit: OwnedSemaphorePermit,
}

struct Conn {
    id: u64,
    ctype: ConnType,
    version: ProtoVersion,
    writer: mpsc::Sender<WriteItem>,
    progress: Arc<WriterProgress>,
    tasks: [AbortHandle; 2],
    queued_bytes: usize,
    last_used: u64,
}

type ConnectResult = (ConnType, Result<Established, ConnectError>);

struct PeerTask<H> {
    ni: Arc<NiShared<H>>,
    id: ProcessId,
    addr: Option<SocketAddr>,
    cmd_tx: mpsc::Sender<PeerCmd>,
    conns: Vec<Conn>,
    reserved: HashMap<ConnType, usize>,
    connecting: HashMap<tokio::task::Id, ConnType>,
    connects: JoinSet<ConnectResult>,
    tasks: JoinSet<()>,
    queue: VecDeque<Queued>,
    inflight: BTreeMap<u64, Inflight>,
    credits: TxCredits,
    spare_permit: Option<OwnedSemaphorePermit>,
    want_permit: bool,
    next_seq: u64,
    use_clock: u64,
    record: Option<(u64, ProtoVersion)>,
    version: ProtoVersion,
    backoff: Duration,
    retry_at: Option<Instant>,
    refusals: u32,
    alive: Arc<LastAlive>,
    last_keepalive: Option<Instant>,
    pending_noops: VecDeque<KsockHeader>,
    /// The upper layer was told the peer is down, and no connection came up since.
    down_reported: bool,
}

impl<H: LndHandler> PeerTask<H> {
    fn new(ni: Arc<NiShared<H>>, id: ProcessId, cmd_tx: mpsc::Sender<PeerCmd>) -> Self {
        let addr = id
            .nid
            .addr_u32()
            .map(|a| SocketAddr::new(std::net::Ipv4Addr::from(a).into(), ni.cfg.peer_port));
        let credits = TxCredits::new(ni.cfg.effective_peer_credits());
        let version = ni.cfg.version;
        let backoff = ni.cfg.min_reconnect;
        PeerTask {
            ni,
            id,
            addr,
            cmd_tx,
            conns: Vec::new(),
            reserved: HashMap::new(),
            connecting: HashMap::new(),
            connects: JoinSet::new(),
            tasks: JoinSet::new(),
            queue: VecDeque::new(),
            inflight: BTreeMap::new(),
            credits,
            spare_permit: None,
            want_permit: false,
            next_seq: 1,
            use_clock: 0,
            record: None,
            version,
            backoff,
            retry_at: None,
            refusals: 0,
            alive: Arc::new(LastAlive::new(Instant::now())),
            last_keepalive: None,
            pending_noops: VecDeque::new(),
            down_reported: false,
        }
    }

    async fn run(
        mut self,
        mut cmd_rx: mpsc::Receiver<PeerCmd>,
        mut data_rx: mpsc::Receiver<TxRequest>,
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            if *stop.borrow() {
                break;
            }
            self.dispatch();
            self.maybe_connect();
            let deadline = self.next_deadline();
            let sem = self.ni.ni_credits.clone();
            let room = self.queue.len() < self.ni.cfg.peer_queue;
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                Some(cmd) = cmd_rx.recv() => self.on_cmd(cmd),
                Some(done) = self.connects.join_next_with_id(), if !self.connects.is_empty() => {
                    match done {
                        Ok((id, done)) => {
                            self.connecting.remove(&id);
                            self.on_connect_done(done);
                        }
                        Err(e) => {
                            self.connecting.remove(&e.id());
                        }
                    }
                }
                Some(_) = self.tasks.join_next(), if !self.tasks.is_empty() => {}
                permit = sem.acquire_owned(), if self.want_permit => {
                    self.want_permit = false;
                    self.spare_permit = permit.ok();
                }
                tx = data_rx.recv(), if room => match tx {
                    Some(tx) => {
                        let since = Instant::now();
                        self.queue.push_back(Queued { tx, since });
                        // Take what else is waiting, while the queue has room: one wake-up
                        // for a burst of sends.
                        while self.queue.len() < self.ni.cfg.peer_queue {
                            match data_rx.try_recv() {
                                Ok(tx) => self.queue.push_back(Queued { tx, since }),
                                Err(_) => break,
                            }
                        }
                    }
                    None => break,
                },
                _ = sleep_until(deadline), if deadline.is_some() => self.on_timer(),
            }
        }
        self.shutdown(&mut data_rx);
    }

    fn candidates(&self) -> Vec<Candidate> {
        self.conns
            .iter()
            .map(|c| Candidate {
                ctype: c.ctype,
                version: c.version,
                queued_bytes: c.queued_bytes,
                last_used: c.last_used,
            })
            .collect()
    }

    fn count(&self, ctype: ConnType) -> usize {
        self.conns.iter().filter(|c| c.ctype == ctype).count()
    }

    fn has_every_type(&self) -> bool {
        [ConnType::Control, ConnType::BulkIn, ConnType::BulkOut]
            .into_iter()
            .all(|t| self.count(t) > 0)
    }

    fn complete(&self, tx: &TxRequest, failure: Option<(TxFailure, String)>) {
        let (status, reason) = match failure {
            None => (lnet::health::HealthStatus::Ok, None),
            Some((f, why)) => (f.status(), Some(why)),
        };
        if let Some(why) = &reason {
            tracing::debug!(peer = %self.id, id = tx.id.0, %status, "socklnd: send failed: {why}");
        }
        self.ni.handler.on_send_complete(TxCompletion {
            id: tx.id,
            ni: self.ni.me.nid,
            peer: tx.peer,
            status,
            reason,
        });
    }

    fn fail_queue(&mut self, failure: TxFailure, why: &str) {
        for q in std::mem::take(&mut self.queue) {
            self.complete(&q.tx, Some((failure, why.to_owned())));
        }
    }

    /// Moves queued messages onto connections while credits last.
    fn dispatch(&mut self) {
        self.flush_noops();
        while let Some(head) = self.queue.front() {
            if self.credits.available() == 0 {
                break;
            }
            let frame_len = lnet_frame_len(HeaderForm::Nid4, head.tx.payload.len());
            let traffic = Traffic::Lnet { frame_len };
            let Some(i) = placement::choose(&self.candidates(), traffic, self.ni.cfg.min_bulk)
            else {
                break;
            };
            let permit = match self.spare_permit.take() {
                Some(p) => p,
                None => match self.ni.ni_credits.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        self.want_permit = true;
                        break;
                    }
                },
            };
            let Some(q) = self.queue.pop_front() else {
                break;
            };
            let Some(conn) = self.conns.get_mut(i) else {
                self.queue.push_front(q);
                self.spare_permit = Some(permit);
                break;
            };
            let seq = self.next_seq;
            let item = WriteItem::Lnet {
                seq,
                header: q.tx.header,
                payload: q.tx.payload.clone(),
            };
            if conn.writer.try_send(item).is_err() {
                self.queue.push_front(q);
                self.spare_permit = Some(permit);
                break;
            }
            self.next_seq += 1;
            self.use_clock += 1;
            conn.queued_bytes += frame_len;
            conn.last_used = self.use_clock;
            self.credits.try_take();
            self.inflight.insert(
                seq,
                Inflight {
                    tx: q.tx,
                    since: q.since,
                    conn: conn.id,
                    frame_len,
                    _permit: permit,
                },
            );
        }
        if self.queue.is_empty() {
            // Nothing waits: give an NI credit taken in advance back to the other peers.
            self.spare_permit = None;
            self.want_permit = false;
        }
        self.credits.note(self.queue.len());
    }

    /// Queues waiting NOOPs where NOOPs go.
    fn flush_noops(&mut self) {
        while let Some(k) = self.pending_noops.front().copied() {
            let Some(i) = placement::choose_noop(&self.candidates(), self.ni.cfg.min_bulk) else {
                break;
            };
            let Some(conn) = self.conns.get_mut(i) else {
                break;
            };
            if conn.writer.try_send(WriteItem::Noop(k)).is_err() {
                break;
            }
            self.use_clock += 1;
            conn.last_used = self.use_clock;
            self.pending_noops.pop_front();
        }
        if self.pending_noops.len() > MAX_PENDING_NOOPS {
            tracing::warn!(peer = %self.id, "socklnd: peer connections not draining; closing them");
            self.close_all(|| ConnEnd::WriteStalled);
            self.pending_noops.clear();
        }
    }

    /// Opens the missing connections of the set while messages wait.
    fn maybe_connect(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let Some(addr) = self.addr else {
            return;
        };
        if self.retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        if self.refusals >= MAX_REFUSALS {
            // Enough retries: make do with the set there is.
            return;
        }
        let cpp = usize::try_from(self.ni.cfg.effective_conns_per_peer()).unwrap_or(1);
        for (ctype, want) in [
            (ConnType::Control, 1),
            (ConnType::BulkIn, cpp),
            (ConnType::BulkOut, cpp),
        ] {
            let have = self.count(ctype)
                + self.reserved.get(&ctype).copied().unwrap_or(0)
                + self.connecting.values().filter(|t| **t == ctype).count();
            for _ in have..want {
                let cfg = &self.ni.cfg;
                let (me, inc, peer) = (self.ni.me, cfg.incarnation, self.id);
                let (version, limit) = (self.version, cfg.timeout);
                let task = self.connects.spawn(async move {
                    let r = handshake::connect(me, inc, peer, addr, ctype, version, limit).await;
                    (ctype, r)
                });
                self.connecting.insert(task.id(), ctype);
            }
        }
    }

    fn on_connect_done(&mut self, (ctype, result): ConnectResult) {
        let now = Instant::now();
        match result {
            Ok(est) => {
                let record = (est.reply.src_incarnation, est.version);
                if self.record.is_some_and(|r| r != record) {
                    tracing::info!(peer = %self.id, "socklnd: peer restarted; closing its connections");
                    self.close_all(|| ConnEnd::Local);
                    self.record = None;
                    return;
                }
                self.record = Some(record);
                self.version = est.version;
                self.add_conn(est.stream, est.ctype, est.version, est.order);
            }
            Err(ConnectError::Refused) => {
                self.ni.closes.count(CloseReason::HandshakeRefused);
                tracing::debug!(peer = %self.id, ?ctype, reason = ?CloseReason::HandshakeRefused, "socklnd: connection refused by the peer");
                // Lost a race or a duplicate: one retry round per min_reconnect, however
                // many connections of the round were refused.
                if self.retry_at.is_none_or(|t| t <= now) {
                    self.refusals += 1;
                    self.retry_at = Some(now + self.ni.cfg.min_reconnect);
                }
                if self.refusals >= MAX_REFUSALS && !self.has_every_type() {
                    self.fail_queue(TxFailure::HandshakeRefused, "peer refused the connection");
                    self.refusals = 0;
                    self.maybe_peer_down(
                        TxFailure::HandshakeRefused,
                        "peer refused the connection",
                    );
                }
            }
            Err(e) => {
                let reason = CloseReason::of_connect(&e);
                self.ni.closes.count(reason);
                tracing::info!(peer = %self.id, ?ctype, ?reason, "socklnd: connect failed: {e}");
                self.retry_at = Some(now + self.backoff);
                self.backoff = (self.backoff * 2).min(self.ni.cfg.max_reconnect);
                if self.conns.is_empty() {
                    self.fail_queue(e.failure(), &e.to_string());
                    self.maybe_peer_down(e.failure(), &e.to_string());
                }
            }
        }
    }

    fn add_conn(
        &mut self,
        stream: TcpStream,
        ctype: ConnType,
        version: ProtoVersion,
        order: ByteOrder,
    ) {
        let cfg = &self.ni.cfg;
        let id = self
            .ni
            .next_conn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A connection accepted on another CPT's thread moves to this peer's: its
        // readiness is then reported to the thread that reads and writes it.
        let stream = match stream.into_std().and_then(TcpStream::from_std) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(peer = %self.id, %e, "socklnd: connection lost moving to its CPT");
                return;
            }
        };
        let _ = stream.set_nodelay(!cfg.nagle);
        let (idle, interval, count) = TCP_KEEPALIVE;
        let ka = socket2::TcpKeepalive::new()
            .with_time(idle)
            .with_interval(interval)
            .with_retries(count);
        let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&ka);
        let (r, w) = stream.into_split();
        let peer_credits = usize::try_from(cfg.effective_peer_credits()).unwrap_or(1);
        let (wtx, wrx) = mpsc::channel(peer_credits + NOOP_SLACK);
        let progress = Arc::new(WriterProgress::default());
        let form = version.header_form();
        let writer = Writer {
            conn: id,
            form,
            timeout: cfg.timeout,
            peer: self.cmd_tx.clone(),
            progress: progress.clone(),
        };
        let reader = Reader {
            conn: id,
            handler: self.ni.handler.clone(),
            ni: self.ni.me.nid,
            from: self.id,
            version,
            order,
            timeout: cfg.timeout,
            peer: self.cmd_tx.clone(),
            alive: self.alive.clone(),
        };
        let wa = self.tasks.spawn(writer.run(w, wrx));
        let ra = self.tasks.spawn(reader.run(r));
        self.alive.touch();
        self.refusals = 0;
        self.backoff = self.ni.cfg.min_reconnect;
        self.retry_at = None;
        self.down_reported = false;
        tracing::debug!(peer = %self.id, ?ctype, ?version, conn = id, "socklnd: connection up");
        self.conns.push(Conn {
            id,
            ctype,
            version,
            writer: wtx,
            progress,
            tasks: [wa, ra],
            queued_bytes: 0,
            last_used: 0,
        });
    }

    fn on_cmd(&mut self, cmd: PeerCmd) {
        match cmd {
            PeerCmd::Offer {
                hello,
                loopback,
                reply,
            } => {
                let mine = hello.ctype.invert();
                let ctx = PassiveContext {
                    my_nid: self.ni.me.nid,
                    connecting: !self.connects.is_empty(),
                    record: self.record,
                    same_type: self.count(mine) + self.reserved.get(&mine).copied().unwrap_or(0),
                    max_per_type: usize::try_from(self.ni.cfg.effective_conns_per_peer())
                        .unwrap_or(1),
                    loopback,
                };
                let decision = handshake::decide_passive(&hello, &ctx);
                match decision {
                    PassiveDecision::RefuseStale => {
                        tracing::info!(peer = %self.id, "socklnd: peer restarted; closing its connections");
                        self.close_all(|| ConnEnd::Local);
                        self.record = None;
                    }
                    PassiveDecision::Accept { ctype } => {
                        *self.reserved.entry(ctype).or_default() += 1;
                    }
                    PassiveDecision::RefuseRace | PassiveDecision::RefuseDuplicate => {}
                }
                if reply.send(decision).is_err() {
                    self.release(decision.reply_ctype());
                }
            }
            PeerCmd::Attach {
                stream,
                hello,
                order,
                ctype,
            } => {
                self.release(ctype);
                let record = (hello.src_incarnation, hello.version);
                if self.record.is_some_and(|r| r != record) {
                    return;
                }
                self.record = Some(record);
                self.add_conn(stream, ctype, hello.version, order);
            }
            PeerCmd::Withdraw { ctype } => self.release(ctype),
            PeerCmd::Sent { conn, seqs } => {
                for seq in seqs {
                    if let Some(inf) = self.inflight.remove(&seq) {
                        self.credits.give_back();
                        if let Some(c) = self.conns.iter_mut().find(|c| c.id == conn) {
                            c.queued_bytes = c.queued_bytes.saturating_sub(inf.frame_len);
                        }
                        self.complete(&inf.tx, None);
                    }
                }
            }
            PeerCmd::Closed { conn, end } => self.close_with_siblings(conn, &end),
            PeerCmd::ZcAck { cookie } => {
                self.pending_noops.push_back(KsockHeader::zc_ack(cookie));
                self.flush_noops();
            }
            PeerCmd::Stats { reply } => {
                let _ = reply.send(PeerStats {
                    peer: self.id,
                    conns: self.conns.iter().map(|c| (c.ctype, c.version)).collect(),
                    credits: self.credits.credits(self.queue.len()),
                    min_credits: self.credits.min_seen(),
                    queued: self.queue.len(),
                    in_flight: self.inflight.len(),
                });
            }
        }
    }

    fn release(&mut self, ctype: ConnType) {
        if let Some(n) = self.reserved.get_mut(&ctype) {
            *n = n.saturating_sub(1);
        }
    }

    fn keepalive_due(&self) -> Option<Instant> {
        let ka = self.ni.cfg.keepalive?;
        if !self.conns.iter().any(|c| c.version >= ProtoVersion::V3) {
            return None;
        }
        let mut due = self.alive.get() + ka;
        if let Some(last) = self.last_keepalive {
            let retry = self.ni.cfg.keepalive_retry.max(MIN_KEEPALIVE_RETRY);
            due = due.max(last + retry);
        }
        Some(due)
    }

    fn next_deadline(&self) -> Option<Instant> {
        let timeout = self.ni.cfg.timeout;
        let expiry = self.queue.iter().map(|q| q.since + timeout).min();
        // A retry time already passed was acted on by maybe_connect (or is held back by
        // the refusal rule): only a future one wakes the task.
        let now = Instant::now();
        let retry = self.retry_at.filter(|t| !self.queue.is_empty() && *t > now);
        [expiry, retry, self.keepalive_due()]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        let timeout = self.ni.cfg.timeout;
        if self.queue.iter().any(|q| q.since + timeout <= now) {
            let (expired, kept): (VecDeque<Queued>, VecDeque<Queued>) =
                std::mem::take(&mut self.queue)
                    .into_iter()
                    .partition(|q| q.since + timeout <= now);
            self.queue = kept;
            let cands = self.candidates();
            for q in expired {
                let frame_len = lnet_frame_len(HeaderForm::Nid4, q.tx.payload.len());
                let carried =
                    placement::choose(&cands, Traffic::Lnet { frame_len }, self.ni.cfg.min_bulk)
                        .is_some();
                let failure = if carried {
                    TxFailure::QueuedTooLong
                } else {
                    TxFailure::WaitedForConnection
                };
                self.complete(&q.tx, Some((failure, format!("queued for {timeout:?}"))));
            }
        }
        if self.keepalive_due().is_some_and(|due| due <= now) {
            self.last_keepalive = Some(now);
            let cands = self.candidates();
            let chosen = placement::choose(&cands, Traffic::NoopNonBlocking, self.ni.cfg.min_bulk);
            if let Some(conn) = chosen.and_then(|i| self.conns.get_mut(i)) {
                // Skipped if that connection already has something queued.
                if conn.queued_bytes == 0 && conn.version >= ProtoVersion::V3 {
                    let _ = conn
                        .writer
                        .try_send(WriteItem::Noop(KsockHeader::keepalive()));
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
