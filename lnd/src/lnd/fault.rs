//! Fault injection rules for LNDs in tests: the matching logic behind the hooks that
//! `lnetctl fault drop|delay` rules will use (health reference §2.11). Pure: no clock, no
//! tasks; the LND applies the [`FaultAction`] a rule returns.
//!
//! A [`FaultRule`] matches a message by the source and destination NIDs of its LNet
//! header (each a [`NidMatch`]: any NID, any NID of a net, or one NID), its portal, and
//! its type (PUT, ACK, GET, REPLY). Of the matching messages it fires on some, chosen by
//! its [`Trigger`]: every Nth, one at a random position in each window of N (the
//! kernel's `-r` rate), or with a probability; randomness comes from a small xorshift
//! generator seeded by the rule, so a run is reproducible. It then asks for its action:
//!
//! * [`FaultAction::Drop`]: on receive the message is dropped silently (its payload is read
//!   and thrown away); on send it is not put on the wire and completes as a message lost
//!   on the network does for its sender: [`HealthStatus::Ok`] (the LND handed it off).
//! * [`FaultAction::Delay`]: the message waits that long before it is sent or handed up.
//! * [`FaultAction::Fail`]: send only (the kernel's `-e`): the send completes at once with
//!   that health status and is not sent.
//!
//! Where a rule applies is its [`Hooks`]: the constructors follow the kernel — drop rules
//! on receive, health-error rules on send, delay rules on both.

use std::time::Duration;

use lnet::health::HealthStatus;
use lnet::{Header, Message, MsgType, Net, Nid};

/// Which NIDs a rule's source or destination matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NidMatch {
    /// Any NID (`LNET_NID_ANY`).
    Any,
    /// Any NID on this net (`255.255.255.255@net`).
    Net(Net),
    /// This NID.
    Nid(Nid),
}

impl NidMatch {
    /// Whether `nid` matches.
    pub fn matches(self, nid: Nid) -> bool {
        match self {
            NidMatch::Any => true,
            NidMatch::Net(net) => nid.net == net,
            NidMatch::Nid(n) => n == nid,
        }
    }
}

/// A set of LNet message types (PUT, ACK, GET, REPLY).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MsgTypes(u8);

impl MsgTypes {
    /// Every type.
    pub const ALL: MsgTypes = MsgTypes(0b1111);
    /// PUT only.
    pub const PUT: MsgTypes = MsgTypes(1 << 1);
    /// ACK only.
    pub const ACK: MsgTypes = MsgTypes(1 << 0);
    /// GET only.
    pub const GET: MsgTypes = MsgTypes(1 << 2);
    /// REPLY only.
    pub const REPLY: MsgTypes = MsgTypes(1 << 3);

    /// Both sets.
    pub const fn union(self, other: MsgTypes) -> MsgTypes {
        MsgTypes(self.0 | other.0)
    }

    /// Whether the set holds `t` (never [`MsgType::Hello`]).
    pub fn contains(self, t: MsgType) -> bool {
        let bit = match t {
            MsgType::Ack => MsgTypes::ACK,
            MsgType::Put => MsgTypes::PUT,
            MsgType::Get => MsgTypes::GET,
            MsgType::Reply => MsgTypes::REPLY,
            MsgType::Hello => return false,
        };
        self.0 & bit.0 != 0
    }
}

/// Which of the matching messages a rule fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// Every matching message (`-x`).
    Always,
    /// The Nth, 2Nth, 3Nth... matching message (N ≥ 1).
    EveryNth(u32),
    /// One message at a random position in each window of N matching messages (the
    /// kernel's rate `-r N`; N ≥ 1).
    OneInWindow(u32),
    /// Each matching message with probability `per_million` / 1 000 000.
    Probability {
        /// Chance in millionths (at most 1 000 000).
        per_million: u32,
    },
}

/// What a rule does to a message it fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultAction {
    /// Drop it (see the [module documentation](self)).
    Drop,
    /// Hold it this long.
    Delay(Duration),
    /// Send path only: complete the send with this status instead of sending it.
    Fail(HealthStatus),
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hooks {
    /// Messages this NI sends.
    Send,
    /// Messages this NI receives.
    Receive,
    /// Both.
    Both,
}

impl Hooks {
    fn has(self, dir: Direction) -> bool {
        matches!(
            (self, dir),
            (Hooks::Both, _)
                | (Hooks::Send, Direction::Send)
                | (Hooks::Receive, Direction::Receive)
        )
    }
}

/// The direction of a message at a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Being sent.
    Send,
    /// Received.
    Receive,
}

/// One fault rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultRule {
    /// Header source NID.
    pub src: NidMatch,
    /// Header destination NID.
    pub dst: NidMatch,
    /// Portal; `None` = any. A rule with a portal matches only PUTs and GETs (the only
    /// messages that carry one).
    pub portal: Option<u32>,
    /// Message types.
    pub types: MsgTypes,
    /// Which matching messages it fires on.
    pub trigger: Trigger,
    /// What it does then.
    pub action: FaultAction,
    /// Where it applies.
    pub hooks: Hooks,
    /// Seed of the rule's generator (0 is replaced by a fixed non-zero value).
    pub seed: u64,
}

impl FaultRule {
    /// A drop rule as `lnetctl fault drop add` without `-e`: receive path.
    pub fn drop(src: NidMatch, dst: NidMatch, trigger: Trigger) -> FaultRule {
        FaultRule::new(src, dst, trigger, FaultAction::Drop, Hooks::Receive)
    }

    /// A drop rule with a health error (`-e`): send path, the send fails with `status`.
    pub fn health_error(
        src: NidMatch,
        dst: NidMatch,
        trigger: Trigger,
        status: HealthStatus,
    ) -> FaultRule {
        FaultRule::new(src, dst, trigger, FaultAction::Fail(status), Hooks::Send)
    }

    /// A delay rule (`lnetctl fault delay add`): both paths.
    pub fn delay(src: NidMatch, dst: NidMatch, trigger: Trigger, by: Duration) -> FaultRule {
        FaultRule::new(src, dst, trigger, FaultAction::Delay(by), Hooks::Both)
    }

    /// A rule for every type and portal, seed 1.
    pub fn new(
        src: NidMatch,
        dst: NidMatch,
        trigger: Trigger,
        action: FaultAction,
        hooks: Hooks,
    ) -> FaultRule {
        FaultRule {
            src,
            dst,
            portal: None,
            types: MsgTypes::ALL,
            trigger,
            action,
            hooks,
            seed: 1,
        }
    }

    /// Checks what cannot work.
    pub fn validate(&self) -> Result<(), FaultRuleError> {
        match self.trigger {
            Trigger::EveryNth(0) | Trigger::OneInWindow(0) => return Err(FaultRuleError::ZeroRate),
            Trigger::Probability { per_million } if per_million > 1_000_000 => {
                return Err(FaultRuleError::Probability { per_million })
            }
            _ => {}
        }
        if matches!(self.action, FaultAction::Fail(HealthStatus::Ok)) {
            return Err(FaultRuleError::OkIsNoFault);
        }
        if matches!(self.action, FaultAction::Fail(_)) && self.hooks != Hooks::Send {
            return Err(FaultRuleError::FailOnReceive);
        }
        Ok(())
    }

    /// Whether the rule's filters (not its trigger) accept a message at `dir`.
    pub fn matches(&self, dir: Direction, header: &Header) -> bool {
        if !self.hooks.has(dir)
            || !self.src.matches(header.src_nid)
            || !self.dst.matches(header.dest_nid)
            || !self.types.contains(header.msg_type())
        {
            return false;
        }
        match self.portal {
            None => true,
            Some(p) => match header.msg {
                Message::Put { ptl_index, .. } | Message::Get { ptl_index, .. } => ptl_index == p,
                _ => false,
            },
        }
    }
}

/// A rule that cannot be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultRuleError {
    /// A rate or window of 0.
    #[error("a rate of 0 never fires")]
    ZeroRate,
    /// A probability over one.
    #[error("probability {per_million} per million is over 1")]
    Probability {
        /// The probability given.
        per_million: u32,
    },
    /// A health-error rule with status OK.
    #[error("a health error of OK is no fault")]
    OkIsNoFault,
    /// A health-error rule on the receive path (the kernel matches `-e` rules only when
    /// sending).
    #[error("a health-error rule applies to sends only")]
    FailOnReceive,
}

/// The name of a rule in a [`FaultSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u64);

/// A rule and what it has done so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleStats {
    /// Its name.
    pub id: RuleId,
    /// The rule.
    pub rule: FaultRule,
    /// Messages its filters accepted.
    pub matched: u64,
    /// Messages it fired on.
    pub fired: u64,
}

/// A xorshift64 generator: small, seeded, reproducible; not for anything but tests.
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

#[derive(Debug, Clone)]
struct Live {
    stats: RuleStats,
    rng: XorShift64,
    /// OneInWindow: the position (0-based) that fires in the current window.
    target: u64,
}

/// The rules of one NI, in the order they were added; the first rule that fires wins.
#[derive(Debug, Clone, Default)]
pub struct FaultSet {
    rules: Vec<Live>,
    next_id: u64,
}

/// Most rules one NI holds.
pub const MAX_RULES: usize = 64;

impl FaultSet {
    /// No rules.
    pub fn new() -> FaultSet {
        FaultSet::default()
    }

    /// Adds a rule.
    pub fn add(&mut self, rule: FaultRule) -> Result<RuleId, FaultAddError> {
        rule.validate().map_err(FaultAddError::Rule)?;
        if self.rules.len() >= MAX_RULES {
            return Err(FaultAddError::Full { max: MAX_RULES });
        }
        self.next_id += 1;
        let id = RuleId(self.next_id);
        let mut rng = XorShift64::new(rule.seed);
        let target = match rule.trigger {
            Trigger::OneInWindow(n) => rng.below(u64::from(n)),
            _ => 0,
        };
        self.rules.push(Live {
            stats: RuleStats {
                id,
                rule,
                matched: 0,
                fired: 0,
            },
            rng,
            target,
        });
        Ok(id)
    }

    /// Removes a rule; whether it was there.
    pub fn remove(&mut self, id: RuleId) -> bool {
        let before = self.rules.len();
        self.rules.retain(|l| l.stats.id != id);
        self.rules.len() != before
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// Whether there are no rules (the hooks' fast path).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules and their counts.
    pub fn rules(&self) -> Vec<RuleStats> {
        self.rules.iter().map(|l| l.stats.clone()).collect()
    }

    /// Offers a message to every rule whose filters accept it (each counts it, so
    /// every rule's rate sees the same stream) and returns the action of the first that
    /// fires.
    pub fn check(&mut self, dir: Direction, header: &Header) -> Option<FaultAction> {
        let mut action = None;
        for live in &mut self.rules {
            if !live.stats.rule.matches(dir, header) {
                continue;
            }
            let seen = live.stats.matched;
            live.stats.matched += 1;
            let fire = match live.stats.rule.trigger {
                Trigger::Always => true,
                Trigger::EveryNth(n) => live.stats.matched % u64::from(n) == 0,
                Trigger::OneInWindow(n) => {
                    let n = u64::from(n);
                    let pos = seen % n;
                    let fire = pos == live.target;
                    if pos + 1 == n {
                        live.target = live.rng.below(n);
                    }
                    fire
                }
                Trigger::Probability { per_million } => {
                    live.rng.below(1_000_000) < u64::from(per_million)
                }
            };
            if fire && action.is_none() {
                live.stats.fired += 1;
                action = Some(live.stats.rule.action);
            }
        }
        action
    }
}

/// Why a rule was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultAddError {
    /// The rule is not valid.
    #[error(transparent)]
    Rule(FaultRuleError),
    /// The NI holds as many rules as it may.
    #[error("the NI already holds {max} fault rules")]
    Full {
        /// The limit.
        max: usize,
    },
    /// The NI is stopped.
    #[error("the NI is stopped")]
    Stopped,
}

#[cfg(test)]
mod tests {
    use super::*;
    use lnet::nid::PID_LUSTRE;
    use lnet::WireHandle;

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    fn header(src: &str, dst: &str, msg: Message) -> Header {
        Header {
            dest_nid: nid(dst),
            src_nid: nid(src),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 0,
            msg,
        }
    }

    fn put(src: &str, dst: &str, portal: u32) -> Header {
        header(
            src,
            dst,
            Message::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 0,
                hdr_data: 0,
                ptl_index: portal,
                offset: 0,
            },
        )
    }

    fn ack(src: &str, dst: &str) -> Header {
        header(
            src,
            dst,
            Message::Ack {
                dst_wmd: WireHandle::NONE,
                match_bits: 0,
                mlength: 0,
            },
        )
    }

    fn get(src: &str, dst: &str, portal: u32) -> Header {
        header(
            src,
            dst,
            Message::Get {
                return_wmd: WireHandle::NONE,
                match_bits: 0,
                ptl_index: portal,
                src_offset: 0,
                sink_length: 0,
            },
        )
    }

    fn reply(src: &str, dst: &str) -> Header {
        header(
            src,
            dst,
            Message::Reply {
                dst_wmd: WireHandle::NONE,
            },
        )
    }

    #[test]
    fn nid_wildcards() {
        let n = nid("10.0.0.1@tcp");
        assert!(NidMatch::Any.matches(n));
        assert!(NidMatch::Net(n.net).matches(n));
        assert!(!NidMatch::Net(nid("10.0.0.1@tcp1").net).matches(n));
        assert!(NidMatch::Nid(n).matches(n));
        assert!(!NidMatch::Nid(nid("10.0.0.2@tcp")).matches(n));
    }

    #[test]
    fn filters_src_dst_portal_type_and_hooks() {
        let mut rule = FaultRule::drop(
            NidMatch::Nid(nid("10.0.0.1@tcp")),
            NidMatch::Net(nid("10.0.0.2@tcp").net),
            Trigger::Always,
        );
        let rx = Direction::Receive;
        assert!(rule.matches(rx, &put("10.0.0.1@tcp", "10.0.0.9@tcp", 4)));
        assert!(!rule.matches(Direction::Send, &put("10.0.0.1@tcp", "10.0.0.9@tcp", 4)));
        assert!(!rule.matches(rx, &put("10.0.0.3@tcp", "10.0.0.9@tcp", 4)));
        assert!(!rule.matches(rx, &put("10.0.0.1@tcp", "10.0.0.9@tcp1", 4)));
        rule.portal = Some(4);
        assert!(rule.matches(rx, &put("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
        assert!(rule.matches(rx, &get("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
        assert!(!rule.matches(rx, &put("10.0.0.1@tcp", "10.0.0.2@tcp", 5)));
        assert!(!rule.matches(rx, &ack("10.0.0.1@tcp", "10.0.0.2@tcp")));
        rule.portal = None;
        rule.types = MsgTypes::ACK.union(MsgTypes::REPLY);
        assert!(rule.matches(rx, &ack("10.0.0.1@tcp", "10.0.0.2@tcp")));
        assert!(rule.matches(rx, &reply("10.0.0.1@tcp", "10.0.0.2@tcp")));
        assert!(!rule.matches(rx, &put("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
        assert!(!rule.matches(rx, &get("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
        assert!(!MsgTypes::ALL.contains(MsgType::Hello));
    }

    fn fired(set: &mut FaultSet, n: usize, h: &Header) -> Vec<bool> {
        (0..n)
            .map(|_| set.check(Direction::Receive, h).is_some())
            .collect()
    }

    #[test]
    fn every_nth_and_always() {
        let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
        let mut set = FaultSet::new();
        let id = set
            .add(FaultRule::drop(
                NidMatch::Any,
                NidMatch::Any,
                Trigger::EveryNth(3),
            ))
            .unwrap();
        assert_eq!(
            fired(&mut set, 7, &h),
            [false, false, true, false, false, true, false]
        );
        assert_eq!(set.rules()[0].matched, 7);
        assert_eq!(set.rules()[0].fired, 2);
        assert!(set.remove(id));
        assert!(!set.remove(id));
        assert!(set.is_empty());
        assert_eq!(set.check(Direction::Receive, &h), None);
        set.add(FaultRule::drop(
            NidMatch::Any,
            NidMatch::Any,
            Trigger::Always,
        ))
        .unwrap();
        assert_eq!(fired(&mut set, 3, &h), [true; 3]);
        set.clear();
        assert!(set.is_empty());
    }

    #[test]
    fn one_in_each_window_reproducibly() {
        let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
        let run = |seed| {
            let mut set = FaultSet::new();
            let mut rule = FaultRule::drop(NidMatch::Any, NidMatch::Any, Trigger::OneInWindow(10));
            rule.seed = seed;
            set.add(rule).unwrap();
            fired(&mut set, 100, &h)
        };
        let a = run(7);
        for window in a.chunks(10) {
            assert_eq!(window.iter().filter(|f| **f).count(), 1, "{a:?}");
        }
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
    }

    #[test]
    fn probability_is_seeded() {
        let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
        let run = |seed, per_million| {
            let mut set = FaultSet::new();
            let mut rule = FaultRule::drop(
                NidMatch::Any,
                NidMatch::Any,
                Trigger::Probability { per_million },
            );
            rule.seed = seed;
            set.add(rule).unwrap();
            fired(&mut set, 10_000, &h)
        };
        let half = run(42, 500_000);
        let n = half.iter().filter(|f| **f).count();
        assert!((4_500..5_500).contains(&n), "{n}");
        assert_eq!(half, run(42, 500_000));
        assert!(run(1, 0).iter().all(|f| !f));
        assert!(run(1, 1_000_000).iter().all(|f| *f));
    }

    #[test]
    fn first_firing_rule_wins_and_rates_count_independently() {
        let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
        let mut set = FaultSet::new();
        set.add(FaultRule::health_error(
            NidMatch::Any,
            NidMatch::Any,
            Trigger::EveryNth(2),
            HealthStatus::RemoteError,
        ))
        .unwrap();
        set.add(FaultRule::delay(
            NidMatch::Any,
            NidMatch::Any,
            Trigger::Always,
            Duration::from_millis(5),
        ))
        .unwrap();
        let tx = Direction::Send;
        assert_eq!(
            set.check(tx, &h),
            Some(FaultAction::Delay(Duration::from_millis(5)))
        );
        assert_eq!(
            set.check(tx, &h),
            Some(FaultAction::Fail(HealthStatus::RemoteError))
        );
        // On receive the health-error rule does not apply.
        assert_eq!(
            set.check(Direction::Receive, &h),
            Some(FaultAction::Delay(Duration::from_millis(5)))
        );
        let rules = set.rules();
        assert_eq!((rules[0].matched, rules[0].fired), (2, 1));
        assert_eq!((rules[1].matched, rules[1].fired), (3, 2));
    }

    #[test]
    fn invalid_rules_are_refused() {
        let mut set = FaultSet::new();
        let bad = |trigger| FaultRule::drop(NidMatch::Any, NidMatch::Any, trigger);
        assert_eq!(
            set.add(bad(Trigger::EveryNth(0))),
            Err(FaultAddError::Rule(FaultRuleError::ZeroRate))
        );
        assert_eq!(
            set.add(bad(Trigger::OneInWindow(0))),
            Err(FaultAddError::Rule(FaultRuleError::ZeroRate))
        );
        assert!(matches!(
            set.add(bad(Trigger::Probability {
                per_million: 1_000_001
            })),
            Err(FaultAddError::Rule(FaultRuleError::Probability { .. }))
        ));
        let ok_status = FaultRule::health_error(
            NidMatch::Any,
            NidMatch::Any,
            Trigger::Always,
            HealthStatus::Ok,
        );
        assert_eq!(
            set.add(ok_status),
            Err(FaultAddError::Rule(FaultRuleError::OkIsNoFault))
        );
        let mut rx_fail = FaultRule::health_error(
            NidMatch::Any,
            NidMatch::Any,
            Trigger::Always,
            HealthStatus::LocalError,
        );
        rx_fail.hooks = Hooks::Both;
        assert_eq!(
            set.add(rx_fail),
            Err(FaultAddError::Rule(FaultRuleError::FailOnReceive))
        );
        for _ in 0..MAX_RULES {
            set.add(bad(Trigger::Always)).unwrap();
        }
        assert_eq!(
            set.add(bad(Trigger::Always)),
            Err(FaultAddError::Full { max: MAX_RULES })
        );
    }

    #[test]
    fn xorshift_never_sticks_at_zero() {
        let mut r = XorShift64::new(0);
        assert_ne!(r.next_u64(), 0);
        assert_eq!(r.below(0), 0);
        assert!(r.below(5) < 5);
    }
}
