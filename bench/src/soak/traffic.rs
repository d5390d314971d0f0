//! The end nodes of the soak and their traffic: many [`Node`]s on each host thread, each
//! with one socklnd NI on a loopback address and a route to the other net through the
//! router, and one traffic driver per host that starts PUTs, GETs, pings and discoveries
//! from its nodes at a steady pace and tallies how each transaction ended.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actors::node::PingFailure;
use actors::{GetRequest, MdSpec, MsgEventKind, Node, NodeConfig, NodeHandler, PutRequest};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::route::RouteSpec;
use lnet::Nid;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::topo::{ip_of, net, node_err, MATCH_BITS, PORTAL};
use crate::BenchError;

/// The largest payload of a PUT or GET: LNet's MTU.
pub const MAX_SIZE: u32 = lnet::LNET_MTU;

/// Events a node keeps for a slow subscriber; nobody subscribes to an end node's bus
/// here, and the bus's ring is allocated whole, so it is kept small.
const EVENT_CAPACITY: usize = 16;

/// The NI tx credits of an end node (socklnd `credits`, the kernel's default).
const NI_CREDITS: u32 = 256;

/// PUTs an end node's MD holds for its consumer.
const MD_DEPTH: usize = 64;

/// 1 MiB of payload (a pattern of bytes): PUTs send slices of it and the MDs answer GETs
/// from it.
pub fn payload() -> Bytes {
    let n = usize::try_from(MAX_SIZE).unwrap_or(1 << 20);
    Bytes::from((0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

/// One end node: its handle, its NID and the router's NID on its net (its gateway).
#[derive(Debug, Clone)]
pub struct Peer {
    /// The node.
    pub node: Node,
    /// Its NID.
    pub nid: Nid,
    /// The router's NI on the same net.
    pub gateway: Nid,
    /// Whether it is on tcp1 (else tcp).
    pub far: bool,
}

/// Every end node's NID, by net.
#[derive(Debug, Clone)]
pub struct Plan {
    /// End nodes on tcp.
    pub tcp: Vec<Nid>,
    /// End nodes on tcp1.
    pub tcp1: Vec<Nid>,
}

impl Plan {
    /// The end nodes on the other net than `far`'s.
    fn other(&self, far: bool) -> &[Nid] {
        if far {
            &self.tcp
        } else {
            &self.tcp1
        }
    }

    /// The partner of `nid` on the other net (the same index, wrapped), for the first
    /// contact.
    pub fn partner(&self, nid: Nid, far: bool) -> Option<Nid> {
        let (own, other) = if far {
            (&self.tcp1, &self.tcp)
        } else {
            (&self.tcp, &self.tcp1)
        };
        let i = own.iter().position(|n| *n == nid)?;
        other.get(i % other.len().max(1)).copied()
    }
}

/// Starts an end node on the current arbiter: one socklnd NI `nid` listening on
/// `port`, a route to `far_net` through `gateway`, and an MD on [`PORTAL`] that takes
/// every PUT (counted in `tally`) and answers every GET from `data`.
pub async fn start_peer(
    nid: Nid,
    far: bool,
    gateway: Nid,
    port: u16,
    data: Bytes,
    tally: Arc<Tally>,
) -> Result<Peer, BenchError> {
    let node = Node::start(NodeConfig {
        event_capacity: EVENT_CAPACITY,
        ..NodeConfig::default()
    });
    let mut c = SockLndConfig::new(nid, crate::topo::incarnation());
    c.listen = Some(SocketAddr::new(IpAddr::V4(ip_of(nid)?), port));
    c.peer_port = port;
    node.add_ni::<SockLnd<NodeHandler>>(c, NI_CREDITS)
        .await
        .map_err(|e| node_err(format!("NI {nid}"), e))?;
    let far_net = if far { "tcp" } else { "tcp1" };
    node.add_route(RouteSpec {
        net: net(far_net)?,
        gateway,
        hops: Some(1),
        priority: 0,
    })
    .await
    .map_err(|e| node_err(format!("{nid}: route to {far_net} via {gateway}"), e))?;
    let mut rx = node
        .attach(MdSpec {
            portal: PORTAL,
            match_bits: MATCH_BITS,
            data: data.clone(),
            depth: MD_DEPTH,
        })
        .await
        .map_err(|e| node_err(format!("{nid}: MD"), e))?;
    actix::spawn(async move {
        while let Some(m) = rx.recv().await {
            // Every PUT carries the start of `data`.
            if data.get(..m.payload.len()) != Some(&m.payload[..]) {
                tally.corrupt.fetch_add(1, Ordering::Relaxed);
            }
            tally.delivered.fetch_add(1, Ordering::Relaxed);
            tally.delivered_bytes.fetch_add(
                u64::try_from(m.payload.len()).unwrap_or(0),
                Ordering::Relaxed,
            );
        }
    });
    Ok(Peer {
        node,
        nid,
        gateway,
        far,
    })
}

/// What a soak transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A PUT with an ACK to an end node on the other net.
    Put,
    /// A GET (answered with a REPLY) from an end node on the other net.
    Get,
    /// An LNet ping of the router's NI on the node's own net.
    PingRouter,
    /// An LNet ping of an end node on the other net (through the router).
    PingPeer,
    /// Discovery (ping, then push) of the router's NI or of an end node on the other net.
    Discover,
}

impl Kind {
    /// Every kind, in the order of the tallies.
    pub const ALL: [Kind; 5] = [
        Kind::Put,
        Kind::Get,
        Kind::PingRouter,
        Kind::PingPeer,
        Kind::Discover,
    ];

    fn index(self) -> usize {
        match self {
            Kind::Put => 0,
            Kind::Get => 1,
            Kind::PingRouter => 2,
            Kind::PingPeer => 3,
            Kind::Discover => 4,
        }
    }

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Put => "put",
            Kind::Get => "get",
            Kind::PingRouter => "ping_router",
            Kind::PingPeer => "ping_peer",
            Kind::Discover => "discover",
        }
    }

    /// How many LNet transaction timeouts the operation may take: discovery is a ping
    /// then a push, each with its own.
    fn timeouts(self) -> u32 {
        match self {
            Kind::Discover => 2,
            _ => 1,
        }
    }
}

/// How one transaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// With its response (ACK, REPLY; for discovery the push's ACK too).
    Response,
    /// With a failure event (its status and reason, as debug text).
    Failure(String),
    /// The node refused to start it.
    Refused,
    /// Its response was not what was asked (a REPLY of other bytes, a bad ping info).
    Mismatch,
    /// Its events stopped without a last one.
    Lost,
}

/// Counts of one kind of transaction (atomics, shared by the drivers and the sampler).
#[derive(Debug, Default)]
struct KindTally {
    started: AtomicU64,
    response: AtomicU64,
    failure: AtomicU64,
    max_us: AtomicU64,
}

/// What the drivers counted, shared with the sampler.
#[derive(Debug, Default)]
pub struct Tally {
    kinds: [KindTally; 5],
    refused: AtomicU64,
    mismatch: AtomicU64,
    lost: AtomicU64,
    hung: AtomicU64,
    /// Ticks at which no transaction was started because the window was full.
    deferred: AtomicU64,
    /// Failure events by kind, status and reason (at most 64 distinct).
    reasons: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// PUTs the end nodes' MDs received.
    pub delivered: AtomicU64,
    /// PUTs received whose payload was not the bytes sent.
    pub corrupt: AtomicU64,
    /// Their payload bytes.
    pub delivered_bytes: AtomicU64,
    put_bytes: AtomicU64,
    get_bytes: AtomicU64,
}

/// One kind's counts in the report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct KindCounts {
    /// Started (handed to the node; refused ones included).
    pub started: u64,
    /// Ended with their response.
    pub response: u64,
    /// Ended with a failure event.
    pub failure: u64,
    /// The longest time one took to end, seconds (printed, not asserted).
    pub max_s: f64,
}

/// A snapshot of the tallies.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Transactions started.
    pub started: u64,
    /// Ended with their response.
    pub response: u64,
    /// Ended with a failure event.
    pub failure: u64,
    /// Refused by the node before they started.
    pub refused: u64,
    /// Ended with a response that was not what was asked.
    pub mismatch: u64,
    /// Whose events stopped without a last one.
    pub lost: u64,
    /// Not ended within their timeout and the grace (hung).
    pub hung: u64,
    /// Started and not ended yet (nor counted hung).
    pub open: u64,
    /// Per kind.
    pub put: KindCounts,
    /// Per kind.
    pub get: KindCounts,
    /// Per kind.
    pub ping_router: KindCounts,
    /// Per kind.
    pub ping_peer: KindCounts,
    /// Per kind.
    pub discover: KindCounts,
    /// Payload bytes of the PUTs ACKed.
    pub put_bytes: u64,
    /// Payload bytes of the REPLYs received.
    pub get_bytes: u64,
    /// PUTs the end nodes' MDs received.
    pub delivered: u64,
    /// PUTs received whose payload was not the bytes sent.
    pub corrupt: u64,
    /// Ticks at which the window was full and nothing was started.
    pub deferred: u64,
    /// Failure events by kind, status and reason.
    pub failure_reasons: std::collections::BTreeMap<String, u64>,
}

impl Tally {
    fn kind(&self, k: Kind) -> Option<&KindTally> {
        self.kinds.get(k.index())
    }

    fn started(&self, k: Kind) {
        if let Some(t) = self.kind(k) {
            t.started.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn ended(&self, k: Kind, end: End, took: Duration, bytes: u64) {
        let Some(t) = self.kind(k) else {
            return;
        };
        t.max_us.fetch_max(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let c = match end {
            End::Response => {
                match k {
                    Kind::Put => self.put_bytes.fetch_add(bytes, Ordering::Relaxed),
                    Kind::Get => self.get_bytes.fetch_add(bytes, Ordering::Relaxed),
                    _ => 0,
                };
                &t.response
            }
            End::Failure(why) => {
                let mut r = self
                    .reasons
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let key = format!("{}: {why}", k.name());
                if r.len() < 64 || r.contains_key(&key) {
                    let n = r.entry(key).or_default();
                    *n = n.saturating_add(1);
                }
                &t.failure
            }
            End::Refused => &self.refused,
            End::Mismatch => &self.mismatch,
            End::Lost => &self.lost,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> Counts {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let kind = |k: Kind| {
            self.kind(k)
                .map_or_else(KindCounts::default, |t| KindCounts {
                started: get(&t.started),
                response: get(&t.response),
                failure: get(&t.failure),
                #[allow(clippy::cast_precision_loss)] // microseconds: far below 2^52
                max_s: get(&t.max_us) as f64 / 1e6,
            })
        };
        let per: Vec<KindCounts> = Kind::ALL.iter().map(|k| kind(*k)).collect();
        let sum = |f: fn(&KindCounts) -> u64| per.iter().map(f).fold(0u64, u64::saturating_add);
        let started = sum(|k| k.started);
        let response = sum(|k| k.response);
        let failure = sum(|k| k.failure);
        let refused = get(&self.refused);
        let mismatch = get(&self.mismatch);
        let lost = get(&self.lost);
        let hung = get(&self.hung);
        let ended = [response, failure, refused, mismatch, lost, hung]
            .iter()
            .fold(0u64, |a, b| a.saturating_add(*b));
        Counts {
            started,
            response,
            failure,
            refused,
            mismatch,
            lost,
            hung,
            open: started.saturating_sub(ended),
            put: kind(Kind::Put),
            get: kind(Kind::Get),
            ping_router: kind(Kind::PingRouter),
            ping_peer: kind(Kind::PingPeer),
            discover: kind(Kind::Discover),
            put_bytes: get(&self.put_bytes),
            get_bytes: get(&self.get_bytes),
            delivered: get(&self.delivered),
            corrupt: get(&self.corrupt),
            deferred: get(&self.deferred),
            failure_reasons: self
                .reasons
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        }
    }
}

impl Counts {
    /// Transactions that ended otherwise than with their response or a failure event,
    /// the failures, and PUTs delivered with other bytes than sent: what the soak counts
    /// as errors.
    pub fn errors(&self) -> u64 {
        [
            self.failure,
            self.refused,
            self.mismatch,
            self.lost,
            self.hung,
            self.corrupt,
        ]
        .iter()
        .fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// A small deterministic generator (splitmix64): the same seed gives the same mix.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// From a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// An index into a slice of `len`.
    fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(u64::try_from(len).unwrap_or(0))).unwrap_or(0)
    }
}

/// A payload size: 0 B one time in ten, 1 MiB one time in twenty, else log-uniform
/// between 1 B and 1 MiB (half of them below 1 KiB, a tenth above 256 KiB).
pub fn size(rng: &mut Rng) -> u32 {
    match rng.below(100) {
        0..=9 => 0,
        10..=14 => MAX_SIZE,
        _ => {
            // 2^(20 x) for x uniform in [0, 1).
            #[allow(clippy::cast_precision_loss)] // 53 bits of a u64 are plenty
            let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let s = (20.0 * x).exp2();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let s = s as u32;
            s.clamp(1, MAX_SIZE)
        }
    }
}

/// The mix: PUT 40 %, GET 40 %, ping of the router 6 %, ping of a peer 6 %, discovery
/// 8 %.
pub fn kind(rng: &mut Rng) -> Kind {
    match rng.below(100) {
        0..=39 => Kind::Put,
        40..=79 => Kind::Get,
        80..=85 => Kind::PingRouter,
        86..=91 => Kind::PingPeer,
        _ => Kind::Discover,
    }
}

/// A kind of the mix among `only` (all when empty), in the mix's proportions among
/// them.
pub fn kind_among(rng: &mut Rng, only: &[Kind]) -> Kind {
    let mut k = kind(rng);
    // A kind outside `only` is drawn again; 64 draws miss every kind of `only` with a
    // chance below 0.94^64 (2 %) for the rarest single kind, then its first is taken.
    for _ in 0..64 {
        if only.is_empty() || only.contains(&k) {
            return k;
        }
        k = kind(rng);
    }
    only.first().copied().unwrap_or(k)
}

async fn one(node: Node, kind: Kind, dest: Nid, data: Bytes, timeout: Duration, seq: u64) -> End {
    let size = u32::try_from(data.len()).unwrap_or(MAX_SIZE);
    match kind {
        Kind::Put => {
            let req = PutRequest {
                dest,
                portal: PORTAL,
                match_bits: MATCH_BITS,
                hdr_data: seq,
                payload: data,
                ack: true,
                timeout,
            };
            let Ok(txn) = node.put(req).await else {
                return End::Refused;
            };
            let events = txn.finish().await;
            match events.last() {
                None => End::Lost,
                Some(e) if !e.status.is_ok() => End::Failure(format!("{:?}", e.status)),
                Some(e) if e.kind == MsgEventKind::Ack => End::Response,
                Some(_) => End::Lost,
            }
        }
        Kind::Get => {
            let req = GetRequest {
                dest,
                portal: PORTAL,
                match_bits: MATCH_BITS,
                sink_length: size,
                timeout,
            };
            let Ok(txn) = node.get(req).await else {
                return End::Refused;
            };
            let events = txn.finish().await;
            match events.last() {
                None => End::Lost,
                Some(e) if !e.status.is_ok() => End::Failure(format!("{:?}", e.status)),
                Some(e) if e.kind == MsgEventKind::Reply => {
                    // The MD answers with the start of the same bytes.
                    if e.payload.as_ref() == Some(&data) {
                        End::Response
                    } else {
                        End::Mismatch
                    }
                }
                Some(_) => End::Lost,
            }
        }
        Kind::PingRouter | Kind::PingPeer => match node.ping(dest, timeout).await {
            Ok(_) => End::Response,
            Err(e) => ping_failure(&e),
        },
        Kind::Discover => match node.discover(dest, timeout).await {
            // A Multi-Rail peer is pushed to; its ACK is the response.
            Ok(d) if d.multi_rail && !d.pushed => End::Failure("push not ACKed".to_owned()),
            Ok(_) => End::Response,
            Err(e) => ping_failure(&e),
        },
    }
}

fn ping_failure(e: &PingFailure) -> End {
    match e {
        PingFailure::Failed(o) => End::Failure(format!("{o:?}")),
        PingFailure::BadInfo(_) => End::Mismatch,
        _ => End::Refused,
    }
}

/// How a driver runs.
#[derive(Debug, Clone)]
pub struct DriveSpec {
    /// Time between two transactions this driver starts.
    pub interval: Duration,
    /// Most transactions of this driver in flight.
    pub window: usize,
    /// The LNet transaction timeout of each.
    pub timeout: Duration,
    /// How long past its timeout(s) a transaction may take to end before it counts as
    /// hung.
    pub grace: Duration,
    /// The seed of this driver's mix.
    pub seed: u64,
    /// Most transactions this driver starts (a bound; the stop signal ends it first).
    pub max: u64,
    /// 1 MiB of payload that PUTs take slices of.
    pub data: Bytes,
    /// The kinds of transaction started (all when empty).
    pub only: Vec<Kind>,
}

/// How a driver finished.
#[derive(Debug, Clone, Copy, Default)]
pub struct DriveEnd {
    /// Transactions still open when the drain bound ran out (abandoned).
    pub open: u64,
}

/// Starts transactions from `peers` to the end nodes of `plan` on the other net (or the
/// router) every `spec.interval` until `stop` (or `spec.max` of them), then waits for the
/// open ones (at most the longest timeout and the grace, plus 5 s). Runs on the peers'
/// host.
pub async fn drive(
    peers: Vec<Peer>,
    plan: Arc<Plan>,
    spec: DriveSpec,
    tally: Arc<Tally>,
    stop: watch::Receiver<bool>,
) -> DriveEnd {
    let mut rng = Rng::new(spec.seed);
    let mut running: JoinSet<()> = JoinSet::new();
    let mut tick = tokio::time::interval(spec.interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut started = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if *stop.borrow() || started >= spec.max {
                    break;
                }
                if running.len() >= spec.window {
                    tally.deferred.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let Some(src) = peers.get(rng.index(peers.len())) else {
                    break;
                };
                let k = kind_among(&mut rng, &spec.only);
                let others = plan.other(src.far);
                let remote = others.get(rng.index(others.len())).copied();
                let dest = match k {
                    Kind::PingRouter => Some(src.gateway),
                    Kind::Discover if rng.below(4) == 0 => Some(src.gateway),
                    _ => remote,
                };
                let Some(dest) = dest else {
                    break;
                };
                let data = match k {
                    Kind::Put | Kind::Get => {
                        let n = usize::try_from(size(&mut rng)).unwrap_or(0);
                        spec.data.slice(0..n.min(spec.data.len()))
                    }
                    _ => Bytes::new(),
                };
                let bytes = u64::try_from(data.len()).unwrap_or(0);
                let bound = spec.timeout * k.timeouts() + spec.grace;
                let node = src.node.clone();
                let t = Arc::clone(&tally);
                let timeout = spec.timeout;
                tally.started(k);
                running.spawn_local(async move {
                    let t0 = Instant::now();
                    match tokio::time::timeout(bound, one(node, k, dest, data, timeout, started)).await {
                        Ok(end) => t.ended(k, end, t0.elapsed(), bytes),
                        Err(_) => {
                            t.hung.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(kind = k.name(), %dest, "transaction hung past its timeout");
                        }
                    }
                });
                started = started.saturating_add(1);
            }
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    let drain = spec.timeout * 2 + spec.grace + Duration::from_secs(5);
    let _ = tokio::time::timeout(drain, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    let open = u64::try_from(running.len()).unwrap_or(u64::MAX);
    running.abort_all();
    DriveEnd { open }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_span_zero_to_the_mtu() {
        let mut rng = Rng::new(7);
        let sizes: Vec<u32> = (0..10_000).map(|_| size(&mut rng)).collect();
        assert!(sizes.contains(&0));
        assert!(sizes.contains(&MAX_SIZE));
        assert!(sizes.iter().all(|s| *s <= MAX_SIZE));
        assert!(sizes.iter().any(|s| (1..1024).contains(s)));
        assert!(sizes.iter().any(|s| (64 * 1024..MAX_SIZE).contains(s)));
    }

    #[test]
    fn the_mix_has_every_kind_and_a_seed_repeats_it() {
        let mut a = Rng::new(3);
        let mut b = Rng::new(3);
        let ka: Vec<Kind> = (0..1000).map(|_| kind(&mut a)).collect();
        let kb: Vec<Kind> = (0..1000).map(|_| kind(&mut b)).collect();
        assert_eq!(ka, kb);
        for k in Kind::ALL {
            assert!(ka.contains(&k), "{k:?} missing");
        }
    }

    #[test]
    fn a_subset_of_kinds_keeps_to_it() {
        let mut rng = Rng::new(5);
        let only = [Kind::Get, Kind::PingPeer];
        let ks: Vec<Kind> = (0..1000).map(|_| kind_among(&mut rng, &only)).collect();
        assert!(ks.iter().all(|k| only.contains(k)));
        assert!(ks.contains(&Kind::Get) && ks.contains(&Kind::PingPeer));
        assert_eq!(kind_among(&mut rng, &[Kind::Discover]), Kind::Discover);
    }

    #[test]
    fn counts_add_up() {
        let t = Tally::default();
        for _ in 0..5 {
            t.started(Kind::Put);
        }
        t.ended(Kind::Put, End::Response, Duration::from_millis(3), 10);
        t.ended(
            Kind::Put,
            End::Failure("x".to_owned()),
            Duration::from_millis(1),
            10,
        );
        t.ended(Kind::Put, End::Refused, Duration::ZERO, 10);
        t.hung.fetch_add(1, Ordering::Relaxed);
        let c = t.snapshot();
        assert_eq!(
            (c.started, c.response, c.failure, c.refused, c.hung),
            (5, 1, 1, 1, 1)
        );
        assert_eq!(c.open, 1);
        assert_eq!(c.errors(), 3);
        assert_eq!(c.put_bytes, 10);
        assert!((c.put.max_s - 0.003).abs() < 1e-9);
    }
}
