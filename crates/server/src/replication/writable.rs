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
use std::collections::HashSet;

/// How many recorded keys one cron tick looks at, at most.
const PER_TICK: usize = 10_000;

/// The recorded keys: (database, key).
#[derive(Default)]
pub struct LocalExpires {
    keys: HashSet<(usize, Vec<u8>)>,
}

impl LocalExpires {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn clear(&mut self) {
        self.keys = HashSet::new();
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
        let (first, last, step) = self.commands.specs[idx].keys;
        if first <= 0 || step <= 0 {
            return;
        }
        let n = args.len() as i32;
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        let mut i = first;
        while i <= last && i < n {
            let key = args.get(i as usize);
            if self.keyspace.dbs[db]
                .get(key)
                .is_some_and(|e| e.has_expire())
            {
                self.repl.local_expires.keys.insert((db, key.to_vec()));
            }
            i += step;
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
        let mut seen = Vec::new();
        let mut expired = Vec::new();
        for (db, key) in self.repl.local_expires.keys.iter().take(PER_TICK) {
            match self.keyspace.dbs.get(*db).and_then(|d| d.get(key)) {
                Some(e) if e.has_expire() && e.expire_at > now => continue,
                Some(e) if e.has_expire() => expired.push((*db, key.clone())),
                _ => {}
            }
            seen.push((*db, key.clone()));
        }
        for k in &seen {
            self.repl.local_expires.keys.remove(k);
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
