//! Fuzzes the client-side frame decoder: never panics, and whatever it
//! decodes re-encodes to bytes that decode to the same frame.
#![no_main]
use ferrokv_resp::Frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((f, n)) = Frame::decode(data) {
        assert!(n <= data.len());
        let mut out = Vec::new();
        f.encode(&mut out);
        let (g, m) = Frame::decode(&out).expect("re-encoded frame decodes");
        assert_eq!(m, out.len());
        // NaN doubles are not equal to themselves; compare encodings then.
        let mut again = Vec::new();
        g.encode(&mut again);
        assert_eq!(again, out);
    }
});
