//! Persistence: point-in-time snapshots in the Redis RDB format, written
//! without fork and without blocking the event loop, and loaded by mapping
//! the file.
//!
//! ```text
//!  event loop (owns the keyspace)                 writer thread
//!  SnapshotJob::step ── segment by segment ──►  chunks (bounded channel)
//!     │  copy-on-write keeps unvisited           ──► temp file ─► fsync ─► rename
//!     │  segments as they were at the start          ─► fsync(dir) ─► result
//!     └── polled each turn for the result ◄──────────────────────┘
//! ```
//!
//! The snapshot is produced by the loop itself, a few segments per turn
//! between client work; a write to a segment not yet visited first keeps a
//! copy of it (`ferrokv_store::Db::begin_snapshot`), so the file holds the
//! data exactly as it was when the save began. Only the bytes cross to the
//! writer thread, which never touches the keyspace.

pub mod aof;
pub mod aofsum;
pub mod direct;
pub mod load;
pub mod snapshot;
pub mod stream_rdb;
pub mod writeback;

pub use snapshot::{SaveKind, SnapshotJob};

/// The state `INFO persistence` reports and the save rules use.
#[derive(Debug)]
pub struct PersistenceState {
    pub job: Option<SnapshotJob>,
    /// A BGSAVE asked for with SCHEDULE while another ran.
    pub bgsave_scheduled: bool,
    pub last_bgsave_ok: bool,
    pub last_bgsave_secs: Option<f64>,
    pub last_save_unix: u64,
    pub saves: u64,
    /// Unix seconds of the last save attempt (save rules wait 5 s after a failure).
    pub last_attempt_unix: u64,
    pub last_load_keys: u64,
    pub last_load_expired: u64,
    /// Commands served when the save last stepped (its duty cycle yields
    /// only to a loop that is serving clients).
    pub commands_at_last_step: u64,
    pub clients_busy_until: std::time::Instant,
    /// The loop's time spent on clients, measured while a save runs.
    pub loop_load: LoopLoad,
    /// The share (percent) of the loop's time the save in progress may
    /// take now (100: the clients are idle; 0: no save).
    pub loop_share: u32,
    /// The replication AUX fields of the snapshot loaded last.
    pub last_load_repl: load::ReplAux,
    pub last_error: Option<String>,
    /// Peak entries copied by copy-on-write during the last save.
    pub last_cow_entries: usize,
    /// The same for the last AOF rewrite (`aof_last_cow_size`).
    pub aof_last_cow_entries: usize,
    /// What the last AOF load's checksum verification found.
    pub aof_verify: AofVerifyStats,
}

/// The result of the last AOF load's checksum verification
/// (`aof_last_load_verification`), from best to worst.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum VerifyResult {
    /// No AOF was loaded yet.
    #[default]
    None,
    /// Every byte of every incremental file matched its checksum.
    Ok,
    /// Some bytes had no checksum (a file without a companion, or a tail
    /// written after its last record) and loaded unverified.
    Unverified,
    /// A torn last block was cut off (`aof-load-truncated`).
    Truncated,
    /// A mismatch or a damaged companion was passed over
    /// (`aof-load-from-last-verified`, `aof-load-corrupt-tail-max-size`).
    Recovered,
}

impl VerifyResult {
    pub fn name(self) -> &'static str {
        match self {
            VerifyResult::None => "none",
            VerifyResult::Ok => "ok",
            VerifyResult::Unverified => "unverified",
            VerifyResult::Truncated => "truncated",
            VerifyResult::Recovered => "recovered",
        }
    }
}

/// What the last AOF load verified.
#[derive(Debug, Default, Clone)]
pub struct AofVerifyStats {
    pub verified_bytes: u64,
    pub verified_blocks: u64,
    pub unverified_bytes: u64,
    pub result: VerifyResult,
    /// A start-up load stopped at this incremental file (the later ones
    /// are left out of the manifest).
    pub stopped_at_incr: Option<usize>,
    /// Incremental files whose companion was damaged and passed over:
    /// the manifest stops naming it.
    pub dropped_sums: Vec<usize>,
}

impl AofVerifyStats {
    pub fn worsen(&mut self, r: VerifyResult) {
        self.result = self.result.max(r);
    }
}

impl PersistenceState {
    /// A save begins: its pacing starts from a busy loop (the measures of
    /// an earlier save are stale) at the base share.
    pub fn save_started(&mut self, base_share: u32) {
        self.loop_load = LoopLoad::new();
        self.loop_share = base_share;
    }

    pub fn new(now_unix: u64) -> Self {
        PersistenceState {
            job: None,
            bgsave_scheduled: false,
            last_bgsave_ok: true,
            last_bgsave_secs: None,
            last_save_unix: now_unix,
            saves: 0,
            last_attempt_unix: 0,
            last_load_keys: 0,
            last_load_expired: 0,
            last_load_repl: load::ReplAux::default(),
            commands_at_last_step: 0,
            clients_busy_until: std::time::Instant::now(),
            loop_load: LoopLoad::new(),
            loop_share: 0,
            last_error: None,
            last_cow_entries: 0,
            aof_last_cow_entries: 0,
            aof_verify: AofVerifyStats::default(),
        }
    }
}

/// The fraction of the event loop's time that goes to clients (turns of
/// work, minus the save's own steps), over windows of 20 ms: a save
/// takes the time the clients leave idle, and only its configured share
/// of a loop they keep busy.
#[derive(Debug)]
pub struct LoopLoad {
    window_start: std::time::Instant,
    busy: std::time::Duration,
    /// Save steps inside the current window (not client work).
    steps: std::time::Duration,
    /// Client work / wall time of the last complete window.
    pub utilization: f64,
}

impl LoopLoad {
    const WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

    pub fn new() -> Self {
        LoopLoad {
            window_start: std::time::Instant::now(),
            busy: std::time::Duration::ZERO,
            steps: std::time::Duration::ZERO,
            utilization: 1.0,
        }
    }

    /// A turn of the loop ran from `started` to `now` (before its poll).
    pub fn turn(&mut self, started: std::time::Instant, now: std::time::Instant) {
        self.busy += now.saturating_duration_since(started);
        let wall = now.saturating_duration_since(self.window_start);
        if wall >= Self::WINDOW {
            let work = self.busy.saturating_sub(self.steps);
            self.utilization = (work.as_secs_f64() / wall.as_secs_f64()).min(1.0);
            self.window_start = now;
            self.busy = std::time::Duration::ZERO;
            self.steps = std::time::Duration::ZERO;
        }
    }

    /// A save step of `d` ran inside the current turn.
    pub fn step(&mut self, d: std::time::Duration) {
        self.steps += d;
    }
}

impl Default for LoopLoad {
    fn default() -> Self {
        Self::new()
    }
}

/// The share (percent) of the loop's time a background save takes while
/// clients are served. At least `base` (`bgsave-loop-share`); more when
/// the clients leave the loop idle (`utilization`: their share of its time
/// lately): the save takes the idle time beyond a margin of 40% of the
/// loop, so a lightly loaded server saves nearly as fast as an idle one.
/// And more when the save holds memory: a save keeps alive what clients
/// change before it gets there (copied segments, overwritten values), so
/// the longer it runs under writes the more it holds. From an eighth of
/// the memory in use when it began (`used_at_start`), the share rises
/// linearly to a third at a quarter. That holds a save's extra memory back
/// (about a quarter of a 1 GB data set under a random-write load; nothing
/// stops writes spread over the whole keyspace from copying every segment,
/// as a forked save's copy-on-write can) while a slow save keeps the
/// clients' latency low.
pub fn save_loop_share(base: u32, used_at_start: usize, used_now: usize, utilization: f64) -> u32 {
    const MAX_MEMORY_SHARE: u32 = 33;
    const IDLE_MARGIN: f64 = 0.4;
    let idle = ((1.0 - utilization - IDLE_MARGIN) * 100.0)
        .round()
        .clamp(0.0, 100.0) as u32;
    let quarter = (used_at_start / 4).max(64 << 20) as f64;
    let grown = used_now.saturating_sub(used_at_start) as f64;
    let f = ((grown - quarter / 2.0) / (quarter / 2.0)).clamp(0.0, 1.0);
    let memory = base + (MAX_MEMORY_SHARE.saturating_sub(base) as f64 * f) as u32;
    base.max(idle).max(memory).clamp(1, 100)
}

/// Parses the `save` option: pairs of `<seconds> <changes>`, or "" for none.
/// Writes `body` to `path` through a synced temporary file beside it, a
/// rename and a sync of the directory: a crash leaves the old file or the
/// new one, never part of one (ACL SAVE, the RDMA tuner's state).
pub fn write_atomically(path: impl AsRef<std::path::Path>, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let path = path.as_ref();
    // Unique per call: two writers of one path (two saves of a tuner's
    // state from their threads) never share a temporary file.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}-{n}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

pub fn parse_save_rules(args: &[String]) -> Result<Vec<(u64, u64)>, String> {
    let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|p| match (p[0].parse::<u64>(), p[1].parse::<u64>()) {
            (Ok(s), Ok(c)) => Ok((s, c)),
            _ => Err("Invalid save parameters".into()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: usize = 1 << 30;

    #[test]
    fn a_busy_loop_gives_a_save_its_base_share() {
        assert_eq!(save_loop_share(2, GB, GB, 0.9), 2);
        assert_eq!(save_loop_share(2, GB, GB, 0.6), 2);
        assert_eq!(save_loop_share(10, GB, GB, 1.0), 10);
    }

    #[test]
    fn an_idle_loop_gives_a_save_the_idle_time_beyond_the_margin() {
        assert_eq!(save_loop_share(2, GB, GB, 0.5), 10);
        assert_eq!(save_loop_share(2, GB, GB, 0.1), 50);
        assert_eq!(save_loop_share(2, GB, GB, 0.0), 60);
    }

    #[test]
    fn a_save_holding_memory_speeds_up_to_a_third() {
        // Up to an eighth of the memory in use at the start: the base.
        assert_eq!(save_loop_share(2, GB, GB + GB / 8, 0.9), 2);
        // Halfway to a quarter.
        assert_eq!(save_loop_share(2, GB, GB + 3 * GB / 16, 0.9), 17);
        assert_eq!(save_loop_share(2, GB, GB + GB / 4, 0.9), 33);
        assert_eq!(save_loop_share(2, GB, 2 * GB, 0.9), 33);
        // Memory freed below the start counts as no growth.
        assert_eq!(save_loop_share(2, GB, GB / 2, 0.9), 2);
        // A small data set: the rise begins at 32 MiB of growth (half of
        // the 64 MiB floor of the "quarter").
        assert_eq!(save_loop_share(2, 1 << 20, 32 << 20, 0.9), 2);
        // A base above a third is kept.
        assert_eq!(save_loop_share(50, GB, 2 * GB, 0.9), 50);
    }
}
