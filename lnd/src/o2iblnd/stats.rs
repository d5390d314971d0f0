//! The counters of an o2iblnd NI ([`O2ibStats`]): its connections, the rejects it sent and
//! received, its messages and the handshakes it cut off. Plain data, built without verbs,
//! so that the layers above can read them whatever the build; with the `o2ib-verbs`
//! feature the NI's task keeps them and `O2ibLnd::stats` returns a snapshot.

use std::collections::HashMap;

/// Counters of one NI, for tests and the layers above.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct O2ibStats {
    /// Connections established (both directions).
    pub conns_established: u64,
    /// Connections closed.
    pub conns_closed: u64,
    /// Rejects sent, by `why` code.
    pub rejects_sent: HashMap<u8, u64>,
    /// Rejects received by active connects, by `why` code (0: not a `kib_rej`).
    pub rejects_received: HashMap<u8, u64>,
    /// Messages received, by type code.
    pub rx_msgs: HashMap<u8, u64>,
    /// Messages sent, by type code.
    pub tx_msgs: HashMap<u8, u64>,
    /// Bytes written by RDMA (source side).
    pub rdma_bytes: u64,
    /// Most peer credits a connection had in use at once.
    pub peak_credits_in_use: u16,
    /// PUTs handed to the layer above in the sink buffer the peer's RDMA wrote them to,
    /// without a copy.
    pub sinks_lent: u64,
    /// PUTs handed to the layer above as a copy of their sink buffer (half the sink
    /// buffers were lent at the time).
    pub sinks_copied: u64,
    /// Sink buffers lent to the layer above now.
    pub sinks_lent_now: u64,
    /// Payloads sent by RDMA from the layer above's registered buffer they lay in (no
    /// copy).
    pub bulk_sent_in_place: u64,
    /// Payloads sent by RDMA after a copy into a source bulk buffer.
    pub bulk_sent_copied: u64,
    /// Receive or send completions that failed on a live connection.
    pub wc_errors: u64,
    /// Incoming connections torn down because the requester never completed the
    /// handshake (no RTU, so no ESTABLISHED) within the connect timeout.
    pub handshake_timeouts: u64,
    /// CONNREQs rejected (`IBLND_REJECT_NO_RESOURCES`) because their address already had
    /// `max_handshakes_per_addr` connections in handshake, or all addresses together
    /// `max_handshakes`.
    pub handshake_limit_rejects: u64,
    /// Connections in handshake now (both directions), each holding a QP and receive
    /// buffers.
    pub handshakes: u64,
    /// Connections of any state now (`max_conns` at most).
    pub conns: u64,
}
