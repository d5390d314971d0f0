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
    ApiEvent, ConfigStore, EventBody, EventSink, LogCursor, LogPage, NiKindDoc, Role, SinkError,
    TokenEntry, TokenError, TokenIdentity, TokenVerifier, Transport, WebConfig, WebContext,
    WebError, WebServer,
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

/// The store's API tokens, as the server checks, makes, lists and revokes them.
#[derive(Debug, Clone)]
pub struct StoreTokens(pub Arc<Store>);

fn web_role(role: store::Role) -> Role {
    match role {
        store::Role::Admin => Role::Admin,
        store::Role::Reader => Role::Reader,
    }
}

/// A refusal of the store's token table as the API's token error.
fn token_error(name: &str, e: store::StoreError) -> TokenError {
    match e {
        store::StoreError::InvalidArgument {
            what: "token name", ..
        } => TokenError::BadName {
            name: name.to_owned(),
        },
        store::StoreError::InvalidArgument {
            what: "token secret",
            ..
        } => TokenError::ShortSecret {
            min: store::MIN_SECRET_BYTES,
        },
        store::StoreError::AlreadyExists { what: "token", .. } => TokenError::Exists {
            name: name.to_owned(),
        },
        store::StoreError::NotFound { what: "token", .. } => TokenError::NotFound {
            name: name.to_owned(),
        },
        other => TokenError::Failed {
            source: Box::new(other),
        },
    }
}

impl TokenVerifier for StoreTokens {
    fn verify(&self, secret: &str) -> Option<TokenIdentity> {
        match self.0.verify_token(secret) {
            Ok(Some(t)) => Some(TokenIdentity {
                name: t.name,
                role: web_role(t.role),
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::error!(%e, "token check failed in the store");
                None
            }
        }
    }

    fn create_token(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_ms: u64,
    ) -> Result<(), TokenError> {
        let role = match role {
            Role::Admin => store::Role::Admin,
            Role::Reader => store::Role::Reader,
        };
        self.0
            .create_token_at(name, role, secret, created_ms)
            .map_err(|e| token_error(name, e))
    }

    fn tokens(&self) -> Result<Vec<TokenEntry>, TokenError> {
        Ok(self
            .0
            .tokens()
            .map_err(|e| token_error("", e))?
            .into_iter()
            .map(|t| TokenEntry {
                name: t.name,
                role: web_role(t.role),
                created_ms: t.created_ms,
            })
            .collect())
    }

    fn revoke_token(&self, name: &str) -> Result<(), TokenError> {
        self.0.revoke_token(name).map_err(|e| token_error(name, e))
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

/// A stored route reason, `DOWN (CAUSE)` (as [`to_store`] writes it), as its two parts.
fn route_reason(reason: &str) -> (String, String) {
    match reason.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
        Some((down, cause)) => (down.to_owned(), cause.to_owned()),
        None => (reason.to_owned(), String::new()),
    }
}

fn kind(q: store::RecoveryQueue) -> NiKindDoc {
    match q {
        store::RecoveryQueue::LocalNi => NiKindDoc::Local,
        store::RecoveryQueue::PeerNi => NiKindDoc::Peer,
    }
}

/// An event of the store's log as the API shows it. What the store does not keep reads
/// empty: the cause of a route that came up, and a health cause that is not a message
/// status.
pub fn from_store(event: &store::Event) -> EventBody {
    use store::Event as S;
    let health = |ni_kind, nid: &Nid, before, after, cause: &Option<_>| EventBody::Health {
        ni_kind,
        nid: nid.to_string(),
        before,
        after,
        cause: cause.map(|c: lnet::health::HealthStatus| c.name().to_owned()),
    };
    match event {
        S::NiHealth {
            nid,
            before,
            after,
            cause,
        } => health(NiKindDoc::Local, nid, *before, *after, cause),
        S::PeerNiHealth {
            nid,
            before,
            after,
            cause,
        } => health(NiKindDoc::Peer, nid, *before, *after, cause),
        S::NiState { nid, up } => EventBody::NiStatus {
            nid: nid.to_string(),
            status: if *up { "up" } else { "down" }.to_owned(),
        },
        S::RouteState {
            net,
            gateway,
            up,
            reason,
        } => {
            let (down, cause) = match (up, reason) {
                (true, _) => (None, String::new()),
                (false, Some(r)) => {
                    let (down, cause) = route_reason(r);
                    (Some(down), cause)
                }
                (false, None) => (Some(String::new()), String::new()),
            };
            EventBody::Route {
                net: net.to_string(),
                gateway: gateway.to_string(),
                down,
                cause,
            }
        }
        S::RecoveryQueued { queue, nid } => EventBody::RecoveryQueued {
            queue: kind(*queue),
            nid: nid.to_string(),
        },
        S::RecoveryPing {
            queue,
            nid,
            ping_count,
            next_ping_ms,
        } => EventBody::RecoveryPing {
            queue: kind(*queue),
            nid: nid.to_string(),
            ping_count: *ping_count,
            next_ping_ms: *next_ping_ms,
        },
        S::RecoveryLeft { queue, nid } => EventBody::RecoveryLeft {
            queue: kind(*queue),
            nid: nid.to_string(),
        },
        S::Resend {
            status,
            from_ni,
            to_peer_ni,
            retry,
        } => EventBody::Resend {
            status: status.name().to_owned(),
            from_ni: from_ni.to_string(),
            to_peer_ni: to_peer_ni.to_string(),
            retry: *retry,
        },
        S::ConfigChanged { change } => EventBody::Other {
            description: change.clone(),
        },
        S::NetStatus { net, up, reason } => EventBody::NetStatus {
            net: net.to_string(),
            up: *up,
            reason: reason.clone(),
        },
        S::ForwardDropped { src, dest, reason } => EventBody::ForwardDropped {
            src: src.to_string(),
            dest: dest.to_string(),
            reason: reason.clone(),
        },
        S::Admin {
            token,
            action,
            target,
            detail,
        } => EventBody::Admin {
            token: token.clone(),
            action: action.clone(),
            target: target.clone(),
            detail: detail.clone(),
        },
        S::EventsLost { count } => EventBody::EventsLost { count: *count },
        other => EventBody::Other {
            description: format!("{other:?}"),
        },
    }
}

/// The wall-clock time now, in milliseconds since the Unix epoch (0 before it).
fn wall_ms() -> u64 {
    #[allow(clippy::disallowed_types)] // the log keeps wall-clock time by definition
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    now
}

impl EventSink for StoreLog {
    /// Appends the event under the API's id, with the wall-clock time it was recorded at
    /// (so that events of earlier runs, whose node clock is gone, keep a time).
    fn record(&self, event: &ApiEvent) -> Result<(), SinkError> {
        let e = to_store(&event.event)?;
        self.0
            .append_event_with_id(event.id, event.at_ms, Some(wall_ms()), &e)
            .map_err(kept)
    }

    fn last_id(&self) -> Result<u64, SinkError> {
        Ok(self.0.last_event_id().map_err(kept)?.unwrap_or(0))
    }

    fn read(&self, from: LogCursor, limit: usize) -> Result<Option<LogPage>, SinkError> {
        let records = match from {
            LogCursor::After(after) => self.0.events_after(after, limit),
            LogCursor::Before(before) => self.0.events_before(before, limit),
        }
        .map_err(kept)?;
        let first_id = match self.0.first_event_id().map_err(kept)? {
            Some(id) => id,
            None => self.last_id()?.saturating_add(1),
        };
        Ok(Some(LogPage {
            first_id,
            events: records
                .iter()
                .map(|r| ApiEvent {
                    id: r.id,
                    at_ms: r.at_ms,
                    wall_ms: r.wall_ms,
                    event: from_store(&r.event),
                })
                .collect(),
        }))
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

    fn set_draining(&self, draining: bool) -> Result<(), SinkError> {
        self.0.set_draining(draining).map_err(kept)
    }

    fn set_udsp(&self, rules: &[lnet::config::UdspRule]) -> Result<(), SinkError> {
        self.0.set_udsp_rules(rules).map_err(kept)
    }

    fn put_fault_rule(&self, id: RuleId, rule: &FaultRule) -> Result<(), SinkError> {
        let id = u32::try_from(id.0).map_err(|_| SinkError::Refused {
            reason: format!("fault rule id {} is over the store's ids", id.0),
            source: None,
        })?;
        self.0.put_fault_rule(id, rule).map_err(kept)
    }

    fn delete_fault_rule(&self, id: RuleId) -> Result<(), SinkError> {
        let id = u32::try_from(id.0).map_err(|_| SinkError::Refused {
            reason: format!("fault rule id {} is over the store's ids", id.0),
            source: None,
        })?;
        self.0.delete_fault_rule(id).map_err(kept)
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

    fn delete_peer(&self, primary: Nid, nids: &[Nid]) -> Result<(), SinkError> {
        let done = |r: Result<(), store::StoreError>| match r {
            Err(store::StoreError::NotFound { .. }) => Ok(()),
            r => r.map_err(kept),
        };
        if nids.is_empty() {
            return done(self.0.delete_peer(&primary));
        }
        for nid in nids {
            done(self.0.delete_peer_ni(&primary, nid))?;
        }
        Ok(())
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
        nis: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: u64, event: EventBody) -> ApiEvent {
        ApiEvent {
            id,
            at_ms: id * 10,
            wall_ms: None,
            event,
        }
    }

    fn bodies() -> Vec<EventBody> {
        vec![
            EventBody::Health {
                ni_kind: NiKindDoc::Peer,
                nid: "10.0.0.2@tcp".into(),
                before: 1000,
                after: 950,
                cause: Some("LOCAL_TIMEOUT".into()),
            },
            EventBody::Health {
                ni_kind: NiKindDoc::Local,
                nid: "10.0.0.1@tcp".into(),
                before: 950,
                after: 1000,
                cause: None,
            },
            EventBody::NiStatus {
                nid: "10.0.0.1@tcp".into(),
                status: "down".into(),
            },
            EventBody::RecoveryPing {
                queue: NiKindDoc::Local,
                nid: "10.0.0.1@tcp".into(),
                ping_count: 2,
                next_ping_ms: 4000,
            },
            EventBody::Route {
                net: "tcp1".into(),
                gateway: "10.0.0.9@tcp".into(),
                down: Some("gateway reports tcp1 down (ping)".into()),
                cause: "PingReply".into(),
            },
            EventBody::NetStatus {
                net: "tcp".into(),
                up: false,
                reason: "Silent".into(),
            },
            EventBody::ForwardDropped {
                src: "10.0.0.2@tcp".into(),
                dest: "10.0.1.2@tcp1".into(),
                reason: "no route".into(),
            },
            EventBody::Admin {
                token: "ops".into(),
                action: "add_route".into(),
                target: Some("tcp1".into()),
                detail: "hops 1".into(),
            },
            EventBody::EventsLost { count: 3 },
        ]
    }

    #[test]
    fn every_event_reads_back_from_the_store_as_it_was_recorded() {
        for b in bodies() {
            let stored = to_store(&b).unwrap();
            assert_eq!(from_store(&stored), b);
        }
        // An up route keeps no cause.
        let up = EventBody::Route {
            net: "tcp1".into(),
            gateway: "10.0.0.9@tcp".into(),
            down: None,
            cause: "PingReply".into(),
        };
        let EventBody::Route { down, cause, .. } = from_store(&to_store(&up).unwrap()) else {
            panic!("not a route event");
        };
        assert_eq!((down, cause.as_str()), (None, ""));
    }

    #[test]
    fn the_log_keeps_the_api_ids_and_pages_back_and_forward() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let log = StoreLog(Arc::clone(&store));
        assert_eq!(log.last_id().unwrap(), 0);
        let bodies = bodies();
        for (i, b) in bodies.iter().enumerate() {
            log.record(&ev(i as u64 + 1, b.clone())).unwrap();
        }
        // A refused event leaves its id unused; the next keeps its own.
        let bad = EventBody::NiStatus {
            nid: "not a nid".into(),
            status: "up".into(),
        };
        assert!(log.record(&ev(10, bad)).is_err());
        log.record(&ev(11, EventBody::EventsLost { count: 1 }))
            .unwrap();
        assert_eq!(log.last_id().unwrap(), 11);

        let newest = log.read(LogCursor::Before(u64::MAX), 3).unwrap().unwrap();
        let ids: Vec<u64> = newest.events.iter().map(|e| e.id).collect();
        assert_eq!(ids, [8, 9, 11]);
        assert_eq!(newest.first_id, 1);
        assert!(newest.events.iter().all(|e| e.wall_ms.is_some()));
        assert_eq!(newest.events[0].event, bodies[7]);
        assert_eq!(newest.events[0].at_ms, 80);
        let older = log.read(LogCursor::Before(8), 100).unwrap().unwrap();
        assert_eq!(older.events.len(), 7);
        let forward = log.read(LogCursor::After(9), 100).unwrap().unwrap();
        let ids: Vec<u64> = forward.events.iter().map(|e| e.id).collect();
        assert_eq!(ids, [11]);
    }
}
