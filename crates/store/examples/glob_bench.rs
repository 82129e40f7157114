//! Before/after benchmark of the glob matcher (issue #15): matches a million
//! `user:<n>` keys and 200,000 others, in process, against the patterns KEYS
//! users send most (`user:*`, a suffix search, `?`, a class, a literal),
//! once with the old recursive matcher (`src/pattern/reference.rs`) and
//! once with the new one, and prints the median of several runs.
//!
//! `flock /tmp/ferrokv-bench.lock cargo run --release -p ferrokv-store --example glob_bench`
//! (`GLOB_BENCH_RUNS` sets the number of runs, 15 by default).

#[allow(dead_code)]
#[path = "../src/pattern/reference.rs"]
mod reference;

use ferrokv_store::pattern::glob_match;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..1_000_000)
        .map(|n| format!("user:{n}").into_bytes())
        .collect();
    keys.extend((0..100_000).map(|n| format!("session:{:016x}", n * 0x9e37_79b9_u64).into_bytes()));
    keys.extend((0..100_000).map(|n| format!("cache:page:{n}:body").into_bytes()));
    keys
}

/// One pass of `matcher` over `keys`: its wall time and how many matched.
fn pass(keys: &[Vec<u8>], pattern: &[u8], matcher: fn(&[u8], &[u8]) -> bool) -> (Duration, usize) {
    let start = Instant::now();
    let matched = keys
        .iter()
        .filter(|k| matcher(black_box(pattern), k))
        .count();
    (start.elapsed(), matched)
}

/// Median wall times of `runs` passes of the old and the new matcher,
/// alternating so that a noisy neighbour slows both alike, and the number
/// of keys matched.
fn time(keys: &[Vec<u8>], pattern: &[u8], runs: usize) -> (Duration, Duration, usize) {
    let (mut old, mut new) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    let mut matched = 0;
    for _ in 0..runs {
        let (t, old_n) = pass(keys, pattern, reference::glob_match);
        old.push(t);
        let (t, new_n) = pass(keys, pattern, glob_match);
        new.push(t);
        assert_eq!(old_n, new_n, "the matchers disagree on {pattern:?}");
        matched = new_n;
    }
    old.sort();
    new.sort();
    (old[runs / 2], new[runs / 2], matched)
}

fn main() {
    let runs: usize = std::env::var("GLOB_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let keys = keys();
    let patterns: &[&[u8]] = &[
        b"user:*",
        b"*:1*",
        b"user:?00000",
        b"user:[0-4]*",
        b"*page*body",
        b"user:123456",
        b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
    ];
    println!(
        "{} keys, median of {runs} runs\n{:<44} {:>8} {:>12} {:>12} {:>7}",
        keys.len(),
        "pattern",
        "matched",
        "old ms",
        "new ms",
        "old/new"
    );
    for &pattern in patterns {
        let (old, new, new_n) = time(&keys, pattern, runs);
        println!(
            "{:<44} {:>8} {:>12.2} {:>12.2} {:>7.2}",
            String::from_utf8_lossy(pattern),
            new_n,
            old.as_secs_f64() * 1e3,
            new.as_secs_f64() * 1e3,
            old.as_secs_f64() / new.as_secs_f64()
        );
    }

    // The attack, which the old matcher does not finish: 20 stars
    // against 40 `a`, and 1000 star groups against 5000 `a`.
    for (pattern, subject) in [
        ([b"a*".repeat(20), b"b".to_vec()].concat(), vec![b'a'; 40]),
        (
            [b"*a".repeat(999), b"*b".to_vec()].concat(),
            vec![b'a'; 5000],
        ),
    ] {
        let mut times: Vec<Duration> = (0..runs)
            .map(|_| {
                let start = Instant::now();
                assert!(!glob_match(black_box(&pattern), black_box(&subject)));
                start.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "new only: {}-byte pattern, {} stars, against {} x `a`: {:.1} us",
            pattern.len(),
            pattern.iter().filter(|&&b| b == b'*').count(),
            subject.len(),
            times[runs / 2].as_secs_f64() * 1e6
        );
    }
}
