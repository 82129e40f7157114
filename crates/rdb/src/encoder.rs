//! The snapshot encoder.
//!
//! ferrokv never forks: the event loop serialises the keyspace segment by
//! segment between client work, and each piece of output is handed to
//! several consumers (the file writer thread, replica sockets). So the
//! encoder does not own an output stream. Each call *appends* to a chunk the
//! caller provides (`&mut Vec<u8>`), and the encoder carries only what must
//! survive between chunks: the running CRC64 of every byte emitted so far,
//! the byte count, and reusable scratch space (LZF hash table, listpack
//! buffer). The caller may hand a chunk off and start a new one between any
//! two calls; the concatenation of all chunks is the RDB file.
//!
//! Encodings follow Redis 7.0's `rdbSaveObject` and the caller's
//! [`EncodingLimits`], so the file is what Redis with the same configuration
//! would write, and loads in Redis 7.0 without conversion: small hashes and
//! sorted sets as listpacks, integer sets as intsets, lists as quicklists of
//! listpack nodes.

use crate::consts::*;
use crate::crc64::crc64;
use crate::intset;
use crate::listpack::{self, ListpackWriter};
use crate::lzf::LzfCompressor;

/// Thresholds that choose between compact and full encodings, with the names
/// of Redis 7.0's configuration directives. The defaults are those of the
/// `redis.conf` Redis ships; note that a `redis-server` started without any
/// config file uses its compiled-in `hash-max-listpack-entries 512` instead
/// of 128 (the other defaults agree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries`: above this many fields, `HASH` (4).
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value`: a field or value longer than this, `HASH` (4).
    pub hash_max_listpack_value: usize,
    /// `zset-max-listpack-entries`: above this many members, `ZSET_2` (5).
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value`: a member longer than this, `ZSET_2` (5).
    pub zset_max_listpack_value: usize,
    /// `set-max-intset-entries`: an all-integer set this small is an intset.
    pub set_max_intset_entries: usize,
    /// `list-max-listpack-size`: negative = node size class (-1 = 4 KiB,
    /// -2 = 8 KiB, ... -5 = 64 KiB); positive = elements per node.
    pub list_max_listpack_size: i32,
    /// Elements at least this long get a node of their own with the PLAIN
    /// container (Redis's `packed_threshold`, 1 GiB by default).
    pub list_packed_threshold: usize,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            list_max_listpack_size: -2,
            list_packed_threshold: 1 << 30,
        }
    }
}

impl EncodingLimits {
    /// (size limit in bytes, element limit) of one quicklist node, as
    /// `quicklist.c` derives them from `fill`.
    fn list_node_limits(&self) -> (usize, usize) {
        const SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
        const SIZE_SAFETY_LIMIT: usize = 8192;
        let fill = self.list_max_listpack_size;
        if fill < 0 {
            let class = ((-(fill as i64)) as usize - 1).min(SIZE_CLASSES.len() - 1);
            (SIZE_CLASSES[class], usize::MAX)
        } else {
            (SIZE_SAFETY_LIMIT, (fill as usize).max(1))
        }
    }
}

/// Encoder settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderOptions {
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes when that
    /// saves at least 4 bytes.
    pub compression: bool,
    /// `rdbchecksum`: write the CRC64 trailer (otherwise the trailer is 0,
    /// which readers take as "checksum disabled").
    pub checksum: bool,
    pub limits: EncodingLimits,
    /// The version the header names: 10 (Redis 7.0's), or 12 when the data
    /// holds what only Redis 7.4 represents (hash field TTLs), so that an
    /// older reader refuses the file at its header rather than at a key.
    pub version: u32,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        EncoderOptions {
            compression: true,
            checksum: true,
            limits: EncodingLimits::default(),
            version: RDB_VERSION,
        }
    }
}

/// Writes an RDB version 10 stream into caller-provided chunks; see the
/// module documentation. Call order mirrors the file:
/// [`header`](Self::header), then per database [`select_db`](Self::select_db)
/// and [`resize_db`](Self::resize_db) followed by entries, then
/// [`finish`](Self::finish).
///
/// Collections must not hold duplicate members or fields (Redis refuses to
/// load a set or hash with duplicates); an empty collection is not written at
/// all, since Redis never stores one and skips it on load.
#[derive(Debug)]
pub struct RdbEncoder {
    options: EncoderOptions,
    crc: u64,
    written: u64,
    lzf: LzfCompressor,
    /// Compressed string or listpack under construction.
    scratch: Vec<u8>,
    lzf_out: Vec<u8>,
    /// Values LZF failed on in a row, and values still to store without
    /// trying (see `may_compress`).
    lzf_failures: u32,
    lzf_skip: u32,
    ints: Vec<i64>,
    /// The caller checksums whole chunks with [`seal`](Self::seal).
    crc_by_chunk: bool,
}

impl RdbEncoder {
    pub fn new(options: EncoderOptions) -> Self {
        RdbEncoder {
            options,
            crc: 0,
            written: 0,
            lzf: LzfCompressor::new(),
            scratch: Vec::new(),
            lzf_out: Vec::new(),
            lzf_failures: 0,
            lzf_skip: 0,
            ints: Vec::new(),
            crc_by_chunk: false,
        }
    }

    /// From now on the checksum is taken over whole chunks instead of
    /// after every record: the caller passes each chunk it hands away to
    /// [`seal`](Self::seal), in order, and gives [`finish`](Self::finish)
    /// the chunk that holds everything not sealed yet. A CRC over a
    /// megabyte runs about three times as fast as over many ~1 KiB records
    /// (`crc64`'s lanes need a few KiB). Call it before anything is written.
    pub fn checksum_by_chunk(&mut self) {
        debug_assert_eq!(self.written, 0, "switch before writing");
        self.crc_by_chunk = true;
    }

    /// Adds a finished chunk to the checksum (see
    /// [`checksum_by_chunk`](Self::checksum_by_chunk)).
    pub fn seal(&mut self, chunk: &[u8]) {
        debug_assert!(self.crc_by_chunk);
        self.crc = crc64(self.crc, chunk);
    }

    pub fn options(&self) -> &EncoderOptions {
        &self.options
    }

    /// Bytes emitted so far over all chunks.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// CRC64 of all bytes emitted so far.
    pub fn running_checksum(&self) -> u64 {
        self.crc
    }

    fn account(&mut self, out: &[u8], start: usize) {
        let new = &out[start..];
        if !self.crc_by_chunk {
            self.crc = crc64(self.crc, new);
        }
        self.written += new.len() as u64;
    }

    /// `REDIS0010` followed by the given AUX fields. Redis 7.0 writes
    /// `redis-ver`, `redis-bits`, `ctime`, `used-mem`, (for replication)
    /// `repl-stream-db`, `repl-id`, `repl-offset`, and `aof-base`.
    pub fn header(&mut self, out: &mut Vec<u8>, aux: &[(&[u8], &[u8])]) {
        let start = out.len();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(format!("{:04}", self.options.version).as_bytes());
        for (k, v) in aux {
            out.push(OPCODE_AUX);
            self.put_string(out, k);
            self.put_string(out, v);
        }
        self.account(out, start);
    }

    /// One AUX field (string key and value; readers skip unknown ones).
    pub fn aux(&mut self, out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
        let start = out.len();
        out.push(OPCODE_AUX);
        self.put_string(out, key);
        self.put_string(out, value);
        self.account(out, start);
    }

    /// A `FUNCTION LOAD` library: opcode FUNCTION2 and its code.
    pub fn function_library(&mut self, out: &mut Vec<u8>, code: &[u8]) {
        let start = out.len();
        out.push(OPCODE_FUNCTION2);
        self.put_string(out, code);
        self.account(out, start);
    }

    pub fn select_db(&mut self, out: &mut Vec<u8>, db: u64) {
        let start = out.len();
        out.push(OPCODE_SELECTDB);
        put_length(out, db);
        self.account(out, start);
    }

    /// Size hint for the selected database: number of keys and of keys with
    /// an expiry.
    pub fn resize_db(&mut self, out: &mut Vec<u8>, db_size: u64, expires_size: u64) {
        let start = out.len();
        out.push(OPCODE_RESIZEDB);
        put_length(out, db_size);
        put_length(out, expires_size);
        self.account(out, start);
    }

    /// LRU idle time in seconds for the next entry (written by Redis when
    /// `maxmemory-policy` is an LRU one). Call right before the entry.
    pub fn lru_idle(&mut self, out: &mut Vec<u8>, idle_secs: u64) {
        let start = out.len();
        out.push(OPCODE_IDLE);
        put_length(out, idle_secs);
        self.account(out, start);
    }

    /// LFU counter for the next entry (written by Redis when
    /// `maxmemory-policy` is an LFU one). Call right before the entry.
    pub fn lfu_freq(&mut self, out: &mut Vec<u8>, counter: u8) {
        let start = out.len();
        out.push(OPCODE_FREQ);
        out.push(counter);
        self.account(out, start);
    }

    fn entry_head(&mut self, out: &mut Vec<u8>, rdb_type: u8, key: &[u8], expire_ms: Option<i64>) {
        if let Some(ms) = expire_ms {
            out.push(OPCODE_EXPIRETIME_MS);
            out.extend_from_slice(&ms.to_le_bytes());
        }
        out.push(rdb_type);
        self.put_string(out, key);
    }

    /// A string value. `expire_ms` is the absolute Unix time in milliseconds.
    pub fn string_entry(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        value: &[u8],
        expire_ms: Option<i64>,
    ) {
        let start = out.len();
        self.entry_head(out, TYPE_STRING, key, expire_ms);
        self.put_string(out, value);
        self.account(out, start);
    }

    /// A large string value that the caller emits itself, verbatim, right
    /// after what this writes to `out` (the entry's head and the value's
    /// length): a consumer can then take the value by reference instead of
    /// as a copy in the chunk. Returns false, writing nothing, when the
    /// value is shorter than [`EXTERNAL_MIN_LEN`] or LZF would shrink it
    /// (then use [`string_entry`](Self::string_entry)). The value counts
    /// towards [`bytes_written`](Self::bytes_written) and, unless the
    /// checksum is taken by chunk (then [`seal`](Self::seal) it in its
    /// place in the stream), towards the checksum.
    pub fn string_entry_external(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        value: &[u8],
        expire_ms: Option<i64>,
    ) -> bool {
        if value.len() < EXTERNAL_MIN_LEN || (self.options.compression && self.may_compress(value))
        {
            return false;
        }
        let start = out.len();
        self.entry_head(out, TYPE_STRING, key, expire_ms);
        put_length(out, value.len() as u64);
        self.account(out, start);
        if !self.crc_by_chunk {
            self.crc = crc64(self.crc, value);
        }
        self.written += value.len() as u64;
        true
    }

    /// A list, head to tail, as `LIST_QUICKLIST_2` (18): listpack nodes split
    /// by `list-max-listpack-size`, and PLAIN nodes for elements at least
    /// `list_packed_threshold` long. The iterator is walked twice (node count
    /// first), hence `Clone`; both walks must yield the same items.
    pub fn list_entry<I>(&mut self, out: &mut Vec<u8>, key: &[u8], items: I, expire_ms: Option<i64>)
    where
        I: IntoIterator,
        I::IntoIter: Clone,
        I::Item: AsRef<[u8]>,
    {
        let items = items.into_iter();
        let limits = self.options.limits.list_node_limits();
        let threshold = self.options.limits.list_packed_threshold;
        let mut splitter = NodeSplitter::new(limits, threshold);
        let mut nodes = 0u64;
        for item in items.clone() {
            if splitter.place(item.as_ref()) != Placement::SameNode {
                nodes += 1;
            }
        }
        if nodes == 0 {
            return;
        }
        let start = out.len();
        self.entry_head(out, TYPE_LIST_QUICKLIST_2, key, expire_ms);
        put_length(out, nodes);
        let mut splitter = NodeSplitter::new(limits, threshold);
        let mut node = std::mem::take(&mut self.scratch);
        node.clear();
        let mut open: Option<ListpackWriter> = None;
        for item in items {
            let item = item.as_ref();
            let placement = splitter.place(item);
            if placement != Placement::SameNode {
                if let Some(w) = open.take() {
                    w.finish(&mut node);
                    put_length(out, QUICKLIST_NODE_PACKED);
                    self.put_string(out, &node);
                    node.clear();
                }
            }
            match placement {
                Placement::Plain => {
                    put_length(out, QUICKLIST_NODE_PLAIN);
                    self.put_string(out, item);
                }
                Placement::NewNode | Placement::SameNode => {
                    let w = open.get_or_insert_with(|| ListpackWriter::begin(&mut node));
                    w.push(&mut node, item);
                }
            }
        }
        if let Some(w) = open.take() {
            w.finish(&mut node);
            put_length(out, QUICKLIST_NODE_PACKED);
            self.put_string(out, &node);
        }
        self.scratch = node;
        self.account(out, start);
    }

    /// A set: `SET_INTSET` (11) when every member is a canonical integer and
    /// there are at most `set-max-intset-entries`, otherwise `SET` (2).
    pub fn set_entry<I>(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        members: I,
        expire_ms: Option<i64>,
    ) where
        I: IntoIterator,
        I::IntoIter: Clone,
        I::Item: AsRef<[u8]>,
    {
        let members = members.into_iter();
        let max = self.options.limits.set_max_intset_entries;
        let mut ints = std::mem::take(&mut self.ints);
        ints.clear();
        let mut count = 0u64;
        let mut all_ints = true;
        for m in members.clone() {
            count += 1;
            if all_ints {
                match listpack::parse_canonical_i64(m.as_ref()) {
                    Some(v) if ints.len() < max => ints.push(v),
                    _ => all_ints = false,
                }
            }
        }
        if count == 0 {
            self.ints = ints;
            return;
        }
        let start = out.len();
        if all_ints {
            ints.sort_unstable();
            ints.dedup();
            self.entry_head(out, TYPE_SET_INTSET, key, expire_ms);
            let mut blob = std::mem::take(&mut self.scratch);
            blob.clear();
            intset::write(&ints, &mut blob);
            self.put_string(out, &blob);
            self.scratch = blob;
        } else {
            self.entry_head(out, TYPE_SET, key, expire_ms);
            put_length(out, count);
            for m in members {
                self.put_string(out, m.as_ref());
            }
        }
        self.ints = ints;
        self.account(out, start);
    }

    /// A sorted set of `(member, score)`: `ZSET_LISTPACK` (17), sorted by
    /// score then member as Redis keeps it, when within the zset listpack
    /// limits, otherwise `ZSET_2` (5) with binary scores. Scores must not be
    /// NaN (Redis refuses to load one). For `ZSET_2`, passing members from
    /// highest to lowest score (as Redis writes them) makes Redis's load
    /// fastest; any order is correct.
    pub fn zset_entry<I, M>(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        members: I,
        expire_ms: Option<i64>,
    ) where
        I: IntoIterator<Item = (M, f64)>,
        I::IntoIter: Clone,
        M: AsRef<[u8]>,
    {
        let members = members.into_iter();
        let limits = &self.options.limits;
        let (mut count, mut longest) = (0usize, 0usize);
        for (m, _) in members.clone() {
            count += 1;
            longest = longest.max(m.as_ref().len());
        }
        if count == 0 {
            return;
        }
        let start = out.len();
        if count <= limits.zset_max_listpack_entries && longest <= limits.zset_max_listpack_value {
            let mut sorted: Vec<(M, f64)> = members.collect();
            sorted.sort_by(|a, b| {
                a.1.partial_cmp(&b.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.0.as_ref().cmp(b.0.as_ref()))
            });
            self.entry_head(out, TYPE_ZSET_LISTPACK, key, expire_ms);
            let mut blob = std::mem::take(&mut self.scratch);
            blob.clear();
            let mut w = ListpackWriter::begin(&mut blob);
            let mut text = ScoreText::default();
            for (m, score) in &sorted {
                w.push(&mut blob, m.as_ref());
                w.push(&mut blob, text.format(*score));
            }
            w.finish(&mut blob);
            self.put_string(out, &blob);
            self.scratch = blob;
        } else {
            self.entry_head(out, TYPE_ZSET_2, key, expire_ms);
            put_length(out, count as u64);
            for (m, score) in members {
                self.put_string(out, m.as_ref());
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        self.account(out, start);
    }

    /// A stream as `STREAM_LISTPACKS_2` (19), the type Redis 7.0 writes
    /// ([`crate::stream`] has the layout). The payload's optional fields
    /// (absent only in what a type-15 file decoded to) are written as
    /// Redis 7.0 derives them: first ID and largest deleted ID 0-0,
    /// `entries_added` the length, `entries_read` -1 (unknown); consumers'
    /// active times are not part of type 19.
    pub fn stream_entry(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        s: &crate::stream::StreamPayload<'_>,
        expire_ms: Option<i64>,
    ) {
        use crate::stream::raw_id_bytes;
        let start = out.len();
        self.entry_head(out, TYPE_STREAM_LISTPACKS_2, key, expire_ms);
        put_length(out, s.nodes.len() as u64);
        for (id, lp) in &s.nodes {
            self.put_string(out, &raw_id_bytes(*id));
            self.put_string(out, lp);
        }
        put_length(out, s.length);
        let pair = |out: &mut Vec<u8>, id: (u64, u64)| {
            put_length(out, id.0);
            put_length(out, id.1);
        };
        pair(out, s.last_id);
        pair(out, s.first_id.unwrap_or((0, 0)));
        pair(out, s.max_deleted_entry_id.unwrap_or((0, 0)));
        put_length(out, s.entries_added.unwrap_or(s.length));
        put_length(out, s.groups.len() as u64);
        for g in &s.groups {
            self.put_string(out, &g.name);
            pair(out, g.last_id);
            put_length(out, g.entries_read.unwrap_or(-1) as u64);
            put_length(out, g.pel.len() as u64);
            for &(id, time, count) in &g.pel {
                out.extend_from_slice(&raw_id_bytes(id));
                out.extend_from_slice(&time.to_le_bytes());
                put_length(out, count);
            }
            put_length(out, g.consumers.len() as u64);
            for c in &g.consumers {
                self.put_string(out, &c.name);
                out.extend_from_slice(&c.seen_time.to_le_bytes());
                put_length(out, c.pel.len() as u64);
                for &id in &c.pel {
                    out.extend_from_slice(&raw_id_bytes(id));
                }
            }
        }
        self.account(out, start);
    }

    /// A hash of `(field, value)`: `HASH_LISTPACK` (16) within the hash
    /// listpack limits, otherwise `HASH` (4).
    pub fn hash_entry<I, F, V>(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        pairs: I,
        expire_ms: Option<i64>,
    ) where
        I: IntoIterator<Item = (F, V)>,
        I::IntoIter: Clone,
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let pairs = pairs.into_iter();
        let limits = &self.options.limits;
        let (mut count, mut longest) = (0usize, 0usize);
        for (f, v) in pairs.clone() {
            count += 1;
            longest = longest.max(f.as_ref().len()).max(v.as_ref().len());
        }
        if count == 0 {
            return;
        }
        let start = out.len();
        if count <= limits.hash_max_listpack_entries && longest <= limits.hash_max_listpack_value {
            self.entry_head(out, TYPE_HASH_LISTPACK, key, expire_ms);
            let mut blob = std::mem::take(&mut self.scratch);
            blob.clear();
            let mut w = ListpackWriter::begin(&mut blob);
            for (f, v) in pairs {
                w.push(&mut blob, f.as_ref());
                w.push(&mut blob, v.as_ref());
            }
            w.finish(&mut blob);
            self.put_string(out, &blob);
            self.scratch = blob;
        } else {
            self.entry_head(out, TYPE_HASH, key, expire_ms);
            put_length(out, count as u64);
            for (f, v) in pairs {
                self.put_string(out, f.as_ref());
                self.put_string(out, v.as_ref());
            }
        }
        self.account(out, start);
    }

    /// A hash some of whose fields have a TTL (Redis 7.4): `(field, value,
    /// deadline in unix ms)`. Within the hash listpack limits it is
    /// `HASH_LISTPACK_EX` (25): field, value, deadline (0: none) triplets
    /// ordered by deadline, fields without one last, as 7.4's `listpackex`
    /// keeps them (a stable sort: a listpack's own order is already that);
    /// otherwise `HASH_METADATA` (24): each field's deadline relative to
    /// the soonest, plus one (0: none). Both start with the soonest
    /// deadline as 8 bytes little-endian.
    pub fn hash_ttl_entry(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        fields: &[(&[u8], &[u8], Option<i64>)],
        expire_ms: Option<i64>,
    ) {
        if fields.is_empty() {
            return;
        }
        let start = out.len();
        let limits = &self.options.limits;
        let longest = fields
            .iter()
            .map(|(f, v, _)| f.len().max(v.len()))
            .max()
            .unwrap_or(0);
        let min = fields.iter().filter_map(|f| f.2).min().unwrap_or(0);
        if fields.len() <= limits.hash_max_listpack_entries
            && longest <= limits.hash_max_listpack_value
        {
            self.entry_head(out, TYPE_HASH_LISTPACK_EX, key, expire_ms);
            out.extend_from_slice(&(min as u64).to_le_bytes());
            let mut order: Vec<&(&[u8], &[u8], Option<i64>)> = fields.iter().collect();
            order.sort_by_key(|f| f.2.unwrap_or(i64::MAX));
            let mut blob = std::mem::take(&mut self.scratch);
            blob.clear();
            let mut w = ListpackWriter::begin(&mut blob);
            let mut num = itoa_text::Buf::default();
            for (f, v, at) in order {
                w.push(&mut blob, f);
                w.push(&mut blob, v);
                w.push(&mut blob, num.format(at.unwrap_or(0)));
            }
            w.finish(&mut blob);
            self.put_string(out, &blob);
            self.scratch = blob;
        } else {
            self.entry_head(out, TYPE_HASH_METADATA, key, expire_ms);
            out.extend_from_slice(&(min as u64).to_le_bytes());
            put_length(out, fields.len() as u64);
            for (f, v, at) in fields {
                put_length(out, at.map_or(0, |at| (at - min + 1) as u64));
                self.put_string(out, f);
                self.put_string(out, v);
            }
        }
        self.account(out, start);
    }

    /// Writes EOF and the CRC64 trailer (0 if checksums are disabled) and
    /// returns the file's checksum.
    pub fn finish(mut self, out: &mut Vec<u8>) -> u64 {
        let start = out.len();
        out.push(OPCODE_EOF);
        self.account(out, start);
        if self.crc_by_chunk {
            // `out` is the last chunk: everything not sealed yet.
            self.crc = crc64(self.crc, out);
        }
        let crc = if self.options.checksum { self.crc } else { 0 };
        out.extend_from_slice(&crc.to_le_bytes());
        self.written += 8;
        crc
    }

    /// Whether LZF is worth trying on `s`. A long value (a blob, an image,
    /// already-compressed or encrypted bytes) is probed first: if its first
    /// [`PROBE_LEN`] bytes do not compress, the whole value is stored raw
    /// without running LZF over it (LZF on incompressible input runs at
    /// ~1.2 GB/s and saves nothing: most of a save of such values). Redis
    /// tries every value in full; the only difference this can make is a
    /// long value with an incompressible head and a compressible tail being
    /// stored raw, which is still a valid RDB of the same data.
    ///
    /// Short values are judged by the run they are in: after
    /// [`FAILURE_RUN`] values in a row that LZF could not shrink (a data set
    /// of random tokens, encrypted or already-compressed payloads), the
    /// next [`SKIP_AFTER_FAILURES`] are stored without trying, then LZF is
    /// tried again. A compressible data set never trips it; an
    /// incompressible one skips ~97% of the attempts (LZF was a quarter of
    /// the loop's time during a save of 1000-byte random values).
    fn may_compress(&mut self, s: &[u8]) -> bool {
        if s.len() < PROBE_MIN_LEN {
            if self.lzf_skip > 0 {
                self.lzf_skip -= 1;
                return false;
            }
            return true;
        }
        self.lzf_out.clear();
        let head = &s[..PROBE_LEN];
        self.lzf
            .compress(head, &mut self.lzf_out, PROBE_LEN - PROBE_LEN / 16)
            .is_some()
    }

    /// `rdbSaveRawString`: integer encoding for short canonical integers,
    /// LZF when enabled and worthwhile, else length-prefixed bytes.
    fn put_string(&mut self, out: &mut Vec<u8>, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = listpack::parse_canonical_i64(s) {
                if put_int_encoded(out, v) {
                    return;
                }
            }
        }
        if self.options.compression && s.len() > 20 && self.may_compress(s) {
            self.lzf_out.clear();
            let compressed = self.lzf.compress(s, &mut self.lzf_out, s.len() - 4);
            if compressed.is_some() {
                self.lzf_failures = 0;
            } else {
                self.lzf_failures += 1;
                if self.lzf_failures >= FAILURE_RUN {
                    self.lzf_failures = 0;
                    self.lzf_skip = SKIP_AFTER_FAILURES;
                }
            }
            if let Some(clen) = compressed {
                out.push((LEN_ENCVAL << 6) | ENC_LZF);
                put_length(out, clen as u64);
                put_length(out, s.len() as u64);
                out.extend_from_slice(&self.lzf_out);
                return;
            }
        }
        put_length(out, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// LZF failures in a row after which values are stored without trying...
const FAILURE_RUN: u32 = 32;
/// ...for this many values.
const SKIP_AFTER_FAILURES: u32 = 1024;
/// Values from this size on may be emitted by reference
/// ([`RdbEncoder::string_entry_external`]); LZF probes them first (below).
pub const EXTERNAL_MIN_LEN: usize = PROBE_MIN_LEN;
/// Values from this size on are probed before LZF runs over them whole.
const PROBE_MIN_LEN: usize = 256 * 1024;
/// The probe: the head must shrink by 1/16 for LZF to run on the value.
const PROBE_LEN: usize = 32 * 1024;

/// `rdbSaveLen`.
pub(crate) fn put_length(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push((LEN_6BIT << 6) | len as u8);
    } else if len < 1 << 14 {
        out.push((LEN_14BIT << 6) | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(LEN_32BIT);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// `rdbEncodeInteger`: false if `v` needs more than 32 bits.
fn put_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    let tag = LEN_ENCVAL << 6;
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[tag | ENC_INT8, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(tag | ENC_INT16);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(tag | ENC_INT32);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    SameNode,
    NewNode,
    Plain,
}

/// Decides quicklist node boundaries the way `quicklistPushTail` would.
struct NodeSplitter {
    size_limit: usize,
    count_limit: usize,
    plain_threshold: usize,
    /// Bytes and elements of the open listpack node; `None` if no node is open.
    open: Option<(usize, usize)>,
}

impl NodeSplitter {
    fn new((size_limit, count_limit): (usize, usize), plain_threshold: usize) -> Self {
        NodeSplitter {
            size_limit,
            count_limit,
            plain_threshold,
            open: None,
        }
    }

    fn place(&mut self, item: &[u8]) -> Placement {
        if item.len() >= self.plain_threshold {
            self.open = None;
            return Placement::Plain;
        }
        let size = listpack::entry_size(item);
        match self.open {
            Some((bytes, count)) if bytes + size <= self.size_limit && count < self.count_limit => {
                self.open = Some((bytes + size, count + 1));
                Placement::SameNode
            }
            _ => {
                self.open = Some((listpack::HEADER_SIZE + 1 + size, 1));
                Placement::NewNode
            }
        }
    }
}

/// Formats a score the way Redis's `d2string` does for listpack zsets:
/// integers (|v| < 2^52) in decimal so the listpack stores them as integers,
/// infinities as `inf`/`-inf`, and other values in the shortest text that
/// `strtod` reads back exactly.
#[derive(Default)]
struct ScoreText {
    buf: Vec<u8>,
    ryu: ryu::Buffer,
    int: itoa::Buffer,
}

impl ScoreText {
    fn format(&mut self, score: f64) -> &[u8] {
        self.buf.clear();
        if score.is_infinite() {
            self.buf
                .extend_from_slice(if score > 0.0 { b"inf" } else { b"-inf" });
        } else if score == 0.0 && score.is_sign_negative() {
            self.buf.extend_from_slice(b"-0");
        } else if score.is_nan() {
            self.buf.extend_from_slice(b"nan");
        } else if score.fract() == 0.0 && score.abs() < 4_503_599_627_370_496.0 {
            self.buf
                .extend_from_slice(self.int.format(score as i64).as_bytes());
        } else {
            self.buf
                .extend_from_slice(self.ryu.format_finite(score).as_bytes());
        }
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_use_redis_widths() {
        let cases: [(u64, &[u8]); 6] = [
            (0, &[0x00]),
            (63, &[0x3F]),
            (64, &[0x40, 0x40]),
            (16383, &[0x7F, 0xFF]),
            (16384, &[0x80, 0, 0, 0x40, 0]),
            (1 << 32, &[0x81, 0, 0, 0, 1, 0, 0, 0, 0]),
        ];
        for (len, bytes) in cases {
            let mut out = Vec::new();
            put_length(&mut out, len);
            assert_eq!(out, bytes, "{len}");
        }
    }

    #[test]
    fn short_integers_are_int_encoded_like_rdb_try_integer_encoding() {
        let mut e = RdbEncoder::new(EncoderOptions::default());
        let mut out = Vec::new();
        for (s, want) in [
            (&b"12"[..], &[0xC0, 12][..]),
            (b"-129", &[0xC1, 0x7F, 0xFF]),
            (b"-2147483648", &[0xC2, 0, 0, 0, 0x80]),
            (
                b"2147483648",
                &[
                    10, b'2', b'1', b'4', b'7', b'4', b'8', b'3', b'6', b'4', b'8',
                ],
            ),
            (b"012", &[3, b'0', b'1', b'2']),
        ] {
            out.clear();
            e.put_string(&mut out, s);
            assert_eq!(out, want, "{:?}", s);
        }
    }

    #[test]
    fn compression_only_when_it_saves_four_bytes() {
        let mut e = RdbEncoder::new(EncoderOptions::default());
        let mut out = Vec::new();
        e.put_string(&mut out, &[b'a'; 21]);
        assert_eq!(out[0], 0xC3);
        out.clear();
        e.put_string(&mut out, &[b'a'; 20]);
        assert_eq!(out[0], 20);
        out.clear();
        let noise: Vec<u8> = (0..100u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        e.put_string(&mut out, &noise);
        assert_eq!(&out[..2], &[0x40, 100]);
    }

    #[test]
    fn a_run_of_incompressible_values_pauses_lzf_and_compressible_ones_resume_it() {
        let mut e = RdbEncoder::new(EncoderOptions::default());
        let mut seed: u64 = 0x1234_5678_9abc_def1;
        let mut noise = |n: usize| -> Vec<u8> {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            xorshift_bytes(seed | 1, n)
        };
        let text = b"compressible compressible compressible compressible".to_vec();
        let mut out = Vec::new();
        // Compressible values never trip the pause.
        for _ in 0..100 {
            out.clear();
            e.put_string(&mut out, &text);
            assert_eq!(out[0], 0xC3);
        }
        for _ in 0..FAILURE_RUN {
            out.clear();
            e.put_string(&mut out, &noise(100));
        }
        // Paused: even a compressible value is stored raw now...
        out.clear();
        e.put_string(&mut out, &text);
        assert_eq!(out[0] as usize, text.len());
        for _ in 1..SKIP_AFTER_FAILURES {
            out.clear();
            e.put_string(&mut out, &noise(100));
        }
        // ...and tried again after the pause.
        out.clear();
        e.put_string(&mut out, &text);
        assert_eq!(out[0], 0xC3);
    }

    /// `n` bytes LZF cannot shrink (xorshift64 from `seed`).
    fn xorshift_bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn long_values_are_compressed_unless_their_head_is_incompressible() {
        let mut e = RdbEncoder::new(EncoderOptions::default());
        let noise = xorshift_bytes(0x9e37_79b9_7f4a_7c15, PROBE_MIN_LEN + 1000);
        let mut out = Vec::new();
        e.put_string(&mut out, &noise);
        assert_eq!(
            out.len(),
            5 + noise.len(),
            "stored raw with a 32-bit length"
        );
        assert_eq!(&out[5..], &noise[..]);
        // Text of the same length compresses, and round-trips.
        let text: Vec<u8> = (0..noise.len())
            .map(|i| b"the quick brown fox "[i % 20])
            .collect();
        out.clear();
        e.put_string(&mut out, &text);
        assert_eq!(out[0], 0xC3, "LZF");
        assert!(out.len() < text.len() / 4);
        // A compressible head decides: LZF runs over the whole value.
        let mut mixed = text[..PROBE_LEN].to_vec();
        mixed.extend_from_slice(&noise);
        out.clear();
        e.put_string(&mut out, &mixed);
        assert_eq!(out[0], 0xC3);
    }

    #[test]
    fn chunks_concatenate_to_the_same_checksum() {
        let mut one = Vec::new();
        let mut e = RdbEncoder::new(EncoderOptions::default());
        e.header(&mut one, &[(b"redis-ver", b"7.0.15")]);
        e.select_db(&mut one, 0);
        e.string_entry(&mut one, b"k", b"v", Some(1));
        let crc = e.finish(&mut one);
        assert_eq!(crc, crate::crc64::crc64(0, &one[..one.len() - 8]));

        let mut chunks = [Vec::new(), Vec::new(), Vec::new()];
        let mut e = RdbEncoder::new(EncoderOptions::default());
        e.header(&mut chunks[0], &[(b"redis-ver", b"7.0.15")]);
        e.select_db(&mut chunks[1], 0);
        e.string_entry(&mut chunks[1], b"k", b"v", Some(1));
        assert_eq!(
            e.bytes_written(),
            (chunks[0].len() + chunks[1].len()) as u64
        );
        e.finish(&mut chunks[2]);
        assert_eq!(chunks.concat(), one);
    }

    #[test]
    fn an_external_value_gives_the_same_file_as_an_inline_one() {
        let noise = xorshift_bytes(0x2545_f491_4f6c_dd1d, EXTERNAL_MIN_LEN + 4321);
        let compressible = b"abcdefgh".repeat(EXTERNAL_MIN_LEN / 8 + 1);
        // An encoder (checksumming by chunk or per record) and its output
        // up to the first key.
        let start = |by_chunk: bool| {
            let mut out = Vec::new();
            let mut e = RdbEncoder::new(EncoderOptions::default());
            if by_chunk {
                e.checksum_by_chunk();
            }
            e.header(&mut out, &[]);
            e.select_db(&mut out, 0);
            (e, out)
        };
        for by_chunk in [false, true] {
            let (mut e, mut inline) = start(by_chunk);
            e.string_entry(&mut inline, b"big", &noise, Some(1_700_000_000_000));
            e.string_entry(&mut inline, b"after", b"x", None);
            if by_chunk {
                e.seal(&inline);
            }
            let mut last = Vec::new();
            e.finish(&mut last);
            inline.extend_from_slice(&last);

            let (mut e, mut ext) = start(by_chunk);
            // Too short, and compressible: the caller must encode inline.
            assert!(!e.string_entry_external(&mut ext, b"k", &noise[..1000], None));
            assert!(!e.string_entry_external(&mut ext, b"k", &compressible, None));
            assert!(e.string_entry_external(&mut ext, b"big", &noise, Some(1_700_000_000_000)));
            if by_chunk {
                e.seal(&ext);
                e.seal(&noise);
            }
            ext.extend_from_slice(&noise);
            let mut tail = Vec::new();
            e.string_entry(&mut tail, b"after", b"x", None);
            if by_chunk {
                e.seal(&tail);
            }
            ext.extend_from_slice(&tail);
            let mut last = Vec::new();
            let written = {
                let w = e.bytes_written();
                e.finish(&mut last);
                w + last.len() as u64
            };
            ext.extend_from_slice(&last);
            assert_eq!(written, ext.len() as u64);
            assert!(ext == inline, "by_chunk={by_chunk}");
        }
    }

    #[test]
    fn sealed_chunks_give_the_same_file_as_per_record_checksums() {
        let value = b"not very compressible 0123456789 abcdefghij".repeat(3);
        let write = |e: &mut RdbEncoder, out: &mut Vec<u8>, i: usize| {
            e.string_entry(out, format!("k{i}").as_bytes(), &value, None);
        };
        let mut one = Vec::new();
        let mut e = RdbEncoder::new(EncoderOptions::default());
        e.header(&mut one, &[(b"redis-ver", b"7.0.15")]);
        e.select_db(&mut one, 0);
        for i in 0..100 {
            write(&mut e, &mut one, i);
        }
        e.finish(&mut one);

        let mut e = RdbEncoder::new(EncoderOptions::default());
        e.checksum_by_chunk();
        let mut chunks = Vec::new();
        let mut chunk = Vec::new();
        e.header(&mut chunk, &[(b"redis-ver", b"7.0.15")]);
        e.select_db(&mut chunk, 0);
        for i in 0..100 {
            write(&mut e, &mut chunk, i);
            if i % 7 == 0 {
                e.seal(&chunk);
                chunks.push(std::mem::take(&mut chunk));
            }
        }
        e.finish(&mut chunk);
        chunks.push(chunk);
        assert_eq!(chunks.concat(), one);
    }

    #[test]
    fn score_text_reads_back_exactly() {
        let mut t = ScoreText::default();
        for s in [
            0.1,
            -2.5e-300,
            1e300,
            3.0,
            -7.0,
            4_503_599_627_370_496.0,
            1.0 / 3.0,
        ] {
            let text = String::from_utf8(t.format(s).to_vec()).unwrap();
            assert_eq!(text.parse::<f64>().unwrap(), s, "{text}");
        }
        assert_eq!(t.format(3.0), b"3");
        assert_eq!(t.format(f64::NEG_INFINITY), b"-inf");
        assert_eq!(t.format(-0.0), b"-0");
    }
}

/// Formats an integer without allocating.
mod itoa_text {
    #[derive(Default)]
    pub struct Buf([u8; 20]);
    impl Buf {
        pub fn format(&mut self, v: i64) -> &[u8] {
            use std::io::Write;
            let mut c = std::io::Cursor::new(&mut self.0[..]);
            write!(c, "{v}").expect("20 bytes hold an i64");
            let n = c.position() as usize;
            &self.0[..n]
        }
    }
}
