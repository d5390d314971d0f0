//! From a configuration file to what the daemon starts: parse, validate, refuse what this
//! build cannot do, and resolve each tcp NI's NID and acceptor address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

use lnet::acceptor::ACCEPTOR_PORT;
use lnet::config::{self, Config, LocalNi, NetCheckSetting, RouterSection};
use lnet::netcheck::NetCheckMode;
use lnet::route::{RouteSpec, RouterCheck};
use lnet::time::Millis;
use lnet::tunables::Tunables;
use lnet::udsp::{UdspError, UdspPolicy};
use lnet::{LndType, Nid};

use crate::locate::line_of;

/// One problem in the configuration file: the key it is about, its line when known, and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The path of the key, such as `route` or `net[0].local NI(s)[0].nid`.
    pub key: String,
    /// The line of the key in the file, from 1; `None` when the file does not have it.
    pub line: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.key, self.message),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

/// Why a configuration file cannot be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file does not parse (a shape, NID, net or tunable error), with its position.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's error, which names the key and its line and column.
        #[source]
        source: config::ConfigError,
    },
    /// The file parses but is refused: each problem names its key and line.
    #[error("{path}: {}", join(problems))]
    Refused {
        /// The file.
        path: String,
        /// Every problem found, in document order.
        problems: Vec<Problem>,
    },
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// One socklnd NI to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpNi {
    /// Its NID.
    pub nid: Nid,
    /// Where its acceptor listens.
    pub listen: SocketAddr,
    /// The port dialled on peers (the acceptor port: LNet uses one port for both).
    pub peer_port: u16,
    /// NI tx credits (`tunables: credits`), when given.
    pub credits: Option<u32>,
    /// Per-peer tx credits (`tunables: peer_credits`), when given.
    pub peer_credits: Option<u32>,
    /// Per-peer router-buffer credits (`tunables: peer_buffer_credits`), when given.
    pub peer_buffer_credits: Option<u32>,
    /// `tunables: peer_timeout`, when given (0 or more; a negative one is the LND's
    /// default, as in the kernel).
    pub peer_timeout: Option<u32>,
    /// `lnd tunables: conns_per_peer`, when given.
    pub conns_per_peer: Option<u32>,
    /// `lnd tunables: timeout` (seconds), when given: the socklnd timeout, as `lnetctl net
    /// set --lnd-timeout` leaves it.
    pub timeout: Option<u32>,
    /// The interface it was configured on (`interfaces: 0:`), whose link is watched.
    pub interface: Option<String>,
}

/// One o2ib NI to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct O2ibNi {
    /// Its NID (the IPv4 address of its IPoIB or RoCE interface).
    pub nid: Nid,
    /// `tunables: peer_credits`, when given.
    pub peer_credits: Option<u32>,
    /// `tunables: peer_buffer_credits`, when given.
    pub peer_buffer_credits: Option<u32>,
    /// `tunables: peer_timeout`, when given (0 or more).
    pub peer_timeout: Option<u32>,
    /// `tunables: credits`, when given.
    pub credits: Option<u32>,
    /// `lnd tunables: timeout` (seconds), when given: the o2iblnd timeout, as `lnetctl net
    /// set --lnd-timeout` leaves it.
    pub timeout: Option<u32>,
    /// `lnd tunables: conns_per_peer`, when given: the connections it opens to a peer.
    pub conns_per_peer: Option<u32>,
    /// The interface it was configured on.
    pub interface: Option<String>,
}

/// A configured peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerPlan {
    /// Its primary NID.
    pub primary: Nid,
    /// All its NIDs (the primary first).
    pub nids: Vec<Nid>,
    /// Whether it is Multi-Rail.
    pub multi_rail: bool,
}

/// What the daemon starts for a configuration file.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The global tunables (kernel defaults with the file's `global:` over them).
    pub tunables: Tunables,
    /// The tcp NIs, in file order.
    pub nis: Vec<TcpNi>,
    /// The o2ib NIs, in file order (builds with the `o2ib` feature).
    pub o2ib_nis: Vec<O2ibNi>,
    /// The configured peers, in file order.
    pub peers: Vec<PeerPlan>,
    /// The routes, in file order.
    pub routes: Vec<RouteSpec>,
    /// The router checker (gateway pings) settings.
    pub router_check: RouterCheck,
    /// How a silent local net is found while forwarding.
    pub net_check: NetCheckMode,
    /// The UDSP rules, compiled.
    pub udsp: UdspPolicy,
    /// CPU partitions (CPTs): threads the peers' connections, the forwarding path and the
    /// router buffer pools are spread over, as the kernel's `cpu_npartitions`. 0 or 1:
    /// one, on the thread that starts the node.
    pub cpts: usize,
    /// How Linux schedules the CPT threads (with 2 CPTs or more).
    pub cpt_scheduling: crate::cpts::CptScheduling,
}

/// How an interface name becomes an IPv4 address (the host's interfaces in the daemon, a
/// table in tests).
pub trait Interfaces {
    /// The first IPv4 address of interface `name`, if it has one.
    fn ipv4(&self, name: &str) -> Option<Ipv4Addr>;
}

/// The host's network interfaces.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostInterfaces;

impl Interfaces for HostInterfaces {
    fn ipv4(&self, name: &str) -> Option<Ipv4Addr> {
        let all = if_addrs::get_if_addrs().ok()?;
        all.into_iter()
            .filter(|i| i.name == name)
            .find_map(|i| match i.ip() {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            })
    }
}

/// Reads, parses and checks the file at `path`.
pub fn load(path: &str, ifs: &dyn Interfaces) -> Result<Plan, PlanError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
        path: path.to_owned(),
        source,
    })?;
    plan(path, &text, ifs)
}

/// Parses and checks `text` (named `path` in errors).
pub fn plan(path: &str, text: &str, ifs: &dyn Interfaces) -> Result<Plan, PlanError> {
    let config = config::parse(text).map_err(|source| PlanError::Parse {
        path: path.to_owned(),
        source,
    })?;
    let mut problems = Vec::new();
    let mut problem = |key: String, message: String| {
        let line = line_of(text, &key);
        problems.push(Problem { key, line, message });
    };
    if let Err(errors) = config::validate(&config) {
        for e in errors {
            problem(e.field().to_owned(), e.to_string());
        }
    }
    refuse_unbuilt(&config, &mut problem);
    let udsp = match UdspPolicy::new(&config.udsp) {
        Ok(p) => p,
        Err(e) => {
            let key = match &e {
                UdspError::Expression { index, field, .. } => format!("udsp[{index}].{field}"),
                UdspError::PriorityOnPreferred { index } => format!("udsp[{index}].priority"),
                UdspError::Combination { index, .. } => format!("udsp[{index}]"),
                _ => "udsp".to_owned(),
            };
            problem(key, e.to_string());
            UdspPolicy::default()
        }
    };
    let nis = tcp_nis(&config, ifs, &mut problem);
    let o2ib_nis = o2ib_nis(&config, ifs, &mut problem);
    let tunables = config.tunables();
    if let Err(e) = &tunables {
        // validate() reports the same refusal with its key; add it only if it did not.
        let reported = problems
            .iter()
            .any(|p| p.key.starts_with("global") || p.key.starts_with("buffers"));
        if !reported {
            let key = "global".to_owned();
            let line = line_of(text, &key);
            problems.push(Problem {
                key,
                line,
                message: e.to_string(),
            });
        }
    }
    if !problems.is_empty() {
        problems.dedup();
        return Err(PlanError::Refused {
            path: path.to_owned(),
            problems,
        });
    }
    let peers = config
        .peers
        .iter()
        .map(|p| {
            let mut nids = vec![p.primary_nid];
            nids.extend(
                p.peer_nis
                    .iter()
                    .map(|n| n.nid)
                    .filter(|n| *n != p.primary_nid),
            );
            PeerPlan {
                primary: p.primary_nid,
                nids,
                multi_rail: p.multi_rail,
            }
        })
        .collect();
    let routes = config
        .routes
        .iter()
        .map(|r| RouteSpec {
            net: r.net,
            gateway: r.gateway,
            hops: r.hop.and_then(|h| u32::try_from(h).ok()),
            priority: r.priority.unwrap_or(0),
        })
        .collect();
    let section = config.router.clone().unwrap_or_default();
    let (router_check, net_check) = router_settings(&section);
    Ok(Plan {
        tunables: tunables.unwrap_or_default(),
        nis,
        o2ib_nis,
        peers,
        routes,
        router_check,
        net_check,
        udsp,
        cpts: 1,
        cpt_scheduling: crate::cpts::CptScheduling::default(),
    })
}

/// The router checker and the net check from the `lnet-router:` section (kernel
/// defaults for the checker; active probing of silent nets unless told otherwise).
fn router_settings(section: &RouterSection) -> (RouterCheck, NetCheckMode) {
    let mut check = RouterCheck::default();
    if let Some(s) = section.alive_router_check_interval {
        check.interval = Millis::from_secs(u64::from(s));
    }
    if let Some(s) = section.router_ping_timeout {
        check.ping_timeout = Millis::from_secs(u64::from(s));
    }
    if let Some(v) = section.avoid_asym_router_failure {
        check.avoid_asym_router_failure = v != 0;
    }
    if let Some(v) = section.check_routers_before_use {
        check.check_routers_before_use = v != 0;
    }
    let net_check = match section.net_check.unwrap_or(NetCheckSetting::Active) {
        NetCheckSetting::Off => NetCheckMode::Off,
        NetCheckSetting::Passive => NetCheckMode::Passive {
            down_after: check.interval.saturating_add(check.ping_timeout),
        },
        NetCheckSetting::Active => {
            let NetCheckMode::Active {
                probe_interval,
                down_after,
            } = NetCheckMode::ACTIVE
            else {
                return (check, NetCheckMode::ACTIVE);
            };
            NetCheckMode::Active {
                probe_interval: section
                    .net_probe_interval_ms
                    .map_or(probe_interval, Millis::from_millis),
                down_after: section
                    .net_down_after_ms
                    .map_or(down_after, Millis::from_millis),
            }
        }
    };
    (check, net_check)
}

/// What the file asks for that this build does not have: nets of LNDs other than socklnd
/// (and o2iblnd with feature `o2ib`).
fn refuse_unbuilt(config: &Config, problem: &mut impl FnMut(String, String)) {
    for (i, n) in config.nets.iter().enumerate() {
        let lnd = n.net_type.lnd;
        if lnd == LndType::SOCKLND || (lnd == LndType::O2IBLND && cfg!(feature = "o2ib")) {
            continue;
        }
        let message = if lnd == LndType::O2IBLND {
            format!(
                "net {} needs the o2ib LND, which this build leaves out (feature `o2ib`); \
                 only tcp nets can run",
                n.net_type
            )
        } else {
            format!(
                "net {}: this LND is not available; only tcp nets can run",
                n.net_type
            )
        };
        problem(format!("net[{i}].net type"), message);
    }
}

/// The tcp NIs, with their NIDs and acceptor addresses.
fn tcp_nis(
    config: &Config,
    ifs: &dyn Interfaces,
    problem: &mut impl FnMut(String, String),
) -> Vec<TcpNi> {
    let section = config.router.clone().unwrap_or_default();
    let port = section.acceptor_port.unwrap_or(ACCEPTOR_PORT);
    let mut out = Vec::new();
    for (i, n) in config.nets.iter().enumerate() {
        if n.net_type.lnd != LndType::SOCKLND {
            continue;
        }
        if n.local_nis.is_empty() {
            problem(
                format!("net[{i}].local NI(s)"),
                format!("net {} has no local NI", n.net_type),
            );
        }
        for (j, ni) in n.local_nis.iter().enumerate() {
            let field = format!("net[{i}].local NI(s)[{j}]");
            let Some(nid) = ni_nid(ni, n.net_type, ifs, &field, problem) else {
                continue;
            };
            if let Some(t) = &ni.lnd_tunables {
                if let Some(tos) = t.tos.filter(|t| *t != -1) {
                    problem(
                        format!("{field}.lnd tunables.tos"),
                        format!("tos {tos} is not supported by this build's socklnd; use -1"),
                    );
                }
                if t.timeout == Some(0) {
                    problem(
                        format!("{field}.lnd tunables.timeout"),
                        "a socklnd timeout of 0 is not supported: give seconds".to_owned(),
                    );
                }
            }
            let ip = nid.addr_u32().map(Ipv4Addr::from);
            let listen_ip = match (section.acceptor_address, ip) {
                (Some(a), _) => a,
                (None, Some(ip)) => IpAddr::V4(ip),
                (None, None) => continue,
            };
            let tunables = ni.tunables.as_ref();
            let positive = |v: i32| u32::try_from(v).ok().filter(|v| *v > 0);
            out.push(TcpNi {
                nid,
                listen: SocketAddr::new(listen_ip, port),
                peer_port: port,
                credits: tunables.and_then(|t| positive(t.credits)),
                peer_credits: tunables.and_then(|t| positive(t.peer_credits)),
                peer_buffer_credits: tunables.and_then(|t| positive(t.peer_buffer_credits)),
                peer_timeout: tunables.and_then(|t| u32::try_from(t.peer_timeout).ok()),
                conns_per_peer: ni
                    .lnd_tunables
                    .as_ref()
                    .and_then(|t| t.conns_per_peer)
                    .map(u32::from),
                timeout: ni.lnd_tunables.as_ref().and_then(|t| t.timeout),
                interface: ni.interfaces.first().cloned(),
            });
        }
    }
    if section.acceptor_address.is_some() && out.len() > 1 {
        problem(
            "lnet-router.acceptor_address".to_owned(),
            format!(
                "one acceptor address for {} tcp NIs: each socklnd NI listens on its own \
                 address in this build; remove acceptor_address so that each NI listens on \
                 its NID's address",
                out.len()
            ),
        );
    }
    if config.nets.is_empty() {
        problem(
            "net".to_owned(),
            "no net is configured: there is nothing to run".to_owned(),
        );
    }
    out
}

/// The o2ib NIs (only in a build with the `o2ib` feature; others refuse o2ib nets).
fn o2ib_nis(
    config: &Config,
    ifs: &dyn Interfaces,
    problem: &mut impl FnMut(String, String),
) -> Vec<O2ibNi> {
    let mut out = Vec::new();
    if !cfg!(feature = "o2ib") {
        return out;
    }
    for (i, n) in config.nets.iter().enumerate() {
        if n.net_type.lnd != LndType::O2IBLND {
            continue;
        }
        for (j, ni) in n.local_nis.iter().enumerate() {
            let field = format!("net[{i}].local NI(s)[{j}]");
            let Some(nid) = ni_nid(ni, n.net_type, ifs, &field, problem) else {
                continue;
            };
            if ni.lnd_tunables.as_ref().and_then(|t| t.timeout) == Some(0) {
                problem(
                    format!("{field}.lnd tunables.timeout"),
                    "an o2iblnd timeout of 0 is not supported: give seconds".to_owned(),
                );
            }
            let tunables = ni.tunables.as_ref();
            let positive = |v: i32| u32::try_from(v).ok().filter(|v| *v > 0);
            out.push(O2ibNi {
                nid,
                peer_credits: tunables.and_then(|t| positive(t.peer_credits)),
                peer_buffer_credits: tunables.and_then(|t| positive(t.peer_buffer_credits)),
                peer_timeout: tunables.and_then(|t| u32::try_from(t.peer_timeout).ok()),
                credits: tunables.and_then(|t| positive(t.credits)),
                timeout: ni.lnd_tunables.as_ref().and_then(|t| t.timeout),
                conns_per_peer: ni
                    .lnd_tunables
                    .as_ref()
                    .and_then(|t| t.conns_per_peer)
                    .map(u32::from),
                interface: ni.interfaces.first().cloned(),
            });
        }
    }
    out
}

/// An NI's NID: its `nid`, else the IPv4 address of its first interface (an interface
/// name, or an address written in its place).
fn ni_nid(
    ni: &LocalNi,
    net: lnet::Net,
    ifs: &dyn Interfaces,
    field: &str,
    problem: &mut impl FnMut(String, String),
) -> Option<Nid> {
    if let Some(nid) = ni.nid {
        if nid.addr_u32().is_none() {
            problem(
                format!("{field}.nid"),
                format!("NID {nid} has no IPv4 address; socklnd needs one"),
            );
            return None;
        }
        return Some(nid);
    }
    let Some(name) = ni.interfaces.first() else {
        problem(
            field.to_owned(),
            "the NI has neither `nid` nor `interfaces`".to_owned(),
        );
        return None;
    };
    let ip = Ipv4Addr::from_str(name).ok().or_else(|| ifs.ipv4(name));
    match ip {
        Some(ip) => Some(Nid::from_ipv4(net, ip)),
        None => {
            problem(
                format!("{field}.interfaces"),
                format!("interface {name:?} has no IPv4 address on this host"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Table;
    impl Interfaces for Table {
        fn ipv4(&self, name: &str) -> Option<Ipv4Addr> {
            (name == "eth0").then_some(Ipv4Addr::new(10, 1, 1, 1))
        }
    }

    fn refused(text: &str) -> Vec<Problem> {
        match plan("f.yaml", text, &Table) {
            Err(PlanError::Refused { problems, .. }) => problems,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_tcp_ni_listens_on_its_address_port_988_by_default() {
        let p = plan(
            "f.yaml",
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\n",
            &Table,
        )
        .unwrap();
        assert_eq!(p.nis.len(), 1);
        assert_eq!(p.nis[0].listen, "10.0.0.1:988".parse().unwrap());
        assert_eq!(p.nis[0].peer_port, 988);
    }

    #[test]
    fn interfaces_resolve_and_the_router_section_sets_the_acceptor() {
        let p = plan(
            "f.yaml",
            "net:\n    - net type: tcp2\n      local NI(s):\n        - interfaces:\n              0: eth0\n\
             lnet-router:\n    acceptor_address: 0.0.0.0\n    acceptor_port: 7988\n",
            &Table,
        )
        .unwrap();
        assert_eq!(p.nis[0].nid, "10.1.1.1@tcp2".parse().unwrap());
        assert_eq!(p.nis[0].listen, "0.0.0.0:7988".parse().unwrap());
        assert_eq!(p.nis[0].peer_port, 7988);
    }

    #[test]
    fn o2ib_is_refused_with_key_and_line_and_routes_and_routing_are_taken() {
        let text = "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\n\
                    \x20   - net type: o2ib\n      local NI(s):\n        - nid: 10.2.0.1@o2ib\n\
                    route:\n    - net: o2ib9\n      gateway: 10.0.0.2@tcp\n\
                    routing:\n    enable: 1\n";
        if cfg!(feature = "o2ib") {
            let p = plan("f.yaml", text, &Table).unwrap();
            assert_eq!(p.o2ib_nis[0].nid, "10.2.0.1@o2ib".parse().unwrap());
            assert_eq!(p.o2ib_nis[0].timeout, None);
        } else {
            let problems = refused(text);
            let keys: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
            assert_eq!(keys, [("net[1].net type", Some(5))], "{problems:?}");
        }
        let text = "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\n\
                    route:\n    - net: tcp9\n      gateway: 10.0.0.2@tcp\n      hop: 2\n\
                    \x20     priority: 3\n\
                    routing:\n    enable: 1\nlnet-router:\n    alive_router_check_interval: 5\n\
                    \x20   net_check: passive\n";
        let p = plan("f.yaml", text, &Table).unwrap();
        assert!(p.tunables.routing());
        assert_eq!(
            p.routes,
            [RouteSpec {
                net: "tcp9".parse().unwrap(),
                gateway: "10.0.0.2@tcp".parse().unwrap(),
                hops: Some(2),
                priority: 3,
            }]
        );
        assert_eq!(p.router_check.interval, Millis::from_secs(5));
        assert_eq!(
            p.net_check,
            NetCheckMode::Passive {
                down_after: Millis::from_secs(55)
            }
        );
    }

    #[test]
    fn an_o2ib_timeout_of_0_is_refused_and_one_in_seconds_is_taken() {
        let text = |t: u32| {
            format!(
                "net:\n    - net type: o2ib1\n      local NI(s):\n        - nid: 10.2.0.1@o2ib1\n\
                 \x20         lnd tunables:\n              timeout: {t}\n"
            )
        };
        let problems = refused(&text(0));
        let expected = if cfg!(feature = "o2ib") {
            "net[0].local NI(s)[0].lnd tunables.timeout"
        } else {
            "net[0].net type"
        };
        assert_eq!(problems[0].key, expected, "{problems:?}");
        if cfg!(feature = "o2ib") {
            let p = plan("f.yaml", &text(9), &Table).unwrap();
            assert_eq!(p.o2ib_nis[0].timeout, Some(9));
        }
    }

    #[test]
    fn routing_disabled_peers_and_tunables_are_taken() {
        let p = plan(
            "f.yaml",
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\n\
             \x20         tunables:\n              peer_timeout: 180\n              peer_credits: 16\n\
             \x20             peer_buffer_credits: 0\n              credits: 512\n\
             \x20         lnd tunables:\n              conns_per_peer: 2\n              tos: -1\n\
             peer:\n-     primary nid: 10.0.0.2@tcp\n      Multi-Rail: true\n      peer ni:\n\
             \x20     -     nid: 10.0.0.2@tcp\n      -     nid: 10.0.0.3@tcp\n\
             routing:\n    enable: 0\nglobal:\n    retry_count: 0\n",
            &Table,
        )
        .unwrap();
        let ni = &p.nis[0];
        assert_eq!(
            (ni.credits, ni.peer_credits, ni.conns_per_peer),
            (Some(512), Some(16), Some(2))
        );
        assert_eq!(
            p.peers,
            [PeerPlan {
                primary: "10.0.0.2@tcp".parse().unwrap(),
                nids: vec![
                    "10.0.0.2@tcp".parse().unwrap(),
                    "10.0.0.3@tcp".parse().unwrap()
                ],
                multi_rail: true,
            }]
        );
        assert_eq!(p.tunables.get(lnet::tunables::TunableName::RetryCount), 0);
    }

    #[test]
    fn one_acceptor_address_for_two_nis_is_refused() {
        let problems = refused(
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\n\
             \x20       - nid: 10.0.0.2@tcp\nlnet-router:\n    acceptor_address: 0.0.0.0\n",
        );
        assert_eq!(problems[0].key, "lnet-router.acceptor_address");
        assert_eq!(problems[0].line, Some(7));
    }

    #[test]
    fn a_refused_tunable_is_reported_once_with_its_line() {
        let problems = refused(
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\n\
             global:\n    retry_count: 5\n    transaction_timeout: 3\n",
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].key.starts_with("global."), "{problems:?}");
        assert!(matches!(problems[0].line, Some(6 | 7)), "{problems:?}");
    }

    #[test]
    fn an_empty_file_has_nothing_to_run() {
        let problems = refused("# nothing\n");
        assert_eq!(problems[0].key, "net");
        assert_eq!(problems[0].line, None);
    }

    #[test]
    fn validation_errors_carry_their_line() {
        let problems = refused(
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp1\n",
        );
        assert_eq!(problems[0].key, "net[0].local NI(s)[0].nid");
        assert_eq!(problems[0].line, Some(4));
    }

    #[test]
    fn an_unknown_interface_is_refused() {
        let problems = refused(
            "net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: nope9\n",
        );
        assert_eq!(problems[0].key, "net[0].local NI(s)[0].interfaces");
        assert_eq!(problems[0].line, Some(4));
    }

    #[test]
    fn udsp_rules_are_taken_and_a_bad_one_is_refused_with_its_line() {
        let text = "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\nudsp:\n    - idx: 0\n      src: tcp1\n      action:\n          priority: 2\n    - idx: 1\n      dst: 10.0.0.[1-3]@tcp\n      rte: 10.0.1.1@tcp\n";
        let p = plan("f.yaml", text, &Table).unwrap();
        assert_eq!(p.udsp.local_net_priority("tcp1".parse().unwrap()), 2);
        assert!(p.udsp.prefers_gateway(
            &"10.0.0.2@tcp".parse().unwrap(),
            &"10.0.1.1@tcp".parse().unwrap()
        ));
        let problems = refused(
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 10.0.0.1@tcp\nudsp:\n    - idx: 0\n      src: tcp\n    - idx: 1\n      dst: 10.0.0.[9-3]@tcp\n",
        );
        assert_eq!(problems[0].key, "udsp[1].dst");
        assert_eq!(problems[0].line, Some(9));
        assert!(
            problems[0].message.contains("10.0.0.[9-3]@tcp"),
            "{}",
            problems[0].message
        );
    }
}
