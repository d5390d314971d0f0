//! Starting a socklnd NI on a running node: the same for the configured NIs, at start
//! (`run`), and for those added at run time (`net_control`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actors::{LndStartError, NiDriver, Node, NodeError};
use lnd::socklnd::{LiveTunables, SockLnd, SockLndConfig};
use lnd::Lnd;
use lnet::Nid;

use crate::plan::TcpNi;

/// An NI that could not start (its acceptor could not listen, ...).
#[derive(Debug, thiserror::Error)]
#[error("NI {nid} (acceptor {listen}) could not start: {source}")]
pub struct NiStartError {
    /// The NI.
    pub nid: lnet::Nid,
    /// Where it was to listen.
    pub listen: std::net::SocketAddr,
    /// Why.
    #[source]
    pub source: NodeError,
}

/// A running socklnd NI as `net set` changes it: its LND's live settings, and the
/// interface `net show` prints with them.
#[derive(Debug, Clone)]
pub struct SockNi {
    /// The LND's live `timeout` and `conns_per_peer`.
    pub tunables: Arc<LiveTunables>,
    /// The interface that carries its address, if one does.
    pub interface: Option<String>,
}

impl SockNi {
    /// Records what `net show` prints of NI `nid` with the settings it runs with now.
    pub fn describe(&self, node: &Node, nid: Nid) {
        node.describe_ni(
            nid,
            crate::describe::socklnd(&self.tunables, self.interface.clone()),
        );
    }
}

/// The running socklnd NIs of a node, by NID: those of its configuration and those added
/// at run time.
pub type SockNis = Arc<Mutex<HashMap<Nid, SockNi>>>;

/// Starts socklnd NI `ni` on `node` (as configured, or added at run time with `net add`):
/// its LND with this run's `incarnation` and CPTs, the NI, what `net show` prints of it
/// and its NUMA node; the NI's live settings. Must be called on the node's system thread.
pub(crate) async fn start(
    node: &Node,
    ni: &TcpNi,
    incarnation: u64,
    cpts: &lnd::socklnd::Cpts,
) -> Result<SockNi, NiStartError> {
    let mut config = socklnd_config(ni, incarnation);
    config.cpts = cpts.clone();
    let credits = config.credits;
    let failed = |source| NiStartError {
        nid: ni.nid,
        listen: ni.listen,
        source,
    };
    let lnd = SockLnd::start(config, node.handler()).await.map_err(|e| {
        failed(NodeError::NiStart {
            source: LndStartError::new(e),
        })
    })?;
    let at = lnd.local_addr().unwrap_or(ni.listen);
    let tunables = lnd.tunables();
    let credits = actors::NiCredits {
        credits,
        peer_credits: ni.peer_credits,
        peer_buffer_credits: ni.peer_buffer_credits,
        peer_timeout: ni.peer_timeout,
    };
    node.add_driver(Arc::new(NiDriver::new(lnd)), credits)
        .await
        .map_err(failed)?;
    let addr = ni.nid.addr_u32().map(std::net::Ipv4Addr::from);
    let interface = crate::link::interface_of(ni.interface.as_deref(), addr);
    let started = SockNi {
        tunables,
        interface: interface.clone(),
    };
    started.describe(node, ni.nid);
    let device_node = interface.and_then(|i| crate::numa::interface_node(&i));
    node.set_ni_numa_node(ni.nid, device_node)
        .await
        .map_err(failed)?;
    println!("lnet-router: NI {} listening on {at}", ni.nid);
    tracing::info!(nid = %ni.nid, listen = %at, "NI up");
    Ok(started)
}

fn socklnd_config(ni: &TcpNi, incarnation: u64) -> SockLndConfig {
    let mut c = SockLndConfig::new(ni.nid, incarnation);
    c.listen = Some(ni.listen);
    c.peer_port = ni.peer_port;
    if let Some(credits) = ni.credits {
        c.credits = credits;
    }
    if let Some(peer_credits) = ni.peer_credits {
        c.peer_credits = peer_credits;
    }
    if let Some(cpp) = ni.conns_per_peer {
        c.conns_per_peer = cpp;
    }
    if let Some(secs) = ni.timeout.filter(|s| *s > 0) {
        c.timeout = Duration::from_secs(u64::from(secs));
    }
    c
}
