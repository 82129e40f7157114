//! Lua scripting, as Redis 7.0 has it: `EVAL`/`EVALSHA` scripts and the
//! `FUNCTION` libraries, on one embedded Lua 5.1 per kind (mlua, vendored).
//!
//! ```text
//!  EVAL / FCALL ──► run.rs: checks (flags, replica, OOM), the run state,
//!                   xpcall(script, error handler) in engine.rs's sandbox
//!                        │ redis.call / pcall (api.rs)
//!                        ▼
//!                   the script client ──► Server::call (same checks, stats,
//!                        ▲                 propagation as a client command)
//!                        └── its reply, parsed into Lua values (convert.rs)
//!  instruction hook (every 100k) ──► busy.rs: past busy-reply-threshold,
//!                   other clients are read and answered -BUSY; SCRIPT KILL,
//!                   FUNCTION KILL, SHUTDOWN NOSAVE are served
//! ```
//!
//! - [`engine`]: a Lua state with Redis's libraries and sandbox (read-only
//!   globals and library tables, no `io`/`os`/`debug`, bytecode refused).
//! - [`api`]: the `redis` table bound into Lua.
//! - [`convert`]: RESP2/RESP3 replies ⇄ Lua values, as Redis documents.
//! - [`run`]: running one script or function: flags, the run state the
//!   hook and `redis.call` reach, error replies, effects propagation.
//! - [`busy`]: serving other clients from inside a long script.
//! - [`cache`]: the `EVAL` script cache (`SCRIPT LOAD/EXISTS/FLUSH`).
//! - [`eval`]: the `EVAL`/`EVALSHA`/`SCRIPT` commands.
//! - [`libs`]: `bit`, `struct`, `cjson` and `cmsgpack`, as Redis bundles them.
//!
//! Everything runs on the execution thread: a script owns the data for as
//! long as it runs, exactly like any other command, and propagates by its
//! effects (the commands it ran, in one `MULTI`/`EXEC` when more than one).

pub mod api;
pub mod busy;
pub mod cache;
pub mod convert;
pub mod dump;
pub mod engine;
pub mod eval;
pub mod function;
pub mod libs;
pub mod run;

use std::time::Instant;

/// The id of the client scripts run their commands as.
pub const SCRIPT_CLIENT_ID: u64 = u64::MAX - 1;

/// Script flags, from a `#!lua flags=...` shebang or `register_function`.
pub mod sflags {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
    /// An `EVAL` script without a shebang: Redis's backwards-compatible
    /// mode (the command's own flags decide).
    pub const EVAL_COMPAT: u32 = 1 << 5;

    pub const NAMES: &[(u32, &str)] = &[
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];

    pub fn parse(name: &[u8]) -> Option<u32> {
        NAMES
            .iter()
            .find(|(_, n)| n.as_bytes() == name)
            .map(|(f, _)| *f)
    }
}

/// What the server knows of the script running now (for `-BUSY`,
/// `SCRIPT KILL`, `FUNCTION STATS`).
pub struct Running {
    /// The script's sha (`EVAL`) or the function's name (`FCALL`).
    pub name: String,
    pub is_function: bool,
    pub start: Instant,
    /// Id of the client that called it.
    pub caller_id: u64,
    /// It ran a write command: it can no longer be killed.
    pub wrote: bool,
    /// `SCRIPT KILL` / `FUNCTION KILL` / `SHUTDOWN NOSAVE` asked it to stop.
    pub kill: bool,
    /// Past `busy-reply-threshold`: other clients are answered `-BUSY`.
    pub busy: bool,
    pub last_pump: Instant,
    /// The command that started it (for `FUNCTION STATS`' `command`):
    /// the caller's arguments, borrowed for as long as the run lasts
    /// (`run::run` removes `Running` before it returns).
    pub command: Option<ferrokv_resp::Args<'static>>,
    pub settings: run::RunSettings,
    /// `redis.call`s the caller's user was refused: `ACL LOG` entries
    /// added for the caller when the script ends.
    pub acl_denials: Vec<(crate::acl::Denied, Vec<u8>)>,
    /// Cluster mode: the slot of the first key the script touched (its
    /// other keys must hash there unless `allow-cross-slot-keys`).
    pub cluster_slot: Option<u16>,
    pub allow_cross_slot: bool,
}

/// Counters of `INFO`.
#[derive(Default, Debug, Clone, Copy)]
pub struct ScriptStats {
    /// Scripts killed by `SCRIPT KILL` / `FUNCTION KILL`.
    pub killed: u64,
    /// Scripts that went past `busy-reply-threshold`.
    pub busy_scripts: u64,
    /// Commands other clients were refused with `-BUSY`.
    pub busy_replies: u64,
}

/// The scripting state the server owns.
pub struct Scripting {
    /// The `EVAL` engine.
    pub eval: engine::Engine,
    pub cache: cache::ScriptCache,
    /// The `FUNCTION` libraries and their engine.
    pub functions: function::Functions,
    /// The client `redis.call` runs commands as (taken out while in use).
    pub client: Option<Box<crate::net::client::Client>>,
    pub running: Option<Running>,
    pub stats: ScriptStats,
    /// `math.random`'s generator (Redis's global `redisLrand48`).
    pub rand: api::Rand48,
    /// Why the last `redis.call` was refused (read by its trampoline).
    pub call_error: Vec<u8>,
}

impl Scripting {
    /// Both engines, their heaps capped at `heap_limit` bytes.
    pub fn new(pool: &mut crate::net::pool::BufferPool, client_id: u64, heap_limit: usize) -> Self {
        let mut client = crate::net::client::Client::fake(client_id, pool);
        // Its replies are what `redis.call` returns: never discarded.
        client.reply_mode = crate::net::client::ReplyMode::On;
        client.name = None;
        Scripting {
            eval: engine::Engine::new(engine::Kind::Eval, heap_limit)
                .expect("the Lua engine starts with its libraries"),
            cache: Default::default(),
            functions: function::Functions::new(heap_limit)
                .expect("the Lua engine starts with its libraries"),
            client: Some(Box::new(client)),
            running: None,
            stats: Default::default(),
            rand: api::Rand48::INITIAL,
            call_error: Vec::new(),
        }
    }

    /// `lua-heap-limit` changed (CONFIG SET): both heaps take it.
    pub fn set_heap_limit(&self, heap_limit: usize) {
        self.eval.set_heap_limit(heap_limit);
        self.functions.engine.set_heap_limit(heap_limit);
    }

    /// `used_memory_vm_eval`: the EVAL engine's Lua heap.
    pub fn eval_vm_memory(&self) -> usize {
        self.eval.lua.used_memory()
    }

    /// `SCRIPT FLUSH`: a fresh engine and an empty cache (Redis's
    /// `scriptingReset`).
    pub fn flush(&mut self, heap_limit: usize) -> Result<(), String> {
        let fresh =
            engine::Engine::new(engine::Kind::Eval, heap_limit).map_err(|e| e.to_string())?;
        let old = std::mem::replace(&mut self.eval, fresh);
        self.cache = Default::default();
        drop(old);
        Ok(())
    }
}
