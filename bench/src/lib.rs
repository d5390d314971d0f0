//! Benchmarks of lnet-router (not tests: nothing here asserts a time).
//!
//! * [`selftest`]: `lnet-bench selftest`, after `lnet_selftest`'s `lst`: groups of source
//!   and target end nodes on loopback addresses, optionally through a router node, running
//!   `ping` or `brw read|write size=N` with a concurrency for a bounded time, printing
//!   RPC/s and MiB/s per interval and a JSON result.
//! * [`compare`]: `lnet-bench compare`: end node to end node directly, through a plain TCP
//!   relay ([`relay`]) and through a routing node, in the same run with alternating
//!   repeats: bulk 1 MiB PUTs, the 0-byte PUT+ACK rate and single round-trip latency, with
//!   the router/relay and router/direct ratios.
//! * [`failover`]: `lnet-bench failover`: two routers between two end nodes; the time from
//!   a failure (a gateway NI's link down, a router process killed, a silent far net) to the
//!   first PUT that arrives through the other router, and back after the repair, with the
//!   PUTs that failed and the duplicates delivered.
//! * [`soak`]: `lnet-bench soak`: one `lnet-router run` process, many end nodes on two
//!   nets with mixed PUTs, GETs, pings and discovery for minutes; the router's RSS,
//!   descriptors and threads sampled, their slopes, and how every transaction ended.
//! * [`chaos`]: `lnet-bench chaos`: three `lnet-router run` processes between two end
//!   nodes under a seeded schedule of kills, link flaps, fault rules, health resets and
//!   route changes through the API; at the end, every transaction ended, no duplicate, no
//!   corrupt payload, every router's state the one its API acknowledged, no panic.
//! * [`fastpath`]: the per-message work of forwarding (deframe and decode, route decision,
//!   router buffer, encode) as a plain loop, for an instruction count under callgrind.
//!
//! [`topo`] builds the nodes (each host a thread of its own) and [`load`] drives them.

pub mod chaos;
pub mod compare;
pub mod failover;
pub mod fastpath;
pub mod load;
pub mod relay;
pub mod selftest;
pub mod soak;
pub mod topo;
pub mod wire;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// Setting up a topology failed.
    #[error("setup: {0}")]
    Setup(String),
    /// A node refused something.
    #[error("{what}: {source}")]
    Node {
        /// What was asked.
        what: String,
        /// Why it was refused.
        #[source]
        source: actors::NodeError,
    },
    /// Something did not happen within its bound.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Reading or writing a file, or running a process.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The JSON report could not be written.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// A run that measured what it should not have (a soak's hung transaction, an error,
    /// a router that died).
    #[error("check failed: {0}")]
    Check(String),
}

/// Writes `value` as pretty JSON to `path` ("-": standard output), creating the parent
/// directory.
pub fn write_json<T: serde::Serialize>(path: &str, value: &T) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(value)?;
    if path == "-" {
        println!("{text}");
        return Ok(());
    }
    let p = std::path::Path::new(path);
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
            what: format!("create {}", dir.display()),
            source,
        })?;
    }
    std::fs::write(p, text + "\n").map_err(|source| BenchError::Io {
        what: format!("write {path}"),
        source,
    })
}
