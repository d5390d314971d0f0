//! `GET /api/v1/export` (`lnetctl export [--backup]`): the node's state as the YAML
//! document `lnetctl import` reads.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use lnet::config::{
    BufferPool, Buffers, CptBuffers, Global, Route, RouteState, RouteType, Routing, RoutingState,
    UdspRule,
};
use lnet::show::ExportSource;
use serde::Deserialize;
use utoipa::IntoParams;

use super::TAG_SHOW;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{QueryParams, Reader};
use crate::state::AppState;

/// The media type of the document.
const YAML: &str = "application/yaml";

/// Which form of the document.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ExportQuery {
    /// `1` or `true`: `lnetctl export --backup` (only what `import` needs); `0`, `false`
    /// or absent: the full export, with the live counters.
    pub(crate) backup: Option<String>,
}

fn backup_of(q: &ExportQuery) -> Result<bool, ApiError> {
    match q.backup.as_deref() {
        None | Some("0" | "false") => Ok(false),
        Some("1" | "true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(
            "backup",
            format!("backup={other:?}: expected 0, 1, false or true"),
        )),
    }
}

fn pool(p: &lnet::rtrbuf::PoolStats) -> BufferPool {
    BufferPool {
        npages: p.npages,
        nbuffers: p.nbuffers,
        credits: p.credits,
        mincredits: p.mincredits,
    }
}

/// What the node knows, read from it once.
async fn source(s: &AppState) -> Result<ExportSource, ApiError> {
    let node = &s.shared.node;
    let nets = node.net_show().await?;
    let routes = node
        .routes()
        .await?
        .iter()
        .map(|v| Route {
            net: v.spec.net,
            gateway: v.spec.gateway,
            hop: Some(v.spec.hops.map_or(lnet::config::HOP_UNDEFINED, i64::from)),
            priority: Some(v.spec.priority),
            health_sensitivity: None,
            state: Some(if v.down.is_none() {
                RouteState::Up
            } else {
                RouteState::Down
            }),
            route_type: Some(if v.single_hop == Some(true) {
                RouteType::SingleHop
            } else {
                RouteType::MultiHop
            }),
        })
        .collect();
    let peers = node.peer_show().await?;
    let r = node.routing_show().await?;
    let cpts: Vec<CptBuffers> = r
        .buffers
        .cpts
        .iter()
        .map(|[tiny, small, large]| CptBuffers {
            tiny: pool(tiny),
            small: pool(small),
            large: pool(large),
        })
        .collect();
    let total = |f: fn(&CptBuffers) -> u32| {
        let sum: u64 = cpts.iter().map(|c| u64::from(f(c))).sum();
        Some(u32::try_from(sum).unwrap_or(u32::MAX))
    };
    let buffers = Buffers {
        tiny: total(|c| c.tiny.nbuffers),
        small: total(|c| c.small.nbuffers),
        large: total(|c| c.large.nbuffers),
    };
    let global = Global::from_tunables(&*s.shared.tunables.lock().await);
    // The rules in list order, each with its position as `udsp show` numbers it.
    let udsp = node
        .udsp()
        .await?
        .source_rules()
        .iter()
        .zip(0u32..)
        .map(|(rule, idx)| UdspRule {
            idx: Some(idx),
            ..rule.clone()
        })
        .collect();
    Ok(ExportSource {
        nets,
        routes,
        peers,
        routing: Some(Routing {
            enable: if r.enabled {
                RoutingState::Enabled
            } else {
                RoutingState::Disabled
            },
            cpts,
        }),
        buffers: Some(buffers),
        global,
        udsp,
    })
}

/// The node's configuration and state as `lnetctl export` prints it (YAML): `net:`,
/// `route:`, `peer:`, `routing:`, `buffers:`, `global:` and `udsp:` (the selection rules,
/// when there are any, in both forms); with `backup=1` only what `lnetctl import` needs,
/// as `lnetctl export --backup`.
#[utoipa::path(get, path = "/api/v1/export", tag = TAG_SHOW,
    security(("bearer" = [])),
    params(ExportQuery),
    responses(
        (status = 200, description = "The export document, a YAML mapping", content_type = "application/yaml", body = Object),
        (status = 400, description = "A bad query", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn get_export(
    State(s): State<AppState>,
    _r: Reader,
    QueryParams(q): QueryParams<ExportQuery>,
) -> Result<Response, ApiError> {
    let backup = backup_of(&q)?;
    let doc = lnet::show::export(&source(&s).await?, backup).to_yaml();
    Ok(([(header::CONTENT_TYPE, YAML)], doc).into_response())
}
