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
pub mod load;
pub mod snapshot;
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
    /// The replication AUX fields of the snapshot loaded last.
    pub last_load_repl: load::ReplAux,
    pub last_error: Option<String>,
    /// Peak entries copied by copy-on-write during the last save.
    pub last_cow_entries: usize,
}

impl PersistenceState {
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
            last_error: None,
            last_cow_entries: 0,
        }
    }
}

/// Parses the `save` option: pairs of `<seconds> <changes>`, or "" for none.
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
