//! Autotuning of RDMA client connections (`rdma-autotune yes`, docs/rdma.md
//! "Autotuning"): the server learns, per client host, which completion
//! signalling interval, inline threshold and completion-queue polling time
//! serve that host's requests fastest, with the online tuner of
//! `ferrokv_fabric::tune` (the same one the full sync uses).
//!
//! These three knobs can change on a live connection, so a window of the
//! tuner is a slice of time (`rdma-autotune-window-ms`, 250 ms by default)
//! of the host's traffic, not a connection. Every cron tick
//! ([`ConnTuning::tick`]) adds what each of the host's connections did since
//! the last tick (the streams' counters); when a window is over, its
//! features — bytes moved both ways, replies written, their mean size,
//! write completion latency p50/p99 (post to the peer's credit), credit
//! stalls and the share of a CPU the event loop used — go to the tuner,
//! and its decision is applied to every connection of that host. A window
//! with fewer than [`MIN_WINDOW_WRITES`] replies is an idle window: it is
//! not recorded (an idle host says nothing about a setting).
//!
//! The objective is bytes per second over the window: with closed-loop
//! clients (each waits for its reply), a setting that cuts the per-request
//! cost or latency shows as more bytes.
//!
//! The grid:
//! * `signal_every` 1, 2, 4, 8, 16 — ring writes per requested local
//!   completion (capped at a connection's ring slots);
//! * `inline` 1, 64, 256 bytes — the largest reply injected
//!   (`fi_inject_writedata`), capped at the provider's `inject_size`
//!   (128 on tcp); 1 means none in practice;
//! * `poll_usec` 1, 16, 64, 256 — how long the loop keeps polling the
//!   completion queues before it sleeps on their fds (1: one look). The loop
//!   is shared by every host, so the longest poll of the hosts with a
//!   connection open is the one in force.
//!
//! The ring's slots (`rdma-conn-slots`) are fixed when a connection is
//! made and are not tuned: they stay the operator's. Each host's tuner is
//! saved in the data directory as `rdma-conn-tune-<host>.txt` when its
//! incumbent changes and every [`SAVE_EVERY`] windows, by a short-lived
//! thread (temp file, fsync, rename), so the loop never waits on the disk,
//! and a restarted server starts each host warm. A host with no connection
//! for [`FORGET_AFTER`] is saved and dropped from memory.

use crate::replication::rdma::tune::{load_saved, nearest, state_path, Start, StateToSave};
use ferrokv_fabric::stream::{StreamStats, WRITE_LATENCY_BOUNDS_USEC};
use ferrokv_fabric::tune::{
    Decision, Features, Limit, Param, Reason, Report, Setting, Space, Tuner, TunerConfig,
};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const SIGNAL: [u64; 5] = [1, 2, 4, 8, 16];
pub const INLINE: [u64; 3] = [1, 64, 256];
pub const POLL_USEC: [u64; 4] = [1, 16, 64, 256];

/// Replies a window needs to be recorded.
pub const MIN_WINDOW_WRITES: u64 = 200;

/// Windows between two saves of a host's tuner (besides every change of
/// its incumbent).
pub const SAVE_EVERY: u64 = 32;

/// A host with no connection left for this long is saved and dropped
/// from memory (it comes back warm from its file): the table grows with
/// the hosts connected, never with every host that ever connected.
pub const FORGET_AFTER: Duration = Duration::from_secs(300);

/// The connections' grid (no hard limit: none of these knobs pins memory).
pub fn space() -> Space {
    let param = |name, values: &[u64]| Param {
        name,
        values: values.to_vec(),
    };
    Space::new(
        vec![
            param("signal_every", &SIGNAL),
            param("inline", &INLINE),
            param("poll_usec", &POLL_USEC),
        ],
        Limit::unlimited(),
    )
    .expect("a valid grid")
}

/// The settings a connection runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    pub signal_every: u32,
    pub inline: usize,
    pub poll_usec: u64,
}

impl Knobs {
    fn of(v: &[u64]) -> Knobs {
        Knobs {
            signal_every: v[0] as u32,
            inline: v[1] as usize,
            poll_usec: v[2],
        }
    }
}

/// What a window has added up so far, over a host's connections.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    bytes: u64,
    writes: u64,
    credit_stalls: u64,
    latency: [u64; WRITE_LATENCY_BOUNDS_USEC.len() + 1],
}

impl Window {
    /// Adds what a stream did between `before` and `now`.
    fn add(&mut self, before: &StreamStats, now: &StreamStats) {
        let d = |a: u64, b: u64| b.saturating_sub(a);
        self.bytes +=
            d(before.bytes_written, now.bytes_written) + d(before.bytes_read, now.bytes_read);
        self.writes += d(before.writes, now.writes);
        self.credit_stalls += d(before.credit_stalls, now.credit_stalls);
        for (i, slot) in self.latency.iter_mut().enumerate() {
            *slot += d(
                before.write_latency.buckets[i],
                now.write_latency.buckets[i],
            );
        }
    }

    /// The latency below which `q` of the window's writes completed: the
    /// upper bound of the bucket it falls in (the last bucket: twice the
    /// last bound).
    fn quantile_usec(&self, q: f64) -> f64 {
        let total: u64 = self.latency.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let want = (q * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.latency.iter().enumerate() {
            seen += n;
            if seen >= want {
                return WRITE_LATENCY_BOUNDS_USEC
                    .get(i)
                    .copied()
                    .unwrap_or(2 * WRITE_LATENCY_BOUNDS_USEC[WRITE_LATENCY_BOUNDS_USEC.len() - 1])
                    as f64;
            }
        }
        0.0
    }
}

/// One client host's tuner and the window in progress.
struct Host {
    tuner: Tuner,
    start: Start,
    began: Instant,
    cpu_at_start: Duration,
    window: Window,
    /// Each connection's counters at the last tick, by client id (a slot
    /// of the client table is reused by the next connection; an id never
    /// is).
    seen: HashMap<u64, StreamStats>,
    /// The last recorded window's features.
    last: Option<Features>,
    /// Whether the last window of this host was recorded (not idle).
    active: bool,
    since_save: u64,
    /// When it last had a connection open.
    last_connected: Instant,
}

/// The per-host tuners of RDMA client connections (owned by the loop).
pub struct ConnTuning {
    dir: PathBuf,
    hosts: HashMap<IpAddr, Host>,
    last_host: Option<IpAddr>,
    /// Windows recorded and idle windows skipped, over every host.
    pub windows: u64,
    pub idle_windows: u64,
}

/// The CPU time the calling thread has used.
pub fn thread_cpu() -> Duration {
    // SAFETY: getrusage writes the struct it is given, which lives for the call.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl ConnTuning {
    pub fn new(dir: &Path) -> ConnTuning {
        ConnTuning {
            dir: dir.to_path_buf(),
            hosts: HashMap::new(),
            last_host: None,
            windows: 0,
            idle_windows: 0,
        }
    }

    /// The directory changed (`CONFIG SET dir`): tuners are loaded again
    /// from the new one as hosts come back.
    pub fn configure(&mut self, dir: &Path) {
        if dir != self.dir {
            self.dir = dir.to_path_buf();
            self.hosts.clear();
            self.last_host = None;
        }
    }

    pub fn path(&self, host: &IpAddr) -> PathBuf {
        state_path(&self.dir, "rdma-conn-tune", &host.to_string())
    }

    /// The knobs a new connection from `host` starts with: its tuner's
    /// current setting (loaded from the data directory, else cold from
    /// `defaults`). A new connection renews the exploration budget.
    pub fn admit(&mut self, host: IpAddr, defaults: Knobs, now: Instant) -> Knobs {
        let h = self.host(host, defaults, now);
        h.tuner.renew_budget();
        Knobs::of(&h.tuner.current_values())
    }

    fn host(&mut self, host: IpAddr, defaults: Knobs, now: Instant) -> &mut Host {
        if !self.hosts.contains_key(&host) {
            let path = self.path(&host);
            let warm = load_saved(&path, space());
            let (tuner, start) = match warm {
                Some(t) => (t, Start::Warm),
                None => {
                    let near = Setting(vec![
                        nearest(&SIGNAL, u64::from(defaults.signal_every)),
                        nearest(&INLINE, defaults.inline as u64),
                        nearest(&POLL_USEC, defaults.poll_usec),
                    ]);
                    let t = Tuner::new(space(), near, TunerConfig::default())
                        .expect("every cell is allowed");
                    (t, Start::Cold)
                }
            };
            let v = tuner.current_values();
            tracing::info!(
                "RDMA connection autotune ({} start) for {host}: signal every {}, inline {}, poll {} us",
                start.name(),
                v[0],
                v[1],
                v[2]
            );
            self.hosts.insert(
                host,
                Host {
                    tuner,
                    start,
                    began: now,
                    cpu_at_start: thread_cpu(),
                    window: Window::default(),
                    seen: HashMap::new(),
                    last: None,
                    active: false,
                    since_save: 0,
                    last_connected: now,
                },
            );
        }
        self.hosts.get_mut(&host).expect("inserted above")
    }

    /// A cron tick: `conns` are the open RDMA clients (client id, host,
    /// their counters now). Each host's window takes what its connections
    /// did since the last tick — a connection seen for the first time only
    /// gives its starting point, so traffic from before the tuner knew it
    /// (autotune just turned on, a new data directory) is never credited
    /// to the current setting; a host whose window is over records it, and
    /// the hosts whose setting changed are returned with their new knobs
    /// (to apply to their connections), with the states to save.
    pub fn tick(
        &mut self,
        conns: &[(u64, IpAddr, StreamStats)],
        window: Duration,
        defaults: Knobs,
        now: Instant,
    ) -> (Vec<(IpAddr, Knobs)>, Vec<StateToSave>) {
        for &(id, host, stats) in conns {
            let h = self.host(host, defaults, now);
            if let Some(before) = h.seen.insert(id, stats) {
                h.window.add(&before, &stats);
            }
        }
        let mut changed = Vec::new();
        let mut saves = Vec::new();
        let cpu = thread_cpu();
        let dir_paths: Vec<(IpAddr, PathBuf)> =
            self.hosts.keys().map(|h| (*h, self.path(h))).collect();
        for (ip, path) in dir_paths {
            let h = self.hosts.get_mut(&ip).expect("listed");
            // Connections gone since the last tick.
            h.seen
                .retain(|id, _| conns.iter().any(|&(c, host, _)| c == *id && host == ip));
            if !h.seen.is_empty() {
                h.last_connected = now;
            } else if now.saturating_duration_since(h.last_connected) >= FORGET_AFTER {
                saves.push(StateToSave {
                    path,
                    text: h.tuner.save(),
                });
                self.hosts.remove(&ip);
                if self.last_host == Some(ip) {
                    self.last_host = None;
                }
                continue;
            }
            let elapsed = now.saturating_duration_since(h.began);
            if elapsed < window {
                continue;
            }
            let w = std::mem::take(&mut h.window);
            let cpu_used = cpu.saturating_sub(h.cpu_at_start);
            h.began = now;
            h.cpu_at_start = cpu;
            if w.writes < MIN_WINDOW_WRITES {
                h.active = false;
                self.idle_windows += 1;
                continue;
            }
            let seconds = elapsed.as_secs_f64();
            let features = Features {
                bytes: w.bytes,
                ops: w.writes,
                seconds,
                mean_payload: w.bytes as f64 / w.writes as f64,
                p50_us: w.quantile_usec(0.5),
                p99_us: w.quantile_usec(0.99),
                credit_stalls: w.credit_stalls,
                cpu_share: (cpu_used.as_secs_f64() / seconds).min(1.0),
            };
            let incumbent = h.tuner.best().map(|(s, _)| s);
            let decision = h.tuner.record(&features);
            h.last = Some(features);
            h.active = true;
            h.since_save += 1;
            self.windows += 1;
            self.last_host = Some(ip);
            if let Decision::Move(..) = decision {
                changed.push((ip, Knobs::of(&h.tuner.current_values())));
            }
            if h.tuner.best().map(|(s, _)| s) != incumbent
                || h.since_save >= SAVE_EVERY
                || decision.reason() == Reason::Adopted
            {
                h.since_save = 0;
                saves.push(StateToSave {
                    path,
                    text: h.tuner.save(),
                });
            }
        }
        (changed, saves)
    }

    /// The poll time in force: the longest of the hosts with a connection
    /// open or active in their last window (none: `fallback`).
    pub fn poll_usec(&self, fallback: u64) -> u64 {
        self.hosts
            .values()
            .filter(|h| h.active || !h.seen.is_empty())
            .map(|h| h.tuner.current_values()[2])
            .max()
            .unwrap_or(fallback)
    }

    /// The current knobs of `host`'s tuner, if it has one.
    pub fn knobs(&self, host: &IpAddr) -> Option<Knobs> {
        self.hosts
            .get(host)
            .map(|h| Knobs::of(&h.tuner.current_values()))
    }

    /// Every host's state, to save (at shutdown, and when autotune is
    /// turned off).
    pub fn states(&self) -> Vec<StateToSave> {
        self.hosts
            .iter()
            .map(|(ip, h)| StateToSave {
                path: self.path(ip),
                text: h.tuner.save(),
            })
            .collect()
    }

    /// The last host that recorded a window, for INFO and /metrics: its
    /// start, the tuner's report and that window's features.
    pub fn report(&self) -> Option<(IpAddr, Start, Report, Option<Features>)> {
        let ip = self.last_host?;
        let h = self.hosts.get(&ip)?;
        Some((ip, h.start, h.tuner.report(), h.last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(bytes: u64, writes: u64, lat_bucket: usize) -> StreamStats {
        let mut s = StreamStats {
            bytes_written: bytes,
            writes,
            ..StreamStats::default()
        };
        s.write_latency.buckets[lat_bucket] = writes;
        s.write_latency.count = writes;
        s
    }

    const DEFAULTS: Knobs = Knobs {
        signal_every: 4,
        inline: 256,
        poll_usec: 0,
    };

    #[test]
    fn a_cold_host_starts_from_the_configured_knobs_moved_to_the_grid() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = ConnTuning::new(dir.path());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let k = t.admit(ip, DEFAULTS, Instant::now());
        assert_eq!(
            k,
            Knobs {
                signal_every: 4,
                inline: 256,
                poll_usec: 1
            }
        );
    }

    #[test]
    fn idle_windows_are_not_recorded_and_busy_ones_are() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = ConnTuning::new(dir.path());
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        let t0 = Instant::now();
        t.admit(ip, DEFAULTS, t0);
        let w = Duration::from_millis(100);
        // A connection's first sighting is only its starting point: what
        // it did before counts for no window.
        let (_, saves) = t.tick(&[(3, ip, stats(1000, 10, 2))], w, DEFAULTS, t0 + w / 2);
        assert!(saves.is_empty());
        assert_eq!(t.hosts[&ip].window.writes, 0);
        // Too few replies since: idle.
        let (_, saves) = t.tick(&[(3, ip, stats(1000, 20, 2))], w, DEFAULTS, t0 + w);
        assert!(saves.is_empty());
        assert_eq!((t.windows, t.idle_windows), (0, 1));
        // A busy window: recorded, with its latency quantiles.
        let (_, _) = t.tick(
            &[(3, ip, stats(1_000_000, 5_010, 3))],
            w,
            DEFAULTS,
            t0 + 2 * w,
        );
        assert_eq!(t.windows, 1);
        let (host, start, report, last) = t.report().unwrap();
        assert_eq!((host, start), (ip, Start::Cold));
        assert_eq!(report.windows, 1);
        let f = last.unwrap();
        assert_eq!(f.ops, 4_990);
        assert_eq!(f.bytes, 999_000);
        assert_eq!(f.p99_us, WRITE_LATENCY_BOUNDS_USEC[3] as f64);
        // A connection that went away leaves the host's table.
        t.tick(&[], w, DEFAULTS, t0 + 3 * w);
        assert!(t.hosts[&ip].seen.is_empty());
        // A host with no connection for FORGET_AFTER is saved and dropped.
        let (_, saves) = t.tick(&[], w, DEFAULTS, t0 + 3 * w + FORGET_AFTER);
        assert_eq!(saves.len(), 1);
        assert!(t.hosts.is_empty() && t.report().is_none());
    }

    /// Synthetic hosts: the tuner, driven through `tick` with counters
    /// whose rate depends on the knobs, moves the connections to the best
    /// cell and saves it; a new `ConnTuning` on the same directory starts
    /// warm there.
    #[test]
    fn the_tuner_climbs_on_live_knobs_and_starts_warm_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        // Best: signal 16, inline 64, poll 16.
        let rate = |k: Knobs| {
            let s = (k.signal_every as f64).log2();
            let i = (k.inline as f64).log2();
            let p = (k.poll_usec as f64).log2();
            1e8 * (1.0 + 0.05 * s - 0.02 * (i - 6.0).powi(2) - 0.03 * (p - 4.0).powi(2))
        };
        let w = Duration::from_millis(100);
        let mut t = ConnTuning::new(dir.path());
        let mut now = Instant::now();
        let mut knobs = t.admit(ip, DEFAULTS, now);
        let mut total = StreamStats::default();
        let mut last_saves = Vec::new();
        for _ in 0..300 {
            now += w;
            let bytes = (rate(knobs) * w.as_secs_f64()) as u64;
            total.bytes_written += bytes;
            total.writes += bytes / 1000;
            let (changed, saves) = t.tick(&[(1, ip, total)], w, DEFAULTS, now);
            for (host, k) in changed {
                assert_eq!(host, ip);
                knobs = k;
            }
            if !saves.is_empty() {
                last_saves = saves;
            }
        }
        assert_eq!(
            knobs,
            Knobs {
                signal_every: 16,
                inline: 64,
                poll_usec: 16
            }
        );
        for s in last_saves {
            crate::persistence::write_atomically(&s.path, s.text.as_bytes()).unwrap();
        }
        let mut again = ConnTuning::new(dir.path());
        let k = again.admit(ip, DEFAULTS, Instant::now());
        assert_eq!(k, knobs);
        assert_eq!(again.hosts[&ip].start, Start::Warm);
    }
}
