//! `GET/POST /api/v1/peers`: the peers and their peer NIs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::{Net, Nid};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams, Reader};
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

/// A peer to add (`lnetctl peer add --prim_nid NID --nid NID,... [--non_mr]`): a new peer
/// is created; the NIDs of a peer that exists with this primary NID are added to it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerAdd {
    /// The primary NID.
    #[schema(example = "10.0.1.1@tcp")]
    pub primary_nid: String,
    /// NIDs to add (the primary NID is added when missing).
    #[serde(default)]
    pub nids: Vec<String>,
    /// Whether it is Multi-Rail (default true). A configured peer keeps its flag: asking
    /// for the other one is refused, as the kernel refuses it.
    pub multi_rail: Option<bool>,
}

/// Creates a peer, or adds NIDs to the peer that has this primary NID
/// (`lnetctl peer add`). A NID another configured peer has is refused (409), as the kernel
/// refuses it with EEXIST.
#[utoipa::path(post, path = "/api/v1/peers", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = PeerAdd,
    responses(
        (status = 200, description = "NIDs added to an existing peer: the peer as `peer show` shows it", body = lnet::show::ShowPeer),
        (status = 201, description = "A new peer, as `peer show` shows it", body = lnet::show::ShowPeer),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 409, description = "A NID of another configured peer, or the other Multi-Rail flag for a configured peer", body = ErrorBody),
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
    let mut added = vec![primary];
    for (i, text) in req.nids.iter().enumerate() {
        let nid = parse_nid(&format!("nids[{i}]"), text)?;
        if !added.contains(&nid) {
            added.push(nid);
        }
    }
    if added.iter().any(|n| n.net == Net::LO) {
        return Err(ApiError::unprocessable(
            "nids",
            "a peer has no NID on the loopback net",
        ));
    }
    let node = &s.shared.node;
    let existing = node
        .peers()
        .await?
        .into_iter()
        .find(|p| p.primary == primary);
    let (nids, multi_rail) = match &existing {
        Some(p) => {
            let multi_rail = req.multi_rail.unwrap_or(p.multi_rail);
            if p.configured && multi_rail != p.multi_rail {
                return Err(ApiError::conflict(
                    "multi_rail",
                    format!(
                        "peer {primary} is configured {}Multi-Rail; its flag is not changed by adding NIDs",
                        if p.multi_rail { "" } else { "non-" }
                    ),
                ));
            }
            let mut nids: Vec<Nid> = p.nids.iter().map(|(n, _)| *n).collect();
            for n in &added {
                if !nids.contains(n) {
                    nids.push(*n);
                }
            }
            (nids, multi_rail)
        }
        None => (added.clone(), req.multi_rail.unwrap_or(true)),
    };
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
    let list: Vec<String> = added.iter().map(Nid::to_string).collect();
    let (status, action) = if existing.is_some() {
        (StatusCode::OK, "add_peer_nids")
    } else {
        (StatusCode::CREATED, "add_peer")
    };
    s.admin_event(
        &admin.0,
        action,
        Some(primary.to_string()),
        format!("nids={} multi_rail={multi_rail}", list.join(",")),
    );
    Ok((status, Json(doc)))
}

/// What a peer deletion removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerDeleted {
    /// The peer's primary NID.
    pub primary_nid: String,
    /// The NIDs deleted (every NID of the peer when it was deleted whole).
    pub nids: Vec<String>,
    /// The id of the admin event recorded.
    pub event_id: u64,
}

async fn delete(
    s: &AppState,
    admin: &Admin,
    primary_text: &str,
    nid_text: Option<&str>,
) -> Result<PeerDeleted, ApiError> {
    let primary = parse_nid("primary_nid", primary_text)?;
    let nids: Vec<Nid> = nid_text
        .map(|n| parse_nid("nid", n))
        .transpose()?
        .into_iter()
        .collect();
    let node = &s.shared.node;
    let before: Vec<Nid> = node
        .peers()
        .await?
        .into_iter()
        .find(|p| p.primary == primary)
        .map(|p| p.nids.into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    node.del_peer(primary, nids.clone()).await?;
    if let Some(store) = &s.shared.config {
        store
            .delete_peer(primary, &nids)
            .map_err(|e| ApiError::Internal {
                message: format!("the deletion could not be kept: {e}"),
            })?;
    }
    let removed = if nids.is_empty() { before } else { nids };
    let list: Vec<String> = removed.iter().map(Nid::to_string).collect();
    let event = s.admin_event(
        &admin.0,
        "delete_peer",
        Some(primary.to_string()),
        format!("nids={}", list.join(",")),
    );
    Ok(PeerDeleted {
        primary_nid: primary.to_string(),
        nids: list,
        event_id: event.id,
    })
}

/// Deletes a peer (`lnetctl peer del --prim_nid NID`), kept in the store.
#[utoipa::path(delete, path = "/api/v1/peers/{primary_nid}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("primary_nid" = String, Path, description = "The peer's primary NID", example = "10.0.1.1@tcp")),
    responses(
        (status = 200, description = "What was deleted", body = PeerDeleted),
        (status = 400, description = "Not a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No peer has this primary NID", body = ErrorBody),
        (status = 409, description = "The peer is the gateway of a route", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn delete_peer(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(primary): PathParams<String>,
) -> Result<Json<PeerDeleted>, ApiError> {
    Ok(Json(delete(&s, &admin, &primary, None).await?))
}

/// Deletes one NID of a peer (`lnetctl peer del --prim_nid P --nid N`), kept in the store.
#[utoipa::path(delete, path = "/api/v1/peers/{primary_nid}/nids/{nid}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(
        ("primary_nid" = String, Path, description = "The peer's primary NID", example = "10.0.1.1@tcp"),
        ("nid" = String, Path, description = "The NID to delete", example = "10.0.2.1@tcp1"),
    ),
    responses(
        (status = 200, description = "What was deleted", body = PeerDeleted),
        (status = 400, description = "Not a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such peer, or the peer has no such NID", body = ErrorBody),
        (status = 409, description = "A gateway NID, or the primary NID while the peer has others", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn delete_peer_nid(
    State(s): State<AppState>,
    admin: Admin,
    PathParams((primary, nid)): PathParams<(String, String)>,
) -> Result<Json<PeerDeleted>, ApiError> {
    Ok(Json(delete(&s, &admin, &primary, Some(&nid)).await?))
}
