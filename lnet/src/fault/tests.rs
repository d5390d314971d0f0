use super::*;
use crate::health::HealthStatus;
use crate::nid::PID_LUSTRE;
use crate::time::Millis;
use crate::{Header, Message, Nid, WireHandle};
use proptest::prelude::*;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn header(src: &str, dst: &str, msg: Message) -> Header {
    Header {
        dest_nid: nid(dst),
        src_nid: nid(src),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 0,
        msg,
    }
}

fn put(src: &str, dst: &str, portal: u32) -> Header {
    header(
        src,
        dst,
        Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 0,
            hdr_data: 0,
            ptl_index: portal,
            offset: 0,
        },
    )
}

fn ack(src: &str, dst: &str) -> Header {
    header(
        src,
        dst,
        Message::Ack {
            dst_wmd: WireHandle::NONE,
            match_bits: 0,
            mlength: 0,
        },
    )
}

fn get(src: &str, dst: &str, portal: u32) -> Header {
    header(
        src,
        dst,
        Message::Get {
            return_wmd: WireHandle::NONE,
            match_bits: 0,
            ptl_index: portal,
            src_offset: 0,
            sink_length: 0,
        },
    )
}

fn reply(src: &str, dst: &str) -> Header {
    header(
        src,
        dst,
        Message::Reply {
            dst_wmd: WireHandle::NONE,
        },
    )
}

const RX: Direction = Direction::Receive;
const TX: Direction = Direction::Send;
const T0: Millis = Millis(0);

fn me() -> Nid {
    nid("10.0.0.2@tcp")
}

#[test]
fn nid_patterns_parse_print_and_match() {
    let n = nid("10.0.0.1@tcp");
    assert!(NidMatch::Any.matches(n));
    assert!(NidMatch::Net(n.net).matches(n));
    assert!(!NidMatch::Net(nid("10.0.0.1@tcp1").net).matches(n));
    assert!(NidMatch::Nid(n).matches(n));
    assert!(!NidMatch::Nid(nid("10.0.0.2@tcp")).matches(n));
    assert_eq!("*".parse::<NidMatch>(), Ok(NidMatch::Any));
    assert_eq!(
        "*@tcp1".parse::<NidMatch>(),
        Ok(NidMatch::Net(nid("1.1.1.1@tcp1").net))
    );
    assert_eq!(
        "255.255.255.255@o2ib".parse::<NidMatch>(),
        Ok(NidMatch::Net(nid("1.1.1.1@o2ib").net))
    );
    assert_eq!("10.0.0.1@tcp".parse::<NidMatch>(), Ok(NidMatch::Nid(n)));
    assert!("*@nonet".parse::<NidMatch>().is_err());
    assert!("a@b@c".parse::<NidMatch>().is_err());
    for text in ["*", "*@tcp1", "10.0.0.1@o2ib"] {
        assert_eq!(text.parse::<NidMatch>().unwrap().to_string(), text);
    }
}

#[test]
fn filters_source_dest_local_ni_portal_type_and_path() {
    let mut rule = FaultRule::drop(
        NidMatch::Nid(nid("10.0.0.1@tcp")),
        NidMatch::Net(nid("10.0.0.2@tcp").net),
        FaultTrigger::All,
    );
    assert_eq!(rule.path(), FaultPath::Receive);
    assert!(rule.matches(RX, me(), &put("10.0.0.1@tcp", "10.0.0.9@tcp", 4)));
    assert!(!rule.matches(TX, me(), &put("10.0.0.1@tcp", "10.0.0.9@tcp", 4)));
    assert!(!rule.matches(RX, me(), &put("10.0.0.3@tcp", "10.0.0.9@tcp", 4)));
    assert!(!rule.matches(RX, me(), &put("10.0.0.1@tcp", "10.0.0.9@tcp1", 4)));
    rule = rule.at(me());
    assert!(rule.matches(RX, me(), &put("10.0.0.1@tcp", "10.0.0.9@tcp", 4)));
    assert!(!rule.matches(
        RX,
        nid("10.0.0.3@tcp"),
        &put("10.0.0.1@tcp", "10.0.0.9@tcp", 4)
    ));
    rule = rule.portals(&[4]);
    assert!(rule.matches(RX, me(), &put("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
    assert!(rule.matches(RX, me(), &get("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
    assert!(!rule.matches(RX, me(), &put("10.0.0.1@tcp", "10.0.0.2@tcp", 5)));
    assert!(!rule.matches(RX, me(), &ack("10.0.0.1@tcp", "10.0.0.2@tcp")));
    rule = rule
        .portals(&[])
        .messages(&[FaultMsgType::Ack, FaultMsgType::Reply]);
    assert!(rule.matches(RX, me(), &ack("10.0.0.1@tcp", "10.0.0.2@tcp")));
    assert!(rule.matches(RX, me(), &reply("10.0.0.1@tcp", "10.0.0.2@tcp")));
    assert!(!rule.matches(RX, me(), &put("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
    assert!(!rule.matches(RX, me(), &get("10.0.0.1@tcp", "10.0.0.2@tcp", 4)));
    rule = rule.on(FaultPath::Both);
    assert!(rule.matches(TX, me(), &ack("10.0.0.1@tcp", "10.0.0.2@tcp")));
    let hello = header(
        "10.0.0.1@tcp",
        "10.0.0.2@tcp",
        Message::Hello {
            incarnation: 0,
            conn_type: 0,
        },
    );
    assert!(
        !FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All).matches(RX, me(), &hello)
    );
}

#[test]
fn kernel_paths() {
    let any = NidMatch::Any;
    let t = FaultTrigger::All;
    assert_eq!(FaultRule::drop(any, any, t).path(), FaultPath::Receive);
    let e = FaultRule::health_error(any, any, t, FaultHealthError::LocalError);
    assert_eq!(e.path(), FaultPath::Send);
    assert_eq!(FaultRule::delay(any, any, t, 5).path(), FaultPath::Receive);
    assert_eq!(
        FaultRule::delay(any, any, t, 5).on(FaultPath::Both).path(),
        FaultPath::Both
    );
}

fn fired(table: &mut FaultTable, n: usize, h: &Header) -> Vec<bool> {
    (0..n)
        .map(|_| table.check(RX, me(), h, T0).is_some())
        .collect()
}

fn one_rule(rule: FaultRule) -> FaultTable {
    let mut table = FaultTable::new();
    table.add(rule, T0).unwrap();
    table
}

#[test]
fn every_nth_all_and_removal() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let mut table = FaultTable::new();
    let id = table
        .add(
            FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::EveryNth(3)),
            T0,
        )
        .unwrap();
    assert_eq!(
        fired(&mut table, 7, &h),
        [false, false, true, false, false, true, false]
    );
    assert_eq!(table.rules()[0].matched, 7);
    assert_eq!(table.rules()[0].fired, 2);
    assert_eq!(table.reset_where(T0, |r| r.kind != FaultKind::Drop), 0);
    assert_eq!(
        table.rules()[0].matched,
        7,
        "a delay reset leaves drop rules"
    );
    assert_eq!(table.reset_where(T0, |r| r.kind == FaultKind::Drop), 1);
    assert_eq!((table.rules()[0].matched, table.rules()[0].fired), (0, 0));
    assert!(table.remove(id));
    assert!(!table.remove(id));
    assert!(table.is_empty());
    assert_eq!(table.check(RX, me(), &h, T0), None);
    table
        .add(
            FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All),
            T0,
        )
        .unwrap();
    assert_eq!(fired(&mut table, 3, &h), [true; 3]);
    assert_eq!(table.remove_where(|r| r.kind == FaultKind::Drop), 1);
    assert!(table.is_empty());
}

#[test]
fn rules_keep_their_ids_when_inserted_and_later_ids_go_above() {
    let mut table = FaultTable::new();
    let rule = FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All);
    table.insert(RuleId(7), rule.clone(), T0).unwrap();
    assert_eq!(
        table.insert(RuleId(7), rule.clone(), T0),
        Err(FaultAddError::IdInUse { id: 7 })
    );
    assert_eq!(
        table.insert(RuleId(0), rule.clone(), T0),
        Err(FaultAddError::IdInUse { id: 0 })
    );
    table.insert(RuleId(3), rule.clone(), T0).unwrap();
    assert_eq!(table.add(rule.clone(), T0), Ok(RuleId(8)));
    let ids: Vec<u64> = table.rules().iter().map(|r| r.id.0).collect();
    assert_eq!(ids, [7, 3, 8]);
}

#[test]
fn rate_is_one_in_each_window_reproducibly() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let run = |seed| {
        let mut rule = FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::Rate(10));
        rule.seed = seed;
        fired(&mut one_rule(rule), 100, &h)
    };
    let a = run(7);
    for window in a.chunks(10) {
        assert_eq!(window.iter().filter(|f| **f).count(), 1, "{a:?}");
    }
    assert_eq!(a, run(7));
    assert_ne!(a, run(8));
}

#[test]
fn interval_fires_once_per_window_of_time() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let mut table = one_rule(FaultRule::drop(
        NidMatch::Any,
        NidMatch::Any,
        FaultTrigger::Interval(2),
    ));
    // A message every 100 ms for 20 s: one firing in each 2-second window.
    let mut firings = Vec::new();
    for step in 0..200u64 {
        let now = Millis(step * 100);
        if table.check(RX, me(), &h, now).is_some() {
            firings.push(now.as_millis());
        }
    }
    assert_eq!(firings.len(), 10, "{firings:?}");
    for (i, at) in firings.iter().enumerate() {
        let i = i as u64;
        assert!((i * 2000..(i + 1) * 2000).contains(at), "{firings:?}");
    }
    let stats = &table.rules()[0];
    assert_eq!((stats.matched, stats.fired), (200, 10));
    // No messages for a while: the next one after the due time fires.
    assert!(table.check(RX, me(), &h, Millis(60_000)).is_some());
}

#[test]
fn probability_is_seeded() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let run = |seed, per_million| {
        let mut rule = FaultRule::drop(
            NidMatch::Any,
            NidMatch::Any,
            FaultTrigger::Probability(per_million),
        );
        rule.seed = seed;
        fired(&mut one_rule(rule), 10_000, &h)
    };
    let half = run(42, 500_000);
    let n = half.iter().filter(|f| **f).count();
    assert!((4_500..5_500).contains(&n), "{n}");
    assert_eq!(half, run(42, 500_000));
    assert!(run(1, 0).iter().all(|f| !f));
    assert!(run(1, 1_000_000).iter().all(|f| *f));
}

#[test]
fn limit_stops_firing() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let mut table =
        one_rule(FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All).limit(2));
    assert_eq!(fired(&mut table, 4, &h), [true, true, false, false]);
    assert_eq!(table.rules()[0].fired, 2);
}

#[test]
fn verdicts_and_first_firing_rule_wins() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let mut table = FaultTable::new();
    table
        .add(
            FaultRule::health_error(
                NidMatch::Any,
                NidMatch::Any,
                FaultTrigger::EveryNth(2),
                FaultHealthError::RemoteError,
            ),
            T0,
        )
        .unwrap();
    table
        .add(
            FaultRule::delay(NidMatch::Any, NidMatch::Any, FaultTrigger::All, 5)
                .on(FaultPath::Both),
            T0,
        )
        .unwrap();
    assert_eq!(
        table.check(TX, me(), &h, T0),
        Some(FaultVerdict::Delay(Millis(5)))
    );
    assert_eq!(
        table.check(TX, me(), &h, T0),
        Some(FaultVerdict::Fail(HealthStatus::RemoteError))
    );
    // On receive the health-error rule does not apply.
    assert_eq!(
        table.check(RX, me(), &h, T0),
        Some(FaultVerdict::Delay(Millis(5)))
    );
    let rules = table.rules();
    assert_eq!((rules[0].matched, rules[0].fired), (2, 1));
    assert_eq!((rules[1].matched, rules[1].fired), (3, 2));
}

#[test]
fn random_health_error_is_a_failure() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let mut table = one_rule(FaultRule::health_error(
        NidMatch::Any,
        NidMatch::Any,
        FaultTrigger::All,
        FaultHealthError::Random,
    ));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        match table.check(TX, me(), &h, T0) {
            Some(FaultVerdict::Fail(s)) => {
                assert_ne!(s, HealthStatus::Ok);
                seen.insert(s);
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(seen.len() > 5, "{seen:?}");
    for s in HealthStatus::ALL {
        let e = FaultHealthError::from_status(s);
        assert_eq!(e.is_none(), s == HealthStatus::Ok);
        assert_eq!(
            e.and_then(FaultHealthError::status),
            (s != HealthStatus::Ok).then_some(s)
        );
    }
}

#[test]
fn invalid_rules_are_refused() {
    let mut table = FaultTable::new();
    let bad = |trigger| FaultRule::drop(NidMatch::Any, NidMatch::Any, trigger);
    let refused = |table: &mut FaultTable, rule| match table.add(rule, T0) {
        Err(FaultAddError::Rule(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refused(&mut table, bad(FaultTrigger::Rate(0))),
        FaultRuleError::ZeroRate
    );
    assert_eq!(
        refused(&mut table, bad(FaultTrigger::EveryNth(0))),
        FaultRuleError::ZeroRate
    );
    assert_eq!(
        refused(&mut table, bad(FaultTrigger::Interval(0))),
        FaultRuleError::ZeroInterval
    );
    assert_eq!(
        refused(&mut table, bad(FaultTrigger::Probability(1_000_001))),
        FaultRuleError::Probability {
            per_million: 1_000_001
        }
    );
    assert_eq!(
        refused(&mut table, bad(FaultTrigger::All).portals(&[64])),
        FaultRuleError::Portal { portal: 64 }
    );
    assert_eq!(
        refused(
            &mut table,
            bad(FaultTrigger::All)
                .portals(&[4])
                .messages(&[FaultMsgType::Ack])
        ),
        FaultRuleError::PortalWithoutPutOrGet
    );
    let mut delay_e = FaultRule::delay(NidMatch::Any, NidMatch::Any, FaultTrigger::All, 1);
    delay_e.health_error = Some(FaultHealthError::LocalError);
    assert_eq!(
        refused(&mut table, delay_e),
        FaultRuleError::HealthErrorOnDelay
    );
    assert_eq!(
        refused(
            &mut table,
            FaultRule::delay(
                NidMatch::Any,
                NidMatch::Any,
                FaultTrigger::All,
                MAX_LATENCY_MS + 1
            )
        ),
        FaultRuleError::Latency {
            latency_ms: MAX_LATENCY_MS + 1
        }
    );
    let rx_fail = FaultRule::health_error(
        NidMatch::Any,
        NidMatch::Any,
        FaultTrigger::All,
        FaultHealthError::LocalError,
    )
    .on(FaultPath::Both);
    assert_eq!(
        refused(&mut table, rx_fail),
        FaultRuleError::HealthErrorOnReceive
    );
    assert_eq!(
        refused(&mut table, bad(FaultTrigger::All).limit(0)),
        FaultRuleError::ZeroLimit
    );
    for _ in 0..MAX_RULES {
        table.add(bad(FaultTrigger::All), T0).unwrap();
    }
    assert_eq!(
        table.add(bad(FaultTrigger::All), T0),
        Err(FaultAddError::Full { max: MAX_RULES })
    );
}

#[test]
fn serde_form() {
    let rule = FaultRule::delay(
        NidMatch::Nid(nid("10.0.0.7@tcp")),
        NidMatch::Net(nid("1.1.1.1@o2ib1").net),
        FaultTrigger::Interval(3),
        5000,
    )
    .at(me())
    .messages(&[FaultMsgType::Put]);
    let json = serde_json::to_value(&rule).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "local_nid": "10.0.0.2@tcp",
            "kind": {"delay": {"latency_ms": 5000}},
            "source": "10.0.0.7@tcp",
            "dest": "*@o2ib1",
            "trigger": {"interval": 3},
            "portals": [],
            "message_types": ["put"],
            "health_error": null,
            "seed": 1,
        })
    );
    let minimal: FaultRule = serde_json::from_value(serde_json::json!({
        "kind": "drop", "source": "*", "dest": "*", "trigger": "all",
    }))
    .unwrap();
    assert_eq!(
        minimal,
        FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::All)
    );
    assert!(serde_json::from_value::<FaultRule>(serde_json::json!({
        "kind": "drop", "source": "*", "dest": "*", "trigger": "all", "extra": 1,
    }))
    .is_err());
}

fn nid_match() -> impl Strategy<Value = NidMatch> {
    prop_oneof![
        Just(NidMatch::Any),
        (0u32..4).prop_map(|n| NidMatch::Net(nid(&format!("1.1.1.1@tcp{n}")).net)),
        (1u8..255, 0u32..3).prop_map(|(a, n)| NidMatch::Nid(nid(&format!("10.0.0.{a}@o2ib{n}")))),
    ]
}

fn trigger() -> impl Strategy<Value = FaultTrigger> {
    prop_oneof![
        Just(FaultTrigger::All),
        (1u32..50).prop_map(FaultTrigger::Rate),
        (1u32..50).prop_map(FaultTrigger::Interval),
        (1u32..50).prop_map(FaultTrigger::EveryNth),
        (0u32..=1_000_000).prop_map(FaultTrigger::Probability),
    ]
}

fn any_rule() -> impl Strategy<Value = FaultRule> {
    (
        nid_match(),
        nid_match(),
        trigger(),
        prop::option::of(0u64..10_000),
        prop::collection::vec(0u32..64, 0..3),
        any::<u64>(),
        prop::option::of(1u64..10),
    )
        .prop_map(|(src, dst, trigger, delay, portals, seed, limit)| {
            let mut rule = match delay {
                Some(ms) => FaultRule::delay(src, dst, trigger, ms),
                None => FaultRule::drop(src, dst, trigger),
            }
            .portals(&portals);
            rule.seed = seed;
            rule.limit = limit;
            rule
        })
}

proptest! {
    #[test]
    fn rules_read_back_from_json(rule in any_rule()) {
        let text = serde_json::to_string(&rule).unwrap();
        prop_assert_eq!(serde_json::from_str::<FaultRule>(&text).unwrap(), rule);
    }

    #[test]
    fn rate_fires_exactly_once_per_window(n in 1u32..40, windows in 1usize..6, seed in any::<u64>()) {
        let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
        let mut rule = FaultRule::drop(NidMatch::Any, NidMatch::Any, FaultTrigger::Rate(n));
        rule.seed = seed;
        let mut table = one_rule(rule);
        let shots = fired(&mut table, n as usize * windows, &h);
        for window in shots.chunks(n as usize) {
            prop_assert_eq!(window.iter().filter(|f| **f).count(), 1);
        }
        let stats = &table.rules()[0];
        prop_assert_eq!(stats.fired, windows as u64);
        prop_assert_eq!(stats.matched, n as u64 * windows as u64);
    }

    #[test]
    fn fired_never_exceeds_matched_nor_limit(rule in any_rule(), steps in prop::collection::vec(0u64..5_000, 1..60)) {
        let h = put("10.0.0.1@o2ib1", "10.0.0.2@tcp1", 4);
        let mut table = FaultTable::new();
        table.add(rule.clone(), T0).unwrap();
        let mut now = T0;
        let mut verdicts = 0u64;
        for step in steps {
            now = now.saturating_add(Millis(step));
            if table.check(RX, me(), &h, now).is_some() {
                verdicts += 1;
            }
        }
        let stats = &table.rules()[0];
        prop_assert_eq!(stats.fired, verdicts);
        prop_assert!(stats.fired <= stats.matched);
        if let Some(limit) = rule.limit {
            prop_assert!(stats.fired <= limit);
        }
        if stats.matched == 0 {
            prop_assert!(!rule.matches(RX, me(), &h));
        }
    }
}

#[test]
fn a_random_interval_drops_about_half_as_the_kernel_draws_and_keeps_no_window() {
    let h = put("10.0.0.1@tcp", "10.0.0.2@tcp", 4);
    let mut table = FaultTable::new();
    table
        .add(
            FaultRule::drop(
                NidMatch::Any,
                NidMatch::Any,
                FaultTrigger::RandomInterval(5),
            ),
            T0,
        )
        .unwrap();
    // All at the same instant: an interval rule would fire at most once.
    let n = fired(&mut table, 10_000, &h).iter().filter(|f| **f).count();
    // A draw in 0..5 that is at least 2: three chances in five.
    assert!((5_500..6_500).contains(&n), "{n}");
    assert_eq!(table.rules()[0].fired, n as u64);
    assert_eq!(
        FaultRule::drop(
            NidMatch::Any,
            NidMatch::Any,
            FaultTrigger::RandomInterval(0)
        )
        .validate(),
        Err(FaultRuleError::ZeroInterval)
    );
}
