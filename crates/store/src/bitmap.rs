//! Bit operations on string values, with Redis's conventions (bitops.c):
//! bit 0 is the most significant bit of the first byte, a string reads as
//! zero-padded on the right, and ranges are clamped the way `BITCOUNT` and
//! `BITPOS` clamp them (negative indexes from the end, `BYTE` or `BIT`
//! units). Counting and searching go a 64-bit word at a time; `BITOP` runs
//! word by word over the part every source covers.

/// Set bits in `bytes`, eight bytes at a time (four independent sums, so
/// the CPU overlaps the `popcnt`s).
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(32);
    let mut acc = [0u64; 4];
    for c in &mut words {
        for (i, a) in acc.iter_mut().enumerate() {
            let w = u64::from_ne_bytes(c[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            *a += u64::from(w.count_ones());
        }
    }
    let rest = words.remainder();
    let mut total = acc.iter().sum::<u64>();
    let mut eights = rest.chunks_exact(8);
    for c in &mut eights {
        total += u64::from(u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones());
    }
    for &b in eights.remainder() {
        total += u64::from(b.count_ones());
    }
    total
}

/// A `BITCOUNT`/`BITPOS` range in bytes, with the bits to leave out of its
/// first and last byte when it was given in bits.
struct Span {
    start: usize,
    end: usize,
    /// Bits of the first byte before the range (set in the mask).
    first_out: u8,
    /// Bits of the last byte after the range.
    last_out: u8,
}

/// Redis's clamping of `start end [BYTE|BIT]` over a string of `len`
/// bytes; `None` for an empty range.
fn span(len: usize, start: i64, end: i64, bits: bool) -> Option<Span> {
    let total = if bits { (len as i64) << 3 } else { len as i64 };
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start = start.saturating_add(total);
    }
    if end < 0 {
        end = end.saturating_add(total);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (mut first_out, mut last_out) = (0u8, 0u8);
    if bits {
        first_out = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_out = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    Some(Span {
        start: start as usize,
        end: end as usize,
        first_out,
        last_out,
    })
}

/// `BITCOUNT key [start end [BYTE|BIT]]` over `s`.
pub fn bitcount(s: &[u8], range: Option<(i64, i64, bool)>) -> u64 {
    let sp = match range {
        None if s.is_empty() => return 0,
        None => Span {
            start: 0,
            end: s.len() - 1,
            first_out: 0,
            last_out: 0,
        },
        Some((start, end, _)) if start < 0 && end < 0 && start > end => return 0,
        Some((start, end, bits)) => match span(s.len(), start, end, bits) {
            Some(sp) => sp,
            None => return 0,
        },
    };
    let mut n = popcount(&s[sp.start..=sp.end]);
    n -= u64::from((s[sp.start] & sp.first_out).count_ones());
    n -= u64::from((s[sp.end] & sp.last_out).count_ones());
    n
}

/// The first `bit` in `bytes` (Redis's `redisBitpos`): for a 1, -1 when
/// there is none; for a 0, `bytes.len() * 8` when there is none (the
/// string reads as zero-padded).
fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0u64 } else { u64::MAX };
    let mut pos = 0usize;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_be_bytes(w.try_into().expect("8 bytes"));
        if w != skip {
            let found = if bit {
                w.leading_zeros()
            } else {
                (!w).leading_zeros()
            };
            return (pos * 8 + found as usize) as i64;
        }
        pos += 8;
    }
    for &b in words.remainder() {
        let hit = if bit { b } else { !b };
        if hit != 0 {
            return (pos * 8 + hit.leading_zeros() as usize) as i64;
        }
        pos += 1;
    }
    if bit {
        -1
    } else {
        (pos * 8) as i64
    }
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]` over `s` (an existing
/// string): `end` is `None` when not given (then a 0 past the range's end
/// counts, the string being zero-padded).
pub fn bitpos(s: &[u8], bit: bool, start: Option<i64>, end: Option<i64>, bits: bool) -> i64 {
    let end_given = end.is_some();
    let sp = match start {
        None => {
            if s.is_empty() {
                // An empty range: neither a 0 nor a 1.
                return -1;
            }
            Span {
                start: 0,
                end: s.len() - 1,
                first_out: 0,
                last_out: 0,
            }
        }
        Some(start) => {
            let end = end.unwrap_or(s.len() as i64 - 1);
            match span(s.len(), start, end, bits) {
                Some(sp) => sp,
                None => return -1,
            }
        }
    };
    let bytes = sp.end - sp.start + 1;
    // The range's bytes, its edge bytes masked so that the bits outside it
    // never match: for a 1 they are cleared, for a 0 set.
    let edge = |b: u8, out: u8| if bit { b & !out } else { b | out };
    let pos = if sp.first_out == 0 && sp.last_out == 0 {
        first_bit(&s[sp.start..=sp.end], bit)
    } else if bytes == 1 {
        first_bit(&[edge(s[sp.start], sp.first_out | sp.last_out)], bit)
    } else {
        let head = first_bit(&[edge(s[sp.start], sp.first_out)], bit);
        if head != -1 && head != 8 {
            head
        } else {
            let mid = &s[sp.start + 1..sp.end];
            let m = first_bit(mid, bit);
            if m != -1 && m != (mid.len() * 8) as i64 {
                8 + m
            } else {
                let tail = first_bit(&[edge(s[sp.end], sp.last_out)], bit);
                if tail == -1 {
                    -1
                } else {
                    8 + (mid.len() * 8) as i64 + tail
                }
            }
        }
    };
    if end_given && !bit && pos == (bytes * 8) as i64 {
        // No 0 in an explicit range: the padding beyond it does not count.
        return -1;
    }
    if pos == -1 {
        -1
    } else {
        pos + (sp.start * 8) as i64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// `BITOP op`: the result of `op` over `srcs` (missing keys as empty
/// strings), as long as the longest source; shorter ones read as zeros.
/// `NOT` takes exactly one source (the caller checks).
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let minlen = srcs.iter().map(|s| s.len()).min().unwrap_or(0);
    let mut out = vec![0u8; maxlen];
    if maxlen == 0 {
        return out;
    }
    // Word at a time over the part every source covers.
    let words = minlen / 8;
    for w in 0..words {
        let at = w * 8;
        let word = |s: &[u8]| u64::from_ne_bytes(s[at..at + 8].try_into().expect("8 bytes"));
        let mut acc = word(srcs[0]);
        match op {
            BitOp::Not => acc = !acc,
            BitOp::And => srcs[1..].iter().for_each(|s| acc &= word(s)),
            BitOp::Or => srcs[1..].iter().for_each(|s| acc |= word(s)),
            BitOp::Xor => srcs[1..].iter().for_each(|s| acc ^= word(s)),
        }
        out[at..at + 8].copy_from_slice(&acc.to_ne_bytes());
    }
    for (j, o) in out.iter_mut().enumerate().skip(words * 8) {
        let byte = |s: &[u8]| s.get(j).copied().unwrap_or(0);
        let mut acc = byte(srcs[0]);
        match op {
            BitOp::Not => acc = !acc,
            BitOp::And => srcs[1..].iter().for_each(|s| acc &= byte(s)),
            BitOp::Or => srcs[1..].iter().for_each(|s| acc |= byte(s)),
            BitOp::Xor => srcs[1..].iter().for_each(|s| acc ^= byte(s)),
        }
        *o = acc;
    }
    out
}

/// The bit at `offset` (0 past the end).
pub fn get_bit(s: &[u8], offset: u64) -> bool {
    let byte = (offset >> 3) as usize;
    byte < s.len() && s[byte] & (0x80 >> (offset & 7)) != 0
}

/// Sets the bit at `offset` of `s` (which must reach it); the old value.
pub fn set_bit(s: &mut [u8], offset: u64, on: bool) -> bool {
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    let old = s[byte] & mask != 0;
    if on {
        s[byte] |= mask;
    } else {
        s[byte] &= !mask;
    }
    old
}

/// The `bits`-wide unsigned field at bit `offset` (bits past the end of
/// `s` read as 0). `bits` is 1..=64.
pub fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in 0..u64::from(bits) {
        v = (v << 1) | u64::from(get_bit(s, offset + j));
    }
    v
}

/// The `bits`-wide two's complement field at bit `offset`.
pub fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(s, offset, bits);
    if bits < 64 && u & (1u64 << (bits - 1)) != 0 {
        (u | (u64::MAX << bits)) as i64
    } else {
        u as i64
    }
}

/// Writes the low `bits` of `value` at bit `offset` of `s` (which must
/// reach `offset + bits - 1`).
pub fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let on = value & (1u64 << (u64::from(bits) - 1 - j)) != 0;
        set_bit(s, offset + j, on);
    }
}

/// `BITFIELD`'s `OVERFLOW` behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` leaves a
/// `bits`-wide unsigned field (1 over, -1 under, 0 not), and the value to
/// store instead under `Wrap` and `Sat`.
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> (i32, u64) {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    if value > max || (incr > 0 && incr > maxincr) {
        return (
            1,
            match ow {
                Overflow::Wrap => wrap(),
                _ => max,
            },
        );
    }
    if incr < 0 && incr < minincr {
        return (
            -1,
            match ow {
                Overflow::Wrap => wrap(),
                _ => 0,
            },
        );
    }
    (0, 0)
}

/// Redis's `checkSignedBitfieldOverflow`, for a `bits`-wide signed field.
pub fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (i32, i64) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                (c | mask) as i64
            } else {
                (c & !mask) as i64
            }
        } else {
            c as i64
        }
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        return (
            1,
            match ow {
                Overflow::Wrap => wrap(),
                _ => max,
            },
        );
    }
    if value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        return (
            -1,
            match ow {
                Overflow::Wrap => wrap(),
                _ => min,
            },
        );
    }
    (0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_count(s: &[u8]) -> u64 {
        s.iter().map(|b| u64::from(b.count_ones())).sum()
    }

    #[test]
    fn popcount_matches_a_byte_count_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        for from in 0..9 {
            for len in 0..data.len() - from {
                let s = &data[from..from + len];
                assert_eq!(popcount(s), naive_count(s), "{from} {len}");
            }
        }
    }

    #[test]
    fn bitcount_ranges_in_bytes_and_bits() {
        // "foobar": Redis's documentation examples.
        let s = b"foobar";
        assert_eq!(bitcount(s, None), 26);
        assert_eq!(bitcount(s, Some((0, 0, false))), 4);
        assert_eq!(bitcount(s, Some((1, 1, false))), 6);
        assert_eq!(bitcount(s, Some((1, 1, true))), 1);
        assert_eq!(bitcount(s, Some((5, 30, true))), 17);
        assert_eq!(bitcount(s, Some((-1, -2, false))), 0);
        assert_eq!(bitcount(s, Some((2, 1, false))), 0);
        assert_eq!(bitcount(b"", Some((0, -1, false))), 0);
        // Every bit range against a bit-by-bit count.
        for a in -50i64..50 {
            for b in -50i64..50 {
                let total = 48i64;
                let (mut x, mut y) = (a, b);
                let want = if a < 0 && b < 0 && a > b {
                    0
                } else {
                    if x < 0 {
                        x += total;
                    }
                    if y < 0 {
                        y += total;
                    }
                    x = x.max(0);
                    y = y.max(0).min(total - 1);
                    (x..=y).filter(|&i| get_bit(s, i as u64)).count() as u64
                };
                assert_eq!(bitcount(s, Some((a, b, true))), want, "{a} {b}");
            }
        }
    }

    #[test]
    fn bitpos_finds_the_first_bit_like_redis() {
        // Redis's documentation examples.
        assert_eq!(bitpos(b"\xff\xf0\x00", false, None, None, false), 12);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(0), None, false), 8);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(2), None, false), 16);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(2), Some(-1), false), 16);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(7), Some(15), true), 8);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(7), Some(-3), true), 8);
        assert_eq!(bitpos(b"\x00\x00\x00", true, None, None, false), -1);
        // All ones: a 0 is past the end unless the end was given.
        assert_eq!(bitpos(b"\xff\xff", false, None, None, false), 16);
        assert_eq!(bitpos(b"\xff\xff", false, Some(0), None, false), 16);
        assert_eq!(bitpos(b"\xff\xff", false, Some(0), Some(-1), false), -1);
        // Every bit range against a bit-by-bit search.
        let s = b"\x0f\x00\xf0\xff\x00\x01\x80\x7f\x00\x00\x00\x00\x10";
        let total = (s.len() * 8) as i64;
        for bit in [false, true] {
            for a in -110i64..110 {
                for b in -110i64..110 {
                    let (mut x, mut y) = (a, b);
                    if x < 0 {
                        x += total;
                    }
                    if y < 0 {
                        y += total;
                    }
                    x = x.max(0);
                    y = y.max(0).min(total - 1);
                    let want = (x..=y).find(|&i| get_bit(s, i as u64) == bit).unwrap_or(-1);
                    assert_eq!(
                        bitpos(s, bit, Some(a), Some(b), true),
                        want,
                        "{bit} {a} {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn bitop_word_and_byte_paths_agree_with_a_byte_loop() {
        let a: Vec<u8> = (0..70u8).map(|i| i.wrapping_mul(37)).collect();
        let b: Vec<u8> = (0..45u8).map(|i| i.wrapping_mul(91) ^ 0x5a).collect();
        let c: Vec<u8> = (0..3u8).collect();
        for op in [BitOp::And, BitOp::Or, BitOp::Xor] {
            let got = bitop(op, &[&a, &b, &c]);
            assert_eq!(got.len(), 70);
            for (j, g) in got.iter().enumerate() {
                let get = |s: &[u8]| s.get(j).copied().unwrap_or(0);
                let want = match op {
                    BitOp::And => get(&a) & get(&b) & get(&c),
                    BitOp::Or => get(&a) | get(&b) | get(&c),
                    _ => get(&a) ^ get(&b) ^ get(&c),
                };
                assert_eq!(*g, want, "{op:?} byte {j}");
            }
        }
        let not = bitop(BitOp::Not, &[&a]);
        assert!(not.iter().zip(&a).all(|(n, x)| *n == !x));
    }

    #[test]
    fn fields_read_back_what_was_written_at_any_offset() {
        let mut s = vec![0u8; 20];
        for bits in 1..=64u32 {
            for off in [0u64, 1, 7, 9, 33] {
                let v = 0xdead_beef_cafe_f00du64 & (u64::MAX >> (64 - bits));
                set_field(&mut s, off, bits, v);
                assert_eq!(get_unsigned(&s, off, bits), v, "{bits} {off}");
            }
        }
        // Redis's documentation: u5 23 at offset 7 -> 00000001 01110000.
        let mut z = vec![0u8; 2];
        set_field(&mut z, 7, 5, 23);
        assert_eq!(z, [0b0000_0001, 0b0111_0000]);
        set_field(&mut z, 0, 8, 0xff);
        assert_eq!(get_signed(&z, 0, 8), -1);
        assert_eq!(get_signed(&z, 0, 4), -1);
        assert_eq!(get_unsigned(&z, 0, 4), 15);
    }

    #[test]
    fn overflow_wraps_saturates_and_fails_like_redis() {
        // u8 250 + 10.
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), (1, 4));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), (1, 255));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), (-1, 0));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Wrap), (-1, 251));
        assert_eq!(unsigned_overflow(5, 10, 8, Overflow::Fail).0, 0);
        // i8 120 + 10, -120 - 10.
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Wrap), (1, -126));
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Sat), (1, 127));
        assert_eq!(signed_overflow(-120, -10, 8, Overflow::Sat), (-1, -128));
        assert_eq!(signed_overflow(-120, -10, 8, Overflow::Wrap), (-1, 126));
        // i64 edges.
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            (1, i64::MIN)
        );
        assert_eq!(
            signed_overflow(i64::MIN, -1, 64, Overflow::Sat),
            (-1, i64::MIN)
        );
        assert_eq!(signed_overflow(0, i64::MIN, 64, Overflow::Sat).0, 0);
        // SET of a value too wide: checked as value + 0.
        assert_eq!(unsigned_overflow(300, 0, 8, Overflow::Wrap), (1, 44));
        assert_eq!(signed_overflow(200, 0, 8, Overflow::Wrap), (1, -56));
    }
}
