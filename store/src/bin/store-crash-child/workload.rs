//! The stream of configuration changes of the crash test: deterministic from a seed,
//! mixed (peers and peer NIs, routes, nets and local NIs, tunables, UDSP rules, event
//! appends, whole-document imports), and valid in order (every delete names something
//! that exists at that point), so applying change `n` to the state after change `n - 1`
//! always succeeds. Shared by the child binary and the test that kills it.

use std::collections::{BTreeMap, BTreeSet};

use lnet::config::{
    Buffers, Config, Global, LocalNi, NetConfig, NiTunables, Peer, PeerNi, Route, Routing,
    RoutingState, UdspRule,
};
use lnet::health::HealthStatus;
use lnet::nid::LndType;
use lnet::tunables::TunableName;
use lnet::{Net, Nid};
use store::{Event, Store, StoreError, StoreOptions};

/// Events the crash test's store keeps (small, so that appends also drop old events).
pub(crate) const EVENT_CAPACITY: u64 = 40;

/// The options the child and the reference store both open with.
pub(crate) fn options() -> StoreOptions {
    StoreOptions {
        event_capacity: EVENT_CAPACITY,
    }
}

/// One change.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// Add or replace a peer.
    PutPeer(Peer),
    /// Delete a peer.
    DeletePeer(Nid),
    /// Add a peer NI to a peer.
    AddPeerNi(Nid, Nid),
    /// Delete a peer NI of a peer.
    DeletePeerNi(Nid, Nid),
    /// Add a route.
    AddRoute(Route),
    /// Delete a route.
    DeleteRoute(Net, Nid),
    /// Set a tunable.
    SetTunable(TunableName, u32),
    /// Forget a tunable.
    UnsetTunable(TunableName),
    /// Add or replace a net.
    PutNet(NetConfig),
    /// Add a local NI.
    AddLocalNi(Net, LocalNi),
    /// Delete a net.
    DeleteNet(Net),
    /// Insert a UDSP rule.
    AddUdsp(UdspRule),
    /// Delete a UDSP rule.
    DeleteUdsp(u32),
    /// Append events.
    AppendEvents(Vec<(u64, Event)>),
    /// Replace the whole configuration.
    Import(Config),
}

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `num / den`.
    pub(crate) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// What exists, so that deletes name existing items.
#[derive(Debug, Default)]
struct Model {
    nets: BTreeSet<Net>,
    peers: BTreeMap<Nid, Vec<Nid>>,
    routes: BTreeSet<(Net, Nid)>,
    udsp: u32,
    clock_ms: u64,
    next_interface: u64,
}

fn pick<T: Clone>(rng: &mut Rng, items: impl IntoIterator<Item = T>) -> Option<T> {
    let v: Vec<T> = items.into_iter().collect();
    let n = u64::try_from(v.len()).ok()?;
    if n == 0 {
        return None;
    }
    let i = usize::try_from(rng.below(n)).ok()?;
    v.get(i).cloned()
}

fn tcp(num: u16) -> Net {
    Net::new(LndType::SOCKLND, num)
}

fn o2ib(num: u16) -> Net {
    Net::new(LndType::O2IBLND, num)
}

fn random_net(rng: &mut Rng) -> Net {
    let num = u16::try_from(rng.below(3)).unwrap_or(0);
    if rng.chance(1, 2) {
        tcp(num)
    } else {
        o2ib(num)
    }
}

fn random_nid(rng: &mut Rng) -> Nid {
    let net = random_net(rng);
    let host = u32::try_from(rng.below(60)).unwrap_or(0) + 1;
    Nid::new(net, 0x0A00_0000 | (net.to_u32() & 0xFF) << 8 | host)
}

fn random_route_net(rng: &mut Rng) -> Net {
    let num = 10 + u16::try_from(rng.below(6)).unwrap_or(0);
    if rng.chance(1, 2) {
        tcp(num)
    } else {
        o2ib(num)
    }
}

fn random_peer(rng: &mut Rng, primary: Nid) -> Peer {
    let mut nids = vec![primary];
    for _ in 0..rng.below(3) {
        let n = random_nid(rng);
        if !nids.contains(&n) {
            nids.push(n);
        }
    }
    Peer {
        primary_nid: primary,
        multi_rail: rng.chance(1, 2),
        peer_state: None,
        peer_nis: nids.into_iter().map(PeerNi::new).collect(),
    }
}

fn random_route(rng: &mut Rng, net: Net, gateway: Nid) -> Route {
    Route {
        net,
        gateway,
        hop: rng
            .chance(1, 2)
            .then(|| 1 + i64::try_from(rng.below(4)).unwrap_or(0)),
        priority: rng
            .chance(1, 2)
            .then(|| u32::try_from(rng.below(10)).unwrap_or(0)),
        health_sensitivity: None,
        state: None,
        route_type: None,
    }
}

fn random_ni(rng: &mut Rng, net: Net, n: u64) -> LocalNi {
    LocalNi {
        nid: rng
            .chance(1, 2)
            .then(|| Nid::new(net, 0xC0A8_0000 | u32::try_from(n).unwrap_or(0))),
        interfaces: vec![format!("eth{n}")],
        tunables: rng.chance(1, 2).then(|| NiTunables {
            peer_timeout: 180,
            peer_credits: 8 + i32::try_from(rng.below(8)).unwrap_or(0),
            peer_buffer_credits: 0,
            credits: 256,
        }),
        cpt: rng
            .chance(1, 3)
            .then(|| lnet::config::Cpts(vec![0, u32::try_from(rng.below(4)).unwrap_or(0)])),
        ..LocalNi::default()
    }
}

fn random_net_config(rng: &mut Rng, net: Net) -> NetConfig {
    let count = 1 + rng.below(2);
    NetConfig {
        net_type: net,
        local_nis: (0..count).map(|i| random_ni(rng, net, i)).collect(),
    }
}

fn random_udsp(rng: &mut Rng, len: u32) -> UdspRule {
    UdspRule {
        idx: rng
            .chance(1, 2)
            .then(|| u32::try_from(rng.below(u64::from(len) + 1)).unwrap_or(0)),
        src: Some(format!("tcp{}", rng.below(3))),
        dst: rng.chance(1, 2).then(|| "o2ib1".to_owned()),
        rte: None,
        priority: Some(u32::try_from(rng.below(5)).unwrap_or(0)),
    }
}

const TUNABLES: [TunableName; 6] = [
    TunableName::RetryCount,
    TunableName::TransactionTimeout,
    TunableName::HealthSensitivity,
    TunableName::NumaRange,
    TunableName::TinyBuffers,
    TunableName::Routing,
];

fn random_event(rng: &mut Rng) -> Event {
    let nid = random_nid(rng);
    match rng.below(3) {
        0 => Event::NiHealth {
            nid,
            before: 1000,
            after: 900,
            cause: Some(HealthStatus::LocalDropped),
        },
        1 => Event::PeerNiHealth {
            nid,
            before: 900,
            after: 1000,
            cause: None,
        },
        _ => Event::RouteState {
            net: random_route_net(rng),
            gateway: nid,
            up: rng.chance(1, 2),
            reason: None,
        },
    }
}

fn random_config(rng: &mut Rng, model: &mut Model) -> Config {
    *model = Model {
        clock_ms: model.clock_ms,
        next_interface: model.next_interface,
        ..Model::default()
    };
    let mut config = Config::default();
    for _ in 0..1 + rng.below(3) {
        let net = random_net(rng);
        if model.nets.insert(net) {
            config.nets.push(random_net_config(rng, net));
        }
    }
    for _ in 0..rng.below(30) {
        let primary = random_nid(rng);
        if let std::collections::btree_map::Entry::Vacant(e) = model.peers.entry(primary) {
            let peer = random_peer(rng, primary);
            e.insert(peer.peer_nis.iter().map(|p| p.nid).collect());
            config.peers.push(peer);
        }
    }
    for _ in 0..rng.below(12) {
        let (net, gw) = (random_route_net(rng), random_nid(rng));
        if model.routes.insert((net, gw)) {
            config.routes.push(random_route(rng, net, gw));
        }
    }
    if rng.chance(2, 3) {
        config.global = Some(Global {
            retry_count: Some(u32::try_from(rng.below(4)).unwrap_or(0)),
            transaction_timeout: Some(50),
            health_sensitivity: Some(100),
            ..Global::default()
        });
    }
    if rng.chance(1, 3) {
        config.buffers = Some(Buffers {
            tiny: Some(512),
            small: None,
            large: Some(64),
        });
    }
    if rng.chance(1, 2) {
        config.routing = Some(Routing {
            enable: RoutingState::Enabled,
            cpts: Vec::new(),
        });
    }
    for _ in 0..rng.below(4) {
        let rule = UdspRule {
            idx: None,
            ..random_udsp(rng, 0)
        };
        config.udsp.push(rule);
        model.udsp += 1;
    }
    config
}

fn next_change(rng: &mut Rng, model: &mut Model) -> Change {
    loop {
        match rng.below(100) {
            0..=17 => {
                let primary = random_nid(rng);
                let peer = random_peer(rng, primary);
                model
                    .peers
                    .insert(primary, peer.peer_nis.iter().map(|p| p.nid).collect());
                return Change::PutPeer(peer);
            }
            18..=27 => {
                if let Some(p) = pick(rng, model.peers.keys().copied()) {
                    model.peers.remove(&p);
                    return Change::DeletePeer(p);
                }
            }
            28..=33 => {
                if let Some(p) = pick(rng, model.peers.keys().copied()) {
                    let nid = random_nid(rng);
                    let nis = model.peers.entry(p).or_default();
                    if !nis.contains(&nid) {
                        nis.push(nid);
                        return Change::AddPeerNi(p, nid);
                    }
                }
            }
            34..=38 => {
                if let Some(p) = pick(rng, model.peers.keys().copied()) {
                    let nis = model.peers.entry(p).or_default();
                    if let Some(nid) = pick(rng, nis.iter().copied()) {
                        nis.retain(|n| *n != nid);
                        return Change::DeletePeerNi(p, nid);
                    }
                }
            }
            39..=52 => {
                let (net, gw) = (random_route_net(rng), random_nid(rng));
                if model.routes.insert((net, gw)) {
                    return Change::AddRoute(random_route(rng, net, gw));
                }
            }
            53..=60 => {
                if let Some((net, gw)) = pick(rng, model.routes.iter().copied()) {
                    model.routes.remove(&(net, gw));
                    return Change::DeleteRoute(net, gw);
                }
            }
            61..=68 => {
                let name = pick(rng, TUNABLES).unwrap_or(TunableName::NumaRange);
                let value = if name == TunableName::Routing {
                    u32::try_from(rng.below(4)).unwrap_or(0)
                } else {
                    u32::try_from(rng.below(200)).unwrap_or(0)
                };
                return Change::SetTunable(name, value);
            }
            69..=71 => {
                let name = pick(rng, TUNABLES).unwrap_or(TunableName::NumaRange);
                return Change::UnsetTunable(name);
            }
            72..=75 => {
                let net = random_net(rng);
                model.nets.insert(net);
                return Change::PutNet(random_net_config(rng, net));
            }
            76..=77 => {
                if let Some(net) = pick(rng, model.nets.iter().copied()) {
                    // A fresh interface name, so that the NI is never there already.
                    model.next_interface += 1;
                    let mut ni = random_ni(rng, net, 100 + model.next_interface);
                    ni.nid = None;
                    return Change::AddLocalNi(net, ni);
                }
            }
            78..=80 => {
                if let Some(net) = pick(rng, model.nets.iter().copied()) {
                    model.nets.remove(&net);
                    return Change::DeleteNet(net);
                }
            }
            81..=85 => {
                let rule = random_udsp(rng, model.udsp);
                model.udsp += 1;
                return Change::AddUdsp(rule);
            }
            86..=88 => {
                if model.udsp > 0 {
                    let idx = u32::try_from(rng.below(u64::from(model.udsp))).unwrap_or(0);
                    model.udsp -= 1;
                    return Change::DeleteUdsp(idx);
                }
            }
            89..=95 => {
                let events = (0..1 + rng.below(5))
                    .map(|_| {
                        model.clock_ms += 1 + rng.below(1000);
                        (model.clock_ms, random_event(rng))
                    })
                    .collect();
                return Change::AppendEvents(events);
            }
            _ => return Change::Import(random_config(rng, model)),
        }
    }
}

/// The first `count` changes of the stream for `seed`.
pub(crate) fn stream(seed: u64, count: usize) -> Vec<Change> {
    let mut rng = Rng::new(seed);
    let mut model = Model::default();
    (0..count)
        .map(|_| next_change(&mut rng, &mut model))
        .collect()
}

/// Applies one change.
pub(crate) fn apply(store: &Store, change: &Change) -> Result<(), StoreError> {
    match change {
        Change::PutPeer(p) => store.put_peer(p),
        Change::DeletePeer(p) => store.delete_peer(p),
        Change::AddPeerNi(p, n) => store.add_peer_ni(p, n),
        Change::DeletePeerNi(p, n) => store.delete_peer_ni(p, n),
        Change::AddRoute(r) => store.add_route(r),
        Change::DeleteRoute(net, gw) => store.delete_route(*net, gw),
        Change::SetTunable(name, v) => store.set_tunable(*name, *v),
        Change::UnsetTunable(name) => store.unset_tunable(*name).map(|_| ()),
        Change::PutNet(n) => store.put_net(n),
        Change::AddLocalNi(net, ni) => store.add_local_ni(*net, ni),
        Change::DeleteNet(net) => store.delete_net(*net),
        Change::AddUdsp(r) => store.add_udsp(r).map(|_| ()),
        Change::DeleteUdsp(i) => store.delete_udsp(*i),
        Change::AppendEvents(e) => store.append_events(e).map(|_| ()),
        Change::Import(c) => store.import(c),
    }
}

/// Everything the stream can change, as text: the exported configuration, then the
/// event log.
pub(crate) fn snapshot(store: &Store) -> Result<String, StoreError> {
    let mut out = store.export()?.to_yaml();
    out.push_str("events:\n");
    for e in store.events_after(0, usize::MAX)? {
        out.push_str(&format!("{} {} {:?}\n", e.id, e.at_ms, e.event));
    }
    Ok(out)
}
