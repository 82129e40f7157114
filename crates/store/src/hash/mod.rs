//! The hash type: field → value maps, in Redis 7.0's two encodings.
//!
//! - **listpack** (small hashes): every field and value, in insertion order,
//!   packed in *one* allocation (`Box<[u8]>`): a varint length then the
//!   bytes, field, value, field, value... A million hashes of ten small
//!   fields are a million such blocks, each holding the bytes and nothing
//!   else (no per-field allocation, no header, no reference count: a
//!   snapshot that must keep a segment as it was copies its small blocks,
//!   bounded by the listpack limits, rather than every hash paying 16 bytes
//!   of counts for the rare snapshot). A change rebuilds the block in one
//!   allocation of the exact new size (or writes in place when the size is
//!   unchanged), as Redis's listpack reallocates on every insert.
//!   Lookups scan it, which is fast at these sizes; insertion order is kept,
//!   so `HGETALL` answers in Redis's order.
//! - **hashtable**: a [`Dense`] table of pairs (O(1) lookup and random
//!   pick), behind an `Arc` so a snapshot's copy of a segment costs a
//!   reference count and a write copies the table only while a snapshot
//!   still holds the old one (`Arc::make_mut`).
//!
//! A hash becomes a hashtable when it would hold more than
//! `hash-max-listpack-entries` fields or a field or value longer than
//! `hash-max-listpack-value` bytes, and never goes back (as in Redis).
//!
//! A hash with field TTLs (Redis 7.4) is [`Hash::Volatile`]: either of the
//! two encodings plus the deadlines ([`expiry`]). The methods here see
//! every field stored, due or not; the `*_live` ones and [`Hash::lookup`]
//! take the time and leave out the fields whose deadline has passed —
//! what a command answers from (removing them is the caller's: it
//! propagates the `HDEL`).

pub mod expiry;

use crate::bytes::SmallBytes;
use crate::dense::{Dense, Keyed};
pub use expiry::{ExpiryIndex, FieldTtls};
use std::sync::Arc;

/// Pairs in a listpack block.
fn listpack_len(b: &[u8]) -> usize {
    let mut n = 0;
    let mut pos = 0;
    while pos < b.len() {
        pos = element(b, pos).1;
        n += 1;
    }
    n / 2
}

/// The thresholds of the compact encoding (server config options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashLimits {
    /// `hash-max-listpack-entries`
    pub max_listpack_entries: usize,
    /// `hash-max-listpack-value`
    pub max_listpack_value: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// One field of a hashtable-encoded hash.
#[derive(Clone, Debug)]
pub struct Pair {
    pub field: SmallBytes,
    pub value: SmallBytes,
}

impl Keyed for Pair {
    fn key(&self) -> &[u8] {
        &self.field
    }
}

/// A hash value: a 16-byte handle to its shared storage (two variants,
/// so the listpack's non-null pointer leaves room for the tag: a third
/// would make every `Value` 8 bytes longer).
#[derive(Clone)]
pub enum Hash {
    Listpack(Box<[u8]>),
    /// A hashtable, or a hash with field TTLs; shared with a snapshot
    /// until written to (`Arc::make_mut`).
    Shared(Arc<Shared>),
}

/// What a [`Hash::Shared`] holds.
#[derive(Clone)]
pub enum Shared {
    Table(Dense<Pair>),
    /// Fields with TTLs: Redis 7.4's `listpackex`, or a hashtable with
    /// field expiry.
    Volatile(Volatile),
}

/// A borrowed view of a hash's encoding.
enum View<'a> {
    Listpack(&'a [u8]),
    Table(&'a Dense<Pair>),
    Volatile(&'a Volatile),
}

/// A hash some of whose fields have (or had) a TTL.
#[derive(Clone)]
pub struct Volatile {
    /// The fields, in one of the two plain encodings (never `Volatile`).
    pub fields: Hash,
    pub ttls: FieldTtls,
}

impl Volatile {
    /// Puts a stored field where Redis 7.4's `listpackex` keeps it: by
    /// deadline, before the first field whose deadline is the same or
    /// later, fields without a deadline last (nothing to do in a table).
    fn place(&mut self, field: &[u8]) {
        let Hash::Listpack(b) = &self.fields else {
            return;
        };
        let Some(slot) = find_in_listpack(b, field) else {
            return;
        };
        let pair = b[slot.field_at..slot.end].to_vec();
        let mut rest: Vec<u8> = Vec::with_capacity(b.len());
        rest.extend_from_slice(&b[..slot.field_at]);
        rest.extend_from_slice(&b[slot.end..]);
        let at = self.ttls.get(field);
        let mut pos = 0;
        let mut insert_at = rest.len();
        if let Some(at) = at {
            while pos < rest.len() {
                let (f, value_at) = element(&rest, pos);
                if self.ttls.get(f).is_none_or(|t| t >= at) {
                    insert_at = pos;
                    break;
                }
                pos = element(&rest, value_at).1;
            }
        }
        let mut block = Vec::with_capacity(b.len());
        block.extend_from_slice(&rest[..insert_at]);
        block.extend_from_slice(&pair);
        block.extend_from_slice(&rest[insert_at..]);
        self.fields = Hash::Listpack(block.into_boxed_slice());
    }
}

/// A field looked up at a given time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldLookup<'a> {
    Live(&'a [u8]),
    /// Stored, but its deadline has passed.
    Expired,
    Missing,
}

impl Default for Hash {
    fn default() -> Self {
        Hash::new()
    }
}

/// Appends the varint length header of an element.
fn header(n: usize) -> ([u8; 10], usize) {
    let mut b = [0u8; 10];
    let mut v = n as u64;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            b[i] = byte;
            return (b, i + 1);
        }
        b[i] = byte | 0x80;
        i += 1;
    }
}

/// Reads the element at `pos`: its bytes and the position after it.
#[inline]
fn element(buf: &[u8], mut pos: usize) -> (&[u8], usize) {
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[pos];
        pos += 1;
        len |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&buf[pos..pos + len], pos + len)
}

/// Where a field sits in a listpack: start of the field, start of its
/// value, end of its value.
struct Slot {
    field_at: usize,
    value_at: usize,
    end: usize,
}

fn find_in_listpack(buf: &[u8], field: &[u8]) -> Option<Slot> {
    let mut pos = 0;
    while pos < buf.len() {
        let (f, value_at) = element(buf, pos);
        let (_, end) = element(buf, value_at);
        if f == field {
            return Some(Slot {
                field_at: pos,
                value_at,
                end,
            });
        }
        pos = end;
    }
    None
}

/// Iterates `(field, value)` pairs.
#[derive(Clone)]
pub enum HashIter<'a> {
    Listpack { buf: &'a [u8], pos: usize },
    Table(std::slice::Iter<'a, Pair>),
}

impl<'a> Iterator for HashIter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashIter::Listpack { buf, pos } => {
                if *pos >= buf.len() {
                    return None;
                }
                let (f, at) = element(buf, *pos);
                let (v, end) = element(buf, at);
                *pos = end;
                Some((f, v))
            }
            HashIter::Table(it) => it.next().map(|p| (&p.field[..], &p.value[..])),
        }
    }
}

impl Hash {
    /// An empty hash (the caller adds at least one field before storing it:
    /// Redis never keeps an empty hash).
    pub fn new() -> Hash {
        Hash::Listpack(Box::from(&[][..]))
    }

    fn view(&self) -> View<'_> {
        match self {
            Hash::Listpack(b) => View::Listpack(b),
            Hash::Shared(s) => match &**s {
                Shared::Table(t) => View::Table(t),
                Shared::Volatile(v) => View::Volatile(v),
            },
        }
    }

    fn table(d: Dense<Pair>) -> Hash {
        Hash::Shared(Arc::new(Shared::Table(d)))
    }

    /// The hash's TTL part, copied first if a snapshot shares it.
    fn volatile_mut(&mut self) -> Option<&mut Volatile> {
        match self {
            Hash::Shared(s) if matches!(**s, Shared::Volatile(_)) => match Arc::make_mut(s) {
                Shared::Volatile(v) => Some(v),
                Shared::Table(_) => unreachable!("checked above"),
            },
            _ => None,
        }
    }

    /// The hashtable, copied first if a snapshot shares it.
    fn table_mut(&mut self) -> Option<&mut Dense<Pair>> {
        match self {
            Hash::Shared(s) if matches!(**s, Shared::Table(_)) => match Arc::make_mut(s) {
                Shared::Table(t) => Some(t),
                Shared::Volatile(_) => unreachable!("checked above"),
            },
            _ => None,
        }
    }

    /// Whether the hash has (or had) field TTLs.
    pub fn is_volatile(&self) -> bool {
        matches!(self.view(), View::Volatile(_))
    }

    /// Builds a hash from pairs without duplicate fields (a snapshot being
    /// loaded), choosing the encoding as Redis does on load.
    pub fn from_pairs<'a>(
        pairs: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])> + Clone,
        limits: HashLimits,
    ) -> Hash {
        let n = pairs.len();
        let compact = n <= limits.max_listpack_entries
            && pairs.clone().all(|(f, v)| {
                f.len() <= limits.max_listpack_value && v.len() <= limits.max_listpack_value
            });
        if compact {
            let mut buf = Vec::new();
            for (f, v) in pairs {
                for e in [f, v] {
                    let (h, hl) = header(e.len());
                    buf.extend_from_slice(&h[..hl]);
                    buf.extend_from_slice(e);
                }
            }
            Hash::Listpack(Box::from(buf))
        } else {
            let mut d = Dense::with_capacity(n);
            for (f, v) in pairs {
                if d.get(f).is_none() {
                    d.insert_new(Pair {
                        field: SmallBytes::new(f),
                        value: SmallBytes::new(v),
                    });
                }
            }
            Hash::table(d)
        }
    }

    /// Fields stored, due ones included (Redis 7.4's `HLEN`).
    pub fn len(&self) -> usize {
        match self.view() {
            View::Listpack(b) => listpack_len(b),
            View::Table(t) => t.len(),
            View::Volatile(v) => v.fields.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self.view() {
            View::Listpack(b) => b.is_empty(),
            View::Table(t) => t.is_empty(),
            View::Volatile(v) => v.fields.is_empty(),
        }
    }

    /// The encoding `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self.view() {
            View::Listpack(_) => "listpack",
            View::Table(_) => "hashtable",
            View::Volatile(v) => match v.fields {
                Hash::Listpack(_) => "listpackex",
                _ => "hashtable",
            },
        }
    }

    /// A stored field's value, due or not.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self.view() {
            View::Listpack(b) => find_in_listpack(b, field).map(|s| element(b, s.value_at).0),
            View::Table(t) => t.get(field).map(|p| &p.value[..]),
            View::Volatile(v) => v.fields.get(field),
        }
    }

    /// A field at `now`: live, stored but due, or missing.
    #[inline]
    pub fn lookup(&self, field: &[u8], now: i64) -> FieldLookup<'_> {
        match self.get(field) {
            None => FieldLookup::Missing,
            Some(_) if self.is_due(field, now) => FieldLookup::Expired,
            Some(v) => FieldLookup::Live(v),
        }
    }

    /// A live field's value at `now`.
    #[inline]
    pub fn get_live(&self, field: &[u8], now: i64) -> Option<&[u8]> {
        match self.lookup(field, now) {
            FieldLookup::Live(v) => Some(v),
            _ => None,
        }
    }

    /// Whether a field's deadline is at or before `now`.
    #[inline]
    pub fn is_due(&self, field: &[u8], now: i64) -> bool {
        match self.view() {
            View::Volatile(v) => v.ttls.get(field).is_some_and(|at| at <= now),
            _ => false,
        }
    }

    /// The field TTLs, when the hash has (or had) any.
    pub fn ttls(&self) -> Option<&FieldTtls> {
        match self.view() {
            View::Volatile(v) => Some(&v.ttls),
            _ => None,
        }
    }

    /// A field's deadline (unix ms), if it has one.
    pub fn field_expire(&self, field: &[u8]) -> Option<i64> {
        self.ttls().and_then(|t| t.get(field))
    }

    /// The soonest field deadline.
    pub fn min_field_expire(&self) -> Option<i64> {
        self.ttls().and_then(|t| t.min())
    }

    /// Makes the hash `Volatile` (no TTL yet) and returns its parts: what
    /// the first `HEXPIRE`-family call does, even when it sets nothing
    /// (7.4's `listpackex` conversion).
    pub fn make_volatile(&mut self) -> &mut Volatile {
        if !self.is_volatile() {
            let fields = std::mem::take(self);
            *self = Hash::Shared(Arc::new(Shared::Volatile(Volatile {
                fields,
                ttls: FieldTtls::default(),
            })));
        }
        self.volatile_mut().expect("made volatile above")
    }

    /// Sets the deadline of a stored field (the hash becomes `Volatile`).
    /// In a listpack the field moves to its place by deadline, as in Redis
    /// 7.4's `listpackex`: before the first field whose deadline is the
    /// same or later, fields without one last.
    pub fn set_field_expire(&mut self, field: &[u8], at: i64) {
        debug_assert!(self.get(field).is_some());
        let v = self.make_volatile();
        v.ttls.set(field, at);
        v.place(field);
    }

    /// Sets a deadline without moving the field: a `listpackex` being
    /// loaded is already in its order.
    pub fn set_field_expire_in_place(&mut self, field: &[u8], at: i64) {
        self.make_volatile().ttls.set(field, at);
    }

    /// Removes a field's deadline (`HPERSIST`; the field goes last in a
    /// listpack); true when it had one.
    pub fn persist_field(&mut self, field: &[u8]) -> bool {
        if self.field_expire(field).is_none() {
            return false;
        }
        let v = self.volatile_mut().expect("a TTL is in a volatile hash");
        v.ttls.remove(field);
        v.place(field);
        true
    }

    /// Sets a stored field's value keeping its deadline and place
    /// (`HINCRBY`, `HINCRBYFLOAT`), or adds it as [`Hash::insert`] does.
    pub fn update_keeping_ttl(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        match self.volatile_mut() {
            Some(v) => v.fields.insert(field, value, limits),
            None => self.insert(field, value, limits),
        }
    }

    /// Fields due at `now`, soonest first, at most `max` (what a lazy or
    /// active expiry removes).
    /// A listpack gives them in its own order (deadline order, ties as
    /// 7.4 places them), so they are removed, propagated and announced as
    /// Redis 7.4 does.
    pub fn due_fields(&self, now: i64, max: usize) -> Vec<SmallBytes> {
        match self.view() {
            View::Volatile(v) => match &v.fields {
                Hash::Listpack(_) => v
                    .fields
                    .iter()
                    .filter(|(f, _)| v.ttls.get(f).is_some_and(|at| at <= now))
                    .take(max)
                    .map(|(f, _)| SmallBytes::new(f))
                    .collect(),
                _ => v
                    .ttls
                    .due(now, max)
                    .into_iter()
                    .map(SmallBytes::new)
                    .collect(),
            },
            _ => Vec::new(),
        }
    }

    /// Live fields at `now`.
    pub fn len_live(&self, now: i64) -> usize {
        match self.view() {
            View::Volatile(v) => v.fields.len() - v.ttls.count_due(now),
            _ => self.len(),
        }
    }

    /// Live `(field, value)` pairs at `now`.
    pub fn iter_live(&self, now: i64) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        let ttls = self.ttls().filter(|t| !t.is_empty());
        self.iter()
            .filter(move |(f, _)| ttls.is_none_or(|t| t.get(f).is_none_or(|at| at > now)))
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Every stored pair, due ones included.
    pub fn iter(&self) -> HashIter<'_> {
        match self.view() {
            View::Listpack(b) => HashIter::Listpack { buf: b, pos: 0 },
            View::Table(t) => HashIter::Table(t.iter()),
            View::Volatile(v) => v.fields.iter(),
        }
    }

    /// The pair at position `i` in `0..len()` (O(1) for a hashtable, a walk
    /// for a listpack).
    pub fn nth(&self, i: usize) -> (&[u8], &[u8]) {
        match self.view() {
            View::Listpack(_) => self.iter().nth(i).expect("index within len"),
            View::Table(t) => {
                let p = t.nth(i);
                (&p.field, &p.value)
            }
            View::Volatile(v) => v.fields.nth(i),
        }
    }

    /// Converts to the hashtable encoding (never back).
    fn convert(&mut self) {
        if let Hash::Listpack(_) = self {
            let mut d = Dense::with_capacity(self.len() + 1);
            for (f, v) in self.iter() {
                d.insert_new(Pair {
                    field: SmallBytes::new(f),
                    value: SmallBytes::new(v),
                });
            }
            *self = Hash::table(d);
        }
    }

    /// Sets `field` to `value` (dropping its TTL). Returns true when the
    /// field is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        if let Some(v) = self.volatile_mut() {
            // A field losing its deadline goes last in a listpack (7.4).
            if v.ttls.remove(field) && matches!(v.fields, Hash::Listpack(_)) {
                v.fields.remove(field);
                v.fields.insert(field, value, limits);
                return false;
            }
            return v.fields.insert(field, value, limits);
        }
        if let Hash::Listpack(b) = self {
            if field.len() > limits.max_listpack_value || value.len() > limits.max_listpack_value {
                self.convert();
            } else {
                let (vh, vhl) = header(value.len());
                match find_in_listpack(b, field) {
                    Some(s) => {
                        let old_len = s.end - s.value_at;
                        if old_len == vhl + value.len() {
                            b[s.value_at + vhl..s.end].copy_from_slice(value);
                            return false;
                        }
                        let rebuilt: Box<[u8]> = b[..s.value_at]
                            .iter()
                            .chain(&vh[..vhl])
                            .chain(value)
                            .chain(&b[s.end..])
                            .copied()
                            .collect();
                        *b = rebuilt;
                        return false;
                    }
                    None => {
                        if self.len() < limits.max_listpack_entries {
                            let Hash::Listpack(b) = self else {
                                unreachable!()
                            };
                            let (fh, fhl) = header(field.len());
                            let rebuilt: Box<[u8]> = b
                                .iter()
                                .chain(&fh[..fhl])
                                .chain(field)
                                .chain(&vh[..vhl])
                                .chain(value)
                                .copied()
                                .collect();
                            *b = rebuilt;
                            return true;
                        }
                        self.convert();
                    }
                }
            }
        }
        let t = self.table_mut().expect("converted above");
        match t.get_mut(field) {
            Some(p) => {
                p.value = SmallBytes::new(value);
                false
            }
            None => {
                t.insert_new(Pair {
                    field: SmallBytes::new(field),
                    value: SmallBytes::new(value),
                });
                true
            }
        }
    }

    /// A new hash holding `pairs` (`HSET` of a missing key). When they make
    /// a listpack of distinct fields, the block is allocated once at its
    /// exact size and written in place: no scratch buffer, no empty hash
    /// first. Returns the hash and its number of fields.
    pub fn from_new_pairs<'a>(
        pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
        limits: HashLimits,
    ) -> (Hash, usize) {
        let n = pairs.clone().count();
        let fits = n <= limits.max_listpack_entries
            && pairs.clone().all(|(f, v)| {
                f.len() <= limits.max_listpack_value && v.len() <= limits.max_listpack_value
            });
        let distinct = || {
            pairs
                .clone()
                .enumerate()
                .all(|(i, (f, _))| pairs.clone().take(i).all(|(g, _)| g != f))
        };
        if !fits || !distinct() {
            let mut h = Hash::new();
            let added = h.insert_many(pairs, limits);
            return (h, added);
        }
        let size: usize = pairs
            .clone()
            .map(|(f, v)| header(f.len()).1 + f.len() + header(v.len()).1 + v.len())
            .sum();
        let mut block: Box<[u8]> = vec![0u8; size].into_boxed_slice();
        let out = &mut block[..];
        let mut at = 0;
        for (f, v) in pairs {
            for e in [f, v] {
                let (h, hl) = header(e.len());
                out[at..at + hl].copy_from_slice(&h[..hl]);
                at += hl;
                out[at..at + e.len()].copy_from_slice(e);
                at += e.len();
            }
        }
        (Hash::Listpack(block), n)
    }

    /// Sets several pairs (`HSET` with many fields): a listpack is rebuilt
    /// once for the whole command, not once per field, so loading a hash
    /// costs one allocation of its final size. Returns the new fields.
    pub fn insert_many<'a>(
        &mut self,
        pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
        limits: HashLimits,
    ) -> usize {
        if self.is_volatile() {
            return pairs.map(|(f, v)| self.insert(f, v, limits) as usize).sum();
        }
        let fits = pairs.clone().all(|(f, v)| {
            f.len() <= limits.max_listpack_value && v.len() <= limits.max_listpack_value
        });
        let Hash::Listpack(b) = self else {
            return pairs.map(|(f, v)| self.insert(f, v, limits) as usize).sum();
        };
        if !fits || pairs.clone().nth(1).is_none() {
            return pairs.map(|(f, v)| self.insert(f, v, limits) as usize).sum();
        }
        // Sized for the worst case (every field new, 2-byte headers): the
        // scratch never regrows.
        let extra: usize = pairs.clone().map(|(f, v)| f.len() + v.len() + 4).sum();
        let mut buf = Vec::with_capacity(b.len() + extra);
        buf.extend_from_slice(b);
        let mut len = listpack_len(b);
        let mut added = 0;
        for (f, v) in pairs {
            let (vh, vhl) = header(v.len());
            match find_in_listpack(&buf, f) {
                Some(slot) => {
                    buf.splice(slot.value_at..slot.end, vh[..vhl].iter().chain(v).copied());
                }
                None => {
                    let (fh, fhl) = header(f.len());
                    buf.extend_from_slice(&fh[..fhl]);
                    buf.extend_from_slice(f);
                    buf.extend_from_slice(&vh[..vhl]);
                    buf.extend_from_slice(v);
                    added += 1;
                    len += 1;
                }
            }
        }
        *b = Box::from(&buf[..]);
        if len > limits.max_listpack_entries {
            self.convert();
        }
        added
    }

    /// Removes `field`. Returns true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(b) => match find_in_listpack(b, field) {
                Some(s) => {
                    let rebuilt: Box<[u8]> =
                        b[..s.field_at].iter().chain(&b[s.end..]).copied().collect();
                    *b = rebuilt;
                    true
                }
                None => false,
            },
            Hash::Shared(s) => {
                // Nothing copied from a snapshot for a field not there
                // (unshared, the removal's own lookup is the only one).
                if Arc::get_mut(s).is_none() && self.get(field).is_none() {
                    return false;
                }
                if let Some(v) = self.volatile_mut() {
                    v.ttls.remove(field);
                    return v.fields.remove(field);
                }
                let t = self
                    .table_mut()
                    .expect("a shared hash is a table or volatile");
                t.remove(field).is_some()
            }
        }
    }

    /// One `HSCAN` step: a listpack is returned whole (cursor 0), as Redis
    /// does; a hashtable goes `count` fields at a time.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        match self.view() {
            View::Listpack(_) => {
                for (f, v) in self.iter() {
                    visit(f, v);
                }
                0
            }
            View::Table(t) => t.scan(cursor, count, |p| visit(&p.field, &p.value)),
            View::Volatile(v) => v.fields.scan(cursor, count, visit),
        }
    }

    /// Heap bytes owned (for memory accounting): the shared block with its
    /// two reference counts.
    pub fn heap_size(&self) -> usize {
        match self.view() {
            View::Listpack(b) => b.len(),
            View::Table(t) => {
                16 + std::mem::size_of::<Dense<Pair>>()
                    + t.heap_size(|p| p.field.heap_size() + p.value.heap_size())
            }
            View::Volatile(v) => {
                16 + std::mem::size_of::<Volatile>() + v.fields.heap_size() + v.ttls.heap_size()
            }
        }
    }
}

impl Hash {
    /// [`Self::heap_size`], the fields and values of a table sampled
    /// (`MEMORY USAGE ... SAMPLES`; 0: all).
    pub fn heap_size_sampled(&self, samples: usize) -> usize {
        match self.view() {
            View::Listpack(b) => b.len(),
            View::Table(t) => {
                16 + std::mem::size_of::<Dense<Pair>>()
                    + t.heap_size_sampled(samples, |p| p.field.heap_size() + p.value.heap_size())
            }
            View::Volatile(v) => {
                16 + std::mem::size_of::<Volatile>()
                    + v.fields.heap_size_sampled(samples)
                    + v.ttls.heap_size()
            }
        }
    }
}

impl PartialEq for Hash {
    /// Same fields with the same values and TTLs, whatever the order or
    /// encoding.
    fn eq(&self, o: &Hash) -> bool {
        self.len() == o.len()
            && self
                .iter()
                .all(|(f, v)| o.get(f) == Some(v) && self.field_expire(f) == o.field_expire(f))
    }
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const SMALL: HashLimits = HashLimits {
        max_listpack_entries: 8,
        max_listpack_value: 10,
    };

    #[test]
    fn handle_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Hash>(), 16);
    }

    #[test]
    fn keeps_insertion_order_and_converts_past_the_limits() {
        let mut h = Hash::new();
        assert!(h.insert(b"b", b"1", SMALL));
        assert!(h.insert(b"a", b"2", SMALL));
        assert!(!h.insert(b"b", b"3", SMALL));
        assert!(!h.insert(b"b", b"long value", SMALL));
        let order: Vec<&[u8]> = h.iter().map(|(f, _)| f).collect();
        assert_eq!(order, vec![&b"b"[..], b"a"]);
        assert_eq!(h.encoding(), "listpack");
        assert!(h.insert(b"c", &[b'x'; 11], SMALL));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"c"), Some(&[b'x'; 11][..]));
        assert!(h.remove(b"c"));
        assert_eq!(h.encoding(), "hashtable", "never converts back");
        let mut h = Hash::new();
        for i in 0..8 {
            h.insert(format!("f{i}").as_bytes(), b"v", SMALL);
        }
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"f9", b"v", SMALL);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), 9);
    }

    fn keys(h: &Hash) -> Vec<&[u8]> {
        h.iter().map(|(f, _)| f).collect()
    }

    /// The order Redis 7.4.1's `listpackex` keeps (observed on the binary):
    /// by deadline, a new deadline before the fields with the same one,
    /// fields without one last in their order; a field losing its TTL
    /// (`HSET`, `HPERSIST`) goes last; `HINCRBY` keeps it where it is.
    #[test]
    fn listpackex_orders_fields_as_redis_7_4() {
        let mut h = Hash::new();
        for f in ["a", "b", "c", "d", "e"] {
            h.insert(f.as_bytes(), b"1", SMALL);
        }
        h.set_field_expire(b"c", 300);
        assert_eq!(keys(&h), [&b"c"[..], b"a", b"b", b"d", b"e"]);
        assert_eq!(h.encoding(), "listpackex");
        h.set_field_expire(b"e", 100);
        h.set_field_expire(b"a", 300);
        assert_eq!(keys(&h), [&b"e"[..], b"a", b"c", b"b", b"d"]);
        assert!(!h.insert(b"c", b"9", SMALL));
        assert_eq!(keys(&h), [&b"e"[..], b"a", b"b", b"d", b"c"]);
        assert_eq!(h.field_expire(b"c"), None);
        assert!(h.persist_field(b"e"));
        assert!(!h.persist_field(b"e"));
        assert_eq!(keys(&h), [&b"a"[..], b"b", b"d", b"c", b"e"]);
        h.update_keeping_ttl(b"a", b"2", SMALL);
        assert_eq!(h.field_expire(b"a"), Some(300));
        assert_eq!(keys(&h)[0], b"a");
        assert_eq!(h.encoding(), "listpackex");
        // Due fields: seen by the raw view, left out of the live one.
        assert_eq!(h.lookup(b"a", 299), FieldLookup::Live(b"2"));
        assert_eq!(h.lookup(b"a", 300), FieldLookup::Expired);
        assert_eq!(h.lookup(b"zz", 300), FieldLookup::Missing);
        assert_eq!(h.len_live(300), 4);
        assert_eq!(h.iter_live(300).count(), 4);
        assert_eq!(h.due_fields(1000, 10).len(), 1);
        // Past the limits the TTLs stay with the fields.
        h.insert(b"long", &[b'x'; 11], SMALL);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.field_expire(b"a"), Some(300));
        assert!(h.remove(b"a"));
        assert_eq!(h.min_field_expire(), None);
    }

    #[test]
    fn long_elements_use_multi_byte_headers() {
        let big = HashLimits {
            max_listpack_entries: 128,
            max_listpack_value: 100_000,
        };
        let mut h = Hash::new();
        let v = vec![7u8; 20_000];
        h.insert(b"f", &v, big);
        h.insert(&[1u8; 200], b"x", big);
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.get(b"f"), Some(&v[..]));
        assert_eq!(h.get(&[1u8; 200]), Some(&b"x"[..]));
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn a_shared_listpack_is_not_changed_in_place() {
        let mut h = Hash::new();
        h.insert(b"f", b"1", SMALL);
        let snapshot = h.clone();
        h.insert(b"f", b"2", SMALL);
        assert_eq!(snapshot.get(b"f"), Some(&b"1"[..]));
        assert_eq!(h.get(b"f"), Some(&b"2"[..]));
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..3, 0u8..20, 0usize..14), 1..300)) {
            let mut h = Hash::new();
            let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            let mut order: Vec<Vec<u8>> = Vec::new();
            let mut converted = false;
            for (op, f, vlen) in ops {
                let field = format!("f{f}").into_bytes();
                match op {
                    0 | 1 => {
                        let value = vec![b'a' + f; vlen];
                        let new = !model.contains_key(&field);
                        let got = if op == 0 {
                            h.insert(&field, &value, SMALL)
                        } else {
                            // The batched form, with the pair twice (the
                            // last value wins, the field counts once).
                            let pairs = [(&field[..], &b"x"[..]), (&field[..], &value[..])];
                            h.insert_many(pairs.iter().copied(), SMALL) == 1
                        };
                        prop_assert_eq!(got, new);
                        if new { order.push(field.clone()); }
                        model.insert(field, value);
                        if vlen > 10 || model.len() > 8 { converted = true; }
                    }
                    _ => {
                        prop_assert_eq!(h.remove(&field), model.remove(&field).is_some());
                        order.retain(|x| x != &field);
                    }
                }
                prop_assert_eq!(h.encoding() == "hashtable", converted);
            }
            prop_assert_eq!(h.len(), model.len());
            for (k, v) in &model {
                prop_assert_eq!(h.get(k), Some(&v[..]));
            }
            if !converted {
                let got: Vec<Vec<u8>> = h.iter().map(|(f, _)| f.to_vec()).collect();
                prop_assert_eq!(got, order);
            }
            let mut seen = 0;
            let mut c = 0;
            loop {
                c = h.scan(c, 3, |f, v| { seen += 1; assert_eq!(model.get(f).map(|x| &x[..]), Some(v)); });
                if c == 0 { break; }
            }
            prop_assert_eq!(seen, model.len());
            let pairs: Vec<(&[u8], &[u8])> = h.iter().collect();
            let (fresh, n) = Hash::from_new_pairs(pairs.iter().copied(), SMALL);
            prop_assert_eq!(n, model.len());
            prop_assert_eq!(&fresh, &h);
            let rebuilt = Hash::from_pairs(
                h.iter().collect::<Vec<_>>().into_iter(),
                SMALL,
            );
            prop_assert_eq!(&rebuilt, &h);
        }
    }
}
