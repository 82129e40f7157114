//! The latency family: the latency monitor (`LATENCY LATEST`, `HISTORY`,
//! `RESET`, `DOCTOR`, `HELP`) and the per-command latency distributions
//! behind `INFO latencystats`.
//!
//! Two different tools, as in Redis. The *monitor* keeps, per event
//! (`command`, `fast-command`), at most one sample a second — the worst of
//! that second — in a ring of [`TS_LEN`] samples, plus the all-time
//! maximum; it costs nothing until `latency-monitor-threshold` (ms) is set,
//! and only spikes reach it. The *distributions* record every command's
//! duration into an HdrHistogram (nanoseconds, 1 ns .. 1 s, 2 significant
//! digits, as Redis's `CONFIG_LATENCY_HISTOGRAM_*`), allocated on a
//! command's first call so the many commands never called cost nothing.
//!
//! # Hostile input
//!
//! Audited (issue #15): `LATENCY HISTORY`/`GRAPH` read a fixed ring of
//! 160 samples; `LATENCY HISTOGRAM` answers per command named (or the
//! table); `RESET` is per event named. No client-chosen number sizes work.

use super::flags::*;
use super::{reply_help, CommandSpec, Ctx};
use ferrokv_resp::Args;
use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const TS_LEN: usize = 160;
/// Bounds of the per-command histograms, in nanoseconds.
pub const HISTOGRAM_MIN_NS: u64 = 1;
pub const HISTOGRAM_MAX_NS: u64 = 1_000_000_000;
pub const HISTOGRAM_SIGFIG: u8 = 2;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("server")
        .since("2.8.13")
}

pub static COMMANDS: &[CommandSpec] = &[cmd("latency", -2, 0, latency_help)
    .doc("A container for latency diagnostics commands.", "")
    .subs(SUBS)];

static SUBS: &[CommandSpec] = &[
    cmd(
        "latency|latest",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        latency_latest,
    )
    .doc("Returns the latest latency samples for all events.", ""),
    cmd(
        "latency|history",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        latency_history,
    )
    .doc("Returns timestamp-latency samples for an event.", "event"),
    cmd(
        "latency|reset",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        latency_reset,
    )
    .doc(
        "Resets the latency data for one or more events.",
        "[event [event ...]]",
    ),
    cmd(
        "latency|doctor",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        latency_doctor,
    )
    .doc("Returns a human-readable latency analysis report.", ""),
    cmd(
        "latency|graph",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        latency_graph,
    )
    .doc("Returns a latency graph for an event.", "event"),
    cmd(
        "latency|histogram",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        latency_histogram,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the number of commands with latency information being retrieved.")
    .doc(
        "Returns the cumulative distribution of latencies of a subset or all commands.",
        "[command [command ...]]",
    ),
    cmd("latency|help", 2, LOADING | STALE, latency_help)
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// One second's worst latency of an event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds; 0 marks a slot never written.
    pub time: i64,
    pub latency_ms: u64,
}

/// An event's ring of samples (Redis's `latencyTimeSeries`).
#[derive(Debug, Clone)]
pub struct TimeSeries {
    /// The slot the next new second goes to.
    idx: usize,
    pub max_ms: u64,
    samples: Box<[Sample; TS_LEN]>,
}

impl TimeSeries {
    fn new() -> Self {
        TimeSeries {
            idx: 0,
            max_ms: 0,
            samples: Box::new([Sample::default(); TS_LEN]),
        }
    }

    /// Redis's `latencyAddSample`: a second already sampled keeps the
    /// worse of its sample and this one.
    fn add(&mut self, now_secs: i64, latency_ms: u64) {
        self.max_ms = self.max_ms.max(latency_ms);
        let prev = (self.idx + TS_LEN - 1) % TS_LEN;
        if self.samples[prev].time == now_secs {
            let p = &mut self.samples[prev];
            p.latency_ms = p.latency_ms.max(latency_ms);
            return;
        }
        self.samples[self.idx] = Sample {
            time: now_secs,
            latency_ms,
        };
        self.idx = (self.idx + 1) % TS_LEN;
    }

    pub fn latest(&self) -> Sample {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }

    /// The samples written, oldest first.
    pub fn history(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }
}

/// The latency monitor's events, in the order they first happened.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    events: Vec<(String, TimeSeries)>,
}

impl LatencyMonitor {
    /// Redis's `latencyAddSampleIfNeeded`: a threshold of 0 disables the
    /// monitor; otherwise latencies at or above it are sampled, stamped
    /// with the clock read then (`now_secs` is only called for a spike).
    pub fn add_if_needed(
        &mut self,
        threshold_ms: u64,
        event: &str,
        now_secs: impl FnOnce() -> i64,
        ms: u64,
    ) {
        if threshold_ms == 0 || ms < threshold_ms {
            return;
        }
        let now_secs = now_secs();
        let ts = match self.events.iter().position(|(e, _)| e == event) {
            Some(i) => &mut self.events[i].1,
            None => {
                self.events.push((event.to_string(), TimeSeries::new()));
                &mut self.events.last_mut().expect("just pushed").1
            }
        };
        ts.add(now_secs, ms);
    }

    pub fn events(&self) -> impl Iterator<Item = (&str, &TimeSeries)> {
        self.events.iter().map(|(e, ts)| (e.as_str(), ts))
    }

    /// Looks an event up by its exact name (as Redis's `LATENCY HISTORY`).
    pub fn get(&self, event: &[u8]) -> Option<&TimeSeries> {
        self.events
            .iter()
            .find(|(e, _)| e.as_bytes() == event)
            .map(|(_, ts)| ts)
    }

    /// Drops one event, named in any case (as Redis's `LATENCY RESET`).
    /// Returns how many were dropped.
    pub fn reset_event(&mut self, event: &[u8]) -> usize {
        let before = self.events.len();
        self.events
            .retain(|(e, _)| !e.as_bytes().eq_ignore_ascii_case(event));
        before - self.events.len()
    }

    pub fn reset_all(&mut self) -> usize {
        let n = self.events.len();
        self.events.clear();
        n
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// Per-command execution-time distributions, indexed like the command table.
#[derive(Debug, Default)]
pub struct CommandLatencies {
    histograms: Vec<Option<Box<Histogram<u64>>>>,
}

impl CommandLatencies {
    pub fn new(commands: usize) -> Self {
        CommandLatencies {
            histograms: (0..commands).map(|_| None).collect(),
        }
    }

    /// Records one call; durations outside 1 ns .. 1 s are clamped, as
    /// Redis's `updateCommandLatencyHistogram` clamps them.
    pub fn record(&mut self, idx: usize, duration_ns: u64) {
        let Some(slot) = self.histograms.get_mut(idx) else {
            return;
        };
        let h = slot.get_or_insert_with(|| {
            Box::new(
                Histogram::new_with_bounds(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS, HISTOGRAM_SIGFIG)
                    .expect("valid histogram bounds"),
            )
        });
        let v = duration_ns.clamp(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS);
        h.saturating_record(v);
    }

    pub fn get(&self, idx: usize) -> Option<&Histogram<u64>> {
        self.histograms.get(idx).and_then(|h| h.as_deref())
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset(&mut self) {
        for h in self.histograms.iter_mut() {
            *h = None;
        }
    }
}

/// `LATENCY HISTOGRAM`'s buckets: (µs, cumulative calls) at powers of two
/// from 1024 ns, as Redis's `fillCommandCDF` walks its histogram with a
/// logarithmic iterator. Each level is reported as the highest value of
/// the histogram bucket holding it (so 2^25 ns shows as 33816 µs), and
/// only levels that add calls are listed.
pub fn cumulative_buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let recorded: Vec<(u64, u64)> = h
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    let mut out: Vec<(u64, u64)> = Vec::new();
    let (mut i, mut cumulative, mut level) = (0, 0u64, 1024u64);
    while i < recorded.len() {
        let top = h.highest_equivalent(level);
        while i < recorded.len() && recorded[i].0 <= top {
            cumulative += recorded[i].1;
            i += 1;
        }
        if cumulative > out.last().map_or(0, |b| b.1) {
            out.push((top / 1000, cumulative));
        }
        level = level.saturating_mul(2);
    }
    out
}

/// One `INFO latencystats` line's value: `p50=1.003,p99=...` in µs with
/// three decimals, as Redis's `fillPercentileDistributionLatencies`.
pub fn percentiles_field(h: &Histogram<u64>, percentiles: &[f64]) -> String {
    let mut s = String::new();
    for (j, p) in percentiles.iter().enumerate() {
        if j > 0 {
            s.push(',');
        }
        let v = h.value_at_percentile(p.min(100.0)) as f64 / 1000.0;
        let _ = write!(s, "p{}={v:.3}", format_percentile(*p));
    }
    s
}

/// A percentile as Redis prints it (`%f` with trailing zeros trimmed).
pub fn format_percentile(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// LATENCY LATEST
fn latency_latest(ctx: &mut Ctx, _args: Args) {
    let out = &mut ctx.client.out;
    let events: Vec<_> = ctx.srv.latency_monitor.events().collect();
    out.array(events.len());
    for (event, ts) in events {
        let last = ts.latest();
        out.array(4);
        out.bulk(event.as_bytes());
        out.int(last.time);
        out.int(last.latency_ms as i64);
        out.int(ts.max_ms as i64);
    }
}

/// LATENCY HISTORY event
fn latency_history(ctx: &mut Ctx, args: Args) {
    let out = &mut ctx.client.out;
    let Some(ts) = ctx.srv.latency_monitor.get(args.get(2)) else {
        out.array(0);
        return;
    };
    let samples: Vec<Sample> = ts.history().collect();
    out.array(samples.len());
    for s in samples {
        out.array(2);
        out.int(s.time);
        out.int(s.latency_ms as i64);
    }
}

/// LATENCY RESET [event ...]
fn latency_reset(ctx: &mut Ctx, args: Args) {
    let monitor = &mut ctx.srv.latency_monitor;
    let n = if args.len() == 2 {
        monitor.reset_all()
    } else {
        args.iter().skip(2).map(|e| monitor.reset_event(e)).sum()
    };
    ctx.client.out.int(n as i64);
}

/// LATENCY HISTOGRAM [command ...]
fn latency_histogram(ctx: &mut Ctx, args: Args) {
    let table = &ctx.srv.commands;
    // Every command with data, or the named ones (a container brings its
    // subcommands); unknown names are skipped, as Redis skips them.
    let indexes: Vec<usize> = if args.len() == 2 {
        (0..table.len()).collect()
    } else {
        let mut v = Vec::new();
        for name in args.iter().skip(2) {
            let Some(i) = table.lookup(name) else {
                continue;
            };
            v.push(i);
            let spec = table.specs[i];
            v.extend(
                spec.subcommands
                    .iter()
                    .filter_map(|s| table.lookup(s.name.as_bytes())),
            );
        }
        v
    };
    let with_data: Vec<(usize, &Histogram<u64>)> = indexes
        .into_iter()
        .filter_map(|i| ctx.srv.latency_stats.get(i).map(|h| (i, h)))
        .collect();
    let out = &mut ctx.client.out;
    out.map(with_data.len());
    for (i, h) in with_data {
        out.bulk(table.specs[i].name.as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(h.len() as i64);
        out.bulk(b"histogram_usec");
        let buckets = cumulative_buckets(h);
        out.map(buckets.len());
        for (usec, calls) in buckets {
            out.int(usec as i64);
            out.int(calls as i64);
        }
    }
}

/// LATENCY GRAPH event
fn latency_graph(ctx: &mut Ctx, args: Args) {
    let event = args.get(2);
    match ctx.srv.latency_monitor.get(event) {
        Some(ts) => {
            let name = String::from_utf8_lossy(event);
            let g = graph(&name, ts, ctx.now_ms / 1000);
            ctx.client.out.verbatim(g.as_bytes());
        }
        None => {
            let mut msg = b"ERR No samples available for event '".to_vec();
            msg.extend_from_slice(event);
            msg.push(b'\'');
            ctx.client.out.error_bytes(&msg);
        }
    }
}

/// Columns of a `LATENCY GRAPH` (Redis's `LATENCY_GRAPH_COLS`).
const GRAPH_COLS: usize = 80;
const GRAPH_ROWS: usize = 4;

/// `LATENCY GRAPH`'s text: a header, a rule, and Redis's filled sparkline
/// (`sparklineRender` with `SPARKLINE_FILL`, 4 rows, 80 columns per
/// block), each sample labelled vertically with how long ago it was.
pub fn graph(event: &str, ts: &TimeSeries, now_secs: i64) -> String {
    let samples: Vec<Sample> = ts.history().collect();
    let min = samples.iter().map(|s| s.latency_ms).min().unwrap_or(0);
    let max = samples.iter().map(|s| s.latency_ms).max().unwrap_or(0);
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        ts.max_ms
    );
    out.push_str(&"-".repeat(GRAPH_COLS));
    out.push('\n');
    let labels: Vec<String> = samples
        .iter()
        .map(|s| {
            let ago = now_secs - s.time;
            match ago {
                a if a < 60 => format!("{a}s"),
                a if a < 3600 => format!("{}m", a / 60),
                a if a < 86400 => format!("{}h", a / 3600),
                a => format!("{}d", a / 86400),
            }
        })
        .collect();
    for (block, start) in (0..samples.len()).step_by(GRAPH_COLS).enumerate() {
        if block > 0 {
            out.push('\n');
        }
        let end = (start + GRAPH_COLS).min(samples.len());
        render_sparkline(
            &mut out,
            &samples[start..end],
            &labels[start..end],
            min,
            max,
        );
    }
    out
}

/// One block of Redis's `sparklineRenderRange` with `SPARKLINE_FILL`.
fn render_sparkline(out: &mut String, samples: &[Sample], labels: &[String], min: u64, max: u64) {
    const FILL: [u8; 3] = *b"_o#";
    const LABEL_MARGIN_TOP: usize = 1;
    let steps = (FILL.len() * GRAPH_ROWS) as i64;
    let relmax = if max == min { 1.0 } else { (max - min) as f64 };
    let step_of = |s: &Sample| {
        let relval = (s.latency_ms - min) as f64;
        // C's `(int)(relval*steps)/relmax`, truncated again into an int.
        let step = ((relval * steps as f64) as i64 as f64 / relmax) as i64;
        step.clamp(0, steps - 1)
    };
    let mut row = 0;
    loop {
        let mut chars = vec![b' '; samples.len()];
        let mut more = false;
        for (j, s) in samples.iter().enumerate() {
            if row < GRAPH_ROWS {
                more = true;
                let charidx = step_of(s) - ((GRAPH_ROWS - row - 1) * FILL.len()) as i64;
                if (0..FILL.len() as i64).contains(&charidx) {
                    chars[j] = FILL[charidx as usize];
                } else if charidx >= FILL.len() as i64 {
                    chars[j] = b'|';
                }
            } else if row - GRAPH_ROWS < LABEL_MARGIN_TOP {
                more = true;
                break;
            } else if let Some(&c) = labels[j]
                .as_bytes()
                .get(row - GRAPH_ROWS - LABEL_MARGIN_TOP)
            {
                more = true;
                chars[j] = c;
            }
        }
        if !more {
            break;
        }
        row += 1;
        out.push_str(&String::from_utf8_lossy(&chars));
        out.push('\n');
    }
}

/// LATENCY DOCTOR
fn latency_doctor(ctx: &mut Ctx, _args: Args) {
    let report = doctor_report(
        &ctx.srv.latency_monitor,
        ctx.srv.config.latency_monitor_threshold,
        ctx.srv.config.slowlog_log_slower_than,
        ctx.now_ms / 1000,
    );
    ctx.client.out.verbatim(report.as_bytes());
}

/// The `LATENCY DOCTOR` text, shaped as Redis's `createLatencyReport`:
/// "monitoring is off", "nothing to report", or one numbered line per
/// event (spikes, average, mean deviation, period, worst) then advice.
pub fn doctor_report(
    monitor: &LatencyMonitor,
    threshold_ms: u64,
    slowlog_threshold_us: i64,
    now_secs: i64,
) -> String {
    if monitor.is_empty() && threshold_ms == 0 {
        return "Latency monitoring is disabled in this ferrokv instance. You may use \
                \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it.\n"
            .to_string();
    }
    if monitor.is_empty() {
        return "No latency spike was observed during the lifetime of this ferrokv instance: \
                nothing to report.\n"
            .to_string();
    }
    let mut r = String::from("Latency spikes were observed in this ferrokv instance.\n\n");
    let mut command_events = false;
    for (i, (event, ts)) in monitor.events().enumerate() {
        let samples: Vec<Sample> = ts.history().collect();
        let n = samples.len().max(1) as f64;
        let avg = samples.iter().map(|s| s.latency_ms as f64).sum::<f64>() / n;
        let mad = samples
            .iter()
            .map(|s| (s.latency_ms as f64 - avg).abs())
            .sum::<f64>()
            / n;
        let first = samples.iter().map(|s| s.time).min().unwrap_or(now_secs);
        let period = (now_secs - first).max(1) as f64 / n;
        let _ = writeln!(
            r,
            "{}. {event}: {} latency spikes (average {}ms, mean deviation {}ms, period {period:.2} sec). Worst all time event {}ms.",
            i + 1,
            samples.len(),
            avg as u64,
            mad as u64,
            ts.max_ms
        );
        command_events |= event == "command" || event == "fast-command";
    }
    r.push_str("\nAdvice:\n\n");
    if command_events {
        if slowlog_threshold_us < 0 || slowlog_threshold_us as u64 > threshold_ms * 1000 {
            let _ = writeln!(
                r,
                "- The slow log does not log every command slower than the latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.",
                threshold_ms * 1000
            );
        }
        r.push_str("- Check the slow log (SLOWLOG GET) to see which commands are too slow.\n");
        r.push_str(
            "- Deleting or expiring large objects blocks the server: split huge values into smaller ones.\n",
        );
    } else {
        r.push_str("- No advice for these events.\n");
    }
    r
}

/// LATENCY HELP
fn latency_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let mut m = LatencyMonitor::default();
        m.add_if_needed(1, "command", || 100, 5);
        m.add_if_needed(1, "command", || 100, 3);
        m.add_if_needed(1, "command", || 100, 9);
        m.add_if_needed(1, "command", || 101, 2);
        let ts = m.get(b"command").unwrap();
        let h: Vec<_> = ts.history().map(|s| (s.time, s.latency_ms)).collect();
        assert_eq!(h, vec![(100, 9), (101, 2)]);
        assert_eq!(ts.max_ms, 9);
        assert_eq!(
            ts.latest(),
            Sample {
                time: 101,
                latency_ms: 2
            }
        );
    }

    #[test]
    fn threshold_zero_disables_and_below_threshold_is_ignored() {
        let mut m = LatencyMonitor::default();
        m.add_if_needed(0, "command", || 1, 1000);
        m.add_if_needed(10, "command", || 1, 9);
        assert!(m.is_empty());
        m.add_if_needed(10, "command", || 1, 10);
        assert!(!m.is_empty());
    }

    #[test]
    fn ring_keeps_the_last_160_seconds() {
        let mut m = LatencyMonitor::default();
        for t in 1..=200 {
            m.add_if_needed(1, "command", || t, t as u64);
        }
        let ts = m.get(b"command").unwrap();
        let times: Vec<i64> = ts.history().map(|s| s.time).collect();
        assert_eq!(times, (41..=200).collect::<Vec<_>>());
        assert_eq!(ts.max_ms, 200);
    }

    #[test]
    fn history_is_case_sensitive_and_reset_is_not() {
        let mut m = LatencyMonitor::default();
        m.add_if_needed(1, "command", || 1, 5);
        m.add_if_needed(1, "fast-command", || 1, 5);
        assert!(m.get(b"COMMAND").is_none());
        assert_eq!(m.reset_event(b"COMMAND"), 1);
        assert_eq!(m.reset_event(b"nope"), 0);
        assert_eq!(m.reset_all(), 1);
    }

    #[test]
    fn percentiles_are_printed_as_redis_prints_them() {
        assert_eq!(format_percentile(50.0), "50");
        assert_eq!(format_percentile(99.9), "99.9");
        assert_eq!(format_percentile(0.5), "0.5");
        let mut l = CommandLatencies::new(1);
        l.record(0, 20_185_000);
        let h = l.get(0).unwrap();
        // 2 significant digits: the bucket's highest equivalent value.
        assert_eq!(
            percentiles_field(h, &[50.0, 99.0, 99.9]),
            "p50=20185.087,p99=20185.087,p99.9=20185.087"
        );
        l.reset();
        assert!(l.get(0).is_none());
    }

    #[test]
    fn histogram_buckets_are_reported_as_redis_reports_them() {
        let mut l = CommandLatencies::new(1);
        // Seen from redis-server 7.0.15: a ~131.5 µs and a 20.2 ms call
        // give {132: 1, 33816: 2}.
        l.record(0, 131_500);
        l.record(0, 20_185_000);
        assert_eq!(
            cumulative_buckets(l.get(0).unwrap()),
            vec![(132, 1), (33816, 2)]
        );
        let mut l = CommandLatencies::new(1);
        for ns in [500, 900, 1500, 5_000_000_000] {
            l.record(0, ns);
        }
        let b = cumulative_buckets(l.get(0).unwrap());
        assert_eq!(b[0], (1, 2));
        assert_eq!(b[1], (2, 3));
        assert_eq!(b.last().unwrap().1, 4);
    }

    #[test]
    fn graph_matches_redis_sparkline() {
        let mut m = LatencyMonitor::default();
        m.add_if_needed(1, "command", || 100, 20);
        m.add_if_needed(1, "command", || 101, 5);
        m.add_if_needed(1, "command", || 102, 12);
        let g = graph("command", m.get(b"command").unwrap(), 102);
        // As redis-server 7.0.15 drew the same three samples.
        let want = format!(
            "command - high 20 ms, low 5 ms (all time high 20 ms)\n{}\n#  \n|  \n| #\n|_|\n   \n210\nsss\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
    }

    #[test]
    fn doctor_says_when_there_is_nothing_to_report() {
        let m = LatencyMonitor::default();
        assert!(doctor_report(&m, 0, 10_000, 5).contains("disabled"));
        assert!(doctor_report(&m, 1, 10_000, 5).contains("nothing to report"));
        let mut m = LatencyMonitor::default();
        m.add_if_needed(1, "command", || 5, 20);
        let r = doctor_report(&m, 1, 10_000, 5);
        assert!(
            r.contains("1. command: 1 latency spikes (average 20ms, mean deviation 0ms, period 1.00 sec). Worst all time event 20ms."),
            "{r}"
        );
    }
}
