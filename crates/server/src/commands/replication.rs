//! Replication commands: `REPLICAOF`/`SLAVEOF`, `ROLE`, `WAIT`, and the
//! ones replicas send (`REPLCONF`, `PSYNC`, `SYNC`). The work is in
//! `crate::replication`; these parse and reply.

use super::flags::*;
use super::{is, CommandSpec, Ctx};
use ferrokv_resp::Args;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h).group("server")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("replicaof", 3, ADMIN | NOSCRIPT | STALE, replicaof)
        .since("5.0.0")
        .doc(
            "Configure a server as replica of another, or promote it to a master.",
            "host port",
        ),
    cmd("slaveof", 3, ADMIN | NOSCRIPT | STALE, replicaof)
        .doc(
            "Sets a Redis server as a replica of another, or promotes it to being a master.",
            "host port",
        ),
    cmd("role", 1, NOSCRIPT | LOADING | STALE | FAST, role)
        .since("2.8.12")
        .doc("Returns the replication role.", ""),
    cmd("wait", 3, NOSCRIPT, wait)
        .since("3.0.0")
        .group("generic")
        .doc(
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
            "numreplicas timeout",
        ),
    cmd("waitaof", 4, BLOCKING, waitaof)
        .since("7.2.0")
        .group("generic")
        .doc(
            "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.",
            "numlocal numreplicas timeout",
        ),
    cmd("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, replconf)
        .since("3.0.0")
        .doc("An internal command for configuring the replication stream.", ""),
    cmd("psync", -3, ADMIN | NO_MULTI | NOSCRIPT, psync)
        .since("2.8.0")
        .doc("An internal command used in replication.", "replicationid offset"),
    cmd("failover", -1, ADMIN | NOSCRIPT | STALE, crate::replication::failover::failover_command)
        .since("6.2.0")
        .group("server")
        .doc(
            "Start a coordinated failover between this server and one of its replicas.",
            "[TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]",
        ),
    cmd("sync", 1, ADMIN | NO_MULTI | NOSCRIPT, sync)
        .doc("An internal command used in replication.", ""),
];

/// REPLICAOF host port | REPLICAOF NO ONE
fn replicaof(ctx: &mut Ctx, args: Args) {
    let (host, port) = (args.get(1), args.get(2));
    if is(host, "no") && is(port, "one") {
        if ctx.srv.repl.is_replica() {
            ctx.srv.replicaof_no_one();
            let who = super::connection::client_line(ctx.client, true, ctx.srv);
            tracing::info!("MASTER MODE enabled (user request from '{who}')");
        }
        ctx.client.out.ok();
        return;
    }
    let Some(port) = super::parse_int(ctx, port) else {
        return;
    };
    if !(0..=65535).contains(&port) {
        ctx.error("ERR Invalid master port");
        return;
    }
    if ctx.srv.repl.master_client_id() == Some(ctx.client.id) {
        ctx.error("ERR Command is not valid when client is a replica.");
        return;
    }
    let host = String::from_utf8_lossy(host).into_owned();
    if ctx.srv.replicaof(host.clone(), port as u16) {
        let who = super::connection::client_line(ctx.client, true, ctx.srv);
        tracing::info!("REPLICAOF {host}:{port} enabled (user request from '{who}')");
        ctx.client.out.ok();
    } else {
        ctx.client
            .out
            .simple("OK Already connected to specified master");
    }
}

/// ROLE
fn role(ctx: &mut Ctx, _args: Args) {
    ctx.srv.role_reply(&mut ctx.client.out);
}

/// WAIT numreplicas timeout
fn wait(ctx: &mut Ctx, args: Args) {
    if ctx.srv.repl.is_replica() {
        ctx.error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
        return;
    }
    let Some(n) = super::parse_int(ctx, args.get(1)) else {
        return;
    };
    let Some(timeout) = parse_timeout_ms(ctx, args.get(2)) else {
        return;
    };
    let n = n.max(0) as usize;
    let (srv, client) = (&mut *ctx.srv, &mut *ctx.client);
    srv.wait_command(client, n, timeout);
}

/// The timeout of WAIT and WAITAOF: whole milliseconds (0: none), with
/// Redis's two refusals.
fn parse_timeout_ms(ctx: &mut Ctx, a: &[u8]) -> Option<u64> {
    match ferrokv_resp::parse_i64(a) {
        Some(t) if t < 0 => {
            ctx.error("ERR timeout is negative");
            None
        }
        Some(t) => Some(t as u64),
        None => {
            ctx.error("ERR timeout is not an integer or out of range");
            None
        }
    }
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): until the client's
/// last write is fsynced by the local AOF (numlocal 1) and by the AOFs of
/// `numreplicas` replicas (their `REPLCONF ACK … FACK`), or the timeout
/// (ms, 0: none) passes; answers `[local 0|1, replicas]`. Arguments and
/// refusals in Redis 7.2's order and words.
fn waitaof(ctx: &mut Ctx, args: Args) {
    let numlocal = match ferrokv_resp::parse_i64(args.get(1)) {
        Some(n @ 0..=1) => n == 1,
        Some(_) => return ctx.error("ERR value is out of range, value must between 0 and 1"),
        None => return ctx.error("ERR value is not an integer or out of range"),
    };
    let numreplicas = match ferrokv_resp::parse_i64(args.get(2)) {
        Some(n) if n >= 0 => n as usize,
        _ => return ctx.error("ERR value is out of range, must be positive"),
    };
    let Some(timeout) = parse_timeout_ms(ctx, args.get(3)) else {
        return;
    };
    if ctx.srv.repl.is_replica() {
        return ctx.error("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    if numlocal && ctx.srv.aof.is_none() {
        return ctx
            .error("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
    }
    let may_block = crate::blocking::may_block(ctx);
    let (srv, client) = (&mut *ctx.srv, &mut *ctx.client);
    srv.waitaof_command(client, numlocal, numreplicas, timeout, may_block);
}

/// REPLCONF <option> <value> [<option> <value> ...]
fn replconf(ctx: &mut Ctx, args: Args) {
    let argv: Vec<&[u8]> = args.iter().collect();
    if argv.len() == 1 {
        ctx.wrong_args("replconf");
        return;
    }
    let (srv, client) = (&mut *ctx.srv, &mut *ctx.client);
    srv.replconf(client, &argv);
}

/// PSYNC replicationid offset
fn psync(ctx: &mut Ctx, args: Args) {
    // (Arguments past the offset: `FAILOVER`, or ignored, as Redis.)
    let argv: Vec<&[u8]> = args.iter().collect();
    let (srv, client) = (&mut *ctx.srv, &mut *ctx.client);
    srv.psync(client, &argv, false);
}

/// SYNC
fn sync(ctx: &mut Ctx, args: Args) {
    let argv: Vec<&[u8]> = args.iter().collect();
    let (srv, client) = (&mut *ctx.srv, &mut *ctx.client);
    srv.psync(client, &argv, true);
}
