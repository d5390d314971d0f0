//! The machine's NUMA facts from sysfs, for the local NI choice: the distance table, the
//! node this process runs on, and the node of each NI's network device.
//!
//! Anything missing or unreadable (a machine without NUMA, a virtual interface) leaves the
//! fact unknown, which makes NUMA decide nothing, as in the kernel.

use std::path::Path;

use lnet::numa::{parse_distances, parse_node_list, parse_numa_node, NumaTopology};

const NODES: &str = "/sys/devices/system/node";

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The distance table of the online nodes.
pub fn topology() -> NumaTopology {
    let Some(online) = read(format!("{NODES}/online")) else {
        return NumaTopology::default();
    };
    let nodes = match parse_node_list(&online) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(%e, "NUMA: online nodes unreadable; NUMA left out of selection");
            return NumaTopology::default();
        }
    };
    NumaTopology::new(nodes.into_iter().filter_map(|n| {
        let line = read(format!("{NODES}/node{n}/distance"))?;
        parse_distances(&line).ok().map(|row| (n, row))
    }))
}

/// The node whose CPUs include every CPU this process may run on, if there is one (the
/// process was bound to a node, e.g. with `numactl --cpunodebind` or systemd's
/// `NUMAPolicy`/`CPUAffinity`).
pub fn process_node(topology: &NumaTopology) -> Option<u32> {
    let status = read("/proc/self/status")?;
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    let allowed = parse_node_list(allowed).ok()?;
    topology.nodes().find(|n| {
        read(format!("{NODES}/node{n}/cpulist"))
            .and_then(|l| parse_node_list(&l).ok())
            .is_some_and(|cpus| allowed.iter().all(|c| cpus.contains(c)))
    })
}

/// The node of network interface `name`'s device; `None` for a device without one
/// (loopback, virtual interfaces) or a machine without NUMA.
pub fn interface_node(name: &str) -> Option<u32> {
    read(format!("/sys/class/net/{name}/device/numa_node"))
        .and_then(|t| parse_numa_node(&t).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snd_010_this_machines_numa_facts_are_read() {
        let t = topology();
        let online = read(format!("{NODES}/online"));
        assert_eq!(t.nodes().next().is_some(), online.is_some());
        if online.is_some() {
            // The process may run anywhere: a one-node machine has it on node 0.
            if t.nodes().count() == 1 {
                assert_eq!(process_node(&t), t.nodes().next());
            }
        }
        // Loopback has no device.
        assert_eq!(interface_node("lo"), None);
    }
}
