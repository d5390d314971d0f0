//! Which connection of a peer carries which frame (socklnd reference §3.4).
//!
//! Placement is a sender-side policy only: a receiver accepts any frame on any connection.
//! Each connection type either prefers a kind of traffic, accepts it as a fallback, or
//! never carries it; among the connections that fit best, the one with the fewest queued
//! bytes wins, ties going to the one used least recently (round robin).

use super::wire::{ConnType, ProtoVersion};

/// What is to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Traffic {
    /// An LNET frame of this many bytes (ksock header + LNet header + payload).
    Lnet {
        /// Frame size in bytes.
        frame_len: usize,
    },
    /// A NOOP that must not wait behind other traffic: a ZC-ACK or a keepalive.
    NoopNonBlocking,
    /// Any other NOOP.
    NoopBlocking,
}

/// How well a connection suits some traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fit {
    /// Used only when no connection prefers the traffic.
    Fallback,
    /// The connection this traffic belongs on.
    Preferred,
}

/// How a connection of type `ctype` (this side's end) that negotiated `version` suits
/// `traffic`; `None` if it never carries it.
pub fn fit(
    version: ProtoVersion,
    ctype: ConnType,
    traffic: Traffic,
    min_bulk: usize,
) -> Option<Fit> {
    match version {
        ProtoVersion::V3 | ProtoVersion::V4 => fit_v3(ctype, traffic, min_bulk),
        ProtoVersion::V2 => fit_v2(ctype, traffic, min_bulk),
    }
}

fn fit_v3(ctype: ConnType, traffic: Traffic, min_bulk: usize) -> Option<Fit> {
    use ConnType::{BulkIn, BulkOut, Control};
    use Traffic::{Lnet, NoopBlocking, NoopNonBlocking};
    match (ctype, traffic) {
        (Control, Lnet { frame_len }) if frame_len < min_bulk => Some(Fit::Preferred),
        (Control, Lnet { .. }) => Some(Fit::Fallback),
        (BulkOut, Lnet { frame_len }) if frame_len >= min_bulk => Some(Fit::Preferred),
        (BulkOut, Lnet { .. }) => Some(Fit::Fallback),
        (BulkIn, NoopNonBlocking) => Some(Fit::Preferred),
        (BulkIn | Control | BulkOut, NoopBlocking) => Some(Fit::Fallback),
        _ => None,
    }
}

fn fit_v2(ctype: ConnType, traffic: Traffic, min_bulk: usize) -> Option<Fit> {
    let size = match traffic {
        Traffic::Lnet { frame_len } => frame_len,
        Traffic::NoopNonBlocking | Traffic::NoopBlocking => super::wire::KSOCK_HEADER_BYTES,
    };
    match ctype {
        ConnType::Any => Some(Fit::Preferred),
        ConnType::BulkIn => Some(Fit::Fallback),
        ConnType::BulkOut if size >= min_bulk => Some(Fit::Preferred),
        ConnType::Control if size < min_bulk => Some(Fit::Preferred),
        ConnType::BulkOut | ConnType::Control => Some(Fit::Fallback),
        ConnType::None => None,
    }
}

/// One established connection, as placement sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// This side's connection type.
    pub ctype: ConnType,
    /// The negotiated version.
    pub version: ProtoVersion,
    /// Bytes queued on it and not yet handed to the transport.
    pub queued_bytes: usize,
    /// When it was last given something (a counter; smaller is longer ago).
    pub last_used: u64,
}

/// The index of the connection `traffic` goes on, if any can carry it.
pub fn choose(candidates: &[Candidate], traffic: Traffic, min_bulk: usize) -> Option<usize> {
    // The best so far: its index, fit, queued bytes and last use. Of equals the later
    // one wins. A plain loop over plain values: this runs for every send.
    let mut best: Option<(usize, Fit, usize, u64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        let Some(f) = fit(c.version, c.ctype, traffic, min_bulk) else {
            continue;
        };
        let better = best.is_none_or(|(_, bf, bq, bl)| {
            f.cmp(&bf)
                .then(bq.cmp(&c.queued_bytes))
                .then(bl.cmp(&c.last_used))
                .is_ge()
        });
        if better {
            best = Some((i, f, c.queued_bytes, c.last_used));
        }
    }
    best.map(|(i, ..)| i)
}

/// A ZC-ACK or keepalive goes where non-blocking NOOPs belong, or else wherever a NOOP
/// may go at all (any connection to the peer is accepted for ZC-ACKs).
pub fn choose_noop(candidates: &[Candidate], min_bulk: usize) -> Option<usize> {
    choose(candidates, Traffic::NoopNonBlocking, min_bulk)
        .or_else(|| choose(candidates, Traffic::NoopBlocking, min_bulk))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConnType::{Any, BulkIn, BulkOut, Control};

    const MB: usize = 1024;

    fn c(ctype: ConnType, queued_bytes: usize, last_used: u64) -> Candidate {
        Candidate {
            ctype,
            version: ProtoVersion::V3,
            queued_bytes,
            last_used,
        }
    }

    #[test]
    fn v3_table() {
        let small = Traffic::Lnet { frame_len: 96 };
        let big = Traffic::Lnet { frame_len: 1024 };
        let v = ProtoVersion::V3;
        assert_eq!(fit(v, Control, small, MB), Some(Fit::Preferred));
        assert_eq!(fit(v, Control, big, MB), Some(Fit::Fallback));
        assert_eq!(fit(v, BulkOut, big, MB), Some(Fit::Preferred));
        assert_eq!(fit(v, BulkOut, small, MB), Some(Fit::Fallback));
        assert_eq!(fit(v, BulkIn, small, MB), None);
        assert_eq!(fit(v, BulkIn, big, MB), None);
        assert_eq!(fit(v, Any, small, MB), None);
        assert_eq!(
            fit(v, BulkIn, Traffic::NoopNonBlocking, MB),
            Some(Fit::Preferred)
        );
        assert_eq!(fit(v, Control, Traffic::NoopNonBlocking, MB), None);
        assert_eq!(fit(v, BulkOut, Traffic::NoopNonBlocking, MB), None);
        for t in [Control, BulkOut, BulkIn] {
            assert_eq!(fit(v, t, Traffic::NoopBlocking, MB), Some(Fit::Fallback));
        }
        assert_eq!(fit(v, Any, Traffic::NoopBlocking, MB), None);
    }

    #[test]
    fn v2_table() {
        let v = ProtoVersion::V2;
        let small = Traffic::Lnet { frame_len: 96 };
        let big = Traffic::Lnet { frame_len: 5000 };
        assert_eq!(fit(v, Any, big, MB), Some(Fit::Preferred));
        assert_eq!(fit(v, BulkIn, small, MB), Some(Fit::Fallback));
        assert_eq!(fit(v, BulkOut, big, MB), Some(Fit::Preferred));
        assert_eq!(fit(v, BulkOut, small, MB), Some(Fit::Fallback));
        assert_eq!(fit(v, Control, small, MB), Some(Fit::Preferred));
        assert_eq!(fit(v, Control, big, MB), Some(Fit::Fallback));
        assert_eq!(
            fit(v, Control, Traffic::NoopNonBlocking, MB),
            Some(Fit::Preferred)
        );
    }

    #[test]
    fn default_threshold_splits_at_928_bytes_of_payload() {
        let set = [c(Control, 0, 0), c(BulkIn, 0, 0), c(BulkOut, 0, 0)];
        let frame = |payload: usize| Traffic::Lnet {
            frame_len: 96 + payload,
        };
        assert_eq!(choose(&set, frame(927), MB), Some(0));
        assert_eq!(choose(&set, frame(928), MB), Some(2));
        assert_eq!(choose(&set, frame(1 << 20), MB), Some(2));
        assert_eq!(choose_noop(&set, MB), Some(1));
    }

    #[test]
    fn fallbacks_when_the_preferred_type_is_missing() {
        let control_only = [c(Control, 0, 0)];
        assert_eq!(
            choose(&control_only, Traffic::Lnet { frame_len: 5000 }, MB),
            Some(0)
        );
        assert_eq!(choose(&control_only, Traffic::NoopNonBlocking, MB), None);
        assert_eq!(choose_noop(&control_only, MB), Some(0));
        let bulk_in_only = [c(BulkIn, 0, 0)];
        assert_eq!(
            choose(&bulk_in_only, Traffic::Lnet { frame_len: 96 }, MB),
            None
        );
        assert_eq!(choose(&[], Traffic::NoopBlocking, MB), None);
    }

    #[test]
    fn least_queued_then_least_recently_used() {
        let set = [c(BulkOut, 500, 1), c(BulkOut, 100, 9), c(BulkOut, 100, 3)];
        let big = Traffic::Lnet { frame_len: 5000 };
        assert_eq!(choose(&set, big, MB), Some(2));
        let tie = [c(BulkOut, 0, 7), c(BulkOut, 0, 2), c(Control, 0, 0)];
        assert_eq!(choose(&tie, big, MB), Some(1));
        // Equal in every way: the later one.
        let same = [c(BulkOut, 0, 2), c(BulkOut, 0, 2), c(Control, 0, 0)];
        assert_eq!(choose(&same, big, MB), Some(1));
    }
}
