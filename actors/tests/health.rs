//! The actors over the in-process fabric with a paused clock: health, recovery, resend,
//! timeouts, duplicate suppression, ping and discovery. Requirement IDs are those of the
//! LNet Health requirements (seed 000).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{
    delay_sends, drop_sends, fail_sends, md, nid, node, pair, put, Fab, BITS, BOUND, PORTAL,
};

use std::time::Duration;

use actors::events::{Event, NiKind};
use actors::{FailReason, MsgEventKind, Node, NodeConfig, Outcome};
use lnd::fabric::{Fabric, FabricConfig};
use lnet::fault::{FaultHealthError, FaultMsgType, FaultRule, FaultTrigger, NidMatch};
use lnet::health::check::{NiState, NoResend};
use lnet::health::{HealthStatus, HealthValue};
use lnet::recovery::RecoveryKind;
use lnet::{Features, MsgType, Nid};
use tokio::sync::broadcast;
use tokio::time::{timeout, Instant};

/// Two Multi-Rail nodes with two tcp NIs each; A knows B as a Multi-Rail peer.
async fn two_by_two(fabric: &Fabric) -> (Node, Vec<Nid>, Node, Vec<Nid>) {
    let (a, an) = node(fabric, &["10.0.0.1@tcp", "10.0.0.2@tcp"]).await;
    let (b, bn) = node(fabric, &["10.0.1.1@tcp", "10.0.1.2@tcp"]).await;
    a.add_peer(bn[0], bn.clone(), true).await.unwrap();
    (a, an, b, bn)
}

/// The transaction ended at its timeout (tokio timers round up to the next millisecond).
fn assert_within(start: Instant, secs: u64) {
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(secs), "{took:?}");
    assert!(
        took <= Duration::from_secs(secs) + Duration::from_millis(10),
        "{took:?}"
    );
}

async fn next_event(
    rx: &mut broadcast::Receiver<Event>,
    mut pred: impl FnMut(&Event) -> bool,
) -> Event {
    loop {
        let e = rx.recv().await.unwrap();
        if pred(&e) {
            return e;
        }
    }
}

#[actix::test]
async fn lnt_020_lnt_035_ten_failures_take_an_ni_to_0_then_recovery_brings_it_back() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an, _b, bn, _rx) = pair(&fabric, "10.0.1.1@tcp").await;
        a.add_peer(bn[0], bn.clone(), false).await.unwrap();
        let mut events = a.events().subscribe();
        let rule = a
            .add_fault_rule(fail_sends(HealthStatus::LocalTimeout).at(an[0]))
            .unwrap();
        for _ in 0..10 {
            let got = a.put(put(bn[0], false, 30)).await.unwrap().finish().await;
            assert_eq!(got.len(), 1);
            // One NI only: the ping buffer has two entries, so no local resend (lnt-055).
            assert_eq!(
                got[0].status,
                Outcome::Failed {
                    status: HealthStatus::LocalTimeout,
                    reason: FailReason::NoResend(NoResend::LocalResendOff)
                }
            );
        }
        let mut seen = Vec::new();
        while seen.len() < 10 {
            if let Event::Health {
                kind: NiKind::Local,
                nid,
                after,
                ..
            } = next_event(&mut events, |e| matches!(e, Event::Health { .. })).await
            {
                assert_eq!(nid, an[0]);
                seen.push(after.get());
            }
        }
        assert_eq!(seen, [900, 800, 700, 600, 500, 400, 300, 200, 100, 0]);
        next_event(&mut events, |e| {
            matches!(
                e,
                Event::LocalNiStatus {
                    state: NiState::Down,
                    ..
                }
            )
        })
        .await;
        let info = a.ping_info().await.unwrap();
        assert!(!info.status_of(&an[0]).unwrap().is_up());

        // Recovery pings while the NI still fails: 1, 2, 4, 8 s apart.
        let mut times = Vec::new();
        while times.len() < 5 {
            if let Event::RecoveryPing { at, queue, nid, .. } =
                next_event(&mut events, |e| matches!(e, Event::RecoveryPing { .. })).await
            {
                assert_eq!((queue, nid), (RecoveryKind::LocalNi, an[0]));
                times.push(at.as_millis());
            }
        }
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [1000, 2000, 4000, 8000]);
        let listing = a.recovery(RecoveryKind::LocalNi).await.unwrap();
        assert_eq!(listing.len(), 1);
        assert_eq!(listing[0].key, an[0]);
        assert_eq!(
            a.recovery_listing(RecoveryKind::LocalNi).await.unwrap(),
            ("Local NI recovery", vec![("nid-0".to_string(), an[0])])
        );

        // The fault clears: successful recovery pings raise the health back to 1000.
        assert!(a.remove_fault_rule(rule));
        next_event(
            &mut events,
            |e| matches!(e, Event::Health { after, .. } if after.is_max()),
        )
        .await;
        next_event(&mut events, |e| {
            matches!(
                e,
                Event::RecoveryLeft {
                    queue: RecoveryKind::LocalNi,
                    ..
                }
            )
        })
        .await;
        let nis = a.local_nis().await.unwrap();
        assert_eq!(nis[0].health, HealthValue::MAX);
        assert_eq!(nis[0].state, NiState::Up);
        assert!(nis[0].stats.health_stats[&HealthStatus::LocalTimeout] >= 10);
        assert!(a.recovery(RecoveryKind::LocalNi).await.unwrap().is_empty());
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_040_snd_055_each_resendable_class_is_resent_and_ends_with_the_ack() {
    tokio::time::pause();
    timeout(BOUND, async {
        for status in [
            HealthStatus::LocalInterrupt,
            HealthStatus::LocalDropped,
            HealthStatus::LocalAborted,
            HealthStatus::LocalNoRoute,
            HealthStatus::LocalTimeout,
            HealthStatus::RemoteDropped,
        ] {
            let fabric = Fabric::new();
            let (a, _an, b, bn) = two_by_two(&fabric).await;
            let mut delivered = b.attach(md()).await.unwrap();
            let mut events = a.events().subscribe();
            a.add_fault_rule(fail_sends(status).messages(&[FaultMsgType::Put]).limit(1))
                .unwrap();
            let got = a.put(put(bn[0], true, 60)).await.unwrap().finish().await;
            let kinds: Vec<_> = got.iter().map(|e| (e.kind, e.status)).collect();
            assert_eq!(
                kinds,
                [
                    (MsgEventKind::Send, Outcome::Ok),
                    (MsgEventKind::Ack, Outcome::Ok)
                ],
                "{status}"
            );
            assert_eq!(got[0].retries, 1, "{status}");
            let resend = next_event(&mut events, |e| matches!(e, Event::Resend { .. })).await;
            assert!(matches!(resend, Event::Resend { status: s, retry: 1, .. } if s == status));
            // The NI at fault lost health: local for local classes, the peer NI otherwise.
            let charged = next_event(
                &mut events,
                |e| matches!(e, Event::Health { cause: Some(c), .. } if *c == status),
            )
            .await;
            let want = if status.charge().local_ni {
                NiKind::Local
            } else {
                NiKind::Peer
            };
            assert!(matches!(charged, Event::Health { kind, .. } if kind == want));
            let m = delivered.recv().await.unwrap();
            assert_eq!(&m.payload[..], b"payload");
            assert!(delivered.try_recv().is_err());
            let counters = a.counters().await.unwrap();
            assert_eq!(counters.get("resend_count"), Some(&1));
            assert_eq!(counters.get("successful_resends"), Some(&1));
        }
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_055_no_resend_classes_end_with_a_failure_naming_the_class() {
    tokio::time::pause();
    timeout(BOUND, async {
        for status in [
            HealthStatus::LocalError,
            HealthStatus::RemoteError,
            HealthStatus::RemoteTimeout,
            HealthStatus::NetworkTimeout,
        ] {
            let fabric = Fabric::new();
            let (a, _an, b, bn) = two_by_two(&fabric).await;
            let mut delivered = b.attach(md()).await.unwrap();
            a.add_fault_rule(fail_sends(status).messages(&[FaultMsgType::Put]).limit(1))
                .unwrap();
            let got = a.put(put(bn[0], true, 60)).await.unwrap().finish().await;
            assert_eq!(got.len(), 1, "{status}");
            assert_eq!(got[0].kind, MsgEventKind::Send);
            assert_eq!(
                got[0].status,
                Outcome::Failed {
                    status,
                    reason: FailReason::NoResend(NoResend::StatusNotResendable)
                }
            );
            assert_eq!(got[0].retries, 0);
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(delivered.try_recv().is_err());
        }
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_060_lnt_075_resends_stop_after_retry_count() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _an, _b, bn) = two_by_two(&fabric).await;
        a.add_fault_rule(fail_sends(HealthStatus::LocalDropped))
            .unwrap();
        let got = a.put(put(bn[0], true, 60)).await.unwrap().finish().await;
        assert_eq!(
            got[0].status,
            Outcome::Failed {
                status: HealthStatus::LocalDropped,
                reason: FailReason::NoResend(NoResend::RetriesExhausted)
            }
        );
        assert_eq!(got[0].retries, 2);
        let counters = a.counters().await.unwrap();
        assert_eq!(counters.get("resend_count"), Some(&2));
        assert_eq!(counters.get("failed_resends"), Some(&1));
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_045_a_non_mr_peer_is_resent_to_from_the_same_local_ni() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp", "10.0.0.2@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let mut delivered = b.attach(md()).await.unwrap();
        a.add_peer(bn[0], bn.clone(), false).await.unwrap();
        let mut events = a.events().subscribe();
        a.add_fault_rule(fail_sends(HealthStatus::LocalTimeout).limit(1))
            .unwrap();
        let got = a.put(put(bn[0], true, 60)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()));
        let m = delivered.recv().await.unwrap();
        let Event::Resend {
            from_ni: failed, ..
        } = next_event(&mut events, |e| matches!(e, Event::Resend { .. })).await
        else {
            unreachable!()
        };
        assert!(an.contains(&failed));
        assert_eq!(a.fault_rules()[0].fired, 1);
        // The resend left from the NI that failed.
        assert_eq!(m.header.src_nid, failed);
        assert_eq!(fabric.stats(failed).delivered, 1);
        let other = an.iter().copied().find(|n| *n != failed).unwrap();
        assert_eq!(fabric.stats(other).delivered, 0);
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_070_lnt_095_nothing_outlives_its_transaction_timeout() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _an, b, bn) = two_by_two(&fabric).await;
        let _rx = b.attach(md()).await.unwrap();
        let mut events = a.events().subscribe();

        // The PUT is lost on the way: SEND is OK, the ACK never comes.
        let rule = a
            .add_fault_rule(drop_sends().messages(&[FaultMsgType::Put]))
            .unwrap();
        let start = Instant::now();
        let got = a.put(put(bn[0], true, 20)).await.unwrap().finish().await;
        assert_eq!(got[0].kind, MsgEventKind::Send);
        assert!(got[0].status.is_ok());
        assert_eq!(got[1].kind, MsgEventKind::Ack);
        assert_eq!(
            got[1].status,
            Outcome::Failed {
                status: HealthStatus::RemoteTimeout,
                reason: FailReason::Timeout
            }
        );
        assert_within(start, 20);
        // Response expiry lowers the next hop's health (lnt-095).
        next_event(&mut events, |e| {
            matches!(
                e,
                Event::Health {
                    kind: NiKind::Peer,
                    cause: Some(HealthStatus::RemoteTimeout),
                    ..
                }
            )
        })
        .await;
        assert_eq!(
            a.counters().await.unwrap().get("response_timeout_count"),
            Some(&1)
        );
        assert!(a.remove_fault_rule(rule));

        // The PUT is held longer than the transaction timeout.
        a.add_fault_rule(delay_sends(Duration::from_secs(600)))
            .unwrap();
        let start = Instant::now();
        let got = a.put(put(bn[0], true, 10)).await.unwrap().finish().await;
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].status,
            Outcome::Failed {
                status: HealthStatus::LocalTimeout,
                reason: FailReason::Timeout
            }
        );
        assert_within(start, 10);
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn a_resent_put_is_delivered_once() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _an, b, bn) = two_by_two(&fabric).await;
        let mut delivered = b.attach(md()).await.unwrap();
        // The PUT arrives but its sender is told it did not: LNet resends it.
        fabric.lose_completions(MsgType::Put, HealthStatus::LocalDropped, 1);
        let got = a.put(put(bn[0], true, 60)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        assert!(delivered.recv().await.is_some());
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(delivered.try_recv().is_err());
        let sent: u64 = fabric
            .nids()
            .iter()
            .map(|n| fabric.stats(*n).delivered)
            .sum();
        // Two PUTs and at least one ACK crossed the fabric.
        assert!(sent >= 3);
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn get_returns_the_md_data_in_a_reply() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _an, b, bn) = two_by_two(&fabric).await;
        let _rx = b.attach(md()).await.unwrap();
        let got = a
            .get(actors::GetRequest {
                dest: bn[1],
                portal: PORTAL,
                match_bits: BITS,
                sink_length: 4,
                timeout: Duration::from_secs(10),
            })
            .await
            .unwrap()
            .finish()
            .await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].kind, MsgEventKind::Reply);
        assert_eq!(got[1].payload.as_deref(), Some(&b"data"[..]));
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn ping_lists_the_nids_and_a_downed_ni_shows_down() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an, b, _bn) = two_by_two(&fabric).await;
        let reply = b.ping(an[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(reply.nids(), vec![(an[0], true), (an[1], true)]);
        assert_eq!(reply.info.lo_nid, Nid::LO_0);
        assert!(reply.info.features.contains(
            Features::NI_STATUS
                | Features::MULTI_RAIL
                | Features::DISCOVERY
                | Features::RTE_DISABLED
        ));
        a.set_local_ni_health(an[1], HealthValue::ZERO)
            .await
            .unwrap();
        // Let the NI actor take it.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let reply = b.ping(an[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(reply.nids(), vec![(an[0], true), (an[1], false)]);
        // A ping to a NID nobody has fails by its timeout.
        let lost = b.ping(nid("10.0.0.9@tcp"), Duration::from_secs(5)).await;
        assert!(lost.is_err());
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn discovery_learns_a_multi_rail_peer_on_two_nets_and_pushes() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp", "10.0.0.1@tcp1"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp", "10.0.1.1@tcp1"]).await;
        let mut delivered = b.attach(md()).await.unwrap();
        let found = a.discover(bn[0], Duration::from_secs(10)).await.unwrap();
        assert_eq!(found.primary, bn[0]);
        assert_eq!(found.nids, vec![(bn[0], true), (bn[1], true)]);
        assert!(found.multi_rail && found.pushed);
        let peers = a.peers().await.unwrap();
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].nis.len(), 2);
        // B learned A from the push.
        let peers = b.peers().await.unwrap();
        let pa = peers.iter().find(|p| p.primary == an[0]).unwrap();
        assert!(pa.multi_rail);
        assert_eq!(pa.nis.len(), 2);

        // The tcp link fails: the PUT is resent over tcp1 and ACKed.
        fabric.link_down(an[0], bn[0], HealthStatus::LocalDropped);
        for _ in 0..3 {
            let got = a.put(put(bn[0], true, 30)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
            let m = delivered.recv().await.unwrap();
            assert_eq!(m.ni, bn[1]);
        }
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_035_a_failing_peer_ni_is_recovered_by_the_peer_ni_queue() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _an, b, bn) = two_by_two(&fabric).await;
        let _rx = b.attach(md()).await.unwrap();
        // Hear from both peer NIs first: only peer NIs heard from join recovery.
        for n in &bn {
            a.ping(*n, Duration::from_secs(5)).await.unwrap();
        }
        let mut events = a.events().subscribe();
        let rule = a
            .add_fault_rule(FaultRule::health_error(
                NidMatch::Any,
                NidMatch::Nid(bn[0]),
                FaultTrigger::All,
                FaultHealthError::RemoteDropped,
            ))
            .unwrap();
        a.set_peer_ni_health(bn[0], HealthValue::clamped(500))
            .await
            .unwrap();
        next_event(&mut events, |e| {
            matches!(e, Event::RecoveryQueued { queue: RecoveryKind::PeerNi, nid, .. } if *nid == bn[0])
        })
        .await;
        // Pings to it fail while the rule holds; PUTs still get through on the other.
        let got = a.put(put(bn[0], true, 30)).await.unwrap().finish().await;
        assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        let listing = a.recovery(RecoveryKind::PeerNi).await.unwrap();
        assert_eq!(listing.iter().map(|e| e.key).collect::<Vec<_>>(), [bn[0]]);
        next_event(&mut events, |e| {
            matches!(e, Event::RecoveryPing { queue: RecoveryKind::PeerNi, .. })
        })
        .await;
        assert!(a.remove_fault_rule(rule));
        next_event(&mut events, |e| {
            matches!(e, Event::RecoveryLeft { queue: RecoveryKind::PeerNi, nid, .. } if *nid == bn[0])
        })
        .await;
        let peers = a.peers().await.unwrap();
        let ni = peers[0].nis.iter().find(|n| n.nid == bn[0]).unwrap();
        assert_eq!(ni.health, HealthValue::MAX);
        assert!(ni.last_alive.is_some());
    })
    .await
    .expect("bounded");
}

/// NI and peer NI actors on their own CPT arbiters (real time: a paused clock is per
/// runtime, and each arbiter has its own).
#[actix::test]
async fn nis_on_cpt_arbiters_carry_a_put_and_its_ack() {
    timeout(Duration::from_secs(30), async {
        let fabric = Fabric::new();
        let cpts = vec![actix::Arbiter::new(), actix::Arbiter::new()];
        let config = || NodeConfig {
            cpts: cpts.iter().map(|a| a.handle()).collect(),
            ..NodeConfig::default()
        };
        let a = Node::start(config());
        let b = Node::start(config());
        let mut an = Vec::new();
        let mut bn = Vec::new();
        for (node, out, ips) in [
            (&a, &mut an, ["10.0.0.1@tcp", "10.0.0.2@tcp"]),
            (&b, &mut bn, ["10.0.1.1@tcp", "10.0.1.2@tcp"]),
        ] {
            for ip in ips {
                out.push(
                    node.add_ni::<Fab>(FabricConfig::new(&fabric, nid(ip)), 8)
                        .await
                        .unwrap(),
                );
            }
        }
        let mut delivered = b.attach(md()).await.unwrap();
        a.add_peer(bn[0], bn.clone(), true).await.unwrap();
        for _ in 0..4 {
            let got = a.put(put(bn[0], true, 10)).await.unwrap().finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
            assert!(delivered.recv().await.is_some());
        }
        for cpt in cpts {
            cpt.stop();
        }
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn peer_ni_credits_queue_what_they_cannot_carry() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let a = Node::start(NodeConfig {
            peer_credits: 2,
            ..NodeConfig::default()
        });
        let a1 = a
            .add_ni::<Fab>(FabricConfig::new(&fabric, nid("10.0.0.1@tcp")), 8)
            .await
            .unwrap();
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let mut delivered = b.attach(md()).await.unwrap();
        a.add_fault_rule(delay_sends(Duration::from_secs(5)).messages(&[FaultMsgType::Put]))
            .unwrap();
        let mut txns = Vec::new();
        for _ in 0..5 {
            txns.push(a.put(put(bn[0], true, 60)).await.unwrap());
        }
        for t in txns {
            let got = t.finish().await;
            assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
        }
        for _ in 0..5 {
            assert!(delivered.recv().await.is_some());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        let peer = &a.peers().await.unwrap()[0].nis[0];
        assert_eq!((peer.tx_credits, peer.min_tx_credits), (2, -3));
        let ni = &a.local_nis().await.unwrap()[0];
        assert_eq!(ni.nid, a1);
        assert_eq!((ni.tx_credits, ni.min_tx_credits), (8, 6));
    })
    .await
    .expect("bounded");
}

#[actix::test]
async fn lnt_090_retry_count_0_set_at_run_time_stops_resends() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _an, _b, bn) = two_by_two(&fabric).await;
        let mut t = lnet::tunables::Tunables::default();
        t.set_retry_count(0).unwrap();
        a.set_tunables(t).await.unwrap();
        a.add_fault_rule(fail_sends(HealthStatus::LocalDropped).limit(1))
            .unwrap();
        let got = a.put(put(bn[0], true, 60)).await.unwrap().finish().await;
        assert_eq!(
            got[0].status,
            Outcome::Failed {
                status: HealthStatus::LocalDropped,
                reason: FailReason::NoResend(NoResend::RetriesExhausted)
            }
        );
    })
    .await
    .expect("bounded");
}
