//! o2iblnd: the LND that carries LNet over InfiniBand/RoCE reliable connections (ko2iblnd).
//!
//! [`wire`] is the pure codec of its messages: the `kib_msg` header and bodies, RDMA
//! descriptors, the connection-reject private data and the optional checksum. It does no
//! verbs calls, opens no sockets and reads no clock.
//!
//! The driver keeps its protocol decisions in plain modules that build and test everywhere:
//! [`config`] (the tunables), [`connect`] (CONNREQ checks and rejects, CONNACK checks, the
//! reaction to a reject), [`credits`] (the credit flow of a connection), [`status`]
//! (send failures to health statuses), [`stats`] (the NI's counters) and [`tunables`] (the
//! `timeout` that changes while the NI runs). [`exchange`] is the data path as a pure
//! state machine: the IMMEDIATE, PUT and GET exchanges of established connections, driven
//! by events with the time passed in, answering with actions; its tests run two of them
//! against each other in memory. With the `o2ib-verbs` feature, [`O2ibLnd`] runs an
//! NI over real verbs and RDMA-CM (`ni`, the I/O layer that drives [`exchange`], with the
//! C calls confined to `sys`): a listener
//! on port 987, active connects (`conns_per_peer` of them to a peer it has no connection
//! to, sends going round the established ones, each with its own credits), IMMEDIATE
//! messages, PUT by RDMA WRITE
//! (PUT_REQ/PUT_ACK/PUT_DONE, PUT_NAK), the responder side of an optimised GET
//! (GET_REQ, the REPLY written by RDMA, GET_DONE), NOOPs for credits and keepalive, tx
//! deadlines, and connection events mapped to health statuses and
//! [`crate::LndHandler::on_peer_down`]. Against hostile requesters, an incoming connection
//! that never completes its handshake is torn down after the connect timeout, and CONNREQs
//! beyond `max_handshakes_per_addr` connections in handshake from one address, or
//! `max_handshakes` from all, are rejected (`IBLND_REJECT_NO_RESOURCES`). The feature needs libibverbs and librdmacm (and
//! the build tools of the `ibverbs` crate), which a plain `cargo test` does not.
//!
//! What this NI does not do yet: originate an optimised GET (a GET always goes as an
//! IMMEDIATE, as the kernel does when routing), FastReg/FMR mapping of caller memory (bulk
//! data is copied through pools registered once), privileged source ports and checksums on
//! sent messages. Fault
//! injection rules are applied above it, by the LNet layer, as for every LND.

pub mod config;
pub mod connect;
pub mod credits;
pub mod exchange;
#[cfg(feature = "o2ib-verbs")]
mod ni;
#[cfg(feature = "o2ib-verbs")]
pub mod probe;
pub mod stats;
pub mod status;
#[cfg(feature = "o2ib-verbs")]
pub mod sys;
pub mod tunables;
pub mod wire;

pub use config::O2ibLndConfig;
#[cfg(feature = "o2ib-verbs")]
pub use ni::{ConnInfo, O2ibLnd, PeerConn, StartError};
pub use stats::O2ibStats;
pub use tunables::LiveTunables;
