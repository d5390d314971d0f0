//! `lnet-router`: the userspace LNet router.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use router::plan::{HostInterfaces, PlanError};
use router::startup::{import_tokens, startup, StartupError};
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
        /// With --data-dir it is imported into the store when it changed since the last
        /// import.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<String>,
        /// Where the persistent state (the store) lives; without --config the node runs
        /// from the state kept there.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<std::path::PathBuf>,
        /// API tokens to import into the store: lines `NAME ROLE SECRET` (ROLE: admin or
        /// reader). Needs --data-dir.
        #[arg(long, value_name = "FILE", requires = "data_dir")]
        tokens_file: Option<std::path::PathBuf>,
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
        Command::Run {
            config,
            data_dir,
            tokens_file,
        } => run(
            config.as_deref(),
            data_dir.as_deref(),
            tokens_file.as_deref(),
        ),
        Command::Demo { duration } => demo(duration.map(std::time::Duration::from_secs)),
    }
}

fn run(
    config: Option<&str>,
    data_dir: Option<&std::path::Path>,
    tokens_file: Option<&std::path::Path>,
) -> ExitCode {
    let started = match startup(config, data_dir, &HostInterfaces) {
        Ok(s) => s,
        Err(StartupError::Plan(PlanError::Refused { path, problems })) => {
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
    if started.imported {
        println!("lnet-router: configuration imported into the store");
    }
    if let (Some(store), Some(tokens)) = (&started.store, tokens_file) {
        match import_tokens(store, tokens) {
            Ok(n) => println!("lnet-router: {n} API token(s) imported"),
            Err(e) => {
                eprintln!("lnet-router: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let plan = started.plan;
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
