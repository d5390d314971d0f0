//! `POST /nets` and `DELETE /nis/{nid}` over HTTPS: the refusals the API makes itself, each
//! naming its field, before anything is started or stopped; a server without a way to start
//! NIs says so; the router's last NI is refused. (NIs started and stopped for real, through
//! the daemon, are in the router's `net_runtime` test.)

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
async fn net_add_and_del_refusals_name_their_field() {
    let (a, an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let add = |body: serde_json::Value, token: &'static str| {
        let api = &api;
        async move {
            api.call(Method::POST, "/api/v1/nets", Some(token), Some(body))
                .await
        }
    };
    let cases = [
        (
            json!({"net": "nonet", "interface": "lo"}),
            StatusCode::BAD_REQUEST,
            "net",
        ),
        // An LND this router has not: refused by the API itself.
        (
            json!({"net": "gni1", "interface": "lo"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        (
            json!({"net": "tcp1"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "interface",
        ),
        (
            json!({"net": "tcp1", "nid": "10.0.9.1@tcp2"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "nid",
        ),
        (
            json!({"net": "tcp1", "interface": "lo", "tos": 4}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "tos",
        ),
        (
            json!({"net": "tcp1", "interface": "lo", "conns_per_peer": 128}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "conns_per_peer",
        ),
        // This server has nothing that starts NIs.
        (
            json!({"net": "tcp1", "interface": "lo"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        // An o2ib net goes as far as the daemon, which checks it against its build (the
        // router's `net_runtime` test); so does a peer_timeout.
        (
            json!({"net": "o2ib1", "interface": "lo"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        (
            json!({"net": "tcp1", "interface": "lo", "peer_timeout": 30}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
    ];
    for (body, status, field) in cases {
        let got = add(body.clone(), ADMIN).await;
        assert_eq!(got.status, status, "{body}: {got:?}");
        assert_eq!(got.error().0.as_deref(), Some(field), "{body}: {got:?}");
    }
    let got = add(json!({"net": "tcp1", "interface": "lo"}), READER).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{got:?}");
    // The API refuses an LND no router has; an o2ib net is for the daemon to judge.
    let got = add(json!({"net": "gni1", "interface": "lo"}), ADMIN).await;
    assert!(got.error().1.contains("not available"), "{got:?}");
    let got = add(json!({"net": "o2ib1", "interface": "lo"}), ADMIN).await;
    assert!(
        got.error().1.contains("cannot start or stop NIs"),
        "{got:?}"
    );

    let del = |nid: String| {
        let api = &api;
        async move {
            api.call(
                Method::DELETE,
                &format!("/api/v1/nis/{nid}"),
                Some(ADMIN),
                None,
            )
            .await
        }
    };
    let got = del("10.0.9.9@tcp".to_owned()).await;
    assert_eq!(got.status, StatusCode::NOT_FOUND, "{got:?}");
    let got = del("not-a-nid".to_owned()).await;
    assert_eq!(got.status, StatusCode::BAD_REQUEST, "{got:?}");
    // One of two NIs, with nothing to stop it: refused, and the node keeps it.
    let got = del(an[1].to_string()).await;
    assert_eq!(got.status, StatusCode::UNPROCESSABLE_ENTITY, "{got:?}");
    assert_eq!(api.node.local_nis().await.unwrap().len(), 2);
    // The router's last NI: conflict.
    api.node.remove_ni(an[1]).await.unwrap();
    let got = del(an[0].to_string()).await;
    assert_eq!(got.status, StatusCode::CONFLICT, "{got:?}");
    assert_eq!(got.error().0.as_deref(), Some("nid"));
    assert!(api.admin_actions().is_empty(), "{:?}", api.admin_actions());
    api.server.shutdown().await;
}

#[actix::test]
async fn net_set_lnd_setting_refusals_name_their_field() {
    let (a, an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let post = |path: String, body: serde_json::Value, token: &'static str| {
        let api = &api;
        async move { api.call(Method::POST, &path, Some(token), Some(body)).await }
    };
    let ni = an[0];
    let cases = [
        (
            format!("/api/v1/nis/{ni}/conns-per-peer"),
            json!({"value": 128}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "value",
        ),
        (
            "/api/v1/nis/conns-per-peer".to_owned(),
            json!({"value": 200}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "value",
        ),
        (
            "/api/v1/nis/not-a-nid/conns-per-peer".to_owned(),
            json!({"value": 2}),
            StatusCode::BAD_REQUEST,
            "nid",
        ),
        (
            "/api/v1/nis/10.0.9.9@tcp/conns-per-peer".to_owned(),
            json!({"value": 2}),
            StatusCode::NOT_FOUND,
            "nid",
        ),
        (
            "/api/v1/nets/nonet/lnd-timeout".to_owned(),
            json!({"value": 10}),
            StatusCode::BAD_REQUEST,
            "net",
        ),
        (
            "/api/v1/nets/tcp/lnd-timeout".to_owned(),
            json!({"value": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "value",
        ),
        (
            "/api/v1/nets/gni1/lnd-timeout".to_owned(),
            json!({"value": 10}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        // This server has nothing that changes its NIs' LNDs.
        (
            format!("/api/v1/nis/{ni}/conns-per-peer"),
            json!({"value": 2}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        (
            "/api/v1/nets/tcp/lnd-timeout".to_owned(),
            json!({"value": 10}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
        (
            "/api/v1/nets/o2ib1/lnd-timeout".to_owned(),
            json!({"value": 10}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "net",
        ),
    ];
    for (path, body, status, field) in cases {
        let got = post(path.clone(), body.clone(), ADMIN).await;
        assert_eq!(got.status, status, "{path} {body}: {got:?}");
        assert_eq!(
            got.error().0.as_deref(),
            Some(field),
            "{path} {body}: {got:?}"
        );
    }
    let got = post(
        "/api/v1/nis/conns-per-peer".to_owned(),
        json!({"value": 2}),
        READER,
    )
    .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{got:?}");
    let got = post(
        "/api/v1/nets/tcp/lnd-timeout".to_owned(),
        json!({"value": 2, "extra": 1}),
        ADMIN,
    )
    .await;
    assert_eq!(got.status, StatusCode::UNPROCESSABLE_ENTITY, "{got:?}");
    assert_eq!(got.error().0.as_deref(), Some("extra"), "{got:?}");
    assert!(api.admin_actions().is_empty(), "{:?}", api.admin_actions());
    api.server.shutdown().await;
}
