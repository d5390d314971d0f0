//! `GET /api/v1/routing` (`lnetctl routing show`, with each peer's router-buffer credits,
//! what the node advertises per net and whether it drains), `PUT /api/v1/routing`
//! (`lnetctl set routing 0|1`; 1 also ends a drain) and `POST /api/v1/drain` (takes the
//! router out of service without stopping it).

use actors::node::RoutingShow;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{TAG_CHANGE, TAG_SHOW};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, Reader};
use crate::state::AppState;

/// One router buffer pool of a CPT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct PoolDoc {
    pub npages: u32,
    pub nbuffers: u32,
    pub credits: i32,
    pub mincredits: i32,
}

/// The tiny, small and large pools of one CPT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct CptPools {
    pub tiny: PoolDoc,
    pub small: PoolDoc,
    pub large: PoolDoc,
}

/// `buffers:`: the buffers of each size over all CPTs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct BufferTotals {
    pub tiny: u64,
    pub small: u64,
    pub large: u64,
}

/// A peer NI's router-buffer credits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerRtrCreditsDoc {
    /// The peer NI.
    pub nid: String,
    /// Credits when idle.
    pub max: u32,
    /// Credits now (negative: messages wait).
    pub credits: i32,
    /// The lowest seen.
    pub mincredits: i32,
}

/// What the node advertises for one of its nets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetAdvertDoc {
    /// The net.
    pub net: String,
    /// Advertised UP.
    pub up: bool,
    /// When something last arrived on it (ms on the node's clock).
    pub last_heard_ms: u64,
}

/// `lnetctl routing show`, plus credits per peer and the advertised nets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingDoc {
    /// `enable`: whether the node forwards (the `routing` setting).
    pub enable: bool,
    /// Whether it drains (`lnet-router drain`): out of service, its NIs advertised DOWN
    /// and routing disabled in its ping info, while it still forwards what it is sent;
    /// `set routing 1` ends it.
    pub draining: bool,
    /// Per CPT (`cpt[i]`): its pools.
    pub cpts: Vec<CptPools>,
    /// `buffers:`.
    pub buffers: BufferTotals,
    /// Router-buffer credits of each peer NI that sent through this node.
    pub peers: Vec<PeerRtrCreditsDoc>,
    /// Messages waiting for a credit or a buffer now.
    pub waiting: u64,
    /// What the node advertises per local net.
    pub nets: Vec<NetAdvertDoc>,
}

fn pool(p: &lnet::rtrbuf::PoolStats) -> PoolDoc {
    PoolDoc {
        npages: p.npages,
        nbuffers: p.nbuffers,
        credits: p.credits,
        mincredits: p.mincredits,
    }
}

fn routing_doc(r: &RoutingShow) -> RoutingDoc {
    let cpts: Vec<CptPools> = r
        .buffers
        .cpts
        .iter()
        .map(|[tiny, small, large]| CptPools {
            tiny: pool(tiny),
            small: pool(small),
            large: pool(large),
        })
        .collect();
    let sum = |f: fn(&CptPools) -> u32| cpts.iter().map(|c| u64::from(f(c))).sum::<u64>();
    RoutingDoc {
        enable: r.enabled,
        draining: r.draining,
        buffers: BufferTotals {
            tiny: sum(|c| c.tiny.nbuffers),
            small: sum(|c| c.small.nbuffers),
            large: sum(|c| c.large.nbuffers),
        },
        cpts,
        peers: r
            .buffers
            .peers
            .iter()
            .map(|(nid, c)| PeerRtrCreditsDoc {
                nid: nid.to_string(),
                max: c.max,
                credits: c.credits,
                mincredits: c.mincredits,
            })
            .collect(),
        waiting: u64::try_from(r.buffers.waiting).unwrap_or(u64::MAX),
        nets: r
            .nets
            .iter()
            .map(|n| NetAdvertDoc {
                net: n.net.to_string(),
                up: n.up,
                last_heard_ms: n.last_heard.as_millis(),
            })
            .collect(),
    }
}

/// Router buffers and credits (`lnetctl routing show`) and the advertised status of
/// each local net.
#[utoipa::path(get, path = "/api/v1/routing", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Routing state", body = RoutingDoc),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_routing(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<RoutingDoc>, ApiError> {
    Ok(Json(routing_doc(&s.shared.node.routing_show().await?)))
}

/// `lnetctl set routing 0|1`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingSet {
    /// 1: forward for other nodes, and end a drain; 0: stop (advertised as routing
    /// disabled in the ping info, pushed to the peers; messages already being forwarded
    /// go on, new ones are dropped; a drain stays as it is).
    #[schema(minimum = 0, maximum = 1)]
    pub enable: i64,
}

/// Turns routing on or off (`lnetctl set routing 0|1`), kept in the store. Routing on
/// also ends a drain (`POST /api/v1/drain`), in the same push to the peers.
#[utoipa::path(put, path = "/api/v1/routing", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = RoutingSet,
    responses(
        (status = 200, description = "Routing state after the change", body = RoutingDoc),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "enable is not 0 or 1", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn set_routing(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<RoutingSet>,
) -> Result<Json<RoutingDoc>, ApiError> {
    use lnet::tunables::TunableName;
    let value: u32 = match req.enable {
        0 => 0,
        1 => 1,
        v => {
            return Err(ApiError::unprocessable(
                "enable",
                format!("routing {v}: expected 0 or 1"),
            ))
        }
    };
    let mut current = s.shared.tunables.lock().await;
    let mut next = current.clone();
    next.set(TunableName::Routing, i64::from(value))
        .map_err(|e| ApiError::unprocessable("enable", e.to_string()))?;
    let undrain = value == 1 && s.shared.node.drain_state().await?.0;
    if let Some(store) = &s.shared.config {
        let kept = store
            .set_tunable(TunableName::Routing, value)
            .and_then(|()| {
                if undrain {
                    store.set_draining(false)
                } else {
                    Ok(())
                }
            });
        kept.map_err(|e| ApiError::Internal {
            message: format!("routing could not be kept: {e}"),
        })?;
    }
    s.shared.node.set_routing(next.clone()).await?;
    *current = next;
    drop(current);
    let detail = if undrain {
        format!("routing={value}; drain ended")
    } else {
        format!("routing={value}")
    };
    s.admin_event(&admin.0, "set_routing", None, detail);
    Ok(Json(routing_doc(&s.shared.node.routing_show().await?)))
}

/// `lnetctl set tiny_buffers|small_buffers|large_buffers N`: the router buffer totals
/// (divided over the CPTs as at start; 0: the default). The keys left out keep their value.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuffersSet {
    /// Tiny buffers (no payload).
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub tiny: Option<i64>,
    /// Small buffers (one page).
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub small: Option<i64>,
    /// Large buffers (1 MiB).
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub large: Option<i64>,
}

/// Resizes the router buffer pools while the node runs (`lnetctl set tiny_buffers`
/// ...), kept in the store: a pool that grows serves the messages waiting first, one that
/// shrinks gives up its buffers as they come back, so nothing in flight is lost.
#[utoipa::path(put, path = "/api/v1/buffers", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = BuffersSet,
    responses(
        (status = 200, description = "Routing state after the change", body = RoutingDoc),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A count outside 0..=4294967295", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn set_buffers(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<BuffersSet>,
) -> Result<Json<RoutingDoc>, ApiError> {
    use lnet::tunables::TunableName;
    let asked = [
        ("tiny", TunableName::TinyBuffers, req.tiny),
        ("small", TunableName::SmallBuffers, req.small),
        ("large", TunableName::LargeBuffers, req.large),
    ];
    let mut current = s.shared.tunables.lock().await;
    let mut next = current.clone();
    let mut changed = Vec::new();
    for (field, name, value) in asked {
        let Some(v) = value else { continue };
        let n = u32::try_from(v).map_err(|_| {
            ApiError::unprocessable(field, format!("{field} = {v} is outside 0..=4294967295"))
        })?;
        next.set(name, v)
            .map_err(|e| ApiError::unprocessable(field, e.to_string()))?;
        changed.push((name, n));
    }
    if let Some(store) = &s.shared.config {
        for (name, n) in &changed {
            store
                .set_tunable(*name, *n)
                .map_err(|e| ApiError::Internal {
                    message: format!("{name} could not be kept: {e}"),
                })?;
        }
    }
    s.shared.node.set_tunables(next.clone()).await?;
    *current = next;
    drop(current);
    let detail: Vec<String> = changed.iter().map(|(n, v)| format!("{n}={v}")).collect();
    s.admin_event(&admin.0, "set_buffers", None, detail.join(" "));
    Ok(Json(routing_doc(&s.shared.node.routing_show().await?)))
}

/// The answer to `POST /api/v1/drain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainDoc {
    /// Whether the node drains now (always true after the request).
    pub draining: bool,
    /// Forwarded messages under way when the drain began (they go on).
    pub forwarding: u64,
}

/// Takes the router out of service without stopping it (`lnet-router drain`, LU-4473): its
/// NIs are advertised DOWN and routing disabled in its ping info, pushed to its peers at
/// once so that they route around it; it keeps forwarding what is under way and what
/// peers send before they move, and keeps serving the API. Kept in the store (a drained
/// router restarted comes back drained); `PUT /api/v1/routing` with `enable: 1` ends it.
/// Draining a draining router changes nothing.
#[utoipa::path(post, path = "/api/v1/drain", tag = TAG_CHANGE,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The node drains", body = DrainDoc),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 500, description = "The drain could not be kept", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn drain(
    State(s): State<AppState>,
    admin: Admin,
) -> Result<Json<DrainDoc>, ApiError> {
    // Under the tunables' lock: a drain and `set routing` are kept in the order they
    // are made.
    let current = s.shared.tunables.lock().await;
    if let Some(store) = &s.shared.config {
        store.set_draining(true).map_err(|e| ApiError::Internal {
            message: format!("the drain could not be kept: {e}"),
        })?;
    }
    let forwarding = s.shared.node.start_drain().await?;
    drop(current);
    let forwarding = u64::try_from(forwarding).unwrap_or(u64::MAX);
    s.admin_event(
        &admin.0,
        "drain",
        None,
        format!("draining; {forwarding} forwarded messages under way"),
    );
    Ok(Json(DrainDoc {
        draining: true,
        forwarding,
    }))
}
