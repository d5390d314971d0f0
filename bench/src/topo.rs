//! Building benchmark topologies in one process: hosts (one thread each), end nodes and
//! router nodes with socklnd NIs on loopback addresses, routes, and a sink MD that counts
//! what arrives.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix::Arbiter;
use actors::{MdSpec, Node, NodeConfig, NodeError, NodeHandler};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::route::{RouteSpec, RouterCheck};
use lnet::time::Millis;
use lnet::tunables::{TunableName, Tunables};
use lnet::{Net, Nid};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::BenchError;

/// The portal of the benchmark's MDs.
pub const PORTAL: u32 = 31;
/// The match bits of the benchmark's MDs.
pub const MATCH_BITS: u64 = 0xbe_4c;

/// A thread with its own single-threaded runtime (an actix arbiter): the nodes and
/// relays started on it run there, whoever calls them.
#[derive(Debug)]
pub struct Host {
    name: &'static str,
    arbiter: Arbiter,
}

impl Host {
    /// Starts the thread.
    pub fn new(name: &'static str) -> Host {
        Host {
            name,
            arbiter: Arbiter::new(),
        }
    }

    /// Runs `f`'s future on this host and returns its output.
    pub async fn run<F, Fut, T>(&self, f: F) -> Result<T, BenchError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let sent = self.arbiter.spawn_fn(move || {
            actix::spawn(async move {
                let _ = tx.send(f().await);
            });
        });
        if !sent {
            return Err(BenchError::Setup(format!("host {} is stopped", self.name)));
        }
        rx.await
            .map_err(|_| BenchError::Setup(format!("host {} dropped a task", self.name)))
    }
}

/// Credits and timers shared by every node of a benchmark, so that the configurations
/// compared differ only in what sits between the end nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeParams {
    /// Tx credits of each NI (socklnd `credits` and the LNet NI credits).
    pub ni_credits: u32,
    /// Per-peer tx credits (socklnd `peer_credits` and the LNet peer NI credits; a
    /// router's router-buffer credits per peer too).
    pub peer_credits: u32,
    /// socklnd `conns_per_peer` (BULK_IN and BULK_OUT connections of each per peer).
    pub conns_per_peer: u32,
    /// `alive_router_check_interval` of nodes that use routes.
    pub router_check_interval: Duration,
    /// `router_ping_timeout`.
    pub router_ping_timeout: Duration,
}

impl Default for NodeParams {
    fn default() -> NodeParams {
        NodeParams {
            ni_credits: 256,
            peer_credits: 8,
            conns_per_peer: 1,
            router_check_interval: Duration::from_secs(60),
            router_ping_timeout: Duration::from_secs(50),
        }
    }
}

/// One socklnd NI of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NiSpec {
    /// Its NID (a tcp net, a loopback address).
    pub nid: Nid,
    /// The port its acceptor listens on (on the NID's address).
    pub listen_port: u16,
    /// The port it dials on peers.
    pub peer_port: u16,
}

impl NiSpec {
    /// An NI that listens on and dials `port`.
    pub fn new(nid: Nid, port: u16) -> NiSpec {
        NiSpec {
            nid,
            listen_port: port,
            peer_port: port,
        }
    }
}

/// The IPv4 address of a NID.
pub fn ip_of(nid: Nid) -> Result<Ipv4Addr, BenchError> {
    nid.addr_u32()
        .map(Ipv4Addr::from)
        .ok_or_else(|| BenchError::Setup(format!("{nid} has no IPv4 address")))
}

/// Parses a NID.
pub fn nid(s: &str) -> Result<Nid, BenchError> {
    s.parse()
        .map_err(|e| BenchError::Setup(format!("bad NID {s}: {e}")))
}

/// Parses a net name.
pub fn net(s: &str) -> Result<Net, BenchError> {
    s.parse()
        .map_err(|e| BenchError::Setup(format!("bad net {s}: {e}")))
}

/// `a.b.c.d@net` from an address and a net name.
pub fn nid_at(ip: Ipv4Addr, net_name: &str) -> Result<Nid, BenchError> {
    nid(&format!("{ip}@{net_name}"))
}

static INCARNATION: AtomicU64 = AtomicU64::new(1);

/// An incarnation for a new NI: this process's id and a counter.
pub fn incarnation() -> u64 {
    (u64::from(std::process::id()) << 32) | INCARNATION.fetch_add(1, Ordering::Relaxed)
}

/// Starts a node on `host` with one socklnd NI per `nis`; with `routing` it forwards.
pub async fn start_node(
    host: &Host,
    nis: Vec<NiSpec>,
    routing: bool,
    params: NodeParams,
) -> Result<Node, BenchError> {
    host.run(move || async move { start_here(nis, routing, params).await })
        .await?
}

fn millis(d: Duration) -> Millis {
    Millis::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

async fn start_here(
    nis: Vec<NiSpec>,
    routing: bool,
    params: NodeParams,
) -> Result<Node, BenchError> {
    let mut tunables = Tunables::default();
    if routing {
        tunables
            .set(TunableName::Routing, 1)
            .map_err(|e| BenchError::Setup(format!("routing: {e}")))?;
    }
    let node = Node::start(NodeConfig {
        tunables,
        peer_credits: params.peer_credits,
        router_check: RouterCheck {
            interval: millis(params.router_check_interval),
            ping_timeout: millis(params.router_ping_timeout),
            ..RouterCheck::default()
        },
        ..NodeConfig::default()
    });
    for ni in nis {
        let mut c = SockLndConfig::new(ni.nid, incarnation());
        c.listen = Some(SocketAddr::new(IpAddr::V4(ip_of(ni.nid)?), ni.listen_port));
        c.peer_port = ni.peer_port;
        c.credits = params.ni_credits;
        c.peer_credits = params.peer_credits;
        c.conns_per_peer = params.conns_per_peer;
        let added = node
            .add_ni::<SockLnd<NodeHandler>>(c, params.ni_credits)
            .await;
        added.map_err(|e| BenchError::Node {
            what: format!("NI {}", ni.nid),
            source: e,
        })?;
    }
    Ok(node)
}

/// A single-hop route to `net` through `gateway` with `priority` (lower is better).
pub async fn add_route(
    node: &Node,
    net_name: &str,
    gateway: Nid,
    priority: u32,
) -> Result<(), BenchError> {
    node.add_route(RouteSpec {
        net: net(net_name)?,
        gateway,
        hops: Some(1),
        priority,
    })
    .await
    .map_err(|e| node_err(format!("route to {net_name} via {gateway}"), e))
}

/// A [`BenchError::Node`] for `what`.
pub fn node_err(what: String, source: NodeError) -> BenchError {
    BenchError::Node { what, source }
}

/// One PUT as a sink saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The PUT's `hdr_data`.
    pub hdr_data: u64,
    /// The peer that handed it over on the last hop (a router's NID when routed).
    pub from: Nid,
    /// When it came out of the MD.
    pub at: Instant,
}

/// What a sink counted.
#[derive(Debug, Default)]
struct SinkState {
    seen: HashMap<u64, u32>,
    delivered: u64,
    duplicates: u64,
    bytes: u64,
    log: Option<Vec<Arrival>>,
}

/// An MD on a target node that takes every PUT (and answers GETs with `data`), counting
/// deliveries, bytes and duplicate `hdr_data` values.
#[derive(Debug, Clone)]
pub struct Sink {
    state: Arc<Mutex<SinkState>>,
}

/// How often a sink has seen each thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SinkCounts {
    /// PUTs delivered.
    pub delivered: u64,
    /// PUTs whose `hdr_data` had been delivered before.
    pub duplicates: u64,
    /// Payload bytes delivered.
    pub bytes: u64,
}

impl Sink {
    /// Attaches the MD (portal [`PORTAL`], match bits [`MATCH_BITS`]) to `node`; with
    /// `log` every arrival is kept for [`Sink::arrivals`]. Duplicates are counted only
    /// with `track_duplicates` (it keeps every `hdr_data` seen).
    pub async fn attach(
        host: &Host,
        node: &Node,
        data: Bytes,
        log: bool,
        track_duplicates: bool,
    ) -> Result<Sink, BenchError> {
        let mut rx = node
            .attach(MdSpec {
                portal: PORTAL,
                match_bits: MATCH_BITS,
                data,
                depth: 4096,
            })
            .await
            .map_err(|e| node_err("MD".to_owned(), e))?;
        let state = Arc::new(Mutex::new(SinkState {
            log: log.then(Vec::new),
            ..SinkState::default()
        }));
        let s = state.clone();
        host.run(move || async move {
            actix::spawn(async move {
                while let Some(m) = rx.recv().await {
                    let at = Instant::now();
                    let mut st = s.lock().unwrap_or_else(PoisonError::into_inner);
                    st.delivered = st.delivered.saturating_add(1);
                    st.bytes = st
                        .bytes
                        .saturating_add(u64::try_from(m.payload.len()).unwrap_or(u64::MAX));
                    let hdr_data = match m.header.msg {
                        lnet::Message::Put { hdr_data, .. } => hdr_data,
                        _ => 0,
                    };
                    if track_duplicates {
                        let n = st.seen.entry(hdr_data).or_default();
                        *n = n.saturating_add(1);
                        if *n > 1 {
                            st.duplicates = st.duplicates.saturating_add(1);
                        }
                    }
                    if let Some(log) = st.log.as_mut() {
                        log.push(Arrival {
                            hdr_data,
                            from: m.from.nid,
                            at,
                        });
                    }
                }
            });
        })
        .await?;
        Ok(Sink { state })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counts so far.
    pub fn counts(&self) -> SinkCounts {
        let s = self.lock();
        SinkCounts {
            delivered: s.delivered,
            duplicates: s.duplicates,
            bytes: s.bytes,
        }
    }

    /// The arrivals logged so far (with `log`).
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.lock().log.clone().unwrap_or_default()
    }
}
