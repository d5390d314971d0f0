//! The node's fault rules and what they have done: [`FaultTable`] offers each message to
//! every rule and says what to do with it. Pure: "now" is passed in, randomness comes
//! from each rule's seeded [`XorShift64`].

use crate::health::HealthStatus;
use crate::time::Millis;
use crate::{Header, Nid};

use super::rule::{failure_at, Direction, FaultKind, FaultRule, FaultRuleError, FaultTrigger};

/// What to do with a message a rule fired on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultVerdict {
    /// Lose it: on receive it is dropped silently; on send it is not handed to the LND
    /// and completes as a message lost on the network does ([`HealthStatus::Ok`]).
    Drop,
    /// Send only: complete the send at once with this status, without sending it.
    Fail(HealthStatus),
    /// Hold it this long, then go on with it.
    Delay(Millis),
}

/// The name of a rule in a [`FaultTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u64);

/// A rule and what it has done so far (`lnetctl fault drop|delay show`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleStats {
    /// Its name.
    pub id: RuleId,
    /// The rule.
    pub rule: FaultRule,
    /// Messages its filters accepted (the kernel's `count`).
    pub matched: u64,
    /// Messages it fired on (`dropped` or `delayed`).
    pub fired: u64,
}

/// A xorshift64 generator: small, seeded, reproducible; for fault injection only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XorShift64(u64);

impl XorShift64 {
    /// A generator seeded with `seed` (0, which would stay 0, is replaced).
    pub fn new(seed: u64) -> XorShift64 {
        XorShift64(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// A rule in the table with its trigger's state.
#[derive(Debug, Clone)]
struct Live {
    stats: RuleStats,
    rng: XorShift64,
    /// Rate: the position (0-based) that fires in the current window.
    target: u64,
    /// Interval: when the next message fires.
    fire_at: Millis,
    /// Interval: the end of the current window.
    window_end: Millis,
}

impl Live {
    fn new(id: RuleId, rule: FaultRule, now: Millis) -> Live {
        let mut live = Live {
            rng: XorShift64::new(rule.seed),
            stats: RuleStats {
                id,
                rule,
                matched: 0,
                fired: 0,
            },
            target: 0,
            fire_at: now,
            window_end: now,
        };
        live.restart(now);
        live
    }

    /// Zeroes the counters and draws the trigger's first window.
    fn restart(&mut self, now: Millis) {
        self.stats.matched = 0;
        self.stats.fired = 0;
        match self.stats.rule.trigger {
            FaultTrigger::Rate(n) => self.target = self.rng.below(u64::from(n)),
            FaultTrigger::Interval(s) => {
                let window = Millis::from_secs(u64::from(s));
                self.fire_at = now.saturating_add(Millis(self.rng.below(window.as_millis())));
                self.window_end = now.saturating_add(window);
            }
            _ => {}
        }
    }

    /// Counts a matching message; whether the trigger fires on it.
    fn trigger(&mut self, now: Millis) -> bool {
        let seen = self.stats.matched;
        self.stats.matched += 1;
        match self.stats.rule.trigger {
            FaultTrigger::All => true,
            FaultTrigger::EveryNth(n) => self.stats.matched.is_multiple_of(u64::from(n)),
            FaultTrigger::Rate(n) => {
                let n = u64::from(n);
                let pos = seen % n;
                let fire = pos == self.target;
                if pos + 1 == n {
                    self.target = self.rng.below(n);
                }
                fire
            }
            FaultTrigger::Interval(s) => {
                if now < self.fire_at {
                    return false;
                }
                // Fired in this window: the next fires at a random time in the next one
                // (a window that began in the past begins now).
                let window = Millis::from_secs(u64::from(s));
                let base = self.window_end.max(now);
                self.fire_at = base.saturating_add(Millis(self.rng.below(window.as_millis())));
                self.window_end = base.saturating_add(window);
                true
            }
            FaultTrigger::Probability(per_million) => {
                self.rng.below(1_000_000) < u64::from(per_million)
            }
            FaultTrigger::RandomInterval(s) => {
                let s = u64::from(s);
                self.rng.below(s) >= s / 2
            }
        }
    }

    /// The verdict of a firing.
    fn verdict(&mut self) -> FaultVerdict {
        let rule = &self.stats.rule;
        match (rule.kind, rule.health_error) {
            (FaultKind::Delay { latency_ms }, _) => FaultVerdict::Delay(Millis(latency_ms)),
            (FaultKind::Drop, None) => FaultVerdict::Drop,
            (FaultKind::Drop, Some(e)) => FaultVerdict::Fail(
                e.status()
                    .unwrap_or_else(|| failure_at(self.rng.next_u64())),
            ),
        }
    }

    fn spent(&self) -> bool {
        self.stats.rule.limit.is_some_and(|l| self.stats.fired >= l)
    }
}

/// Most rules a node holds.
pub const MAX_RULES: usize = 64;

/// A node's fault rules, in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct FaultTable {
    rules: Vec<Live>,
    next_id: u64,
}

impl FaultTable {
    /// No rules.
    pub fn new() -> FaultTable {
        FaultTable::default()
    }

    /// Adds a rule at time `now` (an interval rule's first window starts then) under
    /// the next unused id.
    pub fn add(&mut self, rule: FaultRule, now: Millis) -> Result<RuleId, FaultAddError> {
        let id = RuleId(self.next_id + 1);
        self.insert(id, rule, now)?;
        Ok(id)
    }

    /// Adds a rule under id `id` (a rule kept across a restart keeps its id); later
    /// [`FaultTable::add`]s choose ids above it.
    pub fn insert(
        &mut self,
        id: RuleId,
        rule: FaultRule,
        now: Millis,
    ) -> Result<(), FaultAddError> {
        rule.validate().map_err(FaultAddError::Rule)?;
        if self.rules.len() >= MAX_RULES {
            return Err(FaultAddError::Full { max: MAX_RULES });
        }
        if id.0 == 0 || self.rules.iter().any(|l| l.stats.id == id) {
            return Err(FaultAddError::IdInUse { id: id.0 });
        }
        self.next_id = self.next_id.max(id.0);
        self.rules.push(Live::new(id, rule, now));
        Ok(())
    }

    /// Removes a rule; whether it was there.
    pub fn remove(&mut self, id: RuleId) -> bool {
        let before = self.rules.len();
        self.rules.retain(|l| l.stats.id != id);
        self.rules.len() != before
    }

    /// Removes the rules for which `remove` is true; how many.
    pub fn remove_where(&mut self, mut remove: impl FnMut(&FaultRule) -> bool) -> usize {
        let before = self.rules.len();
        self.rules.retain(|l| !remove(&l.stats.rule));
        before - self.rules.len()
    }

    /// Zeroes the counters of the rules for which `which` is true and restarts their
    /// triggers at `now` (`lnetctl fault drop|delay reset`: the drop or the delay rules);
    /// how many.
    pub fn reset_where(&mut self, now: Millis, mut which: impl FnMut(&FaultRule) -> bool) -> usize {
        let mut n = 0;
        for live in self.rules.iter_mut().filter(|l| which(&l.stats.rule)) {
            live.restart(now);
            n += 1;
        }
        n
    }

    /// Whether there are no rules (the fast path of the data path).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules and their counters.
    pub fn rules(&self) -> Vec<RuleStats> {
        self.rules.iter().map(|l| l.stats.clone()).collect()
    }

    /// Offers a message at `dir` through local NI `local_nid` at time `now` to every rule
    /// whose filters accept it (each counts it, so every rule's trigger sees the same
    /// stream) and returns the verdict of the first that fires.
    pub fn check(
        &mut self,
        dir: Direction,
        local_nid: Nid,
        header: &Header,
        now: Millis,
    ) -> Option<FaultVerdict> {
        let mut verdict = None;
        for live in &mut self.rules {
            if live.spent() || !live.stats.rule.matches(dir, local_nid, header) {
                continue;
            }
            if live.trigger(now) && verdict.is_none() {
                live.stats.fired += 1;
                verdict = Some(live.verdict());
            }
        }
        verdict
    }
}

/// Why a rule was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultAddError {
    /// The rule is not valid.
    #[error("invalid fault rule: {0}")]
    Rule(#[source] FaultRuleError),
    /// The node holds as many rules as it may.
    #[error("the node already holds {max} fault rules")]
    Full {
        /// The limit.
        max: usize,
    },
    /// Another rule has this id (or it is 0).
    #[error("fault rule id {id} is in use or not an id")]
    IdInUse {
        /// The id.
        id: u64,
    },
}
