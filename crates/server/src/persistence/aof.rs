//! The append-only file, in Redis 7's multi-part layout: in `appenddirname`,
//! a manifest names one base file (an RDB snapshot, as with
//! `aof-use-rdb-preamble yes`) and the incremental files of commands written
//! since; the real `redis-check-aof` reads the same layout.
//!
//! Every turn of the loop, the commands the propagation stream produced are
//! written to the current incremental file *before* any reply is sent; with
//! `appendfsync always` they are also synced first (one `fsync` for all the
//! clients of the turn: group commit). With `everysec` a helper thread syncs
//! once a second; with `no` the kernel decides.
//!
//! A rewrite opens a new incremental file, snapshots the data (the
//! fork-free snapshot of `persistence::snapshot`) into a new base, and only
//! then installs the new manifest: at every moment the manifest on disk
//! names files that together hold every acknowledged write.
//!
//! Each incremental file has a checksum companion (`aofsum.rs`): the
//! CRC64 of each block of it, appended after the block's bytes — with
//! `always` at every flush and synced in the same group commit (on a
//! helper thread, beside the log's own fsync), with `everysec`/`no` at
//! 64 KiB or at the cron tick. The manifest names it with a key Redis's
//! parser skips, so the directory stays one Redis reads.
//!
//! All file I/O goes through [`Storage`], so tests can inject failing writes,
//! silent damage, or a power cut that loses whatever was not synced.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far the log reaches (`WAITAOF`, Redis 7.2): the server's count of
/// commands fed to the AOF and its replication offset at a flush. The log
/// keeps the mark of what it wrote and of what an fsync made durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsyncMark {
    pub seq: u64,
    pub reploff: i64,
}

/// `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    Always,
    EverySec,
    No,
}

impl FsyncPolicy {
    pub fn parse(s: &str) -> Option<FsyncPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::EverySec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

/// Syncs a file's data to stable storage; may be called from another thread
/// while the file is being appended to.
pub trait SyncHandle: Send + Sync {
    fn sync(&self) -> io::Result<()>;
}

/// A file opened for appending.
pub trait StorageFile: Send {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
    fn sync_handle(&self) -> io::Result<Arc<dyn SyncHandle>>;
}

/// The file operations the AOF needs.
pub trait Storage: Send + Sync {
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens an existing file for appending.
    fn append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The file's size (without reading it).
    fn len(&self, path: &Path) -> io::Result<u64>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes a rename in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
pub struct OsStorage;

struct OsFile(std::fs::File);
struct OsSync(std::fs::File);

impl SyncHandle for OsSync {
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl StorageFile for OsFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_handle(&self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(OsSync(self.0.try_clone()?)))
    }
}

impl Storage for OsStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(OsFile(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(path)?,
        )))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(OsFile(
            std::fs::OpenOptions::new().append(true).open(path)?,
        )))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(len)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofFile {
    pub name: String,
    pub seq: u64,
    /// `b` base, `i` incremental.
    pub kind: char,
    /// The checksum companion of an incremental file (`ferrokv-sum`,
    /// `aofsum.rs`), if it has one.
    pub sum: Option<String>,
}

/// The manifest: which files, in which order, make up the AOF.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    pub incrs: Vec<AofFile>,
}

impl Manifest {
    /// Reads a manifest with Redis 7.0's rules (`aofLoadManifestFromFile`),
    /// refusing in its words what it refuses: a blank line, a line without
    /// file, seq (non-zero) and type, a second base, incremental files
    /// whose sequence numbers do not increase, an unknown type, a path for
    /// a name, an empty manifest. Comment lines start with `#`.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        let mut max_incr = 0u64;
        let mut lines = 0;
        for (n, raw) in text.lines().enumerate() {
            lines += 1;
            if raw.starts_with('#') {
                continue;
            }
            let line = raw.trim_matches(|c| matches!(c, ' ' | '\t' | '\r'));
            let bad = |why: &str| format!("{why} (manifest line {}: '{line}')", n + 1);
            if line.is_empty() {
                return Err(bad("Invalid AOF manifest file format"));
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut f = AofFile {
                name: String::new(),
                seq: 0,
                kind: ' ',
                sum: None,
            };
            // At least file, seq and type; more pairs are allowed
            // (forward compatibility, as Redis).
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return Err(bad("Invalid AOF manifest file format"));
            }
            for kv in words.chunks(2) {
                let (k, v) = (kv[0].to_ascii_lowercase(), kv[1]);
                match k.as_str() {
                    "file" => {
                        if v.contains('/') {
                            return Err(bad("File can't be a path, just a filename"));
                        }
                        f.name = v.to_string()
                    }
                    // Redis reads it with atoll: not a number is 0, refused below.
                    "seq" => f.seq = v.parse().unwrap_or(0),
                    "type" => f.kind = v.chars().next().unwrap_or(' '),
                    k if k == super::aofsum::MANIFEST_KEY => {
                        if v.contains('/') {
                            return Err(bad("invalid checksum file name"));
                        }
                        f.sum = Some(v.to_string())
                    }
                    // Keys this version does not know are skipped, as
                    // Redis's parser does (forward compatibility).
                    _ => {}
                }
            }
            if f.name.is_empty() || f.seq == 0 || f.kind == ' ' {
                return Err(bad("Invalid AOF manifest file format"));
            }
            match f.kind {
                'b' => {
                    if m.base.is_some() {
                        return Err(bad("Found duplicate base file information"));
                    }
                    m.base = Some(f)
                }
                'i' => {
                    if f.seq <= max_incr {
                        return Err(bad("Found a non-monotonic sequence number"));
                    }
                    max_incr = f.seq;
                    m.incrs.push(f)
                }
                // History files are deleted after a rewrite; nothing to load.
                'h' => {}
                _ => return Err(bad("Unknown AOF file type")),
            }
        }
        if lines == 0 {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        for f in self.base.iter().chain(self.incrs.iter()) {
            s.push_str(&format!("file {} seq {} type {}", f.name, f.seq, f.kind));
            if let Some(sum) = &f.sum {
                s.push_str(&format!(" {} {sum}", super::aofsum::MANIFEST_KEY));
            }
            s.push('\n');
        }
        s
    }

    fn next_incr_seq(&self) -> u64 {
        self.incrs.iter().map(|f| f.seq).max().unwrap_or(0) + 1
    }

    fn next_base_seq(&self) -> u64 {
        self.base.as_ref().map_or(0, |b| b.seq) + 1
    }
}

/// Once a second, syncs the current file (and its checksum companion) if
/// they were written to.
struct EverySecSyncer {
    stop: Arc<AtomicBool>,
    dirty: Arc<AtomicBool>,
    /// What was written (set at each flush) and what the last fsync
    /// covered (the written mark read before it began).
    marks: Arc<std::sync::Mutex<(FsyncMark, FsyncMark)>>,
    current: Arc<std::sync::Mutex<Vec<Arc<dyn SyncHandle>>>>,
    error: Arc<std::sync::Mutex<Option<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EverySecSyncer {
    fn start(marks: (FsyncMark, FsyncMark)) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let dirty = Arc::new(AtomicBool::new(false));
        let marks = Arc::new(std::sync::Mutex::new(marks));
        let current: Arc<std::sync::Mutex<Vec<Arc<dyn SyncHandle>>>> =
            Arc::new(std::sync::Mutex::new(Vec::new()));
        let error = Arc::new(std::sync::Mutex::new(None));
        let (s, d, c, e) = (stop.clone(), dirty.clone(), current.clone(), error.clone());
        let m = marks.clone();
        let thread = std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    // Sync at most once a second (the check runs ten times
                    // a second so a write is never more than ~1 s old).
                    if !d.swap(false, Ordering::AcqRel) {
                        continue;
                    }
                    let handles = c.lock().map(|g| g.clone()).unwrap_or_default();
                    // Everything written before this point is covered.
                    let covers = m.lock().map(|g| g.0).unwrap_or_default();
                    let mut ok = true;
                    // The log first, then its checksums.
                    for h in handles {
                        if let Err(err) = h.sync() {
                            ok = false;
                            if let Ok(mut g) = e.lock() {
                                *g = Some(err.to_string());
                            }
                        }
                    }
                    if ok {
                        if let Ok(mut g) = m.lock() {
                            g.1 = covers;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(900));
                }
            })
            .expect("spawn aof-fsync thread");
        EverySecSyncer {
            stop,
            dirty,
            marks,
            current,
            error,
            thread: Some(thread),
        }
    }
}

impl Drop for EverySecSyncer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// With `appendfsync always`, syncs the checksum companion on a thread of
/// its own while the loop syncs the log: one group commit makes both
/// durable before the replies go out, in about the time of one `fsync`
/// (two in a row cost twice as much on the development VM's disk).
struct SideSyncer {
    requests: Option<std::sync::mpsc::Sender<Arc<dyn SyncHandle>>>,
    results: std::sync::mpsc::Receiver<io::Result<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SideSyncer {
    fn start() -> SideSyncer {
        let (req_tx, req_rx) = std::sync::mpsc::channel::<Arc<dyn SyncHandle>>();
        let (res_tx, res_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("aof-sum-fsync".into())
            .spawn(move || {
                while let Ok(h) = req_rx.recv() {
                    if res_tx.send(h.sync()).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn aof-sum-fsync thread");
        SideSyncer {
            requests: Some(req_tx),
            results: res_rx,
            thread: Some(thread),
        }
    }

    /// Syncs `side` on the helper thread while `main` runs here.
    fn sync_both(
        &self,
        side: Arc<dyn SyncHandle>,
        main: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|r| r.send(side.clone()).is_ok());
        let m = main();
        let s = if sent {
            self.results
                .recv()
                .unwrap_or_else(|_| Err(io::Error::other("the checksum sync thread is gone")))
        } else {
            side.sync()
        };
        m.and(s)
    }
}

impl Drop for SideSyncer {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The checksum companion of the incremental file being appended to.
struct SumWriter {
    file: Box<dyn StorageFile>,
    sync: Arc<dyn SyncHandle>,
    path: PathBuf,
    /// Its length, written successfully.
    len: u64,
    /// The block being filled (its bytes are in the log, its record not
    /// yet in the companion).
    block: super::aofsum::OpenBlock,
}

impl SumWriter {
    /// A new companion (header only, synced: a crash leaves either no
    /// companion named in the manifest or a readable one) for the
    /// incremental file `incr`, holding `records` (already written
    /// bytes of it) and then a block from `block`.
    fn create(
        storage: &dyn Storage,
        dir: &Path,
        incr: &str,
        records: &[super::aofsum::Record],
        block: super::aofsum::OpenBlock,
    ) -> Result<SumWriter, String> {
        let path = dir.join(super::aofsum::companion_name(incr));
        let mut bytes = super::aofsum::header(incr);
        for r in records {
            bytes.extend_from_slice(&r.encode());
        }
        let r = (|| -> io::Result<(Box<dyn StorageFile>, Arc<dyn SyncHandle>)> {
            let mut f = storage.create(&path)?;
            f.write_all(&bytes)?;
            f.sync()?;
            let h = f.sync_handle()?;
            Ok((f, h))
        })();
        let (file, sync) = r.map_err(|e| format!("Can't create {}: {e}", path.display()))?;
        Ok(SumWriter {
            file,
            sync,
            path,
            len: bytes.len() as u64,
            block,
        })
    }

    /// Appends the open block's record, if it holds anything; returns
    /// the bytes of the log it covers.
    fn close_block(&mut self) -> io::Result<u64> {
        if self.block.len == 0 {
            return Ok(0);
        }
        let rec = self.block.record().encode();
        self.file.write_all(&rec)?;
        self.len += rec.len() as u64;
        let covered = self.block.len;
        self.block = self.block.next();
        Ok(covered)
    }

    /// Cuts a failed append back and reopens the file.
    fn roll_back(&mut self, storage: &dyn Storage, len: u64, block: super::aofsum::OpenBlock) {
        self.block = block;
        self.len = len;
        if storage.truncate(&self.path, len).is_ok() {
            if let Ok(f) = storage.append(&self.path) {
                if let Ok(h) = f.sync_handle() {
                    self.sync = h;
                }
                self.file = f;
            }
        }
    }
}

/// A rewrite in progress: the new base's sequence number and the incr file
/// that started with it.
#[derive(Debug, Clone)]
pub struct RewriteInProgress {
    pub base: AofFile,
    pub first_incr_seq: u64,
}

pub struct Aof {
    storage: Arc<dyn Storage>,
    pub dir: PathBuf,
    basename: String,
    pub manifest: Manifest,
    file: Box<dyn StorageFile>,
    /// Path and length of the file being appended to (the length written
    /// successfully, to cut a torn write back to).
    file_path: PathBuf,
    file_len: u64,
    policy: FsyncPolicy,
    buf: Vec<u8>,
    /// Commands in `buf`.
    buf_cmds: u32,
    stream_db: Option<usize>,
    syncer: Option<EverySecSyncer>,
    /// Checksums of the current incremental file (`aof-checksums yes`).
    sum: Option<SumWriter>,
    side_syncer: Option<SideSyncer>,
    /// New incremental files get a checksum companion.
    checksums: bool,
    /// Blocks and bytes given a checksum record since start.
    pub sum_blocks_written: u64,
    pub sum_bytes_written: u64,
    /// Bytes in the incremental files since the last base.
    pub incr_size: u64,
    /// Size of the AOF after the last rewrite (for auto-rewrite).
    pub base_size: u64,
    /// The last write or fsync error; writes are refused while it lasts.
    pub write_error: Option<String>,
    pub rewrite: Option<RewriteInProgress>,
    pub last_fsync: Instant,
    /// The mark the next flush writes up to ([`Aof::stage_mark`]), the mark
    /// of what is written, and (`always`, `sync_now`) of what is synced;
    /// with `everysec` the syncer thread keeps the synced one.
    staged: FsyncMark,
    written: FsyncMark,
    synced: FsyncMark,
}

impl std::fmt::Debug for Aof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aof")
            .field("dir", &self.dir)
            .field("manifest", &self.manifest)
            .finish()
    }
}

/// What the AOF holds on disk, to load at start-up.
pub struct LoadPlan {
    pub base: Option<PathBuf>,
    pub incrs: Vec<PathBuf>,
    /// Each incr file's checksum companion, as the manifest names it.
    pub sums: Vec<Option<PathBuf>>,
}

impl LoadPlan {
    pub fn of(dir: &Path, m: &Manifest) -> LoadPlan {
        LoadPlan {
            base: m.base.as_ref().map(|b| dir.join(&b.name)),
            incrs: m.incrs.iter().map(|f| dir.join(&f.name)).collect(),
            sums: m
                .incrs
                .iter()
                .map(|f| f.sum.as_ref().map(|s| dir.join(s)))
                .collect(),
        }
    }
}

impl Aof {
    /// Reads the manifest in `dir`, if any, and says what to load.
    pub fn plan(
        storage: &dyn Storage,
        dir: &Path,
        basename: &str,
    ) -> Result<Option<(Manifest, LoadPlan)>, String> {
        let Some(m) = read_manifest(storage, dir, basename)? else {
            return Ok(None);
        };
        let plan = LoadPlan::of(dir, &m);
        for p in plan.base.iter().chain(plan.incrs.iter()) {
            if !storage.exists(p) {
                return Err(format!(
                    "The AOF file {} named by the manifest is missing",
                    p.display()
                ));
            }
        }
        Ok(Some((m, plan)))
    }

    /// Opens the AOF for appending: the last incremental file of an
    /// existing manifest, or a new layout whose base is `empty_base` (an
    /// RDB of the current data set) when there is none. With `checksums`,
    /// new incremental files get a companion, and the last one of an
    /// existing manifest gets one (or the records its companion lacks:
    /// bytes a crash left unrecorded, once loaded) before appends begin.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        basename: &str,
        policy: FsyncPolicy,
        existing: Option<Manifest>,
        empty_base: &[u8],
    ) -> Result<Aof, String> {
        Self::open_with(storage, dir, basename, policy, existing, empty_base, true)
    }

    /// [`Aof::open`], choosing whether incremental files get checksums.
    pub fn open_with(
        storage: Arc<dyn Storage>,
        dir: &Path,
        basename: &str,
        policy: FsyncPolicy,
        existing: Option<Manifest>,
        empty_base: &[u8],
        checksums: bool,
    ) -> Result<Aof, String> {
        storage
            .create_dir_all(dir)
            .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
        let (mut manifest, file, incr_size, file_path, file_len, new_incr) = match existing {
            Some(m) if !m.incrs.is_empty() => {
                let last = m.incrs.last().unwrap();
                let path = dir.join(&last.name);
                let file = storage
                    .append(&path)
                    .map_err(|e| format!("Can't open {}: {e}", path.display()))?;
                let len = storage.len(&path).unwrap_or(0);
                let size = m
                    .incrs
                    .iter()
                    .map(|f| storage.len(&dir.join(&f.name)).unwrap_or(0))
                    .sum();
                (m, file, size, path, len, false)
            }
            existing => {
                let mut m = existing.unwrap_or_default();
                if m.base.is_none() {
                    let seq = m.next_base_seq();
                    let name = format!("{basename}.{seq}.base.rdb");
                    let path = dir.join(&name);
                    let mut f = storage
                        .create(&path)
                        .map_err(|e| format!("Can't create {}: {e}", path.display()))?;
                    f.write_all(empty_base)
                        .and_then(|_| f.sync())
                        .map_err(|e| format!("Can't write {}: {e}", path.display()))?;
                    m.base = Some(AofFile {
                        name,
                        seq,
                        kind: 'b',
                        sum: None,
                    });
                }
                let seq = m.next_incr_seq();
                let name = format!("{basename}.{seq}.incr.aof");
                let path = dir.join(&name);
                let file = storage
                    .create(&path)
                    .map_err(|e| format!("Can't create {}: {e}", path.display()))?;
                m.incrs.push(AofFile {
                    name,
                    seq,
                    kind: 'i',
                    sum: None,
                });
                (m, file, 0, path, 0, true)
            }
        };
        let sum = if !checksums {
            None
        } else {
            let last = manifest.incrs.last_mut().expect("an incr file");
            let w = if new_incr {
                SumWriter::create(
                    &*storage,
                    dir,
                    &last.name,
                    &[],
                    super::aofsum::OpenBlock::starting(0, 0),
                )?
            } else {
                Self::continue_companion(&*storage, dir, last)?
            };
            last.sum = Some(super::aofsum::companion_name(&last.name));
            Some(w)
        };
        let mut aof = Aof {
            storage,
            dir: dir.to_path_buf(),
            basename: basename.to_string(),
            manifest,
            file,
            file_path,
            file_len,
            policy,
            buf: Vec::new(),
            buf_cmds: 0,
            stream_db: None,
            syncer: None,
            sum,
            side_syncer: None,
            checksums,
            sum_blocks_written: 0,
            sum_bytes_written: 0,
            incr_size,
            base_size: incr_size,
            write_error: None,
            rewrite: None,
            last_fsync: Instant::now(),
            staged: FsyncMark::default(),
            written: FsyncMark::default(),
            synced: FsyncMark::default(),
        };
        aof.write_manifest()?;
        aof.set_policy(policy);
        Ok(aof)
    }

    /// The companion of the existing incremental file `f`, which appends
    /// go on to: its records are kept, and the bytes after them (none, a
    /// tail a crash left unrecorded, or the whole file when it had no
    /// companion) get records now. The loader has verified the file
    /// against the companion and cut both to agree (a torn block, a
    /// recovery), so the records are trusted here and the file is read
    /// only when it has bytes past them.
    fn continue_companion(
        storage: &dyn Storage,
        dir: &Path,
        f: &AofFile,
    ) -> Result<SumWriter, String> {
        let path = dir.join(&f.name);
        let len = storage
            .len(&path)
            .map_err(|e| format!("Can't read {}: {e}", path.display()))?;
        let mut records = Vec::new();
        if let Some(sum) = &f.sum {
            if let Ok(bytes) = storage.read(&dir.join(sum)) {
                if let Ok(c) = super::aofsum::parse(&bytes, &f.name) {
                    records = c.records;
                    let inside = records.iter().take_while(|r| r.end() <= len).count();
                    records.truncate(inside);
                }
            }
        }
        let (from, first_cmd) = records
            .last()
            .map_or((0, 0), |r| (r.end(), r.first_cmd + r.cmds as u64));
        let mut next = (from, first_cmd);
        if from < len {
            let data = storage
                .read(&path)
                .map_err(|e| format!("Can't read {}: {e}", path.display()))?;
            let tail = super::aofsum::records_for(&data[from as usize..], from, first_cmd);
            if let Some(r) = tail.last() {
                next = (r.end(), r.first_cmd + r.cmds as u64);
            }
            records.extend(tail);
            if next.0 < len {
                // Bytes that are no whole command (the loader cuts those
                // off, so this is only a safeguard): covered as they are,
                // so the blocks appended next start at the file's end.
                let mut b = super::aofsum::OpenBlock::starting(next.0, next.1);
                b.extend(&data[next.0 as usize..], 0);
                records.push(b.record());
                next.0 = len;
            }
        }
        SumWriter::create(
            storage,
            dir,
            &f.name,
            &records,
            super::aofsum::OpenBlock::starting(next.0, next.1),
        )
    }

    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// Whether incremental files created from now on (the next rewrite's)
    /// get a checksum companion (`CONFIG SET aof-checksums`).
    pub fn set_checksums(&mut self, on: bool) {
        self.checksums = on;
    }

    /// Whether the file being appended to has a checksum companion.
    pub fn checksummed(&self) -> bool {
        self.sum.is_some()
    }

    /// The handles the `everysec` thread syncs: the log, then its
    /// checksums.
    fn sync_handles(&self) -> Vec<Arc<dyn SyncHandle>> {
        let mut v = Vec::new();
        if let Ok(h) = self.file.sync_handle() {
            v.push(h);
        }
        if let Some(s) = &self.sum {
            v.push(s.sync.clone());
        }
        v
    }

    fn update_syncer_handles(&self) {
        if let Some(s) = &self.syncer {
            let handles = self.sync_handles();
            if let Ok(mut g) = s.current.lock() {
                *g = handles;
            }
        }
    }

    /// Changes `appendfsync` at run time.
    pub fn set_policy(&mut self, policy: FsyncPolicy) {
        self.policy = policy;
        if policy == FsyncPolicy::EverySec {
            if self.syncer.is_none() {
                self.syncer = Some(EverySecSyncer::start((self.written, self.synced)));
                self.update_syncer_handles();
            }
        } else if let Some(s) = self.syncer.take() {
            self.synced = s.marks.lock().map(|g| g.1).unwrap_or(self.synced);
        }
        if policy == FsyncPolicy::Always {
            if self.side_syncer.is_none() {
                self.side_syncer = Some(SideSyncer::start());
            }
        } else {
            self.side_syncer = None;
        }
    }

    fn write_manifest(&mut self) -> Result<(), String> {
        install_manifest(&*self.storage, &self.dir, &self.basename, &self.manifest)
    }

    /// Queues a command of the propagation stream.
    pub fn feed<T: AsRef<[u8]>>(&mut self, db: usize, argv: &[T]) {
        // A SELECT goes first when the database changes.
        self.buf_cmds += 1 + (self.stream_db != Some(db)) as u32;
        crate::propagate::encode_command(&mut self.buf, &mut self.stream_db, db, argv);
    }

    /// Bytes fed and not yet written.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// An `everysec` fsync is due and not done yet
    /// (`aof_pending_bio_fsync`).
    pub fn fsync_pending(&self) -> bool {
        self.syncer
            .as_ref()
            .is_some_and(|s| s.dirty.load(Ordering::Acquire))
    }

    /// Whether commands are waiting to be written.
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Writes the queued commands (and, with `always`, syncs them and
    /// their checksums). Called once per loop turn before replies go out.
    /// On failure the data stays queued, both files are cut back to what
    /// was written before, the error is kept (writes are refused
    /// meanwhile), and the next turn tries again.
    pub fn flush(&mut self) -> Result<(), String> {
        if self.buf.is_empty() {
            if let Some(s) = &self.syncer {
                if let Some(e) = s.error.lock().ok().and_then(|mut g| g.take()) {
                    self.write_error = Some(format!("fsync error: {e}"));
                    return Err(e);
                }
            }
            return Ok(());
        }
        let always = self.policy == FsyncPolicy::Always;
        let before = self.sum.as_ref().map(|s| (s.len, s.block));
        let r = (|| -> io::Result<u64> {
            self.file.write_all(&self.buf)?;
            let mut closed = 0;
            if let Some(s) = self.sum.as_mut() {
                s.block.extend(&self.buf, self.buf_cmds);
                if always || s.block.len >= super::aofsum::BLOCK_BYTES {
                    closed = s.close_block()?;
                }
            }
            if always {
                match (&self.sum, &self.side_syncer) {
                    (Some(s), Some(side)) if closed > 0 => {
                        let file = &mut self.file;
                        side.sync_both(s.sync.clone(), || file.sync())?
                    }
                    (Some(s), None) if closed > 0 => {
                        self.file.sync()?;
                        s.sync.sync()?
                    }
                    _ => self.file.sync()?,
                }
                self.last_fsync = Instant::now();
            }
            Ok(closed)
        })();
        match r {
            Ok(closed) => {
                if closed > 0 {
                    self.sum_blocks_written += 1;
                    self.sum_bytes_written += closed;
                }
                self.incr_size += self.buf.len() as u64;
                self.file_len += self.buf.len() as u64;
                self.buf.clear();
                self.buf_cmds = 0;
                self.written = self.staged;
                if always {
                    self.synced = self.written;
                }
                if let Some(s) = &self.syncer {
                    if let Ok(mut g) = s.marks.lock() {
                        g.0 = self.written;
                    }
                    s.dirty.store(true, Ordering::Release);
                }
                self.write_error = None;
                Ok(())
            }
            Err(e) => {
                // A partial write may have left half a command in the file:
                // cut both files back and reopen so the retry starts a fresh
                // append (the loader cuts a torn tail), and keep everything
                // queued.
                let msg = format!("Error writing to the AOF file: {e}");
                if let (Some(s), Some((len, block))) = (self.sum.as_mut(), before) {
                    s.roll_back(&*self.storage, len, block);
                }
                if self
                    .storage
                    .truncate(&self.file_path, self.file_len)
                    .is_ok()
                {
                    if let Ok(f) = self.storage.append(&self.file_path) {
                        self.file = f;
                    }
                }
                self.update_syncer_handles();
                self.write_error = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// Closes the open checksum block (the cron calls it with `everysec`
    /// and `no`, so a block's record follows its bytes within the same
    /// second; the `everysec` thread syncs both).
    pub fn close_block(&mut self) -> Result<(), String> {
        let Some(s) = self.sum.as_mut() else {
            return Ok(());
        };
        let before = (s.len, s.block);
        match s.close_block() {
            Ok(closed) => {
                if closed > 0 {
                    self.sum_blocks_written += 1;
                    self.sum_bytes_written += closed;
                    if let Some(sy) = &self.syncer {
                        sy.dirty.store(true, Ordering::Release);
                    }
                }
                Ok(())
            }
            Err(e) => {
                s.roll_back(&*self.storage, before.0, before.1);
                self.update_syncer_handles();
                let msg = format!("Error writing to the AOF checksum file: {e}");
                self.write_error = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// Syncs whatever was written (shutdown, `appendfsync` changes), with
    /// the open checksum block closed first.
    pub fn sync_now(&mut self) -> Result<(), String> {
        self.flush()?;
        self.close_block()?;
        self.file
            .sync()
            .map_err(|e| format!("fsync of the AOF failed: {e}"))?;
        if let Some(s) = &self.sum {
            s.sync
                .sync()
                .map_err(|e| format!("fsync of the AOF checksum file failed: {e}"))?;
        }
        self.synced = self.written;
        if let Some(s) = &self.syncer {
            if let Ok(mut g) = s.marks.lock() {
                g.1 = self.written;
            }
        }
        Ok(())
    }

    /// What the next flush writes up to: the server's count of commands
    /// fed to the log and its replication offset now (`WAITAOF`).
    pub fn stage_mark(&mut self, mark: FsyncMark) {
        self.staged = mark;
    }

    /// The mark of what an fsync made durable: the whole log with
    /// `always`, the last background fsync's with `everysec`, only what
    /// `sync_now` synced with `no` (as Redis, `appendfsync no` never
    /// advances it).
    pub fn synced_mark(&self) -> FsyncMark {
        match &self.syncer {
            Some(s) => s.marks.lock().map(|g| g.1).unwrap_or(self.synced),
            None => self.synced,
        }
    }

    /// Everything fed is written and synced, and nothing waits: the
    /// durable mark may move to the server's current one (an offset that
    /// grew by what never reaches the log, PINGs to replicas, is covered).
    pub fn all_synced(&self) -> bool {
        self.policy != FsyncPolicy::No
            && self.buf.is_empty()
            && self.write_error.is_none()
            && self.synced_mark().seq == self.written.seq
    }

    /// Starts a rewrite: switches appends to a new incremental file and
    /// returns the path the new base snapshot must be written to. The
    /// snapshot must begin in the same loop turn, before any other write.
    pub fn begin_rewrite(&mut self) -> Result<PathBuf, String> {
        if self.rewrite.is_some() {
            return Err("ERR Background append only file rewriting already in progress".into());
        }
        self.sync_now()?;
        let seq = self.manifest.next_incr_seq();
        let name = format!("{}.{seq}.incr.aof", self.basename);
        let path = self.dir.join(&name);
        let file = self
            .storage
            .create(&path)
            .map_err(|e| format!("Can't create {}: {e}", path.display()))?;
        let sum = if self.checksums {
            Some(SumWriter::create(
                &*self.storage,
                &self.dir,
                &name,
                &[],
                super::aofsum::OpenBlock::starting(0, 0),
            )?)
        } else {
            None
        };
        self.file = file;
        self.file_path = path.clone();
        self.file_len = 0;
        self.stream_db = None;
        self.sum = sum;
        self.update_syncer_handles();
        self.manifest.incrs.push(AofFile {
            sum: self
                .sum
                .is_some()
                .then(|| super::aofsum::companion_name(&name)),
            name,
            seq,
            kind: 'i',
        });
        // Until the new base exists, the manifest names the old base, the
        // old incrs and the new one: everything acknowledged is covered.
        self.write_manifest()?;
        let bseq = self.manifest.next_base_seq();
        let base = AofFile {
            name: format!("{}.{bseq}.base.rdb", self.basename),
            seq: bseq,
            kind: 'b',
            sum: None,
        };
        let path = self.dir.join(&base.name);
        self.rewrite = Some(RewriteInProgress {
            base,
            first_incr_seq: seq,
        });
        Ok(path)
    }

    /// Ends a rewrite: with a new base on disk, the manifest now names it
    /// and the incrs written since; the old files (and their checksum
    /// companions) are deleted.
    pub fn finish_rewrite(&mut self, ok: bool, base_size: u64) -> Result<(), String> {
        let Some(rw) = self.rewrite.take() else {
            return Ok(());
        };
        if !ok {
            let _ = self.storage.remove(&self.dir.join(&rw.base.name));
            return Ok(());
        }
        let old = self.manifest.clone();
        self.manifest.base = Some(rw.base);
        self.manifest.incrs.retain(|f| f.seq >= rw.first_incr_seq);
        self.write_manifest()?;
        for f in old.base.iter().chain(old.incrs.iter()) {
            if f.seq < rw.first_incr_seq
                || (f.kind == 'b' && Some(f) != self.manifest.base.as_ref())
            {
                let _ = self.storage.remove(&self.dir.join(&f.name));
                if let Some(sum) = &f.sum {
                    let _ = self.storage.remove(&self.dir.join(sum));
                }
            }
        }
        self.incr_size = self
            .manifest
            .incrs
            .iter()
            .map(|f| self.storage.len(&self.dir.join(&f.name)).unwrap_or(0))
            .sum();
        self.base_size = base_size + self.incr_size;
        Ok(())
    }
}

/// The manifest in `dir`, if there is one.
fn read_manifest(
    storage: &dyn Storage,
    dir: &Path,
    basename: &str,
) -> Result<Option<Manifest>, String> {
    let mpath = dir.join(format!("{basename}.manifest"));
    if !storage.exists(&mpath) {
        return Ok(None);
    }
    let text = storage
        .read(&mpath)
        .map_err(|e| format!("Can't read the AOF manifest {}: {e}", mpath.display()))?;
    Manifest::parse(&String::from_utf8_lossy(&text))
        .map(Some)
        .map_err(|e| format!("The AOF manifest {} is invalid: {e}", mpath.display()))
}

/// Writes `m` as the manifest of `dir`: a temp file, synced, renamed into
/// place, the directory synced.
fn install_manifest(
    storage: &dyn Storage,
    dir: &Path,
    basename: &str,
    m: &Manifest,
) -> Result<(), String> {
    let path = dir.join(format!("{basename}.manifest"));
    let tmp = dir.join(format!("temp-{basename}.manifest"));
    let r = (|| -> io::Result<()> {
        let mut f = storage.create(&tmp)?;
        f.write_all(m.render().as_bytes())?;
        f.sync()?;
        storage.rename(&tmp, &path)?;
        storage.sync_dir(dir)
    })();
    r.map_err(|e| format!("Can't write the AOF manifest {}: {e}", path.display()))
}

/// The rewrite counters of `INFO persistence` (`aof_rewrites`,
/// `aof_last_bgrewrite_status`, `aof_rewrites_consecutive_failures`),
/// kept by the server whether the AOF is on or off, as Redis's are.
#[derive(Debug, Clone)]
pub struct RewriteStats {
    /// Rewrites that succeeded since start.
    pub rewrites: u64,
    pub last_ok: bool,
    /// Rewrites that failed since the last one that did not.
    pub failures_in_a_row: u64,
}

impl Default for RewriteStats {
    fn default() -> Self {
        RewriteStats {
            rewrites: 0,
            last_ok: true,
            failures_in_a_row: 0,
        }
    }
}

impl RewriteStats {
    pub fn record(&mut self, ok: bool) {
        self.last_ok = ok;
        if ok {
            self.rewrites += 1;
            self.failures_in_a_row = 0;
        } else {
            self.failures_in_a_row += 1;
        }
    }
}

/// `BGREWRITEAOF` with `appendonly no`: as Redis 7.0, a new base is
/// written from a snapshot and the manifest then names it alone (the
/// files a later `appendonly yes` starts from); the files the old
/// manifest named are deleted once the new one is in place. Nothing is
/// appended meanwhile: there is no incremental file.
pub struct OffRewrite {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    basename: String,
    old: Option<Manifest>,
    base: AofFile,
}

impl OffRewrite {
    /// Plans the rewrite: the path the base snapshot must be written to.
    pub fn begin(
        storage: Arc<dyn Storage>,
        dir: &Path,
        basename: &str,
    ) -> Result<(OffRewrite, PathBuf), String> {
        storage
            .create_dir_all(dir)
            .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
        let old = read_manifest(&*storage, dir, basename)?;
        let seq = old.as_ref().map_or(1, |m| m.next_base_seq());
        let base = AofFile {
            name: format!("{basename}.{seq}.base.rdb"),
            seq,
            kind: 'b',
            sum: None,
        };
        let path = dir.join(&base.name);
        Ok((
            OffRewrite {
                storage,
                dir: dir.to_path_buf(),
                basename: basename.to_string(),
                old,
                base,
            },
            path,
        ))
    }

    /// Ends it: with the base on disk (`ok`), installs the manifest naming
    /// it alone and deletes the old files; else removes what was written.
    pub fn finish(self, ok: bool) -> Result<(), String> {
        let base_path = self.dir.join(&self.base.name);
        if !ok {
            let _ = self.storage.remove(&base_path);
            return Ok(());
        }
        let m = Manifest {
            base: Some(self.base.clone()),
            incrs: Vec::new(),
        };
        install_manifest(&*self.storage, &self.dir, &self.basename, &m)?;
        for f in self
            .old
            .iter()
            .flat_map(|o| o.base.iter().chain(o.incrs.iter()))
        {
            if f.name != self.base.name {
                let _ = self.storage.remove(&self.dir.join(&f.name));
                if let Some(sum) = &f.sum {
                    let _ = self.storage.remove(&self.dir.join(sum));
                }
            }
        }
        Ok(())
    }
}

/// Replays an incremental file's commands through `exec`. Returns the bytes
/// of complete commands; a command cut short at the very end of the last
/// file is reported as `Truncated` (the caller may cut it off), any other
/// damage as an error with the offset.
pub enum ReplayEnd {
    Complete,
    Truncated { valid_len: usize },
}

/// Runs `exec` on each command of `data` with the offset it starts at (the
/// loader reverts a transaction the file ends inside of to its MULTI).
pub fn replay(
    data: &[u8],
    name: &str,
    mut exec: impl FnMut(ferrokv_resp::Args, usize) -> Result<(), String>,
) -> Result<ReplayEnd, String> {
    use ferrokv_resp::request::{Limits, RequestDecoder};
    let mut dec = RequestDecoder::new();
    let mut off = 0;
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        authenticated: true,
    };
    while off < data.len() {
        if data[off] != b'*' {
            return Err(format!("Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest> (offset {off})"));
        }
        match dec.decode(&data[off..], limits) {
            Ok(Some(d)) => {
                let consumed = d.consumed;
                if !d.args.is_empty() {
                    exec(d.args, off).map_err(|e| format!("{e} (in {name} at offset {off})"))?;
                }
                off += consumed;
            }
            Ok(None) => return Ok(ReplayEnd::Truncated { valid_len: off }),
            Err(e) => {
                return Err(format!(
                    "Bad file format reading the append only file {name} at offset {off}: {}",
                    e.0
                ))
            }
        }
    }
    Ok(ReplayEnd::Complete)
}
