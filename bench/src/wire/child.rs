//! The processes `lnet-bench wire` measures (the router, the relay): started with their
//! output to a log file, pinned to CPUs, their CPU time and their threads' scheduling
//! policies read from /proc, killed when dropped (also on error).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::sys::{clock_ticks, set_affinity};
use crate::BenchError;

/// A child process, killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Process {
    child: Child,
    what: String,
}

impl Process {
    /// Starts `command`, standard error to `log`.
    pub fn start(mut command: Command, what: &str, log: &Path) -> Result<Process, BenchError> {
        let err = std::fs::File::create(log).map_err(|source| BenchError::Io {
            what: format!("create {}", log.display()),
            source,
        })?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|source| BenchError::Io {
                what: format!("start {what}"),
                source,
            })?;
        Ok(Process {
            child,
            what: what.to_string(),
        })
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails if it has exited.
    pub fn check_alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(BenchError::Setup(format!("{} exited: {status}", self.what))),
            Err(source) => Err(BenchError::Io {
                what: format!("wait for {}", self.what),
                source,
            }),
        }
    }

    /// Pins every thread of the process to `cpus` (threads it creates later inherit it).
    pub fn pin(&self, cpus: &[usize]) -> Result<(), BenchError> {
        let dir = format!("/proc/{}/task", self.pid());
        let tasks = std::fs::read_dir(&dir).map_err(|source| BenchError::Io {
            what: format!("list {dir}"),
            source,
        })?;
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            // A thread may end between the listing and the call.
            if let Err(e) = set_affinity(tid, cpus) {
                tracing::debug!(tid, "sched_setaffinity: {e}");
            }
        }
        Ok(())
    }

    /// CPU time of the whole process so far, seconds.
    pub fn cpu_seconds(&self) -> Result<CpuTime, BenchError> {
        stat_cpu_time(&format!("/proc/{}/stat", self.pid()))
    }
}

/// How many threads of process `pid` run under each scheduling policy ([`policy_name`]),
/// as each thread's /proc stat says now.
pub fn thread_policies(pid: u32) -> Result<BTreeMap<String, usize>, BenchError> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(|source| BenchError::Io {
        what: format!("list {dir}"),
        source,
    })?;
    let mut counts = BTreeMap::new();
    for t in tasks.flatten() {
        // A thread may end between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let name = stat_policy(&stat).map_or("unknown", policy_name);
        *counts.entry(name.to_string()).or_default() += 1;
    }
    Ok(counts)
}

/// The scheduling policy (field 41) of a /proc/PID/stat line.
pub fn stat_policy(stat: &str) -> Option<i32> {
    stat_fields(stat)?.nth(41 - 3)?.parse().ok()
}

/// The fields of a /proc/PID/stat line from field 3 (state) on. The command name (field
/// 2) is in parentheses and may hold spaces: they are counted from the last ')'.
fn stat_fields(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat.get(stat.rfind(')')? + 1..)?.split_whitespace())
}

/// The name `chrt` gives scheduling policy `policy` (`SCHED_OTHER` is "other").
pub fn policy_name(policy: i32) -> &'static str {
    match policy {
        libc::SCHED_OTHER => "other",
        libc::SCHED_FIFO => "fifo",
        libc::SCHED_RR => "rr",
        libc::SCHED_BATCH => "batch",
        libc::SCHED_IDLE => "idle",
        libc::SCHED_DEADLINE => "deadline",
        _ => "unknown",
    }
}

/// The CPU time in a /proc `stat` file (of a process, or of a thread under `task/`).
pub fn stat_cpu_time(path: &str) -> Result<CpuTime, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        what: format!("read {path}"),
        source,
    })?;
    let (user, kernel) =
        stat_cpu_ticks(&text).ok_or_else(|| BenchError::Setup(format!("cannot parse {path}")))?;
    let seconds = |ticks: u64| ticks as f64 / clock_ticks() as f64;
    Ok(CpuTime {
        user: seconds(user),
        kernel: seconds(kernel),
    })
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time of a process, seconds: in user space and in the kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTime {
    /// utime.
    pub user: f64,
    /// stime: system calls, and the network stack's work done on their behalf.
    pub kernel: f64,
}

impl CpuTime {
    /// Both together.
    pub fn total(self) -> f64 {
        self.user + self.kernel
    }

    /// The time from `earlier` to `self`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user - earlier.user,
            kernel: self.kernel - earlier.kernel,
        }
    }
}

/// utime and stime (fields 14 and 15) of a /proc/PID/stat line, in clock ticks.
pub fn stat_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let mut fields = stat_fields(stat)?.skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime, stime))
}
