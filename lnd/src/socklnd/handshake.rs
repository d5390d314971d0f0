//! The socklnd handshake (socklnd reference §3.1–§3.3): the acceptor request and the
//! HELLO exchange, on both sides.
//!
//! The decisions are plain functions ([`decide_passive`], [`decide_active`]); the async
//! functions around them only move bytes with the wire codecs, reading exactly what each
//! step needs so that nothing past the HELLO is consumed.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use lnet::acceptor::{AcceptorError, AcceptorRequest, Decoded, RESERVED_PORTS};
use lnet::{Nid, ProcessId};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::status::TxFailure;
use super::wire::{ByteOrder, ConnType, Hello, HelloDecoded, HelloError, ProtoVersion};

/// Why a handshake failed. Each closes the connection being set up and nothing else.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// A read or write failed.
    #[error("{stage}: {source}")]
    Io {
        /// What was being read or written.
        stage: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A read or write took longer than its timeout.
    #[error("{stage}: timed out after {after:?}")]
    Timeout {
        /// What was being read or written.
        stage: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The connection came from an unreserved port (above 1023): `accept=secure` closes it.
    #[error("connection from unreserved port {port}: closed (accept=secure)")]
    UnreservedPort {
        /// The source port.
        port: u16,
    },
    /// A bad acceptor request.
    #[error("acceptor request: {0}")]
    Acceptor(#[from] AcceptorError),
    /// The acceptor request names a NID that is not this NI.
    #[error("acceptor request for {asked}, which is not this NI ({mine})")]
    WrongNid {
        /// The NID asked for.
        asked: Nid,
        /// This NI.
        mine: Nid,
    },
    /// A bad or refused HELLO (V1 included: it is recognised and refused).
    #[error("HELLO: {0}")]
    Hello(#[from] HelloError),
    /// A HELLO version this side does not speak (V4).
    #[error("HELLO version {version:?} is not supported here: V2 or V3 only")]
    UnsupportedVersion {
        /// The version.
        version: ProtoVersion,
    },
    /// The peer's HELLO reply names someone other than the peer dialled.
    #[error("peer claimed to be {got}, expected {expected}")]
    Impostor {
        /// Whom we dialled.
        expected: ProcessId,
        /// Whom the reply names.
        got: ProcessId,
    },
    /// The reply's connection type is not the inverse of ours.
    #[error("reply connection type {got:?} does not match our {sent:?}")]
    WrongConnType {
        /// Ours.
        sent: ConnType,
        /// Theirs.
        got: ConnType,
    },
    /// The reply accepted the connection with a version other than ours.
    #[error("reply version {got:?} differs from ours {sent:?}")]
    VersionMismatch {
        /// Ours.
        sent: ProtoVersion,
        /// Theirs.
        got: ProtoVersion,
    },
    /// Every reserved source port (1023 down to 512) is taken.
    #[error("no reserved source port free on {ip} (tried 1023 down to 512)")]
    NoReservedPort {
        /// The local address.
        ip: Ipv4Addr,
    },
}

/// Whether this side speaks a HELLO version on IPv4 connections.
pub fn speaks(version: ProtoVersion) -> bool {
    matches!(version, ProtoVersion::V2 | ProtoVersion::V3)
}

/// What the passive side knows when a HELLO request arrives (§3.3.2 step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassiveContext {
    /// This NI's NID.
    pub my_nid: Nid,
    /// Whether this side is itself connecting to that peer right now.
    pub connecting: bool,
    /// The incarnation and version of the peer's existing connections, if it has any.
    pub record: Option<(u64, ProtoVersion)>,
    /// Connections (established or being set up) of the same type, seen from this end.
    pub same_type: usize,
    /// How many of one type a peer may have (`conns_per_peer`).
    pub max_per_type: usize,
    /// Whether the connection loops back to this node (peer address = local address):
    /// exempt from the duplicate rule, whose address pairs cannot tell the two ends
    /// apart then.
    pub loopback: bool,
}

/// The passive side's answer to a HELLO request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassiveDecision {
    /// Register the connection; reply with this (inverted) type.
    Accept {
        /// This side's type of the connection.
        ctype: ConnType,
    },
    /// Connection race lost by the peer (its NID is lower and we are connecting to it):
    /// reply ctype NONE, close.
    RefuseRace,
    /// The peer restarted (new incarnation) or changed version: close all its
    /// connections, reply ctype NONE, close.
    RefuseStale,
    /// Already enough connections of this type: reply ctype NONE, close.
    RefuseDuplicate,
}

impl PassiveDecision {
    /// The ctype the reply HELLO carries.
    pub fn reply_ctype(self) -> ConnType {
        match self {
            PassiveDecision::Accept { ctype } => ctype,
            _ => ConnType::None,
        }
    }
}

/// The passive side's decision on a valid HELLO request, in the kernel's order: race,
/// stale peer, duplicate, accept.
pub fn decide_passive(hello: &Hello, ctx: &PassiveContext) -> PassiveDecision {
    // Byte-wise compare of the 20-byte struct lnet_nid: the higher NID's connect wins.
    if ctx.connecting && hello.src_nid.to_large_bytes() < ctx.my_nid.to_large_bytes() {
        return PassiveDecision::RefuseRace;
    }
    if let Some(record) = ctx.record {
        if record != (hello.src_incarnation, hello.version) {
            return PassiveDecision::RefuseStale;
        }
    }
    if !ctx.loopback && ctx.same_type >= ctx.max_per_type {
        return PassiveDecision::RefuseDuplicate;
    }
    PassiveDecision::Accept {
        ctype: hello.ctype.invert(),
    }
}

/// What the active side makes of the peer's HELLO reply (§3.3.1 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActiveOutcome {
    /// The connection is up.
    Established,
    /// ctype NONE with our version: lost a race or a duplicate; retry later.
    Refused,
    /// ctype NONE with another version: the peer speaks that one; retry with it.
    RetryWith(ProtoVersion),
}

/// Evaluates the reply to the HELLO `sent` to `expected`.
pub fn decide_active(
    sent: &Hello,
    reply: &Hello,
    expected: ProcessId,
) -> Result<ActiveOutcome, HandshakeError> {
    if reply.src() != expected {
        return Err(HandshakeError::Impostor {
            expected,
            got: reply.src(),
        });
    }
    if reply.ctype == ConnType::None {
        return Ok(if reply.version == sent.version {
            ActiveOutcome::Refused
        } else {
            ActiveOutcome::RetryWith(reply.version)
        });
    }
    if reply.ctype.invert() != sent.ctype {
        return Err(HandshakeError::WrongConnType {
            sent: sent.ctype,
            got: reply.ctype,
        });
    }
    if reply.version != sent.version {
        return Err(HandshakeError::VersionMismatch {
            sent: sent.version,
            got: reply.version,
        });
    }
    Ok(ActiveOutcome::Established)
}

/// The HELLO the passive side sends to refuse a version it does not speak: its own V3
/// HELLO, ctype NONE, naming itself as destination.
pub fn version_refusal(me: ProcessId, incarnation: u64) -> Hello {
    Hello::new(ProtoVersion::V3, me, me.nid, incarnation, ConnType::None)
}

/// One step of an incremental decode.
enum Step<T> {
    Need(usize),
    Done(T),
}

/// Reads exactly what `step` asks for until it completes, each read within `limit`.
async fn read_until<S, T, E>(
    s: &mut S,
    stage: &'static str,
    limit: Duration,
    mut step: impl FnMut(&[u8]) -> Result<Step<T>, E>,
) -> Result<T, HandshakeError>
where
    S: AsyncRead + Unpin,
    HandshakeError: From<E>,
{
    let mut buf = Vec::new();
    loop {
        let needed = match step(&buf)? {
            Step::Done(v) => return Ok(v),
            Step::Need(n) => n,
        };
        let start = buf.len();
        if needed <= start {
            // The decoder asked for nothing new: it cannot make progress.
            return Err(HandshakeError::Io {
                stage,
                source: io::Error::from(io::ErrorKind::InvalidData),
            });
        }
        buf.resize(needed, 0);
        let chunk = buf.get_mut(start..).unwrap_or_default();
        match tokio::time::timeout(limit, s.read_exact(chunk)).await {
            Err(_) => {
                return Err(HandshakeError::Timeout {
                    stage,
                    after: limit,
                })
            }
            Ok(Err(source)) => return Err(HandshakeError::Io { stage, source }),
            Ok(Ok(_)) => {}
        }
    }
}

/// Writes `bytes` within `limit`.
pub(crate) async fn write_within<S: AsyncWrite + Unpin>(
    s: &mut S,
    stage: &'static str,
    limit: Duration,
    bytes: &[u8],
) -> Result<(), HandshakeError> {
    match tokio::time::timeout(limit, s.write_all(bytes)).await {
        Err(_) => Err(HandshakeError::Timeout {
            stage,
            after: limit,
        }),
        Ok(Err(source)) => Err(HandshakeError::Io { stage, source }),
        Ok(Ok(())) => Ok(()),
    }
}

/// Reads a HELLO, each read within `limit`.
async fn read_hello<S: AsyncRead + Unpin>(
    s: &mut S,
    stage: &'static str,
    limit: Duration,
) -> Result<(Hello, ByteOrder), HandshakeError> {
    read_until(s, stage, limit, |buf| {
        Ok::<_, HelloError>(match Hello::decode(buf)? {
            HelloDecoded::Incomplete { needed } => Step::Need(needed),
            HelloDecoded::Complete { hello, order, .. } => Step::Done((hello, order)),
        })
    })
    .await
}

/// The passive side up to the decision: reads the acceptor request (it must name
/// `me.nid`) and the HELLO request, each read within `limit`. Answers what the kernel
/// answers before closing: the old-version acceptor reply, or (unknown or unsupported
/// HELLO version) our own HELLO with ctype NONE.
pub async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    me: ProcessId,
    incarnation: u64,
    limit: Duration,
) -> Result<(Hello, ByteOrder), HandshakeError> {
    let request = read_until(s, "acceptor request", limit, |buf| {
        Ok::<_, AcceptorError>(match AcceptorRequest::decode(buf)? {
            Decoded::Incomplete { needed } => Step::Need(needed),
            Decoded::Complete { request, .. } => Step::Done(request),
        })
    })
    .await;
    let request = match request {
        Err(HandshakeError::Acceptor(e)) => {
            if let Some(reply) = e.reply_before_close() {
                // Best effort: the connection closes either way.
                let _ = write_within(s, "acceptor refusal", limit, &reply).await;
            }
            return Err(HandshakeError::Acceptor(e));
        }
        other => other?,
    };
    if request.nid != me.nid {
        return Err(HandshakeError::WrongNid {
            asked: request.nid,
            mine: me.nid,
        });
    }
    match read_hello(s, "HELLO request", limit).await {
        Err(HandshakeError::Hello(e)) if e.wants_version_reply() => {
            send_version_refusal(s, me, incarnation, limit).await;
            Err(HandshakeError::Hello(e))
        }
        Err(e) => Err(e),
        Ok((hello, _)) if !speaks(hello.version) => {
            send_version_refusal(s, me, incarnation, limit).await;
            Err(HandshakeError::UnsupportedVersion {
                version: hello.version,
            })
        }
        Ok((hello, order)) => {
            hello.check_request()?;
            Ok((hello, order))
        }
    }
}

async fn send_version_refusal<S: AsyncWrite + Unpin>(
    s: &mut S,
    me: ProcessId,
    incarnation: u64,
    limit: Duration,
) {
    if let Ok(bytes) = version_refusal(me, incarnation).encode() {
        // Best effort: the connection closes either way.
        let _ = write_within(s, "HELLO version refusal", limit, &bytes).await;
    }
}

/// Opens a TCP connection to `peer` from `local_ip` and a reserved port, trying 1023
/// down to 512 and skipping ports in use (SO_REUSEADDR is set), the connect within
/// `limit`. The io error of a failed connect comes back as is.
pub async fn connect_reserved(
    local_ip: Ipv4Addr,
    peer: SocketAddr,
    limit: Duration,
) -> Result<TcpStream, ConnectError> {
    for port in RESERVED_PORTS.rev() {
        let socket = TcpSocket::new_v4().map_err(ConnectError::Tcp)?;
        socket.set_reuseaddr(true).map_err(ConnectError::Tcp)?;
        match socket.bind(SocketAddr::new(IpAddr::V4(local_ip), port)) {
            Err(e) if port_taken(&e) => continue,
            Err(e) => return Err(ConnectError::Tcp(e)),
            Ok(()) => {}
        }
        match tokio::time::timeout(limit, socket.connect(peer)).await {
            Err(_) => return Err(ConnectError::Tcp(io::Error::from(io::ErrorKind::TimedOut))),
            Ok(Err(e)) if port_taken(&e) => continue,
            Ok(Err(e)) => return Err(ConnectError::Tcp(e)),
            Ok(Ok(stream)) => return Ok(stream),
        }
    }
    Err(ConnectError::Handshake(HandshakeError::NoReservedPort {
        ip: local_ip,
    }))
}

fn port_taken(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable
    )
}

/// Why an active connection attempt failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The TCP connect failed.
    #[error("connect: {0}")]
    Tcp(#[source] io::Error),
    /// The handshake failed.
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    /// The peer answered ctype NONE (race lost or duplicate) until the retries ran out.
    #[error("peer refused the connection (HELLO ctype NONE)")]
    Refused,
}

impl ConnectError {
    /// The failure the sends waiting for this connection complete with.
    pub fn failure(&self) -> TxFailure {
        match self {
            ConnectError::Tcp(e) => TxFailure::of_connect_error(e),
            ConnectError::Refused => TxFailure::HandshakeRefused,
            ConnectError::Handshake(HandshakeError::NoReservedPort { .. }) => {
                TxFailure::ConnectLocal
            }
            ConnectError::Handshake(HandshakeError::Timeout { .. }) => TxFailure::ConnectTimedOut,
            ConnectError::Handshake(HandshakeError::Io { .. }) => TxFailure::PeerClosed,
            ConnectError::Handshake(_) => TxFailure::HandshakeProtocol,
        }
    }
}

/// A connection whose handshake succeeded.
#[derive(Debug)]
pub struct Established {
    /// The socket, positioned at the first frame.
    pub stream: TcpStream,
    /// The peer's HELLO reply.
    pub reply: Hello,
    /// The peer's byte order.
    pub order: ByteOrder,
    /// The version both sides speak.
    pub version: ProtoVersion,
    /// This side's connection type.
    pub ctype: ConnType,
}

/// The active side: connects from a reserved port, sends the acceptor request and our
/// HELLO, reads the reply and decides. A reply asking for another version we speak is
/// followed once, on a new connection.
pub async fn connect(
    me: ProcessId,
    incarnation: u64,
    peer: ProcessId,
    addr: SocketAddr,
    ctype: ConnType,
    version: ProtoVersion,
    limit: Duration,
) -> Result<Established, ConnectError> {
    let local_ip = match me.nid.addr_u32() {
        Some(a) => Ipv4Addr::from(a),
        None => {
            return Err(ConnectError::Tcp(io::Error::from(
                io::ErrorKind::AddrNotAvailable,
            )))
        }
    };
    let mut version = version;
    let mut renegotiated = false;
    loop {
        let mut stream = connect_reserved(local_ip, addr, limit).await?;
        let hello = Hello::new(version, me, peer.nid, incarnation, ctype);
        let mut out = AcceptorRequest::new(peer.nid)
            .and_then(|r| r.encode())
            .map_err(HandshakeError::Acceptor)?;
        hello
            .encode_in(ByteOrder::Little, &mut out)
            .map_err(HandshakeError::Hello)?;
        write_within(&mut stream, "acceptor request and HELLO", limit, &out).await?;
        let (reply, order) = read_hello(&mut stream, "HELLO reply", limit).await?;
        match decide_active(&hello, &reply, peer)? {
            ActiveOutcome::Established => {
                return Ok(Established {
                    stream,
                    reply,
                    order,
                    version,
                    ctype,
                })
            }
            ActiveOutcome::Refused => return Err(ConnectError::Refused),
            ActiveOutcome::RetryWith(v) if speaks(v) && !renegotiated => {
                tracing::info!(%peer, from = ?version, to = ?v, "socklnd: peer asks for another HELLO version");
                version = v;
                renegotiated = true;
            }
            ActiveOutcome::RetryWith(v) => {
                return Err(HandshakeError::UnsupportedVersion { version: v }.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lnet::acceptor::old_version_reply;
    use lnet::nid::PID_LUSTRE;

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    fn request(src: &str, dst: &str, ctype: ConnType) -> Hello {
        Hello::new(
            ProtoVersion::V3,
            ProcessId::lustre(nid(src)),
            nid(dst),
            0x17D4_B84D_484D_0000,
            ctype,
        )
    }

    fn ctx(my: &str) -> PassiveContext {
        PassiveContext {
            my_nid: nid(my),
            connecting: false,
            record: None,
            same_type: 0,
            max_per_type: 1,
            loopback: false,
        }
    }

    #[test]
    fn passive_accepts_with_the_inverted_type() {
        let c = ctx("192.168.1.1@tcp");
        for (theirs, mine) in [
            (ConnType::Control, ConnType::Control),
            (ConnType::BulkIn, ConnType::BulkOut),
            (ConnType::BulkOut, ConnType::BulkIn),
        ] {
            let h = request("192.168.1.2@tcp", "192.168.1.1@tcp", theirs);
            assert_eq!(
                decide_passive(&h, &c),
                PassiveDecision::Accept { ctype: mine }
            );
            assert_eq!(decide_passive(&h, &c).reply_ctype(), mine);
        }
    }

    #[test]
    fn passive_race_goes_to_the_higher_nid() {
        let mut c = ctx("192.168.1.5@tcp");
        c.connecting = true;
        let lower = request("192.168.1.2@tcp", "192.168.1.5@tcp", ConnType::Control);
        assert_eq!(decide_passive(&lower, &c), PassiveDecision::RefuseRace);
        assert_eq!(decide_passive(&lower, &c).reply_ctype(), ConnType::None);
        let higher = request("192.168.1.9@tcp", "192.168.1.5@tcp", ConnType::Control);
        assert!(matches!(
            decide_passive(&higher, &c),
            PassiveDecision::Accept { .. }
        ));
        c.connecting = false;
        assert!(matches!(
            decide_passive(&lower, &c),
            PassiveDecision::Accept { .. }
        ));
    }

    #[test]
    fn passive_stale_then_duplicate() {
        let h = request("192.168.1.2@tcp", "192.168.1.1@tcp", ConnType::BulkIn);
        let mut c = ctx("192.168.1.1@tcp");
        c.record = Some((h.src_incarnation + 1, ProtoVersion::V3));
        assert_eq!(decide_passive(&h, &c), PassiveDecision::RefuseStale);
        c.record = Some((h.src_incarnation, ProtoVersion::V2));
        assert_eq!(decide_passive(&h, &c), PassiveDecision::RefuseStale);
        c.record = Some((h.src_incarnation, ProtoVersion::V3));
        c.same_type = 1;
        assert_eq!(decide_passive(&h, &c), PassiveDecision::RefuseDuplicate);
        c.loopback = true;
        assert!(matches!(
            decide_passive(&h, &c),
            PassiveDecision::Accept { .. }
        ));
    }

    #[test]
    fn active_reply_rules() {
        let me = ProcessId::lustre(nid("192.168.1.2@tcp"));
        let peer = ProcessId::lustre(nid("192.168.1.1@tcp"));
        let sent = Hello::new(ProtoVersion::V3, me, peer.nid, 1, ConnType::BulkIn);
        let reply = |ctype, version| {
            let mut r = Hello::new(version, peer, me.nid, 2, ctype);
            r.version = version;
            r
        };
        assert_eq!(
            decide_active(&sent, &reply(ConnType::BulkOut, ProtoVersion::V3), peer).unwrap(),
            ActiveOutcome::Established
        );
        assert_eq!(
            decide_active(&sent, &reply(ConnType::None, ProtoVersion::V3), peer).unwrap(),
            ActiveOutcome::Refused
        );
        assert_eq!(
            decide_active(&sent, &reply(ConnType::None, ProtoVersion::V2), peer).unwrap(),
            ActiveOutcome::RetryWith(ProtoVersion::V2)
        );
        assert!(matches!(
            decide_active(&sent, &reply(ConnType::BulkIn, ProtoVersion::V3), peer),
            Err(HandshakeError::WrongConnType { .. })
        ));
        assert!(matches!(
            decide_active(&sent, &reply(ConnType::BulkOut, ProtoVersion::V2), peer),
            Err(HandshakeError::VersionMismatch { .. })
        ));
        let other = ProcessId::lustre(nid("192.168.1.3@tcp"));
        assert!(matches!(
            decide_active(&sent, &reply(ConnType::BulkOut, ProtoVersion::V3), other),
            Err(HandshakeError::Impostor { .. })
        ));
        let mut wrong_pid = reply(ConnType::BulkOut, ProtoVersion::V3);
        wrong_pid.src_pid = PID_LUSTRE + 1;
        assert!(matches!(
            decide_active(&sent, &wrong_pid, peer),
            Err(HandshakeError::Impostor { .. })
        ));
    }

    /// Runs `read_request` over an in-memory pipe fed with `input`; returns its result and
    /// what it wrote back.
    async fn passive(input: Vec<u8>) -> (Result<(Hello, ByteOrder), HandshakeError>, Vec<u8>) {
        let me = ProcessId::lustre(nid("192.168.1.1@tcp"));
        let (mut ours, mut theirs) = tokio::io::duplex(4096);
        theirs.write_all(&input).await.unwrap();
        let result = read_request(&mut ours, me, 7, Duration::from_secs(5)).await;
        drop(ours);
        let mut back = Vec::new();
        theirs.read_to_end(&mut back).await.unwrap();
        (result, back)
    }

    fn connreq(target: &str) -> Vec<u8> {
        AcceptorRequest::new(nid(target)).unwrap().encode().unwrap()
    }

    #[tokio::test]
    async fn passive_reads_request_and_hello_and_nothing_more() {
        let h = request("192.168.1.2@tcp", "192.168.1.1@tcp", ConnType::Control);
        let mut input = connreq("192.168.1.1@tcp");
        input.extend(h.encode().unwrap());
        input.extend([0xC0; 24]);
        let me = ProcessId::lustre(nid("192.168.1.1@tcp"));
        let (mut ours, mut theirs) = tokio::io::duplex(4096);
        theirs.write_all(&input).await.unwrap();
        let (got, order) = read_request(&mut ours, me, 7, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, h);
        assert_eq!(order, ByteOrder::Little);
        let mut rest = [0u8; 24];
        ours.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, [0xC0; 24], "the first frame is left in the socket");
    }

    #[tokio::test]
    async fn passive_refusals() {
        // Garbage instead of an acceptor request: closed without a word.
        let (r, back) = passive(b"GET / HTTP/1.0\r\n\r\n".to_vec()).await;
        assert!(matches!(r, Err(HandshakeError::Acceptor(_))));
        assert!(back.is_empty());
        // LNET_PROTO_MAGIC first: told "old" then closed.
        let (r, back) = passive(0x4572_6963u32.to_le_bytes().to_vec()).await;
        assert!(matches!(r, Err(HandshakeError::Acceptor(_))));
        assert_eq!(back, old_version_reply());
        // A request for another NID.
        let (r, _) = passive(connreq("192.168.1.9@tcp")).await;
        assert!(matches!(r, Err(HandshakeError::WrongNid { .. })));
        // Bad HELLO magic: closed without a reply.
        let mut input = connreq("192.168.1.1@tcp");
        input.extend([0xde, 0xad, 0xbe, 0xef, 3, 0, 0, 0]);
        let (r, back) = passive(input).await;
        assert!(matches!(
            r,
            Err(HandshakeError::Hello(HelloError::BadMagic { .. }))
        ));
        assert!(back.is_empty());
        // Unknown version: our V3 HELLO with ctype NONE, then close.
        let mut input = connreq("192.168.1.1@tcp");
        input.extend(0x4572_6963u32.to_le_bytes());
        input.extend(9u32.to_le_bytes());
        let (r, back) = passive(input).await;
        assert!(matches!(r, Err(HandshakeError::Hello(_))));
        let HelloDecoded::Complete { hello, .. } = Hello::decode(&back).unwrap() else {
            panic!("no HELLO back");
        };
        assert_eq!(hello.ctype, ConnType::None);
        assert_eq!(hello.version, ProtoVersion::V3);
        // A V4 HELLO: same refusal.
        let v4 = Hello::new(
            ProtoVersion::V4,
            ProcessId::lustre(nid("192.168.1.2@tcp")),
            nid("192.168.1.1@tcp"),
            1,
            ConnType::Control,
        );
        let mut input = connreq("192.168.1.1@tcp");
        input.extend(v4.encode().unwrap());
        let (r, back) = passive(input).await;
        assert!(matches!(r, Err(HandshakeError::UnsupportedVersion { .. })));
        assert!(matches!(
            Hello::decode(&back).unwrap(),
            HelloDecoded::Complete { hello, .. } if hello.ctype == ConnType::None
        ));
        // A request with ctype NONE.
        let mut none = request("192.168.1.2@tcp", "192.168.1.1@tcp", ConnType::Control);
        none.ctype = ConnType::None;
        let mut input = connreq("192.168.1.1@tcp");
        input.extend(none.encode().unwrap());
        let (r, _) = passive(input).await;
        assert!(matches!(
            r,
            Err(HandshakeError::Hello(HelloError::ConnTypeNoneInRequest))
        ));
    }

    #[tokio::test]
    async fn passive_refuses_v1_clearly() {
        let v1 = super::super::wire::V1Hello::new(
            ProcessId::lustre(nid("192.168.1.2@tcp")),
            1,
            ConnType::Control,
        )
        .unwrap();
        let mut input = connreq("192.168.1.1@tcp");
        input.extend(v1.encode());
        let (r, _) = passive(input).await;
        let err = r.unwrap_err();
        assert!(matches!(
            err,
            HandshakeError::Hello(HelloError::UnsupportedV1 { .. })
        ));
        assert!(err.to_string().contains("V1"), "{err}");
    }
}
