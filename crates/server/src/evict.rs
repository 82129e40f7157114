//! `maxmemory`: making room by evicting keys, as Redis's `evict.c` does.
//!
//! Before a command runs (and at every loop turn while a previous round
//! is unfinished), [`Server::perform_evictions`] compares the memory the
//! allocator counts — less the AOF buffer, which a write cannot shrink by
//! evicting — with `maxmemory`, and removes keys until it fits, chosen by
//! `maxmemory-policy`:
//! - `*-random`: a random key (of those with an expiry for `volatile-*`).
//! - `*-lru`, `*-lfu`, `volatile-ttl`: approximated by sampling, as Redis
//!   does: each round samples `maxmemory-samples` keys of every database
//!   into a pool of the 16 best candidates seen so far (longest idle,
//!   least frequently used, or nearest expiry) and evicts the best one
//!   that still exists.
//!
//! A round stops after a time limit set by `maxmemory-eviction-tenacity`
//! and goes on at the next loop turn; the command that started it runs
//! meanwhile. When nothing can be evicted (`noeviction`, or no candidate
//! key), commands flagged `denyoom` get `-OOM command not allowed when used
//! memory > 'maxmemory'.` and everything else still runs, as in Redis.
//!
//! Each eviction is propagated as a `DEL` (AOF and replicas), counted in
//! `evicted_keys`, and frees the value right away unless
//! `lazyfree-lazy-eviction yes` hands it to the lazy-free thread.

use crate::server::Server;
use ferrokv_store::db::{lfu_counter, lfu_minutes_elapsed};
use ferrokv_store::{Entry, NO_EXPIRE};
use rand::Rng;
use std::time::{Duration, Instant};

/// `maxmemory-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub const ALL: [Policy; 8] = [
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
        Policy::AllKeysLru,
        Policy::AllKeysLfu,
        Policy::AllKeysRandom,
        Policy::NoEviction,
    ];

    pub fn parse(s: &str) -> Option<Policy> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Whether keys carry LFU counters instead of LRU stamps.
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    /// Whether only keys with an expiry may go.
    pub fn is_volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn is_random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }
}

/// The outcome of an eviction round (Redis's `EVICT_OK`/`RUNNING`/`FAIL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evict {
    /// Memory is within the limit.
    Ok,
    /// Over the limit, the round ran out of time; it goes on next turn.
    Running,
    /// Over the limit and nothing can be evicted.
    Fail,
}

/// Candidates kept between rounds (Redis's `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

struct Candidate {
    /// Higher is evicted first.
    score: u64,
    db: usize,
    key: Vec<u8>,
}

/// The eviction state kept by the server.
#[derive(Default)]
pub struct Eviction {
    pool: Vec<Candidate>,
    /// A round ran out of time and continues at the next loop turn.
    pub pending: bool,
    /// Where the random policies take their next database from.
    next_db: usize,
    /// `evicted_keys`.
    pub evicted_keys: u64,
    /// Since when memory stays above `maxmemory` (rounds that ran out of
    /// time or found nothing to evict), and the time it did before
    /// (`current_`/`total_eviction_exceeded_time`).
    pub exceeded_since: Option<Instant>,
    pub exceeded_total: Duration,
}

impl Eviction {
    /// Milliseconds above `maxmemory`: (in total, in the current stretch).
    pub fn exceeded_ms(&self) -> (u64, u64) {
        let current = self.exceeded_since.map_or(Duration::ZERO, |t| t.elapsed());
        (
            (self.exceeded_total + current).as_millis() as u64,
            current.as_millis() as u64,
        )
    }
}

impl Eviction {
    /// Adds a sampled key to the pool, keeping the best `POOL_SIZE`.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if self.pool.iter().any(|c| c.db == db && c.key == key) {
            return;
        }
        if self.pool.len() == POOL_SIZE {
            let (worst, min) = self
                .pool
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.score)
                .map(|(i, c)| (i, c.score))
                .expect("pool is full");
            if score <= min {
                return;
            }
            self.pool.swap_remove(worst);
        }
        self.pool.push(Candidate {
            score,
            db,
            key: key.to_vec(),
        });
    }

    /// Takes the best candidate out of the pool.
    fn take_best(&mut self) -> Option<Candidate> {
        let best = self
            .pool
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| c.score)
            .map(|(i, _)| i)?;
        Some(self.pool.swap_remove(best))
    }

    pub fn clear_pool(&mut self) {
        self.pool.clear();
    }
}

/// How long one round may run (Redis's `evictionTimeLimitUs`); `None`: no limit.
fn time_limit(tenacity: u64) -> Option<Duration> {
    if tenacity <= 10 {
        Some(Duration::from_micros(50 * tenacity.max(1)))
    } else if tenacity < 100 {
        Some(Duration::from_micros(
            (500.0 * 1.15f64.powi((tenacity - 10) as i32)) as u64,
        ))
    } else {
        None
    }
}

/// Current LFU time: minutes, 16 bits (Redis's `LFUGetTimeInMinutes`).
pub fn lfu_minutes(now_ms: i64) -> u16 {
    ((now_ms / 60_000) & 0xFFFF) as u16
}

impl Server {
    /// Memory that counts against `maxmemory`: what the allocator holds,
    /// less the AOF buffer (evicting keys cannot shrink it).
    pub fn memory_for_eviction(&self) -> usize {
        let used = crate::alloc::used_memory();
        // As Redis's freeMemoryGetNotCountedMemory: buffers on their way
        // to the AOF and to replicas would otherwise feed back into evictions.
        let not_counted =
            self.aof.as_ref().map_or(0, |a| a.buffered()) + self.replica_buffered_bytes();
        used.saturating_sub(not_counted)
    }

    /// One eviction round (see the module doc), timing how long memory
    /// stays above the limit as Redis's `performEvictions` does.
    pub fn perform_evictions(&mut self) -> Evict {
        let r = self.eviction_round();
        let ev = &mut self.eviction;
        match r {
            Evict::Running | Evict::Fail => {
                ev.exceeded_since.get_or_insert_with(Instant::now);
            }
            Evict::Ok => {
                if let Some(t) = ev.exceeded_since.take() {
                    ev.exceeded_total += t.elapsed();
                }
            }
        }
        r
    }

    fn eviction_round(&mut self) -> Evict {
        let max = self.config.maxmemory as usize;
        // A replica mirrors its master, which evicts for both (Redis's
        // `replica-ignore-maxmemory yes`).
        // During a client pause the dataset holds still: nothing is
        // evicted, nothing refused (Redis's `isSafeToPerformEvictions`).
        if max == 0 || self.repl.is_replica() || self.pause.active() {
            self.eviction.pending = false;
            return Evict::Ok;
        }
        let used = self.memory_for_eviction();
        if used <= max {
            self.eviction.pending = false;
            return Evict::Ok;
        }
        let policy = self.config.maxmemory_policy;
        if policy == Policy::NoEviction {
            self.eviction.pending = false;
            return Evict::Fail;
        }
        let to_free = used - max;
        let limit = time_limit(self.config.maxmemory_eviction_tenacity);
        let t0 = Instant::now();
        let mut freed = 0usize;
        let mut keys = 0u64;
        while freed < to_free {
            let Some((db, key)) = self.pick_victim(policy) else {
                self.eviction.pending = false;
                return Evict::Fail;
            };
            let before = crate::alloc::used_memory();
            self.evict_key(db, &key);
            freed += before.saturating_sub(crate::alloc::used_memory());
            keys += 1;
            if keys.is_multiple_of(16) {
                if let Some(limit) = limit {
                    if t0.elapsed() > limit {
                        self.eviction.pending = true;
                        return Evict::Running;
                    }
                }
            }
        }
        self.eviction.pending = false;
        Evict::Ok
    }

    /// Removes one key for `maxmemory`: counted, propagated as `DEL`.
    /// WATCHes on it break, `evicted` keyspace event, `DEL` propagated.
    fn evict_key(&mut self, db: usize, key: &[u8]) {
        self.touch_watched_key(db, key);
        let Some(e) = self.keyspace.dbs[db].remove(key) else {
            return;
        };
        self.eviction.evicted_keys += 1;
        self.blocking.signal(key);
        self.propagate(db, &[&b"DEL"[..], key]);
        self.notify_keyspace_event(None, crate::notify::NOTIFY_EVICTED, "evicted", key, db);
        if self.config.lazyfree_lazy_eviction {
            self.lazy_free(e);
        } else {
            drop(e);
        }
    }

    /// Chooses the next key to evict, or `None` when there is none.
    fn pick_victim(&mut self, policy: Policy) -> Option<(usize, Vec<u8>)> {
        let volatile = policy.is_volatile();
        let ndb = self.keyspace.dbs.len();
        let has_keys = |d: &ferrokv_store::Db| {
            if volatile {
                d.expires() > 0
            } else {
                !d.is_empty()
            }
        };
        if policy.is_random() {
            for i in 0..ndb {
                let db = (self.eviction.next_db + i) % ndb;
                if !has_keys(&self.keyspace.dbs[db]) {
                    continue;
                }
                self.eviction.next_db = (db + 1) % ndb;
                let mut key = None;
                self.keyspace.dbs[db]
                    .sample(&mut self.rng, 1, volatile, |e| key = Some(e.key().to_vec()));
                return key.map(|k| (db, k));
            }
            return None;
        }
        let samples = self.config.maxmemory_samples as usize;
        let clock = self.lru_clock;
        let now_min = lfu_minutes(self.now_ms);
        let decay = self.config.lfu_decay_time as u32;
        loop {
            let mut any = false;
            for db in 0..ndb {
                if !has_keys(&self.keyspace.dbs[db]) {
                    continue;
                }
                any = true;
                let mut found: Vec<(u64, Vec<u8>)> = Vec::with_capacity(samples);
                self.keyspace.dbs[db].sample(&mut self.rng, samples, volatile, |e| {
                    found.push((score(policy, e, clock, now_min, decay), e.key().to_vec()))
                });
                for (s, k) in found {
                    self.eviction.offer(s, db, &k);
                }
            }
            if !any {
                return None;
            }
            // The best candidate that still exists (and still qualifies).
            while let Some(c) = self.eviction.take_best() {
                let live = self.keyspace.dbs[c.db]
                    .get(&c.key)
                    .is_some_and(|e| !volatile || e.expire_at != NO_EXPIRE);
                if live {
                    return Some((c.db, c.key));
                }
            }
            // Every pooled key was gone: sample again.
        }
    }

    /// The access clock new keys get and reads record: the LRU clock, or
    /// under an LFU policy the minutes with a new key's counter.
    pub fn refresh_lru_clock(&mut self) {
        self.lru_clock = if self.config.maxmemory_policy.is_lfu() {
            ((lfu_minutes(self.now_ms) as u32) << 8) | ferrokv_store::db::LFU_INIT_VAL
        } else {
            ((self.now_ms / 1000) as u32) & crate::server::LRU_CLOCK_MAX
        };
    }

    /// How a read or write records an access, by policy.
    #[inline]
    pub fn access(&mut self) -> ferrokv_store::Access {
        if self.config.maxmemory_policy.is_lfu() {
            ferrokv_store::Access::Lfu {
                now_minutes: lfu_minutes(self.now_ms),
                decay_minutes: self.config.lfu_decay_time as u32,
                log_factor: self.config.lfu_log_factor as u32,
                rand: self.rng.gen::<f64>(),
            }
        } else {
            ferrokv_store::Access::Lru(self.lru_clock)
        }
    }

    /// [`Self::access`], or none while a `CLIENT NO-TOUCH` client's
    /// command runs.
    #[inline]
    pub fn access_unless_no_touch(&mut self) -> Option<ferrokv_store::Access> {
        (!self.no_touch).then(|| self.access())
    }

    /// `OBJECT FREQ`: the key's LFU counter after decay.
    pub fn lfu_frequency(&self, clock: u32) -> u32 {
        lfu_counter(
            clock,
            lfu_minutes(self.now_ms),
            self.config.lfu_decay_time as u32,
        )
    }
}

/// A sampled key's eviction score: higher goes first.
fn score(policy: Policy, e: &Entry, clock: u32, now_min: u16, decay: u32) -> u64 {
    match policy {
        Policy::AllKeysLru | Policy::VolatileLru => idle_seconds(clock, e.lru()) as u64,
        Policy::AllKeysLfu | Policy::VolatileLfu => {
            let counter = lfu_counter(e.lru(), now_min, decay);
            // Least frequent first; among equals, the longest untouched.
            let idle = lfu_minutes_elapsed(now_min, (e.lru() >> 8) as u16);
            ((255 - counter as u64) << 32) | idle as u64
        }
        Policy::VolatileTtl => u64::MAX - (e.expire_at as u64 ^ (1 << 63)),
        _ => 0,
    }
}

/// Seconds since an LRU stamp, on the 24-bit clock that wraps.
pub fn idle_seconds(clock: u32, lru: u32) -> u32 {
    if clock >= lru {
        clock - lru
    } else {
        clock + (crate::server::LRU_CLOCK_MAX - lru)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_by_name() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()), Some(p));
        }
        assert_eq!(Policy::parse("ALLKEYS-LRU"), Some(Policy::AllKeysLru));
        assert_eq!(Policy::parse("lru"), None);
    }

    #[test]
    fn pool_keeps_the_best_candidates() {
        let mut ev = Eviction::default();
        for i in 0..40u64 {
            ev.offer(i, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(ev.pool.len(), POOL_SIZE);
        ev.offer(39, 0, b"k39");
        assert_eq!(
            ev.pool.len(),
            POOL_SIZE,
            "a key already pooled is not added twice"
        );
        let best = ev.take_best().unwrap();
        assert_eq!((best.score, best.key.as_slice()), (39, &b"k39"[..]));
        assert!(ev.pool.iter().all(|c| c.score >= 24));
    }

    #[test]
    fn earlier_expiry_scores_higher_under_volatile_ttl() {
        let soon = Entry::new(b"a", ferrokv_store::Value::Int(1), 1_000, 0);
        let late = Entry::new(b"b", ferrokv_store::Value::Int(1), 9_000, 0);
        assert!(
            score(Policy::VolatileTtl, &soon, 0, 0, 1) > score(Policy::VolatileTtl, &late, 0, 0, 1)
        );
    }

    #[test]
    fn time_limit_follows_tenacity() {
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(0), Some(Duration::from_micros(50)));
        assert!(time_limit(50).unwrap() > time_limit(20).unwrap());
        assert_eq!(time_limit(100), None);
    }
}
