//! Intset (`intset.c`): a sorted array of distinct integers, all stored at the
//! width of the widest one. Layout, little-endian:
//! `<encoding u32: 2|4|8> <length u32> <length * encoding bytes>`.

use std::borrow::Cow;

/// Serialises sorted, distinct `values` as an intset blob.
pub(crate) fn write(values: &[i64], out: &mut Vec<u8>) {
    let width: u32 = if values
        .iter()
        .all(|&v| (i16::MIN as i64..=i16::MAX as i64).contains(&v))
    {
        2
    } else if values
        .iter()
        .all(|&v| (i32::MIN as i64..=i32::MAX as i64).contains(&v))
    {
        4
    } else {
        8
    };
    out.reserve(8 + values.len() * width as usize);
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        match width {
            2 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            4 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            _ => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
}

/// Parses an intset blob, checking what `intsetValidateIntegrity` checks
/// (width, exact size) plus strict ordering, which Redis checks in deep mode.
pub(crate) fn parse<'a>(blob: &[u8]) -> Result<Vec<Cow<'a, [u8]>>, (usize, &'static str)> {
    if blob.len() < 8 {
        return Err((0, "intset shorter than its header"));
    }
    let width = u32::from_le_bytes(blob[0..4].try_into().expect("4 bytes")) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err((0, "invalid intset encoding"));
    }
    let count = u32::from_le_bytes(blob[4..8].try_into().expect("4 bytes")) as usize;
    if (count as u64) * (width as u64) + 8 != blob.len() as u64 {
        return Err((4, "intset length does not match its size"));
    }
    let mut out = Vec::with_capacity(count);
    let mut prev: Option<i64> = None;
    for (i, chunk) in blob[8..].chunks_exact(width).enumerate() {
        let v = match width {
            2 => i16::from_le_bytes(chunk.try_into().expect("2")) as i64,
            4 => i32::from_le_bytes(chunk.try_into().expect("4")) as i64,
            _ => i64::from_le_bytes(chunk.try_into().expect("8")),
        };
        if prev.is_some_and(|p| p >= v) {
            return Err((8 + i * width, "intset not sorted or has duplicates"));
        }
        prev = Some(v);
        out.push(crate::listpack::int_text(v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_follows_the_widest_value() {
        let mut b = Vec::new();
        write(&[-3, 5], &mut b);
        assert_eq!(b, [2, 0, 0, 0, 2, 0, 0, 0, 0xFD, 0xFF, 5, 0]);
        b.clear();
        write(&[1, 40000], &mut b);
        assert_eq!(&b[..4], &[4, 0, 0, 0]);
        b.clear();
        write(&[i64::MIN, 0], &mut b);
        assert_eq!(&b[..4], &[8, 0, 0, 0]);
        let items = parse(&b).unwrap();
        assert_eq!(items[0].as_ref(), b"-9223372036854775808");
    }

    #[test]
    fn unsorted_or_wrong_size_is_rejected() {
        let mut b = Vec::new();
        write(&[5, 3], &mut b);
        assert!(parse(&b).is_err());
        b.clear();
        write(&[3, 5], &mut b);
        assert!(parse(&b[..b.len() - 1]).is_err());
    }
}
