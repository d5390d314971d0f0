//! A small demo of the REST API: a node with two tcp NIs on an in-process fabric, a
//! Multi-Rail peer node with two NIs of its own, and the API over HTTPS with a
//! self-signed certificate (or plain HTTP).
//!
//! ```sh
//! cargo run -p web --example api-demo -- --listen 127.0.0.1:8443 --cert-dir "$(mktemp -d)" \
//!     --admin-token "$ADMIN" --reader-token "$READER"
//! ```
//!
//! `--cert-dir DIR` receives `cert.pem` and `key.pem` (generated for `localhost` and
//! `127.0.0.1`); `--plain-http` serves plain HTTP instead (read-only unless
//! `--allow-mutations`); `--exit-after SECS` stops the demo by itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actors::{MdSpec, Node, NodeConfig, NodeHandler};
use bytes::Bytes;
use clap::Parser;
use lnd::fabric::{Fabric, FabricConfig, FabricLnd};
use lnet::tunables::Tunables;
use lnet::Nid;
use web::{MemoryTokens, Role, SelfSigned, WebConfig, WebContext};

#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// Where to write the self-signed certificate and key (HTTPS).
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    plain_http: bool,
    /// Over plain HTTP, let admin tokens change the node.
    #[arg(long)]
    allow_mutations: bool,
    /// The secret of the admin token `demo-admin` (else `$LNET_DEMO_ADMIN_TOKEN`).
    #[arg(long)]
    admin_token: Option<String>,
    /// The secret of the reader token `demo-reader` (else `$LNET_DEMO_READER_TOKEN`).
    #[arg(long)]
    reader_token: Option<String>,
    /// Stop after this many seconds.
    #[arg(long)]
    exit_after: Option<u64>,
}

fn nid(s: &str) -> Result<Nid, String> {
    s.parse().map_err(|e| format!("{s}: {e}"))
}

async fn fabric_node(fabric: &Fabric, nids: &[&str]) -> Result<(Node, Vec<Nid>), String> {
    let node = Node::start(NodeConfig::default());
    let mut out = Vec::new();
    for n in nids {
        let cfg = FabricConfig::new(fabric, nid(n)?);
        out.push(
            node.add_ni::<FabricLnd<NodeHandler>>(cfg, 8)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok((node, out))
}

async fn run(args: Args) -> Result<(), String> {
    let fabric = Fabric::new();
    let (router, _) = fabric_node(&fabric, &["10.0.0.1@tcp", "10.0.0.2@tcp"]).await?;
    let (peer, peer_nids) = fabric_node(&fabric, &["10.0.1.1@tcp", "10.0.1.2@tcp"]).await?;
    let _deliveries = peer
        .attach(MdSpec {
            portal: 4,
            match_bits: 0x42,
            data: Bytes::from_static(b"demo data"),
            depth: 64,
        })
        .await
        .map_err(|e| e.to_string())?;
    let primary = *peer_nids.first().ok_or("the peer node has no NI")?;
    router
        .add_peer(primary, peer_nids.clone(), true)
        .await
        .map_err(|e| e.to_string())?;

    let admin = args
        .admin_token
        .clone()
        .or_else(|| std::env::var("LNET_DEMO_ADMIN_TOKEN").ok())
        .ok_or("an admin token is needed: --admin-token or $LNET_DEMO_ADMIN_TOKEN")?;
    let reader = args
        .reader_token
        .clone()
        .or_else(|| std::env::var("LNET_DEMO_READER_TOKEN").ok());
    let tokens = MemoryTokens::new();
    tokens
        .create("demo-admin", Role::Admin, &admin)
        .map_err(|e| e.to_string())?;
    if let Some(r) = &reader {
        tokens
            .create("demo-reader", Role::Reader, r)
            .map_err(|e| e.to_string())?;
    }
    let mut config = if args.plain_http {
        WebConfig::plain_http(args.listen, args.allow_mutations)
    } else {
        let dir = args
            .cert_dir
            .clone()
            .ok_or("HTTPS needs --cert-dir (or use --plain-http)")?;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cert = SelfSigned::generate(&["localhost", "127.0.0.1"]).map_err(|e| e.to_string())?;
        let (cert, key) = cert.write(&dir).map_err(|e| e.to_string())?;
        WebConfig::https(args.listen, cert, key)
    };
    config.max_ping_timeout = Duration::from_secs(10);
    let server = web::start(
        config,
        WebContext {
            node: router,
            tokens: Arc::new(tokens),
            sink: None,
            tunables: Tunables::default(),
            config: None,
            nis: None,
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    println!("api-demo listening on {}", server.url());
    match args.exit_after {
        Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
        None => std::future::pending::<()>().await,
    }
    server.shutdown().await;
    Ok(())
}

fn main() {
    let args = Args::parse();
    let system = actix::System::new();
    let result = system.block_on(run(args));
    if let Err(e) = result {
        eprintln!("api-demo: {e}");
        std::process::exit(1);
    }
}
