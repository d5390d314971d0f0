//! A socklnd NI the daemon can stop after handing it to the node.
//!
//! [`actors::Node::add_ni`] takes ownership of the started LND and offers no way to stop
//! it again, while [`Lnd::stop`] needs the LND by value. [`StoppableSockLnd`] starts a
//! [`SockLnd`] and keeps it in a [`NiSlot`] shared with the daemon: sends go through the
//! slot, and [`NiSlot::stop`] takes the LND out and stops it cleanly (closing its
//! listener and connections, aborting unsent messages).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actors::fault::{FaultAddError, FaultHooks, FaultRule, RuleId, RuleStats};
use actors::NodeHandler;
use lnd::socklnd::{SockLnd, SockLndConfig, StartError};
use lnd::{Lnd, SendError, TxRequest};
use lnet::Nid;

/// How long [`NiSlot::stop`] waits for sends under way to return before it drops the NI.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How often it looks.
const STOP_POLL: Duration = Duration::from_millis(10);

/// Where a running socklnd NI is kept, shared by the node's driver and the daemon.
#[derive(Debug, Default)]
pub struct NiSlot {
    lnd: Mutex<Option<Arc<SockLnd<NodeHandler>>>>,
}

impl NiSlot {
    /// An empty slot, filled when the NI starts.
    pub fn new() -> Arc<NiSlot> {
        Arc::new(NiSlot::default())
    }

    fn get(&self) -> Option<Arc<SockLnd<NodeHandler>>> {
        self.lnd.lock().ok().and_then(|g| g.clone())
    }

    /// Where the NI's acceptor listens, once it runs.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.get().and_then(|l| l.local_addr())
    }

    /// Takes the NI out (new sends are refused as stopped), waits (bounded) for sends under
    /// way to return, then stops it with [`Lnd::stop`]. Returns whether it stopped
    /// cleanly; otherwise it is dropped, which also closes it.
    pub async fn stop(&self) -> bool {
        let taken = match self.lnd.lock() {
            Ok(mut g) => g.take(),
            Err(_) => None,
        };
        let Some(mut lnd) = taken else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        loop {
            match Arc::try_unwrap(lnd) {
                Ok(owned) => {
                    owned.stop().await;
                    return true;
                }
                Err(shared) if tokio::time::Instant::now() < deadline => {
                    lnd = shared;
                    tokio::time::sleep(STOP_POLL).await;
                }
                Err(shared) => {
                    tracing::warn!(nid = %shared.nid(), "sends still under way: NI dropped");
                    return false;
                }
            }
        }
    }
}

/// What [`StoppableSockLnd`] starts from.
#[derive(Debug)]
pub struct StoppableConfig {
    /// The socklnd NI.
    pub socklnd: SockLndConfig,
    /// Where the started NI is kept.
    pub slot: Arc<NiSlot>,
}

/// A [`SockLnd`] kept in a [`NiSlot`].
#[derive(Debug)]
pub struct StoppableSockLnd {
    nid: Nid,
    slot: Arc<NiSlot>,
}

impl Lnd for StoppableSockLnd {
    type Config = StoppableConfig;
    type Handler = NodeHandler;
    type StartError = StartError;

    async fn start(config: StoppableConfig, handler: Arc<NodeHandler>) -> Result<Self, StartError> {
        let lnd = SockLnd::start(config.socklnd, handler).await?;
        let nid = lnd.nid();
        if let Ok(mut g) = config.slot.lnd.lock() {
            *g = Some(Arc::new(lnd));
        }
        Ok(StoppableSockLnd {
            nid,
            slot: config.slot,
        })
    }

    fn nid(&self) -> Nid {
        self.nid
    }

    async fn send(&self, tx: TxRequest) -> Result<(), SendError> {
        match self.slot.get() {
            Some(lnd) => lnd.send(tx).await,
            None => Err(SendError::Stopped { ni: self.nid }),
        }
    }

    async fn stop(self) {
        self.slot.stop().await;
    }
}

impl FaultHooks for StoppableSockLnd {
    fn add_fault_rule(&self, rule: FaultRule) -> Result<RuleId, FaultAddError> {
        match self.slot.get() {
            Some(lnd) => lnd.add_fault_rule(rule),
            None => Err(FaultAddError::Stopped),
        }
    }

    fn remove_fault_rule(&self, id: RuleId) -> bool {
        self.slot.get().is_some_and(|l| l.remove_fault_rule(id))
    }

    fn clear_fault_rules(&self) {
        if let Some(l) = self.slot.get() {
            l.clear_fault_rules();
        }
    }

    fn fault_rules(&self) -> Vec<RuleStats> {
        self.slot.get().map(|l| l.fault_rules()).unwrap_or_default()
    }
}
