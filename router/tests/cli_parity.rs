//! lnetctl parity of the CLI against a running daemon over HTTPS: connection flags
//! anywhere on the line, the show filters, `peer list`, `net|peer set --all --health`,
//! `ping` (reader tokens; several NIDs; lnetctl's units and error list) and `discover`
//! (a `discover:` document), `stats reset`, `set routing 0|1` and `peer del`, against a
//! real peer node over socklnd.

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

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 24_420;
const API: u16 = 24_421;
const ADMIN: &str = "admin-secret-0123456789";
const READER: &str = "reader-secret-0123456789";

/// Runs the CLI with `args`, the connection flags after the subcommand (`global`).
/// Each peer NI of a `peer show -v 3` document with its health value.
fn peer_ni_healths(doc: &str) -> Vec<(String, u32)> {
    let mut nid = None;
    let mut found = Vec::new();
    for line in doc.lines().map(str::trim) {
        if let Some(n) = line
            .strip_prefix('-')
            .map(str::trim_start)
            .and_then(|l| l.strip_prefix("nid: "))
        {
            nid = Some(n.to_owned());
        } else if let Some(h) = line.strip_prefix("health value: ") {
            if let (Some(n), Ok(h)) = (nid.take(), h.parse()) {
                found.push((n, h));
            }
        }
    }
    found
}

fn ctl(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    let api = format!("https://127.0.0.1:{API}");
    let out = Command::new(BIN)
        .args(args)
        .arg("--api")
        .arg(api)
        .arg("--token")
        .arg(token)
        .arg("--ca-cert")
        .arg(cert)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[actix::test]
async fn lnetctl_filters_lists_set_all_ping_and_discover() {
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
        - nid: 127.0.42.1@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.43.1@tcp1
    - net type: tcp2
      local NI(s):
        - nid: 127.0.0.1@tcp2
route:
    - net: tcp5
      gateway: 127.0.42.9@tcp
      hop: 2
      priority: 1
    - net: tcp6
      gateway: 127.0.42.2@tcp
      hop: 1
peer:
    - primary nid: 127.0.42.50@tcp
      Multi-Rail: true
      peer ni:
        - nid: 127.0.42.50@tcp
        - nid: 127.0.42.51@tcp
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
    let mut d = Daemon::start_args(&args);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 42, 1)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    // A peer node on tcp that answers pings.
    let node = Node::start(NodeConfig::default());
    let me: Nid = "127.0.42.2@tcp".parse().unwrap();
    let mut c = SockLndConfig::new(me, 0x5EED_4202);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 42, 2)),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 8).await.unwrap();
    // The CLI runs on the blocking pool: the peer node answers on this thread meanwhile.
    let run = |token: &str, args: &[&str]| {
        let cert = cert_path.clone();
        let token = token.to_owned();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ctl(&cert, &token, &args)
            })
            .await
            .unwrap()
        }
    };

    // ping: a reader may; --timeout in seconds; the kernel's `ping:` document.
    let (ok, out, err) = run(READER, &["ping", "127.0.42.2@tcp", "--timeout", "10"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(
        out,
        "ping:\n- primary nid: 127.0.42.2@tcp\n  Multi-Rail: true\n  peer_ni:\n  - nid: 127.0.42.2@tcp\n"
    );
    // Several NIDs, one silent: the answers, then lnetctl's list of failures, exit non-zero.
    let (ok, out, err) = run(
        READER,
        &["ping", "127.0.42.2@tcp,127.0.42.77@tcp", "-t", "1"],
    )
    .await;
    assert!(!ok, "{out}{err}");
    assert!(
        out.starts_with("ping:\n- primary nid: 127.0.42.2@tcp\n"),
        "{out}"
    );
    assert!(out.contains("manage:\n- ping: \"\"\n  errno: -"), "{out}");
    assert!(
        out.contains("  descr: \"failed to ping 127.0.42.77@tcp: "),
        "{out}"
    );
    assert!(!out.contains("Failed {"), "no debug strings: {out}");
    // --source: from that NI of the router (tests/ping_source.rs checks the wire).
    let (ok, out, err) = run(
        READER,
        &["ping", "127.0.42.2@tcp", "--source", "127.0.42.1@tcp"],
    )
    .await;
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("ping:\n- primary nid: 127.0.42.2@tcp\n"),
        "{out}"
    );

    // discover: a `discover:` document.
    let (ok, out, err) = run(ADMIN, &["discover", "127.0.42.2@tcp", "--force"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("discover:\n- primary nid: 127.0.42.2@tcp\n  Multi-Rail: true\n  peer_ni:\n  - nid: 127.0.42.2@tcp\n"),
        "{out}"
    );
    let (ok, _, err) = run(READER, &["discover", "127.0.42.2@tcp"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("discover:\n    - discover:\n          errno: -1\n"),
        "{err}"
    );

    // net show --net: only that net; -v 4 accepted; an unknown net is ENOENT.
    let (ok, out, err) = run(READER, &["net", "show", "--net", "tcp1", "-v", "4"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("net type: tcp1") && out.contains("127.0.43.1@tcp1"),
        "{out}"
    );
    assert!(!out.contains("127.0.42.1@tcp"), "{out}");
    // The interface an NI runs on (127.0.0.1 is `lo`'s) and its LND's tunables.
    let (ok, out, err) = run(READER, &["net", "show", "--net", "tcp2", "-v", "3"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("            interfaces:\n                  0: lo\n"),
        "{out}"
    );
    assert!(
        out.contains("            lnd tunables:\n                  conns_per_peer: 1\n                  timeout: 50\n                  tos: -1\n"),
        "{out}"
    );
    let (ok, _, err) = run(READER, &["net", "show", "--net", "tcp7"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -2"), "{err}");
    let (ok, _, err) = run(READER, &["net", "show", "-v", "5"]).await;
    assert!(!ok, "verbosity 5 refused: {err}");

    // peer show --nid, peer list.
    let (ok, out, err) = run(READER, &["peer", "show", "--nid", "127.0.42.2@tcp"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("primary nid: 127.0.42.2@tcp"), "{out}");
    assert!(!out.contains("127.0.42.9@tcp"), "{out}");
    let (ok, _, err) = run(READER, &["peer", "show", "--nid", "127.0.42.88@tcp"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -2"), "{err}");
    let (ok, out, err) = run(READER, &["peer", "list"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("peer list:\n"), "{out}");
    assert!(out.contains("    - nid: 127.0.42.2@tcp\n"), "{out}");

    // peer del: a router is busy; the primary NID goes only alone; kept in the store.
    let (ok, _, err) = run(ADMIN, &["peer", "del", "--prim_nid", "127.0.42.2@tcp"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("del:\n    - peer:\n          errno: -16\n"),
        "{err}"
    );
    let (ok, _, err) = run(
        ADMIN,
        &[
            "peer",
            "del",
            "--prim_nid",
            "127.0.42.50@tcp",
            "--nid",
            "127.0.42.50@tcp",
        ],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("errno: -16"), "{err}");
    let (ok, _, err) = run(
        READER,
        &[
            "peer",
            "del",
            "--prim_nid",
            "127.0.42.50@tcp",
            "--nid",
            "127.0.42.51@tcp",
        ],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("errno: -1"), "{err}");
    let (ok, _, err) = run(
        ADMIN,
        &[
            "peer",
            "del",
            "--prim_nid",
            "127.0.42.50@tcp",
            "--nid",
            "127.0.42.51@tcp",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let (_, out, _) = run(READER, &["peer", "show", "--nid", "127.0.42.50@tcp"]).await;
    assert!(!out.contains("127.0.42.51@tcp"), "{out}");
    let (ok, _, err) = run(ADMIN, &["peer", "del", "--prim_nid", "127.0.42.50@tcp"]).await;
    assert!(ok, "{err}");
    let (_, out, _) = run(READER, &["peer", "list"]).await;
    assert!(!out.contains("127.0.42.50@tcp"), "{out}");
    let (ok, _, err) = run(ADMIN, &["peer", "del", "--prim_nid", "127.0.42.50@tcp"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -2"), "{err}");

    // route show filters, -v 4 accepted.
    let (ok, out, err) = run(READER, &["route", "show", "--net", "tcp5", "-v", "4"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("net: tcp5") && !out.contains("tcp6"), "{out}");
    assert!(out.contains("state: "), "{out}");
    let (ok, out, _) = run(READER, &["route", "show", "--gateway", "127.0.42.2@tcp"]).await;
    assert!(ok);
    assert!(out.contains("net: tcp6") && !out.contains("tcp5"), "{out}");
    let (ok, out, _) = run(READER, &["route", "show", "--hop", "2", "--priority", "1"]).await;
    assert!(ok);
    assert!(out.contains("net: tcp5") && !out.contains("tcp6"), "{out}");
    let (ok, out, _) = run(READER, &["route", "show", "--priority", "3"]).await;
    assert!(ok);
    assert!(!out.contains("net:"), "{out}");

    // net set --all / peer set --all: every NI, an admin change, refused to a reader.
    let (ok, _, err) = run(READER, &["net", "set", "--all", "--health", "400"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("set:\n    - net:\n          errno: -1\n"),
        "{err}"
    );
    // An NI below the maximum is in the recovery queue, whose pings that succeed raise
    // its health again (as the kernel's do): look again, a bounded number of times, until
    // a show comes before such a ping.
    let mut seen = String::new();
    for _ in 0..5 {
        let (ok, _, err) = run(ADMIN, &["net", "set", "--all", "--health", "400"]).await;
        assert!(ok, "{err}");
        let (_, out, _) = run(READER, &["net", "show", "-v", "3"]).await;
        if out.matches("health value: 400").count() == 3 {
            seen.clear();
            break;
        }
        seen = out;
    }
    assert!(seen.is_empty(), "NIs not at 400 after the set: {seen}");
    let (ok, _, err) = run(ADMIN, &["net", "set", "--all", "--health", "1001"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -22"), "{err}");
    // Every peer NI is set to 300. The recovery queue pings a peer NI below the maximum,
    // and the one peer here answers, which puts it back at 1000 (as the kernel does on a
    // successful send): look again, a bounded number of times, until a show comes before
    // that ping.
    let mut seen = String::new();
    for _ in 0..5 {
        let (ok, _, err) = run(ADMIN, &["peer", "set", "--all", "--health", "300"]).await;
        assert!(ok, "{err}");
        let (_, out, _) = run(READER, &["peer", "show", "-v", "3"]).await;
        let healths = peer_ni_healths(&out);
        assert!(!healths.is_empty(), "{out}");
        if healths.iter().all(|(_, h)| *h == 300) {
            seen.clear();
            break;
        }
        seen = out;
    }
    assert!(seen.is_empty(), "peer NIs not at 300 after the set: {seen}");

    // stats show: the payload bytes sent are counted (pings' replies and pushes).
    let (_, out, _) = run(READER, &["stats", "show"]).await;
    let sent: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("send_length: "))
        .unwrap()
        .parse()
        .unwrap();
    let received: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("recv_length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(sent > 0 && received > 0, "{out}");

    // stats reset: an admin change; the counters of `stats show` start again from it.
    let count = |out: &str, key: &str| -> u64 {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap()
            .trim_start_matches(": ")
            .parse()
            .unwrap()
    };
    for _ in 0..5 {
        let (ok, _, err) = run(READER, &["ping", "127.0.42.2@tcp"]).await;
        assert!(ok, "{err}");
    }
    let (_, before, _) = run(READER, &["stats", "show"]).await;
    let (ok, _, err) = run(READER, &["stats", "reset"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("reset:\n    - statistics:\n          errno: -1\n"),
        "{err}"
    );
    let (ok, _, err) = run(ADMIN, &["stats", "reset"]).await;
    assert!(ok, "{err}");
    let (_, after, _) = run(READER, &["stats", "show"]).await;
    assert!(
        count(&after, "send_count") < count(&before, "send_count")
            && count(&after, "recv_length") < count(&before, "recv_length"),
        "{before}\n{after}"
    );

    // set routing 0|1: advertised in the ping info (seen by the peer), shown by `routing
    // show`, refused to a reader and for a value other than 0 or 1, kept in the store.
    let router: Nid = "127.0.42.1@tcp".parse().unwrap();
    let disabled =
        |reply: &actors::PingReply| reply.info.features.contains(lnet::Features::RTE_DISABLED);
    let reply = node.ping(router, WAIT).await.unwrap();
    assert!(!disabled(&reply));
    let (ok, _, err) = run(READER, &["set", "routing", "0"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("set:\n    - routing:\n          errno: -1\n"),
        "{err}"
    );
    let (ok, _, err) = run(ADMIN, &["set", "routing", "2"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -22"), "{err}");
    let (ok, _, err) = run(ADMIN, &["set", "routing", "0"]).await;
    assert!(ok, "{err}");
    let reply = node.ping(router, WAIT).await.unwrap();
    assert!(disabled(&reply));
    let (_, out, _) = run(READER, &["routing", "show"]).await;
    assert!(out.contains("enable: 0"), "{out}");
    let (ok, _, err) = run(ADMIN, &["set", "routing", "1"]).await;
    assert!(ok, "{err}");
    let reply = node.ping(router, WAIT).await.unwrap();
    assert!(!disabled(&reply));
    let (ok, _, err) = run(ADMIN, &["set", "routing", "0"]).await;
    assert!(ok, "{err}");

    // set small_buffers: the pools change size at once, kept in the store; a reader may
    // not, a count beyond 32 bits is EINVAL.
    let small_per_cpt = |doc: &str| -> Vec<u64> {
        let v: serde_json::Value = serde_json::from_str(doc).unwrap();
        v["cpts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["small"]["nbuffers"].as_u64().unwrap())
            .collect()
    };
    let (ok, _, err) = run(READER, &["set", "small_buffers", "64"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -1"), "{err}");
    let (ok, _, err) = run(ADMIN, &["set", "small_buffers", "4294967296"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -22"), "{err}");
    let (ok, _, err) = run(ADMIN, &["set", "small_buffers", "64"]).await;
    assert!(ok, "{err}");
    let (_, out, _) = run(READER, &["--json", "routing", "show"]).await;
    let cpts = small_per_cpt(&out);
    let each = u64::try_from(64 / cpts.len().max(1)).unwrap().max(1);
    assert!(cpts.iter().all(|n| *n == each), "{out}");

    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    // Restarted with the same file: the store's routing setting, not the file's.
    let mut d = Daemon::start_args(&args);
    timeout(
        WAIT,
        wait_listening(&mut d, SocketAddr::from(([127, 0, 0, 1], API))),
    )
    .await
    .expect("bounded");
    let (_, out, _) = run(READER, &["routing", "show"]).await;
    assert!(out.contains("enable: 0"), "{out}");
    let (_, out, _) = run(READER, &["--json", "routing", "show"]).await;
    assert!(small_per_cpt(&out).iter().all(|n| *n == each), "{out}");
    let (_, out, _) = run(READER, &["peer", "list"]).await;
    assert!(
        !out.contains("127.0.42.50@tcp"),
        "the deleted peer stays deleted: {out}"
    );
    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}
