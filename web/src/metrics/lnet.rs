//! The node's LNet counters and health: the `lustre_*` series of the Lustre exporters and
//! the `lnet_router_*` series of the peer NIs, the recovery queues and `stats show`.

use lnet::recovery::RecoveryKind;

use super::exposition::{Exposition, Family};
use crate::error::ApiError;
use crate::state::AppState;

fn nonneg(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A metric name from a counter name: ASCII letters, digits and `_`.
fn metric_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Writes the LNet counters, health values and recovery queue lengths.
pub(crate) async fn write(x: &mut Exposition, s: &AppState) -> Result<(), ApiError> {
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
    Ok(())
}
