//! The server's side of the network: the reactor (the event loop), client
//! connections, accepting RDMA connections, and the io_uring backend's
//! completions handed to clients. The connection layer itself —
//! connections and listeners of every transport, TLS, the io_uring
//! backend, buffers and the I/O threads — is the `ferrokv-net` crate,
//! re-exported here under its module names.

pub use ferrokv_net::{buffer, conn, io_threads, pool, tls, uring};

pub mod client;
pub mod rdma;
pub mod reactor;
pub mod rebind;
pub mod uring_reap;
