//! `GET/POST /api/v1/peers`: the peers and their peer NIs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::{Net, Nid};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, Reader};
use crate::state::AppState;

use super::{parse_nid, TAG_CHANGE, TAG_SHOW};

/// `lnetctl peer show -v 4`.
#[utoipa::path(get, path = "/api/v1/peers", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every peer with its peer NIs", body = lnet::show::PeerShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_peers(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<lnet::show::PeerShow>, ApiError> {
    Ok(Json(s.shared.node.peer_show().await?))
}

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
        (status = 201, description = "The peer as `peer show` shows it", body = lnet::show::ShowPeer),
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
) -> Result<(StatusCode, Json<lnet::show::ShowPeer>), ApiError> {
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
    let doc = show
        .peers
        .into_iter()
        .find(|p| p.primary_nid == primary)
        .ok_or_else(|| ApiError::Conflict {
            field: Some("primary_nid".into()),
            message: format!("peer {primary} was replaced while it was added"),
        })?;
    let list: Vec<String> = nids.iter().map(Nid::to_string).collect();
    s.admin_event(
        &admin.0,
        "add_peer",
        Some(primary.to_string()),
        format!("nids={} multi_rail={multi_rail}", list.join(",")),
    );
    Ok((StatusCode::CREATED, Json(doc)))
}
