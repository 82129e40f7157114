//! The connection family: PING, ECHO, QUIT, HELLO, AUTH, SELECT and the
//! CLIENT container.

use super::flags::*;
use super::{err, is, reply_help, CommandSpec, Ctx};
use crate::net::client::{Client, ReplyMode};
use crate::replication::ClientKind;
use crate::tracking::{ClientTracking, Tracking};
use ferrokv_resp::{Args, Protocol};
use std::os::fd::AsRawFd;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h).group("connection")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("ping", -1, FAST, ping).doc("Returns the server's liveliness response.", "[message]"),
    cmd("echo", 2, FAST | LOADING | STALE, echo).doc("Returns the given string.", "message"),
    cmd(
        "quit",
        -1,
        FAST | NO_AUTH | STALE | LOADING | ALLOW_BUSY | NOSCRIPT,
        quit,
    )
    .doc("Closes the connection.", ""),
    cmd(
        "hello",
        -1,
        FAST | NO_AUTH | STALE | LOADING | NOSCRIPT | ALLOW_BUSY,
        hello,
    )
    .since("6.0.0")
    .doc(
        "Handshakes with the Redis server.",
        "[protover [AUTH username password] [SETNAME clientname]]",
    ),
    cmd(
        "auth",
        -2,
        FAST | NO_AUTH | STALE | LOADING | NOSCRIPT | ALLOW_BUSY,
        auth,
    )
    .doc("Authenticates the connection.", "[username] password"),
    cmd(
        "reset",
        1,
        FAST | NOSCRIPT | LOADING | STALE | NO_AUTH | ALLOW_BUSY,
        reset,
    )
    .since("6.2.0")
    .doc("Resets the connection.", ""),
    cmd("select", 2, FAST | LOADING | STALE, select).doc("Changes the selected database.", "index"),
    cmd("client", -2, 0, client_help)
        .since("2.4.0")
        .doc("A container for client connection commands.", "")
        .subs(CLIENT_SUBS),
];

static CLIENT_SUBS: &[CommandSpec] = &[
    cmd("client|id", 2, STALE | NOSCRIPT | LOADING, client_id).since("5.0.0").doc("Returns the unique client ID of the connection.", ""),
    cmd("client|setname", 3, STALE | NOSCRIPT | LOADING, client_setname).since("2.6.9").doc("Sets the connection name.", "connection-name"),
    cmd("client|getname", 2, STALE | NOSCRIPT | LOADING, client_getname).since("2.6.9").doc("Returns the name of the connection.", ""),
    cmd("client|setinfo", 4, STALE | NOSCRIPT | LOADING, client_setinfo).since("7.2.0").doc("Sets information specific to the client or connection.", "LIB-NAME libname|LIB-VER libver"),
    cmd("client|list", -2, ADMIN | STALE | NOSCRIPT | LOADING, client_list).since("2.4.0").complexity("O(N) where N is the number of client connections").doc(
        "Lists open connections.",
        "[TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID client-id [client-id ...]]",
    ),
    cmd("client|info", 2, STALE | NOSCRIPT | LOADING, client_info).since("6.2.0").doc("Returns information about the connection.", ""),
    cmd("client|kill", -3, ADMIN | STALE | NOSCRIPT | LOADING, client_kill).since("2.4.0").complexity("O(N) where N is the number of client connections").doc(
        "Terminates open connections.",
        "ip:port|[ID client-id] [TYPE NORMAL|MASTER|SLAVE|REPLICA|PUBSUB] [USER username] [ADDR ip:port] [LADDR ip:port] [SKIPME YES|NO] [MAXAGE maxage]",
    ),
    cmd("client|no-evict", 3, ADMIN | STALE | NOSCRIPT | LOADING, client_no_evict).since("7.0.0").doc("Sets the client eviction mode of the connection.", "ON|OFF"),
    cmd("client|no-touch", 3, STALE | NOSCRIPT | LOADING, client_no_touch).since("7.2.0").complexity("O(1)").doc("Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", "ON|OFF"),
    cmd("client|unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, crate::blocking::client_unblock).since("5.0.0").complexity("O(log N) where N is the number of client connections").doc("Unblocks a client blocked by a blocking command from a different connection.", "client-id [TIMEOUT|ERROR]"),
    cmd("client|pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, crate::pause::client_pause).since("3.0.0").complexity("O(1)").doc("Suspends commands processing.", "timeout [WRITE|ALL]"),
    cmd("client|unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, crate::pause::client_unpause).since("6.2.0").complexity("O(N) Where N is the number of paused clients").doc("Resumes processing commands from paused clients.", ""),
    cmd("client|reply", 3, STALE | NOSCRIPT | LOADING, client_reply).since("3.2.0").doc("Instructs the server whether to reply to commands.", "ON|OFF|SKIP"),
    cmd("client|tracking", -3, STALE | NOSCRIPT | LOADING, client_tracking).since("6.0.0").complexity("O(1). Some options may introduce additional complexity.").doc("Controls server-assisted client-side caching for the connection.", "ON|OFF [REDIRECT client-id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"),
    cmd("client|caching", 3, STALE | NOSCRIPT | LOADING, client_caching).since("6.0.0").doc("Instructs the server whether to track the keys in the next request.", "YES|NO"),
    cmd("client|trackinginfo", 2, STALE | NOSCRIPT | LOADING, client_trackinginfo).since("6.2.0").doc("Returns information about server-assisted client-side caching for the connection.", ""),
    cmd("client|getredir", 2, STALE | NOSCRIPT | LOADING, client_getredir).since("6.0.0").doc("Returns the client ID to which the connection's tracking notifications are redirected.", ""),
    cmd("client|help", 2, STALE | LOADING, client_help).since("5.0.0").doc("Returns helpful text about the different subcommands.", ""),
];

/// PING [message]
fn ping(ctx: &mut Ctx, args: Args) {
    // A RESP2 connection in subscribed mode gets its reply in the shape of
    // a message, so a client reading messages can tell it apart.
    if args.len() <= 2 && ctx.client.out.proto == Protocol::Resp2 && ctx.client.subs.any() {
        ctx.client.out.array(2);
        ctx.client.out.bulk(b"pong");
        ctx.client
            .out
            .bulk(if args.len() == 2 { args.get(1) } else { b"" });
        return;
    }
    match args.len() {
        1 => ctx.client.out.simple("PONG"),
        2 => ctx.client.out.bulk(args.get(1)),
        _ => ctx.wrong_args("ping"),
    }
}

/// ECHO message
fn echo(ctx: &mut Ctx, args: Args) {
    ctx.client.out.bulk(args.get(1));
}

/// QUIT
fn quit(ctx: &mut Ctx, _args: Args) {
    ctx.client.out.ok();
    ctx.client.close_after_reply = true;
}

/// RESET: the connection as it was when it connected (Redis's
/// `clearClientConnectionState`): no transaction, no WATCHes, no
/// subscriptions, no MONITOR, no tracking, database 0, RESP2, no name, replies on, and
/// authenticated only when no password is required.
fn reset(ctx: &mut Ctx, _args: Args) {
    crate::commands::multi::discard_transaction(ctx.srv, ctx.client);
    crate::commands::pubsub::unsubscribe_all_silently(ctx);
    if std::mem::take(&mut ctx.client.monitor) {
        ctx.srv.monitors.remove(ctx.client.token);
    }
    ctx.srv.tracking.disable(ctx.client.id);
    ctx.client.db = 0;
    ctx.client.out.proto = Protocol::Resp2;
    ctx.client.name = None;
    ctx.client.reply_mode = ReplyMode::On;
    ctx.client.no_evict = false;
    ctx.client.no_touch = false;
    ctx.client.user = crate::acl::DEFAULT_USER;
    ctx.client.authenticated = ctx.srv.acl.default_open();
    ctx.client.out.simple("RESET");
}

/// Logs the client in as `user` if the ACL takes `pass` (Redis's
/// `ACLAuthenticateUser`); a failure is counted and logged.
fn check_password(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> bool {
    match ctx.srv.acl.authenticate(user, pass) {
        Some(id) => {
            ctx.client.user = id;
            ctx.client.authenticated = true;
            true
        }
        None => {
            ctx.srv.acl.count_denial(crate::acl::Denied::Auth);
            // The command that tried (`auth`, `hello`), as Redis logs it.
            let object = ctx.client.last_cmd.as_bytes().to_vec();
            ctx.srv.acl_log(
                ctx.client,
                crate::acl::Denied::Auth,
                crate::acl::log::Context::Toplevel,
                object,
                Some(user.to_vec()),
            );
            ctx.error("WRONGPASS invalid username-password pair or user is disabled.");
            false
        }
    }
}

/// AUTH [username] password
fn auth(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 {
        ctx.error(err::SYNTAX);
        return;
    }
    if args.len() == 2 && ctx.srv.acl.default_user().nopass {
        ctx.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        return;
    }
    let (user, pass) = if args.len() == 3 {
        (args.get(1), args.get(2))
    } else {
        (&b"default"[..], args.get(1))
    };
    if check_password(ctx, user, pass) {
        ctx.client.out.ok();
    }
}

fn valid_name(s: &[u8]) -> bool {
    s.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
fn hello(ctx: &mut Ctx, args: Args) {
    let mut proto = None;
    let mut i = 1;
    if args.len() >= 2 {
        match ferrokv_resp::parse_i64(args.get(1)) {
            Some(v) if (2..=3).contains(&v) => proto = Some(v),
            Some(_) => {
                ctx.error("NOPROTO unsupported protocol version");
                return;
            }
            None => {
                ctx.error("ERR Protocol version is not an integer or out of range");
                return;
            }
        }
        i = 2;
    }
    let mut auth: Option<(&[u8], &[u8])> = None;
    let mut setname: Option<&[u8]> = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        let a = args.get(i);
        if is(a, "auth") && more >= 2 {
            auth = Some((args.get(i + 1), args.get(i + 2)));
            i += 3;
        } else if is(a, "setname") && more >= 1 {
            setname = Some(args.get(i + 1));
            i += 2;
        } else {
            ctx.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(a)
            ));
            return;
        }
    }
    if let Some((u, p)) = auth {
        if !check_password(ctx, u, p) {
            return;
        }
    }
    if !ctx.client.authenticated {
        ctx.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if let Some(name) = setname {
        if !valid_name(name) {
            ctx.error("ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        ctx.client.name = (!name.is_empty()).then(|| name.to_vec());
    }
    if let Some(p) = proto {
        ctx.client.out.proto = if p == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
    }
    let id = ctx.client.id as i64;
    let p = if ctx.client.out.proto.is_resp3() {
        3
    } else {
        2
    };
    let out = &mut ctx.client.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::REDIS_COMPAT_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(p);
    out.bulk(b"id");
    out.int(id);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
}

/// SELECT index
fn select(ctx: &mut Ctx, args: Args) {
    let Some(v) = super::parse_i32(ctx, args.get(1)) else {
        return;
    };
    if ctx.srv.cluster.is_some() && v != 0 {
        return ctx.error("ERR SELECT is not allowed in cluster mode");
    }
    if v < 0 || v as usize >= ctx.srv.keyspace.dbs.len() {
        ctx.error(err::DB_RANGE);
        return;
    }
    ctx.client.db = v as usize;
    ctx.client.out.ok();
}

/// CLIENT ID
fn client_id(ctx: &mut Ctx, _args: Args) {
    let id = ctx.client.id as i64;
    ctx.client.out.int(id);
}

/// CLIENT SETNAME connection-name
fn client_setname(ctx: &mut Ctx, args: Args) {
    let name = args.get(2);
    if !valid_name(name) {
        ctx.error("ERR Client names cannot contain spaces, newlines or special characters.");
        return;
    }
    ctx.client.name = (!name.is_empty()).then(|| name.to_vec());
    ctx.client.out.ok();
}

/// CLIENT GETNAME
fn client_getname(ctx: &mut Ctx, _args: Args) {
    match ctx.client.name.clone() {
        Some(n) => ctx.client.out.bulk(&n),
        None => ctx.client.out.null(),
    }
}

/// CLIENT SETINFO LIB-NAME libname|LIB-VER libver
fn client_setinfo(ctx: &mut Ctx, args: Args) {
    let (attr, val) = (args.get(2), args.get(3));
    let which = if is(attr, "lib-name") {
        "lib-name"
    } else if is(attr, "lib-ver") {
        "lib-ver"
    } else {
        ctx.error(&format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        ));
        return;
    };
    if !valid_name(val) {
        ctx.error(&format!(
            "ERR {which} cannot contain spaces, newlines or special characters."
        ));
        return;
    }
    let v = (!val.is_empty()).then(|| val.to_vec());
    if which == "lib-name" {
        ctx.client.lib_name = v;
    } else {
        ctx.client.lib_ver = v;
    }
    ctx.client.out.ok();
}

/// A `TYPE` argument of `CLIENT LIST` / `CLIENT KILL`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TypeFilter {
    Normal,
    Master,
    Replica,
    PubSub,
}

fn type_filter(t: &[u8]) -> Option<TypeFilter> {
    if is(t, "normal") {
        Some(TypeFilter::Normal)
    } else if is(t, "master") {
        Some(TypeFilter::Master)
    } else if is(t, "replica") || is(t, "slave") {
        Some(TypeFilter::Replica)
    } else if is(t, "pubsub") {
        Some(TypeFilter::PubSub)
    } else {
        None
    }
}

/// Whether a client is of a `TYPE` (Redis's `getClientType`: a master or a
/// replica first, then pub/sub, else normal).
fn type_matches(srv: &crate::server::Server, c: &Client, f: TypeFilter) -> bool {
    match srv.repl.client_kind(c.id) {
        ClientKind::Master => f == TypeFilter::Master,
        ClientKind::Replica => f == TypeFilter::Replica,
        ClientKind::Normal if c.subs.any() => f == TypeFilter::PubSub,
        ClientKind::Normal => f == TypeFilter::Normal,
    }
}

/// The `flags=` letters of `CLIENT LIST` this server can show: `O`
/// (MONITOR), `P` (pub/sub), `x` (in MULTI), `b` (blocked: on keys, in
/// `WAIT`, in `SHUTDOWN`, or held by a pause), `t`
/// (tracking), `R` (its tracking redirect is gone), `B` (tracking in BCAST
/// mode), `U` (on a Unix socket), `N` (none).
fn client_flags(c: &Client, tracking: Option<&ClientTracking>, waiting: bool) -> String {
    let mut f = String::new();
    if c.monitor {
        f.push('O');
    }
    if c.subs.any() {
        f.push('P');
    }
    if c.multi.is_some() {
        f.push('x');
    }
    if c.blocked.is_some() || waiting {
        f.push('b');
    }
    if let Some(t) = tracking {
        f.push('t');
        if t.broken_redirect {
            f.push('R');
        }
        if t.bcast {
            f.push('B');
        }
    }
    if c.conn
        .stream
        .as_ref()
        .is_some_and(|s| s.transport() == crate::net::conn::Transport::Unix)
    {
        f.push('U');
    }
    if c.no_evict {
        f.push('e');
    }
    if c.no_touch {
        f.push('T');
    }
    if f.is_empty() {
        f.push('N');
    }
    f
}

/// One line of `CLIENT LIST` / `CLIENT INFO`, in Redis's field order.
pub fn client_line(c: &Client, current: bool, srv: &crate::server::Server) -> String {
    let tracking = srv.tracking.of(c.id);
    let user =
        String::from_utf8_lossy(&crate::acl::command::user_name(&srv.acl, c.user)).into_owned();
    let s = |o: &Option<Vec<u8>>| {
        o.as_ref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    };
    let qbuf = c.conn.in_end - c.conn.in_start;
    // Redis reports its output in two tiers: `obl`, the bytes in the
    // client's fixed 16 KiB buffer; `oll` and `omem`, the 16 KiB blocks
    // of its reply list past it and their memory (0 when nothing waits).
    // ferrokv's reply buffer is one vector: its first READ_CHUNK bytes
    // are the fixed tier, what it holds past them the list.
    let pending = c.pending_output();
    let chunk = crate::net::client::READ_CHUNK;
    let obl = pending.min(chunk);
    let (oll, omem) = if pending > chunk {
        (
            (pending - chunk).div_ceil(chunk),
            c.out.buf.capacity().saturating_sub(chunk),
        )
    } else {
        (0, 0)
    };
    let mut line = format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.local_addr,
        c.conn.stream.as_ref().map_or(-1, |s| s.as_raw_fd()),
        s(&c.name),
        c.created.elapsed().as_secs(),
        if current { 0 } else { c.last_interaction.elapsed().as_secs() },
        client_flags(
            c,
            tracking,
            srv.repl.master.is_waiting(c.id) || srv.shutdown.blocks(c.id)
        ),
        c.db,
        c.subs.channels.len(),
        c.subs.patterns.len(),
        c.subs.shard_channels.len(),
        crate::commands::multi::queued_count(c),
        qbuf,
        c.conn.inbuf.len().saturating_sub(c.conn.in_end),
        crate::commands::multi::queued_mem(c),
        c.conn.inbuf.len(),
        c.conn.inbuf.len(),
        obl,
        oll,
        omem,
        c.memory_usage(),
        c.last_cmd,
        user,
        tracking.map_or(-1, |t| t.redirect as i64),
        if c.out.proto.is_resp3() { 3 } else { 2 },
        s(&c.lib_name),
        s(&c.lib_ver),
    );
    // An RDMA connection's own counters, after Redis's fields (docs/rdma.md).
    if let Some(r) = c.conn.stream.as_ref().and_then(|s| s.rdma_stats()) {
        let l = &r.write_latency;
        let _ = std::fmt::Write::write_fmt(
            &mut line,
            format_args!(
                " rdma-bytes-written={} rdma-writes={} rdma-bytes-read={} rdma-credit-stalls={} rdma-qp-retries={} rdma-write-latency-usec={}",
                r.bytes_written,
                r.writes,
                r.bytes_read,
                r.credit_stalls,
                r.queue_full,
                l.sum_usec.checked_div(l.count).unwrap_or(0),
            ),
        );
    }
    line
}

/// CLIENT LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID client-id [client-id ...]]
fn client_list(ctx: &mut Ctx, args: Args) {
    // One filter at most, as Redis 7.0: `TYPE t` alone, or `ID id [id ...]`.
    let mut ids: Option<Vec<u64>> = None;
    let mut only_type = None;
    if args.len() == 4 && is(args.get(2), "type") {
        let t = args.get(3);
        if let Some(f) = type_filter(t) {
            only_type = Some(f);
        } else {
            ctx.error(&format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(t)
            ));
            return;
        }
    } else if args.len() > 3 && is(args.get(2), "id") {
        let mut v = Vec::new();
        for id in args.iter().skip(3) {
            // Any integer is accepted (Redis's getLongLongFromObject);
            // ids below 1 simply match no client.
            match ferrokv_resp::parse_i64(id) {
                Some(n) => v.push(n.max(0) as u64),
                None => {
                    ctx.error("ERR Invalid client ID");
                    return;
                }
            }
        }
        ids = Some(v);
    } else if args.len() != 2 {
        ctx.error(err::SYNTAX);
        return;
    }
    let mut all: Vec<&Client> = ctx.srv.other_clients().collect();
    all.push(ctx.client);
    all.sort_by_key(|c| c.id);
    let mut text = String::new();
    if let Some(ids) = ids {
        // As Redis: one line per id given, in their order (a repeated id
        // is listed again), each client found by its id — O(ids + clients),
        // however many ids the request carries.
        let by_id: hashbrown::HashMap<u64, &Client> = all.iter().map(|c| (c.id, *c)).collect();
        for id in ids {
            if let Some(c) = by_id.get(&id) {
                text.push_str(&client_line(c, c.id == ctx.client.id, ctx.srv));
                text.push('\n');
            }
        }
    } else {
        for c in all {
            if only_type.is_some_and(|f| !type_matches(ctx.srv, c, f)) {
                continue;
            }
            text.push_str(&client_line(c, c.id == ctx.client.id, ctx.srv));
            text.push('\n');
        }
    }
    ctx.client.out.verbatim(text.as_bytes());
}

/// CLIENT INFO
fn client_info(ctx: &mut Ctx, _args: Args) {
    let mut line = client_line(ctx.client, true, ctx.srv);
    line.push('\n');
    ctx.client.out.verbatim(line.as_bytes());
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [TYPE type] [USER name] [ADDR ip:port] [LADDR ip:port] [SKIPME yes|no] [MAXAGE secs]
fn client_kill(ctx: &mut Ctx, args: Args) {
    #[derive(Default)]
    struct Filter {
        id: Option<u64>,
        addr: Option<String>,
        laddr: Option<String>,
        kind: Option<TypeFilter>,
        user: Option<crate::acl::UserId>,
        maxage: Option<u64>,
    }
    let mut f = Filter {
        user: None,
        ..Default::default()
    };
    let mut skipme = true;
    let old_form = args.len() == 3;
    if old_form {
        f.addr = Some(String::from_utf8_lossy(args.get(2)).into_owned());
        skipme = false;
    } else {
        // Pair by pair, as Redis: a bad value before a dangling last word
        // is what the reply names.
        for pair in (2..args.len()).step_by(2) {
            if pair + 1 >= args.len() {
                return ctx.error(err::SYNTAX);
            }
            let (k, v) = (args.get(pair), args.get(pair + 1));
            let vs = String::from_utf8_lossy(v).into_owned();
            if is(k, "id") {
                match ferrokv_resp::parse_i64(v) {
                    Some(n) if n > 0 => f.id = Some(n as u64),
                    _ => {
                        ctx.error("ERR client-id should be greater than 0");
                        return;
                    }
                }
            } else if is(k, "type") {
                if let Some(k) = type_filter(v) {
                    f.kind = Some(k);
                } else {
                    ctx.error(&format!("ERR Unknown client type '{vs}'"));
                    return;
                }
            } else if is(k, "user") {
                match ctx.srv.acl.by_name(v) {
                    Some(id) => f.user = Some(id),
                    None => {
                        ctx.error(&format!("ERR No such user '{vs}'"));
                        return;
                    }
                }
            } else if is(k, "addr") {
                f.addr = Some(vs);
            } else if is(k, "laddr") {
                f.laddr = Some(vs);
            } else if is(k, "skipme") {
                if is(v, "yes") {
                    skipme = true;
                } else if is(v, "no") {
                    skipme = false;
                } else {
                    ctx.error(err::SYNTAX);
                    return;
                }
            } else if is(k, "maxage") {
                // Redis 7.4: connections at least this many seconds old.
                match ferrokv_resp::parse_i64(v) {
                    Some(n) if n > 0 => f.maxage = Some(n as u64),
                    Some(_) => return ctx.error("ERR maxage should be greater than 0"),
                    None => return ctx.error("ERR maxage is not an integer or out of range"),
                }
            } else {
                ctx.error(err::SYNTAX);
                return;
            }
        }
    }
    let matches = |c: &Client| -> bool {
        f.id.is_none_or(|id| c.id == id)
            && f.addr.as_ref().is_none_or(|a| c.addr.to_string() == *a)
            && f.laddr
                .as_ref()
                .is_none_or(|a| c.local_addr.to_string() == *a)
            && f.kind.is_none_or(|k| type_matches(ctx.srv, c, k))
            && f.user.is_none_or(|u| c.user == u)
            && f.maxage.is_none_or(|m| c.created.elapsed().as_secs() >= m)
    };
    let mut killed = 0;
    let mut doomed = Vec::new();
    for (t, c) in ctx.srv.clients.iter() {
        if let Some(c) = c {
            if matches(c) {
                doomed.push(t);
            }
        }
    }
    killed += doomed.len();
    let me = !skipme && matches(ctx.client);
    ctx.srv.close_queue.extend(doomed);
    if me {
        ctx.client.close_after_reply = true;
        killed += 1;
    }
    if old_form {
        if killed == 0 {
            ctx.error("ERR No such client");
        } else {
            ctx.client.out.ok();
        }
    } else {
        ctx.client.out.int(killed as i64);
    }
}

/// `ON` or `OFF`, in any case; a syntax error otherwise.
fn on_off(ctx: &mut Ctx, v: &[u8]) -> Option<bool> {
    if is(v, "on") {
        Some(true)
    } else if is(v, "off") {
        Some(false)
    } else {
        ctx.error(err::SYNTAX);
        None
    }
}

/// CLIENT NO-EVICT ON|OFF
fn client_no_evict(ctx: &mut Ctx, args: Args) {
    if let Some(on) = on_off(ctx, args.get(2)) {
        ctx.client.no_evict = on;
        ctx.client.out.ok();
    }
}

/// CLIENT NO-TOUCH ON|OFF (Redis 7.2; see `Server::call_from`).
fn client_no_touch(ctx: &mut Ctx, args: Args) {
    if let Some(on) = on_off(ctx, args.get(2)) {
        ctx.client.no_touch = on;
        ctx.client.out.ok();
    }
}

/// CLIENT REPLY ON|OFF|SKIP
fn client_reply(ctx: &mut Ctx, args: Args) {
    let v = args.get(2);
    if is(v, "on") {
        ctx.client.reply_mode = ReplyMode::On;
        ctx.client.out.ok();
    } else if is(v, "off") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if is(v, "skip") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        ctx.error(err::SYNTAX);
    }
}

/// CLIENT GETREDIR: -1 when tracking is off, 0 when it redirects nowhere.
fn client_getredir(ctx: &mut Ctx, _args: Args) {
    let redir = ctx
        .srv
        .tracking
        .of(ctx.client.id)
        .map_or(-1, |t| t.redirect as i64);
    ctx.client.out.int(redir);
}

/// CLIENT TRACKING ON|OFF [REDIRECT client-id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]
fn client_tracking(ctx: &mut Ctx, args: Args) {
    let mut mode = ClientTracking::default();
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        let more = args.len() - i - 1;
        if is(a, "redirect") && more >= 1 {
            i += 1;
            if mode.redirect != 0 {
                return ctx.error("ERR A client can only redirect to a single other client");
            }
            let Some(id) = ferrokv_resp::parse_i64(args.get(i)) else {
                return ctx.error(err::NOT_INTEGER);
            };
            match (id > 0)
                .then(|| ctx.srv.client_token_by_id(ctx.client, id as u64))
                .flatten()
            {
                Some(token) => {
                    mode.redirect = id as u64;
                    mode.redirect_token = token;
                }
                None => return ctx.error("ERR The client ID you want redirect to does not exist"),
            }
        } else if is(a, "bcast") {
            mode.bcast = true;
        } else if is(a, "optin") {
            mode.optin = true;
        } else if is(a, "optout") {
            mode.optout = true;
        } else if is(a, "noloop") {
            mode.noloop = true;
        } else if is(a, "prefix") && more >= 1 {
            i += 1;
            prefixes.push(args.get(i));
        } else {
            return ctx.error(err::SYNTAX);
        }
        i += 1;
    }
    let on = args.get(2);
    if is(on, "off") {
        ctx.srv.tracking.disable(ctx.client.id);
        return ctx.client.out.ok();
    }
    if !is(on, "on") {
        return ctx.error(err::SYNTAX);
    }
    // The checks of Redis's clientCommand, in its order.
    if !mode.bcast && !prefixes.is_empty() {
        return ctx.error("ERR PREFIX option requires BCAST mode to be enabled");
    }
    let had = ctx.srv.tracking.of(ctx.client.id);
    if had.is_some_and(|had| had.bcast != mode.bcast) {
        return ctx.error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if mode.bcast && (mode.optin || mode.optout) {
        return ctx.error("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if mode.optin && mode.optout {
        return ctx.error("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if had.is_some_and(|had| (had.optin && mode.optout) || (had.optout && mode.optin)) {
        return ctx.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    let existing = had.map(|t| t.prefixes.clone()).unwrap_or_default();
    if let Some(e) = Tracking::prefix_collision(&existing, &prefixes) {
        return ctx.error(&e);
    }
    // Enabling again keeps what CLIENT CACHING said for the next command.
    mode.caching = had.is_some_and(|t| t.caching);
    mode.token = ctx.client.token;
    ctx.srv.tracking.enable(ctx.client.id, mode, &prefixes);
    ctx.client.out.ok();
}

/// CLIENT CACHING YES|NO
fn client_caching(ctx: &mut Ctx, args: Args) {
    let Some(t) = ctx
        .srv
        .tracking
        .clients
        .get_mut(&ctx.client.id)
        .filter(|t| t.optin || t.optout)
    else {
        return ctx.error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    let v = args.get(2);
    if is(v, "yes") {
        t.caching = true;
    } else if is(v, "no") {
        if !t.optout {
            return ctx.error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
        t.caching = true;
    } else {
        return ctx.error(err::SYNTAX);
    }
    ctx.client.out.ok();
}

/// CLIENT TRACKINGINFO
fn client_trackinginfo(ctx: &mut Ctx, _args: Args) {
    let t = ctx.srv.tracking.of(ctx.client.id);
    let out = &mut ctx.client.out;
    out.map(3);
    out.bulk(b"flags");
    match t {
        None => {
            out.set(1);
            out.bulk(b"off");
        }
        Some(t) => {
            let mut flags: Vec<&[u8]> = vec![b"on"];
            if t.bcast {
                flags.push(b"bcast");
            }
            if t.optin {
                flags.push(b"optin");
                if t.caching {
                    flags.push(b"caching-yes");
                }
            }
            if t.optout {
                flags.push(b"optout");
                if t.caching {
                    flags.push(b"caching-no");
                }
            }
            if t.noloop {
                flags.push(b"noloop");
            }
            if t.broken_redirect {
                flags.push(b"broken_redirect");
            }
            out.set(flags.len());
            for f in flags {
                out.bulk(f);
            }
        }
    }
    out.bulk(b"redirect");
    match t {
        None => out.int(-1),
        Some(t) => out.int(t.redirect as i64),
    }
    out.bulk(b"prefixes");
    let prefixes: Vec<&Vec<u8>> = t.map(|t| t.prefixes.iter().collect()).unwrap_or_default();
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(p);
    }
}

/// CLIENT HELP
fn client_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID, TYPE, USER, ADDR, LADDR, SKIPME, MAXAGE.",
            "LIST [options ...]",
            "    Return information about client connections. Options: TYPE, ID.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
        ],
    );
}
