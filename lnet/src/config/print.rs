//! Writing: the model as lnetctl prints it (reference 4.0).
//!
//! Each section is first turned into a small tree of keys and scalars, in lnetctl's key
//! order, then written in one of lnetctl's two layouts:
//!
//! - netlink/libyaml (`net:`, `route:`, `peer:`): indent 6, a sequence's dash at its
//!   parent's column padded to 6 (`-     net type: tcp`);
//! - cYAML (`routing:`, `buffers:`, `global:`, `udsp:`, and our `lnet-router:`): indent 4,
//!   items as `    - key` with continuation keys at +2.
//!
//! The tree and its writers live in [`yaml`](super::yaml).

use std::borrow::Cow;

use super::global::{BufferPool, Routing};
use super::net::{LocalNi, NetConfig};
use super::peer::{Peer, PeerNi};
use super::route::Route;
use super::stats::{MsgStats, NiStatistics};
use super::udsp::UdspRule;
use super::yaml::{plain, write_map, Key, MapB, Node, Style, CYAML, NETLINK};
use super::Config;

/// The whole document: netlink sections first, then the cYAML ones (reference 4.9).
pub(super) fn to_yaml(c: &Config) -> String {
    let mut out = String::new();
    let mut section = |key: &'static str, node: Node, style: Style| {
        write_map(&mut out, &[(key.into(), node)], 0, None, style);
    };
    if !c.nets.is_empty() {
        section("net", Node::Seq(c.nets.iter().map(net).collect()), NETLINK);
    }
    if !c.routes.is_empty() {
        section(
            "route",
            Node::Seq(c.routes.iter().map(route).collect()),
            NETLINK,
        );
    }
    if !c.peers.is_empty() {
        section(
            "peer",
            Node::Seq(c.peers.iter().map(peer).collect()),
            NETLINK,
        );
    }
    if let Some(r) = &c.routing {
        section("routing", routing(r), CYAML);
    }
    if let Some(b) = &c.buffers {
        let n = MapB::default()
            .opt("tiny", b.tiny)
            .opt("small", b.small)
            .opt("large", b.large)
            .done();
        section("buffers", n, CYAML);
    }
    if let Some(g) = &c.global {
        let n = MapB::default()
            .opt("numa_range", g.numa_range)
            .opt("max_interfaces", g.max_interfaces)
            .opt("discovery", g.discovery)
            .opt("drop_asym_route", g.drop_asym_route)
            .opt("retry_count", g.retry_count)
            .opt("transaction_timeout", g.transaction_timeout)
            .opt("health_sensitivity", g.health_sensitivity)
            .opt("recovery_interval", g.recovery_interval)
            .opt("router_sensitivity", g.router_sensitivity)
            .opt("lnd_timeout", g.lnd_timeout)
            .opt("response_tracking", g.response_tracking)
            .opt("recovery_limit", g.recovery_limit)
            .opt("max_recovery_ping_interval", g.max_recovery_ping_interval)
            .done();
        section("global", n, CYAML);
    }
    if !c.udsp.is_empty() {
        section("udsp", Node::Seq(c.udsp.iter().map(udsp).collect()), CYAML);
    }
    if let Some(r) = &c.router {
        let n = MapB::default()
            .opt("acceptor_address", r.acceptor_address)
            .opt("acceptor_port", r.acceptor_port)
            .opt("alive_router_check_interval", r.alive_router_check_interval)
            .opt("router_ping_timeout", r.router_ping_timeout)
            .opt("avoid_asym_router_failure", r.avoid_asym_router_failure)
            .opt("check_routers_before_use", r.check_routers_before_use)
            .opt("net_check", r.net_check)
            .opt("net_probe_interval_ms", r.net_probe_interval_ms)
            .opt("net_down_after_ms", r.net_down_after_ms)
            .done();
        section("lnet-router", n, CYAML);
    }
    out
}

fn net(n: &NetConfig) -> Node {
    MapB::default()
        .scalar("net type", n.net_type)
        .node(
            "local NI(s)",
            Some(Node::Seq(n.local_nis.iter().map(local_ni).collect())),
        )
        .done()
}

pub(crate) fn local_ni(ni: &LocalNi) -> Node {
    let interfaces = (!ni.interfaces.is_empty()).then(|| {
        Node::Map(
            ni.interfaces
                .iter()
                .enumerate()
                .map(|(i, name)| (index_key(i), Node::Scalar(plain(name))))
                .collect(),
        )
    });
    let health = ni.health_stats.as_ref().map(|h| {
        MapB::default()
            .scalar("fatal_error", h.fatal_error)
            .scalar("health value", h.health_value)
            .scalar("interrupts", h.interrupts)
            .scalar("dropped", h.dropped)
            .scalar("aborted", h.aborted)
            .scalar("no route", h.no_route)
            .scalar("timeouts", h.timeouts)
            .scalar("error", h.error)
            .opt("ping_count", h.ping_count)
            .opt("next_ping", h.next_ping)
            .done()
    });
    let tunables = ni.tunables.as_ref().map(|t| {
        MapB::default()
            .scalar("peer_timeout", t.peer_timeout)
            .scalar("peer_credits", t.peer_credits)
            .scalar("peer_buffer_credits", t.peer_buffer_credits)
            .scalar("credits", t.credits)
            .done()
    });
    let lnd = ni.lnd_tunables.as_ref().map(|l| {
        MapB::default()
            .opt("peercredits_hiw", l.peercredits_hiw)
            .opt("concurrent_sends", l.concurrent_sends)
            .flag("map_on_demand", l.map_on_demand)
            .opt("fmr_pool_size", l.fmr_pool_size)
            .opt("fmr_flush_trigger", l.fmr_flush_trigger)
            .opt("fmr_cache", l.fmr_cache)
            .opt("ntx", l.ntx)
            .opt("conns_per_peer", l.conns_per_peer)
            .opt("timeout", l.timeout)
            .opt("tos", l.tos)
            .done()
    });
    let mut m = MapB::default()
        .opt("nid", ni.nid)
        .opt("status", ni.status)
        .node("interfaces", interfaces)
        .node("statistics", ni.statistics.as_ref().map(statistics))
        .node("sent_stats", ni.sent_stats.as_ref().map(msg_stats))
        .node("received_stats", ni.received_stats.as_ref().map(msg_stats))
        .node("dropped_stats", ni.dropped_stats.as_ref().map(msg_stats))
        .node("health stats", health)
        .node("tunables", tunables)
        .node("lnd tunables", lnd)
        .opt("dev cpt", ni.dev_cpt);
    if let Some(cpt) = &ni.cpt {
        // lnetctl prints the CPT list already quoted.
        m = m.raw("CPT", format!("\"{cpt}\""));
    }
    m.done()
}

/// `0`, `1`, ... as map keys of `interfaces:`.
fn index_key(i: usize) -> Key {
    Cow::Owned(i.to_string())
}

fn statistics(s: &NiStatistics) -> Node {
    let mut m = MapB::default()
        .scalar("send_count", s.send_count)
        .scalar("recv_count", s.recv_count)
        .scalar("drop_count", s.drop_count);
    if let Some(l) = &s.latency {
        m = m
            .scalar("put_egress_samples", l.put_egress_samples)
            .scalar("put_egress_min_nsec", l.put_egress_min_nsec)
            .scalar("put_egress_max_nsec", l.put_egress_max_nsec)
            .scalar("put_egress_avg_nsec", l.put_egress_avg_nsec)
            .scalar("get_rtt_samples", l.get_rtt_samples)
            .scalar("get_rtt_min_nsec", l.get_rtt_min_nsec)
            .scalar("get_rtt_max_nsec", l.get_rtt_max_nsec)
            .scalar("get_rtt_avg_nsec", l.get_rtt_avg_nsec)
            .scalar("put_ack_samples", l.put_ack_samples)
            .scalar("put_ack_min_nsec", l.put_ack_min_nsec)
            .scalar("put_ack_max_nsec", l.put_ack_max_nsec)
            .scalar("put_ack_avg_nsec", l.put_ack_avg_nsec);
    }
    m.done()
}

fn msg_stats(s: &MsgStats) -> Node {
    MapB::default()
        .scalar("put", s.put)
        .scalar("get", s.get)
        .scalar("reply", s.reply)
        .scalar("ack", s.ack)
        .scalar("hello", s.hello)
        .done()
}

fn route(r: &Route) -> Node {
    MapB::default()
        .scalar("net", r.net)
        .scalar("gateway", r.gateway)
        .opt("hop", r.hop)
        .opt("priority", r.priority)
        .opt("health_sensitivity", r.health_sensitivity)
        .opt("state", r.state)
        .opt("type", r.route_type)
        .done()
}

fn peer(p: &Peer) -> Node {
    MapB::default()
        .scalar("primary nid", p.primary_nid)
        .flag("Multi-Rail", Some(p.multi_rail))
        .opt("peer state", p.peer_state)
        .node(
            "peer ni",
            Some(Node::Seq(p.peer_nis.iter().map(peer_ni).collect())),
        )
        .done()
}

pub(crate) fn peer_ni(ni: &PeerNi) -> Node {
    let mut m = MapB::default().scalar("nid", ni.nid).opt("state", ni.state);
    if let Some(c) = &ni.credits {
        m = m
            .scalar("max_ni_tx_credits", c.max_ni_tx_credits)
            .scalar("available_tx_credits", c.available_tx_credits)
            .scalar("min_tx_credits", c.min_tx_credits)
            .scalar("tx_q_num_of_buf", c.tx_q_num_of_buf)
            .scalar("available_rtr_credits", c.available_rtr_credits)
            .scalar("min_rtr_credits", c.min_rtr_credits)
            .scalar("refcount", c.refcount);
    }
    let health = ni.health_stats.as_ref().map(|h| {
        MapB::default()
            .scalar("health value", h.health_value)
            .scalar("dropped", h.dropped)
            .scalar("timeout", h.timeout)
            .scalar("error", h.error)
            .scalar("network timeout", h.network_timeout)
            .opt("ping_count", h.ping_count)
            .opt("next_ping", h.next_ping)
            .done()
    });
    m.node("statistics", ni.statistics.as_ref().map(statistics))
        .node("sent_stats", ni.sent_stats.as_ref().map(msg_stats))
        .node("received_stats", ni.received_stats.as_ref().map(msg_stats))
        .node("dropped_stats", ni.dropped_stats.as_ref().map(msg_stats))
        .node("health stats", health)
        .done()
}

fn routing(r: &Routing) -> Node {
    if r.cpts.is_empty() {
        return MapB::default().scalar("enable", r.enable.to_u32()).done();
    }
    let pool = |p: &BufferPool| {
        MapB::default()
            .scalar("npages", p.npages)
            .scalar("nbuffers", p.nbuffers)
            .scalar("credits", p.credits)
            .scalar("mincredits", p.mincredits)
            .done()
    };
    let mut items: Vec<Node> = r
        .cpts
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let pools = MapB::default()
                .node("tiny", Some(pool(&c.tiny)))
                .node("small", Some(pool(&c.small)))
                .node("large", Some(pool(&c.large)))
                .done();
            Node::Map(vec![(cpt_key(i), pools)])
        })
        .collect();
    items.push(MapB::default().scalar("enable", r.enable.to_u32()).done());
    Node::Seq(items)
}

/// `cpt[N]` keys of `routing show`.
fn cpt_key(i: usize) -> Key {
    Cow::Owned(format!("cpt[{i}]"))
}

fn udsp(u: &UdspRule) -> Node {
    let action = u
        .priority
        .map(|p| MapB::default().scalar("priority", p).done());
    MapB::default()
        .opt("idx", u.idx)
        .opt("src", u.src.as_deref())
        .opt("dst", u.dst.as_deref())
        .opt("rte", u.rte.as_deref())
        .node("action", action)
        .done()
}
