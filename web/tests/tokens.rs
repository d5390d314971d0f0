//! API tokens at run time, over real HTTPS against the store's token table: a new token's
//! secret is in the answer to its creation and nowhere else (not in the list, the event
//! log nor the store's files) and works at once; a reader token may ask who it is and
//! nothing more; a revoked token is refused from the next request on and the event stream
//! it opened ends, while other streams go on; bad input gets the structured error and makes
//! nothing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{fabric_pair, frozen, serve, Api, Mode, ADMIN, READER};
use web::Refusal;

/// `POST /api/v1/tokens` with `token`.
async fn create(api: &Api, token: &str, body: Value) -> support::Answer {
    api.call(Method::POST, "/api/v1/tokens", Some(token), Some(body))
        .await
}

/// The names in `GET /api/v1/tokens` (admin).
async fn names(api: &Api) -> Vec<String> {
    let a = api.get("/api/v1/tokens", Some(ADMIN)).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    a.json()["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Every file under `dir`, read whole.
fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

#[actix::test]
async fn a_new_token_is_shown_once_works_at_once_and_is_listed_without_its_secret() {
    let (a, ..) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let who = api.get("/api/v1/whoami", Some(ADMIN)).await;
    assert_eq!(who.status, StatusCode::OK, "{who:?}");
    assert_eq!(who.json(), json!({ "name": "ops", "role": "admin" }));

    let made = create(&api, ADMIN, json!({ "name": "ci", "role": "admin" })).await;
    assert_eq!(made.status, StatusCode::CREATED, "{made:?}");
    let made = made.json();
    assert_eq!(
        (made["name"].as_str(), made["role"].as_str()),
        (Some("ci"), Some("admin"))
    );
    assert!(
        made["created_ms"].as_u64().unwrap() > 1_600_000_000_000,
        "{made}"
    );
    let secret = made["secret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), 64);
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()), "{secret}");

    // The new token works at once, admin as asked: it makes a token itself, whose role is
    // reader when none is named.
    let who = api.get("/api/v1/whoami", Some(&secret)).await;
    assert_eq!(who.json(), json!({ "name": "ci", "role": "admin" }));
    let second = create(&api, &secret, json!({ "name": "dash" })).await;
    assert_eq!(second.status, StatusCode::CREATED, "{second:?}");
    let second = second.json();
    assert_eq!(second["role"], "reader");
    let second_secret = second["secret"].as_str().unwrap().to_owned();
    assert_ne!(second_secret, secret);
    let who = api.get("/api/v1/whoami", Some(&second_secret)).await;
    assert_eq!(who.json(), json!({ "name": "dash", "role": "reader" }));
    assert_eq!(
        api.get("/api/v1/nets", Some(&second_secret)).await.status,
        StatusCode::OK
    );

    // The list: names, roles and creation times, never a secret nor a hash.
    let list = api.get("/api/v1/tokens", Some(&secret)).await;
    assert_eq!(list.status, StatusCode::OK, "{list:?}");
    let hash = |s: &str| -> String {
        web::auth::secret_hash(s)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    for s in [&secret, &second_secret] {
        assert!(!list.text.contains(s.as_str()), "{}", list.text);
        assert!(!list.text.contains(&hash(s)), "{}", list.text);
    }
    let tokens = list.json()["tokens"].as_array().unwrap().clone();
    let listed: Vec<(&str, &str)> = tokens
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            ("ci", "admin"),
            ("dash", "reader"),
            ("grafana", "reader"),
            ("ops", "admin")
        ]
    );
    for t in &tokens {
        let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["created_ms", "name", "role"], "{t}");
    }
    assert_eq!(tokens[0]["created_ms"], made["created_ms"]);
    // Tokens made before the API (here the test's own): no creation time.
    assert_eq!(tokens[3]["created_ms"], Value::Null);

    // Both creations are admin events naming the token that made them, in the ring and in
    // the store's log; no event and no file of the store holds a secret.
    let events = api.admin_events().await;
    let made_by: Vec<(&str, &str, &str)> = events
        .iter()
        .filter(|e| e["event"]["action"] == "create_token")
        .map(|e| {
            (
                e["event"]["token"].as_str().unwrap(),
                e["event"]["target"].as_str().unwrap(),
                e["event"]["detail"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        made_by,
        [("ops", "ci", "role=admin"), ("ci", "dash", "role=reader")]
    );
    let logged = api.admin_actions();
    assert!(
        logged.contains(&("ops".into(), "create_token".into())),
        "{logged:?}"
    );
    assert!(
        logged.contains(&("ci".into(), "create_token".into())),
        "{logged:?}"
    );
    let all = api
        .get("/api/v1/events?after=0&limit=1000", Some(ADMIN))
        .await;
    assert!(!all.text.contains(&secret), "{}", all.text);
    let store_dir = api.store.path().to_owned();
    for (path, bytes) in files(&store_dir) {
        for s in [&secret, &second_secret] {
            assert!(
                !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                "{} holds a secret",
                path.display()
            );
        }
    }
    // The store keeps the hash: it knows the secret.
    assert_eq!(
        api.store.verify_token(&secret).unwrap().map(|t| t.name),
        Some("ci".to_owned())
    );
    api.server.shutdown().await;
}

#[actix::test]
async fn a_reader_token_may_ask_who_it_is_and_nothing_more() {
    let (a, ..) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let who = api.get("/api/v1/whoami", Some(READER)).await;
    assert_eq!(who.status, StatusCode::OK, "{who:?}");
    assert_eq!(who.json(), json!({ "name": "grafana", "role": "reader" }));

    let made = create(&api, READER, json!({ "name": "mine", "role": "admin" })).await;
    let list = api.get("/api/v1/tokens", Some(READER)).await;
    let revoke = api
        .call(Method::DELETE, "/api/v1/tokens/ops", Some(READER), None)
        .await;
    for a in [&made, &list, &revoke] {
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{a:?}");
        let (field, message) = a.error();
        assert_eq!(field, None);
        assert!(
            message.contains("grafana") && message.contains("admin"),
            "{message}"
        );
    }
    // Nothing changed: the admin token still works, and no token was made.
    assert_eq!(names(&api).await, ["grafana", "ops"]);
    // Without a token, even whoami is refused.
    let none = api.get("/api/v1/whoami", None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED, "{none:?}");
    assert!(api
        .admin_events()
        .await
        .iter()
        .all(|e| !e["event"]["action"].as_str().unwrap().contains("token")));
    api.server.shutdown().await;
}

#[actix::test]
async fn a_read_only_server_lists_tokens_for_an_admin_but_makes_none() {
    let (a, ..) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::PlainReadOnly).await;
    assert_eq!(names(&api).await, ["grafana", "ops"]);
    let made = create(&api, ADMIN, json!({ "name": "ci" })).await;
    assert_eq!(made.status, StatusCode::FORBIDDEN, "{made:?}");
    assert!(made.error().1.contains("read-only"), "{made:?}");
    let revoke = api
        .call(Method::DELETE, "/api/v1/tokens/grafana", Some(ADMIN), None)
        .await;
    assert_eq!(revoke.status, StatusCode::FORBIDDEN, "{revoke:?}");
    assert_eq!(names(&api).await, ["grafana", "ops"]);
    api.server.shutdown().await;
}

#[actix::test]
async fn a_revoked_token_is_refused_at_once_and_its_event_stream_ends() {
    let (a, ..) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let made = create(&api, ADMIN, json!({ "name": "dash", "role": "reader" })).await;
    assert_eq!(made.status, StatusCode::CREATED, "{made:?}");
    let secret = made.json()["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        api.get("/api/v1/nets", Some(&secret)).await.status,
        StatusCode::OK
    );
    let mut revoked_stream = api.stream_as(&secret, None, "").await;
    let mut other_stream = api.stream(None, "").await;
    let failed_before = api.server.guard_stats().get(Refusal::AuthFailed);

    let revoke = api
        .call(Method::DELETE, "/api/v1/tokens/dash", Some(ADMIN), None)
        .await;
    assert_eq!(revoke.status, StatusCode::NO_CONTENT, "{revoke:?}");
    // The next request with it is refused, and counted as an unknown token.
    let next = api.get("/api/v1/nets", Some(&secret)).await;
    assert_eq!(next.status, StatusCode::UNAUTHORIZED, "{next:?}");
    assert!(next.error().1.contains("revoked"), "{next:?}");
    assert_eq!(
        api.server.guard_stats().get(Refusal::AuthFailed),
        failed_before + 1
    );
    // Its stream ends promptly (well before a keep-alive comment would be due); the
    // reader's stream goes on and carries the revocation.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(r) = revoked_stream.next().await {
            assert_ne!(r.event, "admin", "{r:?}");
        }
    })
    .await;
    assert!(ended.is_ok(), "the revoked token's stream is still open");
    let event = other_stream
        .until(|r| r.event == "admin" && r.json()["event"]["action"] == "revoke_token")
        .await
        .json();
    assert_eq!(event["event"]["token"], "ops");
    assert_eq!(event["event"]["target"], "dash");
    // A new stream with it is refused; the list no longer has it; a second revocation is
    // a 404 naming the field.
    let again = api
        .client
        .get(api.url("/api/v1/events/stream"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(names(&api).await, ["grafana", "ops"]);
    let twice = api
        .call(Method::DELETE, "/api/v1/tokens/dash", Some(ADMIN), None)
        .await;
    assert_eq!(twice.status, StatusCode::NOT_FOUND, "{twice:?}");
    assert_eq!(twice.error().0.as_deref(), Some("name"));
    assert!(api
        .admin_actions()
        .contains(&("ops".into(), "revoke_token".into())));
    api.server.shutdown().await;
}

#[actix::test]
async fn bad_token_requests_get_a_structured_error_and_make_nothing() {
    let (a, ..) = fabric_pair(frozen()).await;
    let api = serve(a, frozen(), Mode::Https).await;
    let cases = [
        (
            json!({ "name": "" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "name",
            "bad token name",
        ),
        (
            json!({ "name": "has space" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "name",
            "bad token name",
        ),
        (
            json!({ "name": "x".repeat(65) }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "name",
            "1 to 64",
        ),
        (
            json!({ "name": "ops" }),
            StatusCode::CONFLICT,
            "name",
            "exists already",
        ),
        (
            json!({ "name": "new", "role": "root" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "role",
            "unknown variant",
        ),
        (
            json!({ "name": "new", "secret": "chosen-by-me-0123456789" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "secret",
            "unknown field",
        ),
        (
            json!({ "role": "admin" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "name",
            "missing field",
        ),
    ];
    for (body, status, field, says) in cases {
        let a = create(&api, ADMIN, body.clone()).await;
        assert_eq!(a.status, status, "{body}: {a:?}");
        let (f, message) = a.error();
        assert_eq!(f.as_deref(), Some(field), "{body}: {message}");
        assert!(message.contains(says), "{body}: {message}");
    }
    let not_json = api
        .client
        .post(api.url("/api/v1/tokens"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body("{name")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    let missing = api
        .call(Method::DELETE, "/api/v1/tokens/nobody", Some(ADMIN), None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{missing:?}");
    assert_eq!(missing.error().0.as_deref(), Some("name"));
    // Nothing was made, and nothing recorded.
    assert_eq!(names(&api).await, ["grafana", "ops"]);
    assert!(api
        .admin_events()
        .await
        .iter()
        .all(|e| !e["event"]["action"].as_str().unwrap().contains("token")));
    api.server.shutdown().await;
}
