//! What the LNet actor publishes (the forwarding snapshot, the receive policy), as each
//! thread reads it: one plain read of the published pointer per message while it is
//! unchanged, instead of an `ArcSwap` load, which writes shared memory twice (taking a
//! debt slot and paying it back).
//!
//! A thread keeps one value per kind: the last one it read, with a hold on where it is
//! published. A published value replaced, or one of a node gone, stays held by a thread
//! that read it until that thread next reads one of that kind, or ends. A forwarding
//! snapshot holds the local NIs' cells, actor addresses and drivers: a node dropped
//! without stopping its NIs keeps its LNDs that long (stopping an NI empties its
//! driver's slot, so a stopped NI's LND is not kept).

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

use arc_swap::cache::Cache;
use arc_swap::ArcSwap;

/// Where a value is published, shared by the publisher and its readers.
pub(crate) type Published<T> = Arc<ArcSwap<T>>;

/// One thread's copy of one kind of published value.
pub(crate) type Kept<T> = RefCell<Option<Cache<Published<T>, Arc<T>>>>;

/// Calls `f` with the value published at `at` now. The thread's kept copy serves when it
/// is of the same place and still current; otherwise it is replaced. A call made while
/// `f` of the same kind runs on this thread (not expected) loads directly.
pub(crate) fn read<T, R>(
    kept: &'static LocalKey<Kept<T>>,
    at: &Published<T>,
    f: impl FnOnce(&T) -> R,
) -> R {
    kept.with(|k| {
        let Ok(mut k) = k.try_borrow_mut() else {
            return f(&at.load());
        };
        // The kept copy holds its place: no other can be published at the same address
        // while it is kept.
        let same = k
            .as_ref()
            .is_some_and(|c| std::ptr::eq(c.arc_swap(), &**at));
        if !same {
            *k = Some(Cache::new(Arc::clone(at)));
        }
        match k.as_mut() {
            Some(cache) => f(cache.load()),
            None => f(&at.load()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static KEPT: Kept<u32> = const { RefCell::new(None) };
    }

    #[test]
    fn a_new_value_is_read_at_once() {
        let at: Published<u32> = Arc::new(ArcSwap::from_pointee(1));
        assert_eq!(read(&KEPT, &at, |v| *v), 1);
        at.store(Arc::new(2));
        assert_eq!(read(&KEPT, &at, |v| *v), 2);
    }

    #[test]
    fn another_place_is_read_from_itself() {
        let a: Published<u32> = Arc::new(ArcSwap::from_pointee(1));
        let b: Published<u32> = Arc::new(ArcSwap::from_pointee(7));
        assert_eq!(read(&KEPT, &a, |v| *v), 1);
        assert_eq!(read(&KEPT, &b, |v| *v), 7);
        assert_eq!(read(&KEPT, &a, |v| *v), 1);
    }

    #[test]
    fn a_read_within_a_read_loads_directly() {
        let a: Published<u32> = Arc::new(ArcSwap::from_pointee(3));
        let inner = read(&KEPT, &a, |_| read(&KEPT, &a, |v| *v));
        assert_eq!(inner, 3);
    }
}
