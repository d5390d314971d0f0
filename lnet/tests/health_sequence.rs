//! The health rules working together, as an actor would drive them: a send fails, the
//! NI loses health and joins recovery, selection moves the resend to another NI, retries
//! run out, recovery pings bring the NIs back. Time is a number; nothing sleeps.

use lnet::health::check::{health_check, Counter, HealthContext, NoResend, Resend, ResendFrom};
use lnet::health::value::HealthValue;
use lnet::health::HealthStatus;
use lnet::nid::{LndType, Net, Nid};
use lnet::recovery::{AddOutcome, RecoveryConfig, RecoveryKind, RecoveryQueue};
use lnet::selection::{
    advance_sequences, best_local_ni, LocalNiCandidate, LocalNiParams, LNET_MAX_SELECTION_PRIORITY,
};
use lnet::time::Millis;
use lnet::tunables::Tunables;

const TCP: Net = Net::new(LndType::SOCKLND, 0);

fn local(addr: u32) -> LocalNiCandidate<Nid> {
    LocalNiCandidate {
        id: Nid::new(TCP, addr),
        net: TCP,
        fatal: false,
        health: HealthValue::MAX,
        sel_priority: LNET_MAX_SELECTION_PRIORITY,
        dev_priority: LNET_MAX_SELECTION_PRIORITY,
        numa_distance: 0,
        tx_credits: 8,
        seq: 0,
    }
}

#[test]
fn snd_055_lnt_075_failures_move_across_nis_until_retries_run_out() {
    let tunables = Tunables::default();
    let sens = tunables.health_sensitivity();
    let config = RecoveryConfig::from(&tunables);
    let mut nis = vec![local(1), local(2)];
    let mut queue = RecoveryQueue::new(RecoveryKind::LocalNi);
    let mut net_seq = 0;
    let mut used = Vec::new();
    let mut last = None;
    let now = Millis::from_secs(10);

    for attempt in 0..=tunables.retry_count() {
        let chosen = best_local_ni(&nis, LocalNiParams::default()).unwrap().id;
        used.push(chosen);
        net_seq = advance_sequences(0, net_seq).net_seq;
        let ni = nis.iter_mut().find(|n| n.id == chosen).unwrap();
        ni.seq = net_seq;

        let ctx = HealthContext {
            retries_so_far: attempt,
            ..HealthContext::default()
        };
        let outcome = health_check(HealthStatus::LocalTimeout, &ctx, &tunables);
        ni.health = outcome.local_ni.change.apply(ni.health, sens);
        if outcome.local_ni.joins_recovery(ni.health) {
            queue.add(chosen, ni.health, None, now, &config);
        }
        last = Some(outcome);
    }

    // First NI 1; after it failed, NI 2 (healthier); then both at 900: round robin to 1.
    assert_eq!(used, [Nid::new(TCP, 1), Nid::new(TCP, 2), Nid::new(TCP, 1)]);
    let last = last.unwrap();
    assert_eq!(last.resend, Resend::No(NoResend::RetriesExhausted));
    assert!(last.counters.contains(&Counter::FailedResends));
    assert_eq!(
        nis.iter().map(|n| n.health.get()).collect::<Vec<_>>(),
        [800, 900]
    );
    assert_eq!(queue.len(), 2);

    // Recovery: both are pinged at once; each OK reply raises health until 1000.
    let mut t = now;
    let mut rounds = 0;
    while !queue.is_empty() {
        for ping in queue.due(t, &config).pings {
            let ok = health_check(HealthStatus::Ok, &HealthContext::default(), &tunables);
            let ni = nis.iter_mut().find(|n| n.id == ping.key).unwrap();
            ni.health = ok.local_ni.change.apply(ni.health, sens);
            queue.health_changed(&ping.key, ni.health);
        }
        t = queue.next_due().unwrap_or(t);
        rounds += 1;
        assert!(rounds < 10);
    }
    assert!(nis.iter().all(|n| n.health.is_max()));
    // NI 1 needed two pings (800 → 1000), at 10 s and 11 s.
    assert_eq!(t, Millis::from_secs(11));
}

#[test]
fn lnt_045_non_mr_resend_keeps_the_local_ni() {
    let tunables = Tunables::default();
    let ctx = HealthContext {
        peer_multi_rail: false,
        ..HealthContext::default()
    };
    let outcome = health_check(HealthStatus::RemoteDropped, &ctx, &tunables);
    assert_eq!(
        outcome.resend,
        Resend::Yes {
            from: ResendFrom::SameLocalNi
        }
    );
}

#[test]
fn cfg_035_resetting_health_puts_an_ni_back_in_service() {
    let config = RecoveryConfig::default();
    let mut queue = RecoveryQueue::new(RecoveryKind::PeerNi);
    let nid = Nid::new(TCP, 7);
    let sick = HealthValue::MAX.decremented(300);
    assert_eq!(
        queue.add(nid, sick, Some(Millis::ZERO), Millis::ZERO, &config),
        AddOutcome::Added
    );
    // `peer set --health 1000`: the value is checked, and the NI leaves recovery at once.
    let reset = HealthValue::new(1000).unwrap();
    assert!(queue.health_changed(&nid, reset));
    assert!(queue.is_empty());
    assert!(HealthValue::new(1001).is_err());
}

#[test]
fn cfg_005_global_settings_can_be_set_by_name() {
    let mut tunables = Tunables::default();
    for (name, value) in [
        ("health_sensitivity", 50),
        ("retry_count", 3),
        ("transaction_timeout", 30),
        ("recovery_limit", 60),
        ("max_recovery_ping_interval", 64),
    ] {
        let name = name.parse().unwrap();
        assert_eq!(tunables.set(name, value), Ok(()), "{name}");
        assert_eq!(i64::from(tunables.get(name)), value);
    }
    assert_eq!(tunables.lnd_timeout(), 7);
    assert_eq!(tunables.max_recovery_ping_count(), 6);
}
