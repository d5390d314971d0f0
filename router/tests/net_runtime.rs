//! `net add`, `net del` and `net set` on a running daemon, over HTTPS with a real store and
//! real sockets on loopback: an NI added at run time listens, is listed by `net show` (with
//! the `--peer-timeout` it was added with),
//! forwards a ping between peers on its net and another, and comes back on a restart from
//! the store alone; deleted, its port is closed, `net show` no longer lists it and the
//! routes whose gateway was on its net go with it. The refusals print lnetctl's errors
//! (an o2ib net in a build without the o2ib LND among them).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{
    admin_actions, api_setup, ctl_async, stop, store_only, wait_listening, ApiSetup, Daemon, WAIT,
};

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::route::RouteSpec;
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 24_470;
const API: u16 = 24_471;
const ADMIN: &str = "admin-secret-netadd-0123456789";
const READER: &str = "reader-secret-netadd-0123456789";

const CONFIG: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.47.1@tcp
routing:
    enable: 1
lnet-router:
    acceptor_port: 24470
";

/// The NI added at run time: `--net tcp1 --if lo`, so the address of `lo`.
const ADDED: &str = "127.0.0.1@tcp1";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn added_listen() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), PORT)
}

/// Runs the CLI with `args` and the connection flags; (success, stdout, stderr).
async fn run(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    ctl_async(API, cert, token, args).await
}

async fn start(args: &[OsString], also: Option<SocketAddr>) -> Daemon {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    let mut addrs = vec![
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 47, 1)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ];
    addrs.extend(also);
    for addr in addrs {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

/// An end node in this process with one socklnd NI, and a route to `far` via `gateway`.
async fn end_node(me: &str, far: &str, gateway: &str) -> Node {
    let node = Node::start(NodeConfig::default());
    let me = nid(me);
    let mut c = SockLndConfig::new(me, 0x5EED_4700 | u64::from(me.addr_u32().unwrap() & 0xff));
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(me.addr_u32().unwrap())),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 64).await.unwrap();
    node.add_route(RouteSpec {
        net: far.parse().unwrap(),
        gateway: nid(gateway),
        hops: Some(1),
        priority: 0,
    })
    .await
    .unwrap();
    node
}

/// Waits (bounded) until nothing accepts connections on `addr`.
async fn wait_closed(addr: SocketAddr) {
    for _ in 0..50 {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{addr} still accepts connections");
}

fn setup() -> ApiSetup {
    api_setup(CONFIG, API, ADMIN, READER)
}

/// POSTs `body` to `path` of the API as the admin: the status and the JSON answer.
async fn post(cert: &Path, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let pem = std::fs::read(cert).unwrap();
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let resp = client
        .post(format!("https://127.0.0.1:{API}{path}"))
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}

/// The lnetctl error YAML's errno line is `errno` and its descr names `what`.
fn refused(ok: bool, err: &str, head: &str, errno: i32, what: &str) {
    assert!(!ok, "{err}");
    assert!(err.starts_with(head), "{err}");
    assert!(err.contains(&format!("errno: {errno}\n")), "{err}");
    assert!(err.contains(what), "{err}");
}

#[actix::test]
async fn net_add_at_run_time_forwards_survives_a_restart_and_net_del_closes_it() {
    let s = setup();
    let cert = s.cert.as_path();
    let d = start(&s.args, None).await;
    assert!(
        TcpStream::connect_timeout(&added_listen(), Duration::from_millis(200)).is_err(),
        "nothing listens there before net add"
    );

    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "net",
            "add",
            "--net",
            "tcp1",
            "--if",
            "lo",
            "--peer-timeout",
            "30",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, "");
    assert!(TcpStream::connect_timeout(&added_listen(), Duration::from_secs(1)).is_ok());
    let (ok, out, err) = run(cert, READER, &["net", "show", "--net", "tcp1", "-v"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("nid: {ADDED}\n")) && out.contains("status: up\n"),
        "{out}"
    );
    assert!(out.contains("0: lo\n"), "{out}");
    assert!(out.contains("peer_timeout: 30\n"), "{out}");
    // The configured net runs with the LNDs' default.
    let (ok, out, err) = run(cert, READER, &["net", "show", "--net", "tcp", "-v"]).await;
    assert!(ok && out.contains("peer_timeout: 180\n"), "{out}{err}");

    // A peer on the new net pings one on the configured net through the router, and the
    // router itself on its new NI.
    let a = end_node("127.0.48.2@tcp1", "tcp", ADDED).await;
    let b = end_node("127.0.47.2@tcp", "tcp1", "127.0.47.1@tcp").await;
    timeout(WAIT, async {
        let reply = a
            .ping(nid("127.0.47.2@tcp"), Duration::from_secs(10))
            .await
            .expect("a ping crosses the router through the NI added at run time");
        assert!(reply.nids().contains(&(nid("127.0.47.2@tcp"), true)));
        let reply = a.ping(nid(ADDED), Duration::from_secs(10)).await.unwrap();
        assert!(reply.nids().contains(&(nid(ADDED), true)), "{reply:?}");
    })
    .await
    .expect("bounded");
    drop(b);

    // The refusals, as lnetctl prints them.
    let (ok, _, err) = run(cert, ADMIN, &["net", "add", "--net", "tcp1", "--if", "lo"]).await;
    refused(ok, &err, "add:\n    - net:\n", -17, "cannot add LNet NI");
    let (ok, _, err) = run(cert, ADMIN, &["net", "add", "--nid", ADDED]).await;
    refused(ok, &err, "add:\n    - net:\n", -17, ADDED);
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["net", "add", "--net", "tcp2", "--if", "no-such-if0"],
    )
    .await;
    refused(ok, &err, "add:\n    - net:\n", -22, "no-such-if0");
    // An o2ib net in a build without the o2ib LND: refused, saying so, over the CLI and
    // the API alike. (With it, the VM test `o2ib_runtime` adds one on real verbs.)
    if !cfg!(feature = "o2ib") {
        let (ok, _, err) = run(cert, ADMIN, &["net", "add", "--net", "o2ib1", "--if", "lo"]).await;
        refused(
            ok,
            &err,
            "add:\n    - net:\n",
            -22,
            "which this build leaves out",
        );
        assert!(
            err.contains("descr: \"cannot add LNet NI: net o2ib1 needs the o2ib LND"),
            "{err}"
        );
        let (status, body) = post(
            cert,
            "/api/v1/nets",
            serde_json::json!({"net": "o2ib1", "interface": "lo"}),
        )
        .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["field"], "net", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("leaves out"), "{body}");
    }
    // `--conns-per-peer` above 1 on an o2ib net is taken (o2iblnd opens that many
    // connections to a peer): `lo` is refused for what it is, not for the option. Another
    // LND is not available.
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &[
            "net",
            "add",
            "--net",
            "o2ib1",
            "--if",
            "lo",
            "--conns-per-peer",
            "2",
        ],
    )
    .await;
    refused(ok, &err, "add:\n    - net:\n", -22, "cannot add LNet NI");
    assert!(!err.contains("conns"), "{err}");
    let (status, body) = post(
        cert,
        "/api/v1/nets",
        serde_json::json!({"net": "o2ib1", "interface": "lo", "conns_per_peer": 2}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_ne!(body["error"]["field"], "conns_per_peer", "{body}");
    let (ok, _, err) = run(cert, ADMIN, &["net", "add", "--net", "gni1", "--if", "lo"]).await;
    refused(ok, &err, "add:\n    - net:\n", -22, "not available");
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["net", "add", "--net", "tcp2", "--nid", "127.0.0.1@tcp2"],
    )
    .await;
    refused(
        ok,
        &err,
        "add:\n",
        -22,
        "--net is invalid with --nid option",
    );
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--nid", ADDED, "--lnd-timeout", "5"],
    )
    .await;
    refused(
        ok,
        &err,
        "set:\n",
        -22,
        "Specified --lnd-timeout without --net option",
    );
    let (ok, _, err) = run(cert, READER, &["net", "add", "--net", "tcp2", "--if", "lo"]).await;
    refused(ok, &err, "add:\n", -1, "changes need admin");
    assert_eq!(admin_actions(API, cert, READER).await, ["add_ni"]);
    stop(d).await;

    // From the store alone: the NI added at run time is back.
    let only = store_only(&s.args);
    let d = start(&only, Some(added_listen())).await;
    let (ok, out, err) = run(cert, READER, &["net", "show", "--net", "tcp1", "-v"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("nid: {ADDED}\n")), "{out}");
    assert!(out.contains("peer_timeout: 30\n"), "{out}");

    // A route through a gateway on the new net goes with its last NI, as in the kernel.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "route",
            "add",
            "--net",
            "tcp9",
            "--gateway",
            "127.0.48.2@tcp1",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(cert, ADMIN, &["net", "del", "--net", "tcp1", "--if", "lo"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, "");
    wait_closed(added_listen()).await;
    let (ok, _, err) = run(cert, READER, &["net", "show", "--net", "tcp1"]).await;
    assert!(!ok && err.contains("errno: -2\n"), "{err}");
    let (ok, out, err) = run(cert, READER, &["net", "show"]).await;
    assert!(ok && !out.contains("tcp1"), "{out}{err}");
    let (ok, out, err) = run(cert, READER, &["route", "show"]).await;
    assert!(ok && !out.contains("tcp9"), "{out}{err}");

    // Deleting again, by NID: not found; the router's last NI: busy.
    let (ok, _, err) = run(cert, ADMIN, &["net", "del", "--nid", ADDED]).await;
    refused(ok, &err, "del:\n    - net:\n", -2, "cannot del LNet NI");
    let (ok, _, err) = run(cert, ADMIN, &["net", "del", "--net", "tcp"]).await;
    refused(
        ok,
        &err,
        "del:\n    - net:\n",
        -19,
        "interface / NID is missing",
    );
    let (ok, _, err) = run(cert, ADMIN, &["net", "del", "--nid", "127.0.47.1@tcp"]).await;
    refused(ok, &err, "del:\n    - net:\n", -16, "last NI");
    let actions = admin_actions(API, cert, READER).await;
    assert_eq!(actions, ["add_ni", "add_route", "delete_ni"]);
    stop(d).await;

    // And from the store alone again: it stays deleted.
    let d = start(&only, None).await;
    assert!(TcpStream::connect_timeout(&added_listen(), Duration::from_millis(200)).is_err());
    let (ok, out, err) = run(cert, READER, &["route", "show"]).await;
    assert!(ok && !out.contains("tcp9"), "{out}{err}");
    stop(d).await;
}
