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
mod tests;
