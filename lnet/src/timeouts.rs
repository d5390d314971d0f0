//! Timeouts (health reference 2.6): the LNet-derived LND timeout, the message deadline, and
//! the deadline gate of health handling.
//!
//! The configurable pair is `transaction_timeout` (default 150 s) and `retry_count`
//! (default 2); their `lnetctl set` rules live in [`crate::tunables`]. From them LNet
//! derives `lnd_timeout = max((transaction_timeout − 1) / (retry_count + 1), 1)` (49 s by
//! default), shown by `lnetctl global show`. A message's deadline is its commit time plus
//! `lnd_timeout × (retry_count + 1) + 1` seconds, where `lnd_timeout` is the LND's own
//! timeout (o2iblnd and socklnd: 50 s, hence 151 s); an LND that reports 0 gets
//! `transaction_timeout` instead.

use crate::time::Millis;
use crate::tunables::Tunables;

/// LNet's derived LND timeout in seconds: `max((transaction_timeout − 1) / (retry_count +
/// 1), 1)`.
pub const fn lnd_timeout_secs(transaction_timeout: u32, retry_count: u32) -> u32 {
    let per_try = transaction_timeout.saturating_sub(1) / retry_count.saturating_add(1);
    if per_try < 1 {
        1
    } else {
        per_try
    }
}

impl Tunables {
    /// LNet's derived `lnd_timeout` (seconds), as `lnetctl global show` prints it.
    pub const fn lnd_timeout(&self) -> u32 {
        lnd_timeout_secs(self.transaction_timeout(), self.retry_count())
    }
}

/// How long a message may live from its commit: `lnd_timeout × (retry_count + 1) + 1`
/// seconds with the LND's own timeout, or `transaction_timeout` when the LND reports 0.
pub const fn message_lifetime(
    lnd_own_timeout_secs: u32,
    transaction_timeout: u32,
    retry_count: u32,
) -> Millis {
    if lnd_own_timeout_secs == 0 {
        Millis::from_secs(transaction_timeout as u64)
    } else {
        let tries = retry_count as u64 + 1;
        Millis::from_secs((lnd_own_timeout_secs as u64).saturating_mul(tries) + 1)
    }
}

/// The deadline of a message committed at `committed`; see [`message_lifetime`].
pub const fn message_deadline(
    committed: Millis,
    lnd_own_timeout_secs: u32,
    transaction_timeout: u32,
    retry_count: u32,
) -> Millis {
    committed.saturating_add(message_lifetime(
        lnd_own_timeout_secs,
        transaction_timeout,
        retry_count,
    ))
}

/// Whether a message with this deadline is late at `now` (strictly past it). A late
/// failure changes no health, bumps no health counter and is not resent.
pub const fn is_past_deadline(deadline: Millis, now: Millis) -> bool {
    now.as_millis() > deadline.as_millis()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lnt_080_lnd_timeout_is_the_transaction_timeout_shared_by_the_tries() {
        // Defaults: (150 − 1) / (2 + 1) = 49.
        assert_eq!(lnd_timeout_secs(150, 2), 49);
        // The older 50 s default with 2 retries: (50 − 1) / 3 = 16.
        assert_eq!(lnd_timeout_secs(50, 2), 16);
        assert_eq!(lnd_timeout_secs(10, 0), 9);
        // Never below 1.
        assert_eq!(lnd_timeout_secs(1, 0), 1);
        assert_eq!(lnd_timeout_secs(3, 5), 1);
        assert_eq!(lnd_timeout_secs(0, 0), 1);
        assert_eq!(lnd_timeout_secs(u32::MAX, u32::MAX), 1);
    }

    #[test]
    fn lnt_085_message_deadline_from_the_lnd_timeout() {
        // o2iblnd/socklnd timeout 50 with 2 retries: 50 × 3 + 1 = 151 s.
        assert_eq!(message_lifetime(50, 150, 2), Millis::from_secs(151));
        assert_eq!(
            message_deadline(Millis(1_000), 50, 150, 2),
            Millis(1_000 + 151_000)
        );
        // An LND that reports 0 gets the transaction timeout.
        assert_eq!(message_lifetime(0, 150, 2), Millis::from_secs(150));
        // Saturates instead of overflowing.
        assert_eq!(
            message_deadline(Millis(u64::MAX - 1), 50, 150, 2),
            Millis(u64::MAX)
        );
    }

    #[test]
    fn lnt_065_late_messages_are_past_their_deadline() {
        let deadline = message_deadline(Millis::ZERO, 50, 150, 2);
        assert!(!is_past_deadline(deadline, Millis::from_secs(151)));
        assert!(is_past_deadline(deadline, Millis(151_001)));
    }

    proptest! {
        #[test]
        fn lnd_timeout_fits_the_transaction(tt in 1u32..100_000, rc in 0u32..100) {
            let lnd = lnd_timeout_secs(tt, rc);
            prop_assert!(lnd >= 1);
            if tt > rc + 1 {
                // All the tries fit in the transaction timeout.
                prop_assert!(u64::from(lnd) * u64::from(rc + 1) < u64::from(tt));
            }
        }
    }
}
