//! Command-line arguments and the two commands, `run` and `compare`.
//!
//! `compare` exists so that a ratio between two servers is measured under
//! the same conditions: the same operation stream (same seed per round),
//! rounds alternating which server goes first, so a noisy neighbour or a
//! thermal drift hits both servers instead of biasing one.

use crate::engine::{run_phase, KeyCounters, Phase, PhaseConfig, PhaseStats};
use crate::generator::{Distribution, ZIPFIAN_CONSTANT};
use crate::model::{server_supports_hashes, DataModel};
use crate::report::{self, PhaseResult};
use crate::workload::{Mix, RecordLayout, Workload, WorkloadSpec};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "ferrokv-bench",
    version,
    about = "YCSB-style load generator for ferrokv and any Redis-compatible server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load records, then run a workload against one server.
    Run(RunArgs),
    /// Run the same workload against several servers in alternating rounds
    /// and print their ratios.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server address: host:port (the RDMA listener's with --transport rdma),
    /// or the socket path with --transport unix (`unix:/path` and
    /// `rdma:host:port` work with either).
    #[arg(long, short = 's', default_value = "127.0.0.1:6379")]
    pub server: String,
    /// What carries the connections.
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    pub transport: Transport,
    /// Which phases to run.
    #[arg(long, value_enum, default_value_t = PhaseSelection::Both)]
    pub phase: PhaseSelection,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A server to measure, as name=host:port (repeat; the first is the
    /// baseline of the ratios).
    #[arg(long = "server", short = 's', required = true)]
    pub servers: Vec<String>,
    /// Run-phase rounds per server; each round runs --operations (or
    /// --duration) against every server in turn.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Skip the load phase (the servers already hold the records).
    #[arg(long)]
    pub no_load: bool,
    /// Compare at each of these record sizes in turn (e.g.
    /// 1024,4096,16384); overrides --value-size.
    #[arg(long, value_delimiter = ',')]
    pub value_sizes: Vec<usize>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The transport of `run`'s connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    Tcp,
    /// A Unix-domain socket (`unixsocket` of the server).
    Unix,
    /// An RDMA connection to the server's `rdma-bind`:`rdma-port` listener
    /// (ferrokv; libfabric's tcp provider unless `FI_PROVIDER` says otherwise).
    Rdma,
}

impl RunArgs {
    /// The address `client::Connection::connect` takes.
    pub fn address(&self) -> String {
        match self.transport {
            Transport::Unix if !self.server.starts_with("unix:") => format!("unix:{}", self.server),
            Transport::Rdma if !self.server.starts_with("rdma:") => format!("rdma:{}", self.server),
            _ => self.server.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PhaseSelection {
    Load,
    Run,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelChoice {
    /// Hashes if every server has hashes and sorted sets, strings otherwise.
    Auto,
    /// A hash of fields per record, a sorted-set index for scans.
    Hash,
    /// One string per record; scans are SCAN MATCH + MGET.
    String,
}

#[derive(Debug, Clone, Args, Serialize)]
pub struct WorkloadArgs {
    /// YCSB core workload: a (50/50 read/update), b (95/5 read/update),
    /// c (read only), d (read latest, 5% insert), e (scans, 5% insert),
    /// f (read-modify-write).
    #[arg(long, short = 'w', value_enum, default_value_t = Workload::A)]
    pub workload: Workload,
    /// Request distribution [default: latest for d, zipfian otherwise].
    #[arg(long, value_enum)]
    pub distribution: Option<Distribution>,
    /// Zipfian constant.
    #[arg(long, default_value_t = ZIPFIAN_CONSTANT)]
    pub zipf_theta: f64,
    /// Records inserted by the load phase.
    #[arg(long, default_value_t = 10_000)]
    pub records: u64,
    /// Operations of the run phase [default: 100000, unlimited with --duration].
    #[arg(long)]
    pub operations: Option<u64>,
    /// Stop the run phase after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Seconds at the start of the run phase that are not measured.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Bytes per record (split evenly over the fields).
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// Fields per record; with 1 and --data-model auto, records are strings.
    #[arg(long, default_value_t = 10)]
    pub fields: usize,
    /// Concurrent connections, one thread each.
    #[arg(long, short = 'c', default_value_t = 4)]
    pub connections: usize,
    /// Operations each connection sends before reading replies.
    #[arg(long, short = 'P', default_value_t = 1)]
    pub pipeline: usize,
    /// Open loop: operations per second over all connections, latency
    /// measured from each operation's intended start.
    #[arg(long)]
    pub target_rate: Option<f64>,
    /// How records are stored.
    #[arg(long, value_enum, default_value_t = ModelChoice::Auto)]
    pub data_model: ModelChoice,
    /// Longest scan (lengths are uniform in 1..=this).
    #[arg(long, default_value_t = 100)]
    pub max_scan_length: usize,
    /// Override the workload's read proportion.
    #[arg(long)]
    pub read_proportion: Option<f64>,
    /// Override the workload's update proportion.
    #[arg(long)]
    pub update_proportion: Option<f64>,
    /// Override the workload's insert proportion.
    #[arg(long)]
    pub insert_proportion: Option<f64>,
    /// Override the workload's scan proportion.
    #[arg(long)]
    pub scan_proportion: Option<f64>,
    /// Override the workload's read-modify-write proportion.
    #[arg(long)]
    pub rmw_proportion: Option<f64>,
    /// Key name prefix.
    #[arg(long, default_value = "user")]
    pub key_prefix: String,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Check every value read against the one written.
    #[arg(long)]
    pub verify: bool,
    /// Width of a throughput-over-time interval in milliseconds (a multiple
    /// of 10) [default: 1000, or a twentieth of a phase shorter than 20 s].
    #[arg(long)]
    pub interval_ms: Option<u64>,
    /// FLUSHALL each server before loading (it deletes every key!).
    #[arg(long)]
    pub flush: bool,
}

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Directory for results.csv, timeline.csv, results.json,
    /// throughput.png and latency_cdf.png.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Write no PNG plots into --out.
    #[arg(long)]
    pub no_plots: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Phase(#[from] crate::engine::PhaseError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("writing results: {0}")]
    Output(#[from] std::io::Error),
    #[error("drawing plots: {0}")]
    Plot(String),
    #[error("{0} values read back differed from those written")]
    Verify(u64),
}

impl WorkloadArgs {
    pub fn spec(&self) -> Result<WorkloadSpec, BenchError> {
        self.spec_with_size(self.value_size)
    }

    pub fn spec_with_size(&self, value_size: usize) -> Result<WorkloadSpec, BenchError> {
        let mut mix: Mix = self.workload.mix();
        let overrides = [
            (self.read_proportion, &mut mix.read),
            (self.update_proportion, &mut mix.update),
            (self.insert_proportion, &mut mix.insert),
            (self.scan_proportion, &mut mix.scan),
            (self.rmw_proportion, &mut mix.read_modify_write),
        ];
        for (value, slot) in overrides {
            if let Some(v) = value {
                if !(0.0..=1.0).contains(&v) {
                    return Err(BenchError::Usage(format!("proportion {v} is not in 0..=1")));
                }
                *slot = v;
            }
        }
        let total: f64 = [
            mix.read,
            mix.update,
            mix.insert,
            mix.scan,
            mix.read_modify_write,
        ]
        .iter()
        .sum();
        if total <= 0.0 {
            return Err(BenchError::Usage("every operation proportion is 0".into()));
        }
        if !(self.zipf_theta > 0.0 && self.zipf_theta < 1.0) {
            return Err(BenchError::Usage("--zipf-theta must be in (0, 1)".into()));
        }
        if self.records == 0 {
            return Err(BenchError::Usage("--records must be at least 1".into()));
        }
        if self.interval_ms == Some(0) {
            return Err(BenchError::Usage("--interval-ms must be at least 1".into()));
        }
        let operation_count = match (self.operations, self.duration) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => 100_000,
        };
        Ok(WorkloadSpec {
            mix,
            distribution: self
                .distribution
                .unwrap_or(self.workload.default_distribution()),
            zipf_theta: self.zipf_theta,
            record_count: self.records,
            operation_count,
            max_scan_length: self.max_scan_length.max(1),
            layout: RecordLayout::new(&self.key_prefix, value_size, self.fields),
        })
    }

    fn phase_config(
        &self,
        phase: Phase,
        addr: &str,
        model: DataModel,
        output: &OutputArgs,
        seed: u64,
    ) -> PhaseConfig {
        let run = phase == Phase::Run;
        PhaseConfig {
            phase,
            addr: addr.to_string(),
            model,
            connections: self.connections.max(1),
            pipeline: self.pipeline.max(1),
            target_rate: if run { self.target_rate } else { None },
            warmup: if run {
                Duration::from_secs_f64(self.warmup.max(0.0))
            } else {
                Duration::ZERO
            },
            duration: if run {
                self.duration.map(|d| Duration::from_secs_f64(d.max(0.0)))
            } else {
                None
            },
            interval: self.interval_ms.map(Duration::from_millis),
            verify: self.verify,
            seed,
            progress: !output.no_progress,
        }
    }
}

/// Picks the data model: the one asked for, or for `auto` hashes when every
/// server has them.
pub fn resolve_model(
    choice: ModelChoice,
    fields: usize,
    servers: &[(String, String)],
) -> Result<DataModel, BenchError> {
    match choice {
        ModelChoice::Hash => {
            for (name, addr) in servers {
                let mut conn = crate::client::Connection::connect(addr)?;
                if !server_supports_hashes(&mut conn)? {
                    return Err(BenchError::Usage(format!(
                        "{name} has no hashes or sorted sets: use --data-model string"
                    )));
                }
            }
            Ok(DataModel::Hash)
        }
        ModelChoice::String => Ok(DataModel::String),
        ModelChoice::Auto if fields <= 1 => Ok(DataModel::String),
        ModelChoice::Auto => {
            for (name, addr) in servers {
                let mut conn = crate::client::Connection::connect(addr)?;
                if !server_supports_hashes(&mut conn)? {
                    eprintln!(
                        "note: {name} has no hashes or sorted sets: using --data-model string"
                    );
                    return Ok(DataModel::String);
                }
            }
            Ok(DataModel::Hash)
        }
    }
}

#[derive(Serialize)]
struct RunConfig<'a> {
    servers: Vec<&'a str>,
    data_model: DataModel,
    workload: &'a WorkloadArgs,
    spec: &'a WorkloadSpec,
    rounds: Option<usize>,
}

pub fn run(args: &RunArgs) -> Result<Vec<PhaseResult>, BenchError> {
    let spec = args.workload.spec()?;
    let server = args.address();
    let servers = [(server.clone(), server.clone())];
    let model = resolve_model(args.workload.data_model, args.workload.fields, &servers)?;
    note_model(model, &spec);
    let keys = KeyCounters::new(spec.record_count);
    let mut results = Vec::new();
    let w = &args.workload;
    if args.phase != PhaseSelection::Run {
        if w.flush {
            flush_all(&server)?;
        }
        let cfg = w.phase_config(Phase::Load, &server, model, &args.output, w.seed);
        let stats = run_phase(&cfg, &spec, &keys)?;
        results.push(PhaseResult::from_stats(
            &server,
            "load",
            spec.layout.value_size(),
            &stats,
        ));
    }
    if args.phase != PhaseSelection::Load {
        let cfg = w.phase_config(Phase::Run, &server, model, &args.output, w.seed);
        let stats = run_phase(&cfg, &spec, &keys)?;
        results.push(PhaseResult::from_stats(
            &server,
            "run",
            spec.layout.value_size(),
            &stats,
        ));
    }
    let config = RunConfig {
        servers: vec![&server],
        data_model: model,
        workload: w,
        spec: &spec,
        rounds: None,
    };
    emit(&args.output, &config, &results, None, None)?;
    check_verified(&results)?;
    Ok(results)
}

fn flush_all(addr: &str) -> Result<(), BenchError> {
    let reply = crate::client::Connection::connect(addr)?.call(&["FLUSHALL"])?;
    if let ferrokv_resp::Frame::Error(e) = reply {
        return Err(BenchError::Usage(format!(
            "FLUSHALL on {addr}: {}",
            String::from_utf8_lossy(&e)
        )));
    }
    Ok(())
}

fn note_model(model: DataModel, spec: &WorkloadSpec) {
    if model == DataModel::String && spec.mix.scan > 0.0 {
        eprintln!(
            "note: string data model: scans are SCAN MATCH {}* + MGET (unordered), not key ranges",
            spec.layout.key_prefix
        );
    }
}

/// Result of a comparison: one server against the baseline, per operation.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub value_size: usize,
    pub op: String,
    pub server: String,
    pub baseline: String,
    pub throughput: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

pub fn compare(args: &CompareArgs) -> Result<(Vec<PhaseResult>, Vec<Ratio>), BenchError> {
    let w = &args.workload;
    let sizes = if args.value_sizes.is_empty() {
        vec![w.value_size]
    } else {
        args.value_sizes.clone()
    };
    let specs = sizes
        .iter()
        .map(|size| w.spec_with_size(*size))
        .collect::<Result<Vec<_>, _>>()?;
    let mut servers = Vec::new();
    for s in &args.servers {
        let (name, addr) = s.split_once('=').unwrap_or((s.as_str(), s.as_str()));
        servers.push((name.to_string(), addr.to_string()));
    }
    if args.rounds == 0 {
        return Err(BenchError::Usage("--rounds must be at least 1".into()));
    }
    let model = resolve_model(w.data_model, w.fields, &servers)?;
    note_model(model, &specs[0]);
    let mut results = Vec::new();
    let mut ratios = Vec::new();
    for spec in &specs {
        let size = spec.layout.value_size();
        let keys: Vec<KeyCounters> = servers
            .iter()
            .map(|_| KeyCounters::new(spec.record_count))
            .collect();
        if !args.no_load {
            for ((name, addr), k) in servers.iter().zip(&keys) {
                if w.flush {
                    flush_all(addr)?;
                }
                let cfg = w.phase_config(Phase::Load, addr, model, &args.output, w.seed);
                let stats = run_phase(&cfg, spec, k)?;
                results.push(PhaseResult::from_stats(name, "load", size, &stats));
            }
        }
        let mut runs: Vec<Option<PhaseStats>> = servers.iter().map(|_| None).collect();
        for round in 0..args.rounds {
            // Rotate which server goes first, so drift is shared.
            for j in 0..servers.len() {
                let i = (round + j) % servers.len();
                let (name, addr) = &servers[i];
                if !args.output.no_progress {
                    eprintln!("{size} B, round {}/{}: {name}", round + 1, args.rounds);
                }
                // The same seed for every server within a round: the
                // same operation stream.
                let seed = w.seed.wrapping_add(round as u64);
                let cfg = w.phase_config(Phase::Run, addr, model, &args.output, seed);
                let stats = run_phase(&cfg, spec, &keys[i])?;
                match &mut runs[i] {
                    Some(acc) => acc.append_rounds(&stats),
                    slot => *slot = Some(stats),
                }
            }
        }
        let run_results: Vec<PhaseResult> = servers
            .iter()
            .zip(&runs)
            .map(|((name, _), s)| {
                PhaseResult::from_stats(name, "run", size, s.as_ref().expect("at least one round"))
            })
            .collect();
        ratios.extend(self::ratios(&run_results));
        results.extend(run_results);
    }
    let config = RunConfig {
        servers: args.servers.iter().map(|s| s.as_str()).collect(),
        data_model: model,
        workload: w,
        spec: &specs[0],
        rounds: Some(args.rounds),
    };
    let extra = serde_json::to_value(&ratios).map_err(std::io::Error::other)?;
    emit(&args.output, &config, &results, Some(&extra), Some(&ratios))?;
    check_verified(&results)?;
    Ok((results, ratios))
}

/// Every server's run rows divided by the baseline's (the first server).
pub fn ratios(runs: &[PhaseResult]) -> Vec<Ratio> {
    let Some(base) = runs.first() else {
        return Vec::new();
    };
    let div = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let mut out = Vec::new();
    for r in &runs[1..] {
        for o in &r.ops {
            let Some(b) = base.op(&o.op) else { continue };
            out.push(Ratio {
                value_size: r.value_size,
                op: o.op.clone(),
                server: r.server.clone(),
                baseline: base.server.clone(),
                throughput: div(o.ops_per_sec, b.ops_per_sec),
                p50: div(o.p50_us as f64, b.p50_us as f64),
                p99: div(o.p99_us as f64, b.p99_us as f64),
                p999: div(o.p999_us as f64, b.p999_us as f64),
            });
        }
    }
    out
}

/// The ratio table: each server's throughput and latency relative to the
/// baseline.
pub fn ratio_table(ratios: &[Ratio]) -> String {
    let header: Vec<String> = [
        "bytes",
        "op",
        "server / baseline",
        "ops/s ×",
        "p50 ×",
        "p99 ×",
        "p99.9 ×",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = ratios
        .iter()
        .map(|r| {
            vec![
                r.value_size.to_string(),
                r.op.clone(),
                format!("{} / {}", r.server, r.baseline),
                format!("{:.2}", r.throughput),
                format!("{:.2}", r.p50),
                format!("{:.2}", r.p99),
                format!("{:.2}", r.p999),
            ]
        })
        .collect();
    report::render(&header, &rows)
}

fn emit<C: Serialize>(
    output: &OutputArgs,
    config: &C,
    results: &[PhaseResult],
    extra: Option<&serde_json::Value>,
    ratios: Option<&[Ratio]>,
) -> Result<(), BenchError> {
    match output.format {
        Format::Table => {
            print!("{}", report::table(results));
            if let Some(r) = ratios {
                println!();
                print!("{}", ratio_table(r));
            }
        }
        Format::Csv => {
            report::write_csv(std::io::stdout().lock(), results).map_err(std::io::Error::other)?
        }
        Format::Json => {
            let v = report::json(config, results, extra);
            println!(
                "{}",
                serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?
            );
        }
    }
    if let Some(dir) = &output.out {
        report::write_files(dir, config, results, extra)?;
        if !output.no_plots {
            crate::plot::throughput(&dir.join("throughput.png"), results)
                .map_err(|e| BenchError::Plot(e.to_string()))?;
            let runs: Vec<PhaseResult> = results
                .iter()
                .filter(|r| r.phase == "run")
                .cloned()
                .collect();
            let cdf_of = if runs.is_empty() {
                results.to_vec()
            } else {
                runs
            };
            crate::plot::latency_cdf(&dir.join("latency_cdf.png"), &cdf_of)
                .map_err(|e| BenchError::Plot(e.to_string()))?;
        }
    }
    Ok(())
}

fn check_verified(results: &[PhaseResult]) -> Result<(), BenchError> {
    for r in results {
        let errors: u64 = r
            .ops
            .iter()
            .filter(|o| o.op != "TOTAL")
            .map(|o| o.errors)
            .sum();
        if errors > 0 {
            eprintln!(
                "warning: {} {}: {errors} operations failed; see the error samples above",
                r.server, r.phase
            );
        }
    }
    let bad: u64 = results
        .iter()
        .flat_map(|r| r.ops.iter().filter(|o| o.op != "TOTAL"))
        .map(|o| o.mismatches)
        .sum();
    if bad > 0 {
        return Err(BenchError::Verify(bad));
    }
    Ok(())
}
