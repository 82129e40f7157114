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
//! All file I/O goes through [`Storage`], so tests can inject failing writes
//! or a power cut that loses whatever was not synced.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
}

/// The manifest: which files, in which order, make up the AOF.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    pub incrs: Vec<AofFile>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut f = AofFile {
                name: String::new(),
                seq: 0,
                kind: ' ',
            };
            for kv in words.chunks(2) {
                match kv {
                    ["file", v] => f.name = v.to_string(),
                    ["seq", v] => {
                        f.seq = v
                            .parse()
                            .map_err(|_| format!("bad seq at manifest line {}", n + 1))?
                    }
                    ["type", v] => f.kind = v.chars().next().unwrap_or(' '),
                    _ => return Err(format!("invalid manifest line {}: '{line}'", n + 1)),
                }
            }
            if f.name.is_empty() || f.name.contains('/') {
                return Err(format!("invalid file name at manifest line {}", n + 1));
            }
            match f.kind {
                'b' => m.base = Some(f),
                'i' => m.incrs.push(f),
                // History files are deleted after a rewrite; nothing to load.
                'h' => {}
                _ => return Err(format!("invalid file type at manifest line {}", n + 1)),
            }
        }
        Ok(m)
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        for f in self.base.iter().chain(self.incrs.iter()) {
            s.push_str(&format!("file {} seq {} type {}\n", f.name, f.seq, f.kind));
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

/// Once a second, syncs the current file if it was written to.
struct EverySecSyncer {
    stop: Arc<AtomicBool>,
    dirty: Arc<AtomicBool>,
    current: Arc<std::sync::Mutex<Option<Arc<dyn SyncHandle>>>>,
    error: Arc<std::sync::Mutex<Option<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EverySecSyncer {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let dirty = Arc::new(AtomicBool::new(false));
        let current: Arc<std::sync::Mutex<Option<Arc<dyn SyncHandle>>>> =
            Arc::new(std::sync::Mutex::new(None));
        let error = Arc::new(std::sync::Mutex::new(None));
        let (s, d, c, e) = (stop.clone(), dirty.clone(), current.clone(), error.clone());
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
                    let h = c.lock().map(|g| g.clone()).unwrap_or(None);
                    if let Some(h) = h {
                        if let Err(err) = h.sync() {
                            if let Ok(mut g) = e.lock() {
                                *g = Some(err.to_string());
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(900));
                }
            })
            .expect("spawn aof-fsync thread");
        EverySecSyncer {
            stop,
            dirty,
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
    stream_db: Option<usize>,
    syncer: Option<EverySecSyncer>,
    /// Bytes in the incremental files since the last base.
    pub incr_size: u64,
    /// Size of the AOF after the last rewrite (for auto-rewrite).
    pub base_size: u64,
    /// The last write or fsync error; writes are refused while it lasts.
    pub write_error: Option<String>,
    pub rewrite: Option<RewriteInProgress>,
    pub last_rewrite_ok: bool,
    pub rewrites: u64,
    /// Rewrites that failed since the last one that did not
    /// (`aof_rewrites_consecutive_failures`).
    pub rewrite_failures_in_a_row: u64,
    pub last_fsync: Instant,
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
}

impl Aof {
    fn manifest_path(&self) -> PathBuf {
        self.dir.join(format!("{}.manifest", self.basename))
    }

    /// Reads the manifest in `dir`, if any, and says what to load.
    pub fn plan(
        storage: &dyn Storage,
        dir: &Path,
        basename: &str,
    ) -> Result<Option<(Manifest, LoadPlan)>, String> {
        let mpath = dir.join(format!("{basename}.manifest"));
        if !storage.exists(&mpath) {
            return Ok(None);
        }
        let text = storage
            .read(&mpath)
            .map_err(|e| format!("Can't read the AOF manifest {}: {e}", mpath.display()))?;
        let m = Manifest::parse(&String::from_utf8_lossy(&text))
            .map_err(|e| format!("The AOF manifest {} is invalid: {e}", mpath.display()))?;
        let plan = LoadPlan {
            base: m.base.as_ref().map(|b| dir.join(&b.name)),
            incrs: m.incrs.iter().map(|f| dir.join(&f.name)).collect(),
        };
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
    /// RDB of the current data set) when there is none.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        basename: &str,
        policy: FsyncPolicy,
        existing: Option<Manifest>,
        empty_base: &[u8],
    ) -> Result<Aof, String> {
        storage
            .create_dir_all(dir)
            .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
        let (manifest, file, incr_size, file_path, file_len) = match existing {
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
                (m, file, size, path, len)
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
                });
                (m, file, 0, path, 0)
            }
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
            stream_db: None,
            syncer: None,
            incr_size,
            base_size: incr_size,
            write_error: None,
            rewrite: None,
            last_rewrite_ok: true,
            rewrites: 0,
            rewrite_failures_in_a_row: 0,
            last_fsync: Instant::now(),
        };
        aof.write_manifest()?;
        aof.set_policy(policy);
        Ok(aof)
    }

    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// Changes `appendfsync` at run time.
    pub fn set_policy(&mut self, policy: FsyncPolicy) {
        self.policy = policy;
        if policy == FsyncPolicy::EverySec {
            if self.syncer.is_none() {
                let s = EverySecSyncer::start();
                if let (Ok(h), Ok(mut g)) = (self.file.sync_handle(), s.current.lock()) {
                    *g = Some(h);
                }
                self.syncer = Some(s);
            }
        } else {
            self.syncer = None;
        }
    }

    fn write_manifest(&mut self) -> Result<(), String> {
        let path = self.manifest_path();
        let tmp = self.dir.join(format!("temp-{}.manifest", self.basename));
        let text = self.manifest.render();
        let r = (|| -> io::Result<()> {
            let mut f = self.storage.create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync()?;
            self.storage.rename(&tmp, &path)?;
            self.storage.sync_dir(&self.dir)
        })();
        r.map_err(|e| format!("Can't write the AOF manifest {}: {e}", path.display()))
    }

    /// Queues a command of the propagation stream.
    pub fn feed<T: AsRef<[u8]>>(&mut self, db: usize, argv: &[T]) {
        crate::propagate::encode_command(&mut self.buf, &mut self.stream_db, db, argv);
    }

    /// Whether commands are waiting to be written.
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

    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Writes the queued commands (and, with `always`, syncs them). Called
    /// once per loop turn before replies go out. On failure the data stays
    /// queued, the error is kept (writes are refused meanwhile), and the
    /// next turn tries again.
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
        let r = self.file.write_all(&self.buf).and_then(|_| {
            if self.policy == FsyncPolicy::Always {
                self.file.sync()?;
                self.last_fsync = Instant::now();
            }
            Ok(())
        });
        match r {
            Ok(()) => {
                self.incr_size += self.buf.len() as u64;
                self.file_len += self.buf.len() as u64;
                self.buf.clear();
                if let Some(s) = &self.syncer {
                    s.dirty.store(true, Ordering::Release);
                }
                self.write_error = None;
                Ok(())
            }
            Err(e) => {
                // A partial write may have left half a command in the file:
                // reopen so the retry starts a fresh append (the loader cuts
                // a torn tail), and keep everything queued.
                let msg = format!("Error writing to the AOF file: {e}");
                if self
                    .storage
                    .truncate(&self.file_path, self.file_len)
                    .is_ok()
                {
                    if let Ok(f) = self.storage.append(&self.file_path) {
                        self.file = f;
                        if let Some(s) = &self.syncer {
                            if let (Ok(h), Ok(mut g)) = (self.file.sync_handle(), s.current.lock())
                            {
                                *g = Some(h);
                            }
                        }
                    }
                }
                self.write_error = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// Syncs whatever was written (shutdown, `appendfsync` changes).
    pub fn sync_now(&mut self) -> Result<(), String> {
        self.flush()?;
        self.file
            .sync()
            .map_err(|e| format!("fsync of the AOF failed: {e}"))
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
        self.file = file;
        self.file_path = path.clone();
        self.file_len = 0;
        self.stream_db = None;
        if let Some(s) = &self.syncer {
            if let (Ok(h), Ok(mut g)) = (self.file.sync_handle(), s.current.lock()) {
                *g = Some(h);
            }
        }
        self.manifest.incrs.push(AofFile {
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
        };
        let path = self.dir.join(&base.name);
        self.rewrite = Some(RewriteInProgress {
            base,
            first_incr_seq: seq,
        });
        Ok(path)
    }

    /// Ends a rewrite: with a new base on disk, the manifest now names it
    /// and the incrs written since; the old files are deleted.
    pub fn finish_rewrite(&mut self, ok: bool, base_size: u64) -> Result<(), String> {
        let Some(rw) = self.rewrite.take() else {
            return Ok(());
        };
        if !ok {
            self.last_rewrite_ok = false;
            self.rewrite_failures_in_a_row += 1;
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
            }
        }
        self.incr_size = self
            .manifest
            .incrs
            .iter()
            .map(|f| self.storage.len(&self.dir.join(&f.name)).unwrap_or(0))
            .sum();
        self.base_size = base_size + self.incr_size;
        self.last_rewrite_ok = true;
        self.rewrite_failures_in_a_row = 0;
        self.rewrites += 1;
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
