//! The REST API over real HTTPS on 127.0.0.1 (an ephemeral port, a self-signed certificate
//! the client trusts), against a node on the in-process fabric: every endpoint with each
//! role, the structured validation errors, refused changes that change nothing, the event
//! page and stream, the metrics (parsed as Prometheus text) and the OpenAPI document.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::collections::BTreeSet;

use lnet::health::HealthValue;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{eventually, fabric_pair, frozen, serve, serve_with, Mode, ADMIN, READER};

/// Every change the API offers, for node A with NI `a0` and peer NI `b0`.
fn mutations(a0: &str, b0: &str) -> Vec<(Method, String, Value)> {
    vec![
        (Method::POST, format!("/api/v1/nis/{a0}/health"), json!({})),
        (
            Method::POST,
            format!("/api/v1/peer-nis/{b0}/health"),
            json!({"value": 1000}),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            json!({"retry_count": 1}),
        ),
        (
            Method::POST,
            "/api/v1/peers".into(),
            json!({"primary_nid": "10.0.5.1@tcp"}),
        ),
        (Method::POST, "/api/v1/discover".into(), json!({"nid": b0})),
        (
            Method::POST,
            "/api/v1/nis/health".into(),
            json!({"value": 700}),
        ),
        (Method::PUT, "/api/v1/routing".into(), json!({"enable": 0})),
        (Method::POST, "/api/v1/drain".into(), Value::Null),
        (Method::PUT, "/api/v1/buffers".into(), json!({"small": 64})),
        (Method::DELETE, format!("/api/v1/peers/{b0}"), Value::Null),
        (Method::POST, "/api/v1/stats/reset".into(), Value::Null),
        (
            Method::POST,
            "/api/v1/peer-nis/health".into(),
            json!({"value": 700}),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/fault-rules"),
            json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all"}),
        ),
        (
            Method::DELETE,
            format!("/api/v1/nis/{a0}/fault-rules/1"),
            Value::Null,
        ),
        (
            Method::POST,
            "/api/v1/fault-rules".into(),
            json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all"}),
        ),
        (Method::DELETE, "/api/v1/fault-rules/1".into(), Value::Null),
        (
            Method::POST,
            "/api/v1/fault-rules/reset".into(),
            json!({"kind": "drop"}),
        ),
        (
            Method::POST,
            "/api/v1/routes".into(),
            json!({"net": "tcp9", "gateway": b0}),
        ),
        (
            Method::DELETE,
            format!("/api/v1/routes/tcp9/{b0}"),
            Value::Null,
        ),
        (
            Method::POST,
            "/api/v1/udsp".into(),
            json!({"src": "tcp", "priority": 1}),
        ),
        (Method::DELETE, "/api/v1/udsp".into(), Value::Null),
        (Method::DELETE, "/api/v1/udsp/0".into(), Value::Null),
    ]
}

fn body(v: &Value) -> Option<Value> {
    (!v.is_null()).then(|| v.clone())
}

/// What the refused changes could have touched.
async fn observable(api: &support::Api) -> Value {
    let nets = api.read("/api/v1/nets").await;
    let peers = api.read("/api/v1/peers").await;
    json!({
        "global": api.read("/api/v1/global").await,
        "health": nets["nets"][1]["nis"].as_array().unwrap().iter()
            .map(|n| n["health_stats"]["health value"].clone()).collect::<Vec<_>>(),
        "peer_health": peers["peers"].as_array().unwrap().iter()
            .flat_map(|p| p["nis"].as_array().unwrap().iter()
                .map(|n| (n["nid"].clone(), n["health_stats"]["health value"].clone())))
            .collect::<Vec<_>>(),
        "peers": peers["peers"].as_array().unwrap().iter()
            .map(|p| p["primary_nid"].clone()).collect::<Vec<_>>(),
        "recovery": api.read("/api/v1/recovery/local").await,
        "routes": api.read("/api/v1/routes").await,
        "udsp": api.read("/api/v1/udsp").await,
        "draining": api.read("/api/v1/routing").await["draining"],
        "admin_events": api.admin_events().await,
    })
}

/// Lowers A0's and B0's health through the node so that a reset would show.
async fn lower_health(api: &support::Api, a0: lnet::Nid, b0: lnet::Nid) {
    api.node
        .set_local_ni_health(a0, HealthValue::new(500).unwrap())
        .await
        .unwrap();
    api.node
        .set_peer_ni_health(b0, HealthValue::new(600).unwrap())
        .await
        .unwrap();
    eventually(|| async {
        let nets = api.read("/api/v1/nets").await;
        (nets["nets"][1]["nis"][0]["health_stats"]["health value"] == 500).then_some(())
    })
    .await;
    eventually(|| async {
        let peers = api.read("/api/v1/peers").await;
        (peers["peers"][0]["nis"][0]["health_stats"]["health value"] == 600).then_some(())
    })
    .await;
}

#[actix::test]
async fn a_reader_token_reads_every_document() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;

    let nets: lnet::show::NetShow = serde_json::from_value(api.read("/api/v1/nets").await).unwrap();
    assert_eq!(nets.nets[0].net_type.to_string(), "lo");
    assert_eq!(nets.nets[0].nis[0].nid.to_string(), "0@lo");
    assert_eq!(nets.nets[1].net_type.to_string(), "tcp");
    let nids: Vec<String> = nets.nets[1].nis.iter().map(|n| n.nid.to_string()).collect();
    assert_eq!(nids, ["10.0.0.1@tcp", "10.0.0.2@tcp"]);
    assert!(nets.nets[1]
        .nis
        .iter()
        .all(|n| n.health_stats.health_value == 1000 && n.status == lnet::config::NiStatus::Up));

    let peers: lnet::show::PeerShow =
        serde_json::from_value(api.read("/api/v1/peers").await).unwrap();
    assert_eq!(peers.peers.len(), 1);
    assert_eq!(peers.peers[0].primary_nid, bn[0]);
    assert!(peers.peers[0].multi_rail);
    assert_eq!(peers.peers[0].nis.len(), 2);

    let _: lnet::show::StatsShow = serde_json::from_value(api.read("/api/v1/stats").await).unwrap();
    let global: lnet::show::GlobalShow =
        serde_json::from_value(api.read("/api/v1/global").await).unwrap();
    assert_eq!(global.global.retry_count, Some(0));
    assert_eq!(global.global.health_sensitivity, Some(0));
    assert_eq!(global.global.transaction_timeout, Some(150));
    for q in ["local", "peer"] {
        let r: lnet::show::RecoveryShow =
            serde_json::from_value(api.read(&format!("/api/v1/recovery/{q}")).await).unwrap();
        assert!(r.nids.is_empty());
    }
    let counters: web::Counters =
        serde_json::from_value(api.read("/api/v1/counters").await).unwrap();
    assert!(counters.counters.values().all(|v| *v == 0), "{counters:?}");
    let page: web::EventPage = serde_json::from_value(api.read("/api/v1/events").await).unwrap();
    assert_eq!(page.missed, 0);

    // Fault rules: the LNet layer applies them over every LND, the fabric's too; none yet.
    let a = api
        .get(&format!("/api/v1/nis/{}/fault-rules", an[0]), Some(READER))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    let list: web::FaultRuleList = serde_json::from_str(&a.text).unwrap();
    assert_eq!(list.nid, an[0].to_string());
    assert!(list.rules.is_empty());

    // The admin token reads too.
    assert_eq!(
        api.get("/api/v1/nets", Some(ADMIN)).await.status,
        StatusCode::OK
    );
    // Probes and the OpenAPI document need no token.
    for path in ["/livez", "/readyz", "/api/v1/openapi.json"] {
        let a = api.get(path, None).await;
        assert_eq!(a.status, StatusCode::OK, "{path}");
        assert!(a.content_type.starts_with("application/json"));
    }
    assert_eq!(api.read("/readyz").await["status"], "ok");
    api.server.shutdown().await;
}

#[actix::test]
async fn the_documents_are_the_lnet_show_models_field_for_field() {
    let (a, _an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a.clone(), frozen(), Mode::Https).await;
    // Some traffic, so that counters are not all 0.
    let ping = api
        .call(
            Method::POST,
            "/api/v1/ping",
            Some(ADMIN),
            Some(json!({"nid": bn[0].to_string()})),
        )
        .await;
    assert_eq!(ping.status, StatusCode::OK, "{ping:?}");
    assert_eq!(
        api.read("/api/v1/nets").await,
        serde_json::to_value(a.net_show().await.unwrap()).unwrap()
    );
    assert_eq!(
        api.read("/api/v1/peers").await,
        serde_json::to_value(a.peer_show().await.unwrap()).unwrap()
    );
    assert_eq!(
        api.read("/api/v1/stats").await,
        serde_json::to_value(a.stats_show().await.unwrap()).unwrap()
    );
    assert_eq!(
        api.read("/api/v1/global").await,
        serde_json::to_value(lnet::show::GlobalShow::from_tunables(&frozen())).unwrap()
    );
    assert_eq!(
        api.read("/api/v1/recovery/peer").await,
        serde_json::to_value(
            a.recovery_show(lnet::recovery::RecoveryKind::PeerNi)
                .await
                .unwrap()
        )
        .unwrap()
    );
    api.server.shutdown().await;
}

#[actix::test]
async fn reads_without_a_valid_token_are_refused() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let paths = [
        "/api/v1/nets",
        "/api/v1/peers",
        "/api/v1/stats",
        "/api/v1/global",
        "/api/v1/recovery/local",
        "/api/v1/recovery/peer",
        "/api/v1/counters",
        "/api/v1/events",
        "/api/v1/events/stream",
        "/api/v1/nis/10.0.0.1@tcp/fault-rules",
        "/metrics",
    ];
    for path in paths {
        let none = api.get(path, None).await;
        assert_eq!(none.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(none.headers.contains_key("www-authenticate"));
        assert_eq!(none.error().0, None);
        let wrong = api.get(path, Some("not-a-token-0123456789")).await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{path}");
        let basic = api
            .client
            .get(api.url(path))
            .header("Authorization", format!("Basic {READER}"))
            .send()
            .await
            .unwrap();
        assert_eq!(basic.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    api.server.shutdown().await;
}

#[actix::test]
async fn changes_without_a_token_or_with_a_reader_token_are_refused_and_change_nothing() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    lower_health(&api, an[0], bn[0]).await;
    let before = observable(&api).await;
    for (method, path, b) in mutations(&an[0].to_string(), &bn[0].to_string()) {
        let none = api.call(method.clone(), &path, None, body(&b)).await;
        assert_eq!(none.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(none.error().0, None);
        let bad = api
            .call(
                method.clone(),
                &path,
                Some("no-such-token-012345"),
                body(&b),
            )
            .await;
        assert_eq!(bad.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        let reader = api
            .call(method.clone(), &path, Some(READER), body(&b))
            .await;
        assert_eq!(reader.status, StatusCode::FORBIDDEN, "{method} {path}");
        assert!(reader.error().1.contains("admin"), "{reader:?}");
    }
    assert_eq!(observable(&api).await, before);
    assert!(api.admin_actions().is_empty());
    api.server.shutdown().await;
}

#[actix::test]
async fn plain_http_is_read_only_unless_mutations_are_allowed() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a.clone(), frozen(), Mode::PlainReadOnly).await;
    lower_health(&api, an[0], bn[0]).await;
    // Reads work over plain HTTP with a token, and only with one.
    let _ = api.read("/api/v1/nets").await;
    assert_eq!(
        api.get("/api/v1/nets", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    let before = observable(&api).await;
    for (method, path, b) in mutations(&an[0].to_string(), &bn[0].to_string()) {
        for token in [Some(ADMIN), Some(READER), None] {
            let got = api.call(method.clone(), &path, token, body(&b)).await;
            assert_eq!(got.status, StatusCode::FORBIDDEN, "{method} {path}");
            assert!(got.error().1.contains("read-only"), "{got:?}");
        }
    }
    assert_eq!(observable(&api).await, before);
    assert!(api.admin_actions().is_empty());
    api.server.shutdown().await;

    // With mutations allowed, an admin token changes the node over plain HTTP.
    let api = serve(a, frozen(), Mode::PlainWithMutations).await;
    let got = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{}/health", an[0]),
            Some(ADMIN),
            Some(json!({})),
        )
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    assert_eq!(got.json()["health"], 1000);
    let reader = api
        .call(Method::PUT, "/api/v1/global", Some(READER), Some(json!({})))
        .await;
    assert_eq!(reader.status, StatusCode::FORBIDDEN);
    assert_eq!(
        api.admin_actions(),
        [("ops".to_owned(), "reset_local_ni_health".to_owned())]
    );
    api.server.shutdown().await;
}

#[actix::test]
async fn bad_input_gets_a_structured_error_and_changes_nothing() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    lower_health(&api, an[0], bn[0]).await;
    let before = observable(&api).await;
    let a0 = an[0].to_string();
    let b0 = bn[0].to_string();
    type Case<'a> = (Method, String, Option<Value>, StatusCode, Option<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        (
            Method::POST,
            "/api/v1/nis/not-a-nid/health".into(),
            Some(json!({})),
            StatusCode::BAD_REQUEST,
            Some("nid"),
        ),
        (
            Method::POST,
            "/api/v1/nis/10.9.9.9@tcp/health".into(),
            Some(json!({})),
            StatusCode::NOT_FOUND,
            Some("nid"),
        ),
        (
            Method::POST,
            format!("/api/v1/peer-nis/{a0}/health"),
            Some(json!({})),
            StatusCode::NOT_FOUND,
            Some("nid"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/health"),
            Some(json!({"value": 1001})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("value"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/health"),
            Some(json!({"value": -1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("value"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/health"),
            Some(json!({"value": "full"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("value"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/health"),
            Some(json!({"health": 5})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("health"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"retry_count": 151})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("retry_count"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"transaction_timeout": 0})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("transaction_timeout"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"health_sensitivity": 1001})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("health_sensitivity"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"response_tracking": 4})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("response_tracking"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"discovery": 2, "retry_count": 1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("discovery"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"numa_range": -5})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("numa_range"),
        ),
        (
            Method::PUT,
            "/api/v1/global".into(),
            Some(json!({"lnd_timeout": 5})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("lnd_timeout"),
        ),
        (
            Method::POST,
            "/api/v1/peers".into(),
            Some(json!({"primary_nid": a0})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("nids"),
        ),
        (
            Method::POST,
            "/api/v1/peers".into(),
            Some(json!({"primary_nid": "10.0.5.1@tcp", "nids": ["x"]})),
            StatusCode::BAD_REQUEST,
            Some("nids[0]"),
        ),
        (
            Method::POST,
            "/api/v1/peers".into(),
            Some(json!({"nids": [b0]})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("primary_nid"),
        ),
        (
            Method::POST,
            "/api/v1/ping".into(),
            Some(json!({"nid": b0, "timeout_ms": 0})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("timeout_ms"),
        ),
        (
            Method::POST,
            "/api/v1/ping".into(),
            Some(json!({"nid": b0, "timeout_ms": 3_600_000})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("timeout_ms"),
        ),
        (
            Method::POST,
            "/api/v1/discover".into(),
            Some(json!({"nid": "10.0.1@tcp"})),
            StatusCode::BAD_REQUEST,
            Some("nid"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/fault-rules"),
            Some(
                json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all", "local_nid": b0}),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("local_nid"),
        ),
        (
            Method::POST,
            "/api/v1/nis/10.9.9.9@tcp/fault-rules".into(),
            Some(json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all"})),
            StatusCode::NOT_FOUND,
            Some("nid"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/fault-rules"),
            Some(json!({"kind": "drop", "source": "*", "dest": "*", "trigger": {"rate": 0}})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("trigger"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/fault-rules"),
            Some(
                json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all", "health_error": "ok"}),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("health_error"),
        ),
        (
            Method::POST,
            format!("/api/v1/nis/{a0}/fault-rules"),
            Some(json!({"kind": "drop", "source": "*@nonet", "dest": "*", "trigger": "all"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("source"),
        ),
        (
            Method::DELETE,
            format!("/api/v1/nis/{a0}/fault-rules/abc"),
            None,
            StatusCode::BAD_REQUEST,
            Some("path"),
        ),
        (
            Method::GET,
            "/api/v1/events?limit=0".into(),
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("limit"),
        ),
        (
            Method::GET,
            "/api/v1/events?after=abc".into(),
            None,
            StatusCode::BAD_REQUEST,
            Some("after"),
        ),
        (
            Method::GET,
            "/api/v1/events?colour=red".into(),
            None,
            StatusCode::BAD_REQUEST,
            Some("colour"),
        ),
        (
            Method::GET,
            "/api/v1/no-such-thing".into(),
            None,
            StatusCode::NOT_FOUND,
            None,
        ),
    ];
    for (method, path, b, status, field) in cases {
        let got = api
            .call(method.clone(), &path, Some(ADMIN), b.clone())
            .await;
        assert_eq!(got.status, status, "{method} {path} {b:?}: {got:?}");
        let (f, message) = got.error();
        assert_eq!(f.as_deref(), field, "{method} {path} {b:?}: {message}");
        assert!(!message.is_empty());
    }
    // Not JSON, and no JSON content type.
    let url = api.url(&format!("/api/v1/nis/{a0}/health"));
    let garbage = api
        .client
        .post(&url)
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body("{\"value\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), StatusCode::BAD_REQUEST);
    let text = api
        .client
        .post(&url)
        .bearer_auth(ADMIN)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let e: web::ErrorBody = text.json().await.unwrap();
    assert!(e.error.message.contains("JSON"));
    let stream = api
        .client
        .get(api.url("/api/v1/events/stream"))
        .bearer_auth(READER)
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::BAD_REQUEST);
    let wrong_method = api
        .call(Method::PATCH, "/api/v1/nets", Some(ADMIN), None)
        .await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);

    assert_eq!(observable(&api).await, before);
    assert!(api.admin_actions().is_empty());
    api.server.shutdown().await;
}

#[actix::test]
async fn admin_changes_apply_and_are_recorded_with_the_token_name() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a.clone(), frozen(), Mode::Https).await;

    // Tunables: all keys checked together, applied in lnetctl import's order.
    let got = api
        .call(
            Method::PUT,
            "/api/v1/global",
            Some(ADMIN),
            Some(json!({"transaction_timeout": 30, "retry_count": 3, "health_sensitivity": 50})),
        )
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    let g = api.read("/api/v1/global").await;
    assert_eq!(g["global"]["transaction_timeout"], 30);
    assert_eq!(g["global"]["retry_count"], 3);
    assert_eq!(g["global"]["health_sensitivity"], 50);
    assert_eq!(got.json(), g);
    let metrics = api.get("/metrics", Some(READER)).await.text;
    assert!(
        metrics.contains("lustre_health_sensitivity 50"),
        "{metrics}"
    );

    // A peer.
    let got = api
        .call(
            Method::POST,
            "/api/v1/peers",
            Some(ADMIN),
            Some(json!({"primary_nid": "10.0.5.1@tcp", "nids": ["10.0.5.2@tcp"], "multi_rail": false})),
        )
        .await;
    assert_eq!(got.status, StatusCode::CREATED, "{got:?}");
    let peer: lnet::show::ShowPeer = serde_json::from_str(&got.text).unwrap();
    assert_eq!(peer.primary_nid.to_string(), "10.0.5.1@tcp");
    assert!(!peer.multi_rail);
    let nids: Vec<String> = peer.nis.iter().map(|n| n.nid.to_string()).collect();
    assert_eq!(nids, ["10.0.5.1@tcp", "10.0.5.2@tcp"]);
    let peers = api.read("/api/v1/peers").await;
    let primaries: BTreeSet<String> = peers["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["primary_nid"].as_str().unwrap().to_owned())
        .collect();
    assert!(primaries.contains("10.0.5.1@tcp"));

    // Ping (a reader may) and discovery of the peer node.
    let got = api
        .call(
            Method::POST,
            "/api/v1/ping",
            Some(READER),
            Some(json!({"nid": bn[0].to_string(), "timeout_ms": 5000})),
        )
        .await;
    let ping: web::PingResult = serde_json::from_str(&got.text).unwrap();
    assert!(ping.ok, "{ping:?}");
    // A NID nobody answers for: lnetctl's errno and the status by name.
    let got = api
        .call(
            Method::POST,
            "/api/v1/ping",
            Some(READER),
            Some(json!({"nid": "10.0.1.99@tcp", "timeout_ms": 1000})),
        )
        .await;
    let failed: web::PingResult = serde_json::from_str(&got.text).unwrap();
    assert!(!failed.ok, "{failed:?}");
    let error = failed.error.clone().unwrap();
    assert!(
        error.starts_with("failed to ping 10.0.1.99@tcp: "),
        "{failed:?}"
    );
    assert!(
        !error.contains('{') && !error.contains("Failed"),
        "{failed:?}"
    );
    let status = failed.status.clone().unwrap();
    assert!(error.ends_with(&status), "{failed:?}");
    assert!(matches!(failed.errno, Some(-110 | -113 | -5)), "{failed:?}");
    let listed: Vec<&str> = ping.peer_nis.iter().map(|n| n.nid.as_str()).collect();
    assert_eq!(listed, ["10.0.1.1@tcp", "10.0.1.2@tcp"]);
    assert!(ping.peer_nis.iter().all(|n| n.status == "up"));
    let got = api
        .call(
            Method::POST,
            "/api/v1/discover",
            Some(ADMIN),
            Some(json!({"nid": bn[1].to_string()})),
        )
        .await;
    let disc: web::PingResult = serde_json::from_str(&got.text).unwrap();
    assert!(disc.ok, "{disc:?}");
    assert_eq!(disc.primary_nid.as_deref(), Some("10.0.1.1@tcp"));
    assert_eq!(disc.multi_rail, Some(true));
    assert_eq!(disc.pushed, Some(true));
    // A NID nobody has: a result, not an error.
    let got = api
        .call(
            Method::POST,
            "/api/v1/ping",
            Some(ADMIN),
            Some(json!({"nid": "10.0.9.9@tcp", "timeout_ms": 2000})),
        )
        .await;
    assert_eq!(got.status, StatusCode::OK);
    let miss: web::PingResult = serde_json::from_str(&got.text).unwrap();
    assert!(!miss.ok && miss.error.is_some(), "{miss:?}");

    // Health: a given value, then full health.
    let got = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{}/health", an[1]),
            Some(ADMIN),
            Some(json!({"value": 400})),
        )
        .await;
    let r: web::HealthResetResult = serde_json::from_str(&got.text).unwrap();
    assert_eq!((r.health, r.in_recovery), (400, true));
    assert_eq!(
        api.read("/api/v1/recovery/local").await["nids"],
        json!([an[1].to_string()])
    );
    let got = api
        .call(
            Method::POST,
            &format!("/api/v1/nis/{}/health", an[1]),
            Some(ADMIN),
            Some(json!({})),
        )
        .await;
    let r: web::HealthResetResult = serde_json::from_str(&got.text).unwrap();
    assert_eq!((r.health, r.in_recovery), (1000, false));
    assert_eq!(api.read("/api/v1/recovery/local").await["nids"], json!([]));

    // Every change is an admin event naming the token, in the ring and in the event log.
    let actions = [
        ("ops", "set_global"),
        ("ops", "add_peer"),
        ("grafana", "ping"),
        ("grafana", "ping"),
        ("ops", "discover"),
        ("ops", "ping"),
        ("ops", "reset_local_ni_health"),
        ("ops", "reset_local_ni_health"),
    ];
    let events = api.admin_events().await;
    let got: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["event"]["token"].as_str().unwrap(),
                e["event"]["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, actions.to_vec());
    let logged: Vec<(String, String)> = actions
        .iter()
        .map(|(t, a)| ((*t).to_owned(), (*a).to_owned()))
        .collect();
    assert_eq!(api.admin_actions(), logged);
    // The store's log saw the node's events too, in order.
    let logged = api.logged();
    assert!(logged.windows(2).all(|w| w[1].id > w[0].id));
    assert!(logged.iter().any(|e| matches!(
        e.event,
        store::Event::NiHealth {
            after: 400,
            cause: None,
            ..
        }
    )));
    api.server.shutdown().await;
}

#[actix::test]
async fn events_page_by_id_and_the_stream_resumes_from_last_event_id() {
    let (a, an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let mut live = api.stream(None, "").await;
    for v in [900, 800, 1000] {
        let got = api
            .call(
                Method::POST,
                &format!("/api/v1/nis/{}/health", an[0]),
                Some(ADMIN),
                Some(json!({"value": v})),
            )
            .await;
        assert_eq!(got.status, StatusCode::OK);
    }
    // The live stream sees the admin events and the health events, each with its id.
    let first_admin = live.until(|r| r.event == "admin").await;
    let e = first_admin.json();
    assert_eq!(e["id"].as_u64(), first_admin.id);
    assert_eq!(e["event"]["token"], "ops");
    assert_eq!(e["event"]["detail"], "health set to 900");
    let health = live
        .until(|r| r.event == "health" && r.json()["event"]["after"] == 1000)
        .await;
    assert_eq!(health.json()["event"]["cause"], Value::Null);
    assert_eq!(health.json()["event"]["nid"], an[0].to_string());

    // Paging: after and limit.
    let all = api.read("/api/v1/events?after=0&limit=1000").await;
    let ids: Vec<u64> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert!(ids.len() >= 6, "{ids:?}");
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    let page = api.read("/api/v1/events?after=2&limit=2").await;
    let got: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [3, 4]);
    assert_eq!(page["next_after"], 4);
    assert_eq!(page["last_id"].as_u64().unwrap(), *ids.last().unwrap());

    // Paging back: the newest page first, then each page's `next_before`.
    let last = *ids.last().unwrap();
    let newest = api
        .read("/api/v1/events?before=9007199254740991&limit=2")
        .await;
    let got: Vec<u64> = newest["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [last - 1, last]);
    assert_eq!(newest["next_before"], last - 1);
    assert_eq!(newest["missed"], 0);
    assert_eq!(newest["run_first_id"], 1);
    assert!(newest["now_ms"].is_u64());
    let older = api
        .read(&format!("/api/v1/events?before={}&limit=2", last - 1))
        .await;
    let got: Vec<u64> = older["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [last - 3, last - 2]);
    let oldest = api.read("/api/v1/events?before=2&limit=10").await;
    assert_eq!(oldest["events"].as_array().unwrap().len(), 1);
    assert_eq!(oldest["next_before"], 1);
    assert_eq!(oldest["first_available_id"], 1);
    let both = api
        .call(
            Method::GET,
            "/api/v1/events?after=1&before=3",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);
    assert_eq!(both.json()["error"]["field"], "before");

    // Resuming: Last-Event-ID, then ?after=, start right after the id given.
    let mut resumed = api.stream(Some(2), "").await;
    assert_eq!(resumed.next().await.unwrap().id, Some(3));
    let mut resumed = api.stream(None, "?after=4").await;
    assert_eq!(resumed.next().await.unwrap().id, Some(5));
    api.server.shutdown().await;
    // The streams end when the server stops.
    assert!(tokio::time::timeout(support::WAIT, async {
        while live.next().await.is_some() {}
    })
    .await
    .is_ok());
}

#[actix::test]
async fn metrics_are_prometheus_text_with_the_lustre_exporter_names() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let ping = api
        .call(
            Method::POST,
            "/api/v1/ping",
            Some(ADMIN),
            Some(json!({"nid": bn[0].to_string()})),
        )
        .await;
    assert_eq!(ping.status, StatusCode::OK);
    // Discovery pushes A's ping info to B (a PUT with a payload); A1's link goes down.
    let discover = api
        .call(
            Method::POST,
            "/api/v1/discover",
            Some(ADMIN),
            Some(json!({"nid": bn[0].to_string()})),
        )
        .await;
    assert_eq!(discover.status, StatusCode::OK);
    let pushed: web::PingResult = serde_json::from_str(&discover.text).unwrap();
    assert_eq!(pushed.pushed, Some(true), "{pushed:?}");
    api.node.set_ni_link(an[1], false).await.unwrap();
    api.call(
        Method::POST,
        &format!("/api/v1/peer-nis/{}/health", bn[0]),
        Some(ADMIN),
        Some(json!({"value": 250})),
    )
    .await;
    let got = api.get("/metrics", Some(READER)).await;
    assert_eq!(got.status, StatusCode::OK);
    assert!(got.content_type.starts_with("text/plain; version=0.0.4"));
    let lines = got.text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
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
    };
    let a0 = an[0].to_string();
    // B0 answered the ping: heard from, so it is on the peer NI recovery queue.
    let b0 = bn[0].to_string();
    assert_eq!(value("lustre_lnet_ni_health", &[("nid", &a0)]), 1000.0);
    assert_eq!(value("lustre_health_value", &[("nid", "0@lo")]), 0.0);
    assert_eq!(value("lustre_lnet_ni_up", &[("nid", &a0)]), 1.0);
    // Advertised down for its link: down as `net show` prints it.
    assert_eq!(
        value("lustre_lnet_ni_up", &[("nid", &an[1].to_string())]),
        0.0
    );
    // Bytes: the ping reply and the push are payloads.
    assert!(value("lustre_send_bytes_total", &[]) > 0.0);
    assert!(value("lustre_receive_bytes_total", &[]) > 0.0);
    assert!(value("lustre_send_count_total", &[("nid", &a0)]) >= 1.0);
    assert!(value("lustre_receive_count_total", &[("nid", &a0)]) >= 1.0);
    assert_eq!(value("lustre_drop_count_total", &[("nid", &a0)]), 0.0);
    assert_eq!(
        value("lustre_lnet_ni_health_timeouts_total", &[("nid", &a0)]),
        0.0
    );
    assert_eq!(value("lustre_health_sensitivity", &[]), 0.0);
    assert_eq!(
        value(
            "lnet_router_peer_ni_health",
            &[("nid", &b0), ("primary_nid", "10.0.1.1@tcp")]
        ),
        250.0
    );
    assert_eq!(
        value("lnet_router_recovery_queue_length", &[("queue", "peer")]),
        1.0
    );
    assert_eq!(
        value("lnet_router_recovery_queue_length", &[("queue", "local")]),
        0.0
    );
    assert_eq!(value("lnet_router_resend_count_total", &[]), 0.0);
    // Counters are typed as counters, health values as gauges.
    let types: std::collections::HashMap<&str, &str> = got
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    assert_eq!(types["lustre_send_count_total"], "counter");
    assert_eq!(types["lustre_lnet_ni_health"], "gauge");
    assert_eq!(types["lnet_router_recovery_queue_length"], "gauge");
    api.server.shutdown().await;
}

#[actix::test]
async fn the_openapi_document_describes_every_endpoint_and_schema() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let doc = api.read("/api/v1/openapi.json").await;
    assert_eq!(
        doc,
        serde_json::from_str::<Value>(&web::openapi_document()).unwrap()
    );
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let ops: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let want: BTreeSet<(String, String)> = [
        ("GET", "/api/v1/nets"),
        ("GET", "/api/v1/export"),
        ("POST", "/api/v1/nets"),
        ("DELETE", "/api/v1/nis/{nid}"),
        ("POST", "/api/v1/nis/{nid}/conns-per-peer"),
        ("POST", "/api/v1/nis/conns-per-peer"),
        ("POST", "/api/v1/nets/{net}/lnd-timeout"),
        ("GET", "/api/v1/peers"),
        ("POST", "/api/v1/peers"),
        ("GET", "/api/v1/stats"),
        ("GET", "/api/v1/global"),
        ("PUT", "/api/v1/global"),
        ("GET", "/api/v1/recovery/local"),
        ("GET", "/api/v1/recovery/peer"),
        ("GET", "/api/v1/counters"),
        ("GET", "/api/v1/events"),
        ("GET", "/api/v1/events/stream"),
        ("POST", "/api/v1/nis/{nid}/health"),
        ("POST", "/api/v1/peer-nis/{nid}/health"),
        ("POST", "/api/v1/nis/health"),
        ("POST", "/api/v1/peer-nis/health"),
        ("PUT", "/api/v1/routing"),
        ("POST", "/api/v1/stats/reset"),
        ("DELETE", "/api/v1/peers/{primary_nid}"),
        ("DELETE", "/api/v1/peers/{primary_nid}/nids/{nid}"),
        ("POST", "/api/v1/ping"),
        ("POST", "/api/v1/discover"),
        ("GET", "/api/v1/nis/{nid}/fault-rules"),
        ("POST", "/api/v1/nis/{nid}/fault-rules"),
        ("DELETE", "/api/v1/nis/{nid}/fault-rules/{id}"),
        ("GET", "/api/v1/fault-rules"),
        ("POST", "/api/v1/fault-rules"),
        ("DELETE", "/api/v1/fault-rules/{id}"),
        ("POST", "/api/v1/fault-rules/reset"),
        ("GET", "/api/v1/routes"),
        ("POST", "/api/v1/routes"),
        ("DELETE", "/api/v1/routes/{net}/{gateway}"),
        ("GET", "/api/v1/routing"),
        ("POST", "/api/v1/drain"),
        ("PUT", "/api/v1/buffers"),
        ("GET", "/api/v1/peer-nis/{nid}/debug"),
        ("GET", "/api/v1/udsp"),
        ("POST", "/api/v1/udsp"),
        ("DELETE", "/api/v1/udsp"),
        ("DELETE", "/api/v1/udsp/{idx}"),
        ("GET", "/api/v1/tokens"),
        ("POST", "/api/v1/tokens"),
        ("DELETE", "/api/v1/tokens/{name}"),
        ("GET", "/api/v1/whoami"),
        ("GET", "/metrics"),
        ("GET", "/livez"),
        ("GET", "/readyz"),
        ("GET", "/api/v1/openapi.json"),
    ]
    .iter()
    .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
    .collect();
    assert_eq!(ops, want);
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for s in [
        "NetShow",
        "ShowNi",
        "NiHealthStats",
        "PeerShow",
        "ShowPeerNi",
        "PeerNiHealthStats",
        "StatsShow",
        "GlobalShow",
        "Global",
        "GlobalUpdate",
        "BuffersSet",
        "RecoveryShow",
        "Counters",
        "EventPage",
        "ApiEvent",
        "EventBody",
        "HealthReset",
        "HealthResetResult",
        "PeerAdd",
        "NiAdd",
        "LndSetting",
        "LndSettingChanged",
        "NiChanged",
        "PingRequest",
        "PingResult",
        "FaultRule",
        "FaultTrigger",
        "FaultRuleDoc",
        "FaultRuleList",
        "PeerNiDebug",
        "UdspAdd",
        "UdspList",
        "UdspRuleDoc",
        "UdspDeleted",
        "TokenCreate",
        "TokenCreated",
        "TokenList",
        "TokenEntry",
        "WhoAmI",
        "ErrorBody",
        "ErrorDetail",
        "Probe",
    ] {
        assert!(schemas.contains_key(s), "schema {s} missing");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // Every operation documents its answers; every change documents 401 and 403 (ping,
    // which any token may, 401).
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            assert!(
                responses.contains_key("200")
                    || responses.contains_key("201")
                    || responses.contains_key("204"),
                "{method} {path}"
            );
            if method != "get" {
                assert!(responses.contains_key("401"), "{method} {path}");
                assert!(
                    path == "/api/v1/ping" || responses.contains_key("403"),
                    "{method} {path}"
                );
            }
        }
    }
    api.server.shutdown().await;
}

#[actix::test]
async fn routes_are_added_listed_and_deleted_with_lnet_checks() {
    let (a, _an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let b0 = bn[0].to_string();
    assert_eq!(api.read("/api/v1/routes").await, json!({"routes": []}));
    let got = api
        .call(
            Method::POST,
            "/api/v1/routes",
            Some(ADMIN),
            Some(json!({"net": "o2ib1", "gateway": b0, "hop": 1, "priority": 2})),
        )
        .await;
    assert_eq!(got.status, StatusCode::CREATED, "{got:?}");
    let route: web::RouteDoc = serde_json::from_str(&got.text).unwrap();
    assert_eq!(
        (
            route.net.as_str(),
            route.gateway.as_str(),
            route.hop,
            route.priority
        ),
        ("o2ib1", b0.as_str(), 1, 2)
    );
    let list: web::RouteList = serde_json::from_value(api.read("/api/v1/routes").await).unwrap();
    assert_eq!(list.routes.len(), 1);
    assert_eq!(list.routes[0].net, "o2ib1");

    type Case<'a> = (Value, StatusCode, &'a str);
    let refused: Vec<Case<'_>> = vec![
        (
            json!({"net": "o2ib1", "gateway": b0}),
            StatusCode::CONFLICT,
            "gateway",
        ),
        (
            json!({"net": "tcp", "gateway": b0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        (
            json!({"net": "o2ib2", "gateway": "10.9.0.1@o2ib"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "gateway",
        ),
        (
            json!({"net": "o2ib2", "gateway": b0, "hop": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "hop",
        ),
        (
            json!({"net": "no such net", "gateway": b0}),
            StatusCode::BAD_REQUEST,
            "net",
        ),
        (
            json!({"net": "o2ib2", "gateway": "gw"}),
            StatusCode::BAD_REQUEST,
            "gateway",
        ),
    ];
    for (body, status, field) in refused {
        let got = api
            .call(
                Method::POST,
                "/api/v1/routes",
                Some(ADMIN),
                Some(body.clone()),
            )
            .await;
        assert_eq!(got.status, status, "{body}: {got:?}");
        assert_eq!(got.error().0.as_deref(), Some(field), "{body}");
    }
    let routing: web::RoutingDoc =
        serde_json::from_value(api.read("/api/v1/routing").await).unwrap();
    assert_eq!(
        routing.buffers.tiny,
        routing
            .cpts
            .iter()
            .map(|c| u64::from(c.tiny.nbuffers))
            .sum::<u64>()
    );
    let path = format!("/api/v1/routes/o2ib1/{b0}");
    let got = api.call(Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(got.status, StatusCode::NO_CONTENT, "{got:?}");
    let again = api.call(Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(api.read("/api/v1/routes").await, json!({"routes": []}));
    let actions: Vec<String> = api.admin_actions().into_iter().map(|(_, a)| a).collect();
    assert_eq!(actions, ["add_route", "del_route"]);
    api.server.shutdown().await;
}

#[actix::test]
async fn a_reader_that_fell_behind_the_ring_is_told_how_many_it_missed() {
    let (a, _an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::Https, |c| {
        c.event_capacity = 4;
        c.public_metrics = true;
    })
    .await;
    for v in [100, 200, 300, 400, 500] {
        let got = api
            .call(
                Method::POST,
                &format!("/api/v1/peer-nis/{}/health", bn[0]),
                Some(ADMIN),
                Some(json!({"value": v})),
            )
            .await;
        assert_eq!(got.status, StatusCode::OK);
    }
    // Each reset is a health event and an admin event (the peer NI was never heard from,
    // so it does not join recovery): 10 recorded, the last 4 kept.
    let page: web::EventPage =
        serde_json::from_value(api.read("/api/v1/events?after=0").await).unwrap();
    assert_eq!(page.last_id, 10);
    assert_eq!(page.first_available_id, 7);
    assert_eq!(page.missed, 6);
    assert_eq!(
        page.events.iter().map(|e| e.id).collect::<Vec<_>>(),
        [7, 8, 9, 10]
    );
    let mut sse = api.stream(Some(1), "").await;
    let lagged = sse.next().await.unwrap();
    assert_eq!(lagged.event, "lagged");
    assert_eq!(lagged.id, None);
    assert_eq!(lagged.json(), json!({"missed": 5}));
    assert_eq!(sse.next().await.unwrap().id, Some(7));
    // Metrics made public: no token needed.
    let m = api.get("/metrics", None).await;
    assert_eq!(m.status, StatusCode::OK);
    assert!(
        m.text.contains("lnet_router_last_event_id 10"),
        "{}",
        m.text
    );
    api.server.shutdown().await;
}

#[actix::test]
async fn drain_takes_the_node_out_of_service_and_set_routing_1_brings_it_back() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a.clone(), frozen(), Mode::Https).await;
    let routing = api.read("/api/v1/routing").await;
    assert_eq!(routing["draining"], false, "{routing}");

    let got = api
        .call(Method::POST, "/api/v1/drain", Some(ADMIN), None)
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    let doc: web::DrainDoc = serde_json::from_str(&got.text).unwrap();
    assert_eq!(
        doc,
        web::DrainDoc {
            draining: true,
            forwarding: 0
        }
    );
    let routing: web::RoutingDoc =
        serde_json::from_value(api.read("/api/v1/routing").await).unwrap();
    assert!(routing.draining, "{routing:?}");
    assert!(routing.nets.iter().all(|n| !n.up), "{routing:?}");
    // The ping info says so.
    let info = a.ping_info().await.unwrap();
    assert!(info.features.contains(lnet::Features::RTE_DISABLED));
    assert!(info.statuses().all(|(_, s)| !s.is_up()), "{info:?}");
    let m = api.get("/metrics", Some(READER)).await;
    assert!(m.text.contains("\nlnet_router_draining 1\n"), "{}", m.text);
    // Draining again changes nothing; each request is an admin event.
    let again = api
        .call(Method::POST, "/api/v1/drain", Some(ADMIN), None)
        .await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");

    let back = api
        .call(
            Method::PUT,
            "/api/v1/routing",
            Some(ADMIN),
            Some(json!({"enable": 1})),
        )
        .await;
    assert_eq!(back.status, StatusCode::OK, "{back:?}");
    let routing: web::RoutingDoc = serde_json::from_str(&back.text).unwrap();
    assert!(!routing.draining, "{routing:?}");
    let info = a.ping_info().await.unwrap();
    assert!(info.statuses().all(|(_, s)| s.is_up()), "{info:?}");
    let m = api.get("/metrics", Some(READER)).await;
    assert!(m.text.contains("\nlnet_router_draining 0\n"), "{}", m.text);

    let events = api.admin_events().await;
    let actions: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["event"]["action"].as_str().unwrap(),
                e["event"]["detail"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("drain", "draining; 0 forwarded messages under way"),
            ("drain", "draining; 0 forwarded messages under way"),
            ("set_routing", "routing=1; drain ended"),
        ]
    );
    api.server.shutdown().await;
}

#[actix::test]
async fn a_fault_rule_of_every_ni_applies_at_each_and_reset_zeroes_its_counters() {
    let (a, an, _b, bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a.clone(), frozen(), Mode::Https).await;
    let ping = |nid: lnet::Nid| {
        let api = &api;
        async move {
            let r = api
                .call(
                    Method::POST,
                    "/api/v1/ping",
                    Some(ADMIN),
                    Some(json!({"nid": nid.to_string(), "timeout_ms": 300})),
                )
                .await;
            serde_json::from_str::<Value>(&r.text).unwrap()["ok"] == json!(true)
        }
    };
    assert!(ping(bn[0]).await);
    // No local_nid: every NI drops what it receives.
    let added = api
        .call(
            Method::POST,
            "/api/v1/fault-rules",
            Some(ADMIN),
            Some(json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all"})),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{added:?}");
    let doc: web::FaultRuleDoc = serde_json::from_str(&added.text).unwrap();
    assert_eq!(doc.rule.local_nid, None);
    for nid in &bn {
        assert!(!ping(*nid).await, "the reply through {nid} is dropped");
    }
    let all: web::FaultRules =
        serde_json::from_value(api.read("/api/v1/fault-rules").await).unwrap();
    assert_eq!(all.rules.len(), 1);
    assert!(all.rules[0].fired >= 2, "{all:?}");
    // Not a rule of one NI.
    let one: web::FaultRuleList = serde_json::from_value(
        api.read(&format!("/api/v1/nis/{}/fault-rules", an[0]))
            .await,
    )
    .unwrap();
    assert!(one.rules.is_empty(), "{one:?}");

    // reset: the drop rules' counters are zeroed; a delay reset touches none of them.
    let reset = |kind: &'static str| {
        let api = &api;
        async move {
            let r = api
                .call(
                    Method::POST,
                    "/api/v1/fault-rules/reset",
                    Some(ADMIN),
                    Some(json!({ "kind": kind })),
                )
                .await;
            assert_eq!(r.status, StatusCode::OK, "{r:?}");
            serde_json::from_str::<web::FaultResetDoc>(&r.text)
                .unwrap()
                .reset
        }
    };
    assert_eq!(reset("delay").await, 0);
    assert_eq!(reset("drop").await, 1);
    let all: web::FaultRules =
        serde_json::from_value(api.read("/api/v1/fault-rules").await).unwrap();
    assert_eq!((all.rules[0].matched, all.rules[0].fired), (0, 0));

    // A local_nid that is no local NI is refused; the rule is deleted by its id.
    let bad = api
        .call(
            Method::POST,
            "/api/v1/fault-rules",
            Some(ADMIN),
            Some(
                json!({"kind": "drop", "source": "*", "dest": "*", "trigger": "all",
                        "local_nid": "10.9.9.9@tcp"}),
            ),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad:?}");
    let path = format!("/api/v1/fault-rules/{}", doc.id);
    let gone = api.call(Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{gone:?}");
    let again = api.call(Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{again:?}");
    assert!(ping(bn[0]).await);
    let actions: Vec<String> = api
        .admin_events()
        .await
        .iter()
        .map(|e| e["event"]["action"].as_str().unwrap().to_owned())
        .filter(|a| a != "ping")
        .collect();
    assert_eq!(
        actions,
        [
            "add_fault_rule",
            "reset_fault_rules",
            "reset_fault_rules",
            "remove_fault_rule"
        ]
    );
    api.server.shutdown().await;
}
