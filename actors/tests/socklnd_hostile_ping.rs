//! A well-behaved node pings a router-like node over socklnd and sends it PUTs with ACKs
//! while a hostile address holds connections open against the same acceptor: as many
//! silent handshakes as the per-address limit allows, and hundreds more that the limit
//! closes at once. The ping answers with the target's NIDs and every PUT ends with its ACK
//! and arrives intact (the time taken is printed, not asserted). Own port 21990; every
//! wait is bounded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::{MdSpec, MsgEventKind, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::config::DEFAULT_MAX_HANDSHAKES_PER_ADDR;
use lnd::socklnd::handshake::connect_reserved;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 21_990;
const WAIT: Duration = Duration::from_secs(60);
/// Connections the hostile address opens beyond the limit.
const EXTRA: usize = 300;
const PUTS: u8 = 20;

fn config(ip: [u8; 4]) -> SockLndConfig {
    let addr = Ipv4Addr::from(ip);
    let mut c = SockLndConfig::new(
        format!("{addr}@tcp").parse().unwrap(),
        (0x40571 << 32) | u64::from(u32::from(addr)),
    );
    c.listen = Some(SocketAddr::new(IpAddr::V4(addr), PORT));
    c.peer_port = PORT;
    c
}

async fn node(ip: [u8; 4]) -> (Node, Nid) {
    let node = Node::start(NodeConfig::default());
    let nid = node
        .add_ni::<SockLnd<NodeHandler>>(config(ip), 8)
        .await
        .unwrap();
    (node, nid)
}

#[actix::test]
async fn ping_and_puts_complete_while_a_hostile_address_holds_connections() {
    timeout(WAIT, async {
        let (a, _an) = node([127, 0, 7, 1]).await;
        let (b, bn) = node([127, 0, 7, 2]).await;
        let target = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 7, 2)), PORT);
        let hostile = Ipv4Addr::new(127, 0, 7, 9);
        // Silent connections from reserved ports: the first ones hold every handshake slot
        // of the address until the accept timeout; the rest are closed by the limit.
        let mut held = Vec::new();
        for _ in 0..DEFAULT_MAX_HANDSHAKES_PER_ADDR + EXTRA {
            held.push(connect_reserved(hostile, target, WAIT).await.unwrap());
        }

        let clock = tokio::time::Instant::now();
        let reply = a.ping(bn, Duration::from_secs(20)).await.unwrap();
        assert_eq!(reply.from, bn);
        let ping_ms = clock.elapsed().as_millis();

        let mut delivered = b
            .attach(MdSpec {
                portal: 4,
                match_bits: 7,
                data: Bytes::new(),
                depth: 64,
            })
            .await
            .unwrap();
        let clock = tokio::time::Instant::now();
        for i in 0..PUTS {
            let events = a
                .put(PutRequest {
                    dest: bn,
                    portal: 4,
                    match_bits: 7,
                    hdr_data: 0,
                    payload: Bytes::from(vec![i; 4096]),
                    ack: true,
                    timeout: Duration::from_secs(20),
                })
                .await
                .unwrap()
                .finish()
                .await;
            let kinds: Vec<_> = events.iter().map(|e| (e.kind, e.status.is_ok())).collect();
            assert_eq!(
                kinds,
                [(MsgEventKind::Send, true), (MsgEventKind::Ack, true)],
                "{events:?}"
            );
            let m = delivered.recv().await.unwrap();
            assert_eq!(&m.payload[..], &[i; 4096][..]);
        }
        println!(
            "with {} hostile connections opened: ping {ping_ms} ms, {PUTS} PUTs of 4 KiB \
             with ACKs in {} ms",
            held.len(),
            clock.elapsed().as_millis()
        );
        drop(held);
    })
    .await
    .expect("bounded");
}
