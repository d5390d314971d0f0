//! What every handler shares: the node, the token verifier, the event ring, the tunables
//! the API last set, and the server's settings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actors::Node;
use lnet::tunables::Tunables;
use tokio::sync::watch;

use crate::auth::{TokenIdentity, TokenVerifier};
use crate::events::{ApiEvent, EventBody, EventRing};

/// The shared state behind [`AppState`].
pub(crate) struct Shared {
    pub(crate) node: Node,
    pub(crate) tokens: Arc<dyn TokenVerifier>,
    pub(crate) ring: Arc<EventRing>,
    /// The event log the ring records into, which `GET events` reads when it can.
    pub(crate) sink: Option<Arc<dyn crate::events::EventSink>>,
    /// The tunables in force: the node takes them whole, so the API keeps the current set.
    pub(crate) tunables: tokio::sync::Mutex<Tunables>,
    pub(crate) mutations_allowed: bool,
    pub(crate) public_metrics: bool,
    /// Whether the `lustre_*` series carry the HPE/GSI exporters' `component` and `target`.
    pub(crate) metrics_exporter_labels: bool,
    /// Forward drops by reason, counted from the node's events.
    pub(crate) drops: Arc<crate::forward_drops::ForwardDrops>,
    pub(crate) max_timeout: Duration,
    /// Fires when the server stops: event streams end.
    pub(crate) stop: watch::Receiver<bool>,
    /// Whether the ring's feeder still reads the node's bus.
    pub(crate) feeding: Arc<AtomicBool>,
    /// The OpenAPI document, as JSON.
    pub(crate) openapi: String,
    /// Held while the UDSP rules change: each change reads the list, changes it and puts
    /// it back whole.
    pub(crate) udsp: tokio::sync::Mutex<()>,
    /// Where configuration changes are kept, if anywhere.
    pub(crate) config: Option<Arc<dyn crate::persist::ConfigStore>>,
    /// What starts and stops local NIs at run time, if anything.
    pub(crate) nis: Option<Arc<dyn crate::net_control::NiControl>>,
    /// The refusal counters.
    pub(crate) guard: Arc<crate::guard::GuardStats>,
    /// Failed tokens per source address.
    pub(crate) throttle: crate::guard::throttle::AuthThrottle,
    /// One permit per event stream that may be open.
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    /// How many event streams may be open.
    pub(crate) max_streams: usize,
    /// The counters at the last `stats reset`, which `stats show` counts from.
    pub(crate) stats_base: std::sync::Mutex<Option<lnet::show::StatsShow>>,
    /// How many tokens the API revoked: each revocation bumps it, and every open event
    /// stream checks then whether its token is still good.
    pub(crate) revocations: watch::Sender<u64>,
}

/// The state of every handler (cheap to clone).
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("node", &self.shared.node)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// Records an admin event for a change `who` made.
    pub(crate) fn admin_event(
        &self,
        who: &TokenIdentity,
        action: &str,
        target: Option<String>,
        detail: String,
    ) -> ApiEvent {
        tracing::info!(token = %who.name, action, ?target, %detail, "admin change");
        self.shared.ring.push(
            self.shared.node.clock().now().as_millis(),
            EventBody::Admin {
                token: who.name.clone(),
                action: action.to_owned(),
                target,
                detail,
            },
        )
    }

    /// Whether the event feeder is running.
    pub(crate) fn feeding(&self) -> bool {
        self.shared.feeding.load(Ordering::SeqCst)
    }
}
