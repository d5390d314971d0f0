//! `POST /api/v1/nets` and `DELETE /api/v1/nis/{nid}`: local NIs added and deleted on the
//! running node (`lnetctl net add|del`), kept in the store; `POST
//! /api/v1/nis/{nid}/conns-per-peer`, `/api/v1/nis/conns-per-peer` and `POST
//! /api/v1/nets/{net}/lnd-timeout`: LND settings changed on the running NIs (`lnetctl net
//! set --conns-per-peer|--lnd-timeout`), kept in the store.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::{LndType, Net};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams};
use crate::net_control::{NiControlError, NiSpec};
use crate::state::AppState;

use super::{parse_nid, TAG_CHANGE};

/// A local NI to add (`lnetctl net add --net NET --if IFACE [--nid NID] ...`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NiAdd {
    /// The net: a tcp net, or an o2ib net on a router built with the o2ib LND.
    #[schema(example = "tcp1")]
    pub net: String,
    /// The interface; the NI's NID is its IPv4 address unless `nid` is given.
    #[schema(example = "eth1")]
    pub interface: Option<String>,
    /// The NI's NID, on `net`.
    #[schema(example = "10.0.2.1@tcp1")]
    pub nid: Option<String>,
    /// NI tx credits.
    pub credits: Option<u32>,
    /// Per-peer tx credits.
    pub peer_credits: Option<u32>,
    /// The net's `peer_timeout`, seconds: above 0, a message this router forwards to a
    /// peer NI of the net whose cached NI status is not UP is dropped (the peer NI
    /// aliveness rule); 0 turns the rule off. Absent: 180, the LND's default.
    #[schema(example = 180)]
    pub peer_timeout: Option<u32>,
    /// Connections per peer (0 to 127; 0: the default): a tcp NI's of each direction, the
    /// ones an o2ib NI opens to a peer.
    pub conns_per_peer: Option<u32>,
    /// The IP type of service of its sockets: only -1 (none) is taken.
    pub tos: Option<i32>,
}

/// An NI added or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NiChanged {
    /// The NI's NID.
    pub nid: String,
    /// Routes deleted with it: the routes whose gateway was on the net it was the last NI
    /// of (`NET via GATEWAY`), as the kernel deletes them.
    #[serde(default)]
    pub routes_deleted: Vec<String>,
    /// The id of the admin event recorded.
    pub event_id: u64,
}

fn api_error(e: NiControlError) -> ApiError {
    match e {
        NiControlError::Exists { nid } => ApiError::conflict("nid", format!("NI {nid} exists")),
        NiControlError::Invalid { field, message } => ApiError::unprocessable(&field, message),
        NiControlError::Start { message } => {
            ApiError::unprocessable("nid", format!("cannot add LNet NI: {message}"))
        }
        NiControlError::NotFound { nid } => {
            ApiError::not_found("nid", format!("no local NI {nid}"))
        }
        NiControlError::Unsupported { field, message } => ApiError::unprocessable(&field, message),
        NiControlError::Keep { message } => ApiError::Internal { message },
    }
}

fn control(s: &AppState) -> Result<&std::sync::Arc<dyn crate::NiControl>, ApiError> {
    s.shared.nis.as_ref().ok_or_else(|| {
        ApiError::unprocessable("net", "this server cannot start or stop NIs at run time")
    })
}

/// Starts a local NI on the running node (`lnetctl net add`), a tcp NI or (on a router
/// built with the o2ib LND) an o2ib NI on an interface with an RDMA device, checked as the
/// configured NIs are at start, and keeps it in the store; its peers learn of it from the
/// ping info pushed to them.
#[utoipa::path(post, path = "/api/v1/nets", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = NiAdd,
    responses(
        (status = 201, description = "The NI was started", body = NiChanged),
        (status = 400, description = "Not a net or a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 409, description = "The node has this NI", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value refused (naming it): a net whose LND this build leaves out, an interface without an IPv4 address (or, for o2ib, without an RDMA device); or the NI could not start", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_ni(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<NiAdd>,
) -> Result<(StatusCode, Json<NiChanged>), ApiError> {
    let net: Net = req
        .net
        .parse()
        .map_err(|e| ApiError::bad_request("net", format!("{:?} is not a net: {e}", req.net)))?;
    let nid = req
        .nid
        .as_deref()
        .map(|n| parse_nid("nid", n))
        .transpose()?;
    if let Some(nid) = nid {
        if nid.net != net {
            return Err(ApiError::unprocessable(
                "nid",
                format!("NID {nid} is not on net {net}"),
            ));
        }
    }
    if net.lnd != LndType::SOCKLND && net.lnd != LndType::O2IBLND {
        return Err(ApiError::unprocessable(
            "net",
            format!("net {net}: this LND is not available; only tcp and o2ib NIs can run"),
        ));
    }
    if req.interface.is_none() && nid.is_none() {
        return Err(ApiError::unprocessable(
            "interface",
            "creating a local NI needs at least one interface",
        ));
    }
    if let Some(tos) = req.tos.filter(|t| *t != -1) {
        return Err(ApiError::unprocessable(
            "tos",
            format!("tos {tos} is not supported by this build's LNDs; use -1"),
        ));
    }
    if let Some(cpp) = req.conns_per_peer.filter(|c| *c > 127) {
        return Err(ApiError::unprocessable(
            "conns_per_peer",
            format!("invalid conns-per-peer value {cpp} (valid range 0-127)"),
        ));
    }
    let spec = NiSpec {
        net,
        interface: req.interface.clone(),
        nid,
        credits: req.credits.filter(|c| *c > 0),
        peer_credits: req.peer_credits.filter(|c| *c > 0),
        peer_timeout: req.peer_timeout,
        conns_per_peer: req.conns_per_peer,
    };
    let nid = control(&s)?.add_ni(spec).await.map_err(api_error)?;
    let event = s.admin_event(
        &admin.0,
        "add_ni",
        Some(nid.to_string()),
        format!(
            "interface={} credits={} peer_credits={} peer_timeout={} conns_per_peer={}",
            req.interface.as_deref().unwrap_or("-"),
            req.credits.unwrap_or(0),
            req.peer_credits.unwrap_or(0),
            req.peer_timeout
                .map_or_else(|| "-".to_owned(), |t| t.to_string()),
            req.conns_per_peer.unwrap_or(0)
        ),
    );
    Ok((
        StatusCode::CREATED,
        Json(NiChanged {
            nid: nid.to_string(),
            routes_deleted: Vec::new(),
            event_id: event.id,
        }),
    ))
}

/// Stops local NI `nid` (`lnetctl net del --nid NID`) and removes it from the store. When it
/// was the last NI of its net, the routes whose gateway is on that net are deleted too, as
/// the kernel deletes the routes of the gateways it loses with a net. The router's last NI
/// is refused (409): a router started from its store alone needs one.
#[utoipa::path(delete, path = "/api/v1/nis/{nid}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.2.1@tcp1")),
    responses(
        (status = 200, description = "The NI was stopped", body = NiChanged),
        (status = 400, description = "Not a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 409, description = "The router's last NI", body = ErrorBody),
        (status = 422, description = "This server cannot stop NIs at run time", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn delete_ni(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
) -> Result<Json<NiChanged>, ApiError> {
    let nid = parse_nid("nid", &nid)?;
    let node = &s.shared.node;
    let nis = node.local_nis().await?;
    if !nis.iter().any(|n| n.nid == nid) {
        return Err(ApiError::not_found("nid", format!("no local NI {nid}")));
    }
    if nis.len() == 1 {
        return Err(ApiError::conflict(
            "nid",
            format!("{nid} is the router's last NI; a router needs one to run"),
        ));
    }
    control(&s)?.remove_ni(nid).await.map_err(api_error)?;
    let last_on_net = !nis.iter().any(|n| n.nid != nid && n.nid.net == nid.net);
    let mut routes_deleted = Vec::new();
    if last_on_net {
        for r in node.routes().await? {
            if r.spec.gateway.net != nid.net {
                continue;
            }
            if node.del_route(r.spec.net, r.spec.gateway).await? {
                if let Some(store) = &s.shared.config {
                    store
                        .delete_route(r.spec.net, r.spec.gateway)
                        .map_err(|e| ApiError::Internal {
                            message: format!("a route deletion could not be kept: {e}"),
                        })?;
                }
                routes_deleted.push(format!("{} via {}", r.spec.net, r.spec.gateway));
            }
        }
    }
    let event = s.admin_event(
        &admin.0,
        "delete_ni",
        Some(nid.to_string()),
        format!("routes_deleted={}", routes_deleted.join(",")),
    );
    Ok(Json(NiChanged {
        nid: nid.to_string(),
        routes_deleted,
        event_id: event.id,
    }))
}

/// A new value of an LND setting (`lnetctl net set --conns-per-peer N`, `--lnd-timeout S`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LndSetting {
    /// The value: connections of each direction per peer (0 to 127; 0: "auto", which is 1
    /// here), or the LND timeout in seconds (at least 1).
    #[schema(minimum = 0)]
    pub value: u32,
}

/// The NIs an LND setting was changed on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LndSettingChanged {
    /// The NIs set.
    pub nids: Vec<String>,
    /// The value they run with from now on.
    pub value: u32,
    /// The id of the admin event recorded.
    pub event_id: u64,
}

/// The largest `conns_per_peer` lnetctl and the kernel take.
const MAX_CONNS_PER_PEER: u32 = 127;

async fn set_conns_per_peer(
    s: &AppState,
    admin: &Admin,
    nid: Option<lnet::Nid>,
    value: u32,
) -> Result<LndSettingChanged, ApiError> {
    if value > MAX_CONNS_PER_PEER {
        return Err(ApiError::unprocessable(
            "value",
            format!("invalid conns-per-peer value {value} (valid range 0-127)"),
        ));
    }
    if let Some(nid) = nid {
        if !s
            .shared
            .node
            .local_nis()
            .await?
            .iter()
            .any(|n| n.nid == nid)
        {
            return Err(ApiError::not_found("nid", format!("no local NI {nid}")));
        }
    }
    let nids = control(s)?
        .set_conns_per_peer(nid, value)
        .await
        .map_err(api_error)?;
    let event = s.admin_event(
        &admin.0,
        "set_conns_per_peer",
        Some(nid.map_or_else(|| "all".to_owned(), |n| n.to_string())),
        format!("conns_per_peer={value}"),
    );
    Ok(LndSettingChanged {
        nids: nids.iter().map(ToString::to_string).collect(),
        value,
        event_id: event.id,
    })
}

/// Sets the `conns_per_peer` of local NI `nid` (`lnetctl net set --nid NID
/// --conns-per-peer N`), as the kernel: the peers the NI learns of from now on get that many
/// connections (a tcp NI: BULK_IN and BULK_OUT each; an o2ib NI: that many it opens);
/// the peers it has keep theirs. Kept in the store.
#[utoipa::path(post, path = "/api/v1/nis/{nid}/conns-per-peer", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    request_body = LndSetting,
    responses(
        (status = 200, description = "The NI was set", body = LndSettingChanged),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A body of the wrong shape, a value outside 0..=127, an NI whose LND has no such setting, or a server that cannot change NIs", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn set_ni_conns_per_peer(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
    Body(req): Body<LndSetting>,
) -> Result<Json<LndSettingChanged>, ApiError> {
    let nid = parse_nid("nid", &nid)?;
    Ok(Json(
        set_conns_per_peer(&s, &admin, Some(nid), req.value).await?,
    ))
}

/// Sets the `conns_per_peer` of every tcp and o2ib NI (`lnetctl net set --all
/// --conns-per-peer N`), for the peers they learn of from now on. Kept in the store.
#[utoipa::path(post, path = "/api/v1/nis/conns-per-peer", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = LndSetting,
    responses(
        (status = 200, description = "The NIs set", body = LndSettingChanged),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A body of the wrong shape, a value outside 0..=127, or a server that cannot change NIs", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn set_all_conns_per_peer(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<LndSetting>,
) -> Result<Json<LndSettingChanged>, ApiError> {
    Ok(Json(set_conns_per_peer(&s, &admin, None, req.value).await?))
}

/// Sets the timeout of the LND of `net` (`lnetctl net set --net NET --lnd-timeout S`), as
/// the kernel writes that LND's module parameter: every NI of the LND (every tcp NI, or
/// every o2ib NI, whatever its net number) bounds its waits by it from now on (socklnd: on
/// the connections there are and those to come; o2iblnd: the waits it starts from now on,
/// a tx's and a connect's), and so do the NIs added later. Kept in the store.
#[utoipa::path(post, path = "/api/v1/nets/{net}/lnd-timeout", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("net" = String, Path, description = "A net of the LND", example = "tcp")),
    request_body = LndSetting,
    responses(
        (status = 200, description = "The LND's NIs were set", body = LndSettingChanged),
        (status = 400, description = "Not a net, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A body of the wrong shape, a timeout of 0, an LND whose timeout cannot change while it runs (other than socklnd and o2iblnd), an LND this build leaves out, or a server that cannot change NIs", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn set_lnd_timeout(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(net): PathParams<String>,
    Body(req): Body<LndSetting>,
) -> Result<Json<LndSettingChanged>, ApiError> {
    let parsed: Net = net
        .parse()
        .map_err(|e| ApiError::bad_request("net", format!("{net:?} is not a net: {e}")))?;
    if req.value == 0 {
        return Err(ApiError::unprocessable(
            "value",
            "an LND timeout of 0 (LNet's derived lnd_timeout) is not supported: give seconds",
        ));
    }
    if parsed.lnd != LndType::SOCKLND && parsed.lnd != LndType::O2IBLND {
        return Err(ApiError::unprocessable(
            "net",
            format!(
                "net {parsed}: only the socklnd and o2iblnd timeouts can change while they \
                 run; this LND is not available"
            ),
        ));
    }
    let nids = control(&s)?
        .set_lnd_timeout(parsed.lnd, req.value)
        .await
        .map_err(api_error)?;
    let event = s.admin_event(
        &admin.0,
        "set_lnd_timeout",
        Some(parsed.to_string()),
        format!("timeout={}", req.value),
    );
    Ok(Json(LndSettingChanged {
        nids: nids.iter().map(ToString::to_string).collect(),
        value: req.value,
        event_id: event.id,
    }))
}
