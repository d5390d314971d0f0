//! The socklnd wire codec: pure functions and a sans-io deframer, no sockets, no tasks,
//! no clock.
//!
//! A socklnd TCP connection carries, in order:
//!
//! 1. the acceptor connection request, active → passive ([`lnet::acceptor`]);
//! 2. a HELLO each way ([`hello`]): protocol version, identities, incarnations, the
//!    connection type ([`conn_type`]) and the sender's byte order ([`ByteOrder`], from
//!    the HELLO magic);
//! 3. frames ([`frame`]): a 24-byte ksock header ([`ksock`]), then for LNET frames an
//!    LNet header (72 bytes for V2/V3, 96 for V4) and its payload; optionally
//!    checksummed by V2 senders ([`csum`]).
//!
//! The HELLO and every later ksock header on the connection are in the sender's byte order
//! (a big-endian peer's connection is "flipped"); the LNet header in a frame is always
//! little-endian and large NIDs always big-endian.
//!
//! [`deframer::Deframer`] turns the incoming byte stream into those pieces as events.
//! Layouts and rules come from the project's socklnd reference (`spec/`, section 3).

pub mod conn_type;
pub mod csum;
pub mod deframer;
pub mod frame;
pub mod hello;
pub mod ksock;

#[cfg(test)]
mod testutil;

pub use conn_type::ConnType;
pub use csum::{frame_csum, seal_frame, verify_frame, Csum, CsumError};
pub use deframer::{DeframeError, Deframer, Event, PayloadDecisionError, Side, Stage};
pub use frame::{encode_lnet, encode_noop, lnet_frame_len, FrameError, MAX_FRAME_BYTES};
pub use hello::{Hello, HelloDecoded, HelloError, ProtoVersion, V1Hello, MAX_HELLO_IPS};
pub use ksock::{KsockError, KsockHeader, KsockType, ZcAcks, KSOCK_HEADER_BYTES};
pub use lnet::ByteOrder;
