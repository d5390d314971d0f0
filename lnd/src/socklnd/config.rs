//! socklnd tunables and their defaults (socklnd reference §6.1 and §3).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use lnet::acceptor::ACCEPTOR_PORT;
use lnet::{LndType, Nid};

use super::wire::ProtoVersion;

/// `sock_timeout` default of 2.17 and later (seconds): the socklnd timeout T.
pub const DEFAULT_SOCK_TIMEOUT: Duration = Duration::from_secs(50);
/// The whole passive handshake (acceptor request, HELLO and its reply): the kernel bounds
/// a passive HELLO's reads by `sock_timeout`, so its default is [`DEFAULT_SOCK_TIMEOUT`];
/// a peer that drips bytes slower than that is cut off however often it sends one.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = DEFAULT_SOCK_TIMEOUT;
/// Most incoming handshakes in progress from one IP address; the kernel has no such limit.
/// A node opens at most `conns_per_peer` x 3 connections to a peer NI at once (bulk in,
/// bulk out, control), far below it; a connection over it is closed at once.
pub const DEFAULT_MAX_HANDSHAKES_PER_ADDR: usize = 32;
/// `accept_timeout`: every read of the acceptor request and of a passive HELLO.
pub const DEFAULT_ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);
/// `credits`: NI tx credits (the LNet layer's).
pub const DEFAULT_CREDITS: u32 = 256;
/// `peer_credits`: per-peer tx credits (the LNet layer's).
pub const DEFAULT_PEER_CREDITS: u32 = 8;
/// `min_bulk`: frames of at least this many bytes prefer a BULK_OUT connection.
pub const DEFAULT_MIN_BULK: usize = 1024;
/// `keepalive`: idle time (nothing received from a peer) before a keepalive NOOP.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(30);
/// A keepalive is not repeated more often than this.
pub const DEFAULT_KEEPALIVE_RETRY: Duration = Duration::from_secs(10);
/// `min_reconnectms`.
pub const DEFAULT_MIN_RECONNECT: Duration = Duration::from_millis(1000);
/// `max_reconnectms`.
pub const DEFAULT_MAX_RECONNECT: Duration = Duration::from_millis(60_000);
/// `accept_backlog`.
pub const DEFAULT_BACKLOG: u32 = 127;
/// Messages a peer holds waiting for a connection or credits before [`crate::Lnd::send`]
/// waits: the bound on buffering per peer.
pub const DEFAULT_PEER_QUEUE: usize = 64;

/// `conns_per_peer` when it is 0 ("auto"): ⌊log2(speed / 1000)⌋ / 2 + 1 with the link
/// speed in Mbit/s (at least 1000), so 1G → 1, 10G → 2, 25G/40G → 3, 100G/200G → 4,
/// 400G → 5; an unknown speed gives 1.
pub fn conns_per_peer_for_speed(speed_mbps: Option<u64>) -> u32 {
    let Some(speed) = speed_mbps else {
        return 1;
    };
    let ratio = speed.max(1000) / 1000;
    // ratio >= 1, so ilog2 is defined.
    ratio.ilog2() / 2 + 1
}

/// The runtimes of the node's CPTs (one thread each): a peer's task and its connections
/// run on the CPT its NID hashes to, as its router buffers and peer NI do. Empty: the
/// runtime the NI was started on. Compared by count.
#[derive(Clone, Default)]
pub struct Cpts(pub Vec<tokio::runtime::Handle>);

impl Cpts {
    /// The runtime of the CPT of `nid`, if there are CPTs.
    pub fn of(&self, nid: &Nid) -> Option<&tokio::runtime::Handle> {
        let n = u32::try_from(self.0.len()).ok().filter(|n| *n > 0)?;
        self.0.get(usize::try_from(nid.cpt(n)).ok()?)
    }
}

impl PartialEq for Cpts {
    fn eq(&self, other: &Cpts) -> bool {
        self.0.len() == other.0.len()
    }
}

impl Eq for Cpts {}

impl std::fmt::Debug for Cpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cpts({})", self.0.len())
    }
}

/// The configuration of one socklnd NI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SockLndConfig {
    /// The NI's NID: a tcp net and the IPv4 address connections come from and go to.
    pub nid: Nid,
    /// Sender incarnation announced in every HELLO: chosen once per start (the kernel uses
    /// wall-clock nanoseconds) and stable while the NI runs; a change makes peers drop
    /// every connection to this NI.
    pub incarnation: u64,
    /// Where the acceptor listens; `None` for no listener (`accept=none`). Kernels listen
    /// on the NI's own address, port 988.
    pub listen: Option<SocketAddr>,
    /// The port dialled on peers (their `accept_port`, 988).
    pub peer_port: u16,
    /// The HELLO version offered on new connections (V3; V2 is learnt from a peer that
    /// answers with it).
    pub version: ProtoVersion,
    /// The socklnd timeout T (`sock_timeout`).
    pub timeout: Duration,
    /// Timeout of each read of the acceptor request and of a passive HELLO.
    pub accept_timeout: Duration,
    /// Timeout of a whole passive handshake ([`DEFAULT_HANDSHAKE_TIMEOUT`]).
    pub handshake_timeout: Duration,
    /// Most passive handshakes in progress from one IP address
    /// ([`DEFAULT_MAX_HANDSHAKES_PER_ADDR`]).
    pub max_handshakes_per_addr: usize,
    /// NI tx credits (`credits`): the LNet layer charges them; socklnd does not count them.
    pub credits: u32,
    /// Per-peer tx credits (`peer_credits`, capped at `credits`): the LNet layer charges
    /// them; socklnd lets each connection's writer hold at most this many LNET frames.
    pub peer_credits: u32,
    /// Messages waiting per peer (for a connection with room) before `send` waits.
    pub peer_queue: usize,
    /// BULK_IN and BULK_OUT connections of each per peer (0 = auto, which is 1 here since
    /// the link speed is not known; see [`conns_per_peer_for_speed`]).
    pub conns_per_peer: u32,
    /// Frame size from which a message prefers a BULK_OUT connection (`min_bulk`).
    pub min_bulk: usize,
    /// Idle time before a keepalive NOOP (`keepalive`); `None` disables keepalives.
    pub keepalive: Option<Duration>,
    /// Least time between two keepalives to one peer.
    pub keepalive_retry: Duration,
    /// First reconnect back-off (`min_reconnectms`).
    pub min_reconnect: Duration,
    /// Longest reconnect back-off (`max_reconnectms`).
    pub max_reconnect: Duration,
    /// Listen backlog (`accept_backlog`).
    pub backlog: u32,
    /// Whether Nagle stays on (`nagle`; off by default: TCP_NODELAY is set).
    pub nagle: bool,
    /// The CPTs peers are spread over.
    pub cpts: Cpts,
}

impl SockLndConfig {
    /// The spec defaults for an NI `nid`: listen on the NID's address, port 988, dial 988.
    /// A NID without an IPv4 address gets no listener.
    pub fn new(nid: Nid, incarnation: u64) -> SockLndConfig {
        let listen = nid
            .addr_u32()
            .map(|a| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), ACCEPTOR_PORT));
        SockLndConfig {
            nid,
            incarnation,
            listen,
            peer_port: ACCEPTOR_PORT,
            version: ProtoVersion::V3,
            timeout: DEFAULT_SOCK_TIMEOUT,
            accept_timeout: DEFAULT_ACCEPT_TIMEOUT,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_handshakes_per_addr: DEFAULT_MAX_HANDSHAKES_PER_ADDR,
            credits: DEFAULT_CREDITS,
            peer_credits: DEFAULT_PEER_CREDITS,
            peer_queue: DEFAULT_PEER_QUEUE,
            conns_per_peer: 0,
            min_bulk: DEFAULT_MIN_BULK,
            keepalive: Some(DEFAULT_KEEPALIVE),
            keepalive_retry: DEFAULT_KEEPALIVE_RETRY,
            min_reconnect: DEFAULT_MIN_RECONNECT,
            max_reconnect: DEFAULT_MAX_RECONNECT,
            backlog: DEFAULT_BACKLOG,
            nagle: false,
            cpts: Cpts::default(),
        }
    }

    /// The NI's IPv4 address, if its NID has one.
    pub fn ip(&self) -> Option<Ipv4Addr> {
        self.nid.addr_u32().map(Ipv4Addr::from)
    }

    /// `conns_per_peer` with 0 resolved (to 1: the link speed is unknown).
    pub fn effective_conns_per_peer(&self) -> u32 {
        if self.conns_per_peer == 0 {
            conns_per_peer_for_speed(None)
        } else {
            self.conns_per_peer
        }
    }

    /// `peer_credits` capped at `credits`, and at least 1.
    pub fn effective_peer_credits(&self) -> u32 {
        self.peer_credits.min(self.credits).max(1)
    }

    /// Checks what the NI cannot run with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nid.net.lnd != LndType::SOCKLND {
            return Err(ConfigError::NotTcp { nid: self.nid });
        }
        if self.ip().is_none() {
            return Err(ConfigError::NoIpv4 { nid: self.nid });
        }
        if self.version == ProtoVersion::V4 {
            return Err(ConfigError::UnsupportedVersion {
                version: self.version,
            });
        }
        if self.credits == 0 {
            return Err(ConfigError::Zero { field: "credits" });
        }
        if self.peer_queue == 0 {
            return Err(ConfigError::Zero {
                field: "peer_queue",
            });
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::Zero { field: "timeout" });
        }
        if self.handshake_timeout.is_zero() {
            return Err(ConfigError::Zero {
                field: "handshake_timeout",
            });
        }
        if self.max_handshakes_per_addr == 0 {
            return Err(ConfigError::Zero {
                field: "max_handshakes_per_addr",
            });
        }
        Ok(())
    }
}

/// A configuration socklnd cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The NID is not on a tcp net.
    #[error("socklnd NI {nid} is not on a tcp net")]
    NotTcp {
        /// The NID.
        nid: Nid,
    },
    /// The NID has no IPv4 address (large-NID socklnd, V4 HELLO, is not supported yet).
    #[error("socklnd NI {nid} has no IPv4 address")]
    NoIpv4 {
        /// The NID.
        nid: Nid,
    },
    /// A HELLO version this driver does not offer.
    #[error("socklnd HELLO version {version:?} is not supported: use V3 or V2")]
    UnsupportedVersion {
        /// The version.
        version: ProtoVersion,
    },
    /// A field that must not be zero.
    #[error("socklnd {field} must not be 0")]
    Zero {
        /// The field.
        field: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conns_per_peer_from_link_speed() {
        assert_eq!(conns_per_peer_for_speed(None), 1);
        assert_eq!(conns_per_peer_for_speed(Some(100)), 1);
        assert_eq!(conns_per_peer_for_speed(Some(1_000)), 1);
        assert_eq!(conns_per_peer_for_speed(Some(10_000)), 2);
        assert_eq!(conns_per_peer_for_speed(Some(25_000)), 3);
        assert_eq!(conns_per_peer_for_speed(Some(40_000)), 3);
        assert_eq!(conns_per_peer_for_speed(Some(100_000)), 4);
        assert_eq!(conns_per_peer_for_speed(Some(200_000)), 4);
        assert_eq!(conns_per_peer_for_speed(Some(400_000)), 5);
    }

    #[test]
    fn defaults_follow_the_spec() {
        let nid: Nid = "10.0.0.1@tcp".parse().unwrap();
        let c = SockLndConfig::new(nid, 7);
        assert_eq!(c.listen, Some("10.0.0.1:988".parse().unwrap()));
        assert_eq!(c.peer_port, 988);
        assert_eq!(c.timeout, Duration::from_secs(50));
        assert_eq!(c.credits, 256);
        assert_eq!(c.peer_credits, 8);
        assert_eq!(c.min_bulk, 1024);
        assert_eq!(c.keepalive, Some(Duration::from_secs(30)));
        assert_eq!(c.effective_conns_per_peer(), 1);
        assert_eq!(c.version, ProtoVersion::V3);
        assert_eq!(c.validate(), Ok(()));

        let o2ib: Nid = "10.0.0.1@o2ib".parse().unwrap();
        assert!(matches!(
            SockLndConfig::new(o2ib, 7).validate(),
            Err(ConfigError::NotTcp { .. })
        ));
        let mut small = c.clone();
        small.credits = 4;
        assert_eq!(small.effective_peer_credits(), 4);
        small.credits = 0;
        assert!(small.validate().is_err());
    }
}
