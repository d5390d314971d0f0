//! What a peer NI costs: 100,000 peer NIs added to one node through `add_peer`, the heap
//! bytes counted by a counting global allocator in this test binary (this binary only:
//! it holds no other test, so nothing else allocates meanwhile). The figure is printed;
//! only a generous sanity bound is asserted, and nothing is timed.
//!
//! They are added as 50,000 Multi-Rail peers of two NIDs each (on tcp and tcp1), one
//! `add_peer` each, as a router would learn them; the node's peer table and the index
//! from each NID to its peer are in the count.

#![allow(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use actors::{Node, NodeConfig};
use lnet::Nid;
use tokio::time::timeout;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

fn size(layout: Layout) -> i64 {
    i64::try_from(layout.size()).unwrap_or(i64::MAX)
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is only
// arithmetic on the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(size(layout), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(size(layout), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(size(layout), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                i64::try_from(new_size).unwrap_or(i64::MAX) - size(layout),
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PEER_NIS: u32 = 100_000;

/// The resident set size in bytes, from `/proc/self/statm` (Linux), if readable.
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[actix::test]
async fn a_hundred_thousand_peer_nis_cost_little_memory_each() {
    timeout(Duration::from_secs(600), async {
        let node = Node::start(NodeConfig::default());
        // Settle the node's own start-up allocations.
        node.peers().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let rss_before = rss();
        let before = LIVE.load(Ordering::Relaxed);

        // Peer i: 10.x.y.z@tcp and 10.x.y.z@tcp1, all distinct.
        let nid = |i: u32, net: &str| -> Nid {
            let ip = 0x0A00_0000 | (i + 1);
            let [a, b, c, d] = ip.to_be_bytes();
            format!("{a}.{b}.{c}.{d}@{net}").parse().unwrap()
        };
        let nid_list_bytes = i64::from(PEER_NIS) * std::mem::size_of::<Nid>() as i64;
        for i in 0..PEER_NIS / 2 {
            let primary = nid(i, "tcp");
            node.add_peer(primary, vec![primary, nid(i, "tcp1")], true)
                .await
                .unwrap();
        }
        // Let every peer NI actor start (their contexts are set up when first polled).
        let peers = node.peers().await.unwrap();
        assert_eq!(peers.len(), PEER_NIS as usize / 2);
        assert!(peers.iter().all(|p| p.nis.len() == 2));
        drop(peers);
        tokio::time::sleep(Duration::from_millis(200)).await;
        node.peers().await.map(drop).unwrap();

        let after = LIVE.load(Ordering::Relaxed);
        let rss_after = rss();
        // The caller's NID list moved into the node and is kept as the peer's list: it is
        // part of what the node holds per peer NI, so it stays in the count.
        let per_ni = (after - before) / i64::from(PEER_NIS);
        println!(
            "{PEER_NIS} peer NIs: {} heap bytes in all, {per_ni} bytes per peer NI \
             (of which {} for the NID in its peer's list)",
            after - before,
            nid_list_bytes / i64::from(PEER_NIS),
        );
        if let (Some(b), Some(a)) = (rss_before, rss_after) {
            println!(
                "RSS: {b} -> {a} bytes, {} bytes per peer NI",
                a.saturating_sub(b) / u64::from(PEER_NIS)
            );
        }
        assert!(per_ni > 0);
        assert!(per_ni < 64 * 1024, "{per_ni} bytes per peer NI");
    })
    .await
    .expect("bounded");
}
