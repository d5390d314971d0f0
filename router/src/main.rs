//! `lnet-router`: the userspace LNet router.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use router::api::ApiSettings;
use router::cpts::CptScheduling;
use router::plan::{HostInterfaces, PlanError};
use router::startup::{import_tokens, startup, StartupError};
use tracing_subscriber::EnvFilter;

/// A userspace Lustre LNet router.
#[derive(Debug, Parser)]
#[command(name = "lnet-router", version)]
struct Cli {
    /// How the lnetctl-style commands reach the daemon.
    #[command(flatten)]
    connect: router::cli::Connect,
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// lnetctl-style commands against a running daemon's API (`net show -v 4`, `route
    /// add`, `stats show`, ...).
    #[command(flatten)]
    Ctl(router::cli::Ctl),
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
        /// Serve the REST API, the dashboard and /metrics here (HTTPS). Needs --data-dir
        /// (the API tokens and the event log live in the store).
        #[arg(long, value_name = "ADDR:PORT", requires = "data_dir")]
        api_listen: Option<std::net::SocketAddr>,
        /// CPU partitions (CPTs), as the kernel's `cpu_npartitions`: threads the peers'
        /// connections, the forwarding path and the router buffer pools are spread over.
        /// 0: one per core.
        #[arg(long, value_name = "N", default_value_t = 0)]
        cpu_npartitions: usize,
        /// How Linux schedules the CPT threads (with 2 CPTs or more): `batch`
        /// (`SCHED_BATCH`: a CPT thread woken by its sockets does not preempt the running
        /// thread, and takes a longer burst when it runs) or `normal` (`SCHED_OTHER`).
        #[arg(long, value_enum, value_name = "POLICY", default_value_t = CptScheduling::default())]
        cpt_scheduling: CptScheduling,
        /// The API's certificate chain (PEM).
        #[arg(long, value_name = "FILE")]
        tls_cert: Option<std::path::PathBuf>,
        /// The API's private key (PEM).
        #[arg(long, value_name = "FILE")]
        tls_key: Option<std::path::PathBuf>,
        /// Serve the API over plain HTTP, read-only.
        #[arg(long)]
        plain_http: bool,
        /// Over plain HTTP, let admin tokens change the node too.
        #[arg(long, requires = "plain_http")]
        plain_http_mutations: bool,
        /// Also serve /metrics alone here: plain HTTP, read-only, no token (as the Lustre
        /// exporters do). Off by default; needs no --data-dir.
        #[arg(long, value_name = "ADDR:PORT")]
        metrics_listen: Option<std::net::SocketAddr>,
        /// Give the lustre_* series the component="lnet" and target="lnet" labels of the
        /// HPE and GSI Lustre exporters too.
        #[arg(long)]
        metrics_exporter_labels: bool,
    },
    /// lnet_selftest-style load between end nodes in this process: `ping` or `brw
    /// read|write size=N`, printing lst-style rates (docs/bench.md).
    Selftest(bench::selftest::SelftestArgs),
    /// Run a demo topology in this process: end node A on tcp, routers R1 and R2, end node
    /// B on tcp1, all on loopback addresses, with traffic from A to B.
    Demo {
        /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<u64>,
        /// Serve each node's API and dashboard over HTTPS on 127.0.0.1 from this port on
        /// (R1, R2, A, B).
        #[arg(long, value_name = "PORT", default_value_t = 8443)]
        api_port: u16,
        /// Do not serve the APIs.
        #[arg(long)]
        no_api: bool,
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
        Command::Ctl(cmd) => ctl(&cli.connect, &cmd),
        Command::Selftest(args) => bench::selftest::run_blocking(args),
        Command::Run {
            config,
            data_dir,
            tokens_file,
            api_listen,
            tls_cert,
            tls_key,
            plain_http,
            plain_http_mutations,
            cpu_npartitions,
            cpt_scheduling,
            metrics_listen,
            metrics_exporter_labels,
        } => {
            let api = match api_listen
                .map(|l| {
                    ApiSettings::from_flags(l, tls_cert, tls_key, plain_http, plain_http_mutations)
                })
                .transpose()
            {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("lnet-router: {e}");
                    return ExitCode::from(2);
                }
            };
            let cpts = match cpu_npartitions {
                0 => std::thread::available_parallelism().map_or(1, usize::from),
                n => n,
            };
            run(
                config.as_deref(),
                data_dir.as_deref(),
                tokens_file.as_deref(),
                api,
                cpts,
                cpt_scheduling,
                router::api::MetricsSettings {
                    listen: metrics_listen,
                    exporter_labels: metrics_exporter_labels,
                },
            )
        }
        Command::Demo {
            duration,
            api_port,
            no_api,
        } => demo(
            duration.map(std::time::Duration::from_secs),
            (!no_api).then_some(api_port),
        ),
    }
}

fn run(
    config: Option<&str>,
    data_dir: Option<&std::path::Path>,
    tokens_file: Option<&std::path::Path>,
    api: Option<ApiSettings>,
    cpts: usize,
    cpt_scheduling: CptScheduling,
    metrics: router::api::MetricsSettings,
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
    let mut plan = started.plan;
    plan.cpts = cpts;
    plan.cpt_scheduling = cpt_scheduling;
    let store = started.store.map(std::sync::Arc::new);
    let system = actix::System::new();
    match system.block_on(router::run::run(plan, store, api, metrics)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lnet-router: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo(duration: Option<std::time::Duration>, api: Option<u16>) -> ExitCode {
    let system = actix::System::new();
    match system.block_on(router::demo::run(duration, api)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lnet-router: {e}");
            ExitCode::FAILURE
        }
    }
}

fn ctl(connect: &router::cli::Connect, cmd: &router::cli::Ctl) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lnet-router: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(router::cli::run(connect, cmd)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let Some(out) = &e.printed {
                print!("{out}");
            }
            if e.plain {
                eprint!("{}", e.descr);
            } else if e.printed.is_none() || e.error_too {
                eprint!("{}", e.to_yaml());
            }
            ExitCode::FAILURE
        }
    }
}
