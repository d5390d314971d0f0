//! `lnet-bench wire`: the router measured with end nodes that cannot be the bottleneck.
//!
//! The end nodes are [`drive::Source`] and [`drive::Sink`]: plain synchronous socklnd
//! (reserved-port acceptor request, HELLO V3, the three typed connections), one poll(2)
//! loop on one thread each, pre-encoded PUT and ACK frames. In one run, three paths:
//!
//! * **direct**: source 127.0.56.1@tcp to sink 127.0.56.2@tcp;
//! * **relay**: source 127.0.57.1@tcp to sink 127.0.57.2@tcp through [`relay`], a process
//!   of its own (splice(2), one thread per direction);
//! * **router**: for the `i`th of `--cores`, N, source 127.0.(58+4i).1@tcp to sink
//!   127.0.(59+4i).4@tcp1 through an `lnet-router run` process of its own with NIs
//!   127.0.(58+4i).2@tcp and 127.0.(59+4i).2@tcp1 and `--cpu-npartitions N`: one CPT per
//!   CPU it runs on, as the default gives a router started on those N CPUs.
//!
//! The relay and each router are measured pinned to their CPUs (CPU 0, or CPUs 0..N-1);
//! the one relay is re-pinned in place between measurements. For each repeat, each measurement in
//! turn (the order rotating between repeats): the 0-byte PUT+ACK rate, 1 MiB bulk
//! throughput, and the round trip of one PUT+ACK at a time (p50/p99); with the CPU time
//! (utime+stime from /proc/PID/stat) the relay or router process spent per PUT+ACK, and
//! where the rest of the machine's CPUs went ([`usage`]: the end nodes' own threads, and
//! the CPUs busy). Medians over the repeats; ratios router/relay and router/direct within
//! each repeat. Nothing is asserted.

pub mod child;
pub mod drive;
pub mod endpoint;
pub mod frames;
pub mod hostile;
pub mod relay;
pub mod sys;
pub mod usage;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use lnet::{Nid, ProcessId};
use serde::Serialize;

use child::{CpuTime, Process};
use drive::{Load, Outcome, Sink, Source, Timing};
use hostile::{HostileCounts, HostileLoad, Targets};
use relay::RelayMode;

use crate::load::{median, percentile};
use crate::{write_json, BenchError};

/// `lnet-bench wire`.
#[derive(Debug, Clone, clap::Args)]
pub struct WireArgs {
    /// Repeats of every measurement (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Seconds each phase is measured (after a warm-up of a quarter of it, at most 0.5 s).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// A smoke run: 1 repeat of 0.3 s, the relay and router on all CPUs only.
    #[arg(long)]
    pub quick: bool,
    /// The acceptor port of every node (the relay listens on PORT+1).
    #[arg(long, default_value_t = 25800)]
    pub port: u16,
    /// The `lnet-router` binary.
    #[arg(long, default_value = "target/release/lnet-router")]
    pub router_bin: PathBuf,
    /// 0-byte PUTs in flight in the rate phase.
    #[arg(long, default_value_t = 64)]
    pub rate_window: usize,
    /// 1 MiB PUTs in flight in the bulk phase.
    #[arg(long, default_value_t = 8)]
    pub bulk_window: usize,
    /// Most frames the source queues that TCP has not taken yet (socklnd `peer_credits`).
    #[arg(long, default_value_t = 8)]
    pub peer_credits: usize,
    /// The router's `peer_credits` tunable on both nets (its peer NIs' tx and
    /// router-buffer credits); default: the kernel's default, 8.
    #[arg(long)]
    pub router_peer_credits: Option<u32>,
    /// CPTs of every router process (its `--cpu-npartitions`); default: N for router@N,
    /// one per CPU it runs on.
    #[arg(long)]
    pub router_cpts: Option<usize>,
    /// CPU counts the relay and the router are pinned to, in turn (default: all, then 1).
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// How the relay moves bytes.
    #[arg(long, value_enum, default_value_t = RelayMode::Splice)]
    pub relay: RelayMode,
    /// Write the report as JSON to this file ("-": standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Also measure the router while hostile API clients and hostile socklnd peers are at
    /// work (`router@N+hostile`; see [`hostile`]); the router then serves its API.
    #[arg(long)]
    pub hostile: bool,
}

/// Bytes of a bulk PUT.
pub const BULK_SIZE: u32 = 1 << 20;
/// Most time the PUTs in flight at the end of a phase may take to be ACKed.
const DRAIN: Duration = Duration::from_secs(10);

/// One measurement of one path in one repeat.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sample {
    /// 0-byte PUT+ACKs per second.
    pub rate_per_s: f64,
    /// 1 MiB PUTs' payload delivered (ACKed), GB/s (10^9 bytes).
    pub bulk_gb_per_s: f64,
    /// Median round trip of one PUT+ACK at a time, microseconds.
    pub p50_us: f64,
    /// 99th percentile of the same, microseconds.
    pub p99_us: f64,
    /// CPU time of the relay/router process per 0-byte PUT+ACK (two messages forwarded),
    /// microseconds; none for direct.
    pub cpu_us_per_put_ack: Option<f64>,
    /// Of `cpu_us_per_put_ack`, the time in the kernel (system calls, and the TCP/IP
    /// work done on their behalf).
    pub cpu_kernel_us_per_put_ack: Option<f64>,
    /// The same per forwarded message (half of it).
    pub cpu_us_per_msg: Option<f64>,
    /// CPU time of the relay/router process per 1 MiB PUT+ACK, microseconds.
    pub cpu_us_per_bulk_put: Option<f64>,
    /// CPU time of the end nodes' two threads (the source's and the sink's) per 0-byte
    /// PUT+ACK, microseconds.
    pub ends_cpu_us_per_put_ack: Option<f64>,
    /// The same per 1 MiB PUT+ACK.
    pub ends_cpu_us_per_bulk_put: Option<f64>,
    /// How many of the machine's CPUs were busy, on average, during the rate phase
    /// (everything on the machine: the end nodes, the relay or router, the rest).
    pub busy_cpus_rate: Option<f64>,
    /// The same during the bulk phase.
    pub busy_cpus_bulk: Option<f64>,
}

/// One path's samples and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct PathReport {
    /// "direct", "relay@N" or "router@N" (N CPUs).
    pub name: String,
    /// The CPUs the relay/router process was pinned to.
    pub cpus: Vec<usize>,
    /// How many threads of the relay/router process ran under each scheduling policy
    /// ("other", "batch", ...), read after its first measurement; none for direct.
    pub thread_policies: Option<BTreeMap<String, usize>>,
    /// Per repeat.
    pub samples: Vec<Sample>,
    /// Medians over the repeats.
    pub median: Sample,
}

/// A ratio over the repeats.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

/// The router against a yardstick, ratios taken within each repeat.
#[derive(Debug, Clone, Serialize)]
pub struct RatioReport {
    /// "router@N/relay@N" or "router@N/direct".
    pub name: String,
    /// Rate ratio.
    pub rate: Spread,
    /// Bulk ratio.
    pub bulk: Spread,
    /// p50 latency ratio.
    pub p50: Spread,
    /// p99 latency ratio.
    pub p99: Spread,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct WireReport {
    /// CPUs of the machine.
    pub cpus: usize,
    /// How the load generator and the measured process shared the CPUs.
    pub sharing: String,
    /// How the relay moves bytes.
    pub relay: String,
    /// Repeats.
    pub repeats: usize,
    /// Measured seconds per phase.
    pub seconds: f64,
    /// 0-byte PUTs in flight.
    pub rate_window: usize,
    /// 1 MiB PUTs in flight.
    pub bulk_window: usize,
    /// Frames queued ahead of TCP at most.
    pub peer_credits: usize,
    /// The router's `peer_credits` (none: the default, 8).
    pub router_peer_credits: Option<u32>,
    /// The routers' CPTs (none: N for router@N).
    pub router_cpts: Option<usize>,
    /// Per path.
    pub paths: Vec<PathReport>,
    /// Ratios.
    pub ratios: Vec<RatioReport>,
    /// LNet pings the end nodes received and answered (the router pings its peers).
    pub pings_answered: u64,
    /// Other LNet messages the end nodes received besides PUTs, ACKs and pings (ignored).
    pub unexpected: u64,
    /// `/proc/loadavg` before.
    pub loadavg_start: String,
    /// `/proc/loadavg` after.
    pub loadavg_end: String,
    /// With `--hostile`: what the hostile clients did, over every hostile measurement.
    pub hostile: Option<HostileCounts>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn pid_at(a: u8, b: u8, net: &str) -> Result<ProcessId, BenchError> {
    let n: Nid = format!("127.0.{a}.{b}@{net}")
        .parse()
        .map_err(|e| BenchError::Setup(format!("NID: {e}")))?;
    Ok(ProcessId::lustre(n))
}

fn addr(a: u8, b: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, a, b)), port)
}

/// One path, set up: its source, its sink and the process in between, if any.
struct Path {
    kind: &'static str,
    /// Pings the source answered, and other messages it ignored.
    source_pings: u64,
    source_unexpected: u64,
    source: Source,
    sink: Option<Sink>,
    process: Option<Process>,
}

fn router_yaml(near: Nid, far: Nid, port: u16, peer_credits: Option<u32>) -> String {
    let tunables = peer_credits.map_or(String::new(), |pc| {
        format!(
            "
          tunables:
              peer_timeout: 180
              peer_credits: {pc}
              peer_buffer_credits: 0
              credits: 256"
        )
    });
    format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: {near}{tunables}
    - net type: tcp1
      local NI(s):
        - nid: {far}{tunables}
routing:
    enable: 1
lnet-router:
    acceptor_port: {port}
"
    )
}

fn setup_direct(args: &WireArgs) -> Result<Path, BenchError> {
    let (src, dst) = (pid_at(56, 1, "tcp")?, pid_at(56, 2, "tcp")?);
    let sink = Sink::start(dst, src, args.port)?;
    let source = Source::connect(
        src,
        args.port,
        dst,
        addr(56, 2, args.port),
        dst,
        args.peer_credits,
        BULK_SIZE,
    )?;
    Ok(Path {
        kind: "direct",
        source_pings: 0,
        source_unexpected: 0,
        source,
        sink: Some(sink),
        process: None,
    })
}

fn setup_relay(args: &WireArgs, dir: &std::path::Path, lifetime: u64) -> Result<Path, BenchError> {
    let (src, dst) = (pid_at(57, 1, "tcp")?, pid_at(57, 2, "tcp")?);
    let sink = Sink::start(dst, src, args.port)?;
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        what: "find lnet-bench's own path".into(),
        source,
    })?;
    let mut cmd = Command::new(exe);
    cmd.arg("wire-relay")
        .arg("--pair")
        .arg(format!(
            "{}={}",
            addr(57, 2, args.port + 1),
            addr(57, 2, args.port)
        ))
        .arg("--mode")
        .arg(match args.relay {
            RelayMode::Splice => "splice",
            RelayMode::Copy => "copy",
        })
        .arg("--lifetime")
        .arg(lifetime.to_string())
        .env("RUST_LOG", "warn");
    let process = Process::start(cmd, "the relay", &dir.join("relay.log"))?;
    let source = Source::connect(
        src,
        args.port,
        dst,
        addr(57, 2, args.port + 1),
        dst,
        args.peer_credits,
        BULK_SIZE,
    )?;
    Ok(Path {
        kind: "relay",
        source_pings: 0,
        source_unexpected: 0,
        source,
        sink: Some(sink),
        process: Some(process),
    })
}

/// The third byte of the addresses of router `index`'s tcp net (its tcp1 net's is the
/// next): 58, 62, 66 ... (127.0.60.x is the hostile clients').
fn router_octet(index: usize) -> Result<u8, BenchError> {
    index
        .checked_mul(4)
        .and_then(|i| i.checked_add(58))
        .and_then(|o| u8::try_from(o).ok())
        .filter(|o| *o < 255)
        .ok_or_else(|| BenchError::Usage("too many --cores".into()))
}

/// The path through router `index`, an `lnet-router` process with `cpts` CPTs.
fn setup_router(
    args: &WireArgs,
    dir: &std::path::Path,
    index: usize,
    cpts: usize,
) -> Result<Path, BenchError> {
    let a = router_octet(index)?;
    let (src, near) = (pid_at(a, 1, "tcp")?, pid_at(a, 2, "tcp")?);
    // The source and the sink are on different CPTs of two (`Nid::cpt`: the sums of
    // their NIDs' bytes differ by 5), as two of many clients and servers would be: with
    // two cores each has the router thread of its own.
    let (dst, far) = (pid_at(a + 1, 4, "tcp1")?, pid_at(a + 1, 2, "tcp1")?);
    let sink = Sink::start(dst, src, args.port)?;
    let config = dir.join(format!("router-{index}.yaml"));
    std::fs::write(
        &config,
        router_yaml(near.nid, far.nid, args.port, args.router_peer_credits),
    )
    .map_err(|source| BenchError::Io {
        what: format!("write {}", config.display()),
        source,
    })?;
    let mut cmd = Command::new(&args.router_bin);
    cmd.arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--cpu-npartitions")
        .arg(args.router_cpts.unwrap_or(cpts).to_string())
        .env("RUST_LOG", "warn");
    if args.hostile {
        let tokens = dir.join(format!("tokens-{index}"));
        std::fs::write(&tokens, format!("hostile-reader reader {HOSTILE_READER}\n")).map_err(
            |source| BenchError::Io {
                what: format!("write {}", tokens.display()),
                source,
            },
        )?;
        cmd.arg("--data-dir")
            .arg(dir.join(format!("router-data-{index}")))
            .arg("--tokens-file")
            .arg(&tokens)
            .arg("--api-listen")
            .arg(api_addr(args, a).to_string())
            .arg("--plain-http");
    }
    let log = dir.join(format!("router-{index}.log"));
    let mut process = Process::start(cmd, "lnet-router", &log)?;
    let source = Source::connect(
        src,
        args.port,
        near,
        addr(a, 2, args.port),
        dst,
        args.peer_credits,
        BULK_SIZE,
    );
    process.check_alive()?;
    Ok(Path {
        kind: "router",
        source_pings: 0,
        source_unexpected: 0,
        source: source?,
        sink: Some(sink),
        process: Some(process),
    })
}

/// The reader token the hostile clients' event streams use.
const HOSTILE_READER: &str = "hostile-reader-0123456789abcdef";

/// Where the router whose tcp net's addresses have third byte `a` serves its API with
/// `--hostile`.
fn api_addr(args: &WireArgs, a: u8) -> SocketAddr {
    addr(a, 2, args.port + 3)
}

/// The hostile clients of the path through router `index`.
fn hostile_targets(args: &WireArgs, index: usize) -> Result<Targets, BenchError> {
    let a = router_octet(index)?;
    Ok(Targets {
        api: api_addr(args, a),
        reader_token: HOSTILE_READER.to_owned(),
        acceptor: addr(a, 2, args.port),
        ni: pid_at(a, 2, "tcp")?.nid,
    })
}

/// How long the hostile clients run before a measurement starts: the event streams
/// subscribed and the handshake slots held.
const HOSTILE_WARMUP: Duration = Duration::from_secs(2);

/// Where the CPUs went during one phase.
#[derive(Debug, Clone, Copy, Default)]
struct PhaseCpu {
    /// The relay's or router's process.
    process: Option<CpuTime>,
    /// The source's and the sink's threads together.
    ends: Option<CpuTime>,
    /// The machine's busy CPUs, on average.
    busy_cpus: Option<f64>,
}

impl Path {
    /// CPU time so far of the source's thread (the caller's) and the sink's.
    fn ends_cpu(&self) -> Result<Option<CpuTime>, BenchError> {
        let Some(sink) = self.sink.as_ref().map(Sink::tid) else {
            return Ok(None);
        };
        let (source, sink) = (
            usage::thread_cpu(usage::current_tid()?)?,
            usage::thread_cpu(sink)?,
        );
        Ok(Some(CpuTime {
            user: source.user + sink.user,
            kernel: source.kernel + sink.kernel,
        }))
    }
}

/// Runs one load on a path, with the CPU time of the process, of the end nodes and of
/// the machine around it.
fn phase(path: &mut Path, load: Load, timing: Timing) -> Result<(Outcome, PhaseCpu), BenchError> {
    let before = path
        .process
        .as_ref()
        .map(Process::cpu_seconds)
        .transpose()?;
    let ends_before = path.ends_cpu()?;
    let machine_before = usage::machine_ticks()?;
    let out = path.source.run(load, timing)?;
    let machine_after = usage::machine_ticks()?;
    let ends_after = path.ends_cpu()?;
    path.source_pings += out.pings;
    path.source_unexpected += out.unexpected;
    let after = path
        .process
        .as_ref()
        .map(Process::cpu_seconds)
        .transpose()?;
    if let Some(p) = path.process.as_mut() {
        p.check_alive()?;
    }
    Ok((
        out,
        PhaseCpu {
            process: before.zip(after).map(|(b, a)| a.since(b)),
            ends: ends_before.zip(ends_after).map(|(b, a)| a.since(b)),
            busy_cpus: machine_after.busy_cpus_since(machine_before),
        },
    ))
}

fn measure(path: &mut Path, args: &WireArgs, timing: Timing) -> Result<Sample, BenchError> {
    let (rate, rate_cpu) = phase(
        path,
        Load::Rate {
            window: args.rate_window,
        },
        timing,
    )?;
    let (bulk, bulk_cpu) = phase(
        path,
        Load::Bulk {
            window: args.bulk_window,
        },
        timing,
    )?;
    let (lat, _) = phase(path, Load::Latency, timing)?;
    let per = |cpu: Option<f64>, n: u64| cpu.filter(|_| n > 0).map(|c| c * 1e6 / n as f64);
    let cpu_us_per_put_ack = per(rate_cpu.process.map(CpuTime::total), rate.total);
    Ok(Sample {
        rate_per_s: rate.counted as f64 / rate.seconds,
        bulk_gb_per_s: bulk.counted as f64 * f64::from(BULK_SIZE) / bulk.seconds / 1e9,
        p50_us: percentile(&lat.rtts_ns, 50.0) as f64 / 1e3,
        p99_us: percentile(&lat.rtts_ns, 99.0) as f64 / 1e3,
        cpu_us_per_put_ack,
        cpu_kernel_us_per_put_ack: per(rate_cpu.process.map(|c| c.kernel), rate.total),
        cpu_us_per_msg: cpu_us_per_put_ack.map(|c| c / 2.0),
        cpu_us_per_bulk_put: per(bulk_cpu.process.map(CpuTime::total), bulk.total),
        ends_cpu_us_per_put_ack: per(rate_cpu.ends.map(CpuTime::total), rate.total),
        ends_cpu_us_per_bulk_put: per(bulk_cpu.ends.map(CpuTime::total), bulk.total),
        busy_cpus_rate: rate_cpu.busy_cpus,
        busy_cpus_bulk: bulk_cpu.busy_cpus,
    })
}

fn median_sample(samples: &[Sample]) -> Sample {
    let m = |f: fn(&Sample) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
    let mo = |f: fn(&Sample) -> Option<f64>| {
        let v: Vec<f64> = samples.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| median(&v))
    };
    Sample {
        rate_per_s: m(|s| s.rate_per_s),
        bulk_gb_per_s: m(|s| s.bulk_gb_per_s),
        p50_us: m(|s| s.p50_us),
        p99_us: m(|s| s.p99_us),
        cpu_us_per_put_ack: mo(|s| s.cpu_us_per_put_ack),
        cpu_kernel_us_per_put_ack: mo(|s| s.cpu_kernel_us_per_put_ack),
        cpu_us_per_msg: mo(|s| s.cpu_us_per_msg),
        cpu_us_per_bulk_put: mo(|s| s.cpu_us_per_bulk_put),
        ends_cpu_us_per_put_ack: mo(|s| s.ends_cpu_us_per_put_ack),
        ends_cpu_us_per_bulk_put: mo(|s| s.ends_cpu_us_per_bulk_put),
        busy_cpus_rate: mo(|s| s.busy_cpus_rate),
        busy_cpus_bulk: mo(|s| s.busy_cpus_bulk),
    }
}

fn spread(values: &[f64]) -> Spread {
    Spread {
        median: median(values),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// Ratios of `num` over `den`, repeat by repeat.
pub fn ratio(name: String, num: &[Sample], den: &[Sample]) -> RatioReport {
    let r = |f: fn(&Sample) -> f64| {
        let v: Vec<f64> = num
            .iter()
            .zip(den)
            .map(|(a, b)| if f(b) > 0.0 { f(a) / f(b) } else { 0.0 })
            .collect();
        spread(&v)
    };
    RatioReport {
        name,
        rate: r(|s| s.rate_per_s),
        bulk: r(|s| s.bulk_gb_per_s),
        p50: r(|s| s.p50_us),
        p99: r(|s| s.p99_us),
    }
}

/// One measurement slot: a path and, for the relay and router, the CPUs they get.
#[derive(Debug, Clone)]
struct Slot {
    path: usize,
    cpus: Vec<usize>,
    name: String,
    /// Measured while the hostile clients are at work.
    hostile: bool,
}

/// Runs `lnet-bench wire` and prints (and writes) its report.
pub fn run(mut args: WireArgs) -> Result<WireReport, BenchError> {
    let ncpu = std::thread::available_parallelism().map_or(1, usize::from);
    if args.quick {
        args.repeats = 1;
        args.seconds = 0.3;
        args.cores = vec![ncpu];
    }
    if args.cores.is_empty() {
        args.cores = if ncpu > 1 { vec![ncpu, 1] } else { vec![1] };
    }
    if args.router_cpts == Some(0) {
        return Err(BenchError::Usage("--router-cpts must be positive".into()));
    }
    if args.repeats == 0
        || !args.seconds.is_finite()
        || args.seconds <= 0.0
        || args.cores.iter().any(|&c| c == 0 || c > ncpu)
    {
        return Err(BenchError::Usage(format!(
            "--repeats and --seconds must be positive and --cores between 1 and {ncpu}"
        )));
    }
    if args.port > 25990 {
        return Err(BenchError::Usage(
            "--port must leave room below 25999".into(),
        ));
    }
    let measure_d = Duration::from_secs_f64(args.seconds);
    let timing = Timing {
        warmup: (measure_d / 4).min(Duration::from_millis(500)),
        measure: measure_d,
        drain: DRAIN,
    };
    let per_core = if args.hostile { 3 } else { 2 };
    let slots_per_repeat = 1 + per_core * args.cores.len();
    let phase_bound = timing.warmup + timing.measure + DRAIN;
    let lifetime =
        (phase_bound * 3 * u32::try_from(slots_per_repeat * args.repeats).unwrap_or(u32::MAX))
            .as_secs()
            + 120;
    let loadavg_start = loadavg();
    let sharing = format!(
        "{ncpu} CPU(s). The source and the sink are threads of lnet-bench, not pinned; the relay \
         and the router are processes pinned to CPUs 0..N-1 for N in {:?} (router@N: an \
         lnet-router of its own with cpu_npartitions N), so the load generator shares {} \
         with them",
        args.cores,
        if ncpu <= 2 { "the cores" } else { "some cores" }
    );
    println!("wire: {sharing}; load {loadavg_start}");
    println!("wire: relay = {}", args.relay.describe());
    println!(
        "wire: router peer_credits = {} (its peer NIs' tx and router-buffer credits)",
        args.router_peer_credits
            .map_or("8, the default".to_string(), |pc| pc.to_string())
    );
    if let Some(n) = args.router_cpts {
        println!("wire: every router runs {n} CPT(s) (--router-cpts), whatever its CPUs");
    }
    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        what: "create a temporary directory".into(),
        source,
    })?;
    let mut paths = vec![
        setup_direct(&args)?,
        setup_relay(&args, dir.path(), lifetime)?,
    ];
    // Paths 2.. are the routers, in the order of `--cores`.
    for (index, &c) in args.cores.iter().enumerate() {
        paths.push(setup_router(&args, dir.path(), index, c)?);
    }
    let mut slots = vec![Slot {
        path: 0,
        cpus: Vec::new(),
        name: "direct".into(),
        hostile: false,
    }];
    for (index, &c) in args.cores.iter().enumerate() {
        let cpus: Vec<usize> = (0..c).collect();
        for (path, kind) in [(1, "relay"), (2 + index, "router")] {
            slots.push(Slot {
                path,
                cpus: cpus.clone(),
                name: format!("{kind}@{c}"),
                hostile: false,
            });
        }
        if args.hostile {
            slots.push(Slot {
                path: 2 + index,
                cpus: cpus.clone(),
                name: format!("router@{c}+hostile"),
                hostile: true,
            });
        }
    }
    let mut hostile_total = args.hostile.then(HostileCounts::default);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); slots.len()];
    let mut policies: Vec<Option<BTreeMap<String, usize>>> = vec![None; slots.len()];
    for repeat in 0..args.repeats {
        for k in 0..slots.len() {
            let i = (k + repeat) % slots.len();
            let (Some(slot), Some(list)) = (slots.get(i), samples.get_mut(i)) else {
                continue;
            };
            let Some(path) = paths.get_mut(slot.path) else {
                continue;
            };
            if let Some(p) = &path.process {
                p.pin(&slot.cpus)?;
            }
            let s = if slot.hostile {
                let load = HostileLoad::start(
                    hostile_targets(&args, slot.path.saturating_sub(2))?,
                    HOSTILE_WARMUP,
                )?;
                let s = measure(path, &args, timing);
                let did = load.stop();
                println!("wire: hostile clients: {did:?}");
                if let Some(t) = hostile_total.as_mut() {
                    t.add(&did);
                }
                s?
            } else {
                measure(path, &args, timing)?
            };
            if let (Some(p), Some(kept @ None)) = (&path.process, policies.get_mut(i)) {
                *kept = Some(child::thread_policies(p.pid())?);
            }
            println!(
                "wire: repeat {} {:<10} {:>10.0} PUT+ACK/s {:>6.2} GB/s p50 {:>7.1} us p99 {:>7.1} us{}",
                repeat + 1,
                slot.name,
                s.rate_per_s,
                s.bulk_gb_per_s,
                s.p50_us,
                s.p99_us,
                s.cpu_us_per_put_ack
                    .map(|c| format!(
                        " cpu {c:.2} us/PUT+ACK (kernel {})",
                        s.cpu_kernel_us_per_put_ack
                            .map_or("-".to_string(), |k| format!("{k:.2}"))
                    ))
                    .unwrap_or_default()
                    + &s.ends_cpu_us_per_put_ack
                        .zip(s.busy_cpus_rate)
                        .map(|(e, b)| format!(" ends {e:.2} us/PUT+ACK busy {b:.2} CPUs"))
                        .unwrap_or_default()
            );
            list.push(s);
        }
    }
    let (mut pings_answered, mut unexpected) = (0, 0);
    for p in &mut paths {
        if let Some(s) = p.sink.take() {
            let t = s.stop()?;
            pings_answered += t.pings;
            unexpected += t.unexpected;
        }
        pings_answered += p.source_pings;
        unexpected += p.source_unexpected;
        tracing::debug!(kind = p.kind, "wire: path done");
    }
    drop(paths);
    let reports: Vec<PathReport> = slots
        .iter()
        .zip(&samples)
        .zip(policies)
        .map(|((slot, s), thread_policies)| PathReport {
            name: slot.name.clone(),
            cpus: slot.cpus.clone(),
            thread_policies,
            samples: s.clone(),
            median: median_sample(s),
        })
        .collect();
    let mut ratios = Vec::new();
    let direct = samples.first().cloned().unwrap_or_default();
    for (j, &c) in args.cores.iter().enumerate() {
        let relay = samples.get(1 + per_core * j).cloned().unwrap_or_default();
        let router = samples.get(2 + per_core * j).cloned().unwrap_or_default();
        ratios.push(ratio(format!("router@{c}/relay@{c}"), &router, &relay));
        ratios.push(ratio(format!("router@{c}/direct"), &router, &direct));
        if args.hostile {
            let hostile = samples.get(3 + per_core * j).cloned().unwrap_or_default();
            ratios.push(ratio(
                format!("router@{c}+hostile/router@{c}"),
                &hostile,
                &router,
            ));
        }
    }
    let report = WireReport {
        cpus: ncpu,
        sharing,
        relay: args.relay.describe().to_string(),
        repeats: args.repeats,
        seconds: args.seconds,
        rate_window: args.rate_window,
        bulk_window: args.bulk_window,
        peer_credits: args.peer_credits,
        router_peer_credits: args.router_peer_credits,
        router_cpts: args.router_cpts,
        paths: reports,
        ratios,
        pings_answered,
        unexpected,
        loadavg_start,
        loadavg_end: loadavg(),
        hostile: hostile_total,
    };
    print_report(&report);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(report)
}

fn print_report(r: &WireReport) {
    println!(
        "\n{:<10} {:>12} {:>9} {:>9} {:>9} {:>14} {:>11} {:>14}",
        "path",
        "PUT+ACK/s",
        "GB/s",
        "p50 us",
        "p99 us",
        "cpu us/PUT+ACK",
        "(kernel us)",
        "cpu us/1MiB PUT"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for p in &r.paths {
        let m = &p.median;
        println!(
            "{:<10} {:>12.0} {:>9.2} {:>9.1} {:>9.1} {:>14} {:>11} {:>14}",
            p.name,
            m.rate_per_s,
            m.bulk_gb_per_s,
            m.p50_us,
            m.p99_us,
            opt(m.cpu_us_per_put_ack),
            opt(m.cpu_kernel_us_per_put_ack),
            opt(m.cpu_us_per_bulk_put)
        );
    }
    println!(
        "\nwhere the CPUs went: the end nodes' two threads (source and sink) per message, \
         and the machine's busy CPUs (of {})",
        r.cpus
    );
    println!(
        "{:<10} {:>16} {:>16} {:>17} {:>16}",
        "path", "ends us/PUT+ACK", "busy CPUs rate", "ends us/1MiB PUT", "busy CPUs bulk"
    );
    for p in &r.paths {
        let m = &p.median;
        println!(
            "{:<10} {:>16} {:>16} {:>17} {:>16}",
            p.name,
            opt(m.ends_cpu_us_per_put_ack),
            opt(m.busy_cpus_rate),
            opt(m.ends_cpu_us_per_bulk_put),
            opt(m.busy_cpus_bulk)
        );
    }
    println!("\nthreads of each process by scheduling policy:");
    for p in &r.paths {
        if let Some(t) = &p.thread_policies {
            let by: Vec<String> = t.iter().map(|(k, n)| format!("{n} {k}")).collect();
            println!("{:<10} {}", p.name, by.join(", "));
        }
    }
    println!("\nratios (median, min..max over {} repeats):", r.repeats);
    let s = |x: &Spread| format!("{:.3} ({:.3}..{:.3})", x.median, x.min, x.max);
    for q in &r.ratios {
        println!(
            "{:<20} rate {}  bulk {}  p50 {}  p99 {}",
            q.name,
            s(&q.rate),
            s(&q.bulk),
            s(&q.p50),
            s(&q.p99)
        );
    }
    println!(
        "pings answered by the end nodes: {}; other messages ignored: {}",
        r.pings_answered, r.unexpected
    );
    if let Some(h) = &r.hostile {
        println!("hostile clients, over every hostile measurement: {h:?}");
    }
    println!("load: {} -> {}", r.loadavg_start, r.loadavg_end);
}

#[cfg(test)]
mod tests;
