//! The stream type (Redis 7.0 streams): entries in ID order packed into
//! nodes, plus consumer groups.
//!
//! # State
//! Everything Redis 7.0's `stream` keeps: the entries, `length`,
//! `last_id`, `first_id` (first live entry, 0-0 when empty),
//! `max_deleted_entry_id`, `entries_added`, and the consumer groups
//! ([`group`]). The RDB writer needs nothing else.
//!
//! # Nodes: Redis's boundaries, our bytes
//! Redis keeps a radix tree of listpacks keyed by each listpack's first
//! ("master") ID. The node boundaries are visible from outside —
//! `XTRIM ~` only drops whole nodes, `XINFO STREAM` shows
//! `radix-tree-keys`, an RDB holds one listpack per node — so they are
//! Redis's exactly. `streamAppendItem` starts a new node when
//! `lp_bytes + totelelen >= node_max_bytes` (the tail listpack's byte
//! size plus the raw lengths of the new entry's fields and values;
//! `stream-node-max-bytes`, 0 or more than 1 GB meaning 1 GB) or when the
//! tail's live + deleted entries reach `stream-node-max-entries` (0: no
//! limit). So each [`Node`] knows the exact size its listpack would have
//! ([`Node::lp_bytes`], from listpack's element rules, including the
//! master `count`/`deleted` fields whose width changes as XDEL and trims
//! rewrite them), but stores its entries in its own packed form
//! ([`node`]): a flags byte, varint deltas against the master ID, field
//! names once in the master when an entry has the same ones, values as
//! `<varint len><bytes>`, no per-element back-lengths. Integer-looking
//! values are kept as text: every reply uses their text, and the listpack
//! writer ([`listpack`]) turns them into integers as Redis would.
//!
//! The tree is a `BTreeMap<StreamId, Node>`; a node is ~100 entries by
//! default, so its per-node cost (~100 bytes) is about a byte per entry.
//!
//! # Memory (1,000,000 × `XADD s * f1 v1 f2 v2`, default node limits)
//! Redis's listpack for such an entry (SAMEFIELDS): flags 2 + ms-delta 2 +
//! seq-delta 2 + two 2-byte strings 4 + 4 + lp-count 2 = 16 bytes; each
//! 100-entry node adds its master entry (count 3, deleted 2, num-fields 2,
//! "f1" 4, "f2" 4, terminator 2) and the 7 header/terminator bytes, so the
//! listpacks alone are 16.23 bytes per entry (computed here from the
//! rules, and equal to Redis's DUMP in `tests/stream_redis.rs`). Measured
//! on redis-server 7.0.15 (`redis-cli --pipe`, 10000 nodes): `used_memory`
//! grows by 18,385,544 bytes (18.4 per entry: listpacks, jemalloc size
//! classes, the rax) and `MEMORY USAGE s SAMPLES 0` says 22,125,024.
//! Ours: [`Stream::heap_bytes`] is 10,500,230 (10.5 per entry, 0.57× the
//! `used_memory` figure): an entry is 9 bytes (flags 1, ms-delta 1, seq 1,
//! `<len><bytes>` 3 + 3) plus ~1.5 per entry for the node struct and its
//! B-tree slot (`stream_memory` test). Sealed nodes are shrunk to fit, as
//! Redis does with `lpShrinkToFit`.
//!
//! # Hostile input / work bounds
//! A client controls counts (`COUNT 2^63`), IDs and field sizes. Ranges
//! are lazy iterators ([`Range`]) yielding borrowed views, so a count
//! never sizes an allocation; the vectors that claims and history reads
//! return grow one element per entry actually returned. Work per call is
//! bounded by the entries and pending entries visited, which the reply
//! holds (or by XAUTOCLAIM's `10 × COUNT` attempts). Listpacks from files
//! are validated before use ([`listpack::node_from_listpack`]).

pub mod group;
mod id;
pub mod listpack;
pub mod node;

#[cfg(test)]
mod tests;

pub use group::{Consumer, ConsumerGroup, Nack, PendingSummary, ENTRIES_READ_INVALID};
pub use id::{FormattedId, IdSyntax, InvalidStreamId, ParsedId, StreamId};
pub use listpack::{node_from_listpack, node_to_listpack, ListpackError};
pub use node::{MasterFields, Node, Pairs};

use node::FLAG_DELETED;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `STREAM_LISTPACK_MAX_SIZE`: the 1 GB cap on a node's listpack and on
/// one entry's fields and values.
pub const LISTPACK_MAX_SIZE: usize = 1 << 30;

/// The node limits of `streamAppendItem` (`stream-node-max-bytes`,
/// `stream-node-max-entries`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// 0 or more than 1 GB means 1 GB.
    pub max_bytes: usize,
    /// 0 means no limit.
    pub max_entries: u64,
}

impl Default for NodeLimits {
    /// Redis's defaults: 4096 bytes, 100 entries.
    fn default() -> Self {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// Why an append failed (`streamAppendItem`'s `errno`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// `EDOM`: "The ID specified in XADD is equal or smaller than the
    /// target stream top item".
    IdNotGreater,
    /// `ERANGE`: "Elements are too large to be stored" (fields and values
    /// over 1 GB).
    TooLarge,
}

/// How XADD asks for its ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRequest {
    /// `*`.
    Auto,
    /// `<ms>-*`.
    AutoSeq(u64),
    /// `<ms>-<seq>` (or a bare `<ms>`).
    Explicit(StreamId),
}

/// Why no ID could be chosen for XADD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextIdError {
    /// The last ID is `MAX`: "The stream has exhausted the last possible
    /// ID, unable to add more items" (checked before anything else).
    Exhausted,
    /// "The ID specified in XADD is equal or smaller than the target
    /// stream top item".
    NotGreater,
}

/// What trimming keeps (`streamAddTrimArgs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    /// `MAXLEN n`.
    MaxLen(u64),
    /// `MINID id`: entries below `id` go.
    MinId(StreamId),
}

/// A trim request: strategy, `~`, and `LIMIT` (0: none; Redis accepts
/// LIMIT only with `~`, and gives approximate trims a default of
/// `100 × stream-node-max-entries` — the caller's business).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub strategy: TrimStrategy,
    pub approx: bool,
    pub limit: u64,
}

/// The scalar state of a stream (everything but entries and groups).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamMeta {
    pub length: u64,
    pub last_id: StreamId,
    /// First live entry, 0-0 if empty.
    pub first_id: StreamId,
    pub max_deleted_entry_id: StreamId,
    pub entries_added: u64,
}

impl StreamMeta {
    /// `streamEstimateDistanceFromFirstEverEntry`: the logical position
    /// (entries added up to and including `id`) if it can be known, else
    /// [`ENTRIES_READ_INVALID`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        let added = self.entries_added as i64;
        if self.length == 0 && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_entry_id.is_zero() || self.max_deleted_entry_id < self.first_id {
            if id < self.first_id {
                return added - self.length as i64;
            }
            if id == self.first_id {
                return added - self.length as i64 + 1;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// `streamRangeHasTombstones` (`None` ends mean 0-0 and MAX).
    pub fn range_has_tombstones(&self, start: Option<StreamId>, end: Option<StreamId>) -> bool {
        if self.length == 0 || self.max_deleted_entry_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_entry_id {
            return false;
        }
        let start = start.unwrap_or(StreamId::MIN);
        let end = end.unwrap_or(StreamId::MAX);
        start <= self.max_deleted_entry_id && self.max_deleted_entry_id <= end
    }

    /// `streamReplyWithCGLag`: the group's lag, `None` (nil) when unknown.
    pub fn lag(&self, group: &ConsumerGroup) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if group.entries_read != ENTRIES_READ_INVALID
            && !self.range_has_tombstones(Some(group.last_id), None)
        {
            return Some(added - group.entries_read);
        }
        match self.estimate_distance(group.last_id) {
            ENTRIES_READ_INVALID => None,
            read => Some(added - read),
        }
    }
}

/// A stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    meta: StreamMeta,
    groups: BTreeMap<Box<[u8]>, ConsumerGroup>,
}

/// What [`Stream::deliver_new`] delivered: the IDs, ascending, all live
/// (the PEL between the first and the last may also hold NACKs of
/// deleted entries). Reply with `range(first, last)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub ids: Vec<StreamId>,
}

impl Delivery {
    /// The first ID delivered (`StreamId::MIN` when none).
    pub fn first(&self) -> StreamId {
        self.ids.first().copied().unwrap_or(StreamId::MIN)
    }
    /// The last ID delivered (`StreamId::MIN` when none).
    pub fn last(&self) -> StreamId {
        self.ids.last().copied().unwrap_or(StreamId::MIN)
    }
    pub fn count(&self) -> usize {
        self.ids.len()
    }
}

/// XCLAIM's options; times in Unix ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimOptions {
    /// `min-idle-time` (0: none).
    pub min_idle_ms: i64,
    /// The new delivery time (`IDLE`/`TIME`, default now).
    pub delivery_time_ms: i64,
    /// `RETRYCOUNT`.
    pub retry_count: Option<u64>,
    pub force: bool,
    pub justid: bool,
    pub now_ms: i64,
}

/// XAUTOCLAIM's arguments; times in Unix ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoClaimOptions {
    /// Where the walk of the group PEL starts.
    pub start: StreamId,
    /// `COUNT` (the caller keeps `10 × count` in range).
    pub count: u64,
    /// `min-idle-time` (0: none).
    pub min_idle_ms: i64,
    pub justid: bool,
    pub now_ms: i64,
}

/// What XCLAIM or XAUTOCLAIM did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claimed {
    /// The IDs now owned by the consumer, in reply order.
    pub claimed: Vec<StreamId>,
    /// Pending IDs whose entries were gone and were dropped from the PEL
    /// (XAUTOCLAIM replies with them; both propagate them).
    pub deleted: Vec<StreamId>,
    /// XAUTOCLAIM's cursor: the next pending ID, or 0-0 at the end.
    pub next: StreamId,
    /// Whether the consumer had to be created.
    pub consumer_created: bool,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Live entries (`XLEN`).
    pub fn len(&self) -> u64 {
        self.meta.length
    }

    pub fn is_empty(&self) -> bool {
        self.meta.length == 0
    }

    /// The scalar state.
    pub fn meta(&self) -> StreamMeta {
        self.meta
    }

    pub fn last_id(&self) -> StreamId {
        self.meta.last_id
    }

    pub fn first_id(&self) -> StreamId {
        self.meta.first_id
    }

    pub fn max_deleted_entry_id(&self) -> StreamId {
        self.meta.max_deleted_entry_id
    }

    pub fn entries_added(&self) -> u64 {
        self.meta.entries_added
    }

    /// Nodes, keyed by master ID (`radix-tree-keys` is their count).
    pub fn nodes(&self) -> &BTreeMap<StreamId, Node> {
        &self.nodes
    }

    /// XADD's ID choice (`streamAppendItem` with `streamNextID`). The
    /// caller first refuses an explicit `0-0` ("must be greater than 0-0"),
    /// as XADD does before looking the key up.
    pub fn next_id(&self, req: IdRequest, now_ms: u64) -> Result<StreamId, NextIdError> {
        let last = self.meta.last_id;
        if last == StreamId::MAX {
            return Err(NextIdError::Exhausted);
        }
        let id = match req {
            IdRequest::Auto => {
                if now_ms > last.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    last.incr().ok_or(NextIdError::Exhausted)?
                }
            }
            IdRequest::AutoSeq(ms) => {
                if ms == last.ms {
                    if last.seq == u64::MAX {
                        return Err(NextIdError::NotGreater);
                    }
                    StreamId::new(ms, last.seq + 1)
                } else {
                    StreamId::new(ms, 0)
                }
            }
            IdRequest::Explicit(id) => id,
        };
        if id <= last {
            return Err(NextIdError::NotGreater);
        }
        Ok(id)
    }

    /// Appends an entry (`streamAppendItem`): `id` must be above the last
    /// ID. Updates length, last/first ID and `entries_added`.
    pub fn append<'f, I>(
        &mut self,
        id: StreamId,
        pairs: I,
        limits: NodeLimits,
    ) -> Result<(), AppendError>
    where
        I: Iterator<Item = (&'f [u8], &'f [u8])> + Clone,
    {
        if id <= self.meta.last_id {
            return Err(AppendError::IdNotGreater);
        }
        let mut totelelen = 0usize;
        let mut nfields = 0usize;
        for (f, v) in pairs.clone() {
            totelelen = totelelen.saturating_add(f.len()).saturating_add(v.len());
            nfields += 1;
        }
        if totelelen > LISTPACK_MAX_SIZE {
            return Err(AppendError::TooLarge);
        }
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            limits.max_bytes
        };
        let tail = self.nodes.iter_mut().next_back();
        let new_node = match &tail {
            None => true,
            Some((_, n)) => {
                n.lp_bytes() + totelelen >= max_bytes
                    || (limits.max_entries != 0 && n.live() + n.deleted() >= limits.max_entries)
            }
        };
        if new_node {
            if let Some((_, n)) = tail {
                n.shrink();
            }
            self.nodes.insert(id, Node::new(id, pairs));
        } else {
            let (master, n) = tail.expect("not a new node");
            let flags = if n.same_fields(nfields, pairs.clone()) {
                node::FLAG_SAMEFIELDS
            } else {
                0
            };
            let master = *master;
            n.push_entry(master, id, flags, nfields, pairs);
        }
        self.meta.length += 1;
        self.meta.entries_added += 1;
        self.meta.last_id = id;
        if self.meta.length == 1 {
            self.meta.first_id = id;
        }
        Ok(())
    }

    /// Live entries with `start <= id <= end`, in order (or reversed),
    /// lazily; an empty range if `start > end`.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Range<'_> {
        Range::new(&self.nodes, start, end, rev)
    }

    /// The entry with this ID, if live.
    pub fn get(&self, id: StreamId) -> Option<Pairs<'_>> {
        let (master, n) = self.nodes.range(..=id).next_back()?;
        let (_, e) = n.find(*master, id)?;
        if e.flags & FLAG_DELETED != 0 {
            return None;
        }
        Some(n.pairs(&e))
    }

    /// Whether a live entry has this ID (`streamEntryExists`).
    /// The ID of the last live entry (Redis's `streamLastValidID`).
    /// O(1) unless the last node holds deleted entries.
    pub fn last_live_id(&self) -> Option<StreamId> {
        let (_, n) = self.nodes.last_key_value()?;
        if n.deleted() == 0 {
            return Some(n.last_id());
        }
        self.range(StreamId::MIN, StreamId::MAX, true)
            .next()
            .map(|(id, _)| id)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// Deletes one entry as XDEL does (`streamDeleteItem` plus XDEL's
    /// bookkeeping): the entry is marked deleted — its node dropped if it
    /// was the node's last live one — `max_deleted_entry_id` raised and
    /// `first_id` recomputed if needed. False if there was no live entry.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, n)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Some((pos, e)) = n.find(master, id) else {
            return false;
        };
        if e.flags & FLAG_DELETED != 0 {
            return false;
        }
        if n.live() == 1 {
            self.nodes.remove(&master);
        } else {
            n.mark_deleted(pos);
        }
        self.meta.length -= 1;
        if id > self.meta.max_deleted_entry_id {
            self.meta.max_deleted_entry_id = id;
        }
        if self.meta.length == 0 {
            self.meta.first_id = StreamId::MIN;
        } else if id == self.meta.first_id {
            self.meta.first_id = self.first_live();
        }
        true
    }

    fn first_live(&self) -> StreamId {
        self.range(StreamId::MIN, StreamId::MAX, false)
            .next()
            .map(|(id, _)| id)
            .unwrap_or(StreamId::MAX)
    }

    /// `streamTrim`: removes entries from the head; returns how many.
    ///
    /// Whole nodes go while the strategy allows (MAXLEN: the rest still
    /// holds `maxlen`; MINID: the node's last entry is below the ID) and
    /// `LIMIT` is not exceeded; then, unless approximate, entries of the
    /// first remaining node are marked deleted one by one (LIMIT does not
    /// apply there). `first_id` is recomputed; `max_deleted_entry_id` is
    /// not touched (as in Redis).
    pub fn trim(&mut self, trim: Trim) -> u64 {
        let mut removed = 0u64;
        while let Some(mut first) = self.nodes.first_entry() {
            if let TrimStrategy::MaxLen(maxlen) = trim.strategy {
                if self.meta.length <= maxlen {
                    break;
                }
            }
            let entries = first.get().live();
            if trim.limit != 0 && removed + entries > trim.limit {
                break;
            }
            let remove_node = match trim.strategy {
                TrimStrategy::MaxLen(maxlen) => self.meta.length - entries >= maxlen,
                TrimStrategy::MinId(min) => first.get().last_id() < min,
            };
            if remove_node {
                first.remove();
                self.meta.length -= entries;
                removed += entries;
                continue;
            }
            if trim.approx {
                break;
            }
            let master = *first.key();
            let n = first.get_mut();
            let mut pos = n.entries_start();
            while let Some(e) = n.entry_at(master, pos) {
                let stop = match trim.strategy {
                    TrimStrategy::MaxLen(maxlen) => self.meta.length <= maxlen,
                    TrimStrategy::MinId(min) => e.id >= min,
                };
                if stop {
                    break;
                }
                if e.flags & FLAG_DELETED == 0 {
                    n.mark_deleted(pos);
                    self.meta.length -= 1;
                    removed += 1;
                }
                pos = e.end;
            }
            break;
        }
        self.meta.first_id = if self.meta.length == 0 {
            StreamId::MIN
        } else {
            self.first_live()
        };
        removed
    }

    /// `XSETID id [ENTRIESADDED n] [MAXDELETEDID id]` (validated by the
    /// caller).
    pub fn set_id(
        &mut self,
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) {
        self.meta.last_id = last_id;
        if let Some(n) = entries_added {
            self.meta.entries_added = n;
        }
        if let Some(id) = max_deleted {
            self.meta.max_deleted_entry_id = id;
        }
    }

    /// Bytes the stream holds, for `MEMORY USAGE`: node buffers and their
    /// tree, the groups with their PELs and consumers.
    pub fn heap_bytes(&self) -> usize {
        let per_node = std::mem::size_of::<(StreamId, Node)>() * 3 / 2;
        let mut n = std::mem::size_of::<Stream>();
        for node in self.nodes.values() {
            n += per_node + node.heap_bytes();
        }
        for (name, g) in &self.groups {
            n += name.len() + std::mem::size_of::<(Box<[u8]>, ConsumerGroup)>() * 3 / 2;
            n += g.heap_bytes();
        }
        n
    }

    // ---------------------------------------------------------------
    // Consumer groups
    // ---------------------------------------------------------------

    /// A group by name.
    pub fn group(&self, name: &[u8]) -> Option<&ConsumerGroup> {
        self.groups.get(name)
    }

    /// A group by name, for the operations that need no entries (ACK,
    /// consumers, SETID).
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut ConsumerGroup> {
        self.groups.get_mut(name)
    }

    /// The groups, in name order.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &ConsumerGroup)> + '_ {
        self.groups.iter().map(|(k, v)| (&k[..], v))
    }

    /// `XGROUP CREATE` (`streamCreateCG`): false if the name is taken.
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups
            .insert(name.into(), ConsumerGroup::new(last_id, entries_read));
        true
    }

    /// Inserts a restored group (from an RDB); false if the name is taken.
    pub fn insert_group(&mut self, name: &[u8], group: ConsumerGroup) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups.insert(name.into(), group);
        true
    }

    /// `XGROUP DESTROY`: true if it existed.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// The lag `XINFO GROUPS` shows for a group (`None`: nil).
    pub fn group_lag(&self, name: &[u8]) -> Option<i64> {
        self.meta.lag(self.groups.get(name)?)
    }

    /// XREADGROUP `>`: delivers up to `count` entries (0: no limit) after
    /// the group's last ID to `consumer` (created if missing; the caller
    /// normally did [`ConsumerGroup::touch_consumer`] first), advancing
    /// `last_id` and `entries_read` as `streamReplyWithRange` does and
    /// adding NACKs unless `noack`. `None` if the group does not exist.
    pub fn deliver_new(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        count: usize,
        noack: bool,
        now_ms: i64,
    ) -> Option<Delivery> {
        let g = self.groups.get_mut(group)?;
        let meta = self.meta;
        let mut out = Delivery { ids: Vec::new() };
        let Some(start) = g.last_id.incr() else {
            return Some(out);
        };
        for (id, _) in Range::new(&self.nodes, start, StreamId::MAX, false) {
            if count != 0 && out.ids.len() == count {
                break;
            }
            if id > g.last_id {
                if g.entries_read != ENTRIES_READ_INVALID
                    && !meta.range_has_tombstones(Some(id), None)
                {
                    g.entries_read += 1;
                } else if meta.entries_added != 0 {
                    g.entries_read = meta.estimate_distance(id);
                }
                g.last_id = id;
            }
            if !noack {
                g.deliver(id, consumer, now_ms);
            }
            out.ids.push(id);
        }
        Some(out)
    }

    /// XREADGROUP with an ID (history): the consumer's pending IDs from
    /// `start`, up to `count` (0: no limit), each with whether its entry
    /// still exists; existing ones get delivery time `now` and one more
    /// delivery (`streamReplyWithRangeFromConsumerPEL`). `None` if the
    /// group does not exist; empty if the consumer does not.
    pub fn deliver_pending(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        start: StreamId,
        count: usize,
        now_ms: i64,
    ) -> Option<Vec<(StreamId, bool)>> {
        let g = self.groups.get_mut(group)?;
        let mut out = Vec::new();
        let Some(c) = g.consumer(consumer) else {
            return Some(out);
        };
        let mut cursor = Some(start);
        while let Some(from) = cursor {
            if count != 0 && out.len() == count {
                break;
            }
            let Some(&id) = c.pending().range(from..).next() else {
                break;
            };
            out.push((id, false));
            cursor = id.incr();
        }
        // A second pass so the lookups borrow the nodes while the group is
        // updated (the consumer set was only read above).
        for (id, exists) in out.iter_mut() {
            let (master, n) = match self.nodes.range(..=*id).next_back() {
                Some(x) => x,
                None => continue,
            };
            if let Some((_, e)) = n.find(*master, *id) {
                if e.flags & FLAG_DELETED == 0 {
                    *exists = true;
                    let nack = g.nack_mut(*id).expect("consumer PEL ⊆ group PEL");
                    nack.delivery_time = now_ms;
                    nack.delivery_count += 1;
                }
            }
        }
        Some(out)
    }

    /// XCLAIM: for each ID, as 7.0's `xclaimCommand` (IDs whose entry is
    /// gone leave the PEL and are reported in `deleted`; FORCE creates a
    /// NACK for a live entry; the idle check skips young NACKs; the
    /// consumer is created at the first claim). `None` if no such group.
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        opts: ClaimOptions,
    ) -> Option<Claimed> {
        let g = self.groups.get_mut(group)?;
        let mut out = Claimed::default();
        let mut looked_up = false;
        for &id in ids {
            let exists = entry_exists(&self.nodes, id);
            let pending = g.pel().contains_key(&id);
            if !exists {
                if pending {
                    g.drop_nack(id);
                    out.deleted.push(id);
                }
                continue;
            }
            let mut forced = false;
            if opts.force && !pending {
                g.force_nack(id, opts.now_ms);
                forced = true;
            } else if !pending {
                continue;
            }
            if !forced && opts.min_idle_ms != 0 {
                let nack = &g.pel()[&id];
                if opts.now_ms - nack.delivery_time < opts.min_idle_ms {
                    continue;
                }
            }
            if !looked_up {
                // `streamLookupConsumer` at the first claim refreshes
                // seen-time (or creates the consumer).
                out.consumer_created = g.touch_consumer(consumer, opts.now_ms);
                looked_up = true;
            }
            g.transfer(
                id,
                consumer,
                opts.now_ms,
                opts.delivery_time_ms,
                opts.retry_count,
                !opts.justid,
            );
            out.claimed.push(id);
        }
        Some(out)
    }

    /// XAUTOCLAIM: walks the group PEL from `start`, at most `count`
    /// results and `10 × count` attempts (the caller bounds `count`),
    /// claiming NACKs idle at least `min_idle_ms` and dropping those whose
    /// entry is gone (both count towards `count`); `next` is the cursor.
    pub fn autoclaim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        opts: AutoClaimOptions,
    ) -> Option<Claimed> {
        let AutoClaimOptions {
            start,
            count,
            min_idle_ms,
            justid,
            now_ms,
        } = opts;
        let g = self.groups.get_mut(group)?;
        let mut out = Claimed::default();
        let mut looked_up = false;
        let mut attempts = count.saturating_mul(10);
        let mut left = count;
        let mut cursor = Some(start);
        while attempts > 0 && left > 0 {
            attempts -= 1;
            let Some(from) = cursor else { break };
            let Some((&id, delivery_time)) = g
                .pel()
                .range(from..)
                .next()
                .map(|(id, n)| (id, n.delivery_time))
            else {
                cursor = None;
                break;
            };
            cursor = id.incr();
            if !entry_exists(&self.nodes, id) {
                g.drop_nack(id);
                out.deleted.push(id);
                left -= 1;
                continue;
            }
            if min_idle_ms != 0 && now_ms - delivery_time < min_idle_ms {
                continue;
            }
            if !looked_up {
                out.consumer_created = g.touch_consumer(consumer, now_ms);
                looked_up = true;
            }
            g.transfer(id, consumer, now_ms, now_ms, None, !justid);
            out.claimed.push(id);
            left -= 1;
        }
        out.next = cursor
            .and_then(|c| g.pel().range(c..).next().map(|(id, _)| *id))
            .unwrap_or(StreamId::MIN);
        Some(out)
    }

    // ---------------------------------------------------------------
    // Restoring from a file
    // ---------------------------------------------------------------

    /// Adds a node read from an RDB/`RESTORE` listpack. Nodes must come
    /// in order, each starting above the previous one's last entry.
    pub fn restore_node(&mut self, master: StreamId, lp: &[u8]) -> Result<(), ListpackError> {
        if let Some((_, prev)) = self.nodes.iter().next_back() {
            if master <= prev.last_id() {
                return Err(ListpackError::BadNode(
                    "node key not above the previous node",
                ));
            }
        }
        let node = node_from_listpack(master, lp)?;
        self.nodes.insert(master, node);
        Ok(())
    }

    /// Sets the scalar state read from a file after the nodes; checks it
    /// against them (length equals the live entries, the last ID is not
    /// below the last entry, first ID is the first live entry).
    pub fn restore_meta(&mut self, meta: StreamMeta) -> Result<(), ListpackError> {
        let live: u64 = self.nodes.values().map(Node::live).sum();
        if live != meta.length {
            return Err(ListpackError::BadNode(
                "stream length does not match its nodes",
            ));
        }
        if let Some((_, last)) = self.nodes.iter().next_back() {
            if meta.last_id < last.last_id() {
                return Err(ListpackError::BadNode("last ID below the last entry"));
            }
        }
        self.meta = meta;
        // Redis 7.0 loads first_id from the file; keep what the entries
        // say when they disagree (an older file has none).
        self.meta.first_id = if meta.length == 0 {
            StreamId::MIN
        } else {
            self.first_live()
        };
        Ok(())
    }
}

fn entry_exists(nodes: &BTreeMap<StreamId, Node>, id: StreamId) -> bool {
    let Some((master, n)) = nodes.range(..=id).next_back() else {
        return false;
    };
    matches!(n.find(*master, id), Some((_, e)) if e.flags & FLAG_DELETED == 0)
}

/// Live entries of a stream in an ID range, as `(id, pairs)`, lazily.
pub struct Range<'a> {
    nodes: std::collections::btree_map::Range<'a, StreamId, Node>,
    cur: Option<(StreamId, &'a Node)>,
    /// Forward: offset of the next entry in `cur`.
    pos: usize,
    /// Reverse: offsets of `cur`'s entries still to yield.
    offsets: Vec<usize>,
    start: StreamId,
    end: StreamId,
    rev: bool,
}

impl<'a> Range<'a> {
    fn new(nodes: &'a BTreeMap<StreamId, Node>, start: StreamId, end: StreamId, rev: bool) -> Self {
        let iter = if start > end {
            // An empty map range that cannot panic.
            nodes.range(StreamId::MAX..StreamId::MAX)
        } else if rev {
            nodes.range(..=end)
        } else {
            let lo = nodes
                .range(..=start)
                .next_back()
                .map(|(k, _)| *k)
                .unwrap_or(start);
            nodes.range(lo..=end)
        };
        Range {
            nodes: iter,
            cur: None,
            pos: 0,
            offsets: Vec::new(),
            start,
            end,
            rev,
        }
    }

    fn next_fwd(&mut self) -> Option<(StreamId, Pairs<'a>)> {
        loop {
            let (master, node) = match self.cur {
                Some(c) => c,
                None => {
                    let (k, n) = self.nodes.next()?;
                    self.cur = Some((*k, n));
                    self.pos = n.entries_start();
                    (*k, n)
                }
            };
            while let Some(e) = node.entry_at(master, self.pos) {
                self.pos = e.end;
                if e.id > self.end {
                    // Later nodes only hold larger IDs.
                    self.nodes = empty_range();
                    self.cur = None;
                    return None;
                }
                if e.flags & FLAG_DELETED != 0 || e.id < self.start {
                    continue;
                }
                return Some((e.id, node.pairs(&e)));
            }
            self.cur = None;
        }
    }

    fn next_rev(&mut self) -> Option<(StreamId, Pairs<'a>)> {
        loop {
            if let Some((master, node)) = self.cur {
                if let Some(pos) = self.offsets.pop() {
                    let e = node.entry_at(master, pos).expect("recorded offset");
                    return Some((e.id, node.pairs(&e)));
                }
                self.cur = None;
            }
            let (k, n) = self.nodes.next_back()?;
            if n.last_id() < self.start {
                self.nodes = empty_range();
                return None;
            }
            self.offsets.clear();
            let mut pos = n.entries_start();
            while let Some(e) = n.entry_at(*k, pos) {
                if e.id > self.end {
                    break;
                }
                if e.flags & FLAG_DELETED == 0 && e.id >= self.start {
                    self.offsets.push(pos);
                }
                pos = e.end;
            }
            self.cur = Some((*k, n));
        }
    }
}

fn empty_range<'a>() -> std::collections::btree_map::Range<'a, StreamId, Node> {
    // A range of a map that lives forever: an empty static map.
    static EMPTY: BTreeMap<StreamId, Node> = BTreeMap::new();
    EMPTY.range(..)
}

impl<'a> Iterator for Range<'a> {
    type Item = (StreamId, Pairs<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rev {
            self.next_rev()
        } else {
            self.next_fwd()
        }
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Stream>();
    is::<Arc<Stream>>();
}
