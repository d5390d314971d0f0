//! While the upper layer has not said where a payload goes, the connection reads nothing:
//! the sender's writer queues and its peer queue fill and its sends wait, and nothing is
//! lost once the upper layer catches up. A frame with no payload comes up whole, in one
//! call, and a wait there holds the connection back the same way.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use lnd::socklnd::SockLnd;
use lnd::{Lnd, LndHandler, RxDecision, RxHeader, RxMessage, Taken, TxCompletion, TxId, TxRequest};
use lnet::health::HealthStatus;
use socklnd_support::*;
use tokio::sync::{mpsc, Semaphore};

/// Takes a permit from `gate` before deciding on each header; discards odd-numbered
/// payloads (by `offset`) to exercise both decisions.
struct Gated {
    gate: Arc<Semaphore>,
    headers: Arc<AtomicUsize>,
    msgs: mpsc::Sender<RxMessage>,
}

impl LndHandler for Gated {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        self.headers.fetch_add(1, Ordering::SeqCst);
        if let Ok(p) = self.gate.acquire().await {
            p.forget();
        }
        match rx.header.msg {
            lnet::Message::Put { offset, .. } if offset % 2 == 1 => RxDecision::Discard,
            _ => RxDecision::Receive(BytesMut::new()),
        }
    }

    async fn on_message(&self, msg: RxMessage) {
        let _ = self.msgs.send(msg).await;
    }

    fn on_send_complete(&self, _done: TxCompletion) {}
}

/// B (127.0.0.28, with the gated `handler`) and A (127.0.0.29, 2 peer credits and a peer
/// queue of 2, so that its sends soon wait), listening on `port`.
async fn gated_pair<H: LndHandler>(port: u16, handler: H) -> (SockLnd<H>, Node) {
    let b = SockLnd::start(config("127.0.0.28", port), Arc::new(handler))
        .await
        .unwrap();
    let mut cfg = config("127.0.0.29", port);
    cfg.peer_credits = 2;
    cfg.peer_queue = 2;
    (b, Node::start(cfg).await)
}

/// Sends PUTs of `payload` from `a` to `bn`, numbered by their offset from 0, until a send
/// waits 2 s (the sender is held back), taking the completions that come meanwhile (each
/// OK). At most `most` are sent. Answers the PUTs accepted and the completions taken.
async fn send_until_held(
    a: &mut Node,
    bn: lnet::Nid,
    payload: &bytes::Bytes,
    ack: bool,
    most: u32,
) -> (u32, usize) {
    let an = a.nid();
    let (mut accepted, mut completed) = (0u32, 0usize);
    loop {
        while let Ok(done) = a.done.try_recv() {
            assert_eq!(done.status, HealthStatus::Ok);
            completed += 1;
        }
        let mut header = put(an, bn, payload, ack);
        if let lnet::Message::Put { offset, .. } = &mut header.msg {
            *offset = accepted;
        }
        let tx = TxRequest {
            id: TxId(u64::from(accepted)),
            peer: bn,
            header,
            payload: payload.clone(),
        };
        match tokio::time::timeout(Duration::from_secs(2), a.lnd.send(tx)).await {
            Ok(r) => r.unwrap(),
            Err(_) => return (accepted, completed),
        }
        accepted += 1;
        assert!(accepted < most, "the sender was never held back");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_upper_layer_holds_the_sender_back() {
    let gate = Arc::new(Semaphore::new(0));
    let headers = Arc::new(AtomicUsize::new(0));
    let (msgs_tx, mut msgs) = mpsc::channel(64);
    let (b, mut a) = gated_pair(
        20014,
        Gated {
            gate: gate.clone(),
            headers: headers.clone(),
            msgs: msgs_tx,
        },
    )
    .await;
    let bn = b.nid();

    let payload = pattern(1 << 20, 4);
    let (accepted, completed) = send_until_held(&mut a, bn, &payload, false, 200).await;
    // Each connection the messages came on read one header and nothing after it (the
    // first message may have gone on CONTROL before BULK_OUT was up).
    let seen = headers.load(Ordering::SeqCst);
    assert!((1..=3).contains(&seen), "{seen} headers");

    // Let the upper layer decide on everything: every kept message arrives (in order
    // per connection; the first may have used another connection), the discarded ones
    // are not handed up.
    gate.add_permits(1000);
    let mut offsets = std::collections::BTreeSet::new();
    for _ in (0..accepted).filter(|i| i % 2 == 0) {
        let m = next(&mut msgs).await;
        let lnet::Message::Put { offset, .. } = m.header.msg else {
            panic!("not a PUT");
        };
        assert_eq!(m.payload, payload);
        offsets.insert(offset);
    }
    let kept: std::collections::BTreeSet<u32> = (0..accepted).filter(|i| i % 2 == 0).collect();
    assert_eq!(offsets, kept);
    for _ in completed..accepted as usize {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    // Every header reached the upper layer (the last may be a discarded one).
    tokio::time::timeout(WAIT, async {
        while headers.load(Ordering::SeqCst) < accepted as usize {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("not every header arrived");
    assert_eq!(headers.load(Ordering::SeqCst), accepted as usize);
    a.lnd.stop().await;
    b.stop().await;
}

/// Takes each message that comes whole once `gate` gives a permit; counts what comes by
/// halves instead.
struct GatedWhole {
    gate: Arc<Semaphore>,
    wholes: Arc<AtomicUsize>,
    halves: Arc<AtomicUsize>,
    msgs: mpsc::Sender<RxMessage>,
}

impl LndHandler for GatedWhole {
    async fn on_header(&self, _rx: RxHeader) -> RxDecision {
        self.halves.fetch_add(1, Ordering::SeqCst);
        RxDecision::Discard
    }

    async fn on_message(&self, _msg: RxMessage) {}

    fn on_whole_now(&self, msg: RxMessage) -> Taken<'_> {
        self.wholes.fetch_add(1, Ordering::SeqCst);
        Taken::Later(Box::pin(async move {
            if let Ok(p) = self.gate.acquire().await {
                p.forget();
            }
            self.msgs.send(msg).await.is_ok()
        }))
    }

    fn on_send_complete(&self, _done: TxCompletion) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_no_payload_comes_whole_and_its_wait_holds_the_sender_back() {
    let gate = Arc::new(Semaphore::new(0));
    let wholes = Arc::new(AtomicUsize::new(0));
    let halves = Arc::new(AtomicUsize::new(0));
    let (msgs_tx, mut msgs) = mpsc::channel(1024);
    let (b, mut a) = gated_pair(
        20015,
        GatedWhole {
            gate: gate.clone(),
            wholes: wholes.clone(),
            halves: halves.clone(),
            msgs: msgs_tx,
        },
    )
    .await;
    let bn = b.nid();

    // Held back once loopback's socket buffers are full of frames nobody reads.
    let empty = bytes::Bytes::new();
    let (accepted, completed) = send_until_held(&mut a, bn, &empty, true, 1_000_000).await;
    // Each connection the messages came on handed up one message and read on no further.
    let seen = wholes.load(Ordering::SeqCst);
    assert!((1..=3).contains(&seen), "{seen} messages handed up");
    assert_eq!(halves.load(Ordering::SeqCst), 0);

    // Every message arrives once, whole, in order per connection.
    gate.add_permits(accepted as usize);
    let mut offsets = std::collections::BTreeSet::new();
    for _ in 0..accepted {
        let m = next(&mut msgs).await;
        let lnet::Message::Put { offset, .. } = m.header.msg else {
            panic!("not a PUT");
        };
        assert!(m.payload.is_empty());
        assert!(offsets.insert(offset), "{offset} twice");
    }
    assert_eq!(offsets.len(), accepted as usize);
    for _ in completed..accepted as usize {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    assert_eq!(wholes.load(Ordering::SeqCst), accepted as usize);
    assert_eq!(halves.load(Ordering::SeqCst), 0);
    a.lnd.stop().await;
    b.stop().await;
}
