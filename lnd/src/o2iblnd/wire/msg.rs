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
use super::handshake::{ConnParams, CONN_PARAMS_BYTES};
use super::rdma::{RdmaDesc, RdmaError, RDMA_DESC_HEADER_BYTES};
use super::{
    IBLND_IMMEDIATE_PAYLOAD_OFFSET, IBLND_MAX_IMMEDIATE, IBLND_MSG_CONNACK, IBLND_MSG_CONNREQ,
    IBLND_MSG_GET_DONE, IBLND_MSG_GET_REQ, IBLND_MSG_IMMEDIATE, IBLND_MSG_MAGIC, IBLND_MSG_NOOP,
    IBLND_MSG_PUT_ACK, IBLND_MSG_PUT_DONE, IBLND_MSG_PUT_NAK, IBLND_MSG_PUT_REQ, IBLND_MSG_SIZE,
    IBLND_MSG_VERSION_1, IBLND_MSG_VERSION_2, KIB_MSG_HEADER_BYTES, LNET_PROTO_MAGIC,
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

/// The o2iblnd protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Version {
    /// 0x11: queue depth fixed at 8, NOOPs cost a credit.
    V1 = IBLND_MSG_VERSION_1,
    /// 0x12: the current version, with out-of-band NOOPs and negotiated queue depth.
    V2 = IBLND_MSG_VERSION_2,
}

impl Version {
    /// The version with this wire value, if it is 0x11 or 0x12.
    pub fn from_u16(v: u16) -> Option<Version> {
        match v {
            IBLND_MSG_VERSION_1 => Some(Version::V1),
            IBLND_MSG_VERSION_2 => Some(Version::V2),
            _ => None,
        }
    }

    /// The wire value.
    pub fn to_u16(self) -> u16 {
        self as u16
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
mod tests {
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
}
