//! UDSP rules applied to path selection and shown in `net show -v 4` / `peer show -v 4`,
//! over the in-process fabric with a paused clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{md, nid, node, put, put_acked, BOUND};

use actors::{MdSpec, Node, NodeError};
use lnet::config::UdspRule;
use lnet::show::Verbosity;
use lnet::Nid;
use tokio::time::timeout;

/// Sends per local NI of `node`, by NID.
async fn sends(node: &Node) -> Vec<(Nid, u64)> {
    node.local_nis()
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.nid, v.stats.send_count))
        .collect()
}

fn src(expr: &str, priority: u32) -> UdspRule {
    UdspRule {
        src: Some(expr.into()),
        priority: Some(priority),
        ..UdspRule::default()
    }
}

#[actix::test]
async fn udsp_src_rule_sends_from_the_preferred_local_ni_and_shows_its_priority() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = lnd::fabric::Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp", "10.0.0.2@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let _rx = b.attach(MdSpec { depth: 256, ..md() }).await.unwrap();
        // Without rules, round robin uses both NIs.
        for _ in 0..10 {
            a.put(put(bn[0], false, 5)).await.unwrap().finish().await;
        }
        let spread = sends(&a).await;
        assert!(spread.iter().all(|(_, n)| *n >= 4), "{spread:?}");

        a.set_udsp(&[src("10.0.0.2@tcp", 0)]).await.unwrap();
        let before = sends(&a).await;
        for _ in 0..10 {
            a.put(put(bn[0], false, 5)).await.unwrap().finish().await;
        }
        let after = sends(&a).await;
        let grew = |nid: Nid| {
            let at = |v: &[(Nid, u64)]| v.iter().find(|(n, _)| *n == nid).unwrap().1;
            at(&after) - at(&before)
        };
        assert_eq!(grew(an[1]), 10, "{before:?} -> {after:?}");
        assert_eq!(grew(an[0]), 0);

        // `net show -v 4`: the NID rule's priority on that NI only; -1 elsewhere.
        let yaml = a.net_show().await.unwrap().to_yaml(Verbosity(4));
        let of = |nid: &str| {
            let at = yaml.find(&format!("nid: {nid}\n")).unwrap();
            let info = at + yaml[at..].find("udsp info:").unwrap();
            yaml[info..info + 100].to_owned()
        };
        let expect = |p: i32| {
            format!("udsp info:\n                  net priority: -1\n                  nid priority: {p}\n")
        };
        assert!(of("10.0.0.2@tcp").starts_with(&expect(0)), "{yaml}");
        assert!(of("10.0.0.1@tcp").starts_with(&expect(-1)), "{yaml}");
    })
    .await
    .unwrap();
}

#[actix::test]
async fn udsp_dst_rule_picks_the_peer_ni_of_a_multi_rail_peer() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = lnd::fabric::Fabric::new();
        let (a, _) = node(&fabric, &["10.0.0.1@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp", "10.0.1.2@tcp"]).await;
        let mut rx = b.attach(MdSpec { depth: 256, ..md() }).await.unwrap();
        a.add_peer(bn[0], bn.clone(), true).await.unwrap();
        a.set_udsp(&[UdspRule {
            dst: Some("10.0.1.2@tcp".into()),
            priority: Some(1),
            ..UdspRule::default()
        }])
        .await
        .unwrap();
        for _ in 0..10 {
            put_acked(&a, bn[0]).await;
            assert_eq!(rx.recv().await.unwrap().ni, bn[1]);
        }
        let peers = a.peer_show().await.unwrap();
        let yaml = peers.to_yaml(Verbosity(4));
        assert!(yaml.contains("nid priority: 1"), "{yaml}");
    })
    .await
    .unwrap();
}

#[actix::test]
async fn udsp_src_dst_rule_makes_a_local_ni_preferred_by_a_peer_ni() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = lnd::fabric::Fabric::new();
        let (a, an) = node(&fabric, &["10.0.0.1@tcp"]).await;
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp", "10.0.1.2@tcp"]).await;
        let mut rx = b.attach(MdSpec { depth: 256, ..md() }).await.unwrap();
        a.add_peer(bn[0], bn.clone(), true).await.unwrap();
        // B's second NI prefers A's NI: given that local NI, it is the peer NI chosen.
        a.set_udsp(&[UdspRule {
            src: Some(an[0].to_string()),
            dst: Some("10.0.1.2@tcp".into()),
            ..UdspRule::default()
        }])
        .await
        .unwrap();
        for _ in 0..10 {
            a.put(put(bn[0], false, 5)).await.unwrap().finish().await;
            assert_eq!(rx.recv().await.unwrap().ni, bn[1]);
        }
    })
    .await
    .unwrap();
}

#[actix::test]
async fn a_bad_rule_list_is_refused_whole_naming_the_rule() {
    let fabric = lnd::fabric::Fabric::new();
    let (a, _) = node(&fabric, &["10.0.0.1@tcp"]).await;
    a.set_udsp(&[src("tcp", 1)]).await.unwrap();
    let err = a
        .set_udsp(&[src("tcp", 2), src("10.0.0.300@tcp", 0)])
        .await
        .unwrap_err();
    assert!(matches!(err, NodeError::Udsp(_)), "{err:?}");
    assert!(err.to_string().contains("udsp[1].src"), "{err}");
    // The rules in force are the earlier ones.
    assert_eq!(
        a.udsp()
            .await
            .unwrap()
            .local_net_priority(nid("10.0.0.1@tcp").net),
        1
    );
}
