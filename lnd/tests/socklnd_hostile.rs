//! Hostile peers against a socklnd acceptor while a well-behaved peer sends PUTs: from one
//! address, connections that drip the acceptor request a byte every 300 ms (the whole
//! handshake too slow), HELLOs that stop half way, connections that never send a
//! byte, and a flood of a thousand more connections. Each is closed and counted once under
//! its reason (`HandshakeTimeout`, `Timeout`, `HandshakeLimit`, `UnreservedPort`), and the
//! well-behaved peer, on another address, gets every PUT through meanwhile (its
//! throughput, with and without the hostile load, is printed, not asserted). Own port
//! 20300; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use lnd::socklnd::handshake::connect_reserved;
use lnd::socklnd::{CloseReason, SockLnd};
use lnd::LndHandler;
use lnet::acceptor::AcceptorRequest;
use lnet::health::HealthStatus;
use socklnd_support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

const PORT: u16 = 20_300;
const HOSTILE: &str = "127.0.6.9";
/// Handshakes in progress allowed per address in this test.
const LIMIT: usize = 8;
/// Connections of the flood (reserved ports) and of the flood beyond (unreserved ports).
const FLOOD_RESERVED: usize = 300;
const FLOOD_UNRESERVED: usize = 700;
/// PUTs of the well-behaved peer per round, and their size.
const PUTS: u64 = 200;
const PUT_BYTES: usize = 64 * 1024;

/// The closes of these reasons so far.
fn closed<H: LndHandler>(lnd: &SockLnd<H>, reasons: &[CloseReason]) -> u64 {
    let stats = lnd.stats();
    reasons.iter().map(|r| stats.closed(*r)).sum()
}

/// Waits (bounded) until the closes of `reasons` reach `want`.
async fn wait_closed<H: LndHandler>(lnd: &SockLnd<H>, reasons: &[CloseReason], want: u64) {
    let r = tokio::time::timeout(WAIT, async {
        while closed(lnd, reasons) < want {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "{reasons:?}: {} of {want}: {:?}",
        closed(lnd, reasons),
        lnd.stats()
    );
}

async fn reserved(to: SocketAddr) -> TcpStream {
    connect_reserved(HOSTILE.parse().unwrap(), to, WAIT)
        .await
        .unwrap()
}

async fn unreserved(to: SocketAddr) -> Option<TcpStream> {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(HOSTILE.parse::<IpAddr>().unwrap(), 0))
        .unwrap();
    s.connect(to).await.ok()
}

/// `b` sends `PUTS` PUTs to `a`; returns the MB/s (payload) it took, after checking every
/// one completed OK and arrived once, intact.
async fn puts(b: &mut Node, a: &mut Node, first_id: u64) -> f64 {
    let clock = tokio::time::Instant::now();
    let (an, bn) = (a.nid(), b.nid());
    let send = async {
        for i in first_id..first_id + PUTS {
            let payload = pattern(PUT_BYTES, i as u8);
            b.send(i, an, put(bn, an, &payload, false), payload).await;
        }
        for _ in 0..PUTS {
            let done = b.completion().await;
            assert_eq!(done.status, HealthStatus::Ok, "{done:?}");
        }
    };
    let recv = async {
        for _ in 0..PUTS {
            let m = a.message().await;
            assert_eq!(m.payload.len(), PUT_BYTES);
            assert_eq!(m.payload, pattern(PUT_BYTES, m.payload[0]));
        }
    };
    tokio::join!(send, recv);
    let secs = clock.elapsed().as_secs_f64();
    (PUTS as f64 * PUT_BYTES as f64) / secs / 1e6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_connections_are_cut_and_counted_while_a_good_peer_sends() {
    let mut cfg = config("127.0.6.1", PORT);
    // Each read may take 5 s (the kernel's accept_timeout); the whole handshake 2 s.
    cfg.accept_timeout = Duration::from_secs(5);
    cfg.handshake_timeout = Duration::from_secs(2);
    cfg.max_handshakes_per_addr = LIMIT;
    let mut a = Node::start(cfg).await;
    let mut b = Node::start(config("127.0.6.2", PORT)).await;
    let addr = a.lnd.local_addr().unwrap();
    let request = AcceptorRequest::new(a.nid()).unwrap().encode().unwrap();

    let quiet = puts(&mut b, &mut a, 0).await;

    // LIMIT drippers hold every handshake slot of the hostile address: a byte of the
    // acceptor request every 300 ms, each read in time, the whole never in time.
    let drippers: Vec<_> = (0..LIMIT)
        .map(|_| {
            let request = request.clone();
            tokio::spawn(async move {
                let mut s = reserved(addr).await;
                for byte in request.iter().cycle().take(40) {
                    if s.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            })
        })
        .collect();
    // Wait (bounded) until the acceptor holds them all: then the flood meets the limit.
    wait_for_slots_held(&a.lnd, addr).await;

    // The flood, and the good peer's PUTs at the same time.
    let flood = async {
        let mut held = Vec::new();
        for _ in 0..FLOOD_RESERVED {
            held.push(reserved(addr).await);
        }
        for _ in 0..FLOOD_UNRESERVED {
            if let Some(s) = unreserved(addr).await {
                held.push(s);
            }
        }
        held
    };
    let (held, busy) = tokio::join!(flood, puts(&mut b, &mut a, PUTS));
    wait_closed(&a.lnd, &[CloseReason::HandshakeTimeout], LIMIT as u64).await;
    for d in drippers {
        d.await.unwrap();
    }
    // Every flood connection is closed and counted once: by the limit while the drippers
    // held the slots, by the port check or a timeout if it found a free slot.
    let flood_reasons = [
        CloseReason::HandshakeLimit,
        CloseReason::UnreservedPort,
        CloseReason::Timeout,
        CloseReason::HandshakeTimeout,
    ];
    let total = (LIMIT + held.len()) as u64;
    wait_closed(&a.lnd, &flood_reasons, total).await;
    assert!(closed(&a.lnd, &[CloseReason::HandshakeLimit]) > 0);

    // A HELLO that stops half way and a connection that never sends: cut by the
    // handshake timeout (or a read timeout, whichever comes first).
    let cut = [CloseReason::Timeout, CloseReason::HandshakeTimeout];
    let before = closed(&a.lnd, &cut);
    let mut half = reserved(addr).await;
    half.write_all(&request).await.unwrap();
    half.write_all(&[0xAC, 0xCE]).await.unwrap();
    let _silent = reserved(addr).await;
    wait_closed(&a.lnd, &cut, before + 2).await;

    // The good peer still gets through, after all of it.
    let after = puts(&mut b, &mut a, 2 * PUTS).await;
    println!(
        "good peer, {PUTS} PUTs of {PUT_BYTES} B: {quiet:.1} MB/s alone, {busy:.1} MB/s \
         during a flood of {} connections, {after:.1} MB/s after; closes: {:?}",
        held.len() + LIMIT,
        a.lnd.stats()
    );
    drop(held);
}

/// Waits (bounded) until `LIMIT` handshakes of the hostile address are in progress: a
/// probe connection from it is then closed by the limit.
async fn wait_for_slots_held<H: LndHandler>(lnd: &SockLnd<H>, addr: SocketAddr) {
    let r = tokio::time::timeout(WAIT, async {
        loop {
            let before = closed(lnd, &[CloseReason::HandshakeLimit]);
            let probe = unreserved(addr).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(probe);
            if closed(lnd, &[CloseReason::HandshakeLimit]) > before {
                return;
            }
        }
    })
    .await;
    assert!(r.is_ok(), "the drippers never held the slots");
}
