//! Hash-field expiry on the server side (Redis 7.4): removing fields whose
//! deadline passed — lazily, when a command meets one, and actively, from
//! the cron, through each database's index of hashes with field TTLs
//! (`ferrokv_store::hash::expiry`).
//!
//! Each removed field leaves the propagation stream as its own `HDEL key
//! field` (no `DEL` when the hash empties: the replica's last `HDEL`
//! removes it), and a call announces one `hexpired` event (class `h`);
//! a hash left empty is removed with a `del` event, as Redis 7.4 does.
//! Which commands remove what they meet is Redis 7.4's choice: the
//! single-field reads (`HGET`, `HMGET`, `HEXISTS`, `HSTRLEN`) and the
//! read-modify-writes (`HSETNX`, `HINCRBY*`) remove the fields they
//! touch, `HRANDFIELD` every due field first; `HGETALL`, `HKEYS`, `HVALS`
//! and `HSCAN` skip due fields without removing them, and `HLEN` counts
//! them. A replica removes
//! nothing itself: it hides due fields from reads and waits for its
//! master's `HDEL`, as it waits for `DEL` of a key.
//!
//! The active cycle is bounded by the same time budget as key expiry and
//! by [`ACTIVE_FIELDS_PER_STEP`] fields per step, so a million fields due at
//! the same millisecond are removed over several cron ticks while clients
//! keep being served; a hash with more due fields than a step takes is
//! filed again at its (past) soonest deadline and continued next step.

use crate::net::client::Client;
use crate::notify::{NOTIFY_GENERIC, NOTIFY_HASH};
use crate::server::Server;
use ferrokv_store::bytes::SmallBytes;
use ferrokv_store::db::Lookup;
use ferrokv_store::Value;
use std::time::Instant;

/// Fields one step of the active cycle removes at most (the time budget is
/// checked between steps).
pub const ACTIVE_FIELDS_PER_STEP: usize = 1000;

/// Where the `HDEL`s of expired fields go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagate {
    /// Before the command being run (a lookup inside a command).
    BeforeCommand,
    /// At once (the cron).
    Now,
}

/// Which fields of a hash to remove when due.
#[derive(Debug, Clone, Copy)]
pub enum Which<'a> {
    /// The due fields, soonest first, at most this many (the active
    /// cycle; `HRANDFIELD`, which clears the whole hash first).
    Due(usize),
    /// Those of these fields that are due (a command that met them:
    /// `HGET`, `HMGET`, `HSETNX`, ...).
    Named(&'a [&'a [u8]]),
}

impl Server {
    /// Removes fields of the hash at `key` whose deadline is at or before
    /// `now`: each propagated as `HDEL key field`, one `hexpired` event
    /// for the call, the key removed (`del`) when nothing is left. Nothing
    /// on a replica or during a client pause ([`Server::deletes_expired_keys`]).
    pub fn expire_hash_fields(
        &mut self,
        mut current: Option<&mut Client>,
        db: usize,
        key: &[u8],
        now: i64,
        which: Which,
        how: Propagate,
    ) -> usize {
        if !self.deletes_expired_keys() {
            return 0;
        }
        let Lookup::Live(e) = self.keyspace.dbs[db].lookup(key, now, false) else {
            return 0;
        };
        let Some(Value::Hash(h)) = e.value_mut() else {
            return 0;
        };
        let due: Vec<SmallBytes> = match which {
            Which::Due(max) => h.due_fields(now, max),
            Which::Named(fields) => {
                let mut due: Vec<SmallBytes> = Vec::new();
                for f in fields {
                    if h.is_due(f, now) && !due.iter().any(|d| &d[..] == *f) {
                        due.push(SmallBytes::new(f));
                    }
                }
                due
            }
        };
        if due.is_empty() {
            if let Some(m) = h.min_field_expire() {
                self.keyspace.dbs[db].file_field_expiry(key, m);
            }
            return 0;
        }
        for f in &due {
            h.remove(f);
        }
        let empty = h.is_empty();
        let min = h.min_field_expire();
        if empty {
            self.keyspace.dbs[db].remove(key);
        } else if let Some(m) = min {
            self.keyspace.dbs[db].file_field_expiry(key, m);
        }
        self.stats.expired_subkeys += due.len() as u64;
        for f in &due {
            let argv = vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()];
            match how {
                Propagate::BeforeCommand => self.propagation.also.push((db, argv)),
                Propagate::Now => self.propagate(db, &argv),
            }
        }
        self.flush_pending_events(current.as_deref_mut());
        self.notify_keyspace_event(current.as_deref_mut(), NOTIFY_HASH, "hexpired", key, db);
        if empty {
            self.notify_keyspace_event(current, NOTIFY_GENERIC, "del", key, db);
        }
        due.len()
    }

    /// Removes the named fields of the hash at `key` that are due, an
    /// `HDEL` each before the command, and nothing else: no event, and the
    /// hash stays even if emptied (Redis 8's `HFE_LAZY_NO_NOTIFICATION |
    /// HFE_LAZY_AVOID_HASH_DEL`: `HGETDEL`, `HGETEX`, `HSETEX` announce
    /// `hexpired` once and remove an empty hash themselves). Returns how
    /// many were removed.
    pub fn remove_due_fields_quietly(
        &mut self,
        db: usize,
        key: &[u8],
        fields: &[&[u8]],
        now: i64,
    ) -> usize {
        if !self.deletes_expired_keys() || fields.is_empty() {
            return 0;
        }
        let Lookup::Live(e) = self.keyspace.dbs[db].lookup(key, now, false) else {
            return 0;
        };
        let Some(Value::Hash(h)) = e.value_mut() else {
            return 0;
        };
        let mut removed: Vec<&[u8]> = Vec::new();
        for f in fields {
            if h.is_due(f, now) && h.remove(f) {
                removed.push(f);
            }
        }
        self.stats.expired_subkeys += removed.len() as u64;
        for f in &removed {
            let argv = vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()];
            self.propagation.also.push((db, argv));
        }
        removed.len()
    }

    /// The active cycle's share for field TTLs: hashes due by the index,
    /// soonest first, until `deadline`. Returns the fields removed.
    pub fn active_expire_fields(&mut self, now: i64, deadline: Instant) -> u64 {
        let mut removed = 0u64;
        let n = self.keyspace.dbs.len();
        // From the database the last call stopped in (a backlog in one
        // never starves the others for good).
        for _ in 0..n {
            let db = self.field_expiry_db % n;
            let mut budget = ACTIVE_FIELDS_PER_STEP;
            loop {
                if budget == 0 {
                    if Instant::now() >= deadline {
                        return removed;
                    }
                    budget = ACTIVE_FIELDS_PER_STEP;
                }
                let Some(key) = self.keyspace.dbs[db].pop_field_expiry(now) else {
                    break;
                };
                let done = self.expire_hash_fields(
                    None,
                    db,
                    &key,
                    now,
                    Which::Due(budget),
                    Propagate::Now,
                );
                budget -= done.min(budget);
                removed += done as u64;
                if done == 0 && Instant::now() >= deadline {
                    return removed;
                }
            }
            self.field_expiry_db = (db + 1) % n;
        }
        removed
    }
}
