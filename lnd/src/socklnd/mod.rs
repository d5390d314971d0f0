//! socklnd: the LND that carries LNet over TCP (ksocklnd), port 988.
//!
//! [`wire`] is the pure codec of everything that crosses a socklnd connection: the HELLO
//! handshake, the 24-byte ksock message header, the optional V2 checksum, and a sans-io
//! deframer that turns a byte stream into events. It opens no sockets, spawns no tasks and
//! reads no clock.
//!
//! The driver around it ([`SockLnd`], behind [`crate::Lnd`]) keeps its protocol decisions
//! in plain modules too: [`placement`] (which connection carries which frame),
//! [`credits`] (tx credit accounting), [`status`] (failures to health statuses),
//! [`stats`] (closed connections by reason) and the decision functions of [`handshake`].
//! The tokio layer is [`ni`] (acceptor, NI), `peer` (one task per peer:
//! connections, queue, credits; a connection that ends takes its siblings with it, and a
//! peer left with nothing is reported down through [`crate::LndHandler::on_peer_down`])
//! and `conn` (a connection's reader and writer tasks).

pub mod config;
mod conn;
pub mod credits;
pub mod handshake;
pub mod ni;
mod peer;
pub mod placement;
pub mod stats;
pub mod status;
pub mod wire;

pub use config::{Cpts, SockLndConfig};
pub use ni::{SockLnd, StartError};
pub use stats::{CloseReason, NiStats, PeerStats};
