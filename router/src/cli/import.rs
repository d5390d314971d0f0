//! `import FILE [--add|--del|--show|--exec]`: an `lnetctl export` document applied to the running
//! node through the API, one request per item, with the API's own changes (each an admin
//! event, kept in the store).
//!
//! `--add` (the default) sets `global:`, `buffers:` and `routing:`, then adds the peers, the
//! routes and the `udsp:` rules (each at its `idx`, in file order). `--del` deletes the
//! routes, then the peers (whole, or the NIDs listed when they leave out the primary NID),
//! the `udsp:` rules by `idx`, sets routing off and the `global:` keys lnetctl resets
//! (`max_interfaces`, `numa_range`, `discovery`, `drop_asym_route`) back to their defaults,
//! as `lnetctl import --del` does. `--show` prints what the node has for the items the file
//! names. `--exec` runs the file's `ping:` and `discover:` commands (and nothing else).
//!
//! What cannot be done at run time is refused, item by item, and the rest is still
//! applied: a `net:` item the node does not have (or whose `tunables:` differ from the
//! running NI's: nets are set in the configuration file) and the `lnet-router:` section. Every failure is one item of the error list lnetctl prints,
//! under the command, and the exit status is non-zero.

use std::path::Path;

use lnet::config::{Config, LocalNi, NetConfig, UdspRule};
use lnet::tunables::{TunableName, Tunables};

use super::client::{json, Client, CtlError, ErrorItem};
use super::Connect;

/// What `import` does with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ImportMode {
    /// `--add`.
    Add,
    /// `--del`.
    Del,
    /// `--show`.
    Show,
}

impl ImportMode {
    const fn command(self) -> &'static str {
        match self {
            ImportMode::Add => "add",
            ImportMode::Del => "del",
            ImportMode::Show => "show",
        }
    }
}

/// EOPNOTSUPP: what this router cannot change at run time.
const NOT_SUPPORTED: i32 = -95;

/// The failures of one import, in the order they happened, and the API's answers.
struct Report<'a> {
    cl: &'a Client,
    failed: Vec<(&'static str, i32, String)>,
    answers: Vec<serde_json::Value>,
}

impl Report<'_> {
    fn fail(&mut self, object: &'static str, errno: i32, descr: String) {
        self.failed.push((object, errno, descr));
    }

    /// Keeps the answer, or the failure of `object` with `what` before the API's reason.
    fn note(&mut self, object: &'static str, what: &str, r: Result<serde_json::Value, CtlError>) {
        match r {
            Ok(v) => self.answers.push(v),
            Err(e) => self.fail(object, e.errno, format!("{what}: {}", e.descr)),
        }
    }

    fn finish(self, as_json: bool) -> Result<String, CtlError> {
        let mut failed = self.failed.into_iter();
        let Some((object, errno, descr)) = failed.next() else {
            return Ok(if as_json {
                json(&serde_json::Value::Array(self.answers))
            } else {
                String::new()
            });
        };
        let mut e = self.cl.err(errno, descr);
        e.object = object;
        e.more = failed
            .map(|(object, errno, descr)| ErrorItem {
                object: object.to_owned(),
                errno,
                descr,
            })
            .collect();
        Err(e)
    }
}

/// Reads and parses the file; lnetctl's `yaml: - builder:` error when it cannot.
fn read(c: &Connect, file: &Path) -> Result<Config, CtlError> {
    let cl = Client::new(c, "yaml", "builder")?;
    let text = read_text(&cl, file)?;
    lnet::config::parse(&text).map_err(|e| cl.err(-22, format!("{}: {e}", file.display())))
}

/// The file's text; lnetctl's `cannot open` error when it cannot be read.
fn read_text(cl: &Client, file: &Path) -> Result<String, CtlError> {
    std::fs::read_to_string(file).map_err(|e| {
        let errno = e.raw_os_error().map_or(-5, |n| -n);
        cl.err(errno, format!("cannot open '{}': {e}", file.display()))
    })
}

/// `import FILE --exec`: runs the file's `ping:` and `discover:` commands.
pub(super) async fn exec(c: &Connect, file: &Path) -> Result<String, CtlError> {
    let cl = Client::new(c, "yaml", "builder")?;
    let text = read_text(&cl, file)?;
    let commands = lnet::config::parse_exec(&text)
        .map_err(|e| cl.err(-22, format!("{}: {e}", file.display())))?;
    super::ping::exec(c, &commands).await
}

/// `import FILE [--add|--del|--show]`.
pub(super) async fn import(c: &Connect, file: &Path, mode: ImportMode) -> Result<String, CtlError> {
    let doc = read(c, file)?;
    let cl = Client::new(c, mode.command(), "import")?;
    let text = cl.get_text("/api/v1/export").await?;
    let node = lnet::config::parse(&text)
        .map_err(|e| cl.err(-5, format!("the node's export cannot be read: {e}")))?;
    if mode == ImportMode::Show {
        return Ok(show(&doc, &node).to_yaml());
    }
    let mut r = Report {
        cl: &cl,
        failed: Vec::new(),
        answers: Vec::new(),
    };
    match mode {
        ImportMode::Add => add(&cl, &doc, &node, &mut r).await,
        _ => del(&cl, &doc, &mut r).await,
    }
    if doc.router.is_some() {
        r.fail(
            "lnet-router",
            NOT_SUPPORTED,
            "lnet-router: read at start only (the configuration file)".to_owned(),
        );
    }
    r.finish(c.json)
}

/// Whether the node runs net `n` as the file describes it; why not.
fn net_refusal(n: &NetConfig, node: &Config) -> Option<String> {
    let Some(running) = node.nets.iter().find(|m| m.net_type == n.net_type) else {
        return Some(format!(
            "net {}: the node has no NI on it and nets cannot be added at run time (configuration file)",
            n.net_type
        ));
    };
    for (i, ni) in n.local_nis.iter().enumerate() {
        let found: Option<&LocalNi> = match ni.nid {
            Some(nid) => running.local_nis.iter().find(|m| m.nid == Some(nid)),
            None => running.local_nis.get(i),
        };
        let name = ni.nid.map_or_else(|| format!("NI {i}"), |n| n.to_string());
        let Some(m) = found else {
            return Some(format!(
                "net {}: {name}: no such NI on the node, and NIs cannot be added at run time (configuration file)",
                n.net_type
            ));
        };
        if let (Some(want), Some(have)) = (&ni.tunables, &m.tunables) {
            if want != have {
                return Some(format!(
                    "net {}: {name}: tunables differ from the running NI's (peer_timeout {}, peer_credits {}, peer_buffer_credits {}, credits {}) and cannot be set at run time",
                    n.net_type, have.peer_timeout, have.peer_credits, have.peer_buffer_credits, have.credits
                ));
            }
        }
    }
    None
}

async fn add(cl: &Client, doc: &Config, node: &Config, r: &mut Report<'_>) {
    for n in &doc.nets {
        if let Some(why) = net_refusal(n, node) {
            r.fail("net", NOT_SUPPORTED, why);
        }
    }
    if let Some(g) = &doc.global {
        let mut body = serde_json::Map::new();
        for (name, v) in g.settable() {
            if let Some(v) = v {
                body.insert(name.as_str().to_owned(), serde_json::json!(v));
            }
        }
        if !body.is_empty() {
            let put = cl.http.put(format!("{}/api/v1/global", cl.base));
            let res = cl.send(put.json(&serde_json::Value::Object(body))).await;
            r.note("global", "global", res);
        }
    }
    if let Some(b) = &doc.buffers {
        let body = serde_json::json!({ "tiny": b.tiny, "small": b.small, "large": b.large });
        let put = cl.http.put(format!("{}/api/v1/buffers", cl.base));
        let res = cl.send(put.json(&body)).await;
        r.note("buf", "buffers", res);
    }
    if let Some(rt) = &doc.routing {
        let enable = u8::from(rt.enable.forwards());
        let put = cl.http.put(format!("{}/api/v1/routing", cl.base));
        let res = cl
            .send(put.json(&serde_json::json!({ "enable": enable })))
            .await;
        r.note("routing", "routing", res);
    }
    for p in &doc.peers {
        let nids: Vec<String> = p.peer_nis.iter().map(|n| n.nid.to_string()).collect();
        let body = serde_json::json!({
            "primary_nid": p.primary_nid.to_string(),
            "nids": nids,
            "multi_rail": p.multi_rail,
        });
        let res = cl.post("/api/v1/peers", body).await;
        r.note("peer_ni", &format!("peer {}", p.primary_nid), res);
    }
    for rt in &doc.routes {
        let hop = rt.hop.filter(|h| *h != lnet::config::HOP_UNDEFINED);
        let body = serde_json::json!({
            "net": rt.net.to_string(),
            "gateway": rt.gateway.to_string(),
            "hop": hop,
            "priority": rt.priority,
        });
        let res = cl.post("/api/v1/routes", body).await;
        r.note(
            "route",
            &format!("route to {} via {}", rt.net, rt.gateway),
            res,
        );
    }
    for (i, u) in doc.udsp.iter().enumerate() {
        let body = serde_json::json!({
            "src": u.src,
            "dst": u.dst,
            "rte": u.rte,
            "priority": u.priority,
            "idx": u.idx,
        });
        let res = cl.post("/api/v1/udsp", body).await;
        r.note("udsp", &udsp_name(i, u), res);
    }
}

/// How a failure names the file's `i`-th UDSP rule.
fn udsp_name(i: usize, u: &UdspRule) -> String {
    u.idx
        .map_or_else(|| format!("udsp rule {i}"), |n| format!("udsp idx {n}"))
}

/// Deletes the file's UDSP rules by `idx`, as lnetctl does, the highest first: each `idx`
/// then names the rule it named when the file was exported (deleting a lower one first
/// would move the later rules up under it). A rule without an `idx` names none.
async fn del_udsp(cl: &Client, doc: &Config, r: &mut Report<'_>) {
    let mut named: Vec<u32> = Vec::new();
    for (i, u) in doc.udsp.iter().enumerate() {
        match u.idx {
            Some(n) => named.push(n),
            None => r.fail(
                "udsp",
                -22,
                format!("{}: no idx, so no rule to delete", udsp_name(i, u)),
            ),
        }
    }
    named.sort_unstable_by(|a, b| b.cmp(a));
    named.dedup();
    for n in named {
        let res = cl.delete(&format!("/api/v1/udsp/{n}")).await;
        r.note("udsp", &format!("udsp idx {n}"), res);
    }
}

async fn del(cl: &Client, doc: &Config, r: &mut Report<'_>) {
    for n in &doc.nets {
        r.fail(
            "net",
            NOT_SUPPORTED,
            format!(
                "net {}: nets cannot be deleted at run time (configuration file)",
                n.net_type
            ),
        );
    }
    for rt in &doc.routes {
        let res = cl
            .delete(&format!("/api/v1/routes/{}/{}", rt.net, rt.gateway))
            .await;
        r.note(
            "route",
            &format!("route to {} via {}", rt.net, rt.gateway),
            res,
        );
    }
    for p in &doc.peers {
        let what = format!("peer {}", p.primary_nid);
        let whole = p.peer_nis.is_empty() || p.peer_nis.iter().any(|n| n.nid == p.primary_nid);
        if whole {
            let res = cl.delete(&format!("/api/v1/peers/{}", p.primary_nid)).await;
            r.note("peer_ni", &what, res);
            continue;
        }
        for n in &p.peer_nis {
            let res = cl
                .delete(&format!("/api/v1/peers/{}/nids/{}", p.primary_nid, n.nid))
                .await;
            r.note("peer_ni", &what, res);
        }
    }
    del_udsp(cl, doc, r).await;
    if doc.routing.is_some() {
        let put = cl.http.put(format!("{}/api/v1/routing", cl.base));
        let res = cl.send(put.json(&serde_json::json!({ "enable": 0 }))).await;
        r.note("routing", "routing", res);
    }
    if let Some(g) = &doc.global {
        let defaults = Tunables::default();
        let mut body = serde_json::Map::new();
        for (name, given) in [
            (TunableName::MaxInterfaces, g.max_interfaces),
            (TunableName::NumaRange, g.numa_range),
            (TunableName::Discovery, g.discovery),
            (TunableName::DropAsymRoute, g.drop_asym_route),
        ] {
            if given.is_some() {
                body.insert(
                    name.as_str().to_owned(),
                    serde_json::json!(defaults.get(name)),
                );
            }
        }
        if !body.is_empty() {
            let put = cl.http.put(format!("{}/api/v1/global", cl.base));
            let res = cl.send(put.json(&serde_json::Value::Object(body))).await;
            r.note("global", "global", res);
        }
    }
}

/// What the node has for the items of `doc`: its nets of those types, those routes and
/// peers, its routing and buffers, the `global:` keys named, its UDSP rules at the `idx`
/// of the file's.
fn show(doc: &Config, node: &Config) -> Config {
    let nets = node
        .nets
        .iter()
        .filter(|n| doc.nets.iter().any(|d| d.net_type == n.net_type))
        .cloned()
        .collect();
    let routes = node
        .routes
        .iter()
        .filter(|n| {
            doc.routes
                .iter()
                .any(|d| d.net == n.net && d.gateway == n.gateway)
        })
        .cloned()
        .collect();
    let peers = node
        .peers
        .iter()
        .filter(|n| doc.peers.iter().any(|d| d.primary_nid == n.primary_nid))
        .cloned()
        .collect();
    let routing_asked = doc.routing.is_some() || doc.buffers.is_some();
    let global = doc.global.as_ref().zip(node.global.as_ref()).map(|(d, n)| {
        let pick = |asked: Option<u32>, have: Option<u32>| asked.and(have);
        lnet::config::Global {
            numa_range: pick(d.numa_range, n.numa_range),
            max_interfaces: pick(d.max_interfaces, n.max_interfaces),
            discovery: pick(d.discovery, n.discovery),
            drop_asym_route: pick(d.drop_asym_route, n.drop_asym_route),
            retry_count: pick(d.retry_count, n.retry_count),
            transaction_timeout: pick(d.transaction_timeout, n.transaction_timeout),
            health_sensitivity: pick(d.health_sensitivity, n.health_sensitivity),
            recovery_interval: pick(d.recovery_interval, n.recovery_interval),
            router_sensitivity: pick(d.router_sensitivity, n.router_sensitivity),
            lnd_timeout: pick(d.lnd_timeout, n.lnd_timeout),
            response_tracking: pick(d.response_tracking, n.response_tracking),
            recovery_limit: pick(d.recovery_limit, n.recovery_limit),
            max_recovery_ping_interval: pick(
                d.max_recovery_ping_interval,
                n.max_recovery_ping_interval,
            ),
        }
    });
    Config {
        nets,
        routes,
        peers,
        routing: node.routing.clone().filter(|_| routing_asked),
        buffers: node.buffers.clone().filter(|_| routing_asked),
        global,
        udsp: node
            .udsp
            .iter()
            .filter(|n| n.idx.is_some() && doc.udsp.iter().any(|d| d.idx == n.idx))
            .cloned()
            .collect(),
        router: None,
    }
}
