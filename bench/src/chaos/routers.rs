//! The routers of a chaos run: `lnet-router run` processes, each with a data dir (its
//! sled store), an API token and the REST API on loopback, killed and started again, their
//! tcp1 link set down and up; and for each, a model of every change the API acknowledged
//! (routes, fault rules), compared with what the router shows after each restart and at
//! the end.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lnet::Nid;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::schedule::{Fault, Side};
use crate::topo::nid_at;
use crate::BenchError;

/// The acceptor port of every NI (each NI has an address of its own in the namespace).
pub const ACCEPTOR_PORT: u16 = 988;

/// The admin token of every router's API.
const TOKEN: &str = "chaos-admin-0123456789abcdef";

/// The most an API request may take.
const API_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a router may take to listen after it is started.
const READY_BOUND: Duration = Duration::from_secs(60);

/// Where router `i` (0-based) sits.
#[derive(Debug, Clone)]
pub struct RouterSpec {
    /// Its index.
    pub index: usize,
    /// Its NI on tcp (loopback).
    pub tcp: Nid,
    /// Its NI on tcp1 (on the veth `dev`).
    pub tcp1: Nid,
    /// The interface of its tcp1 NI.
    pub dev: String,
    /// Its API address.
    pub api: SocketAddr,
}

impl RouterSpec {
    /// Router `index`: `127.0.70.(index+1)@tcp`, `10.98.0.(index+1)@tcp1` on `chr(index+1)`,
    /// the API on `127.0.0.1:(9101+index)`.
    pub fn new(index: usize) -> Result<RouterSpec, BenchError> {
        let host = u8::try_from(index + 1)
            .map_err(|_| BenchError::Usage(format!("router {index}: too many")))?;
        Ok(RouterSpec {
            index,
            tcp: nid_at(Ipv4Addr::new(127, 0, 70, host), "tcp")?,
            tcp1: nid_at(Ipv4Addr::new(10, 98, 0, host), "tcp1")?,
            dev: format!("chr{host}"),
            api: SocketAddr::from(([127, 0, 0, 1], 9100 + u16::from(host))),
        })
    }

    /// The NI on `side`.
    pub fn ni(&self, side: Side) -> Nid {
        match side {
            Side::Tcp => self.tcp,
            Side::Tcp1 => self.tcp1,
        }
    }

    /// Its name in the printout (`R1`...).
    pub fn name(&self) -> String {
        format!("R{}", self.index + 1)
    }
}

/// The gateway of the routes to the extra remote nets: an address on tcp where nothing
/// listens (the route stays down; what is checked is that the router keeps it).
pub fn remote_gateway(net: u32) -> Result<Nid, BenchError> {
    let host = u8::try_from(net % 200 + 20).unwrap_or(20);
    nid_at(Ipv4Addr::new(127, 0, 71, host), "tcp")
}

/// A route as the model and `GET /api/v1/routes` know it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RouteKey {
    net: String,
    gateway: String,
    hop: i64,
    priority: u64,
}

/// What the API acknowledged, per router.
#[derive(Debug, Clone, Default)]
struct Model {
    routes: BTreeSet<RouteKey>,
    /// Fault rules by id: the NI and the rule as the API returned it.
    fault_rules: BTreeMap<u64, (Nid, Value)>,
}

/// How an API change ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiOutcome {
    /// Acknowledged (201, 204 or 200).
    Acked,
    /// Nothing to do (a deletion the model had nothing for).
    Nothing,
    /// Answered with another status, or not answered.
    Refused(String),
}

impl fmt::Display for ApiOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiOutcome::Acked => write!(f, "acknowledged"),
            ApiOutcome::Nothing => write!(f, "nothing to do"),
            ApiOutcome::Refused(why) => write!(f, "refused: {why}"),
        }
    }
}

/// A router process and its model.
pub struct Router {
    /// Where it sits.
    pub spec: RouterSpec,
    bin: PathBuf,
    config: PathBuf,
    data: PathBuf,
    tokens: PathBuf,
    out: PathBuf,
    /// Its log (standard error, every start appended).
    pub log: PathBuf,
    child: Option<Child>,
    model: Model,
    client: reqwest::Client,
    /// Times it was started.
    pub starts: u32,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { what, source }
}

/// The router's configuration: its two NIs (the tcp1 one on its interface, watched),
/// routing on, and the kernel's router check of gateways.
fn router_yaml(spec: &RouterSpec) -> String {
    format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: {tcp}
    - net type: tcp1
      local NI(s):
        - nid: {tcp1}
          interfaces:
              0: {dev}
routing:
    enable: 1
lnet-router:
    acceptor_port: {ACCEPTOR_PORT}
    alive_router_check_interval: 1
    router_ping_timeout: 1
",
        tcp = spec.tcp,
        tcp1 = spec.tcp1,
        dev = spec.dev,
    )
}

impl Router {
    /// Writes the router's files under `dir` (configuration, tokens; the data dir is made
    /// by the router).
    pub fn prepare(spec: RouterSpec, bin: &Path, dir: &Path) -> Result<Router, BenchError> {
        let base = dir.join(spec.name());
        std::fs::create_dir_all(&base).map_err(io(format!("create {}", base.display())))?;
        let config = base.join("lnet.yaml");
        std::fs::write(&config, router_yaml(&spec))
            .map_err(io(format!("write {}", config.display())))?;
        let tokens = base.join("tokens");
        std::fs::write(&tokens, format!("chaos admin {TOKEN}\n"))
            .map_err(io(format!("write {}", tokens.display())))?;
        let client = reqwest::Client::builder()
            .timeout(API_TIMEOUT)
            .build()
            .map_err(|e| BenchError::Setup(format!("HTTP client: {e}")))?;
        Ok(Router {
            bin: bin.to_owned(),
            data: base.join("data"),
            out: base.join("stdout"),
            log: base.join("log"),
            config,
            tokens,
            spec,
            child: None,
            model: Model::default(),
            client,
            starts: 0,
        })
    }

    /// Starts the process and waits until both NIs and the API listen.
    pub async fn start(&mut self) -> Result<(), BenchError> {
        let out = std::fs::File::create(&self.out)
            .map_err(io(format!("create {}", self.out.display())))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(io(format!("open {}", self.log.display())))?;
        let child = Command::new(&self.bin)
            .arg("run")
            .arg("--config")
            .arg(&self.config)
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--tokens-file")
            .arg(&self.tokens)
            .arg("--api-listen")
            .arg(self.spec.api.to_string())
            .args(["--plain-http", "--plain-http-mutations"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(log)
            .spawn()
            .map_err(io(format!("start {}", self.bin.display())))?;
        self.child = Some(child);
        self.starts += 1;
        self.wait_ready().await
    }

    /// Whether the process runs.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    async fn wait_ready(&mut self) -> Result<(), BenchError> {
        let end = Instant::now() + READY_BOUND;
        let wanted = [
            format!("lnet-router: NI {} listening on", self.spec.tcp),
            format!("lnet-router: NI {} listening on", self.spec.tcp1),
            "lnet-router: API listening on".to_owned(),
        ];
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            if wanted.iter().all(|w| text.contains(w.as_str())) {
                return Ok(());
            }
            if !self.alive() {
                return Err(BenchError::Check(format!(
                    "{} exited at start: {text}",
                    self.spec.name()
                )));
            }
            if Instant::now() >= end {
                return Err(BenchError::Timeout(format!(
                    "{} is not ready after {READY_BOUND:?}: {text}",
                    self.spec.name()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL (std's kill): the router cannot flush, drain or say goodbye.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sets the link of the tcp1 interface up or down (`ip link set`).
    pub fn set_link(&self, up: bool) -> Result<(), BenchError> {
        super::netns::ip(&[
            "link",
            "set",
            "dev",
            &self.spec.dev,
            if up { "up" } else { "down" },
        ])
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/api/v1{path}", self.spec.api)
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, Value), String> {
        let resp = req
            .bearer_auth(TOKEN)
            .send()
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = resp.status();
        let body = resp.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    fn refused(status: reqwest::StatusCode, body: &Value) -> ApiOutcome {
        ApiOutcome::Refused(format!("{status}: {body}"))
    }

    /// `POST /api/v1/routes`; the model takes the route when it is acknowledged.
    pub async fn add_route(&mut self, net: u32, hop: u32, priority: u32) -> ApiOutcome {
        let gateway = match remote_gateway(net) {
            Ok(g) => g.to_string(),
            Err(e) => return ApiOutcome::Refused(e.to_string()),
        };
        let body = json!({"net": format!("tcp{net}"), "gateway": gateway, "hop": hop, "priority": priority});
        match self
            .send(self.client.post(self.url("/routes")).json(&body))
            .await
        {
            Ok((s, _)) if s == reqwest::StatusCode::CREATED => {
                self.model.routes.insert(RouteKey {
                    net: format!("tcp{net}"),
                    gateway,
                    hop: i64::from(hop),
                    priority: u64::from(priority),
                });
                ApiOutcome::Acked
            }
            Ok((s, b)) => Self::refused(s, &b),
            Err(why) => ApiOutcome::Refused(why),
        }
    }

    /// `DELETE /api/v1/routes/{net}/{gateway}`; the model drops the route when it is
    /// acknowledged.
    pub async fn del_route(&mut self, net: u32) -> ApiOutcome {
        let name = format!("tcp{net}");
        let Some(key) = self.model.routes.iter().find(|r| r.net == name).cloned() else {
            return ApiOutcome::Nothing;
        };
        let url = self.url(&format!("/routes/{}/{}", key.net, key.gateway));
        match self.send(self.client.delete(url)).await {
            Ok((s, _)) if s == reqwest::StatusCode::NO_CONTENT => {
                self.model.routes.remove(&key);
                ApiOutcome::Acked
            }
            Ok((s, b)) => Self::refused(s, &b),
            Err(why) => ApiOutcome::Refused(why),
        }
    }

    /// `POST /api/v1/nis/{nid}/fault-rules`; the model takes the rule (its id and the rule
    /// as answered) when it is acknowledged.
    pub async fn add_fault_rule(&mut self, side: Side, fault: Fault, seed: u64) -> ApiOutcome {
        let nid = self.spec.ni(side);
        let url = self.url(&format!("/nis/{nid}/fault-rules"));
        let req = self.client.post(url).json(&fault.rule_json(seed));
        match self.send(req).await {
            Ok((s, b)) if s == reqwest::StatusCode::CREATED => {
                match (b.get("id").and_then(Value::as_u64), b.get("rule")) {
                    (Some(id), Some(rule)) => {
                        self.model.fault_rules.insert(id, (nid, rule.clone()));
                        ApiOutcome::Acked
                    }
                    _ => ApiOutcome::Refused(format!("201 without an id and a rule: {b}")),
                }
            }
            Ok((s, b)) => Self::refused(s, &b),
            Err(why) => ApiOutcome::Refused(why),
        }
    }

    /// `DELETE /api/v1/nis/{nid}/fault-rules/{id}` of the oldest rule the model holds.
    pub async fn del_oldest_fault_rule(&mut self) -> ApiOutcome {
        let Some((id, nid)) = self
            .model
            .fault_rules
            .iter()
            .next()
            .map(|(id, (nid, _))| (*id, *nid))
        else {
            return ApiOutcome::Nothing;
        };
        let url = self.url(&format!("/nis/{nid}/fault-rules/{id}"));
        match self.send(self.client.delete(url)).await {
            Ok((s, _)) if s == reqwest::StatusCode::NO_CONTENT => {
                self.model.fault_rules.remove(&id);
                ApiOutcome::Acked
            }
            Ok((s, b)) => Self::refused(s, &b),
            Err(why) => ApiOutcome::Refused(why),
        }
    }

    /// How many fault rules the model holds.
    pub fn fault_rules(&self) -> usize {
        self.model.fault_rules.len()
    }

    /// Health back to full: `POST /api/v1/nis/{nid}/health` for both local NIs, or
    /// `POST /api/v1/peer-nis/health` (every peer NI).
    pub async fn reset_health(&self, peers: bool) -> ApiOutcome {
        let paths = if peers {
            vec!["/peer-nis/health".to_owned()]
        } else {
            vec![
                format!("/nis/{}/health", self.spec.tcp),
                format!("/nis/{}/health", self.spec.tcp1),
            ]
        };
        for p in paths {
            match self
                .send(self.client.post(self.url(&p)).json(&json!({})))
                .await
            {
                Ok((s, _)) if s == reqwest::StatusCode::OK => {}
                Ok((s, b)) => return Self::refused(s, &b),
                Err(why) => return ApiOutcome::Refused(why),
            }
        }
        ApiOutcome::Acked
    }

    async fn get(&self, path: &str) -> Result<Value, String> {
        match self.send(self.client.get(self.url(path))).await? {
            (s, b) if s == reqwest::StatusCode::OK => Ok(b),
            (s, b) => Err(format!("GET {path}: {s}: {b}")),
        }
    }

    /// Compares the router's routes and fault rules with the model: `None` when they are
    /// equal, else what differs.
    pub async fn state_mismatch(&self) -> Option<String> {
        let routes = match self.get("/routes").await {
            Ok(v) => v,
            Err(e) => return Some(e),
        };
        let shown: BTreeSet<RouteKey> = routes
            .get("routes")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .map(|r| RouteKey {
                        net: r
                            .get("net")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        gateway: r
                            .get("gateway")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        hop: r.get("hop").and_then(Value::as_i64).unwrap_or(-2),
                        priority: r
                            .get("priority")
                            .and_then(Value::as_u64)
                            .unwrap_or(u64::MAX),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut diffs = Vec::new();
        if shown != self.model.routes {
            diffs.push(format!(
                "routes: shown {:?}, acknowledged {:?}",
                shown, self.model.routes
            ));
        }
        let mut rules: BTreeMap<u64, (Nid, Value)> = BTreeMap::new();
        for nid in [self.spec.tcp, self.spec.tcp1] {
            let list = match self.get(&format!("/nis/{nid}/fault-rules")).await {
                Ok(v) => v,
                Err(e) => return Some(e),
            };
            for r in list
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let id = r.get("id").and_then(Value::as_u64).unwrap_or(u64::MAX);
                rules.insert(id, (nid, r.get("rule").cloned().unwrap_or(Value::Null)));
            }
        }
        if rules != self.model.fault_rules {
            diffs.push(format!(
                "fault rules: shown {:?}, acknowledged {:?}",
                rules, self.model.fault_rules
            ));
        }
        (!diffs.is_empty()).then(|| format!("{}: {}", self.spec.name(), diffs.join("; ")))
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.kill();
    }
}
