//! The events bus: every change of health, NI status, recovery queue membership and route
//! state, and every dropped forward, as a typed [`Event`] on a bounded broadcast channel.
//!
//! The store, the REST API and the dashboard subscribe with [`EventBus::subscribe`]. A
//! subscriber that falls more than the bus's capacity behind loses the oldest events and
//! is told so (`RecvError::Lagged`); publishers never wait.

use lnet::health::check::NiState;
use lnet::health::{HealthStatus, HealthValue};
use lnet::recovery::RecoveryKind;
use lnet::route::RouteDown;
use lnet::time::Millis;
use lnet::{Net, Nid};
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
    /// A route came up or went down (this node's view of a gateway).
    Route {
        /// When.
        at: Millis,
        /// The remote net.
        net: Net,
        /// The gateway.
        gateway: Nid,
        /// `None`: the route is up; else why it is down.
        down: Option<RouteDown>,
        /// What showed it: the ping reply, push or failure that changed the gateway's
        /// view, or the route being added.
        cause: RouteCause,
    },
    /// A local net's status, as this node advertises it to the peers that route through
    /// it, changed.
    NetStatus {
        /// When.
        at: Millis,
        /// The net.
        net: Net,
        /// Its NIs are now advertised UP.
        up: bool,
        /// Why.
        reason: NetStatusReason,
    },
    /// A message this node was asked to forward was dropped (the sender's own timeout
    /// fires; nothing is sent back, as a kernel router does).
    ForwardDropped {
        /// When.
        at: Millis,
        /// The message's source.
        src: Nid,
        /// The message's destination.
        dest: Nid,
        /// Why.
        reason: ForwardDrop,
    },
}

/// What changed a route's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteCause {
    /// The route was added.
    Added,
    /// The gateway's ping reply.
    PingReply,
    /// The gateway's push of its ping info.
    Push,
    /// The gateway's ping got no reply in time, or could not be sent.
    PingFailed,
    /// The LND lost the gateway.
    PeerDown,
    /// A message routed by the gateway arrived: it is alive.
    Traffic,
}

/// Why a local net's advertised status changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetStatusReason {
    /// Nothing arrived on the net for this long (active probing or the passive rule).
    Silent {
        /// How long the net was silent.
        for_ms: u64,
    },
    /// Something arrived on the net again.
    Heard,
    /// The link of an NI on it went down or came up.
    Link,
    /// The node is draining: out of service (before it stops, or at run time).
    Draining,
    /// The node's drain ended: it is back in service.
    Undrained,
}

/// Why a forwarded message was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardDrop {
    /// No route to the destination's net.
    NoRoute,
    /// Routes exist but none is alive.
    NoLiveRoute,
    /// Every resend allowed failed.
    SendFailed(HealthStatus),
    /// The next hop's peer NI is not alive (its cached NI status is not UP, with the
    /// peer NI aliveness rule on: [`lnet::aliveness`]); finalized with `-EHOSTUNREACH`.
    PeerNotAlive,
}

impl std::fmt::Display for ForwardDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForwardDrop::NoRoute => f.write_str("no route to the destination net"),
            ForwardDrop::NoLiveRoute => f.write_str("no live route to the destination net"),
            ForwardDrop::SendFailed(s) => write!(f, "send failed: {s}"),
            ForwardDrop::PeerNotAlive => f.write_str("peer not alive"),
        }
    }
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
