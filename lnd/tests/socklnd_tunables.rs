//! socklnd settings changed while the NI runs (`lnetctl net set --conns-per-peer`,
//! `--lnd-timeout`), over real loopback sockets against fake kernel peers. Each test has
//! its own addresses and acceptor port; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::time::Duration;

use bytes::Bytes;
use lnd::socklnd::wire::ConnType;
use lnd::Lnd;
use lnet::health::HealthStatus;
use socklnd_support::*;
use tokio::io::AsyncWriteExt;

/// The connection types of an accepted set: (CONTROL, BULK_IN, BULK_OUT) as the dialler
/// named them.
fn types(set: &[Accepted]) -> (usize, usize, usize) {
    let count = |t| set.iter().filter(|c| c.hello.ctype == t).count();
    (
        count(ConnType::Control),
        count(ConnType::BulkIn),
        count(ConnType::BulkOut),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_conns_per_peer_gives_new_peers_that_many_and_keeps_the_sets_there_are() {
    let old_peer = nid("127.0.0.50@tcp");
    let new_peer = nid("127.0.0.51@tcp");
    let old_listener = listen("127.0.0.50:20020").await;
    let new_listener = listen("127.0.0.51:20020").await;
    let mut cfg = config("127.0.0.52", 20020);
    cfg.listen = None;
    cfg.conns_per_peer = 1;
    let mut a = Node::start(cfg).await;
    let an = a.nid();
    let tunables = a.lnd.tunables();

    a.send(
        1,
        old_peer,
        put(an, old_peer, b"x", false),
        Bytes::from_static(b"x"),
    )
    .await;
    let old_set = accept_set(&old_listener, old_peer, 3).await;
    assert_eq!(types(&old_set), (1, 1, 1));
    wait_conns(&a.lnd, old_peer, 3).await;
    assert_eq!(a.completion().await.status, HealthStatus::Ok);

    tunables.set_conns_per_peer(2);
    assert_eq!(tunables.effective_conns_per_peer(), 2);
    a.send(
        2,
        new_peer,
        put(an, new_peer, b"y", false),
        Bytes::from_static(b"y"),
    )
    .await;
    let new_set = accept_set(&new_listener, new_peer, 5).await;
    assert_eq!(types(&new_set), (1, 2, 2));
    wait_conns(&a.lnd, new_peer, 5).await;
    assert_eq!(a.completion().await.status, HealthStatus::Ok);

    // The peer there was keeps its count, as the kernel keeps it in the peer's connection
    // record: its connections closed, it opens one of each again.
    drop(old_set);
    let mut gone = false;
    for _ in 0..1000 {
        let stats = a.lnd.peer_stats(old_peer).await.unwrap();
        if stats.conns.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "the old peer's connections were not closed");
    a.send(
        3,
        old_peer,
        put(an, old_peer, b"z", false),
        Bytes::from_static(b"z"),
    )
    .await;
    let again = accept_set(&old_listener, old_peer, 3).await;
    assert_eq!(types(&again), (1, 1, 1));
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    let more = tokio::time::timeout(Duration::from_millis(300), old_listener.accept()).await;
    assert!(more.is_err(), "the old peer was given more connections");
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_timeout_closes_a_connection_whose_frame_stopped_coming() {
    // The NI starts with the default timeout (50 s, longer than any wait here): only the
    // new one can close the connection within the test's bound.
    let b = Node::start(config("127.0.0.53", 20021)).await;
    let bn = b.nid();
    let addr = b.lnd.local_addr().unwrap();
    assert!(b.lnd.tunables().timeout() > WAIT);
    b.lnd
        .tunables()
        .set_timeout(Duration::from_millis(500))
        .unwrap();
    assert_eq!(b.lnd.tunables().timeout(), Duration::from_millis(500));
    // The configuration the NI started with is unchanged.
    assert!(b.lnd.config().timeout > WAIT);

    let fake = nid("127.0.0.54@tcp");
    let mut stuck = dial(fake, bn, addr, ConnType::Control).await;
    // Half a ksock header, then nothing.
    stuck
        .stream
        .write_all(&[0xC1, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    assert!(closed_by_peer(&mut stuck.stream, 0).await);
    b.lnd.stop().await;
}
