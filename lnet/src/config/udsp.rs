//! `udsp:`: User Defined Selection Policy rules (reference 3, 4.7).

/// One rule. `src`, `dst` and `rte` are kept in the expression form lnetctl prints
/// (`o2ib1`, `10.0.0.[1-20]@o2ib1`). Printed as `udsp show` does, with the priority under
/// `action:`; read with the priority either there or at the item's top level (the form
/// `lnetctl import` documents).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UdspRule {
    /// `idx`: position in the rule list.
    pub idx: Option<u32>,
    /// `src`.
    pub src: Option<String>,
    /// `dst`.
    pub dst: Option<String>,
    /// `rte`.
    pub rte: Option<String>,
    /// The priority of a priority rule (0 is the highest).
    pub priority: Option<u32>,
}
