//! `export [--backup]` and `import --add|--del|--show` against running daemons over
//! HTTPS: one daemon's backup imported into a second, fresh one gives the same export (and
//! again after that one restarts from its store); what cannot be applied at run time is
//! refused item by item in lnetctl's error list while the rest is applied; `--del` takes
//! the routes, peers and UDSP rules away; `GET /api/v1/export` serves the same document.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{admin_actions, api_run_args, ctl_async, wait_listening, Daemon, WAIT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use tokio::time::timeout;

const PORT: u16 = 24_760;
const API_A: u16 = 24_761;
const API_B: u16 = 24_762;
const ADMIN: &str = "admin-secret-0123456789";
const READER: &str = "reader-secret-0123456789";

/// Starts a daemon with `config` (nets and the acceptor port are added), its store in
/// `dir/NAME/data`, its API on `api`; waits until it listens.
async fn start(
    dir: &Path,
    name: &str,
    octet: u8,
    api: u16,
    extra: &str,
    tls: &(PathBuf, PathBuf),
) -> Daemon {
    let home = dir.join(name);
    std::fs::create_dir_all(&home).unwrap();
    let config = home.join("lnet.yaml");
    std::fs::write(
        &config,
        format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.47.{octet}@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.48.{octet}@tcp1
{extra}lnet-router:
    acceptor_port: {PORT}
"
        ),
    )
    .unwrap();
    let owned = api_run_args(
        &home,
        &config,
        &format!("ops admin {ADMIN}\nview reader {READER}\n"),
        api,
        &tls.0,
        &tls.1,
    );
    let args: Vec<&std::ffi::OsStr> = owned.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 47, octet)), PORT),
        SocketAddr::from(([127, 0, 0, 1], api)),
    ] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

#[actix::test]
async fn a_backup_imported_into_a_fresh_router_exports_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let cert = web::SelfSigned::generate(&["127.0.0.1", "localhost"]).unwrap();
    let tls = cert.write(dir.path()).unwrap();
    let ca = tls.0.clone();
    let a_extra = "route:
    - net: tcp5
      gateway: 127.0.47.9@tcp
      hop: 2
      priority: 1
    - net: tcp6
      gateway: 127.0.48.9@tcp1
peer:
    - primary nid: 127.0.47.50@tcp
      Multi-Rail: true
      peer ni:
        - nid: 127.0.47.50@tcp
        - nid: 127.0.48.50@tcp1
routing:
    enable: 1
buffers:
    tiny: 256
    small: 512
    large: 32
global:
    retry_count: 1
    transaction_timeout: 40
    drop_asym_route: 1
udsp:
    - idx: 0
      src: tcp1
      action:
          priority: 2
    - idx: 1
      dst: 127.0.47.[50-60]@tcp
      rte: 127.0.47.9@tcp
";
    let _a = start(dir.path(), "a", 1, API_A, a_extra, &tls).await;
    let mut b = start(dir.path(), "b", 2, API_B, "", &tls).await;

    // export --backup: lnetctl's sections and keys, nothing live.
    let (ok, backup, err) = ctl_async(API_A, &ca, READER, &["export", "--backup"]).await;
    assert!(ok, "{backup}{err}");
    let expected_head = "net:
-     net type: tcp
      local NI(s):
      -     tunables:
                  peer_timeout: 180
";
    assert!(backup.starts_with(expected_head), "{backup}");
    for key in [
        "route:\n-     net: tcp5\n      gateway: 127.0.47.9@tcp\n      hop: 2\n      priority: 1\n",
        "-     net: tcp6\n      gateway: 127.0.48.9@tcp1\n      hop: -1\n      priority: 0\n",
        "-     primary nid: 127.0.47.50@tcp\n      Multi-Rail: true\n      peer ni:\n      -     nid: 127.0.47.50@tcp\n      -     nid: 127.0.48.50@tcp1\n",
        "routing:\n    enable: 1\nbuffers:\n    tiny: 256\n    small: 512\n    large: 32\nglobal:\n",
        "    drop_asym_route: 1\n    retry_count: 1\n    transaction_timeout: 40\n",
        "            CPT: \"[",
        "udsp:\n    - idx: 0\n      src: tcp1\n      action:\n          priority: 2\n    - idx: 1\n      dst: 127.0.47.[50-60]@tcp\n      rte: 127.0.47.9@tcp\n",
    ] {
        assert!(backup.contains(key), "{key:?} in\n{backup}");
    }
    for live in [
        "nid: 127.0.47.1@tcp",
        "status:",
        "statistics:",
        "state:",
        "net type: lo",
        "cpt[",
    ] {
        assert!(!backup.contains(live), "{live:?} in a backup:\n{backup}");
    }
    // It reads back as an lnetctl export document.
    let parsed = lnet::config::parse(&backup).unwrap();
    assert_eq!(parsed.to_yaml(), backup);

    // The full form: lo, NIDs, counters, route state, the pools per CPT.
    let (ok, full, err) = ctl_async(API_A, &ca, READER, &["export"]).await;
    assert!(ok, "{full}{err}");
    for key in [
        "-     net type: lo\n",
        "      -     nid: 127.0.47.1@tcp\n            status: up\n",
        "            statistics:\n",
        "            health stats:\n",
        "            dev cpt: ",
        "      state: ",
        "      type: multi-hop\n",
        "      peer state: ",
        "routing:\n    - cpt[0]:\n",
        "udsp:\n    - idx: 0\n      src: tcp1\n",
    ] {
        assert!(full.contains(key), "{key:?} in\n{full}");
    }
    lnet::config::parse(&full).unwrap();

    // REST: the same document; a bad `backup` is a 400.
    let pem = std::fs::read(&ca).unwrap();
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let resp = client
        .get(format!("https://127.0.0.1:{API_A}/api/v1/export?backup=1"))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/yaml");
    assert_eq!(resp.text().await.unwrap(), backup);
    let resp = client
        .get(format!(
            "https://127.0.0.1:{API_A}/api/v1/export?backup=yes"
        ))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    // export FILE writes the file and prints nothing.
    let file = dir.path().join("a-backup.yaml");
    let file_arg = file.to_str().unwrap();
    let (ok, out, err) = ctl_async(API_A, &ca, READER, &["export", file_arg, "--backup"]).await;
    assert!(ok && out.is_empty(), "{out}{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), backup);

    // import needs an admin token: refused item by item, nothing applied.
    let (ok, _, err) = ctl_async(API_B, &ca, READER, &["import", file_arg]).await;
    assert!(!ok);
    assert!(err.starts_with("add:\n    - "), "{err}");
    assert!(err.contains("errno: -1\n"), "{err}");
    let (_, b_before, _) = ctl_async(API_B, &ca, READER, &["export", "--backup"]).await;
    assert!(!b_before.contains("\nroute:\n"), "{b_before}");

    // import into the fresh router: silent, and its export is the same document.
    let (ok, out, err) = ctl_async(API_B, &ca, ADMIN, &["import", file_arg]).await;
    assert!(ok, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    let (ok, b_backup, err) = ctl_async(API_B, &ca, READER, &["export", "--backup"]).await;
    assert!(ok, "{err}");
    assert_eq!(b_backup, backup);
    // Each change was an admin event of the API's own handlers.
    let actions = admin_actions(API_B, &ca, ADMIN).await;
    for action in [
        "set_global",
        "set_buffers",
        "set_routing",
        "add_peer",
        "add_route",
        "add_udsp",
    ] {
        assert!(actions.iter().any(|a| a == action), "{action}: {actions:?}");
    }

    // import --show: what the node has for the file's items, as lnetctl prints them.
    let (ok, shown, err) = ctl_async(API_B, &ca, READER, &["import", "--show", file_arg]).await;
    assert!(ok, "{err}");
    assert!(
        shown.contains("      -     nid: 127.0.47.2@tcp\n"),
        "{shown}"
    );
    assert!(
        shown.contains("-     net: tcp5\n      gateway: 127.0.47.9@tcp\n      hop: 2\n"),
        "{shown}"
    );
    assert!(shown.contains("    retry_count: 1\n"), "{shown}");
    assert!(
        shown.contains("udsp:\n    - idx: 0\n      src: tcp1\n      action:\n          priority: 2\n    - idx: 1\n"),
        "{shown}"
    );

    // Kept in the store: restarted, B exports the same again.
    support::sigterm(b.pid());
    let (status, _, _) = b.wait_exit().await;
    assert!(status.success(), "{status}");
    drop(b);
    let b = start(dir.path(), "b", 2, API_B, "", &tls).await;
    let (ok, again, err) = ctl_async(API_B, &ca, READER, &["export", "--backup"]).await;
    assert!(ok, "{err}");
    assert_eq!(again, backup);

    // What cannot be applied is refused, named, and the rest applied: a net the node
    // lacks, a net whose tunables differ, a UDSP rule whose expression does not parse; the
    // route and the good UDSP rule go in.
    let mixed = dir.path().join("mixed.yaml");
    std::fs::write(
        &mixed,
        "net:
    - net type: tcp9
      local NI(s):
        - interfaces:
              0: eth9
    - net type: tcp1
      local NI(s):
        - tunables:
              peer_timeout: 0
              peer_credits: 99
              peer_buffer_credits: 0
              credits: 256
route:
    - net: tcp7
      gateway: 127.0.47.7@tcp
    - net: tcp5
      gateway: 127.0.47.9@tcp
udsp:
    - dst: 127.0.47.[9-3]@tcp
      priority: 1
    - src: tcp
      priority: 3
",
    )
    .unwrap();
    let mixed_arg = mixed.to_str().unwrap();
    let (ok, out, err) = ctl_async(API_B, &ca, ADMIN, &["import", mixed_arg]).await;
    assert!(!ok, "{out}{err}");
    assert!(
        err.starts_with("add:\n    - net:\n          errno: -95\n          descr: \"net tcp9: "),
        "{err}"
    );
    assert!(
        err.contains(
            "    - net:\n          errno: -95\n          descr: \"net tcp1: NI 0: tunables differ"
        ),
        "{err}"
    );
    // The route that exists already: EEXIST, as lnetctl.
    assert!(
        err.contains("    - route:\n          errno: -17\n          descr: \"route to tcp5 via 127.0.47.9@tcp: "),
        "{err}"
    );
    assert!(
        err.contains("    - udsp:\n          errno: -22\n          descr: \"udsp rule 0: "),
        "{err}"
    );
    let (_, rules, _) = ctl_async(API_B, &ca, READER, &["udsp", "show"]).await;
    assert!(
        rules.ends_with("    - idx: 2\n      src: tcp\n      action:\n          priority: 3\n"),
        "{rules}"
    );
    let (_, routes, _) = ctl_async(API_B, &ca, READER, &["route", "show", "--net", "tcp7"]).await;
    assert!(routes.contains("gateway: 127.0.47.7@tcp"), "{routes}");

    // import --del: the file's routes and peers go; routing goes off, as lnetctl; its
    // nets cannot be deleted at run time: refused, named.
    let (ok, out, err) = ctl_async(API_B, &ca, ADMIN, &["import", "--del", file_arg]).await;
    assert!(!ok, "{out}{err}");
    assert_eq!(
        err,
        "del:
    - net:
          errno: -95
          descr: \"net tcp: nets cannot be deleted at run time (configuration file)\"
    - net:
          errno: -95
          descr: \"net tcp1: nets cannot be deleted at run time (configuration file)\"
"
    );
    let (_, after, _) = ctl_async(API_B, &ca, READER, &["export", "--backup"]).await;
    assert!(!after.contains("tcp5"), "{after}");
    assert!(!after.contains("127.0.47.50@tcp"), "{after}");
    assert!(after.contains("-     net: tcp7\n"), "{after}");
    assert!(after.contains("routing:\n    enable: 0\n"), "{after}");
    // The file's two rules went by idx; the one added after them moved up to idx 0.
    assert!(
        after.ends_with(
            "udsp:\n    - idx: 0\n      src: tcp\n      action:\n          priority: 3\n"
        ),
        "{after}"
    );
    // Deleting again: each item is not found.
    let (ok, _, err) = ctl_async(API_B, &ca, ADMIN, &["import", "--del", file_arg]).await;
    assert!(!ok);
    assert!(
        err.contains("    - route:\n          errno: -2\n          descr: \"route to tcp5 via 127.0.47.9@tcp: "),
        "{err}"
    );
    assert!(
        err.contains(
            "    - peer_ni:\n          errno: -2\n          descr: \"peer 127.0.47.50@tcp: "
        ),
        "{err}"
    );
    assert!(
        err.contains("    - udsp:\n          errno: -2\n          descr: \"udsp idx 1: "),
        "{err}"
    );

    // A file that cannot be read, or is not an export document: lnetctl's builder error,
    // naming the file or the key; nothing asked of the node.
    let missing = dir.path().join("missing.yaml");
    let (ok, _, err) = ctl_async(API_B, &ca, ADMIN, &["import", missing.to_str().unwrap()]).await;
    assert!(!ok);
    assert!(
        err.starts_with(
            "yaml:\n    - builder:\n          errno: -2\n          descr: \"cannot open '"
        ),
        "{err}"
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "route:\n    - net: tcp5\n      gateway: 127.0.47.9@tcp\n      hops: 2\n",
    )
    .unwrap();
    let (ok, _, err) = ctl_async(API_B, &ca, ADMIN, &["import", bad.to_str().unwrap()]).await;
    assert!(!ok);
    assert!(
        err.starts_with("yaml:\n    - builder:\n          errno: -22\n"),
        "{err}"
    );
    assert!(err.contains("hops"), "{err}");
    drop(b);
}

#[actix::test]
async fn import_exec_runs_the_files_ping_and_discover_commands_and_nothing_else() {
    const API_C: u16 = 24_763;
    const API_D: u16 = 24_764;
    let dir = tempfile::tempdir().unwrap();
    let cert = web::SelfSigned::generate(&["127.0.0.1", "localhost"]).unwrap();
    let tls = cert.write(dir.path()).unwrap();
    let ca = tls.0.clone();
    let _c = start(dir.path(), "c", 3, API_C, "", &tls).await;
    let _d = start(dir.path(), "d", 4, API_D, "", &tls).await;

    // A route in the file is not added: --exec runs commands only.
    let file = dir.path().join("exec.yaml");
    std::fs::write(
        &file,
        "route:
    - net: tcp5
      gateway: 127.0.47.9@tcp
ping:
    timeout: 3000
    nids: [127.0.47.4@tcp, 127.0.49.9@tcp9]
discover:
    nids:
      - 127.0.48.4@tcp1
",
    )
    .unwrap();
    let file_arg = file.to_str().unwrap();
    // A reader may ping but not discover: the ping's answers, then the refusal.
    let (ok, out, err) = ctl_async(API_C, &ca, READER, &["import", "--exec", file_arg]).await;
    assert!(!ok);
    assert!(out.starts_with("ping:\n"), "{out}");
    assert!(!out.contains("discover"), "{out}");
    assert!(
        err.starts_with("discover:\n    - discover:\n          errno: -1\n"),
        "{err}"
    );
    let (ok, out, err) = ctl_async(API_C, &ca, ADMIN, &["import", "--exec", file_arg]).await;
    assert!(!ok, "one NID has no route: {out}{err}");
    let ping_at = out.find("ping:\n").expect("a ping document");
    let discover_at = out
        .find("discover:\n")
        .unwrap_or_else(|| panic!("a discover document: {out}{err}"));
    assert!(ping_at < discover_at, "{out}");
    assert!(
        out[..discover_at].contains("primary nid: 127.0.47.4@tcp"),
        "{out}"
    );
    assert!(
        out[..discover_at].contains("descr: \"failed to ping 127.0.49.9@tcp9: "),
        "{out}"
    );
    assert!(
        out[discover_at..].contains("primary nid: 127.0.47.4@tcp"),
        "the discovered peer, by its primary NID: {out}"
    );
    let (_, routes, _) = ctl_async(API_C, &ca, READER, &["route", "show"]).await;
    assert!(!routes.contains("tcp5"), "{routes}");

    // All reachable: success; a bad NID in the file is the builder's error, nothing run.
    std::fs::write(&file, "ping:\n    primary nid: 127.0.48.4@tcp1\n").unwrap();
    let (ok, out, err) = ctl_async(API_C, &ca, READER, &["import", "--exec", file_arg]).await;
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("ping:\n"), "{out}");
    std::fs::write(&file, "ping:\n    nids: [127.0.47.4@tcp, nonsense]\n").unwrap();
    let (ok, out, err) = ctl_async(API_C, &ca, READER, &["import", "--exec", file_arg]).await;
    assert!(!ok);
    assert_eq!(out, "");
    assert!(
        err.starts_with("yaml:\n    - builder:\n          errno: -22\n"),
        "{err}"
    );
    assert!(err.contains("ping.nids[1]"), "{err}");
}
