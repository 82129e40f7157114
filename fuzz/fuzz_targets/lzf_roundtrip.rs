//! LZF: whatever the compressor emits must decompress to the input, and the
//! decompressor must survive arbitrary streams (it also runs inside
//! `rdb_load`, but here it gets inputs shaped for it).
#![no_main]

use ferrokv_rdb::lzf::{decompress, LzfCompressor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut c = LzfCompressor::new();
    let mut out = Vec::new();
    if let Some(n) = c.compress(data, &mut out, data.len() + 64) {
        assert_eq!(n, out.len());
        let mut back = Vec::new();
        decompress(&out, data.len(), &mut back).expect("own output decompresses");
        assert_eq!(back, data);
    }
    let mut sink = Vec::new();
    let declared = data.first().map_or(0, |&b| b as usize * 37);
    let _ = decompress(data, declared, &mut sink);
    assert!(sink.is_empty() || sink.len() == declared);
});
