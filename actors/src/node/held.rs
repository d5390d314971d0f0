//! The received messages this node holds while an LND waits on it, per local net they came
//! on: a header waiting for a router buffer, a message waiting for its next hop's credit
//! or LND queue, a full channel to the LNet actor, a receive delay rule.
//!
//! The net check counts such a net as heard for as long as a wait lasts: the node has what
//! the peer sent, and the peer may be unable to send anything more, even the answer to a
//! probe, until the node reads on (a socklnd connection whose reader waits leaves
//! everything the peer sent after that message unread). Only waits are counted, never a message that goes straight through:
//! nothing is written per message on the fast path.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use lnd::Later;
use lnet::Net;
use rustc_hash::FxHashMap;

/// Waits under way, per local net. See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Held {
    nets: Mutex<FxHashMap<Net, usize>>,
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
        let nets = self.nets.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<Net> = nets.keys().copied().collect();
        out.sort();
        out
    }

    fn change(&self, net: Net, up: bool) {
        let mut nets = self.nets.lock().unwrap_or_else(PoisonError::into_inner);
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

/// One wait, counted while it lives.
struct Guard<'a> {
    held: &'a Held,
    net: Net,
}

impl<'a> Guard<'a> {
    fn new(held: &'a Held, net: Net) -> Guard<'a> {
        held.change(net, true);
        Guard { held, net }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.held.change(self.net, false);
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
}
