//! A router over real socklnd forwards messages with no payload (0-byte PUTs and their
//! ACKs), which its connections hand up whole, in one call: a pipelined burst goes on its
//! fast path and every message arrives once and is ACKed. With one router-buffer credit
//! per peer NI and the router's sends to B held 20 ms each (a fault rule, which also keeps
//! them off the fast path), the burst waits for its credits on the connection it came on,
//! and again every message arrives once. Own addresses 127.0.91/92.x, port 22991.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::{MdSpec, NiCredits, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::fault::{FaultPath, FaultRule, FaultTrigger, NidMatch};
use lnet::route::RouteSpec;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 22_991;
const WAIT: Duration = Duration::from_secs(60);
const PUTS: u32 = 200;

const A: &str = "127.0.91.2@tcp";
const RA: &str = "127.0.91.1@tcp";
const RB: &str = "127.0.92.1@tcp1";
const B: &str = "127.0.92.2@tcp1";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn config(n: Nid) -> SockLndConfig {
    let addr = Ipv4Addr::from(n.addr_u32().unwrap());
    let mut c = SockLndConfig::new(n, (0x5EED << 32) | u64::from(u32::from(addr)));
    c.listen = Some(SocketAddr::new(IpAddr::V4(addr), PORT));
    c.peer_port = PORT;
    c
}

async fn node(routing: bool, nis: &[(&str, NiCredits)]) -> Node {
    let mut tunables = Tunables::default();
    if routing {
        tunables.set(TunableName::Routing, 1).unwrap();
    }
    let node = Node::start(NodeConfig {
        tunables,
        ..NodeConfig::default()
    });
    for (n, credits) in nis {
        node.add_ni::<SockLnd<NodeHandler>>(config(nid(n)), *credits)
            .await
            .unwrap();
    }
    node
}

fn credits(peer_buffer_credits: Option<u32>) -> NiCredits {
    NiCredits {
        credits: 256,
        peer_credits: Some(64),
        peer_buffer_credits,
        peer_timeout: None,
    }
}

fn route(net: &str, gw: &str) -> RouteSpec {
    RouteSpec {
        net: net.parse().unwrap(),
        gateway: nid(gw),
        hops: Some(1),
        priority: 0,
    }
}

fn empty_put(dest: &str, i: u32) -> PutRequest {
    PutRequest {
        dest: nid(dest),
        portal: 4,
        match_bits: 9,
        hdr_data: u64::from(i),
        payload: Bytes::new(),
        ack: true,
        timeout: Duration::from_secs(30),
    }
}

/// Sends `PUTS` 0-byte PUTs with ACKs from `a` to B, numbered from `first`, all before
/// waiting for any, and checks that each is ACKed and arrives at B once.
async fn burst(a: &Node, delivered: &mut tokio::sync::mpsc::Receiver<lnd::RxMessage>, first: u32) {
    let mut txns = Vec::new();
    for i in first..first + PUTS {
        txns.push(a.put(empty_put(B, i)).await.unwrap());
    }
    for txn in txns {
        let got = txn.finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..PUTS {
        let m = delivered.recv().await.unwrap();
        assert!(m.payload.is_empty());
        let lnet::Message::Put { hdr_data, .. } = m.header.msg else {
            panic!("not a PUT: {m:?}");
        };
        assert!(
            (u64::from(first)..u64::from(first + PUTS)).contains(&hdr_data),
            "{hdr_data}"
        );
        assert!(seen.insert(hdr_data), "delivered twice");
    }
    assert!(delivered.try_recv().is_err());
}

#[actix::test]
async fn empty_puts_and_acks_go_whole_on_the_fast_path_or_wait_for_credits_and_all_arrive() {
    timeout(WAIT, async {
        // One router-buffer credit for each peer NI on tcp.
        let r = node(true, &[(RA, credits(Some(1))), (RB, credits(None))]).await;
        let a = node(false, &[(A, credits(None))]).await;
        let b = node(false, &[(B, credits(None))]).await;
        a.add_route(route("tcp1", RA)).await.unwrap();
        b.add_route(route("tcp", RB)).await.unwrap();
        let mut delivered = b
            .attach(MdSpec {
                portal: 4,
                match_bits: 9,
                data: Bytes::new(),
                depth: 2 * PUTS as usize + 1,
            })
            .await
            .unwrap();
        // The first PUT brings the routes and peers up.
        let first = a.put(empty_put(B, 0)).await.unwrap().finish().await;
        assert!(first.iter().all(|e| e.status.is_ok()), "{first:?}");
        assert!(delivered.recv().await.unwrap().payload.is_empty());

        let before = r.forwarding().fast;
        burst(&a, &mut delivered, 1).await;
        let forwarded = r.forwarding();
        assert!(
            forwarded.fast - before >= u64::from(2 * PUTS),
            "{forwarded:?}: PUTs and ACKs on the fast path"
        );

        // Each send to B held: A's next PUT waits for its one credit.
        r.add_fault_rule(
            FaultRule::delay(NidMatch::Any, NidMatch::Nid(nid(B)), FaultTrigger::All, 20)
                .at(nid(RB))
                .on(FaultPath::Send),
        )
        .unwrap();
        burst(&a, &mut delivered, 1 + PUTS).await;
        let show = r.routing_show().await.unwrap();
        let a_credits = show
            .buffers
            .peers
            .iter()
            .find(|(n, _)| *n == nid(A))
            .unwrap()
            .1;
        assert_eq!(a_credits.max, 1, "{show:?}");
        assert!(a_credits.mincredits < 0, "nothing waited: {show:?}");
        // Every credit and tiny buffer is back.
        assert_eq!(a_credits.credits, 1, "A's credit back: {show:?}");
        let tiny = show.buffers.cpts[0][0];
        assert_eq!(
            tiny.credits,
            i32::try_from(tiny.nbuffers).unwrap(),
            "{show:?}"
        );
        assert_eq!(show.buffers.waiting, 0);
    })
    .await
    .expect("bounded");
}
