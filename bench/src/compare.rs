//! `lnet-bench compare`: the router against a plain TCP relay and against no hop at all,
//! in the same run.
//!
//! Three configurations run side by side in this process, over socklnd on loopback
//! addresses, each node on a thread of its own (A's side, B's side, the box in the middle;
//! the load runs on A's thread, as a client's would):
//!
//! * **direct** (a): end node A 127.0.52.1@tcp to end node B 127.0.52.2@tcp;
//! * **relay** (b): A 127.0.53.1@tcp to B 127.0.53.2@tcp, every TCP connection through
//!   [`crate::relay`]: both ends dial port P+101, where the relay listens on the peer's
//!   address and copies to the peer's acceptor on port P+100;
//! * **router** (c): A 127.0.54.1@tcp to B 127.0.55.1@tcp1 through a routing node with
//!   127.0.54.2@tcp and 127.0.55.2@tcp1, each end with a route to the other's net.
//!
//! Every node has the same credits ([`NodeParams`]), every load the same concurrency and
//! payloads. Each repeat measures, for each configuration in turn (the order rotating
//! from one repeat to the next): bulk PUTs (1 MiB, with an ACK) in MiB/s, the rate of
//! 0-byte PUT+ACK in messages/s, and single 0-byte PUT+ACK round trips (p50, p99). The
//! ratios router/relay and router/direct are taken within each repeat; the report gives
//! their median and their spread (min..max over the repeats).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use actors::Node;
use bytes::Bytes;
use lnet::Nid;
use serde::Serialize;

use crate::load::{self, median, percentile, LoadSpec, Op};
use crate::relay::{Relay, RELAY_BUFFER};
use crate::topo::{add_route, ip_of, nid, start_node, Host, NiSpec, NodeParams, Sink};
use crate::{write_json, BenchError};

/// `lnet-bench compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// Repeats of every measurement.
    #[arg(long, default_value_t = 5)]
    pub repeats: u32,
    /// Seconds of each measurement.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Payload of the bulk PUTs, bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub bulk_size: u32,
    /// Bulk PUTs in flight.
    #[arg(long, default_value_t = 16)]
    pub bulk_concurrency: usize,
    /// 0-byte PUTs in flight for the rate.
    #[arg(long, default_value_t = 64)]
    pub rate_concurrency: usize,
    /// Per-peer credits of every node (socklnd and LNet; the router's router-buffer
    /// credits per peer too).
    #[arg(long, default_value_t = 8)]
    pub peer_credits: u32,
    /// socklnd conns_per_peer of every node.
    #[arg(long, default_value_t = 1)]
    pub conns_per_peer: u32,
    /// Transaction timeout of every PUT, seconds. Each PUT keeps a timer of this length
    /// on the sending node until it fires, so it sets how many timers an end node
    /// carries (rate x timeout).
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// A smoke run: 1 repeat of 0.5 s each, 64 KiB bulk PUTs.
    #[arg(long)]
    pub quick: bool,
    /// The first of the ports used (P, P+100, P+101, P+200).
    #[arg(long, default_value_t = 25100)]
    pub port: u16,
    /// Where the JSON report goes ("-": standard output).
    #[arg(long, default_value = "target/bench/report.json")]
    pub json: String,
}

/// The three configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Config {
    /// (a) end node to end node.
    Direct,
    /// (b) through the TCP relay.
    Relay,
    /// (c) through the router node.
    Router,
}

impl Config {
    const ALL: [Config; 3] = [Config::Direct, Config::Relay, Config::Router];

    fn name(self) -> &'static str {
        match self {
            Config::Direct => "direct",
            Config::Relay => "relay",
            Config::Router => "router",
        }
    }
}

/// One configuration, set up.
struct Setup {
    a: Node,
    b_nid: Nid,
    _sink: Sink,
}

/// One repeat's numbers for one configuration.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sample {
    /// Bulk PUT MiB/s.
    pub bulk_mib_s: f64,
    /// Bulk PUTs that failed.
    pub bulk_failed: u64,
    /// 0-byte PUT+ACK per second.
    pub rate_msgs_s: f64,
    /// Rate PUTs that failed.
    pub rate_failed: u64,
    /// Round trips measured.
    pub latency_samples: usize,
    /// Median round trip, µs.
    pub latency_p50_us: u64,
    /// 99th percentile round trip, µs.
    pub latency_p99_us: u64,
}

/// A ratio over the repeats.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Ratio {
    /// Median of the per-repeat ratios.
    pub median: f64,
    /// Least.
    pub min: f64,
    /// Most.
    pub max: f64,
}

impl Ratio {
    fn of(values: &[f64]) -> Ratio {
        let s = load::Spread::of(values);
        Ratio {
            median: median(values),
            min: s.min,
            max: s.max,
        }
    }
}

/// A goal and whether the run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// What is compared.
    pub what: &'static str,
    /// The goal.
    pub goal: &'static str,
    /// The median ratio.
    pub value: f64,
    /// Whether the median meets the goal.
    pub met: bool,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// The settings.
    pub settings: Settings,
    /// `/proc/loadavg` before and after, and the number of CPUs.
    pub machine: Machine,
    /// Per repeat, per configuration.
    pub repeats: Vec<BTreeMap<Config, Sample>>,
    /// Per metric: "router_over_relay" and "router_over_direct".
    pub ratios: BTreeMap<&'static str, BTreeMap<&'static str, Ratio>>,
    /// The goals.
    pub goals: Vec<Goal>,
    /// The router node's counters at the end.
    pub router_counters: BTreeMap<String, u64>,
}

/// The settings of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Repeats.
    pub repeats: u32,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Bulk payload bytes.
    pub bulk_size: u32,
    /// Bulk concurrency.
    pub bulk_concurrency: usize,
    /// Transaction timeout of every PUT, seconds.
    pub timeout_s: u64,
    /// Rate concurrency.
    pub rate_concurrency: usize,
    /// Credits and timers of every node.
    pub peer_credits: u32,
    /// NI credits.
    pub ni_credits: u32,
    /// socklnd conns_per_peer.
    pub conns_per_peer: u32,
    /// The relay's copy buffer per direction.
    pub relay_buffer: usize,
    /// Whether this was a `--quick` run.
    pub quick: bool,
}

/// The machine while it ran.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPUs available.
    pub cpus: usize,
    /// `/proc/loadavg` before.
    pub loadavg_before: String,
    /// `/proc/loadavg` after.
    pub loadavg_after: String,
}

/// `/proc/loadavg` (empty if unreadable).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn port_plus(p: u16, n: u16) -> Result<u16, BenchError> {
    p.checked_add(n)
        .ok_or_else(|| BenchError::Usage(format!("--port {p} too high")))
}

async fn setup(
    config: Config,
    hosts: &[Host; 3],
    params: NodeParams,
    port: u16,
    relays: &mut Vec<Relay>,
    router: &mut Option<Node>,
) -> Result<Setup, BenchError> {
    let [a_host, b_host, mid] = hosts;
    let (a, b_nid, b) = match config {
        Config::Direct => {
            let (an, bn) = (nid("127.0.52.1@tcp")?, nid("127.0.52.2@tcp")?);
            let p = port;
            let a = start_node(a_host, vec![NiSpec::new(an, p)], false, params).await?;
            let b = start_node(b_host, vec![NiSpec::new(bn, p)], false, params).await?;
            (a, bn, b)
        }
        Config::Relay => {
            let (an, bn) = (nid("127.0.53.1@tcp")?, nid("127.0.53.2@tcp")?);
            let listen = port_plus(port, 100)?;
            let dial = port_plus(port, 101)?;
            let spec = |n| NiSpec {
                nid: n,
                listen_port: listen,
                peer_port: dial,
            };
            relays.push(
                Relay::start(
                    mid,
                    vec![
                        (SocketAddr::new(IpAddr::V4(ip_of(an)?), dial), listen),
                        (SocketAddr::new(IpAddr::V4(ip_of(bn)?), dial), listen),
                    ],
                    RELAY_BUFFER,
                )
                .await?,
            );
            let a = start_node(a_host, vec![spec(an)], false, params).await?;
            let b = start_node(b_host, vec![spec(bn)], false, params).await?;
            (a, bn, b)
        }
        Config::Router => {
            let (an, bn) = (nid("127.0.54.1@tcp")?, nid("127.0.55.1@tcp1")?);
            let (rn, rf) = (nid("127.0.54.2@tcp")?, nid("127.0.55.2@tcp1")?);
            let p = port_plus(port, 200)?;
            let r = start_node(
                mid,
                vec![NiSpec::new(rn, p), NiSpec::new(rf, p)],
                true,
                params,
            )
            .await?;
            let a = start_node(a_host, vec![NiSpec::new(an, p)], false, params).await?;
            let b = start_node(b_host, vec![NiSpec::new(bn, p)], false, params).await?;
            add_route(&a, "tcp1", rn, 0).await?;
            add_route(&b, "tcp", rf, 0).await?;
            *router = Some(r);
            (a, bn, b)
        }
    };
    let sink = Sink::attach(b_host, &b, Bytes::new(), false, false).await?;
    // Connections up (and the route's gateway answering) before anything is measured.
    let mut ok = false;
    for _ in 0..10 {
        if a.ping(b_nid, Duration::from_secs(5)).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !ok {
        return Err(BenchError::Setup(format!(
            "{}: {b_nid} does not answer pings",
            config.name()
        )));
    }
    Ok(Setup {
        a,
        b_nid,
        _sink: sink,
    })
}

async fn measure(host: &Host, s: &Setup, spec: LoadSpec) -> Result<load::LoadResult, BenchError> {
    let a = s.a.clone();
    let dest = s.b_nid;
    host.run(move || async move { load::run(vec![(a, vec![dest])], &spec).await })
        .await
}

fn spec(op: Op, concurrency: usize, seconds: f64, timeout: u64, latencies: bool) -> LoadSpec {
    let d = Duration::from_secs_f64(seconds);
    LoadSpec {
        op,
        concurrency,
        duration: d,
        interval: d,
        timeout: Duration::from_secs(timeout.max(1)),
        latencies,
        progress: None,
    }
}

/// Runs the comparison; prints each measurement and the ratios, writes the JSON. Must run
/// inside an actix system.
pub async fn run(mut args: CompareArgs) -> Result<CompareReport, BenchError> {
    if args.quick {
        args.repeats = 1;
        args.seconds = 0.5;
        args.bulk_size = args.bulk_size.min(64 << 10);
    }
    if args.repeats == 0 || args.repeats > 100 {
        return Err(BenchError::Usage("--repeats: 1 to 100".to_owned()));
    }
    if !(args.seconds > 0.0 && args.seconds <= 600.0) {
        return Err(BenchError::Usage(
            "--seconds: more than 0, at most 600".to_owned(),
        ));
    }
    if args.bulk_size > lnet::LNET_MTU {
        return Err(BenchError::Usage("--bulk-size: at most 1 MiB".to_owned()));
    }
    let before = loadavg();
    let params = NodeParams {
        peer_credits: args.peer_credits.max(1),
        conns_per_peer: args.conns_per_peer,
        ..NodeParams::default()
    };
    let hosts = [
        Host::new("a-side"),
        Host::new("b-side"),
        Host::new("middle"),
    ];
    let mut relays = Vec::new();
    let mut router = None;
    let mut setups = BTreeMap::new();
    for c in Config::ALL {
        let s = setup(c, &hosts, params, args.port, &mut relays, &mut router).await?;
        // A short bulk warm-up: connections of every type, buffers touched.
        measure(
            &hosts[0],
            &s,
            spec(
                Op::Put {
                    size: args.bulk_size,
                },
                args.bulk_concurrency,
                0.3,
                args.timeout,
                false,
            ),
        )
        .await?;
        setups.insert(c, s);
    }
    println!(
        "compare: {} repeat(s) of {} s per measurement; bulk {} B x {} in flight, rate 0 B x {} in flight; load {}",
        args.repeats, args.seconds, args.bulk_size, args.bulk_concurrency, args.rate_concurrency, before
    );
    let mut repeats = Vec::new();
    for r in 0..args.repeats {
        let mut order = Config::ALL.to_vec();
        order.rotate_left(usize::try_from(r).unwrap_or(0) % 3);
        let mut samples: BTreeMap<Config, Sample> = BTreeMap::new();
        for c in &order {
            samples.insert(*c, Sample::default());
        }
        for metric in 0..3 {
            for c in &order {
                let Some(s) = setups.get(c) else { continue };
                let Some(sample) = samples.get_mut(c) else {
                    continue;
                };
                match metric {
                    0 => {
                        let res = measure(
                            &hosts[0],
                            s,
                            spec(
                                Op::Put {
                                    size: args.bulk_size,
                                },
                                args.bulk_concurrency,
                                args.seconds,
                                args.timeout,
                                false,
                            ),
                        )
                        .await?;
                        sample.bulk_mib_s = res.mib_per_s;
                        sample.bulk_failed = res.failed;
                        println!(
                            "compare: repeat {} {:>6} bulk {:>9.1} MiB/s ({} failed)",
                            r + 1,
                            c.name(),
                            res.mib_per_s,
                            res.failed
                        );
                    }
                    1 => {
                        let res = measure(
                            &hosts[0],
                            s,
                            spec(
                                Op::Put { size: 0 },
                                args.rate_concurrency,
                                args.seconds,
                                args.timeout,
                                false,
                            ),
                        )
                        .await?;
                        sample.rate_msgs_s = res.rpc_per_s;
                        sample.rate_failed = res.failed;
                        println!(
                            "compare: repeat {} {:>6} rate {:>9.0} PUT+ACK/s ({} failed)",
                            r + 1,
                            c.name(),
                            res.rpc_per_s,
                            res.failed
                        );
                    }
                    _ => {
                        let res = measure(
                            &hosts[0],
                            s,
                            spec(Op::Put { size: 0 }, 1, args.seconds, args.timeout, true),
                        )
                        .await?;
                        let mut l = res.latencies_us;
                        l.sort_unstable();
                        sample.latency_samples = l.len();
                        sample.latency_p50_us = percentile(&l, 50.0);
                        sample.latency_p99_us = percentile(&l, 99.0);
                        println!(
                            "compare: repeat {} {:>6} latency p50 {} us p99 {} us ({} round trips)",
                            r + 1,
                            c.name(),
                            sample.latency_p50_us,
                            sample.latency_p99_us,
                            l.len()
                        );
                    }
                }
            }
        }
        repeats.push(samples);
    }
    let ratios = ratios(&repeats);
    let goal = |what, goal, value: f64, met: bool| Goal {
        what,
        goal,
        value,
        met,
    };
    let med = |metric: &str, which: &str| {
        ratios
            .get(metric)
            .and_then(|m| m.get(which))
            .map_or(0.0, |r| r.median)
    };
    let bulk = med("bulk_mib_s", "router_over_relay");
    let rate = med("rate_msgs_s", "router_over_relay");
    let p99 = med("latency_p99_us", "router_over_relay");
    let goals = vec![
        goal("bulk MiB/s, router/relay", ">= 0.95", bulk, bulk >= 0.95),
        goal(
            "0-byte PUT+ACK rate, router/relay",
            ">= 0.8",
            rate,
            rate >= 0.8,
        ),
        goal(
            "p99 latency, router/relay",
            "<= 1.2",
            p99,
            p99 > 0.0 && p99 <= 1.2,
        ),
    ];
    let router_counters = match &router {
        Some(r) => r
            .counters()
            .await
            .map(|c| c.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    let report = CompareReport {
        settings: Settings {
            repeats: args.repeats,
            seconds: args.seconds,
            bulk_size: args.bulk_size,
            bulk_concurrency: args.bulk_concurrency,
            timeout_s: args.timeout,
            rate_concurrency: args.rate_concurrency,
            peer_credits: params.peer_credits,
            ni_credits: params.ni_credits,
            conns_per_peer: params.conns_per_peer,
            relay_buffer: RELAY_BUFFER,
            quick: args.quick,
        },
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            loadavg_before: before,
            loadavg_after: loadavg(),
        },
        repeats,
        ratios,
        goals,
        router_counters,
    };
    print_report(&report);
    write_json(&args.json, &report)?;
    drop(relays);
    Ok(report)
}

fn ratios(
    repeats: &[BTreeMap<Config, Sample>],
) -> BTreeMap<&'static str, BTreeMap<&'static str, Ratio>> {
    type Get = fn(&Sample) -> f64;
    let metrics: [(&'static str, Get); 4] = [
        ("bulk_mib_s", |s| s.bulk_mib_s),
        ("rate_msgs_s", |s| s.rate_msgs_s),
        ("latency_p50_us", |s| s.latency_p50_us as f64),
        ("latency_p99_us", |s| s.latency_p99_us as f64),
    ];
    let mut out = BTreeMap::new();
    for (name, get) in metrics {
        let mut per = BTreeMap::new();
        for (label, base) in [
            ("router_over_relay", Config::Relay),
            ("router_over_direct", Config::Direct),
        ] {
            let values: Vec<f64> = repeats
                .iter()
                .filter_map(|m| {
                    let c = get(m.get(&Config::Router)?);
                    let b = get(m.get(&base)?);
                    (b > 0.0).then(|| c / b)
                })
                .collect();
            per.insert(label, Ratio::of(&values));
        }
        out.insert(name, per);
    }
    out
}

/// Prints the ratios and goals.
pub fn print_report(r: &CompareReport) {
    println!(
        "compare: ratios, median (min..max over {} repeat(s)):",
        r.settings.repeats
    );
    for (metric, per) in &r.ratios {
        for (label, ratio) in per {
            println!(
                "  {metric:<15} {label:<19} {:.3} ({:.3}..{:.3})",
                ratio.median, ratio.min, ratio.max
            );
        }
    }
    for g in &r.goals {
        println!(
            "  goal {:<36} {:<8} {:.3} {}",
            g.what,
            g.goal,
            g.value,
            if g.met { "met" } else { "MISSED" }
        );
    }
    println!(
        "compare: load before {} after {} on {} CPU(s)",
        r.machine.loadavg_before, r.machine.loadavg_after, r.machine.cpus
    );
}
