//! Routing between a tcp net and an o2ib net on real verbs: end node A on tcp (loopback),
//! a router with a tcp NI and an o2ib NI on the VM's first soft-RoCE device, end node B on
//! o2ib on the second. PUT with ACK and GET with REPLY pass both ways with their payloads
//! intact, and the router counts what it forwarded, and forwards what came by RDMA from
//! the buffer it landed in. Runs inside the rdma-vm
//! (scripts/o2ib-vm-test); elsewhere it says it was skipped.

#![cfg(feature = "o2ib")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::lnd_counters::{LndCounters, O2iblndCounters};
use actors::{GetRequest, MdSpec, MsgEventKind, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::o2iblnd::{O2ibLnd, O2ibLndConfig};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::route::RouteSpec;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 24_500;
const WAIT: Duration = Duration::from_secs(120);

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn route(net: &str, gw: Nid) -> RouteSpec {
    RouteSpec {
        net: net.parse().unwrap(),
        gateway: gw,
        hops: Some(1),
        priority: 0,
    }
}

async fn tcp_ni(node: &Node, me: Nid) {
    let mut c = SockLndConfig::new(me, 0x0210_0000 | u64::from(me.addr_u32().unwrap() & 0xff));
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(me.addr_u32().unwrap())),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 256).await.unwrap();
}

async fn o2ib_ni(node: &Node, me: Nid) {
    let c = O2ibLndConfig::new(me, 0x0220_0000 | u64::from(me.addr_u32().unwrap() & 0xff));
    node.add_ni::<O2ibLnd<NodeHandler>>(c, 256).await.unwrap();
}

/// The counters of `node`'s o2ib NI.
async fn o2ib_counters(node: &Node) -> O2iblndCounters {
    node.lnd_counters()
        .await
        .unwrap()
        .into_iter()
        .find_map(|n| match n.counters {
            LndCounters::O2iblnd(c) => Some(c),
            LndCounters::Socklnd(_) => None,
        })
        .unwrap()
}

fn payload(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

/// The two soft-RoCE addresses of the rdma-vm, or `None` (and a line saying `test` was
/// skipped) elsewhere.
fn vm_ips(test: &str) -> Option<(String, String)> {
    match (std::env::var("RDMAVM_IP0"), std::env::var("RDMAVM_IP1")) {
        (Ok(ip0), Ok(ip1)) => Some((ip0, ip1)),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: not inside the rdma-vm (RDMAVM_IP0 is unset); run \
                 scripts/o2ib-vm-test"
            );
            None
        }
    }
}

/// Router R (a tcp NI and an o2ib NI on the first device, forwarding, with `tunables`)
/// between end node A on tcp (127.0.`tcp_c`.2) and end node B on o2ib (the second
/// device), each end with a route to the other's net through R.
struct Topology {
    r: Node,
    a: Node,
    b: Node,
    a_nid: Nid,
    b_nid: Nid,
}

async fn topology((ip0, ip1): (String, String), tcp_c: u8, mut tunables: Tunables) -> Topology {
    let r_tcp = nid(&format!("127.0.{tcp_c}.1@tcp"));
    let a_nid = nid(&format!("127.0.{tcp_c}.2@tcp"));
    let r_ib = nid(&format!("{ip0}@o2ib"));
    let b_nid = nid(&format!("{ip1}@o2ib"));
    tunables.set(TunableName::Routing, 1).unwrap();
    let r = Node::start(NodeConfig {
        tunables,
        ..NodeConfig::default()
    });
    tcp_ni(&r, r_tcp).await;
    o2ib_ni(&r, r_ib).await;
    let a = Node::start(NodeConfig::default());
    tcp_ni(&a, a_nid).await;
    a.add_route(route("o2ib", r_tcp)).await.unwrap();
    let b = Node::start(NodeConfig::default());
    o2ib_ni(&b, b_nid).await;
    b.add_route(route("tcp", r_ib)).await.unwrap();
    Topology {
        r,
        a,
        b,
        a_nid,
        b_nid,
    }
}

#[actix::test]
async fn puts_and_gets_cross_a_router_between_tcp_and_o2ib_both_ways() {
    let Some(ips) = vm_ips("puts_and_gets_cross_a_router_between_tcp_and_o2ib_both_ways") else {
        return;
    };
    let Topology {
        r,
        a,
        b,
        a_nid,
        b_nid,
    } = topology(ips, 60, Tunables::default()).await;
    let md = || MdSpec {
        portal: 11,
        match_bits: 3,
        data: payload(8192, 7),
        depth: 64,
    };
    let mut at_a = a.attach(md()).await.unwrap();
    let mut at_b = b.attach(md()).await.unwrap();
    timeout(WAIT, async {
        for (from, to, sink, name) in [
            (&a, b_nid, &mut at_b, "tcp -> o2ib"),
            (&b, a_nid, &mut at_a, "o2ib -> tcp"),
        ] {
            for (i, len) in [0usize, 4096, 1 << 20].into_iter().enumerate() {
                let data = payload(len, u8::try_from(i).unwrap());
                let got = from
                    .put(PutRequest {
                        dest: to,
                        portal: 11,
                        match_bits: 3,
                        hdr_data: 0,
                        payload: data.clone(),
                        ack: true,
                        timeout: Duration::from_secs(30),
                    })
                    .await
                    .unwrap()
                    .finish()
                    .await;
                assert!(
                    got.iter().all(|e| e.status.is_ok()),
                    "{name} {len}: {got:?}"
                );
                assert_eq!(got.last().unwrap().kind, MsgEventKind::Ack);
                let rx = sink.recv().await.unwrap();
                assert_eq!(rx.payload, data, "{name}: {len} bytes intact");
            }
            let got = from
                .get(GetRequest {
                    dest: to,
                    portal: 11,
                    match_bits: 3,
                    sink_length: 8192,
                    timeout: Duration::from_secs(30),
                })
                .await
                .unwrap()
                .finish()
                .await;
            let reply = got.last().unwrap();
            assert_eq!(reply.kind, MsgEventKind::Reply, "{name}: {got:?}");
            assert_eq!(reply.payload.as_ref().unwrap(), &payload(8192, 7), "{name}");
            println!("{name}: PUT 0 B, 4 KiB, 1 MiB with ACK and a GET of 8 KiB passed");
        }
    })
    .await
    .expect("bounded");
    let c = r.counters().await.unwrap();
    let routed = c.get("route_count").copied().unwrap_or(0);
    let bytes = c.get("route_length").copied().unwrap_or(0);
    // Per direction: 3 PUTs, 3 ACKs, 1 GET, 1 REPLY.
    assert_eq!(routed, 16, "{c:?}");
    assert_eq!(bytes, 2 * (4096 + (1 << 20) + 8192), "{c:?}");
    println!("router forwarded {routed} messages, {bytes} payload bytes");
    // What came in on the router's o2ib NI by RDMA (the 4 KiB and 1 MiB PUTs from B, the
    // 8 KiB REPLY to A's GET) was forwarded from the sink buffer it was written to: no
    // copy through user space.
    let o2ib = o2ib_counters(&r).await;
    assert_eq!(
        (o2ib.puts_lent, o2ib.puts_copied),
        (3, 0),
        "the router's o2ib NI: {o2ib:?}"
    );
    println!("the router's o2ib NI handed up 3 payloads in their sink buffers, copied none");
    // What went out on it by RDMA went from the router buffer it was read into when that
    // was a large buffer (the 1 MiB PUT from A, the 8 KiB REPLY to B's GET); the 4 KiB
    // PUT, in a small buffer, was copied into the NI's own.
    assert_eq!(
        (o2ib.bulk_sent_in_place, o2ib.bulk_sent_copied),
        (2, 1),
        "the router's o2ib NI: {o2ib:?}"
    );
    println!("the router's o2ib NI sent 2 payloads from the router buffers they were read into");
}

/// The router's large pool (4 buffers) filled from both directions through its one o2ib
/// NI: 1 MiB PUTs from A to B and from B to A at once, more in flight than there are
/// buffers. A receive that finds no buffer is parked while the NI goes on with its other
/// work, so every PUT completes with its ACK; and the router advertises no net DOWN
/// meanwhile, though it holds what A and B sent and its own checks run late in the VM.
#[actix::test]
async fn the_large_pool_filled_from_both_directions_through_one_o2ib_ni_drops_nothing() {
    let Some(ips) =
        vm_ips("the_large_pool_filled_from_both_directions_through_one_o2ib_ni_drops_nothing")
    else {
        return;
    };
    let mut tunables = Tunables::default();
    tunables.set(TunableName::LargeBuffers, 4).unwrap();
    let Topology {
        r,
        a,
        b,
        a_nid,
        b_nid,
    } = topology(ips, 61, tunables).await;
    const EACH: usize = 24;
    const WINDOW: usize = 8;
    let md = || MdSpec {
        portal: 12,
        match_bits: 4,
        data: Bytes::new(),
        depth: EACH,
    };
    let _at_a = a.attach(md()).await.unwrap();
    let _at_b = b.attach(md()).await.unwrap();
    let mut events = r.events().subscribe();
    let send_all = |from: Node, to: Nid, seed: u8| async move {
        let mut running = tokio::task::JoinSet::new();
        let mut started = 0usize;
        let mut ok = 0usize;
        loop {
            while running.len() < WINDOW && started < EACH {
                let txn = from
                    .put(PutRequest {
                        dest: to,
                        portal: 12,
                        match_bits: 4,
                        hdr_data: started as u64,
                        payload: payload(1 << 20, seed),
                        ack: true,
                        timeout: Duration::from_secs(60),
                    })
                    .await
                    .unwrap();
                running.spawn(async move { txn.finish().await });
                started += 1;
            }
            let Some(got) = running.join_next().await else {
                break;
            };
            let got = got.unwrap();
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
            ok += 1;
        }
        ok
    };
    let (ab, ba) = timeout(WAIT, async {
        tokio::join!(send_all(a.clone(), b_nid, 1), send_all(b.clone(), a_nid, 2))
    })
    .await
    .expect("bounded: no NI wedged");
    assert_eq!((ab, ba), (EACH, EACH), "every PUT ACKed both ways");
    let mut downs = Vec::new();
    loop {
        match events.try_recv() {
            Ok(e @ actors::events::Event::NetStatus { up: false, .. }) => downs.push(e),
            Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    assert!(downs.is_empty(), "a net went DOWN: {downs:?}");
    let show = r.routing_show().await.unwrap();
    let large: Vec<_> = show.buffers.cpts.iter().map(|c| c[2]).collect();
    let low = large.iter().map(|p| p.mincredits).min().unwrap();
    assert!(low <= 0, "the large pool ran out: {large:?}");
    assert!(
        large
            .iter()
            .all(|p| p.credits == i32::try_from(p.nbuffers).unwrap()),
        "every buffer back: {large:?}"
    );
    println!(
        "large pool of 4 filled from both directions: {EACH} x 1 MiB each way, low-water mark {low}"
    );
    // The 1 MiB PUTs from A went out on the o2ib NI by RDMA from the router buffer they
    // were read into, the few registered ones used again and again (one may be copied
    // when every registered buffer is still held at that moment).
    let o2ib = o2ib_counters(&r).await;
    assert_eq!(
        o2ib.bulk_sent_in_place + o2ib.bulk_sent_copied,
        EACH as u64,
        "{o2ib:?}"
    );
    assert!(o2ib.bulk_sent_in_place > 0, "{o2ib:?}");
    println!(
        "{} of {EACH} sent from the router buffers they were read into",
        o2ib.bulk_sent_in_place
    );
}
