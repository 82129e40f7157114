//! Throughput of the hot loops, without a bench harness:
//!
//!   cargo run --release -p ferrokv-rdb --example throughput
//!
//! Prints GB/s for CRC64 (every snapshot byte is checksummed on save and on
//! load), LZF compression and decompression, and whole-file encode/decode.
//! Results and the machine they came from belong in docs/benchmarks.md.

#[path = "../tests/common/mod.rs"]
mod common;
use common::lcg_bytes as lcg;

use std::hint::black_box;
use std::time::Instant;

use ferrokv_rdb::crc64::crc64;
use ferrokv_rdb::lzf::{self, LzfCompressor};
use ferrokv_rdb::{decode, EncoderOptions, Entry, RdbEncoder, RdbVisitor, VisitError};

/// Runs `f` (which processes `bytes`) `iters` times after a warm-up and
/// prints the best and the median rate: the machine is shared, so the best
/// run is the closest to what the code can do.
fn rate(label: &str, bytes: usize, iters: usize, f: impl FnMut()) {
    let mut f = f;
    f(); // warm up
    let mut secs: Vec<f64> = (0..iters)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let best = bytes as f64 / secs[0] / 1e9;
    let median = bytes as f64 / secs[secs.len() / 2] / 1e9;
    println!(
        "{label:<44} best {best:>6.2} GB/s, median {median:>6.2} GB/s ({} MiB x {iters})",
        bytes >> 20
    );
}

struct Count(u64);
impl RdbVisitor for Count {
    fn entry(&mut self, e: Entry<'_>) -> Result<(), VisitError> {
        self.0 += e.value.len() as u64;
        Ok(())
    }
}

fn main() {
    let big = lcg(256 << 20, 1);
    rate("crc64, 256 MiB buffer", big.len(), 8, || {
        black_box(crc64(0, black_box(&big)));
    });
    // Pieces of 2 KiB go to the SIMD path too (it starts at 256 bytes).
    let small = &big[..2048];
    rate("crc64, 2 KiB pieces (single stream)", 64 << 20, 8, || {
        let mut c = 0;
        for _ in 0..(64 << 20) / 2048 {
            c = crc64(c, black_box(small));
        }
        black_box(c);
    });

    // Text-like input: repeated words with varying numbers.
    let text: Vec<u8> = (0..3_000_000u32)
        .flat_map(|i| {
            format!(
                "user:{} session={} ok\n",
                i % 5000,
                i.wrapping_mul(2654435761) % 100
            )
            .into_bytes()
        })
        .take(64 << 20)
        .collect();
    let mut lz = LzfCompressor::new();
    let mut out = Vec::with_capacity(text.len());
    lz.compress(&text, &mut out, text.len())
        .expect("compressible");
    println!(
        "lzf ratio on text: {:.1}%",
        out.len() as f64 * 100.0 / text.len() as f64
    );
    rate("lzf compress, 64 MiB text", text.len(), 5, || {
        out.clear();
        black_box(lz.compress(black_box(&text), &mut out, text.len()));
    });
    let compressed = out.clone();
    let mut back = Vec::with_capacity(text.len());
    rate(
        "lzf decompress, 64 MiB text (output bytes)",
        text.len(),
        5,
        || {
            back.clear();
            lzf::decompress(black_box(&compressed), text.len(), &mut back).unwrap();
        },
    );
    let noise = &big[..64 << 20];
    rate(
        "lzf compress, 64 MiB incompressible",
        noise.len(),
        2,
        || {
            out.clear();
            black_box(lz.compress(black_box(noise), &mut out, noise.len() - 4));
        },
    );

    // What a snapshot of cached random payloads does: one attempt per
    // 1000-byte value, each refused (it would not save four bytes).
    rate(
        "lzf compress, 1000 B incompressible values",
        noise.len(),
        2,
        || {
            for v in noise.chunks_exact(1000) {
                out.clear();
                black_box(lz.compress(black_box(v), &mut out, v.len() - 4));
            }
        },
    );

    // Whole snapshot: 1M hashes of 8 fields plus 1M short strings.
    let mut file = Vec::new();
    let fields: Vec<(String, String)> = (0..8)
        .map(|i| (format!("field{i}"), format!("value-{i}-abcdefgh")))
        .collect();
    let encode = |file: &mut Vec<u8>| {
        file.clear();
        let mut enc = RdbEncoder::new(EncoderOptions::default());
        enc.header(file, &[(b"redis-ver", b"7.0.15")]);
        enc.select_db(file, 0);
        for i in 0..1_000_000u32 {
            let key = format!("key:{i}");
            enc.hash_entry(
                file,
                key.as_bytes(),
                fields.iter().map(|(f, v)| (f, v)),
                None,
            );
            enc.string_entry(
                file,
                format!("s:{i}").as_bytes(),
                b"some string value of moderate size",
                None,
            );
        }
        enc.finish(file);
    };
    encode(&mut file);
    let size = file.len();
    rate("encode 2M keys (hash listpack + string)", size, 3, || {
        encode(&mut file)
    });
    rate("decode same file (CRC verified)", size, 3, || {
        let mut c = Count(0);
        decode(black_box(&file), &mut c).unwrap();
        black_box(c.0);
    });
}
