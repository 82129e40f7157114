//! One stream node: the entries Redis keeps in one listpack, packed our way.
//!
//! ```text
//! buf = master fields: ( <len varint> <bytes> ) * master_fields
//!       entries:       <flags u8> <ms-delta varint> <seq varint>
//!                      ( SAMEFIELDS: ( <len> <value> ) * master_fields
//!                      | otherwise:  <nfields varint> ( <len> <field> <len> <value> ) * nfields )
//! ```
//! `seq` is the delta from the master's sequence when `ms-delta` is 0 (so
//! the common case is one byte) and the absolute sequence otherwise. There
//! is no per-entry back length: reverse iteration walks the node forward
//! once and remembers the entry offsets.
//!
//! The node also knows, exactly, how many bytes Redis's listpack for the
//! same entries would take ([`Node::lp_bytes`]), because Redis decides its
//! node boundaries on that figure.

use super::listpack::{lp_int_size, lp_str_size, LP_HEADER_SIZE};
use super::StreamId;

/// Entry flag: the entry is deleted (a tombstone kept in place).
pub(crate) const FLAG_DELETED: u8 = 1;
/// Entry flag: the entry has the master's field names (only values stored).
pub(crate) const FLAG_SAMEFIELDS: u8 = 2;

/// The entries of one radix-tree node of Redis's stream (one listpack).
///
/// The node's master ID (the ID of its first entry) is its key in the
/// stream's map and is passed in where needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    buf: Vec<u8>,
    /// Where the entries start in `buf` (after the master fields).
    entries_start: usize,
    master_fields: u32,
    /// Live entries (Redis's master `count`).
    live: u64,
    /// Entries marked deleted (Redis's master `deleted`).
    deleted: u64,
    /// Redis's listpack size without the `count` and `deleted` elements,
    /// whose sizes change with their values.
    lp_static: usize,
    /// The ID of the last entry, deleted or not (`lpGetEdgeStreamID`).
    last: StreamId,
}

pub(crate) fn put_varint(buf: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        buf.push((n as u8) | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

/// Reads a varint written by [`put_varint`] from a buffer this module
/// wrote (so it is well formed).
#[inline]
fn get_varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        n |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return n;
        }
        shift += 7;
    }
}

#[inline]
fn get_str<'a>(buf: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let len = get_varint(buf, pos) as usize;
    let s = &buf[*pos..*pos + len];
    *pos += len;
    s
}

fn put_str(buf: &mut Vec<u8>, s: &[u8]) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s);
}

/// The listpack bytes of the entry-level integer parts Redis writes for an
/// entry: flags, ms and seq deltas, (num-fields,) lp-count.
fn lp_entry_overhead(master: StreamId, id: StreamId, flags: u8, nfields: usize) -> usize {
    let same = flags & FLAG_SAMEFIELDS != 0;
    let mut n = lp_int_size(flags as i64)
        + lp_int_size(id.ms.wrapping_sub(master.ms) as i64)
        + lp_int_size(id.seq.wrapping_sub(master.seq) as i64);
    let mut lp_count = nfields as i64 + 3;
    if !same {
        n += lp_int_size(nfields as i64);
        lp_count += nfields as i64 + 1;
    }
    n + lp_int_size(lp_count)
}

/// One decoded entry header: where its items are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawEntry {
    pub(crate) flags: u8,
    pub(crate) id: StreamId,
    pub(crate) nfields: usize,
    /// Offset of the first field (or value, with SAMEFIELDS).
    pub(crate) body: usize,
    /// Offset just past the entry.
    pub(crate) end: usize,
}

impl Node {
    /// A node holding one entry, as `streamAppendItem` creates it: its
    /// master fields are the entry's fields, the entry has SAMEFIELDS.
    pub(crate) fn new<'f>(
        id: StreamId,
        pairs: impl Iterator<Item = (&'f [u8], &'f [u8])> + Clone,
    ) -> Node {
        let mut buf = Vec::new();
        let mut nfields = 0usize;
        let mut lp_static = LP_HEADER_SIZE + 1 + lp_int_size(0); // header, EOF, master terminator
        for (f, _) in pairs.clone() {
            put_str(&mut buf, f);
            lp_static += lp_str_size(f);
            nfields += 1;
        }
        lp_static += lp_int_size(nfields as i64);
        let mut node = Node {
            entries_start: buf.len(),
            buf,
            master_fields: nfields as u32,
            live: 0,
            deleted: 0,
            lp_static,
            last: id,
        };
        node.push_entry(id, id, FLAG_SAMEFIELDS, nfields, pairs);
        node
    }

    /// Whether `pairs` has exactly the master's field names, in order.
    pub(crate) fn same_fields<'f>(
        &self,
        nfields: usize,
        pairs: impl Iterator<Item = (&'f [u8], &'f [u8])>,
    ) -> bool {
        if nfields != self.master_fields as usize {
            return false;
        }
        let mut pos = 0;
        for (f, _) in pairs {
            if get_str(&self.buf, &mut pos) != f {
                return false;
            }
        }
        true
    }

    /// Appends an entry (the caller checked `id > self.last`).
    pub(crate) fn push_entry<'f>(
        &mut self,
        master: StreamId,
        id: StreamId,
        flags: u8,
        nfields: usize,
        pairs: impl Iterator<Item = (&'f [u8], &'f [u8])>,
    ) {
        let same = flags & FLAG_SAMEFIELDS != 0;
        let ms_delta = id.ms - master.ms;
        self.buf.push(flags);
        put_varint(&mut self.buf, ms_delta);
        put_varint(
            &mut self.buf,
            if ms_delta == 0 {
                id.seq - master.seq
            } else {
                id.seq
            },
        );
        let mut lp = lp_entry_overhead(master, id, flags, nfields);
        if !same {
            put_varint(&mut self.buf, nfields as u64);
        }
        for (f, v) in pairs {
            if !same {
                put_str(&mut self.buf, f);
                lp += lp_str_size(f);
            }
            put_str(&mut self.buf, v);
            lp += lp_str_size(v);
        }
        self.lp_static += lp;
        if flags & FLAG_DELETED != 0 {
            self.deleted += 1;
        } else {
            self.live += 1;
        }
        self.last = id;
    }

    /// Redis's `lpBytes` of this node's listpack.
    pub fn lp_bytes(&self) -> usize {
        self.lp_static + lp_int_size(self.live as i64) + lp_int_size(self.deleted as i64)
    }

    /// Live entries (Redis's master-entry `count`).
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Entries marked deleted but still in the node (Redis's `deleted`).
    pub fn deleted(&self) -> u64 {
        self.deleted
    }

    /// The ID of the node's last entry, deleted or not.
    pub fn last_id(&self) -> StreamId {
        self.last
    }

    /// The master entry's field names.
    pub fn master_fields(&self) -> MasterFields<'_> {
        MasterFields {
            buf: &self.buf,
            pos: 0,
            left: self.master_fields as usize,
        }
    }

    /// Heap bytes held by the node (its buffer's capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buf.capacity()
    }

    pub(crate) fn shrink(&mut self) {
        self.buf.shrink_to_fit();
    }

    pub(crate) fn entries_start(&self) -> usize {
        self.entries_start
    }

    /// Decodes the entry at `pos` (an entry boundary), or `None` at the end.
    #[inline]
    pub(crate) fn entry_at(&self, master: StreamId, pos: usize) -> Option<RawEntry> {
        if pos >= self.buf.len() {
            return None;
        }
        let buf = &self.buf[..];
        let mut p = pos;
        let flags = buf[p];
        p += 1;
        let ms_delta = get_varint(buf, &mut p);
        let seq = get_varint(buf, &mut p);
        let id = if ms_delta == 0 {
            StreamId::new(master.ms, master.seq + seq)
        } else {
            StreamId::new(master.ms + ms_delta, seq)
        };
        let (nfields, per_field) = if flags & FLAG_SAMEFIELDS != 0 {
            (self.master_fields as usize, 1)
        } else {
            (get_varint(buf, &mut p) as usize, 2)
        };
        let body = p;
        for _ in 0..nfields * per_field {
            let len = get_varint(buf, &mut p) as usize;
            p += len;
        }
        Some(RawEntry {
            flags,
            id,
            nfields,
            body,
            end: p,
        })
    }

    /// The field/value pairs of an entry.
    pub(crate) fn pairs(&self, e: &RawEntry) -> Pairs<'_> {
        Pairs {
            buf: &self.buf,
            master: if e.flags & FLAG_SAMEFIELDS != 0 {
                Some(0)
            } else {
                None
            },
            pos: e.body,
            left: e.nfields,
        }
    }

    /// Marks the entry at `pos` deleted and updates the counts (Redis's
    /// flags element stays one byte: 0..=3 are all 7-bit integers).
    pub(crate) fn mark_deleted(&mut self, pos: usize) {
        debug_assert_eq!(self.buf[pos] & FLAG_DELETED, 0);
        self.buf[pos] |= FLAG_DELETED;
        self.live -= 1;
        self.deleted += 1;
    }

    /// Finds the entry with this ID: (offset, entry).
    pub(crate) fn find(&self, master: StreamId, id: StreamId) -> Option<(usize, RawEntry)> {
        let mut pos = self.entries_start;
        while let Some(e) = self.entry_at(master, pos) {
            if e.id == id {
                return Some((pos, e));
            }
            if e.id > id {
                return None;
            }
            pos = e.end;
        }
        None
    }

    /// Builds a node from decoded parts (used by the listpack reader, which
    /// has validated everything).
    pub(crate) fn from_master_fields(master_fields: &[&[u8]], first: StreamId) -> Node {
        let mut buf = Vec::new();
        let mut lp_static = LP_HEADER_SIZE + 1 + lp_int_size(0);
        for f in master_fields {
            put_str(&mut buf, f);
            lp_static += lp_str_size(f);
        }
        lp_static += lp_int_size(master_fields.len() as i64);
        Node {
            entries_start: buf.len(),
            buf,
            master_fields: master_fields.len() as u32,
            live: 0,
            deleted: 0,
            lp_static,
            last: first,
        }
    }
}

/// The master entry's field names, in order.
#[derive(Clone, Debug)]
pub struct MasterFields<'a> {
    buf: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a> Iterator for MasterFields<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(get_str(self.buf, &mut self.pos))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for MasterFields<'_> {}

/// The field/value pairs of one entry, borrowed from its node.
#[derive(Clone, Debug)]
pub struct Pairs<'a> {
    buf: &'a [u8],
    /// Cursor in the master fields when the entry has SAMEFIELDS.
    master: Option<usize>,
    pos: usize,
    left: usize,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let field = match &mut self.master {
            Some(m) => get_str(self.buf, m),
            None => get_str(self.buf, &mut self.pos),
        };
        let value = get_str(self.buf, &mut self.pos);
        Some((field, value))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Pairs<'_> {}
