//! The `lnet-router` binary as a real process: it starts from a configuration file, answers
//! an LNet ping over socklnd from an in-process node, and stops with exit code 0 on
//! SIGTERM; bad files are refused with a non-zero exit code, naming the key and the line.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::Nid;

mod support;
use support::{sigterm, wait_listening, write_config, Daemon, WAIT};

#[actix::test]
async fn the_daemon_answers_a_ping_and_stops_on_sigterm() {
    const PORT: u16 = 21_100;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.1@tcp
          tunables:
              peer_timeout: 180
              peer_credits: 8
              peer_buffer_credits: 0
              credits: 256
peer:
-     primary nid: 127.0.5.2@tcp
      Multi-Rail: true
      peer ni:
      -     nid: 127.0.5.2@tcp
global:
    retry_count: 2
    transaction_timeout: 50
    discovery: 1
lnet-router:
    acceptor_port: {PORT}
"
        ),
    );
    let mut daemon = Daemon::start(&config);
    let listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 5, 1)), PORT);
    tokio::time::timeout(WAIT, wait_listening(&mut daemon, listen))
        .await
        .expect("bounded");

    let node = Node::start(NodeConfig::default());
    let me: Nid = "127.0.5.2@tcp".parse().unwrap();
    let mut c = SockLndConfig::new(me, 0x5EED_0502);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 5, 2)),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 8).await.unwrap();
    let router: Nid = "127.0.5.1@tcp".parse().unwrap();
    let reply = tokio::time::timeout(WAIT, node.ping(router, Duration::from_secs(10)))
        .await
        .expect("bounded")
        .expect("the daemon answers the ping");
    let nids = reply.nids();
    assert!(nids.contains(&(router, true)), "{nids:?}");
    assert!(nids.iter().all(|(_, up)| *up), "{nids:?}");

    sigterm(daemon.pid());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(
        out.contains(&format!("NI 127.0.5.1@tcp listening on 127.0.5.1:{PORT}")),
        "{out}"
    );
    assert!(out.contains("NIDs: 127.0.5.1@tcp"), "{out}");
    assert!(out.contains("stopped (SIGTERM)"), "{out}");
    assert!(err.contains("peer added"), "{err}");
    assert!(
        err.contains("clean=true"),
        "the NI did not stop cleanly:\n{err}"
    );
}

#[actix::test]
async fn sigint_stops_the_daemon_too() {
    const PORT: u16 = 21_101;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.3@tcp
lnet-router:
    acceptor_address: 127.0.5.3
    acceptor_port: {PORT}
"
        ),
    );
    let mut daemon = Daemon::start(&config);
    let listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 5, 3)), PORT);
    tokio::time::timeout(WAIT, wait_listening(&mut daemon, listen))
        .await
        .expect("bounded");
    let status = std::process::Command::new("kill")
        .arg("-INT")
        .arg(daemon.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}

/// Runs the daemon on `text`, which it must refuse; its stderr.
async fn refused(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(&dir, text);
    let mut daemon = Daemon::start(&config);
    let (status, out, err) = daemon.wait_exit().await;
    assert!(!status.success(), "accepted:\n{out}\n{err}");
    assert_ne!(status.code(), Some(0));
    err
}

#[actix::test]
async fn an_unknown_key_is_refused_with_its_line() {
    let err = refused(
        "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.4@tcp
          bogus_key: 1
",
    )
    .await;
    assert!(err.contains("bogus_key"), "{err}");
    assert!(err.contains("line 5"), "{err}");
}

#[actix::test]
async fn an_invalid_nid_is_refused_with_its_line() {
    let err = refused(
        "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.999@tcp
",
    )
    .await;
    assert!(err.contains("nid"), "{err}");
    assert!(err.contains("127.0.5.999@tcp"), "{err}");
    assert!(err.contains("line 4"), "{err}");
}

#[actix::test]
async fn a_route_to_a_local_net_and_o2ib_nets_are_refused() {
    let err = refused(
        "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.6@tcp
    - net type: o2ib
      local NI(s):
        - nid: 10.9.0.1@o2ib
route:
    - net: tcp
      gateway: 127.0.5.7@tcp
routing:
    enable: 1
lnet-router:
    acceptor_port: 21103
",
    )
    .await;
    assert!(err.contains("line 9: route[0].net"), "{err}");
    assert!(err.contains("line 5: net[1].net type"), "{err}");
    assert!(err.contains("o2ib LND"), "{err}");
    assert!(!err.contains("routing"), "{err}");
}

#[actix::test]
async fn a_port_in_use_fails_the_start_with_a_non_zero_exit() {
    const PORT: u16 = 21_104;
    let _holder = std::net::TcpListener::bind(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 5, 8)),
        PORT,
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.8@tcp
lnet-router:
    acceptor_port: {PORT}
"
        ),
    );
    let mut daemon = Daemon::start(&config);
    let (status, out, err) = daemon.wait_exit().await;
    assert!(!status.success(), "{out}\n{err}");
    assert!(err.contains("127.0.5.8:21104"), "{err}");
}

#[actix::test]
async fn a_config_imported_into_the_data_dir_runs_again_from_the_store_alone() {
    const PORT: u16 = 21_105;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.5.9@tcp
lnet-router:
    acceptor_port: {PORT}
"
        ),
    );
    let data = dir.path().join("data");
    let listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 5, 9)), PORT);
    let node = Node::start(NodeConfig::default());
    let me: Nid = "127.0.5.10@tcp".parse().unwrap();
    let mut c = SockLndConfig::new(me, 0x5EED_050A);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 5, 10)),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 8).await.unwrap();
    let router: Nid = "127.0.5.9@tcp".parse().unwrap();
    for (round, imported) in [(1, true), (2, false)] {
        let mut daemon = Daemon::start_args(&[
            "run".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
            "--data-dir".as_ref(),
            data.as_os_str(),
        ]);
        tokio::time::timeout(WAIT, wait_listening(&mut daemon, listen))
            .await
            .expect("bounded");
        let reply = tokio::time::timeout(WAIT, node.ping(router, Duration::from_secs(10)))
            .await
            .expect("bounded")
            .unwrap();
        assert!(reply.nids().contains(&(router, true)));
        sigterm(daemon.pid());
        let (status, out, err) = daemon.wait_exit().await;
        assert!(status.success(), "{status}\n{out}\n{err}");
        assert_eq!(
            out.contains("configuration imported into the store"),
            imported,
            "start {round}: the same file is imported once\n{out}"
        );
    }
    assert!(data.join("store").is_dir());
    // From the store alone (no file): the same NI, on the acceptor port the file gave.
    let s = router::startup::startup(None, Some(&data), &router::plan::HostInterfaces).unwrap();
    assert_eq!(s.plan.nis[0].nid, router);
    assert_eq!(s.plan.nis[0].peer_port, PORT);
    drop(s);
    let mut daemon = Daemon::start_args(&["run".as_ref(), "--data-dir".as_ref(), data.as_os_str()]);
    tokio::time::timeout(WAIT, wait_listening(&mut daemon, listen))
        .await
        .expect("bounded: the daemon run from its store listens on the file's acceptor_port");
    let reply = tokio::time::timeout(WAIT, node.ping(router, Duration::from_secs(10)))
        .await
        .expect("bounded")
        .unwrap();
    assert!(reply.nids().contains(&(router, true)));
    sigterm(daemon.pid());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}
