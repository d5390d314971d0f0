//! `GET /metrics`: the node's counters and health in the Prometheus text format, and the
//! probes `/livez` and `/readyz`.
//!
//! Where the Lustre exporters (lustrefs-exporter, HPE's lustre_exporter) have a name for a
//! value, it is used, with the same labels:
//!
//! | metric | type | labels | value |
//! |---|---|---|---|
//! | `lustre_send_count_total`, `lustre_receive_count_total`, `lustre_drop_count_total` | counter | `nid` | per local NI (`0@lo` included) |
//! | `lustre_health_value` | gauge | `nid` | health value of each local NI |
//! | `lustre_health_sensitivity` | gauge | | `health_sensitivity` |
//! | `lustre_lnet_ni_up` | gauge | `nid` | 1 when the NI's status is up |
//! | `lustre_lnet_ni_health` | gauge | `nid` | health value |
//! | `lustre_lnet_ni_health_{interrupts,dropped,aborted,no_route,timeouts,errors}_total` | counter | `nid` | the NI's `health stats` |
//! | `lustre_allocated`, `lustre_maximum` | gauge | | `msgs_alloc`, `msgs_max` |
//! | `lustre_errors_total`, `lustre_route_count_total` | counter | | `errors`, `route_count` |
//! | `lustre_{send,receive,route,drop}_bytes_total` | counter | | the `*_length` of `stats show` |
//!
//! The router's own values carry the `lnet_router_` prefix: the health, counters and
//! credits of every peer NI (`lnet_router_peer_ni_*`, labels `nid` and `primary_nid`), the
//! recovery queue lengths (`lnet_router_recovery_queue_length{queue="local|peer"}`), the
//! node-wide counters of `stats show` and of the node (`lnet_router_resend_count_total`,
//! ...), and the newest event id (`lnet_router_last_event_id`).

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use lnet::recovery::RecoveryKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{identify, PeerAddr};
use crate::state::AppState;

/// The content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A Prometheus text exposition being written.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    out: String,
}

/// Escapes a label value (`\`, `"` and newlines).
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A metric family: its samples, each with its labels.
pub(crate) struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: &'a str,
    samples: Vec<(Vec<(&'static str, String)>, u64)>,
}

impl<'a> Family<'a> {
    pub(crate) fn counter(name: &'a str, help: &'a str) -> Family<'a> {
        Family {
            name,
            help,
            kind: "counter",
            samples: Vec::new(),
        }
    }

    pub(crate) fn gauge(name: &'a str, help: &'a str) -> Family<'a> {
        Family {
            name,
            help,
            kind: "gauge",
            samples: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, labels: Vec<(&'static str, String)>, value: u64) {
        self.samples.push((labels, value));
    }

    pub(crate) fn with(mut self, labels: Vec<(&'static str, String)>, value: u64) -> Self {
        self.add(labels, value);
        self
    }
}

impl Exposition {
    pub(crate) fn family(&mut self, f: Family<'_>) {
        if f.samples.is_empty() {
            return;
        }
        let _ = writeln!(self.out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(self.out, "# TYPE {} {}", f.name, f.kind);
        for (labels, value) in f.samples {
            if labels.is_empty() {
                let _ = writeln!(self.out, "{} {value}", f.name);
            } else {
                let l: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = writeln!(self.out, "{}{{{}}} {value}", f.name, l.join(","));
            }
        }
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

fn nonneg(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A metric name from a counter name: ASCII letters, digits and `_`.
fn metric_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Renders the node's state as a Prometheus text exposition.
pub(crate) async fn render(s: &AppState) -> Result<String, ApiError> {
    let node = &s.shared.node;
    let nets = node.net_show().await?;
    let peers = node.peer_show().await?;
    let stats = node.stats_show().await?;
    let counters = node.counters().await?;
    let local_q = node.recovery(RecoveryKind::LocalNi).await?.len();
    let peer_q = node.recovery(RecoveryKind::PeerNi).await?.len();
    let sensitivity = s.shared.tunables.lock().await.health_sensitivity();

    let nid = |n: &lnet::Nid| vec![("nid", n.to_string())];
    let nis: Vec<&lnet::show::ShowNi> = nets.nets.iter().flat_map(|n| n.nis.iter()).collect();
    let mut x = Exposition::default();

    let per_ni = |name: &'static str,
                  help: &'static str,
                  counter: bool,
                  f: &dyn Fn(&lnet::show::ShowNi) -> u64| {
        let mut fam = if counter {
            Family::counter(name, help)
        } else {
            Family::gauge(name, help)
        };
        for ni in &nis {
            fam.add(nid(&ni.nid), f(ni));
        }
        fam
    };
    x.family(per_ni(
        "lustre_send_count_total",
        "Total number of messages that have been sent.",
        true,
        &|n| u64::from(n.statistics.send_count),
    ));
    x.family(per_ni(
        "lustre_receive_count_total",
        "Total number of messages that have been received.",
        true,
        &|n| u64::from(n.statistics.recv_count),
    ));
    x.family(per_ni(
        "lustre_drop_count_total",
        "Total number of messages that have been dropped.",
        true,
        &|n| u64::from(n.statistics.drop_count),
    ));
    x.family(per_ni(
        "lustre_health_value",
        "The health value of each LNet network interface.",
        false,
        &|n| nonneg(n.health_stats.health_value),
    ));
    x.family(
        Family::gauge(
            "lustre_health_sensitivity",
            "Lustre LNet health sensitivity.",
        )
        .with(vec![], u64::from(sensitivity)),
    );
    x.family(per_ni(
        "lustre_lnet_ni_up",
        "Local NI status is up (1) or not (0).",
        false,
        &|n| u64::from(n.status == lnet::config::NiStatus::Up),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health",
        "Health value of a local NI (1000 is full health).",
        false,
        &|n| nonneg(n.health_stats.health_value),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health_interrupts_total",
        "Local NI health: LOCAL_INTERRUPT failures.",
        true,
        &|n| u64::from(n.health_stats.interrupts),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health_dropped_total",
        "Local NI health: LOCAL_DROPPED failures.",
        true,
        &|n| u64::from(n.health_stats.dropped),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health_aborted_total",
        "Local NI health: LOCAL_ABORTED failures.",
        true,
        &|n| u64::from(n.health_stats.aborted),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health_no_route_total",
        "Local NI health: LOCAL_NO_ROUTE failures.",
        true,
        &|n| u64::from(n.health_stats.no_route),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health_timeouts_total",
        "Local NI health: LOCAL_TIMEOUT failures.",
        true,
        &|n| u64::from(n.health_stats.timeouts),
    ));
    x.family(per_ni(
        "lustre_lnet_ni_health_errors_total",
        "Local NI health: LOCAL_ERROR failures.",
        true,
        &|n| u64::from(n.health_stats.error),
    ));

    x.family(
        Family::gauge("lustre_allocated", "LNet messages currently allocated.")
            .with(vec![], stats.msgs_alloc),
    );
    x.family(
        Family::gauge("lustre_maximum", "Peak allocated LNet messages.")
            .with(vec![], stats.msgs_max),
    );
    x.family(Family::counter("lustre_errors_total", "LNet errors.").with(vec![], stats.errors));
    x.family(
        Family::counter("lustre_route_count_total", "Messages routed.")
            .with(vec![], stats.route_count),
    );
    x.family(
        Family::counter("lustre_send_bytes_total", "Bytes sent.").with(vec![], stats.send_length),
    );
    x.family(
        Family::counter("lustre_receive_bytes_total", "Bytes received.")
            .with(vec![], stats.recv_length),
    );
    x.family(
        Family::counter("lustre_route_bytes_total", "Bytes routed.")
            .with(vec![], stats.route_length),
    );
    x.family(
        Family::counter("lustre_drop_bytes_total", "Bytes dropped.")
            .with(vec![], stats.drop_length),
    );

    let stat_counters: [(&str, &str, u64); 15] = [
        (
            "lnet_router_resend_count_total",
            "Messages resent (stats show resend_count).",
            stats.resend_count,
        ),
        (
            "lnet_router_response_timeout_count_total",
            "ACKs or REPLYs that did not come in time.",
            stats.response_timeout_count,
        ),
        (
            "lnet_router_local_interrupt_count_total",
            "LOCAL_INTERRUPT failures of all local NIs.",
            stats.local_interrupt_count,
        ),
        (
            "lnet_router_local_dropped_count_total",
            "LOCAL_DROPPED failures of all local NIs.",
            stats.local_dropped_count,
        ),
        (
            "lnet_router_local_aborted_count_total",
            "LOCAL_ABORTED failures of all local NIs.",
            stats.local_aborted_count,
        ),
        (
            "lnet_router_local_no_route_count_total",
            "LOCAL_NO_ROUTE failures of all local NIs.",
            stats.local_no_route_count,
        ),
        (
            "lnet_router_local_timeout_count_total",
            "LOCAL_TIMEOUT failures of all local NIs.",
            stats.local_timeout_count,
        ),
        (
            "lnet_router_local_error_count_total",
            "LOCAL_ERROR failures of all local NIs.",
            stats.local_error_count,
        ),
        (
            "lnet_router_remote_dropped_count_total",
            "REMOTE_DROPPED failures.",
            stats.remote_dropped_count,
        ),
        (
            "lnet_router_remote_error_count_total",
            "REMOTE_ERROR failures.",
            stats.remote_error_count,
        ),
        (
            "lnet_router_remote_timeout_count_total",
            "REMOTE_TIMEOUT failures.",
            stats.remote_timeout_count,
        ),
        (
            "lnet_router_network_timeout_count_total",
            "NETWORK_TIMEOUT failures.",
            stats.network_timeout_count,
        ),
        (
            "lnet_router_failed_resends_total",
            "Resends that failed.",
            stats.failed_resends.unwrap_or(0),
        ),
        (
            "lnet_router_successful_resends_total",
            "Resends that went through.",
            stats.successful_resends.unwrap_or(0),
        ),
        (
            "lnet_router_drop_count_total",
            "Messages dropped (stats show drop_count).",
            stats.drop_count,
        ),
    ];
    for (name, help, v) in stat_counters {
        x.family(Family::counter(name, help).with(vec![], v));
    }
    let mut node_counters = Family::counter(
        "lnet_router_node_counter_total",
        "The node's own counters, by name.",
    );
    for (name, v) in &counters {
        node_counters.add(vec![("counter", metric_name(name))], *v);
    }
    x.family(node_counters);
    let mut refused = Family::counter(
        "lnet_router_api_refused_total",
        "API clients refused or cut off, by reason (see the web crate's guard module).",
    );
    for r in crate::guard::Refusal::ALL {
        refused.add(
            vec![("reason", r.as_str().to_owned())],
            s.shared.guard.get(r),
        );
    }
    x.family(refused);

    let peer_nis: Vec<(&lnet::show::ShowPeer, &lnet::show::ShowPeerNi)> = peers
        .peers
        .iter()
        .flat_map(|p| p.nis.iter().map(move |ni| (p, ni)))
        .collect();
    let per_peer_ni = |name: &'static str,
                       help: &'static str,
                       counter: bool,
                       f: &dyn Fn(&lnet::show::ShowPeerNi) -> u64| {
        let mut fam = if counter {
            Family::counter(name, help)
        } else {
            Family::gauge(name, help)
        };
        for (p, ni) in &peer_nis {
            fam.add(
                vec![
                    ("nid", ni.nid.to_string()),
                    ("primary_nid", p.primary_nid.to_string()),
                ],
                f(ni),
            );
        }
        fam
    };
    x.family(per_peer_ni(
        "lnet_router_peer_ni_health",
        "Health value of a peer NI (1000 is full health).",
        false,
        &|n| nonneg(n.health_stats.health_value),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_send_count_total",
        "Messages sent to a peer NI.",
        true,
        &|n| u64::from(n.statistics.send_count),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_receive_count_total",
        "Messages received from a peer NI.",
        true,
        &|n| u64::from(n.statistics.recv_count),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_drop_count_total",
        "Messages to a peer NI that failed.",
        true,
        &|n| u64::from(n.statistics.drop_count),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_health_dropped_total",
        "Peer NI health: REMOTE_DROPPED failures.",
        true,
        &|n| u64::from(n.health_stats.dropped),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_health_timeout_total",
        "Peer NI health: REMOTE_TIMEOUT failures.",
        true,
        &|n| u64::from(n.health_stats.timeout),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_health_error_total",
        "Peer NI health: REMOTE_ERROR failures.",
        true,
        &|n| u64::from(n.health_stats.error),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_health_network_timeout_total",
        "Peer NI health: NETWORK_TIMEOUT failures.",
        true,
        &|n| u64::from(n.health_stats.network_timeout),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_available_tx_credits",
        "Tx credits a peer NI has now.",
        false,
        &|n| u64::from(n.credits.available_tx_credits),
    ));
    x.family(per_peer_ni(
        "lnet_router_peer_ni_min_tx_credits",
        "The fewest tx credits a peer NI had.",
        false,
        &|n| u64::from(n.credits.min_tx_credits),
    ));

    x.family(
        Family::gauge(
            "lnet_router_recovery_queue_length",
            "NIs on a recovery queue.",
        )
        .with(
            vec![("queue", "local".into())],
            u64::try_from(local_q).unwrap_or(u64::MAX),
        )
        .with(
            vec![("queue", "peer".into())],
            u64::try_from(peer_q).unwrap_or(u64::MAX),
        ),
    );
    x.family(
        Family::gauge(
            "lnet_router_last_event_id",
            "The id of the newest event recorded.",
        )
        .with(vec![], s.shared.ring.last_id()),
    );
    Ok(x.finish())
}

/// The node's counters, health values, NI status and recovery queue lengths in the
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
