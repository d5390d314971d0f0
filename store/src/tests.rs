//! Tests of every API of the store, of its schema checks and of its reaction to bytes on
//! disk that are not what it wrote.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use lnet::config::{parse, Config, LocalNi, NetConfig, Peer, PeerNi, Route, UdspRule};
use lnet::health::HealthStatus;
use lnet::tunables::TunableName;
use lnet::{Net, Nid};
use tempfile::TempDir;

use crate::engine::TreeId;
use crate::*;
use lnet::fault::{
    FaultHealthError, FaultKind, FaultMsgType, FaultRule, FaultRuleError, FaultTrigger, NidMatch,
};

const BACKUP: &str =
    include_str!("../../lnet/tests/fixtures/lnetctl/kernel-2.17.57/export-backup-router.yaml");
const FULL_EXPORT: &str =
    include_str!("../../lnet/tests/fixtures/lnetctl/kernel-2.17.57/export-o2ib.yaml");

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn net(s: &str) -> Net {
    s.parse().unwrap()
}

fn fresh() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s")).unwrap();
    (dir, store)
}

fn reopen(dir: &TempDir, store: Store) -> Store {
    drop(store);
    Store::open(dir.path().join("s")).unwrap()
}

/// Writes raw bytes under the store's API, as damage on disk would.
fn poke(store: &Store, tree: TreeId, key: &[u8], value: &[u8]) {
    store.trees.tree(tree).insert(key, value).unwrap();
    store.trees.flush().unwrap();
}

fn peer(primary: &str, others: &[&str]) -> Peer {
    let mut nis = vec![PeerNi::new(nid(primary))];
    nis.extend(others.iter().map(|n| PeerNi::new(nid(n))));
    Peer {
        primary_nid: nid(primary),
        multi_rail: !others.is_empty(),
        peer_state: None,
        peer_nis: nis,
    }
}

fn route(n: &str, gw: &str, hop: Option<i64>, priority: Option<u32>) -> Route {
    Route {
        net: net(n),
        gateway: nid(gw),
        hop,
        priority,
        health_sensitivity: None,
        state: None,
        route_type: None,
    }
}

fn ni(nid_text: Option<&str>, iface: &str) -> LocalNi {
    LocalNi {
        nid: nid_text.map(nid),
        interfaces: vec![iface.to_owned()],
        ..LocalNi::default()
    }
}

fn udsp(src: &str, priority: u32) -> UdspRule {
    UdspRule {
        idx: None,
        src: Some(src.to_owned()),
        dst: None,
        rte: None,
        priority: Some(priority),
    }
}

fn drop_rule(ni: &str) -> FaultRule {
    FaultRule::health_error(
        NidMatch::Any,
        NidMatch::Net(net("o2ib1")),
        FaultTrigger::Rate(10),
        FaultHealthError::RemoteTimeout,
    )
    .at(nid(ni))
    .portals(&[4])
    .messages(&[FaultMsgType::Put, FaultMsgType::Get])
}

// ---- opening and the schema ----

#[test]
fn the_drain_is_kept_across_reopen_and_an_import_and_cleared_by_undrain() {
    let (dir, store) = fresh();
    assert!(!store.draining().unwrap(), "a new store is not draining");
    store.set_draining(true).unwrap();
    let store = reopen(&dir, store);
    assert!(store.draining().unwrap());
    // A configuration file imported again leaves the drain as it was.
    store
        .import(&parse("routing:\n    enable: 1\n").unwrap())
        .unwrap();
    assert!(store.draining().unwrap());
    let raw = store.trees.get_raw(TreeId::Meta, b"draining").unwrap();
    assert_eq!(raw.as_deref(), Some(&b"true"[..]));
    decode_record(RecordKind::Meta, b"draining", b"true").unwrap();
    // The `lnet-router:` section is a meta record too.
    decode_record(
        RecordKind::Meta,
        b"lnet_router",
        br#"{"acceptor_port":21988}"#,
    )
    .unwrap();
    assert!(decode_record(RecordKind::Meta, b"lnet_router", br#"{"net_check":"loud"}"#).is_err());
    assert!(decode_record(RecordKind::Meta, b"lnet_router", br#"{"port":1}"#).is_err());
    assert!(decode_record(RecordKind::Meta, b"draining", b"1x").is_err());
    store.set_draining(false).unwrap();
    let store = reopen(&dir, store);
    assert!(!store.draining().unwrap());
    assert_eq!(
        store.trees.get_raw(TreeId::Meta, b"draining").unwrap(),
        None
    );
}

#[test]
fn open_creates_a_store_stamped_with_the_schema_version() {
    let (_dir, store) = fresh();
    assert_eq!(store.schema_version().unwrap(), 5);
    assert_eq!(schema::SCHEMA_VERSION, 5);
    assert_eq!(
        store
            .trees
            .get_raw(TreeId::Meta, b"magic")
            .unwrap()
            .unwrap(),
        schema::MAGIC
    );
    assert_eq!(store.export().unwrap(), Config::default());
}

#[test]
fn a_store_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Store>();
    let (_dir, store) = fresh();
    let store = std::sync::Arc::new(store);
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..10u32 {
                    store.append_event(u64::from(i), &health(t)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let ids: Vec<u64> = store
        .events_after(0, 100)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(
        ids,
        (1..=40).collect::<Vec<u64>>(),
        "no id given twice, none skipped"
    );
}

#[test]
fn reopen_keeps_the_contents_and_the_version() {
    let (dir, store) = fresh();
    store.put_peer(&peer("10.0.0.1@tcp", &[])).unwrap();
    let store = reopen(&dir, store);
    assert_eq!(store.schema_version().unwrap(), schema::SCHEMA_VERSION);
    assert_eq!(store.peers().unwrap(), vec![peer("10.0.0.1@tcp", &[])]);
}

#[test]
fn open_refuses_a_newer_schema_naming_both_versions() {
    let (dir, store) = fresh();
    poke(&store, TreeId::Meta, b"schema_version", &7u32.to_be_bytes());
    drop(store);
    let err = Store::open(dir.path().join("s")).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NewerSchema {
                found: 7,
                supported: 5
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("version 7") && text.contains("version 5"),
        "{text}"
    );
}

#[test]
fn open_refuses_schema_version_zero() {
    let (dir, store) = fresh();
    poke(&store, TreeId::Meta, b"schema_version", &0u32.to_be_bytes());
    drop(store);
    let err = Store::open(dir.path().join("s")).unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidSchema { found: 0 }),
        "{err:?}"
    );
}

#[test]
fn open_reports_a_version_of_the_wrong_length_naming_meta_and_the_key() {
    let (dir, store) = fresh();
    poke(&store, TreeId::Meta, b"schema_version", b"\x01");
    drop(store);
    let err = Store::open(dir.path().join("s")).unwrap_err();
    match err {
        StoreError::CorruptValue { tree, key, source } => {
            assert_eq!((tree, key.as_str()), ("meta", "schema_version"));
            assert_eq!(
                source,
                DecodeError::Length {
                    expected: 4,
                    found: 1
                }
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn open_reports_a_missing_version_key() {
    let (dir, store) = fresh();
    store
        .trees
        .tree(TreeId::Meta)
        .remove(b"schema_version")
        .unwrap();
    store.trees.flush().unwrap();
    drop(store);
    let err = Store::open(dir.path().join("s")).unwrap_err();
    assert!(
        matches!(&err, StoreError::MissingKey { tree: "meta", key } if key == "schema_version"),
        "{err:?}"
    );
}

#[test]
fn open_refuses_a_sled_database_of_another_program() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other");
    {
        let db = sled::open(&path).unwrap();
        db.open_tree("accounts").unwrap().insert("k", "v").unwrap();
        db.flush().unwrap();
    }
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
    assert!(
        err.to_string().contains("not an lnet-router store"),
        "{err}"
    );
}

#[test]
fn open_leaves_a_database_it_refuses_as_it_found_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other");
    {
        let db = sled::open(&path).unwrap();
        db.insert("k", "v").unwrap();
        db.flush().unwrap();
    }
    assert!(matches!(
        Store::open(&path),
        Err(StoreError::NotAStore { .. })
    ));
    let db = sled::open(&path).unwrap();
    assert_eq!(db.tree_names(), vec![sled::IVec::from("__sled__default")]);
}

#[test]
fn open_finishes_a_store_whose_creation_stopped_before_the_stamp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    {
        let db = sled::open(&path).unwrap();
        for id in TreeId::ALL {
            db.open_tree(id.name()).unwrap();
        }
        db.flush().unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), schema::SCHEMA_VERSION);
}

#[test]
fn open_refuses_a_database_with_another_magic() {
    let (dir, store) = fresh();
    poke(&store, TreeId::Meta, b"magic", b"someone else");
    drop(store);
    let err = Store::open(dir.path().join("s")).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
}

#[test]
fn open_refuses_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file");
    std::fs::write(&path, b"hello").unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(&err, StoreError::NotAStore { path: p, .. } if p == &path),
        "{err:?}"
    );
}

#[test]
fn open_refuses_a_directory_of_other_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"hello").unwrap();
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
}

#[test]
fn open_creates_a_store_in_an_existing_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), schema::SCHEMA_VERSION);
    assert_eq!(store.path(), dir.path());
}

#[test]
fn open_refuses_an_event_capacity_of_zero() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open_with(dir.path(), StoreOptions { event_capacity: 0 }).unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument { .. }), "{err:?}");
}

#[test]
fn a_store_dropped_and_reopened_at_once_opens_every_time() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..100u32 {
        let store = Store::open(dir.path()).unwrap_or_else(|e| panic!("open {i}: {e}"));
        store.append_event(0, &health(i)).unwrap();
        store.put_peer(&peer("10.0.0.1@tcp", &[])).unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.last_event_id().unwrap(), Some(100));
}

#[test]
fn a_second_open_of_the_same_store_is_an_engine_error() {
    let (dir, _store) = fresh();
    let err = Store::open(dir.path().join("s")).unwrap_err();
    assert!(matches!(err, StoreError::Engine { .. }), "{err:?}");
}

fn step_add_marker_peer(trees: &engine::Trees) -> Result<engine::WriteSet, StoreError> {
    // A v1 -> v2 step for the test: it may read the store and returns its writes.
    assert_eq!(
        schema::read_version(&trees.db, Path::new("x")).unwrap(),
        Some(1)
    );
    let mut set = engine::WriteSet::new();
    set.put_raw(TreeId::Meta, b"step1", b"ran".to_vec());
    Ok(set)
}

fn step_two(trees: &engine::Trees) -> Result<engine::WriteSet, StoreError> {
    assert_eq!(
        schema::read_version(&trees.db, Path::new("x")).unwrap(),
        Some(2)
    );
    let mut set = engine::WriteSet::new();
    set.put_raw(TreeId::Meta, b"step2", b"ran".to_vec());
    Ok(set)
}

fn step_fails(_: &engine::Trees) -> Result<engine::WriteSet, StoreError> {
    Err(StoreError::InvalidArgument {
        what: "step",
        reason: "fails".to_owned(),
    })
}

#[test]
fn migrate_runs_each_step_once_in_order_and_commits_each_version() {
    let (_dir, store) = fresh();
    // Steps that run on a store of version 1.
    poke(&store, TreeId::Meta, b"schema_version", &1u32.to_be_bytes());
    let steps: [schema::Step; 2] = [step_add_marker_peer, step_two];
    assert_eq!(schema::migrate(&store.trees, 1, &steps).unwrap(), 3);
    assert_eq!(
        schema::read_version(&store.trees.db, Path::new("x")).unwrap(),
        Some(3)
    );
    assert!(store
        .trees
        .get_raw(TreeId::Meta, b"step1")
        .unwrap()
        .is_some());
    assert!(store
        .trees
        .get_raw(TreeId::Meta, b"step2")
        .unwrap()
        .is_some());
    // From version 2, only the second step runs.
    store.trees.tree(TreeId::Meta).remove(b"step1").unwrap();
    store.trees.tree(TreeId::Meta).remove(b"step2").unwrap();
    poke(&store, TreeId::Meta, b"schema_version", &2u32.to_be_bytes());
    assert_eq!(schema::migrate(&store.trees, 2, &steps).unwrap(), 3);
    assert!(store
        .trees
        .get_raw(TreeId::Meta, b"step1")
        .unwrap()
        .is_none());
    assert!(store
        .trees
        .get_raw(TreeId::Meta, b"step2")
        .unwrap()
        .is_some());
    // At the newest version, nothing runs.
    assert_eq!(schema::migrate(&store.trees, 3, &steps).unwrap(), 3);
}

#[test]
fn a_failed_migration_step_leaves_the_version_it_started_from() {
    let (_dir, store) = fresh();
    // Steps that run on a store of version 1.
    poke(&store, TreeId::Meta, b"schema_version", &1u32.to_be_bytes());
    let steps: [schema::Step; 2] = [step_add_marker_peer, step_fails];
    let err = schema::migrate(&store.trees, 1, &steps).unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument { .. }));
    assert_eq!(
        schema::read_version(&store.trees.db, Path::new("x")).unwrap(),
        Some(2)
    );
}

#[test]
fn migrate_refuses_a_version_newer_than_its_steps_reach() {
    let (_dir, store) = fresh();
    let steps: [schema::Step; 1] = [step_add_marker_peer];
    let err = schema::migrate(&store.trees, 3, &steps).unwrap_err();
    assert!(matches!(
        err,
        StoreError::NewerSchema {
            found: 3,
            supported: 2
        }
    ));
}

// ---- import and export ----

#[test]
fn import_of_the_kernel_backup_exports_it_back_without_lnd_timeout() {
    let (_dir, store) = fresh();
    let config = parse(BACKUP).unwrap();
    store.import(&config).unwrap();
    let expected: String = BACKUP
        .lines()
        .filter(|l| !l.contains("lnd_timeout"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(store.export().unwrap().to_yaml(), expected);
}

#[test]
fn export_import_into_an_empty_store_export_gives_the_same_yaml() {
    for doc in [BACKUP, FULL_EXPORT] {
        let (_d1, a) = fresh();
        a.import(&parse(doc).unwrap()).unwrap();
        let first = a.export().unwrap();
        let (_d2, b) = fresh();
        b.import(&first).unwrap();
        assert_eq!(b.export().unwrap().to_yaml(), first.to_yaml());
        assert_eq!(b.export().unwrap(), first);
    }
}

#[test]
fn import_of_a_full_export_keeps_only_the_configured_fields() {
    let (_dir, store) = fresh();
    store.import(&parse(FULL_EXPORT).unwrap()).unwrap();
    let out = store.export().unwrap();
    // Nets by id: o2ib (type 5) before lo (type 9).
    assert_eq!(out.nets[0].net_type, net("o2ib"));
    let ni = &out.nets[0].local_nis[1];
    assert_eq!(ni.nid, Some(nid("10.0.0.2@o2ib")));
    assert_eq!(ni.interfaces, ["veth1"]);
    assert!(ni.status.is_none() && ni.statistics.is_none() && ni.health_stats.is_none());
    assert!(ni.tunables.is_some() && ni.lnd_tunables.is_some() && ni.cpt.is_some());
    let p = &out.peers[0];
    assert!(p.peer_state.is_none());
    assert!(p
        .peer_nis
        .iter()
        .all(|n| n.state.is_none() && n.credits.is_none()));
    let g = out.global.unwrap();
    assert_eq!(g.lnd_timeout, None);
    assert_eq!(g.retry_count, Some(2));
}

#[test]
fn import_replaces_the_whole_previous_configuration() {
    let (_dir, store) = fresh();
    store.import(&parse(BACKUP).unwrap()).unwrap();
    store
        .create_token("admin", Role::Admin, "0123456789abcdef-secret")
        .unwrap();
    let small = Config {
        peers: vec![peer("10.1.1.1@tcp", &[])],
        ..Config::default()
    };
    store.import(&small).unwrap();
    assert_eq!(store.export().unwrap(), small);
    assert!(store.tunables().unwrap().is_empty());
    // Tokens are not configuration: an import leaves them.
    assert_eq!(store.tokens().unwrap().len(), 1);
}

#[test]
fn import_refuses_a_document_with_a_key_twice_and_changes_nothing() {
    let (_dir, store) = fresh();
    store.import(&parse(BACKUP).unwrap()).unwrap();
    let before = store.export().unwrap();
    let mut twice = before.clone();
    twice.peers.push(twice.peers[0].clone());
    let err = store.import(&twice).unwrap_err();
    assert!(
        matches!(&err, StoreError::Duplicate { what: "peer", key } if key == "10.0.0.9@tcp"),
        "{err:?}"
    );
    let mut twice = before.clone();
    twice.routes.push(twice.routes[1].clone());
    assert!(matches!(
        store.import(&twice),
        Err(StoreError::Duplicate { what: "route", .. })
    ));
    let mut twice = before.clone();
    twice.nets.push(twice.nets[0].clone());
    assert!(matches!(
        store.import(&twice),
        Err(StoreError::Duplicate { what: "net", .. })
    ));
    assert_eq!(store.export().unwrap(), before);
}

#[test]
fn an_unrepresentable_nid_is_refused_and_nothing_is_written() {
    let (_dir, store) = fresh();
    // `5@lo` reads back as `0@lo`: storing it would change it.
    let bad = Peer {
        primary_nid: nid("10.0.0.1@tcp"),
        multi_rail: false,
        peer_state: None,
        peer_nis: vec![PeerNi::new(Nid::new(Net::LO, 5))],
    };
    let err = store.put_peer(&bad).unwrap_err();
    assert!(matches!(err, StoreError::Unrepresentable { .. }), "{err:?}");
    let err = store
        .import(&Config {
            peers: vec![peer("10.0.0.2@tcp", &[]), bad],
            ..Config::default()
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::Unrepresentable { .. }), "{err:?}");
    assert!(store.peers().unwrap().is_empty());
}

// ---- nets and local NIs ----

#[test]
fn nets_come_back_in_net_id_order_with_their_nis_in_their_own_order() {
    let (_dir, store) = fresh();
    for n in ["o2ib1", "tcp2", "tcp", "o2ib"] {
        store
            .put_net(&NetConfig {
                net_type: net(n),
                local_nis: vec![ni(None, "eth9"), ni(None, "eth1")],
            })
            .unwrap();
    }
    let nets = store.nets().unwrap();
    let order: Vec<String> = nets.iter().map(|n| n.net_type.to_string()).collect();
    assert_eq!(order, ["tcp", "tcp2", "o2ib", "o2ib1"]);
    assert_eq!(nets[0].local_nis[0].interfaces, ["eth9"]);
    assert_eq!(nets[0].local_nis[1].interfaces, ["eth1"]);
}

#[test]
fn put_net_replaces_the_net_of_that_type() {
    let (_dir, store) = fresh();
    let a = NetConfig {
        net_type: net("tcp"),
        local_nis: vec![ni(None, "eth0")],
    };
    let b = NetConfig {
        net_type: net("tcp"),
        local_nis: vec![ni(Some("10.0.0.1@tcp"), "eth1")],
    };
    store.put_net(&a).unwrap();
    store.put_net(&b).unwrap();
    assert_eq!(store.nets().unwrap(), vec![b.clone()]);
    assert_eq!(store.net(net("tcp")).unwrap(), Some(b));
    assert_eq!(store.net(net("o2ib")).unwrap(), None);
}

#[test]
fn add_local_ni_creates_the_net_then_appends() {
    let (_dir, store) = fresh();
    store
        .add_local_ni(net("tcp1"), &ni(Some("10.0.0.1@tcp1"), "eth0"))
        .unwrap();
    store.add_local_ni(net("tcp1"), &ni(None, "eth1")).unwrap();
    let n = store.net(net("tcp1")).unwrap().unwrap();
    assert_eq!(n.local_nis.len(), 2);
    assert_eq!(n.local_nis[0].nid, Some(nid("10.0.0.1@tcp1")));
    assert_eq!(n.local_nis[1].interfaces, ["eth1"]);
}

#[test]
fn add_local_ni_refuses_an_ni_the_net_has_and_one_without_nid_or_interface() {
    let (_dir, store) = fresh();
    store
        .add_local_ni(net("tcp"), &ni(Some("10.0.0.1@tcp"), "eth0"))
        .unwrap();
    store.add_local_ni(net("tcp"), &ni(None, "eth1")).unwrap();
    assert!(matches!(
        store.add_local_ni(net("tcp"), &ni(Some("10.0.0.1@tcp"), "eth7")),
        Err(StoreError::AlreadyExists {
            what: "local NI",
            ..
        })
    ));
    assert!(matches!(
        store.add_local_ni(net("tcp"), &ni(None, "eth1")),
        Err(StoreError::AlreadyExists {
            what: "local NI",
            ..
        })
    ));
    assert!(matches!(
        store.add_local_ni(net("tcp"), &LocalNi::default()),
        Err(StoreError::InvalidArgument { .. })
    ));
    assert_eq!(store.net(net("tcp")).unwrap().unwrap().local_nis.len(), 2);
}

#[test]
fn delete_local_ni_by_nid_and_by_interface() {
    let (_dir, store) = fresh();
    store
        .add_local_ni(net("tcp"), &ni(Some("10.0.0.1@tcp"), "eth0"))
        .unwrap();
    store.add_local_ni(net("tcp"), &ni(None, "eth1")).unwrap();
    store.add_local_ni(net("tcp"), &ni(None, "eth2")).unwrap();
    store
        .delete_local_ni(net("tcp"), &LocalNiId::Nid(nid("10.0.0.1@tcp")))
        .unwrap();
    store
        .delete_local_ni(net("tcp"), &LocalNiId::Interface("eth2".to_owned()))
        .unwrap();
    let left = store.net(net("tcp")).unwrap().unwrap().local_nis;
    assert_eq!(left, vec![ni(None, "eth1")]);
    assert!(matches!(
        store.delete_local_ni(net("tcp"), &LocalNiId::Interface("eth0".to_owned())),
        Err(StoreError::NotFound {
            what: "local NI",
            ..
        })
    ));
    assert!(matches!(
        store.delete_local_ni(net("o2ib"), &LocalNiId::Interface("eth1".to_owned())),
        Err(StoreError::NotFound {
            what: "local NI",
            ..
        })
    ));
}

#[test]
fn local_ni_id_names_by_nid_first_then_interface() {
    assert_eq!(
        LocalNiId::of(&ni(Some("10.0.0.1@tcp"), "eth0")),
        Some(LocalNiId::Nid(nid("10.0.0.1@tcp")))
    );
    assert_eq!(
        LocalNiId::of(&ni(None, "eth0")),
        Some(LocalNiId::Interface("eth0".to_owned()))
    );
    assert_eq!(LocalNiId::of(&LocalNi::default()), None);
}

#[test]
fn delete_net_removes_it_with_its_nis_and_reports_a_missing_one() {
    let (_dir, store) = fresh();
    store.add_local_ni(net("tcp"), &ni(None, "eth0")).unwrap();
    store.delete_net(net("tcp")).unwrap();
    assert!(store.nets().unwrap().is_empty());
    let err = store.delete_net(net("tcp")).unwrap_err();
    assert!(matches!(&err, StoreError::NotFound { what: "net", key } if key == "tcp"));
}

// ---- peers and peer NIs ----

#[test]
fn peers_come_back_in_binary_nid_order() {
    let (_dir, store) = fresh();
    for p in [
        "10.0.0.9@o2ib",
        "10.0.0.10@tcp",
        "10.0.0.2@tcp",
        "10.0.0.1@tcp1",
    ] {
        store.put_peer(&peer(p, &[])).unwrap();
    }
    let got: Vec<String> = store
        .peers()
        .unwrap()
        .iter()
        .map(|p| p.primary_nid.to_string())
        .collect();
    assert_eq!(
        got,
        [
            "10.0.0.2@tcp",
            "10.0.0.10@tcp",
            "10.0.0.1@tcp1",
            "10.0.0.9@o2ib"
        ]
    );
}

#[test]
fn put_peer_keeps_multi_rail_and_the_nids_in_order_and_replaces() {
    let (_dir, store) = fresh();
    let p = peer("10.0.0.1@tcp", &["10.0.1.1@o2ib", "10.0.0.7@tcp"]);
    store.put_peer(&p).unwrap();
    assert_eq!(store.peer(&nid("10.0.0.1@tcp")).unwrap(), Some(p));
    let q = peer("10.0.0.1@tcp", &[]);
    store.put_peer(&q).unwrap();
    assert_eq!(store.peers().unwrap(), vec![q]);
    assert_eq!(store.peer(&nid("10.0.0.2@tcp")).unwrap(), None);
}

#[test]
fn add_and_delete_peer_ni() {
    let (_dir, store) = fresh();
    store.put_peer(&peer("10.0.0.1@tcp", &[])).unwrap();
    store
        .add_peer_ni(&nid("10.0.0.1@tcp"), &nid("10.0.5.1@o2ib"))
        .unwrap();
    assert_eq!(
        store.peer(&nid("10.0.0.1@tcp")).unwrap(),
        Some(peer("10.0.0.1@tcp", &["10.0.5.1@o2ib"])).map(|mut p| {
            p.multi_rail = false;
            p
        })
    );
    assert!(matches!(
        store.add_peer_ni(&nid("10.0.0.1@tcp"), &nid("10.0.5.1@o2ib")),
        Err(StoreError::AlreadyExists {
            what: "peer NI",
            ..
        })
    ));
    assert!(matches!(
        store.add_peer_ni(&nid("10.0.0.2@tcp"), &nid("10.0.5.1@o2ib")),
        Err(StoreError::NotFound { what: "peer", .. })
    ));
    store
        .delete_peer_ni(&nid("10.0.0.1@tcp"), &nid("10.0.5.1@o2ib"))
        .unwrap();
    assert_eq!(
        store.peer(&nid("10.0.0.1@tcp")).unwrap().unwrap().peer_nis,
        vec![PeerNi::new(nid("10.0.0.1@tcp"))]
    );
    assert!(matches!(
        store.delete_peer_ni(&nid("10.0.0.1@tcp"), &nid("10.0.5.1@o2ib")),
        Err(StoreError::NotFound {
            what: "peer NI",
            ..
        })
    ));
}

#[test]
fn delete_peer_removes_it_and_reports_a_missing_one() {
    let (_dir, store) = fresh();
    store
        .put_peer(&peer("10.0.0.1@tcp", &["10.0.0.2@tcp"]))
        .unwrap();
    store.delete_peer(&nid("10.0.0.1@tcp")).unwrap();
    assert!(store.peers().unwrap().is_empty());
    assert!(matches!(
        store.delete_peer(&nid("10.0.0.1@tcp")),
        Err(StoreError::NotFound { what: "peer", .. })
    ));
}

#[test]
fn ipv6_nids_are_stored_and_read_back() {
    let (_dir, store) = fresh();
    let p = peer("fd00::1@tcp", &["fd00::2@o2ib"]);
    store.put_peer(&p).unwrap();
    assert_eq!(store.peers().unwrap(), vec![p]);
}

// ---- routes ----

#[test]
fn routes_keep_hop_priority_and_sensitivity_in_net_then_gateway_order() {
    let (_dir, store) = fresh();
    let mut r1 = route("o2ib7", "10.0.0.8@o2ib", Some(-1), Some(0));
    r1.health_sensitivity = Some(100);
    let r2 = route("tcp5", "10.0.0.9@tcp", Some(2), Some(1));
    let r3 = route("tcp5", "10.0.0.3@tcp", None, None);
    for r in [&r1, &r2, &r3] {
        store.add_route(r).unwrap();
    }
    assert_eq!(store.routes().unwrap(), vec![r3, r2, r1]);
}

#[test]
fn add_route_refuses_the_same_net_and_gateway_twice() {
    let (_dir, store) = fresh();
    store
        .add_route(&route("tcp5", "10.0.0.9@tcp", Some(1), None))
        .unwrap();
    let err = store
        .add_route(&route("tcp5", "10.0.0.9@tcp", Some(3), None))
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::AlreadyExists { what: "route", key } if key == "tcp5 via 10.0.0.9@tcp"),
        "{err:?}"
    );
    assert_eq!(store.routes().unwrap()[0].hop, Some(1));
}

#[test]
fn delete_route_removes_only_that_route() {
    let (_dir, store) = fresh();
    store
        .add_route(&route("tcp5", "10.0.0.9@tcp", None, None))
        .unwrap();
    store
        .add_route(&route("tcp5", "10.0.0.8@tcp", None, None))
        .unwrap();
    store
        .delete_route(net("tcp5"), &nid("10.0.0.9@tcp"))
        .unwrap();
    assert_eq!(
        store.routes().unwrap(),
        vec![route("tcp5", "10.0.0.8@tcp", None, None)]
    );
    assert!(matches!(
        store.delete_route(net("tcp5"), &nid("10.0.0.9@tcp")),
        Err(StoreError::NotFound { what: "route", .. })
    ));
}

// ---- tunables ----

#[test]
fn set_tunable_reads_back_and_exports_in_its_section() {
    let (_dir, store) = fresh();
    store.set_tunable(TunableName::RetryCount, 3).unwrap();
    store.set_tunable(TunableName::TinyBuffers, 1024).unwrap();
    store.set_tunable(TunableName::Routing, 1).unwrap();
    store.set_tunable(TunableName::RetryCount, 2).unwrap();
    assert_eq!(store.tunable(TunableName::RetryCount).unwrap(), Some(2));
    assert_eq!(store.tunable(TunableName::Discovery).unwrap(), None);
    assert_eq!(
        store.tunables().unwrap(),
        vec![
            (TunableName::RetryCount, 2),
            (TunableName::Routing, 1),
            (TunableName::TinyBuffers, 1024)
        ]
    );
    let out = store.export().unwrap();
    assert_eq!(out.global.unwrap().retry_count, Some(2));
    assert_eq!(out.buffers.unwrap().tiny, Some(1024));
    assert_eq!(
        out.routing.unwrap().enable,
        lnet::config::RoutingState::Enabled
    );
}

#[test]
fn set_tunable_refuses_a_routing_state_above_3() {
    let (_dir, store) = fresh();
    assert!(matches!(
        store.set_tunable(TunableName::Routing, 4),
        Err(StoreError::InvalidArgument { .. })
    ));
    store.set_tunable(TunableName::Routing, 3).unwrap();
}

#[test]
fn unset_tunable_forgets_it_and_says_whether_it_was_set() {
    let (_dir, store) = fresh();
    store.set_tunable(TunableName::Discovery, 0).unwrap();
    assert!(store.unset_tunable(TunableName::Discovery).unwrap());
    assert!(!store.unset_tunable(TunableName::Discovery).unwrap());
    assert_eq!(store.export().unwrap().global, None);
}

// ---- UDSP ----

#[test]
fn add_udsp_appends_or_inserts_and_numbers_rules_by_position() {
    let (_dir, store) = fresh();
    assert_eq!(store.add_udsp(&udsp("tcp", 0)).unwrap(), 0);
    assert_eq!(store.add_udsp(&udsp("tcp1", 1)).unwrap(), 1);
    let first = UdspRule {
        idx: Some(0),
        ..udsp("o2ib", 2)
    };
    assert_eq!(store.add_udsp(&first).unwrap(), 0);
    let far = UdspRule {
        idx: Some(99),
        ..udsp("o2ib9", 3)
    };
    assert_eq!(store.add_udsp(&far).unwrap(), 3);
    let rules = store.udsp_rules().unwrap();
    let got: Vec<(Option<u32>, &str)> = rules
        .iter()
        .map(|r| (r.idx, r.src.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(0), "o2ib"),
            (Some(1), "tcp"),
            (Some(2), "tcp1"),
            (Some(3), "o2ib9")
        ]
    );
}

#[test]
fn set_udsp_rules_replaces_the_list_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::open(&path).unwrap();
    for s in ["a", "b", "c"] {
        store.add_udsp(&udsp(s, 1)).unwrap();
    }
    store
        .set_udsp_rules(&[udsp("tcp9", 4), udsp("tcp8", 5)])
        .unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    let got: Vec<(Option<u32>, String, Option<u32>)> = store
        .udsp_rules()
        .unwrap()
        .into_iter()
        .map(|r| (r.idx, r.src.unwrap(), r.priority))
        .collect();
    assert_eq!(
        got,
        [
            (Some(0), "tcp9".to_owned(), Some(4)),
            (Some(1), "tcp8".to_owned(), Some(5))
        ]
    );
    store.set_udsp_rules(&[]).unwrap();
    assert!(store.udsp_rules().unwrap().is_empty());
}

#[test]
fn delete_udsp_moves_the_later_rules_up() {
    let (_dir, store) = fresh();
    for s in ["a", "b", "c", "d"] {
        store.add_udsp(&udsp(s, 0)).unwrap();
    }
    store.delete_udsp(1).unwrap();
    store.delete_udsp(2).unwrap();
    let src: Vec<String> = store
        .udsp_rules()
        .unwrap()
        .into_iter()
        .map(|r| format!("{}:{}", r.idx.unwrap(), r.src.unwrap()))
        .collect();
    assert_eq!(src, ["0:a", "1:c"]);
    assert!(matches!(
        store.delete_udsp(2),
        Err(StoreError::NotFound {
            what: "UDSP rule",
            ..
        })
    ));
}

// ---- fault rules ----

#[test]
fn fault_rules_are_kept_by_ni_with_ids_that_are_never_reused() {
    let (dir, store) = fresh();
    let a = store.add_fault_rule(&drop_rule("10.0.0.2@tcp")).unwrap();
    let mut delay = drop_rule("10.0.0.1@tcp");
    delay.kind = FaultKind::Delay { latency_ms: 5000 };
    delay.health_error = None;
    delay.trigger = FaultTrigger::Interval(3);
    delay.source = NidMatch::Nid(nid("10.0.0.7@tcp"));
    let b = store.add_fault_rule(&delay).unwrap();
    assert!(b > a);
    let all = store.fault_rules().unwrap();
    assert_eq!(
        all,
        vec![
            StoredFaultRule {
                id: b,
                rule: delay.clone()
            },
            StoredFaultRule {
                id: a,
                rule: drop_rule("10.0.0.2@tcp")
            }
        ],
        "by NI, then id"
    );
    assert_eq!(store.fault_rules_of(&nid("10.0.0.1@tcp")).unwrap().len(), 1);
    store.delete_fault_rule(b).unwrap();
    let store = reopen(&dir, store);
    let c = store.add_fault_rule(&delay).unwrap();
    assert!(c > b, "ids are not reused after a delete and a restart");
    assert!(matches!(
        store.delete_fault_rule(b),
        Err(StoreError::NotFound {
            what: "fault rule",
            ..
        })
    ));
}

#[test]
fn put_fault_rule_keeps_the_given_id_and_moves_the_counter_past_it() {
    let (dir, store) = fresh();
    store.put_fault_rule(5, &drop_rule("10.0.0.1@tcp")).unwrap();
    store.put_fault_rule(5, &drop_rule("10.0.0.2@tcp")).unwrap();
    let all = store.fault_rules().unwrap();
    assert_eq!(
        all,
        vec![StoredFaultRule {
            id: 5,
            rule: drop_rule("10.0.0.2@tcp")
        }],
        "one rule per id"
    );
    let store = reopen(&dir, store);
    assert_eq!(store.add_fault_rule(&drop_rule("10.0.0.1@tcp")).unwrap(), 6);
    let mut bad = drop_rule("10.0.0.1@tcp");
    bad.trigger = FaultTrigger::Interval(0);
    assert!(matches!(
        store.put_fault_rule(9, &bad),
        Err(StoreError::FaultRule(FaultRuleError::ZeroInterval))
    ));
}

#[test]
fn clear_fault_rules_removes_the_rules_of_one_ni() {
    let (_dir, store) = fresh();
    store.add_fault_rule(&drop_rule("10.0.0.1@tcp")).unwrap();
    store.add_fault_rule(&drop_rule("10.0.0.1@tcp")).unwrap();
    store.add_fault_rule(&drop_rule("10.0.0.2@tcp")).unwrap();
    assert_eq!(store.clear_fault_rules(&nid("10.0.0.1@tcp")).unwrap(), 2);
    assert_eq!(store.fault_rules().unwrap().len(), 1);
    assert_eq!(store.clear_fault_rules(&nid("10.0.0.1@tcp")).unwrap(), 0);
}

#[test]
fn fault_rules_refuse_what_lnetctl_refuses() {
    let (_dir, store) = fresh();
    let mut r = drop_rule("10.0.0.1@tcp");
    r.trigger = FaultTrigger::Rate(0);
    assert!(matches!(
        store.add_fault_rule(&r),
        Err(StoreError::FaultRule(FaultRuleError::ZeroRate))
    ));
    r.trigger = FaultTrigger::Interval(0);
    assert!(store.add_fault_rule(&r).is_err());
    let mut d = drop_rule("10.0.0.1@tcp");
    d.kind = FaultKind::Delay { latency_ms: 1000 };
    assert!(
        store.add_fault_rule(&d).is_err(),
        "a delay rule has no health error"
    );
    assert!(store.fault_rules().unwrap().is_empty());
}

#[test]
fn a_rule_of_every_ni_is_kept_and_deleted_by_its_id() {
    let (dir, store) = fresh();
    let mut node_wide = drop_rule("10.0.0.1@tcp");
    node_wide.local_nid = None;
    let a = store.add_fault_rule(&node_wide).unwrap();
    let b = store.add_fault_rule(&drop_rule("10.0.0.1@tcp")).unwrap();
    let store = reopen(&dir, store);
    let kept = store.fault_rules().unwrap();
    assert_eq!(kept.len(), 2);
    assert!(kept.iter().any(|r| r.id == a && r.rule.local_nid.is_none()));
    store.delete_fault_rule(a).unwrap();
    assert!(matches!(
        store.delete_fault_rule(a),
        Err(StoreError::NotFound { .. })
    ));
    let left: Vec<u32> = store.fault_rules().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(left, [b]);
}

#[test]
fn fault_rule_json_uses_lnetctl_spellings() {
    let json = serde_json::to_value(drop_rule("10.0.0.2@tcp")).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "local_nid": "10.0.0.2@tcp",
            "kind": "drop",
            "source": "*",
            "dest": "*@o2ib1",
            "trigger": {"rate": 10},
            "portals": [4],
            "message_types": ["put", "get"],
            "health_error": "remote_timeout",
            "seed": 1
        })
    );
}

#[test]
fn nid_match_reads_lnetctl_forms() {
    assert_eq!("*".parse::<NidMatch>(), Ok(NidMatch::Any));
    assert_eq!("*@tcp1".parse::<NidMatch>(), Ok(NidMatch::Net(net("tcp1"))));
    assert_eq!(
        "10.0.0.1@o2ib".parse::<NidMatch>(),
        Ok(NidMatch::Nid(nid("10.0.0.1@o2ib")))
    );
    assert!("*@nonet".parse::<NidMatch>().is_err());
}

// ---- tokens ----

#[test]
fn create_token_stores_only_the_sha256_of_the_secret() {
    let (_dir, store) = fresh();
    let secret = "s3cret-s3cret-s3cret";
    store.create_token("ops", Role::Admin, secret).unwrap();
    let raw = store.trees.scan_raw(TreeId::Tokens).unwrap();
    assert_eq!(raw.len(), 1);
    let text = String::from_utf8(raw[0].1.clone()).unwrap();
    assert!(!text.contains(secret));
    // SHA-256("s3cret-s3cret-s3cret"), computed independently.
    use sha2::Digest;
    let expected = keys::hex(&sha2::Sha256::digest(secret.as_bytes()));
    assert!(text.contains(&expected), "{text}");
    assert_eq!(expected.len(), 64);
}

#[test]
fn verify_token_finds_the_token_of_a_secret_and_nothing_for_another() {
    let (_dir, store) = fresh();
    store
        .create_token("ops", Role::Admin, "admin-secret-0000001")
        .unwrap();
    store
        .create_token("dash", Role::Reader, "reader-secret-000001")
        .unwrap();
    assert_eq!(
        store.verify_token("reader-secret-000001").unwrap(),
        Some(TokenInfo {
            name: "dash".to_owned(),
            role: Role::Reader,
            created_ms: None,
        })
    );
    assert_eq!(
        store
            .verify_token("admin-secret-0000001")
            .unwrap()
            .map(|t| t.role),
        Some(Role::Admin)
    );
    assert_eq!(store.verify_token("admin-secret-0000002").unwrap(), None);
    assert_eq!(store.verify_token("").unwrap(), None);
}

#[test]
fn a_token_keeps_its_creation_time_and_never_its_secret() {
    let (dir, store) = fresh();
    let secret = "made-at-secret-000001";
    store
        .create_token_at("ci", Role::Admin, secret, 1_764_000_000_123)
        .unwrap();
    store
        .create_token("file", Role::Reader, "from-file-secret-0001")
        .unwrap();
    let listed = store.tokens().unwrap();
    assert_eq!(
        listed,
        vec![
            TokenInfo {
                name: "ci".to_owned(),
                role: Role::Admin,
                created_ms: Some(1_764_000_000_123),
            },
            TokenInfo {
                name: "file".to_owned(),
                role: Role::Reader,
                created_ms: None,
            },
        ]
    );
    assert_eq!(
        store
            .verify_token(secret)
            .unwrap()
            .and_then(|t| t.created_ms),
        Some(1_764_000_000_123)
    );
    // Reopened: the same list; the secret is in none of the store's files.
    let store = reopen(&dir, store);
    assert_eq!(store.tokens().unwrap(), listed);
    let path = store.path().to_owned();
    drop(store);
    for entry in std::fs::read_dir(path).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn tokens_are_listed_by_name_and_revoked() {
    let (_dir, store) = fresh();
    store
        .create_token("zeta", Role::Reader, "zeta-secret-00000001")
        .unwrap();
    store
        .create_token("alpha", Role::Admin, "alpha-secret-0000001")
        .unwrap();
    let names: Vec<String> = store
        .tokens()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["alpha", "zeta"]);
    store.revoke_token("alpha").unwrap();
    assert_eq!(store.verify_token("alpha-secret-0000001").unwrap(), None);
    assert!(matches!(
        store.revoke_token("alpha"),
        Err(StoreError::NotFound { what: "token", .. })
    ));
}

#[test]
fn create_token_refuses_bad_names_short_secrets_and_duplicates() {
    let (_dir, store) = fresh();
    for bad in ["", "has space", "é", &"x".repeat(MAX_TOKEN_NAME + 1)] {
        assert!(
            matches!(
                store.create_token(bad, Role::Reader, "long-enough-secret-1"),
                Err(StoreError::InvalidArgument {
                    what: "token name",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        store.create_token("short", Role::Reader, "too-short"),
        Err(StoreError::InvalidArgument {
            what: "token secret",
            ..
        })
    ));
    store
        .create_token("a", Role::Reader, "long-enough-secret-1")
        .unwrap();
    assert!(matches!(
        store.create_token("a", Role::Admin, "long-enough-secret-2"),
        Err(StoreError::AlreadyExists { what: "token", .. })
    ));
    assert!(matches!(
        store.create_token("b", Role::Admin, "long-enough-secret-1"),
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(store.tokens().unwrap().len(), 1);
}

// ---- events ----

fn health(n: u32) -> Event {
    Event::NiHealth {
        nid: nid("10.0.0.1@tcp"),
        before: 1000,
        after: 1000 - n,
        cause: Some(HealthStatus::LocalTimeout),
    }
}

#[test]
fn events_get_increasing_ids_from_1_and_page_with_events_after() {
    let (_dir, store) = fresh();
    assert_eq!(store.last_event_id().unwrap(), None);
    for i in 0..5 {
        assert_eq!(
            store.append_event(100 + u64::from(i), &health(i)).unwrap(),
            u64::from(i) + 1
        );
    }
    assert_eq!(store.last_event_id().unwrap(), Some(5));
    let page = store.events_after(0, 2).unwrap();
    assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(page[0].at_ms, 100);
    assert_eq!(page[1].event, health(1));
    let page = store.events_after(2, 10).unwrap();
    assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), [3, 4, 5]);
    assert!(store.events_after(5, 10).unwrap().is_empty());
    assert!(store.events_after(u64::MAX, 10).unwrap().is_empty());
}

#[test]
fn the_event_log_keeps_the_last_capacity_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), StoreOptions { event_capacity: 3 }).unwrap();
    for i in 0..7 {
        store.append_event(u64::from(i), &health(i)).unwrap();
    }
    let ids: Vec<u64> = store
        .events_after(0, 100)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, [5, 6, 7]);
    // One batch larger than the log keeps only its own last events.
    let batch: Vec<(u64, Event)> = (0..5).map(|i| (i, health(1))).collect();
    assert_eq!(store.append_events(&batch).unwrap(), [8, 9, 10, 11, 12]);
    let ids: Vec<u64> = store
        .events_after(0, 100)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, [10, 11, 12]);
}

#[test]
fn event_ids_continue_after_a_restart_and_a_lower_capacity_trims_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), StoreOptions { event_capacity: 10 }).unwrap();
    for i in 0..6 {
        store.append_event(0, &health(i)).unwrap();
    }
    drop(store);
    let store = Store::open_with(dir.path(), StoreOptions { event_capacity: 2 }).unwrap();
    let ids: Vec<u64> = store
        .events_after(0, 100)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, [5, 6]);
    assert_eq!(store.append_event(0, &health(0)).unwrap(), 7);
}

#[test]
fn events_before_pages_back_from_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), StoreOptions { event_capacity: 10 }).unwrap();
    assert!(store.events_before(u64::MAX, 5).unwrap().is_empty());
    assert_eq!(store.first_event_id().unwrap(), None);
    for i in 0..12 {
        store.append_event(u64::from(i), &health(i)).unwrap();
    }
    let ids = |page: Vec<EventRecord>| page.iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.events_before(u64::MAX, 4).unwrap()),
        [9, 10, 11, 12]
    );
    assert_eq!(ids(store.events_before(9, 4).unwrap()), [5, 6, 7, 8]);
    // The log keeps ids 3..=12: the last page back is short, then empty.
    assert_eq!(ids(store.events_before(5, 4).unwrap()), [3, 4]);
    assert!(store.events_before(3, 4).unwrap().is_empty());
    assert_eq!(store.first_event_id().unwrap(), Some(3));
}

#[test]
fn events_appended_with_their_writers_ids_keep_them_and_the_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), StoreOptions { event_capacity: 3 }).unwrap();
    store
        .append_event_with_id(1, 10, Some(1_700_000_000_000), &health(1))
        .unwrap();
    // Id 2 was never recorded by its writer: the log skips it.
    store.append_event_with_id(3, 30, None, &health(3)).unwrap();
    let got = store.events_after(0, 10).unwrap();
    assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(got[0].wall_ms, Some(1_700_000_000_000));
    assert_eq!(got[1].wall_ms, None);
    assert!(matches!(
        store.append_event_with_id(3, 0, None, &health(0)),
        Err(StoreError::InvalidArgument { what: "event", .. })
    ));
    assert_eq!(store.last_event_id().unwrap(), Some(3));
    // A jump past the capacity leaves only what the capacity keeps.
    store.append_event_with_id(9, 90, None, &health(9)).unwrap();
    let got = store.events_after(0, 10).unwrap();
    assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), [9]);
    assert_eq!(store.append_event(0, &health(0)).unwrap(), 10);
}

#[test]
fn events_serialize_as_tagged_json_with_nids_as_text() {
    let e = Event::RouteState {
        net: net("o2ib1"),
        gateway: nid("10.0.0.9@tcp"),
        up: false,
        reason: Some("gateway reports o2ib1 down".to_owned()),
    };
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "kind": "route_state", "net": "o2ib1", "gateway": "10.0.0.9@tcp",
            "up": false, "reason": "gateway reports o2ib1 down"
        })
    );
    let r = Event::Resend {
        status: HealthStatus::RemoteDropped,
        from_ni: nid("10.0.0.1@tcp"),
        to_peer_ni: nid("10.0.0.2@tcp"),
        retry: 1,
    };
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["status"], "REMOTE_DROPPED");
    assert_eq!(serde_json::from_value::<Event>(json).unwrap(), r);
}

// ---- bytes on disk that are not what the store wrote ----

fn expect_corrupt_value(err: StoreError, want_tree: &str, want_key: &str) {
    match err {
        StoreError::CorruptValue { tree, key, .. } => {
            assert_eq!((tree, key.as_str()), (want_tree, want_key));
        }
        other => panic!("expected a corrupt value in {want_tree}, got {other:?}"),
    }
}

fn expect_corrupt_key(err: StoreError, want_tree: &str) {
    match err {
        StoreError::CorruptKey { tree, .. } => assert_eq!(tree, want_tree),
        other => panic!("expected a corrupt key in {want_tree}, got {other:?}"),
    }
}

#[test]
fn a_corrupt_peer_value_is_an_error_naming_the_tree_and_key() {
    let (_dir, store) = fresh();
    let key = keys::nid_key(&nid("10.0.0.1@tcp"));
    poke(&store, TreeId::Peers, &key, b"{\"multi_rail\": tru");
    let err = store.peers().unwrap_err();
    let text = err.to_string();
    expect_corrupt_value(err, "peers", &keys::hex(&key));
    assert!(
        text.contains("peers") && text.contains(&keys::hex(&key)),
        "{text}"
    );
    expect_corrupt_value(store.export().unwrap_err(), "peers", &keys::hex(&key));
    expect_corrupt_value(
        store
            .add_peer_ni(&nid("10.0.0.1@tcp"), &nid("10.0.0.2@tcp"))
            .unwrap_err(),
        "peers",
        &keys::hex(&key),
    );
}

#[test]
fn a_stored_nid_that_does_not_parse_is_a_corrupt_value() {
    let (_dir, store) = fresh();
    let key = keys::nid_key(&nid("10.0.0.1@tcp"));
    poke(
        &store,
        TreeId::Peers,
        &key,
        br#"{"multi_rail":false,"peer_nis":["10.0.0.999@tcp"]}"#,
    );
    expect_corrupt_value(store.peers().unwrap_err(), "peers", &keys::hex(&key));
}

#[test]
fn a_value_with_an_unknown_field_is_a_corrupt_value() {
    let (_dir, store) = fresh();
    let key = keys::route_key(net("tcp5"), &nid("10.0.0.1@tcp"));
    poke(&store, TreeId::Routes, &key, br#"{"hop":1,"colour":"red"}"#);
    expect_corrupt_value(store.routes().unwrap_err(), "routes", &keys::hex(&key));
}

#[test]
fn a_key_of_the_wrong_length_is_a_corrupt_key() {
    let (_dir, store) = fresh();
    poke(&store, TreeId::Routes, b"short", br#"{}"#);
    let err = store.routes().unwrap_err();
    assert!(err.to_string().contains("routes"), "{err}");
    expect_corrupt_key(err, "routes");
}

#[test]
fn a_nid_key_that_is_not_canonical_is_a_corrupt_key() {
    let (_dir, store) = fresh();
    let mut key = keys::nid_key(&nid("10.0.0.1@tcp"));
    key[19] = 1; // bytes past a 4-byte address
    poke(
        &store,
        TreeId::Peers,
        &key,
        br#"{"multi_rail":false,"peer_nis":[]}"#,
    );
    expect_corrupt_key(store.peers().unwrap_err(), "peers");
    let mut key = keys::nid_key(&nid("10.0.0.1@tcp"));
    key[0] = 7; // an address size that does not exist
    poke(
        &store,
        TreeId::Peers,
        &key,
        br#"{"multi_rail":false,"peer_nis":[]}"#,
    );
    expect_corrupt_key(store.peers().unwrap_err(), "peers");
}

#[test]
fn a_corrupt_net_key_and_net_value_are_errors() {
    let (_dir, store) = fresh();
    poke(&store, TreeId::Nets, &[1, 0, 2, 0], br#"{"local_nis":[]}"#);
    expect_corrupt_key(store.nets().unwrap_err(), "nets");
    let (_dir, store) = fresh();
    let key = keys::net_key(net("tcp"));
    poke(
        &store,
        TreeId::Nets,
        &key,
        br#"{"local_nis":[{"nid":null}]}"#,
    );
    expect_corrupt_value(store.nets().unwrap_err(), "nets", &keys::hex(&key));
}

#[test]
fn corrupt_tunables_name_their_key() {
    let (_dir, store) = fresh();
    poke(&store, TreeId::Tunables, b"retry_count", b"\x01\x02");
    expect_corrupt_value(store.tunables().unwrap_err(), "tunables", "retry_count");
    expect_corrupt_value(
        store.tunable(TunableName::RetryCount).unwrap_err(),
        "tunables",
        "retry_count",
    );
    let (_dir, store) = fresh();
    poke(
        &store,
        TreeId::Tunables,
        b"no_such_tunable",
        &1u32.to_be_bytes(),
    );
    expect_corrupt_key(store.tunables().unwrap_err(), "tunables");
    let (_dir, store) = fresh();
    poke(&store, TreeId::Tunables, b"routing", &9u32.to_be_bytes());
    expect_corrupt_value(store.export().unwrap_err(), "tunables", "routing");
}

#[test]
fn corrupt_events_tokens_faults_and_udsp_are_errors() {
    let (_dir, store) = fresh();
    store.append_event(1, &health(1)).unwrap();
    poke(
        &store,
        TreeId::Events,
        &keys::u64_key(1),
        br#"{"at_ms":1,"event":{"kind":"x"}}"#,
    );
    expect_corrupt_value(
        store.events_after(0, 10).unwrap_err(),
        "events",
        &keys::hex(&keys::u64_key(1)),
    );

    let (_dir, store) = fresh();
    poke(
        &store,
        TreeId::Tokens,
        b"ops",
        br#"{"role":"admin","sha256":"zz"}"#,
    );
    expect_corrupt_value(store.tokens().unwrap_err(), "tokens", "ops");
    expect_corrupt_value(
        store.verify_token("anything-at-all-1").unwrap_err(),
        "tokens",
        "ops",
    );

    let (_dir, store) = fresh();
    let id = store.add_fault_rule(&drop_rule("10.0.0.1@tcp")).unwrap();
    let other = serde_json::to_vec(&drop_rule("10.0.0.2@tcp")).unwrap();
    let key = keys::fault_key(&nid("10.0.0.1@tcp"), id);
    poke(&store, TreeId::Faults, &key, &other);
    expect_corrupt_value(store.fault_rules().unwrap_err(), "faults", &keys::hex(&key));

    let (_dir, store) = fresh();
    poke(&store, TreeId::Udsp, &keys::u32_key(0), b"[]");
    expect_corrupt_value(
        store.udsp_rules().unwrap_err(),
        "udsp",
        &keys::hex(&keys::u32_key(0)),
    );
}

#[test]
fn a_corrupt_event_counter_is_an_error_naming_meta() {
    let (_dir, store) = fresh();
    poke(&store, TreeId::Meta, b"next_event_id", b"\x00");
    expect_corrupt_value(
        store.append_event(0, &health(0)).unwrap_err(),
        "meta",
        "next_event_id",
    );
}

// ---- property tests: keys and values ----

mod props {
    use super::*;
    use crate::records::{NetRecord, PeerRecord, RouteRecord, UdspRecord};
    use lnet::nid::{LndType, NidAddr};
    use proptest::prelude::*;

    fn any_net() -> impl Strategy<Value = Net> {
        (0u8..0xFF, any::<u16>()).prop_map(|(t, n)| Net::new(LndType(t), n))
    }

    /// Any NID the binary form can hold (not the ANY wildcard type).
    fn any_nid() -> impl Strategy<Value = Nid> {
        prop_oneof![
            (any_net(), any::<u32>()).prop_map(|(net, a)| Nid::new(net, a)),
            (any_net(), any::<[u8; 16]>()).prop_map(|(net, a)| Nid {
                net,
                addr: NidAddr::V6(a)
            }),
        ]
    }

    /// NIDs as configurations hold them: the ones whose text form reads back.
    fn text_nid() -> impl Strategy<Value = Nid> {
        let ip_net = (
            prop_oneof![Just(LndType::SOCKLND), Just(LndType::O2IBLND)],
            any::<u16>(),
        )
            .prop_map(|(t, n)| Net::new(t, n));
        prop_oneof![
            (ip_net.clone(), any::<u32>()).prop_map(|(net, a)| Nid::new(net, a)),
            (ip_net, any::<[u8; 16]>()).prop_map(|(net, a)| Nid {
                net,
                addr: NidAddr::V6(a)
            }),
            (any::<u16>(), any::<u32>())
                .prop_map(|(n, a)| Nid::new(Net::new(LndType::GNILND, n), a)),
            Just(Nid::LO_0),
        ]
    }

    fn opt_text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-z0-9@.\\[\\]\\-,]{0,20}")
    }

    proptest! {
        #[test]
        fn net_keys_round_trip_and_sort_like_nets(a in any_net(), b in any_net()) {
            prop_assert_eq!(keys::decode_net(&keys::net_key(a)).unwrap(), a);
            prop_assert_eq!(keys::net_key(a).cmp(&keys::net_key(b)), a.cmp(&b));
        }

        #[test]
        fn nid_keys_round_trip_and_sort_like_nids(a in any_nid(), b in any_nid()) {
            prop_assert_eq!(keys::decode_nid(&keys::nid_key(&a)).unwrap(), a);
            prop_assert_eq!(keys::nid_key(&a).cmp(&keys::nid_key(&b)), a.cmp(&b));
        }

        #[test]
        fn route_and_fault_keys_round_trip_and_sort_by_their_parts(
            n1 in any_net(), g1 in any_nid(), n2 in any_net(), g2 in any_nid(),
            i1 in any::<u32>(), i2 in any::<u32>(),
        ) {
            prop_assert_eq!(keys::decode_route(&keys::route_key(n1, &g1)).unwrap(), (n1, g1));
            prop_assert_eq!(
                keys::route_key(n1, &g1).cmp(&keys::route_key(n2, &g2)),
                (n1, g1).cmp(&(n2, g2))
            );
            prop_assert_eq!(keys::decode_fault(&keys::fault_key(&g1, i1)).unwrap(), (g1, i1));
            prop_assert_eq!(
                keys::fault_key(&g1, i1).cmp(&keys::fault_key(&g2, i2)),
                (g1, i1).cmp(&(g2, i2))
            );
        }

        #[test]
        fn number_keys_round_trip_and_sort_like_numbers(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(keys::decode_u64(&keys::u64_key(a)).unwrap(), a);
            prop_assert_eq!(keys::u64_key(a).cmp(&keys::u64_key(b)), a.cmp(&b));
            let (x, y) = (a as u32, b as u32);
            prop_assert_eq!(keys::decode_u32(&keys::u32_key(x)).unwrap(), x);
            prop_assert_eq!(keys::u32_key(x).cmp(&keys::u32_key(y)), x.cmp(&y));
        }

        #[test]
        fn key_decoders_never_panic_and_accept_only_canonical_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..30)
        ) {
            if let Ok(n) = keys::decode_net(&bytes) {
                prop_assert_eq!(keys::net_key(n).to_vec(), bytes.clone());
            }
            if let Ok(n) = keys::decode_nid(&bytes) {
                prop_assert_eq!(keys::nid_key(&n).to_vec(), bytes.clone());
            }
            if let Ok((n, g)) = keys::decode_route(&bytes) {
                prop_assert_eq!(keys::route_key(n, &g).to_vec(), bytes.clone());
            }
            if let Ok((g, i)) = keys::decode_fault(&bytes) {
                prop_assert_eq!(keys::fault_key(&g, i).to_vec(), bytes.clone());
            }
            let _ = keys::decode_token_name(&bytes);
            let _ = keys::decode_tunable(&bytes);
        }

        #[test]
        fn record_decoders_never_panic_on_any_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..64)
        ) {
            let k = b"k";
            let _ = engine::decode::<NetRecord>(TreeId::Nets, k, &bytes);
            let _ = engine::decode::<PeerRecord>(TreeId::Peers, k, &bytes);
            let _ = engine::decode::<RouteRecord>(TreeId::Routes, k, &bytes);
            let _ = engine::decode::<UdspRecord>(TreeId::Udsp, k, &bytes);
            let _ = engine::decode::<FaultRule>(TreeId::Faults, k, &bytes);
            let _ = engine::decode::<Event>(TreeId::Events, k, &bytes);
        }

        #[test]
        fn peer_and_route_records_round_trip(
            primary in text_nid(),
            nids in proptest::collection::vec(text_nid(), 0..4),
            mr in any::<bool>(),
            hop in proptest::option::of(-1i64..256),
            priority in proptest::option::of(any::<u32>()),
            sens in proptest::option::of(any::<u32>()),
        ) {
            let peer = Peer {
                primary_nid: primary,
                multi_rail: mr,
                peer_state: None,
                peer_nis: nids.into_iter().map(PeerNi::new).collect(),
            };
            let bytes = engine::encode(TreeId::Peers, b"k", &PeerRecord::from_model(&peer)).unwrap();
            let back: PeerRecord = engine::decode(TreeId::Peers, b"k", &bytes).unwrap();
            prop_assert_eq!(back.into_model(primary), peer);
            let route = Route {
                net: primary.net, gateway: primary, hop, priority,
                health_sensitivity: sens, state: None, route_type: None,
            };
            let bytes = engine::encode(TreeId::Routes, b"k", &RouteRecord::from_model(&route)).unwrap();
            let back: RouteRecord = engine::decode(TreeId::Routes, b"k", &bytes).unwrap();
            prop_assert_eq!(back.into_model(route.net, route.gateway), route);
        }

        #[test]
        fn net_and_udsp_records_round_trip(
            nid in proptest::option::of(text_nid()),
            interfaces in proptest::collection::vec("[a-z0-9]{1,8}", 0..3),
            credits in any::<i32>(),
            tos in proptest::option::of(any::<i16>()),
            cpt in proptest::option::of(proptest::collection::vec(any::<u32>(), 0..4)),
            src in opt_text(), dst in opt_text(), rte in opt_text(),
            priority in proptest::option::of(any::<u32>()),
            idx in any::<u32>(),
        ) {
            let ni = LocalNi {
                nid,
                interfaces,
                tunables: Some(lnet::config::NiTunables {
                    peer_timeout: credits, peer_credits: 8, peer_buffer_credits: 0, credits,
                }),
                lnd_tunables: Some(lnet::config::LndTunables { tos, ..Default::default() }),
                cpt: cpt.map(lnet::config::Cpts),
                ..LocalNi::default()
            };
            let net_config = NetConfig { net_type: net("tcp"), local_nis: vec![ni] };
            let bytes = engine::encode(TreeId::Nets, b"k", &NetRecord::from_model(&net_config)).unwrap();
            let back: NetRecord = engine::decode(TreeId::Nets, b"k", &bytes).unwrap();
            prop_assert_eq!(back.into_model(net("tcp")), net_config);
            let rule = UdspRule { idx: Some(idx), src, dst, rte, priority };
            let bytes = engine::encode(TreeId::Udsp, b"k", &UdspRecord::from_model(&rule)).unwrap();
            let back: UdspRecord = engine::decode(TreeId::Udsp, b"k", &bytes).unwrap();
            prop_assert_eq!(back.into_model(idx), rule);
        }

        #[test]
        fn fault_rules_and_events_round_trip_through_json(
            ni in text_nid(), src in text_nid(), latency in any::<u32>(),
            rate in 1u32.., portals in proptest::collection::vec(any::<u32>(), 0..3),
            before in 0u32..=1000, after in 0u32..=1000,
            status in proptest::sample::select(HealthStatus::ALL.to_vec()),
        ) {
            let rule = FaultRule::delay(
                NidMatch::Nid(src),
                NidMatch::Net(src.net),
                FaultTrigger::Rate(rate),
                u64::from(latency),
            )
            .at(ni)
            .portals(&portals)
            .messages(&[FaultMsgType::Reply, FaultMsgType::Ack]);
            let bytes = engine::encode(TreeId::Faults, b"k", &rule).unwrap();
            prop_assert_eq!(engine::decode::<FaultRule>(TreeId::Faults, b"k", &bytes).unwrap(), rule);
            for event in [
                Event::PeerNiHealth { nid: ni, before, after, cause: Some(status) },
                Event::NiHealth { nid: ni, before, after, cause: None },
                Event::RecoveryPing {
                    queue: RecoveryQueue::PeerNi, nid: src, ping_count: before,
                    next_ping_ms: u64::from(after),
                },
            ] {
                let bytes = engine::encode(TreeId::Events, b"k", &event).unwrap();
                prop_assert_eq!(engine::decode::<Event>(TreeId::Events, b"k", &bytes).unwrap(), event);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn any_configuration_exports_imports_and_exports_the_same(
            peers in proptest::collection::btree_map(text_nid(), any::<bool>(), 0..6),
            routes in proptest::collection::btree_set((any::<u16>(), text_nid()), 0..6),
            retry in proptest::option::of(0u32..5),
            rules in proptest::collection::vec(opt_text(), 0..3),
        ) {
            let config = Config {
                peers: peers.iter().map(|(p, mr)| Peer {
                    primary_nid: *p, multi_rail: *mr, peer_state: None,
                    peer_nis: vec![PeerNi::new(*p)],
                }).collect(),
                routes: routes.iter().map(|(n, g)| Route {
                    net: Net::new(LndType::O2IBLND, *n), gateway: *g, hop: Some(1),
                    priority: None, health_sensitivity: None, state: None, route_type: None,
                }).collect(),
                global: retry.map(|r| lnet::config::Global {
                    retry_count: Some(r), ..Default::default()
                }),
                udsp: rules.into_iter().map(|src| UdspRule { src, ..Default::default() }).collect(),
                ..Config::default()
            };
            let (_d1, a) = fresh();
            a.import(&config).unwrap();
            let first = a.export().unwrap();
            let (_d2, b) = fresh();
            b.import(&first).unwrap();
            prop_assert_eq!(b.export().unwrap().to_yaml(), first.to_yaml());
        }
    }
}
