//! Run-time configuration through the API over HTTPS: `POST /peers` creates a peer or adds
//! NIDs to it (refusing a NID of another configured peer), the UDSP rules
//! (`/udsp`) reach the node's selection, and `GET /peer-nis/{nid}/debug`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::{fabric_pair, frozen, serve, Mode, ADMIN, READER};

#[actix::test]
async fn a_peer_add_creates_then_adds_nids_and_refuses_a_taken_nid() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let add = |body: serde_json::Value| {
        let api = &api;
        async move {
            api.call(Method::POST, "/api/v1/peers", Some(ADMIN), Some(body))
                .await
        }
    };
    let got = add(json!({"primary_nid": "10.0.7.1@tcp", "nids": ["10.0.7.2@tcp"]})).await;
    assert_eq!(got.status, StatusCode::CREATED, "{got:?}");
    let got = add(json!({"primary_nid": "10.0.7.1@tcp", "nids": ["10.0.8.1@tcp1"]})).await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    let peer: lnet::show::ShowPeer = serde_json::from_str(&got.text).unwrap();
    let nids: Vec<String> = peer.nis.iter().map(|n| n.nid.to_string()).collect();
    assert_eq!(nids, ["10.0.7.1@tcp", "10.0.7.2@tcp", "10.0.8.1@tcp1"]);
    // Another configured peer may not take one of its NIDs.
    let got = add(json!({"primary_nid": "10.0.7.9@tcp", "nids": ["10.0.7.2@tcp"]})).await;
    assert_eq!(got.status, StatusCode::CONFLICT, "{got:?}");
    assert_eq!(got.error().0.as_deref(), Some("nids"));
    // Nor is its Multi-Rail flag changed by adding NIDs.
    let got = add(json!({"primary_nid": "10.0.7.1@tcp", "multi_rail": false})).await;
    assert_eq!(got.status, StatusCode::CONFLICT, "{got:?}");
    assert_eq!(got.error().0.as_deref(), Some("multi_rail"));
    let peers = api.node.peers().await.unwrap();
    assert!(
        !peers
            .iter()
            .any(|p| p.primary.to_string() == "10.0.7.9@tcp"),
        "nothing refused was added: {peers:?}"
    );
    let ours = peers
        .iter()
        .find(|p| p.primary.to_string() == "10.0.7.1@tcp")
        .unwrap();
    assert!(ours.multi_rail && ours.nids.len() == 3, "{ours:?}");

    // debug peer of one of its NIDs; of an unknown NID 404.
    let got = api
        .get("/api/v1/peer-nis/10.0.7.2@tcp/debug", Some(READER))
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    let d: web::PeerNiDebug = serde_json::from_str(&got.text).unwrap();
    assert_eq!(d.primary_nid, "10.0.7.1@tcp");
    assert_eq!(d.aliveness, "NA");
    assert!(d.line().starts_with("10.0.7.2@tcp             "), "{d:?}");
    let got = api
        .get("/api/v1/peer-nis/10.0.7.77@tcp/debug", Some(READER))
        .await;
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    api.server.shutdown().await;
}

#[actix::test]
async fn udsp_rules_are_added_shown_and_deleted_on_the_running_node() {
    let (a, an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let net = an[0].net;
    assert_eq!(api.read("/api/v1/udsp").await, json!({"rules": []}));
    let got = api
        .call(
            Method::POST,
            "/api/v1/udsp",
            Some(ADMIN),
            Some(json!({"src": net.to_string(), "priority": 3})),
        )
        .await;
    assert_eq!(got.status, StatusCode::CREATED, "{got:?}");
    assert_eq!(api.node.udsp().await.unwrap().local_net_priority(net), 3);
    // The same src again: its priority replaced in place, no second rule.
    let got = api
        .call(
            Method::POST,
            "/api/v1/udsp",
            Some(ADMIN),
            Some(json!({"src": net.to_string(), "priority": 1})),
        )
        .await;
    assert_eq!(got.status, StatusCode::CREATED, "{got:?}");
    let list: web::UdspList = serde_json::from_str(&got.text).unwrap();
    assert_eq!(list.rules.len(), 1, "{list:?}");
    assert_eq!(api.node.udsp().await.unwrap().local_net_priority(net), 1);
    // A dst rule without a priority gets 0, inserted first.
    let got = api
        .call(
            Method::POST,
            "/api/v1/udsp",
            Some(ADMIN),
            Some(json!({"dst": "10.0.9.[1-3]@tcp", "idx": 0})),
        )
        .await;
    let list: web::UdspList = serde_json::from_str(&got.text).unwrap();
    assert_eq!(
        (list.rules[0].idx, list.rules[0].priority, list.rules[1].idx),
        (0, Some(0), 1)
    );
    // Bad ones: 422 naming the field, nothing changed.
    for (body, field) in [
        (json!({"dst": "10.0.0.[9-3]@tcp"}), "dst"),
        (json!({"src": "tcp", "rte": "10.0.0.1@tcp"}), "rule"),
        (
            json!({"src": "tcp", "dst": "tcp1", "priority": 2}),
            "priority",
        ),
    ] {
        let got = api
            .call(Method::POST, "/api/v1/udsp", Some(ADMIN), Some(body))
            .await;
        assert_eq!(got.status, StatusCode::UNPROCESSABLE_ENTITY, "{got:?}");
        assert_eq!(got.error().0.as_deref(), Some(field));
    }
    assert_eq!(api.node.udsp().await.unwrap().source_rules().len(), 2);
    let got = api
        .call(Method::DELETE, "/api/v1/udsp/5", Some(ADMIN), None)
        .await;
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    let got = api
        .call(Method::DELETE, "/api/v1/udsp/1", Some(ADMIN), None)
        .await;
    assert_eq!(got.status, StatusCode::OK, "{got:?}");
    assert_eq!(
        api.node.udsp().await.unwrap().local_net_priority(net),
        lnet::selection::LNET_MAX_SELECTION_PRIORITY
    );
    let got = api
        .call(Method::DELETE, "/api/v1/udsp", Some(ADMIN), None)
        .await;
    let deleted: web::UdspDeleted = serde_json::from_str(&got.text).unwrap();
    assert_eq!((deleted.deleted.len(), deleted.rules.len()), (1, 0));
    assert!(api.node.udsp().await.unwrap().is_empty());
    // A reader may show, not change.
    let got = api
        .call(Method::DELETE, "/api/v1/udsp", Some(READER), None)
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    api.server.shutdown().await;
}
