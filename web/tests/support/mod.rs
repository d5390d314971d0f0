//! Shared pieces of the API tests: a node on the in-process fabric with a peer node, the
//! server over real HTTPS on 127.0.0.1 (ephemeral port, self-signed certificate), and a
//! reqwest client that trusts that certificate and nothing else.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod store_backend;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actors::{MdSpec, Node, NodeConfig, NodeHandler};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use lnd::fabric::{Fabric, FabricConfig, FabricLnd};
use lnet::tunables::Tunables;
use lnet::Nid;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use store::Store;
use web::{SelfSigned, WebConfig, WebContext, WebServer};

/// The admin token's secret.
pub const ADMIN: &str = "admin-secret-0123456789abcdef";
/// The reader token's secret.
pub const READER: &str = "reader-secret-0123456789abcdef";
/// A bound on every wait.
pub const WAIT: Duration = Duration::from_secs(60);

pub fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// A store in `dir` with the tests' tokens: `ops` (admin) and `grafana` (reader).
pub fn open_store(dir: &std::path::Path) -> Arc<Store> {
    let store = Store::open(dir.join("store")).unwrap();
    store
        .create_token("ops", store::Role::Admin, ADMIN)
        .unwrap();
    store
        .create_token("grafana", store::Role::Reader, READER)
        .unwrap();
    Arc::new(store)
}

/// A running API with its node.
pub struct Api {
    pub server: WebServer,
    pub client: reqwest::Client,
    pub base: String,
    pub node: Node,
    /// The store whose tokens the API checks and whose event log it writes.
    pub store: Arc<Store>,
    _dir: tempfile::TempDir,
}

/// How the API under test is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Https,
    PlainReadOnly,
    PlainWithMutations,
}

/// Starts the API for `node` in `mode`.
pub async fn serve(node: Node, tunables: Tunables, mode: Mode) -> Api {
    serve_with(node, tunables, mode, |_| {}).await
}

/// Starts the API for `node` in `mode`, with `tweak` applied to its settings.
pub async fn serve_with(
    node: Node,
    tunables: Tunables,
    mode: Mode,
    tweak: impl FnOnce(&mut WebConfig),
) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let cert = SelfSigned::generate(&["localhost", "127.0.0.1"]).unwrap();
    let mut config = match mode {
        Mode::Https => {
            let (c, k) = cert.write(dir.path()).unwrap();
            WebConfig::https(listen, c, k)
        }
        Mode::PlainReadOnly => WebConfig::plain_http(listen, false),
        Mode::PlainWithMutations => WebConfig::plain_http(listen, true),
    };
    tweak(&mut config);
    let store = open_store(dir.path());
    let server = web::start(
        config,
        WebContext {
            node: node.clone(),
            tokens: Arc::new(store_backend::StoreTokens(Arc::clone(&store))),
            sink: Some(Arc::new(store_backend::StoreLog(Arc::clone(&store)))),
            tunables,
            config: None,
            nis: None,
        },
    )
    .await
    .unwrap();
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let base = server.url();
    assert!(base.starts_with(if mode == Mode::Https {
        "https://127.0.0.1:"
    } else {
        "http://127.0.0.1:"
    }));
    Api {
        server,
        client,
        base,
        node,
        store,
        _dir: dir,
    }
}

/// Tunables with health off (`health_sensitivity` 0, so `retry_count` 0): successes and
/// failures leave health values where an administrator set them, so a test can tell
/// whether a refused change changed them.
pub fn frozen() -> Tunables {
    let mut t = Tunables::default();
    t.set(lnet::tunables::TunableName::HealthSensitivity, 0)
        .unwrap();
    t
}

/// Two nodes on one fabric: A (`10.0.0.1@tcp`, `10.0.0.2@tcp`, with `tunables`) knows B
/// (`10.0.1.1@tcp`, `10.0.1.2@tcp`) as a Multi-Rail peer; B exposes an MD.
pub async fn fabric_pair(tunables: Tunables) -> (Node, Vec<Nid>, Node, Vec<Nid>, Fabric) {
    let fabric = Fabric::new();
    let a = Node::start(NodeConfig {
        tunables,
        ..NodeConfig::default()
    });
    let b = Node::start(NodeConfig::default());
    let mut an = Vec::new();
    for n in ["10.0.0.1@tcp", "10.0.0.2@tcp"] {
        an.push(
            a.add_ni::<FabricLnd<NodeHandler>>(FabricConfig::new(&fabric, nid(n)), 8)
                .await
                .unwrap(),
        );
    }
    let mut bn = Vec::new();
    for n in ["10.0.1.1@tcp", "10.0.1.2@tcp"] {
        bn.push(
            b.add_ni::<FabricLnd<NodeHandler>>(FabricConfig::new(&fabric, nid(n)), 8)
                .await
                .unwrap(),
        );
    }
    let rx = b
        .attach(MdSpec {
            portal: 4,
            match_bits: 0x42,
            data: Bytes::from_static(b"data"),
            depth: 64,
        })
        .await
        .unwrap();
    // Keep the MD's channel open for the life of the test.
    std::mem::forget(rx);
    a.add_peer(bn[0], bn.clone(), true).await.unwrap();
    (a, an, b, bn, fabric)
}

/// What a request got back.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// The structured error: (field, message), checking the shape.
    pub fn error(&self) -> (Option<String>, String) {
        assert!(
            self.content_type.starts_with("application/json"),
            "{self:?}"
        );
        let body: web::ErrorBody = serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not an error body ({e}): {:?}", self.text));
        (body.error.field, body.error.message)
    }
}

impl Api {
    /// The store's event log.
    pub fn logged(&self) -> Vec<store::EventRecord> {
        self.store.events_after(0, 100_000).unwrap()
    }

    /// The (token, action) of each admin change in the store's event log.
    pub fn admin_actions(&self) -> Vec<(String, String)> {
        self.logged()
            .iter()
            .filter_map(|r| match &r.event {
                store::Event::ConfigChanged { change } => store_backend::parse_change(change),
                _ => None,
            })
            .collect()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with an optional bearer token and an optional JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let mut req = self.client.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = resp.text().await.unwrap();
        Answer {
            status,
            content_type,
            headers,
            text,
        }
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        self.call(Method::GET, path, token, None).await
    }

    /// A GET with the reader token that must succeed; its JSON.
    pub async fn read(&self, path: &str) -> Value {
        let a = self.get(path, Some(READER)).await;
        assert_eq!(a.status, StatusCode::OK, "{path}: {a:?}");
        a.json()
    }

    /// The admin events in the ring.
    pub async fn admin_events(&self) -> Vec<Value> {
        let page = self.read("/api/v1/events?after=0&limit=1000").await;
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"]["type"] == "admin")
            .cloned()
            .collect()
    }

    /// Opens the event stream with the reader token, optionally resuming after `last`.
    pub async fn stream(&self, last: Option<u64>, query: &str) -> SseReader {
        self.stream_as(READER, last, query).await
    }

    /// Opens the event stream with `token`, optionally resuming after `last`.
    pub async fn stream_as(&self, token: &str, last: Option<u64>, query: &str) -> SseReader {
        let mut req = self
            .client
            .get(self.url(&format!("/api/v1/events/stream{query}")))
            .bearer_auth(token);
        if let Some(id) = last {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        SseReader {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseRecord {
    pub id: Option<u64>,
    pub event: String,
    pub data: String,
}

impl SseRecord {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }
}

/// Reads `text/event-stream` records.
pub struct SseReader {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buf: String,
}

impl SseReader {
    /// The next record (comments skipped); `None` when the stream ended.
    pub async fn next(&mut self) -> Option<SseRecord> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let mut rec = SseRecord {
                    id: None,
                    event: "message".into(),
                    data: String::new(),
                };
                let mut any = false;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        rec.id = Some(v.trim().parse().unwrap());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        rec.event = v.trim().to_owned();
                        any = true;
                    } else if let Some(v) = line.strip_prefix("data:") {
                        rec.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                        any = true;
                    }
                }
                if any {
                    return Some(rec);
                }
                continue;
            }
            let chunk = self.body.next().await?.ok()?;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Reads records until one matches (bounded by [`WAIT`]).
    pub async fn until(&mut self, mut pred: impl FnMut(&SseRecord) -> bool) -> SseRecord {
        tokio::time::timeout(WAIT, async {
            loop {
                let r = self.next().await.expect("the stream ended");
                if pred(&r) {
                    return r;
                }
            }
        })
        .await
        .expect("no such event in time")
    }
}

/// Polls `f` until it returns `Some` (bounded by [`WAIT`]).
pub async fn eventually<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(v) = f().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("condition not reached in time")
}
