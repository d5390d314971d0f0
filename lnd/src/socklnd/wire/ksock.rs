//! The ksock message header: the 24 bytes that start every frame after the HELLO
//! (protocol V2 and later).
//!
//! | off | size | field | notes |
//! |---|---|---|---|
//! | 0 | 4 | type | `0xC0` NOOP (nothing follows), `0xC1` LNET (LNet header + payload follow) |
//! | 4 | 4 | csum | 0 = none; else the V2 checksum of the frame (module `csum`) |
//! | 8 | 8 | zc_cookies\[0\] | LNET: zero-copy request cookie; NOOP: first acknowledged cookie |
//! | 16 | 8 | zc_cookies\[1\] | acknowledged cookie (1 in a NOOP = keepalive) |
//!
//! All fields are in the sender's byte order, as learnt from its HELLO. The codec only
//! reports cookies; the LND acts on them ([`KsockHeader::zc_request`], [`KsockHeader::acks`]).

use lnet::ByteOrder;

/// Bytes of a ksock message header.
pub const KSOCK_HEADER_BYTES: usize = 24;
/// `KSOCK_MSG_NOOP`.
pub const KSOCK_MSG_NOOP: u32 = 0xC0;
/// `KSOCK_MSG_LNET`.
pub const KSOCK_MSG_LNET: u32 = 0xC1;
/// `SOCKNAL_KEEPALIVE_PING`: the cookie a keepalive NOOP carries in `zc_cookies[1]`.
pub const KEEPALIVE_PING: u64 = 1;

/// Errors from decoding a ksock message header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KsockError {
    /// Fewer than 24 bytes.
    #[error("ksock header needs {expected} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A type that is neither NOOP nor LNET: the kernel closes the connection.
    #[error(
        "unknown ksock message type {value:#x}: expected {KSOCK_MSG_NOOP:#x} (NOOP) or \
         {KSOCK_MSG_LNET:#x} (LNET)"
    )]
    UnknownType {
        /// The type field, in the sender's order made native.
        value: u32,
    },
}

/// The ksock message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KsockType {
    /// `0xC0`: header only; carries ZC-ACKs or a keepalive.
    Noop,
    /// `0xC1`: an LNet header and its payload follow.
    Lnet,
}

impl KsockType {
    /// The wire value.
    pub const fn to_u32(self) -> u32 {
        match self {
            KsockType::Noop => KSOCK_MSG_NOOP,
            KsockType::Lnet => KSOCK_MSG_LNET,
        }
    }

    /// The type for a wire value.
    pub const fn from_u32(value: u32) -> Result<KsockType, KsockError> {
        match value {
            KSOCK_MSG_NOOP => Ok(KsockType::Noop),
            KSOCK_MSG_LNET => Ok(KsockType::Lnet),
            value => Err(KsockError::UnknownType { value }),
        }
    }
}

/// The zero-copy acknowledgements a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZcAcks {
    /// None.
    None,
    /// A keepalive NOOP (`zc_cookies == [0, 1]`): nothing to acknowledge.
    Keepalive,
    /// One cookie.
    One(u64),
    /// Two separate cookies (a V3/V4 NOOP with `zc_cookies[0] > zc_cookies[1]`).
    Two(u64, u64),
    /// Every cookie from `first` to `last` inclusive (a V3/V4 NOOP with
    /// `zc_cookies[0] < zc_cookies[1]`).
    Range {
        /// First cookie.
        first: u64,
        /// Last cookie.
        last: u64,
    },
}

/// A ksock message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KsockHeader {
    /// NOOP or LNET.
    pub msg_type: KsockType,
    /// The V2 checksum, 0 when none.
    pub csum: u32,
    /// LNET: `[zero-copy request, piggy-backed ACK]`; NOOP: the acknowledged cookies.
    pub zc_cookies: [u64; 2],
}

impl KsockHeader {
    /// The header of an LNET frame with no checksum, no zero-copy request and no ACK:
    /// what this router sends.
    pub const fn lnet() -> KsockHeader {
        KsockHeader {
            msg_type: KsockType::Lnet,
            csum: 0,
            zc_cookies: [0, 0],
        }
    }

    /// A keepalive NOOP (`zc_cookies == [0, 1]`), for V3/V4 peers only.
    pub const fn keepalive() -> KsockHeader {
        KsockHeader {
            msg_type: KsockType::Noop,
            csum: 0,
            zc_cookies: [0, KEEPALIVE_PING],
        }
    }

    /// A NOOP acknowledging one zero-copy cookie (`zc_cookies == [0, cookie]`): the form
    /// every protocol version understands.
    pub const fn zc_ack(cookie: u64) -> KsockHeader {
        KsockHeader {
            msg_type: KsockType::Noop,
            csum: 0,
            zc_cookies: [0, cookie],
        }
    }

    /// A V3/V4 NOOP acknowledging two distinct cookies: the larger goes first, which
    /// tells the receiver they are a pair and not a range. With `a == b` it acknowledges
    /// that one cookie.
    pub fn zc_ack_pair(a: u64, b: u64) -> KsockHeader {
        KsockHeader {
            msg_type: KsockType::Noop,
            csum: 0,
            zc_cookies: [a.max(b), a.min(b)],
        }
    }

    /// A V3/V4 NOOP acknowledging every cookie from `first` to `last` inclusive; `first`
    /// must be smaller than `last` (otherwise the receiver reads a pair).
    pub const fn zc_ack_range(first: u64, last: u64) -> KsockHeader {
        KsockHeader {
            msg_type: KsockType::Noop,
            csum: 0,
            zc_cookies: [first, last],
        }
    }

    /// The zero-copy request cookie of an LNET frame: the receiver must acknowledge it
    /// once the frame's payload is in. `None` for NOOPs and for frames that ask nothing.
    pub fn zc_request(&self) -> Option<u64> {
        match (self.msg_type, self.zc_cookies[0]) {
            (KsockType::Lnet, cookie) if cookie != 0 => Some(cookie),
            _ => None,
        }
    }

    /// Whether this is a keepalive NOOP.
    pub fn is_keepalive(&self) -> bool {
        self.msg_type == KsockType::Noop && self.zc_cookies == [0, KEEPALIVE_PING]
    }

    /// The cookies this frame acknowledges. Nothing when `zc_cookies[1]` is 0. An LNET
    /// frame piggy-backs at most one, in `zc_cookies[1]`; a NOOP carries one
    /// (`zc_cookies[0]` 0), a pair (`[0] > [1]`), an inclusive range (`[0] < [1]`), or is
    /// a keepalive (`[0, 1]`).
    pub fn acks(&self) -> ZcAcks {
        let [c0, c1] = self.zc_cookies;
        match self.msg_type {
            KsockType::Lnet if c1 == 0 => ZcAcks::None,
            KsockType::Lnet => ZcAcks::One(c1),
            KsockType::Noop => match (c0, c1) {
                // zc_cookies[1] == 0: no acknowledgement at all.
                (_, 0) => ZcAcks::None,
                (0, KEEPALIVE_PING) => ZcAcks::Keepalive,
                (0, c) => ZcAcks::One(c),
                (a, b) if a > b => ZcAcks::Two(a, b),
                (a, b) if a == b => ZcAcks::One(a),
                (first, last) => ZcAcks::Range { first, last },
            },
        }
    }

    /// The header's bytes, little-endian.
    pub fn encode(&self) -> [u8; KSOCK_HEADER_BYTES] {
        self.encode_in(ByteOrder::Little)
    }

    /// The header's bytes in `order`.
    pub fn encode_in(&self, order: ByteOrder) -> [u8; KSOCK_HEADER_BYTES] {
        let mut out = [0u8; KSOCK_HEADER_BYTES];
        // The four fields fill the 24 bytes exactly: every write fits.
        let _ = order.put_u32_at(&mut out, 0, self.msg_type.to_u32());
        let _ = order.put_u32_at(&mut out, 4, self.csum);
        let _ = order.put_u64_at(&mut out, 8, self.zc_cookies[0]);
        let _ = order.put_u64_at(&mut out, 16, self.zc_cookies[1]);
        out
    }

    /// Decodes the header at the start of `buf`, in the connection's byte `order`.
    pub fn decode(buf: &[u8], order: ByteOrder) -> Result<KsockHeader, KsockError> {
        let truncated = KsockError::Truncated {
            expected: KSOCK_HEADER_BYTES,
            got: buf.len(),
        };
        let b = buf.get(..KSOCK_HEADER_BYTES).ok_or(truncated)?;
        let msg_type = KsockType::from_u32(order.u32_at(b, 0).unwrap_or_default())?;
        Ok(KsockHeader {
            msg_type,
            csum: order.u32_at(b, 4).unwrap_or_default(),
            zc_cookies: [
                order.u64_at(b, 8).unwrap_or_default(),
                order.u64_at(b, 16).unwrap_or_default(),
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spec_7_4_small_frames_both_ways() {
        let keepalive = unhex(SPEC_7_4_KEEPALIVE);
        let k = KsockHeader::decode(&keepalive, ByteOrder::Little).unwrap();
        assert_eq!(k, KsockHeader::keepalive());
        assert!(k.is_keepalive());
        assert_eq!(k.acks(), ZcAcks::Keepalive);
        assert_eq!(k.encode().to_vec(), keepalive);

        let ack = unhex(SPEC_7_4_ZC_ACK);
        let a = KsockHeader::decode(&ack, ByteOrder::Little).unwrap();
        assert_eq!(a, KsockHeader::zc_ack(0x2A));
        assert_eq!(a.acks(), ZcAcks::One(0x2A));
        assert!(!a.is_keepalive());
        assert_eq!(a.zc_request(), None);
        assert_eq!(a.encode().to_vec(), ack);
    }

    #[test]
    fn lnet_header_of_spec_7_2() {
        let frame = unhex(SPEC_7_2_GET);
        let k = KsockHeader::decode(&frame, ByteOrder::Little).unwrap();
        assert_eq!(k, KsockHeader::lnet());
        assert_eq!(k.acks(), ZcAcks::None);
        assert_eq!(k.zc_request(), None);
        assert_eq!(k.encode().to_vec(), frame[..24].to_vec());
    }

    #[test]
    fn cookie_forms() {
        let lnet = KsockHeader {
            zc_cookies: [7, 5],
            ..KsockHeader::lnet()
        };
        assert_eq!(lnet.zc_request(), Some(7));
        assert_eq!(lnet.acks(), ZcAcks::One(5));
        assert_eq!(KsockHeader::zc_ack_pair(5, 9).zc_cookies, [9, 5]);
        assert_eq!(KsockHeader::zc_ack_pair(9, 5).acks(), ZcAcks::Two(9, 5));
        assert_eq!(KsockHeader::zc_ack_pair(6, 6).acks(), ZcAcks::One(6));
        assert_eq!(
            KsockHeader::zc_ack_range(4, 8).acks(),
            ZcAcks::Range { first: 4, last: 8 }
        );
        for zc_cookies in [[0, 0], [9, 0]] {
            let noop = KsockHeader {
                zc_cookies,
                ..KsockHeader::keepalive()
            };
            assert_eq!(noop.acks(), ZcAcks::None);
            assert!(!noop.is_keepalive());
        }
        assert_eq!(KsockHeader::lnet().zc_request(), None);
    }

    #[test]
    fn flipped_header() {
        let h = KsockHeader {
            msg_type: KsockType::Lnet,
            csum: 0x1122_3344,
            zc_cookies: [2, 3],
        };
        let be = h.encode_in(ByteOrder::Big);
        assert_eq!(
            be.to_vec(),
            unhex("00 00 00 c1 11 22 33 44 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 03")
        );
        assert_eq!(KsockHeader::decode(&be, ByteOrder::Big), Ok(h));
        // Read in the wrong order, the type is unknown.
        assert_eq!(
            KsockHeader::decode(&be, ByteOrder::Little),
            Err(KsockError::UnknownType { value: 0xC100_0000 })
        );
    }

    #[test]
    fn malformed_headers() {
        assert_eq!(
            KsockHeader::decode(&[0xC0; 23], ByteOrder::Little),
            Err(KsockError::Truncated {
                expected: 24,
                got: 23
            })
        );
        let mut b = KsockHeader::keepalive().encode();
        b[0] = 0xC2;
        assert_eq!(
            KsockHeader::decode(&b, ByteOrder::Little),
            Err(KsockError::UnknownType { value: 0xC2 })
        );
        assert_eq!(
            KsockType::from_u32(0),
            Err(KsockError::UnknownType { value: 0 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(h in ksock_strategy(), order in order_strategy()) {
            let bytes = h.encode_in(order);
            prop_assert_eq!(KsockHeader::decode(&bytes, order), Ok(h));
            if order == ByteOrder::Little {
                prop_assert_eq!(h.encode(), bytes);
            }
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..30), order in order_strategy()) {
            let _ = KsockHeader::decode(&bytes, order);
        }
    }
}
