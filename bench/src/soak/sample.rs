//! Watching the router process: its resident memory, open descriptors and threads from
//! `/proc/PID`, a few gauges and counters from its `/metrics`, and the least-squares
//! trend of a series.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde::Serialize;

/// What `/proc/PID` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ProcSample {
    /// `VmRSS` of `/proc/PID/status`, KiB.
    pub rss_kib: u64,
    /// Entries of `/proc/PID/fd`.
    pub fds: u64,
    /// Entries of `/proc/PID/task` (threads).
    pub threads: u64,
}

fn count_dir(path: &str) -> io::Result<u64> {
    let n = std::fs::read_dir(path)?.count();
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}

/// `VmRSS` in KiB from the text of `/proc/PID/status`.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Reads `/proc/PID`; an error when the process is gone.
pub fn read_proc(pid: u32) -> io::Result<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kib = parse_vm_rss(&status).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/status has no VmRSS"),
        )
    })?;
    Ok(ProcSample {
        rss_kib,
        fds: count_dir(&format!("/proc/{pid}/fd"))?,
        threads: count_dir(&format!("/proc/{pid}/task"))?,
    })
}

/// The router's own figures from `/metrics` (each absent if the series was not served).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct RouterMetrics {
    /// `lustre_allocated`: LNet messages allocated now.
    pub msgs_allocated: Option<f64>,
    /// `lnet_router_waiting_messages`: messages waiting for a router buffer or credit.
    pub waiting: Option<f64>,
    /// Series of `lnet_router_peer_ni_health`: the peer NIs the router knows.
    pub peer_nis: Option<u64>,
    /// `lustre_errors_total`.
    pub errors: Option<f64>,
    /// `lustre_drop_count_total`, summed over the NIs.
    pub drops: Option<f64>,
    /// `lnet_router_forward_drops_total`, summed over the reasons.
    pub forward_drops: Option<f64>,
}

/// `GET /metrics` over plain HTTP/1.0 from `addr`, each step within `bound`; the body.
pub fn scrape(addr: SocketAddr, bound: Duration) -> io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, bound)?;
    s.set_read_timeout(Some(bound))?;
    s.set_write_timeout(Some(bound))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: router\r\n\r\n")?;
    let mut text = String::new();
    // At most 64 MiB: a page far larger than 1,000 peers make.
    s.take(64 << 20).read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no HTTP head"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        let first = head.lines().next().unwrap_or_default();
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/metrics answered {first}"),
        ));
    }
    Ok(body.to_owned())
}

/// Each sample of the text format as (name, value); comments and bad lines are skipped.
fn samples(text: &str) -> impl Iterator<Item = (&str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let name = series.split('{').next()?.trim();
            Some((name, value.trim().parse::<f64>().ok()?))
        })
}

/// The sum of every series of family `name` (`None` if there is none).
fn sum(text: &str, name: &str) -> Option<f64> {
    samples(text)
        .filter(|(n, _)| *n == name)
        .fold(None, |acc, (_, v)| Some(acc.unwrap_or(0.0) + v))
}

/// Reads the router's figures from a `/metrics` page.
pub fn parse_metrics(text: &str) -> RouterMetrics {
    let peer_nis = samples(text)
        .filter(|(n, _)| *n == "lnet_router_peer_ni_health")
        .count();
    RouterMetrics {
        msgs_allocated: sum(text, "lustre_allocated"),
        waiting: sum(text, "lnet_router_waiting_messages"),
        peer_nis: Some(u64::try_from(peer_nis).unwrap_or(u64::MAX)),
        errors: sum(text, "lustre_errors_total"),
        drops: sum(text, "lustre_drop_count_total"),
        forward_drops: sum(text, "lnet_router_forward_drops_total"),
    }
}

/// A series over the soak: its first, last, smallest and largest values and its
/// least-squares slope per minute after the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Trend {
    /// The first sample after the warm-up.
    pub first: f64,
    /// The last sample.
    pub last: f64,
    /// The smallest after the warm-up.
    pub min: f64,
    /// The largest after the warm-up.
    pub max: f64,
    /// The least-squares slope per minute over the samples after the warm-up; `None`
    /// with fewer than two of them.
    pub slope_per_min: Option<f64>,
    /// The samples it was taken over.
    pub samples: usize,
}

/// The least-squares slope of `points` (seconds, value), per minute; `None` with fewer
/// than two distinct times.
pub fn slope_per_minute(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    #[allow(clippy::cast_precision_loss)] // a few thousand samples
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= f64::EPSILON {
        return None;
    }
    Some(sxy / sxx * 60.0)
}

/// The trend of `points` (seconds, value) from `warmup_s` on.
pub fn trend(points: &[(f64, f64)], warmup_s: f64) -> Trend {
    let after: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.0 >= warmup_s).collect();
    let first = after.first().map_or(0.0, |p| p.1);
    let last = after.last().map_or(0.0, |p| p.1);
    Trend {
        first,
        last,
        min: after.iter().map(|p| p.1).fold(first, f64::min),
        max: after.iter().map(|p| p.1).fold(first, f64::max),
        slope_per_min: slope_per_minute(&after),
        samples: after.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_from_status() {
        let s = "Name:\tlnet-router\nVmPeak:\t  200 kB\nVmRSS:\t   12345 kB\nThreads:\t5\n";
        assert_eq!(parse_vm_rss(s), Some(12_345));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let p = read_proc(std::process::id()).unwrap();
        assert!(p.rss_kib > 0 && p.fds > 0 && p.threads > 0);
    }

    #[test]
    fn metrics_families_are_summed_and_counted() {
        let text = "# HELP lustre_allocated x\n# TYPE lustre_allocated gauge\n\
                    lustre_allocated 3\n\
                    lustre_drop_count_total{nid=\"1.2.3.4@tcp\"} 2\n\
                    lustre_drop_count_total{nid=\"1.2.3.5@tcp1\"} 5\n\
                    lnet_router_peer_ni_health{nid=\"a\",primary_nid=\"a\"} 1000\n\
                    lnet_router_peer_ni_health{nid=\"b\",primary_nid=\"b\"} 1000\n\
                    lnet_router_forward_drops_total{reason=\"no_route\",status=\"\"} 0\n\
                    lustre_errors_total 0\n";
        let m = parse_metrics(text);
        assert_eq!(m.msgs_allocated, Some(3.0));
        assert_eq!(m.drops, Some(7.0));
        assert_eq!(m.peer_nis, Some(2));
        assert_eq!(m.forward_drops, Some(0.0));
        assert_eq!(m.errors, Some(0.0));
        assert_eq!(m.waiting, None);
    }

    #[test]
    fn slopes_are_per_minute_after_the_warmup() {
        // 10 per minute after 60 s, a jump before.
        let pts: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                let t = f64::from(i) * 10.0;
                (t, if t < 60.0 { 1000.0 } else { 100.0 + t / 6.0 })
            })
            .collect();
        let tr = trend(&pts, 60.0);
        assert_eq!(tr.samples, 14);
        assert!((tr.slope_per_min.unwrap() - 10.0).abs() < 1e-9);
        assert!((tr.first - 110.0).abs() < 1e-9);
        assert!((tr.max - tr.last).abs() < 1e-9);
        assert_eq!(slope_per_minute(&[(1.0, 2.0)]), None);
        let flat: Vec<(f64, f64)> = (0..5).map(|i| (f64::from(i), 7.0)).collect();
        assert_eq!(slope_per_minute(&flat), Some(0.0));
    }
}
