//! Token guessing: failed bearer tokens are counted per source address; after
//! [`FREE_FAILURES`] of them, the address must wait before its next request with a token,
//! [`BASE_DELAY_MS`] doubled with each further failure up to [`MAX_DELAY_MS`]. A request
//! in the wait is answered 401 with `Retry-After` without its token being checked, so
//! guessing from one address runs at a few attempts a minute at most. A good token resets
//! the address. At most [`MAX_ADDRESSES`] addresses are followed; when full, those out of
//! their wait are forgotten first, and an address that finds no room is not slowed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use lnet::time::Millis;

/// Failed tokens an address may present before it is slowed.
pub const FREE_FAILURES: u32 = 5;
/// The first wait, in milliseconds.
pub const BASE_DELAY_MS: u64 = 250;
/// The longest wait, in milliseconds.
pub const MAX_DELAY_MS: u64 = 60_000;
/// Addresses followed at once.
pub const MAX_ADDRESSES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    retry_at: Millis,
}

/// The failed-token record of every address.
#[derive(Debug, Default)]
pub(crate) struct AuthThrottle {
    map: Mutex<HashMap<IpAddr, Failures>>,
}

/// The wait after `count` failures.
fn delay(count: u32) -> u64 {
    let over = count.saturating_sub(FREE_FAILURES);
    if over == 0 {
        return 0;
    }
    let shift = (over - 1).min(20);
    BASE_DELAY_MS.saturating_mul(1 << shift).min(MAX_DELAY_MS)
}

impl AuthThrottle {
    /// `Err(ms)` when `ip` must still wait `ms` before presenting a token.
    pub(crate) fn check(&self, ip: IpAddr, now: Millis) -> Result<(), u64> {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&ip) {
            Some(f) if f.retry_at.as_millis() > now.as_millis() => {
                Err(f.retry_at.as_millis() - now.as_millis())
            }
            _ => Ok(()),
        }
    }

    /// Records a failed token from `ip`; returns its failures so far.
    pub(crate) fn failed(&self, ip: IpAddr, now: Millis) -> u32 {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_ADDRESSES && !map.contains_key(&ip) {
            map.retain(|_, f| f.retry_at.as_millis() > now.as_millis());
            if map.len() >= MAX_ADDRESSES {
                return 1;
            }
        }
        let f = map.entry(ip).or_insert(Failures {
            count: 0,
            retry_at: now,
        });
        f.count = f.count.saturating_add(1);
        f.retry_at = now.saturating_add(Millis::from_millis(delay(f.count)));
        f.count
    }

    /// A good token from `ip`: its record goes.
    pub(crate) fn succeeded(&self, ip: IpAddr) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_beyond_the_free_ones_wait_longer_each_time() {
        let t = AuthThrottle::default();
        let ip: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        let at = Millis::from_millis;
        for n in 1..=FREE_FAILURES {
            assert_eq!(t.failed(ip, at(0)), n);
            assert_eq!(t.check(ip, at(0)), Ok(()));
        }
        assert_eq!(t.failed(ip, at(0)), FREE_FAILURES + 1);
        assert_eq!(t.check(ip, at(0)), Err(BASE_DELAY_MS));
        assert_eq!(t.check(other, at(0)), Ok(()));
        assert_eq!(t.check(ip, at(BASE_DELAY_MS)), Ok(()));
        t.failed(ip, at(BASE_DELAY_MS));
        assert_eq!(t.check(ip, at(BASE_DELAY_MS)), Err(2 * BASE_DELAY_MS));
        assert_eq!(delay(FREE_FAILURES + 40), MAX_DELAY_MS);
        t.succeeded(ip);
        assert_eq!(t.check(ip, at(BASE_DELAY_MS)), Ok(()));
    }
}
