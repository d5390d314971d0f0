//! `GET /api/v1/nets`: the local nets and their NIs.

use axum::extract::State;
use axum::Json;

use crate::error::{ApiError, ErrorBody};
use crate::extract::Reader;
use crate::state::AppState;

use super::TAG_SHOW;

/// `lnetctl net show -v 4`.
#[utoipa::path(get, path = "/api/v1/nets", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every net with its local NIs", body = lnet::show::NetShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_nets(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<lnet::show::NetShow>, ApiError> {
    Ok(Json(s.shared.node.net_show().await?))
}
