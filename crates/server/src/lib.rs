//! ferrokv-server: a Redis-compatible key-value server.
//!
//! ```text
//!             accept/read/write (mio, epoll)                 timers, every loop turn
//! clients ──► reactor ──► RESP decode ──► command table ──► keyspace (owned, no locks)
//!                 ▲                                   │
//!                 │ replies (RESP2/3 encode)          │
//!                 └───────────────────────────────────┘
//! ```
//!
//! One execution thread owns the keyspace and runs the event loop: accept,
//! read, decode, execute, encode, write. No lock is taken on the data path
//! and every write has a single total order. Helper threads, when a part
//! needs one, never touch the keyspace.
//!
//! # Layout
//! - [`config`]: redis.conf-style configuration and `CONFIG`.
//! - [`net`]: the reactor, client connections, buffer pool.
//! - [`blocking`]: clients blocked on keys (BLPOP and friends).
//! - [`server`]: the state the thread owns and the command pipeline.
//! - [`commands`]: the command table, one file per command family.
//! - [`metrics`]: the Prometheus `/metrics` endpoint and every series it serves.
//! - [`propagate`]: the one stream of changes that feeds the AOF.
//! - [`persistence`]: fork-free RDB snapshots and loading.
//! - [`replication`]: Redis's PSYNC protocol, both as master and as replica.
//! - [`alloc`]: the counting global allocator behind `INFO memory`.
//! - [`fdlimit`]: fitting `maxclients` to the open-files limit.
//! - [`signals`]: SIGTERM/SIGINT as a clean shutdown.
//! - [`scripting`]: Lua scripts (`EVAL`) and functions (`FCALL`), with Redis 7.0's sandbox.
//! - [`embedded`]: the server driven in-process, without sockets.
//! - [`command_fuzz`]: the command fuzzer's harness (`fuzz/`, and its replay test).

pub mod alloc;
pub mod blocking;
pub mod command_fuzz;
pub mod commands;
pub mod config;
pub mod embedded;
pub mod evict;
pub mod fdlimit;
pub mod info;
pub mod metrics;
pub mod net;
pub mod notify;
pub mod persistence;
pub mod propagate;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod signals;

pub const REDIS_COMPAT_VERSION: &str = "7.0.15";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
