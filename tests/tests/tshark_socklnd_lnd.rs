//! Two socklnd NIs of ours exchange PUT (0 B, 4 KiB, 1 MiB) with ACKs and GET with its
//! REPLY over real TCP on loopback; dumpcap captures every connection and:
//! - tshark's LNet dissector decodes each LNet message with every field as it was sent;
//! - each connection's handshake bytes have exactly the layout of the spec's worked
//!   example (acceptor request, HELLO V3, HELLO reply), checked byte by byte here without
//!   our encoders, from a reserved source port: the sending NI opens one CONTROL, one
//!   BULK_IN and one BULK_OUT connection, and the answers travel back on them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnd::{Lnd, LndHandler, RxDecision, RxHeader, RxMessage, TxCompletion, TxId, TxRequest};
use lnet::nid::PID_LUSTRE;
use lnet::{Header, Message, Nid, WireHandle};
use lnet_router_tests::tshark::{self, LiveCapture, Pdu};
use tokio::sync::mpsc;

/// This test's own port: both NIs listen on it, each on its own address.
const PORT: u16 = 29777;
/// A portal whose PUT payloads tshark shows as `data.data`.
const PORTAL: u32 = 42;
const WAIT: Duration = Duration::from_secs(30);

struct Collect {
    msgs: mpsc::Sender<RxMessage>,
    done: mpsc::Sender<TxCompletion>,
}

impl LndHandler for Collect {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        RxDecision::Receive(BytesMut::with_capacity(rx.header.payload_length as usize))
    }

    async fn on_message(&self, msg: RxMessage) {
        let _ = self.msgs.send(msg).await;
    }

    fn on_send_complete(&self, done: TxCompletion) {
        let _ = self.done.try_send(done);
    }
}

struct Node {
    lnd: SockLnd<Collect>,
    msgs: mpsc::Receiver<RxMessage>,
    done: mpsc::Receiver<TxCompletion>,
}

async fn node(ip: [u8; 4]) -> Node {
    let addr = Ipv4Addr::from(ip);
    let nid = Nid::from_ipv4("tcp".parse().unwrap(), addr);
    let mut cfg = SockLndConfig::new(nid, 0x17D4_B84D_0000_0000 | u64::from(ip[3]));
    cfg.listen = Some(SocketAddr::new(addr.into(), PORT));
    cfg.peer_port = PORT;
    let (msgs_tx, msgs) = mpsc::channel(16);
    let (done_tx, done) = mpsc::channel(64);
    let handler = Arc::new(Collect {
        msgs: msgs_tx,
        done: done_tx,
    });
    Node {
        lnd: SockLnd::start(cfg, handler).await.unwrap(),
        msgs,
        done,
    }
}

async fn next<T>(rx: &mut mpsc::Receiver<T>) -> T {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("timed out")
        .expect("channel closed")
}

fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

fn header(src: Nid, dest: Nid, msg: Message, payload_length: usize) -> Header {
    Header {
        dest_nid: dest,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: payload_length as u32,
        msg,
    }
}

/// Sends every message from `from` to `to` and waits until `to` has them all.
async fn exchange(from: &Node, to: &mut Node, msgs: &[(Header, Bytes)], first_id: u64) {
    for (i, (h, payload)) in msgs.iter().enumerate() {
        let tx = TxRequest {
            id: TxId(first_id + i as u64),
            peer: to.lnd.nid(),
            header: *h,
            payload: payload.clone(),
        };
        tokio::time::timeout(WAIT, from.lnd.send(tx))
            .await
            .unwrap()
            .unwrap();
    }
    for _ in msgs {
        let got = next(&mut to.msgs).await;
        let (_, payload) = msgs
            .iter()
            .find(|(h, _)| *h == got.header)
            .expect("a message we did not send");
        assert!(got.payload == *payload, "payload differs");
    }
}

fn shown(pdu: &Pdu, name: &str) -> u64 {
    let text = &pdu.one(name).unwrap().show;
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => text.parse().unwrap(),
    }
}

/// tshark's view of one LNet message equals the header and payload we sent.
fn check(pdu: &Pdu, h: &Header, payload: &[u8]) {
    let ip = |n: &Nid| Ipv4Addr::from(n.addr_u32().unwrap()).to_string();
    let addrs: Vec<&str> = pdu
        .all("lnet.nid.addr")
        .iter()
        .map(|f| f.show.as_str())
        .collect();
    assert_eq!(addrs, [ip(&h.dest_nid), ip(&h.src_nid)]);
    for (f, n) in pdu.all("lnet.nid.type").iter().zip([h.dest_nid, h.src_nid]) {
        assert_eq!(f.show, n.net.lnd.0.to_string());
    }
    // tshark's pid labels are swapped (spec tshark.md).
    assert_eq!(shown(pdu, "lnet.src_pid"), u64::from(h.dest_pid));
    assert_eq!(shown(pdu, "lnet.dest_pid"), u64::from(h.src_pid));
    assert_eq!(shown(pdu, "lnet.msg_type"), h.msg_type() as u64);
    assert_eq!(
        shown(pdu, "lnet.payload_length"),
        u64::from(h.payload_length)
    );
    assert_eq!(
        shown(pdu, "lnet.ksm_zc_req_cookie"),
        0,
        "we never ask for ZC"
    );
    let wmd = |w: &WireHandle| {
        assert_eq!(
            pdu.le("lnet.msg_dst_interface_cookie").unwrap(),
            w.interface_cookie
        );
        assert_eq!(
            pdu.le("lnet.msg_dst_object_cookie").unwrap(),
            w.object_cookie
        );
    };
    match h.msg {
        Message::Put {
            ack_wmd,
            match_bits,
            hdr_data,
            ptl_index,
            offset,
        } => {
            wmd(&ack_wmd);
            assert_eq!(shown(pdu, "lnet.msg_dst_match_bits"), match_bits);
            assert_eq!(shown(pdu, "lnet.msg_hdr_data"), hdr_data);
            assert_eq!(shown(pdu, "lnet.ptl_index"), u64::from(ptl_index));
            assert_eq!(shown(pdu, "lnet.offset"), u64::from(offset));
            if !payload.is_empty() {
                assert!(pdu.one("data.data").unwrap().raw == payload);
            }
        }
        Message::Get {
            return_wmd,
            match_bits,
            ptl_index,
            src_offset,
            sink_length,
        } => {
            wmd(&return_wmd);
            assert_eq!(shown(pdu, "lnet.msg_dst_match_bits"), match_bits);
            assert_eq!(shown(pdu, "lnet.ptl_index"), u64::from(ptl_index));
            assert_eq!(shown(pdu, "lnet.src_offset"), u64::from(src_offset));
            assert_eq!(shown(pdu, "lnet.sink_length"), u64::from(sink_length));
        }
        Message::Ack {
            dst_wmd,
            match_bits,
            mlength,
        } => {
            wmd(&dst_wmd);
            assert_eq!(shown(pdu, "lnet.msg_dst_match_bits"), match_bits);
            assert_eq!(shown(pdu, "lnet.msg_length"), u64::from(mlength));
        }
        Message::Reply { dst_wmd } => {
            wmd(&dst_wmd);
            assert_eq!(pdu.one("lnet.payload").unwrap().size, payload.len());
        }
        Message::Hello { .. } => panic!("HELLO after the handshake"),
    }
}

/// The spec's worked example layout (7.1), written out here byte by byte.
fn expected_connreq(target: Nid) -> Vec<u8> {
    let mut b = vec![0x00, 0x71, 0xce, 0xac, 0x01, 0x00, 0x00, 0x00];
    b.extend_from_slice(&target.to_nid4().unwrap().to_le_bytes());
    b
}

fn check_hello(bytes: &[u8], src: Nid, dst: Nid) -> u32 {
    assert_eq!(&bytes[0..4], &[0x63, 0x69, 0x72, 0x45], "HELLO magic");
    assert_eq!(&bytes[4..8], &[0x03, 0, 0, 0], "HELLO version 3");
    assert_eq!(
        &bytes[8..16],
        &src.to_nid4().unwrap().to_le_bytes(),
        "src_nid"
    );
    assert_eq!(
        &bytes[16..24],
        &dst.to_nid4().unwrap().to_le_bytes(),
        "dst_nid"
    );
    assert_eq!(&bytes[24..28], &[0x39, 0x30, 0, 0], "src_pid 12345");
    assert_eq!(&bytes[28..32], &[0, 0, 0, 0], "dst_pid 0");
    assert_ne!(&bytes[32..40], &[0u8; 8], "src_incarnation set");
    assert_eq!(&bytes[40..48], &[0u8; 8], "dst_incarnation 0");
    assert_eq!(&bytes[52..56], &[0, 0, 0, 0], "nips 0");
    u32::from_le_bytes(bytes[48..52].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tshark_decodes_what_socklnd_sends() {
    assert!(
        tshark::tools_present(),
        "tshark and text2pcap are needed: run scripts/install-test-deps"
    );
    let capture = tokio::task::spawn_blocking(|| LiveCapture::start(PORT))
        .await
        .unwrap()
        .unwrap();
    let mut a = node([127, 0, 0, 1]).await;
    let mut b = node([127, 0, 0, 2]).await;
    let (an, bn) = (a.lnd.nid(), b.lnd.nid());
    let wmd = |n: u64| WireHandle {
        interface_cookie: 0x18EA_0000_0000_0000 | n,
        object_cookie: n,
    };
    let put = |mb: u64, payload: Bytes| {
        let h = header(
            an,
            bn,
            Message::Put {
                ack_wmd: wmd(mb),
                match_bits: mb,
                hdr_data: 0xAA00 | mb,
                ptl_index: PORTAL,
                offset: 0,
            },
            payload.len(),
        );
        (h, payload)
    };
    let requests = vec![
        put(1, Bytes::new()),
        put(2, pattern(4096, 2)),
        put(3, pattern(1 << 20, 3)),
        (
            header(
                an,
                bn,
                Message::Get {
                    return_wmd: wmd(4),
                    match_bits: 4,
                    ptl_index: PORTAL,
                    src_offset: 0,
                    sink_length: 8192,
                },
                0,
            ),
            Bytes::new(),
        ),
    ];
    let ack = |mb: u64, len: usize| {
        let h = header(
            bn,
            an,
            Message::Ack {
                dst_wmd: wmd(mb),
                match_bits: mb,
                mlength: len as u32,
            },
            0,
        );
        (h, Bytes::new())
    };
    let reply_data = pattern(3000, 9);
    let answers = vec![
        ack(1, 0),
        ack(2, 4096),
        ack(3, 1 << 20),
        (
            header(bn, an, Message::Reply { dst_wmd: wmd(4) }, reply_data.len()),
            reply_data,
        ),
    ];
    exchange(&a, &mut b, &requests, 1).await;
    exchange(&b, &mut a, &answers, 100).await;
    for _ in 0..requests.len() {
        assert!(next(&mut a.done).await.status.is_ok());
    }
    for _ in 0..answers.len() {
        assert!(next(&mut b.done).await.status.is_ok());
    }
    a.lnd.stop().await;
    b.lnd.stop().await;
    let file = tokio::task::spawn_blocking(move || capture.stop())
        .await
        .unwrap()
        .unwrap();

    // Every LNet message as sent; any other PDU can only be a keepalive NOOP.
    let pdus = file.pdus(&[PORTAL]).unwrap();
    let (lnet, noops): (Vec<&Pdu>, Vec<&Pdu>) =
        pdus.iter().partition(|p| shown(p, "lnet.ksm_type") == 0xC1);
    for n in &noops {
        assert_eq!(shown(n, "lnet.ksm_zc_ack_cookie"), 1, "only keepalives");
    }
    let sent: Vec<&(Header, Bytes)> = requests.iter().chain(&answers).collect();
    assert_eq!(lnet.len(), sent.len(), "LNet PDUs tshark found");
    for (h, payload) in &sent {
        let pdu = lnet
            .iter()
            .find(|p| {
                shown(p, "lnet.msg_type") == h.msg_type() as u64
                    && p.le("lnet.msg_dst_object_cookie").ok()
                        == Some(match h.msg {
                            Message::Put { ack_wmd: w, .. }
                            | Message::Get { return_wmd: w, .. }
                            | Message::Ack { dst_wmd: w, .. }
                            | Message::Reply { dst_wmd: w } => w.object_cookie,
                            Message::Hello { .. } => 0,
                        })
            })
            .unwrap_or_else(|| panic!("tshark did not find {h:?}"));
        check(pdu, h, payload);
    }

    // Each connection's handshake, byte for byte in the spec's layout.
    let streams: Vec<_> = file
        .streams()
        .unwrap()
        .into_iter()
        .filter(|s| !s.to_server.is_empty())
        .collect();
    let mut ctypes = Vec::new();
    for s in &streams {
        assert!(
            (512..=1023).contains(&s.client_port),
            "connection from unreserved port {}",
            s.client_port
        );
        // Which NI connected: the acceptor request names the other one.
        let (connector, acceptor) = if s.to_server[..16] == expected_connreq(bn)[..] {
            (an, bn)
        } else {
            assert_eq!(
                s.to_server[..16],
                expected_connreq(an)[..],
                "acceptor request"
            );
            (bn, an)
        };
        let mine = check_hello(&s.to_server[16..72], connector, acceptor);
        let theirs = check_hello(&s.to_client[..56], acceptor, connector);
        let inverted = match mine {
            2 => 3,
            3 => 2,
            other => other,
        };
        assert_eq!(theirs, inverted, "reply ctype is the inverse");
        ctypes.push((connector, mine));
    }
    // A dialled B once per connection type; B answered on those connections (they carry
    // both directions), so it opened none of its own.
    for n in [an, bn] {
        let mut mine: Vec<u32> = ctypes
            .iter()
            .filter(|(c, _)| *c == n)
            .map(|(_, t)| *t)
            .collect();
        mine.sort_unstable();
        let expected: &[u32] = if n == an { &[1, 2, 3] } else { &[] };
        assert_eq!(mine, expected, "connections {n} opened");
    }
}
