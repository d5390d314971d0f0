//! `GET /metrics`: the node's counters, health, routes, router buffers and credits in the
//! Prometheus text format, and the probes `/livez` and `/readyz`.
//!
//! Where the Lustre exporters (lustrefs-exporter, HPE's lustre_exporter) have a name for a
//! value, it is used, with the same labels (the `lustre_*` series, module `lnet`); with
//! [`crate::WebConfig::metrics_exporter_labels`] those also carry the `component="lnet"` and
//! `target="lnet"` labels of the HPE and GSI exporters. The router's own values carry the
//! `lnet_router_` prefix (modules `lnet` and `routing`, the LNDs' counters of how their
//! connections end in module `lnd`, and the forward drops counted from the node's events);
//! the process's are the usual `process_*` (module `process`). `docs/metrics.md` lists every series with the lnetctl field it comes from.

mod exposition;
mod lnd;
mod lnet;
mod process;
mod routing;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{identify, PeerAddr};
use crate::state::AppState;
use exposition::{Exposition, Family};

/// The content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the node's state as a Prometheus text exposition.
pub(crate) async fn render(s: &AppState) -> Result<String, ApiError> {
    let lustre_labels = if s.shared.metrics_exporter_labels {
        vec![("component", "lnet".into()), ("target", "lnet".into())]
    } else {
        Vec::new()
    };
    let mut x = Exposition::new(lustre_labels);
    lnet::write(&mut x, s).await?;
    routing::write(&mut x, s).await?;
    lnd::write(&mut x, s).await?;
    write_drops(&mut x, &s.shared.drops);
    process::write(&mut x);
    Ok(x.finish())
}

/// The node's counters, health values, routes, router buffers and credits in the
/// Prometheus text format (needs a reader token unless the server makes metrics public).
#[utoipa::path(get, path = "/metrics", tag = "probes",
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn metrics(
    State(s): State<AppState>,
    PeerAddr(peer): PeerAddr,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if !s.shared.public_metrics {
        identify(&headers, peer, &s)?;
    }
    let text = render(&s).await?;
    Ok(([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response())
}

/// Writes `lnet_router_forward_drops_total{reason,status}` and
/// `lnet_router_metrics_events_lost_total`.
fn write_drops(x: &mut Exposition, drops: &crate::forward_drops::ForwardDrops) {
    let mut f = Family::counter(
        "lnet_router_forward_drops_total",
        "Messages this router was forwarding and dropped, by reason.",
    );
    for ((reason, status), n) in drops.counts() {
        f.add(
            vec![("reason", reason.into()), ("status", status.into())],
            n,
        );
    }
    x.family(f);
    x.family(
        Family::counter(
            "lnet_router_metrics_events_lost_total",
            "Node events the forward drop counter missed (it fell behind the event bus).",
        )
        .with(vec![], drops.lost()),
    );
}

/// `GET /metrics` of a metrics-only listener: no token asked for.
pub(crate) async fn public_metrics(State(s): State<AppState>) -> Result<Response, ApiError> {
    let text = render(&s).await?;
    Ok(([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response())
}

/// A probe's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// `ok`, or what is wrong.
    pub status: String,
}

/// Liveness: the server answers.
#[utoipa::path(get, path = "/livez", tag = "probes",
    responses((status = 200, description = "The server is alive", body = Probe)))]
pub(crate) async fn livez() -> Json<Probe> {
    Json(Probe {
        status: "ok".into(),
    })
}

/// Readiness: the node's actors answer and the event feeder runs.
#[utoipa::path(get, path = "/readyz", tag = "probes",
    responses(
        (status = 200, description = "Ready", body = Probe),
        (status = 503, description = "The node does not answer, or events are not fed", body = Probe),
    ))]
pub(crate) async fn readyz(State(s): State<AppState>) -> (StatusCode, Json<Probe>) {
    let status = if s.shared.node.local_nis().await.is_err() {
        "the node does not answer"
    } else if !s.feeding() {
        "the event feeder has stopped"
    } else {
        "ok"
    };
    let code = if status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        Json(Probe {
            status: status.into(),
        }),
    )
}
