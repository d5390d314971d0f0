//! Starting a socklnd NI on a running node: the same for the configured NIs, at start
//! (`run`), and for those added at run time (`net_control`).

use std::sync::Arc;

use actors::{LndStartError, NiDriver, Node, NodeError};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnd::Lnd;

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

/// Starts socklnd NI `ni` on `node` (as configured, or added at run time with `net add`):
/// its LND with this run's `incarnation` and CPTs, the NI, what `net show` prints of it
/// and its NUMA node. Must be called on the node's system thread.
pub(crate) async fn start(
    node: &Node,
    ni: &TcpNi,
    incarnation: u64,
    cpts: &lnd::socklnd::Cpts,
) -> Result<(), NiStartError> {
    let mut config = socklnd_config(ni, incarnation);
    config.cpts = cpts.clone();
    let credits = config.credits;
    let described = config.clone();
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
    node.describe_ni(
        ni.nid,
        crate::describe::socklnd(&described, interface.clone()),
    );
    let device_node = interface.and_then(|i| crate::numa::interface_node(&i));
    node.set_ni_numa_node(ni.nid, device_node)
        .await
        .map_err(failed)?;
    println!("lnet-router: NI {} listening on {at}", ni.nid);
    tracing::info!(nid = %ni.nid, listen = %at, "NI up");
    Ok(())
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
    c
}
