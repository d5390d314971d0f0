//! Recovery queues and their ping backoff (health reference 2.5).
//!
//! There are two queues, one of local NIs and one of peer NIs. An NI joins only while its
//! health is below 1000; a peer NI only if it has been heard from, and, with
//! `recovery_limit > 0`, only while `now ≤ last_alive + recovery_limit` (past that it is
//! dropped). Each entry is pinged on a backoff schedule: the next ping is `2^ping_count`
//! seconds after the last one while `ping_count ≤ max_recovery_ping_count` (=
//! `floor(log2(max_recovery_ping_interval))`), and `max_recovery_ping_interval` seconds
//! after it from then on. With the default 900 s the gaps are 1, 2, 4, …, 512, 900, 900, …
//! `ping_count` goes back to 0 whenever a message is received from the NI. An entry leaves
//! when its health reaches 1000 or its NI is deleted.
//!
//! A new entry is due at once (its first ping goes out in the next recovery round).

use crate::health::value::HealthValue;
use crate::time::Millis;
use crate::tunables::Tunables;

/// `floor(log2(interval))`: the last ping count whose gap is still a power of two. 0 for an
/// interval of 0 or 1.
pub const fn max_recovery_ping_count(max_recovery_ping_interval_secs: u32) -> u32 {
    if max_recovery_ping_interval_secs == 0 {
        0
    } else {
        31 - max_recovery_ping_interval_secs.leading_zeros()
    }
}

impl Tunables {
    /// The recovery ping count after which pings are `max_recovery_ping_interval` apart.
    pub const fn max_recovery_ping_count(&self) -> u32 {
        max_recovery_ping_count(self.max_recovery_ping_interval())
    }
}

/// The gap after a ping made with this `ping_count`: `2^ping_count` seconds while
/// `ping_count ≤ max_recovery_ping_count`, else `max_recovery_ping_interval` seconds.
pub const fn next_ping_delay(ping_count: u32, max_recovery_ping_interval_secs: u32) -> Millis {
    let max_count = max_recovery_ping_count(max_recovery_ping_interval_secs);
    if ping_count <= max_count {
        // max_count ≤ 31, so the shift fits.
        Millis::from_secs(1u64 << ping_count)
    } else {
        Millis::from_secs(max_recovery_ping_interval_secs as u64)
    }
}

/// The two settings recovery depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecoveryConfig {
    /// `max_recovery_ping_interval`, in seconds (default 900).
    pub max_recovery_ping_interval_secs: u32,
    /// `recovery_limit`, in seconds; 0 means no limit (the default).
    pub recovery_limit_secs: u32,
}

impl Default for RecoveryConfig {
    /// The kernel defaults: 900 s, no limit.
    fn default() -> RecoveryConfig {
        RecoveryConfig::from(&Tunables::default())
    }
}

impl From<&Tunables> for RecoveryConfig {
    fn from(t: &Tunables) -> RecoveryConfig {
        RecoveryConfig {
            max_recovery_ping_interval_secs: t.max_recovery_ping_interval(),
            recovery_limit_secs: t.recovery_limit(),
        }
    }
}

impl RecoveryConfig {
    /// Whether a peer NI last heard from at `last_alive` is past the recovery limit at
    /// `now`.
    pub const fn past_limit(&self, last_alive: Millis, now: Millis) -> bool {
        self.recovery_limit_secs > 0
            && now.as_millis()
                > last_alive
                    .saturating_add(Millis::from_secs(self.recovery_limit_secs as u64))
                    .as_millis()
    }
}

/// Which NIs a queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveryKind {
    /// Local NIs (`ln_mt_localNIRecovq`): no recovery limit.
    LocalNi,
    /// Peer NIs (`ln_mt_peerNIRecovq`): only heard-from peers, within the recovery limit.
    PeerNi,
}

impl RecoveryKind {
    /// The heading `lnetctl debug recovery` prints for this queue.
    pub const fn heading(self) -> &'static str {
        match self {
            RecoveryKind::LocalNi => "Local NI recovery",
            RecoveryKind::PeerNi => "Peer NI recovery",
        }
    }
}

/// One NI on a recovery queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryEntry<K> {
    /// The NI (normally its NID).
    pub key: K,
    /// Pings made since the last message received from it.
    pub ping_count: u32,
    /// When the next ping is due.
    pub next_ping: Millis,
    /// When it was last heard from (peer NIs only).
    pub last_alive: Option<Millis>,
}

/// What [`RecoveryQueue::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddOutcome {
    /// The NI joined the queue.
    Added,
    /// The NI was on the queue already (its `last_alive` was updated).
    AlreadyQueued,
    /// Not added: its health is 1000.
    FullHealth,
    /// Not added: a peer NI never heard from.
    NeverHeardFrom,
    /// Not added (and removed if it was there): a peer NI past the recovery limit.
    PastRecoveryLimit,
}

/// One recovery ping to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryPing<K> {
    /// The NI to ping.
    pub key: K,
    /// Its ping count before this ping (0 for the first).
    pub ping_count: u32,
    /// When the one after this is due.
    pub next_ping: Millis,
}

/// What one recovery round does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryRound<K> {
    /// The pings to send now, in queue order.
    pub pings: Vec<RecoveryPing<K>>,
    /// Peer NIs dropped for being past the recovery limit (their ping count is reset).
    pub dropped: Vec<K>,
}

/// A recovery queue of local NIs or of peer NIs, in the order they joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryQueue<K> {
    kind: RecoveryKind,
    entries: Vec<RecoveryEntry<K>>,
}

impl<K: Clone + PartialEq> RecoveryQueue<K> {
    /// An empty queue.
    pub const fn new(kind: RecoveryKind) -> RecoveryQueue<K> {
        RecoveryQueue {
            kind,
            entries: Vec::new(),
        }
    }

    /// Which NIs it holds.
    pub const fn kind(&self) -> RecoveryKind {
        self.kind
    }

    /// How many NIs are on it.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether this NI is on it.
    pub fn contains(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// This NI's entry.
    pub fn get(&self, key: &K) -> Option<&RecoveryEntry<K>> {
        self.entries.iter().find(|e| &e.key == key)
    }

    /// The entries, in the order they joined.
    pub fn entries(&self) -> impl Iterator<Item = &RecoveryEntry<K>> {
        self.entries.iter()
    }

    /// Puts an NI on the queue at `now`, if the rules allow: health below 1000 and, for a
    /// peer NI, heard from (`last_alive`) and within the recovery limit. `last_alive` is
    /// ignored for local NIs.
    pub fn add(
        &mut self,
        key: K,
        health: HealthValue,
        last_alive: Option<Millis>,
        now: Millis,
        config: &RecoveryConfig,
    ) -> AddOutcome {
        if health.is_max() {
            return AddOutcome::FullHealth;
        }
        let last_alive = match self.kind {
            RecoveryKind::LocalNi => None,
            RecoveryKind::PeerNi => {
                let Some(alive) = last_alive else {
                    return AddOutcome::NeverHeardFrom;
                };
                if config.past_limit(alive, now) {
                    self.remove(&key);
                    return AddOutcome::PastRecoveryLimit;
                }
                Some(alive)
            }
        };
        if let Some(entry) = self.entries.iter_mut().find(|e| e.key == key) {
            if last_alive.is_some() {
                entry.last_alive = last_alive;
            }
            return AddOutcome::AlreadyQueued;
        }
        self.entries.push(RecoveryEntry {
            key,
            ping_count: 0,
            next_ping: now,
            last_alive,
        });
        AddOutcome::Added
    }

    /// Takes an NI off the queue (it was deleted, or its health was reset).
    pub fn remove(&mut self, key: &K) -> Option<RecoveryEntry<K>> {
        let index = self.entries.iter().position(|e| &e.key == key)?;
        Some(self.entries.remove(index))
    }

    /// Records an NI's new health: at 1000 it leaves the queue. Returns whether it left.
    pub fn health_changed(&mut self, key: &K, health: HealthValue) -> bool {
        health.is_max() && self.remove(key).is_some()
    }

    /// A message was received from (or on) this NI at `now`: its ping count goes back to 0
    /// and, for a peer NI, it was heard from now.
    pub fn message_received(&mut self, key: &K, now: Millis) {
        let kind = self.kind;
        if let Some(entry) = self.entries.iter_mut().find(|e| &e.key == key) {
            entry.ping_count = 0;
            if kind == RecoveryKind::PeerNi {
                entry.last_alive = Some(now);
            }
        }
    }

    /// One recovery round at `now`: drops peer NIs past the recovery limit, then returns
    /// the NIs whose ping is due and schedules their next one.
    pub fn due(&mut self, now: Millis, config: &RecoveryConfig) -> RecoveryRound<K> {
        let mut dropped = Vec::new();
        if self.kind == RecoveryKind::PeerNi {
            self.entries.retain(|e| {
                let past = e
                    .last_alive
                    .is_none_or(|alive| config.past_limit(alive, now));
                if past {
                    dropped.push(e.key.clone());
                }
                !past
            });
        }
        let mut pings = Vec::new();
        for entry in &mut self.entries {
            if entry.next_ping > now {
                continue;
            }
            let delay = next_ping_delay(entry.ping_count, config.max_recovery_ping_interval_secs);
            entry.next_ping = now.saturating_add(delay);
            pings.push(RecoveryPing {
                key: entry.key.clone(),
                ping_count: entry.ping_count,
                next_ping: entry.next_ping,
            });
            entry.ping_count = entry.ping_count.saturating_add(1);
        }
        RecoveryRound { pings, dropped }
    }

    /// When the earliest ping is due, if any NI is on the queue.
    pub fn next_due(&self) -> Option<Millis> {
        self.entries.iter().map(|e| e.next_ping).min()
    }

    /// The listing `lnetctl debug recovery` prints: keys `nid-0`, `nid-1`, … in queue order.
    pub fn listing(&self) -> Vec<(String, &K)> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| (format!("nid-{i}"), &e.key))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sick() -> HealthValue {
        HealthValue::clamped(900)
    }

    #[test]
    fn max_ping_count_is_floor_log2() {
        assert_eq!(max_recovery_ping_count(900), 9);
        assert_eq!(max_recovery_ping_count(1024), 10);
        assert_eq!(max_recovery_ping_count(1023), 9);
        assert_eq!(max_recovery_ping_count(1), 0);
        assert_eq!(max_recovery_ping_count(0), 0);
        assert_eq!(max_recovery_ping_count(u32::MAX), 31);
        assert_eq!(next_ping_delay(31, u32::MAX), Millis::from_secs(1 << 31));
        assert_eq!(next_ping_delay(u32::MAX, 900), Millis::from_secs(900));
    }

    #[test]
    fn recovery_pings_follow_the_backoff_schedule() {
        let config = RecoveryConfig::default();
        let mut q = RecoveryQueue::new(RecoveryKind::LocalNi);
        assert_eq!(
            q.add("ni", sick(), None, Millis::ZERO, &config),
            AddOutcome::Added
        );
        let mut now = Millis::ZERO;
        let mut times = Vec::new();
        for _ in 0..13 {
            let round = q.due(now, &config);
            assert_eq!(round.pings.len(), 1);
            times.push(now);
            // Nothing is due just before the next one.
            let next = q.next_due().unwrap();
            assert!(q
                .due(next.saturating_sub(Millis(1)), &config)
                .pings
                .is_empty());
            now = next;
        }
        let gaps: Vec<u64> = times.windows(2).map(|w| (w[1].0 - w[0].0) / 1000).collect();
        assert_eq!(gaps, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]);
    }

    #[test]
    fn lnt_035_entries_leave_at_full_health_and_restart_on_receive() {
        let config = RecoveryConfig::default();
        let mut q = RecoveryQueue::new(RecoveryKind::LocalNi);
        assert_eq!(
            q.add(1, HealthValue::MAX, None, Millis::ZERO, &config),
            AddOutcome::FullHealth
        );
        q.add(1, sick(), None, Millis::ZERO, &config);
        assert_eq!(
            q.add(1, sick(), None, Millis::ZERO, &config),
            AddOutcome::AlreadyQueued
        );
        q.due(Millis::ZERO, &config);
        q.due(Millis::from_secs(1), &config);
        assert_eq!(q.get(&1).map(|e| e.ping_count), Some(2));
        q.message_received(&1, Millis::from_secs(2));
        assert_eq!(q.get(&1).map(|e| e.ping_count), Some(0));
        assert!(!q.health_changed(&1, HealthValue::clamped(999)));
        assert!(q.health_changed(&1, HealthValue::MAX));
        assert!(q.is_empty());
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn peer_nis_need_to_have_been_heard_from() {
        let config = RecoveryConfig::default();
        let mut q = RecoveryQueue::new(RecoveryKind::PeerNi);
        assert_eq!(
            q.add(7, sick(), None, Millis::ZERO, &config),
            AddOutcome::NeverHeardFrom
        );
        assert_eq!(
            q.add(7, sick(), Some(Millis(5)), Millis(10), &config),
            AddOutcome::Added
        );
        // No limit: never dropped.
        let round = q.due(Millis::from_secs(1_000_000), &config);
        assert!(round.dropped.is_empty());
        assert_eq!(round.pings.len(), 1);
    }

    #[test]
    fn peer_nis_past_the_recovery_limit_are_dropped() {
        let config = RecoveryConfig {
            recovery_limit_secs: 60,
            ..RecoveryConfig::default()
        };
        let mut q = RecoveryQueue::new(RecoveryKind::PeerNi);
        let alive = Millis::from_secs(100);
        assert_eq!(
            q.add("p", sick(), Some(alive), Millis::from_secs(161), &config),
            AddOutcome::PastRecoveryLimit
        );
        assert_eq!(
            q.add("p", sick(), Some(alive), Millis::from_secs(160), &config),
            AddOutcome::Added
        );
        assert_eq!(q.due(Millis::from_secs(160), &config).pings.len(), 1);
        let round = q.due(Millis(160_001), &config);
        assert_eq!(round.dropped, ["p"]);
        assert!(round.pings.is_empty());
        assert!(q.is_empty());
        // Hearing from it keeps it within the limit.
        q.add("p", sick(), Some(alive), Millis::from_secs(150), &config);
        q.message_received(&"p", Millis::from_secs(200));
        assert!(q.due(Millis::from_secs(250), &config).dropped.is_empty());
        // Local NIs have no limit.
        let mut local = RecoveryQueue::new(RecoveryKind::LocalNi);
        local.add("l", sick(), None, Millis::ZERO, &config);
        assert!(local.due(Millis(u64::MAX), &config).dropped.is_empty());
    }

    #[test]
    fn listing_is_like_lnetctl_debug_recovery() {
        let config = RecoveryConfig::default();
        let mut q = RecoveryQueue::new(RecoveryKind::LocalNi);
        for k in ["10.0.0.1@tcp", "10.0.0.2@o2ib", "10.0.0.3@tcp"] {
            q.add(k, sick(), None, Millis::ZERO, &config);
        }
        q.remove(&"10.0.0.2@o2ib");
        assert_eq!(
            q.listing(),
            [
                ("nid-0".to_string(), &"10.0.0.1@tcp"),
                ("nid-1".to_string(), &"10.0.0.3@tcp")
            ]
        );
        assert_eq!(q.kind().heading(), "Local NI recovery");
        assert_eq!(RecoveryKind::PeerNi.heading(), "Peer NI recovery");
        assert_eq!(q.len(), 2);
        assert!(q.contains(&"10.0.0.3@tcp"));
        assert_eq!(q.entries().count(), 2);
    }

    proptest! {
        #[test]
        fn gaps_never_exceed_the_interval(interval in 1u32..100_000, count in 0u32..100) {
            let gap = next_ping_delay(count, interval);
            prop_assert!(gap <= Millis::from_secs(u64::from(interval)));
            prop_assert!(gap >= Millis::from_secs(1));
        }
    }
}
