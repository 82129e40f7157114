//! Loading a snapshot: the file is mapped, not read into a buffer, and
//! decoded in place; string values that sit uncompressed in the file are
//! copied once, straight into their entries.

use ferrokv_rdb::{
    decode_with, Checksum, DecodeOptions, DecodeSummary, Entry as RdbEntry, Fed, RdbValue,
    RdbVisitor, StreamDecoder, VisitError,
};
use ferrokv_store::{Keyspace, NO_EXPIRE};
use std::path::Path;

/// What a load found.
#[derive(Debug, Default, Clone)]
pub struct LoadStats {
    pub keys: u64,
    /// Keys whose expiry had passed, not loaded.
    pub expired: u64,
    /// The file's replication AUX fields.
    pub repl: ReplAux,
    /// Its `FUNCTION` libraries' code (opcode FUNCTION2).
    pub functions: Vec<Vec<u8>>,
    /// The memory its writer used (AUX `used-mem`), 0 if not said.
    pub used_mem: u64,
}

/// Told now and then how far a load has come — the bytes of the file
/// decoded so far, what was loaded so far, and the keyspace being filled —
/// so the caller can serve clients meanwhile (start-up loading: `Server::
/// loading_progress`). An error stops the load.
pub type Progress<'p> = dyn FnMut(&mut Keyspace, &LoadStats, u64) -> Result<(), String> + 'p;

/// [`Progress`] is told at least every this many keys...
const PROGRESS_KEYS: u32 = 256;
/// ...and every this many bytes of the file (a few large values).
const PROGRESS_BYTES: usize = 256 * 1024;

/// The state of a start-up load, for `INFO persistence`'s `loading_*`
/// fields (Redis's `startLoading` / `loadingIncrProgress`).
#[derive(Debug, Clone)]
pub struct Loading {
    /// Unix time (seconds) the load began.
    pub start_unix: u64,
    /// The bytes of every file to load (the RDB, or the AOF's files).
    pub total_bytes: u64,
    /// The bytes loaded so far.
    pub loaded_bytes: u64,
    /// The memory the RDB's writer used (AUX `used-mem`).
    pub rdb_used_mem: u64,
    /// When the clients were last served (and at what byte), and the
    /// metrics last published.
    pub last_pump: std::time::Instant,
    pub last_pump_bytes: u64,
    pub last_publish: std::time::Instant,
    /// The clients are being served (a command then run, `DEBUG RELOAD`
    /// say, does not serve them again from inside).
    pub pumping: bool,
}

impl Loading {
    pub fn new(total_bytes: u64) -> Loading {
        let now = std::time::Instant::now();
        Loading {
            start_unix: crate::server::unix_ms() as u64 / 1000,
            total_bytes,
            loaded_bytes: 0,
            rdb_used_mem: 0,
            last_pump: now,
            last_pump_bytes: 0,
            last_publish: now,
            pumping: false,
        }
    }

    /// Percent loaded (Redis's `loading_loaded_perc`).
    pub fn percent(&self) -> f64 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        self.loaded_bytes as f64 * 100.0 / self.total_bytes as f64
    }

    /// Seconds left at the pace so far (Redis's `loading_eta_seconds`: 1
    /// in the first second, when there is no pace yet).
    pub fn eta_seconds(&self, now_unix: u64) -> u64 {
        let elapsed = now_unix.saturating_sub(self.start_unix);
        if elapsed == 0 {
            return 1;
        }
        let remaining = self.total_bytes.saturating_sub(self.loaded_bytes).max(1);
        elapsed * remaining / (self.loaded_bytes + 1)
    }
}

/// `repl-id`, `repl-offset` and `repl-stream-db`, as a server with a
/// replication history writes them (Redis's `rdbSaveInfoAuxFields`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReplAux {
    pub id: Option<String>,
    pub offset: Option<i64>,
    pub stream_db: Option<i64>,
}

impl ReplAux {
    /// The history a restarted master continues from: all three fields
    /// present, the id 40 hex digits, a stream db (not -1, which older
    /// Redis versions wrote when they had none).
    pub fn history(&self) -> Option<(&str, i64)> {
        let id = self.id.as_deref()?;
        let valid_id = id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit());
        match (valid_id, self.offset, self.stream_db) {
            (true, Some(off), Some(db)) if off >= 0 && db >= 0 => Some((id, off)),
            _ => None,
        }
    }
}

/// Keys reserved at most on a `RESIZEDB` hint when the input's length is
/// not known; a table grows past it as keys arrive.
const MAX_RESERVE_UNKNOWN: u64 = 1 << 24;

struct Loader<'k> {
    ks: &'k mut Keyspace,
    db: usize,
    /// The most keys the input can hold: a `RESIZEDB` hint is believed
    /// only that far (a corrupt one could ask for any size).
    max_keys: u64,
    now_ms: i64,
    stats: LoadStats,
    key_delay_us: u64,
    limits: ValueLimits,
}

/// A [`Loader`] that tells [`Progress`] where it is every [`PROGRESS_KEYS`]
/// keys or [`PROGRESS_BYTES`] bytes. (A wrapper, not a field of `Loader`:
/// the progress of a start-up load holds the server, which a replica's
/// streamed load must not, as it runs on a thread of its own.)
struct Reporting<'l, 'k, 'p> {
    loader: &'l mut Loader<'k>,
    progress: &'p mut Progress<'p>,
    /// Keys since, and the file offset of, the last report.
    keys_since_report: u32,
    last_report_at: usize,
}

impl Reporting<'_, '_, '_> {
    fn report(&mut self, offset: usize) -> Result<(), VisitError> {
        self.keys_since_report += 1;
        if self.keys_since_report < PROGRESS_KEYS && offset - self.last_report_at < PROGRESS_BYTES {
            return Ok(());
        }
        self.keys_since_report = 0;
        self.last_report_at = offset;
        (self.progress)(self.loader.ks, &self.loader.stats, offset as u64).map_err(VisitError::from)
    }
}

impl RdbVisitor for Reporting<'_, '_, '_> {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), VisitError> {
        self.loader.aux(key, value)
    }
    fn select_db(&mut self, db: u64) -> Result<(), VisitError> {
        self.loader.select_db(db)
    }
    fn resize_db(&mut self, db_size: u64, expires: u64) -> Result<(), VisitError> {
        self.loader.resize_db(db_size, expires)
    }
    fn function_library(&mut self, code: &[u8]) -> Result<(), VisitError> {
        self.loader.function_library(code)
    }
    fn entry(&mut self, e: RdbEntry<'_>) -> Result<(), VisitError> {
        self.report(e.offset)?;
        self.loader.entry(e)
    }
}

/// The encoding thresholds a loaded value is built with (Redis's loader
/// picks encodings by the configuration, whatever the file used).
#[derive(Clone)]
pub struct ValueLimits {
    pub hash: ferrokv_store::hash::HashLimits,
    /// Hash fields due at this time are not loaded (a file at start;
    /// `None` for RESTORE, which keeps them as Redis 7.4 does).
    pub drop_due_fields_at: Option<i64>,
    pub set_max_intset: usize,
    pub zset: ferrokv_store::ZsetLimits,
}

impl ValueLimits {
    pub fn of(config: &crate::config::Config) -> ValueLimits {
        ValueLimits {
            hash: config.hash_limits(),
            drop_due_fields_at: None,
            set_max_intset: config.set_max_intset(),
            zset: config.zset_limits(),
        }
    }
}

/// The value an RDB record holds (a file's entry, a `DUMP` payload), in
/// the encodings `lim` picks; `None` for an empty collection, which Redis
/// never stores. Errors name what is wrong (a sorted set with a duplicate
/// member, ...).
pub fn value_from_rdb(
    v: &RdbValue<'_>,
    lim: &ValueLimits,
) -> Result<Option<ferrokv_store::Value>, String> {
    use ferrokv_store::Value;
    Ok(Some(match v {
        RdbValue::String(s) => Value::from_bytes(s),
        RdbValue::SortedSet(pairs) if !pairs.is_empty() => {
            Value::ZSet(std::sync::Arc::new(load_zset(pairs, &lim.zset)?))
        }
        RdbValue::List(items) if !items.is_empty() => {
            let list: ferrokv_store::list::List = items.iter().collect();
            Value::List(std::sync::Arc::new(list))
        }
        RdbValue::Hash(pairs) if !pairs.is_empty() => {
            Value::Hash(ferrokv_store::hash::Hash::from_pairs(
                pairs.iter().map(|(f, v)| (&f[..], &v[..])),
                lim.hash,
            ))
        }
        RdbValue::HashWithTtls { fields, ordered } => {
            // A file loaded at start drops the fields already due (and a
            // hash left with none), as Redis 7.4 does; RESTORE keeps them.
            let live: Vec<&(_, _, Option<i64>)> = fields
                .iter()
                .filter(|(_, _, at)| {
                    !matches!((at, lim.drop_due_fields_at), (Some(at), Some(now)) if *at <= now)
                })
                .collect();
            if live.is_empty() {
                return Ok(None);
            }
            let mut h = ferrokv_store::hash::Hash::from_pairs(
                live.iter().map(|(f, v, _)| (&f[..], &v[..])),
                lim.hash,
            );
            if h.len() != live.len() {
                return Err("duplicate hash field".into());
            }
            h.make_volatile();
            for (f, _, at) in &live {
                if let Some(at) = *at {
                    if *ordered {
                        h.set_field_expire_in_place(f, at);
                    } else {
                        h.set_field_expire(f, at);
                    }
                }
            }
            Value::Hash(h)
        }
        RdbValue::Set(members) if !members.is_empty() => {
            Value::Set(ferrokv_store::set::Set::from_members(
                members.iter().map(|m| &m[..]),
                lim.set_max_intset,
            ))
        }
        RdbValue::Hash(_) | RdbValue::Set(_) | RdbValue::List(_) | RdbValue::SortedSet(_) => {
            return Ok(None)
        }
        RdbValue::Stream(p) => {
            Value::Stream(std::sync::Arc::new(super::stream_rdb::from_payload(p)?))
        }
    }))
}

/// A sorted set from a file, in the encoding Redis 7.0's loader picks: a
/// set within both listpack limits is a listpack, anything else a skiplist.
fn load_zset(
    pairs: &[(std::borrow::Cow<'_, [u8]>, f64)],
    lim: &ferrokv_store::ZsetLimits,
) -> Result<ferrokv_store::ZSet, String> {
    let longest = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let z = ferrokv_store::ZSet::from_pairs(
        pairs.iter().map(|(m, s)| (m.as_ref(), *s)),
        pairs.len(),
        longest,
        lim,
    );
    if z.len() != pairs.len() {
        return Err("duplicate member".into());
    }
    Ok(z)
}

impl Loader<'_> {
    /// The checks before a key is stored: its database exists (an error
    /// otherwise), the test-only load delay, and its expiry (an expired
    /// key is counted and skipped: `false`).
    fn admit(&mut self, db: usize, expire_ms: Option<i64>) -> Result<bool, VisitError> {
        if db >= self.ks.dbs.len() {
            return Err(format!(
                "key in database {db}, but only {} databases are configured",
                self.ks.dbs.len()
            )
            .into());
        }
        if self.key_delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.key_delay_us));
        }
        if let Some(t) = expire_ms {
            if t <= self.now_ms {
                self.stats.expired += 1;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A string value assembled by [`StreamLoad`] in its final allocation.
    fn big_string(&mut self, big: BigString) -> Result<(), VisitError> {
        let db = big.db as usize;
        if !self.admit(db, big.expire_ms)? {
            return Ok(());
        }
        // SAFETY: every byte was written (`filled == len`, checked by the
        // caller).
        let value: std::sync::Arc<[u8]> = unsafe { big.value.assume_init() };
        let value = ferrokv_store::Value::Str(ferrokv_store::bytes::SmallBytes::Heap(value));
        let expire = big.expire_ms.unwrap_or(NO_EXPIRE);
        self.ks.dbs[db].upsert(&big.key, value, expire, 0);
        self.stats.keys += 1;
        Ok(())
    }
}

impl<'k> Loader<'k> {
    /// `input_len`: the bytes the RDB can span, when known.
    fn new(
        ks: &'k mut Keyspace,
        input_len: Option<u64>,
        now_ms: i64,
        config: &crate::config::Config,
    ) -> Self {
        Loader {
            ks,
            db: 0,
            // A key takes at least 3 bytes (type, key length, value).
            max_keys: input_len.map_or(MAX_RESERVE_UNKNOWN, |n| n / 3),
            now_ms,
            stats: LoadStats::default(),
            key_delay_us: config.key_load_delay,
            limits: ValueLimits {
                drop_due_fields_at: (!config.keeps_due_hash_fields).then_some(now_ms),
                ..ValueLimits::of(config)
            },
        }
    }
}

impl RdbVisitor for Loader<'_> {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), VisitError> {
        let text = || std::str::from_utf8(value).ok();
        let num = || text().and_then(|t| t.parse::<i64>().ok());
        match key {
            b"repl-id" => self.stats.repl.id = text().map(str::to_string),
            b"repl-offset" => self.stats.repl.offset = num(),
            b"repl-stream-db" => self.stats.repl.stream_db = num(),
            b"used-mem" => self.stats.used_mem = num().unwrap_or(0).max(0) as u64,
            _ => {}
        }
        Ok(())
    }

    fn select_db(&mut self, db: u64) -> Result<(), VisitError> {
        self.db = db as usize;
        Ok(())
    }

    fn function_library(&mut self, code: &[u8]) -> Result<(), VisitError> {
        self.stats.functions.push(code.to_vec());
        Ok(())
    }

    /// The file says how many keys follow: size the table once.
    fn resize_db(&mut self, db_size: u64, _expires: u64) -> Result<(), VisitError> {
        if let Some(d) = self.ks.dbs.get_mut(self.db) {
            d.reserve(db_size.min(self.max_keys) as usize);
        }
        Ok(())
    }

    fn entry(&mut self, e: RdbEntry<'_>) -> Result<(), VisitError> {
        let db = e.db as usize;
        if !self.admit(db, e.expire_ms)? {
            return Ok(());
        }
        let expire = e.expire_ms.unwrap_or(NO_EXPIRE);
        match &e.value {
            RdbValue::String(s) => {
                self.ks.dbs[db].set_str(&e.key, s, expire, 0);
            }
            other => {
                let v = value_from_rdb(other, &self.limits)
                    .map_err(|m| format!("{m} in '{}'", String::from_utf8_lossy(&e.key)))?;
                // Redis skips an empty collection on load.
                let Some(v) = v else {
                    return Ok(());
                };
                self.ks.dbs[db].upsert(&e.key, v, expire, 0);
            }
        }
        self.stats.keys += 1;
        Ok(())
    }
}

/// Loads `path` into the (empty) keyspace. A missing file is an empty
/// dataset; any other problem is an error naming the file and the offset,
/// and the keyspace must then be discarded.
pub fn load_rdb(
    ks: &mut Keyspace,
    path: &Path,
    now_ms: i64,
    config: &crate::config::Config,
) -> Result<Option<LoadStats>, String> {
    load_rdb_reporting(ks, path, now_ms, config, None)
}

/// [`load_rdb`], telling `progress` how far it has come as it goes.
pub fn load_rdb_reporting<'p>(
    ks: &mut Keyspace,
    path: &Path,
    now_ms: i64,
    config: &crate::config::Config,
    progress: Option<&'p mut Progress<'p>>,
) -> Result<Option<LoadStats>, String> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("Can't open {}: {e}", path.display())),
    };
    let len = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if len == 0 {
        return Err(format!("{} is empty: not an RDB file", path.display()));
    }
    // SAFETY: the file is the server's own snapshot in its data directory;
    // ferrokv only ever replaces it by rename (never writes it in place),
    // so the mapped bytes do not change while they are decoded.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| format!("Can't map {}: {e}", path.display()))?;
    let mut loader = Loader::new(ks, Some(len), now_ms, config);
    // The trailer's CRC64 is checked by a second thread over the same
    // mapping while this one decodes (a 1 GB file: 0.3 s of CRC off the
    // critical path). The thread assumes the file ends with the RDB, as a
    // snapshot ferrokv or Redis wrote does; otherwise it is redone below.
    let data: &[u8] = &map[..];
    let (decoded, parallel_crc) = std::thread::scope(|s| {
        let crc = s.spawn(|| {
            data.len()
                .checked_sub(8)
                .map(|n| ferrokv_rdb::crc64::crc64(0, &data[..n]))
        });
        let options = DecodeOptions {
            verify_checksum: false,
        };
        let decoded = match progress {
            Some(progress) => {
                let mut reporting = Reporting {
                    loader: &mut loader,
                    progress,
                    keys_since_report: 0,
                    last_report_at: 0,
                };
                decode_with(data, &mut reporting, &options)
            }
            None => decode_with(data, &mut loader, &options),
        };
        (decoded, crc.join().unwrap_or(None))
    });
    let summary =
        decoded.map_err(|e| format!("{} is corrupt or unreadable: {e}", path.display()))?;
    if let Checksum::NotVerified(stored) = summary.checksum {
        let computed = if summary.len == data.len() {
            parallel_crc
        } else {
            summary
                .len
                .checked_sub(8)
                .map(|n| ferrokv_rdb::crc64::crc64(0, &data[..n]))
        };
        if stored != 0 && computed != Some(stored) {
            return Err(format!(
                // Redis's words first (log checks wait for "CRC error").
                "{} is corrupt: Wrong RDB checksum expected: ({:016x}) but got ({stored:016x}). RDB CRC error (checksum mismatch: the content hashes to the first, the trailer at offset {} holds the second)",
                path.display(),
                computed.unwrap_or(0),
                summary.len.saturating_sub(8)
            ));
        }
    }
    Ok(Some(loader.stats))
}

/// Loads an RDB that arrives in pieces (a replica's `repl-diskless-load`:
/// the master's payload as it comes off the socket) into the (empty)
/// keyspace. `pieces` ends when the payload does; a payload that ends
/// inside the RDB, or goes on after it, is an error. The CRC64 trailer is
/// not checked here: the summary carries it (`Checksum::NotVerified`) for
/// the caller, which checksums the bytes as they pass. On any error the
/// keyspace must be discarded.
pub fn load_stream(
    ks: &mut Keyspace,
    pieces: impl Iterator<Item = Vec<u8>>,
    payload_len: Option<u64>,
    now_ms: i64,
    config: &crate::config::Config,
) -> Result<(LoadStats, DecodeSummary), String> {
    let mut load = StreamLoad::new(ks, payload_len, now_ms, config);
    for piece in pieces {
        load.feed(&piece)?;
    }
    load.finish()
}

/// An RDB loaded piece by piece as it arrives ([`load_stream`]; an RDMA
/// full sync's ring slots). Each piece is decoded in place and may be
/// reused once [`feed`](Self::feed) returns: a record cut by the end of a
/// piece is copied and kept until the pieces that complete it arrive —
/// except a long plain string, which is copied straight into its final
/// allocation as its bytes arrive ([`BIG_STRING`]). The pieces are not
/// yet checksummed, so a length in them is trusted only as far as the
/// payload can hold it. The CRC64 trailer is returned unverified
/// (`Checksum::NotVerified`): the caller checksums the bytes as they pass.
/// On any error the keyspace must be discarded.
pub struct StreamLoad<'k> {
    loader: Loader<'k>,
    dec: StreamDecoder,
    /// The payload's length when known (`$<len>` framing, an RDMA offer).
    payload_len: Option<u64>,
    /// The start of a record cut by the end of a piece.
    tail: Vec<u8>,
    /// A large string value being filled in as it arrives.
    big: Option<BigString>,
    /// Values filled in that way.
    big_strings: u64,
    summary: Option<DecodeSummary>,
}

/// Strings at least this long that a piece cuts are copied straight into
/// their final allocation as they arrive ([`StreamDecoder::cut_string`])
/// rather than kept whole in the tail first: no second copy, and the
/// load's own memory stays small whatever the size of the values.
const BIG_STRING: u64 = 64 << 10;

/// With no known payload length, the largest string filled in place: a
/// Redis string holds at most 512 MB (`proto-max-bulk-len`'s default).
/// A longer (corrupt) length goes the tail's way, which grows only with
/// the bytes that really arrive.
const BIG_STRING_UNBOUNDED_MAX: u64 = 512 << 20;

/// A string value filled in piece by piece.
struct BigString {
    db: u64,
    key: Vec<u8>,
    expire_ms: Option<i64>,
    /// The whole record's length (head and value), for the decoder.
    record_len: usize,
    value: std::sync::Arc<[std::mem::MaybeUninit<u8>]>,
    filled: usize,
}

impl BigString {
    /// Copies what `data` holds of the value; returns the bytes taken.
    fn fill(&mut self, data: &[u8]) -> usize {
        let dst = std::sync::Arc::get_mut(&mut self.value).expect("not shared");
        let n = data.len().min(dst.len() - self.filled);
        for (d, s) in dst[self.filled..self.filled + n].iter_mut().zip(data) {
            d.write(*s);
        }
        self.filled += n;
        n
    }

    fn complete(&self) -> bool {
        self.filled == self.value.len()
    }
}

impl<'k> StreamLoad<'k> {
    /// `payload_len`: the bytes the pieces will add up to, when known.
    pub fn new(
        ks: &'k mut Keyspace,
        payload_len: Option<u64>,
        now_ms: i64,
        config: &crate::config::Config,
    ) -> Self {
        StreamLoad {
            loader: Loader::new(ks, payload_len, now_ms, config),
            dec: StreamDecoder::new(),
            payload_len,
            tail: Vec::new(),
            big: None,
            big_strings: 0,
            summary: None,
        }
    }

    /// The next piece of the RDB.
    pub fn feed(&mut self, mut piece: &[u8]) -> Result<(), String> {
        if let Some(big) = self.big.as_mut() {
            piece = &piece[big.fill(piece)..];
            if !big.complete() {
                return Ok(());
            }
            let big = self.big.take().expect("big");
            self.dec.skip_string(big.record_len);
            self.big_strings += 1;
            let key = String::from_utf8_lossy(&big.key).into_owned();
            self.loader
                .big_string(big)
                .map_err(|e| format!("the payload is corrupt: key '{key}': {e}"))?;
            if piece.is_empty() {
                return Ok(());
            }
        }
        if self.summary.is_some() {
            if piece.is_empty() {
                return Ok(());
            }
            return Err("the payload goes on after the end of the RDB".into());
        }
        let data: &[u8] = if self.tail.is_empty() {
            piece
        } else {
            self.tail.extend_from_slice(piece);
            &self.tail
        };
        match self.dec.feed(data, &mut self.loader).map_err(corrupt)? {
            Fed::NeedMore { consumed } => {
                let rest = &data[consumed..];
                let cut = self.dec.cut_string(rest).filter(|c| {
                    c.len >= BIG_STRING
                        && (self.payload_len.is_some() || c.len <= BIG_STRING_UNBOUNDED_MAX)
                });
                if let Some(cut) = cut {
                    // The value's offset in the stream, and its end.
                    let at = (self.dec.consumed() + cut.head) as u64;
                    let end = at.saturating_add(cut.len);
                    if let Some(total) = self.payload_len.filter(|&t| end > t) {
                        return Err(format!(
                            "the payload is corrupt: a string of {} bytes at offset {at} runs past its end ({total} bytes)",
                            cut.len
                        ));
                    }
                    let len = usize::try_from(cut.len)
                        .map_err(|_| format!("a string of {} bytes", cut.len))?;
                    let mut big = BigString {
                        db: cut.db,
                        key: cut.key.into_owned(),
                        expire_ms: cut.expire_ms,
                        record_len: cut.head + len,
                        value: std::sync::Arc::new_uninit_slice(len),
                        filled: 0,
                    };
                    big.fill(&rest[cut.head..]);
                    self.big = Some(big);
                    self.tail.clear();
                } else if self.tail.is_empty() {
                    self.tail.extend_from_slice(&piece[consumed..]);
                } else {
                    self.tail.drain(..consumed);
                }
            }
            Fed::Done { consumed, summary } => {
                if consumed != data.len() {
                    return Err("the payload goes on after the end of the RDB".into());
                }
                self.tail.clear();
                self.summary = Some(summary);
            }
        }
        Ok(())
    }

    /// String values cut by the end of a piece and filled in as they
    /// arrived, straight into their allocation.
    pub fn strings_filled_in_place(&self) -> u64 {
        self.big_strings
    }

    /// The payload ended: a record cut by its end is an error.
    pub fn finish(mut self) -> Result<(LoadStats, DecodeSummary), String> {
        if let Some(big) = &self.big {
            return Err(format!(
                "the payload is corrupt: it ends {} bytes into a string of {}",
                big.filled,
                big.value.len()
            ));
        }
        let summary = match self.summary {
            Some(s) => s,
            None => {
                let (s, used) = self
                    .dec
                    .feed_end(&self.tail, &mut self.loader)
                    .map_err(corrupt)?;
                if used != self.tail.len() {
                    return Err("the payload goes on after the end of the RDB".into());
                }
                s
            }
        };
        Ok((self.loader.stats, summary))
    }
}

fn corrupt(e: ferrokv_rdb::DecodeError) -> String {
    format!("the payload is corrupt: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistence::snapshot::tests::{meta, noise};
    use crate::persistence::snapshot::{JobStatus, SaveKind, SnapshotJob};

    /// A snapshot of strings of every size (small, LZF-compressible,
    /// large enough to go by reference) and sets, in three databases.
    fn snapshot(dir: &Path) -> (std::path::PathBuf, ferrokv_store::digest::Digest) {
        let mut ks = Keyspace::new(16);
        for i in 0..20_000u64 {
            let db = (i % 3) as usize;
            let key = format!("k{i}");
            match i % 1000 {
                // Large values, half of them with an expiry.
                0 => {
                    let expire = if i % 2000 == 0 { 1 << 43 } else { NO_EXPIRE };
                    ks.dbs[db].set_str(key.as_bytes(), &noise(i, 300 << 10), expire, 0)
                }
                1 => ks.dbs[db].set_str(key.as_bytes(), &[b'z'; 100 << 10], NO_EXPIRE, 0),
                2..=9 => {
                    let set = ferrokv_store::set::Set::from_members(
                        (0..(i % 200))
                            .map(|m| format!("m{m}").into_bytes())
                            .collect::<Vec<_>>()
                            .iter()
                            .map(|m| &m[..]),
                        512,
                    );
                    ks.dbs[db].upsert(key.as_bytes(), ferrokv_store::Value::Set(set), NO_EXPIRE, 0)
                }
                _ => ks.dbs[db].set_str(key.as_bytes(), format!("v{i}").as_bytes(), NO_EXPIRE, 0),
            };
        }
        let path = dir.join("dump.rdb");
        let mut job = SnapshotJob::start(&mut ks, &path, SaveKind::Foreground, 0, meta()).unwrap();
        while !job.step(&mut ks, u64::MAX) {}
        let JobStatus::Done(r) = job.poll(true) else {
            unreachable!()
        };
        r.unwrap();
        (path, ks.digest())
    }

    /// `src` fed to a [`StreamLoad`] in pieces of the given sizes, in
    /// turn, each piece a buffer overwritten once fed (as a ring slot is
    /// reused once its credit is returned).
    fn load_in_pieces(
        ks: &mut Keyspace,
        src: &[u8],
        pieces: &[usize],
    ) -> Result<(LoadStats, DecodeSummary, u64), String> {
        let cfg = crate::config::Config::default();
        let mut load = StreamLoad::new(ks, Some(src.len() as u64), 0, &cfg);
        let r = feed_pieces(&mut load, src, pieces);
        let big = load.strings_filled_in_place();
        r.and_then(|()| load.finish())
            .map(|(stats, summary)| (stats, summary, big))
    }

    fn feed_pieces(load: &mut StreamLoad, src: &[u8], pieces: &[usize]) -> Result<(), String> {
        let (mut at, mut i) = (0, 0);
        let mut slot = Vec::new();
        while at < src.len() {
            let n = pieces[i % pieces.len()].min(src.len() - at);
            slot.clear();
            slot.extend_from_slice(&src[at..at + n]);
            load.feed(&slot)?;
            slot.fill(0xee);
            at += n;
            i += 1;
        }
        Ok(())
    }

    #[test]
    fn an_rdb_loaded_in_pieces_equals_the_file_loaded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (path, digest) = snapshot(dir.path());
        let src = std::fs::read(&path).unwrap();
        let cfg = crate::config::Config::default();
        let mut whole = Keyspace::new(16);
        load_rdb(&mut whole, &path, 0, &cfg).unwrap().unwrap();
        assert_eq!(whole.digest(), digest);
        // Odd piece sizes cut records, headers and big values anywhere.
        // The 20 values of 300 KiB are filled in place when a piece cuts
        // them: always with the small pieces, never when the whole file
        // is one piece.
        for (pieces, in_place) in [
            (&[1usize, 7, 4093, 65536][..], 20..=20),
            (&[2 << 20], 1..=20),
            (&[src.len()], 0..=0),
        ] {
            let mut ks = Keyspace::new(16);
            let (stats, summary, big) = load_in_pieces(&mut ks, &src, pieces).unwrap();
            assert!(in_place.contains(&big), "{big} for {pieces:?}");
            assert_eq!(stats.keys, 20_000);
            assert_eq!(summary.len, src.len());
            let ferrokv_rdb::Checksum::NotVerified(stored) = summary.checksum else {
                panic!("{:?}", summary.checksum)
            };
            assert_eq!(stored, ferrokv_rdb::crc64::crc64(0, &src[..src.len() - 8]));
            assert_eq!(ks.digest(), digest, "pieces {pieces:?}");
        }
    }

    #[test]
    fn a_payload_cut_short_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = snapshot(dir.path());
        let src = std::fs::read(&path).unwrap();
        let mut ks = Keyspace::new(16);
        let e = load_in_pieces(&mut ks, &src[..src.len() / 2], &[65536]).unwrap_err();
        assert!(e.contains("corrupt"), "{e}");
        // Inside a value that would be filled in place ("k0" holds 300
        // KiB): past the payload's known end, or cut by an unframed end.
        let k0 = src.windows(2).position(|w| w == b"k0").unwrap();
        let cut = &src[..k0 + 100_000];
        let mut ks = Keyspace::new(16);
        let e = load_in_pieces(&mut ks, cut, &[4096]).unwrap_err();
        assert!(e.contains("a string of 307200 bytes at offset"), "{e}");
        let cfg = crate::config::Config::default();
        let mut ks = Keyspace::new(16);
        let mut load = StreamLoad::new(&mut ks, None, 0, &cfg);
        feed_pieces(&mut load, cut, &[4096]).unwrap();
        let e = load.finish().map(|_| ()).unwrap_err();
        assert!(e.contains("into a string of 307200"), "{e}");
    }

    #[test]
    fn a_corrupt_huge_string_length_is_an_error_not_an_allocation() {
        // A string record claiming 64 TiB, followed by 100 bytes.
        let mut rdb = b"REDIS0011\x00\x01k\x81".to_vec();
        rdb.extend_from_slice(&(1u64 << 46).to_be_bytes());
        rdb.extend_from_slice(&[b'x'; 100]);
        let cfg = crate::config::Config::default();
        for payload_len in [Some(rdb.len() as u64), None] {
            let mut ks = Keyspace::new(16);
            let mut load = StreamLoad::new(&mut ks, payload_len, 0, &cfg);
            let fed = feed_pieces(&mut load, &rdb, &[16]);
            let e = fed.and_then(|()| load.finish().map(|_| ())).unwrap_err();
            let want = if payload_len.is_some() {
                "runs past its end"
            } else {
                "corrupt"
            };
            assert!(e.contains(want), "{payload_len:?}: {e}");
        }
    }

    #[test]
    fn a_corrupt_resizedb_hint_reserves_no_more_than_the_input_can_hold() {
        // RESIZEDB claiming 2^60 keys, then one key and the end (no CRC).
        let mut rdb = b"REDIS0011\xfe\x00\xfb\x81".to_vec();
        rdb.extend_from_slice(&(1u64 << 60).to_be_bytes());
        rdb.extend_from_slice(b"\x00\x00\x01k\x01v\xff");
        rdb.extend_from_slice(&[0; 8]);
        let cfg = crate::config::Config::default();
        for payload_len in [Some(rdb.len() as u64), None] {
            let mut ks = Keyspace::new(16);
            let mut load = StreamLoad::new(&mut ks, payload_len, 0, &cfg);
            feed_pieces(&mut load, &rdb, &[5]).unwrap();
            assert_eq!(load.finish().unwrap().0.keys, 1);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.rdb");
        std::fs::write(&path, &rdb).unwrap();
        let mut ks = Keyspace::new(16);
        assert_eq!(load_rdb(&mut ks, &path, 0, &cfg).unwrap().unwrap().keys, 1);
    }

    #[test]
    fn bytes_after_the_rdb_or_a_corrupt_record_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = snapshot(dir.path());
        let src = std::fs::read(&path).unwrap();
        // The RDB followed by more bytes, in the last piece or after it.
        let mut longer = src.clone();
        longer.extend_from_slice(b"extra");
        // A value's type byte overwritten: the first key's record.
        let mut corrupt = src.clone();
        let first_key = src.windows(2).position(|w| w == b"k0").unwrap();
        corrupt[first_key - 2] = 0xee;
        for (bytes, pieces, want) in [
            (&longer, &[65536][..], "goes on after the end"),
            (&longer, &[src.len(), 5], "goes on after the end"),
            (&corrupt, &[65536], "corrupt"),
        ] {
            let mut ks = Keyspace::new(16);
            let e = load_in_pieces(&mut ks, bytes, pieces).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
