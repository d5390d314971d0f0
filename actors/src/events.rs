//! The events bus: every change of health, NI status and recovery queue membership, as a
//! typed [`Event`] on a bounded broadcast channel.
//!
//! The store, the REST API and the dashboard subscribe with [`EventBus::subscribe`]. A
//! subscriber that falls more than the bus's capacity behind loses the oldest events and
//! is told so (`RecvError::Lagged`); publishers never wait.

use lnet::health::check::NiState;
use lnet::health::{HealthStatus, HealthValue};
use lnet::recovery::RecoveryKind;
use lnet::time::Millis;
use lnet::Nid;
use tokio::sync::broadcast;

/// Whose health changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NiKind {
    /// A local NI.
    Local,
    /// A peer NI.
    Peer,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The health value of a local NI or peer NI changed.
    Health {
        /// When.
        at: Millis,
        /// Local NI or peer NI.
        kind: NiKind,
        /// The NI.
        nid: Nid,
        /// Before.
        before: HealthValue,
        /// After.
        after: HealthValue,
        /// The message status that caused it (`None` for an administrative set).
        cause: Option<HealthStatus>,
    },
    /// A local NI's status (as the ping buffer shows it) changed.
    LocalNiStatus {
        /// When.
        at: Millis,
        /// The NI.
        nid: Nid,
        /// Its new status.
        state: NiState,
    },
    /// An NI joined a recovery queue.
    RecoveryQueued {
        /// When.
        at: Millis,
        /// Which queue.
        queue: RecoveryKind,
        /// The NI.
        nid: Nid,
    },
    /// A recovery ping was sent.
    RecoveryPing {
        /// When.
        at: Millis,
        /// Which queue.
        queue: RecoveryKind,
        /// The NI pinged.
        nid: Nid,
        /// Its ping count before this ping.
        ping_count: u32,
        /// When the next one is due.
        next_ping: Millis,
    },
    /// An NI left a recovery queue (back at full health, or past the recovery limit).
    RecoveryLeft {
        /// When.
        at: Millis,
        /// Which queue.
        queue: RecoveryKind,
        /// The NI.
        nid: Nid,
    },
    /// A message was resent on another path.
    Resend {
        /// When.
        at: Millis,
        /// The status of the attempt that failed.
        status: HealthStatus,
        /// The local NI the failed attempt used.
        from_ni: Nid,
        /// The peer NI it went to.
        to_peer_ni: Nid,
        /// Resends of this message so far, this one included.
        retry: u32,
    },
}

/// The bounded broadcast channel the events go out on. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Event>,
}

impl EventBus {
    /// A bus keeping at most `capacity` events for a slow subscriber (at least 1).
    pub fn new(capacity: usize) -> EventBus {
        let (tx, _) = broadcast::channel(capacity.max(1));
        EventBus { tx }
    }

    /// A new subscriber; it sees the events published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// Publishes an event (dropped when nobody listens).
    pub fn publish(&self, event: Event) {
        tracing::debug!(?event, "lnet event");
        let _ = self.tx.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(n: u64) -> Event {
        Event::RecoveryQueued {
            at: Millis(n),
            queue: RecoveryKind::LocalNi,
            nid: Nid::LO_0,
        }
    }

    #[tokio::test]
    async fn subscribers_see_events_in_order_and_a_slow_one_is_told_it_lagged() {
        let bus = EventBus::new(2);
        bus.publish(queued(0)); // nobody listens: dropped, no error
        let mut rx = bus.subscribe();
        for n in 1..=3 {
            bus.publish(queued(n));
        }
        assert!(matches!(
            rx.recv().await,
            Err(broadcast::error::RecvError::Lagged(1))
        ));
        assert_eq!(rx.recv().await.unwrap(), queued(2));
        assert_eq!(rx.recv().await.unwrap(), queued(3));
    }
}
