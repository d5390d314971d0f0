//! Kernel behaviours around a connection that ends (kernel-observations.md, observation
//! 1): its sibling connections to the same peer close with it; messages not yet written
//! are sent again on a new connection set, the ones being written fail, nothing is sent
//! twice; and when nothing is left to reach the peer the upper layer hears that it is
//! down. Own ports 20101..; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use lnd::socklnd::wire::ConnType;
use lnd::socklnd::CloseReason;
use lnd::{Lnd, TxId, TxRequest};
use lnet::health::HealthStatus;
use socklnd_support::*;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// A payload that starts with its id.
fn numbered(id: u64, len: usize) -> Bytes {
    let mut p = id.to_le_bytes().to_vec();
    p.extend_from_slice(&pattern(len.saturating_sub(8), id as u8));
    p.into()
}

/// Reads frames off `s` until it ends, passing the ids of whole, intact LNET frames on.
fn drain_ids(mut s: TcpStream, out: mpsc::Sender<u64>) {
    tokio::spawn(async move {
        while let Ok(Ok(frame)) = tokio::time::timeout(WAIT, read_frame(&mut s)).await {
            if let Frame::Lnet(_, h, payload) = frame {
                let lnet::Message::Put { hdr_data, .. } = h.msg else {
                    panic!("not a PUT");
                };
                assert_eq!(u64::from(crc32fast::hash(&payload)), hdr_data);
                let id = u64::from_le_bytes(payload[..8].try_into().unwrap());
                if out.send(id).await.is_err() {
                    return;
                }
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn siblings_close_together_and_unsent_messages_go_on_a_new_set() {
    let a = Node::start(config("127.0.1.9", 20102)).await;
    let an = a.nid();
    let fake = nid("127.0.1.10@tcp");
    let listener = listen("127.0.1.10:20102").await;
    let Node {
        lnd,
        mut done,
        mut downs,
        ..
    } = a;
    const N: u64 = 24;
    const LEN: usize = 1 << 20;

    // 24 MiB to a peer that does not read: the writer stalls with sends queued.
    let sending = async {
        for id in 0..N {
            let payload = numbered(id, LEN);
            let tx = TxRequest {
                id: TxId(id),
                peer: fake,
                header: put(an, fake, &payload, false),
                payload,
            };
            tokio::time::timeout(WAIT, lnd.send(tx))
                .await
                .expect("send waited too long")
                .unwrap();
        }
    };
    let first_set = async {
        let set = accept_set(&listener, fake, 3).await;
        // Wait until the completions stop coming: the socket buffers are full.
        let mut statuses = HashMap::new();
        loop {
            match tokio::time::timeout(Duration::from_millis(500), done.recv()).await {
                Ok(Some(d)) => assert!(statuses.insert(d.id, d.status).is_none()),
                Ok(None) => panic!("channel closed"),
                Err(_) => break,
            }
        }
        (set, statuses)
    };
    let ((), (set, mut statuses)) = tokio::join!(sending, first_set);
    assert!((statuses.len() as u64) < N, "nothing stalled: {statuses:?}");
    let before_close = statuses.len();
    let stats = lnd.peer_stats(fake).await.unwrap();
    assert_eq!(stats.conns.len(), 3);
    assert!(stats.queued + stats.in_flight > 0, "{stats:?}");

    // The peer closes one connection (A's BULK_IN): A closes the other two as well.
    let (ids_tx, mut ids_rx) = mpsc::channel(1024);
    for a in set {
        if a.hello.ctype == ConnType::BulkIn {
            drop(a.stream);
        } else {
            // Whatever was written whole before the close is still delivered.
            drain_ids(a.stream, ids_tx.clone());
        }
    }
    // A opens a new set for the messages not yet written; this time the peer reads.
    for a in accept_set(&listener, fake, 3).await {
        drain_ids(a.stream, ids_tx.clone());
    }
    drop(ids_tx);
    while (statuses.len() as u64) < N {
        let d = next(&mut done).await;
        assert!(statuses.insert(d.id, d.status).is_none(), "{d:?} twice");
    }
    let ok: HashSet<u64> = statuses
        .iter()
        .filter(|(_, s)| **s == HealthStatus::Ok)
        .map(|(id, _)| id.0)
        .collect();
    for (id, s) in &statuses {
        assert!(
            matches!(s, HealthStatus::Ok | HealthStatus::RemoteDropped),
            "{id:?}: {s}"
        );
    }
    // At most the frame being written on each closed connection failed; the other
    // unfinished ones were sent again on the new set.
    assert!(statuses.len() - ok.len() <= 3, "{statuses:?}");
    assert!(ok.len() > before_close, "nothing was resent: {statuses:?}");
    // Every message reported sent arrives exactly once; failed ones never arrive.
    let mut delivered = HashSet::new();
    while delivered.len() < ok.len() {
        let id = next(&mut ids_rx).await;
        assert!(delivered.insert(id), "message {id} delivered twice");
        assert!(ok.contains(&id), "message {id} arrived but failed");
    }
    let stats = lnd.stats();
    assert_eq!(stats.closed(CloseReason::PeerClosed), 1, "{stats:?}");
    assert_eq!(stats.closed(CloseReason::Sibling), 2, "{stats:?}");
    // Messages waited, so the peer was never down.
    assert!(downs.try_recv().is_err());
    lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upper_layer_hears_when_a_peer_is_down() {
    let a = Node::start(config("127.0.1.11", 20103)).await;
    let an = a.nid();
    let fake = nid("127.0.1.12@tcp");
    let listener = listen("127.0.1.12:20103").await;
    let Node {
        lnd,
        mut done,
        mut downs,
        ..
    } = a;
    let payload = numbered(1, 100);
    let tx = |id| TxRequest {
        id: TxId(id),
        peer: fake,
        header: put(an, fake, &payload, false),
        payload: payload.clone(),
    };
    let (sent, set) = tokio::join!(
        async { tokio::time::timeout(WAIT, lnd.send(tx(1))).await },
        accept_set(&listener, fake, 3)
    );
    sent.unwrap().unwrap();
    assert_eq!(next(&mut done).await.status, HealthStatus::Ok);
    wait_conns(&lnd, fake, 3).await;

    // The peer goes away: one connection closed, the listener gone.
    drop(listener);
    let mut rest = Vec::new();
    for a in set {
        if a.hello.ctype == ConnType::Control {
            drop(a.stream);
        } else {
            rest.push(a.stream);
        }
    }
    for mut s in rest {
        // (The first message may have gone on any of them.)
        assert!(closed_by_peer(&mut s, 1024).await, "a sibling stayed open");
    }
    let down = next(&mut downs).await;
    assert_eq!((down.ni, down.peer), (an, fake));
    assert_eq!(down.status, HealthStatus::RemoteDropped);
    assert!(lnd.peer_stats(fake).await.unwrap().conns.is_empty());

    // A send now finds the peer refusing: it completes with the status of a refused
    // connect, and the peer, already down, is not reported again.
    tokio::time::timeout(WAIT, lnd.send(tx(2)))
        .await
        .unwrap()
        .unwrap();
    let d = next(&mut done).await;
    assert_eq!(d.id, TxId(2));
    assert_eq!(d.status, HealthStatus::RemoteDropped);
    assert!(downs.try_recv().is_err());
    let stats = lnd.stats();
    assert_eq!(stats.closed(CloseReason::Sibling), 2, "{stats:?}");
    assert!(stats.closed(CloseReason::ConnectFailed) >= 1, "{stats:?}");
    lnd.stop().await;
}
