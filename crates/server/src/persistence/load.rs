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

struct Loader<'k> {
    ks: &'k mut Keyspace,
    db: usize,
    now_ms: i64,
    stats: LoadStats,
    key_delay_us: u64,
    hash_limits: ferrokv_store::hash::HashLimits,
    set_max_intset: usize,
    zset_limits: ferrokv_store::ZsetLimits,
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

impl<'k> Loader<'k> {
    fn new(ks: &'k mut Keyspace, now_ms: i64, config: &crate::config::Config) -> Self {
        Loader {
            ks,
            db: 0,
            now_ms,
            stats: LoadStats::default(),
            key_delay_us: config.key_load_delay,
            hash_limits: config.hash_limits(),
            set_max_intset: config.set_max_intset(),
            zset_limits: config.zset_limits(),
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
            _ => {}
        }
        Ok(())
    }

    fn select_db(&mut self, db: u64) -> Result<(), VisitError> {
        self.db = db as usize;
        Ok(())
    }

    /// The file says how many keys follow: size the table once.
    fn resize_db(&mut self, db_size: u64, _expires: u64) -> Result<(), VisitError> {
        if let Some(d) = self.ks.dbs.get_mut(self.db) {
            d.reserve(db_size as usize);
        }
        Ok(())
    }

    fn entry(&mut self, e: RdbEntry<'_>) -> Result<(), VisitError> {
        let db = e.db as usize;
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
        if let Some(t) = e.expire_ms {
            if t <= self.now_ms {
                self.stats.expired += 1;
                return Ok(());
            }
        }
        match &e.value {
            RdbValue::String(s) => {
                self.ks.dbs[db].set_str(&e.key, s, e.expire_ms.unwrap_or(NO_EXPIRE), 0);
            }
            RdbValue::SortedSet(pairs) if !pairs.is_empty() => {
                let z = load_zset(pairs, &self.zset_limits).map_err(|m| {
                    format!("{m} in sorted set '{}'", String::from_utf8_lossy(&e.key))
                })?;
                let v = ferrokv_store::Value::ZSet(std::sync::Arc::new(z));
                self.ks.dbs[db].upsert(&e.key, v, e.expire_ms.unwrap_or(NO_EXPIRE), 0);
            }
            RdbValue::List(items) if !items.is_empty() => {
                let list: ferrokv_store::list::List = items.iter().collect();
                let value = ferrokv_store::Value::List(std::sync::Arc::new(list));
                self.ks.dbs[db].upsert(&e.key, value, e.expire_ms.unwrap_or(NO_EXPIRE), 0);
            }
            // Encodings are chosen by the configured thresholds, as Redis
            // does on load (whatever encoding the file used).
            RdbValue::Hash(pairs) if !pairs.is_empty() => {
                let h = ferrokv_store::hash::Hash::from_pairs(
                    pairs.iter().map(|(f, v)| (&f[..], &v[..])),
                    self.hash_limits,
                );
                let expire = e.expire_ms.unwrap_or(NO_EXPIRE);
                self.ks.dbs[db].upsert(&e.key, ferrokv_store::Value::Hash(h), expire, 0);
            }
            RdbValue::Set(members) if !members.is_empty() => {
                let s = ferrokv_store::set::Set::from_members(
                    members.iter().map(|m| &m[..]),
                    self.set_max_intset,
                );
                let expire = e.expire_ms.unwrap_or(NO_EXPIRE);
                self.ks.dbs[db].upsert(&e.key, ferrokv_store::Value::Set(s), expire, 0);
            }
            // Redis skips an empty collection on load.
            RdbValue::Hash(_) | RdbValue::Set(_) | RdbValue::List(_) | RdbValue::SortedSet(_) => {
                return Ok(())
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
    let mut loader = Loader::new(ks, now_ms, config);
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
        let decoded = decode_with(
            data,
            &mut loader,
            &DecodeOptions {
                verify_checksum: false,
            },
        );
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
                "{} is corrupt: RDB checksum mismatch, the trailer at offset {} holds {stored:#018x}, the content hashes to {:#018x}",
                path.display(),
                summary.len.saturating_sub(8),
                computed.unwrap_or(0)
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
    now_ms: i64,
    config: &crate::config::Config,
) -> Result<(LoadStats, DecodeSummary), String> {
    let mut loader = Loader::new(ks, now_ms, config);
    let mut dec = StreamDecoder::new();
    // The start of a record cut by the end of a piece, kept until the
    // pieces that complete it arrive; most pieces are decoded in place.
    let mut tail: Vec<u8> = Vec::new();
    let mut summary = None;
    let corrupt = |e: ferrokv_rdb::DecodeError| format!("the payload is corrupt: {e}");
    for piece in pieces {
        if summary.is_some() {
            if piece.is_empty() {
                continue;
            }
            return Err("the payload goes on after the end of the RDB".into());
        }
        let data: &[u8] = if tail.is_empty() {
            &piece
        } else {
            tail.extend_from_slice(&piece);
            &tail
        };
        match dec.feed(data, &mut loader).map_err(corrupt)? {
            Fed::NeedMore { consumed } => {
                if tail.is_empty() {
                    tail.extend_from_slice(&piece[consumed..]);
                } else {
                    tail.drain(..consumed);
                }
            }
            Fed::Done {
                consumed,
                summary: s,
            } => {
                if consumed != data.len() {
                    return Err("the payload goes on after the end of the RDB".into());
                }
                tail.clear();
                summary = Some(s);
            }
        }
    }
    let summary = match summary {
        Some(s) => s,
        None => {
            let (s, used) = dec.feed_end(&tail, &mut loader).map_err(corrupt)?;
            if used != tail.len() {
                return Err("the payload goes on after the end of the RDB".into());
            }
            s
        }
    };
    Ok((loader.stats, summary))
}
