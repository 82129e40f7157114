//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP, as Redis 7.0
//! answers them, with figures from ferrokv's own layout (docs/info.md):
//!
//! - `MEMORY USAGE key [SAMPLES n]` is the key's slot in its table (the
//!   64-byte entry and its share of the index) plus the heap the entry
//!   owns: nothing more for a key and value packed in the entry, else the
//!   key's bytes and the value's structure. Hash, set and sorted-set
//!   tables estimate their elements' own heap from `n` of them at even
//!   strides (default 5; 0: all), as Redis samples. Lists and streams are
//!   summed over their blocks. The key is found as Redis's `dictFind`
//!   finds it: an expired key not yet removed still has a size.
//! - `MEMORY STATS` and `INFO memory` share [`overhead`], Redis's
//!   `getMemoryOverheadData`.

use super::flags::*;
use super::{err, is, reply_help, CommandSpec, Ctx};
use crate::server::Server;
use ferrokv_resp::Args;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("server")
        .since("4.0.0")
}

pub static COMMANDS: &[CommandSpec] = &[cmd("memory", -2, 0, memory_help)
    .doc("A container for memory diagnostics commands.", "")
    .subs(SUBS)];

static SUBS: &[CommandSpec] = &[
    cmd("memory|usage", -3, READONLY, memory_usage)
        .keys(2, 2, 1)
        .complexity("O(N) where N is the number of samples.")
        .doc(
            "Estimates the memory usage of a key.",
            "key [SAMPLES count]",
        ),
    cmd("memory|stats", 2, 0, memory_stats).doc("Returns details about memory usage.", ""),
    cmd("memory|doctor", 2, 0, memory_doctor).doc("Outputs a memory problems report.", ""),
    cmd("memory|malloc-stats", 2, 0, memory_malloc_stats)
        .complexity("Depends on how much memory is allocated, could be slow")
        .doc("Returns the allocator statistics.", ""),
    cmd("memory|purge", 2, 0, memory_purge)
        .complexity("Depends on how much memory is allocated, could be slow")
        .doc("Asks the allocator to release memory.", ""),
    cmd("memory|help", 2, LOADING | STALE, memory_help)
        .complexity("O(1)")
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`.
const DEFAULT_SAMPLES: usize = 5;

/// Where the memory goes (Redis's `struct redisMemOverhead`).
pub struct Overhead {
    pub peak: u64,
    pub total: u64,
    pub startup: u64,
    pub backlog: u64,
    /// What waits to be sent to replicas (backlog excluded).
    pub replica_buffers: u64,
    pub clients_replicas: u64,
    pub clients_normal: u64,
    pub aof_buffer: u64,
    pub eval_caches: u64,
    pub functions_caches: u64,
    /// Per database with keys: (index, hash-table bytes, keys).
    pub dbs: Vec<(usize, u64, u64)>,
    /// Hash-table bytes of every database, empty ones included.
    pub tables: u64,
    pub overhead_total: u64,
    pub dataset: u64,
    pub keys: u64,
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub rss: u64,
}

impl Overhead {
    /// `used_memory` less what the server had at start (at least 1).
    pub fn net_usage(&self) -> u64 {
        self.total.saturating_sub(self.startup).max(1)
    }
    pub fn dataset_perc(&self) -> f64 {
        // Redis keeps these ratios as C floats.
        (self.dataset as f32 * 100.0 / self.net_usage() as f32) as f64
    }
    pub fn peak_perc(&self) -> f64 {
        (self.total as f32 * 100.0 / self.peak.max(1) as f32) as f64
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b > 0 {
        (a as f32 / b as f32) as f64
    } else {
        0.0
    }
}

/// Redis's `getMemoryOverheadData` over ferrokv's parts. `Server::other_clients`
/// leaves out the client that asks, as it is out of the table meanwhile.
pub fn overhead(srv: &Server) -> Overhead {
    let total = crate::alloc::used_memory() as u64;
    let peak = (srv.peak_memory as u64).max(total);
    let startup = srv.startup_memory as u64;
    let backlog = srv.repl.backlog.as_ref().map_or(0, |b| b.size()) as u64;
    let replica_buffers = srv.replica_buffered_bytes() as u64;
    let (mut clients_normal, mut clients_replicas) = (0u64, 0u64);
    for c in srv.other_clients() {
        if srv.repl.is_replica_client(c.id) {
            clients_replicas += c.memory_usage() as u64;
        } else {
            clients_normal += c.memory_usage() as u64;
        }
    }
    clients_replicas += srv
        .repl
        .master
        .replicas
        .iter()
        .map(|r| r.pending.capacity() as u64)
        .sum::<u64>();
    let aof_buffer = srv.aof.as_ref().map_or(0, |a| a.buffered()) as u64;
    let sc = &srv.scripting;
    let eval_caches = sc.cache.body_bytes as u64;
    let functions_caches = sc.functions.code_bytes() as u64;
    let mut dbs = Vec::new();
    let mut tables = 0;
    let mut keys = 0;
    for (i, d) in srv.keyspace.dbs.iter().enumerate() {
        let bytes = d.table_bytes() as u64;
        tables += bytes;
        if !d.is_empty() {
            keys += d.len() as u64;
            dbs.push((i, bytes, d.len() as u64));
        }
    }
    let overhead_total = startup
        + backlog
        + clients_replicas
        + clients_normal
        + aof_buffer
        + eval_caches
        + functions_caches
        + tables;
    let active = (crate::alloc::allocator_committed() as u64).max(total);
    Overhead {
        peak,
        total,
        startup,
        backlog,
        replica_buffers,
        clients_replicas,
        clients_normal,
        aof_buffer,
        eval_caches,
        functions_caches,
        dbs,
        tables,
        overhead_total,
        dataset: total.saturating_sub(overhead_total),
        keys,
        allocated: total,
        active,
        // mimalloc on Linux estimates its resident memory as what it has
        // committed.
        resident: active,
        rss: crate::alloc::rss_bytes() as u64,
    }
}

/// MEMORY HELP, and MEMORY with an unknown subcommand.
fn memory_help(ctx: &mut Ctx, args: Args) {
    if args.len() >= 2 && !is(args.get(1), "help") {
        let sub = String::from_utf8_lossy(args.get(1));
        ctx.error(&format!("ERR unknown subcommand '{sub}'. Try MEMORY HELP."));
        return;
    }
    reply_help(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
}

/// MEMORY USAGE key [SAMPLES count]
fn memory_usage(ctx: &mut Ctx, args: Args) {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < args.len() {
        if is(args.get(i), "samples") && i + 1 < args.len() {
            let Some(n) = ferrokv_resp::parse_i64(args.get(i + 1)) else {
                return ctx.error(err::NOT_INTEGER);
            };
            if n < 0 {
                return ctx.error(err::SYNTAX);
            }
            samples = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return ctx.error(err::SYNTAX);
        }
    }
    let db = ctx.client.db;
    match ctx.srv.keyspace.dbs[db].get(args.get(2)) {
        Some(e) => {
            let n = e.memory_usage(samples);
            ctx.client.out.int(n as i64)
        }
        None => ctx.client.out.null(),
    }
}

/// MEMORY STATS: Redis 7.0.15's fields in its order.
fn memory_stats(ctx: &mut Ctx, _args: Args) {
    let m = overhead(ctx.srv);
    let out = &mut ctx.client.out;
    out.map(27 + m.dbs.len());
    let int = |out: &mut crate::net::client::Reply, k: &str, v: u64| {
        out.bulk(k.as_bytes());
        out.int(v as i64);
    };
    int(out, "peak.allocated", m.peak);
    int(out, "total.allocated", m.total);
    int(out, "startup.allocated", m.startup);
    int(out, "replication.backlog", m.backlog);
    int(out, "clients.slaves", m.clients_replicas);
    int(out, "clients.normal", m.clients_normal);
    let links = ctx.srv.cluster.as_ref().map_or(0, |c| c.links.memory());
    int(out, "cluster.links", links as u64);
    int(out, "aof.buffer", m.aof_buffer);
    int(out, "lua.caches", m.eval_caches);
    int(out, "functions.caches", m.functions_caches);
    for &(db, table, _) in &m.dbs {
        out.bulk(format!("db.{db}").as_bytes());
        out.map(3);
        int(out, "overhead.hashtable.main", table);
        // TTLs live in the entries: there is no second table for them.
        int(out, "overhead.hashtable.expires", 0);
        // Cluster mode's per-slot key index (crates/store/src/slots.rs).
        let index = ctx.srv.keyspace.dbs[db]
            .slot_index()
            .map_or(0, |ix| ix.heap_bytes());
        int(out, "overhead.hashtable.slot-to-keys", index as u64);
    }
    int(out, "overhead.total", m.overhead_total);
    int(out, "keys.count", m.keys);
    int(
        out,
        "keys.bytes-per-key",
        m.net_usage().checked_div(m.keys).unwrap_or(0),
    );
    int(out, "dataset.bytes", m.dataset);
    let dbl = |out: &mut crate::net::client::Reply, k: &str, v: f64| {
        out.bulk(k.as_bytes());
        out.double(v);
    };
    dbl(out, "dataset.percentage", m.dataset_perc());
    dbl(out, "peak.percentage", m.peak_perc());
    int(out, "allocator.allocated", m.allocated);
    int(out, "allocator.active", m.active);
    int(out, "allocator.resident", m.resident);
    dbl(
        out,
        "allocator-fragmentation.ratio",
        ratio(m.active, m.allocated),
    );
    int(out, "allocator-fragmentation.bytes", m.active - m.allocated);
    dbl(out, "allocator-rss.ratio", ratio(m.resident, m.active));
    int(out, "allocator-rss.bytes", m.resident - m.active);
    dbl(out, "rss-overhead.ratio", ratio(m.rss, m.resident));
    int(out, "rss-overhead.bytes", m.rss.saturating_sub(m.resident));
    dbl(out, "fragmentation", ratio(m.rss, m.total));
    int(out, "fragmentation.bytes", m.rss.saturating_sub(m.total));
}

/// MEMORY DOCTOR: Redis's `getMemoryDoctorReport` checks on ferrokv's
/// figures, in its words.
fn memory_doctor(ctx: &mut Ctx, _args: Args) {
    let report = doctor_report(ctx.srv);
    ctx.client.out.verbatim(report.as_bytes());
}

pub fn doctor_report(srv: &Server) -> String {
    const MB: u64 = 1 << 20;
    let m = overhead(srv);
    if m.total < 5 * MB {
        return "Hi Sam, this instance is empty or is using very little memory, my issues \
                detector can't be used in these conditions. Please, leave for your mission on \
                Earth and fill it with some data. The new Sam and I will be back to our \
                programming as soon as I finished rebooting.\n"
            .to_string();
    }
    let replicas = srv.repl.master.replicas.len() as u64;
    // The asking client is out of the table: count it back.
    let clients = (srv.connected_clients() as u64 + 1)
        .saturating_sub(replicas)
        .max(1);
    let mut issues: Vec<&str> = Vec::new();
    if ratio(m.peak, m.total) > 1.5 {
        issues.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the ferrokv instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the ferrokv instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if ratio(m.rss, m.total) > 1.4 && m.rss.saturating_sub(m.total) > 10 * MB {
        issues.push(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the ferrokv process is much larger than the sum of the logical allocations ferrokv performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Note: The currently used allocator is \"mimalloc\".\n\n");
    }
    if ratio(m.active, m.allocated) > 1.1 && m.active - m.allocated > 10 * MB {
        issues.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try the MEMORY PURGE command to return free pages.\n\n");
    }
    if ratio(m.rss, m.resident) > 1.1 && m.rss.saturating_sub(m.resident) > 10 * MB {
        issues.push(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the ferrokv process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts.\n\n");
    }
    if replicas > 0 && m.clients_replicas / replicas > 10 * MB {
        issues.push(" * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each replica (on average). This likely means that there is some replica instance that is struggling receiving data, either because it is too slow or because of networking issues. As a result, data piles on the master output buffers. Please try to identify what replica is not receiving data correctly and why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to check the output buffers of each replica.\n\n");
    }
    if m.clients_normal / clients > 200 * 1024 {
        issues.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the ferrokv instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
    }
    if srv.scripting.cache.len() > 1000 {
        issues.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for \
                what occurs on this base.\n"
            .to_string();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this ferrokv instance memory implants:\n\n");
    for i in issues {
        s.push_str(i);
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

/// MEMORY MALLOC-STATS: mimalloc's own report.
fn memory_malloc_stats(ctx: &mut Ctx, _args: Args) {
    let text = crate::alloc::stats_report();
    ctx.client.out.verbatim(text.as_bytes());
}

/// MEMORY PURGE: free pages back to the system now.
fn memory_purge(ctx: &mut Ctx, _args: Args) {
    let t = std::time::Instant::now();
    crate::alloc::purge();
    ctx.srv.stats.allocator_collect_usec += t.elapsed().as_micros() as u64;
    ctx.client.out.ok();
}
