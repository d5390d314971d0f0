//! Codec tests of `kib_msg`: kernel captures, round trips, and malformed input.

use super::*;
use crate::o2iblnd::wire::rdma::RdmaFrag;
use crate::o2iblnd::wire::IBLND_MAX_RDMA_FRAGS;
use lnet::{LndType, Message, Net, NidAddr, WireHandle};
use proptest::prelude::*;
use std::net::Ipv4Addr;

/// Bytes from a hex dump in the layout of kernel-observations.md (`0000: 91 1b ...`).
fn dump(text: &str) -> Vec<u8> {
    let hex: String = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(_, rest)| rest))
        .flat_map(|rest| rest.split_whitespace())
        .collect();
    hex::decode(hex).unwrap()
}

fn o2ib(ip: [u8; 4]) -> Nid {
    Nid::from_ipv4(Net::new(LndType::O2IBLND, 0), Ipv4Addr::from(ip))
}

const KERNEL_A_STAMP: u64 = 0x0006_60d3_a38e_e09b;
const KERNEL_B_STAMP: u64 = 0x0006_60d3_a393_d764;

// kernel-observations.md, "o2ib captures": CONNREQ private data.
const CONNREQ: &str = "
0000: 91 1b e9 0b 12 00 c0 00 38 00 00 00 00 00 00 00
0010: 01 00 00 0a 00 00 05 00 9b e0 8e a3 d3 60 06 00
0020: 02 00 00 0a 00 00 05 00 00 00 00 00 00 00 00 00
0030: 08 00 01 01 00 10 00 00
";

// CONNACK private data.
const CONNACK: &str = "
0000: 91 1b e9 0b 12 00 c1 00 38 00 00 00 00 00 00 00
0010: 02 00 00 0a 00 00 05 00 64 d7 93 a3 d3 60 06 00
0020: 01 00 00 0a 00 00 05 00 9b e0 8e a3 d3 60 06 00
0030: 08 00 01 01 00 10 00 00
";

// IMMEDIATE carrying a ping GET.
const IMMEDIATE_GET: &str = "
0000: 91 1b e9 0b 12 00 d1 00 78 00 00 00 00 00 00 00
0010: 01 00 00 0a 00 00 05 00 9b e0 8e a3 d3 60 06 00
0020: 02 00 00 0a 00 00 05 00 64 d7 93 a3 d3 60 06 00
0030: 02 00 00 0a 00 00 05 00 01 00 00 0a 00 00 05 00
0040: 39 30 00 00 39 30 00 00 02 00 00 00 00 00 00 00
0050: 4a e6 2e d9 b6 3a ea 18 11 00 00 00 00 00 00 00
0060: 00 00 00 00 00 00 00 80 00 00 00 00 00 00 00 00
0070: 78 0f 00 00 00 00 00 00
";

// IMMEDIATE carrying the REPLY with ping info.
const IMMEDIATE_REPLY: &str = "
0000: 91 1b e9 0b 12 00 d1 01 b8 00 00 00 00 00 00 00
0010: 02 00 00 0a 00 00 05 00 64 d7 93 a3 d3 60 06 00
0020: 01 00 00 0a 00 00 05 00 9b e0 8e a3 d3 60 06 00
0030: 01 00 00 0a 00 00 05 00 02 00 00 0a 00 00 05 00
0040: 39 30 00 00 39 30 00 00 03 00 00 00 40 00 00 00
0050: 4a e6 2e d9 b6 3a ea 18 11 00 00 00 00 00 00 00
0060: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0070: 00 00 00 00 00 00 00 00 67 6e 69 70 1e 00 00 00
0080: 39 30 00 00 03 00 00 00 00 00 00 00 00 00 09 00
0090: 03 00 00 00 00 00 00 00 01 00 00 0a 00 00 05 00
00a0: de c0 aa 15 00 00 00 00 02 00 00 0a 00 00 05 00
00b0: de c0 aa 15 00 00 00 00
";

/// Decodes, checks the fields with `expect`, and re-encodes to the same bytes.
fn both_ways(text: &str, expect: &KibMsg) {
    let bytes = dump(text);
    let got = KibMsg::unpack(&bytes).unwrap();
    assert_eq!(&got.msg, expect);
    assert_eq!(got.byte_order, ByteOrder::Little);
    assert_eq!(got.cksum, 0);
    assert_eq!(expect.encode().unwrap(), bytes);
    assert_eq!(expect.nob(), bytes.len());
    // Zero-copy decode agrees.
    assert_eq!(
        KibMsg::unpack_bytes(&Bytes::from(bytes)).unwrap().msg,
        *expect
    );
}

fn capture_connreq() -> KibMsg {
    KibMsg {
        version: Version::V2,
        credits: 0,
        srcnid: o2ib([10, 0, 0, 1]),
        srcstamp: KERNEL_A_STAMP,
        dstnid: o2ib([10, 0, 0, 2]),
        dststamp: 0,
        body: Body::ConnReq(ConnParams {
            queue_depth: 8,
            max_frags: 257,
            max_msg_size: 4096,
        }),
    }
}

#[test]
fn capture_connreq_both_ways() {
    let m = capture_connreq();
    both_ways(CONNREQ, &m);
    assert_eq!(m.nob(), crate::o2iblnd::wire::IBLND_CONN_PRIVATE_DATA_BYTES);
}

#[test]
fn capture_connack_both_ways() {
    both_ways(
        CONNACK,
        &KibMsg {
            version: Version::V2,
            credits: 0,
            srcnid: o2ib([10, 0, 0, 2]),
            srcstamp: KERNEL_B_STAMP,
            dstnid: o2ib([10, 0, 0, 1]),
            dststamp: KERNEL_A_STAMP,
            body: Body::ConnAck(ConnParams::DEFAULT),
        },
    );
}

const PING_WMD: WireHandle = WireHandle {
    interface_cookie: 0x18ea_3ab6_d92e_e64a,
    object_cookie: 0x11,
};

#[test]
fn capture_immediate_get_both_ways() {
    let hdr = Header {
        dest_nid: o2ib([10, 0, 0, 2]),
        src_nid: o2ib([10, 0, 0, 1]),
        dest_pid: 12345,
        src_pid: 12345,
        payload_length: 0,
        msg: Message::Get {
            return_wmd: PING_WMD,
            match_bits: 1 << 63,
            ptl_index: 0,
            src_offset: 0,
            sink_length: 3960,
        },
    };
    let m = KibMsg {
        version: Version::V2,
        credits: 0,
        srcnid: o2ib([10, 0, 0, 1]),
        srcstamp: KERNEL_A_STAMP,
        dstnid: o2ib([10, 0, 0, 2]),
        dststamp: KERNEL_B_STAMP,
        body: Body::Immediate {
            hdr,
            payload: Bytes::new(),
        },
    };
    both_ways(IMMEDIATE_GET, &m);
    // The fields the brief names, read back from the decoded capture.
    let got = KibMsg::decode(&dump(IMMEDIATE_GET)).unwrap();
    let Body::Immediate { hdr, payload } = got.body else {
        panic!("not IMMEDIATE");
    };
    assert_eq!(hdr.dest_nid.to_string(), "10.0.0.2@o2ib");
    assert_eq!(hdr.src_nid.to_string(), "10.0.0.1@o2ib");
    assert_eq!(hdr.msg_type(), lnet::MsgType::Get);
    let Message::Get {
        match_bits,
        sink_length,
        ..
    } = hdr.msg
    else {
        panic!("not GET");
    };
    assert_eq!(match_bits, 1 << 63);
    assert_eq!(sink_length, 3960);
    assert!(payload.is_empty());
}

#[test]
fn capture_immediate_reply_both_ways() {
    let bytes = dump(IMMEDIATE_REPLY);
    assert_eq!(bytes.len(), 184);
    let m = KibMsg {
        version: Version::V2,
        credits: 1,
        srcnid: o2ib([10, 0, 0, 2]),
        srcstamp: KERNEL_B_STAMP,
        dstnid: o2ib([10, 0, 0, 1]),
        dststamp: KERNEL_A_STAMP,
        body: Body::Immediate {
            hdr: Header {
                dest_nid: o2ib([10, 0, 0, 1]),
                src_nid: o2ib([10, 0, 0, 2]),
                dest_pid: 12345,
                src_pid: 12345,
                payload_length: 64,
                msg: Message::Reply { dst_wmd: PING_WMD },
            },
            payload: Bytes::copy_from_slice(&bytes[120..]),
        },
    };
    both_ways(IMMEDIATE_REPLY, &m);
    let Body::Immediate { payload, .. } = KibMsg::decode(&bytes).unwrap().body else {
        panic!("not IMMEDIATE");
    };
    assert_eq!(payload.len(), 64);
    assert_eq!(&payload[..4], b"gnip"); // ping info magic 0x70696e67, little-endian
}

#[test]
fn connreq_private_data_layout() {
    let m = KibMsg {
        version: Version::V2,
        credits: 0x5a,
        srcnid: Nid::new(Net::new(LndType::O2IBLND, 3), 0x0a0b_0c0d),
        srcstamp: 0x1112_1314_1516_1718,
        dstnid: Nid::new(Net::new(LndType::O2IBLND, 4), 0xc0a8_0001),
        dststamp: 0x2122_2324_2526_2728,
        body: Body::ConnReq(ConnParams {
            queue_depth: 0x3132,
            max_frags: 0x0101,
            max_msg_size: 0x4142_4344,
        }),
    };
    let b = m.encode().unwrap();
    assert_eq!(b.len(), 56);
    let field = |at: usize, n: usize| b[at..at + n].to_vec();
    assert_eq!(field(0, 4), IBLND_MSG_MAGIC.to_le_bytes()); // ibm_magic
    assert_eq!(field(4, 2), 0x12u16.to_le_bytes()); // ibm_version
    assert_eq!(field(6, 1), [0xc0]); // ibm_type
    assert_eq!(field(7, 1), [0x5a]); // ibm_credits
    assert_eq!(field(8, 4), 56u32.to_le_bytes()); // ibm_nob
    assert_eq!(field(12, 4), [0; 4]); // ibm_cksum
    assert_eq!(field(16, 8), 0x0005_0003_0a0b_0c0du64.to_le_bytes()); // ibm_srcnid
    assert_eq!(field(24, 8), 0x1112_1314_1516_1718u64.to_le_bytes()); // ibm_srcstamp
    assert_eq!(field(32, 8), 0x0005_0004_c0a8_0001u64.to_le_bytes()); // ibm_dstnid
    assert_eq!(field(40, 8), 0x2122_2324_2526_2728u64.to_le_bytes()); // ibm_dststamp
    assert_eq!(field(48, 2), 0x3132u16.to_le_bytes()); // ibcp_queue_depth
    assert_eq!(field(50, 2), 0x0101u16.to_le_bytes()); // ibcp_max_frags
    assert_eq!(field(52, 4), 0x4142_4344u32.to_le_bytes()); // ibcp_max_msg_size
}

#[test]
fn body_offsets() {
    let base = capture_connreq();
    let hdr = Header::decode(&dump(IMMEDIATE_GET)[48..], HeaderForm::Nid4).unwrap();
    let with = |body| KibMsg {
        body,
        ..base.clone()
    };
    let c = Completion {
        cookie: Cookie(0x0102_0304_0506_0708),
        status: -61,
    };
    let b = with(Body::PutDone(c)).encode().unwrap();
    assert_eq!(b.len(), 60);
    assert_eq!(&b[48..56], &c.cookie.0.to_le_bytes());
    assert_eq!(&b[56..60], &(-61i32).to_le_bytes());

    let b = with(Body::PutReq {
        hdr,
        cookie: Cookie(0xabcd),
    })
    .encode()
    .unwrap();
    assert_eq!(b.len(), 128);
    assert_eq!(&b[48..120], &hdr.encode_nid4().unwrap());
    assert_eq!(&b[120..128], &0xabcdu64.to_le_bytes());

    let rd = RdmaDesc::single(0x77, 0x1000, 0x2000);
    let b = with(Body::PutAck {
        src_cookie: Cookie(1),
        dst_cookie: Cookie(2),
        rd: rd.clone(),
    })
    .encode()
    .unwrap();
    assert_eq!(b.len(), 84);
    assert_eq!(&b[48..56], &1u64.to_le_bytes());
    assert_eq!(&b[56..64], &2u64.to_le_bytes());
    assert_eq!(&b[64..68], &0x77u32.to_le_bytes());
    assert_eq!(&b[68..72], &1u32.to_le_bytes());
    assert_eq!(&b[72..76], &0x2000u32.to_le_bytes());
    assert_eq!(&b[76..84], &0x1000u64.to_le_bytes());

    let b = with(Body::GetReq {
        hdr,
        cookie: Cookie(3),
        rd,
    })
    .encode()
    .unwrap();
    assert_eq!(b.len(), 148);
    assert_eq!(&b[120..128], &3u64.to_le_bytes());
    assert_eq!(&b[128..132], &0x77u32.to_le_bytes());

    let b = with(Body::Noop).encode().unwrap();
    assert_eq!(b.len(), 48);
    assert_eq!(b[6], 0xd0);
}

#[test]
fn min_sizes_match_the_table() {
    let table = [
        (MsgType::ConnReq, 0xc0, 56),
        (MsgType::ConnAck, 0xc1, 56),
        (MsgType::Noop, 0xd0, 48),
        (MsgType::Immediate, 0xd1, 120),
        (MsgType::PutReq, 0xd2, 128),
        (MsgType::PutNak, 0xd3, 60),
        (MsgType::PutAck, 0xd4, 72),
        (MsgType::PutDone, 0xd5, 60),
        (MsgType::GetReq, 0xd6, 136),
        (MsgType::GetDone, 0xd7, 60),
    ];
    for (t, code, min) in table {
        assert_eq!(t.code(), code);
        assert_eq!(MsgType::from_u8(code), Some(t));
        assert_eq!(t.min_nob(), min, "{t:?}");
    }
    assert_eq!(MsgType::from_u8(0xd8), None);
    assert_eq!(Version::from_u16(0x11), Some(Version::V1));
    assert_eq!(Version::from_u16(0x12), Some(Version::V2));
    assert_eq!(Version::from_u16(0x13), None);
}

#[test]
fn padded_private_data_decodes() {
    // A CONNACK in REP private data can arrive padded; only ibm_nob bytes count.
    let mut b = dump(CONNACK);
    b.resize(196, 0xee);
    let m = KibMsg::decode(&b).unwrap();
    assert_eq!(m.encode().unwrap(), dump(CONNACK));
}

#[test]
fn immediate_payload_limit() {
    let hdr = Header::decode(&dump(IMMEDIATE_REPLY)[48..], HeaderForm::Nid4).unwrap();
    let mut m = capture_connreq();
    m.body = Body::Immediate {
        hdr,
        payload: Bytes::from(vec![0x42; IBLND_MAX_IMMEDIATE]),
    };
    let b = m.encode().unwrap();
    assert_eq!(b.len(), IBLND_MSG_SIZE);
    assert_eq!(KibMsg::decode(&b).unwrap(), m);
    m.body = Body::Immediate {
        hdr,
        payload: Bytes::from(vec![0x42; IBLND_MAX_IMMEDIATE + 1]),
    };
    assert_eq!(
        m.encode(),
        Err(MsgError::PayloadTooLarge {
            max: 3976,
            got: 3977
        })
    );
}

#[test]
fn encode_refuses_what_receivers_refuse() {
    let mut m = capture_connreq();
    m.srcnid = Nid::ANY;
    assert_eq!(m.encode(), Err(MsgError::SrcNidAny));
    let v6 = Nid {
        net: Net::new(LndType::O2IBLND, 0),
        addr: NidAddr::V6([1; 16]),
    };
    let mut m = capture_connreq();
    m.dstnid = v6;
    assert!(matches!(
        m.encode(),
        Err(MsgError::BadNid {
            field: "dstnid",
            source: NidError::NotNid4 { .. }
        })
    ));
    let mut m = capture_connreq();
    m.body = Body::PutAck {
        src_cookie: Cookie(1),
        dst_cookie: Cookie(2),
        rd: RdmaDesc::default(),
    };
    assert_eq!(
        m.encode(),
        Err(MsgError::Rdma {
            msg_type: MsgType::PutAck,
            source: RdmaError::NoFrags { max: 257 }
        })
    );
    let hdr = Header::decode(&dump(IMMEDIATE_GET)[48..], HeaderForm::Nid4).unwrap();
    m.body = Body::Immediate {
        hdr: Header { src_nid: v6, ..hdr },
        payload: Bytes::new(),
    };
    assert!(matches!(
        m.encode(),
        Err(MsgError::Header {
            msg_type: MsgType::Immediate,
            ..
        })
    ));
}

#[test]
fn checksum_on_a_capture() {
    let m = KibMsg::decode(&dump(IMMEDIATE_REPLY)).unwrap();
    let b = m.encode_with_cksum().unwrap();
    let sum = u32::from_le_bytes(b[12..16].try_into().unwrap());
    assert_ne!(sum, 0);
    assert_eq!(sum, cksum::compute(&b));
    let got = KibMsg::unpack(&b).unwrap();
    assert_eq!(got.cksum, sum);
    assert_eq!(got.msg, m);
    let mut bad = b.clone();
    bad[150] ^= 1;
    assert_eq!(
        KibMsg::unpack(&bad),
        Err(MsgError::Cksum(CksumError::Mismatch {
            expected: cksum::compute(&bad),
            got: sum
        }))
    );
}

// ---------------------------------------------------------------------------------
// Malformed input: each unpack check gives its own error, never a panic.

fn le32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn le64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_ack_bytes(nfrags: u32) -> Vec<u8> {
    let mut m = capture_connreq();
    m.body = Body::PutAck {
        src_cookie: Cookie(1),
        dst_cookie: Cookie(2),
        rd: RdmaDesc::single(5, 0x1000, 4096),
    };
    let mut b = m.encode().unwrap();
    le32(&mut b, 68, nfrags);
    b
}

#[test]
fn malformed_table() {
    let good = dump(CONNREQ);
    let imm = dump(IMMEDIATE_GET);
    let with = |base: &[u8], f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = base.to_vec();
        f(&mut b);
        b
    };
    let cases: Vec<(&str, Vec<u8>, MsgError)> = vec![
        (
            "empty",
            vec![],
            MsgError::Truncated {
                expected: 6,
                got: 0,
            },
        ),
        (
            "5 bytes",
            good[..5].to_vec(),
            MsgError::Truncated {
                expected: 6,
                got: 5,
            },
        ),
        (
            "bad magic",
            with(&good, &|b| b[0] = 0x90),
            MsgError::BadMagic {
                expected: IBLND_MSG_MAGIC,
                got: 0x0be9_1b90,
            },
        ),
        (
            "unified protocol magic",
            with(&good, &|b| le32(b, 0, LNET_PROTO_MAGIC)),
            MsgError::BadMagic {
                expected: IBLND_MSG_MAGIC,
                got: LNET_PROTO_MAGIC,
            },
        ),
        (
            "version 0x10",
            with(&good, &|b| b[4] = 0x10),
            MsgError::UnknownVersion { got: 0x10 },
        ),
        (
            "version 0x13",
            with(&good, &|b| b[4] = 0x13),
            MsgError::UnknownVersion { got: 0x13 },
        ),
        (
            "header cut at 47",
            good[..47].to_vec(),
            MsgError::Truncated {
                expected: 48,
                got: 47,
            },
        ),
        (
            "nob beyond buffer",
            with(&good, &|b| le32(b, 8, 57)),
            MsgError::NobExceedsBuffer { nob: 57, got: 56 },
        ),
        (
            "buffer cut short of nob",
            imm[..119].to_vec(),
            MsgError::NobExceedsBuffer { nob: 120, got: 119 },
        ),
        (
            "nob over 4096",
            with(&imm, &|b| {
                b.resize(5000, 0);
                le32(b, 8, 4097);
            }),
            MsgError::TooLarge {
                nob: 4097,
                max: 4096,
            },
        ),
        (
            "bad checksum",
            with(&good, &|b| le32(b, 12, 0x1234_5678)),
            MsgError::Cksum(CksumError::Mismatch {
                expected: cksum::compute(&good),
                got: 0x1234_5678,
            }),
        ),
        (
            "srcnid ANY",
            with(&good, &|b| le64(b, 16, u64::MAX)),
            MsgError::SrcNidAny,
        ),
        (
            "srcnid on a net of type 0xff",
            with(&good, &|b| b[22] = 0xff),
            MsgError::BadNid {
                field: "srcnid",
                source: NidError::WildcardType {
                    raw: 0x00ff_0000_0a00_0001,
                },
            },
        ),
        (
            "unknown type",
            with(&good, &|b| b[6] = 0xd8),
            MsgError::UnknownType { got: 0xd8 },
        ),
        (
            "CONNREQ nob 55",
            with(&good, &|b| le32(b, 8, 55)),
            MsgError::NobTooSmall {
                msg_type: MsgType::ConnReq,
                nob: 55,
                min: 56,
            },
        ),
        (
            "nob below header",
            with(&good, &|b| le32(b, 8, 20)),
            MsgError::NobTooSmall {
                msg_type: MsgType::ConnReq,
                nob: 20,
                min: 56,
            },
        ),
        (
            "IMMEDIATE nob 119",
            with(&imm, &|b| le32(b, 8, 119)),
            MsgError::NobTooSmall {
                msg_type: MsgType::Immediate,
                nob: 119,
                min: 120,
            },
        ),
        (
            "srcnid top byte",
            with(&good, &|b| b[23] = 0x01),
            MsgError::BadNid {
                field: "srcnid",
                source: NidError::TopByteSet {
                    raw: 0x0105_0000_0a00_0001,
                },
            },
        ),
        (
            "dstnid top byte",
            with(&good, &|b| b[39] = 0x80),
            MsgError::BadNid {
                field: "dstnid",
                source: NidError::TopByteSet {
                    raw: 0x8005_0000_0a00_0002,
                },
            },
        ),
        (
            "PUT_ACK 0 frags",
            put_ack_bytes(0),
            MsgError::Rdma {
                msg_type: MsgType::PutAck,
                source: RdmaError::NoFrags { max: 257 },
            },
        ),
        (
            "PUT_ACK 258 frags",
            put_ack_bytes(258),
            MsgError::Rdma {
                msg_type: MsgType::PutAck,
                source: RdmaError::TooManyFrags { max: 257, got: 258 },
            },
        ),
        (
            "PUT_ACK 2 frags, nob covers 1",
            put_ack_bytes(2),
            MsgError::Rdma {
                msg_type: MsgType::PutAck,
                source: RdmaError::FragsNotCovered {
                    nfrags: 2,
                    expected: 32,
                    got: 20,
                },
            },
        ),
        (
            "IMMEDIATE with a bad LNet type",
            with(&imm, &|b| le32(b, 48 + 24, 9)),
            MsgError::Header {
                msg_type: MsgType::Immediate,
                source: HeaderError::UnknownType { value: 9 },
            },
        ),
        (
            "IMMEDIATE with a bad LNet dest NID",
            with(&imm, &|b| b[48 + 7] = 0x10),
            MsgError::Header {
                msg_type: MsgType::Immediate,
                source: HeaderError::BadNid {
                    field: "dest_nid",
                    source: NidError::TopByteSet {
                        raw: 0x1005_0000_0a00_0002,
                    },
                },
            },
        ),
    ];
    for (name, bytes, want) in cases {
        assert_eq!(
            want.is_lnet_proto_magic(),
            name == "unified protocol magic",
            "{name}"
        );
        assert_eq!(KibMsg::unpack(&bytes), Err(want.clone()), "{name}");
        assert_eq!(
            KibMsg::unpack_bytes(&Bytes::from(bytes)),
            Err(want),
            "{name} (Bytes)"
        );
    }
}

#[test]
fn unified_magic_either_order() {
    let mut b = dump(CONNREQ);
    b[..4].copy_from_slice(&LNET_PROTO_MAGIC.to_be_bytes());
    assert!(KibMsg::unpack(&b).unwrap_err().is_lnet_proto_magic());
    b[..4].copy_from_slice(b"cirE");
    assert!(KibMsg::unpack(&b).unwrap_err().is_lnet_proto_magic());
    b[..4].copy_from_slice(&[0; 4]);
    assert!(!KibMsg::unpack(&b).unwrap_err().is_lnet_proto_magic());
}

#[test]
fn get_req_frag_coverage() {
    let hdr = Header::decode(&dump(IMMEDIATE_GET)[48..], HeaderForm::Nid4).unwrap();
    let mut m = capture_connreq();
    m.body = Body::GetReq {
        hdr,
        cookie: Cookie(9),
        rd: RdmaDesc {
            key: 1,
            frags: vec![RdmaFrag { nob: 1, addr: 2 }; 3],
        },
    };
    let mut b = m.encode().unwrap();
    assert_eq!(b.len(), 136 + 36);
    le32(&mut b, 8, 136 + 35);
    assert_eq!(
        KibMsg::unpack(&b),
        Err(MsgError::Rdma {
            msg_type: MsgType::GetReq,
            source: RdmaError::FragsNotCovered {
                nfrags: 3,
                expected: 44,
                got: 43
            }
        })
    );
    le32(&mut b, 8, 135);
    assert_eq!(
        KibMsg::unpack(&b),
        Err(MsgError::NobTooSmall {
            msg_type: MsgType::GetReq,
            nob: 135,
            min: 136
        })
    );
}

// ---------------------------------------------------------------------------------
// Property tests.

/// The same message as a big-endian host writes it: every field of the kib_msg header,
/// connparams, completion status and RDMA descriptor swapped; magic included; the LNet
/// header and cookies left alone.
fn swap_to_be(le: &[u8]) -> Vec<u8> {
    let mut b = le.to_vec();
    let mut flip = |at: usize, n: usize| b[at..at + n].reverse();
    for (at, n) in [
        (0, 4),
        (4, 2),
        (8, 4),
        (12, 4),
        (16, 8),
        (24, 8),
        (32, 8),
        (40, 8),
    ] {
        flip(at, n);
    }
    let rd_at = match le[6] {
        0xc0 | 0xc1 => {
            flip(48, 2);
            flip(50, 2);
            flip(52, 4);
            None
        }
        0xd3 | 0xd5 | 0xd7 => {
            flip(56, 4);
            None
        }
        0xd4 => Some(64),
        0xd6 => Some(128),
        _ => None,
    };
    if let Some(at) = rd_at {
        let n = u32::from_le_bytes(le[at + 4..at + 8].try_into().unwrap()) as usize;
        flip(at, 4);
        flip(at + 4, 4);
        for i in 0..n {
            flip(at + 8 + 12 * i, 4);
            flip(at + 12 + 12 * i, 8);
        }
    }
    b
}

fn arb_nid() -> impl Strategy<Value = Nid> {
    (0u8..0xff, any::<u16>(), any::<u32>())
        .prop_map(|(lnd, num, addr)| Nid::new(Net::new(LndType(lnd), num), addr))
}

fn arb_wmd() -> impl Strategy<Value = WireHandle> {
    any::<(u64, u64)>().prop_map(|(interface_cookie, object_cookie)| WireHandle {
        interface_cookie,
        object_cookie,
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (arb_wmd(), any::<u64>(), any::<u32>()).prop_map(|(dst_wmd, match_bits, mlength)| {
            Message::Ack {
                dst_wmd,
                match_bits,
                mlength,
            }
        }),
        (arb_wmd(), any::<(u64, u64, u32, u32)>()).prop_map(
            |(ack_wmd, (match_bits, hdr_data, ptl_index, offset))| Message::Put {
                ack_wmd,
                match_bits,
                hdr_data,
                ptl_index,
                offset,
            }
        ),
        (arb_wmd(), any::<(u64, u32, u32, u32)>()).prop_map(
            |(return_wmd, (match_bits, ptl_index, src_offset, sink_length))| Message::Get {
                return_wmd,
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
            }
        ),
        arb_wmd().prop_map(|dst_wmd| Message::Reply { dst_wmd }),
        any::<(u64, u32)>().prop_map(|(incarnation, conn_type)| Message::Hello {
            incarnation,
            conn_type,
        }),
    ]
}

fn arb_header() -> impl Strategy<Value = Header> {
    (
        arb_nid(),
        arb_nid(),
        any::<(u32, u32, u32)>(),
        arb_message(),
    )
        .prop_map(
            |(dest_nid, src_nid, (dest_pid, src_pid, payload_length), msg)| Header {
                dest_nid,
                src_nid,
                dest_pid,
                src_pid,
                payload_length,
                msg,
            },
        )
}

fn arb_rd() -> impl Strategy<Value = RdmaDesc> {
    (
        any::<u32>(),
        proptest::collection::vec(
            any::<(u32, u64)>().prop_map(|(nob, addr)| RdmaFrag { nob, addr }),
            1..=usize::from(IBLND_MAX_RDMA_FRAGS),
        ),
    )
        .prop_map(|(key, frags)| RdmaDesc { key, frags })
}

fn arb_completion() -> impl Strategy<Value = Completion> {
    any::<(u64, i32)>().prop_map(|(c, status)| Completion {
        cookie: Cookie(c),
        status,
    })
}

fn arb_connparams() -> impl Strategy<Value = ConnParams> {
    any::<(u16, u16, u32)>().prop_map(|(queue_depth, max_frags, max_msg_size)| ConnParams {
        queue_depth,
        max_frags,
        max_msg_size,
    })
}

fn arb_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        arb_connparams().prop_map(Body::ConnReq),
        arb_connparams().prop_map(Body::ConnAck),
        Just(Body::Noop),
        (
            arb_header(),
            proptest::collection::vec(any::<u8>(), 0..=IBLND_MAX_IMMEDIATE)
        )
            .prop_map(|(hdr, p)| Body::Immediate {
                hdr,
                payload: Bytes::from(p)
            }),
        (arb_header(), any::<u64>()).prop_map(|(hdr, c)| Body::PutReq {
            hdr,
            cookie: Cookie(c)
        }),
        arb_completion().prop_map(Body::PutNak),
        (any::<(u64, u64)>(), arb_rd()).prop_map(|((s, d), rd)| Body::PutAck {
            src_cookie: Cookie(s),
            dst_cookie: Cookie(d),
            rd
        }),
        arb_completion().prop_map(Body::PutDone),
        (arb_header(), any::<u64>(), arb_rd()).prop_map(|(hdr, c, rd)| Body::GetReq {
            hdr,
            cookie: Cookie(c),
            rd
        }),
        arb_completion().prop_map(Body::GetDone),
    ]
}

fn arb_msg() -> impl Strategy<Value = KibMsg> {
    (
        prop_oneof![Just(Version::V1), Just(Version::V2)],
        any::<u8>(),
        arb_nid(),
        any::<u64>(),
        arb_nid(),
        any::<u64>(),
        arb_body(),
    )
        .prop_map(
            |(version, credits, srcnid, srcstamp, dstnid, dststamp, body)| KibMsg {
                version,
                credits,
                srcnid,
                srcstamp,
                dstnid,
                dststamp,
                body,
            },
        )
}

proptest! {
    #[test]
    fn round_trip_little_endian(m in arb_msg(), pad in 0usize..64) {
        let mut b = m.encode().unwrap();
        prop_assert_eq!(b.len(), m.nob());
        prop_assert!(b.len() <= IBLND_MSG_SIZE);
        let got = KibMsg::unpack(&b).unwrap();
        prop_assert_eq!(got.byte_order, ByteOrder::Little);
        prop_assert_eq!(got.cksum, 0);
        prop_assert_eq!(&got.msg, &m);
        // Trailing bytes past ibm_nob (a larger rx buffer) are ignored.
        b.resize(b.len() + pad, 0xee);
        prop_assert_eq!(KibMsg::unpack_bytes(&Bytes::from(b)).unwrap().msg, m);
    }

    #[test]
    fn round_trip_big_endian(m in arb_msg()) {
        let be = swap_to_be(&m.encode().unwrap());
        prop_assert_eq!(&be[..4], &[0x0b, 0xe9, 0x1b, 0x91]);
        let got = KibMsg::unpack(&be).unwrap();
        prop_assert_eq!(got.byte_order, ByteOrder::Big);
        prop_assert_eq!(got.msg, m);
    }

    #[test]
    fn checksum_round_trip(m in arb_msg(), big in any::<bool>(), at in any::<prop::sample::Index>(), x in 1u8..) {
        let (mut b, order) = if big {
            (swap_to_be(&m.encode().unwrap()), ByteOrder::Big)
        } else {
            (m.encode().unwrap(), ByteOrder::Little)
        };
        let sum = cksum::fill(&mut b, order).unwrap();
        prop_assert_ne!(sum, 0);
        if !big {
            prop_assert_eq!(&b, &m.encode_with_cksum().unwrap());
        }
        let got = KibMsg::unpack(&b).unwrap();
        prop_assert_eq!(got.cksum, sum);
        prop_assert_eq!(got.byte_order, order);
        prop_assert_eq!(&got.msg, &m);

        // Flip one byte outside the checksum field: the sum no longer matches and the
        // message is refused.
        let mut i = at.index(b.len());
        if (12..16).contains(&i) {
            i = 16;
        }
        b[i] ^= x;
        prop_assert!(cksum::verify(&b, sum).is_err());
        prop_assert!(KibMsg::unpack(&b).is_err());
    }

    #[test]
    fn unpack_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = KibMsg::unpack(&buf);
    }

    #[test]
    fn mutated_messages_never_panic(m in arb_msg(), at in any::<prop::sample::Index>(), x in any::<u8>()) {
        let mut b = m.encode().unwrap();
        let i = at.index(b.len());
        b[i] ^= x;
        if let Ok(u) = KibMsg::unpack(&b) {
            // Anything accepted re-encodes (little-endian) to something accepted.
            let again = u.msg.encode();
            prop_assert!(again.is_ok(), "{:?}", again);
            prop_assert!(KibMsg::unpack(&again.unwrap_or_default()).is_ok());
        }
    }
}
