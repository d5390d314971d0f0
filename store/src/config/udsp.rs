//! UDSP rules, keyed by their position in the rule list.

use lnet::config::UdspRule;

use crate::engine::{decode_key, TreeId, WriteSet};
use crate::error::StoreError;
use crate::keys;
use crate::records::UdspRecord;
use crate::Store;

impl Store {
    pub(super) fn read_udsp(&self) -> Result<Vec<UdspRule>, StoreError> {
        Ok(self
            .trees
            .scan::<u32, UdspRecord>(TreeId::Udsp, keys::decode_u32)?
            .into_iter()
            .map(|(idx, r)| r.into_model(idx))
            .collect())
    }

    /// The UDSP rules in list order, each with its position as `idx`.
    pub fn udsp_rules(&self) -> Result<Vec<UdspRule>, StoreError> {
        let _guard = self.lock();
        self.read_udsp()
    }

    /// Adds a UDSP rule (`lnetctl udsp add`): at position `rule.idx` when given (the rules
    /// from there on move down one), else at the end. Returns the position it got.
    pub fn add_udsp(&self, rule: &UdspRule) -> Result<u32, StoreError> {
        let _guard = self.lock();
        let rules = self.trees.scan_raw(TreeId::Udsp)?;
        let len = u32::try_from(rules.len()).map_err(|_| StoreError::InvalidArgument {
            what: "udsp",
            reason: "more than 2^32 rules".to_owned(),
        })?;
        let at = rule.idx.map_or(len, |i| i.min(len));
        let mut set = WriteSet::new();
        // Positions are 0..len in order; move those at `at` and after down one.
        for (k, v) in rules.iter().rev() {
            let idx = decode_key(TreeId::Udsp, k, keys::decode_u32)?;
            if idx >= at {
                set.put_raw(TreeId::Udsp, &keys::u32_key(idx + 1), v.clone());
            }
        }
        set.put(
            TreeId::Udsp,
            &keys::u32_key(at),
            &UdspRecord::from_model(rule),
        )?;
        self.trees.commit(set)?;
        Ok(at)
    }

    /// Deletes the UDSP rule at position `idx` (`lnetctl udsp del --idx`); the rules after
    /// it move up one.
    pub fn delete_udsp(&self, idx: u32) -> Result<(), StoreError> {
        let _guard = self.lock();
        let rules = self.trees.scan_raw(TreeId::Udsp)?;
        let mut set = WriteSet::new();
        let mut found = false;
        let mut last = None;
        for (k, v) in &rules {
            let i = decode_key(TreeId::Udsp, k, keys::decode_u32)?;
            if i == idx {
                found = true;
            } else if i > idx {
                set.put_raw(TreeId::Udsp, &keys::u32_key(i - 1), v.clone());
            }
            last = Some(i);
        }
        if !found {
            return Err(StoreError::NotFound {
                what: "UDSP rule",
                key: idx.to_string(),
            });
        }
        if let Some(last) = last {
            set.remove(TreeId::Udsp, &keys::u32_key(last));
        }
        // Moves write positions below `last`, so removing `last` never undoes one.
        self.trees.commit(set)
    }

    /// Replaces the UDSP rules with `rules`, in list order (positions 0, 1, ...), in one
    /// write: what `lnetctl udsp add|del` leaves on the running node.
    pub fn set_udsp_rules(&self, rules: &[UdspRule]) -> Result<(), StoreError> {
        let _guard = self.lock();
        let old = self.trees.scan_raw(TreeId::Udsp)?;
        let mut set = WriteSet::new();
        for (k, _) in &old {
            let idx = decode_key(TreeId::Udsp, k, keys::decode_u32)?;
            if usize::try_from(idx).map_or(true, |i| i >= rules.len()) {
                set.remove(TreeId::Udsp, k);
            }
        }
        for (i, rule) in rules.iter().enumerate() {
            let idx = u32::try_from(i).map_err(|_| StoreError::InvalidArgument {
                what: "udsp",
                reason: "more than 2^32 rules".to_owned(),
            })?;
            set.put(
                TreeId::Udsp,
                &keys::u32_key(idx),
                &UdspRecord::from_model(rule),
            )?;
        }
        self.trees.commit(set)
    }
}
