//! `lnet-router`: the userspace LNet router.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use router::plan::{load, HostInterfaces, PlanError};
use tracing_subscriber::EnvFilter;

/// A userspace Lustre LNet router.
#[derive(Debug, Parser)]
#[command(name = "lnet-router", version)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the node described by an `lnetctl export` YAML file until SIGINT or SIGTERM.
    Run {
        /// The configuration file: `lnetctl export` YAML plus an `lnet-router:` section.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: String,
    },
    /// Run a demo topology in this process: end node A on tcp, routers R1 and R2, end node
    /// B on tcp1, all on loopback addresses, with traffic from A to B.
    Demo {
        /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<u64>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match cli.command {
        Command::Run { config } => run(&config),
        Command::Demo { duration } => demo(duration.map(std::time::Duration::from_secs)),
    }
}

fn run(path: &str) -> ExitCode {
    let plan = match load(path, &HostInterfaces) {
        Ok(p) => p,
        Err(PlanError::Refused { path, problems }) => {
            eprintln!("lnet-router: {path}: configuration refused:");
            for p in problems {
                eprintln!("  {p}");
            }
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("lnet-router: configuration refused: {e}");
            return ExitCode::from(2);
        }
    };
    let system = actix::System::new();
    match system.block_on(router::run::run(plan)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lnet-router: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo(duration: Option<std::time::Duration>) -> ExitCode {
    let system = actix::System::new();
    match system.block_on(router::demo::run(duration)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lnet-router: {e}");
            ExitCode::FAILURE
        }
    }
}
