//! One fault rule as `lnetctl fault drop|delay add` states it: what it matches, when it
//! fires, and what it does then. Pure data with serde; the
//! matcher module runs it.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::health::HealthStatus;
use crate::{Header, Message, MsgType, Net, Nid, NidError};

/// Which NIDs a rule's source, destination or local NID matches: any (`*`), any on one
/// net (`*@NET`, which the kernel spells `255.255.255.255@NET`), or one NID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NidMatch {
    /// Any NID (`LNET_NID_ANY`).
    Any,
    /// Any NID on this net.
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

impl fmt::Display for NidMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NidMatch::Any => f.write_str("*"),
            NidMatch::Net(net) => write!(f, "*@{net}"),
            NidMatch::Nid(nid) => nid.fmt(f),
        }
    }
}

/// A NID pattern that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a NID pattern (*, *@NET or a NID): {source}")]
pub struct NidMatchError {
    /// The text given.
    pub text: String,
    /// Why its NID or net part does not parse.
    #[source]
    pub source: NidError,
}

impl FromStr for NidMatch {
    type Err = NidMatchError;

    /// `*`, `*@NET`, `255.255.255.255@NET` or a NID, as `lnetctl fault` takes them.
    fn from_str(s: &str) -> Result<NidMatch, NidMatchError> {
        let s = s.trim();
        if s == "*" {
            return Ok(NidMatch::Any);
        }
        let err = |source| NidMatchError {
            text: s.to_owned(),
            source,
        };
        if let Some(net) = s
            .strip_prefix("*@")
            .or_else(|| s.strip_prefix("255.255.255.255@"))
        {
            return Net::from_str(net).map(NidMatch::Net).map_err(err);
        }
        Nid::from_str(s).map(NidMatch::Nid).map_err(err)
    }
}

impl Serialize for NidMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NidMatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NidMatch, D::Error> {
        let text = String::deserialize(d)?;
        NidMatch::from_str(&text).map_err(de::Error::custom)
    }
}

/// What a rule does to the messages it fires on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultKind {
    /// `lnetctl fault drop`: drop the message, or with a health error fail its send.
    Drop,
    /// `lnetctl fault delay`: hold the message this long (`--latency`, which the kernel
    /// takes in seconds; here milliseconds).
    Delay {
        /// The delay in milliseconds (at most [`MAX_LATENCY_MS`]).
        latency_ms: u64,
    },
}

/// The longest delay a rule may ask for: one hour.
pub const MAX_LATENCY_MS: u64 = 3_600_000;

/// Which of the matching messages a rule fires on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultTrigger {
    /// Every matching message (`lnetctl fault drop add -x`).
    All,
    /// `--rate N`: one message at a random position in each window of N matching
    /// messages (N ≥ 1).
    Rate(u32),
    /// `--interval S`: one message at a random time in each window of S seconds (S ≥ 1):
    /// the first matching message at or after that time.
    Interval(u32),
    /// The Nth, 2Nth, 3Nth... matching message (N ≥ 1); not in lnetctl.
    EveryNth(u32),
    /// Each matching message with this chance in millionths (at most 1 000 000); not in
    /// lnetctl.
    Probability(u32),
    /// `--interval S --random` (drop rules): each matching message is dropped when a draw
    /// in `0..S` is at least `S / 2`, a chance of about one half (S ≥ 1), as the kernel
    /// draws it; no window is kept. Shown as `da_interval: S`.
    RandomInterval(u32),
}

/// An LNet message type a rule can be limited to (`--message`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultMsgType {
    /// `PUT`.
    Put,
    /// `ACK`.
    Ack,
    /// `GET`.
    Get,
    /// `REPLY`.
    Reply,
}

impl FaultMsgType {
    /// Every type, in the order lnetctl names them.
    pub const ALL: [FaultMsgType; 4] = [
        FaultMsgType::Put,
        FaultMsgType::Ack,
        FaultMsgType::Get,
        FaultMsgType::Reply,
    ];

    /// The header type of this name.
    pub const fn msg_type(self) -> MsgType {
        match self {
            FaultMsgType::Put => MsgType::Put,
            FaultMsgType::Ack => MsgType::Ack,
            FaultMsgType::Get => MsgType::Get,
            FaultMsgType::Reply => MsgType::Reply,
        }
    }
}

/// The health status a drop rule fails a send with (`--health_error`), in lnetctl's
/// spelling.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultHealthError {
    /// `local_interrupt`.
    LocalInterrupt,
    /// `local_dropped`.
    LocalDropped,
    /// `local_aborted`.
    LocalAborted,
    /// `local_no_route`.
    LocalNoRoute,
    /// `local_error`.
    LocalError,
    /// `local_timeout`.
    LocalTimeout,
    /// `remote_error`.
    RemoteError,
    /// `remote_dropped`.
    RemoteDropped,
    /// `remote_timeout`.
    RemoteTimeout,
    /// `network_timeout`.
    NetworkTimeout,
    /// `random`: one failure status, chosen per message.
    Random,
}

impl FaultHealthError {
    /// The status, `None` for [`FaultHealthError::Random`].
    pub const fn status(self) -> Option<HealthStatus> {
        Some(match self {
            FaultHealthError::LocalInterrupt => HealthStatus::LocalInterrupt,
            FaultHealthError::LocalDropped => HealthStatus::LocalDropped,
            FaultHealthError::LocalAborted => HealthStatus::LocalAborted,
            FaultHealthError::LocalNoRoute => HealthStatus::LocalNoRoute,
            FaultHealthError::LocalError => HealthStatus::LocalError,
            FaultHealthError::LocalTimeout => HealthStatus::LocalTimeout,
            FaultHealthError::RemoteError => HealthStatus::RemoteError,
            FaultHealthError::RemoteDropped => HealthStatus::RemoteDropped,
            FaultHealthError::RemoteTimeout => HealthStatus::RemoteTimeout,
            FaultHealthError::NetworkTimeout => HealthStatus::NetworkTimeout,
            FaultHealthError::Random => return None,
        })
    }

    /// The name of a failure status (`None` for [`HealthStatus::Ok`], no failure).
    pub fn from_status(status: HealthStatus) -> Option<FaultHealthError> {
        FAILURES.into_iter().find(|e| e.status() == Some(status))
    }
}

/// Every named failure status, in value order.
const FAILURES: [FaultHealthError; 10] = [
    FaultHealthError::LocalInterrupt,
    FaultHealthError::LocalDropped,
    FaultHealthError::LocalAborted,
    FaultHealthError::LocalNoRoute,
    FaultHealthError::LocalError,
    FaultHealthError::LocalTimeout,
    FaultHealthError::RemoteError,
    FaultHealthError::RemoteDropped,
    FaultHealthError::RemoteTimeout,
    FaultHealthError::NetworkTimeout,
];

/// The failure status at position `i` (mod 10) of the named ones: what `random` picks.
pub(crate) fn failure_at(i: u64) -> HealthStatus {
    let len = FAILURES.len() as u64;
    let index = usize::try_from(i % len).unwrap_or(0);
    FAILURES
        .get(index)
        .and_then(|e| e.status())
        .unwrap_or(HealthStatus::LocalError)
}

/// Where a message meets the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Being sent, before the LND has it.
    Send,
    /// Received, before LNet processes it.
    Receive,
}

/// On which path a rule applies.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPath {
    /// Messages this node sends.
    Send,
    /// Messages this node receives.
    Receive,
    /// Both.
    Both,
}

impl FaultPath {
    /// Whether a message at `dir` is on this path.
    pub fn has(self, dir: Direction) -> bool {
        matches!(
            (self, dir),
            (FaultPath::Both, _)
                | (FaultPath::Send, Direction::Send)
                | (FaultPath::Receive, Direction::Receive)
        )
    }
}

/// Most portals a rule can name (the kernel keeps them in a 64-bit mask).
pub const MAX_PORTAL: u32 = 63;

/// One fault rule (`lnetctl fault drop|delay add`).
///
/// Its serde form is the rule's stored and API form: NID patterns as text, absent
/// optional fields taking their default.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// `--local_nid`: only messages sent or received by this local NI; absent for every NI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "10.0.0.1@tcp"))]
    pub local_nid: Option<Nid>,
    /// Drop or delay.
    pub kind: FaultKind,
    /// `--source`: the header's source NID (`*`, `*@NET` or a NID).
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "*"))]
    pub source: NidMatch,
    /// `--dest`: the header's destination NID (`*`, `*@NET` or a NID).
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "*@o2ib1"))]
    pub dest: NidMatch,
    /// `--rate`, `--interval` or another trigger.
    pub trigger: FaultTrigger,
    /// `--portal`: the portals matched (PUTs and GETs only); empty for any.
    #[serde(default)]
    pub portals: Vec<u32>,
    /// `--message`: the message types matched; empty for any.
    #[serde(default)]
    pub message_types: Vec<FaultMsgType>,
    /// `--health_error` (drop rules only): fail the send with this status instead of
    /// losing the message.
    #[serde(default)]
    pub health_error: Option<FaultHealthError>,
    /// Where the rule applies; absent for the kernel's place ([`FaultRule::path`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<FaultPath>,
    /// Fire at most this many times, then let every message through; not in lnetctl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Seed of the rule's generator (0 is replaced by a fixed non-zero value).
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    1
}

impl FaultRule {
    /// A drop rule (`lnetctl fault drop add -s SRC -d DST`), on every NI, type and portal.
    pub fn drop(source: NidMatch, dest: NidMatch, trigger: FaultTrigger) -> FaultRule {
        FaultRule {
            local_nid: None,
            kind: FaultKind::Drop,
            source,
            dest,
            trigger,
            portals: Vec::new(),
            message_types: Vec::new(),
            health_error: None,
            path: None,
            limit: None,
            seed: default_seed(),
        }
    }

    /// A drop rule with a health error (`-e`): the send fails with `error`.
    pub fn health_error(
        source: NidMatch,
        dest: NidMatch,
        trigger: FaultTrigger,
        error: FaultHealthError,
    ) -> FaultRule {
        FaultRule {
            health_error: Some(error),
            ..FaultRule::drop(source, dest, trigger)
        }
    }

    /// A delay rule (`lnetctl fault delay add --latency`), `latency_ms` milliseconds.
    pub fn delay(
        source: NidMatch,
        dest: NidMatch,
        trigger: FaultTrigger,
        latency_ms: u64,
    ) -> FaultRule {
        FaultRule {
            kind: FaultKind::Delay { latency_ms },
            ..FaultRule::drop(source, dest, trigger)
        }
    }

    /// The same rule, only at local NI `nid` (`--local_nid`).
    pub fn at(mut self, nid: Nid) -> FaultRule {
        self.local_nid = Some(nid);
        self
    }

    /// The same rule on path `path`.
    pub fn on(mut self, path: FaultPath) -> FaultRule {
        self.path = Some(path);
        self
    }

    /// The same rule, only for these message types.
    pub fn messages(mut self, types: &[FaultMsgType]) -> FaultRule {
        self.message_types = types.to_vec();
        self
    }

    /// The same rule, only for PUTs and GETs to these portals.
    pub fn portals(mut self, portals: &[u32]) -> FaultRule {
        self.portals = portals.to_vec();
        self
    }

    /// The same rule, firing at most `count` times.
    pub fn limit(mut self, count: u64) -> FaultRule {
        self.limit = Some(count);
        self
    }

    /// Where the rule applies: its path if set, else where the kernel matches it — a
    /// drop rule on receive, a drop rule with a health error on send (only a send has a
    /// status to fail), a delay rule on receive.
    pub fn path(&self) -> FaultPath {
        self.path.unwrap_or(match (self.kind, self.health_error) {
            (FaultKind::Drop, Some(_)) => FaultPath::Send,
            _ => FaultPath::Receive,
        })
    }

    /// Checks what the kernel refuses and what cannot work.
    pub fn validate(&self) -> Result<(), FaultRuleError> {
        match self.trigger {
            FaultTrigger::Rate(0) | FaultTrigger::EveryNth(0) => {
                return Err(FaultRuleError::ZeroRate)
            }
            FaultTrigger::Interval(0) | FaultTrigger::RandomInterval(0) => {
                return Err(FaultRuleError::ZeroInterval)
            }
            FaultTrigger::Probability(per_million) if per_million > 1_000_000 => {
                return Err(FaultRuleError::Probability { per_million })
            }
            _ => {}
        }
        if let Some(&portal) = self.portals.iter().find(|p| **p > MAX_PORTAL) {
            return Err(FaultRuleError::Portal { portal });
        }
        if !self.portals.is_empty()
            && !self.message_types.is_empty()
            && !self
                .message_types
                .iter()
                .any(|t| matches!(t, FaultMsgType::Put | FaultMsgType::Get))
        {
            return Err(FaultRuleError::PortalWithoutPutOrGet);
        }
        if let FaultKind::Delay { latency_ms } = self.kind {
            if self.health_error.is_some() {
                return Err(FaultRuleError::HealthErrorOnDelay);
            }
            if latency_ms > MAX_LATENCY_MS {
                return Err(FaultRuleError::Latency { latency_ms });
            }
        }
        if self.health_error.is_some() && self.path() != FaultPath::Send {
            return Err(FaultRuleError::HealthErrorOnReceive);
        }
        if self.limit == Some(0) {
            return Err(FaultRuleError::ZeroLimit);
        }
        Ok(())
    }

    /// Whether the rule's filters (not its trigger) accept a message at `dir` through
    /// local NI `local_nid`.
    pub fn matches(&self, dir: Direction, local_nid: Nid, header: &Header) -> bool {
        if !self.path().has(dir)
            || self.local_nid.is_some_and(|n| n != local_nid)
            || !self.source.matches(header.src_nid)
            || !self.dest.matches(header.dest_nid)
        {
            return false;
        }
        let t = header.msg_type();
        let portal = match header.msg {
            Message::Put { ptl_index, .. } | Message::Get { ptl_index, .. } => Some(ptl_index),
            _ => None,
        };
        let type_ok = if self.message_types.is_empty() {
            t != MsgType::Hello
        } else {
            self.message_types.iter().any(|m| m.msg_type() == t)
        };
        type_ok && (self.portals.is_empty() || portal.is_some_and(|p| self.portals.contains(&p)))
    }
}

/// A rule that cannot be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultRuleError {
    /// A rate (or every-Nth) of 0.
    #[error("a rate of 0 never fires")]
    ZeroRate,
    /// An interval of 0 seconds.
    #[error("the interval is at least 1 second")]
    ZeroInterval,
    /// A probability over one.
    #[error("probability {per_million} per million is over 1")]
    Probability {
        /// The probability given.
        per_million: u32,
    },
    /// A portal past the kernel's portal mask.
    #[error("portal {portal} is over {MAX_PORTAL}")]
    Portal {
        /// The portal given.
        portal: u32,
    },
    /// A portal filter with only ACK or REPLY types, which carry no portal.
    #[error("a rule with a portal matches PUTs or GETs only")]
    PortalWithoutPutOrGet,
    /// A health error on a delay rule.
    #[error("only drop rules take a health error")]
    HealthErrorOnDelay,
    /// A health error on the receive path (only a send has a status to fail).
    #[error("a health-error rule applies to sends only")]
    HealthErrorOnReceive,
    /// A delay over [`MAX_LATENCY_MS`].
    #[error("a latency of {latency_ms} ms is over {MAX_LATENCY_MS} ms")]
    Latency {
        /// The latency given.
        latency_ms: u64,
    },
    /// A limit of 0 firings.
    #[error("a limit of 0 never fires")]
    ZeroLimit,
}
