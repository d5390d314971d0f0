//! The load generator: keeps a number of PUTs, GETs or pings in flight from source nodes
//! to target NIDs for a bounded time, and counts what completed in each interval.

use std::time::Duration;

use actors::{GetRequest, MsgEventKind, Node, PutRequest};
use bytes::Bytes;
use lnet::Nid;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::topo::{MATCH_BITS, PORTAL};

/// What each operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// An LNet ping (GET on the reserved portal; the REPLY is the ping info).
    Ping,
    /// A PUT of `size` bytes with an ACK (`brw write`).
    Put {
        /// Payload bytes.
        size: u32,
    },
    /// A GET of `size` bytes (`brw read`): the target's MD answers with a REPLY.
    Get {
        /// Bytes asked for.
        size: u32,
    },
}

impl Op {
    /// Payload bytes one successful operation moves.
    pub fn bytes(self) -> u64 {
        match self {
            Op::Ping => 0,
            Op::Put { size } | Op::Get { size } => u64::from(size),
        }
    }
}

/// One load run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// The operation.
    pub op: Op,
    /// Operations in flight per source.
    pub concurrency: usize,
    /// How long new operations are started; only those completed within it count.
    pub duration: Duration,
    /// Length of one interval of the per-interval rates.
    pub interval: Duration,
    /// The transaction timeout of each operation.
    pub timeout: Duration,
    /// Keep each operation's latency (for percentiles).
    pub latencies: bool,
    /// Print a progress line per interval, with this prefix.
    pub progress: Option<String>,
}

/// One interval's completions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Operations that completed successfully.
    pub ok: u64,
    /// Operations that ended with a failure event or were refused.
    pub failed: u64,
    /// Their rate (per second).
    pub rpc_per_s: f64,
    /// Payload MiB per second.
    pub mib_per_s: f64,
}

/// What a load run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadResult {
    /// Successful operations within the duration.
    pub ok: u64,
    /// Failed operations within the duration.
    pub failed: u64,
    /// Operations still in flight at the end (waited for, not counted).
    pub late: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Successful operations per second.
    pub rpc_per_s: f64,
    /// Payload MiB per second.
    pub mib_per_s: f64,
    /// Per interval.
    pub intervals: Vec<Interval>,
    /// Latency of each successful operation in microseconds (when asked for).
    #[serde(skip)]
    pub latencies_us: Vec<u64>,
}

struct Done {
    ok: bool,
    at: Instant,
    latency: Duration,
}

fn mib(bytes: f64) -> f64 {
    bytes / f64::from(1u32 << 20)
}

async fn one(node: Node, dest: Nid, op: Op, data: Bytes, timeout: Duration, hdr_data: u64) -> Done {
    let t0 = Instant::now();
    let ok = match op {
        Op::Ping => node.ping(dest, timeout).await.is_ok(),
        Op::Put { .. } => {
            let req = PutRequest {
                dest,
                portal: PORTAL,
                match_bits: MATCH_BITS,
                hdr_data,
                payload: data,
                ack: true,
                timeout,
            };
            match node.put(req).await {
                Ok(txn) => {
                    let events = txn.finish().await;
                    events.iter().all(|e| e.status.is_ok())
                        && events.last().is_some_and(|e| e.kind == MsgEventKind::Ack)
                }
                Err(_) => false,
            }
        }
        Op::Get { size } => {
            let req = GetRequest {
                dest,
                portal: PORTAL,
                match_bits: MATCH_BITS,
                sink_length: size,
                timeout,
            };
            match node.get(req).await {
                Ok(txn) => {
                    let events = txn.finish().await;
                    events.last().is_some_and(|e| {
                        e.kind == MsgEventKind::Reply
                            && e.status.is_ok()
                            && e.payload.as_ref().map(Bytes::len) == usize::try_from(size).ok()
                    })
                }
                Err(_) => false,
            }
        }
    };
    let at = Instant::now();
    Done {
        ok,
        at,
        latency: at.duration_since(t0),
    }
}

/// A payload of `size` bytes. The bytes are shared: a PUT hands the LND a reference.
pub fn payload(size: u32) -> Bytes {
    Bytes::from(vec![0x5au8; usize::try_from(size).unwrap_or(0)])
}

/// Keeps `spec.concurrency` operations in flight from each source to its targets (round
/// robin) until the duration ends, then waits for the stragglers (each bounded by its
/// timeout).
pub async fn run(sources: Vec<(Node, Vec<Nid>)>, spec: &LoadSpec) -> LoadResult {
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let start = Instant::now();
    let deadline = start + spec.duration;
    let payload_template = spec.op;
    for (si, (node, targets)) in sources.into_iter().enumerate() {
        if targets.is_empty() {
            continue;
        }
        let tx = tx.clone();
        let conc = spec.concurrency.max(1);
        let timeout = spec.timeout;
        let data = match spec.op {
            Op::Put { size } => payload(size),
            _ => Bytes::new(),
        };
        tokio::spawn(async move {
            let mut running = JoinSet::new();
            let mut n: u64 = 0;
            let base = u64::try_from(si).unwrap_or(0) << 40;
            loop {
                while running.len() < conc && Instant::now() < deadline {
                    let i = usize::try_from(n).unwrap_or(0) % targets.len();
                    let Some(dest) = targets.get(i).copied() else {
                        break;
                    };
                    running.spawn(one(
                        node.clone(),
                        dest,
                        payload_template,
                        data.clone(),
                        timeout,
                        base | n,
                    ));
                    n = n.wrapping_add(1);
                }
                match running.join_next().await {
                    Some(Ok(done)) => {
                        if tx.send(done).is_err() {
                            break;
                        }
                    }
                    Some(Err(_)) => {}
                    None => break,
                }
            }
        });
    }
    drop(tx);
    let step = spec.interval.max(Duration::from_millis(10));
    let nsteps = usize::try_from(spec.duration.as_nanos().div_ceil(step.as_nanos().max(1)))
        .unwrap_or(1)
        .max(1);
    let mut buckets = vec![(0u64, 0u64); nsteps];
    let mut result = LoadResult::default();
    let mut printed = 0usize;
    let mut ticker = tokio::time::interval_at(start + step, step);
    loop {
        tokio::select! {
            d = rx.recv() => {
                let Some(d) = d else { break };
                if d.at > deadline {
                    result.late = result.late.saturating_add(1);
                    continue;
                }
                let k = usize::try_from(d.at.duration_since(start).as_nanos() / step.as_nanos().max(1))
                    .unwrap_or(0)
                    .min(nsteps.saturating_sub(1));
                if let Some(b) = buckets.get_mut(k) {
                    if d.ok { b.0 = b.0.saturating_add(1) } else { b.1 = b.1.saturating_add(1) }
                }
                if d.ok {
                    result.ok = result.ok.saturating_add(1);
                    if spec.latencies {
                        result.latencies_us.push(u64::try_from(d.latency.as_micros()).unwrap_or(u64::MAX));
                    }
                } else {
                    result.failed = result.failed.saturating_add(1);
                }
            }
            _ = ticker.tick(), if printed < nsteps => {
                if let (Some(prefix), Some((ok, failed))) = (&spec.progress, buckets.get(printed)) {
                    let secs = step.as_secs_f64();
                    let rate = *ok as f64 / secs;
                    let bw = mib(rate * spec.op.bytes() as f64);
                    println!(
                        "{prefix} [{:>6.1}s] {rate:>10.1} RPC/s {bw:>9.1} MiB/s errors {failed}",
                        step.as_secs_f64() * (printed as f64 + 1.0)
                    );
                }
                printed += 1;
            }
        }
    }
    let secs = spec.duration.as_secs_f64().max(1e-9);
    result.seconds = secs;
    result.rpc_per_s = result.ok as f64 / secs;
    result.mib_per_s = mib(result.rpc_per_s * spec.op.bytes() as f64);
    let step_s = step.as_secs_f64();
    let last = nsteps.saturating_sub(1);
    result.intervals = buckets
        .iter()
        .enumerate()
        .map(|(i, (ok, failed))| {
            // The last interval may be shorter than the others.
            let len = if i == last {
                (secs - step_s * last as f64).max(1e-9)
            } else {
                step_s
            };
            let rate = *ok as f64 / len;
            Interval {
                ok: *ok,
                failed: *failed,
                rpc_per_s: rate,
                mib_per_s: mib(rate * spec.op.bytes() as f64),
            }
        })
        .collect();
    result
}

/// min, average and max of `values`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Spread {
    /// The least.
    pub min: f64,
    /// The mean.
    pub avg: f64,
    /// The most.
    pub max: f64,
}

impl Spread {
    /// Of `values` (zeros when empty).
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = values.iter().sum::<f64>() / values.len() as f64;
        Spread { min, avg, max }
    }
}

/// The `p`-th percentile (0..=100) of `sorted` by nearest rank; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil();
    let idx = (rank as usize).clamp(1, n) - 1;
    sorted.get(idx).copied().unwrap_or(0)
}

/// The median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        v.get(n / 2).copied().unwrap_or(0.0)
    } else {
        let a = v.get(n / 2 - 1).copied().unwrap_or(0.0);
        let b = v.get(n / 2).copied().unwrap_or(0.0);
        (a + b) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn spreads_and_medians() {
        let s = Spread::of(&[1.0, 2.0, 6.0]);
        assert_eq!((s.min, s.avg, s.max), (1.0, 3.0, 6.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
