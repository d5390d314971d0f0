//! Routing over the in-process fabric with a paused clock: forwarding with the end-to-end
//! header kept, gateways chosen round robin, asymmetric route failure (link down and a
//! silent far net), drops for unroutable messages, and router buffers under pressure.
//! Topology: A on tcp, routers R1 and R2 on tcp and tcp1, B on tcp1.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{md, nid, Fab, BITS, BOUND, PORTAL};

use std::time::Duration;

use actors::events::{Event, ForwardDrop, NetStatusReason, RouteCause};
use actors::{GetRequest, MdSpec, MsgEventKind, Node, NodeConfig, PutRequest};
use bytes::Bytes;
use lnd::fabric::{Fabric, FabricConfig};
use lnet::fault::{FaultPath, FaultRule, FaultTrigger, NidMatch};
use lnet::health::HealthStatus;
use lnet::route::{RouteDown, RouteSpec, RouterCheck};
use lnet::time::Millis;
use lnet::tunables::{TunableName, Tunables};
use lnet::{Net, Nid};
use tokio::sync::broadcast;
use tokio::time::timeout;

const A: &str = "10.0.0.1@tcp";
const R1A: &str = "10.0.0.2@tcp";
const R1B: &str = "10.0.1.2@tcp1";
const R2A: &str = "10.0.0.3@tcp";
const R2B: &str = "10.0.1.3@tcp1";
const B: &str = "10.0.1.1@tcp1";

fn net(s: &str) -> Net {
    s.parse().unwrap()
}

fn route(remote: &str, gw: &str) -> RouteSpec {
    RouteSpec {
        net: net(remote),
        gateway: nid(gw),
        hops: Some(1),
        priority: 0,
    }
}

fn config(routing: bool, buffers: Option<[u32; 3]>) -> NodeConfig {
    let mut tunables = Tunables::default();
    if routing {
        tunables.set(TunableName::Routing, 1).unwrap();
    }
    if let Some([t, s, l]) = buffers {
        tunables
            .set(TunableName::TinyBuffers, i64::from(t))
            .unwrap();
        tunables
            .set(TunableName::SmallBuffers, i64::from(s))
            .unwrap();
        tunables
            .set(TunableName::LargeBuffers, i64::from(l))
            .unwrap();
    }
    NodeConfig {
        tunables,
        router_check: RouterCheck {
            interval: Millis::from_secs(1),
            ping_timeout: Millis::from_millis(500),
            ..RouterCheck::default()
        },
        ..NodeConfig::default()
    }
}

async fn start(fabric: &Fabric, config: NodeConfig, nids: &[&str]) -> Node {
    let node = Node::start(config);
    for n in nids {
        node.add_ni::<Fab>(FabricConfig::new(fabric, nid(n)), 64)
            .await
            .unwrap();
    }
    node
}

/// A rule making local NI `ni` silent: what it sends and what it receives vanishes, its
/// link stays up.
fn silent(ni: Nid) -> FaultRule {
    FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All)
        .at(ni)
        .on(FaultPath::Both)
}

struct Topology {
    fabric: Fabric,
    a: Node,
    r1: Node,
    r2: Node,
    b: Node,
}

/// A and B with routes through R1 (and R2 when `two`).
async fn topology(two: bool, buffers: Option<[u32; 3]>) -> Topology {
    let fabric = Fabric::new();
    let r1 = start(&fabric, config(true, buffers), &[R1A, R1B]).await;
    let r2 = start(&fabric, config(true, buffers), &[R2A, R2B]).await;
    let a = start(&fabric, config(false, None), &[A]).await;
    let b = start(&fabric, config(false, None), &[B]).await;
    a.add_route(route("tcp1", R1A)).await.unwrap();
    b.add_route(route("tcp", R1B)).await.unwrap();
    if two {
        a.add_route(route("tcp1", R2A)).await.unwrap();
        b.add_route(route("tcp", R2B)).await.unwrap();
    }
    // Let the router checkers ping and push once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Topology {
        fabric,
        a,
        r1,
        r2,
        b,
    }
}

fn put_of(dest: &str, len: usize, fill: u8) -> PutRequest {
    PutRequest {
        dest: nid(dest),
        portal: PORTAL,
        match_bits: BITS,
        hdr_data: 9,
        payload: Bytes::from(vec![fill; len]),
        ack: true,
        timeout: Duration::from_secs(30),
    }
}

async fn counter(node: &Node, name: &str) -> u64 {
    node.counters()
        .await
        .unwrap()
        .get(name)
        .copied()
        .unwrap_or(0)
}

/// Waits (in virtual time) for A's route to tcp1 via `gw` to reach `up`; returns the
/// event.
async fn route_event(rx: &mut broadcast::Receiver<Event>, gw: &str, up: bool) -> Event {
    loop {
        let e = rx.recv().await.unwrap();
        if let Event::Route { gateway, down, .. } = &e {
            if *gateway == nid(gw) && down.is_none() == up {
                return e;
            }
        }
    }
}

#[actix::test]
async fn forwards_puts_with_acks_and_gets_with_replies_keeping_the_end_to_end_header() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(false, None).await;
        let mut md_rx = t.b.attach(md()).await.unwrap();
        for (i, len) in [0usize, 4096, 1 << 20].into_iter().enumerate() {
            let fill = u8::try_from(i).unwrap() + 1;
            let got = t.a.put(put_of(B, len, fill)).await.unwrap().finish().await;
            assert_eq!(got.len(), 2, "{got:?}");
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
            assert_eq!(got[1].kind, MsgEventKind::Ack);
            assert_eq!(got[1].from, Some(nid(B)), "the ACK comes from B itself");
            let rx = md_rx.recv().await.unwrap();
            assert_eq!(rx.header.src_nid, nid(A), "source kept end to end");
            assert_eq!(rx.header.dest_nid, nid(B));
            assert_eq!(rx.from.nid, nid(R1B), "last hop is the router");
            assert_eq!(rx.payload.len(), len);
            assert!(rx.payload.iter().all(|b| *b == fill));
        }
        let got =
            t.a.get(GetRequest {
                dest: nid(B),
                portal: PORTAL,
                match_bits: BITS,
                sink_length: 1024,
                timeout: Duration::from_secs(30),
            })
            .await
            .unwrap()
            .finish()
            .await;
        let reply = got.last().unwrap();
        assert_eq!(reply.kind, MsgEventKind::Reply, "{got:?}");
        assert_eq!(
            reply.payload.as_deref(),
            Some(&b"data for a GET"[..]),
            "{got:?}"
        );
        // Three PUTs, three ACKs, one GET, one REPLY through R1.
        assert_eq!(counter(&t.r1, "route_count").await, 8);
        assert_eq!(
            counter(&t.r1, "route_length").await,
            4096 + (1 << 20) + 14,
            "payload bytes forwarded"
        );
        assert_eq!(counter(&t.r2, "route_count").await, 0);
        // Every buffer went back.
        let show = t.r1.routing_show().await.unwrap();
        assert!(show.enabled);
        assert_eq!(show.buffers.waiting, 0);
        for p in &show.buffers.cpts[0] {
            assert_eq!(p.credits, i32::try_from(p.nbuffers).unwrap(), "{show:?}");
        }
        // `route show -v` on A and `routing show` on R1, printed as lnetctl prints them.
        let doc = lnet::config::Config {
            routes: t.a.route_show().await.unwrap(),
            routing: Some(t.r1.routing_config().await.unwrap()),
            ..lnet::config::Config::default()
        };
        let yaml = doc.to_yaml();
        assert!(yaml.contains("route:\n-     net: tcp1\n      gateway: 10.0.0.2@tcp\n      hop: 1\n      priority: 0\n"), "{yaml}");
        assert!(yaml.contains("      state: up\n      type: single-hop\n"), "{yaml}");
        assert!(yaml.contains("routing:\n    - cpt[0]:\n          tiny:\n              npages: 0\n              nbuffers: 2048\n"), "{yaml}");
        assert!(yaml.contains("    - enable: 1\n"), "{yaml}");
        assert_eq!(lnet::config::parse(&yaml).unwrap(), doc);
    })
    .await
    .unwrap();
}

#[actix::test]
async fn two_gateways_share_traffic_round_robin() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(true, None).await;
        // Room for every PUT: nobody reads them.
        let _md = t.b.attach(MdSpec { depth: 20, ..md() }).await.unwrap();
        for i in 0..20 {
            let got = t.a.put(put_of(B, 100, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        let (r1, r2) = (
            counter(&t.r1, "route_count").await,
            counter(&t.r2, "route_count").await,
        );
        assert_eq!(r1 + r2, 40, "20 PUTs and 20 ACKs forwarded");
        assert!(
            r1 >= 10 && r2 >= 10,
            "both routers carry traffic: {r1} {r2}"
        );
    })
    .await
    .unwrap();
}

#[actix::test]
async fn link_down_on_the_far_net_is_pushed_and_a_routes_around_it_at_once() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(true, None).await;
        let _md = t.b.attach(md()).await.unwrap();
        let mut events = t.a.events().subscribe();
        let before = t.a.routes().await.unwrap();
        assert!(before.iter().all(|r| r.down.is_none()), "{before:?}");
        let at = tokio::time::Instant::now();
        t.r1.set_ni_link(nid(R1B), false).await.unwrap();
        let e = route_event(&mut events, R1A, false).await;
        let took = at.elapsed();
        match e {
            Event::Route { down, cause, .. } => {
                assert_eq!(down, Some(RouteDown::NoUpNiOnRemoteNet));
                assert_eq!(cause, RouteCause::Push, "R1 pushed the change");
            }
            other => panic!("{other:?}"),
        }
        assert!(took < Duration::from_secs(1), "noticed after {took:?}");
        let r1_before = counter(&t.r1, "route_count").await;
        for i in 0..10 {
            let got = t.a.put(put_of(B, 10, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        // A sends nothing more through R1 (B may still answer through it: R1's tcp1 NI
        // is only advertised down; B's own view decides).
        let views = t.a.routes().await.unwrap();
        let via_r1 = views.iter().find(|r| r.spec.gateway == nid(R1A)).unwrap();
        assert_eq!(via_r1.down, Some(RouteDown::NoUpNiOnRemoteNet));
        assert!(counter(&t.r2, "route_count").await >= 10);
        let r1_after = counter(&t.r1, "route_count").await;
        assert!(r1_after - r1_before <= 10, "{r1_before} {r1_after}");
        // The link comes back: pushed again, the route is up at once.
        t.r1.set_ni_link(nid(R1B), true).await.unwrap();
        route_event(&mut events, R1A, true).await;
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_silent_far_net_is_found_by_probes_within_3_s_and_back_within_3_s() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(true, None).await;
        let _md = t.b.attach(md()).await.unwrap();
        // Traffic makes B known to both routers.
        for i in 0..4 {
            let got = t.a.put(put_of(B, 10, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        let mut events = t.a.events().subscribe();
        let mut r1_events = t.r1.events().subscribe();
        // Everything to and from R1's tcp1 NI vanishes; the link stays up.
        let r1b = nid(R1B);
        let rule = t.r1.add_fault_rule(silent(r1b)).unwrap();
        let at = tokio::time::Instant::now();
        route_event(&mut events, R1A, false).await;
        let down_after = at.elapsed();
        assert!(down_after < Duration::from_secs(3), "{down_after:?}");
        loop {
            if let Event::NetStatus {
                net, up, reason, ..
            } = r1_events.recv().await.unwrap()
            {
                assert_eq!(net, r1b.net);
                assert!(!up);
                assert!(matches!(reason, NetStatusReason::Silent { .. }));
                break;
            }
        }
        // Sends meanwhile go through R2 and none hangs.
        for i in 0..5 {
            let got = t.a.put(put_of(B, 10, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        assert!(t.r1.remove_fault_rule(rule));
        let at = tokio::time::Instant::now();
        route_event(&mut events, R1A, true).await;
        let up_after = at.elapsed();
        assert!(up_after < Duration::from_secs(3), "{up_after:?}");
        println!("silent far net: route down after {down_after:?}, up again after {up_after:?}");
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_message_for_a_net_without_route_is_dropped_with_a_counter_and_an_event() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(false, None).await;
        // A thinks R1 reaches tcp5 in two hops; R1 has no route there.
        t.a.add_route(RouteSpec {
            hops: Some(2),
            ..route("tcp5", R1A)
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut events = t.r1.events().subscribe();
        let mut req = put_of("10.0.5.1@tcp5", 10, 1);
        req.timeout = Duration::from_secs(5);
        let got = t.a.put(req).await.unwrap().finish().await;
        let last = got.last().unwrap();
        assert!(!last.status.is_ok(), "{got:?}");
        assert_eq!(
            last.kind,
            MsgEventKind::Ack,
            "only the sender's timeout tells: {got:?}"
        );
        loop {
            if let Event::ForwardDropped {
                src, dest, reason, ..
            } = events.recv().await.unwrap()
            {
                assert_eq!(src, nid(A));
                assert_eq!(dest, nid("10.0.5.1@tcp5"));
                assert_eq!(reason, ForwardDrop::NoRoute);
                break;
            }
        }
        assert_eq!(counter(&t.r1, "drop_count").await, 1);
        let show = t.r1.routing_show().await.unwrap();
        assert_eq!(show.buffers.waiting, 0);
        assert_eq!(
            show.buffers.cpts[0][1].credits,
            show.buffers.cpts[0][1].mincredits + 1
        );
    })
    .await
    .unwrap();
}

/// Four small buffers on the routers (through R1 alone) and R1's sends to B 50 ms late:
/// A's 40 PUTs of 1000 bytes, started, wait for buffers.
async fn forty_puts_behind_four_small_buffers() -> (
    Topology,
    tokio::sync::mpsc::Receiver<lnd::RxMessage>,
    Vec<actors::Transaction>,
) {
    let t = topology(false, Some([8, 4, 4])).await;
    let md =
        t.b.attach(actors::MdSpec { depth: 256, ..md() })
            .await
            .unwrap();
    t.r1.add_fault_rule(
        FaultRule::delay(NidMatch::Any, NidMatch::Nid(nid(B)), FaultTrigger::All, 50)
            .at(nid(R1B))
            .on(FaultPath::Send),
    )
    .unwrap();
    let mut txns = Vec::new();
    for i in 0..40u8 {
        txns.push(t.a.put(put_of(B, 1000, i)).await.unwrap());
    }
    (t, md, txns)
}

/// Every one of `txns` is ACKed and B got each PUT once.
async fn all_acked_and_delivered_once(
    txns: Vec<actors::Transaction>,
    mut md: tokio::sync::mpsc::Receiver<lnd::RxMessage>,
) {
    let n = txns.len();
    let mut ok = 0;
    for txn in txns {
        if txn.finish().await.iter().all(|e| e.status.is_ok()) {
            ok += 1;
        }
    }
    assert_eq!(ok, n, "every PUT is ACKed");
    let mut seen = 0;
    while md.try_recv().is_ok() {
        seen += 1;
    }
    assert_eq!(seen, n, "every PUT delivered once");
}

#[actix::test]
async fn router_buffers_hold_back_a_fast_sender_and_drop_nothing() {
    tokio::time::pause();
    timeout(BOUND, async {
        let (t, md, txns) = forty_puts_behind_four_small_buffers().await;
        all_acked_and_delivered_once(txns, md).await;
        let show = t.r1.routing_show().await.unwrap();
        let small = show.buffers.cpts[0][1];
        assert_eq!(small.nbuffers, 4);
        assert!(
            small.mincredits < 0,
            "messages waited for buffers: {show:?}"
        );
        assert_eq!(small.credits, 4, "all buffers back: {show:?}");
        let a_credits = show
            .buffers
            .peers
            .iter()
            .find(|(n, _)| *n == nid(A))
            .unwrap()
            .1;
        assert_eq!(a_credits.credits, i32::try_from(a_credits.max).unwrap());
        println!(
            "small pool low-water mark {}, A's router credits low-water mark {}",
            small.mincredits, a_credits.mincredits
        );
    })
    .await
    .unwrap();
}

#[actix::test]
async fn bad_routes_are_refused_with_the_reason() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let a = start(&fabric, config(false, None), &[A]).await;
        for (r, what) in [
            (route("tcp", R1A), "local"),
            (route("tcp2", "10.0.9.9@tcp9"), "not on a local net"),
            (route("tcp1", A), "this node"),
        ] {
            let e = a.add_route(r).await.unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
        a.add_route(route("tcp1", R1A)).await.unwrap();
        let e = a
            .add_route(route("tcp1", R1A))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("exists"), "{e}");
        assert!(a.del_route(net("tcp1"), nid(R1A)).await.unwrap());
        assert!(a.routes().await.unwrap().is_empty());
        let _: Nid = nid(R2B);
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_router_advertises_forwarding_and_up_nis_from_its_first_ping() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let r = start(&fabric, config(true, None), &[R1A, R1B]).await;
        let a = start(&fabric, config(false, None), &[A]).await;
        let reply = a.ping(nid(R1A), Duration::from_secs(5)).await.unwrap();
        assert!(
            !reply.info.features.contains(lnet::Features::RTE_DISABLED),
            "{:?}",
            reply.info.features
        );
        assert_eq!(reply.nids(), vec![(nid(R1A), true), (nid(R1B), true)]);
        // A node that does not route says so.
        let reply = r.ping(nid(A), Duration::from_secs(5)).await.unwrap();
        assert!(reply.info.features.contains(lnet::Features::RTE_DISABLED));
    })
    .await
    .unwrap();
}

#[actix::test]
async fn udsp_dst_rte_rule_sends_a_nets_traffic_through_the_preferred_gateway() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(true, None).await;
        let _md = t.b.attach(MdSpec { depth: 64, ..md() }).await.unwrap();
        // Traffic for tcp1 prefers R2; nothing else changes.
        t.a.set_udsp(&[lnet::config::UdspRule {
            dst: Some("tcp1".into()),
            rte: Some(R2A.into()),
            ..lnet::config::UdspRule::default()
        }])
        .await
        .unwrap();
        for i in 0..20 {
            let got = t.a.put(put_of(B, 100, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        assert_eq!(counter(&t.r1, "route_count").await, 0);
        // The 20 PUTs through R2; B's ACKs take B's own routes (both gateways).
        assert!(counter(&t.r2, "route_count").await >= 20);
        // `peer show -v 4` on A lists R2 as B's preferred gateway, once A has B as a peer.
        t.a.add_peer(nid(B), vec![nid(B)], false).await.unwrap();
        let yaml =
            t.a.peer_show()
                .await
                .unwrap()
                .to_yaml(lnet::show::Verbosity(4));
        let at = yaml.find(&format!("nid: {B}")).unwrap();
        assert!(
            yaml[at..].contains("Preferred gateway NIDs:\n") && yaml[at..].contains(R2A),
            "{yaml}"
        );
        // A dead preferred gateway is never chosen: R2's NI on A's net goes silent for A.
        t.r2.add_fault_rule(silent(nid(R2A))).unwrap();
        // Until the router checker finds R2 gone, PUTs may be lost; afterwards all go
        // through R1.
        tokio::time::sleep(Duration::from_secs(200)).await;
        let before = counter(&t.r1, "route_count").await;
        for i in 0..10 {
            let got = t.a.put(put_of(B, 100, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        assert!(counter(&t.r1, "route_count").await >= before + 10);
    })
    .await
    .unwrap();
}

/// A and B through R1 alone, an MD on B, and a first PUT through: A and B are known
/// peers of R1 (so its forwarding path may take their messages).
async fn known_to_r1() -> (Topology, tokio::sync::mpsc::Receiver<lnd::RxMessage>) {
    let t = topology(false, None).await;
    let md = t.b.attach(MdSpec { depth: 64, ..md() }).await.unwrap();
    let got = t.a.put(put_of(B, 100, 0)).await.unwrap().finish().await;
    assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    (t, md)
}

/// Peer NI `nid` as `node` shows it.
async fn peer_ni(node: &Node, nid_: &str) -> actors::ni::PeerNiView {
    node.peers()
        .await
        .unwrap()
        .into_iter()
        .flat_map(|p| p.nis)
        .find(|n| n.nid == nid(nid_))
        .unwrap()
}

#[actix::test]
async fn forwarded_messages_at_full_health_take_the_forwarding_path_and_no_actor_hears_of_them() {
    tokio::time::pause();
    timeout(BOUND, async {
        let (t, _md) = known_to_r1().await;
        let before = t.r1.forwarding();
        let stats_before = t.r1.stats_show().await.unwrap();
        for (i, len) in [0usize, 100, 4096, 70_000, 1 << 20].into_iter().enumerate() {
            for j in 0..4u8 {
                let fill = u8::try_from(i).unwrap() * 4 + j;
                let got = t.a.put(put_of(B, len, fill)).await.unwrap().finish().await;
                assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
            }
        }
        let after = t.r1.forwarding();
        assert_eq!(
            after.fast - before.fast,
            40,
            "20 PUTs and their ACKs: {after:?}"
        );
        assert_eq!(after.by_actor, before.by_actor, "{after:?}");
        assert_eq!(after.handed_over, before.handed_over, "{after:?}");
        // The statistics and the credits are as if the actors had sent them.
        assert_eq!(
            counter(&t.r1, "route_count").await,
            after.fast + after.by_actor
        );
        let b_ni = peer_ni(&t.r1, B).await;
        assert_eq!(b_ni.tx_credits, i32::try_from(b_ni.max_tx_credits).unwrap());
        assert!(b_ni.stats.sent.put >= 21, "{:?}", b_ni.stats);
        assert!(b_ni.last_alive.is_some());
        // `stats show` counts the path's forwards among the messages: none left now. The
        // high-water mark sums each shard's (the kernel's per CPT), a shard per next hop:
        // with one PUT and then its ACK under way at a time, at least one each.
        let stats = t.r1.stats_show().await.unwrap();
        assert_eq!(stats.msgs_alloc, 0, "{stats:?}");
        assert!(
            stats.msgs_max >= stats_before.msgs_max.max(2),
            "{stats_before:?} -> {stats:?}"
        );
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_forwarded_send_that_fails_is_handed_to_the_actors_which_apply_the_health_rules() {
    tokio::time::pause();
    timeout(BOUND, async {
        let (t, _md) = known_to_r1().await;
        let before = t.r1.forwarding();
        // The router's link to B fails its sends, charging B.
        t.fabric
            .link_down(nid(R1B), nid(B), HealthStatus::RemoteError);
        let put = PutRequest {
            timeout: Duration::from_secs(5),
            ..put_of(B, 100, 1)
        };
        let _ = t.a.put(put).await.unwrap().finish().await;
        let after = t.r1.forwarding();
        assert_eq!(after.handed_over - before.handed_over, 1, "{after:?}");
        assert_eq!(after.fast, before.fast, "{after:?}");
        let b_ni = peer_ni(&t.r1, B).await;
        assert!(
            !b_ni.health.is_max(),
            "the failure was charged to B: {b_ni:?}"
        );
        assert_eq!(b_ni.tx_credits, i32::try_from(b_ni.max_tx_credits).unwrap());
        assert!(
            b_ni.stats.health_stats.values().sum::<u64>() >= 1,
            "{b_ni:?}"
        );
    })
    .await
    .unwrap();
}

#[actix::test]
async fn forwarded_messages_beyond_the_next_hops_credits_wait_in_place_and_all_take_the_forwarding_path(
) {
    tokio::time::pause();
    timeout(BOUND, async {
        // R1 holds up to 16 messages from A in router buffers, but may have only 2 sends
        // to B under way; its link to B is slow, so most forwarded PUTs wait for a credit.
        let fabric = Fabric::new();
        let r1_config = NodeConfig {
            peer_credits: 2,
            peer_buffer_credits: 16,
            ..config(true, None)
        };
        let r1 = start(&fabric, r1_config, &[R1A, R1B]).await;
        let a = start(&fabric, config(false, None), &[A]).await;
        let b = start(&fabric, config(false, None), &[B]).await;
        a.add_route(route("tcp1", R1A)).await.unwrap();
        b.add_route(route("tcp", R1B)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut md = b.attach(MdSpec { depth: 256, ..md() }).await.unwrap();
        let got = a.put(put_of(B, 100, 0)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(md.try_recv().is_ok());
        fabric.set_link_latency(nid(R1B), nid(B), Some(Duration::from_millis(20)));

        let before = r1.forwarding();
        let mut txns = Vec::new();
        for i in 0..48u8 {
            txns.push(a.put(put_of(B, 100, i)).await.unwrap());
        }
        for txn in txns {
            let got = txn.finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        let mut fills = Vec::new();
        while let Ok(m) = md.try_recv() {
            fills.push(m.payload[0]);
        }
        fills.sort_unstable();
        assert_eq!(
            fills,
            (0..48u8).collect::<Vec<_>>(),
            "each PUT delivered once"
        );

        let after = r1.forwarding();
        assert_eq!(
            after.fast - before.fast,
            96,
            "48 PUTs and their ACKs: {after:?}"
        );
        assert_eq!(after.by_actor, before.by_actor, "{after:?}");
        assert_eq!(after.handed_over, before.handed_over, "{after:?}");
        assert!(after.waited > before.waited, "some waited: {after:?}");
        let b_ni = peer_ni(&r1, B).await;
        assert!(b_ni.min_tx_credits < 0, "queued for a credit: {b_ni:?}");
        assert_eq!(b_ni.tx_credits, 2, "every credit back: {b_ni:?}");
        println!(
            "{} of 96 forwarded messages waited for a credit; B's credits low-water mark {}",
            after.waited - before.waited,
            b_ni.min_tx_credits
        );
    })
    .await
    .unwrap();
}

/// What the streaming PUTs saw: each PUT's outcome, and each PUT B received with the
/// router it came through and when (virtual time since the start).
#[derive(Default)]
struct Stream {
    ok: usize,
    failed: Vec<Vec<actors::MsgEvent>>,
    at_b: Vec<(Duration, Nid)>,
}

/// `workers` loops on A, each sending a PUT with an ACK to B (waiting for it, then 1 ms)
/// until `stop`; B's receiver records where each PUT came from.
fn stream_puts(
    t: &Topology,
    mut md_rx: tokio::sync::mpsc::Receiver<lnd::RxMessage>,
    workers: u8,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::sync::Arc<std::sync::Mutex<Stream>> {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Stream::default()));
    let start = tokio::time::Instant::now();
    let s = Arc::clone(&seen);
    actix::spawn(async move {
        while let Some(rx) = md_rx.recv().await {
            s.lock().unwrap().at_b.push((start.elapsed(), rx.from.nid));
        }
    });
    for w in 0..workers {
        let (a, s, stop) = (t.a.clone(), Arc::clone(&seen), Arc::clone(stop));
        actix::spawn(async move {
            while !stop.load(SeqCst) {
                let got = a.put(put_of(B, 4096, w)).await.unwrap().finish().await;
                let ok = got.len() == 2 && got.iter().all(|e| e.status.is_ok());
                {
                    let mut s = s.lock().unwrap();
                    if ok {
                        s.ok += 1;
                    } else {
                        s.failed.push(got);
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
    }
    seen
}

/// PUTs B received through `via` so far, and in all.
fn received(seen: &std::sync::Mutex<Stream>, via: &str) -> (usize, usize) {
    let s = seen.lock().unwrap();
    let through = s.at_b.iter().filter(|(_, n)| *n == nid(via)).count();
    (through, s.at_b.len())
}

/// What a peer learns from pinging R1 on tcp: routing disabled, and each NI's status.
async fn r1_as_pinged(a: &Node) -> (bool, Vec<(Nid, bool)>) {
    let reply = a.ping(nid(R1A), Duration::from_secs(5)).await.unwrap();
    (
        reply.info.features.contains(lnet::Features::RTE_DISABLED),
        reply.nids(),
    )
}

#[actix::test]
async fn a_router_drained_at_run_time_is_routed_around_and_back_after_set_routing_1_with_no_put_failing(
) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(true, None).await;
        // Every hop takes 20 ms, so that PUTs are under way through R1 when it drains and
        // A sends more to it before R1's push arrives.
        for (x, y) in [(A, R1A), (A, R2A), (R1B, B), (R2B, B)] {
            t.fabric
                .set_link_latency(nid(x), nid(y), Some(Duration::from_millis(20)));
        }
        let md_rx = t.b.attach(MdSpec { depth: 256, ..md() }).await.unwrap();
        let mut a_events = t.a.events().subscribe();
        let mut b_events = t.b.events().subscribe();
        let mut r1_events = t.r1.events().subscribe();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let seen = stream_puts(&t, md_rx, 8, &stop);

        // Both routers carry the stream.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (via_r1_before, all_before) = received(&seen, R1B);
        assert!(
            via_r1_before >= 30 && all_before - via_r1_before >= 30,
            "before the drain: {via_r1_before} of {all_before} PUTs through R1"
        );

        // Drain R1 while PUTs cross it.
        let under_way = t.r1.start_drain().await.unwrap();
        assert!(
            under_way > 0,
            "PUTs or ACKs under way through R1 at the drain"
        );
        let drained = t.r1.routing_show().await.unwrap();
        assert!(drained.draining && drained.enabled, "{drained:?}");
        assert!(drained.nets.iter().all(|n| !n.up), "{:?}", drained.nets);
        let mut down = Vec::new();
        while down.len() < 2 {
            if let Event::NetStatus {
                net, up, reason, ..
            } = r1_events.recv().await.unwrap()
            {
                assert!(!up);
                assert_eq!(reason, NetStatusReason::Draining);
                down.push(net);
            }
        }
        down.sort();
        assert_eq!(down, vec![net("tcp"), net("tcp1")]);
        // The push moves A and B off R1 at once.
        let at = tokio::time::Instant::now();
        for (rx, gw) in [(&mut a_events, R1A), (&mut b_events, R1B)] {
            match route_event(rx, gw, false).await {
                Event::Route { down, cause, .. } => {
                    assert_eq!(down, Some(RouteDown::RoutingDisabled));
                    assert_eq!(cause, RouteCause::Push, "R1 pushed the drain");
                }
                other => panic!("{other:?}"),
            }
        }
        let moved_after = at.elapsed();
        assert!(moved_after < Duration::from_secs(1), "{moved_after:?}");
        // What R1 had under way, and what A and B sent it before the push arrived (up to
        // one hop, 20 ms, later), finishes; then nothing new crosses it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        while t.r1.drain_state().await.unwrap() != (true, 0) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r1_count = counter(&t.r1, "route_count").await;
        let (via_r1_drained, all_drained) = received(&seen, R1B);
        assert_eq!(
            r1_as_pinged(&t.a).await,
            (true, vec![(nid(R1A), false), (nid(R1B), false)]),
            "a peer's ping of the drained R1"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            counter(&t.r1, "route_count").await,
            r1_count,
            "nothing crosses R1"
        );
        let (via_r1_later, all_later) = received(&seen, R1B);
        assert_eq!(via_r1_later, via_r1_drained);
        assert!(all_later - all_drained >= 150, "{all_drained} {all_later}");
        assert!(
            via_r1_drained > via_r1_before,
            "R1 forwarded what it was sent while its push went out"
        );
        assert!(t.r1.drain_state().await.unwrap().0, "R1 stays drained");

        // `set routing 1` brings R1 back, pushed at once.
        t.r1.set_routing(config(true, None).tunables).await.unwrap();
        let back = t.r1.routing_show().await.unwrap();
        assert!(!back.draining && back.enabled, "{back:?}");
        assert!(back.nets.iter().all(|n| n.up), "{:?}", back.nets);
        let at = tokio::time::Instant::now();
        route_event(&mut a_events, R1A, true).await;
        route_event(&mut b_events, R1B, true).await;
        let back_after = at.elapsed();
        assert!(back_after < Duration::from_secs(1), "{back_after:?}");
        assert_eq!(
            r1_as_pinged(&t.a).await,
            (false, vec![(nid(R1A), true), (nid(R1B), true)])
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (via_r1_back, all_back) = received(&seen, R1B);
        assert!(
            via_r1_back - via_r1_later >= 30,
            "after the undrain: {} of {} PUTs through R1",
            via_r1_back - via_r1_later,
            all_back - all_later
        );

        stop.store(true, SeqCst);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = seen.lock().unwrap();
        assert!(s.failed.is_empty(), "no PUT fails: {:?}", s.failed);
        assert_eq!(s.at_b.len(), s.ok, "every PUT B received was ACKed");
        println!(
            "drain: {} PUTs ACKed, none failed; {under_way} forwards under way at the drain; \
             routes moved after {moved_after:?} and back after {back_after:?}; through R1: \
             {via_r1_before} before, {} while drained, {} after",
            s.ok,
            via_r1_later - via_r1_before,
            via_r1_back - via_r1_later
        );
    })
    .await
    .unwrap();
}

#[actix::test]
async fn undrain_advertises_each_net_as_it_is_and_pushes_it_at_once() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(false, None).await;
        let mut r1_events = t.r1.events().subscribe();
        let mut a_events = t.a.events().subscribe();
        assert!(
            !t.r1.undrain().await.unwrap(),
            "not draining: nothing to end"
        );
        assert_eq!(t.r1.start_drain().await.unwrap(), 0);
        route_event(&mut a_events, R1A, false).await;
        // R1's link on tcp1 goes down while it drains: the drain's end says so.
        t.r1.set_ni_link(nid(R1B), false).await.unwrap();
        assert!(t.r1.undrain().await.unwrap());
        assert!(!t.r1.undrain().await.unwrap(), "ended once");
        let mut undrained = Vec::new();
        while undrained.len() < 2 {
            if let Event::NetStatus {
                net,
                up,
                reason: NetStatusReason::Undrained,
                ..
            } = r1_events.recv().await.unwrap()
            {
                undrained.push((net, up));
            }
        }
        undrained.sort();
        assert_eq!(undrained, vec![(net("tcp"), true), (net("tcp1"), false)]);
        // A hears at once: routing on again, but no NI up on tcp1, so the route stays
        // down for that reason.
        match route_event(&mut a_events, R1A, false).await {
            Event::Route { down, cause, .. } => {
                assert_eq!(down, Some(RouteDown::NoUpNiOnRemoteNet));
                assert_eq!(cause, RouteCause::Push);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            r1_as_pinged(&t.a).await,
            (false, vec![(nid(R1A), true), (nid(R1B), false)])
        );
        t.r1.set_ni_link(nid(R1B), true).await.unwrap();
        route_event(&mut a_events, R1A, true).await;
    })
    .await
    .unwrap();
}

#[actix::test]
async fn router_buffers_resized_while_messages_wait_serve_them_and_lose_nothing() {
    tokio::time::pause();
    timeout(BOUND, async {
        let (t, md, txns) = forty_puts_behind_four_small_buffers().await;
        let small = |show: &actors::RoutingShow| show.buffers.cpts[0][1];
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            small(&t.r1.routing_show().await.unwrap()).credits < 0,
            "messages wait"
        );
        // Sixteen small buffers now: the waiting messages get them at once.
        let mut tunables = config(true, Some([8, 4, 4])).tunables;
        tunables.set(TunableName::SmallBuffers, 16).unwrap();
        t.r1.set_tunables(tunables.clone()).await.unwrap();
        assert_eq!(small(&t.r1.routing_show().await.unwrap()).nbuffers, 16);
        // Then two: buffers leave the pool as they come back.
        tunables.set(TunableName::SmallBuffers, 2).unwrap();
        t.r1.set_tunables(tunables).await.unwrap();
        all_acked_and_delivered_once(txns, md).await;
        let pool = small(&t.r1.routing_show().await.unwrap());
        assert_eq!((pool.nbuffers, pool.credits), (2, 2), "{pool:?}");
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_discovery_push_handed_over_by_a_router_is_not_taken_for_the_routers_own() {
    tokio::time::pause();
    timeout(BOUND, async {
        let t = topology(false, None).await;
        // B discovers A through R1: B (which does not route) pushes its ping info to A,
        // and R1 hands the push over on the last hop.
        let found = t.b.discover(nid(A), Duration::from_secs(5)).await.unwrap();
        assert!(found.pushed);
        // A learned B, not a new ping info of its gateway R1: the route stays up.
        let routes = t.a.routes().await.unwrap();
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0].down, None, "{routes:?}");
        let r1 = t.a.ping(nid(R1A), Duration::from_secs(5)).await.unwrap();
        assert_eq!(r1.nids(), vec![(nid(R1A), true), (nid(R1B), true)]);
        let _rx = t.b.attach(md()).await.unwrap();
        let events = t.a.put(put_of(B, 16, 1)).await.unwrap().finish().await;
        let last = events.last().unwrap();
        assert_eq!(last.kind, MsgEventKind::Ack, "{events:?}");
        assert!(last.status.is_ok(), "{events:?}");
    })
    .await
    .unwrap();
}

/// cfg-credits: a net's `peer_credits` and `peer_buffer_credits` tunables are its peer
/// NIs' tx credits and router-buffer credits (as the kernel takes them from the peer NI's
/// net); a net without them gets the node's defaults. `net show` prints each net's own.
#[actix::test]
async fn a_nets_peer_credits_tunables_are_its_peer_nis_tx_and_router_buffer_credits() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let r1 = Node::start(config(true, None));
        let tcp = actors::NiCredits {
            credits: 64,
            peer_credits: Some(16),
            peer_buffer_credits: Some(4),
            peer_timeout: None,
        };
        r1.add_ni::<Fab>(FabricConfig::new(&fabric, nid(R1A)), tcp)
            .await
            .unwrap();
        r1.add_ni::<Fab>(FabricConfig::new(&fabric, nid(R1B)), 64)
            .await
            .unwrap();
        let a = start(&fabric, config(false, None), &[A]).await;
        let b = start(&fabric, config(false, None), &[B]).await;
        a.add_route(route("tcp1", R1A)).await.unwrap();
        b.add_route(route("tcp", R1B)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _md = b.attach(md()).await.unwrap();
        let got = a.put(put_of(B, 100, 1)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        let got = b.put(put_of(A, 100, 2)).await.unwrap().finish().await;
        assert_eq!(got[0].kind, MsgEventKind::Send, "{got:?}");

        assert_eq!(
            peer_ni(&r1, A).await.max_tx_credits,
            16,
            "tcp's peer_credits"
        );
        assert_eq!(
            peer_ni(&r1, B).await.max_tx_credits,
            8,
            "the node's default"
        );
        let routing = r1.routing_show().await.unwrap();
        let rtr = |n: &str| {
            routing
                .buffers
                .peers
                .iter()
                .find(|(p, _)| *p == nid(n))
                .map(|(_, c)| c.max)
        };
        assert_eq!(rtr(A), Some(4), "tcp's peer_buffer_credits");
        assert_eq!(rtr(B), Some(8), "no peer_buffer_credits: the peer_credits");
        let show = r1.net_show().await.unwrap();
        let tunables = |n: &str| {
            show.nets
                .iter()
                .flat_map(|net| &net.nis)
                .find(|ni| ni.nid == nid(n))
                .map(|ni| (ni.tunables.peer_credits, ni.tunables.peer_buffer_credits))
        };
        assert_eq!(tunables(R1A), Some((16, 4)));
        assert_eq!(tunables(R1B), Some((8, 0)));
    })
    .await
    .unwrap();
}

/// Router R (tcp, tcp1, discovery off) between A (tcp) and B, which has NIs `B` and
/// `10.0.1.11@tcp1` on tcp1. R is told A and B are Multi-Rail peers, and B's first NI is
/// below full health: the PUTs A sends to that NI go to B's other NI from the first one
/// on, each forwarded by the fast path. Once R deletes B, a PUT for B's first NI goes to
/// that NI.
#[actix::test]
async fn a_multi_rail_peer_added_at_run_time_is_forwarded_to_by_the_fast_path() {
    const B2: &str = "10.0.1.11@tcp1";
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let mut quiet = config(true, None);
        quiet.tunables.set(TunableName::Discovery, 0).unwrap();
        let r = start(&fabric, quiet, &[R1A, R1B]).await;
        let a = start(&fabric, config(false, None), &[A]).await;
        let b = start(&fabric, config(false, None), &[B, B2]).await;
        a.add_route(route("tcp1", R1A)).await.unwrap();
        b.add_route(route("tcp", R1B)).await.unwrap();
        let mut md_rx = b.attach(MdSpec { depth: 64, ..md() }).await.unwrap();
        // R hears from A and B (router checker pings) and knows each as a peer of one NI.
        tokio::time::sleep(Duration::from_secs(2)).await;
        r.set_peer_ni_health(nid(B), lnet::health::HealthValue::ZERO)
            .await
            .unwrap();

        r.add_peer(nid(A), vec![nid(A)], true).await.unwrap();
        r.add_peer(nid(B), vec![nid(B), nid(B2)], true)
            .await
            .unwrap();
        let before = r.forwarding();
        for i in 0..5u8 {
            let got = a.put(put_of(B, 100, i)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "PUT {i}: {got:?}");
            let rx = md_rx.recv().await.unwrap();
            assert_eq!(
                (rx.ni, rx.header.dest_nid),
                (nid(B2), nid(B2)),
                "PUT {i} went to B's healthy NI, named in the header"
            );
        }
        let after = r.forwarding();
        assert_eq!(
            (after.fast - before.fast, after.by_actor - before.by_actor),
            (10, 0),
            "five PUTs and their ACKs forwarded by the fast path: {before:?} -> {after:?}"
        );

        r.del_peer(nid(B), Vec::new()).await.unwrap();
        let got = a.put(put_of(B, 100, 9)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        let rx = md_rx.recv().await.unwrap();
        assert_eq!((rx.ni, rx.header.dest_nid), (nid(B), nid(B)));
    })
    .await
    .unwrap();
}

/// The `refcount` of a peer NI (`peer show -v`; `debug peer` prints it from there) counts the
/// messages that hold it, as the kernel's: on R1, B while R1 forwards A's PUT of 1 MiB to it
/// (charged to B's tx credits) and A while that PUT holds a router buffer; on A, the
/// gateway R1 while A sends it a PUT; each is back to 1 once the sends have completed. The
/// router checkers' pings may be under way beside the PUTs.
#[actix::test]
async fn a_peer_ni_refcount_counts_the_messages_holding_it() {
    tokio::time::pause();
    timeout(BOUND, async {
        let (t, mut md) = known_to_r1().await;
        let refcount = |node: &Node, n: &'static str| {
            let node = node.clone();
            async move {
                let shown = node.peer_show().await.unwrap();
                shown
                    .peers
                    .iter()
                    .flat_map(|p| &p.nis)
                    .find(|p| p.nid == nid(n))
                    .unwrap()
                    .credits
                    .refcount
            }
        };
        // Back to 1 once what is under way has completed (sends made while a link took
        // 5 s complete up to 5 s after it is fast again).
        let idle = |node: &Node, n: &'static str| {
            let node = node.clone();
            async move {
                for _ in 0..1000 {
                    if refcount(&node, n).await == 1 {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                false
            }
        };
        for (node, n) in [(&t.r1, B), (&t.r1, A), (&t.a, R1A)] {
            assert!(idle(node, n).await, "{n} idle: {}", refcount(node, n).await);
        }
        // The hop from R1 to B takes 5 s: R1 holds the PUT it received from A in a router
        // buffer while it sends it to B.
        t.fabric
            .set_link_latency(nid(R1B), nid(B), Some(Duration::from_secs(5)));
        let put = t.a.put(put_of(B, 1 << 20, 4)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let held = refcount(&t.r1, B).await;
        assert!(held > 1, "B while R1 forwards to it: {held}");
        let held = refcount(&t.r1, A).await;
        assert!(
            held > 1,
            "A while its PUT holds a router buffer of R1: {held}"
        );
        t.fabric.set_link_latency(nid(R1B), nid(B), None);
        let got = put.finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        for (node, n) in [(&t.r1, B), (&t.r1, A)] {
            assert!(
                idle(node, n).await,
                "{n} idle again: {}",
                refcount(node, n).await
            );
        }
        // The hop from A to R1 takes 5 s: A's own send to its gateway holds it.
        t.fabric
            .set_link_latency(nid(A), nid(R1A), Some(Duration::from_secs(5)));
        let put = t.a.put(put_of(B, 1 << 20, 5)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let held = refcount(&t.a, R1A).await;
        assert!(held > 1, "A's gateway while A sends to it: {held}");
        t.fabric.set_link_latency(nid(A), nid(R1A), None);
        let got = put.finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        let mut lens = Vec::new();
        while lens.len() < 4 && lens.iter().filter(|l| **l == 1 << 20).count() < 2 {
            lens.push(md.recv().await.unwrap().payload.len());
        }
        assert_eq!(
            lens.iter().filter(|l| **l == 1 << 20).count(),
            2,
            "{lens:?}"
        );
        for (node, n) in [(&t.r1, B), (&t.r1, A), (&t.a, R1A)] {
            assert!(
                idle(node, n).await,
                "{n} idle again: {}",
                refcount(node, n).await
            );
        }
    })
    .await
    .unwrap();
}

/// `tx_q_num_of_buf`: a peer NI counts the bytes (payload and header) of the messages
/// charged to its tx credits until their sends complete, on the sender's own path (A's
/// gateway) and on the router's forwarding path (R1's peer NI B) alike, and is back to 0
/// once they have. The router checkers' pings and their replies (a kilobyte or less
/// each) may be under way beside the PUT of 1 MiB.
#[actix::test]
async fn a_peer_ni_counts_the_bytes_queued_for_it_until_their_sends_complete() {
    tokio::time::pause();
    timeout(BOUND, async {
        let (t, mut md) = known_to_r1().await;
        let queued = |node: &Node, n: &'static str| {
            let node = node.clone();
            async move { peer_ni(&node, n).await.tx_queued_bytes }
        };
        // The PUT's 1 MiB and header, and a few pings at most.
        const PUT: u64 = (1 << 20) + 72;
        let the_put = |q: u64| (PUT..PUT + 64 * 1024).contains(&q);
        // Back to 0 once what is under way has completed (sends made while a link took
        // 5 s complete up to 5 s after it is fast again).
        let drained = |node: &Node, n: &'static str| {
            let node = node.clone();
            async move {
                for _ in 0..1000 {
                    if peer_ni(&node, n).await.tx_queued_bytes == 0 {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                false
            }
        };
        assert!(drained(&t.a, R1A).await && drained(&t.r1, B).await);
        // The hop from A to R1 takes 5 s, then the hop from R1 to B 5 s.
        t.fabric
            .set_link_latency(nid(A), nid(R1A), Some(Duration::from_secs(5)));
        t.fabric
            .set_link_latency(nid(R1B), nid(B), Some(Duration::from_secs(5)));
        let put = t.a.put(put_of(B, 1 << 20, 3)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let q = queued(&t.a, R1A).await;
        assert!(the_put(q), "A's gateway: {q}");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let q = queued(&t.r1, B).await;
        assert!(the_put(q), "R1 forwarding to B: {q}");
        let shown = t.r1.peer_show().await.unwrap();
        let b = shown
            .peers
            .iter()
            .flat_map(|p| &p.nis)
            .find(|n| n.nid == nid(B))
            .unwrap();
        assert!(the_put(u64::from(b.credits.tx_q_num_of_buf)), "peer show");
        t.fabric.set_link_latency(nid(A), nid(R1A), None);
        t.fabric.set_link_latency(nid(R1B), nid(B), None);
        let got = put.finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        // (After the 100-byte PUT that made R1 known.)
        let mut lens = Vec::new();
        while lens.last() != Some(&(1 << 20)) && lens.len() < 4 {
            lens.push(md.recv().await.unwrap().payload.len());
        }
        assert_eq!(lens.last(), Some(&(1 << 20)), "{lens:?}");
        for (node, n) in [(&t.r1, B), (&t.r1, A), (&t.a, R1A)] {
            assert!(
                drained(node, n).await,
                "{n} drained: {}",
                queued(node, n).await
            );
        }
    })
    .await
    .unwrap();
}
