//! A socklnd NI: the acceptor and the peer tasks behind the [`Lnd`] trait.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lnet::acceptor::RESERVED_PORTS;
use lnet::{Nid, ProcessId};
use rustc_hash::FxHashMap;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::config::{ConfigError, SockLndConfig};
use super::handshake::{self, HandshakeError, PassiveDecision};
use super::peer::cmd::PeerCmd;
use super::peer::recent;
use super::peer::tx::{PeerTx, Pushed};
use super::peer::{NiShared, Peers};
use super::stats::{CloseCounters, CloseReason, NiStats, PeerStats, WriteCounters};
use super::tunables::LiveTunables;
use crate::counters::LndCounters;
use crate::lnd::{Lnd, LndHandler, SendError, TryRefused, TrySend, TxRequest};

/// Instance numbers of the NIs started in this process.
static NI_INSTANCES: AtomicU64 = AtomicU64::new(1);

/// Pause after a failed `accept` (e.g. out of file descriptors) before the next one.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Why a socklnd NI did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is not usable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The acceptor could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One socklnd NI.
pub struct SockLnd<H: LndHandler> {
    shared: Arc<NiShared<H>>,
    stop_tx: watch::Sender<bool>,
    listener: Option<JoinHandle<()>>,
    local_addr: Option<SocketAddr>,
}

impl<H: LndHandler> std::fmt::Debug for SockLnd<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SockLnd")
            .field("nid", &self.shared.me.nid)
            .field("listen", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl<H: LndHandler> SockLnd<H> {
    /// The address the acceptor listens on, if it listens.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// The configuration the NI started with (its `timeout` and `conns_per_peer` may
    /// have changed since: see [`SockLnd::tunables`]).
    pub fn config(&self) -> &SockLndConfig {
        &self.shared.cfg
    }

    /// The NI's live `timeout` and `conns_per_peer`, which may be changed while it runs.
    pub fn tunables(&self) -> Arc<LiveTunables> {
        Arc::clone(&self.shared.tunables)
    }

    /// A snapshot of the NI's counters: connections and connection attempts ended, by
    /// reason.
    pub fn stats(&self) -> NiStats {
        let mut stats = self.shared.closes.snapshot();
        stats.writes = self.shared.writes.snapshot();
        stats
    }

    /// A snapshot of peer `nid` (pid 12345), if the NI has heard of it.
    pub async fn peer_stats(&self, nid: Nid) -> Option<PeerStats> {
        let cmd = {
            let peers = self.shared.peers.lock().ok()?;
            peers.map.get(&ProcessId::lustre(nid))?.cmd.clone()
        };
        let (reply, rx) = oneshot::channel();
        cmd.send(PeerCmd::Stats { reply }).await.ok()?;
        rx.await.ok()
    }
}

fn listen(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The send side of a socklnd NI apart from the NI ([`Lnd::sender`]): it takes messages as
/// [`Lnd::try_send`] does while the NI runs, and refuses them as stopped once the NI is
/// stopping (its peer table and each peer's send side say so).
struct SockSender<H: LndHandler>(Arc<NiShared<H>>);

impl<H: LndHandler> TrySend for SockSender<H> {
    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused> {
        self.0.try_send(tx)
    }
}

impl<H: LndHandler> NiShared<H> {
    /// Finds (or starts) peer `peer`'s send side: one this thread sent to lately without
    /// the NI's peer table ([`recent`]).
    fn send_side(self: &Arc<Self>, peer: ProcessId) -> Result<Arc<PeerTx>, SendError> {
        if let Some(handle) = recent::find(self.instance, &peer) {
            return Ok(handle);
        }
        let ni = self.me.nid;
        let handle = self.peer_tx(peer).ok_or(SendError::Stopped { ni })?;
        recent::keep(self.instance, peer, Arc::clone(&handle));
        Ok(handle)
    }

    /// Refuses `tx` if this NI cannot send it.
    fn check(&self, tx: &TxRequest) -> Result<(), SendError> {
        let ni = self.me.nid;
        let peer = tx.peer;
        if peer.net != ni.net {
            return Err(SendError::WrongNet { peer, ni });
        }
        if peer == ni {
            return Err(SendError::SelfSend { peer });
        }
        if peer.addr_u32().is_none() {
            return Err(SendError::Unreachable { peer });
        }
        let bad = |source| SendError::BadHeader { peer, source };
        SendError::check_payload_length(tx)?;
        tx.header.check_lnet().map_err(bad)?;
        // Refused now if the header cannot go on the wire.
        tx.header.check_nid4().map_err(bad)
    }

    /// [`Lnd::try_send`].
    fn try_send(self: &Arc<Self>, tx: TxRequest) -> Result<(), TryRefused> {
        self.check(&tx).map_err(TryRefused::Refused)?;
        let ni = self.me.nid;
        let answer = |pushed| match pushed {
            Pushed::Taken => Ok(()),
            Pushed::Full(tx) => Err(TryRefused::WouldWait(Box::new(tx))),
            Pushed::Stopped(_) => Err(TryRefused::Refused(SendError::Stopped { ni })),
        };
        let peer = ProcessId::lustre(tx.peer);
        // A kept send side is borrowed where it is kept, and the send is made there; the
        // send comes back only when the thread does not keep it.
        match recent::with(self.instance, &peer, tx, |kept, tx| {
            answer(kept.try_send(tx))
        }) {
            Ok(answer) => answer,
            Err(tx) => {
                let handle = self.send_side(peer).map_err(TryRefused::Refused)?;
                answer(handle.try_send(tx))
            }
        }
    }
}

impl<H: LndHandler> Lnd for SockLnd<H> {
    type Config = SockLndConfig;
    type Handler = H;
    type StartError = StartError;

    async fn start(config: SockLndConfig, handler: Arc<H>) -> Result<Self, StartError> {
        config.validate()?;
        let listener = match config.listen {
            Some(addr) => Some(
                listen(addr, config.backlog)
                    .map_err(|source| StartError::Listen { addr, source })?,
            ),
            None => None,
        };
        let local_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let (stop_tx, stop_rx) = watch::channel(false);
        let shared = Arc::new(NiShared {
            instance: NI_INSTANCES.fetch_add(1, Ordering::Relaxed),
            me: ProcessId::lustre(config.nid),
            tunables: Arc::new(LiveTunables::new(&config)),
            cfg: config,
            handler,
            next_conn: AtomicU64::new(1),
            stop: stop_rx,
            peers: Mutex::new(Peers::default()),
            closes: CloseCounters::default(),
            writes: Arc::new(WriteCounters::default()),
        });
        let listener = listener.map(|l| tokio::spawn(accept_loop(shared.clone(), l)));
        tracing::info!(nid = %shared.me.nid, listen = ?local_addr, "socklnd: NI up");
        Ok(SockLnd {
            shared,
            stop_tx,
            listener,
            local_addr,
        })
    }

    fn nid(&self) -> Nid {
        self.shared.me.nid
    }

    async fn send(&self, tx: TxRequest) -> Result<(), SendError> {
        self.shared.check(&tx)?;
        let handle = self.shared.send_side(ProcessId::lustre(tx.peer))?;
        let ni = self.shared.me.nid;
        handle.send(tx).await.map_err(|_| SendError::Stopped { ni })
    }

    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused> {
        self.shared.try_send(tx)
    }

    fn sender(&self) -> Option<Arc<dyn TrySend>> {
        Some(Arc::new(SockSender(Arc::clone(&self.shared))))
    }

    async fn stop(mut self) {
        let _ = self.stop_tx.send(true);
        if let Some(l) = self.listener.take() {
            l.abort();
            let _ = l.await;
        }
        let tasks: Vec<JoinHandle<()>> = match self.shared.peers.lock() {
            Ok(mut peers) => {
                peers.stopped = true;
                std::mem::take(&mut peers.map)
                    .into_values()
                    .map(|e| e.task)
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        for t in tasks {
            let _ = t.await;
        }
        tracing::info!(nid = %self.shared.me.nid, "socklnd: NI down");
    }

    async fn counters(&self) -> Option<LndCounters> {
        Some(LndCounters::Socklnd(self.stats()))
    }
}

impl<H: LndHandler> Drop for SockLnd<H> {
    fn drop(&mut self) {
        let _ = self.stop_tx.send(true);
        if let Some(l) = self.listener.take() {
            l.abort();
        }
        if let Ok(mut peers) = self.shared.peers.lock() {
            peers.stopped = true;
            peers.map = FxHashMap::default();
        }
    }
}

/// Incoming handshakes in progress, by source address, kept by the accept loop alone.
#[derive(Debug, Default)]
struct InFlight {
    /// Handshakes in progress per address.
    per_addr: HashMap<IpAddr, usize>,
    /// The address of each handshake task.
    tasks: HashMap<tokio::task::Id, IpAddr>,
    /// Connections closed by the limit per address since its last log line.
    refused: HashMap<IpAddr, u64>,
}

/// Connections refused by the per-address limit between two log lines for that address.
const LIMIT_LOG_EVERY: u64 = 100;

impl InFlight {
    /// Whether one more handshake from `ip` is under `limit`.
    fn admits(&self, ip: IpAddr, limit: usize) -> bool {
        self.per_addr.get(&ip).copied().unwrap_or(0) < limit
    }

    fn started(&mut self, id: tokio::task::Id, ip: IpAddr) {
        *self.per_addr.entry(ip).or_default() += 1;
        self.tasks.insert(id, ip);
    }

    fn ended(&mut self, id: tokio::task::Id) {
        let Some(ip) = self.tasks.remove(&id) else {
            return;
        };
        if let Some(n) = self.per_addr.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_addr.remove(&ip);
                self.refused.remove(&ip);
            }
        }
    }

    /// Counts a refusal; whether it is the one to log (the first, then every
    /// [`LIMIT_LOG_EVERY`]th, per address).
    fn refused(&mut self, ip: IpAddr) -> Option<u64> {
        let n = self.refused.entry(ip).or_default();
        *n += 1;
        (*n % LIMIT_LOG_EVERY == 1).then_some(*n)
    }
}

async fn accept_loop<H: LndHandler>(shared: Arc<NiShared<H>>, listener: TcpListener) {
    let mut handshakes = JoinSet::new();
    let mut in_flight = InFlight::default();
    let limit = shared.cfg.max_handshakes_per_addr;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    if !in_flight.admits(from.ip(), limit) {
                        drop(stream);
                        shared.closes.count(CloseReason::HandshakeLimit);
                        if let Some(n) = in_flight.refused(from.ip()) {
                            tracing::warn!(nid = %shared.me.nid, %from, limit, refused = n,
                                "socklnd: incoming connection closed: too many handshakes in progress from its address");
                        }
                        continue;
                    }
                    let shared = shared.clone();
                    let task = handshakes.spawn(async move {
                        if let Err(e) = serve_passive(&shared, stream, from).await {
                            let reason = e.reason();
                            shared.closes.count(reason);
                            tracing::warn!(nid = %shared.me.nid, %from, ?reason, "socklnd: incoming connection refused: {e}");
                        }
                    });
                    in_flight.started(task.id(), from.ip());
                }
                Err(e) => {
                    tracing::warn!(nid = %shared.me.nid, "socklnd: accept failed: {e}");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
            Some(done) = handshakes.join_next_with_id(), if !handshakes.is_empty() => {
                match done {
                    Ok((id, ())) => in_flight.ended(id),
                    Err(e) => in_flight.ended(e.id()),
                }
            }
        }
    }
}

/// Why an incoming connection was not registered.
#[derive(Debug, thiserror::Error)]
enum PassiveError {
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error("{peer} refused: {decision:?}")]
    Refused {
        peer: ProcessId,
        decision: PassiveDecision,
    },
    #[error("NI stopping")]
    Stopping,
    #[error("the handshake did not finish within {after:?}")]
    Deadline { after: Duration },
}

impl PassiveError {
    fn reason(&self) -> CloseReason {
        match self {
            PassiveError::Handshake(e) => CloseReason::of_handshake(e),
            PassiveError::Refused { .. } => CloseReason::HandshakeRefused,
            PassiveError::Stopping => CloseReason::Local,
            PassiveError::Deadline { .. } => CloseReason::HandshakeTimeout,
        }
    }
}

async fn serve_passive<H: LndHandler>(
    shared: &Arc<NiShared<H>>,
    mut stream: TcpStream,
    from: SocketAddr,
) -> Result<(), PassiveError> {
    if from.port() > *RESERVED_PORTS.end() {
        return Err(HandshakeError::UnreservedPort { port: from.port() }.into());
    }
    let cfg = &shared.cfg;
    let limit = cfg.accept_timeout;
    // Each read within `accept_timeout`, and all of them within `handshake_timeout`: a
    // peer that drips a byte now and then is cut off too.
    let (hello, order) = tokio::time::timeout(
        cfg.handshake_timeout,
        handshake::read_request(&mut stream, shared.me, cfg.incarnation, limit),
    )
    .await
    .map_err(|_| PassiveError::Deadline {
        after: cfg.handshake_timeout,
    })??;
    let peer_id = hello.src();
    let peer = shared.peer(peer_id).ok_or(PassiveError::Stopping)?;
    let (reply_tx, reply_rx) = oneshot::channel();
    peer.cmd
        .send(PeerCmd::Offer {
            hello: hello.clone(),
            // The exemption is for a node connected to itself (peer address = local
            // address); two NIs on different 127.x addresses follow the rule.
            loopback: stream.local_addr().is_ok_and(|l| l.ip() == from.ip()),
            reply: reply_tx,
        })
        .await
        .map_err(|_| PassiveError::Stopping)?;
    let decision = reply_rx.await.map_err(|_| PassiveError::Stopping)?;
    let reply = hello.reply(shared.me, cfg.incarnation, decision.reply_ctype());
    let written = match reply.encode() {
        Ok(bytes) => handshake::write_within(&mut stream, "HELLO reply", limit, &bytes).await,
        Err(e) => Err(HandshakeError::Hello(e)),
    };
    match (decision, written) {
        (PassiveDecision::Accept { ctype }, Ok(())) => {
            let attach = PeerCmd::Attach {
                stream,
                hello,
                order,
                ctype,
            };
            peer.cmd
                .send(attach)
                .await
                .map_err(|_| PassiveError::Stopping)?;
            Ok(())
        }
        (PassiveDecision::Accept { ctype }, Err(e)) => {
            let _ = peer.cmd.send(PeerCmd::Withdraw { ctype }).await;
            Err(e.into())
        }
        (decision, _) => Err(PassiveError::Refused {
            peer: peer_id,
            decision,
        }),
    }
}
