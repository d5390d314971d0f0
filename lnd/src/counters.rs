//! What an LND counts of its NI, as [`crate::Lnd::counters`] gives it to the layer above:
//! one snapshot type per LND.

use crate::o2iblnd::stats::O2ibStats;
use crate::socklnd::stats::NiStats;

/// A snapshot of one NI's LND counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LndCounters {
    /// A socklnd NI: its connections and connection attempts ended, by reason, and its
    /// rounds of writes.
    Socklnd(NiStats),
    /// An o2iblnd NI: its connections, rejects and handshakes.
    O2iblnd(Box<O2ibStats>),
}
