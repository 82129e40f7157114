//! The Prometheus `/metrics` endpoint: every series the server exports, in
//! one place.
//!
//! ```text
//!  event loop (owns the data)                      metrics-http thread
//!  cron tick ──► COLLECTORS(&Server) ──► Registry ──► Arc<Registry> ──► encode ──► GET /metrics
//!                                         (published under a mutex held only to swap the Arc)
//! ```
//!
//! The HTTP thread never touches the keyspace: every cron tick the loop
//! runs each [`Collector`] against the server state it owns, which fills a
//! fresh [`Registry`] of plain numbers, and publishes it by swapping an
//! `Arc`. The thread clones the `Arc` and renders the text outside the lock,
//! so a slow scraper cannot hold up the loop. A scrape therefore sees the
//! server as of the last cron tick (at most `1/hz` s old).
//!
//! The text is the Prometheus exposition format 0.0.4, written here by
//! hand: `prometheus-client` only writes OpenMetrics text (`# EOF`, and
//! counters whose samples are named `<family>_total` under a `# TYPE
//! <family>` line, which 0.0.4 parsers treat as a different family) and
//! its metric types are live atomics, not a snapshot rendered elsewhere.
//! The format is small: `# HELP`, `# TYPE`, one `name{labels} value` line per
//! sample, with `\\`, `\"` and `\n` escaped in label values.
//!
//! # Adding series (replication, RDMA, …)
//! Write a `fn(&Server, &mut Registry)` next to the state it reads, using
//! [`Registry::counter`], [`Registry::gauge`], [`Registry::family`] (labelled
//! series) or [`Registry::histogram`], and append it to [`COLLECTORS`].
//! Names start with `ferrokv_`; counters end in `_total`; units are base
//! units (seconds, bytes). A test checks that no two families share a name.
//! Latencies recorded on the loop go into a [`LatencyHistogram`] (fixed
//! buckets, a few adds per observation) kept with the rest of that part's
//! state.

use crate::server::Server;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds (µs) of the latency buckets; `+Inf` is implicit.
pub const LATENCY_BUCKETS_USEC: [u64; 16] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000,
];

/// Durations in fixed buckets (non-cumulative counts; the last slot is
/// everything above the last bound), plus their count and sum.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    pub buckets: [u64; LATENCY_BUCKETS_USEC.len() + 1],
    pub count: u64,
    pub sum_usec: u64,
}

impl From<ferrokv_fabric::WriteLatency> for LatencyHistogram {
    /// An RDMA stream's write latencies (the same buckets, checked by a test).
    fn from(w: ferrokv_fabric::WriteLatency) -> Self {
        LatencyHistogram {
            buckets: w.buckets,
            count: w.count,
            sum_usec: w.sum_usec,
        }
    }
}

impl LatencyHistogram {
    #[inline]
    pub fn record(&mut self, usec: u64) {
        let i = LATENCY_BUCKETS_USEC.partition_point(|&b| b < usec);
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_usec += usec;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One sample line: `<family><suffix>{labels} value`.
#[derive(Clone, Debug)]
pub struct Sample {
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

/// A metric family: a name, its help and type, and its samples.
#[derive(Clone, Debug)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    /// Adds a sample with these labels.
    pub fn sample(&mut self, labels: &[(&'static str, &str)], value: f64) -> &mut Self {
        self.samples.push(Sample {
            suffix: "",
            labels: labels.iter().map(|&(k, v)| (k, v.to_string())).collect(),
            value,
        });
        self
    }

    /// Adds one labelled histogram (buckets in seconds, `_sum`, `_count`).
    pub fn histogram(&mut self, labels: &[(&'static str, &str)], h: &LatencyHistogram) {
        let base: Vec<(&'static str, String)> =
            labels.iter().map(|&(k, v)| (k, v.to_string())).collect();
        let mut cumulative = 0u64;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            let le = match LATENCY_BUCKETS_USEC.get(i) {
                Some(&us) => format_value(us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            let mut l = base.clone();
            l.push(("le", le));
            self.samples.push(Sample {
                suffix: "_bucket",
                labels: l,
                value: cumulative as f64,
            });
        }
        self.samples.push(Sample {
            suffix: "_sum",
            labels: base.clone(),
            value: h.sum_usec as f64 / 1e6,
        });
        self.samples.push(Sample {
            suffix: "_count",
            labels: base,
            value: h.count as f64,
        });
    }
}

/// The series of one snapshot, in the order they are rendered.
#[derive(Default, Debug)]
pub struct Registry {
    pub families: Vec<Family>,
}

impl Registry {
    /// A family to fill with labelled samples.
    pub fn family(&mut self, name: &'static str, help: &'static str, kind: Kind) -> &mut Family {
        self.families.push(Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        });
        self.families.last_mut().expect("just pushed")
    }

    pub fn counter(&mut self, name: &'static str, help: &'static str, value: f64) {
        self.family(name, help, Kind::Counter).sample(&[], value);
    }

    pub fn gauge(&mut self, name: &'static str, help: &'static str, value: f64) {
        self.family(name, help, Kind::Gauge).sample(&[], value);
    }

    /// An unlabelled histogram.
    pub fn histogram(&mut self, name: &'static str, help: &'static str, h: &LatencyHistogram) {
        self.family(name, help, Kind::Histogram).histogram(&[], h);
    }

    /// The text exposition format, version 0.0.4.
    pub fn encode(&self) -> String {
        let mut o = String::with_capacity(16 * 1024);
        for f in &self.families {
            let _ = writeln!(o, "# HELP {} {}", f.name, escape_help(f.help));
            let _ = writeln!(o, "# TYPE {} {}", f.name, f.kind.name());
            for s in &f.samples {
                o.push_str(f.name);
                o.push_str(s.suffix);
                if !s.labels.is_empty() {
                    o.push('{');
                    for (i, (k, v)) in s.labels.iter().enumerate() {
                        if i > 0 {
                            o.push(',');
                        }
                        let _ = write!(o, "{k}=\"{}\"", escape_label(v));
                    }
                    o.push('}');
                }
                o.push(' ');
                o.push_str(&format_value(s.value));
                o.push('\n');
            }
        }
        o
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as Go's `strconv.FormatFloat(v, 'g', -1, 64)` would
/// accept it: integers without a fraction, `+Inf`/`-Inf`/`NaN`.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Fills a registry from the server state.
pub type Collector = fn(&Server, &mut Registry);

/// Every part's collector, in rendering order. Later parts (replication,
/// RDMA) append theirs here.
pub static COLLECTORS: &[Collector] = &[
    collect_server,
    collect_commands,
    collect_keyspace,
    collect_persistence,
    crate::replication::collect_replication,
    crate::replication::rdma::collect_rdma,
    crate::cluster::collect_cluster,
    collect_io_threads,
];

/// Runs every collector: the snapshot the endpoint serves.
pub fn capture(srv: &Server) -> Registry {
    let mut r = Registry::default();
    for c in COLLECTORS {
        c(srv, &mut r);
    }
    r
}

/// The I/O threads (`io-threads`, crates/net/src/io_threads.rs; INFO threads).
fn collect_io_threads(srv: &Server, r: &mut Registry) {
    use std::sync::atomic::Ordering::Relaxed;
    let io = srv.io_threads.as_deref();
    r.gauge(
        "ferrokv_io_threads",
        "The io-threads setting: the execution thread and io-threads - 1 I/O threads.",
        srv.config.io_threads as f64,
    );
    r.gauge(
        "ferrokv_io_threads_allowed",
        "I/O threads the CPU check allows now (cores free of other processes).",
        io.map_or(0, |io| io.allowed()) as f64,
    );
    r.gauge(
        "ferrokv_io_threads_active",
        "1 when the last batch of reads or writes went to the I/O threads.",
        f64::from(u8::from(io.is_some_and(|io| io.active))),
    );
    r.counter(
        "ferrokv_io_threaded_reads_total",
        "Socket reads the I/O threads made (INFO io_threaded_reads_processed).",
        io.map_or(0, |io| io.threaded_reads) as f64,
    );
    r.counter(
        "ferrokv_io_threaded_writes_total",
        "Reply flushes the I/O threads made (INFO io_threaded_writes_processed).",
        io.map_or(0, |io| io.threaded_writes) as f64,
    );
    let stats: Vec<_> = io.into_iter().flat_map(|io| io.thread_stats()).collect();
    let names: Vec<String> = (1..=stats.len()).map(|i| i.to_string()).collect();
    for (name, help, field) in [
        (
            "ferrokv_io_thread_reads_total",
            "Socket reads, by I/O thread.",
            (|t| &t.reads)
                as fn(&crate::net::io_threads::ThreadStats) -> &std::sync::atomic::AtomicU64,
        ),
        (
            "ferrokv_io_thread_writes_total",
            "Reply flushes, by I/O thread.",
            |t| &t.writes,
        ),
        (
            "ferrokv_io_thread_read_bytes_total",
            "Bytes read, by I/O thread.",
            |t| &t.read_bytes,
        ),
        (
            "ferrokv_io_thread_write_bytes_total",
            "Bytes written, by I/O thread.",
            |t| &t.write_bytes,
        ),
    ] {
        let f = r.family(name, help, Kind::Counter);
        for (t, n) in stats.iter().zip(&names) {
            f.sample(&[("thread", n.as_str())], field(t).load(Relaxed) as f64);
        }
    }
}

fn collect_server(srv: &Server, r: &mut Registry) {
    let s = &srv.stats;
    r.gauge(
        "ferrokv_uptime_in_seconds",
        "Seconds since the server started.",
        srv.start.elapsed().as_secs() as f64,
    );
    r.gauge(
        "ferrokv_connected_clients",
        "Client connections open now.",
        srv.connected_clients() as f64,
    );
    let f = r.family(
        "ferrokv_transport_clients",
        "Client connections open now, by transport (INFO connected_clients_<transport>).",
        Kind::Gauge,
    );
    for t in crate::net::conn::Transport::ALL {
        f.sample(&[("transport", t.name())], srv.clients_on(t) as f64);
    }
    // TLS handshakes (crates/net/src/tls.rs counts them as they end).
    for (name, help, v) in [
        (
            "ferrokv_tls_handshakes_total",
            "TLS handshakes completed (accepted connections, outgoing replication links, cluster bus links).",
            &crate::net::tls::HANDSHAKES,
        ),
        (
            "ferrokv_tls_handshake_failures_total",
            "TLS handshakes that failed (certificate refused, protocol error, peer gone mid-handshake).",
            &crate::net::tls::HANDSHAKE_FAILURES,
        ),
    ] {
        r.family(name, help, Kind::Counter)
            .sample(&[], v.load(std::sync::atomic::Ordering::Relaxed) as f64);
    }
    // RDMA client connections (INFO rdma's rdma_conn_*), open and closed.
    let t = srv.rdma_conn_totals();
    for (name, help, v) in [
        (
            "ferrokv_rdma_conn_bytes_written_total",
            "Bytes written to RDMA clients (fi_writedata into their rings).",
            t.bytes_written,
        ),
        (
            "ferrokv_rdma_conn_writes_total",
            "fi_writedata operations to RDMA clients (one ring slot each).",
            t.writes,
        ),
        (
            "ferrokv_rdma_conn_bytes_read_total",
            "Bytes read from RDMA clients' writes into the server's rings.",
            t.bytes_read,
        ),
        (
            "ferrokv_rdma_conn_bytes_parsed_in_place_total",
            "Bytes of RDMA clients' requests parsed where they landed in the ring, never copied (part of bytes_read).",
            t.read_in_place,
        ),
        (
            "ferrokv_rdma_conn_credits_sent_total",
            "Credit messages sent to RDMA clients.",
            t.credits_sent,
        ),
        (
            "ferrokv_rdma_conn_credit_stalls_total",
            "Writes to RDMA clients that found no ring slot handed back.",
            t.credit_stalls,
        ),
        (
            "ferrokv_rdma_conn_qp_retry_count_total",
            "Posts to RDMA clients retried because the endpoint's queue was full.",
            t.queue_full,
        ),
        (
            "ferrokv_rdma_conn_injected_writes_total",
            "Small writes to RDMA connections injected (fi_inject_writedata: no ring copy, no completion).",
            t.injected,
        ),
        (
            "ferrokv_rdma_conn_signalled_writes_total",
            "Ring writes to RDMA connections that asked for a local completion (one in rdma-conn-signal-every).",
            t.signalled,
        ),
        (
            "ferrokv_rdma_conn_keepalives_total",
            "Keepalives (empty writes) sent to idle RDMA connections.",
            t.keepalives,
        ),
    ] {
        r.counter(name, help, v as f64);
    }
    r.histogram(
        "ferrokv_rdma_conn_write_latency_seconds",
        "RDMA connections: a write's post to the return of the credit that covers it (rdma_write_latency of the connections).",
        &LatencyHistogram::from(t.write_latency),
    );
    let p = srv
        .rdma_conns
        .pool
        .as_ref()
        .map(|p| p.stats())
        .unwrap_or_default();
    r.counter(
        "ferrokv_rdma_conn_mr_cache_hits_total",
        "RDMA connections served registered rings from the pool.",
        p.hits as f64,
    );
    r.counter(
        "ferrokv_rdma_conn_mr_cache_misses_total",
        "RDMA connections whose rings had to be registered.",
        p.misses as f64,
    );
    r.gauge(
        "ferrokv_rdma_conn_mr_cache_hit_rate",
        "Share of RDMA connections served pooled rings (hits / (hits + misses)).",
        if p.hits + p.misses == 0 {
            0.0
        } else {
            p.hits as f64 / (p.hits + p.misses) as f64
        },
    );
    srv.rdma_conn_tune_metrics(r);
    r.counter(
        "ferrokv_connections_received_total",
        "Connections accepted since start (INFO total_connections_received).",
        s.total_connections_received as f64,
    );
    r.counter(
        "ferrokv_rejected_connections_total",
        "Connections refused because of maxclients.",
        s.rejected_connections as f64,
    );
    r.counter(
        "ferrokv_evicted_clients_total",
        "Clients closed by maxmemory-clients (INFO evicted_clients).",
        s.evicted_clients as f64,
    );
    let sc = &srv.scripting;
    r.counter(
        "ferrokv_scripts_killed_total",
        "Scripts and functions ended by SCRIPT KILL / FUNCTION KILL (INFO scripts_killed).",
        sc.stats.killed as f64,
    );
    r.counter(
        "ferrokv_busy_scripts_total",
        "Scripts that ran past busy-reply-threshold (INFO busy_scripts).",
        sc.stats.busy_scripts as f64,
    );
    r.counter(
        "ferrokv_busy_replies_total",
        "Commands answered -BUSY while a script ran (INFO busy_replies).",
        sc.stats.busy_replies as f64,
    );
    r.gauge(
        "ferrokv_cached_scripts",
        "Scripts in the EVAL cache (INFO number_of_cached_scripts).",
        sc.cache.len() as f64,
    );
    r.gauge(
        "ferrokv_function_libraries",
        "FUNCTION libraries loaded (INFO number_of_libraries).",
        sc.functions.libraries.len() as f64,
    );
    r.gauge(
        "ferrokv_lua_memory_bytes",
        "Bytes of the two Lua heaps (INFO used_memory_vm_total).",
        (sc.eval_vm_memory() + sc.functions.engine.lua.used_memory()) as f64,
    );
    r.counter(
        "ferrokv_client_output_pauses_total",
        "Times a client's commands waited for its unsent replies to drain (client-reply-backpressure).",
        s.client_output_pauses as f64,
    );
    r.gauge(
        "ferrokv_output_paused_clients",
        "Clients whose commands wait for their unsent replies to drain now.",
        srv.other_clients().filter(|c| c.output_paused).count() as f64,
    );
    r.counter(
        "ferrokv_commands_processed_total",
        "Commands executed since start (INFO total_commands_processed).",
        s.total_commands_processed as f64,
    );
    r.counter(
        "ferrokv_net_input_bytes_total",
        "Bytes read from clients.",
        s.net_input_bytes as f64,
    );
    r.counter(
        "ferrokv_net_output_bytes_total",
        "Bytes written to clients.",
        s.net_output_bytes as f64,
    );
    r.counter(
        "ferrokv_net_repl_input_bytes_total",
        "Bytes read from our master (INFO total_net_repl_input_bytes).",
        s.net_repl_input_bytes as f64,
    );
    r.counter(
        "ferrokv_net_repl_output_bytes_total",
        "Bytes written to our replicas (INFO total_net_repl_output_bytes).",
        s.net_repl_output_bytes as f64,
    );
    // The io_uring backend (docs/io-uring.md), when the loop runs on it.
    if let Some(u) = srv.uring.as_ref() {
        let st = u.stats();
        r.counter(
            "ferrokv_io_uring_enters_total",
            "io_uring_enter calls of the event loop (one per loop turn, more when the submission queue filled).",
            st.enters as f64,
        );
        r.counter(
            "ferrokv_io_uring_submissions_total",
            "Operations submitted to the ring (receives, sends, cancellations).",
            st.submitted as f64,
        );
        r.counter(
            "ferrokv_io_uring_completions_total",
            "Completions reaped from the ring.",
            st.completions as f64,
        );
        r.counter(
            "ferrokv_io_uring_recv_nobufs_total",
            "Receives that found no provided buffer free (the connection then read its socket directly).",
            st.recv_nobufs as f64,
        );
        r.counter(
            "ferrokv_io_uring_direct_reads_total",
            "Direct reads of sockets the kernel said had more than one buffer's worth.",
            st.direct_reads as f64,
        );
        r.counter(
            "ferrokv_io_uring_short_sends_total",
            "Sends the socket took only in part (the rest resubmitted).",
            st.short_sends as f64,
        );
    }
    {
        use std::sync::atomic::Ordering::Relaxed;
        r.gauge(
            "ferrokv_lazyfree_pending_objects",
            "Values handed to the lazy-free thread and not freed yet.",
            srv.lazyfree_counts.pending.load(Relaxed) as f64,
        );
        r.counter(
            "ferrokv_lazyfreed_objects_total",
            "Values the lazy-free thread has freed.",
            srv.lazyfree_counts.freed.load(Relaxed) as f64,
        );
    }
    r.gauge(
        "ferrokv_memory_used_bytes",
        "Bytes allocated by the server (INFO used_memory).",
        crate::alloc::used_memory() as f64,
    );
    r.gauge(
        "ferrokv_memory_used_rss_bytes",
        "Resident set size of the process (INFO used_memory_rss).",
        crate::alloc::rss_bytes() as f64,
    );
    r.gauge(
        "ferrokv_memory_used_peak_bytes",
        "Highest used_memory seen by the cron.",
        srv.peak_memory.max(crate::alloc::used_memory()) as f64,
    );
    r.counter(
        "ferrokv_evicted_keys_total",
        "Keys removed to keep used memory under maxmemory.",
        srv.eviction.evicted_keys as f64,
    );
    r.gauge(
        "ferrokv_maxmemory_bytes",
        "The maxmemory limit (0: none).",
        srv.config.maxmemory as f64,
    );
    r.counter(
        "ferrokv_expired_keys_total",
        "Keys removed because their TTL passed.",
        s.expired_keys as f64,
    );
    r.counter(
        "ferrokv_expired_hash_fields_total",
        "Hash fields removed because their TTL passed (INFO expired_subkeys).",
        s.expired_subkeys as f64,
    );
    let field_ttl_hashes: usize = srv
        .keyspace
        .dbs
        .iter()
        .map(|d| d.hashes_with_field_ttls())
        .sum();
    r.gauge(
        "ferrokv_hashes_with_field_ttls",
        "Hashes filed for active field expiry (INFO keyspace subexpiry).",
        field_ttl_hashes as f64,
    );
    let t = &srv.tracking;
    r.gauge(
        "ferrokv_tracking_clients",
        "Clients with CLIENT TRACKING on (INFO tracking_clients).",
        t.clients.len() as f64,
    );
    r.gauge(
        "ferrokv_tracking_total_keys",
        "Keys in the client-side caching table (INFO tracking_total_keys).",
        t.total_keys() as f64,
    );
    r.gauge(
        "ferrokv_tracking_total_items",
        "Client ids across the client-side caching table (INFO tracking_total_items).",
        t.total_items() as f64,
    );
    r.gauge(
        "ferrokv_tracking_total_prefixes",
        "BCAST prefixes registered (INFO tracking_total_prefixes).",
        t.total_prefixes() as f64,
    );
    r.counter(
        "ferrokv_tracking_invalidations_total",
        "Invalidation messages sent to tracking clients (pushes and __redis__:invalidate messages).",
        t.invalidations_sent as f64,
    );
    r.counter(
        "ferrokv_tracking_keys_forgotten_total",
        "Keys the client-side caching table forgot to stay within tracking-table-max-keys.",
        t.keys_evicted as f64,
    );
    r.counter(
        "ferrokv_keyspace_hits_total",
        "Successful key lookups by read commands.",
        s.keyspace_hits as f64,
    );
    r.counter(
        "ferrokv_keyspace_misses_total",
        "Failed key lookups by read commands.",
        s.keyspace_misses as f64,
    );
    let a = srv.acl.stats;
    let f = r.family(
        "ferrokv_acl_denied_total",
        "Commands and logins the ACL refused, by reason (INFO acl_access_denied_*).",
        Kind::Counter,
    );
    f.sample(&[("reason", "auth")], a.denied_auth as f64);
    f.sample(&[("reason", "command")], a.denied_cmd as f64);
    f.sample(&[("reason", "key")], a.denied_key as f64);
    f.sample(&[("reason", "channel")], a.denied_channel as f64);
    r.gauge(
        "ferrokv_acl_users",
        "ACL users defined (ACL USERS).",
        srv.acl.len() as f64,
    );
    r.counter(
        "ferrokv_error_replies_total",
        "Error replies sent (INFO total_error_replies).",
        s.total_error_replies as f64,
    );
    let f = r.family(
        "ferrokv_errors_total",
        "Error replies by error code (INFO errorstats).",
        Kind::Counter,
    );
    let mut errs: Vec<_> = srv.error_stats.iter().collect();
    errs.sort();
    for (code, n) in errs {
        f.sample(&[("err", code)], *n as f64);
    }
    r.gauge(
        "ferrokv_slowlog_length",
        "Entries in the slow log.",
        srv.slowlog.len() as f64,
    );
    r.gauge(
        "ferrokv_slowlog_last_id",
        "Id of the newest slow log entry (-1: none yet).",
        srv.slowlog.last_id().map_or(-1.0, |id| id as f64),
    );
}

fn collect_commands(srv: &Server, r: &mut Registry) {
    // Only commands that were called (or refused) appear, as in
    // `INFO commandstats`: a series per command of the table would be
    // hundreds of zeros.
    let used: Vec<(usize, &crate::commands::CommandStats)> = srv
        .cmd_stats
        .iter()
        .enumerate()
        .filter(|(_, st)| st.calls > 0 || st.rejected_calls > 0 || st.failed_calls > 0)
        .collect();
    let name = |i: usize| srv.commands.specs[i].name;
    let f = r.family(
        "ferrokv_commands_total",
        "Calls per command (INFO commandstats calls).",
        Kind::Counter,
    );
    for &(i, st) in &used {
        f.sample(&[("cmd", name(i))], st.calls as f64);
    }
    let f = r.family(
        "ferrokv_commands_duration_seconds_total",
        "Time spent executing each command (INFO commandstats usec).",
        Kind::Counter,
    );
    for &(i, st) in &used {
        f.sample(&[("cmd", name(i))], st.usec as f64 / 1e6);
    }
    let f = r.family(
        "ferrokv_commands_rejected_calls_total",
        "Calls refused before execution (arity, auth, MISCONF).",
        Kind::Counter,
    );
    for &(i, st) in &used {
        f.sample(&[("cmd", name(i))], st.rejected_calls as f64);
    }
    let f = r.family(
        "ferrokv_commands_failed_calls_total",
        "Calls that replied with an error.",
        Kind::Counter,
    );
    for &(i, st) in &used {
        f.sample(&[("cmd", name(i))], st.failed_calls as f64);
    }
    let f = r.family(
        "ferrokv_command_latency_seconds",
        "Execution time per command.",
        Kind::Histogram,
    );
    for &(i, st) in &used {
        if st.calls > 0 {
            f.histogram(&[("cmd", name(i))], &st.latency);
        }
    }
}

fn collect_keyspace(srv: &Server, r: &mut Registry) {
    let dbs: Vec<(String, usize, usize)> = srv
        .keyspace
        .dbs
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_empty())
        .map(|(i, d)| (format!("db{i}"), d.len(), d.expires()))
        .collect();
    let f = r.family(
        "ferrokv_db_keys",
        "Keys per database (non-empty databases only).",
        Kind::Gauge,
    );
    for (db, keys, _) in &dbs {
        f.sample(&[("db", db)], *keys as f64);
    }
    let f = r.family(
        "ferrokv_db_keys_expiring",
        "Keys with a TTL per database (non-empty databases only).",
        Kind::Gauge,
    );
    for (db, _, expires) in &dbs {
        f.sample(&[("db", db)], *expires as f64);
    }
}

fn collect_persistence(srv: &Server, r: &mut Registry) {
    let p = &srv.persistence;
    let job = p.job.as_ref();
    let loading = srv.loading.as_ref();
    r.gauge(
        "ferrokv_loading",
        "1 while the data set loads at start-up (commands but those flagged loading get -LOADING).",
        loading.is_some() as u8 as f64,
    );
    r.gauge(
        "ferrokv_loading_loaded_bytes",
        "Bytes of the RDB or AOF files loaded so far (0 when not loading).",
        loading.map_or(0, |l| l.loaded_bytes) as f64,
    );
    r.gauge(
        "ferrokv_loading_total_bytes",
        "Bytes of the RDB or AOF files being loaded (0 when not loading).",
        loading.map_or(0, |l| l.total_bytes) as f64,
    );
    r.gauge(
        "ferrokv_rdb_bgsave_in_progress",
        "1 while a background save runs.",
        job.is_some_and(|j| j.kind == crate::persistence::SaveKind::Background && !j.for_aof) as u8
            as f64,
    );
    r.gauge(
        "ferrokv_rdb_save_loop_share_percent",
        "Percent of the event loop's time the save in progress may take now (bgsave-loop-share, raised for idle clients and held memory; 100: clients idle; 0: no save).",
        if job.is_some() { p.loop_share } else { 0 } as f64,
    );
    r.gauge(
        "ferrokv_rdb_last_save_timestamp_seconds",
        "Unix time of the last successful save (start time until one).",
        p.last_save_unix as f64,
    );
    r.gauge(
        "ferrokv_rdb_last_bgsave_status",
        "1 if the last background save succeeded (or none ran), 0 if it failed.",
        p.last_bgsave_ok as u8 as f64,
    );
    r.gauge(
        "ferrokv_rdb_changes_since_last_save",
        "Writes since the last successful save.",
        srv.dirty as f64,
    );
    r.counter(
        "ferrokv_rdb_saves_total",
        "Successful snapshots since start.",
        p.saves as f64,
    );
    r.gauge(
        "ferrokv_rdb_last_bgsave_duration_seconds",
        "Duration of the last background save (-1: none yet).",
        p.last_bgsave_secs.unwrap_or(-1.0),
    );
    let aof = srv.aof.as_ref();
    r.gauge(
        "ferrokv_aof_enabled",
        "1 when appendonly is on.",
        aof.is_some() as u8 as f64,
    );
    r.gauge(
        "ferrokv_aof_rewrite_in_progress",
        "1 while an AOF rewrite runs.",
        srv.aof_rewrite_in_progress() as u8 as f64,
    );
    r.gauge(
        "ferrokv_aof_last_write_status",
        "1 if the last AOF write succeeded (or the AOF is off), 0 if it failed.",
        aof.is_none_or(|a| a.write_error.is_none()) as u8 as f64,
    );
    r.gauge(
        "ferrokv_aof_current_size_bytes",
        "Bytes in the AOF's incremental files (INFO aof_current_size).",
        aof.map_or(0, |a| a.incr_size) as f64,
    );
    r.gauge(
        "ferrokv_aof_base_size_bytes",
        "Bytes in the AOF's base file (INFO aof_base_size).",
        aof.map_or(0, |a| a.base_size) as f64,
    );
    r.counter(
        "ferrokv_aof_rewrites_total",
        "AOF rewrites since start.",
        srv.aof_rewrite_stats.rewrites as f64,
    );
    r.counter(
        "ferrokv_aof_checksum_blocks_written_total",
        "Blocks of the AOF given a checksum record since start.",
        aof.map_or(0, |a| a.sum_blocks_written) as f64,
    );
    r.counter(
        "ferrokv_aof_checksum_bytes_written_total",
        "Bytes of the AOF covered by the checksum records written since start.",
        aof.map_or(0, |a| a.sum_bytes_written) as f64,
    );
    let v = &p.aof_verify;
    r.gauge(
        "ferrokv_aof_last_load_verified_bytes",
        "Bytes of the incremental AOF files the last load verified against their checksums.",
        v.verified_bytes as f64,
    );
    r.gauge(
        "ferrokv_aof_last_load_verified_blocks",
        "Checksum blocks the last AOF load verified.",
        v.verified_blocks as f64,
    );
    r.gauge(
        "ferrokv_aof_last_load_unverified_bytes",
        "Bytes the last AOF load replayed without a checksum.",
        v.unverified_bytes as f64,
    );
    r.gauge(
        "ferrokv_aof_last_load_verification",
        "The last AOF load's checksum verification: 0 none, 1 ok, 2 unverified, 3 truncated, 4 recovered.",
        v.result as u8 as f64,
    );
}

/// The loop's handle on the endpoint: where to publish snapshots.
pub struct MetricsEndpoint {
    pub addr: std::net::SocketAddr,
    current: Arc<Mutex<Arc<Registry>>>,
}

impl MetricsEndpoint {
    /// Replaces the snapshot the endpoint serves (called from the cron).
    pub fn publish(&self, r: Registry) {
        let r = Arc::new(r);
        if let Ok(mut cur) = self.current.lock() {
            *cur = r;
        }
    }
}

/// Binds `bind:port` and starts the `metrics-http` thread.
pub fn spawn(bind: &str, port: u16) -> std::io::Result<MetricsEndpoint> {
    let host = if bind.contains(':') {
        format!("[{bind}]:{port}")
    } else {
        format!("{bind}:{port}")
    };
    let listener = TcpListener::bind(&host)?;
    let addr = listener.local_addr()?;
    let current = Arc::new(Mutex::new(Arc::new(Registry::default())));
    let shared = current.clone();
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let snapshot = shared.lock().map(|g| g.clone()).ok();
                if let Err(e) = serve_one(conn, snapshot.as_deref()) {
                    tracing::debug!("metrics request failed: {e}");
                }
            }
        })?;
    Ok(MetricsEndpoint { addr, current })
}

/// Answers one HTTP/1.1 request and closes the connection. Requests are
/// served one at a time: a scraper is one client, and a stuck one costs
/// at most the 5 s timeout.
fn serve_one(conn: TcpStream, snapshot: Option<&Registry>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Headers up to the blank line (bounded: 64 lines).
    for _ in 0..64 {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = if (method == "GET" || method == "HEAD") && path == "/metrics" {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            snapshot.map(|r| r.encode()).unwrap_or_default(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "Not Found: try /metrics\n".to_string(),
        )
    };
    let mut w = conn;
    write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        w.write_all(body.as_bytes())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_in_seconds() {
        let mut h = LatencyHistogram::default();
        h.record(10); // le 1e-05 (bounds are inclusive)
        h.record(11); // le 2.5e-05
        h.record(5_000_000); // +Inf
        let mut r = Registry::default();
        r.family("ferrokv_x_seconds", "x", Kind::Histogram)
            .histogram(&[("cmd", "get")], &h);
        let text = r.encode();
        assert!(text.contains("ferrokv_x_seconds_bucket{cmd=\"get\",le=\"0.00001\"} 1\n"));
        assert!(text.contains("ferrokv_x_seconds_bucket{cmd=\"get\",le=\"0.000025\"} 2\n"));
        assert!(text.contains("ferrokv_x_seconds_bucket{cmd=\"get\",le=\"1\"} 2\n"));
        assert!(text.contains("ferrokv_x_seconds_bucket{cmd=\"get\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("ferrokv_x_seconds_sum{cmd=\"get\"} 5.000021\n"));
        assert!(text.contains("ferrokv_x_seconds_count{cmd=\"get\"} 3\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut r = Registry::default();
        r.family("ferrokv_y_total", "y", Kind::Counter)
            .sample(&[("err", "a\"b\\c\nd")], 1.0);
        assert!(r
            .encode()
            .contains("ferrokv_y_total{err=\"a\\\"b\\\\c\\nd\"} 1\n"));
    }

    #[test]
    fn no_two_families_share_a_name_and_all_are_prefixed() {
        let srv = Server::new(crate::config::Config::default());
        let r = capture(&srv);
        let mut names: Vec<&str> = r.families.iter().map(|f| f.name).collect();
        for n in &names {
            assert!(n.starts_with("ferrokv_"), "{n}");
        }
        for f in &r.families {
            if f.kind == Kind::Counter {
                assert!(f.name.ends_with("_total"), "{}", f.name);
            }
        }
        let total = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), total, "duplicate metric family names");
    }
}

#[cfg(test)]
mod rdma_latency_tests {
    #[test]
    fn stream_write_latency_buckets_are_the_histograms() {
        assert_eq!(
            ferrokv_fabric::WRITE_LATENCY_BOUNDS_USEC,
            super::LATENCY_BUCKETS_USEC
        );
    }
}
