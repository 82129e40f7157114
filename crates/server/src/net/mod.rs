//! The network layer: the connection layer (`conn`: TCP and Unix
//! sockets behind one type), the mio reactor, the io_uring backend
//! (`uring`), client connections and their pooled buffers.

pub mod client;
pub mod conn;
pub mod io_threads;
pub mod pool;
pub mod rdma;
pub mod reactor;
pub mod tls;
pub mod uring;
