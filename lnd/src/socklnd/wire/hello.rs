//! The socklnd HELLO: the handshake each side sends right after the acceptor request.
//!
//! | version | magic | length | NIDs |
//! |---|---|---|---|
//! | V1 (legacy) | `0xEEBC0DED` LE, u16 major 1, u16 minor 0 | 72-byte LNet header + 4 × nips | 64-bit |
//! | V2, V3 | `0x45726963` ("Eric") in sender order | 56 + 4 × nips (nips ≤ 16) | 64-bit, sender order |
//! | V4 | `0x45726963` in sender order | 80 (nips written 0, never read) | 20-byte large, never swapped |
//!
//! Every scalar is in the sender's byte order; a byte-swapped magic marks the connection
//! "flipped" ([`ByteOrder::Big`]), and the ksock header of every later frame on it is
//! swapped too. [`Hello::decode`] is incremental and reports the byte order it found;
//! [`Hello::encode`] writes little-endian.
//!
//! V1 is recognised but refused ([`HelloError::UnsupportedV1`], carrying what was read).
//! A known magic with an unknown version is [`HelloError::UnknownVersion`]: the passive
//! side answers it with its own HELLO of ctype [`ConnType::None`] so the connector learns
//! which version to speak.
//!
//! Note: kernels since 2.15 swap the pids, incarnations, ctype and nips of a byte-swapped
//! V2/V3 HELLO but not its two NIDs. This decoder reads the NIDs in the sender's order, as
//! the structure defines them (and as 2.12 did); cross-endian socklnd is not used in
//! practice.

use std::net::Ipv4Addr;

use lnet::acceptor::{LNET_PROTO_MAGIC, LNET_PROTO_TCP_MAGIC};
use lnet::nid::LARGE_NID_BYTES;
use lnet::order::{bytes_at, ByteOrder};
use lnet::{HeaderForm, Nid, NidError, ProcessId};

use super::conn_type::ConnType;

/// Bytes of a V2/V3 HELLO before its IP list.
pub const HELLO_V2_BYTES: usize = 56;
/// Bytes of a V4 HELLO.
pub const HELLO_V4_BYTES: usize = 80;
/// Bytes of a V1 HELLO before its IP list (an LNet header of type HELLO).
pub const HELLO_V1_BYTES: usize = 72;
/// Most IPs a HELLO may list (`LNET_INTERFACES_NUM`).
pub const MAX_HELLO_IPS: u32 = 16;

/// Bytes of the magic and version words that start every HELLO.
const PREFIX_LEN: usize = 8;
/// `LNET_MSG_HELLO`, the LNet type a V1 HELLO carries.
const V1_MSG_TYPE_HELLO: u32 = 4;

/// The socklnd protocol version a HELLO negotiates (V1 is refused and has no value here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtoVersion {
    /// `KSOCK_PROTO_V2`.
    V2,
    /// `KSOCK_PROTO_V3`: what every 2.x kernel speaks on IPv4 by default.
    V3,
    /// `KSOCK_PROTO_V4`: large NIDs, 2.16+ on IPv6 sockets.
    V4,
}

impl ProtoVersion {
    /// The version number on the wire.
    pub const fn to_u32(self) -> u32 {
        match self {
            ProtoVersion::V2 => 2,
            ProtoVersion::V3 => 3,
            ProtoVersion::V4 => 4,
        }
    }

    /// The version for a wire number, if it is V2, V3 or V4.
    pub const fn from_u32(value: u32) -> Option<ProtoVersion> {
        match value {
            2 => Some(ProtoVersion::V2),
            3 => Some(ProtoVersion::V3),
            4 => Some(ProtoVersion::V4),
            _ => None,
        }
    }

    /// The LNet header form frames carry after this HELLO: 72 bytes for V2/V3, 96 for V4.
    pub const fn header_form(self) -> HeaderForm {
        match self {
            ProtoVersion::V2 | ProtoVersion::V3 => HeaderForm::Nid4,
            ProtoVersion::V4 => HeaderForm::Large,
        }
    }

    /// Bytes of the HELLO's fixed part (before any IP list).
    pub const fn hello_len(self) -> usize {
        match self {
            ProtoVersion::V2 | ProtoVersion::V3 => HELLO_V2_BYTES,
            ProtoVersion::V4 => HELLO_V4_BYTES,
        }
    }
}

/// Errors from decoding, checking or encoding a HELLO. Every decoding error closes the
/// connection; only [`HelloError::UnknownVersion`] is answered first
/// ([`HelloError::wants_version_reply`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HelloError {
    /// The first word is neither `LNET_PROTO_MAGIC` (either order) nor the V1 magic.
    #[error(
        "bad HELLO magic {got:#010x}: expected {LNET_PROTO_MAGIC:#010x} in either byte order \
         or {LNET_PROTO_TCP_MAGIC:#010x}"
    )]
    BadMagic {
        /// The first word, read little-endian.
        got: u32,
    },
    /// A known magic with a version this side does not speak.
    #[error("unknown HELLO version {version} (magic {magic:#010x}): expected 2, 3 or 4")]
    UnknownVersion {
        /// The first word, read little-endian.
        magic: u32,
        /// The version word in the magic's byte order (for the V1 magic: u16 major in the
        /// low half, u16 minor in the high half).
        version: u32,
    },
    /// A legacy V1 HELLO: recognised, carried here, refused.
    #[error("refusing socklnd V1 HELLO from nid4 {:#018x}", hello.src_nid)]
    UnsupportedV1 {
        /// What the V1 HELLO said.
        hello: Box<V1Hello>,
    },
    /// More IPs than `LNET_INTERFACES_NUM`.
    #[error("HELLO lists {nips} IPs: at most {max}")]
    TooManyIps {
        /// The nips field.
        nips: u32,
        /// The limit.
        max: u32,
    },
    /// An IP of 0 in the list.
    #[error("HELLO IP #{index} is 0.0.0.0")]
    ZeroIp {
        /// Position in the list.
        index: usize,
    },
    /// The source NID is `LNET_NID_ANY`.
    #[error("HELLO source NID is LNET_NID_ANY")]
    SrcNidAny,
    /// The ctype is not ANY, CONTROL, BULK_IN, BULK_OUT or NONE.
    #[error("HELLO ctype {value:#x}: expected 0..=3 or 0xffffffff (NONE)")]
    BadConnType {
        /// The ctype field.
        value: u32,
    },
    /// A connection request (not a reply) with ctype NONE.
    #[error("HELLO request with ctype NONE: expected ANY, CONTROL, BULK_IN or BULK_OUT")]
    ConnTypeNoneInRequest,
    /// A NID that cannot be decoded, or (encoding) cannot be written in this version.
    #[error("bad {field} in HELLO: {source}")]
    BadNid {
        /// `src_nid` or `dst_nid`.
        field: &'static str,
        /// Why.
        source: NidError,
    },
    /// A V4 HELLO was given IPs to encode; V4 carries none.
    #[error("a V4 HELLO carries no IP list: got {count} IPs")]
    IpsNotInV4 {
        /// How many IPs were given.
        count: usize,
    },
}

impl HelloError {
    /// Whether the passive side answers this error with its own HELLO of ctype NONE
    /// (version negotiation) before closing, rather than closing without a word.
    pub fn wants_version_reply(&self) -> bool {
        matches!(self, HelloError::UnknownVersion { .. })
    }
}

/// A legacy V1 HELLO: an LNet header of type HELLO whose destination NID is replaced by
/// the V1 magic and version, followed by the IP list. Scalars are little-endian.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct V1Hello {
    /// Sender's NID as the raw 64-bit value.
    pub src_nid: u64,
    /// Destination pid (0 from kernels).
    pub dest_pid: u32,
    /// Sender's pid.
    pub src_pid: u32,
    /// LNet message type (4, HELLO, from a kernel).
    pub msg_type: u32,
    /// Bytes of IP list that follow (4 × nips).
    pub payload_length: u32,
    /// Sender's incarnation.
    pub incarnation: u64,
    /// Sender's connection type, raw.
    pub conn_type: u32,
    /// The IP list; empty if `payload_length` is not 4 × nips with nips ≤ 16.
    pub ips: Vec<Ipv4Addr>,
}

/// A V2, V3 or V4 HELLO.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hello {
    /// The protocol version.
    pub version: ProtoVersion,
    /// Sender's NI NID.
    pub src_nid: Nid,
    /// NID of the intended peer.
    pub dst_nid: Nid,
    /// Sender's pid (12345 for kernels and for this router).
    pub src_pid: u32,
    /// Not set by kernels (0); a passive reply echoes the request's.
    pub dst_pid: u32,
    /// Sender's incarnation (stable while it runs; a change means it restarted).
    pub src_incarnation: u64,
    /// Not set by kernels (0); a passive reply echoes the request's.
    pub dst_incarnation: u64,
    /// The sender's connection type; [`ConnType::None`] only in a reply.
    pub ctype: ConnType,
    /// Legacy interface list (V2/V3 only, never sent by current kernels).
    pub ips: Vec<Ipv4Addr>,
}

/// What [`Hello::decode`] made of the bytes received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloDecoded {
    /// Not enough bytes: call again when the buffer holds `needed` bytes in total.
    Incomplete {
        /// Total bytes, from the HELLO's first byte, needed for the next step.
        needed: usize,
    },
    /// A whole HELLO.
    Complete {
        /// The HELLO.
        hello: Hello,
        /// The sender's byte order, which every later ksock header on this connection uses.
        order: ByteOrder,
        /// Bytes it took from the start of the buffer; what follows is the first frame.
        consumed: usize,
    },
}

/// What the first word of a HELLO says.
enum Magic {
    /// `LNET_PROTO_MAGIC` in this order.
    Proto(ByteOrder),
    /// The legacy V1 magic.
    Tcp,
}

impl Hello {
    /// The HELLO a node sends: `src` as its identity, `dst_nid` the peer, no IPs, the
    /// unset fields 0.
    pub fn new(
        version: ProtoVersion,
        src: ProcessId,
        dst_nid: Nid,
        src_incarnation: u64,
        ctype: ConnType,
    ) -> Hello {
        Hello {
            version,
            src_nid: src.nid,
            dst_nid,
            src_pid: src.pid,
            dst_pid: 0,
            src_incarnation,
            dst_incarnation: 0,
            ctype,
            ips: Vec::new(),
        }
    }

    /// The passive side's reply to this request: same version, `me` as source, the
    /// requester's NID as destination, `dst_pid` and `dst_incarnation` echoed, no IPs.
    /// `ctype` is `self.ctype.invert()` to accept, [`ConnType::None`] to refuse.
    pub fn reply(&self, me: ProcessId, my_incarnation: u64, ctype: ConnType) -> Hello {
        Hello {
            version: self.version,
            src_nid: me.nid,
            dst_nid: self.src_nid,
            src_pid: me.pid,
            dst_pid: self.dst_pid,
            src_incarnation: my_incarnation,
            dst_incarnation: self.dst_incarnation,
            ctype,
            ips: Vec::new(),
        }
    }

    /// The sender's process id.
    pub fn src(&self) -> ProcessId {
        ProcessId {
            nid: self.src_nid,
            pid: self.src_pid,
        }
    }

    /// Bytes of this HELLO on the wire.
    pub fn wire_len(&self) -> usize {
        match self.version {
            ProtoVersion::V2 | ProtoVersion::V3 => HELLO_V2_BYTES + 4 * self.ips.len(),
            ProtoVersion::V4 => HELLO_V4_BYTES,
        }
    }

    /// The passive side's extra check on a request: ctype NONE is valid only in a reply.
    pub fn check_request(&self) -> Result<(), HelloError> {
        if self.ctype.is_requestable() {
            Ok(())
        } else {
            Err(HelloError::ConnTypeNoneInRequest)
        }
    }

    /// The HELLO's bytes, little-endian.
    pub fn encode(&self) -> Result<Vec<u8>, HelloError> {
        let mut out = Vec::with_capacity(self.wire_len());
        self.encode_in(ByteOrder::Little, &mut out)?;
        Ok(out)
    }

    /// Appends the HELLO to `out` with its scalars in `order` (large NIDs are big-endian
    /// whatever the order). Fails, appending nothing, if a V2/V3 NID has no 64-bit form or
    /// a V4 HELLO has IPs. Does not apply the receive checks: a HELLO with 17 IPs or a
    /// zero IP can be written, to test a peer.
    pub fn encode_in(&self, order: ByteOrder, out: &mut Vec<u8>) -> Result<(), HelloError> {
        let magic = order.u32_to_bytes(LNET_PROTO_MAGIC);
        let version = order.u32_to_bytes(self.version.to_u32());
        match self.version {
            ProtoVersion::V2 | ProtoVersion::V3 => {
                let src = nid4(self.src_nid, "src_nid")?;
                let dst = nid4(self.dst_nid, "dst_nid")?;
                out.reserve(self.wire_len());
                out.extend_from_slice(&magic);
                out.extend_from_slice(&version);
                order.push_u64(out, src);
                order.push_u64(out, dst);
                self.encode_scalars(order, out);
                let nips = u32::try_from(self.ips.len()).unwrap_or(u32::MAX);
                order.push_u32(out, nips);
                for ip in &self.ips {
                    order.push_u32(out, u32::from(*ip));
                }
            }
            ProtoVersion::V4 => {
                if !self.ips.is_empty() {
                    return Err(HelloError::IpsNotInV4 {
                        count: self.ips.len(),
                    });
                }
                out.reserve(HELLO_V4_BYTES);
                out.extend_from_slice(&magic);
                out.extend_from_slice(&version);
                out.extend_from_slice(&self.src_nid.to_large_bytes());
                out.extend_from_slice(&self.dst_nid.to_large_bytes());
                self.encode_scalars(order, out);
                out.extend_from_slice(&[0; 4]);
            }
        }
        Ok(())
    }

    /// pids, incarnations and ctype: the same sequence in every version.
    fn encode_scalars(&self, order: ByteOrder, out: &mut Vec<u8>) {
        order.push_u32(out, self.src_pid);
        order.push_u32(out, self.dst_pid);
        order.push_u64(out, self.src_incarnation);
        order.push_u64(out, self.dst_incarnation);
        order.push_u32(out, self.ctype.to_u32());
    }

    /// Decodes a HELLO from the bytes received so far, in the order the kernel reads
    /// them: magic (4 bytes), version (8), fixed part, IP list.
    ///
    /// A refusal is reported as soon as the bytes show it (a bad magic after 4 bytes, an
    /// unknown version after 8, nips > 16 after the fixed part), without waiting for bytes
    /// that may never come. A complete HELLO passes the receive checks every side applies:
    /// nips ≤ 16, no zero IP, source not ANY, a known ctype (NONE included; see
    /// [`Hello::check_request`] for the passive side).
    pub fn decode(buf: &[u8]) -> Result<HelloDecoded, HelloError> {
        let Some(first4) = bytes_at::<4>(buf, 0) else {
            return Ok(HelloDecoded::Incomplete { needed: 4 });
        };
        let raw_magic = u32::from_le_bytes(first4);
        let magic = if let Some(order) = ByteOrder::detect(first4, LNET_PROTO_MAGIC) {
            Magic::Proto(order)
        } else if raw_magic == LNET_PROTO_TCP_MAGIC {
            Magic::Tcp
        } else {
            return Err(HelloError::BadMagic { got: raw_magic });
        };
        let order = match magic {
            Magic::Proto(order) => order,
            Magic::Tcp => ByteOrder::Little,
        };
        let Some(version) = order.u32_at(buf, 4) else {
            return Ok(HelloDecoded::Incomplete { needed: PREFIX_LEN });
        };
        let unknown = HelloError::UnknownVersion {
            magic: raw_magic,
            version,
        };
        let version = match magic {
            // u16 major 1, u16 minor 0, little-endian.
            Magic::Tcp if version == 1 => return decode_v1(buf),
            Magic::Tcp => return Err(unknown),
            Magic::Proto(_) => ProtoVersion::from_u32(version).ok_or(unknown)?,
        };
        match version {
            ProtoVersion::V2 | ProtoVersion::V3 => decode_v2(buf, version, order),
            ProtoVersion::V4 => decode_v4(buf, order),
        }
    }

    /// The receive checks on a decoded HELLO.
    fn check(&self, ctype: u32) -> Result<ConnType, HelloError> {
        if let Some(index) = self.ips.iter().position(|ip| ip.is_unspecified()) {
            return Err(HelloError::ZeroIp { index });
        }
        if self.src_nid.is_any() {
            return Err(HelloError::SrcNidAny);
        }
        ConnType::from_u32(ctype).ok_or(HelloError::BadConnType { value: ctype })
    }
}

fn nid4(nid: Nid, field: &'static str) -> Result<u64, HelloError> {
    nid.to_nid4()
        .map_err(|source| HelloError::BadNid { field, source })
}

fn decode_nid4(raw: u64, field: &'static str) -> Result<Nid, HelloError> {
    Nid::from_nid4(raw).map_err(|source| HelloError::BadNid { field, source })
}

fn decode_large(buf: &[u8], at: usize, field: &'static str) -> Result<Nid, HelloError> {
    let bytes = buf.get(at..).unwrap_or_default();
    Nid::from_large_bytes(bytes).map_err(|source| HelloError::BadNid { field, source })
}

/// A u32 the caller has already checked is in `buf`.
fn u32_at(buf: &[u8], at: usize, order: ByteOrder) -> u32 {
    order.u32_at(buf, at).unwrap_or_default()
}

/// A u64 the caller has already checked is in `buf`.
fn u64_at(buf: &[u8], at: usize, order: ByteOrder) -> u64 {
    order.u64_at(buf, at).unwrap_or_default()
}

/// `count` u32 IPs from `at`; the caller has checked they are in `buf`.
fn ips_at(buf: &[u8], at: usize, count: usize, order: ByteOrder) -> Vec<Ipv4Addr> {
    let bytes = buf.get(at..at + 4 * count).unwrap_or_default();
    bytes
        .chunks_exact(4)
        .filter_map(|c| <[u8; 4]>::try_from(c).ok())
        .map(|c| Ipv4Addr::from(order.u32_from_bytes(c)))
        .collect()
}

fn decode_v2(
    buf: &[u8],
    version: ProtoVersion,
    order: ByteOrder,
) -> Result<HelloDecoded, HelloError> {
    let Some(nips) = order.u32_at(buf, 52) else {
        return Ok(HelloDecoded::Incomplete {
            needed: HELLO_V2_BYTES,
        });
    };
    if nips > MAX_HELLO_IPS {
        return Err(HelloError::TooManyIps {
            nips,
            max: MAX_HELLO_IPS,
        });
    }
    // nips <= 16: no overflow.
    let count = nips as usize;
    let total = HELLO_V2_BYTES + 4 * count;
    if buf.len() < total {
        return Ok(HelloDecoded::Incomplete { needed: total });
    }
    let mut hello = Hello {
        version,
        src_nid: decode_nid4(u64_at(buf, 8, order), "src_nid")?,
        dst_nid: decode_nid4(u64_at(buf, 16, order), "dst_nid")?,
        src_pid: u32_at(buf, 24, order),
        dst_pid: u32_at(buf, 28, order),
        src_incarnation: u64_at(buf, 32, order),
        dst_incarnation: u64_at(buf, 40, order),
        ctype: ConnType::None,
        ips: ips_at(buf, HELLO_V2_BYTES, count, order),
    };
    hello.ctype = hello.check(u32_at(buf, 48, order))?;
    Ok(HelloDecoded::Complete {
        hello,
        order,
        consumed: total,
    })
}

fn decode_v4(buf: &[u8], order: ByteOrder) -> Result<HelloDecoded, HelloError> {
    if buf.len() < HELLO_V4_BYTES {
        return Ok(HelloDecoded::Incomplete {
            needed: HELLO_V4_BYTES,
        });
    }
    let mut hello = Hello {
        version: ProtoVersion::V4,
        src_nid: decode_large(buf, PREFIX_LEN, "src_nid")?,
        dst_nid: decode_large(buf, PREFIX_LEN + LARGE_NID_BYTES, "dst_nid")?,
        src_pid: u32_at(buf, 48, order),
        dst_pid: u32_at(buf, 52, order),
        src_incarnation: u64_at(buf, 56, order),
        dst_incarnation: u64_at(buf, 64, order),
        ctype: ConnType::None,
        // nips at 76 is written 0 and not read.
        ips: Vec::new(),
    };
    hello.ctype = hello.check(u32_at(buf, 72, order))?;
    Ok(HelloDecoded::Complete {
        hello,
        order,
        consumed: HELLO_V4_BYTES,
    })
}

/// Reads a whole V1 HELLO (when its IP list length is sane) and refuses it.
fn decode_v1(buf: &[u8]) -> Result<HelloDecoded, HelloError> {
    if buf.len() < HELLO_V1_BYTES {
        return Ok(HelloDecoded::Incomplete {
            needed: HELLO_V1_BYTES,
        });
    }
    let le = ByteOrder::Little;
    let payload_length = u32_at(buf, 28, le);
    let sane = payload_length.is_multiple_of(4) && payload_length / 4 <= MAX_HELLO_IPS;
    let count = if sane {
        (payload_length / 4) as usize
    } else {
        0
    };
    let total = HELLO_V1_BYTES + 4 * count;
    if buf.len() < total {
        return Ok(HelloDecoded::Incomplete { needed: total });
    }
    Err(HelloError::UnsupportedV1 {
        hello: Box::new(V1Hello {
            src_nid: u64_at(buf, 8, le),
            dest_pid: u32_at(buf, 16, le),
            src_pid: u32_at(buf, 20, le),
            msg_type: u32_at(buf, 24, le),
            payload_length,
            incarnation: u64_at(buf, 32, le),
            conn_type: u32_at(buf, 40, le),
            ips: ips_at(buf, HELLO_V1_BYTES, count, le),
        }),
    })
}

impl V1Hello {
    /// The V1 HELLO's bytes (little-endian), as a legacy peer would send them. Only a
    /// test needs this: nothing here ever speaks V1.
    pub fn encode(&self) -> Vec<u8> {
        let le = ByteOrder::Little;
        let mut out = Vec::with_capacity(HELLO_V1_BYTES + 4 * self.ips.len());
        out.extend_from_slice(&LNET_PROTO_TCP_MAGIC.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        le.push_u64(&mut out, self.src_nid);
        le.push_u32(&mut out, self.dest_pid);
        le.push_u32(&mut out, self.src_pid);
        le.push_u32(&mut out, self.msg_type);
        le.push_u32(&mut out, self.payload_length);
        le.push_u64(&mut out, self.incarnation);
        le.push_u32(&mut out, self.conn_type);
        out.resize(HELLO_V1_BYTES, 0);
        for ip in &self.ips {
            le.push_u32(&mut out, u32::from(*ip));
        }
        out
    }

    /// A V1 HELLO as a legacy kernel would fill it for these values.
    pub fn new(src: ProcessId, incarnation: u64, conn_type: ConnType) -> Result<V1Hello, NidError> {
        Ok(V1Hello {
            src_nid: src.nid.to_nid4()?,
            dest_pid: 0,
            src_pid: src.pid,
            msg_type: V1_MSG_TYPE_HELLO,
            payload_length: 0,
            incarnation,
            conn_type: conn_type.to_u32(),
            ips: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests;
