//! What each local NI's LND counts of how its connections and connection attempts end, as
//! the layers above show it ([`crate::Node::lnd_counters`]): one view per LND kind, every
//! reason under a stable snake_case name (`handshake_timeout`, `no_resources`, ...), every
//! reason present (0 until the first), so that a rate can be taken from the start.
//!
//! The LNDs keep these counters themselves (socklnd in atomics, o2iblnd in its NI task);
//! reading them costs the LND a snapshot and nothing on the data path.

use std::collections::BTreeMap;

use lnd::o2iblnd::wire::RejWhy;
use lnd::o2iblnd::O2ibStats;
use lnd::socklnd::{CloseReason, NiStats};
use lnet::Nid;

/// The `why` name of a reject received without an o2ib reject in it (an IB CM reject: no
/// listener, a stale connection, foreign private data).
pub const NOT_O2IB_REJECT: &str = "not_o2ib";

/// The LND counters of one local NI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NiLndCounters {
    /// The NI.
    pub nid: Nid,
    /// Its LND's counters.
    pub counters: LndCounters,
}

/// The counters of one NI, by the kind of its LND.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LndCounters {
    /// A socklnd NI.
    Socklnd(SocklndCounters),
    /// An o2iblnd NI.
    O2iblnd(O2iblndCounters),
}

impl From<lnd::LndCounters> for LndCounters {
    fn from(c: lnd::LndCounters) -> LndCounters {
        match c {
            lnd::LndCounters::Socklnd(s) => LndCounters::Socklnd(SocklndCounters::from(&s)),
            lnd::LndCounters::O2iblnd(s) => LndCounters::O2iblnd(O2iblndCounters::from(s.as_ref())),
        }
    }
}

/// What a socklnd NI counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocklndCounters {
    /// Connections and connection attempts that ended, by reason: every reason socklnd
    /// knows ([`CloseReason::name`]), 0 for those never seen.
    pub closes: BTreeMap<&'static str, u64>,
    /// Its rounds of writes.
    pub writes: SocklndWrites,
}

/// Rounds of writes on a socklnd NI's connections (a round is one or more frames written
/// together), by who wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SocklndWrites {
    /// Written by a reader that forwarded the frames, without blocking.
    pub by_reader: u64,
    /// Written by the connection's writer task.
    pub by_writer_task: u64,
    /// Of the reader's rounds, those the socket did not take whole (the rest went to the
    /// writer task).
    pub cut_short: u64,
    /// Of the reader's rounds, those written as the start of more (`MSG_MORE`).
    pub more: u64,
    /// Rounds a reader staged (not written: the frames' sends completed and their bytes
    /// went out with the next write), while a frame it read waited.
    pub staged: u64,
}

impl From<&NiStats> for SocklndCounters {
    fn from(s: &NiStats) -> SocklndCounters {
        SocklndCounters {
            closes: CloseReason::ALL
                .iter()
                .map(|r| (r.name(), s.closed(*r)))
                .collect(),
            writes: SocklndWrites {
                by_reader: s.writes.by_reader,
                by_writer_task: s.writes.by_writer_task,
                cut_short: s.writes.cut_short,
                more: s.writes.more,
                staged: s.writes.staged,
            },
        }
    }
}

/// What an o2iblnd NI counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct O2iblndCounters {
    /// Connections established (both directions).
    pub conns_established: u64,
    /// Connections closed.
    pub conns_closed: u64,
    /// Rejects sent, by why ([`RejWhy::name`]): every named reason and `other`, 0 for
    /// those never sent.
    pub rejects_sent: BTreeMap<&'static str, u64>,
    /// Rejects its connects received, by why: as `rejects_sent`, and
    /// [`NOT_O2IB_REJECT`] for a reject that carried no o2ib reject.
    pub rejects_received: BTreeMap<&'static str, u64>,
    /// Incoming connections torn down because the requester never completed the
    /// handshake within the connect timeout.
    pub handshake_timeouts: u64,
    /// Connection requests rejected because their address already had
    /// `max_handshakes_per_addr` connections in handshake.
    pub handshake_limit_rejects: u64,
    /// Connections in handshake now (a gauge).
    pub handshakes: u64,
    /// Connections of any state now (a gauge).
    pub conns: u64,
    /// Receive or send completions that failed on a live connection.
    pub wc_errors: u64,
    /// PUTs received and handed up in the sink buffer the peer's RDMA wrote them to, no
    /// copy made (a router forwards them from there).
    pub puts_lent: u64,
    /// PUTs received and handed up as a copy (half the sink buffers were lent).
    pub puts_copied: u64,
    /// Payloads sent by RDMA from the router buffer they were read into, no copy made.
    pub bulk_sent_in_place: u64,
    /// Payloads sent by RDMA after a copy into the NI's own registered buffers.
    pub bulk_sent_copied: u64,
}

/// Every named `why` and `other`, at 0.
fn rejects_zero() -> BTreeMap<&'static str, u64> {
    RejWhy::NAMED
        .iter()
        .map(|w| w.name())
        .chain([RejWhy::Other(0).name()])
        .map(|n| (n, 0))
        .collect()
}

/// `counts` (by wire code) by name; code 0 under `zero`.
fn rejects_by_name(
    counts: &std::collections::HashMap<u8, u64>,
    zero: Option<&'static str>,
) -> BTreeMap<&'static str, u64> {
    let mut by_name = rejects_zero();
    if let Some(z) = zero {
        by_name.insert(z, 0);
    }
    for (code, n) in counts {
        let name = match (code, zero) {
            (0, Some(z)) => z,
            _ => RejWhy::from_u8(*code).name(),
        };
        let e = by_name.entry(name).or_insert(0);
        *e = e.saturating_add(*n);
    }
    by_name
}

impl From<&O2ibStats> for O2iblndCounters {
    fn from(s: &O2ibStats) -> O2iblndCounters {
        O2iblndCounters {
            conns_established: s.conns_established,
            conns_closed: s.conns_closed,
            rejects_sent: rejects_by_name(&s.rejects_sent, None),
            rejects_received: rejects_by_name(&s.rejects_received, Some(NOT_O2IB_REJECT)),
            handshake_timeouts: s.handshake_timeouts,
            handshake_limit_rejects: s.handshake_limit_rejects,
            handshakes: s.handshakes,
            conns: s.conns,
            wc_errors: s.wc_errors,
            puts_lent: s.sinks_lent,
            puts_copied: s.sinks_copied,
            bulk_sent_in_place: s.bulk_sent_in_place,
            bulk_sent_copied: s.bulk_sent_copied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_socklnd_reason_is_named_and_present() {
        let mut s = NiStats::default();
        s.closes.insert(CloseReason::HandshakeTimeout, 3);
        s.closes.insert(CloseReason::BadLnetHeader, 1);
        s.writes.by_reader = 7;
        s.writes.more = 2;
        s.writes.staged = 5;
        let c = SocklndCounters::from(&s);
        assert_eq!(c.closes.len(), CloseReason::ALL.len());
        assert_eq!(c.closes["handshake_timeout"], 3);
        assert_eq!(c.closes["bad_lnet_header"], 1);
        assert_eq!(c.closes["handshake_limit"], 0);
        assert_eq!(c.closes.values().sum::<u64>(), 4);
        assert_eq!(c.writes.by_reader, 7);
        assert_eq!(c.writes.more, 2);
        assert_eq!(c.writes.staged, 5);
        assert_eq!(c.writes.by_writer_task, 0);
    }

    #[test]
    fn o2ib_rejects_are_named_by_why_and_unknown_codes_are_other() {
        let mut s = O2ibStats::default();
        s.rejects_sent.insert(2, 5);
        s.rejects_sent.insert(77, 1);
        s.rejects_sent.insert(78, 2);
        s.rejects_received.insert(0, 4);
        s.rejects_received.insert(1, 1);
        s.handshake_timeouts = 6;
        s.handshakes = 2;
        let c = O2iblndCounters::from(&s);
        assert_eq!(c.rejects_sent["no_resources"], 5);
        assert_eq!(c.rejects_sent["other"], 3);
        assert_eq!(c.rejects_sent["conn_race"], 0);
        assert_eq!(c.rejects_sent.len(), 10);
        assert!(!c.rejects_sent.contains_key(NOT_O2IB_REJECT));
        assert_eq!(c.rejects_received[NOT_O2IB_REJECT], 4);
        assert_eq!(c.rejects_received["conn_race"], 1);
        assert_eq!(c.rejects_received.len(), 11);
        assert_eq!(c.handshake_timeouts, 6);
        assert_eq!(c.handshakes, 2);
    }
}
