//! Reading: serde structs that mirror the YAML (with the position of each value that our
//! own checks may refuse), then conversion into the typed model.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::str::FromStr;

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::error::{ConfigError, Position};
use super::global::{Buffers, Global, Routing};
use super::net::{Cpts, LndTunables, LocalNi, NetConfig, NiHealthStats, NiStatus, NiTunables};
use super::peer::{Peer, PeerNi, PeerNiCredits, PeerNiHealthStats, PeerNiState};
use super::route::{Route, RouteState, RouteType};
use super::router::{NetCheckSetting, RouterSection};
use super::stats::{LatencyStats, MsgStats, NiStatistics};
use super::udsp::UdspRule;
use super::Config;
use crate::nid::{Net, Nid};
use crate::tunables::{TunableName, Tunables};

mod routing;

type S<T> = Spanned<T>;

fn pos(loc: Location) -> Position {
    Position {
        line: loc.line(),
        column: loc.column(),
    }
}

pub(crate) fn at<T>(s: &S<T>) -> Position {
    pos(s.referenced)
}

/// Reads the document.
pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
    let meaningful = text
        .lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#') && l.trim() != "---");
    if !meaningful {
        return Ok(Config::default());
    }
    let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| from_yaml(&e))?;
    raw.into_model()
}

pub(crate) fn from_yaml(e: &serde_saphyr::Error) -> ConfigError {
    use serde_saphyr::Error as E;
    let at = e.location().map(pos).unwrap_or_default();
    match e.without_snippet() {
        E::SerdeUnknownField {
            field, expected, ..
        } => ConfigError::UnknownKey {
            key: field.clone(),
            expected: expected.iter().map(|s| (*s).to_owned()).collect(),
            at,
        },
        E::SerdeMissingField { field, .. } => ConfigError::MissingKey {
            key: (*field).to_owned(),
            at,
        },
        E::DuplicateMappingKey { key, .. } => ConfigError::DuplicateKey {
            key: key.clone().unwrap_or_default(),
            at,
        },
        E::SerdeInvalidType {
            unexpected,
            expected,
            ..
        }
        | E::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => ConfigError::WrongType {
            expected: expected.clone(),
            found: unexpected.clone(),
            at,
        },
        E::Unexpected { expected, .. } => ConfigError::WrongType {
            expected: (*expected).to_owned(),
            found: "another kind of node".to_owned(),
            at,
        },
        E::InvalidScalar { ty, .. } => ConfigError::WrongType {
            expected: (*ty).to_owned(),
            found: "a scalar that does not fit it".to_owned(),
            at,
        },
        other => {
            // The parser's text ends with the position, which the error already carries.
            let mut message = other.to_string();
            let suffix = format!(" at line {}, column {}", at.line, at.column);
            if message.ends_with(&suffix) {
                message.truncate(message.len() - suffix.len());
            }
            ConfigError::Syntax { message, at }
        }
    }
}

fn nid(field: impl FnOnce() -> String, s: &S<String>) -> Result<Nid, ConfigError> {
    Nid::from_str(&s.value).map_err(|source| ConfigError::InvalidNid {
        field: field(),
        value: s.value.clone(),
        source: Box::new(source),
        at: at(s),
    })
}

fn net(field: impl FnOnce() -> String, s: &S<String>) -> Result<Net, ConfigError> {
    Net::from_str(&s.value).map_err(|source| ConfigError::InvalidNet {
        field: field(),
        value: s.value.clone(),
        source: Box::new(source),
        at: at(s),
    })
}

fn one_of<T: Copy>(
    field: impl FnOnce() -> String,
    s: &S<String>,
    choices: &[(&str, T)],
    expected: &'static str,
) -> Result<T, ConfigError> {
    choices
        .iter()
        .find(|(name, _)| *name == s.value)
        .map(|(_, v)| *v)
        .ok_or_else(|| ConfigError::InvalidValue {
            field: field(),
            value: s.value.clone(),
            expected,
            at: at(s),
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    net: Vec<RawNet>,
    #[serde(default)]
    route: Vec<RawRoute>,
    #[serde(default)]
    peer: Vec<RawPeer>,
    routing: Option<Routing>,
    buffers: Option<Buffers>,
    global: Option<RawGlobal>,
    #[serde(default)]
    udsp: Vec<RawUdsp>,
    #[serde(rename = "lnet-router")]
    lnet_router: Option<RawRouter>,
}

impl RawConfig {
    fn into_model(self) -> Result<Config, ConfigError> {
        let nets = self
            .net
            .into_iter()
            .enumerate()
            .map(|(i, n)| n.into_model(i))
            .collect::<Result<_, _>>()?;
        let routes = self
            .route
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.into_model(i))
            .collect::<Result<_, _>>()?;
        let peers = self
            .peer
            .into_iter()
            .enumerate()
            .map(|(i, p)| p.into_model(i))
            .collect::<Result<_, _>>()?;
        let udsp = self
            .udsp
            .into_iter()
            .enumerate()
            .map(|(i, u)| u.into_model(i))
            .collect::<Result<_, _>>()?;
        Ok(Config {
            nets,
            routes,
            peers,
            routing: self.routing,
            buffers: self.buffers,
            global: self.global.map(RawGlobal::into_model).transpose()?,
            udsp,
            router: self.lnet_router.map(RawRouter::into_model).transpose()?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNet {
    #[serde(rename = "net type")]
    net_type: S<String>,
    #[serde(rename = "local NI(s)", default)]
    local_nis: Vec<RawLocalNi>,
}

impl RawNet {
    fn into_model(self, i: usize) -> Result<NetConfig, ConfigError> {
        Ok(NetConfig {
            net_type: net(|| format!("net[{i}].net type"), &self.net_type)?,
            local_nis: self
                .local_nis
                .into_iter()
                .enumerate()
                .map(|(j, ni)| ni.into_model(&format!("net[{i}].local NI(s)[{j}]")))
                .collect::<Result<_, _>>()?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocalNi {
    nid: Option<S<String>>,
    status: Option<S<String>>,
    interfaces: Option<BTreeMap<u32, S<String>>>,
    statistics: Option<S<RawStatistics>>,
    sent_stats: Option<MsgStats>,
    received_stats: Option<MsgStats>,
    dropped_stats: Option<MsgStats>,
    #[serde(rename = "health stats")]
    health_stats: Option<NiHealthStats>,
    tunables: Option<NiTunables>,
    #[serde(rename = "lnd tunables")]
    lnd_tunables: Option<LndTunables>,
    #[serde(rename = "dev cpt")]
    dev_cpt: Option<i32>,
    #[serde(rename = "CPT")]
    cpt: Option<S<String>>,
}

impl RawLocalNi {
    fn into_model(self, path: &str) -> Result<LocalNi, ConfigError> {
        let mut interfaces = Vec::new();
        for (idx, name) in self.interfaces.into_iter().flatten() {
            if usize::try_from(idx).ok() != Some(interfaces.len()) {
                return Err(ConfigError::InvalidValue {
                    field: format!("{path}.interfaces"),
                    value: format!("{idx}: {}", name.value),
                    expected: "interfaces numbered 0, 1, 2 ... in order",
                    at: at(&name),
                });
            }
            interfaces.push(name.value);
        }
        Ok(LocalNi {
            nid: self
                .nid
                .as_ref()
                .map(|s| nid(|| format!("{path}.nid"), s))
                .transpose()?,
            status: self
                .status
                .as_ref()
                .map(|s| {
                    one_of(
                        || format!("{path}.status"),
                        s,
                        &[("up", NiStatus::Up), ("down", NiStatus::Down)],
                        "up or down",
                    )
                })
                .transpose()?,
            interfaces,
            statistics: self
                .statistics
                .map(|s| {
                    let p = at(&s);
                    s.value.into_model(&format!("{path}.statistics"), p)
                })
                .transpose()?,
            sent_stats: self.sent_stats,
            received_stats: self.received_stats,
            dropped_stats: self.dropped_stats,
            health_stats: self.health_stats,
            tunables: self.tunables,
            lnd_tunables: self.lnd_tunables,
            dev_cpt: self.dev_cpt,
            cpt: self
                .cpt
                .map(|s| {
                    Cpts::parse(&s.value).ok_or_else(|| ConfigError::InvalidValue {
                        field: format!("{path}.CPT"),
                        value: s.value.clone(),
                        expected: "a CPT list such as \"[0,1]\"",
                        at: at(&s),
                    })
                })
                .transpose()?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatistics {
    send_count: u32,
    recv_count: u32,
    drop_count: u32,
    put_egress_samples: Option<u32>,
    put_egress_min_nsec: Option<u64>,
    put_egress_max_nsec: Option<u64>,
    put_egress_avg_nsec: Option<u64>,
    get_rtt_samples: Option<u32>,
    get_rtt_min_nsec: Option<u64>,
    get_rtt_max_nsec: Option<u64>,
    get_rtt_avg_nsec: Option<u64>,
    put_ack_samples: Option<u32>,
    put_ack_min_nsec: Option<u64>,
    put_ack_max_nsec: Option<u64>,
    put_ack_avg_nsec: Option<u64>,
}

impl RawStatistics {
    pub(crate) fn into_model(self, path: &str, at: Position) -> Result<NiStatistics, ConfigError> {
        let r = &self;
        let small = [
            ("put_egress_samples", r.put_egress_samples),
            ("get_rtt_samples", r.get_rtt_samples),
            ("put_ack_samples", r.put_ack_samples),
        ];
        let big = [
            ("put_egress_min_nsec", r.put_egress_min_nsec),
            ("put_egress_max_nsec", r.put_egress_max_nsec),
            ("put_egress_avg_nsec", r.put_egress_avg_nsec),
            ("get_rtt_min_nsec", r.get_rtt_min_nsec),
            ("get_rtt_max_nsec", r.get_rtt_max_nsec),
            ("get_rtt_avg_nsec", r.get_rtt_avg_nsec),
            ("put_ack_min_nsec", r.put_ack_min_nsec),
            ("put_ack_max_nsec", r.put_ack_max_nsec),
            ("put_ack_avg_nsec", r.put_ack_avg_nsec),
        ];
        let present = small.iter().filter(|(_, v)| v.is_some()).count()
            + big.iter().filter(|(_, v)| v.is_some()).count();
        let latency = if present == 0 {
            None
        } else {
            let missing = small
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(k, _)| *k)
                .chain(big.iter().filter(|(_, v)| v.is_none()).map(|(k, _)| *k))
                .next();
            if let Some(key) = missing {
                return Err(ConfigError::MissingKey {
                    key: format!("{path}.{key}"),
                    at,
                });
            }
            Some(LatencyStats {
                put_egress_samples: r.put_egress_samples.unwrap_or_default(),
                put_egress_min_nsec: r.put_egress_min_nsec.unwrap_or_default(),
                put_egress_max_nsec: r.put_egress_max_nsec.unwrap_or_default(),
                put_egress_avg_nsec: r.put_egress_avg_nsec.unwrap_or_default(),
                get_rtt_samples: r.get_rtt_samples.unwrap_or_default(),
                get_rtt_min_nsec: r.get_rtt_min_nsec.unwrap_or_default(),
                get_rtt_max_nsec: r.get_rtt_max_nsec.unwrap_or_default(),
                get_rtt_avg_nsec: r.get_rtt_avg_nsec.unwrap_or_default(),
                put_ack_samples: r.put_ack_samples.unwrap_or_default(),
                put_ack_min_nsec: r.put_ack_min_nsec.unwrap_or_default(),
                put_ack_max_nsec: r.put_ack_max_nsec.unwrap_or_default(),
                put_ack_avg_nsec: r.put_ack_avg_nsec.unwrap_or_default(),
            })
        };
        Ok(NiStatistics {
            send_count: r.send_count,
            recv_count: r.recv_count,
            drop_count: r.drop_count,
            latency,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    net: S<String>,
    gateway: S<String>,
    hop: Option<i64>,
    priority: Option<u32>,
    health_sensitivity: Option<u32>,
    state: Option<S<String>>,
    #[serde(rename = "type")]
    route_type: Option<S<String>>,
}

impl RawRoute {
    fn into_model(self, i: usize) -> Result<Route, ConfigError> {
        Ok(Route {
            net: net(|| format!("route[{i}].net"), &self.net)?,
            gateway: nid(|| format!("route[{i}].gateway"), &self.gateway)?,
            hop: self.hop,
            priority: self.priority,
            health_sensitivity: self.health_sensitivity,
            state: self
                .state
                .as_ref()
                .map(|s| {
                    one_of(
                        || format!("route[{i}].state"),
                        s,
                        &[("up", RouteState::Up), ("down", RouteState::Down)],
                        "up or down",
                    )
                })
                .transpose()?,
            route_type: self
                .route_type
                .as_ref()
                .map(|s| {
                    one_of(
                        || format!("route[{i}].type"),
                        s,
                        &[
                            ("single-hop", RouteType::SingleHop),
                            ("multi-hop", RouteType::MultiHop),
                        ],
                        "single-hop or multi-hop",
                    )
                })
                .transpose()?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    #[serde(rename = "primary nid")]
    primary_nid: S<String>,
    #[serde(rename = "Multi-Rail", default)]
    multi_rail: bool,
    #[serde(rename = "peer state")]
    peer_state: Option<u32>,
    #[serde(rename = "peer ni", default)]
    peer_nis: Vec<RawPeerNi>,
}

impl RawPeer {
    fn into_model(self, i: usize) -> Result<Peer, ConfigError> {
        Ok(Peer {
            primary_nid: nid(|| format!("peer[{i}].primary nid"), &self.primary_nid)?,
            multi_rail: self.multi_rail,
            peer_state: self.peer_state,
            peer_nis: self
                .peer_nis
                .into_iter()
                .enumerate()
                .map(|(j, ni)| ni.into_model(&format!("peer[{i}].peer ni[{j}]")))
                .collect::<Result<_, _>>()?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeerNi {
    nid: S<String>,
    state: Option<S<String>>,
    max_ni_tx_credits: Option<u32>,
    available_tx_credits: Option<u32>,
    min_tx_credits: Option<u32>,
    tx_q_num_of_buf: Option<u32>,
    available_rtr_credits: Option<u32>,
    min_rtr_credits: Option<u32>,
    refcount: Option<u32>,
    statistics: Option<S<RawStatistics>>,
    sent_stats: Option<MsgStats>,
    received_stats: Option<MsgStats>,
    dropped_stats: Option<MsgStats>,
    #[serde(rename = "health stats")]
    health_stats: Option<PeerNiHealthStats>,
}

impl RawPeerNi {
    fn into_model(self, path: &str) -> Result<PeerNi, ConfigError> {
        let counters = [
            ("max_ni_tx_credits", self.max_ni_tx_credits),
            ("available_tx_credits", self.available_tx_credits),
            ("min_tx_credits", self.min_tx_credits),
            ("tx_q_num_of_buf", self.tx_q_num_of_buf),
            ("available_rtr_credits", self.available_rtr_credits),
            ("min_rtr_credits", self.min_rtr_credits),
            ("refcount", self.refcount),
        ];
        let credits = match counters.iter().find(|(_, v)| v.is_none()) {
            None => Some(PeerNiCredits {
                max_ni_tx_credits: self.max_ni_tx_credits.unwrap_or_default(),
                available_tx_credits: self.available_tx_credits.unwrap_or_default(),
                min_tx_credits: self.min_tx_credits.unwrap_or_default(),
                tx_q_num_of_buf: self.tx_q_num_of_buf.unwrap_or_default(),
                available_rtr_credits: self.available_rtr_credits.unwrap_or_default(),
                min_rtr_credits: self.min_rtr_credits.unwrap_or_default(),
                refcount: self.refcount.unwrap_or_default(),
            }),
            Some(_) if counters.iter().all(|(_, v)| v.is_none()) => None,
            Some((key, _)) => {
                return Err(ConfigError::MissingKey {
                    key: format!("{path}.{key}"),
                    at: at(&self.nid),
                })
            }
        };
        Ok(PeerNi {
            nid: nid(|| format!("{path}.nid"), &self.nid)?,
            state: self
                .state
                .as_ref()
                .map(|s| {
                    one_of(
                        || format!("{path}.state"),
                        s,
                        &[
                            ("up", PeerNiState::Up),
                            ("down", PeerNiState::Down),
                            ("NA", PeerNiState::NotApplicable),
                        ],
                        "up, down or NA",
                    )
                })
                .transpose()?,
            credits,
            statistics: self
                .statistics
                .map(|s| {
                    let p = at(&s);
                    s.value.into_model(&format!("{path}.statistics"), p)
                })
                .transpose()?,
            sent_stats: self.sent_stats,
            received_stats: self.received_stats,
            dropped_stats: self.dropped_stats,
            health_stats: self.health_stats,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGlobal {
    numa_range: Option<S<i64>>,
    #[serde(alias = "max_intf")]
    max_interfaces: Option<S<i64>>,
    discovery: Option<S<i64>>,
    drop_asym_route: Option<S<i64>>,
    retry_count: Option<S<i64>>,
    transaction_timeout: Option<S<i64>>,
    health_sensitivity: Option<S<i64>>,
    recovery_interval: Option<S<i64>>,
    router_sensitivity: Option<S<i64>>,
    lnd_timeout: Option<S<i64>>,
    response_tracking: Option<S<i64>>,
    recovery_limit: Option<S<i64>>,
    max_recovery_ping_interval: Option<S<i64>>,
}

/// Checks one global tunable on its own, with the rules of `lnetctl set`; the relations
/// between `retry_count`, `transaction_timeout` and `health_sensitivity` are left to
/// [`validate`](super::validate).
fn tunable(name: TunableName, v: Option<S<i64>>) -> Result<Option<u32>, ConfigError> {
    let Some(v) = v else { return Ok(None) };
    let err = |source| ConfigError::Tunable {
        field: format!("global.{name}"),
        source,
        at: at(&v),
    };
    let mut scratch = Tunables::default();
    match name {
        TunableName::RetryCount => scratch
            .set(TunableName::TransactionTimeout, i64::from(u32::MAX))
            .map_err(err)?,
        TunableName::TransactionTimeout => {
            scratch.set(TunableName::RetryCount, 0).map_err(err)?;
        }
        _ => {}
    }
    scratch.set(name, v.value).map_err(err)?;
    // `set` accepted it, so it is within 0..=u32::MAX.
    u32::try_from(v.value)
        .map(Some)
        .map_err(|_| ConfigError::InvalidValue {
            field: format!("global.{name}"),
            value: v.value.to_string(),
            expected: "0..=4294967295",
            at: at(&v),
        })
}

impl RawGlobal {
    fn into_model(self) -> Result<Global, ConfigError> {
        use TunableName as N;
        let lnd_timeout = match self.lnd_timeout {
            None => None,
            Some(v) => Some(
                u32::try_from(v.value).map_err(|_| ConfigError::InvalidValue {
                    field: "global.lnd_timeout".to_owned(),
                    value: v.value.to_string(),
                    expected: "0..=4294967295 seconds",
                    at: at(&v),
                })?,
            ),
        };
        Ok(Global {
            numa_range: tunable(N::NumaRange, self.numa_range)?,
            max_interfaces: tunable(N::MaxInterfaces, self.max_interfaces)?,
            discovery: tunable(N::Discovery, self.discovery)?,
            drop_asym_route: tunable(N::DropAsymRoute, self.drop_asym_route)?,
            retry_count: tunable(N::RetryCount, self.retry_count)?,
            transaction_timeout: tunable(N::TransactionTimeout, self.transaction_timeout)?,
            health_sensitivity: tunable(N::HealthSensitivity, self.health_sensitivity)?,
            recovery_interval: tunable(N::RecoveryInterval, self.recovery_interval)?,
            router_sensitivity: tunable(N::RouterSensitivity, self.router_sensitivity)?,
            lnd_timeout,
            response_tracking: tunable(N::ResponseTracking, self.response_tracking)?,
            recovery_limit: tunable(N::RecoveryLimit, self.recovery_limit)?,
            max_recovery_ping_interval: tunable(
                N::MaxRecoveryPingInterval,
                self.max_recovery_ping_interval,
            )?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdsp {
    idx: Option<u32>,
    src: Option<String>,
    dst: Option<String>,
    rte: Option<String>,
    priority: Option<S<u32>>,
    action: Option<S<RawUdspAction>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdspAction {
    priority: Option<u32>,
}

impl RawUdsp {
    fn into_model(self, i: usize) -> Result<UdspRule, ConfigError> {
        let priority = match (self.priority, self.action) {
            (Some(p), Some(a)) if a.value.priority.is_some() => {
                return Err(ConfigError::InvalidValue {
                    field: format!("udsp[{i}].priority"),
                    value: p.value.to_string(),
                    expected: "one priority, at the top level or under `action:`, not both",
                    at: at(&p),
                })
            }
            (Some(p), _) => Some(p.value),
            (None, Some(a)) => a.value.priority,
            (None, None) => None,
        };
        Ok(UdspRule {
            idx: self.idx,
            src: self.src,
            dst: self.dst,
            rte: self.rte,
            priority,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    acceptor_address: Option<S<String>>,
    acceptor_port: Option<u16>,
    alive_router_check_interval: Option<u32>,
    router_ping_timeout: Option<u32>,
    avoid_asym_router_failure: Option<u32>,
    check_routers_before_use: Option<u32>,
    net_check: Option<S<String>>,
    net_probe_interval_ms: Option<u64>,
    net_down_after_ms: Option<u64>,
}

impl RawRouter {
    fn into_model(self) -> Result<RouterSection, ConfigError> {
        Ok(RouterSection {
            acceptor_address: self
                .acceptor_address
                .map(|s| {
                    IpAddr::from_str(&s.value).map_err(|_| ConfigError::InvalidValue {
                        field: "lnet-router.acceptor_address".to_owned(),
                        value: s.value.clone(),
                        expected: "an IPv4 or IPv6 address",
                        at: at(&s),
                    })
                })
                .transpose()?,
            acceptor_port: self.acceptor_port,
            alive_router_check_interval: self.alive_router_check_interval,
            router_ping_timeout: self.router_ping_timeout,
            avoid_asym_router_failure: self.avoid_asym_router_failure,
            check_routers_before_use: self.check_routers_before_use,
            net_check: self
                .net_check
                .map(|s| {
                    NetCheckSetting::parse(&s.value).ok_or_else(|| ConfigError::InvalidValue {
                        field: "lnet-router.net_check".to_owned(),
                        value: s.value.clone(),
                        expected: "active, passive or off",
                        at: at(&s),
                    })
                })
                .transpose()?,
            net_probe_interval_ms: self.net_probe_interval_ms,
            net_down_after_ms: self.net_down_after_ms,
        })
    }
}
