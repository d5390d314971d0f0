//! Property tests: every NID form and every header form decodes to what was encoded, and
//! every NID prints to text that parses back to it.

use lnet::{Header, HeaderForm, LndType, Message, Net, Nid, NidAddr, ProcessId, WireHandle};
use proptest::prelude::*;

/// Any named LND type; unnamed ones too, which print as `<type:num>`.
fn lnd_type() -> impl Strategy<Value = LndType> {
    prop_oneof![
        proptest::sample::select(LndType::named().collect::<Vec<_>>()),
        (0u8..0xFF).prop_map(LndType),
    ]
}

fn net() -> impl Strategy<Value = Net> {
    (lnd_type(), any::<u16>()).prop_map(|(lnd, num)| {
        // `lo` has only number 0.
        if lnd == LndType::LOLND {
            Net::LO
        } else {
            Net::new(lnd, num)
        }
    })
}

/// NIDs with a 4-byte address (every form has one).
fn nid4() -> impl Strategy<Value = Nid> {
    prop_oneof![
        (net(), any::<u32>()).prop_map(|(net, addr)| {
            let addr = if net.lnd == LndType::LOLND { 0 } else { addr };
            Nid::new(net, addr)
        }),
        Just(Nid::ANY),
    ]
}

/// NIDs with a 16-byte address: IP LNDs only.
fn nid6() -> impl Strategy<Value = Nid> {
    (
        proptest::sample::select(vec![
            LndType::SOCKLND,
            LndType::O2IBLND,
            LndType::GNIIPLND,
            LndType::EFALND,
        ]),
        any::<u16>(),
        any::<[u8; 16]>(),
    )
        .prop_map(|(lnd, num, a)| Nid {
            net: Net::new(lnd, num),
            addr: NidAddr::V6(a),
        })
}

fn any_nid() -> impl Strategy<Value = Nid> {
    prop_oneof![nid4(), nid6()]
}

fn handle() -> impl Strategy<Value = WireHandle> {
    (any::<u64>(), any::<u64>()).prop_map(|(i, o)| WireHandle {
        interface_cookie: i,
        object_cookie: o,
    })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (handle(), any::<u64>(), any::<u32>()).prop_map(|(dst_wmd, match_bits, mlength)| {
            Message::Ack {
                dst_wmd,
                match_bits,
                mlength,
            }
        }),
        (
            handle(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(ack_wmd, match_bits, hdr_data, ptl_index, offset)| Message::Put {
                    ack_wmd,
                    match_bits,
                    hdr_data,
                    ptl_index,
                    offset,
                }
            ),
        (
            handle(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(return_wmd, match_bits, ptl_index, src_offset, sink_length)| Message::Get {
                    return_wmd,
                    match_bits,
                    ptl_index,
                    src_offset,
                    sink_length,
                }
            ),
        handle().prop_map(|dst_wmd| Message::Reply { dst_wmd }),
        (any::<u64>(), any::<u32>()).prop_map(|(incarnation, conn_type)| Message::Hello {
            incarnation,
            conn_type,
        }),
    ]
}

fn header(nids: fn() -> BoxedStrategy<Nid>) -> impl Strategy<Value = Header> {
    (
        nids(),
        nids(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        message(),
    )
        .prop_map(
            |(dest_nid, src_nid, dest_pid, src_pid, payload_length, msg)| Header {
                dest_nid,
                src_nid,
                dest_pid,
                src_pid,
                payload_length,
                msg,
            },
        )
}

proptest! {
    #[test]
    fn nid_text_round_trip(nid in any_nid()) {
        prop_assert_eq!(nid.to_string().parse::<Nid>(), Ok(nid));
    }

    #[test]
    fn net_text_round_trip(net in net()) {
        prop_assert_eq!(net.to_string().parse::<Net>(), Ok(net));
    }

    #[test]
    fn process_id_text_round_trip(nid in any_nid(), pid in any::<u32>()) {
        let id = ProcessId { nid, pid };
        prop_assert_eq!(id.to_string().parse::<ProcessId>(), Ok(id));
    }

    #[test]
    fn nid4_wire_round_trip(nid in nid4()) {
        let raw = nid.to_nid4().unwrap();
        prop_assert_eq!(Nid::from_nid4(raw), Ok(nid));
    }

    #[test]
    fn large_wire_round_trip(nid in any_nid()) {
        prop_assert_eq!(Nid::from_large_bytes(&nid.to_large_bytes()), Ok(nid));
    }

    #[test]
    fn header_nid4_round_trip(h in header(|| nid4().boxed())) {
        let bytes = h.encode_nid4().unwrap();
        prop_assert_eq!(Header::decode(&bytes, HeaderForm::Nid4), Ok(h));
    }

    #[test]
    fn header_large_round_trip(h in header(|| any_nid().boxed())) {
        let bytes = h.encode_large();
        prop_assert_eq!(Header::decode(&bytes, HeaderForm::Large), Ok(h));
    }

    #[test]
    fn header_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = Header::decode(&bytes, HeaderForm::Nid4);
        let _ = Header::decode(&bytes, HeaderForm::Large);
    }
}
