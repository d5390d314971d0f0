//! `POST /api/v1/ping` and `/discover`: ping and discovery.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use lnet::Nid;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, Reader};
use crate::state::AppState;

use super::{parse_nid, TAG_CHANGE};

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
    /// Ping only: the local NI to send from (`lnetctl ping --source`), on every attempt;
    /// it must be a NID of this node (else 422). Absent: the selection picks one.
    #[schema(example = "10.0.1.2@tcp")]
    pub source: Option<String>,
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
    /// Why it failed: `failed to ping NID` (or `discover`), then the health status name
    /// of the failure (`REMOTE_TIMEOUT`, `LOCAL_NO_ROUTE`, ...) or what was wrong.
    pub error: Option<String>,
    /// The errno lnetctl reports for the failure (negative: -110 timed out, -113 no
    /// route, -71 a bad ping reply, -5 otherwise).
    pub errno: Option<i32>,
    /// The health status of the failed message, by name.
    pub status: Option<String>,
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

/// The errno and status name lnetctl reports for a failed ping or discovery.
fn errno_of(e: &actors::node::PingFailure) -> (i32, Option<&'static str>) {
    use actors::node::{FailReason, Outcome, PingFailure};
    use lnet::health::HealthStatus as H;
    match e {
        PingFailure::Failed(Outcome::Failed { status, reason }) => {
            let errno = match (status, reason) {
                (_, FailReason::NoPath) | (H::LocalNoRoute, _) => -113,
                (_, FailReason::Timeout)
                | (H::LocalTimeout | H::RemoteTimeout | H::NetworkTimeout, _) => -110,
                _ => -5,
            };
            (errno, Some(status.name()))
        }
        PingFailure::BadInfo(_) => (-71, None),
        _ => (-5, None),
    }
}

fn failed(verb: &str, nid: Nid, e: actors::node::PingFailure) -> Result<PingResult, ApiError> {
    if let actors::node::PingFailure::Node(actors::NodeError::Stopped) = e {
        return Err(ApiError::Unavailable {
            message: "the node is stopped".into(),
        });
    }
    let (errno, status) = errno_of(&e);
    let why = match (&e, status) {
        (_, Some(name)) => name.to_owned(),
        (actors::node::PingFailure::BadInfo(m), None) => format!("bad ping info: {m}"),
        _ => e.to_string(),
    };
    Ok(PingResult {
        nid: nid.to_string(),
        ok: false,
        primary_nid: None,
        multi_rail: None,
        peer_nis: Vec::new(),
        pushed: None,
        error: Some(format!("failed to {verb} {nid}: {why}")),
        errno: Some(errno),
        status: status.map(str::to_owned),
    })
}

/// Pings a NID (`lnetctl ping`; reader tokens may). A peer that does not answer is a
/// result (`ok: false`), not an error.
#[utoipa::path(post, path = "/api/v1/ping", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = PingRequest,
    responses(
        (status = 200, description = "The answer, or why there was none", body = PingResult),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A timeout out of range, or a source that is no NID of this node", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn ping(
    State(s): State<AppState>,
    reader: Reader,
    Body(req): Body<PingRequest>,
) -> Result<Json<PingResult>, ApiError> {
    let (nid, timeout) = ping_target(&s, &req)?;
    let source = req
        .source
        .as_deref()
        .map(|t| parse_nid("source", t))
        .transpose()?;
    let result = match s.shared.node.ping_from(nid, source, timeout).await {
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
                errno: None,
                status: None,
            }
        }
        Err(actors::node::PingFailure::Node(actors::NodeError::NoSuchNi { nid: src })) => {
            return Err(ApiError::unprocessable(
                "source",
                format!("{src} is not a NID of this node"),
            ))
        }
        Err(e) => failed("ping", nid, e)?,
    };
    let from = source.map_or_else(String::new, |s| format!(" source={s}"));
    s.admin_event(
        &reader.0,
        "ping",
        Some(nid.to_string()),
        format!("ok={} timeout_ms={}{from}", result.ok, timeout.as_millis()),
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
    if req.source.is_some() {
        return Err(ApiError::unprocessable(
            "source",
            "discovery has no source NI (lnetctl discover has no --source)",
        ));
    }
    let result = match s.shared.node.discover(nid, timeout).await {
        Ok(d) => PingResult {
            nid: nid.to_string(),
            ok: true,
            primary_nid: Some(d.primary.to_string()),
            multi_rail: Some(d.multi_rail),
            peer_nis: nid_list(&d.nids),
            pushed: Some(d.pushed),
            error: None,
            errno: None,
            status: None,
        },
        Err(e) => failed("discover", nid, e)?,
    };
    s.admin_event(
        &admin.0,
        "discover",
        Some(nid.to_string()),
        format!("ok={} timeout_ms={}", result.ok, timeout.as_millis()),
    );
    Ok(Json(result))
}
