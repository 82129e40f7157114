//! `Dense`: the full (`hashtable`) encoding shared by large hashes and sets.
//!
//! Elements live in one dense `Vec` and a SwissTable of `u32` positions
//! indexes them by key. Why not a plain `HashMap`: `SPOP`, `SRANDMEMBER`
//! and `HRANDFIELD` need a uniformly random element in O(1) (a position in
//! the vector), iteration walks contiguous memory, and an index slot is 4
//! bytes instead of a whole element. Removal swaps the last element into
//! the hole, so positions are not stable; `SSCAN`/`HSCAN` therefore iterate
//! in the order of a fixed hash of each key (see [`Dense::scan`]), which a
//! removal or insertion never reorders.

use hashbrown::HashTable;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;

/// An element stored in a [`Dense`] table: it knows its key.
pub trait Keyed {
    fn key(&self) -> &[u8];
}

#[derive(Clone, Default)]
pub struct Dense<E> {
    entries: Vec<E>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

/// The hash that orders a `SCAN` over a table: fixed, so a cursor means the
/// same position for as long as the process lives.
fn scan_hash(key: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(0x5ca7_c0de).hash_one(key)
}

impl<E: Keyed> Dense<E> {
    pub fn with_capacity(n: usize) -> Self {
        Dense {
            entries: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        let h = self.hasher.hash_one(key);
        let entries = &self.entries;
        self.index
            .find(h, |&i| entries[i as usize].key() == key)
            .map(|&i| i as usize)
    }

    pub fn get(&self, key: &[u8]) -> Option<&E> {
        self.position(key).map(|i| &self.entries[i])
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut E> {
        self.position(key).map(|i| &mut self.entries[i])
    }

    /// Adds an element whose key is not present (the caller checked).
    pub fn insert_new(&mut self, e: E) {
        let h = self.hasher.hash_one(e.key());
        let pos = self.entries.len() as u32;
        self.entries.push(e);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index
            .insert_unique(h, pos, |&i| hasher.hash_one(entries[i as usize].key()));
    }

    /// Removes the element with `key`; the last element takes its place.
    pub fn remove(&mut self, key: &[u8]) -> Option<E> {
        let h = self.hasher.hash_one(key);
        let entries = &self.entries;
        let slot = self
            .index
            .find_entry(h, |&i| entries[i as usize].key() == key)
            .ok()?;
        let pos = *slot.get() as usize;
        slot.remove();
        let last = self.entries.len() - 1;
        if pos != last {
            let hl = self.hasher.hash_one(self.entries[last].key());
            let moved = self
                .index
                .find_mut(hl, |&i| i as usize == last)
                .expect("every element is indexed");
            *moved = pos as u32;
        }
        Some(self.entries.swap_remove(pos))
    }

    /// The element at a position in `0..len()` (for random picks).
    pub fn nth(&self, i: usize) -> &E {
        &self.entries[i]
    }

    pub fn iter(&self) -> std::slice::Iter<'_, E> {
        self.entries.iter()
    }

    /// Heap bytes: the element vector and the index.
    pub fn heap_size(&self, element_heap: impl Fn(&E) -> usize) -> usize {
        self.entries.capacity() * std::mem::size_of::<E>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
            + self.entries.iter().map(element_heap).sum::<usize>()
    }

    /// [`Self::heap_size`] with the elements' own heap estimated from at
    /// most `samples` of them, spread evenly (0: all of them), as
    /// `MEMORY USAGE ... SAMPLES` asks.
    pub fn heap_size_sampled(&self, samples: usize, element_heap: impl Fn(&E) -> usize) -> usize {
        let fixed = self.entries.capacity() * std::mem::size_of::<E>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1);
        fixed + sampled_sum(&self.entries, samples, element_heap)
    }

    /// One step of a `SCAN`: visits the elements whose scan hash is at
    /// least `cursor`, the `count` lowest of them (and any sharing the last
    /// one's hash), and returns the next cursor, 0 when done. An element
    /// present for the whole scan is visited exactly once. O(n) time per
    /// call, but memory bounded by the reply: the `count` lowest hashes are
    /// kept in a max-heap of at most `count` entries, not a copy of every
    /// position (a `SSCAN` of a 10 M-member set with `COUNT 10` once took
    /// 160 MB for ten members).
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&E)) -> u64 {
        let count = count.max(1);
        let mut lowest: BinaryHeap<u64> = BinaryHeap::with_capacity(count.min(self.entries.len()));
        for e in &self.entries {
            let h = scan_hash(e.key());
            if h < cursor {
                continue;
            }
            if lowest.len() < count {
                lowest.push(h);
            } else if let Some(mut top) = lowest.peek_mut() {
                if h < *top {
                    *top = h;
                }
            }
        }
        let Some(&bound) = lowest.peek() else {
            return 0;
        };
        let mut beyond = false;
        for e in &self.entries {
            let h = scan_hash(e.key());
            if h >= cursor && h <= bound {
                visit(e);
            } else if h > bound {
                beyond = true;
            }
        }
        if beyond {
            bound + 1
        } else {
            0
        }
    }
}

/// The sum of `f` over `items`, or its estimate from `samples` of them
/// taken at even strides (0, or at least as many as there are: exact).
pub fn sampled_sum<E>(items: &[E], samples: usize, f: impl Fn(&E) -> usize) -> usize {
    let n = items.len();
    if samples == 0 || samples >= n {
        return items.iter().map(f).sum();
    }
    let taken: usize = (0..samples).map(|i| f(&items[i * n / samples])).sum();
    (taken as u128 * n as u128 / samples as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    impl Keyed for Vec<u8> {
        fn key(&self) -> &[u8] {
            self
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_set(ops in proptest::collection::vec((any::<bool>(), 0u16..300), 1..2000)) {
            let mut d: Dense<Vec<u8>> = Dense::default();
            let mut model = BTreeSet::new();
            for (add, k) in ops {
                let key = format!("m{k}").into_bytes();
                if add {
                    if d.get(&key).is_none() {
                        d.insert_new(key.clone());
                    }
                    model.insert(key);
                } else {
                    prop_assert_eq!(d.remove(&key).is_some(), model.remove(&key));
                }
            }
            prop_assert_eq!(d.len(), model.len());
            let all: BTreeSet<Vec<u8>> = d.iter().cloned().collect();
            prop_assert_eq!(&all, &model);
            for (i, k) in model.iter().enumerate() {
                prop_assert_eq!(d.get(k), Some(k));
                let _ = d.nth(i);
            }
            // A scan in small steps visits every element exactly once.
            let mut seen = Vec::new();
            let mut c = 0;
            loop {
                c = d.scan(c, 7, |e| seen.push(e.clone()));
                if c == 0 { break; }
            }
            seen.sort();
            let expect: Vec<Vec<u8>> = model.iter().cloned().collect();
            prop_assert_eq!(seen, expect);
        }
    }
}
