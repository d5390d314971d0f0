//! Delivery into a memory descriptor whose consumer falls behind, and transaction timeouts
//! of different lengths side by side, over the in-process fabric with a paused clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{md, node, pair, put, BOUND};

use std::time::Duration;

use actors::{FailReason, MdSpec, MsgEventKind, Outcome};
use lnd::fabric::Fabric;
use lnet::fault::{FaultMsgType, FaultRule, FaultTrigger, NidMatch};
use lnet::health::HealthStatus;
use tokio::time::{timeout, Instant};

#[actix::test]
async fn a_put_finding_its_md_full_is_dropped_counted_and_not_acked() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, _) = node(&fabric, &["10.0.0.1@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.0.2@tcp"]).await;
        let mut rx = b.attach(MdSpec { depth: 2, ..md() }).await.unwrap();
        let before = b.counters().await.unwrap();
        let mut ends = Vec::new();
        for _ in 0..5 {
            ends.push(a.put(put(bn[0], true, 2)).await.unwrap().finish().await);
        }
        let acked = ends
            .iter()
            .filter(|e| {
                e.iter()
                    .any(|e| e.kind == MsgEventKind::Ack && e.status.is_ok())
            })
            .count();
        assert_eq!(acked, 2, "only what the MD had room for is ACKed: {ends:?}");
        for e in ends.iter().skip(2) {
            let last = e.last().unwrap();
            assert_eq!(last.kind, MsgEventKind::Ack);
            assert_eq!(
                last.status,
                Outcome::Failed {
                    status: HealthStatus::RemoteTimeout,
                    reason: FailReason::Timeout
                }
            );
        }
        let after = b.counters().await.unwrap();
        let drops = |c: &std::collections::BTreeMap<&str, u64>| c.get("drop_count").copied();
        assert_eq!(
            drops(&after).unwrap_or(0) - drops(&before).unwrap_or(0),
            3,
            "{after:?}"
        );
        // The two delivered are there; once read, there is room again.
        assert!(rx.recv().await.is_some() && rx.recv().await.is_some());
        let again = a.put(put(bn[0], true, 2)).await.unwrap().finish().await;
        assert!(again.iter().all(|e| e.status.is_ok()), "{again:?}");
        assert!(rx.recv().await.is_some());
    })
    .await
    .unwrap();
}

#[actix::test]
async fn lnt_100_each_transaction_ends_at_its_own_callers_timeout() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = Fabric::new();
        let (a, an, _b, bn, _rx) = pair(&fabric, "10.0.0.2@tcp").await;
        // Every ACK from B is lost.
        // (`lnetctl fault drop add -s B -d A -m ACK` on A: dropped on receive).
        let rule = a
            .add_fault_rule(
                FaultRule::drop(
                    NidMatch::Nid(bn[0]),
                    NidMatch::Nid(an[0]),
                    FaultTrigger::All,
                )
                .messages(&[FaultMsgType::Ack]),
            )
            .unwrap();
        let start = Instant::now();
        let long = a.put(put(bn[0], true, 100)).await.unwrap();
        let short = a.put(put(bn[0], true, 10)).await.unwrap();
        let middle = a.put(put(bn[0], true, 50)).await.unwrap();
        let short_end = tokio::spawn(async move {
            let e = short.finish().await;
            (e, start.elapsed())
        });
        let middle_end = tokio::spawn(async move {
            let e = middle.finish().await;
            (e, start.elapsed())
        });
        let (long_events, long_at) = (long.finish().await, start.elapsed());
        let (short_events, short_at) = short_end.await.unwrap();
        let (middle_events, middle_at) = middle_end.await.unwrap();
        for (events, at, secs) in [
            (&short_events, short_at, 10),
            (&middle_events, middle_at, 50),
            (&long_events, long_at, 100),
        ] {
            let last = events.last().unwrap();
            assert_eq!(last.kind, MsgEventKind::Ack, "{events:?}");
            assert!(!last.status.is_ok(), "{events:?}");
            // Virtual time: the timeout ends the transaction at its deadline, to the tick.
            assert!(
                at >= Duration::from_secs(secs)
                    && at < Duration::from_secs(secs) + Duration::from_millis(10),
                "the {secs} s transaction ended after {at:?}"
            );
        }
        // The rule saw the three ACKs and dropped each.
        let stats = &a.fault_rules()[0];
        assert_eq!((stats.id, stats.matched, stats.fired), (rule, 3, 3));
    })
    .await
    .unwrap();
}
