//! Connection races made explicit: two NIs start and send to each other at the same
//! moment, so both connect to each other at once; every round ends with one working set
//! of connections (1 CONTROL + BULK_IN + BULK_OUT each way, the same TCP connections seen
//! from both ends) and every message delivered exactly once. Own ports 20104..; every wait
//! is bounded.
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
use lnd::socklnd::wire::ConnType;
use lnd::socklnd::{CloseReason, PeerStats, SockLndConfig};
use lnd::{Lnd, TxId, TxRequest};
use lnet::health::HealthStatus;
use lnet::Nid;
use socklnd_support::*;

/// Rounds run at least; more, up to `MAX_ROUNDS`, until the connects have raced once
/// (they race in most rounds, but whether they do is up to the scheduler).
const ROUNDS: u64 = 12;
const MAX_ROUNDS: u64 = 48;
const PER_SIDE: u64 = 20;

fn race_config(ip: &str, port: u16, round: u64) -> SockLndConfig {
    let mut c = config(ip, port);
    // A new incarnation each round, as after a restart.
    c.incarnation += round << 20;
    c.min_reconnect = Duration::from_millis(50);
    c
}

/// Sends `PER_SIDE` numbered PUTs from `node` to `peer`.
async fn send_all(node: &Node, peer: Nid, round: u64) {
    let me = node.nid();
    for i in 0..PER_SIDE {
        let mut payload = i.to_le_bytes().to_vec();
        payload.extend_from_slice(&pattern((i as usize * 997) % 4000, round as u8));
        let payload = Bytes::from(payload);
        let tx = TxRequest {
            id: TxId(i),
            peer,
            header: put(me, peer, &payload, false),
            payload,
        };
        tokio::time::timeout(WAIT, node.lnd.send(tx))
            .await
            .expect("send waited too long")
            .unwrap();
    }
}

/// Receives `PER_SIDE` messages and checks each arrived once and intact.
async fn receive_all(node: &mut Node) {
    let mut seen = HashSet::new();
    while seen.len() < PER_SIDE as usize {
        let m = node.message().await;
        let lnet::Message::Put { hdr_data, .. } = m.header.msg else {
            panic!("not a PUT");
        };
        assert_eq!(u64::from(crc32fast::hash(&m.payload)), hdr_data);
        let id = u64::from_le_bytes(m.payload[..8].try_into().unwrap());
        assert!(seen.insert(id), "message {id} delivered twice");
    }
}

/// Checks every send completed once, OK.
async fn completions(node: &mut Node) {
    let mut ids = HashSet::new();
    while ids.len() < PER_SIDE as usize {
        let d = node.completion().await;
        assert_eq!(d.status, HealthStatus::Ok, "{d:?}");
        assert!(ids.insert(d.id), "{:?} completed twice", d.id);
    }
}

fn types(s: &PeerStats) -> Vec<ConnType> {
    let mut t: Vec<ConnType> = s.conns.iter().map(|(t, _)| *t).collect();
    t.sort_by_key(|t| *t as i32);
    t
}

/// Waits until both ends see the same single set of connections.
async fn one_set(a: &Node, b: &Node) -> (PeerStats, PeerStats) {
    let (an, bn) = (a.nid(), b.nid());
    let mut last = None;
    let settled = tokio::time::timeout(WAIT, async {
        loop {
            let sa = a.lnd.peer_stats(bn).await.unwrap();
            let sb = b.lnd.peer_stats(an).await.unwrap();
            let mut inverted: Vec<ConnType> = types(&sb).iter().map(|t| t.invert()).collect();
            inverted.sort_by_key(|t| *t as i32);
            let whole = vec![ConnType::Control, ConnType::BulkIn, ConnType::BulkOut];
            if types(&sa) == whole && inverted == whole {
                return (sa, sb);
            }
            last = Some((sa, sb));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    match settled {
        Ok(s) => s,
        Err(_) => panic!("no single connection set: {last:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn simultaneous_connects_end_with_one_set_and_lose_nothing() {
    let mut refused = 0;
    for round in 0..MAX_ROUNDS {
        if round >= ROUNDS && refused > 0 {
            break;
        }
        let port = 20104;
        let mut a = Node::start(race_config("127.0.1.13", port, round)).await;
        let mut b = Node::start(race_config("127.0.1.14", port, round)).await;
        let (an, bn) = (a.nid(), b.nid());
        tokio::time::timeout(Duration::from_secs(60), async {
            // Both send at the same moment: both peer tasks connect at once.
            tokio::join!(send_all(&a, bn, round), send_all(&b, an, round));
            let (ra, rb) = tokio::join!(async { receive_all(&mut a).await }, async {
                receive_all(&mut b).await
            });
            let ((), ()) = (ra, rb);
            let (ca, cb) = tokio::join!(async { completions(&mut a).await }, async {
                completions(&mut b).await
            });
            let ((), ()) = (ca, cb);
        })
        .await
        .unwrap_or_else(|_| panic!("round {round} took too long"));
        let (sa, sb) = one_set(&a, &b).await;
        // Still one set a moment later: no late duplicate joined.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (sa2, sb2) = one_set(&a, &b).await;
        assert_eq!(
            (
                sa.conns.len(),
                sb.conns.len(),
                sa2.conns.len(),
                sb2.conns.len()
            ),
            (3, 3, 3, 3),
            "round {round}"
        );
        // The race happened (refused HELLOs), and it closed nothing else.
        for stats in [a.lnd.stats(), b.lnd.stats()] {
            refused += stats.closed(CloseReason::HandshakeRefused);
            let other: u64 = stats
                .closes
                .iter()
                .filter(|(r, _)| **r != CloseReason::HandshakeRefused)
                .map(|(_, n)| n)
                .sum();
            assert_eq!(other, 0, "round {round}: {stats:?}");
        }
        a.lnd.stop().await;
        b.lnd.stop().await;
    }
    assert!(
        refused > 0,
        "the connects never raced in {MAX_ROUNDS} rounds"
    );
}
