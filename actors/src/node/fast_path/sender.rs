//! The sender of the messages a thread forwards, remembered between messages.
//!
//! A receiving task forwards many messages in a row from the same peer NI (the one at
//! the other end of its connection). Looking that peer NI up for each of them takes its
//! shard's read lock, a write to shared memory per message; instead each thread keeps
//! the cell of the last sender it looked up, with the generation of the peer NI maps it
//! was found in. Any change to those maps makes a new generation, so a cell is used only
//! while the maps still hold it: a lookup is then one read of the generation.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lnet::Nid;

use crate::ni_cell::NiCell;

/// Numbers the forwarding paths of the process, so that one thread's remembered sender is
/// never taken for another path's.
static PATHS: AtomicU64 = AtomicU64::new(0);

/// The peer NI maps' generation, and which path they belong to.
#[derive(Debug)]
pub(super) struct Generation {
    path: u64,
    now: AtomicU64,
}

impl Generation {
    /// The first generation of a new path's maps.
    pub(super) fn new() -> Generation {
        Generation {
            path: PATHS.fetch_add(1, Ordering::Relaxed),
            now: AtomicU64::new(0),
        }
    }

    /// The maps changed: what a thread remembers of them is stale. Called after the
    /// change is made.
    pub(super) fn changed(&self) {
        self.now.fetch_add(1, Ordering::Release);
    }
}

struct Remembered {
    path: u64,
    generation: u64,
    nid: Nid,
    cell: Arc<NiCell>,
}

thread_local! {
    static LAST: RefCell<Option<Remembered>> = const { RefCell::new(None) };
}

/// `f` of the cell of sender `nid`: the one this thread remembers if the maps of
/// `generation` have not changed since, otherwise the one `look_up` finds (then
/// remembered); `None` if it finds none.
pub(super) fn with_sender<R>(
    generation: &Generation,
    nid: &Nid,
    look_up: impl FnOnce() -> Option<Arc<NiCell>>,
    f: impl FnOnce(&NiCell) -> R,
) -> Option<R> {
    LAST.with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return look_up().map(|cell| f(&cell));
        };
        // Read before the look-up: a change after it leaves a newer generation behind.
        let now = generation.now.load(Ordering::Acquire);
        let fresh = last
            .as_ref()
            .is_some_and(|r| r.path == generation.path && r.generation == now && r.nid == *nid);
        if !fresh {
            *last = look_up().map(|cell| Remembered {
                path: generation.path,
                generation: now,
                nid: *nid,
                cell,
            });
        }
        last.as_ref().map(|r| f(&r.cell))
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;

    use lnet::Nid;

    use super::{with_sender, Generation};
    use crate::ni_cell::NiCell;

    fn nid(s: &str) -> Nid {
        s.parse().expect("nid")
    }

    #[test]
    fn a_sender_is_looked_up_again_only_after_the_maps_change() {
        let g = Generation::new();
        let a = nid("10.0.0.1@tcp");
        let cell = Arc::new(NiCell::new(8));
        let lookups = Cell::new(0);
        let look_up = || {
            lookups.set(lookups.get() + 1);
            Some(Arc::clone(&cell))
        };
        for _ in 0..3 {
            assert_eq!(with_sender(&g, &a, look_up, |c| c.credits()), Some(8));
        }
        assert_eq!(lookups.get(), 1, "remembered while nothing changed");
        g.changed();
        assert_eq!(with_sender(&g, &a, look_up, |c| c.credits()), Some(8));
        assert_eq!(lookups.get(), 2, "looked up again after a change");
    }

    #[test]
    fn another_sender_or_another_path_is_looked_up() {
        let (g, other) = (Generation::new(), Generation::new());
        let (a, b) = (nid("10.0.0.1@tcp"), nid("10.0.0.2@tcp"));
        let lookups = Cell::new(0);
        let look_up = || {
            lookups.set(lookups.get() + 1);
            Some(Arc::new(NiCell::new(4)))
        };
        with_sender(&g, &a, look_up, |_| ());
        with_sender(&g, &b, look_up, |_| ());
        with_sender(&other, &b, look_up, |_| ());
        assert_eq!(lookups.get(), 3);
    }

    #[test]
    fn a_sender_not_found_is_not_remembered() {
        let g = Generation::new();
        let a = nid("10.0.0.1@tcp");
        let lookups = Cell::new(0);
        let none = || {
            lookups.set(lookups.get() + 1);
            None
        };
        assert_eq!(with_sender(&g, &a, none, |_| ()), None);
        assert_eq!(with_sender(&g, &a, none, |_| ()), None);
        assert_eq!(lookups.get(), 2);
    }
}
