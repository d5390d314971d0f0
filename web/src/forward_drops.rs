//! Forward drops by reason: counted from the node's `ForwardDropped` events, which is where
//! the node says why it dropped a message it was forwarding (served by `/metrics`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use actors::events::{Event, ForwardDrop};
use tokio::sync::{broadcast, watch};

/// The `reason` label of a forward drop, and its `status` label (the health status of the
/// last failed send; empty for the other reasons).
fn labels(reason: &ForwardDrop) -> (&'static str, &'static str) {
    match reason {
        ForwardDrop::NoRoute => ("no_route", ""),
        ForwardDrop::NoLiveRoute => ("no_live_route", ""),
        ForwardDrop::SendFailed(s) => ("send_failed", s.name()),
        ForwardDrop::PeerNotAlive => ("peer_not_alive", ""),
        _ => ("other", ""),
    }
}

/// The forward drops seen so far, by reason and status, and the events the counter missed
/// because it fell behind the node's event bus.
#[derive(Debug, Default)]
pub(crate) struct ForwardDrops {
    counts: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    lost: AtomicU64,
}

impl ForwardDrops {
    /// Counts one event (other events are ignored).
    pub(crate) fn see(&self, e: &Event) {
        if let Event::ForwardDropped { reason, .. } = e {
            let key = labels(reason);
            if let Ok(mut c) = self.counts.lock() {
                let n = c.entry(key).or_default();
                *n = n.saturating_add(1);
            }
        }
    }

    /// The drops so far by (reason, status), the three reasons without a status and
    /// `send_failed` always present (0 until the first), so that their rate is defined
    /// from the start.
    pub(crate) fn counts(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        let mut counts = self.counts.lock().map(|c| c.clone()).unwrap_or_default();
        for key in [
            ("no_route", ""),
            ("no_live_route", ""),
            ("peer_not_alive", ""),
            ("send_failed", ""),
        ] {
            counts.entry(key).or_default();
        }
        counts
    }

    /// Events missed because the counter fell behind the node's event bus.
    pub(crate) fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }
}

/// Counts the events of `rx` into `drops` until the bus closes or `stop` fires.
pub(crate) async fn count(
    drops: Arc<ForwardDrops>,
    mut rx: broadcast::Receiver<Event>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            got = rx.recv() => match got {
                Ok(e) => drops.see(&e),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    drops.lost.fetch_add(n, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lnet::health::HealthStatus;
    use lnet::time::Millis;

    fn dropped(reason: ForwardDrop) -> Event {
        let nid = "10.0.0.1@tcp".parse().ok();
        Event::ForwardDropped {
            at: Millis::ZERO,
            src: nid.unwrap_or(lnet::Nid::LO_0),
            dest: nid.unwrap_or(lnet::Nid::LO_0),
            reason,
        }
    }

    #[test]
    fn drops_are_counted_by_reason_and_status() {
        let d = ForwardDrops::default();
        d.see(&dropped(ForwardDrop::NoLiveRoute));
        d.see(&dropped(ForwardDrop::NoLiveRoute));
        d.see(&dropped(ForwardDrop::SendFailed(
            HealthStatus::RemoteTimeout,
        )));
        let c = d.counts();
        assert_eq!(c[&("no_live_route", "")], 2);
        assert_eq!(c[&("no_route", "")], 0);
        assert_eq!(c[&("send_failed", "")], 0);
        assert_eq!(c[&("send_failed", "REMOTE_TIMEOUT")], 1);
        assert_eq!(c[&("peer_not_alive", "")], 0);
        assert_eq!(c.len(), 5);
        assert_eq!(d.lost(), 0);
    }
}
