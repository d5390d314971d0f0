//! Shared test helpers: byte vectors copied from the spec documents, and proptest
//! strategies for NIDs, HELLOs, headers and frames.

#![allow(unreachable_pub)]

use std::net::Ipv4Addr;

use lnet::nid::{LndType, Net, NidAddr};
use lnet::{ByteOrder, Header, Message, Nid, WireHandle};
use proptest::prelude::*;

use super::conn_type::ConnType;
use super::hello::{Hello, ProtoVersion};
use super::ksock::{KsockHeader, KsockType};

/// Hex dump text (optionally with `0000:` offsets) to bytes.
pub fn unhex(s: &str) -> Vec<u8> {
    let compact: String = s
        .lines()
        .map(|l| l.split_once(':').map_or(l, |(_, rest)| rest))
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect();
    hex::decode(compact).unwrap()
}

/// A NID from its text form.
pub fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// Spec 7.1: the peer's acceptor request for 192.168.1.1@tcp.
pub const SPEC_7_1_ACCEPTOR: &str = "0000: 00 71 ce ac 01 00 00 00 01 01 a8 c0 00 00 02 00";

/// Spec 7.1: the peer's V3 HELLO.
pub const SPEC_7_1_PEER: &str = "
    0000: 63 69 72 45 03 00 00 00 02 01 a8 c0 00 00 02 00
    0010: 01 01 a8 c0 00 00 02 00 39 30 00 00 00 00 00 00
    0020: 00 00 4d 48 4d b8 d4 17 00 00 00 00 00 00 00 00
    0030: 01 00 00 00 00 00 00 00";

/// Spec 7.1: the router's reply.
pub const SPEC_7_1_REPLY: &str = "
    0000: 63 69 72 45 03 00 00 00 01 01 a8 c0 00 00 02 00
    0010: 02 01 a8 c0 00 00 02 00 39 30 00 00 00 00 00 00
    0020: 08 1a e6 06 6a b8 d4 17 00 00 00 00 00 00 00 00
    0030: 01 00 00 00 00 00 00 00";

/// Spec 7.1: the same reply refusing the connection (ctype NONE).
pub const SPEC_7_1_REPLY_NONE: &str = "
    0000: 63 69 72 45 03 00 00 00 01 01 a8 c0 00 00 02 00
    0010: 02 01 a8 c0 00 00 02 00 39 30 00 00 00 00 00 00
    0020: 08 1a e6 06 6a b8 d4 17 00 00 00 00 00 00 00 00
    0030: ff ff ff ff 00 00 00 00";

/// kernel-observations.md: the kernel (10.0.0.1@tcp) answering our HELLO.
pub const KERNEL_HELLO_REPLY: &str = "
    0000: 63 69 72 45 03 00 00 00 01 00 00 0a 00 00 02 00
    0010: 02 00 00 0a 00 00 02 00 39 30 00 00 00 00 00 00
    0020: 3a 35 32 c7 77 3a ea 18 00 00 00 00 00 00 00 00
    0030: 01 00 00 00 00 00 00 00";

/// Spec 7.2: ksock LNET frame carrying a discovery ping GET.
pub const SPEC_7_2_GET: &str = "
    0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0010: 00 00 00 00 00 00 00 00 01 01 a8 c0 00 00 02 00
    0020: 02 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
    0030: 02 00 00 00 00 00 00 00 e4 d3 c2 b1 a0 f0 d6 17
    0040: 05 04 00 00 00 00 00 00 00 00 00 00 00 00 00 80
    0050: 00 00 00 00 00 00 00 00 10 01 00 00 00 00 00 00";

/// Spec 7.3: the router's REPLY with its 64-byte ping info.
pub const SPEC_7_3_REPLY: &str = "
    0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0010: 00 00 00 00 00 00 00 00 02 01 a8 c0 00 00 02 00
    0020: 01 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
    0030: 03 00 00 00 40 00 00 00 e4 d3 c2 b1 a0 f0 d6 17
    0040: 05 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0060: 67 6e 69 70 1a 00 00 00 39 30 00 00 03 00 00 00
    0070: 00 00 00 00 00 00 09 00 01 00 00 00 00 00 00 00
    0080: 01 01 a8 c0 00 00 02 00 de c0 aa 15 00 00 00 00
    0090: 01 00 00 0a 01 00 02 00 de c0 aa 15 00 00 00 00";

/// Spec 7.4: keepalive NOOP.
pub const SPEC_7_4_KEEPALIVE: &str =
    "c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00";

/// Spec 7.4: ZC-ACK NOOP for cookie 0x2A.
pub const SPEC_7_4_ZC_ACK: &str =
    "c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 2a 00 00 00 00 00 00 00";

/// kernel-observations.md: the kernel's REPLY to our ping GET (48-byte ping info).
pub const KERNEL_REPLY_FRAME: &str = "
    0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0010: 00 00 00 00 00 00 00 00 02 00 00 0a 00 00 02 00
    0020: 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
    0030: 03 00 00 00 30 00 00 00 e4 d3 c2 b1 a0 f0 d6 17
    0040: 05 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0060: 67 6e 69 70 1e 00 00 00 39 30 00 00 02 00 00 00
    0070: 00 00 00 00 00 00 09 00 02 00 00 00 00 00 00 00
    0080: 01 00 00 0a 00 00 02 00 de c0 aa 15 00 00 00 00";

/// kernel-observations.md: `lnetctl ping 10.0.0.2@tcp` GET (sink length 3960).
pub const KERNEL_PING_GET_FRAME: &str = "
    0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0010: 00 00 00 00 00 00 00 00 02 00 00 0a 00 00 02 00
    0020: 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
    0030: 02 00 00 00 00 00 00 00 ae 78 41 3e 85 3a ea 18
    0040: 0d 00 00 00 00 00 00 00 00 00 00 00 00 00 00 80
    0050: 00 00 00 00 00 00 00 00 78 0f 00 00 00 00 00 00";

/// kernel-observations.md: discovery PUSH (PUT with ACK wanted, 48-byte ping info).
pub const KERNEL_PUSH_FRAME: &str = "
    0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0010: 00 00 00 00 00 00 00 00 02 00 00 0a 00 00 02 00
    0020: 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
    0030: 01 00 00 00 30 00 00 00 ae 78 41 3e 85 3a ea 18
    0040: 19 00 00 00 00 00 00 00 00 00 00 00 00 00 00 80
    0050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    0060: 67 6e 69 70 1e 00 00 00 39 30 00 00 02 00 00 00
    0070: 00 00 00 00 00 00 09 00 02 00 00 00 00 00 00 00
    0080: 01 00 00 0a 00 00 02 00 de c0 aa 15 00 00 00 00";

/// A 64-bit-representable NID that is not ANY.
pub fn nid4_strategy() -> impl Strategy<Value = Nid> {
    (0u8..0xFF, any::<u16>(), any::<u32>())
        .prop_map(|(t, n, a)| Nid::new(Net::new(LndType(t), n), a))
}

/// Any NID but ANY, with a 4- or 16-byte address.
pub fn large_strategy() -> impl Strategy<Value = Nid> {
    prop_oneof![
        nid4_strategy(),
        (0u8..0xFF, any::<u16>(), any::<[u8; 16]>()).prop_map(|(t, n, a)| Nid {
            net: Net::new(LndType(t), n),
            addr: NidAddr::V6(a),
        }),
    ]
}

/// Either byte order.
pub fn order_strategy() -> impl Strategy<Value = ByteOrder> {
    prop_oneof![Just(ByteOrder::Little), Just(ByteOrder::Big)]
}

/// Any of the five connection types.
pub fn ctype_strategy() -> impl Strategy<Value = ConnType> + Clone {
    prop_oneof![
        Just(ConnType::None),
        Just(ConnType::Any),
        Just(ConnType::Control),
        Just(ConnType::BulkIn),
        Just(ConnType::BulkOut),
    ]
}

/// Any HELLO that passes the receive checks (dst may be ANY, ctype may be NONE).
pub fn hello_strategy() -> impl Strategy<Value = Hello> {
    let scalars = (
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        ctype_strategy(),
    );
    let v2v3 = (
        prop_oneof![Just(ProtoVersion::V2), Just(ProtoVersion::V3)],
        nid4_strategy(),
        prop_oneof![nid4_strategy(), Just(Nid::ANY)],
        proptest::collection::vec(1u32.., 0..=16),
    );
    let v4 = (
        large_strategy(),
        prop_oneof![large_strategy(), Just(Nid::ANY)],
    );
    prop_oneof![
        (v2v3, scalars.clone()).prop_map(|((version, src, dst, ips), s)| Hello {
            version,
            src_nid: src,
            dst_nid: dst,
            src_pid: s.0,
            dst_pid: s.1,
            src_incarnation: s.2,
            dst_incarnation: s.3,
            ctype: s.4,
            ips: ips.into_iter().map(Ipv4Addr::from).collect(),
        }),
        (v4, scalars).prop_map(|((src, dst), s)| Hello {
            version: ProtoVersion::V4,
            src_nid: src,
            dst_nid: dst,
            src_pid: s.0,
            dst_pid: s.1,
            src_incarnation: s.2,
            dst_incarnation: s.3,
            ctype: s.4,
            ips: vec![],
        }),
    ]
}

/// Any ksock header.
pub fn ksock_strategy() -> impl Strategy<Value = KsockHeader> {
    (
        prop_oneof![Just(KsockType::Noop), Just(KsockType::Lnet)],
        any::<u32>(),
        any::<[u64; 2]>(),
    )
        .prop_map(|(msg_type, csum, zc_cookies)| KsockHeader {
            msg_type,
            csum,
            zc_cookies,
        })
}

fn handle_strategy() -> impl Strategy<Value = WireHandle> {
    any::<(u64, u64)>().prop_map(|(i, o)| WireHandle {
        interface_cookie: i,
        object_cookie: o,
    })
}

/// An LNet message (no HELLO) and a payload that fits it: up to `max_payload` bytes for
/// PUT and REPLY, none for ACK and GET.
pub fn message_strategy(max_payload: usize) -> impl Strategy<Value = (Message, Vec<u8>)> {
    let bytes = move || proptest::collection::vec(any::<u8>(), 0..=max_payload);
    prop_oneof![
        (handle_strategy(), any::<u64>(), any::<u32>()).prop_map(
            |(dst_wmd, match_bits, mlength)| (
                Message::Ack {
                    dst_wmd,
                    match_bits,
                    mlength
                },
                vec![]
            )
        ),
        (
            handle_strategy(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            bytes()
        )
            .prop_map(|(ack_wmd, match_bits, hdr_data, ptl_index, offset, p)| (
                Message::Put {
                    ack_wmd,
                    match_bits,
                    hdr_data,
                    ptl_index,
                    offset
                },
                p
            )),
        (
            handle_strategy(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(return_wmd, match_bits, ptl_index, src_offset, sink_length)| (
                    Message::Get {
                        return_wmd,
                        match_bits,
                        ptl_index,
                        src_offset,
                        sink_length
                    },
                    vec![]
                )
            ),
        (handle_strategy(), bytes()).prop_map(|(dst_wmd, p)| (Message::Reply { dst_wmd }, p)),
    ]
}

/// An LNet header that passes `check_lnet` (NIDs of the form `large` allows), with its
/// payload.
pub fn header_strategy(
    large: bool,
    max_payload: usize,
) -> impl Strategy<Value = (Header, Vec<u8>)> {
    let nids = if large {
        (large_strategy(), large_strategy()).boxed()
    } else {
        (nid4_strategy(), nid4_strategy()).boxed()
    };
    (
        nids,
        any::<u32>(),
        any::<u32>(),
        message_strategy(max_payload),
    )
        .prop_map(|((dest_nid, src_nid), dest_pid, src_pid, (msg, payload))| {
            (
                Header {
                    dest_nid,
                    src_nid,
                    dest_pid,
                    src_pid,
                    payload_length: u32::try_from(payload.len()).unwrap(),
                    msg,
                },
                payload,
            )
        })
}
