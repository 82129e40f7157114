//! `cjson`: lua-cjson 2.1.0 as Redis bundles it.
//!
//! `cjson.encode(v)`, `cjson.decode(s)`, `cjson.null` (a NULL
//! lightuserdata, what JSON `null` decodes to) and the configuration
//! functions, which set an option when given an argument and always return
//! the current setting: `encode_sparse_array([convert [, ratio [, safe]]])`
//! (false, 2, 10), `encode_max_depth` (1000), `decode_max_depth` (1000),
//! `encode_number_precision` (14, at most 14), `encode_keep_buffer` (true;
//! it only affects memory reuse in C), `encode_invalid_numbers` (false;
//! `"null"` writes null) and `decode_invalid_numbers` (true: hex, `inf`,
//! `nan`, leading `+` and zeros are accepted as `strtod` reads them), and
//! `cjson.new()`, a fresh module table with its own settings.
//!
//! Encoding follows the C code: a table whose keys are all positive integers
//! is an array of `max` elements (holes are `null`) unless it is excessively
//! sparse (`max > count * ratio` and `max > safe`: an error, or an object
//! with `convert`); any other table is an object in `next` order, numeric
//! keys written as quoted numbers; an empty table is `{}`. Numbers are
//! `%.14g`; strings escape `"`, `\`, `/`, control characters and DEL.
//!
//! Decoding treats the input as C does a NUL-terminated string: a NUL byte
//! ends it. Depth is limited by `decode_max_depth` and by Lua's C stack
//! limit, both reported as "Found too many nested data structures".

use super::{
    arg_err, bytes, cast_i32, cast_i64, check_bytes, err, exact_value, fmt_g, num, to_number,
    type_error, type_name, Args, LResult, Pairs, Registrar, Ret, Shape, Spill, LUAI_MAXCSTACK,
};
use mlua::{LightUserData, Lua, Table, Value};
use std::cell::Cell;
use std::rc::Rc;

/// One module table's settings (`json_config_t`).
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0: refuse, 1: write `inf`/`nan`, 2: write `null`.
    encode_invalid_numbers: i32,
    precision: i32,
    keep_buffer: i32,
    decode_invalid_numbers: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            precision: 14,
            keep_buffer: 1,
            decode_invalid_numbers: 1,
        }
    }
}

type Shared = Rc<Cell<Config>>;

/// `cjson.null`.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

// ===== Encoding =====

/// `json_append_string`.
fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => {
                out.extend_from_slice(format!("\\u{:04x}", c).as_bytes());
            }
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

/// The encoder's state: settings and the modelled Lua stack height.
struct Encoder<'a> {
    lua: &'a Lua,
    cfg: &'a Config,
    reg: &'a Registrar,
    out: Vec<u8>,
    height: usize,
}

/// A table being written.
enum EncKind {
    /// An array of `len` elements, `done` of them written.
    Array { len: i32, done: i32 },
    /// An object (its iterator is kept for the innermost one only).
    Object,
}

/// A table spilled to Lua as something else (cannot happen).
fn not_a_table<T>() -> LResult<T> {
    err("cjson: lost a table while walking")
}

impl Encoder<'_> {
    /// `json_append_number`.
    fn number(&mut self, n: f64) -> LResult<()> {
        match self.cfg.encode_invalid_numbers {
            0 if !n.is_finite() => return err("Cannot serialise number: must not be NaN or Inf"),
            1 if n.is_nan() => {
                self.out.extend_from_slice(b"nan");
                return Ok(());
            }
            2 if !n.is_finite() => {
                self.out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
        let s = fmt_g(n, self.cfg.precision as usize);
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    /// `lua_array_length`: `Some(max)` for an array, `None` for an object.
    fn array_length(&self, t: &Table) -> LResult<Option<i32>> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        let mut it = Pairs::new(self.reg, t.clone(), Value::Nil);
        while let Some((k, _)) = it.next()? {
            let k = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(None),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(None);
            }
            if k > max as f64 {
                max = cast_i32(k);
            }
            items = items.wrapping_add(1);
        }
        let cfg = self.cfg;
        if cfg.sparse_ratio > 0
            && max > items.wrapping_mul(cfg.sparse_ratio)
            && max > cfg.sparse_safe
        {
            if cfg.sparse_convert == 0 {
                return err("Cannot serialise table: excessively sparse array");
            }
            return Ok(None);
        }
        Ok(if max > 0 { Some(max) } else { None })
    }

    /// `json_append_data` for everything but tables.
    fn scalar(&mut self, v: &Value) -> LResult<()> {
        match v {
            Value::String(s) => append_string(&mut self.out, &s.as_bytes()),
            Value::Integer(i) => self.number(*i as f64)?,
            Value::Number(n) => self.number(*n)?,
            Value::Boolean(true) => self.out.extend_from_slice(b"true"),
            Value::Boolean(false) => self.out.extend_from_slice(b"false"),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            other => {
                return err(format!(
                    "Cannot serialise {}: type not supported",
                    type_name(other)
                ))
            }
        }
        Ok(())
    }

    /// An object key: a quoted number or an escaped string.
    fn key(&mut self, k: &Value) -> LResult<()> {
        match k {
            Value::Integer(i) => {
                self.out.push(b'"');
                self.number(*i as f64)?;
                self.out.extend_from_slice(b"\":");
            }
            Value::Number(n) => {
                self.out.push(b'"');
                self.number(*n)?;
                self.out.extend_from_slice(b"\":");
            }
            Value::String(s) => {
                append_string(&mut self.out, &s.as_bytes());
                self.out.push(b':');
            }
            other => {
                return err(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    type_name(other)
                ))
            }
        }
        Ok(())
    }

    /// `json_append_data`, walking nested tables with an explicit stack:
    /// the innermost table is held here, the enclosing ones (and where their
    /// iteration stopped) in a `Spill`.
    fn value(&mut self, root: Value) -> LResult<()> {
        let spill = Spill::new(self.lua)?;
        let mut kinds: Vec<EncKind> = Vec::new();
        let mut cur: Option<Table> = None;
        let mut pairs: Option<Pairs> = None;
        let mut pending = Some(root);
        loop {
            match pending.take() {
                Some(Value::Table(t)) => {
                    let depth = kinds.len() as i32 + 1;
                    if depth > self.cfg.encode_max_depth || self.height + 3 > LUAI_MAXCSTACK {
                        return err(format!("Cannot serialise, excessive nesting ({depth})"));
                    }
                    let len = self.array_length(&t)?;
                    if let Some(outer) = cur.take() {
                        let d = kinds.len();
                        spill.set(2 * d - 1, Value::Table(outer))?;
                        let at = pairs.take().map_or(Value::Nil, |p| p.last_key().clone());
                        spill.set(2 * d, at)?;
                    }
                    match len {
                        Some(len) => {
                            self.out.push(b'[');
                            self.height += 1;
                            kinds.push(EncKind::Array { len, done: 0 });
                        }
                        None => {
                            self.out.push(b'{');
                            self.height += 2;
                            kinds.push(EncKind::Object);
                            pairs = Some(Pairs::new(self.reg, t.clone(), Value::Nil));
                        }
                    }
                    cur = Some(t);
                }
                Some(v) => self.scalar(&v)?,
                None => {}
            }
            let Some(kind) = kinds.last_mut() else {
                return Ok(());
            };
            let Some(t) = cur.as_ref() else {
                return not_a_table();
            };
            match kind {
                EncKind::Array { len, done } => {
                    if *done < *len {
                        if *done > 0 {
                            self.out.push(b',');
                        }
                        *done += 1;
                        let key = Value::Integer(*done as i64);
                        pending = Some(exact_value(t, &key, t.raw_get::<Value>(*done)?, true));
                        continue;
                    }
                    self.out.push(b']');
                    self.height -= 1;
                }
                EncKind::Object => {
                    let Some(it) = pairs.as_mut() else {
                        return not_a_table();
                    };
                    let first = it.last_key().is_nil();
                    if let Some((k, item)) = it.next()? {
                        if !first {
                            self.out.push(b',');
                        }
                        self.key(&k)?;
                        pending = Some(item);
                        continue;
                    }
                    self.out.push(b'}');
                    self.height -= 2;
                }
            }
            kinds.pop();
            cur = None;
            pairs = None;
            if let Some(kind) = kinds.last() {
                let d = kinds.len();
                let Value::Table(outer) = spill.take(2 * d - 1)? else {
                    return not_a_table();
                };
                let at = spill.take(2 * d)?;
                if let EncKind::Object = kind {
                    pairs = Some(Pairs::new(self.reg, outer.clone(), at));
                }
                cur = Some(outer);
            }
        }
    }
}

/// `cjson.encode(v)`.
fn encode(lua: &Lua, cfg: &Config, reg: &Registrar, args: &Args) -> LResult<Ret> {
    if args.len() != 1 {
        return arg_err(1, "expected 1 argument");
    }
    let v = match args.exact_number(1) {
        Some(n) => Value::Number(n),
        None => args.value(1),
    };
    let mut enc = Encoder {
        lua,
        cfg,
        reg,
        out: Vec::new(),
        height: 1,
    };
    enc.value(v)?;
    Ok(Ret::One(bytes(lua, &enc.out)?))
}

// ===== Decoding =====

/// A token (`json_token_type_t` with its value).
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    /// What a parse error says was found.
    fn found(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Number(_) => "T_NUMBER",
            Tok::Boolean(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(why) => why,
        }
    }
}

/// Case-insensitive prefix test at `p`.
fn has_prefix_ci(d: &[u8], p: usize, word: &str) -> bool {
    d.get(p..p + word.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(word.as_bytes()))
}

/// C's `strtod` on the NUL-terminated text at `start`: the value and where
/// it stopped, `None` when no number is there.
fn strtod(d: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| d.get(i).copied().unwrap_or(0);
    let mut p = start;
    let neg = match at(p) {
        b'+' => {
            p += 1;
            false
        }
        b'-' => {
            p += 1;
            true
        }
        _ => false,
    };
    let sign = |x: f64| if neg { -x } else { x };
    if has_prefix_ci(d, p, "inf") {
        let end = if has_prefix_ci(d, p, "infinity") {
            p + 8
        } else {
            p + 3
        };
        return Some((sign(f64::INFINITY), end));
    }
    if has_prefix_ci(d, p, "nan") {
        let mut end = p + 3;
        if at(end) == b'(' {
            let mut q = end + 1;
            while at(q).is_ascii_alphanumeric() || at(q) == b'_' {
                q += 1;
            }
            if at(q) == b')' {
                end = q + 1;
            }
        }
        return Some((sign(f64::NAN), end));
    }
    if at(p) == b'0' && at(p + 1) | 0x20 == b'x' {
        let mut q = p + 2;
        let mut mant = 0f64;
        let mut exp: i64 = 0;
        let mut digits = 0;
        while at(q).is_ascii_hexdigit() {
            mant = mant * 16.0 + (at(q) as char).to_digit(16).unwrap_or(0) as f64;
            q += 1;
            digits += 1;
        }
        if at(q) == b'.' {
            let mut r = q + 1;
            let mut frac = 0;
            while at(r).is_ascii_hexdigit() {
                mant = mant * 16.0 + (at(r) as char).to_digit(16).unwrap_or(0) as f64;
                exp -= 4;
                r += 1;
                frac += 1;
            }
            if digits + frac > 0 {
                q = r;
                digits += frac;
            }
        }
        if digits == 0 {
            // Only the "0" is a number.
            return Some((sign(0.0), p + 1));
        }
        if at(q) | 0x20 == b'p' {
            let mut r = q + 1;
            let eneg = match at(r) {
                b'+' => {
                    r += 1;
                    false
                }
                b'-' => {
                    r += 1;
                    true
                }
                _ => false,
            };
            if at(r).is_ascii_digit() {
                let mut e: i64 = 0;
                while at(r).is_ascii_digit() {
                    e = (e * 10 + (at(r) - b'0') as i64).min(1 << 20);
                    r += 1;
                }
                exp += if eneg { -e } else { e };
                q = r;
            }
        }
        let v = mant * 2f64.powi(exp.clamp(-2200, 2200) as i32);
        return Some((sign(v), q));
    }
    let int_start = p;
    while at(p).is_ascii_digit() {
        p += 1;
    }
    let int_part = &d[int_start..p.min(d.len())];
    let mut frac_part: &[u8] = &[];
    if at(p) == b'.' {
        let fs = p + 1;
        let mut q = fs;
        while at(q).is_ascii_digit() {
            q += 1;
        }
        if !int_part.is_empty() || q > fs {
            frac_part = &d[fs..q];
            p = q;
        }
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut exp: i64 = 0;
    if at(p) | 0x20 == b'e' {
        let mut r = p + 1;
        let eneg = match at(r) {
            b'+' => {
                r += 1;
                false
            }
            b'-' => {
                r += 1;
                true
            }
            _ => false,
        };
        if at(r).is_ascii_digit() {
            while at(r).is_ascii_digit() {
                exp = (exp * 10 + (at(r) - b'0') as i64).min(1 << 30);
                r += 1;
            }
            if eneg {
                exp = -exp;
            }
            p = r;
        }
    }
    let mut text = String::with_capacity(int_part.len() + frac_part.len() + 16);
    text.push_str(if int_part.is_empty() {
        "0"
    } else {
        std::str::from_utf8(int_part).ok()?
    });
    text.push('.');
    text.push_str(if frac_part.is_empty() {
        "0"
    } else {
        std::str::from_utf8(frac_part).ok()?
    });
    text.push('e');
    text.push_str(&exp.to_string());
    let v: f64 = text.parse().ok()?;
    Some((sign(v), p))
}

/// The parser's state (`json_parse_t`).
struct Parser<'a> {
    lua: &'a Lua,
    cfg: &'a Config,
    data: &'a [u8],
    ptr: usize,
    depth: i32,
    height: usize,
}

impl Parser<'_> {
    /// The byte at `i`, NUL past the end.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// `json_is_invalid_number`: not strict JSON although `strtod` may read it.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.ptr;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        if self.at(p) == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        } else if self.at(p) <= b'9' {
            return false;
        }
        has_prefix_ci(self.data, p, "inf") || has_prefix_ci(self.data, p, "nan")
    }

    /// `json_next_number_token`.
    fn number_token(&mut self) -> (Tok, usize) {
        let index = self.ptr;
        match strtod(self.data, self.ptr) {
            Some((v, end)) if end > self.ptr => {
                self.ptr = end;
                (Tok::Number(v), index)
            }
            _ => (Tok::Error("invalid number"), index),
        }
    }

    /// Four hex digits at `p` (`decode_hex4`).
    fn hex4(&self, p: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            v = (v << 4) | (self.at(p + i) as char).to_digit(16)?;
        }
        Some(v)
    }

    /// `json_append_unicode_escape` at a `\u`: appends UTF-8, advances.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let mut cp = self.hex4(self.ptr + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return None;
            }
            if self.at(self.ptr + 6) != b'\\' || self.at(self.ptr + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.ptr + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut buf = [0u8; 4];
        let s: &[u8] = if cp <= 0x7F {
            buf[0] = cp as u8;
            &buf[..1]
        } else if cp <= 0x7FF {
            buf[0] = (cp >> 6) as u8 | 0xC0;
            buf[1] = (cp & 0x3F) as u8 | 0x80;
            &buf[..2]
        } else if cp <= 0xFFFF {
            buf[0] = (cp >> 12) as u8 | 0xE0;
            buf[1] = ((cp >> 6) & 0x3F) as u8 | 0x80;
            buf[2] = (cp & 0x3F) as u8 | 0x80;
            &buf[..3]
        } else {
            buf[0] = (cp >> 18) as u8 | 0xF0;
            buf[1] = ((cp >> 12) & 0x3F) as u8 | 0x80;
            buf[2] = ((cp >> 6) & 0x3F) as u8 | 0x80;
            buf[3] = (cp & 0x3F) as u8 | 0x80;
            &buf[..4]
        };
        out.extend_from_slice(s);
        self.ptr += len;
        Some(())
    }

    /// `json_next_string_token`, at the opening quote.
    fn string_token(&mut self) -> (Tok, usize) {
        self.ptr += 1;
        let mut s = Vec::new();
        loop {
            let ch = self.at(self.ptr);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return (Tok::Error("unexpected end of string"), self.ptr);
            }
            let mut c = ch;
            if ch == b'\\' {
                c = match self.at(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 12,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape(&mut s).is_some() {
                            continue;
                        }
                        return (Tok::Error("invalid unicode escape code"), self.ptr);
                    }
                    _ => return (Tok::Error("invalid escape code"), self.ptr),
                };
                self.ptr += 1;
            }
            s.push(c);
            self.ptr += 1;
        }
        self.ptr += 1;
        (Tok::Str(s), 0)
    }

    /// `json_next_token`: the token and its 0-based index.
    fn next_token(&mut self) -> (Tok, usize) {
        while matches!(self.at(self.ptr), b' ' | b'\t' | b'\n' | b'\r') {
            self.ptr += 1;
        }
        let index = self.ptr;
        let ch = self.at(self.ptr);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(t) = single {
            self.ptr += 1;
            return (t, index);
        }
        match ch {
            0 => (Tok::End, index),
            b'"' => {
                let (t, err_index) = self.string_token();
                match t {
                    Tok::Error(_) => (t, err_index),
                    t => (t, index),
                }
            }
            b'-' | b'0'..=b'9' => {
                if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                    return (Tok::Error("invalid number"), index);
                }
                self.number_token()
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                let rest = &self.data[self.ptr..];
                if rest.starts_with(b"true") {
                    self.ptr += 4;
                    (Tok::Boolean(true), index)
                } else if rest.starts_with(b"false") {
                    self.ptr += 5;
                    (Tok::Boolean(false), index)
                } else if rest.starts_with(b"null") {
                    self.ptr += 4;
                    (Tok::Null, index)
                } else if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
                    self.number_token()
                } else {
                    (Tok::Error("invalid token"), index)
                }
            }
            _ => (Tok::Error("invalid token"), index),
        }
    }

    /// `json_throw_parse_error`.
    fn parse_error<T>(expected: &str, tok: &Tok, index: usize) -> LResult<T> {
        err(format!(
            "Expected {expected} but found {} at character {}",
            tok.found(),
            index + 1
        ))
    }

    /// `json_decode_descend`.
    fn descend(&mut self, slots: usize) -> LResult<()> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth && self.height + slots <= LUAI_MAXCSTACK {
            return Ok(());
        }
        err(format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.ptr
        ))
    }

    /// The key and colon that start an object member.
    fn member_key(&mut self, tok: Tok, index: usize) -> LResult<Vec<u8>> {
        let Tok::Str(key) = tok else {
            return Self::parse_error("object key string", &tok, index);
        };
        let (colon, ci) = self.next_token();
        if !matches!(colon, Tok::Colon) {
            return Self::parse_error("colon", &colon, ci);
        }
        Ok(key)
    }

    /// `json_process_value`, with an explicit stack of open containers: the
    /// innermost table is held here, the enclosing ones in a `Spill`.
    fn value(&mut self, tok: Tok, index: usize) -> LResult<Value> {
        let spill = Spill::new(self.lua)?;
        let mut frames: Vec<DecFrame> = Vec::new();
        let mut cur: Option<Table> = None;
        let mut next = (tok, index);
        loop {
            let (tok, index) = std::mem::replace(&mut next, (Tok::End, 0));
            let opened = match tok {
                Tok::ObjBegin => {
                    self.descend(3)?;
                    let t = self.lua.create_table()?;
                    let (tok, index) = self.next_token();
                    if matches!(tok, Tok::ObjEnd) {
                        self.depth -= 1;
                        Err(Value::Table(t))
                    } else {
                        let key = self.member_key(tok, index)?;
                        self.height += 2;
                        next = self.next_token();
                        Ok((t, DecFrame::Object { key }))
                    }
                }
                Tok::ArrBegin => {
                    self.descend(2)?;
                    let t = self.lua.create_table()?;
                    let (tok, index) = self.next_token();
                    if matches!(tok, Tok::ArrEnd) {
                        self.depth -= 1;
                        Err(Value::Table(t))
                    } else {
                        self.height += 1;
                        next = (tok, index);
                        Ok((t, DecFrame::Array { next: 1 }))
                    }
                }
                Tok::Str(s) => Err(bytes(self.lua, &s)?),
                Tok::Number(n) => Err(num(n)),
                Tok::Boolean(b) => Err(Value::Boolean(b)),
                Tok::Null => Err(null()),
                t => return Self::parse_error("value", &t, index),
            };
            let mut v = match opened {
                Ok((t, frame)) => {
                    if let Some(outer) = cur.replace(t) {
                        spill.set(frames.len(), Value::Table(outer))?;
                    }
                    frames.push(frame);
                    continue;
                }
                Err(v) => v,
            };
            // Store the value in the innermost container; close the
            // containers that end here.
            loop {
                let Some(frame) = frames.last_mut() else {
                    return Ok(v);
                };
                let Some(t) = cur.as_ref() else {
                    return err("cjson: lost a table while parsing");
                };
                match frame {
                    DecFrame::Array { next: i } => {
                        t.raw_set(*i, v)?;
                        *i += 1;
                        let (sep, si) = self.next_token();
                        match sep {
                            Tok::ArrEnd => self.height -= 1,
                            Tok::Comma => {
                                next = self.next_token();
                                break;
                            }
                            _ => return Self::parse_error("comma or array end", &sep, si),
                        }
                    }
                    DecFrame::Object { key } => {
                        t.raw_set(self.lua.create_string(&*key)?, v)?;
                        let (sep, si) = self.next_token();
                        match sep {
                            Tok::ObjEnd => self.height -= 2,
                            Tok::Comma => {
                                let (tok, index) = self.next_token();
                                *key = self.member_key(tok, index)?;
                                next = self.next_token();
                                break;
                            }
                            _ => return Self::parse_error("comma or object end", &sep, si),
                        }
                    }
                }
                self.depth -= 1;
                frames.pop();
                let Some(done) = cur.take() else {
                    return err("cjson: lost a table while parsing");
                };
                v = Value::Table(done);
                if !frames.is_empty() {
                    let Value::Table(outer) = spill.take(frames.len())? else {
                        return err("cjson: lost a table while parsing");
                    };
                    cur = Some(outer);
                }
            }
        }
    }
}

/// A container being decoded (its table is held apart).
enum DecFrame {
    /// An array; `next` is the index of the next element.
    Array { next: i64 },
    /// An object; `key` is the key of the value being read.
    Object { key: Vec<u8> },
}

/// `cjson.decode(s)`.
fn decode(lua: &Lua, cfg: &Config, args: &Args) -> LResult<Ret> {
    if args.len() != 1 {
        return arg_err(1, "expected 1 argument");
    }
    let data = check_bytes(args, 1)?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return err("JSON parser does not support UTF-16 or UTF-32");
    }
    let mut p = Parser {
        lua,
        cfg,
        data: &data,
        ptr: 0,
        depth: 0,
        height: 1,
    };
    let (tok, index) = p.next_token();
    let v = p.value(tok, index)?;
    let (tok, index) = p.next_token();
    if !matches!(tok, Tok::End) {
        return Parser::parse_error("the end", &tok, index);
    }
    Ok(Ret::One(v))
}

// ===== Configuration =====

/// `json_arg_init`: at most `n` arguments.
fn arg_init(args: &Args, n: usize) -> LResult<()> {
    if args.len() > n {
        return arg_err(n + 1, "found too many arguments");
    }
    Ok(())
}

/// `json_integer_option`.
fn integer_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> LResult<Value> {
    if !matches!(args.value(i), Value::Nil) {
        let n = match args.get(i).and_then(|v| to_number(lua, &v)) {
            Some(n) => n,
            None => return type_error(args, i, "number"),
        };
        let value = cast_i64(n) as i32;
        if !(min <= value && value <= max) {
            return arg_err(1, format!("expected integer between {min} and {max}"));
        }
        *setting = value;
    }
    Ok(num(*setting as f64))
}

/// `json_enum_option`; `options` of `None` means off/on booleans.
fn enum_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    setting: &mut i32,
    options: Option<&[&str]>,
) -> LResult<Value> {
    let options = options.unwrap_or(&["off", "on"]);
    let arg = args.value(i);
    if !matches!(arg, Value::Nil) {
        if let Value::Boolean(b) = arg {
            *setting = b as i32;
        } else {
            let name = check_bytes(args, i)?;
            match options.iter().position(|o| o.as_bytes() == name) {
                Some(k) => *setting = k as i32,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(&name);
                    msg.push(b'\'');
                    return arg_err(i, msg);
                }
            }
        }
    }
    Ok(if *setting == 0 || *setting == 1 {
        Value::Boolean(*setting == 1)
    } else {
        Value::String(lua.create_string(options[*setting as usize])?)
    })
}

/// Builds a `cjson` module table with default settings.
pub(crate) fn create(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg: Shared = Rc::new(Cell::new(Config::default()));

    let c = cfg.clone();
    let r = reg.clone();
    reg.add(lua, &t, "encode", Shape::One, move |lua, a| {
        encode(lua, &c.get(), &r, a)
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "decode", Shape::One, move |lua, a| {
        decode(lua, &c.get(), a)
    })?;
    let c = cfg.clone();
    reg.add(
        lua,
        &t,
        "encode_sparse_array",
        Shape::Multi,
        move |lua, a| {
            arg_init(a, 3)?;
            // Each option takes effect before the next one is checked, as in C.
            let mut cfg = c.get();
            let convert = enum_option(lua, a, 1, &mut cfg.sparse_convert, None)?;
            c.set(cfg);
            let ratio = integer_option(lua, a, 2, &mut cfg.sparse_ratio, 0, i32::MAX)?;
            c.set(cfg);
            let safe = integer_option(lua, a, 3, &mut cfg.sparse_safe, 0, i32::MAX)?;
            c.set(cfg);
            let out = lua.create_table()?;
            out.raw_set(1, convert)?;
            out.raw_set(2, ratio)?;
            out.raw_set(3, safe)?;
            Ok(Ret::Multi(out, 3))
        },
    )?;
    type Field = fn(&mut Config) -> &mut i32;
    let ints: [(&str, Field, i32); 3] = [
        ("encode_max_depth", |c| &mut c.encode_max_depth, i32::MAX),
        ("decode_max_depth", |c| &mut c.decode_max_depth, i32::MAX),
        ("encode_number_precision", |c| &mut c.precision, 14),
    ];
    for (name, field, max) in ints {
        let c = cfg.clone();
        reg.add(lua, &t, name, Shape::One, move |lua, a| {
            arg_init(a, 1)?;
            let mut cfg = c.get();
            let v = integer_option(lua, a, 1, field(&mut cfg), 1, max)?;
            c.set(cfg);
            Ok(Ret::One(v))
        })?;
    }
    let enums: [(&str, Field, Option<&'static [&'static str]>); 3] = [
        ("encode_keep_buffer", |c| &mut c.keep_buffer, None),
        (
            "encode_invalid_numbers",
            |c| &mut c.encode_invalid_numbers,
            Some(&["off", "on", "null"]),
        ),
        (
            "decode_invalid_numbers",
            |c| &mut c.decode_invalid_numbers,
            None,
        ),
    ];
    for (name, field, options) in enums {
        let c = cfg.clone();
        reg.add(lua, &t, name, Shape::One, move |lua, a| {
            arg_init(a, 1)?;
            let mut cfg = c.get();
            let v = enum_option(lua, a, 1, field(&mut cfg), options)?;
            c.set(cfg);
            Ok(Ret::One(v))
        })?;
    }
    let r = reg.clone();
    reg.add(lua, &t, "new", Shape::One, move |lua, _| {
        Ok(Ret::One(Value::Table(create(lua, &r)?)))
    })?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{error, eval};

    fn enc(lua_value: &str) -> String {
        eval(&format!("return cjson.encode({lua_value})"))
    }

    #[test]
    fn encode_values() {
        assert_eq!(enc("{1,2,{a=3}}"), r#"[1,2,{"a":3}]"#);
        assert_eq!(enc("{}"), "{}");
        assert_eq!(
            enc("'a/b\"c\\\\d\\n\\1\\127'"),
            r#""a\/b\"c\\d\n\u0001\u007f""#
        );
        assert_eq!(enc("0.1"), "0.1");
        assert_eq!(enc("1/3"), "0.33333333333333");
        assert_eq!(enc("2^53"), "9.007199254741e+15");
        assert_eq!(enc("-0.0"), "-0");
        assert_eq!(enc("1e-300"), "1e-300");
        assert_eq!(enc("{1e-300}"), "[1e-300]");
        assert_eq!(enc("{[1]=1,[3]=3}"), "[1,null,3]");
        assert_eq!(enc("{[1.5]=1}"), r#"{"1.5":1}"#);
        assert_eq!(enc("cjson.null"), "null");
        assert_eq!(enc("nil"), "null");
        assert_eq!(enc("true"), "true");
    }

    #[test]
    fn encode_errors() {
        assert_eq!(
            error("cjson.encode(print)"),
            "user_script:1: Cannot serialise function: type not supported"
        );
        assert_eq!(
            error("cjson.encode({[11]=1})"),
            "user_script:1: Cannot serialise table: excessively sparse array"
        );
        assert_eq!(
            error("cjson.encode(0/0)"),
            "user_script:1: Cannot serialise number: must not be NaN or Inf"
        );
        assert_eq!(
            error("cjson.encode({[true]=1})"),
            "user_script:1: Cannot serialise boolean: table key must be a number or string"
        );
        assert_eq!(
            error("local t = {} t[1] = t cjson.encode(t)"),
            "user_script:1: Cannot serialise, excessive nesting (1001)"
        );
        assert_eq!(
            error("cjson.encode()"),
            "user_script:1: bad argument #1 to 'encode' (expected 1 argument)"
        );
    }

    #[test]
    fn decode_values() {
        assert_eq!(
            eval(
                r#"local t = cjson.decode([[{"a":[1,2.5,"x\u00e9\ud83d\ude00",true,null]}]]) return cjson.encode(t)"#
            ),
            "{\"a\":[1,2.5,\"x\u{e9}\u{1f600}\",true,null]}"
        );
        assert_eq!(
            eval("return tostring(cjson.decode('[null]')[1] == cjson.null)"),
            "true"
        );
        assert_eq!(eval("return tostring(cjson.decode('0x10'))"), "16");
        assert_eq!(eval("return tostring(cjson.decode(' -1.5e3 '))"), "-1500");
        assert_eq!(eval("return tostring(cjson.decode('[1]\\0junk')[1])"), "1");
    }

    #[test]
    fn decode_errors_and_hostile_input() {
        assert_eq!(
            error("cjson.decode('x')"),
            "user_script:1: Expected value but found invalid token at character 1"
        );
        assert_eq!(
            error("cjson.decode('[1,]')"),
            "user_script:1: Expected value but found T_ARR_END at character 4"
        );
        assert_eq!(
            error("cjson.decode('{\"a\" 1}')"),
            "user_script:1: Expected colon but found T_NUMBER at character 6"
        );
        assert_eq!(
            error("cjson.decode('\"abc')"),
            "user_script:1: Expected value but found unexpected end of string at character 5"
        );
        assert_eq!(
            error("cjson.decode('\"\\\\ud800\"')"),
            "user_script:1: Expected value but found invalid unicode escape code at character 2"
        );
        assert_eq!(
            error("cjson.decode('[1] 2')"),
            "user_script:1: Expected the end but found T_NUMBER at character 5"
        );
        assert_eq!(
            error("cjson.decode('')"),
            "user_script:1: Expected value but found T_END at character 1"
        );
        assert_eq!(
            error("cjson.decode(string.rep('[', 100000))"),
            "user_script:1: Found too many nested data structures (1001) at character 1001"
        );
        // Raised depth limit: Lua's stack limit still stops it.
        assert_eq!(
            error("cjson.decode_max_depth(1000000) cjson.decode(string.rep('[', 100000))"),
            "user_script:1: Found too many nested data structures (7999) at character 7999"
        );
        assert_eq!(
            error("cjson.decode('a\\0')"),
            "user_script:1: JSON parser does not support UTF-16 or UTF-32"
        );
    }

    #[test]
    fn deep_nesting_at_the_c_limits() {
        // Lua's 8000-slot C stack is the limit once the depth limits are raised.
        assert_eq!(
            eval("cjson.encode_max_depth(100000) local t = {} for i = 1, 7996 do t = {t} end return tostring(#cjson.encode(t))"),
            "15994"
        );
        assert_eq!(
            error("cjson.encode_max_depth(100000) local t = {} for i = 1, 7997 do t = {t} end cjson.encode(t)"),
            "user_script:1: Cannot serialise, excessive nesting (7998)"
        );
        assert_eq!(
            error("cjson.encode_max_depth(100000) local t = 1 for i = 1, 4000 do t = {a = t} end cjson.encode(t)"),
            "user_script:1: Cannot serialise, excessive nesting (4000)"
        );
        assert_eq!(
            error("cjson.decode_max_depth(100000) cjson.decode(string.rep('[', 100000))"),
            "user_script:1: Found too many nested data structures (7999) at character 7999"
        );
        assert_eq!(
            error("cjson.decode_max_depth(100000) cjson.decode(string.rep('{\"a\":', 100000))"),
            "user_script:1: Found too many nested data structures (4000) at character 19996"
        );
    }

    #[test]
    fn numbers_mlua_would_misread() {
        assert_eq!(enc("{[1e-20] = {[-0.0] = 1}}"), r#"{"1e-20":{"-0":1}}"#);
        assert_eq!(enc("{a = -0.0}"), r#"{"a":-0}"#);
        assert_eq!(enc("{-0.0, 1e-300}"), "[-0,1e-300]");
    }

    #[test]
    fn configuration() {
        assert_eq!(
            eval("return table.concat({tostring(cjson.encode_sparse_array())}, ',')"),
            "false"
        );
        assert_eq!(
            eval("local a, b, c = cjson.encode_sparse_array(true, 3) return tostring(a)..b..c"),
            "true310"
        );
        assert_eq!(
            eval("cjson.encode_sparse_array(true) return cjson.encode({[20]=1})"),
            r#"{"20":1}"#
        );
        assert_eq!(
            eval("cjson.encode_number_precision(3) return cjson.encode(1/3)"),
            "0.333"
        );
        assert_eq!(eval("return cjson.encode_invalid_numbers('null')"), "null");
        assert_eq!(
            eval("cjson.encode_invalid_numbers(true) return cjson.encode({1/0, -1/0, 0/0})"),
            "[inf,-inf,nan]"
        );
        assert_eq!(
            error("cjson.encode_number_precision(15)"),
            "user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"
        );
        assert_eq!(
            error("cjson.encode_keep_buffer(1, 2)"),
            "user_script:1: bad argument #2 to 'encode_keep_buffer' (found too many arguments)"
        );
        assert_eq!(
            error("cjson.encode_keep_buffer('maybe')"),
            "user_script:1: bad argument #1 to 'encode_keep_buffer' (invalid option 'maybe')"
        );
        assert_eq!(
            error("cjson.decode_invalid_numbers(false) cjson.decode('0x10')"),
            "user_script:1: Expected value but found invalid number at character 1"
        );
        assert_eq!(
            eval("return cjson._NAME .. ' ' .. cjson._VERSION"),
            "cjson 2.1.0"
        );
    }
}
