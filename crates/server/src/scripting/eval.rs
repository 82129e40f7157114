//! The scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT
//! (LOAD, EXISTS, FLUSH, KILL, DEBUG, HELP), FCALL, FCALL_RO and FUNCTION
//! (LOAD, DELETE, FLUSH, LIST, STATS, DUMP, RESTORE, KILL, HELP).

use super::cache::{normalize, sha1_hex, Script};
use super::engine::Kind;
use super::run::{self, Invocation};
use super::sflags;
use crate::commands::flags::*;
use crate::commands::{is, reply_help, CommandSpec, Ctx};
use ferrokv_resp::Args;

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    h: crate::commands::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h).group("scripting")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "eval",
        -3,
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | SCRIPT_FLAGS,
        eval,
    )
    .keys(2, 2, 1)
    .since("2.6.0")
    .complexity("Depends on the script that is executed.")
    .doc(
        "Executes a server-side Lua script.",
        "script numkeys [key [key ...]] [arg [arg ...]]",
    ),
    cmd(
        "evalsha",
        -3,
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | SCRIPT_FLAGS,
        evalsha,
    )
    .keys(2, 2, 1)
    .since("2.6.0")
    .complexity("Depends on the script that is executed.")
    .doc(
        "Executes a server-side Lua script by SHA1 digest.",
        "sha1 numkeys [key [key ...]] [arg [arg ...]]",
    ),
    cmd(
        "eval_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR | READONLY | STALE | SCRIPT_FLAGS,
        eval_ro,
    )
    .keys(2, 2, 1)
    .since("7.0.0")
    .complexity("Depends on the script that is executed.")
    .doc(
        "Executes a read-only server-side Lua script.",
        "script numkeys [key [key ...]] [arg [arg ...]]",
    ),
    cmd(
        "evalsha_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR | READONLY | STALE | SCRIPT_FLAGS,
        evalsha_ro,
    )
    .keys(2, 2, 1)
    .since("7.0.0")
    .complexity("Depends on the script that is executed.")
    .doc(
        "Executes a read-only server-side Lua script by SHA1 digest.",
        "sha1 numkeys [key [key ...]] [arg [arg ...]]",
    ),
    cmd("script", -2, 0, script_help)
        .since("2.6.0")
        .complexity("Depends on subcommand.")
        .doc("A container for Lua scripts management commands.", "")
        .subs(SCRIPT_SUBCOMMANDS),
    cmd(
        "fcall",
        -3,
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | SCRIPT_FLAGS,
        fcall,
    )
    .keys(2, 2, 1)
    .since("7.0.0")
    .complexity("Depends on the function that is executed.")
    .doc(
        "Invokes a function.",
        "function numkeys [key [key ...]] [arg [arg ...]]",
    ),
    cmd(
        "fcall_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR | READONLY | STALE | SCRIPT_FLAGS,
        fcall_ro,
    )
    .keys(2, 2, 1)
    .since("7.0.0")
    .complexity("Depends on the function that is executed.")
    .doc(
        "Invokes a read-only function.",
        "function numkeys [key [key ...]] [arg [arg ...]]",
    ),
    cmd("function", -2, 0, function_help)
        .since("7.0.0")
        .complexity("Depends on subcommand.")
        .doc("A container for function commands.", "")
        .subs(FUNCTION_SUBCOMMANDS),
];

static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("script|load", 3, NOSCRIPT | STALE, script_load)
        .since("2.6.0")
        .complexity("O(N) with N being the length in bytes of the script body.")
        .doc("Loads a server-side Lua script to the script cache.", "script"),
    cmd("script|exists", -3, NOSCRIPT, script_exists)
        .since("2.6.0")
        .complexity("O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).")
        .doc("Determines whether server-side Lua scripts exist in the script cache.", "sha1 [sha1 ...]"),
    cmd("script|flush", -2, NOSCRIPT, script_flush)
        .since("2.6.0")
        .complexity("O(N) with N being the number of scripts in cache")
        .doc("Removes all server-side Lua scripts from the script cache.", "[ASYNC|SYNC]"),
    cmd("script|kill", 2, NOSCRIPT | ALLOW_BUSY, script_kill)
        .since("2.6.0")
        .doc("Terminates a server-side Lua script during execution.", ""),
    cmd("script|debug", 3, NOSCRIPT, script_debug)
        .since("3.2.0")
        .doc("Sets the debug mode of server-side Lua scripts.", "YES|SYNC|NO"),
    cmd("script|help", 2, LOADING | STALE, script_help)
        .since("5.0.0")
        .doc("Returns helpful text about the different subcommands.", ""),
];

static FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    cmd(
        "function|load",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        function_load,
    )
    .since("7.0.0")
    .complexity("O(1) (considering compilation time is redundant)")
    .doc("Creates a library.", "[REPLACE] function-code"),
    cmd("function|delete", 3, WRITE | NOSCRIPT, function_delete)
        .since("7.0.0")
        .doc("Deletes a library and its functions.", "library-name"),
    cmd("function|flush", -2, WRITE | NOSCRIPT, function_flush)
        .since("7.0.0")
        .complexity("O(N) where N is the number of functions deleted")
        .doc("Deletes all libraries and functions.", "[ASYNC|SYNC]"),
    cmd("function|list", -2, NOSCRIPT, function_list)
        .since("7.0.0")
        .complexity("O(N) where N is the number of functions")
        .doc(
            "Returns information about all libraries.",
            "[LIBRARYNAME library-name-pattern] [WITHCODE]",
        ),
    cmd("function|stats", 2, NOSCRIPT | ALLOW_BUSY, function_stats)
        .since("7.0.0")
        .doc("Returns information about a function during execution.", ""),
    cmd("function|dump", 2, NOSCRIPT, function_dump)
        .since("7.0.0")
        .complexity("O(N) where N is the number of functions")
        .doc("Dumps all libraries into a serialized binary payload.", ""),
    cmd(
        "function|restore",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        function_restore,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the number of functions on the payload")
    .doc(
        "Restores all libraries from a payload.",
        "serialized-value [FLUSH|APPEND|REPLACE]",
    ),
    cmd("function|kill", 2, NOSCRIPT | ALLOW_BUSY, function_kill)
        .since("7.0.0")
        .doc("Terminates a function during execution.", ""),
    cmd("function|help", 2, LOADING | STALE, function_help)
        .since("7.0.0")
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// The flags a script gives itself: `#!lua flags=a,b` on its first line.
/// No shebang: Redis's compatibility mode. Errors are Redis's texts.
pub fn shebang_flags(body: &[u8]) -> Result<u32, String> {
    if !body.starts_with(b"#!") {
        return Ok(sflags::EVAL_COMPAT);
    }
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("#!");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = 0;
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match sflags::parse(f.as_bytes()) {
                Some(b) => flags |= b,
                None => return Err(format!("ERR Unexpected flag in script shebang: {f}")),
            }
        }
    }
    Ok(flags)
}

/// The command flags an `EVAL`/`FCALL` of a script with `script_flags`
/// has (Redis's `scriptFlagsToCmdFlags`): a script that declared flags
/// is a write and may-OOM command unless it says otherwise.
pub fn command_flags(cmd_flags: u32, script_flags: u32) -> u32 {
    if script_flags & sflags::EVAL_COMPAT != 0 {
        return cmd_flags;
    }
    let mut f = cmd_flags & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
    if script_flags & (sflags::ALLOW_OOM | sflags::NO_WRITES) == 0 {
        f |= DENYOOM;
    }
    if script_flags & sflags::NO_WRITES == 0 {
        f |= WRITE;
    }
    if script_flags & sflags::ALLOW_STALE != 0 {
        f |= STALE;
    }
    f
}

/// The flags dispatch checks for `EVAL`/`EVALSHA`/`FCALL` with `args`:
/// those of the script it names, when known (`None`: the command's own).
pub fn dynamic_flags(srv: &crate::server::Server, spec: &CommandSpec, args: &Args) -> u32 {
    if args.len() < 2 {
        return spec.flags;
    }
    let body_or_name = args.get(1);
    let script_flags = match spec.name {
        // A body's flags are its shebang's, cached or not: no digest here
        // (the handler computes it once).
        "eval" | "eval_ro" => shebang_flags(body_or_name).unwrap_or(sflags::EVAL_COMPAT),
        "evalsha" | "evalsha_ro" => match srv.scripting.cache.get(body_or_name) {
            Some(s) => s.flags,
            None => return spec.flags,
        },
        "fcall" | "fcall_ro" => {
            match std::str::from_utf8(body_or_name)
                .ok()
                .and_then(|n| srv.scripting.functions.find(n))
            {
                Some(f) => f.flags,
                None => return spec.flags,
            }
        }
        _ => return spec.flags,
    };
    command_flags(spec.flags, script_flags)
}

/// Splits `numkeys key... arg...` (after the script or function name).
fn split_keys<'a>(ctx: &mut Ctx, args: Args<'a>) -> Option<(Args<'a>, Args<'a>)> {
    let numkeys = match ferrokv_resp::parse_i64(args.get(2)) {
        Some(n) => n,
        None => {
            ctx.error(crate::commands::err::NOT_INTEGER);
            return None;
        }
    };
    let rest = args.len() as i64 - 3;
    if numkeys > rest {
        ctx.error("ERR Number of keys can't be greater than number of args");
        return None;
    }
    if numkeys < 0 {
        ctx.error("ERR Number of keys can't be negative");
        return None;
    }
    let all = args.skip(3);
    let (keys, argv) = split_at(all, numkeys as usize);
    Some((keys, argv))
}

fn split_at(a: Args, n: usize) -> (Args, Args) {
    (a.take(n), a.skip(n))
}

/// Compiles `body` into the cache (if it is not there) and returns its sha.
fn cache_script(ctx: &mut Ctx, body: &[u8]) -> Result<[u8; 40], String> {
    let sha = sha1_hex(body);
    let key = normalize(sha.as_bytes()).expect("a sha1 is 40 hex digits");
    if ctx.srv.scripting.cache.scripts.contains_key(&key) {
        return Ok(key);
    }
    let flags = shebang_flags(body)?;
    let func = ctx
        .srv
        .scripting
        .eval
        .compile(body, "@user_script")
        .map_err(|e| format!("ERR Error compiling script (new function): {e}"))?;
    let func = ctx
        .srv
        .scripting
        .eval
        .lua
        .create_registry_value(func)
        .map_err(|e| format!("ERR {e}"))?;
    ctx.srv.scripting.cache.insert(
        key,
        Script {
            body: body.to_vec(),
            func,
            flags,
        },
    );
    Ok(key)
}

fn eval_generic(ctx: &mut Ctx, args: Args, by_sha: bool, ro: bool) {
    show_to_monitors(ctx, &args);
    let Some((keys, argv)) = split_keys(ctx, args) else {
        return;
    };
    let key = if by_sha {
        normalize(args.get(1))
    } else {
        match cache_script(ctx, args.get(1)) {
            Ok(k) => Some(k),
            Err(e) => {
                ctx.error(&e);
                return;
            }
        }
    };
    let Some((key, s)) = key.and_then(|k| ctx.srv.scripting.cache.scripts.get_key_value(&k)) else {
        ctx.error("NOSCRIPT No matching script. Please use EVAL.");
        return;
    };
    let func = s.func.id();
    let inv = Invocation {
        // A sha1 in hex: ASCII.
        name: std::str::from_utf8(key).unwrap_or_default().to_string(),
        func,
        keys,
        args: argv,
        flags: s.flags,
        ro,
        command: None,
    };
    run::run(ctx, Kind::Eval, inv);
}

/// The script commands are `skip_monitor`: each shows itself to the
/// monitors before its script runs, so that the commands the script calls
/// come after it (Redis's `evalCommand` and `fcallCommand`).
fn show_to_monitors(ctx: &mut Ctx, args: &Args) {
    if !ctx.srv.monitors.is_empty() {
        ctx.srv.feed_monitors(ctx.client, args);
    }
}

/// EVAL script numkeys [key ...] [arg ...]
fn eval(ctx: &mut Ctx, args: Args) {
    eval_generic(ctx, args, false, false)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
fn evalsha(ctx: &mut Ctx, args: Args) {
    eval_generic(ctx, args, true, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
fn eval_ro(ctx: &mut Ctx, args: Args) {
    eval_generic(ctx, args, false, true)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
fn evalsha_ro(ctx: &mut Ctx, args: Args) {
    eval_generic(ctx, args, true, true)
}

/// SCRIPT LOAD script
fn script_load(ctx: &mut Ctx, args: Args) {
    match cache_script(ctx, args.get(2)) {
        Ok(k) => ctx.out().bulk(&k),
        Err(e) => ctx.error(&e),
    }
}

/// SCRIPT EXISTS sha1 [sha1 ...]
fn script_exists(ctx: &mut Ctx, args: Args) {
    ctx.out().array(args.len() - 2);
    for sha in args.iter().skip(2) {
        let there = ctx.srv.scripting.cache.contains(sha);
        ctx.out().int(there as i64);
    }
}

/// SCRIPT FLUSH [ASYNC|SYNC]
fn script_flush(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 || (args.len() == 3 && !is(args.get(2), "async") && !is(args.get(2), "sync"))
    {
        ctx.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        return;
    }
    match ctx
        .srv
        .scripting
        .flush(ctx.srv.config.lua_heap_limit as usize)
    {
        Ok(()) => ctx.out().ok(),
        Err(e) => ctx.error(&format!("ERR {e}")),
    }
}

/// The reply of SCRIPT KILL / FUNCTION KILL (Redis's `scriptKill`).
fn kill(ctx: &mut Ctx, is_eval: bool) {
    let master = ctx.srv.repl.master_client_id();
    let Some(run) = ctx.srv.scripting.running.as_mut() else {
        ctx.error("NOTBUSY No scripts in execution right now.");
        return;
    };
    if master == Some(run.caller_id) {
        ctx.error("UNKILLABLE The busy script was sent by a master instance in the context of replication and cannot be killed.");
        return;
    }
    if run.wrote {
        ctx.error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        return;
    }
    if is_eval && run.is_function {
        ctx.error(super::busy::BUSY_FUNCTION);
        return;
    }
    if !is_eval && !run.is_function {
        ctx.error(super::busy::BUSY_EVAL);
        return;
    }
    run.kill = true;
    ctx.out().ok();
}

/// SCRIPT KILL
fn script_kill(ctx: &mut Ctx, _args: Args) {
    kill(ctx, true)
}

/// SCRIPT DEBUG YES|SYNC|NO
fn script_debug(ctx: &mut Ctx, args: Args) {
    // As Redis: refused while earlier replies are unsent (a pipeline, or
    // inside EXEC), since the debugger takes over the connection.
    if ctx.client.pending_output() > 0 {
        ctx.error("ERR SCRIPT DEBUG must be called outside a pipeline");
        return;
    }
    if is(args.get(2), "no") {
        ctx.out().ok();
    } else if is(args.get(2), "yes") || is(args.get(2), "sync") {
        ctx.error("ERR SCRIPT DEBUG (the Lua debugger) is not supported by this server");
    } else {
        ctx.error("ERR Use SCRIPT DEBUG YES/SYNC/NO");
    }
}

/// SCRIPT HELP
fn script_help(ctx: &mut Ctx, args: Args) {
    if args.len() != 2 || !is(args.get(1), "help") {
        ctx.wrong_args("script");
        return;
    }
    reply_help(
        ctx,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
}

fn fcall_generic(ctx: &mut Ctx, args: Args, ro: bool) {
    show_to_monitors(ctx, &args);
    let name = String::from_utf8_lossy(args.get(1)).into_owned();
    let Some(f) = ctx.srv.scripting.functions.find(&name) else {
        ctx.error("ERR Function not found");
        return;
    };
    let flags = f.flags;
    let func = f.func.id();
    let Some((keys, argv)) = split_keys(ctx, args) else {
        return;
    };
    let inv = Invocation {
        name,
        func,
        keys,
        args: argv,
        flags,
        ro,
        command: Some(args),
    };
    run::run(ctx, Kind::Function, inv);
}

/// FCALL function numkeys [key ...] [arg ...]
fn fcall(ctx: &mut Ctx, args: Args) {
    fcall_generic(ctx, args, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
fn fcall_ro(ctx: &mut Ctx, args: Args) {
    fcall_generic(ctx, args, true)
}

/// FUNCTION LOAD [REPLACE] function-code
fn function_load(ctx: &mut Ctx, args: Args) {
    // The last argument is the code; everything between is an option.
    let mut replace = false;
    for a in args.iter().take(args.len() - 1).skip(2) {
        if is(a, "replace") {
            replace = true;
        } else {
            let shown: String = String::from_utf8_lossy(a)
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            ctx.error(&format!("ERR Unknown option given: {shown}"));
            return;
        }
    }
    let code = args.get(args.len() - 1);
    match ctx.srv.scripting.functions.load(code, replace) {
        Ok(name) => {
            ctx.modified(1);
            ctx.out().bulk(name.as_bytes());
        }
        Err(e) => ctx.error(&e),
    }
}

/// FUNCTION DELETE library-name
fn function_delete(ctx: &mut Ctx, args: Args) {
    let name = String::from_utf8_lossy(args.get(2)).into_owned();
    if ctx.srv.scripting.functions.delete(&name) {
        ctx.modified(1);
        ctx.out().ok();
    } else {
        ctx.error("ERR Library not found");
    }
}

/// FUNCTION FLUSH [ASYNC|SYNC]
fn function_flush(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 || (args.len() == 3 && !is(args.get(2), "async") && !is(args.get(2), "sync"))
    {
        ctx.error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        return;
    }
    let limit = ctx.srv.config.lua_heap_limit as usize;
    match ctx.srv.scripting.functions.flush(limit) {
        Ok(()) => {
            ctx.modified(1);
            ctx.out().ok();
        }
        Err(e) => ctx.error(&format!("ERR {e}")),
    }
}

/// FUNCTION LIST [LIBRARYNAME library-name-pattern] [WITHCODE]
fn function_list(ctx: &mut Ctx, args: Args) {
    let mut pattern: Option<Vec<u8>> = None;
    let mut with_code = false;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if is(a, "withcode") && !with_code {
            with_code = true;
            i += 1;
        } else if is(a, "libraryname") && pattern.is_none() && i + 1 < args.len() {
            pattern = Some(args.get(i + 1).to_vec());
            i += 2;
        } else if is(a, "libraryname") && pattern.is_none() {
            ctx.error("ERR library name argument was not given");
            return;
        } else {
            ctx.error(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(a)
            ));
            return;
        }
    }
    let libs: Vec<&super::function::Library> = ctx
        .srv
        .scripting
        .functions
        .libraries
        .iter()
        .filter(|l| {
            pattern
                .as_deref()
                .is_none_or(|p| ferrokv_store::pattern::glob_match(p, l.name.as_bytes()))
        })
        .collect();
    let out = &mut ctx.client.out;
    out.array(libs.len());
    for l in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(l.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(l.functions.len());
        for f in &l.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = super::function::flag_names(f.flags);
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&l.code);
        }
    }
}

/// FUNCTION STATS
fn function_stats(ctx: &mut Ctx, _args: Args) {
    // While an EVAL script is busy, Redis answers as to any other command.
    if ctx
        .srv
        .scripting
        .running
        .as_ref()
        .is_some_and(|r| !r.is_function)
    {
        ctx.error(super::busy::BUSY_EVAL);
        return;
    }
    let libs = ctx.srv.scripting.functions.libraries.len() as i64;
    let fns = ctx.srv.scripting.functions.function_count() as i64;
    let running = ctx
        .srv
        .scripting
        .running
        .as_ref()
        .filter(|r| r.is_function)
        .map(|r| {
            (
                r.name.clone(),
                r.command.map(|a| a.to_vecs()).unwrap_or_default(),
                r.start.elapsed().as_millis() as i64,
            )
        });
    let out = &mut ctx.client.out;
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null(),
        Some((name, command, ms)) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"command");
            out.array(command.len());
            for a in &command {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(ms);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs);
    out.bulk(b"functions_count");
    out.int(fns);
}

/// FUNCTION DUMP
fn function_dump(ctx: &mut Ctx, _args: Args) {
    let codes: Vec<&[u8]> = ctx
        .srv
        .scripting
        .functions
        .libraries
        .iter()
        .map(|l| &l.code[..])
        .collect();
    let payload = super::dump::dump(&codes);
    ctx.out().bulk(&payload);
}

/// FUNCTION RESTORE serialized-value [FLUSH|APPEND|REPLACE]
fn function_restore(ctx: &mut Ctx, args: Args) {
    let policy = if args.len() == 4 {
        let p = args.get(3);
        if is(p, "flush") {
            super::dump::Policy::Flush
        } else if is(p, "append") {
            super::dump::Policy::Append
        } else if is(p, "replace") {
            super::dump::Policy::Replace
        } else {
            ctx.error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            );
            return;
        }
    } else if args.len() == 3 {
        super::dump::Policy::Append
    } else {
        ctx.error(
            "ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION HELP.",
        );
        return;
    };
    let codes = match super::dump::parse(args.get(2)) {
        Ok(c) => c,
        Err(e) => {
            ctx.error(&e);
            return;
        }
    };
    let limit = ctx.srv.config.lua_heap_limit as usize;
    match super::dump::restore(&mut ctx.srv.scripting.functions, codes, policy, limit) {
        Ok(()) => {
            ctx.modified(1);
            ctx.out().ok();
        }
        Err(e) => ctx.error(&e),
    }
}

/// FUNCTION KILL
fn function_kill(ctx: &mut Ctx, _args: Args) {
    kill(ctx, false)
}

/// FUNCTION HELP
fn function_help(ctx: &mut Ctx, args: Args) {
    if args.len() != 2 || !is(args.get(1), "help") {
        ctx.wrong_args("function");
        return;
    }
    reply_help(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_parse_as_redis_does() {
        assert_eq!(shebang_flags(b"return 1"), Ok(sflags::EVAL_COMPAT));
        assert_eq!(shebang_flags(b"#!lua\nreturn 1"), Ok(0));
        assert_eq!(
            shebang_flags(b"#!lua flags=no-writes,allow-oom\n"),
            Ok(sflags::NO_WRITES | sflags::ALLOW_OOM)
        );
        assert_eq!(
            shebang_flags(b"#!lua flags=bogus\n").unwrap_err(),
            "ERR Unexpected flag in script shebang: bogus"
        );
        assert_eq!(
            shebang_flags(b"#!luax\n").unwrap_err(),
            "ERR Unexpected engine in script shebang: #!luax"
        );
        assert_eq!(
            shebang_flags(b"#!lua name=foo\n").unwrap_err(),
            "ERR Unknown lua shebang option: name=foo"
        );
    }
}
