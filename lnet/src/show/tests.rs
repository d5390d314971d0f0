//! Snapshot tests against real `lnetctl` output (tests/fixtures/lnetctl/).

use super::*;
use crate::config::{
    Cpts, Global, LatencyStats, LndTunables, MsgStats, NiHealthStats, NiStatistics, NiStatus,
    NiTunables, PeerNiCredits, PeerNiHealthStats, PeerNiState,
};
use crate::nid::Nid;
use crate::tunables::Tunables;

const K: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lnetctl/kernel-2.17.57/"
);
const OLD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lnetctl/");

fn fixture(dir: &str, name: &str) -> String {
    std::fs::read_to_string(format!("{dir}{name}")).unwrap()
}

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// Compares line by line first, so a failure names the first differing line.
fn assert_same(ours: &str, want: &str) {
    for (i, (a, b)) in ours.lines().zip(want.lines()).enumerate() {
        assert_eq!(a, b, "line {}", i + 1);
    }
    assert_eq!(ours, want);
}

/// The fixture text without the blocks headed by `keys` (a key line and the lines indented
/// deeper below it), to derive the lower verbosities from a `-v 4` capture.
fn without(text: &str, keys: &[&str]) -> String {
    let mut out = String::new();
    let mut skip_deeper_than: Option<usize> = None;
    for line in text.lines() {
        let body = line.trim_start_matches([' ', '-']);
        let col = line.len() - body.len();
        if let Some(c) = skip_deeper_than {
            if col > c {
                continue;
            }
            skip_deeper_than = None;
        }
        let key = body.split(':').next().unwrap_or("");
        if keys.contains(&key) {
            skip_deeper_than = Some(col);
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn msg(put: u32, get: u32, reply: u32, ack: u32, hello: u32) -> MsgStats {
    MsgStats {
        put,
        get,
        reply,
        ack,
        hello,
    }
}

/// `statistics:` with the post-2.17.0 latency keys; one GET round trip sample if `rtt`.
fn stats(send: u32, recv: u32, rtt: &[u64]) -> NiStatistics {
    let (n, min, max, sum) = rtt.iter().fold((0u32, u64::MAX, 0u64, 0u64), |acc, &r| {
        (acc.0 + 1, acc.1.min(r), acc.2.max(r), acc.3 + r)
    });
    NiStatistics {
        send_count: send,
        recv_count: recv,
        drop_count: 0,
        latency: Some(LatencyStats {
            get_rtt_samples: n,
            get_rtt_min_nsec: if n == 0 { 0 } else { min },
            get_rtt_max_nsec: max,
            get_rtt_avg_nsec: if n == 0 { 0 } else { sum / u64::from(n) },
            ..LatencyStats::default()
        }),
    }
}

fn ni_health(value: i32) -> NiHealthStats {
    NiHealthStats {
        health_value: value,
        ping_count: Some(0),
        next_ping: Some(0),
        ..NiHealthStats::default()
    }
}

fn ni_tunables() -> NiTunables {
    NiTunables {
        peer_timeout: 180,
        peer_credits: 8,
        peer_buffer_credits: 0,
        credits: 256,
    }
}

fn o2ib_lnd() -> LndTunables {
    LndTunables {
        peercredits_hiw: Some(4),
        concurrent_sends: Some(8),
        map_on_demand: Some(true),
        fmr_pool_size: Some(512),
        fmr_flush_trigger: Some(384),
        fmr_cache: Some(1),
        ntx: Some(512),
        conns_per_peer: Some(1),
        timeout: Some(50),
        tos: Some(-1),
    }
}

fn lo_ni(stats: NiStatistics, udsp: Option<UdspInfo>) -> ShowNi {
    ShowNi {
        nid: nid("0@lo"),
        status: NiStatus::Up,
        interfaces: Vec::new(),
        statistics: stats,
        udsp,
        sent_stats: MsgStats::default(),
        received_stats: MsgStats::default(),
        dropped_stats: MsgStats::default(),
        health_stats: ni_health(0),
        tunables: NiTunables::default(),
        lnd_tunables: None,
        dev_cpt: -1,
        cpt: Cpts(vec![0]),
    }
}

fn ni(n: &str, ifname: &str, lnd: LndTunables) -> ShowNi {
    ShowNi {
        nid: nid(n),
        status: NiStatus::Up,
        interfaces: vec![ifname.to_owned()],
        statistics: stats(0, 0, &[]),
        udsp: Some(UdspInfo::default()),
        sent_stats: MsgStats::default(),
        received_stats: MsgStats::default(),
        dropped_stats: MsgStats::default(),
        health_stats: ni_health(1000),
        tunables: ni_tunables(),
        lnd_tunables: Some(lnd),
        dev_cpt: -1,
        cpt: Cpts(vec![0]),
    }
}

fn net(n: &str, nis: Vec<ShowNi>) -> ShowNet {
    ShowNet {
        net_type: n.parse().unwrap(),
        nis,
    }
}

/// kernel-2.17.57/net-show-v3.yaml: lo, tcp on veth0, o2ib on veth1, no traffic.
fn net_show_v3_model() -> NetShow {
    let tcp_lnd = LndTunables {
        conns_per_peer: Some(2),
        timeout: Some(50),
        tos: Some(-1),
        ..LndTunables::default()
    };
    NetShow {
        nets: vec![
            net("lo", vec![lo_ni(stats(0, 0, &[]), None)]),
            net("tcp", vec![ni("10.0.0.1@tcp", "veth0", tcp_lnd)]),
            net("o2ib", vec![ni("10.0.0.2@o2ib", "veth1", o2ib_lnd())]),
        ],
    }
}

/// kernel-2.17.57/net-show-v4-o2ib.yaml: lo and two o2ib NIs after one ping each way.
fn net_show_v4_model() -> NetShow {
    let busy = |n: &str, ifname: &str, rtt: u64| ShowNi {
        statistics: stats(2, 2, &[rtt]),
        sent_stats: msg(0, 2, 0, 0, 0),
        received_stats: msg(0, 1, 1, 0, 0),
        ..ni(n, ifname, o2ib_lnd())
    };
    NetShow {
        nets: vec![
            net(
                "lo",
                vec![lo_ni(stats(0, 0, &[]), Some(UdspInfo::default()))],
            ),
            net(
                "o2ib",
                vec![
                    busy("10.0.0.1@o2ib", "veth0", 5_064_181_780),
                    busy("10.0.0.2@o2ib", "veth1", 1_127_320),
                ],
            ),
        ],
    }
}

#[test]
fn net_show_v3_matches_kernel() {
    let want = fixture(K, "net-show-v3.yaml");
    assert_same(&net_show_v3_model().to_yaml(Verbosity(3)), &want);
    // `-v 4` adds only `udsp info:` (the lo NI has none in this model).
    assert_same(
        &without(&net_show_v3_model().to_yaml(Verbosity(4)), &["udsp info"]),
        &want,
    );
}

#[test]
fn net_show_v4_o2ib_matches_kernel() {
    let want = fixture(K, "net-show-v4-o2ib.yaml");
    let m = net_show_v4_model();
    assert_same(&m.to_yaml(Verbosity(4)), &want);
    assert_same(&m.to_yaml(Verbosity(9)), &want);
}

#[test]
fn net_show_lower_levels_drop_the_documented_blocks() {
    let full = fixture(K, "net-show-v4-o2ib.yaml");
    let m = net_show_v4_model();
    let v3 = without(&full, &["udsp info"]);
    assert_same(&m.to_yaml(Verbosity(3)), &v3);
    assert_same(&m.to_yaml(Verbosity(2)), &v3);
    let v1 = without(
        &v3,
        &[
            "sent_stats",
            "received_stats",
            "dropped_stats",
            "health stats",
        ],
    );
    assert_same(&m.to_yaml(Verbosity(1)), &v1);
    let v0 = without(
        &v1,
        &["statistics", "tunables", "lnd tunables", "dev cpt", "CPT"],
    );
    assert_same(&m.to_yaml(Verbosity(0)), &v0);
    assert!(v0.contains("            interfaces:\n                  0: veth0\n"));
}

/// The 2.14 capture (net-show-v4.yaml): the ioctl fallback's cYAML layout, no UDSP, no
/// latency keys, no `ping_count`/`next_ping`, and an empty `lnd tunables:` for lo.
#[test]
fn net_show_v4_2_14_matches_in_ioctl_layout() {
    let want = fixture(OLD, "net-show-v4.yaml");
    let cpts = Cpts(vec![0, 1, 2, 3, 4]);
    let old_stats = |send, recv, drop| NiStatistics {
        send_count: send,
        recv_count: recv,
        drop_count: drop,
        latency: None,
    };
    let old_health = NiHealthStats {
        health_value: 1000,
        ..NiHealthStats::default()
    };
    let socklnd = LndTunables {
        conns_per_peer: Some(3),
        ..LndTunables::default()
    };
    let tcp_ni = |n: &str, ifname: &str, s, sent, recv, dropped| ShowNi {
        nid: nid(n),
        status: NiStatus::Up,
        interfaces: vec![String::from(ifname)],
        statistics: s,
        udsp: None,
        sent_stats: sent,
        received_stats: recv,
        dropped_stats: dropped,
        health_stats: old_health.clone(),
        tunables: ni_tunables(),
        lnd_tunables: Some(socklnd.clone()),
        dev_cpt: 0,
        cpt: cpts.clone(),
    };
    let m = NetShow {
        nets: vec![
            net(
                "lo",
                vec![ShowNi {
                    nid: nid("0@lo"),
                    status: NiStatus::Up,
                    interfaces: Vec::new(),
                    statistics: old_stats(180_076, 180_072, 4),
                    udsp: None,
                    sent_stats: msg(180_076, 0, 0, 0, 0),
                    received_stats: msg(180_063, 0, 0, 9, 0),
                    dropped_stats: msg(4, 0, 0, 0, 0),
                    health_stats: old_health.clone(),
                    tunables: NiTunables::default(),
                    lnd_tunables: Some(LndTunables::default()),
                    dev_cpt: 0,
                    cpt: cpts.clone(),
                }],
            ),
            net(
                "tcp",
                vec![
                    tcp_ni(
                        "172.16.0.24@tcp",
                        "mlxen0",
                        old_stats(464_970, 464_963, 4),
                        msg(340_418, 124_552, 0, 0, 0),
                        msg(340_401, 63_529, 61_023, 10, 0),
                        msg(4, 0, 0, 0, 0),
                    ),
                    tcp_ni(
                        "172.16.0.25@tcp",
                        "mlxen1",
                        old_stats(464_886, 464_877, 3),
                        msg(340_879, 124_007, 0, 0, 0),
                        msg(340_858, 62_013, 61_994, 12, 0),
                        msg(3, 0, 0, 0, 0),
                    ),
                ],
            ),
        ],
    };
    assert_same(&m.to_yaml_layout(Verbosity(4), NetLayout::Ioctl), &want);
}

#[test]
fn ioctl_layout_puts_map_on_demand_first() {
    let m = NetShow {
        nets: vec![net("o2ib", vec![ni("10.0.0.2@o2ib", "ib0", o2ib_lnd())])],
    };
    let y = m.to_yaml_layout(Verbosity(1), NetLayout::Ioctl);
    let mod_at = y.find("map_on_demand").unwrap();
    let cs_at = y.find("concurrent_sends").unwrap();
    assert!(mod_at < cs_at, "{y}");
    assert!(y.contains("              peercredits_hiw: 4\n              map_on_demand: true\n"));
}

fn peer_ni(n: &str, min_tx: u32, rtt: &[u64], udsp: Option<UdspInfo>) -> ShowPeerNi {
    let k = u32::try_from(rtt.len()).unwrap();
    ShowPeerNi {
        nid: nid(n),
        udsp,
        state: PeerNiState::NotApplicable,
        credits: PeerNiCredits {
            max_ni_tx_credits: 8,
            available_tx_credits: 8,
            min_tx_credits: min_tx,
            tx_q_num_of_buf: 0,
            available_rtr_credits: 8,
            min_rtr_credits: 8,
            refcount: 1,
        },
        statistics: stats(2 * k, 2 * k, rtt),
        sent_stats: msg(0, 2 * k, 0, 0, 0),
        received_stats: msg(0, k, k, 0, 0),
        dropped_stats: MsgStats::default(),
        health_stats: PeerNiHealthStats {
            health_value: 1000,
            ping_count: Some(0),
            next_ping: Some(0),
            ..PeerNiHealthStats::default()
        },
    }
}

fn peer(n: &str, ni: ShowPeerNi) -> ShowPeer {
    ShowPeer {
        primary_nid: nid(n),
        multi_rail: false,
        peer_state: 0,
        nis: vec![ni],
    }
}

#[test]
fn peer_show_v_matches_kernel() {
    let m = PeerShow {
        peers: vec![
            peer(
                "10.0.0.1@tcp",
                peer_ni("10.0.0.1@tcp", 6, &[886_040, 20_268_320], None),
            ),
            peer(
                "10.0.0.2@o2ib",
                peer_ni("10.0.0.2@o2ib", 7, &[18_630_220], None),
            ),
        ],
    };
    assert_same(&m.to_yaml(Verbosity(1)), &fixture(K, "peer-show-v.yaml"));
}

fn peer_show_v4_model() -> PeerShow {
    let u = Some(UdspInfo::default());
    PeerShow {
        peers: vec![
            peer(
                "10.0.0.2@o2ib",
                peer_ni("10.0.0.2@o2ib", 7, &[5_064_181_780], u.clone()),
            ),
            peer(
                "10.0.0.1@o2ib",
                peer_ni("10.0.0.1@o2ib", 7, &[1_127_320], u),
            ),
        ],
    }
}

#[test]
fn peer_show_v4_o2ib_matches_kernel() {
    let want = fixture(K, "peer-show-v4-o2ib.yaml");
    assert_same(&peer_show_v4_model().to_yaml(Verbosity(4)), &want);
}

#[test]
fn peer_show_lower_levels_drop_the_documented_blocks() {
    let m = peer_show_v4_model();
    let v3 = without(&fixture(K, "peer-show-v4-o2ib.yaml"), &["udsp info"]);
    assert_same(&m.to_yaml(Verbosity(3)), &v3);
    let v2 = without(&v3, &["peer state"]);
    assert_same(&m.to_yaml(Verbosity(2)), &v2);
    let v1 = without(
        &v2,
        &[
            "sent_stats",
            "received_stats",
            "dropped_stats",
            "health stats",
        ],
    );
    assert_same(&m.to_yaml(Verbosity(1)), &v1);
    let v0 = without(
        &v1,
        &[
            "max_ni_tx_credits",
            "available_tx_credits",
            "min_tx_credits",
            "tx_q_num_of_buf",
            "available_rtr_credits",
            "min_rtr_credits",
            "refcount",
            "statistics",
        ],
    );
    assert_same(&m.to_yaml(Verbosity(0)), &v0);
    assert!(v0.starts_with(
        "peer:\n-     primary nid: 10.0.0.2@o2ib\n      Multi-Rail: false\n      peer ni:\n      -     nid: 10.0.0.2@o2ib\n            state: NA\n"
    ));
}

#[test]
fn stats_show_matches_kernel() {
    let m = StatsShow {
        msgs_max: 2,
        rst_alloc: 3,
        send_count: 6,
        failed_resends: Some(0),
        successful_resends: Some(0),
        recv_count: 6,
        send_length: 192,
        recv_length: 192,
        ..StatsShow::default()
    };
    assert_same(&m.to_yaml(), &fixture(K, "stats-show.yaml"));
}

/// The 2.14 capture has no `failed_resends` / `successful_resends`.
#[test]
fn stats_show_2_14_matches() {
    let m = StatsShow {
        msgs_max: 39,
        rst_alloc: 15,
        send_count: 1_110_532,
        recv_count: 1_110_512,
        drop_count: 11,
        send_length: 261_865_376,
        recv_length: 254_091_008,
        drop_length: 4832,
        ..StatsShow::default()
    };
    assert_same(&m.to_yaml(), &fixture(OLD, "stats-show.yaml"));
}

#[test]
fn stats_show_rounds_like_a_double() {
    let m = StatsShow {
        send_length: (1 << 53) + 1,
        recv_length: u64::MAX,
        ..StatsShow::default()
    };
    let y = m.to_yaml();
    assert!(y.contains("    send_length: 9007199254740992\n"), "{y}");
    assert!(y.contains("    recv_length: 18446744073709551616\n"), "{y}");
}

#[test]
fn global_show_matches_kernel_defaults() {
    let want = fixture(K, "global-show.yaml");
    assert_same(
        &GlobalShow::from_tunables(&Tunables::default()).to_yaml(),
        &want,
    );
    let explicit = GlobalShow {
        global: Global {
            numa_range: Some(0),
            max_interfaces: Some(4096),
            discovery: Some(1),
            drop_asym_route: Some(0),
            retry_count: Some(2),
            transaction_timeout: Some(150),
            health_sensitivity: Some(100),
            recovery_interval: Some(1),
            router_sensitivity: Some(100),
            lnd_timeout: Some(49),
            response_tracking: Some(3),
            recovery_limit: Some(0),
            max_recovery_ping_interval: Some(900),
        },
    };
    assert_same(&explicit.to_yaml(), &want);
}

#[test]
fn ping_matches_kernel() {
    let m = PingShow {
        primary_nid: nid("10.0.0.1@tcp"),
        multi_rail: false,
        peer_nis: vec![nid("10.0.0.1@tcp"), nid("10.0.0.2@o2ib")],
    };
    assert_same(&m.to_yaml(), &fixture(K, "ping.yaml"));
}

#[test]
fn discover_and_failed_pings_keep_the_ping_layout() {
    let m = PingShow {
        primary_nid: nid("10.0.0.1@tcp"),
        multi_rail: false,
        peer_nis: vec![nid("10.0.0.1@tcp"), nid("10.0.0.2@o2ib")],
    };
    // `discover` prints the kernel's ping document under `discover:`.
    let want = fixture(K, "ping.yaml").replacen("ping:", "discover:", 1);
    assert_same(
        &PingShow::list_to_yaml("discover", std::slice::from_ref(&m), &[]),
        &want,
    );
    // NIDs that did not answer follow under `manage:`, with errno and descr.
    let failed = PingFailureShow {
        errno: -110,
        descr: "failed to ping 10.0.0.9@tcp: Connection timed out".to_owned(),
    };
    let text = PingShow::list_to_yaml("ping", &[m], &[failed]);
    assert!(
        text.ends_with(
            "manage:\n- ping: \"\"\n  errno: -110\n  descr: \"failed to ping 10.0.0.9@tcp: Connection timed out\"\n"
        ),
        "{text}"
    );
    assert!(text.starts_with(&fixture(K, "ping.yaml")), "{text}");
}

#[test]
fn debug_recovery_lists_nids_by_index() {
    let local = RecoveryShow {
        kind: RecoveryKind::Local,
        nids: vec![nid("10.0.0.1@tcp"), nid("10.0.0.2@o2ib")],
    };
    assert_eq!(
        local.to_yaml(),
        "Local NI recovery:\n      nid-0: 10.0.0.1@tcp\n      nid-1: 10.0.0.2@o2ib\n"
    );
    let peer = RecoveryShow {
        kind: RecoveryKind::Peer,
        nids: vec![nid("192.168.1.20@o2ib")],
    };
    assert_eq!(
        peer.to_yaml(),
        "Peer NI recovery:\n      nid-0: 192.168.1.20@o2ib\n"
    );
    let empty = RecoveryShow {
        kind: RecoveryKind::Peer,
        nids: Vec::new(),
    };
    assert_eq!(empty.to_yaml(), "");
}

/// Every document derives `Serialize` for the JSON API.
#[test]
fn documents_serialize() {
    fn is_serialize<T: serde::Serialize>(_: &T) {}
    is_serialize(&net_show_v4_model());
    is_serialize(&peer_show_v4_model());
    is_serialize(&StatsShow::default());
    is_serialize(&GlobalShow::default());
    is_serialize(&Verbosity(1));
    is_serialize(&NetLayout::Ioctl);
}

#[test]
fn kernel_fixtures_parse_into_the_same_model() {
    // The v3 capture has no `udsp info:`, so the NIs come back without one.
    let mut v3 = net_show_v3_model();
    for ni in v3.nets.iter_mut().flat_map(|n| n.nis.iter_mut()) {
        ni.udsp = None;
    }
    assert_eq!(NetShow::parse(&fixture(K, "net-show-v3.yaml")).unwrap(), v3);
    assert_eq!(
        NetShow::parse(&fixture(K, "net-show-v4-o2ib.yaml")).unwrap(),
        net_show_v4_model()
    );
    assert_eq!(
        PeerShow::parse(&fixture(K, "peer-show-v4-o2ib.yaml")).unwrap(),
        peer_show_v4_model()
    );
    let ping = PingShow::parse(&fixture(K, "ping.yaml")).unwrap();
    assert_eq!(ping.len(), 1);
    assert_eq!(
        ping[0].peer_nis,
        vec![nid("10.0.0.1@tcp"), nid("10.0.0.2@o2ib")]
    );
    assert_eq!(
        GlobalShow::parse(&fixture(K, "global-show.yaml")).unwrap(),
        GlobalShow::from_tunables(&Tunables::default())
    );
    assert_eq!(
        StatsShow::parse(&fixture(K, "stats-show.yaml"))
            .unwrap()
            .send_length,
        192
    );
}

/// Every capture reads into the model and prints back byte for byte at its own verbosity
/// and layout.
#[test]
fn every_fixture_round_trips() {
    let net = |d, f, v, layout| {
        let text = fixture(d, f);
        let m = NetShow::parse(&text).unwrap();
        assert_same(&m.to_yaml_layout(Verbosity(v), layout), &text);
    };
    net(K, "net-show-v3.yaml", 3, NetLayout::Netlink);
    net(K, "net-show-v4-o2ib.yaml", 4, NetLayout::Netlink);
    net(OLD, "net-show-v4.yaml", 4, NetLayout::Ioctl);
    for (f, v) in [("peer-show-v.yaml", 1), ("peer-show-v4-o2ib.yaml", 4)] {
        let text = fixture(K, f);
        assert_same(
            &PeerShow::parse(&text).unwrap().to_yaml(Verbosity(v)),
            &text,
        );
    }
    for d in [K, OLD] {
        let text = fixture(d, "stats-show.yaml");
        assert_same(&StatsShow::parse(&text).unwrap().to_yaml(), &text);
    }
    let text = fixture(K, "global-show.yaml");
    assert_same(&GlobalShow::parse(&text).unwrap().to_yaml(), &text);
    let text = fixture(K, "ping.yaml");
    let pings = PingShow::parse(&text).unwrap();
    assert_same(&pings[0].to_yaml(), &text);
}

#[test]
fn parse_errors_name_the_field() {
    let bad = "net:\n-     net type: tcp\n      local NI(s):\n      -     nid: 10.0.0.1@tcp\n            status: sideways\n";
    let e = NetShow::parse(bad).unwrap_err().to_string();
    assert!(e.contains("net[0].local NI(s)[0].status"), "{e}");
    let e = PeerShow::parse(
        "peer:\n-     primary nid: nope\n      Multi-Rail: false\n      peer ni: []\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("primary nid"), "{e}");
    assert!(StatsShow::parse("statistics:\n    bogus: 1\n").is_err());
    let e = GlobalShow::parse("routing:\n    enable: 1\n").unwrap_err();
    assert!(
        matches!(e, crate::config::ConfigError::UnknownKey { ref key, .. } if key == "routing"),
        "{e}"
    );
    let e = GlobalShow::parse("").unwrap_err();
    assert!(
        matches!(e, crate::config::ConfigError::MissingKey { ref key, .. } if key == "global"),
        "{e}"
    );
}

/// The JSON form (what the API serves) reads back into the same model, so that a client
/// can print lnetctl's YAML from it.
#[test]
fn show_documents_round_trip_through_json() {
    fn round<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
        v: &T,
    ) {
        let json = serde_json::to_string(v).unwrap();
        let back: T = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, v, "{json}");
    }
    round(&net_show_v3_model());
    round(&net_show_v4_model());
    round(&peer_show_v4_model());
    round(&StatsShow::parse(&fixture(K, "stats-show.yaml")).unwrap());
}

#[test]
fn udsp_info_prints_preferred_lists_only_when_set_and_reads_them_back() {
    let info = UdspInfo {
        net_priority: -1,
        nid_priority: 2,
        preferred_gateways: vec![nid("10.0.0.3@tcp"), nid("10.0.0.4@tcp")],
        preferred_sources: (0..11).map(|i| nid(&format!("10.0.9.{i}@o2ib"))).collect(),
    };
    let mut ni = peer_ni("10.0.0.2@o2ib", 7, &[], Some(info.clone()));
    let show = PeerShow {
        peers: vec![peer("10.0.0.2@o2ib", ni.clone())],
    };
    let y = show.to_yaml(Verbosity(4));
    let gw = y.find("Preferred gateway NIDs:").unwrap();
    let src = y.find("Preferred source NIDs:").unwrap();
    assert!(gw < src, "{y}");
    assert!(y.contains("NID-0: 10.0.0.3@tcp"), "{y}");
    assert!(y.contains("NID-10: 10.0.9.10@o2ib"), "{y}");
    // Read back in order (NID-10 after NID-9), and through JSON.
    assert_eq!(PeerShow::parse(&y).unwrap(), show);
    let json = serde_json::to_string(&show).unwrap();
    assert!(json.contains("preferred_gateways"), "{json}");
    assert_eq!(serde_json::from_str::<PeerShow>(&json).unwrap(), show);
    // Empty lists print nothing and stay out of the JSON form.
    ni.udsp = Some(UdspInfo::default());
    let plain = PeerShow {
        peers: vec![peer("10.0.0.2@o2ib", ni)],
    };
    assert!(!plain.to_yaml(Verbosity(4)).contains("Preferred"));
    assert!(!serde_json::to_string(&plain).unwrap().contains("preferred"));
    // A key other than NID-n is refused.
    let bad = y.replace("NID-1:", "NIDX:");
    assert!(PeerShow::parse(&bad).is_err());
}
