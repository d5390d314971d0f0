//! `GET /api/v1/stats`, `POST /api/v1/stats/reset` and `GET /api/v1/counters`: the node's
//! message counters.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Reader};
use crate::state::AppState;

use super::{TAG_CHANGE, TAG_SHOW};

/// `lnetctl stats show`.
#[utoipa::path(get, path = "/api/v1/stats", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The node's message counters", body = lnet::show::StatsShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_stats(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<lnet::show::StatsShow>, ApiError> {
    let now = s.shared.node.stats_show().await?;
    let base = s
        .shared
        .stats_base
        .lock()
        .map_err(|_| ApiError::Internal {
            message: "the stats baseline lock is poisoned".into(),
        })?
        .clone();
    Ok(Json(match base {
        Some(b) => now.since(&b),
        None => now,
    }))
}

/// `lnetctl stats reset`: `stats show` counts from now on (the gauges stay as they are).
/// The Prometheus counters of `/metrics` are not reset, as counters must not go back.
#[utoipa::path(post, path = "/api/v1/stats/reset", tag = TAG_CHANGE,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The counters after the reset", body = lnet::show::StatsShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn reset_stats(
    State(s): State<AppState>,
    admin: Admin,
) -> Result<Json<lnet::show::StatsShow>, ApiError> {
    let now = s.shared.node.stats_show().await?;
    let after = now.since(&now);
    *s.shared.stats_base.lock().map_err(|_| ApiError::Internal {
        message: "the stats baseline lock is poisoned".into(),
    })? = Some(now);
    s.admin_event(&admin.0, "reset_stats", None, String::new());
    Ok(Json(after))
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
