//! ferrokv-net: ferrokv's connection layer, below the server.
//!
//! ```text
//!   Listener ──accept──► Conn (TCP | Unix | TLS | RDMA | io_uring)   conn.rs, tls.rs, uring.rs
//!                          │  read_into / flush_from (buffer.rs), buffers from a pool (pool.rs)
//!                          └─► io_threads.rs: a turn's reads and writes moved to I/O threads
//!                              and back (`io-threads N`), by ownership, one batch at a time
//! ```
//!
//! It knows bytes, sockets and threads, and nothing of commands, clients'
//! sessions or the keyspace: it depends on `ferrokv-fabric` (RDMA streams)
//! and never on the server crate. The server's event loop
//! (`ferrokv-server`'s `net/reactor.rs`) drives it: it accepts through
//! [`conn::Listener`], reads and writes each client's [`conn::Conn`] with
//! [`buffer::read_into`] and [`buffer::flush_from`] (or hands them to
//! [`io_threads::IoThreads`]), and decodes and runs what was read.
//!
//! # Layout
//! - [`connection`]: a client connection's I/O half (socket, input buffer,
//!   decoder, reply progress), apart from its session.
//! - [`conn`]: one connection type, one listener type and one address
//!   type, whatever the transport.
//! - [`tls`]: TLS over TCP with rustls (`tls-port`, `tls-replication`,
//!   `tls-cluster`).
//! - [`uring`]: the io_uring backend (`io-backend uring`).
//! - [`buffer`]: how a read sizes a connection's input buffer, and how its
//!   reply buffer is written out.
//! - [`pool`]: pooled connection buffers.
//! - [`io_threads`]: the I/O threads (`io-threads`).
//!
//! Still in the server crate (docs/io-threads.md, "Not yet"): the event
//! loop itself, which reaches into the server's clients (their
//! [`connection::Connection`] and their sessions alike) rather than through
//! one narrow interface, and accepting RDMA connections (which registers
//! them with the server's RDMA tuner).

pub mod buffer;
pub mod conn;
pub mod connection;
pub mod io_threads;
pub mod pool;
pub mod tls;
pub mod uring;
