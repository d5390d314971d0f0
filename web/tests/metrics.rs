//! `/metrics`: the route, gateway, buffer, credit, drop, fault rule and process series, the
//! HPE/GSI exporter labels, the metrics-only listener (plain HTTP, no token, nothing
//! but `GET /metrics`), alone and beside the API, and the socklnd counters of how
//! connections to a real acceptor on loopback (127.0.79.1, ephemeral port) ended.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use actors::{LndCounters, NiDriver, Node, NodeConfig};
use lnd::socklnd::handshake::connect_reserved;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnd::Lnd;
use reqwest::{Method, StatusCode};
use serde_json::json;
use support::{eventually, fabric_pair, frozen, serve, serve_with, Mode, ADMIN, READER, WAIT};
use tokio::io::AsyncWriteExt;

fn parse(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let s = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no sample {name} {labels:?}"));
    match s.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => panic!("{name}: not a number"),
    }
}

#[actix::test]
async fn routes_buffers_credits_drops_fault_rules_and_the_process_are_served() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::Https, |c| {
        c.metrics_exporter_labels = true;
    })
    .await;
    let (a0, b0) = (an[0].to_string(), bn[0].to_string());
    let added = api
        .call(
            Method::POST,
            "/api/v1/routes",
            Some(ADMIN),
            Some(json!({"net": "tcp9", "gateway": b0, "hop": 2, "priority": 3})),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text);
    let rule = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{a0}/fault-rules"),
            Some(ADMIN),
            Some(json!({"kind": "drop", "source": "*", "dest": "*@tcp7", "trigger": "all"})),
        )
        .await;
    assert!(rule.status.is_success(), "{}", rule.text);
    // A second rule drops every message A sends: the ping below matches it and is dropped.
    let all = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{a0}/fault-rules"),
            Some(ADMIN),
            Some(json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all"})),
        )
        .await;
    assert!(all.status.is_success(), "{}", all.text);
    let all_id = all.json()["id"].to_string();
    let ping = api
        .call(
            Method::POST,
            "/api/v1/ping",
            Some(ADMIN),
            Some(json!({"nid": b0, "timeout_ms": 300})),
        )
        .await;
    assert_eq!(
        ping.json()["ok"],
        false,
        "the ping was dropped: {}",
        ping.text
    );

    let got = api.get("/metrics", Some(READER)).await;
    assert_eq!(got.status, StatusCode::OK);
    let m = parse(&got.text);
    let route = [("net", "tcp9"), ("gateway", b0.as_str())];
    // A route through a gateway not checked yet: up unless the checker says otherwise.
    let up = value(&m, "lnet_router_route_up", &route);
    assert!(up == 0.0 || up == 1.0);
    assert_eq!(value(&m, "lnet_router_route_hops", &route), 2.0);
    assert_eq!(value(&m, "lnet_router_route_priority", &route), 3.0);
    let states: f64 = ["unchecked", "alive", "dead"]
        .iter()
        .map(|s| {
            value(
                &m,
                "lnet_router_gateway_state",
                &[("gateway", &b0), ("state", s)],
            )
        })
        .sum();
    assert_eq!(states, 1.0, "exactly one state of the gateway is 1");
    assert!(
        value(
            &m,
            "lnet_router_buffers",
            &[("cpt", "0"), ("pool", "large")]
        ) > 0.0
    );
    assert_eq!(
        value(
            &m,
            "lnet_router_buffer_credits",
            &[("cpt", "0"), ("pool", "small")]
        ),
        value(
            &m,
            "lnet_router_buffers",
            &[("cpt", "0"), ("pool", "small")]
        ),
        "no buffer in use"
    );
    assert_eq!(value(&m, "lnet_router_waiting_messages", &[]), 0.0);
    assert_eq!(
        value(&m, "lnet_router_ni_max_tx_credits", &[("nid", &a0)]),
        8.0
    );
    assert_eq!(value(&m, "lnet_router_ni_tx_credits", &[("nid", &a0)]), 8.0);
    assert!(value(&m, "lnet_router_ni_min_tx_credits", &[("nid", &a0)]) <= 8.0);
    assert_eq!(value(&m, "lnet_router_routing_enabled", &[]), 0.0);
    for reason in ["no_route", "no_live_route", "send_failed"] {
        assert_eq!(
            value(&m, "lnet_router_forward_drops_total", &[("reason", reason)]),
            0.0
        );
    }
    assert_eq!(
        value(
            &m,
            "lnet_router_fault_rule_matched_total",
            &[("kind", "drop"), ("local_nid", &a0)]
        ),
        0.0
    );
    let dropped = [("rule", all_id.as_str()), ("kind", "drop")];
    assert!(value(&m, "lnet_router_fault_rule_matched_total", &dropped) >= 1.0);
    assert!(value(&m, "lnet_router_fault_rule_fired_total", &dropped) >= 1.0);
    assert!(value(&m, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(value(&m, "process_open_fds", &[]) > 0.0);
    assert!(value(&m, "process_start_time_seconds", &[]) > 1.7e9);
    // The exporter labels: on every lustre_* sample, on no other.
    for s in &m.samples {
        let labelled =
            s.labels.get("component") == Some("lnet") && s.labels.get("target") == Some("lnet");
        assert_eq!(
            labelled,
            s.metric.starts_with("lustre_"),
            "{} {:?}",
            s.metric,
            s.labels
        );
    }
    let types: std::collections::HashMap<&str, &str> = got
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    assert_eq!(types["lnet_router_forward_drops_total"], "counter");
    assert_eq!(types["lnet_router_fault_rule_matched_total"], "counter");
    assert_eq!(types["process_cpu_seconds_total"], "counter");
    assert_eq!(types["lnet_router_route_up"], "gauge");
    assert_eq!(types["lnet_router_buffer_credits"], "gauge");
    api.server.shutdown().await;
}

#[actix::test]
async fn the_metrics_listener_serves_metrics_alone_without_a_token() {
    let (a, an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let client = reqwest::Client::new();

    // Alone (no API server).
    let alone = web::start_metrics(
        "127.0.0.1:0".parse().unwrap(),
        false,
        web::WebContext {
            node: a.clone(),
            tokens: Arc::new(web::MemoryTokens::new()),
            sink: None,
            tunables: frozen(),
            config: None,
            nis: None,
        },
    )
    .await
    .unwrap();
    // Beside the API (HTTPS, tokens), sharing its state.
    let api = serve(a, frozen(), Mode::Https).await;
    let beside = api
        .server
        .serve_metrics("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        api.get("/metrics", None).await.status,
        StatusCode::UNAUTHORIZED
    );

    for server in [&alone, &beside] {
        let base = server.url();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        let r = client.get(format!("{base}/metrics")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"));
        let m = parse(&r.text().await.unwrap());
        assert_eq!(
            value(
                &m,
                "lnet_router_ni_tx_credits",
                &[("nid", &an[0].to_string())]
            ),
            8.0
        );
        for path in [
            "/",
            "/livez",
            "/readyz",
            "/api/v1/nets",
            "/api/v1/openapi.json",
        ] {
            let r = client.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        }
        let r = client
            .post(format!("{base}/metrics"))
            .header("authorization", format!("Bearer {ADMIN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        let r = client
            .post(format!("{base}/api/v1/routes"))
            .header("authorization", format!("Bearer {ADMIN}"))
            .json(&json!({"net": "tcp9", "gateway": "10.0.1.1@tcp"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
    beside.shutdown().await;
    alone.shutdown().await;
    api.server.shutdown().await;
}

/// The closes of a socklnd NI by reason, as the node's view gives them.
async fn closes(node: &Node) -> std::collections::BTreeMap<&'static str, u64> {
    let nis = node.lnd_counters().await.unwrap();
    assert_eq!(nis.len(), 1, "{nis:?}");
    match &nis[0].counters {
        LndCounters::Socklnd(c) => c.closes.clone(),
        other => panic!("not socklnd: {other:?}"),
    }
}

#[actix::test]
async fn socklnd_closes_of_a_silent_and_a_garbage_connection_are_served_by_reason() {
    let ip = Ipv4Addr::new(127, 0, 79, 1);
    let hostile = Ipv4Addr::new(127, 0, 79, 2);
    let node = Node::start(NodeConfig::default());
    let mut config = SockLndConfig::new(format!("{ip}@tcp").parse().unwrap(), 0x0EB0_0079);
    config.listen = Some(SocketAddr::from((ip, 0)));
    // Each read may take 30 s, the whole passive handshake half a second.
    config.accept_timeout = Duration::from_secs(30);
    config.handshake_timeout = Duration::from_millis(500);
    let lnd = SockLnd::start(config, node.handler()).await.unwrap();
    let acceptor = lnd.local_addr().unwrap();
    let nid = lnd.nid().to_string();
    node.add_driver(Arc::new(NiDriver::new(lnd)), 8)
        .await
        .unwrap();
    let api = serve(node.clone(), frozen(), Mode::Https).await;

    // Before any connection: every reason is served, at 0.
    let m = parse(&api.get("/metrics", Some(READER)).await.text);
    let closed = |m: &prometheus_parse::Scrape, reason: &str| {
        value(
            m,
            "lnet_router_socklnd_conns_closed_total",
            &[("nid", &nid), ("reason", reason)],
        )
    };
    for reason in [
        "handshake_timeout",
        "bad_acceptor_request",
        "handshake_limit",
    ] {
        assert_eq!(closed(&m, reason), 0.0, "{reason}");
    }

    // A connection from a reserved port that never sends a byte (no acceptor request, no
    // HELLO): cut off once its handshake is not done in time.
    let _silent = connect_reserved(hostile, acceptor, WAIT).await.unwrap();
    // One that sends garbage where the acceptor request belongs: refused at once.
    let mut garbage = connect_reserved(hostile, acceptor, WAIT).await.unwrap();
    garbage.write_all(&[0xde; 16]).await.unwrap();

    let counted = eventually(|| {
        let node = node.clone();
        async move {
            let c = closes(&node).await;
            (c["handshake_timeout"] >= 1 && c["bad_acceptor_request"] >= 1).then_some(c)
        }
    })
    .await;
    assert_eq!(counted["handshake_limit"], 0, "{counted:?}");

    let got = api.get("/metrics", Some(READER)).await;
    assert_eq!(got.status, StatusCode::OK);
    let m = parse(&got.text);
    assert!(closed(&m, "handshake_timeout") >= 1.0, "{}", got.text);
    assert!(closed(&m, "bad_acceptor_request") >= 1.0, "{}", got.text);
    let reasons = m
        .samples
        .iter()
        .filter(|s| s.metric == "lnet_router_socklnd_conns_closed_total")
        .count();
    assert_eq!(reasons, counted.len(), "one series per reason");
    for by in ["reader", "writer_task"] {
        assert_eq!(
            value(
                &m,
                "lnet_router_socklnd_writes_total",
                &[("nid", &nid), ("by", by)]
            ),
            0.0,
            "nothing was written"
        );
    }
    assert!(got
        .text
        .contains("# TYPE lnet_router_socklnd_conns_closed_total counter\n"));
    assert!(
        !got.text.contains("lnet_router_o2iblnd_"),
        "no o2iblnd NI, no o2iblnd series"
    );
    api.server.shutdown().await;
    assert!(node.stop_nis().await.unwrap());
}
