//! Tests of the configuration model: the kernel fixtures, round trips, every error kind.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::*;

const EXPORT_O2IB: &str =
    include_str!("../../tests/fixtures/lnetctl/kernel-2.17.57/export-o2ib.yaml");
const EXPORT_BACKUP: &str =
    include_str!("../../tests/fixtures/lnetctl/kernel-2.17.57/export-backup-router.yaml");

#[test]
fn fixtures_print_back_byte_for_byte() {
    for (name, text) in [
        ("export-o2ib", EXPORT_O2IB),
        ("export-backup", EXPORT_BACKUP),
    ] {
        let c = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = c.to_yaml();
        if printed != text {
            for (i, (a, b)) in printed.lines().zip(text.lines()).enumerate() {
                assert_eq!(a, b, "{name}: line {}", i + 1);
            }
            assert_eq!(printed.lines().count(), text.lines().count(), "{name}");
        }
        assert_eq!(printed, text, "{name}");
    }
}

#[test]
fn other_fixtures_print_back_byte_for_byte() {
    for text in [
        include_str!("../../tests/fixtures/lnetctl/kernel-2.17.57/global-show.yaml"),
        include_str!("../../tests/fixtures/lnetctl/kernel-2.17.57/routing-show-enabled.yaml"),
        include_str!("../../tests/fixtures/lnetctl/kernel-2.17.57/route-show-v.yaml"),
    ] {
        let c = parse(text).unwrap();
        assert_eq!(c.to_yaml(), text);
    }
}

use crate::nid::{LndType, Net, Nid, NidAddr, NidError};
use crate::tunables::{TunableError, TunableName, Tunables};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn net(s: &str) -> Net {
    s.parse().unwrap()
}

#[test]
fn export_o2ib_values() {
    let c = parse(EXPORT_O2IB).unwrap();
    assert_eq!(c.nets.len(), 2);
    let lo = &c.nets[0];
    assert_eq!(lo.net_type, Net::LO);
    assert_eq!(lo.local_nis[0].nid, Some(Nid::LO_0));
    assert_eq!(lo.local_nis[0].status, Some(NiStatus::Up));
    assert!(lo.local_nis[0].interfaces.is_empty());
    assert_eq!(lo.local_nis[0].lnd_tunables, None);
    assert_eq!(lo.local_nis[0].dev_cpt, Some(-1));
    let o2ib = &c.nets[1];
    assert_eq!(o2ib.net_type, net("o2ib"));
    assert_eq!(o2ib.local_nis.len(), 2);
    let ni = &o2ib.local_nis[1];
    assert_eq!(ni.nid, Some(nid("10.0.0.2@o2ib")));
    assert_eq!(ni.interfaces, ["veth1"]);
    let stats = ni.statistics.as_ref().unwrap();
    assert_eq!((stats.send_count, stats.recv_count), (2, 2));
    assert_eq!(stats.latency.as_ref().unwrap().get_rtt_min_nsec, 1_127_320);
    assert_eq!(ni.sent_stats.as_ref().unwrap().get, 2);
    assert_eq!(ni.health_stats.as_ref().unwrap().health_value, 1000);
    assert_eq!(ni.health_stats.as_ref().unwrap().next_ping, Some(0));
    assert_eq!(
        ni.tunables,
        Some(NiTunables {
            peer_timeout: 180,
            peer_credits: 8,
            peer_buffer_credits: 0,
            credits: 256
        })
    );
    let lnd = ni.lnd_tunables.as_ref().unwrap();
    assert_eq!(lnd.map_on_demand, Some(true));
    assert_eq!(lnd.ntx, Some(512));
    assert_eq!(lnd.conns_per_peer, Some(1));
    assert_eq!(lnd.timeout, Some(50));
    assert_eq!(lnd.tos, Some(-1));
    assert_eq!(ni.cpt, Some(Cpts(vec![0])));
    assert_eq!(c.peers.len(), 2);
    let p = &c.peers[0];
    assert_eq!(p.primary_nid, nid("10.0.0.2@o2ib"));
    assert!(!p.multi_rail);
    assert_eq!(p.peer_state, Some(0));
    assert_eq!(p.peer_nis[0].state, Some(PeerNiState::NotApplicable));
    assert_eq!(p.peer_nis[0].credits.as_ref().unwrap().min_tx_credits, 7);
    let h = p.peer_nis[0].health_stats.as_ref().unwrap();
    assert_eq!((h.health_value, h.network_timeout), (1000, 0));
    assert!(c.routes.is_empty() && c.routing.is_none() && c.udsp.is_empty());
    assert_eq!(
        c.global,
        Some(Global::from_tunables(&Tunables::default())),
        "the master defaults"
    );
    assert_eq!(validate(&c), Ok(()));
}

#[test]
fn export_backup_values() {
    let c = parse(EXPORT_BACKUP).unwrap();
    let tcp = &c.nets[0];
    assert_eq!(tcp.net_type, net("tcp"));
    let ni = &tcp.local_nis[0];
    assert_eq!((ni.nid, ni.status, ni.dev_cpt), (None, None, None));
    assert_eq!(ni.interfaces, ["veth0"]);
    assert_eq!(
        ni.lnd_tunables,
        Some(LndTunables {
            conns_per_peer: Some(2),
            tos: Some(-1),
            ..LndTunables::default()
        })
    );
    assert_eq!(
        c.nets[1].local_nis[0]
            .lnd_tunables
            .as_ref()
            .unwrap()
            .timeout,
        None
    );
    assert_eq!(
        c.routes,
        [
            Route {
                net: net("tcp5"),
                gateway: nid("10.0.0.9@tcp"),
                hop: Some(2),
                priority: Some(1),
                health_sensitivity: None,
                state: None,
                route_type: None,
            },
            Route {
                net: net("o2ib7"),
                gateway: nid("10.0.0.8@o2ib"),
                hop: Some(HOP_UNDEFINED),
                priority: Some(0),
                health_sensitivity: None,
                state: None,
                route_type: None,
            }
        ]
    );
    assert_eq!(
        c.peers[1],
        Peer {
            primary_nid: nid("10.0.0.8@o2ib"),
            multi_rail: false,
            peer_state: None,
            peer_nis: vec![PeerNi::new(nid("10.0.0.8@o2ib"))],
        }
    );
    assert_eq!(
        c.routing,
        Some(Routing {
            enable: RoutingState::Starting,
            cpts: vec![]
        })
    );
    assert_eq!(
        c.buffers,
        Some(Buffers {
            tiny: Some(2048),
            small: Some(16384),
            large: Some(1024)
        })
    );
    assert_eq!(validate(&c), Ok(()));
    let t = c.tunables().unwrap();
    assert!(t.routing(), "enable: 3 (starting) imports as routing on");
    assert_eq!(t.get(TunableName::SmallBuffers), 16384);
    assert_eq!(t, {
        let mut d = Tunables::default();
        d.set(TunableName::Routing, 1).unwrap();
        d.set(TunableName::TinyBuffers, 2048).unwrap();
        d.set(TunableName::SmallBuffers, 16384).unwrap();
        d.set(TunableName::LargeBuffers, 1024).unwrap();
        d
    });
}

#[test]
fn route_show_and_routing_show_values() {
    let c = parse(include_str!(
        "../../tests/fixtures/lnetctl/kernel-2.17.57/route-show-v.yaml"
    ))
    .unwrap();
    assert_eq!(c.routes[0].state, Some(RouteState::Down));
    assert_eq!(c.routes[1].route_type, Some(RouteType::MultiHop));
    let c = parse(include_str!(
        "../../tests/fixtures/lnetctl/kernel-2.17.57/routing-show-enabled.yaml"
    ))
    .unwrap();
    let r = c.routing.unwrap();
    assert_eq!(r.enable, RoutingState::Starting);
    assert_eq!(r.cpts.len(), 1);
    assert_eq!(r.cpts[0].large.npages, 256);
    assert_eq!(r.cpts[0].small.mincredits, 16384);
}

#[test]
fn empty_document_is_an_empty_config() {
    assert_eq!(parse(""), Ok(Config::default()));
    assert_eq!(parse("# nothing\n---\n"), Ok(Config::default()));
    assert_eq!(Config::default().to_yaml(), "");
}

// ---- lnet-router: ----

#[test]
fn lnet_router_section_router_checker_and_net_check_keys() {
    let text = "lnet-router:\n    alive_router_check_interval: 5\n    router_ping_timeout: 2\n    \
                avoid_asym_router_failure: 1\n    check_routers_before_use: 0\n    \
                net_check: passive\n    net_probe_interval_ms: 250\n    net_down_after_ms: 900\n";
    let c = parse(text).unwrap();
    let r = c.router.clone().unwrap();
    assert_eq!(r.alive_router_check_interval, Some(5));
    assert_eq!(r.router_ping_timeout, Some(2));
    assert_eq!(r.avoid_asym_router_failure, Some(1));
    assert_eq!(r.check_routers_before_use, Some(0));
    assert_eq!(r.net_check, Some(crate::config::NetCheckSetting::Passive));
    assert_eq!(r.net_probe_interval_ms, Some(250));
    assert_eq!(r.net_down_after_ms, Some(900));
    assert_eq!(c.to_yaml(), text);
    let e = parse("lnet-router:\n    net_check: sometimes\n").unwrap_err();
    assert!(
        matches!(&e, ConfigError::InvalidValue { field, at, .. }
            if field == "lnet-router.net_check" && at.line == 2),
        "{e:?}"
    );
}

#[test]
fn lnet_router_section() {
    let text = "lnet-router:\n    acceptor_address: 192.168.1.10\n    acceptor_port: 7988\n";
    let c = parse(text).unwrap();
    let r = c.router.clone().unwrap();
    assert_eq!(
        r.acceptor_address,
        Some(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10)))
    );
    assert_eq!(r.acceptor_port, Some(7988));
    assert_eq!(r.acceptor_port_or_default(), 7988);
    assert_eq!(c.to_yaml(), text);

    // After the lnetctl sections, in cYAML layout.
    let mut full = parse(EXPORT_BACKUP).unwrap();
    full.router = Some(RouterSection {
        acceptor_address: Some("::".parse().unwrap()),
        ..RouterSection::default()
    });
    let printed = full.to_yaml();
    assert!(printed.starts_with(EXPORT_BACKUP));
    assert_eq!(
        &printed[EXPORT_BACKUP.len()..],
        "lnet-router:\n    acceptor_address: \"::\"\n"
    );
    assert_eq!(parse(&printed), Ok(full));
    assert_eq!(RouterSection::default().acceptor_port_or_default(), 988);

    let e = parse("lnet-router:\n    acceptor_address: nowhere\n").unwrap_err();
    assert!(
        matches!(&e, ConfigError::InvalidValue { field, at, .. }
            if field == "lnet-router.acceptor_address" && at.line == 2),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "line 2, column 23: lnet-router.acceptor_address: invalid value \"nowhere\": \
         expected an IPv4 or IPv6 address"
    );
    let e = parse("lnet-router:\n    api: 1\n").unwrap_err();
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, .. } if key == "api"),
        "{e:?}"
    );
    let e = parse("lnet-router:\n    acceptor_port: 70000\n").unwrap_err();
    assert!(
        matches!(e, ConfigError::WrongType { at, .. } if at.line == 2),
        "{e:?}"
    );
}

// ---- parse errors: one test per kind, each with its key/field and position ----

fn err(text: &str) -> (ConfigError, String) {
    let e = parse(text).unwrap_err();
    let msg = e.to_string();
    (e, msg)
}

#[test]
fn error_syntax() {
    let (e, msg) = err("net: [\n");
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
    assert_eq!(msg, "line 1, column 6: YAML error: unclosed bracket '['");
    let (e, _) = err("net:\n-     net type: tcp\n   bad indent: 1\n");
    assert!(e.position().line >= 2, "{e:?}");
}

#[test]
fn error_unknown_key_everywhere() {
    for (text, key, line) in [
        ("bogus: 1\n", "bogus", 1),
        ("net:\n-     net type: tcp\n      bogus: 1\n", "bogus", 3),
        (
            "net:\n-     net type: tcp\n      local NI(s):\n      -     nid: 1.2.3.4@tcp\n            speed: 9\n",
            "speed",
            5,
        ),
        (
            "net:\n-     net type: tcp\n      local NI(s):\n      -     tunables:\n                  peer_timeout: 1\n                  peer_credits: 1\n                  peer_buffer_credits: 0\n                  credits: 1\n                  extra: 1\n",
            "extra",
            9,
        ),
        ("route:\n-     net: tcp5\n      gateway: 1.2.3.4@tcp\n      weight: 1\n", "weight", 4),
        ("peer:\n-     primary nid: 1.2.3.4@tcp\n      Multi-Rail: true\n      x: 1\n", "x", 4),
        ("global:\n    numa_range: 0\n    speed: 1\n", "speed", 3),
        ("buffers:\n    huge: 1\n", "huge", 2),
        ("routing:\n    nope: 7\n", "nope", 2),
        ("udsp:\n    - idx: 0\n      via: tcp\n", "via", 3),
    ] {
        let (e, msg) = err(text);
        match &e {
            ConfigError::UnknownKey { key: k, at, .. } => {
                assert_eq!((k.as_str(), at.line), (key, line), "{text}");
            }
            other => panic!("{text}: {other:?}"),
        }
        assert!(msg.contains(&format!("line {line},")) && msg.contains(key), "{msg}");
    }
}

#[test]
fn error_missing_key() {
    // The parser reports a missing key where the mapping that lacks it ends.
    let (e, msg) = err("route:\n-     net: tcp5\n      hop: 1\n");
    assert!(
        matches!(&e, ConfigError::MissingKey { key, at } if key == "gateway" && at.line == 3),
        "{e:?}"
    );
    assert!(
        msg.contains("missing key `gateway`") && msg.starts_with("line 3"),
        "{msg}"
    );
    let (e, _) = err("net:\n-     local NI(s): []\n");
    assert!(
        matches!(&e, ConfigError::MissingKey { key, .. } if key == "net type"),
        "{e:?}"
    );
    // Grouped counters: all or none.
    let (e, msg) = err(
        "peer:\n-     primary nid: 1.2.3.4@tcp\n      peer ni:\n      -     nid: 1.2.3.4@tcp\n            refcount: 1\n",
    );
    assert!(
        matches!(&e, ConfigError::MissingKey { key, at }
            if key == "peer[0].peer ni[0].max_ni_tx_credits" && at.line == 4),
        "{e:?}"
    );
    assert!(msg.starts_with("line 4"), "{msg}");
    let (e, _) = err(
        "net:\n-     net type: tcp\n      local NI(s):\n      -     statistics:\n                  send_count: 1\n                  recv_count: 1\n                  drop_count: 0\n                  get_rtt_samples: 1\n",
    );
    assert!(
        matches!(&e, ConfigError::MissingKey { key, .. }
            if key == "net[0].local NI(s)[0].statistics.put_egress_samples"),
        "{e:?}"
    );
    let (e, _) = err("routing:\n    - cpt[0]:\n          tiny: {npages: 0, nbuffers: 1, credits: 1, mincredits: 1}\n          small: {npages: 1, nbuffers: 1, credits: 1, mincredits: 1}\n          large: {npages: 256, nbuffers: 1, credits: 1, mincredits: 1}\n");
    assert!(
        matches!(&e, ConfigError::MissingKey { key, .. } if key == "enable"),
        "{e:?}"
    );
}

#[test]
fn error_duplicate_key() {
    let (e, msg) = err("global:\n    retry_count: 1\n    retry_count: 2\n");
    assert!(
        matches!(&e, ConfigError::DuplicateKey { key, at } if key == "retry_count" && at.line == 3),
        "{e:?}"
    );
    assert!(
        msg.starts_with("line 3, column 5: duplicate key `retry_count`"),
        "{msg}"
    );
}

#[test]
fn error_wrong_type() {
    let (e, msg) = err("route:\n-     net: tcp5\n      gateway: 1.2.3.4@tcp\n      hop: x\n");
    assert!(
        matches!(e, ConfigError::WrongType { at, .. } if at.line == 4),
        "{e:?}"
    );
    assert!(msg.starts_with("line 4"), "{msg}");
    let (e, _) = err("net: tcp\n");
    assert!(
        matches!(e, ConfigError::WrongType { at, .. } if at.line == 1),
        "{e:?}"
    );
    let (e, _) = err("routing:\n    enable: 7\n");
    assert!(
        matches!(e, ConfigError::WrongType { at, .. } if at.line == 2),
        "{e:?}"
    );
    let (e, _) = err("peer:\n-     primary nid: 1.2.3.4@tcp\n      Multi-Rail: maybe\n");
    assert!(
        matches!(e, ConfigError::WrongType { at, .. } if at.line == 3),
        "{e:?}"
    );
}

#[test]
fn error_invalid_nid_names_field_and_line() {
    for (text, field, line) in [
        ("route:\n-     net: tcp5\n      gateway: 10.0.0.300@tcp\n", "route[0].gateway", 3),
        ("peer:\n-     primary nid: 1.2.3.4@nonet\n", "peer[0].primary nid", 2),
        (
            "peer:\n-     primary nid: 1.2.3.4@tcp\n      peer ni:\n      -     nid: 1.2.3.4@tcp\n      -     nid: x@o2ib\n",
            "peer[0].peer ni[1].nid",
            5,
        ),
        (
            "net:\n-     net type: tcp\n      local NI(s):\n      -     nid: 1.2.3@tcp\n",
            "net[0].local NI(s)[0].nid",
            4,
        ),
    ] {
        let (e, msg) = err(text);
        match &e {
            ConfigError::InvalidNid { field: f, at, .. } => {
                assert_eq!((f.as_str(), at.line), (field, line), "{text}")
            }
            other => panic!("{text}: {other:?}"),
        }
        assert!(msg.starts_with(&format!("line {line},")) && msg.contains(field), "{msg}");
    }
}

#[test]
fn error_invalid_net_names_field_and_line() {
    let (e, msg) = err("route:\n-     net: tcp99999\n      gateway: 1.2.3.4@tcp\n");
    assert!(
        matches!(&e, ConfigError::InvalidNet { field, at, source, .. }
            if field == "route[0].net" && at.line == 2 && at.column == 12
                && matches!(**source, NidError::NetNumberOutOfRange { value: 99999, .. })),
        "{e:?}"
    );
    assert_eq!(
        msg,
        "line 2, column 12: route[0].net: invalid net \"tcp99999\": network number 99999 in \
         \"tcp99999\" is out of range (0..=65535)"
    );
    let (e, _) = err("net:\n-     net type: ethernet\n");
    assert!(
        matches!(&e, ConfigError::InvalidNet { field, .. } if field == "net[0].net type"),
        "{e:?}"
    );
}

#[test]
fn error_invalid_value() {
    for (text, field, line) in [
        (
            "net:\n-     net type: tcp\n      local NI(s):\n      -     status: sideways\n",
            "net[0].local NI(s)[0].status",
            4,
        ),
        (
            "net:\n-     net type: tcp\n      local NI(s):\n      -     CPT: \"[0,x]\"\n",
            "net[0].local NI(s)[0].CPT",
            4,
        ),
        (
            "net:\n-     net type: tcp\n      local NI(s):\n      -     interfaces:\n                  1: eth1\n",
            "net[0].local NI(s)[0].interfaces",
            5,
        ),
        ("route:\n-     net: tcp5\n      gateway: 1.2.3.4@tcp\n      state: sideways\n", "route[0].state", 4),
        ("route:\n-     net: tcp5\n      gateway: 1.2.3.4@tcp\n      type: 3-hop\n", "route[0].type", 4),
        (
            "peer:\n-     primary nid: 1.2.3.4@tcp\n      peer ni:\n      -     nid: 1.2.3.4@tcp\n            state: maybe\n",
            "peer[0].peer ni[0].state",
            5,
        ),
        ("udsp:\n    - idx: 0\n      priority: 1\n      action:\n          priority: 2\n", "udsp[0].priority", 3),
        ("global:\n    lnd_timeout: -1\n", "global.lnd_timeout", 2),
    ] {
        let (e, msg) = err(text);
        match &e {
            ConfigError::InvalidValue { field: f, at, .. } => {
                assert_eq!((f.as_str(), at.line), (field, line), "{text}")
            }
            other => panic!("{text}: {other:?}"),
        }
        assert!(msg.starts_with(&format!("line {line},")) && msg.contains(field), "{msg}");
    }
}

#[test]
fn error_tunable_out_of_range_uses_tunables_errors() {
    for (key, value, min, max) in [
        ("health_sensitivity", 1001, 0, 1000),
        ("discovery", 2, 0, 1),
        ("drop_asym_route", -1, 0, 1),
        ("router_sensitivity", 101, 0, 100),
        ("response_tracking", 4, 0, 3),
        ("max_recovery_ping_interval", 0, 1, i64::from(u32::MAX)),
        ("transaction_timeout", 0, 1, i64::from(u32::MAX)),
        ("retry_count", -1, 0, i64::from(u32::MAX)),
        ("numa_range", -3, 0, i64::from(u32::MAX)),
        ("recovery_limit", 1 << 40, 0, i64::from(u32::MAX)),
    ] {
        let text = format!("global:\n    lnd_timeout: 49\n    {key}: {value}\n");
        let (e, msg) = err(&text);
        let name: TunableName = key.parse().unwrap();
        assert_eq!(
            e,
            ConfigError::Tunable {
                field: format!("global.{key}"),
                source: TunableError::OutOfRange {
                    name,
                    value,
                    min,
                    max
                },
                at: Position {
                    line: 3,
                    column: u64::try_from(key.len()).unwrap() + 7
                },
            }
        );
        assert!(msg.starts_with("line 3,") && msg.contains(key), "{msg}");
    }
    // max_intf is lnetctl's alias of max_interfaces.
    let c = parse("global:\n    max_intf: 200\n").unwrap();
    assert_eq!(c.global.unwrap().max_interfaces, Some(200));
}

// ---- validation ----

fn base() -> Config {
    parse(EXPORT_BACKUP).unwrap()
}

/// The single error `validate` finds; its message starts with the field it names.
fn one_error(c: &Config) -> ValidationError {
    let errors = validate(c).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors.into_iter().next().unwrap();
    assert!(
        e.to_string().starts_with(&format!("{}: ", e.field())),
        "{e}"
    );
    e
}

#[test]
fn validation_reports_every_problem_in_document_order() {
    let mut c = base();
    c.routes[0].hop = Some(0);
    c.routes[1].net = net("tcp");
    c.peers[1].primary_nid = nid("10.0.0.9@tcp");
    let fields: Vec<String> = validate(&c)
        .unwrap_err()
        .iter()
        .map(|e| e.field().to_owned())
        .collect();
    assert_eq!(
        fields,
        ["route[0].hop", "route[1].net", "peer[1].primary nid"]
    );
}

#[test]
fn cfg_080_snd_065_duplicate_nid_in_two_peers() {
    let mut c = base();
    c.peers[1].peer_nis.push(PeerNi::new(nid("10.0.0.9@tcp")));
    let e = one_error(&c);
    assert_eq!(
        e,
        ValidationError::DuplicatePeerNid {
            field: "peer[1].peer ni[1].nid".into(),
            nid: nid("10.0.0.9@tcp"),
            first_field: "peer[0].primary nid".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "peer[1].peer ni[1].nid: NID 10.0.0.9@tcp is already configured at peer[0].primary nid"
    );
    // Twice within one peer is refused too; the primary listed once as a peer NI is not.
    let mut c = base();
    c.peers[0].peer_nis.push(PeerNi::new(nid("10.0.0.9@tcp")));
    assert!(
        matches!(one_error(&c), ValidationError::DuplicatePeerNid { field, .. } if field == "peer[0].peer ni[1].nid")
    );
    // A multi-rail peer with NIDs on two nets is fine.
    let mut c = base();
    c.peers[0].multi_rail = true;
    c.peers[0].peer_nis.push(PeerNi::new(nid("10.0.0.9@o2ib")));
    assert_eq!(validate(&c), Ok(()));
}

#[test]
fn route_checks() {
    let mut c = base();
    c.routes[0].net = net("o2ib");
    assert_eq!(
        one_error(&c),
        ValidationError::RouteToLocalNet {
            field: "route[0].net".into(),
            net: net("o2ib")
        }
    );
    let mut c = base();
    c.routes[0].gateway = nid("10.0.0.9@tcp3");
    let e = one_error(&c);
    assert_eq!(
        e,
        ValidationError::GatewayNotOnLocalNet {
            field: "route[0].gateway".into(),
            gateway: nid("10.0.0.9@tcp3")
        }
    );
    assert_eq!(
        e.to_string(),
        "route[0].gateway: gateway 10.0.0.9@tcp3 is not on a local net"
    );
    let mut c = base();
    c.routes[1].gateway = nid("10.0.0.8@o2ib7");
    assert!(
        matches!(one_error(&c), ValidationError::GatewayOnRouteNet { field, .. } if field == "route[1].gateway")
    );
    let mut c = base();
    let dup = c.routes[0].clone();
    c.routes.push(dup);
    assert!(
        matches!(one_error(&c), ValidationError::DuplicateRoute { field, first_field, .. }
        if field == "route[2].gateway" && first_field == "route[0].gateway")
    );
    for (hop, ok) in [
        (-1, true),
        (1, true),
        (255, true),
        (0, false),
        (256, false),
        (-2, false),
    ] {
        let mut c = base();
        c.routes[0].hop = Some(hop);
        if ok {
            assert_eq!(validate(&c), Ok(()), "{hop}");
        } else {
            let e = one_error(&c);
            assert_eq!(
                e,
                ValidationError::HopOutOfRange {
                    field: "route[0].hop".into(),
                    hop
                }
            );
            assert!(e.to_string().starts_with("route[0].hop: hop"), "{e}");
        }
    }
    let mut c = base();
    c.routes[0].health_sensitivity = Some(1001);
    assert!(matches!(
        one_error(&c),
        ValidationError::HealthSensitivityOutOfRange { value: 1001, .. }
    ));
}

#[test]
fn net_checks() {
    let mut c = base();
    let dup = c.nets[0].clone();
    c.nets.push(dup);
    assert!(
        matches!(one_error(&c), ValidationError::DuplicateNet { field, first_field, .. }
        if field == "net[2].net type" && first_field == "net[0].net type")
    );
    let mut c = base();
    c.nets[0].local_nis[0].nid = Some(nid("10.0.0.1@o2ib"));
    assert!(
        matches!(one_error(&c), ValidationError::NidNotOnNet { field, .. } if field == "net[0].local NI(s)[0].nid")
    );
    let mut c = base();
    c.nets[0].local_nis[0].nid = Some(nid("10.0.0.1@tcp"));
    let mut second = c.nets[0].local_nis[0].clone();
    second.interfaces = vec!["veth2".into()];
    c.nets[0].local_nis.push(second);
    assert!(
        matches!(one_error(&c), ValidationError::DuplicateLocalNid { field, .. } if field == "net[0].local NI(s)[1].nid")
    );
}

#[test]
fn tunable_checks() {
    // Each value in range, but together refused (reference 2.10).
    let mut c = base();
    let g = c.global.as_mut().unwrap();
    g.retry_count = Some(200);
    assert_eq!(
        one_error(&c),
        ValidationError::Tunable {
            field: "global.retry_count".into(),
            source: TunableError::RetryCountAboveTransactionTimeout {
                retry_count: 200,
                transaction_timeout: 150
            }
        }
    );
    let mut c = base();
    let g = c.global.as_mut().unwrap();
    g.health_sensitivity = Some(0);
    assert!(matches!(
        one_error(&c),
        ValidationError::Tunable {
            source: TunableError::RetriesNeedHealth { retry_count: 2 },
            ..
        }
    ));
    // Raising both together is fine whatever the key order.
    let mut c = base();
    let g = c.global.as_mut().unwrap();
    g.retry_count = Some(200);
    g.transaction_timeout = Some(300);
    assert_eq!(validate(&c), Ok(()));
    assert_eq!(c.tunables().unwrap().retry_count(), 200);
    // A timeout that is not above the retry count is refused.
    let mut c = base();
    c.global.as_mut().unwrap().transaction_timeout = Some(2);
    assert!(
        matches!(one_error(&c), ValidationError::Tunable { field, source: TunableError::TransactionTimeoutNotAboveRetryCount { .. } } if field == "global.transaction_timeout")
    );
    // Built by hand (parse would refuse it): the single range is checked too.
    let mut c = base();
    c.global.as_mut().unwrap().router_sensitivity = Some(101);
    let e = one_error(&c);
    assert!(
        matches!(&e, ValidationError::Tunable { field, source: TunableError::OutOfRange { .. } } if field == "global.router_sensitivity"),
        "{e:?}"
    );
    let mut c = base();
    c.router = Some(RouterSection {
        acceptor_port: Some(0),
        ..RouterSection::default()
    });
    assert_eq!(
        one_error(&c),
        ValidationError::AcceptorPortZero {
            field: "lnet-router.acceptor_port".into()
        }
    );
}

#[test]
fn global_from_default_tunables_prints_global_show() {
    let c = Config {
        global: Some(Global::from_tunables(&Tunables::default())),
        ..Config::default()
    };
    assert_eq!(
        c.to_yaml(),
        include_str!("../../tests/fixtures/lnetctl/kernel-2.17.57/global-show.yaml")
    );
}

#[test]
fn routing_show_form_errors_have_positions() {
    let text = "routing:\n    - cpt[1]:\n          tiny: {npages: 0, nbuffers: 1, credits: 1, mincredits: 1}\n          small: {npages: 1, nbuffers: 1, credits: 1, mincredits: 1}\n          large: {npages: 256, nbuffers: 1, credits: 1, mincredits: 1}\n    - enable: 1\n";
    let (e, msg) = err(text);
    assert!(e.position().line >= 2, "{e:?}");
    assert!(msg.contains("cpt[1] out of order"), "{msg}");
    let (e, _) = err("routing:\n    - cpu[0]: {}\n    - enable: 1\n");
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, at, .. } if key == "cpu[0]" && at.line == 2),
        "{e:?}"
    );
    let (e, _) = err("routing:\n    - enable: 1\n    - enable: 1\n");
    assert!(e.position().line >= 2, "{e:?}");
}

#[test]
fn udsp_both_forms() {
    let show = "udsp:\n    - idx: 0\n      src: o2ib1\n      action:\n          priority: 1\n    - idx: 1\n      dst: \"[1-3]@o2ib\"\n      rte: 10.0.0.[1-20]@tcp\n";
    let c = parse(show).unwrap();
    assert_eq!(c.udsp[0].priority, Some(1));
    assert_eq!(c.udsp[1].dst.as_deref(), Some("[1-3]@o2ib"));
    assert_eq!(c.to_yaml(), show);
    let import = "udsp:\n    - idx: 0\n      src: o2ib1\n      priority: 1\n";
    assert_eq!(parse(import).unwrap().udsp[0], c.udsp[0]);
}

// ---- round trip ----

fn arb_net() -> impl Strategy<Value = Net> {
    (
        prop_oneof![
            Just(LndType::SOCKLND),
            Just(LndType::O2IBLND),
            Just(LndType::GNILND)
        ],
        prop_oneof![Just(0u16), 1u16..20, any::<u16>()],
    )
        .prop_map(|(lnd, num)| Net::new(lnd, num))
}

fn arb_nid() -> impl Strategy<Value = Nid> {
    (
        arb_net(),
        prop_oneof![
            4 => any::<u32>().prop_map(NidAddr::V4),
            1 => any::<[u8; 16]>().prop_map(NidAddr::V6),
        ],
    )
        .prop_map(|(net, addr)| match (net.lnd, addr) {
            // Numbered LNDs have no IPv6 form.
            (LndType::GNILND, NidAddr::V6(_)) => Nid::new(net, 7),
            _ => Nid { net, addr },
        })
}

fn arb_msg() -> impl Strategy<Value = Option<MsgStats>> {
    proptest::option::of(
        any::<[u32; 5]>().prop_map(|[put, get, reply, ack, hello]| MsgStats {
            put,
            get,
            reply,
            ack,
            hello,
        }),
    )
}

fn arb_stats() -> impl Strategy<Value = Option<NiStatistics>> {
    proptest::option::of(
        (
            any::<[u32; 3]>(),
            proptest::option::of((any::<[u32; 3]>(), any::<[u64; 9]>())),
        )
            .prop_map(|([send_count, recv_count, drop_count], lat)| NiStatistics {
                send_count,
                recv_count,
                drop_count,
                latency: lat.map(|(s, b)| LatencyStats {
                    put_egress_samples: s[0],
                    put_egress_min_nsec: b[0],
                    put_egress_max_nsec: b[1],
                    put_egress_avg_nsec: b[2],
                    get_rtt_samples: s[1],
                    get_rtt_min_nsec: b[3],
                    get_rtt_max_nsec: b[4],
                    get_rtt_avg_nsec: b[5],
                    put_ack_samples: s[2],
                    put_ack_min_nsec: b[6],
                    put_ack_max_nsec: b[7],
                    put_ack_avg_nsec: b[8],
                }),
            }),
    )
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9]{0,7}",
        "[a-z0-9][a-z0-9._:-]{0,8}",
        "[ -~]{0,10}",
        "\\PC{0,10}",
        "(true|no|null|~|-1|0x1f|1e3|\\.5|- a|a: b|a #b|'x|\"x|\\\\)",
    ]
}

fn arb_local_ni() -> impl Strategy<Value = LocalNi> {
    let ids = (
        proptest::option::of(arb_nid()),
        proptest::option::of(prop_oneof![Just(NiStatus::Up), Just(NiStatus::Down)]),
        proptest::collection::vec(arb_name(), 0..3),
        proptest::option::of(any::<i32>()),
        proptest::option::of(proptest::collection::vec(0u32..64, 0..4).prop_map(Cpts)),
    );
    let counters = (
        arb_stats(),
        arb_msg(),
        arb_msg(),
        arb_msg(),
        proptest::option::of(
            (
                any::<[i32; 2]>(),
                any::<[u32; 6]>(),
                any::<Option<u32>>(),
                any::<Option<u64>>(),
            )
                .prop_map(|(a, b, ping_count, next_ping)| NiHealthStats {
                    fatal_error: a[0],
                    health_value: a[1],
                    interrupts: b[0],
                    dropped: b[1],
                    aborted: b[2],
                    no_route: b[3],
                    timeouts: b[4],
                    error: b[5],
                    ping_count,
                    next_ping,
                }),
        ),
    );
    let tunables = (
        proptest::option::of(any::<[i32; 4]>().prop_map(|t| NiTunables {
            peer_timeout: t[0],
            peer_credits: t[1],
            peer_buffer_credits: t[2],
            credits: t[3],
        })),
        proptest::option::of(
            (
                any::<[Option<u32>; 6]>(),
                any::<Option<bool>>(),
                any::<[Option<u16>; 2]>(),
                any::<Option<i16>>(),
            )
                .prop_map(|(u, map_on_demand, s, tos)| LndTunables {
                    peercredits_hiw: u[0],
                    concurrent_sends: u[1],
                    map_on_demand,
                    fmr_pool_size: u[2],
                    fmr_flush_trigger: u[3],
                    fmr_cache: u[4],
                    ntx: s[0],
                    conns_per_peer: s[1],
                    timeout: u[5],
                    tos,
                }),
        ),
    );
    (ids, counters, tunables).prop_map(
        |(
            (nid, status, interfaces, dev_cpt, cpt),
            (statistics, sent_stats, received_stats, dropped_stats, health_stats),
            (tunables, lnd_tunables),
        )| LocalNi {
            nid,
            status,
            interfaces,
            statistics,
            sent_stats,
            received_stats,
            dropped_stats,
            health_stats,
            tunables,
            lnd_tunables,
            dev_cpt,
            cpt,
        },
    )
}

fn arb_peer_ni() -> impl Strategy<Value = PeerNi> {
    (
        arb_nid(),
        proptest::option::of(prop_oneof![
            Just(PeerNiState::Up),
            Just(PeerNiState::Down),
            Just(PeerNiState::NotApplicable)
        ]),
        proptest::option::of(any::<[u32; 7]>().prop_map(|c| PeerNiCredits {
            max_ni_tx_credits: c[0],
            available_tx_credits: c[1],
            min_tx_credits: c[2],
            tx_q_num_of_buf: c[3],
            available_rtr_credits: c[4],
            min_rtr_credits: c[5],
            refcount: c[6],
        })),
        arb_stats(),
        (arb_msg(), arb_msg(), arb_msg()),
        proptest::option::of(
            (
                any::<i32>(),
                any::<[u32; 4]>(),
                any::<Option<u32>>(),
                any::<Option<i64>>(),
            )
                .prop_map(|(health_value, c, ping_count, next_ping)| {
                    PeerNiHealthStats {
                        health_value,
                        dropped: c[0],
                        timeout: c[1],
                        error: c[2],
                        network_timeout: c[3],
                        ping_count,
                        next_ping,
                    }
                }),
        ),
    )
        .prop_map(
            |(
                nid,
                state,
                credits,
                statistics,
                (sent_stats, received_stats, dropped_stats),
                health_stats,
            )| {
                PeerNi {
                    nid,
                    state,
                    credits,
                    statistics,
                    sent_stats,
                    received_stats,
                    dropped_stats,
                    health_stats,
                }
            },
        )
}

fn arb_route() -> impl Strategy<Value = Route> {
    (
        arb_net(),
        arb_nid(),
        proptest::option::of(prop_oneof![Just(-1i64), 1i64..=255, any::<i64>()]),
        any::<[Option<u32>; 2]>(),
        proptest::option::of(prop_oneof![Just(RouteState::Up), Just(RouteState::Down)]),
        proptest::option::of(prop_oneof![
            Just(RouteType::SingleHop),
            Just(RouteType::MultiHop)
        ]),
    )
        .prop_map(
            |(net, gateway, hop, [priority, health_sensitivity], state, route_type)| Route {
                net,
                gateway,
                hop,
                priority,
                health_sensitivity,
                state,
                route_type,
            },
        )
}

fn arb_global() -> impl Strategy<Value = Global> {
    let u = || proptest::option::of(any::<u32>());
    (
        (
            u(),
            u(),
            proptest::option::of(0u32..=1),
            proptest::option::of(0u32..=1),
            u(),
            proptest::option::of(1u32..),
        ),
        (
            proptest::option::of(0u32..=1000),
            u(),
            proptest::option::of(0u32..=100),
            u(),
            proptest::option::of(0u32..=3),
            u(),
            proptest::option::of(1u32..),
        ),
    )
        .prop_map(|((a, b, c, d, e, f), (g, h, i, j, k, l, m))| Global {
            numa_range: a,
            max_interfaces: b,
            discovery: c,
            drop_asym_route: d,
            retry_count: e,
            transaction_timeout: f,
            health_sensitivity: g,
            recovery_interval: h,
            router_sensitivity: i,
            lnd_timeout: j,
            response_tracking: k,
            recovery_limit: l,
            max_recovery_ping_interval: m,
        })
}

fn arb_pool() -> impl Strategy<Value = BufferPool> {
    (any::<u32>(), any::<u32>(), any::<i32>(), any::<i32>()).prop_map(
        |(npages, nbuffers, credits, mincredits)| BufferPool {
            npages,
            nbuffers,
            credits,
            mincredits,
        },
    )
}

fn arb_config() -> impl Strategy<Value = Config> {
    let nets = proptest::collection::vec(
        (arb_net(), proptest::collection::vec(arb_local_ni(), 0..3)).prop_map(
            |(net_type, local_nis)| NetConfig {
                net_type,
                local_nis,
            },
        ),
        0..4,
    );
    let peers = proptest::collection::vec(
        (
            arb_nid(),
            any::<bool>(),
            any::<Option<u32>>(),
            proptest::collection::vec(arb_peer_ni(), 0..4),
        )
            .prop_map(|(primary_nid, multi_rail, peer_state, peer_nis)| Peer {
                primary_nid,
                multi_rail,
                peer_state,
                peer_nis,
            }),
        0..4,
    );
    let routing =
        proptest::option::of(
            (
                prop_oneof![
                    Just(RoutingState::Disabled),
                    Just(RoutingState::Enabled),
                    Just(RoutingState::Stopping),
                    Just(RoutingState::Starting)
                ],
                proptest::collection::vec(
                    (arb_pool(), arb_pool(), arb_pool())
                        .prop_map(|(tiny, small, large)| CptBuffers { tiny, small, large }),
                    0..3,
                ),
            )
                .prop_map(|(enable, cpts)| Routing { enable, cpts }),
        );
    let buffers = proptest::option::of(
        any::<[Option<u32>; 3]>().prop_map(|[tiny, small, large]| Buffers { tiny, small, large }),
    );
    let udsp = proptest::collection::vec(
        (
            any::<Option<u32>>(),
            proptest::option::of(arb_name()),
            proptest::option::of(arb_name()),
            proptest::option::of(arb_name()),
            any::<Option<u32>>(),
        )
            .prop_map(|(idx, src, dst, rte, priority)| UdspRule {
                idx,
                src,
                dst,
                rte,
                priority,
            }),
        0..3,
    );
    let router = proptest::option::of(
        (proptest::option::of(any::<IpAddr>()), any::<Option<u16>>()).prop_map(
            |(acceptor_address, acceptor_port)| RouterSection {
                acceptor_address,
                acceptor_port,
                ..RouterSection::default()
            },
        ),
    );
    (
        nets,
        proptest::collection::vec(arb_route(), 0..4),
        peers,
        routing,
        buffers,
        proptest::option::of(arb_global()),
        udsp,
        router,
    )
        .prop_map(
            |(nets, routes, peers, routing, buffers, global, udsp, router)| Config {
                nets,
                routes,
                peers,
                routing,
                buffers,
                global,
                udsp,
                router,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip(c in arb_config()) {
        let printed = c.to_yaml();
        let back = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(&back, &c, "{}", printed);
        prop_assert_eq!(back.to_yaml(), printed);
    }
}

/// A configuration that `validate` accepts: distinct local nets with NIs on them, routes to
/// remote nets through gateways on local nets, multi-rail peers with distinct NIDs.
fn arb_valid_config() -> impl Strategy<Value = Config> {
    let local = proptest::collection::btree_set(
        (
            prop_oneof![Just(LndType::SOCKLND), Just(LndType::O2IBLND)],
            0u16..10,
        ),
        1..4,
    );
    (local, 0usize..5, 0usize..4, arb_global(), any::<u32>())
        .prop_flat_map(|(local, n_routes, n_peers, global, seed)| {
            let nets: Vec<Net> = local.into_iter().map(|(l, n)| Net::new(l, n)).collect();
            let n = nets.len();
            (
                Just(nets),
                proptest::collection::vec(
                    (
                        0..n,
                        100u16..200,
                        prop_oneof![Just(-1i64), 1i64..=255],
                        0u32..4,
                    ),
                    n_routes,
                ),
                proptest::collection::vec(
                    (any::<bool>(), proptest::collection::vec(0..n, 1..4)),
                    n_peers,
                ),
                Just(global),
                Just(seed),
            )
        })
        .prop_map(|(nets, routes, peers, global, seed)| {
            let ip = |a: u32| Ipv4Addr::from(0x0a00_0000 | a);
            let mut c = Config {
                nets: nets
                    .iter()
                    .enumerate()
                    .map(|(i, &net)| NetConfig {
                        net_type: net,
                        local_nis: (0..2u32)
                            .map(|j| LocalNi {
                                nid: Some(Nid::from_ipv4(
                                    net,
                                    ip(1000 + u32::try_from(i).unwrap() * 8 + j),
                                )),
                                interfaces: vec![format!("ib{i}{j}")],
                                tunables: Some(NiTunables {
                                    peer_timeout: 180,
                                    peer_credits: 8,
                                    peer_buffer_credits: 0,
                                    credits: 256,
                                }),
                                cpt: Some(Cpts(vec![0, 1])),
                                ..LocalNi::default()
                            })
                            .collect(),
                    })
                    .collect(),
                ..Config::default()
            };
            let mut seen = std::collections::HashSet::new();
            for (k, (gw_net, remote, hop, priority)) in routes.into_iter().enumerate() {
                let net = Net::new(LndType::SOCKLND, remote);
                let gateway = Nid::from_ipv4(nets[gw_net], ip(5000 + u32::try_from(k).unwrap()));
                if seen.insert((net, gateway)) {
                    c.routes.push(Route {
                        net,
                        gateway,
                        hop: Some(hop),
                        priority: Some(priority),
                        health_sensitivity: None,
                        state: None,
                        route_type: None,
                    });
                }
            }
            for (p, (multi_rail, ni_nets)) in peers.into_iter().enumerate() {
                let nids: Vec<Nid> = ni_nets
                    .iter()
                    .enumerate()
                    .map(|(j, &n)| {
                        Nid::from_ipv4(nets[n], ip(9000 + u32::try_from(p * 8 + j).unwrap()))
                    })
                    .collect();
                c.peers.push(Peer {
                    primary_nid: nids[0],
                    multi_rail,
                    peer_state: None,
                    peer_nis: nids.into_iter().map(PeerNi::new).collect(),
                });
            }
            // Keep the global section consistent: retries below the timeout, none without health.
            let mut g = global;
            if let (Some(r), Some(t)) = (g.retry_count, g.transaction_timeout) {
                if r >= t {
                    g.retry_count = Some(t - 1);
                }
            } else {
                g.retry_count = None;
                g.transaction_timeout = None;
            }
            if g.health_sensitivity == Some(0) {
                g.retry_count = Some(0);
            }
            c.global = Some(g);
            c.buffers = Some(Buffers {
                tiny: Some(seed % 4096),
                small: None,
                large: Some(1024),
            });
            c.routing = Some(Routing {
                enable: RoutingState::Enabled,
                cpts: vec![],
            });
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn valid_configs_validate_and_round_trip(c in arb_valid_config()) {
        prop_assert_eq!(validate(&c), Ok(()));
        let printed = c.to_yaml();
        let back = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(validate(&back), Ok(()));
        prop_assert!(back.tunables().is_ok());
        prop_assert_eq!(back, c);
    }
}
