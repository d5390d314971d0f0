//! A minimal synchronous socklnd end point: the handshakes (acceptor request from a
//! reserved port, HELLO V3 both ways) and one poll(2) loop on one thread over its
//! listener and its connections. No actors, no runtime: frames go out of pre-encoded
//! buffers and come in through a [`Scanner`].

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use lnd::socklnd::handshake::connect_reserved;
use lnd::socklnd::wire::{ByteOrder, ConnType, Hello, HelloDecoded, ProtoVersion};
use lnet::acceptor::Decoded;
use lnet::{AcceptorRequest, Nid, ProcessId};
use tokio::time::Instant;

use super::frames::{Found, Scanner, FRAME_HEAD};
use super::sys::{poll, Interest};
use crate::BenchError;

/// How long one handshake step may take.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(5);
/// Bytes read from a socket at once: a whole 1 MiB PUT and its head fit.
const READ_CHUNK: usize = 2 << 20;

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}

fn handshake_err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(format!("{what}: {e}"))
}

/// The IPv4 address of a NID.
pub fn nid_ip(nid: Nid) -> Result<Ipv4Addr, BenchError> {
    nid.addr_u32()
        .map(Ipv4Addr::from)
        .ok_or_else(|| BenchError::Setup(format!("{nid} has no IPv4 address")))
}

/// Reads until `buf` holds `need` bytes, never more (what follows belongs to the next step).
fn read_to(s: &mut TcpStream, buf: &mut Vec<u8>, need: usize) -> Result<(), BenchError> {
    while buf.len() < need {
        let mut tmp = vec![0u8; need - buf.len()];
        let n = s.read(&mut tmp).map_err(io_err("handshake read"))?;
        if n == 0 {
            return Err(BenchError::Setup("peer closed during the handshake".into()));
        }
        buf.extend_from_slice(tmp.get(..n).unwrap_or(&[]));
    }
    Ok(())
}

fn read_hello(s: &mut TcpStream) -> Result<Hello, BenchError> {
    let mut buf = Vec::new();
    loop {
        match Hello::decode(&buf).map_err(|e| handshake_err("HELLO", e))? {
            HelloDecoded::Incomplete { needed } => read_to(s, &mut buf, needed)?,
            HelloDecoded::Complete { hello, order, .. } => {
                if order != ByteOrder::Little {
                    return Err(BenchError::Setup(
                        "big-endian peer: not handled here".into(),
                    ));
                }
                return Ok(hello);
            }
        }
    }
}

/// One established connection.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// This side's connection type.
    ctype: ConnType,
    /// The peer's NID, from its HELLO.
    peer: Nid,
    rbuf: Vec<u8>,
    rlen: usize,
    scanner: Scanner,
    /// Small frames to write, from `out_at` on.
    out: Vec<u8>,
    out_at: usize,
    /// Bulk PUTs to write: each its head then the shared payload; `bulk_at` is how much
    /// of the first has been written.
    bulk: VecDeque<[u8; FRAME_HEAD]>,
    bulk_at: usize,
}

impl Conn {
    fn new(stream: TcpStream, ctype: ConnType, peer: Nid) -> Result<Conn, BenchError> {
        stream.set_nodelay(true).map_err(io_err("TCP_NODELAY"))?;
        stream.set_nonblocking(true).map_err(io_err("O_NONBLOCK"))?;
        Ok(Conn {
            stream,
            ctype,
            peer,
            rbuf: vec![0u8; READ_CHUNK],
            rlen: 0,
            scanner: Scanner::default(),
            out: Vec::new(),
            out_at: 0,
            bulk: VecDeque::new(),
            bulk_at: 0,
        })
    }

    fn wants_write(&self) -> bool {
        self.out_at < self.out.len() || !self.bulk.is_empty()
    }

    /// Writes what it can; stops at EAGAIN.
    fn flush(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        while self.out_at < self.out.len() {
            match self
                .stream
                .write(self.out.get(self.out_at..).unwrap_or(&[]))
            {
                Ok(n) => self.out_at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("write")(e)),
            }
        }
        self.out.clear();
        self.out_at = 0;
        while let Some(head) = self.bulk.front() {
            let total = FRAME_HEAD + payload.len();
            let (h, p) = if self.bulk_at < FRAME_HEAD {
                (head.get(self.bulk_at..).unwrap_or(&[]), payload)
            } else {
                (
                    &[][..],
                    payload.get(self.bulk_at - FRAME_HEAD..).unwrap_or(&[]),
                )
            };
            match self
                .stream
                .write_vectored(&[IoSlice::new(h), IoSlice::new(p)])
            {
                Ok(n) => {
                    self.bulk_at += n;
                    if self.bulk_at >= total {
                        self.bulk.pop_front();
                        self.bulk_at = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("write")(e)),
            }
        }
        Ok(())
    }

    /// Reads what is there (a few chunks at most) and hands each frame to `role`;
    /// `false` when the peer closed the connection.
    fn read(&mut self, role: &mut dyn Role, replies: &mut Vec<u8>) -> Result<bool, BenchError> {
        for _ in 0..8 {
            let free = self.rbuf.get_mut(self.rlen..).unwrap_or(&mut []);
            match self.stream.read(free) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.rlen += n;
                    let data = self.rbuf.get(..self.rlen).unwrap_or(&[]);
                    let used = self
                        .scanner
                        .scan(data, |found, buf| role.on_frame(found, buf, replies))?;
                    self.rbuf.copy_within(used..self.rlen, 0);
                    self.rlen -= used;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(false),
                Err(e) => return Err(io_err("read")(e)),
            }
        }
        Ok(true)
    }
}

/// What an end point does with the frames it receives.
pub trait Role {
    /// Called for each frame; replies (whole frames) go to `replies`, which are sent on
    /// the newest CONTROL connection to the same peer (or where the frame came from).
    fn on_frame(&mut self, found: Found, buf: &[u8], replies: &mut Vec<u8>);
}

/// A socklnd end point: its NID, its listener, its connections.
#[derive(Debug)]
pub struct Endpoint {
    me: ProcessId,
    incarnation: u64,
    listener: TcpListener,
    conns: Vec<Conn>,
    replies: Vec<u8>,
    closed: usize,
}

impl Endpoint {
    /// Listens on the NID's address at `port`.
    pub fn listen(me: ProcessId, port: u16, incarnation: u64) -> Result<Endpoint, BenchError> {
        let addr = SocketAddr::new(IpAddr::V4(nid_ip(me.nid)?), port);
        let listener = TcpListener::bind(addr).map_err(io_err(format!("listen on {addr}")))?;
        listener
            .set_nonblocking(true)
            .map_err(io_err("O_NONBLOCK"))?;
        Ok(Endpoint {
            me,
            incarnation,
            listener,
            conns: Vec::new(),
            replies: Vec::new(),
            closed: 0,
        })
    }

    /// Opens the three typed connections of socklnd V3 (CONTROL, BULK_IN, BULK_OUT) to
    /// `peer` at `addr`, each from a reserved port; retries refused connects until
    /// `bound` (the peer may still be starting).
    pub fn connect(
        &mut self,
        peer: ProcessId,
        addr: SocketAddr,
        bound: Duration,
    ) -> Result<(), BenchError> {
        let local = nid_ip(self.me.nid)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io_err("tokio runtime"))?;
        for ctype in [ConnType::Control, ConnType::BulkIn, ConnType::BulkOut] {
            let stream = runtime.block_on(dial(local, addr, bound))?;
            let conn = self.active(stream, peer, ctype)?;
            self.conns.push(conn);
        }
        Ok(())
    }

    fn active(
        &self,
        mut s: TcpStream,
        peer: ProcessId,
        ctype: ConnType,
    ) -> Result<Conn, BenchError> {
        s.set_read_timeout(Some(HANDSHAKE_LIMIT))
            .map_err(io_err("SO_RCVTIMEO"))?;
        let mut out = AcceptorRequest::new(peer.nid)
            .and_then(|r| r.encode())
            .map_err(|e| handshake_err("acceptor request", e))?;
        let hello = Hello::new(ProtoVersion::V3, self.me, peer.nid, self.incarnation, ctype);
        hello
            .encode_in(ByteOrder::Little, &mut out)
            .map_err(|e| handshake_err("HELLO", e))?;
        s.write_all(&out).map_err(io_err("send HELLO"))?;
        let reply = read_hello(&mut s)?;
        if reply.ctype != ctype.invert() || reply.src_nid != peer.nid {
            return Err(BenchError::Setup(format!(
                "{} refused or mismatched our {ctype:?} connection: {:?} from {}",
                peer.nid, reply.ctype, reply.src_nid
            )));
        }
        s.set_read_timeout(None).map_err(io_err("SO_RCVTIMEO"))?;
        Conn::new(s, ctype, peer.nid)
    }

    fn passive(&self, mut s: TcpStream, from: SocketAddr) -> Result<Conn, BenchError> {
        if from.port() > 1023 {
            return Err(BenchError::Setup(format!("{from}: unreserved port")));
        }
        s.set_nonblocking(false).map_err(io_err("blocking"))?;
        s.set_read_timeout(Some(HANDSHAKE_LIMIT))
            .map_err(io_err("SO_RCVTIMEO"))?;
        let mut buf = Vec::new();
        loop {
            match AcceptorRequest::decode(&buf).map_err(|e| handshake_err("acceptor", e))? {
                Decoded::Incomplete { needed } => read_to(&mut s, &mut buf, needed)?,
                Decoded::Complete { request, .. } if request.nid == self.me.nid => break,
                Decoded::Complete { request, .. } => {
                    return Err(BenchError::Setup(format!(
                        "acceptor request for {}, not {}",
                        request.nid, self.me.nid
                    )))
                }
            }
        }
        let hello = read_hello(&mut s)?;
        hello
            .check_request()
            .map_err(|e| handshake_err("HELLO", e))?;
        let ctype = hello.ctype.invert();
        let reply = hello.reply(self.me, self.incarnation, ctype);
        let bytes = reply
            .encode()
            .map_err(|e| handshake_err("HELLO reply", e))?;
        s.write_all(&bytes).map_err(io_err("send HELLO reply"))?;
        s.set_read_timeout(None).map_err(io_err("SO_RCVTIMEO"))?;
        Conn::new(s, ctype, hello.src_nid)
    }

    /// One turn of the loop: waits at most `timeout_ms` for something to do, accepts
    /// connections, reads and dispatches frames, writes what is queued.
    pub fn turn(
        &mut self,
        timeout_ms: i32,
        role: &mut dyn Role,
        payload: &[u8],
    ) -> Result<(), BenchError> {
        let mut interests = vec![Interest {
            fd: self.listener.as_raw_fd(),
            write: false,
        }];
        interests.extend(self.conns.iter().map(|c| Interest {
            fd: c.stream.as_raw_fd(),
            write: c.wants_write(),
        }));
        let ready = poll(&interests, timeout_ms).map_err(io_err("poll"))?;
        if ready.first().is_some_and(|r| r.read) {
            self.accept()?;
        }
        let mut gone = Vec::new();
        for (i, r) in ready.iter().skip(1).enumerate() {
            let Some(c) = self.conns.get_mut(i).filter(|_| r.read) else {
                continue;
            };
            if !c.read(role, &mut self.replies)? {
                gone.push(i);
            }
            if !self.replies.is_empty() {
                let peer = c.peer;
                let to = self
                    .conns
                    .iter()
                    .rposition(|c| c.peer == peer && c.ctype == ConnType::Control)
                    .unwrap_or(i);
                if let Some(c) = self.conns.get_mut(to) {
                    c.out.extend_from_slice(&self.replies);
                }
                self.replies.clear();
            }
        }
        for i in gone.into_iter().rev() {
            self.conns.remove(i);
            self.closed += 1;
        }
        self.flush(payload)
    }

    /// How many connections the peers have closed so far.
    pub fn closed(&self) -> usize {
        self.closed
    }

    /// Writes what is queued on every connection, as far as TCP takes it.
    pub fn flush(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        for c in &mut self.conns {
            if c.wants_write() {
                c.flush(payload)?;
            }
        }
        Ok(())
    }

    fn accept(&mut self) -> Result<(), BenchError> {
        loop {
            match self.listener.accept() {
                Ok((s, from)) => {
                    let conn = self.passive(s, from)?;
                    self.conns.push(conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(io_err("accept")(e)),
            }
        }
    }

    fn index_of(&self, ctype: ConnType) -> Option<usize> {
        self.conns.iter().position(|c| c.ctype == ctype)
    }

    /// Queues small frames on the connection of type `ctype`; returns the bytes queued
    /// there and not yet written (after the new ones).
    pub fn queue_small(&mut self, ctype: ConnType, frames: &[u8]) -> Result<usize, BenchError> {
        let c = self.conn_mut(ctype)?;
        c.out.extend_from_slice(frames);
        Ok(c.out.len() - c.out_at)
    }

    /// Bytes queued on the connection of type `ctype` and not yet written.
    pub fn pending_small(&self, ctype: ConnType) -> usize {
        self.index_of(ctype)
            .and_then(|i| self.conns.get(i))
            .map_or(0, |c| c.out.len() - c.out_at)
    }

    /// Queues a bulk PUT (its head; the payload is the one given to [`Endpoint::turn`]).
    pub fn queue_bulk(&mut self, head: [u8; FRAME_HEAD]) -> Result<(), BenchError> {
        self.conn_mut(ConnType::BulkOut)?.bulk.push_back(head);
        Ok(())
    }

    /// Bulk PUTs queued and not completely written.
    pub fn pending_bulk(&self) -> usize {
        self.conns.iter().map(|c| c.bulk.len()).sum()
    }

    fn conn_mut(&mut self, ctype: ConnType) -> Result<&mut Conn, BenchError> {
        let i = self
            .index_of(ctype)
            .ok_or_else(|| BenchError::Setup(format!("no {ctype:?} connection")))?;
        self.conns
            .get_mut(i)
            .ok_or_else(|| BenchError::Setup(format!("no {ctype:?} connection")))
    }
}

/// Connects from `local` and a reserved port to `addr`, retrying refusals until `bound`.
async fn dial(local: Ipv4Addr, addr: SocketAddr, bound: Duration) -> Result<TcpStream, BenchError> {
    let end = Instant::now() + bound;
    loop {
        match connect_reserved(local, addr, HANDSHAKE_LIMIT).await {
            Ok(s) => {
                let s = s.into_std().map_err(io_err("into_std"))?;
                s.set_nonblocking(false).map_err(io_err("blocking"))?;
                return Ok(s);
            }
            Err(e) if Instant::now() < end => {
                tracing::debug!(%addr, "wire: connect failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(BenchError::Setup(format!("connect {local} -> {addr}: {e}"))),
        }
    }
}
