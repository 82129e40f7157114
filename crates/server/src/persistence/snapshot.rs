//! The snapshot producer (on the loop) and its file consumer (a thread).

use ferrokv_rdb::{EncoderOptions, RdbEncoder};
use ferrokv_store::{Keyspace, ValueRef, NO_EXPIRE};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Chunks are handed to the writer at about this size.
const CHUNK: usize = 1024 * 1024;
/// Chunks that may wait for the writer; a slower disk makes the producer
/// wait (back-pressure) instead of buffering the whole snapshot.
const QUEUE: usize = 32;
/// Bytes of snapshot a background save produces per loop turn at most
/// (checked after each part of a segment).
const STEP_BYTES: u64 = 64 << 10;
/// Entries of a segment visited in one go.
const PART_ENTRIES: usize = 32;
/// Values by reference in one part at most. A background step sends at
/// most 2 x this + 2 messages (a flush left from an earlier part, a flush
/// and the value for each, the final flush): a value by reference exceeds
/// the step's byte budget, so the step ends with that part. That fits in
/// the room a consumer's queue has when the producer goes on (it pauses
/// at QUEUE / 2 in flight), so a step never blocks on a queue.
const EXTERNAL_PER_PART: usize = 4;
const _: () = assert!(ferrokv_rdb::encoder::EXTERNAL_MIN_LEN as u64 > STEP_BYTES);
const _: () = assert!(2 * EXTERNAL_PER_PART + 2 <= QUEUE / 2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveKind {
    /// `SAVE`, shutdown: run to completion now.
    Foreground,
    /// `BGSAVE`, save rules: a few segments per loop turn.
    Background,
}

/// What a consumer of the snapshot stream receives: shared chunks (one
/// copy of the bytes, however many consumers), then the end. A closed
/// channel without `End` means the snapshot was abandoned.
pub enum SnapshotChunk {
    Data(bytes::Bytes),
    End,
}
use SnapshotChunk as Msg;

/// A subscriber's end of the snapshot stream. It counts the chunks it has
/// not taken yet, so the producer — which runs on the event loop — can
/// pause when a subscriber (a replica socket) falls behind instead of
/// blocking the loop on a full channel.
pub struct Subscription {
    rx: Receiver<Msg>,
    inflight: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Subscription {
    /// The next chunk, waiting for it; `Err` when the snapshot was abandoned.
    pub fn recv(&self) -> Result<SnapshotChunk, std::sync::mpsc::RecvError> {
        let m = self.rx.recv()?;
        if matches!(m, Msg::Data(_)) {
            self.inflight
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(m)
    }
}

/// One snapshot in progress.
pub struct SnapshotJob {
    pub kind: SaveKind,
    encoder: Option<RdbEncoder>,
    /// (database index, segments to visit, keys, expires) per non-empty db.
    dbs: Vec<(usize, usize, usize, usize)>,
    cur: usize,
    seg: usize,
    /// Position inside segment `seg` (segments are taken in parts).
    seg_pos: usize,
    db_started: bool,
    chunk: Vec<u8>,
    /// The consumers: the file writer, and any that subscribed before the
    /// first chunk went out (a replica's diskless sync).
    consumers: Vec<SyncSender<Msg>>,
    /// Chunks each live subscriber has not taken yet.
    subscriber_inflight: Vec<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    chunks_sent: u64,
    bytes_sent: u64,
    result: Receiver<Result<u64, String>>,
    /// A streaming job reports its own result (there is no writer).
    result_tx: Option<SyncSender<Result<u64, String>>>,
    /// No file: the snapshot only feeds subscribers (diskless sync).
    pub streaming: bool,
    pub started: Instant,
    pub dirty_at_start: u64,
    /// `used_memory` when the save began: what the save keeps alive
    /// (copied segments, values overwritten since) shows as growth.
    pub used_memory_at_start: usize,
    pub keys_done: u64,
    pub keys_total: u64,
    /// `rdb-key-save-delay` in microseconds: pacing for tests.
    key_delay_us: u64,
    finished_producing: bool,
    /// The last step ended on its byte budget (see `step`).
    eager: bool,
    /// Chunk buffers the file writer is done with, for reuse.
    spare: Option<Receiver<Vec<u8>>>,
    /// Set by [`SnapshotJob::abandon`]; the file writer reads it under the
    /// lock just before its rename (see [`write_file`]).
    abandoned: Option<Arc<Mutex<bool>>>,
    /// A background step may not start before this (the duty cycle).
    next_step_at: Instant,
    pub path: PathBuf,
    pub peak_cow_entries: usize,
    /// The snapshot is the new base of an AOF rewrite, not `dump.rdb`.
    pub for_aof: bool,
}

impl std::fmt::Debug for SnapshotJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotJob")
            .field("kind", &self.kind)
            .field("keys_done", &self.keys_done)
            .field("keys_total", &self.keys_total)
            .finish()
    }
}

/// What the writer thread reported.
pub enum JobStatus {
    Running,
    Done(Result<u64, String>),
}

pub struct SnapshotMeta<'a> {
    pub aux: Vec<(&'a [u8], Vec<u8>)>,
    pub compression: bool,
    pub checksum: bool,
    /// The configured compact-encoding thresholds.
    pub limits: ferrokv_rdb::EncodingLimits,
    pub key_delay_us: u64,
    /// Write the file of a background save with `O_DIRECT`
    /// (`rdb-direct-io`, see `direct.rs`).
    pub direct_io: bool,
    /// The `FUNCTION` libraries' code, saved after the AUX fields (opcode
    /// FUNCTION2, where Redis 7.0 writes them).
    pub functions: Vec<Vec<u8>>,
}

impl SnapshotJob {
    /// Begins a snapshot of `ks` into `path` (through a temp file in the
    /// same directory).
    pub fn start(
        ks: &mut Keyspace,
        path: &Path,
        kind: SaveKind,
        dirty: u64,
        meta: SnapshotMeta,
    ) -> std::io::Result<SnapshotJob> {
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let tmp = dir.join(format!("temp-{}-{}.rdb", std::process::id(), dirty));
        let file = File::create(&tmp)?;
        // Background saves bypass the page cache; SAVE and the save of
        // SHUTDOWN (or DEBUG RELOAD) go through it: a load more often than
        // not follows them, and finds the file in the cache.
        let direct_io = meta.direct_io && kind == SaveKind::Background;
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        let (rtx, result) = sync_channel(1);
        let final_path = path.to_path_buf();
        // The writer counts down the chunks it has written, so a background
        // save waits for a slow disk instead of blocking the loop on a full
        // queue (see `step`).
        let inflight = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = Subscription {
            rx,
            inflight: inflight.clone(),
        };
        let (spare_tx, spare_rx) = std::sync::mpsc::channel();
        let abandoned = Arc::new(Mutex::new(false));
        let abandoned_w = abandoned.clone();
        std::thread::Builder::new()
            .name("rdb-writer".into())
            .spawn(move || {
                lower_priority();
                let file = super::direct::SnapshotWriter::new(file, direct_io);
                let r = write_file(
                    file,
                    &tmp,
                    &final_path,
                    &dir,
                    writer,
                    spare_tx,
                    &abandoned_w,
                );
                if r.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                let _ = rtx.send(r);
            })?;
        let mut job = Self::begin(ks, path, kind, dirty, meta, vec![tx], result, None);
        job.subscriber_inflight.push(inflight);
        job.spare = Some(spare_rx);
        job.abandoned = Some(abandoned);
        Ok(job)
    }

    /// Begins a snapshot with no file: only `subscribe`rs receive it (a
    /// diskless replica sync). Its result is the bytes produced.
    pub fn start_streaming(ks: &mut Keyspace, dirty: u64, meta: SnapshotMeta) -> SnapshotJob {
        let (rtx, result) = sync_channel(1);
        let mut job = Self::begin(
            ks,
            Path::new(""),
            SaveKind::Background,
            dirty,
            meta,
            Vec::new(),
            result,
            Some(rtx),
        );
        job.streaming = true;
        job
    }

    #[allow(clippy::too_many_arguments)]
    fn begin(
        ks: &mut Keyspace,
        path: &Path,
        kind: SaveKind,
        dirty: u64,
        meta: SnapshotMeta,
        consumers: Vec<SyncSender<Msg>>,
        result: Receiver<Result<u64, String>>,
        result_tx: Option<SyncSender<Result<u64, String>>>,
    ) -> SnapshotJob {
        let mut dbs = Vec::new();
        let mut keys_total = 0;
        for (i, db) in ks.dbs.iter_mut().enumerate() {
            if db.is_empty() {
                continue;
            }
            let (nseg, len, expires) = db.begin_snapshot();
            keys_total += len as u64;
            dbs.push((i, nseg, len, expires));
        }
        // A data set holding hash field TTLs is a version 12 file (Redis
        // 7.4's): Redis 7.0 refuses it at the header.
        let field_ttls = ks.dbs.iter().any(|d| d.holds_field_ttls());
        let mut encoder = RdbEncoder::new(EncoderOptions {
            compression: meta.compression,
            checksum: meta.checksum,
            limits: meta.limits.clone(),
            version: if field_ttls {
                FIELD_TTLS_RDB_VERSION
            } else {
                ferrokv_rdb::consts::RDB_VERSION
            },
        });
        encoder.checksum_by_chunk();
        let mut chunk = Vec::with_capacity(CHUNK + 64 * 1024);
        let aux: Vec<(&[u8], &[u8])> = meta.aux.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        encoder.header(&mut chunk, &aux);
        for code in &meta.functions {
            encoder.function_library(&mut chunk, code);
        }
        SnapshotJob {
            kind,
            encoder: Some(encoder),
            dbs,
            cur: 0,
            seg: 0,
            seg_pos: 0,
            db_started: false,
            chunk,
            consumers,
            subscriber_inflight: Vec::new(),
            chunks_sent: 0,
            bytes_sent: 0,
            result,
            result_tx,
            streaming: false,
            started: Instant::now(),
            dirty_at_start: dirty,
            used_memory_at_start: crate::alloc::used_memory(),
            keys_done: 0,
            keys_total,
            key_delay_us: meta.key_delay_us,
            finished_producing: false,
            eager: false,
            spare: None,
            abandoned: None,
            next_step_at: Instant::now(),
            path: path.to_path_buf(),
            peak_cow_entries: 0,
            for_aof: false,
        }
    }

    /// SWAPDB during a save: the snapshot follows the data it began with.
    pub fn swapdb(&mut self, a: usize, b: usize) {
        for d in &mut self.dbs {
            if d.0 == a {
                d.0 = b;
            } else if d.0 == b {
                d.0 = a;
            }
        }
    }

    /// How many keys the pacing allows by now.
    fn allowed_keys(&self) -> u64 {
        match (self.started.elapsed().as_micros() as u64).checked_div(self.key_delay_us) {
            Some(n) => n.max(1),
            None => u64::MAX,
        }
    }

    /// Produces up to about `max_keys` keys of the snapshot. Returns true
    /// once everything has been handed to the writer.
    pub fn step(&mut self, ks: &mut Keyspace, max_keys: u64) -> bool {
        self.step_sharing(ks, max_keys, None)
    }

    /// [`SnapshotJob::step`] for the event loop. `busy_share`: the loop is
    /// serving clients, and a background save may take at most this
    /// percentage of its time (`bgsave-loop-share`) — after a step of d,
    /// the next waits d × (100 − share) / share. `None`: an idle loop
    /// gives the save all its time.
    pub fn step_sharing(
        &mut self,
        ks: &mut Keyspace,
        max_keys: u64,
        busy_share: Option<u32>,
    ) -> bool {
        if self.finished_producing {
            self.eager = false;
            return true;
        }
        // A foreground save (SAVE, SHUTDOWN) may block on its writer; a
        // background one waits for the slowest consumer (the file writer
        // on a slow disk, a replica socket) rather than block the loop.
        let background = self.kind != SaveKind::Foreground;
        if background && self.subscriber_behind() {
            self.eager = false;
            return false;
        }
        if background && busy_share.is_some() && Instant::now() < self.next_step_at {
            // Held back: the loop sleeps until a client's event or its
            // usual 1 ms tick while a save runs (spinning would take the
            // CPU from the clients it is yielding to).
            self.eager = false;
            return false;
        }
        self.eager = false;
        let step_started = Instant::now();
        // And it produces at most STEP_BYTES per loop turn, so that one turn
        // of large values (LZF, CRC, copies) does not stall the clients;
        // `eager` asks the loop to come back at once.
        let budget_end = if background {
            self.bytes_sent + self.chunk.len() as u64 + STEP_BYTES
        } else {
            u64::MAX
        };
        let limit = self
            .allowed_keys()
            .min(self.keys_done.saturating_add(max_keys));
        let cow: usize = ks.dbs.iter().map(|d| d.snapshot_copied_entries()).sum();
        self.peak_cow_entries = self.peak_cow_entries.max(cow);
        while self.keys_done < limit {
            let Some(&(idx, nseg, len, expires)) = self.dbs.get(self.cur) else {
                let enc = self.encoder.take().expect("encoder present until finished");
                enc.finish(&mut self.chunk);
                self.flush();
                for tx in self.consumers.drain(..) {
                    let _ = tx.send(Msg::End);
                }
                if let Some(tx) = self.result_tx.take() {
                    let _ = tx.send(Ok(self.bytes_sent));
                }
                self.finished_producing = true;
                return true;
            };
            let enc = self.encoder.as_mut().expect("encoder present");
            if !self.db_started {
                enc.select_db(&mut self.chunk, idx as u64);
                enc.resize_db(&mut self.chunk, len as u64, expires as u64);
                self.db_started = true;
            }
            if self.seg >= nseg {
                ks.dbs[idx].end_snapshot();
                self.cur += 1;
                self.seg = 0;
                self.db_started = false;
                continue;
            }
            let chunk = &mut self.chunk;
            let mut n = 0u64;
            // Large strings go to the consumers by reference, after the
            // chunk bytes before them: (offset in the chunk, value).
            let mut external: Vec<(usize, ferrokv_store::db::SharedStr)> = Vec::new();
            // A segment is taken in parts of PART_ENTRIES, so that a step
            // can end inside one (a segment of 1 KiB values is ~3.5 MB).
            let next =
                ks.dbs[idx].snapshot_segment_part(self.seg, self.seg_pos, PART_ENTRIES, |e| {
                    let expire = (e.expire_at != NO_EXPIRE).then_some(e.expire_at);
                    match e.value() {
                        ValueRef::Str(s) | ValueRef::Raw(s) => {
                            let shared = (s.len() >= ferrokv_rdb::encoder::EXTERNAL_MIN_LEN)
                                .then(|| e.shared_str())
                                .flatten();
                            match shared {
                                Some(v) if enc.string_entry_external(chunk, e.key(), s, expire) => {
                                    external.push((chunk.len(), v))
                                }
                                _ => enc.string_entry(chunk, e.key(), s, expire),
                            }
                        }
                        ValueRef::Int(i) => {
                            let mut b = ferrokv_store::value::itoa_buf::Buf::new();
                            enc.string_entry(chunk, e.key(), b.format(i), expire)
                        }
                        ValueRef::List(l) => enc.list_entry(chunk, e.key(), l.iter(), expire),
                        ValueRef::Hash(h) => encode_hash(enc, chunk, e.key(), h, expire),
                        ValueRef::Set(s) => {
                            enc.set_entry(chunk, e.key(), s.iter().map(|m| m.text()), expire)
                        }
                        ValueRef::ZSet(z) => enc.zset_entry(chunk, e.key(), z.iter(), expire),
                        ValueRef::Stream(st) => enc.stream_entry(
                            chunk,
                            e.key(),
                            &crate::persistence::stream_rdb::to_payload(st),
                            expire,
                        ),
                    }
                    n += 1;
                    // A part ends early at its share of the consumers'
                    // queues (each value by reference is a message of its
                    // own: a background step must never fill a queue) or
                    // at a chunk's worth of output.
                    external.len() < EXTERNAL_PER_PART && chunk.len() < CHUNK
                });
            self.keys_done += n;
            self.send_external(external);
            match next {
                Some(pos) => self.seg_pos = pos,
                None => {
                    self.seg += 1;
                    self.seg_pos = 0;
                }
            }
            if self.chunk.len() >= CHUNK {
                self.flush();
            }
            if self.bytes_sent + self.chunk.len() as u64 >= budget_end {
                self.eager = true;
                break;
            }
        }
        // The duty cycle (see `step_sharing`).
        if let (true, Some(share)) = (background, busy_share) {
            let share = share.clamp(1, 100);
            let d = step_started.elapsed();
            self.next_step_at = Instant::now() + d * (100 - share) / share;
        }
        false
    }

    /// Whether work is ready (the last step stopped at its byte budget and
    /// the duty cycle does not hold the next one back): the loop should not
    /// sleep before the next turn.
    pub fn eager(&self) -> bool {
        self.eager
    }

    /// Whether a live subscriber has half its queue waiting.
    fn subscriber_behind(&mut self) -> bool {
        use std::sync::atomic::Ordering;
        // A subscription dropped by its consumer no longer counts.
        self.subscriber_inflight
            .retain(|c| std::sync::Arc::strong_count(c) > 1);
        self.subscriber_inflight
            .iter()
            .any(|c| c.load(Ordering::Relaxed) >= QUEUE / 2)
    }

    /// Sends the chunk's bytes with the large values that go by reference
    /// in their places: `external` holds (offset in the chunk, value),
    /// offsets ascending. No copy of such a value is made: the file writer
    /// writes it, a replica socket sends it, from the keyspace's own
    /// allocation (kept alive by the reference if the key changes).
    fn send_external(&mut self, external: Vec<(usize, ferrokv_store::db::SharedStr)>) {
        let mut sent = 0;
        for (off, value) in external {
            let rest = self.chunk.split_off(off - sent);
            self.flush();
            self.chunk.extend_from_slice(&rest);
            sent = off;
            let data = bytes::Bytes::from_owner(value);
            if let Some(enc) = self.encoder.as_mut() {
                enc.seal(&data);
            }
            self.send(data);
        }
    }

    fn flush(&mut self) {
        if self.chunk.is_empty() {
            return;
        }
        if let Some(enc) = self.encoder.as_mut() {
            // The trailer's CRC is taken chunk by chunk (the last one, by
            // `finish`).
            enc.seal(&self.chunk);
        }
        let next = self
            .spare
            .as_ref()
            .and_then(|r| r.try_recv().ok())
            .unwrap_or_else(|| Vec::with_capacity(CHUNK + 64 * 1024));
        let data = bytes::Bytes::from(std::mem::replace(&mut self.chunk, next));
        self.send(data);
    }

    fn send(&mut self, data: bytes::Bytes) {
        self.chunks_sent += 1;
        self.bytes_sent += data.len() as u64;
        // A consumer that went away (a failed writer, a dropped replica)
        // is dropped; the file writer's own result says why it stopped.
        self.consumers
            .retain(|tx| tx.send(Msg::Data(data.clone())).is_ok());
        for c in &self.subscriber_inflight {
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Adds a consumer of the stream, e.g. a replica socket for a diskless
    /// full sync. Only before the first chunk has gone out, so that every
    /// consumer gets the whole file; `None` after that.
    pub fn subscribe(&mut self) -> Option<Subscription> {
        if self.chunks_sent > 0 || self.finished_producing {
            return None;
        }
        let (tx, rx) = sync_channel(QUEUE);
        self.consumers.push(tx);
        let inflight = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        self.subscriber_inflight.push(inflight.clone());
        Some(Subscription { rx, inflight })
    }

    /// Polls (or, with `wait`, waits for) the writer's result.
    pub fn poll(&mut self, wait: bool) -> JobStatus {
        if !self.finished_producing {
            // A writer that failed early ends the job at once.
            return match self.result.try_recv() {
                Ok(r) => JobStatus::Done(r.and(Err("snapshot writer stopped early".into()))),
                Err(_) => JobStatus::Running,
            };
        }
        if wait {
            return JobStatus::Done(
                self.result
                    .recv()
                    .unwrap_or_else(|_| Err("snapshot writer vanished".into())),
            );
        }
        match self.result.try_recv() {
            Ok(r) => JobStatus::Done(r),
            Err(TryRecvError::Empty) => JobStatus::Running,
            Err(TryRecvError::Disconnected) => {
                JobStatus::Done(Err("snapshot writer vanished".into()))
            }
        }
    }

    /// Stops producing and releases the keyspace's copy-on-write state.
    /// A file writer that has not renamed its file yet never will: a save
    /// made after this (SHUTDOWN's, DEBUG RELOAD's) is not replaced by
    /// this older snapshot when a slow writer finishes later.
    pub fn abandon(mut self, ks: &mut Keyspace) {
        if let Some(a) = &self.abandoned {
            *a.lock().unwrap_or_else(|e| e.into_inner()) = true;
        }
        for &(idx, ..) in &self.dbs[self.cur.min(self.dbs.len())..] {
            ks.dbs[idx].end_snapshot();
        }
        self.consumers.clear();
    }
}

/// Background I/O yields the CPU to the event loop: on a machine with few
/// cores the writer's page-cache copies otherwise preempt the loop and show
/// as client latency during a save (Redis's forked saver competes the same
/// way). `nice` 10 for this thread only; best effort.
fn lower_priority() {
    // SAFETY: plain syscalls on the calling thread's own id.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// The writer thread: chunks to the temp file (writeback started every
/// 8 MiB, see `writeback.rs`), then fsync, rename, and fsync of the
/// directory so the rename itself is durable. Any failure leaves the
/// previous file in place, and so does a job abandoned before the rename:
/// the flag is read and the rename made under one lock, so either the
/// rename happened before `abandon` returned (and any later save replaces
/// it) or it never happens.
fn write_file(
    mut file: super::direct::SnapshotWriter,
    tmp: &Path,
    dest: &Path,
    dir: &Path,
    rx: Subscription,
    spare: std::sync::mpsc::Sender<Vec<u8>>,
    abandoned: &Mutex<bool>,
) -> Result<u64, String> {
    let ctx = |what: &str, e: std::io::Error| format!("{what} {}: {e}", tmp.display());
    loop {
        match rx.recv() {
            Ok(Msg::Data(d)) => {
                file.write_all(&d)
                    .map_err(|e| ctx("Write error saving DB on disk", e))?;
                // The buffer goes back to the producer (when no one else
                // holds it): fresh megabytes each chunk cost page faults.
                if let Ok(m) = d.try_into_mut() {
                    let mut v = Vec::from(m);
                    v.clear();
                    let _ = spare.send(v);
                }
            }
            Ok(Msg::End) => break,
            Err(_) => return Err("snapshot abandoned".into()),
        }
    }
    let written = file.finish().map_err(|e| ctx("Failed to fsync", e))?;
    let abandoned = abandoned.lock().unwrap_or_else(|e| e.into_inner());
    if *abandoned {
        return Err("snapshot abandoned".into());
    }
    std::fs::rename(tmp, dest).map_err(|e| {
        format!(
            "Error moving temp DB file {} on the final destination {}: {e}",
            tmp.display(),
            dest.display()
        )
    })?;
    drop(abandoned);
    if let Ok(d) = File::open(dir) {
        d.sync_all()
            .map_err(|e| format!("Failed to fsync directory {}: {e}", dir.display()))?;
    }
    Ok(written)
}

/// The RDB version of a file holding hash field TTLs (Redis 7.4's).
pub const FIELD_TTLS_RDB_VERSION: u32 = 12;

/// A hash's record: Redis 7.0's types without field TTLs, 7.4's with
/// (`RdbEncoder::hash_ttl_entry`).
pub fn encode_hash(
    enc: &mut RdbEncoder,
    out: &mut Vec<u8>,
    key: &[u8],
    h: &ferrokv_store::hash::Hash,
    expire: Option<i64>,
) {
    match h.ttls() {
        Some(t) if !t.is_empty() => {
            let fields: Vec<(&[u8], &[u8], Option<i64>)> =
                h.iter().map(|(f, v)| (f, v, t.get(f))).collect();
            enc.hash_ttl_entry(out, key, &fields, expire)
        }
        _ => enc.hash_entry(out, key, h.iter(), expire),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferrokv_store::NO_EXPIRE;

    /// A subscriber's whole stream, on a thread: (bytes, whether `End`
    /// came, the size of each message).
    fn read_all(sub: Subscription) -> std::thread::JoinHandle<(Vec<u8>, bool, Vec<usize>)> {
        std::thread::spawn(move || {
            let (mut got, mut sizes) = (Vec::new(), Vec::new());
            while let Ok(m) = sub.recv() {
                match m {
                    SnapshotChunk::Data(d) => {
                        sizes.push(d.len());
                        got.extend_from_slice(&d);
                    }
                    SnapshotChunk::End => return (got, true, sizes),
                }
            }
            (got, false, sizes)
        })
    }

    /// `len` bytes LZF cannot shrink (xorshift64 from `seed`).
    pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    pub(crate) fn meta() -> SnapshotMeta<'static> {
        SnapshotMeta {
            aux: vec![(&b"redis-ver"[..], b"7.0.15".to_vec())],
            compression: true,
            checksum: true,
            limits: Default::default(),
            key_delay_us: 0,
            direct_io: true,
            functions: Vec::new(),
        }
    }

    /// A writer whose job was abandoned after its last chunk (SHUTDOWN or
    /// DEBUG RELOAD abandon a running BGSAVE, then save themselves) must not
    /// rename its older snapshot over the file saved after it.
    #[test]
    fn an_abandoned_writer_never_renames_its_file_into_place() {
        for abandoned in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (tmp, dest) = (dir.path().join("temp.rdb"), dir.path().join("dump.rdb"));
            std::fs::write(&dest, b"the newer save").unwrap();
            let (tx, rx) = sync_channel(4);
            tx.send(Msg::Data(bytes::Bytes::from_static(b"the older snapshot")))
                .unwrap();
            tx.send(Msg::End).unwrap();
            let sub = Subscription {
                rx,
                inflight: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            };
            let file =
                super::super::direct::SnapshotWriter::new(File::create(&tmp).unwrap(), false);
            let (spare, _spare_rx) = std::sync::mpsc::channel();
            let r = write_file(
                file,
                &tmp,
                &dest,
                dir.path(),
                sub,
                spare,
                &Mutex::new(abandoned),
            );
            let now = std::fs::read(&dest).unwrap();
            if abandoned {
                assert_eq!(r, Err("snapshot abandoned".to_string()));
                assert_eq!(now, b"the newer save");
            } else {
                assert!(r.is_ok(), "{r:?}");
                assert_eq!(now, b"the older snapshot");
            }
        }
    }

    #[test]
    fn every_consumer_gets_the_same_bytes_as_the_file() {
        let mut ks = Keyspace::new(16);
        for i in 0..50_000 {
            ks.dbs[i % 3].set_str(
                format!("k{i}").as_bytes(),
                format!("value {i} {}", "x".repeat(i % 90)).as_bytes(),
                NO_EXPIRE,
                0,
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.rdb");
        let mut job = SnapshotJob::start(&mut ks, &path, SaveKind::Background, 0, meta()).unwrap();
        let reader = read_all(job.subscribe().expect("before the first chunk"));
        while !job.step(&mut ks, 1000) {
            assert!(job.subscribe().is_none() || job.chunks_sent == 0);
        }
        assert!(job.subscribe().is_none(), "too late to join");
        let JobStatus::Done(r) = job.poll(true) else {
            unreachable!()
        };
        r.unwrap();
        let (got, ended, _) = reader.join().unwrap();
        assert!(ended);
        assert_eq!(got, std::fs::read(&path).unwrap());
        let mut keys = 0;
        struct Count<'a>(&'a mut u64);
        impl ferrokv_rdb::RdbVisitor for Count<'_> {
            fn entry(&mut self, _e: ferrokv_rdb::Entry<'_>) -> Result<(), ferrokv_rdb::VisitError> {
                *self.0 += 1;
                Ok(())
            }
        }
        ferrokv_rdb::decode(&got, &mut Count(&mut keys)).unwrap();
        assert_eq!(keys, 50_000);
    }

    #[test]
    fn a_background_step_stops_at_its_byte_budget_and_a_foreground_save_does_not() {
        let mut ks = Keyspace::new(16);
        // 20,000 values of 2 KiB that LZF cannot shrink: 40 MiB of
        // snapshot in several segments (the budget is checked between
        // segments, each at most SEGMENT_MAX entries).
        for i in 0..20_000u64 {
            let v = noise(0x2545_f491_4f6c_dd1d + i, 2048);
            ks.dbs[0].set_str(format!("big{i}").as_bytes(), &v, NO_EXPIRE, 0);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.rdb");
        let mut job = SnapshotJob::start(&mut ks, &path, SaveKind::Background, 0, meta()).unwrap();
        let mut steps = 0;
        while !job.step(&mut ks, u64::MAX) {
            steps += 1;
            // Each step: at most the budget plus one segment's entries
            // (3584 x 2 KiB).
            assert!(job.bytes_sent + job.chunk.len() as u64 <= steps * (STEP_BYTES + (8 << 20)));
        }
        assert!(steps >= 40 / 12, "{steps} steps for 40 MiB");
        let JobStatus::Done(r) = job.poll(true) else {
            unreachable!()
        };
        assert!(r.unwrap() > 40_000_000);
        // A foreground save is one call.
        let path2 = dir.path().join("fg.rdb");
        let mut fg = SnapshotJob::start(&mut ks, &path2, SaveKind::Foreground, 0, meta()).unwrap();
        assert!(fg.step(&mut ks, u64::MAX));
        let JobStatus::Done(r) = fg.poll(true) else {
            unreachable!()
        };
        r.unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(&path2).unwrap()
        );
    }

    #[test]
    fn large_values_go_by_reference_and_keep_the_point_in_time() {
        let mut ks = Keyspace::new(16);
        let big = ferrokv_rdb::encoder::EXTERNAL_MIN_LEN + 777;
        let mut want = std::collections::HashMap::new();
        for i in 0..200u64 {
            let key = format!("k{i}").into_bytes();
            // Every fourth value is large (by reference), the rest inline.
            let v = noise(i + 1, if i % 4 == 0 { big } else { 100 });
            ks.dbs[0].set_str(&key, &v, NO_EXPIRE, 0);
            want.insert(key, v);
        }
        // A large compressible value stays inline (LZF).
        ks.dbs[0].set_str(b"text", &b"abcdefgh".repeat(big / 8), NO_EXPIRE, 0);
        want.insert(b"text".to_vec(), b"abcdefgh".repeat(big / 8));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.rdb");
        let mut job = SnapshotJob::start(&mut ks, &path, SaveKind::Background, 0, meta()).unwrap();
        let reader = read_all(job.subscribe().expect("before the first chunk"));
        let mut steps = 0u64;
        while !job.step(&mut ks, 3) {
            // Writes between steps, to every key: the file keeps the
            // values of the moment the save began.
            for i in 0..200u64 {
                let key = format!("k{i}");
                ks.dbs[0].set_str(key.as_bytes(), &noise(1000 + steps, 300_000), NO_EXPIRE, 0);
            }
            steps += 1;
        }
        let JobStatus::Done(r) = job.poll(true) else {
            unreachable!()
        };
        r.unwrap();
        let file = std::fs::read(&path).unwrap();
        let (got, ended, sizes) = reader.join().unwrap();
        assert!(ended);
        assert_eq!(got, file);
        // The 50 large random values went by reference: each arrived as a
        // message of its own, exactly its length.
        assert_eq!(sizes.iter().filter(|&&n| n == big).count(), 50);
        struct Collect(std::collections::HashMap<Vec<u8>, Vec<u8>>);
        impl ferrokv_rdb::RdbVisitor for Collect {
            fn entry(&mut self, e: ferrokv_rdb::Entry<'_>) -> Result<(), ferrokv_rdb::VisitError> {
                let ferrokv_rdb::RdbValue::String(v) = e.value else {
                    panic!("a string")
                };
                self.0.insert(e.key.to_vec(), v.to_vec());
                Ok(())
            }
        }
        let mut got = Collect(Default::default());
        ferrokv_rdb::decode(&file, &mut got).unwrap();
        assert_eq!(got.0.len(), want.len());
        for (k, v) in &want {
            assert!(got.0.get(k) == Some(v), "{}", String::from_utf8_lossy(k));
        }
        assert!(steps >= 5, "{steps} steps");
    }
}
