//! `kib_msg`: the 48-byte o2iblnd message header and its bodies.
//!
//! Header layout (sender's byte order): magic u32 @0, version u16 @4, type u8 @6, credits
//! u8 @7, nob u32 @8 (whole message), cksum u32 @12, srcnid u64 @16, srcstamp u64 @24,
//! dstnid u64 @32, dststamp u64 @40, body @48. NIDs are 64-bit "nid4" values. The bodies
//! are packed:
//!
//! | Type | Body | Min `ibm_nob` |
//! |---|---|---:|
//! | CONNREQ, CONNACK | connparams (8) | 56 |
//! | NOOP | none | 48 |
//! | IMMEDIATE | LNet header (72) + payload | 120 |
//! | PUT_REQ | LNet header, cookie u64 | 128 |
//! | PUT_NAK, PUT_DONE, GET_DONE | cookie u64, status s32 | 60 |
//! | PUT_ACK | src_cookie u64, dst_cookie u64, RDMA descriptor | 72 + 12·nfrags |
//! | GET_REQ | LNet header, cookie u64, RDMA descriptor | 136 + 12·nfrags |
//!
//! The embedded LNet header is always little-endian, and cookies are opaque: the receiver
//! echoes them back unswapped. [`KibMsg::unpack`] applies the receive checks of the kernel
//! unpacker in its order; [`KibMsg::encode`] writes little-endian and computes `ibm_nob`.

use bytes::Bytes;
use lnet::order::{bytes_at, ByteOrder};
use lnet::{Header, HeaderError, HeaderForm, Nid, NidError};

use super::cksum::{self, CksumError};
use super::endian::of_o2ib;
use super::params::{ConnParams, Version, CONN_PARAMS_BYTES};
use super::rdma::{RdmaDesc, RdmaError, RDMA_DESC_HEADER_BYTES};
use super::{
    IBLND_IMMEDIATE_PAYLOAD_OFFSET, IBLND_MAX_IMMEDIATE, IBLND_MSG_CONNACK, IBLND_MSG_CONNREQ,
    IBLND_MSG_GET_DONE, IBLND_MSG_GET_REQ, IBLND_MSG_IMMEDIATE, IBLND_MSG_MAGIC, IBLND_MSG_NOOP,
    IBLND_MSG_PUT_ACK, IBLND_MSG_PUT_DONE, IBLND_MSG_PUT_NAK, IBLND_MSG_PUT_REQ, IBLND_MSG_SIZE,
    KIB_MSG_HEADER_BYTES, LNET_PROTO_MAGIC,
};

/// Bytes of the embedded LNet header (the 72-byte nid4 form).
const LNET_HDR_BYTES: usize = 72;
/// Bytes needed to read magic and version, the first thing a receiver checks.
pub const MSG_MAGIC_VERSION_BYTES: usize = 6;
/// Offset of the cookie after an embedded LNet header (PUT_REQ, GET_REQ).
const HDR_COOKIE_OFFSET: usize = KIB_MSG_HEADER_BYTES + LNET_HDR_BYTES;
/// Offset of the RDMA descriptor in PUT_ACK.
const PUT_ACK_RD_OFFSET: usize = KIB_MSG_HEADER_BYTES + 16;
/// Offset of the RDMA descriptor in GET_REQ.
const GET_REQ_RD_OFFSET: usize = HDR_COOKIE_OFFSET + 8;
/// Bytes of a completion body.
const COMPLETION_BYTES: usize = 12;

/// Errors from unpacking or encoding a `kib_msg`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MsgError {
    /// The buffer is too short to hold magic and version, or the 48-byte header.
    #[error("short kib_msg: need {expected} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// The first word is not the o2ib magic in either byte order. A first word of
    /// [`super::LNET_PROTO_MAGIC`] is the future "unified" protocol.
    #[error("bad kib_msg magic: expected {expected:#010x}, got {got:#010x} (read little-endian)")]
    BadMagic {
        /// `IBLND_MSG_MAGIC`.
        expected: u32,
        /// The first word, read little-endian.
        got: u32,
    },
    /// A version other than 0x11 and 0x12.
    #[error("unknown o2iblnd version {got:#x}: expected 0x11 or 0x12")]
    UnknownVersion {
        /// The version received (in the sender's byte order).
        got: u16,
    },
    /// `ibm_nob` claims more bytes than were received.
    #[error("kib_msg nob {nob} is larger than the {got} bytes received")]
    NobExceedsBuffer {
        /// `ibm_nob`.
        nob: u32,
        /// Bytes received.
        got: usize,
    },
    /// A message larger than `IBLND_MSG_SIZE`.
    #[error("kib_msg of {nob} bytes: at most {max}")]
    TooLarge {
        /// The message size.
        nob: usize,
        /// `IBLND_MSG_SIZE`.
        max: usize,
    },
    /// The checksum does not match.
    #[error(transparent)]
    Cksum(#[from] CksumError),
    /// `ibm_srcnid` is `LNET_NID_ANY`.
    #[error("kib_msg srcnid is LNET_NID_ANY")]
    SrcNidAny,
    /// A NID field that is not a valid nid4 (top byte set) or has no nid4 form.
    #[error("bad {field} in kib_msg: {source}")]
    BadNid {
        /// `srcnid` or `dstnid`.
        field: &'static str,
        /// Why.
        source: NidError,
    },
    /// A type code that is not an o2iblnd message.
    #[error("unknown kib_msg type {got:#04x}")]
    UnknownType {
        /// The type code received.
        got: u8,
    },
    /// `ibm_nob` is smaller than the type's minimum size.
    #[error("short {msg_type:?}: nob {nob}, expected at least {min}")]
    NobTooSmall {
        /// The message type.
        msg_type: MsgType,
        /// `ibm_nob`.
        nob: u32,
        /// The type's minimum.
        min: usize,
    },
    /// A bad RDMA descriptor (PUT_ACK, GET_REQ).
    #[error("bad RDMA descriptor in {msg_type:?}: {source}")]
    Rdma {
        /// The message type.
        msg_type: MsgType,
        /// Why.
        source: RdmaError,
    },
    /// The embedded LNet header does not decode or encode.
    #[error("bad LNet header in {msg_type:?}: {source}")]
    Header {
        /// The message type.
        msg_type: MsgType,
        /// Why.
        source: HeaderError,
    },
    /// An IMMEDIATE payload larger than fits in one message.
    #[error("IMMEDIATE payload of {got} bytes: at most {max}")]
    PayloadTooLarge {
        /// The largest IMMEDIATE payload, 3976.
        max: usize,
        /// The payload size given.
        got: usize,
    },
}

impl MsgError {
    /// Whether this is a bad magic that is [`super::LNET_PROTO_MAGIC`] in either byte order:
    /// the future "unified" LNet protocol, which a passive kernel refuses with a FATAL reject
    /// carrying its own version.
    pub fn is_lnet_proto_magic(&self) -> bool {
        match self {
            MsgError::BadMagic { got, .. } => {
                ByteOrder::detect(got.to_le_bytes(), LNET_PROTO_MAGIC).is_some()
            }
            _ => false,
        }
    }
}

/// The o2iblnd message type (`ibm_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// 0xc0: connection request (RDMA-CM private data only).
    ConnReq = IBLND_MSG_CONNREQ,
    /// 0xc1: connection accepted (RDMA-CM private data only).
    ConnAck = IBLND_MSG_CONNACK,
    /// 0xd0: returns credits; v2 sends it out of band, without a credit.
    Noop = IBLND_MSG_NOOP,
    /// 0xd1: LNet header and payload inline; costs a credit.
    Immediate = IBLND_MSG_IMMEDIATE,
    /// 0xd2: start of an RDMA PUT; costs a credit and a reserved credit.
    PutReq = IBLND_MSG_PUT_REQ,
    /// 0xd3: the sink wants nothing, or failed.
    PutNak = IBLND_MSG_PUT_NAK,
    /// 0xd4: the sink's buffer for the PUT.
    PutAck = IBLND_MSG_PUT_ACK,
    /// 0xd5: the source has written the PUT's data.
    PutDone = IBLND_MSG_PUT_DONE,
    /// 0xd6: optimised GET with the reply buffer; costs a credit and a reserved credit.
    GetReq = IBLND_MSG_GET_REQ,
    /// 0xd7: the responder has written the reply.
    GetDone = IBLND_MSG_GET_DONE,
}

impl MsgType {
    /// The type with this code, if it is one.
    pub fn from_u8(code: u8) -> Option<MsgType> {
        Some(match code {
            IBLND_MSG_CONNREQ => MsgType::ConnReq,
            IBLND_MSG_CONNACK => MsgType::ConnAck,
            IBLND_MSG_NOOP => MsgType::Noop,
            IBLND_MSG_IMMEDIATE => MsgType::Immediate,
            IBLND_MSG_PUT_REQ => MsgType::PutReq,
            IBLND_MSG_PUT_NAK => MsgType::PutNak,
            IBLND_MSG_PUT_ACK => MsgType::PutAck,
            IBLND_MSG_PUT_DONE => MsgType::PutDone,
            IBLND_MSG_GET_REQ => MsgType::GetReq,
            IBLND_MSG_GET_DONE => MsgType::GetDone,
            _ => return None,
        })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The smallest `ibm_nob` of this type (with no payload and no RDMA fragments).
    pub fn min_nob(self) -> usize {
        KIB_MSG_HEADER_BYTES
            + match self {
                MsgType::ConnReq | MsgType::ConnAck => CONN_PARAMS_BYTES,
                MsgType::Noop => 0,
                MsgType::Immediate => LNET_HDR_BYTES,
                MsgType::PutReq => LNET_HDR_BYTES + 8,
                MsgType::PutNak | MsgType::PutDone | MsgType::GetDone => COMPLETION_BYTES,
                MsgType::PutAck => 16 + RDMA_DESC_HEADER_BYTES,
                MsgType::GetReq => LNET_HDR_BYTES + 8 + RDMA_DESC_HEADER_BYTES,
            }
    }
}

/// A transfer cookie: opaque 8 bytes that the receiver echoes back, never byte-swapped.
///
/// The value is the eight wire bytes read little-endian whatever the sender's byte order,
/// so that writing it back little-endian reproduces the bytes exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Cookie(pub u64);

/// `kib_completion_msg`: the end of a transfer step (PUT_NAK, PUT_DONE, GET_DONE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Completion {
    /// The cookie of the tx this completes, as the peer gave it.
    pub cookie: Cookie,
    /// Bytes transferred, or a negative errno (−ENODATA for an unmatched GET).
    pub status: i32,
}

/// A `kib_msg` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// CONNREQ: what the active side offers.
    ConnReq(ConnParams),
    /// CONNACK: what the passive side accepted.
    ConnAck(ConnParams),
    /// NOOP: carries credits only.
    Noop,
    /// IMMEDIATE: an LNet message with its payload inline.
    Immediate {
        /// The LNet header.
        hdr: Header,
        /// The payload: every byte from offset 120 to `ibm_nob`, at most 3976.
        payload: Bytes,
    },
    /// PUT_REQ: an LNet PUT or REPLY whose payload will be RDMA-written.
    PutReq {
        /// The LNet header.
        hdr: Header,
        /// The source's tx cookie.
        cookie: Cookie,
    },
    /// PUT_NAK: the sink refuses or wants no data.
    PutNak(Completion),
    /// PUT_ACK: where the source should write.
    PutAck {
        /// Echo of the PUT_REQ cookie.
        src_cookie: Cookie,
        /// The sink's tx cookie, to be echoed in PUT_DONE.
        dst_cookie: Cookie,
        /// The sink buffer.
        rd: RdmaDesc,
    },
    /// PUT_DONE: the data has been written.
    PutDone(Completion),
    /// GET_REQ: an LNet GET whose reply is to be RDMA-written into `rd`.
    GetReq {
        /// The LNet header.
        hdr: Header,
        /// The requester's tx cookie, to be echoed in GET_DONE.
        cookie: Cookie,
        /// The reply buffer.
        rd: RdmaDesc,
    },
    /// GET_DONE: the reply has been written.
    GetDone(Completion),
}

impl Body {
    /// The message type of this body.
    pub fn msg_type(&self) -> MsgType {
        match self {
            Body::ConnReq(_) => MsgType::ConnReq,
            Body::ConnAck(_) => MsgType::ConnAck,
            Body::Noop => MsgType::Noop,
            Body::Immediate { .. } => MsgType::Immediate,
            Body::PutReq { .. } => MsgType::PutReq,
            Body::PutNak(_) => MsgType::PutNak,
            Body::PutAck { .. } => MsgType::PutAck,
            Body::PutDone(_) => MsgType::PutDone,
            Body::GetReq { .. } => MsgType::GetReq,
            Body::GetDone(_) => MsgType::GetDone,
        }
    }

    /// Bytes of the encoded body.
    pub fn wire_len(&self) -> usize {
        match self {
            Body::ConnReq(_) | Body::ConnAck(_) => CONN_PARAMS_BYTES,
            Body::Noop => 0,
            Body::Immediate { payload, .. } => LNET_HDR_BYTES + payload.len(),
            Body::PutReq { .. } => LNET_HDR_BYTES + 8,
            Body::PutNak(_) | Body::PutDone(_) | Body::GetDone(_) => COMPLETION_BYTES,
            Body::PutAck { rd, .. } => 16 + rd.wire_len(),
            Body::GetReq { rd, .. } => LNET_HDR_BYTES + 8 + rd.wire_len(),
        }
    }
}

/// An o2iblnd message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KibMsg {
    /// Protocol version of the connection.
    pub version: Version,
    /// Credits returned to the receiver (all the sender owed).
    pub credits: u8,
    /// The sender's NI.
    pub srcnid: Nid,
    /// The sender's incarnation (microseconds since the epoch at NI start-up).
    pub srcstamp: u64,
    /// The receiver's NI.
    pub dstnid: Nid,
    /// The receiver's incarnation as the sender knows it (0 in a first CONNREQ).
    pub dststamp: u64,
    /// The type-specific body.
    pub body: Body,
}

/// A message as received, with what the header said about how it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// The message.
    pub msg: KibMsg,
    /// The sender's byte order.
    pub byte_order: ByteOrder,
    /// The `ibm_cksum` field (already verified if non-zero; 0 means none was sent).
    pub cksum: u32,
}

fn nid4(field: &'static str, nid: &Nid) -> Result<u64, MsgError> {
    nid.to_nid4()
        .map_err(|source| MsgError::BadNid { field, source })
}

impl KibMsg {
    /// The message type.
    pub fn msg_type(&self) -> MsgType {
        self.body.msg_type()
    }

    /// `ibm_nob`: bytes of the encoded message, header included.
    pub fn nob(&self) -> usize {
        KIB_MSG_HEADER_BYTES + self.body.wire_len()
    }

    /// Encodes the message little-endian with `ibm_cksum` 0 (no checksum).
    ///
    /// Fails if a NID has no 64-bit form, the source NID is ANY, an RDMA descriptor has 0 or
    /// more than 257 fragments, or an IMMEDIATE payload exceeds 3976 bytes: everything a
    /// receiver would refuse.
    pub fn encode(&self) -> Result<Vec<u8>, MsgError> {
        let msg_type = self.msg_type();
        if self.srcnid.is_any() {
            return Err(MsgError::SrcNidAny);
        }
        let src = nid4("srcnid", &self.srcnid)?;
        let dst = nid4("dstnid", &self.dstnid)?;
        let nob = self.nob();
        if let Body::Immediate { payload, .. } = &self.body {
            if payload.len() > IBLND_MAX_IMMEDIATE {
                return Err(MsgError::PayloadTooLarge {
                    max: IBLND_MAX_IMMEDIATE,
                    got: payload.len(),
                });
            }
        }
        if nob > IBLND_MSG_SIZE {
            return Err(MsgError::TooLarge {
                nob,
                max: IBLND_MSG_SIZE,
            });
        }
        // At most 4096 after the check.
        let nob32 = u32::try_from(nob).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(nob);
        out.extend_from_slice(&IBLND_MSG_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.version.to_u16().to_le_bytes());
        out.push(msg_type.code());
        out.push(self.credits);
        out.extend_from_slice(&nob32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&src.to_le_bytes());
        out.extend_from_slice(&self.srcstamp.to_le_bytes());
        out.extend_from_slice(&dst.to_le_bytes());
        out.extend_from_slice(&self.dststamp.to_le_bytes());

        let header = |hdr: &Header| {
            hdr.encode_nid4()
                .map_err(|source| MsgError::Header { msg_type, source })
        };
        let rdma = |rd: &RdmaDesc, out: &mut Vec<u8>| {
            rd.encode_into(out)
                .map_err(|source| MsgError::Rdma { msg_type, source })
        };
        let completion = |c: &Completion, out: &mut Vec<u8>| {
            out.extend_from_slice(&c.cookie.0.to_le_bytes());
            out.extend_from_slice(&c.status.to_le_bytes());
        };
        match &self.body {
            Body::ConnReq(cp) | Body::ConnAck(cp) => out.extend_from_slice(&cp.to_le_bytes()),
            Body::Noop => {}
            Body::Immediate { hdr, payload } => {
                out.extend_from_slice(&header(hdr)?);
                out.extend_from_slice(payload);
            }
            Body::PutReq { hdr, cookie } => {
                out.extend_from_slice(&header(hdr)?);
                out.extend_from_slice(&cookie.0.to_le_bytes());
            }
            Body::PutNak(c) | Body::PutDone(c) | Body::GetDone(c) => completion(c, &mut out),
            Body::PutAck {
                src_cookie,
                dst_cookie,
                rd,
            } => {
                out.extend_from_slice(&src_cookie.0.to_le_bytes());
                out.extend_from_slice(&dst_cookie.0.to_le_bytes());
                rdma(rd, &mut out)?;
            }
            Body::GetReq { hdr, cookie, rd } => {
                out.extend_from_slice(&header(hdr)?);
                out.extend_from_slice(&cookie.0.to_le_bytes());
                rdma(rd, &mut out)?;
            }
        }
        Ok(out)
    }

    /// Encodes the message little-endian and fills in its checksum.
    pub fn encode_with_cksum(&self) -> Result<Vec<u8>, MsgError> {
        let mut out = self.encode()?;
        cksum::fill(&mut out, ByteOrder::Little)?;
        Ok(out)
    }

    /// Unpacks a received message and returns just the message. See [`KibMsg::unpack`].
    pub fn decode(buf: &[u8]) -> Result<KibMsg, MsgError> {
        Self::unpack(buf).map(|u| u.msg)
    }

    /// Unpacks a received message: `buf` holds the bytes received (an rx buffer's contents,
    /// or RDMA-CM private data, which may be padded); only the first `ibm_nob` are used.
    ///
    /// Checks, in order: at least 6 bytes, the magic in either byte order, version 0x11 or
    /// 0x12, at least 48 bytes, `ibm_nob` within the buffer and at most 4096, the checksum
    /// if non-zero, a source NID other than ANY, a known type, `ibm_nob` at least the
    /// type's minimum, NIDs without their top byte set, then the body (1..=257 RDMA
    /// fragments covered by `ibm_nob`, a decodable LNet header). Bytes past `ibm_nob` are
    /// ignored. An IMMEDIATE payload (bytes 120..`ibm_nob`) is copied.
    pub fn unpack(buf: &[u8]) -> Result<Unpacked, MsgError> {
        Self::unpack_inner(buf, |range| {
            buf.get(range)
                .map(Bytes::copy_from_slice)
                .unwrap_or_default()
        })
    }

    /// [`KibMsg::unpack`] for a buffer held as [`Bytes`]: an IMMEDIATE payload shares the
    /// buffer instead of being copied.
    pub fn unpack_bytes(buf: &Bytes) -> Result<Unpacked, MsgError> {
        Self::unpack_inner(buf, |range| {
            if range.start <= range.end && range.end <= buf.len() {
                buf.slice(range)
            } else {
                Bytes::new()
            }
        })
    }

    fn unpack_inner(
        buf: &[u8],
        payload: impl FnOnce(std::ops::Range<usize>) -> Bytes,
    ) -> Result<Unpacked, MsgError> {
        let truncated = |expected: usize| MsgError::Truncated {
            expected,
            got: buf.len(),
        };
        let magic = bytes_at::<4>(buf, 0)
            .filter(|_| buf.len() >= MSG_MAGIC_VERSION_BYTES)
            .ok_or_else(|| truncated(MSG_MAGIC_VERSION_BYTES))?;
        let order = of_o2ib(magic).ok_or(MsgError::BadMagic {
            expected: IBLND_MSG_MAGIC,
            got: u32::from_le_bytes(magic),
        })?;
        let raw_version = order
            .u16_at(buf, 4)
            .ok_or_else(|| truncated(MSG_MAGIC_VERSION_BYTES))?;
        let version =
            Version::from_u16(raw_version).ok_or(MsgError::UnknownVersion { got: raw_version })?;
        if buf.len() < KIB_MSG_HEADER_BYTES {
            return Err(truncated(KIB_MSG_HEADER_BYTES));
        }
        let field32 = |at| {
            order
                .u32_at(buf, at)
                .ok_or_else(|| truncated(KIB_MSG_HEADER_BYTES))
        };
        let field64 = |at| {
            order
                .u64_at(buf, at)
                .ok_or_else(|| truncated(KIB_MSG_HEADER_BYTES))
        };
        let nob32 = field32(8)?;
        let nob = usize::try_from(nob32).unwrap_or(usize::MAX);
        let m = buf.get(..nob).ok_or(MsgError::NobExceedsBuffer {
            nob: nob32,
            got: buf.len(),
        })?;
        if nob > IBLND_MSG_SIZE {
            return Err(MsgError::TooLarge {
                nob,
                max: IBLND_MSG_SIZE,
            });
        }
        let received_cksum = field32(12)?;
        cksum::verify(m, received_cksum)?;

        let code = buf.get(6).copied().unwrap_or_default();
        let credits = buf.get(7).copied().unwrap_or_default();
        let raw_src = field64(16)?;
        if raw_src == u64::MAX {
            return Err(MsgError::SrcNidAny);
        }
        let msg_type = MsgType::from_u8(code).ok_or(MsgError::UnknownType { got: code })?;
        if nob < msg_type.min_nob() {
            return Err(MsgError::NobTooSmall {
                msg_type,
                nob: nob32,
                min: msg_type.min_nob(),
            });
        }
        // A wildcard LND type (0xff) short of ANY is refused by Nid::from_nid4.
        let srcnid = Nid::from_nid4(raw_src).map_err(|source| MsgError::BadNid {
            field: "srcnid",
            source,
        })?;
        let dstnid = Nid::from_nid4(field64(32)?).map_err(|source| MsgError::BadNid {
            field: "dstnid",
            source,
        })?;

        let short = || MsgError::NobTooSmall {
            msg_type,
            nob: nob32,
            min: msg_type.min_nob(),
        };
        let header = || {
            let at = m.get(KIB_MSG_HEADER_BYTES..).ok_or_else(short)?;
            Header::decode(at, HeaderForm::Nid4)
                .map_err(|source| MsgError::Header { msg_type, source })
        };
        // Cookies are never swapped.
        let cookie = |at: usize| {
            ByteOrder::Little
                .u64_at(m, at)
                .map(Cookie)
                .ok_or_else(short)
        };
        let completion = || -> Result<Completion, MsgError> {
            Ok(Completion {
                cookie: cookie(KIB_MSG_HEADER_BYTES)?,
                status: order
                    .u32_at(m, KIB_MSG_HEADER_BYTES + 8)
                    .ok_or_else(short)? as i32,
            })
        };
        let rdma = |at: usize| {
            let rd = m.get(at..).ok_or_else(short)?;
            RdmaDesc::decode(rd, order).map_err(|source| MsgError::Rdma { msg_type, source })
        };
        let connparams = || -> Result<ConnParams, MsgError> {
            let b: [u8; CONN_PARAMS_BYTES] = m
                .get(KIB_MSG_HEADER_BYTES..KIB_MSG_HEADER_BYTES + CONN_PARAMS_BYTES)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(short)?;
            Ok(ConnParams::from_bytes(b, order))
        };

        let body = match msg_type {
            MsgType::ConnReq => Body::ConnReq(connparams()?),
            MsgType::ConnAck => Body::ConnAck(connparams()?),
            MsgType::Noop => Body::Noop,
            MsgType::Immediate => Body::Immediate {
                hdr: header()?,
                payload: payload(IBLND_IMMEDIATE_PAYLOAD_OFFSET..nob),
            },
            MsgType::PutReq => Body::PutReq {
                hdr: header()?,
                cookie: cookie(HDR_COOKIE_OFFSET)?,
            },
            MsgType::PutNak => Body::PutNak(completion()?),
            MsgType::PutDone => Body::PutDone(completion()?),
            MsgType::GetDone => Body::GetDone(completion()?),
            MsgType::PutAck => Body::PutAck {
                src_cookie: cookie(KIB_MSG_HEADER_BYTES)?,
                dst_cookie: cookie(KIB_MSG_HEADER_BYTES + 8)?,
                rd: rdma(PUT_ACK_RD_OFFSET)?,
            },
            MsgType::GetReq => Body::GetReq {
                hdr: header()?,
                cookie: cookie(HDR_COOKIE_OFFSET)?,
                rd: rdma(GET_REQ_RD_OFFSET)?,
            },
        };
        Ok(Unpacked {
            msg: KibMsg {
                version,
                credits,
                srcnid,
                srcstamp: field64(24)?,
                dstnid,
                dststamp: field64(40)?,
                body,
            },
            byte_order: order,
            cksum: received_cksum,
        })
    }
}

#[cfg(test)]
mod tests;
