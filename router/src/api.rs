//! The daemon's REST API ([`web`]): its settings from the command line, API tokens from the
//! store, and the store's event log as the place every API event is recorded.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use actors::Node;
use lnet::fault::{FaultRule, RuleId};
use lnet::tunables::Tunables;
use lnet::{Net, Nid};
use store::Store;
use web::{
    ApiEvent, ConfigStore, EventBody, EventSink, NiKindDoc, Role, SinkError, TokenIdentity,
    TokenVerifier, Transport, WebConfig, WebContext, WebError, WebServer,
};

/// Where and how the API listens.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// The listening address.
    pub listen: SocketAddr,
    /// HTTPS with a certificate, or plain HTTP.
    pub transport: Transport,
}

impl ApiSettings {
    /// The settings for the command-line flags: HTTPS with `cert` and `key`, unless
    /// `plain_http` (then read-only unless `plain_http_mutations`).
    pub fn from_flags(
        listen: SocketAddr,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        plain_http: bool,
        plain_http_mutations: bool,
    ) -> Result<ApiSettings, String> {
        let transport = if plain_http {
            Transport::PlainHttp {
                allow_mutations: plain_http_mutations,
            }
        } else {
            match (cert, key) {
                (Some(cert), Some(key)) => Transport::Https { cert, key },
                _ => {
                    return Err(
                        "--api-listen needs --tls-cert and --tls-key (or --plain-http)".to_owned(),
                    )
                }
            }
        };
        Ok(ApiSettings { listen, transport })
    }
}

/// The store's API tokens, as the server checks them.
#[derive(Debug, Clone)]
pub struct StoreTokens(pub Arc<Store>);

impl TokenVerifier for StoreTokens {
    fn verify(&self, secret: &str) -> Option<TokenIdentity> {
        match self.0.verify_token(secret) {
            Ok(Some(t)) => Some(TokenIdentity {
                name: t.name,
                role: match t.role {
                    store::Role::Admin => Role::Admin,
                    store::Role::Reader => Role::Reader,
                },
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::error!(%e, "token check failed in the store");
                None
            }
        }
    }
}

/// The store's event log, as the server records events in it.
#[derive(Debug, Clone)]
pub struct StoreLog(pub Arc<Store>);

/// An event field that does not read as the `what` it names.
fn not_a(what: &str, text: &str, e: lnet::NidError) -> SinkError {
    SinkError::Refused {
        reason: format!("not a {what}: {text}"),
        source: Some(Box::new(e)),
    }
}

fn nid(s: &str) -> Result<Nid, SinkError> {
    s.parse().map_err(|e| not_a("NID", s, e))
}

fn net(s: &str) -> Result<Net, SinkError> {
    s.parse().map_err(|e| not_a("net", s, e))
}

fn status(s: &str) -> Option<lnet::health::HealthStatus> {
    lnet::health::HealthStatus::ALL
        .into_iter()
        .find(|h| h.name() == s)
}

fn queue(k: NiKindDoc) -> store::RecoveryQueue {
    match k {
        NiKindDoc::Local => store::RecoveryQueue::LocalNi,
        NiKindDoc::Peer => store::RecoveryQueue::PeerNi,
    }
}

/// The store's form of an API event.
pub fn to_store(body: &EventBody) -> Result<store::Event, SinkError> {
    use store::Event as S;
    Ok(match body {
        EventBody::Health {
            ni_kind,
            nid: n,
            before,
            after,
            cause,
        } => {
            let cause = cause.as_deref().and_then(status);
            match ni_kind {
                NiKindDoc::Local => S::NiHealth {
                    nid: nid(n)?,
                    before: *before,
                    after: *after,
                    cause,
                },
                NiKindDoc::Peer => S::PeerNiHealth {
                    nid: nid(n)?,
                    before: *before,
                    after: *after,
                    cause,
                },
            }
        }
        EventBody::NiStatus { nid: n, status } => S::NiState {
            nid: nid(n)?,
            up: status == "up",
        },
        EventBody::RecoveryQueued { queue: q, nid: n } => S::RecoveryQueued {
            queue: queue(*q),
            nid: nid(n)?,
        },
        EventBody::RecoveryPing {
            queue: q,
            nid: n,
            ping_count,
            next_ping_ms,
        } => S::RecoveryPing {
            queue: queue(*q),
            nid: nid(n)?,
            ping_count: *ping_count,
            next_ping_ms: *next_ping_ms,
        },
        EventBody::RecoveryLeft { queue: q, nid: n } => S::RecoveryLeft {
            queue: queue(*q),
            nid: nid(n)?,
        },
        EventBody::Resend {
            status: st,
            from_ni,
            to_peer_ni,
            retry,
        } => S::Resend {
            status: status(st).ok_or_else(|| SinkError::Refused {
                reason: format!("not a health status: {st}"),
                source: None,
            })?,
            from_ni: nid(from_ni)?,
            to_peer_ni: nid(to_peer_ni)?,
            retry: *retry,
        },
        EventBody::Route {
            net: n,
            gateway,
            down,
            cause,
        } => S::RouteState {
            net: net(n)?,
            gateway: nid(gateway)?,
            up: down.is_none(),
            reason: down.as_ref().map(|d| format!("{d} ({cause})")),
        },
        EventBody::NetStatus { net: n, up, reason } => S::NetStatus {
            net: net(n)?,
            up: *up,
            reason: reason.clone(),
        },
        EventBody::ForwardDropped { src, dest, reason } => S::ForwardDropped {
            src: nid(src)?,
            dest: nid(dest)?,
            reason: reason.clone(),
        },
        EventBody::Admin {
            token,
            action,
            target,
            detail,
        } => S::Admin {
            token: token.clone(),
            action: action.clone(),
            target: target.clone(),
            detail: detail.clone(),
        },
        EventBody::EventsLost { count } => S::EventsLost { count: *count },
        EventBody::Other { description } => S::ConfigChanged {
            change: description.clone(),
        },
    })
}

impl EventSink for StoreLog {
    fn record(&self, event: &ApiEvent) -> Result<(), SinkError> {
        let e = to_store(&event.event)?;
        self.0
            .append_event(event.at_ms, &e)
            .map(|_| ())
            .map_err(kept)
    }
}

/// The store, as the API keeps its configuration changes there.
#[derive(Debug, Clone)]
pub struct StoreConfig(pub Arc<Store>);

/// A store error as the sink's failure, kept as its cause.
fn kept(e: store::StoreError) -> SinkError {
    SinkError::Failed {
        source: Box::new(e),
    }
}

impl ConfigStore for StoreConfig {
    fn add_route(&self, route: &lnet::route::RouteSpec) -> Result<(), SinkError> {
        self.0
            .add_route(&lnet::config::Route {
                net: route.net,
                gateway: route.gateway,
                hop: route.hops.map(i64::from),
                priority: Some(route.priority),
                health_sensitivity: None,
                state: None,
                route_type: None,
            })
            .map_err(kept)
    }

    fn delete_route(&self, net: Net, gateway: Nid) -> Result<(), SinkError> {
        self.0.delete_route(net, &gateway).map_err(kept)
    }

    fn set_tunable(&self, name: lnet::tunables::TunableName, value: u32) -> Result<(), SinkError> {
        self.0.set_tunable(name, value).map_err(kept)
    }

    fn put_fault_rule(&self, id: RuleId, rule: &FaultRule) -> Result<(), SinkError> {
        let id = u32::try_from(id.0).map_err(|_| SinkError::Refused {
            reason: format!("fault rule id {} is over the store's ids", id.0),
            source: None,
        })?;
        self.0.put_fault_rule(id, rule).map_err(kept)
    }

    fn delete_fault_rule(&self, ni: Nid, id: RuleId) -> Result<(), SinkError> {
        let id = u32::try_from(id.0).map_err(|_| SinkError::Refused {
            reason: format!("fault rule id {} is over the store's ids", id.0),
            source: None,
        })?;
        self.0.delete_fault_rule(&ni, id).map_err(kept)
    }

    fn put_peer(&self, primary: Nid, nids: &[Nid], multi_rail: bool) -> Result<(), SinkError> {
        self.0
            .put_peer(&lnet::config::Peer {
                primary_nid: primary,
                multi_rail,
                peer_state: None,
                peer_nis: nids.iter().map(|n| lnet::config::PeerNi::new(*n)).collect(),
            })
            .map_err(kept)
    }
}

/// Starts the API for `node`.
pub async fn start(
    node: Node,
    settings: &ApiSettings,
    tokens: Arc<dyn TokenVerifier>,
    sink: Option<Arc<dyn EventSink>>,
    config_store: Option<Arc<dyn ConfigStore>>,
    tunables: Tunables,
) -> Result<WebServer, WebError> {
    let ctx = WebContext {
        node,
        tokens,
        sink,
        tunables,
        config: config_store,
    };
    start_with(settings, ctx, false).await
}

/// Starts the API for `ctx` as [`start`] does; with `exporter_labels` its `lustre_*`
/// series carry the HPE/GSI exporters' `component` and `target` labels.
pub async fn start_with(
    settings: &ApiSettings,
    ctx: WebContext,
    exporter_labels: bool,
) -> Result<WebServer, WebError> {
    let mut config = WebConfig::plain_http(settings.listen, false);
    config.transport = settings.transport.clone();
    config.metrics_exporter_labels = exporter_labels;
    web::start(config, ctx).await
}

/// Where `/metrics` is also served alone (`--metrics-listen`), and how its series are
/// labelled.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsSettings {
    /// The plain-HTTP, token-free listener of `/metrics`; `None`: none (the default).
    pub listen: Option<SocketAddr>,
    /// `--metrics-exporter-labels`: the `lustre_*` series also carry `component="lnet"`
    /// and `target="lnet"`, as the HPE and GSI Lustre exporters label them.
    pub exporter_labels: bool,
}
