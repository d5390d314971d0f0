//! NUMA distances for local NI selection (reference 2.8.1 step 5; Multi-Rail snd-010).
//!
//! The facts come from Linux sysfs, read by the caller and passed in as text:
//! `/sys/devices/system/node/online` (a node list such as `0-1,3`),
//! `/sys/devices/system/node/nodeN/distance` (the distances from node N to nodes 0, 1, …)
//! and `/sys/class/net/IFACE/device/numa_node` (`-1` when the device has none).
//!
//! As in the kernel, a side whose node is unknown — an NI whose device has no NUMA node,
//! or a message whose memory has none (a forwarded message, which has no MD) — is at the
//! largest distance of the topology from everything, so that NUMA then decides nothing.

use std::collections::BTreeMap;

/// Most nodes read.
pub const MAX_NODES: usize = 1024;

/// Why a sysfs text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumaError {
    /// A number or range of a node list, or a distance, is malformed.
    #[error("bad {what} {text:?}")]
    Malformed {
        /// `node list`, `distance line` or `numa_node`.
        what: &'static str,
        /// The text.
        text: String,
    },
    /// More than [`MAX_NODES`] nodes.
    #[error("more than {max} NUMA nodes")]
    TooMany {
        /// The limit.
        max: usize,
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

/// Parses a node list (`/sys/devices/system/node/online`): `0`, `0-3`, `0-1,4`.
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
    let out: Vec<u32> = text
        .split_whitespace()
        .map(|d| number(WHAT, text, d))
        .collect::<Result<_, _>>()?;
    if out.is_empty() {
        return Err(malformed(WHAT, text));
    }
    if out.len() > MAX_NODES {
        return Err(NumaError::TooMany { max: MAX_NODES });
    }
    Ok(out)
}

/// Parses a device's `numa_node`: `None` for `-1` (no node).
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
    /// Node N's distances to nodes 0, 1, ….
    rows: BTreeMap<u32, Vec<u32>>,
}

impl NumaTopology {
    /// A topology from each online node and its distance line.
    pub fn new(rows: impl IntoIterator<Item = (u32, Vec<u32>)>) -> NumaTopology {
        NumaTopology {
            rows: rows.into_iter().collect(),
        }
    }

    /// The nodes known, in order.
    pub fn nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.rows.keys().copied()
    }

    /// The distance from node `from` to node `to`, if both are known.
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        let to = usize::try_from(to).ok()?;
        self.rows.get(&from)?.get(to).copied()
    }

    /// The largest distance between two known nodes (0 without nodes).
    pub fn max_distance(&self) -> u32 {
        self.rows
            .values()
            .flat_map(|r| r.iter().copied())
            .max()
            .unwrap_or(0)
    }

    /// The distance used to compare local NIs: from the node of the message's memory to
    /// the node of the NI's device; the largest distance when either is unknown.
    pub fn ni_distance(&self, memory: Option<u32>, ni: Option<u32>) -> u32 {
        match (memory, ni) {
            (Some(m), Some(n)) => self.distance(m, n).unwrap_or_else(|| self.max_distance()),
            _ => self.max_distance(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snd_010_sysfs_texts_parse() {
        assert_eq!(parse_node_list("0-1,3\n").unwrap(), vec![0, 1, 3]);
        assert_eq!(parse_node_list("0\n").unwrap(), vec![0]);
        assert_eq!(parse_distances("10 21\n").unwrap(), vec![10, 21]);
        assert_eq!(parse_numa_node("-1\n").unwrap(), None);
        assert_eq!(parse_numa_node("1\n").unwrap(), Some(1));
        assert!(matches!(
            parse_node_list("3-1"),
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
            parse_numa_node("-2"),
            Err(NumaError::Malformed { .. })
        ));
    }

    #[test]
    fn snd_020_distances_and_unknown_nodes_are_farthest() {
        let t = NumaTopology::new([(0, vec![10, 21]), (1, vec![21, 10])]);
        assert_eq!(t.ni_distance(Some(0), Some(0)), 10);
        assert_eq!(t.ni_distance(Some(0), Some(1)), 21);
        assert_eq!(t.ni_distance(None, Some(0)), 21);
        assert_eq!(t.ni_distance(Some(1), None), 21);
        assert_eq!(t.ni_distance(Some(7), Some(0)), 21);
        assert_eq!(NumaTopology::default().ni_distance(Some(0), Some(0)), 0);
    }

    #[test]
    fn snd_015_this_machines_sysfs_parses() {
        // Whatever this machine has: every online node's distance line parses, and each
        // row is as long as the node list says.
        let Ok(online) = std::fs::read_to_string("/sys/devices/system/node/online") else {
            return;
        };
        let nodes = parse_node_list(&online).unwrap();
        assert!(!nodes.is_empty());
        for n in &nodes {
            let line =
                std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/distance"))
                    .unwrap();
            let row = parse_distances(&line).unwrap();
            assert!(row.len() > usize::try_from(*nodes.iter().max().unwrap()).unwrap());
        }
    }
}
