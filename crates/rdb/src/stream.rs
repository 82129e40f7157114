//! The stream value of an RDB file (Redis's `rdbSaveObject`/`rdbLoadObject`
//! for `OBJ_STREAM`), as a format and nothing more: the nodes' listpacks
//! are carried as the bytes the file holds, and their content is the stream
//! type's business (`ferrokv_store`), which validates and decodes them.
//!
//! # Layout (type 19, `STREAM_LISTPACKS_2`, what Redis 7.0 writes)
//! - the node count, then per node its master ID as a 16-byte string (the
//!   big-endian `ms` and `seq`, the radix tree's key) and its listpack as a
//!   string (LZF-compressed when long enough, as any string);
//! - the length, the last ID (`ms`, `seq` as lengths), the first ID, the
//!   largest deleted ID, `entries_added`;
//! - the group count, then per group: its name, its last ID, its
//!   `entries_read` (a length; -1, "unknown", is written as 2^64 - 1), its
//!   PEL (count, then per entry the raw 16-byte ID, the delivery time as 8
//!   little-endian bytes of milliseconds, the delivery count as a length),
//!   and its consumers (count, then per consumer its name, its seen time in
//!   8 bytes, and its own PEL as raw IDs only, each of which must be in the
//!   group's PEL).
//!
//! Type 15 (`STREAM_LISTPACKS`, Redis 5 and 6) lacks the first ID, the
//! largest deleted ID, `entries_added` and the groups' `entries_read`:
//! they decode as `None`, for the loader to derive as Redis does. Type 21
//! (Redis 7.2) adds each consumer's active time after its seen time; it
//! decodes too, and is never written.
//!
//! # Hostile input
//! Counts only size allocations up to what the remaining input could hold.
//! The checks that need no decoding of a listpack are made here, with
//! Redis's reasons: a node key that is not 16 bytes, an empty listpack
//! string, the same node key twice, the same group, consumer or PEL ID
//! twice, and a consumer's PEL ID that is not in the group's PEL.

use std::borrow::Cow;
use std::collections::BTreeSet;

/// A stream ID, `(ms, seq)`.
pub type RawId = (u64, u64);

/// A stream as an RDB file holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamPayload<'a> {
    /// The radix tree's nodes in ID order: master ID and listpack bytes.
    pub nodes: Vec<(RawId, Cow<'a, [u8]>)>,
    pub length: u64,
    pub last_id: RawId,
    /// `None` in a type-15 file (Redis derives it from the first entry).
    pub first_id: Option<RawId>,
    /// `None` in a type-15 file (0-0 there).
    pub max_deleted_entry_id: Option<RawId>,
    /// `None` in a type-15 file (the length there).
    pub entries_added: Option<u64>,
    pub groups: Vec<StreamGroup<'a>>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamGroup<'a> {
    pub name: Cow<'a, [u8]>,
    pub last_id: RawId,
    /// `None` in a type-15 file (estimated by the loader, as Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`); -1 is "unknown".
    pub entries_read: Option<i64>,
    /// The group's PEL in ID order: ID, delivery time (ms), delivery count.
    pub pel: Vec<(RawId, u64, u64)>,
    pub consumers: Vec<StreamConsumer<'a>>,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamConsumer<'a> {
    pub name: Cow<'a, [u8]>,
    pub seen_time: u64,
    /// Only in a type-21 file (Redis 7.2).
    pub active_time: Option<u64>,
    /// The IDs of the group's PEL this consumer owns, in ID order.
    pub pel: Vec<RawId>,
}

impl StreamPayload<'_> {
    /// A copy that owns its bytes.
    pub fn into_owned(self) -> StreamPayload<'static> {
        StreamPayload {
            nodes: self
                .nodes
                .into_iter()
                .map(|(id, lp)| (id, Cow::Owned(lp.into_owned())))
                .collect(),
            length: self.length,
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
            groups: self
                .groups
                .into_iter()
                .map(|g| StreamGroup {
                    name: Cow::Owned(g.name.into_owned()),
                    last_id: g.last_id,
                    entries_read: g.entries_read,
                    pel: g.pel,
                    consumers: g
                        .consumers
                        .into_iter()
                        .map(|c| StreamConsumer {
                            name: Cow::Owned(c.name.into_owned()),
                            seen_time: c.seen_time,
                            active_time: c.active_time,
                            pel: c.pel,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A raw 16-byte ID as the radix trees key it: big-endian `ms`, `seq`.
pub fn raw_id_bytes(id: RawId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.0.to_be_bytes());
    b[8..].copy_from_slice(&id.1.to_be_bytes());
    b
}

/// The ID a 16-byte radix tree key holds.
pub fn raw_id_from(b: &[u8; 16]) -> RawId {
    (
        u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
        u64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
    )
}

/// What the decoder needs from its reader (kept apart so this file does
/// not reach into the decoder's cursor).
pub(crate) trait Source<'a> {
    fn pos(&self) -> usize;
    fn length(&mut self) -> Result<u64, crate::DecodeError>;
    fn string(&mut self) -> Result<Cow<'a, [u8]>, crate::DecodeError>;
    fn raw16(&mut self) -> Result<[u8; 16], crate::DecodeError>;
    fn millis(&mut self) -> Result<u64, crate::DecodeError>;
    fn capacity_for(&self, n: u64, min_bytes: usize) -> usize;
}

fn corrupt(offset: usize, reason: &'static str) -> crate::DecodeError {
    crate::DecodeError::Corrupt {
        offset,
        what: "stream",
        reason,
    }
}

/// Decodes a stream value of RDB type `rdb_type` (15, 19 or 21).
pub(crate) fn decode<'a>(
    r: &mut impl Source<'a>,
    rdb_type: u8,
) -> Result<StreamPayload<'a>, crate::DecodeError> {
    use crate::consts::{TYPE_STREAM_LISTPACKS, TYPE_STREAM_LISTPACKS_3};
    let v1 = rdb_type == TYPE_STREAM_LISTPACKS;
    let v3 = rdb_type == TYPE_STREAM_LISTPACKS_3;
    let n = r.length()?;
    let mut nodes: Vec<(RawId, Cow<'a, [u8]>)> = Vec::with_capacity(r.capacity_for(n, 2));
    let mut keys = BTreeSet::new();
    for _ in 0..n {
        let at = r.pos();
        let key = r.string()?;
        let key: [u8; 16] = key
            .as_ref()
            .try_into()
            .map_err(|_| corrupt(at, "Stream node key entry is not the size of a stream ID"))?;
        let at = r.pos();
        let lp = r.string()?;
        if lp.is_empty() {
            return Err(corrupt(at, "Stream listpack integrity check failed."));
        }
        let id = raw_id_from(&key);
        if !keys.insert(id) {
            return Err(corrupt(at, "Listpack re-added with existing key"));
        }
        nodes.push((id, lp));
    }
    // The file lists the nodes in radix tree (ID) order; keep that order
    // whatever a crafted file says.
    nodes.sort_by_key(|n| n.0);
    let length = r.length()?;
    let last_id = (r.length()?, r.length()?);
    let (first_id, max_deleted_entry_id, entries_added) = if v1 {
        (None, None, None)
    } else {
        (
            Some((r.length()?, r.length()?)),
            Some((r.length()?, r.length()?)),
            Some(r.length()?),
        )
    };
    let ngroups = r.length()?;
    let mut groups: Vec<StreamGroup<'a>> = Vec::with_capacity(r.capacity_for(ngroups, 4));
    let mut names = BTreeSet::new();
    for _ in 0..ngroups {
        let at = r.pos();
        let name = r.string()?;
        if !names.insert(name.clone()) {
            return Err(corrupt(at, "Duplicated consumer group name"));
        }
        let last_id = (r.length()?, r.length()?);
        let entries_read = if v1 { None } else { Some(r.length()? as i64) };
        let npel = r.length()?;
        let mut pel: Vec<(RawId, u64, u64)> = Vec::with_capacity(r.capacity_for(npel, 25));
        for _ in 0..npel {
            let at = r.pos();
            let id = raw_id_from(&r.raw16()?);
            let time = r.millis()?;
            let count = r.length()?;
            if pel.last().is_some_and(|p| p.0 >= id) {
                // A radix tree is written in key order: out of order or
                // repeated is a crafted file.
                return Err(corrupt(
                    at,
                    "Duplicated global PEL entry loading stream consumer group",
                ));
            }
            pel.push((id, time, count));
        }
        let nconsumers = r.length()?;
        let mut consumers: Vec<StreamConsumer<'a>> =
            Vec::with_capacity(r.capacity_for(nconsumers, 10));
        let mut cnames = BTreeSet::new();
        let mut owned = BTreeSet::new();
        for _ in 0..nconsumers {
            let at = r.pos();
            let name = r.string()?;
            if !cnames.insert(name.clone()) {
                return Err(corrupt(at, "Duplicate stream consumer detected."));
            }
            let seen_time = r.millis()?;
            let active_time = if v3 { Some(r.millis()?) } else { None };
            let n = r.length()?;
            let mut ids: Vec<RawId> = Vec::with_capacity(r.capacity_for(n, 16));
            for _ in 0..n {
                let at = r.pos();
                let id = raw_id_from(&r.raw16()?);
                if pel.binary_search_by_key(&id, |p| p.0).is_err() {
                    return Err(corrupt(at, "Consumer entry not found in group global PEL"));
                }
                if !owned.insert(id) {
                    return Err(corrupt(
                        at,
                        "Duplicated consumer PEL entry loading a stream consumer group",
                    ));
                }
                ids.push(id);
            }
            ids.sort_unstable();
            consumers.push(StreamConsumer {
                name,
                seen_time,
                active_time,
                pel: ids,
            });
        }
        if owned.len() != pel.len() {
            // Redis checks this with deep sanitization only; a NACK
            // without a consumer cannot be represented here at all.
            return Err(corrupt(r.pos(), "Stream CG PEL entry without consumer"));
        }
        groups.push(StreamGroup {
            name,
            last_id,
            entries_read,
            pel,
            consumers,
        });
    }
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(StreamPayload {
        nodes,
        length,
        last_id,
        first_id,
        max_deleted_entry_id,
        entries_added,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ids_are_big_endian() {
        let b = raw_id_bytes((1, 2));
        assert_eq!(&b[..8], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&b[8..], &[0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!(raw_id_from(&b), (1, 2));
        let m = (u64::MAX, u64::MAX - 1);
        assert_eq!(raw_id_from(&raw_id_bytes(m)), m);
    }
}
