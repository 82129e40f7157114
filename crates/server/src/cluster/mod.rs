//! Redis Cluster (#24), built up in this folder: the bus protocol
//! (`bus.rs`, byte-compatible with Redis 7.0's `clusterMsg`), key hash
//! slots (`slot.rs`). The node table and epochs, slot migration, failover
//! and `nodes.conf` come next; `cluster-enabled` stays `no` until a node
//! can join a cluster (docs/config.md).

pub mod bus;
pub mod slot;
