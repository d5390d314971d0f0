//! One peer of a socklnd NI: its connection set, driven by one task, and its send side
//! ([`tx`]), shared with the NI's senders and the peer's writers.
//!
//! Messages wait in a bounded queue until a connection that may carry them
//! ([`super::placement`]) has room on its writer queue, and go to that writer from
//! whichever task made the room (socklnd counts no credits: the LNet layer does). The task opens connections (1 CONTROL,
//! then `conns_per_peer` BULK_IN and BULK_OUT) when messages wait and are missing,
//! registers or refuses incoming ones ([`super::handshake::decide_passive`]), queues
//! ZC-ACKs and keepalives as NOOPs, times out the queue and closes connections; every
//! accepted send is completed exactly once.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lnet::{HeaderForm, ProcessId};
use rustc_hash::FxHashMap;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};
use tokio::time::Instant;

mod close;
pub(crate) mod cmd;
pub(crate) mod recent;
pub(crate) mod tx;

use super::config::SockLndConfig;
use super::conn::end::ConnEnd;
use super::conn::{LastAlive, Reader, WriteItem, Writer, WriterParts, WriterProgress};
use super::handshake::{self, ConnectError, Established, PassiveContext, PassiveDecision};
use super::placement::{self, Candidate, Traffic};
use super::stats::{CloseCounters, CloseReason, PeerStats, WriteCounters};
use super::status::TxFailure;
use super::tunables::LiveTunables;
use super::wire::{lnet_frame_len, ByteOrder, ConnType, KsockHeader, ProtoVersion};
use crate::lnd::LndHandler;
use cmd::PeerCmd;
use tx::{Done, PeerTx, Queued};

/// After this many HELLO refusals in a row the peer stops opening connections if it has
/// any (`SOCKNAL_MAX_RETRIES`).
const MAX_REFUSALS: u32 = 3;
/// Least time between two keepalives whatever the configuration says.
const MIN_KEEPALIVE_RETRY: Duration = Duration::from_millis(10);
/// Commands a peer task can have waiting.
const CMD_QUEUE: usize = 256;
/// NOOPs (ZC-ACKs) waiting for room on a writer before the peer's connections are closed
/// as not draining.
const MAX_PENDING_NOOPS: usize = 1024;
/// TCP keepalive: idle time, interval, probes (socklnd `keepalive_idle/_intvl/_count`).
const TCP_KEEPALIVE: (Duration, Duration, u32) =
    (Duration::from_secs(30), Duration::from_secs(5), 5);

/// What the tasks of one NI share.
pub(crate) struct NiShared<H> {
    /// This NI's instance number: unique in the process, whatever its NID.
    pub(crate) instance: u64,
    /// The configuration the NI started with; its `timeout` and `conns_per_peer` are read
    /// from `tunables`, which change while the NI runs.
    pub(crate) cfg: SockLndConfig,
    pub(crate) tunables: Arc<LiveTunables>,
    pub(crate) me: ProcessId,
    pub(crate) handler: Arc<H>,
    pub(crate) next_conn: AtomicU64,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) peers: Mutex<Peers>,
    pub(crate) closes: CloseCounters,
    /// Rounds of writes by who wrote them, shared with the connections' writers.
    pub(crate) writes: Arc<WriteCounters>,
}

/// The peers of an NI.
#[derive(Default)]
pub(crate) struct Peers {
    pub(crate) map: FxHashMap<ProcessId, PeerEntry>,
    pub(crate) stopped: bool,
}

/// How the NI reaches a peer.
pub(crate) struct PeerEntry {
    pub(crate) cmd: mpsc::Sender<PeerCmd>,
    pub(crate) tx: Arc<PeerTx>,
    pub(crate) task: JoinHandle<()>,
}

/// How a sender or the acceptor reaches a peer.
#[derive(Clone)]
pub(crate) struct PeerHandle {
    pub(crate) cmd: mpsc::Sender<PeerCmd>,
    pub(crate) tx: Arc<PeerTx>,
}

impl<H: LndHandler> NiShared<H> {
    /// The send side of peer `id`, its task started if there is none; `None` once the NI
    /// is stopping.
    pub(crate) fn peer_tx(self: &Arc<Self>, id: ProcessId) -> Option<Arc<PeerTx>> {
        {
            let peers = self.peers.lock().ok()?;
            if peers.stopped {
                return None;
            }
            if let Some(e) = peers.map.get(&id) {
                return Some(e.tx.clone());
            }
        }
        self.peer(id).map(|handle| handle.tx)
    }

    /// The peer task for `id`, started if there is none; `None` once the NI is stopping.
    pub(crate) fn peer(self: &Arc<Self>, id: ProcessId) -> Option<PeerHandle> {
        let mut peers = self.peers.lock().ok()?;
        if peers.stopped {
            return None;
        }
        if let Some(e) = peers.map.get(&id) {
            return Some(PeerHandle {
                cmd: e.cmd.clone(),
                tx: e.tx.clone(),
            });
        }
        let (cmd_tx, cmd_rx) = mpsc::channel(CMD_QUEUE);
        let tx = Arc::new(PeerTx::new(self.cfg.min_bulk, self.cfg.peer_queue));
        let task = PeerTask::new(self.clone(), id, cmd_tx.clone(), tx.clone());
        let run = task.run(cmd_rx, self.stop.clone());
        let join = match self.cfg.cpts.of(&id.nid) {
            Some(cpt) => cpt.spawn(run),
            None => tokio::spawn(run),
        };
        peers.map.insert(
            id,
            PeerEntry {
                cmd: cmd_tx.clone(),
                tx: tx.clone(),
                task: join,
            },
        );
        Some(PeerHandle { cmd: cmd_tx, tx })
    }
}

/// An established connection as the peer task keeps it (its writer is in the send side).
struct Conn {
    id: u64,
    ctype: ConnType,
    version: ProtoVersion,
    progress: Arc<WriterProgress>,
    tasks: [AbortHandle; 2],
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
    tx: Arc<PeerTx>,
    record: Option<(u64, ProtoVersion)>,
    version: ProtoVersion,
    backoff: Duration,
    retry_at: Option<Instant>,
    refusals: u32,
    alive: Arc<LastAlive>,
    last_keepalive: Option<Instant>,
    /// BULK_IN and BULK_OUT connections of each this peer keeps: the NI's
    /// `conns_per_peer` when the peer was first heard of, as the kernel keeps it in the
    /// peer's connection record.
    max_conns: usize,
    /// The upper layer was told the peer is down, and no connection came up since.
    down_reported: bool,
}

impl<H: LndHandler> PeerTask<H> {
    fn new(
        ni: Arc<NiShared<H>>,
        id: ProcessId,
        cmd_tx: mpsc::Sender<PeerCmd>,
        tx: Arc<PeerTx>,
    ) -> Self {
        let addr = id
            .nid
            .addr_u32()
            .map(|a| SocketAddr::new(std::net::Ipv4Addr::from(a).into(), ni.cfg.peer_port));
        let version = ni.cfg.version;
        let backoff = ni.cfg.min_reconnect;
        let max_conns = usize::try_from(ni.tunables.effective_conns_per_peer()).unwrap_or(1);
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
            tx,
            record: None,
            version,
            backoff,
            retry_at: None,
            refusals: 0,
            alive: Arc::new(LastAlive::new(Instant::now())),
            last_keepalive: None,
            max_conns,
            down_reported: false,
        }
    }

    async fn run(mut self, mut cmd_rx: mpsc::Receiver<PeerCmd>, mut stop: watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                break;
            }
            self.dispatch();
            self.maybe_connect();
            let deadline = self.next_deadline();
            let shared = self.tx.clone();
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
                // A sender queued behind nothing.
                () = shared.kick.notified() => {}
                _ = sleep_until(deadline), if deadline.is_some() => self.on_timer(),
            }
        }
        self.shutdown();
    }

    fn count(&self, ctype: ConnType) -> usize {
        self.conns.iter().filter(|c| c.ctype == ctype).count()
    }

    fn has_every_type(&self) -> bool {
        [ConnType::Control, ConnType::BulkIn, ConnType::BulkOut]
            .into_iter()
            .all(|t| self.count(t) > 0)
    }

    fn complete_all(&self, done: Done) {
        tx::complete_all(&*self.ni.handler, self.ni.me.nid, self.id, done);
    }

    fn fail_queue(&mut self, failure: TxFailure, why: &str) {
        let queued = self.tx.lock().take_queue();
        let done = queued
            .into_iter()
            .map(|q| (q.tx, Some((failure, why.to_owned()))))
            .collect();
        self.complete_all(done);
    }

    /// Moves queued messages onto connections while their writers have room.
    fn dispatch(&mut self) {
        let mut st = self.tx.lock();
        self.tx.dispatch_in_task(&mut st);
    }

    /// Queues waiting NOOPs where NOOPs go; closes the connections if too many wait.
    fn flush_noops(&mut self) {
        let overflow = {
            let mut st = self.tx.lock();
            st.flush_noops(self.ni.cfg.min_bulk);
            let overflow = st.pending_noops.len() > MAX_PENDING_NOOPS;
            if overflow {
                st.pending_noops.clear();
            }
            overflow
        };
        if overflow {
            tracing::warn!(peer = %self.id, "socklnd: peer connections not draining; closing them");
            self.close_all(|| ConnEnd::WriteStalled);
        }
    }

    /// Opens the missing connections of the set while messages wait.
    fn maybe_connect(&mut self) {
        if self.tx.lock().queue.is_empty() {
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
        let cpp = self.max_conns;
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
                let (version, limit) = (self.version, self.ni.tunables.timeout());
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
        let progress = Arc::new(WriterProgress::default());
        let form = version.header_form();
        let writer = Writer::new(
            WriterParts {
                conn: id,
                form,
                tunables: self.ni.tunables.clone(),
                handler: self.ni.handler.clone(),
                nid: self.ni.me.nid,
                peer: self.cmd_tx.clone(),
                tx: Arc::downgrade(&self.tx),
                progress: progress.clone(),
                capacity: peer_credits + tx::NOOP_ROOM,
                counts: self.ni.writes.clone(),
            },
            w,
        );
        let reader = Reader {
            conn: id,
            handler: self.ni.handler.clone(),
            ni: self.ni.me.nid,
            from: self.id,
            version,
            order,
            tunables: self.ni.tunables.clone(),
            peer: self.cmd_tx.clone(),
            alive: self.alive.clone(),
        };
        let wa = self.tasks.spawn(writer.clone().run());
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
            progress,
            tasks: [wa, ra],
        });
        let cand = Candidate {
            ctype,
            version,
            queued_bytes: 0,
            last_used: 0,
        };
        self.tx.lock().add_conn(id, writer, cand);
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
                    max_per_type: self.max_conns,
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
            PeerCmd::Closed { conn, end } => self.close_with_siblings(conn, &end),
            PeerCmd::ZcAck { cookie } => {
                self.tx
                    .lock()
                    .pending_noops
                    .push_back(KsockHeader::zc_ack(cookie));
                self.flush_noops();
            }
            PeerCmd::Stats { reply } => {
                let st = self.tx.lock();
                let stats = PeerStats {
                    peer: self.id,
                    conns: self.conns.iter().map(|c| (c.ctype, c.version)).collect(),
                    queued: st.queue.len(),
                    in_flight: st.in_flight(),
                };
                drop(st);
                let _ = reply.send(stats);
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
        let timeout = self.ni.tunables.timeout();
        let (expiry, waiting) = {
            let st = self.tx.lock();
            // The queue is in arrival order: its head expires first.
            (
                st.queue.front().map(|q| q.since + timeout),
                !st.queue.is_empty(),
            )
        };
        // A retry time already passed was acted on by maybe_connect (or is held back by
        // the refusal rule): only a future one wakes the task.
        let now = Instant::now();
        let retry = self.retry_at.filter(|t| waiting && *t > now);
        [expiry, retry, self.keepalive_due()]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        let timeout = self.ni.tunables.timeout();
        let min_bulk = self.ni.cfg.min_bulk;
        let mut done = Done::new();
        {
            let mut st = self.tx.lock();
            if st.queue.iter().any(|q| q.since + timeout <= now) {
                let (expired, kept): (VecDeque<Queued>, VecDeque<Queued>) = st
                    .take_queue()
                    .into_iter()
                    .partition(|q| q.since + timeout <= now);
                st.queue = kept;
                for q in expired {
                    let frame_len = lnet_frame_len(HeaderForm::Nid4, q.tx.payload.len());
                    let carried =
                        placement::choose(&st.cands, Traffic::Lnet { frame_len }, min_bulk)
                            .is_some();
                    let failure = if carried {
                        TxFailure::QueuedTooLong
                    } else {
                        TxFailure::WaitedForConnection
                    };
                    done.push((q.tx, Some((failure, format!("queued for {timeout:?}")))));
                }
            }
            if self.keepalive_due().is_some_and(|due| due <= now) {
                self.last_keepalive = Some(now);
                let chosen = placement::choose(&st.cands, Traffic::NoopNonBlocking, min_bulk);
                // Skipped if that connection already has something queued.
                let idle = chosen
                    .and_then(|i| st.cands.get(i))
                    .filter(|c| c.queued_bytes == 0 && c.version >= ProtoVersion::V3);
                if let (Some(i), Some(_)) = (chosen, idle) {
                    st.try_write(i, WriteItem::Noop(KsockHeader::keepalive()));
                }
            }
        }
        self.complete_all(done);
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
