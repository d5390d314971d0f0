//! The configuration of one o2iblnd NI: the ko2iblnd tunables (protocol reference §1.15)
//! that this driver honours, and the sizes of its registered buffer pools.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use lnet::{LndType, Nid};

use super::wire::{Version, IBLND_DEFAULT_QUEUE_DEPTH, IBLND_DEFAULT_SERVICE_PORT};

/// Default `timeout` (since 2.16.53): a tx may wait this long on a connection.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(50);
/// Default `keepalive`: a NOOP goes out after this long without a send.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(100);
/// `RDMA_RESOLVE_TIMEOUT`: address and route resolution, each.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_millis(5000);
/// Default number of message buffers (`ntx`).
pub const DEFAULT_NTX: usize = 512;
/// Default number of 1 MiB bulk buffers in each of the source and sink pools.
pub const DEFAULT_BULK_BUFFERS: usize = 32;
/// Default `conns_per_peer`: the connections an active side opens to a peer.
pub const DEFAULT_CONNS_PER_PEER: u32 = 1;
/// The largest `conns_per_peer` the kernel takes (`lnetctl` checks 0-127).
pub const MAX_CONNS_PER_PEER: u32 = 127;

/// Default number of connections the NI can hold at once (receive buffers are set aside
/// for each).
pub const DEFAULT_MAX_CONNS: usize = 32;
/// Default bound of incoming connections in handshake (accepted, not yet established) from
/// one IP address. The kernel has no such bound; a well-behaved peer opens its
/// `conns_per_peer` connections (1 by default) at once, and a CONNREQ over the bound is
/// rejected with `IBLND_REJECT_NO_RESOURCES`, which the requester does not retry: raise it
/// for peers that open more.
pub const DEFAULT_MAX_HANDSHAKES_PER_ADDR: usize = 4;

/// Default [`O2ibLndConfig::max_handshakes`]: half the connections, so that requesters
/// on many addresses together leave the other half to peers that complete their
/// handshakes.
pub const DEFAULT_MAX_HANDSHAKES: usize = DEFAULT_MAX_CONNS / 2;
/// Bytes of one bulk buffer: `LNET_MTU`.
pub const BULK_BUFFER_BYTES: usize = 1 << 20;

/// How long a connection may stay in handshake before it is aborted, for the LND
/// `timeout`: `max(5 s, timeout/4)`. It bounds an active connect, and a passive one whose
/// requester never completes it (no RTU), before the IB CM's own REP retries would end it.
pub fn connreq_timeout(timeout: Duration) -> Duration {
    (timeout / 4).max(Duration::from_secs(5))
}

/// How long a tx may wait for a connection, for the LND `timeout`: the connect timeout
/// plus two resolutions.
pub fn wait_for_conn_timeout(timeout: Duration) -> Duration {
    connreq_timeout(timeout) + 2 * RESOLVE_TIMEOUT
}

/// What it takes to start an o2iblnd NI.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct O2ibLndConfig {
    /// The NI's NID (`<IPv4 address>@o2ib<n>`); the RDMA-CM listener binds its address.
    pub nid: Nid,
    /// The NI's incarnation (microseconds since the epoch at start-up, as the kernel uses).
    pub incarnation: u64,
    /// The port to listen on (`service`, 987); `None`: no listener (active side only).
    pub listen_port: Option<u16>,
    /// The port peers listen on (`service`).
    pub peer_port: u16,
    /// `peer_credits`: the queue depth offered and the largest accepted (8..=255).
    pub peer_credits: u16,
    /// `peer_credits_hiw` (0: `peer_credits / 2`).
    pub peercredits_hiw: u16,
    /// `concurrent_sends` (0: `peer_credits`).
    pub concurrent_sends: u16,
    /// `conns_per_peer`: the connections an active side opens to a peer it has no
    /// connection to (0: 1, the module's default). The NI's live value is in
    /// [`super::LiveTunables`].
    pub conns_per_peer: u32,
    /// The version an active connect starts with (v2; v1 only to talk to old peers).
    pub version: Version,
    /// `timeout`: deadline of a tx on a connection.
    pub timeout: Duration,
    /// `keepalive`: send a NOOP after this long without a send; `None`: never.
    pub keepalive: Option<Duration>,
    /// `retry_count` of the RDMA-CM connect.
    pub retry_count: u8,
    /// `rnr_retry_count` of the RDMA-CM connect.
    pub rnr_retry_count: u8,
    /// Message buffers (each 4096 bytes, registered once).
    pub ntx: usize,
    /// 1 MiB bulk buffers in each of the source and sink pools (registered once).
    pub bulk_buffers: usize,
    /// Connections the NI can hold at once.
    pub max_conns: usize,
    /// Incoming connections in handshake (accepted, waiting for the requester's RTU) from
    /// one IP address; a CONNREQ over it is rejected with `IBLND_REJECT_NO_RESOURCES`.
    pub max_handshakes_per_addr: usize,
    /// Incoming connections in handshake from all addresses together; a CONNREQ over it
    /// is rejected with `IBLND_REJECT_NO_RESOURCES`.
    pub max_handshakes: usize,
}

/// A configuration that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A `timeout` of 0: the NI needs a bound on its waits.
    #[error("timeout must be at least 1 second, got 0")]
    ZeroTimeout,
    /// The NID is not on an o2ib net or has no IPv4 address.
    #[error("{nid} is not an IPv4 NID on an o2ib net")]
    NotO2ib {
        /// The NID.
        nid: Nid,
    },
    /// `peer_credits` outside 8..=255.
    #[error("peer_credits {got} outside 8..=255")]
    PeerCredits {
        /// The value.
        got: u16,
    },
    /// `conns_per_peer` above 127.
    #[error("conns_per_peer {got} outside 0..=127")]
    ConnsPerPeer {
        /// The value.
        got: u32,
    },
    /// A pool with no buffers, too many connections for the wr_id encoding, or a zero
    /// handshake bound.
    #[error("{what} must be in 1..={max}, got {got}")]
    PoolSize {
        /// Which pool.
        what: &'static str,
        /// The value.
        got: usize,
        /// The largest allowed.
        max: usize,
    },
}

impl O2ibLndConfig {
    /// The defaults of ko2iblnd for `nid`.
    pub fn new(nid: Nid, incarnation: u64) -> O2ibLndConfig {
        O2ibLndConfig {
            nid,
            incarnation,
            listen_port: Some(IBLND_DEFAULT_SERVICE_PORT),
            peer_port: IBLND_DEFAULT_SERVICE_PORT,
            peer_credits: IBLND_DEFAULT_QUEUE_DEPTH,
            peercredits_hiw: 0,
            concurrent_sends: 0,
            conns_per_peer: DEFAULT_CONNS_PER_PEER,
            version: Version::V2,
            timeout: DEFAULT_TIMEOUT,
            keepalive: Some(DEFAULT_KEEPALIVE),
            retry_count: 5,
            rnr_retry_count: 6,
            ntx: DEFAULT_NTX,
            bulk_buffers: DEFAULT_BULK_BUFFERS,
            max_conns: DEFAULT_MAX_CONNS,
            max_handshakes_per_addr: DEFAULT_MAX_HANDSHAKES_PER_ADDR,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
        }
    }

    /// The NI's IPv4 address.
    pub fn ip(&self) -> Option<Ipv4Addr> {
        if self.nid.net.lnd != LndType::O2IBLND {
            return None;
        }
        self.nid.addr_u32().map(Ipv4Addr::from)
    }

    /// The address of a peer's listener.
    pub fn peer_addr(&self, peer: Nid) -> Option<SocketAddrV4> {
        if peer.net != self.nid.net {
            return None;
        }
        peer.addr_u32()
            .map(|a| SocketAddrV4::new(Ipv4Addr::from(a), self.peer_port))
    }

    /// How long a connection may stay in handshake before it is aborted
    /// ([`connreq_timeout`] of `timeout`).
    pub fn connreq_timeout(&self) -> Duration {
        connreq_timeout(self.timeout)
    }

    /// How long a tx may wait for a connection ([`wait_for_conn_timeout`] of `timeout`).
    pub fn wait_for_conn_timeout(&self) -> Duration {
        wait_for_conn_timeout(self.timeout)
    }

    /// Receive buffers of one connection: `2·queue_depth + 2`.
    pub fn rx_per_conn(&self) -> usize {
        2 * usize::from(self.peer_credits) + 2
    }

    /// Checks that the configuration can run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ip().is_none() {
            return Err(ConfigError::NotO2ib { nid: self.nid });
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        if !(8..=255).contains(&self.peer_credits) {
            return Err(ConfigError::PeerCredits {
                got: self.peer_credits,
            });
        }
        if self.conns_per_peer > MAX_CONNS_PER_PEER {
            return Err(ConfigError::ConnsPerPeer {
                got: self.conns_per_peer,
            });
        }
        for (what, got, max) in [
            ("ntx", self.ntx, 1 << 20),
            ("bulk_buffers", self.bulk_buffers, 1024),
            ("max_conns", self.max_conns, 1 << 16),
            (
                "max_handshakes_per_addr",
                self.max_handshakes_per_addr,
                1 << 16,
            ),
            ("max_handshakes", self.max_handshakes, 1 << 16),
        ] {
            if got == 0 || got > max {
                return Err(ConfigError::PoolSize { what, got, max });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let nid: Nid = "10.0.0.1@o2ib".parse().unwrap();
        let c = O2ibLndConfig::new(nid, 1);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.ip(), Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(c.connreq_timeout(), Duration::from_millis(12_500));
        assert_eq!(c.wait_for_conn_timeout(), Duration::from_millis(22_500));
        assert_eq!(c.rx_per_conn(), 18);
        assert_eq!(
            c.peer_addr("10.0.0.2@o2ib".parse().unwrap()),
            Some("10.0.0.2:987".parse().unwrap())
        );
        assert_eq!(c.peer_addr("10.0.0.2@tcp".parse().unwrap()), None);
        let tcp = O2ibLndConfig::new("10.0.0.1@tcp".parse().unwrap(), 1);
        assert!(matches!(tcp.validate(), Err(ConfigError::NotO2ib { .. })));
        assert_eq!(c.max_handshakes_per_addr, 4);
        assert_eq!(c.max_handshakes, 16);
        let mut none = c.clone();
        none.max_handshakes = 0;
        assert!(matches!(
            none.validate(),
            Err(ConfigError::PoolSize {
                what: "max_handshakes",
                ..
            })
        ));
        let mut unbounded = c.clone();
        unbounded.max_handshakes_per_addr = 0;
        assert!(matches!(
            unbounded.validate(),
            Err(ConfigError::PoolSize {
                what: "max_handshakes_per_addr",
                ..
            })
        ));
        let mut unbounded = c.clone();
        unbounded.timeout = Duration::ZERO;
        assert_eq!(unbounded.validate(), Err(ConfigError::ZeroTimeout));
        let mut many = c.clone();
        many.conns_per_peer = 128;
        assert_eq!(many.validate(), Err(ConfigError::ConnsPerPeer { got: 128 }));
        many.conns_per_peer = 127;
        assert_eq!(many.validate(), Ok(()));
        assert_eq!(c.conns_per_peer, 1);
        let mut small = c.clone();
        small.peer_credits = 4;
        assert!(matches!(
            small.validate(),
            Err(ConfigError::PeerCredits { got: 4 })
        ));
    }
}
