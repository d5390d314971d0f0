//! The LNet protocol, pure and synchronous: NIDs, the LNet header, ping and push buffers
//! and the acceptor request.
//!
//! Nothing here does I/O, reads a clock or spawns a task. Decoders take byte slices and
//! return typed errors; they never panic. Every layout comes from the protocol reference
//! in the project's `spec/` documents.

pub mod acceptor;
pub mod header;
pub mod nid;
pub mod order;
pub mod ping;

pub use acceptor::{
    AcceptorError, AcceptorRequest, AcceptorVersion, ACCEPTOR_MAGIC, ACCEPTOR_PORT,
    LNET_PROTO_MAGIC,
};
pub use header::{
    Disposition, Header, HeaderError, HeaderForm, Message, MsgType, WireHandle, LNET_MTU,
};
pub use nid::{LndType, Net, Nid, NidAddr, NidError, ProcessId};
pub use order::ByteOrder;
pub use ping::{
    Features, LargeNiStatus, NiStatus, NiStatusValue, PingError, PingInfo, PING_MAGIC,
    PING_MATCHBITS,
};
