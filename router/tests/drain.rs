//! `lnet-router drain` on a router process (LU-4473): the router is taken out of service
//! without stopping. A peer's ping of it says routing disabled and every NI down; the
//! process keeps serving the API; restarted, it comes back drained (the drain is kept in
//! its store); `lnet-router set routing 1` brings it back, and a ping says so again.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{api_run_args, sigterm, wait_listening, Daemon, BIN, WAIT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::{Features, Nid};
use tokio::time::timeout;

const PORT: u16 = 24_600;
const API: u16 = 24_601;
const ADMIN: &str = "admin-secret-0123456789";
const READER: &str = "reader-secret-0123456789";
const R_TCP: &str = "127.0.52.1@tcp";
const R_TCP1: &str = "127.0.53.1@tcp1";
const A: &str = "127.0.52.2@tcp";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn ctl(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .arg("--api")
        .arg(format!("https://127.0.0.1:{API}"))
        .arg("--ca-cert")
        .arg(cert)
        .arg("--token")
        .arg(token)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A peer of the router on tcp, over real TCP.
async fn peer() -> Node {
    let node = Node::start(NodeConfig::default());
    let me = nid(A);
    let mut c = SockLndConfig::new(me, 0xD0A1_0000);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(me.addr_u32().unwrap())),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 64).await.unwrap();
    node
}

/// What the peer learns from pinging the router: routing disabled, and each NI's status.
async fn as_pinged(a: &Node) -> (bool, Vec<(Nid, bool)>) {
    let reply = a.ping(nid(R_TCP), Duration::from_secs(5)).await.unwrap();
    (
        reply.info.features.contains(Features::RTE_DISABLED),
        reply.nids(),
    )
}

/// `routing show --json`: whether the router drains.
fn draining(cert: &Path) -> bool {
    let (ok, out, err) = ctl(cert, READER, &["routing", "show", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["draining"].as_bool().unwrap()
}

async fn start_router(args: &[&std::ffi::OsStr]) -> Daemon {
    let mut d = Daemon::start_args(args);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 52, 1)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

#[actix::test]
async fn lnet_router_drain_takes_the_router_out_of_service_and_set_routing_1_brings_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let cert = web::SelfSigned::generate(&["127.0.0.1", "localhost"]).unwrap();
    let (cert_path, key_path) = cert.write(dir.path()).unwrap();
    let config = dir.path().join("lnet.yaml");
    std::fs::write(
        &config,
        format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: {R_TCP}
    - net type: tcp1
      local NI(s):
        - nid: {R_TCP1}
routing:
    enable: 1
lnet-router:
    acceptor_port: {PORT}
"
        ),
    )
    .unwrap();
    let owned = api_run_args(
        dir.path(),
        &config,
        &format!("ops admin {ADMIN}\nview reader {READER}\n"),
        API,
        &cert_path,
        &key_path,
    );
    let args: Vec<&std::ffi::OsStr> = owned.iter().map(|a| a.as_os_str()).collect();
    let mut d = start_router(&args).await;
    let a = peer().await;
    let up = (false, vec![(nid(R_TCP), true), (nid(R_TCP1), true)]);
    let down = (true, vec![(nid(R_TCP), false), (nid(R_TCP1), false)]);
    assert_eq!(as_pinged(&a).await, up, "in service");
    assert!(!draining(&cert_path));

    // A reader may not drain.
    let (ok, out, err) = ctl(&cert_path, READER, &["drain"]);
    assert!(!ok, "{out}");
    assert!(format!("{out}{err}").contains("errno: -1"), "{out}{err}");
    assert_eq!(as_pinged(&a).await, up);

    let (ok, out, err) = ctl(&cert_path, ADMIN, &["drain"]);
    assert!(ok, "{err}");
    assert_eq!(out, "drain:\n    draining: 1\n    forwarding: 0\n");
    assert_eq!(as_pinged(&a).await, down, "drained");
    assert!(draining(&cert_path));
    // Still up, still serving the API, still answering pings.
    assert!(d.exited().is_none());
    let (ok, out, err) = ctl(&cert_path, READER, &["net", "show"]);
    assert!(ok, "{err}");
    assert!(out.contains("status: down"), "{out}");

    // Restarted, it comes back drained: its first ping reply says so.
    sigterm(d.pid());
    let (status, _, _) = timeout(WAIT, d.wait_exit()).await.expect("bounded");
    assert!(status.success(), "{status:?}");
    let mut d = start_router(&args).await;
    let (ok, _, err) = ctl(&cert_path, READER, &["routing", "show"]);
    assert!(ok, "{err}");
    assert_eq!(as_pinged(&a).await, down, "drained after a restart");
    assert!(draining(&cert_path));

    // `set routing 1` brings it back, kept too.
    let (ok, out, err) = ctl(&cert_path, ADMIN, &["set", "routing", "1"]);
    assert!(ok, "{err}");
    assert_eq!(out, "");
    assert_eq!(as_pinged(&a).await, up, "back in service");
    assert!(!draining(&cert_path));
    assert!(d.exited().is_none());

    sigterm(d.pid());
    let (status, out, _) = timeout(WAIT, d.wait_exit()).await.expect("bounded");
    assert!(status.success(), "{status:?}");
    assert!(
        out.contains("lnet-router: draining, as it was left"),
        "{out}"
    );
    let mut d = start_router(&args).await;
    assert_eq!(as_pinged(&a).await, up, "in service after a restart");
    assert!(!draining(&cert_path));
    sigterm(d.pid());
    let (status, _, _) = timeout(WAIT, d.wait_exit()).await.expect("bounded");
    assert!(status.success(), "{status:?}");
}
