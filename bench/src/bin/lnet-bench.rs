//! `lnet-bench`: benchmarks of lnet-router (see docs/bench.md).
//!
//! * `lnet-bench selftest [ping | brw read|write size=N] ...`: lnet_selftest-style load;
//! * `lnet-bench compare [--quick] ...`: the router against a plain TCP relay and against
//!   a direct connection, with the ratios, written as JSON;
//! * `lnet-bench failover ...`: failover and recovery times with two routers;
//! * `lnet-bench soak ...`: one router process under mixed load from many end nodes for
//!   minutes: RSS, descriptors and threads sampled, their slopes, every transaction ended;
//! * `lnet-bench chaos ...`: three router processes between two end nodes under a seeded
//!   schedule of kills, link flaps, fault rules and API changes, with invariants checked;
//! * `lnet-bench wire [--quick] ...`: the `lnet-router` process against a splice relay
//!   and a direct connection, with end nodes that cannot be the bottleneck.

use std::io::IsTerminal;
use std::process::ExitCode;

use bench::chaos::ChaosArgs;
use bench::compare::CompareArgs;
use bench::failover::FailoverArgs;
use bench::selftest::SelftestArgs;
use bench::soak::SoakArgs;
use bench::wire::relay::RelayArgs;
use bench::wire::WireArgs;
use bench::BenchError;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Benchmarks of lnet-router.
#[derive(Debug, Parser)]
#[command(name = "lnet-bench", version)]
struct Cli {
    /// What to run.
    #[command(subcommand)]
    command: Cmd,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Load between groups of end nodes, optionally through a router (like lst).
    Selftest(SelftestArgs),
    /// The router against a plain TCP relay and a direct connection, in one run.
    Compare(CompareArgs),
    /// Failover and recovery times with two routers between two end nodes.
    Failover(FailoverArgs),
    /// One router process under mixed load from many end nodes for minutes: its RSS,
    /// descriptors and threads sampled, every transaction ended.
    Soak(SoakArgs),
    /// Three router processes between two end nodes under a seeded schedule of kills,
    /// link flaps, fault rules, health resets and route changes; the invariants checked
    /// at the end (needs root: it works in a network namespace of its own).
    Chaos(ChaosArgs),
    /// The router process against a splice relay and a direct connection, with minimal
    /// synchronous socklnd end nodes (rate, bulk, latency, CPU per message).
    Wire(WireArgs),
    /// The relay process `wire` starts (not run by hand).
    #[command(hide = true)]
    WireRelay(RelayArgs),
}

fn exit(r: Result<(), BenchError>, what: &str) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ BenchError::Usage(_)) => {
            eprintln!("lnet-bench {what}: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("lnet-bench {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match cli.command {
        Cmd::Selftest(args) => bench::selftest::run_blocking(args),
        Cmd::Compare(args) => {
            let system = actix::System::new();
            exit(
                system.block_on(bench::compare::run(args)).map(|_| ()),
                "compare",
            )
        }
        Cmd::Soak(args) => {
            let system = actix::System::new();
            exit(system.block_on(bench::soak::run(args)).map(|_| ()), "soak")
        }
        Cmd::Chaos(args) => bench::chaos::run_blocking(args),
        Cmd::Wire(args) => exit(bench::wire::run(args).map(|_| ()), "wire"),
        Cmd::WireRelay(args) => exit(bench::wire::relay::run(args), "wire-relay"),
        Cmd::Failover(args) => {
            let system = actix::System::new();
            exit(
                system.block_on(bench::failover::run(args)).map(|_| ()),
                "failover",
            )
        }
    }
}
