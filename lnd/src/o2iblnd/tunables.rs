//! The o2iblnd setting that changes while the NI runs (`lnetctl net set --lnd-timeout` on
//! an o2ib net): the `timeout` module parameter of ko2iblnd, which the kernel reads at
//! each use.
//!
//! The NI takes a new value before it handles its next event, so that every wait started
//! from then on is bounded by it: a tx's wait for a connection and its deadline on a
//! connection, and the handshake of a connection started then (active or passive). Waits
//! already started keep the bound they started with.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::config::{ConfigError, O2ibLndConfig};

/// The live `timeout` of one o2iblnd NI, shared by its task and whoever changes it.
/// Lock-free: one atomic.
#[derive(Debug)]
pub struct LiveTunables {
    timeout_ms: AtomicU64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LiveTunables {
    /// The value `config` starts with.
    pub fn new(config: &O2ibLndConfig) -> LiveTunables {
        LiveTunables {
            timeout_ms: AtomicU64::new(millis(config.timeout)),
        }
    }

    /// The o2iblnd timeout now.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets the timeout for the waits started from now on; 0 is refused (the NI needs a
    /// bound).
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), ConfigError> {
        if timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        self.timeout_ms.store(millis(timeout), Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn starts_as_configured_and_takes_new_values() {
        let c = O2ibLndConfig::new("10.0.0.1@o2ib".parse().unwrap(), 1);
        let t = LiveTunables::new(&c);
        assert_eq!(t.timeout(), c.timeout);
        t.set_timeout(Duration::from_secs(7)).unwrap();
        assert_eq!(t.timeout(), Duration::from_secs(7));
        assert_eq!(t.set_timeout(Duration::ZERO), Err(ConfigError::ZeroTimeout));
        assert_eq!(t.timeout(), Duration::from_secs(7));
    }
}
