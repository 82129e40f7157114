//! One logical database: a segmented hash table of keys → entries.
//!
//! The table is split into segments by extendible hashing: a directory of
//! `2^global_depth` slots points to segments, each covering a contiguous
//! range of hash prefixes and holding at most [`SEGMENT_MAX`] entries in its
//! own SwissTable. When a segment fills up it splits in two, moving only its
//! own entries, so the database grows without a stop-the-world rehash of all
//! its keys. The segment is also the unit of `SCAN` cursors (a cursor is a
//! position in the 32-bit prefix space, which stays valid across splits) and
//! of snapshot versioning.
//!
//! Bits used: the SwissTable takes its control tag from the hash's top 7
//! bits and its bucket from the low bits; the directory takes the bits just
//! below the top 7, so neither correlates with the other.

use crate::bytes::SmallBytes;
use crate::value::{Value, ValueRef};

use hashbrown::HashTable;
use rand::Rng;
use std::hash::BuildHasher;

/// Entries per segment before it splits: 7/8 of 4096 buckets, so a segment
/// table never grows past 4096 buckets.
pub const SEGMENT_MAX: usize = 3584;

/// `expire_at` of a key without a time to live.
pub const NO_EXPIRE: i64 = i64::MIN;

const PREFIX_BITS: u32 = 32;

/// Key and string value bytes an entry holds inline.
pub const PACKED_CAP: usize = 48;

/// A key with its value, expiry (unix ms) and access clock: 64 bytes, one
/// cache line.
///
/// A key and a string value that fit together in 48 bytes (a 16-byte key
/// and a 32-byte value, say) are packed inside the entry: reading or
/// writing them touches that one line and allocates nothing. Anything
/// larger, integers and (later) collections keep key and value apart.
///
/// Aligned to the line, so a lookup's one miss on the entry brings it
/// whole (unaligned, seven in eight entries straddle two lines).
#[derive(Debug, Clone)]
#[repr(align(64))]
pub struct Entry {
    pub expire_at: i64,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    Packed {
        lru: u32,
        klen: u8,
        vlen: u8,
        data: [u8; PACKED_CAP],
    },
    Split {
        lru: u32,
        key: SmallBytes,
        value: Value,
    },
}

/// A string value's shared bytes ([`Entry::shared_str`]).
#[derive(Debug, Clone)]
pub enum SharedStr {
    Slice(std::sync::Arc<[u8]>),
    Vec(std::sync::Arc<Vec<u8>>),
}

impl AsRef<[u8]> for SharedStr {
    fn as_ref(&self) -> &[u8] {
        match self {
            SharedStr::Slice(b) => b,
            SharedStr::Vec(b) => b,
        }
    }
}

impl Entry {
    /// An entry holding `value` (packed when it is a short string).
    pub fn new(key: &[u8], value: Value, expire_at: i64, lru: u32) -> Entry {
        let body = match value {
            Value::Str(s) if key.len() + s.len() <= PACKED_CAP => Self::packed(key, &s, lru),
            value => Body::Split {
                lru,
                key: SmallBytes::new(key),
                value,
            },
        };
        Entry { expire_at, body }
    }

    /// An entry holding a string given as bytes, stored as Redis would
    /// (an integer when canonical), without an intermediate copy.
    pub fn new_str(key: &[u8], s: &[u8], expire_at: i64, lru: u32) -> Entry {
        let body = if key.len() + s.len() <= PACKED_CAP && !crate::value::looks_numeric(s) {
            Self::packed(key, s, lru)
        } else {
            match Value::from_bytes(s) {
                Value::Str(b) if key.len() + b.len() <= PACKED_CAP => Self::packed(key, &b, lru),
                value => Body::Split {
                    lru,
                    key: SmallBytes::new(key),
                    value,
                },
            }
        };
        Entry { expire_at, body }
    }

    #[inline]
    fn packed(key: &[u8], v: &[u8], lru: u32) -> Body {
        let mut data = [0u8; PACKED_CAP];
        data[..key.len()].copy_from_slice(key);
        data[key.len()..key.len() + v.len()].copy_from_slice(v);
        Body::Packed {
            lru,
            klen: key.len() as u8,
            vlen: v.len() as u8,
            data,
        }
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        match &self.body {
            Body::Packed { klen, data, .. } => &data[..*klen as usize],
            Body::Split { key, .. } => key,
        }
    }

    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        match &self.body {
            Body::Packed {
                klen, vlen, data, ..
            } => ValueRef::Str(&data[*klen as usize..*klen as usize + *vlen as usize]),
            Body::Split { value, .. } => value.as_ref(),
        }
    }

    /// A string value's bytes as the shared heap allocation that holds them
    /// (`None` for other types, integers and strings stored inline): a
    /// snapshot hands such a value to its consumers by reference. While
    /// the reference lives, a write to the key replaces or copies the
    /// bytes (`Raw` strings are copied on write), never changes them.
    pub fn shared_str(&self) -> Option<SharedStr> {
        match &self.body {
            Body::Split {
                value: Value::Str(crate::bytes::SmallBytes::Heap(b)),
                ..
            } => Some(SharedStr::Slice(b.clone())),
            Body::Split {
                value: Value::Raw(b),
                ..
            } => Some(SharedStr::Vec(b.clone())),
            _ => None,
        }
    }

    /// A collection value as a handle sharing its storage (an `Arc` or a
    /// 16-byte handle: no element is copied), so a command can read it
    /// while it looks up other keys; a write to the key meanwhile copies
    /// the storage first. `None` for strings.
    pub fn shared_collection(&self) -> Option<Value> {
        match &self.body {
            Body::Split {
                value:
                    v @ (Value::List(_)
                    | Value::Hash(_)
                    | Value::Set(_)
                    | Value::ZSet(_)
                    | Value::Stream(_)),
                ..
            } => Some(v.clone()),
            _ => None,
        }
    }

    /// A string value's bytes, to change in place (`SETBIT`, `BITFIELD`,
    /// `APPEND`, `SETRANGE`): the value becomes a `raw` string if it was
    /// an integer or an immutable string, and is copied first if a snapshot
    /// shares it. `None` for other types.
    pub fn string_mut(&mut self) -> Option<&mut Vec<u8>> {
        let owned = match self.value() {
            ValueRef::Raw(_) => None,
            ValueRef::Int(i) => Some(crate::value::itoa_buf::Buf::new().format(i).to_vec()),
            ValueRef::Str(s) => Some(s.to_vec()),
            _ => return None,
        };
        if let Some(v) = owned {
            self.set_value(Value::Raw(std::sync::Arc::new(v)));
        }
        match self.value_mut() {
            Some(Value::Raw(b)) => Some(std::sync::Arc::make_mut(b)),
            _ => None,
        }
    }

    /// The value, for in-place changes of collections; `None` for a string
    /// packed with its key (replace those with [`Entry::set_value`]).
    pub fn value_mut(&mut self) -> Option<&mut Value> {
        match &mut self.body {
            Body::Packed { .. } => None,
            Body::Split { value, .. } => Some(value),
        }
    }

    /// Replaces the value, keeping key, expiry and clock.
    pub fn set_value(&mut self, v: Value) {
        let lru = self.lru();
        match (&mut self.body, v) {
            (Body::Split { value, .. }, Value::Int(i)) => *value = Value::Int(i),
            (Body::Split { key, value, .. }, Value::Str(s)) if key.len() + s.len() > PACKED_CAP => {
                *value = Value::Str(s)
            }
            (_, v) => {
                let key = self.key().to_vec();
                self.body = Entry::new(&key, v, 0, lru).body;
            }
        }
    }

    /// Takes the value out (for RENAME, MOVE).
    pub fn into_value(self) -> Value {
        match self.body {
            Body::Packed { .. } => self.value().to_value(),
            Body::Split { value, .. } => value,
        }
    }

    #[inline]
    pub fn lru(&self) -> u32 {
        match &self.body {
            Body::Packed { lru, .. } | Body::Split { lru, .. } => *lru,
        }
    }

    /// Records an access (see [`Access`]).
    #[inline]
    pub fn touch(&mut self, access: Access) {
        let v = access.apply(self.lru());
        self.set_lru(v);
    }

    #[inline]
    pub fn set_lru(&mut self, clock: u32) {
        match &mut self.body {
            Body::Packed { lru, .. } | Body::Split { lru, .. } => *lru = clock,
        }
    }

    pub fn has_expire(&self) -> bool {
        self.expire_at != NO_EXPIRE
    }

    /// What `MEMORY USAGE` reports: the entry's slot in its table (its
    /// bytes and its share of the index's control bytes) plus the heap it
    /// owns, collections' elements sampled (`samples`; 0: all).
    pub fn memory_usage(&self, samples: usize) -> usize {
        let slot = std::mem::size_of::<Entry>() + 4;
        slot + match &self.body {
            Body::Packed { .. } => 0,
            Body::Split { key, value, .. } => key.heap_size() + value.heap_size_sampled(samples),
        }
    }

    /// Heap bytes the entry owns beyond its 64 bytes.
    pub fn heap_size(&self) -> usize {
        match &self.body {
            Body::Packed { .. } => 0,
            Body::Split { key, value, .. } => key.heap_size() + value.heap_size(),
        }
    }
}

/// How a read updates an entry's access clock (the 24 bits Redis keeps
/// per object for eviction): the LRU stamp, or the LFU counter.
#[derive(Debug, Clone, Copy)]
pub enum Access {
    /// Records the LRU clock (seconds).
    Lru(u32),
    /// Redis's LFU: the counter decays by one per `decay_minutes` since the
    /// last access, then grows logarithmically (`log_factor`); `rand` is a
    /// uniform draw in [0, 1).
    Lfu {
        now_minutes: u16,
        decay_minutes: u32,
        log_factor: u32,
        rand: f64,
    },
}

/// LFU counter of a new key (Redis's `LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u32 = 5;

/// Minutes between two LFU timestamps (16 bits, wrapping as Redis's `LFUTimeElapsed`).
pub fn lfu_minutes_elapsed(now_minutes: u16, then: u16) -> u32 {
    if now_minutes >= then {
        (now_minutes - then) as u32
    } else {
        65535 - then as u32 + now_minutes as u32
    }
}

/// The LFU counter of a clock value after decay (Redis's `LFUDecrAndReturn`).
pub fn lfu_counter(clock: u32, now_minutes: u16, decay_minutes: u32) -> u32 {
    let ldt = (clock >> 8) as u16;
    let counter = clock & 255;
    let periods = lfu_minutes_elapsed(now_minutes, ldt)
        .checked_div(decay_minutes)
        .unwrap_or(0);
    counter.saturating_sub(periods)
}

impl Access {
    /// The clock value after this access, given the previous one.
    pub fn apply(self, old: u32) -> u32 {
        match self {
            Access::Lru(clock) => clock,
            Access::Lfu {
                now_minutes,
                decay_minutes,
                log_factor,
                rand,
            } => {
                let mut counter = lfu_counter(old, now_minutes, decay_minutes);
                if counter < 255 {
                    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
                    let p = 1.0 / (base * log_factor as f64 + 1.0);
                    if rand < p {
                        counter += 1;
                    }
                }
                ((now_minutes as u32) << 8) | counter
            }
        }
    }
}

/// The result of [`Db::lookup_read`].
pub enum Found<'a> {
    Live(&'a Entry),
    /// The key had expired and was removed now.
    Expired(Entry),
    Missing,
}

/// The result of [`Db::lookup`].
pub enum Lookup<'a> {
    Live(&'a mut Entry),
    /// The key had expired and was removed now.
    Expired(Entry),
    Missing,
}

/// Asks for the cache line at `p` without waiting for it (a hint: any
/// address is allowed, nothing is read).
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and cannot fault, whatever `p` is;
    // SSE is part of every x86_64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// One segment: its entries, dense in a vector, and a SwissTable of their
/// positions (two bytes and a control byte a bucket) to find them by hash.
///
/// Why not a SwissTable of the entries themselves: its buckets double, and
/// with uniform hashing every segment doubles at about the same key count,
/// so at unlucky sizes (1 M keys is one) the whole table sits at 44% load,
/// 145 bytes a 64-byte entry. Here only the small index doubles; the
/// entries grow by a quarter at a time and cost ~72 bytes each at any size.
/// The price is one more cache line per lookup (the index slot).
struct Segment {
    depth: u32,
    index: HashTable<u16>,
    entries: Vec<Entry>,
    /// Entries with an expiry, so the active expiry cycle skips segments
    /// that have none.
    expiring: u32,
}

impl Segment {
    fn new(depth: u32, capacity: usize) -> Self {
        Segment {
            depth,
            index: HashTable::with_capacity(capacity),
            entries: Vec::with_capacity(capacity),
            expiring: 0,
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Position of `key` (whose hash is `h`).
    #[inline]
    fn find(&self, h: u64, key: &[u8]) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(h, |&i| entries[i as usize].key() == key)
            .map(|&i| i as usize)
    }

    /// Appends an entry whose key is not in the segment.
    fn push(&mut self, h: u64, e: Entry, hasher: &foldhash::fast::RandomState) {
        if self.entries.len() == self.entries.capacity() {
            // Grow by a quarter, not double: the entries are most of the memory.
            let more = (self.entries.len() / 4).max(8);
            self.entries.reserve_exact(more);
        }
        let i = self.entries.len();
        debug_assert!(i < u16::MAX as usize);
        self.entries.push(e);
        let entries = &self.entries;
        self.index
            .insert_unique(h, i as u16, |&j| hasher.hash_one(entries[j as usize].key()));
    }

    /// Removes the entry at position `i` (its key hashes to `h`): the last
    /// entry takes its place.
    fn remove_at(&mut self, h: u64, i: usize, hasher: &foldhash::fast::RandomState) -> Entry {
        if let Ok(slot) = self.index.find_entry(h, |&j| j as usize == i) {
            slot.remove();
        }
        let last = self.entries.len() - 1;
        let e = self.entries.swap_remove(i);
        if i != last {
            let mh = hasher.hash_one(self.entries[i].key());
            if let Some(slot) = self.index.find_mut(mh, |&j| j as usize == last) {
                *slot = i as u16;
            }
        }
        let cap = self.entries.capacity();
        if cap > 64 && self.entries.len() < cap / 4 {
            self.entries.shrink_to(self.entries.len() * 2);
            let entries = &self.entries;
            self.index.shrink_to(entries.len(), |&j| {
                hasher.hash_one(entries[j as usize].key())
            });
        }
        if e.expire_at != NO_EXPIRE {
            self.expiring -= 1;
        }
        e
    }
}

/// A point-in-time snapshot in progress (fork-free, see [`Db::begin_snapshot`]).
struct SnapshotState {
    /// Per segment that existed when the snapshot began: not yet visited.
    pending: Vec<bool>,
    /// Copies of pending segments, taken just before their first change.
    frozen: Vec<Option<Vec<Entry>>>,
    /// Bytes of entries held in `frozen` (the snapshot's extra memory).
    frozen_entries: usize,
}

pub struct Db {
    hasher: foldhash::fast::RandomState,
    snapshot: Option<SnapshotState>,
    global_depth: u32,
    directory: Vec<u32>,
    segments: Vec<Segment>,
    len: usize,
    expires: usize,
    /// Where the active expiry cycle resumes.
    expire_cursor: usize,
    /// The keys of each cluster slot (cluster mode only: `None` costs the
    /// write path one branch).
    slots: Option<Box<crate::slots::SlotIndex>>,
    /// Hashes with field TTLs, for the active cycle (`hash::expiry`).
    field_expiry: crate::hash::ExpiryIndex,
}

#[inline]
fn unfile_from(ix: &mut crate::hash::ExpiryIndex, old: &Entry) {
    if !ix.is_empty() {
        if let Body::Split {
            value: Value::Hash(h),
            ..
        } = &old.body
        {
            if h.is_volatile() {
                ix.forget(old.key());
            }
        }
    }
}

/// The soonest field deadline of an entry holding a hash with field TTLs.
/// (One pattern match for the strings of the write path: a packed entry
/// is never a hash.)
#[inline]
fn field_deadline(e: &Entry) -> Option<i64> {
    match &e.body {
        Body::Split {
            value: Value::Hash(h),
            ..
        } => h.min_field_expire(),
        _ => None,
    }
}

impl Default for Db {
    fn default() -> Self {
        Self::new()
    }
}

impl Db {
    pub fn new() -> Self {
        Db {
            hasher: foldhash::fast::RandomState::default(),
            snapshot: None,
            global_depth: 0,
            directory: vec![0],
            segments: vec![Segment::new(0, 0)],
            len: 0,
            expires: 0,
            expire_cursor: 0,
            slots: None,
            field_expiry: Default::default(),
        }
    }

    /// Hashes with field TTLs filed for the active cycle.
    pub fn hashes_with_field_ttls(&self) -> usize {
        self.field_expiry.len()
    }

    /// Whether some hash here has a field TTL now (the index may still
    /// hold hashes whose TTLs were all removed since: each is looked at).
    pub fn holds_field_ttls(&self) -> bool {
        self.field_expiry.keys().any(|k| {
            self.get(k).is_some_and(|e| {
                matches!(e.value(), ValueRef::Hash(h) if h.ttls().is_some_and(|t| !t.is_empty()))
            })
        })
    }

    /// Takes `key` out of the field-expiry index (its hash has no field
    /// TTL left: `HPERSIST`).
    pub fn unfile_field_expiry(&mut self, key: &[u8]) {
        self.field_expiry.forget(key);
    }

    /// Files `key` (a hash that gained a field TTL, at `at`) for the active
    /// cycle.
    pub fn file_field_expiry(&mut self, key: &[u8], at: i64) {
        self.field_expiry.file(key, at);
    }

    /// The next hash (by key) due for field expiry at `now`, taken out of
    /// the index: the caller expires what is due and files it again if it
    /// still has TTLs.
    pub fn pop_field_expiry(&mut self, now: i64) -> Option<SmallBytes> {
        self.field_expiry.pop_due(now)
    }

    /// A removed or replaced entry leaves the field-expiry index.
    #[inline]
    fn unfile(&mut self, old: &Entry) {
        unfile_from(&mut self.field_expiry, old);
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Keys with an expiry.
    pub fn expires(&self) -> usize {
        self.expires
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    #[inline]
    fn dir_index(&self, hash: u64) -> usize {
        if self.global_depth == 0 {
            0
        } else {
            ((hash << 7) >> (64 - self.global_depth)) as usize
        }
    }

    #[inline]
    fn segment_of(&self, hash: u64) -> usize {
        self.directory[self.dir_index(hash)] as usize
    }

    /// Starts bringing what a lookup of `key` reads into the cache, and
    /// changes nothing: a run of pipelined commands warms its keys first,
    /// so the misses of a large table (its control bytes, its position
    /// slot, the entry: three lines a lookup, one after another) overlap
    /// across the run instead of adding up command by command.
    ///
    /// The probe reads the control group and the candidates' positions and
    /// touches no entry: it asks for each candidate's line with a prefetch
    /// instruction, which never waits nor faults.
    #[inline]
    pub fn prefetch(&self, key: &[u8]) {
        let h = self.hash(key);
        let seg = &self.segments[self.segment_of(h)];
        let base = seg.entries.as_ptr();
        seg.index.find(h, |&i| {
            prefetch_line(base.wrapping_add(i as usize).cast());
            false
        });
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        let h = self.hash(key);
        let s = &self.segments[self.segment_of(h)];
        s.find(h, key).map(|i| &s.entries[i])
    }

    /// Copy-on-write for a snapshot in progress: before the first change to
    /// a segment the snapshot has not visited yet, keep a copy of it as it
    /// was. Costs nothing when no snapshot runs.
    #[inline]
    fn before_write(&mut self, si: usize) {
        if let Some(s) = &mut self.snapshot {
            if si < s.pending.len() && s.pending[si] && s.frozen[si].is_none() {
                let copy: Vec<Entry> = self.segments[si].entries.clone();
                s.frozen_entries += copy.len();
                s.frozen[si] = Some(copy);
            }
        }
    }

    /// Begins a point-in-time snapshot: from now on, the first change to
    /// each segment not yet visited keeps a copy of it, so
    /// [`Db::snapshot_segment_part`] always sees the data as it is now. Returns
    /// the number of segments to visit, and the key and expiry counts.
    pub fn begin_snapshot(&mut self) -> (usize, usize, usize) {
        let n = self.segments.len();
        self.snapshot = Some(SnapshotState {
            pending: vec![true; n],
            frozen: (0..n).map(|_| None).collect(),
            frozen_entries: 0,
        });
        (n, self.len, self.expires)
    }

    /// Visits at most `max` entries of segment `si`, from position `from`,
    /// as the segment was when the snapshot began; `visit` returns false to
    /// end the part after the entry it was given. `Some(next)`: more to
    /// visit from `next`; `None`: the segment is done and its copy, if one
    /// was kept, released (or it was visited already). A segment's view
    /// cannot change between two parts: the first write to a segment still
    /// pending keeps a copy of it as it was, in the same order, and the
    /// next parts read that copy.
    pub fn snapshot_segment_part(
        &mut self,
        si: usize,
        from: usize,
        max: usize,
        mut visit: impl FnMut(&Entry) -> bool,
    ) -> Option<usize> {
        let Db {
            snapshot, segments, ..
        } = self;
        let s = snapshot.as_mut()?;
        if si >= s.pending.len() || !s.pending[si] {
            return None;
        }
        let entries: &[Entry] = match &s.frozen[si] {
            Some(copy) => copy,
            None => &segments[si].entries,
        };
        let limit = from.saturating_add(max).min(entries.len());
        let mut end = from.min(limit);
        while end < limit {
            end += 1;
            if !visit(&entries[end - 1]) {
                break;
            }
        }
        if end < entries.len() {
            return Some(end);
        }
        s.pending[si] = false;
        if let Some(copy) = s.frozen[si].take() {
            s.frozen_entries -= copy.len();
        }
        None
    }

    /// Ends (or abandons) the snapshot and frees what it kept.
    pub fn end_snapshot(&mut self) {
        self.snapshot = None;
    }

    pub fn snapshot_active(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Entries copied for the snapshot in progress and not yet written.
    pub fn snapshot_copied_entries(&self) -> usize {
        self.snapshot.as_ref().map_or(0, |s| s.frozen_entries)
    }

    /// Finds a live key in one probe: a key whose time has come is removed
    /// on the spot (lazy expiry) and handed back as `Expired`, unless
    /// `expire` is false (a replica waits for its master's `DEL`).
    #[inline]
    pub fn lookup(&mut self, key: &[u8], now_ms: i64, expire: bool) -> Lookup<'_> {
        let h = self.hash(key);
        let si = self.segment_of(h);
        if self.snapshot.is_some() {
            self.before_write(si);
        }
        let seg = &mut self.segments[si];
        let Some(i) = seg.find(h, key) else {
            return Lookup::Missing;
        };
        let exp = seg.entries[i].expire_at;
        if exp != NO_EXPIRE && exp <= now_ms {
            if !expire {
                return Lookup::Missing;
            }
            let e = seg.remove_at(h, i, &self.hasher);
            if let Some(ix) = &mut self.slots {
                ix.remove(crate::slots::key_slot(key), h);
            }
            self.expires -= 1;
            self.len -= 1;
            unfile_from(&mut self.field_expiry, &e);
            Lookup::Expired(e)
        } else {
            Lookup::Live(&mut seg.entries[i])
        }
    }

    /// Like [`Db::lookup`] for a reader: the entry comes back shared, and
    /// its access clock is set to `lru` when one is given (`None`: a look
    /// that is not an access, as `OBJECT` or `DEBUG`). Only removing an
    /// expired key counts as a change for a snapshot in progress.
    #[inline]
    pub fn lookup_read(
        &mut self,
        key: &[u8],
        now_ms: i64,
        expire: bool,
        access: Option<Access>,
    ) -> Found<'_> {
        let h = self.hash(key);
        let si = self.segment_of(h);
        let seg = &self.segments[si];
        let Some(i) = seg.find(h, key) else {
            return Found::Missing;
        };
        let due = {
            let e = &seg.entries[i];
            e.expire_at != NO_EXPIRE && e.expire_at <= now_ms
        };
        if due {
            if !expire {
                return Found::Missing;
            }
            return match self.remove(key) {
                Some(e) => Found::Expired(e),
                None => Found::Missing,
            };
        }
        let e = &mut self.segments[si].entries[i];
        if let Some(a) = access {
            e.touch(a);
        }
        Found::Live(e)
    }

    /// Inserts or replaces `key`, returning the previous entry.
    pub fn upsert(&mut self, key: &[u8], value: Value, expire_at: i64, lru: u32) -> Option<Entry> {
        self.upsert_entry(Entry::new(key, value, expire_at, lru))
    }

    /// Sets `key` to a string given as bytes (`SET`): packed with the key
    /// when it fits, an integer when canonical.
    #[inline]
    pub fn set_str(&mut self, key: &[u8], s: &[u8], expire_at: i64, lru: u32) -> Option<Entry> {
        self.upsert_entry(Entry::new_str(key, s, expire_at, lru))
    }

    /// Inserts or replaces an entry by its key, returning the previous one.
    pub fn upsert_entry(&mut self, entry: Entry) -> Option<Entry> {
        if let Some(at) = field_deadline(&entry) {
            self.field_expiry.file(entry.key(), at);
        }
        let key = entry.key();
        let h = self.hash(key);
        let si = self.segment_of(h);
        self.before_write(si);
        let seg = &mut self.segments[si];
        let is = entry.expire_at != NO_EXPIRE;
        match seg.find(h, key) {
            Some(i) => {
                let old = std::mem::replace(&mut seg.entries[i], entry);
                let was = old.expire_at != NO_EXPIRE;
                if was != is {
                    if is {
                        seg.expiring += 1;
                        self.expires += 1;
                    } else {
                        seg.expiring -= 1;
                        self.expires -= 1;
                    }
                }
                if !self.field_expiry.is_empty() {
                    let new_has = field_deadline(&seg.entries[i]).is_some();
                    if !new_has {
                        self.unfile(&old);
                    }
                }
                Some(old)
            }
            None => {
                if let Some(ix) = &mut self.slots {
                    ix.insert(crate::slots::key_slot(key), h);
                }
                seg.push(h, entry, &self.hasher);
                if is {
                    seg.expiring += 1;
                    self.expires += 1;
                }
                self.len += 1;
                if seg.len() >= SEGMENT_MAX {
                    self.split(si);
                }
                None
            }
        }
    }

    /// Removes `key`, returning its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let h = self.hash(key);
        let si = self.segment_of(h);
        self.before_write(si);
        let seg = &mut self.segments[si];
        let i = seg.find(h, key)?;
        let e = seg.remove_at(h, i, &self.hasher);
        if let Some(ix) = &mut self.slots {
            ix.remove(crate::slots::key_slot(key), h);
        }
        self.len -= 1;
        if e.expire_at != NO_EXPIRE {
            self.expires -= 1;
        }
        self.unfile(&e);
        Some(e)
    }

    /// Sets or clears (`NO_EXPIRE`) a key's expiry. False if there is no key.
    pub fn set_expire(&mut self, key: &[u8], expire_at: i64) -> bool {
        let h = self.hash(key);
        let si = self.segment_of(h);
        self.before_write(si);
        let seg = &mut self.segments[si];
        let Some(i) = seg.find(h, key) else {
            return false;
        };
        let e = &mut seg.entries[i];
        let (was, is) = (e.expire_at != NO_EXPIRE, expire_at != NO_EXPIRE);
        e.expire_at = expire_at;
        if was && !is {
            seg.expiring -= 1;
            self.expires -= 1;
        } else if !was && is {
            seg.expiring += 1;
            self.expires += 1;
        }
        true
    }

    fn split(&mut self, si: usize) {
        // The entries move: a snapshot that has not visited this segment
        // must see them where they were.
        self.before_write(si);
        let depth = self.segments[si].depth;
        if depth == self.global_depth {
            // Double the directory: slot i becomes slots 2i and 2i+1.
            let mut dir = Vec::with_capacity(self.directory.len() * 2);
            for &s in &self.directory {
                dir.push(s);
                dir.push(s);
            }
            self.directory = dir;
            self.global_depth += 1;
        }
        let new_depth = depth + 1;
        let g = self.global_depth;
        let new_si = self.segments.len();
        let mut moved = Segment::new(new_depth, SEGMENT_MAX / 2 + SEGMENT_MAX / 16);
        let hasher = &self.hasher;
        let seg = &mut self.segments[si];
        seg.depth = new_depth;
        // An entry moves when the bit that now tells the two halves apart
        // (bit `depth` of its directory index, counted from the top) is set.
        let bit_shift = 64 - 7 - new_depth;
        let mut kept = Segment::new(new_depth, SEGMENT_MAX / 2 + SEGMENT_MAX / 16);
        seg.index = HashTable::new();
        for e in std::mem::take(&mut seg.entries) {
            let h = hasher.hash_one(e.key());
            let expiring = (e.expire_at != NO_EXPIRE) as u32;
            let half = if (h >> bit_shift) & 1 == 1 {
                &mut moved
            } else {
                &mut kept
            };
            half.expiring += expiring;
            half.push(h, e, hasher);
        }
        *seg = kept;
        self.segments.push(moved);
        // The segment covered 2^(g-depth) directory slots; the upper half of
        // them now points to the new segment.
        let span = 1usize << (g - depth);
        let first = self
            .directory
            .iter()
            .position(|&s| s as usize == si)
            .unwrap();
        for slot in &mut self.directory[first + span / 2..first + span] {
            *slot = new_si as u32;
        }
    }

    /// Prepares an empty database for about `n` keys (the `RESIZEDB` hint
    /// of a snapshot being loaded): the directory is split up front and each
    /// segment's table allocated once, so the load rehashes nothing.
    pub fn reserve(&mut self, n: usize) {
        if self.len != 0 || self.snapshot.is_some() {
            return;
        }
        // Aim for segments three quarters full of their split threshold.
        let per_segment = SEGMENT_MAX * 3 / 4;
        let mut depth = 0;
        while (1usize << depth) * per_segment < n && depth < 24 {
            depth += 1;
        }
        let count = 1usize << depth;
        let cap = n.div_ceil(count) + n.div_ceil(count) / 8;
        self.global_depth = depth as u32;
        self.directory = (0..count as u32).collect();
        self.segments = (0..count)
            .map(|_| Segment::new(depth as u32, cap.min(SEGMENT_MAX)))
            .collect();
        self.expire_cursor = 0;
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        let mut snapshot = self.snapshot.take();
        if let Some(s) = &mut snapshot {
            // A snapshot in progress still needs what it has not visited:
            // hand it the entries themselves (a move, not a copy).
            for (si, seg) in self.segments.iter_mut().enumerate().take(s.pending.len()) {
                if s.pending[si] && s.frozen[si].is_none() {
                    let entries: Vec<Entry> = std::mem::take(&mut seg.entries);
                    s.frozen_entries += entries.len();
                    s.frozen[si] = Some(entries);
                }
            }
            // New segments of the empty table are not part of the snapshot.
        }
        let slots = self.slots.is_some();
        *self = Db {
            hasher: self.hasher,
            ..Db::new()
        };
        if slots {
            self.slots = Some(Box::default());
        }
        // Every segment the snapshot still needs now has its own copy, so
        // the fresh table's segments are never read in their place.
        self.snapshot = snapshot;
    }

    /// Keeps (`true`) or drops the per-slot key index of cluster mode;
    /// turned on, it is built from the keys already there.
    pub fn set_slot_index(&mut self, on: bool) {
        if !on {
            self.slots = None;
            return;
        }
        if self.slots.is_some() {
            return;
        }
        let mut ix = Box::<crate::slots::SlotIndex>::default();
        for e in self.segments.iter().flat_map(|s| s.entries.iter()) {
            ix.insert(
                crate::slots::key_slot(e.key()),
                self.hasher.hash_one(e.key()),
            );
        }
        self.slots = Some(ix);
    }

    /// The per-slot index, when cluster mode keeps one.
    pub fn slot_index(&self) -> Option<&crate::slots::SlotIndex> {
        self.slots.as_deref()
    }

    /// Keys in `slot` (`CLUSTER COUNTKEYSINSLOT`); 0 without the index.
    pub fn count_keys_in_slot(&self, slot: u16) -> usize {
        self.slots.as_ref().map_or(0, |ix| ix.count(slot))
    }

    /// Up to `max` keys of `slot` (`CLUSTER GETKEYSINSLOT`), found through
    /// the index's hashes: the work is that of the keys returned, whatever
    /// the size of the database. Expired keys not yet removed are included,
    /// as Redis's list holds them too.
    pub fn keys_in_slot(&self, slot: u16, max: usize) -> Vec<&[u8]> {
        let Some(ix) = &self.slots else {
            return Vec::new();
        };
        let mut out: Vec<&[u8]> = Vec::new();
        // Hashes two keys of the slot share (each is in the table twice).
        let mut shared: Vec<u64> = Vec::new();
        for h in ix.hashes(slot) {
            if out.len() >= max {
                break;
            }
            if shared.contains(&h) {
                continue;
            }
            let seg = &self.segments[self.segment_of(h)];
            let before = out.len();
            for &i in seg.index.iter_hash(h) {
                let k = seg.entries[i as usize].key();
                if crate::slots::key_slot(k) == slot && self.hasher.hash_one(k) == h {
                    out.push(k);
                }
            }
            if out.len() - before > 1 {
                shared.push(h);
            }
        }
        out.truncate(max);
        out
    }

    /// Iterates every entry (no order).
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.segments.iter().flat_map(|s| s.entries.iter())
    }

    /// One step of `SCAN`: visits whole segments starting at `cursor` until
    /// at least `count` entries were visited or the end is reached. Returns
    /// the next cursor (0 when done). Every key present for the whole scan
    /// is visited at least once, whatever splits happen in between.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&Entry)) -> u64 {
        let mut c = cursor;
        if c >= 1u64 << PREFIX_BITS {
            return 0;
        }
        let mut visited = 0;
        loop {
            let dir = if self.global_depth == 0 {
                0
            } else {
                (c >> (PREFIX_BITS - self.global_depth)) as usize
            };
            let seg = &self.segments[self.directory[dir] as usize];
            for e in seg.entries.iter() {
                visit(e);
            }
            visited += seg.len();
            let width = 1u64 << (PREFIX_BITS - seg.depth);
            c = (c / width + 1) * width;
            if c >= 1u64 << PREFIX_BITS {
                return 0;
            }
            if visited >= count.max(1) {
                return c;
            }
        }
    }

    /// Up to `n` entries from one random stretch of the table, for eviction
    /// (Redis's `dictGetSomeKeys`): a random segment — chosen through the
    /// directory, so by the share of the hash space it covers — and the
    /// entries that follow a random position in it. With `volatile`, only
    /// entries that have an expiry. Costs one partial pass over one segment.
    pub fn sample(
        &self,
        rng: &mut impl Rng,
        n: usize,
        volatile: bool,
        mut visit: impl FnMut(&Entry),
    ) {
        if self.len == 0 || (volatile && self.expires == 0) || n == 0 {
            return;
        }
        let pick = |rng: &mut _| -> usize {
            let slot = Rng::gen_range(rng, 0..self.directory.len());
            self.directory[slot] as usize
        };
        let mut si = pick(rng);
        let wanted = |s: &Segment| {
            if volatile {
                s.expiring > 0
            } else {
                !s.entries.is_empty()
            }
        };
        let mut tries = 0;
        while !wanted(&self.segments[si]) {
            tries += 1;
            if tries < 16 {
                si = pick(rng);
            } else {
                // Few segments qualify: walk to the next one that does.
                let start = si;
                let nseg = self.segments.len();
                si = (0..nseg)
                    .map(|i| (start + i) % nseg)
                    .find(|&i| wanted(&self.segments[i]))
                    .expect("a segment holds the counted keys");
                break;
            }
        }
        let entries = &self.segments[si].entries;
        let start = rng.gen_range(0..entries.len());
        let mut taken = 0;
        for e in entries[start..].iter().chain(&entries[..start]) {
            if volatile && e.expire_at == NO_EXPIRE {
                continue;
            }
            visit(e);
            taken += 1;
            if taken == n {
                break;
            }
        }
    }

    /// A random entry (for `RANDOMKEY` and eviction sampling), every entry
    /// equally likely. O(1) expected on a table of many segments: a random
    /// directory slot picks segment `s` with probability `w/slots` (it has
    /// `w = 2^(global_depth - depth)` of the `slots`), kept with probability
    /// `len/(w * SEGMENT_MAX)`, so each of its entries has the same chance,
    /// and a draw succeeds with probability `len / (slots * SEGMENT_MAX)` —
    /// a few tries while segments are reasonably full. Why it matters:
    /// `RANDOMKEY` draws once per expired key it removes, and a walk over
    /// the segments per draw made that O(expired × segments).
    pub fn random_entry(&self, rng: &mut impl Rng) -> Option<&Entry> {
        if self.len == 0 {
            return None;
        }
        if self.segments.len() > 8 {
            for _ in 0..64 {
                let slot = rng.gen_range(0..self.directory.len());
                let s = &self.segments[self.directory[slot] as usize];
                let w = 1usize << (self.global_depth - s.depth);
                if rng.gen_range(0..w * SEGMENT_MAX) < s.len() {
                    return s.entries.get(rng.gen_range(0..s.len()));
                }
            }
        }
        // A small or sparse table: pick by a walk over the segment sizes.
        // Pick a segment weighted by its size, then an entry in it.
        let mut n = rng.gen_range(0..self.len);
        for s in &self.segments {
            if n < s.len() {
                return s.entries.get(n);
            }
            n -= s.len();
        }
        None
    }

    /// Active expiry: examines segments holding keys with an expiry,
    /// starting where the last call stopped, and removes those whose time
    /// has come, passing each to `on_expired`. Stops after examining about
    /// `budget` entries. Returns (examined, expired).
    pub fn expire_cycle(
        &mut self,
        now_ms: i64,
        budget: usize,
        mut on_expired: impl FnMut(Entry),
    ) -> (usize, usize) {
        let mut examined = 0;
        let mut expired = 0;
        let nseg = self.segments.len();
        for _ in 0..nseg {
            if examined >= budget || self.expires == 0 {
                break;
            }
            let si = self.expire_cursor % nseg;
            self.expire_cursor = (si + 1) % nseg;
            if self.segments[si].expiring == 0 {
                continue;
            }
            if self.segments[si]
                .entries
                .iter()
                .any(|e| e.expire_at != NO_EXPIRE && e.expire_at <= now_ms)
            {
                self.before_write(si);
            }
            let hasher = &self.hasher;
            let seg = &mut self.segments[si];
            examined += seg.len();
            let mut gone = Vec::new();
            let mut i = 0;
            while i < seg.entries.len() {
                let e = &seg.entries[i];
                if e.expire_at != NO_EXPIRE && e.expire_at <= now_ms {
                    let h = hasher.hash_one(e.key());
                    if let Some(ix) = &mut self.slots {
                        ix.remove(crate::slots::key_slot(e.key()), h);
                    }
                    // The last entry moves into `i`: look at `i` again.
                    gone.push(seg.remove_at(h, i, hasher));
                } else {
                    i += 1;
                }
            }
            self.expires -= gone.len();
            self.len -= gone.len();
            expired += gone.len();
            for e in gone {
                self.unfile(&e);
                on_expired(e);
            }
        }
        (examined, expired)
    }

    /// Approximate bytes of the table itself (entries, index slots and
    /// control bytes).
    pub fn table_bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|s| {
                s.entries.capacity() * std::mem::size_of::<Entry>()
                    + (s.index.capacity() * 8).div_ceil(7) * 3
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn slot_index_follows_every_way_a_key_comes_and_goes() {
        use crate::slots::key_slot;
        use std::collections::BTreeSet;
        let mut db = Db::new();
        // Keys from before the index is on are indexed when it is.
        for i in 0..500 {
            db.set_str(format!("pre{i}").as_bytes(), b"v", NO_EXPIRE, 0);
        }
        db.set_slot_index(true);
        // Enough keys to split segments; some with tags of one slot, some
        // expiring.
        for i in 0..20_000 {
            let k = if i % 10 == 0 {
                format!("{{tag}}{i}")
            } else {
                format!("k{i}")
            };
            let exp = if i % 7 == 0 { 1000 } else { NO_EXPIRE };
            db.set_str(k.as_bytes(), b"x", exp, 0);
        }
        for i in (0..20_000).step_by(3) {
            db.remove(format!("k{i}").as_bytes());
        }
        // Expired by lookup and by the cycle.
        let _ = db.lookup(b"k7", 2000, true);
        let mut gone = 0;
        while db.expires() > 0 {
            gone += db.expire_cycle(2000, 1000, |_| {}).1;
        }
        assert!(gone > 0);
        let check = |db: &Db| {
            let mut by_slot: std::collections::HashMap<u16, BTreeSet<Vec<u8>>> = Default::default();
            for e in db.iter() {
                by_slot
                    .entry(key_slot(e.key()))
                    .or_default()
                    .insert(e.key().to_vec());
            }
            let total: usize = (0..16384).map(|s| db.count_keys_in_slot(s)).sum();
            assert_eq!(total, db.len());
            for (slot, keys) in &by_slot {
                assert_eq!(db.count_keys_in_slot(*slot), keys.len());
                let got: BTreeSet<Vec<u8>> = db
                    .keys_in_slot(*slot, usize::MAX)
                    .into_iter()
                    .map(|k| k.to_vec())
                    .collect();
                assert_eq!(&got, keys);
            }
        };
        check(&db);
        let tag = key_slot(b"tag");
        assert_eq!(db.keys_in_slot(tag, 5).len(), 5);
        db.clear();
        assert_eq!(db.count_keys_in_slot(tag), 0);
        db.set_str(b"{tag}after", b"v", NO_EXPIRE, 0);
        assert_eq!(db.keys_in_slot(tag, 10), vec![&b"{tag}after"[..]]);
        db.set_slot_index(false);
        assert_eq!(db.count_keys_in_slot(tag), 0);
    }

    /// `prefetch` takes `&self`, so what can go wrong is a panic: an
    /// empty table, keys that are missing, a table through its splits.
    #[test]
    fn prefetch_changes_nothing() {
        let mut db = Db::new();
        db.prefetch(b"nothing yet");
        for i in 0..10_000 {
            db.set_str(format!("k{i}").as_bytes(), b"v", NO_EXPIRE, 0);
        }
        let before = (db.len(), db.segment_count());
        for i in 0..20_000 {
            db.prefetch(format!("k{i}").as_bytes());
        }
        assert_eq!((db.len(), db.segment_count()), before);
        assert!((0..10_000).all(|i| db.get(format!("k{i}").as_bytes()).is_some()));
        assert!(db.get(b"k10000").is_none());
    }

    #[test]
    fn entry_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Entry>(), 64);
        assert_eq!(std::mem::align_of::<Entry>(), 64);
    }

    #[test]
    fn short_strings_are_packed_with_their_key() {
        let e = Entry::new_str(b"key:000000000001", &[b'v'; 32], NO_EXPIRE, 7);
        assert_eq!(e.heap_size(), 0);
        assert_eq!(e.key(), b"key:000000000001");
        assert_eq!(e.value(), ValueRef::Str(&[b'v'; 32]));
        assert_eq!(e.lru(), 7);
        let e = Entry::new_str(b"k", b"123", NO_EXPIRE, 0);
        assert_eq!(e.value(), ValueRef::Int(123));
        let mut e = Entry::new_str(b"k", &[b'x'; 100], NO_EXPIRE, 0);
        assert_eq!(e.value(), ValueRef::Str(&[b'x'; 100]));
        e.set_value(Value::from_bytes(b"short"));
        assert_eq!(e.value(), ValueRef::Str(b"short"));
        assert_eq!(e.heap_size(), 0);
        e.set_value(Value::Int(5));
        assert_eq!(e.value(), ValueRef::Int(5));
        assert_eq!(e.key(), b"k");
    }

    #[test]
    fn grows_by_splitting_segments_and_keeps_every_key() {
        let mut db = Db::new();
        for i in 0..50_000u32 {
            db.upsert(
                format!("key:{i}").as_bytes(),
                Value::Int(i as i64),
                NO_EXPIRE,
                0,
            );
        }
        assert_eq!(db.len(), 50_000);
        assert!(db.segment_count() > 10);
        for i in 0..50_000u32 {
            assert_eq!(
                db.get(format!("key:{i}").as_bytes()).unwrap().value(),
                ValueRef::Int(i as i64)
            );
        }
        assert_eq!(db.iter().count(), 50_000);
    }

    #[test]
    fn scan_visits_every_key_across_splits() {
        let mut db = Db::new();
        for i in 0..5_000u32 {
            db.upsert(format!("a{i}").as_bytes(), Value::Int(0), NO_EXPIRE, 0);
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut added = 0;
        loop {
            cursor = db.scan(cursor, 10, |e| {
                seen.insert(e.key().to_vec());
            });
            // Keep inserting while scanning, forcing splits.
            for _ in 0..200 {
                db.upsert(format!("b{added}").as_bytes(), Value::Int(0), NO_EXPIRE, 0);
                added += 1;
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..5_000u32 {
            assert!(seen.contains(format!("a{i}").as_bytes()));
        }
    }

    #[test]
    fn expire_cycle_removes_only_due_keys() {
        let mut db = Db::new();
        for i in 0..10_000i64 {
            let exp = if i % 2 == 0 { 100 } else { NO_EXPIRE };
            db.upsert(format!("k{i}").as_bytes(), Value::Int(i), exp, 0);
        }
        assert_eq!(db.expires(), 5_000);
        let mut n = 0;
        while db.expires() > 0 {
            n += db.expire_cycle(1000, 1000, |_| {}).1;
        }
        assert_eq!(n, 5_000);
        assert_eq!(db.len(), 5_000);
    }

    #[test]
    fn random_entry_draws_every_segment_by_its_size() {
        let mut db = Db::new();
        for i in 0..40_000 {
            db.upsert(format!("k{i}").as_bytes(), Value::Int(i), NO_EXPIRE, 0);
        }
        assert!(db.segments.len() > 8, "the sampled path runs");
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(7);
        let mut draws = vec![0usize; db.segments.len()];
        let n = 400_000;
        for _ in 0..n {
            let e = db.random_entry(&mut rng).unwrap();
            draws[db.segment_of(db.hash(e.key()))] += 1;
        }
        for (si, seg) in db.segments.iter().enumerate() {
            let want = n as f64 * seg.len() as f64 / db.len() as f64;
            let got = draws[si] as f64;
            assert!(
                (got - want).abs() < want * 0.05,
                "segment {si}: {got} draws, {want} expected"
            );
        }
    }

    #[test]
    fn reserved_table_holds_every_key() {
        let mut db = Db::new();
        db.reserve(100_000);
        assert!(db.segment_count() >= 32);
        for i in 0..120_000u32 {
            db.upsert(
                format!("k{i}").as_bytes(),
                Value::Int(i as i64),
                NO_EXPIRE,
                0,
            );
        }
        assert_eq!(db.len(), 120_000);
        for i in 0..120_000u32 {
            assert_eq!(
                db.get(format!("k{i}").as_bytes()).unwrap().value(),
                ValueRef::Int(i as i64)
            );
        }
        let mut seen = 0;
        let mut c = 0;
        loop {
            c = db.scan(c, 100, |_| seen += 1);
            if c == 0 {
                break;
            }
        }
        assert_eq!(seen, 120_000);
    }

    #[test]
    fn snapshot_sees_the_data_as_it_was_when_it_began() {
        let mut db = Db::new();
        for i in 0..20_000i64 {
            db.upsert(format!("k{i}").as_bytes(), Value::Int(i), NO_EXPIRE, 0);
        }
        let (nseg, len, _) = db.begin_snapshot();
        assert_eq!(len, 20_000);
        let mut seen = std::collections::HashMap::new();
        for si in 0..nseg {
            // Writes between visits: overwrite, delete, insert (forcing
            // splits), as clients would during a save.
            for j in 0..300i64 {
                let k = (si as i64 * 7919 + j * 31) % 20_000;
                db.upsert(format!("k{k}").as_bytes(), Value::Int(-1), NO_EXPIRE, 0);
                db.remove(format!("k{}", (k + 1) % 20_000).as_bytes());
                db.upsert(
                    format!("new{si}-{j}").as_bytes(),
                    Value::Int(-2),
                    NO_EXPIRE,
                    0,
                );
            }
            if si == nseg / 2 {
                db.clear();
            }
            db.snapshot_segment_part(si, 0, usize::MAX, |e| {
                assert!(
                    seen.insert(e.key().to_vec(), e.value().to_value())
                        .is_none(),
                    "visited twice"
                );
                true
            });
        }
        db.end_snapshot();
        assert_eq!(seen.len(), 20_000);
        for i in 0..20_000i64 {
            assert_eq!(seen[format!("k{i}").as_bytes()], Value::Int(i));
        }
    }

    #[test]
    fn a_segment_visited_in_parts_with_writes_between_them_is_seen_as_it_was() {
        let mut db = Db::new();
        for i in 0..20_000i64 {
            db.upsert(format!("k{i}").as_bytes(), Value::Int(i), NO_EXPIRE, 0);
        }
        let (nseg, _, _) = db.begin_snapshot();
        let mut seen = std::collections::HashMap::new();
        let mut round = 0i64;
        for si in 0..nseg {
            let mut from = 0;
            loop {
                // Between parts: overwrite, delete (swap_remove reorders a
                // live segment), insert (splits), as clients would.
                for j in 0..40i64 {
                    round += 1;
                    let k = (round * 7919 + j * 31) % 20_000;
                    db.upsert(format!("k{k}").as_bytes(), Value::Int(-1), NO_EXPIRE, 0);
                    db.remove(format!("k{}", (k + 3) % 20_000).as_bytes());
                    db.upsert(
                        format!("new{round}-{j}").as_bytes(),
                        Value::Int(-2),
                        NO_EXPIRE,
                        0,
                    );
                }
                // Parts of at most 100 entries, some ended early by the
                // visitor.
                let next = db.snapshot_segment_part(si, from, 100, |e| {
                    assert!(
                        seen.insert(e.key().to_vec(), e.value().to_value())
                            .is_none(),
                        "visited twice"
                    );
                    seen.len() % 37 != 0
                });
                match next {
                    Some(n) => from = n,
                    None => break,
                }
            }
            // A segment done is not visited again.
            assert_eq!(
                db.snapshot_segment_part(si, 0, 100, |_| panic!("again")),
                None
            );
        }
        db.end_snapshot();
        assert_eq!(seen.len(), 20_000);
        for i in 0..20_000i64 {
            assert_eq!(seen[format!("k{i}").as_bytes()], Value::Int(i));
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..4, 0u16..2000, any::<bool>()), 1..4000)) {
            let mut db = Db::new();
            let mut model: BTreeMap<Vec<u8>, (i64, bool)> = BTreeMap::new();
            for (op, k, flag) in ops {
                let key = format!("key-{k}").into_bytes();
                match op {
                    0 | 1 => {
                        let exp = if flag { 5 } else { NO_EXPIRE };
                        db.upsert(&key, Value::Int(k as i64), exp, 0);
                        model.insert(key, (k as i64, flag));
                    }
                    2 => {
                        prop_assert_eq!(db.remove(&key).is_some(), model.remove(&key).is_some());
                    }
                    _ => {
                        let exp = if flag { 7 } else { NO_EXPIRE };
                        prop_assert_eq!(db.set_expire(&key, exp), model.contains_key(&key));
                        if let Some(m) = model.get_mut(&key) { m.1 = flag; }
                    }
                }
            }
            prop_assert_eq!(db.len(), model.len());
            prop_assert_eq!(db.expires(), model.values().filter(|v| v.1).count());
            for (k, (v, e)) in &model {
                let got = db.get(k).unwrap();
                prop_assert_eq!(got.value(), ValueRef::Int(*v));
                prop_assert_eq!(got.has_expire(), *e);
            }
        }
    }
}
