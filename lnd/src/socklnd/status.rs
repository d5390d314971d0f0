//! How a socklnd send failure maps to an LNet health status.
//!
//! The socklnd reference gives no table of its own; this one follows the o2iblnd table of
//! the health reference (§1.13) for the same situations, so both LNDs charge the same NI
//! for the same kind of failure:
//!
//! | failure | status | who pays |
//! |---|---|---|
//! | connect refused (ECONNREFUSED) | REMOTE_DROPPED | peer NI |
//! | connect timed out, host or network unreachable | NETWORK_TIMEOUT | both |
//! | connect failed otherwise (e.g. no reserved port free) | LOCAL_DROPPED | local NI |
//! | the peer refused the HELLO (ctype NONE, retries used up) | REMOTE_DROPPED | peer NI |
//! | the peer broke the handshake protocol | REMOTE_ERROR | peer NI |
//! | waited for a connection longer than the socklnd timeout | NETWORK_TIMEOUT | both |
//! | connected but still queued after the socklnd timeout (timeout before send) | LOCAL_TIMEOUT | local NI |
//! | being written when the connection stalled for the socklnd timeout (timeout after send) | NETWORK_TIMEOUT | both |
//! | being written when the connection was reset or closed by the peer | REMOTE_DROPPED | peer NI |
//! | being written when this side closed the connection for an error | LOCAL_ERROR | local NI |
//! | the NI was stopped | LOCAL_ABORTED | local NI |

use std::io;

use lnet::health::HealthStatus;

/// Why a send failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxFailure {
    /// The peer's port refused the TCP connection.
    ConnectRefused,
    /// The TCP connect timed out.
    ConnectTimedOut,
    /// The peer's host or network is unreachable.
    ConnectUnreachable,
    /// The connect failed on this side (no reserved source port, a local socket error).
    ConnectLocal,
    /// The peer answered the HELLO with ctype NONE until the retries ran out.
    HandshakeRefused,
    /// The peer's HELLO reply broke the protocol (wrong identity, version, ctype, bytes).
    HandshakeProtocol,
    /// No connection came up within the socklnd timeout.
    WaitedForConnection,
    /// Connected, but the message was still queued after the socklnd timeout.
    QueuedTooLong,
    /// The frame was being written when the connection stalled for the socklnd timeout
    /// (a write made no progress, or an incoming frame was not finished).
    Stalled,
    /// The frame was being written when the peer reset or closed the connection.
    PeerClosed,
    /// The frame was being written when this side closed the connection (e.g. the peer
    /// sent something invalid on another direction of it).
    ClosedLocally,
    /// The NI was stopped.
    Stopped,
}

impl TxFailure {
    /// The health status the send completes with.
    pub const fn status(self) -> HealthStatus {
        match self {
            TxFailure::ConnectRefused | TxFailure::HandshakeRefused | TxFailure::PeerClosed => {
                HealthStatus::RemoteDropped
            }
            TxFailure::ConnectTimedOut
            | TxFailure::ConnectUnreachable
            | TxFailure::WaitedForConnection
            | TxFailure::Stalled => HealthStatus::NetworkTimeout,
            TxFailure::ConnectLocal => HealthStatus::LocalDropped,
            TxFailure::HandshakeProtocol => HealthStatus::RemoteError,
            TxFailure::QueuedTooLong => HealthStatus::LocalTimeout,
            TxFailure::ClosedLocally => HealthStatus::LocalError,
            TxFailure::Stopped => HealthStatus::LocalAborted,
        }
    }

    /// The failure a TCP connect error means.
    pub fn of_connect_error(err: &io::Error) -> TxFailure {
        match err.kind() {
            io::ErrorKind::ConnectionRefused => TxFailure::ConnectRefused,
            io::ErrorKind::TimedOut => TxFailure::ConnectTimedOut,
            io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
                TxFailure::ConnectUnreachable
            }
            _ => TxFailure::ConnectLocal,
        }
    }

    /// The failure of a frame that was being written when a write returned `err`.
    pub fn of_write_error(err: &io::Error) -> TxFailure {
        match err.kind() {
            io::ErrorKind::TimedOut => TxFailure::Stalled,
            _ => TxFailure::PeerClosed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_classes_of_the_issue() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(
            TxFailure::of_connect_error(&refused).status(),
            HealthStatus::RemoteDropped
        );
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(
            TxFailure::of_write_error(&reset).status(),
            HealthStatus::RemoteDropped
        );
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(TxFailure::of_write_error(&pipe), TxFailure::PeerClosed);
        assert_eq!(
            TxFailure::QueuedTooLong.status(),
            HealthStatus::LocalTimeout
        );
        assert_eq!(TxFailure::Stalled.status(), HealthStatus::NetworkTimeout);
    }

    #[test]
    fn connect_errors() {
        let e = |k| TxFailure::of_connect_error(&io::Error::from(k));
        assert_eq!(
            e(io::ErrorKind::TimedOut).status(),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(
            e(io::ErrorKind::HostUnreachable).status(),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(
            e(io::ErrorKind::NetworkUnreachable).status(),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(
            e(io::ErrorKind::AddrInUse).status(),
            HealthStatus::LocalDropped
        );
        assert_eq!(
            TxFailure::WaitedForConnection.status(),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(
            TxFailure::HandshakeProtocol.status(),
            HealthStatus::RemoteError
        );
        assert_eq!(
            TxFailure::HandshakeRefused.status(),
            HealthStatus::RemoteDropped
        );
        assert_eq!(TxFailure::Stopped.status(), HealthStatus::LocalAborted);
        assert_eq!(TxFailure::ClosedLocally.status(), HealthStatus::LocalError);
    }
}
