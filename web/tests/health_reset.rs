//! Health resets through the API over real HTTPS, on NIs pushed down by fault rules that
//! the API itself installs: two nodes over socklnd on loopback, A (127.0.77.1) and the
//! Multi-Rail peer B (127.0.77.2 and 127.0.77.3), port 22077. A health-error rule on A's
//! NI makes its sends fail with LOCAL_TIMEOUT (the local NI loses health and joins the
//! local NI recovery queue), then one with REMOTE_ERROR (B's peer NIs do, on the peer NI
//! recovery queue). A reset through
//! the API brings each back to the value asked at once, takes it off its queue, and the
//! admin event naming the token appears in the server-sent event stream. Every wait is
//! bounded; nothing is timed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::fault::{FaultPath, NidMatch};
use lnet::tunables::Tunables;
use lnet::Nid;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{eventually, serve, Api, Mode, SseReader, ADMIN};

const PORT: u16 = 22_077;

fn config(ip: [u8; 4]) -> SockLndConfig {
    let addr = Ipv4Addr::from(ip);
    let mut c = SockLndConfig::new(
        format!("{addr}@tcp").parse().unwrap(),
        (0x0EB0 << 32) | u64::from(u32::from(addr)),
    );
    c.listen = Some(SocketAddr::new(IpAddr::V4(addr), PORT));
    c.peer_port = PORT;
    c
}

async fn sock_node(ips: &[[u8; 4]]) -> (Node, Vec<Nid>) {
    let node = Node::start(NodeConfig::default());
    let mut nids = Vec::new();
    for ip in ips {
        nids.push(
            node.add_ni::<SockLnd<NodeHandler>>(config(*ip), 8)
                .await
                .unwrap(),
        );
    }
    (node, nids)
}

/// Sends `n` PUTs from `a` to `dest`; each ends (a failure here) by its timeout.
async fn puts(a: &Node, dest: Nid, n: u64) {
    for i in 0..n {
        let txn = a
            .put(PutRequest {
                dest,
                portal: 4,
                match_bits: 0x42,
                hdr_data: i,
                payload: Bytes::from_static(b"health"),
                ack: false,
                timeout: Duration::from_secs(5),
            })
            .await
            .unwrap();
        txn.finish().await;
    }
}

async fn queue(api: &Api, which: &str) -> Vec<String> {
    api.read(&format!("/api/v1/recovery/{which}")).await["nids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

/// Adds a health-error rule on A's NI for sends to `dest`; returns its id.
async fn fail_rule(api: &Api, ni: Nid, dest: &str, status: &str) -> u64 {
    let got = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{ni}/fault-rules"),
            Some(ADMIN),
            Some(json!({
                "kind": "drop",
                "source": "*",
                "dest": dest,
                "trigger": "all",
                "health_error": status,
            })),
        )
        .await;
    assert_eq!(got.status, StatusCode::CREATED, "{got:?}");
    let rule: web::FaultRuleDoc = serde_json::from_str(&got.text).unwrap();
    assert_eq!(rule.rule.path(), FaultPath::Send);
    assert_eq!(rule.rule.local_nid, Some(ni));
    assert_eq!(rule.rule.source, NidMatch::Any);
    assert_eq!(rule.rule.dest, dest.parse().unwrap());
    rule.id
}

async fn remove_rule(api: &Api, ni: Nid, id: u64) {
    let path = format!("/api/v1/nis/{ni}/fault-rules/{id}");
    let got = api.call(Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(got.status, StatusCode::NO_CONTENT, "{got:?}");
    let again = api.call(Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(again.error().0.as_deref(), Some("id"));
}

/// Reads the stream until it has shown the admin event of `action` on `nid` by token
/// `ops` and the NI leaving the `queue` recovery queue; returns the admin event.
async fn reset_seen(sse: &mut SseReader, action: &str, queue: &str, nid: Nid) -> Value {
    let (mut admin, mut left) = (None, false);
    let nid = nid.to_string();
    sse.until(|r| {
        let e = r.json();
        if r.event == "admin" && e["event"]["action"] == action && e["event"]["target"] == nid {
            admin = Some(e);
        } else if r.event == "recovery_left"
            && e["event"]["queue"] == queue
            && e["event"]["nid"] == nid
        {
            left = true;
        }
        admin.is_some() && left
    })
    .await;
    admin.unwrap()
}

#[actix::test]
async fn health_pushed_down_by_fault_rules_is_reset_at_once_and_leaves_recovery() {
    let (a, a0) = sock_node(&[[127, 0, 77, 1]]).await;
    let a0 = a0[0];
    let (_b, bn) = sock_node(&[[127, 0, 77, 2], [127, 0, 77, 3]]).await;
    let b0 = bn[0];
    // A Multi-Rail peer with two NIs: LNet keeps the health of its peer NIs.
    a.add_peer(b0, bn.clone(), true).await.unwrap();
    let api = serve(a.clone(), Tunables::default(), Mode::Https).await;

    // B answers on both NIs: its peer NIs are heard from (a peer NI joins recovery only
    // then).
    for nid in &bn {
        let got = api
            .call(
                Method::POST,
                "/api/v1/ping",
                Some(ADMIN),
                Some(json!({"nid": nid.to_string()})),
            )
            .await;
        let ping: web::PingResult = serde_json::from_str(&got.text).unwrap();
        assert!(ping.ok, "{ping:?}");
    }
    let mut sse = api.stream(None, "").await;

    // The local NI: every send fails with LOCAL_TIMEOUT.
    let rule = fail_rule(&api, a0, "*", "local_timeout").await;
    let rules = api.read(&format!("/api/v1/nis/{a0}/fault-rules")).await;
    assert_eq!(rules["rules"].as_array().unwrap().len(), 1);
    puts(&a, b0, 3).await;
    let rules = api.read(&format!("/api/v1/nis/{a0}/fault-rules")).await;
    assert!(rules["rules"][0]["fired"].as_u64().unwrap() >= 3, "{rules}");
    eventually(|| async {
        queue(&api, "local")
            .await
            .contains(&a0.to_string())
            .then_some(())
    })
    .await;
    let nets = api.read("/api/v1/nets").await;
    let lowered = nets["nets"][1]["nis"][0]["health_stats"]["health value"]
        .as_u64()
        .unwrap();
    assert!(lowered < 1000, "{nets}");
    sse.until(|r| r.event == "health" && r.json()["event"]["nid"] == a0.to_string())
        .await;

    let got = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{a0}/health"),
            Some(ADMIN),
            Some(json!({})),
        )
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    let r: web::HealthResetResult = serde_json::from_str(&got.text).unwrap();
    assert_eq!((r.health, r.in_recovery), (1000, false), "{r:?}");
    assert!(!queue(&api, "local").await.contains(&a0.to_string()));
    let admin = reset_seen(&mut sse, "reset_local_ni_health", "local", a0).await;
    assert_eq!(admin["event"]["token"], "ops");
    assert_eq!(admin["id"].as_u64(), Some(r.event_id));
    remove_rule(&api, a0, rule).await;
    let rules = api.read(&format!("/api/v1/nis/{a0}/fault-rules")).await;
    assert!(rules["rules"].as_array().unwrap().is_empty());

    // The peer NIs: every send to them fails with REMOTE_ERROR.
    let rule = fail_rule(&api, a0, &format!("*@{}", b0.net), "remote_error").await;
    puts(&a, b0, 3).await;
    let b0 =
        eventually(|| async { queue(&api, "peer").await.first().map(|n| support::nid(n)) }).await;
    assert!(bn.contains(&b0));
    let peers = api.read("/api/v1/peers").await;
    let lowered = peers["peers"][0]["nis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["nid"] == b0.to_string())
        .unwrap()["health_stats"]["health value"]
        .as_u64()
        .unwrap();
    assert!(lowered < 1000, "{peers}");
    let got = api
        .call(
            Method::POST,
            &format!("/api/v1/peer-nis/{b0}/health"),
            Some(ADMIN),
            Some(json!({"value": 1000})),
        )
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    let r: web::HealthResetResult = serde_json::from_str(&got.text).unwrap();
    assert_eq!((r.health, r.in_recovery), (1000, false), "{r:?}");
    assert!(!queue(&api, "peer").await.contains(&b0.to_string()));
    let admin = reset_seen(&mut sse, "reset_peer_ni_health", "peer", b0).await;
    assert_eq!(admin["event"]["token"], "ops");
    remove_rule(&api, a0, rule).await;

    // The metrics agree.
    let metrics = api.get("/metrics", Some(support::READER)).await.text;
    assert!(
        metrics.contains(&format!(
            "lnet_router_peer_ni_health{{nid=\"{b0}\",primary_nid=\"{}\"}} 1000",
            bn[0]
        )),
        "{metrics}"
    );
    api.server.shutdown().await;
}
