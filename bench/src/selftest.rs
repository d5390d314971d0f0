//! `lnet-bench selftest`: load between groups of end nodes, after `lnet_selftest`'s `lst`.
//!
//! A group of source nodes (`--from N`, on net tcp, 127.0.50.1 up) and a group of target
//! nodes (`--to M`, 127.0.50.101 up on tcp; with `--router`, 127.0.51.101 up on tcp1 behind
//! a routing node 127.0.50.200@tcp / 127.0.51.200@tcp1) run in this process, each group on
//! a thread of its own (the router on a third), over socklnd on loopback addresses. Each
//! source keeps `--concurrency` operations in flight to the targets (round robin) for
//! `--duration` seconds:
//!
//! * `ping`: LNet pings;
//! * `brw write size=N`: PUTs of N bytes with an ACK;
//! * `brw read size=N`: GETs of N bytes (the target's MD answers with a REPLY).
//!
//! Every interval a progress line gives RPC/s and MiB/s; at the end the min/avg/max over
//! the intervals and the totals, as text and (with `--json`) as JSON.
//!
//! The router binary mounts it as `lnet-router selftest` with [`SelftestArgs`] and
//! [`run_blocking`].

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use actors::Node;
use bytes::Bytes;
use lnet::Nid;
use serde::Serialize;

use crate::load::{self, Interval, LoadSpec, Op, Spread};
use crate::topo::{add_route, nid_at, start_node, Host, NiSpec, NodeParams, Sink};
use crate::{write_json, BenchError};

/// The longest run `--duration` accepts (seconds).
pub const MAX_DURATION_S: f64 = 3600.0;
/// The most nodes of a group.
pub const MAX_GROUP: usize = 50;

/// `lnet-bench selftest` (and `lnet-router selftest`).
#[derive(Debug, Clone, clap::Args)]
pub struct SelftestArgs {
    /// The test, in lst's words: `ping`, or `brw read|write [size=N]` (N in bytes, with a
    /// k or m suffix; at most 1m, LNet's MTU).
    #[arg(num_args = 0.., default_values_t = ["brw".to_owned(), "write".to_owned(), "size=1m".to_owned()])]
    pub test: Vec<String>,
    /// Source nodes.
    #[arg(long, default_value_t = 1)]
    pub from: usize,
    /// Target nodes.
    #[arg(long, default_value_t = 1)]
    pub to: usize,
    /// Put the targets on another net, behind a router node.
    #[arg(long)]
    pub router: bool,
    /// Operations in flight per source node.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds per progress line.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Per-peer credits of every node (socklnd and LNet).
    #[arg(long, default_value_t = 8)]
    pub peer_credits: u32,
    /// Transaction timeout of each operation, seconds.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// The acceptor port of every node (loopback addresses 127.0.50.x and 127.0.51.x).
    #[arg(long, default_value_t = 25000)]
    pub port: u16,
    /// Write the result as JSON to this file ("-": standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// A test parsed from lst's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Test {
    /// The operation.
    pub op: Op,
    /// lst's name of it.
    pub name: &'static str,
}

/// Parses `N`, `Nk` or `Nm` (bytes, KiB, MiB).
pub fn parse_size(s: &str) -> Result<u32, BenchError> {
    let lower = s.trim().to_ascii_lowercase();
    let (num, mult) = match lower.strip_suffix('m') {
        Some(n) => (n, 1u64 << 20),
        None => match lower.strip_suffix('k') {
            Some(n) => (n, 1u64 << 10),
            None => (lower.as_str(), 1),
        },
    };
    let n: u64 = num
        .parse()
        .map_err(|_| BenchError::Usage(format!("bad size {s:?}")))?;
    let bytes = n.saturating_mul(mult);
    if bytes > u64::from(lnet::LNET_MTU) {
        return Err(BenchError::Usage(format!(
            "size {s} exceeds LNet's MTU ({} bytes)",
            lnet::LNET_MTU
        )));
    }
    u32::try_from(bytes).map_err(|_| BenchError::Usage(format!("bad size {s:?}")))
}

/// Parses lst's test words: `ping` | `brw read|write [size=N]`.
pub fn parse_test(words: &[String]) -> Result<Test, BenchError> {
    let mut it = words.iter().map(String::as_str);
    match it.next() {
        Some("ping") | None => {
            if let Some(extra) = it.next() {
                return Err(BenchError::Usage(format!("ping takes no {extra:?}")));
            }
            Ok(Test {
                op: Op::Ping,
                name: "ping",
            })
        }
        Some("brw") => {
            let mut write = None;
            let mut size = 1u32 << 20;
            for w in it {
                match w {
                    "read" => write = Some(false),
                    "write" => write = Some(true),
                    _ => match w.strip_prefix("size=") {
                        Some(v) => size = parse_size(v)?,
                        None => {
                            return Err(BenchError::Usage(format!(
                                "brw: unknown word {w:?} (read, write, size=N)"
                            )))
                        }
                    },
                }
            }
            match write {
                Some(true) => Ok(Test {
                    op: Op::Put { size },
                    name: "brw write",
                }),
                Some(false) => Ok(Test {
                    op: Op::Get { size },
                    name: "brw read",
                }),
                None => Err(BenchError::Usage("brw needs read or write".to_owned())),
            }
        }
        Some(other) => Err(BenchError::Usage(format!(
            "unknown test {other:?}: ping or brw"
        ))),
    }
}

/// The result of a selftest run.
#[derive(Debug, Clone, Serialize)]
pub struct SelftestReport {
    /// `ping`, `brw write` or `brw read`.
    pub test: String,
    /// The operation.
    pub op: Op,
    /// The source NIDs.
    pub sources: Vec<String>,
    /// The target NIDs.
    pub targets: Vec<String>,
    /// The router's NIDs, if the targets are behind one.
    pub router: Vec<String>,
    /// Operations in flight per source.
    pub concurrency: usize,
    /// Seconds of load.
    pub duration_s: f64,
    /// Operations that succeeded.
    pub ok: u64,
    /// Operations that ended with a failure.
    pub failed: u64,
    /// Successful operations per second over the run.
    pub rpc_per_s: f64,
    /// Payload MiB per second over the run.
    pub mib_per_s: f64,
    /// RPC/s over the intervals.
    pub rpc_per_s_intervals: Spread,
    /// MiB/s over the intervals.
    pub mib_per_s_intervals: Spread,
    /// Each interval.
    pub intervals: Vec<Interval>,
}

fn check(args: &SelftestArgs) -> Result<Test, BenchError> {
    let test = parse_test(&args.test)?;
    if args.from == 0 || args.from > MAX_GROUP || args.to == 0 || args.to > MAX_GROUP {
        return Err(BenchError::Usage(format!(
            "--from and --to: 1 to {MAX_GROUP} nodes"
        )));
    }
    if !(args.duration > 0.0 && args.duration <= MAX_DURATION_S) {
        return Err(BenchError::Usage(format!(
            "--duration: more than 0, at most {MAX_DURATION_S} seconds"
        )));
    }
    if !(args.interval >= 0.05 && args.interval <= args.duration.max(0.05)) {
        return Err(BenchError::Usage(
            "--interval: at least 0.05 s, at most the duration".to_owned(),
        ));
    }
    if args.concurrency == 0 || args.concurrency > 1024 {
        return Err(BenchError::Usage("--concurrency: 1 to 1024".to_owned()));
    }
    Ok(test)
}

fn addr(c: u8, d: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, c, u8::try_from(d).unwrap_or(u8::MAX))
}

/// Runs a selftest; prints progress and the summary. Must run inside an actix system.
pub async fn run(args: SelftestArgs) -> Result<SelftestReport, BenchError> {
    let test = check(&args)?;
    let params = NodeParams {
        peer_credits: args.peer_credits.max(1),
        router_check_interval: Duration::from_secs(5),
        router_ping_timeout: Duration::from_secs(5),
        ..NodeParams::default()
    };
    let port = args.port;
    let src_host = Host::new("sources");
    let dst_host = Host::new("targets");
    let rtr_host = Host::new("router");
    let target_net = if args.router { "tcp1" } else { "tcp" };
    let target_c = if args.router { 51 } else { 50 };
    let rtr_near = nid_at(addr(50, 200), "tcp")?;
    let rtr_far = nid_at(addr(51, 200), "tcp1")?;
    let mut router_nids = Vec::new();
    if args.router {
        start_node(
            &rtr_host,
            vec![NiSpec::new(rtr_near, port), NiSpec::new(rtr_far, port)],
            true,
            params,
        )
        .await?;
        router_nids = vec![rtr_near.to_string(), rtr_far.to_string()];
    }
    let data = match test.op {
        Op::Get { size } => load::payload(size),
        _ => Bytes::new(),
    };
    let mut targets: Vec<Nid> = Vec::new();
    let mut sinks = Vec::new();
    for i in 0..args.to {
        let me = nid_at(addr(target_c, 101 + i), target_net)?;
        let node = start_node(&dst_host, vec![NiSpec::new(me, port)], false, params).await?;
        if args.router {
            add_route(&node, "tcp", rtr_far, 0).await?;
        }
        sinks.push(Sink::attach(&dst_host, &node, data.clone(), false, false).await?);
        targets.push(me);
    }
    let mut sources: Vec<(Node, Vec<Nid>)> = Vec::new();
    let mut src_nids = Vec::new();
    for i in 0..args.from {
        let me = nid_at(addr(50, 1 + i), "tcp")?;
        src_nids.push(me.to_string());
        let node = start_node(&src_host, vec![NiSpec::new(me, port)], false, params).await?;
        if args.router {
            add_route(&node, "tcp1", rtr_near, 0).await?;
        }
        // The targets in a different order for each source, as lst spreads them.
        let mut t = targets.clone();
        let len = t.len().max(1);
        t.rotate_left(i % len);
        sources.push((node, t));
    }
    warm_up(&sources).await?;
    println!(
        "selftest: {} from {} source(s) to {} target(s){}, concurrency {}, {} s",
        describe(test),
        args.from,
        args.to,
        if args.router { " through a router" } else { "" },
        args.concurrency,
        args.duration
    );
    let spec = LoadSpec {
        op: test.op,
        concurrency: args.concurrency,
        duration: Duration::from_secs_f64(args.duration),
        interval: Duration::from_secs_f64(args.interval),
        timeout: Duration::from_secs(args.timeout.max(1)),
        latencies: false,
        progress: Some("selftest".to_owned()),
    };
    // The load runs on the sources' thread, as a client's application runs beside its LNet.
    let r = src_host
        .run(move || async move { load::run(sources, &spec).await })
        .await?;
    let rates: Vec<f64> = r.intervals.iter().map(|i| i.rpc_per_s).collect();
    let bws: Vec<f64> = r.intervals.iter().map(|i| i.mib_per_s).collect();
    let report = SelftestReport {
        test: test.name.to_owned(),
        op: test.op,
        sources: src_nids,
        targets: targets.iter().map(ToString::to_string).collect(),
        router: router_nids,
        concurrency: args.concurrency,
        duration_s: args.duration,
        ok: r.ok,
        failed: r.failed,
        rpc_per_s: r.rpc_per_s,
        mib_per_s: r.mib_per_s,
        rpc_per_s_intervals: Spread::of(&rates),
        mib_per_s_intervals: Spread::of(&bws),
        intervals: r.intervals,
    };
    print_summary(&report);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(report)
}

fn describe(test: Test) -> String {
    match test.op {
        Op::Ping => "ping".to_owned(),
        Op::Put { size } | Op::Get { size } => format!("{} size={size}", test.name),
    }
}

/// Pings every target from every source once, so that connections are up before the
/// clock starts.
async fn warm_up(sources: &[(Node, Vec<Nid>)]) -> Result<(), BenchError> {
    for (node, targets) in sources {
        for t in targets {
            let mut last = None;
            // A route's gateway may not be checked yet: a few tries, each bounded.
            for _ in 0..5 {
                match node.ping(*t, Duration::from_secs(5)).await {
                    Ok(_) => {
                        last = None;
                        break;
                    }
                    Err(e) => {
                        last = Some(e);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
            if let Some(e) = last {
                return Err(BenchError::Setup(format!("warm-up ping of {t}: {e}")));
            }
        }
    }
    Ok(())
}

/// Prints the lst-style summary.
pub fn print_summary(r: &SelftestReport) {
    let s = &r.rpc_per_s_intervals;
    let b = &r.mib_per_s_intervals;
    println!(
        "[LNet Rates of sources]\n[RPC/s] min {:.1} avg {:.1} max {:.1}",
        s.min, s.avg, s.max
    );
    println!(
        "[LNet Bandwidth of sources]\n[MiB/s] min {:.1} avg {:.1} max {:.1}",
        b.min, b.avg, b.max
    );
    println!(
        "selftest: {} ok, {} failed in {} s: {:.1} RPC/s, {:.1} MiB/s",
        r.ok, r.failed, r.duration_s, r.rpc_per_s, r.mib_per_s
    );
}

/// Runs a selftest in a new actix system (for a binary's `main`): 0 on success, 1 if it
/// could not run, 2 for a bad argument.
pub fn run_blocking(args: SelftestArgs) -> ExitCode {
    let system = actix::System::new();
    match system.block_on(run(args)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e @ BenchError::Usage(_)) => {
            eprintln!("selftest: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("selftest: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn lst_words_parse() {
        assert_eq!(parse_test(&words("ping")).unwrap().op, Op::Ping);
        assert_eq!(
            parse_test(&words("brw write size=4k")).unwrap().op,
            Op::Put { size: 4096 }
        );
        assert_eq!(
            parse_test(&words("brw read size=1M")).unwrap().op,
            Op::Get { size: 1 << 20 }
        );
        assert_eq!(
            parse_test(&words("brw read")).unwrap().op,
            Op::Get { size: 1 << 20 }
        );
        assert!(parse_test(&words("brw size=4k")).is_err());
        assert!(parse_test(&words("brw write size=2m")).is_err());
        assert!(parse_test(&words("bulk")).is_err());
        assert_eq!(parse_size("0").unwrap(), 0);
    }

    #[actix::test]
    async fn a_short_brw_write_through_a_router_moves_data() {
        let report = run(SelftestArgs {
            test: words("brw write size=64k"),
            from: 1,
            to: 2,
            router: true,
            concurrency: 4,
            duration: 1.0,
            interval: 0.5,
            peer_credits: 8,
            timeout: 10,
            port: 25_980,
            json: None,
        })
        .await
        .unwrap();
        assert!(report.ok > 0, "{report:?}");
        assert_eq!(report.failed, 0, "{report:?}");
        assert_eq!(report.intervals.len(), 2);
    }
}
