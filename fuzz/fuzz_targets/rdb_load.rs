//! Feeds arbitrary bytes to the RDB decoder: it must never panic, and every
//! error must carry an in-bounds offset. Half the inputs get a valid
//! `REDIS0010` header so the fuzzer spends its time past the magic check;
//! the checksum is not verified so mutated bodies reach the value parsers.
//!
//!   cargo +nightly fuzz run rdb_load fuzz/corpus/rdb_load crates/rdb/tests/fixtures
#![no_main]

use ferrokv_rdb::{decode_with, Dataset, DecodeOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let with_header;
    let input: &[u8] = match data.split_first() {
        Some((&flag, rest)) if flag & 1 == 1 => {
            with_header = [&b"REDIS0010"[..], rest].concat();
            &with_header
        }
        Some((_, rest)) => rest,
        None => data,
    };
    for verify_checksum in [false, true] {
        let mut ds = Dataset::default();
        if let Err(e) = decode_with(input, &mut ds, &DecodeOptions { verify_checksum }) {
            let offset = e.offset().expect("content errors carry an offset");
            assert!(offset <= input.len(), "{e}");
            let _ = e.to_string();
        }
    }
});
