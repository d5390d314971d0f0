//! The `process_*` series every Prometheus client library exports, read from `/proc/self`:
//! resident and virtual memory, open and allowed file descriptors, CPU seconds and the start
//! time. They stand in for the memory figure the kernel's LNet keeps (`lnet_memused`).
//!
//! Times in `/proc/self/stat` are in clock ticks of `USER_HZ`, which Linux fixes at 100
//! for user space on every architecture this runs on (the Prometheus client libraries
//! assume the same).

use super::exposition::{Exposition, Family};

/// Clock ticks per second in `/proc` (`USER_HZ`).
const USER_HZ: f64 = 100.0;

/// What `/proc/self/stat` says of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stat {
    /// User and system CPU time, in ticks.
    pub(crate) cpu_ticks: u64,
    /// Start time after boot, in ticks.
    pub(crate) start_ticks: u64,
    /// Virtual memory size in bytes.
    pub(crate) vsize: u64,
}

/// Reads `/proc/PID/stat` (`None` when it does not read as one).
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may hold spaces or parentheses itself:
    // the fields that follow start after the last `)`, with field 3 (state).
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n.checked_sub(3)?)?.parse().ok() };
    Some(Stat {
        cpu_ticks: field(14)?.saturating_add(field(15)?),
        start_ticks: field(22)?,
        vsize: field(23)?,
    })
}

/// The boot time (`btime`, seconds since the epoch) in `/proc/stat`.
pub(crate) fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The resident set size in bytes (`VmRSS:` of `/proc/PID/status`, in kB).
pub(crate) fn parse_rss(text: &str) -> Option<u64> {
    let v = text.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kb: u64 = v.split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The soft limit of open files (`Max open files` of `/proc/PID/limits`; `None` when
/// unlimited).
pub(crate) fn parse_max_fds(text: &str) -> Option<u64> {
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    v.split_whitespace().next()?.parse().ok()
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Writes the `process_*` series of this process; a file of `/proc` that cannot be read
/// leaves its series out.
pub(crate) fn write(x: &mut Exposition) {
    if let Some(stat) = read("/proc/self/stat").as_deref().and_then(parse_stat) {
        #[allow(clippy::cast_precision_loss)] // ticks: far below 2^52
        let cpu = stat.cpu_ticks as f64 / USER_HZ;
        x.family(
            Family::counter(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            )
            .with(vec![], cpu),
        );
        x.family(
            Family::gauge(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
            )
            .with(vec![], stat.vsize),
        );
        if let Some(btime) = read("/proc/stat").as_deref().and_then(parse_btime) {
            #[allow(clippy::cast_precision_loss)] // seconds and ticks: far below 2^52
            let start = btime as f64 + stat.start_ticks as f64 / USER_HZ;
            x.family(
                Family::gauge(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                )
                .with(vec![], start),
            );
        }
    }
    if let Some(rss) = read("/proc/self/status").as_deref().and_then(parse_rss) {
        x.family(
            Family::gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
            )
            .with(vec![], rss),
        );
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        x.family(
            Family::gauge("process_open_fds", "Number of open file descriptors.")
                .with(vec![], dir.count()),
        );
    }
    if let Some(max) = read("/proc/self/limits").as_deref().and_then(parse_max_fds) {
        x.family(
            Family::gauge(
                "process_max_fds",
                "Maximum number of open file descriptors.",
            )
            .with(vec![], max),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_and_bad_ones_refused() {
        let stat = "4242 (lnet (router) x) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    150 50 0 0 20 0 3 0 123456 104857600 2560 18446744073709551615";
        assert_eq!(
            parse_stat(stat),
            Some(Stat {
                cpu_ticks: 200,
                start_ticks: 123_456,
                vsize: 104_857_600
            })
        );
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
        assert_eq!(parse_stat(""), None);
        assert_eq!(
            parse_btime("cpu  1 2 3\nbtime 1764057600\nprocesses 9\n"),
            Some(1_764_057_600)
        );
        assert_eq!(parse_btime("cpu 1\n"), None);
        assert_eq!(
            parse_rss("Name:\tlnet-router\nVmRSS:\t   20480 kB\n"),
            Some(20 * 1024 * 1024)
        );
        assert_eq!(parse_rss("VmRSS: lots\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        assert_eq!(
            parse_max_fds("Max open files            unlimited  unlimited  files\n"),
            None
        );
    }

    #[test]
    fn this_process_has_its_series() {
        let mut x = Exposition::default();
        write(&mut x);
        let text = x.finish();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
            "process_virtual_memory_bytes ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} in {text}"
            );
        }
    }
}
