//! The schema fixtures: `tests/fixtures/vN/store/` holds the engine's files of a store
//! written by schema version N with the contents below. Every later version of the store
//! must keep opening each of them (migrating it forward) and read back exactly these
//! contents: that is what keeps a router's state across an upgrade.
//!
//! * `v1` was written once, by the first release, from the contents below (its fault rules
//!   then in the schema-1 form, which the migration to schema 2 turns into the lnet rules
//!   [`fault_rules`] lists).
//! * `v2` was written once by schema 2 from the same contents, its fault rules stored as
//!   lnet's rules under their ids, plus one rule only schema 2 can hold
//!   ([`v2_only_rule`]: a probability trigger with a limit on how often it fires).
//! * `v3` was written once by schema 3 from the `v2` contents plus the `lnet-router:`
//!   section only schema 3 keeps ([`V3_ROUTER_SECTION`]: every setting given).
//! * `v4` was written once by schema 4 from the `v3` contents plus a token with the
//!   creation time only schema 4 keeps ([`V4_TOKEN`]).
//! * `v5` was written once by schema 5 from the `v4` fixture (opened and migrated) plus
//!   the drain only schema 5 keeps: the router was left draining.
//!
//! Never regenerate a fixture with a later schema: each stands for stores already on disk.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use lnet::fault::{FaultHealthError, FaultMsgType, FaultRule, FaultTrigger, NidMatch};
use lnet::health::HealthStatus;
use lnet::Nid;
use store::{Event, EventRecord, RecoveryQueue, Role, Store, StoredFaultRule, TokenInfo};

/// The configuration of the fixture, in the form `export` prints it.
const CONFIG: &str = "\
net:
-     net type: tcp
      local NI(s):
      -     nid: 192.168.1.10@tcp
            interfaces:
                  0: eth0
            tunables:
                  peer_timeout: 180
                  peer_credits: 8
                  peer_buffer_credits: 0
                  credits: 256
            lnd tunables:
                  conns_per_peer: 2
                  tos: -1
            CPT: \"[0,1]\"
-     net type: o2ib1
      local NI(s):
      -     interfaces:
                  0: ib0
            lnd tunables:
                  peercredits_hiw: 4
                  concurrent_sends: 8
                  map_on_demand: true
                  ntx: 512
                  conns_per_peer: 1
route:
-     net: tcp5
      gateway: 192.168.1.20@tcp
      hop: 2
      priority: 1
-     net: o2ib7
      gateway: 10.0.0.8@o2ib1
      hop: -1
      priority: 0
peer:
-     primary nid: 192.168.1.30@tcp
      Multi-Rail: true
      peer ni:
      -     nid: 192.168.1.30@tcp
      -     nid: 10.0.0.30@o2ib1
-     primary nid: 10.0.0.8@o2ib1
      Multi-Rail: false
      peer ni:
      -     nid: 10.0.0.8@o2ib1
routing:
    enable: 1
buffers:
    tiny: 2048
    large: 1024
global:
    discovery: 1
    retry_count: 2
    transaction_timeout: 150
    health_sensitivity: 100
udsp:
    - idx: 0
      src: o2ib1
      action:
          priority: 1
    - idx: 1
      dst: \"[1-3]@o2ib1\"
      rte: 192.168.1.[20-21]@tcp
";

/// The `lnet-router:` section the v3 fixture holds, as `export` prints it after
/// [`CONFIG`].
const V3_ROUTER_SECTION: &str = "\
lnet-router:
    acceptor_address: 192.168.1.10
    acceptor_port: 21988
    alive_router_check_interval: 30
    router_ping_timeout: 10
    avoid_asym_router_failure: 1
    check_routers_before_use: 0
    net_check: passive
    net_probe_interval_ms: 5000
    net_down_after_ms: 20000
";

const ADMIN_SECRET: &str = "fixture-admin-secret-0001";
const READER_SECRET: &str = "fixture-reader-secret-001";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

/// The fixture's fault rules, as schema 2 reads them back.
fn fault_rules() -> Vec<FaultRule> {
    vec![
        FaultRule::health_error(
            NidMatch::Any,
            NidMatch::Net("o2ib7".parse().unwrap()),
            FaultTrigger::Rate(10),
            FaultHealthError::NetworkTimeout,
        )
        .at(nid("192.168.1.10@tcp"))
        .portals(&[4, 6])
        .messages(&[FaultMsgType::Put]),
        FaultRule::delay(
            NidMatch::Nid(nid("192.168.1.30@tcp")),
            NidMatch::Any,
            FaultTrigger::Interval(5),
            3000,
        )
        .at(nid("192.168.1.10@tcp")),
    ]
}

fn events() -> Vec<(u64, Event)> {
    vec![
        (
            1_000,
            Event::PeerNiHealth {
                nid: nid("10.0.0.8@o2ib1"),
                before: 1000,
                after: 900,
                cause: Some(HealthStatus::RemoteTimeout),
            },
        ),
        (
            2_500,
            Event::RecoveryQueued {
                queue: RecoveryQueue::PeerNi,
                nid: nid("10.0.0.8@o2ib1"),
            },
        ),
        (
            9_000,
            Event::RouteState {
                net: "o2ib7".parse().unwrap(),
                gateway: nid("10.0.0.8@o2ib1"),
                up: false,
                reason: Some("gateway reports o2ib7 down".to_owned()),
            },
        ),
    ]
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The rule the v2 fixture holds beyond the v1 contents, under id 2.
fn v2_only_rule() -> FaultRule {
    FaultRule::drop(
        NidMatch::Nid(nid("10.0.0.8@o2ib1")),
        NidMatch::Any,
        FaultTrigger::Probability(250_000),
    )
    .at(nid("192.168.1.10@tcp"))
    .limit(7)
}

fn fixture_dir(version: u32) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}/store"))
}

/// Opens a copy of fixture `version` (the fixture itself is never written).
fn open_fixture(version: u32) -> (tempfile::TempDir, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("store");
    copy_dir(&fixture_dir(version), &copy);
    let store = Store::open(&copy).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        5,
        "v{version}: at schema 5 once open"
    );
    (tmp, store)
}

#[test]
fn schema_v1_fixture_opens_and_reads_back_exactly_its_contents() {
    let (_tmp, store) = open_fixture(1);
    reads_back_the_common_contents(&store, &fault_rules());

    // The store goes on from there: ids continue, the fixture's counters were kept.
    assert_eq!(store.add_fault_rule(&fault_rules()[0]).unwrap(), 2);
    assert_eq!(
        store
            .append_event(
                10_000,
                &Event::ConfigChanged {
                    change: "x".to_owned()
                }
            )
            .unwrap(),
        4
    );
}

#[test]
fn schema_v2_fixture_opens_and_reads_back_exactly_its_contents() {
    let (_tmp, store) = open_fixture(2);
    let mut rules = fault_rules();
    rules.push(v2_only_rule());
    reads_back_the_common_contents(&store, &rules);

    assert_eq!(store.add_fault_rule(&fault_rules()[1]).unwrap(), 3);
    assert_eq!(
        store
            .append_event(
                10_000,
                &Event::ConfigChanged {
                    change: "x".to_owned()
                }
            )
            .unwrap(),
        4
    );
}

#[test]
fn schema_v3_fixture_opens_and_reads_back_exactly_its_contents() {
    let (_tmp, store) = open_fixture(3);
    let mut rules = fault_rules();
    rules.push(v2_only_rule());
    reads_back_contents(&store, &rules, &format!("{CONFIG}{V3_ROUTER_SECTION}"));
    let section = store.router_section().unwrap().unwrap();
    assert_eq!(section.acceptor_port, Some(21988));

    assert_eq!(store.add_fault_rule(&fault_rules()[1]).unwrap(), 3);
}

/// The token the v4 fixture holds beyond the v3 contents: name, role, secret, creation
/// time.
const V4_TOKEN: (&str, Role, &str, u64) = (
    "ci-bot",
    Role::Admin,
    "fixture-ci-bot-secret-01",
    1_764_000_000_000,
);

#[test]
fn schema_v4_fixture_opens_and_reads_back_exactly_its_contents() {
    let (_tmp, store) = open_fixture(4);
    let mut rules = fault_rules();
    rules.push(v2_only_rule());
    let (name, role, secret, created_ms) = V4_TOKEN;
    let made = TokenInfo {
        name: name.to_owned(),
        role,
        created_ms: Some(created_ms),
    };
    assert_eq!(store.verify_token(secret).unwrap(), Some(made.clone()));
    // The v3 contents, the new token aside.
    store.revoke_token(name).unwrap();
    reads_back_contents(&store, &rules, &format!("{CONFIG}{V3_ROUTER_SECTION}"));
}

#[test]
fn schema_v5_fixture_opens_and_reads_back_exactly_its_contents_left_draining() {
    let (_tmp, store) = open_fixture(5);
    let mut rules = fault_rules();
    rules.push(v2_only_rule());
    assert!(store.draining().unwrap(), "the router was left draining");
    let (name, role, secret, created_ms) = V4_TOKEN;
    let made = TokenInfo {
        name: name.to_owned(),
        role,
        created_ms: Some(created_ms),
    };
    assert_eq!(store.verify_token(secret).unwrap(), Some(made));
    // The v3 contents, the v4 token aside.
    store.revoke_token(name).unwrap();
    reads_back_contents(&store, &rules, &format!("{CONFIG}{V3_ROUTER_SECTION}"));

    assert_eq!(store.add_fault_rule(&fault_rules()[1]).unwrap(), 3);
    store.set_draining(false).unwrap();
    assert!(!store.draining().unwrap());
}

#[test]
fn stores_of_schema_1_to_4_come_forward_not_draining() {
    for version in [1, 2, 3, 4] {
        let (_tmp, store) = open_fixture(version);
        assert!(!store.draining().unwrap(), "v{version}");
    }
}

#[test]
fn stores_of_schema_1_and_2_come_forward_without_an_lnet_router_section() {
    for version in [1, 2] {
        let (_tmp, store) = open_fixture(version);
        assert_eq!(store.router_section().unwrap(), None, "v{version}");
        assert!(store.export().unwrap().router.is_none(), "v{version}");
    }
}

/// The configuration, tokens, fault rules (`rules`, under ids 0, 1, ...) and events every
/// fixture holds.
fn reads_back_the_common_contents(store: &Store, rules: &[FaultRule]) {
    reads_back_contents(store, rules, CONFIG);
}

/// [`reads_back_the_common_contents`], with `config` as what `export` prints.
fn reads_back_contents(store: &Store, rules: &[FaultRule], config: &str) {
    assert_eq!(store.export().unwrap().to_yaml(), config);

    assert_eq!(
        store.tokens().unwrap(),
        vec![
            TokenInfo {
                name: "dashboard".to_owned(),
                role: Role::Reader,
                created_ms: None,
            },
            TokenInfo {
                name: "ops-admin".to_owned(),
                role: Role::Admin,
                created_ms: None,
            },
        ]
    );
    assert_eq!(
        store.verify_token(ADMIN_SECRET).unwrap().map(|t| t.name),
        Some("ops-admin".to_owned())
    );
    assert_eq!(
        store.verify_token(READER_SECRET).unwrap().map(|t| t.role),
        Some(Role::Reader)
    );

    let expected_rules: Vec<StoredFaultRule> = rules
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, rule)| StoredFaultRule {
            id: u32::try_from(i).unwrap(),
            rule,
        })
        .collect();
    assert_eq!(store.fault_rules().unwrap(), expected_rules);

    let expected_events: Vec<EventRecord> = events()
        .into_iter()
        .zip(1..)
        .map(|((at_ms, event), id)| EventRecord {
            id,
            at_ms,
            wall_ms: None,
            event,
        })
        .collect();
    assert_eq!(store.events_after(0, 100).unwrap(), expected_events);
    assert_eq!(store.last_event_id().unwrap(), Some(3));
}
