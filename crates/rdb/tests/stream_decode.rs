//! `StreamDecoder` (a replica parsing its master's payload as it arrives)
//! must hand the visitor exactly what `decode` does on the whole file,
//! whatever the sizes of the pieces, and must report a cut or corrupt
//! stream at the same offset as `decode`.

mod common;

use ferrokv_rdb::{
    decode, Checksum, DecodeError, EncoderOptions, EncodingLimits, Entry, Fed, RdbEncoder,
    RdbVisitor, StreamDecoder, VisitError,
};

/// Records every visitor call as text.
#[derive(Debug, Default)]
struct Log(Vec<String>);

impl RdbVisitor for Log {
    fn aux(&mut self, k: &[u8], v: &[u8]) -> Result<(), VisitError> {
        self.0.push(format!("aux {k:?} {v:?}"));
        Ok(())
    }
    fn select_db(&mut self, db: u64) -> Result<(), VisitError> {
        self.0.push(format!("select {db}"));
        Ok(())
    }
    fn resize_db(&mut self, a: u64, b: u64) -> Result<(), VisitError> {
        self.0.push(format!("resize {a} {b}"));
        Ok(())
    }
    fn entry(&mut self, e: Entry<'_>) -> Result<(), VisitError> {
        self.0.push(format!("{e:?}"));
        Ok(())
    }
}

/// A file with every kind of record: AUX, two databases, expiries,
/// strings (short, integer, LZF-compressed, random), a big plain list
/// (many nodes), hashes, sets, sorted sets.
fn sample() -> Vec<u8> {
    let mut enc = RdbEncoder::new(EncoderOptions {
        limits: EncodingLimits {
            list_max_listpack_size: -1,
            ..EncodingLimits::default()
        },
        ..EncoderOptions::default()
    });
    let mut f = Vec::new();
    enc.header(&mut f, &[(b"redis-ver", b"7.0.15"), (b"repl-offset", b"0")]);
    for db in [0u64, 3] {
        enc.select_db(&mut f, db);
        enc.resize_db(&mut f, 200, 50);
        for i in 0..150u32 {
            let key = format!("k{db}:{i}");
            let expire = (i % 3 == 0).then_some(1_900_000_000_000 + i as i64);
            match i % 6 {
                0 => enc.string_entry(&mut f, key.as_bytes(), i.to_string().as_bytes(), expire),
                1 => enc.string_entry(&mut f, key.as_bytes(), "abc".repeat(200).as_bytes(), expire),
                2 => enc.string_entry(
                    &mut f,
                    key.as_bytes(),
                    &common::lcg_bytes(3000, i as u64),
                    expire,
                ),
                3 => {
                    let items: Vec<Vec<u8>> = (0..(i * 40))
                        .map(|j| format!("item-{j}").into_bytes())
                        .collect();
                    enc.list_entry(&mut f, key.as_bytes(), items.iter().map(|v| &v[..]), expire)
                }
                4 => {
                    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..(i % 200))
                        .map(|j| (format!("f{j}").into_bytes(), format!("v{j}").into_bytes()))
                        .collect();
                    enc.hash_entry(
                        &mut f,
                        key.as_bytes(),
                        pairs.iter().map(|(a, b)| (&a[..], &b[..])),
                        expire,
                    )
                }
                _ => {
                    let members: Vec<(Vec<u8>, f64)> = (0..(i % 300))
                        .map(|j| (format!("m{j}").into_bytes(), j as f64 / 3.0))
                        .collect();
                    enc.zset_entry(
                        &mut f,
                        key.as_bytes(),
                        members.iter().map(|(m, s)| (&m[..], *s)),
                        expire,
                    )
                }
            }
        }
    }
    enc.finish(&mut f);
    f
}

/// Feeds `file` cut at the given lengths the way a receiver does: keep
/// the unconsumed tail, append the next piece, feed again.
fn stream(file: &[u8], pieces: &mut dyn Iterator<Item = usize>) -> Result<Log, DecodeError> {
    let mut log = Log::default();
    let mut dec = StreamDecoder::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut at = 0;
    while at < file.len() {
        let n = pieces
            .next()
            .unwrap_or(usize::MAX)
            .min(file.len() - at)
            .max(1);
        buf.extend_from_slice(&file[at..at + n]);
        at += n;
        if at == file.len() {
            let (summary, used) = dec.feed_end(&buf, &mut log)?;
            assert_eq!(used, buf.len());
            assert_eq!(summary.len, file.len());
            assert!(matches!(summary.checksum, Checksum::NotVerified(_)));
            return Ok(log);
        }
        match dec.feed(&buf, &mut log)? {
            Fed::NeedMore { consumed } => {
                buf.drain(..consumed);
            }
            Fed::Done { .. } => panic!("done before the last byte"),
        }
        assert_eq!(dec.consumed(), at - buf.len());
    }
    unreachable!("the loop returns at the last piece")
}

#[test]
fn any_cut_of_the_stream_gives_the_visitor_what_decode_gives() {
    let file = sample();
    let mut whole = Log::default();
    decode(&file, &mut whole).unwrap();
    assert!(whole.0.len() > 300);
    for size in [1usize, 2, 7, 64, 1000, 4096, 65536, file.len()] {
        let got = stream(&file, &mut std::iter::repeat(size)).unwrap();
        assert_eq!(got.0, whole.0, "pieces of {size} bytes");
    }
    // Irregular pieces.
    let sizes = common::lcg_bytes(100_000, 7);
    let got = stream(&file, &mut sizes.iter().map(|&b| b as usize * 37 + 1)).unwrap();
    assert_eq!(got.0, whole.0);
}

#[test]
fn a_cut_stream_is_truncated_where_decode_says() {
    let file = sample();
    for cut in [5, 9, 200, file.len() / 2, file.len() - 8, file.len() - 1] {
        let whole = decode(&file[..cut], &mut Log::default()).unwrap_err();
        let streamed = stream(&file[..cut], &mut std::iter::repeat(333)).unwrap_err();
        match streamed {
            DecodeError::Truncated { offset, .. } => {
                // decode reports where the read failed; the stream decoder
                // where the record it could not finish began: never after.
                assert!(offset <= whole.offset().unwrap(), "cut at {cut}");
                assert!(offset <= cut);
            }
            DecodeError::BadMagic => assert!(cut < 9),
            e => panic!("cut at {cut}: {e}"),
        }
    }
}

#[test]
fn corruption_is_reported_at_the_same_offset_as_decode() {
    let mut file = sample();
    // An unknown value type where the first key of db 3 starts.
    let at = file.windows(5).position(|w| w == b"\x04k3:0").expect("key") - 1;
    file[at] = 99;
    let whole = decode(&file, &mut Log::default()).unwrap_err();
    let streamed = stream(&file, &mut std::iter::repeat(1000)).unwrap_err();
    assert_eq!(streamed.offset(), whole.offset());
    assert_eq!(streamed.to_string(), whole.to_string());
}
