//! Forwarding over real TCP: end nodes A (on tcp) and B (on tcp1) in this process, and
//! routers between them, as `lnet-router` processes or as in-process nodes on socklnd.
//! PUT with ACK and GET with REPLY cross a router with their payloads intact; killing one of
//! two router processes mid-transfer ends every PUT (ACK or failure event, none hanging)
//! and moves the traffic to the other router; SIGTERM drains a router so that its peers
//! move first and no PUT fails; a silent far net behind a router is found by its probes
//! and routed around; across two router processes in series, PUTs and their ACKs cross
//! both, each `route show` gives the hop counts configured, and a route of lower priority
//! or more hops carries nothing while a better one is up; a PUT for an unhealthy NI of
//! a Multi-Rail peer goes to its healthy NI, and one for a non-Multi-Rail peer does not.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{api_run_args, ctl_async, sigkill, sigterm, wait_listening, Daemon, WAIT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actors::events::Event;
use actors::{GetRequest, MdSpec, MsgEventKind, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::fault::{FaultRule, FaultTrigger, NidMatch};
use lnet::route::{RouteSpec, RouterCheck};
use lnet::time::Millis;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::time::{timeout, Instant};

const PORTAL: u32 = 9;
const BITS: u64 = 0x77;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn ip(n: Nid) -> Ipv4Addr {
    Ipv4Addr::from(n.addr_u32().unwrap())
}

/// An end node (or, with `routing`, a router) with one socklnd NI per NID, all listening
/// on `port`.
async fn node(nids: &[&str], port: u16, routing: bool) -> Node {
    let mut tunables = Tunables::default();
    if routing {
        tunables.set(TunableName::Routing, 1).unwrap();
    }
    node_with(nids, port, tunables, Millis::from_secs(1)).await
}

/// [`node`] with these tunables, its gateways checked every `check` (zero: never, so
/// that it neither pings nor pushes to them).
async fn node_with(nids: &[&str], port: u16, tunables: Tunables, check: Millis) -> Node {
    let node = Node::start(NodeConfig {
        tunables,
        router_check: RouterCheck {
            interval: check,
            ping_timeout: Millis::from_secs(1),
            ..RouterCheck::default()
        },
        ..NodeConfig::default()
    });
    for n in nids {
        let me = nid(n);
        let mut c =
            SockLndConfig::new(me, 0x5EED_0000 | u64::from(me.addr_u32().unwrap() & 0xffff));
        c.listen = Some(SocketAddr::new(IpAddr::V4(ip(me)), port));
        c.peer_port = port;
        node.add_ni::<SockLnd<NodeHandler>>(c, 256).await.unwrap();
    }
    node
}

/// Same as [`node`], forwarding, with one NI per NID.
async fn router_node(nids: &[&str], port: u16) -> Node {
    let mut tunables = Tunables::default();
    tunables.set(TunableName::Routing, 1).unwrap();
    let node = Node::start(NodeConfig {
        tunables,
        ..NodeConfig::default()
    });
    for n in nids {
        let me = nid(n);
        let mut c =
            SockLndConfig::new(me, 0x5EED_1000 | u64::from(me.addr_u32().unwrap() & 0xffff));
        c.listen = Some(SocketAddr::new(IpAddr::V4(ip(me)), port));
        c.peer_port = port;
        node.add_ni::<SockLnd<NodeHandler>>(c, 256).await.unwrap();
    }
    node
}

fn route(net: &str, gw: &str) -> RouteSpec {
    route_via(net, gw, 1, 0)
}

fn route_via(net: &str, gw: &str, hops: u32, priority: u32) -> RouteSpec {
    RouteSpec {
        net: net.parse().unwrap(),
        gateway: nid(gw),
        hops: Some(hops),
        priority,
    }
}

fn md() -> MdSpec {
    MdSpec {
        portal: PORTAL,
        match_bits: BITS,
        data: Bytes::from(vec![0x5a; 8192]),
        depth: 1024,
    }
}

fn put(dest: Nid, payload: Bytes, secs: u64) -> PutRequest {
    PutRequest {
        dest,
        portal: PORTAL,
        match_bits: BITS,
        hdr_data: 1,
        payload,
        ack: true,
        timeout: Duration::from_secs(secs),
    }
}

fn router_yaml(a_side: &str, b_side: &str, port: u16) -> String {
    format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: {a_side}
    - net type: tcp1
      local NI(s):
        - nid: {b_side}
routing:
    enable: 1
lnet-router:
    acceptor_port: {port}
    alive_router_check_interval: 1
    router_ping_timeout: 1
"
    )
}

async fn start_router(
    dir: &tempfile::TempDir,
    name: &str,
    a_side: &str,
    b_side: &str,
    port: u16,
) -> Daemon {
    let sub = dir.path().join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join("lnet.yaml");
    std::fs::write(&path, router_yaml(a_side, b_side, port)).unwrap();
    let mut d = Daemon::start(&path);
    for n in [a_side, b_side] {
        let addr = SocketAddr::new(IpAddr::V4(ip(nid(n))), port);
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

#[actix::test]
async fn puts_and_a_get_cross_a_router_process_with_payloads_intact() {
    const PORT: u16 = 24_100;
    let dir = tempfile::tempdir().unwrap();
    let _r = start_router(&dir, "r", "127.0.23.1@tcp", "127.0.24.1@tcp1", PORT).await;
    let a = node(&["127.0.23.2@tcp"], PORT, false).await;
    let b = node(&["127.0.24.2@tcp1"], PORT, false).await;
    a.add_route(route("tcp1", "127.0.23.1@tcp")).await.unwrap();
    b.add_route(route("tcp", "127.0.24.1@tcp1")).await.unwrap();
    let mut delivered = b.attach(md()).await.unwrap();
    timeout(WAIT, async {
        for len in [0usize, 4096, 1 << 20] {
            let payload: Bytes = (0..len)
                .map(|i| (i % 251) as u8)
                .collect::<Vec<u8>>()
                .into();
            let got = a
                .put(put(nid("127.0.24.2@tcp1"), payload.clone(), 20))
                .await
                .unwrap()
                .finish()
                .await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{len}: {got:?}");
            assert_eq!(got.last().unwrap().kind, MsgEventKind::Ack);
            let rx = delivered.recv().await.unwrap();
            assert_eq!(rx.header.src_nid, nid("127.0.23.2@tcp"));
            assert_eq!(rx.from.nid, nid("127.0.24.1@tcp1"));
            assert_eq!(rx.payload, payload, "{len} bytes intact");
        }
        let got = a
            .get(GetRequest {
                dest: nid("127.0.24.2@tcp1"),
                portal: PORTAL,
                match_bits: BITS,
                sink_length: 8192,
                timeout: Duration::from_secs(20),
            })
            .await
            .unwrap()
            .finish()
            .await;
        let reply = got.last().unwrap();
        assert_eq!(reply.kind, MsgEventKind::Reply, "{got:?}");
        assert_eq!(reply.payload.as_ref().unwrap().len(), 8192);
        // A ping of B crosses the router too.
        let ping = a
            .ping(nid("127.0.24.2@tcp1"), Duration::from_secs(10))
            .await
            .unwrap();
        assert!(ping.nids().contains(&(nid("127.0.24.2@tcp1"), true)));
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn killing_one_of_two_router_processes_mid_transfer_ends_every_put_and_moves_traffic() {
    const PORT: u16 = 24_101;
    const TOTAL: usize = 600;
    const WINDOW: usize = 16;
    const KILL_AFTER: usize = 150;
    const PUT_TIMEOUT: u64 = 10;
    let dir = tempfile::tempdir().unwrap();
    let mut r1 = start_router(&dir, "r1", "127.0.25.1@tcp", "127.0.26.1@tcp1", PORT).await;
    let _r2 = start_router(&dir, "r2", "127.0.25.3@tcp", "127.0.26.3@tcp1", PORT).await;
    let a = node(&["127.0.25.2@tcp"], PORT, false).await;
    let b = node(&["127.0.26.2@tcp1"], PORT, false).await;
    for gw in ["127.0.25.1@tcp", "127.0.25.3@tcp"] {
        a.add_route(route("tcp1", gw)).await.unwrap();
    }
    for gw in ["127.0.26.1@tcp1", "127.0.26.3@tcp1"] {
        b.add_route(route("tcp", gw)).await.unwrap();
    }
    let mut delivered = b.attach(md()).await.unwrap();
    tokio::spawn(async move { while delivered.recv().await.is_some() {} });
    let mut events = a.events().subscribe();
    let dest = nid("127.0.26.2@tcp1");
    let r1_gw = nid("127.0.25.1@tcp");
    let payload = Bytes::from(vec![7u8; 16 << 10]);

    let report = timeout(WAIT * 4, async {
        let mut running = tokio::task::JoinSet::new();
        let mut started = 0usize;
        let mut done = Vec::new();
        let mut killed_at: Option<Instant> = None;
        let mut noticed_at: Option<Instant> = None;
        let mut in_flight_at_kill = 0usize;
        loop {
            while running.len() < WINDOW && started < TOTAL {
                let txn = a
                    .put(put(dest, payload.clone(), PUT_TIMEOUT))
                    .await
                    .unwrap();
                let t0 = Instant::now();
                running.spawn(async move {
                    let got = txn.finish().await;
                    let ok = got.iter().all(|e| e.status.is_ok())
                        && got.last().is_some_and(|e| e.kind == MsgEventKind::Ack);
                    (t0, Instant::now(), ok, got)
                });
                started += 1;
            }
            let Some(res) = running.join_next().await else {
                break;
            };
            done.push(res.unwrap());
            if killed_at.is_none() && done.len() == KILL_AFTER {
                in_flight_at_kill = running.len();
                sigkill(r1.pid());
                killed_at = Some(Instant::now());
            }
            while let Ok(e) = events.try_recv() {
                if let Event::Route {
                    gateway,
                    down: Some(_),
                    ..
                } = e
                {
                    if gateway == r1_gw && killed_at.is_some() && noticed_at.is_none() {
                        noticed_at = Some(Instant::now());
                    }
                }
            }
        }
        (done, killed_at.unwrap(), noticed_at, in_flight_at_kill)
    })
    .await
    .expect("every PUT ended within the bound");
    let _ = r1.wait_exit().await;
    let (done, killed_at, noticed_at, in_flight) = report;
    assert_eq!(done.len(), TOTAL, "every PUT ended");
    for (t0, t1, ok, got) in &done {
        let took = t1.duration_since(*t0);
        assert!(
            took <= Duration::from_secs(PUT_TIMEOUT + 2),
            "a PUT took {took:?}: {got:?}"
        );
        if !ok {
            let last = got.last().unwrap();
            assert!(
                !last.status.is_ok(),
                "a failed PUT ends with a failure event: {got:?}"
            );
        }
    }
    let noticed_at = noticed_at.expect("A noticed that R1 died");
    let after: Vec<_> = done.iter().filter(|(t0, ..)| *t0 >= noticed_at).collect();
    assert!(!after.is_empty());
    assert!(
        after.iter().all(|(_, _, ok, _)| *ok),
        "every PUT sent after R1's death was noticed got its ACK"
    );
    let failed = done.iter().filter(|(_, _, ok, _)| !ok).count();
    let switch = noticed_at.duration_since(killed_at);
    println!(
        "router killed with {in_flight} PUTs in flight; {failed} PUTs failed; A noticed after {switch:?}; \
         {} PUTs sent after that all ACKed",
        after.len()
    );
}

#[actix::test]
async fn a_silent_far_net_behind_a_router_is_routed_around_and_back() {
    const PORT: u16 = 24_102;
    let r1 = router_node(&["127.0.27.1@tcp", "127.0.28.1@tcp1"], PORT).await;
    let r2 = router_node(&["127.0.27.3@tcp", "127.0.28.3@tcp1"], PORT).await;
    let a = node(&["127.0.27.2@tcp"], PORT, false).await;
    let b = node(&["127.0.28.2@tcp1"], PORT, false).await;
    for gw in ["127.0.27.1@tcp", "127.0.27.3@tcp"] {
        a.add_route(route("tcp1", gw)).await.unwrap();
    }
    for gw in ["127.0.28.1@tcp1", "127.0.28.3@tcp1"] {
        b.add_route(route("tcp", gw)).await.unwrap();
    }
    let mut delivered = b.attach(md()).await.unwrap();
    tokio::spawn(async move { while delivered.recv().await.is_some() {} });
    let dest = nid("127.0.28.2@tcp1");
    let r1_gw = nid("127.0.27.1@tcp");
    let r1_far = nid("127.0.28.1@tcp1");
    timeout(WAIT * 2, async {
        // Traffic through both routers: B is known on both.
        for _ in 0..8 {
            let got = a.put(put(dest, Bytes::from_static(b"x"), 10)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        let mut events = a.events().subscribe();
        let mut b_events = b.events().subscribe();
        // Every message R1's far NI receives is dropped: its link stays up, nothing
        // comes back.
        let rule = r1
            .add_fault_rule(FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All).at(r1_far))
            .unwrap();
        let t0 = Instant::now();
        let down = loop {
            if let Event::Route { gateway, down: Some(why), .. } = events.recv().await.unwrap() {
                if gateway == r1_gw {
                    break why;
                }
            }
        };
        let down_after = t0.elapsed();
        // B stops sending its ACKs through R1 too (R1's push shows its tcp1 NI DOWN).
        loop {
            if let Event::Route { gateway, down: Some(_), .. } = b_events.recv().await.unwrap() {
                if gateway == r1_far {
                    break;
                }
            }
        }
        // Meanwhile every PUT goes through R2 and gets its ACK.
        for _ in 0..8 {
            let got = a.put(put(dest, Bytes::from_static(b"y"), 10)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        assert!(r1.remove_fault_rule(rule));
        let t1 = Instant::now();
        loop {
            if let Event::Route { gateway, down: None, .. } = events.recv().await.unwrap() {
                if gateway == r1_gw {
                    break;
                }
            }
        }
        let up_after = t1.elapsed();
        println!("silent far net: A's route via R1 down after {down_after:?} ({down}), up after {up_after:?}");
        let routed = r2.counters().await.unwrap().get("route_count").copied().unwrap_or(0);
        assert!(routed >= 16, "R2 carried the traffic meanwhile: {routed}");
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn sigterm_drains_a_router_peers_move_to_the_other_and_no_put_fails() {
    const PORT: u16 = 24_103;
    const TOTAL: usize = 400;
    const WINDOW: usize = 16;
    const STOP_AFTER: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let mut r1 = start_router(&dir, "r1", "127.0.29.1@tcp", "127.0.32.1@tcp1", PORT).await;
    let _r2 = start_router(&dir, "r2", "127.0.29.3@tcp", "127.0.32.3@tcp1", PORT).await;
    let a = node(&["127.0.29.2@tcp"], PORT, false).await;
    let b = node(&["127.0.32.2@tcp1"], PORT, false).await;
    for gw in ["127.0.29.1@tcp", "127.0.29.3@tcp"] {
        a.add_route(route("tcp1", gw)).await.unwrap();
    }
    for gw in ["127.0.32.1@tcp1", "127.0.32.3@tcp1"] {
        b.add_route(route("tcp", gw)).await.unwrap();
    }
    let mut delivered = b.attach(md()).await.unwrap();
    tokio::spawn(async move { while delivered.recv().await.is_some() {} });
    // Let the router checkers ping and push, so that the routers know their peers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let dest = nid("127.0.32.2@tcp1");
    let payload = Bytes::from(vec![3u8; 16 << 10]);
    let results = timeout(WAIT * 2, async {
        let mut running = tokio::task::JoinSet::new();
        let mut started = 0usize;
        let mut done = Vec::new();
        loop {
            while running.len() < WINDOW && started < TOTAL {
                let txn = a.put(put(dest, payload.clone(), 10)).await.unwrap();
                running.spawn(async move { txn.finish().await });
                started += 1;
            }
            let Some(res) = running.join_next().await else {
                break;
            };
            done.push(res.unwrap());
            if done.len() == STOP_AFTER {
                sigterm(r1.pid());
            }
        }
        done
    })
    .await
    .expect("every PUT ended within the bound");
    let (status, out, err) = r1.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(out.contains("lnet-router: drained"), "{out}");
    let failed: Vec<_> = results
        .iter()
        .filter(|got| !got.iter().all(|e| e.status.is_ok()))
        .collect();
    assert!(
        failed.is_empty(),
        "no PUT fails when a router drains: {failed:?}"
    );
    let views = a.routes().await.unwrap();
    let via_r1 = views
        .iter()
        .find(|r| r.spec.gateway == nid("127.0.29.1@tcp"))
        .unwrap();
    assert!(via_r1.down.is_some(), "{views:?}");
    println!(
        "drain: {TOTAL} PUTs, all ACKed; R1 said: {}",
        out.lines().find(|l| l.contains("drained")).unwrap_or("")
    );
}

const ADMIN: &str = "admin-secret-0123456789";

/// Starts an `lnet-router` with one NI per NID (each on its own net), `routes` (a `route:`
/// section or nothing), forwarding, and its API on 127.0.0.1:`api` over HTTPS with `tls`.
async fn start_router_api(
    dir: &Path,
    name: &str,
    nids: &[&str],
    routes: &str,
    port: u16,
    api: u16,
    tls: &(PathBuf, PathBuf),
) -> Daemon {
    let home = dir.join(name);
    std::fs::create_dir_all(&home).unwrap();
    let mut yaml = String::from("net:\n");
    for n in nids {
        yaml.push_str(&format!(
            "    - net type: {}\n      local NI(s):\n        - nid: {n}\n",
            nid(n).net
        ));
    }
    yaml.push_str(routes);
    yaml.push_str(&format!(
        "routing:
    enable: 1
lnet-router:
    acceptor_port: {port}
    alive_router_check_interval: 1
    router_ping_timeout: 1
"
    ));
    let config = home.join("lnet.yaml");
    std::fs::write(&config, yaml).unwrap();
    let owned = api_run_args(
        &home,
        &config,
        &format!("ops admin {ADMIN}\n"),
        api,
        &tls.0,
        &tls.1,
    );
    let args: Vec<&std::ffi::OsStr> = owned.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    let mut addrs: Vec<SocketAddr> = nids
        .iter()
        .map(|n| SocketAddr::new(IpAddr::V4(ip(nid(n))), port))
        .collect();
    addrs.push(SocketAddr::from(([127, 0, 0, 1], api)));
    for addr in addrs {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

/// `route show -v` of the router whose API is on `api`.
async fn route_show(api: u16, ca: &Path) -> String {
    let (ok, out, err) = ctl_async(api, ca, ADMIN, &["route", "show", "-v"]).await;
    assert!(ok, "{out}{err}");
    out
}

/// `route_count` of `stats show` of the router whose API is on `api`.
async fn route_count(api: u16, ca: &Path) -> u64 {
    let (ok, out, err) = ctl_async(api, ca, ADMIN, &["stats", "show"]).await;
    assert!(ok, "{out}{err}");
    out.lines()
        .find_map(|l| l.trim().strip_prefix("route_count: "))
        .unwrap_or_else(|| panic!("no route_count in {out}"))
        .parse()
        .unwrap()
}

/// Polls `route show -v` on `api` (bounded) until it holds every block of `want`.
async fn until_routes_show(api: u16, ca: &Path, want: &[&str]) -> String {
    timeout(WAIT, async {
        loop {
            let shown = route_show(api, ca).await;
            if want.iter().all(|w| shown.contains(w)) {
                return shown;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("route show on {api} never held {want:?}"))
}

/// `n` PUTs from `a` (NID `src`) to `dest`, one after the other: each ACKed, and delivered
/// intact with its source, from the last hop `from`.
async fn puts_acked(
    a: &Node,
    delivered: &mut tokio::sync::mpsc::Receiver<lnd::RxMessage>,
    (src, dest, from): (Nid, Nid, Nid),
    n: usize,
) {
    for i in 0..n {
        let payload = Bytes::from(vec![u8::try_from(i % 251).unwrap(); 4096]);
        let got = a
            .put(put(dest, payload.clone(), 10))
            .await
            .unwrap()
            .finish()
            .await;
        assert!(got.iter().all(|e| e.status.is_ok()), "PUT {i}: {got:?}");
        assert_eq!(got.last().unwrap().kind, MsgEventKind::Ack, "PUT {i}");
        let rx = delivered.recv().await.unwrap();
        assert_eq!(rx.header.src_nid, src, "PUT {i}: the source");
        assert_eq!(rx.from.nid, from, "PUT {i}: the last hop");
        assert_eq!(rx.payload, payload, "PUT {i} intact");
    }
}

/// A's routes, once A has pinged every gateway (bounded).
async fn pinged_routes(a: &Node) -> Vec<actors::RouteView> {
    timeout(WAIT, async {
        loop {
            let views = a.routes().await.unwrap();
            if views
                .iter()
                .all(|v| v.single_hop.is_some() && v.down.is_none())
            {
                return views;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every gateway pinged and up")
}

fn view<'a>(views: &'a [actors::RouteView], net: &str, gw: &str) -> &'a actors::RouteView {
    views
        .iter()
        .find(|v| v.spec.net == net.parse().unwrap() && v.spec.gateway == nid(gw))
        .unwrap_or_else(|| panic!("no route to {net} via {gw}: {views:?}"))
}

/// A (tcp) -> R1 (tcp, tcp1) -> R2 (tcp1, tcp2) -> B (tcp2), each router its own process;
/// R3 (tcp, tcp1) stands beside R1 with worse routes: from A, a lower priority to tcp1 and
/// more hops to tcp2; from R2, a lower priority back to tcp.
#[actix::test]
async fn puts_cross_two_router_processes_in_series_and_the_best_routes_carry_them() {
    const PORT: u16 = 24_104;
    const API_R1: u16 = 24_105;
    const API_R2: u16 = 24_106;
    const API_R3: u16 = 24_107;
    const N: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let cert = web::SelfSigned::generate(&["127.0.0.1", "localhost"]).unwrap();
    let tls = cert.write(dir.path()).unwrap();
    let ca = tls.0.clone();
    let to_tcp2_via_r2 = "route:
    - net: tcp2
      gateway: 127.0.62.3@tcp1
      hop: 1
";
    let mut r1 = start_router_api(
        dir.path(),
        "r1",
        &["127.0.61.1@tcp", "127.0.62.1@tcp1"],
        to_tcp2_via_r2,
        PORT,
        API_R1,
        &tls,
    )
    .await;
    let _r3 = start_router_api(
        dir.path(),
        "r3",
        &["127.0.61.5@tcp", "127.0.62.5@tcp1"],
        to_tcp2_via_r2,
        PORT,
        API_R3,
        &tls,
    )
    .await;
    let _r2 = start_router_api(
        dir.path(),
        "r2",
        &["127.0.62.3@tcp1", "127.0.63.3@tcp2"],
        "route:
    - net: tcp
      gateway: 127.0.62.1@tcp1
      hop: 1
      priority: 0
    - net: tcp
      gateway: 127.0.62.5@tcp1
      hop: 1
      priority: 1
",
        PORT,
        API_R2,
        &tls,
    )
    .await;
    let a = node(&["127.0.61.2@tcp"], PORT, false).await;
    let b = node(&["127.0.63.2@tcp2"], PORT, false).await;
    a.add_route(route_via("tcp1", "127.0.61.1@tcp", 1, 0))
        .await
        .unwrap();
    a.add_route(route_via("tcp1", "127.0.61.5@tcp", 1, 1))
        .await
        .unwrap();
    a.add_route(route_via("tcp2", "127.0.61.1@tcp", 2, 0))
        .await
        .unwrap();
    a.add_route(route_via("tcp2", "127.0.61.5@tcp", 3, 0))
        .await
        .unwrap();
    b.add_route(route_via("tcp1", "127.0.63.3@tcp2", 1, 0))
        .await
        .unwrap();
    b.add_route(route_via("tcp", "127.0.63.3@tcp2", 2, 0))
        .await
        .unwrap();
    let mut delivered = b.attach(md()).await.unwrap();
    let (a_nid, b_nid, r2_far) = (
        nid("127.0.61.2@tcp"),
        nid("127.0.63.2@tcp2"),
        nid("127.0.63.3@tcp2"),
    );

    // route show on each: the hop counts as configured; a gateway with an NI on the
    // remote net makes a single-hop route, one without a multi-hop route.
    until_routes_show(
        API_R1,
        &ca,
        &["-     net: tcp2\n      gateway: 127.0.62.3@tcp1\n      hop: 1\n      priority: 0\n      state: up\n      type: single-hop\n"],
    )
    .await;
    let r2_routes = until_routes_show(
        API_R2,
        &ca,
        &[
            "-     net: tcp\n      gateway: 127.0.62.1@tcp1\n      hop: 1\n      priority: 0\n      state: up\n      type: single-hop\n",
            "-     net: tcp\n      gateway: 127.0.62.5@tcp1\n      hop: 1\n      priority: 1\n      state: up\n      type: single-hop\n",
        ],
    )
    .await;
    assert!(!r2_routes.contains("tcp2"), "{r2_routes}");
    let views = pinged_routes(&a).await;
    for (net, gw, hops, priority, single) in [
        ("tcp1", "127.0.61.1@tcp", 1, 0, true),
        ("tcp1", "127.0.61.5@tcp", 1, 1, true),
        ("tcp2", "127.0.61.1@tcp", 2, 0, false),
        ("tcp2", "127.0.61.5@tcp", 3, 0, false),
    ] {
        let v = view(&views, net, gw);
        assert_eq!(
            (v.spec.hops, v.spec.priority, v.single_hop),
            (Some(hops), priority, Some(single)),
            "{net} via {gw}: {v:?}"
        );
    }
    let views = pinged_routes(&b).await;
    assert_eq!(view(&views, "tcp", "127.0.63.3@tcp2").spec.hops, Some(2));
    assert_eq!(
        view(&views, "tcp", "127.0.63.3@tcp2").single_hop,
        Some(false)
    );
    assert_eq!(
        view(&views, "tcp1", "127.0.63.3@tcp2").single_hop,
        Some(true)
    );

    // PUTs from A reach B through R1 and R2, and their ACKs come back; R3, on the worse
    // routes both ways, forwards nothing.
    let before = (
        route_count(API_R1, &ca).await,
        route_count(API_R2, &ca).await,
        route_count(API_R3, &ca).await,
    );
    puts_acked(&a, &mut delivered, (a_nid, b_nid, r2_far), N).await;
    let after = (
        route_count(API_R1, &ca).await,
        route_count(API_R2, &ca).await,
        route_count(API_R3, &ca).await,
    );
    let n = u64::try_from(N).unwrap();
    assert!(
        after.0 - before.0 >= 2 * n,
        "R1 forwarded the PUTs and ACKs: {before:?} -> {after:?}"
    );
    assert!(
        after.1 - before.1 >= 2 * n,
        "R2 forwarded the PUTs and ACKs: {before:?} -> {after:?}"
    );
    assert_eq!(after.2, before.2, "R3 forwarded nothing while R1 was up");

    // R1 dies: its routes go down on A and on R2, and the worse routes through R3 carry
    // the PUTs and their ACKs.
    let mut events = a.events().subscribe();
    sigkill(r1.pid());
    let _ = r1.wait_exit().await;
    timeout(WAIT, async {
        loop {
            if let Event::Route {
                gateway,
                down: Some(_),
                ..
            } = events.recv().await.unwrap()
            {
                if gateway == nid("127.0.61.1@tcp") {
                    break;
                }
            }
        }
    })
    .await
    .expect("A saw R1's routes go down");
    until_routes_show(
        API_R2,
        &ca,
        &["-     net: tcp\n      gateway: 127.0.62.1@tcp1\n      hop: 1\n      priority: 0\n      state: down\n"],
    )
    .await;
    timeout(
        WAIT,
        puts_acked(&a, &mut delivered, (a_nid, b_nid, r2_far), N),
    )
    .await
    .expect("bounded");
    let r3 = route_count(API_R3, &ca).await;
    assert!(
        r3 - after.2 >= 2 * n,
        "R3 forwarded the PUTs and ACKs: {} -> {r3}",
        after.2
    );
}

/// A router process R (tcp `{a}.1`, tcp1 `{b}.1`) between A (`{a}.2@tcp`) and B, which has
/// NIs `{b}.2@tcp1` and `{b}.12@tcp1` and drops whatever arrives at the second (its link
/// stays up: only its health tells). R knows A as a Multi-Rail peer and B as configured,
/// Multi-Rail as `b_multi_rail` (B checks no gateway, so it pushes nothing to R that
/// would say otherwise); B2's health is lowered to 0 on R through the API. A, whose
/// discovery is off, sends `n` PUTs to B2 (the NID it was given); what B received, on
/// which NI and with which destination in the header, and whether each PUT was ACKed.
async fn puts_for_an_unhealthy_peer_ni(
    (a, b): (&str, &str),
    (port, api): (u16, u16),
    b_multi_rail: bool,
    n: usize,
) -> (Vec<(Nid, Nid)>, Vec<bool>) {
    let dir = tempfile::tempdir().unwrap();
    let cert = web::SelfSigned::generate(&["127.0.0.1", "localhost"]).unwrap();
    let tls = cert.write(dir.path()).unwrap();
    let ca = tls.0.clone();
    let peers = format!(
        "peer:
    - primary nid: {a}.2@tcp
      Multi-Rail: true
      peer ni:
        - nid: {a}.2@tcp
    - primary nid: {b}.2@tcp1
      Multi-Rail: {b_multi_rail}
      peer ni:
        - nid: {b}.2@tcp1
        - nid: {b}.12@tcp1
"
    );
    let (r_a, r_b) = (format!("{a}.1@tcp"), format!("{b}.1@tcp1"));
    let _r = start_router_api(dir.path(), "r", &[&r_a, &r_b], &peers, port, api, &tls).await;
    let mut quiet = Tunables::default();
    quiet.set(TunableName::Discovery, 0).unwrap();
    let a_node = node_with(&[&format!("{a}.2@tcp")], port, quiet, Millis::from_secs(1)).await;
    let b_nids = [format!("{b}.2@tcp1"), format!("{b}.12@tcp1")];
    let b_nids: Vec<&str> = b_nids.iter().map(String::as_str).collect();
    let b_node = node_with(&b_nids, port, Tunables::default(), Millis::ZERO).await;
    let b2 = nid(&format!("{b}.12@tcp1"));
    a_node.add_route(route("tcp1", &r_a)).await.unwrap();
    b_node.add_route(route("tcp", &r_b)).await.unwrap();
    b_node
        .add_fault_rule(FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All).at(b2))
        .unwrap();
    let mut delivered = b_node.attach(md()).await.unwrap();
    let b2_arg = b2.to_string();
    let (ok, out, err) = ctl_async(
        api,
        &ca,
        ADMIN,
        &["peer", "set", "--nid", &b2_arg, "--health", "0"],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, shown, err) = ctl_async(api, &ca, ADMIN, &["peer", "show", "-v", "2"]).await;
    assert!(ok, "{err}");
    let mr_line = format!("primary nid: {b}.2@tcp1\n      Multi-Rail: {b_multi_rail}\n");
    assert!(shown.contains(&mr_line), "{mr_line} in\n{shown}");
    let mut acked = Vec::new();
    let mut got = Vec::new();
    timeout(WAIT * 2, async {
        for i in 0..n {
            let payload = Bytes::from(vec![9u8; 1024]);
            let events = a_node
                .put(put(b2, payload, 3))
                .await
                .unwrap()
                .finish()
                .await;
            acked.push(
                events.iter().all(|e| e.status.is_ok())
                    && events.last().is_some_and(|e| e.kind == MsgEventKind::Ack),
            );
            while let Ok(rx) = delivered.try_recv() {
                got.push((rx.ni, rx.header.dest_nid));
            }
            println!("PUT {i}: {:?}", events.last().map(|e| (e.kind, &e.status)));
        }
    })
    .await
    .expect("bounded");
    (got, acked)
}

#[actix::test]
async fn a_put_for_an_unhealthy_ni_of_a_multi_rail_peer_goes_to_its_healthy_ni() {
    let (got, acked) =
        puts_for_an_unhealthy_peer_ni(("127.0.64", "127.0.65"), (24_108, 24_109), true, 5).await;
    assert!(acked.iter().all(|a| *a), "every PUT ACKed: {acked:?}");
    let healthy = nid("127.0.65.2@tcp1");
    assert_eq!(
        got,
        vec![(healthy, healthy); 5],
        "delivered on B's healthy NI, named in the header"
    );
}

#[actix::test]
async fn a_put_for_an_unhealthy_ni_of_a_non_multi_rail_peer_stays_on_that_ni() {
    let (got, acked) =
        puts_for_an_unhealthy_peer_ni(("127.0.66", "127.0.67"), (24_110, 24_111), false, 2).await;
    assert!(got.is_empty(), "nothing reached B's other NI: {got:?}");
    assert!(acked.iter().all(|a| !*a), "no PUT ACKed: {acked:?}");
}
