//! `lnet-router demo`: a routed topology in one process, on loopback addresses.
//!
//! End node A (127.0.30.1@tcp) reaches end node B (127.0.31.1@tcp1) through two routers,
//! R1 (127.0.30.2@tcp, 127.0.31.2@tcp1) and R2 (127.0.30.3@tcp, 127.0.31.3@tcp1), each
//! started from its embedded configuration file (`router/demo/*.yaml`) exactly as
//! `lnet-router run` starts one. A sends a 64 KiB PUT to B every 100 ms and pings B every
//! 2 s; every 5 s the demo prints what crossed each router and the state of A's routes.
//! With `--api-port`, each node's REST API and dashboard are served over HTTPS on
//! 127.0.0.1 (R1 on that port, then R2, A, B), with a self-signed certificate and two
//! tokens (admin and reader) printed at start. It runs until SIGINT or SIGTERM, or for
//! `--duration` seconds.

use std::time::Duration;

use actors::{MdSpec, Node, PutRequest};
use bytes::Bytes;
use lnet::Nid;
use tokio::signal::unix::{signal, SignalKind};

use crate::plan::{plan, HostInterfaces, Plan, PlanError};
use crate::run::{start_plan, RunError, Running};

/// The embedded configurations: name and YAML.
pub const TOPOLOGY: [(&str, &str); 4] = [
    ("r1", include_str!("../demo/r1.yaml")),
    ("r2", include_str!("../demo/r2.yaml")),
    ("a", include_str!("../demo/a.yaml")),
    ("b", include_str!("../demo/b.yaml")),
];

/// The portal and match bits of the demo's PUTs.
const PORTAL: u32 = 20;
const BITS: u64 = 0xdead;

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// An embedded configuration was refused.
    #[error("demo configuration {name}: {source}")]
    Plan {
        /// Which.
        name: &'static str,
        /// Why.
        #[source]
        source: Box<PlanError>,
    },
    /// A node could not start.
    #[error("demo node {name}: {source}")]
    Start {
        /// Which.
        name: &'static str,
        /// Why.
        #[source]
        source: RunError,
    },
    /// The signal handlers could not be installed.
    #[error("cannot install the signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// An API server could not start.
    #[error("demo API: {0}")]
    Api(#[source] Box<web::WebError>),
    /// The demo's tokens were refused.
    #[error("demo tokens: {0}")]
    Tokens(#[source] web::TokenError),
    /// The demo's folder for its certificate could not be made.
    #[error("demo folder: {0}")]
    Dir(#[source] std::io::Error),
    /// A node's event log could not be opened.
    #[error("demo event log of {name}: {source}")]
    Store {
        /// Which node.
        name: &'static str,
        /// Why.
        #[source]
        source: store::StoreError,
    },
}

/// The demo's four nodes.
#[derive(Debug)]
pub struct Demo {
    /// (name, running node), in [`TOPOLOGY`] order.
    pub nodes: Vec<(&'static str, Running)>,
}

impl Demo {
    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| &r.node)
    }
}

fn nid(s: &str) -> Option<Nid> {
    s.parse().ok()
}

/// Starts the four nodes (routers first).
pub async fn start() -> Result<Demo, DemoError> {
    let mut nodes = Vec::new();
    for (name, text) in TOPOLOGY {
        let p: Plan = plan(name, text, &HostInterfaces).map_err(|source| DemoError::Plan {
            name,
            source: Box::new(source),
        })?;
        let running = start_plan(&p)
            .await
            .map_err(|source| DemoError::Start { name, source })?;
        nodes.push((name, running));
    }
    Ok(Demo { nodes })
}

/// The demo's API tokens (the demo listens on loopback only).
pub const ADMIN_TOKEN: &str = "demo-admin-token-0001";
/// The demo's read-only token.
pub const READER_TOKEN: &str = "demo-reader-token-0001";

/// Serves each node's API and dashboard over HTTPS on 127.0.0.1, ports `base`, `base+1`
/// ... in [`TOPOLOGY`] order, with one self-signed certificate written to `dir`; each
/// node's events are recorded in an event log of its own under `dir`, as the daemon's are.
async fn serve(
    demo: &Demo,
    base: u16,
    dir: &std::path::Path,
) -> Result<Vec<web::WebServer>, DemoError> {
    let api_err = |e: web::WebError| DemoError::Api(Box::new(e));
    let cert = web::SelfSigned::generate(&["localhost", "127.0.0.1"]).map_err(api_err)?;
    let (cert_path, key_path) = cert.write(dir).map_err(api_err)?;
    let tokens = web::MemoryTokens::new();
    tokens
        .create("demo-admin", web::Role::Admin, ADMIN_TOKEN)
        .map_err(DemoError::Tokens)?;
    tokens
        .create("demo-reader", web::Role::Reader, READER_TOKEN)
        .map_err(DemoError::Tokens)?;
    let tokens: std::sync::Arc<dyn web::TokenVerifier> = std::sync::Arc::new(tokens);
    let mut servers = Vec::new();
    for (i, (name, running)) in demo.nodes.iter().enumerate() {
        let port = base.saturating_add(u16::try_from(i).unwrap_or(0));
        let settings = crate::api::ApiSettings {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            transport: web::Transport::Https {
                cert: cert_path.clone(),
                key: key_path.clone(),
            },
        };
        let tunables = TOPOLOGY
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, text)| lnet::config::parse(text).ok())
            .and_then(|c| c.tunables().ok())
            .unwrap_or_default();
        let log = store::Store::open(dir.join(format!("events-{name}")))
            .map_err(|source| DemoError::Store { name, source })?;
        let sink: std::sync::Arc<dyn web::EventSink> =
            std::sync::Arc::new(crate::api::StoreLog(std::sync::Arc::new(log)));
        let server = crate::api::start(
            running.node.clone(),
            &settings,
            std::sync::Arc::clone(&tokens),
            Some(sink),
            None,
            tunables,
        )
        .await
        .map_err(api_err)?;
        println!(
            "lnet-router demo: dashboard of {}: https://{}/ admin token: {ADMIN_TOKEN} reader token: {READER_TOKEN}",
            name.to_uppercase(),
            server.local_addr()
        );
        servers.push(server);
    }
    println!(
        "lnet-router demo: the dashboards use a self-signed certificate: {}",
        cert_path.display()
    );
    Ok(servers)
}

/// Runs the demo until a signal, or for `duration`; with `api_base`, each node's API and
/// dashboard are served from that port on.
pub async fn run(duration: Option<Duration>, api_base: Option<u16>) -> Result<(), DemoError> {
    let mut sigterm = signal(SignalKind::terminate()).map_err(DemoError::Signals)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(DemoError::Signals)?;
    let demo = start().await?;
    let dir = std::env::temp_dir().join(format!("lnet-router-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(DemoError::Dir)?;
    let servers = match api_base {
        Some(base) => serve(&demo, base, &dir).await?,
        None => Vec::new(),
    };
    println!("lnet-router demo: A 127.0.30.1@tcp -> routers R1 (127.0.30.2@tcp, 127.0.31.2@tcp1) and R2 (127.0.30.3@tcp, 127.0.31.3@tcp1) -> B 127.0.31.1@tcp1");
    println!("lnet-router demo: A sends a 64 KiB PUT to B every 100 ms and pings B every 2 s; Ctrl-C stops");
    let traffic = actix::spawn(traffic(demo.node("a").cloned(), demo.node("b").cloned()));
    let report = actix::spawn(report(
        demo.node("a").cloned(),
        demo.node("r1").cloned(),
        demo.node("r2").cloned(),
    ));
    let stop = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = sigterm.recv() => {}
        _ = sigint.recv() => {}
        _ = stop => {}
    }
    traffic.abort();
    report.abort();
    for s in servers {
        s.shutdown().await;
    }
    for (_, r) in demo.nodes {
        r.stop().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("lnet-router demo: stopped");
    Ok(())
}

async fn traffic(a: Option<Node>, b: Option<Node>) {
    let (Some(a), Some(b), Some(dest)) = (a, b, nid("127.0.31.1@tcp1")) else {
        return;
    };
    let Ok(mut sink) = b
        .attach(MdSpec {
            portal: PORTAL,
            match_bits: BITS,
            data: Bytes::new(),
            depth: 64,
        })
        .await
    else {
        return;
    };
    actix::spawn(async move { while sink.recv().await.is_some() {} });
    let payload = Bytes::from(vec![0x42u8; 64 << 10]);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        n = n.wrapping_add(1);
        let req = PutRequest {
            dest,
            portal: PORTAL,
            match_bits: BITS,
            hdr_data: n,
            payload: payload.clone(),
            ack: true,
            timeout: Duration::from_secs(10),
        };
        if let Ok(txn) = a.put(req).await {
            actix::spawn(async move {
                let _ = txn.finish().await;
            });
        }
        if n % 20 == 1 {
            match a.ping(dest, Duration::from_secs(5)).await {
                Ok(reply) => {
                    let nids: Vec<String> = reply
                        .nids()
                        .iter()
                        .map(|(n, up)| format!("{n} {}", if *up { "up" } else { "down" }))
                        .collect();
                    println!(
                        "lnet-router demo: ping {dest} from A: reply from {} ({})",
                        reply.from,
                        nids.join(", ")
                    );
                }
                Err(e) => println!("lnet-router demo: ping {dest} from A failed: {e}"),
            }
        }
    }
}

async fn report(a: Option<Node>, r1: Option<Node>, r2: Option<Node>) {
    let (Some(a), Some(r1), Some(r2)) = (a, r1, r2) else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    tick.tick().await;
    loop {
        tick.tick().await;
        let mut line = String::from("lnet-router demo:");
        for (name, node) in [("R1", &r1), ("R2", &r2)] {
            let c = node.counters().await.unwrap_or_default();
            let count = c.get("route_count").copied().unwrap_or(0);
            let bytes = c.get("route_length").copied().unwrap_or(0);
            line.push_str(&format!(
                " {name} forwarded {count} messages ({} MiB);",
                bytes >> 20
            ));
        }
        for r in a.routes().await.unwrap_or_default() {
            let state = match r.down {
                None => "up".to_owned(),
                Some(why) => format!("down ({why})"),
            };
            line.push_str(&format!(
                " A's route to {} via {}: {state};",
                r.spec.net, r.spec.gateway
            ));
        }
        println!("{line}");
    }
}
