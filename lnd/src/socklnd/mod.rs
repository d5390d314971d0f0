//! socklnd: the LND that carries LNet over TCP (ksocklnd), port 988.
//!
//! [`wire`] is the pure codec of everything that crosses a socklnd connection: the HELLO
//! handshake, the 24-byte ksock message header, the optional V2 checksum, and a sans-io
//! deframer that turns a byte stream into events. It opens no sockets, spawns no tasks and
//! reads no clock.

pub mod wire;
