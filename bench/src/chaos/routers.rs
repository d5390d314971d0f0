//! The routers of a chaos run: `lnet-router run` processes, each with a data dir (its
//! sled store), an API token and the REST API on loopback, killed and started again, their
//! tcp1 link set down and up; and for each, a model of every change the API acknowledged
//! (routes, fault rules), compared with what the router shows after each restart and at
//! the end.
//!
//! A kill may cut an API change short. The model takes only what was acknowledged (201,
//! 204); a change refused at connect was not made. A change whose request went out but
//! whose answer was lost (the connection reset or closed under it) is unsure: at the next
//! comparison the router may show it made or not, either is accepted for that one item,
//! and the model takes what the router shows. A change left unanswered is an error only
//! when its router was neither killed nor down while it was under way.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
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

/// A change whose request went out but whose answer was lost: the router may have made it
/// or not.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unsure {
    /// A route added.
    RouteAdd(RouteKey),
    /// A route deleted.
    RouteDel(RouteKey),
    /// A fault rule added on an NI: known by its generator seed, its id unknown.
    FaultAdd {
        /// The NI.
        nid: Nid,
        /// The rule's seed (each added rule has its own).
        seed: u64,
    },
    /// Fault rule `id` deleted.
    FaultDel(u64),
}

/// A router's model and the changes it is unsure of.
#[derive(Debug, Default)]
struct ApiState {
    model: Model,
    unsure: Vec<Unsure>,
}

/// How an API change ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiOutcome {
    /// Acknowledged (201, 204 or 200).
    Acked,
    /// Nothing to do (a deletion the model had nothing for, an addition it has).
    Nothing(&'static str),
    /// Not answered. `sent`: the request went out (the change is unsure); else it was
    /// refused at connect (not made). `excused`: the router was killed or down meanwhile.
    Unanswered {
        /// Whether the request went out.
        sent: bool,
        /// Whether the router was killed or down while it was under way.
        excused: bool,
        /// The client's error.
        why: String,
    },
    /// Answered with another status.
    Refused(String),
}

impl ApiOutcome {
    /// Whether it breaks the invariant "every API change is answered, and acknowledged".
    pub fn is_error(&self) -> bool {
        match self {
            ApiOutcome::Acked | ApiOutcome::Nothing(_) => false,
            ApiOutcome::Unanswered { excused, .. } => !excused,
            ApiOutcome::Refused(_) => true,
        }
    }
}

impl fmt::Display for ApiOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiOutcome::Acked => write!(f, "acknowledged"),
            ApiOutcome::Nothing(why) => write!(f, "nothing to do: {why}"),
            ApiOutcome::Unanswered { sent, excused, why } => write!(
                f,
                "{}{}: {why}",
                if *sent {
                    "answer lost (unsure until the next check)"
                } else {
                    "not sent"
                },
                if *excused {
                    ", the router killed or down"
                } else {
                    ""
                }
            ),
            ApiOutcome::Refused(why) => write!(f, "refused: {why}"),
        }
    }
}

/// How a request ended.
enum Sent {
    /// With an answer.
    Answered(reqwest::StatusCode, Value),
    /// Without one; `sent`: the request went out.
    Unanswered { sent: bool, why: String },
}

/// What a comparison with the model found.
#[derive(Debug, Clone, Default)]
pub struct Check {
    /// What differs; `None` when the router shows what the model holds.
    pub mismatch: Option<String>,
    /// The unsure changes it settled, each with whether the router showed it made.
    pub settled: Vec<(String, bool)>,
}

/// A router process and its model; shared by the tasks of the schedule's actions.
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
    child: Mutex<Option<Child>>,
    /// Held by a kill from the kill to the restart's comparison: one at a time.
    life: tokio::sync::Mutex<()>,
    /// Held by each API change and comparison: one at a time (a kill does not wait).
    api: tokio::sync::Mutex<ApiState>,
    /// Kills so far.
    kills: AtomicU64,
    /// Set from a kill until the restarted router listens.
    down: AtomicBool,
    client: reqwest::Client,
    /// Times it was started.
    pub starts: AtomicU32,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { what, source }
}
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

/// The most fault rules the model lets a router hold (the schedule's two, and what
/// unacknowledged deletions left).
const MOST_FAULT_RULES: usize = 4;

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
            child: Mutex::new(None),
            life: tokio::sync::Mutex::new(()),
            api: tokio::sync::Mutex::new(ApiState::default()),
            kills: AtomicU64::new(0),
            down: AtomicBool::new(false),
            client,
            starts: AtomicU32::new(0),
        })
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the process and waits until both NIs and the API listen.
    pub async fn start(&self) -> Result<(), BenchError> {
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
        *self.child() = Some(child);
        self.starts.fetch_add(1, Ordering::Relaxed);
        self.wait_ready().await
    }

    /// Whether the process runs.
    fn alive(&self) -> bool {
        self.child()
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Whether the process was started and has exited without being killed (a killed
    /// router has no process until it is started again).
    pub fn dead(&self) -> bool {
        self.child()
            .as_mut()
            .is_some_and(|c| !matches!(c.try_wait(), Ok(None)))
    }

    async fn wait_ready(&self) -> Result<(), BenchError> {
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
    pub fn kill(&self) {
        let child = self.child().take();
        if let Some(mut c) = child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the router (whatever API change is under way), leaves it down for `down`,
    /// starts it again and compares its state with the model: the time the start took and
    /// what the comparison found. One kill at a time per router.
    pub async fn kill_and_restart(&self, down: Duration) -> Result<(Duration, Check), BenchError> {
        let _life = self.life.lock().await;
        self.down.store(true, Ordering::SeqCst);
        self.kills.fetch_add(1, Ordering::SeqCst);
        self.kill();
        tokio::time::sleep(down).await;
        let t0 = Instant::now();
        self.start().await?;
        let took = t0.elapsed();
        self.down.store(false, Ordering::SeqCst);
        Ok((took, self.check().await))
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

    async fn send(&self, req: reqwest::RequestBuilder) -> Sent {
        let resp = match req.bearer_auth(TOKEN).send().await {
            Ok(r) => r,
            Err(e) => {
                return Sent::Unanswered {
                    sent: !e.is_connect(),
                    why: format!("{e}"),
                }
            }
        };
        let status = resp.status();
        match resp.bytes().await {
            Ok(b) => Sent::Answered(status, serde_json::from_slice(&b).unwrap_or(Value::Null)),
            Err(e) => Sent::Unanswered {
                sent: true,
                why: format!("{status}, then the body: {e}"),
            },
        }
    }

    /// A change's request: how it ended, and whether the router was killed or down
    /// meanwhile.
    async fn change(&self, req: reqwest::RequestBuilder) -> (Sent, bool) {
        let kills = self.kills.load(Ordering::SeqCst);
        let was_down = self.down.load(Ordering::SeqCst);
        let sent = self.send(req).await;
        let excused = was_down
            || self.down.load(Ordering::SeqCst)
            || self.kills.load(Ordering::SeqCst) != kills;
        (sent, excused)
    }

    fn refused(status: reqwest::StatusCode, body: &Value) -> ApiOutcome {
        ApiOutcome::Refused(format!("{status}: {body}"))
    }

    /// `POST /api/v1/routes`; the model takes the route when it is acknowledged.
    pub async fn add_route(&self, net: u32, hop: u32, priority: u32) -> ApiOutcome {
        let gateway = match remote_gateway(net) {
            Ok(g) => g.to_string(),
            Err(e) => return ApiOutcome::Refused(e.to_string()),
        };
        let mut st = self.api.lock().await;
        let name = format!("tcp{net}");
        if st.model.routes.iter().any(|r| r.net == name) {
            return ApiOutcome::Nothing("it has a route to that net (a deletion was not made)");
        }
        let key = RouteKey {
            net: name,
            gateway,
            hop: i64::from(hop),
            priority: u64::from(priority),
        };
        let body =
            json!({"net": key.net, "gateway": key.gateway, "hop": hop, "priority": priority});
        match self
            .change(self.client.post(self.url("/routes")).json(&body))
            .await
        {
            (Sent::Answered(s, _), _) if s == reqwest::StatusCode::CREATED => {
                st.model.routes.insert(key);
                ApiOutcome::Acked
            }
            (Sent::Answered(s, b), _) => Self::refused(s, &b),
            (Sent::Unanswered { sent, why }, excused) => {
                if sent {
                    st.unsure.push(Unsure::RouteAdd(key));
                }
                ApiOutcome::Unanswered { sent, excused, why }
            }
        }
    }

    /// `DELETE /api/v1/routes/{net}/{gateway}`; the model drops the route when it is
    /// acknowledged.
    pub async fn del_route(&self, net: u32) -> ApiOutcome {
        let name = format!("tcp{net}");
        let mut st = self.api.lock().await;
        let Some(key) = st.model.routes.iter().find(|r| r.net == name).cloned() else {
            return ApiOutcome::Nothing("no route to that net (its addition was not made)");
        };
        let url = self.url(&format!("/routes/{}/{}", key.net, key.gateway));
        match self.change(self.client.delete(url)).await {
            (Sent::Answered(s, _), _) if s == reqwest::StatusCode::NO_CONTENT => {
                st.model.routes.remove(&key);
                ApiOutcome::Acked
            }
            (Sent::Answered(s, b), _) => Self::refused(s, &b),
            (Sent::Unanswered { sent, why }, excused) => {
                if sent {
                    st.unsure.push(Unsure::RouteDel(key));
                }
                ApiOutcome::Unanswered { sent, excused, why }
            }
        }
    }

    /// `POST /api/v1/nis/{nid}/fault-rules`; the model takes the rule (its id and the rule
    /// as answered) when it is acknowledged.
    pub async fn add_fault_rule(&self, side: Side, fault: Fault, seed: u64) -> ApiOutcome {
        let nid = self.spec.ni(side);
        let mut st = self.api.lock().await;
        if st.model.fault_rules.len() >= MOST_FAULT_RULES {
            return ApiOutcome::Nothing("it holds the most fault rules (deletions were not made)");
        }
        let url = self.url(&format!("/nis/{nid}/fault-rules"));
        let req = self.client.post(url).json(&fault.rule_json(seed));
        match self.change(req).await {
            (Sent::Answered(s, b), _) if s == reqwest::StatusCode::CREATED => {
                match (b.get("id").and_then(Value::as_u64), b.get("rule")) {
                    (Some(id), Some(rule)) => {
                        st.model.fault_rules.insert(id, (nid, rule.clone()));
                        ApiOutcome::Acked
                    }
                    _ => ApiOutcome::Refused(format!("201 without an id and a rule: {b}")),
                }
            }
            (Sent::Answered(s, b), _) => Self::refused(s, &b),
            (Sent::Unanswered { sent, why }, excused) => {
                if sent {
                    st.unsure.push(Unsure::FaultAdd { nid, seed });
                }
                ApiOutcome::Unanswered { sent, excused, why }
            }
        }
    }

    /// `DELETE /api/v1/nis/{nid}/fault-rules/{id}` of the oldest rule the model holds.
    pub async fn del_oldest_fault_rule(&self) -> ApiOutcome {
        let mut st = self.api.lock().await;
        let Some((id, nid)) = st
            .model
            .fault_rules
            .iter()
            .next()
            .map(|(id, (nid, _))| (*id, *nid))
        else {
            return ApiOutcome::Nothing("no fault rule (its addition was not made)");
        };
        let url = self.url(&format!("/nis/{nid}/fault-rules/{id}"));
        match self.change(self.client.delete(url)).await {
            (Sent::Answered(s, _), _) if s == reqwest::StatusCode::NO_CONTENT => {
                st.model.fault_rules.remove(&id);
                ApiOutcome::Acked
            }
            (Sent::Answered(s, b), _) => Self::refused(s, &b),
            (Sent::Unanswered { sent, why }, excused) => {
                if sent {
                    st.unsure.push(Unsure::FaultDel(id));
                }
                ApiOutcome::Unanswered { sent, excused, why }
            }
        }
    }

    /// How many fault rules the model holds.
    pub async fn fault_rules(&self) -> usize {
        self.api.lock().await.model.fault_rules.len()
    }

    /// Health back to full: `POST /api/v1/nis/{nid}/health` for both local NIs, or
    /// `POST /api/v1/peer-nis/health` (every peer NI). Nothing for the model to keep.
    pub async fn reset_health(&self, peers: bool) -> ApiOutcome {
        let paths = if peers {
            vec!["/peer-nis/health".to_owned()]
        } else {
            vec![
                format!("/nis/{}/health", self.spec.tcp),
                format!("/nis/{}/health", self.spec.tcp1),
            ]
        };
        let _st = self.api.lock().await;
        for p in paths {
            match self
                .change(self.client.post(self.url(&p)).json(&json!({})))
                .await
            {
                (Sent::Answered(s, _), _) if s == reqwest::StatusCode::OK => {}
                (Sent::Answered(s, b), _) => return Self::refused(s, &b),
                (Sent::Unanswered { sent, why }, excused) => {
                    return ApiOutcome::Unanswered { sent, excused, why }
                }
            }
        }
        ApiOutcome::Acked
    }

    async fn get(&self, path: &str) -> Result<Value, String> {
        match self.send(self.client.get(self.url(path))).await {
            Sent::Answered(s, b) if s == reqwest::StatusCode::OK => Ok(b),
            Sent::Answered(s, b) => Err(format!("GET {path}: {s}: {b}")),
            Sent::Unanswered { why, .. } => Err(format!("GET {path}: no answer: {why}")),
        }
    }

    /// The routes and fault rules the router shows.
    async fn shown(&self) -> Result<(BTreeSet<RouteKey>, BTreeMap<u64, (Nid, Value)>), String> {
        let routes = self.get("/routes").await?;
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
        let mut rules: BTreeMap<u64, (Nid, Value)> = BTreeMap::new();
        for nid in [self.spec.tcp, self.spec.tcp1] {
            let list = self.get(&format!("/nis/{nid}/fault-rules")).await?;
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
        Ok((shown, rules))
    }

    /// Compares the router's routes and fault rules with the model, once the unsure
    /// changes are settled by what the router shows (either outcome is accepted for each,
    /// and the model takes it).
    pub async fn check(&self) -> Check {
        let mut st = self.api.lock().await;
        let (routes, rules) = match self.shown().await {
            Ok(v) => v,
            Err(e) => {
                return Check {
                    mismatch: Some(format!("{}: {e}", self.spec.name())),
                    settled: Vec::new(),
                }
            }
        };
        let settled = settle(&mut st, &routes, &rules);
        let mut diffs = Vec::new();
        if routes != st.model.routes {
            diffs.push(format!(
                "routes: shown {:?}, acknowledged {:?}",
                routes, st.model.routes
            ));
        }
        if rules != st.model.fault_rules {
            diffs.push(format!(
                "fault rules: shown {:?}, acknowledged {:?}",
                rules, st.model.fault_rules
            ));
        }
        Check {
            mismatch: (!diffs.is_empty())
                .then(|| format!("{}: {}", self.spec.name(), diffs.join("; "))),
            settled,
        }
    }
}

/// Settles each unsure change by what the router shows: made or not, the model takes it.
/// Each, with whether it was made.
fn settle(
    st: &mut ApiState,
    routes: &BTreeSet<RouteKey>,
    rules: &BTreeMap<u64, (Nid, Value)>,
) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for u in std::mem::take(&mut st.unsure) {
        match u {
            Unsure::RouteAdd(k) => {
                let m = routes.contains(&k);
                out.push((format!("route to {} added", k.net), m));
                if m {
                    st.model.routes.insert(k);
                }
            }
            Unsure::RouteDel(k) => {
                let m = !routes.contains(&k);
                out.push((format!("route to {} deleted", k.net), m));
                if m {
                    st.model.routes.remove(&k);
                }
            }
            Unsure::FaultAdd { nid, seed } => {
                let found = rules.iter().find(|(id, (n, rule))| {
                    *n == nid
                        && !st.model.fault_rules.contains_key(id)
                        && rule.get("seed").and_then(Value::as_u64) == Some(seed)
                });
                out.push((
                    format!("fault rule (seed {seed}) on {nid} added"),
                    found.is_some(),
                ));
                if let Some((id, v)) = found {
                    st.model.fault_rules.insert(*id, v.clone());
                }
            }
            Unsure::FaultDel(id) => {
                let m = !rules.contains_key(&id);
                out.push((format!("fault rule {id} deleted"), m));
                if m {
                    st.model.fault_rules.remove(&id);
                }
            }
        }
    }
    out
}

impl Drop for Router {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn route(net: u32) -> RouteKey {
        RouteKey {
            net: format!("tcp{net}"),
            gateway: remote_gateway(net).unwrap().to_string(),
            hop: 1,
            priority: 0,
        }
    }

    #[test]
    fn an_unsure_change_is_settled_by_what_the_router_shows() {
        let nid = RouterSpec::new(0).unwrap().tcp;
        let rule = |seed: u64| json!({"kind": "drop", "seed": seed});
        let mut st = ApiState::default();
        st.model.routes.insert(route(10));
        st.model.fault_rules.insert(1, (nid, rule(5)));
        st.unsure = vec![
            Unsure::RouteAdd(route(11)),
            Unsure::RouteDel(route(10)),
            Unsure::FaultAdd { nid, seed: 9 },
            Unsure::FaultDel(1),
        ];
        // The router shows the additions made and the deletions not made, and a rule of
        // another seed that nothing asked for.
        let routes: BTreeSet<RouteKey> = [route(10), route(11)].into_iter().collect();
        let rules: BTreeMap<u64, (Nid, Value)> = [
            (1, (nid, rule(5))),
            (2, (nid, rule(9))),
            (3, (nid, rule(7))),
        ]
        .into_iter()
        .collect();
        let settled = settle(&mut st, &routes, &rules);
        let made: Vec<bool> = settled.iter().map(|(_, m)| *m).collect();
        assert_eq!(made, vec![true, false, true, false], "{settled:?}");
        assert_eq!(st.model.routes, routes);
        assert_eq!(
            st.model.fault_rules.keys().copied().collect::<Vec<_>>(),
            vec![1, 2],
            "the rule of another seed is not taken"
        );
        assert!(st.unsure.is_empty());
        // Settled once: the next comparison accepts nothing more.
        assert!(settle(&mut st, &BTreeSet::new(), &BTreeMap::new()).is_empty());
        assert_eq!(st.model.routes, routes);
    }

    #[test]
    fn an_unanswered_change_is_an_error_only_when_the_router_was_up() {
        let lost = |excused| ApiOutcome::Unanswered {
            sent: true,
            excused,
            why: "connection reset".to_owned(),
        };
        assert!(!lost(true).is_error());
        assert!(lost(false).is_error());
        assert!(ApiOutcome::Refused("409".to_owned()).is_error());
        assert!(!ApiOutcome::Acked.is_error() && !ApiOutcome::Nothing("x").is_error());
    }
}
