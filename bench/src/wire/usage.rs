//! Where the machine's CPUs go during a phase: the CPU time of the end nodes' own threads
//! (`/proc/self/task/TID/stat`) and how many of the machine's CPUs were busy
//! (`/proc/stat`). On a machine whose cores the end nodes share with the relay or the
//! router, these say how much of the machine the load generator itself took.

use super::child::{stat_cpu_time, CpuTime};
use crate::BenchError;

/// The calling thread's id, from the `/proc/thread-self` link (`PID/task/TID`).
pub fn current_tid() -> Result<u32, BenchError> {
    let link = std::fs::read_link("/proc/thread-self").map_err(|source| BenchError::Io {
        what: "read /proc/thread-self".into(),
        source,
    })?;
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| BenchError::Setup(format!("cannot parse /proc/thread-self: {link:?}")))
}

/// CPU time of thread `tid` of this process so far.
pub fn thread_cpu(tid: u32) -> Result<CpuTime, BenchError> {
    stat_cpu_time(&format!("/proc/self/task/{tid}/stat"))
}

/// The machine's CPU time so far, all CPUs together, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MachineTicks {
    /// Not idle: user, nice, system, irq, softirq and steal.
    pub busy: u64,
    /// Busy, idle and iowait.
    pub total: u64,
    /// The CPUs counted (the `cpuN` lines).
    pub cpus: usize,
}

impl MachineTicks {
    /// How many CPUs were busy on average from `earlier` to `self`.
    pub fn busy_cpus_since(self, earlier: MachineTicks) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total).filter(|t| *t > 0)?;
        let busy = self.busy.checked_sub(earlier.busy)?;
        Some(busy as f64 / total as f64 * self.cpus as f64)
    }
}

/// The first line of `/proc/stat` (`cpu  user nice system idle iowait irq softirq steal
/// ...`; guest time is already counted in user), and the number of `cpuN` lines after it.
pub fn parse_proc_stat(text: &str) -> Option<MachineTicks> {
    let mut lines = text.lines();
    let line = lines.next()?;
    let cpus = lines
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v.try_into().ok()?;
    let busy = user + nice + system + irq + softirq + steal;
    Some(MachineTicks {
        busy,
        total: busy + idle + iowait,
        cpus: cpus.max(1),
    })
}

/// The machine's CPU time so far.
pub fn machine_ticks() -> Result<MachineTicks, BenchError> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|source| BenchError::Io {
        what: "read /proc/stat".into(),
        source,
    })?;
    parse_proc_stat(&text).ok_or_else(|| BenchError::Setup("cannot parse /proc/stat".into()))
}
