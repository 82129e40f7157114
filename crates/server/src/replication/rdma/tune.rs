//! Autotuning of the RDMA full sync (`rdma-autotune yes`, docs/rdma.md
//! "Autotuning"): the replica learns, per master, which endpoints N, ring
//! slots K and chunk size C move a snapshot fastest, with the online tuner
//! of `ferrokv_fabric::tune`.
//!
//! The replica owns these three knobs (its ring, its connections), and
//! they are fixed once the endpoints are connected, so a window of the
//! tuner is one whole sync: before it, [`SyncTuning::choose`] names the
//! setting (the tuner's incumbent, or a neighbour it is trying); after a
//! sync that succeeded, [`SyncTuning::record`] gives the tuner the bytes
//! and the seconds from the first connect to the last byte verified. Each
//! master has its own tuner (its host and port as the replica dials it),
//! saved after every sync in the data directory as
//! `rdma-tune-<host>-<port>.txt` (`persistence::write_atomically`, by the
//! sync thread after it let go of the lock the loop's INFO takes), so a
//! restarted replica starts from the best setting it knows
//! (a warm start) and a text that does not parse or was written for
//! another grid starts it cold, with a warning.
//!
//! The grid: N 1..4, K 2..32 and C 256 KiB..8 MiB, in powers of two for
//! K and C; the pinned memory of a setting, N × K × C, never passes
//! `rdma-autotune-memory` (the tuner never proposes a setting over it).
//! The start of a cold tuner is the configured `rdma-sync-endpoints`,
//! `rdma-ring-slots` and `rdma-chunk-size`, moved to the nearest cell of
//! the grid.

use ferrokv_fabric::tune::{Features, Limit, Param, Report, Setting, Space, Tuner, TunerConfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const ENDPOINTS: [u64; 4] = [1, 2, 3, 4];
const SLOTS: [u64; 5] = [2, 4, 8, 16, 32];
const CHUNKS: [u64; 6] = [256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20];

/// Memory a setting pins on the replica: N rings of K × C.
fn pinned_bytes(v: &[u64]) -> u64 {
    v.iter().product()
}

/// The full sync's grid under a pinned-memory budget.
fn space(budget: u64) -> Space {
    let param = |name, values: &[u64]| Param {
        name,
        values: values.to_vec(),
    };
    Space::new(
        vec![
            param("endpoints", &ENDPOINTS),
            param("slots", &SLOTS),
            param("chunk", &CHUNKS),
        ],
        Limit {
            name: "pinned-bytes",
            budget,
            cost: pinned_bytes,
        },
    )
    .expect("a valid grid")
}

/// The grid's index nearest to `v` (in log terms: the grid is geometric).
pub fn nearest(values: &[u64], v: u64) -> usize {
    let distance = |x: u64| ((x as f64).ln() - (v.max(1) as f64).ln()).abs();
    (0..values.len())
        .min_by(|&a, &b| distance(values[a]).total_cmp(&distance(values[b])))
        .unwrap_or(0)
}

/// The setting one sync runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub peer: String,
    pub endpoints: u32,
    pub slots: u32,
    pub chunk_size: u32,
}

/// How the last tuner of a peer began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Cold,
    Warm,
}

impl Start {
    pub fn name(self) -> &'static str {
        match self {
            Start::Cold => "cold",
            Start::Warm => "warm",
        }
    }
}

/// The per-master tuners of a replica, shared by the sync thread (choose,
/// record) and the loop (INFO, /metrics).
pub struct SyncTuning {
    dir: PathBuf,
    budget: u64,
    tuners: HashMap<String, (Tuner, Start)>,
    /// The master of the last sync chosen for (what INFO shows).
    last_peer: Option<String>,
    /// The last sync's measured throughput, bytes/s.
    last_measured: Option<f64>,
}

impl SyncTuning {
    pub fn new(dir: &Path, budget: u64) -> SyncTuning {
        SyncTuning {
            dir: dir.to_path_buf(),
            budget,
            tuners: HashMap::new(),
            last_peer: None,
            last_measured: None,
        }
    }

    /// `dir` or `rdma-autotune-memory` changed: tuners are rebuilt at
    /// their next sync, from their state in the directory and under the
    /// budget now in force.
    pub fn configure(&mut self, dir: &Path, budget: u64) {
        if budget != self.budget || dir != self.dir {
            self.dir = dir.to_path_buf();
            self.budget = budget;
            self.tuners.clear();
        }
    }

    fn path(&self, peer: &str) -> PathBuf {
        state_path(&self.dir, "rdma-tune", peer)
    }

    /// The tuner of `peer`: kept, else loaded from its file, else cold
    /// from `defaults` (N, K, C).
    fn tuner(&mut self, peer: &str, defaults: (u32, u32, u32)) -> &mut (Tuner, Start) {
        if !self.tuners.contains_key(peer) {
            let path = self.path(peer);
            let warm = load_saved(&path, space(self.budget));
            let entry = match warm {
                Some(t) => (t, Start::Warm),
                None => (self.cold(defaults), Start::Cold),
            };
            self.tuners.insert(peer.to_string(), entry);
        }
        self.tuners.get_mut(peer).expect("inserted above")
    }

    /// A cold tuner from the configured setting's nearest allowed cell (the
    /// smallest cell when that one is over the budget).
    fn cold(&self, (n, k, c): (u32, u32, u32)) -> Tuner {
        let grid = space(self.budget);
        let near = Setting(vec![
            nearest(&ENDPOINTS, u64::from(n)),
            nearest(&SLOTS, u64::from(k)),
            nearest(&CHUNKS, u64::from(c)),
        ]);
        let start = if grid.allowed(&near) {
            near
        } else {
            Setting(vec![0, 0, 0])
        };
        let cfg = TunerConfig::default();
        match Tuner::new(grid, start, cfg) {
            Ok(t) => t,
            // A budget under the smallest cell: nothing fits, and the
            // smallest cell is still what the sync can run.
            Err(_) => Tuner::new(space(u64::MAX), Setting(vec![0, 0, 0]), cfg)
                .expect("the smallest cell of an unlimited grid"),
        }
    }

    /// The setting for the next sync from `peer`.
    pub fn choose(&mut self, peer: &str, defaults: (u32, u32, u32)) -> Choice {
        let (tuner, start) = self.tuner(peer, defaults);
        // One sync is one window: a trial the last sync began goes on.
        tuner.renew_budget();
        let v = tuner.current_values();
        tracing::info!(
            "RDMA autotune ({} start) for {peer}: endpoints {}, slots {}, chunk {}",
            start.name(),
            v[0],
            v[1],
            v[2]
        );
        self.last_peer = Some(peer.to_string());
        Choice {
            peer: peer.to_string(),
            endpoints: v[0] as u32,
            slots: v[1] as u32,
            chunk_size: v[2] as u32,
        }
    }

    /// A sync with `choice` moved `bytes` in `secs`: the tuner learns it.
    /// Its new state is returned to be written once the caller has let go
    /// of the lock ([`StateToSave::write`]).
    pub fn record(&mut self, choice: &Choice, bytes: u64, secs: f64) -> StateToSave {
        let defaults = (choice.endpoints, choice.slots, choice.chunk_size);
        let (tuner, _) = self.tuner(&choice.peer, defaults);
        let chunks = bytes.div_ceil(u64::from(choice.chunk_size.max(1)));
        let decision = tuner.record(&Features {
            bytes,
            ops: chunks,
            seconds: secs,
            mean_payload: f64::from(choice.chunk_size),
            ..Features::default()
        });
        let next = tuner.current_values();
        let text = tuner.save();
        tracing::info!(
            "RDMA autotune for {}: {:.1} MB/s measured; next sync: endpoints {}, slots {}, chunk {} ({:?})",
            choice.peer,
            bytes as f64 / 1e6 / secs.max(1e-9),
            next[0],
            next[1],
            next[2],
            decision.reason()
        );
        self.last_measured = (secs > 0.0).then(|| bytes as f64 / secs);
        StateToSave {
            path: self.path(&choice.peer),
            text,
        }
    }

    /// The last peer's tuner, for INFO and /metrics.
    pub fn report(&self) -> Option<(String, Start, Report, Option<f64>)> {
        let peer = self.last_peer.as_ref()?;
        let (t, start) = self.tuners.get(peer)?;
        Some((peer.clone(), *start, t.report(), self.last_measured))
    }
}

/// `<dir>/<prefix>-<peer>.txt`, the peer's characters other than ASCII
/// letters and digits as `-`: where a peer's tuner is kept.
pub fn state_path(dir: &Path, prefix: &str, peer: &str) -> PathBuf {
    let safe: String = peer
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    dir.join(format!("{prefix}-{safe}.txt"))
}

/// The tuner saved at `path` over `space` (a warm start), or `None` with a
/// warning when the file cannot be read or was written for another grid
/// (no file: `None`, quietly): the caller starts cold.
pub fn load_saved(path: &Path, space: Space) -> Option<Tuner> {
    match std::fs::read_to_string(path) {
        Ok(text) => match Tuner::load(space, &text, TunerConfig::default()) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(
                    "RDMA autotune: {} not used ({e}); starting cold",
                    path.display()
                );
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(
                "RDMA autotune: can't read {} ({e}); starting cold",
                path.display()
            );
            None
        }
    }
}

/// A tuner's state, to be written to its file.
#[must_use = "what the tuner learned is lost unless it is written"]
pub struct StateToSave {
    pub path: PathBuf,
    pub text: String,
}

impl StateToSave {
    /// Writes it (temp file, fsync, rename); a failure is logged: the
    /// tuner keeps it in memory and the next save tries again.
    pub fn write(self) {
        if let Err(e) = crate::persistence::write_atomically(&self.path, self.text.as_bytes()) {
            tracing::warn!(
                "RDMA autotune: can't save what it learned to {}: {e}",
                self.path.display()
            );
        }
    }

    /// [`StateToSave::write`] from a short-lived thread, so the event loop
    /// never waits on the disk.
    pub fn write_in_background(self) {
        let spawned = std::thread::Builder::new()
            .name("rdma-tune-save".into())
            .spawn(move || self.write());
        if let Err(e) = spawned {
            tracing::warn!("RDMA autotune: can't start the thread that saves: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_setting_maps_to_the_nearest_allowed_cell() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = SyncTuning::new(dir.path(), 64 << 20);
        let c = t.choose("127.0.0.1:6379", (1, 8, 2 << 20));
        assert_eq!((c.endpoints, c.slots, c.chunk_size), (1, 8, 2 << 20));
        // Off the grid: to the nearest cell.
        let c = t.choose("127.0.0.1:6380", (3, 5, 3 << 20));
        assert_eq!((c.endpoints, c.slots, c.chunk_size), (3, 4, 4 << 20));
        // Over the budget (4 × 32 × 8 MiB = 1 GiB): the smallest cell.
        let c = t.choose("127.0.0.1:6381", (4, 32, 8 << 20));
        assert_eq!((c.endpoints, c.slots, c.chunk_size), (1, 2, 256 << 10));
    }

    #[test]
    fn what_it_learned_survives_a_restart_and_a_corrupt_file_starts_cold() {
        let dir = tempfile::tempdir().unwrap();
        let peer = "10.0.0.1:6379";
        let mut t = SyncTuning::new(dir.path(), 64 << 20);
        let c = t.choose(peer, (1, 8, 2 << 20));
        t.record(&c, 1 << 30, 1.0).write();
        let saved = t.path(peer);
        assert!(saved.exists());
        // A new process: the state comes from the file.
        let mut warm = SyncTuning::new(dir.path(), 64 << 20);
        let again = warm.choose(peer, (1, 8, 2 << 20));
        assert_eq!(warm.report().unwrap().1, Start::Warm);
        // It starts from the best setting it knows: the one measured.
        assert_eq!(
            (again.endpoints, again.slots, again.chunk_size),
            (1, 8, 2 << 20)
        );
        std::fs::write(&saved, "not a tuner").unwrap();
        let mut cold = SyncTuning::new(dir.path(), 64 << 20);
        cold.choose(peer, (1, 8, 2 << 20));
        assert_eq!(cold.report().unwrap().1, Start::Cold);
    }

    #[test]
    fn syncs_climb_to_the_best_setting_and_stay_within_the_budget() {
        // A synthetic master: throughput peaks at N = 2, K = 16, C = 1 MiB.
        let rate = |c: &Choice| {
            let score = |v: f64, best: f64| 1.0 - 0.12 * (v.log2() - best.log2()).abs();
            1e9 * score(f64::from(c.endpoints), 2.0)
                * score(f64::from(c.slots), 16.0)
                * score(f64::from(c.chunk_size), f64::from(1u32 << 20))
        };
        let dir = tempfile::tempdir().unwrap();
        let budget = 64 << 20;
        let mut t = SyncTuning::new(dir.path(), budget);
        let peer = "127.0.0.1:7000";
        for _ in 0..80 {
            let c = t.choose(peer, (1, 8, 2 << 20));
            let pinned = u64::from(c.endpoints) * u64::from(c.slots) * u64::from(c.chunk_size);
            assert!(pinned <= budget, "{c:?} pins {pinned}");
            t.record(&c, 1 << 30, (1u64 << 30) as f64 / rate(&c))
                .write();
        }
        // The next sync runs the incumbent: the peak.
        let c = t.choose(peer, (1, 8, 2 << 20));
        assert_eq!((c.endpoints, c.slots, c.chunk_size), (2, 16, 1 << 20));
    }
}
