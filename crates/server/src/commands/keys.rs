//! The generic keyspace family: existence, deletion, renaming, copying,
//! iteration (`KEYS`, `SCAN`), expiry and `OBJECT`.
//!
//! # Hostile input
//!
//! Audited for work or memory a client could choose (issue #15; cases in
//! `tests/limits.rs`). Expiry overflow (seconds to milliseconds, plus the
//! base time) is an invalid expire time, as Redis. Database indexes outside
//! 32 bits get Redis's range error before any lookup. `SCAN` refuses a
//! `COUNT` below 1 and never allocates from `COUNT`: it visits whole
//! segments until `COUNT` entries were seen, so one call is at most one
//! pass over the keyspace however large the count (Redis's `COUNT*10`
//! bucket bound overflows for such counts and walks the whole table too);
//! a cursor past the table answers 0. `RANDOMKEY` either answers or
//! deletes the expired key it drew, so its work is bounded by the expired
//! keys it removes, and each draw is O(1) expected (`Db::random_entry`).
//! The cost of `KEYS`/`SCAN MATCH` patterns is `ferrokv_store::pattern`'s.

use super::flags::*;
use super::{err, is, parse_int, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_NEW};
use ferrokv_resp::Args;
use ferrokv_store::pattern::glob_match;
use ferrokv_store::{Entry, ValueRef, NO_EXPIRE};

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("generic")
        .keys(1, 1, 1)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, WRITE, del).keys(1, -1, 1).complexity("O(N) where N is the number of keys that will be removed.").doc("Deletes one or more keys.", "key [key ...]"),
    cmd("unlink", -2, WRITE | FAST, unlink).keys(1, -1, 1).since("4.0.0").doc("Asynchronously deletes one or more keys.", "key [key ...]"),
    cmd("exists", -2, READONLY | FAST, exists).keys(1, -1, 1).doc("Determines whether one or more keys exist.", "key [key ...]"),
    cmd("type", 2, READONLY | FAST, type_).doc("Determines the type of value stored at a key.", "key"),
    cmd("rename", 3, WRITE, rename).keys(1, 2, 1).doc("Renames a key and overwrites the destination.", "key newkey"),
    cmd("renamenx", 3, WRITE | FAST, renamenx).keys(1, 2, 1).doc("Renames a key only when the target key name doesn't exist.", "key newkey"),
    cmd("copy", -3, WRITE | DENYOOM, copy).keys(1, 2, 1).since("6.2.0").doc("Copies the value of a key to a new key.", "source destination [DB destination-db] [REPLACE]"),
    cmd("move", 3, WRITE | FAST, move_).doc("Moves a key to another database.", "key db"),
    cmd("keys", 2, READONLY, keys).keys(0, 0, 0).complexity("O(N) with N being the number of keys in the database").doc("Returns all key names that match a pattern.", "pattern"),
    cmd("scan", -2, READONLY | TOUCHES_ARBITRARY_KEYS, scan).keys(0, 0, 0).since("2.8.0").doc("Iterates over the key names in the database.", "cursor [MATCH pattern] [COUNT count] [TYPE type]"),
    cmd("randomkey", 1, READONLY | TOUCHES_ARBITRARY_KEYS, randomkey).keys(0, 0, 0).doc("Returns a random key name from the database.", ""),
    cmd("touch", -2, READONLY | FAST, touch).keys(1, -1, 1).since("3.2.1").doc("Returns the number of existing keys out of those specified after updating the time they were last accessed.", "key [key ...]"),
    cmd("expire", -3, WRITE | FAST, expire).doc("Sets the expiration time of a key in seconds.", "key seconds [NX|XX|GT|LT]"),
    cmd("pexpire", -3, WRITE | FAST, pexpire).since("2.6.0").doc("Sets the expiration time of a key in milliseconds.", "key milliseconds [NX|XX|GT|LT]"),
    cmd("expireat", -3, WRITE | FAST, expireat).since("1.2.0").doc("Sets the expiration time of a key to a Unix timestamp.", "key unix-time-seconds [NX|XX|GT|LT]"),
    cmd("pexpireat", -3, WRITE | FAST, pexpireat).since("2.6.0").doc("Sets the expiration time of a key to a Unix milliseconds timestamp.", "key unix-time-milliseconds [NX|XX|GT|LT]"),
    cmd("ttl", 2, READONLY | FAST, ttl).doc("Returns the expiration time in seconds of a key.", "key"),
    cmd("pttl", 2, READONLY | FAST, pttl).since("2.6.0").doc("Returns the expiration time in milliseconds of a key.", "key"),
    cmd("expiretime", 2, READONLY | FAST, expiretime).since("7.0.0").doc("Returns the expiration time of a key as a Unix timestamp.", "key"),
    cmd("pexpiretime", 2, READONLY | FAST, pexpiretime).since("7.0.0").doc("Returns the expiration time of a key as a Unix milliseconds timestamp.", "key"),
    cmd("persist", 2, WRITE | FAST, persist).since("2.2.0").doc("Removes the expiration time of a key.", "key"),
    cmd("object", -2, 0, object_help).since("2.2.3").keys(0, 0, 0).doc("A container for object introspection commands.", "").subs(OBJECT_SUBS),
];

static OBJECT_SUBS: &[CommandSpec] = &[
    cmd("object|encoding", 3, READONLY, object_encoding)
        .keys(2, 2, 1)
        .doc("Returns the internal encoding of a Redis object.", "key"),
    cmd("object|refcount", 3, READONLY, object_refcount)
        .keys(2, 2, 1)
        .doc("Returns the reference count of a value of a key.", "key"),
    cmd("object|idletime", 3, READONLY, object_idletime)
        .keys(2, 2, 1)
        .doc(
            "Returns the time since the last access to a Redis object.",
            "key",
        ),
    cmd("object|freq", 3, READONLY, object_freq)
        .keys(2, 2, 1)
        .since("4.0.0")
        .doc(
            "Returns the logarithmic access frequency counter of a Redis object.",
            "key",
        ),
    cmd("object|help", 2, LOADING | STALE, object_help)
        .keys(0, 0, 0)
        .since("6.2.0")
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// Deletes keys, counting the live ones removed.
fn delete_keys(ctx: &mut Ctx, args: Args, lazy: bool) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let mut n = 0;
    for key in args.iter().skip(1) {
        if ctx.srv.exists(db, key, now) {
            if let Some(e) = ctx.srv.keyspace.dbs[db].remove(key) {
                if lazy {
                    ctx.srv.drop_value(e);
                }
            }
            ctx.srv.touch_watched_key(db, key);
            ctx.notify(NOTIFY_GENERIC, "del", key);
            n += 1;
        }
    }
    ctx.modified(n as u64);
    ctx.client.out.int(n);
}

/// DEL key [key ...]
fn del(ctx: &mut Ctx, args: Args) {
    delete_keys(ctx, args, false)
}

/// UNLINK key [key ...]
fn unlink(ctx: &mut Ctx, args: Args) {
    delete_keys(ctx, args, true)
}

/// EXISTS key [key ...]
fn exists(ctx: &mut Ctx, args: Args) {
    count_found(ctx, args, false)
}

/// EXISTS and TOUCH: how many of the keys (repeats counted) are there;
/// for TOUCH each one found is an access.
fn count_found(ctx: &mut Ctx, args: Args, access: bool) {
    let db = ctx.client.db;
    let n = args
        .iter()
        .skip(1)
        .filter(|k| {
            if access {
                ctx.srv.lookup_read(db, k, ctx.now_ms).is_some()
            } else {
                ctx.srv.lookup_read_notouch(db, k, ctx.now_ms).is_some()
            }
        })
        .count();
    ctx.client.out.int(n as i64);
}

/// TYPE key
fn type_(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let name = match ctx.srv.lookup_read_notouch(db, args.get(1), ctx.now_ms) {
        Some(e) => e.value().value_type().name(),
        None => "none",
    };
    ctx.client.out.simple(name);
}

fn rename_generic(ctx: &mut Ctx, args: Args, nx: bool) {
    let db = ctx.client.db;
    let (src, dst) = (args.get(1), args.get(2));
    if !ctx.srv.exists(db, src, ctx.now_ms) {
        ctx.error(err::NO_SUCH_KEY);
        return;
    }
    if src == dst {
        if nx {
            ctx.client.out.int(0);
        } else {
            ctx.client.out.ok();
        }
        return;
    }
    if nx && ctx.srv.exists(db, dst, ctx.now_ms) {
        ctx.client.out.int(0);
        return;
    }
    let d = &mut ctx.srv.keyspace.dbs[db];
    let e = d.remove(src).expect("checked above");
    let (expire_at, lru) = (e.expire_at, e.lru());
    if let Some(old) = d.upsert(dst, e.into_value(), expire_at, lru) {
        ctx.srv.drop_value(old);
    }
    ctx.modified(1);
    // Redis deletes an existing destination, then adds the key anew.
    ctx.notify(NOTIFY_NEW, "new", dst);
    ctx.notify(NOTIFY_GENERIC, "rename_from", src);
    ctx.notify(NOTIFY_GENERIC, "rename_to", dst);
    if nx {
        ctx.client.out.int(1);
    } else {
        ctx.client.out.ok();
    }
}

/// RENAME key newkey
fn rename(ctx: &mut Ctx, args: Args) {
    rename_generic(ctx, args, false)
}

/// RENAMENX key newkey
fn renamenx(ctx: &mut Ctx, args: Args) {
    rename_generic(ctx, args, true)
}

/// Parses a database index argument, replying with Redis's error.
fn parse_db(ctx: &mut Ctx, a: &[u8]) -> Option<usize> {
    let v = super::parse_i32(ctx, a)?;
    if v < 0 || v as usize >= ctx.srv.keyspace.dbs.len() {
        ctx.error(err::DB_RANGE);
        return None;
    }
    Some(v as usize)
}

/// COPY source destination [DB destination-db] [REPLACE]
fn copy(ctx: &mut Ctx, args: Args) {
    let src_db = ctx.client.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        if is(a, "replace") {
            replace = true;
        } else if is(a, "db") && i + 1 < args.len() {
            let Some(d) = parse_db(ctx, args.get(i + 1)) else {
                return;
            };
            dst_db = d;
            i += 1;
        } else {
            ctx.error(err::SYNTAX);
            return;
        }
        i += 1;
    }
    let (src, dst) = (args.get(1), args.get(2));
    if src_db == dst_db && src == dst {
        ctx.error("ERR source and destination objects are the same");
        return;
    }
    let now = ctx.now_ms;
    let Some(e) = ctx.srv.lookup_read(src_db, src, now) else {
        ctx.client.out.int(0);
        return;
    };
    let (value, expire_at) = (e.value().to_value(), e.expire_at);
    if ctx.srv.exists(dst_db, dst, now) && !replace {
        ctx.client.out.int(0);
        return;
    }
    let lru = ctx.srv.lru_clock;
    ctx.srv.keyspace.dbs[dst_db].upsert(dst, value, expire_at, lru);
    ctx.modified(1);
    ctx.srv.touch_watched_key(dst_db, dst);
    ctx.notify_db(NOTIFY_NEW, "new", dst, dst_db);
    ctx.notify_db(NOTIFY_GENERIC, "copy_to", dst, dst_db);
    ctx.client.out.int(1);
}

/// MOVE key db
fn move_(ctx: &mut Ctx, args: Args) {
    if ctx.srv.cluster.is_some() {
        return ctx.error("ERR MOVE is not allowed in cluster mode");
    }
    let src_db = ctx.client.db;
    let Some(dst_db) = parse_db(ctx, args.get(2)) else {
        return;
    };
    if src_db == dst_db {
        ctx.error("ERR source and destination objects are the same");
        return;
    }
    let key = args.get(1);
    let now = ctx.now_ms;
    if !ctx.srv.exists(src_db, key, now) || ctx.srv.exists(dst_db, key, now) {
        ctx.client.out.int(0);
        return;
    }
    let e = ctx.srv.keyspace.dbs[src_db]
        .remove(key)
        .expect("checked above");
    let (expire_at, lru) = (e.expire_at, e.lru());
    ctx.srv.keyspace.dbs[dst_db].upsert(key, e.into_value(), expire_at, lru);
    ctx.modified(1);
    ctx.srv.touch_watched_key(dst_db, key);
    ctx.notify_db(NOTIFY_NEW, "new", key, dst_db);
    ctx.notify_db(NOTIFY_GENERIC, "move_from", key, src_db);
    ctx.notify_db(NOTIFY_GENERIC, "move_to", key, dst_db);
    ctx.client.out.int(1);
}

fn live(e: &Entry, now: i64) -> bool {
    e.expire_at == NO_EXPIRE || e.expire_at > now
}

/// KEYS pattern
fn keys(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let pattern = args.get(1);
    let all = pattern == b"*";
    let now = ctx.now_ms;
    let found: Vec<&[u8]> = ctx.srv.keyspace.dbs[db]
        .iter()
        .filter(|e| live(e, now) && (all || glob_match(pattern, e.key())))
        .map(|e| e.key())
        .collect();
    let out = &mut ctx.client.out;
    out.array(found.len());
    for k in found {
        out.bulk(k);
    }
}

/// Parses a SCAN cursor as Redis's `parseScanCursorOrReply` does with
/// `strtoul`: an optional sign (`-1` wraps to the largest cursor), decimal
/// digits, no leading space, no overflow; the empty string is cursor 0.
pub(crate) fn parse_cursor(a: &[u8]) -> Option<u64> {
    if a.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match a[0] {
        b'-' => (true, &a[1..]),
        b'+' => (false, &a[1..]),
        _ => (false, a),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = std::str::from_utf8(digits).ok()?.parse::<u64>().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The options of the SCAN family: `[MATCH pattern] [COUNT count]`,
/// `[TYPE type]` for SCAN itself and `[NOVALUES]` for HSCAN (Redis 7.4).
/// `MATCH *` is no filter.
pub(super) struct ScanOptions<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub type_filter: Option<&'a [u8]>,
    pub novalues: bool,
}

/// Which member of the SCAN family parses its options: the options it
/// takes beyond MATCH and COUNT follow from it.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum ScanOf {
    /// SCAN: `TYPE type`.
    Keys,
    /// HSCAN: `NOVALUES`.
    Hash,
    /// SSCAN, ZSCAN.
    Elements,
}

/// Parses the SCAN-family options from `args[first..]`. The error is
/// Redis's text, for the caller to reply once it has looked the key up
/// (Redis checks the key's type first). A COUNT below 1 is a syntax error.
pub(super) fn parse_scan_options<'a>(
    args: &Args<'a>,
    first: usize,
    of: ScanOf,
) -> Result<ScanOptions<'a>, &'static str> {
    let mut o = ScanOptions {
        pattern: None,
        count: 10,
        type_filter: None,
        novalues: false,
    };
    let mut i = first;
    while i < args.len() {
        let a = args.get(i);
        // A flag without a value (Redis 7.4's scanGenericCommand: any
        // command but HSCAN refuses it by name).
        if is(a, "novalues") {
            if of != ScanOf::Hash {
                return Err("ERR NOVALUES option can only be used in HSCAN");
            }
            o.novalues = true;
            i += 1;
            continue;
        }
        if i + 1 >= args.len() {
            return Err(err::SYNTAX);
        }
        if is(a, "match") {
            let p = args.get(i + 1);
            o.pattern = (p != b"*").then_some(p);
        } else if is(a, "count") {
            let c = ferrokv_resp::parse_i64(args.get(i + 1)).ok_or(err::NOT_INTEGER)?;
            if c < 1 {
                return Err(err::SYNTAX);
            }
            o.count = c as usize;
        } else if of == ScanOf::Keys && is(a, "type") {
            o.type_filter = Some(args.get(i + 1));
        } else {
            return Err(err::SYNTAX);
        }
        i += 2;
    }
    Ok(o)
}

/// Writes a SCAN-shaped reply: the next cursor, then the elements.
pub(super) fn reply_scan(out: &mut crate::net::client::Reply, next: u64, items: &[Vec<u8>]) {
    out.array(2);
    let mut buf = itoa::Buffer::new();
    out.bulk(buf.format(next).as_bytes());
    out.array(items.len());
    for it in items {
        out.bulk(it);
    }
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
fn scan(ctx: &mut Ctx, args: Args) {
    let Some(cursor) = parse_cursor(args.get(1)) else {
        ctx.error("ERR invalid cursor");
        return;
    };
    let opts = match parse_scan_options(&args, 2, ScanOf::Keys) {
        Ok(o) => o,
        Err(e) => return ctx.error(e),
    };
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut expired: Vec<Vec<u8>> = Vec::new();
    let next = ctx.srv.keyspace.dbs[db].scan(cursor, opts.count, |e| {
        if opts.pattern.is_some_and(|p| !glob_match(p, e.key())) {
            return;
        }
        // As Redis's scanGenericCommand: a key past its TTL that the
        // pattern lets through is deleted (below), and not returned.
        if !live(e, now) {
            expired.push(e.key().to_vec());
            return;
        }
        if let Some(t) = opts.type_filter {
            if !t.eq_ignore_ascii_case(e.value().value_type().name().as_bytes()) {
                return;
            }
        }
        found.push(e.key().to_vec());
    });
    for k in &expired {
        ctx.srv.peek(db, k, now);
    }
    reply_scan(&mut ctx.client.out, next, &found);
}

/// RANDOMKEY
///
/// Redis's `dbRandomKey`: a random key; one found expired is deleted and
/// another drawn, so the work is bounded by the expired keys it removes,
/// and nil means the database is empty. A replica deletes nothing: there,
/// when every key has a TTL (all may be logically expired), it gives up
/// after 100 draws and answers the last key drawn, as Redis does.
fn randomkey(ctx: &mut Ctx, _args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let replica = !ctx.srv.deletes_expired_keys();
    let d = &ctx.srv.keyspace.dbs[db];
    let all_volatile = d.len() == d.expires();
    let mut tries = 100;
    loop {
        let srv = &mut *ctx.srv;
        let before = srv.keyspace.dbs[db].len();
        let Some(e) = srv.keyspace.dbs[db].random_entry(&mut srv.rng) else {
            return ctx.client.out.null();
        };
        let k = e.key().to_vec();
        if live(e, now) {
            return ctx.client.out.bulk(&k);
        }
        if !replica {
            ctx.srv.exists(db, &k, now);
        }
        // Nothing was deleted (a replica): the draws are what bound it.
        if ctx.srv.keyspace.dbs[db].len() == before {
            tries -= 1;
            if all_volatile && tries == 0 {
                return ctx.client.out.bulk(&k);
            }
        }
    }
}

/// TOUCH key [key ...]
/// TOUCH key [key ...]: as EXISTS, but each key found is an access (its
/// LRU/LFU clock moves; Redis's `lookupKeyRead`), even for a `CLIENT
/// NO-TOUCH` client.
fn touch(ctx: &mut Ctx, args: Args) {
    count_found(ctx, args, true)
}

/// Applies EXPIRE-family flags and the new time (absolute ms).
fn expire_generic(ctx: &mut Ctx, args: Args, unit_ms: i64, relative: bool, name: &str) {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in args.iter().skip(3) {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            ctx.error(&format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            ));
            return;
        }
    }
    if nx && (xx || gt || lt) {
        ctx.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if gt && lt {
        ctx.error("ERR GT and LT options at the same time are not compatible");
        return;
    }
    // The options are checked before the time, as Redis does.
    let Some(v) = parse_int(ctx, args.get(2)) else {
        return;
    };
    let invalid = format!("ERR invalid expire time in '{name}' command");
    let Some(mut when) = v.checked_mul(unit_ms) else {
        ctx.error(&invalid);
        return;
    };
    if relative {
        match when.checked_add(ctx.now_ms) {
            Some(w) => when = w,
            None => {
                ctx.error(&invalid);
                return;
            }
        }
    }
    let db = ctx.client.db;
    let key = args.get(1);
    let Some(e) = ctx.srv.lookup_write(db, key, ctx.now_ms) else {
        ctx.client.out.int(0);
        return;
    };
    let cur = e.expire_at;
    let has = cur != NO_EXPIRE;
    if (nx && has) || (xx && !has) || (gt && (!has || when <= cur)) || (lt && has && when >= cur) {
        ctx.client.out.int(0);
        return;
    }
    if when <= ctx.now_ms {
        ctx.srv.keyspace.dbs[db].remove(key);
        ctx.rewrite(&[&b"DEL"[..], key]);
        ctx.modified(1);
        ctx.notify(NOTIFY_GENERIC, "del", key);
    } else {
        ctx.srv.keyspace.dbs[db].set_expire(key, when);
        let w = when.to_string();
        ctx.rewrite(&[&b"PEXPIREAT"[..], key, w.as_bytes()]);
        ctx.modified(1);
        ctx.notify(NOTIFY_GENERIC, "expire", key);
    }
    ctx.client.out.int(1);
}

/// EXPIRE key seconds [NX|XX|GT|LT]
fn expire(ctx: &mut Ctx, args: Args) {
    expire_generic(ctx, args, 1000, true, "expire")
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT]
fn pexpire(ctx: &mut Ctx, args: Args) {
    expire_generic(ctx, args, 1, true, "pexpire")
}

/// EXPIREAT key unix-time-seconds [NX|XX|GT|LT]
fn expireat(ctx: &mut Ctx, args: Args) {
    expire_generic(ctx, args, 1000, false, "expireat")
}

/// PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT]
fn pexpireat(ctx: &mut Ctx, args: Args) {
    expire_generic(ctx, args, 1, false, "pexpireat")
}

/// The expiry of a key: None when missing, Some(NO_EXPIRE) when persistent.
fn expire_of(ctx: &mut Ctx, key: &[u8]) -> Option<i64> {
    let db = ctx.client.db;
    ctx.srv
        .lookup_read_notouch(db, key, ctx.now_ms)
        .map(|e| e.expire_at)
}

fn ttl_generic(ctx: &mut Ctx, args: Args, ms: bool, absolute: bool) {
    let reply = match expire_of(ctx, args.get(1)) {
        None => -2,
        Some(NO_EXPIRE) => -1,
        // Seconds are rounded to the nearest one, for EXPIRETIME as for
        // TTL (Redis's `ttlGenericCommand`), without overflowing near
        // `PEXPIREAT k 9223372036854775807`.
        Some(at) if absolute => {
            if ms {
                at
            } else {
                ((at as i128 + 500) / 1000) as i64
            }
        }
        Some(at) => {
            let t = (at - ctx.now_ms).max(0);
            if ms {
                t
            } else {
                (t + 500) / 1000
            }
        }
    };
    ctx.client.out.int(reply);
}

/// TTL key
fn ttl(ctx: &mut Ctx, args: Args) {
    ttl_generic(ctx, args, false, false)
}

/// PTTL key
fn pttl(ctx: &mut Ctx, args: Args) {
    ttl_generic(ctx, args, true, false)
}

/// EXPIRETIME key
fn expiretime(ctx: &mut Ctx, args: Args) {
    ttl_generic(ctx, args, false, true)
}

/// PEXPIRETIME key
fn pexpiretime(ctx: &mut Ctx, args: Args) {
    ttl_generic(ctx, args, true, true)
}

/// PERSIST key
fn persist(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        Some(e) if e.has_expire() => {
            ctx.srv.keyspace.dbs[db].set_expire(key, NO_EXPIRE);
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "persist", key);
            ctx.client.out.int(1);
        }
        _ => ctx.client.out.int(0),
    }
}

/// Redis shares the integers 0..10000 between keys (`OBJ_SHARED_INTEGERS`);
/// `OBJECT REFCOUNT` reports them as immortal.
fn refcount(v: ValueRef) -> i64 {
    match v {
        ValueRef::Int(i) if (0..10000).contains(&i) => i32::MAX as i64,
        _ => 1,
    }
}

fn object_lookup<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Option<&'a Entry> {
    let db = ctx.client.db;
    ctx.srv.peek(db, key, ctx.now_ms)
}

/// OBJECT ENCODING key
fn object_encoding(ctx: &mut Ctx, args: Args) {
    match object_lookup(ctx, args.get(2)).map(|e| e.value().encoding()) {
        Some(enc) => ctx.client.out.bulk(enc.as_bytes()),
        None => ctx.client.out.null(),
    }
}

/// OBJECT REFCOUNT key
fn object_refcount(ctx: &mut Ctx, args: Args) {
    match object_lookup(ctx, args.get(2)).map(|e| refcount(e.value())) {
        Some(n) => ctx.client.out.int(n),
        None => ctx.client.out.null(),
    }
}

/// OBJECT IDLETIME key
fn object_idletime(ctx: &mut Ctx, args: Args) {
    let clock = ctx.srv.lru_clock;
    let Some(lru) = object_lookup(ctx, args.get(2)).map(|e| e.lru()) else {
        ctx.client.out.null();
        return;
    };
    if ctx.srv.config.maxmemory_policy.is_lfu() {
        ctx.error("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
        return;
    }
    let idle = crate::evict::idle_seconds(clock, lru);
    ctx.client.out.int(idle as i64)
}

/// OBJECT FREQ key
fn object_freq(ctx: &mut Ctx, args: Args) {
    let Some(clock) = object_lookup(ctx, args.get(2)).map(|e| e.lru()) else {
        ctx.client.out.null();
        return;
    };
    if ctx.srv.config.maxmemory_policy.is_lfu() {
        let freq = ctx.srv.lfu_frequency(clock);
        ctx.client.out.int(freq as i64);
        return;
    }
    ctx.error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
}

/// OBJECT HELP
fn object_help(ctx: &mut Ctx, args: Args) {
    if args.len() >= 2 && !is(args.get(1), "help") {
        let sub = String::from_utf8_lossy(args.get(1));
        ctx.error(&format!("ERR unknown subcommand '{sub}'. Try OBJECT HELP."));
        return;
    }
    super::reply_help(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
}
