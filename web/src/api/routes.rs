//! Routes: `GET/POST /api/v1/routes`, `DELETE /api/v1/routes/{net}/{gateway}`
//! (`lnetctl route show -v | add | del`).

use actors::node::RouteView;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::route::{GatewayAlive, RouteSpec};
use lnet::{Net, Nid};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{parse_nid, TAG_CHANGE, TAG_SHOW};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams, Reader};
use crate::state::AppState;

/// One route as `lnetctl route show -v` shows it, with why it is down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteDoc {
    /// The remote net.
    pub net: String,
    /// The gateway.
    pub gateway: String,
    /// Hops to the remote net; -1: undefined.
    pub hop: i64,
    /// Priority (lower is better).
    pub priority: u32,
    /// `up` or `down`.
    pub state: String,
    /// Why it is down, when it is.
    pub down_reason: Option<String>,
    /// `single-hop` or `multi-hop` (multi-hop until the gateway's first ping reply).
    #[serde(rename = "type")]
    pub route_type: String,
    /// The gateway: `unchecked`, `alive` or `dead`.
    pub gateway_state: String,
    /// Why the gateway is dead, when it is.
    pub gateway_down_reason: Option<String>,
}

/// The route table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteList {
    /// The routes.
    pub routes: Vec<RouteDoc>,
}

/// A route to add (`lnetctl route add --net NET --gateway NID [--hop H] [--priority P]`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteAdd {
    /// The remote net.
    #[schema(example = "o2ib1")]
    pub net: String,
    /// The gateway, a NID on one of this node's nets.
    #[schema(example = "10.0.1.1@tcp")]
    pub gateway: String,
    /// Hops, 1..=255; absent: undefined.
    #[schema(minimum = 1, maximum = 255)]
    pub hop: Option<u32>,
    /// Priority (default 0).
    pub priority: Option<u32>,
}

fn route_doc(v: &RouteView) -> RouteDoc {
    let (gateway_state, gateway_down_reason) = match &v.gateway {
        GatewayAlive::Unchecked => ("unchecked", None),
        GatewayAlive::Alive => ("alive", None),
        GatewayAlive::Dead(why) => ("dead", Some(why.to_string())),
    };
    RouteDoc {
        net: v.spec.net.to_string(),
        gateway: v.spec.gateway.to_string(),
        hop: v.spec.hops.map_or(-1, i64::from),
        priority: v.spec.priority,
        state: if v.down.is_none() { "up" } else { "down" }.into(),
        down_reason: v.down.map(|d| d.to_string()),
        route_type: if v.single_hop == Some(true) {
            "single-hop"
        } else {
            "multi-hop"
        }
        .into(),
        gateway_state: gateway_state.into(),
        gateway_down_reason,
    }
}

fn parse_net(field: &str, text: &str) -> Result<Net, ApiError> {
    text.parse::<Net>()
        .map_err(|e| ApiError::bad_request(field, format!("{text:?} is not a net: {e}")))
}

/// The route table (`lnetctl route show -v`).
#[utoipa::path(get, path = "/api/v1/routes", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The routes and their state", body = RouteList),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_routes(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<RouteList>, ApiError> {
    let routes = s.shared.node.routes().await?;
    Ok(Json(RouteList {
        routes: routes.iter().map(route_doc).collect(),
    }))
}

/// Adds a route (`lnetctl route add`); its gateway is checked at once.
#[utoipa::path(post, path = "/api/v1/routes", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = RouteAdd,
    responses(
        (status = 201, description = "The route as `route show -v` shows it", body = RouteDoc),
        (status = 400, description = "Not a net or a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 409, description = "The route exists", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A route LNet refuses (local net, gateway off-net, hops)", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_route(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<RouteAdd>,
) -> Result<(StatusCode, Json<RouteDoc>), ApiError> {
    let spec = RouteSpec {
        net: parse_net("net", &req.net)?,
        gateway: parse_nid("gateway", &req.gateway)?,
        hops: req.hop,
        priority: req.priority.unwrap_or(0),
    };
    let node = &s.shared.node;
    node.add_route(spec).await?;
    if let Some(store) = &s.shared.config {
        if let Err(e) = store.add_route(&spec) {
            let _ = node.del_route(spec.net, spec.gateway).await;
            return Err(ApiError::Internal {
                message: format!("the route could not be kept: {e}"),
            });
        }
    }
    let doc = node
        .routes()
        .await?
        .iter()
        .find(|r| r.spec.net == spec.net && r.spec.gateway == spec.gateway)
        .map(route_doc)
        .ok_or_else(|| ApiError::Conflict {
            field: Some("gateway".into()),
            message: "the route was deleted while it was added".into(),
        })?;
    s.admin_event(
        &admin.0,
        "add_route",
        Some(spec.gateway.to_string()),
        format!(
            "net={} hop={} priority={}",
            spec.net, doc.hop, spec.priority
        ),
    );
    Ok((StatusCode::CREATED, Json(doc)))
}

/// Deletes a route (`lnetctl route del --net NET --gateway NID`).
#[utoipa::path(delete, path = "/api/v1/routes/{net}/{gateway}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(
        ("net" = String, Path, description = "The remote net", example = "o2ib1"),
        ("gateway" = String, Path, description = "The gateway", example = "10.0.1.1@tcp"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Not a net or a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such route", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn del_route(
    State(s): State<AppState>,
    admin: Admin,
    PathParams((net, gateway)): PathParams<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let net = parse_net("net", &net)?;
    let gateway: Nid = parse_nid("gateway", &gateway)?;
    if !s.shared.node.del_route(net, gateway).await? {
        return Err(ApiError::not_found(
            "gateway",
            format!("no route to {net} via {gateway}"),
        ));
    }
    if let Some(store) = &s.shared.config {
        store
            .delete_route(net, gateway)
            .map_err(|e| ApiError::Internal {
                message: format!("the route was deleted but the deletion could not be kept: {e}"),
            })?;
    }
    s.admin_event(
        &admin.0,
        "del_route",
        Some(gateway.to_string()),
        format!("net={net}"),
    );
    Ok(StatusCode::NO_CONTENT)
}
