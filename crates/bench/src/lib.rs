//! ferrokv-bench: a YCSB-style load generator for ferrokv and any other
//! Redis-compatible server, so that comparisons run with one tool.
//!
//! A run has a load phase (insert `--records` records) and a run phase
//! (`--operations` operations of one of YCSB's core workloads A–F, keys
//! drawn uniform, zipfian or latest). Latencies go into one HdrHistogram per
//! operation type; throughput is bucketed over time. Results print as a
//! table, CSV or JSON and are written with PNG plots into `--out`.
//!
//! # Layout
//! - [`generator`]: the key distributions, ported from YCSB's generators.
//! - [`workload`]: operation mixes A–F, record layout, operation stream.
//! - [`model`]: operations as Redis commands (hash model, string model).
//! - [`client`]: a blocking pipelined RESP client on `ferrokv_resp::Frame`.
//! - [`engine`]: one phase over N connection threads, open or closed loop.
//! - [`report`]: table, CSV, JSON. [`plot`]: PNG plots.
//! - [`cli`]: arguments and the `run` and `compare` commands.
#![forbid(unsafe_code)]

pub mod cli;
pub mod client;
pub mod engine;
pub mod generator;
pub mod model;
pub mod plot;
pub mod report;
pub mod workload;
