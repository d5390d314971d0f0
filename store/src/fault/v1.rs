//! The schema-1 form of a stored fault rule and the migration to schema 2, which stores
//! [`lnet::fault::FaultRule`] itself.
//!
//! Schema 1 kept `ni`, `kind` (`drop`, or `delay` with `latency_s` seconds), `source`,
//! `destination`, `trigger` (`rate` or `interval`), `portals`, `message_types` and
//! `health_error`; schema 2 names the NI `local_nid`, the destination `dest`, keeps the
//! latency in milliseconds and adds the fields that schema 1 had no place for, at their
//! defaults.

use lnet::fault::{FaultHealthError, FaultKind, FaultMsgType, FaultRule, FaultTrigger, NidMatch};
use lnet::Nid;
use serde::Deserialize;

use crate::engine::{decode, TreeId, Trees, WriteSet};
use crate::error::StoreError;

/// What a schema-1 rule did.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum KindV1 {
    Drop,
    Delay { latency_s: u32 },
}

/// A schema-1 trigger.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TriggerV1 {
    Rate(u32),
    Interval(u32),
}

/// A schema-1 fault rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleV1 {
    ni: Nid,
    kind: KindV1,
    source: NidMatch,
    destination: NidMatch,
    trigger: TriggerV1,
    portals: Vec<u32>,
    message_types: Vec<FaultMsgType>,
    health_error: Option<FaultHealthError>,
}

impl RuleV1 {
    fn into_rule(self) -> FaultRule {
        let trigger = match self.trigger {
            TriggerV1::Rate(n) => FaultTrigger::Rate(n),
            TriggerV1::Interval(s) => FaultTrigger::Interval(s),
        };
        let mut rule = match self.kind {
            KindV1::Drop => FaultRule::drop(self.source, self.destination, trigger),
            KindV1::Delay { latency_s } => FaultRule::delay(
                self.source,
                self.destination,
                trigger,
                u64::from(latency_s) * 1000,
            ),
        }
        .at(self.ni)
        .portals(&self.portals)
        .messages(&self.message_types);
        rule.health_error = self.health_error;
        if let FaultKind::Delay { .. } = rule.kind {
            rule.health_error = None;
        }
        rule
    }
}

/// A schema-1 fault rule value, decoded and converted as the migration does.
pub(crate) fn decode_v1(k: &[u8], v: &[u8]) -> Result<FaultRule, StoreError> {
    let old: RuleV1 = decode(TreeId::Faults, k, v)?;
    Ok(old.into_rule())
}

/// Schema 1 to 2: rewrites every fault rule in the lnet form.
pub(crate) fn migrate(trees: &Trees) -> Result<WriteSet, StoreError> {
    let mut set = WriteSet::new();
    for (k, v) in trees.scan_raw(TreeId::Faults)? {
        set.put(TreeId::Faults, &k, &decode_v1(&k, &v)?)?;
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_1_rule_reads_as_the_lnet_rule() {
        let old: RuleV1 = serde_json::from_value(serde_json::json!({
            "ni": "10.0.0.2@tcp",
            "kind": {"delay": {"latency_s": 3}},
            "source": "10.0.0.7@tcp",
            "destination": "*@o2ib1",
            "trigger": {"interval": 5},
            "portals": [4],
            "message_types": ["put", "get"],
            "health_error": null
        }))
        .unwrap();
        let nid = |s: &str| s.parse::<Nid>().unwrap();
        assert_eq!(
            old.into_rule(),
            FaultRule::delay(
                NidMatch::Nid(nid("10.0.0.7@tcp")),
                NidMatch::Net(nid("1.1.1.1@o2ib1").net),
                FaultTrigger::Interval(5),
                3000
            )
            .at(nid("10.0.0.2@tcp"))
            .portals(&[4])
            .messages(&[FaultMsgType::Put, FaultMsgType::Get])
        );
    }
}
