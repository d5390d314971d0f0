//! User Defined Selection Policy (reference Part 3): the rules of `udsp:` turned into the
//! selection priorities and preferred lists the path selection reads.
//!
//! What a rule does depends on which of `src`, `dst` and `rte` it has:
//!
//! | Given | Effect |
//! |---|---|
//! | `src` | priority (the rule's, or 0) of the matching local nets (net rule) or local NIs (NID rule) |
//! | `dst` | priority of the matching peer nets (net rule) or peer NIs (NID rule) |
//! | `src` + `dst` | each matching peer NI prefers the local NIs matching `src` |
//! | `dst` + `rte` | each matching peer NI prefers the gateways matching `rte` |
//!
//! Any other combination is refused. The kernel applies the list from its end to its
//! start, so where rules overlap the one with the lower index decides a priority, and the
//! preferred lists of every matching rule add up. [`UdspPolicy`] keeps the compiled rules
//! and answers for any NID when asked, which gives the same result and applies to peer NIs
//! and NIs that appear later without re-applying anything.

use crate::config::UdspRule;
use crate::nidexpr::{NidExpr, NidExprError};
use crate::selection::LNET_MAX_SELECTION_PRIORITY;
use crate::show::UdspInfo;
use crate::{Net, Nid};

/// Why a rule list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UdspError {
    /// An expression of a rule does not parse.
    #[error("udsp[{index}].{field}: {source}")]
    Expression {
        /// The rule's position in the list.
        index: usize,
        /// `src`, `dst` or `rte`.
        field: &'static str,
        /// What is wrong.
        source: NidExprError,
    },
    /// The rule's fields do not make one of the four kinds of rule.
    #[error("udsp[{index}]: {reason}")]
    Combination {
        /// The rule's position in the list.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A preferred-list rule carries a priority.
    #[error("udsp[{index}].priority: a rule with src and dst, or dst and rte, makes a preferred list and takes no priority")]
    PriorityOnPreferred {
        /// The rule's position in the list.
        index: usize,
    },
}

/// One compiled rule.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// `src` only.
    Src { src: NidExpr, priority: u32 },
    /// `dst` only.
    Dst { dst: NidExpr, priority: u32 },
    /// `src` + `dst`: preferred local NIs.
    PreferLocal { dst: NidExpr, src: NidExpr },
    /// `dst` + `rte`: preferred gateways.
    PreferGateway { dst: NidExpr, rte: NidExpr },
}

/// The compiled rules, in index order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdspPolicy {
    rules: Vec<Rule>,
}

fn expr(index: usize, field: &'static str, text: &str) -> Result<NidExpr, UdspError> {
    NidExpr::parse(text).map_err(|source| UdspError::Expression {
        index,
        field,
        source,
    })
}

impl UdspPolicy {
    /// Compiles `rules` (in list order); the first bad rule is the error.
    pub fn new(rules: &[UdspRule]) -> Result<UdspPolicy, UdspError> {
        let mut out = Vec::with_capacity(rules.len());
        for (index, r) in rules.iter().enumerate() {
            let src = r
                .src
                .as_deref()
                .map(|t| expr(index, "src", t))
                .transpose()?;
            let dst = r
                .dst
                .as_deref()
                .map(|t| expr(index, "dst", t))
                .transpose()?;
            let rte = r
                .rte
                .as_deref()
                .map(|t| expr(index, "rte", t))
                .transpose()?;
            let priority = r.priority.unwrap_or(0);
            let rule = match (src, dst, rte) {
                (Some(src), None, None) => Rule::Src { src, priority },
                (None, Some(dst), None) => Rule::Dst { dst, priority },
                (Some(src), Some(dst), None) => {
                    if r.priority.is_some() {
                        return Err(UdspError::PriorityOnPreferred { index });
                    }
                    Rule::PreferLocal { dst, src }
                }
                (None, Some(dst), Some(rte)) => {
                    if r.priority.is_some() {
                        return Err(UdspError::PriorityOnPreferred { index });
                    }
                    Rule::PreferGateway { dst, rte }
                }
                (Some(_), _, Some(_)) => {
                    return Err(UdspError::Combination {
                        index,
                        reason: "src and rte cannot be combined",
                    })
                }
                (None, None, _) => {
                    return Err(UdspError::Combination {
                        index,
                        reason: "a rule needs src or dst",
                    })
                }
            };
            out.push(rule);
        }
        Ok(UdspPolicy { rules: out })
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The selection priority of local net `net` (`net_sel_priority`).
    pub fn local_net_priority(&self, net: Net) -> u32 {
        self.first(|r| match r {
            Rule::Src { src, priority } if src.is_net_rule() && src.matches_net(net) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The selection priority of local NI `nid` (`ni_sel_priority`).
    pub fn local_ni_priority(&self, nid: &Nid) -> u32 {
        self.first(|r| match r {
            Rule::Src { src, priority } if !src.is_net_rule() && src.matches_nid(nid) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The selection priority of peer net `net` (`lpn_sel_priority`).
    pub fn peer_net_priority(&self, net: Net) -> u32 {
        self.first(|r| match r {
            Rule::Dst { dst, priority } if dst.is_net_rule() && dst.matches_net(net) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The selection priority of peer NI `nid` (`lpni_sel_priority`).
    pub fn peer_ni_priority(&self, nid: &Nid) -> u32 {
        self.first(|r| match r {
            Rule::Dst { dst, priority } if !dst.is_net_rule() && dst.matches_nid(nid) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// Whether peer NI `peer_ni` prefers local NI `local` (a `src` + `dst` rule).
    pub fn prefers_local(&self, peer_ni: &Nid, local: &Nid) -> bool {
        self.rules.iter().any(|r| match r {
            Rule::PreferLocal { dst, src } => dst.matches_nid(peer_ni) && src.matches_nid(local),
            _ => false,
        })
    }

    /// Whether peer NI `peer_ni` prefers gateway `gateway` (a `dst` + `rte` rule).
    pub fn prefers_gateway(&self, peer_ni: &Nid, gateway: &Nid) -> bool {
        self.rules.iter().any(|r| match r {
            Rule::PreferGateway { dst, rte } => {
                dst.matches_nid(peer_ni) && rte.matches_nid(gateway)
            }
            _ => false,
        })
    }

    /// `udsp info` of local NI `nid`.
    pub fn local_ni_info(&self, nid: &Nid) -> UdspInfo {
        UdspInfo {
            net_priority: shown(self.local_net_priority(nid.net)),
            nid_priority: shown(self.local_ni_priority(nid)),
        }
    }

    /// `udsp info` of peer NI `nid`.
    pub fn peer_ni_info(&self, nid: &Nid) -> UdspInfo {
        UdspInfo {
            net_priority: shown(self.peer_net_priority(nid.net)),
            nid_priority: shown(self.peer_ni_priority(nid)),
        }
    }

    /// The priority of the first rule (lowest index) `f` answers for, else unset.
    fn first(&self, f: impl Fn(&Rule) -> Option<u32>) -> u32 {
        self.rules
            .iter()
            .find_map(f)
            .unwrap_or(LNET_MAX_SELECTION_PRIORITY)
    }
}

/// A priority as `udsp info` prints it: unset is -1.
fn shown(priority: u32) -> i32 {
    if priority == LNET_MAX_SELECTION_PRIORITY {
        -1
    } else {
        i32::try_from(priority).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(src: Option<&str>, dst: Option<&str>, rte: Option<&str>, p: Option<u32>) -> UdspRule {
        UdspRule {
            idx: None,
            src: src.map(str::to_owned),
            dst: dst.map(str::to_owned),
            rte: rte.map(str::to_owned),
            priority: p,
        }
    }

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    fn net(s: &str) -> Net {
        s.parse().unwrap()
    }

    const UNSET: u32 = LNET_MAX_SELECTION_PRIORITY;

    #[test]
    fn udsp_src_net_rule_sets_local_net_priority() {
        let p = UdspPolicy::new(&[rule(Some("o2ib1"), None, None, Some(1))]).unwrap();
        assert_eq!(p.local_net_priority(net("o2ib1")), 1);
        assert_eq!(p.local_net_priority(net("o2ib")), UNSET);
        // A net rule sets the net's priority, not its NIs'.
        assert_eq!(p.local_ni_priority(&nid("10.0.0.1@o2ib1")), UNSET);
        assert_eq!(p.peer_net_priority(net("o2ib1")), UNSET);
        let info = p.local_ni_info(&nid("10.0.0.1@o2ib1"));
        assert_eq!((info.net_priority, info.nid_priority), (1, -1));
    }

    #[test]
    fn udsp_src_nid_rule_sets_local_ni_priority_and_priority_defaults_to_0() {
        let p = UdspPolicy::new(&[rule(Some("10.0.0.[1-2]@tcp"), None, None, None)]).unwrap();
        assert_eq!(p.local_ni_priority(&nid("10.0.0.2@tcp")), 0);
        assert_eq!(p.local_ni_priority(&nid("10.0.0.3@tcp")), UNSET);
        assert_eq!(p.local_net_priority(net("tcp")), UNSET);
    }

    #[test]
    fn udsp_dst_rules_set_peer_net_and_peer_ni_priorities() {
        let p = UdspPolicy::new(&[
            rule(None, Some("tcp1"), None, Some(3)),
            rule(None, Some("10.1.0.7@tcp"), None, Some(2)),
        ])
        .unwrap();
        assert_eq!(p.peer_net_priority(net("tcp1")), 3);
        assert_eq!(p.peer_ni_priority(&nid("10.1.0.7@tcp")), 2);
        assert_eq!(p.peer_ni_priority(&nid("10.1.0.8@tcp")), UNSET);
        let info = p.peer_ni_info(&nid("10.1.0.7@tcp"));
        assert_eq!((info.net_priority, info.nid_priority), (-1, 2));
    }

    #[test]
    fn udsp_lower_index_wins_on_overlap() {
        let p = UdspPolicy::new(&[
            rule(Some("10.0.0.1@tcp"), None, None, Some(5)),
            rule(Some("10.0.0.*@tcp"), None, None, Some(9)),
        ])
        .unwrap();
        assert_eq!(p.local_ni_priority(&nid("10.0.0.1@tcp")), 5);
        assert_eq!(p.local_ni_priority(&nid("10.0.0.2@tcp")), 9);
    }

    #[test]
    fn udsp_src_dst_prefers_local_nis() {
        let p = UdspPolicy::new(&[rule(
            Some("10.0.0.2@tcp"),
            Some("10.0.1.[1-9]@tcp"),
            None,
            None,
        )])
        .unwrap();
        assert!(p.prefers_local(&nid("10.0.1.5@tcp"), &nid("10.0.0.2@tcp")));
        assert!(!p.prefers_local(&nid("10.0.1.5@tcp"), &nid("10.0.0.1@tcp")));
        assert!(!p.prefers_local(&nid("10.0.1.10@tcp"), &nid("10.0.0.2@tcp")));
        // Neither a priority of the local NI nor of the peer NI.
        assert_eq!(p.local_ni_priority(&nid("10.0.0.2@tcp")), UNSET);
        assert_eq!(p.peer_ni_priority(&nid("10.0.1.5@tcp")), UNSET);
    }

    #[test]
    fn udsp_dst_rte_prefers_gateways() {
        let p = UdspPolicy::new(&[rule(None, Some("o2ib"), Some("10.0.0.3@tcp"), None)]).unwrap();
        assert!(p.prefers_gateway(&nid("192.168.1.1@o2ib"), &nid("10.0.0.3@tcp")));
        assert!(!p.prefers_gateway(&nid("192.168.1.1@o2ib"), &nid("10.0.0.2@tcp")));
        assert!(!p.prefers_gateway(&nid("192.168.1.1@o2ib1"), &nid("10.0.0.3@tcp")));
    }

    #[test]
    fn udsp_src_rte_is_rejected() {
        assert_eq!(
            UdspPolicy::new(&[rule(Some("tcp"), None, Some("10.0.0.1@tcp"), None)]),
            Err(UdspError::Combination {
                index: 0,
                reason: "src and rte cannot be combined"
            })
        );
        assert!(matches!(
            UdspPolicy::new(&[rule(Some("tcp"), Some("tcp1"), Some("1.2.3.4@tcp"), None)]),
            Err(UdspError::Combination { index: 0, .. })
        ));
        assert!(matches!(
            UdspPolicy::new(&[rule(None, None, Some("1.2.3.4@tcp"), None)]),
            Err(UdspError::Combination { index: 0, .. })
        ));
        assert_eq!(
            UdspPolicy::new(&[
                rule(Some("tcp"), None, None, None),
                rule(None, Some("o2ib"), Some("1.2.3.4@tcp"), Some(1)),
            ]),
            Err(UdspError::PriorityOnPreferred { index: 1 })
        );
        let bad = UdspPolicy::new(&[
            rule(Some("tcp"), None, None, None),
            rule(None, Some("eth0"), None, None),
        ])
        .unwrap_err();
        assert!(bad.to_string().starts_with("udsp[1].dst: "), "{bad}");
    }
}
