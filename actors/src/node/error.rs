//! Why a node refused a request ([`NodeError`]), with the typed causes it carries: an
//! LND's start error ([`LndStartError`]) and why a peer was refused ([`BadPeerReason`]).

use std::error::Error;
use std::sync::Arc;

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
    #[error("NI could not start: {source}")]
    NiStart {
        /// Why: the LND's own start error.
        #[source]
        source: LndStartError,
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
    /// No peer has this primary NID.
    #[error("no peer with primary NID {nid}")]
    NoSuchPeer {
        /// The NID.
        nid: Nid,
    },
    /// The peer cannot be deleted as asked: it is a gateway of a route, or the NID to
    /// delete is its primary NID while it has others.
    #[error("peer {nid} is busy: {reason}")]
    PeerBusy {
        /// The peer's primary NID.
        nid: Nid,
        /// Why.
        reason: PeerBusyReason,
    },
    /// A peer needs at least one NID, none of them this node's own.
    #[error("bad peer: {reason}")]
    BadPeer {
        /// Why.
        #[source]
        reason: BadPeerReason,
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
    Udsp(#[from] UdspError),
}

/// The start error of an LND (its [`lnd::Lnd::StartError`]), whatever the LND. Clones
/// share the error and compare equal; two errors from different starts do not.
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct LndStartError(Arc<dyn Error + Send + Sync + 'static>);

impl LndStartError {
    /// Wraps the start error of an LND.
    pub fn new<E: Error + Send + Sync + 'static>(error: E) -> LndStartError {
        LndStartError(Arc::new(error))
    }

    /// The LND's error, to be downcast to its type (e.g. `lnd::socklnd::StartError`).
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl PartialEq for LndStartError {
    fn eq(&self, other: &LndStartError) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LndStartError {}

/// Why a peer cannot be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerBusyReason {
    /// It is the gateway of a route (`lnetctl`: a router cannot be deleted).
    #[error("it is a router (the gateway of a route)")]
    Gateway,
    /// The NID to delete is its primary NID and it has other NIDs.
    #[error("the primary NID goes only with the whole peer")]
    PrimaryWithOthers,
}

/// Why a configured peer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadPeerReason {
    /// It has no NID, or one of its NIDs is this node's own.
    #[error("a peer needs NIDs, none of them this node's")]
    NoUsableNid,
    /// One of its NIDs belongs to another configured peer (seed 003 snd-065: the same
    /// NID under two peers is an error).
    #[error("{nid} belongs to peer {owner} already")]
    NidTaken {
        /// The NID asked for.
        nid: Nid,
        /// The configured peer that has it.
        owner: Nid,
    },
}

impl From<MailboxError> for NodeError {
    fn from(_: MailboxError) -> NodeError {
        NodeError::Stopped
    }
}
