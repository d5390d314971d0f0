//! LNet network drivers (LNDs).
//!
//! Each LND's wire codec is a pure module: it turns bytes into typed messages and back,
//! with no sockets and no clock, so that it can be fuzzed and checked against byte vectors.

pub mod o2iblnd;
pub mod socklnd;
