//! Two end nodes over real socklnd on loopback addresses: each has two tcp NIs; the first
//! node also believes in a third NID of its peer that nothing listens on, so every PUT
//! sent towards it fails with a refused connection (REMOTE_DROPPED) and is resent to a
//! live peer NI, and still ends with its ACK.

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
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 21_988;
const WAIT: Duration = Duration::from_secs(60);

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn config(ip: [u8; 4]) -> SockLndConfig {
    let addr = Ipv4Addr::from(ip);
    let mut c = SockLndConfig::new(
        nid(&format!("{addr}@tcp")),
        (0x5EED << 32) | u64::from(u32::from(addr)),
    );
    c.listen = Some(SocketAddr::new(IpAddr::V4(addr), PORT));
    c.peer_port = PORT;
    c
}

async fn node(ips: &[[u8; 4]]) -> (Node, Vec<Nid>) {
    let node = Node::start(NodeConfig::default());
    let mut nids = Vec::new();
    for ip in ips {
        nids.push(
            node.add_ni::<SockLnd<NodeHandler>>(config(*ip), 8)
                .await
                .unwrap(),
        );
    }
    (node, nids)
}

#[actix::test]
async fn put_and_ack_over_socklnd_survive_a_failing_ni_pair() {
    timeout(WAIT, async {
        let (a, _an) = node(&[[127, 0, 3, 1], [127, 0, 3, 2]]).await;
        let (b, bn) = node(&[[127, 0, 4, 1], [127, 0, 4, 2]]).await;
        let mut delivered = b
            .attach(MdSpec {
                portal: 4,
                match_bits: 9,
                data: Bytes::new(),
                depth: 16,
            })
            .await
            .unwrap();
        let ghost = nid("127.0.4.3@tcp");
        let mut all = bn.clone();
        all.push(ghost);
        a.add_peer(bn[0], all, true).await.unwrap();
        for i in 0..6u8 {
            let got = a
                .put(PutRequest {
                    dest: bn[0],
                    portal: 4,
                    match_bits: 9,
                    hdr_data: 0,
                    payload: Bytes::from(vec![i; 100]),
                    ack: true,
                    timeout: Duration::from_secs(20),
                })
                .await
                .unwrap()
                .finish()
                .await;
            let kinds: Vec<_> = got.iter().map(|e| (e.kind, e.status.is_ok())).collect();
            assert_eq!(
                kinds,
                [(MsgEventKind::Send, true), (MsgEventKind::Ack, true)],
                "{got:?}"
            );
            let m = delivered.recv().await.unwrap();
            assert_eq!(&m.payload[..], &[i; 100][..]);
        }
        assert!(delivered.try_recv().is_err());
        let counters = a.counters().await.unwrap();
        assert!(counters.get("resend_count").copied().unwrap_or(0) >= 1);
        let peers = a.peers().await.unwrap();
        let ghost_view = peers[0].nis.iter().find(|n| n.nid == ghost).unwrap();
        assert!(ghost_view.health.get() < 1000);
    })
    .await
    .expect("bounded");
}
