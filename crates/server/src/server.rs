//! The server state the execution thread owns — keyspace, clients,
//! configuration, statistics — and the command pipeline: lookup, arity and
//! auth checks, the call, and its accounting (Redis's `processCommand` and
//! `call`).

use crate::commands::{err, CommandStats, CommandTable, Ctx};
use crate::config::Config;
use crate::net::client::{Client, ReplyMode};
use crate::net::pool::BufferPool;
use ferrokv_resp::Args;
use ferrokv_store::{Entry, Found, Keyspace, Lookup};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use slab::Slab;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Counters reported by `INFO stats`.
#[derive(Default, Debug, Clone)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub rejected_connections: u64,
    pub expired_keys: u64,
    /// Time the cron spent handing freed memory back to the system.
    pub allocator_collect_usec: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub total_error_replies: u64,
    pub unexpected_error_replies: u64,
    pub client_qbuf_limit_disconnections: u64,
    pub client_outbuf_limit_disconnections: u64,
    /// Clients closed by `maxmemory-clients`.
    pub evicted_clients: u64,
    /// Times a client's commands were paused on its unsent replies
    /// (`client-reply-backpressure`).
    pub client_output_pauses: u64,
    pub expire_cycle_cpu_milliseconds: u64,
    /// Hash fields removed because their TTL passed (Redis 7.4's `expired_subkeys`).
    pub expired_subkeys: u64,
    /// Running estimate of the share of keys with a TTL that are expired
    /// (Redis's `stat_expired_stale_perc`, from each active cycle's sample).
    pub expired_stale_perc: f64,
    /// Active expiry cycles that stopped at their time budget.
    pub expired_time_cap_reached_count: u64,
    /// Bytes read from our master and written to our replicas (counted
    /// apart from `net_input_bytes`/`net_output_bytes`, as Redis 7.0 does).
    pub net_repl_input_bytes: u64,
    pub net_repl_output_bytes: u64,
    /// Socket reads and writes the loop made (`total_reads_processed`,
    /// `total_writes_processed`).
    pub total_reads_processed: u64,
    pub total_writes_processed: u64,
    /// DUMP payloads checked in full before RESTORE installs them (all
    /// of them: ferrokv always checks, `sanitize-dump-payload` or not).
    pub dump_payload_sanitizations: u64,
}

/// What the lazy-free thread has to do and has done (`INFO memory`'s
/// `lazyfree_pending_objects` and `lazyfreed_objects`).
#[derive(Default)]
pub struct LazyFreeCounts {
    pub pending: std::sync::atomic::AtomicU64,
    pub freed: std::sync::atomic::AtomicU64,
}

/// Samples for `instantaneous_ops_per_sec` and friends (Redis keeps 16).
#[derive(Default)]
pub struct InstantMetric {
    samples: [f64; 16],
    idx: usize,
    last_time: Option<Instant>,
    last_value: u64,
}

impl InstantMetric {
    pub fn sample(&mut self, now: Instant, value: u64) {
        if let Some(t) = self.last_time {
            let dt = now.duration_since(t).as_secs_f64();
            if dt > 0.0 {
                // A counter reset by CONFIG RESETSTAT counts from zero.
                let delta = value.checked_sub(self.last_value).unwrap_or(value);
                self.samples[self.idx] = delta as f64 / dt;
                self.idx = (self.idx + 1) % self.samples.len();
            }
        }
        self.last_time = Some(now);
        self.last_value = value;
    }
    pub fn value(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }
}

pub struct Server {
    pub config: Config,
    pub keyspace: Keyspace,
    pub commands: CommandTable,
    pub cmd_stats: Vec<CommandStats>,
    pub error_stats: HashMap<String, u64>,
    /// Connections by mio token. The client being served is taken out of
    /// its slot while its commands run, so handlers can hold it and the
    /// server at once.
    pub clients: Slab<Option<Box<Client>>>,
    pub next_client_id: u64,
    pub pool: BufferPool,
    /// Tokens of clients with replies to write before the loop sleeps.
    pub pending_writes: Vec<usize>,
    /// Clients that used their read budget and have more to read.
    pub pending_reads: Vec<usize>,
    /// RDMA client connections being established, and their counters.
    pub rdma_conns: crate::net::rdma::RdmaPending,
    /// Tokens of other clients to close before the loop sleeps (`CLIENT KILL`).
    pub close_queue: Vec<usize>,
    pub stats: Stats,
    pub ops_metric: InstantMetric,
    pub net_in_metric: InstantMetric,
    pub net_out_metric: InstantMetric,
    pub net_repl_in_metric: InstantMetric,
    pub net_repl_out_metric: InstantMetric,
    /// `used_memory` when the server had started, before any data
    /// (`used_memory_startup`).
    pub startup_memory: usize,
    /// Changes since start (Redis's `server.dirty`).
    pub dirty: u64,
    pub start: Instant,
    pub start_unix: u64,
    pub run_id: String,
    pub rng: SmallRng,
    /// Unix ms of the current loop turn.
    pub now_ms: i64,
    /// The LRU clock: seconds, 24 bits, as Redis.
    pub lru_clock: u32,
    /// The command running leaves the access clocks alone (`CLIENT
    /// NO-TOUCH`; set per command by `call_from`).
    pub no_touch: bool,
    /// A `CLIENT NO-TOUCH` client is the caller of what runs now (its
    /// script's or transaction's commands inherit the mode).
    pub caller_no_touch: bool,
    /// The loop exits at the end of this turn (a shutdown finished).
    pub shutdown_requested: bool,
    /// A shutdown waiting for replicas, its blocked clients (shutdown.rs).
    pub shutdown: crate::shutdown::Shutdown,
    /// `DEBUG PAUSE-CRON 1`: the cron (and the signals it acts on) holds.
    pub cron_paused: bool,
    pub tcp_port: u16,
    /// `oom-score-adj` (oom.rs).
    pub oom: crate::oom::OomScore,
    pub peak_memory: usize,
    pub cron_loops: u64,
    /// `DEBUG SET-ACTIVE-EXPIRE`.
    pub active_expire_enabled: bool,
    /// Unix seconds of the last successful save (start time until one).
    pub lastsave: u64,
    pub persistence: crate::persistence::PersistenceState,
    pub propagation: crate::propagate::Propagation,
    /// The append-only file, when `appendonly yes`.
    pub aof: Option<crate::persistence::aof::Aof>,
    /// An AOF rewrite asked for while a save ran.
    /// `appendonly yes` was set at run time and its first rewrite (the
    /// base holding the data set) has not finished: the AOF alone does not
    /// hold the data yet (Redis's `AOF_WAIT_REWRITE`).
    pub aof_first_rewrite: bool,
    /// Commands fed to the AOF since start (every AOF this process had),
    /// and the mark an fsync made durable (`WAITAOF`; a replica's `REPLCONF
    /// ACK … FACK`).
    pub aof_fed: u64,
    pub aof_durable: crate::persistence::aof::FsyncMark,
    /// A `BGREWRITEAOF` with `appendonly no` in progress.
    pub aof_off_rewrite: Option<crate::persistence::aof::OffRewrite>,
    /// `aof_rewrites`, `aof_last_bgrewrite_status`, ... (AOF on or off).
    pub aof_rewrite_stats: crate::persistence::aof::RewriteStats,
    pub aof_rewrite_scheduled: bool,
    pub aof_last_rewrite_secs: Option<f64>,
    /// `SLOWLOG`.
    pub slowlog: crate::commands::slowlog::SlowLog,
    /// `LATENCY LATEST` / `HISTORY`: spikes above `latency-monitor-threshold`.
    pub latency_monitor: crate::commands::latency::LatencyMonitor,
    /// `INFO latencystats`: every command's execution-time distribution.
    pub latency_stats: crate::commands::latency::CommandLatencies,
    /// The `/metrics` endpoint, when `metrics-port` is set: the cron
    /// publishes a snapshot to it.
    pub metrics: Option<crate::metrics::MetricsEndpoint>,
    /// Pub/sub channels and patterns and their subscribers.
    pub pubsub: crate::pubsub::PubSub,
    /// ACL users and the per-command check (`acl/`).
    pub acl: crate::acl::Acl,
    /// Clients in `MONITOR` mode.
    pub monitors: crate::monitor::Monitors,
    /// Keys lookups found expired or missing, to announce after the lookup.
    pub pending_events: crate::notify::PendingEvents,
    /// WATCHed keys and their watchers.
    pub watches: crate::commands::multi::Watches,
    /// Client-side caching: tracking clients and the keys they may cache.
    pub tracking: crate::tracking::Tracking,
    /// Replication: our replicas, our master link, the backlog.
    pub repl: crate::replication::ReplState,
    /// Clients blocked on keys (BLPOP and friends).
    pub blocking: crate::blocking::Blocking,
    /// `CLIENT PAUSE` and the failover's write pause.
    pub pause: crate::pause::ClientPause,
    lazyfree: std::sync::mpsc::Sender<Box<dyn Send>>,
    pub lazyfree_counts: std::sync::Arc<LazyFreeCounts>,
    /// `maxmemory` eviction state.
    pub eviction: crate::evict::Eviction,
    /// The AOF is being replayed (its commands are not in the slow log
    /// nor the latency figures).
    pub loading_aof: bool,
    /// The data set is loading at start-up, the clients served meanwhile
    /// (`busy::pump`): only commands flagged `loading` run.
    pub loading: Option<crate::persistence::load::Loading>,
    /// Memory could not be freed before the command now running (Redis's
    /// `pre_command_oom_state`): set by dispatch, read by scripts.
    pub pre_command_oom: bool,
    /// Lua scripts and functions.
    pub scripting: crate::scripting::Scripting,
    /// The listening sockets (the reactor accepts on them; so does a busy
    /// script's pump).
    pub listeners: Vec<crate::net::conn::Listener>,
    /// The rustls configurations built from the `tls-*` configs
    /// (`crates/net/src/tls.rs`), replaced whole by a `CONFIG SET` of one of them.
    pub tls: crate::net::tls::TlsContext,
    /// The io_uring backend's ring (`io-backend`), when the loop runs on
    /// it: client TCP and Unix connections receive and send through it.
    pub uring: Option<Box<crate::net::uring::Uring>>,
    /// `io-threads` > 1: the I/O threads (crates/net/src/io_threads.rs).
    pub io_threads: Option<Box<crate::net::io_threads::IoThreads>>,
    /// Cluster mode (`cluster-enabled yes`): the node table, the bus
    /// links (`cluster/`). `None` otherwise.
    pub cluster: Option<Box<crate::cluster::Cluster>>,
    /// The database the active field-expiry cycle resumes at
    /// (`field_expiry.rs`; state of the cycle, not a counter: RESETSTAT
    /// leaves it).
    pub field_expiry_db: usize,
}

pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Values owning at least this many heap bytes are freed off the loop.
pub const LAZYFREE_THRESHOLD: usize = 64 * 1024;

/// Commands with at most this many arguments are propagated from a stack
/// array rather than a collected `Vec` (one allocation less per write).
const SMALL_ARGV: usize = 8;

pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

impl Server {
    pub fn new(config: Config) -> Self {
        let commands = CommandTable::new();
        let n = commands.len();
        let now = unix_ms();
        let mut rng = SmallRng::from_entropy();
        let run_id = random_hex(&mut rng, 40);
        let repl = crate::replication::ReplState::new(&config.repl, &mut rng);
        let mut pool = BufferPool::new(256);
        // The script client's id: Redis gives its Lua client one as well.
        let scripting = crate::scripting::Scripting::new(
            &mut pool,
            crate::scripting::SCRIPT_CLIENT_ID,
            config.lua_heap_limit as usize,
        );
        let lazyfree_counts = std::sync::Arc::new(LazyFreeCounts::default());
        let mut acl = crate::acl::Acl::new(&commands);
        acl.pubsub_default_all = config.acl_pubsub_default_all;
        acl.set_requirepass(config.requirepass.as_deref());
        let mut srv = Server {
            keyspace: Keyspace::new(config.databases as usize),
            config,
            commands,
            cmd_stats: vec![CommandStats::default(); n],
            error_stats: HashMap::new(),
            clients: Slab::new(),
            next_client_id: 1,
            pool,
            pending_writes: Vec::new(),
            close_queue: Vec::new(),
            pending_reads: Vec::new(),
            rdma_conns: Default::default(),
            stats: Stats::default(),
            ops_metric: InstantMetric::default(),
            net_in_metric: InstantMetric::default(),
            net_out_metric: InstantMetric::default(),
            net_repl_in_metric: InstantMetric::default(),
            net_repl_out_metric: InstantMetric::default(),
            startup_memory: 0,
            dirty: 0,
            start: Instant::now(),
            start_unix: (now / 1000) as u64,
            run_id,
            rng,
            now_ms: now,
            lru_clock: ((now / 1000) as u32) & LRU_CLOCK_MAX,
            no_touch: false,
            caller_no_touch: false,
            shutdown_requested: false,
            shutdown: Default::default(),
            cron_paused: false,
            tcp_port: 0,
            oom: Default::default(),
            peak_memory: 0,
            cron_loops: 0,
            active_expire_enabled: true,
            lastsave: (now / 1000) as u64,
            persistence: crate::persistence::PersistenceState::new((now / 1000) as u64),
            propagation: Default::default(),
            aof: None,
            aof_rewrite_scheduled: false,
            aof_first_rewrite: false,
            aof_fed: 0,
            aof_durable: Default::default(),
            aof_off_rewrite: None,
            aof_rewrite_stats: Default::default(),
            aof_last_rewrite_secs: None,
            slowlog: Default::default(),
            latency_monitor: Default::default(),
            latency_stats: crate::commands::latency::CommandLatencies::new(n),
            metrics: None,
            pubsub: Default::default(),
            acl,
            monitors: Default::default(),
            pending_events: Default::default(),
            watches: Default::default(),
            tracking: Default::default(),
            repl,
            blocking: Default::default(),
            pause: Default::default(),
            lazyfree: spawn_lazyfree(lazyfree_counts.clone()),
            lazyfree_counts,
            eviction: Default::default(),
            pre_command_oom: false,
            loading_aof: false,
            loading: None,
            scripting,
            listeners: Vec::new(),
            tls: Default::default(),
            uring: None,
            io_threads: None,
            cluster: None,
            field_expiry_db: 0,
        };
        if srv.config.cluster.enabled {
            // The per-slot key index, kept from the first key loaded.
            srv.keyspace.dbs[0].set_slot_index(true);
        }
        srv.refresh_lru_clock();
        srv.startup_memory = crate::alloc::used_memory();
        srv
    }

    /// A key found expired by a lookup: counted, and propagated as `DEL`
    /// (before the command that noticed it). Takes the fields it needs so
    /// callers can hold a borrow of the keyspace meanwhile.
    fn note_expired(
        stats: &mut Stats,
        blocking: &mut crate::blocking::Blocking,
        propagation: &mut crate::propagate::Propagation,
        pending: Option<&mut crate::notify::PendingEvents>,
        db: usize,
        key: &[u8],
    ) {
        stats.expired_keys += 1;
        // A consumer blocked on a stream that expired ends its wait.
        blocking.signal(key);
        if let Some(p) = pending {
            p.expired.push((db, key.to_vec()));
        }
        propagation
            .also
            .push((db, vec![b"DEL".to_vec(), key.to_vec()]));
    }

    /// [`Self::note_expired`] for a caller that holds no borrow of the
    /// keyspace: a lookup that has the removed entry, or SET's one-probe
    /// path, which replaced an expired entry without looking it up first
    /// (Redis's SET finds the key expired and deletes it first).
    pub fn note_key_expired(&mut self, db: usize, key: &[u8]) {
        let wants = self.wants_expired_events();
        let pending = wants.then_some(&mut self.pending_events);
        Self::note_expired(
            &mut self.stats,
            &mut self.blocking,
            &mut self.propagation,
            pending,
            db,
            key,
        );
    }

    /// Looks a key up for reading: lazy expiry, hit/miss counters, access clock.
    #[inline]
    pub fn lookup_read(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        let wants = self.wants_expired_events();
        if self.config.notify_keyspace_events & crate::notify::NOTIFY_KEY_MISS != 0 {
            return self.lookup_read_noting_misses(db, key, now_ms);
        }
        let access = self.access_unless_no_touch();
        // A replica waits for its master's DEL (Redis's expireIfNeeded).
        let expire = self.deletes_expired_keys();
        match self.keyspace.dbs[db].lookup_read(key, now_ms, expire, access) {
            Found::Live(e) => {
                self.stats.keyspace_hits += 1;
                Some(e)
            }
            Found::Expired(e) => {
                let pending = wants.then_some(&mut self.pending_events);
                Self::note_expired(
                    &mut self.stats,
                    &mut self.blocking,
                    &mut self.propagation,
                    pending,
                    db,
                    e.key(),
                );
                self.stats.keyspace_misses += 1;
                None
            }
            Found::Missing => {
                self.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// [`Self::lookup_read`] when `keymiss` events are on: a miss is queued
    /// for announcing (off the fast path, which stays branch-light).
    fn lookup_read_noting_misses(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        let access = self.access_unless_no_touch();
        self.lookup_read_counted(db, key, now_ms, access)
    }

    /// Redis's `LOOKUP_NOTOUCH` (TYPE, EXISTS, TTL and the other expiry
    /// readers): lazy expiry and the hit/miss counters (and `keymiss`
    /// events) as [`Self::lookup_read`], but the access clock is left as
    /// it was, so `OBJECT IDLETIME` and eviction see no access.
    pub fn lookup_read_notouch(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.lookup_read_counted(db, key, now_ms, None)
    }

    /// A read lookup that counts its hit or miss and announces a miss
    /// when `keymiss` events are on; `access` (when given) is recorded.
    fn lookup_read_counted(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: i64,
        access: Option<ferrokv_store::Access>,
    ) -> Option<&Entry> {
        let expire = self.deletes_expired_keys();
        let found = match self.keyspace.dbs[db].lookup_read(key, now_ms, expire, access) {
            Found::Live(_) => true,
            Found::Expired(e) => {
                self.note_key_expired(db, e.key());
                false
            }
            Found::Missing => false,
        };
        if !found {
            self.stats.keyspace_misses += 1;
            if self.config.notify_keyspace_events & crate::notify::NOTIFY_KEY_MISS != 0 {
                self.pending_events.missed.push((db, key.to_vec()));
            }
            return None;
        }
        self.stats.keyspace_hits += 1;
        self.keyspace.dbs[db].get(key)
    }

    /// Looks a key up without it counting as an access (`OBJECT`,
    /// `DEBUG`): lazy expiry, but no hit/miss counters, no access clock, and
    /// no copy-on-write for a snapshot in progress.
    pub fn peek(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        let wants = self.wants_expired_events();
        let expire = self.deletes_expired_keys();
        match self.keyspace.dbs[db].lookup_read(key, now_ms, expire, None) {
            Found::Live(e) => Some(e),
            Found::Expired(e) => {
                let pending = wants.then_some(&mut self.pending_events);
                Self::note_expired(
                    &mut self.stats,
                    &mut self.blocking,
                    &mut self.propagation,
                    pending,
                    db,
                    e.key(),
                );
                None
            }
            Found::Missing => None,
        }
    }

    /// Looks a key up for writing: lazy expiry, no hit/miss counting.
    #[inline]
    pub fn lookup_write(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        let access = self.access_unless_no_touch();
        let wants = self.wants_expired_events();
        // (During a pause an expired key is missing but stays: no DEL.)
        let expire = !self.pause.active();
        match self.keyspace.dbs[db].lookup(key, now_ms, expire) {
            Lookup::Live(e) => {
                if let Some(access) = access {
                    e.touch(access);
                }
                Some(e)
            }
            Lookup::Expired(e) => {
                let pending = wants.then_some(&mut self.pending_events);
                Self::note_expired(
                    &mut self.stats,
                    &mut self.blocking,
                    &mut self.propagation,
                    pending,
                    db,
                    e.key(),
                );
                None
            }
            Lookup::Missing => None,
        }
    }

    /// Whether a key exists (and is live), without touching its clock.
    pub fn exists(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        self.peek(db, key, now_ms).is_some()
    }

    /// Runs one command for `client` and applies `CLIENT REPLY` to
    /// whatever it answered, rejections included (Redis's `resetClient`).
    pub fn execute(&mut self, client: &mut Client, args: Args) {
        let reply_mark = client.out.buf.len();
        // Pushes are kept whatever CLIENT REPLY says: note where they go
        // (only while replies may be dropped; nested runs keep the outer
        // record).
        let record = client.reply_mode != ReplyMode::On && client.out.push_spans.is_none();
        if record {
            client.out.push_spans = Some(Vec::new());
        }
        let tracked = self.tracking_before_command(client);
        let asking = client.asking;
        let client_cmd = self.dispatch(client, args);
        // ASKING holds for the one command after it (all of a MULTI).
        if asking && client.multi.is_none() && client.last_cmd != "asking" {
            client.asking = false;
        }
        // Keys this command (or this whole EXEC) made ready serve their
        // blocked clients now, before anything else runs.
        if self.blocking.has_ready() && !client.in_exec {
            crate::blocking::serve_ready(self);
        }
        match client.reply_mode {
            ReplyMode::Off | ReplyMode::Skip => client.out.truncate_keeping_pushes(reply_mark),
            ReplyMode::On | ReplyMode::SkipNext => {}
        }
        if record {
            client.out.push_spans = None;
        }
        // Invalidations for this client follow its reply, and are pushed
        // whatever its reply mode (as Redis's CLIENT_PUSHING).
        self.tracking_after_command(client, client_cmd, tracked);
        // `CLIENT REPLY SKIP` silences the command after it, whatever it is.
        client.reply_mode = match client.reply_mode {
            ReplyMode::Skip => ReplyMode::On,
            ReplyMode::SkipNext => ReplyMode::Skip,
            mode => mode,
        };
    }

    /// Runs one command of our master's stream on a replica: `idx` is its
    /// row, already looked up by the caller. A top-level command outside
    /// MULTI goes through the same checks as [`Server::dispatch`] (without
    /// a second lookup) and is timed from `t0`; anything else takes the
    /// whole [`Server::execute`] path. Returns the time it ended.
    pub fn execute_from_master(
        &mut self,
        client: &mut Client,
        idx: usize,
        args: Args,
        t0: Instant,
    ) -> Instant {
        let spec = self.commands.specs[idx];
        if client.multi.is_some() || !spec.subcommands.is_empty() || spec.name.contains('|') {
            self.execute(client, args);
            return Instant::now();
        }
        let flags = if spec.has(crate::commands::flags::SCRIPT_FLAGS) {
            crate::scripting::eval::dynamic_flags(self, spec, &args)
        } else {
            spec.flags
        };
        if let Some(msg) = self.refusal(client, spec, flags, args.len()) {
            self.reject(client, Some(spec.name), msg.as_bytes());
            self.cmd_stats[idx].rejected_calls += 1;
            return Instant::now();
        }
        let end = self.call_from(client, idx, args, t0);
        if self.blocking.has_ready() {
            crate::blocking::serve_ready(self);
        }
        end
    }

    /// Looks the command up, checks it and calls it (Redis's
    /// `processCommand`), or queues it inside MULTI.
    fn dispatch(&mut self, client: &mut Client, args: Args) -> bool {
        let name = args.get(0);
        // As Redis 7.0's processCommand: existence (subcommands included),
        // then arity, then authentication.
        // `object|encoding` names a subcommand's row (COMMAND INFO takes
        // it) but is no command a client can call.
        let top_level = |i: &usize| !self.commands.specs[*i].name.contains('|');
        let Some(idx) = self.commands.lookup(name).filter(top_level) else {
            self.reject(client, None, &unknown_command_error(&args));
            return false;
        };
        let mut idx = idx;
        let mut spec = self.commands.specs[idx];
        // Whether the command found is CLIENT (its subcommands keep a
        // `CLIENT CACHING` in force; an unknown subcommand finds nothing).
        let client_cmd = spec.name == "client";
        if !spec.subcommands.is_empty() && args.len() >= 2 {
            match self.commands.lookup_sub(spec.name, args.get(1)) {
                Some(sub) => {
                    idx = sub;
                    spec = self.commands.specs[sub];
                }
                None => {
                    let mut msg = b"ERR unknown subcommand '".to_vec();
                    msg.extend_from_slice(c_str(args.get(1), 128));
                    msg.extend_from_slice(
                        format!("'. Try {} HELP.", spec.name.to_ascii_uppercase()).as_bytes(),
                    );
                    self.reject(client, Some(spec.name), &msg);
                    return false;
                }
            }
        }
        let mut flags = if spec.has(crate::commands::flags::SCRIPT_FLAGS) {
            crate::scripting::eval::dynamic_flags(self, spec, &args)
        } else {
            spec.flags
        };
        // EXEC is refused as its queue would be (Redis's processCommand:
        // an EXEC of writes meets the read-only-replica, min-replicas and
        // disk-error checks as a write, now, not when they were queued).
        if let Some(tx) = &client.multi {
            if spec.name == "exec" {
                flags |= tx.cmd_flags & crate::commands::flags::WRITE;
            }
        }
        if let Some(msg) = self.refusal(client, spec, flags, args.len()) {
            self.reject(client, Some(spec.name), msg.as_bytes());
            self.cmd_stats[idx].rejected_calls += 1;
            return client_cmd;
        }
        // ACL: once per command, precomputed per user (acl/).
        if let Err((why, pos)) = self.acl.check(client.user, idx, &args) {
            let context = if client.multi.is_some() {
                crate::acl::log::Context::Multi
            } else {
                crate::acl::log::Context::Toplevel
            };
            self.acl_denied(client, idx, &args, why, pos, context);
            self.reject(client, Some(spec.name), why.error(spec.name).as_bytes());
            self.cmd_stats[idx].rejected_calls += 1;
            return client_cmd;
        }
        // Cluster mode: is the command's slot served here (`-MOVED`, ...)?
        if let Some(cl) = self.cluster.as_deref() {
            let route = cl.routes.get(idx).copied();
            let keyless = route == Some(crate::cluster::redirect::Route::Keyless);
            // (One key while every slot is ours and none moves: served here.)
            let here = route.is_some_and(|r| r.single_key()) && cl.serves_every_slot_stably();
            if !keyless && !here {
                if let Err(e) = crate::cluster::redirect::check(self, cl, client, idx, flags, &args)
                {
                    if spec.name == "exec" {
                        crate::commands::multi::discard_transaction(self, client);
                        client.out.error(&e);
                    } else {
                        self.reject(client, Some(spec.name), e.as_bytes());
                    }
                    self.cmd_stats[idx].rejected_calls += 1;
                    return client_cmd;
                }
            }
        }
        // A client pause holds the command (queueing it in MULTI too), as
        // the last check before it runs (docs/clients.md).
        if self.pause.active() && self.pause_holds(client, spec.name, flags) {
            client.last_cmd = spec.name;
            crate::blocking::postpone(self, client, &args);
            return client_cmd;
        }
        if client.multi.is_some() && !crate::commands::multi::runs_inside_multi(spec.name) {
            if let Some(tx) = client.multi.as_mut() {
                let q = crate::commands::multi::QueuedCommand::new(idx, &args);
                tx.queued_mem += q.mem();
                tx.cmd_flags |= flags;
                tx.queued.push(q);
            }
            client.out.simple("QUEUED");
            return client_cmd;
        }
        self.call(client, idx, args);
        client_cmd
    }

    /// Replies to a command refused before it ran (Redis's `rejectCommand`):
    /// inside MULTI the transaction is marked to fail; a refused EXEC itself
    /// discards the transaction with `EXECABORT` and the reason.
    pub fn reject(&mut self, client: &mut Client, name: Option<&str>, msg: &[u8]) {
        if let Some(tx) = client.multi.as_mut() {
            tx.aborted = true;
        }
        if name == Some("exec") {
            crate::commands::multi::discard_transaction(self, client);
            let reason = msg.strip_prefix(b"ERR ").unwrap_or(msg);
            let mut text = b"EXECABORT Transaction discarded because of: ".to_vec();
            text.extend_from_slice(reason);
            client.out.error_bytes(&text);
            return;
        }
        client.out.error_bytes(msg);
    }

    /// Why a known command may not run now, if it may not: arity,
    /// authentication, persistence errors, subscribed mode, MULTI rules.
    fn refusal(
        &mut self,
        client: &Client,
        spec: &crate::commands::CommandSpec,
        cmd_flags: u32,
        nargs: usize,
    ) -> Option<String> {
        use crate::commands::flags;
        if !spec.arity_ok(nargs) {
            return Some(format!(
                "ERR wrong number of arguments for '{}' command",
                spec.name
            ));
        }
        // Protected commands are refused before anything else is looked
        // at, so also before they can be queued in MULTI.
        if spec.has(flags::PROTECTED) {
            let (command, option, allowed) = if spec.name.starts_with("module|") {
                (
                    "MODULE",
                    "module-command",
                    self.config.enable_module_command,
                )
            } else {
                ("DEBUG", "debug-command", self.config.enable_debug_command)
            };
            if !allowed.allows(client.is_local()) {
                return Some(format!("ERR {command} command not allowed. If the enable-{option} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."));
            }
        }
        if !client.authenticated && !spec.has(flags::NO_AUTH) && !self.acl.default_open() {
            return Some(err::NOAUTH.to_string());
        }
        // `maxmemory`: make room first; when nothing can go, commands that
        // may grow memory are refused (Redis's processCommand), and inside
        // MULTI so is queueing anything (the queue itself grows).
        self.pre_command_oom =
            self.config.maxmemory > 0 && self.perform_evictions() == crate::evict::Evict::Fail;
        if self.pre_command_oom && self.grows_memory(client, spec, cmd_flags) {
            return Some(err::OOM.to_string());
        }
        if cmd_flags & flags::WRITE != 0 && self.writes_refused_for_persistence() {
            return Some(self.misconf_error());
        }
        if let Some(e) = self.replication_refusal(client.id, cmd_flags) {
            return Some(e.to_string());
        }
        if client.out.proto == ferrokv_resp::Protocol::Resp2
            && client.subs.any()
            && !crate::commands::pubsub::allowed_when_subscribed(spec.name)
        {
            return Some(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.name
            ));
        }
        if client.multi.is_some() && spec.has(flags::NO_MULTI) {
            return Some("ERR Command not allowed inside a transaction".to_string());
        }
        // Loading at start-up: only `loading` commands run (the AOF's own
        // commands, from its client with no socket, are the load).
        if self.loading.is_some() && !spec.has(flags::LOADING) && client.conn.stream.is_some() {
            return Some(err::LOADING.to_string());
        }
        // Redis marks a monitor as a replica, and a replica may not touch
        // the keyspace (hence the text).
        if client.monitor
            && cmd_flags & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) != 0
        {
            return Some("ERR Replica can't interact with the keyspace".to_string());
        }
        None
    }

    /// Whether a command is refused when memory cannot be freed: `denyoom`
    /// commands, an EXEC whose queue holds one, and inside MULTI anything
    /// but the commands that end or shape the transaction.
    fn grows_memory(
        &self,
        client: &Client,
        spec: &crate::commands::CommandSpec,
        cmd_flags: u32,
    ) -> bool {
        use crate::commands::flags;
        if cmd_flags & flags::DENYOOM != 0 {
            return true;
        }
        match &client.multi {
            None => false,
            Some(tx) if spec.name == "exec" => tx
                .queued
                .iter()
                .any(|q| self.commands.specs[q.idx].has(flags::DENYOOM)),
            Some(_) => !matches!(
                spec.name,
                "exec" | "discard" | "multi" | "watch" | "unwatch" | "quit" | "reset"
            ),
        }
    }

    /// Starts the lookups of `keys` in database `db` without waiting for
    /// them ([`ferrokv_store::Db::prefetch`]): the reactor warms the keys
    /// of a pipeline before it runs (`Reactor::warm_keys`).
    pub fn prefetch_keys<'k>(&self, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
        if let Some(db) = self.keyspace.dbs.get(db) {
            for k in keys {
                db.prefetch(k);
            }
        }
    }

    /// Runs one command and does its accounting (Redis's `call`): the
    /// handler, keyspace events it left pending, propagation, WATCH
    /// invalidation of its keys, statistics, slow log. EXEC calls it for
    /// each queued command.
    pub fn call(&mut self, client: &mut Client, idx: usize, args: Args) {
        self.call_from(client, idx, args, Instant::now());
    }

    /// [`Server::call`] timed from `t0`, returning the time it ended: a
    /// caller running commands back to back (the master's stream on a
    /// replica) uses one clock read as the end of a command and the start
    /// of the next.
    pub fn call_from(
        &mut self,
        client: &mut Client,
        idx: usize,
        args: Args,
        t0: Instant,
    ) -> Instant {
        let spec = self.commands.specs[idx];
        client.last_cmd = spec.name;
        // CLIENT NO-TOUCH: the caller's mode holds for the commands its
        // script or transaction runs too; TOUCH always counts.
        let no_touch_before = (self.no_touch, self.caller_no_touch);
        self.caller_no_touch |= client.no_touch;
        self.no_touch = self.caller_no_touch && spec.name != "touch";
        let errors_before = client.out.error_codes.len();
        let judged_before = client.out.judged_errors;
        // The master's stream is applied as the master saw it: its keys
        // are alive until it deletes them (times in it are absolute).
        let now_ms = if self.repl.master_client_id() == Some(client.id) {
            0
        } else {
            self.now_ms
        };
        let dirty_before = self.dirty;
        let db_before = client.db;
        let stream_before = (self.repl.master_repl_offset, self.aof_fed);
        let script_of_tracker = self.tracking.active()
            && spec.has(crate::commands::flags::SCRIPT_FLAGS)
            && self.tracking.of(client.id).is_some();
        if script_of_tracker {
            self.tracking_script_call(client.id, Some((spec, &args)));
        }
        {
            let mut ctx = Ctx {
                srv: self,
                client,
                now_ms,
            };
            (spec.handler)(&mut ctx, args);
        }
        (self.no_touch, self.caller_no_touch) = no_touch_before;
        if script_of_tracker {
            self.tracking_script_call(client.id, None);
        }
        self.flush_pending_events(Some(client));
        // MONITOR: after the command ran, as Redis 7.0's `call` (admin and
        // script commands never; scripts show themselves as they start).
        if !self.monitors.is_empty()
            && !spec.has(crate::commands::flags::SKIP_MONITOR | crate::commands::flags::ADMIN)
        {
            self.feed_monitors(client, &args);
        }
        if self.tracking.active() && spec.has(crate::commands::flags::READONLY) {
            self.tracking_remember_keys(client.id, spec, &args);
        }
        if self.dirty > dirty_before {
            if self.repl.link.is_some() {
                self.remember_local_expires(client.id, idx, db_before, &args);
            }
            self.touch_command_keys(idx, db_before, &args);
            if self.blocking.has_waiters() {
                crate::blocking::signal_command_keys(self, spec, &args);
            }
        }
        let arbitrary_keys = spec.has(crate::commands::flags::TOUCHES_ARBITRARY_KEYS);
        if self.propagate_command(db_before, args, dirty_before, arbitrary_keys)
            && self.aof.is_some()
        {
            // Its reply waits until the AOF has the write (see before_sleep).
            client.awaiting_aof = true;
        }
        if (self.repl.master_repl_offset, self.aof_fed) != stream_before {
            client.woff = self.repl.master_repl_offset;
            client.wseq = self.aof_fed;
        }
        // As Redis: a command that blocked is counted when it ends (served,
        // it runs again and is counted then; see `blocking::unblock`).
        if client.blocked.is_some() {
            return Instant::now();
        }
        let end = Instant::now();
        let elapsed = end.saturating_duration_since(t0);
        let usec = elapsed.as_micros() as u64;
        let st = &mut self.cmd_stats[idx];
        st.calls += 1;
        st.usec += usec;
        st.latency.record(usec);
        // Errors of commands this one ran (EXEC's queue) failed those.
        let produced = client.out.error_codes.len().saturating_sub(errors_before) as u64;
        if produced > client.out.judged_errors - judged_before {
            st.failed_calls += 1;
        }
        client.out.judged_errors = judged_before + produced;
        self.stats.total_commands_processed += 1;
        // Commands replayed from the AOF are not logged nor sampled, as
        // Redis does not while loading; every other command is, a script's
        // too (with the peer "?:0", as Redis shows its Lua client).
        if !self.loading_aof {
            if self.config.latency_tracking {
                self.latency_stats.record(idx, elapsed.as_nanos() as u64);
            }
            // As Redis's `call`: FAST commands are their own event, so a
            // slow GET stands out from an expected slow KEYS.
            let event = if spec.has(crate::commands::flags::FAST) {
                "fast-command"
            } else {
                "command"
            };
            self.latency_monitor.add_if_needed(
                self.config.latency_monitor_threshold,
                event,
                || unix_ms() / 1000,
                usec / 1000,
            );
            let log_slower_than = if spec.has(crate::commands::flags::SKIP_SLOWLOG) {
                -1
            } else {
                self.config.slowlog_log_slower_than
            };
            self.slowlog.push_if_slow(
                log_slower_than,
                self.config.slowlog_max_len,
                usec,
                &args,
                now_ms / 1000,
                client.conn.stream.as_ref().map(|_| &client.addr),
                client.name.as_deref(),
            );
        }
        end
    }

    /// Frees a value on the lazy-free thread (`UNLINK`, `FLUSHALL ASYNC`):
    /// dropping a huge value can take long, and the loop must not wait.
    pub fn lazy_free<T: Send + 'static>(&mut self, v: T) {
        use std::sync::atomic::Ordering::Relaxed;
        self.lazyfree_counts.pending.fetch_add(1, Relaxed);
        if let Err(std::sync::mpsc::SendError(v)) = self.lazyfree.send(Box::new(v)) {
            drop(v);
            self.lazyfree_counts.pending.fetch_sub(1, Relaxed);
        }
    }

    /// Drops a value that a write replaced: big ones go to the lazy-free
    /// thread so the loop never waits on a large free.
    #[inline]
    pub fn drop_value(&mut self, e: ferrokv_store::Entry) {
        if e.heap_size() >= LAZYFREE_THRESHOLD {
            self.lazy_free(e);
        }
    }

    /// After a command: propagates the expired-key DELs it caused, then
    /// the command itself (or its rewritten form) if it changed anything.
    /// Returns whether anything was propagated.
    fn propagate_command(
        &mut self,
        db: usize,
        args: Args,
        dirty_before: u64,
        arbitrary_keys: bool,
    ) -> bool {
        let rewrite = self.propagation.rewrite.take();
        // Both flags belong to this command alone, whatever it did (taken
        // before anything can return or short-circuit: a flag left set
        // would decide the next command's propagation).
        let force = std::mem::take(&mut self.propagation.force);
        let suppress = std::mem::take(&mut self.propagation.suppress);
        if let Some(any) = self.propagation.exec_done.take() {
            // EXEC: its queue was propagated as it ran.
            return any;
        }
        let also = std::mem::take(&mut self.propagation.also);
        let after = std::mem::take(&mut self.propagation.after);
        let mut any = !also.is_empty();
        // What one command propagates is one unit: the DELs of the keys it
        // found expired and the command itself, wrapped in MULTI/EXEC when
        // there are several (Redis 7.0's propagatePendingCommands), but
        // for SCAN and RANDOMKEY (`touches-arbitrary-keys`), whose DELs go
        // as they are, like active expiry's. Inside EXEC or a script the
        // outer block wraps everything already.
        let changed = (self.dirty > dirty_before || force) && !suppress;
        let ops = also.len() + usize::from(changed) + after.len();
        let wrap = ops > 1 && !arbitrary_keys && self.propagation.exec_ops.is_none();
        if wrap {
            self.begin_exec_propagation();
        }
        for (edb, argv) in also {
            self.propagate(edb, &argv);
        }
        // Only a command that made changes is propagated: SAVE, DEBUG
        // RELOAD and SHUTDOWN SAVE lower the counter (a save resets it),
        // and must never reach the AOF or a replica (Redis: `dirty < 0`
        // counts as 0); unless the command forced it (FLUSHALL).
        if changed {
            any = true;
            match rewrite {
                Some(argv) => self.propagate(db, &argv),
                // Most commands have few arguments: no allocation for them.
                None if args.len() <= SMALL_ARGV => {
                    let mut argv: [&[u8]; SMALL_ARGV] = [&[]; SMALL_ARGV];
                    for (slot, a) in argv.iter_mut().zip(args.iter()) {
                        *slot = a;
                    }
                    self.propagate(db, &argv[..args.len()])
                }
                None => {
                    let argv: Vec<&[u8]> = args.iter().collect();
                    self.propagate(db, &argv)
                }
            }
        }
        for (edb, argv) in after {
            any = true;
            self.propagate(edb, &argv);
        }
        if wrap {
            self.end_exec_propagation();
            // That is this command's own block, not an EXEC's.
            self.propagation.exec_done = None;
        }
        any
    }

    /// [`Self::propagate`] of an argv the caller gives away: inside a
    /// MULTI/EXEC block it is queued as it is, without a copy.
    pub fn propagate_owned(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        match self.propagation.exec_ops.as_mut() {
            Some(ops) => ops.push((db, argv)),
            None => self.propagate(db, &argv),
        }
    }

    /// Sends one command down the propagation stream (the AOF and the
    /// replicas).
    pub fn propagate<T: AsRef<[u8]>>(&mut self, db: usize, argv: &[T]) {
        if let Some(ops) = self.propagation.exec_ops.as_mut() {
            ops.push((db, argv.iter().map(|a| a.as_ref().to_vec()).collect()));
            return;
        }
        self.feed_aof(db, argv);
        self.repl_feed(db, argv);
    }

    /// Queues one command for the AOF, when it is on, and counts it
    /// ([`Server::aof_fed`], what `WAITAOF` waits on).
    pub fn feed_aof<T: AsRef<[u8]>>(&mut self, db: usize, argv: &[T]) {
        if let Some(aof) = self.aof.as_mut() {
            aof.feed(db, argv);
            self.aof_fed += 1;
        }
    }

    /// Removes the connection in slot `t` and forgets it everywhere
    /// (replication, blocking, pub/sub, WATCH), its buffers back in the
    /// pool. Returns its socket, for the reactor to deregister; dropping it
    /// closes the connection.
    pub fn close_client(&mut self, t: usize) -> Option<crate::net::conn::Conn> {
        let Some(Some(mut c)) = self.clients.try_remove(t) else {
            return None;
        };
        self.repl_client_closed(c.id, c.db);
        self.shutdown.forget(c.id);
        crate::blocking::forget(self, t, &mut c);
        self.tracking.disable(c.id);
        tracing::debug!("Client closed: id={} addr={}", c.id, c.addr);
        self.forget_client(&mut c);
        let stream = c.conn.stream.take();
        c.release(&mut self.pool);
        if let Some(s) = &stream {
            self.rdma_client_closed(t, s);
        }
        stream
    }

    /// Drops what registries hold for a closing connection (its pub/sub
    /// subscriptions, its WATCHed keys, its place among the monitors).
    pub fn forget_client(&mut self, c: &mut Client) {
        self.pubsub_forget_client(c);
        if std::mem::take(&mut c.monitor) {
            self.monitors.remove(c.token);
        }
        self.unwatch_all(c.token);
    }

    /// Moves a client's error replies into `INFO errorstats`.
    pub fn count_errors(&mut self, client: &mut Client) {
        if client.out.error_codes.is_empty() {
            return;
        }
        // An error our master or a replica was answered is a divergence
        // (Redis's `stat_unexpected_error_replies`).
        if self.repl.client_kind(client.id) != crate::replication::ClientKind::Normal {
            self.stats.unexpected_error_replies += client.out.error_codes.len() as u64;
        }
        for code in client.out.error_codes.drain(..) {
            self.stats.total_error_replies += 1;
            *self.error_stats.entry(code).or_insert(0) += 1;
        }
    }

    /// Clients other than the one being served.
    pub fn other_clients(&self) -> impl Iterator<Item = &Client> {
        self.clients.iter().filter_map(|(_, c)| c.as_deref())
    }

    pub fn connected_clients(&self) -> usize {
        self.clients.len()
    }

    /// Open client connections carried by `t` (the connection being
    /// served, which is out of the table meanwhile, is not counted).
    pub fn clients_on(&self, t: crate::net::conn::Transport) -> usize {
        self.other_clients()
            .filter(|c| c.conn.stream.as_ref().is_some_and(|s| s.transport() == t))
            .count()
    }

    /// Periodic work (Redis's `serverCron`), `hz` times a second.
    pub fn cron(&mut self) {
        self.cron_loops += 1;
        // With `everysec`/`no`, the bytes written since the last tick get
        // their checksum record now (with `always`, every flush does).
        if let Some(aof) = self.aof.as_mut() {
            if aof.policy() != crate::persistence::aof::FsyncPolicy::Always {
                if let Err(e) = aof.close_block() {
                    tracing::warn!("{e}");
                }
            }
        }
        self.persistence_cron();
        let replica = self.repl.is_replica();
        self.oom.tick(&self.config, replica);
        let now = Instant::now();
        self.now_ms = unix_ms();
        self.refresh_lru_clock();
        self.ops_metric
            .sample(now, self.stats.total_commands_processed);
        self.net_in_metric.sample(now, self.stats.net_input_bytes);
        self.net_out_metric.sample(now, self.stats.net_output_bytes);
        self.net_repl_in_metric
            .sample(now, self.stats.net_repl_input_bytes);
        self.net_repl_out_metric
            .sample(now, self.stats.net_repl_output_bytes);
        // A replica's keys expire when its master says so; during a
        // client pause nothing expires.
        if self.active_expire_enabled && self.deletes_expired_keys() {
            self.active_expire();
            // Consumers blocked on a stream that expired end their wait.
            if self.blocking.has_ready() {
                crate::blocking::serve_ready(self);
            }
        }
        self.replication_cron();
        // A writable replica's own keys with a TTL (replication/writable.rs).
        if self.active_expire_enabled && !self.pause.active() {
            self.expire_local_keys();
        }
        let used = crate::alloc::used_memory();
        self.peak_memory = self.peak_memory.max(used);
        if self.cron_loops.is_multiple_of(self.config.hz.max(1)) {
            let t = Instant::now();
            crate::alloc::release_free_memory();
            self.stats.allocator_collect_usec += t.elapsed().as_micros() as u64;
        }
        self.publish_metrics();
    }

    /// Hands the `/metrics` thread a fresh snapshot (it never reads the
    /// server state itself).
    pub fn publish_metrics(&self) {
        if let Some(m) = &self.metrics {
            m.publish(crate::metrics::capture(self));
        }
    }

    /// The active expiry cycle: samples keys with a TTL and removes the
    /// expired ones, so keys nobody reads still go away. Like Redis it keeps
    /// going while a large share of what it sees has expired, within a time
    /// budget of a quarter of the cron period.
    fn active_expire(&mut self) {
        let t0 = Instant::now();
        let budget = std::time::Duration::from_micros(250_000 / self.config.hz.max(1));
        let now_ms = self.now_ms;
        // Hash fields whose TTL passed first (field_expiry.rs), within half
        // the budget: neither backlog can starve the other.
        self.active_expire_fields(now_ms, t0 + budget / 2);
        let mut expired_total = 0u64;
        let mut examined_total = 0u64;
        let mut capped = false;
        let mut gone = Vec::new();
        for (dbi, db) in self.keyspace.dbs.iter_mut().enumerate() {
            loop {
                if db.expires() == 0 {
                    break;
                }
                let (examined, expired) = db.expire_cycle(now_ms, 2000, |e| gone.push((dbi, e)));
                expired_total += expired as u64;
                examined_total += examined as u64;
                if t0.elapsed() > budget {
                    capped = true;
                    break;
                }
                if examined == 0 || expired * 10 < examined {
                    break;
                }
            }
            if capped {
                break;
            }
        }
        self.stats.expired_keys += expired_total;
        // Redis's running average of the share sampled that was expired
        // (a cycle that sampled nothing counts as 0).
        let now_perc = if examined_total > 0 {
            expired_total as f64 / examined_total as f64
        } else {
            0.0
        };
        self.stats.expired_stale_perc = now_perc * 0.05 + self.stats.expired_stale_perc * 0.95;
        if capped {
            self.stats.expired_time_cap_reached_count += 1;
        }
        // Expired keys leave the propagation stream as DELs, and are
        // announced as `expired` events.
        for (dbi, e) in gone {
            self.blocking.signal(e.key());
            self.propagate(dbi, &[&b"DEL"[..], e.key()]);
            self.pending_events.expired.push((dbi, e.key().to_vec()));
        }
        self.flush_pending_events(None);
        self.stats.expire_cycle_cpu_milliseconds += t0.elapsed().as_millis() as u64;
    }
}

/// An argument as Redis prints it with `%.<max>s`: up to its first NUL
/// byte, at most `max` bytes.
pub fn c_str(a: &[u8], max: usize) -> &[u8] {
    let end = a.iter().position(|&c| c == 0).unwrap_or(a.len());
    &a[..end.min(max)]
}

/// Redis's text for an unknown command: the name and the first arguments,
/// quoted, cut at 128 bytes each way, as its `processCommand` prints them.
fn unknown_command_error(args: &Args) -> Vec<u8> {
    let mut rest: Vec<u8> = Vec::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push(b'\'');
        rest.extend_from_slice(c_str(a, room));
        rest.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(c_str(args.get(0), 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend_from_slice(&rest);
    msg
}

pub const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

impl Server {
    /// Where snapshots go: `dir`/`dbfilename`.
    pub fn rdb_path(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.config.dir).join(&self.config.dbfilename)
    }

    /// Redis refuses writes while the last background save failed, if
    /// snapshots are configured and `stop-writes-on-bgsave-error` is on.
    pub fn writes_refused_for_persistence(&self) -> bool {
        (self.config.stop_writes_on_bgsave_error
            && !self.config.save_rules.is_empty()
            && !self.persistence.last_bgsave_ok)
            || self.aof.as_ref().is_some_and(|a| a.write_error.is_some())
    }

    /// The MISCONF text for the persistence problem at hand.
    pub fn misconf_error(&self) -> String {
        match self.aof.as_ref().and_then(|a| a.write_error.as_ref()) {
            Some(e) => format!("MISCONF Errors writing to the AOF file: {e}"),
            None => MISCONF.to_string(),
        }
    }

    /// Starts a snapshot job.
    pub fn start_snapshot(&mut self, kind: crate::persistence::SaveKind) -> Result<(), String> {
        let path = self.rdb_path();
        self.start_snapshot_to(kind, &path, false, false)
    }

    /// A background save of `dump.rdb` for a disk-based replica sync: the
    /// file is read back at once (sent, or mapped for RDMA), so it goes
    /// through the page cache whatever `rdb-direct-io` says.
    pub fn start_snapshot_for_replicas(&mut self) -> Result<(), String> {
        let path = self.rdb_path();
        self.start_snapshot_to(crate::persistence::SaveKind::Background, &path, false, true)
    }

    /// The header every snapshot gets, as Redis's `rdbSaveInfoAuxFields`
    /// writes it: with the replication id and offset when `repl_info` (a
    /// replica sync, or a server with replication history), `aof-base 1`
    /// for the base of an AOF.
    pub fn snapshot_meta(
        &self,
        repl_info: bool,
        aof_base: bool,
        key_delay_us: u64,
    ) -> crate::persistence::snapshot::SnapshotMeta<'static> {
        let now_unix = (self.now_ms / 1000) as u64;
        let mut aux = vec![
            (
                &b"redis-ver"[..],
                crate::REDIS_COMPAT_VERSION.as_bytes().to_vec(),
            ),
            (&b"redis-bits"[..], b"64".to_vec()),
            (&b"ctime"[..], now_unix.to_string().into_bytes()),
            (
                &b"used-mem"[..],
                crate::alloc::used_memory().to_string().into_bytes(),
            ),
        ];
        if repl_info {
            aux.push((
                &b"repl-stream-db"[..],
                self.repl_stream_db().to_string().into_bytes(),
            ));
            aux.push((&b"repl-id"[..], self.repl.replid.clone().into_bytes()));
            aux.push((
                &b"repl-offset"[..],
                self.repl.master_repl_offset.to_string().into_bytes(),
            ));
        }
        aux.push((
            &b"aof-base"[..],
            if aof_base { b"1" } else { b"0" }.to_vec(),
        ));
        crate::persistence::snapshot::SnapshotMeta {
            aux,
            compression: self.config.rdbcompression,
            checksum: self.config.rdbchecksum,
            limits: self.config.encoding_limits(),
            key_delay_us,
            direct_io: self.config.rdb_direct_io,
            functions: self
                .scripting
                .functions
                .libraries
                .iter()
                .map(|l| l.code.clone())
                .collect(),
        }
    }

    /// Starts a snapshot job writing to `path` (`for_aof`: the new base of
    /// an AOF rewrite rather than `dump.rdb`).
    fn start_snapshot_to(
        &mut self,
        kind: crate::persistence::SaveKind,
        path: &std::path::Path,
        for_aof: bool,
        read_back: bool,
    ) -> Result<(), String> {
        if self.persistence.job.is_some() {
            return Err("ERR Background save already in progress".into());
        }
        self.persistence.last_attempt_unix = (self.now_ms / 1000) as u64;
        let key_delay_us = if kind == crate::persistence::SaveKind::Background {
            self.config.rdb_key_save_delay
        } else {
            0
        };
        let repl_info = self.repl.backlog.is_some() || self.repl.is_replica();
        let mut meta = self.snapshot_meta(repl_info, for_aof, key_delay_us);
        meta.direct_io &= !read_back;
        let job = crate::persistence::SnapshotJob::start(
            &mut self.keyspace,
            path,
            kind,
            self.dirty,
            meta,
        )
        .map_err(|e| {
            format!(
                "ERR Failed opening the temp RDB file for {}: {e}",
                path.display()
            )
        })?;
        tracing::info!(
            "{} saving started ({} keys)",
            if kind == crate::persistence::SaveKind::Background {
                "Background"
            } else {
                "DB"
            },
            job.keys_total
        );
        let mut job = job;
        job.for_aof = for_aof;
        self.persistence.job = Some(job);
        self.persistence.save_started(self.config.bgsave_loop_share);
        Ok(())
    }

    /// `SAVE`: the whole snapshot now, waiting for the file to be durable.
    pub fn save_now(&mut self) -> Result<(), String> {
        self.start_snapshot(crate::persistence::SaveKind::Foreground)?;
        let mut job = self.persistence.job.take().expect("just started");
        job.step(&mut self.keyspace, u64::MAX);
        let r = match job.poll(true) {
            crate::persistence::snapshot::JobStatus::Done(r) => r,
            crate::persistence::snapshot::JobStatus::Running => unreachable!("waited"),
        };
        self.finish_snapshot(job, r.clone());
        r.map(|_| ()).map_err(|e| format!("ERR {e}"))
    }

    /// Advances a background save by a slice of work and collects its
    /// result. Called every loop turn.
    pub fn drive_snapshot(&mut self) {
        let Some(job) = self.persistence.job.as_mut() else {
            return;
        };
        // Clients count as busy for 5 ms after the last command served:
        // between two requests of a client the loop has nothing to read,
        // and those turns must not hand the whole loop to the save.
        let served = self.stats.total_commands_processed;
        let now = Instant::now();
        if served != self.persistence.commands_at_last_step {
            self.persistence.commands_at_last_step = served;
            self.persistence.clients_busy_until = now + std::time::Duration::from_millis(5);
        }
        let busy = now < self.persistence.clients_busy_until;
        let util = self.persistence.loop_load.utilization;
        let share = busy.then(|| {
            crate::persistence::save_loop_share(
                self.config.bgsave_loop_share,
                job.used_memory_at_start,
                crate::alloc::used_memory(),
                util,
            )
        });
        job.step_sharing(&mut self.keyspace, 20_000, share);
        self.persistence.loop_load.step(now.elapsed());
        self.persistence.loop_share = share.unwrap_or(100);
        if let crate::persistence::snapshot::JobStatus::Done(r) = job.poll(false) {
            self.persistence.loop_share = 0;
            let job = self.persistence.job.take().expect("present");
            self.finish_snapshot(job, r);
        }
    }

    fn finish_snapshot(&mut self, job: crate::persistence::SnapshotJob, r: Result<u64, String>) {
        let secs = job.started.elapsed().as_secs_f64();
        if job.streaming {
            // A diskless replica sync: no file, not a save.
            job.abandon(&mut self.keyspace);
            self.repl_snapshot_done(true, std::path::Path::new(""), r.is_ok());
            return;
        }
        if job.for_aof {
            self.persistence.aof_last_cow_entries = job.peak_cow_entries;
            job.abandon(&mut self.keyspace);
            self.aof_last_rewrite_secs = Some(secs);
            let (ok, size) = match &r {
                Ok(n) => (true, *n),
                Err(e) => {
                    tracing::warn!("Background AOF rewrite failed: {e}");
                    (false, 0)
                }
            };
            let installed = if let Some(rw) = self.aof_off_rewrite.take() {
                rw.finish(ok)
            } else if let Some(aof) = self.aof.as_mut() {
                aof.finish_rewrite(ok, size)
            } else {
                return;
            };
            match installed {
                Ok(()) if ok => {
                    self.aof_first_rewrite = false;
                    self.aof_rewrite_stats.record(true);
                    tracing::info!("Background AOF rewrite finished successfully ({secs:.3} s)")
                }
                Ok(()) => self.aof_rewrite_stats.record(false),
                Err(e) => {
                    self.aof_rewrite_stats.record(false);
                    tracing::warn!("Background AOF rewrite could not install its result: {e}")
                }
            }
            return;
        }
        self.persistence.last_cow_entries = job.peak_cow_entries;
        let dirty_at_start = job.dirty_at_start;
        let kind = job.kind;
        let path = job.path.clone();
        job.abandon(&mut self.keyspace);
        self.repl_snapshot_done(false, &path, r.is_ok());
        match r {
            Ok(bytes) => {
                self.dirty = self.dirty.saturating_sub(dirty_at_start);
                self.persistence.last_save_unix = (unix_ms() / 1000) as u64;
                self.lastsave = self.persistence.last_save_unix;
                self.persistence.saves += 1;
                self.persistence.last_bgsave_ok = true;
                self.persistence.last_error = None;
                if kind == crate::persistence::SaveKind::Background {
                    self.persistence.last_bgsave_secs = Some(secs);
                }
                tracing::info!("DB saved on disk ({bytes} bytes, {secs:.3} s)");
            }
            Err(e) => {
                tracing::warn!("Snapshot failed: {e}");
                if kind == crate::persistence::SaveKind::Background {
                    self.persistence.last_bgsave_ok = false;
                    self.persistence.last_bgsave_secs = Some(secs);
                }
                self.persistence.last_error = Some(e);
            }
        }
    }

    /// The persistence step of a shutdown (`shutdown.rs`'s
    /// `finish_shutdown`): the AOF synced, an interrupted background save
    /// abandoned (its temp file removed) and, when snapshots are
    /// configured (or `save` asks for one), a final save made. An error
    /// means "do not exit".
    pub fn persist_before_exit(&mut self, save: bool, nosave: bool) -> Result<(), String> {
        if let Some(aof) = self.aof.as_mut() {
            aof.sync_now()
                .map_err(|e| format!("Error writing the AOF before exiting: {e}"))?;
        }
        if self.abandon_job().is_some() {
            tracing::warn!("There was a background save in progress: abandoned");
        }
        if !nosave && (save || !self.config.save_rules.is_empty()) {
            tracing::info!("Saving the final RDB snapshot before exiting.");
            self.save_now()
                .map_err(|e| format!("Error trying to save the DB, can't exit: {e}"))?;
        }
        // What the RDMA connections' tuners learned since their last save.
        if let Some(t) = &self.rdma_conns.tuning {
            for s in t.states() {
                s.write();
            }
        }
        Ok(())
    }

    /// Whether an AOF rewrite runs (AOF on or off).
    pub fn aof_rewrite_in_progress(&self) -> bool {
        self.aof_off_rewrite.is_some() || self.aof.as_ref().is_some_and(|a| a.rewrite.is_some())
    }

    /// Stops a `BGSAVE` under way (FLUSHALL: it would write the data just
    /// flushed), as Redis's `killRDBChild`: its temp file goes, a replica
    /// that waited for it syncs again, `BGSAVE` is accepted again. A
    /// rewrite or a diskless sync goes on.
    pub fn kill_bgsave(&mut self) {
        let plain = self.persistence.job.as_ref().is_some_and(|j| {
            j.kind == crate::persistence::SaveKind::Background && !j.for_aof && !j.streaming
        });
        if let Some(path) = plain.then(|| self.abandon_job()).flatten() {
            tracing::warn!("Background saving terminated by FLUSHALL: its snapshot is abandoned");
            self.repl_snapshot_done(false, &path, false);
        }
    }

    /// Takes the save under way off the loop and abandons it (its temp
    /// file removed, nothing installed): the path it was writing.
    fn abandon_job(&mut self) -> Option<std::path::PathBuf> {
        let job = self.persistence.job.take()?;
        self.persistence.loop_share = 0;
        let path = job.path.clone();
        job.abandon(&mut self.keyspace);
        Some(path)
    }

    /// Stops a running AOF rewrite (`appendonly` switched): its snapshot is
    /// abandoned, nothing of it installed. Redis kills its rewrite child.
    pub fn kill_aof_rewrite(&mut self) {
        if !self.persistence.job.as_ref().is_some_and(|j| j.for_aof) {
            return;
        }
        tracing::info!("Killing running AOF rewrite child: the rewrite's snapshot is abandoned");
        self.abandon_job();
        if let Some(rw) = self.aof_off_rewrite.take() {
            let _ = rw.finish(false);
        }
        if let Some(aof) = self.aof.as_mut() {
            let _ = aof.finish_rewrite(false, 0);
        }
    }

    /// Whether the AOF turned on at run time still waits for its first
    /// base (a shutdown then would leave an AOF without the data set).
    pub fn aof_first_rewrite_pending(&self) -> bool {
        self.aof.is_some() && self.aof_first_rewrite
    }

    /// `BGREWRITEAOF`: a new incremental file now, and a new base from a
    /// snapshot that begins in the same instant.
    pub fn start_aof_rewrite(&mut self) -> Result<(), String> {
        if self.persistence.job.is_some() {
            return Err("busy".into());
        }
        let Some(aof) = self.aof.as_mut() else {
            // AOF off: a base and a manifest naming it alone, for a later
            // `appendonly yes` (Redis 7.0 writes them too).
            let dir = std::path::Path::new(&self.config.dir).join(&self.config.appenddirname);
            let (rw, base) = crate::persistence::aof::OffRewrite::begin(
                std::sync::Arc::new(crate::persistence::aof::OsStorage),
                &dir,
                &self.config.appendfilename,
            )?;
            return match self.start_snapshot_to(
                crate::persistence::SaveKind::Background,
                &base,
                true,
                false,
            ) {
                Ok(()) => {
                    self.aof_off_rewrite = Some(rw);
                    tracing::info!("Background append only file rewriting started");
                    Ok(())
                }
                Err(e) => {
                    let _ = rw.finish(false);
                    Err(e)
                }
            };
        };
        aof.set_checksums(self.config.aof_checksums);
        let base = aof.begin_rewrite()?;
        match self.start_snapshot_to(crate::persistence::SaveKind::Background, &base, true, false) {
            Ok(()) => {
                tracing::info!("Background append only file rewriting started");
                Ok(())
            }
            Err(e) => {
                if let Some(aof) = self.aof.as_mut() {
                    let _ = aof.finish_rewrite(false, 0);
                }
                Err(e)
            }
        }
    }

    /// Writes the turn's AOF data; with `always`, also syncs it. Returns
    /// false while the AOF cannot be written (replies that depend on it are
    /// held back).
    pub fn flush_aof(&mut self) -> bool {
        let Some(aof) = self.aof.as_mut() else {
            return true;
        };
        aof.stage_mark(crate::persistence::aof::FsyncMark {
            seq: self.aof_fed,
            reploff: self.repl.master_repl_offset,
        });
        let ok = match aof.flush() {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("{e}");
                false
            }
        };
        self.refresh_aof_durable();
        ok
    }

    /// Moves [`Server::aof_durable`] to what the log's fsyncs covered; with
    /// everything synced, to the server's current mark. Not while an AOF
    /// turned on at run time waits for its first base (its log alone does
    /// not hold the data set yet), as Redis's `fsynced_reploff`.
    fn refresh_aof_durable(&mut self) {
        let Some(aof) = self.aof.as_ref() else {
            return;
        };
        if self.aof_first_rewrite {
            return;
        }
        let mark = if aof.all_synced() {
            crate::persistence::aof::FsyncMark {
                seq: self.aof_fed,
                reploff: self.repl.master_repl_offset,
            }
        } else {
            aof.synced_mark()
        };
        let d = &mut self.aof_durable;
        d.seq = d.seq.max(mark.seq);
        d.reploff = d.reploff.max(mark.reploff);
    }

    /// The `save` rules and scheduled BGSAVEs, checked from the cron.
    pub fn persistence_cron(&mut self) {
        if self.persistence.job.is_some() {
            return;
        }
        if self.aof.is_none() && self.aof_rewrite_scheduled {
            self.aof_rewrite_scheduled = false;
            if let Err(e) = self.start_aof_rewrite() {
                tracing::warn!("Can't rewrite the AOF: {e}");
            }
            return;
        }
        if let Some(aof) = self.aof.as_ref() {
            let grown = aof.incr_size >= self.config.auto_aof_rewrite_min_size
                && self.config.auto_aof_rewrite_percentage > 0
                && aof.incr_size * 100
                    >= aof.base_size.max(1) * self.config.auto_aof_rewrite_percentage;
            if (self.aof_rewrite_scheduled || grown) && aof.rewrite.is_none() {
                self.aof_rewrite_scheduled = false;
                if grown {
                    tracing::info!(
                        "Starting automatic rewriting of AOF on {}% growth",
                        self.config.auto_aof_rewrite_percentage
                    );
                }
                if let Err(e) = self.start_aof_rewrite() {
                    tracing::warn!("Can't rewrite the AOF: {e}");
                }
                return;
            }
        }
        let now = (self.now_ms / 1000) as u64;
        let since_save = now.saturating_sub(self.persistence.last_save_unix);
        // After a failure, wait 5 s before trying again, as Redis does.
        let retry_ok = self.persistence.last_bgsave_ok
            || now.saturating_sub(self.persistence.last_attempt_unix) >= 5;
        let due = self.persistence.bgsave_scheduled
            || (retry_ok
                && self
                    .config
                    .save_rules
                    .iter()
                    .any(|&(secs, changes)| self.dirty >= changes && since_save >= secs));
        if due {
            self.persistence.bgsave_scheduled = false;
            if let Err(e) = self.start_snapshot(crate::persistence::SaveKind::Background) {
                tracing::warn!("Can't start the background save: {e}");
            }
        }
    }

    /// Loads the data set at start-up: from the AOF when `appendonly yes`
    /// (creating its files if there are none, seeded with `dump.rdb` if one
    /// exists), else from the snapshot.
    ///
    /// The listeners are bound already: while the files load, the clients
    /// are served every few milliseconds (`loading_progress`), answered
    /// `-LOADING` but for the commands flagged `loading`. A `SHUTDOWN` (or
    /// SIGTERM) meanwhile stops the load: `Ok`, with `shutdown_requested`.
    pub fn load_at_startup(&mut self) -> Result<(), String> {
        use crate::persistence::aof::{Aof, OsStorage, Storage};
        let file_size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
        if !self.config.appendonly {
            if !self.loading_startup(file_size(&self.rdb_path()), Self::load_snapshot)? {
                return Ok(());
            }
            self.restore_repl_history();
            return Ok(());
        }
        let storage: std::sync::Arc<dyn Storage> = std::sync::Arc::new(OsStorage);
        let dir = std::path::Path::new(&self.config.dir).join(&self.config.appenddirname);
        let plan = Aof::plan(&*storage, &dir, &self.config.appendfilename)?;
        let (manifest, base) = match plan {
            Some((m, plan)) => {
                let total = plan
                    .base
                    .iter()
                    .chain(&plan.incrs)
                    .map(|p| file_size(p))
                    .sum();
                if !self.loading_startup(total, |srv| srv.load_aof_files(&plan, true))? {
                    return Ok(());
                }
                let mut m = m;
                let st = &self.persistence.aof_verify;
                for &i in &st.dropped_sums {
                    if let Some(f) = m.incrs.get_mut(i) {
                        f.sum = None;
                    }
                }
                if let Some(i) = st.stopped_at_incr {
                    let left: Vec<String> = m.incrs.drain(i + 1..).map(|f| f.name).collect();
                    tracing::warn!(
                        "Left out of the AOF manifest after the last verified point (kept on disk): {}",
                        left.join(", ")
                    );
                }
                tracing::info!(
                    "AOF checksums: {} ({} bytes in {} blocks verified, {} bytes unverified)",
                    st.result.name(),
                    st.verified_bytes,
                    st.verified_blocks,
                    st.unverified_bytes
                );
                (Some(m), Vec::new())
            }
            None => {
                if !self.loading_startup(file_size(&self.rdb_path()), Self::load_snapshot)? {
                    return Ok(());
                }
                let rdb = std::fs::read(self.rdb_path()).unwrap_or_else(|_| empty_rdb());
                (None, rdb)
            }
        };
        let aof = Aof::open_with(
            storage,
            &dir,
            &self.config.appendfilename,
            self.config.appendfsync,
            manifest,
            &base,
            self.config.aof_checksums,
        )?;
        self.aof = Some(aof);
        Ok(())
    }

    /// Runs a start-up load of `total_bytes` with the loading state on
    /// (Redis's `startLoading` / `stopLoading`): `Ok(false)` when a
    /// `SHUTDOWN` or SIGTERM stopped it (the error it left is not one).
    fn loading_startup(
        &mut self,
        total_bytes: u64,
        load: impl FnOnce(&mut Self) -> Result<(), String>,
    ) -> Result<bool, String> {
        self.loading = Some(crate::persistence::load::Loading::new(total_bytes));
        let r = load(self);
        self.loading = None;
        self.publish_metrics();
        if self.shutdown_requested {
            return Ok(false);
        }
        r.map(|()| true)
    }

    /// Between pieces of a start-up load (nothing otherwise: `DEBUG
    /// RELOAD` serves no one meanwhile): records how far it has come and,
    /// every [`LOADING_PUMP_INTERVAL`], serves the clients (`busy::pump`)
    /// with `ks` — the keyspace being filled, when the RDB loader holds it
    /// — in its place, so `INFO keyspace` shows it as Redis does. An error
    /// (a `SHUTDOWN` or a SIGTERM meanwhile) stops the load.
    pub fn loading_progress(
        &mut self,
        mut ks: Option<&mut Keyspace>,
        loaded_bytes: u64,
        stats: Option<&crate::persistence::load::LoadStats>,
    ) -> Result<(), String> {
        let Some(l) = self.loading.as_mut() else {
            return Ok(());
        };
        l.loaded_bytes = loaded_bytes;
        let bytes_due = loaded_bytes.saturating_sub(l.last_pump_bytes)
            >= self.config.loading_process_events_interval_bytes;
        if l.pumping || !bytes_due && l.last_pump.elapsed() < LOADING_PUMP_INTERVAL {
            return Ok(());
        }
        let now = Instant::now();
        l.last_pump = now;
        l.last_pump_bytes = loaded_bytes;
        l.pumping = true;
        let publish = now.duration_since(l.last_publish)
            >= Duration::from_millis(1000 / self.config.hz.max(1));
        if publish {
            l.last_publish = now;
        }
        if let Some(st) = stats {
            l.rdb_used_mem = st.used_mem;
            self.persistence.last_load_keys = st.keys;
            self.persistence.last_load_expired = st.expired;
        }
        if let Some(ks) = ks.as_deref_mut() {
            std::mem::swap(ks, &mut self.keyspace);
        }
        self.now_ms = unix_ms();
        crate::busy::pump(self, crate::busy::Holder::Loading);
        if let Some(l) = self.loading.as_mut() {
            l.pumping = false;
        }
        if let Some(sig) = crate::signals::take() {
            // As Redis: no save (the data set is half loaded).
            tracing::warn!("Received {sig} during loading, exiting now without saving.");
            self.shutdown_requested = true;
        }
        if publish {
            self.publish_metrics();
        }
        if let Some(ks) = ks {
            std::mem::swap(ks, &mut self.keyspace);
        }
        if self.shutdown_requested {
            return Err("shutdown requested while loading".into());
        }
        Ok(())
    }

    /// Replays the AOF's files: the base (an RDB, or commands), then each
    /// incremental file. A command cut short at the end of the last file
    /// is cut off with a warning (`aof-load-truncated yes`).
    ///
    /// Each incremental file with a checksum companion is verified first
    /// (`aofsum.rs`): a torn last block is cut like a torn command; a
    /// mismatch before it, or a damaged companion, stops the load with
    /// the offset — unless `repair` (start-up) and
    /// `aof-load-from-last-verified` or `aof-load-corrupt-tail-max-size`
    /// say to start from the last verified point.
    pub fn load_aof_files(
        &mut self,
        plan: &crate::persistence::aof::LoadPlan,
        repair: bool,
    ) -> Result<(), String> {
        self.loading_aof = true;
        self.persistence.aof_verify = Default::default();
        let r = self.replay_aof_files(plan, repair);
        self.loading_aof = false;
        r
    }

    /// Verifies the incremental file `data` (`path`, the `index`-th) against
    /// its companion `sum`; returns how many of its bytes to load, or
    /// `None` to load them and stop after this file (the rest is
    /// damaged). Cuts what a repair leaves out from the file and the
    /// companion.
    fn verify_incr(
        &mut self,
        path: &std::path::Path,
        sum: Option<&std::path::Path>,
        data: &[u8],
        index: usize,
        last: bool,
        repair: bool,
    ) -> Result<(usize, bool), String> {
        use crate::persistence::aofsum::{self, Outcome};
        use crate::persistence::VerifyResult;
        let st = &mut self.persistence.aof_verify;
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let Some(sum) = sum else {
            st.unverified_bytes += data.len() as u64;
            st.worsen(VerifyResult::Unverified);
            return Ok((data.len(), false));
        };
        let sum_name = sum
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let bytes = match std::fs::read(sum) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(
                    "The checksum file {sum_name} of {name} named by the manifest is missing: {name} loads unverified"
                );
                st.unverified_bytes += data.len() as u64;
                st.worsen(VerifyResult::Unverified);
                return Ok((data.len(), false));
            }
            Err(e) => return Err(format!("Can't read {}: {e}", sum.display())),
        };
        let v = aofsum::verify(data, &bytes, &name);
        st.verified_bytes += v.verified_len;
        st.verified_blocks += v.verified_blocks;
        let damage = aofsum::describe_damage(&name, &sum_name, data, &v);
        let keep_sum =
            (aofsum::header(&name).len() + v.verified_blocks as usize * aofsum::RECORD_LEN) as u64;
        let cut_sum = |len: u64| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(sum)
                .and_then(|f| f.set_len(len))
                .map_err(|e| format!("Can't truncate {sum_name}: {e}"))
        };
        let cut_file = |len: u64| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(len))
                .map_err(|e| format!("Can't truncate {name}: {e}"))
        };
        match &v.outcome {
            Outcome::Clean => {
                if v.unverified_len > 0 {
                    tracing::warn!(
                        "The last {} bytes of {name} (from offset {}) have no checksum yet (written just before the server stopped): loaded unverified",
                        v.unverified_len,
                        v.verified_len
                    );
                    st.unverified_bytes += v.unverified_len;
                    st.worsen(VerifyResult::Unverified);
                } else {
                    st.worsen(VerifyResult::Ok);
                }
                if v.companion_torn_bytes > 0 && repair {
                    cut_sum(keep_sum)?;
                }
                Ok((data.len(), false))
            }
            Outcome::TornLastBlock(r) | Outcome::Cut(r) => {
                let damage = damage.unwrap_or_default();
                let torn = matches!(v.outcome, Outcome::TornLastBlock(_));
                if !last || !self.config.aof_load_truncated || !repair {
                    // (redis-check-aof --fix cannot help here: the file's
                    // commands may be whole; its checksums say it is short.)
                    let truncated = if last {
                        format!("1) set the 'aof-load-truncated' configuration option to yes and restart the server: {name} is then cut at offset {} and the bytes after it kept in {name}.corrupt-{}. 2) ", r.offset, r.offset)
                    } else {
                        String::new()
                    };
                    return Err(format!(
                        "Bad file format reading the append only file {name}: {damage}. You can: {truncated}if {name} was repaired or replaced on purpose, remove its checksum file {sum_name} and restart: {name} then loads unverified and gets a new checksum file."
                    ));
                }
                let cut_len = data.len() as u64 - r.offset;
                if torn {
                    tracing::warn!(
                        "!!! Warning: torn write at the end of the AOF file {name}!!! AOF loaded anyway because aof-load-truncated is enabled: {damage}; the last {cut_len} bytes are cut off at offset {}",
                        r.offset
                    );
                } else {
                    tracing::warn!(
                        "!!! Warning: the AOF file {name} is shorter than its checksum file describes!!! AOF loaded anyway because aof-load-truncated is enabled: {damage}; the last {cut_len} bytes (unverifiable) are cut off at offset {}",
                        r.offset
                    );
                }
                if cut_len > 0 {
                    // Kept aside all the same: a companion put there by
                    // mistake would otherwise cost the block's bytes.
                    let aside = path.with_file_name(format!("{name}.corrupt-{}", r.offset));
                    std::fs::write(&aside, &data[r.offset as usize..])
                        .map_err(|e| format!("Can't write {}: {e}", aside.display()))?;
                    cut_file(r.offset)?;
                }
                cut_sum(keep_sum)?;
                st.worsen(VerifyResult::Truncated);
                Ok((r.offset as usize, false))
            }
            Outcome::Mismatch(_) | Outcome::BadCompanion(_) => {
                let damage = damage.unwrap_or_default();
                let tail = v.unverified_len;
                let bad_companion = matches!(v.outcome, Outcome::BadCompanion(_));
                let allowed = repair
                    && (self.config.aof_load_from_last_verified
                        || (!bad_companion
                            && last
                            && tail <= self.config.aof_load_corrupt_tail_max_size));
                if !allowed {
                    return Err(format!(
                        "Bad file format reading the append only file {name}: {damage}. You can: 1) run ferrokv-server --check-aof <filename.manifest> to see the damage. 2) set 'aof-load-from-last-verified yes' to start from the last verified point (the bytes after it are moved to {name}.corrupt-<offset>){}.",
                        if bad_companion {
                            ", or remove the ferrokv-sum key of its manifest line to load the file unverified"
                        } else {
                            ", or 'aof-load-corrupt-tail-max-size' when the damage is near the end of the last file"
                        }
                    ));
                }
                st.worsen(VerifyResult::Recovered);
                if bad_companion {
                    tracing::warn!(
                        "!!! Warning: {damage}. {name} loads unverified (aof-load-from-last-verified) and the manifest stops naming {sum_name}"
                    );
                    st.unverified_bytes += data.len() as u64;
                    st.dropped_sums.push(index);
                    return Ok((data.len(), false));
                }
                let at = v.verified_len;
                let aside = path.with_file_name(format!("{name}.corrupt-{at}"));
                std::fs::write(&aside, &data[at as usize..])
                    .map_err(|e| format!("Can't write {}: {e}", aside.display()))?;
                tracing::warn!(
                    "!!! Warning: {damage}. Starting from the last verified point: the {tail} bytes after offset {at} are moved to {}{}",
                    aside.display(),
                    if last { "" } else { ", and the later incremental files are left out of the manifest" }
                );
                cut_file(at)?;
                cut_sum(keep_sum)?;
                Ok((at as usize, !last))
            }
        }
    }

    fn replay_aof_files(
        &mut self,
        plan: &crate::persistence::aof::LoadPlan,
        repair: bool,
    ) -> Result<(), String> {
        use crate::persistence::aof::{replay, ReplayEnd};
        let t0 = Instant::now();
        let mut fake = Client::fake(0, &mut self.pool);
        // (path, last, incr index)
        let mut files: Vec<(&std::path::Path, bool, Option<usize>)> = Vec::new();
        if let Some(b) = &plan.base {
            files.push((b, false, None));
        }
        for (i, f) in plan.incrs.iter().enumerate() {
            files.push((f, i + 1 == plan.incrs.len(), Some(i)));
        }
        let mut commands = 0u64;
        // The bytes of the files before this one (the loading progress).
        let mut done = 0u64;
        for (path, last, incr) in files {
            let mut data =
                std::fs::read(path).map_err(|e| format!("Can't read {}: {e}", path.display()))?;
            let file_start = done;
            done += data.len() as u64;
            if data.starts_with(b"REDIS") {
                let st = self.load_rdb_serving(path, file_start)?;
                if let Some(st) = st {
                    // (As Redis: the base's figures, not the partial ones
                    // the progress reports left.)
                    self.persistence.last_load_keys = st.keys;
                    self.persistence.last_load_expired = st.expired;
                    self.install_loaded_functions(&st.functions)?;
                }
                continue;
            }
            let mut stop_after = false;
            if let Some(i) = incr {
                let sum = plan.sums.get(i).and_then(|s| s.as_deref());
                let (keep, stop) = self.verify_incr(path, sum, &data, i, last, repair)?;
                data.truncate(keep);
                if stop {
                    self.persistence.aof_verify.stopped_at_incr = Some(i);
                    stop_after = true;
                }
            }
            // The file ends here now (what was cut is not loaded).
            let last = last || stop_after;
            let name = path.display().to_string();
            // Where the last MULTI began, so that a transaction the file
            // ends inside of is reverted, as Redis does.
            let mut multi_at = None;
            let end = replay(&data, &name, |args, off| {
                if args.get(0).eq_ignore_ascii_case(b"multi") {
                    multi_at = Some(off);
                }
                if self.commands.lookup(args.get(0)).is_none() {
                    return Err(format!(
                        "Unknown command '{}' reading the append only file",
                        String::from_utf8_lossy(args.get(0))
                    ));
                }
                self.now_ms = unix_ms();
                self.execute(&mut fake, args);
                fake.out.buf.clear();
                fake.out.error_codes.clear();
                commands += 1;
                // As Redis, the test-only delay slows each command down too.
                if self.config.key_load_delay > 0 {
                    std::thread::sleep(Duration::from_micros(self.config.key_load_delay));
                }
                if commands.is_multiple_of(64) {
                    self.loading_progress(None, file_start + off as u64, None)?;
                }
                Ok(())
            })?;
            let end = match (fake.multi.take(), multi_at) {
                (Some(_), Some(at)) => {
                    tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
                    let valid_len = match end {
                        ReplayEnd::Truncated { valid_len } => valid_len.min(at),
                        ReplayEnd::Complete => at,
                    };
                    ReplayEnd::Truncated { valid_len }
                }
                _ => end,
            };
            if let ReplayEnd::Truncated { valid_len } = end {
                if !last || !self.config.aof_load_truncated {
                    return Err(format!(
                        "Unexpected end of file reading the append only file {name} at offset {valid_len}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
                    ));
                }
                tracing::warn!(
                    "!!! Warning: short read while loading the AOF file {name}!!! AOF loaded anyway because aof-load-truncated is enabled; the last {} bytes (an incomplete command) are cut off at offset {valid_len}",
                    data.len() - valid_len
                );
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_len(valid_len as u64))
                    .map_err(|e| format!("Can't truncate {name}: {e}"))?;
            }
            if stop_after {
                break;
            }
        }
        fake.release(&mut self.pool);
        self.dirty = 0;
        tracing::info!(
            "DB loaded from append only file: {:.3} seconds ({commands} commands)",
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// The database the replication stream has selected, as a snapshot
    /// records it: a replica's master client's (or, link down, the one it
    /// remembers), a master's last `SELECT` in its stream (0 if none).
    fn repl_stream_db(&self) -> usize {
        match self.repl.link.as_ref() {
            Some(link) => match link.state {
                crate::replication::replica::LinkState::Connected { token, .. } => self
                    .clients
                    .get(token)
                    .and_then(|c| c.as_ref())
                    .map_or(link.stream_db, |c| c.db),
                _ => link.stream_db,
            },
            None => self.repl.stream_db.unwrap_or(0),
        }
    }

    /// A server started on a snapshot saved with a replication history
    /// continues it, as Redis 7 does:
    /// - a master (after `SHUTDOWN SAVE`, say): the saved id becomes
    ///   `replid2` valid up to the saved offset, a new id starts, and the
    ///   backlog starts at the saved offset — replicas of the old history,
    ///   which hold exactly that data, are answered `+CONTINUE`;
    /// - a replica: it asks its master for `PSYNC <saved id> <offset+1>`
    ///   with the saved stream database selected, so a master that still
    ///   has that part of its backlog continues instead of a full sync.
    ///
    /// Only at start-up (`DEBUG RELOAD` keeps the running history).
    fn restore_repl_history(&mut self) {
        let aux = self.persistence.last_load_repl.clone();
        let Some((id, off)) = aux.history() else {
            return;
        };
        let db = aux.stream_db.unwrap_or(0).max(0) as usize;
        self.repl.replid = id.to_string();
        self.repl.master_repl_offset = off;
        if let Some(link) = self.repl.link.as_mut() {
            link.cached = Some((id.to_string(), off));
            link.stream_db = db;
            tracing::info!(
                "Restored the replication history from the snapshot: PSYNC {id} {} at the next connection",
                off + 1
            );
            return;
        }
        self.repl.shift_replid(&mut self.rng);
        self.create_repl_backlog();
        // The next command propagated selects its database explicitly.
        self.repl.stream_db = None;
        tracing::info!(
            "Restored the replication history from the snapshot: replicas of {} up to offset {off} can continue",
            self.repl.replid2
        );
    }

    /// Loads the snapshot file at start-up (or for `DEBUG RELOAD`).
    pub fn load_snapshot(&mut self) -> Result<(), String> {
        let path = self.rdb_path();
        let t0 = Instant::now();
        match self.load_rdb_serving(&path, 0)? {
            Some(st) => {
                self.install_loaded_functions(&st.functions)?;
                self.persistence.last_load_keys = st.keys;
                self.persistence.last_load_expired = st.expired;
                self.persistence.last_load_repl = st.repl.clone();
                tracing::info!(
                    "DB loaded from disk: {:.3} seconds ({} keys, {} expired keys skipped)",
                    t0.elapsed().as_secs_f64(),
                    st.keys,
                    st.expired
                );
            }
            None => tracing::info!("No snapshot at {}: starting empty", path.display()),
        }
        Ok(())
    }
}

impl Server {
    /// Loads the RDB at `path` into the keyspace, which is taken out of
    /// the server meanwhile and handed back at each progress report, so
    /// the clients served while loading at start-up see what is loaded so
    /// far. `file_start`: the bytes loaded before this file (an AOF base).
    fn load_rdb_serving(
        &mut self,
        path: &std::path::Path,
        file_start: u64,
    ) -> Result<Option<crate::persistence::load::LoadStats>, String> {
        let databases = self.keyspace.dbs.len();
        let mut ks = std::mem::replace(&mut self.keyspace, Keyspace::new(databases));
        let config = self.config.clone();
        let mut progress =
            |ks: &mut Keyspace, st: &crate::persistence::load::LoadStats, off: u64| {
                self.loading_progress(Some(ks), file_start + off, Some(st))
            };
        let r = crate::persistence::load::load_rdb_reporting(
            &mut ks,
            path,
            unix_ms(),
            &config,
            Some(&mut progress),
        );
        self.keyspace = ks;
        r
    }

    /// The libraries an RDB held replace the loaded ones (start-up, AOF
    /// base, a full sync from a master), as Redis's `rdbLoad` does.
    pub fn install_loaded_functions(&mut self, codes: &[Vec<u8>]) -> Result<(), String> {
        if codes.is_empty() && self.scripting.functions.libraries.is_empty() {
            return Ok(());
        }
        let limit = self.config.lua_heap_limit as usize;
        let mut fresh =
            crate::scripting::function::Functions::new(limit).map_err(|e| e.to_string())?;
        for code in codes {
            fresh
                .load(code, false)
                .map_err(|e| format!("Failed loading a library from the RDB: {e}"))?;
        }
        self.scripting.functions = fresh;
        Ok(())
    }
}

/// How often a start-up load serves the clients (Redis: every 2 MB read,
/// `loading-process-events-interval-bytes`, which ferrokv honours too;
/// a time bound works for any pace: a slow disk, large values).
const LOADING_PUMP_INTERVAL: Duration = Duration::from_millis(2);

/// An RDB file with no keys (the first base of a fresh AOF).
pub fn empty_rdb() -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = ferrokv_rdb::RdbEncoder::new(ferrokv_rdb::EncoderOptions::default());
    enc.header(
        &mut out,
        &[
            (b"redis-ver", crate::REDIS_COMPAT_VERSION.as_bytes()),
            (b"aof-base", b"1"),
        ],
    );
    enc.finish(&mut out);
    out
}

/// The lazy-free thread: it only drops what it is handed.
fn spawn_lazyfree(
    counts: std::sync::Arc<LazyFreeCounts>,
) -> std::sync::mpsc::Sender<Box<dyn Send>> {
    use std::sync::atomic::Ordering::Relaxed;
    let (tx, rx) = std::sync::mpsc::channel::<Box<dyn Send>>();
    std::thread::Builder::new()
        .name("lazyfree".into())
        .spawn(move || {
            for v in rx {
                drop(v);
                counts.pending.fetch_sub(1, Relaxed);
                counts.freed.fetch_add(1, Relaxed);
            }
        })
        .expect("spawn lazyfree thread");
    tx
}

pub fn random_hex(rng: &mut SmallRng, n: usize) -> String {
    use rand::Rng;
    (0..n)
        .map(|_| format!("{:x}", rng.gen_range(0..16u8)))
        .collect()
}
