//! Results in the three forms people read them: an aligned table on the
//! terminal, CSV for spreadsheets, and JSON with the full configuration for
//! tools. All three come from one [`PhaseResult`] so they cannot disagree.

use crate::engine::PhaseStats;
use crate::workload::OpKind;
use serde::Serialize;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// The summary of one operation type (or of all, `TOTAL`).
#[derive(Debug, Clone, Serialize)]
pub struct OpResult {
    pub op: String,
    pub count: u64,
    pub errors: u64,
    pub not_found: u64,
    pub mismatches: u64,
    pub ops_per_sec: f64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// Throughput in one interval.
#[derive(Debug, Clone, Serialize)]
pub struct TimelinePoint {
    /// End of the interval, seconds since the phase started.
    pub t_sec: f64,
    pub ops_per_sec: f64,
}

/// The summary of one phase against one server.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub server: String,
    pub phase: String,
    /// Bytes per record.
    pub value_size: usize,
    pub elapsed_sec: f64,
    pub measured_sec: f64,
    pub ops: Vec<OpResult>,
    pub timeline: Vec<TimelinePoint>,
    pub error_samples: Vec<String>,
    /// Latency CDFs per operation type, for plots: (latency µs, fraction).
    #[serde(skip)]
    pub cdf: Vec<(String, Vec<(f64, f64)>)>,
}

impl PhaseResult {
    pub fn from_stats(
        server: &str,
        phase: &str,
        value_size: usize,
        stats: &PhaseStats,
    ) -> PhaseResult {
        let secs = stats.measured.as_secs_f64().max(1e-9);
        let mut ops = Vec::new();
        let mut cdf = Vec::new();
        let mut total = stats.hist[0].clone();
        total.reset();
        let mut sums = [0u64; 4];
        for kind in OpKind::ALL {
            let i = kind.index();
            let h = &stats.hist[i];
            if stats.count[i] == 0 && stats.errors[i] == 0 {
                continue;
            }
            total.add(h).expect("same bounds");
            sums[0] += stats.count[i];
            sums[1] += stats.errors[i];
            sums[2] += stats.not_found[i];
            sums[3] += stats.mismatches[i];
            ops.push(op_result(kind.name(), h, stats, i, secs));
            cdf.push((kind.name().to_string(), cdf_points(h)));
        }
        if ops.len() > 1 {
            let mut t = op_result("TOTAL", &total, stats, 0, secs);
            t.count = sums[0];
            t.errors = sums[1];
            t.not_found = sums[2];
            t.mismatches = sums[3];
            t.ops_per_sec = sums[0] as f64 / secs;
            ops.push(t);
        }
        let (interval, buckets) = stats.timeline_per_interval();
        let width = interval.as_secs_f64();
        let elapsed = stats.elapsed.as_secs_f64();
        let last = buckets.len().saturating_sub(1);
        let timeline = buckets
            .iter()
            .enumerate()
            .map(|(i, n)| {
                // The last interval is cut short by the end of the phase.
                let end = if i == last && elapsed > i as f64 * width {
                    elapsed.min((i + 1) as f64 * width)
                } else {
                    (i + 1) as f64 * width
                };
                let span = (end - i as f64 * width).max(width / 100.0);
                TimelinePoint {
                    t_sec: end,
                    ops_per_sec: *n as f64 / span,
                }
            })
            .collect();
        PhaseResult {
            server: server.to_string(),
            phase: phase.to_string(),
            value_size,
            elapsed_sec: stats.elapsed.as_secs_f64(),
            measured_sec: stats.measured.as_secs_f64(),
            ops,
            timeline,
            error_samples: stats.error_samples.clone(),
            cdf,
        }
    }

    pub fn op(&self, name: &str) -> Option<&OpResult> {
        self.ops.iter().find(|o| o.op == name)
    }

    /// The TOTAL row, or the only row.
    pub fn overall(&self) -> Option<&OpResult> {
        self.op("TOTAL").or(self.ops.first())
    }
}

fn op_result(
    name: &str,
    h: &hdrhistogram::Histogram<u64>,
    stats: &PhaseStats,
    i: usize,
    secs: f64,
) -> OpResult {
    let q = |p: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(p)
        }
    };
    OpResult {
        op: name.to_string(),
        count: stats.count[i],
        errors: stats.errors[i],
        not_found: stats.not_found[i],
        mismatches: stats.mismatches[i],
        ops_per_sec: stats.count[i] as f64 / secs,
        mean_us: if h.is_empty() { 0.0 } else { h.mean() },
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: if h.is_empty() { 0 } else { h.max() },
    }
}

fn cdf_points(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    let total = h.len().max(1) as f64;
    h.iter_recorded()
        .map(|v| {
            (
                h.highest_equivalent(v.value_iterated_to()) as f64,
                v.count_since_last_iteration() as f64,
            )
        })
        .scan(0.0, |acc, (lat, n)| {
            *acc += n;
            Some((lat.max(1.0), *acc / total))
        })
        .collect()
}

/// An aligned table of every phase's operation rows.
pub fn table(results: &[PhaseResult]) -> String {
    let header = [
        "server",
        "phase",
        "bytes",
        "op",
        "count",
        "ops/s",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "errors",
        "missing",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in results {
        for o in &r.ops {
            rows.push(vec![
                r.server.clone(),
                r.phase.clone(),
                r.value_size.to_string(),
                o.op.clone(),
                o.count.to_string(),
                format!("{:.0}", o.ops_per_sec),
                o.p50_us.to_string(),
                o.p90_us.to_string(),
                o.p99_us.to_string(),
                o.p999_us.to_string(),
                o.max_us.to_string(),
                (o.errors + o.mismatches).to_string(),
                o.not_found.to_string(),
            ]);
        }
    }
    let header: Vec<String> = header.iter().map(|s| s.to_string()).collect();
    let mut out = render(&header, &rows);
    for r in results {
        for e in &r.error_samples {
            let _ = writeln!(out, "{} {}: {e}", r.server, r.phase);
        }
    }
    out
}

/// Renders rows with each column as wide as its widest cell; text columns
/// left-aligned, numbers right-aligned.
pub fn render(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (c, cell) in r.iter().enumerate().take(cols) {
            width[c] = width[c].max(cell.chars().count());
        }
    }
    let numeric = |c: usize| {
        rows.iter()
            .all(|r| r[c].parse::<f64>().is_ok() || r[c] == "-")
    };
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let mut parts = Vec::new();
        for (c, cell) in cells.iter().enumerate() {
            let pad = width[c] - cell.chars().count();
            if numeric(c) {
                parts.push(format!("{}{cell}", " ".repeat(pad)));
            } else {
                parts.push(format!("{cell}{}", " ".repeat(pad)));
            }
        }
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, header);
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for r in rows {
        line(&mut out, r);
    }
    out
}

/// One CSV row per (server, phase, op).
pub fn write_csv<W: io::Write>(w: W, results: &[PhaseResult]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(w);
    w.write_record([
        "server",
        "phase",
        "value_size",
        "op",
        "count",
        "errors",
        "not_found",
        "mismatches",
        "ops_per_sec",
        "mean_us",
        "p50_us",
        "p90_us",
        "p99_us",
        "p999_us",
        "max_us",
    ])?;
    for r in results {
        for o in &r.ops {
            w.write_record([
                r.server.clone(),
                r.phase.clone(),
                r.value_size.to_string(),
                o.op.clone(),
                o.count.to_string(),
                o.errors.to_string(),
                o.not_found.to_string(),
                o.mismatches.to_string(),
                format!("{:.1}", o.ops_per_sec),
                format!("{:.1}", o.mean_us),
                o.p50_us.to_string(),
                o.p90_us.to_string(),
                o.p99_us.to_string(),
                o.p999_us.to_string(),
                o.max_us.to_string(),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Throughput over time: one CSV row per (server, phase, interval).
pub fn write_timeline_csv<W: io::Write>(w: W, results: &[PhaseResult]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(w);
    w.write_record(["server", "phase", "value_size", "t_sec", "ops_per_sec"])?;
    for r in results {
        for p in &r.timeline {
            w.write_record([
                r.server.clone(),
                r.phase.clone(),
                r.value_size.to_string(),
                format!("{:.3}", p.t_sec),
                format!("{:.1}", p.ops_per_sec),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Writes `results.csv`, `timeline.csv` and `results.json` into `dir`.
pub fn write_files<C: Serialize>(
    dir: &Path,
    config: &C,
    results: &[PhaseResult],
    extra: Option<&serde_json::Value>,
) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_csv(std::fs::File::create(dir.join("results.csv"))?, results)
        .map_err(io::Error::other)?;
    write_timeline_csv(std::fs::File::create(dir.join("timeline.csv"))?, results)
        .map_err(io::Error::other)?;
    let json = json(config, results, extra);
    std::fs::write(dir.join("results.json"), serde_json::to_vec_pretty(&json)?)?;
    Ok(())
}

/// The JSON document: configuration, phases and, for comparisons, ratios.
pub fn json<C: Serialize>(
    config: &C,
    results: &[PhaseResult],
    extra: Option<&serde_json::Value>,
) -> serde_json::Value {
    let mut v = serde_json::json!({
        "tool": "ferrokv-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "config": config,
        "phases": results,
    });
    if let Some(extra) = extra {
        v["comparison"] = extra.clone();
    }
    v
}
