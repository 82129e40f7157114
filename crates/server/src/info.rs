//! `INFO`: Redis's sections and field names, built from what the server
//! has. A section appears only when the part behind it exists.

use crate::server::Server;
use std::fmt::Write as _;

/// Sections `INFO` (no argument, or `default`) prints, in order.
pub const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];
/// Sections `INFO all` / `INFO everything` add.
pub const EXTRA_SECTIONS: &[&str] = &["commandstats", "latencystats", "rdma", "threads"];

/// Redis 7.0's order of every section (`genRedisInfoString`); ferrokv's
/// own `rdma` and `threads` come last.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "rdma",
    "threads",
];

pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1024.0 {
        format!("{n}B")
    } else if n < 1024.0 * 1024.0 {
        format!("{:.2}K", n / 1024.0)
    } else if n < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", n / (1024.0 * 1024.0))
    } else if n < 1024.0 * 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}G", n / (1024.0 * 1024.0 * 1024.0))
    } else {
        format!("{:.2}T", n / (1024.0 * 1024.0 * 1024.0 * 1024.0))
    }
}

/// CPU seconds (user, system) of the process and of the main thread,
/// from /proc (Linux reports them in 1/100 s).
fn cpu_times() -> ((f64, f64), (f64, f64)) {
    fn read(path: &str) -> (f64, f64) {
        let Ok(s) = std::fs::read_to_string(path) else {
            return (0.0, 0.0);
        };
        // Fields after the `(comm)`, which may hold spaces.
        let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
        (t(11), t(12))
    }
    let pid = std::process::id();
    (
        read("/proc/self/stat"),
        read(&format!("/proc/self/task/{pid}/stat")),
    )
}

fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Builds the INFO text for the requested sections (lower-case names,
/// `default`, `all`, `everything`).
/// The client asking (it is out of the client table while its command
/// runs, so the counts of `# Clients` add it back).
#[derive(Clone, Copy)]
pub struct Caller {
    /// At least this many clients are connected (1: the caller).
    pub count: usize,
    pub transport: Option<crate::net::conn::Transport>,
}

pub fn render(srv: &Server, requested: &[String], current: Caller) -> String {
    let mut sections: Vec<&str> = Vec::new();
    let want_all = requested.iter().any(|r| r == "all" || r == "everything");
    if requested.is_empty() || requested.iter().any(|r| r == "default") || want_all {
        sections.extend(DEFAULT_SECTIONS);
    }
    if want_all {
        sections.extend(EXTRA_SECTIONS);
    }
    for r in requested {
        if let Some(s) = DEFAULT_SECTIONS
            .iter()
            .chain(EXTRA_SECTIONS)
            .find(|s| *s == r)
        {
            if !sections.contains(s) {
                sections.push(s);
            }
        }
    }
    // Whatever order they were asked in, they come in Redis's.
    sections.sort_by_key(|s| ORDER.iter().position(|o| o == s));
    let mut out = String::new();
    for (i, s) in sections.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        section(srv, s, &mut out, current);
    }
    out
}

fn section(srv: &Server, name: &str, o: &mut String, current: Caller) {
    let current_clients = current.count;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    macro_rules! f {
        ($($arg:tt)*) => {{ let _ = write!(o, $($arg)*); o.push_str("\r\n"); }};
    }
    match name {
        "server" => {
            let up = srv.start.elapsed().as_secs();
            f!("# Server");
            f!("redis_version:{}", crate::REDIS_COMPAT_VERSION);
            f!("ferrokv_version:{}", crate::VERSION);
            f!("redis_git_sha1:00000000");
            f!("redis_git_dirty:0");
            f!("redis_build_id:0");
            f!("redis_mode:standalone");
            f!("os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
            f!("arch_bits:{}", usize::BITS);
            f!("monotonic_clock:POSIX clock_gettime");
            f!(
                "multiplexing_api:{}",
                if srv.uring.is_some() {
                    "io_uring"
                } else {
                    "epoll"
                }
            );
            f!("atomicvar_api:c11-builtin");
            f!("gcc_version:0.0.0");
            f!("process_id:{}", std::process::id());
            f!("process_supervised:no");
            f!("run_id:{}", srv.run_id);
            f!("tcp_port:{}", srv.tcp_port);
            f!("server_time_usec:{}", now.as_micros());
            f!("uptime_in_seconds:{up}");
            f!("uptime_in_days:{}", up / 86400);
            f!("hz:{}", srv.config.hz);
            f!("configured_hz:{}", srv.config.hz);
            f!("lru_clock:{}", srv.lru_clock);
            f!(
                "executable:{}",
                std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            f!(
                "config_file:{}",
                srv.config
                    .config_file
                    .as_deref()
                    .map(|p| std::fs::canonicalize(p)
                        .map(|c| c.display().to_string())
                        .unwrap_or(p.to_string()))
                    .unwrap_or_default()
            );
            f!(
                "io_threads_active:{}",
                u8::from(srv.io_threads.as_ref().is_some_and(|io| io.active))
            );
            // Only while a shutdown waits for its replicas (shutdown.rs).
            if let Some(ms) = srv.shutdown.remaining_ms(crate::server::unix_ms()) {
                f!("shutdown_in_milliseconds:{ms}");
            }
        }
        "clients" => {
            let max_in = srv
                .other_clients()
                .map(|c| c.conn.inbuf.len())
                .max()
                .unwrap_or(0);
            let max_out = srv
                .other_clients()
                .map(|c| c.pending_output())
                .max()
                .unwrap_or(0);
            f!("# Clients");
            f!(
                "connected_clients:{}",
                srv.connected_clients().max(current_clients)
            );
            // ferrokv's own: the open connections by transport.
            for t in crate::net::conn::Transport::ALL {
                let caller = usize::from(current.transport == Some(t));
                f!(
                    "connected_clients_{}:{}",
                    t.name(),
                    srv.clients_on(t) + caller
                );
            }
            f!(
                "cluster_connections:{}",
                srv.cluster.as_ref().map_or(0, |c| c.links.links.len())
            );
            f!("maxclients:{}", srv.config.maxclients);
            f!("client_recent_max_input_buffer:{max_in}");
            f!("client_recent_max_output_buffer:{max_out}");
            // On keys or held by a pause, in WAIT, in SHUTDOWN (as Redis
            // counts every kind of blocked client).
            f!(
                "blocked_clients:{}",
                srv.blocking.blocked_clients()
                    + srv.repl.master.waiters.len()
                    + srv.shutdown.blocked_count()
            );
            f!("tracking_clients:{}", srv.tracking.clients.len());
            f!("clients_in_timeout_table:{}", srv.blocking.with_timeout());
            f!(
                "output_paused_clients:{}",
                srv.other_clients().filter(|c| c.output_paused).count()
            );
        }
        "memory" => {
            let used = crate::alloc::used_memory() as u64;
            let rss = crate::alloc::rss_bytes() as u64;
            let peak = (srv.peak_memory as u64).max(used);
            let total = total_system_memory();
            let sc = &srv.scripting;
            let vm_eval = sc.eval_vm_memory() as u64;
            let vm_functions = sc.functions.engine.lua.used_memory() as u64;
            let m = crate::commands::memory::overhead(srv);
            let (scripts_eval, functions_mem) = (m.eval_caches, m.functions_caches);
            let dataset_tables = m.tables;
            let (startup, overhead, dataset) = (m.startup, m.overhead_total, m.dataset);
            let (allocated, active, resident) = (m.allocated, m.active, m.resident);
            let (backlog, replica_buffers, aof_buf) = (m.backlog, m.replica_buffers, m.aof_buffer);
            let (clients_normal, clients_replicas) = (m.clients_normal, m.clients_replicas);
            let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
            f!("# Memory");
            f!("used_memory:{used}");
            f!("used_memory_human:{}", human_bytes(used));
            f!("used_memory_rss:{rss}");
            f!("used_memory_rss_human:{}", human_bytes(rss));
            f!("used_memory_peak:{peak}");
            f!("used_memory_peak_human:{}", human_bytes(peak));
            f!("used_memory_peak_perc:{:.2}%", ratio(used, peak) * 100.0);
            f!("used_memory_overhead:{overhead}");
            f!("used_memory_startup:{startup}");
            f!("used_memory_dataset:{dataset}");
            f!("used_memory_dataset_perc:{:.2}%", m.dataset_perc());
            f!("allocator_allocated:{allocated}");
            f!("allocator_active:{active}");
            f!("allocator_resident:{resident}");
            f!("total_system_memory:{total}");
            f!("total_system_memory_human:{}", human_bytes(total));
            // Scripting, with Redis 7.0's names: the two Lua heaps and
            // what the script cache and the libraries hold.
            f!("used_memory_lua:{vm_eval}");
            f!("used_memory_vm_eval:{vm_eval}");
            f!("used_memory_lua_human:{}", human_bytes(vm_eval));
            f!("used_memory_scripts_eval:{scripts_eval}");
            f!("number_of_cached_scripts:{}", sc.cache.len());
            f!("number_of_functions:{}", sc.functions.function_count());
            f!("number_of_libraries:{}", sc.functions.libraries.len());
            f!("used_memory_vm_functions:{vm_functions}");
            f!("used_memory_vm_total:{}", vm_eval + vm_functions);
            f!(
                "used_memory_vm_total_human:{}",
                human_bytes(vm_eval + vm_functions)
            );
            f!("used_memory_functions:{functions_mem}");
            f!("used_memory_scripts:{}", scripts_eval + functions_mem);
            f!(
                "used_memory_scripts_human:{}",
                human_bytes(scripts_eval + functions_mem)
            );
            let maxmemory = srv.config.maxmemory;
            f!("maxmemory:{maxmemory}");
            f!("maxmemory_human:{}", human_bytes(maxmemory));
            f!("maxmemory_policy:{}", srv.config.maxmemory_policy.name());
            f!("allocator_frag_ratio:{:.2}", ratio(active, allocated));
            f!("allocator_frag_bytes:{}", active - allocated);
            f!("allocator_rss_ratio:{:.2}", ratio(resident, active));
            f!("allocator_rss_bytes:{}", resident as i64 - active as i64);
            f!("rss_overhead_ratio:{:.2}", ratio(rss, resident));
            f!("rss_overhead_bytes:{}", rss as i64 - resident as i64);
            f!("mem_fragmentation_ratio:{:.2}", ratio(rss, used));
            f!("mem_fragmentation_bytes:{}", rss as i64 - used as i64);
            f!("mem_not_counted_for_evict:{}", aof_buf + replica_buffers);
            f!("mem_replication_backlog:{backlog}");
            f!(
                "mem_total_replication_buffers:{}",
                backlog + replica_buffers
            );
            f!("mem_clients_slaves:{clients_replicas}");
            f!("mem_clients_normal:{clients_normal}");
            f!(
                "mem_cluster_links:{}",
                srv.cluster.as_ref().map_or(0, |c| c.links.memory())
            );
            f!("mem_aof_buffer:{aof_buf}");
            f!("mem_allocator:mimalloc");
            // No active defragmentation: mimalloc's pages are purged by
            // the cron (`allocator_collect_usec`) instead.
            f!("active_defrag_running:0");
            {
                use std::sync::atomic::Ordering::Relaxed;
                let lf = &srv.lazyfree_counts;
                f!("lazyfree_pending_objects:{}", lf.pending.load(Relaxed));
                f!("lazyfreed_objects:{}", lf.freed.load(Relaxed));
            }
            // ferrokv's own.
            f!("used_memory_dataset_tables:{dataset_tables}");
            f!(
                "allocator_collect_usec:{}",
                srv.stats.allocator_collect_usec
            );
            f!("buffer_pool_free:{}", srv.pool.len());
        }
        "persistence" => {
            let p = &srv.persistence;
            let job = p.job.as_ref();
            f!("# Persistence");
            f!("loading:{}", srv.loading.is_some() as u8);
            f!("async_loading:0");
            f!(
                "current_cow_peak:{}",
                job.map_or(0, |j| j.peak_cow_entries * 64)
            );
            f!(
                "current_cow_size:{}",
                srv.keyspace
                    .dbs
                    .iter()
                    .map(|d| d.snapshot_copied_entries())
                    .sum::<usize>()
                    * 64
            );
            // Computed when asked: never older than this reply.
            f!("current_cow_size_age:0");
            f!(
                "current_fork_perc:{:.2}",
                job.filter(|j| j.keys_total > 0)
                    .map_or(0.0, |j| j.keys_done as f64 * 100.0 / j.keys_total as f64)
            );
            f!(
                "current_save_keys_processed:{}",
                job.map_or(0, |j| j.keys_done)
            );
            f!(
                "current_save_keys_total:{}",
                job.map_or(0, |j| j.keys_total)
            );
            f!("rdb_changes_since_last_save:{}", srv.dirty);
            f!(
                "rdb_bgsave_in_progress:{}",
                job.is_some_and(|j| j.kind == crate::persistence::SaveKind::Background) as u8
            );
            f!("rdb_last_save_time:{}", p.last_save_unix);
            f!(
                "rdb_last_bgsave_status:{}",
                if p.last_bgsave_ok { "ok" } else { "err" }
            );
            f!(
                "rdb_last_bgsave_time_sec:{}",
                p.last_bgsave_secs.map_or(-1, |s| s.round() as i64)
            );
            f!(
                "rdb_current_bgsave_time_sec:{}",
                job.map_or(-1, |j| j.started.elapsed().as_secs() as i64)
            );
            f!("rdb_saves:{}", p.saves);
            f!("rdb_last_cow_size:{}", p.last_cow_entries * 64);
            f!("rdb_last_load_keys_expired:{}", p.last_load_expired);
            f!("rdb_last_load_keys_loaded:{}", p.last_load_keys);
            f!("aof_enabled:{}", srv.aof.is_some() as u8);
            let aof = srv.aof.as_ref();
            f!(
                "aof_rewrite_in_progress:{}",
                srv.aof_rewrite_in_progress() as u8
            );
            f!("aof_rewrite_scheduled:{}", srv.aof_rewrite_scheduled as u8);
            f!(
                "aof_last_rewrite_time_sec:{}",
                srv.aof_last_rewrite_secs.map_or(-1, |s| s.round() as i64)
            );
            f!(
                "aof_current_rewrite_time_sec:{}",
                job.filter(|j| j.for_aof)
                    .map_or(-1, |j| j.started.elapsed().as_secs() as i64)
            );
            f!(
                "aof_last_bgrewrite_status:{}",
                if srv.aof_rewrite_stats.last_ok {
                    "ok"
                } else {
                    "err"
                }
            );
            f!("aof_rewrites:{}", srv.aof_rewrite_stats.rewrites);
            f!(
                "aof_rewrites_consecutive_failures:{}",
                srv.aof_rewrite_stats.failures_in_a_row
            );
            f!(
                "aof_last_write_status:{}",
                if aof.is_none_or(|a| a.write_error.is_none()) {
                    "ok"
                } else {
                    "err"
                }
            );
            f!("aof_last_cow_size:{}", p.aof_last_cow_entries * 64);
            // No modules, so no module forks (and ferrokv never forks).
            f!("module_fork_in_progress:0");
            f!("module_fork_last_cow_size:0");
            if let Some(l) = &srv.loading {
                f!("loading_start_time:{}", l.start_unix);
                f!("loading_total_bytes:{}", l.total_bytes);
                f!("loading_rdb_used_mem:{}", l.rdb_used_mem);
                f!("loading_loaded_bytes:{}", l.loaded_bytes);
                f!("loading_loaded_perc:{:.2}", l.percent());
                f!(
                    "loading_eta_seconds:{}",
                    l.eta_seconds(srv.now_ms as u64 / 1000)
                );
            }
            if let Some(aof) = aof {
                f!("aof_current_size:{}", aof.incr_size);
                f!("aof_base_size:{}", aof.base_size);
                f!("aof_pending_rewrite:{}", srv.aof_rewrite_scheduled as u8);
                f!("aof_buffer_length:{}", aof.buffered());
                f!("aof_pending_bio_fsync:{}", aof.fsync_pending() as u8);
                // A write never waits for an fsync in progress.
                f!("aof_delayed_fsync:0");
                f!("aof_fsync_policy:{}", aof.policy().name());
                // ferrokv's own: the checksum companions (aofsum.rs).
                let v = &p.aof_verify;
                f!("aof_checksums:{}", aof.checksummed() as u8);
                f!("aof_checksum_blocks_written:{}", aof.sum_blocks_written);
                f!("aof_checksum_bytes_written:{}", aof.sum_bytes_written);
                f!("aof_last_load_verification:{}", v.result.name());
                f!("aof_last_load_verified_bytes:{}", v.verified_bytes);
                f!("aof_last_load_verified_blocks:{}", v.verified_blocks);
                f!("aof_last_load_unverified_bytes:{}", v.unverified_bytes);
            }
            // ferrokv's own: the loop's share given to a snapshot.
            f!(
                "current_save_loop_share:{}",
                if job.is_some() { p.loop_share } else { 0 }
            );
        }
        "replication" => srv.info_replication(o),
        "rdma" => {
            srv.repl.rdma.info(o);
            // RDMA client connections (net/rdma.rs), open and closed.
            let t = srv.rdma_conn_totals();
            let c = &srv.rdma_conns;
            f!("rdma_repl_link:{}", srv.repl_link_transport());
            f!("rdma_repl_replicas:{}", srv.rdma_replicas());
            f!("rdma_connections:{}", c.tokens.len());
            f!("rdma_connections_accepted:{}", c.accepted);
            f!("rdma_connections_refused:{}", c.refused);
            f!("rdma_conn_bytes_written:{}", t.bytes_written);
            f!("rdma_conn_writes:{}", t.writes);
            f!("rdma_conn_bytes_read:{}", t.bytes_read);
            f!("rdma_conn_bytes_parsed_in_place:{}", t.read_in_place);
            f!("rdma_conn_credits_sent:{}", t.credits_sent);
            f!("rdma_conn_credit_stalls:{}", t.credit_stalls);
            f!("rdma_conn_qp_retry_count:{}", t.queue_full);
            f!("rdma_conn_injected_writes:{}", t.injected);
            f!("rdma_conn_signalled_writes:{}", t.signalled);
            f!("rdma_conn_keepalives:{}", t.keepalives);
            let l = &t.write_latency;
            f!("rdma_conn_write_latency_count:{}", l.count);
            f!(
                "rdma_conn_write_latency_mean_usec:{:.1}",
                if l.count == 0 {
                    0.0
                } else {
                    l.sum_usec as f64 / l.count as f64
                }
            );
            let p = c.pool.as_ref().map(|p| p.stats()).unwrap_or_default();
            let served = p.hits + p.misses;
            f!("rdma_conn_mr_cache_hits:{}", p.hits);
            f!("rdma_conn_mr_cache_misses:{}", p.misses);
            f!("rdma_conn_mr_cache_free:{}", p.free);
            f!(
                "rdma_conn_mr_cache_hit_rate:{:.4}",
                if served == 0 {
                    0.0
                } else {
                    p.hits as f64 / served as f64
                }
            );
            srv.rdma_conn_tune_info(o);
        }
        "stats" => {
            let s = &srv.stats;
            f!("# Stats");
            f!(
                "total_connections_received:{}",
                s.total_connections_received
            );
            f!("total_commands_processed:{}", s.total_commands_processed);
            f!(
                "instantaneous_ops_per_sec:{}",
                srv.ops_metric.value() as u64
            );
            f!("total_net_input_bytes:{}", s.net_input_bytes);
            f!("total_net_output_bytes:{}", s.net_output_bytes);
            f!("total_net_repl_input_bytes:{}", s.net_repl_input_bytes);
            f!("total_net_repl_output_bytes:{}", s.net_repl_output_bytes);
            // The io_uring backend's own (docs/io-uring.md), when it runs.
            if let Some(u) = srv.uring.as_ref() {
                let st = u.stats();
                f!("io_uring_enters:{}", st.enters);
                f!("io_uring_submissions:{}", st.submitted);
                f!("io_uring_completions:{}", st.completions);
                f!("io_uring_recv_nobufs:{}", st.recv_nobufs);
                f!("io_uring_direct_reads:{}", st.direct_reads);
                f!("io_uring_short_sends:{}", st.short_sends);
            }
            f!(
                "instantaneous_input_kbps:{:.2}",
                srv.net_in_metric.value() / 1024.0
            );
            f!(
                "instantaneous_output_kbps:{:.2}",
                srv.net_out_metric.value() / 1024.0
            );
            f!(
                "instantaneous_input_repl_kbps:{:.2}",
                srv.net_repl_in_metric.value() / 1024.0
            );
            f!(
                "instantaneous_output_repl_kbps:{:.2}",
                srv.net_repl_out_metric.value() / 1024.0
            );
            f!("rejected_connections:{}", s.rejected_connections);
            f!("sync_full:{}", srv.repl.stats.sync_full);
            f!("sync_partial_ok:{}", srv.repl.stats.sync_partial_ok);
            f!("sync_partial_err:{}", srv.repl.stats.sync_partial_err);
            f!("expired_keys:{}", s.expired_keys);
            f!("expired_subkeys:{}", s.expired_subkeys);
            f!("expired_stale_perc:{:.2}", s.expired_stale_perc * 100.0);
            f!(
                "expired_time_cap_reached_count:{}",
                s.expired_time_cap_reached_count
            );
            f!(
                "expire_cycle_cpu_milliseconds:{}",
                s.expire_cycle_cpu_milliseconds
            );
            f!("evicted_keys:{}", srv.eviction.evicted_keys);
            f!("evicted_clients:{}", s.evicted_clients);
            let (exceeded_total, exceeded_now) = srv.eviction.exceeded_ms();
            f!("total_eviction_exceeded_time:{exceeded_total}");
            f!("current_eviction_exceeded_time:{exceeded_now}");
            f!("keyspace_hits:{}", s.keyspace_hits);
            f!("keyspace_misses:{}", s.keyspace_misses);
            {
                use crate::pubsub::Kind;
                f!(
                    "pubsub_channels:{}",
                    srv.pubsub.channel_count(Kind::Channel)
                );
                f!("pubsub_patterns:{}", srv.pubsub.pattern_count());
                f!(
                    "pubsubshard_channels:{}",
                    srv.pubsub.channel_count(Kind::Shard)
                );
            }
            // Snapshots are fork-free: no fork ever happens.
            f!("latest_fork_usec:0");
            f!("total_forks:0");
            // MIGRATE opens a connection per call and keeps none.
            f!("migrate_cached_sockets:0");
            // A writable replica's own keys with a TTL: ferrokv replicas
            // take writes only from their master.
            f!("slave_expires_tracked_keys:0");
            // No active defragmentation (see `active_defrag_running`).
            f!("active_defrag_hits:0");
            f!("active_defrag_misses:0");
            f!("active_defrag_key_hits:0");
            f!("active_defrag_key_misses:0");
            f!("total_active_defrag_time:0");
            f!("current_active_defrag_time:0");
            f!("tracking_total_keys:{}", srv.tracking.total_keys());
            f!("tracking_total_items:{}", srv.tracking.total_items());
            f!("tracking_total_prefixes:{}", srv.tracking.total_prefixes());
            f!("unexpected_error_replies:{}", s.unexpected_error_replies);
            f!("total_error_replies:{}", s.total_error_replies);
            f!(
                "dump_payload_sanitizations:{}",
                s.dump_payload_sanitizations
            );
            f!("total_reads_processed:{}", s.total_reads_processed);
            f!("total_writes_processed:{}", s.total_writes_processed);
            // Reads and writes the I/O threads made (`io-threads`).
            let (tr, tw) = srv
                .io_threads
                .as_ref()
                .map_or((0, 0), |io| (io.threaded_reads, io.threaded_writes));
            f!("io_threaded_reads_processed:{tr}");
            f!("io_threaded_writes_processed:{tw}");
            // Reply buffers come from a pool and go back to it whole.
            f!("reply_buffer_shrinks:0");
            f!("reply_buffer_expands:0");
            // ferrokv's own.
            let st = srv.scripting.stats;
            f!("scripts_killed:{}", st.killed);
            f!("busy_scripts:{}", st.busy_scripts);
            f!("busy_replies:{}", st.busy_replies);
            f!(
                "client_query_buffer_limit_disconnections:{}",
                s.client_qbuf_limit_disconnections
            );
            f!(
                "client_output_buffer_limit_disconnections:{}",
                s.client_outbuf_limit_disconnections
            );
            f!("client_output_pauses:{}", s.client_output_pauses);
            // ACL denials, with Redis 7.2's names (7.0 has none).
            let a = srv.acl.stats;
            f!("acl_access_denied_auth:{}", a.denied_auth);
            f!("acl_access_denied_cmd:{}", a.denied_cmd);
            f!("acl_access_denied_key:{}", a.denied_key);
            f!("acl_access_denied_channel:{}", a.denied_channel);
        }
        "cpu" => {
            let ((u, sy), (mu, ms)) = cpu_times();
            f!("# CPU");
            f!("used_cpu_sys:{sy:.6}");
            f!("used_cpu_user:{u:.6}");
            f!("used_cpu_sys_children:0.000000");
            f!("used_cpu_user_children:0.000000");
            f!("used_cpu_sys_main_thread:{ms:.6}");
            f!("used_cpu_user_main_thread:{mu:.6}");
        }
        "threads" => {
            // ferrokv's own: the I/O threads (crates/net/src/io_threads.rs). Thread 0
            // is the execution thread, with the reads and writes it made
            // itself.
            f!("# Threads");
            let io = srv.io_threads.as_deref();
            f!("io_threads:{}", srv.config.io_threads);
            f!(
                "io_threads_do_reads:{}",
                u8::from(srv.config.io_threads_do_reads)
            );
            f!("io_threads_allowed:{}", io.map_or(0, |io| io.allowed()));
            f!(
                "io_threads_active:{}",
                u8::from(io.is_some_and(|io| io.active))
            );
            f!("io_threaded_batches:{}", io.map_or(0, |io| io.batches));
            f!(
                "io_threaded_batch_jobs:{}",
                io.map_or(0, |io| io.batch_jobs)
            );
            let s = &srv.stats;
            let (tr, tw) = io.map_or((0, 0), |io| (io.threaded_reads, io.threaded_writes));
            let (mu, ms) = cpu_times().1;
            f!(
                "io_thread_0:name=execution,reads={},writes={},cpu_sec={:.6}",
                s.total_reads_processed.saturating_sub(tr),
                s.total_writes_processed.saturating_sub(tw),
                mu + ms
            );
            for (i, t) in io.into_iter().flat_map(|io| io.thread_stats()).enumerate() {
                use std::sync::atomic::Ordering::Relaxed;
                let tid = t.tid.load(Relaxed);
                let cpu = crate::net::io_threads::thread_cpu_seconds(tid).unwrap_or(0.0);
                f!(
                    "io_thread_{}:name=io-thread-{},reads={},writes={},read_bytes={},write_bytes={},parsed={},batches={},cpu_sec={cpu:.6}",
                    i + 1,
                    i + 1,
                    t.reads.load(Relaxed),
                    t.writes.load(Relaxed),
                    t.read_bytes.load(Relaxed),
                    t.write_bytes.load(Relaxed),
                    t.parsed.load(Relaxed),
                    t.batches.load(Relaxed),
                );
            }
        }
        // No modules can be loaded: the header alone, as Redis prints it
        // with none loaded.
        "modules" => f!("# Modules"),
        "cluster" => {
            f!("# Cluster");
            f!("cluster_enabled:{}", srv.cluster.is_some() as u8);
        }
        "errorstats" => {
            f!("# Errorstats");
            let mut v: Vec<_> = srv.error_stats.iter().collect();
            v.sort();
            for (code, n) in v {
                f!("errorstat_{code}:count={n}");
            }
        }
        "commandstats" => {
            f!("# Commandstats");
            for (i, spec) in srv.commands.specs.iter().enumerate() {
                let st = &srv.cmd_stats[i];
                if st.calls == 0 && st.rejected_calls == 0 && st.failed_calls == 0 {
                    continue;
                }
                let per = if st.calls > 0 {
                    st.usec as f64 / st.calls as f64
                } else {
                    0.0
                };
                f!(
                    "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                    spec.name,
                    st.calls,
                    st.usec,
                    st.rejected_calls,
                    st.failed_calls
                );
            }
        }
        "latencystats" => {
            f!("# Latencystats");
            // As Redis: the header alone while tracking is off.
            if srv.config.latency_tracking {
                for (i, spec) in srv.commands.specs.iter().enumerate() {
                    if let Some(h) = srv.latency_stats.get(i) {
                        f!(
                            "latency_percentiles_usec_{}:{}",
                            spec.name,
                            crate::commands::latency::percentiles_field(
                                h,
                                &srv.config.latency_tracking_info_percentiles
                            )
                        );
                    }
                }
            }
        }
        "keyspace" => {
            f!("# Keyspace");
            let now = srv.now_ms;
            for (i, db) in srv.keyspace.dbs.iter().enumerate() {
                if db.is_empty() {
                    continue;
                }
                // Average TTL over a sample of keys with an expiry, as Redis
                // estimates it.
                let mut sum = 0i64;
                let mut n = 0i64;
                for e in db.iter().filter(|e| e.has_expire()).take(1000) {
                    sum += (e.expire_at - now).max(0);
                    n += 1;
                }
                let avg = if n > 0 { sum / n } else { 0 };
                f!(
                    "db{i}:keys={},expires={},avg_ttl={avg}",
                    db.len(),
                    db.expires()
                );
            }
        }
        _ => {}
    }
}
