//! The string family: GET/SET and friends, counters, ranges, LCS.
//!
//! Values are stored as Redis stores them: a canonical integer as an `i64`
//! (so `INCR` needs no parsing and `OBJECT ENCODING` says `int`), anything
//! else as bytes, inline when short.
//!
//! # Hostile input
//!
//! Audited for work or memory a client could choose (issue #15; cases in
//! `tests/limits.rs`). Every size a client names is checked before memory
//! is touched: `SETRANGE` and `APPEND` against `proto-max-bulk-len`
//! (Redis's error, nothing allocated; an empty `SETRANGE` value needs no
//! check), `GETRANGE` clamps any `i64` to the string. `LCS` refuses a table
//! of more than `proto-max-bulk-len` bytes exactly as Redis 7.0.15 does (a
//! 512 MB table, ~134 M cells of work, at most by default) and allocates it
//! fallibly. Expiry overflow in `SET`/`SETEX`/`PSETEX`/`GETEX` (unit
//! conversion, base time) is an invalid expire time; `INCRBY`/`DECRBY`
//! overflow and `DECRBY LONG_MIN` answer Redis's errors; `INCRBYFLOAT` to
//! an infinity is refused. `MSET`/`MGET` work is per argument.

use super::flags::*;
use super::long_double::LongDouble;
use super::{err, is, parse_f64, parse_int, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_NEW, NOTIFY_STRING};
use ferrokv_resp::Args;
use ferrokv_store::value::itoa_buf;
use ferrokv_store::{Value, ValueRef, NO_EXPIRE};

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("string")
        .keys(1, 1, 1)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, READONLY | FAST, get).doc("Returns the string value of a key.", "key"),
    cmd("set", -3, WRITE | DENYOOM, set).doc(
        "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
        "key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]",
    ),
    cmd("getex", -2, WRITE | FAST, getex).since("6.2.0").doc(
        "Returns the string value of a key after setting its expiration time.",
        "key [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|PERSIST]",
    ),
    cmd("getdel", 2, WRITE | FAST, getdel).since("6.2.0").doc("Returns the string value of a key after deleting the key.", "key"),
    cmd("getset", 3, WRITE | DENYOOM | FAST, getset).doc("Returns the previous string value of a key after setting it to a new value.", "key value"),
    cmd("setnx", 3, WRITE | DENYOOM | FAST, setnx).doc("Set the string value of a key only when the key doesn't exist.", "key value"),
    cmd("setex", 4, WRITE | DENYOOM, setex).since("2.0.0").doc("Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "key seconds value"),
    cmd("psetex", 4, WRITE | DENYOOM, psetex).since("2.6.0").doc("Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", "key milliseconds value"),
    cmd("mset", -3, WRITE | DENYOOM, mset).keys(1, -1, 2).since("1.0.1").complexity("O(N) where N is the number of keys to set.").doc("Atomically creates or modifies the string values of one or more keys.", "key value [key value ...]"),
    cmd("msetnx", -3, WRITE | DENYOOM, msetnx).keys(1, -1, 2).since("1.0.1").complexity("O(N) where N is the number of keys to set.").doc("Atomically modifies the string values of one or more keys only when all keys don't exist.", "key value [key value ...]"),
    cmd("mget", -2, READONLY | FAST, mget).keys(1, -1, 1).complexity("O(N) where N is the number of keys to retrieve.").doc("Atomically returns the string values of one or more keys.", "key [key ...]"),
    cmd("append", 3, WRITE | DENYOOM | FAST, append).since("2.0.0").doc("Appends a string to the value of a key. Creates the key if it doesn't exist.", "key value"),
    cmd("strlen", 2, READONLY | FAST, strlen).since("2.2.0").doc("Returns the length of a string value.", "key"),
    cmd("getrange", 4, READONLY, getrange).since("2.4.0").complexity("O(N) where N is the length of the returned string.").doc("Returns a substring of the string stored at a key.", "key start end"),
    cmd("substr", 4, READONLY, getrange).doc("Returns a substring from a string value.", "key start end"),
    cmd("setrange", 4, WRITE | DENYOOM, setrange).since("2.2.0").doc("Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "key offset value"),
    cmd("incr", 2, WRITE | DENYOOM | FAST, incr).doc("Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "key"),
    cmd("decr", 2, WRITE | DENYOOM | FAST, decr).doc("Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "key"),
    cmd("incrby", 3, WRITE | DENYOOM | FAST, incrby).doc("Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "key increment"),
    cmd("decrby", 3, WRITE | DENYOOM | FAST, decrby).doc("Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", "key decrement"),
    cmd("incrbyfloat", 3, WRITE | DENYOOM | FAST, incrbyfloat).since("2.6.0").doc("Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "key increment"),
    cmd("delifeq", 3, WRITE, delifeq).since("9.0.0").complexity("O(1)").doc("Delete key if value matches string.", "key value"),
    cmd("lcs", -3, READONLY, lcs).keys(1, 2, 1).since("7.0.0").complexity("O(N*M) where N and M are the lengths of s1 and s2, respectively").doc("Finds the longest common substring.", "key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]"),
];

/// A string value's bytes, or `None` for another type.
fn as_bytes<'a>(v: ValueRef<'a>, buf: &'a mut itoa_buf::Buf) -> Option<&'a [u8]> {
    v.as_bytes(buf)
}

fn is_string(v: ValueRef) -> bool {
    v.is_string()
}

/// Writes a string value as a bulk reply (WRONGTYPE for other types).
fn reply_value(out: &mut crate::net::client::Reply, v: ValueRef) {
    match v {
        ValueRef::Int(i) => out.bulk_int(i),
        ValueRef::Str(s) | ValueRef::Raw(s) => out.bulk(s),
        #[allow(unreachable_patterns)]
        _ => out.error(err::WRONGTYPE),
    }
}

/// GET key
fn get(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    match ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) {
        None => ctx.client.out.null(),
        Some(e) => reply_value(&mut ctx.client.out, e.value()),
    }
}

/// How SET-like commands set the expiry.
#[derive(Clone, Copy, PartialEq)]
enum ExpireArg {
    None,
    KeepTtl,
    Persist,
    At(i64),
}

/// Turns the value of `EX s | PX ms | EXAT s | PXAT ms` into an absolute
/// unix-ms time, replying with Redis's errors (`getExpireMillisecondsOrReply`).
fn parse_expire(ctx: &mut Ctx, unit: &[u8], value: &[u8], cmd: &str) -> Option<i64> {
    let v = parse_int(ctx, value)?;
    let invalid = |ctx: &mut Ctx| ctx.error(&format!("ERR invalid expire time in '{cmd}' command"));
    if v <= 0 {
        invalid(ctx);
        return None;
    }
    let ms = if is(unit, "ex") || is(unit, "exat") {
        match v.checked_mul(1000) {
            Some(ms) => ms,
            None => {
                invalid(ctx);
                return None;
            }
        }
    } else {
        v
    };
    let at = if is(unit, "ex") || is(unit, "px") {
        match ms.checked_add(ctx.now_ms) {
            Some(at) => at,
            None => {
                invalid(ctx);
                return None;
            }
        }
    } else {
        ms
    };
    Some(at)
}

/// The options of SET (`NX XX GET KEEPTTL EX PX EXAT PXAT`) and GETEX
/// (`PERSIST EX PX EXAT PXAT`).
#[derive(Default)]
struct ExtendedOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// `IFEQ comparison-value` (Valkey 8.1, Redis 8.4): set only over this
    /// string value.
    ifeq: Option<&'a [u8]>,
    /// The expiry unit (`ex`, `px`, `exat`, `pxat`) and its unparsed value.
    expire: Option<(&'static str, &'a [u8])>,
}

/// Parses SET's (`set`) or GETEX's options from `args[first..]` exactly as
/// Redis's `parseExtendedStringArgumentsOrReply`: only the syntax is checked
/// here, so `SET k v EX abc FOO` is a syntax error, not a bad integer. An
/// option may repeat (`KEEPTTL KEEPTTL`, `EX 1 EX 2`: the last value wins),
/// but two different expiry units, or one with KEEPTTL/PERSIST, may not.
fn parse_extended<'a>(
    ctx: &mut Ctx,
    args: &Args<'a>,
    first: usize,
    set: bool,
) -> Option<ExtendedOptions<'a>> {
    let mut o = ExtendedOptions::default();
    let mut i = first;
    while i < args.len() {
        let a = args.get(i);
        let has_next = i + 1 < args.len();
        let unit = ["ex", "px", "exat", "pxat"].into_iter().find(|u| is(a, u));
        if set && is(a, "nx") && !o.xx && o.ifeq.is_none() {
            o.nx = true;
        } else if set && is(a, "xx") && !o.nx && o.ifeq.is_none() {
            o.xx = true;
        } else if set && is(a, "ifeq") && !o.nx && !o.xx && has_next {
            o.ifeq = Some(args.get(i + 1));
            i += 1;
        } else if set && is(a, "get") {
            o.get = true;
        } else if set && is(a, "keepttl") && !o.persist && o.expire.is_none() {
            o.keepttl = true;
        } else if !set && is(a, "persist") && !o.keepttl && o.expire.is_none() {
            o.persist = true;
        } else if let Some(unit) = unit.filter(|u| {
            !o.keepttl && !o.persist && o.expire.is_none_or(|(cur, _)| cur == *u) && has_next
        }) {
            o.expire = Some((unit, args.get(i + 1)));
            i += 1;
        } else {
            ctx.error(err::SYNTAX);
            return None;
        }
        i += 1;
    }
    Some(o)
}

/// SET key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]
fn set(ctx: &mut Ctx, args: Args) {
    let Some(opts) = parse_extended(ctx, &args, 3, true) else {
        return;
    };
    let (nx, xx, get, ifeq) = (opts.nx, opts.xx, opts.get, opts.ifeq);
    let mut expire = if opts.keepttl {
        ExpireArg::KeepTtl
    } else {
        ExpireArg::None
    };
    if let Some((unit, value)) = opts.expire {
        let Some(at) = parse_expire(ctx, unit.as_bytes(), value, "set") else {
            return;
        };
        expire = ExpireArg::At(at);
    }
    let key = args.get(1);
    // Propagated in its deterministic form: an absolute expiry, no GET/NX/XX
    // (the condition held if the write happened).
    match expire {
        ExpireArg::At(t) => {
            let t = t.to_string();
            ctx.rewrite(&[&b"SET"[..], key, args.get(2), b"PXAT", t.as_bytes()]);
        }
        ExpireArg::KeepTtl => ctx.rewrite(&[&b"SET"[..], key, args.get(2), b"KEEPTTL"]),
        _ if args.len() > 3 => ctx.rewrite(&[&b"SET"[..], key, args.get(2)]),
        _ => {}
    }
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let lru = ctx.srv.lru_clock;
    if !(nx || xx || get || ifeq.is_some() || expire == ExpireArg::KeepTtl) {
        // The common case needs no look at the old value: one probe.
        let expire_at = match expire {
            ExpireArg::At(t) => t,
            _ => NO_EXPIRE,
        };
        let old = ctx.srv.keyspace.dbs[db].set_str(key, args.get(2), expire_at, lru);
        let mut new = old.is_none();
        if let Some(old) = old {
            if old.has_expire() && old.expire_at <= now {
                // It had expired: to everyone watching, a new key.
                ctx.srv.note_key_expired(db, key);
                new = true;
            }
            ctx.srv.drop_value(old);
        }
        ctx.modified(1);
        notify_set(ctx, key, new, expire_at != NO_EXPIRE);
        ctx.client.out.ok();
        return;
    }
    if get {
        // Redis reads the old value with a read lookup (`getGenericCommand`):
        // a hit or a miss is counted, a miss announced as `keymiss`.
        let _ = ctx.srv.lookup_read(db, key, now);
    }
    let existing = ctx.srv.lookup_write(db, key, now);
    let found = existing.is_some();
    let mut old_ttl = NO_EXPIRE;
    // IFEQ (Valkey 8.1): the key must hold a string, this one.
    let mut ifeq_holds = ifeq.is_none();
    if let Some(e) = existing {
        if (get || ifeq.is_some()) && !is_string(e.value()) {
            ctx.client.out.error(err::WRONGTYPE);
            return;
        }
        if get {
            reply_value(&mut ctx.client.out, e.value());
        }
        if let Some(cmp) = ifeq {
            let mut buf = itoa_buf::Buf::new();
            ifeq_holds = as_bytes(e.value(), &mut buf) == Some(cmp);
        }
        old_ttl = e.expire_at;
    } else if get {
        ctx.client.out.null();
    }
    if (nx && found) || (xx && !found) || !ifeq_holds {
        if !get {
            ctx.client.out.null();
        }
        return;
    }
    let expire_at = match expire {
        ExpireArg::At(t) => t,
        ExpireArg::KeepTtl => old_ttl,
        _ => NO_EXPIRE,
    };
    ctx.srv.keyspace.dbs[db].set_str(key, args.get(2), expire_at, lru);
    ctx.modified(1);
    notify_set(ctx, key, !found, matches!(expire, ExpireArg::At(_)));
    if !get {
        ctx.client.out.ok();
    }
}

/// The events of a string write (Redis's `setGenericCommand`): `new` for
/// a created key, `set`, and `expire` when the write set a TTL.
fn notify_set(ctx: &mut Ctx, key: &[u8], new: bool, expire: bool) {
    if new {
        ctx.notify(NOTIFY_NEW, "new", key);
    }
    ctx.notify(NOTIFY_STRING, "set", key);
    if expire {
        ctx.notify(NOTIFY_GENERIC, "expire", key);
    }
}

/// GETEX key [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|PERSIST]
fn getex(ctx: &mut Ctx, args: Args) {
    let Some(opts) = parse_extended(ctx, &args, 2, false) else {
        return;
    };
    let db = ctx.client.db;
    let key = args.get(1);
    let Some(e) = ctx.srv.lookup_read(db, key, ctx.now_ms) else {
        ctx.client.out.null();
        return;
    };
    if !is_string(e.value()) {
        ctx.client.out.error(err::WRONGTYPE);
        return;
    }
    let had_ttl = e.has_expire();
    // As in Redis, the expiry's value is checked only once the key is known
    // to exist and to hold a string.
    let expire = match opts.expire {
        Some((unit, value)) => match parse_expire(ctx, unit.as_bytes(), value, "getex") {
            Some(at) => ExpireArg::At(at),
            None => return,
        },
        None if opts.persist => ExpireArg::Persist,
        None => ExpireArg::None,
    };
    // The key is live (looked up above): no second hit to count.
    if let Some(e) = ctx.srv.peek(db, key, ctx.now_ms) {
        reply_value(&mut ctx.client.out, e.value());
    }
    match expire {
        ExpireArg::At(t) if t <= ctx.now_ms => {
            ctx.srv.keyspace.dbs[db].remove(key);
            ctx.rewrite(&[&b"DEL"[..], key]);
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "del", key);
        }
        ExpireArg::At(t) => {
            ctx.srv.keyspace.dbs[db].set_expire(key, t);
            let t = t.to_string();
            ctx.rewrite(&[&b"PEXPIREAT"[..], key, t.as_bytes()]);
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "expire", key);
        }
        ExpireArg::Persist if had_ttl => {
            ctx.srv.keyspace.dbs[db].set_expire(key, NO_EXPIRE);
            ctx.rewrite(&[&b"PERSIST"[..], key]);
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "persist", key);
        }
        _ => {}
    }
}

/// GETDEL key
fn getdel(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    let Some(e) = ctx.srv.lookup_read(db, key, ctx.now_ms) else {
        ctx.client.out.null();
        return;
    };
    if !is_string(e.value()) {
        ctx.client.out.error(err::WRONGTYPE);
        return;
    }
    reply_value(&mut ctx.client.out, e.value());
    ctx.srv.keyspace.dbs[db].remove(key);
    ctx.rewrite(&[&b"DEL"[..], key]);
    ctx.modified(1);
    ctx.notify(NOTIFY_GENERIC, "del", key);
}

/// DELIFEQ key value (Valkey 9.0): deletes a string key holding exactly
/// `value`; propagated as `DEL key`.
fn delifeq(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    let Some(e) = ctx.srv.lookup_write(db, key, ctx.now_ms) else {
        return ctx.client.out.int(0);
    };
    if !is_string(e.value()) {
        return ctx.error(err::WRONGTYPE);
    }
    let mut buf = itoa_buf::Buf::new();
    if as_bytes(e.value(), &mut buf) != Some(args.get(2)) {
        return ctx.client.out.int(0);
    }
    if let Some(old) = ctx.srv.keyspace.dbs[db].remove(key) {
        ctx.srv.drop_value(old);
    }
    ctx.rewrite(&[&b"DEL"[..], key]);
    ctx.modified(1);
    ctx.notify(NOTIFY_GENERIC, "del", key);
    ctx.client.out.int(1);
}

/// GETSET key value
fn getset(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    match ctx.srv.lookup_read(db, key, ctx.now_ms) {
        Some(e) if !is_string(e.value()) => {
            ctx.client.out.error(err::WRONGTYPE);
            return;
        }
        Some(e) => reply_value(&mut ctx.client.out, e.value()),
        None => ctx.client.out.null(),
    }
    let lru = ctx.srv.lru_clock;
    let new = ctx.srv.keyspace.dbs[db]
        .set_str(key, args.get(2), NO_EXPIRE, lru)
        .is_none();
    ctx.modified(1);
    notify_set(ctx, key, new, false);
}

/// SETNX key value
fn setnx(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    if ctx.srv.exists(db, key, ctx.now_ms) {
        ctx.client.out.int(0);
        return;
    }
    let lru = ctx.srv.lru_clock;
    ctx.srv.keyspace.dbs[db].set_str(key, args.get(2), NO_EXPIRE, lru);
    ctx.modified(1);
    notify_set(ctx, key, true, false);
    ctx.client.out.int(1);
}

fn set_with_expire(ctx: &mut Ctx, args: Args, unit: &str, cmd: &str) {
    let Some(at) = parse_expire(ctx, unit.as_bytes(), args.get(2), cmd) else {
        return;
    };
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    let new = ctx.srv.keyspace.dbs[db]
        .set_str(args.get(1), args.get(3), at, lru)
        .is_none();
    let t = at.to_string();
    ctx.rewrite(&[&b"SET"[..], args.get(1), args.get(3), b"PXAT", t.as_bytes()]);
    ctx.modified(1);
    notify_set(ctx, args.get(1), new, true);
    ctx.client.out.ok();
}

/// SETEX key seconds value
fn setex(ctx: &mut Ctx, args: Args) {
    set_with_expire(ctx, args, "ex", "setex")
}

/// PSETEX key milliseconds value
fn psetex(ctx: &mut Ctx, args: Args) {
    set_with_expire(ctx, args, "px", "psetex")
}

/// MSET key value [key value ...]
fn mset(ctx: &mut Ctx, args: Args) {
    if args.len().is_multiple_of(2) {
        ctx.wrong_args("mset");
        return;
    }
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    for i in (1..args.len()).step_by(2) {
        let new = ctx.srv.keyspace.dbs[db]
            .set_str(args.get(i), args.get(i + 1), NO_EXPIRE, lru)
            .is_none();
        notify_set(ctx, args.get(i), new, false);
    }
    ctx.modified((args.len() / 2) as u64);
    ctx.client.out.ok();
}

/// MSETNX key value [key value ...]
fn msetnx(ctx: &mut Ctx, args: Args) {
    if args.len().is_multiple_of(2) {
        ctx.wrong_args("msetnx");
        return;
    }
    let db = ctx.client.db;
    for i in (1..args.len()).step_by(2) {
        if ctx.srv.exists(db, args.get(i), ctx.now_ms) {
            ctx.client.out.int(0);
            return;
        }
    }
    let lru = ctx.srv.lru_clock;
    for i in (1..args.len()).step_by(2) {
        let new = ctx.srv.keyspace.dbs[db]
            .set_str(args.get(i), args.get(i + 1), NO_EXPIRE, lru)
            .is_none();
        notify_set(ctx, args.get(i), new, false);
    }
    ctx.modified((args.len() / 2) as u64);
    ctx.client.out.int(1);
}

/// MGET key [key ...]
fn mget(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    ctx.client.out.array(args.len() - 1);
    for key in args.iter().skip(1) {
        match ctx.srv.lookup_read(db, key, ctx.now_ms) {
            Some(e) if is_string(e.value()) => reply_value(&mut ctx.client.out, e.value()),
            _ => ctx.client.out.null(),
        }
    }
}

/// Checks a string's new size against `proto-max-bulk-len`.
fn check_size(ctx: &mut Ctx, size: u64) -> bool {
    if size > ctx.srv.config.proto_max_bulk_len {
        ctx.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return false;
    }
    true
}

/// APPEND key value
fn append(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    let add = args.get(2);
    let max = ctx.srv.config.proto_max_bulk_len;
    let lru = ctx.srv.lru_clock;
    match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => {
            // A new key stores the argument as SET would (`int` when it
            // is a canonical integer).
            ctx.srv.keyspace.dbs[db].upsert(key, Value::from_bytes(add), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
            ctx.client.out.int(add.len() as i64);
        }
        Some(e) => {
            let mut buf = itoa_buf::Buf::new();
            let Some(cur) = as_bytes(e.value(), &mut buf) else {
                ctx.client.out.error(err::WRONGTYPE);
                return;
            };
            if (cur.len() + add.len()) as u64 > max {
                ctx.client
                    .out
                    .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
                return;
            }
            // Appending makes a raw string even when the result is short
            // or looks like an integer, as in Redis, and grows it in place
            // (amortised: the vector's doubling, as Redis's sds greedy
            // growth).
            let v = e.string_mut().expect("a string, checked above");
            v.extend_from_slice(add);
            let n = v.len();
            ctx.client.out.int(n as i64);
        }
    }
    ctx.modified(1);
    ctx.notify(NOTIFY_STRING, "append", key);
}

/// STRLEN key
fn strlen(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    match ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) {
        None => ctx.client.out.int(0),
        Some(e) => {
            let mut buf = itoa_buf::Buf::new();
            match as_bytes(e.value(), &mut buf) {
                Some(b) => ctx.client.out.int(b.len() as i64),
                None => ctx.client.out.error(err::WRONGTYPE),
            }
        }
    }
}

/// GETRANGE key start end
fn getrange(ctx: &mut Ctx, args: Args) {
    let Some(mut start) = parse_int(ctx, args.get(2)) else {
        return;
    };
    let Some(mut end) = parse_int(ctx, args.get(3)) else {
        return;
    };
    let db = ctx.client.db;
    let Some(e) = ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) else {
        ctx.client.out.bulk(b"");
        return;
    };
    let mut buf = itoa_buf::Buf::new();
    let Some(s) = as_bytes(e.value(), &mut buf) else {
        ctx.client.out.error(err::WRONGTYPE);
        return;
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.client.out.bulk(b"");
        return;
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.client.out.bulk(b"");
        return;
    }
    ctx.client.out.bulk(&s[start as usize..=end as usize]);
}

/// SETRANGE key offset value
fn setrange(ctx: &mut Ctx, args: Args) {
    let Some(offset) = parse_int(ctx, args.get(2)) else {
        return;
    };
    if offset < 0 {
        ctx.error("ERR offset is out of range");
        return;
    }
    let value = args.get(3);
    let db = ctx.client.db;
    let key = args.get(1);
    let lru = ctx.srv.lru_clock;
    let max = ctx.srv.config.proto_max_bulk_len;
    let now = ctx.now_ms;
    match ctx.srv.lookup_write(db, key, now) {
        None => {
            if value.is_empty() {
                ctx.client.out.int(0);
                return;
            }
            if !check_size(ctx, offset as u64 + value.len() as u64) {
                return;
            }
            let mut v = vec![0u8; offset as usize + value.len()];
            v[offset as usize..].copy_from_slice(value);
            let n = v.len();
            ctx.srv.keyspace.dbs[db].upsert(
                key,
                Value::Raw(std::sync::Arc::new(v)),
                NO_EXPIRE,
                lru,
            );
            ctx.notify(NOTIFY_NEW, "new", key);
            ctx.client.out.int(n as i64);
        }
        Some(e) => {
            let mut buf = itoa_buf::Buf::new();
            let Some(cur) = as_bytes(e.value(), &mut buf) else {
                ctx.client.out.error(err::WRONGTYPE);
                return;
            };
            if value.is_empty() {
                ctx.client.out.int(cur.len() as i64);
                return;
            }
            if offset as u64 + value.len() as u64 > max {
                ctx.client
                    .out
                    .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
                return;
            }
            let end = offset as usize + value.len();
            let v = e.string_mut().expect("a string, checked above");
            if v.len() < end {
                v.resize(end, 0);
            }
            v[offset as usize..end].copy_from_slice(value);
            let n = v.len();
            ctx.client.out.int(n as i64);
        }
    }
    ctx.modified(1);
    ctx.notify(NOTIFY_STRING, "setrange", key);
}

/// Adds `by` to the integer at `key` (INCR/DECR/INCRBY/DECRBY).
fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) {
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => {
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Int(by), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
            ctx.client.out.int(by);
        }
        Some(e) => {
            let cur = match e.value() {
                ValueRef::Int(i) => i,
                ValueRef::Str(s) | ValueRef::Raw(s) => match ferrokv_resp::parse_i64(s) {
                    Some(i) => i,
                    None => {
                        ctx.client.out.error(err::NOT_INTEGER);
                        return;
                    }
                },
                #[allow(unreachable_patterns)]
                _ => {
                    ctx.client.out.error(err::WRONGTYPE);
                    return;
                }
            };
            let Some(n) = cur.checked_add(by) else {
                ctx.client.out.error(err::OVERFLOW);
                return;
            };
            e.set_value(Value::Int(n));
            ctx.client.out.int(n);
        }
    }
    ctx.modified(1);
    ctx.notify(NOTIFY_STRING, "incrby", key);
}

/// INCR key
fn incr(ctx: &mut Ctx, args: Args) {
    incr_by(ctx, args.get(1), 1)
}

/// DECR key
fn decr(ctx: &mut Ctx, args: Args) {
    incr_by(ctx, args.get(1), -1)
}

/// INCRBY key increment
fn incrby(ctx: &mut Ctx, args: Args) {
    if let Some(by) = parse_int(ctx, args.get(2)) {
        incr_by(ctx, args.get(1), by)
    }
}

/// DECRBY key decrement
fn decrby(ctx: &mut Ctx, args: Args) {
    let Some(by) = parse_int(ctx, args.get(2)) else {
        return;
    };
    if by == i64::MIN {
        ctx.error("ERR decrement would overflow");
        return;
    }
    incr_by(ctx, args.get(1), -by)
}

/// Formats a double as Redis's `INCRBYFLOAT` does (`%.17Lf`, trailing
/// zeros removed, never an exponent).
pub fn format_human_double(v: f64) -> String {
    let mut s = format!("{v}");
    if let Some(dot) = s.find('.') {
        if s.len() - dot - 1 > 17 {
            s = format!("{v:.17}");
        }
    }
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// INCRBYFLOAT key increment
fn incrbyfloat(ctx: &mut Ctx, args: Args) {
    // Redis adds in `long double`; see `long_double` for why it matters.
    // Ok(None) is a valid infinite operand (`inf`), refused after the sum.
    let parse = |s: &[u8]| match LongDouble::parse(s, parse_f64(s)) {
        Some(v) => Ok(Some(v)),
        None if parse_f64(s).is_some_and(f64::is_infinite) => Ok(None),
        None => Err(()),
    };
    // As Redis: the key's type is checked before the increment is parsed.
    let by = parse(args.get(2));
    let db = ctx.client.db;
    let key = args.get(1);
    let lru = ctx.srv.lru_clock;
    let (cur, expire_at) = match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => (Some(LongDouble::ZERO), NO_EXPIRE),
        Some(e) => {
            let mut buf = itoa_buf::Buf::new();
            let Some(s) = as_bytes(e.value(), &mut buf) else {
                ctx.client.out.error(err::WRONGTYPE);
                return;
            };
            match parse(s) {
                Ok(v) => (v, e.expire_at),
                Err(()) => {
                    ctx.client.out.error(err::NOT_FLOAT);
                    return;
                }
            }
        }
    };
    let Ok(by) = by else {
        ctx.error(err::NOT_FLOAT);
        return;
    };
    let Some(n) = cur.zip(by).and_then(|(cur, by)| cur.checked_add(by)) else {
        ctx.error("ERR increment would produce NaN or Infinity");
        return;
    };
    let text = n.to_human_string();
    // Stored as text even when it reads as an integer: Redis keeps the
    // result of `createStringObjectFromLongDouble` as it is (`embstr`).
    let value = Value::Str(ferrokv_store::SmallBytes::new(text.as_bytes()));
    if ctx.srv.keyspace.dbs[db]
        .upsert(key, value, expire_at, lru)
        .is_none()
    {
        ctx.notify(NOTIFY_NEW, "new", key);
    }
    ctx.rewrite(&[&b"SET"[..], key, text.as_bytes(), b"KEEPTTL"]);
    ctx.modified(1);
    ctx.notify(NOTIFY_STRING, "incrbyfloat", key);
    ctx.client.out.bulk(text.as_bytes());
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]
fn lcs(ctx: &mut Ctx, args: Args) {
    // As Redis: the keys' types are checked before the options.
    let db = ctx.client.db;
    // Only the lengths at first: the strings are copied once the table
    // they call for is known to be allowed, so two 512 MB values cost no
    // copy to be refused.
    let len_of = |ctx: &mut Ctx, k: &[u8]| -> Result<usize, ()> {
        match ctx.srv.lookup_read(db, k, ctx.now_ms) {
            None => Ok(0),
            Some(e) => {
                let mut buf = itoa_buf::Buf::new();
                as_bytes(e.value(), &mut buf).map(|b| b.len()).ok_or(())
            }
        }
    };
    let (Ok(alen), Ok(blen)) = (len_of(ctx, args.get(1)), len_of(ctx, args.get(2))) else {
        ctx.error("ERR The specified keys must contain string values");
        return;
    };
    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        if is(a, "idx") {
            getidx = true;
        } else if is(a, "len") {
            getlen = true;
        } else if is(a, "withmatchlen") {
            withmatchlen = true;
        } else if is(a, "minmatchlen") && i + 1 < args.len() {
            let Some(v) = parse_int(ctx, args.get(i + 1)) else {
                return;
            };
            minmatchlen = v.max(0);
            i += 1;
        } else {
            ctx.error(err::SYNTAX);
            return;
        }
        i += 1;
    }
    if getidx && getlen {
        ctx.error("ERR If you want both the length and indexes, please just use IDX.");
        return;
    }
    // Hostile input: the table is (alen+1)*(blen+1) u32 cells, refused
    // past proto-max-bulk-len bytes exactly as Redis 7.0.15 refuses it (a
    // 512 MB table at most by default, ~134 M cells of work). Only a
    // raised proto-max-bulk-len lets strings reach Redis's 32-bit limit,
    // or the allocation fail.
    if alen as u64 >= u32::MAX as u64 - 1 || blen as u64 >= u32::MAX as u64 - 1 {
        ctx.error("ERR String too long for LCS");
        return;
    }
    let dp_size = (alen as u64 + 1) * (blen as u64 + 1) * 4;
    if dp_size > ctx.srv.config.proto_max_bulk_len {
        ctx.error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return;
    }
    // The key was just looked up (a hit counted): read it without another.
    let load = |ctx: &mut Ctx, k: &[u8]| -> Vec<u8> {
        let mut buf = itoa_buf::Buf::new();
        ctx.srv
            .peek(db, k, ctx.now_ms)
            .and_then(|e| as_bytes(e.value(), &mut buf).map(<[u8]>::to_vec))
            .unwrap_or_default()
    };
    let (a, b) = (load(ctx, args.get(1)), load(ctx, args.get(2)));
    let w = blen + 1;
    let mut dp: Vec<u32> = Vec::new();
    if dp.try_reserve_exact((alen + 1) * w).is_err() {
        ctx.error("ERR Insufficient memory, failed allocating transient memory for LCS");
        return;
    }
    dp.resize((alen + 1) * w, 0);
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[alen * w + blen];
    if getlen && !getidx {
        ctx.client.out.int(total as i64);
        return;
    }
    // Walk back from the end, collecting the LCS and its matching ranges
    // exactly in Redis's order.
    let mut result = vec![0u8; total as usize];
    let mut idx = total as usize;
    let mut matches: Vec<[i64; 5]> = Vec::new();
    let (mut astart, mut aend, mut bstart, mut bend) = (alen, 0usize, 0usize, 0usize);
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if astart == alen {
                astart = i - 1;
                aend = i - 1;
                bstart = j - 1;
                bend = j - 1;
            } else if astart == i && bstart == j {
                astart -= 1;
                bstart -= 1;
            } else {
                emit = true;
            }
            if astart == 0 || bstart == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if astart != alen {
                emit = true;
            }
        }
        if emit {
            let mlen = (aend - astart + 1) as i64;
            if minmatchlen == 0 || mlen >= minmatchlen {
                matches.push([astart as i64, aend as i64, bstart as i64, bend as i64, mlen]);
            }
            astart = alen;
        }
    }
    if !getidx {
        ctx.client.out.bulk(&result);
        return;
    }
    let out = &mut ctx.client.out;
    out.map(2);
    out.bulk(b"matches");
    out.array(matches.len());
    for m in &matches {
        out.array(2 + withmatchlen as usize);
        out.array(2);
        out.int(m[0]);
        out.int(m[1]);
        out.array(2);
        out.int(m[2]);
        out.int(m[3]);
        if withmatchlen {
            out.int(m[4]);
        }
    }
    out.bulk(b"len");
    out.int(total as i64);
}

#[cfg(test)]
mod tests {
    use super::format_human_double;

    #[test]
    fn incrbyfloat_formatting_matches_redis() {
        assert_eq!(format_human_double(10.6), "10.6");
        assert_eq!(format_human_double(3.0), "3");
        assert_eq!(format_human_double(-0.0), "0");
        assert_eq!(format_human_double(5.0e3), "5000");
        assert_eq!(format_human_double(1e20), "100000000000000000000");
        assert_eq!(format_human_double(3e-20), "0");
    }
}
