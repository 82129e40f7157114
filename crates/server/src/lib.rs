//! ferrokv-server: a Redis-compatible key-value server.
//!
//! ```text
//!   TCP ─┐  net::conn: one Conn / Listener / Addr     timers (cron, hz), every loop turn
//!  Unix ─┤  (TLS over TCP: net::tls)
//!  RDMA ─┴─► reactor (mio, epoll or io_uring) ──► RESP decode ──► command table ──► keyspace (owned, no locks)
//!            │   ▲                                       │   │
//!            │   │ replies (RESP2/3 encode)              │   └─► scripting (Lua, same thread)
//!            │   └───────────────────────────────────────┘
//!            └─► net::io_threads (io-threads N): a turn's socket reads and reply
//!                writes, moved to N-1 threads and back, in one batch each
//!                                                          │ every change (propagate)
//!                              ┌───────────────────────────┼──────────────────────────┐
//!                              ▼                           ▼                          ▼
//!                     AOF (persistence::aof)    replicas (replication::master,   keyspace events,
//!                     RDB snapshots, fork-free   PSYNC; full sync over TCP or     pub/sub (notify,
//!                     (persistence::snapshot)    RDMA: replication::rdma)         pubsub)
//! ```
//!
//! One execution thread owns the keyspace and runs the event loop: accept,
//! read, decode, execute, encode, write (with `io-threads` > 1, the reads
//! and writes of a busy turn go to I/O threads and come back before the
//! commands run). No lock is taken on the data path
//! and every write has a single total order. Helper threads, when a part
//! needs one, never touch the keyspace (the snapshot writer reads a
//! frozen view; replica senders and the lazy-free thread own what they
//! are given).
//!
//! # Layout
//! - [`config`]: redis.conf-style configuration and `CONFIG`.
//! - [`net`]: the reactor (the event loop), client connections, accepting
//!   RDMA connections (`net::rdma`). The connection layer below it is the
//!   `ferrokv-net` crate, re-exported as `net::conn` (TCP, Unix sockets,
//!   TLS and RDMA connections as one `Conn`, their listeners and
//!   addresses), `net::tls`, `net::uring`, `net::pool`, `net::buffer` and
//!   `net::io_threads` (the I/O threads: `io-threads`, docs/io-threads.md). Nothing above it knows the
//!   transport, except where a command reports it (`CLIENT LIST`'s `U`
//!   flag, `INFO`'s per-transport counts).
//! - [`acl`]: users, permissions and the per-command check (`ACL`, `AUTH`).
//! - [`server`]: the state the thread owns and the command pipeline.
//! - [`commands`]: the command table, one file per command family.
//! - [`blocking`]: clients blocked on keys (BLPOP and friends).
//! - [`pause`]: `CLIENT PAUSE`, the failover's and the shutdown's pauses (writes held, reads served).
//! - [`cluster`]: Redis Cluster (the bus, node table, slots, redirections,
//!   failover; docs/cluster.md).
//! - [`busy`]: serving clients while the thread is held by a long script or
//!   by loading the data set (`-BUSY`, `-LOADING`).
//! - [`propagate`]: the one stream of changes that feeds the AOF and replicas.
//! - [`persistence`]: fork-free RDB snapshots and loading, the multi-part AOF.
//! - [`replication`]: Redis's PSYNC protocol, both as master and as replica
//!   (handshake, backlog, master and replica sides), and the RDMA full sync.
//! - [`scripting`]: Lua scripts (`EVAL`) and functions (`FCALL`), with Redis 7.0's sandbox.
//! - [`evict`]: `maxmemory` and its eviction policies.
//! - [`monitor`]: `MONITOR` and the lines its clients are shown.
//! - [`notify`]: keyspace notifications.
//! - [`tracking`]: client-side caching (`CLIENT TRACKING`, invalidation messages).
//! - [`pubsub`]: channels, patterns and shard channels.
//! - [`info`]: the `INFO` sections.
//! - [`metrics`]: the Prometheus `/metrics` endpoint and every series it serves.
//! - [`alloc`]: the counting global allocator behind `INFO memory`.
//! - [`fdlimit`]: fitting `maxclients` to the open-files limit.
//! - [`oom`]: `oom-score-adj`, the process's score for the kernel's OOM killer.
//! - [`shutdown`]: `SHUTDOWN`, SIGTERM/SIGINT, waiting for lagging replicas, `SHUTDOWN ABORT`.
//! - [`signals`]: the SIGTERM/SIGINT handler (recording the signal for `shutdown`).
//! - [`embedded`]: the server driven in-process, without sockets.
//! - [`command_fuzz`]: the command fuzzer's harness (`fuzz/`, and its replay test).

pub mod acl;
pub mod alloc;
pub mod blocking;
pub mod busy;
pub mod cluster;
pub mod command_fuzz;
pub mod commands;
pub mod config;
pub mod embedded;
pub mod evict;
pub mod fdlimit;
pub mod field_expiry;
pub mod info;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod notify;
pub mod oom;
pub mod pause;
pub mod persistence;
pub mod propagate;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod shutdown;
pub mod signals;
pub mod tracking;

pub const REDIS_COMPAT_VERSION: &str = "7.0.15";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
