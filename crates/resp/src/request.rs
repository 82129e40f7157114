//! The server-side request decoder.
//!
//! Requests come in two shapes, as in Redis: multibulk (`*N\r\n$len\r\n...`)
//! and inline (a line of space-separated words, as typed into telnet). The
//! decoder returns the arguments as ranges of the caller's buffer, so the
//! hot path copies nothing. Its state survives an incomplete read: the next
//! call resumes where the last stopped, which keeps a huge command linear in
//! its size however it is split across reads.

use crate::parse_i64;
use memchr::memchr;

/// Longest inline request or multibulk/bulk header line, as Redis's
/// `PROTO_INLINE_MAX_SIZE`.
pub const INLINE_MAX: usize = 64 * 1024;

/// A protocol violation. The message is Redis's text after `ERR `; the
/// server replies with it and closes the connection after the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(msg: &str) -> Self {
        ProtocolError(format!("Protocol error: {msg}"))
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// The arguments of one decoded command: byte slices of a buffer the
/// caller owns (or of the decoder's scratch buffer for inline commands).
#[derive(Clone, Copy)]
pub struct Args<'a> {
    buf: &'a [u8],
    ranges: &'a [(usize, usize)],
}

impl<'a> Args<'a> {
    /// Builds arguments over `buf` from `(start, len)` ranges.
    pub fn new(buf: &'a [u8], ranges: &'a [(usize, usize)]) -> Self {
        Args { buf, ranges }
    }
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// The i-th argument. Panics when out of range, like slice indexing:
    /// command arity is checked before any handler runs.
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (s, l) = self.ranges[i];
        &self.buf[s..s + l]
    }
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let buf = self.buf;
        self.ranges.iter().map(move |&(s, l)| &buf[s..s + l])
    }
    /// The arguments from `i` on.
    pub fn skip(&self, i: usize) -> Args<'a> {
        Args {
            buf: self.buf,
            ranges: &self.ranges[i.min(self.ranges.len())..],
        }
    }
    /// The first `n` arguments (all of them when there are fewer).
    pub fn take(&self, n: usize) -> Args<'a> {
        Args {
            buf: self.buf,
            ranges: &self.ranges[..n.min(self.ranges.len())],
        }
    }
    /// The arguments as (start, length) in the buffer they borrow.
    pub fn ranges(&self) -> impl ExactSizeIterator<Item = (usize, usize)> + 'a {
        self.ranges.iter().copied()
    }
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(|a| a.to_vec()).collect()
    }
}

impl std::fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|a| String::from_utf8_lossy(a).into_owned()))
            .finish()
    }
}

/// Limits the decoder enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: usize,
    /// Whether the client has authenticated: unauthenticated clients may
    /// only send small commands (Redis 7's defence against memory abuse).
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            authenticated: true,
        }
    }
}

/// What kind of request is being decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between commands.
    Idle,
    /// Inside a multibulk: this many bulks are still to come.
    Multibulk { remaining: usize },
}

/// A resumable decoder of client requests. One per connection.
#[derive(Debug)]
pub struct RequestDecoder {
    state: State,
    /// Parse position relative to the start of the current command.
    pos: usize,
    /// Argument ranges of the current multibulk, relative to its start.
    ranges: Vec<(usize, usize)>,
    /// Inline arguments are unescaped into this buffer.
    inline_buf: Vec<u8>,
    inline: bool,
    /// The number of buffered bytes the next step needs (a hint to size the
    /// read buffer once for a large bulk instead of doubling it).
    wanted: usize,
}

impl Default for RequestDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// One decoded command, borrowed from the buffer and the decoder.
pub struct Decoded<'a> {
    pub args: Args<'a>,
    /// Bytes of the input the command occupied.
    pub consumed: usize,
}

impl RequestDecoder {
    pub fn new() -> Self {
        RequestDecoder {
            state: State::Idle,
            pos: 0,
            ranges: Vec::new(),
            inline_buf: Vec::new(),
            inline: false,
            wanted: 0,
        }
    }

    /// Bytes the buffer must hold (from the command start) before decoding
    /// can progress; 0 when unknown.
    pub fn wanted(&self) -> usize {
        self.wanted
    }

    /// Forgets a partly decoded command: the next `decode` starts afresh
    /// at the start of the buffer it is given (a reader that moved the
    /// command's bytes elsewhere decodes them again there).
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.wanted = 0;
    }

    /// True when a command is partly decoded.
    pub fn in_progress(&self) -> bool {
        self.state != State::Idle
    }

    /// Decodes the next command from `buf`, which must start where the
    /// previous command ended (and, while a command is in progress, hold the
    /// same bytes as before plus any new ones). Returns `Ok(None)` when more
    /// bytes are needed; empty commands (`*0`, blank lines) are consumed and
    /// reported with no arguments.
    pub fn decode<'a>(
        &'a mut self,
        buf: &'a [u8],
        limits: Limits,
    ) -> Result<Option<Decoded<'a>>, ProtocolError> {
        if self.state == State::Idle {
            self.pos = 0;
            self.ranges.clear();
            self.inline = false;
            self.wanted = 0;
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first != b'*' {
                return self.decode_inline(buf);
            }
            let (nl, parsed) = match short_header(buf, b'*') {
                Some((nl, n)) => (nl, Some(n as i64)),
                None => {
                    let Some(nl) = memchr(b'\r', buf) else {
                        if buf.len() > INLINE_MAX {
                            return Err(ProtocolError::new("too big mbulk count string"));
                        }
                        return Ok(None);
                    };
                    (nl, None)
                }
            };
            if nl > INLINE_MAX {
                return Err(ProtocolError::new("too big mbulk count string"));
            }
            if buf.len() < nl + 2 {
                return Ok(None);
            }
            let n = match parsed.or_else(|| parse_i64(&buf[1..nl])) {
                Some(n) if n <= i32::MAX as i64 => n,
                _ => return Err(ProtocolError::new("invalid multibulk length")),
            };
            if !limits.authenticated && n > 10 {
                return Err(ProtocolError::new("unauthenticated multibulk length"));
            }
            self.pos = nl + 2;
            if n <= 0 {
                let consumed = self.pos;
                return Ok(Some(Decoded {
                    args: Args::new(buf, &[]),
                    consumed,
                }));
            }
            self.ranges.reserve((n as usize).min(1024));
            self.state = State::Multibulk {
                remaining: n as usize,
            };
        }
        let State::Multibulk { mut remaining } = self.state else {
            unreachable!()
        };
        while remaining > 0 {
            let rest = &buf[self.pos.min(buf.len())..];
            let Some(&first) = rest.first() else {
                self.state = State::Multibulk { remaining };
                return Ok(None);
            };
            // Most headers are `$` and a few digits: read them in one pass.
            let header = match short_header(rest, b'$') {
                Some((nl, len)) => Some((nl, Some(len as i64))),
                None => memchr(b'\r', rest).map(|nl| (nl, None)),
            };
            // As Redis: the header line must be complete (or too long)
            // before its first byte is judged.
            let Some((nl, parsed)) = header else {
                if rest.len() > INLINE_MAX {
                    self.state = State::Idle;
                    return Err(ProtocolError::new("too big bulk count string"));
                }
                self.state = State::Multibulk { remaining };
                return Ok(None);
            };
            if first != b'$' {
                self.state = State::Idle;
                return Err(ProtocolError(format!(
                    "Protocol error: expected '$', got '{}'",
                    first as char
                )));
            }
            if nl > INLINE_MAX {
                self.state = State::Idle;
                return Err(ProtocolError::new("too big bulk count string"));
            }
            let len = match parsed.or_else(|| parse_i64(&rest[1..nl])) {
                Some(l) if l >= 0 && (l as u64) <= limits.max_bulk_len as u64 => l as usize,
                _ => {
                    self.state = State::Idle;
                    return Err(ProtocolError::new("invalid bulk length"));
                }
            };
            if !limits.authenticated && len > 16384 {
                self.state = State::Idle;
                return Err(ProtocolError::new("unauthenticated bulk length"));
            }
            let start = self.pos + nl + 2;
            let end = start + len + 2;
            if buf.len() < end {
                self.wanted = end;
                self.state = State::Multibulk { remaining };
                return Ok(None);
            }
            self.ranges.push((start, len));
            self.pos = end;
            remaining -= 1;
        }
        self.state = State::Idle;
        self.wanted = 0;
        let consumed = self.pos;
        Ok(Some(Decoded {
            args: Args::new(buf, &self.ranges),
            consumed,
        }))
    }

    fn decode_inline<'a>(
        &'a mut self,
        buf: &'a [u8],
    ) -> Result<Option<Decoded<'a>>, ProtocolError> {
        let Some(nl) = memchr(b'\n', buf) else {
            if buf.len() > INLINE_MAX {
                return Err(ProtocolError::new("too big inline request"));
            }
            return Ok(None);
        };
        if nl > INLINE_MAX {
            return Err(ProtocolError::new("too big inline request"));
        }
        let mut line = &buf[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        self.inline_buf.clear();
        self.ranges.clear();
        if split_args(line, &mut self.inline_buf, &mut self.ranges).is_err() {
            return Err(ProtocolError::new("unbalanced quotes in request"));
        }
        self.inline = true;
        Ok(Some(Decoded {
            args: Args::new(&self.inline_buf, &self.ranges),
            consumed: nl + 1,
        }))
    }
}

/// A header line `<kind><digits>\r` with 1 to 9 digits and no leading
/// zero (what [`parse_i64`] accepts of them): the position of its `\r`
/// and its number. `None` for anything else, which the general path then
/// reads (and judges).
#[inline]
fn short_header(rest: &[u8], kind: u8) -> Option<(usize, usize)> {
    if rest.first() != Some(&kind) {
        return None;
    }
    let mut n = 0usize;
    for (i, &c) in rest.iter().enumerate().skip(1).take(10) {
        match c {
            b'0'..=b'9' if !(i == 2 && n == 0) => n = n * 10 + (c - b'0') as usize,
            b'\r' if i > 1 => return Some((i, n)),
            _ => return None,
        }
    }
    None
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c)
}

/// A quoted argument that is not closed (or not followed by a space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnbalancedQuotes;

/// Splits a line into arguments exactly as Redis's `sdssplitargs`: words
/// separated by spaces, `"double quotes"` with `\xHH \n \r \t \b \a \\ \"`
/// escapes, `'single quotes'` with only `\'`. A closing quote must be
/// followed by a space or the end of the line. Unescaped bytes go to `out`,
/// `(start, len)` ranges to `ranges`.
pub fn split_args(
    line: &[u8],
    out: &mut Vec<u8>,
    ranges: &mut Vec<(usize, usize)>,
) -> Result<(), UnbalancedQuotes> {
    // Redis reads the line as a C string: a NUL ends it.
    let line = match memchr(0, line) {
        Some(z) => &line[..z],
        None => line,
    };
    let mut p = 0;
    let n = line.len();
    loop {
        while p < n && is_space(line[p]) {
            p += 1;
        }
        if p >= n {
            return Ok(());
        }
        let start = out.len();
        let mut inq = false;
        let mut insq = false;
        loop {
            if inq {
                if p >= n {
                    return Err(UnbalancedQuotes);
                }
                if line[p] == b'\\'
                    && p + 3 < n
                    && line[p + 1] == b'x'
                    && hex_val(line[p + 2]).is_some()
                    && hex_val(line[p + 3]).is_some()
                {
                    out.push(hex_val(line[p + 2]).unwrap() * 16 + hex_val(line[p + 3]).unwrap());
                    p += 3;
                } else if line[p] == b'\\' && p + 1 < n {
                    p += 1;
                    out.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        c => c,
                    });
                } else if line[p] == b'"' {
                    if p + 1 < n && !is_space(line[p + 1]) {
                        return Err(UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else {
                    out.push(line[p]);
                }
            } else if insq {
                if p >= n {
                    return Err(UnbalancedQuotes);
                }
                if line[p] == b'\\' && p + 1 < n && line[p + 1] == b'\'' {
                    p += 1;
                    out.push(b'\'');
                } else if line[p] == b'\'' {
                    if p + 1 < n && !is_space(line[p + 1]) {
                        return Err(UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else {
                    out.push(line[p]);
                }
            } else {
                if p >= n {
                    break;
                }
                match line[p] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => out.push(c),
                }
            }
            p += 1;
        }
        ranges.push((start, out.len() - start));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut d = RequestDecoder::new();
        let mut off = 0;
        let mut out = Vec::new();
        while let Some(c) = d.decode(&input[off..], Limits::default())? {
            if !c.args.is_empty() {
                out.push(c.args.to_vecs());
            }
            off += c.consumed;
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_pipeline() {
        let cmds = decode_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap();
        assert_eq!(
            cmds,
            vec![vec![b"PING".to_vec()], vec![b"GET".to_vec(), b"k".to_vec()]]
        );
    }

    #[test]
    fn binary_safe_bulk() {
        let cmds = decode_all(b"*2\r\n$3\r\nGET\r\n$4\r\n\r\n\0x\r\n").unwrap();
        assert_eq!(cmds[0][1], b"\r\n\0x");
    }

    #[test]
    fn resumes_byte_by_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\n";
        let mut d = RequestDecoder::new();
        for end in 0..input.len() {
            assert!(d
                .decode(&input[..end], Limits::default())
                .unwrap()
                .is_none());
        }
        let c = d.decode(input, Limits::default()).unwrap().unwrap();
        assert_eq!(c.consumed, input.len());
        assert_eq!(c.args.get(2), b"world");
    }

    #[test]
    fn wanted_hint_sizes_large_bulk() {
        let mut d = RequestDecoder::new();
        assert!(d
            .decode(b"*1\r\n$1000000\r\nab", Limits::default())
            .unwrap()
            .is_none());
        assert_eq!(d.wanted(), 4 + 10 + 1_000_000 + 2);
    }

    #[test]
    fn inline_commands_with_quotes() {
        let cmds = decode_all(b"set \"a\\x41\\n\" 'b\\'c'\r\nping\n\r\n").unwrap();
        assert_eq!(
            cmds[0],
            vec![b"set".to_vec(), b"aA\n".to_vec(), b"b'c".to_vec()]
        );
        assert_eq!(cmds[1], vec![b"ping".to_vec()]);
    }

    #[test]
    fn protocol_errors_have_redis_texts() {
        let e = |i: &[u8]| decode_all(i).unwrap_err().0;
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(e(b"*1\r\nx\r\n"), "Protocol error: expected '$', got 'x'");
        assert_eq!(e(b"*1\r\n$-1\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(e(b"*1\r\n$abc\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(
            e(b"set \"a\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            e(b"set \"a\"b\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        let big = vec![b'a'; INLINE_MAX + 10];
        assert_eq!(e(&big), "Protocol error: too big inline request");
        let mut big = b"*1\r\n$".to_vec();
        big.extend(std::iter::repeat_n(b'1', INLINE_MAX + 10));
        assert_eq!(e(&big), "Protocol error: too big bulk count string");
    }

    #[test]
    fn bulk_over_limit_is_rejected() {
        let mut d = RequestDecoder::new();
        let lim = Limits {
            max_bulk_len: 10,
            authenticated: true,
        };
        assert!(d.decode(b"*1\r\n$11\r\n", lim).is_err());
    }

    #[test]
    fn headers_read_in_one_pass_or_the_general_way_agree() {
        let e = |i: &[u8]| decode_all(i).unwrap_err().0;
        // Leading zeros, signs and spaces are not numbers to Redis.
        assert_eq!(
            e(b"*1\r\n$01\r\nx\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$+1\r\nx\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$ 1\r\nx\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$\r\nx\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*01\r\n$1\r\nx\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(e(b"*\r\n"), "Protocol error: invalid multibulk length");
        // An empty bulk, and lengths past nine digits (the general way).
        assert_eq!(
            decode_all(b"*1\r\n$0\r\n\r\n").unwrap(),
            vec![vec![Vec::new()]]
        );
        let mut d = RequestDecoder::new();
        let lim = Limits {
            max_bulk_len: 2_000_000_000,
            authenticated: true,
        };
        assert!(d.decode(b"*1\r\n$1000000000\r\n", lim).unwrap().is_none());
        assert_eq!(d.wanted(), 4 + 13 + 1_000_000_000 + 2);
    }

    proptest::proptest! {
        /// Commands come back as they were sent, however the stream is cut.
        #[test]
        fn pipelines_decode_whatever_the_cuts(
            cmds in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 1..12),
                1..6),
            cuts in proptest::collection::vec(0usize..2000, 0..6),
        ) {
            let mut wire = Vec::new();
            for c in &cmds {
                wire.extend(format!("*{}\r\n", c.len()).bytes());
                for a in c {
                    wire.extend(format!("${}\r\n", a.len()).bytes());
                    wire.extend(a);
                    wire.extend(b"\r\n");
                }
            }
            // Feed it in pieces, as reads would.
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (wire.len() + 1)).collect();
            cuts.push(wire.len());
            cuts.sort_unstable();
            let mut d = RequestDecoder::new();
            let (mut start, mut got) = (0, Vec::new());
            for avail in cuts {
                while let Some(c) = d.decode(&wire[start..avail], Limits::default()).unwrap() {
                    got.push(c.args.to_vecs());
                    start += c.consumed;
                }
            }
            proptest::prop_assert_eq!(got, cmds);
        }

        /// A bulk header is read as `parse_i64` reads it, or refused.
        #[test]
        fn bulk_headers_are_parse_i64s(h in "[-+0-9 a]{0,12}") {
            let wire = format!("*1\r\n${h}\r\n");
            let mut d = RequestDecoder::new();
            let r = d.decode(wire.as_bytes(), Limits::default());
            match crate::parse_i64(h.as_bytes()) {
                Some(n) if (0..=512 * 1024 * 1024).contains(&n) => {
                    proptest::prop_assert!(matches!(r, Ok(None)));
                    proptest::prop_assert_eq!(d.wanted(), wire.len() + n as usize + 2);
                }
                _ => proptest::prop_assert!(r.is_err()),
            }
        }
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        assert_eq!(
            decode_all(b"*0\r\n*-1\r\n*1\r\n$1\r\nx\r\n").unwrap().len(),
            1
        );
    }
}
