//! Per-NI counters of closed socklnd connections, by reason.
//!
//! Every connection an NI closes or loses (and every incoming or outgoing connection
//! attempt whose handshake fails) is counted once under one [`CloseReason`], and logged
//! with that reason. [`super::SockLnd::stats`] returns a snapshot ([`NiStats`]).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use lnet::ProcessId;

use super::conn::end::ConnEnd;
use super::handshake::{ConnectError, HandshakeError};
use super::wire::{ConnType, DeframeError, ProtoVersion};

/// A snapshot of one peer of a socklnd NI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerStats {
    /// The peer.
    pub peer: ProcessId,
    /// Its established connections: this side's type and the version, in setup order.
    pub conns: Vec<(ConnType, ProtoVersion)>,
    /// Messages waiting for a connection with room on its writer queue.
    pub queued: usize,
    /// Messages handed to a connection and not yet completed.
    pub in_flight: usize,
}

/// Why a socklnd connection, or a connection attempt, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CloseReason {
    /// An incoming connection from an unreserved source port (`accept=secure`).
    UnreservedPort,
    /// A bad acceptor request, or one for a NID that is not this NI.
    BadAcceptorRequest,
    /// A bad HELLO (magic, version, identity, connection type, IP list).
    BadHello,
    /// A handshake refused with ctype NONE (race lost, duplicate, stale incarnation),
    /// by either side.
    HandshakeRefused,
    /// The TCP connect of an outgoing attempt failed.
    ConnectFailed,
    /// A bad ksock header or a ZC-ACK for a cookie never requested.
    BadFrame,
    /// An LNet header the receive checks refuse (e.g. `payload_length` over LNET_MTU).
    BadLnetHeader,
    /// A frame whose checksum does not match.
    BadChecksum,
    /// The stream ended in the middle of a frame or of the handshake.
    Truncated,
    /// A read or write made no progress for the socklnd (or accept) timeout.
    Timeout,
    /// A passive handshake did not finish within `handshake_timeout` (a peer dripping
    /// bytes, or holding a half-open handshake).
    HandshakeTimeout,
    /// An incoming connection over `max_handshakes_per_addr` handshakes in progress from
    /// its address, closed at once.
    HandshakeLimit,
    /// A read or write failed (connection reset, broken pipe).
    Reset,
    /// The peer closed the connection between frames.
    PeerClosed,
    /// The upper layer asked to close it.
    UpperLayer,
    /// This side closed it because another connection to the same peer ended (the
    /// kernel closes a connection's siblings with it).
    Sibling,
    /// This side closed it (the peer restarted, the NI stopping).
    Local,
}

impl CloseReason {
    /// Every reason, in order.
    pub const ALL: [CloseReason; 17] = [
        CloseReason::UnreservedPort,
        CloseReason::BadAcceptorRequest,
        CloseReason::BadHello,
        CloseReason::HandshakeRefused,
        CloseReason::ConnectFailed,
        CloseReason::BadFrame,
        CloseReason::BadLnetHeader,
        CloseReason::BadChecksum,
        CloseReason::Truncated,
        CloseReason::Timeout,
        CloseReason::HandshakeTimeout,
        CloseReason::HandshakeLimit,
        CloseReason::Reset,
        CloseReason::PeerClosed,
        CloseReason::UpperLayer,
        CloseReason::Sibling,
        CloseReason::Local,
    ];

    /// A stable snake_case name, for logs and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::UnreservedPort => "unreserved_port",
            CloseReason::BadAcceptorRequest => "bad_acceptor_request",
            CloseReason::BadHello => "bad_hello",
            CloseReason::HandshakeRefused => "handshake_refused",
            CloseReason::ConnectFailed => "connect_failed",
            CloseReason::BadFrame => "bad_frame",
            CloseReason::BadLnetHeader => "bad_lnet_header",
            CloseReason::BadChecksum => "bad_checksum",
            CloseReason::Truncated => "truncated",
            CloseReason::Timeout => "timeout",
            CloseReason::HandshakeTimeout => "handshake_timeout",
            CloseReason::HandshakeLimit => "handshake_limit",
            CloseReason::Reset => "reset",
            CloseReason::PeerClosed => "peer_closed",
            CloseReason::UpperLayer => "upper_layer",
            CloseReason::Sibling => "sibling",
            CloseReason::Local => "local",
        }
    }

    /// Whether the peer broke the protocol (as opposed to timeouts, resets, refusals).
    pub fn is_protocol_error(self) -> bool {
        matches!(
            self,
            CloseReason::BadAcceptorRequest
                | CloseReason::BadHello
                | CloseReason::BadFrame
                | CloseReason::BadLnetHeader
                | CloseReason::BadChecksum
                | CloseReason::Truncated
        )
    }

    fn index(self) -> usize {
        CloseReason::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or_default()
    }

    pub(crate) fn of_io(e: &io::Error) -> CloseReason {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => CloseReason::Truncated,
            io::ErrorKind::TimedOut => CloseReason::Timeout,
            _ => CloseReason::Reset,
        }
    }

    pub(crate) fn of_handshake(e: &HandshakeError) -> CloseReason {
        match e {
            HandshakeError::Io { source, .. } => CloseReason::of_io(source),
            HandshakeError::Timeout { .. } => CloseReason::Timeout,
            HandshakeError::UnreservedPort { .. } => CloseReason::UnreservedPort,
            HandshakeError::Acceptor(_) | HandshakeError::WrongNid { .. } => {
                CloseReason::BadAcceptorRequest
            }
            HandshakeError::Hello(_)
            | HandshakeError::UnsupportedVersion { .. }
            | HandshakeError::Impostor { .. }
            | HandshakeError::WrongConnType { .. }
            | HandshakeError::VersionMismatch { .. } => CloseReason::BadHello,
            HandshakeError::NoReservedPort { .. } => CloseReason::ConnectFailed,
        }
    }

    pub(crate) fn of_connect(e: &ConnectError) -> CloseReason {
        match e {
            ConnectError::Tcp(_) => CloseReason::ConnectFailed,
            ConnectError::Handshake(h) => CloseReason::of_handshake(h),
            ConnectError::Refused => CloseReason::HandshakeRefused,
        }
    }

    pub(crate) fn of_end(end: &ConnEnd) -> CloseReason {
        match end {
            ConnEnd::WriteFailed(e) | ConnEnd::ReadFailed(e) => CloseReason::of_io(e),
            ConnEnd::WriteStalled | ConnEnd::ReadStalled => CloseReason::Timeout,
            ConnEnd::PeerClosed { mid_frame: false } => CloseReason::PeerClosed,
            ConnEnd::PeerClosed { mid_frame: true } => CloseReason::Truncated,
            ConnEnd::Deframe(e) => match e {
                DeframeError::UnexpectedEof { .. } => CloseReason::Truncated,
                DeframeError::Header(_) => CloseReason::BadLnetHeader,
                DeframeError::Csum(_) => CloseReason::BadChecksum,
                DeframeError::Acceptor(_) => CloseReason::BadAcceptorRequest,
                DeframeError::Hello(_) => CloseReason::BadHello,
                _ => CloseReason::BadFrame,
            },
            ConnEnd::Protocol(_) => CloseReason::BadFrame,
            ConnEnd::UpperLayer => CloseReason::UpperLayer,
            ConnEnd::Local => CloseReason::Local,
            ConnEnd::Sibling(_) => CloseReason::Sibling,
        }
    }
}

/// A snapshot of an NI's counters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct NiStats {
    /// Connections and connection attempts that ended, by reason (reasons never seen are
    /// absent).
    pub closes: BTreeMap<CloseReason, u64>,
    /// Rounds of writes on the NI's connections, by who wrote them.
    pub writes: WriteCounts,
}

/// Rounds of writes on an NI's connections (a round is one or more frames written
/// together), by who wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WriteCounts {
    /// Written by a reader that forwarded the frames, without blocking.
    pub by_reader: u64,
    /// Written by the connection's writer task.
    pub by_writer_task: u64,
    /// Of those a reader started, rounds the socket did not take whole: the rest went to
    /// the writer task.
    pub cut_short: u64,
    /// Rounds a reader staged, while a frame it read waited for a credit or a buffer:
    /// the frames' sends completed, their bytes written with what followed (not counted
    /// in `by_reader`).
    pub staged: u64,
    /// Of those a reader started, rounds written as the start of more (`MSG_MORE`: while
    /// a frame it read waited for a credit or a buffer).
    pub more: u64,
}

/// The live write counters of one NI.
#[derive(Debug, Default)]
pub(crate) struct WriteCounters {
    by_reader: AtomicU64,
    by_writer_task: AtomicU64,
    cut_short: AtomicU64,
    more: AtomicU64,
    staged: AtomicU64,
}

impl WriteCounters {
    /// A round written by a reader; `cut_short` if the socket did not take all of it,
    /// `more` if written as the start of more.
    pub(crate) fn by_reader(&self, cut_short: bool, more: bool) {
        self.by_reader.fetch_add(1, Ordering::Relaxed);
        if cut_short {
            self.cut_short.fetch_add(1, Ordering::Relaxed);
        }
        if more {
            self.more.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A round a reader staged.
    pub(crate) fn staged(&self) {
        self.staged.fetch_add(1, Ordering::Relaxed);
    }

    /// A round written by a writer task.
    pub(crate) fn by_writer_task(&self) {
        self.by_writer_task.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> WriteCounts {
        WriteCounts {
            by_reader: self.by_reader.load(Ordering::Relaxed),
            by_writer_task: self.by_writer_task.load(Ordering::Relaxed),
            cut_short: self.cut_short.load(Ordering::Relaxed),
            more: self.more.load(Ordering::Relaxed),
            staged: self.staged.load(Ordering::Relaxed),
        }
    }
}

impl NiStats {
    /// How many ended for `reason`.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closes.get(&reason).copied().unwrap_or(0)
    }

    /// How many ended for a protocol error of the peer.
    pub fn protocol_errors(&self) -> u64 {
        self.closes
            .iter()
            .filter(|(r, _)| r.is_protocol_error())
            .map(|(_, n)| n)
            .sum()
    }
}

/// The live counters of one NI.
#[derive(Debug, Default)]
pub(crate) struct CloseCounters {
    counts: [AtomicU64; CloseReason::ALL.len()],
}

impl CloseCounters {
    pub(crate) fn count(&self, reason: CloseReason) {
        if let Some(c) = self.counts.get(reason.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> NiStats {
        let closes = CloseReason::ALL
            .iter()
            .zip(&self.counts)
            .map(|(r, c)| (*r, c.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        NiStats {
            closes,
            writes: WriteCounts::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_reason() {
        let c = CloseCounters::default();
        assert_eq!(c.snapshot(), NiStats::default());
        c.count(CloseReason::Timeout);
        c.count(CloseReason::BadHello);
        c.count(CloseReason::BadHello);
        c.count(CloseReason::Local);
        let s = c.snapshot();
        assert_eq!(s.closed(CloseReason::BadHello), 2);
        assert_eq!(s.closed(CloseReason::Timeout), 1);
        assert_eq!(s.closed(CloseReason::Reset), 0);
        assert_eq!(s.protocol_errors(), 2);
        for (i, r) in CloseReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[test]
    fn names_are_distinct_snake_case() {
        let mut names: Vec<&str> = CloseReason::ALL.iter().map(|r| r.name()).collect();
        assert!(names
            .iter()
            .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
        assert_eq!(CloseReason::HandshakeTimeout.name(), "handshake_timeout");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CloseReason::ALL.len());
    }

    #[test]
    fn classification() {
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(CloseReason::of_io(&eof), CloseReason::Truncated);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(
            CloseReason::of_end(&ConnEnd::ReadFailed(reset)),
            CloseReason::Reset
        );
        assert_eq!(
            CloseReason::of_end(&ConnEnd::ReadStalled),
            CloseReason::Timeout
        );
        assert_eq!(
            CloseReason::of_connect(&ConnectError::Refused),
            CloseReason::HandshakeRefused
        );
        assert_eq!(
            CloseReason::of_end(&ConnEnd::Deframe(DeframeError::UnexpectedEof {
                stage: super::super::wire::Stage::Payload,
                buffered: 3
            })),
            CloseReason::Truncated
        );
    }
}
