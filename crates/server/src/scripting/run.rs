//! Running one script or function (Redis's `scriptPrepareForRun`,
//! `luaCallFunction`, `scriptCall`).
//!
//! # The run state, and the one unsafe spot
//! A script runs inside the `EVAL`/`FCALL` handler, which holds the server
//! and the caller mutably. Lua calls back into Rust — `redis.call`, the
//! instruction hook — and those callbacks need the same server. They reach
//! it through [`RunPtrs`], two raw pointers made from the handler's own
//! `&mut` borrows and stored in the Lua state's app data for the length of
//! the call, removed before the handler touches the server again. While
//! Lua runs, the handler does nothing but wait for it, everything runs on
//! the one execution thread, and callbacks never overlap (a Lua callback
//! does not run Lua, the hook is not called inside a callback): at any
//! moment exactly one piece of code uses the server, as with any command.
//! The callbacks rebuild `&mut Server` from the pointer for the length of
//! one callback only.

use super::api::{error_table, REPL_ALL, REPL_AOF, REPL_REPLICA};
use super::convert::{self, Out};
use super::engine::{Engine, Kind, SANDBOX_CHUNK};
use super::{sflags, Running};
use crate::commands::{flags, Ctx};
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::{Args, Protocol};
use mlua::{HookTriggers, Lua, MultiValue, Table, Value, VmState};
use std::time::{Duration, Instant};

/// The server and the script client, while a script runs (see the module
/// documentation for why this is sound).
#[derive(Clone, Copy)]
pub struct RunPtrs {
    srv: *mut Server,
    client: *mut Client,
}

thread_local! {
    /// The run in progress on this (the execution) thread.
    static CURRENT: std::cell::Cell<Option<RunPtrs>> = const { std::cell::Cell::new(None) };
    /// The script is being killed: the hook fires on every line.
    static KILLING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// `redis.setresp` of the script running (2 or 3).
    static SCRIPT_RESP: std::cell::Cell<u8> = const { std::cell::Cell::new(2) };
}

/// The run in progress, if any.
pub fn current() -> Option<RunPtrs> {
    CURRENT.with(|c| c.get())
}

fn triggers() -> HookTriggers {
    if KILLING.with(|k| k.get()) {
        HookTriggers::new().every_line()
    } else {
        HookTriggers::new().every_nth_instruction(super::engine::HOOK_EVERY)
    }
}

/// Hooks the running Lua thread again (coroutines: mlua keeps one hooked
/// thread, so the sandbox's `coroutine` functions call this on every
/// switch).
pub fn rehook(lua: &Lua) {
    lua.set_hook(triggers(), hook);
}

/// What one invocation runs.
pub struct Invocation<'a> {
    /// The sha (EVAL) or the function's name (FCALL), for errors.
    pub name: String,
    /// The script or function, as the id of its slot in its engine's
    /// registry (kept there by the cache or the library while it runs).
    pub func: std::os::raw::c_int,
    pub keys: Args<'a>,
    pub args: Args<'a>,
    /// `sflags` of the script or function.
    pub flags: u32,
    /// `EVAL_RO` / `EVALSHA_RO` / `FCALL_RO`.
    pub ro: bool,
    /// The command that runs it (`FUNCTION STATS` shows it).
    pub command: Option<Args<'a>>,
}

/// The error of `scriptPrepareForRun` when the script may not run now.
fn prepare_refusal(srv: &mut Server, caller: &Client, inv: &Invocation) -> Option<String> {
    let from_master = srv.repl.master_client_id() == Some(caller.id);
    let stale = srv.repl.link.as_ref().is_some_and(|l| !l.is_up())
        && !srv.config.repl.replica_serve_stale_data;
    if inv.flags & sflags::EVAL_COMPAT != 0 {
        if stale {
            return Some(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                    .into(),
            );
        }
        return None;
    }
    if inv.flags & sflags::NO_CLUSTER != 0 && srv.cluster.is_some() {
        return Some("ERR Can not run script on cluster, 'no-cluster' flag is set.".into());
    }
    if stale && inv.flags & sflags::ALLOW_STALE == 0 {
        return Some("MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script.".into());
    }
    if inv.flags & sflags::NO_WRITES == 0 {
        if srv.repl.is_replica() && srv.config.repl.replica_read_only && !from_master {
            return Some("READONLY Can not run script with write flag on readonly replica".into());
        }
        if srv.writes_refused_for_persistence() && !from_master {
            return Some(match srv.aof.as_ref().and_then(|a| a.write_error.as_ref()) {
                Some(e) => format!("MISCONF Errors writing to the AOF file: {e}"),
                None => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.".into(),
            });
        }
        if inv.ro {
            return Some("ERR Can not execute a script with write flag using *_ro command.".into());
        }
        if let Some(e) = srv.replication_refusal(caller.id, flags::WRITE) {
            if e.starts_with("NOREPLICAS") {
                return Some(e.into());
            }
        }
    }
    if srv.pre_command_oom && inv.flags & (sflags::ALLOW_OOM | sflags::NO_WRITES) == 0 {
        return Some(
            "OOM allowed memory exceeded. Set the 'allow-oom' flag to run this script.".into(),
        );
    }
    None
}

/// The per-run settings `redis.call` checks.
#[derive(Default)]
pub struct RunSettings {
    pub read_only: bool,
    pub allow_oom: bool,
    /// Memory could not be freed when the script started.
    pub oom_at_start: bool,
    /// `redis.set_repl`.
    pub repl: u8,
    /// What the script's commands propagated, with the targets
    /// `redis.set_repl` had chosen then.
    pub ops: Vec<(u8, usize, Vec<Vec<u8>>)>,
}

/// Runs `inv` for the client in `ctx` and writes its reply.
pub fn run(ctx: &mut Ctx, kind: Kind, mut inv: Invocation) {
    if let Some(e) = prepare_refusal(ctx.srv, ctx.client, &inv) {
        ctx.error(&e);
        return;
    }
    let Some(mut sc) = ctx.srv.scripting.client.take() else {
        ctx.error("ERR a script is already running");
        return;
    };
    let engine: &Engine = match kind {
        Kind::Eval => &ctx.srv.scripting.eval,
        Kind::Function => &ctx.srv.scripting.functions.engine,
    };
    let lua = engine.lua.clone();
    let raw = &engine.raw;
    let (state, entry_id, handler_id) = (raw.state, raw.entry.id(), raw.handler.id());
    let globals_id = match kind {
        Kind::Eval => raw.globals.id(),
        Kind::Function => 0,
    };

    sc.db = ctx.client.db;
    sc.user = ctx.client.user;
    sc.out.proto = Protocol::Resp2;
    sc.out.buf.clear();
    sc.out.error_codes.clear();
    let oom_at_start = ctx.srv.pre_command_oom;
    let read_only = inv.ro || inv.flags & sflags::NO_WRITES != 0;
    let compat = inv.flags & sflags::EVAL_COMPAT != 0;
    let now = Instant::now();
    ctx.srv.scripting.running = Some(Running {
        name: std::mem::take(&mut inv.name),
        is_function: kind == Kind::Function,
        start: now,
        caller_id: ctx.client.id,
        acl_denials: Vec::new(),
        cluster_slot: None,
        allow_cross_slot: inv.flags & sflags::ALLOW_CROSS_SLOT != 0,
        wrote: false,
        kill: false,
        busy: false,
        last_pump: now,
        // SAFETY: `Running` is taken out of the server before this
        // function returns, while the arguments it borrows are alive.
        command: inv
            .command
            .map(|a| unsafe { std::mem::transmute::<Args<'_>, Args<'static>>(a) }),
        settings: RunSettings {
            read_only,
            allow_oom: !compat && inv.flags & sflags::ALLOW_OOM != 0,
            oom_at_start,
            repl: REPL_ALL,
            ops: Vec::new(),
        },
    });
    let nested = ctx.srv.propagation.exec_ops.is_some();
    if !nested {
        ctx.srv.begin_exec_propagation();
    }

    if KILLING.with(|k| k.replace(false)) {
        // The last script was killed: back to the count hook.
        rehook(&lua);
    }
    SCRIPT_RESP.with(|r| r.set(2));
    CURRENT.with(|c| {
        c.set(Some(RunPtrs {
            srv: ctx.srv as *mut Server,
            client: &mut *sc as *mut Client,
        }))
    });
    let eargs = EntryArgs {
        keys: inv.keys,
        argv: inv.args,
        func: inv.func,
        globals: globals_id,
    };
    // The call, with Lua's C API (what Redis's `luaCallFunction` does):
    // the error handler, then `entry` run protected by `lua_pcall`. The
    // result (or the error value) is left on the stack above `top`.
    // SAFETY: `state` is the engine's main thread and no other Lua code
    // runs (mlua keeps the main stack balanced between its calls); the
    // pushes use the stack space checked here and raise nothing;
    // `eargs` lives until `lua_pcall` returns.
    let (top, status) = unsafe {
        use mlua::ffi;
        let top = ffi::lua_gettop(state);
        if ffi::lua_checkstack(state, 4) == 0 {
            (top, -1)
        } else {
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, handler_id as _);
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, entry_id as _);
            ffi::lua_pushlightuserdata(state, &eargs as *const EntryArgs as *mut _);
            (top, ffi::lua_pcall(state, 1, 1, top + 1))
        }
    };
    CURRENT.with(|c| c.set(None));
    let mut running = ctx.srv.scripting.running.take().expect("set above");
    for (why, object) in std::mem::take(&mut running.acl_denials) {
        ctx.srv
            .acl_log(ctx.client, why, crate::acl::log::Context::Lua, object, None);
    }
    sc.out.buf.clear();
    ctx.srv.scripting.client = Some(sc);
    if running.kill {
        ctx.srv.scripting.stats.killed += 1;
        tracing::warn!("Lua script killed by user with SCRIPT KILL.");
    }
    if running.busy {
        tracing::info!(
            "Script {} ended after {:?} busy",
            running.name,
            running.start.elapsed()
        );
    }
    let mut settings = running.settings;
    finish_propagation(ctx.srv, nested, std::mem::take(&mut settings.ops));
    // No explicit GC step per N scripts (Redis steps 50 KB every 50):
    // Lua's incremental collector, paced by allocation, keeps up, and on
    // a small heap the explicit step finished a whole cycle each time
    // (~10% of an EVALSHA of a GET).

    // SHUTDOWN NOSAVE ended the script: the server exits now, and the
    // caller gets no reply (Redis exits from inside the script).
    if ctx.srv.shutdown_requested {
        // SAFETY: back to the stack as it was before the call.
        unsafe { mlua::ffi::lua_settop(state, top) };
        return;
    }
    let caller_proto = ctx.client.out.proto;
    let script_resp3 = false;
    let cap = ctx.client.out.cap;
    let mut out = Out {
        buf: &mut ctx.client.out.buf,
        proto: caller_proto,
        script_resp3,
        error_codes: Vec::new(),
        cap,
        overflowed: false,
    };
    // SAFETY: the result is at the top of the main stack, above `top`
    // (see the call above); `slot` holds `true` and is an existing
    // registry key, so storing into it does not allocate.
    unsafe {
        use mlua::ffi;
        let slot = match kind {
            Kind::Eval => &ctx.srv.scripting.eval.raw.slot,
            Kind::Function => &ctx.srv.scripting.functions.engine.raw.slot,
        };
        if status == -1 {
            convert::write_error(&mut out, "ERR Error running script: Lua stack full", true);
        } else if status == 0 && ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
            out.script_resp3 = running_resp3(&lua);
            convert::scalar_to_reply(&mut out, state, -1);
        } else {
            ffi::lua_rawseti(state, ffi::LUA_REGISTRYINDEX, slot.id() as _);
            let v = lua.registry_value::<Value>(slot).unwrap_or(Value::Nil);
            ffi::lua_pushboolean(state, 1);
            ffi::lua_rawseti(state, ffi::LUA_REGISTRYINDEX, slot.id() as _);
            if status == 0 {
                out.script_resp3 = running_resp3(&lua);
                if let Err(e) = convert::lua_to_reply(&mut out, &v, 0) {
                    convert::write_error(&mut out, format!("ERR {}", lua_error_text(&e)), true);
                }
            } else {
                error_reply(&mut out, &running.name, &v);
            }
        }
        ffi::lua_settop(state, top);
    }
    let (codes, overflowed) = (std::mem::take(&mut out.error_codes), out.overflowed);
    ctx.client.out.error_codes.extend(codes);
    ctx.client.out.overflowed |= overflowed;
}

/// What [`entry`] gets, through a light userdata.
struct EntryArgs<'a> {
    keys: Args<'a>,
    argv: Args<'a>,
    /// Registry id of the function to call.
    func: std::os::raw::c_int,
    /// Registry id of the visible globals (`EVAL`: `KEYS`/`ARGV` are set
    /// there), or 0 (`FCALL`: they are the function's two arguments).
    globals: std::os::raw::c_int,
}

/// The protected part of a run, a C function called by `lua_pcall` with
/// an `EntryArgs`: makes fresh `KEYS`/`ARGV` tables, sets them as
/// globals (`EVAL`) or passes them (`FCALL`), calls the script, returns
/// its one result. An error (a memory error building the tables, or the
/// script's) unwinds to the `lua_pcall`, through Redis's error handler.
///
/// # Safety
/// Called by Lua only, with a live `EntryArgs` as its argument; holds no
/// Rust value with a destructor across a call that may raise.
pub unsafe extern "C-unwind" fn entry(state: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    use std::os::raw::c_char;
    let a = &*(ffi::lua_touserdata(state, 1) as *const EntryArgs);
    ffi::luaL_checkstack(state, 8, std::ptr::null());
    let eval = a.globals != 0;
    if eval {
        ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, a.globals as _);
    }
    for (list, name) in [(a.keys, c"KEYS"), (a.argv, c"ARGV")] {
        ffi::lua_createtable(state, list.len() as i32, 0);
        for (i, s) in list.iter().enumerate() {
            ffi::lua_pushlstring(state, s.as_ptr() as *const c_char, s.len());
            ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
        }
        if eval {
            // globals[name] = table (the globals are at index 2).
            ffi::lua_pushstring(state, name.as_ptr());
            ffi::lua_insert(state, -2);
            ffi::lua_rawset(state, 2);
        }
    }
    ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, a.func as _);
    if eval {
        ffi::lua_call(state, 0, 1);
    } else {
        // func(KEYS, ARGV)
        ffi::lua_insert(state, -3);
        ffi::lua_call(state, 2, 1);
    }
    1
}

/// `redis.setresp(3)` of the script that just ran.
fn running_resp3(_lua: &Lua) -> bool {
    SCRIPT_RESP.with(|r| r.get()) == 3
}

/// The reply to a script that raised `e` (normally Redis's error table,
/// with the location the handler added).
fn error_reply(out: &mut Out, name: &str, e: &Value) {
    let Value::Table(t) = e else {
        convert::write_error(
            out,
            format!("ERR Error running script {name}, execution failure"),
            true,
        );
        return;
    };
    let msg: Vec<u8> = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => {
            let b = s.as_bytes();
            // A C string to Redis: cut at the first NUL.
            b.split(|&c| c == 0).next().unwrap_or(&[]).to_vec()
        }
        Ok(Value::Integer(i)) => i.to_string().into_bytes(),
        Ok(Value::Number(n)) => ferrokv_resp::encode::format_g(n, 14).into_bytes(),
        // Redis 7.0.15 crashes on `error({})`; an error is the sane answer.
        _ => b"ERR the script raised an error object without an 'err' field".to_vec(),
    };
    let ignore = matches!(
        t.raw_get::<Value>("ignore_error_stats_update"),
        Ok(Value::Boolean(true))
    );
    let mut full = msg;
    if let (Ok(Value::String(src)), Ok(line)) =
        (t.raw_get::<Value>("source"), t.raw_get::<Value>("line"))
    {
        let line = match line {
            Value::Integer(i) => Some(i.to_string()),
            Value::Number(n) => Some(ferrokv_resp::encode::format_g(n, 14)),
            Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
            _ => None,
        };
        if let Some(line) = line {
            full.extend_from_slice(format!(" script: {name}, on ").as_bytes());
            full.extend_from_slice(&src.as_bytes());
            full.extend_from_slice(format!(":{line}.").as_bytes());
        }
    }
    convert::write_error(out, &full, !ignore);
}

/// Emits what the script's commands propagated: through the EXEC
/// machinery (one MULTI/EXEC block when more than one command) when every
/// command went everywhere; split by `redis.set_repl`'s targets otherwise.
fn finish_propagation(srv: &mut Server, nested: bool, ops: Vec<(u8, usize, Vec<Vec<u8>>)>) {
    let uniform = ops.iter().all(|(m, _, _)| *m == REPL_ALL);
    if uniform || nested {
        if let Some(exec) = srv.propagation.exec_ops.as_mut() {
            // Inside MULTI/EXEC the whole transaction is one block: targets
            // narrower than "all" go everywhere, "none" nowhere.
            exec.extend(
                ops.into_iter()
                    .filter(|(m, _, _)| *m != 0)
                    .map(|(_, db, argv)| (db, argv)),
            );
        }
        if !nested {
            srv.end_exec_propagation();
        } else {
            srv.propagation.exec_done = Some(false);
        }
        return;
    }
    // Mixed targets: each stream gets its own block.
    srv.propagation.exec_ops = None;
    let mut any = false;
    for (bit, to_aof) in [(REPL_AOF, true), (REPL_REPLICA, false)] {
        let mine: Vec<&(u8, usize, Vec<Vec<u8>>)> =
            ops.iter().filter(|(m, _, _)| m & bit != 0).collect();
        if mine.is_empty() {
            continue;
        }
        any = true;
        let wrap = mine.len() > 1;
        let first = mine[0].1;
        let last = mine[mine.len() - 1].1;
        let feed = |srv: &mut Server, db: usize, argv: &[Vec<u8>]| {
            if to_aof {
                srv.feed_aof(db, argv);
            } else {
                srv.repl_feed(db, argv);
            }
        };
        if wrap {
            feed(srv, first, &[b"MULTI".to_vec()]);
        }
        for (_, db, argv) in &mine {
            feed(srv, *db, argv);
        }
        if wrap {
            feed(srv, last, &[b"EXEC".to_vec()]);
        }
    }
    srv.propagation.exec_done = Some(any);
}

/// The text of an mlua error as Lua would show it.
pub fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(_) => "not enough memory".to_string(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        mlua::Error::WithContext { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// Redis's `__redis__err__handler`: any error becomes an error table
/// `{err=..., source=..., line=...}` naming the script line that raised
/// it (skipping C functions and the sandbox's own Lua).
pub fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let t = match err {
        Value::Table(t) => t,
        Value::Error(e) => match raised_table(lua, &e) {
            Some(t) => t,
            None => error_table(lua, &lua_error_text(&e))?,
        },
        Value::String(s) => {
            let t = lua.create_table()?;
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(&s.as_bytes());
            t.raw_set("err", lua.create_string(&m)?)?;
            t
        }
        Value::Integer(i) => error_table(lua, &i.to_string())?,
        Value::Number(n) => error_table(lua, &ferrokv_resp::encode::format_g(n, 14))?,
        Value::Nil => error_table(lua, "nil")?,
        Value::Boolean(b) => error_table(lua, &b.to_string())?,
        other => error_table(lua, other.type_name())?,
    };
    for level in 1..8 {
        let Some(d) = lua.inspect_stack(level) else {
            break;
        };
        let src = d.source();
        let source = src.source.as_deref().unwrap_or("");
        if src.what == "C" || source == SANDBOX_CHUNK {
            continue;
        }
        t.raw_set("source", source)?;
        t.raw_set("line", d.curr_line())?;
        break;
    }
    Ok(Value::Table(t))
}

/// What Lua code sees of an error raised from Rust: the error table it
/// carries, or an error table of its text.
pub fn unwrap_error(lua: &Lua, e: Value) -> mlua::Result<Value> {
    match e {
        Value::Error(err) => match raised_table(lua, &err) {
            Some(t) => Ok(Value::Table(t)),
            None => Ok(Value::Table(error_table(lua, &lua_error_text(&err))?)),
        },
        other => Ok(other),
    }
}

/// The error table inside an error raised from Rust with
/// [`super::api::RaisedTable`].
fn raised_table(lua: &Lua, e: &mlua::Error) -> Option<Table> {
    match e {
        mlua::Error::CallbackError { cause, .. } => raised_table(lua, cause),
        mlua::Error::WithContext { cause, .. } => raised_table(lua, cause),
        mlua::Error::ExternalError(ext) => {
            let r = ext.downcast_ref::<super::api::RaisedTable>()?;
            lua.registry_value::<Table>(&r.0).ok()
        }
        _ => None,
    }
}

/// The instruction hook: kills a script asked to stop, and past
/// `busy-reply-threshold` serves the other clients (busy.rs).
pub fn hook(lua: &Lua, _debug: mlua::Debug) -> mlua::Result<VmState> {
    if super::function::load_timed_out(lua) {
        let t = error_table(lua, "FUNCTION LOAD timeout")?;
        return Err(mlua::Error::external(super::api::RaisedTable(
            lua.create_registry_value(t)?,
        )));
    }
    let Some(ptrs) = current() else {
        return Ok(VmState::Continue);
    };
    // SAFETY: see the module documentation; the pointer is valid while
    // the app data holds it, and nothing else uses the server now.
    let srv = unsafe { &mut *ptrs.srv };
    let threshold = srv.config.busy_reply_threshold;
    let Some(run) = srv.scripting.running.as_mut() else {
        return Ok(VmState::Continue);
    };
    if run.kill {
        return Err(killed(lua));
    }
    if threshold == 0 || run.start.elapsed() < Duration::from_millis(threshold) {
        return Ok(VmState::Continue);
    }
    if !run.busy {
        run.busy = true;
        let name = run.name.clone();
        let kind = if run.is_function {
            "FUNCTION"
        } else {
            "SCRIPT"
        };
        srv.scripting.stats.busy_scripts += 1;
        tracing::warn!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {kind} KILL command. Script name is: {name}.",
            run.start.elapsed().as_millis()
        );
    }
    let Some(run) = srv.scripting.running.as_mut() else {
        return Ok(VmState::Continue);
    };
    if run.last_pump.elapsed() >= Duration::from_millis(2) {
        run.last_pump = Instant::now();
        crate::busy::pump(srv, crate::busy::Holder::Script);
    }
    let kill = srv.shutdown_requested || srv.scripting.running.as_ref().is_some_and(|r| r.kill);
    if kill {
        if let Some(r) = srv.scripting.running.as_mut() {
            r.kill = true;
        }
        return Err(killed(lua));
    }
    Ok(VmState::Continue)
}

/// The error that ends a killed script; from now on the hook fires on
/// every line, so that `pcall` cannot catch it for long.
fn killed(lua: &Lua) -> mlua::Error {
    KILLING.with(|k| k.set(true));
    rehook(lua);
    match error_table(lua, "Script killed by user with SCRIPT KILL...")
        .and_then(|t| lua.create_registry_value(t))
    {
        Ok(k) => mlua::Error::external(super::api::RaisedTable(k)),
        Err(e) => e,
    }
}

/// Runs `f` on the server's `math.random` generator (`None` outside a run).
pub fn with_rand<R>(_lua: &Lua, f: impl FnOnce(&mut super::api::Rand48) -> R) -> Option<R> {
    let ptrs = current()?;
    // SAFETY: as in `hook`.
    let srv = unsafe { &mut *ptrs.srv };
    Some(f(&mut srv.scripting.rand))
}

/// `redis.setresp`: false outside a run.
pub fn set_resp(_lua: &Lua, v: u8) -> bool {
    let Some(ptrs) = current() else {
        return false;
    };
    // SAFETY: as in `hook`.
    let client = unsafe { &mut *ptrs.client };
    client.out.proto = if v == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    };
    SCRIPT_RESP.with(|r| r.set(v));
    true
}

/// `redis.set_repl`: false outside a run.
pub fn set_repl(_lua: &Lua, v: u8) -> bool {
    let Some(ptrs) = current() else {
        return false;
    };
    // SAFETY: as in `hook`.
    let srv = unsafe { &mut *ptrs.srv };
    match srv.scripting.running.as_mut() {
        Some(r) => {
            r.settings.repl = v;
            true
        }
        None => false,
    }
}

/// Whether `name` is a command (`redis.acl_check_cmd`).
pub fn command_exists(_lua: &Lua, name: &[u8]) -> bool {
    let Some(ptrs) = current() else {
        return false;
    };
    // SAFETY: as in `hook`.
    let srv = unsafe { &*ptrs.srv };
    srv.commands.lookup(name).is_some()
}

/// `redis.register_function`, in the functions engine (functions.rs).
pub fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    super::function::register_function(lua, args)
}

/// What [`call_from_lua`] did.
pub enum CallOutcome {
    /// The command ran: its reply is in the script client's buffer.
    Replied,
    /// Refused before it ran: the message (`luaPushErrorBuff`'s format)
    /// is in `Scripting::call_error`.
    Refused,
    /// No script is running (a library body calling it while loading).
    NotRunning,
}

/// `redis.call` / `redis.pcall`'s work: checks and runs one command as the
/// script client (the arguments already strings). Called from the C
/// trampoline in api.rs, with no Lua value held.
pub fn call_from_lua(argv: Args) -> CallOutcome {
    let Some(ptrs) = current() else {
        return CallOutcome::NotRunning;
    };
    // SAFETY: as in `hook`.
    let srv = unsafe { &mut *ptrs.srv };
    let client = unsafe { &mut *ptrs.client };
    client.out.buf.clear();
    match script_call(srv, client, argv) {
        Ok(()) => CallOutcome::Replied,
        Err(msg) => {
            srv.scripting.call_error = msg.into_bytes();
            CallOutcome::Refused
        }
    }
}

/// The bytes [`call_from_lua`] left: the reply, or the refusal.
///
/// # Safety
/// Only between a `call_from_lua` and the next command the script runs
/// (the trampoline reads them at once).
pub unsafe fn call_result() -> (*const u8, usize, *const u8, usize) {
    match current() {
        Some(p) => {
            // SAFETY: as in `hook`.
            let client = unsafe { &*p.client };
            let srv = unsafe { &*p.srv };
            (
                client.out.buf.as_ptr(),
                client.out.buf.len(),
                srv.scripting.call_error.as_ptr(),
                srv.scripting.call_error.len(),
            )
        }
        None => (std::ptr::null(), 0, std::ptr::null(), 0),
    }
}

/// Checks and runs one command of a script (Redis's `scriptCall`). An
/// `Err` is a refusal, in `luaPushErrorBuff`'s format.
fn script_call(srv: &mut Server, client: &mut Client, argv: Args) -> Result<(), String> {
    let top_level = |i: &usize| !srv.commands.specs[*i].name.contains('|');
    let mut idx = srv
        .commands
        .lookup(argv.get(0))
        .filter(top_level)
        .ok_or("Unknown Redis command called from script")?;
    let mut spec = srv.commands.specs[idx];
    if !spec.subcommands.is_empty() && argv.len() >= 2 {
        idx = srv
            .commands
            .lookup_sub(spec.name, argv.get(1))
            .ok_or("Unknown Redis command called from script")?;
        spec = srv.commands.specs[idx];
    }
    if !spec.arity_ok(argv.len()) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    if spec.has(flags::NOSCRIPT) {
        return Err("This Redis command is not allowed from script".into());
    }
    // Cluster mode: only keys served here, of one slot (Redis's
    // `scriptVerifyClusterState`); our master's stream and the AOF pass.
    if srv.cluster.is_some() && !srv.loading_aof {
        let caller = srv.scripting.running.as_ref().map(|r| r.caller_id);
        if caller.is_some() && srv.repl.master_client_id() != caller {
            crate::cluster::redirect::script_check(srv, client, idx, &argv)?;
        }
    }
    if let Err((why, pos)) = srv.acl.check(client.user, idx, &argv) {
        use crate::acl::Denied;
        srv.acl.count_denial(why);
        let object = match why {
            Denied::Cmd => spec.name.as_bytes().to_vec(),
            _ => argv.get(pos).to_vec(),
        };
        if let Some(run) = srv.scripting.running.as_mut() {
            run.acl_denials.push((why, object));
        }
        return Err(match why {
            Denied::Cmd => "The user executing the script can't run this command or subcommand",
            Denied::Key => "The user executing the script can't access at least one of the keys mentioned in the command arguments",
            Denied::Channel => "The user executing the script can't publish to the channel mentioned in the command",
            Denied::Auth => "The user executing the script is lacking the permissions for the command",
        }
        .into());
    }
    let run = srv
        .scripting
        .running
        .as_ref()
        .ok_or("no script is running")?;
    let caller = run.caller_id;
    if run.settings.read_only && spec.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0 {
        return Err("Write commands are not allowed from read-only scripts.".into());
    }
    let wrote = run.wrote;
    let from_master = srv.repl.master_client_id() == Some(caller);
    if spec.has(flags::WRITE) && !wrote {
        if srv.repl.is_replica() && srv.config.repl.replica_read_only && !from_master {
            return Err("-READONLY You can't write against a read only replica.".into());
        }
        if srv.writes_refused_for_persistence() {
            return Err(format!("-{}", srv.misconf_error()));
        }
        if let Some(e) = srv.replication_refusal(caller, flags::WRITE) {
            if e.starts_with("NOREPLICAS") {
                return Err(format!("-{e}"));
            }
        }
    }
    let run = srv
        .scripting
        .running
        .as_ref()
        .ok_or("no script is running")?;
    if !run.settings.allow_oom
        && srv.config.maxmemory > 0
        && !from_master
        && !wrote
        && run.settings.oom_at_start
        && spec.has(flags::DENYOOM)
    {
        return Err(format!("-{}", crate::commands::err::OOM));
    }
    let run = srv
        .scripting
        .running
        .as_mut()
        .ok_or("no script is running")?;
    if spec.has(flags::WRITE) {
        run.wrote = true;
    }
    let mask = run.settings.repl;
    let before = srv.propagation.exec_ops.as_ref().map_or(0, |o| o.len());
    srv.call(client, idx, argv);
    srv.count_errors(client);
    // What it propagated, with the targets chosen now.
    if let Some(exec) = srv.propagation.exec_ops.as_mut() {
        if exec.len() > before {
            let new: Vec<_> = exec.drain(before..).collect();
            if let Some(run) = srv.scripting.running.as_mut() {
                run.settings
                    .ops
                    .extend(new.into_iter().map(|(db, argv)| (mask, db, argv)));
            }
        }
    }
    Ok(())
}
