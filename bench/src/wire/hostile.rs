//! `lnet-bench wire --hostile`: hostile clients of the router's API and hostile peers of
//! its socklnd acceptor, at work while the router's forwarding is measured. Each client
//! comes from loopback addresses of its own (127.0.60.x), so the router's per-address
//! limits meet them and not the benchmark's sources (127.0.58.1, 127.0.62.1, ...):
//!
//! * **slow headers**: 40 connections to the API, each dripping a request head one byte a
//!   second (the router cuts each after its head timeout; they connect again);
//! * **event streams**: 300 subscribers of `GET /api/v1/events/stream` with a reader
//!   token, over the router's bound of event streams (the rest are answered 503 and try
//!   again a second later);
//! * **token guessing**: requests with unknown tokens, one every 20 ms, from one address
//!   (slowed by the router's throttle);
//! * **oversized bodies**: `POST /api/v1/ping` with a 1 MiB body, ten a second (413);
//! * **dripping handshakes**: 32 connections to the near NI's acceptor from one address,
//!   each dripping the acceptor request a byte every 300 ms, holding that address's
//!   handshake slots, and a flood of 200 connections a second from the same address
//!   (closed at once by the per-address limit);
//! * **half HELLOs**: from reserved ports of another address, a valid acceptor request and
//!   half a HELLO, then nothing (closed by the acceptor's timeout), one after another.
//!
//! They run on one thread of their own (a tokio runtime) from [`HostileLoad::start`]
//! until [`HostileLoad::stop`], which says what each did. Nothing is asserted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use lnd::socklnd::handshake::connect_reserved;
use lnd::socklnd::wire::{ByteOrder, ConnType, Hello, ProtoVersion};
use lnet::{AcceptorRequest, Nid, ProcessId};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::BenchError;

/// Where the hostile clients go.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The router's API (plain HTTP).
    pub api: SocketAddr,
    /// A reader token of the API.
    pub reader_token: String,
    /// The near NI's acceptor.
    pub acceptor: SocketAddr,
    /// The near NI's NID (the acceptor request names it).
    pub ni: Nid,
}

/// What the hostile clients did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostileCounts {
    /// Slow-header connections the router cut.
    pub slow_headers_cut: u64,
    /// Event streams the router granted.
    pub event_streams_held: u64,
    /// Event stream requests answered 503.
    pub event_streams_refused: u64,
    /// Requests with a guessed token.
    pub guesses: u64,
    /// Guesses answered 401 with `Retry-After` (throttled).
    pub guesses_throttled: u64,
    /// Oversized bodies answered 413.
    pub bodies_refused: u64,
    /// Dripping handshakes the router cut.
    pub drips_cut: u64,
    /// Flood connections made (each closed by the router).
    pub flood_connections: u64,
    /// Half HELLOs the router cut.
    pub half_hellos_cut: u64,
}

impl HostileCounts {
    /// Adds what another run did.
    pub fn add(&mut self, o: &HostileCounts) {
        self.slow_headers_cut += o.slow_headers_cut;
        self.event_streams_held += o.event_streams_held;
        self.event_streams_refused += o.event_streams_refused;
        self.guesses += o.guesses;
        self.guesses_throttled += o.guesses_throttled;
        self.bodies_refused += o.bodies_refused;
        self.drips_cut += o.drips_cut;
        self.flood_connections += o.flood_connections;
        self.half_hellos_cut += o.half_hellos_cut;
    }
}

#[derive(Default)]
struct Counters {
    slow_headers_cut: AtomicU64,
    event_streams_held: AtomicU64,
    event_streams_refused: AtomicU64,
    guesses: AtomicU64,
    guesses_throttled: AtomicU64,
    bodies_refused: AtomicU64,
    drips_cut: AtomicU64,
    flood_connections: AtomicU64,
    half_hellos_cut: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> HostileCounts {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        HostileCounts {
            slow_headers_cut: g(&self.slow_headers_cut),
            event_streams_held: g(&self.event_streams_held),
            event_streams_refused: g(&self.event_streams_refused),
            guesses: g(&self.guesses),
            guesses_throttled: g(&self.guesses_throttled),
            bodies_refused: g(&self.bodies_refused),
            drips_cut: g(&self.drips_cut),
            flood_connections: g(&self.flood_connections),
            half_hellos_cut: g(&self.half_hellos_cut),
        }
    }
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// The hostile clients, running.
pub struct HostileLoad {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

const SLOW_HEADERS: usize = 40;
const EVENT_STREAMS: usize = 300;
const DRIPS: usize = 32;

fn from(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 60, last)
}

/// A connection to `to` from `ip` (an unreserved port).
async fn dial(ip: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(IpAddr::V4(ip), 0))?;
    s.connect(to).await
}

/// Sleeps `d` unless told to stop first; whether to go on.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => !*stop.borrow(),
        _ = stop.changed() => false,
    }
}

/// Reads until the peer closes (or `stop`); whether it closed.
async fn until_closed(s: &mut TcpStream, stop: &mut watch::Receiver<bool>) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            r = s.read(&mut buf) => match r {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            },
            _ = stop.changed() => return false,
        }
    }
}

/// The status code of the answer on `s` (the first line of it), if one came.
async fn status(s: &mut TcpStream) -> Option<(u16, String)> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(buf.get(..n)?);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text))
}

async fn slow_header(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let head = format!("GET /api/v1/nets HTTP/1.1\r\nHost: {}\r\n", t.api);
    'conn: while !*stop.borrow() {
        let Ok(mut s) = dial(from(1), t.api).await else {
            if !pause(&mut stop, Duration::from_secs(1)).await {
                return;
            }
            continue;
        };
        for b in head.bytes().cycle() {
            if s.write_all(&[b]).await.is_err() {
                bump(&c.slow_headers_cut);
                if !pause(&mut stop, Duration::from_secs(1)).await {
                    return;
                }
                continue 'conn;
            }
            let mut probe = [0u8; 512];
            tokio::select! {
                r = s.read(&mut probe) => {
                    if matches!(r, Ok(0) | Err(_)) {
                        bump(&c.slow_headers_cut);
                    }
                    // Closed, or answered (a head timeout's answer): start again.
                    if !pause(&mut stop, Duration::from_secs(1)).await {
                        return;
                    }
                    continue 'conn;
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

async fn event_stream(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let req = format!(
        "GET /api/v1/events/stream HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
        t.api, t.reader_token
    );
    while !*stop.borrow() {
        if let Ok(mut s) = dial(from(2), t.api).await {
            if s.write_all(req.as_bytes()).await.is_ok() {
                match status(&mut s).await {
                    Some((200, _)) => {
                        bump(&c.event_streams_held);
                        if !until_closed(&mut s, &mut stop).await {
                            return;
                        }
                    }
                    Some((503, _)) => bump(&c.event_streams_refused),
                    _ => {}
                }
            }
        }
        if !pause(&mut stop, Duration::from_secs(1)).await {
            return;
        }
    }
}

async fn guess_tokens(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let mut n = 0u64;
    while !*stop.borrow() {
        n += 1;
        let req = format!(
            "GET /api/v1/nets HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer guess-{n:016x}\r\nConnection: close\r\n\r\n",
            t.api
        );
        if let Ok(mut s) = dial(from(3), t.api).await {
            if s.write_all(req.as_bytes()).await.is_ok() {
                bump(&c.guesses);
                if let Some((401, head)) = status(&mut s).await {
                    if head.to_ascii_lowercase().contains("retry-after:") {
                        bump(&c.guesses_throttled);
                    }
                }
            }
        }
        if !pause(&mut stop, Duration::from_millis(20)).await {
            return;
        }
    }
}

async fn big_bodies(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let body = vec![b' '; 1 << 20];
    while !*stop.borrow() {
        let head = format!(
            "POST /api/v1/ping HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            t.api,
            t.reader_token,
            body.len()
        );
        if let Ok(mut s) = dial(from(4), t.api).await {
            if s.write_all(head.as_bytes()).await.is_ok() {
                // The router may answer before it has the whole body.
                let _ = s.write_all(&body).await;
                if let Some((413, _)) = status(&mut s).await {
                    bump(&c.bodies_refused);
                }
            }
        }
        if !pause(&mut stop, Duration::from_millis(100)).await {
            return;
        }
    }
}

async fn drip_handshake(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let Ok(request) = AcceptorRequest::new(t.ni).and_then(|r| r.encode()) else {
        return;
    };
    'conn: while !*stop.borrow() {
        let Ok(mut s) = dial(from(5), t.acceptor).await else {
            if !pause(&mut stop, Duration::from_secs(1)).await {
                return;
            }
            continue;
        };
        for b in request.iter().cycle() {
            let mut probe = [0u8; 64];
            let cut = tokio::select! {
                r = s.read(&mut probe) => matches!(r, Ok(0) | Err(_)),
                _ = tokio::time::sleep(Duration::from_millis(300)) => {
                    s.write_all(&[*b]).await.is_err()
                }
                _ = stop.changed() => return,
            };
            if cut {
                bump(&c.drips_cut);
                // Over the address's limit a connection is closed at once: no busy loop.
                if !pause(&mut stop, Duration::from_millis(300)).await {
                    return;
                }
                continue 'conn;
            }
        }
    }
}

async fn flood(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    while !*stop.borrow() {
        if let Ok(mut s) = dial(from(5), t.acceptor).await {
            bump(&c.flood_connections);
            let mut probe = [0u8; 16];
            let _ = tokio::time::timeout(Duration::from_millis(200), s.read(&mut probe)).await;
        }
        if !pause(&mut stop, Duration::from_millis(5)).await {
            return;
        }
    }
}

async fn half_hello(t: Arc<Targets>, c: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let me = ProcessId::lustre(Nid::from_ipv4(t.ni.net, from(6)));
    let mut first = match AcceptorRequest::new(t.ni).and_then(|r| r.encode()) {
        Ok(b) => b,
        Err(_) => return,
    };
    let mut hello = Vec::new();
    let h = Hello::new(ProtoVersion::V3, me, t.ni, 1, ConnType::Control);
    if h.encode_in(ByteOrder::Little, &mut hello).is_err() {
        return;
    }
    first.extend_from_slice(hello.get(..hello.len() / 2).unwrap_or_default());
    while !*stop.borrow() {
        if let Ok(mut s) = connect_reserved(from(6), t.acceptor, Duration::from_secs(2)).await {
            if s.write_all(&first).await.is_ok() && until_closed(&mut s, &mut stop).await {
                bump(&c.half_hellos_cut);
            }
        }
        if !pause(&mut stop, Duration::from_millis(100)).await {
            return;
        }
    }
}

impl HostileLoad {
    /// Starts every hostile client and returns once they have been at work for `warmup`.
    pub fn start(targets: Targets, warmup: Duration) -> Result<HostileLoad, BenchError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, rx) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let t = Arc::new(targets);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| BenchError::Io {
                what: "start the hostile clients' runtime".into(),
                source,
            })?;
        let c = counters.clone();
        let thread = std::thread::Builder::new()
            .name("hostile".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for _ in 0..SLOW_HEADERS {
                        set.spawn(slow_header(t.clone(), c.clone(), rx.clone()));
                    }
                    for _ in 0..EVENT_STREAMS {
                        set.spawn(event_stream(t.clone(), c.clone(), rx.clone()));
                    }
                    set.spawn(guess_tokens(t.clone(), c.clone(), rx.clone()));
                    set.spawn(big_bodies(t.clone(), c.clone(), rx.clone()));
                    for _ in 0..DRIPS {
                        set.spawn(drip_handshake(t.clone(), c.clone(), rx.clone()));
                    }
                    set.spawn(flood(t.clone(), c.clone(), rx.clone()));
                    set.spawn(half_hello(t.clone(), c.clone(), rx.clone()));
                    tokio::time::sleep(warmup).await;
                    let _ = ready_tx.send(());
                    while set.join_next().await.is_some() {}
                });
            })
            .map_err(|source| BenchError::Io {
                what: "start the hostile clients' thread".into(),
                source,
            })?;
        // Ends early only if the thread did.
        let _ = ready_rx.recv();
        Ok(HostileLoad {
            stop,
            thread: Some(thread),
            counters,
        })
    }

    /// Stops every client and says what they did.
    pub fn stop(mut self) -> HostileCounts {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.counters.snapshot()
    }
}

impl Drop for HostileLoad {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
