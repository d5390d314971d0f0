//! A real Prometheus (Debian's `prometheus` binary) scrapes a routed topology: end node A
//! (tcp) reaches end node B (tcp1) through routers R1 and R2, each node with the
//! metrics-only listener `--metrics-listen` serves, on loopback. Prometheus runs with the
//! chart's alert rules, a 1 s scrape and evaluation interval and its own data directory.
//!
//! The test checks that the series of docs/metrics.md exist, that every PromQL expression
//! of the chart's Grafana dashboard returns series, and that when R1's far link (tcp1) goes
//! down the chart's LNetRouteDown alert is pending within its `for:` plus one scrape
//! interval, fires once pending for its `for:`, and resolves once the link is back.
//!
//! A second test runs the `lnet-router` binary with `--metrics-listen` and
//! `--metrics-exporter-labels` and no `--data-dir`: `/metrics` answers without a token, and
//! nothing else does.
//!
//! Without the prometheus binary the first test says so and returns (scripts/install-test-deps
//! installs it, so scripts/test runs it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use actors::{MdSpec, Node, PutRequest};
use bytes::Bytes;
use lnet::Nid;
use router::plan::{plan, HostInterfaces};
use router::run::{start_plan, Running};
use serde_json::Value;
use tokio::time::Instant;

mod support;
use support::{sigterm, wait_listening, write_config, Daemon};

/// Every wait is bounded by this.
const WAIT: Duration = Duration::from_secs(45);
/// The scrape and rule evaluation interval of the test's Prometheus.
const SCRAPE: Duration = Duration::from_secs(1);

const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../helm/lnet-router/files/prometheus/lnet-router.rules.yaml"
);
const DASHBOARD: &str = include_str!("../../helm/lnet-router/files/grafana/lnet-router-fleet.json");

const R1: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.46.2@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.47.2@tcp1
routing:
    enable: 1
lnet-router:
    acceptor_port: 21996
";
const R2: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.46.3@tcp
    - net type: tcp1
      local NI(s):
        - nid: 127.0.47.3@tcp1
routing:
    enable: 1
lnet-router:
    acceptor_port: 21996
";
const A: &str = "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.46.1@tcp
route:
    - net: tcp1
      gateway: 127.0.46.2@tcp
      hop: 1
    - net: tcp1
      gateway: 127.0.46.3@tcp
      hop: 1
lnet-router:
    acceptor_port: 21996
    alive_router_check_interval: 2
    router_ping_timeout: 2
";
const B: &str = "net:
    - net type: tcp1
      local NI(s):
        - nid: 127.0.47.1@tcp1
route:
    - net: tcp
      gateway: 127.0.47.2@tcp1
      hop: 1
    - net: tcp
      gateway: 127.0.47.3@tcp1
      hop: 1
lnet-router:
    acceptor_port: 21996
    alive_router_check_interval: 2
    router_ping_timeout: 2
";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// Prometheus, killed when the test ends however it ends.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn start_prometheus(bin: &Path, targets: &[(&str, SocketAddr)]) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let mut scrape = String::new();
    for (name, addr) in targets {
        scrape.push_str(&format!(
            "      - targets: ['{addr}']\n        labels:\n          node: {name}\n"
        ));
    }
    let config = format!(
        "global:\n  scrape_interval: {s}s\n  scrape_timeout: {s}s\n  evaluation_interval: {s}s\n\
         rule_files:\n  - {RULES}\n\
         scrape_configs:\n  - job_name: lnet-router\n    static_configs:\n{scrape}",
        s = SCRAPE.as_secs()
    );
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

/// The prometheus binary: `PROMETHEUS` if set, else `prometheus` on the PATH.
fn prometheus_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PROMETHEUS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    })
}

async fn get_json(client: &reqwest::Client, url: &str) -> Option<Value> {
    let r = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

/// The result of an instant query (panics on a query Prometheus refuses).
async fn query(client: &reqwest::Client, prom: &str, q: &str) -> Vec<Value> {
    let r = client
        .get(format!("{prom}/api/v1/query"))
        .query(&[("query", q)])
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert!(
        status.is_success() && body["status"] == "success",
        "query {q}: {status} {body}"
    );
    body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Polls `f` every 250 ms until it gives `Some`, at most `bound`.
async fn poll<T, F, Fut>(bound: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits (bounded) until query `q` returns series.
async fn present(client: &reqwest::Client, prom: &str, what: &str, q: &str) {
    poll(WAIT, what, || async {
        (!query(client, prom, q).await.is_empty()).then_some(())
    })
    .await;
}

/// The state (`pending` or `firing`) of the LNetRouteDown alert for `gateway`: `None`
/// when Prometheus did not answer, `Some(None)` when there is no such alert.
async fn route_down_state(
    client: &reqwest::Client,
    prom: &str,
    gateway: &str,
) -> Option<Option<String>> {
    let alerts = get_json(client, &format!("{prom}/api/v1/alerts")).await?;
    Some(
        alerts["data"]["alerts"]
            .as_array()?
            .iter()
            .find(|a| {
                a["labels"]["alertname"] == "LNetRouteDown" && a["labels"]["gateway"] == gateway
            })
            .and_then(|a| a["state"].as_str().map(str::to_owned)),
    )
}

/// The `for:` of alert `name` in the chart's rules (`30s`, `1m` or `2h`).
fn alert_for(name: &str) -> Duration {
    let text = std::fs::read_to_string(RULES).unwrap();
    let rest = &text[text.find(&format!("alert: {name}\n")).unwrap()..];
    let line = rest
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("for: "))
        .unwrap();
    let (n, unit) = line.split_at(line.len() - 1);
    let n: u64 = n.parse().unwrap();
    Duration::from_secs(match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => panic!("for: {line}"),
    })
}

/// The `expr:` of alert `name` in the chart's rules.
fn alert_expr(name: &str) -> String {
    let text = std::fs::read_to_string(RULES).unwrap();
    let rest = &text[text.find(&format!("alert: {name}\n")).unwrap()..];
    rest.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("expr: "))
        .unwrap()
        .to_owned()
}

/// Every PromQL expression of the dashboard (panel targets and template variable
/// queries), with Grafana's variables substituted for the test's job.
fn dashboard_expressions() -> Vec<String> {
    let d: Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(t["expr"].as_str().unwrap().to_owned());
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]["query"].as_str() {
            // label_values(EXPR, LABEL): the series EXPR must exist.
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|s| s.rsplit_once(','))
                .map(|(e, _)| e.to_owned())
                .unwrap();
            out.push(inner);
        }
    }
    out.into_iter()
        .map(|e| {
            e.replace("$__rate_interval", "10s")
                .replace("$job", "lnet-router")
                .replace("$instance", ".*")
        })
        .collect()
}

async fn start_node(name: &'static str, text: &str) -> (Running, web::WebServer) {
    let p = plan(name, text, &HostInterfaces).unwrap();
    let running = start_plan(&p).await.unwrap();
    let ctx = web::WebContext {
        node: running.node.clone(),
        tokens: Arc::new(web::MemoryTokens::new()),
        sink: None,
        tunables: p.tunables.clone(),
        config: None,
        nis: None,
    };
    // R2 labels its lustre_* series as the HPE/GSI exporters do.
    let server = web::start_metrics("127.0.0.1:0".parse().unwrap(), name == "r2", ctx)
        .await
        .unwrap();
    (running, server)
}

/// A sends a PUT to B every 100 ms, through the routers.
async fn traffic(a: Node, b: Node) {
    let mut sink = b
        .attach(MdSpec {
            portal: 21,
            match_bits: 7,
            data: Bytes::new(),
            depth: 64,
        })
        .await
        .unwrap();
    actix::spawn(async move { while sink.recv().await.is_some() {} });
    let payload = Bytes::from(vec![0x5au8; 8 << 10]);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for n in 0u64.. {
        tick.tick().await;
        let req = PutRequest {
            dest: nid("127.0.47.1@tcp1"),
            portal: 21,
            match_bits: 7,
            hdr_data: n,
            payload: payload.clone(),
            ack: true,
            timeout: Duration::from_secs(10),
        };
        if let Ok(txn) = a.put(req).await {
            actix::spawn(async move {
                let _ = txn.finish().await;
            });
        }
    }
}

#[actix::test]
async fn a_real_prometheus_scrapes_the_routers_and_the_route_down_alert_fires_and_resolves() {
    let Some(bin) = prometheus_binary() else {
        println!(
            "SKIPPED: no prometheus binary on the PATH (Debian package prometheus; \
             scripts/install-test-deps installs it)"
        );
        return;
    };
    let mut nodes = Vec::new();
    for (name, text) in [("r1", R1), ("r2", R2), ("a", A), ("b", B)] {
        nodes.push((name, start_node(name, text).await));
    }
    let node = |n: &str| {
        nodes
            .iter()
            .find(|(name, _)| *name == n)
            .map(|(_, (r, _))| r.node.clone())
            .unwrap()
    };
    let client = reqwest::Client::new();

    // The metrics-only listener: /metrics without a token, nothing else.
    let r1_addr = nodes[0].1 .1.local_addr();
    let m = client
        .get(format!("http://{r1_addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(m.status(), 200);
    let text = m.text().await.unwrap();
    assert!(
        text.contains("lnet_router_buffers{cpt=\"0\",pool=\"tiny\"}"),
        "{text}"
    );
    for path in ["/api/v1/nets", "/livez", "/"] {
        let r = client
            .get(format!("http://{r1_addr}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
    let r = client
        .post(format!("http://{r1_addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);

    let traffic = actix::spawn(traffic(node("a"), node("b")));
    let targets: Vec<(&str, SocketAddr)> = nodes
        .iter()
        .map(|(name, (_, s))| (*name, s.local_addr()))
        .collect();
    let prom = start_prometheus(&bin, &targets);
    let p = prom.url.clone();
    let started = Instant::now();
    poll(WAIT, "prometheus ready", || {
        let (c, p) = (client.clone(), p.clone());
        async move {
            let r = c.get(format!("{p}/-/ready")).send().await.ok()?;
            r.status().is_success().then_some(())
        }
    })
    .await;
    println!("prometheus ready after {:?}", started.elapsed());

    // Every node scraped, and traffic through the routers (router credits exist).
    poll(WAIT, "all four targets up, traffic routed", || {
        let (c, p) = (client.clone(), p.clone());
        async move {
            let up = query(&c, &p, "up == 1").await;
            let credits = query(&c, &p, "lnet_router_peer_rtr_credits").await;
            let rate = query(&c, &p, "rate(lustre_route_count_total[10s]) > 0").await;
            (up.len() == 4 && !credits.is_empty() && !rate.is_empty()).then_some(())
        }
    })
    .await;

    for series in [
        "lnet_router_route_up{node=\"a\",net=\"tcp1\",gateway=\"127.0.46.2@tcp\"} == 1",
        "lnet_router_route_hops",
        "lnet_router_gateway_state{node=\"a\",gateway=\"127.0.46.2@tcp\",state=\"alive\"} == 1",
        "lnet_router_net_advertised_up{node=\"r1\",net=\"tcp1\"} == 1",
        "lnet_router_routing_enabled{node=\"r1\"} == 1",
        "lnet_router_buffers{node=\"r1\",cpt=\"0\",pool=\"large\"} > 0",
        "lnet_router_buffer_credits",
        "lnet_router_buffer_min_credits",
        "lnet_router_peer_rtr_min_credits",
        "lnet_router_waiting_messages",
        "lnet_router_ni_tx_credits{node=\"r1\",nid=\"127.0.47.2@tcp1\"}",
        "lnet_router_ni_min_tx_credits",
        "lnet_router_forward_drops_total{reason=\"no_live_route\"}",
        "lnet_router_socklnd_conns_closed_total{node=\"r1\",nid=\"127.0.47.2@tcp1\",reason=\"handshake_timeout\"}",
        "lnet_router_socklnd_writes_total{node=\"r1\",by=\"writer_task\"}",
        "lustre_route_count_total{node=\"r1\"}",
        "lustre_send_count_total{node=\"r2\",component=\"lnet\",target=\"lnet\"}",
        "lustre_lnet_ni_health",
        "lnet_router_peer_ni_health",
        "lnet_router_recovery_queue_length",
        "process_resident_memory_bytes > 0",
        "process_open_fds > 0",
        "process_cpu_seconds_total",
        "process_start_time_seconds > 1.7e9",
    ] {
        present(&client, &p, series, series).await;
    }

    // The Grafana dashboard: every expression returns series for this topology.
    let exprs = dashboard_expressions();
    assert!(exprs.len() >= 20, "{exprs:?}");
    for e in &exprs {
        present(&client, &p, &format!("the dashboard's expression {e}"), e).await;
    }
    println!("{} dashboard expressions return series", exprs.len());

    // B sends to a NID on tcp where no node listens: the router that carries it cannot
    // reach it, and drops the message after its resends, counted by reason.
    let b = node("b");
    for n in 0..3u64 {
        let req = PutRequest {
            dest: nid("127.0.46.99@tcp"),
            portal: 21,
            match_bits: 7,
            hdr_data: n,
            payload: Bytes::from_static(b"lost"),
            ack: false,
            timeout: Duration::from_secs(10),
        };
        let txn = b.put(req).await.unwrap();
        actix::spawn(async move {
            let _ = txn.finish().await;
        });
    }
    let drops_at = Instant::now();
    present(
        &client,
        &p,
        "forward drops of the unreachable NID counted",
        "sum by (node) (lnet_router_forward_drops_total{reason=\"send_failed\"}) > 0",
    )
    .await;
    present(
        &client,
        &p,
        "the LNetForwardDropsRising expression",
        &alert_expr("LNetForwardDropsRising"),
    )
    .await;
    println!(
        "forward drops counted {:?} after the sends",
        drops_at.elapsed()
    );

    // R1's far link goes down: it advertises tcp1 DOWN and pushes that to A, whose route
    // to tcp1 through R1 goes down; the alert is pending within its `for:` plus a scrape.
    let r1 = node("r1");
    let route_down_for = alert_for("LNetRouteDown");
    r1.set_ni_link(nid("127.0.47.2@tcp1"), false).await.unwrap();
    let down_at = Instant::now();
    let state = poll(
        route_down_for + SCRAPE,
        "LNetRouteDown pending or firing",
        || {
            let (c, p) = (client.clone(), p.clone());
            async move { route_down_state(&c, &p, "127.0.46.2@tcp").await.flatten() }
        },
    )
    .await;
    println!(
        "LNetRouteDown {state} {:?} after R1's tcp1 link went down",
        down_at.elapsed()
    );
    let pending_seen = Instant::now();
    assert!(state == "pending" || state == "firing", "{state}");
    // Each node is scraped on its own schedule: wait (bounded) for each to show it.
    for (what, q) in [
        (
            "the route's down reason",
            "lnet_router_route_down_reason{node=\"a\",gateway=\"127.0.46.2@tcp\",reason=\"no_up_ni_on_remote_net\"} == 1",
        ),
        (
            "R1 advertises tcp1 DOWN",
            "lnet_router_net_advertised_up{node=\"r1\",net=\"tcp1\"} == 0",
        ),
        (
            "the route through R2 stays up",
            "lnet_router_route_up{node=\"a\",gateway=\"127.0.46.3@tcp\"} == 1",
        ),
    ] {
        present(&client, &p, what, q).await;
    }

    // It fires at the first rule evaluation after it has been pending for its `for:`: at
    // most `for:` plus one evaluation interval after it was seen pending (plus two seconds
    // for the polls on a loaded machine).
    let fire_bound = route_down_for + SCRAPE + Duration::from_secs(2);
    poll(
        fire_bound.saturating_sub(pending_seen.elapsed()),
        "LNetRouteDown firing",
        || {
            let (c, p) = (client.clone(), p.clone());
            async move {
                (route_down_state(&c, &p, "127.0.46.2@tcp")
                    .await
                    .flatten()?
                    .as_str()
                    == "firing")
                    .then_some(())
            }
        },
    )
    .await;
    println!(
        "LNetRouteDown firing {:?} after R1's tcp1 link went down (for: {route_down_for:?})",
        down_at.elapsed()
    );

    // The link comes back: the route is up again and the alert resolves.
    r1.set_ni_link(nid("127.0.47.2@tcp1"), true).await.unwrap();
    let up_at = Instant::now();
    poll(WAIT, "LNetRouteDown resolved", || {
        let (c, p) = (client.clone(), p.clone());
        async move {
            matches!(route_down_state(&c, &p, "127.0.46.2@tcp").await, Some(None)).then_some(())
        }
    })
    .await;
    println!(
        "LNetRouteDown resolved {:?} after the link came back",
        up_at.elapsed()
    );
    assert!(!query(
        &client,
        &p,
        "lnet_router_route_up{node=\"a\",gateway=\"127.0.46.2@tcp\"} == 1"
    )
    .await
    .is_empty());

    traffic.abort();
    drop(prom);
    for (_, (running, server)) in nodes {
        server.shutdown().await;
        running.stop().await;
    }
}

#[actix::test]
async fn the_daemon_serves_metrics_alone_on_its_metrics_listener() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        "net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.48.1@tcp
lnet-router:
    acceptor_port: 21997
",
    );
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut daemon = Daemon::start_args(&[
        "run".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--metrics-listen".as_ref(),
        listen.to_string().as_ref(),
        "--metrics-exporter-labels".as_ref(),
    ]);
    wait_listening(&mut daemon, listen).await;
    let client = reqwest::Client::new();
    let r = client
        .get(format!("http://{listen}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains(
            "lustre_lnet_ni_up{component=\"lnet\",target=\"lnet\",nid=\"127.0.48.1@tcp\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains("\nprocess_resident_memory_bytes "), "{text}");
    let r = client
        .get(format!("http://{listen}/api/v1/nets"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    sigterm(daemon.pid());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(
        out.contains(&format!("lnet-router: metrics listening on {listen}")),
        "{out}"
    );
}
