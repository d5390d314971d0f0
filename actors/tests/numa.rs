//! NUMA distance in the local NI choice, over the in-process fabric with a paused clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{md, nid, node, put, Fab, BOUND};

use actors::{MdSpec, Node, NodeConfig};
use lnd::fabric::FabricConfig;
use lnet::numa::NumaTopology;
use tokio::time::timeout;

#[actix::test]
async fn snd_020_the_ni_nearest_to_the_memory_node_sends_and_numa_range_evens_them() {
    tokio::time::pause();
    timeout(BOUND, async {
        let fabric = lnd::fabric::Fabric::new();
        let a = Node::start(NodeConfig {
            numa: NumaTopology::new([(0, vec![10, 21]), (1, vec![21, 10])]),
            memory_node: Some(0),
            ..NodeConfig::default()
        });
        let far = a
            .add_ni::<Fab>(FabricConfig::new(&fabric, nid("10.0.0.1@tcp")), 8)
            .await
            .unwrap();
        let near = a
            .add_ni::<Fab>(FabricConfig::new(&fabric, nid("10.0.0.2@tcp")), 8)
            .await
            .unwrap();
        a.set_ni_numa_node(far, Some(1)).await.unwrap();
        a.set_ni_numa_node(near, Some(0)).await.unwrap();
        let (b, bn) = node(&fabric, &["10.0.1.1@tcp"]).await;
        let mut rx = b.attach(MdSpec { depth: 256, ..md() }).await.unwrap();
        for _ in 0..10 {
            a.put(put(bn[0], false, 5)).await.unwrap().finish().await;
            assert_eq!(rx.recv().await.unwrap().from.nid, near);
        }
        // With numa_range above every distance, both NIs are equally near: round robin by
        // sequence, so the far NI first catches up with the near one's ten sends.
        let mut t = lnet::tunables::Tunables::default();
        t.set(lnet::tunables::TunableName::NumaRange, 30).unwrap();
        a.set_tunables(t).await.unwrap();
        let mut from = std::collections::BTreeMap::new();
        for _ in 0..30 {
            a.put(put(bn[0], false, 5)).await.unwrap().finish().await;
            *from.entry(rx.recv().await.unwrap().from.nid).or_insert(0) += 1;
        }
        assert_eq!(from.get(&far), Some(&20), "{from:?}");
        assert_eq!(from.get(&near), Some(&10), "{from:?}");
        assert!(a
            .set_ni_numa_node(nid("10.9.9.9@tcp"), Some(0))
            .await
            .is_err());
    })
    .await
    .unwrap();
}
