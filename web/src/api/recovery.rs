//! `GET /api/v1/recovery/local` and `/recovery/peer`: the recovery queues.

use axum::extract::State;
use axum::Json;
use lnet::recovery::RecoveryKind;

use crate::error::{ApiError, ErrorBody};
use crate::extract::Reader;
use crate::state::AppState;

use super::TAG_SHOW;

/// `lnetctl debug recovery --local`.
#[utoipa::path(get, path = "/api/v1/recovery/local", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The local NI recovery queue", body = lnet::show::RecoveryShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_recovery_local(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<lnet::show::RecoveryShow>, ApiError> {
    Ok(Json(
        s.shared.node.recovery_show(RecoveryKind::LocalNi).await?,
    ))
}

/// `lnetctl debug recovery --peer`.
#[utoipa::path(get, path = "/api/v1/recovery/peer", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The peer NI recovery queue", body = lnet::show::RecoveryShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_recovery_peer(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<lnet::show::RecoveryShow>, ApiError> {
    Ok(Json(
        s.shared.node.recovery_show(RecoveryKind::PeerNi).await?,
    ))
}
