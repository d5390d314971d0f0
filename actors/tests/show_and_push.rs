//! A node's live state through the `lnetctl ... show` documents, and discovery pushes on a
//! local NI change, over the in-process fabric with a paused clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{fail_sends, nid, node, pair, put, put_acked, Fab, BITS, BOUND, PORTAL};

use std::time::Duration;

use actors::{MdSpec, Node};
use bytes::Bytes;
use lnd::fabric::{Fabric, FabricConfig};
use lnet::config::NiStatus;
use lnet::health::{HealthStatus, HealthValue};
use lnet::recovery::RecoveryKind;
use lnet::show::{NetShow, PeerShow, StatsShow, Verbosity};
use lnet::tunables::{TunableName, Tunables};
use lnet::{Features, Net, Nid};
use tokio::time::timeout;

const V3: Verbosity = Verbosity(3);

#[actix::test]
async fn show_documents_carry_the_live_counters_and_health() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let _rx = b
            .attach(MdSpec {
                portal: PORTAL,
                match_bits: BITS,
                data: Bytes::new(),
                depth: 16,
            })
            .await
            .unwrap();
        a.add_peer(bn[0], bn.clone(), false).await.unwrap();
        for _ in 0..3 {
            let got = a.put(put(bn[0], true, 30)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        // A forced failure: the one NI cannot resend to itself, the PUT fails.
        let rule = a
            .add_fault_rule(fail_sends(HealthStatus::LocalTimeout).at(an[0]))
            .unwrap();
        let got = a.put(put(bn[0], true, 30)).await.unwrap().finish().await;
        assert!(!got.last().unwrap().status.is_ok(), "{got:?}");
        assert!(a.remove_fault_rule(rule));

        // A's nets: lo first, as lnetctl shows it, then tcp.
        let text = a.net_show().await.unwrap().to_yaml(V3);
        let net = NetShow::parse(&text).unwrap();
        assert_eq!(net.nets.len(), 2, "{text}");
        assert_eq!(net.nets[0].net_type, Net::LO);
        let lo = &net.nets[0].nis[0];
        assert_eq!(lo.nid, Nid::LO_0);
        assert_eq!(lo.status, NiStatus::Up);
        assert_eq!(lo.health_stats.health_value, 0);
        assert_eq!(lo.statistics.send_count, 0);
        assert_eq!(lo.tunables.credits, 0);
        assert_eq!(lo.lnd_tunables, None);
        let ni = &net.nets[1].nis[0];
        assert_eq!(ni.nid, an[0]);
        assert_eq!(ni.status, NiStatus::Up);
        assert_eq!(ni.statistics.send_count, 4, "{text}");
        assert_eq!(ni.statistics.recv_count, 3, "{text}");
        assert_eq!(ni.statistics.drop_count, 1, "{text}");
        // By message type: four PUTs sent (one failed), three ACKs received.
        assert_eq!((ni.sent_stats.put, ni.sent_stats.ack), (4, 0), "{text}");
        assert_eq!(
            (ni.received_stats.ack, ni.received_stats.put),
            (3, 0),
            "{text}"
        );
        assert_eq!(ni.dropped_stats.put, 1, "{text}");
        assert_eq!(ni.health_stats.health_value, 900, "{text}");
        assert_eq!(ni.health_stats.timeouts, 1, "{text}");
        assert_eq!(ni.health_stats.error, 0);
        assert_eq!(ni.tunables.credits, 8);
        assert_eq!(ni.tunables.peer_credits, 8);

        // A's view of B: one peer NI, charged with the failure but not with health.
        let text = a.peer_show().await.unwrap().to_yaml(V3);
        let peers = PeerShow::parse(&text).unwrap();
        assert_eq!(peers.peers.len(), 1, "{text}");
        assert_eq!(peers.peers[0].primary_nid, bn[0]);
        assert!(!peers.peers[0].multi_rail);
        // Configured (LNET_PEER_CONFIGURED), not Multi-Rail.
        assert_eq!(peers.peers[0].peer_state, 1 << 3, "{text}");
        let pni = &peers.peers[0].nis[0];
        assert_eq!(pni.nid, bn[0]);
        assert_eq!(pni.statistics.send_count, 4, "{text}");
        assert_eq!(pni.statistics.recv_count, 3, "{text}");
        assert_eq!(pni.statistics.drop_count, 1, "{text}");
        assert_eq!(pni.health_stats.health_value, 1000, "{text}");
        assert_eq!(pni.credits.max_ni_tx_credits, 8);

        // B received the three PUTs and ACKed them.
        let text = b.net_show().await.unwrap().to_yaml(V3);
        let bnet = NetShow::parse(&text).unwrap();
        let bni = &bnet.nets[1].nis[0];
        assert_eq!(bni.nid, bn[0]);
        assert_eq!(
            (
                bni.statistics.send_count,
                bni.statistics.recv_count,
                bni.statistics.drop_count
            ),
            (3, 3, 0),
            "{text}"
        );
        assert_eq!(
            (bni.received_stats.put, bni.sent_stats.ack),
            (3, 3),
            "{text}"
        );
        assert_eq!(bni.health_stats.health_value, 1000);

        // The global counters.
        let text = a.stats_show().await.unwrap().to_yaml();
        let stats = StatsShow::parse(&text).unwrap();
        assert_eq!(stats.send_count, 4, "{text}");
        assert_eq!(stats.recv_count, 3, "{text}");
        assert_eq!(stats.drop_count, 1, "{text}");
        assert_eq!(stats.local_timeout_count, 1, "{text}");
        assert_eq!(stats.remote_timeout_count, 0, "{text}");
        assert_eq!(stats.resend_count, 0, "{text}");
        // Payload bytes: four 7-byte PUTs handed to the LND (the failed one included), no
        // payload received for A itself (ACKs carry none); nothing left in flight.
        assert_eq!(stats.send_length, 4 * 7, "{text}");
        assert_eq!(stats.recv_length, 0, "{text}");
        assert_eq!((stats.msgs_alloc, stats.rst_alloc), (0, 0), "{text}");
        // The PUTs went one after the other: one message (with its ACK wait) at a time.
        assert_eq!(stats.msgs_max, 1, "{text}");
        let bstats = b.stats_show().await.unwrap();
        assert_eq!(bstats.recv_length, 3 * 7);
        assert_eq!(bstats.send_length, 0, "ACKs carry no payload");

        // The failed NI is on the local recovery queue.
        let rec = a.recovery_show(RecoveryKind::LocalNi).await.unwrap();
        assert_eq!(rec.nids, vec![an[0]]);
        assert!(rec.to_yaml().contains(&an[0].to_string()));
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn net_show_prints_an_ni_down_while_it_is_advertised_down_for_its_link() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp", "10.0.2.1@tcp2"]).await;
        let status = |show: &NetShow, nid: Nid| {
            let ni = show
                .nets
                .iter()
                .flat_map(|n| n.nis.iter())
                .find(|n| n.nid == nid)
                .unwrap()
                .clone();
            (ni.status, ni.health_stats.fatal_error)
        };
        let show = a.net_show().await.unwrap();
        assert_eq!(status(&show, an[1]), (NiStatus::Up, 0));
        a.set_ni_link(an[1], false).await.unwrap();
        let show = a.net_show().await.unwrap();
        let text = show.to_yaml(V3);
        // As the ping info says it: down, with the link's fatal error; the other NI up.
        let info = a.ping_info().await.unwrap();
        assert!(info.statuses().any(|(n, s)| n == an[1] && !s.is_up()));
        assert_eq!(status(&show, an[1]), (NiStatus::Down, 1), "{text}");
        assert_eq!(status(&show, an[0]), (NiStatus::Up, 0), "{text}");
        assert!(text.contains("status: down"), "{text}");
        a.set_ni_link(an[1], true).await.unwrap();
        let show = a.net_show().await.unwrap();
        assert_eq!(status(&show, an[1]), (NiStatus::Up, 0));
    })
    .await
    .expect("bounded");
}

/// B's view of A's NIDs, with their status.
async fn view_of(b: &Node, a_primary: Nid) -> Vec<(Nid, bool)> {
    b.peers()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.primary == a_primary)
        .map(|p| p.nids)
        .unwrap_or_default()
}

/// Polls B's view of A until `pred` holds (in virtual time, bounded by the test's bound).
async fn wait_view(b: &Node, a_primary: Nid, pred: impl Fn(&[(Nid, bool)]) -> bool) {
    loop {
        let v = view_of(b, a_primary).await;
        if pred(&v) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `peer state` of `primary` in `node`'s `peer show`.
async fn peer_state(node: &Node, primary: Nid) -> Option<u32> {
    let shown = node.peer_show().await.unwrap();
    shown
        .peers
        .iter()
        .find(|p| p.primary_nid == primary)
        .map(|p| p.peer_state)
}

/// Waits until `node` shows `primary` with `peer state` `want`.
async fn wait_peer_state(node: &Node, primary: Nid, want: u32) {
    loop {
        if peer_state(node, primary).await == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The kernel's `lp_state` bits `peer show` prints.
const MULTI_RAIL: u32 = 1;
const NO_DISCOVERY: u32 = 1 << 1;
const ROUTER_ENABLED: u32 = 1 << 2;
const DISCOVERED: u32 = 1 << 4;
const NIDS_UPTODATE: u32 = 1 << 8;

#[actix::test]
async fn peer_state_says_what_discovery_learned_of_the_peer() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an, b, bn, _rx) = pair(&fabric, "10.0.1.1@tcp").await;
        // Known from traffic only: no bit, as the kernel's peers created by traffic.
        put_acked(&a, bn[0]).await;
        assert_eq!(peer_state(&a, bn[0]).await, Some(0));
        assert_eq!(peer_state(&b, an[0]).await, Some(0));

        // Discovered (a ping, then a push): 273, as a kernel shows a discovered
        // Multi-Rail peer that does not route.
        a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        let discovered = MULTI_RAIL | DISCOVERED | NIDS_UPTODATE;
        assert_eq!(discovered, 273);
        assert_eq!(peer_state(&a, bn[0]).await, Some(discovered));
        // B learned A from the push.
        wait_peer_state(&b, an[0], discovered).await;

        // B turns discovery off: its ping info loses the discovery feature, and B pushes
        // it to A.
        let mut t = Tunables::default();
        t.set(TunableName::Discovery, 0).unwrap();
        b.set_tunables(t.clone()).await.unwrap();
        assert!(!b
            .ping_info()
            .await
            .unwrap()
            .features
            .contains(Features::DISCOVERY));
        wait_peer_state(&a, bn[0], discovered | NO_DISCOVERY).await;

        // B routes: its ping info no longer says routing disabled, pushed to A (which
        // takes discovery).
        t.set(TunableName::Routing, 1).unwrap();
        b.set_routing(t).await.unwrap();
        wait_peer_state(&a, bn[0], discovered | NO_DISCOVERY | ROUTER_ENABLED).await;
        // A's own discovery of B finds the same.
        a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            peer_state(&a, bn[0]).await,
            Some(discovered | NO_DISCOVERY | ROUTER_ENABLED)
        );
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn a_local_ni_change_is_pushed_to_discovered_peers() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp", "10.0.0.2@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let found = a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        assert!(found.multi_rail && found.pushed);
        // B learned A from the discovery push: both NIs up.
        wait_view(&b, an[0], |v| v == [(an[0], true), (an[1], true)]).await;
        let seqno = a.ping_info().await.unwrap().seqno;

        // A's second NI goes DOWN (and stays so: its sends fail, recovery cannot help).
        a.add_fault_rule(fail_sends(HealthStatus::LocalError).at(an[1]))
            .unwrap();
        a.set_local_ni_health(an[1], HealthValue::ZERO)
            .await
            .unwrap();
        wait_view(&b, an[0], |v| v == [(an[0], true), (an[1], false)]).await;
        // A status flip patches the ping info in place.
        let info = a.ping_info().await.unwrap();
        assert_eq!(info.seqno, seqno);
        assert!(!info.status_of(&an[1]).unwrap().is_up());
        let net = a.net_show().await.unwrap();
        assert_eq!(net.nets[1].nis[1].status, NiStatus::Down);

        // An NI added bumps the sequence number and is pushed too.
        let added = a
            .add_ni::<Fab>(FabricConfig::new(&fabric, nid("10.0.0.3@tcp")), 8)
            .await
            .unwrap();
        assert_eq!(a.ping_info().await.unwrap().seqno, seqno.wrapping_add(1));
        wait_view(&b, an[0], |v| {
            v == [(an[0], true), (an[1], false), (added, true)]
        })
        .await;
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn a_removed_ni_leaves_selection_ping_info_recovery_and_its_lnd() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp", "10.0.0.2@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let mut rx = b
            .attach(MdSpec {
                portal: PORTAL,
                match_bits: BITS,
                data: Bytes::new(),
                depth: 64,
            })
            .await
            .unwrap();
        a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        wait_view(&b, an[0], |v| v == [(an[0], true), (an[1], true)]).await;

        // A's second NI fails and goes on the local recovery queue.
        a.add_fault_rule(fail_sends(HealthStatus::LocalError).at(an[1]))
            .unwrap();
        a.set_local_ni_health(an[1], HealthValue::ZERO)
            .await
            .unwrap();
        let queued = a.recovery(RecoveryKind::LocalNi).await.unwrap();
        assert!(queued.iter().any(|e| e.key == an[1]), "{queued:?}");
        let seqno = a.ping_info().await.unwrap().seqno;

        assert!(a.remove_ni(an[1]).await.unwrap(), "its LND stopped cleanly");
        let info = a.ping_info().await.unwrap();
        assert_eq!(info.seqno, seqno.wrapping_add(1));
        assert!(info.status_of(&an[1]).is_none());
        // The push tells B: A has one NID left.
        wait_view(&b, an[0], |v| v == [(an[0], true)]).await;
        assert!(a.recovery(RecoveryKind::LocalNi).await.unwrap().is_empty());
        let net = a.net_show().await.unwrap();
        let tcp: Vec<Nid> = net.nets[1].nis.iter().map(|n| n.nid).collect();
        assert_eq!(tcp, vec![an[0]]);
        // Traffic goes on over the NI that is left.
        for _ in 0..10 {
            put_acked(&a, bn[0]).await;
            assert_eq!(rx.recv().await.unwrap().ni, bn[0]);
        }
        assert_eq!(a.local_nis().await.unwrap().len(), 1);
        assert!(matches!(
            a.remove_ni(an[1]).await,
            Err(actors::NodeError::NoSuchNi { .. })
        ));
        // The fabric let go of the NID: the LND really stopped.
        a.add_ni::<Fab>(FabricConfig::new(&fabric, an[1]), 8)
            .await
            .unwrap();
        wait_view(&b, an[0], |v| v.len() == 2).await;
    })
    .await
    .expect("bounded");
}

/// The latency keys of `statistics:`: A's own PUTs (their egress, and with an ACK the
/// round trip) and GETs (the round trip to the REPLY) through a link that takes 3 ms each
/// way, on A's local NI and on its peer NI B alike, in nanoseconds of the paused clock; a
/// latency below the clock's resolution (the first PUT's, with no link latency) is no
/// sample; B, which only answered, counts nothing.
#[actix::test]
async fn latency_keys_time_the_nodes_own_puts_and_gets() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an, b, bn, _rx) = pair(&fabric, "10.0.1.1@tcp").await;
        // Discovery and the first contact first, without the latency.
        put_acked(&a, bn[0]).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let latency = |node: Node, ni: Nid, peer: Nid| async move {
            let local = node
                .local_nis()
                .await
                .unwrap()
                .into_iter()
                .find(|v| v.nid == ni)
                .unwrap()
                .stats
                .latency;
            let peer = node
                .peers()
                .await
                .unwrap()
                .into_iter()
                .flat_map(|p| p.nis)
                .find(|v| v.nid == peer)
                .unwrap()
                .stats
                .latency;
            (local, peer)
        };
        let (before, before_peer) = latency(a.clone(), an[0], bn[0]).await;
        let (b_before, _) = latency(b.clone(), bn[0], an[0]).await;
        assert_eq!(
            before,
            actors::ni::OpLatencies::default(),
            "no time passed: no sample"
        );
        fabric.set_link_latency(an[0], bn[0], Some(Duration::from_millis(3)));
        put_acked(&a, bn[0]).await;
        let got = a.put(put(bn[0], false, 5)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        let got = a
            .get(actors::GetRequest {
                dest: bn[0],
                portal: PORTAL,
                match_bits: BITS,
                sink_length: 64,
                timeout: Duration::from_secs(5),
            })
            .await
            .unwrap()
            .finish()
            .await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        // Let the samples reach the NI actors.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (after, after_peer) = latency(a.clone(), an[0], bn[0]).await;
        let (b_after, _) = latency(b.clone(), bn[0], an[0]).await;
        let added = |x: &actors::ni::Latency, y: &actors::ni::Latency| {
            (y.samples - x.samples, y.sum_ns - x.sum_ns)
        };
        // One hop takes the link's 3 ms (and up to 1 ms of the timer's rounding).
        let hop = after.put_egress.min_ns;
        assert!((3_000_000..=4_000_000).contains(&hop), "{after:?}");
        for (what, b4, now) in [
            ("A's NI", before, after),
            ("A's peer NI B", before_peer, after_peer),
        ] {
            assert_eq!(
                added(&b4.put_egress, &now.put_egress),
                (2, 2 * hop),
                "{what}: two PUTs, one hop each to their send's completion"
            );
            assert_eq!(
                added(&b4.put_ack, &now.put_ack),
                (1, 2 * hop),
                "{what}: one PUT, a hop out and a hop back"
            );
            assert_eq!(
                added(&b4.get_rtt, &now.get_rtt),
                (1, 2 * hop),
                "{what}: one GET"
            );
            assert_eq!(now.put_ack.max_ns, 2 * hop);
        }
        assert_eq!(b_before, b_after, "B only answered: nothing of its own");
        // As `net show` prints them.
        let show = a.net_show().await.unwrap();
        let stats = show
            .nets
            .iter()
            .flat_map(|n| &n.nis)
            .find(|ni| ni.nid == an[0])
            .unwrap()
            .statistics
            .latency
            .clone()
            .unwrap();
        assert_eq!(stats.put_ack_max_nsec, 2 * hop);
        assert_eq!(
            u64::from(stats.put_egress_samples),
            after.put_egress.samples
        );
    })
    .await
    .unwrap();
}

/// A's view of the peer that has `nid`: whether it is Multi-Rail, and its NIDs.
async fn peer_of(node: &Node, nid: Nid) -> Option<(bool, Vec<Nid>)> {
    node.peers()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.nids.iter().any(|(n, _)| *n == nid))
        .map(|p| (p.multi_rail, p.nids.into_iter().map(|(n, _)| n).collect()))
}

/// Discovery makes a peer Multi-Rail, and takes its NIDs, only as the kernel's does
/// (`lnet_discovery_event_reply`, `lnet_peer_merge_data`): when its ping info says
/// Multi-Rail, discovery is on at both ends, and it was not configured non-Multi-Rail.
/// Otherwise the peer keeps the NIDs it had.
#[actix::test]
async fn discovery_makes_a_peer_multi_rail_only_with_discovery_at_both_ends() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _) = node(&fabric, &["10.0.0.1@tcp"]).await;
        let (_b, bn) = node(&fabric, &["10.0.1.1@tcp", "10.0.1.2@tcp"]).await;
        let (c, cn) = node(&fabric, &["10.0.2.1@tcp", "10.0.2.2@tcp"]).await;
        let (_d, dn) = node(&fabric, &["10.0.3.1@tcp", "10.0.3.2@tcp"]).await;
        let (_e, en) = node(&fabric, &["10.0.4.1@tcp", "10.0.4.2@tcp"]).await;
        let off = || {
            let mut t = Tunables::default();
            t.set(TunableName::Discovery, 0).unwrap();
            t
        };

        // Discovery on at both ends: Multi-Rail, with every NID of its ping info.
        a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(peer_of(&a, bn[0]).await, Some((true, bn.clone())));

        // C has discovery off: its ping info says Multi-Rail without the discovery
        // feature. A keeps C non-Multi-Rail, with the one NID it discovered.
        c.set_tunables(off()).await.unwrap();
        let found = a.discover(cn[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(peer_of(&a, cn[0]).await, Some((false, vec![cn[0]])));
        // `discover` shows the peer as A holds it now, as lnetctl shows the kernel's,
        // and pushes nothing to it.
        assert_eq!(
            (found.primary, found.multi_rail, found.nids, found.pushed),
            (cn[0], false, vec![(cn[0], true)], false)
        );

        // D was configured non-Multi-Rail at A: it stays so, with its configured NID.
        a.add_peer(dn[0], vec![dn[0]], false).await.unwrap();
        a.discover(dn[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(peer_of(&a, dn[0]).await, Some((false, vec![dn[0]])));

        // A turns discovery off: a peer it discovers now stays non-Multi-Rail...
        a.set_tunables(off()).await.unwrap();
        a.discover(en[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(peer_of(&a, en[0]).await, Some((false, vec![en[0]])));
        // ... and one it knew as Multi-Rail stays so, with the NIDs it had.
        a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(peer_of(&a, bn[0]).await, Some((true, bn.clone())));
    })
    .await
    .expect("bounded");
}
