//! Feeds arbitrary bytes to the stream loader's listpack check
//! (`ferrokv_store::stream::node_from_listpack`, what RDB files, DUMP
//! payloads and full syncs go through): it must never panic, read out of
//! bounds or allocate from a claimed count. Whatever validates is walked
//! entry by entry and written back as a listpack, which must validate
//! again to the same node. The first 16 bytes are the node's master ID.
//! Fixed cases run in CI: the store's stream unit tests (every truncation
//! and byte mutation of real listpacks) and `tests/decode_errors.rs`.
//!
//!   cargo +nightly fuzz run stream_listpack
#![no_main]

use ferrokv_store::stream::{node_from_listpack, node_to_listpack, StreamId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let master = StreamId {
        ms: u64::from_be_bytes(data[..8].try_into().unwrap()),
        seq: u64::from_be_bytes(data[8..16].try_into().unwrap()),
    };
    let lp = &data[16..];
    if let Ok(node) = node_from_listpack(master, lp) {
        let again = node_to_listpack(master, &node);
        let back = node_from_listpack(master, &again).expect("our own listpack validates");
        assert_eq!(back, node);
        let fields: usize = node.master_fields().map(|f| f.len()).sum();
        std::hint::black_box((fields, node.live(), node.deleted()));
    }
});
