//! The acceptor connection request: the first bytes on every socklnd TCP connection.
//!
//! The active side sends it without waiting for anything, then its HELLO. It names the NID
//! the connector wants to reach on the passive node:
//!
//! | version | length | layout |
//! |---|---|---|
//! | 1 | 16 bytes | magic `u32`, version `u32`, nid4 `u64`, all in sender order |
//! | 2 | 28 bytes | magic `u32`, version `u32` (sender order), 20-byte large NID (never swapped) |
//!
//! Version 1 is used whenever the target NID has a 64-bit form, version 2 otherwise.
//! [`AcceptorRequest::encode`] writes little-endian; [`AcceptorRequest::decode`] takes the
//! magic in either byte order.
//!
//! The passive side reads the magic, then the version, then the NID, so it cannot know the
//! length in advance. [`AcceptorRequest::decode`] is incremental: given the bytes read so
//! far it says how many it needs in total ([`Decoded::Incomplete`]), or that it is done
//! ([`Decoded::Complete`]), or why the connection must be refused. For two refusals the
//! kernel first writes a 16-byte "I am old" request back
//! ([`AcceptorError::reply_before_close`]); no request is ever acknowledged otherwise.

use std::ops::RangeInclusive;

use crate::nid::{Nid, NidError, LARGE_NID_BYTES};
use crate::order::{bytes_at, ByteOrder};

/// `LNET_PROTO_ACCEPTOR_MAGIC`: first word of an acceptor connection request.
pub const ACCEPTOR_MAGIC: u32 = 0xACCE_7100;

/// `LNET_PROTO_MAGIC` ("Eric"): magic of the socklnd HELLO (V2 and later).
///
/// As the first word on a connection it means a peer speaking a protocol newer than the
/// acceptor's; the kernel answers with [`old_version_reply`] and closes.
pub const LNET_PROTO_MAGIC: u32 = 0x4572_6963;

/// `LNET_PROTO_TCP_MAGIC`: the magic of the old tcpnal/socknal protocol, refused.
pub const LNET_PROTO_TCP_MAGIC: u32 = 0xEEBC_0DED;

/// Default TCP port of the acceptor (`accept_port`).
pub const ACCEPTOR_PORT: u16 = 988;

/// Lowest local port an active side binds to (`LNET_ACCEPTOR_MIN_RESERVED_PORT`).
pub const MIN_RESERVED_PORT: u16 = 512;

/// Highest local port an active side binds to (`LNET_ACCEPTOR_MAX_RESERVED_PORT`); it tries
/// this one first and goes down.
pub const MAX_RESERVED_PORT: u16 = 1023;

/// The reserved source ports: with `accept=secure` (the default) the kernel closes
/// connections from any other port.
pub const RESERVED_PORTS: RangeInclusive<u16> = MIN_RESERVED_PORT..=MAX_RESERVED_PORT;

/// Bytes of the magic and version words that start every request.
const PREFIX_LEN: usize = 8;

/// The version of an acceptor connection request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcceptorVersion {
    /// Version 1 (`LNET_PROTO_ACCEPTOR_VERSION`): a 64-bit NID, 16 bytes in all.
    V1,
    /// Version 2 (`LNET_PROTO_ACCEPTOR_VERSION_16`): a 20-byte large NID, 28 bytes in all.
    V2,
}

impl AcceptorVersion {
    /// The version number on the wire.
    pub const fn to_u32(self) -> u32 {
        match self {
            AcceptorVersion::V1 => 1,
            AcceptorVersion::V2 => 2,
        }
    }

    /// The version for a number on the wire, if it is one this side speaks.
    pub const fn from_u32(value: u32) -> Option<AcceptorVersion> {
        match value {
            1 => Some(AcceptorVersion::V1),
            2 => Some(AcceptorVersion::V2),
            _ => None,
        }
    }

    /// The whole request's length in bytes for this version.
    pub const fn wire_len(self) -> usize {
        match self {
            AcceptorVersion::V1 => 16,
            AcceptorVersion::V2 => PREFIX_LEN + LARGE_NID_BYTES,
        }
    }
}

/// Errors from decoding or encoding an acceptor connection request.
///
/// Every decoding error means: refuse the connection. For [`AcceptorError::ProtoMagic`]
/// and [`AcceptorError::UnknownVersion`] the kernel writes [`old_version_reply`] first
/// ([`AcceptorError::reply_before_close`] says when).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptorError {
    /// The first word is no magic this side knows.
    #[error(
        "bad acceptor magic {got:#010x}: expected {ACCEPTOR_MAGIC:#010x} in either byte order"
    )]
    BadMagic {
        /// The first word, read little-endian.
        got: u32,
    },
    /// The first word is the old tcpnal/socknal magic.
    #[error("refusing 'old' socknal/tcpnal acceptor protocol (magic {got:#010x})")]
    OldTcpnal {
        /// The first word, read little-endian.
        got: u32,
    },
    /// The first word is `LNET_PROTO_MAGIC`: the peer speaks a newer protocol and expects
    /// to be told this side is "old".
    #[error("peer sent LNET_PROTO_MAGIC ({got:#010x}) instead of an acceptor request")]
    ProtoMagic {
        /// The first word, read little-endian.
        got: u32,
    },
    /// The magic is right but the version is neither 1 nor 2.
    #[error("unknown acceptor version {version}: expected 1 or 2")]
    UnknownVersion {
        /// The version, in the sender's byte order made native.
        version: u32,
    },
    /// The request names `LNET_NID_ANY` (or a NID of the wildcard type), which no NI has.
    #[error("acceptor request names LNET_NID_ANY")]
    AnyNid,
    /// The NID in the request cannot be decoded.
    #[error("bad NID in acceptor request: {source}")]
    BadNid {
        /// Why the NID was refused.
        #[source]
        source: NidError,
    },
    /// A version 1 request was asked for with a NID that has no 64-bit form.
    #[error("acceptor version 1 carries only 64-bit NIDs; {nid} needs version 2")]
    NotNid4 {
        /// The NID.
        nid: Nid,
    },
}

impl AcceptorError {
    /// The bytes the kernel writes back before closing, for the errors where it does:
    /// `LNET_PROTO_MAGIC` and an unknown version both get [`old_version_reply`].
    pub fn reply_before_close(&self) -> Option<[u8; 16]> {
        match self {
            AcceptorError::ProtoMagic { .. } | AcceptorError::UnknownVersion { .. } => {
                Some(old_version_reply())
            }
            _ => None,
        }
    }
}

/// The 16-byte version 1 request `{ACCEPTOR_MAGIC, 1, nid 0}` (little-endian) by which a
/// node tells a peer it is "old": the answer to `LNET_PROTO_MAGIC` and to an unknown
/// acceptor version, just before closing.
pub fn old_version_reply() -> [u8; 16] {
    let m = ACCEPTOR_MAGIC.to_le_bytes();
    let v = AcceptorVersion::V1.to_u32().to_le_bytes();
    [
        m[0], m[1], m[2], m[3], v[0], v[1], v[2], v[3], 0, 0, 0, 0, 0, 0, 0, 0,
    ]
}

/// An acceptor connection request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AcceptorRequest {
    /// The request version; decides how the NID is written.
    pub version: AcceptorVersion,
    /// The NID the connector wants to reach (an NI of the passive node).
    pub nid: Nid,
}

/// What [`AcceptorRequest::decode`] made of the bytes read so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// Not enough bytes yet: call again once the buffer holds `needed` bytes in total.
    Incomplete {
        /// Total bytes (from the start of the request) needed for the next step.
        needed: usize,
    },
    /// A whole request.
    Complete {
        /// The request.
        request: AcceptorRequest,
        /// Bytes it took from the start of the buffer; what follows is the HELLO.
        consumed: usize,
    },
}

impl AcceptorRequest {
    /// The request the kernel would send to reach `nid`: version 1 if the NID has a 64-bit
    /// form, version 2 otherwise. `LNET_NID_ANY` is refused.
    pub fn new(nid: Nid) -> Result<AcceptorRequest, AcceptorError> {
        if nid.is_any() {
            return Err(AcceptorError::AnyNid);
        }
        let version = if nid.is_nid4() {
            AcceptorVersion::V1
        } else {
            AcceptorVersion::V2
        };
        Ok(AcceptorRequest { version, nid })
    }

    /// The request's length on the wire.
    pub const fn wire_len(&self) -> usize {
        self.version.wire_len()
    }

    /// The request's bytes, little-endian.
    pub fn encode(&self) -> Result<Vec<u8>, AcceptorError> {
        let mut out = Vec::with_capacity(self.wire_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Appends the request's bytes (little-endian) to `out`. On error nothing is appended.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), AcceptorError> {
        if self.nid.is_any() {
            return Err(AcceptorError::AnyNid);
        }
        let nid4 = match self.version {
            AcceptorVersion::V1 => Some(
                self.nid
                    .to_nid4()
                    .map_err(|_| AcceptorError::NotNid4 { nid: self.nid })?,
            ),
            AcceptorVersion::V2 => None,
        };
        out.extend_from_slice(&ACCEPTOR_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.version.to_u32().to_le_bytes());
        match nid4 {
            Some(raw) => out.extend_from_slice(&raw.to_le_bytes()),
            None => out.extend_from_slice(&self.nid.to_large_bytes()),
        }
        Ok(())
    }

    /// Decodes a request from the bytes received so far (starting at the request's first
    /// byte), in the order the kernel acceptor reads them: magic, version, NID.
    ///
    /// A refusal is reported as soon as the bytes show it: `LNET_PROTO_MAGIC` after 4
    /// bytes, an unknown version after 8, without waiting for a NID that never comes.
    pub fn decode(buf: &[u8]) -> Result<Decoded, AcceptorError> {
        let Some(first4) = bytes_at::<4>(buf, 0) else {
            return Ok(Decoded::Incomplete { needed: 4 });
        };
        let magic = u32::from_le_bytes(first4);
        let Some(order) = ByteOrder::detect(first4, ACCEPTOR_MAGIC) else {
            return Err(if ByteOrder::detect(first4, LNET_PROTO_MAGIC).is_some() {
                AcceptorError::ProtoMagic { got: magic }
            } else if ByteOrder::detect(first4, LNET_PROTO_TCP_MAGIC).is_some() {
                AcceptorError::OldTcpnal { got: magic }
            } else {
                AcceptorError::BadMagic { got: magic }
            });
        };
        let Some(version_number) = order.u32_at(buf, 4) else {
            return Ok(Decoded::Incomplete { needed: PREFIX_LEN });
        };
        let version =
            AcceptorVersion::from_u32(version_number).ok_or(AcceptorError::UnknownVersion {
                version: version_number,
            })?;
        let needed = version.wire_len();
        let Some(nid_bytes) = buf.get(PREFIX_LEN..needed) else {
            return Ok(Decoded::Incomplete { needed });
        };
        let nid = match version {
            AcceptorVersion::V1 => {
                let raw = order.u64_at(nid_bytes, 0).ok_or(AcceptorError::BadNid {
                    source: NidError::Truncated {
                        expected: 8,
                        got: nid_bytes.len(),
                    },
                })?;
                Nid::from_nid4(raw).map_err(|source| AcceptorError::BadNid { source })?
            }
            // A large NID is defined in network order and never swapped.
            AcceptorVersion::V2 => Nid::from_large_bytes(nid_bytes)
                .map_err(|source| AcceptorError::BadNid { source })?,
        };
        if nid.is_any() {
            return Err(AcceptorError::AnyNid);
        }
        Ok(Decoded::Complete {
            request: AcceptorRequest { version, nid },
            consumed: needed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nid::{LndType, Net, NidAddr};
    use proptest::prelude::*;

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    fn unhex(s: &str) -> Vec<u8> {
        let compact: String = s.split_whitespace().collect();
        hex::decode(compact).unwrap()
    }

    fn complete(buf: &[u8]) -> (AcceptorRequest, usize) {
        match AcceptorRequest::decode(buf).unwrap() {
            Decoded::Complete { request, consumed } => (request, consumed),
            other => panic!("expected a whole request, got {other:?}"),
        }
    }

    /// Spec 7.1: the peer's version 1 request for 192.168.1.1@tcp.
    const SPEC_7_1: &str = "00 71 ce ac 01 00 00 00 01 01 a8 c0 00 00 02 00";

    #[test]
    fn spec_7_1_decodes_and_encodes_byte_for_byte() {
        let bytes = unhex(SPEC_7_1);
        let (req, consumed) = complete(&bytes);
        assert_eq!(consumed, 16);
        assert_eq!(
            req,
            AcceptorRequest {
                version: AcceptorVersion::V1,
                nid: nid("192.168.1.1@tcp"),
            }
        );
        assert_eq!(req.encode().unwrap(), bytes);
        assert_eq!(AcceptorRequest::new(nid("192.168.1.1@tcp")).unwrap(), req);
    }

    #[test]
    fn trailing_hello_bytes_are_not_consumed() {
        let mut bytes = unhex(SPEC_7_1);
        bytes.extend_from_slice(&LNET_PROTO_MAGIC.to_le_bytes());
        let (_, consumed) = complete(&bytes);
        assert_eq!(consumed, 16);
    }

    #[test]
    fn byte_swapped_v1_swaps_version_and_nid() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&ACCEPTOR_MAGIC.to_be_bytes());
        bytes.extend_from_slice(&1u32.to_be_bytes());
        bytes.extend_from_slice(&0x0002_0000_C0A8_0101u64.to_be_bytes());
        assert_eq!(hex::encode(&bytes[..4]), "acce7100");
        let (req, consumed) = complete(&bytes);
        assert_eq!(consumed, 16);
        assert_eq!(req.version, AcceptorVersion::V1);
        assert_eq!(req.nid, nid("192.168.1.1@tcp"));
        // We always answer and send in little-endian.
        assert_eq!(req.encode().unwrap(), unhex(SPEC_7_1));
    }

    #[test]
    fn v2_large_nid_is_never_swapped() {
        let target = nid("fe80::1@tcp2");
        let req = AcceptorRequest::new(target).unwrap();
        assert_eq!(req.version, AcceptorVersion::V2);
        let le = req.encode().unwrap();
        assert_eq!(le.len(), 28);
        assert_eq!(&le[..8], &unhex("00 71 ce ac 02 00 00 00")[..]);
        assert_eq!(&le[8..], &target.to_large_bytes()[..]);

        let mut be = Vec::new();
        be.extend_from_slice(&ACCEPTOR_MAGIC.to_be_bytes());
        be.extend_from_slice(&2u32.to_be_bytes());
        be.extend_from_slice(&target.to_large_bytes());
        let (got, consumed) = complete(&be);
        assert_eq!(consumed, 28);
        assert_eq!(got, req);
    }

    #[test]
    fn v2_can_carry_an_ipv4_nid() {
        let req = AcceptorRequest {
            version: AcceptorVersion::V2,
            nid: nid("10.0.0.1@o2ib1"),
        };
        let bytes = req.encode().unwrap();
        assert_eq!(bytes.len(), 28);
        assert_eq!(complete(&bytes), (req, 28));
    }

    #[test]
    fn decode_is_incremental() {
        let bytes = unhex(SPEC_7_1);
        for n in 0..bytes.len() {
            let want = match n {
                0..=3 => 4,
                4..=7 => 8,
                _ => 16,
            };
            assert_eq!(
                AcceptorRequest::decode(&bytes[..n]),
                Ok(Decoded::Incomplete { needed: want }),
                "{n} bytes"
            );
        }
        let v2 = AcceptorRequest::new(nid("2001:db8::7@tcp")).unwrap();
        let bytes = v2.encode().unwrap();
        for n in 8..bytes.len() {
            assert_eq!(
                AcceptorRequest::decode(&bytes[..n]),
                Ok(Decoded::Incomplete { needed: 28 })
            );
        }
    }

    #[test]
    fn kernel_replies_before_closing_only_where_it_does() {
        let reply = old_version_reply();
        assert_eq!(
            reply.to_vec(),
            unhex("00 71 ce ac 01 00 00 00 00 00 00 00 00 00 00 00")
        );
        assert_eq!(
            AcceptorError::ProtoMagic {
                got: LNET_PROTO_MAGIC
            }
            .reply_before_close(),
            Some(reply)
        );
        assert_eq!(
            AcceptorError::UnknownVersion { version: 3 }.reply_before_close(),
            Some(reply)
        );
        assert_eq!(
            AcceptorError::BadMagic { got: 0 }.reply_before_close(),
            None
        );
        assert_eq!(AcceptorError::AnyNid.reply_before_close(), None);
    }

    #[test]
    fn ports() {
        assert_eq!(ACCEPTOR_PORT, 988);
        assert!(RESERVED_PORTS.contains(&512));
        assert!(RESERVED_PORTS.contains(&1023));
        assert!(!RESERVED_PORTS.contains(&1024));
        assert!(!RESERVED_PORTS.contains(&511));
    }

    #[test]
    fn malformed_inputs_get_specific_errors() {
        let mut any_v2 = unhex("00 71 ce ac 02 00 00 00");
        any_v2.extend_from_slice(&[0xFF; 20]);
        let mut odd_size_v2 = unhex("00 71 ce ac 02 00 00 00");
        let mut large = nid("10.0.0.1@tcp").to_large_bytes();
        large[0] = 4;
        odd_size_v2.extend_from_slice(&large);

        let cases: Vec<(&str, Vec<u8>, AcceptorError)> = vec![
            (
                "LNET_PROTO_MAGIC (HELLO without a request)",
                unhex("63 69 72 45 03 00 00 00"),
                AcceptorError::ProtoMagic {
                    got: LNET_PROTO_MAGIC,
                },
            ),
            (
                "LNET_PROTO_MAGIC byte-swapped, 4 bytes are enough",
                unhex("45 72 69 63"),
                AcceptorError::ProtoMagic {
                    got: LNET_PROTO_MAGIC.swap_bytes(),
                },
            ),
            (
                "old tcpnal magic",
                unhex("ed 0d bc ee"),
                AcceptorError::OldTcpnal {
                    got: LNET_PROTO_TCP_MAGIC,
                },
            ),
            (
                "bad magic",
                unhex("de ad be ef 01 00 00 00"),
                AcceptorError::BadMagic { got: 0xEFBE_ADDE },
            ),
            (
                "version 3, 8 bytes are enough",
                unhex("00 71 ce ac 03 00 00 00"),
                AcceptorError::UnknownVersion { version: 3 },
            ),
            (
                "version 0 swapped",
                unhex("ac ce 71 00 00 00 00 00"),
                AcceptorError::UnknownVersion { version: 0 },
            ),
            (
                "byte-swapped version 3",
                unhex("ac ce 71 00 00 00 00 03"),
                AcceptorError::UnknownVersion { version: 3 },
            ),
            (
                "nid4 with its top byte set",
                unhex("00 71 ce ac 01 00 00 00 01 00 00 0a 00 00 02 01"),
                AcceptorError::BadNid {
                    source: NidError::TopByteSet {
                        raw: 0x0102_0000_0a00_0001,
                    },
                },
            ),
            (
                "LNET_NID_ANY v1",
                unhex("00 71 ce ac 01 00 00 00 ff ff ff ff ff ff ff ff"),
                AcceptorError::AnyNid,
            ),
            (
                "wildcard LND type v1",
                unhex("00 71 ce ac 01 00 00 00 01 00 00 0a 00 00 ff 00"),
                AcceptorError::BadNid {
                    source: NidError::WildcardType {
                        raw: 0x00ff_0000_0a00_0001,
                    },
                },
            ),
            ("LNET_ANY_NID v2", any_v2, AcceptorError::AnyNid),
            (
                "large NID of unknown size",
                odd_size_v2,
                AcceptorError::BadNid {
                    source: NidError::UnsupportedNidSize { size: 4 },
                },
            ),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(AcceptorRequest::decode(&bytes), Err(want), "{name}");
        }
    }

    #[test]
    fn encode_refuses_what_cannot_be_sent() {
        let v6 = nid("fe80::1@tcp");
        assert_eq!(
            AcceptorRequest {
                version: AcceptorVersion::V1,
                nid: v6,
            }
            .encode(),
            Err(AcceptorError::NotNid4 { nid: v6 })
        );
        assert_eq!(AcceptorRequest::new(Nid::ANY), Err(AcceptorError::AnyNid));
        let mut out = vec![1, 2, 3];
        assert!(AcceptorRequest {
            version: AcceptorVersion::V2,
            nid: Nid::ANY,
        }
        .encode_into(&mut out)
        .is_err());
        assert_eq!(out, vec![1, 2, 3]);
    }

    fn any_nid() -> impl Strategy<Value = Nid> {
        let lnd = 0u8..0xFF;
        prop_oneof![
            (lnd.clone(), any::<u16>(), any::<u32>())
                .prop_map(|(t, n, a)| Nid::new(Net::new(LndType(t), n), a)),
            (lnd, any::<u16>(), any::<[u8; 16]>()).prop_map(|(t, n, a)| Nid {
                net: Net::new(LndType(t), n),
                addr: NidAddr::V6(a),
            }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(target in any_nid(), force_v2 in any::<bool>()) {
            let mut req = AcceptorRequest::new(target).unwrap();
            if force_v2 {
                req.version = AcceptorVersion::V2;
            }
            let bytes = req.encode().unwrap();
            prop_assert_eq!(bytes.len(), req.wire_len());
            prop_assert_eq!(
                AcceptorRequest::decode(&bytes),
                Ok(Decoded::Complete { request: req, consumed: bytes.len() })
            );
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(Decoded::Complete { request, consumed }) = AcceptorRequest::decode(&bytes) {
                prop_assert!(consumed <= bytes.len());
                prop_assert_eq!(consumed, request.wire_len());
            }
        }

        #[test]
        fn prefixes_of_a_request_are_incomplete(target in any_nid(), cut in 0usize..28) {
            let bytes = AcceptorRequest::new(target).unwrap().encode().unwrap();
            let cut = cut.min(bytes.len() - 1);
            let is_incomplete = matches!(
                AcceptorRequest::decode(&bytes[..cut]),
                Ok(Decoded::Incomplete { needed }) if needed > cut && needed <= bytes.len()
            );
            prop_assert!(is_incomplete);
        }
    }
}
