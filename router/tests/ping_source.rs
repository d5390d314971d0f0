//! `ping NID --source NID` against a running daemon with two NIs on one net: the ping
//! leaves from the NI asked for, as the pinged node sees it (the peer NI it heard from);
//! a source that is no NI of the router is refused (EINVAL), and one with no path to the
//! target fails as a ping with no route.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{api_run_args, ctl_at, wait_listening, Daemon, WAIT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 24_770;
const API: u16 = 24_771;
const READER: &str = "reader-secret-0123456789";

fn ctl(cert: &Path, args: &[&str]) -> (bool, String, String) {
    ctl_at(API, cert, READER, args)
}

/// The NIDs the pinged node has heard from, with what each sent it.
async fn heard(node: &Node) -> Vec<(Nid, u32)> {
    node.peer_show()
        .await
        .unwrap()
        .peers
        .iter()
        .flat_map(|p| p.nis.iter().map(|n| (n.nid, n.statistics.recv_count)))
        .filter(|(_, recv)| *recv > 0)
        .collect()
}

#[actix::test]
async fn a_ping_leaves_from_the_source_ni_asked_for() {
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
        - nid: 127.0.49.1@tcp
        - nid: 127.0.49.3@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.50.1@tcp1
lnet-router:
    acceptor_port: {PORT}
"
        ),
    )
    .unwrap();
    let owned = api_run_args(
        dir.path(),
        &config,
        &format!("view reader {READER}\n"),
        API,
        &cert_path,
        &key_path,
    );
    let args: Vec<&std::ffi::OsStr> = owned.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 49, 1)), PORT),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 49, 3)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    // The node pinged, on tcp.
    let node = Node::start(NodeConfig::default());
    let me: Nid = "127.0.49.2@tcp".parse().unwrap();
    let mut c = SockLndConfig::new(me, 0x5EED_4902);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 49, 2)),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 8).await.unwrap();
    let run = |args: &[&str]| {
        let cert = cert_path.clone();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ctl(&cert, &args)
            })
            .await
            .unwrap()
        }
    };
    let nid = |s: &str| -> Nid { s.parse().unwrap() };

    // From the second NI: the pinged node hears that NI and no other.
    let (ok, out, err) = run(&["ping", "127.0.49.2@tcp", "--source", "127.0.49.3@tcp"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("ping:\n- primary nid: 127.0.49.2@tcp\n"),
        "{out}"
    );
    assert_eq!(heard(&node).await, vec![(nid("127.0.49.3@tcp"), 1)]);
    // Again: every ping from that NI.
    for _ in 0..3 {
        let (ok, out, err) = run(&["ping", "127.0.49.2@tcp", "-s", "127.0.49.3@tcp"]).await;
        assert!(ok, "{out}{err}");
    }
    assert_eq!(heard(&node).await, vec![(nid("127.0.49.3@tcp"), 4)]);
    // From the first NI: now that one is heard from too.
    let (ok, out, err) = run(&["ping", "127.0.49.2@tcp", "--source", "127.0.49.1@tcp"]).await;
    assert!(ok, "{out}{err}");
    let mut now = heard(&node).await;
    now.sort();
    assert_eq!(
        now,
        vec![(nid("127.0.49.1@tcp"), 1), (nid("127.0.49.3@tcp"), 4)]
    );

    // A source that is no NI of the router: EINVAL, as the kernel refuses it; nothing sent.
    let (ok, _, err) = run(&["ping", "127.0.49.2@tcp", "--source", "127.0.49.9@tcp"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("ping:\n    - ping:\n          errno: -22\n          descr: \"source: 127.0.49.9@tcp is not a NID of this node\"\n"),
        "{err}"
    );
    let (ok, _, err) = run(&["ping", "127.0.49.2@tcp", "--source", "not-a-nid"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -22\n"), "{err}");
    // A source on another net, with no route to the target: no route to host.
    let (ok, out, _) = run(&[
        "ping",
        "127.0.49.2@tcp",
        "--source",
        "127.0.50.1@tcp1",
        "-t",
        "2",
    ])
    .await;
    assert!(!ok);
    assert!(out.contains("  errno: -113\n"), "{out}");
    let mut after = heard(&node).await;
    after.sort();
    assert_eq!(after, now, "the refused pings reached nobody");
}
