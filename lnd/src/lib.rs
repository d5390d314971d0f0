//! LNet network drivers (LNDs) behind one trait, [`Lnd`].
//!
//! Each LND's wire codec is a pure module: it turns bytes into typed messages and back,
//! with no sockets and no clock, so that it can be fuzzed and checked against byte vectors.
//! The drivers around the codecs keep their protocol decisions in plain functions too and
//! leave only the moving of bytes to tokio: [`socklnd::SockLnd`] is the first.

pub mod counters;
pub mod fabric;
pub mod lnd;
pub mod o2iblnd;
pub mod registered;
pub mod socklnd;

pub use counters::LndCounters;
pub use lnd::{
    Charged, Later, Lnd, LndHandler, RxDecision, RxHeader, RxMessage, SendError, Taken, TryRefused,
    TrySend, TxCompletion, TxId, TxRequest,
};
