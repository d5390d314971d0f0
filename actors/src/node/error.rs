//! Why a node refused a request ([`NodeError`]).

use actix::MailboxError;
use lnet::fault::FaultAddError;
use lnet::udsp::UdspError;
use lnet::Nid;

/// Why a node refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A route was refused.
    #[error("route refused: {error}")]
    Route {
        /// Why.
        error: lnet::route::RouteError,
    },
    /// The LND could not start the NI.
    #[error("NI could not start: {reason}")]
    NiStart {
        /// Why.
        reason: String,
    },
    /// An NI with this NID exists already.
    #[error("NI {nid} exists already")]
    NiExists {
        /// The NID.
        nid: Nid,
    },
    /// No local NI has this NID.
    #[error("no local NI {nid}")]
    NoSuchNi {
        /// The NID.
        nid: Nid,
    },
    /// No peer NI has this NID.
    #[error("no peer NI {nid}")]
    NoSuchPeerNi {
        /// The NID.
        nid: Nid,
    },
    /// A peer needs at least one NID, none of them this node's own.
    #[error("bad peer: {reason}")]
    BadPeer {
        /// Why.
        reason: String,
    },
    /// Too many sends in flight.
    #[error("too many messages in flight ({max})")]
    Busy {
        /// The limit.
        max: usize,
    },
    /// The node's actor is gone.
    #[error("the node is stopped")]
    Stopped,
    /// The node refused a fault rule.
    #[error("fault rule refused")]
    FaultRule(#[source] FaultAddError),
    /// A UDSP rule list was refused.
    #[error("UDSP rules refused: {0}")]
    Udsp(UdspError),
}

impl From<MailboxError> for NodeError {
    fn from(_: MailboxError) -> NodeError {
        NodeError::Stopped
    }
}
