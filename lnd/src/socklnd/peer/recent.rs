//! The send sides of the peers this thread sent to lately, so that a send reaches its
//! peer without the NI's peer table lock (shared by every thread that sends on the NI)
//! and without hashing.
//!
//! An entry kept here stays right: an NI never drops a peer from its table while it
//! runs, and the send side of a stopped NI's peer refuses sends. Entries are named by
//! the NI's instance number (an NI started later with the same NID is another NI) and
//! the peer.

use std::cell::RefCell;
use std::sync::Arc;

use lnet::ProcessId;

use super::tx::PeerTx;

/// Send sides one thread keeps.
const KEPT: usize = 16;

struct Entry {
    ni: u64,
    peer: ProcessId,
    tx: Arc<PeerTx>,
}

thread_local! {
    static RECENT: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// The send side of peer `peer` of NI instance `ni`, if this thread keeps it.
pub(crate) fn find(ni: u64, peer: &ProcessId) -> Option<Arc<PeerTx>> {
    with(ni, peer, (), |tx, ()| Arc::clone(tx)).ok()
}

/// `f` of the send side of peer `peer` of NI instance `ni` and `x`, where this thread
/// keeps the send side, borrowed: no count of its holders is written (two atomic writes
/// per send). `x` comes back when the thread does not keep it (or when called while `f`
/// runs on this thread, which is not expected).
pub(crate) fn with<T, R>(
    ni: u64,
    peer: &ProcessId,
    x: T,
    f: impl FnOnce(&Arc<PeerTx>, T) -> R,
) -> Result<R, T> {
    RECENT.with(|r| {
        let Ok(r) = r.try_borrow() else {
            return Err(x);
        };
        match r.iter().find(|e| e.ni == ni && e.peer == *peer) {
            Some(e) => Ok(f(&e.tx, x)),
            None => Err(x),
        }
    })
}

/// Keeps `tx` as the send side of peer `peer` of NI instance `ni`, in place of the
/// entry kept longest when the thread keeps [`KEPT`] already.
pub(crate) fn keep(ni: u64, peer: ProcessId, tx: Arc<PeerTx>) {
    let _ = RECENT.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else {
            return;
        };
        if r.iter().any(|e| e.ni == ni && e.peer == peer) {
            return;
        }
        if r.len() >= KEPT {
            r.remove(0);
        }
        r.push(Entry { ni, peer, tx });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use lnet::Nid;

    fn pid(s: &str) -> ProcessId {
        ProcessId::lustre(s.parse::<Nid>().unwrap())
    }

    #[test]
    fn a_kept_peer_is_found_by_its_ni_and_nid_only() {
        let a = pid("10.0.0.1@tcp");
        let tx = Arc::new(PeerTx::new(0, 4));
        assert!(find(1, &a).is_none());
        keep(1, a, Arc::clone(&tx));
        assert!(find(1, &a).is_some_and(|t| Arc::ptr_eq(&t, &tx)));
        // Another NI instance with the same peer, or another peer: not kept.
        assert!(find(2, &a).is_none());
        assert!(find(1, &pid("10.0.0.2@tcp")).is_none());
        // Kept once.
        keep(1, a, Arc::new(PeerTx::new(0, 4)));
        assert!(find(1, &a).is_some_and(|t| Arc::ptr_eq(&t, &tx)));
    }

    #[test]
    fn at_most_kept_entries_and_the_oldest_goes() {
        let first = pid("10.0.1.0@tcp");
        keep(3, first, Arc::new(PeerTx::new(0, 4)));
        for i in 1..=KEPT {
            keep(
                3,
                pid(&format!("10.0.1.{i}@tcp")),
                Arc::new(PeerTx::new(0, 4)),
            );
        }
        assert!(find(3, &first).is_none());
        assert!(find(3, &pid(&format!("10.0.1.{KEPT}@tcp"))).is_some());
        RECENT.with_borrow(|r| assert_eq!(r.len(), KEPT));
    }
}
