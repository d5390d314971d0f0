//! Shared pieces of the actor tests that run over the in-process fabric with a paused clock.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use actors::{MdSpec, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::fabric::{Fabric, FabricConfig, FabricLnd};
use lnet::fault::{FaultHealthError, FaultPath, FaultRule, FaultTrigger, NidMatch};
use lnet::health::HealthStatus;
use lnet::Nid;

/// The fabric LND as the node drives it.
pub type Fab = FabricLnd<NodeHandler>;

/// The portal every test PUTs and GETs on.
pub const PORTAL: u32 = 4;
/// The match bits every test uses.
pub const BITS: u64 = 0x42;
/// A bound on every test, in paused (virtual) time.
pub const BOUND: Duration = Duration::from_secs(3600);

pub fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// A node with one fabric NI per NID.
pub async fn node(fabric: &Fabric, nids: &[&str]) -> (Node, Vec<Nid>) {
    let node = Node::start(NodeConfig::default());
    let mut out = Vec::new();
    for n in nids {
        out.push(
            node.add_ni::<Fab>(FabricConfig::new(fabric, nid(n)), 8)
                .await
                .unwrap(),
        );
    }
    (node, out)
}

/// End node A (10.0.0.1@tcp) and end node B (one NI, `b_nid`) on `fabric`, B with the
/// tests' MD attached: A, its NIDs, B, its NIDs, and the receiver of B's MD (kept alive
/// by the caller).
pub async fn pair(
    fabric: &Fabric,
    b_nid: &str,
) -> (
    Node,
    Vec<Nid>,
    Node,
    Vec<Nid>,
    tokio::sync::mpsc::Receiver<lnd::RxMessage>,
) {
    let (a, an) = node(fabric, &["10.0.0.1@tcp"]).await;
    let (b, bn) = node(fabric, &[b_nid]).await;
    let rx = b.attach(md()).await.unwrap();
    (a, an, b, bn, rx)
}

/// A PUT on the tests' portal and match bits.
pub fn put(dest: Nid, ack: bool, secs: u64) -> PutRequest {
    PutRequest {
        dest,
        portal: PORTAL,
        match_bits: BITS,
        hdr_data: 7,
        payload: Bytes::from_static(b"payload"),
        ack,
        timeout: Duration::from_secs(secs),
    }
}

/// A PUT with an ACK from `node` to `dest` (the tests' portal), which must end well.
pub async fn put_acked(node: &Node, dest: Nid) {
    let got = node.put(put(dest, true, 5)).await.unwrap().finish().await;
    assert!(got.iter().all(|e| e.status.is_ok()), "{got:?}");
}

/// The memory descriptor the tests' PUTs and GETs match.
pub fn md() -> MdSpec {
    MdSpec {
        portal: PORTAL,
        match_bits: BITS,
        data: Bytes::from_static(b"data for a GET"),
        depth: 16,
    }
}

/// A rule failing every send of the node with `status` (`lnetctl fault drop add -e`).
pub fn fail_sends(status: HealthStatus) -> FaultRule {
    FaultRule::health_error(
        NidMatch::Any,
        NidMatch::Any,
        FaultTrigger::All,
        FaultHealthError::from_status(status).unwrap(),
    )
}

/// A rule losing every send of the node on the network (the sender sees success).
pub fn drop_sends() -> FaultRule {
    FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All).on(FaultPath::Send)
}

/// A rule holding every send of the node this long before its LND has it.
pub fn delay_sends(by: Duration) -> FaultRule {
    let ms = u64::try_from(by.as_millis()).unwrap();
    FaultRule::delay(NidMatch::Any, NidMatch::Any, FaultTrigger::All, ms).on(FaultPath::Send)
}
