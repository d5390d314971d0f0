use super::*;
use HealthStatus::*;

const LOCAL_RESENDABLE: [HealthStatus; 5] = [
    LocalInterrupt,
    LocalDropped,
    LocalAborted,
    LocalNoRoute,
    LocalTimeout,
];

fn t() -> Tunables {
    Tunables::default()
}

fn lower() -> NiEffect {
    NiEffect {
        change: HealthChange::Lower,
        reset_ping_count: false,
        recovery: true,
    }
}

#[test]
fn local_resendable_statuses_lower_the_local_ni_and_resend() {
    for s in LOCAL_RESENDABLE {
        let o = health_check(s, &HealthContext::default(), &t());
        assert_eq!(o.local_ni, lower(), "{s}");
        assert_eq!(o.peer_ni, NiEffect::NONE, "{s}");
        assert_eq!(
            o.resend,
            Resend::Yes {
                from: ResendFrom::AnyLocalNi
            },
            "{s}"
        );
        assert_eq!(o.counters, [Counter::Global(s), Counter::LocalNi(s)]);
    }
}

#[test]
fn local_error_lowers_the_local_ni_without_resend() {
    let o = health_check(LocalError, &HealthContext::default(), &t());
    assert_eq!(o.local_ni, lower());
    assert_eq!(o.peer_ni, NiEffect::NONE);
    assert_eq!(o.resend, Resend::No(NoResend::StatusNotResendable));
}

#[test]
fn remote_statuses_lower_the_peer_ni() {
    let o = health_check(RemoteDropped, &HealthContext::default(), &t());
    assert_eq!((o.local_ni, o.peer_ni), (NiEffect::NONE, lower()));
    assert!(matches!(o.resend, Resend::Yes { .. }));
    assert_eq!(
        o.counters,
        [
            Counter::Global(RemoteDropped),
            Counter::PeerNi(RemoteDropped)
        ]
    );
    for s in [RemoteError, RemoteTimeout] {
        let o = health_check(s, &HealthContext::default(), &t());
        assert_eq!((o.local_ni, o.peer_ni), (NiEffect::NONE, lower()));
        assert_eq!(o.resend, Resend::No(NoResend::StatusNotResendable));
    }
}

#[test]
fn network_timeout_lowers_both_and_counts_on_the_peer_ni() {
    let o = health_check(NetworkTimeout, &HealthContext::default(), &t());
    assert_eq!((o.local_ni, o.peer_ni), (lower(), lower()));
    assert_eq!(o.resend, Resend::No(NoResend::StatusNotResendable));
    assert_eq!(
        o.counters,
        [
            Counter::Global(NetworkTimeout),
            Counter::PeerNi(NetworkTimeout)
        ]
    );
}

#[test]
fn stt_005_stt_010_stt_015_timeouts_count_on_the_right_ni() {
    let c = |s| health_check(s, &HealthContext::default(), &t()).counters;
    assert!(c(LocalTimeout).contains(&Counter::LocalNi(LocalTimeout)));
    assert!(c(RemoteTimeout).contains(&Counter::PeerNi(RemoteTimeout)));
    // A network timeout is counted on the peer NI and charged to both NIs.
    assert!(c(NetworkTimeout).contains(&Counter::PeerNi(NetworkTimeout)));
    let o = health_check(NetworkTimeout, &HealthContext::default(), &t());
    assert!(o.local_ni.recovery && o.peer_ni.recovery);
}

#[test]
fn lnt_035_failed_nis_go_on_recovery_below_1000() {
    let o = health_check(NetworkTimeout, &HealthContext::default(), &t());
    let after = o.local_ni.change.apply(HealthValue::MAX, 100);
    assert!(o.local_ni.joins_recovery(after));
    let after = o.peer_ni.change.apply(HealthValue::MAX, 100);
    assert!(o.peer_ni.joins_recovery(after));
}

#[test]
fn late_failures_change_nothing() {
    let ctx = HealthContext {
        past_deadline: true,
        ..HealthContext::default()
    };
    for s in HealthStatus::ALL.into_iter().filter(|s| !s.is_ok()) {
        let o = health_check(s, &ctx, &t());
        assert_eq!((o.local_ni, o.peer_ni), (NiEffect::NONE, NiEffect::NONE));
        assert_eq!(o.resend, Resend::No(NoResend::Late));
        assert_eq!(o.counters, [Counter::LateMessage]);
    }
    // A late OK still counts as a success.
    let o = health_check(Ok, &ctx, &t());
    assert_eq!(o.local_ni.change, HealthChange::Raise);
}

#[test]
fn uncommitted_messages_change_nothing() {
    let ctx = HealthContext {
        committed: None,
        ..HealthContext::default()
    };
    let o = health_check(NetworkTimeout, &ctx, &t());
    assert_eq!((o.local_ni, o.peer_ni), (NiEffect::NONE, NiEffect::NONE));
    assert!(o.counters.is_empty());
    assert_eq!(o.resend, Resend::No(NoResend::NotCommitted));
}

#[test]
fn local_resend_is_off_with_at_most_two_ping_buffer_entries() {
    for entries in [1, 2] {
        let ctx = HealthContext {
            ping_buffer_entries: entries,
            ..HealthContext::default()
        };
        let o = health_check(LocalTimeout, &ctx, &t());
        assert_eq!(o.resend, Resend::No(NoResend::LocalResendOff));
        // Health is still lowered.
        assert_eq!(o.local_ni, lower());
        // A remote failure may still be resent.
        assert!(matches!(
            health_check(RemoteDropped, &ctx, &t()).resend,
            Resend::Yes { .. }
        ));
    }
}

#[test]
fn single_ni_peers_get_no_remote_resend_and_no_remote_health() {
    let ctx = HealthContext {
        peer_ni_count: 1,
        ..HealthContext::default()
    };
    let o = health_check(RemoteDropped, &ctx, &t());
    assert_eq!(o.resend, Resend::No(NoResend::RemoteResendOff));
    assert_eq!(o.peer_ni, NiEffect::NONE);
    // Unless the peer is a router, or this node routes: then health applies.
    for ctx in [
        HealthContext {
            peer_is_router: true,
            ..ctx
        },
        HealthContext {
            routing_enabled: true,
            ..ctx
        },
    ] {
        let o = health_check(RemoteDropped, &ctx, &t());
        assert_eq!(o.peer_ni, lower());
        assert_eq!(o.resend, Resend::No(NoResend::RemoteResendOff));
    }
}

#[test]
fn remote_health_never_applies_to_my_own_nids() {
    let ctx = HealthContext {
        dst_is_local: true,
        routing_enabled: true,
        ..HealthContext::default()
    };
    assert_eq!(
        health_check(NetworkTimeout, &ctx, &t()).peer_ni,
        NiEffect::NONE
    );
    let rx = HealthContext {
        committed: Some(Committed::Rx),
        ..ctx
    };
    assert_eq!(
        health_check(Ok, &rx, &t()).peer_ni.change,
        HealthChange::Unchanged
    );
}

#[test]
fn lnt_045_non_mr_peers_are_resent_from_the_same_local_ni() {
    let ctx = HealthContext {
        peer_multi_rail: false,
        ..HealthContext::default()
    };
    for s in LOCAL_RESENDABLE.into_iter().chain([RemoteDropped]) {
        assert_eq!(
            health_check(s, &ctx, &t()).resend,
            Resend::Yes {
                from: ResendFrom::SameLocalNi
            }
        );
    }
}

#[test]
fn lnt_050_routers_resend_forwarded_messages_over_any_local_ni() {
    let ctx = HealthContext {
        peer_multi_rail: false,
        forwarded: true,
        routing_enabled: true,
        ..HealthContext::default()
    };
    assert_eq!(
        health_check(LocalDropped, &ctx, &t()).resend,
        Resend::Yes {
            from: ResendFrom::AnyLocalNi
        }
    );
}

#[test]
fn lnt_040_timeouts_before_the_wire_reselect_a_pair() {
    // A local timeout is resent; the resend goes back through selection, where the
    // lowered health steers it to another pair (see the selection tests).
    let o = health_check(LocalTimeout, &HealthContext::default(), &t());
    assert_eq!(
        o.resend,
        Resend::Yes {
            from: ResendFrom::AnyLocalNi
        }
    );
    assert_eq!(o.local_ni.change, HealthChange::Lower);
}

#[test]
fn lnt_055_no_resend_for_non_recoverable_failures() {
    for s in [LocalError, RemoteError, RemoteTimeout, NetworkTimeout] {
        assert_eq!(
            health_check(s, &HealthContext::default(), &t()).resend,
            Resend::No(NoResend::StatusNotResendable)
        );
    }
    let ctx = HealthContext {
        no_resend: true,
        ..HealthContext::default()
    };
    assert_eq!(
        health_check(LocalDropped, &ctx, &t()).resend,
        Resend::No(NoResend::NoResendFlag)
    );
    let ctx = HealthContext {
        recovery_ping: true,
        ..HealthContext::default()
    };
    assert_eq!(
        health_check(LocalDropped, &ctx, &t()).resend,
        Resend::No(NoResend::RecoveryPing)
    );
    let ctx = HealthContext {
        committed: Some(Committed::Rx),
        ..HealthContext::default()
    };
    assert_eq!(
        health_check(LocalDropped, &ctx, &t()).resend,
        Resend::No(NoResend::NotTxCommitted)
    );
}

#[test]
fn lnt_060_lnt_065_lnt_075_at_most_retry_count_resends() {
    let tun = t();
    assert_eq!(tun.retry_count(), 2);
    let resends: Vec<Resend> = (0..4)
        .map(|n| {
            let ctx = HealthContext {
                retries_so_far: n,
                ..HealthContext::default()
            };
            health_check(LocalTimeout, &ctx, &tun).resend
        })
        .collect();
    let yes = Resend::Yes {
        from: ResendFrom::AnyLocalNi,
    };
    let done = Resend::No(NoResend::RetriesExhausted);
    assert_eq!(resends, [yes, yes, done, done]);
    // Exhaustion is counted and the failure goes up to the caller.
    let ctx = HealthContext {
        retries_so_far: 2,
        ..HealthContext::default()
    };
    assert!(health_check(LocalTimeout, &ctx, &tun)
        .counters
        .contains(&Counter::FailedResends));
    // Success stops the resends and counts as a successful resend.
    let o = health_check(Ok, &ctx, &tun);
    assert_eq!(o.resend, Resend::No(NoResend::Delivered));
    assert_eq!(o.counters, [Counter::SuccessfulResends]);
}

#[test]
fn lnt_090_no_resend_when_retry_count_is_0() {
    let mut tun = t();
    assert_eq!(tun.set_retry_count(0), std::result::Result::Ok(()));
    for s in LOCAL_RESENDABLE.into_iter().chain([RemoteDropped]) {
        assert_eq!(
            health_check(s, &HealthContext::default(), &tun).resend,
            Resend::No(NoResend::RetriesExhausted)
        );
    }
}

#[test]
fn cfg_025_sensitivity_zero_turns_health_off() {
    let mut tun = t();
    assert_eq!(tun.set_health_sensitivity(0), std::result::Result::Ok(()));
    for s in HealthStatus::ALL.into_iter().filter(|s| !s.is_ok()) {
        let o = health_check(s, &HealthContext::default(), &tun);
        assert_eq!((o.local_ni, o.peer_ni), (NiEffect::NONE, NiEffect::NONE));
        assert!(!matches!(o.resend, Resend::Yes { .. }), "{s}");
    }
}

#[test]
fn ok_raises_the_local_ni_and_only_received_messages_raise_the_peer_ni() {
    let sent = health_check(Ok, &HealthContext::default(), &t());
    assert_eq!(sent.local_ni.change, HealthChange::Raise);
    assert!(!sent.local_ni.reset_ping_count);
    assert_eq!(sent.peer_ni, NiEffect::NONE);
    assert!(sent.counters.is_empty());

    let rx = HealthContext {
        committed: Some(Committed::Rx),
        ..HealthContext::default()
    };
    let got = health_check(Ok, &rx, &t());
    assert_eq!(
        got.local_ni,
        NiEffect {
            change: HealthChange::Raise,
            reset_ping_count: true,
            recovery: false
        }
    );
    assert_eq!(
        got.peer_ni,
        NiEffect {
            change: HealthChange::Raise,
            reset_ping_count: true,
            recovery: true
        }
    );
    // Still below 1000 after the raise: back on recovery; at 1000: off.
    let h = got.peer_ni.change.apply(HealthValue::clamped(500), 100);
    assert_eq!(h.get(), 600);
    assert!(got.peer_ni.joins_recovery(h));
    let h = got.peer_ni.change.apply(HealthValue::clamped(950), 100);
    assert!(!got.peer_ni.joins_recovery(h));
}

#[test]
fn routers_restore_peer_nis_straight_to_1000() {
    for ctx in [
        HealthContext {
            committed: Some(Committed::Rx),
            peer_is_router: true,
            ..HealthContext::default()
        },
        HealthContext {
            committed: Some(Committed::Rx),
            routing_enabled: true,
            peer_ni_count: 1,
            ..HealthContext::default()
        },
    ] {
        let o = health_check(Ok, &ctx, &t());
        assert_eq!(o.peer_ni.change, HealthChange::Restore);
        assert_eq!(
            o.peer_ni.change.apply(HealthValue::ZERO, 100),
            HealthValue::MAX
        );
    }
}

#[test]
fn successful_sends_raise_health_by_the_rule() {
    // A local NI at 0 needs ten OKs at sensitivity 100 to get back to 1000.
    let tun = t();
    let mut h = HealthValue::ZERO;
    let mut steps = Vec::new();
    for _ in 0..10 {
        let o = health_check(Ok, &HealthContext::default(), &tun);
        h = o.local_ni.change.apply(h, tun.health_sensitivity());
        steps.push(h.get());
    }
    assert_eq!(steps, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
}

#[test]
fn hlt_025_local_ni_status_follows_health() {
    let tun = t();
    let mut h = HealthValue::MAX;
    let mut changes = Vec::new();
    for _ in 0..10 {
        let o = health_check(LocalError, &HealthContext::default(), &tun);
        let after = o.local_ni.change.apply(h, tun.health_sensitivity());
        changes.extend(local_ni_state_change(h, after));
        h = after;
    }
    assert_eq!(changes, [NiState::Down]);
    for _ in 0..10 {
        let o = health_check(Ok, &HealthContext::default(), &tun);
        let after = o.local_ni.change.apply(h, tun.health_sensitivity());
        changes.extend(local_ni_state_change(h, after));
        h = after;
    }
    assert_eq!(changes, [NiState::Down, NiState::Up]);
}

#[test]
fn lnt_020_ten_failures_at_sensitivity_100_take_an_ni_to_0() {
    let tun = t();
    let mut h = HealthValue::MAX;
    for _ in 0..10 {
        let o = health_check(LocalTimeout, &HealthContext::default(), &tun);
        h = o.local_ni.change.apply(h, tun.health_sensitivity());
    }
    assert!(h.is_zero());
}
