//! The ferrokv keyspace, owned by the one execution thread (no locks).
//!
//! # Layout
//! - [`bitmap`]: bit operations on strings (`SETBIT` … `BITFIELD`), with
//!   Redis's bit order and range rules.
//! - [`bytes`]: `SmallBytes`, the inline-or-heap byte string used for keys
//!   and small values.
//! - [`value`]: the typed values stored under a key.
//! - [`db`]: one logical database — a segmented hash table (extendible
//!   hashing) with per-entry expiry, `SCAN` cursors and active expiry.
//! - [`hyperloglog`]: HyperLogLog in Redis's byte layout (dense and sparse).
//! - [`hash`], [`set`]: the hash and set types and their compact
//!   encodings; [`dense`]: the full table both use when they grow.
//! - [`digest`]: Redis 7.0's `DEBUG DIGEST` algorithm.
//! - [`geo`]: geohash scores, the cells a radius or box search reads,
//!   the haversine distance (Redis's GEO commands on sorted sets).
//! - [`list`]: the list type, a deque of chunks of packed elements.
//! - [`pattern`]: Redis's glob matching.
//! - [`slots`]: Redis Cluster's key hash slots, and the per-slot key index
//!   a database keeps in cluster mode.
//! - [`stream`]: streams — entries packed in nodes with Redis's node
//!   boundaries, their listpack form, consumer groups and PELs.
//! - [`zset`]: sorted sets (listpack and skiplist encodings).
//!
//! [`Keyspace`] groups the 16 databases `SELECT` chooses from. The crate is
//! pure: time is passed in, nothing here does I/O. It has one `unsafe`
//! block, a cache prefetch hint (`db::prefetch_line`), which reads nothing.
#![deny(unsafe_code)]

pub mod bitmap;
pub mod bytes;
pub mod db;
pub mod dense;
pub mod digest;
pub mod geo;
pub mod hash;
pub mod hyperloglog;
pub mod list;
pub mod pattern;
pub mod set;
pub mod slots;
pub mod stream;
pub mod value;
pub mod zset;

pub use bytes::SmallBytes;
pub use db::{Access, Db, Entry, Found, Lookup, NO_EXPIRE};
pub use value::{Value, ValueRef, ValueType};
pub use zset::{ZSet, ZsetLimits};

/// The databases of a server.
pub struct Keyspace {
    pub dbs: Vec<Db>,
}

impl Keyspace {
    pub fn new(databases: usize) -> Self {
        Keyspace {
            dbs: (0..databases).map(|_| Db::new()).collect(),
        }
    }

    /// Total keys in every database.
    pub fn total_keys(&self) -> usize {
        self.dbs.iter().map(|d| d.len()).sum()
    }

    pub fn digest(&self) -> digest::Digest {
        digest::dataset_digest(self.dbs.iter().enumerate())
    }
}
