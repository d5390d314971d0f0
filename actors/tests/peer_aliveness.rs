//! The peer NI aliveness rule of a router over real socklnd on loopback: A on tcp, the
//! router R on tcp and tcp1, and B's NID on tcp1 where nothing listens. R's LND reports
//! B gone once its connection is refused; from then on, with its tcp1 net's
//! `peer_timeout` above 0, R drops what it forwards to B with `EHOSTUNREACH` without
//! trying to reach it; with `peer_timeout` 0 it tries each time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::events::{Event, ForwardDrop};
use actors::{NiCredits, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::config::PeerNiState;
use lnet::netcheck::NetCheckMode;
use lnet::route::RouteSpec;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::sync::broadcast;
use tokio::time::timeout;

const PORT: u16 = 21_989;
const WAIT: Duration = Duration::from_secs(90);
/// PUTs sent at most before the rule must have dropped one.
const PUTS: usize = 12;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn sock(n: Nid) -> SockLndConfig {
    let ip = Ipv4Addr::from(n.addr_u32().unwrap());
    let mut c = SockLndConfig::new(n, (0xA11E << 32) | u64::from(u32::from(ip)));
    c.listen = Some(SocketAddr::new(IpAddr::V4(ip), PORT));
    c.peer_port = PORT;
    c
}

fn config(routing: bool) -> NodeConfig {
    let mut tunables = Tunables::default();
    if routing {
        tunables.set(TunableName::Routing, 1).unwrap();
    }
    NodeConfig {
        tunables,
        // The nets stay up while the test runs.
        net_check: NetCheckMode::KERNEL,
        ..NodeConfig::default()
    }
}

struct Setup {
    a: Node,
    a_nid: Nid,
    r: Node,
    b: Nid,
}

/// A on 127.0.x.1@tcp, R on 127.0.x.2@tcp and 127.0.y.2@tcp1 (tcp1's `peer_timeout` as
/// given), B's NID 127.0.y.1@tcp1 with nothing behind it, a peer R is configured with.
async fn setup(x: u8, y: u8, peer_timeout: u32) -> Setup {
    let r = Node::start(config(true));
    let r_tcp = nid(&format!("127.0.{x}.2@tcp"));
    r.add_ni::<SockLnd<NodeHandler>>(sock(r_tcp), 64)
        .await
        .unwrap();
    let tcp1 = NiCredits {
        credits: 64,
        peer_credits: None,
        peer_buffer_credits: None,
        peer_timeout: Some(peer_timeout),
    };
    r.add_ni::<SockLnd<NodeHandler>>(sock(nid(&format!("127.0.{y}.2@tcp1"))), tcp1)
        .await
        .unwrap();
    let a = Node::start(config(false));
    let a_nid = nid(&format!("127.0.{x}.1@tcp"));
    a.add_ni::<SockLnd<NodeHandler>>(sock(a_nid), 64)
        .await
        .unwrap();
    a.add_route(RouteSpec {
        net: "tcp1".parse().unwrap(),
        gateway: r_tcp,
        hops: None,
        priority: 0,
    })
    .await
    .unwrap();
    // B is a configured peer of R, so that R shows its peer NI.
    let b = nid(&format!("127.0.{y}.1@tcp1"));
    r.add_peer(b, vec![b], false).await.unwrap();
    Setup { a, a_nid, r, b }
}

/// A PUT from A to B, without ACK (A's part ends once R has it).
async fn put(a: &Node, b: Nid) {
    let req = PutRequest {
        dest: b,
        portal: 4,
        match_bits: 9,
        hdr_data: 0,
        payload: Bytes::from_static(&[7; 64]),
        ack: false,
        timeout: Duration::from_secs(20),
    };
    let _ = a.put(req).await.unwrap().finish().await;
}

/// The reason of R's next forward drop.
async fn next_drop(events: &mut broadcast::Receiver<Event>) -> ForwardDrop {
    loop {
        match events.recv().await {
            Ok(Event::ForwardDropped { reason, .. }) => return reason,
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => panic!("R's event bus closed"),
        }
    }
}

/// `state:` of peer NI `nid` in the router's `peer show`.
async fn peer_ni_state(r: &Node, nid: Nid) -> PeerNiState {
    r.peer_show()
        .await
        .unwrap()
        .peers
        .iter()
        .flat_map(|p| p.nis.iter())
        .find(|n| n.nid == nid)
        .map(|n| n.state)
        .unwrap()
}

#[actix::test]
async fn a_router_drops_forwards_to_a_peer_ni_its_lnd_reported_gone_while_peer_timeout_is_set() {
    timeout(WAIT, async {
        let s = setup(7, 8, 180).await;
        let mut events = s.r.events().subscribe();
        let mut reasons = Vec::new();
        for _ in 0..PUTS {
            put(&s.a, s.b).await;
            let reason = next_drop(&mut events).await;
            reasons.push(reason);
            if reason == ForwardDrop::PeerNotAlive {
                break;
            }
        }
        // The first one was tried (its connection refused), then B's peer NI is DOWN.
        assert!(
            matches!(reasons.first(), Some(ForwardDrop::SendFailed(_))),
            "{reasons:?}"
        );
        assert_eq!(
            reasons.last(),
            Some(&ForwardDrop::PeerNotAlive),
            "{reasons:?}"
        );
        // Counted on the node and on B's peer NI as the kernel counts it.
        let counters = s.r.counters().await.unwrap();
        assert!(counters.get("drop_count").copied().unwrap_or(0) >= 2);
        let peers = s.r.peers().await.unwrap();
        let b = peers
            .iter()
            .flat_map(|p| p.nis.iter())
            .find(|n| n.nid == s.b)
            .unwrap();
        assert!(b.stats.dropped.put >= 1, "{:?}", b.stats);
        // The net shows the timeout it runs with.
        let show = s.r.net_show().await.unwrap();
        let tcp1 = show
            .nets
            .iter()
            .find(|n| n.net_type == "tcp1".parse().unwrap())
            .unwrap();
        assert_eq!(tcp1.nis[0].tunables.peer_timeout, 180);
        // `peer show` gives B's peer NI `state: down`, as the kernel with the rule on;
        // A's, heard from, is up.
        assert_eq!(peer_ni_state(&s.r, s.b).await, PeerNiState::Down);
        assert_eq!(peer_ni_state(&s.r, s.a_nid).await, PeerNiState::Up);
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn with_peer_timeout_zero_a_router_tries_a_peer_ni_its_lnd_reported_gone() {
    timeout(WAIT, async {
        let s = setup(9, 10, 0).await;
        let mut events = s.r.events().subscribe();
        for i in 0..2 {
            put(&s.a, s.b).await;
            let reason = next_drop(&mut events).await;
            assert!(
                matches!(reason, ForwardDrop::SendFailed(_)),
                "PUT {i}: {reason:?}"
            );
        }
        let show = s.r.net_show().await.unwrap();
        let tcp1 = show
            .nets
            .iter()
            .find(|n| n.net_type == "tcp1".parse().unwrap())
            .unwrap();
        assert_eq!(tcp1.nis[0].tunables.peer_timeout, 0);
        // The rule off and B no gateway: `state: NA`, as the kernel shows it.
        assert_eq!(peer_ni_state(&s.r, s.b).await, PeerNiState::NotApplicable);
    })
    .await
    .expect("bounded");
}
