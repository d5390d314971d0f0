//! The lnetctl-style subcommands: they talk to a running daemon over its REST API and print
//! what lnetctl prints (its YAML), or JSON with `--json`.
//!
//! `net show`, `peer show`, `stats show`, `global show` and `debug recovery` read the
//! API's show documents back into the models of [`lnet::show`] and print them with the same
//! code the snapshot tests check against real `lnetctl` output; `route show` and `routing
//! show` print the `route:` and `routing:` sections of [`lnet::config`]. Errors are
//! printed as lnetctl prints them (`errno` and `descr` under the command and object).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use lnet::config::{
    BufferPool, Buffers, Config, CptBuffers, Route, RouteState, RouteType, Routing,
};
use lnet::show::{GlobalShow, NetShow, PeerShow, PingShow, RecoveryShow, StatsShow, Verbosity};
use serde::de::DeserializeOwned;

/// The value at a JSON pointer, `null` when absent.
fn at<'a>(v: &'a serde_json::Value, pointer: &str) -> &'a serde_json::Value {
    v.pointer(pointer).unwrap_or(&serde_json::Value::Null)
}

/// How to reach the daemon.
#[derive(Debug, Clone, Args)]
pub struct Connect {
    /// The daemon's API.
    #[arg(
        long,
        env = "LNET_ROUTER_API",
        default_value = "https://127.0.0.1:8443"
    )]
    pub api: String,
    /// An API token (reader for shows, admin for changes).
    #[arg(long, env = "LNET_ROUTER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A CA certificate (PEM) to trust for the API, e.g. the daemon's self-signed one.
    #[arg(long, env = "LNET_ROUTER_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// Print the API's JSON instead of lnetctl's YAML.
    #[arg(long)]
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
    /// `stats show`.
    Stats {
        /// What to do.
        #[command(subcommand)]
        what: ShowOnly,
    },
    /// `global show`.
    Global {
        /// What to do.
        #[command(subcommand)]
        what: ShowOnly,
    },
    /// `set KEY VALUE`: a global tunable.
    Set {
        /// The tunable (`retry_count`, `transaction_timeout`, `health_sensitivity`, ...).
        key: String,
        /// Its value.
        value: i64,
    },
    /// `ping NID`.
    Ping {
        /// The NID.
        nid: String,
        /// Timeout, milliseconds.
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// `discover NID`.
    Discover {
        /// The NID.
        nid: String,
    },
    /// `debug recovery --local|--peer`.
    Debug {
        /// What to show.
        #[command(subcommand)]
        what: DebugCmd,
    },
}

/// `show` alone.
#[derive(Debug, Clone, Subcommand)]
pub enum ShowOnly {
    /// Show it.
    Show,
}

/// `net ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum NetCmd {
    /// Show the nets and their NIs.
    Show {
        /// Verbosity, 0 to 4 (`-v` alone: 1).
        #[arg(short = 'v', long = "verbose", num_args = 0..=1, default_missing_value = "1", default_value = "0")]
        verbose: u8,
    },
    /// Set a local NI's health (`--nid NID --health VALUE`).
    Set {
        /// The NI.
        #[arg(long)]
        nid: String,
        /// The health value (0 to 1000).
        #[arg(long)]
        health: u64,
    },
}

/// `peer ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum PeerCmd {
    /// Show the peers.
    Show {
        /// Verbosity, 0 to 4.
        #[arg(short = 'v', long = "verbose", num_args = 0..=1, default_missing_value = "1", default_value = "0")]
        verbose: u8,
    },
    /// Set a peer NI's health.
    Set {
        /// The peer NI.
        #[arg(long)]
        nid: String,
        /// The health value (0 to 1000).
        #[arg(long)]
        health: u64,
    },
}

/// `route ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum RouteCmd {
    /// Show the routes (with `-v`: state and type).
    Show {
        /// Verbose.
        #[arg(short = 'v', long = "verbose")]
        verbose: bool,
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
}

/// What went wrong, with the names lnetctl's error YAML uses.
#[derive(Debug)]
pub struct CtlError {
    /// The command (`show`, `add`, `del`, `set`, `ping`...).
    pub command: &'static str,
    /// The object (`net`, `route`, ...).
    pub object: &'static str,
    /// The errno lnetctl would print (negative).
    pub errno: i32,
    /// The description.
    pub descr: String,
}

impl CtlError {
    /// lnetctl's error YAML.
    pub fn to_yaml(&self) -> String {
        format!(
            "{}:\n    - {}:\n          errno: {}\n          descr: \"{}\"\n",
            self.command,
            self.object,
            self.errno,
            self.descr.replace('"', "'")
        )
    }
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    command: &'static str,
    object: &'static str,
}

fn errno_of(status: reqwest::StatusCode) -> i32 {
    match status.as_u16() {
        401 | 403 => -1,  // EPERM
        404 => -2,        // ENOENT
        409 => -17,       // EEXIST
        400 | 422 => -22, // EINVAL
        _ => -5,          // EIO
    }
}

impl Client {
    fn new(c: &Connect, command: &'static str, object: &'static str) -> Result<Client, CtlError> {
        let fail = |descr: String| CtlError {
            command,
            object,
            errno: -22,
            descr,
        };
        let mut b = reqwest::Client::builder().use_rustls_tls();
        if let Some(ca) = &c.ca_cert {
            let pem = std::fs::read(ca).map_err(|e| fail(format!("{}: {e}", ca.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| fail(format!("{}: {e}", ca.display())))?;
            b = b.add_root_certificate(cert);
        }
        let http = b.build().map_err(|e| fail(e.to_string()))?;
        Ok(Client {
            http,
            base: c.api.trim_end_matches('/').to_owned(),
            token: c.token.clone(),
            command,
            object,
        })
    }

    fn err(&self, errno: i32, descr: String) -> CtlError {
        CtlError {
            command: self.command,
            object: self.object,
            errno,
            descr,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<serde_json::Value, CtlError> {
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = req
            .send()
            .await
            .map_err(|e| self.err(-111, format!("cannot reach {}: {e}", self.base)))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| self.err(-5, format!("bad answer from {}: {e}", self.base)))?;
        let body: serde_json::Value = if text.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| self.err(-5, format!("bad answer from {}: {e}", self.base)))?
        };
        if !status.is_success() {
            let msg = at(&body, "/error/message")
                .as_str()
                .unwrap_or("request refused")
                .to_owned();
            let field = at(&body, "/error/field").as_str();
            let descr = match field {
                Some(f) => format!("{f}: {msg}"),
                None => msg,
            };
            return Err(self.err(errno_of(status), descr));
        }
        Ok(body)
    }

    async fn get(&self, path: &str) -> Result<serde_json::Value, CtlError> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    async fn post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, CtlError> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    fn model<T: DeserializeOwned>(&self, v: serde_json::Value) -> Result<T, CtlError> {
        serde_json::from_value(v).map_err(|e| self.err(-5, format!("unexpected document: {e}")))
    }
}

fn route_of(v: &serde_json::Value, verbose: bool) -> Option<Route> {
    Some(Route {
        net: at(v, "/net").as_str()?.parse().ok()?,
        gateway: at(v, "/gateway").as_str()?.parse().ok()?,
        hop: at(v, "/hop").as_i64(),
        priority: at(v, "/priority")
            .as_u64()
            .and_then(|p| u32::try_from(p).ok()),
        health_sensitivity: None,
        state: verbose
            .then(|| match at(v, "/state").as_str() {
                Some("up") => Some(RouteState::Up),
                Some("down") => Some(RouteState::Down),
                _ => None,
            })
            .flatten(),
        route_type: verbose
            .then(|| match at(v, "/type").as_str() {
                Some("single-hop") => Some(RouteType::SingleHop),
                Some("multi-hop") => Some(RouteType::MultiHop),
                _ => None,
            })
            .flatten(),
    })
}

fn pool_of(v: &serde_json::Value) -> BufferPool {
    let n = |k: &str| v[k].as_i64().unwrap_or(0);
    BufferPool {
        npages: u32::try_from(n("npages")).unwrap_or(0),
        nbuffers: u32::try_from(n("nbuffers")).unwrap_or(0),
        credits: i32::try_from(n("credits")).unwrap_or(0),
        mincredits: i32::try_from(n("mincredits")).unwrap_or(0),
    }
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

/// A document as `--json` prints it.
fn json(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// Runs one command; its output (YAML, or JSON with `--json`).
pub async fn run(c: &Connect, cmd: &Ctl) -> Result<String, CtlError> {
    match cmd {
        Ctl::Net {
            what: NetCmd::Show { verbose },
        } => {
            let cl = Client::new(c, "show", "net")?;
            let v = cl.get("/api/v1/nets").await?;
            if c.json {
                return Ok(json(&v));
            }
            let m: NetShow = cl.model(v)?;
            Ok(m.to_yaml(Verbosity(*verbose)))
        }
        Ctl::Net {
            what: NetCmd::Set { nid, health },
        } => set_health(c, "net", &format!("/api/v1/nis/{nid}/health"), *health).await,
        Ctl::Peer {
            what: PeerCmd::Show { verbose },
        } => {
            let cl = Client::new(c, "show", "peer")?;
            let v = cl.get("/api/v1/peers").await?;
            if c.json {
                return Ok(json(&v));
            }
            let m: PeerShow = cl.model(v)?;
            Ok(m.to_yaml(Verbosity(*verbose)))
        }
        Ctl::Peer {
            what: PeerCmd::Set { nid, health },
        } => {
            set_health(
                c,
                "peer_ni",
                &format!("/api/v1/peer-nis/{nid}/health"),
                *health,
            )
            .await
        }
        Ctl::Route {
            what: RouteCmd::Show { verbose },
        } => {
            let cl = Client::new(c, "show", "route")?;
            let v = cl.get("/api/v1/routes").await?;
            if c.json {
                return Ok(json(&v));
            }
            let routes = at(&v, "/routes")
                .as_array()
                .map(|a| a.iter().filter_map(|r| route_of(r, *verbose)).collect())
                .unwrap_or_default();
            Ok(Config {
                routes,
                ..Config::default()
            }
            .to_yaml())
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
                .send(
                    cl.http
                        .delete(format!("{}/api/v1/routes/{net}/{gateway}", cl.base)),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        Ctl::Routing { .. } => {
            let cl = Client::new(c, "show", "routing")?;
            let v = cl.get("/api/v1/routing").await?;
            if c.json {
                return Ok(json(&v));
            }
            let cpts = at(&v, "/cpts")
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|p| CptBuffers {
                            tiny: pool_of(at(p, "/tiny")),
                            small: pool_of(at(p, "/small")),
                            large: pool_of(at(p, "/large")),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let enable = if at(&v, "/enable").as_bool().unwrap_or(false) {
                lnet::config::RoutingState::Enabled
            } else {
                lnet::config::RoutingState::Disabled
            };
            let total = |k: &str| {
                at(&v, "/buffers")[k]
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
            };
            Ok(Config {
                routing: Some(Routing { enable, cpts }),
                buffers: Some(Buffers {
                    tiny: total("tiny"),
                    small: total("small"),
                    large: total("large"),
                }),
                ..Config::default()
            }
            .to_yaml())
        }
        Ctl::Stats { .. } => {
            let cl = Client::new(c, "show", "statistics")?;
            let v = cl.get("/api/v1/stats").await?;
            if c.json {
                return Ok(json(&v));
            }
            let m: StatsShow = cl.model(v)?;
            Ok(m.to_yaml())
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
        Ctl::Ping { nid, timeout } => {
            let cl = Client::new(c, "ping", "ping")?;
            let v = cl
                .post(
                    "/api/v1/ping",
                    serde_json::json!({ "nid": nid, "timeout_ms": timeout }),
                )
                .await?;
            ping_yaml(&cl, c.json, &v)
        }
        Ctl::Discover { nid } => {
            let cl = Client::new(c, "discover", "discover")?;
            let v = cl
                .post("/api/v1/discover", serde_json::json!({ "nid": nid }))
                .await?;
            ping_yaml(&cl, c.json, &v)
        }
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
    }
}

/// `ping` / `discover` as lnetctl prints them ([`PingShow`]).
fn ping_yaml(cl: &Client, as_json: bool, v: &serde_json::Value) -> Result<String, CtlError> {
    if as_json {
        return Ok(json(v));
    }
    if !at(v, "/ok").as_bool().unwrap_or(false) {
        return Err(cl.err(
            -110,
            at(v, "/error").as_str().unwrap_or("no reply").to_owned(),
        ));
    }
    let nid = |x: &serde_json::Value| x.as_str().and_then(|s| s.parse().ok());
    let show = PingShow {
        primary_nid: nid(at(v, "/primary_nid"))
            .ok_or_else(|| cl.err(-5, "the reply names no primary NID".to_owned()))?,
        multi_rail: at(v, "/multi_rail").as_bool().unwrap_or(false),
        peer_nis: at(v, "/peer_nis")
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| nid(at(n, "/nid")))
            .collect(),
    };
    Ok(show.to_yaml())
}
