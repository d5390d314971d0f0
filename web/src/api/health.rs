//! `POST /api/v1/nis/{nid}/health` and `/peer-nis/{nid}/health`: health resets.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use lnet::health::HealthValue;
use lnet::recovery::RecoveryKind;
use lnet::Nid;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams};
use crate::state::AppState;

use super::{parse_nid, TAG_CHANGE};

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

/// Every NI a `--all` health reset set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthResetAll {
    /// The NIs set, in the order of `net show` or `peer show`.
    pub nids: Vec<String>,
    /// The value set.
    pub health: u32,
    /// The id of the admin event recorded.
    pub event_id: u64,
}

async fn reset_all(
    s: &AppState,
    admin: &Admin,
    local: bool,
    req: HealthReset,
) -> Result<HealthResetAll, ApiError> {
    let value = health_value(req.value)?;
    let node = &s.shared.node;
    let nids: Vec<Nid> = if local {
        node.local_nis().await?.iter().map(|v| v.nid).collect()
    } else {
        node.peers()
            .await?
            .iter()
            .flat_map(|p| p.nis.iter().map(|v| v.nid))
            .collect()
    };
    for nid in &nids {
        if local {
            node.set_local_ni_health(*nid, value).await?;
        } else {
            node.set_peer_ni_health(*nid, value).await?;
        }
    }
    let action = if local {
        "reset_all_local_ni_health"
    } else {
        "reset_all_peer_ni_health"
    };
    let event = s.admin_event(
        &admin.0,
        action,
        None,
        format!("health of {} NIs set to {}", nids.len(), value.get()),
    );
    Ok(HealthResetAll {
        nids: nids.iter().map(Nid::to_string).collect(),
        health: value.get(),
        event_id: event.id,
    })
}

/// Sets the health of every local NI (`lnetctl net set --all --health V`).
#[utoipa::path(post, path = "/api/v1/nis/health", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = HealthReset,
    responses(
        (status = 200, description = "The NIs set", body = HealthResetAll),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value outside 0..=1000", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn reset_all_local_health(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<HealthReset>,
) -> Result<Json<HealthResetAll>, ApiError> {
    Ok(Json(reset_all(&s, &admin, true, req).await?))
}

/// Sets the health of every peer NI (`lnetctl peer set --all --health V`).
#[utoipa::path(post, path = "/api/v1/peer-nis/health", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = HealthReset,
    responses(
        (status = 200, description = "The peer NIs set", body = HealthResetAll),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value outside 0..=1000", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn reset_all_peer_health(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<HealthReset>,
) -> Result<Json<HealthResetAll>, ApiError> {
    Ok(Json(reset_all(&s, &admin, false, req).await?))
}
