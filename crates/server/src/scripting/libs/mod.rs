//! The four C libraries Redis 7.0 links into its Lua interpreter, in Rust.
//!
//! Redis scripts can rely on four globals besides the Lua 5.1 standard
//! library: `bit` (LuaBitOp 1.0.2), `struct` (Roberto Ierusalimschy's
//! lua_struct), `cjson` (lua-cjson 2.1.0) and `cmsgpack` (lua-cmsgpack
//! 0.4.0). [`open`] installs all four as plain tables of functions; the
//! scripting engine makes them read-only afterwards, as Redis does.
//!
//! Each library reproduces what the C version computes and the text of every
//! error it raises, as observed on Redis 7.0.15 (the modules' own files hold
//! the details). The C versions lean on undefined behaviour in a few corners
//! (double to integer casts out of range, oversized shifts); where those
//! corners are reachable from a script we reproduce what the x86-64 build of
//! Redis does.
//!
//! # How errors reach the script
//!
//! A C library raises errors with `luaL_error`, which prefixes the position of
//! the calling Lua code (`user_script:1: ...`) and throws a plain string. An
//! `mlua` callback that returns `Err` instead throws a Rust error object. So
//! every function is a C closure over `trampoline`: it calls the Rust body
//! (an `mlua` function), which returns `true, results` or `false, message,
//! level`, and raises the message itself with `luaL_where` + `lua_error`,
//! exactly as `luaL_error` would from the C function, so the position is
//! right even when the script tail-calls the library, and `pcall` gets the
//! string. `luaL_argerror`'s "bad argument #n to 'name'" takes `name` from
//! the calling frame, as Lua does.
//!
//! # `mlua` limits we work around
//!
//! - `mlua` reads a Lua number that is within `f64::EPSILON` of an integer as
//!   that integer, losing `-0` and magnitudes below 2.2e-16. Arguments with
//!   such numbers are passed packed in a table and read back exactly, values
//!   in tables are re-read exactly, and tables are walked by a Lua helper
//!   (`Pairs`) that flags such keys, so nothing is misread.
//! - `mlua` keeps every reference a Rust value holds in one Lua stack of at
//!   most 8000 slots and panics when it is full. So many arguments (more than
//!   32) are passed packed in a table, many results are returned through a
//!   table that the trampoline unpacks, and the iterative walks of
//!   `cjson`/`cmsgpack` keep the enclosing containers in a Lua table
//!   (`Spill`), not in Rust.
//! - Nesting never recurses on the Rust stack beyond cmsgpack's 16 levels:
//!   the walks are iterative, and their depth limits are the C versions'
//!   (including Lua's 8000-slot C stack limit, which we model: the depths
//!   and messages at which Redis gives up are the same here).
//!
//! # Where we depart from the C versions
//!
//! Inputs that crash the C versions or make them allocate what a length
//! prefix claims are Lua errors here (each module lists its cases); no
//! script input panics or allocates more than the input's size calls for.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::{ffi, Function, Lua, MultiValue, Table, Value};
use std::os::raw::c_int;

/// Installs the globals `bit`, `struct`, `cjson` and `cmsgpack`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let reg = Registrar::new(lua)?;
    let globals = lua.globals();
    globals.raw_set("bit", bit::create(lua, &reg)?)?;
    globals.raw_set("struct", structlib::create(lua, &reg)?)?;
    globals.raw_set("cjson", cjson::create(lua, &reg)?)?;
    globals.raw_set("cmsgpack", cmsgpack::create(lua, &reg)?)?;
    Ok(())
}

/// Lua 5.1's limit on the stack slots one C function may use
/// (`LUAI_MAXCSTACK`); `lua_checkstack` fails beyond it.
pub(crate) const LUAI_MAXCSTACK: usize = 8000;

/// An error raised by a library function, as the C code would raise it.
#[derive(Debug)]
pub(crate) enum LibError {
    /// `luaL_error`: the message, prefixed with the caller's position.
    Msg(Vec<u8>),
    /// An error raised by the Lua core from inside the C function (such as
    /// "table index is nil"): the message without a position.
    Raw(Vec<u8>),
    /// `luaL_argerror(narg, msg)`.
    Arg(usize, Vec<u8>),
    /// A failure of `mlua` itself (out of memory and the like).
    Lua(mlua::Error),
}

impl From<mlua::Error> for LibError {
    fn from(e: mlua::Error) -> Self {
        LibError::Lua(e)
    }
}

/// The result of a library function body.
pub(crate) type LResult<T> = Result<T, LibError>;

/// Shorthand for a `luaL_error`.
pub(crate) fn err<T>(msg: impl Into<Vec<u8>>) -> LResult<T> {
    Err(LibError::Msg(msg.into()))
}

/// Shorthand for a `luaL_argerror`.
pub(crate) fn arg_err<T>(narg: usize, msg: impl Into<Vec<u8>>) -> LResult<T> {
    Err(LibError::Arg(narg, msg.into()))
}

/// How many results a function returns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Exactly one value.
    One,
    /// Any number of values: the body returns them in a table.
    Multi,
}

/// The results of a body: one value, or a table holding `n` values (so that
/// thousands of results never exist as `mlua` references at once).
pub(crate) enum Ret {
    One(Value),
    Multi(Table, usize),
}

/// The arguments of a call, with `lua_*`-style accessors (1-based).
pub(crate) struct Args {
    direct: Vec<Value>,
    /// Arguments passed packed in a table (many, or numbers `mlua` would
    /// misread) and their count.
    packed: Option<(Table, usize)>,
}

impl Args {
    /// `lua_gettop`.
    pub(crate) fn len(&self) -> usize {
        match &self.packed {
            Some((_, n)) => *n,
            None => self.direct.len(),
        }
    }

    /// Argument `i` (1-based), `None` past the end (`lua_isnone`).
    pub(crate) fn get(&self, i: usize) -> Option<Value> {
        if i == 0 || i > self.len() {
            return None;
        }
        match &self.packed {
            Some((t, _)) => Some(t.raw_get::<Value>(i).unwrap_or(Value::Nil)),
            None => self.direct.get(i - 1).cloned(),
        }
    }

    /// Argument `i` or nil.
    pub(crate) fn value(&self, i: usize) -> Value {
        self.get(i).unwrap_or(Value::Nil)
    }

    /// The exact double of argument `i` when it is a number.
    pub(crate) fn exact_number(&self, i: usize) -> Option<f64> {
        match self.get(i)? {
            Value::Integer(n) => Some(match &self.packed {
                Some((t, _)) => t.raw_get::<f64>(i).unwrap_or(n as f64),
                None => n as f64,
            }),
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// Drops the arguments past `n` (`lua_settop(L, n)` for n <= top).
    pub(crate) fn truncate(&mut self, n: usize) {
        match &mut self.packed {
            Some((_, len)) => *len = (*len).min(n),
            None => self.direct.truncate(n),
        }
    }
}

/// Lua's name for the type of `v` (`lua_typename(lua_type(v))`).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `luaL_typerror`'s message for argument `i`.
pub(crate) fn type_error<T>(args: &Args, i: usize, expected: &str) -> LResult<T> {
    let got = args.get(i).as_ref().map_or("no value", type_name);
    arg_err(i, format!("{expected} expected, got {got}"))
}

/// `lua_tonumber`: numbers, and strings Lua converts to numbers.
pub(crate) fn to_number(lua: &Lua, v: &Value) -> Option<f64> {
    match v {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        _ => None,
    }
}

/// `luaL_checknumber`, exact.
pub(crate) fn check_number(lua: &Lua, args: &Args, i: usize) -> LResult<f64> {
    if let Some(n) = args.exact_number(i) {
        return Ok(n);
    }
    match args.get(i).and_then(|v| to_number(lua, &v)) {
        Some(n) => Ok(n),
        None => type_error(args, i, "number"),
    }
}

/// 2^63 as a double.
pub(crate) const TWO_63: f64 = (1u64 << 63) as f64;

/// A double cast to a 64-bit integer as x86-64 does it (`cvttsd2si`): out of
/// range and NaN give `i64::MIN`.
pub(crate) fn cast_i64(n: f64) -> i64 {
    if (-TWO_63..TWO_63).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

/// A double cast to a C `int` as x86-64 does it: out of range and NaN give
/// `i32::MIN`.
pub(crate) fn cast_i32(n: f64) -> i32 {
    if n > -2_147_483_649.0 && n < 2_147_483_648.0 {
        n as i32
    } else {
        i32::MIN
    }
}

/// `luaL_checkinteger` (Lua 5.1: `lua_Integer` is 64-bit, cast truncates).
pub(crate) fn check_integer(lua: &Lua, args: &Args, i: usize) -> LResult<i64> {
    match args.get(i).and_then(|v| to_number(lua, &v)) {
        Some(n) => Ok(cast_i64(n)),
        None => type_error(args, i, "number"),
    }
}

/// `luaL_optinteger`.
pub(crate) fn opt_integer(lua: &Lua, args: &Args, i: usize, default: i64) -> LResult<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, i),
    }
}

/// `luaL_checklstring`: strings, and numbers converted as Lua does.
pub(crate) fn check_bytes(args: &Args, i: usize) -> LResult<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        // Lua formats numbers with "%.14g".
        Some(Value::Integer(_) | Value::Number(_)) => {
            Ok(fmt_g(args.exact_number(i).unwrap_or(0.0), 14).into_bytes())
        }
        _ => type_error(args, i, "string"),
    }
}

/// Walks a table in `next` order with exact keys, in batches fetched by a
/// Lua helper (so no iterator holds `mlua` references between calls, and
/// keys `mlua` would misread keep their exact value).
pub(crate) struct Pairs {
    step: Function,
    t: Table,
    /// The last key returned (where the next batch starts).
    key: Value,
    batch: Option<Table>,
    exact: Option<Table>,
    n: usize,
    i: usize,
    done: bool,
}

/// Pairs fetched per call of the helper.
const BATCH: usize = 64;

impl Pairs {
    /// The pairs of `t` after key `after` (nil: from the start).
    pub(crate) fn new(reg: &Registrar, t: Table, after: Value) -> Self {
        Pairs {
            step: reg.step.clone(),
            t,
            key: after,
            batch: None,
            exact: None,
            n: 0,
            i: 0,
            done: false,
        }
    }

    /// The next key and value, `None` at the end.
    pub(crate) fn next(&mut self) -> LResult<Option<(Value, Value)>> {
        if self.i == self.n {
            if self.done {
                return Ok(None);
            }
            let (batch, n, exact): (Table, usize, Option<Table>) =
                self.step.call((self.t.clone(), self.key.clone(), BATCH))?;
            self.done = n < BATCH;
            self.batch = Some(batch);
            self.exact = exact;
            self.n = n;
            self.i = 0;
            if n == 0 {
                return Ok(None);
            }
        }
        self.i += 1;
        let i = self.i;
        let Some(batch) = &self.batch else {
            return Ok(None);
        };
        let key = match &self.exact {
            Some(e) => match e.raw_get::<Option<f64>>(i)? {
                Some(x) => Value::Number(x),
                None => batch.raw_get::<Value>(2 * i - 1)?,
            },
            None => batch.raw_get::<Value>(2 * i - 1)?,
        };
        let slot = Value::Integer(2 * i as i64);
        let v = exact_value(batch, &slot, batch.raw_get::<Value>(2 * i)?, true);
        self.key = key.clone();
        Ok(Some((key, v)))
    }

    /// The last key returned (nil before the first).
    pub(crate) fn last_key(&self) -> &Value {
        &self.key
    }
}

/// A Lua table used as a stack for the containers of an iterative walk, so
/// that nesting thousands deep holds one `mlua` reference, not thousands
/// (`mlua` keeps references in one Lua stack of at most `LUAI_MAXCSTACK`
/// slots and panics when it is full).
pub(crate) struct Spill {
    t: Table,
}

impl Spill {
    pub(crate) fn new(lua: &Lua) -> LResult<Self> {
        Ok(Spill {
            t: lua.create_table()?,
        })
    }

    /// Stores `v` at slot `i`.
    pub(crate) fn set(&self, i: usize, v: Value) -> LResult<()> {
        self.t.raw_set(i, v)?;
        Ok(())
    }

    /// Takes the value at slot `i` (exactly, for numbers), clearing it.
    pub(crate) fn take(&self, i: usize) -> LResult<Value> {
        let key = Value::Integer(i as i64);
        let v = exact_value(&self.t, &key, self.t.raw_get::<Value>(i)?, true);
        self.t.raw_set(i, Value::Nil)?;
        Ok(v)
    }
}

/// The Lua side of `Pairs`: up to `max` pairs after `k`, and the keys
/// that are numbers `mlua` would misread, by position.
const STEP: &str = r#"
local next, type = next, type
local eps = 2.220446049250313e-16
return function(t, k, max)
  local batch, exact, n = {}, nil, 0
  while n < max do
    local v
    k, v = next(t, k)
    if k == nil then break end
    n = n + 1
    batch[2 * n - 1] = k
    batch[2 * n] = v
    if type(k) == 'number' and ((k == 0 and 1 / k < 0) or (k ~= 0 and k < eps and k > -eps)) then
      exact = exact or {}
      exact[n] = k
    end
  end
  return batch, n, exact
end
"#;

/// The Rust body of a library function.
type Body = dyn Fn(&Lua, &mut Args) -> LResult<Ret> + 'static;

/// Registers Rust bodies as Lua functions that raise errors like C does.
#[derive(Clone)]
pub(crate) struct Registrar {
    /// The batch helper behind `Pairs`.
    pub(crate) step: Function,
}

/// Whether `mlua` would misread the number `x` (see the module docs).
fn misread(x: f64) -> bool {
    (x == 0.0 && x.is_sign_negative()) || (x != 0.0 && x.abs() < f64::EPSILON)
}

/// Above this many arguments they are passed packed in a table.
const DIRECT_ARGS: i32 = 32;

/// The C function scripts call: runs the body (upvalue 1) and turns its
/// `false, message, level` into a Lua error the way `luaL_error` does, with
/// the caller's position, or its `true, ...` into the results.
///
/// The body is called as `body(false, args...)`, or as `body(true, n, {args})`
/// when there are many arguments or numbers `mlua` would misread.
unsafe extern "C-unwind" fn trampoline(state: *mut ffi::lua_State) -> c_int {
    let n = ffi::lua_gettop(state);
    let mut packed = n > DIRECT_ARGS;
    if !packed {
        for i in 1..=n {
            if ffi::lua_type(state, i) == ffi::LUA_TNUMBER && misread(ffi::lua_tonumber(state, i)) {
                packed = true;
                break;
            }
        }
    }
    let base;
    if packed {
        ffi::lua_createtable(state, n, 0);
        for i in 1..=n {
            ffi::lua_pushvalue(state, i);
            ffi::lua_rawseti(state, -2, i as ffi::lua_Integer);
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_pushboolean(state, 1);
        ffi::lua_pushinteger(state, n as ffi::lua_Integer);
        ffi::lua_pushvalue(state, -4);
        base = n + 1;
        ffi::lua_call(state, 3, ffi::LUA_MULTRET);
    } else {
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_pushboolean(state, 0);
        ffi::lua_insert(state, 2);
        base = 0;
        ffi::lua_call(state, n + 1, ffi::LUA_MULTRET);
    }
    if ffi::lua_toboolean(state, base + 1) == 0 {
        let level = ffi::lua_tointeger(state, base + 3) as c_int;
        if level > 0 {
            ffi::luaL_where(state, 1);
            ffi::lua_pushvalue(state, base + 2);
            ffi::lua_concat(state, 2);
        } else {
            ffi::lua_pushvalue(state, base + 2);
        }
        ffi::lua_error(state);
    }
    if ffi::lua_toboolean(state, ffi::lua_upvalueindex(2)) == 0 {
        return 1;
    }
    // Multi: [ok, table, count] -> the table's values.
    let count = ffi::lua_tointeger(state, base + 3) as c_int;
    ffi::lua_settop(state, base + 2);
    ffi::lua_replace(state, 1);
    ffi::lua_settop(state, 1);
    if ffi::lua_checkstack(state, count) == 0 {
        ffi::lua_pushstring(state, c"stack overflow (too many results)".as_ptr());
        ffi::lua_error(state);
    }
    for i in 1..=count {
        ffi::lua_rawgeti(state, 1, i as ffi::lua_Integer);
    }
    count
}

impl Registrar {
    /// Prepares registration in `lua`.
    pub(crate) fn new(lua: &Lua) -> mlua::Result<Self> {
        let step = lua.load(STEP).set_name("=libs").call::<Function>(())?;
        Ok(Registrar { step })
    }

    /// Sets `table[name]` to a function running `body`.
    pub(crate) fn add(
        &self,
        lua: &Lua,
        table: &Table,
        name: &str,
        shape: Shape,
        body: impl Fn(&Lua, &mut Args) -> LResult<Ret> + 'static,
    ) -> mlua::Result<()> {
        let body: Box<Body> = Box::new(body);
        let raw = lua.create_function(move |lua, mv: MultiValue| {
            let mut values = mv.into_vec();
            let packed = matches!(values.first(), Some(Value::Boolean(true)));
            let args = if packed {
                let n = match values.get(1) {
                    Some(Value::Integer(n)) => *n as usize,
                    _ => 0,
                };
                match values.get(2) {
                    Some(Value::Table(t)) => Args {
                        direct: Vec::new(),
                        packed: Some((t.clone(), n)),
                    },
                    _ => Args {
                        direct: Vec::new(),
                        packed: None,
                    },
                }
            } else {
                values.drain(..1.min(values.len()));
                Args {
                    direct: values,
                    packed: None,
                }
            };
            let mut args = args;
            let out = match body(lua, &mut args) {
                Ok(Ret::One(v)) => vec![Value::Boolean(true), v],
                Ok(Ret::Multi(t, n)) => vec![
                    Value::Boolean(true),
                    Value::Table(t),
                    Value::Integer(n as i64),
                ],
                Err(LibError::Lua(e)) => return Err(e),
                Err(e) => {
                    let (msg, level) = match e {
                        LibError::Msg(m) => (m, 1),
                        LibError::Raw(m) => (m, 0),
                        LibError::Arg(narg, m) => (arg_message(lua, narg, &m), 1),
                        LibError::Lua(_) => unreachable!("returned above"),
                    };
                    vec![
                        Value::Boolean(false),
                        Value::String(lua.create_string(msg)?),
                        Value::Integer(level),
                    ]
                }
            };
            Ok(MultiValue::from_vec(out))
        })?;
        let multi = shape == Shape::Multi;
        // SAFETY: pops the two upvalues exec_raw pushed and pushes one
        // closure over `trampoline`, which only uses the Lua C API.
        let f: Function = unsafe {
            lua.exec_raw((raw, multi), |state| {
                ffi::lua_pushcclosure(state, trampoline, 2);
            })?
        };
        table.raw_set(name, f)
    }
}

/// `luaL_argerror`'s message: the function's name comes from the frame that
/// called it (level 1 from the Rust body is the trampoline).
fn arg_message(lua: &Lua, narg: usize, msg: &[u8]) -> Vec<u8> {
    let (name, what) = match lua.inspect_stack(1) {
        Some(d) => {
            let names = d.names();
            (
                names.name.map(|n| n.into_owned()),
                names.name_what.unwrap_or(""),
            )
        }
        None => (None, ""),
    };
    let mut narg = narg as i64;
    let name = name.unwrap_or_else(|| "?".into());
    let mut out = if what == "method" && narg == 1 {
        format!("calling '{name}' on bad self (").into_bytes()
    } else {
        if what == "method" {
            narg -= 1;
        }
        format!("bad argument #{narg} to '{name}' (").into_bytes()
    };
    out.extend_from_slice(msg);
    out.push(b')');
    out
}

/// `t[key]` read again as an exact double when `mlua` rounded it to `0`
/// (see the module documentation); `raw` chooses `rawget` over `gettable`.
pub(crate) fn exact_value(t: &Table, key: &Value, v: Value, raw: bool) -> Value {
    if let Value::Integer(0) = v {
        let n = if raw {
            t.raw_get::<f64>(key.clone())
        } else {
            t.get::<f64>(key.clone())
        };
        if let Ok(n) = n {
            return Value::Number(n);
        }
    }
    v
}

/// `lua_pushnumber` of a C double, as the `Value` Lua will see.
pub(crate) fn num(n: f64) -> Value {
    Value::Number(n)
}

/// A Lua string value from bytes.
pub(crate) fn bytes(lua: &Lua, b: &[u8]) -> LResult<Value> {
    Ok(Value::String(lua.create_string(b)?))
}

/// Formats `x` like C's `printf("%.{prec}g", x)` (glibc output): the
/// shared `format_g`, with glibc's sign on NaN (`-nan`).
pub(crate) fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    ferrokv_resp::encode::format_g(x, prec)
}

/// Helpers of the libraries' unit tests: a fresh Lua with the four
/// libraries, a chunk's string result, a chunk's error, a chunk's bytes in
/// hex.
#[cfg(test)]
pub(crate) mod testing {
    use mlua::Lua;

    pub fn eval(code: &str) -> String {
        let lua = Lua::new();
        super::open(&lua).unwrap();
        lua.load(code)
            .set_name("@user_script")
            .eval::<String>()
            .unwrap()
    }

    pub fn error(code: &str) -> String {
        eval(&format!(
            "local ok, e = pcall(function() {code} end) assert(not ok) return e"
        ))
    }

    pub fn hex(code: &str) -> String {
        eval(&format!(
            "local s = {code} return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_matches_printf() {
        let cases: &[(f64, usize, &str)] = &[
            (0.0, 14, "0"),
            (-0.0, 14, "-0"),
            (1.0, 14, "1"),
            (0.1, 14, "0.1"),
            (1.0 / 3.0, 14, "0.33333333333333"),
            (1e14, 14, "1e+14"),
            (123456789012345.0, 14, "1.2345678901234e+14"),
            (99999999999999.0, 14, "99999999999999"),
            (999999999999999.0, 14, "1e+15"),
            (0.0001, 14, "0.0001"),
            (0.00001, 14, "1e-05"),
            (1e-300, 14, "1e-300"),
            (1.5, 1, "2"),
            (2.5, 1, "2"),
            (-12.5, 3, "-12.5"),
            (f64::INFINITY, 14, "inf"),
            (f64::NEG_INFINITY, 14, "-inf"),
        ];
        for (x, p, want) in cases {
            assert_eq!(fmt_g(*x, *p), *want, "{x} %.{p}g");
        }
    }

    #[test]
    fn deep_input_needs_no_deep_native_stack() {
        // The walks are iterative: a small thread stack is enough.
        let t = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let lua = Lua::new();
                open(&lua).unwrap();
                lua.load(
                    "cjson.encode_max_depth(100000) cjson.decode_max_depth(100000)
                     local t = {} for i = 1, 7000 do t = {t} end
                     local s = cjson.encode(t)
                     assert(#cjson.encode(cjson.decode(s)) == #s)
                     local m = string.rep('\\145', 3900) .. '\\1'
                     assert(type(cmsgpack.unpack(m)) == 'table')",
                )
                .exec()
                .unwrap();
            })
            .unwrap();
        t.join().unwrap();
    }

    #[test]
    /// Also through a tail call (`return cjson.decode(..)`): the position
    /// is the script's.
    fn errors_are_strings_with_position_and_pcall_catches_them() {
        let lua = Lua::new();
        open(&lua).unwrap();
        let msg: String = lua
            .load("local ok, e = pcall(function() return cjson.decode('x') end) return e")
            .set_name("@user_script")
            .eval()
            .unwrap();
        assert_eq!(
            msg,
            "user_script:1: Expected value but found invalid token at character 1"
        );
        let msg: String = lua
            .load("local ok, e = pcall(function() return bit.band() end) return e")
            .set_name("@user_script")
            .eval()
            .unwrap();
        assert_eq!(
            msg,
            "user_script:1: bad argument #1 to 'band' (number expected, got no value)"
        );
        // Called directly by pcall: no Lua caller, no position, no name.
        let msg: String = lua
            .load("local ok, e = pcall(bit.band) return e")
            .eval()
            .unwrap();
        assert_eq!(
            msg,
            "bad argument #1 to '?' (number expected, got no value)"
        );
    }
}
