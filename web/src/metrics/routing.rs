//! The router's own state: routes and gateways (`route show -v`), what each local net is
//! advertised as, router buffer pools and router credits (`routing show`, `peer show -v`),
//! NI tx credits, and fault rule matches (`fault show`). `docs/metrics.md` lists each series
//! with the lnetctl field it comes from.

use std::collections::BTreeMap;

use actors::ni::LocalNiView;
use actors::node::{RouteView, RoutingShow};
use lnet::fault::{FaultKind, RuleStats};
use lnet::route::{GatewayAlive, GatewayDown, RouteDown};

use super::exposition::{Exposition, Family, Labels};
use crate::error::ApiError;
use crate::state::AppState;

/// The `reason` label of a route that is down.
fn route_down_reason(d: &RouteDown) -> &'static str {
    match d {
        RouteDown::NotChecked => "not_checked",
        RouteDown::GatewayDead(_) => "gateway_dead",
        RouteDown::RoutingDisabled => "routing_disabled",
        RouteDown::NoUpNiOnLocalNet => "no_up_ni_on_local_net",
        RouteDown::NoUpNiOnRemoteNet => "no_up_ni_on_remote_net",
        _ => "other",
    }
}

/// The `reason` and `status` labels of a dead gateway.
fn gateway_down_labels(d: &GatewayDown) -> (&'static str, &'static str) {
    match d {
        GatewayDown::NoReply => ("no_reply", ""),
        GatewayDown::SendFailed(s) => ("send_failed", s.name()),
        GatewayDown::Unreachable(s) => ("unreachable", s.name()),
        _ => ("other", ""),
    }
}

/// The `state` label of a gateway.
fn gateway_state(g: &GatewayAlive) -> &'static str {
    match g {
        GatewayAlive::Unchecked => "unchecked",
        GatewayAlive::Alive => "alive",
        GatewayAlive::Dead(_) => "dead",
    }
}

const POOLS: [&str; 3] = ["tiny", "small", "large"];
const GATEWAY_STATES: [&str; 3] = ["unchecked", "alive", "dead"];

/// Writes the route and gateway series.
pub(crate) fn write_routes(x: &mut Exposition, routes: &[RouteView]) {
    let rl = |r: &RouteView| -> Labels {
        vec![
            ("net", r.spec.net.to_string()),
            ("gateway", r.spec.gateway.to_string()),
        ]
    };
    let mut up = Family::gauge(
        "lnet_router_route_up",
        "Route state: 1 up, 0 down (route show -v: state).",
    );
    let mut down = Family::gauge(
        "lnet_router_route_down_reason",
        "1 for why a route is down (only while it is down).",
    );
    let mut hops = Family::gauge(
        "lnet_router_route_hops",
        "Hops to the remote net; -1 undefined (route show -v: hop).",
    );
    let mut prio = Family::gauge(
        "lnet_router_route_priority",
        "Route priority, lower is better (route show -v: priority).",
    );
    let mut single = Family::gauge(
        "lnet_router_route_single_hop",
        "1 when the gateway has an NI on the remote net (route show -v: type single-hop).",
    );
    let mut gateways: BTreeMap<String, GatewayAlive> = BTreeMap::new();
    for r in routes {
        up.add(rl(r), r.down.is_none());
        if let Some(d) = &r.down {
            let mut l = rl(r);
            l.push(("reason", route_down_reason(d).into()));
            down.add(l, 1u64);
        }
        hops.add(rl(r), r.spec.hops.map_or(-1, i64::from));
        prio.add(rl(r), r.spec.priority);
        single.add(rl(r), r.single_hop == Some(true));
        gateways.insert(r.spec.gateway.to_string(), r.gateway);
    }
    x.family(up);
    x.family(down);
    x.family(hops);
    x.family(prio);
    x.family(single);

    let mut state = Family::gauge(
        "lnet_router_gateway_state",
        "1 for the state of each gateway (unchecked, alive or dead), 0 for the others.",
    );
    let mut why = Family::gauge(
        "lnet_router_gateway_down_reason",
        "1 for why a gateway is dead (only while it is).",
    );
    for (gw, alive) in &gateways {
        for s in GATEWAY_STATES {
            state.add(
                vec![("gateway", gw.clone()), ("state", s.into())],
                gateway_state(alive) == s,
            );
        }
        if let GatewayAlive::Dead(d) = alive {
            let (reason, status) = gateway_down_labels(d);
            why.add(
                vec![
                    ("gateway", gw.clone()),
                    ("reason", reason.into()),
                    ("status", status.into()),
                ],
                1u64,
            );
        }
    }
    x.family(state);
    x.family(why);
}

/// Writes the routing, advertised net, buffer and router credit series; `now_ms` is the
/// node's clock (for how long ago each net was heard).
pub(crate) fn write_routing(x: &mut Exposition, r: &RoutingShow, now_ms: u64) {
    x.family(
        Family::gauge(
            "lnet_router_routing_enabled",
            "1 when this node forwards (routing show: enable).",
        )
        .with(vec![], r.enabled),
    );
    x.family(
        Family::gauge(
            "lnet_router_draining",
            "1 while this router drains (lnet-router drain): out of service, its NIs advertised DOWN and routing disabled, still forwarding what it is sent.",
        )
        .with(vec![], r.draining),
    );
    let mut adv = Family::gauge(
        "lnet_router_net_advertised_up",
        "1 when this router advertises its NIs on the net UP, 0 DOWN (the status its ping replies give).",
    );
    let mut heard = Family::gauge(
        "lnet_router_net_last_heard_seconds",
        "Seconds since something that counts as a sign of life arrived on the net.",
    );
    for n in &r.nets {
        adv.add(vec![("net", n.net.to_string())], n.up);
        #[allow(clippy::cast_precision_loss)] // milliseconds: far below 2^52
        let age = now_ms.saturating_sub(n.last_heard.as_millis()) as f64 / 1000.0;
        heard.add(vec![("net", n.net.to_string())], age);
    }
    x.family(adv);
    x.family(heard);

    let pool =
        |name: &'static str, help: &'static str, f: &dyn Fn(&lnet::rtrbuf::PoolStats) -> i64| {
            let mut fam = Family::gauge(name, help);
            for (cpt, pools) in r.buffers.cpts.iter().enumerate() {
                for (p, stats) in POOLS.iter().zip(pools.iter()) {
                    fam.add(
                        vec![("cpt", cpt.to_string()), ("pool", (*p).into())],
                        f(stats),
                    );
                }
            }
            fam
        };
    x.family(pool(
        "lnet_router_buffers",
        "Router buffers in a pool (routing show: nbuffers).",
        &|p| i64::from(p.nbuffers),
    ));
    x.family(pool(
        "lnet_router_buffer_pages",
        "Pages per buffer of a pool (routing show: npages).",
        &|p| i64::from(p.npages),
    ));
    x.family(pool(
        "lnet_router_buffer_credits",
        "Free buffers of a pool; negative: messages wait (routing show: credits).",
        &|p| i64::from(p.credits),
    ));
    x.family(pool(
        "lnet_router_buffer_min_credits",
        "The lowest free buffers a pool had (routing show: mincredits).",
        &|p| i64::from(p.mincredits),
    ));

    let mut cur = Family::gauge(
        "lnet_router_peer_rtr_credits",
        "Router credits of a peer NI; negative: its messages wait (peer show -v: available_rtr_credits).",
    );
    let mut min = Family::gauge(
        "lnet_router_peer_rtr_min_credits",
        "The lowest router credits of a peer NI (peer show -v: min_rtr_credits).",
    );
    let mut max = Family::gauge(
        "lnet_router_peer_rtr_max_credits",
        "Router credits of a peer NI when idle (peer_buffer_credits).",
    );
    for (nid, c) in &r.buffers.peers {
        let l = vec![("nid", nid.to_string())];
        cur.add(l.clone(), c.credits);
        min.add(l.clone(), c.mincredits);
        max.add(l, c.max);
    }
    x.family(cur);
    x.family(min);
    x.family(max);
    x.family(
        Family::gauge(
            "lnet_router_waiting_messages",
            "Messages waiting for a router buffer or a router credit now.",
        )
        .with(vec![], r.buffers.waiting),
    );
}

/// Writes the tx credits of each local NI.
pub(crate) fn write_ni_credits(x: &mut Exposition, nis: &[LocalNiView]) {
    let mut cur = Family::gauge(
        "lnet_router_ni_tx_credits",
        "Tx credits of a local NI now; negative: messages are queued (nis: tx).",
    );
    let mut min = Family::gauge(
        "lnet_router_ni_min_tx_credits",
        "The lowest tx credits of a local NI (nis: min).",
    );
    let mut max = Family::gauge(
        "lnet_router_ni_max_tx_credits",
        "Tx credits of a local NI when idle (net show -v: tunables credits).",
    );
    for ni in nis {
        let l = vec![("nid", ni.nid.to_string())];
        cur.add(l.clone(), ni.tx_credits);
        min.add(l.clone(), ni.min_tx_credits);
        max.add(l, ni.max_tx_credits);
    }
    x.family(cur);
    x.family(min);
    x.family(max);
}

/// Writes the matches of each fault rule.
pub(crate) fn write_fault_rules(x: &mut Exposition, rules: &[RuleStats]) {
    let mut matched = Family::counter(
        "lnet_router_fault_rule_matched_total",
        "Messages a fault rule's filters accepted (fault show: fs_count).",
    );
    let mut fired = Family::counter(
        "lnet_router_fault_rule_fired_total",
        "Messages a fault rule dropped or delayed (fault show: ds_dropped or ds_delayed).",
    );
    for r in rules {
        let kind = match r.rule.kind {
            FaultKind::Drop => "drop",
            FaultKind::Delay { .. } => "delay",
        };
        let l = vec![
            ("rule", r.id.0.to_string()),
            ("kind", kind.into()),
            (
                "local_nid",
                r.rule.local_nid.map(|n| n.to_string()).unwrap_or_default(),
            ),
        ];
        matched.add(l.clone(), r.matched);
        fired.add(l, r.fired);
    }
    x.family(matched);
    x.family(fired);
}

/// Writes every series of this module.
pub(crate) async fn write(x: &mut Exposition, s: &AppState) -> Result<(), ApiError> {
    let node = &s.shared.node;
    let routes = node.routes().await?;
    let routing = node.routing_show().await?;
    let nis = node.local_nis().await?;
    write_routes(x, &routes);
    write_routing(x, &routing, node.clock().now().as_millis());
    write_ni_credits(x, &nis);
    write_fault_rules(x, &node.fault_rules());
    Ok(())
}
