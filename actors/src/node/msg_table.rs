//! The messages in flight, by id, with the most there have been at once (`msgs_max` of
//! `stats show`). Reads go through to the map; [`MsgTable::insert`] keeps the high-water
//! mark.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

/// A map of messages in flight that remembers its largest size.
#[derive(Debug)]
pub(super) struct MsgTable<V> {
    map: HashMap<u64, V>,
    max: usize,
}

impl<V> Default for MsgTable<V> {
    fn default() -> Self {
        MsgTable {
            map: HashMap::new(),
            max: 0,
        }
    }
}

impl<V> MsgTable<V> {
    /// Adds (or replaces) message `id`.
    pub(super) fn insert(&mut self, id: u64, msg: V) -> Option<V> {
        let old = self.map.insert(id, msg);
        self.max = self.max.max(self.map.len());
        old
    }

    /// The most messages there have been at once.
    pub(super) fn max(&self) -> usize {
        self.max
    }
}

impl<V> Deref for MsgTable<V> {
    type Target = HashMap<u64, V>;

    fn deref(&self) -> &HashMap<u64, V> {
        &self.map
    }
}

impl<V> DerefMut for MsgTable<V> {
    fn deref_mut(&mut self) -> &mut HashMap<u64, V> {
        &mut self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_water_mark_stays_when_messages_leave() {
        let mut t = MsgTable::default();
        assert_eq!(t.max(), 0);
        t.insert(1, "a");
        t.insert(2, "b");
        t.insert(2, "c");
        assert_eq!((t.len(), t.max()), (2, 2));
        t.remove(&1);
        t.remove(&2);
        assert_eq!((t.len(), t.max()), (0, 2));
        t.insert(3, "d");
        assert_eq!(t.max(), 2);
    }
}
