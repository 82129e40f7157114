//! Feeds arbitrary bytes to the HyperLogLog code as the string of a key
//! (`ferrokv_store::hyperloglog`): it must never panic nor read or write
//! out of bounds, whatever the opcodes claim. Most inputs get a valid
//! sparse or dense header first (the first byte chooses), so the fuzzer
//! spends its time in the opcode walks rather than on the header check.
//! Each input is counted, merged, converted to dense, decoded, and given
//! elements; a conversion that succeeds must give a well-formed dense HLL.
//! Fixed corrupted cases, through the server's commands, run in CI:
//! `tests/hyperloglog.rs`.
//!
//!   cargo +nightly fuzz run hll_string
#![no_main]

use ferrokv_store::hyperloglog as hll;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut v = match mode % 3 {
        0 => rest.to_vec(),
        1 => {
            let mut v = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
            v.extend_from_slice(rest);
            v
        }
        _ => {
            let mut v = vec![0u8; hll::DENSE_SIZE];
            v[..4].copy_from_slice(b"HYLL");
            let n = rest.len().min(hll::DENSE_SIZE - hll::HDR_SIZE);
            v[hll::HDR_SIZE..hll::HDR_SIZE + n].copy_from_slice(&rest[..n]);
            v
        }
    };
    let Some(enc) = hll::encoding(&v) else {
        return;
    };
    let counted = hll::count(&v);
    let mut union = [0u8; hll::REGISTERS];
    let merged = hll::merge(&mut union, &v);
    // The walks agree on whether the registers add up.
    assert_eq!(counted.is_ok(), merged.is_ok());
    if enc == hll::Encoding::Sparse {
        std::hint::black_box(hll::decode_sparse(&v));
    }
    let mut dense = v.clone();
    if hll::sparse_to_dense(&mut dense).is_ok() {
        assert_eq!(hll::encoding(&dense), Some(hll::Encoding::Dense));
        assert_eq!(hll::count(&dense), counted);
    }
    for (i, ele) in [&b"a"[..], b"b", b"", b"12345678"].iter().enumerate() {
        if hll::add(&mut v, ele, [0, 300, 3000, 1 << 20][i]).is_err() {
            break;
        }
        assert!(hll::encoding(&v).is_some());
    }
});
