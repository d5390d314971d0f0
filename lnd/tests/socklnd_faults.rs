//! Fault injection hooks of a socklnd NI over real loopback sockets: drop (receive and
//! send), delay (send and receive) and every forced health status, rules added and
//! removed at run time. Own ports 20110..; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::time::Duration;

use bytes::Bytes;
use lnd::lnd::fault::{FaultAction, FaultRule, Hooks, MsgTypes, NidMatch, Trigger};
use lnd::Lnd;
use lnet::health::HealthStatus;
use lnet::{Header, Message, Nid};
use socklnd_support::*;
use tokio::time::Instant;

/// A PUT to `portal` whose payload starts with `id`.
fn numbered_put(src: Nid, dst: Nid, id: u64, portal: u32) -> (Header, Bytes) {
    let mut payload = id.to_le_bytes().to_vec();
    payload.extend_from_slice(&pattern(100, id as u8));
    let mut h = put(src, dst, &payload, false);
    if let Message::Put { ptl_index, .. } = &mut h.msg {
        *ptl_index = portal;
    }
    (h, payload.into())
}

fn id_of(m: &lnd::RxMessage) -> u64 {
    u64::from_le_bytes(m.payload[..8].try_into().unwrap())
}

/// Nothing arrives for a moment.
async fn nothing_arrives(node: &mut Node) {
    let r = tokio::time::timeout(Duration::from_millis(200), node.msgs.recv()).await;
    assert!(r.is_err(), "unexpected message: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_rules_on_receive_and_on_send() {
    let mut a = Node::start(config("127.0.1.20", 20110)).await;
    let mut b = Node::start(config("127.0.1.21", 20110)).await;
    let (an, bn) = (a.nid(), b.nid());

    // Receive side: B drops every 2nd PUT from A, silently.
    let rule = FaultRule::drop(NidMatch::Nid(an), NidMatch::Any, Trigger::EveryNth(2));
    let id = b.lnd.add_fault_rule(rule).unwrap();
    for i in 0..10 {
        let (h, p) = numbered_put(an, bn, i, 4);
        a.send(i, bn, h, p).await;
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    // Every 2nd one to arrive was dropped (small messages may take different
    // connections while the set comes up, so which ones depends on arrival order).
    let mut got = std::collections::HashSet::new();
    for _ in 0..5 {
        let m = b.message().await;
        let Message::Put { hdr_data, .. } = m.header.msg else {
            panic!("not a PUT")
        };
        assert_eq!(u64::from(crc32fast::hash(&m.payload)), hdr_data);
        assert!(got.insert(id_of(&m)), "delivered twice");
    }
    nothing_arrives(&mut b).await;
    let stats = &b.lnd.fault_rules()[0];
    assert_eq!((stats.id, stats.matched, stats.fired), (id, 10, 5));
    assert!(b.lnd.remove_fault_rule(id));
    assert!(b.lnd.fault_rules().is_empty());
    // The connection survived and nothing is dropped any more.
    let (h, p) = numbered_put(an, bn, 10, 4);
    a.send(10, bn, h, p).await;
    assert_eq!(id_of(&b.message().await), 10);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);

    // Send side: A drops PUTs to portal 4 (a net wildcard as destination): they complete
    // as sent, and never arrive; portal 5 goes through.
    let mut rule = FaultRule::new(
        NidMatch::Any,
        NidMatch::Net(bn.net),
        Trigger::Always,
        FaultAction::Drop,
        Hooks::Send,
    );
    rule.portal = Some(4);
    rule.types = MsgTypes::PUT;
    let id = a.lnd.add_fault_rule(rule).unwrap();
    let (h, p) = numbered_put(an, bn, 11, 4);
    a.send(11, bn, h, p).await;
    let done = a.completion().await;
    assert_eq!((done.id.0, done.status), (11, HealthStatus::Ok));
    let (h, p) = numbered_put(an, bn, 12, 5);
    a.send(12, bn, h, p).await;
    assert_eq!(id_of(&b.message().await), 12);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    a.lnd.clear_fault_rules();
    assert!(!a.lnd.remove_fault_rule(id));
    nothing_arrives(&mut b).await;
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_rules_hold_messages_on_send_and_on_receive() {
    let mut a = Node::start(config("127.0.1.22", 20111)).await;
    let mut b = Node::start(config("127.0.1.23", 20111)).await;
    let (an, bn) = (a.nid(), b.nid());
    const BY: Duration = Duration::from_millis(500);

    // Connect first, so that the delays are all that is measured.
    let (h, p) = numbered_put(an, bn, 0, 4);
    a.send(0, bn, h, p).await;
    assert_eq!(id_of(&b.message().await), 0);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);

    // Send side: PUTs to portal 4 wait; one to portal 5 sent after overtakes them.
    let mut rule = FaultRule::delay(NidMatch::Any, NidMatch::Nid(bn), Trigger::Always, BY);
    rule.hooks = Hooks::Send;
    rule.portal = Some(4);
    let id = a.lnd.add_fault_rule(rule).unwrap();
    let start = Instant::now();
    let (h, p) = numbered_put(an, bn, 1, 4);
    a.send(1, bn, h, p).await;
    let (h, p) = numbered_put(an, bn, 2, 5);
    a.send(2, bn, h, p).await;
    assert_eq!(id_of(&b.message().await), 2);
    assert!(start.elapsed() < BY);
    assert_eq!(id_of(&b.message().await), 1);
    assert!(start.elapsed() >= BY);
    for _ in 0..2 {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    assert!(a.lnd.remove_fault_rule(id));

    // Receive side: B holds what A sends.
    b.lnd
        .add_fault_rule(FaultRule::delay(
            NidMatch::Nid(an),
            NidMatch::Any,
            Trigger::Always,
            BY,
        ))
        .unwrap();
    let start = Instant::now();
    let (h, p) = numbered_put(an, bn, 3, 4);
    a.send(3, bn, h, p).await;
    assert_eq!(id_of(&b.message().await), 3);
    assert!(start.elapsed() >= BY);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);

    // A stop during a send delay aborts the send.
    a.lnd
        .add_fault_rule(FaultRule::delay(
            NidMatch::Any,
            NidMatch::Any,
            Trigger::Always,
            Duration::from_secs(3600),
        ))
        .unwrap();
    let (h, p) = numbered_put(an, bn, 4, 4);
    a.send(4, bn, h, p).await;
    let Node { lnd, mut done, .. } = a;
    lnd.stop().await;
    let d = next(&mut done).await;
    assert_eq!((d.id.0, d.status), (4, HealthStatus::LocalAborted));
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_error_rules_complete_sends_with_each_status() {
    let mut a = Node::start(config("127.0.1.24", 20112)).await;
    let mut b = Node::start(config("127.0.1.25", 20112)).await;
    let (an, bn) = (a.nid(), b.nid());
    let mut n = 0;
    for status in HealthStatus::ALL {
        if status == HealthStatus::Ok {
            continue;
        }
        let mut rule = FaultRule::health_error(
            NidMatch::Nid(an),
            NidMatch::Nid(bn),
            Trigger::Always,
            status,
        );
        rule.types = MsgTypes::PUT.union(MsgTypes::GET);
        let id = a.lnd.add_fault_rule(rule).unwrap();
        let (h, p) = numbered_put(an, bn, n, 4);
        a.send(n, bn, h, p).await;
        let d = a.completion().await;
        assert_eq!((d.id.0, d.status), (n, status));
        assert!(d.reason.is_some());
        // A GET fails the same way; an ACK (not in the rule's types) goes through.
        a.send(n + 1, bn, get(an, bn, 64), Bytes::new()).await;
        assert_eq!(a.completion().await.status, status);
        let ack = lnet::Header {
            dest_nid: bn,
            src_nid: an,
            dest_pid: lnet::nid::PID_LUSTRE,
            src_pid: lnet::nid::PID_LUSTRE,
            payload_length: 0,
            msg: Message::Ack {
                dst_wmd: lnet::WireHandle::NONE,
                match_bits: n,
                mlength: 0,
            },
        };
        a.send(n + 2, bn, ack, Bytes::new()).await;
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
        assert_eq!(b.message().await.header, ack);
        let rules = a.lnd.fault_rules();
        assert_eq!((rules[0].matched, rules[0].fired), (2, 2));
        assert!(a.lnd.remove_fault_rule(id));
        n += 3;
    }
    // Nothing the rules failed reached B.
    nothing_arrives(&mut b).await;
    // On receive a health-error rule is refused.
    let mut rule = FaultRule::health_error(
        NidMatch::Any,
        NidMatch::Any,
        Trigger::Always,
        HealthStatus::RemoteError,
    );
    rule.hooks = Hooks::Receive;
    assert!(b.lnd.add_fault_rule(rule).is_err());
    a.lnd.stop().await;
    b.lnd.stop().await;
}
