//! The JSON endpoints under `/api/v1`, each with its OpenAPI description.

use std::collections::BTreeMap;
use std::time::Duration;

use actors::fault::{
    FaultAction, FaultRule, Hooks, MsgTypes, NidMatch, RuleId, RuleStats, Trigger,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::health::{HealthStatus, HealthValue};
use lnet::recovery::RecoveryKind;
use lnet::{MsgType, Net, Nid};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::dto::{self, from_model};
use crate::error::{ApiError, ErrorBody};
use crate::events::ApiEvent;
use crate::extract::{Admin, Body, PathParams, QueryParams, Reader};
use crate::state::AppState;

/// The tag of the read-only documents.
pub(crate) const TAG_SHOW: &str = "show";
/// The tag of the changes.
pub(crate) const TAG_CHANGE: &str = "change";
/// The tag of the event endpoints.
pub(crate) const TAG_EVENTS: &str = "events";

/// Reads `text` as a NID, or a 400 naming `field`.
pub(crate) fn parse_nid(field: &str, text: &str) -> Result<Nid, ApiError> {
    text.parse::<Nid>()
        .map_err(|e| ApiError::bad_request(field, format!("{text:?} is not a NID: {e}")))
}

// ---------------------------------------------------------------------------------------
// Show documents.

/// `lnetctl net show -v 4`.
#[utoipa::path(get, path = "/api/v1/nets", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every net with its local NIs", body = dto::NetShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_nets(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<dto::NetShow>, ApiError> {
    Ok(Json(from_model(&s.shared.node.net_show().await?)?))
}

/// `lnetctl peer show -v 4`.
#[utoipa::path(get, path = "/api/v1/peers", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every peer with its peer NIs", body = dto::PeerShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_peers(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<dto::PeerShow>, ApiError> {
    Ok(Json(from_model(&s.shared.node.peer_show().await?)?))
}

/// `lnetctl stats show`.
#[utoipa::path(get, path = "/api/v1/stats", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The node's message counters", body = dto::StatsShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_stats(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<dto::StatsShow>, ApiError> {
    Ok(Json(from_model(&s.shared.node.stats_show().await?)?))
}

/// `lnetctl global show`.
#[utoipa::path(get, path = "/api/v1/global", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The global tunables", body = dto::GlobalShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ))]
pub(crate) async fn get_global(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<dto::GlobalShow>, ApiError> {
    let t = s.shared.tunables.lock().await.clone();
    Ok(Json(from_model(&lnet::show::GlobalShow::from_tunables(
        &t,
    ))?))
}

/// `lnetctl debug recovery --local`.
#[utoipa::path(get, path = "/api/v1/recovery/local", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The local NI recovery queue", body = dto::RecoveryShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_recovery_local(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<dto::RecoveryShow>, ApiError> {
    Ok(Json(from_model(
        &s.shared.node.recovery_show(RecoveryKind::LocalNi).await?,
    )?))
}

/// `lnetctl debug recovery --peer`.
#[utoipa::path(get, path = "/api/v1/recovery/peer", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The peer NI recovery queue", body = dto::RecoveryShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_recovery_peer(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<dto::RecoveryShow>, ApiError> {
    Ok(Json(from_model(
        &s.shared.node.recovery_show(RecoveryKind::PeerNi).await?,
    )?))
}

/// Node-wide counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    /// Each counter by name (`resend_count`, `successful_resends`, `failed_resends`,
    /// `response_timeout_count`, `late_messages`, `drop_count`, ...).
    pub counters: BTreeMap<String, u64>,
}

/// The node-wide counters (resends, response timeouts, late messages, drops).
#[utoipa::path(get, path = "/api/v1/counters", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The node-wide counters", body = Counters),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_counters(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<Counters>, ApiError> {
    let c = s.shared.node.counters().await?;
    Ok(Json(Counters {
        counters: c.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }))
}

// ---------------------------------------------------------------------------------------
// Events.

/// The default page size of `GET /api/v1/events`.
pub const EVENTS_PAGE: usize = 100;
/// The largest page size of `GET /api/v1/events`.
pub const EVENTS_PAGE_MAX: usize = 1000;

/// Where a page of events starts and how long it is.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Events with an id above this one (0 or absent: from the oldest kept).
    #[param(minimum = 0)]
    pub after: Option<u64>,
    /// At most this many (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
}

/// A page of events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventPage {
    /// The events, oldest first.
    pub events: Vec<ApiEvent>,
    /// The oldest id the server still keeps.
    pub first_available_id: u64,
    /// The newest id recorded so far (0: none yet).
    pub last_id: u64,
    /// Events after `after` that the server no longer keeps.
    pub missed: u64,
    /// The `after` of the next page.
    pub next_after: u64,
}

/// The last events (health, NI status, recovery, resends, routes, admin changes), paged.
#[utoipa::path(get, path = "/api/v1/events", tag = TAG_EVENTS,
    security(("bearer" = [])),
    params(EventsQuery),
    responses(
        (status = 200, description = "A page of events", body = EventPage),
        (status = 400, description = "A bad query parameter", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 422, description = "A limit out of range", body = ErrorBody),
    ))]
pub(crate) async fn get_events(
    State(s): State<AppState>,
    _r: Reader,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let after = q.after.unwrap_or(0);
    let limit = match q.limit {
        None => EVENTS_PAGE,
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=EVENTS_PAGE_MAX).contains(n))
            .ok_or_else(|| {
                ApiError::unprocessable("limit", format!("limit is 1..={EVENTS_PAGE_MAX}"))
            })?,
    };
    let ring = &s.shared.ring;
    let page = ring.after(after, limit);
    let next_after = page.events.last().map_or(after, |e| e.id);
    Ok(Json(EventPage {
        first_available_id: page.first_id,
        last_id: ring.last_id(),
        missed: page.missed,
        next_after,
        events: page.events,
    }))
}

// ---------------------------------------------------------------------------------------
// Health resets.

/// How long a health reset waits for the NI's actor to show the new value.
const SETTLE_TRIES: u32 = 200;
const SETTLE_STEP: Duration = Duration::from_millis(10);

/// A health value to set.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthReset {
    /// The value, 0..=1000; absent: 1000 (full health).
    #[schema(minimum = 0, maximum = 1000)]
    pub value: Option<u64>,
}

/// An NI after a health reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthResetResult {
    /// The NI.
    pub nid: String,
    /// Local NI or peer NI.
    pub ni_kind: crate::events::NiKindDoc,
    /// Its health value now.
    pub health: u32,
    /// Whether it is on its recovery queue now.
    pub in_recovery: bool,
    /// The id of the admin event recorded.
    pub event_id: u64,
}

fn health_value(value: Option<u64>) -> Result<HealthValue, ApiError> {
    let v = value.unwrap_or(1000);
    u32::try_from(v)
        .ok()
        .and_then(|v| HealthValue::new(v).ok())
        .ok_or_else(|| ApiError::unprocessable("value", format!("health {v} is not in 0..=1000")))
}

/// The health of NI `nid` (local or peer) and whether it is queued for recovery.
async fn ni_state(s: &AppState, local: bool, nid: Nid) -> Result<(Option<u32>, bool), ApiError> {
    let node = &s.shared.node;
    let health = if local {
        node.local_nis()
            .await?
            .iter()
            .find(|v| v.nid == nid)
            .map(|v| v.health.get())
    } else {
        node.peers()
            .await?
            .iter()
            .flat_map(|p| p.nis.iter())
            .find(|v| v.nid == nid)
            .map(|v| v.health.get())
    };
    let kind = if local {
        RecoveryKind::LocalNi
    } else {
        RecoveryKind::PeerNi
    };
    let queued = node.recovery(kind).await?.iter().any(|e| e.key == nid);
    Ok((health, queued))
}

async fn reset_health(
    s: &AppState,
    admin: &Admin,
    local: bool,
    nid_text: &str,
    req: HealthReset,
) -> Result<HealthResetResult, ApiError> {
    let nid = parse_nid("nid", nid_text)?;
    let value = health_value(req.value)?;
    let node = &s.shared.node;
    if local {
        node.set_local_ni_health(nid, value).await?;
    } else {
        node.set_peer_ni_health(nid, value).await?;
    }
    // The NI's actor applies the value right after the node accepted it; wait (bounded)
    // until its view shows it and, at full health, until it has left its recovery queue.
    let mut state = ni_state(s, local, nid).await?;
    for _ in 0..SETTLE_TRIES {
        let settled = state.0 == Some(value.get()) && (!value.is_max() || !state.1);
        if settled {
            break;
        }
        tokio::time::sleep(SETTLE_STEP).await;
        state = ni_state(s, local, nid).await?;
    }
    let health = state.0.unwrap_or(value.get());
    let action = if local {
        "reset_local_ni_health"
    } else {
        "reset_peer_ni_health"
    };
    let event = s.admin_event(
        &admin.0,
        action,
        Some(nid.to_string()),
        format!("health set to {}", value.get()),
    );
    Ok(HealthResetResult {
        nid: nid.to_string(),
        ni_kind: if local {
            crate::events::NiKindDoc::Local
        } else {
            crate::events::NiKindDoc::Peer
        },
        health,
        in_recovery: state.1,
        event_id: event.id,
    })
}

/// Sets a local NI's health (`lnetctl net set --nid NID --health V`); without a value, back
/// to 1000, which also takes it off the local NI recovery queue.
#[utoipa::path(post, path = "/api/v1/nis/{nid}/health", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    request_body = HealthReset,
    responses(
        (status = 200, description = "The NI after the reset", body = HealthResetResult),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value outside 0..=1000", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn reset_local_health(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
    Body(req): Body<HealthReset>,
) -> Result<Json<HealthResetResult>, ApiError> {
    Ok(Json(reset_health(&s, &admin, true, &nid, req).await?))
}

/// Sets a peer NI's health (`lnetctl peer set --nid NID --health V`); without a value, back
/// to 1000, which also takes it off the peer NI recovery queue.
#[utoipa::path(post, path = "/api/v1/peer-nis/{nid}/health", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The peer NI", example = "10.0.1.1@tcp")),
    request_body = HealthReset,
    responses(
        (status = 200, description = "The peer NI after the reset", body = HealthResetResult),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such peer NI", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value outside 0..=1000", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn reset_peer_health(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
    Body(req): Body<HealthReset>,
) -> Result<Json<HealthResetResult>, ApiError> {
    Ok(Json(reset_health(&s, &admin, false, &nid, req).await?))
}

// ---------------------------------------------------------------------------------------
// Global tunables.

/// Tunables to set (`lnetctl set NAME VALUE` for each key given), checked with the
/// kernel's ranges; the keys left out keep their value. `lnd_timeout` is derived and
/// cannot be set.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct GlobalUpdate {
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub numa_range: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub max_interfaces: Option<i64>,
    #[schema(minimum = 0, maximum = 1)]
    pub discovery: Option<i64>,
    #[schema(minimum = 0, maximum = 1)]
    pub drop_asym_route: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub retry_count: Option<i64>,
    #[schema(minimum = 1, maximum = 4294967295_u64)]
    pub transaction_timeout: Option<i64>,
    #[schema(minimum = 0, maximum = 1000)]
    pub health_sensitivity: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub recovery_interval: Option<i64>,
    #[schema(minimum = 0, maximum = 100)]
    pub router_sensitivity: Option<i64>,
    #[schema(minimum = 0, maximum = 3)]
    pub response_tracking: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub recovery_limit: Option<i64>,
    #[schema(minimum = 1, maximum = 4294967295_u64)]
    pub max_recovery_ping_interval: Option<i64>,
}

impl GlobalUpdate {
    fn pairs(&self) -> [(lnet::tunables::TunableName, Option<i64>); 12] {
        use lnet::tunables::TunableName as N;
        [
            (N::NumaRange, self.numa_range),
            (N::MaxInterfaces, self.max_interfaces),
            (N::Discovery, self.discovery),
            (N::DropAsymRoute, self.drop_asym_route),
            (N::RetryCount, self.retry_count),
            (N::TransactionTimeout, self.transaction_timeout),
            (N::HealthSensitivity, self.health_sensitivity),
            (N::RecoveryInterval, self.recovery_interval),
            (N::RouterSensitivity, self.router_sensitivity),
            (N::ResponseTracking, self.response_tracking),
            (N::RecoveryLimit, self.recovery_limit),
            (N::MaxRecoveryPingInterval, self.max_recovery_ping_interval),
        ]
    }

    /// Applies the keys given to `t` in the order `lnetctl import` does: health sensitivity
    /// first, the transaction timeout around the retry count.
    fn apply(&self, t: &mut lnet::tunables::Tunables) -> Result<(), ApiError> {
        use lnet::tunables::TunableName as N;
        let mut global = lnet::config::Global::default();
        for (name, value) in self.pairs() {
            let Some(v) = value else { continue };
            let v = u32::try_from(v).map_err(|_| {
                ApiError::unprocessable(
                    name.as_str(),
                    format!("{name} = {v} is outside 0..=4294967295"),
                )
            })?;
            let slot = match name {
                N::NumaRange => &mut global.numa_range,
                N::MaxInterfaces => &mut global.max_interfaces,
                N::Discovery => &mut global.discovery,
                N::DropAsymRoute => &mut global.drop_asym_route,
                N::RetryCount => &mut global.retry_count,
                N::TransactionTimeout => &mut global.transaction_timeout,
                N::HealthSensitivity => &mut global.health_sensitivity,
                N::RecoveryInterval => &mut global.recovery_interval,
                N::RouterSensitivity => &mut global.router_sensitivity,
                N::ResponseTracking => &mut global.response_tracking,
                N::RecoveryLimit => &mut global.recovery_limit,
                _ => &mut global.max_recovery_ping_interval,
            };
            *slot = Some(v);
        }
        global.apply(t).map_err(tunable_error)
    }
}

fn tunable_error(e: lnet::tunables::TunableError) -> ApiError {
    use lnet::tunables::TunableError as E;
    let field = match &e {
        E::OutOfRange { name, .. } => name.as_str().to_owned(),
        E::TransactionTimeoutNotAboveRetryCount { .. } => "transaction_timeout".into(),
        E::RetryCountAboveTransactionTimeout { .. } | E::RetriesNeedHealth { .. } => {
            "retry_count".into()
        }
        E::UnknownName { name } => name.clone(),
        _ => "global".into(),
    };
    ApiError::Unprocessable {
        field: Some(field),
        message: e.to_string(),
    }
}

/// Sets global tunables (`lnetctl set`), each checked with the kernel's range; all or
/// nothing.
#[utoipa::path(put, path = "/api/v1/global", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = GlobalUpdate,
    responses(
        (status = 200, description = "The tunables now", body = dto::GlobalShow),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value outside its range, or an unknown key", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn put_global(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<GlobalUpdate>,
) -> Result<Json<dto::GlobalShow>, ApiError> {
    let mut current = s.shared.tunables.lock().await;
    let mut next = current.clone();
    req.apply(&mut next)?;
    if let Some(store) = &s.shared.config {
        for name in lnet::tunables::TunableName::ALL {
            if next.get(name) != current.get(name) {
                store
                    .set_tunable(name, next.get(name))
                    .map_err(|e| ApiError::Internal {
                        message: format!("{name} could not be kept: {e}"),
                    })?;
            }
        }
    }
    s.shared.node.set_tunables(next.clone()).await?;
    *current = next;
    let doc = lnet::show::GlobalShow::from_tunables(&current);
    drop(current);
    let changed: Vec<String> = req
        .pairs()
        .iter()
        .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
        .collect();
    s.admin_event(&admin.0, "set_global", None, changed.join(" "));
    Ok(Json(from_model(&doc)?))
}

// ---------------------------------------------------------------------------------------
// Peers.

/// A peer to add (`lnetctl peer add --prim_nid NID --nid NID,... [--non_mr]`); an existing
/// peer with this primary NID is replaced.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerAdd {
    /// The primary NID.
    #[schema(example = "10.0.1.1@tcp")]
    pub primary_nid: String,
    /// Its other NIDs (the primary NID is added when missing).
    #[serde(default)]
    pub nids: Vec<String>,
    /// Whether it is Multi-Rail (default true).
    pub multi_rail: Option<bool>,
}

/// Adds (or replaces) a peer.
#[utoipa::path(post, path = "/api/v1/peers", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = PeerAdd,
    responses(
        (status = 201, description = "The peer as `peer show` shows it", body = dto::ShowPeer),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A NID of this node, or a bad field", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_peer(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<PeerAdd>,
) -> Result<(StatusCode, Json<dto::ShowPeer>), ApiError> {
    let primary = parse_nid("primary_nid", &req.primary_nid)?;
    let mut nids = vec![primary];
    for (i, text) in req.nids.iter().enumerate() {
        let nid = parse_nid(&format!("nids[{i}]"), text)?;
        if !nids.contains(&nid) {
            nids.push(nid);
        }
    }
    if nids.iter().any(|n| n.net == Net::LO) {
        return Err(ApiError::unprocessable(
            "nids",
            "a peer has no NID on the loopback net",
        ));
    }
    let multi_rail = req.multi_rail.unwrap_or(true);
    let node = &s.shared.node;
    node.add_peer(primary, nids.clone(), multi_rail).await?;
    if let Some(store) = &s.shared.config {
        store
            .put_peer(primary, &nids, multi_rail)
            .map_err(|e| ApiError::Internal {
                message: format!("the peer could not be kept: {e}"),
            })?;
    }
    let show = node.peer_show().await?;
    let peer = show
        .peers
        .iter()
        .find(|p| p.primary_nid == primary)
        .ok_or_else(|| ApiError::Conflict {
            field: Some("primary_nid".into()),
            message: format!("peer {primary} was replaced while it was added"),
        })?;
    let doc: dto::ShowPeer = from_model(peer)?;
    let list: Vec<String> = nids.iter().map(Nid::to_string).collect();
    s.admin_event(
        &admin.0,
        "add_peer",
        Some(primary.to_string()),
        format!("nids={} multi_rail={multi_rail}", list.join(",")),
    );
    Ok((StatusCode::CREATED, Json(doc)))
}

// ---------------------------------------------------------------------------------------
// Ping and discovery.

/// The default timeout of a ping or a discovery.
pub const DEFAULT_PING_TIMEOUT_MS: u64 = 5000;

/// A NID to ping or discover.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PingRequest {
    /// The NID.
    #[schema(example = "10.0.1.1@tcp")]
    pub nid: String,
    /// The transaction timeout in milliseconds (default 5000; at most the server's
    /// limit, 60000 unless configured otherwise).
    #[schema(minimum = 1, maximum = 60000)]
    pub timeout_ms: Option<u64>,
}

/// A NID and its status in a ping reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PingNid {
    /// The NID.
    pub nid: String,
    /// `up` or `down`.
    pub status: String,
}

/// What a ping or a discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PingResult {
    /// The NID pinged.
    pub nid: String,
    /// Whether it answered.
    pub ok: bool,
    /// Its primary NID (the first of its ping info).
    pub primary_nid: Option<String>,
    /// Whether it is Multi-Rail.
    pub multi_rail: Option<bool>,
    /// Its NIDs with their status, in the order of its ping info.
    pub peer_nis: Vec<PingNid>,
    /// Discovery only: whether this node's push to it was acknowledged (only
    /// Multi-Rail, discovery-capable peers are pushed to).
    pub pushed: Option<bool>,
    /// Why it failed.
    pub error: Option<String>,
}

fn ping_target(s: &AppState, req: &PingRequest) -> Result<(Nid, Duration), ApiError> {
    let nid = parse_nid("nid", &req.nid)?;
    let ms = req.timeout_ms.unwrap_or(DEFAULT_PING_TIMEOUT_MS);
    let max = u64::try_from(s.shared.max_timeout.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 || ms > max {
        return Err(ApiError::unprocessable(
            "timeout_ms",
            format!("timeout_ms is 1..={max}"),
        ));
    }
    Ok((nid, Duration::from_millis(ms)))
}

fn nid_list(nids: &[(Nid, bool)]) -> Vec<PingNid> {
    nids.iter()
        .map(|(n, up)| PingNid {
            nid: n.to_string(),
            status: if *up { "up" } else { "down" }.into(),
        })
        .collect()
}

fn failed(nid: Nid, e: actors::node::PingFailure) -> Result<PingResult, ApiError> {
    if let actors::node::PingFailure::Node(actors::NodeError::Stopped) = e {
        return Err(ApiError::Unavailable {
            message: "the node is stopped".into(),
        });
    }
    Ok(PingResult {
        nid: nid.to_string(),
        ok: false,
        primary_nid: None,
        multi_rail: None,
        peer_nis: Vec::new(),
        pushed: None,
        error: Some(e.to_string()),
    })
}

/// Pings a NID (`lnetctl ping`). A peer that does not answer is a result (`ok: false`),
/// not an error.
#[utoipa::path(post, path = "/api/v1/ping", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = PingRequest,
    responses(
        (status = 200, description = "The answer, or why there was none", body = PingResult),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A timeout out of range", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn ping(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<PingRequest>,
) -> Result<Json<PingResult>, ApiError> {
    let (nid, timeout) = ping_target(&s, &req)?;
    let result = match s.shared.node.ping(nid, timeout).await {
        Ok(reply) => {
            let nids = reply.nids();
            PingResult {
                nid: nid.to_string(),
                ok: true,
                primary_nid: Some(nids.first().map_or(reply.from, |n| n.0).to_string()),
                multi_rail: Some(reply.info.features.contains(lnet::Features::MULTI_RAIL)),
                peer_nis: nid_list(&nids),
                pushed: None,
                error: None,
            }
        }
        Err(e) => failed(nid, e)?,
    };
    s.admin_event(
        &admin.0,
        "ping",
        Some(nid.to_string()),
        format!("ok={} timeout_ms={}", result.ok, timeout.as_millis()),
    );
    Ok(Json(result))
}

/// Discovers a NID (`lnetctl discover`): pings it, records it as a peer, and pushes this
/// node's ping info to a Multi-Rail peer.
#[utoipa::path(post, path = "/api/v1/discover", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = PingRequest,
    responses(
        (status = 200, description = "What discovery learned, or why it failed", body = PingResult),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A timeout out of range", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn discover(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<PingRequest>,
) -> Result<Json<PingResult>, ApiError> {
    let (nid, timeout) = ping_target(&s, &req)?;
    let result = match s.shared.node.discover(nid, timeout).await {
        Ok(d) => PingResult {
            nid: nid.to_string(),
            ok: true,
            primary_nid: Some(d.primary.to_string()),
            multi_rail: Some(d.multi_rail),
            peer_nis: nid_list(&d.nids),
            pushed: Some(d.pushed),
            error: None,
        },
        Err(e) => failed(nid, e)?,
    };
    s.admin_event(
        &admin.0,
        "discover",
        Some(nid.to_string()),
        format!("ok={} timeout_ms={}", result.ok, timeout.as_millis()),
    );
    Ok(Json(result))
}

// ---------------------------------------------------------------------------------------
// Fault rules.

/// A message type a fault rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MsgTypeName {
    /// PUT.
    Put,
    /// ACK.
    Ack,
    /// GET.
    Get,
    /// REPLY.
    Reply,
}

/// Which matching messages a rule fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TriggerSpec {
    /// Every matching message (`-x`).
    Always,
    /// The Nth, 2Nth, ... matching message.
    EveryNth {
        /// N (at least 1).
        #[schema(minimum = 1)]
        n: u32,
    },
    /// One at a random position in each window of N (`-r N`).
    OneInWindow {
        /// N (at least 1).
        #[schema(minimum = 1)]
        n: u32,
    },
    /// Each with probability `per_million` / 1 000 000.
    Probability {
        /// The chance in millionths.
        #[schema(maximum = 1000000)]
        per_million: u32,
    },
}

/// What a rule does to a message it fires on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionSpec {
    /// Drop it (`lnetctl fault drop add`).
    Drop,
    /// Hold it this long (`lnetctl fault delay add -l`).
    Delay {
        /// Milliseconds (at most one hour).
        #[schema(maximum = 3600000)]
        ms: u64,
    },
    /// Fail its send with this health status (`lnetctl fault drop add -e`):
    /// `local_interrupt`, `local_dropped`, `local_aborted`, `local_no_route`,
    /// `local_error`, `local_timeout`, `remote_error`, `remote_dropped`,
    /// `remote_timeout` or `network_timeout`.
    Fail {
        /// The status.
        #[schema(example = "local_timeout")]
        health_status: String,
    },
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HooksName {
    /// Messages the NI sends.
    Send,
    /// Messages the NI receives.
    Receive,
    /// Both.
    Both,
}

/// A fault rule to add on a local NI (`lnetctl fault drop|delay add`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleSpec {
    /// The source NID matched: `*` (any), `*@NET` or `255.255.255.255@NET` (any on a net),
    /// or a NID. Default `*`.
    #[schema(example = "*")]
    pub src: Option<String>,
    /// The destination NID matched, in the same forms. Default `*`.
    #[schema(example = "10.0.1.1@tcp")]
    pub dst: Option<String>,
    /// The portal matched (PUTs and GETs only); absent: any.
    pub portal: Option<u32>,
    /// The message types matched; absent: all.
    pub msg_types: Option<Vec<MsgTypeName>>,
    /// Which matching messages it fires on.
    pub trigger: TriggerSpec,
    /// What it does.
    pub action: ActionSpec,
    /// Where it applies; absent: receive for a drop, send for a failure, both for a delay.
    pub hooks: Option<HooksName>,
    /// The seed of its generator (default 1).
    pub seed: Option<u64>,
}

/// A fault rule of a local NI and what it has done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleDoc {
    /// Its id on the NI.
    pub id: u64,
    /// The source NID matched.
    pub src: String,
    /// The destination NID matched.
    pub dst: String,
    /// The portal matched.
    pub portal: Option<u32>,
    /// The message types matched.
    pub msg_types: Vec<MsgTypeName>,
    /// Which matching messages it fires on.
    pub trigger: TriggerSpec,
    /// What it does.
    pub action: ActionSpec,
    /// Where it applies.
    pub hooks: HooksName,
    /// Its seed.
    pub seed: u64,
    /// Messages its filters accepted.
    pub matched: u64,
    /// Messages it fired on.
    pub fired: u64,
}

/// The fault rules of a local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleList {
    /// The NI.
    pub nid: String,
    /// Its rules, in the order they were added.
    pub rules: Vec<FaultRuleDoc>,
}

fn nid_match(field: &str, text: Option<&str>) -> Result<NidMatch, ApiError> {
    let text = text.unwrap_or("*").trim();
    if text == "*" {
        return Ok(NidMatch::Any);
    }
    if let Some(net) = text
        .strip_prefix("*@")
        .or_else(|| text.strip_prefix("255.255.255.255@"))
    {
        return net
            .parse::<Net>()
            .map(NidMatch::Net)
            .map_err(|e| ApiError::bad_request(field, format!("{net:?} is not a net: {e}")));
    }
    parse_nid(field, text).map(NidMatch::Nid)
}

fn nid_match_text(m: NidMatch) -> String {
    match m {
        NidMatch::Any => "*".into(),
        NidMatch::Net(net) => format!("*@{net}"),
        NidMatch::Nid(nid) => nid.to_string(),
    }
}

const MSG_TYPES: [(MsgTypeName, MsgType, MsgTypes); 4] = [
    (MsgTypeName::Put, MsgType::Put, MsgTypes::PUT),
    (MsgTypeName::Ack, MsgType::Ack, MsgTypes::ACK),
    (MsgTypeName::Get, MsgType::Get, MsgTypes::GET),
    (MsgTypeName::Reply, MsgType::Reply, MsgTypes::REPLY),
];

fn health_status(name: &str) -> Result<HealthStatus, ApiError> {
    HealthStatus::ALL
        .into_iter()
        .filter(|s| *s != HealthStatus::Ok)
        .find(|s| s.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            ApiError::unprocessable(
                "action.health_status",
                format!("{name:?} is not a failure status (local_timeout, remote_error, ...)"),
            )
        })
}

/// The longest delay a rule may ask for.
const MAX_DELAY_MS: u64 = 3_600_000;

impl FaultRuleSpec {
    fn to_rule(&self) -> Result<FaultRule, ApiError> {
        let src = nid_match("src", self.src.as_deref())?;
        let dst = nid_match("dst", self.dst.as_deref())?;
        let trigger = match self.trigger {
            TriggerSpec::Always => Trigger::Always,
            TriggerSpec::EveryNth { n } => Trigger::EveryNth(n),
            TriggerSpec::OneInWindow { n } => Trigger::OneInWindow(n),
            TriggerSpec::Probability { per_million } => Trigger::Probability { per_million },
        };
        let action = match &self.action {
            ActionSpec::Drop => FaultAction::Drop,
            ActionSpec::Delay { ms } => {
                if *ms > MAX_DELAY_MS {
                    return Err(ApiError::unprocessable(
                        "action.ms",
                        format!("a delay is at most {MAX_DELAY_MS} ms"),
                    ));
                }
                FaultAction::Delay(Duration::from_millis(*ms))
            }
            ActionSpec::Fail { health_status: h } => FaultAction::Fail(health_status(h)?),
        };
        let hooks = match (self.hooks, action) {
            (Some(HooksName::Send), _) => Hooks::Send,
            (Some(HooksName::Receive), _) => Hooks::Receive,
            (Some(HooksName::Both), _) => Hooks::Both,
            (None, FaultAction::Drop) => Hooks::Receive,
            (None, FaultAction::Fail(_)) => Hooks::Send,
            (None, FaultAction::Delay(_)) => Hooks::Both,
        };
        let mut rule = FaultRule::new(src, dst, trigger, action, hooks);
        rule.portal = self.portal;
        if let Some(types) = &self.msg_types {
            if types.is_empty() {
                return Err(ApiError::unprocessable(
                    "msg_types",
                    "a rule matches at least one message type",
                ));
            }
            let mut set: Option<MsgTypes> = None;
            for t in types {
                let bits = MSG_TYPES
                    .iter()
                    .find(|(n, _, _)| n == t)
                    .map_or(MsgTypes::ALL, |(_, _, b)| *b);
                set = Some(set.map_or(bits, |s| s.union(bits)));
            }
            rule.types = set.unwrap_or(MsgTypes::ALL);
        }
        if let Some(seed) = self.seed {
            rule.seed = seed;
        }
        rule.validate().map_err(|e| {
            let field = match e {
                lnd::lnd::fault::FaultRuleError::ZeroRate
                | lnd::lnd::fault::FaultRuleError::Probability { .. } => "trigger",
                lnd::lnd::fault::FaultRuleError::FailOnReceive => "hooks",
                _ => "action",
            };
            ApiError::unprocessable(field, e.to_string())
        })?;
        Ok(rule)
    }
}

fn rule_doc(r: &RuleStats) -> FaultRuleDoc {
    let rule = &r.rule;
    FaultRuleDoc {
        id: r.id.0,
        src: nid_match_text(rule.src),
        dst: nid_match_text(rule.dst),
        portal: rule.portal,
        msg_types: MSG_TYPES
            .iter()
            .filter(|(_, t, _)| rule.types.contains(*t))
            .map(|(n, _, _)| *n)
            .collect(),
        trigger: match rule.trigger {
            Trigger::Always => TriggerSpec::Always,
            Trigger::EveryNth(n) => TriggerSpec::EveryNth { n },
            Trigger::OneInWindow(n) => TriggerSpec::OneInWindow { n },
            Trigger::Probability { per_million } => TriggerSpec::Probability { per_million },
        },
        action: match rule.action {
            FaultAction::Drop => ActionSpec::Drop,
            FaultAction::Delay(d) => ActionSpec::Delay {
                ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            },
            FaultAction::Fail(s) => ActionSpec::Fail {
                health_status: s.name().to_ascii_lowercase(),
            },
        },
        hooks: match rule.hooks {
            Hooks::Send => HooksName::Send,
            Hooks::Receive => HooksName::Receive,
            Hooks::Both => HooksName::Both,
        },
        seed: rule.seed,
        matched: r.matched,
        fired: r.fired,
    }
}

/// A local NI named by the path: 404 when the node has none with this NID.
async fn local_ni(s: &AppState, text: &str) -> Result<Nid, ApiError> {
    let nid = parse_nid("nid", text)?;
    let known = s
        .shared
        .node
        .local_nis()
        .await?
        .iter()
        .any(|v| v.nid == nid);
    if known {
        Ok(nid)
    } else {
        Err(ApiError::not_found("nid", format!("no local NI {nid}")))
    }
}

/// The fault rules of a local NI (`lnetctl fault drop|delay show`).
#[utoipa::path(get, path = "/api/v1/nis/{nid}/fault-rules", tag = TAG_SHOW,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    responses(
        (status = 200, description = "The NI's rules", body = FaultRuleList),
        (status = 400, description = "Not a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 409, description = "The NI's LND takes no fault rules", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn list_fault_rules(
    State(s): State<AppState>,
    _r: Reader,
    PathParams(nid): PathParams<String>,
) -> Result<Json<FaultRuleList>, ApiError> {
    let nid = local_ni(&s, &nid).await?;
    let rules = s.shared.node.fault_rules(nid)?;
    Ok(Json(FaultRuleList {
        nid: nid.to_string(),
        rules: rules.iter().map(rule_doc).collect(),
    }))
}

/// Adds a fault rule on a local NI (`lnetctl fault drop|delay add`).
#[utoipa::path(post, path = "/api/v1/nis/{nid}/fault-rules", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    request_body = FaultRuleSpec,
    responses(
        (status = 201, description = "The rule added", body = FaultRuleDoc),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 409, description = "The NI's LND takes no fault rules, or its table is full", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A rule that cannot work", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
    Body(spec): Body<FaultRuleSpec>,
) -> Result<(StatusCode, Json<FaultRuleDoc>), ApiError> {
    let nid = local_ni(&s, &nid).await?;
    let rule = spec.to_rule()?;
    let node = &s.shared.node;
    let id = node.add_fault_rule(nid, rule)?;
    let doc = node
        .fault_rules(nid)?
        .iter()
        .find(|r| r.id == id)
        .map(rule_doc)
        .ok_or_else(|| ApiError::Conflict {
            field: None,
            message: format!("rule {} was removed while it was added", id.0),
        })?;
    s.admin_event(
        &admin.0,
        "add_fault_rule",
        Some(nid.to_string()),
        format!("rule {}: {rule:?}", id.0),
    );
    Ok((StatusCode::CREATED, Json(doc)))
}

/// Removes a fault rule of a local NI (`lnetctl fault drop|delay del`).
#[utoipa::path(delete, path = "/api/v1/nis/{nid}/fault-rules/{id}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(
        ("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp"),
        ("id" = u64, Path, description = "The rule's id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "Not a NID, or not an id", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI or rule", body = ErrorBody),
        (status = 409, description = "The NI's LND takes no fault rules", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn remove_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams((nid, id)): PathParams<(String, u64)>,
) -> Result<StatusCode, ApiError> {
    let nid = local_ni(&s, &nid).await?;
    if !s.shared.node.remove_fault_rule(nid, RuleId(id))? {
        return Err(ApiError::not_found(
            "id",
            format!("NI {nid} has no rule {id}"),
        ));
    }
    s.admin_event(
        &admin.0,
        "remove_fault_rule",
        Some(nid.to_string()),
        format!("rule {id}"),
    );
    Ok(StatusCode::NO_CONTENT)
}
