//! The forwarding path's sends under way, by the id each was given.
//!
//! An id names where its send is kept: a shard (one short lock each) and a slot in that
//! shard's slab, plus the slot's turn, so that a completion finds its send without
//! hashing and an id whose slot was used again since finds nothing. The caller picks the
//! shard (by the next hop, so that one peer's sends stay in one shard); free slots are
//! used again first, so a shard holds no more slots than it ever had sends at once.
//!
//! Each shard also counts the sends it held that were forwarded in full (count and
//! payload bytes), under the lock a send's removal takes anyway: no write of its own.

use std::sync::{Mutex, MutexGuard, PoisonError};

use lnd::TxId;

use crate::by_runs::by_runs;

/// The top bit of an id the forwarding path made (the LNet actor's ids never reach it).
pub(crate) const FAST_TX: u64 = 1 << 63;
/// Bits of an id naming its shard (the lowest).
const SHARD_BITS: u32 = 4;
/// Shards of the table.
const SHARDS: usize = 1 << SHARD_BITS;
/// Bits of an id naming its slot (above the shard's).
const SLOT_BITS: u32 = 32;
/// Bits of an id giving its slot's turn (above the slot's, below [`FAST_TX`]).
const TURN_MASK: u64 = (1 << (63 - SHARD_BITS - SLOT_BITS)) - 1;

/// Sends under way, each of type `T`, in shards.
pub(crate) struct InFlightTable<T> {
    shards: Vec<Mutex<Shard<T>>>,
}

struct Shard<T> {
    /// Each slot: the id of the send it holds, with the send; `None` when free.
    slots: Vec<Option<(TxId, T)>>,
    /// The free slots, the one freed last at the end.
    free: Vec<u32>,
    /// Sends held.
    len: usize,
    /// The most held at once.
    max: usize,
    /// Turns given out: the next id's turn.
    turns: u64,
    /// Sends taken out forwarded in full.
    forwarded: u64,
    /// Their payload bytes.
    forwarded_bytes: u64,
}

impl<T> Default for Shard<T> {
    fn default() -> Self {
        Shard {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            max: 0,
            turns: 0,
            forwarded: 0,
            forwarded_bytes: 0,
        }
    }
}

impl<T> InFlightTable<T> {
    /// An empty table.
    pub(crate) fn new() -> InFlightTable<T> {
        InFlightTable {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        }
    }

    fn lock(&self, shard: usize) -> Option<MutexGuard<'_, Shard<T>>> {
        self.shards
            .get(shard)
            .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Keeps `item` in the shard `hint` picks; its id. Gives it back only if that shard
    /// has every one of its 2^32 slots taken. Inlined, so that the item is built where
    /// it is kept rather than moved in.
    #[inline]
    pub(crate) fn insert(&self, hint: u64, item: T) -> Result<TxId, T> {
        let shard = usize::try_from(hint % SHARDS as u64).unwrap_or(0);
        let Some(mut s) = self.lock(shard) else {
            return Err(item);
        };
        let slot = match s.free.pop() {
            Some(slot) => slot,
            None => match u32::try_from(s.slots.len()) {
                Ok(slot) => {
                    s.slots.push(None);
                    slot
                }
                Err(_) => return Err(item),
            },
        };
        s.turns = s.turns.wrapping_add(1);
        let id = TxId(
            FAST_TX
                | ((s.turns & TURN_MASK) << (SHARD_BITS + SLOT_BITS))
                | (u64::from(slot) << SHARD_BITS)
                | shard as u64,
        );
        if let Some(entry) = s.slots.get_mut(slot as usize) {
            *entry = Some((id, item));
        }
        s.len += 1;
        s.max = s.max.max(s.len);
        Ok(id)
    }

    /// Sends forwarded in full, and their payload bytes.
    pub(crate) fn forwarded(&self) -> (u64, u64) {
        (0..SHARDS)
            .filter_map(|i| self.lock(i).map(|s| (s.forwarded, s.forwarded_bytes)))
            .fold((0, 0), |(n, b), (sn, sb)| {
                (n.saturating_add(sn), b.saturating_add(sb))
            })
    }

    /// Takes out the send of id `id`, if it is held.
    #[cfg(test)]
    pub(crate) fn remove(&self, id: TxId) -> Option<T> {
        self.remove_counting(id, |_| None).map(|(item, _)| item)
    }

    /// Takes out the send of id `id`, if it is held; `in_full` says whether it was
    /// forwarded in full, with its payload bytes (then counted, under the same lock).
    /// The send, and whether it was.
    pub(crate) fn remove_counting(
        &self,
        id: TxId,
        in_full: impl FnOnce(&T) -> Option<u64>,
    ) -> Option<(T, bool)> {
        let mut s = self.lock(shard_of(id))?;
        let item = s.take(id)?;
        let counted = in_full(&item);
        if let Some(bytes) = counted {
            s.count_forwarded(bytes);
        }
        Some((item, counted.is_some()))
    }

    /// Takes out the send each of `items` names (by `id`), if it is held, and hands both
    /// to `taken`, which says whether it was forwarded in full, with its payload bytes
    /// (then counted). A shard's lock is held for a run of items of that shard, `taken`
    /// called under it: it must not reach the table.
    pub(crate) fn remove_all<K>(
        &self,
        items: Vec<K>,
        id: impl Fn(&K) -> TxId,
        mut taken: impl FnMut(K, T) -> Option<u64>,
    ) {
        by_runs(
            items,
            |k| shard_of(id(k)),
            |shard| self.lock(shard),
            |s, k| {
                let Some(item) = s.take(id(&k)) else {
                    return;
                };
                if let Some(bytes) = taken(k, item) {
                    s.count_forwarded(bytes);
                }
            },
        );
    }

    /// Sends held.
    pub(crate) fn len(&self) -> usize {
        (0..SHARDS)
            .filter_map(|i| self.lock(i).map(|s| s.len))
            .sum()
    }

    /// The most each shard held at once, summed (as the kernel sums the per-CPT
    /// high-water marks into `msgs_max`).
    pub(crate) fn max(&self) -> usize {
        (0..SHARDS)
            .filter_map(|i| self.lock(i).map(|s| s.max))
            .sum()
    }
}

impl<T> Shard<T> {
    /// Counts a send taken out forwarded in full, with its payload bytes.
    fn count_forwarded(&mut self, bytes: u64) {
        self.forwarded = self.forwarded.saturating_add(1);
        self.forwarded_bytes = self.forwarded_bytes.saturating_add(bytes);
    }

    /// Takes out the send of id `id` (of this shard), if it is held.
    fn take(&mut self, id: TxId) -> Option<T> {
        let slot = u32::try_from((id.0 >> SHARD_BITS) & u64::from(u32::MAX)).ok()?;
        let entry = self.slots.get_mut(slot as usize)?;
        if entry.as_ref().is_none_or(|(held, _)| *held != id) {
            return None;
        }
        let (_, item) = entry.take()?;
        self.free.push(slot);
        self.len -= 1;
        Some(item)
    }
}

/// The shard an id names.
fn shard_of(id: TxId) -> usize {
    usize::try_from(id.0 & (SHARDS as u64 - 1)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_found_by_its_id_once() {
        let t = InFlightTable::new();
        let a = t.insert(3, "a").expect("room");
        let b = t.insert(3, "b").expect("room");
        let c = t.insert(20, "c").expect("room");
        assert!([a, b, c].iter().all(|id| id.0 & FAST_TX != 0));
        assert_eq!(t.len(), 3);
        assert_eq!(t.remove(b), Some("b"));
        assert_eq!(t.remove(b), None);
        assert_eq!(t.remove(c), Some("c"));
        assert_eq!(t.len(), 1);
        assert_eq!(t.max(), 3);
        assert_eq!(t.remove(TxId(FAST_TX | 12345)), None);
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.len(), 0);
        assert_eq!(t.forwarded(), (0, 0));
    }

    #[test]
    fn sends_taken_out_in_full_are_counted_with_their_bytes() {
        let t = InFlightTable::new();
        let a = t.insert(3, 10).expect("room");
        let b = t.insert(20, 5).expect("room");
        let c = t.insert(7, 0).expect("room");
        assert_eq!(t.remove_counting(a, |n| Some(*n)), Some((10, true)));
        assert_eq!(t.remove_counting(a, |n| Some(*n)), None, "counted once");
        assert_eq!(t.remove_counting(b, |n| Some(*n)), Some((5, true)));
        assert_eq!(t.remove_counting(c, |_| None), Some((0, false)));
        assert_eq!(t.forwarded(), (2, 15));
    }

    #[test]
    fn sends_taken_out_together_are_each_found_once_and_counted() {
        let t = InFlightTable::new();
        // Two shards, interleaved: a run of each, then one of the first again.
        let a = t.insert(3, 10).expect("room");
        let b = t.insert(3, 20).expect("room");
        let c = t.insert(4, 30).expect("room");
        let d = t.insert(3, 40).expect("room");
        let unknown = TxId(FAST_TX | 12345);
        let items = vec![
            (a, 'a'),
            (b, 'b'),
            (c, 'c'),
            (unknown, 'u'),
            (d, 'd'),
            (a, 'A'),
        ];
        let mut got = Vec::new();
        t.remove_all(
            items,
            |(id, _)| *id,
            |(_, k), n| {
                let in_full = k != 'c';
                got.push((k, n, in_full));
                in_full.then_some(n)
            },
        );
        assert_eq!(
            got,
            vec![
                ('a', 10, true),
                ('b', 20, true),
                ('c', 30, false),
                ('d', 40, true)
            ]
        );
        assert_eq!(t.len(), 0);
        assert_eq!(t.forwarded(), (3, 70));
    }

    #[test]
    fn an_id_whose_slot_was_used_again_finds_nothing() {
        let t = InFlightTable::new();
        let old = t.insert(0, 1).expect("room");
        assert_eq!(t.remove(old), Some(1));
        let new = t.insert(0, 2).expect("room");
        // The same slot, another turn.
        assert_ne!(old, new);
        assert_eq!(t.remove(old), None);
        assert_eq!(t.remove(new), Some(2));
    }

    #[test]
    fn slots_are_used_again_before_the_slab_grows() {
        let t = InFlightTable::new();
        let ids: Vec<TxId> = (0..8).map(|i| t.insert(5, i).expect("room")).collect();
        for id in &ids {
            assert!(t.remove(*id).is_some());
        }
        for i in 0..8 {
            let _ = t.insert(5, i).expect("room");
        }
        let slots = t.lock(5).map_or(0, |s| s.slots.len());
        assert_eq!(slots, 8);
    }
}
