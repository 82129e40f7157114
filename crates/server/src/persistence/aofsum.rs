//! Checksums beside the append-only file: a *companion* per incremental
//! file (`appendonly.aof.3.incr.aof.sum` beside `appendonly.aof.3.incr.aof`)
//! holds one record per block of consecutive bytes of the incremental file
//! — its offset, its length, the commands it covers (their numbers within
//! the file) and the CRC64 of its bytes. The incremental files stay
//! byte-for-byte what Redis writes, so `redis-check-aof` and a real
//! redis-server still read them; the manifest names each companion with a
//! key of its own on the incr file's line (`... type i ferrokv-sum
//! appendonly.aof.3.incr.aof.sum`), which Redis 7.0's manifest parser
//! skips (`aofLoadManifestFromFile` ignores keys it does not know, "for
//! forward compatibility"; `tests/aof_checksums.rs` loads such a directory
//! into the real redis-server). A manifest Redis rewrote drops the key:
//! the file then loads unverified, as one Redis wrote.
//!
//! Why CRC64 (Jones, Redis's `crc64.c`, from `ferrokv-rdb`): it is the
//! checksum the RDB base already carries, so the whole AOF is protected by
//! one function; it is carry-less-multiply fast (~10 GB/s on the
//! development VM, `crates/rdb/examples/throughput.rs`), far beyond the
//! rate commands are appended at; and it adds no dependency. A block
//! holds at most a few hundred KiB, where a 64-bit CRC misses no burst
//! shorter than 64 bits and a random change with probability 2^-64.
//!
//! When blocks close: with `appendfsync always`, at every flush (one loop
//! turn's commands), and the companion is synced together with the log,
//! before the replies go out; with `everysec` and `no`, when the open
//! block reaches [`BLOCK_BYTES`] or at the next cron tick (10 a second),
//! and the `everysec` thread syncs both files. So a block's checksum is
//! durable with the data it covers (`always`) or within the same second.
//!
//! The companion's layout (little-endian):
//! ```text
//! header  "FKVAOFS1" | u32 version (1) | u32 name length | name | u64 CRC64 of the header so far
//! record  u64 offset | u64 length | u64 first command | u32 commands | u64 CRC64 of the bytes
//!         | u32 low half of the CRC64 of the record's first 36 bytes         (40 bytes)
//! ```
//! The name is the incremental file's, so a companion put beside another
//! file is recognised as such. Records are contiguous from offset 0; a
//! record cut short at the end of the companion (a crash while it was
//! appended) is ignored, a damaged one before the end is an error.

use ferrokv_rdb::crc64::crc64;

pub const MAGIC: &[u8; 8] = b"FKVAOFS1";
const VERSION: u32 = 1;
pub const RECORD_LEN: usize = 40;
/// A block closes once it holds this many bytes (or at the next cron tick
/// with `everysec`/`no`, at every flush with `always`).
pub const BLOCK_BYTES: u64 = 64 << 10;
/// The manifest key naming an incr file's companion.
pub const MANIFEST_KEY: &str = "ferrokv-sum";

/// The companion's name for an incremental file.
pub fn companion_name(incr: &str) -> String {
    format!("{incr}.sum")
}

/// One block of an incremental file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub offset: u64,
    pub len: u64,
    /// The number (from 0, within the file) of the block's first command.
    pub first_cmd: u64,
    pub cmds: u32,
    pub crc: u64,
}

impl Record {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }

    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_cmd.to_le_bytes());
        b[24..28].copy_from_slice(&self.cmds.to_le_bytes());
        b[28..36].copy_from_slice(&self.crc.to_le_bytes());
        let own = crc64(0, &b[0..36]) as u32;
        b[36..40].copy_from_slice(&own.to_le_bytes());
        b
    }

    /// `None` when the record's own checksum does not match.
    pub fn decode(b: &[u8]) -> Option<Record> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let own = u32::from_le_bytes(b[36..40].try_into().unwrap());
        if crc64(0, &b[0..36]) as u32 != own {
            return None;
        }
        Some(Record {
            offset: u64_at(0),
            len: u64_at(8),
            first_cmd: u64_at(16),
            cmds: u32::from_le_bytes(b[24..28].try_into().unwrap()),
            crc: u64_at(28),
        })
    }
}

/// The header of the companion of the incremental file `incr`.
pub fn header(incr: &str) -> Vec<u8> {
    let mut h = Vec::with_capacity(32 + incr.len());
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&(incr.len() as u32).to_le_bytes());
    h.extend_from_slice(incr.as_bytes());
    let c = crc64(0, &h);
    h.extend_from_slice(&c.to_le_bytes());
    h
}

/// A companion read back.
#[derive(Debug, Clone, Default)]
pub struct Companion {
    pub records: Vec<Record>,
    /// Its length up to the end of the last whole record.
    pub valid_len: u64,
    /// Bytes after the last whole record (a record cut by a crash).
    pub torn_bytes: u64,
}

/// Why a companion cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompanionError {
    /// The offset in the companion.
    pub at: u64,
    pub reason: String,
}

/// Parses the companion `bytes` of the incremental file `incr`.
pub fn parse(bytes: &[u8], incr: &str) -> Result<Companion, CompanionError> {
    let err = |at: usize, reason: String| CompanionError {
        at: at as u64,
        reason,
    };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(err(0, "not a ferrokv AOF checksum file".into()));
    }
    let name_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let hlen = 16 + name_len + 8;
    if bytes.len() < hlen {
        return Err(err(0, "its header is cut short".into()));
    }
    let stored = u64::from_le_bytes(bytes[hlen - 8..hlen].try_into().unwrap());
    if crc64(0, &bytes[..hlen - 8]) != stored {
        return Err(err(0, "its header is damaged".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(err(8, format!("unknown version {version}")));
    }
    let name = String::from_utf8_lossy(&bytes[16..16 + name_len]);
    if name != incr {
        return Err(err(
            16,
            format!("it is the checksum file of {name}, not of {incr}"),
        ));
    }
    let mut c = Companion::default();
    let body = &bytes[hlen..];
    let whole = body.len() / RECORD_LEN;
    let mut expect = 0u64;
    for i in 0..whole {
        let at = hlen + i * RECORD_LEN;
        let raw = &body[i * RECORD_LEN..(i + 1) * RECORD_LEN];
        let Some(r) = Record::decode(raw) else {
            if i + 1 == whole && body.len().is_multiple_of(RECORD_LEN) {
                // The last record, half written when the server stopped.
                c.torn_bytes = RECORD_LEN as u64;
                break;
            }
            return Err(err(at, format!("record {i} is damaged")));
        };
        let next_cmd = c.records.last().map_or(0, |p| p.first_cmd + p.cmds as u64);
        if r.offset != expect || r.first_cmd != next_cmd {
            return Err(err(
                at,
                format!(
                    "record {i} covers offset {} (command {}), expected offset {expect} (command {next_cmd})",
                    r.offset, r.first_cmd
                ),
            ));
        }
        expect = r.end();
        c.records.push(r);
    }
    c.valid_len = (hlen + c.records.len() * RECORD_LEN) as u64;
    c.torn_bytes += (body.len() % RECORD_LEN) as u64;
    Ok(c)
}

/// What verifying an incremental file against its companion found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every block matches; bytes after the last block (a crash within
    /// the last second with `everysec`, or before the companion's write
    /// with `always`) are not covered.
    Clean,
    /// The first block that does not match is the companion's last one,
    /// and the file ends inside it: a torn write, handled as a truncated
    /// tail (`aof-load-truncated`).
    TornLastBlock(Record),
    /// Every block inside the file matches, and the file ends at or inside
    /// a block that is not the companion's last: it was cut after its
    /// checksums were written (`redis-check-aof --fix`, a truncation, a
    /// shorter copy). Handled as a truncated tail: the verified blocks
    /// load, the bytes of this block that are left are cut.
    Cut(Record),
    /// A block that does not match although its bytes are all there (or
    /// with later records after it).
    Mismatch(Record),
    /// The companion itself is unusable (another file's, damaged).
    BadCompanion(CompanionError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub outcome: Outcome,
    /// The bytes from the start of the file that are verified.
    pub verified_len: u64,
    pub verified_blocks: u64,
    /// Commands in the verified bytes.
    pub verified_cmds: u64,
    /// Bytes after the last verified block (for `Clean`: not covered).
    pub unverified_len: u64,
    /// A record cut short at the companion's end.
    pub companion_torn_bytes: u64,
    /// The bytes the companion's records describe (0 for a bad one).
    pub described_len: u64,
}

/// Verifies `data` (an incremental file) against its companion's bytes.
pub fn verify(data: &[u8], companion: &[u8], incr: &str) -> Verification {
    let c = match parse(companion, incr) {
        Ok(c) => c,
        Err(e) => {
            return Verification {
                outcome: Outcome::BadCompanion(e),
                verified_len: 0,
                verified_blocks: 0,
                verified_cmds: 0,
                unverified_len: data.len() as u64,
                companion_torn_bytes: 0,
                described_len: 0,
            }
        }
    };
    let mut v = Verification {
        outcome: Outcome::Clean,
        verified_len: 0,
        verified_blocks: 0,
        verified_cmds: 0,
        unverified_len: 0,
        companion_torn_bytes: c.torn_bytes,
        described_len: c.records.last().map_or(0, |r| r.end()),
    };
    for (i, r) in c.records.iter().enumerate() {
        let end = r.end() as usize;
        let ok = end <= data.len() && crc64(0, &data[r.offset as usize..end]) == r.crc;
        if !ok {
            // A torn write is the companion's last block with bytes
            // missing at the end of the file: a record is written after
            // its bytes, and the next one only once both were synced
            // (`always`, `everysec`). A block whose bytes are all there
            // but differ is damage, wherever it is.
            // A file that ends before a block that is not the last was
            // cut afterwards (the records after it describe bytes it no
            // longer has).
            v.outcome = if data.len() < end && i + 1 == c.records.len() {
                Outcome::TornLastBlock(*r)
            } else if data.len() < end {
                Outcome::Cut(*r)
            } else {
                Outcome::Mismatch(*r)
            };
            break;
        }
        v.verified_len = r.end();
        v.verified_blocks += 1;
        v.verified_cmds = r.first_cmd + r.cmds as u64;
    }
    v.unverified_len = data.len() as u64 - v.verified_len;
    v
}

/// The start offset and number (from 0) of the last whole command in
/// `data` (the verified part of a file), for error messages.
pub fn last_command(data: &[u8]) -> Option<(usize, u64)> {
    let mut last = None;
    let mut n = 0u64;
    let _ = super::aof::replay(data, "", |_, off| {
        last = Some((off, n));
        n += 1;
        Ok(())
    });
    last
}

/// Says what `v` (the verification of `data`, the incremental file
/// `incr`, against `sum`) found wrong, with the offset and the last good
/// command's position; `None` when nothing is.
pub fn describe_damage(incr: &str, sum: &str, data: &[u8], v: &Verification) -> Option<String> {
    let last_good = || match last_command(&data[..v.verified_len as usize]) {
        Some((at, n)) => format!(
            "the last verified command is #{} (counting from 1), at offset {at}",
            n + 1
        ),
        None => "no command of the file is verified".to_string(),
    };
    match &v.outcome {
        Outcome::Clean => None,
        Outcome::Cut(r) => Some(format!(
            "{incr} ends at offset {}, {} bytes short of what {sum} describes ({} bytes): it was cut after its checksums were written (redis-check-aof --fix, a truncation, a shorter copy); every block before offset {} is verified, and {}",
            data.len(),
            v.described_len - data.len() as u64,
            v.described_len,
            r.offset,
            last_good()
        )),
        Outcome::TornLastBlock(r) | Outcome::Mismatch(r) => {
            let kind = if matches!(v.outcome, Outcome::TornLastBlock(_)) {
                "the last block (a torn write)"
            } else if r.end() >= data.len() as u64 {
                "the last block, whole on disk"
            } else {
                "a block before the end"
            };
            let have = (data.len() as u64).saturating_sub(r.offset).min(r.len);
            let mut d = format!(
                "checksum mismatch in {incr} at offset {} in {kind}: block {} of {sum} covers offsets {}..{} ({} bytes, {} on disk), commands #{}..#{}; the last verified point is offset {}, and {}",
                r.offset,
                v.verified_blocks,
                r.offset,
                r.end(),
                r.len,
                have,
                r.first_cmd + 1,
                r.first_cmd + r.cmds as u64,
                v.verified_len,
                last_good()
            );
            if let Some(stale) = stale_companion(incr, sum, data, v) {
                d.push_str(&stale);
            }
            Some(d)
        }
        Outcome::BadCompanion(e) => Some(format!(
            "the checksum file {sum} of {incr} is unusable at its offset {}: {}",
            e.at, e.reason
        )),
    }
}

/// When nothing of the file matches its companion from the first block
/// on, yet the file is a well-formed AOF to its last byte: the companion
/// most likely describes another file (the incremental file was replaced
/// after its checksums were written: a restored backup, a file Redis or its
/// tools wrote). Damage at the very start looks the same, so this only
/// says so and what to do, and loads nothing.
fn stale_companion(incr: &str, sum: &str, data: &[u8], v: &Verification) -> Option<String> {
    if v.verified_blocks > 0 || data.is_empty() {
        return None;
    }
    let mut cmds = 0u64;
    let whole = matches!(
        super::aof::replay(data, incr, |_, _| {
            cmds += 1;
            Ok(())
        }),
        Ok(super::aof::ReplayEnd::Complete)
    );
    whole.then(|| {
        format!(
            ". {incr} is nonetheless a well-formed AOF ({} bytes, {cmds} commands) where {sum} describes {} bytes: {sum} is probably stale, written for the file {incr} replaced (a restored backup, a file written by Redis or its tools). If {incr} is the file you want loaded, remove {sum} and restart: {incr} then loads unverified and gets a new checksum file. If not, put back the file {sum} describes",
            data.len(),
            v.described_len
        )
    })
}

/// `ferrokv-server --check-aof <manifest>`: verifies, offline, every
/// incremental file the manifest names against its companion, and the
/// RDB base's CRC64 trailer. Returns the report and whether everything
/// that has a checksum matched (the first bad block of each file is
/// reported; bytes without a checksum are reported, not counted as
/// damage).
pub fn check_manifest(manifest: &std::path::Path) -> Result<(String, bool), String> {
    use std::fmt::Write;
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("Can't read {}: {e}", manifest.display()))?;
    let m = super::aof::Manifest::parse(&text)
        .map_err(|e| format!("The AOF manifest {} is invalid: {e}", manifest.display()))?;
    let dir = manifest.parent().unwrap_or(std::path::Path::new("."));
    let mut out = String::new();
    let mut ok = true;
    if let Some(b) = &m.base {
        let data =
            std::fs::read(dir.join(&b.name)).map_err(|e| format!("Can't read {}: {e}", b.name))?;
        if data.starts_with(b"REDIS") && data.len() >= 8 {
            let (body, tail) = data.split_at(data.len() - 8);
            let stored = u64::from_le_bytes(tail.try_into().unwrap());
            if stored == 0 {
                let _ = writeln!(out, "{}: RDB base without a checksum (CRC64 0)", b.name);
            } else if crc64(0, body) == stored {
                let _ = writeln!(out, "{}: RDB base, CRC64 ok ({} bytes)", b.name, data.len());
            } else {
                ok = false;
                let _ = writeln!(out, "{}: RDB base, CRC64 MISMATCH", b.name);
            }
        } else {
            let _ = writeln!(
                out,
                "{}: base of commands (no checksum; redis-check-aof checks its format)",
                b.name
            );
        }
    }
    for f in &m.incrs {
        let data =
            std::fs::read(dir.join(&f.name)).map_err(|e| format!("Can't read {}: {e}", f.name))?;
        let Some(sum) = &f.sum else {
            let _ = writeln!(
                out,
                "{}: no checksum file: {} bytes not covered",
                f.name,
                data.len()
            );
            continue;
        };
        let bytes = match std::fs::read(dir.join(sum)) {
            Ok(b) => b,
            Err(e) => {
                ok = false;
                let _ = writeln!(out, "{}: can't read its checksum file {sum}: {e}", f.name);
                continue;
            }
        };
        let v = verify(&data, &bytes, &f.name);
        match describe_damage(&f.name, sum, &data, &v) {
            Some(d) => {
                ok = false;
                let _ = writeln!(out, "{}: FIRST BAD BLOCK: {d}", f.name);
            }
            None => {
                let _ = write!(
                    out,
                    "{}: ok, {} bytes in {} blocks verified ({} commands)",
                    f.name, v.verified_len, v.verified_blocks, v.verified_cmds
                );
                if v.unverified_len > 0 {
                    let _ = write!(
                        out,
                        "; the last {} bytes (from offset {}) have no checksum record",
                        v.unverified_len, v.verified_len
                    );
                }
                if v.companion_torn_bytes > 0 {
                    let _ = write!(
                        out,
                        "; {sum} ends with {} bytes of a record cut short",
                        v.companion_torn_bytes
                    );
                }
                out.push('\n');
            }
        }
    }
    let _ = writeln!(
        out,
        "{}",
        if ok {
            "AOF checksums are valid"
        } else {
            "AOF checksums found damage"
        }
    );
    Ok((out, ok))
}

/// The bytes of one open block, as the writer accumulates them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenBlock {
    pub offset: u64,
    pub len: u64,
    pub first_cmd: u64,
    pub cmds: u32,
    pub crc: u64,
}

impl OpenBlock {
    pub fn starting(offset: u64, first_cmd: u64) -> OpenBlock {
        OpenBlock {
            offset,
            len: 0,
            first_cmd,
            cmds: 0,
            crc: 0,
        }
    }

    /// `data` (holding `cmds` whole commands) was appended to the file.
    pub fn extend(&mut self, data: &[u8], cmds: u32) {
        self.crc = crc64(self.crc, data);
        self.len += data.len() as u64;
        self.cmds += cmds;
    }

    pub fn record(&self) -> Record {
        Record {
            offset: self.offset,
            len: self.len,
            first_cmd: self.first_cmd,
            cmds: self.cmds,
            crc: self.crc,
        }
    }

    /// The block that follows this one once it is closed.
    pub fn next(&self) -> OpenBlock {
        OpenBlock::starting(self.offset + self.len, self.first_cmd + self.cmds as u64)
    }
}

/// The records of `data` (whole commands from offset `from`, the `first_cmd`-th
/// command on), cut at command boundaries once a block holds
/// [`BLOCK_BYTES`]: to cover a file (or the tail of one) written without
/// checksums, once it has been loaded.
pub fn records_for(data: &[u8], from: u64, first_cmd: u64) -> Vec<Record> {
    use super::aof::{replay, ReplayEnd};
    let mut starts = Vec::new();
    let end = match replay(data, "", |_, off| {
        starts.push(off);
        Ok(())
    }) {
        Ok(ReplayEnd::Complete) => data.len(),
        Ok(ReplayEnd::Truncated { valid_len }) => valid_len,
        // Only what parses is covered (a loaded file always does).
        Err(_) => starts.pop().unwrap_or(0),
    };
    if let Some(first) = starts.first_mut() {
        // Empty arrays (`*0`) before the first command go with it.
        *first = 0;
    }
    starts.push(end);
    let mut out = Vec::new();
    let mut block = OpenBlock::starting(from, first_cmd);
    for w in starts.windows(2) {
        block.extend(&data[w[0]..w[1]], 1);
        if block.len >= BLOCK_BYTES {
            out.push(block.record());
            block = block.next();
        }
    }
    if block.len > 0 {
        out.push(block.record());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for i in 0..n {
            starts.push(out.len());
            let v = format!("value-{i}-{}", "x".repeat(i % 300));
            crate::propagate::encode_command(
                &mut out,
                &mut Some(0),
                0,
                &[b"SET".as_slice(), format!("k{i}").as_bytes(), v.as_bytes()],
            );
        }
        (out, starts)
    }

    fn companion(name: &str, records: &[Record]) -> Vec<u8> {
        let mut c = header(name);
        for r in records {
            c.extend_from_slice(&r.encode());
        }
        c
    }

    #[test]
    fn records_round_trip_and_a_damaged_one_is_refused() {
        let r = Record {
            offset: 123,
            len: 4567,
            first_cmd: 89,
            cmds: 10,
            crc: 0xdead_beef_f00d,
        };
        let mut b = r.encode();
        assert_eq!(Record::decode(&b), Some(r));
        b[3] ^= 1;
        assert_eq!(Record::decode(&b), None);
    }

    #[test]
    fn records_for_cover_every_command_once_at_command_boundaries() {
        let (data, starts) = cmds(2000);
        let recs = records_for(&data, 0, 0);
        assert!(recs.len() > 3, "{}", recs.len());
        let total: u64 = recs.iter().map(|r| r.cmds as u64).sum();
        assert_eq!(total, 2000);
        for w in recs.windows(2) {
            assert_eq!(w[0].end(), w[1].offset);
            assert_eq!(w[0].first_cmd + w[0].cmds as u64, w[1].first_cmd);
            assert!(starts.contains(&(w[1].offset as usize)));
        }
        let c = companion("f", &recs);
        let v = verify(&data, &c, "f");
        assert_eq!(v.outcome, Outcome::Clean);
        assert_eq!(v.verified_len, data.len() as u64);
        assert_eq!(v.verified_cmds, 2000);
        // One command only; an empty file.
        let one = &data[..starts[1]];
        assert_eq!(records_for(one, 0, 0)[0].cmds, 1);
        assert!(records_for(&[], 0, 0).is_empty());
    }

    #[test]
    fn a_flipped_bit_is_a_mismatch_at_its_block_and_a_torn_end_is_a_torn_block() {
        let (data, _) = cmds(2000);
        let recs = records_for(&data, 0, 0);
        let c = companion("f", &recs);
        let mut bad = data.clone();
        let at = recs[2].offset as usize + 100;
        bad[at] ^= 0x10;
        let v = verify(&bad, &c, "f");
        assert_eq!(v.outcome, Outcome::Mismatch(recs[2]));
        assert_eq!(v.verified_len, recs[2].offset);
        assert_eq!(v.verified_blocks, 2);
        // The file cut inside its last block, or damaged in it.
        let last = *recs.last().unwrap();
        let cut = &data[..last.offset as usize + 10];
        assert_eq!(verify(cut, &c, "f").outcome, Outcome::TornLastBlock(last));
        // Cut inside an earlier block (redis-check-aof --fix), or on its
        // boundary: every block before verifies, the rest is described
        // but gone.
        for len in [recs[1].offset as usize + 7, recs[1].offset as usize] {
            let v = verify(&data[..len], &c, "f");
            assert_eq!(v.outcome, Outcome::Cut(recs[1]));
            assert_eq!(v.verified_len, recs[1].offset);
            assert_eq!(v.described_len, last.end());
        }
        // Its bytes all there but one changed: damage, not a torn write.
        let mut end = data.clone();
        *end.last_mut().unwrap() ^= 1;
        assert_eq!(verify(&end, &c, "f").outcome, Outcome::Mismatch(last));
        // Another file's companion.
        let other = companion("g", &recs);
        let Outcome::BadCompanion(e) = verify(&data, &other, "f").outcome else {
            panic!()
        };
        assert_eq!(e.at, 16);
        // A companion cut inside a record: the whole ones still verify.
        let v = verify(&data, &c[..c.len() - 7], "f");
        assert_eq!(v.outcome, Outcome::Clean);
        assert_eq!(v.companion_torn_bytes, (RECORD_LEN - 7) as u64);
        assert_eq!(v.unverified_len, last.len);
        // A damaged record before the last one.
        let mut dmg = c.clone();
        let hlen = header("f").len();
        dmg[hlen + RECORD_LEN + 5] ^= 1;
        let Outcome::BadCompanion(e) = verify(&data, &dmg, "f").outcome else {
            panic!()
        };
        assert_eq!(e.at, (hlen + RECORD_LEN) as u64);
    }

    #[test]
    fn the_manifest_names_companions_with_a_key_redis_skips_and_skips_unknown_keys() {
        use crate::persistence::aof::Manifest;
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\n\
                    file appendonly.aof.1.incr.aof seq 1 type i ferrokv-sum appendonly.aof.1.incr.aof.sum\n\
                    file appendonly.aof.2.incr.aof seq 2 type i future-key x\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(
            m.incrs[0].sum.as_deref(),
            Some("appendonly.aof.1.incr.aof.sum")
        );
        assert_eq!(m.incrs[1].sum, None);
        // Rendered back: the companion's key kept, the unknown one not.
        assert_eq!(
            m.render(),
            "file appendonly.aof.1.base.rdb seq 1 type b\n\
             file appendonly.aof.1.incr.aof seq 1 type i ferrokv-sum appendonly.aof.1.incr.aof.sum\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        assert!(Manifest::parse("file a seq 1 type i ferrokv-sum ../x\n").is_err());
        assert!(Manifest::parse("file a seq 1\n").is_err());
    }

    #[test]
    fn the_last_command_of_verified_bytes_is_found() {
        let (data, starts) = cmds(10);
        assert_eq!(last_command(&data[..starts[5]]), Some((starts[4], 4)));
        assert_eq!(last_command(&[]), None);
    }
}
