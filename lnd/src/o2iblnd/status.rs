//! How an o2iblnd send failure maps to an LNet health status (protocol reference §1.13).
//!
//! | failure | status | who pays |
//! |---|---|---|
//! | queued on a connection past its deadline (connection closed with ETIMEDOUT) | LOCAL_TIMEOUT | local NI |
//! | posted, send not completed, when the deadline passed | NETWORK_TIMEOUT | both |
//! | posted and waiting for the peer's answer (PUT_ACK/NAK, GET_DONE) when the deadline passed | REMOTE_TIMEOUT | peer NI |
//! | queued when the connection closed for another error | LOCAL_ERROR | local NI |
//! | posted or waiting when the peer disconnected or its sends failed (send WC error, flush) | REMOTE_DROPPED | peer NI |
//! | posted or waiting when this side closed the connection for a local error | LOCAL_ERROR | local NI |
//! | waited for a connection past its deadline | NETWORK_TIMEOUT | both |
//! | connect failed: unreachable, address/route resolution failed or timed out, no listener | NETWORK_TIMEOUT | both |
//! | connect refused (a reject this side gives up on) | REMOTE_DROPPED | peer NI |
//! | connect failed on this side (verbs resources) | LOCAL_DROPPED | local NI |
//! | the peer's PUT_NAK/PUT_DONE/GET_DONE carried a negative status | REMOTE_ERROR | peer NI |
//! | local mapping failure (RDMA descriptor too small or too fragmented) | LOCAL_ERROR | local NI |
//! | the RDMA device went away | LOCAL_ERROR | local NI |
//! | the NI was stopped | LOCAL_ABORTED | local NI |
//!
//! One difference from the kernel: when a connection closes for an error that is not a
//! timeout, the kernel leaves the health status of a tx that was already posted as it was
//! (usually OK) while failing the tx with −ECONNABORTED. The [`crate::Lnd`] trait carries one
//! status per send, so such a tx is reported as REMOTE_DROPPED when the peer went away and as
//! LOCAL_ERROR when this side closed the connection: a failed send is never reported OK.

use lnet::health::HealthStatus;

/// Where a tx was when its connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxStage {
    /// On a connection queue, not yet posted.
    Queued,
    /// Posted, a signalled send not yet completed.
    Sending,
    /// Posted and completed, waiting for the peer's answer.
    Waiting,
}

/// Why a send failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxFailure {
    /// Its connection was closed because a tx on it passed its deadline.
    ConnTimeout(TxStage),
    /// Its connection was closed because the peer disconnected or a send failed on the
    /// wire (a work completion error).
    PeerGone(TxStage),
    /// Its connection was closed by this side for an error (protocol error from the peer,
    /// stale message, a local verbs failure).
    ClosedLocally(TxStage),
    /// No connection came up before its deadline.
    WaitedForConnection,
    /// The connect failed: unreachable, resolution failed or timed out, no listener.
    ConnectUnreachable,
    /// The peer refused the connection with a reject this side gives up on.
    ConnectRefused,
    /// The connect failed on this side.
    ConnectLocal,
    /// The peer answered with a negative completion status.
    PeerError,
    /// This side could not map the transfer (descriptor too small or too fragmented).
    LocalMapping,
    /// The RDMA device was removed.
    DeviceRemoved,
    /// The NI was stopped.
    Stopped,
}

impl TxFailure {
    /// The health status the send completes with.
    pub const fn status(self) -> HealthStatus {
        match self {
            TxFailure::ConnTimeout(TxStage::Queued) => HealthStatus::LocalTimeout,
            TxFailure::ConnTimeout(TxStage::Sending) => HealthStatus::NetworkTimeout,
            TxFailure::ConnTimeout(TxStage::Waiting) => HealthStatus::RemoteTimeout,
            TxFailure::PeerGone(TxStage::Queued) | TxFailure::ClosedLocally(_) => {
                HealthStatus::LocalError
            }
            TxFailure::PeerGone(_) => HealthStatus::RemoteDropped,
            TxFailure::WaitedForConnection | TxFailure::ConnectUnreachable => {
                HealthStatus::NetworkTimeout
            }
            TxFailure::ConnectRefused => HealthStatus::RemoteDropped,
            TxFailure::ConnectLocal => HealthStatus::LocalDropped,
            TxFailure::PeerError => HealthStatus::RemoteError,
            TxFailure::LocalMapping | TxFailure::DeviceRemoved => HealthStatus::LocalError,
            TxFailure::Stopped => HealthStatus::LocalAborted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_of_the_reference() {
        use TxStage::*;
        let s = |f: TxFailure| f.status();
        assert_eq!(
            s(TxFailure::ConnTimeout(Queued)),
            HealthStatus::LocalTimeout
        );
        assert_eq!(
            s(TxFailure::ConnTimeout(Sending)),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(
            s(TxFailure::ConnTimeout(Waiting)),
            HealthStatus::RemoteTimeout
        );
        assert_eq!(s(TxFailure::PeerGone(Queued)), HealthStatus::LocalError);
        assert_eq!(s(TxFailure::PeerGone(Sending)), HealthStatus::RemoteDropped);
        assert_eq!(s(TxFailure::PeerGone(Waiting)), HealthStatus::RemoteDropped);
        assert_eq!(
            s(TxFailure::ClosedLocally(Waiting)),
            HealthStatus::LocalError
        );
        assert_eq!(
            s(TxFailure::WaitedForConnection),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(
            s(TxFailure::ConnectUnreachable),
            HealthStatus::NetworkTimeout
        );
        assert_eq!(s(TxFailure::ConnectRefused), HealthStatus::RemoteDropped);
        assert_eq!(s(TxFailure::ConnectLocal), HealthStatus::LocalDropped);
        assert_eq!(s(TxFailure::PeerError), HealthStatus::RemoteError);
        assert_eq!(s(TxFailure::LocalMapping), HealthStatus::LocalError);
        assert_eq!(s(TxFailure::Stopped), HealthStatus::LocalAborted);
    }
}
