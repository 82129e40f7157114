//! Runs one phase (load or run) against one server: one thread per
//! connection, each keeping up to `pipeline` operations in a batch.
//!
//! ```text
//!   main thread ── progress bar, deadline ──┐
//!   conn 0: [gen batch] → write → read replies → [second stages] → record
//!   conn 1: ...                              (all share: op budget,
//!   conn N: ...                               insert counter, stop flag)
//! ```
//!
//! Open loop: with `--target-rate`, each connection owns a schedule of
//! intended start times (rate / connections apart). An operation's latency
//! is measured from its intended start, not from when the client got round
//! to sending it, so a server stall shows as the queue of operations that
//! should have been sent during it (no coordinated omission). A batch takes
//! every operation whose time has come, up to the pipeline depth. Without a
//! target rate the loop is closed and latency runs from the send.

use crate::client::{ClientError, Connection};
use crate::model::{AfterFirst, Commands, DataModel, Outcome};
use crate::workload::{OpKind, Operation, OperationGenerator, WorkloadSpec};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Highest latency the histograms track, in microseconds (one hour).
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Completions are counted in buckets this wide and summed into the
/// reported interval afterwards, so a short phase can still be plotted.
pub const TIMELINE_RESOLUTION: Duration = Duration::from_millis(10);
/// Error messages kept per phase, so a misconfigured run explains itself.
const ERROR_SAMPLES: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Insert records `0..record_count`.
    Load,
    /// The workload's mix.
    Run,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

/// How to drive one phase.
#[derive(Debug, Clone)]
pub struct PhaseConfig {
    pub phase: Phase,
    pub addr: String,
    pub model: DataModel,
    pub connections: usize,
    pub pipeline: usize,
    /// Operations per second over all connections; `None` = closed loop.
    pub target_rate: Option<f64>,
    /// Operations completing before this are not measured.
    pub warmup: Duration,
    /// Stop after this long even if operations remain.
    pub duration: Option<Duration>,
    /// Width of a reported throughput-over-time interval; `None` picks one
    /// (see [`PhaseStats::report_interval`]).
    pub interval: Option<Duration>,
    pub verify: bool,
    pub seed: u64,
    pub progress: bool,
}

/// Key numbers shared by all connections to one server, kept across
/// phases and comparison rounds.
#[derive(Debug)]
pub struct KeyCounters {
    /// The next key number an insert takes.
    pub next_insert: AtomicU64,
    /// Records known to exist: the load's records plus acknowledged inserts.
    pub existing: AtomicU64,
}

impl KeyCounters {
    /// Counters for a server that holds `loaded` records.
    pub fn new(loaded: u64) -> KeyCounters {
        KeyCounters {
            next_insert: AtomicU64::new(loaded),
            existing: AtomicU64::new(loaded),
        }
    }
}

/// Mergeable raw measurements of a phase.
#[derive(Debug, Clone)]
pub struct PhaseStats {
    pub hist: Vec<Histogram<u64>>,
    pub count: [u64; 5],
    pub errors: [u64; 5],
    pub not_found: [u64; 5],
    pub mismatches: [u64; 5],
    /// Completed operations per [`TIMELINE_RESOLUTION`] since the phase
    /// started.
    pub timeline: Vec<u64>,
    /// The interval asked for, if any.
    pub interval: Option<Duration>,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Wall time after the warm-up: the denominator of throughput.
    pub measured: Duration,
    pub error_samples: Vec<String>,
}

impl PhaseStats {
    pub fn new(interval: Option<Duration>) -> PhaseStats {
        PhaseStats {
            hist: (0..5).map(|_| new_histogram()).collect(),
            count: [0; 5],
            errors: [0; 5],
            not_found: [0; 5],
            mismatches: [0; 5],
            timeline: Vec::new(),
            interval,
            elapsed: Duration::ZERO,
            measured: Duration::ZERO,
            error_samples: Vec::new(),
        }
    }

    /// Adds another connection's (or round's) measurements. Timelines are
    /// added bucket by bucket; durations are left to the caller.
    pub fn merge(&mut self, other: &PhaseStats) {
        for i in 0..5 {
            self.hist[i]
                .add(&other.hist[i])
                .expect("same histogram bounds");
            self.count[i] += other.count[i];
            self.errors[i] += other.errors[i];
            self.not_found[i] += other.not_found[i];
            self.mismatches[i] += other.mismatches[i];
        }
        if self.timeline.len() < other.timeline.len() {
            self.timeline.resize(other.timeline.len(), 0);
        }
        for (a, b) in self.timeline.iter_mut().zip(&other.timeline) {
            *a += b;
        }
        for e in &other.error_samples {
            if self.error_samples.len() < ERROR_SAMPLES {
                self.error_samples.push(e.clone());
            }
        }
    }

    /// Appends a later round's timeline after this one's.
    pub fn append_rounds(&mut self, other: &PhaseStats) {
        let timeline = std::mem::take(&mut self.timeline);
        // The next round's buckets start after this round's last (partial)
        // bucket: count that bucket's full width in the elapsed time.
        let covered = TIMELINE_RESOLUTION * timeline.len() as u32;
        self.elapsed = self.elapsed.max(covered) + other.elapsed;
        self.merge(other);
        let mut joined = timeline;
        joined.extend_from_slice(&other.timeline);
        self.timeline = joined;
        self.measured += other.measured;
    }

    /// The interval throughput is reported in: the one asked for, else one
    /// second, or for a phase shorter than 20 s a twentieth of it (a
    /// multiple of the resolution).
    pub fn report_interval(&self) -> Duration {
        let res = TIMELINE_RESOLUTION.as_millis() as u64;
        let asked = match self.interval {
            Some(i) => i.as_millis() as u64,
            None => {
                let span = self.timeline.len() as u64 * res;
                (span / 20).clamp(res, 1000)
            }
        };
        Duration::from_millis(asked.div_ceil(res).max(1) * res)
    }

    /// Completions per reported interval.
    pub fn timeline_per_interval(&self) -> (Duration, Vec<u64>) {
        let interval = self.report_interval();
        let per = (interval.as_millis() / TIMELINE_RESOLUTION.as_millis()).max(1) as usize;
        let sums = self.timeline.chunks(per).map(|c| c.iter().sum()).collect();
        (interval, sums)
    }

    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }

    pub fn total_mismatches(&self) -> u64 {
        self.mismatches.iter().sum()
    }

    pub fn total_count(&self) -> u64 {
        self.count.iter().sum()
    }

    fn record(&mut self, op: &Operation, outcome: &Outcome, latency: Duration, measured: bool) {
        let i = op.kind.index();
        if let Some(e) = &outcome.error {
            self.errors[i] += 1;
            if self.error_samples.len() < ERROR_SAMPLES {
                self.error_samples.push(format!("{}: {e}", op.kind.name()));
            }
        }
        if !outcome.found && op.kind != OpKind::Insert {
            self.not_found[i] += 1;
        }
        if outcome.mismatch {
            self.mismatches[i] += 1;
        }
        if measured {
            self.count[i] += 1;
            let us = (latency.as_nanos() / 1000) as u64;
            self.hist[i].saturating_record(us.clamp(1, MAX_LATENCY_US));
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// Why a phase could not finish.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("connection {conn}: {source}")]
    Client { conn: usize, source: ClientError },
}

/// State shared by the connections of one phase.
struct Shared<'a> {
    cfg: &'a PhaseConfig,
    spec: &'a WorkloadSpec,
    keys: &'a KeyCounters,
    start: Instant,
    /// Run phase: operations handed out so far.
    issued: AtomicU64,
    completed: AtomicU64,
    stop: AtomicBool,
}

/// Runs one phase and returns its merged measurements.
pub fn run_phase(
    cfg: &PhaseConfig,
    spec: &WorkloadSpec,
    keys: &KeyCounters,
) -> Result<PhaseStats, PhaseError> {
    if cfg.phase == Phase::Load {
        keys.next_insert.store(0, Ordering::SeqCst);
        keys.existing.store(0, Ordering::SeqCst);
    }
    let connections = cfg.connections.max(1);
    // Connect before the clock starts.
    let mut conns = Vec::with_capacity(connections);
    for conn in 0..connections {
        conns.push(
            Connection::connect(&cfg.addr).map_err(|source| PhaseError::Client { conn, source })?,
        );
    }
    let shared = Shared {
        cfg,
        spec,
        keys,
        start: Instant::now(),
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    };
    let total = match cfg.phase {
        Phase::Load => spec.record_count,
        Phase::Run => spec.operation_count,
    };
    let bar = progress_bar(cfg, total);
    let results: Vec<(Result<PhaseStats, PhaseError>, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(i, conn)| {
                let shared = &shared;
                s.spawn(move || {
                    let r = connection_loop(shared, i, conn)
                        .map_err(|source| PhaseError::Client { conn: i, source });
                    if r.is_err() {
                        shared.stop.store(true, Ordering::SeqCst);
                    }
                    (r, Instant::now())
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            if let Some(bar) = &bar {
                match cfg.duration {
                    Some(d) if total == u64::MAX => {
                        bar.set_position(shared.start.elapsed().min(d).as_millis() as u64)
                    }
                    _ => bar.set_position(shared.completed.load(Ordering::Relaxed)),
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("connection thread panicked"))
            .collect()
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    // The phase ends when its last connection does, not when the progress
    // loop above next wakes up.
    let end = results
        .iter()
        .map(|(_, t)| *t)
        .max()
        .unwrap_or(shared.start);
    let elapsed = end - shared.start;
    let mut stats = PhaseStats::new(cfg.interval);
    for (r, _) in results {
        stats.merge(&r?);
    }
    stats.elapsed = elapsed;
    stats.measured = elapsed.saturating_sub(cfg.warmup);
    if cfg.phase == Phase::Load {
        // Each connection claimed one key number past the end.
        keys.next_insert.store(spec.record_count, Ordering::SeqCst);
        keys.existing.store(spec.record_count, Ordering::SeqCst);
    }
    Ok(stats)
}

fn progress_bar(cfg: &PhaseConfig, total: u64) -> Option<indicatif::ProgressBar> {
    if !cfg.progress {
        return None;
    }
    let (len, unit) = match cfg.duration {
        Some(d) if total == u64::MAX => (d.as_millis() as u64, "ms"),
        _ => (total, "ops"),
    };
    let bar = indicatif::ProgressBar::new(len);
    let template = format!(
        "{} {{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit} ({{eta}})",
        cfg.phase.name()
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    Some(bar)
}

/// A planned operation and the instant its latency is measured from.
struct InFlight {
    op: Operation,
    intended: Instant,
    first_replies: usize,
    /// Replies of the second stage, 0 when there is none.
    second_replies: usize,
    first_outcome: Outcome,
    done: Option<(Outcome, Instant)>,
}

fn connection_loop(
    shared: &Shared<'_>,
    index: usize,
    mut conn: Connection,
) -> Result<PhaseStats, ClientError> {
    let cfg = shared.cfg;
    let spec = shared.spec;
    let mut stats = PhaseStats::new(cfg.interval);
    let mut rng = SmallRng::seed_from_u64(
        cfg.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ cfg.phase as u64,
    );
    let mut generator = OperationGenerator::new(spec);
    let mut commands = Commands::new(cfg.model, &spec.layout, cfg.verify);
    let connections = cfg.connections.max(1) as u32;
    let step = cfg
        .target_rate
        .filter(|r| *r > 0.0)
        .map(|r| Duration::from_secs_f64(connections as f64 / r));
    let mut next_intended =
        shared.start + step.map_or(Duration::ZERO, |s| s * index as u32 / connections);
    let deadline = cfg.duration.map(|d| shared.start + d);
    let measure_from = shared.start + cfg.warmup;
    let pipeline = cfg.pipeline.max(1);
    let mut batch: Vec<InFlight> = Vec::with_capacity(pipeline);
    let mut replies: Vec<ferrokv_resp::Frame> = Vec::new();
    let mut exhausted = false;

    while !exhausted {
        batch.clear();
        while batch.len() < pipeline {
            if shared.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d)
            {
                exhausted = true;
                break;
            }
            let intended = match step {
                Some(step) => {
                    let now = Instant::now();
                    if next_intended > now {
                        if !batch.is_empty() {
                            break;
                        }
                        let wait = next_intended - now;
                        if deadline.is_some_and(|d| next_intended >= d) {
                            exhausted = true;
                            break;
                        }
                        std::thread::sleep(wait);
                    }
                    let t = next_intended;
                    next_intended += step;
                    t
                }
                None => Instant::now(),
            };
            let Some(op) = next_operation(shared, &mut generator, &mut rng) else {
                exhausted = true;
                break;
            };
            batch.push(InFlight {
                op,
                intended,
                first_replies: 0,
                second_replies: 0,
                first_outcome: Outcome::default(),
                done: None,
            });
        }
        if batch.is_empty() {
            break;
        }

        // First stage of every operation in one write.
        for f in batch.iter_mut() {
            f.first_replies = commands.queue_first(&mut conn, &f.op);
        }
        conn.flush()?;
        let mut any_second = false;
        for f in batch.iter_mut() {
            replies.clear();
            for _ in 0..f.first_replies {
                replies.push(conn.read_reply()?);
            }
            match commands.after_first(&mut conn, &f.op, &replies) {
                AfterFirst::Done(outcome) => f.done = Some((outcome, Instant::now())),
                AfterFirst::Second { replies, first } => {
                    f.second_replies = replies;
                    f.first_outcome = first;
                    any_second = true;
                }
            }
        }
        if any_second {
            conn.flush()?;
            for f in batch.iter_mut().filter(|f| f.done.is_none()) {
                replies.clear();
                for _ in 0..f.second_replies {
                    replies.push(conn.read_reply()?);
                }
                let first = std::mem::take(&mut f.first_outcome);
                let outcome = commands.after_second(&f.op, first, &replies);
                f.done = Some((outcome, Instant::now()));
            }
        }

        for f in &batch {
            let (outcome, completed) = f.done.as_ref().expect("every operation completed");
            let mut outcome = outcome.clone();
            if f.op.kind == OpKind::Insert && outcome.error.is_none() {
                shared
                    .keys
                    .existing
                    .fetch_max(f.op.keynum + 1, Ordering::Relaxed);
            }
            // A loaded record that is missing is wrong, not merely absent.
            if cfg.verify
                && !outcome.found
                && f.op.kind != OpKind::Insert
                && f.op.kind != OpKind::Scan
                && f.op.keynum < spec.record_count
            {
                outcome.mismatch = true;
            }
            let latency = completed.saturating_duration_since(f.intended);
            stats.record(&f.op, &outcome, latency, *completed >= measure_from);
            let bucket = (completed.saturating_duration_since(shared.start).as_nanos()
                / TIMELINE_RESOLUTION.as_nanos()) as usize;
            if stats.timeline.len() <= bucket {
                stats.timeline.resize(bucket + 1, 0);
            }
            stats.timeline[bucket] += 1;
        }
        shared
            .completed
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
    }
    Ok(stats)
}

/// The next operation of the phase, or `None` when its budget is spent.
fn next_operation(
    shared: &Shared<'_>,
    generator: &mut OperationGenerator,
    rng: &mut SmallRng,
) -> Option<Operation> {
    let spec = shared.spec;
    match shared.cfg.phase {
        Phase::Load => {
            let keynum = shared.keys.next_insert.fetch_add(1, Ordering::Relaxed);
            if keynum >= spec.record_count {
                return None;
            }
            Some(Operation {
                kind: OpKind::Insert,
                keynum,
                field: 0,
                scan_length: 0,
            })
        }
        Phase::Run => {
            if shared.issued.fetch_add(1, Ordering::Relaxed) >= spec.operation_count {
                return None;
            }
            let existing = shared.keys.existing.load(Ordering::Relaxed).max(1);
            Some(generator.next(rng, existing, || {
                shared.keys.next_insert.fetch_add(1, Ordering::Relaxed)
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_is_summed_into_the_reported_interval() {
        let mut stats = PhaseStats::new(Some(Duration::from_millis(1000)));
        stats.timeline = vec![1; 250];
        let (interval, sums) = stats.timeline_per_interval();
        assert_eq!(interval, Duration::from_secs(1));
        assert_eq!(sums, vec![100, 100, 50]);
    }

    #[test]
    fn short_phases_get_twenty_intervals() {
        let mut stats = PhaseStats::new(None);
        stats.timeline = vec![1; 200]; // 2 s
        assert_eq!(stats.report_interval(), Duration::from_millis(100));
        stats.timeline = vec![1; 6000]; // 60 s
        assert_eq!(stats.report_interval(), Duration::from_secs(1));
        stats.timeline = vec![1; 3]; // 30 ms
        assert_eq!(stats.report_interval(), TIMELINE_RESOLUTION);
    }
}
