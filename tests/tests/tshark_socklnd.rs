//! tshark's LNet dissector decodes a socklnd session written by our encoders, field for
//! field, with no byte after the handshake left undecoded.
//!
//! The session has every message kind (NOOP keepalive, ZC-ACK NOOP, PUT with and without
//! payload, GET, ACK, REPLY with data and with ping info), several frames in one TCP
//! segment, and one frame split over three segments. tshark's quirks (spec tshark.md):
//! the two pid labels are swapped, the ksock checksum is named `lnet.ib_csum`, and the
//! acceptor request and HELLO are not decoded (they go in segments of their own), and the
//! dissector chooses one PDU length rule per TCP segment from the segment's first word:
//! in a segment that starts with a NOOP every PDU is read as a 24-byte NOOP, in one that
//! starts with an LNET frame every PDU is read as LNET. Segments that mix the two are
//! therefore not decodable by tshark 4.0 whoever wrote them; the session puts several
//! LNET frames in one segment and several NOOPs in another.

#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use lnd::socklnd::wire::frame::{encode_lnet, encode_noop};
use lnd::socklnd::wire::{ByteOrder, ConnType, Hello, KsockHeader, KsockType, ProtoVersion};
use lnet::nid::PID_LUSTRE;
use lnet::ping::{Features, NiStatus, PingInfo, PING_MATCHBITS};
use lnet::{AcceptorRequest, Header, HeaderForm, Message, Nid, ProcessId, WireHandle};
use lnet_router_tests::tshark::{self, Dir, Pdu, Segment};

/// A portal of ours whose PUT payloads tshark shows as `data.data`.
const DATA_PORTAL: u32 = 42;

/// One frame as we sent it.
#[derive(Clone)]
struct Sent {
    dir: Dir,
    ksock: KsockHeader,
    lnet: Option<(Header, Vec<u8>)>,
}

impl Sent {
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match &self.lnet {
            None => encode_noop(&self.ksock, ByteOrder::Little, &mut out).unwrap(),
            Some((h, payload)) => encode_lnet(
                &self.ksock,
                h,
                HeaderForm::Nid4,
                payload,
                ByteOrder::Little,
                &mut out,
            )
            .unwrap(),
        }
        out
    }
}

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn client() -> Nid {
    nid("10.0.0.2@tcp")
}

fn server() -> Nid {
    nid("10.0.0.1@tcp")
}

fn header(dir: Dir, msg: Message, payload_length: u32) -> Header {
    let (src, dest) = match dir {
        Dir::ToServer => (client(), server()),
        Dir::ToClient => (server(), client()),
    };
    Header {
        dest_nid: dest,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length,
        msg,
    }
}

fn lnet(dir: Dir, msg: Message, payload: Vec<u8>, zc_request: u64) -> Sent {
    let mut ksock = KsockHeader::lnet();
    ksock.zc_cookies[0] = zc_request;
    Sent {
        dir,
        ksock,
        lnet: Some((header(dir, msg, payload.len() as u32), payload)),
    }
}

fn noop(dir: Dir, ksock: KsockHeader) -> Sent {
    Sent {
        dir,
        ksock,
        lnet: None,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The frames of the session, grouped into TCP segments (a group of several frames is
/// one segment; a frame alone may be split into several segments at the given cuts).
fn session() -> (Vec<Segment>, Vec<Sent>) {
    let put_wmd = WireHandle {
        interface_cookie: 0x18EA_3A85_3E41_78AE,
        object_cookie: 0x19,
    };
    let get_wmd = WireHandle {
        interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
        object_cookie: 0x405,
    };
    let ping_wmd = WireHandle {
        interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
        object_cookie: 0x409,
    };
    let ping_info = PingInfo::new(
        PID_LUSTRE,
        2,
        Features::NI_STATUS | Features::MULTI_RAIL | Features::DISCOVERY,
        vec![NiStatus::up(server())],
    )
    .encode()
    .unwrap();

    let put_4k = lnet(
        Dir::ToServer,
        Message::Put {
            ack_wmd: put_wmd,
            match_bits: 0x1122_3344_5566_7788,
            hdr_data: 0xAABB_CCDD,
            ptl_index: DATA_PORTAL,
            offset: 512,
        },
        pattern(4096, 1),
        7,
    );
    let zc_ack = noop(Dir::ToClient, KsockHeader::zc_ack(7));
    let ack = lnet(
        Dir::ToClient,
        Message::Ack {
            dst_wmd: put_wmd,
            match_bits: 0x1122_3344_5566_7788,
            mlength: 4096,
        },
        Vec::new(),
        0,
    );
    let get = lnet(
        Dir::ToServer,
        Message::Get {
            return_wmd: get_wmd,
            match_bits: 0x99,
            ptl_index: DATA_PORTAL,
            src_offset: 64,
            sink_length: 8192,
        },
        Vec::new(),
        0,
    );
    let reply = lnet(
        Dir::ToClient,
        Message::Reply { dst_wmd: get_wmd },
        pattern(3000, 7),
        0,
    );
    let keepalive = noop(Dir::ToServer, KsockHeader::keepalive());
    let keepalive_back = noop(Dir::ToClient, KsockHeader::keepalive());
    let put_empty = lnet(
        Dir::ToServer,
        Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 3,
            hdr_data: 0,
            ptl_index: DATA_PORTAL,
            offset: 0,
        },
        Vec::new(),
        0,
    );
    let ping = lnet(
        Dir::ToServer,
        Message::Get {
            return_wmd: ping_wmd,
            match_bits: PING_MATCHBITS,
            ptl_index: 0,
            src_offset: 0,
            sink_length: 272,
        },
        Vec::new(),
        0,
    );
    let ping_reply = lnet(
        Dir::ToClient,
        Message::Reply { dst_wmd: ping_wmd },
        ping_info,
        0,
    );

    let hello = Hello::new(
        ProtoVersion::V3,
        ProcessId::lustre(client()),
        server(),
        0x17D4_B84D_484D_0000,
        ConnType::Control,
    );
    let hello_reply = hello.reply(
        ProcessId::lustre(server()),
        0x17D4_B86A_06E6_1A08,
        ConnType::Control,
    );

    let mut segments = vec![
        Segment {
            dir: Dir::ToServer,
            bytes: AcceptorRequest::new(server()).unwrap().encode().unwrap(),
        },
        Segment {
            dir: Dir::ToServer,
            bytes: hello.encode().unwrap(),
        },
        Segment {
            dir: Dir::ToClient,
            bytes: hello_reply.encode().unwrap(),
        },
    ];
    let mut frames = Vec::new();
    let mut group = |sent: &[&Sent], cuts: &[usize]| {
        let dir = sent[0].dir;
        let bytes: Vec<u8> = sent.iter().flat_map(|s| s.bytes()).collect();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
            segments.push(Segment {
                dir,
                bytes: bytes[start..cut].to_vec(),
            });
            start = cut;
        }
        frames.extend(sent.iter().map(|s| (*s).clone()));
    };
    group(&[&keepalive], &[]);
    group(&[&put_4k], &[]);
    group(&[&zc_ack, &keepalive_back], &[]);
    group(&[&ack], &[]);
    group(&[&get], &[]);
    group(&[&reply], &[50, 1050]);
    group(&[&put_empty, &get, &ping], &[]);
    group(&[&keepalive], &[]);
    group(&[&ping_reply], &[]);
    (segments, frames)
}

/// tshark's shown value as a number (decimal, or hex with 0x).
fn shown(pdu: &Pdu, name: &str) -> u64 {
    let text = &pdu.one(name).unwrap().show;
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => text
            .parse()
            .unwrap_or_else(|_| panic!("{name} shows {text:?}")),
    }
}

/// Checks that tshark's view of one PDU is exactly what was sent.
fn check(pdu: &Pdu, sent: &Sent, index: usize) {
    let ctx = format!("PDU {index} ({:?})", sent.dir);
    assert_eq!(pdu.dir, sent.dir, "{ctx}: direction");
    let ksm_type = match sent.ksock.msg_type {
        KsockType::Noop => 0xC0,
        KsockType::Lnet => 0xC1,
    };
    assert_eq!(shown(pdu, "lnet.ksm_type"), ksm_type, "{ctx}: ksm_type");
    assert_eq!(
        shown(pdu, "lnet.ib_csum"),
        u64::from(sent.ksock.csum),
        "{ctx}: csum"
    );
    assert_eq!(
        shown(pdu, "lnet.ksm_zc_req_cookie"),
        sent.ksock.zc_cookies[0],
        "{ctx}: zc request cookie"
    );
    assert_eq!(
        shown(pdu, "lnet.ksm_zc_ack_cookie"),
        sent.ksock.zc_cookies[1],
        "{ctx}: zc ack cookie"
    );
    let Some((h, payload)) = &sent.lnet else {
        assert_eq!(pdu.fields.len(), 4, "{ctx}: a NOOP has 4 fields");
        return;
    };
    // NIDs: tshark's own reading of address, net number and LND type, dest first.
    let addrs: Vec<_> = pdu
        .all("lnet.nid.addr")
        .iter()
        .map(|f| f.show.clone())
        .collect();
    let nets: Vec<_> = pdu.all("lnet.nid.net_interface");
    let types: Vec<_> = pdu.all("lnet.nid.type");
    for (i, n) in [h.dest_nid, h.src_nid].iter().enumerate() {
        let ip = std::net::Ipv4Addr::from(n.addr_u32().unwrap()).to_string();
        assert_eq!(addrs[i], ip, "{ctx}: nid {i} address");
        assert_eq!(nets[i].show, n.net.num.to_string(), "{ctx}: nid {i} net");
        assert_eq!(
            types[i].show,
            n.net.lnd.0.to_string(),
            "{ctx}: nid {i} type"
        );
    }
    // tshark labels the first pid (dest) src_pid and the second (src) dest_pid.
    assert_eq!(
        shown(pdu, "lnet.src_pid"),
        u64::from(h.dest_pid),
        "{ctx}: dest_pid"
    );
    assert_eq!(
        shown(pdu, "lnet.dest_pid"),
        u64::from(h.src_pid),
        "{ctx}: src_pid"
    );
    assert_eq!(
        shown(pdu, "lnet.msg_type"),
        h.msg_type() as u64,
        "{ctx}: type"
    );
    assert_eq!(
        shown(pdu, "lnet.payload_length"),
        u64::from(h.payload_length),
        "{ctx}: payload_length"
    );
    let cookies = |wmd: &WireHandle| {
        assert_eq!(
            pdu.le("lnet.msg_dst_interface_cookie").unwrap(),
            wmd.interface_cookie,
            "{ctx}: interface cookie"
        );
        assert_eq!(
            pdu.le("lnet.msg_dst_object_cookie").unwrap(),
            wmd.object_cookie,
            "{ctx}: object cookie"
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
            cookies(&ack_wmd);
            assert_eq!(shown(pdu, "lnet.msg_dst_match_bits"), match_bits, "{ctx}");
            assert_eq!(shown(pdu, "lnet.msg_hdr_data"), hdr_data, "{ctx}");
            assert_eq!(shown(pdu, "lnet.ptl_index"), u64::from(ptl_index), "{ctx}");
            assert_eq!(shown(pdu, "lnet.offset"), u64::from(offset), "{ctx}");
            if !payload.is_empty() {
                assert!(
                    pdu.one("data.data").unwrap().raw == *payload,
                    "{ctx}: payload bytes differ"
                );
            }
        }
        Message::Get {
            return_wmd,
            match_bits,
            ptl_index,
            src_offset,
            sink_length,
        } => {
            cookies(&return_wmd);
            assert_eq!(shown(pdu, "lnet.msg_dst_match_bits"), match_bits, "{ctx}");
            assert_eq!(shown(pdu, "lnet.ptl_index"), u64::from(ptl_index), "{ctx}");
            assert_eq!(
                shown(pdu, "lnet.src_offset"),
                u64::from(src_offset),
                "{ctx}"
            );
            assert_eq!(
                shown(pdu, "lnet.sink_length"),
                u64::from(sink_length),
                "{ctx}"
            );
        }
        Message::Ack {
            dst_wmd,
            match_bits,
            mlength,
        } => {
            // tshark shows ACK cookies big-endian; the raw bytes are what counts.
            cookies(&dst_wmd);
            assert_eq!(shown(pdu, "lnet.msg_dst_match_bits"), match_bits, "{ctx}");
            assert_eq!(shown(pdu, "lnet.msg_length"), u64::from(mlength), "{ctx}");
        }
        Message::Reply { dst_wmd } => {
            cookies(&dst_wmd);
            // tshark delimits a REPLY payload without showing its bytes.
            assert_eq!(
                pdu.one("lnet.payload").unwrap().size,
                payload.len(),
                "{ctx}: payload size"
            );
        }
        Message::Hello { .. } => panic!("{ctx}: HELLO is not sent after the handshake"),
    }
}

#[test]
fn tshark_decodes_every_socklnd_frame_we_encode() {
    assert!(
        tshark::tools_present(),
        "tshark and text2pcap are needed: run scripts/install-test-deps"
    );
    let (segments, frames) = session();
    let pdus = tshark::decode_session(&segments, &[DATA_PORTAL]).unwrap();

    // Same messages, same order, same direction.
    assert_eq!(
        pdus.len(),
        frames.len(),
        "tshark found {} PDUs, we sent {} frames",
        pdus.len(),
        frames.len()
    );
    for (i, (pdu, sent)) in pdus.iter().zip(&frames).enumerate() {
        check(pdu, sent, i);
    }

    // No byte after the handshake is left undecoded: in each direction the PDU lengths
    // tshark saw add up to every byte we sent after the HELLOs.
    for dir in [Dir::ToServer, Dir::ToClient] {
        let handshake = match dir {
            Dir::ToServer => 2,
            Dir::ToClient => 1,
        };
        let sent: usize = segments
            .iter()
            .filter(|s| s.dir == dir)
            .skip(handshake)
            .map(|s| s.bytes.len())
            .sum();
        let decoded: u64 = pdus
            .iter()
            .filter(|p| p.dir == dir)
            .map(|p| match shown(p, "lnet.ksm_type") {
                0xC0 => 24,
                _ => 24 + 72 + shown(p, "lnet.payload_length"),
            })
            .sum();
        assert_eq!(decoded, sent as u64, "{dir:?}: bytes decoded vs sent");
    }
}
