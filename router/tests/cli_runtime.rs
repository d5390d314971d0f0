//! lnetctl parity of the run-time changes, against a running daemon over HTTPS with a
//! real store: `peer add` (new peer, NIDs added to it, a NID of another peer refused),
//! `udsp add|del|show` (in force on the node, kept over a restart from the store alone),
//! `fault drop|delay add|del|show|reset` (the `fault:` document of real lnetctl), and
//! `debug peer`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{
    admin_actions, api_setup, ctl_at, stop, store_only, wait_listening, ApiSetup, Daemon, WAIT,
};

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use tokio::time::timeout;

const PORT: u16 = 24_440;
const API: u16 = 24_441;
const ADMIN: &str = "admin-secret-runtime-0123456789";
const READER: &str = "reader-secret-runtime-0123456789";

const CONFIG: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.44.1@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.45.1@tcp1
routing:
    enable: 1
lnet-router:
    acceptor_port: 24440
";

/// Runs the CLI with `args` and the connection flags; (success, stdout, stderr).
fn ctl(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    ctl_at(API, cert, token, args)
}

async fn run(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    let cert = cert.to_owned();
    let token = token.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ctl(&cert, &token, &args)
    })
    .await
    .unwrap()
}

async fn start(args: &[OsString]) -> Daemon {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 44, 1)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

fn setup() -> ApiSetup {
    api_setup(CONFIG, API, ADMIN, READER)
}

#[actix::test]
async fn peer_add_udsp_fault_and_debug_peer_at_run_time() {
    let s = setup();
    let cert = s.cert.as_path();
    let d = start(&s.args).await;

    // peer add: a new peer, then NIDs added to it.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "peer",
            "add",
            "--prim_nid",
            "127.0.44.50@tcp",
            "--nid",
            "127.0.44.51@tcp",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, "");
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "peer",
            "add",
            "--prim_nid",
            "127.0.44.50@tcp",
            "--nid",
            "127.0.45.52@tcp1",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(cert, READER, &["peer", "show", "--nid", "127.0.44.50@tcp"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(
        out,
        "peer:\n-     primary nid: 127.0.44.50@tcp\n      Multi-Rail: true\n      peer ni:\n      -     nid: 127.0.44.50@tcp\n            state: up\n      -     nid: 127.0.44.51@tcp\n            state: up\n      -     nid: 127.0.45.52@tcp1\n            state: up\n",
        "a router with the aliveness rule on (peer_timeout 180) shows its peer NIs' status"
    );
    // A NID of another configured peer: EEXIST, as the kernel.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "peer",
            "add",
            "--prim_nid",
            "127.0.44.60@tcp",
            "--nid",
            "127.0.44.51@tcp",
        ],
    )
    .await;
    assert!(!ok, "{out}{err}");
    assert!(
        err.starts_with("add:\n    - peer_ni:\n          errno: -17\n          descr: \"add peer ni operation failed: File exists"),
        "{err}"
    );
    // The other Multi-Rail flag for a configured peer: EPERM.
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["peer", "add", "--prim_nid", "127.0.44.50@tcp", "--non_mr"],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("errno: -1\n"), "{err}");
    // --lock_prim is refused, naming the option; a reader may not add.
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &[
            "peer",
            "add",
            "--prim_nid",
            "127.0.44.70@tcp",
            "--lock_prim",
        ],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("errno: -95\n") && err.contains("--lock_prim"),
        "{err}"
    );
    let (ok, _, err) = run(
        cert,
        READER,
        &["peer", "add", "--prim_nid", "127.0.44.70@tcp"],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("errno: -1\n"), "{err}");

    // debug peer: the kernel's debug line for the peer NI.
    let (ok, out, err) = run(cert, READER, &["debug", "peer", "--nid", "127.0.44.51@tcp"]).await;
    assert!(ok, "{out}{err}");
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields.len(), 9, "{out}");
    assert_eq!(fields[0], "127.0.44.51@tcp");
    assert_eq!(
        fields[2], "up",
        "the aliveness rule is on (routing, peer_timeout 180): {out}"
    );
    assert!(out.starts_with("127.0.44.51@tcp          "), "{out:?}");
    let (ok, _, err) = run(cert, READER, &["debug", "peer", "--nid", "127.0.44.99@tcp"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("debug:\n    - peer:\n          errno: -2\n"),
        "{err}"
    );

    // udsp: nothing, then rules, as `udsp show` prints them.
    let (ok, out, _) = run(cert, READER, &["udsp", "show"]).await;
    assert!(ok);
    assert_eq!(out, "");
    for args in [
        &["udsp", "add", "--src", "tcp1", "--priority", "2"][..],
        &[
            "udsp",
            "add",
            "--dst",
            "127.0.44.[50-51]@tcp",
            "--priority",
            "1",
        ][..],
        &["udsp", "add", "--src", "tcp", "--idx", "0"][..],
    ] {
        let (ok, out, err) = run(cert, ADMIN, args).await;
        assert!(ok, "{args:?}: {out}{err}");
    }
    let (ok, out, err) = run(cert, READER, &["udsp", "show"]).await;
    assert!(ok, "{out}{err}");
    let three = "udsp:\n    - idx: 0\n      src: tcp\n      action:\n          priority: 0\n    - idx: 1\n      src: tcp1\n      action:\n          priority: 2\n    - idx: 2\n      dst: 127.0.44.[50-51]@tcp\n      action:\n          priority: 1\n";
    assert_eq!(out, three);
    let (_, out, _) = run(cert, READER, &["udsp", "show", "--idx", "1"]).await;
    assert_eq!(
        out,
        "udsp:\n    - idx: 1\n      src: tcp1\n      action:\n          priority: 2\n"
    );
    // In force on the node: the NI and peer NI priorities of `-v 4`.
    let (_, out, _) = run(cert, READER, &["net", "show", "--net", "tcp1", "-v", "4"]).await;
    assert!(out.contains("net priority: 2\n"), "{out}");
    let (_, out, _) = run(
        cert,
        READER,
        &["peer", "show", "--nid", "127.0.44.50@tcp", "-v", "4"],
    )
    .await;
    assert!(out.contains("nid priority: 1\n"), "{out}");
    // A bad expression: EINVAL naming the field; nothing changes.
    let (ok, _, err) = run(cert, ADMIN, &["udsp", "add", "--dst", "10.0.0.[9-3]@tcp"]).await;
    assert!(!ok);
    assert!(
        err.starts_with("add:\n    - udsp:\n          errno: -22\n          descr: \"dst: "),
        "{err}"
    );
    let (ok, _, err) = run(cert, ADMIN, &["udsp", "del", "--idx", "7"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -2\n"), "{err}");

    // fault: a drop rule as the fixture's, then a delay rule.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "fault",
            "drop",
            "add",
            "-s",
            "*@tcp",
            "-d",
            "*@o2ib",
            "-r",
            "10",
            "--local_nid",
            "127.0.44.1@tcp",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(cert, READER, &["fault", "drop", "show"]).await;
    assert!(ok, "{out}{err}");
    let fixture =
        include_str!("../../lnet/tests/fixtures/lnetctl/kernel-2.17.57/fault-drop-show.yaml");
    assert_eq!(out, fixture);
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "fault",
            "delay",
            "add",
            "--source",
            "127.0.45.9@tcp1",
            "--dest",
            "*",
            "--interval",
            "5",
            "--latency",
            "2",
            "--message",
            "PUT",
            "--portal",
            "4",
            "--local_nid",
            "127.0.45.1@tcp1",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (_, out, _) = run(cert, READER, &["fault", "delay", "show"]).await;
    assert_eq!(
        out,
        "fault:\n-     rule_type: delay\n      fa_src: 127.0.45.9@tcp1\n      fa_dst: <?>\n      fa_ptl_mask: 16\n      fa_msg_mask: 2\n      la_rate: 0\n      la_interval: 5\n      la_latency: 2\n      ls_delayed: 0\n      fs_count: 0\n      fs_put: 0\n      fs_ack: 0\n      fs_get: 0\n      fs_reply: 0\n"
    );
    // Without --local_nid a rule applies at every NI, as in the kernel; --random with an
    // interval is shown as that interval.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["fault", "drop", "add", "-s", "*@tcp9", "-d", "*", "-r", "2"],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &[
            "fault", "drop", "add", "-s", "*@tcp8", "-d", "*", "-i", "4", "--random",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(cert, READER, &["fault", "drop", "show"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.starts_with(fixture), "{out}");
    assert!(
        out.contains("      fa_src: 255.255.255.255@tcp9\n      fa_dst: <?>\n      fa_ptl_mask: 0\n      fa_msg_mask: 15\n      da_rate: 2\n      da_interval: 0\n"),
        "{out}"
    );
    assert!(
        out.contains("      fa_src: 255.255.255.255@tcp8\n      fa_dst: <?>\n      fa_ptl_mask: 0\n      fa_msg_mask: 15\n      da_rate: 0\n      da_interval: 4\n"),
        "{out}"
    );
    let (_, rules, _) = run(cert, READER, &["--json", "fault", "drop", "show"]).await;
    let rules: serde_json::Value = serde_json::from_str(&rules).unwrap();
    let triggers: Vec<(String, String)> = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"]["local_nid"]
                    .as_str()
                    .unwrap_or("every NI")
                    .to_owned(),
                r["rule"]["trigger"].to_string(),
            )
        })
        .collect();
    assert_eq!(
        triggers,
        [
            ("127.0.44.1@tcp".to_owned(), r#"{"rate":10}"#.to_owned()),
            ("every NI".to_owned(), r#"{"rate":2}"#.to_owned()),
            ("every NI".to_owned(), r#"{"random_interval":4}"#.to_owned()),
        ]
    );
    // --random needs an interval, as lnetctl says.
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &[
            "fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "--random",
        ],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("errno: -22\n") && err.contains("please provide an interval to randomize"),
        "{err}"
    );
    // reset zeroes the counters of the drop rules (an admin event says how many).
    let (ok, out, err) = run(cert, ADMIN, &["fault", "drop", "reset"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, "");
    // What the REST rules cannot do is refused, naming the option.
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &[
            "fault",
            "drop",
            "add",
            "-s",
            "*",
            "-d",
            "*",
            "-r",
            "2",
            "-e",
            "local_error",
            "-e",
            "remote_error",
        ],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("errno: -95\n") && err.contains("--health_error"),
        "{err}"
    );
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["fault", "drop", "del", "-s", "*@tcp9", "-d", "*"],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["fault", "drop", "del", "-s", "*@tcp8", "-d", "*"],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &[
            "fault",
            "drop",
            "add",
            "-s",
            "*",
            "-d",
            "*",
            "-r",
            "2",
            "-i",
            "3",
            "-o",
            "127.0.44.1@tcp",
        ],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("errno: -22\n"), "{err}");
    // del by source and destination; the delay rule stays.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["fault", "drop", "del", "-s", "*@tcp", "-d", "*@o2ib"],
    )
    .await;
    assert!(ok, "{out}{err}");
    let (ok, _, err) = run(cert, READER, &["fault", "drop", "show"]).await;
    assert!(!ok);
    assert!(err.contains("errno: -2\n"), "{err}");
    let (ok, _, _) = run(cert, READER, &["fault", "delay", "show"]).await;
    assert!(ok);
    let (ok, out, err) = run(cert, ADMIN, &["fault", "delay", "del", "--all"]).await;
    assert!(ok, "{out}{err}");
    let (ok, _, _) = run(cert, READER, &["fault", "delay", "show"]).await;
    assert!(!ok);

    // Every change an admin event.
    let actions = admin_actions(API, cert, READER).await;
    for want in [
        "add_peer",
        "add_peer_nids",
        "add_udsp",
        "add_fault_rule",
        "remove_fault_rule",
        "reset_fault_rules",
    ] {
        assert!(actions.iter().any(|a| a == want), "{want}: {actions:?}");
    }
    assert_eq!(
        actions.iter().filter(|a| *a == "add_udsp").count(),
        3,
        "{actions:?}"
    );
    stop(d).await;

    // Restarted from the store alone: the UDSP rules and the peer are there.
    let d = start(&store_only(&s.args)).await;
    let (ok, out, err) = run(cert, READER, &["udsp", "show"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, three);
    let (ok, out, _) = run(cert, READER, &["peer", "show", "--nid", "127.0.45.52@tcp1"]).await;
    assert!(ok);
    assert!(out.contains("primary nid: 127.0.44.50@tcp\n"), "{out}");
    let (_, out, _) = run(cert, READER, &["net", "show", "--net", "tcp1", "-v", "4"]).await;
    assert!(out.contains("net priority: 2\n"), "{out}");
    // del --idx, then --all.
    let (ok, out, err) = run(cert, ADMIN, &["udsp", "del", "--idx", "0"]).await;
    assert!(ok, "{out}{err}");
    let (_, out, _) = run(cert, READER, &["udsp", "show"]).await;
    assert_eq!(
        out,
        "udsp:\n    - idx: 0\n      src: tcp1\n      action:\n          priority: 2\n    - idx: 1\n      dst: 127.0.44.[50-51]@tcp\n      action:\n          priority: 1\n"
    );
    let (ok, out, err) = run(cert, ADMIN, &["udsp", "del", "--all"]).await;
    assert!(ok, "{out}{err}");
    let (_, out, _) = run(cert, READER, &["udsp", "show"]).await;
    assert_eq!(out, "");
    let (_, out, _) = run(cert, READER, &["net", "show", "--net", "tcp1", "-v", "4"]).await;
    assert!(!out.contains("net priority: 2\n"), "{out}");
    let actions = admin_actions(API, cert, READER).await;
    assert_eq!(
        actions.iter().filter(|a| *a == "delete_udsp").count(),
        2,
        "{actions:?}"
    );
    stop(d).await;
}
