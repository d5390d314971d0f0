//! Fault injection rules ([`lnet::fault::FaultRule`], `lnetctl fault drop|delay add`),
//! kept so that a restarted router installs them again.
//!
//! A rule is stored in its serde (JSON) form, keyed by the NID of the local NI it names
//! (20-byte form; `LNET_NID_ANY` for a rule of every NI, which names none), then a rule id
//! that is never reused. Schema 1 stored an older form of
//! the rule; [`v1`] converts it.

pub(crate) mod v1;

use lnet::fault::FaultRule;
use lnet::Nid;
use serde::Serialize;

use crate::engine::{decode, decode_key, TreeId, WriteSet};
use crate::error::{DecodeError, StoreError};
use crate::keys;
use crate::schema::read_counter;
use crate::Store;

/// The `meta` key of the next fault rule id.
pub(crate) const NEXT_RULE_ID_KEY: &[u8] = b"next_fault_rule_id";

/// A stored fault rule and its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredFaultRule {
    /// The id [`Store::add_fault_rule`] gave it, unique in this store.
    pub id: u32,
    /// The rule.
    pub rule: FaultRule,
}

/// The NID a rule is kept under: its local NI, or `LNET_NID_ANY` for every NI.
fn rule_ni(rule: &FaultRule) -> Nid {
    rule.local_nid.unwrap_or(Nid::ANY)
}

/// A key and value of the fault rules tree, decoded as a read decodes them: the rule
/// must name the NI it is keyed under (none under `LNET_NID_ANY`).
pub(crate) fn decode_fault_entry(k: &[u8], v: &[u8]) -> Result<StoredFaultRule, StoreError> {
    let (ni, id) = decode_key(TreeId::Faults, k, keys::decode_fault)?;
    let rule: FaultRule = decode(TreeId::Faults, k, v)?;
    let keyed = if ni.is_any() { None } else { Some(ni) };
    if rule.local_nid != keyed {
        let named = rule
            .local_nid
            .map_or_else(|| "no NI".to_owned(), |n| format!("NI {n}"));
        return Err(StoreError::CorruptValue {
            tree: TreeId::Faults.name(),
            key: keys::hex(k),
            source: DecodeError::Record {
                message: format!("the rule is for {named} but keyed under {ni}"),
            },
        });
    }
    Ok(StoredFaultRule { id, rule })
}

impl Store {
    /// Adds a fault rule (of its local NI, or of every NI) and returns its id.
    pub fn add_fault_rule(&self, rule: &FaultRule) -> Result<u32, StoreError> {
        rule.validate().map_err(StoreError::FaultRule)?;
        let ni = rule_ni(rule);
        let _guard = self.lock();
        let next = read_counter(&self.trees, NEXT_RULE_ID_KEY)?;
        let id = u32::try_from(next).map_err(|_| StoreError::InvalidArgument {
            what: "fault rule",
            reason: "every rule id has been used".to_owned(),
        })?;
        let mut set = WriteSet::new();
        set.put(TreeId::Faults, &keys::fault_key(&ni, id), rule)?;
        set.put_raw(
            TreeId::Meta,
            NEXT_RULE_ID_KEY,
            (next + 1).to_be_bytes().to_vec(),
        );
        self.trees.commit(set)?;
        Ok(id)
    }

    /// Keeps a fault rule under the id the node gave it (the API's rule id), replacing
    /// a rule with that id; later [`Store::add_fault_rule`]s choose ids above it.
    pub fn put_fault_rule(&self, id: u32, rule: &FaultRule) -> Result<(), StoreError> {
        rule.validate().map_err(StoreError::FaultRule)?;
        let ni = rule_ni(rule);
        let _guard = self.lock();
        let next = read_counter(&self.trees, NEXT_RULE_ID_KEY)?;
        let mut set = WriteSet::new();
        for (k, v) in self.trees.scan_raw(TreeId::Faults)? {
            if decode_fault_entry(&k, &v)?.id == id {
                set.remove(TreeId::Faults, &k);
            }
        }
        set.put(TreeId::Faults, &keys::fault_key(&ni, id), rule)?;
        let after = next.max(u64::from(id) + 1);
        set.put_raw(TreeId::Meta, NEXT_RULE_ID_KEY, after.to_be_bytes().to_vec());
        self.trees.commit(set)
    }

    /// Deletes rule `id`.
    pub fn delete_fault_rule(&self, id: u32) -> Result<(), StoreError> {
        let _guard = self.lock();
        let mut set = WriteSet::new();
        let mut found = false;
        for (k, v) in self.trees.scan_raw(TreeId::Faults)? {
            if decode_fault_entry(&k, &v)?.id == id {
                set.remove(TreeId::Faults, &k);
                found = true;
            }
        }
        if !found {
            return Err(StoreError::NotFound {
                what: "fault rule",
                key: id.to_string(),
            });
        }
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
            .map(|(k, v)| decode_fault_entry(k, v))
            .collect()
    }

    /// The fault rules of one NI, by id.
    pub fn fault_rules_of(&self, ni: &Nid) -> Result<Vec<StoredFaultRule>, StoreError> {
        let _guard = self.lock();
        self.trees
            .scan_prefix(TreeId::Faults, &keys::nid_key(ni))?
            .iter()
            .map(|(k, v)| decode_fault_entry(k, v))
            .collect()
    }
}
