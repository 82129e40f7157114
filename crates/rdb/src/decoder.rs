//! The snapshot decoder.
//!
//! It works on one byte slice holding the whole file (the server maps the
//! file; a replica has the received snapshot in memory), so nothing is read
//! twice and nothing is copied that sits uncompressed in the slice: keys,
//! string values and the strings inside listpacks, ziplists and plain
//! collections reach the visitor as [`Cow::Borrowed`] slices of the input.
//! Only integers (stored in binary) and LZF-compressed data are owned.
//!
//! It drives a [`RdbVisitor`] the way Redis's `rdbLoadRio` drives the
//! keyspace: opcodes in file order, one [`Entry`] per key with the expiry and
//! LRU/LFU hints that preceded it. Each collection is fully parsed and
//! validated before the visitor sees it (a corrupt listpack is an error, not
//! half a hash). The CRC64 trailer can only be checked at the end, so a
//! visitor may have received entries from a file that later fails: treat
//! any `Err` as "discard everything loaded", as Redis does.
//!
//! Untrusted input never panics and never allocates far beyond its own size:
//! counts only size allocations up to the bytes left in the input, and LZF
//! output is bounded by the format's maximum expansion.

use std::borrow::Cow;

use crate::consts::*;
use crate::crc64::crc64;
use crate::error::{DecodeError, FunctionsUnsupported, VisitError};
use crate::{intset, listpack, lzf, ziplist};

/// A hash field and its value.
pub type FieldValue<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// A hash field, its value and its deadline (unix ms), if any.
pub type FieldValueTtl<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>, Option<i64>);

/// A decoded value. Elements borrow from the input where possible.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbValue<'a> {
    String(Cow<'a, [u8]>),
    /// Head to tail.
    List(Vec<Cow<'a, [u8]>>),
    Set(Vec<Cow<'a, [u8]>>),
    /// `(member, score)`; listpack-encoded sets come in score order, others in
    /// file order. Scores are never NaN.
    SortedSet(Vec<(Cow<'a, [u8]>, f64)>),
    /// `(field, value)`.
    Hash(Vec<FieldValue<'a>>),
    /// A hash with field TTLs (Redis 7.4's types 22–25): `(field, value,
    /// deadline in unix ms)`. `ordered`: the fields come in the order a
    /// `listpackex` keeps (by deadline), to be kept as they are.
    HashWithTtls {
        fields: Vec<FieldValueTtl<'a>>,
        ordered: bool,
    },
    /// A stream: its nodes' listpacks as the file holds them, its metadata
    /// and consumer groups ([`crate::stream`]).
    Stream(Box<crate::stream::StreamPayload<'a>>),
}

impl RdbValue<'_> {
    /// Number of elements (1 for a string).
    pub fn len(&self) -> usize {
        match self {
            RdbValue::String(_) => 1,
            RdbValue::List(v) | RdbValue::Set(v) => v.len(),
            RdbValue::SortedSet(v) => v.len(),
            RdbValue::Hash(v) => v.len(),
            RdbValue::HashWithTtls { fields, .. } => fields.len(),
            RdbValue::Stream(s) => s.length.min(usize::MAX as u64) as usize,
        }
    }

    /// An empty collection (Redis skips such a key when it loads one and
    /// refuses it in RESTORE). A stream may hold no entries: it is never
    /// empty in this sense.
    pub fn is_empty(&self) -> bool {
        !matches!(self, RdbValue::Stream(_)) && self.len() == 0
    }
}

/// One key as the file stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    /// The database selected by the last SELECTDB (0 if none).
    pub db: u64,
    pub key: Cow<'a, [u8]>,
    pub value: RdbValue<'a>,
    /// Absolute Unix time in milliseconds (EXPIRETIME is converted).
    pub expire_ms: Option<i64>,
    /// LRU idle time in seconds (opcode IDLE).
    pub lru_idle_secs: Option<u64>,
    /// LFU logarithmic counter (opcode FREQ).
    pub lfu_freq: Option<u8>,
    /// The RDB value type it was stored as (`consts::TYPE_*`).
    pub rdb_type: u8,
    /// Offset of the entry's first byte (its expiry opcode, if any).
    pub offset: usize,
}

/// Receives the content of an RDB file in order. Only [`entry`](Self::entry)
/// is required; the others default to ignoring the record (AUX fields must
/// be ignorable by contract) except function libraries, which are refused.
pub trait RdbVisitor {
    fn aux(&mut self, _key: &[u8], _value: &[u8]) -> Result<(), VisitError> {
        Ok(())
    }
    fn select_db(&mut self, _db: u64) -> Result<(), VisitError> {
        Ok(())
    }
    /// Size hint for the selected database.
    fn resize_db(&mut self, _db_size: u64, _expires_size: u64) -> Result<(), VisitError> {
        Ok(())
    }
    /// A `FUNCTION LOAD` library's source (opcode FUNCTION2).
    fn function_library(&mut self, _code: &[u8]) -> Result<(), VisitError> {
        Err(Box::new(FunctionsUnsupported))
    }
    fn entry(&mut self, entry: Entry<'_>) -> Result<(), VisitError>;
}

/// Decoder settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Verify the CRC64 trailer (Redis's `rdbchecksum`/`skip_checksum_validation`).
    pub verify_checksum: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            verify_checksum: true,
        }
    }
}

/// What the trailer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// The trailer matched the content.
    Verified(u64),
    /// The trailer was 0: written with `rdbchecksum no`.
    Disabled,
    /// Not checked (`verify_checksum: false`); the stored value.
    NotVerified(u64),
    /// Versions before 5 have no trailer.
    Absent,
}

/// Facts about a successfully decoded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeSummary {
    pub version: u32,
    pub checksum: Checksum,
    /// Keys handed to the visitor.
    pub keys: u64,
    /// Keys with an empty collection, skipped as Redis skips them.
    pub empty_keys_skipped: u64,
    /// Bytes the RDB occupied, trailer included. Anything after it (the AOF
    /// tail of an RDB-preamble AOF) is not RDB and is not looked at.
    pub len: usize,
}

/// Decodes `data` with default options.
pub fn decode<V: RdbVisitor + ?Sized>(
    data: &[u8],
    visitor: &mut V,
) -> Result<DecodeSummary, DecodeError> {
    decode_with(data, visitor, &DecodeOptions::default())
}

/// Decodes `data`, calling `visitor` for every record.
pub fn decode_with<V: RdbVisitor + ?Sized>(
    data: &[u8],
    visitor: &mut V,
    options: &DecodeOptions,
) -> Result<DecodeSummary, DecodeError> {
    let version = header(data)?;
    let mut r = Reader { data, pos: 9 };
    let mut st = RecordState::default();
    while !record(&mut r, &mut st, visitor, 0)? {}
    let checksum = if version >= FIRST_VERSION_WITH_CHECKSUM {
        let trailer_at = r.pos;
        let stored = u64::from_le_bytes(r.array::<8>()?);
        if stored == 0 {
            Checksum::Disabled
        } else if !options.verify_checksum {
            Checksum::NotVerified(stored)
        } else {
            let computed = crc64(0, &data[..trailer_at]);
            if computed != stored {
                return Err(DecodeError::ChecksumMismatch {
                    offset: trailer_at,
                    stored,
                    computed,
                });
            }
            Checksum::Verified(stored)
        }
    } else {
        Checksum::Absent
    };
    Ok(DecodeSummary {
        version,
        checksum,
        keys: st.keys,
        empty_keys_skipped: st.empty_keys_skipped,
        len: r.pos,
    })
}

/// `REDIS` and four digits: the version.
fn header(data: &[u8]) -> Result<u32, DecodeError> {
    if data.len() < 9 || &data[..5] != MAGIC || !data[5..9].iter().all(u8::is_ascii_digit) {
        return Err(DecodeError::BadMagic);
    }
    let version = data[5..9]
        .iter()
        .fold(0u32, |v, d| v * 10 + (d - b'0') as u32);
    if !(1..=MAX_SUPPORTED_VERSION).contains(&version) {
        return Err(DecodeError::UnsupportedVersion {
            version,
            max: MAX_SUPPORTED_VERSION,
        });
    }
    Ok(version)
}

/// What carries from one record to the next: the selected database, the
/// expiry/LRU/LFU opcodes that precede a key, and the counts.
#[derive(Debug, Default)]
struct RecordState {
    db: u64,
    expire_ms: Option<i64>,
    lru_idle_secs: Option<u64>,
    lfu_freq: Option<u8>,
    /// Where the pending key's first prefix opcode began.
    entry_offset: Option<usize>,
    keys: u64,
    empty_keys_skipped: u64,
}

impl RecordState {
    /// Drops the prefix opcodes read for a key not read yet.
    fn forget_prefix(&mut self) {
        self.expire_ms = None;
        self.lru_idle_secs = None;
        self.lfu_freq = None;
        self.entry_offset = None;
    }
}

/// Reads one record (an opcode and what belongs to it) and hands it to the
/// visitor. Returns `true` at the EOF opcode. Offsets passed to the
/// visitor are `base` + the reader's position (the stream position).
fn record<V: RdbVisitor + ?Sized>(
    r: &mut Reader<'_>,
    st: &mut RecordState,
    visitor: &mut V,
    base: usize,
) -> Result<bool, DecodeError> {
    let visit = |offset: usize, res: Result<(), VisitError>| {
        res.map_err(|source| DecodeError::Visitor { offset, source })
    };
    let offset = r.pos;
    let op = r.byte()?;
    match op {
        OPCODE_EXPIRETIME => {
            let secs = i32::from_le_bytes(r.array::<4>()?);
            st.expire_ms = Some(secs as i64 * 1000);
            st.entry_offset.get_or_insert(offset);
        }
        OPCODE_EXPIRETIME_MS => {
            st.expire_ms = Some(i64::from_le_bytes(r.array::<8>()?));
            st.entry_offset.get_or_insert(offset);
        }
        OPCODE_FREQ => {
            st.lfu_freq = Some(r.byte()?);
            st.entry_offset.get_or_insert(offset);
        }
        OPCODE_IDLE => {
            st.lru_idle_secs = Some(r.length()?);
            st.entry_offset.get_or_insert(offset);
        }
        OPCODE_EOF => return Ok(true),
        OPCODE_SELECTDB => {
            st.db = r.length()?;
            visit(offset, visitor.select_db(st.db))?;
        }
        OPCODE_RESIZEDB => {
            let size = r.length()?;
            let expires = r.length()?;
            visit(offset, visitor.resize_db(size, expires))?;
        }
        OPCODE_AUX => {
            let key = r.string()?;
            let value = r.string()?;
            visit(offset, visitor.aux(&key, &value))?;
        }
        OPCODE_MODULE_AUX => {
            let id = r.length()?;
            return Err(DecodeError::ModuleAux {
                offset,
                module: module_name(id),
            });
        }
        OPCODE_FUNCTION2 => {
            let code = r.string()?;
            visit(offset, visitor.function_library(&code))?;
        }
        OPCODE_SLOT_INFO => {
            // Slot id, its keys, its keys with a TTL: a sizing hint.
            for _ in 0..3 {
                r.length()?;
            }
        }
        OPCODE_FUNCTION_PRE_GA => {
            return Err(DecodeError::UnsupportedOpcode {
                offset,
                opcode: op,
                name: "FUNCTION (7.0 release candidates)",
            })
        }
        rdb_type => {
            if type_name(rdb_type) == "unknown" {
                return Err(DecodeError::UnknownType {
                    offset,
                    byte: rdb_type,
                });
            }
            let key = r.string()?;
            let value = read_value(r, rdb_type, offset, &key)?;
            let start = st.entry_offset.unwrap_or(offset);
            if value.is_empty() {
                st.empty_keys_skipped += 1;
            } else {
                st.keys += 1;
                let entry = Entry {
                    db: st.db,
                    key,
                    value,
                    expire_ms: st.expire_ms,
                    lru_idle_secs: st.lru_idle_secs,
                    lfu_freq: st.lfu_freq,
                    rdb_type,
                    offset: base + start,
                };
                visit(start, visitor.entry(entry))?;
            }
            st.forget_prefix();
        }
    }
    Ok(false)
}

/// What [`StreamDecoder::feed`] did with its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fed {
    /// The first `consumed` bytes were whole records, handed to the
    /// visitor; pass the rest again, followed by more input.
    NeedMore { consumed: usize },
    /// The RDB ended (EOF opcode and trailer) after `consumed` bytes.
    Done {
        consumed: usize,
        summary: DecodeSummary,
    },
}

/// A key holding a plain string cut by the end of a stream's input
/// ([`StreamDecoder::cut_string`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutString<'d> {
    pub db: u64,
    pub key: Cow<'d, [u8]>,
    pub expire_ms: Option<i64>,
    /// Bytes of the record before the value (prefix opcodes, type, key,
    /// the value's length).
    pub head: usize,
    /// The value's length.
    pub len: u64,
}

/// Decodes an RDB that arrives in pieces (a replica parsing its master's
/// payload as it comes off the socket, Redis's `repl-diskless-load`),
/// with the same visitor calls, in the same order, as [`decode`] on the
/// whole file. Only the unconsumed tail must be kept: each call decodes
/// the complete records at the start of what it is given and says how
/// many bytes those took; a record cut by the end of the input is left
/// for the next call (never half given to the visitor).
///
/// The trailer is not verified (see [`Checksum::NotVerified`]): the caller
/// sees every byte anyway and computes the CRC64 as they pass (on another
/// thread, off the decoding path), then compares it with the summary's.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    version: Option<u32>,
    st: RecordState,
    /// Stream offset of the first byte of the next call's input.
    consumed: usize,
    /// A record was cut: do not try again before the input holds this
    /// many bytes (the missing length when known, else twice as much), so
    /// a big collection arriving in small pieces is parsed O(1) times.
    retry_at: usize,
    /// Bytes the cut record was known to lack.
    missing: u64,
    done: bool,
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes of the stream consumed so far.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Decodes the complete records at the start of `data`, the stream's
    /// bytes from [`consumed`](Self::consumed) on. After `Done`, further
    /// calls are a usage error.
    pub fn feed<V: RdbVisitor + ?Sized>(
        &mut self,
        data: &[u8],
        visitor: &mut V,
    ) -> Result<Fed, DecodeError> {
        assert!(!self.done, "StreamDecoder::feed after the end of the RDB");
        if data.len() < self.retry_at {
            return Ok(Fed::NeedMore { consumed: 0 });
        }
        let base = self.consumed;
        self.feed_inner(data, visitor, base)
            .map_err(|e| e.shifted(base))
    }

    /// The last input: like [`feed`](Self::feed), but a record cut by
    /// the end of `data` is an error ([`DecodeError::Truncated`] at its
    /// stream offset). Returns the summary and the bytes of `data` the RDB
    /// took (anything after it is not RDB).
    pub fn feed_end<V: RdbVisitor + ?Sized>(
        &mut self,
        data: &[u8],
        visitor: &mut V,
    ) -> Result<(DecodeSummary, usize), DecodeError> {
        self.retry_at = 0;
        match self.feed(data, visitor)? {
            Fed::Done { consumed, summary } => Ok((summary, consumed)),
            Fed::NeedMore { .. } => Err(DecodeError::Truncated {
                offset: self.consumed,
                needed: self.missing,
            }),
        }
    }

    /// The head of the record that starts `rest` — what a
    /// [`feed`](Self::feed) left unconsumed — when it is a key holding a
    /// plain (not compressed, not integer) string whose value has not
    /// fully arrived: its database, key, expiry, the bytes before the
    /// value, and the value's length. A loader can then take the value's
    /// bytes itself as they arrive, straight into their final place,
    /// instead of keeping the whole record until it is complete, and then
    /// tell the decoder with [`skip_string`](Self::skip_string). `None`
    /// for any other record, or one whose head is cut too.
    pub fn cut_string<'d>(&self, rest: &'d [u8]) -> Option<CutString<'d>> {
        self.version?;
        let mut r = Reader { data: rest, pos: 0 };
        let mut expire_ms = None;
        loop {
            match r.byte().ok()? {
                OPCODE_EXPIRETIME => {
                    expire_ms = Some(i32::from_le_bytes(r.array::<4>().ok()?) as i64 * 1000)
                }
                OPCODE_EXPIRETIME_MS => expire_ms = Some(i64::from_le_bytes(r.array::<8>().ok()?)),
                OPCODE_FREQ => {
                    r.byte().ok()?;
                }
                OPCODE_IDLE => {
                    r.length().ok()?;
                }
                TYPE_STRING => break,
                _ => return None,
            }
        }
        let key = r.string().ok()?;
        let Length::Plain(len) = r.length_or_encoding().ok()? else {
            return None;
        };
        let head = r.pos;
        if len <= (rest.len() - head) as u64 {
            return None;
        }
        Some(CutString {
            db: self.st.db,
            key,
            expire_ms,
            head,
            len,
        })
    }

    /// The record described by [`cut_string`](Self::cut_string) was
    /// taken by the caller: the stream goes on after its `record_len`
    /// bytes (head and value), and it counts as a key.
    pub fn skip_string(&mut self, record_len: usize) {
        self.st.forget_prefix();
        self.st.keys += 1;
        self.consumed += record_len;
        self.retry_at = 0;
        self.missing = 0;
    }

    fn feed_inner<V: RdbVisitor + ?Sized>(
        &mut self,
        data: &[u8],
        visitor: &mut V,
        base: usize,
    ) -> Result<Fed, DecodeError> {
        let mut r = Reader { data, pos: 0 };
        let version = match self.version {
            Some(v) => v,
            None => {
                if data.len() < 9 {
                    self.retry_at = 9;
                    return Ok(Fed::NeedMore { consumed: 0 });
                }
                let v = header(data)?;
                self.version = Some(v);
                r.pos = 9;
                v
            }
        };
        // Where the last complete record (with its prefix opcodes) ended.
        let mut committed = r.pos;
        let cut = loop {
            match record(&mut r, &mut self.st, visitor, base) {
                Ok(false) => {
                    if self.st.entry_offset.is_none() {
                        committed = r.pos;
                    }
                }
                Ok(true) => {
                    if version < FIRST_VERSION_WITH_CHECKSUM {
                        break None;
                    }
                    if r.remaining() >= 8 {
                        break None;
                    }
                    // The trailer is still on its way.
                    break Some(8 - r.remaining() as u64);
                }
                Err(DecodeError::Truncated { needed, .. }) => break Some(needed),
                Err(e) => return Err(e),
            }
        };
        if let Some(needed) = cut {
            self.st.forget_prefix();
            self.missing = needed;
            let tail = data.len() - committed;
            // A corrupt length can claim any size: saturate, the input
            // ends long before.
            let needed = usize::try_from(needed).unwrap_or(usize::MAX);
            self.retry_at = tail.saturating_add(needed.max(tail));
            self.consumed += committed;
            return Ok(Fed::NeedMore {
                consumed: committed,
            });
        }
        let checksum = if version >= FIRST_VERSION_WITH_CHECKSUM {
            match u64::from_le_bytes(r.array::<8>()?) {
                0 => Checksum::Disabled,
                stored => Checksum::NotVerified(stored),
            }
        } else {
            Checksum::Absent
        };
        self.done = true;
        self.retry_at = 0;
        self.consumed += r.pos;
        Ok(Fed::Done {
            consumed: r.pos,
            summary: DecodeSummary {
                version,
                checksum,
                keys: self.st.keys,
                empty_keys_skipped: self.st.empty_keys_skipped,
                len: self.consumed,
            },
        })
    }
}

/// `moduleTypeNameByID`: nine characters of six bits above a 10-bit version.
fn module_name(id: u64) -> String {
    const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = id >> 10;
    let mut name = [0u8; 9];
    for slot in name.iter_mut().rev() {
        *slot = CHARSET[(id & 63) as usize];
        id >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

fn escape(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// One value in its RDB form (what follows the type byte of an entry, as
/// in a `DUMP` payload), decoded from `data` as a value of `rdb_type`.
pub fn decode_value(data: &[u8], rdb_type: u8) -> Result<RdbValue<'_>, DecodeError> {
    let mut r = Reader { data, pos: 0 };
    read_value(&mut r, rdb_type, 0, b"")
}

fn read_value<'a>(
    r: &mut Reader<'a>,
    rdb_type: u8,
    offset: usize,
    key: &[u8],
) -> Result<RdbValue<'a>, DecodeError> {
    Ok(match rdb_type {
        TYPE_STRING => RdbValue::String(r.string()?),
        TYPE_LIST | TYPE_SET => {
            let n = r.length()?;
            let mut items = Vec::with_capacity(r.capacity_for(n, 1));
            for _ in 0..n {
                items.push(r.string()?);
            }
            if rdb_type == TYPE_LIST {
                RdbValue::List(items)
            } else {
                RdbValue::Set(items)
            }
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = r.length()?;
            let mut items = Vec::with_capacity(r.capacity_for(n, 2));
            for _ in 0..n {
                let member = r.string()?;
                let at = r.pos;
                let score = if rdb_type == TYPE_ZSET_2 {
                    f64::from_le_bytes(r.array::<8>()?)
                } else {
                    r.text_double()?
                };
                if score.is_nan() {
                    return Err(corrupt(at, "zset", "NaN score"));
                }
                items.push((member, score));
            }
            RdbValue::SortedSet(items)
        }
        TYPE_HASH => {
            let n = r.length()?;
            let mut items = Vec::with_capacity(r.capacity_for(n, 2));
            for _ in 0..n {
                let field = r.string()?;
                let value = r.string()?;
                items.push((field, value));
            }
            RdbValue::Hash(items)
        }
        TYPE_HASH_ZIPMAP => {
            let at = r.pos;
            RdbValue::Hash(pairs(r.blob("zipmap", ziplist::parse_zipmap)?, at)?)
        }
        TYPE_LIST_ZIPLIST => RdbValue::List(r.blob("ziplist", ziplist::parse_ziplist)?),
        TYPE_SET_INTSET => RdbValue::Set(r.blob("intset", intset::parse)?),
        TYPE_SET_LISTPACK => RdbValue::Set(r.blob("listpack", listpack::parse)?),
        TYPE_ZSET_ZIPLIST => {
            let at = r.pos;
            scored(r.blob("ziplist", ziplist::parse_ziplist)?, at)?
        }
        TYPE_ZSET_LISTPACK => {
            let at = r.pos;
            scored(r.blob("listpack", listpack::parse)?, at)?
        }
        TYPE_HASH_ZIPLIST => {
            let at = r.pos;
            RdbValue::Hash(pairs(r.blob("ziplist", ziplist::parse_ziplist)?, at)?)
        }
        TYPE_HASH_LISTPACK => {
            let at = r.pos;
            RdbValue::Hash(pairs(r.blob("listpack", listpack::parse)?, at)?)
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = r.length()?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                let container = if rdb_type == TYPE_LIST_QUICKLIST_2 {
                    let at = r.pos;
                    let c = r.length()?;
                    if c != QUICKLIST_NODE_PLAIN && c != QUICKLIST_NODE_PACKED {
                        return Err(corrupt(at, "quicklist", "unknown node container"));
                    }
                    c
                } else {
                    QUICKLIST_NODE_PACKED
                };
                let at = r.pos;
                if container == QUICKLIST_NODE_PLAIN {
                    let node = r.string()?;
                    if node.is_empty() {
                        return Err(corrupt(at, "quicklist", "empty node"));
                    }
                    items.push(node);
                    continue;
                }
                let node = if rdb_type == TYPE_LIST_QUICKLIST_2 {
                    r.blob("listpack", listpack::parse)?
                } else {
                    r.blob("ziplist", ziplist::parse_ziplist)?
                };
                items.extend(node);
            }
            RdbValue::List(items)
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
            RdbValue::Stream(Box::new(crate::stream::decode(r, rdb_type)?))
        }
        // Redis 7.4's hashes with field TTLs (the GA types carry the
        // soonest deadline first; 24 stores the others relative to it,
        // plus one, 0 meaning none; the pre-GA ones are absolute).
        TYPE_HASH_METADATA | TYPE_HASH_METADATA_PRE_GA => {
            let min = if rdb_type == TYPE_HASH_METADATA {
                let at = r.pos;
                let min = u64::from_le_bytes(r.array::<8>()?);
                if min > FIELD_TTL_INVALID {
                    return Err(corrupt(at, "hash", "invalid minExpire value"));
                }
                Some(min)
            } else {
                None
            };
            let n = r.length()?;
            let mut fields = Vec::with_capacity(r.capacity_for(n, 3));
            for _ in 0..n {
                let at = r.pos;
                let ttl = r.length()?;
                let field = r.string()?;
                let value = r.string()?;
                let deadline = match (ttl, min) {
                    (0, _) => None,
                    (t, Some(m)) => Some(t.checked_add(m).map(|x| x - 1)),
                    (t, None) => Some(Some(t)),
                };
                let deadline = match deadline {
                    None => None,
                    Some(Some(d)) if d <= FIELD_TTL_MAX => Some(d as i64),
                    Some(_) => return Err(corrupt(at, "hash", "field TTL out of range")),
                };
                fields.push((field, value, deadline));
            }
            RdbValue::HashWithTtls {
                fields,
                ordered: false,
            }
        }
        TYPE_HASH_LISTPACK_EX | TYPE_HASH_LISTPACK_EX_PRE_GA => {
            if rdb_type == TYPE_HASH_LISTPACK_EX {
                r.array::<8>()?;
            }
            let at = r.pos;
            let entries = r.blob("listpack", listpack::parse)?;
            if !entries.len().is_multiple_of(3) {
                return Err(corrupt(at, "hash", "not field, value, TTL triplets"));
            }
            let mut fields = Vec::with_capacity(entries.len() / 3);
            let mut it = entries.into_iter();
            while let (Some(f), Some(v), Some(ttl)) = (it.next(), it.next(), it.next()) {
                let deadline = std::str::from_utf8(&ttl)
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok())
                    .filter(|&t| t <= FIELD_TTL_MAX)
                    .ok_or_else(|| corrupt(at, "hash", "field TTL out of range"))?;
                fields.push((f, v, (deadline != 0).then_some(deadline as i64)));
            }
            RdbValue::HashWithTtls {
                fields,
                ordered: true,
            }
        }
        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => {
            return Err(DecodeError::UnsupportedType {
                offset,
                type_byte: rdb_type,
                type_name: type_name(rdb_type),
                key: escape(key),
            })
        }
        byte => return Err(DecodeError::UnknownType { offset, byte }),
    })
}

/// Redis 7.4's bounds on field deadlines (`EB_EXPIRE_TIME_MAX`, and the
/// `minExpire` header's `EB_EXPIRE_TIME_INVALID`).
const FIELD_TTL_MAX: u64 = (1 << 48) - 1;
const FIELD_TTL_INVALID: u64 = 1 << 48;

fn corrupt(offset: usize, what: &'static str, reason: &'static str) -> DecodeError {
    DecodeError::Corrupt {
        offset,
        what,
        reason,
    }
}

fn pairs<'a>(items: Vec<Cow<'a, [u8]>>, at: usize) -> Result<Vec<FieldValue<'a>>, DecodeError> {
    if !items.len().is_multiple_of(2) {
        return Err(corrupt(at, "hash", "odd number of elements"));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        out.push((f, v));
    }
    Ok(out)
}

fn scored(items: Vec<Cow<'_, [u8]>>, at: usize) -> Result<RdbValue<'_>, DecodeError> {
    if !items.len().is_multiple_of(2) {
        return Err(corrupt(at, "zset", "odd number of elements"));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        let score = parse_score(&s).ok_or_else(|| corrupt(at, "zset", "score is not a number"))?;
        out.push((m, score));
    }
    Ok(RdbValue::SortedSet(out))
}

/// Reads a score as `strtod` would for text Redis writes (`%.17g`, `inf`,
/// integers); NaN is refused.
fn parse_score(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?;
    let s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// A cursor over the input that turns every short read into
/// [`DecodeError::Truncated`] with the offset.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<'a> crate::stream::Source<'a> for Reader<'a> {
    fn pos(&self) -> usize {
        self.pos
    }
    fn length(&mut self) -> Result<u64, DecodeError> {
        Reader::length(self)
    }
    fn string(&mut self) -> Result<Cow<'a, [u8]>, DecodeError> {
        Reader::string(self)
    }
    fn raw16(&mut self) -> Result<[u8; 16], DecodeError> {
        self.array::<16>()
    }
    fn millis(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array::<8>()?))
    }
    fn capacity_for(&self, n: u64, min_bytes: usize) -> usize {
        Reader::capacity_for(self, n, min_bytes)
    }
}

type BlobParser = for<'s> fn(&'s [u8]) -> Result<Vec<Cow<'s, [u8]>>, (usize, &'static str)>;

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Capacity to reserve for `n` elements of at least `min_bytes` each:
    /// never more than the remaining input could hold.
    fn capacity_for(&self, n: u64, min_bytes: usize) -> usize {
        (n.min(usize::MAX as u64) as usize).min(self.remaining() / min_bytes)
    }

    fn bytes(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() as u64 {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n - self.remaining() as u64,
            });
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.bytes(N as u64)?.try_into().expect("N bytes"))
    }

    /// `rdbLoadLenByRef`.
    fn length_or_encoding(&mut self) -> Result<Length, DecodeError> {
        let at = self.pos;
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Length::Plain((b & 0x3F) as u64),
            1 => Length::Plain((((b & 0x3F) as u64) << 8) | self.byte()? as u64),
            3 => Length::Encoded(b & 0x3F),
            _ => match b {
                LEN_32BIT => Length::Plain(u32::from_be_bytes(self.array::<4>()?) as u64),
                LEN_64BIT => Length::Plain(u64::from_be_bytes(self.array::<8>()?)),
                _ => {
                    return Err(DecodeError::BadLength {
                        offset: at,
                        byte: b,
                    })
                }
            },
        })
    }

    fn length(&mut self) -> Result<u64, DecodeError> {
        let at = self.pos;
        match self.length_or_encoding()? {
            Length::Plain(n) => Ok(n),
            Length::Encoded(_) => Err(DecodeError::BadLength {
                offset: at,
                byte: self.data[at],
            }),
        }
    }

    /// `rdbGenericLoadStringObject`.
    fn string(&mut self) -> Result<Cow<'a, [u8]>, DecodeError> {
        let at = self.pos;
        match self.length_or_encoding()? {
            Length::Plain(n) => Ok(Cow::Borrowed(self.bytes(n)?)),
            Length::Encoded(ENC_INT8) => Ok(listpack::int_text(self.byte()? as i8 as i64)),
            Length::Encoded(ENC_INT16) => Ok(listpack::int_text(i16::from_le_bytes(
                self.array::<2>()?,
            ) as i64)),
            Length::Encoded(ENC_INT32) => Ok(listpack::int_text(i32::from_le_bytes(
                self.array::<4>()?,
            ) as i64)),
            Length::Encoded(ENC_LZF) => {
                let clen = self.length()?;
                let len = self.length()?;
                let data = self.bytes(clen)?;
                if len > lzf::max_decompressed_len(data.len()) as u64 {
                    return Err(corrupt(
                        at,
                        "LZF string",
                        "declared length exceeds what the data can expand to",
                    ));
                }
                let len =
                    usize::try_from(len).map_err(|_| DecodeError::TooLong { offset: at, len })?;
                let mut out = Vec::new();
                lzf::decompress(data, len, &mut out)
                    .map_err(|source| DecodeError::Lzf { offset: at, source })?;
                Ok(Cow::Owned(out))
            }
            Length::Encoded(encoding) => Err(DecodeError::BadStringEncoding {
                offset: at,
                encoding,
            }),
        }
    }

    /// `rdbLoadDoubleValue`: a length byte (253 NaN, 254 +inf, 255 -inf)
    /// then that many bytes of text.
    fn text_double(&mut self) -> Result<f64, DecodeError> {
        let at = self.pos;
        Ok(match self.byte()? {
            253 => f64::NAN,
            254 => f64::INFINITY,
            255 => f64::NEG_INFINITY,
            len => {
                let text = self.bytes(len as u64)?;
                parse_score(text).ok_or_else(|| corrupt(at, "zset", "score is not a number"))?
            }
        })
    }

    /// A string holding an encoded container, parsed by `parse`. Elements
    /// borrow from the input unless the blob was LZF-compressed.
    fn blob(
        &mut self,
        what: &'static str,
        parse: BlobParser,
    ) -> Result<Vec<Cow<'a, [u8]>>, DecodeError> {
        let at = self.pos;
        let blob = self.string()?;
        let err = |(inner_offset, reason): (usize, &'static str)| DecodeError::CorruptBlob {
            offset: at,
            what,
            inner_offset,
            reason,
        };
        match blob {
            Cow::Borrowed(b) => parse(b).map_err(err),
            Cow::Owned(v) => Ok(parse(&v)
                .map_err(err)?
                .into_iter()
                .map(|c| Cow::Owned(c.into_owned()))
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_decode_like_redis() {
        // A module type named "mymodtype" with encoding version 3.
        let mut id = 0u64;
        for c in b"mymodtype" {
            let idx = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                .iter()
                .position(|x| x == c)
                .unwrap() as u64;
            id = (id << 6) | idx;
        }
        id = (id << 10) | 3;
        assert_eq!(module_name(id), "mymodtype");
    }
}
