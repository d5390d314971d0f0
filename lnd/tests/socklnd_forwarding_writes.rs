//! A reader that forwards what it reads writes the frames itself, without waking the next
//! connection's writer task. When the next peer stops reading, what its socket does not
//! take goes to that writer task; once the peer reads again every frame arrives exactly
//! once, intact and in order, and every forwarded send completes. A read that brings
//! many frames is written every 24 of them, while the reader takes the rest. A frame
//! short of a credit that the reader's own forwarded frames hold is taken once the
//! reader has written them, without a wait.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::BytesMut;
use lnd::socklnd::{SockLnd, SockLndConfig, WriteCounts};
use lnd::{
    Lnd, LndHandler, RxDecision, RxHeader, RxMessage, Taken, TryRefused, TxCompletion, TxId,
    TxRequest,
};
use lnet::health::HealthStatus;
use lnet::Nid;
use socklnd_support::*;
use tokio::sync::{mpsc, Notify, Semaphore};

/// Small frames (written by readers), more of them than loopback's socket buffers hold.
const FRAMES: u32 = 4000;
const SIZE: usize = 4096;

/// Hands every message it receives to its own NI, for `next`; with `credits`, each
/// message holds one of them from its header until its forwarded send completes, as
/// router-buffer credits are held.
struct Forwarder {
    next: Nid,
    lnd: OnceLock<SockLnd<Forwarder>>,
    done: mpsc::UnboundedSender<TxCompletion>,
    credits: Option<Arc<Semaphore>>,
}

impl LndHandler for Forwarder {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        if let Some(credits) = &self.credits {
            if let Ok(p) = credits.acquire().await {
                p.forget();
            }
        }
        RxDecision::Receive(BytesMut::with_capacity(rx.header.payload_length as usize))
    }

    async fn on_message(&self, msg: RxMessage) {
        let Some(lnd) = self.lnd.get() else {
            return;
        };
        let lnet::Message::Put { offset, .. } = msg.header.msg else {
            return;
        };
        let tx = TxRequest {
            id: TxId(u64::from(offset)),
            peer: self.next,
            header: msg.header,
            payload: msg.payload,
        };
        lnd.send(tx).await.unwrap();
    }

    fn on_send_complete(&self, done: TxCompletion) {
        if let Some(credits) = &self.credits {
            credits.add_permits(1);
        }
        let _ = self.done.send(done);
    }
}

/// Reads nothing until `gate` gives it a permit per header.
struct Gated {
    gate: Arc<Semaphore>,
    msgs: mpsc::UnboundedSender<RxMessage>,
}

impl LndHandler for Gated {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        if let Ok(p) = self.gate.acquire().await {
            p.forget();
        }
        RxDecision::Receive(BytesMut::with_capacity(rx.header.payload_length as usize))
    }

    async fn on_message(&self, msg: RxMessage) {
        let _ = self.msgs.send(msg);
    }

    fn on_send_complete(&self, _done: TxCompletion) {}
}

fn put_number(i: u32, from: Nid, to: Nid) -> TxRequest {
    put_numbered(i, SIZE, from, to)
}

/// PUT number `i` (its `offset` and send id) with a payload of `size` bytes.
fn put_numbered(i: u32, size: usize, from: Nid, to: Nid) -> TxRequest {
    let payload = pattern(size, i as u8);
    let mut header = put(from, to, &payload, false);
    if let lnet::Message::Put { offset, .. } = &mut header.msg {
        *offset = i;
    }
    TxRequest {
        id: TxId(u64::from(i)),
        peer: to,
        header,
        payload,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarding_reader_writes_and_a_full_socket_goes_to_the_writer_task() {
    let gate = Arc::new(Semaphore::new(0));
    let (msgs_tx, mut msgs) = mpsc::unbounded_channel();
    let b = SockLnd::start(
        config("127.0.0.43", 20019),
        Arc::new(Gated {
            gate: gate.clone(),
            msgs: msgs_tx,
        }),
    )
    .await
    .unwrap();
    let (done_tx, mut forwarded) = mpsc::unbounded_channel();
    let forwarder = Arc::new(Forwarder {
        next: b.nid(),
        lnd: OnceLock::new(),
        done: done_tx,
        credits: None,
    });
    let mut a = start_forwarder(
        &forwarder,
        &forwarder.lnd,
        "127.0.0.42",
        "127.0.0.41",
        20019,
        |_| {},
    )
    .await;
    let r = forwarder.lnd.get().unwrap();
    let (rn, an) = (r.nid(), a.nid());

    // A first frame sets up every connection (A to the forwarder, the forwarder to B):
    // with them all up, small frames all take the CONTROL connection, in order.
    gate.add_permits(1);
    a.lnd.send(put_number(FRAMES, an, rn)).await.unwrap();
    let first = next_unbounded(&mut msgs).await;
    assert!(matches!(first.header.msg, lnet::Message::Put { offset, .. } if offset == FRAMES));
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    assert_eq!(
        next_unbounded(&mut forwarded).await.status,
        HealthStatus::Ok
    );
    wait_conns(&a.lnd, rn, 3).await;
    wait_conns(r, b.nid(), 3).await;

    let send_all = async {
        for i in 0..FRAMES {
            a.lnd.send(put_number(i, an, rn)).await.unwrap();
        }
    };
    let deliver = async {
        // B reads nothing until the forwarder's socket to it is full and a reader's write
        // was cut short.
        tokio::time::timeout(WAIT, async {
            while r.stats().writes.cut_short == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("no reader's write was ever cut short");
        gate.add_permits(FRAMES as usize);
        for i in 0..FRAMES {
            let m = next_unbounded(&mut msgs).await;
            let lnet::Message::Put { offset, .. } = m.header.msg else {
                panic!("not a PUT");
            };
            assert_eq!(offset, i, "frames out of order");
            assert_eq!(m.payload, pattern(SIZE, i as u8), "frame {i} damaged");
        }
    };
    tokio::join!(send_all, deliver);

    for _ in 0..FRAMES {
        assert_eq!(
            next_unbounded(&mut forwarded).await.status,
            HealthStatus::Ok
        );
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    let writes = r.stats().writes;
    assert!(writes.by_reader > 0, "{writes:?}");
    assert!(writes.cut_short > 0, "{writes:?}");
    // The rest of a write cut short is written by the writer task.
    assert!(writes.by_writer_task >= writes.cut_short, "{writes:?}");
    // Nothing else arrived.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(msgs.try_recv().is_err());
    a.lnd.stop().await;
    b.stop().await;
}

/// A read brings more frames than the forwarder's credits let through: while a header
/// waits for a credit, the reader takes what it forwarded (staged: its sends complete and
/// give the credits back, its bytes wait for the next write, or, past what a connection
/// stages, written as the start of more) and asks again; the flush before the next read
/// sends it all. Every frame arrives, intact and in order, and every send completes.
async fn frames_beyond_the_credits(
    first: u8,
    port: u16,
    size: usize,
    credits: usize,
) -> (WriteCounts, WriteCounts) {
    const FRAMES: u32 = 3000;
    let ip = |n: u8| format!("127.0.0.{}", first + n);
    let (b, mut msgs) = open_sink(&ip(2), port).await;
    let (done_tx, mut forwarded) = mpsc::unbounded_channel();
    let forwarder = Arc::new(Forwarder {
        next: b.nid(),
        lnd: OnceLock::new(),
        done: done_tx,
        credits: Some(Arc::new(Semaphore::new(credits))),
    });
    let a = start_forwarder(&forwarder, &forwarder.lnd, &ip(1), &ip(0), port, |_| {}).await;
    let r = forwarder.lnd.get().unwrap();
    let (rn, an) = (r.nid(), a.nid());
    let numbered = |i: u32| put_numbered(i, size, an, rn);
    a.lnd.send(numbered(FRAMES)).await.unwrap();
    assert!(matches!(
        next_unbounded(&mut msgs).await.header.msg,
        lnet::Message::Put { offset, .. } if offset == FRAMES
    ));
    wait_conns(&a.lnd, rn, 3).await;
    wait_conns(r, b.nid(), 3).await;

    let before = r.stats().writes;
    for i in 0..FRAMES {
        a.lnd.send(numbered(i)).await.unwrap();
    }
    for i in 0..FRAMES {
        let m = next_unbounded(&mut msgs).await;
        let lnet::Message::Put { offset, .. } = m.header.msg else {
            panic!("not a PUT");
        };
        assert_eq!(offset, i, "frames out of order");
        assert_eq!(m.payload, pattern(size, i as u8), "frame {i} damaged");
    }
    for _ in 0..=FRAMES {
        assert_eq!(
            next_unbounded(&mut forwarded).await.status,
            HealthStatus::Ok
        );
    }
    let writes = r.stats().writes;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(msgs.try_recv().is_err());
    a.lnd.stop().await;
    b.stop().await;
    (before, writes)
}

/// Small frames: a round's frames are staged, not written, while the next one waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_that_wait_for_credits_are_staged_and_all_arrive() {
    let (before, writes) = frames_beyond_the_credits(44, 20019, 16, 8).await;
    assert!(
        writes.staged > before.staged,
        "no read brought more frames than the credits: {writes:?}"
    );
}

/// Frames of 4 KiB, one credit: a read's third round is more than a connection stages
/// (8 KiB), so it is written as the start of more; the order and the bytes hold across
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_what_a_connection_stages_rounds_are_written_as_the_start_of_more() {
    let (before, writes) = frames_beyond_the_credits(47, 20019, 4000, 1).await;
    assert!(
        writes.staged > before.staged && writes.more > before.more,
        "no read brought more frames than the credits: {writes:?}"
    );
}

/// Forwards every message that comes whole to its own NI, for `next`, in the same call
/// when the LND takes it without waiting (`Lnd::try_send`, as the node's forwarding path
/// does), else holding the reader until it does; with `hold` set, the next one waits for
/// a permit of `gate` first.
struct WholeForwarder {
    next: Nid,
    lnd: OnceLock<SockLnd<WholeForwarder>>,
    hold: AtomicBool,
    gate: Arc<Semaphore>,
}

impl WholeForwarder {
    /// Hands `msg` on at once if the LND takes it without waiting, else the wait that
    /// hands it on.
    fn forward(&self, msg: RxMessage) -> Taken<'_> {
        forward_whole(&self.lnd, self.next, msg)
    }
}

/// Hands `msg` to `lnd`'s NI for `next` at once if it takes it without waiting
/// (`Lnd::try_send`, as the node's forwarding path does), else the wait that hands it on.
fn forward_whole<H: LndHandler>(
    lnd: &OnceLock<SockLnd<H>>,
    next: Nid,
    msg: RxMessage,
) -> Taken<'_> {
    let Some(lnd) = lnd.get() else {
        return Taken::Now;
    };
    let lnet::Message::Put { offset, .. } = msg.header.msg else {
        return Taken::Now;
    };
    let tx = TxRequest {
        id: TxId(u64::from(offset)),
        peer: next,
        header: msg.header,
        payload: msg.payload,
    };
    match lnd.try_send(tx) {
        Ok(()) => Taken::Now,
        Err(TryRefused::WouldWait(tx)) => {
            Taken::Later(Box::pin(async move { lnd.send(*tx).await.is_ok() }))
        }
        Err(e) => panic!("send refused: {e:?}"),
    }
}

impl LndHandler for WholeForwarder {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        RxDecision::Receive(BytesMut::with_capacity(rx.header.payload_length as usize))
    }

    async fn on_message(&self, msg: RxMessage) {
        if let Taken::Later(later) = self.forward(msg) {
            later.await;
        }
    }

    fn on_whole_now(&self, msg: RxMessage) -> Taken<'_> {
        if !self.hold.swap(false, Ordering::SeqCst) {
            return self.forward(msg);
        }
        Taken::Later(Box::pin(async move {
            if let Ok(p) = self.gate.acquire().await {
                p.forget();
            }
            kept(self.forward(msg)).await
        }))
    }

    fn on_send_complete(&self, _done: TxCompletion) {}
}

/// A read that brings hundreds of frames with no payload: the reader writes what it
/// forwarded every 24 of them while it takes the rest, not only once before its next
/// read, so none waits for room on the next peer. The forwarder's reader is held on the
/// first frame until all the others are in its socket, so each of its next reads brings
/// as many frames as it reads at once (16 KiB: over a hundred).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_many_frames_is_written_in_rounds_while_it_is_taken() {
    const FRAMES: u32 = 400;
    let (b, mut msgs) = open_sink("127.0.0.51", 20019).await;
    let forwarder = Arc::new(WholeForwarder {
        next: b.nid(),
        lnd: OnceLock::new(),
        hold: AtomicBool::new(false),
        gate: Arc::new(Semaphore::new(0)),
    });
    let (before, writes) = held_read(
        &forwarder,
        &forwarder.lnd,
        &forwarder.hold,
        &forwarder.gate,
        ["127.0.0.49", "127.0.0.50"],
        b.nid(),
        &mut msgs,
        FRAMES,
    )
    .await;
    // Written every 24 frames of a read, at most 24 wait at a time: 8 on the
    // connection, the rest in the peer's queue of 64. Written only once a read, a read's
    // frames fill that queue: the reader waits for room, what it forwarded goes to the
    // writer task and is staged meanwhile.
    assert_eq!(
        (writes.by_writer_task, writes.staged),
        (before.by_writer_task, before.staged),
        "frames waited for room: {before:?} then {writes:?}"
    );
    assert!(
        writes.by_reader - before.by_reader >= u64::from(FRAMES / 24),
        "{before:?} then {writes:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(msgs.try_recv().is_err());
    b.stop().await;
}

/// Forwards every message that comes whole, as [`WholeForwarder`] does, while it has one
/// of its credits, each held until its send completes (as a router-buffer credit is).
/// Short of one, [`LndHandler::try_whole_now`] gives the message back; `on_whole_now`
/// waits for one. With `hold` set, the next message waits for a permit of `gate` first.
struct CreditedForwarder {
    next: Nid,
    lnd: OnceLock<SockLnd<CreditedForwarder>>,
    credits: AtomicU32,
    freed: Notify,
    hold: AtomicBool,
    gate: Arc<Semaphore>,
    given_back: AtomicU64,
    waited: AtomicU64,
}

impl CreditedForwarder {
    fn take_credit(&self) -> bool {
        self.credits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1))
            .is_ok()
    }

    /// Hands `msg`, which holds a credit, on.
    fn send(&self, msg: RxMessage) -> Taken<'_> {
        forward_whole(&self.lnd, self.next, msg)
    }
}

impl LndHandler for CreditedForwarder {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        RxDecision::Receive(BytesMut::with_capacity(rx.header.payload_length as usize))
    }

    async fn on_message(&self, _msg: RxMessage) {
        panic!("only frames with no payload are sent");
    }

    fn try_whole_now(&self, slot: &mut Option<RxMessage>) -> Option<Taken<'_>> {
        if self.hold.swap(false, Ordering::SeqCst) {
            let msg = slot.take()?;
            return Some(Taken::Later(Box::pin(async move {
                if let Ok(p) = self.gate.acquire().await {
                    p.forget();
                }
                kept(self.on_whole_now(msg)).await
            })));
        }
        if !self.take_credit() {
            self.given_back.fetch_add(1, Ordering::SeqCst);
            return None;
        }
        slot.take().map(|msg| self.send(msg))
    }

    fn on_whole_now(&self, msg: RxMessage) -> Taken<'_> {
        if self.take_credit() {
            return self.send(msg);
        }
        self.waited.fetch_add(1, Ordering::SeqCst);
        Taken::Later(Box::pin(async move {
            loop {
                let freed = self.freed.notified();
                if self.take_credit() {
                    break;
                }
                freed.await;
            }
            kept(self.send(msg)).await
        }))
    }

    fn on_send_complete(&self, _done: TxCompletion) {
        self.credits.fetch_add(1, Ordering::SeqCst);
        self.freed.notify_waiters();
    }
}

/// A read brings hundreds of frames with no payload and the forwarder has 8 credits: a
/// frame short of one is given back to the reader, which writes (stages) the frames it
/// forwarded, whose sends complete and give their credits back, and asks again. Every
/// frame arrives, in order, and none waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_short_of_a_credit_its_reader_holds_is_taken_once_it_writes_without_a_wait() {
    const FRAMES: u32 = 400;
    let (b, mut msgs) = open_sink("127.0.0.57", 20019).await;
    let forwarder = Arc::new(CreditedForwarder {
        next: b.nid(),
        lnd: OnceLock::new(),
        credits: AtomicU32::new(8),
        freed: Notify::new(),
        hold: AtomicBool::new(false),
        gate: Arc::new(Semaphore::new(0)),
        given_back: AtomicU64::new(0),
        waited: AtomicU64::new(0),
    });
    let (before, writes) = held_read(
        &forwarder,
        &forwarder.lnd,
        &forwarder.hold,
        &forwarder.gate,
        ["127.0.0.55", "127.0.0.56"],
        b.nid(),
        &mut msgs,
        FRAMES,
    )
    .await;
    assert!(
        forwarder.given_back.load(Ordering::SeqCst) > 0,
        "no frame was short of a credit: {before:?} then {writes:?}"
    );
    assert_eq!(
        forwarder.waited.load(Ordering::SeqCst),
        0,
        "{before:?} then {writes:?}"
    );
    assert!(writes.staged > before.staged, "{before:?} then {writes:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(msgs.try_recv().is_err());
    assert_eq!(forwarder.credits.load(Ordering::SeqCst), 8);
    b.stop().await;
}

/// Whether a message that came whole was kept, once what `taken` waits for is over.
async fn kept(taken: Taken<'_>) -> bool {
    match taken {
        Taken::Later(later) => later.await,
        Taken::Now => true,
        Taken::Close => false,
    }
}

/// Sends `frames` frames with no payload from a node at `ips[0]` through `handler`'s NI
/// at `ips[1]` (peer credits 8, a peer queue of 64) to the sink `sink`, whose messages
/// come on `msgs`: the forwarder's reader is held on the first (`hold`, until `gate`
/// gives a permit) until all the others are in its socket, so each of its next reads
/// brings as many frames as it reads at once (16 KiB: over a hundred). Every frame
/// arrives, in order, with no payload. The forwarder's write counts before and after;
/// the sending node is stopped.
#[allow(clippy::too_many_arguments)]
async fn held_read<H: LndHandler>(
    handler: &Arc<H>,
    cell: &OnceLock<SockLnd<H>>,
    hold: &AtomicBool,
    gate: &Semaphore,
    ips: [&str; 2],
    sink: Nid,
    msgs: &mut mpsc::UnboundedReceiver<RxMessage>,
    frames: u32,
) -> (WriteCounts, WriteCounts) {
    let tune = |rcfg: &mut SockLndConfig| {
        rcfg.peer_credits = 8;
        rcfg.peer_queue = 64;
    };
    let mut a = start_forwarder(handler, cell, ips[1], ips[0], 20019, tune).await;
    let r = cell.get().unwrap();
    let (rn, an) = (r.nid(), a.nid());
    let numbered = |i: u32| put_numbered(i, 0, an, rn);
    // The first frame sets every connection up.
    a.lnd.send(numbered(frames)).await.unwrap();
    assert!(matches!(
        next_unbounded(msgs).await.header.msg,
        lnet::Message::Put { offset, .. } if offset == frames
    ));
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    wait_conns(&a.lnd, rn, 3).await;
    wait_conns(r, sink, 3).await;

    hold.store(true, Ordering::SeqCst);
    let before = r.stats().writes;
    for i in 0..frames {
        a.lnd.send(numbered(i)).await.unwrap();
    }
    // Every frame is in the kernel's hands (A's sends complete once written).
    for _ in 0..frames {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    gate.add_permits(1);
    for i in 0..frames {
        let m = next_unbounded(msgs).await;
        let lnet::Message::Put { offset, .. } = m.header.msg else {
            panic!("not a PUT");
        };
        assert_eq!(offset, i, "frames out of order");
        assert!(m.payload.is_empty(), "frame {i} has a payload");
    }
    let writes = r.stats().writes;
    a.lnd.stop().await;
    (before, writes)
}

/// Starts `handler`'s NI at `r_ip` (its config changed by `tune`) and hands it to the
/// handler through `cell`, then a sending node at `a_ip`. Small frames all take one
/// connection on both, so their order is kept end to end.
async fn start_forwarder<H: LndHandler>(
    handler: &Arc<H>,
    cell: &OnceLock<SockLnd<H>>,
    r_ip: &str,
    a_ip: &str,
    port: u16,
    tune: impl FnOnce(&mut SockLndConfig),
) -> Node {
    let mut rcfg = config(r_ip, port);
    rcfg.min_bulk = 2 << 20;
    tune(&mut rcfg);
    let r = SockLnd::start(rcfg, handler.clone()).await.unwrap();
    let _ = cell.set(r);
    let mut acfg = config(a_ip, port);
    acfg.min_bulk = 2 << 20;
    Node::start(acfg).await
}

/// A socklnd NI at `ip` that reads everything it is sent and hands each message to the
/// receiver returned with it.
async fn open_sink(ip: &str, port: u16) -> (SockLnd<Gated>, mpsc::UnboundedReceiver<RxMessage>) {
    let (msgs_tx, msgs) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
    let b = SockLnd::start(
        config(ip, port),
        Arc::new(Gated {
            gate,
            msgs: msgs_tx,
        }),
    )
    .await
    .unwrap();
    (b, msgs)
}

async fn next_unbounded<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("timed out waiting")
        .expect("channel closed")
}
