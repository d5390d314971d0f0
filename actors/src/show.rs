//! A running node's state as the `lnetctl ... show` documents of [`lnet::show`].
//!
//! The documents are filled from the actors' live views: the counters, health values,
//! credits and status of the local NIs and peer NIs, and the node-wide counters. `0@lo`
//! comes first, as lnetctl shows it: up, health value 0, zero tunables, no LND tunables.
//!
//! A local NI's `status` is what this node advertises for it in its ping info: `down`
//! while its link is down, its net is silent (the net check) or the node drains, as the
//! kernel shows an NI it advertises down. `fatal_error` is 1 while its link is down;
//! `ping_count` and `next_ping` (seconds of the node's clock) come from the recovery
//! queues. In `stats show`, `msgs_alloc` is the messages in flight, `msgs_max` the most
//! there have been at once, `rst_alloc` the transactions waiting for their ACK or REPLY,
//! `send_length` the payload of this node's own PUTs (counted when sent, failed ones
//! included) and of the GETs it served, `recv_length` the payload received for this node; `errors` is 0, as the kernel never counts one.
//!
//! `interfaces:` and `lnd tunables:` are what the NI was started with
//! ([`NiDescription`]), left out when nobody recorded them; `peer_credits`,
//! `peer_buffer_credits` and `peer_timeout` are the net's tunables (the peer NIs' credits
//! and the peer NI aliveness rule, [`lnet::aliveness`]).
//!
//! `dev cpt` is -1 (`CFS_CPT_ANY`): the kernel gives the CPT whose CPUs lie on the NUMA node
//! of the NI's device, but the CPT threads here are not bound to CPUs, so no CPT belongs to
//! a node.
//!
//! Fields the node does not track yet print the value lnetctl shows on a quiet node:
//! `udsp info` (-1, no rule), the router credits of a peer NI that never sent through
//! this node (its tx credits). `peer state` is the kernel's bits for what this node
//! learned of the peer (`peer_state`); a peer NI's `refcount` is 1 for the peer table and
//! one per message holding it (`peer_ni_refcount`). The latency keys of `statistics:` are this
//! node's own operations through the NI or peer NI (its PUTs' egress, its GETs' and
//! acknowledged PUTs' round trips), as the kernel's.
//!
//! [`Node::route_show`] and [`Node::routing_config`] give the `route:` and `routing:`
//! sections of the configuration model, as `lnetctl route show -v` and `routing show` print
//! them.

use std::collections::BTreeMap;

use lnet::config::{
    Cpts, LatencyStats, LndTunables, MsgStats, NiHealthStats, NiStatistics, NiStatus, NiTunables,
    PeerNiCredits, PeerNiHealthStats, PeerNiState,
};
use lnet::health::check::NiState;
use lnet::health::HealthStatus;
use lnet::recovery::{RecoveryEntry, RecoveryKind};
use lnet::show::{
    NetShow, PeerShow, RecoveryShow, ShowNet, ShowNi, ShowPeer, ShowPeerNi, StatsShow, UdspInfo,
};
use lnet::udsp::UdspPolicy;
use lnet::{Net, Nid};

use crate::ni::{Latency, LocalNiView, NiStats, OpLatencies, PeerNiView, TypeCounts};
use crate::node::{Node, NodeError};

/// What `net show` prints of a local NI beyond what the node tracks: the interface it
/// runs on and its LND's tunables, recorded by whoever started the NI
/// ([`Node::describe_ni`]). Without one, `interfaces:` and `lnd tunables:` are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NiDescription {
    /// `interfaces:` (`0: eth0`).
    pub interfaces: Vec<String>,
    /// `lnd tunables:`, as the LND runs with them.
    pub lnd_tunables: Option<LndTunables>,
}

fn u32_of(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn count(stats: &NiStats, status: HealthStatus) -> u32 {
    u32_of(stats.health_stats.get(&status).copied().unwrap_or(0))
}

fn statistics(stats: &NiStats) -> NiStatistics {
    NiStatistics {
        send_count: u32_of(stats.send_count),
        recv_count: u32_of(stats.recv_count),
        drop_count: u32_of(stats.drop_count),
        latency: Some(latency(&stats.latency)),
    }
}

/// The latency keys of `statistics:`, as the kernel reports them: samples, and the
/// shortest, longest and mean in nanoseconds (0 with no sample).
fn latency(l: &OpLatencies) -> LatencyStats {
    let samples = |x: &Latency| u32::try_from(x.samples).unwrap_or(u32::MAX);
    LatencyStats {
        put_egress_samples: samples(&l.put_egress),
        put_egress_min_nsec: l.put_egress.min_ns,
        put_egress_max_nsec: l.put_egress.max_ns,
        put_egress_avg_nsec: l.put_egress.avg_ns(),
        get_rtt_samples: samples(&l.get_rtt),
        get_rtt_min_nsec: l.get_rtt.min_ns,
        get_rtt_max_nsec: l.get_rtt.max_ns,
        get_rtt_avg_nsec: l.get_rtt.avg_ns(),
        put_ack_samples: samples(&l.put_ack),
        put_ack_min_nsec: l.put_ack.min_ns,
        put_ack_max_nsec: l.put_ack.max_ns,
        put_ack_avg_nsec: l.put_ack.avg_ns(),
    }
}

fn health_value(h: lnet::health::HealthValue) -> i32 {
    i32::try_from(h.get()).unwrap_or(i32::MAX)
}

fn cpts(n: usize) -> Cpts {
    let n = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    Cpts((0..n).collect())
}

fn msg_stats(c: &TypeCounts) -> MsgStats {
    MsgStats {
        put: u32_of(c.put),
        get: u32_of(c.get),
        reply: u32_of(c.reply),
        ack: u32_of(c.ack),
        hello: u32_of(c.hello),
    }
}

/// `0@lo` as lnetctl shows it on a quiet node.
fn lo_ni(n_cpts: usize) -> ShowNi {
    ShowNi {
        nid: Nid::LO_0,
        status: NiStatus::Up,
        interfaces: Vec::new(),
        statistics: statistics(&NiStats::default()),
        udsp: Some(UdspInfo::default()),
        sent_stats: MsgStats::default(),
        received_stats: MsgStats::default(),
        dropped_stats: MsgStats::default(),
        health_stats: NiHealthStats {
            ping_count: Some(0),
            next_ping: Some(0),
            ..NiHealthStats::default()
        },
        tunables: NiTunables::default(),
        lnd_tunables: None,
        dev_cpt: -1,
        cpt: cpts(n_cpts),
    }
}

/// What the show of one local NI takes beyond its view.
struct NiShowState<'a> {
    udsp: &'a UdspPolicy,
    peer_credits: u32,
    peer_buffer_credits: u32,
    /// The net's `peer_timeout`, seconds.
    peer_timeout: u32,
    description: Option<NiDescription>,
    n_cpts: usize,
    /// Whether this node advertises the NI up in its ping info.
    advertised_up: bool,
    /// Whether its link is down.
    link_down: bool,
    /// Its entry on the local NI recovery queue.
    recovery: Option<&'a RecoveryEntry<Nid>>,
}

fn local_ni(v: &LocalNiView, st: &NiShowState<'_>) -> ShowNi {
    let s = &v.stats;
    let (udsp, peer_credits, n_cpts) = (st.udsp, st.peer_credits, st.n_cpts);
    ShowNi {
        nid: v.nid,
        status: match v.state {
            NiState::Up if st.advertised_up => NiStatus::Up,
            _ => NiStatus::Down,
        },
        interfaces: st
            .description
            .as_ref()
            .map(|d| d.interfaces.clone())
            .unwrap_or_default(),
        statistics: statistics(s),
        udsp: Some(udsp.local_ni_info(&v.nid)),
        sent_stats: msg_stats(&s.sent),
        received_stats: msg_stats(&s.received),
        dropped_stats: msg_stats(&s.dropped),
        health_stats: NiHealthStats {
            fatal_error: i32::from(st.link_down),
            health_value: health_value(v.health),
            interrupts: count(s, HealthStatus::LocalInterrupt),
            dropped: count(s, HealthStatus::LocalDropped),
            aborted: count(s, HealthStatus::LocalAborted),
            no_route: count(s, HealthStatus::LocalNoRoute),
            timeouts: count(s, HealthStatus::LocalTimeout),
            error: count(s, HealthStatus::LocalError),
            ping_count: Some(st.recovery.map_or(0, |e| e.ping_count)),
            next_ping: Some(st.recovery.map_or(0, |e| e.next_ping.as_millis() / 1000)),
        },
        tunables: NiTunables {
            peer_timeout: i32::try_from(st.peer_timeout).unwrap_or(i32::MAX),
            peer_credits: i32::try_from(peer_credits).unwrap_or(i32::MAX),
            peer_buffer_credits: i32::try_from(st.peer_buffer_credits).unwrap_or(i32::MAX),
            credits: i32::try_from(v.max_tx_credits).unwrap_or(i32::MAX),
        },
        lnd_tunables: st.description.as_ref().and_then(|d| d.lnd_tunables.clone()),
        dev_cpt: -1,
        cpt: cpts(n_cpts),
    }
}

fn credits(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

/// `state:` of a peer NI, as the kernel gives it: its cached NI status (`up`/`down`) when
/// it is a gateway or the aliveness rule is on for it (`aliveness`: routing, and its net's
/// `peer_timeout` above 0), else `NA`.
fn peer_ni_state(v: &PeerNiView, gateway: bool, aliveness: bool) -> PeerNiState {
    match (gateway || aliveness, v.status_up) {
        (false, _) => PeerNiState::NotApplicable,
        (true, true) => PeerNiState::Up,
        (true, false) => PeerNiState::Down,
    }
}

/// A peer NI's `refcount`, as the kernel's (`lpni_refcount`, a kref in later trees) counts
/// the references to it: one for its place in the peer table, and one per LNet message
/// that holds it. In lustre-release's lib-move.c a message takes a reference on its tx
/// peer NI when the send picks it (`msg_txpeer`, before the tx credits are charged, so a
/// message queued for a credit holds it too) and drops it when its tx credits are given
/// back at completion (`lnet_return_tx_credits_locked`); a received message takes one on
/// its rx peer NI in `lnet_parse` (`msg_rxpeer`) and drops it when its rx credits are given
/// back at finalize (`lnet_return_rx_credits_locked`), which for a forwarded message is
/// after its forward completed, together with its router buffer and peer router credit.
/// Here: `tx_held`, the messages charged to its tx credits and not completed (those
/// waiting for a credit included: its tx credits when idle less those now), and
/// `rtr_held`, the messages received from it that hold (or wait for) one of its router
/// buffer credits. The kernel's other, short-lived references (a message received for
/// this node while it is being delivered, the recovery queue, a lookup under way) are not
/// counted; an idle peer NI is 1, as the kernel shows it.
fn peer_ni_refcount(tx_held: i64, rtr_held: i64) -> u32 {
    let held = tx_held.max(0).saturating_add(rtr_held.max(0));
    u32::try_from(held.saturating_add(1)).unwrap_or(u32::MAX)
}

/// Messages holding a credit of `credits`, or waiting for one: its credits when idle less
/// those now.
fn held(max: u32, now: i32) -> i64 {
    i64::from(max) - i64::from(now)
}

fn peer_ni(
    v: &PeerNiView,
    udsp: UdspInfo,
    rtr: Option<&lnet::rtrbuf::PeerRtrCredits>,
    rtr_held: i64,
    state: PeerNiState,
) -> ShowPeerNi {
    let s = &v.stats;
    let (rtr_now, rtr_min) = match rtr {
        Some(r) => (credits(r.credits), credits(r.mincredits)),
        None => (v.max_tx_credits, v.max_tx_credits),
    };
    ShowPeerNi {
        nid: v.nid,
        udsp: Some(udsp),
        state,
        credits: PeerNiCredits {
            max_ni_tx_credits: v.max_tx_credits,
            available_tx_credits: credits(v.tx_credits),
            min_tx_credits: credits(v.min_tx_credits),
            tx_q_num_of_buf: u32::try_from(v.tx_queued_bytes).unwrap_or(u32::MAX),
            available_rtr_credits: rtr_now,
            min_rtr_credits: rtr_min,
            refcount: peer_ni_refcount(held(v.max_tx_credits, v.tx_credits), rtr_held),
        },
        statistics: statistics(s),
        sent_stats: msg_stats(&s.sent),
        received_stats: msg_stats(&s.received),
        dropped_stats: msg_stats(&s.dropped),
        health_stats: PeerNiHealthStats {
            health_value: health_value(v.health),
            dropped: count(s, HealthStatus::RemoteDropped),
            timeout: count(s, HealthStatus::RemoteTimeout),
            error: count(s, HealthStatus::RemoteError),
            network_timeout: count(s, HealthStatus::NetworkTimeout),
            ping_count: Some(0),
            next_ping: Some(0),
        },
    }
}

/// The kernel's peer state bits (`lp_state`) that `peer show` prints as `peer state`.
mod peer_bits {
    /// `LNET_PEER_MULTI_RAIL`.
    pub(super) const MULTI_RAIL: u32 = 1 << 0;
    /// `LNET_PEER_NO_DISCOVERY`: its ping info did not have the discovery feature.
    pub(super) const NO_DISCOVERY: u32 = 1 << 1;
    /// `LNET_PEER_ROUTER_ENABLED`: its ping info did not say routing disabled.
    pub(super) const ROUTER_ENABLED: u32 = 1 << 2;
    /// `LNET_PEER_CONFIGURED`.
    pub(super) const CONFIGURED: u32 = 1 << 3;
    /// `LNET_PEER_DISCOVERED`.
    pub(super) const DISCOVERED: u32 = 1 << 4;
    /// `LNET_PEER_NIDS_UPTODATE`: its NIDs are those of its last ping info.
    pub(super) const NIDS_UPTODATE: u32 = 1 << 8;
}

/// `peer state`: the kernel's bits for what this node knows of the peer. A peer whose
/// ping info this node learned (a ping reply, a router check, a push) is discovered with
/// its NIDs up to date, and its features say whether it routes and takes discovery, as
/// the kernel sets them when it processes a ping reply or push; a peer only known from
/// traffic has no bit (as the kernel's), a configured one the configured bit. This node
/// keeps no state for a discovery under way, so the bits of one (`DISCOVERING`,
/// `PING_SENT`, ...) are never set.
fn peer_state(p: &crate::node::PeerView) -> u32 {
    use peer_bits::*;
    let mut s = 0;
    if p.multi_rail {
        s |= MULTI_RAIL;
    }
    if p.configured {
        s |= CONFIGURED;
    }
    if let Some(features) = p.learned {
        s |= DISCOVERED | NIDS_UPTODATE;
        if !features.contains(lnet::Features::DISCOVERY) {
            s |= NO_DISCOVERY;
        }
        if !features.contains(lnet::Features::RTE_DISABLED) {
            s |= ROUTER_ENABLED;
        }
    }
    s
}

/// The sum over `nis` of `f`.
fn total(nis: &[LocalNiView], f: impl Fn(&NiStats) -> u64) -> u64 {
    nis.iter()
        .map(|v| f(&v.stats))
        .fold(0u64, u64::saturating_add)
}

/// The sum over `nis` of the failures with `status`.
fn failures(nis: &[LocalNiView], status: HealthStatus) -> u64 {
    total(nis, |s| s.health_stats.get(&status).copied().unwrap_or(0))
}

fn counter(counters: &BTreeMap<&'static str, u64>, name: &str) -> u64 {
    counters.get(name).copied().unwrap_or(0)
}

impl Node {
    /// `lnetctl net show`: `lo` first, then every net in the order its first NI was added,
    /// each NI with its live counters, health value, status and credits.
    pub async fn net_show(&self) -> Result<NetShow, NodeError> {
        let nis = self.local_nis().await?;
        let (net_credits, n_cpts) = self.show_settings().await?;
        let udsp = self.udsp().await?;
        let advertised: BTreeMap<Nid, bool> = self
            .ping_info()
            .await?
            .statuses()
            .map(|(n, s)| (n, s.is_up()))
            .collect();
        let links_down = self.links_down().await?;
        let recovery = self.recovery(RecoveryKind::LocalNi).await?;
        let mut nets = vec![ShowNet {
            net_type: Net::LO,
            nis: vec![lo_ni(n_cpts)],
        }];
        for v in &nis {
            let credits = net_credits.get(&v.nid.net);
            let st = NiShowState {
                udsp: &udsp,
                peer_credits: credits.map_or(0, |c| c.peer_credits),
                peer_buffer_credits: credits.map_or(0, |c| c.peer_buffer_credits),
                peer_timeout: credits.map_or(0, |c| c.peer_timeout),
                description: self.ni_description(&v.nid),
                n_cpts,
                advertised_up: advertised.get(&v.nid).copied().unwrap_or(false),
                link_down: links_down.contains(&v.nid),
                recovery: recovery.iter().find(|e| e.key == v.nid),
            };
            let ni = local_ni(v, &st);
            match nets.iter_mut().find(|n| n.net_type == v.nid.net) {
                Some(net) => net.nis.push(ni),
                None => nets.push(ShowNet {
                    net_type: v.nid.net,
                    nis: vec![ni],
                }),
            }
        }
        Ok(NetShow { nets })
    }

    /// `lnetctl peer show`: every peer with its peer NIs' live counters, health values and
    /// credits.
    pub async fn peer_show(&self) -> Result<PeerShow, NodeError> {
        let peers = self.peers().await?;
        let udsp = self.udsp().await?;
        let local_nids: Vec<Nid> = self.local_nis().await?.iter().map(|v| v.nid).collect();
        let mut gateways: Vec<Nid> = self
            .routes()
            .await?
            .iter()
            .map(|r| r.spec.gateway)
            .collect();
        gateways.sort();
        gateways.dedup();
        let routing = self.routing_show().await?;
        let (net_credits, _) = self.show_settings().await?;
        let aliveness =
            |net: Net| routing.enabled && net_credits.get(&net).is_some_and(|c| c.peer_timeout > 0);
        // A peer NI's router-buffer credits are kept by each CPT it sent through.
        let mut rtr_held: BTreeMap<Nid, i64> = BTreeMap::new();
        for (n, c) in &routing.buffers.peers {
            *rtr_held.entry(*n).or_default() += held(c.max, c.credits);
        }
        let rtr: BTreeMap<Nid, lnet::rtrbuf::PeerRtrCredits> =
            routing.buffers.peers.into_iter().collect();
        Ok(PeerShow {
            peers: peers
                .iter()
                .map(|p| ShowPeer {
                    primary_nid: p.primary,
                    multi_rail: p.multi_rail,
                    peer_state: peer_state(p),
                    nis: p
                        .nis
                        .iter()
                        .map(|v| {
                            let info = udsp.peer_ni_info_with(&v.nid, &local_nids, &gateways);
                            let gateway = gateways.binary_search(&v.nid).is_ok();
                            let state = peer_ni_state(v, gateway, aliveness(v.nid.net));
                            let rtr_held = rtr_held.get(&v.nid).copied().unwrap_or(0);
                            peer_ni(v, info, rtr.get(&v.nid), rtr_held, state)
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    /// `lnetctl stats show`: the sends, receives and failures of every local NI (by health
    /// status) and the node-wide resend, timeout and drop counters.
    pub async fn stats_show(&self) -> Result<StatsShow, NodeError> {
        let nis = self.local_nis().await?;
        let c = self.counters().await?;
        let f = |s| failures(&nis, s);
        Ok(StatsShow {
            msgs_alloc: counter(&c, "msgs_alloc"),
            msgs_max: counter(&c, "msgs_max"),
            rst_alloc: counter(&c, "rst_alloc"),
            errors: 0,
            send_count: total(&nis, |s| s.send_count),
            resend_count: counter(&c, "resend_count"),
            response_timeout_count: counter(&c, "response_timeout_count"),
            local_interrupt_count: f(HealthStatus::LocalInterrupt),
            local_dropped_count: f(HealthStatus::LocalDropped),
            local_aborted_count: f(HealthStatus::LocalAborted),
            local_no_route_count: f(HealthStatus::LocalNoRoute),
            local_timeout_count: f(HealthStatus::LocalTimeout),
            local_error_count: f(HealthStatus::LocalError),
            remote_dropped_count: f(HealthStatus::RemoteDropped),
            remote_error_count: f(HealthStatus::RemoteError),
            remote_timeout_count: f(HealthStatus::RemoteTimeout),
            network_timeout_count: f(HealthStatus::NetworkTimeout),
            failed_resends: Some(counter(&c, "failed_resends")),
            successful_resends: Some(counter(&c, "successful_resends")),
            recv_count: total(&nis, |s| s.recv_count),
            route_count: counter(&c, "route_count"),
            drop_count: total(&nis, |s| s.drop_count).saturating_add(counter(&c, "drop_count")),
            send_length: counter(&c, "send_length"),
            recv_length: counter(&c, "recv_length"),
            route_length: counter(&c, "route_length"),
            drop_length: counter(&c, "drop_length"),
        })
    }

    /// `lnetctl route show -v`: every route with its state and type (`single-hop` when
    /// the gateway's ping info lists an NI on the remote net, `multi-hop` otherwise; no
    /// type before the gateway's first ping).
    pub async fn route_show(&self) -> Result<Vec<lnet::config::Route>, NodeError> {
        use lnet::config::{RouteState, RouteType};
        Ok(self
            .routes()
            .await?
            .into_iter()
            .map(|r| lnet::config::Route {
                net: r.spec.net,
                gateway: r.spec.gateway,
                hop: Some(r.spec.hops.map_or(-1, i64::from)),
                priority: Some(r.spec.priority),
                health_sensitivity: None,
                state: Some(if r.down.is_none() {
                    RouteState::Up
                } else {
                    RouteState::Down
                }),
                route_type: r.single_hop.map(|s| {
                    if s {
                        RouteType::SingleHop
                    } else {
                        RouteType::MultiHop
                    }
                }),
            })
            .collect())
    }

    /// `lnetctl routing show`: the router buffer pools of each CPT and whether routing is
    /// enabled.
    pub async fn routing_config(&self) -> Result<lnet::config::Routing, NodeError> {
        use lnet::config::{BufferPool, CptBuffers, Routing, RoutingState};
        let show = self.routing_show().await?;
        let pool = |p: &lnet::rtrbuf::PoolStats| BufferPool {
            npages: p.npages,
            nbuffers: p.nbuffers,
            credits: p.credits,
            mincredits: p.mincredits,
        };
        Ok(Routing {
            enable: if show.enabled {
                RoutingState::Enabled
            } else {
                RoutingState::Disabled
            },
            cpts: show
                .buffers
                .cpts
                .iter()
                .map(|[t, s, l]| CptBuffers {
                    tiny: pool(t),
                    small: pool(s),
                    large: pool(l),
                })
                .collect(),
        })
    }

    /// `lnetctl debug recovery --local|--peer`: the NIDs on a recovery queue, in order.
    pub async fn recovery_show(&self, kind: RecoveryKind) -> Result<RecoveryShow, NodeError> {
        let entries = self.recovery(kind).await?;
        Ok(RecoveryShow {
            kind: match kind {
                RecoveryKind::LocalNi => lnet::show::RecoveryKind::Local,
                RecoveryKind::PeerNi => lnet::show::RecoveryKind::Peer,
            },
            nids: entries.iter().map(|e| e.key).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{held, peer_ni_refcount};

    #[test]
    fn an_idle_peer_ni_is_held_by_the_peer_table_alone() {
        assert_eq!(peer_ni_refcount(held(8, 8), 0), 1);
    }

    #[test]
    fn each_message_charged_or_waiting_or_holding_a_router_buffer_holds_it() {
        // Three sends charged, two more waiting for a credit.
        assert_eq!(peer_ni_refcount(held(3, -2), 0), 6);
        // One send under way, two forwarded messages from it holding router buffers.
        assert_eq!(peer_ni_refcount(held(8, 7), held(8, 6)), 4);
        // A count above its idle value (never expected) holds nothing.
        assert_eq!(peer_ni_refcount(held(8, 9), 0), 1);
    }
}
