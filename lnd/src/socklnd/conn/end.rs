//! Why a socklnd connection ended, and what that means for the send being written on it.

use std::io;

use crate::socklnd::status::TxFailure;
use crate::socklnd::wire::DeframeError;

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum ConnEnd {
    /// A write failed.
    WriteFailed(io::Error),
    /// A write made no progress for the socklnd timeout.
    WriteStalled,
    /// A read failed.
    ReadFailed(io::Error),
    /// A frame was started but not finished within the socklnd timeout.
    ReadStalled,
    /// The peer closed the connection (between frames or in the middle of one).
    PeerClosed { mid_frame: bool },
    /// The peer's bytes broke the framing (the deframer's error; an EOF mid-frame is
    /// [`DeframeError::UnexpectedEof`]).
    Deframe(DeframeError),
    /// The peer sent something invalid that the deframer cannot know about.
    Protocol(String),
    /// The upper layer asked to close it.
    UpperLayer,
    /// This side closed it (stale peer, stop).
    Local,
    /// This side closed it because a sibling connection to the same peer ended (kernel
    /// behaviour: a connection closes with its siblings); a send being written on it
    /// fails as the sibling's did.
    Sibling(TxFailure),
}

impl ConnEnd {
    /// The failure of the send that was being written when the connection ended this way.
    pub(crate) fn failure(&self) -> TxFailure {
        match self {
            ConnEnd::WriteFailed(e) => TxFailure::of_write_error(e),
            ConnEnd::WriteStalled | ConnEnd::ReadStalled => TxFailure::Stalled,
            ConnEnd::ReadFailed(_) | ConnEnd::PeerClosed { .. } => TxFailure::PeerClosed,
            ConnEnd::Deframe(DeframeError::UnexpectedEof { .. }) => TxFailure::PeerClosed,
            ConnEnd::Sibling(failure) => *failure,
            ConnEnd::Deframe(_) | ConnEnd::Protocol(_) | ConnEnd::UpperLayer | ConnEnd::Local => {
                TxFailure::ClosedLocally
            }
        }
    }
}

impl std::fmt::Display for ConnEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnEnd::WriteFailed(e) => write!(f, "write failed: {e}"),
            ConnEnd::WriteStalled => f.write_str("write stalled for the socklnd timeout"),
            ConnEnd::ReadFailed(e) => write!(f, "read failed: {e}"),
            ConnEnd::ReadStalled => f.write_str("timeout receiving a frame"),
            ConnEnd::PeerClosed { mid_frame: false } => f.write_str("peer closed"),
            ConnEnd::PeerClosed { mid_frame: true } => f.write_str("peer closed mid-frame"),
            ConnEnd::Deframe(e) => write!(f, "protocol error: {e}"),
            ConnEnd::Protocol(why) => write!(f, "protocol error: {why}"),
            ConnEnd::UpperLayer => f.write_str("closed by the upper layer"),
            ConnEnd::Local => f.write_str("closed by this side"),
            ConnEnd::Sibling(_) => f.write_str("closed with a sibling connection"),
        }
    }
}
