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
