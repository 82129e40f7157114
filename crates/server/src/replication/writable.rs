//! A writable replica's own keys (`replica-read-only no`), as Redis 7.0's
//! `slaveKeysWithExpire` (`expire.c`).
//!
//! A replica deletes no key of its master's by itself: they expire when
//! the master's `DEL` arrives (lazy expiry only hides them). But a key a
//! client wrote on a writable replica, with a TTL, has no master to expire
//! it: without more it would stay in memory forever, counted by `DBSIZE`
//! and `INFO keyspace`. So a write by a client other than the master
//! records each of its keys that now has a TTL; every cron tick the
//! replica deletes those whose time has passed (an `expired` event, the
//! `DEL` in its own AOF; `expired_keys` counts them), forgetting those that
//! are gone or lost their TTL. The record is dropped when the data set is
//! replaced by a full sync or the server stops being a replica.

use crate::server::Server;
use ferrokv_resp::Args;
use std::collections::BTreeSet;
use std::ops::Bound;

/// How many recorded keys one cron tick looks at, at most; the next tick
/// goes on after the last one looked at, so every key is looked at in turn.
const PER_TICK: usize = 10_000;

/// The recorded keys: (database, key), and where the walk goes on.
#[derive(Default)]
pub struct LocalExpires {
    keys: BTreeSet<(usize, Vec<u8>)>,
    cursor: Option<(usize, Vec<u8>)>,
}

impl LocalExpires {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn clear(&mut self) {
        *self = LocalExpires::default();
    }

    /// Up to `n` keys after the cursor (from the start once past the end),
    /// moving it on.
    fn next_batch(&mut self, n: usize) -> Vec<(usize, Vec<u8>)> {
        let (from, wrap) = match &self.cursor {
            Some(c) => (Bound::Excluded(c.clone()), Bound::Included(c.clone())),
            None => (Bound::Unbounded, Bound::Unbounded),
        };
        let mut batch: Vec<_> = self
            .keys
            .range((from, Bound::Unbounded))
            .take(n)
            .cloned()
            .collect();
        // Past the end: on from the start, up to where this walk began.
        if batch.len() < n && !matches!(wrap, Bound::Unbounded) {
            let more = n - batch.len();
            let wrapped: Vec<_> = self
                .keys
                .range((Bound::Unbounded, wrap))
                .take(more)
                .cloned()
                .collect();
            batch.extend(wrapped);
        }
        self.cursor = batch.last().cloned();
        batch
    }
}

impl Server {
    /// After a write by client `client_id` on a replica: records the keys
    /// of the command (by its key positions) that now have a TTL, when the
    /// replica is writable and the writer is not the master.
    pub fn remember_local_expires(&mut self, client_id: u64, idx: usize, db: usize, args: &Args) {
        if !self.repl.is_replica()
            || self.config.repl.replica_read_only
            || self.repl.master_client_id() == Some(client_id)
        {
            return;
        }
        let range = self.commands.specs[idx].keys;
        for i in crate::commands::key_range_positions(range, args.len()) {
            let key = args.get(i);
            if self.keyspace.dbs[db]
                .get(key)
                .is_some_and(|e| e.has_expire())
            {
                self.repl.local_expires.keys.insert((db, key.to_vec()));
            }
        }
    }

    /// The cron's step on a replica: deletes the recorded keys whose time
    /// has passed (Redis's `expireSlaveKeys`).
    pub fn expire_local_keys(&mut self) {
        if self.repl.local_expires.is_empty() {
            return;
        }
        if !self.repl.is_replica() {
            self.repl.local_expires.clear();
            return;
        }
        let now = self.now_ms;
        let mut expired = Vec::new();
        for k in self.repl.local_expires.next_batch(PER_TICK) {
            let (db, key) = &k;
            match self.keyspace.dbs.get(*db).and_then(|d| d.get(key)) {
                Some(e) if e.has_expire() && e.expire_at > now => continue,
                Some(e) if e.has_expire() => expired.push((*db, key.clone())),
                // Gone, or no TTL any more: forgotten.
                _ => {}
            }
            self.repl.local_expires.keys.remove(&k);
        }
        for (db, key) in expired {
            if self.keyspace.dbs[db].remove(&key).is_some() {
                self.stats.expired_keys += 1;
                self.touch_watched_key(db, &key);
                self.blocking.signal(&key);
                self.propagate(db, &[&b"DEL"[..], &key]);
                self.pending_events.expired.push((db, key));
            }
        }
        self.flush_pending_events(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_visits_every_key_in_turn() {
        let mut l = LocalExpires::default();
        for i in 0..5u8 {
            l.keys.insert((0, vec![i]));
        }
        let seen: Vec<Vec<u8>> = (0..3)
            .flat_map(|_| l.next_batch(2))
            .map(|(_, k)| k)
            .collect();
        assert_eq!(
            seen,
            vec![vec![0], vec![1], vec![2], vec![3], vec![4], vec![0]]
        );
        assert_eq!(l.next_batch(2), vec![(0, vec![1]), (0, vec![2])]);
    }
}
