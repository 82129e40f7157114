//! Key choosers: the three request distributions of YCSB's core workload,
//! ported from its Java generators so that numbers taken with this tool
//! mean what "YCSB workload A, zipfian 0.99" means elsewhere.
//!
//! - [`Zipfian`] is Gray et al.'s "Quickly generating billion-record
//!   synthetic databases" (SIGMOD '94) generator, as YCSB's
//!   `ZipfianGenerator`: rank 0 is the most popular. Its zeta sum grows
//!   incrementally when the item count grows, so `latest` can follow inserts
//!   without recomputing it from scratch.
//! - [`ScrambledZipfian`] spreads the popular ranks over the key space with
//!   an FNV hash, as YCSB's `ScrambledZipfianGenerator` does; with the
//!   default constant 0.99 it draws from 10^10 items with YCSB's precomputed
//!   zeta, so its skew is the same whatever the record count.
//! - [`SkewedLatest`] is zipfian over the distance from the newest record.
//!
//! Every chooser takes its random numbers from a caller's RNG so a fixed
//! seed reproduces a run and the statistical tests are deterministic.

use rand::Rng;

/// YCSB's default zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Item count the scrambled generator draws from with the default constant.
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// zeta(10^10, 0.99), precomputed by YCSB.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// FNV-1a over the eight little-end bytes of `v`, top bit cleared: YCSB's
/// `Utils.fnvhash64`, used both to scramble zipfian ranks and to name keys.
pub fn fnv_hash64(v: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut hash = OFFSET;
    let mut v = v;
    for _ in 0..8 {
        let octet = v & 0xff;
        v >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(PRIME);
    }
    // Java's Math.abs of a long; i64::MIN stays as is there, clear it here.
    (hash as i64).unsigned_abs() & (u64::MAX >> 1)
}

/// Sum of 1/(i+1)^theta for i in `from..to`, added to `initial`.
pub fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// Zipfian over `0..items`, rank 0 the most popular.
#[derive(Debug, Clone)]
pub struct Zipfian {
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// A generator over `items` items (at least 1) with constant `theta`
    /// (0 < theta < 1).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        let items = items.max(1);
        Self::with_zetan(items, theta, zeta(0, items, theta, 0.0))
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    /// The item count the generator currently draws from.
    pub fn items(&self) -> u64 {
        self.count_for_zeta
    }

    /// A rank in `0..items`. When `items` differs from the last call the
    /// zeta sum is extended (growth) or recomputed (shrink).
    pub fn next_rank<R: Rng + ?Sized>(&mut self, rng: &mut R, items: u64) -> u64 {
        let items = items.max(1);
        if items != self.count_for_zeta {
            self.zetan = if items > self.count_for_zeta {
                zeta(self.count_for_zeta, items, self.theta, self.zetan)
            } else {
                zeta(0, items, self.theta, 0.0)
            };
            self.count_for_zeta = items;
            self.eta = self.eta_for(items);
        }
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(items - 1);
        }
        let rank = (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(items - 1)
    }
}

/// Zipfian popularity scattered over `0..items` by hashing the rank.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    items: u64,
    inner: Zipfian,
    inner_items: u64,
}

impl ScrambledZipfian {
    pub fn new(items: u64, theta: f64) -> ScrambledZipfian {
        let items = items.max(1);
        // Exact float comparison on purpose: only YCSB's own constant has a
        // precomputed zeta for 10^10 items.
        #[allow(clippy::float_cmp)]
        let (inner, inner_items) = if theta == ZIPFIAN_CONSTANT {
            (
                Zipfian::with_zetan(SCRAMBLED_ITEM_COUNT, theta, SCRAMBLED_ZETAN),
                SCRAMBLED_ITEM_COUNT,
            )
        } else {
            (Zipfian::new(items, theta), items)
        };
        ScrambledZipfian {
            items,
            inner,
            inner_items,
        }
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let rank = self.inner.next_rank(rng, self.inner_items);
        fnv_hash64(rank) % self.items
    }
}

/// Zipfian over the distance back from the newest record: `latest` is the
/// most popular key, the one inserted before it next, and so on.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    inner: Zipfian,
}

impl SkewedLatest {
    pub fn new(theta: f64) -> SkewedLatest {
        SkewedLatest {
            inner: Zipfian::new(1, theta),
        }
    }

    /// A key in `0..=latest`, skewed towards `latest`.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, latest: u64) -> u64 {
        latest - self.inner.next_rank(rng, latest + 1)
    }
}

/// Which request distribution picks the keys of reads, updates and scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

/// A key chooser over the records that exist: `0..existing`, where the
/// caller passes the current count because inserts grow it during a run.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    Uniform,
    /// Zipfian over a key space sized for the run's expected inserts, as
    /// YCSB does; draws beyond the records that exist yet are redrawn.
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
}

impl KeyChooser {
    /// `key_space` is the number of records the run can reach (records
    /// loaded plus expected inserts).
    pub fn new(dist: Distribution, key_space: u64, theta: f64) -> KeyChooser {
        match dist {
            Distribution::Uniform => KeyChooser::Uniform,
            Distribution::Zipfian => KeyChooser::Zipfian(ScrambledZipfian::new(key_space, theta)),
            Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(theta)),
        }
    }

    /// A key number in `0..existing` (`existing` at least 1).
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, existing: u64) -> u64 {
        let existing = existing.max(1);
        match self {
            KeyChooser::Uniform => rng.gen_range(0..existing),
            KeyChooser::Zipfian(z) => {
                if existing > z.items() {
                    // More inserts than expected: stay uniform in the tail
                    // rather than never reaching it.
                    return rng.gen_range(0..existing);
                }
                loop {
                    let k = z.next(rng);
                    if k < existing {
                        return k;
                    }
                }
            }
            KeyChooser::Latest(l) => l.next(rng, existing - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn fnv_hash_has_no_collisions_on_small_keys_and_is_positive() {
        let mut seen = std::collections::HashSet::new();
        for k in 0..100_000u64 {
            let h = fnv_hash64(k);
            assert!(h <= i64::MAX as u64);
            assert!(seen.insert(h), "collision at {k}");
        }
    }

    #[test]
    fn zipfian_grows_incrementally_to_the_same_zeta() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut z = Zipfian::new(10, 0.99);
        z.next_rank(&mut rng, 1000);
        let fresh = Zipfian::new(1000, 0.99);
        assert!((z.zetan - fresh.zetan).abs() < 1e-9);
    }
}
