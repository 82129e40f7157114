//! LZF, the compressor Redis uses for RDB strings (`lzf_c.c`, `lzf_d.c`,
//! liblzf 3.x by Marc Lehmann). Written from the format, not translated:
//!
//! ```text
//! 000LLLLL <L+1 literal bytes>          literal run of 1..=32 bytes
//! LLLooooo oooooooo                     back reference, length L+2 (L in 1..=6)
//! 111ooooo LLLLLLLL oooooooo            back reference, length L+9
//! ```
//! The offset `o` (13 bits) counts back from the output position minus one,
//! so references reach at most 8192 bytes back; they may overlap the bytes
//! they produce (run-length style), which the decoder copies byte by byte.
//!
//! The decoder accepts every stream liblzf can produce (and every other
//! well-formed stream), and rejects malformed ones with a precise
//! [`LzfError`] instead of panicking: it is fed untrusted snapshot bytes.
//! The compressor need not produce liblzf's exact bytes: any valid stream
//! decodes in Redis. Like liblzf it hashes three bytes into a table of recent
//! positions; the table lives in [`LzfCompressor`] and is reused between
//! calls without clearing, which is safe because every candidate match is
//! verified byte by byte before use.

use std::fmt;

const MAX_LITERAL: usize = 1 << 5;
const MAX_OFFSET: usize = 1 << 13;
const MAX_MATCH: usize = (1 << 8) + (1 << 3);
const HASH_LOG: u32 = 14;
/// Misses before the search starts skipping: 2^6 = 64 bytes without a match.
const SKIP_STRENGTH: usize = 6;

/// Why an LZF stream could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LzfError {
    /// The stream produces more bytes than the declared length.
    #[error("output exceeds the declared length {expected} at input byte {input_pos}")]
    OutputTooLong { expected: usize, input_pos: usize },
    /// The stream ends in the middle of a literal run or back reference.
    #[error("input ends inside a token at input byte {input_pos}")]
    Truncated { input_pos: usize },
    /// A back reference points before the start of the output.
    #[error("back reference {distance} bytes back from output byte {output_pos} at input byte {input_pos}")]
    BadReference {
        distance: usize,
        output_pos: usize,
        input_pos: usize,
    },
    /// The stream ended before producing the declared length.
    #[error("stream produced {produced} bytes, {expected} declared")]
    OutputTooShort { produced: usize, expected: usize },
}

/// Decompresses `input`, appending exactly `expected_len` bytes to `out`.
/// On error `out` is truncated back to its original length.
pub fn decompress(input: &[u8], expected_len: usize, out: &mut Vec<u8>) -> Result<(), LzfError> {
    let base = out.len();
    let result = decompress_inner(input, expected_len, out, base);
    if result.is_err() {
        out.truncate(base);
    }
    result
}

fn decompress_inner(
    input: &[u8],
    expected_len: usize,
    out: &mut Vec<u8>,
    base: usize,
) -> Result<(), LzfError> {
    // Reserve by what the input can plausibly produce, not by the declared
    // length alone: a lying header must not allocate gigabytes up front.
    out.reserve(expected_len.min(input.len().saturating_mul(8)));
    let end = base + expected_len;
    let mut ip = 0;
    while ip < input.len() {
        let token_pos = ip;
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if out.len() + run > end {
                return Err(LzfError::OutputTooLong {
                    expected: expected_len,
                    input_pos: token_pos,
                });
            }
            let lit = input.get(ip..ip + run).ok_or(LzfError::Truncated {
                input_pos: token_pos,
            })?;
            out.extend_from_slice(lit);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or(LzfError::Truncated {
                    input_pos: token_pos,
                })? as usize;
                ip += 1;
            }
            len += 2;
            let low = *input.get(ip).ok_or(LzfError::Truncated {
                input_pos: token_pos,
            })? as usize;
            ip += 1;
            let distance = ((ctrl & 0x1f) << 8) + low + 1;
            let produced = out.len() - base;
            if distance > produced {
                return Err(LzfError::BadReference {
                    distance,
                    output_pos: produced,
                    input_pos: token_pos,
                });
            }
            if out.len() + len > end {
                return Err(LzfError::OutputTooLong {
                    expected: expected_len,
                    input_pos: token_pos,
                });
            }
            let from = out.len() - distance;
            if distance >= len {
                out.extend_from_within(from..from + len);
            } else {
                // Overlapping reference: each byte may be one this token wrote.
                for i in 0..len {
                    let b = out[from + i];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != end {
        return Err(LzfError::OutputTooShort {
            produced: out.len() - base,
            expected: expected_len,
        });
    }
    Ok(())
}

/// The largest output a stream of `compressed_len` bytes can produce: a
/// three-byte back reference yields at most 264 bytes. Used to reject absurd
/// declared lengths before allocating.
pub fn max_decompressed_len(compressed_len: usize) -> usize {
    compressed_len.saturating_mul(MAX_MATCH / 3 + 1)
}

/// An LZF compressor with a reusable hash table (64 KiB).
pub struct LzfCompressor {
    /// `base + position + 1` of recent three-byte windows; anything at or
    /// below `base` was left by an earlier call.
    table: Box<[u32]>,
    /// Advanced past every input, so stale entries are told apart without
    /// clearing 64 KiB per call (and without an unpredictable branch on
    /// whether a stale position happens to lie before the current one).
    base: u32,
}

impl fmt::Debug for LzfCompressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LzfCompressor").finish_non_exhaustive()
    }
}

impl Default for LzfCompressor {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn hash(window: u32) -> usize {
    (window.wrapping_mul(0x9E37_79B1) >> (32 - HASH_LOG)) as usize
}

impl LzfCompressor {
    pub fn new() -> Self {
        LzfCompressor {
            table: vec![0u32; 1 << HASH_LOG].into_boxed_slice(),
            base: 0,
        }
    }

    /// Compresses `input` and appends the stream to `out` if it takes at
    /// most `max_out` bytes, returning its length. Returns `None` (and leaves
    /// `out` as it was) if it does not fit, like liblzf's `lzf_compress`
    /// returning 0; Redis calls it with `max_out = len - 4` so compression is
    /// only used when it saves at least four bytes.
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>, max_out: usize) -> Option<usize> {
        if input.is_empty() || max_out == 0 || input.len() > u32::MAX as usize {
            return None;
        }
        if u32::MAX - self.base <= input.len() as u32 {
            // Positions would wrap: start from a clean table.
            self.table.fill(0);
            self.base = 0;
        }
        let base = out.len();
        let result = self.compress_inner(input, out, base + max_out);
        self.base += input.len() as u32;
        match result {
            Some(()) => Some(out.len() - base),
            None => {
                out.truncate(base);
                None
            }
        }
    }

    fn compress_inner(&mut self, input: &[u8], out: &mut Vec<u8>, limit: usize) -> Option<()> {
        let n = input.len();
        let base = self.base;
        out.reserve((limit - out.len()).min(n + n / 32 + 1));
        // Literals are not copied byte by byte as they are passed over:
        // `lit_start..ip` is the pending literal stretch, emitted in runs of
        // up to 32 bytes (one control byte each) when a match or the end
        // closes it. The bytes are the same as copying them one by one; on
        // incompressible input (random payloads) this is most of the work.
        let mut lit_start = 0usize;
        let mut ip = 0usize;
        let mut misses = 0usize;
        while ip + 2 < n {
            let window =
                (input[ip] as u32) << 16 | (input[ip + 1] as u32) << 8 | input[ip + 2] as u32;
            let slot = hash(window);
            let candidate = self.table[slot];
            self.table[slot] = base + ip as u32 + 1;
            let r = candidate.wrapping_sub(base + 1) as usize;
            let found = candidate > base && r < ip && ip - r <= MAX_OFFSET && {
                let w = (input[r] as u32) << 16 | (input[r + 1] as u32) << 8 | input[r + 2] as u32;
                w == window
            };
            if found {
                let max_len = MAX_MATCH.min(n - ip);
                let mut len = 3;
                while len < max_len && input[r + len] == input[ip + len] {
                    len += 1;
                }
                emit_literals(out, &input[lit_start..ip]);
                if out.len() + 3 + 1 > limit {
                    return None;
                }
                let off = ip - r - 1;
                let l = len - 2;
                if l < 7 {
                    out.push(((off >> 8) + (l << 5)) as u8);
                } else {
                    out.push(((off >> 8) + (7 << 5)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                ip += len;
                // Remember the position just before the next token so long
                // repetitive inputs keep finding matches.
                if ip + 2 < n && ip >= 1 {
                    let p = ip - 1;
                    let w =
                        (input[p] as u32) << 16 | (input[p + 1] as u32) << 8 | input[p + 2] as u32;
                    self.table[hash(w)] = base + p as u32 + 1;
                }
                lit_start = ip;
                misses = 0;
            } else {
                // After many misses in a row the data is probably not
                // compressible here: probe every 2nd, 3rd... position (as
                // LZ4 does); the skipped bytes stay literals. The stream
                // stays valid; only the search effort shrinks.
                misses += 1;
                let step = (1 + (misses >> SKIP_STRENGTH)).min(n - 2 - ip);
                // What the output would hold with the pending literals
                // written out (and a control byte for the next run).
                let pending = ip - lit_start;
                let written = out.len() + pending + pending / MAX_LITERAL + 1;
                if written + step + step / MAX_LITERAL + 1 > limit {
                    return None;
                }
                ip += step;
            }
        }
        emit_literals(out, &input[lit_start..]);
        if out.len() > limit {
            return None;
        }
        Some(())
    }
}

/// Appends `lit` as literal runs of at most 32 bytes, each after its
/// control byte (length - 1).
fn emit_literals(out: &mut Vec<u8>, lit: &[u8]) {
    for run in lit.chunks(MAX_LITERAL) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(data: &[u8]) -> Option<Vec<u8>> {
        let mut c = LzfCompressor::new();
        let mut out = Vec::new();
        let n = c.compress(data, &mut out, data.len() + data.len() / 16 + 16)?;
        assert_eq!(n, out.len());
        let mut back = Vec::new();
        decompress(&out, data.len(), &mut back).expect("decompress");
        assert_eq!(back, data);
        Some(out)
    }

    #[test]
    fn repetitive_input_compresses_and_roundtrips() {
        let data = vec![b'a'; 10_000];
        let out = roundtrip(&data).unwrap();
        assert!(out.len() < 200, "{}", out.len());
        let text = b"hello world, hello world, hello world, goodbye".repeat(50);
        assert!(roundtrip(&text).unwrap().len() < text.len() / 4);
    }

    #[test]
    fn every_small_length_roundtrips() {
        for len in 1..200usize {
            let data: Vec<u8> = (0..len).map(|i| (i % 7) as u8 * 3).collect();
            roundtrip(&data);
            let noise: Vec<u8> = (0..len)
                .map(|i| ((i * 2_654_435_761usize) >> 7) as u8)
                .collect();
            roundtrip(&noise);
        }
    }

    #[test]
    fn table_reuse_across_calls_and_position_wraparound_stay_correct() {
        let mut c = LzfCompressor::new();
        let text = b"hello world, hello world, hello world, goodbye".repeat(20);
        for start in [0, u32::MAX - 3000, u32::MAX - 10] {
            c.base = start;
            for round in 0..5 {
                let data = &text[round * 7..];
                let mut out = Vec::new();
                let n = c
                    .compress(data, &mut out, data.len())
                    .expect("compressible");
                assert!(n < data.len() / 3);
                let mut back = Vec::new();
                decompress(&out, data.len(), &mut back).unwrap();
                assert_eq!(back, data);
            }
        }
    }

    #[test]
    fn compress_refuses_when_output_would_not_fit() {
        let noise: Vec<u8> = (0..100usize)
            .map(|i| ((i * 2_654_435_761usize) >> 9) as u8)
            .collect();
        let mut c = LzfCompressor::new();
        let mut out = vec![1, 2, 3];
        assert_eq!(c.compress(&noise, &mut out, noise.len() - 4), None);
        assert_eq!(out, vec![1, 2, 3]);
    }

    #[test]
    fn decoder_reads_handmade_liblzf_stream() {
        // "abcabcabcabc": literal "abc" then a reference 3 back, length 9.
        let stream = [2, b'a', b'b', b'c', (7 << 5), 0, 2];
        let mut out = Vec::new();
        decompress(&stream, 12, &mut out).unwrap();
        assert_eq!(out, b"abcabcabcabc");
    }

    #[test]
    fn decoder_rejects_malformed_streams() {
        let mut out = vec![9];
        assert_eq!(
            decompress(&[0x20, 0], 3, &mut out),
            Err(LzfError::BadReference {
                distance: 1,
                output_pos: 0,
                input_pos: 0
            })
        );
        assert_eq!(out, vec![9]);
        assert_eq!(
            decompress(&[5, b'a'], 6, &mut out),
            Err(LzfError::Truncated { input_pos: 0 })
        );
        assert_eq!(
            decompress(&[1, b'a', b'b'], 1, &mut out),
            Err(LzfError::OutputTooLong {
                expected: 1,
                input_pos: 0
            })
        );
        assert_eq!(
            decompress(&[0, b'a'], 2, &mut out),
            Err(LzfError::OutputTooShort {
                produced: 1,
                expected: 2
            })
        );
        assert_eq!(
            decompress(&[0, b'a', 0xe0], 9, &mut out),
            Err(LzfError::Truncated { input_pos: 2 })
        );
    }
}
