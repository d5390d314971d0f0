//! Fault injection rules, kept per local NI as `lnetctl fault drop|delay add` states them
//! (health reference 2.11), so that a restarted router installs them again.
//!
//! [`FaultRule`] is a plain serializable type (its JSON form, NIDs as text, is also the
//! rule's schema-1 on-disk form); the node converts it to the matching rule of its LNDs.
//! Rules are keyed by the NI's NID (20-byte form) then a rule id that is never reused.

use std::str::FromStr;

use lnet::{Net, Nid};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::engine::{decode, decode_key, TreeId, WriteSet};
use crate::error::{DecodeError, StoreError};
use crate::keys;
use crate::schema::read_counter;
use crate::Store;

/// The `meta` key of the next fault rule id.
const NEXT_RULE_ID_KEY: &[u8] = b"next_fault_rule_id";

/// Which NIDs a rule's source or destination matches: `*`, `*@NET` or one NID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NidMatch {
    /// Any NID (`*`).
    Any,
    /// Any NID on this net (`*@tcp1`).
    Net(Net),
    /// This NID.
    Nid(Nid),
}

impl std::fmt::Display for NidMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NidMatch::Any => f.write_str("*"),
            NidMatch::Net(net) => write!(f, "*@{net}"),
            NidMatch::Nid(nid) => nid.fmt(f),
        }
    }
}

impl FromStr for NidMatch {
    type Err = String;

    /// `*`, `*@NET` or a NID, as `lnetctl fault` takes them.
    fn from_str(s: &str) -> Result<NidMatch, String> {
        if s == "*" {
            return Ok(NidMatch::Any);
        }
        if let Some(net) = s.strip_prefix("*@") {
            return Net::from_str(net)
                .map(NidMatch::Net)
                .map_err(|e| format!("{s:?}: {e}"));
        }
        Nid::from_str(s)
            .map(NidMatch::Nid)
            .map_err(|e| format!("{s:?}: {e}"))
    }
}

impl Serialize for NidMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.to_string();
        if NidMatch::from_str(&text).as_ref() != Ok(self) {
            return Err(serde::ser::Error::custom(format!(
                "{text} does not read back from its text form"
            )));
        }
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for NidMatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NidMatch, D::Error> {
        let text = String::deserialize(d)?;
        NidMatch::from_str(&text).map_err(de::Error::custom)
    }
}

/// What a rule does to the messages it fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultKind {
    /// `lnetctl fault drop`: drop the message (or, with a health error, fail its send).
    Drop,
    /// `lnetctl fault delay`: hold the message.
    Delay {
        /// `--latency`, seconds.
        latency_s: u32,
    },
}

/// Which of the matching messages a rule fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultTrigger {
    /// `--rate N`: one message in every N (N >= 1).
    Rate(u32),
    /// `--interval S`: one message every S seconds (S >= 1).
    Interval(u32),
}

/// An LNet message type a rule can be limited to (`--message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// The health status a drop rule fails a send with (`--health_error`), in lnetctl's
/// spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// `random`: one of the above, chosen per message.
    Random,
}

/// One fault rule at one local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// `--local_nid`: the local NI whose messages the rule applies to.
    #[serde(with = "crate::records::nid_serde")]
    pub ni: Nid,
    /// Drop or delay.
    pub kind: FaultKind,
    /// `--source`.
    pub source: NidMatch,
    /// `--dest`.
    pub destination: NidMatch,
    /// `--rate` or `--interval`.
    pub trigger: FaultTrigger,
    /// `--portal`: the portals matched; empty for any.
    pub portals: Vec<u32>,
    /// `--message`: the message types matched; empty for any.
    pub message_types: Vec<FaultMsgType>,
    /// `--health_error` (drop rules only): fail the send with this status instead of
    /// dropping the message silently.
    pub health_error: Option<FaultHealthError>,
}

impl FaultRule {
    /// Refuses what `lnetctl fault` refuses: a zero rate or interval, and a health error
    /// on a delay rule.
    pub fn check(&self) -> Result<(), StoreError> {
        let bad = |reason: &str| StoreError::InvalidArgument {
            what: "fault rule",
            reason: reason.to_owned(),
        };
        match self.trigger {
            FaultTrigger::Rate(0) => return Err(bad("the rate is at least 1")),
            FaultTrigger::Interval(0) => return Err(bad("the interval is at least 1 second")),
            _ => {}
        }
        if matches!(self.kind, FaultKind::Delay { .. }) && self.health_error.is_some() {
            return Err(bad("only drop rules take a health error"));
        }
        Ok(())
    }
}

/// A stored fault rule and its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredFaultRule {
    /// The id [`Store::add_fault_rule`] gave it, unique in this store.
    pub id: u32,
    /// The rule.
    pub rule: FaultRule,
}

impl Store {
    fn decode_fault(&self, k: &[u8], v: &[u8]) -> Result<StoredFaultRule, StoreError> {
        let (ni, id) = decode_key(TreeId::Faults, k, keys::decode_fault)?;
        let rule: FaultRule = decode(TreeId::Faults, k, v)?;
        if rule.ni != ni {
            return Err(StoreError::CorruptValue {
                tree: TreeId::Faults.name(),
                key: keys::hex(k),
                source: DecodeError::Record {
                    message: format!("the rule is for NI {} but keyed under {ni}", rule.ni),
                },
            });
        }
        Ok(StoredFaultRule { id, rule })
    }

    /// Adds a fault rule and returns its id.
    pub fn add_fault_rule(&self, rule: &FaultRule) -> Result<u32, StoreError> {
        rule.check()?;
        let _guard = self.lock();
        let next = read_counter(&self.trees, NEXT_RULE_ID_KEY)?;
        let id = u32::try_from(next).map_err(|_| StoreError::InvalidArgument {
            what: "fault rule",
            reason: "every rule id has been used".to_owned(),
        })?;
        let mut set = WriteSet::new();
        set.put(TreeId::Faults, &keys::fault_key(&rule.ni, id), rule)?;
        set.put_raw(
            TreeId::Meta,
            NEXT_RULE_ID_KEY,
            (next + 1).to_be_bytes().to_vec(),
        );
        self.trees.commit(set)?;
        Ok(id)
    }

    /// Deletes rule `id` of the NI `ni`.
    pub fn delete_fault_rule(&self, ni: &Nid, id: u32) -> Result<(), StoreError> {
        let _guard = self.lock();
        let key = keys::fault_key(ni, id);
        if self.trees.get_raw(TreeId::Faults, &key)?.is_none() {
            return Err(StoreError::NotFound {
                what: "fault rule",
                key: format!("{id} of NI {ni}"),
            });
        }
        let mut set = WriteSet::new();
        set.remove(TreeId::Faults, &key);
        self.trees.commit(set)
    }

    /// Deletes every rule of the NI `ni` (`lnetctl fault drop|delay reset`); how many.
    pub fn clear_fault_rules(&self, ni: &Nid) -> Result<usize, StoreError> {
        let _guard = self.lock();
        let rules = self.trees.scan_prefix(TreeId::Faults, &keys::nid_key(ni))?;
        let mut set = WriteSet::new();
        for (k, _) in &rules {
            set.remove(TreeId::Faults, k);
        }
        self.trees.commit(set)?;
        Ok(rules.len())
    }

    /// Every fault rule, by NI then id.
    pub fn fault_rules(&self) -> Result<Vec<StoredFaultRule>, StoreError> {
        let _guard = self.lock();
        self.trees
            .scan_raw(TreeId::Faults)?
            .iter()
            .map(|(k, v)| self.decode_fault(k, v))
            .collect()
    }

    /// The fault rules of one NI, by id.
    pub fn fault_rules_of(&self, ni: &Nid) -> Result<Vec<StoredFaultRule>, StoreError> {
        let _guard = self.lock();
        self.trees
            .scan_prefix(TreeId::Faults, &keys::nid_key(ni))?
            .iter()
            .map(|(k, v)| self.decode_fault(k, v))
            .collect()
    }
}
