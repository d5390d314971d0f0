//! A real link going down on a router's far interface, in a network namespace this test
//! creates: the router (an `lnet-router` process) watches its interfaces, advertises the
//! NI DOWN and pushes that to its peers at once, and end node A stops routing through it
//! toward that net while a second router carries the traffic.
//!
//! The test re-runs itself inside the namespace (`ip netns exec`); the namespace holds a
//! veth pair per tcp1 address (the address on one end), and loopback for the tcp side.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{wait_listening, Daemon, WAIT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use actors::events::Event;
use actors::{MdSpec, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::route::{RouteDown, RouteSpec, RouterCheck};
use lnet::time::Millis;
use lnet::Nid;
use tokio::time::{timeout, Instant};

const INNER: &str = "LNET_ROUTER_TEST_IN_NETNS";
const PORT: u16 = 24_200;

fn sh(args: &[&str]) {
    let status = Command::new(args[0]).args(&args[1..]).status().unwrap();
    assert!(status.success(), "{args:?}: {status}");
}

/// Deletes the namespace when the test ends, however it ends.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

#[test]
fn a_router_link_going_down_moves_traffic_to_the_other_router_at_once() {
    if std::env::var_os(INNER).is_some() {
        inside();
        return;
    }
    let ns = Netns(format!("lnr-link-{}", std::process::id()));
    sh(&["ip", "netns", "add", &ns.0]);
    let exe = std::env::current_exe().unwrap();
    let status = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(exe)
        .args([
            "--exact",
            "a_router_link_going_down_moves_traffic_to_the_other_router_at_once",
            "--nocapture",
        ])
        .env(INNER, "1")
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the test inside the namespace failed: {status}"
    );
}

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn inside() {
    sh(&["ip", "link", "set", "lo", "up"]);
    for (dev, addr) in [
        ("r1b", "10.99.0.1/32"),
        ("r2b", "10.99.0.3/32"),
        ("bb", "10.99.0.2/32"),
    ] {
        let peer = format!("{dev}-p");
        sh(&[
            "ip", "link", "add", dev, "type", "veth", "peer", "name", &peer,
        ]);
        sh(&["ip", "addr", "add", addr, "dev", dev]);
        sh(&["ip", "link", "set", &peer, "up"]);
        sh(&["ip", "link", "set", dev, "up"]);
    }
    actix::System::new().block_on(scenario());
}

fn router_yaml(a_side: &str, b_side: &str, dev: &str) -> String {
    format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: {a_side}
    - net type: tcp1
      local NI(s):
        - nid: {b_side}
          interfaces:
              0: {dev}
routing:
    enable: 1
lnet-router:
    acceptor_port: {PORT}
"
    )
}

async fn end_node(me: &str, routes: &[(&str, &str)]) -> Node {
    let node = Node::start(NodeConfig {
        router_check: RouterCheck {
            interval: Millis::from_secs(1),
            ping_timeout: Millis::from_secs(1),
            ..RouterCheck::default()
        },
        ..NodeConfig::default()
    });
    let me = nid(me);
    let mut c = SockLndConfig::new(me, 0x11AD_0000 | u64::from(me.addr_u32().unwrap() & 0xffff));
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(me.addr_u32().unwrap())),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 256).await.unwrap();
    for (net, gw) in routes {
        node.add_route(RouteSpec {
            net: net.parse().unwrap(),
            gateway: nid(gw),
            hops: Some(1),
            priority: 0,
        })
        .await
        .unwrap();
    }
    node
}

async fn scenario() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemons = Vec::new();
    for (name, a_side, b_side, dev) in [
        ("r1", "127.0.33.1@tcp", "10.99.0.1@tcp1", "r1b"),
        ("r2", "127.0.33.3@tcp", "10.99.0.3@tcp1", "r2b"),
    ] {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, router_yaml(a_side, b_side, dev)).unwrap();
        let mut d = Daemon::start(&path);
        for n in [a_side, b_side] {
            let addr =
                SocketAddr::new(IpAddr::V4(Ipv4Addr::from(nid(n).addr_u32().unwrap())), PORT);
            timeout(WAIT, wait_listening(&mut d, addr))
                .await
                .expect("bounded");
        }
        daemons.push(d);
    }
    let a = end_node(
        "127.0.33.2@tcp",
        &[("tcp1", "127.0.33.1@tcp"), ("tcp1", "127.0.33.3@tcp")],
    )
    .await;
    let b = end_node(
        "10.99.0.2@tcp1",
        &[("tcp", "10.99.0.1@tcp1"), ("tcp", "10.99.0.3@tcp1")],
    )
    .await;
    let mut sink = b
        .attach(MdSpec {
            portal: 9,
            match_bits: 1,
            data: Bytes::new(),
            depth: 256,
        })
        .await
        .unwrap();
    actix::spawn(async move { while sink.recv().await.is_some() {} });
    let put = || PutRequest {
        dest: nid("10.99.0.2@tcp1"),
        portal: 9,
        match_bits: 1,
        hdr_data: 0,
        payload: Bytes::from(vec![1u8; 4096]),
        ack: true,
        timeout: Duration::from_secs(10),
    };
    timeout(WAIT * 2, async {
        // Both routers carry traffic and know A and B.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for _ in 0..20 {
            let got = a.put(put()).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        let mut events = a.events().subscribe();
        let t0 = Instant::now();
        sh(&["ip", "link", "set", "r1b", "down"]);
        let why = loop {
            if let Event::Route { gateway, down: Some(why), .. } = events.recv().await.unwrap() {
                if gateway == nid("127.0.33.1@tcp") {
                    break why;
                }
            }
        };
        let noticed = t0.elapsed();
        assert_eq!(why, RouteDown::NoUpNiOnRemoteNet);
        // From now on A uses R2 only; every PUT gets its ACK.
        for _ in 0..20 {
            let got = a.put(put()).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        sh(&["ip", "link", "set", "r1b", "up"]);
        let t1 = Instant::now();
        loop {
            if let Event::Route { gateway, down: None, .. } = events.recv().await.unwrap() {
                if gateway == nid("127.0.33.1@tcp") {
                    break;
                }
            }
        }
        println!(
            "link down: A stopped routing through R1 after {noticed:?}; link up: route back after {:?}",
            t1.elapsed()
        );
    })
    .await
    .expect("bounded");
    drop(daemons);
}
