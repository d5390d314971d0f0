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
//! The tree, its builder and both writers are shared with [`crate::show`], which also uses
//! [`write_cyaml`] for the nested cYAML of the ioctl-era `net show`.

use std::borrow::Cow;
use std::fmt::{Display, Write};

use super::global::{BufferPool, Routing};
use super::net::{LocalNi, NetConfig};
use super::peer::{Peer, PeerNi};
use super::route::Route;
use super::stats::{MsgStats, NiStatistics};
use super::udsp::UdspRule;
use super::Config;

/// A YAML value: a scalar already in its printed form, a map with ordered keys, or a list.
pub(crate) enum Node {
    Scalar(String),
    Map(Vec<(Key, Node)>),
    Seq(Vec<Node>),
}

/// A map key.
pub(crate) type Key = Cow<'static, str>;

/// A map under construction.
#[derive(Default)]
pub(crate) struct MapB(pub(crate) Vec<(Key, Node)>);

impl MapB {
    pub(crate) fn scalar(mut self, key: &'static str, v: impl Display) -> MapB {
        self.0
            .push((key.into(), Node::Scalar(plain(&v.to_string()))));
        self
    }

    pub(crate) fn opt(self, key: &'static str, v: Option<impl Display>) -> MapB {
        match v {
            Some(v) => self.scalar(key, v),
            None => self,
        }
    }

    /// A flag: `true` / `false`, unquoted.
    pub(crate) fn flag(self, key: &'static str, v: Option<bool>) -> MapB {
        match v {
            Some(v) => self.raw(key, v.to_string()),
            None => self,
        }
    }

    pub(crate) fn raw(mut self, key: &'static str, printed: String) -> MapB {
        self.0.push((key.into(), Node::Scalar(printed)));
        self
    }

    pub(crate) fn node(mut self, key: &'static str, n: Option<Node>) -> MapB {
        if let Some(n) = n {
            self.0.push((key.into(), n));
        }
        self
    }

    pub(crate) fn done(self) -> Node {
        Node::Map(self.0)
    }
}

/// A scalar as a plain YAML scalar when it reads back as the same string, else
/// double-quoted.
pub(crate) fn plain(s: &str) -> String {
    let needs_quotes = s.is_empty()
        || s != s.trim()
        || (s.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%',
            '@', '`', '~',
        ]) && !looks_like_number(s))
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.chars().any(|c| c.is_control())
        || matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null"
        );
    if needs_quotes {
        let mut q = String::with_capacity(s.len() + 2);
        q.push('"');
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\t' => q.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(q, "\\u{:04x}", u32::from(c));
                }
                c => q.push(c),
            }
        }
        q.push('"');
        q
    } else {
        s.to_owned()
    }
}

/// Integers (possibly negative) print plain; everything else starting with `-` is quoted.
fn looks_like_number(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Layout parameters of one renderer.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    /// Indent of a nested map.
    pub(crate) map_step: usize,
    /// Column of a sequence's dash, relative to its parent key.
    pub(crate) seq_offset: usize,
    /// The dash and its padding; the item's keys start after it.
    pub(crate) dash: &'static str,
}

pub(crate) const NETLINK: Style = Style {
    map_step: 6,
    seq_offset: 0,
    dash: "-     ",
};

pub(crate) const CYAML: Style = Style {
    map_step: 4,
    seq_offset: 4,
    dash: "- ",
};

/// Writes the entries of a map whose keys sit at `indent`. `first` is the prefix of the
/// first line (a sequence dash) if the map is a sequence item.
pub(crate) fn write_map(
    out: &mut String,
    entries: &[(Key, Node)],
    indent: usize,
    first: Option<&str>,
    style: Style,
) {
    for (i, (key, value)) in entries.iter().enumerate() {
        match (i, first) {
            (0, Some(dash)) => {
                push_spaces(out, indent.saturating_sub(dash.len()));
                out.push_str(dash);
            }
            _ => push_spaces(out, indent),
        }
        out.push_str(key);
        out.push(':');
        match value {
            Node::Scalar(s) => {
                out.push(' ');
                out.push_str(s);
                out.push('\n');
            }
            Node::Map(m) if m.is_empty() => out.push_str(" {}\n"),
            Node::Seq(s) if s.is_empty() => out.push_str(" []\n"),
            Node::Map(m) => {
                out.push('\n');
                write_map(out, m, indent + style.map_step, None, style);
            }
            Node::Seq(items) => {
                out.push('\n');
                write_seq(out, items, indent + style.seq_offset, style);
            }
        }
    }
}

/// Writes sequence items with their dash at `dash_col`.
fn write_seq(out: &mut String, items: &[Node], dash_col: usize, style: Style) {
    let key_col = dash_col + style.dash.len();
    for item in items {
        match item {
            Node::Map(m) if !m.is_empty() => write_map(out, m, key_col, Some(style.dash), style),
            Node::Map(_) => {
                push_spaces(out, dash_col);
                out.push_str(style.dash);
                out.push_str("{}\n");
            }
            Node::Seq(_) => {
                // Not produced by this module; written as an empty item rather than lost.
                push_spaces(out, dash_col);
                out.push_str(style.dash);
                out.push_str("[]\n");
            }
            Node::Scalar(s) => {
                push_spaces(out, dash_col);
                out.push_str(style.dash);
                out.push_str(s);
                out.push('\n');
            }
        }
    }
}

fn push_spaces(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

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

/// Writes map entries in the cYAML layout with nesting, as the ioctl-era (2.14) `net show`
/// prints it: each level is 4 columns deeper than its parent, keys inside a sequence item
/// sit 2 past the item's dash (so a nested sequence's dash is 2 past its parent key), and
/// an empty map or list prints as the bare key. `depth` is the nesting level of the keys,
/// `in_seq` whether they lie inside a sequence item, and `dash` whether the first key
/// starts a sequence item.
pub(crate) fn write_cyaml(
    out: &mut String,
    entries: &[(Key, Node)],
    depth: usize,
    in_seq: bool,
    dash: bool,
) {
    let base = 4 * depth;
    for (i, (key, value)) in entries.iter().enumerate() {
        if i == 0 && dash {
            push_spaces(out, base);
            out.push_str("- ");
        } else {
            push_spaces(out, base + if in_seq { 2 } else { 0 });
        }
        out.push_str(key);
        out.push(':');
        match value {
            Node::Scalar(s) => {
                out.push(' ');
                out.push_str(s);
                out.push('\n');
            }
            Node::Map(m) => {
                out.push('\n');
                write_cyaml(out, m, depth + 1, in_seq, false);
            }
            Node::Seq(items) => {
                out.push('\n');
                for item in items {
                    match item {
                        Node::Map(m) if !m.is_empty() => {
                            write_cyaml(out, m, depth + 1, true, true);
                        }
                        Node::Scalar(s) => {
                            push_spaces(out, 4 * (depth + 1));
                            out.push_str("- ");
                            out.push_str(s);
                            out.push('\n');
                        }
                        Node::Map(_) | Node::Seq(_) => {
                            push_spaces(out, 4 * (depth + 1));
                            out.push_str("-\n");
                        }
                    }
                }
            }
        }
    }
}
