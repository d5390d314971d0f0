//! Starting and stopping the server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actors::Node;
use axum::extract::DefaultBodyLimit;
use axum_server::accept::DefaultAcceptor;
use axum_server::tls_rustls::RustlsAcceptor;
use lnet::tunables::Tunables;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

use crate::auth::TokenVerifier;
use crate::error::WebError;
use crate::events::EventSink;
use crate::events::{feed, EventRing};
use crate::guard::conn::Guarded;
use crate::guard::throttle::AuthThrottle;
use crate::guard::{GuardStats, Refusal, TLS_HANDSHAKE_TIMEOUT};
use crate::state::{AppState, Shared};

/// How the server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// HTTPS with the certificate chain and private key in these PEM files (the default).
    Https {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
    /// Plain HTTP, for a loopback-only or otherwise protected listener. Read-only unless
    /// `allow_mutations`: every change is then refused with 403.
    PlainHttp {
        /// Whether admin tokens may change the node over plain HTTP.
        allow_mutations: bool,
    },
}

/// The server's settings.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// Where to listen (port 0: an ephemeral port; see [`WebServer::local_addr`]).
    pub listen: SocketAddr,
    /// HTTPS or plain HTTP.
    pub transport: Transport,
    /// Whether `/metrics` answers without a token (for a scraper without credentials).
    pub public_metrics: bool,
    /// Whether the `lustre_*` series also carry the `component="lnet"` and
    /// `target="lnet"` labels of the HPE and GSI Lustre exporters.
    pub metrics_exporter_labels: bool,
    /// How many events the ring keeps for `GET /api/v1/events` and stream resumption.
    pub event_capacity: usize,
    /// The longest transaction timeout a ping or a discovery may ask for.
    pub max_ping_timeout: Duration,
    /// How long a request head may take from the connection's start or the last
    /// response ([`crate::guard::DEFAULT_HEADER_TIMEOUT`]).
    pub header_timeout: Duration,
    /// The largest request body, in bytes; a larger one is answered 413
    /// ([`crate::guard::DEFAULT_MAX_BODY_BYTES`]).
    pub max_body_bytes: usize,
    /// How many event streams may be open at once; one more is answered 503
    /// ([`crate::guard::DEFAULT_MAX_EVENT_STREAMS`]).
    pub max_event_streams: usize,
}

impl WebConfig {
    /// HTTPS on `listen` with the certificate and key in these files; metrics need a
    /// token; 4096 events kept; pings of at most 60 s.
    pub fn https(listen: SocketAddr, cert: PathBuf, key: PathBuf) -> WebConfig {
        WebConfig {
            listen,
            transport: Transport::Https { cert, key },
            public_metrics: false,
            metrics_exporter_labels: false,
            event_capacity: 4096,
            max_ping_timeout: Duration::from_secs(60),
            header_timeout: crate::guard::DEFAULT_HEADER_TIMEOUT,
            max_body_bytes: crate::guard::DEFAULT_MAX_BODY_BYTES,
            max_event_streams: crate::guard::DEFAULT_MAX_EVENT_STREAMS,
        }
    }

    /// Plain HTTP on `listen`, read-only unless `allow_mutations`; otherwise as
    /// [`WebConfig::https`].
    pub fn plain_http(listen: SocketAddr, allow_mutations: bool) -> WebConfig {
        WebConfig {
            transport: Transport::PlainHttp { allow_mutations },
            ..WebConfig::https(listen, PathBuf::new(), PathBuf::new())
        }
    }
}

/// What the server serves and whom it trusts.
#[derive(Clone)]
pub struct WebContext {
    /// The node.
    pub node: Node,
    /// Who a bearer token belongs to (the store's token table, or [`crate::MemoryTokens`]).
    pub tokens: Arc<dyn TokenVerifier>,
    /// Where every event also goes (the store's event log), if anywhere.
    pub sink: Option<Arc<dyn EventSink>>,
    /// The tunables the node was started with (the node takes tunables whole, so the API
    /// keeps the current set and changes it key by key).
    pub tunables: Tunables,
    /// Where configuration changes (routes, peers, tunables) are kept (the store), if
    /// anywhere.
    pub config: Option<Arc<dyn crate::persist::ConfigStore>>,
    /// What starts and stops local NIs at run time (`net add|del`), if anything.
    pub nis: Option<Arc<dyn crate::net_control::NiControl>>,
}

impl std::fmt::Debug for WebContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebContext")
            .field("node", &self.node)
            .field("sink", &self.sink.is_some())
            .field("tunables", &self.tunables)
            .finish_non_exhaustive()
    }
}

/// A running server.
#[derive(Debug)]
pub struct WebServer {
    addr: SocketAddr,
    https: bool,
    handle: axum_server::Handle,
    stop: watch::Sender<bool>,
    serve: JoinHandle<std::io::Result<()>>,
    /// The event feeder and the forward drop counter (none for a listener that shares
    /// another server's).
    tasks: Vec<JoinHandle<()>>,
    ring: Arc<EventRing>,
    state: AppState,
    guard: Arc<GuardStats>,
    limits: Limits,
}

/// Which endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoints {
    /// The whole API, the dashboard and the probes.
    Api,
    /// `GET /metrics` alone, without a token.
    MetricsOnly,
}

/// Binds `listen` as a non-blocking std listener.
fn bind(listen: SocketAddr) -> Result<(std::net::TcpListener, SocketAddr), WebError> {
    let err = |source| WebError::Bind {
        addr: listen,
        source,
    };
    let listener = std::net::TcpListener::bind(listen).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    let addr = listener.local_addr().map_err(err)?;
    Ok((listener, addr))
}

/// The routes of a metrics-only listener: `GET /metrics`, everything else 404 or 405.
fn metrics_only() -> axum::Router<AppState> {
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(crate::metrics::public_metrics),
        )
        .fallback(|| async {
            crate::error::ApiError::NotFound {
                field: None,
                message: "this listener serves /metrics only".into(),
            }
        })
        .method_not_allowed_fallback(|| async { crate::routes::method_not_allowed() })
}

/// How a listener guards itself against hostile clients.
#[derive(Debug, Clone)]
struct Limits {
    guard: Arc<GuardStats>,
    header_timeout: Duration,
    max_body_bytes: usize,
}

/// Serves `app` on `listener` (TLS when `tls`), behind the guard: request heads and TLS
/// handshakes bounded in time, bodies in size, each refusal counted.
fn serve(
    listener: std::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: axum::Router<AppState>,
    state: AppState,
    handle: &axum_server::Handle,
    limits: &Limits,
) -> JoinHandle<std::io::Result<()>> {
    let app = app
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&limits.guard),
            count_large_bodies,
        ))
        .with_state(state)
        .into_make_service_with_connect_info::<SocketAddr>();
    let header_timeout = limits.header_timeout;
    match tls {
        Some(tls) => {
            let config = axum_server::tls_rustls::RustlsConfig::from_config(tls);
            let acceptor = Guarded {
                inner: RustlsAcceptor::new(config).handshake_timeout(TLS_HANDSHAKE_TIMEOUT),
                stats: Arc::clone(&limits.guard),
                header_timeout,
            };
            let server = axum_server::from_tcp(listener)
                .acceptor(acceptor)
                .handle(handle.clone());
            tokio::spawn(async move { server.serve(app).await })
        }
        None => {
            let acceptor = Guarded {
                inner: DefaultAcceptor,
                stats: Arc::clone(&limits.guard),
                header_timeout,
            };
            let server = axum_server::from_tcp(listener)
                .acceptor(acceptor)
                .handle(handle.clone());
            tokio::spawn(async move { server.serve(app).await })
        }
    }
}

/// How long a stop waits for requests in progress.
const GRACE: Duration = Duration::from_secs(5);

/// Starts the server: binds `config.listen`, subscribes the event ring to the node's bus,
/// and serves until [`WebServer::shutdown`]. Runs on the current tokio runtime (the
/// node's actix system, or any other).
pub async fn start(config: WebConfig, ctx: WebContext) -> Result<WebServer, WebError> {
    launch(config, ctx, Endpoints::Api).await
}

/// Starts a listener that serves `GET /metrics` alone, over plain HTTP and without a
/// token, as the Lustre exporters do (`--metrics-listen`), for a node that has no API
/// server (else see [`WebServer::serve_metrics`]). Every other path answers 404 and
/// nothing can be changed through it.
pub async fn start_metrics(
    listen: SocketAddr,
    exporter_labels: bool,
    ctx: WebContext,
) -> Result<WebServer, WebError> {
    let mut config = WebConfig::plain_http(listen, false);
    config.public_metrics = true;
    config.metrics_exporter_labels = exporter_labels;
    launch(config, ctx, Endpoints::MetricsOnly).await
}

async fn launch(
    config: WebConfig,
    ctx: WebContext,
    endpoints: Endpoints,
) -> Result<WebServer, WebError> {
    let (listener, addr) = bind(config.listen)?;
    let tls = match &config.transport {
        Transport::Https { cert, key } => Some(crate::tls::server_config(cert, key)?),
        Transport::PlainHttp { .. } => None,
    };
    let tls_on = tls.is_some();
    let mutations_allowed = match config.transport {
        Transport::Https { .. } => true,
        Transport::PlainHttp { allow_mutations } => allow_mutations,
    };

    let ring = Arc::new(EventRing::new(config.event_capacity, ctx.sink.clone()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let feeding = Arc::new(AtomicBool::new(true));
    let bus = ctx.node.events().subscribe();
    let drop_bus = ctx.node.events().subscribe();
    let feeder = {
        let (ring, clock, stop, feeding) = (
            Arc::clone(&ring),
            ctx.node.clock(),
            stop_rx.clone(),
            Arc::clone(&feeding),
        );
        tokio::spawn(async move {
            feed(ring, bus, clock, stop).await;
            feeding.store(false, Ordering::SeqCst);
        })
    };
    let drops = Arc::new(crate::forward_drops::ForwardDrops::default());
    let counter = tokio::spawn(crate::forward_drops::count(
        Arc::clone(&drops),
        drop_bus,
        stop_rx.clone(),
    ));

    let guard = Arc::new(GuardStats::default());
    let (router, doc) = crate::routes::build();
    let state = AppState {
        shared: Arc::new(Shared {
            node: ctx.node,
            tokens: ctx.tokens,
            ring: Arc::clone(&ring),
            sink: ctx.sink,
            tunables: tokio::sync::Mutex::new(ctx.tunables),
            mutations_allowed,
            public_metrics: config.public_metrics,
            metrics_exporter_labels: config.metrics_exporter_labels,
            drops,
            max_timeout: config.max_ping_timeout,
            stop: stop_rx,
            feeding,
            openapi: doc.to_json().unwrap_or_default(),
            config: ctx.config,
            nis: ctx.nis,
            udsp: tokio::sync::Mutex::new(()),
            guard: Arc::clone(&guard),
            throttle: AuthThrottle::default(),
            streams: Arc::new(Semaphore::new(config.max_event_streams)),
            max_streams: config.max_event_streams,
            stats_base: std::sync::Mutex::new(None),
            revocations: watch::Sender::new(0),
        }),
    };
    let app = match endpoints {
        Endpoints::Api => router,
        Endpoints::MetricsOnly => metrics_only(),
    };
    let limits = Limits {
        guard: Arc::clone(&guard),
        header_timeout: config.header_timeout,
        max_body_bytes: config.max_body_bytes,
    };
    let handle = axum_server::Handle::new();
    let serve = serve(listener, tls, app, state.clone(), &handle, &limits);
    match endpoints {
        Endpoints::Api => {
            tracing::info!(%addr, https = tls_on, mutations_allowed, "REST API listening");
        }
        Endpoints::MetricsOnly => tracing::info!(%addr, "metrics listening (plain HTTP, no token)"),
    }
    Ok(WebServer {
        addr,
        https: tls_on,
        handle,
        stop: stop_tx,
        serve,
        tasks: vec![feeder, counter],
        ring,
        state,
        guard,
        limits,
    })
}

/// Counts and logs every 413 (a body over the limit, refused by the body extractor).
async fn count_large_bodies(
    axum::extract::State(guard): axum::extract::State<Arc<GuardStats>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = request.uri().path().to_owned();
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let response = next.run(request).await;
    if response.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        guard.count(Refusal::BodyTooLarge);
        tracing::warn!(?peer, %path, "API: request body over the limit: 413");
    }
    response
}

impl WebServer {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The counters of refused and cut-off clients.
    pub fn guard_stats(&self) -> Arc<GuardStats> {
        Arc::clone(&self.guard)
    }

    /// The event ring (the events `GET /api/v1/events` serves).
    pub fn ring(&self) -> Arc<EventRing> {
        Arc::clone(&self.ring)
    }

    /// Also serves `GET /metrics` alone on `listen`, over plain HTTP and without a token,
    /// from this server's state (its tunables, event ring and forward drop counts):
    /// `--metrics-listen` beside the API. Every other path answers 404.
    pub async fn serve_metrics(&self, listen: SocketAddr) -> Result<WebServer, WebError> {
        let (listener, addr) = bind(listen)?;
        let handle = axum_server::Handle::new();
        let serve = serve(
            listener,
            None,
            metrics_only(),
            self.state.clone(),
            &handle,
            &self.limits,
        );
        tracing::info!(%addr, "metrics listening (plain HTTP, no token)");
        let (stop, _) = watch::channel(false);
        Ok(WebServer {
            addr,
            https: false,
            handle,
            stop,
            serve,
            tasks: Vec::new(),
            ring: Arc::clone(&self.ring),
            state: self.state.clone(),
            guard: Arc::clone(&self.guard),
            limits: self.limits.clone(),
        })
    }

    /// Stops: event streams end, requests in progress get a few seconds, the listener
    /// closes.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        self.handle.graceful_shutdown(Some(GRACE));
        let _ = self.serve.await;
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
