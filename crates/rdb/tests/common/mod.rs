//! Shared by the rdb crate's tests and examples.

/// Deterministic pseudo-random bytes (a 64-bit LCG, top byte of each step):
/// the same generator as `tests/fixtures/fixture_data.py`'s `lcg_bytes`, so
/// the Rust side can rebuild the values the fixtures hold.
pub fn lcg_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}
