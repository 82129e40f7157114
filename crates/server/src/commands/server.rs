//! The server family: INFO, CONFIG, COMMAND, DEBUG, MONITOR, TIME, LASTSAVE,
//! SHUTDOWN, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB.

use super::flags::*;
use super::{docs, err, is, parse_f64, reply_help, CommandSpec, Ctx};
use ferrokv_resp::Args;
use ferrokv_store::digest::{to_hex, value_digest};
use ferrokv_store::pattern::glob_match_nocase;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h).group("server")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("info", -1, LOADING | STALE, info).doc("Returns information and statistics about the server.", "[section [section ...]]"),
    cmd("config", -2, 0, config_help).since("2.0.0").doc("A container for server configuration commands.", "").subs(CONFIG_SUBS),
    cmd("command", -1, LOADING | STALE, command).since("2.8.13").complexity("O(N) where N is the total number of Redis commands").doc("Returns detailed information about all commands.", "").subs(COMMAND_SUBS),
    cmd("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED, debug_help).doc("A container for debugging commands.", ""),
    cmd("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, crate::monitor::monitor).complexity("").doc("Listen for all requests received by the server in real time", ""),
    cmd("time", 1, LOADING | STALE | FAST, time).since("2.6.0").doc("Returns the server time.", ""),
    cmd("lastsave", 1, LOADING | STALE | FAST, lastsave).doc("Returns the Unix timestamp of the last successful save to disk.", ""),
    cmd("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, crate::shutdown::command).doc(
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "[NOSAVE|SAVE] [NOW] [FORCE] [ABORT]",
    ),
    cmd("bgrewriteaof", 1, ADMIN | NOSCRIPT, bgrewriteaof).doc("Asynchronously rewrites the append-only file to disk.", "").complexity("O(1)"),
    cmd("save", 1, ADMIN | NOSCRIPT | NO_MULTI, save).doc("Synchronously saves the database(s) to disk.", "").complexity("O(N) where N is the total number of keys in all databases"),
    cmd("bgsave", -1, ADMIN | NOSCRIPT, bgsave).doc("Asynchronously saves the database(s) to disk.", "[SCHEDULE]").complexity("O(1)"),
    cmd("dbsize", 1, READONLY | FAST, dbsize).group("server").doc("Returns the number of keys in the database.", ""),
    cmd("flushdb", -1, WRITE, flushdb).complexity("O(N) where N is the total number of keys in all databases").doc("Remove all keys from the current database.", "[ASYNC|SYNC]"),
    cmd("flushall", -1, WRITE, flushall).complexity("O(N) where N is the total number of keys in all databases").doc("Removes all keys from all databases.", "[ASYNC|SYNC]"),
    cmd("swapdb", 3, WRITE | FAST, swapdb).since("4.0.0").complexity("O(N) where N is the count of clients watching or blocking on keys from both databases.").doc("Swaps two Redis databases.", "index1 index2"),
];

static CONFIG_SUBS: &[CommandSpec] = &[
    cmd(
        "config|get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        config_get,
    )
    .complexity("O(N) when N is the number of configuration parameters provided")
    .doc(
        "Returns the effective values of configuration parameters.",
        "parameter [parameter ...]",
    ),
    cmd(
        "config|set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        config_set,
    )
    .complexity("O(N) when N is the number of configuration parameters provided")
    .doc(
        "Sets configuration parameters in-flight.",
        "parameter value [parameter value ...]",
    ),
    cmd(
        "config|resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        config_resetstat,
    )
    .doc("Resets the server's statistics.", ""),
    cmd(
        "config|rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        config_rewrite,
    )
    .since("2.8.0")
    .doc("Persists the effective configuration to file.", ""),
    cmd("config|help", 2, LOADING | STALE, config_help)
        .since("5.0.0")
        .doc("Returns helpful text about the different subcommands.", ""),
];

static COMMAND_SUBS: &[CommandSpec] = &[
    cmd("command|count", 2, LOADING | STALE, command_count).doc("Returns a count of commands.", ""),
    cmd("command|info", -2, LOADING | STALE, command_info).doc(
        "Returns information about one, multiple or all commands.",
        "[command-name [command-name ...]]",
    ),
    cmd("command|docs", -2, LOADING | STALE, command_docs)
        .since("7.0.0")
        .doc(
            "Returns documentary information about one, multiple or all commands.",
            "[command-name [command-name ...]]",
        ),
    cmd("command|list", -2, LOADING | STALE, command_list)
        .since("7.0.0")
        .doc(
            "Returns a list of command names.",
            "[FILTERBY MODULE module-name|ACLCAT category|PATTERN pattern]",
        ),
    cmd("command|getkeys", -4, LOADING | STALE, command_getkeys).doc(
        "Extracts the key names from an arbitrary command.",
        "command [arg [arg ...]]",
    ),
    cmd(
        "command|getkeysandflags",
        -4,
        LOADING | STALE,
        command_getkeysandflags,
    )
    .since("7.0.0")
    .doc(
        "Extracts the key names and access flags for an arbitrary command.",
        "command [arg [arg ...]]",
    ),
    cmd("command|help", 2, LOADING | STALE, command_help)
        .since("5.0.0")
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// INFO [section [section ...]]
fn info(ctx: &mut Ctx, args: Args) {
    let req: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let caller = crate::info::Caller {
        count: 1,
        transport: ctx.client.conn.stream.as_ref().map(|s| s.transport()),
    };
    let text = crate::info::render(ctx.srv, &req, caller);
    ctx.client.out.verbatim(text.as_bytes());
}

/// CONFIG GET parameter [parameter ...]
fn config_get(ctx: &mut Ctx, args: Args) {
    let mut pairs: Vec<(&'static str, String)> = Vec::new();
    for p in args.iter().skip(2) {
        for (k, v) in ctx.srv.config.get_matching(p) {
            if !pairs.iter().any(|(n, _)| *n == k) {
                pairs.push((k, v));
            }
        }
    }
    let out = &mut ctx.client.out;
    out.map(pairs.len());
    for (k, v) in pairs {
        out.bulk(k.as_bytes());
        out.bulk(v.as_bytes());
    }
}

/// CONFIG SET parameter value [parameter value ...]
fn config_set(ctx: &mut Ctx, args: Args) {
    if !args.len().is_multiple_of(2) {
        // A name without a value: Redis 7.0 answers a syntax error.
        ctx.error(err::SYNTAX);
        return;
    }
    // All or nothing: apply to a copy, install only if every pair is valid.
    let mut next = ctx.srv.config.clone();
    let mut seen: Vec<String> = Vec::new();
    for i in (2..args.len()).step_by(2) {
        // Errors quote the name as the client spelled it, as Redis does.
        let given = String::from_utf8_lossy(args.get(i)).into_owned();
        let name = given.to_ascii_lowercase();
        if seen.contains(&name) {
            ctx.error(&format!("ERR CONFIG SET failed (possibly related to argument '{given}') - duplicate parameter"));
            return;
        }
        if crate::config::find(&name).is_some_and(|o| o.protected)
            && !ctx
                .srv
                .config
                .enable_protected_configs
                .allows(ctx.client.is_local())
        {
            ctx.error(&format!("ERR CONFIG SET failed (possibly related to argument '{given}') - can't set protected config"));
            return;
        }
        let value = String::from_utf8_lossy(args.get(i + 1)).into_owned();
        if let Err(e) = next.set(&given, &value) {
            ctx.error(&e);
            return;
        }
        seen.push(name);
    }
    if next.dir != ctx.srv.config.dir {
        if let Err(e) = std::fs::create_dir_all(&next.dir) {
            ctx.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument 'dir') - {e}"
            ));
            return;
        }
    }
    // More clients than descriptors: raise the limit or refuse, as Redis.
    if next.maxclients > ctx.srv.config.maxclients {
        use crate::fdlimit::{fit_open_files, Fit, RESERVED_FDS};
        if let Fit::Reduced { limit, .. } = fit_open_files(next.maxclients) {
            ctx.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {}",
                limit.saturating_sub(RESERVED_FDS)
            ));
            return;
        }
    }
    // A `tls-*` change rebuilds the TLS configurations (certificates
    // reloaded from their files); a failed build keeps the old ones.
    let tls = if seen.iter().any(|n| crate::config::tls::is_tls_option(n)) {
        match next.tls_context() {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("Failed to update TLS configuration: {e}");
                ctx.error(&format!("ERR CONFIG SET failed (possibly related to argument '{}') - Unable to update TLS configuration. Check server logs.", seen[0]));
                return;
            }
        }
    } else {
        None
    };
    // The OOM score for new oom-score-adj settings: a score the kernel
    // refuses fails the whole CONFIG SET (oom.rs).
    if (
        next.option_value("oom-score-adj"),
        next.option_value("oom-score-adj-values"),
    ) != (
        ctx.srv.config.option_value("oom-score-adj"),
        ctx.srv.config.option_value("oom-score-adj-values"),
    ) {
        let replica = ctx.srv.repl.is_replica();
        if let Err(e) = ctx.srv.oom.apply(&next, replica) {
            tracing::warn!("{e}");
            let opt = if seen.iter().any(|n| n == "oom-score-adj-values") {
                "oom-score-adj-values"
            } else {
                "oom-score-adj"
            };
            ctx.error(&format!("ERR CONFIG SET failed (possibly related to argument '{opt}') - Failed to set current oom_score_adj. Check server logs."));
            return;
        }
    }
    // New listeners for a new port, TLS port or bind list: bound before
    // anything else is applied, so that a port already taken leaves every
    // option of this CONFIG SET as it was (Redis's rollback).
    let endpoints = |c: &crate::config::Config| crate::net::rebind::Endpoints {
        bind: c.bind.clone(),
        port: c.port,
        tls_port: c.tls.port,
    };
    let (old_ep, new_ep) = (endpoints(&ctx.srv.config), endpoints(&next));
    if old_ep != new_ep {
        if let Err((opt, why)) = crate::net::rebind::rebind(ctx.srv, &old_ep, &new_ep) {
            tracing::warn!("CONFIG SET {opt}: {why}");
            let why = why.split(" (").next().unwrap_or(&why).to_string();
            ctx.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{opt}') - {why}"
            ));
            return;
        }
    }
    if let Some(t) = tls {
        ctx.srv.tls = t;
    }
    if next.loglevel != ctx.srv.config.loglevel {
        crate::config::apply_log_level(next.loglevel);
    }
    let (was_aof, policy) = (ctx.srv.config.appendonly, next.appendfsync);
    let now_aof = next.appendonly;
    let lower_limit = next.maxmemory != 0
        && (ctx.srv.config.maxmemory == 0 || next.maxmemory < ctx.srv.config.maxmemory);
    if next.lua_heap_limit != ctx.srv.config.lua_heap_limit {
        ctx.srv
            .scripting
            .set_heap_limit(next.lua_heap_limit as usize);
    }
    if next.requirepass != ctx.srv.config.requirepass {
        ctx.srv.acl.set_requirepass(next.requirepass.as_deref());
    }
    ctx.srv.acl.pubsub_default_all = next.acl_pubsub_default_all;
    ctx.srv.config = next;
    // A policy change switches the clock between LRU and LFU; a lower
    // limit starts evicting at once, as Redis does.
    ctx.srv.refresh_lru_clock();
    if lower_limit {
        ctx.srv.eviction.clear_pool();
        ctx.srv.perform_evictions();
    }
    if let Some(aof) = ctx.srv.aof.as_mut() {
        if aof.policy() != policy {
            aof.set_policy(policy);
        }
    }
    if was_aof && !now_aof {
        // A rewrite under way stops (Redis kills its child), as does one
        // scheduled.
        ctx.srv.kill_aof_rewrite();
        ctx.srv.aof_rewrite_scheduled = false;
        if let Some(mut aof) = ctx.srv.aof.take() {
            let _ = aof.sync_now();
        }
    } else if !was_aof && now_aof {
        // Turned on at run time: new files whose base is a snapshot of the
        // data now (a rewrite), as Redis does.
        if let Err(e) = enable_aof(ctx) {
            ctx.srv.config.appendonly = false;
            ctx.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument 'appendonly') - {e}"
            ));
            return;
        }
    }
    ctx.client.out.ok();
}

fn enable_aof(ctx: &mut Ctx) -> Result<(), String> {
    use crate::persistence::aof::{Aof, OsStorage};
    // A rewrite made with the AOF off would install a manifest over the
    // new layout: it stops, and the new AOF's own rewrite follows.
    if ctx.srv.aof_off_rewrite.is_some() {
        tracing::info!("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.");
        ctx.srv.kill_aof_rewrite();
    }
    let c = &ctx.srv.config;
    let dir = std::path::Path::new(&c.dir).join(&c.appenddirname);
    let existing = Aof::plan(&OsStorage, &dir, &c.appendfilename)?.map(|(m, _)| m);
    // Files left from an earlier run are history now: start a new layout.
    let _ = existing;
    let aof = Aof::open_with(
        std::sync::Arc::new(OsStorage),
        &dir,
        &c.appendfilename,
        c.appendfsync,
        None,
        &crate::server::empty_rdb(),
        c.aof_checksums,
    )?;
    ctx.srv.aof = Some(aof);
    ctx.srv.aof_first_rewrite = true;
    if ctx.srv.persistence.job.is_some() {
        ctx.srv.aof_rewrite_scheduled = true;
        Ok(())
    } else {
        ctx.srv.start_aof_rewrite()
    }
}

/// CONFIG RESETSTAT
fn config_resetstat(ctx: &mut Ctx, _args: Args) {
    ctx.srv.stats = Default::default();
    ctx.srv.ops_metric = Default::default();
    ctx.srv.net_in_metric = Default::default();
    ctx.srv.net_out_metric = Default::default();
    for s in ctx.srv.cmd_stats.iter_mut() {
        *s = Default::default();
    }
    ctx.srv.error_stats.clear();
    ctx.srv.latency_stats.reset();
    ctx.srv.repl.rdma.reset_stats();
    ctx.srv.tracking.invalidations_sent = 0;
    ctx.srv.tracking.keys_evicted = 0;
    ctx.client.out.ok();
}

/// CONFIG REWRITE
fn config_rewrite(ctx: &mut Ctx, _args: Args) {
    let Some(path) = ctx.srv.config.config_file.clone() else {
        ctx.error("ERR The server is running without a config file");
        return;
    };
    let users = ctx.srv.acl_config_lines();
    match rewrite_config_file(&path, &ctx.srv.config, users.as_deref()) {
        Ok(()) => ctx.client.out.ok(),
        Err(e) => ctx.error(&format!("ERR Rewriting config file: {e}")),
    }
}

/// Rewrites the config file in place: known options are updated where
/// they stand, options that differ from their default are appended; the
/// new file replaces the old atomically.
fn rewrite_config_file(
    path: &str,
    cfg: &crate::config::Config,
    users: Option<&[String]>,
) -> std::io::Result<()> {
    use crate::config::all_options;
    let defaults = crate::config::Config::default();
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut written: Vec<&str> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    for line in old.lines() {
        let word = line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        // The users are written from the ACL below (or live in aclfile).
        if word == "user" {
            continue;
        }
        if let Some(o) =
            all_options().find(|o| o.name == word && !line.trim_start().starts_with('#'))
        {
            if written.contains(&o.name) {
                continue;
            }
            written.push(o.name);
            let v = (o.get)(cfg);
            // A master's `replicaof` line goes, as Redis rewrites it.
            if o.name == "replicaof" && v.is_empty() {
                continue;
            }
            lines.push(format!("{} {}", o.name, rewrite_value(o.name, &v)));
        } else {
            lines.push(line.to_string());
        }
    }
    for o in all_options() {
        // Redis 7's `slave*` names are the `replica*` options again.
        let alias = o.alias_of.is_some() || o.name.contains("slave");
        if !alias && !written.contains(&o.name) && (o.get)(cfg) != (o.get)(&defaults) {
            lines.push(format!(
                "{} {}",
                o.name,
                rewrite_value(o.name, &(o.get)(cfg))
            ));
        }
    }
    lines.extend(users.unwrap_or_default().iter().cloned());
    let tmp = format!("{path}.tmp-{}", std::process::id());
    std::fs::write(&tmp, lines.join("\n") + "\n")?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A value as a config line holds it: the options that take several
/// words (`replicaof host port`, `save 3600 1 300 100`) keep them apart.
fn rewrite_value(name: &str, v: &str) -> String {
    const WORDS: &[&str] = &[
        "replicaof",
        "save",
        "client-output-buffer-limit",
        "bind",
        "oom-score-adj-values",
        "latency-tracking-info-percentiles",
    ];
    if WORDS.contains(&name) && !v.is_empty() {
        v.split(' ').map(quote_value).collect::<Vec<_>>().join(" ")
    } else {
        quote_value(v)
    }
}

fn quote_value(v: &str) -> String {
    if !v.is_empty() && !v.contains(' ') && !v.contains('"') {
        v.to_string()
    } else {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// CONFIG HELP
fn config_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
}

/// COMMAND
fn command(ctx: &mut Ctx, _args: Args) {
    let specs: Vec<&'static CommandSpec> = ctx.srv.commands.top_level().collect();
    ctx.client.out.array(specs.len());
    for s in specs {
        docs::command_info(&mut ctx.client.out, s);
    }
}

/// COMMAND COUNT
fn command_count(ctx: &mut Ctx, _args: Args) {
    let n = ctx.srv.commands.top_level().count();
    ctx.client.out.int(n as i64);
}

fn find_spec(ctx: &Ctx, name: &[u8]) -> Option<&'static CommandSpec> {
    let s = String::from_utf8_lossy(name).to_ascii_lowercase();
    ctx.srv.commands.specs.iter().copied().find(|c| c.name == s)
}

/// COMMAND INFO [command-name [command-name ...]]
fn command_info(ctx: &mut Ctx, args: Args) {
    if args.len() == 2 {
        return command(ctx, args);
    }
    let specs: Vec<Option<&'static CommandSpec>> =
        args.iter().skip(2).map(|n| find_spec(ctx, n)).collect();
    ctx.client.out.array(specs.len());
    for s in specs {
        match s {
            Some(s) => docs::command_info(&mut ctx.client.out, s),
            // Redis answers an unknown name with a null (`$-1` in RESP2).
            None => ctx.client.out.null(),
        }
    }
}

/// COMMAND DOCS [command-name [command-name ...]]
fn command_docs(ctx: &mut Ctx, args: Args) {
    let specs: Vec<&'static CommandSpec> = if args.len() == 2 {
        ctx.srv.commands.top_level().collect()
    } else {
        args.iter()
            .skip(2)
            .filter_map(|n| find_spec(ctx, n))
            .collect()
    };
    ctx.client.out.map(specs.len());
    for s in specs {
        ctx.client.out.bulk(s.name.as_bytes());
        docs::command_docs(&mut ctx.client.out, s);
    }
}

/// COMMAND LIST [FILTERBY MODULE module-name|ACLCAT category|PATTERN pattern]
///
/// Redis 7.0 lists subcommands too, by their full name (`config|get`).
fn command_list(ctx: &mut Ctx, args: Args) {
    let mut names: Vec<&'static str> = ctx.srv.commands.specs.iter().map(|s| s.name).collect();
    if args.len() > 2 {
        if args.len() != 5 || !is(args.get(2), "filterby") {
            ctx.error(err::SYNTAX);
            return;
        }
        let (kind, v) = (args.get(3), args.get(4));
        if is(kind, "pattern") {
            names.retain(|n| glob_match_nocase(v, n.as_bytes()));
        } else if is(kind, "module") {
            names.clear();
        } else if is(kind, "aclcat") {
            let cat = format!("@{}", String::from_utf8_lossy(v).to_ascii_lowercase());
            let specs: Vec<&'static CommandSpec> = ctx.srv.commands.specs.clone();
            names = specs
                .into_iter()
                .filter(|s| docs::categories(s).contains(&cat))
                .map(|s| s.name)
                .collect();
        } else {
            ctx.error(err::SYNTAX);
            return;
        }
    }
    ctx.client.out.array(names.len());
    for n in names {
        ctx.client.out.bulk(n.as_bytes());
    }
}

/// COMMAND GETKEYS command [arg [arg ...]]
fn command_getkeys(ctx: &mut Ctx, args: Args) {
    getkeys(ctx, args, false)
}

/// COMMAND GETKEYSANDFLAGS command [arg [arg ...]]
fn command_getkeysandflags(ctx: &mut Ctx, args: Args) {
    getkeys(ctx, args, true)
}

/// Redis's `getKeysSubcommandImpl`: the command (a container's
/// subcommand when one is named), whether it has keys at all, its arity,
/// then its keys by the key specs (`keyspecs.rs`) or its own finder.
fn getkeys(ctx: &mut Ctx, args: Args, with_flags: bool) {
    use super::keyspecs;
    let Some(idx) = ctx.srv.commands.lookup(args.get(2)) else {
        return ctx.error("ERR Invalid command specified");
    };
    let mut spec = ctx.srv.commands.specs[idx];
    if !spec.subcommands.is_empty() && args.len() > 3 {
        match ctx.srv.commands.lookup_sub(spec.name, args.get(3)) {
            Some(sub) => spec = ctx.srv.commands.specs[sub],
            None => return ctx.error("ERR Invalid command specified"),
        }
    }
    let specs = keyspecs::of(spec.name);
    let has_keys = match specs {
        Some(s) => s.iter().any(|k| k.flags & keyspecs::K_NOT_KEY == 0),
        None => spec.keys.0 > 0,
    };
    if !has_keys {
        return ctx.error("ERR The command has no key arguments");
    }
    let n = args.len() - 2;
    if !spec.arity_ok(n) {
        return ctx.error("ERR Invalid number of arguments specified for command");
    }
    let argv: Vec<&[u8]> = (0..n).map(|i| args.get(2 + i)).collect();
    let keys = key_positions(spec, &argv);
    if keys.is_empty() {
        if no_mandatory_keys(spec.name) {
            ctx.client.out.array(0);
        } else {
            ctx.error("ERR Invalid arguments specified for command");
        }
        return;
    }
    let out = &mut ctx.client.out;
    out.array(keys.len());
    for (i, flags) in keys {
        if with_flags {
            out.array(2);
            out.bulk(argv[i]);
            let names: Vec<&str> = keyspecs::flag_names(flags).collect();
            out.set(names.len());
            for f in names {
                out.simple(f);
            }
        } else {
            out.bulk(argv[i]);
        }
    }
}

/// The key arguments of a call (positions in `argv`, the command name at
/// 0) with their key-spec flags, as Redis's `getKeysFromCommand` finds
/// them: COMMAND GETKEYS answers with them, and client-side caching
/// remembers them after a read.
pub fn key_positions(spec: &crate::commands::CommandSpec, argv: &[&[u8]]) -> Vec<(usize, u16)> {
    let n = argv.len();
    use super::keyspecs;
    match keyspecs::of(spec.name) {
        Some(s) => keyspecs::keys_and_flags(spec.name, s, argv, movable_keys(spec.name, argv)),
        None => {
            let (first, last, step) = spec.keys;
            if first <= 0 {
                return Vec::new();
            }
            let last = if last < 0 { n as i32 + last } else { last };
            (first..=last)
                .step_by(step.max(1) as usize)
                .filter(|&i| (i as usize) < n)
                .map(|i| (i as usize, 0))
                .collect()
        }
    }
}

/// Commands that may be called with no key at all (Redis's
/// `CMD_NO_MANDATORY_KEYS`): GETKEYS answers them an empty array.
fn no_mandatory_keys(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// The key positions of a command whose keys move with its arguments (a
/// `numkeys` argument, `MIGRATE`'s `KEYS`), as Redis's key-spec "keynum"
/// and "keyword" searches find them: `None` for commands whose keys are at
/// fixed positions; `Some(None)` when the arguments name no valid keys.
fn movable_keys(name: &str, argv: &[&[u8]]) -> Option<Option<Vec<usize>>> {
    // (where numkeys is, keys fixed before it)
    let (numkeys_at, fixed): (usize, &[usize]) = match name {
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => (1, &[]),
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall"
        | "fcall_ro" => (2, &[]),
        "zunionstore" | "zinterstore" | "zdiffstore" => (2, &[1]),
        "sort" => {
            // The key, and STORE's destination (Redis's sortGetKeys: LIMIT
            // takes two arguments, GET and BY one).
            let mut at = vec![1];
            let mut i = 2;
            while i < argv.len() {
                let a = argv[i];
                if is(a, "limit") {
                    i += 2;
                } else if is(a, "get") || is(a, "by") {
                    i += 1;
                } else if is(a, "store") && i + 1 < argv.len() {
                    // The last STORE counts, and the word after a STORE is
                    // read as an option too (`STORE STORE k` stores in k).
                    at.truncate(1);
                    at.push(i + 1);
                }
                i += 1;
            }
            return Some(Some(at));
        }
        "migrate" => {
            // MIGRATE host port key|"" db timeout ... [KEYS key ...], as
            // Redis's migrateGetKeys: the options are walked from the
            // sixth argument, AUTH's password and AUTH2's user and
            // password skipped; KEYS with a key named is no valid form.
            let mut keys_at = None;
            let mut i = 6;
            while i < argv.len() {
                let a = argv[i];
                if is(a, "keys") {
                    keys_at = Some(i);
                    break;
                }
                if is(a, "auth") {
                    i += 1;
                } else if is(a, "auth2") {
                    i += 2;
                }
                i += 1;
            }
            let named = argv.len() > 3 && !argv[3].is_empty();
            return match keys_at {
                Some(_) if named => Some(None),
                None if argv.len() > 3 => Some(Some(vec![3])),
                None => None,
                Some(at) => Some((at + 1 < argv.len()).then(|| (at + 1..argv.len()).collect())),
            };
        }
        _ => return None,
    };
    // Redis's genericGetKeys: numkeys read with atoi, at least 1, and no
    // more than the arguments after it.
    let Some(n) = argv.get(numkeys_at).map(|a| atoi(a)) else {
        return Some(None);
    };
    let first = numkeys_at + 1;
    if n < 1 || i64::from(n) > argv.len() as i64 - first as i64 {
        return Some(None);
    }
    let mut at: Vec<usize> = fixed.to_vec();
    at.extend(first..first + n as usize);
    Some(Some(at))
}

/// C's `atoi` as glibc computes it: leading white space, a sign, the
/// digits up to the first other byte, `strtol`'s clamping, then the cast
/// to `int`.
fn atoi(a: &[u8]) -> i32 {
    let mut i = 0;
    while i < a.len() && matches!(a[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match a.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    while let Some(d) = a.get(i).filter(|d| d.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        i += 1;
    }
    let v = if neg { v.saturating_neg() } else { v };
    // strtol clamps to LONG_MIN/LONG_MAX; the int cast keeps the low bits.
    let v = if neg && v == i64::MIN + 1 {
        i64::MIN
    } else {
        v
    };
    v as i32
}

/// COMMAND HELP
fn command_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
}

/// DEBUG DIGEST | DIGEST-VALUE key [key ...] | OBJECT key | SLEEP seconds | SET-ACTIVE-EXPIRE 0|1 | PAUSE-CRON 0|1 | CHANGE-REPL-ID | HELP
fn debug_help(ctx: &mut Ctx, args: Args) {
    let sub = args.get(1);
    let db = ctx.client.db;
    if is(sub, "digest") && args.len() == 2 {
        let d = ctx.srv.keyspace.digest();
        ctx.client.out.simple(&to_hex(&d));
    } else if is(sub, "digest-value") {
        let now = ctx.now_ms;
        let mut digests = Vec::new();
        for k in args.iter().skip(2) {
            let d = match ctx.srv.peek(db, k, now) {
                Some(e) => value_digest(e),
                None => [0u8; 20],
            };
            digests.push(to_hex(&d));
        }
        ctx.client.out.array(digests.len());
        for d in digests {
            ctx.client.out.simple(&d);
        }
    } else if is(sub, "object") && args.len() == 3 {
        let now = ctx.now_ms;
        let clock = ctx.srv.lru_clock;
        match ctx.srv.peek(db, args.get(2), now) {
            Some(e) => {
                let enc = e.value().encoding();
                let ser = match e.value() {
                    ferrokv_store::ValueRef::Int(i) if (-(1 << 31)..(1 << 31)).contains(&i) => 5,
                    ferrokv_store::ValueRef::Int(i) => i.to_string().len() + 1,
                    ferrokv_store::ValueRef::Str(s) | ferrokv_store::ValueRef::Raw(s) => {
                        s.len()
                            + if s.len() < 64 {
                                1
                            } else if s.len() < 16384 {
                                2
                            } else {
                                5
                            }
                    }
                    // About a listpack's size: each element plus its two
                    // bytes of framing.
                    ferrokv_store::ValueRef::List(l) => {
                        l.iter().map(|v| v.len() + 2).sum::<usize>() + 7
                    }
                    ferrokv_store::ValueRef::ZSet(z) => {
                        z.iter().map(|(m, _)| m.len() + 10).sum::<usize>()
                    }
                    // Collections: an estimate (their elements' bytes).
                    _ => e.heap_size(),
                };
                let idle = clock.wrapping_sub(e.lru()) & crate::server::LRU_CLOCK_MAX;
                let addr = e as *const _ as usize;
                let line = format!(
                    "Value at:0x{addr:x} refcount:1 encoding:{enc} serializedlength:{ser} lru:{} lru_seconds_idle:{idle}",
                    e.lru()
                );
                ctx.client.out.simple(&line);
            }
            _ => ctx.error(err::NO_SUCH_KEY),
        }
    } else if is(sub, "sleep") && args.len() == 3 {
        // Redis converts to microseconds with a C cast: a time too large
        // for it (`inf`, `1e300`) becomes LLONG_MIN and sleeps not at all,
        // as do negative times. (`Duration::from_secs_f64` panics there.)
        let usec = parse_f64(args.get(2)).unwrap_or(0.0) * 1e6;
        if (1.0..9.223_372_036_854_775e18).contains(&usec) {
            std::thread::sleep(std::time::Duration::from_micros(usec as u64));
        }
        ctx.client.out.ok();
    } else if is(sub, "populate") && (3..=5).contains(&args.len()) {
        debug_populate(ctx, &args);
    } else if is(sub, "set-active-expire") && args.len() == 3 {
        ctx.srv.active_expire_enabled = args.get(2) != b"0";
        ctx.client.out.ok();
    } else if is(sub, "change-repl-id") && args.len() == 2 {
        // Redis's replication tests: a new history, no secondary one.
        tracing::warn!("Changing replication IDs after receiving DEBUG change-repl-id");
        ctx.srv.repl.replid = crate::server::random_hex(&mut ctx.srv.rng, 40);
        ctx.srv.repl.clear_replid2();
        ctx.client.out.ok();
    } else if is(sub, "pause-cron") && args.len() == 3 {
        // Redis's atoi: anything but a number other than 0 resumes.
        ctx.srv.cron_paused = ferrokv_resp::parse_i64(args.get(2)).is_some_and(|v| v != 0);
        ctx.client.out.ok();
    } else if is(sub, "protocol") && args.len() == 3 {
        debug_protocol(ctx, args.get(2));
    } else if is(sub, "reload") {
        // Save, empty, load back: proves the dataset survives the round trip.
        for a in args.iter().skip(2) {
            if !is(a, "nosave") && !is(a, "noflush") && !is(a, "merge") {
                ctx.error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
                return;
            }
        }
        let nosave = args.iter().skip(2).any(|a| is(a, "nosave"));
        let noflush = args.iter().skip(2).any(|a| is(a, "noflush"));
        if !nosave {
            if let Err(e) = ctx.srv.save_now() {
                ctx.error(&e);
                return;
            }
        }
        if !noflush {
            for db in ctx.srv.keyspace.dbs.iter_mut() {
                db.clear();
            }
        }
        match ctx.srv.load_snapshot() {
            Ok(()) => ctx.client.out.ok(),
            Err(e) => ctx.error(&format!("ERR Error trying to load the RDB dump: {e}")),
        }
    } else if is(sub, "loadaof") {
        let Some(mut aof) = ctx.srv.aof.take() else {
            ctx.error("ERR appendonly is off");
            return;
        };
        if let Err(e) = aof.sync_now() {
            ctx.srv.aof = Some(aof);
            ctx.error(&format!("ERR {e}"));
            return;
        }
        let plan = crate::persistence::aof::LoadPlan::of(&aof.dir, &aof.manifest);
        for db in ctx.srv.keyspace.dbs.iter_mut() {
            db.clear();
        }
        let r = ctx.srv.load_aof_files(&plan, false);
        ctx.srv.aof = Some(aof);
        match r {
            Ok(()) => ctx.client.out.ok(),
            Err(e) => ctx.error(&format!("ERR {e}")),
        }
    } else if is(sub, "log") && args.len() == 3 {
        tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(args.get(2)));
        ctx.client.out.ok();
    } else if is(sub, "help") {
        reply_help(
            ctx,
            "DEBUG",
            &[
                "CHANGE-REPL-ID",
                "    Change the replication IDs of the instance.",
                "    Dangerous: should be used only for testing the replication subsystem.",
                "DIGEST",
                "    Output a hex signature representing the current DB content.",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of all the specified keys.",
                "LOG <message>",
                "    Write <message> to the server log.",
                "OBJECT <key>",
                "    Show low level info about the <key> and associated value.",
                "PAUSE-CRON <0|1>",
                "    Stop periodic cron job processing.",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                "    it is used instead of the 'key' prefix. These are not propagated to",
                "    replicas. Cluster slots are not respected so keys not belonging to the",
                "    current node can be created in cluster mode.",
                "PROTOCOL <type>",
                "    Reply with a test value of the specified type. <type> can be: string,",
                "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
                "    true, false.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not accessed (otherwise the Redis behavior). Setting it to 1 reenables back the default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
            ],
        );
    } else {
        let s = String::from_utf8_lossy(sub);
        ctx.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{s}'. Try DEBUG HELP."
        ));
    }
}

/// `DEBUG POPULATE count [prefix] [size]` (Redis's test and benchmark
/// helper): string keys `prefix:N` (default `key`) for N in 0..count
/// holding `value:N`, or, with a size, `value:N` cut or zero-padded to
/// size bytes; keys that exist are left alone. As Redis: the name is cut
/// to 127 bytes, nothing is propagated or counted as a change (DEBUG is
/// not a write), WATCHes on the keys break.
fn debug_populate(ctx: &mut Ctx, args: &Args) {
    // Redis's getPositiveLongFromObjectOrReply: one message for both a
    // negative number and no number.
    let positive = |ctx: &mut Ctx, a: &[u8]| -> Option<u64> {
        match ferrokv_resp::parse_i64(a) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => {
                ctx.error("ERR value is out of range, must be positive");
                None
            }
        }
    };
    let Some(count) = positive(ctx, args.get(2)) else {
        return;
    };
    let size = if args.len() == 5 {
        match positive(ctx, args.get(4)) {
            Some(n) => Some(n as usize),
            None => return,
        }
    } else {
        None
    };
    let prefix: &[u8] = if args.len() >= 4 { args.get(3) } else { b"key" };
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    let mut key = Vec::with_capacity(128);
    let mut value = Vec::new();
    for j in 0..count {
        let n = j.to_string();
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(n.as_bytes());
        // Redis formats the name into a 128-byte buffer.
        key.truncate(127);
        if ctx.srv.exists(db, &key, ctx.now_ms) {
            continue;
        }
        value.clear();
        value.extend_from_slice(b"value:");
        value.extend_from_slice(n.as_bytes());
        if let Some(n) = size {
            value.resize(n, 0);
        }
        ctx.srv.keyspace.dbs[db].set_str(&key, &value, ferrokv_store::NO_EXPIRE, lru);
        ctx.srv.touch_watched_key(db, &key);
    }
    ctx.client.out.ok();
}

/// DEBUG PROTOCOL <type>: a sample reply of each RESP type, exactly as
/// Redis sends it (clients test their RESP2 and RESP3 parsers with it).
fn debug_protocol(ctx: &mut Ctx, kind: &[u8]) {
    let out = &mut ctx.client.out;
    let resp3 = out.proto.is_resp3();
    match String::from_utf8_lossy(kind).to_ascii_lowercase().as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        // Redis's literal, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        "double" => out.double(3.141),
        "bignum" => ferrokv_resp::encode::big_number(
            &mut out.buf,
            out.proto,
            "1234567999999999999999999999999999999",
        ),
        "null" => out.null(),
        "array" | "set" | "map" => {
            let k = String::from_utf8_lossy(kind).to_ascii_lowercase();
            match k.as_str() {
                "array" => out.array(3),
                "set" => out.set(3),
                _ => out.map(3),
            }
            for i in 0..3 {
                out.int(i);
                if k == "map" {
                    out.boolean(i == 1);
                }
            }
        }
        "attrib" => {
            // RESP2 has no attributes: only the reply that follows them.
            if resp3 {
                out.buf.extend_from_slice(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !resp3 {
                out.error("ERR RESP2 is not supported by this command");
                return;
            }
            ferrokv_resp::encode::push(&mut out.buf, out.proto, 2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        "verbatim" => out.verbatim(b"This is a verbatim\nstring"),
        _ => out.error("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"),
    }
}

/// TIME
fn time(ctx: &mut Ctx, _args: Args) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let out = &mut ctx.client.out;
    out.array(2);
    out.bulk(now.as_secs().to_string().as_bytes());
    out.bulk(now.subsec_micros().to_string().as_bytes());
}

/// LASTSAVE
fn lastsave(ctx: &mut Ctx, _args: Args) {
    let t = ctx.srv.lastsave as i64;
    ctx.client.out.int(t);
}

/// BGREWRITEAOF
///
/// With `appendonly no` too, as Redis 7.0: a base and a manifest naming it
/// alone, the files a later `appendonly yes` starts from
/// (`persistence::aof::OffRewrite`).
fn bgrewriteaof(ctx: &mut Ctx, _args: Args) {
    if ctx.srv.aof_rewrite_in_progress() {
        ctx.error("ERR Background append only file rewriting already in progress");
        return;
    }
    if ctx.srv.persistence.job.is_some() {
        ctx.srv.aof_rewrite_scheduled = true;
        ctx.client
            .out
            .simple("Background append only file rewriting scheduled");
        return;
    }
    match ctx.srv.start_aof_rewrite() {
        Ok(()) => ctx
            .client
            .out
            .simple("Background append only file rewriting started"),
        Err(e) => ctx.error(&e),
    }
}

/// SAVE
fn save(ctx: &mut Ctx, _args: Args) {
    if ctx.srv.persistence.job.is_some() {
        ctx.error("ERR Background save already in progress");
        return;
    }
    match ctx.srv.save_now() {
        Ok(()) => ctx.client.out.ok(),
        Err(e) => ctx.error(&e),
    }
}

/// BGSAVE [SCHEDULE]
fn bgsave(ctx: &mut Ctx, args: Args) {
    let schedule = match args.len() {
        1 => false,
        2 if is(args.get(1), "schedule") => true,
        _ => {
            ctx.error(err::SYNTAX);
            return;
        }
    };
    if ctx.srv.persistence.job.is_some() {
        if schedule {
            ctx.srv.persistence.bgsave_scheduled = true;
            ctx.client.out.simple("Background saving scheduled");
        } else {
            ctx.error("ERR Background save already in progress");
        }
        return;
    }
    match ctx
        .srv
        .start_snapshot(crate::persistence::SaveKind::Background)
    {
        Ok(()) => ctx.client.out.simple("Background saving started"),
        Err(e) => ctx.error(&e),
    }
}

/// DBSIZE
fn dbsize(ctx: &mut Ctx, _args: Args) {
    let n = ctx.srv.keyspace.dbs[ctx.client.db].len();
    ctx.client.out.int(n as i64);
}

/// Parses the optional ASYNC|SYNC of FLUSHDB/FLUSHALL. Some(true) = async.
fn flush_mode(ctx: &mut Ctx, args: Args) -> Option<bool> {
    match args.len() {
        1 => Some(false),
        2 if is(args.get(1), "async") => Some(true),
        2 if is(args.get(1), "sync") => Some(false),
        _ => {
            ctx.error(err::SYNTAX);
            None
        }
    }
}

fn flush_db(ctx: &mut Ctx, db: usize, lazy: bool) -> u64 {
    // Consumers blocked on a stream there end their wait (Redis's
    // `scanDatabaseForDeletedStreams`); other waiters find nothing.
    for key in ctx.srv.blocking.waited_keys_in(db) {
        ctx.srv.blocking.signal(&key);
    }
    let d = &mut ctx.srv.keyspace.dbs[db];
    let n = d.len() as u64;
    // A snapshot in progress keeps what it has not written yet: `clear`
    // hands it the entries, so only an idle table is handed off whole.
    if lazy && n > 0 && !d.snapshot_active() {
        let old = std::mem::take(d);
        ctx.srv.lazy_free(old);
    } else {
        d.clear();
    }
    n
}

/// FLUSHDB [ASYNC|SYNC]
fn flushdb(ctx: &mut Ctx, args: Args) {
    let Some(lazy) = flush_mode(ctx, args) else {
        return;
    };
    ctx.srv.touch_watched_keys_in_db(ctx.client.db, None);
    ctx.srv.tracking_invalidate_all();
    let n = flush_db(ctx, ctx.client.db, lazy);
    ctx.modified(n.max(1));
    ctx.client.out.ok();
}

/// FLUSHALL [ASYNC|SYNC]
fn flushall(ctx: &mut Ctx, args: Args) {
    let Some(lazy) = flush_mode(ctx, args) else {
        return;
    };
    let mut n = 0;
    ctx.srv.tracking_invalidate_all();
    for db in 0..ctx.srv.keyspace.dbs.len() {
        ctx.srv.touch_watched_keys_in_db(db, None);
        n += flush_db(ctx, db, lazy);
    }
    // As Redis 7.0's flushAllDataAndResetRDB: the changes count the keys
    // removed; a BGSAVE under way stops (it would write the flushed data),
    // and with save rules the empty data set is saved at once, so that a
    // restart does not bring the keys back (the counter is then 0). The
    // command is propagated all the same, even over empty databases.
    ctx.modified(n);
    ctx.srv.kill_bgsave();
    if !ctx.srv.config.save_rules.is_empty() && ctx.srv.persistence.job.is_none() {
        if let Err(e) = ctx.srv.save_now() {
            tracing::warn!("FLUSHALL could not save the empty data set: {e}");
        }
    }
    ctx.srv.propagation.force = true;
    ctx.client.out.ok();
}

/// SWAPDB index1 index2
fn swapdb(ctx: &mut Ctx, args: Args) {
    if ctx.srv.cluster.is_some() {
        return ctx.error("ERR SWAPDB is not allowed in cluster mode");
    }
    let n = ctx.srv.keyspace.dbs.len() as i64;
    // Redis's `getIntFromObjectOrReply` with a message of its own: the
    // same text for a non-integer and for one outside the 32-bit range.
    let db_index = |a: &[u8]| ferrokv_resp::parse_i64(a).filter(|v| i32::try_from(*v).is_ok());
    let Some(a) = db_index(args.get(1)) else {
        ctx.error("ERR invalid first DB index");
        return;
    };
    let Some(b) = db_index(args.get(2)) else {
        ctx.error("ERR invalid second DB index");
        return;
    };
    if a < 0 || a >= n || b < 0 || b >= n {
        ctx.error(err::DB_RANGE);
        return;
    }
    if a != b {
        ctx.srv
            .touch_watched_keys_in_db(a as usize, Some(b as usize));
        ctx.srv
            .touch_watched_keys_in_db(b as usize, Some(a as usize));
    }
    ctx.srv.keyspace.dbs.swap(a as usize, b as usize);
    // Clients stay in their database: what they wait on may be there now
    // (Redis's `scanDatabaseForReadyKeys`), and a consumer whose stream
    // left ends its wait (`scanDatabaseForDeletedStreams`).
    if a != b {
        for db in [a as usize, b as usize] {
            for key in ctx.srv.blocking.waited_keys_in(db) {
                ctx.srv.blocking.signal(&key);
            }
        }
    }
    if let Some(job) = ctx.srv.persistence.job.as_mut() {
        job.swapdb(a as usize, b as usize);
    }
    ctx.modified(1);
    ctx.client.out.ok();
}
