//! Server configuration: a redis.conf-style file, command-line overrides,
//! and `CONFIG GET` / `CONFIG SET` at run time.
//!
//! One table ([`OPTIONS`]) names every option with its default, whether it
//! can change at run time, and how to parse and print it, so the file
//! loader, the command line and `CONFIG` cannot disagree.

use ferrokv_resp::request::split_args;
use std::fmt::Write as _;

/// `io-backend`: the loop's way of talking to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring where the kernel allows it, epoll otherwise.
    Auto,
    Epoll,
    /// io_uring, or no start at all.
    Uring,
}

impl IoBackend {
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Auto => "auto",
            IoBackend::Epoll => "epoll",
            IoBackend::Uring => "uring",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Verbose,
    Notice,
    Warning,
}

impl LogLevel {
    /// The `tracing` filter for this level.
    pub fn filter(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose | LogLevel::Notice => "info",
            LogLevel::Warning => "warn",
        }
    }
}

type LogLevelHook = Box<dyn Fn(LogLevel) + Send + Sync>;
static LOG_LEVEL_HOOK: std::sync::OnceLock<LogLevelHook> = std::sync::OnceLock::new();

/// Installed by the binary once logging is set up, so that `CONFIG SET
/// loglevel` takes effect at run time as in Redis.
pub fn set_log_level_hook(hook: LogLevelHook) {
    let _ = LOG_LEVEL_HOOK.set(hook);
}

/// Applies a new log level to the running logger (no-op without a hook).
pub fn apply_log_level(level: LogLevel) {
    if let Some(hook) = LOG_LEVEL_HOOK.get() {
        hook(level);
    }
}

/// Output-buffer limits of one client class (`client-output-buffer-limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// `maxmemory-clients`: bytes, or a percentage of `maxmemory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientMemoryLimit {
    Bytes(u64),
    Percent(u64),
}

impl ClientMemoryLimit {
    /// The limit in bytes given `maxmemory` (0: no client eviction).
    pub fn bytes(self, maxmemory: u64) -> u64 {
        match self {
            ClientMemoryLimit::Bytes(b) => b,
            ClientMemoryLimit::Percent(p) => maxmemory / 100 * p + maxmemory % 100 * p / 100,
        }
    }

    fn parse(a: &[String]) -> Result<ClientMemoryLimit, String> {
        let v = one(a)?;
        if let Some(p) = v.strip_suffix('%') {
            let p: u64 = p
                .parse()
                .map_err(|_| "argument must be a memory or percent value".to_string())?;
            if p > 100 {
                return Err("percentage argument must be less or equal to 100".into());
            }
            return Ok(ClientMemoryLimit::Percent(p));
        }
        parse_memory(v)
            .ok()
            .filter(|&b| b <= i64::MAX as u64)
            .map(ClientMemoryLimit::Bytes)
            .ok_or_else(|| "argument must be a memory or percent value".into())
    }

    fn name(self) -> String {
        match self {
            ClientMemoryLimit::Bytes(b) => b.to_string(),
            ClientMemoryLimit::Percent(p) => format!("{p}%"),
        }
    }
}

/// Who may use a protected action (`enable-protected-configs`,
/// `enable-debug-command`, `enable-module-command`), as Redis 7.0: nobody,
/// everybody, or clients on a local connection only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectedAction {
    No,
    Yes,
    Local,
}

impl ProtectedAction {
    /// Whether a client (on a local connection or not) may take the action.
    pub fn allows(self, local_client: bool) -> bool {
        match self {
            ProtectedAction::Yes => true,
            ProtectedAction::Local => local_client,
            ProtectedAction::No => false,
        }
    }

    fn parse(a: &[String]) -> Result<ProtectedAction, String> {
        match one(a)?.to_ascii_lowercase().as_str() {
            "yes" => Ok(ProtectedAction::Yes),
            "no" => Ok(ProtectedAction::No),
            "local" => Ok(ProtectedAction::Local),
            _ => Err("argument(s) must be one of the following: no, yes, local".into()),
        }
    }

    fn name(self) -> String {
        match self {
            ProtectedAction::Yes => "yes",
            ProtectedAction::No => "no",
            ProtectedAction::Local => "local",
        }
        .into()
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Values of the configs accepted but not acted on ([`accepted`]),
    /// by name; a missing one has its default.
    pub accepted: std::collections::BTreeMap<&'static str, String>,
    /// Not a config: set on the copy a replica loads its master's
    /// snapshot with, which keeps hash fields already due (they wait for
    /// the master's `HDEL`s, as in Redis 7.4: a master's `HEXPIRE` may
    /// still give one a new deadline).
    pub keeps_due_hash_fields: bool,
    pub bind: Vec<String>,
    pub port: u16,
    /// `unixsocket`: the path of a Unix-domain socket to listen on too.
    pub unixsocket: Option<String>,
    /// `unixsocketperm`: the socket file's mode (0: as the umask leaves it).
    pub unixsocketperm: u32,
    /// The `tls-*` configs (`config/tls.rs`).
    pub tls: crate::net::tls::TlsSettings,
    /// The `cluster-*` configs (`config/cluster.rs`).
    pub cluster: cluster::ClusterSettings,
    pub protected_mode: bool,
    pub requirepass: Option<Vec<u8>>,
    /// `aclfile`: the users file (`ACL LOAD`, `ACL SAVE`).
    pub aclfile: Option<String>,
    /// `acllog-max-len`: entries `ACL LOG` keeps.
    pub acllog_max_len: u64,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub acl_pubsub_default_all: bool,
    /// The config file's `user` lines, each the words after `user`
    /// (applied when the server starts, as Redis).
    pub users: Vec<Vec<String>>,
    pub maxclients: u64,
    /// `tracking-table-max-keys`: the most keys the client-side caching
    /// table remembers before it forgets random ones (0: no bound).
    pub tracking_table_max_keys: u64,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub tcp_backlog: u64,
    /// `io-backend`: how the loop talks to the kernel (crates/net/src/uring.rs).
    pub io_backend: IoBackend,
    /// `io-threads`: the execution thread and this many minus one I/O
    /// threads (crates/net/src/io_threads.rs).
    pub io_threads: usize,
    /// `io-threads-do-reads`: as Redis 7.0, the I/O threads write replies
    /// only unless this is on.
    pub io_threads_do_reads: bool,
    /// `events-per-io-thread` (Valkey's): a batch goes to the threads when
    /// each gets at least this many jobs; 0 always uses them.
    pub events_per_io_thread: usize,
    pub loglevel: LogLevel,
    pub logfile: String,
    pub databases: u64,
    pub dir: String,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    /// `maxmemory-clients`: the memory all normal clients together may use
    /// before the largest are closed (Redis 7.0's client eviction); 0 off.
    pub maxmemory_clients: ClientMemoryLimit,
    /// `client-reply-backpressure` (ferrokv): a client whose unsent replies
    /// reach this many bytes runs no more of its commands until they drain
    /// (0: off). See docs/hostile-input.md.
    pub client_reply_backpressure: u64,
    pub output_limit_normal: OutputLimit,
    pub output_limit_replica: OutputLimit,
    pub output_limit_pubsub: OutputLimit,
    pub hz: u64,
    /// `maxmemory` in bytes (0: no limit) and how keys are chosen to make room.
    pub maxmemory: u64,
    pub maxmemory_policy: crate::evict::Policy,
    pub maxmemory_samples: u64,
    pub maxmemory_eviction_tenacity: u64,
    pub lfu_log_factor: u64,
    pub lfu_decay_time: u64,
    pub lazyfree_lazy_eviction: bool,
    pub enable_debug_command: ProtectedAction,
    pub enable_module_command: ProtectedAction,
    pub enable_protected_configs: ProtectedAction,
    pub pidfile: String,
    pub dbfilename: String,
    /// `save <seconds> <changes>` rules; empty: no automatic snapshots.
    pub save_rules: Vec<(u64, u64)>,
    pub rdbcompression: bool,
    /// `sanitize-dump-payload` (accepted; payloads are always checked).
    pub sanitize_dump_payload: String,
    pub rdbchecksum: bool,
    /// Microseconds per key: slows a save down (for tests, as in Redis).
    pub rdb_key_save_delay: u64,
    /// Percent of the event loop's time a background save (BGSAVE, AOF
    /// rewrite, a replica's full sync) may take while clients are served.
    pub bgsave_loop_share: u32,
    /// Background saves (BGSAVE, save rules, AOF rewrite; not a save for a
    /// disk-based replica sync) write their file with `O_DIRECT`.
    pub rdb_direct_io: bool,
    /// Microseconds per key: slows a load down (for tests, as in Redis).
    pub key_load_delay: u64,
    /// A start-up load serves the clients at least every this many bytes
    /// loaded (and every 2 ms), as Redis's option of that name.
    pub loading_process_events_interval_bytes: u64,
    pub stop_writes_on_bgsave_error: bool,
    pub appendonly: bool,
    pub appendfsync: crate::persistence::aof::FsyncPolicy,
    pub appenddirname: String,
    pub appendfilename: String,
    pub aof_load_truncated: bool,
    /// Incremental AOF files get a checksum companion (`aofsum.rs`).
    pub aof_checksums: bool,
    /// A checksum mismatch (or a damaged companion) before the end of the
    /// AOF: start from the last verified point instead of refusing.
    pub aof_load_from_last_verified: bool,
    /// A checksum mismatch in the last incremental file at most this many
    /// bytes from its end is cut off like a torn tail (0: never).
    pub aof_load_corrupt_tail_max_size: u64,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    /// `SLOWLOG`: µs from which a command is logged (-1: never, 0: always).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// The latency monitor's threshold in ms (0: off).
    pub latency_monitor_threshold: u64,
    /// `busy-reply-threshold` (`lua-time-limit`): ms a script runs before
    /// other clients are answered `-BUSY` (0: never).
    pub busy_reply_threshold: u64,
    /// `lua-heap-limit` (ferrokv's): most bytes one Lua heap may hold (0: no limit).
    pub lua_heap_limit: u64,
    /// `notify-keyspace-events`, as `crate::notify::NOTIFY_*` bits.
    pub notify_keyspace_events: u32,
    /// `INFO latencystats`: whether per-command distributions are kept,
    /// and which percentiles it prints.
    pub latency_tracking: bool,
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// The Prometheus endpoint's port (0: no endpoint) and address.
    pub metrics_port: u16,
    pub metrics_bind: String,
    /// Compact-encoding thresholds of hashes (`hash-max-listpack-*`) and
    /// sets (`set-max-intset-entries`).
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    pub set_max_intset_entries: u64,
    /// Sorted sets up to this many members (of at most `zset_max_listpack_value`
    /// bytes) use the compact listpack encoding.
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
    /// A sparse HyperLogLog turns dense before it would grow past this
    /// many bytes (header included).
    pub hll_sparse_max_bytes: u64,
    /// A stream starts a new node before its listpack would reach this
    /// many bytes (0: no limit but Redis's 1 GB cap).
    pub stream_node_max_bytes: u64,
    /// ...or once it holds this many entries, deleted ones included (0:
    /// no limit).
    pub stream_node_max_entries: u64,
    /// The config file the server was started with (for `INFO` and `CONFIG REWRITE`).
    pub config_file: Option<String>,
    /// Replication (`replicaof`, `masterauth`, `repl-*`, `min-replicas-*`).
    pub repl: crate::replication::ReplConfig,
    /// `list-max-listpack-size` (alias `list-max-ziplist-size`): the node
    /// size of lists in snapshots (Redis 7.0 reports every list as a
    /// quicklist whatever it is).
    pub list_max_listpack_size: i32,
    /// `list-compress-depth`: accepted and reported; lists are not compressed.
    pub list_compress_depth: u64,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            accepted: Default::default(),
            keeps_due_hash_fields: false,
            bind: vec![],
            port: 0,
            unixsocket: None,
            unixsocketperm: 0,
            tls: Default::default(),
            cluster: Default::default(),
            protected_mode: true,
            requirepass: None,
            aclfile: None,
            acllog_max_len: 128,
            acl_pubsub_default_all: false,
            users: Vec::new(),
            maxclients: 0,
            timeout: 0,
            tcp_keepalive: 0,
            tcp_backlog: 0,
            io_backend: IoBackend::Epoll,
            io_threads: 1,
            io_threads_do_reads: false,
            events_per_io_thread: 2,
            loglevel: LogLevel::Notice,
            logfile: String::new(),
            databases: 0,
            dir: String::new(),
            proto_max_bulk_len: 0,
            client_query_buffer_limit: 0,
            maxmemory_clients: ClientMemoryLimit::Bytes(0),
            client_reply_backpressure: 0,
            output_limit_normal: OutputLimit::default(),
            output_limit_replica: OutputLimit::default(),
            output_limit_pubsub: OutputLimit::default(),
            hz: 0,
            maxmemory: 0,
            maxmemory_policy: crate::evict::Policy::NoEviction,
            maxmemory_samples: 5,
            maxmemory_eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            lazyfree_lazy_eviction: false,
            enable_debug_command: ProtectedAction::No,
            enable_module_command: ProtectedAction::No,
            enable_protected_configs: ProtectedAction::No,
            pidfile: String::new(),
            dbfilename: String::new(),
            save_rules: Vec::new(),
            rdbcompression: true,
            sanitize_dump_payload: "no".into(),
            rdbchecksum: true,
            rdb_key_save_delay: 0,
            bgsave_loop_share: 2,
            rdb_direct_io: true,
            key_load_delay: 0,
            loading_process_events_interval_bytes: 2 * 1024 * 1024,
            stop_writes_on_bgsave_error: true,
            appendonly: false,
            appendfsync: crate::persistence::aof::FsyncPolicy::EverySec,
            appenddirname: String::new(),
            appendfilename: String::new(),
            aof_load_truncated: true,
            aof_checksums: true,
            aof_load_from_last_verified: false,
            aof_load_corrupt_tail_max_size: 0,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 0,
            slowlog_log_slower_than: 0,
            slowlog_max_len: 0,
            latency_monitor_threshold: 0,
            busy_reply_threshold: 5000,
            lua_heap_limit: 1 << 30,
            notify_keyspace_events: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: Vec::new(),
            tracking_table_max_keys: 0,
            metrics_port: 0,
            metrics_bind: String::new(),
            hash_max_listpack_entries: 0,
            hash_max_listpack_value: 0,
            set_max_intset_entries: 0,
            config_file: None,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            repl: Default::default(),
            zset_max_listpack_entries: 0,
            zset_max_listpack_value: 0,
            hll_sparse_max_bytes: 0,
            stream_node_max_bytes: 0,
            stream_node_max_entries: 0,
        };
        // (The accepted-only configs read their defaults when unset.)
        for o in OPTIONS
            .iter()
            .chain(REPL_OPTIONS)
            .chain(cluster::CLUSTER_OPTIONS)
        {
            if o.alias_of.is_some() {
                continue;
            }
            let args = split(o.default);
            (o.set)(&mut c, &args).expect("default config values parse");
        }
        c
    }
}

fn split(s: &str) -> Vec<String> {
    let mut buf = Vec::new();
    let mut ranges = Vec::new();
    if split_args(s.as_bytes(), &mut buf, &mut ranges).is_err() {
        return vec![s.to_string()];
    }
    if ranges.is_empty() {
        return vec![String::new()];
    }
    ranges
        .iter()
        .map(|&(st, l)| String::from_utf8_lossy(&buf[st..st + l]).into_owned())
        .collect()
}

type Setter = fn(&mut Config, &[String]) -> Result<(), String>;
type Getter = fn(&Config) -> String;

/// One configuration option.
pub struct ConfigOption {
    pub name: &'static str,
    pub default: &'static str,
    /// Settable with `CONFIG SET`.
    pub mutable: bool,
    /// Redis 7.0's `PROTECTED_CONFIG` (see [`protected`]).
    pub protected: bool,
    pub set: Setter,
    pub get: Getter,
    /// For another name of an option (`hash-max-ziplist-entries`), the
    /// option it names; it has no default of its own.
    pub alias_of: Option<&'static str>,
}

/// A memory setting Redis keeps in a `long long` (`hll-sparse-max-bytes`,
/// `stream-node-max-bytes`): units accepted, at most `i64::MAX`.
fn parse_memory_signed(a: &[String]) -> Result<u64, String> {
    let v = parse_memory(one(a)?)?;
    if v > i64::MAX as u64 {
        return Err(format!(
            "argument must be between 0 and {} inclusive",
            i64::MAX
        ));
    }
    Ok(v)
}

/// Parses a memory size as Redis's `memtoull`: `1k`=1000, `1kb`=1024, `m`, `mb`, `g`, `gb`.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let l = s.to_ascii_lowercase();
    let (num, mul) = if let Some(n) = l.strip_suffix("gb") {
        (n, 1024 * 1024 * 1024)
    } else if let Some(n) = l.strip_suffix("mb") {
        (n, 1024 * 1024)
    } else if let Some(n) = l.strip_suffix("kb") {
        (n, 1024)
    } else if let Some(n) = l.strip_suffix('g') {
        (n, 1000 * 1000 * 1000)
    } else if let Some(n) = l.strip_suffix('m') {
        (n, 1000 * 1000)
    } else if let Some(n) = l.strip_suffix('k') {
        (n, 1000)
    } else if let Some(n) = l.strip_suffix('b') {
        (n, 1)
    } else {
        (l.as_str(), 1)
    };
    let v: u64 = num
        .parse()
        .map_err(|_| "argument must be a memory value".to_string())?;
    v.checked_mul(mul)
        .ok_or_else(|| "argument must be a memory value".to_string())
}

fn one(args: &[String]) -> Result<&str, String> {
    match args {
        [a] => Ok(a),
        _ => Err("wrong number of arguments".into()),
    }
}

fn parse_bool(args: &[String]) -> Result<bool, String> {
    match one(args)?.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn parse_int(args: &[String], min: u64, max: u64) -> Result<u64, String> {
    let s = one(args)?;
    let v: i128 = s
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if v < min as i128 || v > max as i128 {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(v as u64)
}

/// A signed integer option, any i64 (the `rdma-debug-*` hooks: -1 is off).
fn parse_i64(args: &[String]) -> Result<i64, String> {
    one(args)?
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

/// An octal option (Redis's `OCTAL_CONFIG`: `unixsocketperm 700`).
fn parse_octal(args: &[String], max: u32) -> Result<u32, String> {
    let s = one(args)?;
    let v = i64::from_str_radix(s, 8)
        .map_err(|_| "argument couldn't be parsed as an octal number".to_string())?;
    if v < 0 || v > max as i64 {
        return Err(format!("argument must be between 0 and {max:o} inclusive"));
    }
    Ok(v as u32)
}

/// A signed 32-bit option (Redis's `createIntConfig` with INT_MIN..INT_MAX).
fn parse_i32(args: &[String]) -> Result<i32, String> {
    let s = one(args)?;
    let v: i128 = s
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    i32::try_from(v).map_err(|_| {
        format!(
            "argument must be between {} and {} inclusive",
            i32::MIN,
            i32::MAX
        )
    })
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn parse_output_limits(c: &mut Config, args: &[String]) -> Result<(), String> {
    // One string of `class hard soft seconds` groups, or the groups as
    // separate arguments (config file form).
    let words: Vec<String> = args
        .iter()
        .flat_map(|a| split(a))
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut updates = Vec::new();
    for g in words.chunks(4) {
        let class = match g[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let hard = parse_memory(&g[1]).map_err(|_| {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string()
        })?;
        let soft = parse_memory(&g[2]).map_err(|_| {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string()
        })?;
        let secs: u64 = g[3].parse().map_err(|_| {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string()
        })?;
        updates.push((
            class,
            OutputLimit {
                hard,
                soft,
                soft_seconds: secs,
            },
        ));
    }
    for (class, l) in updates {
        match class {
            0 => c.output_limit_normal = l,
            1 => c.output_limit_replica = l,
            _ => c.output_limit_pubsub = l,
        }
    }
    Ok(())
}

fn fmt_limits(c: &Config) -> String {
    let mut s = String::new();
    for (name, l) in [
        ("normal", c.output_limit_normal),
        ("slave", c.output_limit_replica),
        ("pubsub", c.output_limit_pubsub),
    ] {
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = write!(s, "{name} {} {} {}", l.hard, l.soft, l.soft_seconds);
    }
    s
}

/// `*-max-listpack-value`: a memory size (`1kb` allowed), as Redis 7.0's.
fn parse_listpack_value(a: &[String]) -> Result<u64, String> {
    let v = parse_memory(one(a)?)?;
    if v > i64::MAX as u64 {
        return Err(format!(
            "argument must be between 0 and {} inclusive",
            i64::MAX
        ));
    }
    Ok(v)
}

/// Marks a row as Redis 7.0's `PROTECTED_CONFIG`: where snapshots are
/// written. With them settable at run time, `CONFIG SET dir` + `CONFIG SET
/// dbfilename` + `SAVE` writes a file of the attacker's choosing anywhere
/// the server may write, so `CONFIG SET` refuses them unless
/// `enable-protected-configs` allows it (checked against the real
/// redis-server 7.0.15 by setting every config: `dir` and `dbfilename`,
/// and no others).
const fn protected(o: ConfigOption) -> ConfigOption {
    ConfigOption {
        protected: true,
        ..o
    }
}

/// The option an alias row stands for (in any of the tables).
pub(crate) fn aliased(name: &str) -> &'static ConfigOption {
    find(name).expect("an alias names an option of the tables")
}

/// Another name of an option (Redis's `*-ziplist-*` aliases): the same
/// setting, set and read through the option it names.
macro_rules! alias {
    ($alias:literal, $of:literal) => {
        ConfigOption {
            name: $alias,
            default: "",
            mutable: true,
            set: |c: &mut Config, a: &[String]| -> Result<(), String> {
                ($crate::config::aliased($of).set)(c, a)
            },
            get: |c: &Config| -> String { ($crate::config::aliased($of).get)(c) },
            protected: false,
            alias_of: Some($of),
        }
    };
}

// After `alias!`: the accepted options use it.
pub mod accepted;

macro_rules! opt {
    ($name:literal, $default:literal, $mutable:expr, |$c:ident, $a:ident| $set:expr, |$g:ident| $get:expr) => {
        ConfigOption {
            name: $name,
            default: $default,
            mutable: $mutable,
            set: |$c: &mut Config, $a: &[String]| -> Result<(), String> { $set },
            get: |$g: &Config| -> String { $get },
            protected: false,
            alias_of: None,
        }
    };
}

// After `opt!`: the TLS and cluster options use it.
pub mod cluster;
pub mod tls;

/// Options `CONFIG GET` returns only when asked by their exact name, not
/// for a pattern (Redis 7.0's `HIDDEN_CONFIG`: its test-only delays; and
/// ferrokv's RDMA fault injection).
pub const HIDDEN: &[&str] = &[
    "key-load-delay",
    "rdb-key-save-delay",
    "loading-process-events-interval-bytes",
    "rdma-debug-corrupt-chunk",
    "rdma-debug-drop-endpoint",
];

/// ferrokv's own options (Redis has none of these names) that are read
/// at start-up only: `CONFIG SET` to their current value is a no-op.
pub const OWN_STARTUP_ONLY: &[&str] = &[
    "io-backend",
    "metrics-bind",
    "metrics-port",
    "rdma-bind",
    "rdma-conn-pool",
    "rdma-port",
    "rdma-provider",
];

/// Every option the server has, with Redis's names and defaults (except
/// `dir`, which defaults to a `data` folder under the working directory).
pub static OPTIONS: &[ConfigOption] = &[
    opt!(
        "bind",
        "127.0.0.1",
        // Rebound at run time (net/rebind.rs).
        true,
        |c, a| {
            if a.is_empty() {
                return Err("wrong number of arguments".into());
            }
            c.bind = a
                .iter()
                .flat_map(|x| split(x))
                .filter(|x| !x.is_empty())
                .collect();
            Ok(())
        },
        |c| c.bind.join(" ")
    ),
    opt!(
        "port",
        "6379",
        // Rebound at run time (net/rebind.rs).
        true,
        |c, a| {
            c.port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
        |c| c.port.to_string()
    ),
    // Bound once at start-up, like `port` (immutable in Redis too).
    opt!(
        "unixsocket",
        "",
        false,
        |c, a| {
            let p = one(a)?;
            c.unixsocket = (!p.is_empty()).then(|| p.to_string());
            Ok(())
        },
        |c| c.unixsocket.clone().unwrap_or_default()
    ),
    opt!(
        "unixsocketperm",
        "0",
        false,
        |c, a| {
            c.unixsocketperm = parse_octal(a, 0o777)?;
            Ok(())
        },
        |c| format!("{:o}", c.unixsocketperm)
    ),
    opt!(
        "protected-mode",
        "yes",
        true,
        |c, a| {
            c.protected_mode = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.protected_mode)
    ),
    opt!(
        "requirepass",
        "",
        true,
        |c, a| {
            let p = one(a)?;
            c.requirepass = if p.is_empty() {
                None
            } else {
                Some(p.as_bytes().to_vec())
            };
            Ok(())
        },
        |c| c
            .requirepass
            .as_ref()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    ),
    opt!(
        "aclfile",
        "",
        false,
        |c, a| {
            let v = one(a)?;
            c.aclfile = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        |c| c.aclfile.clone().unwrap_or_default()
    ),
    opt!(
        "acllog-max-len",
        "128",
        true,
        |c, a| {
            c.acllog_max_len = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.acllog_max_len.to_string()
    ),
    opt!(
        "acl-pubsub-default",
        "resetchannels",
        true,
        |c, a| {
            c.acl_pubsub_default_all = match one(a)?.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .into(),
                    )
                }
            };
            Ok(())
        },
        |c| if c.acl_pubsub_default_all {
            "allchannels"
        } else {
            "resetchannels"
        }
        .to_string()
    ),
    opt!(
        "tracking-table-max-keys",
        "1000000",
        true,
        |c, a| {
            c.tracking_table_max_keys = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.tracking_table_max_keys.to_string()
    ),
    opt!(
        "maxclients",
        "10000",
        true,
        |c, a| {
            c.maxclients = parse_int(a, 1, u32::MAX as u64)?;
            Ok(())
        },
        |c| c.maxclients.to_string()
    ),
    opt!(
        "timeout",
        "0",
        true,
        |c, a| {
            c.timeout = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.timeout.to_string()
    ),
    opt!(
        "tcp-keepalive",
        "300",
        true,
        |c, a| {
            c.tcp_keepalive = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.tcp_keepalive.to_string()
    ),
    opt!(
        "io-backend",
        "epoll",
        false,
        |c, a| {
            c.io_backend = match one(a)?.to_ascii_lowercase().as_str() {
                "auto" => IoBackend::Auto,
                "epoll" => IoBackend::Epoll,
                "uring" | "io_uring" => IoBackend::Uring,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: auto, epoll, uring".into(),
                    )
                }
            };
            Ok(())
        },
        |c| c.io_backend.name().to_string()
    ),
    opt!(
        "io-threads",
        "1",
        false,
        |c, a| {
            c.io_threads = parse_int(a, 1, 128)? as usize;
            Ok(())
        },
        |c| c.io_threads.to_string()
    ),
    opt!(
        "io-threads-do-reads",
        "no",
        false,
        |c, a| {
            c.io_threads_do_reads = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.io_threads_do_reads)
    ),
    opt!(
        "events-per-io-thread",
        "2",
        true,
        |c, a| {
            c.events_per_io_thread = parse_int(a, 0, i32::MAX as u64)? as usize;
            Ok(())
        },
        |c| c.events_per_io_thread.to_string()
    ),
    opt!(
        "tcp-backlog",
        "511",
        false,
        |c, a| {
            c.tcp_backlog = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.tcp_backlog.to_string()
    ),
    opt!(
        "loglevel",
        "notice",
        true,
        |c, a| {
            c.loglevel =
                match one(a)?.to_ascii_lowercase().as_str() {
                    "debug" => LogLevel::Debug,
                    "verbose" => LogLevel::Verbose,
                    "notice" => LogLevel::Notice,
                    "warning" => LogLevel::Warning,
                    _ => return Err(
                        "argument(s) must be one of the following: debug, verbose, notice, warning"
                            .into(),
                    ),
                };
            Ok(())
        },
        |c| match c.loglevel {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "verbose",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
        }
        .into()
    ),
    opt!(
        "logfile",
        "",
        false,
        |c, a| {
            c.logfile = one(a)?.to_string();
            Ok(())
        },
        |c| c.logfile.clone()
    ),
    opt!(
        "pidfile",
        "",
        false,
        |c, a| {
            c.pidfile = one(a)?.to_string();
            Ok(())
        },
        |c| c.pidfile.clone()
    ),
    opt!(
        "databases",
        "16",
        false,
        |c, a| {
            c.databases = parse_int(a, 1, 65536)?;
            Ok(())
        },
        |c| c.databases.to_string()
    ),
    protected(opt!(
        "dir",
        "data",
        true,
        |c, a| {
            let d = one(a)?;
            if d.is_empty() {
                return Err("directory can't be empty".into());
            }
            c.dir = d.to_string();
            Ok(())
        },
        |c| c.dir.clone()
    )),
    opt!(
        "proto-max-bulk-len",
        "512mb",
        true,
        |c, a| {
            let v = parse_memory(one(a)?)?;
            if v < 1024 * 1024 {
                return Err(format!(
                    "argument must be between {} and {} inclusive",
                    1024 * 1024,
                    i64::MAX
                ));
            }
            c.proto_max_bulk_len = v;
            Ok(())
        },
        |c| c.proto_max_bulk_len.to_string()
    ),
    opt!(
        "client-query-buffer-limit",
        "1gb",
        true,
        |c, a| {
            let v = parse_memory(one(a)?)?;
            if v < 1024 * 1024 {
                return Err(format!(
                    "argument must be between {} and {} inclusive",
                    1024 * 1024,
                    i64::MAX
                ));
            }
            c.client_query_buffer_limit = v;
            Ok(())
        },
        |c| c.client_query_buffer_limit.to_string()
    ),
    opt!(
        "client-output-buffer-limit",
        "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60",
        true,
        |c, a| parse_output_limits(c, a),
        |c| fmt_limits(c)
    ),
    opt!(
        "hz",
        "10",
        true,
        |c, a| {
            // Any int is accepted and clamped to 1..=500, as Redis does.
            c.hz = parse_int(a, 0, i32::MAX as u64)?.clamp(1, 500);
            Ok(())
        },
        |c| c.hz.to_string()
    ),
    opt!(
        "maxmemory-clients",
        "0",
        true,
        |c, a| {
            c.maxmemory_clients = ClientMemoryLimit::parse(a)?;
            Ok(())
        },
        |c| c.maxmemory_clients.name()
    ),
    opt!(
        "client-reply-backpressure",
        "8mb",
        true,
        |c, a| {
            c.client_reply_backpressure = parse_memory(one(a)?)?;
            Ok(())
        },
        |c| c.client_reply_backpressure.to_string()
    ),
    opt!(
        "maxmemory",
        "0",
        true,
        |c, a| {
            c.maxmemory = parse_memory(one(a)?)?;
            Ok(())
        },
        |c| c.maxmemory.to_string()
    ),
    opt!(
        "maxmemory-policy",
        "noeviction",
        true,
        |c, a| {
            c.maxmemory_policy = crate::evict::Policy::parse(one(a)?)
                .ok_or_else(|| "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".to_string())?;
            Ok(())
        },
        |c| c.maxmemory_policy.name().into()
    ),
    opt!(
        "maxmemory-samples",
        "5",
        true,
        |c, a| {
            c.maxmemory_samples = parse_int(a, 1, 64)?;
            Ok(())
        },
        |c| c.maxmemory_samples.to_string()
    ),
    opt!(
        "maxmemory-eviction-tenacity",
        "10",
        true,
        |c, a| {
            c.maxmemory_eviction_tenacity = parse_int(a, 0, 100)?;
            Ok(())
        },
        |c| c.maxmemory_eviction_tenacity.to_string()
    ),
    opt!(
        "lfu-log-factor",
        "10",
        true,
        |c, a| {
            c.lfu_log_factor = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.lfu_log_factor.to_string()
    ),
    opt!(
        "lfu-decay-time",
        "1",
        true,
        |c, a| {
            c.lfu_decay_time = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.lfu_decay_time.to_string()
    ),
    opt!(
        "lazyfree-lazy-eviction",
        "no",
        true,
        |c, a| {
            c.lazyfree_lazy_eviction = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.lazyfree_lazy_eviction)
    ),
    opt!(
        "enable-debug-command",
        "no",
        false,
        |c, a| {
            c.enable_debug_command = ProtectedAction::parse(a)?;
            Ok(())
        },
        |c| c.enable_debug_command.name()
    ),
    opt!(
        "enable-module-command",
        "no",
        false,
        |c, a| {
            c.enable_module_command = ProtectedAction::parse(a)?;
            Ok(())
        },
        |c| c.enable_module_command.name()
    ),
    opt!(
        "enable-protected-configs",
        "no",
        false,
        |c, a| {
            c.enable_protected_configs = ProtectedAction::parse(a)?;
            Ok(())
        },
        |c| c.enable_protected_configs.name()
    ),
    protected(opt!(
        "dbfilename",
        "dump.rdb",
        true,
        |c, a| {
            let f = one(a)?;
            if f.is_empty() || f.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            c.dbfilename = f.to_string();
            Ok(())
        },
        |c| c.dbfilename.clone()
    )),
    opt!(
        "save",
        "3600 1 300 100 60 10000",
        true,
        |c, a| {
            c.save_rules = crate::persistence::parse_save_rules(a)?;
            Ok(())
        },
        |c| c
            .save_rules
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(" ")
    ),
    opt!(
        "rdbcompression",
        "yes",
        true,
        |c, a| {
            c.rdbcompression = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.rdbcompression)
    ),
    // Redis 7.0 checks DUMP payloads in depth only when asked; ferrokv
    // always checks them in full (commands/dump.rs), so the value is kept
    // for CONFIG GET and tools, and changes nothing.
    opt!(
        "sanitize-dump-payload",
        "no",
        true,
        |c, a| {
            let v = one(a)?.to_ascii_lowercase();
            if !matches!(v.as_str(), "no" | "yes" | "clients") {
                return Err("argument(s) must be one of the following: no, yes, clients".into());
            }
            c.sanitize_dump_payload = v;
            Ok(())
        },
        |c| c.sanitize_dump_payload.clone()
    ),
    opt!(
        "rdbchecksum",
        "yes",
        false,
        |c, a| {
            c.rdbchecksum = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.rdbchecksum)
    ),
    opt!(
        "rdb-key-save-delay",
        "0",
        true,
        |c, a| {
            c.rdb_key_save_delay = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.rdb_key_save_delay.to_string()
    ),
    opt!(
        "rdb-direct-io",
        "yes",
        true,
        |c, a| {
            c.rdb_direct_io = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.rdb_direct_io)
    ),
    opt!(
        "bgsave-loop-share",
        "2",
        true,
        |c, a| {
            c.bgsave_loop_share = parse_int(a, 1, 100)? as u32;
            Ok(())
        },
        |c| c.bgsave_loop_share.to_string()
    ),
    opt!(
        "key-load-delay",
        "0",
        true,
        |c, a| {
            c.key_load_delay = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.key_load_delay.to_string()
    ),
    opt!(
        "loading-process-events-interval-bytes",
        "2097152",
        true,
        |c, a| {
            c.loading_process_events_interval_bytes = parse_int(a, 1024, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.loading_process_events_interval_bytes.to_string()
    ),
    opt!(
        "stop-writes-on-bgsave-error",
        "yes",
        true,
        |c, a| {
            c.stop_writes_on_bgsave_error = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.stop_writes_on_bgsave_error)
    ),
    opt!(
        "appendonly",
        "no",
        true,
        |c, a| {
            c.appendonly = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.appendonly)
    ),
    opt!(
        "appendfsync",
        "everysec",
        true,
        |c, a| {
            c.appendfsync = crate::persistence::aof::FsyncPolicy::parse(one(a)?)
                .ok_or("argument(s) must be one of the following: always, everysec, no")?;
            Ok(())
        },
        |c| c.appendfsync.name().into()
    ),
    opt!(
        "appenddirname",
        "appendonlydir",
        false,
        |c, a| {
            let d = one(a)?;
            if d.is_empty() || d.contains('/') {
                return Err("appenddirname can't be a path, just a dirname".into());
            }
            c.appenddirname = d.to_string();
            Ok(())
        },
        |c| c.appenddirname.clone()
    ),
    opt!(
        "appendfilename",
        "appendonly.aof",
        false,
        |c, a| {
            let f = one(a)?;
            if f.is_empty() || f.contains('/') {
                return Err("appendfilename can't be a path, just a filename".into());
            }
            c.appendfilename = f.to_string();
            Ok(())
        },
        |c| c.appendfilename.clone()
    ),
    opt!(
        "aof-load-truncated",
        "yes",
        true,
        |c, a| {
            c.aof_load_truncated = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.aof_load_truncated)
    ),
    // ferrokv's own (docs/config.md): checksums beside the AOF.
    opt!(
        "aof-checksums",
        "yes",
        true,
        |c, a| {
            c.aof_checksums = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.aof_checksums)
    ),
    opt!(
        "aof-load-from-last-verified",
        "no",
        true,
        |c, a| {
            c.aof_load_from_last_verified = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.aof_load_from_last_verified)
    ),
    opt!(
        "aof-load-corrupt-tail-max-size",
        "0",
        true,
        |c, a| {
            c.aof_load_corrupt_tail_max_size = parse_memory(one(a)?)?;
            Ok(())
        },
        |c| c.aof_load_corrupt_tail_max_size.to_string()
    ),
    opt!(
        "auto-aof-rewrite-percentage",
        "100",
        true,
        |c, a| {
            c.auto_aof_rewrite_percentage = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.auto_aof_rewrite_percentage.to_string()
    ),
    opt!(
        "auto-aof-rewrite-min-size",
        "64mb",
        true,
        |c, a| {
            c.auto_aof_rewrite_min_size = parse_memory(one(a)?)?;
            Ok(())
        },
        |c| c.auto_aof_rewrite_min_size.to_string()
    ),
    opt!(
        "slowlog-log-slower-than",
        "10000",
        true,
        |c, a| {
            let s = one(a)?;
            let v: i64 = s
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if v < -1 {
                return Err(format!(
                    "argument must be between -1 and {} inclusive",
                    i64::MAX
                ));
            }
            c.slowlog_log_slower_than = v;
            Ok(())
        },
        |c| c.slowlog_log_slower_than.to_string()
    ),
    opt!(
        "zset-max-listpack-entries",
        "128",
        true,
        |c, a| {
            c.zset_max_listpack_entries = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.zset_max_listpack_entries.to_string()
    ),
    opt!(
        "hll-sparse-max-bytes",
        "3000",
        true,
        |c, a| {
            c.hll_sparse_max_bytes = parse_memory_signed(a)?;
            Ok(())
        },
        |c| c.hll_sparse_max_bytes.to_string()
    ),
    opt!(
        "stream-node-max-bytes",
        "4096",
        true,
        |c, a| {
            c.stream_node_max_bytes = parse_memory_signed(a)?;
            Ok(())
        },
        |c| c.stream_node_max_bytes.to_string()
    ),
    opt!(
        "stream-node-max-entries",
        "100",
        true,
        |c, a| {
            c.stream_node_max_entries = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.stream_node_max_entries.to_string()
    ),
    // Redis's pre-7.0 name of `zset-max-listpack-entries`: the same setting.
    alias!("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    opt!(
        "zset-max-listpack-value",
        "64",
        true,
        |c, a| {
            c.zset_max_listpack_value = parse_listpack_value(a)?;
            Ok(())
        },
        |c| c.zset_max_listpack_value.to_string()
    ),
    // Redis's pre-7.0 name of `zset-max-listpack-value`: the same setting.
    alias!("zset-max-ziplist-value", "zset-max-listpack-value"),
    opt!(
        "slowlog-max-len",
        "128",
        true,
        |c, a| {
            c.slowlog_max_len = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.slowlog_max_len.to_string()
    ),
    opt!(
        "busy-reply-threshold",
        "5000",
        true,
        |c, a| {
            c.busy_reply_threshold = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.busy_reply_threshold.to_string()
    ),
    alias!("lua-time-limit", "busy-reply-threshold"),
    opt!(
        "lua-heap-limit",
        "1073741824",
        true,
        |c, a| {
            c.lua_heap_limit = parse_memory(one(a)?)?;
            Ok(())
        },
        |c| c.lua_heap_limit.to_string()
    ),
    opt!(
        "latency-monitor-threshold",
        "0",
        true,
        |c, a| {
            c.latency_monitor_threshold = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.latency_monitor_threshold.to_string()
    ),
    opt!(
        "notify-keyspace-events",
        "",
        true,
        |c, a| {
            c.notify_keyspace_events = crate::notify::parse_flags(one(a)?)
                .ok_or_else(|| crate::notify::INVALID_FLAGS.to_string())?;
            Ok(())
        },
        |c| crate::notify::flags_to_string(c.notify_keyspace_events)
    ),
    opt!(
        "latency-tracking",
        "yes",
        true,
        |c, a| {
            c.latency_tracking = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.latency_tracking)
    ),
    opt!(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        true,
        |c, a| {
            // One word per percentile from a file or the command line; one
            // space-separated string from CONFIG SET.
            let mut v = Vec::new();
            for w in a.iter().flat_map(|s| s.split_whitespace()) {
                let p: f64 = w.parse().map_err(|_| {
                    format!("Invalid latency-tracking-info-percentiles parameters: {w}")
                })?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(
                        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                            .into(),
                    );
                }
                v.push(p);
            }
            c.latency_tracking_info_percentiles = v;
            Ok(())
        },
        |c| c
            .latency_tracking_info_percentiles
            .iter()
            .map(|p| crate::commands::latency::format_percentile(*p))
            .collect::<Vec<_>>()
            .join(" ")
    ),
    // Compact encodings; the `*-ziplist-*` names are Redis's aliases.
    opt!(
        "hash-max-listpack-entries",
        "128",
        true,
        |c, a| {
            c.hash_max_listpack_entries = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.hash_max_listpack_entries.to_string()
    ),
    // Redis's pre-7.0 name of `hash-max-listpack-entries`: the same setting.
    alias!("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    opt!(
        "hash-max-listpack-value",
        "64",
        true,
        |c, a| {
            c.hash_max_listpack_value = parse_listpack_value(a)?;
            Ok(())
        },
        |c| c.hash_max_listpack_value.to_string()
    ),
    // Redis's pre-7.0 name of `hash-max-listpack-value`: the same setting.
    alias!("hash-max-ziplist-value", "hash-max-listpack-value"),
    opt!(
        "set-max-intset-entries",
        "512",
        true,
        |c, a| {
            c.set_max_intset_entries = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.set_max_intset_entries.to_string()
    ),
    // Not Redis options: the Prometheus endpoint (docs/metrics.md). Bound
    // once at start-up, like `port`.
    opt!(
        "metrics-port",
        "0",
        false,
        |c, a| {
            c.metrics_port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
        |c| c.metrics_port.to_string()
    ),
    opt!(
        "metrics-bind",
        "127.0.0.1",
        false,
        |c, a| {
            let b = one(a)?;
            if b.is_empty() {
                return Err("address can't be empty".into());
            }
            c.metrics_bind = b.to_string();
            Ok(())
        },
        |c| c.metrics_bind.clone()
    ),
    opt!(
        "list-max-listpack-size",
        "-2",
        true,
        |c, a| {
            c.list_max_listpack_size = parse_i32(a)?;
            Ok(())
        },
        |c| c.list_max_listpack_size.to_string()
    ),
    // Redis's pre-7.0 name of `list-max-listpack-size`: the same setting.
    alias!("list-max-ziplist-size", "list-max-listpack-size"),
    opt!(
        "list-compress-depth",
        "0",
        true,
        |c, a| {
            c.list_compress_depth = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.list_compress_depth.to_string()
    ),
];

pub fn find(name: &str) -> Option<&'static ConfigOption> {
    let n = name.to_ascii_lowercase();
    all_options().find(|o| o.name == n)
}

/// Every option: the server's, replication's, and those accepted but not
/// acted on.
pub fn all_options() -> impl Iterator<Item = &'static ConfigOption> {
    OPTIONS
        .iter()
        .chain(REPL_OPTIONS)
        .chain(tls::TLS_OPTIONS)
        .chain(cluster::CLUSTER_OPTIONS)
        .chain(accepted::ACCEPTED)
}

fn parse_replicaof(c: &mut Config, a: &[String]) -> Result<(), String> {
    let words: Vec<String> = a
        .iter()
        .flat_map(|x| split(x))
        .filter(|x| !x.is_empty())
        .collect();
    match &words[..] {
        [] => c.repl.replicaof = None,
        [n, o] if n.eq_ignore_ascii_case("no") && o.eq_ignore_ascii_case("one") => {
            c.repl.replicaof = None
        }
        [h, p] => {
            let port = p
                .parse::<u16>()
                .map_err(|_| "Invalid master port".to_string())?;
            c.repl.replicaof = Some((h.clone(), port));
        }
        _ => return Err("wrong number of arguments".into()),
    }
    Ok(())
}

fn get_replicaof(c: &Config) -> String {
    c.repl
        .replicaof
        .as_ref()
        .map(|(h, p)| format!("{h} {p}"))
        .unwrap_or_default()
}

macro_rules! repl_int {
    ($name:literal, $default:literal, $field:ident, $min:expr, $max:expr) => {
        opt!(
            $name,
            $default,
            true,
            |c, a| {
                c.repl.$field = parse_int(a, $min, $max)?;
                Ok(())
            },
            |c| c.repl.$field.to_string()
        )
    };
}

macro_rules! repl_bool {
    ($name:literal, $default:literal, $field:ident) => {
        opt!(
            $name,
            $default,
            true,
            |c, a| {
                c.repl.$field = parse_bool(a)?;
                Ok(())
            },
            |c| yes_no(c.repl.$field)
        )
    };
}

/// The replication options, with Redis's names, defaults and old
/// `slave` aliases.
pub static REPL_OPTIONS: &[ConfigOption] = &[
    opt!("replicaof", "", false, |c, a| parse_replicaof(c, a), |c| {
        get_replicaof(c)
    }),
    opt!("slaveof", "", false, |c, a| parse_replicaof(c, a), |c| {
        get_replicaof(c)
    }),
    opt!(
        "masterauth",
        "",
        true,
        |c, a| {
            let v = one(a)?;
            c.repl.masterauth = (!v.is_empty()).then(|| v.as_bytes().to_vec());
            Ok(())
        },
        |c| c
            .repl
            .masterauth
            .as_ref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    ),
    opt!(
        "masteruser",
        "",
        true,
        |c, a| {
            let v = one(a)?;
            c.repl.masteruser = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        |c| c.repl.masteruser.clone().unwrap_or_default()
    ),
    repl_bool!("replica-read-only", "yes", replica_read_only),
    repl_bool!("slave-read-only", "yes", replica_read_only),
    repl_bool!("replica-serve-stale-data", "yes", replica_serve_stale_data),
    repl_bool!("slave-serve-stale-data", "yes", replica_serve_stale_data),
    opt!(
        "repl-backlog-size",
        "1mb",
        true,
        |c, a| {
            // Redis's minimum is 16 KB.
            c.repl.backlog_size = parse_memory(one(a)?)?.max(16 * 1024);
            Ok(())
        },
        |c| c.repl.backlog_size.to_string()
    ),
    repl_int!("repl-backlog-ttl", "3600", backlog_ttl, 0, i32::MAX as u64),
    repl_bool!("repl-diskless-sync", "yes", diskless_sync),
    repl_int!(
        "repl-diskless-sync-delay",
        "5",
        diskless_sync_delay,
        0,
        i32::MAX as u64
    ),
    repl_int!(
        "repl-diskless-sync-max-replicas",
        "0",
        diskless_sync_max_replicas,
        0,
        i32::MAX as u64
    ),
    opt!(
        "repl-diskless-load",
        "disabled",
        true,
        |c, a| {
            c.repl.diskless_load = crate::replication::DisklessLoad::parse(one(a)?)
                .ok_or("argument(s) must be one of the following: disabled, on-empty-db, swapdb")?;
            Ok(())
        },
        |c| c.repl.diskless_load.name().into()
    ),
    repl_int!(
        "repl-ping-replica-period",
        "10",
        ping_replica_period,
        1,
        i32::MAX as u64
    ),
    repl_int!(
        "repl-ping-slave-period",
        "10",
        ping_replica_period,
        1,
        i32::MAX as u64
    ),
    repl_int!("repl-timeout", "60", timeout, 1, i32::MAX as u64),
    repl_int!(
        "min-replicas-to-write",
        "0",
        min_replicas_to_write,
        0,
        i32::MAX as u64
    ),
    repl_int!(
        "min-slaves-to-write",
        "0",
        min_replicas_to_write,
        0,
        i32::MAX as u64
    ),
    repl_int!(
        "min-replicas-max-lag",
        "10",
        min_replicas_max_lag,
        0,
        i32::MAX as u64
    ),
    repl_int!(
        "min-slaves-max-lag",
        "10",
        min_replicas_max_lag,
        0,
        i32::MAX as u64
    ),
    repl_int!(
        "replica-priority",
        "100",
        replica_priority,
        0,
        i32::MAX as u64
    ),
    repl_int!(
        "slave-priority",
        "100",
        replica_priority,
        0,
        i32::MAX as u64
    ),
    opt!(
        "replica-announce-ip",
        "",
        true,
        |c, a| {
            c.repl.replica_announce_ip = one(a)?.to_string();
            Ok(())
        },
        |c| c.repl.replica_announce_ip.clone()
    ),
    repl_int!(
        "replica-announce-port",
        "0",
        replica_announce_port,
        0,
        65535
    ),
    repl_bool!("replica-announced", "yes", replica_announced),
    // RDMA full sync (docs/rdma.md). `rdma-bind` empty: this master offers
    // no RDMA; `rdma-port 0`: any free port (the endpoint is announced in
    // `+RDMAFULLSYNC`).
    opt!(
        "rdma-bind",
        "",
        false,
        |c, a| {
            c.repl.rdma.bind = one(a)?.to_string();
            Ok(())
        },
        |c| c.repl.rdma.bind.clone()
    ),
    opt!(
        "rdma-port",
        "0",
        false,
        |c, a| {
            c.repl.rdma.port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
        |c| c.repl.rdma.port.to_string()
    ),
    opt!(
        "rdma-provider",
        "tcp",
        false,
        |c, a| {
            c.repl.rdma.provider = one(a)?.to_string();
            Ok(())
        },
        |c| c.repl.rdma.provider.clone()
    ),
    opt!(
        "replica-rdma",
        "no",
        true,
        |c, a| {
            c.repl.rdma.replica_rdma = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.repl.rdma.replica_rdma)
    ),
    opt!(
        "rdma-ring-slots",
        "8",
        true,
        |c, a| {
            c.repl.rdma.ring_slots = parse_int(a, 1, 1024)? as u32;
            Ok(())
        },
        |c| c.repl.rdma.ring_slots.to_string()
    ),
    opt!(
        "rdma-autotune",
        "no",
        true,
        |c, a| {
            c.repl.rdma.autotune = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.repl.rdma.autotune)
    ),
    opt!(
        "rdma-autotune-memory",
        "64mb",
        true,
        |c, a| {
            c.repl.rdma.autotune_memory = parse_memory(one(a)?)?;
            Ok(())
        },
        |c| c.repl.rdma.autotune_memory.to_string()
    ),
    opt!(
        "rdma-sync-endpoints",
        "1",
        true,
        |c, a| {
            c.repl.rdma.sync_endpoints =
                parse_int(a, 1, u64::from(ferrokv_fabric::MAX_LANES))? as u32;
            Ok(())
        },
        |c| c.repl.rdma.sync_endpoints.to_string()
    ),
    // RDMA client connections: each side's receive ring (docs/rdma.md).
    // New connections take the values in force when they connect.
    opt!(
        "rdma-conn-slots",
        "16",
        true,
        |c, a| {
            c.repl.rdma.conn_slots = parse_int(a, 2, 1024)? as u32;
            Ok(())
        },
        |c| c.repl.rdma.conn_slots.to_string()
    ),
    opt!(
        "rdma-conn-slot-size",
        "64kb",
        true,
        |c, a| {
            let v = parse_memory(one(a)?)?;
            if !(1024..=(64 << 20)).contains(&v) {
                return Err("argument must be between 1kb and 64mb".into());
            }
            c.repl.rdma.conn_slot_size = v as u32;
            Ok(())
        },
        |c| c.repl.rdma.conn_slot_size.to_string()
    ),
    // Registered ring sets kept for the next RDMA connection (each pins
    // 2 x slots x slot-size bytes); read when the first connection comes.
    opt!(
        "rdma-conn-pool",
        "8",
        false,
        |c, a| {
            c.repl.rdma.conn_pool = parse_int(a, 0, 4096)? as usize;
            Ok(())
        },
        |c| c.repl.rdma.conn_pool.to_string()
    ),
    // Small writes to RDMA clients go out as fi_inject_writedata (copied by
    // the provider, no local completion); `no` writes everything from the
    // registered send ring. New connections take the value in force.
    opt!(
        "rdma-conn-inject",
        "yes",
        true,
        |c, a| {
            c.repl.rdma.conn_inject = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.repl.rdma.conn_inject)
    ),
    // Ring writes to an RDMA connection per requested local completion
    // (selective completions; 1: every write completes). Capped at the
    // ring's slots; new connections take the value in force.
    opt!(
        "rdma-conn-signal-every",
        "4",
        true,
        |c, a| {
            c.repl.rdma.conn_signal_every = parse_int(a, 1, 1024)? as u32;
            Ok(())
        },
        |c| c.repl.rdma.conn_signal_every.to_string()
    ),
    // How long the loop keeps polling RDMA clients' completion queues
    // before it sleeps on their fds (0: it sleeps at once; more trades
    // CPU for latency on idle hardware; docs/rdma.md).
    opt!(
        "rdma-conn-poll-usec",
        "0",
        true,
        |c, a| {
            c.repl.rdma.conn_poll_usec = parse_int(a, 0, 100_000)?;
            Ok(())
        },
        |c| c.repl.rdma.conn_poll_usec.to_string()
    ),
    // The largest reply injected (with `rdma-conn-inject yes`), capped at
    // the provider's `inject_size` (128 bytes on tcp); applies to new
    // connections.
    opt!(
        "rdma-conn-inline-bytes",
        "256",
        true,
        |c, a| {
            c.repl.rdma.conn_inline_bytes = parse_int(a, 0, 1 << 20)?;
            Ok(())
        },
        |c| c.repl.rdma.conn_inline_bytes.to_string()
    ),
    // `rdma-autotune yes`: one measurement window of the RDMA connections'
    // tuner, in milliseconds.
    opt!(
        "rdma-autotune-window-ms",
        "250",
        true,
        |c, a| {
            c.repl.rdma.tune_window_ms = parse_int(a, 20, 60_000)?;
            Ok(())
        },
        |c| c.repl.rdma.tune_window_ms.to_string()
    ),
    // RDMA has no keepalive of its own: an RDMA client silent for this
    // many seconds gets an empty write (0: none), as `tcp-keepalive` does
    // for TCP; a dead peer fails it and the client is closed.
    opt!(
        "rdma-keepalive",
        "60",
        true,
        |c, a| {
            c.repl.rdma.conn_keepalive = parse_int(a, 0, 1 << 31)?;
            Ok(())
        },
        |c| c.repl.rdma.conn_keepalive.to_string()
    ),
    opt!(
        "rdma-chunk-size",
        "2mb",
        true,
        |c, a| {
            let v = parse_memory(one(a)?)?;
            if !(4096..=(1 << 30)).contains(&v) {
                return Err("argument must be between 4kb and 1gb".into());
            }
            c.repl.rdma.chunk_size = v as u32;
            Ok(())
        },
        |c| c.repl.rdma.chunk_size.to_string()
    ),
    // Master: write chunks straight from the snapshot's mapping when the
    // provider needs no registered local buffers (tcp); `no`, or a provider
    // with FI_MR_LOCAL (verbs), copies each chunk into a registered bounce
    // ring first (docs/rdma.md).
    opt!(
        "rdma-zero-copy",
        "yes",
        true,
        |c, a| {
            c.repl.rdma.zero_copy = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.repl.rdma.zero_copy)
    ),
    // Test pacing: the master sleeps this long between chunk writes (0: off).
    opt!(
        "rdma-chunk-delay-us",
        "0",
        true,
        |c, a| {
            c.repl.rdma.chunk_delay_us = parse_int(a, 0, 10_000_000)?;
            Ok(())
        },
        |c| c.repl.rdma.chunk_delay_us.to_string()
    ),
    // Test fault hook: the master flips a byte of chunk N (-1: off), which
    // the replica's CRC64 check must catch.
    opt!(
        "rdma-debug-corrupt-chunk",
        "-1",
        true,
        |c, a| {
            c.repl.rdma.debug_corrupt_chunk = parse_i64(a)?;
            Ok(())
        },
        |c| c.repl.rdma.debug_corrupt_chunk.to_string()
    ),
    opt!(
        "rdma-debug-drop-endpoint",
        "-1",
        true,
        |c, a| {
            c.repl.rdma.debug_drop_endpoint = parse_i64(a)?;
            Ok(())
        },
        |c| c.repl.rdma.debug_drop_endpoint.to_string()
    ),
];

/// A fatal start-up error, printed as Redis prints config errors.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("\n*** FATAL CONFIG FILE ERROR (ferrokv {version}) ***\nReading the configuration file, at line {line}\n>>> '{text}'\n{reason}")]
    Line {
        version: &'static str,
        line: usize,
        text: String,
        reason: String,
    },
    #[error("Fatal error, can't open config file '{path}': {err}")]
    Open { path: String, err: std::io::Error },
}

impl Config {
    /// The hash encoding thresholds, as the store takes them.
    pub fn hash_limits(&self) -> ferrokv_store::hash::HashLimits {
        ferrokv_store::hash::HashLimits {
            max_listpack_entries: self.hash_max_listpack_entries as usize,
            max_listpack_value: self.hash_max_listpack_value as usize,
        }
    }

    /// The thresholds a snapshot's encoder chooses encodings by.
    pub fn encoding_limits(&self) -> ferrokv_rdb::EncodingLimits {
        ferrokv_rdb::EncodingLimits {
            hash_max_listpack_entries: self.hash_max_listpack_entries as usize,
            hash_max_listpack_value: self.hash_max_listpack_value as usize,
            set_max_intset_entries: self.set_max_intset_entries as usize,
            list_max_listpack_size: self.list_max_listpack_size,
            zset_max_listpack_entries: self.zset_max_listpack_entries as usize,
            zset_max_listpack_value: self.zset_max_listpack_value as usize,
            ..Default::default()
        }
    }

    pub fn set_max_intset(&self) -> usize {
        self.set_max_intset_entries as usize
    }

    /// The sorted-set encoding thresholds, as the store takes them.
    pub fn zset_limits(&self) -> ferrokv_store::ZsetLimits {
        ferrokv_store::ZsetLimits {
            max_listpack_entries: self.zset_max_listpack_entries as usize,
            max_listpack_value: self.zset_max_listpack_value as usize,
        }
    }

    /// Builds the configuration from `ferrokv-server [file] [--name value ...]`:
    /// the file first, then the options, which override it.
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        let mut text = String::new();
        let mut rest = args;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let body = std::fs::read_to_string(first).map_err(|err| ConfigError::Open {
                    path: first.clone(),
                    err,
                })?;
                text.push_str(&body);
                text.push('\n');
                cfg.config_file = Some(first.clone());
                rest = &args[1..];
            }
        }
        let file_lines = text.lines().count();
        // Command-line options become config lines after the file's, as in Redis.
        let mut cur = String::new();
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                if !cur.is_empty() {
                    text.push_str(&cur);
                    text.push('\n');
                }
                cur = name.to_string();
            } else {
                cur.push(' ');
                cur.push_str(&quote(a));
            }
        }
        if !cur.is_empty() {
            text.push_str(&cur);
            text.push('\n');
        }
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let err = |reason: String| ConfigError::Line {
                version: env!("CARGO_PKG_VERSION"),
                line: if i < file_lines {
                    i + 1
                } else {
                    i + 1 - file_lines
                },
                text: t.to_string(),
                reason,
            };
            let words = {
                let mut buf = Vec::new();
                let mut ranges = Vec::new();
                split_args(t.as_bytes(), &mut buf, &mut ranges)
                    .map_err(|_| err("Unbalanced quotes in configuration line".into()))?;
                ranges
                    .iter()
                    .map(|&(s, l)| String::from_utf8_lossy(&buf[s..s + l]).into_owned())
                    .collect::<Vec<_>>()
            };
            // `user <name> <rules...>`: not an option, a user to create
            // (checked when the server builds its users).
            if words[0].eq_ignore_ascii_case("user") && words.len() >= 2 {
                cfg.users.push(words[1..].to_vec());
                continue;
            }
            let opt = find(&words[0])
                .ok_or_else(|| err("Bad directive or wrong number of arguments".into()))?;
            (opt.set)(&mut cfg, &words[1..])
                .map_err(|e| err(format!("Error in option '{}': {e}", opt.name)))?;
        }
        Ok(cfg)
    }

    /// `CONFIG SET name value`: Redis's error texts on failure.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let Some(opt) = find(name) else {
            return Err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        };
        if !opt.mutable {
            // ferrokv's own start-up options take their current value
            // back as a no-op, so that writing back a whole `CONFIG GET *`
            // (Redis's "CONFIG sanity", configuration tools) works; Redis's
            // immutable options refuse as Redis refuses them.
            if OWN_STARTUP_ONLY.contains(&opt.name) && (opt.get)(self) == value {
                return Ok(());
            }
            return Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - can't set immutable config",
                opt.name
            ));
        }
        let args =
            if opt.name == "bind" || opt.name == "client-output-buffer-limit" || opt.name == "save"
            {
                split(value)
            } else {
                vec![value.to_string()]
            };
        let mut next = self.clone();
        (opt.set)(&mut next, &args).map_err(|e| {
            format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {e}",
                opt.name
            )
        })?;
        *self = next;
        Ok(())
    }

    /// The value of an option by its name, as `CONFIG GET` shows it
    /// (empty for a name that is no option).
    pub fn option_value(&self, name: &str) -> String {
        find(name).map(|o| (o.get)(self)).unwrap_or_default()
    }

    /// `CONFIG GET`: every option whose name matches a glob pattern; a
    /// hidden option ([`HIDDEN`]) only by its exact name, as Redis's.
    pub fn get_matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        let glob = pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
        all_options()
            .filter(|o| !(glob && HIDDEN.contains(&o.name)))
            .filter(|o| ferrokv_store::pattern::glob_match_nocase(pattern, o.name.as_bytes()))
            .map(|o| (o.name, (o.get)(self)))
            .collect()
    }
}

fn quote(s: &str) -> String {
    if !s.is_empty()
        && !s
            .bytes()
            .any(|c| c == b' ' || c == b'"' || c == b'\'' || c == b'\\' || c < 32)
    {
        return s.to_string();
    }
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults_are_redis_defaults() {
        let c = Config::default();
        assert_eq!(c.port, 6379);
        assert_eq!(c.bind, vec!["127.0.0.1"]);
        assert_eq!(c.proto_max_bulk_len, 512 * 1024 * 1024);
        assert_eq!(c.output_limit_replica.hard, 256 * 1024 * 1024);
        assert_eq!(c.databases, 16);
    }

    #[test]
    fn command_line_overrides_file() {
        let dir = std::env::temp_dir().join(format!("ferrokv-cfg-{}", std::process::id()));
        std::fs::write(&dir, "port 7000\n# comment\nrequirepass \"a b\"\n").unwrap();
        let c = Config::from_args(&args(&[
            dir.to_str().unwrap(),
            "--port",
            "7001",
            "--timeout",
            "5",
        ]))
        .unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.timeout, 5);
        assert_eq!(c.requirepass.as_deref(), Some(&b"a b"[..]));
        std::fs::remove_file(dir).unwrap();
    }

    #[test]
    fn bad_options_name_the_option() {
        let e = Config::from_args(&args(&["--nosuch", "1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Bad directive"), "{e}");
        let e = Config::from_args(&args(&["--port", "x"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'port'"), "{e}");
    }

    #[test]
    fn hidden_and_own_startup_names_are_options() {
        // A misspelt name in either list would silently do nothing.
        for n in HIDDEN.iter().chain(OWN_STARTUP_ONLY) {
            let o = find(n).unwrap_or_else(|| panic!("{n} is no option"));
            if OWN_STARTUP_ONLY.contains(n) {
                assert!(!o.mutable, "{n} is settable: not start-up only");
            }
        }
    }

    #[test]
    fn config_set_validates() {
        let mut c = Config::default();
        assert!(c.set("timeout", "10").is_ok());
        assert_eq!(c.timeout, 10);
        assert!(c
            .set("timeout", "x")
            .unwrap_err()
            .contains("couldn't be parsed"));
        assert!(c.set("databases", "1").unwrap_err().contains("immutable"));
        assert!(c
            .set("nope", "1")
            .unwrap_err()
            .starts_with("ERR Unknown option"));
        c.set("client-output-buffer-limit", "normal 1mb 512kb 10")
            .unwrap();
        assert_eq!(c.output_limit_normal.hard, 1024 * 1024);
        assert_eq!(
            c.get_matching(b"time*"),
            vec![("timeout", "10".to_string())]
        );
        assert_eq!(parse_memory("1k").unwrap(), 1000);
    }
}
