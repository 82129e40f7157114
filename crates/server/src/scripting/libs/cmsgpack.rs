//! `cmsgpack`: lua-cmsgpack 0.4.0 (MessagePack) as Redis bundles it.
//!
//! `cmsgpack.pack(...)` encodes each argument and concatenates them;
//! `cmsgpack.unpack(s)` returns every object in `s`;
//! `cmsgpack.unpack_one(s [, offset])` and `cmsgpack.unpack_limit(s, limit
//! [, offset])` return the offset to continue from (-1 at the end) followed
//! by at most one / `limit` objects.
//!
//! Encoding, as the C version does it on a 64-bit Lua 5.1 build:
//! - a number equal to its `int64_t` cast is an integer, in the shortest of
//!   positive/negative fixint, uint8..64, int8..64; other numbers are a
//!   float when `(float)d == d`, a double otherwise;
//! - strings are fixstr/str8/str16/str32 (no bin types);
//! - a table whose keys are exactly the integers 1..n (`table_is_an_array`)
//!   is an array of `#t` elements read with `t[i]`, any other table a map in
//!   `next` order; tables nested 16 deep (`LUACMSGPACK_MAX_NESTING`),
//!   including self-references, encode as nil;
//! - booleans are booleans, everything else is nil.
//!
//! Decoding pushes uint64 values through a signed `lua_Integer`, so values
//! above 2^63 come back negative, as in Redis. bin, ext and the reserved byte
//! are "Bad data format in input."; truncated input, including lengths that
//! claim more bytes than remain, is "Missing bytes in input." and nothing is
//! allocated for a length before the bytes are known to be there. Nesting is
//! bounded by Lua's C stack limit, reported with the C version's message.

use super::{
    arg_err, bytes, cast_i32, check_bytes, check_integer, err, exact_value, num, opt_integer, Args,
    LResult, LibError, Pairs, Registrar, Ret, Shape, Spill, LUAI_MAXCSTACK,
};
use mlua::{Lua, Table, Value};

/// Tables nested deeper than this encode as nil (`LUACMSGPACK_MAX_NESTING`).
const MAX_NESTING: usize = 16;

/// Appends the header and bytes of a string.
fn encode_bytes(buf: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        buf.push(0xa0 | len as u8);
    } else if len <= 0xff {
        buf.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        buf.push(0xda);
        buf.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        buf.push(0xdb);
        buf.extend_from_slice(&(len as u32).to_be_bytes());
    }
    buf.extend_from_slice(s);
}

/// Appends a double, as a float when that is lossless.
fn encode_double(buf: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if d == f as f64 {
        buf.push(0xca);
        buf.extend_from_slice(&f.to_be_bytes());
    } else {
        buf.push(0xcb);
        buf.extend_from_slice(&d.to_be_bytes());
    }
}

/// Appends an integer in its shortest encoding.
fn encode_int(buf: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            buf.push(n as u8);
        } else if n <= 0xff {
            buf.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            buf.push(0xcd);
            buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            buf.push(0xce);
            buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            buf.push(0xcf);
            buf.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        buf.push(n as i8 as u8);
    } else if n >= -128 {
        buf.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        buf.push(0xd1);
        buf.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        buf.push(0xd2);
        buf.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        buf.push(0xd3);
        buf.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends an array or map header (`base` is 0x90 or 0x80).
fn encode_header(buf: &mut Vec<u8>, base: u8, n: u64) {
    let (b16, b32) = if base == 0x90 {
        (0xdc, 0xdd)
    } else {
        (0xde, 0xdf)
    };
    if n <= 15 {
        buf.push(base | n as u8);
    } else if n <= 65535 {
        buf.push(b16);
        buf.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        buf.push(b32);
        buf.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Appends a Lua number: integer when it survives an `int64_t` cast.
fn encode_number(buf: &mut Vec<u8>, n: f64) {
    let i = super::cast_i64(n);
    if !n.is_infinite() && i as f64 == n {
        encode_int(buf, i);
    } else {
        encode_double(buf, n);
    }
}

/// `luaL_checkstack(L, extra, msg)` at C stack height `height`.
fn check_stack(height: usize, extra: usize, msg: &str) -> LResult<()> {
    if height + extra > LUAI_MAXCSTACK {
        return err(format!("stack overflow ({msg})"));
    }
    Ok(())
}

/// `table_is_an_array`: keys are exactly 1..n.
fn table_is_an_array(reg: &Registrar, t: &Table, height: usize) -> LResult<bool> {
    check_stack(height, 2, "in function table_is_an_array")?;
    let mut count: i32 = 0;
    let mut max: i32 = 0;
    let mut it = Pairs::new(reg, t.clone(), Value::Nil);
    while let Some((k, _)) = it.next()? {
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.is_infinite() || cast_i32(n) as f64 != n {
            return Ok(false);
        }
        max = max.max(n as i32);
        count = count.wrapping_add(1);
    }
    Ok(max == count)
}

/// `mp_encode_lua_type`; `height` is the C stack height with `v` on top
/// (recursion is bounded by the nesting limit).
fn encode_value(
    reg: &Registrar,
    buf: &mut Vec<u8>,
    v: &Value,
    level: usize,
    height: usize,
) -> LResult<()> {
    match v {
        Value::String(s) => encode_bytes(buf, &s.as_bytes()),
        Value::Boolean(b) => buf.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(buf, *i as f64),
        Value::Number(n) => encode_number(buf, *n),
        Value::Table(t) if level < MAX_NESTING => {
            if table_is_an_array(reg, t, height)? {
                let len = t.raw_len();
                encode_header(buf, 0x90, len as u64);
                check_stack(height, 1, "in function mp_encode_lua_table_as_array")?;
                for j in 1..=len {
                    let key = Value::Integer(j as i64);
                    let item = exact_value(t, &key, t.get::<Value>(j)?, false);
                    encode_value(reg, buf, &item, level + 1, height + 1)?;
                }
            } else {
                check_stack(height, 3, "in function mp_encode_lua_table_as_map")?;
                let mut len: u64 = 0;
                let mut it = Pairs::new(reg, t.clone(), Value::Nil);
                while it.next()?.is_some() {
                    len += 1;
                }
                encode_header(buf, 0x80, len);
                let mut it = Pairs::new(reg, t.clone(), Value::Nil);
                while let Some((k, item)) = it.next()? {
                    // Stack: table, key, value, key copy.
                    encode_value(reg, buf, &k, level + 1, height + 3)?;
                    encode_value(reg, buf, &item, level + 1, height + 2)?;
                }
            }
        }
        _ => buf.push(0xc0),
    }
    Ok(())
}

/// `cmsgpack.pack(...)`.
fn pack(lua: &Lua, reg: &Registrar, args: &mut Args) -> LResult<Ret> {
    let nargs = args.len();
    if nargs == 0 {
        return arg_err(0, "MessagePack pack needs input.");
    }
    if 2 * nargs > LUAI_MAXCSTACK {
        return arg_err(0, "Too many arguments for MessagePack pack.");
    }
    let mut buf = Vec::new();
    for i in 1..=nargs {
        // Stack: the arguments, one string per packed argument, this one.
        let height = nargs + (i - 1);
        check_stack(height, 1, "in function mp_check")?;
        let v = match args.exact_number(i) {
            Some(n) => Value::Number(n),
            None => args.value(i),
        };
        encode_value(reg, &mut buf, &v, 0, height + 1)?;
    }
    Ok(Ret::One(bytes(lua, &buf)?))
}

/// Why decoding stopped (`MP_CUR_ERROR_*`), or a Lua error to raise.
enum DecodeError {
    Eof,
    BadFormat,
    Lib(LibError),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lib(LibError::Lua(e))
    }
}

impl From<LibError> for DecodeError {
    fn from(e: LibError) -> Self {
        DecodeError::Lib(e)
    }
}

/// What one tag byte starts: a complete value or a container of `n` items.
enum Head {
    Value(Value),
    Array(usize),
    Map(usize),
}

/// A container being filled (its table is held apart); `base` is the C
/// stack height below its table.
enum Frame {
    Array {
        len: usize,
        next: usize,
        base: usize,
    },
    Map {
        len: usize,
        done: usize,
        /// Whether the key of the pair being read is decoded.
        has_key: bool,
        base: usize,
    },
}

/// A decoding cursor plus the C function's stack height, for the
/// `luaL_checkstack` checks the C version makes.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    height: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The `n` bytes after the tag, consuming tag and bytes
    /// (`mp_cur_need(c, 1 + n)`).
    fn after_tag(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.left() < 1 + n {
            return Err(DecodeError::Eof);
        }
        let s = &self.data[self.pos + 1..self.pos + 1 + n];
        self.pos += 1 + n;
        Ok(s)
    }

    /// `luaL_checkstack(L, 1, msg)`.
    fn check_stack(&self, msg: &str) -> Result<(), DecodeError> {
        if self.height + 1 > LUAI_MAXCSTACK {
            return Err(DecodeError::Lib(LibError::Msg(
                format!("stack overflow ({msg})").into_bytes(),
            )));
        }
        Ok(())
    }

    /// A big-endian length of `n` bytes after the tag.
    fn length(&mut self, n: usize) -> Result<usize, DecodeError> {
        let b = self.after_tag(n)?;
        Ok(b.iter().fold(0usize, |acc, &x| (acc << 8) | x as usize))
    }

    /// A string of `l` bytes at the cursor.
    fn string(&mut self, lua: &Lua, l: usize) -> Result<Value, DecodeError> {
        if self.left() < l {
            return Err(DecodeError::Eof);
        }
        let v = bytes(lua, &self.data[self.pos..self.pos + l])?;
        self.pos += l;
        Ok(v)
    }
}

/// The start of `mp_decode_to_lua_type`: reads one tag and what follows it
/// unless it opens a container.
fn decode_head(lua: &Lua, c: &mut Cursor) -> Result<Head, DecodeError> {
    let Some(&tag) = c.data.get(c.pos) else {
        return Err(DecodeError::Eof);
    };
    c.check_stack("too many return values at once; use unpack_one or unpack_limit instead.")?;
    fn be<const N: usize>(b: &[u8]) -> [u8; N] {
        b.try_into().expect("length checked")
    }
    let v = match tag {
        0xcc => num(c.after_tag(1)?[0] as f64),
        0xd0 => num(c.after_tag(1)?[0] as i8 as f64),
        0xcd => num(u16::from_be_bytes(be(c.after_tag(2)?)) as f64),
        0xd1 => num(i16::from_be_bytes(be(c.after_tag(2)?)) as f64),
        0xce => num(u32::from_be_bytes(be(c.after_tag(4)?)) as f64),
        0xd2 => num(i32::from_be_bytes(be(c.after_tag(4)?)) as f64),
        // lua_pushunsigned is lua_pushinteger on 64-bit builds.
        0xcf => num(u64::from_be_bytes(be(c.after_tag(8)?)) as i64 as f64),
        0xd3 => num(i64::from_be_bytes(be(c.after_tag(8)?)) as f64),
        0xc0 => {
            c.pos += 1;
            Value::Nil
        }
        0xc3 | 0xc2 => {
            c.pos += 1;
            Value::Boolean(tag == 0xc3)
        }
        0xca => num(f32::from_be_bytes(be(c.after_tag(4)?)) as f64),
        0xcb => num(f64::from_be_bytes(be(c.after_tag(8)?))),
        0xd9 => {
            let l = c.length(1)?;
            c.string(lua, l)?
        }
        0xda => {
            let l = c.length(2)?;
            c.string(lua, l)?
        }
        0xdb => {
            let l = c.length(4)?;
            c.string(lua, l)?
        }
        0xdc => return Ok(Head::Array(c.length(2)?)),
        0xdd => return Ok(Head::Array(c.length(4)?)),
        0xde => return Ok(Head::Map(c.length(2)?)),
        0xdf => return Ok(Head::Map(c.length(4)?)),
        _ if tag & 0x80 == 0 => {
            c.pos += 1;
            num(tag as f64)
        }
        _ if tag & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(tag as i8 as f64)
        }
        _ if tag & 0xe0 == 0xa0 => {
            let l = (tag & 0x1f) as usize;
            if c.left() < 1 + l {
                return Err(DecodeError::Eof);
            }
            c.pos += 1;
            c.string(lua, l)?
        }
        _ if tag & 0xf0 == 0x90 => {
            c.pos += 1;
            return Ok(Head::Array((tag & 0xf) as usize));
        }
        _ if tag & 0xf0 == 0x80 => {
            c.pos += 1;
            return Ok(Head::Map((tag & 0xf) as usize));
        }
        _ => return Err(DecodeError::BadFormat),
    };
    Ok(Head::Value(v))
}

/// A fresh table, presized no larger than the input could fill.
fn new_table(lua: &Lua, c: &Cursor, len: usize, map: bool) -> Result<Table, DecodeError> {
    let cap = len.min(c.left()).min(1 << 16);
    Ok(if map {
        lua.create_table_with_capacity(0, cap)?
    } else {
        lua.create_table_with_capacity(cap, 0)?
    })
}

/// Raises what `lua_settable` raises for keys a table cannot hold.
fn check_key(k: &Value) -> Result<(), DecodeError> {
    match k {
        Value::Nil => Err(LibError::Raw(b"table index is nil".to_vec()).into()),
        Value::Number(n) if n.is_nan() => Err(LibError::Raw(b"table index is NaN".to_vec()).into()),
        _ => Ok(()),
    }
}

/// `mp_decode_to_lua_type` for one top-level object, with an explicit stack
/// of open containers instead of recursion: the innermost table and pending
/// map key are held here, the enclosing ones in a `Spill`.
fn decode_value(lua: &Lua, c: &mut Cursor) -> Result<Value, DecodeError> {
    let spill = Spill::new(lua)?;
    let mut frames: Vec<Frame> = Vec::new();
    let mut cur: Option<Table> = None;
    let mut key = Value::Nil;
    let lost = || DecodeError::Lib(LibError::Msg(b"cmsgpack: lost a table".to_vec()));
    loop {
        let base = c.height;
        let opened = match decode_head(lua, c)? {
            Head::Value(v) => Err(v),
            Head::Array(len) => {
                let t = new_table(lua, c, len, false)?;
                c.height += 1;
                c.check_stack("in function mp_decode_to_lua_array")?;
                if len == 0 {
                    c.height = base;
                    Err(Value::Table(t))
                } else {
                    c.height += 1; // the index
                    Ok((t, Frame::Array { len, next: 1, base }))
                }
            }
            Head::Map(len) => {
                let t = new_table(lua, c, len, true)?;
                if len == 0 {
                    Err(Value::Table(t))
                } else {
                    c.height += 1;
                    let frame = Frame::Map {
                        len,
                        done: 0,
                        has_key: false,
                        base,
                    };
                    Ok((t, frame))
                }
            }
        };
        let mut v = match opened {
            Ok((t, frame)) => {
                if let Some(outer) = cur.replace(t) {
                    let d = frames.len();
                    spill.set(2 * d - 1, Value::Table(outer))?;
                    spill.set(2 * d, std::mem::replace(&mut key, Value::Nil))?;
                }
                frames.push(frame);
                continue;
            }
            Err(v) => v,
        };
        // Hand the value to the innermost open container, closing the
        // containers it completes.
        loop {
            let Some(frame) = frames.last_mut() else {
                return Ok(v);
            };
            let t = cur.as_ref().ok_or_else(lost)?;
            match frame {
                Frame::Array { len, next, base } => {
                    t.raw_set(*next, v)?;
                    *next += 1;
                    if *next <= *len {
                        break;
                    }
                    c.height = *base;
                }
                Frame::Map {
                    len,
                    done,
                    has_key,
                    base,
                } => {
                    if !*has_key {
                        key = v;
                        *has_key = true;
                        c.height = *base + 2;
                        break;
                    }
                    let k = std::mem::replace(&mut key, Value::Nil);
                    check_key(&k)?;
                    t.raw_set(k, v)?;
                    *has_key = false;
                    *done += 1;
                    c.height = *base + 1;
                    if *done < *len {
                        break;
                    }
                    c.height = *base;
                }
            }
            frames.pop();
            v = Value::Table(cur.take().ok_or_else(lost)?);
            if !frames.is_empty() {
                let d = frames.len();
                let Value::Table(outer) = spill.take(2 * d - 1)? else {
                    return Err(lost());
                };
                cur = Some(outer);
                key = spill.take(2 * d)?;
            }
        }
    }
}

/// `mp_unpack_full`: `limit == 0 && offset == 0` decodes everything and
/// returns no offset.
fn unpack_full(lua: &Lua, args: &Args, limit: i64, offset: i64) -> LResult<Ret> {
    let s = check_bytes(args, 1)?;
    let len = s.len();
    if offset < 0 || limit < 0 {
        return err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        ));
    } else if offset as u64 > len as u64 {
        return err(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        ));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut c = Cursor {
        data: &s,
        pos: offset as usize,
        height: 1,
    };
    let out = lua.create_table()?;
    // Slot 1 is the offset when one is returned.
    let first = if decode_all { 1 } else { 2 };
    let mut cnt: usize = 0;
    while c.left() > 0 && (cnt as i64) < limit {
        match decode_value(lua, &mut c) {
            Ok(v) => out.raw_set(first + cnt, v)?,
            Err(DecodeError::Eof) => return err("Missing bytes in input."),
            Err(DecodeError::BadFormat) => return err("Bad data format in input."),
            Err(DecodeError::Lib(e)) => return Err(e),
        }
        cnt += 1;
        c.height += 1;
    }
    if decode_all {
        return Ok(Ret::Multi(out, cnt));
    }
    let next = if c.left() == 0 { -1 } else { c.pos as i64 };
    out.raw_set(1, num(next as f64))?;
    Ok(Ret::Multi(out, cnt + 1))
}

/// Builds the `cmsgpack` table.
pub(crate) fn create(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let r = reg.clone();
    reg.add(lua, &t, "pack", Shape::One, move |lua, a| pack(lua, &r, a))?;
    reg.add(lua, &t, "unpack", Shape::Multi, |lua, a| {
        unpack_full(lua, a, 0, 0)
    })?;
    reg.add(lua, &t, "unpack_one", Shape::Multi, |lua, a| {
        let offset = opt_integer(lua, a, 2, 0)?;
        a.truncate(1);
        unpack_full(lua, a, 1, offset)
    })?;
    reg.add(lua, &t, "unpack_limit", Shape::Multi, |lua, a| {
        let limit = check_integer(lua, a, 2)?;
        let offset = opt_integer(lua, a, 3, 0)?;
        a.truncate(1);
        unpack_full(lua, a, limit, offset)
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{error, eval, hex};

    #[test]
    fn integers() {
        assert_eq!(
            hex("cmsgpack.pack(0, 127, 128, 255, 256)"),
            "007fcc80ccffcd0100"
        );
        assert_eq!(
            hex("cmsgpack.pack(65536, 2^32)"),
            "ce00010000cf0000000100000000"
        );
        assert_eq!(
            hex("cmsgpack.pack(-1, -32, -33, -128, -129)"),
            "ffe0d0dfd080d1ff7f"
        );
        assert_eq!(
            hex("cmsgpack.pack(-32769, -2^31 - 1)"),
            "d2ffff7fffd3ffffffff7fffffff"
        );
        assert_eq!(hex("cmsgpack.pack(-2^63)"), "d38000000000000000");
    }

    #[test]
    fn floats_and_others() {
        assert_eq!(hex("cmsgpack.pack(1.5)"), "ca3fc00000");
        assert_eq!(hex("cmsgpack.pack(0.1)"), "cb3fb999999999999a");
        assert_eq!(hex("cmsgpack.pack(2^63)"), "ca5f000000");
        assert_eq!(hex("cmsgpack.pack(1/0)"), "ca7f800000");
        assert_eq!(hex("cmsgpack.pack(1e-300)"), "cb01a56e1fc2f8f359");
        assert_eq!(hex("cmsgpack.pack({1e-300})"), "91cb01a56e1fc2f8f359");
        assert_eq!(hex("cmsgpack.pack(-0.0)"), "00");
        assert_eq!(hex("cmsgpack.pack(true, false, nil, print)"), "c3c2c0c0");
        assert_eq!(
            hex("cmsgpack.pack(string.rep('a', 32)):sub(1, 4)"),
            "d9206161"
        );
        assert_eq!(
            hex("cmsgpack.pack(string.rep('a', 256)):sub(1, 6)"),
            "da0100616161"
        );
        assert_eq!(
            hex("cmsgpack.pack(string.rep('a', 65536)):sub(1, 10)"),
            "db000100006161616161"
        );
    }

    #[test]
    fn tables() {
        assert_eq!(hex("cmsgpack.pack({1, 2, 3})"), "93010203");
        assert_eq!(hex("cmsgpack.pack({})"), "90");
        assert_eq!(hex("cmsgpack.pack({[2] = 1})"), "810201");
        assert_eq!(hex("cmsgpack.pack({a = 1})"), "81a16101");
        // Self-reference stops at the nesting limit.
        let h = hex("(function() local t = {} t[1] = t return cmsgpack.pack(t) end)()");
        assert_eq!(h, format!("{}c0", "91".repeat(16)));
    }

    #[test]
    fn unpack() {
        assert_eq!(
            eval("return table.concat({cmsgpack.unpack(cmsgpack.pack(1, 'x', -5, 1.5))}, ',')"),
            "1,x,-5,1.5"
        );
        assert_eq!(
            eval("return cjson.encode(cmsgpack.unpack(cmsgpack.pack({1, {a = {2}}})))"),
            "[1,{\"a\":[2]}]"
        );
        assert_eq!(
            eval("return table.concat({cmsgpack.unpack_one(cmsgpack.pack(1, 2))}, ',')"),
            "1,1"
        );
        assert_eq!(
            eval("return table.concat({cmsgpack.unpack_one(cmsgpack.pack(1, 2), 1)}, ',')"),
            "-1,2"
        );
        assert_eq!(
            eval("return table.concat({cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}, ',')"),
            "2,1,2"
        );
        assert_eq!(
            eval("return tostring(select('#', cmsgpack.unpack('')))"),
            "0"
        );
        assert_eq!(
            eval(
                "return tostring(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255'))"
            ),
            "-1"
        );
        assert_eq!(
            eval("return tostring(cmsgpack.unpack('\\203\\63\\248\\0\\0\\0\\0\\0\\0'))"),
            "1.5"
        );
    }

    #[test]
    fn stack_limits_as_in_c() {
        assert_eq!(
            eval("local t = {} for i = 1, 3999 do t[i] = {i} end return tostring(#cmsgpack.pack(unpack(t)))"),
            "15614"
        );
        assert_eq!(
            error("local t = {} for i = 1, 4000 do t[i] = {i} end cmsgpack.pack(unpack(t))"),
            "user_script:1: stack overflow (in function table_is_an_array)"
        );
        assert_eq!(
            error("local t = {} for i = 1, 4001 do t[i] = 1 end cmsgpack.pack(unpack(t))"),
            "user_script:1: bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)"
        );
        assert_eq!(
            eval("return type(cmsgpack.unpack(string.rep('\\145', 3999) .. '\\1'))"),
            "table"
        );
        assert_eq!(
            error("cmsgpack.unpack(string.rep('\\145', 4000) .. '\\1')"),
            "user_script:1: stack overflow (in function mp_decode_to_lua_array)"
        );
        assert_eq!(
            error("cmsgpack.unpack(string.rep('\\129', 7998) .. '\\1\\1')"),
            "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"
        );
        assert_eq!(
            eval("return tostring(select('#', cmsgpack.unpack(string.rep('\\161x', 7999))))"),
            "7999"
        );
        assert_eq!(
            hex("cmsgpack.pack({[1e-300] = 1e-300})"),
            "81cb01a56e1fc2f8f359cb01a56e1fc2f8f359"
        );
    }

    #[test]
    fn hostile_input() {
        // str32 claiming 4 GB, array32 claiming 4G elements, map32 likewise.
        assert_eq!(
            error("cmsgpack.unpack('\\219\\255\\255\\255\\255abc')"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\221\\255\\255\\255\\255\\1')"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\223\\255\\255\\255\\255')"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\218\\0')"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\205\\1')"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\193')"),
            "user_script:1: Bad data format in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\196\\1a')"),
            "user_script:1: Bad data format in input."
        );
        assert_eq!(
            error("cmsgpack.unpack('\\129\\192\\1')"),
            "table index is nil"
        );
        // Deep nesting is bounded by the Lua stack limit.
        assert_eq!(
            error("cmsgpack.unpack(string.rep('\\145', 100000) .. '\\1')"),
            "user_script:1: stack overflow (in function mp_decode_to_lua_array)"
        );
        // Too many top-level values.
        assert_eq!(
            error("cmsgpack.unpack(string.rep('\\1', 9000))"),
            "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"
        );
        assert_eq!(
            error("cmsgpack.unpack_one('\\1', 5)"),
            "user_script:1: Start offset 5 greater than input length 1."
        );
        assert_eq!(
            error("cmsgpack.unpack_limit('\\1', -1)"),
            "user_script:1: Invalid request to unpack with offset of 0 and limit of 1."
        );
        assert_eq!(
            error("cmsgpack.pack()"),
            "user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)"
        );
        assert_eq!(
            error("cmsgpack.unpack_limit('x')"),
            "user_script:1: bad argument #2 to 'unpack_limit' (number expected, got no value)"
        );
    }
}
