//! `kib_rej`: the private data of a connection reject.
//!
//! A passive side that refuses a CONNREQ calls `rdma_reject` with a 24-byte `kib_rej` in its
//! own byte order: magic u32 @0, version u16 @4, why u8 @6, padding u8 @7, incarnation u64
//! @8, connparams @16. The active side needs only magic, version and why (7 bytes); it
//! reads incarnation and connparams only when the private data holds all 24 bytes **and**
//! the version is above 0x11. IB-CM pads reject private data (to 148 bytes with OFED), so
//! longer buffers are normal and the extra bytes are ignored.
//!
//! Private data that is too short or does not start with the o2ib magic (or the "unified"
//! [`LNET_PROTO_MAGIC`], which the kernel also accepts here) is not an o2ib reject: the
//! kernel logs a fatal consumer-defined error and gives up on the peer.

use lnet::order::{bytes_at, ByteOrder};

use super::params::{ConnParams, Version, CONN_PARAMS_BYTES};
use super::{IBLND_MSG_MAGIC, LNET_PROTO_MAGIC};

/// Bytes of a full `kib_rej`.
pub const REJ_BYTES: usize = 24;
/// Bytes an active side needs to act on a reject: magic, version and why.
pub const REJ_MIN_BYTES: usize = 7;
/// Bytes [`Rej::encode`] writes when there are no [`RejParams`]: magic, version, why and
/// the padding byte.
pub const REJ_SHORT_BYTES: usize = 8;
/// Reject private data length as delivered by OFED (IB-CM REJ private data size).
pub const OFED_REJ_PRIVATE_DATA_BYTES: usize = 148;

/// Errors from decoding reject private data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RejError {
    /// Fewer than the 7 bytes of magic, version and why. The kernel treats this like a
    /// foreign reject: a fatal consumer-defined error.
    #[error("reject private data of {got} bytes: need at least {expected}")]
    Truncated {
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// The private data does not start with the o2ib magic in either byte order: not an
    /// o2ib reject. The kernel treats this as a fatal consumer-defined error.
    #[error(
        "not an o2ib reject: magic expected {expected:#010x}, got {got:#010x} (read little-endian)"
    )]
    NotO2ib {
        /// `IBLND_MSG_MAGIC`.
        expected: u32,
        /// The first word, read little-endian.
        got: u32,
    },
    /// An o2ib reject with a version other than 0x11 and 0x12. The kernel gives up.
    #[error("o2ib reject with unknown version {got:#x}: expected 0x11 or 0x12")]
    UnknownVersion {
        /// The version received (in the sender's byte order).
        got: u16,
    },
}

/// Which magic a reject carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RejMagic {
    /// `IBLND_MSG_MAGIC` 0x0be91b91: what every kernel sends.
    #[default]
    O2ib,
    /// `LNET_PROTO_MAGIC` 0x45726963: accepted by the kernel as well.
    LnetProto,
}

impl RejMagic {
    /// The magic's value.
    pub fn value(self) -> u32 {
        match self {
            RejMagic::O2ib => IBLND_MSG_MAGIC,
            RejMagic::LnetProto => LNET_PROTO_MAGIC,
        }
    }
}

/// Why a connection was refused (`ibr_why`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejWhy {
    /// 1: connection race lost; the requester reconnects later.
    ConnRace,
    /// 2: out of resources; the requester gives up.
    NoResources,
    /// 3: fatal; the requester gives up (with version 0x11: see [`Rej::effective_why`]).
    Fatal,
    /// 4: incompatible version; the requester reconnects with the rejecter's version.
    ConnUncompat,
    /// 5: stale incarnation; the requester reconnects and adopts the rejecter's incarnation.
    ConnStale,
    /// 6: `max_frags` too large; the requester adopts the rejecter's if smaller.
    RdmaFrags,
    /// 7: `queue_depth` too large; the requester adopts the rejecter's if smaller.
    MsgQueueSize,
    /// 8: defined, never sent.
    InvalidSrvId,
    /// 9: the rejecter's NI is not up yet; the requester gives up for now.
    Early,
    /// Any other value, kept as received. Never holds a value listed above.
    Other(u8),
}

impl RejWhy {
    /// Every reason with a name of its own, in wire order (1 to 9).
    pub const NAMED: [RejWhy; 9] = [
        RejWhy::ConnRace,
        RejWhy::NoResources,
        RejWhy::Fatal,
        RejWhy::ConnUncompat,
        RejWhy::ConnStale,
        RejWhy::RdmaFrags,
        RejWhy::MsgQueueSize,
        RejWhy::InvalidSrvId,
        RejWhy::Early,
    ];

    /// A stable snake_case name (the kernel's `IBLND_REJECT_*` without the prefix), for
    /// logs and metric labels; `other` for any value without a name.
    pub fn name(self) -> &'static str {
        match self {
            RejWhy::ConnRace => "conn_race",
            RejWhy::NoResources => "no_resources",
            RejWhy::Fatal => "fatal",
            RejWhy::ConnUncompat => "conn_uncompat",
            RejWhy::ConnStale => "conn_stale",
            RejWhy::RdmaFrags => "rdma_frags",
            RejWhy::MsgQueueSize => "msg_queue_size",
            RejWhy::InvalidSrvId => "invalid_srv_id",
            RejWhy::Early => "early",
            RejWhy::Other(_) => "other",
        }
    }

    /// The reason with this wire value.
    pub fn from_u8(v: u8) -> RejWhy {
        match v {
            1 => RejWhy::ConnRace,
            2 => RejWhy::NoResources,
            3 => RejWhy::Fatal,
            4 => RejWhy::ConnUncompat,
            5 => RejWhy::ConnStale,
            6 => RejWhy::RdmaFrags,
            7 => RejWhy::MsgQueueSize,
            8 => RejWhy::InvalidSrvId,
            9 => RejWhy::Early,
            other => RejWhy::Other(other),
        }
    }

    /// The wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            RejWhy::ConnRace => 1,
            RejWhy::NoResources => 2,
            RejWhy::Fatal => 3,
            RejWhy::ConnUncompat => 4,
            RejWhy::ConnStale => 5,
            RejWhy::RdmaFrags => 6,
            RejWhy::MsgQueueSize => 7,
            RejWhy::InvalidSrvId => 8,
            RejWhy::Early => 9,
            RejWhy::Other(v) => v,
        }
    }
}

/// The part of a reject after `why`, used only with version 0x12 and a full 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RejParams {
    /// The rejecter's incarnation, or 0 if it has no NI for the request.
    pub incarnation: u64,
    /// What the rejecter accepts: {its queue depth, 257, 4096} when it found an NI, else
    /// only `max_msg_size` is set.
    pub connparams: ConnParams,
}

/// A connection reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rej {
    /// The magic it carried.
    pub magic: RejMagic,
    /// The version the rejecter speaks (or the requester's).
    pub version: Version,
    /// Why.
    pub why: RejWhy,
    /// Incarnation and connparams. `None` when the private data was shorter than 24 bytes
    /// or the version is 0x11 (the kernel then uses incarnation −1 and no connparams).
    pub params: Option<RejParams>,
}

impl Rej {
    /// Decodes reject private data. See [`Rej::decode_ordered`].
    pub fn decode(buf: &[u8]) -> Result<Rej, RejError> {
        Self::decode_ordered(buf).map(|(rej, _)| rej)
    }

    /// Decodes reject private data (possibly padded) and tells the sender's byte order.
    pub fn decode_ordered(buf: &[u8]) -> Result<(Rej, ByteOrder), RejError> {
        let magic_bytes = bytes_at::<4>(buf, 0)
            .filter(|_| buf.len() >= REJ_MIN_BYTES)
            .ok_or(RejError::Truncated {
                expected: REJ_MIN_BYTES,
                got: buf.len(),
            })?;
        let (magic, order) = [RejMagic::O2ib, RejMagic::LnetProto]
            .into_iter()
            .find_map(|m| ByteOrder::detect(magic_bytes, m.value()).map(|o| (m, o)))
            .ok_or(RejError::NotO2ib {
                expected: IBLND_MSG_MAGIC,
                got: u32::from_le_bytes(magic_bytes),
            })?;
        let raw_version = order.u16_at(buf, 4).unwrap_or_default();
        let version =
            Version::from_u16(raw_version).ok_or(RejError::UnknownVersion { got: raw_version })?;
        let why = RejWhy::from_u8(buf.get(6).copied().unwrap_or_default());
        let params = if version > Version::V1 {
            let incarnation = order.u64_at(buf, 8);
            let cp: Option<[u8; CONN_PARAMS_BYTES]> =
                buf.get(16..REJ_BYTES).and_then(|s| s.try_into().ok());
            incarnation.zip(cp).map(|(incarnation, cp)| RejParams {
                incarnation,
                connparams: ConnParams::from_bytes(cp, order),
            })
        } else {
            None
        };
        Ok((
            Rej {
                magic,
                version,
                why,
                params,
            },
            order,
        ))
    }

    /// Encodes the reject little-endian: 24 bytes with [`RejParams`], else the 8 bytes of
    /// magic, version, why and padding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REJ_BYTES);
        out.extend_from_slice(&self.magic.value().to_le_bytes());
        out.extend_from_slice(&self.version.to_u16().to_le_bytes());
        out.push(self.why.to_u8());
        out.push(0);
        if let Some(p) = &self.params {
            out.extend_from_slice(&p.incarnation.to_le_bytes());
            out.extend_from_slice(&p.connparams.to_le_bytes());
        }
        out
    }

    /// The reason an active side acts on, given the version it requested: a FATAL from a
    /// v1 (0x11) rejecter answering a v2 request means "old peer", handled as
    /// CONN_UNCOMPAT so the retry uses v1.
    pub fn effective_why(&self, requested: Version) -> RejWhy {
        if self.why == RejWhy::Fatal && self.version == Version::V1 && requested != Version::V1 {
            RejWhy::ConnUncompat
        } else {
            self.why
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn full() -> Rej {
        Rej {
            magic: RejMagic::O2ib,
            version: Version::V2,
            why: RejWhy::ConnStale,
            params: Some(RejParams {
                incarnation: 0x0006_60d3_a393_d764,
                connparams: ConnParams::DEFAULT,
            }),
        }
    }

    #[test]
    fn named_reasons_are_the_wire_values_one_to_nine_with_distinct_names() {
        let codes: Vec<u8> = RejWhy::NAMED.iter().map(|w| w.to_u8()).collect();
        assert_eq!(codes, (1..=9).collect::<Vec<u8>>());
        let mut names: Vec<&str> = RejWhy::NAMED.iter().map(|w| w.name()).collect();
        assert_eq!(names[0], "conn_race");
        names.push(RejWhy::from_u8(0).name());
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 10, "{names:?}");
        assert_eq!(RejWhy::from_u8(42).name(), "other");
    }

    #[test]
    fn full_reject_layout() {
        let b = full().encode();
        assert_eq!(b.len(), REJ_BYTES);
        assert_eq!(
            b,
            [
                0x91, 0x1b, 0xe9, 0x0b, 0x12, 0x00, 0x05, 0x00, // magic, version, why, pad
                0x64, 0xd7, 0x93, 0xa3, 0xd3, 0x60, 0x06, 0x00, // incarnation
                0x08, 0x00, 0x01, 0x01, 0x00, 0x10, 0x00, 0x00, // connparams
            ]
        );
        assert_eq!(Rej::decode_ordered(&b), Ok((full(), ByteOrder::Little)));
    }

    #[test]
    fn ofed_padding_is_ignored() {
        let mut b = full().encode();
        b.resize(OFED_REJ_PRIVATE_DATA_BYTES, 0xaa);
        assert_eq!(Rej::decode(&b), Ok(full()));
    }

    #[test]
    fn short_forms_carry_only_what_is_there() {
        let b = full().encode();
        for len in REJ_MIN_BYTES..REJ_BYTES {
            let rej = Rej::decode(&b[..len]).unwrap();
            assert_eq!(rej.why, RejWhy::ConnStale);
            assert_eq!(rej.version, Version::V2);
            assert_eq!(rej.params, None, "len {len}");
        }
        for len in 0..REJ_MIN_BYTES {
            assert_eq!(
                Rej::decode(&b[..len]),
                Err(RejError::Truncated {
                    expected: 7,
                    got: len
                })
            );
        }
    }

    #[test]
    fn v1_reject_ignores_params() {
        let mut r = full();
        r.version = Version::V1;
        r.why = RejWhy::Fatal;
        let b = r.encode();
        assert_eq!(b.len(), 24);
        let got = Rej::decode(&b).unwrap();
        assert_eq!(got.params, None);
        assert_eq!(got.effective_why(Version::V2), RejWhy::ConnUncompat);
        assert_eq!(got.effective_why(Version::V1), RejWhy::Fatal);
        assert_eq!(full().effective_why(Version::V2), RejWhy::ConnStale);
    }

    #[test]
    fn foreign_and_bad_version() {
        let mut b = full().encode();
        b[0] = 0;
        assert_eq!(
            Rej::decode(&b),
            Err(RejError::NotO2ib {
                expected: IBLND_MSG_MAGIC,
                got: 0x0be9_1b00
            })
        );
        let mut b = full().encode();
        b[4] = 0x13;
        assert_eq!(Rej::decode(&b), Err(RejError::UnknownVersion { got: 0x13 }));
        // All zeros (an empty reject padded by the CM) is not an o2ib reject.
        assert!(matches!(
            Rej::decode(&[0; OFED_REJ_PRIVATE_DATA_BYTES]),
            Err(RejError::NotO2ib { got: 0, .. })
        ));
    }

    #[test]
    fn lnet_proto_magic_is_accepted() {
        let mut r = full();
        r.magic = RejMagic::LnetProto;
        let b = r.encode();
        assert_eq!(&b[..4], b"cirE");
        assert_eq!(Rej::decode(&b), Ok(r));
    }

    #[test]
    fn why_codes() {
        let named = [
            (RejWhy::ConnRace, 1),
            (RejWhy::NoResources, 2),
            (RejWhy::Fatal, 3),
            (RejWhy::ConnUncompat, 4),
            (RejWhy::ConnStale, 5),
            (RejWhy::RdmaFrags, 6),
            (RejWhy::MsgQueueSize, 7),
            (RejWhy::InvalidSrvId, 8),
            (RejWhy::Early, 9),
        ];
        for (why, code) in named {
            assert_eq!(why.to_u8(), code);
            assert_eq!(RejWhy::from_u8(code), why);
        }
        assert_eq!(RejWhy::from_u8(0), RejWhy::Other(0));
        assert_eq!(RejWhy::from_u8(200), RejWhy::Other(200));
        assert_eq!(RejWhy::Other(200).to_u8(), 200);
    }

    /// The same reject as a big-endian host writes it.
    fn swap_rej(le: &[u8]) -> Vec<u8> {
        let mut b = le.to_vec();
        for (at, n) in [(0, 4), (4, 2), (8, 8), (16, 2), (18, 2), (20, 4)] {
            if let Some(s) = b.get_mut(at..at + n) {
                s.reverse();
            }
        }
        b
    }

    #[test]
    fn big_endian_reject() {
        let be = swap_rej(&full().encode());
        assert_eq!(&be[..8], &[0x0b, 0xe9, 0x1b, 0x91, 0x00, 0x12, 0x05, 0x00]);
        assert_eq!(Rej::decode_ordered(&be), Ok((full(), ByteOrder::Big)));
        assert_eq!(Rej::decode(&be[..7]).unwrap().why, RejWhy::ConnStale);
    }

    fn arb_rej() -> impl Strategy<Value = Rej> {
        (
            prop_oneof![Just(RejMagic::O2ib), Just(RejMagic::LnetProto)],
            prop_oneof![Just(Version::V1), Just(Version::V2)],
            any::<u8>().prop_map(RejWhy::from_u8),
            proptest::option::of((any::<u64>(), any::<[u16; 2]>(), any::<u32>())),
        )
            .prop_map(|(magic, version, why, params)| Rej {
                magic,
                version,
                why,
                // v1 rejects never carry readable params.
                params: params.filter(|_| version == Version::V2).map(
                    |(incarnation, [queue_depth, max_frags], max_msg_size)| RejParams {
                        incarnation,
                        connparams: ConnParams {
                            queue_depth,
                            max_frags,
                            max_msg_size,
                        },
                    },
                ),
            })
    }

    proptest! {
        #[test]
        fn rej_round_trip_both_orders(rej in arb_rej(), pad in 0usize..140) {
            let le = rej.encode();
            prop_assert_eq!(Rej::decode_ordered(&le), Ok((rej, ByteOrder::Little)));
            let mut be = swap_rej(&le);
            prop_assert_eq!(Rej::decode_ordered(&be), Ok((rej, ByteOrder::Big)));
            // Padding with zeros (as the CM does) keeps the reject, except that an 8-byte
            // v2 reject padded to 24 bytes or more now has (zero) params to read.
            be.resize(be.len() + pad, 0);
            let mut want = rej;
            if want.version == Version::V2 && want.params.is_none() && be.len() >= REJ_BYTES {
                want.params = Some(RejParams {
                    incarnation: 0,
                    connparams: ConnParams { queue_depth: 0, max_frags: 0, max_msg_size: 0 },
                });
            }
            prop_assert_eq!(Rej::decode(&be), Ok(want));
        }

        #[test]
        fn rej_decode_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Rej::decode(&buf);
        }
    }
}
