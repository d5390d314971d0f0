//! The active net check of a router over the in-process fabric with a paused clock: a net
//! whose first peer NI appears late is not advertised DOWN while its probe is answered,
//! probe traffic is bounded per net and backs off on a quiet net that answers, it stops
//! while the net carries traffic, a dead peer NI does not make a healthy net DOWN, and
//! `net show` prints the NI of a net advertised DOWN as down, and a net whose peer's
//! message waits here for a router buffer is not silent.
//! Topology: routers on tcp and tcp1, peer B on tcp1 (its probes answered), NIDs on tcp1
//! that no node holds (dead peer NIs), end node A on tcp.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{drop_sends, md, nid, put, Fab, BOUND};

use std::time::Duration;

use actors::events::Event;
use actors::{Node, NodeConfig};
use bytes::Bytes;
use lnd::fabric::{Fabric, FabricConfig};
use lnet::fault::{FaultPath, FaultRule, FaultTrigger, NidMatch};
use lnet::route::RouteSpec;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::sync::broadcast;
use tokio::time::timeout;

const B: &str = "10.0.1.1@tcp1";

async fn start(fabric: &Fabric, routing: bool, nids: &[&str]) -> Node {
    let mut tunables = Tunables::default();
    if routing {
        tunables.set(TunableName::Routing, 1).unwrap();
    }
    let node = Node::start(NodeConfig {
        tunables,
        ..NodeConfig::default()
    });
    for n in nids {
        node.add_ni::<Fab>(FabricConfig::new(fabric, nid(n)), 64)
            .await
            .unwrap();
    }
    node
}

/// A router with an NI on tcp (no peer there) and one on tcp1 (`far`).
async fn router(fabric: &Fabric, near: &str, far: &str) -> Node {
    start(fabric, true, &[near, far]).await
}

async fn probes(node: &Node) -> u64 {
    node.counters()
        .await
        .unwrap()
        .get("net_probes")
        .copied()
        .unwrap_or(0)
}

/// The DOWN events of tcp1 that `rx` holds now.
fn tcp1_downs(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::NetStatus { net, up: false, .. } = &e {
            if *net == nid(B).net {
                out.push(e);
            }
        }
    }
    out
}

async fn add_peers(router: &Node, nids: impl IntoIterator<Item = Nid>) {
    for n in nids {
        router.add_peer(n, vec![n], true).await.unwrap();
    }
}

/// `count` NIDs on tcp1 that no node holds, sorting after B's.
fn dead_peer_nis(count: u32) -> impl Iterator<Item = Nid> {
    (0..count).map(|i| nid(&format!("10.0.{}.{}@tcp1", 2 + i / 200, 1 + i % 200)))
}

#[actix::test]
async fn a_net_whose_first_peer_ni_appears_late_is_not_advertised_down_while_it_answers() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let r = router(&fabric, "10.0.0.2@tcp", "10.0.1.2@tcp1").await;
        let b = start(&fabric, false, &[B]).await;
        // B answers 300 ms late (less than one probe interval).
        b.add_fault_rule(
            FaultRule::delay(NidMatch::Any, NidMatch::Any, FaultTrigger::All, 300)
                .on(FaultPath::Receive),
        )
        .unwrap();
        // tcp1 has no known peer NI for far longer than net_down_after_ms.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(probes(&r).await, 0);
        let mut events = r.events().subscribe();
        add_peers(&r, [nid(B)]).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(probes(&r).await >= 1, "tcp1 was probed");
        let downs = tcp1_downs(&mut events);
        assert!(downs.is_empty(), "a net that answers went DOWN: {downs:?}");
        let info = r.ping_info().await.unwrap();
        let far = info.statuses().find(|(n, _)| n.net == nid(B).net);
        assert!(far.is_some_and(|(_, s)| s.is_up()), "{info:?}");
    })
    .await
    .unwrap();
}

#[actix::test]
async fn probes_are_bounded_per_net_back_off_while_answered_and_stop_while_the_net_is_heard() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let one = router(&fabric, "10.0.0.2@tcp", "10.0.1.2@tcp1").await;
        let many = router(&fabric, "10.0.0.3@tcp", "10.0.1.3@tcp1").await;
        let b = start(&fabric, false, &[B]).await;
        add_peers(&one, [nid(B)]).await;
        add_peers(&many, std::iter::once(nid(B)).chain(dead_peer_nis(999))).await;
        let mut events = many.events().subscribe();
        // A quiet minute: probes answered, ever less often (500 ms, 1, 2, 4, then 8 s).
        tokio::time::sleep(Duration::from_secs(60)).await;
        let (p_one, p_many) = (probes(&one).await, probes(&many).await);
        assert_eq!(p_one, p_many, "1,000 peer NIs cost what one does");
        assert!(
            (8..=12).contains(&p_one),
            "{p_one} probes in 60 s, not ~100"
        );
        assert!(tcp1_downs(&mut events).is_empty());
        // B talks to the routers every 200 ms: no probe while the net is heard.
        let (near_one, near_many) = (nid("10.0.1.2@tcp1"), nid("10.0.1.3@tcp1"));
        for _ in 0..100 {
            b.ping(near_one, Duration::from_secs(1)).await.unwrap();
            b.ping(near_many, Duration::from_secs(1)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(probes(&one).await, p_one);
        assert_eq!(probes(&many).await, p_many);
        // Quiet again: probing starts over at 500 ms.
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(probes(&one).await, p_one + 1);
        assert!(tcp1_downs(&mut events).is_empty());
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_dead_probed_peer_ni_does_not_make_a_net_down_while_another_answers() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let r = router(&fabric, "10.0.0.2@tcp", "10.0.1.2@tcp1").await;
        let _b = start(&fabric, false, &[B]).await;
        // The dead peer NI sorts first: it gets the first probe.
        let dead = nid("10.0.1.0@tcp1");
        let mut events = r.events().subscribe();
        add_peers(&r, [dead, nid(B)]).await;
        tokio::time::sleep(Duration::from_secs(120)).await;
        let downs = tcp1_downs(&mut events);
        assert!(downs.is_empty(), "{downs:?}");
        // The probes stayed on B once the dead peer NI lost one: ~20, not ~240.
        let p = probes(&r).await;
        assert!((10..=25).contains(&p), "{p}");
    })
    .await
    .unwrap();
}

#[actix::test]
async fn net_show_prints_the_ni_of_a_silent_far_net_down_while_it_is_advertised_down() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let r = router(&fabric, "10.0.0.2@tcp", "10.0.1.2@tcp1").await;
        let b = start(&fabric, false, &[B]).await;
        add_peers(&r, [nid(B)]).await;
        let far = nid("10.0.1.2@tcp1");
        let status = |show: &lnet::show::NetShow| {
            show.nets
                .iter()
                .flat_map(|n| n.nis.iter())
                .find(|n| n.nid == far)
                .map(|n| (n.status, n.health_stats.fatal_error))
                .unwrap()
        };
        use lnet::config::NiStatus;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(status(&r.net_show().await.unwrap()), (NiStatus::Up, 0));
        // B stops answering: tcp1 goes silent and is advertised DOWN.
        let mut events = r.events().subscribe();
        let deaf = b
            .add_fault_rule(
                FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All)
                    .on(FaultPath::Receive),
            )
            .unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!tcp1_downs(&mut events).is_empty(), "tcp1 went DOWN");
        let info = r.ping_info().await.unwrap();
        assert!(info.statuses().any(|(n, s)| n == far && !s.is_up()));
        // As the kernel: `status: down` (the link is up: no fatal error).
        assert_eq!(status(&r.net_show().await.unwrap()), (NiStatus::Down, 0));
        // B answers again: up again.
        assert!(b.remove_fault_rule(deaf));
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(status(&r.net_show().await.unwrap()), (NiStatus::Up, 0));
    })
    .await
    .unwrap();
}

/// A router that holds a peer's message, waiting for a router buffer, has heard that
/// peer's net: while it waits the net is not made DOWN, even though the peer answers no
/// probe (as one whose connection the router has stopped reading cannot); once it has moved
/// on, the silent net goes DOWN as before.
#[actix::test]
async fn a_net_whose_message_waits_for_a_router_buffer_is_not_silent() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let r_near = "10.0.0.2@tcp";
        let r_far = "10.0.1.2@tcp1";
        let mut tunables = Tunables::default();
        tunables.set(TunableName::Routing, 1).unwrap();
        tunables.set(TunableName::LargeBuffers, 1).unwrap();
        let r = Node::start(NodeConfig {
            tunables,
            ..NodeConfig::default()
        });
        for n in [r_near, r_far] {
            r.add_ni::<Fab>(FabricConfig::new(&fabric, nid(n)), 64)
                .await
                .unwrap();
        }
        let a = start(&fabric, false, &["10.0.0.1@tcp"]).await;
        let mut at_a = a.attach(md()).await.unwrap();
        let b = start(&fabric, false, &[B]).await;
        let route = |net: &str, gw: &str| RouteSpec {
            net: net.parse().unwrap(),
            gateway: nid(gw),
            hops: Some(1),
            priority: 0,
        };
        a.add_route(route("tcp1", r_near)).await.unwrap();
        b.add_route(route("tcp", r_far)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The router's one large buffer is held 5 s by B's first PUT (its send to A
        // delayed); B's second waits for it.
        r.add_fault_rule(
            FaultRule::delay(
                NidMatch::Nid(nid(B)),
                NidMatch::Any,
                FaultTrigger::All,
                5000,
            )
            .on(FaultPath::Send),
        )
        .unwrap();
        let large = |n: u64| {
            let mut p = put(nid("10.0.0.1@tcp"), false, 60);
            p.hdr_data = n;
            p.payload = Bytes::from(vec![7u8; 8192]);
            p
        };
        let mut events = r.events().subscribe();
        for n in [1, 2] {
            let sent = b.put(large(n)).await.unwrap().finish().await;
            assert!(sent.iter().all(|e| e.status.is_ok()), "{sent:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(r.routing_show().await.unwrap().buffers.waiting, 1);
        // From now on B sends nothing: no probe of tcp1 is answered. Silent that long,
        // tcp1 would be DOWN within 2 s.
        b.add_fault_rule(drop_sends()).unwrap();
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(r.routing_show().await.unwrap().buffers.waiting, 1);
        let downs = tcp1_downs(&mut events);
        assert!(
            downs.is_empty(),
            "tcp1 DOWN while B's message waited: {downs:?}"
        );
        // The first PUT leaves, the second gets the buffer and leaves 5 s later: tcp1,
        // silent since, goes DOWN.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(r.routing_show().await.unwrap().buffers.waiting, 0);
        assert!(!tcp1_downs(&mut events).is_empty(), "tcp1 went DOWN");
        let got: Vec<u64> = std::iter::from_fn(|| at_a.try_recv().ok())
            .filter_map(|m| match m.header.msg {
                lnet::Message::Put { hdr_data, .. } => Some(hdr_data),
                _ => None,
            })
            .collect();
        assert_eq!(got, vec![1, 2], "both PUTs reached A");
    })
    .await
    .unwrap();
}
