//! `lnet-bench failover`: how long traffic takes to move to another router when one
//! fails, and to come back after the repair.
//!
//! End node A (tcp) reaches end node B (tcp1) through routers R1 and R2; A's routes
//! prefer R1 (priority 0 against 1), and so do B's, so that every PUT crosses R1 while it
//! is usable. A starts a PUT (with an ACK, `hdr_data` its sequence number) every
//! `--interval-ms`; B's MD logs each arrival with the router it came through and counts
//! the `hdr_data` values it sees twice. Then, per scenario:
//!
//! * `link`: R1's far NI (on tcp1) has its link set down (`Node::set_ni_link`, what the
//!   link watcher calls); repaired by setting it up again;
//! * `kill`: R1 runs as an `lnet-router run` process and is killed with SIGKILL; repaired
//!   by starting it again with the same configuration;
//! * `silent`: R1's far NI drops everything it receives (a fault rule): its link stays up
//!   and nothing comes back from tcp1; repaired by removing the rule.
//!
//! Measured: the time from the failure to the first PUT that arrives at B through R2, and
//! from the repair to the first that arrives through R1 again; the PUTs that ended with a
//! failure event, and the duplicates B received. Nothing is asserted: a time not reached
//! within `--bound` seconds is reported as missing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use actors::{MsgEventKind, Node, PutRequest};
use bytes::Bytes;
use lnet::fault::{FaultRule, FaultTrigger, NidMatch};
use lnet::Nid;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::topo::{
    add_route, ip_of, nid_at, node_err, start_node, Host, NiSpec, NodeParams, Sink, MATCH_BITS,
    PORTAL,
};
use crate::{write_json, BenchError};

/// The failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// A gateway NI's link goes down.
    Link,
    /// A router process is killed (SIGKILL).
    Kill,
    /// The far net falls silent (everything R1 receives there is dropped).
    Silent,
}

impl Scenario {
    fn index(self) -> u8 {
        match self {
            Scenario::Link => 0,
            Scenario::Kill => 1,
            Scenario::Silent => 2,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scenario::Link => "link",
            Scenario::Kill => "kill",
            Scenario::Silent => "silent",
        }
    }

    /// The kernel's figures for the same failure (measured elsewhere), for the printout.
    fn kernel(self) -> &'static str {
        match self {
            Scenario::Link => "kernel: about 1-3 s",
            Scenario::Kill => "kernel: not measured here",
            Scenario::Silent => "kernel: 58-110 s to notice, 104-141 s to recover",
        }
    }
}

/// `lnet-bench failover`.
#[derive(Debug, Clone, clap::Args)]
pub struct FailoverArgs {
    /// The scenarios, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Link, Scenario::Kill, Scenario::Silent])]
    pub scenarios: Vec<Scenario>,
    /// The `lnet-router` binary the `kill` scenario runs.
    #[arg(long, default_value = "target/release/lnet-router")]
    pub router_bin: PathBuf,
    /// Milliseconds between two PUTs.
    #[arg(long, default_value_t = 10)]
    pub interval_ms: u64,
    /// PUT payload, bytes.
    #[arg(long, default_value_t = 4096)]
    pub size: u32,
    /// Transaction timeout of each PUT, seconds.
    #[arg(long, default_value_t = 10)]
    pub put_timeout: u64,
    /// Most seconds to wait for the traffic to move (each way).
    #[arg(long, default_value_t = 60)]
    pub bound: u64,
    /// Seconds the failure lasts after the traffic moved.
    #[arg(long, default_value_t = 3)]
    pub hold: u64,
    /// The first acceptor port (one per scenario, 100 apart).
    #[arg(long, default_value_t = 25400)]
    pub port: u16,
    /// Write the report as JSON to this file ("-": standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// One scenario's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    /// Which.
    pub scenario: Scenario,
    /// Seconds from the failure to the first PUT arriving through R2; `None`: not within
    /// the bound.
    pub failover_s: Option<f64>,
    /// Seconds from the repair to the first PUT arriving through R1 again.
    pub recover_s: Option<f64>,
    /// PUTs started.
    pub puts: u64,
    /// PUTs ACKed.
    pub acked: u64,
    /// PUTs that ended with a failure event (or were refused).
    pub failed: u64,
    /// PUTs B received (duplicates included).
    pub delivered: u64,
    /// PUTs B received a second time or more.
    pub duplicates: u64,
    /// The kernel's figure for comparison.
    pub kernel: &'static str,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    /// Milliseconds between PUTs.
    pub interval_ms: u64,
    /// PUT payload.
    pub size: u32,
    /// Router check interval and ping timeout of the end nodes, seconds.
    pub router_check_s: u64,
    /// Per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// `/proc/loadavg` at the start.
    pub loadavg: String,
}

/// A router running as an `lnet-router run` process; killed when dropped.
struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    fn start(bin: &Path, config: &Path, log: &Path) -> Result<Daemon, BenchError> {
        let err = std::fs::File::create(log).map_err(|source| BenchError::Io {
            what: format!("create {}", log.display()),
            source,
        })?;
        let child = Command::new(bin)
            .arg("run")
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|source| BenchError::Io {
                what: format!("start {}", bin.display()),
                source,
            })?;
        Ok(Daemon { child: Some(child) })
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // std's kill is SIGKILL: the router cannot drain or say goodbye.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn wait_listening(addrs: &[SocketAddr], bound: Duration) -> Result<(), BenchError> {
    let start = Instant::now();
    for a in addrs {
        loop {
            let attempt = tokio::time::timeout(
                Duration::from_millis(500),
                tokio::net::TcpStream::connect(a),
            )
            .await;
            if matches!(attempt, Ok(Ok(_))) {
                break;
            }
            if start.elapsed() > bound {
                return Err(BenchError::Timeout(format!("nothing listens on {a}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

fn router_yaml(near: Nid, far: Nid, port: u16) -> String {
    format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: {near}
    - net type: tcp1
      local NI(s):
        - nid: {far}
routing:
    enable: 1
lnet-router:
    acceptor_port: {port}
    alive_router_check_interval: 1
    router_ping_timeout: 1
"
    )
}

/// R1 of a scenario: an in-process node or a process.
enum R1 {
    Node(Node),
    Process {
        daemon: Daemon,
        bin: PathBuf,
        config: PathBuf,
        log: PathBuf,
        listen: Vec<SocketAddr>,
    },
}

#[derive(Debug, Default, Clone, Copy)]
struct Traffic {
    puts: u64,
    acked: u64,
    failed: u64,
}

async fn put_one(a: Node, dest: Nid, data: Bytes, seq: u64, timeout: Duration) -> bool {
    let req = PutRequest {
        dest,
        portal: PORTAL,
        match_bits: MATCH_BITS,
        hdr_data: seq,
        payload: data,
        ack: true,
        timeout,
    };
    match a.put(req).await {
        Ok(txn) => {
            let events = txn.finish().await;
            events.iter().all(|e| e.status.is_ok())
                && events.last().is_some_and(|e| e.kind == MsgEventKind::Ack)
        }
        Err(_) => false,
    }
}

/// Starts a PUT every `interval` until `stop` (or `max` PUTs), then waits for the last
/// ones (each bounded by its timeout).
async fn traffic(
    a: Node,
    dest: Nid,
    data: Bytes,
    interval: Duration,
    timeout: Duration,
    max: u64,
    stop: watch::Receiver<bool>,
) -> Traffic {
    let mut t = Traffic::default();
    let mut running = JoinSet::new();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let tally = |t: &mut Traffic, r: Result<bool, tokio::task::JoinError>| {
        if matches!(r, Ok(true)) {
            t.acked = t.acked.saturating_add(1);
        } else {
            t.failed = t.failed.saturating_add(1);
        }
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if *stop.borrow() || t.puts >= max {
                    break;
                }
                if running.len() < 512 {
                    running.spawn(put_one(a.clone(), dest, data.clone(), t.puts, timeout));
                    t.puts = t.puts.saturating_add(1);
                }
            }
            Some(r) = running.join_next(), if !running.is_empty() => tally(&mut t, r),
        }
    }
    while let Some(r) = running.join_next().await {
        tally(&mut t, r);
    }
    t
}

/// Waits (at most `bound`) for an arrival after `since` through `via`; the time it took.
async fn first_through(sink: &Sink, via: Nid, since: Instant, bound: Duration) -> Option<f64> {
    let end = since + bound;
    loop {
        let hit = sink
            .arrivals()
            .iter()
            .filter(|a| a.at >= since && a.from == via)
            .map(|a| a.at)
            .min();
        if let Some(at) = hit {
            return Some(at.duration_since(since).as_secs_f64());
        }
        if Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn scenario(
    s: Scenario,
    args: &FailoverArgs,
    hosts: &[Host; 3],
    dir: &Path,
) -> Result<ScenarioReport, BenchError> {
    let [a_host, b_host, r_host] = hosts;
    let k = s.index();
    let port = args
        .port
        .checked_add(100 * u16::from(k))
        .ok_or_else(|| BenchError::Usage("--port too high".to_owned()))?;
    let near = |i: u8| nid_at(Ipv4Addr::new(127, 0, 56, 10 * k + i), "tcp");
    let far = |i: u8| nid_at(Ipv4Addr::new(127, 0, 57, 10 * k + i), "tcp1");
    let (a_nid, r1n, r2n) = (near(1)?, near(2)?, near(3)?);
    let (b_nid, r1f, r2f) = (far(1)?, far(2)?, far(3)?);
    let params = NodeParams {
        router_check_interval: Duration::from_secs(1),
        router_ping_timeout: Duration::from_secs(1),
        ..NodeParams::default()
    };
    let router_nis = |n, f| vec![NiSpec::new(n, port), NiSpec::new(f, port)];
    let mut r1 = match s {
        Scenario::Kill => {
            let sub = dir.join(s.name());
            std::fs::create_dir_all(&sub).map_err(|source| BenchError::Io {
                what: format!("create {}", sub.display()),
                source,
            })?;
            let config = sub.join("r1.yaml");
            std::fs::write(&config, router_yaml(r1n, r1f, port)).map_err(|source| {
                BenchError::Io {
                    what: format!("write {}", config.display()),
                    source,
                }
            })?;
            let log = sub.join("r1.log");
            let listen = vec![
                SocketAddr::new(IpAddr::V4(ip_of(r1n)?), port),
                SocketAddr::new(IpAddr::V4(ip_of(r1f)?), port),
            ];
            let daemon = Daemon::start(&args.router_bin, &config, &log)?;
            wait_listening(&listen, Duration::from_secs(30)).await?;
            R1::Process {
                daemon,
                bin: args.router_bin.clone(),
                config,
                log,
                listen,
            }
        }
        Scenario::Link | Scenario::Silent => {
            R1::Node(start_node(r_host, router_nis(r1n, r1f), true, params).await?)
        }
    };
    let _r2 = start_node(r_host, router_nis(r2n, r2f), true, params).await?;
    let a = start_node(a_host, vec![NiSpec::new(a_nid, port)], false, params).await?;
    let b = start_node(b_host, vec![NiSpec::new(b_nid, port)], false, params).await?;
    add_route(&a, "tcp1", r1n, 0).await?;
    add_route(&a, "tcp1", r2n, 1).await?;
    add_route(&b, "tcp", r1f, 0).await?;
    add_route(&b, "tcp", r2f, 1).await?;
    let sink = Sink::attach(b_host, &b, Bytes::new(), true, true).await?;
    // Both routers checked and the path up before the traffic starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut up = false;
    for _ in 0..20 {
        if a.ping(b_nid, Duration::from_secs(2)).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if !up {
        return Err(BenchError::Setup(format!(
            "{}: B does not answer",
            s.name()
        )));
    }
    let interval = Duration::from_millis(args.interval_ms.max(1));
    let bound = Duration::from_secs(args.bound.max(1));
    let total_s = 2 * args.bound + args.hold + 10;
    let max = total_s.saturating_mul(1000) / args.interval_ms.max(1);
    let (stop_tx, stop_rx) = watch::channel(false);
    let gen = {
        let a = a.clone();
        let data = crate::load::payload(args.size);
        let timeout = Duration::from_secs(args.put_timeout.max(1));
        // The generator runs on A's host; its handle comes back here.
        a_host.run(move || {
            let handle = actix::spawn(traffic(a, b_nid, data, interval, timeout, max, stop_rx));
            std::future::ready(handle)
        })
    };
    let gen = gen.await?;
    // Steady state through R1.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t_fail = Instant::now();
    let mut fault = None;
    match &mut r1 {
        R1::Node(r) => match s {
            Scenario::Link => r
                .set_ni_link(r1f, false)
                .await
                .map_err(|e| node_err(format!("link down {r1f}"), e))?,
            _ => {
                let rule = FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All).at(r1f);
                fault = Some(
                    r.add_fault_rule(rule)
                        .map_err(|e| node_err(format!("fault rule on {r1f}"), e))?,
                );
            }
        },
        R1::Process { daemon, .. } => daemon.kill(),
    }
    println!("failover {}: R1 failed", s.name());
    let failover_s = first_through(&sink, r2f, t_fail, bound).await;
    println!(
        "failover {}: first PUT through R2 after {}",
        s.name(),
        secs(failover_s)
    );
    tokio::time::sleep(Duration::from_secs(args.hold)).await;
    let t_repair = Instant::now();
    match &mut r1 {
        R1::Node(r) => match (s, fault) {
            (Scenario::Link, _) => r
                .set_ni_link(r1f, true)
                .await
                .map_err(|e| node_err(format!("link up {r1f}"), e))?,
            (_, Some(rule)) => {
                r.remove_fault_rule(rule);
            }
            _ => {}
        },
        R1::Process {
            daemon,
            bin,
            config,
            log,
            listen,
        } => {
            *daemon = Daemon::start(bin, config, log)?;
            wait_listening(listen, Duration::from_secs(30)).await?;
        }
    }
    println!("failover {}: R1 repaired", s.name());
    let recover_s = first_through(&sink, r1f, t_repair, bound).await;
    println!(
        "failover {}: first PUT through R1 again after {}",
        s.name(),
        secs(recover_s)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = stop_tx.send(true);
    let traffic = tokio::time::timeout(Duration::from_secs(args.put_timeout + 30), gen)
        .await
        .map_err(|_| BenchError::Timeout(format!("{}: the traffic did not stop", s.name())))?
        .map_err(|_| BenchError::Setup(format!("{}: the traffic task failed", s.name())))?;
    // The last deliveries reach the sink.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let counts = sink.counts();
    if let R1::Process { mut daemon, .. } = r1 {
        daemon.kill();
    }
    let report = ScenarioReport {
        scenario: s,
        failover_s,
        recover_s,
        puts: traffic.puts,
        acked: traffic.acked,
        failed: traffic.failed,
        delivered: counts.delivered,
        duplicates: counts.duplicates,
        kernel: s.kernel(),
    };
    println!(
        "failover {}: failover {}, back {}; {} PUTs, {} ACKed, {} failed; B got {} ({} duplicates); {}",
        s.name(),
        secs(report.failover_s),
        secs(report.recover_s),
        report.puts,
        report.acked,
        report.failed,
        report.delivered,
        report.duplicates,
        report.kernel
    );
    Ok(report)
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(
        || "none within the bound".to_owned(),
        |s| format!("{s:.3} s"),
    )
}

/// Runs the scenarios; prints and (with `--json`) writes the report. Must run inside an
/// actix system.
pub async fn run(args: FailoverArgs) -> Result<FailoverReport, BenchError> {
    if args.scenarios.contains(&Scenario::Kill) && !args.router_bin.is_file() {
        return Err(BenchError::Usage(format!(
            "{} not found: build it (cargo build --release -p router) or pass --router-bin",
            args.router_bin.display()
        )));
    }
    if args.bound > 600 || args.hold > 600 {
        return Err(BenchError::Usage(
            "--bound and --hold: at most 600 s".to_owned(),
        ));
    }
    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        what: "temporary directory".to_owned(),
        source,
    })?;
    let hosts = [
        Host::new("a-side"),
        Host::new("b-side"),
        Host::new("routers"),
    ];
    let loadavg = crate::compare::loadavg();
    let mut scenarios = Vec::new();
    for s in &args.scenarios {
        scenarios.push(scenario(*s, &args, &hosts, dir.path()).await?);
    }
    let report = FailoverReport {
        interval_ms: args.interval_ms,
        size: args.size,
        router_check_s: 1,
        scenarios,
        loadavg,
    };
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(report)
}
