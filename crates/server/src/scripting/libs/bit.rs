//! `bit`: LuaBitOp 1.0.2, 32-bit bitwise operations on Lua numbers.
//!
//! Every argument is normalised the way LuaBitOp does on a double build:
//! add 2^52+2^51 and keep the low 32 bits of the double's representation,
//! which rounds to the nearest integer and reduces it modulo 2^32. Results
//! are signed 32-bit numbers. Strings convertible to numbers are accepted;
//! anything else is "number expected".
//!
//! Departure from 1.0.2: `bit.tohex(x, -2^31)` makes the C version push a
//! string of 2^31 bytes read from an 8-byte buffer; here the count is treated
//! as -(2^31-1), i.e. 8 uppercase digits, as LuaBitOp 1.0.3 does.

use super::{num, to_number, type_error, Args, LResult, Registrar, Ret, Shape};
use mlua::{Lua, Table};

/// Normalises argument `i` to 32 bits (`barg`).
fn barg(lua: &Lua, args: &Args, i: usize) -> LResult<u32> {
    let n = args.get(i).and_then(|v| to_number(lua, &v));
    let b = (n.unwrap_or(0.0) + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && n.is_none() {
        return type_error(args, i, "number");
    }
    Ok(b)
}

/// A result as Lua sees it (`BRET`: signed 32-bit as a double).
fn bret(b: u32) -> LResult<Ret> {
    Ok(Ret::One(num(b as i32 as f64)))
}

/// Builds the `bit` table.
pub(crate) fn create(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    reg.add(lua, &t, "tobit", Shape::One, |lua, a| {
        bret(barg(lua, a, 1)?)
    })?;
    reg.add(lua, &t, "bnot", Shape::One, |lua, a| {
        bret(!barg(lua, a, 1)?)
    })?;
    type Fold = fn(u32, u32) -> u32;
    let folds: [(&str, Fold); 3] = [
        ("band", |x, y| x & y),
        ("bor", |x, y| x | y),
        ("bxor", |x, y| x ^ y),
    ];
    for (name, op) in folds {
        reg.add(lua, &t, name, Shape::One, move |lua, a| {
            let mut b = barg(lua, a, 1)?;
            // LuaBitOp folds from the last argument down to the second.
            for i in (2..=a.len()).rev() {
                b = op(b, barg(lua, a, i)?);
            }
            bret(b)
        })?;
    }
    type Shift = fn(u32, u32) -> u32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |b, n| b << n),
        ("rshift", |b, n| b >> n),
        ("arshift", |b, n| ((b as i32) >> n) as u32),
        ("rol", |b, n| b.rotate_left(n)),
        ("ror", |b, n| b.rotate_right(n)),
    ];
    for (name, op) in shifts {
        reg.add(lua, &t, name, Shape::One, move |lua, a| {
            let b = barg(lua, a, 1)?;
            let n = barg(lua, a, 2)? & 31;
            bret(op(b, n))
        })?;
    }
    reg.add(lua, &t, "bswap", Shape::One, |lua, a| {
        bret(barg(lua, a, 1)?.swap_bytes())
    })?;
    reg.add(lua, &t, "tohex", Shape::One, |lua, a| {
        let mut b = barg(lua, a, 1)?;
        let mut n = if a.get(2).is_none() {
            8
        } else {
            barg(lua, a, 2)? as i32
        };
        let digits: &[u8; 16] = if n < 0 {
            n = if n == i32::MIN { i32::MAX } else { -n };
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let n = n.min(8) as usize;
        let mut buf = [0u8; 8];
        for slot in buf[..n].iter_mut().rev() {
            *slot = digits[(b & 15) as usize];
            b >>= 4;
        }
        Ok(Ret::One(super::bytes(lua, &buf[..n])?))
    })?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testing::eval;

    #[test]
    fn normalisation_is_modular_and_rounds() {
        assert_eq!(eval("return tostring(bit.tobit(0xffffffff))"), "-1");
        assert_eq!(eval("return tostring(bit.tobit(2^32 + 5))"), "5");
        assert_eq!(eval("return tostring(bit.tobit(-1))"), "-1");
        assert_eq!(eval("return tostring(bit.tobit(1.5))"), "2");
        assert_eq!(eval("return tostring(bit.tobit(2.5))"), "2");
        assert_eq!(eval("return tostring(bit.tobit('12'))"), "12");
        assert_eq!(eval("return tostring(bit.tobit(2^31))"), "-2147483648");
    }

    #[test]
    fn operations() {
        assert_eq!(eval("return tostring(bit.band(0xff, 0x0f, 0x3))"), "3");
        assert_eq!(eval("return tostring(bit.bor(1, 2, 4))"), "7");
        assert_eq!(eval("return tostring(bit.bxor(5, 3))"), "6");
        assert_eq!(eval("return tostring(bit.bnot(0))"), "-1");
        assert_eq!(eval("return tostring(bit.lshift(1, 31))"), "-2147483648");
        assert_eq!(eval("return tostring(bit.lshift(1, 33))"), "2");
        assert_eq!(eval("return tostring(bit.rshift(-1, 28))"), "15");
        assert_eq!(eval("return tostring(bit.arshift(-256, 4))"), "-16");
        assert_eq!(
            eval("return tostring(bit.rol(0x12345678, 12))"),
            "1164411171"
        );
        assert_eq!(
            eval("return tostring(bit.ror(0x12345678, 12))"),
            "1736516421"
        );
        assert_eq!(eval("return tostring(bit.rol(7, 0))"), "7");
        assert_eq!(eval("return tostring(bit.bswap(0x12345678))"), "2018915346");
    }

    #[test]
    fn tohex() {
        assert_eq!(eval("return bit.tohex(255)"), "000000ff");
        assert_eq!(eval("return bit.tohex(255, -4)"), "00FF");
        assert_eq!(eval("return bit.tohex(-1, 12)"), "ffffffff");
        assert_eq!(eval("return bit.tohex(0x1234, 2)"), "34");
        assert_eq!(eval("return bit.tohex(1, 0)"), "");
        assert_eq!(eval("return bit.tohex(0xabc, -2^31)"), "00000ABC");
    }

    #[test]
    fn errors() {
        let e = |code: &str| {
            eval(&format!(
                "local ok, e = pcall(function() {code} end) return e"
            ))
        };
        assert_eq!(
            e("return bit.tobit({})"),
            "user_script:1: bad argument #1 to 'tobit' (number expected, got table)"
        );
        assert_eq!(
            e("return bit.band(1, 'x')"),
            "user_script:1: bad argument #2 to 'band' (number expected, got string)"
        );
        assert_eq!(
            e("return bit.tohex(1, nil)"),
            "user_script:1: bad argument #2 to 'tohex' (number expected, got nil)"
        );
    }
}
