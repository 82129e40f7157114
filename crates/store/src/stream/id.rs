//! Stream entry IDs: `<ms>-<seq>`, two `u64`s ordered as a pair.

use std::fmt;

/// A stream entry ID (`streamID`): milliseconds and a sequence number,
/// ordered by (ms, seq).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// How an ID argument is read (the modes of Redis's
/// `streamGenericParseIDOrReply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdSyntax {
    /// The sequence of a bare `<ms>`: 0 for a range start, `u64::MAX` for
    /// a range end.
    pub missing_seq: u64,
    /// Strict: `-` and `+` are refused (XADD, XSETID, XCLAIM ...).
    pub strict: bool,
    /// `<ms>-*` accepted, meaning "sequence to be generated" (XADD only).
    pub allow_auto_seq: bool,
}

impl IdSyntax {
    /// `streamParseID` / `streamParseIDOrReply`: `-`, `+`, `<ms>`,
    /// `<ms>-<seq>`.
    pub const fn range(missing_seq: u64) -> IdSyntax {
        IdSyntax {
            missing_seq,
            strict: false,
            allow_auto_seq: false,
        }
    }

    /// `streamParseStrictIDOrReply` without `seq_given` (no `-`, `+`).
    pub const fn strict(missing_seq: u64) -> IdSyntax {
        IdSyntax {
            missing_seq,
            strict: true,
            allow_auto_seq: false,
        }
    }

    /// XADD's explicit ID: strict, a bare `<ms>` means `<ms>-0`, and
    /// `<ms>-*` is allowed.
    pub const XADD: IdSyntax = IdSyntax {
        missing_seq: 0,
        strict: true,
        allow_auto_seq: true,
    };
}

/// A parsed ID argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedId {
    /// A complete ID (`seq_given` in Redis's terms).
    Id(StreamId),
    /// `<ms>-*`: the sequence is chosen when the entry is added.
    AutoSeq(u64),
}

/// The ID argument is not an ID: Redis replies "Invalid stream ID
/// specified as stream command argument".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidStreamId;

impl fmt::Display for InvalidStreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Invalid stream ID specified as stream command argument")
    }
}

impl std::error::Error for InvalidStreamId {}

/// `string2ull`: a canonical `i64` that is not negative, or else what C's
/// `strtoull(s, &end, 10)` accepts up to the end of the string (leading
/// spaces, a sign — `-` negates modulo 2^64 — leading zeros), refusing
/// overflow and empty input.
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = super::listpack::lp_string_to_i64(s) {
        return u64::try_from(v).ok();
    }
    let mut p = 0;
    while p < s.len() && matches!(s[p], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        p += 1;
    }
    let mut neg = false;
    if p < s.len() && (s[p] == b'+' || s[p] == b'-') {
        neg = s[p] == b'-';
        p += 1;
    }
    let digits = &s[p..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615`.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (`streamIncrID`); `None` after [`StreamId::MAX`].
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (`streamDecrID`); `None` before [`StreamId::MIN`].
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// Whether this is `0-0` (`streamIDEqZero`).
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// Parses an ID argument as `streamGenericParseIDOrReply` does: at most
    /// 127 bytes, read up to the first NUL (Redis copies it into a C
    /// string), `-`/`+` unless strict, `<ms>` (sequence `missing_seq`),
    /// `<ms>-<seq>` split at the first `-`, each part by `string2ull`, and
    /// `<ms>-*` when allowed.
    pub fn parse(arg: &[u8], syntax: IdSyntax) -> Result<ParsedId, InvalidStreamId> {
        if arg.len() > 127 {
            return Err(InvalidStreamId);
        }
        let s = match memchr::memchr(0, arg) {
            Some(nul) => &arg[..nul],
            None => arg,
        };
        if s == b"-" || s == b"+" {
            if syntax.strict {
                return Err(InvalidStreamId);
            }
            return Ok(ParsedId::Id(if s == b"-" {
                StreamId::MIN
            } else {
                StreamId::MAX
            }));
        }
        let (ms_part, seq_part) = match memchr::memchr(b'-', s) {
            Some(dash) => (&s[..dash], Some(&s[dash + 1..])),
            None => (s, None),
        };
        let ms = string2ull(ms_part).ok_or(InvalidStreamId)?;
        match seq_part {
            None => Ok(ParsedId::Id(StreamId::new(ms, syntax.missing_seq))),
            Some(b"*") if syntax.allow_auto_seq => Ok(ParsedId::AutoSeq(ms)),
            Some(seq) => {
                let seq = string2ull(seq).ok_or(InvalidStreamId)?;
                Ok(ParsedId::Id(StreamId::new(ms, seq)))
            }
        }
    }

    /// Parses a complete ID (no `<ms>-*`), as most commands do.
    pub fn parse_id(arg: &[u8], syntax: IdSyntax) -> Result<StreamId, InvalidStreamId> {
        match StreamId::parse(
            arg,
            IdSyntax {
                allow_auto_seq: false,
                ..syntax
            },
        )? {
            ParsedId::Id(id) => Ok(id),
            ParsedId::AutoSeq(_) => Err(InvalidStreamId),
        }
    }

    /// The `<ms>-<seq>` text, into a stack buffer (at most 41 bytes).
    pub fn format(self) -> FormattedId {
        let mut out = FormattedId {
            buf: [0; 41],
            len: 0,
        };
        out.push_u64(self.ms);
        out.buf[out.len] = b'-';
        out.len += 1;
        out.push_u64(self.seq);
        out
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An ID's text, without allocating ([`StreamId::format`]).
#[derive(Clone, Copy)]
pub struct FormattedId {
    buf: [u8; 41],
    len: usize,
}

impl FormattedId {
    fn push_u64(&mut self, mut v: u64) {
        let mut tmp = [0u8; 20];
        let mut n = 0;
        loop {
            tmp[n] = b'0' + (v % 10) as u8;
            v /= 10;
            n += 1;
            if v == 0 {
                break;
            }
        }
        for i in 0..n {
            self.buf[self.len + i] = tmp[n - 1 - i];
        }
        self.len += n;
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::ops::Deref for FormattedId {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str, syn: IdSyntax) -> Result<ParsedId, InvalidStreamId> {
        StreamId::parse(s.as_bytes(), syn)
    }

    #[test]
    fn parse_forms_match_stream_generic_parse_id() {
        let r = IdSyntax::range(0);
        let id = |ms, seq| Ok(ParsedId::Id(StreamId::new(ms, seq)));
        assert_eq!(p("-", r), id(0, 0));
        assert_eq!(p("+", r), id(u64::MAX, u64::MAX));
        assert_eq!(p("5", r), id(5, 0));
        assert_eq!(p("5", IdSyntax::range(u64::MAX)), id(5, u64::MAX));
        assert_eq!(p("5-3", r), id(5, 3));
        assert_eq!(
            p("18446744073709551615-18446744073709551615", r),
            id(u64::MAX, u64::MAX)
        );
        // strtoull's leniency, reached when string2ll refuses.
        assert_eq!(p("007-01", r), id(7, 1));
        assert_eq!(p(" 7-+1", r), id(7, 1));
        assert_eq!(p("-0", r), Err(InvalidStreamId)); // ms part empty
        assert_eq!(p("1--1", r), Err(InvalidStreamId)); // string2ll takes "-1": negative
        assert_eq!(p("1--01", r), id(1, u64::MAX)); // strtoull negates
        assert_eq!(p("1-2\0junk", r), id(1, 2));
        for bad in [
            "",
            "a",
            "1-",
            "1-a",
            "1-2-3",
            "18446744073709551616",
            "1 ",
            "*",
            "1-*",
        ] {
            assert_eq!(p(bad, r), Err(InvalidStreamId), "{bad:?}");
        }
        assert_eq!(p(&"1".repeat(128), r), Err(InvalidStreamId));
        assert_eq!(p("-", IdSyntax::strict(0)), Err(InvalidStreamId));
        assert_eq!(p("+", IdSyntax::XADD), Err(InvalidStreamId));
        assert_eq!(p("7-*", IdSyntax::XADD), Ok(ParsedId::AutoSeq(7)));
        assert_eq!(p("7", IdSyntax::XADD), id(7, 0));
        assert_eq!(
            StreamId::parse_id(b"7-*", IdSyntax::XADD),
            Err(InvalidStreamId)
        );
    }

    #[test]
    fn incr_decr_and_format() {
        assert_eq!(StreamId::new(1, u64::MAX).incr(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::new(2, 0).decr(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(StreamId::new(3, 4).incr(), Some(StreamId::new(3, 5)));
        assert_eq!(&*StreamId::new(12, 0).format(), b"12-0");
        assert_eq!(
            &*StreamId::MAX.format(),
            b"18446744073709551615-18446744073709551615"
        );
        assert_eq!(StreamId::new(1, 2).to_string(), "1-2");
    }
}
