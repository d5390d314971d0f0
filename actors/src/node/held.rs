//! The received messages this node holds while an LND waits on it, per local net they came
//! on: a header waiting for a router buffer, a message waiting for its next hop's credit
//! or LND queue, a full channel to the LNet actor, a receive delay rule.
//!
//! The net check counts such a net as heard for as long as a wait lasts: the node has what
//! the peer sent, and the peer may be unable to send anything more, even the answer to a
//! probe, until the node reads on (a socklnd connection whose reader waits leaves
//! everything the peer sent after that message unread). Only waits are counted, never a message that goes straight through:
//! nothing is written per message on the fast path.
//!
//! The counts are kept per thread (a shard of its own for each of the first [`SHARDS`]
//! threads that wait): a wait writes its own thread's lock and counts, never a lock every
//! receiving thread of the node writes. The net check, once a tick, reads every shard.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use lnd::Later;
use lnet::Net;
use rustc_hash::FxHashMap;

/// Shards of the counts: more than a node's receiving threads (one per CPT, one per
/// core by default), so that each has one of its own.
const SHARDS: usize = 64;

/// Threads that asked for their shard so far.
static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard.
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The shard of the calling thread.
fn shard() -> usize {
    SHARD
        .try_with(|s| {
            s.get().unwrap_or_else(|| {
                let i = THREADS.fetch_add(1, Relaxed) % SHARDS;
                s.set(Some(i));
                i
            })
        })
        .unwrap_or(0)
}

/// Waits under way, per local net. See the module documentation.
#[derive(Debug)]
pub(crate) struct Held {
    shards: Box<[Mutex<FxHashMap<Net, usize>>]>,
}

impl Default for Held {
    fn default() -> Held {
        Held {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }
}

impl Held {
    /// `wait`, counted for `net` from now until it ends or is dropped (its connection
    /// closed).
    pub(crate) fn wait<'a, T: 'a>(
        &'a self,
        net: Net,
        wait: impl Future<Output = T> + Send + 'a,
    ) -> Later<'a, T> {
        let guard = Guard::new(self, net);
        Box::pin(async move {
            let out = wait.await;
            drop(guard);
            out
        })
    }

    /// The nets with a wait under way now, in order.
    pub(crate) fn nets(&self) -> Vec<Net> {
        let mut out: Vec<Net> = Vec::new();
        for shard in &self.shards {
            let nets = shard.lock().unwrap_or_else(PoisonError::into_inner);
            out.extend(nets.keys());
        }
        out.sort();
        out.dedup();
        out
    }

    /// Counts a wait for `net` in shard `shard` (`up`), or its end.
    fn change(&self, shard: usize, net: Net, up: bool) {
        let Some(shard) = self.shards.get(shard) else {
            return;
        };
        let mut nets = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let n = nets.entry(net).or_default();
        if up {
            *n = n.saturating_add(1);
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                nets.remove(&net);
            }
        }
    }
}

/// One wait, counted while it lives, in the shard of the thread that started it (where
/// it ends, whatever thread drops it).
struct Guard<'a> {
    held: &'a Held,
    shard: usize,
    net: Net,
}

impl<'a> Guard<'a> {
    fn new(held: &'a Held, net: Net) -> Guard<'a> {
        let shard = shard();
        held.change(shard, net, true);
        Guard { held, shard, net }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.held.change(self.shard, self.net, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll, Waker};

    /// Its output if `f` is ready now.
    fn now<T>(f: &mut Later<'_, T>) -> Option<T> {
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        }
    }

    fn net(s: &str) -> Net {
        s.parse().expect("a net")
    }

    #[test]
    fn a_net_is_held_while_one_of_its_waits_lasts() {
        let held = Held::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let mut a = held.wait(net("tcp"), rx);
        let mut b = held.wait(net("o2ib"), async { 1 });
        let c = held.wait(net("tcp"), std::future::pending::<()>());
        assert_eq!(held.nets(), vec![net("tcp"), net("o2ib")]);
        // Ended: its net is no longer held by it.
        assert_eq!(now(&mut b), Some(1));
        assert_eq!(held.nets(), vec![net("tcp")]);
        assert!(now(&mut a).is_none());
        // Dropped before it ended (its connection closed): no longer held either.
        drop(c);
        assert_eq!(held.nets(), vec![net("tcp")]);
        tx.send(5).expect("waiting");
        assert_eq!(now(&mut a), Some(Ok(5)));
        assert!(held.nets().is_empty());
    }

    #[test]
    fn waits_of_several_threads_are_counted_apart_and_read_together() {
        let held = Held::default();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<usize>();
        let held = &held;
        std::thread::scope(|s| {
            // Another thread's wait on tcp1, started there and ended here.
            let other = s.spawn(move || {
                let w = held.wait(net("tcp1"), std::future::pending::<()>());
                started_tx.send(shard()).expect("told");
                go_rx.recv().expect("go");
                w
            });
            let their_shard = started_rx.recv().expect("started");
            assert_ne!(their_shard, shard(), "a shard of its own");
            let mine = held.wait(net("tcp1"), std::future::pending::<()>());
            let _o2ib = held.wait(net("o2ib"), std::future::pending::<()>());
            assert_eq!(held.nets(), vec![net("tcp1"), net("o2ib")]);
            go_tx.send(()).expect("go");
            let theirs = other.join().expect("joined");
            drop(mine);
            assert_eq!(held.nets(), vec![net("tcp1"), net("o2ib")], "theirs lasts");
            drop(theirs);
            assert_eq!(held.nets(), vec![net("o2ib")]);
        });
    }
}
