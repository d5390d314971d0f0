//! The LNet protocol, pure and synchronous: NIDs, the LNet header, ping and push buffers,
//! the acceptor request, and the rules of LNet Health (what each message status does,
//! health values, recovery queues and their backoff, timeouts, response tracking, path
//! selection, UDSP rules ([`udsp`], [`nidexpr`]), nidlists ([`nidlist`]), NUMA distances
//! ([`numa`]), global tunables), and the configuration model (`lnetctl export` YAML).
//!
//! Nothing here does I/O, reads a clock or spawns a task: time is an argument
//! ([`time::Millis`]). Decoders take byte slices and return typed errors; they never panic.
//! Every layout and rule comes from the protocol reference in the project's `spec/`
//! documents.

pub mod acceptor;
pub mod aliveness;
pub mod config;
pub mod fault;
pub mod forward;
pub mod header;
pub mod health;
pub mod netcheck;
pub mod nid;
pub mod nidexpr;
pub mod nidlist;
pub mod numa;
pub mod order;
pub mod ping;
pub mod recovery;
pub mod response;
pub mod route;
pub mod rtrbuf;
pub mod selection;
pub mod show;
pub mod time;
pub mod timeouts;
pub mod tunables;
pub mod udsp;

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
