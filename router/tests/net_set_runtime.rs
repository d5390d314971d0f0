//! `net set --conns-per-peer` and `net set --lnd-timeout` on a running daemon, over HTTPS
//! with a real store and real sockets on loopback: `net show -v` prints the new values at
//! once; a peer the router first connects to after `--conns-per-peer 2` gets two BULK_IN
//! and two BULK_OUT connections where one before got one of each; after `--lnd-timeout 1`
//! a connection whose frame stops coming is closed (the default, 50 s, is longer than the
//! test waits), and a tcp NI added then runs with it; both come back on a restart from the
//! store alone, and each is an admin event. The refusals print lnetctl's errors.

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
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use lnd::socklnd::handshake;
use lnd::socklnd::wire::{ConnType, Hello, HelloDecoded, ProtoVersion};
use lnet::{Nid, ProcessId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const PORT: u16 = 24_480;
const API: u16 = 24_481;
const ADMIN: &str = "admin-secret-netset-0123456789";
const READER: &str = "reader-secret-netset-0123456789";
const ROUTER: &str = "127.0.49.1@tcp";

const CONFIG: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.49.1@tcp
lnet-router:
    acceptor_port: 24480
";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn router_listen() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 49, 1)), PORT)
}

async fn run(cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    ctl_async(API, cert, token, args).await
}

async fn start(args: &[OsString]) -> Daemon {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let mut d = Daemon::start_args(&args);
    for addr in [router_listen(), SocketAddr::from(([127, 0, 0, 1], API))] {
        timeout(WAIT, wait_listening(&mut d, addr))
            .await
            .expect("bounded");
    }
    d
}

fn setup() -> ApiSetup {
    api_setup(CONFIG, API, ADMIN, READER)
}

/// The lnetctl error YAML's errno line is `errno` and its descr names `what`.
fn refused(ok: bool, err: &str, head: &str, errno: i32, what: &str) {
    assert!(!ok, "{err}");
    assert!(err.starts_with(head), "{err}");
    assert!(err.contains(&format!("errno: {errno}\n")), "{err}");
    assert!(err.contains(what), "{err}");
}

/// The `lnd tunables:` of the router's NI in `net show -v`: (conns_per_peer, timeout).
async fn shown_tunables(cert: &Path) -> (String, String) {
    shown_tunables_of(cert, "tcp").await
}

/// The `lnd tunables:` of the router's NI on `net` in `net show -v`.
async fn shown_tunables_of(cert: &Path, net: &str) -> (String, String) {
    let (ok, out, err) = run(cert, READER, &["net", "show", "--net", net, "-v"]).await;
    assert!(ok, "{out}{err}");
    let tunables = out
        .split("lnd tunables:")
        .nth(1)
        .unwrap_or_else(|| panic!("no lnd tunables: {out}"));
    let value = |key: &str| {
        tunables
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key}: {out}"))
            .to_owned()
    };
    (value("conns_per_peer"), value("timeout"))
}

/// A fake kernel peer at `me` (listening on `me`'s address, the router's acceptor port):
/// accepts `n` connections, answers each HELLO as the kernel does, and returns them with
/// the type the router named.
async fn accept_conns(listener: &TcpListener, me: Nid, n: usize) -> Vec<(ConnType, TcpStream)> {
    let mut conns = Vec::new();
    for _ in 0..n {
        let (mut s, _) = timeout(WAIT, listener.accept())
            .await
            .expect("the router opened fewer connections than its conns_per_peer asks")
            .unwrap();
        let mut request = [0u8; 16];
        s.read_exact(&mut request).await.unwrap();
        let mut hb = [0u8; 56];
        s.read_exact(&mut hb).await.unwrap();
        let HelloDecoded::Complete { hello, .. } = Hello::decode(&hb).unwrap() else {
            panic!("short HELLO");
        };
        let reply = hello.reply(ProcessId::lustre(me), 99, hello.ctype.invert());
        s.write_all(&reply.encode().unwrap()).await.unwrap();
        conns.push((hello.ctype, s));
    }
    conns
}

fn types(conns: &[(ConnType, TcpStream)]) -> (usize, usize, usize) {
    let count = |t| conns.iter().filter(|(c, _)| *c == t).count();
    (
        count(ConnType::Control),
        count(ConnType::BulkIn),
        count(ConnType::BulkOut),
    )
}

/// Makes the router send to `peer` (a ping it will not get a reply to), in the background.
fn ping_from_router(cert: &Path, peer: Nid) -> tokio::task::JoinHandle<()> {
    let cert = cert.to_owned();
    tokio::spawn(async move {
        let _ = run(&cert, ADMIN, &["ping", &peer.to_string(), "--timeout", "1"]).await;
    })
}

#[actix::test]
async fn net_set_conns_per_peer_and_lnd_timeout_apply_at_once_and_are_kept() {
    let s = setup();
    let cert = s.cert.as_path();
    let d = start(&s.args).await;
    assert_eq!(
        shown_tunables(cert).await,
        ("1".to_owned(), "50".to_owned())
    );

    // Before: a peer gets one connection of each type.
    let before = nid("127.0.49.2@tcp");
    let before_listener = TcpListener::bind(("127.0.49.2", PORT)).await.unwrap();
    let ping = ping_from_router(cert, before);
    let set = accept_conns(&before_listener, before, 3).await;
    assert_eq!(types(&set), (1, 1, 1));
    ping.await.unwrap();

    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--nid", ROUTER, "--conns-per-peer", "2"],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    assert_eq!(shown_tunables(cert).await.0, "2");

    // After: a peer the router connects to from now on gets two BULK_IN and two BULK_OUT.
    let after = nid("127.0.49.3@tcp");
    let after_listener = TcpListener::bind(("127.0.49.3", PORT)).await.unwrap();
    let ping = ping_from_router(cert, after);
    let set = accept_conns(&after_listener, after, 5).await;
    assert_eq!(types(&set), (1, 2, 2));
    ping.await.unwrap();
    drop(set);

    // The LND timeout: 1 s from now on, for every tcp NI.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--net", "tcp", "--lnd-timeout", "1"],
    )
    .await;
    assert!(ok && out.is_empty(), "{out}{err}");
    assert_eq!(shown_tunables(cert).await, ("2".to_owned(), "1".to_owned()));
    let fake = nid("127.0.49.4@tcp");
    let mut stuck = handshake::connect(
        ProcessId::lustre(fake),
        77,
        ProcessId::lustre(nid(ROUTER)),
        router_listen(),
        ConnType::Control,
        ProtoVersion::V3,
        WAIT,
    )
    .await
    .unwrap();
    // Half a ksock header, then nothing: closed after the new timeout, well before the
    // default one (50 s) and the test's bound (30 s).
    stuck
        .stream
        .write_all(&[0xC1, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = timeout(WAIT, stuck.stream.read_to_end(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the router kept a connection whose frame stopped coming: {closed:?}"
    );
    // A tcp NI added now runs with the LND's timeout (its own conns_per_peer, the default).
    let (ok, out, err) = run(cert, ADMIN, &["net", "add", "--net", "tcp1", "--if", "lo"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(
        shown_tunables_of(cert, "tcp1").await,
        ("1".to_owned(), "1".to_owned())
    );

    // The refusals, as lnetctl prints them.
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &[
            "net",
            "set",
            "--nid",
            "127.0.49.9@tcp",
            "--conns-per-peer",
            "2",
        ],
    )
    .await;
    refused(ok, &err, "set:\n    - net:\n", -2, "127.0.49.9@tcp");
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--nid", ROUTER, "--conns-per-peer", "128"],
    )
    .await;
    refused(ok, &err, "set:\n", -1, "valid range 0-127");
    // o2iblnd's timeout changes while it runs too (the VM test `o2ib_runtime` shows it on
    // real verbs); a build without the o2ib LND says it leaves it out.
    let (ok, out, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--net", "o2ib", "--lnd-timeout", "5"],
    )
    .await;
    if cfg!(feature = "o2ib") {
        assert!(ok && out.is_empty(), "{out}{err}");
    } else {
        refused(
            ok,
            &err,
            "set:\n    - lnd_timeout:\n",
            -22,
            "which this build leaves out",
        );
    }
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--net", "gni", "--lnd-timeout", "5"],
    )
    .await;
    refused(
        ok,
        &err,
        "set:\n    - lnd_timeout:\n",
        -22,
        "does not accept a LND timeout",
    );
    let (ok, _, err) = run(
        cert,
        ADMIN,
        &["net", "set", "--net", "tcp", "--lnd-timeout", "-1"],
    )
    .await;
    refused(ok, &err, "set:\n", -22, "must be >= 0");
    let (ok, _, err) = run(
        cert,
        READER,
        &["net", "set", "--net", "tcp", "--lnd-timeout", "5"],
    )
    .await;
    refused(ok, &err, "set:\n", -1, "changes need admin");
    let mut actions = vec![
        "ping",
        "set_conns_per_peer",
        "ping",
        "set_lnd_timeout",
        "add_ni",
    ];
    if cfg!(feature = "o2ib") {
        actions.push("set_lnd_timeout");
    }
    assert_eq!(admin_actions(API, cert, READER).await, actions);
    stop(d).await;

    // From the store alone: both settings are back, and the added NI's timeout.
    let d = start(&store_only(&s.args)).await;
    assert_eq!(shown_tunables(cert).await, ("2".to_owned(), "1".to_owned()));
    assert_eq!(
        shown_tunables_of(cert, "tcp1").await,
        ("1".to_owned(), "1".to_owned())
    );
    stop(d).await;
}
