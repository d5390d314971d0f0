//! An in-process test fabric: an LND whose NIs live in one process and pass LNet messages
//! to each other through bounded channels.
//!
//! It exists so that everything above the LND (health, recovery, resend, discovery,
//! routing) can be tested fast and deterministically under a paused tokio clock, with
//! faults injected exactly where a test wants them. It is never a substitute for the real
//! LNDs' own tests.
//!
//! * A [`Fabric`] is the wire: every [`FabricLnd`] started on it registers its NID. Several
//!   NIs on several nets can share one fabric; a send reaches the NI whose NID is the
//!   [`TxRequest::peer`].
//! * Delivery is header first, as in the real LNDs: the receiving NI's task calls
//!   [`LndHandler::on_header`], and only when that returns [`RxDecision::Receive`] copies
//!   the payload into the caller's buffer and calls [`LndHandler::on_message`]. A message
//!   with no payload comes whole ([`LndHandler::on_whole_now`]), as over socklnd.
//! * Every accepted send is completed exactly once. OK means the message was put into the
//!   peer's receive queue.
//! * Link controls: a link between two NIDs can be taken down and up (while it is down
//!   every send across it fails with the status the test chose), an NI's port likewise,
//!   a link can be given a latency, and the next sends of a message type can lose their
//!   completion (delivered, then reported failed). A send to a NID that no NI on the
//!   fabric owns fails with [`HealthStatus::RemoteDropped`], like a refused connection.
//!   Fault injection rules (`lnetctl fault`) are not the fabric's: the LNet layer applies
//!   them above every LND ([`lnet::fault`]).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use lnet::health::HealthStatus;
use lnet::{MsgType, Net, Nid, ProcessId};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::lnd::{
    Lnd, LndHandler, RxDecision, RxHeader, RxMessage, SendError, Taken, TryRefused, TxCompletion,
    TxRequest,
};

/// Sends whose completion a link loses ([`Fabric::lose_completions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LostCompletions {
    msg_type: MsgType,
    status: HealthStatus,
    left: u32,
}

/// Why [`FabricLnd::start`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    /// Another NI on the fabric has this NID.
    #[error("NID {nid} is already on the fabric")]
    NidInUse {
        /// The NID.
        nid: Nid,
    },
    /// The NID is not usable for an NI (LNET_NID_ANY or the loopback net).
    #[error("NID {nid} cannot be an NI on the fabric")]
    BadNid {
        /// The NID.
        nid: Nid,
    },
}

/// Per-NI counters of what the fabric did to its sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FabricStats {
    /// Messages put into a peer's receive queue.
    pub delivered: u64,
    /// Sends completed with a failure status.
    pub failed: u64,
}

struct Frame {
    from: ProcessId,
    header: lnet::Header,
    payload: Bytes,
}

#[derive(Default)]
struct Inner {
    nis: HashMap<Nid, mpsc::Sender<Frame>>,
    lost: Vec<LostCompletions>,
    latency: HashMap<(Nid, Nid), Duration>,
    down_links: HashMap<(Nid, Nid), HealthStatus>,
    stats: HashMap<Nid, FabricStats>,
    down_nis: HashSet<Nid>,
}

/// The shared wire of an in-process fabric. Cheap to clone; clones are the same fabric.
#[derive(Clone, Default)]
pub struct Fabric {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        let mut nis: Vec<_> = inner.nis.keys().collect();
        nis.sort();
        f.debug_struct("Fabric").field("nis", &nis).finish()
    }
}

fn link_key(a: Nid, b: Nid) -> (Nid, Nid) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// What the fabric decided for one send.
enum Verdict {
    Deliver {
        delay: Option<Duration>,
        then: HealthStatus,
    },
    Fail(HealthStatus, String),
}

impl Fabric {
    /// An empty fabric.
    pub fn new() -> Fabric {
        Fabric::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the next `count` sends of `msg_type` (over any link) deliver their message
    /// and then complete with `status`: the receiver has it, the sender believes it
    /// failed (a lost completion).
    pub fn lose_completions(&self, msg_type: MsgType, status: HealthStatus, count: u32) {
        self.lock().lost.push(LostCompletions {
            msg_type,
            status,
            left: count,
        });
    }

    /// Gives the link between two NIDs (both directions) a latency: a send across it is
    /// delivered, and completes, that much later. `None` takes it away.
    pub fn set_link_latency(&self, a: Nid, b: Nid, latency: Option<Duration>) {
        let mut inner = self.lock();
        match latency {
            Some(d) => inner.latency.insert(link_key(a, b), d),
            None => inner.latency.remove(&link_key(a, b)),
        };
    }

    /// Takes the link between two NIDs down (both directions): sends across it fail with
    /// `status` until [`Fabric::link_up`].
    pub fn link_down(&self, a: Nid, b: Nid, status: HealthStatus) {
        self.lock().down_links.insert(link_key(a, b), status);
    }

    /// Brings the link between two NIDs back up.
    pub fn link_up(&self, a: Nid, b: Nid) {
        self.lock().down_links.remove(&link_key(a, b));
    }

    /// Takes an NI's port down: every send from or to it fails with
    /// [`HealthStatus::LocalDropped`] (from it) or [`HealthStatus::RemoteDropped`] (to it)
    /// until [`Fabric::ni_up`].
    pub fn ni_down(&self, nid: Nid) {
        self.lock().down_nis.insert(nid);
    }

    /// Brings an NI's port back up.
    pub fn ni_up(&self, nid: Nid) {
        self.lock().down_nis.remove(&nid);
    }

    /// The NIDs of the NIs started on the fabric, sorted.
    pub fn nids(&self) -> Vec<Nid> {
        let mut nids: Vec<Nid> = self.lock().nis.keys().copied().collect();
        nids.sort();
        nids
    }

    /// What the fabric did to the sends of one NI so far.
    pub fn stats(&self, nid: Nid) -> FabricStats {
        self.lock().stats.get(&nid).copied().unwrap_or_default()
    }

    fn count(&self, nid: Nid, f: impl FnOnce(&mut FabricStats)) {
        f(self.lock().stats.entry(nid).or_default());
    }

    fn verdict(&self, ni: Nid, tx: &TxRequest) -> Verdict {
        let mut inner = self.lock();
        if inner.down_nis.contains(&ni) {
            return Verdict::Fail(HealthStatus::LocalDropped, format!("NI {ni} is down"));
        }
        if inner.down_nis.contains(&tx.peer) {
            return Verdict::Fail(
                HealthStatus::RemoteDropped,
                format!("peer NI {} is down", tx.peer),
            );
        }
        if let Some(status) = inner.down_links.get(&link_key(ni, tx.peer)) {
            return Verdict::Fail(*status, format!("link {ni} <-> {} is down", tx.peer));
        }
        if !inner.nis.contains_key(&tx.peer) {
            return Verdict::Fail(
                HealthStatus::RemoteDropped,
                format!("no NI {} on the fabric", tx.peer),
            );
        }
        let delay = inner.latency.get(&link_key(ni, tx.peer)).copied();
        let msg_type = tx.header.msg_type();
        let mut then = HealthStatus::Ok;
        if let Some(lost) = inner
            .lost
            .iter_mut()
            .find(|l| l.left > 0 && l.msg_type == msg_type)
        {
            lost.left -= 1;
            then = lost.status;
        }
        inner.lost.retain(|l| l.left > 0);
        Verdict::Deliver { delay, then }
    }

    fn inbox(&self, nid: &Nid) -> Option<mpsc::Sender<Frame>> {
        self.lock().nis.get(nid).cloned()
    }
}

/// What it takes to start an NI on a fabric.
#[derive(Debug, Clone)]
pub struct FabricConfig {
    /// The fabric.
    pub fabric: Fabric,
    /// The NI's NID.
    pub nid: Nid,
    /// How many sends may wait to go out, and how many received messages may wait for the
    /// handler (both bounded).
    pub queue_depth: usize,
}

impl FabricConfig {
    /// An NI with NID `nid` on `fabric`, queues 64 deep.
    pub fn new(fabric: &Fabric, nid: Nid) -> FabricConfig {
        FabricConfig {
            fabric: fabric.clone(),
            nid,
            queue_depth: 64,
        }
    }
}

/// One NI on an in-process [`Fabric`].
pub struct FabricLnd<H: LndHandler> {
    nid: Nid,
    fabric: Fabric,
    stopped: Arc<AtomicBool>,
    tx: mpsc::Sender<TxRequest>,
    tx_task: JoinHandle<()>,
    rx_task: JoinHandle<()>,
    in_flight: Arc<AtomicU64>,
    _handler: std::marker::PhantomData<H>,
}

impl<H: LndHandler> std::fmt::Debug for FabricLnd<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricLnd").field("nid", &self.nid).finish()
    }
}

struct TxSide<H> {
    nid: Nid,
    fabric: Fabric,
    handler: Arc<H>,
    stopped: Arc<AtomicBool>,
    in_flight: Arc<AtomicU64>,
}

impl<H: LndHandler> TxSide<H> {
    fn complete(&self, tx: &TxRequest, status: HealthStatus, reason: Option<String>) {
        if !status.is_ok() {
            self.fabric
                .count(self.nid, |s| s.failed = s.failed.saturating_add(1));
        }
        self.handler.on_send_complete(TxCompletion {
            id: tx.id,
            ni: self.nid,
            peer: tx.peer,
            status,
            reason,
        });
    }

    async fn deliver(&self, tx: TxRequest, then: HealthStatus) {
        if self.stopped.load(Ordering::SeqCst) {
            self.complete(&tx, HealthStatus::LocalAborted, Some("NI stopped".into()));
            return;
        }
        let Some(inbox) = self.fabric.inbox(&tx.peer) else {
            self.complete(
                &tx,
                HealthStatus::RemoteDropped,
                Some(format!("no NI {} on the fabric", tx.peer)),
            );
            return;
        };
        let frame = Frame {
            from: ProcessId::lustre(self.nid),
            header: tx.header,
            payload: tx.payload.clone(),
        };
        if inbox.send(frame).await.is_err() {
            self.complete(
                &tx,
                HealthStatus::RemoteDropped,
                Some(format!("peer NI {} stopped", tx.peer)),
            );
            return;
        }
        self.fabric
            .count(self.nid, |s| s.delivered = s.delivered.saturating_add(1));
        let reason = (!then.is_ok()).then(|| format!("completion lost: delivered, then {then}"));
        self.complete(&tx, then, reason);
    }

    async fn handle(self: &Arc<Self>, tx: TxRequest) {
        if self.stopped.load(Ordering::SeqCst) {
            self.complete(&tx, HealthStatus::LocalAborted, Some("NI stopped".into()));
            return;
        }
        match self.fabric.verdict(self.nid, &tx) {
            Verdict::Fail(status, reason) => self.complete(&tx, status, Some(reason)),
            Verdict::Deliver { delay: None, then } => self.deliver(tx, then).await,
            Verdict::Deliver {
                delay: Some(delay),
                then,
            } => {
                let me = Arc::clone(self);
                me.in_flight.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    me.deliver(tx, then).await;
                    me.in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            }
        }
    }
}

async fn rx_loop<H: LndHandler>(nid: Nid, handler: Arc<H>, mut inbox: mpsc::Receiver<Frame>) {
    while let Some(frame) = inbox.recv().await {
        // A frame with no payload comes whole, as over socklnd.
        if frame.payload.is_empty() {
            let taken = handler.on_whole_now(RxMessage {
                ni: nid,
                from: frame.from,
                header: frame.header,
                payload: frame.payload,
                received_at: tokio::time::Instant::now(),
            });
            if let Taken::Later(later) = taken {
                later.await;
            }
            continue;
        }
        let decision = handler
            .on_header(RxHeader {
                ni: nid,
                from: frame.from,
                header: frame.header,
            })
            .await;
        match decision {
            RxDecision::Receive(mut buf) => {
                buf.clear();
                buf.extend_from_slice(&frame.payload);
                handler
                    .on_message(RxMessage {
                        ni: nid,
                        from: frame.from,
                        header: frame.header,
                        payload: buf.freeze(),
                        received_at: tokio::time::Instant::now(),
                    })
                    .await;
            }
            RxDecision::Discard | RxDecision::Close => {}
        }
    }
}

impl<H: LndHandler> FabricLnd<H> {
    /// Checks `tx` as [`Lnd::send`] does.
    fn check(&self, tx: &TxRequest) -> Result<(), SendError> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(SendError::Stopped { ni: self.nid });
        }
        if tx.peer.net != self.nid.net {
            return Err(SendError::WrongNet {
                peer: tx.peer,
                ni: self.nid,
            });
        }
        if tx.peer == self.nid {
            return Err(SendError::SelfSend { peer: tx.peer });
        }
        SendError::check_payload_length(tx)
    }
}

impl<H: LndHandler> Lnd for FabricLnd<H> {
    type Config = FabricConfig;
    type Handler = H;
    type StartError = FabricError;

    async fn start(config: FabricConfig, handler: Arc<H>) -> Result<Self, FabricError> {
        let FabricConfig {
            fabric,
            nid,
            queue_depth,
        } = config;
        if nid.is_any() || nid.net == Net::LO {
            return Err(FabricError::BadNid { nid });
        }
        let depth = queue_depth.max(1);
        let (in_tx, in_rx) = mpsc::channel(depth);
        {
            let mut inner = fabric.lock();
            if inner.nis.contains_key(&nid) {
                return Err(FabricError::NidInUse { nid });
            }
            inner.nis.insert(nid, in_tx);
        }
        let stopped = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicU64::new(0));
        let side = Arc::new(TxSide {
            nid,
            fabric: fabric.clone(),
            handler: Arc::clone(&handler),
            stopped: Arc::clone(&stopped),
            in_flight: Arc::clone(&in_flight),
        });
        let (tx, mut tx_rx) = mpsc::channel::<TxRequest>(depth);
        let tx_task = tokio::spawn(async move {
            while let Some(req) = tx_rx.recv().await {
                side.handle(req).await;
            }
        });
        let rx_task = tokio::spawn(rx_loop(nid, handler, in_rx));
        Ok(FabricLnd {
            nid,
            fabric,
            stopped,
            tx,
            tx_task,
            rx_task,
            in_flight,
            _handler: std::marker::PhantomData,
        })
    }

    fn nid(&self) -> Nid {
        self.nid
    }

    async fn send(&self, tx: TxRequest) -> Result<(), SendError> {
        self.check(&tx)?;
        // The NI's send task ends only when the NI stops.
        let ni = self.nid;
        self.tx
            .send(tx)
            .await
            .map_err(|_| SendError::Stopped { ni })
    }

    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused> {
        self.check(&tx).map_err(TryRefused::Refused)?;
        match self.tx.try_send(tx) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(tx)) => Err(TryRefused::WouldWait(Box::new(tx))),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                Err(TryRefused::Refused(SendError::Stopped { ni: self.nid }))
            }
        }
    }

    async fn stop(self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.fabric.lock().nis.remove(&self.nid);
        self.rx_task.abort();
        drop(self.tx);
        // The send task aborts what is still queued (LOCAL_ABORTED) and then ends.
        let _ = self.tx_task.await;
        // Delayed sends see the stop flag when they wake and abort themselves.
        while self.in_flight.load(Ordering::SeqCst) > 0 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use lnet::header::WireHandle;
    use lnet::{Header, Message};
    use tokio::sync::mpsc::{Receiver, Sender};

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    /// A handler that records what it sees on channels.
    struct Recorder {
        headers: Sender<RxHeader>,
        messages: Sender<RxMessage>,
        done: Sender<TxCompletion>,
        discard: bool,
    }

    struct Seen {
        headers: Receiver<RxHeader>,
        messages: Receiver<RxMessage>,
        done: Receiver<TxCompletion>,
    }

    fn recorder(discard: bool) -> (Arc<Recorder>, Seen) {
        let (h, hr) = mpsc::channel(64);
        let (m, mr) = mpsc::channel(64);
        let (d, dr) = mpsc::channel(64);
        (
            Arc::new(Recorder {
                headers: h,
                messages: m,
                done: d,
                discard,
            }),
            Seen {
                headers: hr,
                messages: mr,
                done: dr,
            },
        )
    }

    impl LndHandler for Recorder {
        async fn on_header(&self, rx: RxHeader) -> RxDecision {
            let _ = self.headers.send(rx).await;
            if self.discard {
                RxDecision::Discard
            } else {
                RxDecision::Receive(BytesMut::new())
            }
        }
        async fn on_message(&self, msg: RxMessage) {
            let _ = self.messages.send(msg).await;
        }
        fn on_send_complete(&self, done: TxCompletion) {
            let _ = self.done.try_send(done);
        }
    }

    fn put(src: Nid, dst: Nid, payload: &'static [u8]) -> Header {
        Header {
            dest_nid: dst,
            src_nid: src,
            dest_pid: lnet::nid::PID_LUSTRE,
            src_pid: lnet::nid::PID_LUSTRE,
            payload_length: payload.len() as u32,
            msg: Message::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 7,
                hdr_data: 0,
                ptl_index: 4,
                offset: 0,
            },
        }
    }

    fn tx(id: u64, src: Nid, dst: Nid, payload: &'static [u8]) -> TxRequest {
        TxRequest {
            id: crate::TxId(id),
            peer: dst,
            header: put(src, dst, payload),
            payload: Bytes::from_static(payload),
        }
    }

    async fn pair(fabric: &Fabric) -> (FabricLnd<Recorder>, Seen, FabricLnd<Recorder>, Seen) {
        let (ha, sa) = recorder(false);
        let (hb, sb) = recorder(false);
        let a = FabricLnd::start(FabricConfig::new(fabric, nid("10.0.0.1@tcp")), ha)
            .await
            .unwrap();
        let b = FabricLnd::start(FabricConfig::new(fabric, nid("10.0.0.2@tcp")), hb)
            .await
            .unwrap();
        (a, sa, b, sb)
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_arrives_header_first_and_completes_ok() {
        let fabric = Fabric::new();
        let (a, mut sa, b, mut sb) = pair(&fabric).await;
        a.send(tx(1, a.nid(), b.nid(), b"hello")).await.unwrap();
        let h = sb.headers.recv().await.unwrap();
        assert_eq!(h.ni, b.nid());
        assert_eq!(h.from, ProcessId::lustre(a.nid()));
        let m = sb.messages.recv().await.unwrap();
        assert_eq!(&m.payload[..], b"hello");
        let done = sa.done.recv().await.unwrap();
        assert_eq!(done.status, HealthStatus::Ok);
        assert_eq!((done.ni, done.peer), (a.nid(), b.nid()));
        assert_eq!(fabric.stats(a.nid()).delivered, 1);
        assert_eq!(fabric.nids(), vec![a.nid(), b.nid()]);
        a.stop().await;
        b.stop().await;
        assert!(fabric.nids().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_discarded_payload_never_reaches_on_message() {
        let fabric = Fabric::new();
        let (ha, mut sa) = recorder(false);
        let (hb, mut sb) = recorder(true);
        let a = FabricLnd::start(FabricConfig::new(&fabric, nid("10.1.0.1@tcp")), ha)
            .await
            .unwrap();
        let b = FabricLnd::start(FabricConfig::new(&fabric, nid("10.1.0.2@tcp")), hb)
            .await
            .unwrap();
        a.send(tx(1, a.nid(), b.nid(), b"x")).await.unwrap();
        assert!(sb.headers.recv().await.is_some());
        assert_eq!(sa.done.recv().await.unwrap().status, HealthStatus::Ok);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(sb.messages.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn sends_are_checked_before_they_are_accepted() {
        let fabric = Fabric::new();
        let (a, _sa, b, _sb) = pair(&fabric).await;
        let other_net = nid("10.0.0.2@tcp1");
        assert!(matches!(
            a.send(tx(1, a.nid(), other_net, b"")).await,
            Err(SendError::WrongNet { .. })
        ));
        assert!(matches!(
            a.send(tx(1, a.nid(), a.nid(), b"")).await,
            Err(SendError::SelfSend { .. })
        ));
        let mut bad = tx(1, a.nid(), b.nid(), b"abc");
        bad.payload = Bytes::from_static(b"ab");
        assert!(matches!(
            a.send(bad).await,
            Err(SendError::PayloadLength { .. })
        ));
        let (h, _) = recorder(false);
        assert_eq!(
            FabricLnd::start(FabricConfig::new(&fabric, a.nid()), h)
                .await
                .err(),
            Some(FabricError::NidInUse { nid: a.nid() })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_link_latency_holds_the_message_for_the_paused_clock() {
        let fabric = Fabric::new();
        let (a, mut sa, b, mut sb) = pair(&fabric).await;
        fabric.set_link_latency(b.nid(), a.nid(), Some(Duration::from_secs(5)));
        let start = tokio::time::Instant::now();
        a.send(tx(1, a.nid(), b.nid(), b"p")).await.unwrap();
        assert!(sb.messages.recv().await.is_some());
        assert!(start.elapsed() >= Duration::from_secs(5));
        assert_eq!(sa.done.recv().await.unwrap().status, HealthStatus::Ok);
        fabric.set_link_latency(a.nid(), b.nid(), None);
        let start = tokio::time::Instant::now();
        a.send(tx(2, a.nid(), b.nid(), b"q")).await.unwrap();
        assert!(sb.messages.recv().await.is_some());
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn lost_completions_deliver_and_report_the_failure_then_retire() {
        let fabric = Fabric::new();
        let (a, mut sa, b, mut sb) = pair(&fabric).await;
        fabric.lose_completions(MsgType::Put, HealthStatus::NetworkTimeout, 2);
        fabric.lose_completions(MsgType::Get, HealthStatus::LocalError, 1);
        for id in 1..=3 {
            a.send(tx(id, a.nid(), b.nid(), b"p")).await.unwrap();
        }
        let mut statuses = Vec::new();
        for _ in 1..=3 {
            assert!(sb.messages.recv().await.is_some());
            let done = sa.done.recv().await.unwrap();
            assert_eq!(done.reason.is_some(), !done.status.is_ok());
            statuses.push(done.status);
        }
        assert_eq!(
            statuses,
            [
                HealthStatus::NetworkTimeout,
                HealthStatus::NetworkTimeout,
                HealthStatus::Ok
            ]
        );
        assert_eq!(fabric.stats(a.nid()).delivered, 3);
        assert_eq!(fabric.stats(a.nid()).failed, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_link_goes_down_and_up() {
        let fabric = Fabric::new();
        let (a, mut sa, b, mut sb) = pair(&fabric).await;
        fabric.link_down(b.nid(), a.nid(), HealthStatus::RemoteDropped);
        a.send(tx(1, a.nid(), b.nid(), b"p")).await.unwrap();
        let done = sa.done.recv().await.unwrap();
        assert_eq!(done.status, HealthStatus::RemoteDropped);
        assert!(done.reason.is_some());
        fabric.link_up(a.nid(), b.nid());
        a.send(tx(2, a.nid(), b.nid(), b"q")).await.unwrap();
        assert_eq!(sa.done.recv().await.unwrap().status, HealthStatus::Ok);
        assert_eq!(&sb.messages.recv().await.unwrap().payload[..], b"q");

        fabric.ni_down(a.nid());
        a.send(tx(3, a.nid(), b.nid(), b"r")).await.unwrap();
        assert_eq!(
            sa.done.recv().await.unwrap().status,
            HealthStatus::LocalDropped
        );
        fabric.ni_up(a.nid());
        fabric.ni_down(b.nid());
        a.send(tx(4, a.nid(), b.nid(), b"s")).await.unwrap();
        assert_eq!(
            sa.done.recv().await.unwrap().status,
            HealthStatus::RemoteDropped
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_send_to_a_stopped_peer_ni_is_remote_dropped() {
        let fabric = Fabric::new();
        let (a, mut sa, b, _sb) = pair(&fabric).await;
        let b_nid = b.nid();
        b.stop().await;
        a.send(tx(1, a.nid(), b_nid, b"p")).await.unwrap();
        assert_eq!(
            sa.done.recv().await.unwrap().status,
            HealthStatus::RemoteDropped
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stop_aborts_delayed_sends() {
        let fabric = Fabric::new();
        let (a, mut sa, b, mut sb) = pair(&fabric).await;
        fabric.set_link_latency(a.nid(), b.nid(), Some(Duration::from_secs(3)));
        a.send(tx(1, a.nid(), b.nid(), b"p")).await.unwrap();
        tokio::task::yield_now().await;
        a.stop().await;
        assert_eq!(
            sa.done.recv().await.unwrap().status,
            HealthStatus::LocalAborted
        );
        assert!(sb.messages.try_recv().is_err());
    }
}
