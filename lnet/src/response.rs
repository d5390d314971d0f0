//! Response tracking (health reference 2.3): which requests wait for their ACK or REPLY
//! under a deadline, and what happens when it passes.
//!
//! `lnet_response_tracking` (default 3) selects the tracked requests: 0 tracks only LNet
//! pings and discovery pushes, 1 adds GETs, 2 adds PUTs, 3 adds both. An MD can force
//! tracking on or off. A PUT that asks for no ACK has no response to wait for and is never
//! tracked. Tracking starts when the LND has accepted the send; the deadline is then
//! `now + transaction_timeout`. The monitor checks every `transaction_timeout / 2`. On
//! expiry `response_timeout_count` goes up, the next-hop peer NI loses health and joins the
//! peer recovery queue; the request is not resent.

pub(crate) mod setting;

pub use setting::{ResponseTracking, ResponseTrackingError};

use crate::health::check::{HealthChange, NiEffect};
use crate::time::Millis;

/// A request that might wait for a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Request {
    /// An LNet ping (a GET to portal 0).
    Ping,
    /// A discovery push (a PUT to portal 0).
    DiscoveryPush,
    /// Any other GET; its REPLY is awaited.
    Get,
    /// Any other PUT; `ack` says whether it asked for an ACK.
    Put {
        /// Whether the PUT asked for an ACK.
        ack: bool,
    },
}

/// Whether a request is tracked. `md_override` is the MD's own choice (force on or off),
/// if it made one. A PUT without an ACK is never tracked: no response will come.
pub const fn is_tracked(
    setting: ResponseTracking,
    request: Request,
    md_override: Option<bool>,
) -> bool {
    if let Request::Put { ack: false } = request {
        return false;
    }
    if let Some(forced) = md_override {
        return forced;
    }
    match request {
        Request::Ping | Request::DiscoveryPush => true,
        Request::Get => matches!(setting, ResponseTracking::Gets | ResponseTracking::Both),
        Request::Put { .. } => matches!(setting, ResponseTracking::Puts | ResponseTracking::Both),
    }
}

/// The response deadline of a request the LND accepted at `sent`: `sent +
/// transaction_timeout`.
pub const fn response_deadline(sent: Millis, transaction_timeout_secs: u32) -> Millis {
    sent.saturating_add(Millis::from_secs(transaction_timeout_secs as u64))
}

/// How often the monitor looks for expired responses: every `transaction_timeout / 2`.
pub const fn check_interval(transaction_timeout_secs: u32) -> Millis {
    Millis::from_millis((transaction_timeout_secs as u64).saturating_mul(1000) / 2)
}

/// Whether a response with this deadline has expired at `now`.
pub const fn is_expired(deadline: Millis, now: Millis) -> bool {
    now.as_millis() > deadline.as_millis()
}

/// What an expired response does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseExpiry {
    /// The next-hop peer NI: it loses health and, below 1000, joins the peer NI recovery
    /// queue.
    pub next_hop_peer_ni: NiEffect,
    /// `response_timeout_count` goes up.
    pub bump_response_timeout_count: bool,
    /// Whether the request is resent: never.
    pub resend: bool,
}

/// What happens when a tracked response does not arrive by its deadline.
pub const fn on_expiry() -> ResponseExpiry {
    ResponseExpiry {
        next_hop_peer_ni: NiEffect {
            change: HealthChange::Lower,
            reset_ping_count: false,
            recovery: true,
        },
        bump_response_timeout_count: true,
        resend: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::value::HealthValue;

    #[test]
    fn response_tracking_values() {
        assert_eq!(ResponseTracking::default(), ResponseTracking::Both);
        for v in 0..=3 {
            assert_eq!(
                ResponseTracking::try_from(v).map(|t| i64::from(t.to_u32())),
                Ok(v)
            );
        }
        assert_eq!(
            ResponseTracking::try_from(4),
            Err(ResponseTrackingError::OutOfRange { value: 4 })
        );
        assert!(ResponseTracking::try_from(-1).is_err());
    }

    #[test]
    fn lnt_095_which_requests_are_tracked() {
        use Request::*;
        use ResponseTracking::*;
        let cases = [
            (PingsOnly, [true, true, false, false]),
            (Gets, [true, true, true, false]),
            (Puts, [true, true, false, true]),
            (Both, [true, true, true, true]),
        ];
        for (setting, expect) in cases {
            let got =
                [Ping, DiscoveryPush, Get, Put { ack: true }].map(|r| is_tracked(setting, r, None));
            assert_eq!(got, expect, "{setting:?}");
        }
        // The MD can force tracking either way.
        assert!(is_tracked(PingsOnly, Get, Some(true)));
        assert!(!is_tracked(Both, Ping, Some(false)));
    }

    #[test]
    fn lnt_105_a_put_without_ack_is_never_tracked() {
        for setting in [
            ResponseTracking::PingsOnly,
            ResponseTracking::Gets,
            ResponseTracking::Puts,
            ResponseTracking::Both,
        ] {
            assert!(!is_tracked(setting, Request::Put { ack: false }, None));
            assert!(!is_tracked(
                setting,
                Request::Put { ack: false },
                Some(true)
            ));
        }
        // The deadline starts when the LND took the message, not before.
        assert_eq!(
            response_deadline(Millis::from_secs(10), 150),
            Millis::from_secs(160)
        );
    }

    #[test]
    fn lnt_095_expiry_lowers_the_next_hop_and_does_not_resend() {
        let deadline = response_deadline(Millis::ZERO, 150);
        assert!(!is_expired(deadline, Millis::from_secs(150)));
        assert!(is_expired(deadline, Millis(150_001)));
        assert_eq!(check_interval(150), Millis::from_secs(75));
        assert_eq!(check_interval(1), Millis(500));
        let e = on_expiry();
        assert!(e.bump_response_timeout_count);
        assert!(!e.resend);
        let after = e.next_hop_peer_ni.change.apply(HealthValue::MAX, 100);
        assert_eq!(after.get(), 900);
        assert!(e.next_hop_peer_ni.joins_recovery(after));
    }
}
