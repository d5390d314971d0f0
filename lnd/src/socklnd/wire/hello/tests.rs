use super::super::testutil::*;
use super::*;
use lnet::nid::PID_LUSTRE;
use proptest::prelude::*;

fn complete(buf: &[u8]) -> (Hello, ByteOrder, usize) {
    match Hello::decode(buf).unwrap() {
        HelloDecoded::Complete {
            hello,
            order,
            consumed,
        } => (hello, order, consumed),
        other => panic!("expected a whole HELLO, got {other:?}"),
    }
}

const PEER_INC: u64 = 0x17D4_B84D_484D_0000;
const ROUTER_INC: u64 = 0x17D4_B86A_06E6_1A08;

fn peer_hello() -> Hello {
    Hello::new(
        ProtoVersion::V3,
        ProcessId::lustre(nid("192.168.1.2@tcp")),
        nid("192.168.1.1@tcp"),
        PEER_INC,
        ConnType::Control,
    )
}

#[test]
fn spec_7_1_peer_hello_both_ways() {
    let bytes = unhex(SPEC_7_1_PEER);
    assert_eq!(bytes.len(), 56);
    let (hello, order, consumed) = complete(&bytes);
    assert_eq!(hello, peer_hello());
    assert_eq!(order, ByteOrder::Little);
    assert_eq!(consumed, 56);
    assert_eq!(hello.check_request(), Ok(()));
    assert_eq!(hello.encode().unwrap(), bytes);
    assert_eq!(hello.version.header_form(), HeaderForm::Nid4);
}

#[test]
fn spec_7_1_router_reply_and_refusal_both_ways() {
    let router = ProcessId::lustre(nid("192.168.1.1@tcp"));
    let peer = peer_hello();
    let reply = peer.reply(router, ROUTER_INC, peer.ctype.invert());
    let bytes = unhex(SPEC_7_1_REPLY);
    assert_eq!(complete(&bytes), (reply.clone(), ByteOrder::Little, 56));
    assert_eq!(reply.encode().unwrap(), bytes);

    let none = peer.reply(router, ROUTER_INC, ConnType::None);
    let bytes = unhex(SPEC_7_1_REPLY_NONE);
    assert_eq!(complete(&bytes), (none.clone(), ByteOrder::Little, 56));
    assert_eq!(none.encode().unwrap(), bytes);
    assert_eq!(none.check_request(), Err(HelloError::ConnTypeNoneInRequest));
}

#[test]
fn kernel_reply_both_ways() {
    let bytes = unhex(KERNEL_HELLO_REPLY);
    let (hello, order, consumed) = complete(&bytes);
    assert_eq!(order, ByteOrder::Little);
    assert_eq!(consumed, 56);
    assert_eq!(
        hello,
        Hello {
            version: ProtoVersion::V3,
            src_nid: nid("10.0.0.1@tcp"),
            dst_nid: nid("10.0.0.2@tcp"),
            src_pid: PID_LUSTRE,
            dst_pid: 0,
            src_incarnation: 0x18EA_3A77_C732_353A,
            dst_incarnation: 0,
            ctype: ConnType::Control,
            ips: vec![],
        }
    );
    assert_eq!(hello.encode().unwrap(), bytes);
}

#[test]
fn byte_swapped_v3_is_flipped() {
    let hello = Hello {
        ips: vec![Ipv4Addr::new(192, 168, 1, 2), Ipv4Addr::new(10, 0, 0, 1)],
        ..peer_hello()
    };
    let mut be = Vec::new();
    hello.encode_in(ByteOrder::Big, &mut be).unwrap();
    assert_eq!(&be[..8], &unhex("45 72 69 63 00 00 00 03")[..]);
    assert_eq!(&be[8..16], &unhex("00 02 00 00 c0 a8 01 02")[..]);
    assert_eq!(&be[56..60], &unhex("c0 a8 01 02")[..]);
    let (got, order, consumed) = complete(&be);
    assert_eq!(got, hello);
    assert_eq!(order, ByteOrder::Big);
    assert!(order.is_flipped());
    assert_eq!(consumed, 64);
}

#[test]
fn v4_uses_large_nids_never_swapped_and_no_ips() {
    let hello = Hello::new(
        ProtoVersion::V4,
        ProcessId::lustre(nid("fe80::2@tcp")),
        nid("fe80::1@tcp"),
        7,
        ConnType::BulkIn,
    );
    let le = hello.encode().unwrap();
    assert_eq!(le.len(), 80);
    assert_eq!(&le[8..28], &nid("fe80::2@tcp").to_large_bytes()[..]);
    assert_eq!(&le[76..80], &[0; 4]);
    let mut be = Vec::new();
    hello.encode_in(ByteOrder::Big, &mut be).unwrap();
    assert_eq!(&be[8..48], &le[8..48]);
    assert_eq!(&be[48..52], &PID_LUSTRE.to_be_bytes());
    assert_eq!(complete(&le), (hello.clone(), ByteOrder::Little, 80));
    assert_eq!(complete(&be), (hello.clone(), ByteOrder::Big, 80));
    // nips is not read back in V4.
    let mut odd = le.clone();
    odd[76] = 99;
    assert_eq!(complete(&odd).0, hello);
    assert_eq!(hello.version.header_form(), HeaderForm::Large);
    let with_ips = Hello {
        ips: vec![Ipv4Addr::new(1, 2, 3, 4)],
        ..hello
    };
    assert_eq!(with_ips.encode(), Err(HelloError::IpsNotInV4 { count: 1 }));
}

#[test]
fn decode_is_incremental() {
    let mut hello = peer_hello();
    hello.ips = vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
    let bytes = hello.encode().unwrap();
    assert_eq!(bytes.len(), 64);
    for n in 0..bytes.len() {
        let want = match n {
            0..=3 => 4,
            4..=7 => 8,
            8..=55 => 56,
            _ => 64,
        };
        assert_eq!(
            Hello::decode(&bytes[..n]),
            Ok(HelloDecoded::Incomplete { needed: want }),
            "{n} bytes"
        );
    }
    let v4 = Hello {
        version: ProtoVersion::V4,
        ips: vec![],
        ..peer_hello()
    }
    .encode()
    .unwrap();
    for n in 8..80 {
        assert_eq!(
            Hello::decode(&v4[..n]),
            Ok(HelloDecoded::Incomplete { needed: 80 })
        );
    }
    // Trailing bytes (the first frame) are not consumed.
    let mut more = unhex(SPEC_7_1_PEER);
    more.extend_from_slice(&[0xC0, 0, 0, 0]);
    assert_eq!(complete(&more).2, 56);
}

fn v1() -> V1Hello {
    V1Hello {
        src_nid: 0x0002_0000_C0A8_0102,
        dest_pid: 0,
        src_pid: PID_LUSTRE,
        msg_type: 4,
        payload_length: 8,
        incarnation: PEER_INC,
        conn_type: 1,
        ips: vec![Ipv4Addr::new(192, 168, 1, 2), Ipv4Addr::new(10, 1, 1, 1)],
    }
}

#[test]
fn v1_is_read_whole_then_refused() {
    let v1 = v1();
    let bytes = v1.encode();
    assert_eq!(bytes.len(), 80);
    assert_eq!(&bytes[..8], &unhex("ed 0d bc ee 01 00 00 00")[..]);
    assert_eq!(&bytes[24..28], &[4, 0, 0, 0]);
    for (n, want) in [(4, 8), (8, 72), (71, 72), (72, 80), (79, 80)] {
        assert_eq!(
            Hello::decode(&bytes[..n]),
            Ok(HelloDecoded::Incomplete { needed: want }),
            "{n} bytes"
        );
    }
    assert_eq!(
        Hello::decode(&bytes),
        Err(HelloError::UnsupportedV1 {
            hello: Box::new(v1.clone())
        })
    );
    // A V1 HELLO whose IP list length makes no sense is refused after 72 bytes.
    let odd = V1Hello {
        payload_length: 6,
        ips: vec![],
        ..v1.clone()
    };
    assert_eq!(
        Hello::decode(&odd.encode()),
        Err(HelloError::UnsupportedV1 {
            hello: Box::new(odd)
        })
    );
    let built = V1Hello::new(
        ProcessId::lustre(nid("192.168.1.2@tcp")),
        PEER_INC,
        ConnType::Control,
    )
    .unwrap();
    assert_eq!(built.src_nid, v1.src_nid);
    assert_eq!(built.msg_type, 4);
}

#[test]
fn malformed_hellos_get_specific_errors() {
    let good = unhex(SPEC_7_1_PEER);
    let with = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    let seventeen = Hello {
        ips: vec![Ipv4Addr::new(10, 0, 0, 1); 17],
        ..peer_hello()
    }
    .encode()
    .unwrap();
    let zero_ip = Hello {
        ips: vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::UNSPECIFIED],
        ..peer_hello()
    }
    .encode()
    .unwrap();
    let mut any_v4 = Hello {
        version: ProtoVersion::V4,
        ..peer_hello()
    }
    .encode()
    .unwrap();
    any_v4[8..28].copy_from_slice(&[0xFF; 20]);
    let mut odd_size_v4 = any_v4.clone();
    odd_size_v4[8..28].copy_from_slice(&nid("10.0.0.1@tcp").to_large_bytes());
    odd_size_v4[28] = 5;

    let cases: Vec<(&str, Vec<u8>, HelloError)> = vec![
        (
            "acceptor magic",
            unhex("00 71 ce ac"),
            HelloError::BadMagic { got: 0xACCE_7100 },
        ),
        (
            "byte-swapped V1 magic",
            unhex("ee bc 0d ed 00 01 00 00"),
            HelloError::BadMagic { got: 0xED0D_BCEE },
        ),
        (
            "version 5",
            unhex("63 69 72 45 05 00 00 00"),
            HelloError::UnknownVersion {
                magic: LNET_PROTO_MAGIC,
                version: 5,
            },
        ),
        (
            "version 1 with the new magic",
            unhex("63 69 72 45 01 00 00 00"),
            HelloError::UnknownVersion {
                magic: LNET_PROTO_MAGIC,
                version: 1,
            },
        ),
        (
            "swapped version 9",
            unhex("45 72 69 63 00 00 00 09"),
            HelloError::UnknownVersion {
                magic: LNET_PROTO_MAGIC.swap_bytes(),
                version: 9,
            },
        ),
        (
            "V1 magic, version 1.1",
            unhex("ed 0d bc ee 01 00 01 00"),
            HelloError::UnknownVersion {
                magic: LNET_PROTO_TCP_MAGIC,
                version: 0x0001_0001,
            },
        ),
        (
            "nips 17, refused before the IPs arrive",
            seventeen[..56].to_vec(),
            HelloError::TooManyIps { nips: 17, max: 16 },
        ),
        (
            "nips 0xffffffff",
            with(52, &[0xFF; 4]),
            HelloError::TooManyIps {
                nips: u32::MAX,
                max: 16,
            },
        ),
        ("zero IP", zero_ip, HelloError::ZeroIp { index: 1 }),
        ("src_nid ANY", with(8, &[0xFF; 8]), HelloError::SrcNidAny),
        ("src_nid ANY (V4)", any_v4, HelloError::SrcNidAny),
        (
            "ctype 4",
            with(48, &[4, 0, 0, 0]),
            HelloError::BadConnType { value: 4 },
        ),
        (
            "ctype -2",
            with(48, &[0xFE, 0xFF, 0xFF, 0xFF]),
            HelloError::BadConnType { value: 0xFFFF_FFFE },
        ),
        (
            "src_nid with its top byte set",
            with(15, &[1]),
            HelloError::BadNid {
                field: "src_nid",
                source: NidError::TopByteSet {
                    raw: 0x0102_0000_C0A8_0102,
                },
            },
        ),
        (
            "dst_nid with its top byte set",
            with(23, &[0x80]),
            HelloError::BadNid {
                field: "dst_nid",
                source: NidError::TopByteSet {
                    raw: 0x8002_0000_C0A8_0101,
                },
            },
        ),
        (
            "large NID of unknown size",
            odd_size_v4,
            HelloError::BadNid {
                field: "dst_nid",
                source: NidError::UnsupportedNidSize { size: 5 },
            },
        ),
    ];
    for (name, bytes, want) in cases {
        assert_eq!(Hello::decode(&bytes), Err(want.clone()), "{name}");
        assert_eq!(
            want.wants_version_reply(),
            matches!(want, HelloError::UnknownVersion { .. }),
            "{name}"
        );
    }
}

#[test]
fn encode_refuses_what_cannot_be_written() {
    let mut hello = peer_hello();
    hello.dst_nid = nid("fe80::1@tcp");
    let mut out = vec![9];
    assert!(matches!(
        hello.encode_in(ByteOrder::Little, &mut out),
        Err(HelloError::BadNid {
            field: "dst_nid",
            source: NidError::NotNid4 { .. }
        })
    ));
    assert_eq!(out, vec![9]);
    hello.version = ProtoVersion::V4;
    assert_eq!(hello.encode().unwrap().len(), 80);
}

#[test]
fn versions() {
    for v in [ProtoVersion::V2, ProtoVersion::V3, ProtoVersion::V4] {
        assert_eq!(ProtoVersion::from_u32(v.to_u32()), Some(v));
    }
    assert_eq!(ProtoVersion::from_u32(1), None);
    assert_eq!(ProtoVersion::V2.hello_len(), 56);
    assert_eq!(ProtoVersion::V4.hello_len(), 80);
}

proptest! {
    #[test]
    fn round_trip(hello in hello_strategy(), order in order_strategy()) {
        let mut bytes = Vec::new();
        hello.encode_in(order, &mut bytes).unwrap();
        prop_assert_eq!(bytes.len(), hello.wire_len());
        if order == ByteOrder::Little {
            prop_assert_eq!(&hello.encode().unwrap(), &bytes);
        }
        let len = bytes.len();
        prop_assert_eq!(
            Hello::decode(&bytes),
            Ok(HelloDecoded::Complete { hello, order, consumed: len })
        );
    }

    #[test]
    fn prefixes_are_incomplete(hello in hello_strategy(), order in order_strategy(), cut in 0usize..200) {
        let mut bytes = Vec::new();
        hello.encode_in(order, &mut bytes).unwrap();
        let cut = cut % bytes.len();
        let incomplete = matches!(
            Hello::decode(&bytes[..cut]),
            Ok(HelloDecoded::Incomplete { needed }) if needed > cut && needed <= bytes.len()
        );
        prop_assert!(incomplete);
    }

    #[test]
    fn decode_never_panics(
        magic in prop_oneof![
            Just(unhex("63 69 72 45")),
            Just(unhex("45 72 69 63")),
            Just(unhex("ed 0d bc ee")),
            proptest::collection::vec(any::<u8>(), 0..4),
        ],
        version in prop_oneof![Just(vec![]), Just(vec![3, 0, 0, 0]), Just(vec![0, 0, 0, 4]),
            Just(vec![1, 0, 0, 0]), proptest::collection::vec(any::<u8>(), 0..4)],
        rest in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let bytes = [magic, version, rest].concat();
        if let Ok(HelloDecoded::Complete { hello, consumed, .. }) = Hello::decode(&bytes) {
            prop_assert!(consumed <= bytes.len());
            prop_assert_eq!(consumed, hello.wire_len());
        }
    }
}
