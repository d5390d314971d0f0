//! `lnet-bench chaos`: end nodes A (tcp) and B (tcp1) exchange PUTs with ACKs and GETs
//! through three `lnet-router run` processes while a seeded schedule kills and restarts
//! routers (SIGKILL), sets a router's tcp1 link down and up, adds and deletes drop and
//! delay fault rules, resets health and adds and deletes routes through the routers' REST
//! API. The actions overlap: each starts at its time in the schedule, in a task of its own,
//! whatever earlier ones still hold (a router down, a link down, an API change under way).
//! At the end it checks the invariants ([`invariants`]): every transaction ended, no PUT
//! delivered twice, payloads intact, every router's state equal to what its API
//! acknowledged (an answer lost to a kill settled by what the router shows), no panic in
//! any log.
//!
//! The run works in a network namespace it creates ([`netns`]); without root it prints
//! why and exits 0 with a "skipped" line. The schedule ([`schedule`]) depends on the seed
//! and the span only: a failing seed is printed with the command that replays it (the
//! same actions in the same order; the traffic's timing around them differs from run to
//! run).

pub mod invariants;
pub mod netns;
pub mod routers;
pub mod schedule;
pub mod traffic;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actors::Node;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use self::invariants::{panics_in, Summary};
use self::routers::{ApiOutcome, Check, Router, RouterSpec, ACCEPTOR_PORT};
use self::schedule::{Action, Schedule, ROUTERS};
use self::traffic::{DriveSpec, Tally};
use crate::topo::{add_route, nid_at, start_node, Host, NiSpec, NodeParams};
use crate::{write_json, BenchError};

/// `lnet-bench chaos`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChaosArgs {
    /// The schedule's seed; absent: a random one, printed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Minutes of schedule (its pauses and held failures; restarts add to it).
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Exactly this many actions instead of `--minutes`.
    #[arg(long)]
    pub steps: Option<u64>,
    /// The `lnet-router` binary.
    #[arg(long, default_value = "target/release/lnet-router")]
    pub router_bin: PathBuf,
    /// Milliseconds between two transactions A starts.
    #[arg(long, default_value_t = 20)]
    pub interval_ms: u64,
    /// Most transactions in flight.
    #[arg(long, default_value_t = 32)]
    pub window: usize,
    /// Each transaction's LNet timeout, seconds.
    #[arg(long, default_value_t = 5)]
    pub timeout: u64,
    /// Seconds past its timeout a transaction may take to end before it counts as hung.
    #[arg(long, default_value_t = 5)]
    pub margin: u64,
    /// Write the summary as JSON to this file ("-": standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

impl ChaosArgs {
    fn replay(&self, seed: u64) -> String {
        let span = self.steps.map_or_else(
            || format!("--minutes {}", self.minutes),
            |n| format!("--steps {n}"),
        );
        format!(
            "lnet-bench chaos --seed {seed} {span} --router-bin {}",
            self.router_bin.display()
        )
    }
}

/// A seed from std's per-process random hasher keys, small enough to type.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    bits % 1_000_000_000
}

/// Runs `lnet-bench chaos`: outside the namespace, creates it and runs again inside;
/// inside, the run itself.
pub fn run_blocking(mut args: ChaosArgs) -> ExitCode {
    if !(args.minutes >= 0.0 && args.minutes <= 24.0 * 60.0) {
        eprintln!("lnet-bench chaos: --minutes: 0 to 1440");
        return ExitCode::from(2);
    }
    if std::env::var_os(netns::INNER).is_none() {
        if let Some(why) = netns::cannot_run() {
            println!("chaos: skipped: {why}");
            return ExitCode::SUCCESS;
        }
        if !args.router_bin.is_file() {
            eprintln!(
                "lnet-bench chaos: {} not found: build it (cargo build --release -p router) or pass --router-bin",
                args.router_bin.display()
            );
            return ExitCode::from(2);
        }
        return match netns::run_inside(args.seed.is_none().then(random_seed)) {
            Ok(s) if s.success() => ExitCode::SUCCESS,
            Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(1)).unwrap_or(1)),
            Err(e) => {
                eprintln!("lnet-bench chaos: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let seed = *args.seed.get_or_insert_with(random_seed);
    let system = actix::System::new();
    match system.block_on(run(args.clone(), seed)) {
        Ok(summary) => {
            let v = summary.violations();
            if v.is_empty() {
                println!("chaos: seed {seed} passed");
                ExitCode::SUCCESS
            } else {
                println!("chaos: seed {seed} failed: {}", v.join("; "));
                println!("chaos: replay: {}", args.replay(seed));
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            println!("chaos: seed {seed} failed: {e}");
            println!("chaos: replay: {}", args.replay(seed));
            ExitCode::FAILURE
        }
    }
}

/// A node's parameters: the router check every second (as the routers' own).
fn params() -> NodeParams {
    NodeParams {
        router_check_interval: Duration::from_secs(1),
        router_ping_timeout: Duration::from_secs(1),
        ..NodeParams::default()
    }
}

/// The end nodes: A on tcp (loopback), B on tcp1 (a veth), each with a route to the other
/// net through every router.
struct Ends {
    a: Node,
    b: Node,
    b_nid: lnet::Nid,
}

async fn start_ends(
    a_host: &Host,
    b_host: &Host,
    specs: &[RouterSpec],
) -> Result<Ends, BenchError> {
    let a_nid = nid_at(Ipv4Addr::new(127, 0, 70, 100), "tcp")?;
    let b_nid = nid_at(B_ADDR, "tcp1")?;
    let a = start_node(
        a_host,
        vec![NiSpec::new(a_nid, ACCEPTOR_PORT)],
        false,
        params(),
    )
    .await?;
    let b = start_node(
        b_host,
        vec![NiSpec::new(b_nid, ACCEPTOR_PORT)],
        false,
        params(),
    )
    .await?;
    for r in specs {
        add_route(&a, "tcp1", r.tcp, 0).await?;
        add_route(&b, "tcp", r.tcp1, 0).await?;
    }
    Ok(Ends { a, b, b_nid })
}

/// B's address (on the veth `chb`).
const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 100);

/// What one action's task did.
struct Done {
    /// What it did, for the printout.
    text: String,
    /// A kill's restart and the comparison after it.
    restart: Option<Check>,
    /// An API change's outcome.
    outcome: Option<ApiOutcome>,
}

/// Does one action (a task of its own: actions overlap).
async fn act(action: Action, r: Arc<Router>) -> Result<Done, BenchError> {
    let outcome = match action {
        Action::Kill { down_ms, .. } => {
            let (took, check) = r.kill_and_restart(Duration::from_millis(down_ms)).await?;
            let mut text = format!("restarted in {:.2} s; ", took.as_secs_f64());
            for (what, made) in &check.settled {
                text.push_str(&format!(
                    "unsure {what}: {}; ",
                    if *made { "made" } else { "not made" }
                ));
            }
            match &check.mismatch {
                None => text.push_str("its state is the one acknowledged"),
                Some(m) => text.push_str(&format!("STATE MISMATCH: {m}")),
            }
            return Ok(Done {
                text,
                restart: Some(check),
                outcome: None,
            });
        }
        Action::LinkFlap { down_ms, .. } => {
            r.set_link(false)?;
            tokio::time::sleep(Duration::from_millis(down_ms)).await;
            r.set_link(true)?;
            return Ok(Done {
                text: "link up again".to_owned(),
                restart: None,
                outcome: None,
            });
        }
        Action::FaultAdd {
            side, fault, seed, ..
        } => r.add_fault_rule(side, fault, seed).await,
        Action::FaultDel { .. } => r.del_oldest_fault_rule().await,
        Action::HealthReset { peers, .. } => r.reset_health(peers).await,
        Action::RouteAdd {
            net, hop, priority, ..
        } => r.add_route(net, hop, priority).await,
        Action::RouteDel { net, .. } => r.del_route(net).await,
    };
    Ok(Done {
        text: outcome.to_string(),
        restart: None,
        outcome: Some(outcome),
    })
}

/// Counts what an action's task did.
fn tally_done(summary: &mut Summary, step: usize, action: Action, done: &Done) {
    summary.count_action(action.kind());
    if let Some(check) = &done.restart {
        summary.restarts += 1;
        summary.state_checks += 1;
        summary.count_settled(&check.settled);
        if let Some(m) = &check.mismatch {
            summary
                .state_mismatches
                .push(format!("after the restart of step {step}: {m}"));
        }
    }
    if let Some(o) = &done.outcome {
        summary.count_api(o);
        if o.is_error() {
            summary.api_refusals.push(format!(
                "step {step}: R{}: {action}: {o}",
                action.router() + 1
            ));
        }
    }
}

/// Routers whose process exited without being killed.
fn dead(routers: &[Arc<Router>], summary: &mut Summary, when: &str) {
    for r in routers {
        if r.dead() {
            summary
                .dead_routers
                .push(format!("{} ({when})", r.spec.name()));
        }
    }
}

/// Inside the namespace: the whole run, the routers' files in a temporary directory that
/// is kept (and named) when the run fails. Must run inside an actix system.
async fn run(args: ChaosArgs, seed: u64) -> Result<Summary, BenchError> {
    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        what: "temporary directory".to_owned(),
        source,
    })?;
    let result = run_in(args, seed, dir.path()).await;
    if result.as_ref().map_or(true, |s| !s.violations().is_empty()) {
        let kept = dir.keep();
        println!(
            "chaos: the routers' logs, stores and configurations are kept in {}",
            kept.display()
        );
    }
    result
}

async fn run_in(args: ChaosArgs, seed: u64, dir: &std::path::Path) -> Result<Summary, BenchError> {
    let t_start = Instant::now();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked 0..=1440
    let span = Duration::from_millis((args.minutes * 60_000.0) as u64);
    let schedule = Schedule::generate(seed, span, args.steps);
    let overlaps = schedule.overlaps();
    println!(
        "chaos: seed {seed}: {} actions over {} (replay: {})",
        schedule.steps.len(),
        args.steps
            .map_or_else(|| format!("{} min", args.minutes), |n| format!("{n} steps")),
        args.replay(seed)
    );
    println!("chaos: seed {seed}: the schedule overlaps: {overlaps}");
    let specs = (0..ROUTERS)
        .map(RouterSpec::new)
        .collect::<Result<Vec<_>, _>>()?;
    let mut veths: Vec<(String, Ipv4Addr)> = specs
        .iter()
        .filter_map(|s| {
            crate::topo::ip_of(s.tcp1)
                .ok()
                .map(|ip| (s.dev.clone(), ip))
        })
        .collect();
    veths.push(("chb".to_owned(), B_ADDR));
    netns::set_up(&veths)?;
    let mut routers = Vec::new();
    for s in &specs {
        let r = Router::prepare(s.clone(), &args.router_bin, dir)?;
        r.start().await?;
        routers.push(Arc::new(r));
    }
    let (a_host, b_host) = (Host::new("a"), Host::new("b"));
    let ends = start_ends(&a_host, &b_host, &specs).await?;
    let received = traffic::attach_b(&b_host, &ends.b, seed).await?;
    // Every router checked and the path up before the schedule starts.
    let mut up = false;
    for _ in 0..40 {
        if ends
            .a
            .ping(ends.b_nid, Duration::from_secs(2))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if !up {
        return Err(BenchError::Setup("B does not answer A's ping".to_owned()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spec = DriveSpec {
        dest: ends.b_nid,
        interval: Duration::from_millis(args.interval_ms.max(1)),
        window: args.window.max(1),
        timeout: Duration::from_secs(args.timeout.max(1)),
        margin: Duration::from_secs(args.margin),
        seed,
    };
    let tally = Arc::new(Tally::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let driver = {
        let (a, t) = (ends.a.clone(), Arc::clone(&tally));
        a_host
            .run(move || std::future::ready(actix::spawn(traffic::drive(a, spec, t, stop_rx))))
            .await?
    };
    let mut summary = Summary::new(seed, args.minutes, args.steps);
    summary.overlaps = overlaps;
    let total = schedule.steps.len();
    let t_sched = Instant::now();
    let mut tasks: JoinSet<(usize, Action, Result<Done, BenchError>)> = JoinSet::new();
    let finished = |summary: &mut Summary,
                    (i, action, done): (usize, Action, Result<Done, BenchError>)|
     -> Result<(), BenchError> {
        let done = done?;
        let at = t_start.elapsed().as_secs_f64();
        println!("chaos: [{at:7.1} s] {}/{total} -> {}", i + 1, done.text);
        tally_done(summary, i + 1, action, &done);
        Ok(())
    };
    'steps: for (i, step) in schedule.steps.iter().enumerate() {
        let due = t_sched + Duration::from_millis(step.at_ms);
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(due) => break,
                Some(j) = tasks.join_next(), if !tasks.is_empty() => {
                    let j = j.map_err(|e| BenchError::Setup(format!("an action's task: {e}")))?;
                    let n = j.0 + 1;
                    finished(&mut summary, j)?;
                    dead(&routers, &mut summary, &format!("after step {n}"));
                    if !summary.dead_routers.is_empty() {
                        break 'steps;
                    }
                }
            }
        }
        let at = t_start.elapsed().as_secs_f64();
        println!(
            "chaos: [{at:7.1} s] {}/{total} (at {:.1} s; {}): {}{}",
            i + 1,
            step.at_ms as f64 / 1000.0,
            step.held,
            step.action,
            if step.races {
                " (racing the API change)"
            } else {
                ""
            }
        );
        let (action, r) = (step.action, routers.get(step.action.router()).cloned());
        let r = r.ok_or_else(|| BenchError::Setup(format!("no router for {action}")))?;
        tasks.spawn(async move { (i, action, act(action, r).await) });
    }
    while let Some(j) = tasks.join_next().await {
        let j = j.map_err(|e| BenchError::Setup(format!("an action's task: {e}")))?;
        finished(&mut summary, j)?;
    }
    if summary.dead_routers.is_empty() {
        dead(&routers, &mut summary, "after the schedule");
    }
    // The repair: every fault rule removed (links are up after each flap, routers
    // restarted after each kill).
    for r in &routers {
        while r.fault_rules().await > 0 {
            let name = r.spec.name();
            let outcome = r.del_oldest_fault_rule().await;
            if outcome != ApiOutcome::Acked {
                summary.api_refusals.push(format!(
                    "{name}: removing a fault rule at the end: {outcome}"
                ));
                break;
            }
        }
    }
    println!("chaos: schedule done, fault rules removed; draining the traffic");
    let _ = stop_tx.send(true);
    let drain = spec.timeout + spec.margin + Duration::from_secs(30);
    match tokio::time::timeout(drain, driver).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(BenchError::Setup("the traffic task failed".to_owned())),
        Err(_) => return Err(BenchError::Timeout("the traffic did not stop".to_owned())),
    }
    let t_repair = Instant::now();
    summary.recovered_s = traffic::probe(&ends.a, spec, Duration::from_secs(60))
        .await
        .map(|_| t_repair.elapsed().as_secs_f64());
    // The last deliveries reach B's MD.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for r in &routers {
        summary.state_checks += 1;
        let check = r.check().await;
        summary.count_settled(&check.settled);
        for (what, made) in &check.settled {
            println!(
                "chaos: {}: unsure {what}: {}",
                r.spec.name(),
                if *made { "made" } else { "not made" }
            );
        }
        if let Some(m) = check.mismatch {
            summary.state_mismatches.push(format!("at the end: {m}"));
        }
    }
    if summary.dead_routers.is_empty() {
        dead(&routers, &mut summary, "at the end");
    }
    for r in &routers {
        r.kill();
        summary.panics.extend(panics_in(&r.log, &r.spec.name()));
    }
    summary.traffic = tally.counts();
    summary.delivered = received.delivered.load(Ordering::Relaxed);
    summary.duplicates = received.duplicates.load(Ordering::Relaxed);
    summary.corrupted = received.corrupted.load(Ordering::Relaxed);
    (summary.duplicate_examples, summary.corrupted_examples) = received.examples();
    summary.elapsed_s = t_start.elapsed().as_secs_f64();
    summary.print();
    if let Some(path) = &args.json {
        write_json(path, &summary)?;
    }
    Ok(summary)
}
