//! What a connection's writer is given to send.

use bytes::Bytes;
use lnet::Header;

use crate::socklnd::wire::KsockHeader;

/// What a writer sends.
#[derive(Debug)]
pub(crate) enum WriteItem {
    /// An LNET frame of the peer's send number `seq`.
    Lnet {
        seq: u64,
        header: Header,
        payload: Bytes,
    },
    /// A NOOP (ZC-ACK or keepalive).
    Noop(KsockHeader),
}

/// An ACK header with `len` bytes of payload, for tests of what carries frames.
#[cfg(test)]
pub(crate) fn test_header(len: usize) -> Header {
    let nid = |s: &str| -> lnet::Nid { s.parse().expect("a NID") };
    Header {
        dest_nid: nid("192.168.1.1@tcp"),
        src_nid: nid("192.168.1.2@tcp"),
        dest_pid: lnet::nid::PID_LUSTRE,
        src_pid: lnet::nid::PID_LUSTRE,
        payload_length: u32::try_from(len).unwrap_or(u32::MAX),
        msg: lnet::Message::Ack {
            dst_wmd: lnet::WireHandle {
                interface_cookie: 1,
                object_cookie: 2,
            },
            match_bits: 3,
            mlength: 0,
        },
    }
}
