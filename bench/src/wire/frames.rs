//! The frames the source and sink exchange, encoded once with the project's codecs and
//! patched in place, and a scanner that finds frame boundaries in a byte stream.
//!
//! Every frame is socklnd V3 with 64-bit NIDs: a 24-byte ksock header (little-endian, no
//! checksum, no zero-copy request) and the 72-byte LNet header. Byte offsets inside the
//! LNet header (its union starts at 32): `payload_length` at 28, a PUT's `ack_wmd` at
//! 32..48 (its object cookie at 40..48) and `match_bits` at 48..56; an ACK's `dst_wmd` at
//! 32..48 and `match_bits` at 48..56.

use lnd::socklnd::wire::{encode_lnet, ByteOrder, KsockHeader, KsockType, KSOCK_HEADER_BYTES};
use lnet::header::HEADER_NID4_BYTES;
use lnet::ping::{NiStatus, RESERVED_PORTAL};
use lnet::{
    Features, Header, HeaderForm, Message, MsgType, PingInfo, ProcessId, WireHandle, PING_MATCHBITS,
};

use crate::BenchError;

/// Bytes of a frame's headers (ksock + LNet), before its payload.
pub const FRAME_HEAD: usize = KSOCK_HEADER_BYTES + HEADER_NID4_BYTES;
/// Where the PUT's `ack_wmd` / the ACK's `dst_wmd` starts in a frame.
const WMD_AT: usize = KSOCK_HEADER_BYTES + 32;
/// Where the match bits start in a frame.
const MATCH_BITS_AT: usize = KSOCK_HEADER_BYTES + 48;
/// Where the LNet type is in a frame.
const TYPE_AT: usize = KSOCK_HEADER_BYTES + 24;
/// Where `payload_length` is in a frame.
const PAYLOAD_LEN_AT: usize = KSOCK_HEADER_BYTES + 28;
/// The portal the PUTs go to.
pub const PORTAL: u32 = 9;
/// The PUTs' match bits.
pub const MATCH_BITS: u64 = 0x5EED;
/// The interface cookie of the source's ACK handles.
const INTERFACE_COOKIE: u64 = 0x1BE7_C0DE;

fn encode(header: &Header, payload_len: usize) -> Result<[u8; FRAME_HEAD], BenchError> {
    let payload = vec![0u8; payload_len];
    let mut out = Vec::with_capacity(FRAME_HEAD + payload_len);
    encode_lnet(
        &KsockHeader::lnet(),
        header,
        HeaderForm::Nid4,
        &payload,
        ByteOrder::Little,
        &mut out,
    )
    .map_err(|e| BenchError::Setup(format!("encoding a frame: {e}")))?;
    let mut head = [0u8; FRAME_HEAD];
    head.copy_from_slice(out.get(..FRAME_HEAD).unwrap_or(&[0u8; FRAME_HEAD]));
    Ok(head)
}

/// The head of a PUT from `src` to `dst` with `payload_len` bytes and an ACK requested;
/// [`set_put_cookie`] patches the ACK handle's object cookie.
pub fn put_head(
    src: ProcessId,
    dst: ProcessId,
    payload_len: u32,
) -> Result<[u8; FRAME_HEAD], BenchError> {
    let header = Header {
        dest_nid: dst.nid,
        src_nid: src.nid,
        dest_pid: dst.pid,
        src_pid: src.pid,
        payload_length: payload_len,
        msg: Message::Put {
            ack_wmd: WireHandle {
                interface_cookie: INTERFACE_COOKIE,
                object_cookie: 0,
            },
            match_bits: MATCH_BITS,
            hdr_data: 0,
            ptl_index: PORTAL,
            offset: 0,
        },
    };
    encode(&header, payload_len as usize)
}

/// The head of the ACK `src` sends back to `dst`; [`answer_put`] patches the handle and
/// match bits from the PUT.
pub fn ack_head(src: ProcessId, dst: ProcessId) -> Result<[u8; FRAME_HEAD], BenchError> {
    let header = Header {
        dest_nid: dst.nid,
        src_nid: src.nid,
        dest_pid: dst.pid,
        src_pid: src.pid,
        payload_length: 0,
        msg: Message::Ack {
            dst_wmd: WireHandle::default(),
            match_bits: 0,
            mlength: 0,
        },
    };
    encode(&header, 0)
}

/// Sets the object cookie of a PUT head's ACK handle (the source's sequence number).
pub fn set_put_cookie(head: &mut [u8; FRAME_HEAD], cookie: u64) {
    if let Some(c) = head.get_mut(WMD_AT + 8..WMD_AT + 16) {
        c.copy_from_slice(&cookie.to_le_bytes());
    }
}

/// Appends to `out` the ACK for the PUT whose head is `put`: `ack` with the PUT's
/// `ack_wmd` and match bits copied in.
pub fn answer_put(ack: &[u8; FRAME_HEAD], put: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(ack);
    if let (Some(dst), Some(src)) = (
        out.get_mut(start + WMD_AT..start + MATCH_BITS_AT + 8),
        put.get(WMD_AT..MATCH_BITS_AT + 8),
    ) {
        dst.copy_from_slice(src);
    }
}

/// Appends to `out` the REPLY to an LNet ping (a GET on the reserved portal with the
/// ping match bits) whose head is `get`: `me`'s ping info, one NI, up. Returns `false`,
/// appending nothing, for any other GET.
pub fn answer_ping(me: ProcessId, get: &[u8], out: &mut Vec<u8>) -> Result<bool, BenchError> {
    let h = decode_head(get)?;
    let Message::Get {
        return_wmd,
        match_bits: PING_MATCHBITS,
        ptl_index: RESERVED_PORTAL,
        sink_length,
        ..
    } = h.msg
    else {
        return Ok(false);
    };
    let mut info = PingInfo::new(me.pid, 1, Features::NI_STATUS, vec![NiStatus::up(me.nid)])
        .encode()
        .map_err(|e| BenchError::Setup(format!("ping info: {e}")))?;
    info.truncate(sink_length as usize);
    let reply = Header {
        dest_nid: h.src_nid,
        src_nid: me.nid,
        dest_pid: h.src_pid,
        src_pid: me.pid,
        payload_length: u32::try_from(info.len()).unwrap_or(0),
        msg: Message::Reply {
            dst_wmd: return_wmd,
        },
    };
    encode_lnet(
        &KsockHeader::lnet(),
        &reply,
        HeaderForm::Nid4,
        &info,
        ByteOrder::Little,
        out,
    )
    .map_err(|e| BenchError::Setup(format!("encoding a ping REPLY: {e}")))?;
    Ok(true)
}

/// The object cookie of the handle an ACK head carries back.
pub fn ack_cookie(head: &[u8]) -> u64 {
    u64_at(head, WMD_AT + 8)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    u64::from_le_bytes(v)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        v.copy_from_slice(s);
    }
    u32::from_le_bytes(v)
}

/// What the scanner found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A NOOP (keepalive or ZC-ACK): nothing to do.
    Noop,
    /// An LNET frame of this type; its head is at the given offset of the buffer scanned.
    Lnet {
        /// The LNet message type.
        msg_type: MsgType,
        /// Where its [`FRAME_HEAD`] bytes start in the buffer.
        at: usize,
    },
}

/// Finds frames in a byte stream read in pieces. Payload bytes are skipped, never
/// copied: the sink reads bulk and drops it.
#[derive(Debug, Default)]
pub struct Scanner {
    /// Payload bytes still to skip before the next frame.
    skip: usize,
}

impl Scanner {
    /// Scans `buf` (bytes read, from the start of the unconsumed part) and calls `f` for
    /// each frame whose head is complete. Returns how many bytes of `buf` are consumed;
    /// the rest (a partial head) must be kept and presented again with the next bytes.
    pub fn scan(
        &mut self,
        buf: &[u8],
        mut f: impl FnMut(Found, &[u8]),
    ) -> Result<usize, BenchError> {
        let mut at = 0;
        loop {
            if self.skip > 0 {
                let n = self.skip.min(buf.len() - at);
                self.skip -= n;
                at += n;
                if self.skip > 0 {
                    return Ok(at);
                }
            }
            let rest = buf.get(at..).unwrap_or(&[]);
            if rest.len() < KSOCK_HEADER_BYTES {
                return Ok(at);
            }
            let ksock = KsockHeader::decode(rest, ByteOrder::Little)
                .map_err(|e| BenchError::Setup(format!("bad ksock header: {e}")))?;
            if ksock.msg_type == KsockType::Noop {
                f(Found::Noop, buf);
                at += KSOCK_HEADER_BYTES;
                continue;
            }
            if rest.len() < FRAME_HEAD {
                return Ok(at);
            }
            let msg_type = MsgType::from_u32(u32_at(rest, TYPE_AT))
                .map_err(|e| BenchError::Setup(format!("bad LNet header: {e}")))?;
            f(Found::Lnet { msg_type, at }, buf);
            at += FRAME_HEAD;
            self.skip = u32_at(rest, PAYLOAD_LEN_AT) as usize;
        }
    }
}

/// Decodes the LNet header of the frame head at the start of `head` (for checks in
/// tests and at setup; the hot path uses the offsets).
pub fn decode_head(head: &[u8]) -> Result<Header, BenchError> {
    let lnet = head.get(KSOCK_HEADER_BYTES..).unwrap_or(&[]);
    Header::decode(lnet, HeaderForm::Nid4)
        .map_err(|e| BenchError::Setup(format!("bad LNet header: {e}")))
}

#[cfg(test)]
mod tests;
