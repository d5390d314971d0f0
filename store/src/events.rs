//! The bounded event log: typed [`Event`]s, each stored as JSON under a monotonically
//! increasing `u64` id (big-endian key, so ids iterate in order). The log keeps the last
//! [`StoreOptions::event_capacity`](crate::StoreOptions) entries: appending one more drops
//! the oldest, and ids are never reused, even after a restart. Readers page through it
//! with [`Store::events_after`].
//!
//! Timestamps are milliseconds given by the caller (the node's clock), never read here.

use lnet::health::HealthStatus;
use lnet::{Net, Nid};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::engine::{decode, decode_key, Entry, TreeId, WriteSet};
use crate::error::StoreError;
use crate::keys;
use crate::schema::read_counter;
use crate::Store;

/// The `meta` key of the next event id.
pub(crate) const NEXT_EVENT_ID_KEY: &[u8] = b"next_event_id";

/// The recovery queue an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryQueue {
    /// The local NI recovery queue.
    LocalNi,
    /// The peer NI recovery queue.
    PeerNi,
}

/// `#[serde(with = "status_serde")]`: a message health status by its `LNET_MSG_STATUS_`
/// name (`LOCAL_DROPPED`).
mod status_serde {
    use super::*;

    pub(super) fn serialize<S: Serializer>(st: &HealthStatus, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(st.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HealthStatus, D::Error> {
        let text = String::deserialize(d)?;
        HealthStatus::ALL
            .into_iter()
            .find(|s| s.name() == text)
            .ok_or_else(|| de::Error::custom(format!("unknown health status {text:?}")))
    }
}

/// The same for an optional status.
mod opt_status_serde {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct W(#[serde(with = "status_serde")] HealthStatus);

    pub(super) fn serialize<S: Serializer>(
        st: &Option<HealthStatus>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        st.map(W).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<HealthStatus>, D::Error> {
        Option::<W>::deserialize(d).map(|o| o.map(|w| w.0))
    }
}

/// One change of health, NI state, route state, recovery or configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Event {
    /// The health value of a local NI changed.
    NiHealth {
        /// The NI.
        #[serde(with = "crate::records::text_serde")]
        nid: Nid,
        /// Before (0 to 1000).
        before: u32,
        /// After.
        after: u32,
        /// The message status that caused it; `None` for an administrative reset.
        #[serde(with = "opt_status_serde")]
        cause: Option<HealthStatus>,
    },
    /// The health value of a peer NI changed.
    PeerNiHealth {
        /// The peer NI.
        #[serde(with = "crate::records::text_serde")]
        nid: Nid,
        /// Before (0 to 1000).
        before: u32,
        /// After.
        after: u32,
        /// The message status that caused it; `None` for an administrative reset.
        #[serde(with = "opt_status_serde")]
        cause: Option<HealthStatus>,
    },
    /// A local NI went up or down.
    NiState {
        /// The NI.
        #[serde(with = "crate::records::text_serde")]
        nid: Nid,
        /// Whether it is up now.
        up: bool,
    },
    /// A route went up or down (its gateway's report on the remote net).
    RouteState {
        /// The remote net.
        #[serde(with = "crate::records::text_serde")]
        net: Net,
        /// The gateway.
        #[serde(with = "crate::records::text_serde")]
        gateway: Nid,
        /// Whether the route is alive now.
        up: bool,
        /// Why it is down, as the dashboard shows it; `None` when up.
        reason: Option<String>,
    },
    /// An NI joined a recovery queue.
    RecoveryQueued {
        /// Which queue.
        queue: RecoveryQueue,
        /// The NI.
        #[serde(with = "crate::records::text_serde")]
        nid: Nid,
    },
    /// A recovery ping was sent.
    RecoveryPing {
        /// Which queue.
        queue: RecoveryQueue,
        /// The NI pinged.
        #[serde(with = "crate::records::text_serde")]
        nid: Nid,
        /// Its ping count before this ping.
        ping_count: u32,
        /// When the next ping is due, milliseconds on the node's clock.
        next_ping_ms: u64,
    },
    /// An NI left a recovery queue.
    RecoveryLeft {
        /// Which queue.
        queue: RecoveryQueue,
        /// The NI.
        #[serde(with = "crate::records::text_serde")]
        nid: Nid,
    },
    /// A message was resent on another path.
    Resend {
        /// The status of the attempt that failed.
        #[serde(with = "status_serde")]
        status: HealthStatus,
        /// The local NI of the failed attempt.
        #[serde(with = "crate::records::text_serde")]
        from_ni: Nid,
        /// The peer NI it went to.
        #[serde(with = "crate::records::text_serde")]
        to_peer_ni: Nid,
        /// Resends of this message so far, this one included.
        retry: u32,
    },
    /// The configuration was changed through the API or the CLI.
    ConfigChanged {
        /// What changed, as the command that changed it (`route add o2ib1 ...`).
        change: String,
    },
    /// A local net's status as this router advertises it changed.
    NetStatus {
        /// The net.
        #[serde(with = "crate::records::text_serde")]
        net: Net,
        /// Whether its NIs are advertised UP now.
        up: bool,
        /// Why (a silent net, traffic heard again, a link, a drain).
        reason: String,
    },
    /// A message this router was asked to forward was dropped.
    ForwardDropped {
        /// The message's source.
        #[serde(with = "crate::records::text_serde")]
        src: Nid,
        /// The message's destination.
        #[serde(with = "crate::records::text_serde")]
        dest: Nid,
        /// Why.
        reason: String,
    },
    /// An administrative action through the API.
    Admin {
        /// The name of the token that made it.
        token: String,
        /// What was done (`reset_local_ni_health`, `add_route`, ...).
        action: String,
        /// What it was done to, if anything.
        target: Option<String>,
        /// The request's values and its result.
        detail: String,
    },
    /// Events were lost before they reached the log (the node's bus overflowed).
    EventsLost {
        /// How many.
        count: u64,
    },
}

/// An event in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Its id: larger than every id before it.
    pub id: u64,
    /// When it happened, milliseconds on the node's clock.
    pub at_ms: u64,
    /// When it happened on the wall clock (milliseconds since the Unix epoch), when the
    /// writer gave it: the node's clock starts again at each start, the wall clock does not.
    pub wall_ms: Option<u64>,
    /// What happened.
    pub event: Event,
}

/// The stored form (the key is the id).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventValue {
    at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wall_ms: Option<u64>,
    event: Event,
}

/// A key and value of the event log, decoded as a read decodes them.
pub(crate) fn decode_event_entry(k: &[u8], v: &[u8]) -> Result<EventRecord, StoreError> {
    let id = decode_key(TreeId::Events, k, keys::decode_u64)?;
    let value: EventValue = decode(TreeId::Events, k, v)?;
    Ok(EventRecord {
        id,
        at_ms: value.at_ms,
        wall_ms: value.wall_ms,
        event: value.event,
    })
}

impl Store {
    /// The id the next event gets (ids start at 1).
    fn next_event_id(&self) -> Result<u64, StoreError> {
        Ok(read_counter(&self.trees, NEXT_EVENT_ID_KEY)?.max(1))
    }

    /// Appends one event that happened at `at_ms` and returns its id.
    pub fn append_event(&self, at_ms: u64, event: &Event) -> Result<u64, StoreError> {
        let ids = self.append_events(&[(at_ms, event.clone())])?;
        ids.into_iter().next().ok_or(StoreError::InvalidArgument {
            what: "event",
            reason: "no id was given".to_owned(),
        })
    }

    /// Appends events in order, with one transaction and one flush for all of them, and
    /// returns their ids. Drops the oldest events beyond the log's capacity.
    pub fn append_events(&self, events: &[(u64, Event)]) -> Result<Vec<u64>, StoreError> {
        let _guard = self.lock();
        let mut next = self.next_event_id()?;
        let mut set = WriteSet::new();
        let mut ids = Vec::with_capacity(events.len());
        for (at_ms, event) in events {
            let id = next;
            set.put(
                TreeId::Events,
                &keys::u64_key(id),
                &EventValue {
                    at_ms: *at_ms,
                    wall_ms: None,
                    event: event.clone(),
                },
            )?;
            if let Some(old) = id.checked_sub(self.event_capacity) {
                set.remove(TreeId::Events, &keys::u64_key(old));
            }
            ids.push(id);
            next = id.checked_add(1).ok_or(StoreError::InvalidArgument {
                what: "event",
                reason: "every event id has been used".to_owned(),
            })?;
        }
        set.put_raw(TreeId::Meta, NEXT_EVENT_ID_KEY, next.to_be_bytes().to_vec());
        self.trees.commit(set)?;
        Ok(ids)
    }

    /// Appends one event under the id `id` its writer gave it, which must be above every id
    /// used before (ids skipped stay unused). Keeps the writer's ids and the log's the same
    /// even when the writer could not record some of its events. Drops the events that
    /// fall out of the log's capacity.
    pub fn append_event_with_id(
        &self,
        id: u64,
        at_ms: u64,
        wall_ms: Option<u64>,
        event: &Event,
    ) -> Result<(), StoreError> {
        let _guard = self.lock();
        let next = self.next_event_id()?;
        if id < next {
            return Err(StoreError::InvalidArgument {
                what: "event",
                reason: format!("id {id} is not above the last one used ({})", next - 1),
            });
        }
        let after = id.checked_add(1).ok_or(StoreError::InvalidArgument {
            what: "event",
            reason: "every event id has been used".to_owned(),
        })?;
        let mut set = WriteSet::new();
        set.put(
            TreeId::Events,
            &keys::u64_key(id),
            &EventValue {
                at_ms,
                wall_ms,
                event: event.clone(),
            },
        )?;
        // The log holds ids from `next - capacity` on; after this one, from
        // `after - capacity` on.
        let keep_from = after.saturating_sub(self.event_capacity);
        for old in next.saturating_sub(self.event_capacity)..keep_from.min(next) {
            set.remove(TreeId::Events, &keys::u64_key(old));
        }
        set.put_raw(
            TreeId::Meta,
            NEXT_EVENT_ID_KEY,
            after.to_be_bytes().to_vec(),
        );
        self.trees.commit(set)
    }

    /// Up to `limit` events with ids above `after`, oldest first. Start with 0; pass the
    /// last id returned to get the next page.
    pub fn events_after(&self, after: u64, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
        let Some(start) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let _guard = self.lock();
        records(
            self.trees
                .scan_from(TreeId::Events, &keys::u64_key(start), limit)?,
        )
    }

    /// The `limit` newest events with ids below `before`, oldest first. Start above the
    /// last id (`u64::MAX`); pass the first id returned to get the page before.
    pub fn events_before(&self, before: u64, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
        let _guard = self.lock();
        records(
            self.trees
                .scan_before(TreeId::Events, &keys::u64_key(before), limit)?,
        )
    }

    /// The id of the oldest event the log holds, `None` when it is empty.
    pub fn first_event_id(&self) -> Result<Option<u64>, StoreError> {
        Ok(self.events_after(0, 1)?.first().map(|e| e.id))
    }

    /// The id of the newest event, `None` if none was ever appended.
    pub fn last_event_id(&self) -> Result<Option<u64>, StoreError> {
        let _guard = self.lock();
        Ok(self.next_event_id()?.checked_sub(1).filter(|&id| id > 0))
    }

    /// Drops the events beyond the capacity (after it was lowered between two opens).
    pub(crate) fn trim_events(&self) -> Result<(), StoreError> {
        let _guard = self.lock();
        let next = self.next_event_id()?;
        let Some(keep_from) = next.checked_sub(self.event_capacity) else {
            return Ok(());
        };
        let mut set = WriteSet::new();
        for (k, _) in self.trees.scan_raw(TreeId::Events)? {
            let id = decode_key(TreeId::Events, &k, keys::decode_u64)?;
            if id >= keep_from {
                break;
            }
            set.remove(TreeId::Events, &k);
        }
        self.trees.commit(set)
    }
}

/// Log entries as records.
fn records(entries: Vec<Entry>) -> Result<Vec<EventRecord>, StoreError> {
    entries
        .into_iter()
        .map(|(k, v)| decode_event_entry(&k, &v))
        .collect()
}
