//! Consumer groups (Redis 7.0's `streamCG`, `streamConsumer`,
//! `streamNACK`).
//!
//! A group's pending entries list (PEL) maps an entry ID to its [`Nack`]
//! (owner, last delivery time, delivery count); each consumer keeps the set
//! of IDs it owns, so its own pending list is read without scanning the
//! group's. A NACK names its owner by a shared `Arc<[u8]>` of the
//! consumer's name (16 bytes, no copy of the name per entry). Consumers and
//! groups are ordered by name bytes, as Redis's radix trees order them.
//!
//! 7.0.15 keeps one time per consumer, `seen-time` (the last time it
//! read or claimed, or was created); 7.2's `active-time` does not exist yet.
//!
//! The operations that need the stream's entries (delivering `>`, reading
//! history, XCLAIM, XAUTOCLAIM, lag) are on [`super::Stream`].

use super::StreamId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `SCG_INVALID_ENTRIES_READ`: the group's read counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A pending entry: delivered, not acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// The consumer it was last delivered to.
    pub consumer: Arc<[u8]>,
    /// Unix time in ms of the last delivery.
    pub delivery_time: i64,
    /// Times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Last time (Unix ms) it read, claimed or was created (`seen-time`).
    pub seen_time: i64,
    pel: BTreeSet<StreamId>,
}

impl Consumer {
    /// The IDs pending for this consumer, in order.
    pub fn pending(&self) -> &BTreeSet<StreamId> {
        &self.pel
    }
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Last delivered ID: `>` reads entries after it.
    pub last_id: StreamId,
    /// Logical count of entries read ([`ENTRIES_READ_INVALID`] if unknown).
    pub entries_read: i64,
    pel: BTreeMap<StreamId, Nack>,
    consumers: BTreeMap<Arc<[u8]>, Consumer>,
    /// NACKs restored from a file whose owner is not known yet.
    unowned: BTreeSet<StreamId>,
}

/// What was wrong with a restored group (from an RDB or `RESTORE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// The same ID appears twice in the group PEL.
    DuplicatePending,
    /// Two consumers with one name.
    DuplicateConsumer,
    /// A consumer's PEL names an ID missing from the group PEL, or one
    /// that another consumer owns already.
    BadConsumerPending,
    /// A group NACK no consumer owns.
    UnownedPending,
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RestoreError::DuplicatePending => "duplicate ID in a group PEL",
            RestoreError::DuplicateConsumer => "duplicate consumer name",
            RestoreError::BadConsumerPending => {
                "consumer PEL entry missing from the group PEL or owned twice"
            }
            RestoreError::UnownedPending => "group PEL entry without an owner",
        })
    }
}

impl std::error::Error for RestoreError {}

/// Summary of a group's PEL (`XPENDING key group`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSummary {
    pub count: usize,
    /// Smallest and largest pending IDs, when there are any.
    pub bounds: Option<(StreamId, StreamId)>,
}

impl ConsumerGroup {
    /// A group with no consumers (`streamCreateCG`).
    pub fn new(last_id: StreamId, entries_read: i64) -> ConsumerGroup {
        ConsumerGroup {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
            unowned: BTreeSet::new(),
        }
    }

    /// `XGROUP SETID`: both fields at once (entries_read defaults to
    /// [`ENTRIES_READ_INVALID`] in the command).
    pub fn set_id(&mut self, id: StreamId, entries_read: i64) {
        self.last_id = id;
        self.entries_read = entries_read;
    }

    /// The group PEL, in ID order.
    pub fn pel(&self) -> &BTreeMap<StreamId, Nack> {
        &self.pel
    }

    /// A consumer by name.
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }

    /// The consumers, in name order.
    pub fn consumers(&self) -> impl Iterator<Item = (&[u8], &Consumer)> + '_ {
        self.consumers.iter().map(|(k, v)| (&k[..], v))
    }

    /// Number of consumers.
    pub fn consumer_count(&self) -> usize {
        self.consumers.len()
    }

    /// `XGROUP CREATECONSUMER` (and the implicit creation of XREADGROUP,
    /// XCLAIM): true if it was created, false if it existed.
    pub fn create_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Arc::from(name),
            Consumer {
                seen_time: now_ms,
                pel: BTreeSet::new(),
            },
        );
        true
    }

    /// `streamLookupConsumer` + create as XREADGROUP does: the consumer
    /// exists afterwards with `seen_time = now`. True if it was created.
    pub fn touch_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        match self.consumers.get_mut(name) {
            Some(c) => {
                c.seen_time = now_ms;
                false
            }
            None => self.create_consumer(name, now_ms),
        }
    }

    /// `XGROUP DELCONSUMER`: removes the consumer and its pending entries
    /// from the group PEL; returns how many it had, `None` if absent.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// `XACK` of one ID: true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// `XPENDING key group`'s count and bounds; the per-consumer counts are
    /// [`ConsumerGroup::consumers`] with a non-empty [`Consumer::pending`].
    pub fn pending_summary(&self) -> PendingSummary {
        PendingSummary {
            count: self.pel.len(),
            bounds: match (self.pel.keys().next(), self.pel.keys().next_back()) {
                (Some(a), Some(b)) => Some((*a, *b)),
                _ => None,
            },
        }
    }

    /// `XPENDING key group [IDLE] start end count [consumer]`: the pending
    /// entries in `start..=end` in ID order (of one consumer if given),
    /// lazily; the caller filters by idle time and stops at its count.
    pub fn pending_range<'a>(
        &'a self,
        start: StreamId,
        end: StreamId,
        consumer: Option<&[u8]>,
    ) -> PendingRange<'a> {
        if start > end {
            return PendingRange::Empty;
        }
        match consumer {
            None => PendingRange::Group(self.pel.range(start..=end)),
            Some(name) => match self.consumers.get(name) {
                Some(c) => PendingRange::Consumer(&self.pel, c.pel.range(start..=end)),
                None => PendingRange::Empty,
            },
        }
    }

    /// Adds or re-assigns the NACK of a delivered entry, as XREADGROUP
    /// does: a new NACK (count 1), or one another consumer held moved to
    /// this one with its count reset to 1.
    pub(crate) fn deliver(&mut self, id: StreamId, consumer: &[u8], now_ms: i64) {
        let name = self.consumer_arc(consumer, now_ms);
        match self.pel.get_mut(&id) {
            Some(n) => {
                if n.consumer != name {
                    if let Some(old) = self.consumers.get_mut(&n.consumer) {
                        old.pel.remove(&id);
                    }
                    n.consumer = name.clone();
                }
                n.delivery_time = now_ms;
                n.delivery_count = 1;
            }
            None => {
                self.pel.insert(
                    id,
                    Nack {
                        consumer: name.clone(),
                        delivery_time: now_ms,
                        delivery_count: 1,
                    },
                );
            }
        }
        self.consumers
            .get_mut(&name)
            .expect("consumer_arc created it")
            .pel
            .insert(id);
    }

    /// The consumer's shared name, creating the consumer if needed.
    fn consumer_arc(&mut self, name: &[u8], now_ms: i64) -> Arc<[u8]> {
        if let Some((k, _)) = self.consumers.get_key_value(name) {
            return k.clone();
        }
        self.create_consumer(name, now_ms);
        self.consumers
            .get_key_value(name)
            .expect("just created")
            .0
            .clone()
    }

    pub(crate) fn nack_mut(&mut self, id: StreamId) -> Option<&mut Nack> {
        self.pel.get_mut(&id)
    }

    /// Drops a NACK whose entry is gone (XCLAIM / XAUTOCLAIM).
    pub(crate) fn drop_nack(&mut self, id: StreamId) -> bool {
        self.ack(id)
    }

    /// Gives the NACK of `id` to `consumer` (created if missing), setting
    /// its delivery time and count as XCLAIM does.
    pub(crate) fn transfer(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        now_ms: i64,
        delivery_time: i64,
        count: Option<u64>,
        increment: bool,
    ) {
        let name = self.consumer_arc(consumer, now_ms);
        let n = self.pel.get_mut(&id).expect("transfer of a pending ID");
        if n.consumer != name {
            if let Some(old) = self.consumers.get_mut(&n.consumer) {
                old.pel.remove(&id);
            }
            n.consumer = name.clone();
        }
        n.delivery_time = delivery_time;
        if let Some(c) = count {
            n.delivery_count = c;
        } else if increment {
            n.delivery_count += 1;
        }
        self.consumers
            .get_mut(&name)
            .expect("exists")
            .pel
            .insert(id);
    }

    /// A NACK created by XCLAIM's FORCE (`streamCreateNACK(NULL)`: count
    /// 1, delivered now, no owner until [`ConsumerGroup::transfer`]).
    pub(crate) fn force_nack(&mut self, id: StreamId, now_ms: i64) {
        self.pel.insert(
            id,
            Nack {
                consumer: Arc::from(&b""[..]),
                delivery_time: now_ms,
                delivery_count: 1,
            },
        );
    }

    /// Restoring from a file, step 1: a group PEL entry, owner unknown.
    pub fn restore_pending(
        &mut self,
        id: StreamId,
        delivery_time: i64,
        delivery_count: u64,
    ) -> Result<(), RestoreError> {
        if self.pel.contains_key(&id) {
            return Err(RestoreError::DuplicatePending);
        }
        self.force_nack(id, delivery_time);
        self.pel.get_mut(&id).expect("inserted").delivery_count = delivery_count;
        self.unowned.insert(id);
        Ok(())
    }

    /// Restoring, step 2: a consumer and the IDs it owns (each must be in
    /// the group PEL and not owned yet).
    pub fn restore_consumer(
        &mut self,
        name: &[u8],
        seen_time: i64,
        pending: impl IntoIterator<Item = StreamId>,
    ) -> Result<(), RestoreError> {
        if !self.create_consumer(name, seen_time) {
            return Err(RestoreError::DuplicateConsumer);
        }
        let arc = self.consumer_arc(name, seen_time);
        for id in pending {
            if !self.unowned.remove(&id) {
                return Err(RestoreError::BadConsumerPending);
            }
            let c = self.consumers.get_mut(name).expect("created");
            c.pel.insert(id);
            self.pel.get_mut(&id).expect("unowned ⊆ PEL").consumer = arc.clone();
        }
        Ok(())
    }

    /// Restoring, last step: every NACK must have an owner (as Redis's
    /// deep sanitization requires).
    pub fn restore_finish(&self) -> Result<(), RestoreError> {
        if !self.unowned.is_empty() {
            Err(RestoreError::UnownedPending)
        } else {
            Ok(())
        }
    }

    /// Heap bytes of the group (PEL, consumers, names), approximately.
    pub(crate) fn heap_bytes(&self) -> usize {
        // A B-tree element costs its size plus about half again for the
        // node slack and edges.
        let nack = std::mem::size_of::<(StreamId, Nack)>();
        let mut n = self.pel.len() * nack * 3 / 2;
        for (name, c) in &self.consumers {
            n += 16 + name.len() + std::mem::size_of::<(Arc<[u8]>, Consumer)>() * 3 / 2;
            n += c.pel.len() * std::mem::size_of::<StreamId>() * 3 / 2;
        }
        n
    }
}

/// Pending entries in a range ([`ConsumerGroup::pending_range`]).
pub enum PendingRange<'a> {
    Empty,
    Group(std::collections::btree_map::Range<'a, StreamId, Nack>),
    Consumer(
        &'a BTreeMap<StreamId, Nack>,
        std::collections::btree_set::Range<'a, StreamId>,
    ),
}

impl<'a> Iterator for PendingRange<'a> {
    type Item = (StreamId, &'a Nack);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            PendingRange::Empty => None,
            PendingRange::Group(r) => r.next().map(|(k, v)| (*k, v)),
            PendingRange::Consumer(pel, r) => {
                let id = *r.next()?;
                Some((id, pel.get(&id).expect("consumer PEL ⊆ group PEL")))
            }
        }
    }
}
