//! socklnd queueing and failures over real loopback sockets, against fake
//! kernel peers that stop reading or reset their connections. Each test has its own
//! acceptor port; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use lnd::{Lnd, TxCompletion, TxId, TxRequest};
use lnet::health::HealthStatus;
use socklnd_support::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Accepts and answers every connection on `listener` and keeps it open without reading
/// it; each accepted connection is also passed to `out`.
fn silent_peer(listener: TcpListener, me: lnet::Nid, out: mpsc::Sender<Accepted>) {
    tokio::spawn(async move {
        loop {
            let mut a = accept_request(&listener).await;
            let ctype = a.hello.ctype.invert();
            answer(&mut a, me, ctype).await;
            if out.send(a).await.is_err() {
                return;
            }
        }
    });
}

/// Collects `n` completions and checks each send finished exactly once.
async fn completions(done: &mut mpsc::Receiver<TxCompletion>, n: usize) -> Vec<HealthStatus> {
    let mut ids = HashSet::new();
    let mut statuses = Vec::new();
    for _ in 0..n {
        let done = next(done).await;
        assert!(ids.insert(done.id), "{:?} completed twice", done.id);
        statuses.push(done.status);
    }
    statuses
}

/// Sends `n` copies of a message to `peer` while collecting their completions.
async fn send_and_collect(
    node: &mut Node,
    n: usize,
    peer: lnet::Nid,
    header: lnet::Header,
    payload: Bytes,
) -> Vec<HealthStatus> {
    let Node { lnd, done, .. } = node;
    let sending = async {
        for i in 0..n {
            let tx = TxRequest {
                id: TxId(i as u64),
                peer,
                header,
                payload: payload.clone(),
            };
            tokio::time::timeout(WAIT, lnd.send(tx))
                .await
                .expect("send waited too long")
                .unwrap();
        }
    };
    let ((), statuses) = tokio::join!(sending, completions(done, n));
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_queues_and_the_peer_queue_bound_buffering_and_stop_finishes_every_send() {
    let fake = nid("127.0.0.16@tcp");
    let (conns_tx, mut conns) = mpsc::channel(16);
    silent_peer(listen("127.0.0.16:20008").await, fake, conns_tx);
    let mut cfg = config("127.0.0.17", 20008);
    cfg.listen = None;
    cfg.peer_credits = 2;
    cfg.peer_queue = 4;
    let a = Node::start(cfg).await;
    let an = a.nid();

    // The peer never reads: once TCP's buffers are full, the writer of each connection the
    // frames went on holds at most peer_credits of them in its queue and as many in the
    // round it is writing, four wait in the peer queue, and the next send waits.
    let payload = pattern(1 << 20, 1);
    let header = put(an, fake, &payload, false);
    let mut accepted = 0u64;
    loop {
        let tx = TxRequest {
            id: TxId(accepted),
            peer: fake,
            header,
            payload: payload.clone(),
        };
        match tokio::time::timeout(Duration::from_secs(2), a.lnd.send(tx)).await {
            Ok(r) => r.unwrap(),
            Err(_) => break,
        }
        accepted += 1;
        assert!(accepted < 200, "sends never waited: buffering is unbounded");
    }
    let stats = a.lnd.peer_stats(fake).await.unwrap();
    assert_eq!(stats.queued, 4, "{stats:?}");
    // At most 2 x peer_credits on each connection that carries LNET frames (BULK_OUT,
    // and CONTROL for what went before BULK_OUT was up).
    assert!((1..=8).contains(&stats.in_flight), "{stats:?}");
    let mut kept = Vec::new();
    while let Ok(c) = conns.try_recv() {
        kept.push(c);
    }
    assert!(!kept.is_empty());

    // Stopping finishes every accepted send exactly once: written ones OK, the rest
    // LOCAL_ABORTED.
    let Node { lnd, mut done, .. } = a;
    lnd.stop().await;
    let statuses = completions(&mut done, accepted as usize).await;
    assert!(statuses
        .iter()
        .all(|s| matches!(s, HealthStatus::Ok | HealthStatus::LocalAborted)));
    let aborted = statuses
        .iter()
        .filter(|s| **s == HealthStatus::LocalAborted)
        .count();
    assert!(aborted > stats.queued, "{statuses:?}");
    assert!(
        done.recv().await.is_none(),
        "no completion after the last one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_writes_and_stale_queues_time_out() {
    let fake = nid("127.0.0.18@tcp");
    let (conns_tx, mut conns) = mpsc::channel(64);
    silent_peer(listen("127.0.0.18:20009").await, fake, conns_tx);
    // Each connection is read at about 2.5 MB/s for 1.5 s, then not at all: the frame
    // being written keeps moving past the 1 s timeout of the sends queued behind it, so
    // they expire while connected (LocalTimeout); once reading stops, the write under way
    // stalls a second later (NetworkTimeout). The two are half a second apart; on a peer
    // that never reads they fell within a millisecond, in either order.
    tokio::spawn(async move {
        while let Some(mut c) = conns.recv().await {
            tokio::spawn(async move {
                let until = tokio::time::Instant::now() + Duration::from_millis(1500);
                let mut buf = vec![0u8; 256 << 10];
                while tokio::time::Instant::now() < until {
                    let _ =
                        tokio::time::timeout(Duration::from_millis(50), c.stream.read(&mut buf))
                            .await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                // Kept open, unread, until the test is over.
                tokio::time::sleep(WAIT).await;
                drop(c);
            });
        }
    });
    let mut cfg = config("127.0.0.19", 20009);
    cfg.listen = None;
    cfg.peer_credits = 1;
    cfg.peer_queue = 8;
    cfg.timeout = Duration::from_secs(1);
    let mut a = Node::start(cfg).await;
    let an = a.nid();
    let n = 24;
    let payload = pattern(1 << 20, 2);
    let header = put(an, fake, &payload, false);
    let statuses = send_and_collect(&mut a, n, fake, header, payload).await;
    assert!(
        statuses.iter().all(|s| matches!(
            s,
            HealthStatus::Ok | HealthStatus::LocalTimeout | HealthStatus::NetworkTimeout
        )),
        "{statuses:?}"
    );
    // Timeout before send: queued while connected.
    assert!(
        statuses.contains(&HealthStatus::LocalTimeout),
        "{statuses:?}"
    );
    // Timeout after send: the frame being written when the connection stalled.
    assert!(
        statuses.contains(&HealthStatus::NetworkTimeout),
        "{statuses:?}"
    );
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_while_writing_completes_remote_dropped() {
    let fake = nid("127.0.0.20@tcp");
    let listener = listen("127.0.0.20:20010").await;
    let mut cfg = config("127.0.0.21", 20010);
    cfg.listen = None;
    let mut a = Node::start(cfg).await;
    let an = a.nid();
    let n = 16;
    let payload = pattern(1 << 20, 3);
    let header = put(an, fake, &payload, false);
    tokio::spawn(async move {
        let set = accept_set(&listener, fake, 3).await;
        drop(listener); // reconnects are refused
        let mut streams: Vec<_> = set.into_iter().map(|c| c.stream).collect();
        // Read 2 MiB, so the NI is mid-stream, then reset every connection. The bytes are
        // read from whichever connection carries them: a message queued before the bulk
        // connection was up may go on another one.
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut total = 0usize;
        let mut buf = vec![0u8; 64 << 10];
        while total < 2 << 20 {
            assert!(tokio::time::Instant::now() < deadline, "no bulk data came");
            for s in streams.iter_mut() {
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await
                {
                    total += n;
                }
            }
        }
        for s in streams {
            socket2::SockRef::from(&s)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(s);
        }
    });
    let statuses = send_and_collect(&mut a, n, fake, header, payload).await;
    assert!(
        statuses
            .iter()
            .all(|s| matches!(s, HealthStatus::Ok | HealthStatus::RemoteDropped)),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&HealthStatus::RemoteDropped),
        "{statuses:?}"
    );
    a.lnd.stop().await;
}
