//! `lnet-router run`: the daemon. Builds the node from a [`Plan`], starts its NIs, peers
//! and routes, runs until SIGINT or SIGTERM, then drains (advertises its NIs DOWN and
//! routing disabled, pushes that to its peers, keeps forwarding for [`DRAIN_GRACE`] while
//! they move, waits at most [`DRAIN_BOUND`] for what it forwards to finish) and stops
//! the NIs.

use std::sync::Arc;
use std::time::Duration;

use actors::{Node, NodeConfig, NodeError};
use lnet::fault::RuleId;
use lnet::Nid;
use tokio::signal::unix::{signal, SignalKind};

use crate::net_control::RunningNis;
use crate::plan::Plan;

/// How long a stopping router keeps forwarding after it told its peers it is going down,
/// so that they move to other routers first.
pub const DRAIN_GRACE: Duration = Duration::from_millis(1000);
/// How long it then waits at most for the messages it is forwarding to finish.
pub const DRAIN_BOUND: Duration = Duration::from_secs(5);

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// An NI could not start (its acceptor could not listen, ...).
    #[error(transparent)]
    Ni(#[from] crate::tcp_ni::NiStartError),
    /// A configured peer was refused by the node.
    #[error("peer {primary} could not be added: {source}")]
    Peer {
        /// Its primary NID.
        primary: Nid,
        /// Why.
        #[source]
        source: NodeError,
    },
    /// A configured route was refused by the node.
    #[error("route to {net} via {gateway} could not be added: {source}")]
    Route {
        /// The remote net.
        net: lnet::Net,
        /// The gateway.
        gateway: Nid,
        /// Why.
        #[source]
        source: NodeError,
    },
    /// The signal handlers could not be installed.
    #[error("cannot install the signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// The API could not start.
    #[error("API: {0}")]
    Api(#[source] web::WebError),
    /// The web servers' thread could not start.
    #[error("cannot start the web servers' thread: {0}")]
    WebThread(#[source] std::io::Error),
    /// The fault rules kept in the store could not be read.
    #[error("cannot read the fault rules kept in the store")]
    FaultRules(#[source] store::StoreError),
    /// Whether the router was left draining could not be read from the store.
    #[error("cannot read the drain kept in the store")]
    DrainKept(#[source] store::StoreError),
    /// The node refused to start draining.
    #[error("cannot start draining: {0}")]
    Drain(#[source] NodeError),
    /// A fault rule kept in the store was refused by the node.
    #[error("fault rule {id} kept in the store was refused")]
    FaultRule {
        /// Its id.
        id: u32,
        /// Why.
        #[source]
        source: NodeError,
    },
}

/// The sender incarnation of this start, the same for every NI of this run: the time since
/// the Unix epoch in nanoseconds, as the kernel chooses it, and never 0.
fn incarnation() -> u64 {
    #[allow(clippy::disallowed_types)] // the incarnation is wall-clock time by definition
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    now.max(1)
}

/// A node started from a plan, with its NIs.
#[derive(Debug)]
pub struct Running {
    /// The node.
    pub node: Node,
    /// The threads of its CPTs (none when it runs on one).
    cpts: Vec<actix::Arbiter>,
    /// The sender incarnation of this start, which NIs added later share.
    incarnation: u64,
    /// The CPTs' runtimes, for the socklnd NIs added later.
    lnd_cpts: lnd::socklnd::Cpts,
    /// Its running NIs' live settings and link watches.
    nis: RunningNis,
}

impl Running {
    /// Stops every NI, then the CPTs' threads; whether all NIs stopped cleanly.
    pub async fn stop(self) -> bool {
        self.nis.links.end_all();
        let clean = stop_all(&self.node).await;
        for a in self.cpts {
            a.stop();
        }
        clean
    }
}

/// Starts the node described by `plan`: its NIs, with the watch on each one's link, its
/// peers and routes. Must be called inside a running actix system.
pub async fn start_plan(plan: &Plan) -> Result<Running, RunError> {
    start_plan_with(plan, false).await
}

/// [`start_plan`]; `draining`: the node drains from the start (it was left draining), so
/// that its first ping replies already say so.
async fn start_plan_with(plan: &Plan, draining: bool) -> Result<Running, RunError> {
    let numa = crate::numa::topology();
    let memory_node = crate::numa::process_node(&numa);
    let (arbiters, runtimes) = crate::cpts::start(plan.cpts, plan.cpt_scheduling).await;
    let node = Node::start(NodeConfig {
        cpts: arbiters.iter().map(actix::Arbiter::handle).collect(),
        tunables: plan.tunables.clone(),
        router_check: plan.router_check,
        net_check: plan.net_check,
        udsp: plan.udsp.clone(),
        numa,
        memory_node,
        ..NodeConfig::default()
    });
    let incarnation = incarnation();
    let cpts = lnd::socklnd::Cpts(runtimes);
    let nis = RunningNis::default();
    let drained = if draining {
        node.start_drain().await.map(drop)
    } else {
        Ok(())
    };
    let started = match drained {
        Ok(()) => start(&node, plan, incarnation, &cpts, &nis).await,
        Err(source) => Err(RunError::Drain(source)),
    };
    if let Err(e) = started {
        nis.links.end_all();
        stop_all(&node).await;
        for a in arbiters {
            a.stop();
        }
        return Err(e);
    }
    Ok(Running {
        node,
        cpts: arbiters,
        incarnation,
        lnd_cpts: cpts,
        nis,
    })
}

/// Runs the node described by `plan` until SIGINT or SIGTERM: with its store (`--data-dir`)
/// it installs the fault rules kept there; with `api` (which needs the store: it holds the
/// tokens and the event log) it serves the REST API; with `metrics.listen` it serves
/// `/metrics` alone there, over plain HTTP without a token. Must be called inside a
/// running actix system.
pub async fn run(
    plan: Plan,
    store: Option<Arc<store::Store>>,
    api: Option<crate::api::ApiSettings>,
    metrics: crate::api::MetricsSettings,
) -> Result<(), RunError> {
    // Install the handlers first, so that a signal that comes while the NIs start is not
    // lost (nor kills the process with the default action).
    let mut sigterm = signal(SignalKind::terminate()).map_err(RunError::Signals)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(RunError::Signals)?;
    // A router left draining (`lnet-router drain`) comes back draining, until `set
    // routing 1`.
    let draining = match &store {
        Some(store) => store.draining().map_err(RunError::DrainKept)?,
        None => false,
    };
    let running = start_plan_with(&plan, draining).await?;
    if draining {
        println!("lnet-router: draining, as it was left (`lnet-router set routing 1` ends it)");
    }
    if let Some(store) = &store {
        // The fault rules added through the API before a restart, under their ids.
        let mut installed = store.fault_rules().map_err(RunError::FaultRules);
        if let Ok(rules) = &installed {
            for r in rules {
                let id = RuleId(u64::from(r.id));
                if let Err(source) = running.node.insert_fault_rule(id, r.rule.clone()) {
                    installed = Err(RunError::FaultRule { id: r.id, source });
                    break;
                }
            }
        }
        match installed.map(|rules| rules.len()) {
            Ok(0) => {}
            Ok(n) => println!("lnet-router: {n} fault rule(s) installed from the store"),
            Err(e) => {
                running.stop().await;
                return Err(e);
            }
        }
    }
    // The API and /metrics run on a thread of their own: a burst of requests never
    // delays the actors or a CPT's LND tasks, nor the other way round.
    let wanted = api.is_some() || metrics.listen.is_some();
    let web = match web_runtime(wanted) {
        Ok(rt) => rt,
        Err(e) => {
            running.stop().await;
            return Err(RunError::WebThread(e));
        }
    };
    let started = match web {
        None => Ok(Ok((None, None))),
        Some(web) => {
            // NIs added through the API start on this (the system) thread, as the
            // configured ones did.
            let nis = store.as_ref().map(|store| {
                Arc::new(crate::net_control::RuntimeNis::new(
                    running.node.clone(),
                    Arc::clone(store),
                    running.incarnation,
                    running.lnd_cpts.clone(),
                    running.nis.clone(),
                    actix::Arbiter::current(),
                )) as Arc<dyn web::NiControl>
            });
            web.spawn(start_web(
                running.node.clone(),
                plan.tunables.clone(),
                store.clone(),
                nis,
                api,
                metrics,
            ))
            .await
        }
    };
    let (server, metrics_server) = match started {
        Ok(Ok(servers)) => servers,
        Ok(Err(e)) => {
            running.stop().await;
            return Err(e);
        }
        Err(e) => {
            running.stop().await;
            return Err(RunError::WebThread(std::io::Error::other(e)));
        }
    };
    let nids: Vec<String> = plan.nis.iter().map(|n| n.nid.to_string()).collect();
    println!("lnet-router: NIDs: {}", nids.join(" "));
    tracing::info!(nids = %nids.join(" "), "running; SIGINT or SIGTERM stops");

    let which = tokio::select! {
        _ = sigterm.recv() => "SIGTERM",
        _ = sigint.recv() => "SIGINT",
    };
    tracing::info!(signal = which, "draining");
    match running.node.drain(DRAIN_GRACE, DRAIN_BOUND).await {
        Ok(d) => {
            println!(
                "lnet-router: drained ({} forwarded messages under way at {which}, {} left)",
                d.in_flight_at_start, d.left
            );
            tracing::info!(in_flight = d.in_flight_at_start, left = d.left, "drained");
        }
        Err(e) => tracing::warn!(%e, "drain failed"),
    }
    let clean = running.stop().await;
    tracing::info!(clean, "NIs stopped");
    if let Some(s) = metrics_server {
        s.shutdown().await;
    }
    if let Some(s) = server {
        s.shutdown().await;
    }
    println!("lnet-router: stopped ({which})");
    Ok(())
}

/// A runtime on a thread of its own for the web servers, when `wanted`; the thread lives
/// as long as the process.
fn web_runtime(wanted: bool) -> std::io::Result<Option<tokio::runtime::Handle>> {
    if !wanted {
        return Ok(None);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = rt.handle().clone();
    std::thread::Builder::new()
        .name("lnet-web".into())
        .spawn(move || rt.block_on(std::future::pending::<()>()))?;
    Ok(Some(handle))
}

/// Starts the REST API (with `api`, which needs the store: it holds the tokens and the
/// event log) and the `/metrics` listener (with `metrics.listen`), on the calling
/// runtime.
async fn start_web(
    node: Node,
    tunables: lnet::tunables::Tunables,
    store: Option<Arc<store::Store>>,
    nis: Option<Arc<dyn web::NiControl>>,
    api: Option<crate::api::ApiSettings>,
    metrics: crate::api::MetricsSettings,
) -> Result<(Option<web::WebServer>, Option<web::WebServer>), RunError> {
    let server = match (api, &store) {
        (Some(settings), Some(store)) => {
            let tokens = Arc::new(crate::api::StoreTokens(Arc::clone(store)));
            let sink = Arc::new(crate::api::StoreLog(Arc::clone(store)));
            let ctx = web::WebContext {
                node: node.clone(),
                tokens,
                sink: Some(sink),
                tunables: tunables.clone(),
                config: Some(Arc::new(crate::api::StoreConfig(Arc::clone(store)))),
                nis,
            };
            let s = crate::api::start_with(&settings, ctx, metrics.exporter_labels)
                .await
                .map_err(RunError::Api)?;
            println!("lnet-router: API listening on {}", s.local_addr());
            Some(s)
        }
        _ => None,
    };
    let Some(listen) = metrics.listen else {
        return Ok((server, None));
    };
    let started = match &server {
        // Beside the API: the same state (tunables, events, drop counts).
        Some(api) => api.serve_metrics(listen).await,
        None => {
            let ctx = web::WebContext {
                node,
                tokens: Arc::new(web::MemoryTokens::new()),
                sink: None,
                tunables,
                config: None,
                nis: None,
            };
            web::start_metrics(listen, metrics.exporter_labels, ctx).await
        }
    };
    match started {
        Ok(s) => {
            println!("lnet-router: metrics listening on {}", s.local_addr());
            Ok((server, Some(s)))
        }
        Err(e) => {
            if let Some(s) = server {
                s.shutdown().await;
            }
            Err(RunError::Api(e))
        }
    }
}

async fn start(
    node: &Node,
    plan: &Plan,
    incarnation: u64,
    cpts: &lnd::socklnd::Cpts,
    nis: &RunningNis,
) -> Result<(), RunError> {
    for ni in &plan.nis {
        let started = crate::tcp_ni::start(node, ni, incarnation, cpts).await?;
        nis.links.start(node, ni.nid, started.interface.clone());
        if let Ok(mut socklnd) = nis.socklnd.lock() {
            socklnd.insert(ni.nid, started);
        }
    }
    #[cfg(feature = "o2ib")]
    for ni in &plan.o2ib_nis {
        let started = crate::o2ib_ni::start(node, ni, incarnation).await?;
        nis.links.start(node, ni.nid, started.interface.clone());
        if let Ok(mut o2ib) = nis.o2ib.lock() {
            o2ib.insert(ni.nid, started);
        }
    }
    for p in &plan.peers {
        node.add_peer(p.primary, p.nids.clone(), p.multi_rail)
            .await
            .map_err(|source| RunError::Peer {
                primary: p.primary,
                source,
            })?;
        tracing::info!(primary = %p.primary, nids = p.nids.len(), "peer added");
    }
    for r in &plan.routes {
        node.add_route(*r).await.map_err(|source| RunError::Route {
            net: r.net,
            gateway: r.gateway,
            source,
        })?;
        tracing::info!(net = %r.net, gateway = %r.gateway, "route added");
    }
    Ok(())
}

/// Stops every NI; whether all stopped cleanly.
async fn stop_all(node: &Node) -> bool {
    node.stop_nis().await.unwrap_or(false)
}
