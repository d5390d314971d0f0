//! The o2iblnd settings that change while the NI runs: the `timeout` module parameter of
//! ko2iblnd (`lnetctl net set --lnd-timeout` on an o2ib net), which the kernel reads at
//! each use, and the NI's `conns_per_peer` (`lnetctl net set --conns-per-peer`).
//!
//! The NI takes a new timeout before it handles its next event, so that every wait started
//! from then on is bounded by it: a tx's wait for a connection and its deadline on a
//! connection, and the handshake of a connection started then (active or passive). Waits
//! already started keep the bound they started with. `conns_per_peer` is read when the NI
//! starts connecting to a peer it has no connection to (the kernel's new peer NI): the
//! peers connected keep their connections.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::config::{ConfigError, O2ibLndConfig};

/// The live `timeout` and `conns_per_peer` of one o2iblnd NI, shared by its task and
/// whoever changes them. Lock-free: each is one atomic.
#[derive(Debug)]
pub struct LiveTunables {
    timeout_ms: AtomicU64,
    conns_per_peer: AtomicU32,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LiveTunables {
    /// The values `config` starts with.
    pub fn new(config: &O2ibLndConfig) -> LiveTunables {
        LiveTunables {
            timeout_ms: AtomicU64::new(millis(config.timeout)),
            conns_per_peer: AtomicU32::new(config.conns_per_peer),
        }
    }

    /// `conns_per_peer` as set.
    pub fn conns_per_peer(&self) -> u32 {
        self.conns_per_peer.load(Ordering::Relaxed)
    }

    /// The connections to open to a peer: `conns_per_peer`, 0 taken as 1 (the module's
    /// default, as the kernel takes an NI's 0 when it starts).
    pub fn effective_conns_per_peer(&self) -> u32 {
        self.conns_per_peer().max(1)
    }

    /// Sets `conns_per_peer` for the peers the NI connects to from now on; above 127 is
    /// refused.
    pub fn set_conns_per_peer(&self, conns_per_peer: u32) -> Result<(), ConfigError> {
        if conns_per_peer > super::config::MAX_CONNS_PER_PEER {
            return Err(ConfigError::ConnsPerPeer {
                got: conns_per_peer,
            });
        }
        self.conns_per_peer.store(conns_per_peer, Ordering::Relaxed);
        Ok(())
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
        assert_eq!((t.conns_per_peer(), t.effective_conns_per_peer()), (1, 1));
        t.set_conns_per_peer(4).unwrap();
        assert_eq!((t.conns_per_peer(), t.effective_conns_per_peer()), (4, 4));
        t.set_conns_per_peer(0).unwrap();
        assert_eq!((t.conns_per_peer(), t.effective_conns_per_peer()), (0, 1));
        assert_eq!(
            t.set_conns_per_peer(128),
            Err(ConfigError::ConnsPerPeer { got: 128 })
        );
        assert_eq!(t.conns_per_peer(), 0);
    }
}
