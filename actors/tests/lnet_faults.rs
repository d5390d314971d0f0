//! Fault rules applied by the LNet layer (`lnetctl fault drop|delay add`) to NIs of the
//! socket LND over real loopback sockets (127.0.1.20..25, ports 20110..20112): drop on
//! receive and on send, delay on send and on receive, and every health error, rules added
//! and removed at run time through the node. Every wait is bounded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use actors::{
    GetRequest, MdSpec, MsgEventKind, Node, NodeConfig, NodeError, NodeHandler, Outcome, PutRequest,
};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnd::RxMessage;
use lnet::fault::{
    FaultAddError, FaultHealthError, FaultMsgType, FaultPath, FaultRule, FaultRuleError,
    FaultTrigger, NidMatch,
};
use lnet::health::HealthStatus;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};

const BITS: u64 = 0x77;
/// A bound on every wait.
const WAIT: Duration = Duration::from_secs(30);

async fn node(ip: &str, port: u16, tunables: Tunables) -> (Node, Nid) {
    let addr: IpAddr = ip.parse().unwrap();
    let nid: Nid = format!("{ip}@tcp").parse().unwrap();
    let mut c = SockLndConfig::new(nid, 0xFA17_0000 | u64::from(port));
    c.listen = Some(SocketAddr::new(addr, port));
    c.peer_port = port;
    let node = Node::start(NodeConfig {
        tunables,
        ..NodeConfig::default()
    });
    let nid = node.add_ni::<SockLnd<NodeHandler>>(c, 8).await.unwrap();
    (node, nid)
}

async fn md(node: &Node, portal: u32) -> mpsc::Receiver<RxMessage> {
    node.attach(MdSpec {
        portal,
        match_bits: BITS,
        data: Bytes::from_static(b"the data a GET reads"),
        depth: 64,
    })
    .await
    .unwrap()
}

/// A PUT without ACK of `id` to `portal`; how its SEND ended.
async fn put(a: &Node, dest: Nid, id: u64, portal: u32) -> Outcome {
    let got = a
        .put(PutRequest {
            dest,
            portal,
            match_bits: BITS,
            hdr_data: id,
            payload: Bytes::copy_from_slice(&id.to_le_bytes()),
            ack: false,
            timeout: Duration::from_secs(10),
        })
        .await
        .unwrap()
        .finish()
        .await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].kind, MsgEventKind::Send);
    got[0].status
}

fn id_of(m: &RxMessage) -> u64 {
    u64::from_le_bytes(m.payload[..8].try_into().unwrap())
}

async fn next_id(rx: &mut mpsc::Receiver<RxMessage>) -> u64 {
    id_of(&timeout(WAIT, rx.recv()).await.unwrap().unwrap())
}

/// Nothing arrives for a moment.
async fn nothing_arrives(rx: &mut mpsc::Receiver<RxMessage>) {
    let r = timeout(Duration::from_millis(300), rx.recv()).await;
    assert!(r.is_err(), "unexpected message: {r:?}");
}

#[actix::test]
async fn drop_rules_on_receive_and_on_send() {
    let (a, an) = node("127.0.1.20", 20110, Tunables::default()).await;
    let (b, bn) = node("127.0.1.21", 20110, Tunables::default()).await;
    let mut p4 = md(&b, 4).await;
    let mut p5 = md(&b, 5).await;
    assert_eq!(put(&a, bn, 100, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 100);

    // Receive side (the kernel's place for a drop rule): B drops every 2nd PUT from A,
    // silently; A's sends all complete.
    let rule = b
        .add_fault_rule(
            FaultRule::drop(NidMatch::Nid(an), NidMatch::Any, FaultTrigger::EveryNth(2))
                .messages(&[FaultMsgType::Put]),
        )
        .unwrap();
    for i in 0..10 {
        assert_eq!(put(&a, bn, i, 4).await, Outcome::Ok);
    }
    let mut got = HashSet::new();
    for _ in 0..5 {
        assert!(got.insert(next_id(&mut p4).await), "delivered twice");
    }
    nothing_arrives(&mut p4).await;
    let stats = &b.fault_rules()[0];
    assert_eq!((stats.id, stats.matched, stats.fired), (rule, 10, 5));
    assert!(b.remove_fault_rule(rule));
    assert!(b.fault_rules().is_empty());
    // The connection survived and nothing is dropped any more.
    assert_eq!(put(&a, bn, 10, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 10);

    // Send side: A loses PUTs to portal 4 (a net wildcard as destination): they complete
    // as sent and never arrive; portal 5 goes through.
    a.add_fault_rule(
        FaultRule::drop(NidMatch::Any, NidMatch::Net(bn.net), FaultTrigger::All)
            .on(FaultPath::Send)
            .portals(&[4])
            .messages(&[FaultMsgType::Put]),
    )
    .unwrap();
    assert_eq!(put(&a, bn, 11, 4).await, Outcome::Ok);
    assert_eq!(put(&a, bn, 12, 5).await, Outcome::Ok);
    assert_eq!(next_id(&mut p5).await, 12);
    nothing_arrives(&mut p4).await;
    assert_eq!(a.clear_fault_rules(), 1);
    assert_eq!(put(&a, bn, 13, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 13);
}

#[actix::test]
async fn delay_rules_hold_messages_on_send_and_on_receive() {
    let (a, an) = node("127.0.1.22", 20111, Tunables::default()).await;
    let (b, bn) = node("127.0.1.23", 20111, Tunables::default()).await;
    let mut p4 = md(&b, 4).await;
    let mut p5 = md(&b, 5).await;
    const BY: Duration = Duration::from_millis(500);
    let by_ms = u64::try_from(BY.as_millis()).unwrap();

    // Connect first, so that the delays are all that is measured.
    assert_eq!(put(&a, bn, 0, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 0);

    // Send side: PUTs to portal 4 wait; one to portal 5 sent after overtakes them.
    let rule = a
        .add_fault_rule(
            FaultRule::delay(NidMatch::Any, NidMatch::Nid(bn), FaultTrigger::All, by_ms)
                .on(FaultPath::Send)
                .portals(&[4]),
        )
        .unwrap();
    let start = Instant::now();
    let (a1, a2) = (a.clone(), a.clone());
    let first = actix::spawn(async move { put(&a1, bn, 1, 4).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = actix::spawn(async move { put(&a2, bn, 2, 5).await });
    assert_eq!(next_id(&mut p5).await, 2);
    assert!(start.elapsed() < BY);
    assert_eq!(next_id(&mut p4).await, 1);
    assert!(start.elapsed() >= BY);
    assert_eq!(first.await.unwrap(), Outcome::Ok);
    assert_eq!(second.await.unwrap(), Outcome::Ok);
    assert_eq!(a.fault_rules()[0].fired, 1);
    assert!(a.remove_fault_rule(rule));

    // Receive side (the kernel's place for a delay rule): B holds what A sends.
    b.add_fault_rule(FaultRule::delay(
        NidMatch::Nid(an),
        NidMatch::Any,
        FaultTrigger::All,
        by_ms,
    ))
    .unwrap();
    let start = Instant::now();
    assert_eq!(put(&a, bn, 3, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 3);
    assert!(start.elapsed() >= BY);
    assert_eq!(b.fault_rules()[0].fired, 1);

    // A send held past its transaction timeout ends at that timeout.
    a.add_fault_rule(
        FaultRule::delay(NidMatch::Any, NidMatch::Any, FaultTrigger::All, 3_600_000)
            .on(FaultPath::Send),
    )
    .unwrap();
    let start = Instant::now();
    let got = a
        .put(PutRequest {
            dest: bn,
            portal: 4,
            match_bits: BITS,
            hdr_data: 4,
            payload: Bytes::from_static(b"held"),
            ack: true,
            timeout: Duration::from_secs(1),
        })
        .await
        .unwrap()
        .finish()
        .await;
    assert!(!got.last().unwrap().status.is_ok(), "{got:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    nothing_arrives(&mut p4).await;
}

#[actix::test]
async fn health_error_rules_fail_sends_with_each_status() {
    // No resends and no health changes: each send ends with the rule's status.
    let mut tunables = Tunables::default();
    tunables.set(TunableName::RetryCount, 0).unwrap();
    tunables.set(TunableName::HealthSensitivity, 0).unwrap();
    let (a, an) = node("127.0.1.24", 20112, tunables).await;
    let (b, bn) = node("127.0.1.25", 20112, Tunables::default()).await;
    let mut p4 = md(&b, 4).await;
    assert_eq!(put(&a, bn, 0, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 0);
    for status in HealthStatus::ALL {
        let Some(error) = FaultHealthError::from_status(status) else {
            continue;
        };
        let rule = a
            .add_fault_rule(
                FaultRule::health_error(
                    NidMatch::Nid(an),
                    NidMatch::Nid(bn),
                    FaultTrigger::All,
                    error,
                )
                .messages(&[FaultMsgType::Put, FaultMsgType::Get]),
            )
            .unwrap();
        match put(&a, bn, 1, 4).await {
            Outcome::Failed { status: s, .. } => assert_eq!(s, status),
            other => panic!("{status}: {other:?}"),
        }
        // A GET fails the same way.
        let got = a
            .get(GetRequest {
                dest: bn,
                portal: 4,
                match_bits: BITS,
                sink_length: 64,
                timeout: Duration::from_secs(10),
            })
            .await
            .unwrap()
            .finish()
            .await;
        match got.last().unwrap().status {
            Outcome::Failed { status: s, .. } => assert_eq!(s, status),
            other => panic!("{status}: {other:?}"),
        }
        let rules = a.fault_rules();
        assert_eq!(
            (rules[0].id, rules[0].matched, rules[0].fired),
            (rule, 2, 2)
        );
        assert!(a.remove_fault_rule(rule));
    }
    // Nothing the rules failed reached B.
    nothing_arrives(&mut p4).await;
    // A type the rule does not name goes through: a GET-only rule lets a PUT by.
    a.add_fault_rule(
        FaultRule::health_error(
            NidMatch::Any,
            NidMatch::Any,
            FaultTrigger::All,
            FaultHealthError::Random,
        )
        .messages(&[FaultMsgType::Get]),
    )
    .unwrap();
    assert_eq!(put(&a, bn, 2, 4).await, Outcome::Ok);
    assert_eq!(next_id(&mut p4).await, 2);
    // On receive a health-error rule is refused.
    let refused = b.add_fault_rule(
        FaultRule::health_error(
            NidMatch::Any,
            NidMatch::Any,
            FaultTrigger::All,
            FaultHealthError::RemoteError,
        )
        .on(FaultPath::Receive),
    );
    assert!(matches!(
        refused,
        Err(NodeError::FaultRule(FaultAddError::Rule(
            FaultRuleError::HealthErrorOnReceive
        )))
    ));
}
