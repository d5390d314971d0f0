//! The lnetctl-style subcommands against a running daemon over HTTPS: their YAML has the
//! shape of real `lnetctl` output (the kernel 2.17.57 captures in lnet's fixtures: same keys
//! at the same depths), changes need an admin token, and refusals are printed the way
//! lnetctl prints errors. API tokens are made, listed and revoked at run time, and kept
//! across a restart.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{api_run_args, sigterm, wait_listening, Daemon, BIN, WAIT};

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;

use tokio::time::timeout;

const PORT: u16 = 24_400;
const API: u16 = 24_401;
const ADMIN: &str = "admin-secret-0123456789";
const READER: &str = "reader-secret-0123456789";

fn fixture(name: &str) -> String {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../lnet/tests/fixtures/lnetctl/kernel-2.17.57/"
    );
    std::fs::read_to_string(format!("{dir}{name}")).unwrap()
}

/// Every key with its indentation: the shape of a YAML document, whatever its values and
/// however many items its lists have.
fn shape(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let key = l.split(':').next()?;
            Some(key.replace("- ", "  ").trim_end().to_owned())
        })
        .filter(|k| !k.trim().is_empty())
        .collect()
}

fn ctl(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    ctl_at(API, cert, token, args)
}

/// A command against the API on port `api`.
fn ctl_at(api: u16, cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .arg("--api")
        .arg(format!("https://127.0.0.1:{api}"))
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

#[actix::test]
async fn lnetctl_style_commands_print_lnetctl_shapes_over_https() {
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
        - nid: 127.0.36.1@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.37.1@tcp1
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
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 36, 1)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    let run = |token: &str, args: &[&str]| ctl(&cert_path, token, args);

    // Shapes of real lnetctl output.
    let (ok, out, err) = run(READER, &["net", "show", "-v", "4"]);
    assert!(ok, "{err}");
    let ours = shape(&out);
    let theirs = shape(&fixture("net-show-v4-o2ib.yaml"));
    // What the fixture has and ours has not: the o2iblnd tunables of its o2ib NI, and the
    // interface (ours are configured by NID alone, on addresses no interface carries).
    let missing: BTreeSet<&str> = theirs.difference(&ours).map(|k| k.trim()).collect();
    let expected: BTreeSet<&str> = [
        "0",
        "interfaces",
        "concurrent_sends",
        "fmr_cache",
        "fmr_flush_trigger",
        "fmr_pool_size",
        "map_on_demand",
        "ntx",
        "peercredits_hiw",
    ]
    .into_iter()
    .collect();
    assert_eq!(missing, expected, "{out}");
    let extra: Vec<_> = ours.difference(&theirs).collect();
    assert!(
        extra.is_empty(),
        "keys lnetctl does not print: {extra:?}\n{out}"
    );
    let (ok, out, err) = run(READER, &["stats", "show"]);
    assert!(ok, "{err}");
    assert_eq!(shape(&out), shape(&fixture("stats-show.yaml")), "{out}");
    let (ok, out, err) = run(READER, &["global", "show"]);
    assert!(ok, "{err}");
    assert_eq!(shape(&out), shape(&fixture("global-show.yaml")), "{out}");
    let (ok, out, err) = run(READER, &["routing", "show"]);
    assert!(ok, "{err}");
    // One `cpt[N]` item per CPT: the router runs one per core, the fixture's node had one.
    let any_cpt = |text: &str| -> BTreeSet<String> {
        shape(text)
            .into_iter()
            .map(|k| match (k.find("cpt["), k.find(']')) {
                (Some(a), Some(b)) if a < b => format!("{}cpt[N]{}", &k[..a], &k[b + 1..]),
                _ => k,
            })
            .collect()
    };
    assert_eq!(
        any_cpt(&out),
        any_cpt(&fixture("routing-show-enabled.yaml")),
        "{out}"
    );
    assert!(out.contains("cpt[0]:"), "{out}");

    // Changes: refused for a reader (lnetctl's error YAML), done for an admin.
    let (ok, _, err) = run(
        READER,
        &[
            "route",
            "add",
            "--net",
            "tcp9",
            "--gateway",
            "127.0.36.9@tcp",
            "--hop",
            "1",
        ],
    );
    assert!(!ok);
    assert!(
        err.starts_with("add:\n    - route:\n          errno: -1\n"),
        "{err}"
    );
    let (ok, _, err) = run(
        ADMIN,
        &[
            "route",
            "add",
            "--net",
            "tcp9",
            "--gateway",
            "127.0.36.9@tcp",
            "--hop",
            "1",
        ],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = run(READER, &["route", "show", "-v"]);
    assert!(ok, "{err}");
    assert_eq!(shape(&out), shape(&fixture("route-show-v.yaml")), "{out}");
    assert!(
        out.contains("net: tcp9\n      gateway: 127.0.36.9@tcp\n"),
        "{out}"
    );
    // A route to a local net is refused with the field named.
    let (ok, _, err) = run(
        ADMIN,
        &[
            "route",
            "add",
            "--net",
            "tcp1",
            "--gateway",
            "127.0.36.9@tcp",
        ],
    );
    assert!(!ok);
    assert!(err.contains("errno: -22") && err.contains("local"), "{err}");
    let (ok, _, err) = run(
        ADMIN,
        &[
            "route",
            "del",
            "--net",
            "tcp9",
            "--gateway",
            "127.0.36.9@tcp",
        ],
    );
    assert!(ok, "{err}");
    let (ok, out, _) = run(READER, &["route", "show"]);
    assert!(ok);
    assert!(!out.contains("tcp9"), "{out}");
    // Health reset of a local NI.
    let (ok, _, err) = run(
        ADMIN,
        &["net", "set", "--nid", "127.0.36.1@tcp", "--health", "500"],
    );
    assert!(ok, "{err}");
    let (_, out, _) = run(READER, &["net", "show", "-v", "3"]);
    assert!(out.contains("health value: 500"), "{out}");

    // A route added through the API is kept in the store: it is there after a restart
    // with the same configuration file.
    let (ok, _, err) = run(
        ADMIN,
        &[
            "route",
            "add",
            "--net",
            "tcp8",
            "--gateway",
            "127.0.36.8@tcp",
            "--hop",
            "2",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = run(ADMIN, &["set", "retry_count", "1"]);
    assert!(ok, "{err}");
    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    let mut d = Daemon::start_args(&args);
    timeout(
        WAIT,
        wait_listening(&mut d, SocketAddr::from(([127, 0, 0, 1], API))),
    )
    .await
    .expect("bounded");
    let (ok, out, err) = run(READER, &["route", "show"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("net: tcp8\n      gateway: 127.0.36.8@tcp\n      hop: 2\n"),
        "{out}"
    );
    let (_, out, _) = run(READER, &["global", "show"]);
    assert!(out.contains("retry_count: 1\n"), "{out}");
    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}

/// The value of `key: ` on the line that has it, quotes taken off.
fn yaml_value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .trim_matches('"')
}

#[actix::test]
async fn tokens_are_made_listed_and_revoked_at_run_time_and_kept_across_a_restart() {
    const PORT: u16 = 24_410;
    const API: u16 = 24_411;
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
        - nid: 127.0.36.11@tcp
lnet-router:
    acceptor_port: {PORT}
"
        ),
    )
    .unwrap();
    let tokens = format!("ops admin {ADMIN}\n");
    let owned = api_run_args(dir.path(), &config, &tokens, API, &cert_path, &key_path);
    let args: Vec<&std::ffi::OsStr> = owned.iter().map(|a| a.as_os_str()).collect();
    let api_addr = SocketAddr::from(([127, 0, 0, 1], API));
    let mut d = Daemon::start_args(&args);
    timeout(WAIT, wait_listening(&mut d, api_addr))
        .await
        .expect("bounded");
    let run = |token: &str, args: &[&str]| ctl_at(API, &cert_path, token, args);

    // An admin makes a token: its secret is printed this once, and it works at once.
    let (ok, out, err) = run(
        ADMIN,
        &["token", "create", "--name", "ci", "--role", "admin"],
    );
    assert!(ok, "{err}");
    assert!(
        out.starts_with("token create:\n    - name: ci\n      role: admin\n      created: 20"),
        "{out}"
    );
    let ci = yaml_value(&out, "secret").to_owned();
    assert_eq!(ci.len(), 64, "{out}");
    let (ok, out, err) = run(&ci, &["whoami"]);
    assert!(ok, "{err}");
    assert_eq!(out, "whoami:\n    name: ci\n    role: admin\n");
    // Reader unless a role is given.
    let (ok, out, err) = run(&ci, &["token", "create", "--name", "view"]);
    assert!(ok, "{err}");
    assert_eq!(yaml_value(&out, "role"), "reader");
    let view = yaml_value(&out, "secret").to_owned();

    // The list: names, roles, creation times; no secret. The tokens file's token has no
    // creation time.
    let (ok, listed, err) = run(ADMIN, &["token", "list"]);
    assert!(ok, "{err}");
    assert!(
        listed.starts_with("token list:\n    - name: ci\n      role: admin\n      created: 20"),
        "{listed}"
    );
    assert!(
        listed.contains("    - name: ops\n      role: admin\n      created: unknown\n"),
        "{listed}"
    );
    assert!(
        listed.contains("    - name: view\n      role: reader\n"),
        "{listed}"
    );
    for secret in [ADMIN, ci.as_str(), view.as_str()] {
        assert!(!listed.contains(secret), "{listed}");
    }

    // A reader token may ask who it is, and nothing more.
    let (ok, out, err) = run(&view, &["whoami"]);
    assert!(ok, "{err}");
    assert_eq!(out, "whoami:\n    name: view\n    role: reader\n");
    for (args, command) in [
        (&["token", "list"][..], "list"),
        (&["token", "create", "--name", "mine"][..], "create"),
        (&["token", "revoke", "ops"][..], "revoke"),
    ] {
        let (ok, _, err) = run(&view, args);
        assert!(!ok);
        assert!(
            err.starts_with(&format!("{command}:\n    - token:\n          errno: -1\n")),
            "{err}"
        );
    }
    // Bad input: a name in use, a bad name, an unknown role.
    let (ok, _, err) = run(ADMIN, &["token", "create", "--name", "ci"]);
    assert!(!ok);
    assert!(
        err.contains("errno: -17") && err.contains("exists already"),
        "{err}"
    );
    let (ok, _, err) = run(ADMIN, &["token", "create", "--name", ""]);
    assert!(!ok);
    assert!(
        err.contains("errno: -22") && err.contains("name: bad token name"),
        "{err}"
    );
    let (ok, _, err) = run(ADMIN, &["token", "create", "--name", "x", "--role", "root"]);
    assert!(!ok);
    assert!(
        err.contains("root") && err.contains("admin, reader"),
        "{err}"
    );

    // A restart from the same data directory keeps the tokens made at run time.
    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    let mut d = Daemon::start_args(&args);
    timeout(WAIT, wait_listening(&mut d, api_addr))
        .await
        .expect("bounded");
    let (ok, out, err) = run(&ci, &["whoami"]);
    assert!(ok, "{err}");
    assert_eq!(out, "whoami:\n    name: ci\n    role: admin\n");
    let (ok, after, err) = run(ADMIN, &["token", "list"]);
    assert!(ok, "{err}");
    assert_eq!(after, listed);

    // Revoked: the next request with it is refused.
    let (ok, out, err) = run(&ci, &["token", "revoke", "view"]);
    assert!(ok, "{err}");
    assert_eq!(out, "");
    let (ok, _, err) = run(&view, &["whoami"]);
    assert!(!ok);
    assert!(
        err.starts_with("show:\n    - whoami:\n          errno: -1\n") && err.contains("revoked"),
        "{err}"
    );
    let (ok, _, err) = run(&ci, &["token", "revoke", "view"]);
    assert!(!ok);
    assert!(err.contains("errno: -2"), "{err}");
    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}

/// `debug nidlist` with no daemon to ask (the API port is closed): what the command prints
/// on each stream, and its exit status.
fn nidlist(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .env_remove("LNET_ROUTER_TOKEN")
        .args(["--api", "https://127.0.0.1:1", "debug", "nidlist"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn debug_nidlist_parses_locally_and_prints_what_lnetctl_prints() {
    assert_eq!(
        nidlist(&[
            "192.168.0.[1-10/2]@tcp 10.0.0.0/8@tcp *@o2ib1",
            "192.168.0.5"
        ]),
        (
            Some(0),
            "nidlist parsed to: 10.0.0.0/8@tcp 192.168.0.[1-10/2]@tcp *@o2ib1\n\
             192.168.0.5 matches nidlist 192.168.0.[1-10/2]@tcp 10.0.0.0/8@tcp *@o2ib1\n"
                .to_owned(),
            String::new()
        )
    );
    assert_eq!(
        nidlist(&["[1-3]@gni", "4@gni"]),
        (
            Some(0),
            "nidlist parsed to: [1-3]@gni\n4@gni does not match nidlist [1-3]@gni\n".to_owned(),
            String::new()
        )
    );
    // Refusals are lnetctl's plain lines on standard error, no error YAML.
    assert_eq!(
        nidlist(&["1.2.3@tcp"]),
        (
            Some(1),
            String::new(),
            "Failed to parse addrrange \"1.2.3\" rc = -22\n\
             Unable to parse nidlist from: 1.2.3@tcp\n"
                .to_owned()
        )
    );
    assert_eq!(
        nidlist(&["1.2.3.4@tcp", "1.2.3.4@foo"]),
        (
            Some(1),
            "nidlist parsed to: 1.2.3.4@tcp\n".to_owned(),
            "Invalid nid for matching 1.2.3.4@foo\n".to_owned()
        )
    );
    assert_eq!(
        nidlist(&[]),
        (
            Some(1),
            String::new(),
            "Missing nidlist argument\n".to_owned()
        )
    );
    assert_eq!(
        nidlist(&["*@tcp", "1.2.3.4@tcp", "-x"]),
        (Some(1), String::new(), "Too many arguments\n".to_owned())
    );
}
