//! What a finished message does to health (health reference 2.2 and 2.4): given its
//! [`HealthStatus`] and the circumstances, which NI loses or gains health, which recovery
//! queue it belongs on, which counters go up, and whether the message is resent.
//!
//! [`health_check`] only decides; the caller owns the health values and queues and applies
//! the [`HealthOutcome`] (with [`HealthChange::apply`] and [`NiEffect::joins_recovery`]).
//!
//! The rules, in the order they are checked:
//! * Only a message committed for tx or rx counts. Tx-committed messages charge the tx pair
//!   (local NI, peer NI); rx-only messages the rx pair, and they are never resent.
//! * A failure past the message deadline does nothing but count as late.
//! * Remote health (up or down) is never applied to one of this node's own NIDs, nor to a
//!   peer with at most one NI unless the peer is a router or this node routes.
//! * OK raises the local NI. A *received* OK also raises the peer NI (or restores it to
//!   1000 when the peer is a router or this node routes) and resets both ping counts.
//! * A failure lowers the NI(s) its status charges, by `health_sensitivity` (nothing if 0),
//!   and puts them on recovery.
//! * A resend needs a resendable status, local resend allowed (this node's ping buffer has
//!   more than two entries) for local statuses, remote resend allowed (the peer has more
//!   than one NI) for remote ones, a tx-committed message that is not a recovery ping and
//!   not flagged no-resend, and retries left (else `failed_resends` goes up). A non-MR peer
//!   is resent to from the same local NI, unless this node is forwarding the message.

use crate::health::value::HealthValue;
use crate::health::HealthStatus;
use crate::tunables::Tunables;

/// Which pair of NIs a message is accounted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Committed {
    /// Committed for transmit: the tx local NI and tx peer NI.
    Tx,
    /// Committed for receive only: the rx local NI and rx peer NI.
    Rx,
}

/// The circumstances of a finished message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthContext {
    /// What the message was committed for; `None` if it never was (no health handling).
    pub committed: Option<Committed>,
    /// Whether the message is past its deadline (see [`crate::timeouts`]).
    pub past_deadline: bool,
    /// Entries in this node's ping buffer (the loopback NI plus every other NI).
    pub ping_buffer_entries: u32,
    /// How many NIs the peer has.
    pub peer_ni_count: u32,
    /// Whether the peer is a router (gateway).
    pub peer_is_router: bool,
    /// Whether this node has routing enabled.
    pub routing_enabled: bool,
    /// Whether the peer NI is one of this node's own NIDs.
    pub dst_is_local: bool,
    /// How many times the message has been resent so far.
    pub retries_so_far: u32,
    /// Whether the message is a recovery ping.
    pub recovery_ping: bool,
    /// Whether the message was flagged not to be resent.
    pub no_resend: bool,
    /// Whether the destination peer is Multi-Rail.
    pub peer_multi_rail: bool,
    /// Whether this node is forwarding the message for someone else (as a router).
    pub forwarded: bool,
}

impl Default for HealthContext {
    /// A tx-committed, on-time, first-try message between two Multi-Rail nodes with two NIs
    /// each (ping buffer: lo plus two), no routing.
    fn default() -> HealthContext {
        HealthContext {
            committed: Some(Committed::Tx),
            past_deadline: false,
            ping_buffer_entries: 3,
            peer_ni_count: 2,
            peer_is_router: false,
            routing_enabled: false,
            dst_is_local: false,
            retries_so_far: 0,
            recovery_ping: false,
            no_resend: false,
            peer_multi_rail: true,
            forwarded: false,
        }
    }
}

/// How a health value changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthChange {
    /// No change.
    Unchanged,
    /// Down by `health_sensitivity` (floor 0).
    Lower,
    /// Up by `health_sensitivity` (ceiling 1000).
    Raise,
    /// Straight to 1000.
    Restore,
}

impl HealthChange {
    /// The health value after this change with this sensitivity.
    pub const fn apply(self, health: HealthValue, sensitivity: u32) -> HealthValue {
        match self {
            HealthChange::Unchanged => health,
            HealthChange::Lower => health.decremented(sensitivity),
            HealthChange::Raise => health.incremented(sensitivity),
            HealthChange::Restore => HealthValue::MAX,
        }
    }
}

/// What happens to one NI (local or peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NiEffect {
    /// The health change.
    pub change: HealthChange,
    /// Whether its recovery ping count goes back to 0.
    pub reset_ping_count: bool,
    /// Whether it belongs on its recovery queue afterwards, if its health is then below
    /// 1000 (see [`NiEffect::joins_recovery`]).
    pub recovery: bool,
}

impl NiEffect {
    /// Nothing happens to this NI.
    pub const NONE: NiEffect = NiEffect {
        change: HealthChange::Unchanged,
        reset_ping_count: false,
        recovery: false,
    };

    /// Whether the NI goes on (or stays on) its recovery queue, given its health after the
    /// change.
    pub const fn joins_recovery(self, health_after: HealthValue) -> bool {
        self.recovery && !health_after.is_max()
    }
}

/// Where a resend may go out from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResendFrom {
    /// The same local NI as before (non-Multi-Rail peers expect the same source NID).
    SameLocalNi,
    /// Any local NI the selection picks.
    AnyLocalNi,
}

/// Why a message is not resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NoResend {
    /// It went through.
    Delivered,
    /// It was never committed for tx or rx.
    NotCommitted,
    /// It failed past its deadline.
    Late,
    /// The status does not allow a resend.
    StatusNotResendable,
    /// A local failure, and local resend is off (this node's ping buffer has at most two
    /// entries).
    LocalResendOff,
    /// A remote failure, and remote resend is off (the peer has at most one NI).
    RemoteResendOff,
    /// Only received messages are in question; they cannot be resent.
    NotTxCommitted,
    /// Recovery pings are never resent.
    RecoveryPing,
    /// The message was flagged not to be resent.
    NoResendFlag,
    /// `retry_count` resends have been made already (`failed_resends` goes up).
    RetriesExhausted,
}

/// Whether the message is resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resend {
    /// Queue it for a resend.
    Yes {
        /// Which local NIs the resend may use.
        from: ResendFrom,
    },
    /// Do not resend it, for this reason.
    No(NoResend),
}

/// A counter that goes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Counter {
    /// The global counter for this status (`lnetctl stats show`, e.g.
    /// `local_timeout_count`).
    Global(HealthStatus),
    /// The local NI's health-stats counter for this status.
    LocalNi(HealthStatus),
    /// The peer NI's health-stats counter for this status.
    PeerNi(HealthStatus),
    /// `successful_resends`: an OK for a message that had been resent.
    SuccessfulResends,
    /// `failed_resends`: a resendable failure with no retries left.
    FailedResends,
    /// The late-message statistics: a failure past the deadline.
    LateMessage,
}

/// Everything a finished message does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthOutcome {
    /// The pair the effects apply to (`None` if the message was never committed).
    pub pair: Option<Committed>,
    /// The local NI of that pair.
    pub local_ni: NiEffect,
    /// The peer NI of that pair.
    pub peer_ni: NiEffect,
    /// Whether it is resent.
    pub resend: Resend,
    /// The counters that go up, in this order.
    pub counters: Vec<Counter>,
}

const fn is_local_status(status: HealthStatus) -> bool {
    use HealthStatus::*;
    matches!(
        status,
        LocalInterrupt | LocalDropped | LocalAborted | LocalNoRoute | LocalError | LocalTimeout
    )
}

/// Decides what a message finished with `status` does. `tunables` supplies
/// `health_sensitivity` and `retry_count`.
pub fn health_check(
    status: HealthStatus,
    ctx: &HealthContext,
    tunables: &Tunables,
) -> HealthOutcome {
    let mut out = HealthOutcome {
        pair: ctx.committed,
        local_ni: NiEffect::NONE,
        peer_ni: NiEffect::NONE,
        resend: Resend::No(NoResend::NotCommitted),
        counters: Vec::new(),
    };
    let Some(committed) = ctx.committed else {
        return out;
    };
    if !status.is_ok() && ctx.past_deadline {
        out.resend = Resend::No(NoResend::Late);
        out.counters.push(Counter::LateMessage);
        return out;
    }
    let remote_health =
        !ctx.dst_is_local && (ctx.peer_ni_count > 1 || ctx.peer_is_router || ctx.routing_enabled);
    let received = committed == Committed::Rx;

    if status.is_ok() {
        if ctx.retries_so_far > 0 {
            out.counters.push(Counter::SuccessfulResends);
        }
        out.local_ni = NiEffect {
            change: HealthChange::Raise,
            reset_ping_count: received,
            recovery: false,
        };
        if received {
            out.peer_ni = NiEffect {
                change: HealthChange::Unchanged,
                reset_ping_count: true,
                recovery: false,
            };
            if remote_health {
                if ctx.peer_is_router || ctx.routing_enabled {
                    out.peer_ni.change = HealthChange::Restore;
                } else {
                    out.peer_ni.change = HealthChange::Raise;
                    out.peer_ni.recovery = true;
                }
            }
        }
        out.resend = Resend::No(NoResend::Delivered);
        return out;
    }

    let local = is_local_status(status);
    out.counters.push(Counter::Global(status));
    out.counters.push(if local {
        Counter::LocalNi(status)
    } else {
        Counter::PeerNi(status)
    });

    let charge = status.charge();
    if tunables.health_enabled() {
        let lower = NiEffect {
            change: HealthChange::Lower,
            reset_ping_count: false,
            recovery: true,
        };
        if charge.local_ni {
            out.local_ni = lower;
        }
        if charge.peer_ni && remote_health {
            out.peer_ni = lower;
        }
    }

    out.resend = if !status.resendable() {
        Resend::No(NoResend::StatusNotResendable)
    } else if local && ctx.ping_buffer_entries <= 2 {
        Resend::No(NoResend::LocalResendOff)
    } else if !local && ctx.peer_ni_count <= 1 {
        Resend::No(NoResend::RemoteResendOff)
    } else if committed != Committed::Tx {
        Resend::No(NoResend::NotTxCommitted)
    } else if ctx.recovery_ping {
        Resend::No(NoResend::RecoveryPing)
    } else if ctx.no_resend {
        Resend::No(NoResend::NoResendFlag)
    } else if ctx.retries_so_far >= tunables.retry_count() {
        out.counters.push(Counter::FailedResends);
        Resend::No(NoResend::RetriesExhausted)
    } else if !ctx.peer_multi_rail && !ctx.forwarded {
        Resend::Yes {
            from: ResendFrom::SameLocalNi,
        }
    } else {
        Resend::Yes {
            from: ResendFrom::AnyLocalNi,
        }
    };
    out
}

/// A local NI's `up`/`down` status as the ping buffer shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NiState {
    /// Up.
    Up,
    /// Down.
    Down,
}

/// The status change of a local NI whose health went from `before` to `after`: DOWN when it
/// reaches 0, UP when it reaches 1000 again, otherwise none.
pub const fn local_ni_state_change(before: HealthValue, after: HealthValue) -> Option<NiState> {
    if after.is_zero() && !before.is_zero() {
        Some(NiState::Down)
    } else if after.is_max() && !before.is_max() {
        Some(NiState::Up)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
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
}
