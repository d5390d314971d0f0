//! Router buffers under pressure, on a router process: a fast sender streams 1 MiB PUTs
//! through it to a slow receiver. The router holds back the sender through its buffers
//! and credits (its `routing show` low-water marks go below zero), drops nothing, and its
//! memory stays bounded by its pools while far more data than they hold goes through.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::{sigterm, wait_listening, Daemon, WAIT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::{MdSpec, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::fault::{FaultPath, FaultRule, FaultTrigger, NidMatch};
use lnet::route::RouteSpec;
use lnet::Nid;
use tokio::time::timeout;

const PORT: u16 = 24_300;
const API: u16 = 24_301;
const TOKEN: &str = "reader-secret-0123456789";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn ip(n: Nid) -> Ipv4Addr {
    Ipv4Addr::from(n.addr_u32().unwrap())
}

async fn end_node(me: &str, gw: &str, net: &str) -> Node {
    let node = Node::start(NodeConfig::default());
    let me = nid(me);
    let mut c = SockLndConfig::new(me, 0xB0FF_0000 | u64::from(me.addr_u32().unwrap() & 0xffff));
    c.listen = Some(SocketAddr::new(IpAddr::V4(ip(me)), PORT));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 256).await.unwrap();
    node.add_route(RouteSpec {
        net: net.parse().unwrap(),
        gateway: nid(gw),
        hops: Some(1),
        priority: 0,
    })
    .await
    .unwrap();
    node
}

/// The router's resident memory high-water mark, KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The names of the router's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

async fn routing(client: &reqwest::Client) -> serde_json::Value {
    client
        .get(format!("http://127.0.0.1:{API}/api/v1/routing"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[actix::test]
async fn a_slow_receiver_holds_back_a_fast_sender_through_the_router_buffers() {
    const TOTAL: usize = 160;
    const WINDOW: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lnet.yaml");
    std::fs::write(
        &config,
        format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.34.1@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.35.1@tcp1
routing:
    enable: 1
buffers:
    tiny: 16
    small: 16
    large: 8
lnet-router:
    acceptor_port: {PORT}
"
        ),
    )
    .unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("watcher reader {TOKEN}\n")).unwrap();
    let data = dir.path().join("data");
    let api = format!("127.0.0.1:{API}");
    let mut router = Daemon::start_args(&[
        "run".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
        "--tokens-file".as_ref(),
        tokens.as_os_str(),
        "--api-listen".as_ref(),
        api.as_ref(),
        "--plain-http".as_ref(),
    ]);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 34, 1)), PORT),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 35, 1)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        timeout(WAIT, wait_listening(&mut router, addr))
            .await
            .expect("bounded");
    }
    let a = end_node("127.0.34.2@tcp", "127.0.34.1@tcp", "tcp1").await;
    let b = end_node("127.0.35.2@tcp1", "127.0.35.1@tcp1", "tcp").await;
    // B reads each message 20 ms late: its socket holds back the router.
    b.add_fault_rule(
        FaultRule::delay(NidMatch::Any, NidMatch::Any, FaultTrigger::All, 20)
            .at(nid("127.0.35.2@tcp1"))
            .on(FaultPath::Both),
    )
    .unwrap();
    let mut delivered = b
        .attach(MdSpec {
            portal: 5,
            match_bits: 5,
            data: Bytes::new(),
            depth: 1024,
        })
        .await
        .unwrap();
    // B counts each PUT once (by its header data).
    let counted = tokio::spawn(async move {
        let mut seen = std::collections::HashSet::new();
        while let Some(m) = delivered.recv().await {
            if let lnet::Message::Put { hdr_data, .. } = m.header.msg {
                assert!(seen.insert(hdr_data), "PUT {hdr_data} delivered twice");
            }
            if seen.len() == TOTAL {
                break;
            }
        }
        seen.len()
    });
    let client = reqwest::Client::new();
    // The API has a thread of its own, apart from the actors and the CPTs' LND tasks.
    let threads = thread_names(router.pid());
    assert_eq!(
        threads.iter().filter(|t| *t == "lnet-web").count(),
        1,
        "{threads:?}"
    );
    let before_kib = vm_hwm_kib(router.pid());
    let payload = Bytes::from(vec![9u8; 1 << 20]);
    let ok = timeout(WAIT * 4, async {
        let mut running = tokio::task::JoinSet::new();
        let mut started = 0usize;
        let mut ok = 0usize;
        loop {
            while running.len() < WINDOW && started < TOTAL {
                let txn = a
                    .put(PutRequest {
                        dest: nid("127.0.35.2@tcp1"),
                        portal: 5,
                        match_bits: 5,
                        hdr_data: started as u64,
                        payload: payload.clone(),
                        ack: true,
                        timeout: Duration::from_secs(60),
                    })
                    .await
                    .unwrap();
                running.spawn(async move { txn.finish().await });
                started += 1;
            }
            let Some(got) = running.join_next().await else {
                break;
            };
            let got = got.unwrap();
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
            ok += 1;
        }
        ok
    })
    .await
    .expect("bounded");
    assert_eq!(ok, TOTAL, "every PUT ACKed: nothing dropped");
    assert_eq!(timeout(WAIT, counted).await.unwrap().unwrap(), TOTAL);
    let after_kib = vm_hwm_kib(router.pid());
    let show = routing(&client).await;
    // The 8 large buffers are shared out among the router's CPTs (one per core), and A's
    // messages use the pools of the CPT its NID hashes to.
    let cpts = show["cpts"].as_array().unwrap();
    let large = |key: &'static str| cpts.iter().map(move |c| c["large"][key].as_i64().unwrap());
    assert_eq!(large("nbuffers").sum::<i64>(), 8, "{show}");
    assert_eq!(
        large("credits").sum::<i64>(),
        8,
        "every buffer back: {show}"
    );
    let low = large("mincredits").min().unwrap();
    assert!(low <= 0, "a large pool ran out: {show}");
    let a_peer = show["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["nid"] == "127.0.34.2@tcp")
        .unwrap()
        .clone();
    // 160 MiB went through; the router's memory grew by far less.
    let grew_mib = after_kib.saturating_sub(before_kib) / 1024;
    assert!(grew_mib < 64, "router memory grew {grew_mib} MiB");
    println!(
        "buffers: {TOTAL} x 1 MiB through 8 large buffers; large pool low-water mark {low}, \
         A's router credits low-water mark {}; router memory high-water mark {} MiB (+{grew_mib} MiB)",
        a_peer["mincredits"],
        after_kib / 1024
    );
    sigterm(router.pid());
    let (status, out, err) = router.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}
