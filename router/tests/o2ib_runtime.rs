//! `net add` of an o2ib NI and `net set --lnd-timeout` on an o2ib net while the daemon
//! runs, on real verbs: the `lnet-router` binary (started with a tcp NI only) is given an
//! o2ib NI on the VM's first soft-RoCE device through the CLI, with `--conns-per-peer 2`;
//! `net show` lists it, PUTs from end node A on tcp cross the router to peer B on the second
//! device through it, on the two connections the router opened to B; `net set
//! --conns-per-peer 4` is shown at once, B keeps its two, and the store keeps it;
//! after `net set --lnd-timeout 4` `net show -v` prints the new timeout at once and a PUT
//! B never answers is cut off by it (where the 50 s the NI started with would have held it);
//! an o2ib NI added then takes the new timeout; an interface without an RDMA device is
//! refused (-22) naming it; a restart from the store alone brings the NIs back with the
//! timeout; `net del` stops one. And the link of an o2ib NI (configured, or added at run
//! time) is watched: on an interface of its own with a soft-RoCE device (a veth pair the VM
//! script makes for this test alone), set down, `net show` says `status: down` and
//! `fatal_error: 1`; up again, `status: up` and `fatal_error: 0`. Runs inside the rdma-vm
//! (scripts/o2ib-vm-test); elsewhere it says it was skipped.

#![cfg(feature = "o2ib")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{
    admin_actions, api_setup, ctl_async, stop, store_only, wait_listening, Daemon, WAIT,
};

use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler, PutRequest};
use bytes::{Bytes, BytesMut};
use lnd::lnd::PeerDown;
use lnd::o2iblnd::{O2ibLnd, O2ibLndConfig};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnd::{Lnd, LndHandler, RxDecision, RxHeader, RxMessage, TxCompletion};
use lnet::route::RouteSpec;
use lnet::Nid;
use tokio::sync::{mpsc, Notify};
use tokio::time::{timeout, Instant};

const PORT: u16 = 24_520;
const API: u16 = 24_521;
const ADMIN: &str = "admin-secret-o2ibrt-0123456789";
const READER: &str = "reader-secret-o2ibrt-0123456789";
const ROUTER_TCP: &str = "127.0.62.1@tcp";
const A_TCP: &str = "127.0.62.2@tcp";

/// No net check: the router sends nothing to B but what it forwards.
const CONFIG: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.62.1@tcp
routing:
    enable: 1
lnet-router:
    acceptor_port: 24520
    net_check: off
";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// The rdma-vm's addresses: the router's device, B's, and the third address on the
/// router's device when the VM has it; `None` (and a line saying so) elsewhere.
fn vm_ips() -> Option<(Ipv4Addr, Ipv4Addr, Option<Ipv4Addr>)> {
    let ip = |v: &str| std::env::var(v).ok().and_then(|s| s.parse().ok());
    match (ip("RDMAVM_IP0"), ip("RDMAVM_IP1")) {
        (Some(ip0), Some(ip1)) => Some((ip0, ip1, ip("RDMAVM_IP2"))),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED o2ib_runtime: not inside the rdma-vm (RDMAVM_IP0 is unset); run \
                 scripts/o2ib-vm-test"
            );
            None
        }
    }
}

/// The interface that carries `ip`.
fn interface_of(ip: Ipv4Addr) -> String {
    if_addrs::get_if_addrs()
        .unwrap()
        .into_iter()
        .find(|i| i.ip() == IpAddr::V4(ip))
        .map(|i| i.name)
        .unwrap_or_else(|| panic!("no interface carries {ip}"))
}

/// Peer B's LND handler: takes every message, until told to hold, from when on it never
/// answers a header (a peer that stopped answering).
struct Peer {
    hold: AtomicBool,
    release: Notify,
    msgs: mpsc::UnboundedSender<RxMessage>,
}

impl LndHandler for Peer {
    async fn on_header(&self, _rx: RxHeader) -> RxDecision {
        if self.hold.load(Ordering::Relaxed) {
            self.release.notified().await;
        }
        RxDecision::Receive(BytesMut::new())
    }
    async fn on_message(&self, msg: RxMessage) {
        let _ = self.msgs.send(msg);
    }
    fn on_send_complete(&self, _done: TxCompletion) {}
    fn on_peer_down(&self, _down: PeerDown) {}
}

fn payload(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

async fn run(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    ctl_async(API, cert, token, args).await
}

async fn start(args: &[OsString]) -> Daemon {
    start_at(
        args,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 62, 1)), PORT),
        API,
    )
    .await
}

/// Starts the daemon with `args` and waits for its acceptor on `tcp` and its API on `api`.
async fn start_at(args: &[OsString], tcp: SocketAddr, api: u16) -> Daemon {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    for addr in [tcp, SocketAddr::from(([127, 0, 0, 1], api))] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

/// `net show --net NET -v` of the daemon, which must succeed.
async fn net_show(cert: &Path, net: &str) -> String {
    let (ok, out, err) = run(cert, READER, &["net", "show", "--net", net, "-v"]).await;
    assert!(ok, "{out}{err}");
    out
}

/// The router's local, remote and network timeout counts (`stats show`).
async fn timeouts(cert: &Path) -> [u64; 3] {
    let (ok, out, err) = run(cert, READER, &["stats", "show"]).await;
    assert!(ok, "{out}{err}");
    let count = |key: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {out}"))
    };
    [
        count("local_timeout_count"),
        count("remote_timeout_count"),
        count("network_timeout_count"),
    ]
}

/// A PUT from `a` to `to` without an ACK; it is on its way once this returns.
async fn put(a: &Node, to: Nid, data: Bytes) {
    let events = a
        .put(PutRequest {
            dest: to,
            portal: 11,
            match_bits: 5,
            hdr_data: 0,
            payload: data,
            ack: false,
            timeout: Duration::from_secs(30),
        })
        .await
        .unwrap()
        .finish()
        .await;
    assert!(events.iter().all(|e| e.status.is_ok()), "{events:?}");
}

#[actix::test]
async fn an_o2ib_ni_added_at_run_time_carries_a_put_and_takes_a_new_lnd_timeout() {
    let Some((ip0, ip1, ip2)) = vm_ips() else {
        return;
    };
    let iface0 = interface_of(ip0);
    let router_ib = nid(&format!("{ip0}@o2ib"));
    let b_nid = nid(&format!("{ip1}@o2ib"));
    let s = api_setup(CONFIG, API, ADMIN, READER);
    let cert = s.cert.as_path();
    let d = start(&s.args).await;

    // 1. net add on the interface of the first device, two connections per peer.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "net",
            "add",
            "--net",
            "o2ib",
            "--if",
            &iface0,
            "--conns-per-peer",
            "2",
        ],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    let shown = net_show(cert, "o2ib").await;
    assert!(
        shown.contains(&format!("nid: {router_ib}\n")) && shown.contains("status: up\n"),
        "{shown}"
    );
    assert!(shown.contains(&format!("0: {iface0}\n")), "{shown}");
    assert!(shown.contains("timeout: 50\n"), "{shown}");
    assert!(shown.contains("conns_per_peer: 2\n"), "{shown}");
    println!("net add --net o2ib --if {iface0} --conns-per-peer 2: {router_ib} up");

    // 2. A PUT from A on tcp crosses it to B on the second device.
    let a = Node::start(NodeConfig::default());
    let mut c = SockLndConfig::new(nid(A_TCP), 0x0262_0002);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 62, 2)),
        PORT,
    ));
    c.peer_port = PORT;
    a.add_ni::<SockLnd<NodeHandler>>(c, 256).await.unwrap();
    a.add_route(RouteSpec {
        net: "o2ib".parse().unwrap(),
        gateway: nid(ROUTER_TCP),
        hops: Some(1),
        priority: 0,
    })
    .await
    .unwrap();
    let (msgs_tx, mut msgs) = mpsc::unbounded_channel();
    let peer = Arc::new(Peer {
        hold: AtomicBool::new(false),
        release: Notify::new(),
        msgs: msgs_tx,
    });
    let b = O2ibLnd::start(O2ibLndConfig::new(b_nid, 0x0262_0003), Arc::clone(&peer))
        .await
        .unwrap();
    timeout(WAIT, async {
        // The router advertises the new NI.
        let reply = a
            .ping(nid(ROUTER_TCP), Duration::from_secs(10))
            .await
            .unwrap();
        assert!(reply.nids().contains(&(router_ib, true)), "{reply:?}");
        for (i, len) in [64usize, 1 << 20].into_iter().enumerate() {
            let data = payload(len, u8::try_from(i).unwrap());
            put(&a, b_nid, data.clone()).await;
            let got = msgs.recv().await.unwrap();
            assert_eq!(got.header.src_nid, nid(A_TCP));
            assert_eq!(got.from.nid, router_ib, "through the NI added at run time");
            assert_eq!(got.payload, data, "{len} bytes intact");
        }
    })
    .await
    .expect("bounded");
    println!("A (tcp) -> router -> B (o2ib): PUTs of 64 B and 1 MiB through {router_ib}");
    // The router opened two connections to B; the PUTs after them go round both.
    let t0 = Instant::now();
    while b
        .peer_conns(router_ib)
        .await
        .iter()
        .filter(|c| c.established)
        .count()
        < 2
    {
        assert!(
            t0.elapsed() < WAIT,
            "the router did not open 2 connections to B"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    timeout(WAIT, async {
        for i in 0..6u8 {
            let data = payload(64, 10 + i);
            put(&a, b_nid, data.clone()).await;
            assert_eq!(msgs.recv().await.unwrap().payload, data);
        }
    })
    .await
    .expect("bounded");
    let conns = b.peer_conns(router_ib).await;
    let received: Vec<u64> = conns.iter().map(|c| c.rx_msgs).collect();
    println!(
        "B's connections from the router: {} (accepted), messages on each {received:?}",
        conns.len()
    );
    assert_eq!(conns.len(), 2, "{conns:?}");
    assert!(
        conns.iter().all(|c| !c.active && c.rx_msgs >= 2),
        "{conns:?}"
    );

    // 2b. net set --conns-per-peer 4: shown at once; B, connected already, keeps its two.
    let ni = router_ib.to_string();
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--nid", &ni, "--conns-per-peer", "4"],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    let shown = net_show(cert, "o2ib").await;
    assert!(shown.contains("conns_per_peer: 4\n"), "{shown}");
    timeout(WAIT, put(&a, b_nid, payload(64, 30)))
        .await
        .expect("bounded");
    msgs.recv().await.unwrap();
    assert_eq!(b.peer_conns(router_ib).await.len(), 2);
    println!("net set --nid {ni} --conns-per-peer 4: shown at once; B keeps its 2 connections");

    // 3. net set --lnd-timeout 4: shown at once, and it bounds the next send.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--net", "o2ib", "--lnd-timeout", "4"],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    let shown = net_show(cert, "o2ib").await;
    assert!(shown.contains("timeout: 4\n"), "{shown}");
    let before = timeouts(cert).await;
    peer.hold.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    put(&a, b_nid, payload(1 << 20, 9)).await;
    let bound = Duration::from_secs(25);
    let took = loop {
        let now = timeouts(cert).await;
        if now.iter().sum::<u64>() > before.iter().sum::<u64>() {
            println!("router timeouts (local, remote, network): {before:?} -> {now:?}");
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < bound,
            "the PUT B never answers was not cut off within {bound:?} (timeouts {now:?})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!(
        "lnd-timeout 50 s -> 4 s at run time: the PUT B never answered was cut off after \
         {:.1} s",
        took.as_secs_f64()
    );
    peer.hold.store(false, Ordering::Relaxed);
    peer.release.notify_waiters();

    // 4. An o2ib NI added now takes the new timeout.
    let mut actions = vec!["add_ni", "set_conns_per_peer", "set_lnd_timeout"];
    if let Some(ip2) = ip2 {
        let added = format!("{ip2}@o2ib1");
        let (ok, out, err) = run(cert, ADMIN, &["net", "add", "--nid", &added]).await;
        assert!(ok && out.is_empty(), "{out}{err}");
        let shown = net_show(cert, "o2ib1").await;
        assert!(shown.contains(&format!("nid: {added}\n")), "{shown}");
        assert!(shown.contains("timeout: 4\n"), "{shown}");
        println!("net add --nid {added}: runs with timeout 4");
        actions.push("add_ni");
    }

    // 5. An interface without an RDMA device: refused, naming it.
    if let Ok(plain) = std::env::var("RDMAVM_PLAIN_IF") {
        let (ok, _, err) = run(
            cert,
            ADMIN,
            &["net", "add", "--net", "o2ib5", "--if", &plain],
        )
        .await;
        assert!(!ok, "{err}");
        assert!(err.starts_with("add:\n    - net:\n"), "{err}");
        assert!(err.contains("errno: -22\n"), "{err}");
        assert!(err.contains("no RDMA device has address"), "{err}");
        println!("net add --net o2ib5 --if {plain} (no RDMA device):\n{err}");
    }
    assert_eq!(admin_actions(API, cert, READER).await, actions);
    stop(d).await;

    // 6. From the store alone: the o2ib NIs are back, with the timeout and conns_per_peer.
    let d = start(&store_only(&s.args)).await;
    let shown = net_show(cert, "o2ib").await;
    assert!(
        shown.contains(&format!("nid: {router_ib}\n"))
            && shown.contains("timeout: 4\n")
            && shown.contains("conns_per_peer: 4\n"),
        "{shown}"
    );
    if let Some(ip2) = ip2 {
        let shown = net_show(cert, "o2ib1").await;
        assert!(
            shown.contains(&format!("nid: {ip2}@o2ib1\n")) && shown.contains("timeout: 4\n"),
            "{shown}"
        );
    }
    println!(
        "restarted from the store alone: the o2ib NIs are back with timeout 4, {router_ib} \
         with conns_per_peer 4"
    );

    // 7. net del stops it.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["net", "del", "--nid", &router_ib.to_string()],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    let (ok, _, err) = run(cert, READER, &["net", "show", "--net", "o2ib"]).await;
    assert!(!ok && err.contains("errno: -2\n"), "{err}");
    let events = admin_actions(API, cert, READER).await;
    assert_eq!(
        events.last().map(String::as_str),
        Some("delete_ni"),
        "{events:?}"
    );
    stop(d).await;
    println!("net del --nid {router_ib}: stopped");
    b.stop().await;
}

const LINK_PORT: u16 = 24_522;
const LINK_API: u16 = 24_523;

/// The interface of the link test and its address: one end of a veth pair of its own, with
/// a soft-RoCE device on it, which the test may set down (`RDMAVM_LINK_IF`,
/// `RDMAVM_LINK_IP`); `None` (and a line saying so) outside the rdma-vm.
fn link_vm() -> Option<(String, Ipv4Addr)> {
    let iface = std::env::var("RDMAVM_LINK_IF").ok();
    let ip = std::env::var("RDMAVM_LINK_IP")
        .ok()
        .and_then(|s| s.parse().ok());
    match (iface, ip) {
        (Some(iface), Some(ip)) => Some((iface, ip)),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED o2ib_runtime link test: not inside the rdma-vm (RDMAVM_LINK_IF is \
                 unset); run scripts/o2ib-vm-test"
            );
            None
        }
    }
}

/// Sets interface `iface` `up` or down.
fn set_link(iface: &str, up: bool) {
    let status = std::process::Command::new("ip")
        .args(["link", "set", iface, if up { "up" } else { "down" }])
        .status()
        .unwrap();
    assert!(status.success(), "ip link set {iface}: {status}");
}

/// Waits (bounded) until `net show -v 3` of NI `ni` says `status` and `fatal_error`; what
/// it said last.
async fn wait_shown(cert: &Path, ni: Nid, status: &str, fatal_error: u8) -> String {
    let want = [
        format!("status: {status}\n"),
        format!("fatal_error: {fatal_error}\n"),
    ];
    let mut shown = String::new();
    for _ in 0..100 {
        let (ok, out, err) = ctl_async(
            LINK_API,
            cert,
            READER,
            &["net", "show", "--net", &ni.net.to_string(), "-v", "3"],
        )
        .await;
        assert!(ok, "{out}{err}");
        assert!(out.contains(&format!("nid: {ni}\n")), "{out}");
        shown = out;
        if want.iter().all(|w| shown.contains(w.as_str())) {
            return shown;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("NI {ni} never showed status {status}, fatal_error {fatal_error}:\n{shown}");
}

/// Sets the link of `iface` down and up again and sees NI `ni` on it follow.
async fn down_and_up(cert: &Path, iface: &str, ni: Nid, how: &str) {
    set_link(iface, false);
    let shown = wait_shown(cert, ni, "down", 1).await;
    println!("{how} {ni}: ip link set {iface} down -> net show:\n{shown}");
    set_link(iface, true);
    wait_shown(cert, ni, "up", 0).await;
    println!("{how} {ni}: ip link set {iface} up -> status: up, fatal_error: 0");
}

#[actix::test]
async fn an_o2ib_ni_whose_link_goes_down_is_shown_down_with_a_fatal_error() {
    let Some((iface, ip)) = link_vm() else {
        return;
    };
    let configured = nid(&format!("{ip}@o2ib7"));
    let config = format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.62.5@tcp
    - net type: o2ib7
      local NI(s):
        - nid: {configured}
routing:
    enable: 1
lnet-router:
    acceptor_port: {LINK_PORT}
    net_check: off
"
    );
    let s = api_setup(&config, LINK_API, ADMIN, READER);
    let cert = s.cert.as_path();
    let tcp = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 62, 5)), LINK_PORT);
    let d = start_at(&s.args, tcp, LINK_API).await;
    wait_shown(cert, configured, "up", 0).await;
    down_and_up(cert, &iface, configured, "configured").await;

    // `net del` ends its watch; the same address added at run time on another net is
    // watched again.
    let (ok, out, err) = ctl_async(
        LINK_API,
        cert,
        ADMIN,
        &["net", "del", "--nid", &configured.to_string()],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    let added = nid(&format!("{ip}@o2ib8"));
    let (ok, out, err) = ctl_async(
        LINK_API,
        cert,
        ADMIN,
        &["net", "add", "--net", "o2ib8", "--if", &iface],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    wait_shown(cert, added, "up", 0).await;
    down_and_up(cert, &iface, added, "added at run time").await;
    stop(d).await;
}
