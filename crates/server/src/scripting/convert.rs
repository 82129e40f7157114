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
use mlua::{Table, Value};

/// Deepest reply or return value converted (Redis's limit is its Lua
/// stack's; a self-referencing table must end somewhere).
pub const MAX_DEPTH: usize = 1000;

/// The line at `*pos` (without its CRLF), moving past it.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = buf.get(*pos..)?;
    let end = memchr::memmem::find(rest, b"\r\n")?;
    *pos += end + 2;
    Some(&rest[..end])
}

fn int_line(buf: &[u8], pos: &mut usize) -> Option<i64> {
    ferrokv_resp::parse_i64(line(buf, pos)?)
}

fn bytes<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(n)?;
    if end.checked_add(2)? > buf.len() {
        return None;
    }
    let s = &buf[*pos..end];
    *pos = end + 2;
    Some(s)
}

unsafe fn push_bytes(state: *mut mlua::ffi::lua_State, b: &[u8]) {
    mlua::ffi::lua_pushlstring(state, b.as_ptr() as *const std::os::raw::c_char, b.len());
}

/// Parses one reply of `buf` at `*pos` and pushes it as a Lua value, with
/// Lua's C API (the trampoline of `redis.call` calls it; nothing here
/// owns memory, so a Lua error raised by an allocation unwinds cleanly).
/// False, with values left on the stack, when the reply is malformed,
/// nested past [`MAX_DEPTH`], or the Lua stack cannot grow.
///
/// # Safety
/// `state` is the running Lua state, inside a C function.
pub unsafe fn push_reply(
    state: *mut mlua::ffi::lua_State,
    buf: &[u8],
    pos: &mut usize,
    depth: usize,
) -> bool {
    use mlua::ffi;
    if depth > MAX_DEPTH || ffi::lua_checkstack(state, 4) == 0 {
        return false;
    }
    let Some(&kind) = buf.get(*pos) else {
        return false;
    };
    *pos += 1;
    match kind {
        b':' => {
            let Some(n) = int_line(buf, pos) else {
                return false;
            };
            ffi::lua_pushnumber(state, n as f64);
        }
        b'$' => {
            let Some(n) = int_line(buf, pos) else {
                return false;
            };
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
            } else {
                let Some(b) = bytes(buf, pos, n as usize) else {
                    return false;
                };
                push_bytes(state, b);
            }
        }
        b'+' => {
            let Some(s) = line(buf, pos) else {
                return false;
            };
            ffi::lua_createtable(state, 0, 1);
            push_bytes(state, s);
            ffi::lua_setfield(state, -2, c"ok".as_ptr());
        }
        b'-' => {
            let start = *pos - 1;
            let Some(_) = line(buf, pos) else {
                return false;
            };
            // Counted when the command replied: not again if the script
            // returns it.
            super::api::push_error_table_raw(state, &buf[start..*pos - 2], true);
        }
        b'*' | b'>' => {
            let Some(n) = int_line(buf, pos) else {
                return false;
            };
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return true;
            }
            ffi::lua_createtable(state, n.min(1 << 16) as i32, 0);
            for i in 0..n {
                if !push_reply(state, buf, pos, depth + 1) {
                    return false;
                }
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
        }
        b'%' | b'~' => {
            let Some(n) = int_line(buf, pos) else {
                return false;
            };
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_createtable(state, 0, n.min(1 << 16) as i32);
            for _ in 0..n {
                if !push_reply(state, buf, pos, depth + 1) {
                    return false;
                }
                if kind == b'%' {
                    if !push_reply(state, buf, pos, depth + 1) {
                        return false;
                    }
                } else {
                    ffi::lua_pushboolean(state, 1);
                }
                ffi::lua_settable(state, -3);
            }
            let name = if kind == b'%' { c"map" } else { c"set" };
            ffi::lua_setfield(state, -2, name.as_ptr());
        }
        b'_' => {
            if line(buf, pos).is_none() {
                return false;
            }
            ffi::lua_pushnil(state);
        }
        b'#' => {
            let Some(l) = line(buf, pos) else {
                return false;
            };
            ffi::lua_pushboolean(state, (l == b"t") as i32);
        }
        b',' => {
            let Some(l) = line(buf, pos) else {
                return false;
            };
            let d = match std::str::from_utf8(l) {
                Ok("inf") => f64::INFINITY,
                Ok("-inf") => f64::NEG_INFINITY,
                Ok("nan") => f64::NAN,
                Ok(s) => match s.parse::<f64>() {
                    Ok(d) => d,
                    Err(_) => return false,
                },
                Err(_) => return false,
            };
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_pushnumber(state, d);
            ffi::lua_setfield(state, -2, c"double".as_ptr());
        }
        b'(' => {
            let Some(s) = line(buf, pos) else {
                return false;
            };
            ffi::lua_createtable(state, 0, 1);
            push_bytes(state, s);
            ffi::lua_setfield(state, -2, c"big_number".as_ptr());
        }
        b'=' => {
            let Some(n) = int_line(buf, pos) else {
                return false;
            };
            if n < 4 {
                return false;
            }
            let Some(s) = bytes(buf, pos, n as usize) else {
                return false;
            };
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_createtable(state, 0, 2);
            push_bytes(state, &s[..3]);
            ffi::lua_setfield(state, -2, c"format".as_ptr());
            push_bytes(state, &s[4..]);
            ffi::lua_setfield(state, -2, c"string".as_ptr());
            ffi::lua_setfield(state, -2, c"verbatim_string".as_ptr());
        }
        b'|' => {
            let Some(n) = int_line(buf, pos) else {
                return false;
            };
            // Attributes are not shown to scripts.
            for _ in 0..n.saturating_mul(2) {
                if !push_reply(state, buf, pos, depth + 1) {
                    return false;
                }
                ffi::lua_settop(state, -2);
            }
            return push_reply(state, buf, pos, depth);
        }
        _ => return false,
    }
    true
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
        Value::String(s) => bulk_capped(out, &s.as_bytes()),
        Value::Boolean(b) => boolean(out, *b),
        Value::Integer(i) => encode::integer(out.buf, *i),
        Value::Number(n) => encode::integer(out.buf, c_long_long(*n)),
        Value::Table(t) => table_to_reply(out, t, depth)?,
        _ => encode::null(out.buf, out.proto),
    }
    Ok(())
}

/// [`lua_to_reply`] of the value at `idx` when it is not a table, read
/// straight from the Lua stack (the common results: a string, a number,
/// a boolean, nil).
///
/// # Safety
/// `state` is a Lua state with a non-table value at `idx`; nothing here
/// allocates in Lua or raises.
pub unsafe fn scalar_to_reply(out: &mut Out, state: *mut mlua::ffi::lua_State, idx: i32) {
    use mlua::ffi;
    match ffi::lua_type(state, idx) {
        ffi::LUA_TSTRING => {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(state, idx, &mut len);
            bulk_capped(out, std::slice::from_raw_parts(p as *const u8, len))
        }
        ffi::LUA_TNUMBER => encode::integer(out.buf, c_long_long(ffi::lua_tonumber(state, idx))),
        ffi::LUA_TBOOLEAN => boolean(out, ffi::lua_toboolean(state, idx) != 0),
        _ => encode::null(out.buf, out.proto),
    }
}

/// A string result as a bulk, unless it would pass the reply's cap.
fn bulk_capped(out: &mut Out, b: &[u8]) {
    if out.buf.len().saturating_add(b.len()) > out.cap {
        out.overflowed = true;
        return;
    }
    encode::bulk(out.buf, b)
}

/// A boolean result: a RESP3 boolean from a `setresp(3)` script, else
/// `:1` for true and a null for false.
fn boolean(out: &mut Out, b: bool) {
    if out.script_resp3 {
        encode::boolean(out.buf, out.proto, b)
    } else if b {
        encode::integer(out.buf, 1)
    } else {
        encode::null(out.buf, out.proto)
    }
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
    use mlua::Lua;

    fn to_lua(lua: &Lua, reply: &[u8]) -> Option<Value> {
        let r: mlua::Result<(bool, Value)> = unsafe {
            lua.exec_raw((), |state| {
                let mut pos = 0;
                let ok = push_reply(state, reply, &mut pos, 0);
                let top = mlua::ffi::lua_gettop(state);
                if !ok {
                    mlua::ffi::lua_settop(state, 0);
                    mlua::ffi::lua_pushboolean(state, 0);
                    mlua::ffi::lua_pushnil(state);
                } else {
                    mlua::ffi::lua_pushboolean(state, 1);
                    mlua::ffi::lua_insert(state, top);
                }
            })
        };
        match r.unwrap() {
            (true, v) => Some(v),
            (false, _) => None,
        }
    }

    fn roundtrip(reply: &[u8], resp3: bool) -> Vec<u8> {
        let lua = Lua::new();
        let v = to_lua(&lua, reply).unwrap();
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
        assert!(to_lua(&lua, b"$10\r\nab\r\n").is_none());
        let deep: Vec<u8> = b"*1\r\n".repeat(MAX_DEPTH + 5);
        assert!(to_lua(&lua, &deep).is_none());
    }
}
