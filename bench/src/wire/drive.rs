//! The load generator's two ends: a source that keeps a window of PUTs in flight, within
//! the socklnd credits, and a sink that answers every PUT with an ACK. Each runs one
//! [`Endpoint`] loop on one thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use lnd::socklnd::wire::ConnType;
use lnet::{MsgType, ProcessId};
use tokio::time::Instant;

use super::endpoint::{Endpoint, Role};
use super::frames::{
    ack_cookie, ack_head, answer_ping, answer_put, put_head, set_put_cookie, Found, FRAME_HEAD,
};
use super::usage::current_tid;
use crate::BenchError;

/// Answers an LNet ping (the router may ping its peers); counts anything else.
fn other_frame(
    me: ProcessId,
    head: &[u8],
    replies: &mut Vec<u8>,
    pings: &mut u64,
    unexpected: &mut u64,
) {
    match answer_ping(me, head, replies) {
        Ok(true) => *pings += 1,
        Ok(false) | Err(_) => *unexpected += 1,
    }
}

/// The sink's side: an ACK for each PUT.
struct Answer {
    me: ProcessId,
    ack: [u8; FRAME_HEAD],
    puts: u64,
    pings: u64,
    unexpected: u64,
}

impl Role for Answer {
    fn on_frame(&mut self, found: Found, buf: &[u8], replies: &mut Vec<u8>) {
        match found {
            Found::Noop => {}
            Found::Lnet {
                msg_type: MsgType::Put,
                at,
            } => {
                self.puts += 1;
                answer_put(&self.ack, buf.get(at..).unwrap_or(&[]), replies);
            }
            Found::Lnet {
                msg_type: MsgType::Get,
                at,
            } => other_frame(
                self.me,
                buf.get(at..).unwrap_or(&[]),
                replies,
                &mut self.pings,
                &mut self.unexpected,
            ),
            Found::Lnet { .. } => self.unexpected += 1,
        }
    }
}

/// What a sink did, once stopped.
#[derive(Debug, Clone, Copy, Default)]
pub struct SinkTotals {
    /// PUTs received (and ACKed).
    pub puts: u64,
    /// LNet pings received (and answered).
    pub pings: u64,
    /// Other LNet messages received (ignored).
    pub unexpected: u64,
}

/// A sink running on its own thread until [`Sink::stop`].
#[derive(Debug)]
pub struct Sink {
    stop: Arc<AtomicBool>,
    /// Its thread's id.
    tid: u32,
    thread: Option<JoinHandle<Result<SinkTotals, BenchError>>>,
}

impl Sink {
    /// Starts a sink as `me` listening on `port`, answering PUTs from `source`.
    pub fn start(me: ProcessId, source: ProcessId, port: u16) -> Result<Sink, BenchError> {
        let mut ep = Endpoint::listen(me, port, 0x51_4B00)?;
        let mut role = Answer {
            me,
            ack: ack_head(me, source)?,
            puts: 0,
            pings: 0,
            unexpected: 0,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (tid_tx, tid_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(format!("sink-{}", me.nid))
            .spawn(move || {
                let _ = tid_tx.send(current_tid());
                while !flag.load(Ordering::Relaxed) {
                    ep.turn(50, &mut role, &[])?;
                }
                Ok(SinkTotals {
                    puts: role.puts,
                    pings: role.pings,
                    unexpected: role.unexpected,
                })
            })
            .map_err(|source| BenchError::Io {
                what: "start a sink thread".into(),
                source,
            })?;
        let mut sink = Sink {
            stop,
            tid: 0,
            thread: Some(thread),
        };
        // Dropped on error, which stops the thread.
        sink.tid = tid_rx
            .recv()
            .map_err(|_| BenchError::Setup("the sink thread ended as it started".into()))??;
        Ok(sink)
    }

    /// Its thread's id.
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Stops the sink and returns its totals (or the error that stopped it before).
    pub fn stop(mut self) -> Result<SinkTotals, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(BenchError::Setup("the sink thread panicked".into())),
            None => Ok(SinkTotals::default()),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The source's side: counts ACKs, times them when one PUT at a time is in flight.
struct Count {
    me: ProcessId,
    pings: u64,
    unexpected: u64,
    acks: u64,
    /// The cookie of the one PUT in flight (latency phase) and when it was queued.
    sent_at: Option<(u64, Instant)>,
    last_rtt: Option<Duration>,
}

impl Role for Count {
    fn on_frame(&mut self, found: Found, buf: &[u8], replies: &mut Vec<u8>) {
        if let Found::Lnet {
            msg_type: MsgType::Get,
            at,
        } = found
        {
            let head = buf.get(at..).unwrap_or(&[]);
            other_frame(
                self.me,
                head,
                replies,
                &mut self.pings,
                &mut self.unexpected,
            );
        }
        if let Found::Lnet {
            msg_type: MsgType::Ack,
            at,
        } = found
        {
            self.acks += 1;
            let cookie = ack_cookie(buf.get(at..).unwrap_or(&[]));
            if let Some((c, t)) = self.sent_at {
                if c == cookie {
                    self.last_rtt = Some(t.elapsed());
                    self.sent_at = None;
                }
            }
        }
    }
}

/// What a source phase sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// 0-byte PUTs with an ACK, `window` in flight.
    Rate {
        /// PUTs in flight.
        window: usize,
    },
    /// 1 MiB PUTs with an ACK, `window` in flight.
    Bulk {
        /// PUTs in flight.
        window: usize,
    },
    /// One 0-byte PUT at a time, each round trip timed.
    Latency,
}

/// Times of a phase.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Sent but not counted, first.
    pub warmup: Duration,
    /// Counted.
    pub measure: Duration,
    /// Most time for the PUTs in flight at the end to be ACKed.
    pub drain: Duration,
}

/// What a phase measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// PUT+ACKs completed within the measured time.
    pub counted: u64,
    /// PUT+ACKs completed in the whole phase (warm-up and drain included): what the
    /// CPU time measured around the phase is divided by.
    pub total: u64,
    /// The measured time, seconds.
    pub seconds: f64,
    /// Round trips (latency phase), nanoseconds, sorted.
    pub rtts_ns: Vec<u64>,
    /// LNet pings the source answered.
    pub pings: u64,
    /// Other LNet messages the source received (ignored).
    pub unexpected: u64,
}

/// A source: the three connections to its next hop and the PUT templates.
#[derive(Debug)]
pub struct Source {
    me: ProcessId,
    ep: Endpoint,
    small: [u8; FRAME_HEAD],
    bulk: [u8; FRAME_HEAD],
    payload: Vec<u8>,
    seq: u64,
    credits: usize,
}

impl Source {
    /// A source `me` (listening on `port` for connections its peers may open back)
    /// connected to `next_hop` at `addr`, sending PUTs to `target`; at most `credits`
    /// frames queued and not yet taken by TCP (socklnd's `peer_credits`).
    pub fn connect(
        me: ProcessId,
        port: u16,
        next_hop: ProcessId,
        addr: std::net::SocketAddr,
        target: ProcessId,
        credits: usize,
        bulk_size: u32,
    ) -> Result<Source, BenchError> {
        let mut ep = Endpoint::listen(me, port, 0x50_5200)?;
        ep.connect(next_hop, addr, Duration::from_secs(30))?;
        Ok(Source {
            me,
            ep,
            small: put_head(me, target, 0)?,
            bulk: put_head(me, target, bulk_size)?,
            payload: vec![0x5A; bulk_size as usize],
            seq: 0,
            credits: credits.max(1),
        })
    }

    /// Runs one phase.
    pub fn run(&mut self, load: Load, timing: Timing) -> Result<Outcome, BenchError> {
        let mut role = Count {
            me: self.me,
            pings: 0,
            unexpected: 0,
            acks: 0,
            sent_at: None,
            last_rtt: None,
        };
        let start = Instant::now();
        let t0 = start + timing.warmup;
        let t1 = t0 + timing.measure;
        let mut out = Outcome {
            seconds: timing.measure.as_secs_f64(),
            ..Outcome::default()
        };
        let (mut sent, mut seen) = (0u64, 0u64);
        let mut batch = Vec::new();
        loop {
            let now = Instant::now();
            let sending = now < t1;
            let in_flight = usize::try_from(sent - role.acks).unwrap_or(usize::MAX);
            if sending {
                sent += self.fill(load, in_flight, &mut batch, &mut role)?;
            } else if in_flight == 0 {
                break;
            } else if now > t1 + timing.drain {
                return Err(BenchError::Timeout(format!(
                    "{in_flight} PUTs not ACKed {:?} after the phase",
                    timing.drain
                )));
            }
            self.ep.turn(10, &mut role, &self.payload)?;
            if self.ep.closed() > 0 {
                return Err(BenchError::Setup(
                    "the next hop closed a connection of the source".into(),
                ));
            }
            let now = Instant::now();
            let new = role.acks - seen;
            seen = role.acks;
            if now >= t0 && now < t1 {
                out.counted += new;
                if let Some(rtt) = role.last_rtt.take() {
                    out.rtts_ns
                        .push(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
                }
            }
            role.last_rtt = None;
        }
        out.total = role.acks;
        out.pings = role.pings;
        out.unexpected = role.unexpected;
        out.rtts_ns.sort_unstable();
        Ok(out)
    }

    /// Queues new PUTs as the window and the credits allow; returns how many.
    fn fill(
        &mut self,
        load: Load,
        in_flight: usize,
        batch: &mut Vec<u8>,
        role: &mut Count,
    ) -> Result<u64, BenchError> {
        let mut n = 0u64;
        match load {
            Load::Rate { .. } | Load::Latency => {
                let window = match load {
                    Load::Rate { window } => window,
                    _ => 1,
                };
                let queued = self
                    .ep
                    .pending_small(ConnType::Control)
                    .div_ceil(FRAME_HEAD);
                let room = window
                    .saturating_sub(in_flight)
                    .min(self.credits.saturating_sub(queued));
                batch.clear();
                for _ in 0..room {
                    self.seq += 1;
                    set_put_cookie(&mut self.small, self.seq);
                    batch.extend_from_slice(&self.small);
                    n += 1;
                }
                if n > 0 {
                    if load == Load::Latency {
                        role.sent_at = Some((self.seq, Instant::now()));
                    }
                    self.ep.queue_small(ConnType::Control, batch)?;
                }
            }
            Load::Bulk { window } => {
                let room = window
                    .saturating_sub(in_flight)
                    .min(self.credits.saturating_sub(self.ep.pending_bulk()));
                for _ in 0..room {
                    self.seq += 1;
                    set_put_cookie(&mut self.bulk, self.seq);
                    self.ep.queue_bulk(self.bulk)?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}
