//! A complete RESP2/RESP3 value with a decoder and an encoder: the client
//! side of the protocol (replication links, the benchmark tool, tests).
//! The server's hot path does not use it: it decodes requests with
//! [`crate::request`] and writes replies with [`crate::encode`].

use crate::parse_i64;
use memchr::memchr;

#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` or RESP3 `_`.
    Null,
    Array(Vec<Frame>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Push(Vec<Frame>),
    Double(f64),
    Boolean(bool),
    BigNumber(Vec<u8>),
    /// Format (3 bytes, e.g. `txt`) and text.
    Verbatim([u8; 3], Vec<u8>),
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// More bytes are needed.
    Incomplete,
    /// The bytes are not RESP.
    Invalid(&'static str),
}

/// Nesting deeper than this is refused, so hostile input cannot exhaust
/// the stack.
const MAX_DEPTH: usize = 128;

impl Frame {
    /// Decodes one frame from the start of `buf`, returning it and the
    /// number of bytes it took.
    pub fn decode(buf: &[u8]) -> Result<(Frame, usize), FrameError> {
        let mut pos = 0;
        let f = decode_at(buf, &mut pos, 0)?;
        Ok((f, pos))
    }

    /// Appends the frame's RESP encoding (RESP3 types in RESP3 form).
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn line(out: &mut Vec<u8>, p: u8, s: &[u8]) {
            out.push(p);
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        fn head(out: &mut Vec<u8>, p: u8, n: usize) {
            line(out, p, n.to_string().as_bytes());
        }
        match self {
            Frame::Simple(s) => line(out, b'+', s),
            Frame::Error(s) => line(out, b'-', s),
            Frame::Integer(i) => line(out, b':', i.to_string().as_bytes()),
            Frame::Bulk(b) => {
                head(out, b'$', b.len());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Null => out.extend_from_slice(b"_\r\n"),
            Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
                let p = match self {
                    Frame::Array(_) => b'*',
                    Frame::Set(_) => b'~',
                    _ => b'>',
                };
                head(out, p, v.len());
                for f in v {
                    f.encode(out);
                }
            }
            Frame::Map(v) => {
                head(out, b'%', v.len());
                for (k, val) in v {
                    k.encode(out);
                    val.encode(out);
                }
            }
            Frame::Double(d) => line(out, b',', crate::encode::format_double(*d).as_bytes()),
            Frame::Boolean(b) => line(out, b'#', if *b { b"t" } else { b"f" }),
            Frame::BigNumber(n) => line(out, b'(', n),
            Frame::Verbatim(fmt, s) => {
                head(out, b'=', s.len() + 4);
                out.extend_from_slice(fmt);
                out.push(b':');
                out.extend_from_slice(s);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// Encodes a command as a multibulk of bulk strings.
    pub fn command<T: AsRef<[u8]>>(args: &[T]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::encode::array(&mut out, args.len());
        for a in args {
            crate::encode::bulk(&mut out, a.as_ref());
        }
        out
    }

    /// The bytes of a simple, bulk, error or verbatim string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Frame::Simple(s) | Frame::Bulk(s) | Frame::Error(s) | Frame::Verbatim(_, s) => Some(s),
            _ => None,
        }
    }
}

fn read_line<'a>(buf: &'a [u8], pos: &mut usize) -> Result<&'a [u8], FrameError> {
    let rest = &buf[*pos..];
    let nl = memchr(b'\r', rest).ok_or(FrameError::Incomplete)?;
    if rest.len() < nl + 2 {
        return Err(FrameError::Incomplete);
    }
    if rest[nl + 1] != b'\n' {
        return Err(FrameError::Invalid("expected CRLF"));
    }
    *pos += nl + 2;
    Ok(&rest[..nl])
}

fn read_len(buf: &[u8], pos: &mut usize) -> Result<i64, FrameError> {
    let l = read_line(buf, pos)?;
    let n = parse_i64(l).ok_or(FrameError::Invalid("invalid length"))?;
    if n < -1 {
        return Err(FrameError::Invalid("invalid length"));
    }
    Ok(n)
}

fn decode_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Frame, FrameError> {
    if depth > MAX_DEPTH {
        return Err(FrameError::Invalid("nesting too deep"));
    }
    let &t = buf.get(*pos).ok_or(FrameError::Incomplete)?;
    *pos += 1;
    Ok(match t {
        b'+' => Frame::Simple(read_line(buf, pos)?.to_vec()),
        b'-' => Frame::Error(read_line(buf, pos)?.to_vec()),
        b':' => Frame::Integer(
            parse_i64(read_line(buf, pos)?).ok_or(FrameError::Invalid("invalid integer"))?,
        ),
        b'(' => Frame::BigNumber(read_line(buf, pos)?.to_vec()),
        b'_' => {
            read_line(buf, pos)?;
            Frame::Null
        }
        b'#' => match read_line(buf, pos)? {
            b"t" => Frame::Boolean(true),
            b"f" => Frame::Boolean(false),
            _ => return Err(FrameError::Invalid("invalid boolean")),
        },
        b',' => {
            let l = read_line(buf, pos)?;
            let s = std::str::from_utf8(l).map_err(|_| FrameError::Invalid("invalid double"))?;
            Frame::Double(match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => s
                    .parse()
                    .map_err(|_| FrameError::Invalid("invalid double"))?,
            })
        }
        b'$' | b'=' => {
            let n = read_len(buf, pos)?;
            if n < 0 {
                return Ok(Frame::Null);
            }
            let n = n as usize;
            if buf.len() - *pos < n + 2 {
                return Err(FrameError::Incomplete);
            }
            let body = &buf[*pos..*pos + n];
            if &buf[*pos + n..*pos + n + 2] != b"\r\n" {
                return Err(FrameError::Invalid("bulk not terminated by CRLF"));
            }
            *pos += n + 2;
            if t == b'=' {
                if n < 4 || body[3] != b':' {
                    return Err(FrameError::Invalid("invalid verbatim string"));
                }
                Frame::Verbatim([body[0], body[1], body[2]], body[4..].to_vec())
            } else {
                Frame::Bulk(body.to_vec())
            }
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = read_len(buf, pos)?;
            if n < 0 {
                return Ok(Frame::Null);
            }
            // Every element takes at least 3 bytes: refuse absurd counts
            // before allocating for them.
            if (n as u64) > (buf.len() as u64) {
                return Err(FrameError::Incomplete);
            }
            let n = n as usize;
            if t == b'%' {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = decode_at(buf, pos, depth + 1)?;
                    let val = decode_at(buf, pos, depth + 1)?;
                    v.push((k, val));
                }
                Frame::Map(v)
            } else {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(decode_at(buf, pos, depth + 1)?);
                }
                match t {
                    b'*' => Frame::Array(v),
                    b'~' => Frame::Set(v),
                    _ => Frame::Push(v),
                }
            }
        }
        _ => return Err(FrameError::Invalid("unknown type byte")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_frame() -> impl Strategy<Value = Frame> {
        let leaf = prop_oneof![
            proptest::collection::vec(
                any::<u8>().prop_filter("no CR/LF", |c| *c != b'\r' && *c != b'\n'),
                0..20
            )
            .prop_map(Frame::Simple),
            any::<i64>().prop_map(Frame::Integer),
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(Frame::Bulk),
            Just(Frame::Null),
            any::<bool>().prop_map(Frame::Boolean),
            (-1e300f64..1e300).prop_map(Frame::Double),
            proptest::collection::vec(any::<u8>(), 0..16).prop_map(|s| Frame::Verbatim(*b"txt", s)),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Frame::Array),
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Frame::Set),
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Frame::Push),
                proptest::collection::vec((inner.clone(), inner), 0..4).prop_map(Frame::Map),
            ]
        })
    }

    proptest! {
        #[test]
        fn frames_round_trip(f in arb_frame()) {
            let mut out = Vec::new();
            f.encode(&mut out);
            let (g, n) = Frame::decode(&out).unwrap();
            prop_assert_eq!(n, out.len());
            prop_assert_eq!(g, f);
            for cut in 0..out.len() {
                prop_assert_eq!(Frame::decode(&out[..cut]).unwrap_err(), FrameError::Incomplete);
            }
        }

        #[test]
        fn commands_round_trip_through_request_decoder(
            cmds in proptest::collection::vec(proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6), 1..10),
            split in 1usize..50,
        ) {
            let mut wire = Vec::new();
            for c in &cmds { wire.extend(Frame::command(c)); }
            // Feed the wire in pieces of `split` bytes, as reads would.
            let mut dec = crate::RequestDecoder::new();
            let mut got = Vec::new();
            let mut start = 0;
            let mut avail = 0;
            while got.len() < cmds.len() {
                avail = (avail + split).min(wire.len());
                while let Some(d) = dec.decode(&wire[start..avail], Default::default()).unwrap() {
                    got.push(d.args.to_vecs());
                    start += d.consumed;
                }
            }
            prop_assert_eq!(got, cmds);
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Frame::decode(&bytes);
            let mut dec = crate::RequestDecoder::new();
            let mut off = 0;
            while let Ok(Some(d)) = dec.decode(&bytes[off..], Default::default()) {
                off += d.consumed;
                if off >= bytes.len() { break; }
            }
        }
    }
}
