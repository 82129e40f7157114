//! Reply encoding. Every writer appends to the connection's output buffer;
//! the ones whose shape differs between RESP2 and RESP3 take the
//! connection's [`Protocol`], so a command handler writes one reply and the
//! client gets the form it asked for with `HELLO`.

/// The protocol a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    pub fn is_resp3(self) -> bool {
        self == Protocol::Resp3
    }
}

#[inline]
fn len_line(out: &mut Vec<u8>, prefix: u8, n: i64) {
    out.push(prefix);
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `+OK`-style status. The text must not hold `\r` or `\n`.
#[inline]
pub fn simple(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'+');
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

#[inline]
pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

/// An error reply. `msg` is the full text after `-` (e.g. `ERR syntax error`);
/// newlines in it are replaced by spaces, as Redis does, so it cannot break
/// the protocol.
pub fn error(out: &mut Vec<u8>, msg: &str) {
    error_bytes(out, msg.as_bytes())
}

/// An error whose text may hold any bytes (echoed user input, as Redis's
/// "unknown command" errors do); CR and LF become spaces.
pub fn error_bytes(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    out.extend(
        msg.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
    );
    out.extend_from_slice(b"\r\n");
}

#[inline]
pub fn integer(out: &mut Vec<u8>, n: i64) {
    len_line(out, b':', n);
}

#[inline]
pub fn bulk(out: &mut Vec<u8>, s: &[u8]) {
    len_line(out, b'$', s.len() as i64);
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

/// A bulk string of an integer's decimal text.
pub fn bulk_int(out: &mut Vec<u8>, n: i64) {
    let mut b = itoa::Buffer::new();
    bulk(out, b.format(n).as_bytes());
}

/// The null bulk string (`$-1` in RESP2, `_` in RESP3).
#[inline]
pub fn null(out: &mut Vec<u8>, p: Protocol) {
    match p {
        Protocol::Resp2 => out.extend_from_slice(b"$-1\r\n"),
        Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
    }
}

/// The null array (`*-1` in RESP2, `_` in RESP3).
pub fn null_array(out: &mut Vec<u8>, p: Protocol) {
    match p {
        Protocol::Resp2 => out.extend_from_slice(b"*-1\r\n"),
        Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
    }
}

#[inline]
pub fn array(out: &mut Vec<u8>, n: usize) {
    len_line(out, b'*', n as i64);
}

/// A map of `n` pairs: `%n` in RESP3, a flat array of `2n` in RESP2.
pub fn map(out: &mut Vec<u8>, p: Protocol, n: usize) {
    match p {
        Protocol::Resp2 => len_line(out, b'*', 2 * n as i64),
        Protocol::Resp3 => len_line(out, b'%', n as i64),
    }
}

/// A set of `n` members: `~n` in RESP3, an array in RESP2.
pub fn set(out: &mut Vec<u8>, p: Protocol, n: usize) {
    match p {
        Protocol::Resp2 => len_line(out, b'*', n as i64),
        Protocol::Resp3 => len_line(out, b'~', n as i64),
    }
}

/// Out-of-band push data: `>n` in RESP3, an array in RESP2.
pub fn push(out: &mut Vec<u8>, p: Protocol, n: usize) {
    match p {
        Protocol::Resp2 => len_line(out, b'*', n as i64),
        Protocol::Resp3 => len_line(out, b'>', n as i64),
    }
}

/// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
pub fn boolean(out: &mut Vec<u8>, p: Protocol, v: bool) {
    match p {
        Protocol::Resp2 => integer(out, v as i64),
        Protocol::Resp3 => out.extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" }),
    }
}

/// A double: `,<text>` in RESP3, a bulk string in RESP2. The text is the one
/// Redis produces (`%.17g`, with `inf`/`-inf`).
pub fn double(out: &mut Vec<u8>, p: Protocol, v: f64) {
    let text = format_double(v);
    match p {
        Protocol::Resp2 => bulk(out, text.as_bytes()),
        Protocol::Resp3 => {
            out.push(b',');
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A verbatim string: `=len\r\ntxt:...` in RESP3, a bulk string in RESP2.
pub fn verbatim(out: &mut Vec<u8>, p: Protocol, format: &str, s: &[u8]) {
    match p {
        Protocol::Resp2 => bulk(out, s),
        Protocol::Resp3 => {
            len_line(out, b'=', (s.len() + 4) as i64);
            out.extend_from_slice(format.as_bytes());
            out.push(b':');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A big number: `(digits` in RESP3, a bulk string in RESP2.
pub fn big_number(out: &mut Vec<u8>, p: Protocol, digits: &str) {
    match p {
        Protocol::Resp2 => bulk(out, digits.as_bytes()),
        Protocol::Resp3 => {
            out.push(b'(');
            out.extend_from_slice(digits.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A RESP3 attribute-free array of bulk strings.
pub fn bulk_array<'a>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    array(out, items.len());
    for i in items {
        bulk(out, i);
    }
}

/// Formats a double as C's `printf("%.17g")` does, which is what Redis uses
/// for scores and `INCRBYFLOAT`-free double replies (`inf`, `-inf`, `nan`).
pub fn format_double(v: f64) -> String {
    format_g(v, 17)
}

/// C's `%.<prec>g` for finite and infinite doubles.
/// `Some(i)` when `%.{prec}g` of `v` prints the integer `i` (an integral value of at most
/// `prec` digits, `-0` excepted): the common case, which callers print with `itoa` rather
/// than Rust's exact formatting (slow at 17 digits).
pub fn integral_g(v: f64, prec: usize) -> Option<i64> {
    let integral = v == v.trunc() && v.abs() < 10f64.powi(prec.clamp(1, 15) as i32);
    (integral && !(v == 0.0 && v.is_sign_negative())).then_some(v as i64)
}

pub fn format_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let prec = prec.max(1);
    if let Some(i) = integral_g(v, prec) {
        return itoa::Buffer::new().format(i).to_string();
    }
    // Scientific form with prec-1 fractional digits gives the exponent
    // after rounding, which decides between %e and %f styles.
    let sci = format!("{:.*e}", prec - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    if exp < -4 || exp >= prec as i32 {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_g_matches_printf() {
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.0e-5), "1.0000000000000001e-05");
        assert_eq!(
            format_double(123456789012345678.0),
            "1.2345678901234568e+17"
        );
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_g(10.5, 17), "10.5");
        assert_eq!(format_g(0.0001, 17), "0.0001");
        // Integers: printed as themselves up to `prec` digits (printf's
        // results), in %e form past them.
        assert_eq!(format_g(1000.0, 17), "1000");
        assert_eq!(format_g(-123456789012345.0, 17), "-123456789012345");
        assert_eq!(format_g(1e15, 17), "1000000000000000");
        assert_eq!(format_g(99999999999999.0, 14), "99999999999999");
        assert_eq!(format_g(1e14, 14), "1e+14");
        assert_eq!(format_g(-0.0, 17), "-0");
        assert_eq!(format_g(123456.0, 3), "1.23e+05");
        assert_eq!(format_g(999.0, 3), "999");
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        let mut o = Vec::new();
        map(&mut o, Protocol::Resp2, 2);
        map(&mut o, Protocol::Resp3, 2);
        null(&mut o, Protocol::Resp2);
        null(&mut o, Protocol::Resp3);
        double(&mut o, Protocol::Resp3, 1.5);
        boolean(&mut o, Protocol::Resp3, true);
        assert_eq!(o, b"*4\r\n%2\r\n$-1\r\n_\r\n,1.5\r\n#t\r\n");
    }

    #[test]
    fn error_cannot_break_protocol() {
        let mut o = Vec::new();
        error(&mut o, "ERR a\r\nb");
        assert_eq!(o, b"-ERR a  b\r\n");
    }
}
