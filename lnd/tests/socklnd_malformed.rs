//! Malformed peers, one connection each, against an NI that at the same time carries a
//! healthy connection: every bad connection is closed alone, counted under its reason in
//! [`lnd::socklnd::SockLnd::stats`], and the healthy traffic loses nothing (checksummed
//! payloads, each delivered exactly once). Own ports 20100..; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use lnd::socklnd::handshake::connect_reserved;
use lnd::socklnd::wire::{ConnType, KsockHeader};
use lnd::socklnd::{CloseReason, SockLnd};
use lnd::LndHandler;
use lnet::acceptor::AcceptorRequest;
use lnet::health::HealthStatus;
use lnet::{Message, Nid, LNET_MTU};
use socklnd_support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Waits until `lnd` counted `reason` `want` times.
async fn wait_count<H: LndHandler>(lnd: &SockLnd<H>, reason: CloseReason, want: u64) {
    let r = tokio::time::timeout(WAIT, async {
        loop {
            if lnd.stats().closed(reason) >= want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "{reason:?} not counted {want} times: {:?}",
        lnd.stats()
    );
}

/// A raw TCP connection to `addr` from `ip` and a reserved port.
async fn raw(ip: &str, addr: std::net::SocketAddr) -> TcpStream {
    connect_reserved(ip.parse().unwrap(), addr, WAIT)
        .await
        .unwrap()
}

fn acceptor_request(to: Nid) -> Vec<u8> {
    AcceptorRequest::new(to).unwrap().encode().unwrap()
}

/// A PUT header whose payload length is `len`, from `src` to `dst` (no payload built).
fn put_of_len(src: Nid, dst: Nid, len: u32) -> lnet::Header {
    let mut h = put(src, dst, b"", false);
    h.payload_length = len;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_malformed_peer_closes_only_its_connection() {
    let mut cfg = config("127.0.1.1", 20100);
    cfg.timeout = Duration::from_millis(700);
    cfg.accept_timeout = Duration::from_millis(700);
    let a = Node::start(cfg).await;
    let b = Node::start(config("127.0.1.2", 20100)).await;
    let (an, bn) = (a.nid(), b.nid());
    let addr = a.lnd.local_addr().unwrap();
    let Node {
        lnd: a_lnd,
        msgs: mut a_msgs,
        ..
    } = a;
    let Node {
        lnd: b_lnd,
        done: mut b_done,
        ..
    } = b;

    let bad_done = AtomicBool::new(false);
    let (total_tx, mut total_rx) = watch::channel(None::<usize>);

    // The healthy connection: B sends checksummed PUTs to A until the bad peers are done.
    let sender = async {
        let mut n = 0usize;
        while n < 50 || !bad_done.load(Ordering::Acquire) {
            let mut payload = (n as u64).to_le_bytes().to_vec();
            payload.extend_from_slice(&pattern(n * 37 % 9000, n as u8));
            let payload = Bytes::from(payload);
            let header = put(bn, an, &payload, false);
            let tx = lnd::TxRequest {
                id: lnd::TxId(n as u64),
                peer: an,
                header,
                payload,
            };
            tokio::time::timeout(WAIT, lnd::Lnd::send(&b_lnd, tx))
                .await
                .expect("send waited too long")
                .unwrap();
            n += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        total_tx.send(Some(n)).unwrap();
        let mut ids = HashSet::new();
        for _ in 0..n {
            let done = next(&mut b_done).await;
            assert_eq!(done.status, HealthStatus::Ok, "{done:?}");
            assert!(ids.insert(done.id), "{:?} completed twice", done.id);
        }
    };
    let receiver = async {
        let mut seen = HashSet::new();
        loop {
            if let Some(total) = *total_rx.borrow() {
                if seen.len() >= total {
                    break;
                }
            }
            tokio::select! {
                m = tokio::time::timeout(WAIT, a_msgs.recv()) => {
                    let m = m.expect("healthy traffic stalled").expect("channel closed");
                    let Message::Put { hdr_data, .. } = m.header.msg else {
                        panic!("not a PUT");
                    };
                    assert_eq!(u64::from(crc32fast::hash(&m.payload)), hdr_data);
                    let id = u64::from_le_bytes(m.payload[..8].try_into().unwrap());
                    assert!(seen.insert(id), "message {id} delivered twice");
                }
                _ = total_rx.changed() => {}
            }
        }
        let total = total_rx.borrow().unwrap();
        assert_eq!(seen, (0..total as u64).collect::<HashSet<_>>());
    };

    let bad = async {
        // Garbage before the acceptor request.
        let mut s = raw("127.0.1.3", addr).await;
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(closed_by_peer(&mut s, 0).await);
        wait_count(&a_lnd, CloseReason::BadAcceptorRequest, 1).await;

        // Bad HELLO magic.
        let mut s = raw("127.0.1.3", addr).await;
        let mut bytes = acceptor_request(an);
        bytes.extend_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF, 3, 0, 0, 0]);
        bytes.extend_from_slice(&[0; 48]);
        s.write_all(&bytes).await.unwrap();
        assert!(closed_by_peer(&mut s, 0).await);
        wait_count(&a_lnd, CloseReason::BadHello, 1).await;

        // Wrong HELLO version: the kernel answers its own HELLO (ctype NONE), then closes.
        let mut s = raw("127.0.1.3", addr).await;
        let mut bytes = acceptor_request(an);
        bytes.extend_from_slice(&[0x63, 0x69, 0x72, 0x45, 5, 0, 0, 0]);
        bytes.extend_from_slice(&[0; 48]);
        s.write_all(&bytes).await.unwrap();
        assert!(closed_by_peer(&mut s, 56).await);
        wait_count(&a_lnd, CloseReason::BadHello, 2).await;

        // Oversize payload_length (LNET_MTU + 1) on an established connection.
        let fake = nid("127.0.1.4@tcp");
        let mut c = dial(fake, an, addr, ConnType::Control).await;
        let h = put_of_len(fake, an, LNET_MTU + 1);
        let mut frame = KsockHeader::lnet().encode().to_vec();
        h.encode_into(lnet::HeaderForm::Nid4, &mut frame).unwrap();
        c.stream.write_all(&frame).await.unwrap();
        assert!(closed_by_peer(&mut c.stream, 0).await);
        wait_count(&a_lnd, CloseReason::BadLnetHeader, 1).await;

        // Truncated frame: EOF in the middle of a payload.
        let fake = nid("127.0.1.5@tcp");
        let mut c = dial(fake, an, addr, ConnType::Control).await;
        let payload = pattern(1000, 1);
        let frame = lnet_frame(
            KsockHeader::lnet(),
            &put(fake, an, &payload, false),
            &payload,
        );
        c.stream.write_all(&frame[..500]).await.unwrap();
        c.stream.shutdown().await.unwrap();
        assert!(closed_by_peer(&mut c.stream, 0).await);
        wait_count(&a_lnd, CloseReason::Truncated, 1).await;

        // Stall mid-frame past the socklnd timeout.
        let fake = nid("127.0.1.6@tcp");
        let mut c = dial(fake, an, addr, ConnType::Control).await;
        c.stream.write_all(&frame[..150]).await.unwrap();
        assert!(closed_by_peer(&mut c.stream, 0).await);
        wait_count(&a_lnd, CloseReason::Timeout, 1).await;

        bad_done.store(true, Ordering::Release);
    };

    tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(sender, receiver, bad);
    })
    .await
    .expect("test took too long");

    // Each bad connection was counted once, under its own reason, and nothing else
    // closed: the healthy connection set is still up.
    let stats = a_lnd.stats();
    assert_eq!(
        stats.closed(CloseReason::BadAcceptorRequest),
        1,
        "{stats:?}"
    );
    assert_eq!(stats.closed(CloseReason::BadHello), 2, "{stats:?}");
    assert_eq!(stats.closed(CloseReason::BadLnetHeader), 1, "{stats:?}");
    assert_eq!(stats.closed(CloseReason::Truncated), 1, "{stats:?}");
    assert_eq!(stats.closed(CloseReason::Timeout), 1, "{stats:?}");
    assert_eq!(stats.protocol_errors(), 5, "{stats:?}");
    assert_eq!(
        b_lnd.stats().closes.values().sum::<u64>(),
        0,
        "{:?}",
        b_lnd.stats()
    );
    let peer = a_lnd.peer_stats(bn).await.unwrap();
    assert_eq!(peer.conns.len(), 3, "{peer:?}");
    lnd::Lnd::stop(a_lnd).await;
    lnd::Lnd::stop(b_lnd).await;
}
