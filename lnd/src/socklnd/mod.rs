//! socklnd: the LND that carries LNet over TCP (ksocklnd), port 988.
//!
//! [`wire`] is the pure codec of everything that crosses a socklnd connection: the HELLO
//! handshake, the 24-byte ksock message header, the optional V2 checksum, and a sans-io
//! deframer that turns a byte stream into events. It opens no sockets, spawns no tasks and
//! reads no clock.
//!
//! The driver around it ([`SockLnd`], behind [`crate::Lnd`]) keeps its protocol decisions
//! in plain modules too: [`placement`] (which connection carries which frame),
//! [`status`] (failures to health statuses), [`stats`] (closed connections by reason) and
//! the decision functions of [`handshake`]; [`tunables`] holds the settings that change
//! while the NI runs (its timeout and `conns_per_peer`). The tokio layer is [`ni`] (acceptor, NI),
//! `peer` (one task per peer: its connections; a connection that ends takes its siblings
//! with it, and a peer left with nothing is reported down through
//! [`crate::LndHandler::on_peer_down`]; and the peer's send side, shared with the senders
//! and writers) and `conn` (a connection's reader and writer tasks).
//!
//! Like the kernel's ksocklnd it counts no tx credits: `credits` and `peer_credits` are
//! the LNet layer's, which charges them before a send reaches the LND.

pub mod config;
mod conn;
pub mod handshake;
pub mod ni;
mod peer;
pub mod placement;
pub mod stats;
pub mod status;
pub mod tunables;
pub mod wire;

pub use config::{Cpts, SockLndConfig};
pub use ni::{SockLnd, StartError};
pub use stats::{CloseReason, NiStats, PeerStats, WriteCounts};
pub use tunables::LiveTunables;
