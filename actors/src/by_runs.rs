//! Work on items kept in parts behind locks of their own (the shards of the in-flight
//! table, the CPTs' router buffer pools), a run of items of one part under one lock.

/// Calls `f` on each of `items` with the lock of the part `part` names for it held
/// (`lock` takes it; `None`: the item is skipped). A lock is taken once for a run of
/// items of one part, the one before let go first, so that two are never held at once.
pub(crate) fn by_runs<I, G>(
    items: impl IntoIterator<Item = I>,
    part: impl Fn(&I) -> usize,
    lock: impl Fn(usize) -> Option<G>,
    mut f: impl FnMut(&mut G, I),
) {
    let mut locked: Option<(usize, G)> = None;
    for item in items {
        let at = part(&item);
        let guard = match &mut locked {
            Some((held, g)) if *held == at => g,
            _ => {
                locked = None;
                let Some(g) = lock(at) else {
                    continue;
                };
                &mut locked.insert((at, g)).1
            }
        };
        f(guard, item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn one_lock_per_run_and_never_two_at_once() {
        let taken = RefCell::new(Vec::new());
        let held = RefCell::new(0u32);
        let mut seen = Vec::new();
        struct Guard<'a>(&'a RefCell<u32>);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                *self.0.borrow_mut() -= 1;
            }
        }
        by_runs(
            [(1, 'a'), (1, 'b'), (2, 'c'), (9, 'x'), (1, 'd')],
            |(p, _)| *p,
            |p| {
                if p == 9 {
                    return None;
                }
                *held.borrow_mut() += 1;
                assert_eq!(*held.borrow(), 1, "one lock at a time");
                taken.borrow_mut().push(p);
                Some(Guard(&held))
            },
            |_, (_, c)| seen.push(c),
        );
        assert_eq!(*taken.borrow(), [1, 2, 1]);
        assert_eq!(seen, ['a', 'b', 'c', 'd']);
        assert_eq!(*held.borrow(), 0, "every lock let go");
    }
}
