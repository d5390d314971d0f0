//! The events the API serves: the node's typed events ([`actors::Event`]: health, NI
//! status, recovery, resends, routes) and the admin events of the API's own mutations, each
//! with an id, in a bounded in-memory ring ([`EventRing`]).
//!
//! Ids grow by one from 1. A reader pages through the ring with `after` (the last id it
//! has); the server-sent event stream resumes the same way from `Last-Event-ID`. When a
//! reader falls further behind than the ring holds, it learns how many it missed (the
//! oldest id still kept is in every page). When the node's bus drops events because the
//! ring's feeder fell behind, an [`EventBody::EventsLost`] event says how many.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use actors::events::{Event, NiKind};
use lnet::health::check::NiState;
use lnet::recovery::RecoveryKind;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use utoipa::ToSchema;

/// Where the server sends every event it records (LNet events and admin events), in order:
/// the daemon plugs in the store's event log.
///
/// A log that can be read back ([`EventSink::read`]) is what `GET /api/v1/events` serves,
/// so that a reader sees the events of earlier runs too; the ring (and the event stream)
/// continues the log's ids ([`EventSink::last_id`]), so an event has one id in both.
pub trait EventSink: Send + Sync + 'static {
    /// Records one event under its id. An error is logged by the server; the event stays
    /// in the ring.
    fn record(&self, event: &ApiEvent) -> Result<(), SinkError>;

    /// The newest id the log has used (0: none), read once when the server starts: the
    /// server's ids continue after it. The default: a log that keeps no ids of its own.
    fn last_id(&self) -> Result<u64, SinkError> {
        Ok(0)
    }

    /// Reads up to `limit` events of the log from `from` on, oldest first; `None` when this
    /// log cannot be read back (the default), and then the server's ring answers.
    fn read(&self, from: LogCursor, limit: usize) -> Result<Option<LogPage>, SinkError> {
        let _ = (from, limit);
        Ok(None)
    }
}

/// Where a page of an event log starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogCursor {
    /// The oldest events with an id above this one.
    After(u64),
    /// The newest events with an id below this one.
    Before(u64),
}

/// A page of an event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The events, oldest first.
    pub events: Vec<ApiEvent>,
    /// The oldest id the log still holds (the next id when it is empty).
    pub first_id: u64,
}

/// Why an [`EventSink`] could not record an event, or a
/// [`ConfigStore`](crate::ConfigStore) could not keep a change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The event has a value the sink cannot keep (a field that does not read as what it
    /// names).
    #[error("event log: {reason}")]
    Refused {
        /// Why.
        reason: String,
        /// The error of reading the value, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The sink's storage failed or refused the write.
    #[error("event log: {source}")]
    Failed {
        /// The storage's error (the store's, for the daemon).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// One event as the API serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiEvent {
    /// Its id: 1 for the first event the server recorded, then one more for each.
    pub id: u64,
    /// When, in milliseconds on the node's clock (which starts at 0 when the node starts).
    pub at_ms: u64,
    /// When, in milliseconds since the Unix epoch, for an event read back from the event
    /// log that kept its wall-clock time (an event of an earlier run has no other time a
    /// browser can place); absent for an event of the ring or the stream, whose `at_ms`
    /// is on the node's clock now running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
    /// What happened.
    pub event: EventBody,
}

/// Local NI or peer NI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NiKindDoc {
    /// A local NI.
    Local,
    /// A peer NI.
    Peer,
}

impl From<NiKind> for NiKindDoc {
    fn from(k: NiKind) -> NiKindDoc {
        match k {
            NiKind::Local => NiKindDoc::Local,
            NiKind::Peer => NiKindDoc::Peer,
        }
    }
}

impl From<RecoveryKind> for NiKindDoc {
    fn from(k: RecoveryKind) -> NiKindDoc {
        match k {
            RecoveryKind::LocalNi => NiKindDoc::Local,
            RecoveryKind::PeerNi => NiKindDoc::Peer,
        }
    }
}

/// What happened. `type` names the kind; the other keys depend on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EventBody {
    /// The health value of a local NI or peer NI changed.
    Health {
        /// Local NI or peer NI.
        ni_kind: NiKindDoc,
        /// The NI.
        nid: String,
        /// Before.
        before: u32,
        /// After.
        after: u32,
        /// The message status that caused it (`LOCAL_TIMEOUT` ...), `null` for an
        /// administrative set.
        cause: Option<String>,
    },
    /// A local NI's status (as its ping buffer shows it) changed.
    NiStatus {
        /// The NI.
        nid: String,
        /// `up` or `down`.
        status: String,
    },
    /// An NI joined a recovery queue.
    RecoveryQueued {
        /// Which queue.
        queue: NiKindDoc,
        /// The NI.
        nid: String,
    },
    /// A recovery ping was sent.
    RecoveryPing {
        /// Which queue.
        queue: NiKindDoc,
        /// The NI pinged.
        nid: String,
        /// Its ping count before this ping.
        ping_count: u32,
        /// When the next one is due (ms on the node's clock).
        next_ping_ms: u64,
    },
    /// An NI left a recovery queue (back at full health, or past the recovery limit).
    RecoveryLeft {
        /// Which queue.
        queue: NiKindDoc,
        /// The NI.
        nid: String,
    },
    /// A message was resent on another path.
    Resend {
        /// The status of the attempt that failed.
        status: String,
        /// The local NI of the failed attempt.
        from_ni: String,
        /// The peer NI it went to.
        to_peer_ni: String,
        /// Resends of this message so far, this one included.
        retry: u32,
    },
    /// A route came up or went down.
    Route {
        /// The remote net.
        net: String,
        /// The gateway.
        gateway: String,
        /// `null`: the route is up; else why it is down.
        down: Option<String>,
        /// What showed it.
        cause: String,
    },
    /// A local net's advertised status changed.
    NetStatus {
        /// The net.
        net: String,
        /// Its NIs are now advertised UP.
        up: bool,
        /// Why.
        reason: String,
    },
    /// A message this node was asked to forward was dropped.
    ForwardDropped {
        /// The message's source.
        src: String,
        /// The message's destination.
        dest: String,
        /// Why.
        reason: String,
    },
    /// A kind of node event this server version has no fields for, as its debug text.
    Other {
        /// The event.
        description: String,
    },
    /// The node's bus dropped events before the server read them.
    EventsLost {
        /// How many.
        count: u64,
    },
    /// A change made through the API.
    Admin {
        /// The name of the token that made it.
        token: String,
        /// What was done (`reset_local_ni_health`, `set_global`, `add_peer`, ...).
        action: String,
        /// What it was done to (a NID), if anything.
        target: Option<String>,
        /// The request's values and its result, for a person.
        detail: String,
    },
}

impl EventBody {
    /// The `type` key: the SSE event name.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventBody::Health { .. } => "health",
            EventBody::NiStatus { .. } => "ni_status",
            EventBody::RecoveryQueued { .. } => "recovery_queued",
            EventBody::RecoveryPing { .. } => "recovery_ping",
            EventBody::RecoveryLeft { .. } => "recovery_left",
            EventBody::Resend { .. } => "resend",
            EventBody::Route { .. } => "route",
            EventBody::NetStatus { .. } => "net_status",
            EventBody::ForwardDropped { .. } => "forward_dropped",
            EventBody::Other { .. } => "other",
            EventBody::EventsLost { .. } => "events_lost",
            EventBody::Admin { .. } => "admin",
        }
    }

    /// A node event as the API shows it, with its time.
    pub fn from_node(event: &Event) -> (u64, EventBody) {
        match event {
            Event::Health {
                at,
                kind,
                nid,
                before,
                after,
                cause,
            } => (
                at.as_millis(),
                EventBody::Health {
                    ni_kind: (*kind).into(),
                    nid: nid.to_string(),
                    before: before.get(),
                    after: after.get(),
                    cause: cause.map(|c| c.name().to_owned()),
                },
            ),
            Event::LocalNiStatus { at, nid, state } => (
                at.as_millis(),
                EventBody::NiStatus {
                    nid: nid.to_string(),
                    status: match state {
                        NiState::Up => "up".into(),
                        NiState::Down => "down".into(),
                    },
                },
            ),
            Event::RecoveryQueued { at, queue, nid } => (
                at.as_millis(),
                EventBody::RecoveryQueued {
                    queue: (*queue).into(),
                    nid: nid.to_string(),
                },
            ),
            Event::RecoveryPing {
                at,
                queue,
                nid,
                ping_count,
                next_ping,
            } => (
                at.as_millis(),
                EventBody::RecoveryPing {
                    queue: (*queue).into(),
                    nid: nid.to_string(),
                    ping_count: *ping_count,
                    next_ping_ms: next_ping.as_millis(),
                },
            ),
            Event::RecoveryLeft { at, queue, nid } => (
                at.as_millis(),
                EventBody::RecoveryLeft {
                    queue: (*queue).into(),
                    nid: nid.to_string(),
                },
            ),
            Event::Resend {
                at,
                status,
                from_ni,
                to_peer_ni,
                retry,
            } => (
                at.as_millis(),
                EventBody::Resend {
                    status: status.name().to_owned(),
                    from_ni: from_ni.to_string(),
                    to_peer_ni: to_peer_ni.to_string(),
                    retry: *retry,
                },
            ),
            other => node_event_extra(other),
        }
    }
}

/// The node events added with routing: routes, net status, dropped forwards.
fn node_event_extra(event: &Event) -> (u64, EventBody) {
    match event {
        Event::Route {
            at,
            net,
            gateway,
            down,
            cause,
        } => (
            at.as_millis(),
            EventBody::Route {
                net: net.to_string(),
                gateway: gateway.to_string(),
                down: down.map(|d| d.to_string()),
                cause: format!("{cause:?}"),
            },
        ),
        Event::NetStatus {
            at,
            net,
            up,
            reason,
        } => (
            at.as_millis(),
            EventBody::NetStatus {
                net: net.to_string(),
                up: *up,
                reason: format!("{reason:?}"),
            },
        ),
        Event::ForwardDropped {
            at,
            src,
            dest,
            reason,
        } => (
            at.as_millis(),
            EventBody::ForwardDropped {
                src: src.to_string(),
                dest: dest.to_string(),
                reason: reason.to_string(),
            },
        ),
        other => (
            0,
            EventBody::Other {
                description: format!("{other:?}"),
            },
        ),
    }
}

/// A page of the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingPage {
    /// The events after the cursor, oldest first.
    pub events: Vec<ApiEvent>,
    /// The oldest id the ring still holds (the next id when it is empty).
    pub first_id: u64,
    /// Events between the cursor and `first_id` that the ring no longer holds.
    pub missed: u64,
}

struct RingInner {
    events: VecDeque<ApiEvent>,
    next_id: u64,
}

/// The bounded ring of the last events, fed by the node's bus and by the API's mutations.
/// Readers wait for new events with [`EventRing::watch`]. Cheap to share (`Arc`).
pub struct EventRing {
    inner: Mutex<RingInner>,
    capacity: usize,
    last_id: watch::Sender<u64>,
    /// The id of the first event of this run.
    run_first_id: u64,
    sink: Option<Arc<dyn EventSink>>,
}

impl std::fmt::Debug for EventRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRing")
            .field("capacity", &self.capacity)
            .field("last_id", &*self.last_id.borrow())
            .finish()
    }
}

impl EventRing {
    /// A ring keeping the last `capacity` events (at least 1); every event recorded also
    /// goes to `sink`, and the ids continue after the sink's last one.
    pub fn new(capacity: usize, sink: Option<Arc<dyn EventSink>>) -> EventRing {
        let start = match sink.as_deref().map(EventSink::last_id) {
            None => 0,
            Some(Ok(id)) => id,
            Some(Err(err)) => {
                tracing::warn!(%err, "the event log's last id is unreadable: ids start at 1");
                0
            }
        };
        let (last_id, _) = watch::channel(start);
        EventRing {
            inner: Mutex::new(RingInner {
                events: VecDeque::new(),
                next_id: start.saturating_add(1),
            }),
            capacity: capacity.max(1),
            last_id,
            run_first_id: start.saturating_add(1),
            sink,
        }
    }

    /// Records an event; returns it with its id.
    pub fn push(&self, at_ms: u64, event: EventBody) -> ApiEvent {
        let recorded = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let e = ApiEvent {
                id: inner.next_id,
                at_ms,
                wall_ms: None,
                event,
            };
            inner.next_id = inner.next_id.saturating_add(1);
            if inner.events.len() >= self.capacity {
                inner.events.pop_front();
            }
            inner.events.push_back(e.clone());
            // Under the lock, so that the sink sees the events in id order.
            if let Some(sink) = &self.sink {
                if let Err(err) = sink.record(&e) {
                    tracing::warn!(%err, id = e.id, "event not recorded in the event log");
                }
            }
            e
        };
        self.last_id.send_replace(recorded.id);
        recorded
    }

    /// Up to `limit` events with an id above `after`, oldest first.
    pub fn after(&self, after: u64, limit: usize) -> RingPage {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let first_id = inner.events.front().map_or(inner.next_id, |e| e.id);
        let missed = first_id.saturating_sub(after.saturating_add(1));
        let events = inner
            .events
            .iter()
            .filter(|e| e.id > after)
            .take(limit)
            .cloned()
            .collect();
        RingPage {
            events,
            first_id,
            missed,
        }
    }

    /// The `limit` newest events with an id below `before`, oldest first.
    pub fn before(&self, before: u64, limit: usize) -> RingPage {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let first_id = inner.events.front().map_or(inner.next_id, |e| e.id);
        let mut events: Vec<ApiEvent> = inner
            .events
            .iter()
            .rev()
            .filter(|e| e.id < before)
            .take(limit)
            .cloned()
            .collect();
        events.reverse();
        RingPage {
            events,
            first_id,
            missed: 0,
        }
    }

    /// The id of the newest event (0 before the first).
    pub fn last_id(&self) -> u64 {
        *self.last_id.borrow()
    }

    /// The id of the first event this ring recorded (or will record): events with lower
    /// ids come from the sink's log of earlier runs.
    pub fn run_first_id(&self) -> u64 {
        self.run_first_id
    }

    /// A receiver that wakes when an event is recorded.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.last_id.subscribe()
    }

    /// How many events the ring keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Feeds the ring from a subscription to the node's bus until the bus closes or `stop`
/// fires.
pub(crate) async fn feed(
    ring: Arc<EventRing>,
    mut rx: broadcast::Receiver<Event>,
    clock: actors::Clock,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            got = rx.recv() => match got {
                Ok(e) => {
                    let (at, body) = EventBody::from_node(&e);
                    let at = if matches!(body, EventBody::Other { .. }) {
                        clock.now().as_millis()
                    } else {
                        at
                    };
                    ring.push(at, body);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    ring.push(clock.now().as_millis(), EventBody::EventsLost { count: n });
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

    fn admin(n: u64) -> EventBody {
        EventBody::Admin {
            token: "ops".into(),
            action: "test".into(),
            target: None,
            detail: n.to_string(),
        }
    }

    #[test]
    fn the_ring_keeps_the_last_events_and_pages_by_id() {
        let ring = EventRing::new(3, None);
        assert_eq!(ring.after(0, 10).first_id, 1);
        for n in 0..5 {
            ring.push(n, admin(n));
        }
        assert_eq!(ring.last_id(), 5);
        let page = ring.after(0, 10);
        assert_eq!(
            page.events.iter().map(|e| e.id).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(page.first_id, 3);
        assert_eq!(page.missed, 2);
        let page = ring.after(3, 1);
        assert_eq!(page.events.iter().map(|e| e.id).collect::<Vec<_>>(), [4]);
        assert_eq!(page.missed, 0);
        assert!(ring.after(5, 10).events.is_empty());
        let ids = |p: RingPage| p.events.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids(ring.before(u64::MAX, 2)), [4, 5]);
        assert_eq!(ids(ring.before(4, 2)), [3]);
        assert!(ring.before(3, 2).events.is_empty());
    }

    #[test]
    fn the_ring_continues_the_ids_of_its_sink() {
        struct Kept;
        impl EventSink for Kept {
            fn record(&self, _: &ApiEvent) -> Result<(), SinkError> {
                Ok(())
            }
            fn last_id(&self) -> Result<u64, SinkError> {
                Ok(41)
            }
        }
        let ring = EventRing::new(3, Some(Arc::new(Kept)));
        assert_eq!(ring.last_id(), 41);
        assert_eq!(ring.run_first_id(), 42);
        assert_eq!(ring.push(0, admin(0)).id, 42);
        assert_eq!(ring.after(0, 10).missed, 41);
    }

    #[test]
    fn every_event_goes_to_the_sink_in_order() {
        #[derive(Default)]
        struct Log(Mutex<Vec<u64>>);
        impl EventSink for Log {
            fn record(&self, event: &ApiEvent) -> Result<(), SinkError> {
                self.0.lock().unwrap().push(event.id);
                Ok(())
            }
        }
        let log = Arc::new(Log::default());
        let ring = EventRing::new(2, Some(log.clone()));
        for n in 0..4 {
            ring.push(n, admin(n));
        }
        assert_eq!(*log.0.lock().unwrap(), [1, 2, 3, 4]);
    }

    #[test]
    fn event_json_is_tagged_by_type() {
        let e = ApiEvent {
            id: 7,
            at_ms: 1500,
            wall_ms: None,
            event: EventBody::RecoveryLeft {
                queue: NiKindDoc::Peer,
                nid: "10.0.0.1@tcp".into(),
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id": 7, "at_ms": 1500, "event":
                {"type": "recovery_left", "queue": "peer", "nid": "10.0.0.1@tcp"}})
        );
        assert_eq!(e.event.type_name(), "recovery_left");
    }
}
