//! NUMA distances for the local NI choice (reference 2.8.1 step 5).
//!
//! The facts come from Linux sysfs; the caller reads the files and passes their text:
//!
//! * `/sys/devices/system/node/online`: the online nodes, as a list such as `0-1,3`
//!   ([`parse_node_list`]);
//! * `/sys/devices/system/node/nodeN/distance`: node N's distances, one per *online* node
//!   in ascending order (so with nodes `0,2` online the second number is node 2's)
//!   ([`parse_distances`]);
//! * `/sys/class/net/IFACE/device/numa_node`: the node of an interface's device, `-1` for
//!   none ([`parse_numa_node`]); for a VLAN interface read the real device's.
//!
//! # What the kernel does (lnet/lnet/lib-move.c, lib-cpt.c, lib-socket.c, lib-md.c)
//!
//! `lnet_get_best_ni` compares local NIs by `cfs_cpt_distance(md_cpt, ni_dev_cpt)`:
//!
//! * `ni_dev_cpt` starts as "any CPT" and the LND sets it from the node of the interface's
//!   device (`cfs_cpt_of_node(dev_to_node(dev))`); a device without a node (`-1`) maps to
//!   "any".
//! * `md_cpt` is the CPT of the node holding the message's first page. When there is none
//!   (a forwarded message has no MD) the send path uses the CPT of the CPU it runs on
//!   instead, so this side is never "any" in the kernel.
//! * `cfs_cpt_distance` answers the largest distance between two nodes of the CPT table
//!   when either side is "any", else the largest node distance between the two CPTs'
//!   nodes. With the default CPT layout (one CPT per node) that is the node distance.
//! * For non-GPU memory, distances below `lnet_numa_range` then count as equal (that part
//!   is done by [`crate::selection`]).
//!
//! [`ni_numa_distance`] follows this with nodes standing for CPTs: an unknown node on
//! either side gives [`NumaTopology::max_distance`]. A caller that does not know the
//! memory's node should pass the node of the CPU it runs on, as the kernel does; only if
//! that is unknown too should it pass `None`.

use std::collections::BTreeMap;

/// Most nodes read (the kernel's largest `MAX_NUMNODES`).
pub const MAX_NODES: usize = 1024;

/// Why a sysfs text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumaError {
    /// A number or range of a node list, a distance, or a `numa_node` is malformed.
    #[error("bad {what} {text:?}")]
    Malformed {
        /// `node list`, `distance line` or `numa_node`.
        what: &'static str,
        /// The text (its first 64 characters).
        text: String,
    },
    /// More than [`MAX_NODES`] nodes.
    #[error("more than {max} NUMA nodes")]
    TooMany {
        /// The limit.
        max: usize,
    },
    /// A node's distance line does not have one distance per online node.
    #[error("node{node}/distance has {found} distances, but {expected} nodes are online")]
    RowLength {
        /// The node.
        node: u32,
        /// Distances in its line.
        found: usize,
        /// Online nodes.
        expected: usize,
    },
    /// A distance line was given for a node that is not online.
    #[error("node{node} has a distance line but is not in the online list")]
    NotOnline {
        /// The node.
        node: u32,
    },
}

fn malformed(what: &'static str, text: &str) -> NumaError {
    NumaError::Malformed {
        what,
        text: text.chars().take(64).collect(),
    }
}

fn number(what: &'static str, text: &str, s: &str) -> Result<u32, NumaError> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(what, text));
    }
    s.parse().map_err(|_| malformed(what, text))
}

/// Parses a node list (`/sys/devices/system/node/online`, also a `cpulist`): `0`, `0-3`,
/// `0-1,4`; empty text is no node. At most [`MAX_NODES`] entries.
pub fn parse_node_list(text: &str) -> Result<Vec<u32>, NumaError> {
    const WHAT: &str = "node list";
    let t = text.trim();
    let mut nodes = Vec::new();
    if t.is_empty() {
        return Ok(nodes);
    }
    for item in t.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (number(WHAT, text, a)?, number(WHAT, text, b)?),
            None => {
                let v = number(WHAT, text, item)?;
                (v, v)
            }
        };
        if lo > hi {
            return Err(malformed(WHAT, text));
        }
        let count = usize::try_from(hi - lo)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        if nodes.len().saturating_add(count) > MAX_NODES {
            return Err(NumaError::TooMany { max: MAX_NODES });
        }
        nodes.extend(lo..=hi);
    }
    Ok(nodes)
}

/// Parses a distance line (`/sys/devices/system/node/nodeN/distance`): `10 21`.
pub fn parse_distances(text: &str) -> Result<Vec<u32>, NumaError> {
    const WHAT: &str = "distance line";
    let mut out = Vec::new();
    for d in text.split_whitespace() {
        if out.len() == MAX_NODES {
            return Err(NumaError::TooMany { max: MAX_NODES });
        }
        out.push(number(WHAT, text, d)?);
    }
    if out.is_empty() {
        return Err(malformed(WHAT, text));
    }
    Ok(out)
}

/// Parses a device's `numa_node`: `None` for `-1` (the device has no node).
pub fn parse_numa_node(text: &str) -> Result<Option<u32>, NumaError> {
    let t = text.trim();
    if t == "-1" {
        return Ok(None);
    }
    number("numa_node", text, t).map(Some)
}

/// The distance table of the machine's NUMA nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaTopology {
    /// Which node each position of a distance line is: the online nodes, ascending.
    columns: Vec<u32>,
    /// Node N's distance line.
    rows: BTreeMap<u32, Vec<u32>>,
    /// The largest distance between two nodes of `rows`.
    max: u32,
}

impl NumaTopology {
    /// A topology from each node and its parsed distance line, the lines' positions being
    /// the given nodes in ascending order (right when a line is given for every online
    /// node). Positions beyond them are ignored; missing ones are unknown distances.
    pub fn new(rows: impl IntoIterator<Item = (u32, Vec<u32>)>) -> NumaTopology {
        let rows: BTreeMap<u32, Vec<u32>> = rows.into_iter().collect();
        NumaTopology::build(rows.keys().copied().collect(), rows)
    }

    fn build(columns: Vec<u32>, rows: BTreeMap<u32, Vec<u32>>) -> NumaTopology {
        let mut t = NumaTopology {
            columns,
            rows,
            max: 0,
        };
        t.max = t
            .rows
            .keys()
            .flat_map(|a| t.rows.keys().map(move |b| (*a, *b)))
            .filter_map(|(a, b)| t.known_distance(a, b))
            .max()
            .unwrap_or(0);
        t
    }

    /// A topology from `(node, text of nodeN/distance)` pairs, one per online node (the
    /// lines' positions are these nodes in ascending order).
    pub fn from_distance_lines<'a>(
        rows: impl IntoIterator<Item = (u32, &'a str)>,
    ) -> Result<NumaTopology, NumaError> {
        let mut parsed = BTreeMap::new();
        for (node, line) in rows {
            if parsed.len() == MAX_NODES {
                return Err(NumaError::TooMany { max: MAX_NODES });
            }
            parsed.insert(node, parse_distances(line)?);
        }
        let expected = parsed.len();
        if let Some((node, row)) = parsed.iter().find(|(_, r)| r.len() != expected) {
            return Err(NumaError::RowLength {
                node: *node,
                found: row.len(),
                expected,
            });
        }
        Ok(NumaTopology::new(parsed))
    }

    /// A topology from the text of `node/online` and `(node, text of nodeN/distance)`
    /// pairs for the nodes to consider. Each line must have one distance per online node.
    /// To match the kernel's CPT table exactly, give lines only for the nodes that have
    /// CPUs (`node/has_cpu`): [`max_distance`](Self::max_distance) is taken over them.
    pub fn from_sysfs<'a>(
        online: &str,
        rows: impl IntoIterator<Item = (u32, &'a str)>,
    ) -> Result<NumaTopology, NumaError> {
        let mut columns = parse_node_list(online)?;
        columns.sort_unstable();
        columns.dedup();
        let mut parsed = BTreeMap::new();
        for (node, line) in rows {
            if !columns.contains(&node) {
                return Err(NumaError::NotOnline { node });
            }
            let row = parse_distances(line)?;
            if row.len() != columns.len() {
                return Err(NumaError::RowLength {
                    node,
                    found: row.len(),
                    expected: columns.len(),
                });
            }
            parsed.insert(node, row);
        }
        Ok(NumaTopology::build(columns, parsed))
    }

    /// The nodes with a distance line, ascending.
    pub fn nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.rows.keys().copied()
    }

    /// The distance from node `from` to node `to`, if both are known.
    pub fn known_distance(&self, from: u32, to: u32) -> Option<u32> {
        let col = self.columns.binary_search(&to).ok()?;
        self.rows.get(&from)?.get(col).copied()
    }

    /// The distance from node `from` to node `to`; [`max_distance`](Self::max_distance)
    /// if either is unknown (as the kernel answers for "any CPT").
    pub fn distance(&self, from: u32, to: u32) -> u32 {
        self.known_distance(from, to)
            .unwrap_or_else(|| self.max_distance())
    }

    /// The largest distance between two nodes with a distance line (the kernel's
    /// `ctb_distance`); 0 without nodes.
    pub fn max_distance(&self) -> u32 {
        self.max
    }

    /// [`ni_numa_distance`] on this topology.
    pub fn ni_distance(&self, memory: Option<u32>, ni: Option<u32>) -> u32 {
        ni_numa_distance(self, memory, ni)
    }
}

/// The NUMA distance used to compare local NIs (before `numa_range` evens out the short
/// ones): from node `from_node` (the message memory's node, or else the sending CPU's) to
/// node `ni_node` (the NI device's). When either is `None`, or not in `topology`, it is
/// the topology's largest distance, as `cfs_cpt_distance` answers for "any CPT"; so an NI
/// whose device has no node ties with the farthest NI and is never preferred for
/// nearness.
pub fn ni_numa_distance(
    topology: &NumaTopology,
    from_node: Option<u32>,
    ni_node: Option<u32>,
) -> u32 {
    match (from_node, ni_node) {
        (Some(m), Some(n)) => topology.distance(m, n),
        _ => topology.max_distance(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snd_010_sysfs_texts_parse() {
        assert_eq!(parse_node_list("0-1,3\n").unwrap(), vec![0, 1, 3]);
        assert_eq!(parse_node_list("0\n").unwrap(), vec![0]);
        assert_eq!(parse_node_list("\n").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_distances("10 21\n").unwrap(), vec![10, 21]);
        assert_eq!(parse_numa_node("-1\n").unwrap(), None);
        assert_eq!(parse_numa_node("1\n").unwrap(), Some(1));
        assert!(matches!(
            parse_node_list("3-1"),
            Err(NumaError::Malformed { .. })
        ));
        assert!(matches!(
            parse_node_list("0,,1"),
            Err(NumaError::Malformed { .. })
        ));
        assert!(matches!(
            parse_node_list("0-99999"),
            Err(NumaError::TooMany { .. })
        ));
        assert!(matches!(
            parse_distances(""),
            Err(NumaError::Malformed { .. })
        ));
        assert!(matches!(
            parse_distances("10 x"),
            Err(NumaError::Malformed { .. })
        ));
        assert!(matches!(
            parse_distances(&"10 ".repeat(2000)),
            Err(NumaError::TooMany { .. })
        ));
        assert!(matches!(
            parse_numa_node("-2"),
            Err(NumaError::Malformed { .. })
        ));
        assert!(matches!(
            parse_numa_node("99999999999"),
            Err(NumaError::Malformed { .. })
        ));
    }

    #[test]
    fn snd_020_distances_and_unknown_nodes_are_farthest() {
        let t = NumaTopology::from_distance_lines([(0, "10 21\n"), (1, "21 10\n")]).unwrap();
        assert_eq!(t, NumaTopology::new([(0, vec![10, 21]), (1, vec![21, 10])]));
        assert_eq!(t.distance(0, 1), 21);
        assert_eq!(t.distance(1, 1), 10);
        assert_eq!(t.max_distance(), 21);
        assert_eq!(ni_numa_distance(&t, Some(0), Some(0)), 10);
        assert_eq!(ni_numa_distance(&t, Some(0), Some(1)), 21);
        // A device without a node, or an unknown memory node: "any CPT", the largest.
        assert_eq!(ni_numa_distance(&t, Some(1), None), 21);
        assert_eq!(ni_numa_distance(&t, None, Some(0)), 21);
        assert_eq!(ni_numa_distance(&t, Some(7), Some(0)), 21);
        assert_eq!(t.ni_distance(Some(1), Some(1)), 10);
        // No NUMA facts at all: every NI at distance 0, so NUMA decides nothing.
        assert_eq!(
            ni_numa_distance(&NumaTopology::default(), Some(0), Some(0)),
            0
        );
    }

    #[test]
    fn snd_021_distance_lines_are_by_online_node_not_by_node_number() {
        // Nodes 0 and 2 online: node0/distance's second number is node 2's.
        let t = NumaTopology::from_sysfs("0,2\n", [(0, "10 20"), (2, "20 10")]).unwrap();
        assert_eq!(t.distance(0, 2), 20);
        assert_eq!(t.known_distance(0, 1), None);
        assert_eq!(t.nodes().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(
            NumaTopology::from_distance_lines([(0, "10 20"), (2, "20 10")]).unwrap(),
            t
        );
        // Only the nodes with a line count for the largest distance (a memory-only node
        // is online but not in the kernel's CPT table).
        let t = NumaTopology::from_sysfs("0-2", [(0, "10 21 60"), (1, "21 10 60")]).unwrap();
        assert_eq!(t.max_distance(), 21);
        assert_eq!(t.distance(0, 2), 60);
    }

    #[test]
    fn snd_022_inconsistent_sysfs_is_refused() {
        assert_eq!(
            NumaTopology::from_sysfs("0-1", [(0, "10 21"), (1, "21")]),
            Err(NumaError::RowLength {
                node: 1,
                found: 1,
                expected: 2
            })
        );
        assert_eq!(
            NumaTopology::from_sysfs("0", [(3, "10")]),
            Err(NumaError::NotOnline { node: 3 })
        );
        assert!(matches!(
            NumaTopology::from_distance_lines([(0, "10 21"), (1, "21 10 30")]),
            Err(NumaError::RowLength { node: 1, .. })
        ));
        assert!(matches!(
            NumaTopology::from_distance_lines([(0, "10 abc")]),
            Err(NumaError::Malformed { .. })
        ));
    }

    #[test]
    fn snd_015_this_machines_sysfs_parses() {
        // Whatever this machine has: the online list and every online node's distance
        // line make a topology in which each node is nearest to itself.
        let Ok(online) = std::fs::read_to_string("/sys/devices/system/node/online") else {
            return;
        };
        let nodes = parse_node_list(&online).unwrap();
        assert!(!nodes.is_empty());
        let lines: Vec<(u32, String)> = nodes
            .iter()
            .map(|n| {
                let path = format!("/sys/devices/system/node/node{n}/distance");
                (*n, std::fs::read_to_string(path).unwrap())
            })
            .collect();
        let t =
            NumaTopology::from_sysfs(&online, lines.iter().map(|(n, l)| (*n, l.as_str()))).unwrap();
        for a in &nodes {
            for b in &nodes {
                assert!(t.distance(*a, *a) <= t.distance(*a, *b));
            }
        }
    }
}
