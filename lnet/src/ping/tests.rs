use super::*;
use crate::nid::{Net, NidAddr, PID_LUSTRE};
use proptest::prelude::*;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// Bytes from a hex dump as the spec prints it: optional `0060:` offsets, spaces,
/// newlines; anything after three spaces on a line is a comment.
fn dump(text: &str) -> Vec<u8> {
    let mut hexits = String::new();
    for line in text.lines() {
        let line = line.trim_start().split("   ").next().unwrap_or("");
        let line = match line.split_once(':') {
            Some((_, rest)) => rest,
            None => line,
        };
        hexits.extend(line.chars().filter(|c| !c.is_whitespace()));
    }
    hex::decode(hexits).unwrap()
}

/// Swaps an LE nid4-only info to big-endian field by field, without the encoder.
fn swap_nid4_info(le: &[u8]) -> Vec<u8> {
    let mut be = le.to_vec();
    for word in be[..16].chunks_exact_mut(4) {
        word.reverse();
    }
    for entry in be[16..].chunks_exact_mut(16) {
        entry[..8].reverse();
        entry[8..12].reverse();
        entry[12..16].reverse();
    }
    be
}

fn check_vector(bytes: &[u8], want: &PingInfo) {
    let got = PingInfo::decode(bytes).unwrap();
    assert_eq!(&got, want);
    got.validate(INTERFACES_MAX_DEFAULT_OLD).unwrap();
    assert_eq!(want.encode().unwrap(), bytes);
    assert_eq!(want.encoded_len(), bytes.len());
    let swapped = swap_nid4_info(bytes);
    assert_ne!(swapped, bytes);
    assert_eq!(&PingInfo::decode(&swapped).unwrap(), want);
    assert_eq!(want.encode_big_endian().unwrap(), swapped);
}

/// Spec 7.3: the router's REPLY (ksock header, LNet header, 64-byte ping info).
const SPEC_7_3_REPLY: &str = "
0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00   ksock hdr (LNET)
0010: 00 00 00 00 00 00 00 00 02 01 a8 c0 00 00 02 00   dest_nid 192.168.1.2@tcp
0020: 01 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00   src_nid 192.168.1.1@tcp, pids
0030: 03 00 00 00 40 00 00 00 e4 d3 c2 b1 a0 f0 d6 17   type 3 (REPLY), payload 64, dst_wmd (echo)
0040: 05 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00   dst_wmd (echo), rest of union zero
0050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0060: 67 6e 69 70 1a 00 00 00 39 30 00 00 03 00 00 00   pi_magic, features 0x1A, pi_pid 12345, pi_nnis 3
0070: 00 00 00 00 00 00 09 00 01 00 00 00 00 00 00 00   0@lo, seqno 1, msg_size 0
0080: 01 01 a8 c0 00 00 02 00 de c0 aa 15 00 00 00 00   192.168.1.1@tcp UP
0090: 01 00 00 0a 01 00 02 00 de c0 aa 15 00 00 00 00   10.0.0.1@tcp1 UP
";

/// kernel-observations.md: kernel REPLY to our ping GET.
const KERNEL_REPLY: &str = "
0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0010: 00 00 00 00 00 00 00 00 02 00 00 0a 00 00 02 00
0020: 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
0030: 03 00 00 00 30 00 00 00 e4 d3 c2 b1 a0 f0 d6 17
0040: 05 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0060: 67 6e 69 70 1e 00 00 00 39 30 00 00 02 00 00 00
0070: 00 00 00 00 00 00 09 00 02 00 00 00 00 00 00 00
0080: 01 00 00 0a 00 00 02 00 de c0 aa 15 00 00 00 00
";

/// kernel-observations.md: kernel discovery PUSH (PUT with its 48-byte ping info).
const KERNEL_PUSH: &str = "
0000: c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0010: 00 00 00 00 00 00 00 00 02 00 00 0a 00 00 02 00
0020: 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
0030: 01 00 00 00 30 00 00 00 ae 78 41 3e 85 3a ea 18
0040: 19 00 00 00 00 00 00 00 00 00 00 00 00 00 00 80
0050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0060: 67 6e 69 70 1e 00 00 00 39 30 00 00 02 00 00 00
0070: 00 00 00 00 00 00 09 00 02 00 00 00 00 00 00 00
0080: 01 00 00 0a 00 00 02 00 de c0 aa 15 00 00 00 00
";

/// kernel-observations.md: o2ib IMMEDIATE carrying the REPLY with ping info.
const KERNEL_O2IB_REPLY: &str = "
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

/// The LNet header's payload_length: u32 LE at `at`.
fn payload_length(frame: &[u8], at: usize) -> usize {
    u32::from_le_bytes(frame[at..at + 4].try_into().unwrap()) as usize
}

#[test]
fn spec_7_3_router_reply() {
    let frame = dump(SPEC_7_3_REPLY);
    assert_eq!(frame.len(), 160);
    let info = &frame[0x60..];
    assert_eq!(payload_length(&frame, 0x34), info.len());
    let want = PingInfo::new(
        PID_LUSTRE,
        1,
        Features::NI_STATUS | Features::MULTI_RAIL | Features::DISCOVERY,
        vec![
            NiStatus::up(nid("192.168.1.1@tcp")),
            NiStatus::up(nid("10.0.0.1@tcp1")),
        ],
    );
    assert_eq!(want.features.bits(), 0x1A);
    check_vector(info, &want);
}

fn kernel_tcp_info() -> PingInfo {
    PingInfo::new(
        PID_LUSTRE,
        2,
        Features::from_bits(0x1E),
        vec![NiStatus::up(nid("10.0.0.1@tcp"))],
    )
}

#[test]
fn kernel_reply_capture() {
    let frame = dump(KERNEL_REPLY);
    let info = &frame[0x60..];
    assert_eq!(info.len(), 48);
    assert_eq!(payload_length(&frame, 0x34), 48);
    let want = kernel_tcp_info();
    assert_eq!(
        want.features,
        Features::NI_STATUS | Features::RTE_DISABLED | Features::MULTI_RAIL | Features::DISCOVERY
    );
    check_vector(info, &want);
    let got = PingInfo::decode(info).unwrap();
    assert_eq!(got.seqno, 2);
    assert_eq!(got.status_of(&nid("10.0.0.1@tcp")), Some(NiStatusValue::UP));
    assert_eq!(got.status_of(&nid("10.0.0.2@tcp")), None);
}

#[test]
fn kernel_push_capture() {
    let frame = dump(KERNEL_PUSH);
    let info = &frame[0x60..];
    assert_eq!(info.len(), 48);
    assert_eq!(payload_length(&frame, 0x34), 48);
    // The PUT's match bits (u64 LE at 0x48) are the ping match bits.
    assert_eq!(
        u64::from_le_bytes(frame[0x48..0x50].try_into().unwrap()),
        PING_MATCHBITS
    );
    check_vector(info, &kernel_tcp_info());
}

#[test]
fn kernel_o2ib_immediate_reply_capture() {
    let frame = dump(KERNEL_O2IB_REPLY);
    assert_eq!(frame.len(), 0xb8);
    // kib header 48 bytes, LNet header 72 bytes, then the ping info.
    let info = &frame[48 + 72..];
    assert_eq!(info.len(), 64);
    assert_eq!(payload_length(&frame, 48 + 28), 64);
    let want = PingInfo::new(
        PID_LUSTRE,
        3,
        Features::from_bits(0x1E),
        vec![
            NiStatus::up(nid("10.0.0.1@o2ib")),
            NiStatus::up(nid("10.0.0.2@o2ib")),
        ],
    );
    check_vector(info, &want);
}

#[test]
fn constants() {
    assert_eq!(PING_MAGIC.to_le_bytes(), *b"gnip");
    assert_eq!(PING_MATCHBITS, 1 << 63);
    assert_eq!(RESERVED_PORTAL, 0);
    assert_eq!(PING_INFO_MIN_SIZE, 272);
    assert_eq!(INTERFACES_MAX_DEFAULT_OLD, 200);
    assert_eq!(INTERFACES_MAX_DEFAULT, 4096);
    assert!(NiStatusValue::UP.is_up());
    assert!(!NiStatusValue::DOWN.is_up());
    assert_eq!(NiStatusValue::UP.0, 0x15AA_C0DE);
    assert_eq!(NiStatusValue::DOWN.0, 0xDEAD_FACE);
    assert_eq!(NiStatusValue::INVALID.0, 0);
}

#[test]
fn features_print_and_combine() {
    let router = Features::NI_STATUS | Features::MULTI_RAIL | Features::DISCOVERY;
    assert_eq!(router.bits(), 0x1A);
    assert_eq!(router.to_string(), "NI_STATUS|MULTI_RAIL|DISCOVERY");
    assert_eq!(
        format!("{:?}", Features::from_bits(0x102)),
        "Features(0x102: NI_STATUS|0x100)"
    );
    assert_eq!(Features::EMPTY.to_string(), "0");
    let mut f = router;
    f.set(Features::RTE_DISABLED, true);
    assert_eq!(f.bits(), 0x1E);
    f.remove(Features::MULTI_RAIL);
    assert_eq!(f.bits(), 0x16);
    assert!(f.contains(Features::NI_STATUS | Features::DISCOVERY));
    assert!(!f.contains(Features::NI_STATUS | Features::MULTI_RAIL));
    assert!(f.intersects(Features::NI_STATUS | Features::MULTI_RAIL));
    assert_eq!((f & Features::NI_STATUS).bits(), 0x02);
    assert_eq!(Features::from_bits(0x1FF).unknown().bits(), 0x100);
}

/// 0@lo, 10.0.0.1@tcp UP, then large entries fe80::1@tcp UP and 10.0.0.9@tcp DOWN,
/// laid out by hand from the spec.
#[test]
fn large_entries_layout() {
    let v6 = nid("fe80::1@tcp");
    let info = PingInfo::new(
        PID_LUSTRE,
        7,
        Features::NI_STATUS | Features::MULTI_RAIL,
        vec![NiStatus::up(nid("10.0.0.1@tcp"))],
    )
    .with_large(vec![
        LargeNiStatus::new(v6, NiStatusValue::UP),
        LargeNiStatus::new(nid("10.0.0.9@tcp"), NiStatusValue::DOWN),
    ]);
    assert_eq!(info.features.bits(), 0x2A);
    assert_eq!(info.info_size(), 16 + 32 + 24 + 12);
    let mut want = dump(
        "67 6e 69 70 2a 00 00 00 39 30 00 00 02 00 00 00
             00 00 00 00 00 00 09 00 07 00 00 00 54 00 00 00
             01 00 00 0a 00 00 02 00 de c0 aa 15 00 00 00 00
             de c0 aa 15 0c 02 00 00 fe 80 00 00 00 00 00 00 00 00 00 00 00 00 00 01
             ce fa ad de 00 02 00 00 0a 00 00 09",
    );
    assert_eq!(info.encode().unwrap(), want);
    assert_eq!(PingInfo::decode(&want).unwrap(), info);

    // Metadata after the entries is kept as is.
    let mut md = info.clone();
    md.features.insert(Features::METADATA);
    md.metadata = [1u32.to_le_bytes().to_vec(), vec![0x5a; 40]].concat();
    want[4] = 0xAA;
    want.extend_from_slice(&md.metadata);
    assert_eq!(md.encode().unwrap(), want);
    assert_eq!(PingInfo::decode(&want).unwrap(), md);

    // In big-endian only the scalars move; the large NIDs stay as they are.
    let be = info.encode_big_endian().unwrap();
    assert_eq!(&be[..4], b"ping");
    assert_eq!(&be[52..72], &v6.to_large_bytes()[..]);
    assert_eq!(PingInfo::decode(&be).unwrap(), info);
}

#[test]
fn metadata_without_large_entries_follows_the_nid4_entries() {
    let mut info = kernel_tcp_info();
    info.features.insert(Features::METADATA);
    info.metadata = vec![0, 0, 0, 0, 9, 9];
    let bytes = info.encode().unwrap();
    assert_eq!(bytes.len(), 48 + 6);
    assert_eq!(PingInfo::decode(&bytes).unwrap(), info);
}

#[test]
fn unknown_status_values_and_features_round_trip() {
    let mut info = kernel_tcp_info();
    info.nis
        .push(NiStatus::new(nid("10.0.0.7@tcp"), NiStatusValue(42)));
    info.features = Features::from_bits(0x8000_001E);
    let bytes = info.encode().unwrap();
    assert_eq!(PingInfo::decode(&bytes).unwrap(), info);
}

#[test]
fn unused_words_are_ignored() {
    let mut bytes = dump(KERNEL_REPLY)[0x60..].to_vec();
    bytes[28] = 0x99; // entry 0 msg_size without LARGE_ADDR
    bytes[47] = 0x77; // entry 1 unused
    assert_eq!(PingInfo::decode(&bytes).unwrap(), kernel_tcp_info());
}

fn with_u32(mut bytes: Vec<u8>, at: usize, v: u32) -> Vec<u8> {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    bytes
}

fn with_u64(mut bytes: Vec<u8>, at: usize, v: u64) -> Vec<u8> {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
    bytes
}

#[test]
fn malformed_inputs_get_specific_errors() {
    let good = dump(KERNEL_REPLY)[0x60..].to_vec();
    let large = PingInfo::new(
        PID_LUSTRE,
        1,
        Features::NI_STATUS,
        vec![NiStatus::up(nid("10.0.0.1@tcp"))],
    )
    .with_large(vec![LargeNiStatus::new(
        nid("fe80::1@tcp"),
        NiStatusValue::UP,
    )])
    .encode()
    .unwrap();
    assert_eq!(large.len(), 72);
    let mut odd_nid_size = large.clone();
    odd_nid_size[52] = 4; // nid_size 4: entry 4 + 12 = 16 bytes
    let mut any_large = large.clone();
    any_large[53] = 0xFF;

    let decode_cases: Vec<(&str, Vec<u8>, PingError)> = vec![
        ("empty", vec![], PingError::Truncated { needed: 16, got: 0 }),
        (
            "header cut",
            good[..10].to_vec(),
            PingError::Truncated {
                needed: 16,
                got: 10,
            },
        ),
        (
            "last entry cut (sink too small)",
            good[..40].to_vec(),
            PingError::Truncated {
                needed: 48,
                got: 40,
            },
        ),
        (
            "nnis far beyond the bytes",
            with_u32(good.clone(), 12, u32::MAX),
            PingError::Truncated {
                needed: 16 + 16 * (u32::MAX as usize),
                got: 48,
            },
        ),
        (
            "bad magic",
            with_u32(good.clone(), 0, 0x4572_6963),
            PingError::BadMagic { got: 0x4572_6963 },
        ),
        (
            "bad magic, 4 bytes",
            vec![1, 2, 3, 4],
            PingError::BadMagic { got: 0x0403_0201 },
        ),
        (
            "nnis 0",
            with_u32(good.clone(), 12, 0),
            PingError::NoEntries,
        ),
        (
            "nid4 with top byte set",
            with_u64(good.clone(), 32, 0x0102_0000_0a00_0001),
            PingError::BadNid {
                entry: EntryIndex::Nid4(1),
                source: NidError::TopByteSet {
                    raw: 0x0102_0000_0a00_0001,
                },
            },
        ),
        (
            "LNET_NID_ANY entry",
            with_u64(good.clone(), 32, u64::MAX),
            PingError::AnyNid {
                entry: EntryIndex::Nid4(1),
            },
        ),
        (
            "wildcard LND type in entry 0",
            with_u64(good.clone(), 16, 0x00FF_0000_0000_0000),
            PingError::BadNid {
                entry: EntryIndex::Nid4(0),
                source: NidError::WildcardType {
                    raw: 0x00FF_0000_0000_0000,
                },
            },
        ),
        (
            "LARGE_ADDR with msg_size not a multiple of 4",
            with_u32(large.clone(), 28, 70),
            PingError::BadMsgSize {
                msg_size: 70,
                min: 48,
            },
        ),
        (
            "LARGE_ADDR with msg_size inside the nid4 entries",
            with_u32(large.clone(), 28, 32),
            PingError::BadMsgSize {
                msg_size: 32,
                min: 48,
            },
        ),
        (
            "LARGE_ADDR with msg_size past the bytes",
            with_u32(large.clone(), 28, 96),
            PingError::Truncated {
                needed: 96,
                got: 72,
            },
        ),
        (
            "large entry past msg_size",
            with_u32(large.clone(), 28, 68),
            PingError::LargeEntryOverrun {
                index: 0,
                offset: 48,
                end: 68,
            },
        ),
        (
            "large entry of unknown nid_size",
            odd_nid_size,
            PingError::BadNid {
                entry: EntryIndex::Large(0),
                source: NidError::UnsupportedNidSize { size: 4 },
            },
        ),
        (
            "large entry with LNET_ANY_NID type",
            any_large,
            PingError::AnyNid {
                entry: EntryIndex::Large(0),
            },
        ),
    ];
    for (name, bytes, want) in decode_cases {
        assert_eq!(PingInfo::decode(&bytes), Err(want), "{name}");
    }

    // Receiver checks: these decode but fail validation.
    let too_many = PingInfo::new(
        PID_LUSTRE,
        1,
        Features::from_bits(0x1E),
        (0..200u32)
            .map(|i| NiStatus::up(Nid::new(Net::new(LndType::SOCKLND, 0), i)))
            .collect(),
    )
    .encode()
    .unwrap();
    let validate_cases: Vec<(&str, Vec<u8>, u32, PingError)> = vec![
        (
            "no NI_STATUS",
            with_u32(good.clone(), 4, 0x1C),
            INTERFACES_MAX_DEFAULT,
            PingError::MissingNiStatus {
                features: Features::from_bits(0x1C),
            },
        ),
        (
            "nnis over the 2.15 max",
            too_many.clone(),
            INTERFACES_MAX_DEFAULT_OLD,
            PingError::TooManyInterfaces { max: 200, got: 201 },
        ),
        (
            "entry 0 not 0@lo",
            with_u64(good.clone(), 16, 0x0002_0000_0a00_0001),
            INTERFACES_MAX_DEFAULT,
            PingError::FirstNotLoopback {
                got: nid("10.0.0.1@tcp"),
            },
        ),
    ];
    for (name, bytes, max, want) in validate_cases {
        let info = PingInfo::decode(&bytes).unwrap();
        assert_eq!(info.validate(max), Err(want.clone()), "{name}");
        assert_eq!(PingInfo::decode_validated(&bytes, max), Err(want), "{name}");
    }
    // The same 201 entries pass with the 2.17 default.
    PingInfo::decode_validated(&too_many, INTERFACES_MAX_DEFAULT).unwrap();
}

#[test]
fn truncation_tells_the_sink_to_use() {
    let good = dump(KERNEL_REPLY)[0x60..].to_vec();
    let err = PingInfo::decode(&good[..32]).unwrap_err();
    assert_eq!(err.needs_bigger_sink(), Some(48));
    assert_eq!(PingError::NoEntries.needs_bigger_sink(), None);
}

#[test]
fn encode_refuses_what_cannot_be_sent() {
    let v6 = nid("fe80::1@tcp");
    let mut info = kernel_tcp_info();
    info.nis.push(NiStatus::up(v6));
    assert_eq!(
        info.encode(),
        Err(PingError::NotNid4 {
            entry: EntryIndex::Nid4(2),
            nid: v6,
        })
    );

    let mut info = kernel_tcp_info();
    info.large.push(LargeNiStatus::new(v6, NiStatusValue::UP));
    assert_eq!(
        info.encode(),
        Err(PingError::LargeWithoutFeature { count: 1 })
    );

    let mut info = kernel_tcp_info();
    info.lo_nid = Nid::ANY;
    let mut out = vec![7u8];
    assert_eq!(
        info.encode_into(&mut out),
        Err(PingError::AnyNid {
            entry: EntryIndex::Nid4(0),
        })
    );
    assert_eq!(out, vec![7u8]);

    let info = kernel_tcp_info().with_large(vec![LargeNiStatus::new(Nid::ANY, NiStatusValue::UP)]);
    assert_eq!(
        info.encode(),
        Err(PingError::AnyNid {
            entry: EntryIndex::Large(0),
        })
    );
}

fn nid4_strategy() -> impl Strategy<Value = Nid> {
    (0u8..0xFF, any::<u16>(), any::<u32>())
        .prop_map(|(t, n, a)| Nid::new(Net::new(LndType(t), n), a))
}

fn large_nid_strategy() -> impl Strategy<Value = Nid> {
    prop_oneof![
        nid4_strategy(),
        (0u8..0xFF, any::<u16>(), any::<[u8; 16]>()).prop_map(|(t, n, a)| Nid {
            net: Net::new(LndType(t), n),
            addr: NidAddr::V6(a),
        }),
    ]
}

fn status_strategy() -> impl Strategy<Value = NiStatusValue> {
    prop_oneof![
        Just(NiStatusValue::UP),
        Just(NiStatusValue::DOWN),
        Just(NiStatusValue::INVALID),
        any::<u32>().prop_map(NiStatusValue),
    ]
}

prop_compose! {
    fn ping_info_strategy()(
        features in any::<u32>(),
        pid in any::<u32>(),
        lo_nid in prop_oneof![Just(Nid::LO_0), nid4_strategy()],
        seqno in any::<u32>(),
        nis in proptest::collection::vec((nid4_strategy(), status_strategy()), 0..8),
        large in proptest::collection::vec((large_nid_strategy(), status_strategy()), 0..4),
        metadata in proptest::collection::vec(any::<u8>(), 0..48),
    ) -> PingInfo {
        let mut features = Features::from_bits(features);
        if !large.is_empty() {
            features.insert(Features::LARGE_ADDR);
        }
        PingInfo {
            features,
            pid,
            lo_nid,
            seqno,
            nis: nis.into_iter().map(|(n, s)| NiStatus::new(n, s)).collect(),
            large: large.into_iter().map(|(n, s)| LargeNiStatus::new(n, s)).collect(),
            metadata,
        }
    }
}

proptest! {
    #[test]
    fn round_trip(info in ping_info_strategy()) {
        let bytes = info.encode().unwrap();
        prop_assert_eq!(bytes.len(), info.encoded_len());
        prop_assert_eq!(&PingInfo::decode(&bytes).unwrap(), &info);
    }

    #[test]
    fn big_endian_decodes_to_the_same_fields(info in ping_info_strategy()) {
        let be = info.encode_big_endian().unwrap();
        prop_assert_eq!(&PingInfo::decode(&be).unwrap(), &info);
    }

    #[test]
    fn every_cut_is_truncated_or_shorter_metadata(info in ping_info_strategy(), cut in 0usize..200) {
        let bytes = info.encode().unwrap();
        let cut = cut.min(bytes.len());
        match PingInfo::decode(&bytes[..cut]) {
            Ok(got) => {
                prop_assert!(cut >= info.info_size());
                prop_assert_eq!(got.metadata.len(), cut - info.info_size());
            }
            Err(e) => {
                prop_assert!(cut < info.info_size());
                prop_assert!(e.needs_bigger_sink().is_some_and(|n| n > cut));
            }
        }
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        if let Ok(info) = PingInfo::decode(&bytes) {
            let again = info.encode().unwrap();
            prop_assert_eq!(PingInfo::decode(&again).unwrap(), info);
        }
    }

    #[test]
    fn mutated_encodings_never_panic(
        info in ping_info_strategy(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = info.encode().unwrap();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if let Ok(info) = PingInfo::decode(&bytes) {
            let _ = info.validate(INTERFACES_MAX_DEFAULT);
            let again = info.encode().unwrap();
            prop_assert_eq!(PingInfo::decode(&again).unwrap(), info);
        }
    }
}
