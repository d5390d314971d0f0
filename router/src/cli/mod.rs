//! The lnetctl-style subcommands: they talk to a running daemon over its REST API and print
//! what lnetctl prints (its YAML), or JSON with `--json`.
//!
//! `net show`, `peer show`, `stats show`, `global show` and `debug recovery` read the
//! API's show documents back into the models of [`lnet::show`] and print them with the same
//! code the snapshot tests check against real `lnetctl` output; `route show` and `routing
//! show` print the `route:` and `routing:` sections of [`lnet::config`]. Errors are
//! printed as lnetctl prints them (`errno` and `descr` under the command and object).
//! `udsp show` prints lnetctl's `udsp:` list and `fault drop|delay show` its `fault:`
//! document. `token create|list|revoke` and `whoami`, which lnetctl has not, print YAML
//! in the same shape. `net add|del` start and stop an NI on the running router; `net set`
//! sets an NI's health (its LND's settings are refused, naming the option). `debug
//! nidlist` alone needs no daemon: it runs [`lnet::nidlist`] and prints what lnetctl prints.

// `export` and `import`: the lnetctl export document.
mod export;
mod import;

mod client;
mod fault;
mod net;
mod nidlist;
mod peer;
mod ping;
mod show;
mod token;
mod udsp;

pub use client::CtlError;
pub use fault::{FaultAddArgs, FaultCmd, FaultOp};
pub use net::{NetAddArgs, NetDelArgs, NetSetArgs};
pub use udsp::UdspCmd;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use client::{json, Client};
use lnet::show::{GlobalShow, RecoveryShow, StatsShow};

/// How to reach the daemon.
#[derive(Debug, Clone, Args)]
pub struct Connect {
    /// The daemon's API.
    #[arg(
        long,
        global = true,
        env = "LNET_ROUTER_API",
        default_value = "https://127.0.0.1:8443"
    )]
    pub api: String,
    /// An API token (reader for shows, admin for changes).
    #[arg(long, global = true, env = "LNET_ROUTER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A CA certificate (PEM) to trust for the API, e.g. the daemon's self-signed one.
    #[arg(long, global = true, env = "LNET_ROUTER_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// Print the API's JSON instead of lnetctl's YAML.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The lnetctl-style commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Ctl {
    /// `net show`: the local NIs.
    Net {
        /// What to do.
        #[command(subcommand)]
        what: NetCmd,
    },
    /// `peer show` / `peer set --health`.
    Peer {
        /// What to do.
        #[command(subcommand)]
        what: PeerCmd,
    },
    /// `route show|add|del`.
    Route {
        /// What to do.
        #[command(subcommand)]
        what: RouteCmd,
    },
    /// `routing show`: router buffers and credits.
    Routing {
        /// What to do.
        #[command(subcommand)]
        what: ShowOnly,
    },
    /// `stats show|reset`.
    Stats {
        /// What to do.
        #[command(subcommand)]
        what: StatsCmd,
    },
    /// `global show`.
    Global {
        /// What to do.
        #[command(subcommand)]
        what: ShowOnly,
    },
    /// `set KEY VALUE`: a global tunable, or `set routing 0|1`.
    Set {
        /// The tunable (`retry_count`, `transaction_timeout`, `health_sensitivity`, ...,
        /// `routing`).
        key: String,
        /// Its value.
        value: i64,
    },
    /// `drain`: take the router out of service without stopping it (its NIs advertised
    /// down, routing disabled, pushed to its peers; it keeps forwarding what is under
    /// way); `set routing 1` brings it back.
    Drain,
    /// `ping NID[,NID...]`.
    Ping {
        /// The NIDs, separated by commas (several arguments are taken too).
        #[arg(required = true, num_args = 1..)]
        nids: Vec<String>,
        /// Timeout, seconds (as lnetctl).
        #[arg(short = 't', long)]
        timeout: Option<u64>,
        /// The local NI to send from (a NID of this node).
        #[arg(short = 's', long)]
        source: Option<String>,
    },
    /// `discover NID[,NID...]`.
    Discover {
        /// The NIDs, separated by commas (several arguments are taken too).
        #[arg(required = true, num_args = 1..)]
        nids: Vec<String>,
        /// Discover again even a peer discovered already (every discovery here does).
        #[arg(short = 'f', long)]
        force: bool,
    },
    /// `debug recovery --local|--peer`, `debug peer --nid N`, `debug nidlist NIDLIST [NID]`.
    Debug {
        /// What to show.
        #[command(subcommand)]
        what: DebugCmd,
    },
    /// `udsp add|del|show`: the selection policy rules of the running router.
    Udsp {
        /// What to do.
        #[command(subcommand)]
        what: UdspCmd,
    },
    /// `fault drop|delay add|del|show|reset`: fault injection rules.
    Fault {
        /// What to do.
        #[command(subcommand)]
        what: FaultCmd,
    },
    /// `token create|list|revoke`: the API's tokens (admin token).
    Token {
        /// What to do.
        #[command(subcommand)]
        what: TokenCmd,
    },
    /// `whoami`: the name and role of the token given (any token).
    Whoami,
    /// `export [FILE] [--backup]`: the node's state as the YAML `lnetctl import` reads.
    Export {
        /// Write it to this file instead of printing it.
        file: Option<PathBuf>,
        /// Only what `import` needs (`lnetctl export --backup`).
        #[arg(short = 'b', long)]
        backup: bool,
    },
    /// `import FILE [--add|--del|--show|--exec]`: apply an export document to the running
    /// node, or run its `ping:` and `discover:` commands.
    Import {
        /// The document (`lnetctl export` YAML).
        file: PathBuf,
        /// Add what it holds (the default): global settings, buffers, routing, peers,
        /// routes.
        #[arg(short = 'a', long, conflicts_with_all = ["del", "show"])]
        add: bool,
        /// Delete its routes and peers (and set routing off, and the global keys lnetctl
        /// resets back to their defaults).
        #[arg(short = 'd', long, conflicts_with = "show")]
        del: bool,
        /// Print what the node has for the items it names.
        #[arg(short = 's', long, conflicts_with = "exec")]
        show: bool,
        /// Run its `ping:` and `discover:` commands (nothing else is applied).
        #[arg(short = 'e', long, conflicts_with_all = ["add", "del"])]
        exec: bool,
    },
}

/// `token ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum TokenCmd {
    /// Make a token; its secret is printed this once.
    Create {
        /// Its name: 1 to 64 ASCII letters, digits, '.', '_' or '-'.
        #[arg(long)]
        name: String,
        /// Its role.
        #[arg(long, default_value = "reader", value_parser = ["admin", "reader"])]
        role: String,
    },
    /// List the tokens: names, roles, creation times (never a secret).
    List,
    /// Revoke a token: it is refused from the next request on.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// `show` alone.
#[derive(Debug, Clone, Subcommand)]
pub enum ShowOnly {
    /// Show it.
    Show,
}

/// `stats ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum StatsCmd {
    /// Show the counters.
    Show,
    /// Zero the counters `stats show` prints.
    Reset,
}

/// `-v [LEVEL]`: verbosity 0 to 4, `-v` alone 1.
fn verbosity(s: &str) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(v) if v <= 4 => Ok(v),
        _ => Err(format!("verbosity {s:?}: expected 0 to 4")),
    }
}

/// `net ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum NetCmd {
    /// Show the nets and their NIs.
    Show {
        /// Only this net.
        #[arg(short = 'n', long)]
        net: Option<String>,
        /// Verbosity, 0 to 4 (`-v` alone: 1).
        #[arg(short = 'v', long = "verbose", num_args = 0..=1, default_missing_value = "1", default_value = "0", value_parser = verbosity)]
        verbose: u8,
    },
    /// Start a local NI on the running router, kept in its store.
    Add(NetAddArgs),
    /// Stop a local NI and remove it from the store.
    Del(NetDelArgs),
    /// Set the health of a local NI (`--nid NID`) or of all (`--all`), the `--lnd-timeout`
    /// of the LND of `--net`, or the `--conns-per-peer` of an NI or of all.
    Set(NetSetArgs),
}

/// `peer ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum PeerCmd {
    /// Show the peers.
    Show {
        /// Only the peer that has this NID.
        #[arg(short = 'n', long)]
        nid: Option<String>,
        /// Verbosity, 0 to 4.
        #[arg(short = 'v', long = "verbose", num_args = 0..=1, default_missing_value = "1", default_value = "0", value_parser = verbosity)]
        verbose: u8,
    },
    /// Set the health of a peer NI (`--nid NID`) or of all (`--all`).
    Set {
        /// The peer NI.
        #[arg(
            short = 'n',
            long,
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        nid: Option<String>,
        /// Every peer NI.
        #[arg(short = 'a', long)]
        all: bool,
        /// The health value (0 to 1000).
        #[arg(short = 't', long)]
        health: u64,
    },
    /// The primary NIDs of the peers.
    List,
    /// Create a peer, or add NIDs to it.
    Add {
        /// The peer's primary NID.
        #[arg(short = 'k', long = "prim_nid", alias = "prim-nid")]
        prim_nid: String,
        /// NIDs to add (separated by commas).
        #[arg(short = 'n', long)]
        nid: Option<String>,
        /// The peer is not Multi-Rail.
        #[arg(short = 'm', long = "non_mr", alias = "non-mr")]
        non_mr: bool,
        /// Lock the primary NID (not supported: refused).
        #[arg(short = 'l', long = "lock_prim", alias = "lock-prim")]
        lock_prim: bool,
    },
    /// Delete a peer, or some of its NIDs.
    Del {
        /// The peer's primary NID.
        #[arg(long = "prim_nid", alias = "prim-nid")]
        prim_nid: String,
        /// Only these NIDs (separated by commas).
        #[arg(short = 'n', long)]
        nid: Option<String>,
        /// Accepted for lnetctl's spelling: no primary NID here is locked.
        #[arg(short = 'f', long)]
        force: bool,
    },
}

/// `route ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum RouteCmd {
    /// Show the routes (with `-v`: state and type).
    Show {
        /// Only routes to this net.
        #[arg(short = 'n', long)]
        net: Option<String>,
        /// Only routes through this gateway.
        #[arg(short = 'g', long)]
        gateway: Option<String>,
        /// Only routes of this hop count.
        #[arg(short = 'c', long, alias = "hop-count", allow_hyphen_values = true)]
        hop: Option<i64>,
        /// Only routes of this priority.
        #[arg(short = 'p', long)]
        priority: Option<u32>,
        /// Verbosity (any level from 1 adds state and type).
        #[arg(short = 'v', long = "verbose", num_args = 0..=1, default_missing_value = "1", default_value = "0", value_parser = verbosity)]
        verbose: u8,
    },
    /// Add a route.
    Add {
        /// The remote net.
        #[arg(long)]
        net: String,
        /// The gateway.
        #[arg(long)]
        gateway: String,
        /// Hops.
        #[arg(long)]
        hop: Option<u32>,
        /// Priority (0 is best).
        #[arg(long)]
        priority: Option<u32>,
    },
    /// Delete a route.
    Del {
        /// The remote net.
        #[arg(long)]
        net: String,
        /// The gateway.
        #[arg(long)]
        gateway: String,
    },
}

/// `debug ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum DebugCmd {
    /// The recovery queues.
    Recovery {
        /// The local NI queue.
        #[arg(long, conflicts_with = "peer")]
        local: bool,
        /// The peer NI queue.
        #[arg(long)]
        peer: bool,
    },
    /// A peer NI's aliveness and credits (the line the kernel writes to its debug log).
    Peer {
        /// The peer NI.
        #[arg(short = 'k', long, alias = "prim_nid")]
        nid: String,
    },
    /// `debug nidlist NIDLIST [NID]`: the nidlist parsed and printed back normalized, and
    /// whether NID matches it. Runs here, without the daemon.
    Nidlist {
        /// The nidlist (one argument: entries separated by spaces), then optionally the NID
        /// to match.
        #[arg(
            value_name = "NIDLIST [NID]",
            num_args = 0..,
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        args: Vec<String>,
    },
}

/// `net set --health` and `peer set --health`: the health value of NI or peer NI `path`
/// set through the API; prints nothing (the answer with `--json`).
async fn set_health(
    c: &Connect,
    object: &'static str,
    path: &str,
    health: u64,
) -> Result<String, CtlError> {
    let cl = Client::new(c, "set", object)?;
    let v = cl
        .post(path, serde_json::json!({ "value": health }))
        .await?;
    Ok(if c.json { json(&v) } else { String::new() })
}

/// Runs one command; its output (YAML, or JSON with `--json`).
pub async fn run(c: &Connect, cmd: &Ctl) -> Result<String, CtlError> {
    match cmd {
        Ctl::Net {
            what: NetCmd::Show { net, verbose },
        } => show::net(c, net.as_deref(), *verbose).await,
        Ctl::Net {
            what: NetCmd::Add(a),
        } => net::add(c, a).await,
        Ctl::Net {
            what: NetCmd::Del(a),
        } => net::del(c, a).await,
        Ctl::Net {
            what: NetCmd::Set(a),
        } => net::set(c, a).await,
        Ctl::Peer {
            what: PeerCmd::Show { nid, verbose },
        } => show::peer(c, nid.as_deref(), *verbose).await,
        Ctl::Peer {
            what: PeerCmd::Set { nid, all, health },
        } => {
            let path = match (nid, all) {
                (Some(nid), false) => format!("/api/v1/peer-nis/{nid}/health"),
                _ => "/api/v1/peer-nis/health".to_owned(),
            };
            set_health(c, "peer_ni", &path, *health).await
        }
        Ctl::Peer {
            what: PeerCmd::List,
        } => show::peer_list(c).await,
        Ctl::Peer {
            what: PeerCmd::Del { prim_nid, nid, .. },
        } => {
            let cl = Client::new(c, "del", "peer")?;
            // EBUSY for a router or a primary NID that does not go alone, as the kernel.
            let busy = |mut e: CtlError| {
                if e.errno == -17 {
                    e.errno = -16;
                }
                e
            };
            let mut answers = Vec::new();
            match nid {
                None => answers.push(
                    cl.delete(&format!("/api/v1/peers/{prim_nid}"))
                        .await
                        .map_err(busy)?,
                ),
                Some(list) => {
                    for n in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                        answers.push(
                            cl.delete(&format!("/api/v1/peers/{prim_nid}/nids/{n}"))
                                .await
                                .map_err(busy)?,
                        );
                    }
                }
            }
            Ok(if c.json {
                json(&serde_json::Value::Array(answers))
            } else {
                String::new()
            })
        }
        Ctl::Route {
            what:
                RouteCmd::Show {
                    net,
                    gateway,
                    hop,
                    priority,
                    verbose,
                },
        } => {
            let filter = show::RouteFilter {
                net: net.clone(),
                gateway: gateway.clone(),
                hop: *hop,
                priority: *priority,
            };
            show::route(c, &filter, *verbose >= 1).await
        }
        Ctl::Route {
            what:
                RouteCmd::Add {
                    net,
                    gateway,
                    hop,
                    priority,
                },
        } => {
            let cl = Client::new(c, "add", "route")?;
            let v = cl
                .post(
                    "/api/v1/routes",
                    serde_json::json!({ "net": net, "gateway": gateway, "hop": hop, "priority": priority }),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Route {
            what: RouteCmd::Del { net, gateway },
        } => {
            let cl = Client::new(c, "del", "route")?;
            let v = cl
                .delete(&format!("/api/v1/routes/{net}/{gateway}"))
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Routing { .. } => show::routing(c).await,
        Ctl::Stats {
            what: StatsCmd::Show,
        } => {
            let cl = Client::new(c, "show", "statistics")?;
            let v = cl.get("/api/v1/stats").await?;
            if c.json {
                return Ok(json(&v));
            }
            let m: StatsShow = cl.model(v)?;
            Ok(m.to_yaml())
        }
        Ctl::Stats {
            what: StatsCmd::Reset,
        } => {
            let cl = Client::new(c, "reset", "statistics")?;
            let v = cl
                .post("/api/v1/stats/reset", serde_json::json!(null))
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Global { .. } => {
            let cl = Client::new(c, "show", "global")?;
            let v = cl.get("/api/v1/global").await?;
            if c.json {
                return Ok(json(&v));
            }
            let m: GlobalShow = cl.model(v)?;
            Ok(m.to_yaml())
        }
        Ctl::Set { key, value } if key == "routing" => {
            let cl = Client::new(c, "set", "routing")?;
            let v = cl
                .send(
                    cl.http
                        .put(format!("{}/api/v1/routing", cl.base))
                        .json(&serde_json::json!({ "enable": value })),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Set { key, value }
            if matches!(
                key.as_str(),
                "tiny_buffers" | "small_buffers" | "large_buffers"
            ) =>
        {
            let cl = Client::new(c, "set", "buffers")?;
            let field = key.trim_end_matches("_buffers");
            let v = cl
                .send(
                    cl.http
                        .put(format!("{}/api/v1/buffers", cl.base))
                        .json(&serde_json::json!({ field: value })),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Drain => {
            let cl = Client::new(c, "drain", "router")?;
            let v = cl.post("/api/v1/drain", serde_json::json!(null)).await?;
            if c.json {
                return Ok(json(&v));
            }
            let d: web::DrainDoc = cl.model(v)?;
            Ok(format!(
                "drain:\n    draining: {}\n    forwarding: {}\n",
                u8::from(d.draining),
                d.forwarding
            ))
        }
        Ctl::Set { key, value } => {
            let cl = Client::new(c, "set", "global")?;
            let mut body = serde_json::Map::new();
            body.insert(key.clone(), serde_json::json!(value));
            let v = cl
                .send(
                    cl.http
                        .put(format!("{}/api/v1/global", cl.base))
                        .json(&serde_json::Value::Object(body)),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Ping {
            nids,
            timeout,
            source,
        } => ping::ping(c, nids, *timeout, source.as_deref()).await,
        Ctl::Discover { nids, force: _ } => ping::discover(c, nids).await,
        Ctl::Debug {
            what: DebugCmd::Recovery { local, peer },
        } => {
            let cl = Client::new(c, "show", "recovery")?;
            let path = if *peer && !*local {
                "/api/v1/recovery/peer"
            } else {
                "/api/v1/recovery/local"
            };
            let v = cl.get(path).await?;
            if c.json {
                return Ok(json(&v));
            }
            let m: RecoveryShow = cl.model(v)?;
            Ok(m.to_yaml())
        }
        Ctl::Peer {
            what:
                PeerCmd::Add {
                    prim_nid,
                    nid,
                    non_mr,
                    lock_prim,
                },
        } => peer::add(c, prim_nid, nid.as_deref(), *non_mr, *lock_prim).await,
        Ctl::Debug {
            what: DebugCmd::Peer { nid },
        } => peer::debug(c, nid).await,
        Ctl::Debug {
            what: DebugCmd::Nidlist { args },
        } => nidlist::debug(args),
        Ctl::Udsp { what } => udsp::run(c, what).await,
        Ctl::Fault { what } => fault::run(c, what).await,
        Ctl::Token {
            what: TokenCmd::Create { name, role },
        } => token::create(c, name, role).await,
        Ctl::Token {
            what: TokenCmd::List,
        } => token::list(c).await,
        Ctl::Token {
            what: TokenCmd::Revoke { name },
        } => token::revoke(c, name).await,
        Ctl::Whoami => token::whoami(c).await,
        Ctl::Export { file, backup } => export::export(c, file.as_deref(), *backup).await,
        Ctl::Import {
            file, exec: true, ..
        } => import::exec(c, file).await,
        Ctl::Import {
            file,
            add: _,
            del,
            show,
            exec: false,
        } => {
            let mode = if *del {
                import::ImportMode::Del
            } else if *show {
                import::ImportMode::Show
            } else {
                import::ImportMode::Add
            };
            import::import(c, file, mode).await
        }
    }
}
