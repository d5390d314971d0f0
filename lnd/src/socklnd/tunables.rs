//! The socklnd settings that change while the NI runs (`lnetctl net set --lnd-timeout`,
//! `--conns-per-peer`): read where they are used, as the kernel's ksocklnd reads its
//! `sock_timeout` module parameter and the NI's `conns_per_peer` at each use.
//!
//! The timeout applies from then on to every wait it bounds (an incoming frame, a write
//! that does not drain, a message waiting for a connection, an active handshake), on the
//! connections there are and those to come. `conns_per_peer` is taken by a peer when the
//! NI first learns of it (the kernel keeps it in the peer's connection record), so the
//! peers the NI has keep their connection sets and new peers get the new count.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::config::{conns_per_peer_for_speed, ConfigError, SockLndConfig};

/// The live `timeout` and `conns_per_peer` of one socklnd NI, shared by its tasks and
/// whoever changes them. Lock-free: each value is one atomic.
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
    pub fn new(config: &SockLndConfig) -> LiveTunables {
        LiveTunables {
            timeout_ms: AtomicU64::new(millis(config.timeout)),
            conns_per_peer: AtomicU32::new(config.conns_per_peer),
        }
    }

    /// The socklnd timeout T now.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets the timeout; 0 is refused (the NI needs a bound).
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), ConfigError> {
        if timeout.is_zero() {
            return Err(ConfigError::Zero { field: "timeout" });
        }
        self.timeout_ms.store(millis(timeout), Ordering::Relaxed);
        Ok(())
    }

    /// `conns_per_peer` as set (0: "auto").
    pub fn conns_per_peer(&self) -> u32 {
        self.conns_per_peer.load(Ordering::Relaxed)
    }

    /// `conns_per_peer` with 0 resolved (to 1: the link speed is not known).
    pub fn effective_conns_per_peer(&self) -> u32 {
        match self.conns_per_peer() {
            0 => conns_per_peer_for_speed(None),
            n => n,
        }
    }

    /// Sets `conns_per_peer` for the peers the NI learns of from now on.
    pub fn set_conns_per_peer(&self, conns_per_peer: u32) {
        self.conns_per_peer.store(conns_per_peer, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn starts_as_configured_and_takes_new_values() {
        let mut c = SockLndConfig::new("10.0.0.1@tcp".parse().unwrap(), 1);
        c.conns_per_peer = 0;
        let t = LiveTunables::new(&c);
        assert_eq!(t.timeout(), c.timeout);
        assert_eq!((t.conns_per_peer(), t.effective_conns_per_peer()), (0, 1));
        t.set_conns_per_peer(3);
        assert_eq!((t.conns_per_peer(), t.effective_conns_per_peer()), (3, 3));
        t.set_timeout(Duration::from_secs(7)).unwrap();
        assert_eq!(t.timeout(), Duration::from_secs(7));
        assert!(t.set_timeout(Duration::ZERO).is_err());
        assert_eq!(t.timeout(), Duration::from_secs(7));
    }
}
