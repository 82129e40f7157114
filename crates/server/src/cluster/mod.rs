//! Redis Cluster (#24), built up in this folder:
//! - `bus.rs`: the bus protocol, byte-compatible with Redis 7.0's
//!   `clusterMsg`;
//! - `slot.rs`: key hash slots;
//! - `nodes.rs`: the node table's text form (`CLUSTER NODES` lines,
//!   `nodes.conf`);
//! - `state.rs`: the node table and Redis's rules over it (epoch
//!   collisions, PFAIL → FAIL, votes, replica rank).
//!
//! The bus links and cron that drive them, slot migration and the
//! failover itself come next; `cluster-enabled` stays `no` until a node can join
//! a cluster (docs/config.md).

pub mod bus;
pub mod nodes;

pub mod state;
