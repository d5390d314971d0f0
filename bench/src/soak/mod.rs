//! `lnet-bench soak`: one `lnet-router run` process under a steady mixed load from many
//! end nodes for minutes, watched for growth.
//!
//! The router has an NI on tcp (127.1.0.1) and one on tcp1 (127.2.0.1). `--peers` end
//! nodes (default 1,000), half on each net, each an [`actors::Node`] with one socklnd NI
//! on a loopback address of its own (127.1.x.y@tcp, 127.2.x.y@tcp1) and a route to the
//! other net through the router, run in this process on `--hosts` threads. Before the
//! soak every end node pings the router and PUTs 1 MiB to a partner on the other net, so
//! that every connection is open. Then, for `--minutes`, each host's driver starts
//! transactions at `--rate` per second in all (at most `--window` in flight) from a
//! random end node of its own: PUTs with an ACK and GETs answered with a REPLY to a
//! random end node on the other net, sizes from 0 B to 1 MiB ([`traffic::size`]); LNet
//! pings of the router or of an end node on the other net; discovery of either.
//!
//! Every `--sample-secs` the router process is sampled: RSS, open descriptors and
//! threads from `/proc/PID`, and from its `/metrics` (`--metrics-listen`) the LNet
//! messages allocated, the messages waiting for buffers or credits and the peer NIs it
//! knows. The router serves no count of its async tasks; threads and descriptors stand
//! for them. At the end: per series, the least-squares slope per minute after the
//! warm-up, and how every transaction ended. The command fails if a transaction did not
//! end (response or failure event) within its timeout and `--grace-secs`, if any error
//! was counted (failure events, refusals, wrong replies, PUTs delivered with other bytes
//! than sent, the router's own errors and
//! drops, ERROR lines in its log), or if the router process died. It asserts no time and
//! no rate.

mod router;
pub mod sample;
pub mod traffic;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lnet::Nid;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::topo::{nid_at, Host};
use crate::{write_json, BenchError};
use router::{router_yaml, RouterProcess};
use sample::{ProcSample, RouterMetrics, Trend};
use traffic::{Counts, DriveEnd, DriveSpec, Peer, Plan, Tally};

/// The most end nodes (`--peers`).
pub const MAX_PEERS: usize = 20_000;
/// The most minutes of a soak.
pub const MAX_MINUTES: f64 = 24.0 * 60.0;
/// The names of the host threads (their number bounds `--hosts`).
const HOST_NAMES: [&str; 8] = [
    "soak-0", "soak-1", "soak-2", "soak-3", "soak-4", "soak-5", "soak-6", "soak-7",
];
/// End nodes per third octet of their addresses.
const PER_OCTET: usize = 250;

/// `lnet-bench soak`.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// End nodes, half on tcp and half on tcp1.
    #[arg(long, default_value_t = 1000)]
    pub peers: usize,
    /// Minutes of load.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Seconds between two samples of the router process.
    #[arg(long, default_value_t = 10.0)]
    pub sample_secs: f64,
    /// Seconds of warm-up left out of the slopes (default: the first 20 % of the run).
    #[arg(long)]
    pub warmup_secs: Option<f64>,
    /// Transactions started per second, all end nodes together.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Most transactions in flight, all end nodes together.
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// LNet transaction timeout of each PUT, GET and ping, seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Seconds past its timeout a transaction may take to end before it counts as hung.
    #[arg(long, default_value_t = 5)]
    pub grace_secs: u64,
    /// Threads hosting the end nodes (at most 8).
    #[arg(long, default_value_t = 2)]
    pub hosts: usize,
    /// The seed of the traffic mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Start only these kinds of transaction, in the mix's proportions among them (to
    /// tell which traffic a trend follows); default all.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<traffic::Kind>,
    /// The `lnet-router` binary.
    #[arg(long, default_value = "target/release/lnet-router")]
    pub router_bin: PathBuf,
    /// The acceptor port of every NI; the router's /metrics listens on PORT+1.
    #[arg(long, default_value_t = 25900)]
    pub port: u16,
    /// Write the report as JSON to this file ("-": standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// One sample of the router process and of the traffic.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the soak's traffic started.
    pub t_s: f64,
    /// `/proc/PID`.
    #[serde(flatten)]
    pub proc: ProcSample,
    /// `/metrics` (absent if it could not be read).
    pub metrics: Option<RouterMetrics>,
    /// Transactions started so far.
    pub started: u64,
    /// Ended with their response so far.
    pub response: u64,
    /// Open now.
    pub open: u64,
    /// Errors so far (end nodes' side).
    pub errors: u64,
}

/// The router's trends.
#[derive(Debug, Clone, Serialize)]
pub struct Trends {
    /// Resident memory, MiB (slope: MiB per minute).
    pub rss_mib: Trend,
    /// Open descriptors (slope: per minute).
    pub fds: Trend,
    /// Threads (slope: per minute).
    pub threads: Trend,
    /// LNet messages allocated (`lustre_allocated`).
    pub msgs_allocated: Trend,
}

/// The router's own error counts at the end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RouterErrors {
    /// `lustre_errors_total`.
    pub errors: f64,
    /// `lustre_drop_count_total`.
    pub drops: f64,
    /// `lnet_router_forward_drops_total`.
    pub forward_drops: f64,
    /// ERROR lines in its log.
    pub log_errors: u64,
    /// WARN lines in its log (reported, not counted as errors).
    pub log_warnings: u64,
    /// The first ERROR and WARN lines of its log (at most 20).
    pub log_excerpt: Vec<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// End nodes.
    pub peers: usize,
    /// Host threads of the end nodes.
    pub hosts: usize,
    /// Minutes of load asked for.
    pub minutes: f64,
    /// Seconds of load run.
    pub seconds: f64,
    /// Transactions per second asked for.
    pub rate: f64,
    /// Most in flight.
    pub window: usize,
    /// Transaction timeout, seconds.
    pub timeout_s: u64,
    /// Grace past it, seconds.
    pub grace_s: u64,
    /// The seed.
    pub seed: u64,
    /// The kinds of transaction started (empty: all).
    pub only: Vec<traffic::Kind>,
    /// The router binary.
    pub router_bin: String,
    /// Seconds left out of the trends.
    pub warmup_s: f64,
    /// Seconds the set-up (nodes started, first contact) took.
    pub setup_s: f64,
    /// Every sample.
    pub samples: Vec<Sample>,
    /// The trends after the warm-up.
    pub trends: Trends,
    /// The router's figures after the drain.
    pub settled: Option<RouterMetrics>,
    /// How the transactions ended.
    pub transactions: Counts,
    /// Transactions abandoned open after the drain bound.
    pub open_after_drain: u64,
    /// The router's own errors.
    pub router: RouterErrors,
    /// Errors in all: the end nodes' (failure events, refusals, wrong replies, hung,
    /// lost, PUTs delivered corrupt) and the router's (its error and drop counters, ERROR log lines).
    pub errors: u64,
    /// Whether the router process was still running at the end.
    pub router_alive: bool,
    /// Why the soak failed (empty: it passed).
    pub failures: Vec<String>,
    /// `/proc/loadavg` at the start and at the end.
    pub loadavg: [String; 2],
}

/// The address of end node `i` of a net whose second octet is `net_octet` (the router
/// is .0.1).
fn peer_ip(net_octet: u8, i: usize) -> Result<Ipv4Addr, BenchError> {
    let hi = u8::try_from(1 + i / PER_OCTET)
        .map_err(|_| BenchError::Usage(format!("end node {i}: too many")))?;
    let lo = u8::try_from(1 + i % PER_OCTET).unwrap_or(1);
    Ok(Ipv4Addr::new(127, net_octet, hi, lo))
}

fn check(args: &SoakArgs) -> Result<(), BenchError> {
    let usage = |m: &str| Err(BenchError::Usage(m.to_owned()));
    if args.peers < 2 || args.peers > MAX_PEERS {
        return usage("--peers: 2 to 20000");
    }
    if !(args.minutes > 0.0 && args.minutes <= MAX_MINUTES) {
        return usage("--minutes: above 0, at most 1440");
    }
    if !(1.0..=600.0).contains(&args.sample_secs) {
        return usage("--sample-secs: 1 to 600");
    }
    if args
        .warmup_secs
        .is_some_and(|w| !(0.0..=MAX_MINUTES * 60.0).contains(&w))
    {
        return usage("--warmup-secs: 0 to the run's length");
    }
    if !(args.rate > 0.0 && args.rate <= 10_000.0) {
        return usage("--rate: above 0, at most 10000");
    }
    if args.window == 0 || args.window > 100_000 {
        return usage("--window: 1 to 100000");
    }
    if args.timeout == 0 || args.timeout > 600 || args.grace_secs > 600 {
        return usage("--timeout: 1 to 600; --grace-secs: at most 600");
    }
    if args.hosts == 0 || args.hosts > HOST_NAMES.len() {
        return usage("--hosts: 1 to 8");
    }
    if args.port > u16::MAX - 1 {
        return usage("--port: at most 65534");
    }
    if !args.router_bin.is_file() {
        return Err(BenchError::Usage(format!(
            "{} not found: build it (cargo build --release -p router) or pass --router-bin",
            args.router_bin.display()
        )));
    }
    Ok(())
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { what, source }
}

/// Starts the end nodes of `host` (`mine`: NID, on tcp1, gateway).
async fn start_host_peers(
    host: &Host,
    mine: Vec<(Nid, bool, Nid)>,
    port: u16,
    data: Bytes,
    tally: Arc<Tally>,
) -> Result<Vec<Peer>, BenchError> {
    host.run(move || async move {
        let mut peers = Vec::with_capacity(mine.len());
        for (nid, far, gateway) in mine {
            peers.push(
                traffic::start_peer(nid, far, gateway, port, data.clone(), Arc::clone(&tally))
                    .await?,
            );
        }
        Ok::<_, BenchError>(peers)
    })
    .await?
}

/// Every end node of `peers` pings its gateway and PUTs 1 MiB to its partner on the other
/// net (32 at a time): every connection the soak uses is then open. Runs on the peers'
/// host.
async fn first_contact(
    peers: Vec<Peer>,
    plan: Arc<Plan>,
    data: Bytes,
    timeout: Duration,
) -> Result<(), BenchError> {
    let mut running = JoinSet::new();
    let mut failed: Vec<String> = Vec::new();
    let mut it = peers.into_iter();
    loop {
        while running.len() < 32 {
            let Some(p) = it.next() else { break };
            let partner = plan.partner(p.nid, p.far);
            running.spawn_local(contact(p, partner, data.clone(), timeout));
        }
        match running.join_next().await {
            Some(Ok(Ok(()))) => {}
            Some(Ok(Err(e))) => failed.push(e),
            Some(Err(e)) => failed.push(format!("first contact: {e}")),
            None => break,
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Setup(format!(
            "{} end nodes failed the first contact; the first: {}",
            failed.len(),
            failed.first().map_or("", String::as_str)
        )))
    }
}

/// One end node's first contact: a ping of its gateway, a 1 MiB PUT to `partner`.
async fn contact(
    p: Peer,
    partner: Option<Nid>,
    data: Bytes,
    timeout: Duration,
) -> Result<(), String> {
    if let Err(e) = p.node.ping(p.gateway, timeout).await {
        return Err(format!("{} could not ping {}: {e}", p.nid, p.gateway));
    }
    let Some(dest) = partner else { return Ok(()) };
    let req = actors::PutRequest {
        dest,
        portal: crate::topo::PORTAL,
        match_bits: crate::topo::MATCH_BITS,
        hdr_data: 0,
        payload: data,
        ack: true,
        timeout,
    };
    let txn = p
        .node
        .put(req)
        .await
        .map_err(|e| format!("{}: PUT to {dest} refused: {e}", p.nid))?;
    let events = txn.finish().await;
    let acked = events
        .last()
        .is_some_and(|e| e.kind == actors::MsgEventKind::Ack && e.status.is_ok());
    if acked {
        Ok(())
    } else {
        Err(format!("{}: PUT to {dest} not ACKed: {events:?}", p.nid))
    }
}

fn sample_now(
    pid: u32,
    metrics_addr: SocketAddr,
    t_s: f64,
    tally: &Tally,
) -> Result<Sample, BenchError> {
    let proc = sample::read_proc(pid).map_err(io_err(format!("read /proc/{pid}")))?;
    let metrics = sample::scrape(metrics_addr, Duration::from_secs(5))
        .ok()
        .map(|t| sample::parse_metrics(&t));
    let c = tally.snapshot();
    Ok(Sample {
        t_s,
        proc,
        metrics,
        started: c.started,
        response: c.response,
        open: c.open,
        errors: c.errors(),
    })
}

fn print_sample(s: &Sample) {
    let m = s.metrics.unwrap_or_default();
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
    #[allow(clippy::cast_precision_loss)] // KiB of a process: far below 2^52
    let rss = s.proc.rss_kib as f64 / 1024.0;
    println!(
        "soak [{:>7.1}s] router rss {rss:>8.1} MiB fds {:>5} threads {:>3} msgs {:>4} waiting {:>3} peer NIs {:>5} | started {:>8} ok {:>8} open {:>4} errors {}",
        s.t_s,
        s.proc.fds,
        s.proc.threads,
        opt(m.msgs_allocated),
        opt(m.waiting),
        m.peer_nis.map_or_else(|| "-".to_owned(), |n| n.to_string()),
        s.started,
        s.response,
        s.open,
        s.errors,
    );
}

/// The ERROR and WARN lines of the router's log: their counts and the first 20.
fn log_lines(log: &Path) -> (u64, u64, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let count =
        |w: &str| u64::try_from(text.lines().filter(|l| l.contains(w)).count()).unwrap_or(u64::MAX);
    let excerpt = text
        .lines()
        .filter(|l| l.contains(" ERROR ") || l.contains(" WARN "))
        .take(20)
        .map(str::to_owned)
        .collect();
    (count(" ERROR "), count(" WARN "), excerpt)
}

fn fmt_slope(t: &Trend, unit: &str) -> String {
    match t.slope_per_min {
        Some(s) => format!(
            "{s:+.4} {unit}/min (first {:.1}, last {:.1}, max {:.1}, {} samples)",
            t.first, t.last, t.max, t.samples
        ),
        None => format!("no slope ({} samples after the warm-up)", t.samples),
    }
}

/// Runs the soak; prints a line per sample and a summary, writes the report with
/// `--json`, and fails ([`BenchError::Check`]) when a transaction hung, an error was
/// counted or the router died. Must run inside an actix system.
pub async fn run(args: SoakArgs) -> Result<SoakReport, BenchError> {
    check(&args)?;
    match crate::wire::sys::raise_fd_limit() {
        Ok(n) if n < 4 * u64::try_from(args.peers).unwrap_or(u64::MAX) + 256 => println!(
            "soak: warning: open files limited to {n}, maybe too few for {} end nodes",
            args.peers
        ),
        Ok(_) => {}
        Err(e) => println!("soak: warning: the open files limit could not be raised: {e}"),
    }
    let loadavg_start = crate::compare::loadavg();
    let dir = tempfile::tempdir().map_err(io_err("temporary directory".to_owned()))?;
    let port = args.port;
    let router_tcp = nid_at(Ipv4Addr::new(127, 1, 0, 1), "tcp")?;
    let router_tcp1 = nid_at(Ipv4Addr::new(127, 2, 0, 1), "tcp1")?;
    let config = dir.path().join("router.yaml");
    std::fs::write(&config, router_yaml(router_tcp, router_tcp1, port))
        .map_err(io_err(format!("write {}", config.display())))?;
    let log = dir.path().join("router.log");
    let metrics_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 1, 0, 1)), port + 1);
    let out = dir.path().join("router.out");
    let mut router = RouterProcess::start(&args.router_bin, &config, metrics_addr, &out, &log)?;
    if let Err(e) = router
        .wait_ready(&out, &[router_tcp, router_tcp1], Duration::from_secs(60))
        .await
    {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        return Err(BenchError::Setup(format!("{e}; router log: {text}")));
    }
    println!(
        "soak: router pid {} ({}), NIs {router_tcp} and {router_tcp1}, metrics on {metrics_addr}",
        router.pid(),
        args.router_bin.display()
    );

    // The end nodes: half on each net, spread over the hosts in turn.
    let setup_start = Instant::now();
    let n_far = args.peers / 2;
    let n_near = args.peers - n_far;
    let mut plan = Plan {
        tcp: Vec::with_capacity(n_near),
        tcp1: Vec::with_capacity(n_far),
    };
    let mut per_host: Vec<Vec<(Nid, bool, Nid)>> = vec![Vec::new(); args.hosts];
    for i in 0..args.peers {
        let (far, k) = if i % 2 == 0 {
            (false, i / 2)
        } else {
            (true, i / 2)
        };
        let nid = if far {
            nid_at(peer_ip(2, k)?, "tcp1")?
        } else {
            nid_at(peer_ip(1, k)?, "tcp")?
        };
        if far {
            plan.tcp1.push(nid);
        } else {
            plan.tcp.push(nid);
        }
        let gateway = if far { router_tcp1 } else { router_tcp };
        if let Some(h) = per_host.get_mut(i % args.hosts) {
            h.push((nid, far, gateway));
        }
    }
    let plan = Arc::new(plan);
    let data = traffic::payload();
    let tally = Arc::new(Tally::default());
    let hosts: Vec<Host> = HOST_NAMES
        .iter()
        .take(args.hosts)
        .map(|n| Host::new(n))
        .collect();
    let mut peers: Vec<Vec<Peer>> = Vec::with_capacity(args.hosts);
    for (host, mine) in hosts.iter().zip(per_host) {
        peers.push(start_host_peers(host, mine, port, data.clone(), Arc::clone(&tally)).await?);
    }
    println!(
        "soak: {} end nodes up ({} on tcp, {} on tcp1) on {} threads in {:.1} s",
        args.peers,
        n_near,
        n_far,
        args.hosts,
        setup_start.elapsed().as_secs_f64()
    );
    let timeout = Duration::from_secs(args.timeout);
    // Each host makes its end nodes' first contact; the hosts work in parallel.
    let mut contacts = Vec::with_capacity(args.hosts);
    for (host, mine) in hosts.iter().zip(&peers) {
        let (mine, plan, data) = (mine.clone(), Arc::clone(&plan), data.clone());
        let handle = host
            .run(move || std::future::ready(actix::spawn(first_contact(mine, plan, data, timeout))))
            .await?;
        contacts.push(handle);
    }
    for c in contacts {
        c.await
            .map_err(|e| BenchError::Setup(format!("first contact: {e}")))??;
    }
    let setup_s = setup_start.elapsed().as_secs_f64();
    println!("soak: first contact made by every end node; set-up took {setup_s:.1} s");

    // The traffic.
    let secs = args.minutes * 60.0;
    let warmup_s = args.warmup_secs.unwrap_or(secs * 0.2);
    let nhosts = u32::try_from(args.hosts).unwrap_or(1);
    let interval = Duration::from_secs_f64(f64::from(nhosts) / args.rate);
    let per_host_window = args.window.div_ceil(args.hosts).max(1);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // bounded above
    let max = (args.rate * secs * 2.0) as u64 + 100;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut drivers = Vec::with_capacity(args.hosts);
    let grace = Duration::from_secs(args.grace_secs);
    for (i, (host, mine)) in hosts.iter().zip(peers).enumerate() {
        let spec = DriveSpec {
            interval,
            window: per_host_window,
            timeout,
            grace,
            seed: args
                .seed
                .wrapping_mul(0x100)
                .wrapping_add(u64::try_from(i).unwrap_or(0)),
            max,
            data: data.clone(),
            only: args.only.clone(),
        };
        let plan = Arc::clone(&plan);
        let tally = Arc::clone(&tally);
        let stop = stop_rx.clone();
        let handle = host
            .run(move || {
                std::future::ready(actix::spawn(traffic::drive(mine, plan, spec, tally, stop)))
            })
            .await?;
        drivers.push(handle);
    }
    println!(
        "soak: {:.1} min at {} transactions/s (at most {} in flight), sampling every {} s, warm-up {warmup_s:.0} s",
        args.minutes, args.rate, args.window, args.sample_secs
    );

    // The samples.
    let t0 = Instant::now();
    let step = Duration::from_secs_f64(args.sample_secs);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // bounded by check()
    let nsamples = (secs / args.sample_secs).floor() as u32;
    let mut samples = Vec::new();
    let mut alive = true;
    for k in 0..=nsamples {
        tokio::time::sleep_until(t0 + step * k).await;
        if !router.alive() {
            alive = false;
            println!("soak: the router process died");
            break;
        }
        match sample_now(
            router.pid(),
            metrics_addr,
            t0.elapsed().as_secs_f64(),
            &tally,
        ) {
            Ok(s) => {
                print_sample(&s);
                samples.push(s);
            }
            Err(e) => {
                alive = false;
                println!("soak: the router process could not be sampled: {e}");
                break;
            }
        }
    }
    if alive {
        tokio::time::sleep_until(t0 + Duration::from_secs_f64(secs)).await;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    let drain = timeout * 2 + grace + Duration::from_secs(15);
    let mut open_after_drain = 0u64;
    for d in drivers {
        match tokio::time::timeout(drain, d).await {
            Ok(Ok(DriveEnd { open })) => open_after_drain = open_after_drain.saturating_add(open),
            _ => open_after_drain = open_after_drain.saturating_add(1),
        }
    }
    // What the router holds once the traffic is over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    alive = alive && router.alive();
    let settled = if alive {
        match sample_now(
            router.pid(),
            metrics_addr,
            t0.elapsed().as_secs_f64(),
            &tally,
        ) {
            Ok(s) => {
                println!("soak: after the drain:");
                print_sample(&s);
                s.metrics
            }
            Err(e) => {
                alive = false;
                println!("soak: the router process could not be sampled: {e}");
                None
            }
        }
    } else {
        None
    };
    let transactions = tally.snapshot();
    let (log_errors, log_warnings, log_excerpt) = log_lines(&log);
    let last = settled.or_else(|| samples.iter().rev().find_map(|s| s.metrics));
    let m = last.unwrap_or_default();
    let router_errors = RouterErrors {
        errors: m.errors.unwrap_or(0.0),
        drops: m.drops.unwrap_or(0.0),
        forward_drops: m.forward_drops.unwrap_or(0.0),
        log_errors,
        log_warnings,
        log_excerpt,
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // counts
    let router_counted =
        (router_errors.errors + router_errors.drops + router_errors.forward_drops).max(0.0) as u64;
    let errors = transactions
        .errors()
        .saturating_add(router_counted)
        .saturating_add(log_errors);

    #[allow(clippy::cast_precision_loss)] // samples' values: far below 2^52
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| Some((s.t_s, f(s)?)))
            .collect()
    };
    #[allow(clippy::cast_precision_loss)]
    let trends = Trends {
        rss_mib: sample::trend(&series(&|s| Some(s.proc.rss_kib as f64 / 1024.0)), warmup_s),
        fds: sample::trend(&series(&|s| Some(s.proc.fds as f64)), warmup_s),
        threads: sample::trend(&series(&|s| Some(s.proc.threads as f64)), warmup_s),
        msgs_allocated: sample::trend(
            &series(&|s| s.metrics.and_then(|m| m.msgs_allocated)),
            warmup_s,
        ),
    };

    let mut failures = Vec::new();
    if !alive {
        failures.push("the router process died".to_owned());
    }
    if transactions.hung > 0 {
        failures.push(format!(
            "{} transactions did not end within their timeout and {} s",
            transactions.hung, args.grace_secs
        ));
    }
    if open_after_drain > 0 || transactions.open > 0 {
        failures.push(format!(
            "{} transactions still open after the drain",
            transactions.open.max(open_after_drain)
        ));
    }
    if errors > 0 {
        failures.push(format!(
            "{errors} errors: {} failure events, {} refused, {} wrong replies, {} lost, {} hung, {} PUTs delivered corrupt; router: {} errors, {} drops, {} forward drops, {} ERROR log lines",
            transactions.failure,
            transactions.refused,
            transactions.mismatch,
            transactions.lost,
            transactions.hung,
            transactions.corrupt,
            router_errors.errors,
            router_errors.drops,
            router_errors.forward_drops,
            log_errors
        ));
    }
    if failures.is_empty() && last.is_none() {
        println!("soak: warning: the router's /metrics could not be read");
    }

    let report = SoakReport {
        peers: args.peers,
        hosts: args.hosts,
        minutes: args.minutes,
        seconds,
        rate: args.rate,
        window: args.window,
        timeout_s: args.timeout,
        grace_s: args.grace_secs,
        seed: args.seed,
        only: args.only.clone(),
        router_bin: args.router_bin.display().to_string(),
        warmup_s,
        setup_s,
        samples,
        trends,
        settled,
        transactions,
        open_after_drain,
        router: router_errors,
        errors,
        router_alive: alive,
        failures,
        loadavg: [loadavg_start, crate::compare::loadavg()],
    };
    print_summary(&report);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    drop(router);
    if report.failures.is_empty() {
        Ok(report)
    } else {
        Err(BenchError::Check(report.failures.join("; ")))
    }
}

fn print_summary(r: &SoakReport) {
    let t = &r.transactions;
    println!(
        "soak: {} end nodes, {:.1} s of load, warm-up {:.0} s left out of the slopes",
        r.peers, r.seconds, r.warmup_s
    );
    println!(
        "soak: router RSS      {}",
        fmt_slope(&r.trends.rss_mib, "MiB")
    );
    println!("soak: router fds      {}", fmt_slope(&r.trends.fds, "fds"));
    println!(
        "soak: router threads  {}",
        fmt_slope(&r.trends.threads, "threads")
    );
    println!(
        "soak: router LNet msgs {}",
        fmt_slope(&r.trends.msgs_allocated, "msgs")
    );
    println!(
        "soak: transactions: {} started, {} with their response, {} with a failure event, {} refused, {} wrong replies, {} lost, {} hung, {} open",
        t.started, t.response, t.failure, t.refused, t.mismatch, t.lost, t.hung, t.open
    );
    for (name, k) in [
        ("put", &t.put),
        ("get", &t.get),
        ("ping router", &t.ping_router),
        ("ping peer", &t.ping_peer),
        ("discover", &t.discover),
    ] {
        println!(
            "soak:   {name:<12} {:>8} started {:>8} ok {:>4} failed, longest {:.3} s",
            k.started, k.response, k.failure, k.max_s
        );
    }
    println!(
        "soak: {:.1} MiB PUT, {:.1} MiB got; {} PUTs delivered ({} corrupt); router: {} errors, {} drops, {} forward drops, {} ERROR and {} WARN log lines",
        mib(t.put_bytes),
        mib(t.get_bytes),
        t.delivered,
        t.corrupt,
        r.router.errors,
        r.router.drops,
        r.router.forward_drops,
        r.router.log_errors,
        r.router.log_warnings
    );
    for (why, n) in &t.failure_reasons {
        println!("soak:   failure events {why}: {n}");
    }
    for l in &r.router.log_excerpt {
        println!("soak:   router log: {l}");
    }
    if r.failures.is_empty() {
        println!("soak: passed ({} errors)", r.errors);
    } else {
        for f in &r.failures {
            println!("soak: FAILED: {f}");
        }
    }
}

#[allow(clippy::cast_precision_loss)] // bytes: far below 2^52
fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_addresses_are_distinct_and_skip_the_router() {
        let a: Vec<Ipv4Addr> = (0..1000).map(|i| peer_ip(1, i).unwrap()).collect();
        let set: std::collections::HashSet<_> = a.iter().collect();
        assert_eq!(set.len(), 1000);
        assert!(!a.contains(&Ipv4Addr::new(127, 1, 0, 1)));
        assert_eq!(a.first(), Some(&Ipv4Addr::new(127, 1, 1, 1)));
        assert_eq!(a.get(250), Some(&Ipv4Addr::new(127, 1, 2, 1)));
        assert!(peer_ip(1, 254 * PER_OCTET).is_ok());
        assert!(peer_ip(1, 255 * PER_OCTET).is_err());
    }

    #[test]
    fn bad_arguments_are_refused() {
        let args = SoakArgs {
            peers: 1000,
            minutes: 10.0,
            sample_secs: 10.0,
            warmup_secs: None,
            rate: 100.0,
            window: 64,
            timeout: 30,
            grace_secs: 5,
            hosts: 2,
            seed: 1,
            only: Vec::new(),
            router_bin: PathBuf::from("/nonexistent/lnet-router"),
            port: 25900,
            json: None,
        };
        for bad in [
            SoakArgs {
                peers: 1,
                ..args.clone()
            },
            SoakArgs {
                minutes: 0.0,
                ..args.clone()
            },
            SoakArgs {
                sample_secs: 0.1,
                ..args.clone()
            },
            SoakArgs {
                hosts: 9,
                ..args.clone()
            },
            SoakArgs {
                rate: -1.0,
                ..args.clone()
            },
            args.clone(),
        ] {
            assert!(matches!(check(&bad), Err(BenchError::Usage(_))));
        }
    }
}
