//! A router's buffer is held for a message from the moment its header is read until its
//! payload is in. A peer that goes away in the middle of a payload leaves no buffer and
//! no router-buffer credit behind: both go back when its connection ends (reference:
//! core 5.2, 5.3). Real sockets on loopback; the peer is a socklnd peer written by hand
//! (its HELLO by the library's connector, its frame by the library's encoder). Own port
//! 21_992; every wait is bounded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::handshake;
use lnd::socklnd::wire::{encode_lnet, lnet_frame_len, ConnType, KsockHeader, ProtoVersion};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::nid::PID_LUSTRE;
use lnet::tunables::{TunableName, Tunables};
use lnet::{Header, HeaderForm, Message, Nid, ProcessId, WireHandle};
use tokio::io::AsyncWriteExt;
use tokio::time::{sleep, timeout, Instant};

const PORT: u16 = 21_992;
const WAIT: Duration = Duration::from_secs(60);
/// How long one state is waited for.
const SETTLE: Duration = Duration::from_secs(15);

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn config(ni: Nid) -> SockLndConfig {
    let addr = Ipv4Addr::from(ni.addr_u32().unwrap());
    let mut c = SockLndConfig::new(ni, (0x1057 << 32) | u64::from(u32::from(addr)));
    c.listen = Some(SocketAddr::new(IpAddr::V4(addr), PORT));
    c.peer_port = PORT;
    c
}

/// A 1 MiB PUT from `src` for `dst`.
fn put(src: Nid, dst: Nid) -> Header {
    Header {
        dest_nid: dst,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 1 << 20,
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 7,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        },
    }
}

/// The large pool's free buffers and peer NI `peer`'s router-buffer credits (with their
/// most), summed over the CPTs.
async fn large_and_credits(router: &Node, peer: Nid) -> (i32, Option<(i32, u32)>) {
    let show = router.routing_show().await.unwrap();
    let large = show.buffers.cpts.iter().map(|c| c[2].credits).sum();
    let credits = show
        .buffers
        .peers
        .iter()
        .find(|(n, _)| *n == peer)
        .map(|(_, c)| (c.credits, c.max));
    (large, credits)
}

/// Polls until `done` holds of the router's large pool and `peer`'s credits.
async fn until(
    router: &Node,
    peer: Nid,
    what: &str,
    done: impl Fn(i32, Option<(i32, u32)>) -> bool,
) {
    let start = Instant::now();
    loop {
        let (large, credits) = large_and_credits(router, peer).await;
        if done(large, credits) {
            return;
        }
        assert!(
            start.elapsed() < SETTLE,
            "{what}: large pool {large} free, peer credits {credits:?}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

#[actix::test]
async fn a_peer_that_goes_away_in_the_middle_of_a_payload_leaves_no_buffer_held() {
    timeout(WAIT, async {
        let mut tunables = Tunables::default();
        tunables.set(TunableName::Routing, 1).unwrap();
        let router = Node::start(NodeConfig {
            tunables,
            ..NodeConfig::default()
        });
        let (tcp, tcp1) = (nid("127.0.12.1@tcp"), nid("127.0.12.2@tcp1"));
        for ni in [tcp, tcp1] {
            router
                .add_ni::<SockLnd<NodeHandler>>(config(ni), 8)
                .await
                .unwrap();
        }
        let (free, _) = large_and_credits(&router, nid("127.0.12.9@tcp")).await;

        // Three times, so that one buffer lost each time would show.
        for round in 0..3u64 {
            let me = nid("127.0.12.9@tcp");
            let mut conn = handshake::connect(
                ProcessId::lustre(me),
                100 + round,
                ProcessId::lustre(tcp),
                config(tcp).listen.unwrap(),
                ConnType::Control,
                ProtoVersion::V3,
                WAIT,
            )
            .await
            .unwrap();
            let mut frame = Vec::new();
            encode_lnet(
                &KsockHeader::lnet(),
                &put(me, nid("127.0.12.20@tcp1")),
                HeaderForm::Nid4,
                &[0x5a; 1 << 20],
                Default::default(),
                &mut frame,
            )
            .unwrap();
            // The header, and a tenth of the payload it announces.
            frame.truncate(lnet_frame_len(HeaderForm::Nid4, 0) + 100_000);
            conn.stream.write_all(&frame).await.unwrap();
            until(&router, me, "a buffer held for the payload", |large, c| {
                large == free - 1 && c.is_some_and(|(now, max)| now + 1 == max as i32)
            })
            .await;
            drop(conn);
            until(
                &router,
                me,
                "the buffer back with the peer gone",
                |large, c| large == free && c.is_some_and(|(now, max)| now == max as i32),
            )
            .await;
        }
        println!(
            "3 payloads cut short: the large pool has its {free} buffers, the peer its credits"
        );
    })
    .await
    .unwrap();
}
