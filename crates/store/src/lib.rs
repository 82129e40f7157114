//! The ferrokv keyspace, owned by the one execution thread (no locks).
//!
//! # Layout
//! - [`bytes`]: `SmallBytes`, the inline-or-heap byte string used for keys
//!   and small values.
//! - [`value`]: the typed values stored under a key.
//! - [`db`]: one logical database — a segmented hash table (extendible
//!   hashing) with per-entry expiry, `SCAN` cursors and active expiry.
//! - [`digest`]: Redis 7.0's `DEBUG DIGEST` algorithm.
//! - [`pattern`]: Redis's glob matching.
//!
//! [`Keyspace`] groups the 16 databases `SELECT` chooses from. The crate is
//! pure: time is passed in, nothing here does I/O.
#![forbid(unsafe_code)]

pub mod bytes;
pub mod db;
pub mod digest;
pub mod pattern;
pub mod value;

pub use bytes::SmallBytes;
pub use db::{Access, Db, Entry, Found, Lookup, NO_EXPIRE};
pub use value::{Value, ValueRef, ValueType};

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
