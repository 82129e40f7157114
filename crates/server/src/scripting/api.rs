//! The `redis` table scripts see, and Redis's `math.random`.
//!
//! `redis.call` is a small Lua function over a Rust one (`raw`) that
//! returns the reply and whether it is an error: a Lua function can raise
//! the error *table* Redis raises (`{err = "ERR ..."}`), which a Rust
//! callback cannot. `redis.pcall` is the Rust function itself.

use super::engine::Kind;
use super::run;
use mlua::{Lua, MultiValue, Table, Value};
use std::os::raw::{c_char, c_int};

/// `redis.call` / `redis.pcall`: C functions that do the whole call with
/// Lua's C API.
///
/// Why not mlua functions: mlua reads a Lua number within `f64::EPSILON`
/// of an integer as that integer (`-0`, `1e-300` would reach the command
/// as `0`), a Rust callback can only raise a Rust error object (not the
/// error table Redis raises), and every value mlua creates or sets goes
/// through a protected call (a closure allocated and a `pcall` per string
/// or table field), which made a script's `redis.call` cost more than the
/// command it runs. Why not a Lua wrapper: `return redis.call(...)` would
/// tail-call it, and the error would lose the script's line.
fn call_closure(lua: &Lua, raise: bool) -> mlua::Result<mlua::Function> {
    // SAFETY: pops the upvalue exec_raw pushed and pushes one closure over
    // `call_trampoline`, which only uses the Lua C API.
    unsafe {
        lua.exec_raw(raise, |state| {
            mlua::ffi::lua_pushcclosure(state, call_trampoline, 1);
        })
    }
}

/// Pushes `code + " " + text` (CR/LF around `text` trimmed): the `err`
/// field Redis's `luaPushErrorBuff` builds from "-CODE text" or "text".
/// # Safety
/// `state` is the running Lua state, inside a C function.
pub unsafe fn push_error_table_raw(
    state: *mut mlua::ffi::lua_State,
    msg: &[u8],
    ignore_stats: bool,
) {
    use mlua::ffi;
    let (code, text) = split_error(msg);
    ffi::lua_createtable(state, 0, 2);
    ffi::lua_pushlstring(state, code.as_ptr() as *const c_char, code.len());
    ffi::lua_pushlstring(state, c" ".as_ptr(), 1);
    ffi::lua_pushlstring(state, text.as_ptr() as *const c_char, text.len());
    ffi::lua_concat(state, 3);
    ffi::lua_setfield(state, -2, c"err".as_ptr());
    if ignore_stats {
        ffi::lua_pushboolean(state, 1);
        ffi::lua_setfield(state, -2, c"ignore_error_stats_update".as_ptr());
    }
}

/// An argument buffer and the `(start, len)` ranges of the arguments in it.
type ArgBuffers = (Vec<u8>, Vec<(usize, usize)>);

thread_local! {
    /// The argument buffers of `redis.call`, reused from call to call.
    static CALL_ARGS: std::cell::Cell<ArgBuffers> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// Argument bytes kept for the next `redis.call` (a bigger buffer is freed).
const CALL_ARGS_KEPT: usize = 64 * 1024;

/// The C side of [`call_closure`]. No Rust value with a destructor is
/// alive across a call that may raise (Lua errors unwind by `longjmp`):
/// the arguments are gathered and the command run in a block of their
/// own, and the reply is read from buffers the server owns.
unsafe extern "C-unwind" fn call_trampoline(state: *mut mlua::ffi::lua_State) -> c_int {
    use mlua::ffi;
    let raise = ffi::lua_toboolean(state, ffi::lua_upvalueindex(1)) != 0;
    let n = ffi::lua_gettop(state);
    ffi::luaL_checkstack(state, 8, std::ptr::null());
    let mut bad_type = false;
    for i in 1..=n {
        match ffi::lua_type(state, i) {
            // `%.17g`, not Lua's `%.14g`, so no precision is lost.
            ffi::LUA_TNUMBER => {
                let v = ffi::lua_tonumber(state, i);
                let mut int = itoa::Buffer::new();
                let mut buf = [0u8; 40];
                let text: &[u8] = if let Some(i) = ferrokv_resp::encode::integral_g(v, 17) {
                    int.format(i).as_bytes()
                } else {
                    let text = ferrokv_resp::encode::format_g(v, 17);
                    let len = text.len().min(buf.len());
                    buf[..len].copy_from_slice(&text.as_bytes()[..len]);
                    &buf[..len]
                };
                ffi::lua_pushlstring(state, text.as_ptr() as *const c_char, text.len());
                ffi::lua_replace(state, i);
            }
            ffi::LUA_TSTRING => {}
            _ => bad_type = true,
        }
    }
    let refusal: Option<&'static [u8]> = if n == 0 {
        Some(b"Please specify at least one argument for this redis lib call")
    } else if bad_type {
        Some(b"Lua redis lib command arguments must be strings or integers")
    } else {
        None
    };
    if let Some(msg) = refusal {
        push_error_table_raw(state, msg, false);
        if raise {
            ffi::lua_error(state);
        }
        return 1;
    }
    let outcome = {
        // Strings stay on the Lua stack while the command runs; reading
        // them allocates nothing.
        // One buffer of the arguments, as `Args` wants (kept between
        // calls: no allocation per call).
        let (mut buf, mut ranges) = CALL_ARGS.with(|c| c.take());
        buf.clear();
        ranges.clear();
        for i in 1..=n {
            let mut len = 0;
            let p = ffi::lua_tolstring(state, i, &mut len) as *const u8;
            ranges.push((buf.len(), len));
            buf.extend_from_slice(std::slice::from_raw_parts(p, len));
        }
        let outcome = super::run::call_from_lua(ferrokv_resp::Args::new(&buf, &ranges));
        if buf.capacity() <= CALL_ARGS_KEPT {
            CALL_ARGS.with(|c| c.set((buf, ranges)));
        }
        outcome
    };
    let (reply, reply_len, err, err_len) = super::run::call_result();
    match outcome {
        super::run::CallOutcome::NotRunning => {
            push_error_table_raw(
                state,
                b"redis.call/pcall can only be called inside a script invocation",
                false,
            );
            ffi::lua_error(state);
        }
        super::run::CallOutcome::Refused => {
            push_error_table_raw(state, std::slice::from_raw_parts(err, err_len), true);
            if raise {
                ffi::lua_error(state);
            }
            1
        }
        super::run::CallOutcome::Replied => {
            let reply = std::slice::from_raw_parts(reply, reply_len);
            let mut pos = 0;
            if !super::convert::push_reply(state, reply, &mut pos, 0) {
                ffi::lua_settop(state, n);
                push_error_table_raw(state, b"reached lua stack limit", false);
                ffi::lua_error(state);
            }
            if raise && reply.first() == Some(&b'-') {
                ffi::lua_error(state);
            }
            1
        }
    }
}

/// The sandbox's `pcall` underneath Redis's conversion of error tables:
/// Lua 5.1's `pcall` pushes its status past the frame's reserved stack
/// when the call returned many results (`pcall(unpack, t)`), which Lua's
/// API check aborts on; this one makes room first.
pub fn safe_pcall(lua: &Lua) -> mlua::Result<mlua::Function> {
    // SAFETY: pushes one C function that only uses the Lua C API.
    unsafe {
        lua.exec_raw((), |state| {
            mlua::ffi::lua_pushcfunction(state, pcall_trampoline);
        })
    }
}

unsafe extern "C-unwind" fn pcall_trampoline(
    state: *mut mlua::ffi::lua_State,
) -> std::os::raw::c_int {
    use mlua::ffi;
    ffi::luaL_checkany(state, 1);
    let n = ffi::lua_gettop(state);
    let status = ffi::lua_pcall(state, n - 1, ffi::LUA_MULTRET, 0);
    if ffi::lua_checkstack(state, 1) == 0 {
        ffi::lua_settop(state, 0);
        ffi::lua_pushboolean(state, 0);
        ffi::lua_pushstring(state, c"stack overflow (too many results)".as_ptr());
        return 2;
    }
    ffi::lua_pushboolean(state, (status == 0) as std::os::raw::c_int);
    ffi::lua_insert(state, 1);
    ffi::lua_gettop(state)
}

/// Redis's log levels (`LL_DEBUG` ... `LL_WARNING`).
const LOG_LEVELS: [(&str, i64); 4] = [
    ("LOG_DEBUG", 0),
    ("LOG_VERBOSE", 1),
    ("LOG_NOTICE", 2),
    ("LOG_WARNING", 3),
];

/// `PROPAGATE_AOF` / `PROPAGATE_REPL`.
pub const REPL_AOF: u8 = 1;
pub const REPL_REPLICA: u8 = 2;
pub const REPL_ALL: u8 = REPL_AOF | REPL_REPLICA;

/// Redis's error table for `msg`, as `luaPushErrorBuff` builds it: a
/// leading `-CODE ` gives the code, otherwise `ERR`; trailing CR/LF cut.
pub fn error_table(lua: &Lua, msg: &str) -> mlua::Result<Table> {
    error_table_bytes(lua, msg.as_bytes())
}

/// [`error_table`] for a message of any bytes.
pub fn error_table_bytes(lua: &Lua, msg: &[u8]) -> mlua::Result<Table> {
    let (code, text) = split_error(msg);
    let mut full = code.to_vec();
    full.push(b' ');
    full.extend_from_slice(text);
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(&full)?)?;
    Ok(t)
}

/// The code and text of "-CODE text" (or "text", code `ERR`), the text's
/// CR/LF at both ends trimmed (Redis's `luaPushErrorBuff`).
fn split_error(msg: &[u8]) -> (&[u8], &[u8]) {
    let (code, text): (&[u8], &[u8]) = match msg.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", msg),
    };
    let is_crlf = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = text.iter().position(|c| !is_crlf(c)).unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|c| !is_crlf(c))
        .map_or(start, |i| i + 1);
    (code, &text[start..end.max(start)])
}

/// "user_script:3: " for the Lua code that called the running Rust
/// function (what `luaL_error` prefixes), or "" when it is not Lua code.
pub fn where_prefix(lua: &Lua) -> String {
    match lua.inspect_stack(1) {
        Some(d) => {
            let line = d.curr_line();
            let src = d.source();
            match (src.short_src, line > 0) {
                (Some(s), true) => format!("{s}:{line}: "),
                _ => String::new(),
            }
        }
        None => String::new(),
    }
}

/// A `luaL_error`-style error: the caller's position, then `msg`.
pub fn lua_error(lua: &Lua, msg: &str) -> mlua::Error {
    mlua::Error::runtime(format!("{}{msg}", where_prefix(lua)))
}

/// Raises Redis's error table (through the `raise` helper the sandbox
/// keeps): `redis.log` and friends raise tables, not strings.
fn raise_table(lua: &Lua, msg: &str) -> mlua::Result<MultiValue> {
    let t = error_table(lua, msg)?;
    Err(mlua::Error::external(RaisedTable(
        lua.create_registry_value(t)?,
    )))
}

/// An error table raised from Rust: the error handler unwraps it.
#[derive(Debug)]
pub struct RaisedTable(pub mlua::RegistryKey);

impl std::fmt::Display for RaisedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error table")
    }
}

impl std::error::Error for RaisedTable {}

/// Builds the `redis` table for an engine of `kind`.
pub fn create(lua: &Lua, kind: Kind) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set("call", call_closure(lua, true)?)?;
    let pcall = call_closure(lua, false)?;
    redis.raw_set("pcall", pcall)?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, args: MultiValue| log(lua, args))?,
    )?;
    for (name, level) in LOG_LEVELS {
        redis.raw_set(name, level)?;
    }
    redis.raw_set("REDIS_VERSION", crate::REDIS_COMPAT_VERSION)?;
    redis.raw_set(
        "REDIS_VERSION_NUM",
        version_num(crate::REDIS_COMPAT_VERSION),
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise_table(lua, "redis.setresp() requires one argument.");
            }
            let v = number(lua, &args[0]).unwrap_or(0.0) as i64;
            if v != 2 && v != 3 {
                return raise_table(lua, "RESP version must be 2 or 3.");
            }
            if !run::set_resp(lua, v as u8) {
                return raise_table(
                    lua,
                    "redis.setresp can only be called inside a script invocation",
                );
            }
            Ok(MultiValue::new())
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise_table(lua, "wrong number of arguments");
            }
            let s = bytes_of(&args[0]).unwrap_or_default();
            let hex = crate::scripting::cache::sha1_hex(&s);
            Ok(MultiValue::from_iter([Value::String(
                lua.create_string(hex)?,
            )]))
        })?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| {
            let Some(msg) = single_string(&args) else {
                return Ok(Value::Table(error_table(
                    lua,
                    "wrong number or type of arguments",
                )?));
            };
            // A C string to Redis: up to the first NUL.
            let msg = msg.split(|&c| c == 0).next().unwrap_or(&[]);
            let mut m = Vec::with_capacity(msg.len() + 1);
            if !msg.starts_with(b"-") {
                m.push(b'-');
            }
            m.extend_from_slice(msg);
            Ok(Value::Table(error_table_bytes(lua, &m)?))
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| {
            let Some(msg) = single_string(&args) else {
                return Ok(Value::Table(error_table(
                    lua,
                    "wrong number or type of arguments",
                )?));
            };
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(&msg)?)?;
            Ok(Value::Table(t))
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise_table(lua, "redis.set_repl() requires two arguments.");
            }
            let flags = number(lua, &args[0]).unwrap_or(0.0) as i64;
            if flags & !(REPL_ALL as i64) != 0 {
                return raise_table(
                    lua,
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            if !run::set_repl(lua, flags as u8) {
                return raise_table(
                    lua,
                    "redis.set_repl can only be called inside a script invocation",
                );
            }
            Ok(MultiValue::new())
        })?,
    )?;
    for (name, v) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", REPL_AOF),
        ("REPL_SLAVE", REPL_REPLICA),
        ("REPL_REPLICA", REPL_REPLICA),
        ("REPL_ALL", REPL_ALL),
    ] {
        redis.raw_set(name, v)?;
    }
    // Effects replication is the only kind since 7.0: always on.
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return raise_table(
                    lua,
                    "Please specify at least one argument for this redis lib call",
                );
            }
            let Some(name) = bytes_of(&args[0]) else {
                return raise_table(
                    lua,
                    "Lua redis lib command arguments must be strings or integers",
                );
            };
            if !run::command_exists(lua, &name) {
                return raise_table(lua, "Invalid command passed to redis.acl_check_cmd()");
            }
            // One user with every permission until ACLs exist.
            Ok(MultiValue::from_iter([Value::Boolean(true)]))
        })?,
    )?;
    if kind == Kind::Eval {
        // The debugger's calls: no-ops outside `SCRIPT DEBUG`.
        redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
        redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    }
    if kind == Kind::Function {
        redis.raw_set(
            "register_function",
            lua.create_function(|lua, args: MultiValue| run::register_function(lua, args))?,
        )?;
    }
    Ok(redis)
}

/// `redis.log(level, msg, ...)`.
fn log(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() < 2 {
        return raise_table(lua, "redis.log() requires two arguments or more.");
    }
    let Some(level) = number(lua, &args[0]) else {
        return raise_table(lua, "First argument must be a number (log level).");
    };
    let level = level as i64;
    if !(0..=3).contains(&level) {
        return raise_table(lua, "Invalid debug level.");
    }
    let parts: Vec<String> = args
        .iter()
        .skip(1)
        .filter_map(bytes_of)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    let msg = parts.join(" ");
    match level {
        0 | 1 => tracing::debug!("{msg}"),
        2 => tracing::info!("{msg}"),
        _ => tracing::warn!("{msg}"),
    }
    Ok(MultiValue::new())
}

/// `lua_tonumber`: numbers, and strings Lua reads as numbers (Lua's own
/// conversion, shared with the bundled libraries).
fn number(lua: &Lua, v: &Value) -> Option<f64> {
    super::libs::to_number(lua, v)
}

/// `lua_tolstring`: strings, and numbers as Lua prints them (`%.14g`).
pub fn bytes_of(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(ferrokv_resp::encode::format_g(*i as f64, 14).into_bytes()),
        Value::Number(n) => Some(ferrokv_resp::encode::format_g(*n, 14).into_bytes()),
        _ => None,
    }
}

fn single_string(args: &MultiValue) -> Option<Vec<u8>> {
    if args.len() != 1 {
        return None;
    }
    match &args[0] {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// `7.0.15` as Redis's `REDIS_VERSION_NUM` (`0x00070f`).
fn version_num(v: &str) -> i64 {
    let mut parts = v.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    (a << 16) | (b << 8) | c
}

/// Redis's `redisLrand48` state: the 48-bit generator of POSIX `lrand48`,
/// so `math.random` gives Redis's sequence for the same seed.
pub struct Rand48(pub u64);

impl Rand48 {
    const A: u64 = 0x5DEE_CE66D;
    const C: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;
    /// `REDIS_LRAND48_MAX`.
    pub const MAX: i64 = i32::MAX as i64;

    /// The state before any seeding (`x = {0x330E, 0xABCD, 0x1234}`).
    pub const INITIAL: Rand48 = Rand48(0x1234_ABCD_330E);

    pub fn seed(seed: i32) -> Self {
        Rand48(((seed as u32 as u64) << 16 | 0x330E) & Self::MASK)
    }

    pub fn next_value(&mut self) -> i64 {
        self.0 = (self.0.wrapping_mul(Self::A).wrapping_add(Self::C)) & Self::MASK;
        (self.0 >> 17) as i64
    }
}

/// `luaL_checkint` of argument `n` (1-based) of `fname`.
fn check_int(lua: &Lua, args: &MultiValue, n: usize, fname: &str) -> mlua::Result<i64> {
    match args.get(n - 1).and_then(|v| number(lua, v)) {
        Some(v) => Ok(v as i64),
        None => {
            let got = match args.get(n - 1) {
                None => "no value".to_string(),
                Some(v) => v.type_name().to_string(),
            };
            Err(lua_error(
                lua,
                &format!("bad argument #{n} to '{fname}' (number expected, got {got})"),
            ))
        }
    }
}

/// Replaces `math.random` and `math.randomseed` with Redis's.
pub fn replace_math_random(lua: &Lua) -> mlua::Result<()> {
    // The generator is the server's (`Scripting::rand`), shared by both
    // engines and kept across SCRIPT FLUSH, as Redis's global one.
    let math: Table = lua.globals().raw_get("math")?;
    math.raw_set(
        "random",
        lua.create_function(|lua, args: MultiValue| {
            let r = run::with_rand(lua, |rng| {
                (rng.next_value() % Rand48::MAX) as f64 / Rand48::MAX as f64
            })
            .ok_or_else(|| {
                lua_error(
                    lua,
                    "math.random can only be called inside a script invocation",
                )
            })?;
            match args.len() {
                0 => Ok(r),
                1 => {
                    let u = check_int(lua, &args, 1, "random")?;
                    if u < 1 {
                        return Err(lua_error(
                            lua,
                            "bad argument #1 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * u as f64).floor() + 1.0)
                }
                2 => {
                    let l = check_int(lua, &args, 1, "random")?;
                    let u = check_int(lua, &args, 2, "random")?;
                    if l > u {
                        return Err(lua_error(
                            lua,
                            "bad argument #2 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * (u - l + 1) as f64).floor() + l as f64)
                }
                _ => Err(lua_error(lua, "wrong number of arguments")),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(|lua, args: MultiValue| {
            let s = check_int(lua, &args, 1, "randomseed")?;
            run::with_rand(lua, |rng| *rng = Rand48::seed(s as i32)).ok_or_else(|| {
                lua_error(
                    lua,
                    "math.randomseed can only be called inside a script invocation",
                )
            })?;
            Ok(())
        })?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_gives_redis_sequence_after_randomseed() {
        // Redis 7.0.15: `math.randomseed(3) return {math.random(100),
        // math.random(100), math.random(1000000)}` → 79 87 311709
        let mut r = Rand48::seed(3);
        let mut next = |u: f64| {
            let v = (r.next_value() % Rand48::MAX) as f64 / Rand48::MAX as f64;
            (v * u).floor() + 1.0
        };
        assert_eq!(next(100.0), 79.0);
        assert_eq!(next(100.0), 87.0);
        assert_eq!(next(1000000.0), 311709.0);
    }

    #[test]
    fn error_tables_take_the_code_from_the_message() {
        let lua = Lua::new();
        let t = error_table(&lua, "-WRONGTYPE Operation\r\n").unwrap();
        assert_eq!(t.get::<String>("err").unwrap(), "WRONGTYPE Operation");
        let t = error_table(&lua, "plain").unwrap();
        assert_eq!(t.get::<String>("err").unwrap(), "ERR plain");
        assert_eq!(version_num("7.0.15"), 458767);
    }
}
