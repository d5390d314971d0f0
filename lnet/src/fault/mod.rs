//! Fault injection, as `lnetctl fault drop|delay add` states it (health reference
//! §2.11): one model for every LND, applied by the LNet layer on send (before the LND has
//! the message) and on receive (before LNet processes it).
//!
//! * [`rule`]: a [`FaultRule`] matches a message by the source and destination NIDs of its
//!   header and optionally the local NI (each a [`NidMatch`]: any, any on a net, or one
//!   NID), its portals and its types (PUT, ACK, GET, REPLY); its [`FaultTrigger`] picks
//!   the messages it fires on (all, `--rate`, `--interval`, every Nth, a probability);
//!   its [`FaultKind`] drops or delays them, a drop with a [`FaultHealthError`] failing
//!   the send with that status instead.
//! * [`matcher`]: a [`FaultTable`] holds a node's rules with their counters (matched,
//!   fired) and returns the [`FaultVerdict`] for each message.
//!
//! Pure: no clock (time is passed in as [`crate::time::Millis`]) and no global
//! randomness (each rule has a seeded generator, so a run is reproducible).

pub mod matcher;
pub mod rule;

pub use matcher::{
    FaultAddError, FaultTable, FaultVerdict, RuleId, RuleStats, XorShift64, MAX_RULES,
};
pub use rule::{
    Direction, FaultHealthError, FaultKind, FaultMsgType, FaultPath, FaultRule, FaultRuleError,
    FaultTrigger, NidMatch, NidMatchError, MAX_LATENCY_MS, MAX_PORTAL,
};

#[cfg(test)]
mod tests;
