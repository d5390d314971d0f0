use super::*;
use crate::nid::LndType;
use proptest::prelude::*;

const TCP: Net = Net::new(LndType::SOCKLND, 0);
const IB: Net = Net::new(LndType::O2IBLND, 0);

fn ni(id: u32) -> LocalNiCandidate<u32> {
    LocalNiCandidate {
        id,
        net: TCP,
        fatal: false,
        health: HealthValue::MAX,
        sel_priority: LNET_MAX_SELECTION_PRIORITY,
        dev_priority: LNET_MAX_SELECTION_PRIORITY,
        numa_distance: 10,
        tx_credits: 8,
        seq: 0,
    }
}

fn peer(id: u32) -> PeerNiCandidate<u32> {
    PeerNiCandidate {
        id,
        net: TCP,
        health: HealthValue::MAX,
        sel_priority: LNET_MAX_SELECTION_PRIORITY,
        tx_credits: 8,
        seq: 0,
    }
}

fn net(id: Net) -> PeerNetCandidate<Net> {
    PeerNetCandidate {
        id,
        peer_net_health: HealthValue::MAX,
        peer_net_sel_priority: LNET_MAX_SELECTION_PRIORITY,
        local_net_health: HealthValue::MAX,
        local_net_sel_priority: LNET_MAX_SELECTION_PRIORITY,
        peer_net_seq: 0,
        local_net_seq: 0,
    }
}

fn route(id: u32) -> RouteCandidate<u32> {
    RouteCandidate {
        id,
        alive: true,
        preferred: false,
        priority: 0,
        hops: None,
        gateway_health: HealthValue::MAX,
        gateway_tx_queued_bytes: 0,
        gateway_tx_credits: 8,
        seq: 0,
    }
}

fn best(c: &[LocalNiCandidate<u32>], p: LocalNiParams) -> Option<u32> {
    best_local_ni(c, p).map(|n| n.id)
}

const P: LocalNiParams = LocalNiParams {
    numa_range: 0,
    gpu_memory: false,
};

#[test]
fn empty_candidate_lists_choose_nothing() {
    assert_eq!(best(&[], P), None);
    assert!(best_peer_ni::<u32>(&[], |_| false).is_none());
    assert!(best_route::<u32>(&[]).is_none());
    assert!(best_peer_net::<u32>(&[]).is_none());
    assert!(best_remote_peer_net::<u32>(&[]).is_none());
    assert!(select_path::<u32, u32>(&[net(TCP)], &[], &[], P, |_, _| false).is_none());
}

#[test]
fn lnt_030_local_ni_order_health_numa_credits_round_robin() {
    // Health first, even against closer NUMA and more credits.
    let mut a = ni(1);
    a.health = HealthValue::clamped(900);
    a.numa_distance = 0;
    a.tx_credits = 100;
    assert_eq!(best(&[a.clone(), ni(2)], P), Some(2));
    // Then NUMA, against more credits.
    let mut b = ni(1);
    b.numa_distance = 20;
    b.tx_credits = 100;
    assert_eq!(best(&[b, ni(2)], P), Some(2));
    // Then credits.
    let mut c = ni(1);
    c.tx_credits = 7;
    c.seq = 0;
    let mut d = ni(2);
    d.seq = 5;
    assert_eq!(best(&[c, d], P), Some(2));
    // Then round robin: the lower sequence.
    let mut e = ni(1);
    e.seq = 3;
    let mut f = ni(2);
    f.seq = 2;
    assert_eq!(best(&[e, f], P), Some(2));
    // A full tie keeps the first.
    assert_eq!(best(&[ni(7), ni(8)], P), Some(7));
}

#[test]
fn fatal_nis_lose_to_any_healthy_one() {
    let mut a = ni(1);
    a.fatal = true;
    let mut b = ni(2);
    b.health = HealthValue::ZERO;
    b.tx_credits = -50;
    assert_eq!(best(&[a.clone(), b], P), Some(2));
    // Alone, a fatal NI is still the only candidate.
    assert_eq!(best(&[a], P), Some(1));
}

#[test]
fn udsp_priorities_come_after_health() {
    let mut a = ni(1);
    a.sel_priority = 0;
    assert_eq!(best(&[ni(2), a.clone()], P), Some(1));
    let mut sick = a.clone();
    sick.health = HealthValue::clamped(999);
    assert_eq!(best(&[ni(2), sick], P), Some(2));
    // Device priority (GPU) after the UDSP priority, before NUMA.
    let mut g = ni(3);
    g.dev_priority = 1;
    g.numa_distance = 99;
    assert_eq!(best(&[ni(2), g], P), Some(3));
}

#[test]
fn snd_005_snd_020_numa_nearest_then_round_robin_to_one() {
    let mut near = ni(1);
    near.numa_distance = 10;
    let mut far = ni(2);
    far.numa_distance = 21;
    assert_eq!(best(&[far, near], P), Some(1));
    // Equally near: round robin narrows to exactly one.
    let mut a = ni(1);
    a.seq = 4;
    let mut b = ni(2);
    b.seq = 3;
    assert_eq!(best(&[a, b], P), Some(2));
}

#[test]
fn snd_025_nis_within_the_numa_range_count_as_equal() {
    let mut near = ni(1);
    near.numa_distance = 10;
    near.tx_credits = 1;
    let mut far = ni(2);
    far.numa_distance = 20;
    far.tx_credits = 8;
    let cands = [near, far];
    assert_eq!(best(&cands, P), Some(1));
    let ranged = LocalNiParams {
        numa_range: 20,
        gpu_memory: false,
    };
    assert_eq!(best(&cands, ranged), Some(2));
    // For GPU memory the distance counts as it is.
    let gpu = LocalNiParams {
        numa_range: 20,
        gpu_memory: true,
    };
    assert_eq!(best(&cands, gpu), Some(1));
}

#[test]
fn snd_030_most_credits_wins_among_equals() {
    let mut a = ni(1);
    a.tx_credits = -3;
    let mut b = ni(2);
    b.tx_credits = 2;
    assert_eq!(best(&[a, b], P), Some(2));
}

#[test]
fn snd_040_peer_ni_order_health_priority_preferred_credits_round_robin() {
    let id = |c: &[PeerNiCandidate<u32>], pref: Option<u32>| {
        best_peer_ni(c, |p| Some(p.id) == pref).map(|p| p.id)
    };
    let mut a = peer(1);
    a.health = HealthValue::clamped(900);
    a.sel_priority = 0;
    a.tx_credits = 100;
    assert_eq!(id(&[a, peer(2)], Some(1)), Some(2));
    let mut b = peer(1);
    b.sel_priority = 0;
    assert_eq!(id(&[peer(2), b], Some(2)), Some(1));
    let mut c = peer(1);
    c.tx_credits = 100;
    assert_eq!(id(&[c, peer(2)], Some(2)), Some(2));
    let mut d = peer(1);
    d.seq = 9;
    assert_eq!(id(&[d, peer(2)], None), Some(2));
    let mut e = peer(1);
    e.tx_credits = 1;
    assert_eq!(id(&[e, peer(2)], None), Some(2));
    // There is no NUMA input for peer NIs at all: the struct has no such field.
}

#[test]
fn snd_035_gateways_by_queued_bytes_then_credits() {
    // The kernel applies "least queued bytes, then most credits" to the gateway's peer NI
    // when choosing a route (2.8.5); the peer NI choice itself uses credits (2.8.3).
    let mut a = route(1);
    a.gateway_tx_queued_bytes = 4096;
    a.gateway_tx_credits = 100;
    assert_eq!(best_route(&[a, route(2)]).map(|r| r.id), Some(2));
    let mut b = route(1);
    b.gateway_tx_credits = 1;
    assert_eq!(best_route(&[b, route(2)]).map(|r| r.id), Some(2));
}

#[test]
fn snd_050_a_failed_peer_ni_gives_way_to_another() {
    let mut failed = peer(1);
    failed.health = HealthValue::MAX.decremented(100);
    failed.seq = 0;
    let mut other = peer(2);
    other.seq = 10;
    assert_eq!(
        best_peer_ni(&[failed, other], |_| false).map(|p| p.id),
        Some(2)
    );
}

#[test]
fn snd_060_local_ni_first_then_a_peer_ni_on_its_net() {
    let mut tcp_ni = ni(1);
    tcp_ni.health = HealthValue::clamped(500);
    let mut ib_ni = ni(2);
    ib_ni.net = IB;
    let mut tcp_peer = peer(10);
    tcp_peer.tx_credits = 100;
    let mut ib_peer = peer(20);
    ib_peer.net = IB;
    let mut tcp_net = net(TCP);
    tcp_net.local_net_health = HealthValue::clamped(500);
    let nets = [tcp_net, net(IB)];
    let locals = [tcp_ni.clone(), ib_ni];
    let peers = [tcp_peer.clone(), ib_peer];
    let path = select_path(&nets, &locals, &peers, P, |_, _| false).unwrap();
    assert_eq!((path.local_ni.id, path.peer_ni.id), (2, 20));
    assert_eq!(path.local_ni.net, path.peer_ni.net);
    // A net with no local NI is never chosen.
    let (locals, peers) = ([tcp_ni], [tcp_peer]);
    let path = select_path(&nets, &locals, &peers, P, |_, _| false).unwrap();
    assert_eq!((path.local_ni.id, path.peer_ni.id), (1, 10));
    // The preferred flag depends on the chosen local NI.
    let (locals, peers) = ([ni(1), ni(2)], [peer(10), peer(11)]);
    let path = select_path(&[net(TCP)], &locals, &peers, P, |p, l| {
        p.id == 11 && l.id == 1
    })
    .unwrap();
    assert_eq!((path.local_ni.id, path.peer_ni.id), (1, 11));
}

#[test]
fn snd_045_responses_go_back_from_the_addressed_nid() {
    let client = crate::nid::Nid::new(TCP, 1);
    let server_nid = crate::nid::Nid::new(IB, 2);
    let r = response_path(&client, &server_nid);
    assert_eq!((r.local, r.peer), (server_nid, client));
}

#[test]
fn peer_net_order() {
    let pick_id = |c: &[PeerNetCandidate<u32>]| best_peer_net(c).map(|n| n.id);
    let base = |id| PeerNetCandidate {
        id,
        peer_net_health: HealthValue::MAX,
        peer_net_sel_priority: 5,
        local_net_health: HealthValue::MAX,
        local_net_sel_priority: 5,
        peer_net_seq: 5,
        local_net_seq: 5,
    };
    let mut a = base(1);
    a.peer_net_health = HealthValue::clamped(1);
    a.peer_net_sel_priority = 0;
    assert_eq!(pick_id(&[a, base(2)]), Some(2));
    let mut b = base(1);
    b.peer_net_sel_priority = 0;
    b.local_net_health = HealthValue::ZERO;
    assert_eq!(pick_id(&[base(2), b]), Some(1));
    let mut c = base(1);
    c.local_net_health = HealthValue::clamped(999);
    c.local_net_sel_priority = 0;
    assert_eq!(pick_id(&[c, base(2)]), Some(2));
    let mut d = base(1);
    d.local_net_sel_priority = 0;
    d.peer_net_seq = 9;
    assert_eq!(pick_id(&[base(2), d]), Some(1));
    let mut e = base(1);
    e.peer_net_seq = 4;
    e.local_net_seq = 9;
    assert_eq!(pick_id(&[base(2), e]), Some(1));
    let mut f = base(1);
    f.local_net_seq = 4;
    assert_eq!(pick_id(&[base(2), f]), Some(1));
}

#[test]
fn remote_peer_net_order() {
    let base = |id| RemotePeerNetCandidate {
        id,
        health: HealthValue::MAX,
        sel_priority: 5,
        seq: 5,
    };
    let mut a = base(1);
    a.health = HealthValue::clamped(10);
    a.sel_priority = 0;
    assert_eq!(best_remote_peer_net(&[a, base(2)]).map(|n| n.id), Some(2));
    let mut b = base(1);
    b.sel_priority = 0;
    b.seq = 9;
    assert_eq!(best_remote_peer_net(&[base(2), b]).map(|n| n.id), Some(1));
    let mut c = base(1);
    c.seq = 0;
    assert_eq!(best_remote_peer_net(&[base(2), c]).map(|n| n.id), Some(1));
}

#[test]
fn route_order_and_aliveness() {
    let id = |c: &[RouteCandidate<u32>]| best_route(c).map(|r| r.id);
    let mut dead = route(1);
    dead.alive = false;
    dead.preferred = true;
    assert_eq!(id(&[dead.clone(), route(2)]), Some(2));
    assert_eq!(id(&[dead]), None);
    let mut pref = route(1);
    pref.preferred = true;
    pref.priority = 9;
    assert_eq!(id(&[route(2), pref]), Some(1));
    let mut prio = route(1);
    prio.priority = 1;
    assert_eq!(id(&[prio, route(2)]), Some(2));
    // Undefined hops count as one.
    let mut two = route(1);
    two.hops = Some(2);
    let mut one = route(2);
    one.hops = Some(1);
    one.seq = 9;
    assert_eq!(id(&[two, one.clone()]), Some(2));
    assert_eq!(id(&[one, route(3)]), Some(3));
    let mut sick = route(1);
    sick.gateway_health = HealthValue::clamped(100);
    assert_eq!(id(&[sick, route(2)]), Some(2));
    let mut rr = route(1);
    rr.seq = 3;
    let mut rr2 = route(2);
    rr2.seq = 2;
    let routes = [rr, rr2];
    assert_eq!(id(&routes), Some(2));
    assert_eq!(next_route_seq(&routes), 4);
    assert_eq!(next_route_seq::<u32>(&[]), 1);
}

#[test]
fn sequences_advance_by_one() {
    assert_eq!(
        advance_sequences(7, 41),
        SendSequences {
            peer_seq: 8,
            net_seq: 42
        }
    );
    assert_eq!(advance_sequences(u64::MAX, 0).peer_seq, 0);
}

#[test]
fn round_robin_spreads_sends_across_equal_nis() {
    let mut nis = vec![ni(1), ni(2), ni(3)];
    let mut global = 0;
    let mut used = Vec::new();
    for _ in 0..6 {
        let id = best(&nis, P).unwrap();
        used.push(id);
        global = advance_sequences(0, global).net_seq;
        if let Some(n) = nis.iter_mut().find(|n| n.id == id) {
            n.seq = global;
        }
    }
    assert_eq!(used, [1, 2, 3, 1, 2, 3]);
}

fn arb_ni() -> impl Strategy<Value = LocalNiCandidate<u32>> {
    (
        any::<bool>(),
        0u32..=1000,
        0u32..3,
        0u32..3,
        0u32..30,
        -5i32..5,
        0u64..4,
    )
        .prop_map(|(fatal, h, sp, dp, d, c, s)| LocalNiCandidate {
            id: 0,
            net: TCP,
            fatal,
            health: HealthValue::clamped(h / 100 * 100),
            sel_priority: sp,
            dev_priority: dp,
            numa_distance: d,
            tx_credits: c,
            seq: s,
        })
}

proptest! {
    #[test]
    fn best_local_ni_is_never_beaten(
        mut cands in proptest::collection::vec(arb_ni(), 1..8),
        range in 0u32..30,
        gpu in any::<bool>(),
    ) {
        for (i, c) in cands.iter_mut().enumerate() {
            c.id = i as u32;
        }
        let params = LocalNiParams { numa_range: range, gpu_memory: gpu };
        let best = best_local_ni(&cands, params).unwrap();
        for c in &cands {
            prop_assert_ne!(compare_local_ni(c, best, params), Ordering::Less);
            // Among equals the earliest is kept.
            if compare_local_ni(c, best, params) == Ordering::Equal {
                prop_assert!(best.id <= c.id);
            }
        }
        if cands.iter().any(|c| !c.fatal) {
            prop_assert!(!best.fatal);
        }
        let top = cands.iter().filter(|c| c.fatal == best.fatal).map(|c| c.health).max();
        prop_assert_eq!(Some(best.health), top);
    }

    #[test]
    fn best_route_is_alive_and_never_beaten(
        routes in proptest::collection::vec(
            (any::<bool>(), any::<bool>(), 0u32..3, proptest::option::of(1u32..3), 0u32..=1000, 0u64..3, -2i32..2, 0u64..3),
            0..8,
        )
    ) {
        let cands: Vec<RouteCandidate<usize>> = routes
            .into_iter()
            .enumerate()
            .map(|(id, (alive, preferred, priority, hops, h, q, c, seq))| RouteCandidate {
                id,
                alive,
                preferred,
                priority,
                hops,
                gateway_health: HealthValue::clamped(h),
                gateway_tx_queued_bytes: q,
                gateway_tx_credits: c,
                seq,
            })
            .collect();
        match best_route(&cands) {
            None => prop_assert!(cands.iter().all(|r| !r.alive)),
            Some(best) => {
                prop_assert!(best.alive);
                for r in cands.iter().filter(|r| r.alive) {
                    prop_assert_ne!(compare_route(r, best), Ordering::Less);
                }
            }
        }
    }
}
