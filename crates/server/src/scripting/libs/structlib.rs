//! `struct`: Roberto Ierusalimschy's lua_struct (struct.c 1.4) as Redis
//! bundles it, packing Lua values into binary strings and back.
//!
//! `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, i])` (the values, then
//! the position after the last byte read) and `struct.size(fmt)`. Format
//! options: `>` big endian, `<` little endian (the default, as on x86-64),
//! `![n]` maximum alignment (default 8), `x` a zero byte, `b/B` `h/H` `l/L`
//! `T` `i[n]/I[n]` signed/unsigned integers of 1, 2, 8, 8 and n (default 4,
//! at most 32) bytes, `c[n]` n chars (`c0`: the whole string when packing,
//! the previous number as length when unpacking), `s` a zero-terminated
//! string, `f` float, `d` double, space ignored.
//!
//! Integers go through a C `unsigned long` (64 bits): sizes above 8 carry
//! zero bytes when packing and only the last 8 bytes count when unpacking,
//! as in C. The Redis fixes are kept: numbers in the format that overflow an
//! `int` are "integral size overflow", integer sizes above 32 are errors, and
//! every read is bounds-checked ("data string too short"), including `c0`
//! lengths taken from data and starting positions past the end, which crash
//! the original C version; offset 0 is "offset must be 1 or greater", and
//! `c0` takes its length only from a value this call unpacked ("format 'c0'
//! needs a previous size").

use super::{
    arg_err, bytes, cast_i64, check_bytes, check_number, err, num, opt_integer, to_number, Args,
    LResult, Registrar, Ret, Shape, LUAI_MAXCSTACK, TWO_63,
};
use mlua::{Lua, Table, Value};

/// Largest integer size, in bytes (`MAXINTSIZE`).
const MAXINTSIZE: i32 = 32;
/// Default for `!` (`MAXALIGN` on x86-64).
const MAXALIGN: i32 = 8;

/// Endianness and alignment state (`Header`).
struct Header {
    big: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            big: false,
            align: 1,
        }
    }
}

/// A cursor over the format string.
struct Fmt<'a> {
    s: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.s.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    /// `getnum`: an optional decimal number, with Redis's overflow check.
    fn getnum(&mut self, df: i32) -> LResult<i32> {
        if !self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(df);
        }
        let mut a: i32 = 0;
        while let Some(&c) = self.s.get(self.i).filter(|c| c.is_ascii_digit()) {
            let d = (c - b'0') as i32;
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return err("integral size overflow");
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a)
    }
}

/// `optsize`: the size of option `opt`, consuming its number if any.
fn optsize(opt: u8, fmt: &mut Fmt) -> LResult<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'x' => 1,
        b'c' => fmt.getnum(1)? as usize,
        b'i' | b'I' => {
            let sz = fmt.getnum(4)?;
            if sz > MAXINTSIZE {
                return err(format!(
                    "integral size {sz} is larger than limit of {MAXINTSIZE}"
                ));
            }
            sz as usize
        }
        _ => 0,
    })
}

/// `gettoalign`: padding before an item of `size` at offset `len`.
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

/// `controloptions`: endianness, alignment, spaces; anything else is an
/// invalid option.
fn controloptions(opt: u8, fmt: &mut Fmt, h: &mut Header) -> LResult<()> {
    match opt {
        b' ' => Ok(()),
        b'>' => {
            h.big = true;
            Ok(())
        }
        b'<' => {
            h.big = false;
            Ok(())
        }
        b'!' => {
            let a = fmt.getnum(MAXALIGN)?;
            if a <= 0 || a & (a - 1) != 0 {
                return err(format!("alignment {a} is not a power of 2"));
            }
            h.align = a as usize;
            Ok(())
        }
        _ => {
            let mut msg = b"invalid format option '".to_vec();
            msg.extend_from_slice(&[opt, b'\'']);
            arg_err(1, msg)
        }
    }
}

/// The format argument: a string (or number) up to its first NUL.
fn format_arg(args: &Args) -> LResult<Vec<u8>> {
    let mut f = check_bytes(args, 1)?;
    if let Some(z) = f.iter().position(|&c| c == 0) {
        f.truncate(z);
    }
    Ok(f)
}

/// A double as C's `(unsigned long)` conversion of `putinteger` leaves it on
/// x86-64.
fn to_ulong(n: f64) -> u64 {
    if n < 0.0 {
        cast_i64(n) as u64
    } else if n.is_nan() {
        1 << 63
    } else if n < 2.0 * TWO_63 {
        n as u64
    } else {
        0
    }
}

/// The C function pushes a nil after the arguments, so the first missing
/// one is reported as nil rather than "no value".
fn missing(args: &Args, arg: usize, expected: &str) -> LResult<()> {
    if arg == args.len() + 1 {
        return arg_err(arg, format!("{expected} expected, got nil"));
    }
    Ok(())
}

/// `struct.pack(fmt, ...)`.
fn pack(lua: &Lua, args: &mut Args) -> LResult<Ret> {
    let f = format_arg(args)?;
    let mut fmt = Fmt { s: &f, i: 0 };
    let mut h = Header::new();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = optsize(opt, &mut fmt)?;
        let toalign = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                missing(args, arg, "number")?;
                let mut value = to_ulong(check_number(lua, args, arg)?);
                arg += 1;
                let mut buf = [0u8; MAXINTSIZE as usize];
                for k in 0..size {
                    let slot = if h.big { size - 1 - k } else { k };
                    buf[slot] = value as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&buf[..size]);
            }
            b'x' => out.push(0),
            b'f' => {
                missing(args, arg, "number")?;
                let v = check_number(lua, args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                });
            }
            b'd' => {
                missing(args, arg, "number")?;
                let v = check_number(lua, args, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                });
            }
            b'c' | b's' => {
                missing(args, arg, "string")?;
                let s = check_bytes(args, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // C reports the already advanced argument index.
                    return arg_err(arg, "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => controloptions(opt, &mut fmt, &mut h)?,
        }
    }
    Ok(Ret::One(bytes(lua, &out)?))
}

/// `getinteger`: bytes to a number through a 64-bit `unsigned long`.
fn getinteger(buf: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = buf.len();
    for k in 0..size {
        let b = if big { buf[k] } else { buf[size - 1 - k] };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    // x86-64 masks the shift count, C leaves it undefined.
    let shift = ((size as i64 * 8 - 1) & 63) as u32;
    let mask = !0u64 << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// The results of `unpack`, kept in a Lua table so that thousands of them
/// are one reference.
struct Results {
    t: Table,
    count: usize,
}

impl Results {
    fn push(&mut self, v: Value) -> LResult<()> {
        self.count += 1;
        self.t.raw_set(self.count, v)?;
        Ok(())
    }

    fn pop(&mut self) -> LResult<Option<Value>> {
        if self.count == 0 {
            return Ok(None);
        }
        let v = self.t.raw_get::<Value>(self.count)?;
        self.t.raw_set(self.count, Value::Nil)?;
        self.count -= 1;
        Ok(Some(v))
    }
}

/// `struct.unpack(fmt, s [, i])`.
fn unpack(lua: &Lua, args: &mut Args) -> LResult<Ret> {
    let f = format_arg(args)?;
    let data = check_bytes(args, 2)?;
    let ld = data.len();
    // A size_t in C: negative offsets wrap around and fail the bounds check.
    let pos = opt_integer(lua, args, 3, 1)? as u64 as usize;
    if pos == 0 {
        return arg_err(3, "offset must be 1 or greater");
    }
    let mut pos = pos - 1;
    let mut fmt = Fmt { s: &f, i: 0 };
    let mut h = Header::new();
    let mut stack = Results {
        t: lua.create_table()?,
        count: 0,
    };
    let too_short = || arg_err(2, "data string too short");
    while let Some(opt) = fmt.next() {
        let mut size = optsize(opt, &mut fmt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if size > ld || pos > ld - size {
            return too_short();
        }
        // fmt and data are below the results on the C stack; Redis 7.0.15
        // refuses the 7998th result.
        if 2 + stack.count + 2 > LUAI_MAXCSTACK {
            return err("stack overflow (too many results)");
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                stack.push(num(getinteger(&data[pos..pos + size], h.big, signed)))?;
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let v = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                stack.push(num(v as f64))?;
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let v = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                stack.push(num(v))?;
            }
            b'c' => {
                if size == 0 {
                    // Redis's version only takes the size from a result.
                    let prev = stack.pop()?.and_then(|v| to_number(lua, &v));
                    let Some(n) = prev else {
                        return err("format 'c0' needs a previous size");
                    };
                    size = if n < TWO_63 {
                        cast_i64(n) as usize
                    } else {
                        usize::MAX
                    };
                    if size > ld || pos > ld - size {
                        return too_short();
                    }
                }
                stack.push(bytes(lua, &data[pos..pos + size])?)?;
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return err("unfinished string in data");
                };
                stack.push(bytes(lua, &data[pos..pos + e])?)?;
                size = e + 1;
            }
            _ => controloptions(opt, &mut fmt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    stack.push(num(pos.wrapping_add(1) as i64 as f64))?;
    Ok(Ret::Multi(stack.t, stack.count))
}

/// `struct.size(fmt)`.
fn size(_: &Lua, args: &mut Args) -> LResult<Ret> {
    let f = format_arg(args)?;
    let mut fmt = Fmt { s: &f, i: 0 };
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next() {
        let size = optsize(opt, &mut fmt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return arg_err(1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return arg_err(1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(opt, &mut fmt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(Ret::One(num(pos as i64 as f64)))
}

/// Builds the `struct` table.
pub(crate) fn create(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    reg.add(lua, &t, "pack", Shape::One, pack)?;
    reg.add(lua, &t, "unpack", Shape::Multi, unpack)?;
    reg.add(lua, &t, "size", Shape::One, size)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{error, eval, hex};

    #[test]
    fn pack_integers_and_endianness() {
        assert_eq!(hex("struct.pack('>i', 1)"), "00000001");
        assert_eq!(hex("struct.pack('<i', 1)"), "01000000");
        assert_eq!(hex("struct.pack('i', -2)"), "feffffff");
        assert_eq!(hex("struct.pack('>h', -2)"), "fffe");
        assert_eq!(hex("struct.pack('BbHhLl', 1, 2, 3, 4, 5, 6)").len(), 2 * 22);
        assert_eq!(hex("struct.pack('>I3', 0x010203)"), "010203");
        assert_eq!(hex("struct.pack('>i10', -1)"), "0000ffffffffffffffff");
        assert_eq!(hex("struct.pack('i0', 5)"), "");
    }

    #[test]
    fn alignment() {
        assert_eq!(hex("struct.pack('!4bi', 1, 2)"), "0100000002000000");
        assert_eq!(
            hex("struct.pack('!bd', 1, 0)"),
            "01000000000000000000000000000000"
        );
        assert_eq!(eval("return tostring(struct.size('!4bi'))"), "8");
        assert_eq!(eval("return tostring(struct.size('bi'))"), "5");
        assert_eq!(eval("return tostring(struct.size('z'))"), "0");
    }

    #[test]
    fn strings_and_floats() {
        assert_eq!(hex("struct.pack('s', 'ab')"), "616200");
        assert_eq!(hex("struct.pack('c0', 'abc')"), "616263");
        assert_eq!(hex("struct.pack('c2', 'abc')"), "6162");
        assert_eq!(hex("struct.pack('>d', -0.0)"), "8000000000000000");
        assert_eq!(hex("struct.pack('>d', 1e-300)"), "01a56e1fc2f8f359");
        assert_eq!(hex("struct.pack('>f', 1.5)"), "3fc00000");
        assert_eq!(
            eval("return table.concat({struct.unpack('>fd', struct.pack('>fd', 1.5, 0.1))}, ',')"),
            "1.5,0.1,13"
        );
    }

    #[test]
    fn unpack_values_and_position() {
        assert_eq!(
            eval("return table.concat({struct.unpack('>ihB', '\\0\\0\\1\\0\\255\\254\\7')}, ',')"),
            "256,-2,7,8"
        );
        assert_eq!(
            eval("return table.concat({struct.unpack('sc2', 'hi\\0abc')}, ',')"),
            "hi,ab,6"
        );
        assert_eq!(
            eval("return table.concat({struct.unpack('Bc0', '\\3abcd')}, ',')"),
            "abc,5"
        );
        assert_eq!(
            eval("return table.concat({struct.unpack('b', 'xyz', 2)}, ',')"),
            "121,3"
        );
        assert_eq!(
            eval("return table.concat({struct.unpack('>I9', '\\1\\0\\0\\0\\0\\0\\0\\0\\2')}, ',')"),
            "2,10"
        );
    }

    #[test]
    fn errors() {
        assert_eq!(
            error("struct.pack('i33', 1)"),
            "user_script:1: integral size 33 is larger than limit of 32"
        );
        assert_eq!(
            hex("struct.pack('i17', -1)"),
            "ffffffffffffffff000000000000000000"
        );
        assert_eq!(
            error("struct.pack('i99999999999', 1)"),
            "user_script:1: integral size overflow"
        );
        assert_eq!(
            error("struct.pack('c99999999999', 'a')"),
            "user_script:1: integral size overflow"
        );
        assert_eq!(
            error("struct.pack('c2000000000', 'a')"),
            "user_script:1: bad argument #3 to 'pack' (string too short)"
        );
        assert_eq!(
            error("struct.pack('!3i', 1)"),
            "user_script:1: alignment 3 is not a power of 2"
        );
        assert_eq!(
            error("struct.pack('z', 1)"),
            "user_script:1: bad argument #1 to 'pack' (invalid format option 'z')"
        );
        assert_eq!(
            error("struct.pack('i')"),
            "user_script:1: bad argument #2 to 'pack' (number expected, got nil)"
        );
        assert_eq!(
            error("struct.unpack('i', 'abc')"),
            "user_script:1: bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(
            error("struct.unpack('c0', '1')"),
            "user_script:1: format 'c0' needs a previous size"
        );
        assert_eq!(
            error("struct.unpack('Bc0', '\\255abc')"),
            "user_script:1: bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(
            error("struct.unpack('s', 'abc')"),
            "user_script:1: unfinished string in data"
        );
        assert_eq!(
            error("struct.unpack('b', 'abc', 0)"),
            "user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)"
        );
        // Starting positions outside the string, including wrapped ones.
        for i in ["-1", "-9007199254740992", "5", "9007199254740992"] {
            assert_eq!(
                error(&format!("struct.unpack('b', 'abc', {i})")),
                "user_script:1: bad argument #2 to 'unpack' (data string too short)"
            );
        }
        assert_eq!(
            error("struct.size('s')"),
            "user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)"
        );
        assert_eq!(
            error("struct.size('c0')"),
            "user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size)"
        );
        // Huge repetition of results: Lua's C stack limit, not memory.
        assert_eq!(
            error("struct.unpack(string.rep('b', 9000), string.rep('a', 9000))"),
            "user_script:1: stack overflow (too many results)"
        );
        assert_eq!(
            error("struct.unpack(string.rep('c1', 7998), string.rep('a', 7998))"),
            "user_script:1: stack overflow (too many results)"
        );
        assert_eq!(
            eval("return tostring(select('#', struct.unpack(string.rep('c1', 7997), string.rep('a', 7997))))"),
            "7998"
        );
        // Thousands of string arguments (more than mlua could hold at once).
        assert_eq!(
            eval("local t = {} for i = 1, 7000 do t[i] = 'ab' end return tostring(#struct.pack(string.rep('c0', 7000), unpack(t)))"),
            "14000"
        );
    }
}
