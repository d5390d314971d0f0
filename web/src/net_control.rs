//! Local NIs started and stopped at run time (`lnetctl net add|del`), and the LND settings
//! changed while they run (`lnetctl net set --conns-per-peer|--lnd-timeout`). The API has
//! no LND of its own: the daemon plugs in what starts an NI's LND the way it starts the NIs
//! of its configuration, changes the running LNDs, and keeps both in its store.

use std::future::Future;
use std::pin::Pin;

use lnet::{LndType, Net, Nid};

/// A local NI to start (`lnetctl net add`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NiSpec {
    /// Its net.
    pub net: Net,
    /// The interface it runs on (`--if`); its NID is that interface's IPv4 address unless
    /// `nid` is given.
    pub interface: Option<String>,
    /// Its NID (`--nid`), when given.
    pub nid: Option<Nid>,
    /// NI tx credits (`--credits`).
    pub credits: Option<u32>,
    /// Per-peer tx credits (`--peer-credits`).
    pub peer_credits: Option<u32>,
    /// The net's `peer_timeout` in seconds (`--peer-timeout`; 0 turns the peer NI
    /// aliveness rule off; none: the LND's default, 180).
    pub peer_timeout: Option<u32>,
    /// The LND's `conns_per_peer` (`--conns-per-peer`, 0: the default): socklnd's
    /// connections of each direction, or those o2iblnd opens to a peer.
    pub conns_per_peer: Option<u32>,
}

/// Why an NI could not be started or stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NiControlError {
    /// The node has this NI already.
    #[error("NI {nid} exists")]
    Exists {
        /// The NI.
        nid: Nid,
    },
    /// A value is refused (an interface without an IPv4 address, a net this router cannot
    /// run, a setting the configuration check refuses), naming the field.
    #[error("{field}: {message}")]
    Invalid {
        /// The field (or configuration key) refused.
        field: String,
        /// Why.
        message: String,
    },
    /// The NI's LND cannot change this setting while it runs (naming the field).
    #[error("{field}: {message}")]
    Unsupported {
        /// The field.
        field: String,
        /// Why.
        message: String,
    },
    /// The LND could not start (its acceptor could not listen, ...).
    #[error("cannot add LNet NI: {message}")]
    Start {
        /// Why.
        message: String,
    },
    /// The node has no such NI.
    #[error("no local NI {nid}")]
    NotFound {
        /// The NI.
        nid: Nid,
    },
    /// The change was made on the node but could not be kept.
    #[error("{message}")]
    Keep {
        /// Why.
        message: String,
    },
}

/// What [`NiControl`] answers, later.
pub type NiFuture<T> = Pin<Box<dyn Future<Output = Result<T, NiControlError>> + Send>>;

/// Starts and stops local NIs of the running node, and keeps them in the store.
pub trait NiControl: Send + Sync + 'static {
    /// Starts NI `spec` and keeps it; its NID.
    fn add_ni(&self, spec: NiSpec) -> NiFuture<Nid>;
    /// Stops local NI `nid` and removes it from what is kept.
    fn remove_ni(&self, nid: Nid) -> NiFuture<()>;
    /// Sets the `conns_per_peer` (0: "auto") of local NI `nid`, or of every NI whose LND
    /// has the setting when `nid` is `None`, for the peers they learn of from now on, and
    /// keeps it; the NIs set.
    fn set_conns_per_peer(&self, nid: Option<Nid>, conns_per_peer: u32) -> NiFuture<Vec<Nid>>;
    /// Sets the timeout (seconds, at least 1) of LND `lnd`, which all its NIs share (the
    /// kernel's module parameter), from now on, and keeps it; the NIs set.
    fn set_lnd_timeout(&self, lnd: LndType, seconds: u32) -> NiFuture<Vec<Nid>>;
}
