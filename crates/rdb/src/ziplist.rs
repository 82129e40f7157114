//! Decoders for the encodings Redis 7.0 no longer writes but still loads:
//! ziplists (`ziplist.c`, written by Redis 3.2–6.2 for small hashes, sorted
//! sets and list nodes) and zipmaps (`zipmap.c`, Redis ≤ 2.4 small hashes).
//! Read-only: the encoder never produces them.

use std::borrow::Cow;

const ZIPLIST_HEADER: usize = 10;
const ZIP_END: u8 = 0xFF;
const ZIP_BIG_PREVLEN: u8 = 0xFE;

/// Parses a ziplist:
/// `<zlbytes u32> <zltail u32> <zllen u16> <entry>* 0xFF`, each entry
/// `<prevlen: 1 byte, or 0xFE + u32> <encoding> <data>`.
pub(crate) fn parse_ziplist(zl: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, (usize, &'static str)> {
    if zl.len() < ZIPLIST_HEADER + 1 {
        return Err((0, "ziplist shorter than its header"));
    }
    let zlbytes = u32::from_le_bytes(zl[0..4].try_into().expect("4")) as usize;
    if zlbytes != zl.len() {
        return Err((0, "ziplist zlbytes does not match its length"));
    }
    let zltail = u32::from_le_bytes(zl[4..8].try_into().expect("4")) as usize;
    let zllen = u16::from_le_bytes(zl[8..10].try_into().expect("2"));
    if zl[zl.len() - 1] != ZIP_END {
        return Err((zl.len() - 1, "ziplist does not end with 0xFF"));
    }
    let mut items = Vec::with_capacity((zllen as usize).min(zl.len() / 2));
    let mut p = ZIPLIST_HEADER;
    let mut prev_entry_len = 0usize;
    let mut last_entry = None;
    let short = |p: usize| (p, "ziplist entry runs past its end");
    while zl[p] != ZIP_END {
        let start = p;
        let prevlen = if zl[p] == ZIP_BIG_PREVLEN {
            let b = zl.get(p + 1..p + 5).ok_or(short(start))?;
            p += 5;
            u32::from_le_bytes(b.try_into().expect("4")) as usize
        } else {
            p += 1;
            zl[p - 1] as usize
        };
        if prevlen != prev_entry_len {
            return Err((start, "ziplist prevlen does not match the previous entry"));
        }
        let enc = *zl.get(p).ok_or(short(start))?;
        let data = |from: usize, n: usize| zl.get(from..from + n).ok_or(short(start));
        let (item, next): (Cow<'_, [u8]>, usize) = match enc >> 6 {
            0 => {
                let len = (enc & 0x3F) as usize;
                (Cow::Borrowed(data(p + 1, len)?), p + 1 + len)
            }
            1 => {
                let b = data(p, 2)?;
                let len = (((b[0] & 0x3F) as usize) << 8) | b[1] as usize;
                (Cow::Borrowed(data(p + 2, len)?), p + 2 + len)
            }
            2 => {
                if enc != 0x80 {
                    return Err((p, "invalid ziplist string encoding"));
                }
                let b = data(p + 1, 4)?;
                let len = u32::from_be_bytes(b.try_into().expect("4")) as usize;
                (Cow::Borrowed(data(p + 5, len)?), p + 5 + len)
            }
            _ => {
                let (v, n) = match enc {
                    0xC0 => (
                        i16::from_le_bytes(data(p + 1, 2)?.try_into().expect("2")) as i64,
                        2,
                    ),
                    0xD0 => (
                        i32::from_le_bytes(data(p + 1, 4)?.try_into().expect("4")) as i64,
                        4,
                    ),
                    0xE0 => (
                        i64::from_le_bytes(data(p + 1, 8)?.try_into().expect("8")),
                        8,
                    ),
                    0xF0 => {
                        let b = data(p + 1, 3)?;
                        ((i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as i64, 3)
                    }
                    0xFE => (data(p + 1, 1)?[0] as i8 as i64, 1),
                    0xF1..=0xFD => (((enc & 0x0F) as i64) - 1, 0),
                    _ => return Err((p, "invalid ziplist integer encoding")),
                };
                (crate::listpack::int_text(v), p + 1 + n)
            }
        };
        if next >= zl.len() {
            return Err(short(start));
        }
        items.push(item);
        prev_entry_len = next - start;
        last_entry = Some(start);
        p = next;
    }
    if p != zl.len() - 1 {
        return Err((p, "ziplist terminator before its end"));
    }
    if zltail != last_entry.unwrap_or(ZIPLIST_HEADER) {
        return Err((4, "ziplist zltail does not point at the last entry"));
    }
    if zllen != u16::MAX && zllen as usize != items.len() {
        return Err((8, "ziplist zllen does not match its entries"));
    }
    Ok(items)
}

/// Parses a zipmap: `<zmlen u8> (<len> key <len> <free u8> value <free bytes>)* 0xFF`
/// where `<len>` is one byte below 254 or 254 followed by a u32.
pub(crate) fn parse_zipmap(zm: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, (usize, &'static str)> {
    let short = |p: usize| (p, "zipmap entry runs past its end");
    let mut p = 1;
    if zm.is_empty() {
        return Err((0, "empty zipmap"));
    }
    let mut items = Vec::new();
    let read_len = |p: &mut usize| -> Result<Option<usize>, (usize, &'static str)> {
        let b = *zm.get(*p).ok_or(short(*p))?;
        match b {
            255 => Ok(None),
            254 => {
                let v = zm.get(*p + 1..*p + 5).ok_or(short(*p))?;
                *p += 5;
                Ok(Some(u32::from_le_bytes(v.try_into().expect("4")) as usize))
            }
            n => {
                *p += 1;
                Ok(Some(n as usize))
            }
        }
    };
    loop {
        let start = p;
        let Some(klen) = read_len(&mut p)? else { break };
        let key = zm.get(p..p + klen).ok_or(short(start))?;
        p += klen;
        let vlen = read_len(&mut p)?.ok_or((p, "zipmap key without value"))?;
        let free = *zm.get(p).ok_or(short(start))? as usize;
        p += 1;
        let value = zm.get(p..p + vlen).ok_or(short(start))?;
        p += vlen + free;
        items.push(Cow::Borrowed(key));
        items.push(Cow::Borrowed(value));
    }
    if p != zm.len() - 1 {
        return Err((p, "zipmap terminator before its end"));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a ziplist the way `ziplistPush` lays it out.
    fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = ZIPLIST_HEADER;
        for e in entries {
            let start = body.len();
            tail = ZIPLIST_HEADER + start;
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xFE);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            match crate::listpack::parse_canonical_i64(e) {
                Some(v @ 0..=12) => body.push(0xF1 + v as u8),
                Some(v) if i8::try_from(v).is_ok() => body.extend_from_slice(&[0xFE, v as u8]),
                Some(v) if i16::try_from(v).is_ok() => {
                    body.push(0xC0);
                    body.extend_from_slice(&(v as i16).to_le_bytes());
                }
                Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                    body.push(0xF0);
                    body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
                }
                Some(v) if i32::try_from(v).is_ok() => {
                    body.push(0xD0);
                    body.extend_from_slice(&(v as i32).to_le_bytes());
                }
                Some(v) => {
                    body.push(0xE0);
                    body.extend_from_slice(&v.to_le_bytes());
                }
                None if e.len() < 64 => {
                    body.push(e.len() as u8);
                    body.extend_from_slice(e);
                }
                None if e.len() < 16384 => {
                    body.push(0x40 | (e.len() >> 8) as u8);
                    body.push(e.len() as u8);
                    body.extend_from_slice(e);
                }
                None => {
                    body.push(0x80);
                    body.extend_from_slice(&(e.len() as u32).to_be_bytes());
                    body.extend_from_slice(e);
                }
            }
            prev = body.len() - start;
        }
        let mut zl = Vec::new();
        zl.extend_from_slice(&((ZIPLIST_HEADER + body.len() + 1) as u32).to_le_bytes());
        zl.extend_from_slice(&(tail as u32).to_le_bytes());
        zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(ZIP_END);
        zl
    }

    #[test]
    fn every_ziplist_encoding_decodes() {
        let long = vec![b'q'; 300];
        let huge = vec![b'h'; 17000];
        let entries: Vec<&[u8]> = vec![
            b"a",
            b"0",
            b"12",
            b"13",
            b"-5",
            b"-129",
            b"300",
            b"-8388608",
            b"8388608",
            b"-2147483649",
            b"9223372036854775807",
            &long,
            &huge,
            b"",
        ];
        let zl = ziplist(&entries);
        let items = parse_ziplist(&zl).unwrap();
        let items: Vec<&[u8]> = items.iter().map(|c| c.as_ref()).collect();
        assert_eq!(items, entries);
        let mut bad = zl.clone();
        bad[4] = bad[4].wrapping_add(1);
        assert!(parse_ziplist(&bad).is_err());
    }

    #[test]
    fn zipmap_decodes_pairs() {
        // zmlen=2, "a"->"1" (free 0), "bb"->"xyz" (free 2), end.
        let zm = [
            2, 1, b'a', 1, 0, b'1', 2, b'b', b'b', 3, 2, b'x', b'y', b'z', 0, 0, 0xFF,
        ];
        let items = parse_zipmap(&zm).unwrap();
        let items: Vec<&[u8]> = items.iter().map(|c| c.as_ref()).collect();
        assert_eq!(items, vec![&b"a"[..], b"1", b"bb", b"xyz"]);
        assert!(parse_zipmap(&zm[..zm.len() - 1]).is_err());
    }
}
