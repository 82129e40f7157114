//! The network layer: the mio reactor, client connections and their
//! pooled buffers.

pub mod client;
pub mod pool;
pub mod reactor;
