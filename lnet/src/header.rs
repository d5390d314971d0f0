//! The LNet message header.
//!
//! Every LNet message (PUT, GET, ACK, REPLY; HELLO only inside the legacy socklnd V1
//! handshake) starts with this header, always little-endian whatever the sender's byte
//! order. It has two forms: 72 bytes with 64-bit NIDs (every LND, every peer by default)
//! and 96 bytes with 20-byte NIDs (socklnd V4 only). The header names the *end-to-end*
//! source and destination; a router forwards it unchanged.
//!
//! [`Header::decode`] checks structure only (length, type, NIDs). The receive checks a
//! node applies before it accepts a message are [`Header::check_lnet`] (what any
//! receiver refuses) and [`Header::classify`] (deliver, forward or drop, given the NI it
//! arrived on).

use crate::nid::{Nid, NidError, LARGE_NID_BYTES};
use crate::order::ByteOrder;

/// `LNET_MTU`: the largest payload of one LNet message.
pub const LNET_MTU: u32 = 1 << 20;
/// Bytes of the header with 64-bit NIDs.
pub const HEADER_NID4_BYTES: usize = 72;
/// Bytes of the header with 20-byte NIDs.
pub const HEADER_LARGE_BYTES: usize = 96;
/// Bytes of the type-specific union at the end of either form.
const UNION_BYTES: usize = 40;

/// Errors from decoding or checking an LNet header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer bytes than the header form needs.
    #[error("LNet header needs {expected} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// The type field is not ACK, PUT, GET, REPLY or HELLO.
    #[error("unknown LNet message type {value}")]
    UnknownType {
        /// The type value received.
        value: u32,
    },
    /// A NID field could not be decoded or encoded.
    #[error("bad {field} in LNet header: {source}")]
    BadNid {
        /// Which field: `dest_nid` or `src_nid`.
        field: &'static str,
        /// Why.
        source: NidError,
    },
    /// A HELLO header outside the socklnd V1 handshake.
    #[error("HELLO is not an LNet message outside the socklnd V1 handshake")]
    HelloNotAllowed,
    /// ACK and GET carry no payload.
    #[error("{msg_type:?} with payload_length {payload_length}: expected 0")]
    UnexpectedPayload {
        /// The message type.
        msg_type: MsgType,
        /// The payload length received.
        payload_length: u32,
    },
    /// PUT and REPLY carry at most [`LNET_MTU`] bytes.
    #[error("{msg_type:?} with payload_length {payload_length}: more than LNET_MTU {max}")]
    PayloadTooLarge {
        /// The message type.
        msg_type: MsgType,
        /// The payload length received.
        payload_length: u32,
        /// The limit.
        max: u32,
    },
    /// The source NID is LNET_NID_ANY.
    #[error("source NID is LNET_NID_ANY")]
    SourceIsAny,
    /// Not for this node, yet addressed to the net it arrived on: the sender should have
    /// sent it direct.
    #[error("message for {dest} arrived on {receiving_ni}, on its own net: should have been sent direct")]
    ShouldHaveBeenDirect {
        /// The destination in the header.
        dest: Nid,
        /// The NI it arrived on.
        receiving_ni: Nid,
    },
    /// Addressed to another of this node's NIDs, on a different net.
    #[error("message for my NID {dest} arrived on {receiving_ni}, a different network")]
    MyNidOnOtherNet {
        /// The destination in the header.
        dest: Nid,
        /// The NI it arrived on.
        receiving_ni: Nid,
    },
}

/// The LNet message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MsgType {
    /// Acknowledges a PUT.
    Ack = 0,
    /// Writes a payload to the target.
    Put = 1,
    /// Asks the target for data.
    Get = 2,
    /// Answers a GET with data.
    Reply = 3,
    /// socklnd V1 handshake only.
    Hello = 4,
}

impl MsgType {
    /// The type from its wire value.
    pub fn from_u32(value: u32) -> Result<MsgType, HeaderError> {
        Ok(match value {
            0 => MsgType::Ack,
            1 => MsgType::Put,
            2 => MsgType::Get,
            3 => MsgType::Reply,
            4 => MsgType::Hello,
            value => return Err(HeaderError::UnknownType { value }),
        })
    }
}

/// An MD handle as it travels on the wire: opaque to everyone but its creator, carried
/// back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WireHandle {
    /// The creator's interface cookie.
    pub interface_cookie: u64,
    /// The creator's object cookie.
    pub object_cookie: u64,
}

impl WireHandle {
    /// `LNET_WIRE_HANDLE_COOKIE_NONE` in both cookies: a PUT that wants no ACK.
    pub const NONE: WireHandle = WireHandle {
        interface_cookie: u64::MAX,
        object_cookie: u64::MAX,
    };

    /// Whether this is the "no ACK wanted" handle.
    pub fn is_none(&self) -> bool {
        *self == WireHandle::NONE
    }
}

/// The type-specific part of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// Acknowledges a PUT.
    Ack {
        /// The PUT's `ack_wmd`.
        dst_wmd: WireHandle,
        /// The PUT's match bits.
        match_bits: u64,
        /// Bytes the target kept.
        mlength: u32,
    },
    /// Writes the payload into the target's memory descriptor.
    Put {
        /// Where the ACK goes; [`WireHandle::NONE`] for no ACK.
        ack_wmd: WireHandle,
        /// Match bits.
        match_bits: u64,
        /// Opaque data carried to the target.
        hdr_data: u64,
        /// Portal index.
        ptl_index: u32,
        /// Offset in the target buffer.
        offset: u32,
    },
    /// Asks for data.
    Get {
        /// The handle the REPLY must name.
        return_wmd: WireHandle,
        /// Match bits.
        match_bits: u64,
        /// Portal index.
        ptl_index: u32,
        /// Offset in the source buffer.
        src_offset: u32,
        /// Most bytes the requester accepts.
        sink_length: u32,
    },
    /// Answers a GET.
    Reply {
        /// The GET's `return_wmd`.
        dst_wmd: WireHandle,
    },
    /// socklnd V1 handshake.
    Hello {
        /// Sender's incarnation.
        incarnation: u64,
        /// Sender's connection type.
        conn_type: u32,
    },
}

impl Message {
    /// The message type.
    pub fn msg_type(&self) -> MsgType {
        match self {
            Message::Ack { .. } => MsgType::Ack,
            Message::Put { .. } => MsgType::Put,
            Message::Get { .. } => MsgType::Get,
            Message::Reply { .. } => MsgType::Reply,
            Message::Hello { .. } => MsgType::Hello,
        }
    }

    fn encode(&self, u: &mut [u8; UNION_BYTES]) {
        *u = [0; UNION_BYTES];
        match *self {
            Message::Ack {
                dst_wmd,
                match_bits,
                mlength,
            } => {
                put_handle(u, 0, dst_wmd);
                put_u64(u, 16, match_bits);
                put_u32(u, 24, mlength);
            }
            Message::Put {
                ack_wmd,
                match_bits,
                hdr_data,
                ptl_index,
                offset,
            } => {
                put_handle(u, 0, ack_wmd);
                put_u64(u, 16, match_bits);
                put_u64(u, 24, hdr_data);
                put_u32(u, 32, ptl_index);
                put_u32(u, 36, offset);
            }
            Message::Get {
                return_wmd,
                match_bits,
                ptl_index,
                src_offset,
                sink_length,
            } => {
                put_handle(u, 0, return_wmd);
                put_u64(u, 16, match_bits);
                put_u32(u, 24, ptl_index);
                put_u32(u, 28, src_offset);
                put_u32(u, 32, sink_length);
            }
            Message::Reply { dst_wmd } => put_handle(u, 0, dst_wmd),
            Message::Hello {
                incarnation,
                conn_type,
            } => {
                put_u64(u, 0, incarnation);
                put_u32(u, 8, conn_type);
            }
        }
    }

    fn decode(msg_type: MsgType, u: &[u8; UNION_BYTES]) -> Message {
        match msg_type {
            MsgType::Ack => Message::Ack {
                dst_wmd: handle(u, 0),
                match_bits: u64_at(u, 16),
                mlength: u32_at(u, 24),
            },
            MsgType::Put => Message::Put {
                ack_wmd: handle(u, 0),
                match_bits: u64_at(u, 16),
                hdr_data: u64_at(u, 24),
                ptl_index: u32_at(u, 32),
                offset: u32_at(u, 36),
            },
            MsgType::Get => Message::Get {
                return_wmd: handle(u, 0),
                match_bits: u64_at(u, 16),
                ptl_index: u32_at(u, 24),
                src_offset: u32_at(u, 28),
                sink_length: u32_at(u, 32),
            },
            MsgType::Reply => Message::Reply {
                dst_wmd: handle(u, 0),
            },
            MsgType::Hello => Message::Hello {
                incarnation: u64_at(u, 0),
                conn_type: u32_at(u, 8),
            },
        }
    }
}

/// Which header form a connection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderForm {
    /// 72 bytes, 64-bit NIDs.
    Nid4,
    /// 96 bytes, 20-byte NIDs (socklnd V4).
    Large,
}

impl HeaderForm {
    /// Bytes of a header in this form.
    pub const fn size(self) -> usize {
        match self {
            HeaderForm::Nid4 => HEADER_NID4_BYTES,
            HeaderForm::Large => HEADER_LARGE_BYTES,
        }
    }
}

/// What a node does with a message that passed [`Header::check_lnet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Addressed to the NI it arrived on: deliver here.
    Local,
    /// Addressed elsewhere and this node forwards: buffer and send on.
    Forward,
    /// Addressed elsewhere but forwarding is off: read and discard the payload, keep the
    /// connection.
    DropRoutingDisabled,
}

/// An LNet message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Final destination NID.
    pub dest_nid: Nid,
    /// Original source NID.
    pub src_nid: Nid,
    /// Final destination pid.
    pub dest_pid: u32,
    /// Original source pid.
    pub src_pid: u32,
    /// Bytes of payload that follow.
    pub payload_length: u32,
    /// The type-specific fields.
    pub msg: Message,
}

impl Header {
    /// The message type.
    pub fn msg_type(&self) -> MsgType {
        self.msg.msg_type()
    }

    /// Whether [`Header::encode_nid4`] would succeed (both NIDs have a 64-bit form),
    /// without encoding.
    pub fn check_nid4(&self) -> Result<(), HeaderError> {
        for (field, nid) in [("dest_nid", &self.dest_nid), ("src_nid", &self.src_nid)] {
            nid.to_nid4()
                .map_err(|source| HeaderError::BadNid { field, source })?;
        }
        Ok(())
    }

    /// Encodes the 72-byte form. Fails if a NID has no 64-bit form.
    pub fn encode_nid4(&self) -> Result<[u8; HEADER_NID4_BYTES], HeaderError> {
        let mut out = [0u8; HEADER_NID4_BYTES];
        let dest = self
            .dest_nid
            .to_nid4()
            .map_err(|source| HeaderError::BadNid {
                field: "dest_nid",
                source,
            })?;
        let src = self
            .src_nid
            .to_nid4()
            .map_err(|source| HeaderError::BadNid {
                field: "src_nid",
                source,
            })?;
        put_u64(&mut out, 0, dest);
        put_u64(&mut out, 8, src);
        self.encode_tail(&mut out, 16);
        Ok(out)
    }

    /// Encodes the 96-byte form.
    pub fn encode_large(&self) -> [u8; HEADER_LARGE_BYTES] {
        let mut out = [0u8; HEADER_LARGE_BYTES];
        out[..LARGE_NID_BYTES].copy_from_slice(&self.dest_nid.to_large_bytes());
        out[LARGE_NID_BYTES..2 * LARGE_NID_BYTES].copy_from_slice(&self.src_nid.to_large_bytes());
        self.encode_tail(&mut out, 2 * LARGE_NID_BYTES);
        out
    }

    /// Appends the header in `form` to `out`.
    pub fn encode_into(&self, form: HeaderForm, out: &mut Vec<u8>) -> Result<(), HeaderError> {
        match form {
            HeaderForm::Nid4 => out.extend_from_slice(&self.encode_nid4()?),
            HeaderForm::Large => out.extend_from_slice(&self.encode_large()),
        }
        Ok(())
    }

    /// pids, type, payload length and union, after the two NIDs.
    fn encode_tail(&self, out: &mut [u8], at: usize) {
        put_u32(out, at, self.dest_pid);
        put_u32(out, at + 4, self.src_pid);
        put_u32(out, at + 8, self.msg_type() as u32);
        put_u32(out, at + 12, self.payload_length);
        let mut u = [0u8; UNION_BYTES];
        self.msg.encode(&mut u);
        if let Some(dst) = out.get_mut(at + 16..at + 16 + UNION_BYTES) {
            dst.copy_from_slice(&u);
        }
    }

    /// Decodes a header of `form` from the start of `buf`. Checks structure only.
    pub fn decode(buf: &[u8], form: HeaderForm) -> Result<Header, HeaderError> {
        let need = form.size();
        let b = buf.get(..need).ok_or(HeaderError::Truncated {
            expected: need,
            got: buf.len(),
        })?;
        let (dest_nid, src_nid, tail) = match form {
            HeaderForm::Nid4 => {
                let dest = Nid::from_nid4(u64_at(b, 0)).map_err(|source| HeaderError::BadNid {
                    field: "dest_nid",
                    source,
                })?;
                let src = Nid::from_nid4(u64_at(b, 8)).map_err(|source| HeaderError::BadNid {
                    field: "src_nid",
                    source,
                })?;
                (dest, src, 16)
            }
            HeaderForm::Large => {
                let dest = Nid::from_large_bytes(b).map_err(|source| HeaderError::BadNid {
                    field: "dest_nid",
                    source,
                })?;
                let src = b
                    .get(LARGE_NID_BYTES..)
                    .ok_or(HeaderError::Truncated {
                        expected: need,
                        got: buf.len(),
                    })
                    .and_then(|s| {
                        Nid::from_large_bytes(s).map_err(|source| HeaderError::BadNid {
                            field: "src_nid",
                            source,
                        })
                    })?;
                (dest, src, 2 * LARGE_NID_BYTES)
            }
        };
        let msg_type = MsgType::from_u32(u32_at(b, tail + 8))?;
        let mut u = [0u8; UNION_BYTES];
        if let Some(src) = b.get(tail + 16..tail + 16 + UNION_BYTES) {
            u.copy_from_slice(src);
        }
        Ok(Header {
            dest_nid,
            src_nid,
            dest_pid: u32_at(b, tail),
            src_pid: u32_at(b, tail + 4),
            payload_length: u32_at(b, tail + 12),
            msg: Message::decode(msg_type, &u),
        })
    }

    /// The checks every receiver applies before it looks at the destination: a real LNet
    /// type (not HELLO), no payload on ACK and GET, at most [`LNET_MTU`] on PUT and
    /// REPLY, and a source that is not ANY. Each violation closes the connection.
    pub fn check_lnet(&self) -> Result<(), HeaderError> {
        let msg_type = self.msg_type();
        match msg_type {
            MsgType::Hello => return Err(HeaderError::HelloNotAllowed),
            MsgType::Ack | MsgType::Get if self.payload_length != 0 => {
                return Err(HeaderError::UnexpectedPayload {
                    msg_type,
                    payload_length: self.payload_length,
                })
            }
            MsgType::Put | MsgType::Reply if self.payload_length > LNET_MTU => {
                return Err(HeaderError::PayloadTooLarge {
                    msg_type,
                    payload_length: self.payload_length,
                    max: LNET_MTU,
                })
            }
            _ => {}
        }
        if self.src_nid.is_any() {
            return Err(HeaderError::SourceIsAny);
        }
        Ok(())
    }

    /// Decides what the node does with a message that arrived on `receiving_ni`.
    ///
    /// `is_local_nid` says whether a NID belongs to one of this node's NIs. A message for
    /// exactly `receiving_ni` is local; one for another local NID, or for the receiving
    /// NI's own net, is a protocol error; anything else is forwarded or dropped.
    pub fn classify(
        &self,
        receiving_ni: Nid,
        is_local_nid: impl Fn(&Nid) -> bool,
        routing_enabled: bool,
    ) -> Result<Disposition, HeaderError> {
        self.check_lnet()?;
        if self.dest_nid == receiving_ni {
            return Ok(Disposition::Local);
        }
        if self.dest_nid.net == receiving_ni.net {
            return Err(HeaderError::ShouldHaveBeenDirect {
                dest: self.dest_nid,
                receiving_ni,
            });
        }
        if is_local_nid(&self.dest_nid) {
            return Err(HeaderError::MyNidOnOtherNet {
                dest: self.dest_nid,
                receiving_ni,
            });
        }
        Ok(if routing_enabled {
            Disposition::Forward
        } else {
            Disposition::DropRoutingDisabled
        })
    }
}

/// The header's byte order, whatever the sender's.
const LE: ByteOrder = ByteOrder::Little;

/// Writes a little-endian u32 at `at`; nothing past the end (callers size `out` first).
fn put_u32(out: &mut [u8], at: usize, v: u32) {
    let _ = LE.put_u32_at(out, at, v);
}

/// Writes a little-endian u64 at `at`; nothing past the end (callers size `out` first).
fn put_u64(out: &mut [u8], at: usize, v: u64) {
    let _ = LE.put_u64_at(out, at, v);
}

fn put_handle(out: &mut [u8], at: usize, h: WireHandle) {
    put_u64(out, at, h.interface_cookie);
    put_u64(out, at + 8, h.object_cookie);
}

/// Little-endian u32 at `at`; 0 past the end (callers check lengths first).
fn u32_at(b: &[u8], at: usize) -> u32 {
    LE.u32_at(b, at).unwrap_or_default()
}

/// Little-endian u64 at `at`; 0 past the end (callers check lengths first).
fn u64_at(b: &[u8], at: usize) -> u64 {
    LE.u64_at(b, at).unwrap_or_default()
}

fn handle(b: &[u8], at: usize) -> WireHandle {
    WireHandle {
        interface_cookie: u64_at(b, at),
        object_cookie: u64_at(b, at + 8),
    }
}

#[cfg(test)]
mod tests;
