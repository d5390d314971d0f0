use super::*;

use std::collections::HashMap;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn ni(s: &str) -> ForwardNi {
    ForwardNi {
        nid: nid(s),
        link_down: false,
        numa_distance: 0,
    }
}

fn route(net: &str, gw: &str, up: bool, priority: u32) -> ForwardRoute {
    ForwardRoute {
        net: net.parse().unwrap(),
        gateway: nid(gw),
        up,
        priority,
        hops: None,
    }
}

/// A router with NIs on tcp and tcp1, routes to tcp2 through two gateways on tcp1.
fn table() -> ForwardTable {
    ForwardTable {
        nis: vec![ni("10.0.0.1@tcp"), ni("10.1.0.1@tcp1"), ni("10.1.0.2@tcp1")],
        routes: vec![
            route("tcp2", "10.1.0.8@tcp1", true, 0),
            route("tcp2", "10.1.0.9@tcp1", true, 0),
        ],
        udsp: UdspPolicy::default(),
        numa_range: 0,
    }
}

/// A PUT for `dest` from a node on tcp3 that arrived on a local NI on `arrived_on`.
fn msg(dest: Nid, arrived_on: Net) -> ForwardMsg {
    ForwardMsg {
        src: nid("10.3.0.1@tcp3"),
        dest,
        arrived_on,
        msg_type: MsgType::Put,
    }
}

/// No Multi-Rail peer.
fn no_mr(_: &Nid) -> Option<Arc<MrPeer>> {
    None
}

fn all_well(_: &Nid) -> Live {
    Live::UNKNOWN
}

#[test]
fn a_destination_on_a_local_net_is_reached_direct_from_an_ni_on_that_net() {
    let t = table();
    let dest = nid("10.0.0.7@tcp");
    let hop = t
        .next_hop(
            &msg(dest, nid("10.1.0.5@tcp1").net),
            no_mr,
            all_well,
            all_well,
        )
        .unwrap();
    assert_eq!(hop.ni, nid("10.0.0.1@tcp"));
    assert_eq!(hop.peer, dest);
    assert!(!hop.via_gateway());
}

#[test]
fn a_message_that_arrived_on_its_destinations_net_is_refused() {
    let t = table();
    let dest = nid("10.0.0.7@tcp");
    assert_eq!(
        t.next_hop(&msg(dest, dest.net), no_mr, all_well, all_well),
        Err(NoHop::OwnNet { dest })
    );
}

#[test]
fn the_local_ni_with_the_best_health_then_most_credits_is_picked() {
    let t = table();
    let dest = nid("10.1.0.7@tcp1");
    let sick = nid("10.1.0.1@tcp1");
    let local = |n: &Nid| Live {
        health: if *n == sick {
            HealthValue::clamped(900)
        } else {
            HealthValue::MAX
        },
        ..Live::UNKNOWN
    };
    let hop = t
        .next_hop(&msg(dest, nid("10.0.0.2@tcp").net), no_mr, local, all_well)
        .unwrap();
    assert_eq!(hop.ni, nid("10.1.0.2@tcp1"));
    let credits = |n: &Nid| Live {
        tx_credits: if *n == sick { 5 } else { 1 },
        ..Live::UNKNOWN
    };
    let hop = t
        .next_hop(
            &msg(dest, nid("10.0.0.2@tcp").net),
            no_mr,
            credits,
            all_well,
        )
        .unwrap();
    assert_eq!(hop.ni, sick);
}

#[test]
fn a_remote_net_goes_through_a_live_gateway_round_robin_among_equals() {
    let t = table();
    let dest = nid("10.2.0.7@tcp2");
    let from = nid("10.0.0.2@tcp").net;
    let used = nid("10.1.0.8@tcp1");
    let seq = |n: &Nid| Live {
        seq: u64::from(*n == used),
        ..Live::UNKNOWN
    };
    let hop = t.next_hop(&msg(dest, from), no_mr, all_well, seq).unwrap();
    assert_eq!(hop.peer, nid("10.1.0.9@tcp1"));
    assert!(hop.via_gateway());
    assert_eq!(hop.ni.net, hop.peer.net);
}

#[test]
fn a_route_that_is_down_is_never_picked_and_none_up_is_no_live_route() {
    let mut t = table();
    let dest = nid("10.2.0.7@tcp2");
    let from = nid("10.0.0.2@tcp").net;
    t.routes[1].up = false;
    for _ in 0..4 {
        let hop = t
            .next_hop(&msg(dest, from), no_mr, all_well, all_well)
            .unwrap();
        assert_eq!(hop.peer, nid("10.1.0.8@tcp1"));
    }
    t.routes[0].up = false;
    assert_eq!(
        t.next_hop(&msg(dest, from), no_mr, all_well, all_well),
        Err(NoHop::NoLiveRoute { net: dest.net })
    );
}

#[test]
fn the_lower_priority_value_wins_over_gateway_health() {
    let mut t = table();
    t.routes[1].priority = 1;
    let dest = nid("10.2.0.7@tcp2");
    let first = nid("10.1.0.8@tcp1");
    let peer = |n: &Nid| Live {
        health: if *n == first {
            HealthValue::clamped(500)
        } else {
            HealthValue::MAX
        },
        ..Live::UNKNOWN
    };
    let hop = t
        .next_hop(&msg(dest, nid("10.0.0.2@tcp").net), no_mr, all_well, peer)
        .unwrap();
    assert_eq!(hop.peer, first);
}

#[test]
fn routes_whose_gateway_net_has_every_link_down_are_not_alive() {
    let mut t = table();
    for n in t
        .nis
        .iter_mut()
        .filter(|n| n.nid.net == nid("1.1.1.1@tcp1").net)
    {
        n.link_down = true;
    }
    let dest = nid("10.2.0.7@tcp2");
    assert_eq!(
        t.next_hop(
            &msg(dest, nid("10.0.0.2@tcp").net),
            no_mr,
            all_well,
            all_well
        ),
        Err(NoHop::NoLiveRoute { net: dest.net })
    );
}

#[test]
fn a_net_with_no_route_and_no_ni_is_no_route() {
    let t = table();
    let dest = nid("10.3.0.7@tcp3");
    assert_eq!(
        t.next_hop(
            &msg(dest, nid("10.0.0.2@tcp").net),
            no_mr,
            all_well,
            all_well
        ),
        Err(NoHop::NoRoute { net: dest.net })
    );
}

/// A table with the Multi-Rail peers the decision is given beside it.
struct WithMr {
    t: ForwardTable,
    peers: HashMap<Nid, Arc<MrPeer>>,
}

impl WithMr {
    fn next_hop(
        &self,
        msg: &ForwardMsg,
        local: impl Fn(&Nid) -> Live,
        peer: impl Fn(&Nid) -> Live,
    ) -> Result<NextHop, NoHop> {
        self.t
            .next_hop(msg, |n| self.peers.get(n).cloned(), local, peer)
    }
}

/// The table with a Multi-Rail originator 10.1.0.5@tcp1 and a Multi-Rail destination
/// with NIs 10.0.0.7@tcp and 10.0.0.8@tcp (the second given UP by its peer as `up8`);
/// `dest_mr: false` leaves the destination out (a non-Multi-Rail peer).
fn mr_table(dest_mr: bool, up8: bool) -> WithMr {
    let mut peers = HashMap::new();
    let src = Arc::new(MrPeer {
        nids: vec![(nid("10.1.0.5@tcp1"), true)],
    });
    peers.insert(nid("10.1.0.5@tcp1"), src);
    if dest_mr {
        let dest = Arc::new(MrPeer {
            nids: vec![(nid("10.0.0.7@tcp"), true), (nid("10.0.0.8@tcp"), up8)],
        });
        for n in ["10.0.0.7@tcp", "10.0.0.8@tcp"] {
            peers.insert(nid(n), Arc::clone(&dest));
        }
    }
    WithMr { t: table(), peers }
}

fn from_mr(dest: &str, msg_type: MsgType) -> ForwardMsg {
    ForwardMsg {
        src: nid("10.1.0.5@tcp1"),
        dest: nid(dest),
        arrived_on: nid("10.1.0.5@tcp1").net,
        msg_type,
    }
}

/// 10.0.0.7@tcp below full health.
fn seven_unhealthy(n: &Nid) -> Live {
    if *n == nid("10.0.0.7@tcp") {
        Live {
            health: HealthValue::clamped(500),
            ..Live::UNKNOWN
        }
    } else {
        Live::UNKNOWN
    }
}

#[test]
fn a_put_for_an_unhealthy_ni_of_a_multi_rail_peer_goes_to_its_healthy_ni() {
    for msg_type in [MsgType::Put, MsgType::Get] {
        let hop = mr_table(true, true)
            .next_hop(
                &from_mr("10.0.0.7@tcp", msg_type),
                all_well,
                seven_unhealthy,
            )
            .unwrap();
        assert_eq!(hop.peer, nid("10.0.0.8@tcp"), "{msg_type:?}");
        assert_eq!(
            hop.dest,
            nid("10.0.0.8@tcp"),
            "the header names the NI picked"
        );
        assert!(!hop.via_gateway());
    }
}

#[test]
fn an_ni_its_peer_gives_down_is_left_even_at_full_health() {
    let t = mr_table(true, true);
    let mut down = (*t.peers[&nid("10.0.0.7@tcp")]).clone();
    down.nids[0].1 = false;
    let down = Arc::new(down);
    let mut t = t;
    for n in ["10.0.0.7@tcp", "10.0.0.8@tcp"] {
        t.peers.insert(nid(n), Arc::clone(&down));
    }
    let hop = t
        .next_hop(&from_mr("10.0.0.7@tcp", MsgType::Put), all_well, all_well)
        .unwrap();
    assert_eq!(hop.peer, nid("10.0.0.8@tcp"));
}

#[test]
fn the_addressed_ni_is_kept_where_multi_rail_forwarding_is_not_allowed() {
    let dest = nid("10.0.0.7@tcp");
    // A healthy addressed NI.
    let hop = mr_table(true, true)
        .next_hop(&from_mr("10.0.0.7@tcp", MsgType::Put), all_well, all_well)
        .unwrap();
    assert_eq!((hop.peer, hop.dest), (dest, dest));
    // A destination that is not a Multi-Rail peer.
    let hop = mr_table(false, true)
        .next_hop(
            &from_mr("10.0.0.7@tcp", MsgType::Put),
            all_well,
            seven_unhealthy,
        )
        .unwrap();
    assert_eq!((hop.peer, hop.dest), (dest, dest));
    // An originator that is not a Multi-Rail peer.
    let hop = mr_table(true, true)
        .next_hop(
            &msg(dest, nid("10.1.0.5@tcp1").net),
            all_well,
            seven_unhealthy,
        )
        .unwrap();
    assert_eq!((hop.peer, hop.dest), (dest, dest));
    // Responses go where they are addressed.
    for msg_type in [MsgType::Ack, MsgType::Reply] {
        let hop = mr_table(true, true)
            .next_hop(
                &from_mr("10.0.0.7@tcp", msg_type),
                all_well,
                seven_unhealthy,
            )
            .unwrap();
        assert_eq!((hop.peer, hop.dest), (dest, dest), "{msg_type:?}");
    }
    // No other NI its peer gives UP: the addressed one, unhealthy as it is.
    let hop = mr_table(true, false)
        .next_hop(
            &from_mr("10.0.0.7@tcp", MsgType::Put),
            all_well,
            seven_unhealthy,
        )
        .unwrap();
    assert_eq!((hop.peer, hop.dest), (dest, dest));
}

#[test]
fn a_routed_message_keeps_its_destination_in_the_header() {
    let t = mr_table(true, true);
    let dest = nid("10.2.0.7@tcp2");
    let hop = t
        .next_hop(&msg(dest, nid("10.0.0.2@tcp").net), all_well, all_well)
        .unwrap();
    assert_eq!(hop.dest, dest);
    assert!(hop.via_gateway());
}

#[test]
fn one_peer_ni_and_one_local_ni_on_its_net_need_no_comparison() {
    let lives = [
        Live::UNKNOWN,
        Live {
            health: HealthValue::ZERO,
            tx_credits: -5,
            seq: 3,
        },
    ];
    for link_down in [false, true] {
        let mut t = table();
        t.nis[0].link_down = link_down;
        let to = nid("10.0.0.9@tcp");
        for l in lives {
            for p in lives {
                let (local, peer) = (|_: &Nid| l, |_: &Nid| p);
                let quick = t.direct(&[to], &local, &peer);
                assert_eq!(
                    quick,
                    t.select(&[to], &local, &peer),
                    "{link_down} {l:?} {p:?}"
                );
                assert_eq!(
                    quick,
                    Some(NextHop {
                        ni: nid("10.0.0.1@tcp"),
                        peer: to,
                        dest: to,
                    })
                );
            }
        }
    }
    // Two local NIs on the net: compared as before (the healthier one).
    let t = table();
    let to = nid("10.1.0.9@tcp1");
    let sick = |n: &Nid| {
        if *n == nid("10.1.0.1@tcp1") {
            Live {
                health: HealthValue::ZERO,
                ..Live::UNKNOWN
            }
        } else {
            Live::UNKNOWN
        }
    };
    let hop = t.direct(&[to], &sick, &all_well).unwrap();
    assert_eq!(hop.ni, nid("10.1.0.2@tcp1"));
}
