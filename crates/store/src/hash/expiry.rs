//! Hash-field expiration (Redis 7.4's `HEXPIRE` family): the TTLs of a
//! hash's fields, and each database's index of the hashes that have any.
//!
//! A hash none of whose fields ever had a TTL pays nothing: its handle is a
//! listpack or a table as before. The first field TTL turns it into
//! [`Hash::Volatile`](super::Hash::Volatile): the same fields, plus
//! [`FieldTtls`] — each TTL'd field's deadline by field (O(1) checks on
//! every read) and by time (the soonest in O(log n), the due ones in
//! order). Like Redis 7.4's `listpackex`, a hash keeps that form when its
//! last TTL goes (`HPERSIST`), so `OBJECT ENCODING` answers as 7.4 does.
//!
//! [`ExpiryIndex`] is what the active cycle walks: per database, every
//! hash holding a field TTL, by a deadline no later than its soonest
//! field's. It may be early (a field's TTL removed or pushed back since),
//! never late: the cycle re-files a hash it finds early. The database keeps
//! it exact as to *which* keys are in it — a key leaves it when the key is
//! removed, replaced or expired — so it never outgrows the keyspace.

use crate::bytes::SmallBytes;
use std::collections::{BTreeSet, HashMap};

/// Deadlines kept in a plain vector up to this many (a linear scan, as a
/// listpack's); past it, two maps.
const SMALL_MAX: usize = 128;

/// The deadlines (unix ms) of a hash's fields that have one.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldTtls {
    /// By deadline, a new one before those equal to it (the order Redis
    /// 7.4's `listpackex` keeps its fields in): 24 bytes a field.
    Small(Vec<(SmallBytes, i64)>),
    /// By field (O(1) checks on every read) and by time (the soonest, and
    /// the due ones in order).
    Large {
        by_field: HashMap<SmallBytes, i64, foldhash::fast::RandomState>,
        by_time: BTreeSet<(i64, SmallBytes)>,
    },
}

impl Default for FieldTtls {
    fn default() -> Self {
        FieldTtls::Small(Vec::new())
    }
}

impl FieldTtls {
    pub fn len(&self) -> usize {
        match self {
            FieldTtls::Small(v) => v.len(),
            FieldTtls::Large { by_field, .. } => by_field.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, field: &[u8]) -> Option<i64> {
        match self {
            FieldTtls::Small(v) => v.iter().find(|(f, _)| &f[..] == field).map(|(_, at)| *at),
            FieldTtls::Large { by_field, .. } => by_field.get(field).copied(),
        }
    }

    /// Sets (or moves) a field's deadline.
    pub fn set(&mut self, field: &[u8], at: i64) {
        self.remove(field);
        if let FieldTtls::Small(v) = self {
            if v.len() < SMALL_MAX {
                let pos = v.iter().position(|(_, t)| *t >= at).unwrap_or(v.len());
                // Exact size: no growth slack kept per hash.
                v.reserve_exact(1);
                v.insert(pos, (SmallBytes::new(field), at));
                return;
            }
            let mut by_field = HashMap::with_capacity_and_hasher(v.len() + 1, Default::default());
            let mut by_time = BTreeSet::new();
            for (f, t) in v.drain(..) {
                by_field.insert(f.clone(), t);
                by_time.insert((t, f));
            }
            *self = FieldTtls::Large { by_field, by_time };
        }
        let FieldTtls::Large { by_field, by_time } = self else {
            unreachable!("made large above")
        };
        let key = SmallBytes::new(field);
        by_field.insert(key.clone(), at);
        by_time.insert((at, key));
    }

    /// Removes a field's deadline; true when it had one.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            FieldTtls::Small(v) => match v.iter().position(|(f, _)| &f[..] == field) {
                Some(i) => {
                    v.remove(i);
                    v.shrink_to_fit();
                    true
                }
                None => false,
            },
            FieldTtls::Large { by_field, by_time } => match by_field.remove_entry(field) {
                Some((k, at)) => {
                    by_time.remove(&(at, k));
                    true
                }
                None => false,
            },
        }
    }

    /// The soonest deadline.
    pub fn min(&self) -> Option<i64> {
        match self {
            FieldTtls::Small(v) => v.first().map(|(_, at)| *at),
            FieldTtls::Large { by_time, .. } => by_time.first().map(|(at, _)| *at),
        }
    }

    /// Fields whose deadline is at or before `now`, soonest first, at most `max`.
    pub fn due(&self, now: i64, max: usize) -> Vec<&[u8]> {
        match self {
            FieldTtls::Small(v) => v
                .iter()
                .take_while(|(_, at)| *at <= now)
                .take(max)
                .map(|(f, _)| &f[..])
                .collect(),
            FieldTtls::Large { by_time, .. } => by_time
                .iter()
                .take_while(|(at, _)| *at <= now)
                .take(max)
                .map(|(_, f)| &f[..])
                .collect(),
        }
    }

    /// How many fields are due at `now` (O(due)).
    pub fn count_due(&self, now: i64) -> usize {
        match self {
            FieldTtls::Small(v) => v.iter().take_while(|(_, at)| *at <= now).count(),
            FieldTtls::Large { by_time, .. } => {
                by_time.iter().take_while(|(at, _)| *at <= now).count()
            }
        }
    }

    /// Heap bytes (approximate for the maps: their nodes and the field
    /// copies).
    pub fn heap_size(&self) -> usize {
        match self {
            FieldTtls::Small(v) => {
                v.capacity() * std::mem::size_of::<(SmallBytes, i64)>()
                    + v.iter().map(|(f, _)| f.heap_size()).sum::<usize>()
            }
            FieldTtls::Large { by_field, .. } => by_field
                .keys()
                .map(|f| 2 * f.heap_size() + 24 + 48)
                .sum::<usize>(),
        }
    }
}

/// Per database: the hashes with field TTLs, by (a lower bound of) their
/// soonest deadline.
#[derive(Default, Debug)]
pub struct ExpiryIndex {
    by_time: BTreeSet<(i64, SmallBytes)>,
    filed: HashMap<SmallBytes, i64, foldhash::fast::RandomState>,
}

impl ExpiryIndex {
    pub fn len(&self) -> usize {
        self.filed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.filed.is_empty()
    }

    /// Files `key` to be looked at by `at` (kept when it already is by then).
    pub fn file(&mut self, key: &[u8], at: i64) {
        match self.filed.get_mut(key) {
            Some(old) if *old <= at => {}
            Some(old) => {
                let k = SmallBytes::new(key);
                self.by_time.remove(&(*old, k.clone()));
                *old = at;
                self.by_time.insert((at, k));
            }
            None => {
                let k = SmallBytes::new(key);
                self.filed.insert(k.clone(), at);
                self.by_time.insert((at, k));
            }
        }
    }

    /// Drops `key` (removed, replaced or expired).
    pub fn forget(&mut self, key: &[u8]) {
        if let Some((k, at)) = self.filed.remove_entry(key) {
            self.by_time.remove(&(at, k));
        }
    }

    /// Takes out the key filed soonest when its time is at or before `now`.
    pub fn pop_due(&mut self, now: i64) -> Option<SmallBytes> {
        let (at, _) = self.by_time.first()?;
        if *at > now {
            return None;
        }
        let (_, k) = self.by_time.pop_first()?;
        self.filed.remove(&k[..]);
        Some(k)
    }

    /// The keys filed (no order).
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.filed.keys().map(|k| &k[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_by_field_and_time() {
        let mut t = FieldTtls::default();
        t.set(b"a", 30);
        t.set(b"b", 10);
        t.set(b"c", 20);
        t.set(b"a", 5);
        assert_eq!(t.min(), Some(5));
        assert_eq!(t.due(20, 10), vec![&b"a"[..], b"b", b"c"]);
        assert_eq!(t.due(20, 2).len(), 2);
        assert_eq!(t.count_due(10), 2);
        assert!(t.remove(b"a"));
        assert!(!t.remove(b"a"));
        assert_eq!(t.min(), Some(10));
        assert_eq!(t.get(b"c"), Some(20));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn many_deadlines_move_to_the_maps_and_stay_right() {
        let mut t = FieldTtls::default();
        for i in 0..300i64 {
            t.set(format!("f{i}").as_bytes(), 1000 - i);
        }
        assert!(matches!(t, FieldTtls::Large { .. }));
        assert_eq!(t.len(), 300);
        assert_eq!(t.min(), Some(701));
        assert_eq!(t.get(b"f0"), Some(1000));
        assert_eq!(
            t.due(705, 100),
            vec![&b"f299"[..], b"f298", b"f297", b"f296", b"f295"]
        );
        assert!(t.remove(b"f299"));
        assert_eq!(t.min(), Some(702));
    }

    #[test]
    fn index_files_once_and_pops_in_order() {
        let mut ix = ExpiryIndex::default();
        ix.file(b"k1", 50);
        ix.file(b"k2", 10);
        ix.file(b"k1", 70); // later: kept at 50
        ix.file(b"k1", 20); // earlier: moved
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.pop_due(5), None);
        assert_eq!(ix.pop_due(100).as_deref(), Some(&b"k2"[..]));
        ix.forget(b"k1");
        assert!(ix.is_empty());
        assert_eq!(ix.pop_due(100), None);
    }
}
