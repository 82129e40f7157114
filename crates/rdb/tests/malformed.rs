//! The decoder is fed untrusted bytes (a file on disk, a master's snapshot):
//! random and mutated inputs must yield `Ok` or an error with an in-bounds
//! offset — never a panic, never a huge allocation. The cargo-fuzz target
//! `rdb_load` explores the same property far longer; this runs in CI.

use ferrokv_rdb::{
    decode_with, Dataset, DecodeOptions, EncoderOptions, EncodingLimits, RdbEncoder,
};
use proptest::prelude::*;

/// A valid file with every encoding, to mutate.
fn seed_file(compression: bool) -> Vec<u8> {
    let limits = EncodingLimits {
        list_max_listpack_size: 2,
        list_packed_threshold: 40,
        ..EncodingLimits::default()
    };
    let mut enc = RdbEncoder::new(EncoderOptions {
        compression,
        checksum: true,
        limits,
        ..EncoderOptions::default()
    });
    let mut out = Vec::new();
    enc.header(&mut out, &[(b"redis-ver", b"7.0.15")]);
    enc.select_db(&mut out, 0);
    enc.resize_db(&mut out, 9, 1);
    enc.string_entry(&mut out, b"s", &b"abc".repeat(30), Some(1_700_000_000_000));
    enc.string_entry(&mut out, b"i", b"-12345", None);
    enc.lru_idle(&mut out, 300);
    enc.list_entry(
        &mut out,
        b"l",
        ["a", "1", "hello", &"x".repeat(50), "-70000"],
        None,
    );
    enc.lfu_freq(&mut out, 5);
    enc.set_entry(&mut out, b"si", ["1", "2", "300000"], None);
    enc.set_entry(&mut out, b"ss", ["a", "b"], None);
    enc.zset_entry(&mut out, b"zl", [("a", 1.5), ("b", f64::INFINITY)], None);
    let big: Vec<(String, f64)> = (0..130).map(|i| (format!("m{i}"), i as f64)).collect();
    enc.zset_entry(
        &mut out,
        b"zs",
        big.iter().map(|(m, s)| (m.as_bytes(), *s)),
        None,
    );
    enc.hash_entry(&mut out, b"hl", [("f", "v"), ("g", "12")], None);
    enc.hash_entry(&mut out, b"hh", [("f", "v".repeat(70))], None);
    enc.finish(&mut out);
    out
}

fn check(data: &[u8]) {
    for verify_checksum in [false, true] {
        let mut ds = Dataset::default();
        if let Err(e) = decode_with(data, &mut ds, &DecodeOptions { verify_checksum }) {
            let off = e.offset().expect("content errors carry an offset");
            assert!(off <= data.len(), "{e} (len {})", data.len());
            let _ = e.to_string();
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(p, x)| Mutation::Flip(p, x)),
        (
            any::<usize>(),
            prop_oneof![
                Just(0u8),
                Just(0xFF),
                Just(0x80),
                Just(0x81),
                Just(0xC3),
                Just(0x7F),
                any::<u8>()
            ]
        )
            .prop_map(|(p, x)| Mutation::Set(p, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        (any::<usize>(), 1usize..16).prop_map(|(p, n)| Mutation::Remove(p, n)),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    if data.is_empty() {
        return;
    }
    let n = data.len();
    match m {
        Mutation::Flip(p, x) => data[p % n] ^= x,
        Mutation::Set(p, x) => data[p % n] = *x,
        Mutation::Truncate(p) => data.truncate(p % n),
        Mutation::Insert(p, b) => {
            let at = p % n;
            data.splice(at..at, b.iter().copied());
        }
        Mutation::Remove(p, k) => {
            let at = p % n;
            data.drain(at..(at + k).min(n));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_valid_files_never_panic(compression in any::<bool>(), muts in proptest::collection::vec(mutation(), 1..6)) {
        let mut data = seed_file(compression);
        for m in &muts {
            apply(&mut data, m);
        }
        check(&data);
    }

    #[test]
    fn random_bytes_after_a_valid_header_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut data = b"REDIS0010".to_vec();
        data.extend_from_slice(&body);
        check(&data);
        let mut data = b"REDIS0003".to_vec();
        data.extend_from_slice(&body);
        check(&data);
    }
}

#[test]
fn every_single_byte_change_of_the_seed_is_handled() {
    for compression in [false, true] {
        let seed = seed_file(compression);
        for pos in 0..seed.len() {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut d = seed.clone();
                d[pos] ^= x;
                check(&d);
            }
            check(&seed[..pos]);
        }
    }
}
