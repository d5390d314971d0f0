//! The peer NIs a thread forwarded from and to lately, remembered between messages.
//!
//! A receiving task forwards many messages in a row from the same peer NI (the one at
//! the other end of its connection), most of them to the same next hop. Looking each up
//! for every message takes its shard's read lock, a write to shared memory; instead each
//! thread keeps the last few it looked up (found or not), with the generation of the
//! peer NI maps they were looked up in. Any change to those maps makes a new generation,
//! and a thread that sees one forgets what it kept: an entry is used only while the maps
//! still hold it, and a lookup is then one read of the generation. The Multi-Rail peers
//! of the NIDs the decision reads are kept the same way, with a generation of their own.
//!
//! Beside each peer NI, a thread may keep a value of its own that lives as long as the
//! entry (`X`: the forwarding path keeps the links of the peer NI with the local NIs it
//! sent to it through lately).
//!
//! A peer NI taken out of the maps stays held by a thread that kept it (its cell, and
//! the address of its actor, which has no timer of its own) until that thread next
//! forwards a message, or ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lnet::Nid;

/// Peer NIs a thread keeps.
const KEPT: usize = 8;

/// Numbers the forwarding paths of the process, so that what one thread keeps for one
/// path is never taken for another's.
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

    /// The maps changed: what a thread keeps of them is stale. Called after the change
    /// is made.
    pub(super) fn changed(&self) {
        self.now.fetch_add(1, Ordering::Release);
    }

    /// The generation now; read before any look-up, so that a change after it leaves a
    /// newer generation behind.
    pub(super) fn now(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }
}

/// The peer NIs (each a `P`, with a value `X` of the thread's) one thread keeps, of one
/// path and one generation.
pub(super) struct Recent<P, X = ()> {
    path: u64,
    generation: u64,
    entries: Vec<(Nid, Option<Arc<P>>, X)>,
}

impl<P, X> Default for Recent<P, X> {
    fn default() -> Self {
        Recent {
            path: u64::MAX,
            generation: 0,
            entries: Vec::new(),
        }
    }
}

impl<P, X: Default> Recent<P, X> {
    /// `f` of peer NI `nid`: the one kept if the maps of `generation` have not changed
    /// since it was looked up, otherwise the one `look_up` finds now (then kept, found
    /// or not).
    pub(super) fn with<R>(
        &mut self,
        generation: &Generation,
        nid: &Nid,
        look_up: impl FnOnce() -> Option<Arc<P>>,
        f: impl FnOnce(Option<&Arc<P>>) -> R,
    ) -> R {
        self.with_kept(generation, nid, look_up, |p, _| f(p))
    }

    /// [`Recent::with`], `f` also given the thread's value kept with the entry (a new
    /// one, `X::default()`, when the entry is new).
    pub(super) fn with_kept<R>(
        &mut self,
        generation: &Generation,
        nid: &Nid,
        look_up: impl FnOnce() -> Option<Arc<P>>,
        f: impl FnOnce(Option<&Arc<P>>, &mut X) -> R,
    ) -> R {
        let now = generation.now();
        if self.path != generation.path || self.generation != now {
            self.path = generation.path;
            self.generation = now;
            self.entries.clear();
        }
        if let Some((_, p, x)) = self.entries.iter_mut().find(|(n, _, _)| n == nid) {
            return f(p.as_ref(), x);
        }
        if self.entries.len() >= KEPT {
            self.entries.remove(0);
        }
        let found = look_up();
        let mut x = X::default();
        let r = f(found.as_ref(), &mut x);
        self.entries.push((*nid, found, x));
        r
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;

    use lnet::Nid;

    use super::{Generation, Recent, KEPT};

    fn nid(i: u32) -> Nid {
        format!("10.0.0.{i}@tcp").parse().expect("nid")
    }

    /// Looks `n` up through `r`, counting the lookups in `count`; finds only even ones.
    fn get(r: &mut Recent<u32>, g: &Generation, n: u32, count: &Cell<u32>) -> Option<u32> {
        let look_up = || {
            count.set(count.get() + 1);
            n.is_multiple_of(2).then(|| Arc::new(n))
        };
        r.with(g, &nid(n), look_up, |p| p.map(|p| **p))
    }

    #[test]
    fn a_peer_ni_is_looked_up_again_only_after_the_maps_change() {
        let (g, mut r, count) = (Generation::new(), Recent::default(), Cell::new(0));
        for _ in 0..3 {
            assert_eq!(get(&mut r, &g, 2, &count), Some(2));
            assert_eq!(get(&mut r, &g, 3, &count), None, "not found, and kept so");
        }
        assert_eq!(count.get(), 2);
        g.changed();
        assert_eq!(get(&mut r, &g, 2, &count), Some(2));
        assert_eq!(get(&mut r, &g, 3, &count), None);
        assert_eq!(count.get(), 4, "both looked up again after a change");
    }

    #[test]
    fn a_value_kept_with_an_entry_lives_as_long_as_it() {
        let g = Generation::new();
        let mut r: Recent<u32, u32> = Recent::default();
        let bump = |r: &mut Recent<u32, u32>, n: u32| {
            r.with_kept(
                &g,
                &nid(n),
                || Some(Arc::new(n)),
                |_, x| {
                    *x += 1;
                    *x
                },
            )
        };
        assert_eq!(bump(&mut r, 2), 1, "a new entry's is the default");
        assert_eq!(bump(&mut r, 2), 2);
        assert_eq!(bump(&mut r, 4), 1, "one per entry");
        assert_eq!(r.with(&g, &nid(2), || None, |p| p.map(|p| **p)), Some(2));
        assert_eq!(bump(&mut r, 2), 3, "kept while the entry is");
        g.changed();
        assert_eq!(bump(&mut r, 2), 1, "gone with the entry");
    }

    #[test]
    fn another_path_is_looked_up_and_the_oldest_makes_room() {
        let (g, other) = (Generation::new(), Generation::new());
        let (mut r, count) = (Recent::default(), Cell::new(0));
        get(&mut r, &g, 2, &count);
        get(&mut r, &other, 2, &count);
        assert_eq!(count.get(), 2, "kept per path");
        let kept = u32::try_from(KEPT).expect("small");
        for n in 0..=kept {
            get(&mut r, &other, 100 + n, &count);
        }
        assert_eq!(r.entries.len(), KEPT);
        let before = count.get();
        get(&mut r, &other, 100 + kept, &count);
        assert_eq!(count.get(), before, "the newest is kept");
        get(&mut r, &other, 2, &count);
        assert_eq!(count.get(), before + 1, "the oldest made room");
    }
}
