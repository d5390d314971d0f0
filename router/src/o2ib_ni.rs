//! Starting an o2ib NI on a running node: the same for the configured NIs, at start
//! (`run`), and for those added at run time (`net_control`), in a build with the `o2ib`
//! feature; and the running o2ib NIs' live `timeout` and `conns_per_peer`, which `net set
//! --lnd-timeout` and `net set --conns-per-peer` change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actors::Node;
use lnd::o2iblnd::{LiveTunables, O2ibLndConfig};
use lnet::Nid;

/// A running o2ib NI as `net set` changes it: its LND's live `timeout` and
/// `conns_per_peer`, the settings it started with and the interface `net show` prints with
/// them.
#[derive(Debug, Clone)]
pub struct O2ibRunning {
    /// The LND's live `timeout` and `conns_per_peer`.
    pub tunables: Arc<LiveTunables>,
    /// The configuration it started with (its other LND tunables).
    pub config: O2ibLndConfig,
    /// The interface that carries its address, if one does.
    pub interface: Option<String>,
}

impl O2ibRunning {
    /// Records what `net show` prints of NI `nid` with the settings it runs with now.
    pub fn describe(&self, node: &Node, nid: Nid) {
        node.describe_ni(
            nid,
            crate::describe::o2iblnd(&self.config, &self.tunables, self.interface.clone()),
        );
    }
}

/// The running o2ib NIs of a node, by NID: those of its configuration and those added at
/// run time (none in a build without the `o2ib` feature).
pub type O2ibNis = Arc<Mutex<HashMap<Nid, O2ibRunning>>>;

/// The o2iblnd configuration of NI `ni` for this run's `incarnation`.
pub fn o2iblnd_config(ni: &crate::plan::O2ibNi, incarnation: u64) -> O2ibLndConfig {
    let mut c = O2ibLndConfig::new(ni.nid, incarnation);
    if let Some(pc) = ni.peer_credits.and_then(|v| u16::try_from(v).ok()) {
        c.peer_credits = pc;
    }
    if let Some(secs) = ni.timeout.filter(|s| *s > 0) {
        c.timeout = std::time::Duration::from_secs(u64::from(secs));
    }
    // 0 or none: the module's default, as the kernel sets up an NI's tunables.
    if let Some(cpp) = ni.conns_per_peer.filter(|c| *c > 0) {
        c.conns_per_peer = cpp;
    }
    c
}

/// Starts o2ib NI `ni` on `node` (as configured, or added at run time with `net add`): its
/// LND with this run's `incarnation`, the NI, and what `net show` prints of it; the NI's
/// live settings. Must be called on the node's system thread.
#[cfg(feature = "o2ib")]
pub(crate) async fn start(
    node: &Node,
    ni: &crate::plan::O2ibNi,
    incarnation: u64,
) -> Result<O2ibRunning, crate::tcp_ni::NiStartError> {
    use actors::{LndStartError, NiDriver, NodeError};
    use lnd::o2iblnd::O2ibLnd;
    use lnd::Lnd;

    let config = o2iblnd_config(ni, incarnation);
    let ip = std::net::Ipv4Addr::from(ni.nid.addr_u32().unwrap_or(0));
    let port = config.listen_port.unwrap_or(0);
    let failed = |source| crate::tcp_ni::NiStartError {
        nid: ni.nid,
        listen: std::net::SocketAddr::from((ip, port)),
        source,
    };
    let lnd = O2ibLnd::start(config.clone(), node.handler())
        .await
        .map_err(|e| {
            failed(NodeError::NiStart {
                source: LndStartError::new(e),
            })
        })?;
    let tunables = lnd.tunables();
    let credits = actors::NiCredits {
        credits: ni.credits.unwrap_or(256),
        peer_credits: ni.peer_credits,
        peer_buffer_credits: ni.peer_buffer_credits,
        peer_timeout: ni.peer_timeout,
    };
    node.add_driver(Arc::new(NiDriver::new(lnd)), credits)
        .await
        .map_err(failed)?;
    let interface = crate::link::interface_of(ni.interface.as_deref(), Some(ip));
    let started = O2ibRunning {
        tunables,
        config,
        interface,
    };
    started.describe(node, ni.nid);
    println!("lnet-router: NI {} on RDMA-CM port {port}", ni.nid);
    tracing::info!(nid = %ni.nid, port, "NI up");
    Ok(started)
}
