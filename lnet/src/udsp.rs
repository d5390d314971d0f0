//! User Defined Selection Policy (reference Part 3): the `udsp:` rules turned into the
//! selection priorities and preferred lists that path selection reads.
//!
//! What a rule does depends on which of `src`, `dst` and `rte` it has:
//!
//! | Given | Effect |
//! |---|---|
//! | `src` | priority (the rule's, or 0) of the matching local nets (net rule) or local NIs (NID rule) |
//! | `dst` | priority of the matching peer nets (net rule) or peer NIs (NID rule) |
//! | `src` + `dst` | each matching peer NI prefers the local NIs matching `src` |
//! | `dst` + `rte` | each matching peer NI prefers the gateways whose primary NID matches `rte` |
//!
//! Any other combination is refused ([`UdspError::Combination`]), as is a priority on a
//! preferred-list rule ([`UdspError::PriorityOnPreferred`]: lnetctl accepts it, and the
//! kernel then refuses to apply the rule).
//!
//! # How the kernel applies the list, and the design here
//!
//! The kernel (`lnet/lnet/udsp.c`) walks the list from its end to its start and lets each
//! rule write into the NIs, nets, peer nets and peer NIs it matches. So:
//!
//! * a priority ends up as the one of the matching rule with the lowest index;
//! * a preferred list is *replaced*, not extended, by each rule that adds at least one NID
//!   to it (the rule clears the peer NI's list before its first addition), so it ends up
//!   as the NIDs of the lowest-index rule that matches the peer NI and names at least one
//!   existing local NI (or gateway). A rule that names none leaves the list alone.
//!
//! [`UdspPolicy`] keeps the compiled rules and answers those questions on demand, for any
//! NID, with that precedence: the answer is the kernel's state right after (re)applying
//! the whole list to the current NIs, peers and routes. That needs no re-application when
//! a peer NI, NI or route appears. The kernel's state can differ in three history-bound
//! ways, which are not modelled:
//!
//! * deleting a rule only reverts what that rule matched (priorities back to unset, lists
//!   cleared) without re-applying the others;
//! * a local NI or a route added after a rule is not put on existing peer NIs' lists;
//! * a peer NI created after a preferred-list rule whose `dst` is a *net* expression gets
//!   no list (the per-peer-NI hook only matches NID expressions).
//!
//! Two kernel facts that are modelled:
//!
//! * In a preferred-list rule only NID expressions name local NIs and gateways: a net-only
//!   `src` or `rte` matches nothing (`cfs_match_nid_net` refuses an empty address list), so
//!   such a rule has no effect; [`UdspPolicy::notes`] points it out.
//! * Rules whose `src`, `dst` and `rte` are all equal to an earlier rule's are merged as
//!   `lnetctl import` merges them when it adds the list in order: a later priority replaces
//!   the earlier rule's priority (at the earlier rule's place); an identical rule is
//!   dropped. The `idx` field of a rule is not used: the list order is the order.

use std::fmt;

use crate::config::UdspRule;
use crate::nidexpr::{NidExpr, NidExprError};
use crate::selection::LNET_MAX_SELECTION_PRIORITY;
use crate::show::{UdspInfo, MAX_SHOWN_PREFERRED};
use crate::{Net, Nid};

/// Why a rule list was refused. `index` is the rule's position in the list given.
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
    /// The rule's fields do not make one of the four kinds of rule (`src` with `rte`, all
    /// three, or neither `src` nor `dst`).
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

/// Something worth telling about an accepted rule list: rules that can have no effect, or
/// that were merged into an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UdspNote {
    /// A `src` + `dst` rule whose `src` is a net expression: it names no local NI, so it
    /// has no effect (as in the kernel). Write the NIDs, e.g. `*.*.*.*@tcp`.
    NetOnlySource {
        /// The rule's position in the list.
        index: usize,
    },
    /// A `dst` + `rte` rule whose `rte` is a net expression: it names no gateway, so it has
    /// no effect (as in the kernel).
    NetOnlyRoute {
        /// The rule's position in the list.
        index: usize,
    },
    /// The rule has the same `src`, `dst` and `rte` as rule `of`: its priority replaced
    /// that rule's, or (same action) it was dropped.
    Merged {
        /// The rule's position in the list.
        index: usize,
        /// The earlier rule it was merged into.
        of: usize,
    },
}

impl fmt::Display for UdspNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UdspNote::NetOnlySource { index } => write!(
                f,
                "udsp[{index}].src: a net expression names no local NI in a src+dst rule; the rule has no effect"
            ),
            UdspNote::NetOnlyRoute { index } => write!(
                f,
                "udsp[{index}].rte: a net expression names no gateway; the rule has no effect"
            ),
            UdspNote::Merged { index, of } => write!(
                f,
                "udsp[{index}]: same src, dst and rte as udsp[{of}]; merged into it"
            ),
        }
    }
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

impl Rule {
    /// Whether both rules have the same `src`, `dst` and `rte` (the kernel's
    /// `lnet_udsp_equal`).
    fn same_descriptors(&self, other: &Rule) -> bool {
        match (self, other) {
            (Rule::Src { src: a, .. }, Rule::Src { src: b, .. })
            | (Rule::Dst { dst: a, .. }, Rule::Dst { dst: b, .. }) => a == b,
            (Rule::PreferLocal { dst: a, src: x }, Rule::PreferLocal { dst: b, src: y })
            | (Rule::PreferGateway { dst: a, rte: x }, Rule::PreferGateway { dst: b, rte: y }) => {
                a == b && x == y
            }
            _ => false,
        }
    }

    fn priority_mut(&mut self) -> Option<&mut u32> {
        match self {
            Rule::Src { priority, .. } | Rule::Dst { priority, .. } => Some(priority),
            _ => None,
        }
    }
}

/// A rule and its position in the list it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Compiled {
    index: usize,
    rule: Rule,
}

/// The compiled rules, in precedence order (lowest index first), answering the selection
/// questions for any NID. See the module documentation for the semantics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdspPolicy {
    rules: Vec<Compiled>,
    notes: Vec<UdspNote>,
    /// The rules as given, in list order (what `udsp show` prints).
    source: Vec<UdspRule>,
}

fn expr(index: usize, field: &'static str, text: &str) -> Result<NidExpr, UdspError> {
    NidExpr::parse(text).map_err(|source| UdspError::Expression {
        index,
        field,
        source,
    })
}

fn compile(index: usize, r: &UdspRule) -> Result<Rule, UdspError> {
    // The combination first: it does not depend on the expressions parsing.
    let combination = |reason| UdspError::Combination { index, reason };
    match (r.src.is_some(), r.dst.is_some(), r.rte.is_some()) {
        (true, true, true) => {
            return Err(combination(
                "the combination of src, dst and rte is not supported",
            ))
        }
        (true, false, true) => return Err(combination("src and rte cannot be combined")),
        (false, false, _) => return Err(combination("a rule needs src or dst")),
        _ => {}
    }
    let field =
        |name, text: &Option<String>| text.as_deref().map(|t| expr(index, name, t)).transpose();
    let src = field("src", &r.src)?;
    let dst = field("dst", &r.dst)?;
    let rte = field("rte", &r.rte)?;
    let priority = r.priority.unwrap_or(0);
    let preferred = |rule| {
        if r.priority.is_some() {
            Err(UdspError::PriorityOnPreferred { index })
        } else {
            Ok(rule)
        }
    };
    match (src, dst, rte) {
        (Some(src), None, None) => Ok(Rule::Src { src, priority }),
        (None, Some(dst), None) => Ok(Rule::Dst { dst, priority }),
        (Some(src), Some(dst), None) => preferred(Rule::PreferLocal { dst, src }),
        (None, Some(dst), Some(rte)) => preferred(Rule::PreferGateway { dst, rte }),
        _ => Err(combination("a rule needs src or dst")),
    }
}

/// Keeps the NIDs of `candidates` that `keep` accepts, once each, in order.
fn pick(candidates: &[Nid], keep: impl Fn(&Nid) -> bool) -> Vec<Nid> {
    let mut out: Vec<Nid> = Vec::new();
    for n in candidates {
        if keep(n) && !out.contains(n) {
            out.push(*n);
        }
    }
    out
}

impl UdspPolicy {
    /// Compiles `rules`, in list order. The first bad rule is the error; nothing is
    /// compiled then.
    pub fn new(rules: &[UdspRule]) -> Result<UdspPolicy, UdspError> {
        let mut out: Vec<Compiled> = Vec::with_capacity(rules.len());
        let mut notes = Vec::new();
        for (index, r) in rules.iter().enumerate() {
            let mut rule = compile(index, r)?;
            match &rule {
                Rule::PreferLocal { src, .. } if src.is_net_rule() => {
                    notes.push(UdspNote::NetOnlySource { index });
                }
                Rule::PreferGateway { rte, .. } if rte.is_net_rule() => {
                    notes.push(UdspNote::NetOnlyRoute { index });
                }
                _ => {}
            }
            if let Some(earlier) = out.iter_mut().find(|c| c.rule.same_descriptors(&rule)) {
                if let (Some(old), Some(new)) = (earlier.rule.priority_mut(), rule.priority_mut()) {
                    *old = *new;
                }
                notes.push(UdspNote::Merged {
                    index,
                    of: earlier.index,
                });
                continue;
            }
            out.push(Compiled { index, rule });
        }
        Ok(UdspPolicy {
            rules: out,
            notes,
            source: rules.to_vec(),
        })
    }

    /// The rules as they were given, in list order (merged rules included), as `lnetctl
    /// udsp show` lists them.
    pub fn source_rules(&self) -> &[UdspRule] {
        &self.source
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// How many rules are in force (merged rules count once).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Rules that can have no effect, and rules merged into earlier ones.
    pub fn notes(&self) -> &[UdspNote] {
        &self.notes
    }

    /// The selection priority of local net `net` (`net_sel_priority`): from the first
    /// `src` net rule naming it, else [`LNET_MAX_SELECTION_PRIORITY`].
    pub fn local_net_priority(&self, net: Net) -> u32 {
        self.first_priority(|r| match r {
            Rule::Src { src, priority } if src.is_net_rule() && src.matches_net(net) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The selection priority of local NI `nid` (`ni_sel_priority`): from the first `src`
    /// NID rule naming it, else [`LNET_MAX_SELECTION_PRIORITY`]. A net rule sets the net's
    /// priority, not its NIs'.
    pub fn local_ni_priority(&self, nid: &Nid) -> u32 {
        self.first_priority(|r| match r {
            Rule::Src { src, priority } if !src.is_net_rule() && src.matches_nid(nid) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The selection priority of peer net `net` (`lpn_sel_priority`): from the first `dst`
    /// net rule naming it, else [`LNET_MAX_SELECTION_PRIORITY`].
    pub fn peer_net_priority(&self, net: Net) -> u32 {
        self.first_priority(|r| match r {
            Rule::Dst { dst, priority } if dst.is_net_rule() && dst.matches_net(net) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The selection priority of peer NI `nid` (`lpni_sel_priority`): from the first `dst`
    /// NID rule naming it, else [`LNET_MAX_SELECTION_PRIORITY`].
    pub fn peer_ni_priority(&self, nid: &Nid) -> u32 {
        self.first_priority(|r| match r {
            Rule::Dst { dst, priority } if !dst.is_net_rule() && dst.matches_nid(nid) => {
                Some(*priority)
            }
            _ => None,
        })
    }

    /// The preferred local NIDs of peer NI `peer_ni` (its `src` + `dst` list), given all
    /// of this node's local NIDs: those named by the `src` of the first rule whose `dst`
    /// names the peer NI and whose `src` names at least one of `local_nids`. In the order
    /// of `local_nids`, without repeats; empty if no rule applies.
    pub fn preferred_local_nids(&self, peer_ni: &Nid, local_nids: &[Nid]) -> Vec<Nid> {
        self.rules
            .iter()
            .filter_map(|c| match &c.rule {
                Rule::PreferLocal { dst, src }
                    if !src.is_net_rule() && dst.matches_nid(peer_ni) =>
                {
                    Some(pick(local_nids, |l| src.matches_nid(l)))
                }
                _ => None,
            })
            .find(|list| !list.is_empty())
            .unwrap_or_default()
    }

    /// The preferred gateways of peer NI `peer_ni` (its `dst` + `rte` list), given the
    /// primary NIDs of the gateways of all known routes: those named by the `rte` of the
    /// first rule whose `dst` names the peer NI and whose `rte` names at least one of
    /// `gateways`. In the order of `gateways`, without repeats; empty if no rule applies.
    /// (The kernel keeps the list newest first; its order does not affect selection.)
    pub fn preferred_gateways(&self, peer_ni: &Nid, gateways: &[Nid]) -> Vec<Nid> {
        self.rules
            .iter()
            .filter_map(|c| match &c.rule {
                Rule::PreferGateway { dst, rte }
                    if !rte.is_net_rule() && dst.matches_nid(peer_ni) =>
                {
                    Some(pick(gateways, |g| rte.matches_nid(g)))
                }
                _ => None,
            })
            .find(|list| !list.is_empty())
            .unwrap_or_default()
    }

    /// Whether peer NI `peer_ni` prefers local NI `local`, decided by the first `src` +
    /// `dst` rule whose `dst` names the peer NI.
    ///
    /// This equals `preferred_local_nids(peer_ni, all_local_nids).contains(local)`
    /// whenever that rule's `src` names at least one of this node's NIs; when it names
    /// none, the kernel skips it for the next rule, which only
    /// [`preferred_local_nids`](Self::preferred_local_nids) can see.
    pub fn prefers_local(&self, peer_ni: &Nid, local: &Nid) -> bool {
        self.rules
            .iter()
            .find_map(|c| match &c.rule {
                Rule::PreferLocal { dst, src }
                    if !src.is_net_rule() && dst.matches_nid(peer_ni) =>
                {
                    Some(src.matches_nid(local))
                }
                _ => None,
            })
            .unwrap_or(false)
    }

    /// Whether peer NI `peer_ni` prefers the gateway whose primary NID is `gateway`,
    /// decided by the first `dst` + `rte` rule whose `dst` names the peer NI.
    ///
    /// This equals `preferred_gateways(peer_ni, all_gateways).contains(gateway)` whenever
    /// that rule's `rte` names at least one known gateway; otherwise use
    /// [`preferred_gateways`](Self::preferred_gateways).
    pub fn prefers_gateway(&self, peer_ni: &Nid, gateway: &Nid) -> bool {
        self.rules
            .iter()
            .find_map(|c| match &c.rule {
                Rule::PreferGateway { dst, rte }
                    if !rte.is_net_rule() && dst.matches_nid(peer_ni) =>
                {
                    Some(rte.matches_nid(gateway))
                }
                _ => None,
            })
            .unwrap_or(false)
    }

    /// `udsp info:` of local NI `nid`: its net's and its own priority (-1 if unset). A
    /// local NI shows no preferred lists: its net's preferred-router list is filled by no
    /// rule, and it has no source list.
    pub fn local_ni_info(&self, nid: &Nid) -> UdspInfo {
        UdspInfo {
            net_priority: shown_priority(self.local_net_priority(nid.net)),
            nid_priority: shown_priority(self.local_ni_priority(nid)),
            ..UdspInfo::default()
        }
    }

    /// `udsp info:` of peer NI `nid`, priorities only (-1 if unset); see
    /// [`peer_ni_info_with`](Self::peer_ni_info_with) for the preferred lists too.
    pub fn peer_ni_info(&self, nid: &Nid) -> UdspInfo {
        UdspInfo {
            net_priority: shown_priority(self.peer_net_priority(nid.net)),
            nid_priority: shown_priority(self.peer_ni_priority(nid)),
            ..UdspInfo::default()
        }
    }

    /// `udsp info:` of peer NI `nid` with its preferred lists, given this node's local
    /// NIDs and the primary NIDs of the known gateways (each list cut at
    /// [`MAX_SHOWN_PREFERRED`], as lnetctl shows it).
    pub fn peer_ni_info_with(&self, nid: &Nid, local_nids: &[Nid], gateways: &[Nid]) -> UdspInfo {
        let mut gw = self.preferred_gateways(nid, gateways);
        gw.truncate(MAX_SHOWN_PREFERRED);
        let mut src = self.preferred_local_nids(nid, local_nids);
        src.truncate(MAX_SHOWN_PREFERRED);
        UdspInfo {
            preferred_gateways: gw,
            preferred_sources: src,
            ..self.peer_ni_info(nid)
        }
    }

    /// The priority of the first rule (lowest index) `f` answers for, else unset.
    fn first_priority(&self, f: impl Fn(&Rule) -> Option<u32>) -> u32 {
        self.rules
            .iter()
            .find_map(|c| f(&c.rule))
            .unwrap_or(LNET_MAX_SELECTION_PRIORITY)
    }
}

/// A priority as `udsp info:` prints it: the `u32` read as `i32`, so unset (`u32::MAX`)
/// is -1 (lnetctl prints the value through a signed integer).
pub fn shown_priority(priority: u32) -> i32 {
    i32::from_ne_bytes(priority.to_ne_bytes())
}

#[cfg(test)]
mod tests;
