//! RESP2/RESP3 for ferrokv: request decoding, reply encoding and a full
//! frame codec. Pure: no I/O, no allocation per request on the hot path.
//!
//! # Layout
//! - [`request`]: the server-side decoder. It turns bytes a client sent into
//!   commands whose arguments are *ranges of the caller's buffer* (no copy
//!   until a value is stored). It is resumable: a command that arrives over
//!   many reads (a 100 MB bulk, a million-argument `MSET`) is parsed once, not
//!   re-scanned from its start on every read.
//! - [`encode`]: reply writers that append to an output `Vec<u8>`, choosing
//!   the RESP2 or RESP3 shape of a reply from the connection's [`Protocol`].
//! - [`frame`]: a complete RESP3 value type with a decoder and encoder, used by
//!   clients (replication links, benchmarks, tests) and for round-trip tests.
//!
//! Errors are a small enum: `Incomplete` is not an error (the decoder returns
//! `Ok(None)`), a protocol violation is [`ProtocolError`] carrying Redis's
//! exact message so the server can reply `-ERR Protocol error: ...` and close.
#![forbid(unsafe_code)]

pub mod encode;
pub mod frame;
pub mod request;

pub use encode::Protocol;
pub use frame::Frame;
pub use request::{Args, ProtocolError, RequestDecoder};

/// Parses a strict decimal `i64` the way Redis's `string2ll` does: an optional
/// `-`, no `+`, no leading zeros (except `0` itself), no spaces, no overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    if digits[0] == b'0' {
        return if digits.len() == 1 && !neg {
            Some(0)
        } else {
            None
        };
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_i64;

    #[test]
    fn parse_i64_is_strict_like_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"1a"), None);
    }
}
