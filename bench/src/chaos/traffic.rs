//! The traffic of a chaos run: end node A (tcp) PUTs to and GETs from end node B (tcp1)
//! through the three routers while the schedule runs. Every PUT asks for an ACK and
//! carries its sequence number in `hdr_data` and a payload whose size and bytes derive
//! from that number; B checks each PUT's bytes against it and counts the numbers it sees
//! twice. Every GET's REPLY must hold the start of B's MD. Each transaction must end (its
//! ACK or REPLY, or a failure event) within its timeout plus a margin, else it is hung.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actors::{GetRequest, MdSpec, MsgEventKind, Node, PutRequest};
use bytes::Bytes;
use lnet::Nid;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::soak::traffic::{payload, size, Rng};
use crate::topo::{node_err, Host, MATCH_BITS, PORTAL};
use crate::BenchError;

/// The sequence numbers of the probes sent after the schedule (above every PUT's).
pub const PROBE_SEQ: u64 = 1 << 62;

/// The size of PUT `seq` of a run with `seed`: 0 B to 1 MiB, the soak's mix.
pub fn put_size(seed: u64, seq: u64) -> usize {
    let mut rng = Rng::new(seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    usize::try_from(size(&mut rng)).unwrap_or(0)
}

/// Byte `i` of PUT `seq`'s payload.
fn put_byte(seq: u64, i: usize) -> u8 {
    let s = seq.to_le_bytes();
    let (lo, hi) = (
        s.first().copied().unwrap_or(0),
        s.get(1).copied().unwrap_or(0),
    );
    ((i % 251) as u8) ^ lo.wrapping_mul(7) ^ hi.rotate_left(3)
}

/// The payload of PUT `seq`.
pub fn put_payload(seed: u64, seq: u64) -> Bytes {
    let n = put_size(seed, seq);
    Bytes::from((0..n).map(|i| put_byte(seq, i)).collect::<Vec<u8>>())
}

/// Whether `data` is PUT `seq`'s payload.
fn put_intact(seed: u64, seq: u64, data: &[u8]) -> bool {
    data.len() == put_size(seed, seq)
        && data.iter().enumerate().all(|(i, b)| *b == put_byte(seq, i))
}

/// What B saw.
#[derive(Debug, Default)]
pub struct Received {
    /// PUTs delivered (duplicates included).
    pub delivered: AtomicU64,
    /// PUTs whose `hdr_data` had been delivered before.
    pub duplicates: AtomicU64,
    /// PUTs whose payload was not the one of their `hdr_data`.
    pub corrupted: AtomicU64,
    seen: Mutex<HashSet<u64>>,
    /// The first duplicated and corrupted sequence numbers (at most 16 each).
    examples: Mutex<(Vec<u64>, Vec<u64>)>,
}

impl Received {
    fn take(&self, seed: u64, seq: u64, data: &[u8]) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        let again = !self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(seq);
        let bad = !put_intact(seed, seq, data);
        let mut ex = self.examples.lock().unwrap_or_else(PoisonError::into_inner);
        if again {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
            if ex.0.len() < 16 {
                ex.0.push(seq);
            }
        }
        if bad {
            self.corrupted.fetch_add(1, Ordering::Relaxed);
            if ex.1.len() < 16 {
                ex.1.push(seq);
            }
        }
    }

    /// The first duplicated and the first corrupted sequence numbers.
    pub fn examples(&self) -> (Vec<u64>, Vec<u64>) {
        self.examples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Attaches B's MD (answering GETs from the 1 MiB pattern) and checks every PUT it takes.
pub async fn attach_b(host: &Host, b: &Node, seed: u64) -> Result<Arc<Received>, BenchError> {
    let mut rx = b
        .attach(MdSpec {
            portal: PORTAL,
            match_bits: MATCH_BITS,
            data: payload(),
            depth: 4096,
        })
        .await
        .map_err(|e| node_err("B's MD".to_owned(), e))?;
    let received = Arc::new(Received::default());
    let r = Arc::clone(&received);
    host.run(move || async move {
        actix::spawn(async move {
            while let Some(m) = rx.recv().await {
                if let lnet::Message::Put { hdr_data, .. } = m.header.msg {
                    r.take(seed, hdr_data, &m.payload);
                }
            }
        });
    })
    .await?;
    Ok(received)
}

/// How one transaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// Its ACK or REPLY.
    Response,
    /// A failure event (its status, as debug text).
    Failure(String),
    /// The node refused to start it.
    Refused,
    /// A REPLY of other bytes than asked.
    Mismatch,
    /// Its events stopped without a last one.
    Lost,
}

/// A kind's counts.
#[derive(Debug, Default)]
struct KindTally {
    started: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
}

/// What A's driver counted.
#[derive(Debug, Default)]
pub struct Tally {
    put: KindTally,
    get: KindTally,
    refused: AtomicU64,
    mismatch: AtomicU64,
    lost: AtomicU64,
    hung: AtomicU64,
    open: AtomicU64,
    longest_us: AtomicU64,
    reasons: Mutex<BTreeMap<String, u64>>,
}

/// One kind's counts in the summary.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct KindCounts {
    /// Started.
    pub sent: u64,
    /// Ended with their ACK or REPLY.
    pub ok: u64,
    /// Ended with a failure event.
    pub failed: u64,
}

/// The traffic's counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrafficCounts {
    /// PUTs with ACKs.
    pub put: KindCounts,
    /// GETs.
    pub get: KindCounts,
    /// Refused by A before they started.
    pub refused: u64,
    /// GETs whose REPLY was not the bytes asked.
    pub mismatch: u64,
    /// Transactions whose events stopped without a last one.
    pub lost: u64,
    /// Not ended within their timeout and the margin.
    pub hung: u64,
    /// Still open when the drain bound ran out.
    pub open: u64,
    /// The longest a transaction took to end, seconds.
    pub longest_s: f64,
    /// Failure events by status.
    pub failure_reasons: BTreeMap<String, u64>,
}

impl Tally {
    fn ended(&self, put: bool, end: End, took: Duration) {
        let k = if put { &self.put } else { &self.get };
        self.longest_us.fetch_max(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let c = match end {
            End::Response => &k.ok,
            End::Failure(why) => {
                let mut r = self.reasons.lock().unwrap_or_else(PoisonError::into_inner);
                let key = format!("{}: {why}", if put { "put" } else { "get" });
                if r.len() < 32 || r.contains_key(&key) {
                    *r.entry(key).or_default() += 1;
                }
                &k.failed
            }
            End::Refused => &self.refused,
            End::Mismatch => &self.mismatch,
            End::Lost => &self.lost,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn counts(&self) -> TrafficCounts {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let kind = |k: &KindTally| KindCounts {
            sent: get(&k.started),
            ok: get(&k.ok),
            failed: get(&k.failed),
        };
        TrafficCounts {
            put: kind(&self.put),
            get: kind(&self.get),
            refused: get(&self.refused),
            mismatch: get(&self.mismatch),
            lost: get(&self.lost),
            hung: get(&self.hung),
            open: get(&self.open),
            #[allow(clippy::cast_precision_loss)] // microseconds: far below 2^52
            longest_s: get(&self.longest_us) as f64 / 1e6,
            failure_reasons: self
                .reasons
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// How A's driver runs.
#[derive(Debug, Clone, Copy)]
pub struct DriveSpec {
    /// B's NID.
    pub dest: Nid,
    /// Time between two transactions.
    pub interval: Duration,
    /// Most transactions in flight.
    pub window: usize,
    /// Each transaction's LNet timeout.
    pub timeout: Duration,
    /// How long past its timeout a transaction may take to end before it is hung.
    pub margin: Duration,
    /// The run's seed (PUT payloads; the PUT/GET mix and GET sizes).
    pub seed: u64,
}

async fn put(a: Node, spec: DriveSpec, seq: u64) -> End {
    let req = PutRequest {
        dest: spec.dest,
        portal: PORTAL,
        match_bits: MATCH_BITS,
        hdr_data: seq,
        payload: put_payload(spec.seed, seq),
        ack: true,
        timeout: spec.timeout,
    };
    let Ok(txn) = a.put(req).await else {
        return End::Refused;
    };
    match txn.finish().await.last() {
        None => End::Lost,
        Some(e) if !e.status.is_ok() => End::Failure(format!("{:?}", e.status)),
        Some(e) if e.kind == MsgEventKind::Ack => End::Response,
        Some(_) => End::Lost,
    }
}

async fn get(a: Node, spec: DriveSpec, want: Bytes) -> End {
    let req = GetRequest {
        dest: spec.dest,
        portal: PORTAL,
        match_bits: MATCH_BITS,
        sink_length: u32::try_from(want.len()).unwrap_or(u32::MAX),
        timeout: spec.timeout,
    };
    let Ok(txn) = a.get(req).await else {
        return End::Refused;
    };
    match txn.finish().await.last() {
        None => End::Lost,
        Some(e) if !e.status.is_ok() => End::Failure(format!("{:?}", e.status)),
        Some(e) if e.kind == MsgEventKind::Reply => {
            if e.payload.as_ref() == Some(&want) {
                End::Response
            } else {
                End::Mismatch
            }
        }
        Some(_) => End::Lost,
    }
}

/// Starts a transaction every `spec.interval` (PUT 60 %, GET 40 %) until `stop`, then
/// waits for the open ones (their timeout and margin, plus 5 s) and counts what is left
/// open. Runs on A's host.
pub async fn drive(a: Node, spec: DriveSpec, tally: Arc<Tally>, stop: watch::Receiver<bool>) {
    let mut rng = Rng::new(spec.seed ^ 0x7261_6666_6963);
    let pattern = payload();
    let mut running: JoinSet<()> = JoinSet::new();
    let mut tick = tokio::time::interval(spec.interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq = 0u64;
    let bound = spec.timeout + spec.margin;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if *stop.borrow() {
                    break;
                }
                if running.len() >= spec.window {
                    continue;
                }
                let is_put = rng.below(10) < 6;
                let node = a.clone();
                let t = Arc::clone(&tally);
                if is_put {
                    t.put.started.fetch_add(1, Ordering::Relaxed);
                    let s = seq;
                    seq += 1;
                    running.spawn_local(async move {
                        let t0 = Instant::now();
                        match tokio::time::timeout(bound, put(node, spec, s)).await {
                            Ok(end) => t.ended(true, end, t0.elapsed()),
                            Err(_) => {
                                t.hung.fetch_add(1, Ordering::Relaxed);
                                tracing::error!(seq = s, "PUT hung past its timeout");
                            }
                        }
                    });
                } else {
                    t.get.started.fetch_add(1, Ordering::Relaxed);
                    let n = usize::try_from(size(&mut rng)).unwrap_or(0).min(pattern.len());
                    let want = pattern.slice(0..n);
                    running.spawn_local(async move {
                        let t0 = Instant::now();
                        match tokio::time::timeout(bound, get(node, spec, want)).await {
                            Ok(end) => t.ended(false, end, t0.elapsed()),
                            Err(_) => {
                                t.hung.fetch_add(1, Ordering::Relaxed);
                                tracing::error!("GET hung past its timeout");
                            }
                        }
                    });
                }
            }
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    let drain = bound + Duration::from_secs(5);
    let _ = tokio::time::timeout(drain, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    tally.open.store(
        u64::try_from(running.len()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    running.abort_all();
}

/// After the schedule: PUTs (each with the timeout) until one is ACKed or `bound` runs
/// out; the time it took, `None` when none was ACKed.
pub async fn probe(a: &Node, spec: DriveSpec, bound: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut k = 0u64;
    while t0.elapsed() < bound {
        if put(a.clone(), spec, PROBE_SEQ + k).await == End::Response {
            return Some(t0.elapsed());
        }
        k += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_checked_against_its_sequence_number() {
        let seed = 11;
        let sizes: Vec<usize> = (0..2000).map(|s| put_size(seed, s)).collect();
        assert!(sizes.contains(&0) && sizes.contains(&(1 << 20)));
        let seq = (0..2000u64)
            .find(|s| put_size(seed, *s) > 1000)
            .unwrap_or(0);
        let p = put_payload(seed, seq);
        assert!(put_intact(seed, seq, &p));
        let mut bad = p.to_vec();
        if let Some(b) = bad.get_mut(500) {
            *b ^= 1;
        }
        assert!(!put_intact(seed, seq, &bad));
        assert!(!put_intact(seed, seq, &p[..p.len() - 1]));
        // Another PUT's bytes of the same length do not pass.
        let other = (0..2000u64)
            .find(|s| *s != seq && put_size(seed, *s) == p.len())
            .map(|s| put_payload(seed, s));
        if let Some(o) = other {
            assert!(!put_intact(seed, seq, &o));
        }
    }

    #[test]
    fn b_counts_a_sequence_number_seen_twice() {
        let r = Received::default();
        let p = put_payload(3, 7);
        r.take(3, 7, &p);
        r.take(3, 8, &put_payload(3, 8));
        r.take(3, 7, &p);
        r.take(3, 9, b"not it");
        assert_eq!(r.duplicates.load(Ordering::Relaxed), 1);
        assert_eq!(r.delivered.load(Ordering::Relaxed), 4);
        let (dups, bad) = r.examples();
        assert_eq!(dups, vec![7]);
        assert_eq!(bad, vec![9]);
    }
}
