//! Feeds arbitrary bytes to RESTORE's payload decoder
//! (`ferrokv_rdb::dump::decode`): it must never panic. Half the inputs are
//! sealed first (RDB version and a correct CRC64 appended), so the fuzzer
//! spends its time in the value parsers rather than on the footer check;
//! whatever decodes has its elements walked. Fixed corrupted cases, through
//! the server's whole RESTORE path, run in CI: `tests/dump.rs`.
//!
//!   cargo +nightly fuzz run dump_payload
#![no_main]

use ferrokv_rdb::decoder::RdbValue;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let sealed;
    let input: &[u8] = match data.split_first() {
        Some((&flag, rest)) if flag & 1 == 1 => {
            let mut v = rest.to_vec();
            ferrokv_rdb::dump::seal(&mut v);
            sealed = v;
            &sealed
        }
        Some((_, rest)) => rest,
        None => data,
    };
    for verify in [true, false] {
        if let Ok(v) = ferrokv_rdb::dump::decode(input, verify) {
            let n = match &v {
                RdbValue::String(s) => s.len(),
                RdbValue::List(v) | RdbValue::Set(v) => v.iter().map(|x| x.len()).sum(),
                RdbValue::SortedSet(v) => v.iter().map(|(m, s)| m.len() + s.is_nan() as usize).sum(),
                RdbValue::Hash(v) => v.iter().map(|(f, x)| f.len() + x.len()).sum(),
                // A stream's listpacks are validated by the stream type.
                RdbValue::Stream(p) => ferrokv_server::persistence::stream_rdb::from_payload(p)
                    .map_or(0, |s| s.len() as usize),
            };
            std::hint::black_box(n);
        }
    }
});
