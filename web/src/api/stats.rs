//! `GET /api/v1/stats` and `GET /api/v1/counters`: the node's message counters.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::Reader;
use crate::state::AppState;

use super::TAG_SHOW;

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
    Ok(Json(s.shared.node.stats_show().await?))
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
