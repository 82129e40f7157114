//! Replies ⇄ Lua values, by Redis's documented rules.
//!
//! A command's reply (RESP2 or RESP3, as `redis.setresp` chose) becomes:
//! integer → number; bulk → string; null bulk / null array → `false`;
//! array → table (RESP3 nulls inside leave holes); status → `{ok=...}`;
//! error → `{err=...}`; and, RESP3 only, map → `{map={...}}`, set →
//! `{set={member=true}}`, null → `nil`, boolean → boolean, double →
//! `{double=n}`, big number → `{big_number="..."}`, verbatim →
//! `{verbatim_string={format=..., string=...}}`; attributes are dropped.
//!
//! A script's return value becomes: string → bulk; number → integer
//! (truncated, as C's cast); boolean → `:1`/null (RESP2 script) or a
//! boolean (RESP3 script); table → error (`err`), status (`ok`), double,
//! big number, verbatim, map, set, else an array up to the first `nil`;
//! anything else → null.

use ferrokv_resp::encode;
use ferrokv_resp::Protocol;
use mlua::{Lua, Table, Value};

/// Deepest reply or return value converted (Redis's limit is its Lua
/// stack's; a self-referencing table must end somewhere).
pub const MAX_DEPTH: usize = 1000;

/// Parses one reply from `buf` into a Lua value; `true` with an error
/// reply (already converted to Redis's error table).
pub fn reply_to_lua(lua: &Lua, buf: &[u8]) -> mlua::Result<(Value, bool)> {
    let mut p = Parser { buf, pos: 0 };
    let is_err = buf.first() == Some(&b'-');
    let v = p.value(lua, 0)?;
    Ok((v, is_err))
}

struct Parser<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn bad() -> mlua::Error {
    mlua::Error::runtime("malformed reply")
}

impl Parser<'_> {
    fn line(&mut self) -> mlua::Result<&[u8]> {
        let rest = &self.buf[self.pos..];
        let end = memchr::memmem::find(rest, b"\r\n").ok_or_else(bad)?;
        self.pos += end + 2;
        Ok(&rest[..end])
    }

    fn int_line(&mut self) -> mlua::Result<i64> {
        let l = self.line()?;
        ferrokv_resp::parse_i64(l).ok_or_else(bad)
    }

    fn bytes(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let end = self.pos.checked_add(n).ok_or_else(bad)?;
        if end + 2 > self.buf.len() {
            return Err(bad());
        }
        let s = &self.buf[self.pos..end];
        self.pos = end + 2;
        Ok(s)
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        if depth > MAX_DEPTH {
            return Err(mlua::Error::runtime("reply nested too deeply"));
        }
        let Some(&kind) = self.buf.get(self.pos) else {
            return Err(bad());
        };
        self.pos += 1;
        Ok(match kind {
            b':' => Value::Number(self.int_line()? as f64),
            b'$' => {
                let n = self.int_line()?;
                if n < 0 {
                    Value::Boolean(false)
                } else {
                    Value::String(lua.create_string(self.bytes(n as usize)?)?)
                }
            }
            b'+' => {
                let s = self.line()?.to_vec();
                let t = lua.create_table()?;
                t.raw_set("ok", lua.create_string(&s)?)?;
                Value::Table(t)
            }
            b'-' => {
                let mut msg = b"-".to_vec();
                msg.extend_from_slice(self.line()?);
                let t = super::api::error_table_bytes(lua, &msg)?;
                // Counted when the command replied: not again if the
                // script returns it.
                t.raw_set("ignore_error_stats_update", true)?;
                Value::Table(t)
            }
            b'*' | b'>' => {
                let n = self.int_line()?;
                if n < 0 {
                    return Ok(Value::Boolean(false));
                }
                let t = lua.create_table()?;
                for i in 0..n {
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(i + 1, v)?;
                }
                Value::Table(t)
            }
            b'%' => {
                let n = self.int_line()?;
                let inner = lua.create_table()?;
                for _ in 0..n {
                    let k = self.value(lua, depth + 1)?;
                    let v = self.value(lua, depth + 1)?;
                    if k != Value::Nil {
                        inner.raw_set(k, v)?;
                    }
                }
                let t = lua.create_table()?;
                t.raw_set("map", inner)?;
                Value::Table(t)
            }
            b'~' => {
                let n = self.int_line()?;
                let inner = lua.create_table()?;
                for _ in 0..n {
                    let k = self.value(lua, depth + 1)?;
                    if k != Value::Nil {
                        inner.raw_set(k, true)?;
                    }
                }
                let t = lua.create_table()?;
                t.raw_set("set", inner)?;
                Value::Table(t)
            }
            b'_' => {
                self.line()?;
                Value::Nil
            }
            b'#' => Value::Boolean(self.line()? == b"t"),
            b',' => {
                let l = self.line()?;
                let s = std::str::from_utf8(l).map_err(|_| bad())?;
                let d = match s {
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    "nan" => f64::NAN,
                    s => s.parse::<f64>().map_err(|_| bad())?,
                };
                let t = lua.create_table()?;
                t.raw_set("double", d)?;
                Value::Table(t)
            }
            b'(' => {
                let s = self.line()?.to_vec();
                let t = lua.create_table()?;
                t.raw_set("big_number", lua.create_string(&s)?)?;
                Value::Table(t)
            }
            b'=' => {
                let n = self.int_line()?;
                if n < 4 {
                    return Err(bad());
                }
                let s = self.bytes(n as usize)?.to_vec();
                let inner = lua.create_table()?;
                inner.raw_set("format", lua.create_string(&s[..3])?)?;
                inner.raw_set("string", lua.create_string(&s[4..])?)?;
                let t = lua.create_table()?;
                t.raw_set("verbatim_string", inner)?;
                Value::Table(t)
            }
            b'|' => {
                let n = self.int_line()?;
                for _ in 0..n * 2 {
                    self.value(lua, depth + 1)?;
                }
                self.value(lua, depth)?
            }
            _ => return Err(bad()),
        })
    }
}

/// C's `(long long)` of a double on x86-64: out of range (and NaN) gives
/// the "integer indefinite" value, `i64::MIN`.
pub fn c_long_long(n: f64) -> i64 {
    // 2^63: the first double past i64::MAX.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// Where a converted value goes: the caller's buffer, its protocol, and
/// the script's (booleans depend on it).
pub struct Out<'a> {
    pub buf: &'a mut Vec<u8>,
    /// The caller's protocol.
    pub proto: Protocol,
    /// `redis.setresp` of the script.
    pub script_resp3: bool,
    /// Error codes written (for `errorstats`), unless the error was a
    /// command's already counted.
    pub error_codes: Vec<String>,
    /// Most bytes `buf` may grow to (the caller's output cap).
    pub cap: usize,
    pub overflowed: bool,
}

/// Writes `v` as the reply of a script.
pub fn lua_to_reply(out: &mut Out, v: &Value, depth: usize) -> mlua::Result<()> {
    if depth > MAX_DEPTH {
        write_error(out, "ERR reached lua stack limit", true);
        return Ok(());
    }
    if out.buf.len() > out.cap {
        out.overflowed = true;
        return Ok(());
    }
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            if out.buf.len().saturating_add(b.len()) > out.cap {
                out.overflowed = true;
                return Ok(());
            }
            encode::bulk(out.buf, &b)
        }
        Value::Boolean(b) => {
            if out.script_resp3 {
                encode::boolean(out.buf, out.proto, *b)
            } else if *b {
                encode::integer(out.buf, 1)
            } else {
                encode::null(out.buf, out.proto)
            }
        }
        Value::Integer(i) => encode::integer(out.buf, *i),
        Value::Number(n) => encode::integer(out.buf, c_long_long(*n)),
        Value::Table(t) => table_to_reply(out, t, depth)?,
        _ => encode::null(out.buf, out.proto),
    }
    Ok(())
}

/// A status or error text as Redis reads it from Lua: a C string, cut at
/// the first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    match memchr::memchr(0, b) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// An error reply: `msg` with its code, CR/LF made spaces.
pub fn write_error(out: &mut Out, msg: impl AsRef<[u8]>, count: bool) {
    // Redis's addReplyErrorFormat: CR/LF at the end trimmed, in the
    // middle made spaces.
    let mut msg = msg.as_ref();
    while let [rest @ .., b'\r' | b'\n'] = msg {
        msg = rest;
    }
    if count {
        let code = msg.split(|&c| c == b' ').next().unwrap_or(b"ERR");
        out.error_codes
            .push(String::from_utf8_lossy(code).into_owned());
    }
    encode::error_bytes(out.buf, msg)
}

fn table_to_reply(out: &mut Out, t: &Table, depth: usize) -> mlua::Result<()> {
    if let Value::String(e) = t.raw_get::<Value>("err")? {
        let ignore = matches!(
            t.raw_get::<Value>("ignore_error_stats_update")?,
            Value::Boolean(true)
        );
        write_error(out, c_str(&e.as_bytes()), !ignore);
        return Ok(());
    }
    if let Value::String(s) = t.raw_get::<Value>("ok")? {
        let s: Vec<u8> = c_str(&s.as_bytes())
            .iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect();
        encode::simple(out.buf, &s);
        return Ok(());
    }
    if let Value::Number(_) | Value::Integer(_) = t.raw_get::<Value>("double")? {
        // Read as a number straight from Lua: mlua's `Value` makes an
        // integral double an integer, which would lose `-0`.
        let d: f64 = t.raw_get("double")?;
        encode::double(out.buf, out.proto, d);
        return Ok(());
    }
    if let Value::String(s) = t.raw_get::<Value>("big_number")? {
        let s: String = String::from_utf8_lossy(&s.as_bytes())
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        encode::big_number(out.buf, out.proto, &s);
        return Ok(());
    }
    if let Value::Table(v) = t.raw_get::<Value>("verbatim_string")? {
        if let (Value::String(f), Value::String(s)) =
            (v.raw_get::<Value>("format")?, v.raw_get::<Value>("string")?)
        {
            let f = f.to_str().map(|s| s.to_string()).unwrap_or_default();
            let f = if f.len() == 3 { f } else { "txt".to_string() };
            encode::verbatim(out.buf, out.proto, &f, &s.as_bytes());
            return Ok(());
        }
    }
    // Maps and sets are walked twice (count, then write) rather than
    // collected: mlua holds every value it hands out in a reference stack
    // of ~8000 slots, and a full one panics.
    if let Value::Table(m) = t.raw_get::<Value>("map")? {
        let mut n = 0;
        for p in m.clone().pairs::<Value, Value>() {
            p?;
            n += 1;
        }
        encode::map(out.buf, out.proto, n);
        for p in m.pairs::<Value, Value>() {
            let (k, v) = p?;
            lua_to_reply(out, &k, depth + 1)?;
            lua_to_reply(out, &v, depth + 1)?;
        }
        return Ok(());
    }
    if let Value::Table(s) = t.raw_get::<Value>("set")? {
        let mut n = 0;
        for p in s.clone().pairs::<Value, Value>() {
            p?;
            n += 1;
        }
        encode::set(out.buf, out.proto, n);
        for p in s.pairs::<Value, Value>() {
            let (k, _) = p?;
            lua_to_reply(out, &k, depth + 1)?;
        }
        return Ok(());
    }
    let mut n = 0i64;
    while t.raw_get::<Value>(n + 1)? != Value::Nil {
        n += 1;
    }
    encode::array(out.buf, n as usize);
    for i in 1..=n {
        let v: Value = t.raw_get(i)?;
        lua_to_reply(out, &v, depth + 1)?;
        if out.overflowed {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(reply: &[u8], resp3: bool) -> Vec<u8> {
        let lua = Lua::new();
        let (v, _) = reply_to_lua(&lua, reply).unwrap();
        let mut buf = Vec::new();
        let mut out = Out {
            buf: &mut buf,
            proto: if resp3 {
                Protocol::Resp3
            } else {
                Protocol::Resp2
            },
            script_resp3: resp3,
            error_codes: Vec::new(),
            cap: usize::MAX,
            overflowed: false,
        };
        lua_to_reply(&mut out, &v, 0).unwrap();
        buf
    }

    #[test]
    fn replies_survive_the_trip_through_lua() {
        assert_eq!(roundtrip(b":5\r\n", false), b":5\r\n");
        assert_eq!(roundtrip(b"$3\r\nabc\r\n", false), b"$3\r\nabc\r\n");
        assert_eq!(roundtrip(b"$-1\r\n", false), b"$-1\r\n");
        assert_eq!(roundtrip(b"+OK\r\n", false), b"+OK\r\n");
        assert_eq!(
            roundtrip(b"*2\r\n:1\r\n$1\r\na\r\n", false),
            b"*2\r\n:1\r\n$1\r\na\r\n"
        );
        assert_eq!(roundtrip(b"-ERR bad\r\n", false), b"-ERR bad\r\n");
        assert_eq!(roundtrip(b",1.5\r\n", true), b",1.5\r\n");
        assert_eq!(roundtrip(b"#t\r\n", true), b"#t\r\n");
        assert_eq!(
            roundtrip(b"%1\r\n+a\r\n:1\r\n", true),
            b"%1\r\n+a\r\n:1\r\n"
        );
        assert_eq!(roundtrip(b"(123\r\n", true), b"(123\r\n");
        assert_eq!(roundtrip(b"=7\r\ntxt:abc\r\n", true), b"=7\r\ntxt:abc\r\n");
        // An array stops at the first nil (a RESP3 null inside).
        assert_eq!(roundtrip(b"*3\r\n:1\r\n_\r\n:3\r\n", true), b"*1\r\n:1\r\n");
    }

    #[test]
    fn numbers_truncate_as_c_does() {
        assert_eq!(c_long_long(1.9), 1);
        assert_eq!(c_long_long(-0.5), 0);
        assert_eq!(c_long_long(1e20), i64::MIN);
        assert_eq!(c_long_long(f64::NAN), i64::MIN);
    }

    #[test]
    fn malformed_or_too_deep_replies_are_errors() {
        let lua = Lua::new();
        assert!(reply_to_lua(&lua, b"$10\r\nab\r\n").is_err());
        let deep: Vec<u8> = b"*1\r\n".repeat(MAX_DEPTH + 5);
        assert!(reply_to_lua(&lua, &deep).is_err());
    }
}
