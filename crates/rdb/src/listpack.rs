//! Listpack (Redis 7.0 `listpack.c`): the compact encoding of small hashes,
//! sorted sets and list nodes. Layout:
//!
//! ```text
//! <total-bytes u32 LE> <num-elements u16 LE, 65535 = unknown> <entry>* 0xFF
//! entry = <encoding+data> <backlen: size of encoding+data, 1..=5 bytes>
//! ```
//! Strings that are canonical integers (`lpStringToInt64`) are stored as
//! integers in the smallest of 7/13/16/24/32/64 bits, as Redis does, so a
//! listpack written here is byte-identical to the one Redis would build by
//! appending the same elements.

use std::borrow::Cow;

pub(crate) const HEADER_SIZE: usize = 6;
const EOF: u8 = 0xFF;
const NUMELE_UNKNOWN: u16 = u16::MAX;

/// Strict decimal `i64` as `lpStringToInt64` / `string2ll` accept it: no
/// sign other than a leading `-`, no leading zeros, no `-0`, no spaces.
pub(crate) fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Size of a backlen field for an entry of `l` bytes (`lpEncodeBacklen`).
fn backlen_size(l: usize) -> usize {
    if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2_097_151 {
        3
    } else if l < 268_435_455 {
        4
    } else {
        5
    }
}

fn push_backlen(buf: &mut Vec<u8>, l: usize) {
    let l = l as u64;
    match backlen_size(l as usize) {
        1 => buf.push(l as u8),
        2 => buf.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]),
        3 => buf.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]),
        4 => buf.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]),
        _ => buf.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]),
    }
}

fn int_encoded_size(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if (-32768..=32767).contains(&v) {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if (-2_147_483_648..=2_147_483_647).contains(&v) {
        5
    } else {
        9
    }
}

/// Bytes an element takes inside a listpack, backlen included.
pub(crate) fn entry_size(ele: &[u8]) -> usize {
    let enc = match parse_canonical_i64(ele) {
        Some(v) => int_encoded_size(v),
        None if ele.len() < 64 => 1 + ele.len(),
        None if ele.len() < 4096 => 2 + ele.len(),
        None => 5 + ele.len(),
    };
    enc + backlen_size(enc)
}

/// Builds a listpack at the end of a `Vec<u8>`, element by element. It keeps
/// no borrow of the buffer, so a caller can interleave other writes to
/// other buffers between elements.
pub(crate) struct ListpackWriter {
    start: usize,
    count: usize,
}

impl ListpackWriter {
    pub(crate) fn begin(buf: &mut Vec<u8>) -> Self {
        let start = buf.len();
        buf.extend_from_slice(&[0; HEADER_SIZE]);
        ListpackWriter { start, count: 0 }
    }

    pub(crate) fn push(&mut self, buf: &mut Vec<u8>, ele: &[u8]) {
        let before = buf.len();
        if let Some(v) = parse_canonical_i64(ele) {
            push_int(buf, v);
        } else {
            let len = ele.len();
            if len < 64 {
                buf.push(0x80 | len as u8);
            } else if len < 4096 {
                buf.push(0xE0 | (len >> 8) as u8);
                buf.push(len as u8);
            } else {
                buf.push(0xF0);
                buf.extend_from_slice(&(len as u32).to_le_bytes());
            }
            buf.extend_from_slice(ele);
        }
        let enc_len = buf.len() - before;
        push_backlen(buf, enc_len);
        self.count += 1;
    }

    /// Writes the terminator and header; returns the listpack's byte length.
    pub(crate) fn finish(self, buf: &mut Vec<u8>) -> usize {
        buf.push(EOF);
        let total = buf.len() - self.start;
        let numele = if self.count < NUMELE_UNKNOWN as usize {
            self.count as u16
        } else {
            NUMELE_UNKNOWN
        };
        buf[self.start..self.start + 4].copy_from_slice(&(total as u32).to_le_bytes());
        buf[self.start + 4..self.start + 6].copy_from_slice(&numele.to_le_bytes());
        total
    }
}

fn push_int(b: &mut Vec<u8>, v: i64) {
    match int_encoded_size(v) {
        1 => b.push(v as u8),
        2 => {
            let u = (v as u64) & 0x1FFF;
            b.push(0xC0 | (u >> 8) as u8);
            b.push(u as u8);
        }
        3 => {
            b.push(0xF1);
            b.extend_from_slice(&(v as i16).to_le_bytes());
        }
        4 => {
            b.push(0xF2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        }
        5 => {
            b.push(0xF3);
            b.extend_from_slice(&(v as i32).to_le_bytes());
        }
        _ => {
            b.push(0xF4);
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// Parses and validates a whole listpack (as `lpValidateIntegrity` with deep
/// checks does: header length, every entry in bounds, every backlen
/// consistent, terminator last, element count as declared). Strings borrow
/// from `lp`; integers become their decimal text. Errors carry the byte
/// position inside the listpack.
pub(crate) fn parse(lp: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, (usize, &'static str)> {
    if lp.len() < HEADER_SIZE + 1 {
        return Err((0, "listpack shorter than its header"));
    }
    let total = u32::from_le_bytes(lp[0..4].try_into().expect("4 bytes")) as usize;
    if total != lp.len() {
        return Err((0, "listpack total-bytes header does not match its length"));
    }
    let numele = u16::from_le_bytes(lp[4..6].try_into().expect("2 bytes"));
    let mut items = Vec::with_capacity((numele as usize).min(lp.len() / 2));
    let mut p = HEADER_SIZE;
    loop {
        let b = *lp.get(p).ok_or((p, "listpack entry runs past its end"))?;
        if b == EOF {
            if p != lp.len() - 1 {
                return Err((p, "listpack terminator before its end"));
            }
            break;
        }
        let need = |n: usize| -> Result<&[u8], (usize, &'static str)> {
            lp.get(p..p + n)
                .ok_or((p, "listpack entry runs past its end"))
        };
        let (item, enc_len): (Cow<'_, [u8]>, usize) = if b & 0x80 == 0 {
            (int_text((b & 0x7F) as i64), 1)
        } else if b & 0xC0 == 0x80 {
            let len = (b & 0x3F) as usize;
            (Cow::Borrowed(&need(1 + len)?[1..]), 1 + len)
        } else if b & 0xE0 == 0xC0 {
            let e = need(2)?;
            let u = (((e[0] & 0x1F) as i64) << 8) | e[1] as i64;
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (int_text(v), 2)
        } else if b & 0xF0 == 0xE0 {
            let e = need(2)?;
            let len = (((e[0] & 0x0F) as usize) << 8) | e[1] as usize;
            (Cow::Borrowed(&need(2 + len)?[2..]), 2 + len)
        } else {
            match b {
                0xF0 => {
                    let e = need(5)?;
                    let len = u32::from_le_bytes(e[1..5].try_into().expect("4 bytes")) as usize;
                    let n = len
                        .checked_add(5)
                        .ok_or((p, "listpack string length overflows"))?;
                    (Cow::Borrowed(&need(n)?[5..]), n)
                }
                0xF1 => {
                    let e = need(3)?;
                    (int_text(i16::from_le_bytes([e[1], e[2]]) as i64), 3)
                }
                0xF2 => {
                    let e = need(4)?;
                    let v = i32::from_le_bytes([0, e[1], e[2], e[3]]) >> 8;
                    (int_text(v as i64), 4)
                }
                0xF3 => {
                    let e = need(5)?;
                    (
                        int_text(i32::from_le_bytes(e[1..5].try_into().expect("4")) as i64),
                        5,
                    )
                }
                0xF4 => {
                    let e = need(9)?;
                    (
                        int_text(i64::from_le_bytes(e[1..9].try_into().expect("8"))),
                        9,
                    )
                }
                _ => return Err((p, "invalid listpack entry encoding")),
            }
        };
        let bl = backlen_size(enc_len);
        let back = lp
            .get(p + enc_len..p + enc_len + bl)
            .ok_or((p, "listpack backlen runs past its end"))?;
        if decode_backlen(back) != Some(enc_len as u64) {
            return Err((p, "listpack backlen does not match the entry"));
        }
        items.push(item);
        p += enc_len + bl;
    }
    if numele != NUMELE_UNKNOWN && numele as usize != items.len() {
        return Err((4, "listpack element count does not match its header"));
    }
    Ok(items)
}

fn decode_backlen(bytes: &[u8]) -> Option<u64> {
    // Read right to left: the last byte holds the low seven bits.
    let mut val = 0u64;
    let mut shift = 0;
    for (i, &b) in bytes.iter().rev().enumerate() {
        val |= ((b & 127) as u64) << shift;
        let last = i + 1 == bytes.len();
        if (b & 128 == 0) != last {
            return None;
        }
        shift += 7;
    }
    Some(val)
}

pub(crate) fn int_text<'a>(v: i64) -> Cow<'a, [u8]> {
    let mut b = itoa::Buffer::new();
    Cow::Owned(b.format(v).as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integer_rules_match_lp_string_to_int64() {
        assert_eq!(parse_canonical_i64(b"0"), Some(0));
        assert_eq!(parse_canonical_i64(b"-1"), Some(-1));
        assert_eq!(parse_canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"-0"[..],
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"9223372036854775808",
            b"1a",
        ] {
            assert_eq!(parse_canonical_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn known_bytes_for_small_listpack() {
        // Header (12 bytes, 2 elements), "a" as 6-bit string + backlen 2,
        // "1" as a 7-bit integer + backlen 1, terminator.
        let mut buf = Vec::new();
        let mut w = ListpackWriter::begin(&mut buf);
        w.push(&mut buf, b"a");
        w.push(&mut buf, b"1");
        let n = w.finish(&mut buf);
        assert_eq!(n, buf.len());
        assert_eq!(buf, [12, 0, 0, 0, 2, 0, 0x81, b'a', 2, 1, 1, 0xFF]);
    }

    #[test]
    fn every_integer_width_and_string_width_roundtrips() {
        let values: Vec<Vec<u8>> = [
            "0",
            "127",
            "128",
            "-1",
            "4095",
            "-4096",
            "4096",
            "32767",
            "-32768",
            "8388607",
            "-8388608",
            "8388608",
            "2147483647",
            "-2147483648",
            "2147483648",
            "-9223372036854775808",
            "9223372036854775807",
            "-0",
            "007",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![7; 4096],
            vec![0; 20000],
            vec![],
        ])
        .collect();
        let mut buf = Vec::new();
        let mut w = ListpackWriter::begin(&mut buf);
        let mut expected_size = HEADER_SIZE + 1;
        for v in &values {
            w.push(&mut buf, v);
            expected_size += entry_size(v);
        }
        w.finish(&mut buf);
        assert_eq!(buf.len(), expected_size);
        let items = parse(&buf).unwrap();
        let items: Vec<Vec<u8>> = items.into_iter().map(|c| c.into_owned()).collect();
        assert_eq!(items, values);
    }

    #[test]
    fn corrupt_listpacks_are_rejected() {
        let mut buf = Vec::new();
        let mut w = ListpackWriter::begin(&mut buf);
        w.push(&mut buf, b"hello");
        w.finish(&mut buf);
        let good = buf.clone();
        assert!(parse(&good).is_ok());
        let mut bad = good.clone();
        bad[4] = 2; // count
        assert!(parse(&bad).is_err());
        let mut bad = good.clone();
        bad[HEADER_SIZE + 6] = 9; // backlen
        assert!(parse(&bad).is_err());
        assert!(parse(&good[..good.len() - 1]).is_err());
    }
}
