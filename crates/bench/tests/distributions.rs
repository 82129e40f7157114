//! Guards against a benchmark that measures something other than it
//! claims: key distributions and operation mixes are checked statistically
//! (chi-squared at p = 0.001, or the share of the hottest items against the
//! zipfian formula) with fixed seeds, so the tests are deterministic.

use ferrokv_bench::generator::{
    fnv_hash64, zeta, Distribution, KeyChooser, ScrambledZipfian, SkewedLatest, Zipfian,
};
use ferrokv_bench::workload::{OpKind, OperationGenerator, RecordLayout, Workload, WorkloadSpec};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::collections::HashMap;

/// Chi-squared critical value at p = 0.001 (Wilson–Hilferty approximation).
fn chi2_critical(df: usize) -> f64 {
    let df = df as f64;
    let z = 3.090_2;
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

fn chi2(observed: &[u64], expected: &[f64]) -> f64 {
    observed
        .iter()
        .zip(expected)
        .map(|(o, e)| (*o as f64 - e).powi(2) / e)
        .sum()
}

fn assert_close(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= want * rel,
        "{what}: got {got:.5}, want {want:.5} ± {:.0}%",
        rel * 100.0
    );
}

#[test]
fn uniform_keys_pass_chi_squared() {
    let mut rng = SmallRng::seed_from_u64(42);
    let mut chooser = KeyChooser::new(Distribution::Uniform, 1000, 0.99);
    let n = 200_000;
    let mut bins = vec![0u64; 100];
    for _ in 0..n {
        let k = chooser.next(&mut rng, 1000);
        assert!(k < 1000);
        bins[(k / 10) as usize] += 1;
    }
    let expected = vec![n as f64 / 100.0; 100];
    let stat = chi2(&bins, &expected);
    assert!(
        stat < chi2_critical(99),
        "chi2 {stat} ≥ {}",
        chi2_critical(99)
    );
}

#[test]
fn zipfian_ranks_follow_the_power_law() {
    let items = 1000;
    let theta = 0.99;
    let mut rng = SmallRng::seed_from_u64(7);
    let mut z = Zipfian::new(items, theta);
    let n = 400_000;
    let mut counts = vec![0u64; items as usize];
    for _ in 0..n {
        counts[z.next_rank(&mut rng, items) as usize] += 1;
    }
    let zetan = zeta(0, items, theta, 0.0);
    let p = |rank: u64| 1.0 / ((rank + 1) as f64).powf(theta) / zetan;
    // Gray's algorithm is exact for the two hottest ranks...
    assert_close("rank 0 share", counts[0] as f64 / n as f64, p(0), 0.03);
    assert_close("rank 1 share", counts[1] as f64 / n as f64, p(1), 0.05);
    // ...and approximates the tail: compare mass per decade of ranks.
    for (lo, hi) in [(2u64, 10u64), (10, 100), (100, 1000)] {
        let got: u64 = counts[lo as usize..hi as usize].iter().sum();
        let want: f64 = (lo..hi).map(p).sum();
        assert_close(
            &format!("ranks {lo}..{hi} share"),
            got as f64 / n as f64,
            want,
            0.10,
        );
    }
}

#[test]
fn scrambled_zipfian_hottest_keys_have_ycsb_share_and_are_spread() {
    let items = 10_000;
    let mut rng = SmallRng::seed_from_u64(11);
    let mut z = ScrambledZipfian::new(items, 0.99);
    let n = 400_000;
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for _ in 0..n {
        let k = z.next(&mut rng);
        assert!(k < items);
        *counts.entry(k).or_default() += 1;
    }
    let mut by_count: Vec<(u64, u64)> = counts.into_iter().collect();
    by_count.sort_by_key(|b| std::cmp::Reverse(b.1));
    // YCSB draws ranks from 10^10 items whose zeta is 26.469...: the
    // hottest key gets 1/26.469 of all requests whatever the record count.
    let hottest = by_count[0].1 as f64 / n as f64;
    assert_close(
        "hottest key share",
        hottest,
        1.0 / 26.469_028_201_783_02,
        0.06,
    );
    // The 100 hottest keys carry about the mass of the 100 hottest ranks
    // (collisions modulo the key count add a little).
    let top100: u64 = by_count[..100].iter().map(|x| x.1).sum();
    let want = zeta(0, 100, 0.99, 0.0) / 26.469_028_201_783_02;
    assert_close("top-100 share", top100 as f64 / n as f64, want, 0.10);
    // Scrambling spreads the hot keys over the key space.
    let hot: Vec<u64> = by_count[..10].iter().map(|x| x.0).collect();
    let span = hot.iter().max().unwrap() - hot.iter().min().unwrap();
    assert!(span > items / 2, "hot keys bunched together: {hot:?}");
}

#[test]
fn zipfian_with_a_non_default_theta_uses_the_exact_zeta() {
    let items = 1000;
    let theta = 0.5;
    let mut rng = SmallRng::seed_from_u64(3);
    let mut z = ScrambledZipfian::new(items, theta);
    let n = 200_000;
    let mut counts = vec![0u64; items as usize];
    for _ in 0..n {
        counts[z.next(&mut rng) as usize] += 1;
    }
    // Ranks are scattered by hash modulo the key count, so the key of rank
    // 0 also collects every rank that hashes onto it.
    let zetan = zeta(0, items, theta, 0.0);
    let key0 = fnv_hash64(0) % items;
    let want: f64 = (0..items)
        .filter(|r| fnv_hash64(*r) % items == key0)
        .map(|r| 1.0 / ((r + 1) as f64).powf(theta) / zetan)
        .sum();
    let got = counts[key0 as usize] as f64 / n as f64;
    assert_close("share of rank 0's key", got, want, 0.08);
}

#[test]
fn latest_prefers_the_newest_records() {
    let mut rng = SmallRng::seed_from_u64(5);
    let mut l = SkewedLatest::new(0.99);
    let latest = 9_999;
    let n = 300_000;
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for _ in 0..n {
        let k = l.next(&mut rng, latest);
        assert!(k <= latest);
        *counts.entry(k).or_default() += 1;
    }
    let zetan = zeta(0, latest + 1, 0.99, 0.0);
    let share = |k: u64| *counts.get(&k).unwrap_or(&0) as f64 / n as f64;
    assert_close("newest record share", share(latest), 1.0 / zetan, 0.04);
    assert_close(
        "second newest share",
        share(latest - 1),
        1.0 / 2f64.powf(0.99) / zetan,
        0.06,
    );
    let newest_tenth: u64 = counts
        .iter()
        .filter(|(k, _)| **k >= 9_000)
        .map(|(_, c)| c)
        .sum();
    let oldest_tenth: u64 = counts
        .iter()
        .filter(|(k, _)| **k < 1_000)
        .map(|(_, c)| c)
        .sum();
    assert!(newest_tenth > 10 * oldest_tenth);
}

#[test]
fn latest_follows_inserts() {
    let mut rng = SmallRng::seed_from_u64(9);
    let mut chooser = KeyChooser::new(Distribution::Latest, 1000, 0.99);
    for _ in 0..1000 {
        chooser.next(&mut rng, 1000);
    }
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for _ in 0..50_000 {
        *counts.entry(chooser.next(&mut rng, 2000)).or_default() += 1;
    }
    let hottest = counts.iter().max_by_key(|(_, c)| **c).unwrap().0;
    assert_eq!(*hottest, 1999);
}

#[test]
fn zipfian_keys_stay_below_the_records_that_exist() {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut chooser = KeyChooser::new(Distribution::Zipfian, 2000, 0.99);
    for _ in 0..50_000 {
        assert!(chooser.next(&mut rng, 1000) < 1000);
    }
}

#[test]
fn workload_mixes_match_their_proportions() {
    let n = 100_000u64;
    for (i, w) in [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
    ]
    .into_iter()
    .enumerate()
    {
        let mix = w.mix();
        let mut rng = SmallRng::seed_from_u64(100 + i as u64);
        let mut counts = [0u64; 5];
        for _ in 0..n {
            counts[mix.choose(&mut rng).index()] += 1;
        }
        let mut observed = Vec::new();
        let mut expected = Vec::new();
        for kind in OpKind::ALL {
            let p = mix.proportion(kind);
            if p == 0.0 {
                assert_eq!(counts[kind.index()], 0, "{w:?} drew {kind:?}");
            } else {
                observed.push(counts[kind.index()]);
                expected.push(p * n as f64);
            }
        }
        if observed.len() > 1 {
            let stat = chi2(&observed, &expected);
            let crit = chi2_critical(observed.len() - 1);
            assert!(
                stat < crit,
                "{w:?}: chi2 {stat} ≥ {crit}, counts {counts:?}"
            );
        }
    }
}

#[test]
fn workload_e_scan_lengths_are_uniform_and_inserts_take_new_keys() {
    let spec = WorkloadSpec {
        mix: Workload::E.mix(),
        distribution: Distribution::Zipfian,
        zipf_theta: 0.99,
        record_count: 1000,
        operation_count: 100_000,
        max_scan_length: 100,
        layout: RecordLayout::new("user", 100, 10),
    };
    let mut generator = OperationGenerator::new(&spec);
    let mut rng = SmallRng::seed_from_u64(77);
    let mut next_key = 1000u64;
    let mut lengths = vec![0u64; 100];
    let mut scans = 0u64;
    let mut inserted = Vec::new();
    for _ in 0..100_000 {
        let op = generator.next(&mut rng, next_key, || {
            next_key += 1;
            next_key - 1
        });
        match op.kind {
            OpKind::Scan => {
                assert!((1..=100).contains(&op.scan_length));
                lengths[op.scan_length - 1] += 1;
                scans += 1;
            }
            OpKind::Insert => inserted.push(op.keynum),
            other => panic!("workload E drew {other:?}"),
        }
    }
    let expected = vec![scans as f64 / 100.0; 100];
    let stat = chi2(&lengths, &expected);
    assert!(stat < chi2_critical(99), "scan lengths chi2 {stat}");
    let want: Vec<u64> = (1000..1000 + inserted.len() as u64).collect();
    assert_eq!(inserted, want, "inserts take consecutive new key numbers");
}

#[test]
fn key_names_are_ycsb_style_and_distinct() {
    let layout = RecordLayout::new("user", 1000, 10);
    let mut seen = std::collections::HashSet::new();
    for k in 0..50_000 {
        let name = layout.key(k);
        assert!(name.starts_with("user"));
        assert!(name[4..].bytes().all(|b| b.is_ascii_digit()));
        assert!(seen.insert(name));
    }
}
