//! Fuzzes the server's request decoder: arbitrary bytes, fed whole and
//! split at an arbitrary point (as two reads), must never panic, and both
//! feedings must decode the same commands or fail the same way.
#![no_main]
use ferrokv_resp::request::{Limits, RequestDecoder};
use libfuzzer_sys::fuzz_target;

fn decode_all(data: &[u8], split: usize) -> (Vec<Vec<Vec<u8>>>, bool) {
    let mut dec = RequestDecoder::new();
    let limits = Limits { max_bulk_len: 1 << 20, authenticated: true };
    let mut cmds = Vec::new();
    let mut start = 0;
    for avail in [split.min(data.len()), data.len()] {
        loop {
            if start > avail {
                break;
            }
            match dec.decode(&data[start..avail], limits) {
                Ok(Some(d)) => {
                    assert!(d.consumed > 0 && start + d.consumed <= avail);
                    cmds.push(d.args.to_vecs());
                    start += d.consumed;
                }
                Ok(None) => break,
                Err(_) => return (cmds, true),
            }
        }
    }
    (cmds, false)
}

fuzz_target!(|input: (u16, &[u8])| {
    let (split, data) = input;
    let whole = decode_all(data, data.len());
    let parts = decode_all(data, split as usize % (data.len() + 1));
    assert_eq!(whole, parts);
});
