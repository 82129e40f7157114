//! Hash-field expiration (Redis 7.4): `HEXPIRE`, `HPEXPIRE`, `HEXPIREAT`,
//! `HPEXPIREAT`, `HPERSIST`, `HTTL`, `HPTTL`, `HEXPIRETIME`,
//! `HPEXPIRETIME`.
//!
//! Replies, errors and their order are Redis 7.4.1's (checked against the
//! binary): the key's type is checked before any argument; the two groups
//! word their `numfields` errors differently; a missing key answers one
//! `-2` per field; a deadline at or before now deletes the field (`2`).
//! A field stored but due (not removed yet) is still a field to the
//! setters — `HEXPIRE` gives it a new deadline, as 7.4 does — and `-2` to
//! the readers and `HPERSIST`.
//!
//! Propagation (`propagate.rs`): the setters go out as `HPEXPIREAT key ms
//! FIELDS n <the fields whose deadline was set>`, fields deleted by a past
//! deadline as one `HDEL` each before it (all in one MULTI/EXEC when
//! several), nothing when nothing changed; `HPERSIST` as sent.
//!
//! The data side is `ferrokv_store::hash::expiry`; removal of due fields
//! is `crate::field_expiry`.
//!
//! # Hostile input
//! Times are checked against Redis 7.4's ceiling (2^46-1 ms, year 4199)
//! before any arithmetic, so no overflow; `numfields` must equal the
//! fields given, so its value never sizes anything; each field costs one
//! lookup (O(log n) for its deadline) and a listpack move bounded by the
//! listpack limits.

use super::flags::*;
use super::{err, is, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_HASH};
use ferrokv_resp::Args;
use ferrokv_store::hash::{FieldLookup, Hash};

/// The latest deadline Redis 7.4 accepts (`HFE_MAX_ABS_TIME_MSEC`).
pub const MAX_FIELD_DEADLINE_MS: i64 = 0x3FFF_FFFF_FFFF;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("hash")
        .keys(1, 1, 1)
        .since("7.4.0")
        .complexity("O(N) where N is the number of specified fields")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("hexpire", -6, WRITE | DENYOOM | FAST, hexpire).doc(
        "Set expiry for hash field using relative time to expire (seconds)",
        "key seconds [NX|XX|GT|LT] FIELDS numfields field [field ...]",
    ),
    cmd("hpexpire", -6, WRITE | DENYOOM | FAST, hpexpire).doc(
        "Set expiry for hash field using relative time to expire (milliseconds)",
        "key milliseconds [NX|XX|GT|LT] FIELDS numfields field [field ...]",
    ),
    cmd("hexpireat", -6, WRITE | DENYOOM | FAST, hexpireat).doc(
        "Set expiry for hash field using an absolute Unix timestamp (seconds)",
        "key unix-time-seconds [NX|XX|GT|LT] FIELDS numfields field [field ...]",
    ),
    cmd("hpexpireat", -6, WRITE | DENYOOM | FAST, hpexpireat).doc(
        "Set expiry for hash field using an absolute Unix timestamp (milliseconds)",
        "key unix-time-milliseconds [NX|XX|GT|LT] FIELDS numfields field [field ...]",
    ),
    cmd("hpersist", -5, WRITE | FAST, hpersist).doc(
        "Removes the expiration time for each specified field",
        "key FIELDS numfields field [field ...]",
    ),
    cmd("httl", -5, READONLY | FAST, httl).doc(
        "Returns the TTL in seconds of a hash field.",
        "key FIELDS numfields field [field ...]",
    ),
    cmd("hpttl", -5, READONLY | FAST, hpttl).doc(
        "Returns the TTL in milliseconds of a hash field.",
        "key FIELDS numfields field [field ...]",
    ),
    cmd("hexpiretime", -5, READONLY | FAST, hexpiretime).doc(
        "Returns the expiration time of a hash field as a Unix timestamp, in seconds.",
        "key FIELDS numfields field [field ...]",
    ),
    cmd("hpexpiretime", -5, READONLY | FAST, hpexpiretime).doc(
        "Returns the expiration time of a hash field as a Unix timestamp, in msec.",
        "key FIELDS numfields field [field ...]",
    ),
    // Redis 8.0.
    cmd("hgetdel", -5, WRITE | FAST, hgetdel).since("8.0.0").doc("Returns the value of a field and deletes it from the hash.", "key FIELDS numfields field [field ...]"),
    cmd("hgetex", -5, WRITE | FAST, hgetex).since("8.0.0").doc("Get the value of one or more fields of a given hash key, and optionally set their expiration.", "key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | PERSIST] FIELDS numfields field [field ...]"),
    cmd("hsetex", -6, WRITE | DENYOOM | FAST, hsetex).since("8.0.0").complexity("O(N) where N is the number of fields being set.").doc("Set the value of one or more fields of a given hash key, and optionally set their expiration.", "key [FNX | FXX] [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL] FIELDS numfields field value [field value ...]"),
];

super::typed_lookups!(Hash, Hash);

const FIELDS_MISPLACED: &str =
    "ERR Mandatory argument FIELDS is missing or not at the right position";
const NUMFIELDS_MISMATCH: &str = "ERR The `numfields` parameter must match the number of arguments";

/// The per-field condition of the setters.
#[derive(Clone, Copy, PartialEq)]
enum Cond {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

impl Cond {
    /// Whether a deadline `new` may replace `cur` (`None`: no TTL, which
    /// `LT` takes as infinite and `GT` as not there).
    fn allows(self, cur: Option<i64>, new: i64) -> bool {
        match self {
            Cond::Always => true,
            Cond::Nx => cur.is_none(),
            Cond::Xx => cur.is_some(),
            Cond::Gt => cur.is_some_and(|c| new > c),
            Cond::Lt => cur.is_none_or(|c| new < c),
        }
    }
}

/// Reads `FIELDS numfields field...` starting at `at` (the `FIELDS`
/// word). `numfields_error` is the group's wording.
fn parse_fields<'a>(
    args: &Args<'a>,
    at: usize,
    numfields_error: &str,
) -> Result<Vec<&'a [u8]>, String> {
    if at >= args.len() || !is(args.get(at), "fields") {
        return Err(FIELDS_MISPLACED.into());
    }
    if at + 1 >= args.len() {
        return Err(numfields_error.into());
    }
    let n = match ferrokv_resp::parse_i64(args.get(at + 1)) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(numfields_error.into()),
    };
    if n != (args.len() - at - 2) as u64 {
        return Err(NUMFIELDS_MISMATCH.into());
    }
    Ok(args.iter().skip(at + 2).collect())
}

fn hexpire(ctx: &mut Ctx, args: Args) {
    set_deadlines(ctx, args, "hexpire", 1000, true)
}
fn hpexpire(ctx: &mut Ctx, args: Args) {
    set_deadlines(ctx, args, "hpexpire", 1, true)
}
fn hexpireat(ctx: &mut Ctx, args: Args) {
    set_deadlines(ctx, args, "hexpireat", 1000, false)
}
fn hpexpireat(ctx: &mut Ctx, args: Args) {
    set_deadlines(ctx, args, "hpexpireat", 1, false)
}

/// What one setter did to one field (the reply's codes).
const NO_FIELD: i64 = -2;
const COND_UNMET: i64 = 0;
const SET: i64 = 1;
const DELETED: i64 = 2;

/// A deadline argument as Redis's `parseExpireTime` reads it: an integer,
/// not negative, within 7.4's ceiling once in ms and absolute (`base`: now
/// for the relative forms, 0 for `*AT`). `Err` is the reply's text.
fn parse_deadline(a: &[u8], name: &str, unit_ms: i64, base: i64) -> Result<i64, String> {
    let Some(t) = ferrokv_resp::parse_i64(a) else {
        return Err(err::NOT_INTEGER.into());
    };
    if t < 0 {
        return Err("ERR invalid expire time, must be >= 0".into());
    }
    let bad_time = || format!("ERR invalid expire time in '{name}' command");
    if unit_ms != 1 && t > MAX_FIELD_DEADLINE_MS / unit_ms {
        return Err(bad_time());
    }
    let t = t * unit_ms;
    if t > MAX_FIELD_DEADLINE_MS - base {
        return Err(bad_time());
    }
    Ok(t + base)
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT key time [NX|XX|GT|LT] FIELDS numfields field...
fn set_deadlines(ctx: &mut Ctx, args: Args, name: &str, unit_ms: i64, relative: bool) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let key = args.get(1);
    let exists = match read_for_write(ctx.srv, db, key, now) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing => false,
        Read::Found(_) => true,
    };
    let base = if relative { now } else { 0 };
    let at = match parse_deadline(args.get(2), name, unit_ms, base) {
        Ok(at) => at,
        Err(e) => return ctx.error(&e),
    };
    let a3 = args.get(3);
    let (cond, fields_at) = if is(a3, "nx") {
        (Cond::Nx, 4)
    } else if is(a3, "xx") {
        (Cond::Xx, 4)
    } else if is(a3, "gt") {
        (Cond::Gt, 4)
    } else if is(a3, "lt") {
        (Cond::Lt, 4)
    } else {
        (Cond::Always, 3)
    };
    let fields = match parse_fields(
        &args,
        fields_at,
        "ERR Parameter `numFields` should be greater than 0",
    ) {
        Ok(f) => f,
        Err(e) => return ctx.error(&e),
    };
    if !exists {
        let out = &mut ctx.client.out;
        out.array(fields.len());
        for _ in &fields {
            out.int(NO_FIELD);
        }
        return;
    }
    let mut codes = Vec::with_capacity(fields.len());
    let mut set: Vec<&[u8]> = Vec::new();
    let mut deleted: Vec<&[u8]> = Vec::new();
    let (empty, min) = {
        let Write::Found(h) = write(ctx.srv, db, key, now) else {
            unreachable!("the hash was found above");
        };
        // The first call makes the hash `listpackex` even when it sets
        // nothing (7.4).
        h.make_volatile();
        for &f in &fields {
            if h.get(f).is_none() {
                codes.push(NO_FIELD);
            } else if !cond.allows(h.field_expire(f), at) {
                codes.push(COND_UNMET);
            } else if at <= now {
                h.remove(f);
                deleted.push(f);
                codes.push(DELETED);
            } else {
                h.set_field_expire(f, at);
                set.push(f);
                codes.push(SET);
            }
        }
        (h.is_empty(), h.min_field_expire())
    };
    if empty {
        ctx.srv.keyspace.dbs[db].remove(key);
    } else if let Some(m) = min {
        ctx.srv.keyspace.dbs[db].file_field_expiry(key, m);
    }
    for f in &deleted {
        let argv = vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()];
        ctx.srv.propagation.also.push((db, argv));
    }
    if !deleted.is_empty() {
        ctx.notify(NOTIFY_HASH, "hdel", key);
    }
    if !set.is_empty() {
        ctx.notify(NOTIFY_HASH, "hexpire", key);
        let at = at.to_string();
        let n = set.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"HPEXPIREAT", key, at.as_bytes(), b"FIELDS", n.as_bytes()];
        argv.extend(set.iter().copied());
        ctx.rewrite(&argv);
    } else {
        ctx.srv.propagation.suppress = true;
    }
    if empty {
        ctx.notify(NOTIFY_GENERIC, "del", key);
    }
    ctx.modified((set.len() + deleted.len()) as u64);
    let out = &mut ctx.client.out;
    out.array(codes.len());
    for c in codes {
        out.int(c);
    }
}

/// HPERSIST key FIELDS numfields field...
fn hpersist(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let key = args.get(1);
    let exists = match read_for_write(ctx.srv, db, key, now) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing => false,
        Read::Found(_) => true,
    };
    let fields = match parse_fields(&args, 2, NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return ctx.error(&e),
    };
    let mut codes = Vec::with_capacity(fields.len());
    let mut changed = 0;
    if let Write::Found(h) = write(ctx.srv, db, key, now) {
        for &f in &fields {
            let live = matches!(h.lookup(f, now), FieldLookup::Live(_));
            codes.push(if !live {
                NO_FIELD
            } else if h.persist_field(f) {
                changed += 1;
                1
            } else {
                -1
            });
        }
    } else {
        debug_assert!(!exists);
        codes.resize(fields.len(), NO_FIELD);
    }
    if changed > 0 {
        ctx.notify(NOTIFY_HASH, "hpersist", key);
        ctx.modified(changed);
        unfile_if_no_ttl(ctx, key);
    }
    let out = &mut ctx.client.out;
    out.array(codes.len());
    for c in codes {
        out.int(c);
    }
}

const NUMFIELDS_POSITIVE: &str = "ERR Number of fields must be a positive integer";

/// What the readers answer for a field with a deadline.
#[derive(Clone, Copy)]
enum Report {
    /// Seconds left, rounded up (`HTTL`).
    TtlSeconds,
    /// Milliseconds left (`HPTTL`).
    TtlMs,
    /// The deadline in unix seconds, rounded up (`HEXPIRETIME`).
    AtSeconds,
    /// The deadline in unix ms (`HPEXPIRETIME`).
    AtMs,
}

fn httl(ctx: &mut Ctx, args: Args) {
    report(ctx, args, Report::TtlSeconds)
}
fn hpttl(ctx: &mut Ctx, args: Args) {
    report(ctx, args, Report::TtlMs)
}
fn hexpiretime(ctx: &mut Ctx, args: Args) {
    report(ctx, args, Report::AtSeconds)
}
fn hpexpiretime(ctx: &mut Ctx, args: Args) {
    report(ctx, args, Report::AtMs)
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME key FIELDS numfields field...
fn report(ctx: &mut Ctx, args: Args, what: Report) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let key = args.get(1);
    let h = match read(ctx.srv, db, key, now) {
        Read::WrongType => return ctx.client.out.error(err::WRONGTYPE),
        Read::Missing => None,
        Read::Found(h) => Some(h),
    };
    let out = &mut ctx.client.out;
    let fields = match parse_fields(&args, 2, NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return out.error(&e),
    };
    out.array(fields.len());
    for f in fields {
        let Some(h) = h else {
            out.int(NO_FIELD);
            continue;
        };
        let code = match h.lookup(f, now) {
            FieldLookup::Missing | FieldLookup::Expired => NO_FIELD,
            FieldLookup::Live(_) => match h.field_expire(f) {
                None => -1,
                Some(at) => match what {
                    Report::TtlSeconds => (at - now + 999) / 1000,
                    Report::TtlMs => at - now,
                    Report::AtSeconds => (at + 999) / 1000,
                    Report::AtMs => at,
                },
            },
        };
        out.int(code);
    }
}

/// The fields named `fields` of the hash at `key` that are due, removed
/// quietly (see `Server::remove_due_fields_quietly`); true if any was.
fn remove_met(ctx: &mut Ctx, key: &[u8], fields: &[&[u8]]) -> bool {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    ctx.srv.remove_due_fields_quietly(db, key, fields, now) > 0
}

/// Removes the hash at `key` when it was left empty, with its `del` event.
fn drop_if_empty(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.client.db;
    let empty = matches!(
        read_for_write(ctx.srv, db, key, ctx.now_ms),
        Read::Found(h) if h.is_empty()
    );
    if empty {
        ctx.srv.keyspace.dbs[db].remove(key);
        ctx.notify(NOTIFY_GENERIC, "del", key);
    }
}

/// Takes the hash at `key` out of the active cycle's index once it has no
/// field TTL left (the index stays the hashes that have one, so a
/// snapshot's check of it costs what they are).
fn unfile_if_no_ttl(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.client.db;
    if let Read::Found(h) = read_for_write(ctx.srv, db, key, ctx.now_ms) {
        if h.min_field_expire().is_none() {
            ctx.srv.keyspace.dbs[db].unfile_field_expiry(key);
        }
    }
}

/// Files the hash at `key` for the active cycle by its soonest deadline.
fn refile(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.client.db;
    if let Read::Found(h) = read_for_write(ctx.srv, db, key, ctx.now_ms) {
        if let Some(m) = h.min_field_expire() {
            ctx.srv.keyspace.dbs[db].file_field_expiry(key, m);
        }
    }
}

fn reply_values(ctx: &mut Ctx, values: Vec<Option<Vec<u8>>>) {
    let out = &mut ctx.client.out;
    out.array(values.len());
    for v in values {
        match v {
            Some(v) => out.bulk(&v),
            None => out.null(),
        }
    }
}

/// HGETDEL key FIELDS numfields field... (Redis 8.0): the values, and the
/// fields found removed; propagated as `HDEL key <the fields named>`.
fn hgetdel(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let key = args.get(1);
    if let Read::WrongType = read_for_write(ctx.srv, db, key, now) {
        return ctx.error(err::WRONGTYPE);
    }
    let fields = match parse_fields(&args, 2, NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return ctx.error(&e),
    };
    let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(fields.len());
    let mut due: Vec<&[u8]> = Vec::new();
    let mut deleted = 0u64;
    if let Write::Found(h) = write(ctx.srv, db, key, now) {
        for &f in &fields {
            match h.lookup(f, now) {
                FieldLookup::Live(v) => {
                    values.push(Some(v.to_vec()));
                    h.remove(f);
                    deleted += 1;
                }
                FieldLookup::Expired => {
                    values.push(None);
                    due.push(f);
                }
                FieldLookup::Missing => values.push(None),
            }
        }
    } else {
        values.resize(fields.len(), None);
    }
    let expired = remove_met(ctx, key, &due);
    if expired {
        ctx.notify(NOTIFY_HASH, "hexpired", key);
    }
    if deleted > 0 {
        ctx.notify(NOTIFY_HASH, "hdel", key);
        ctx.modified(deleted);
        let mut argv: Vec<&[u8]> = vec![b"HDEL", key];
        argv.extend(fields.iter().copied());
        ctx.rewrite(&argv);
    }
    if expired || deleted > 0 {
        drop_if_empty(ctx, key);
    }
    reply_values(ctx, values);
}

/// What HGETEX does to the fields it returns.
#[derive(Clone, Copy, PartialEq)]
enum GetexTtl {
    Keep,
    Persist,
    At(i64),
}

/// The time options of HGETEX and HSETEX: word, unit (ms), relative.
const TIMED: [(&str, i64, bool); 4] = [
    ("ex", 1000, true),
    ("px", 1, true),
    ("exat", 1000, false),
    ("pxat", 1, false),
];

/// HGETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST] FIELDS numfields field...
/// (Redis 8.0): the values, and a new deadline (or none) for the fields
/// found; propagated as `HPEXPIREAT`/`HPERSIST`, or the `HDEL`s of a past
/// deadline.
fn hgetex(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let key = args.get(1);
    let exists = match read_for_write(ctx.srv, db, key, now) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing => false,
        Read::Found(_) => true,
    };
    let a2 = args.get(2);
    let (ttl, fields_at) = if let Some((_, unit, relative)) = TIMED.iter().find(|t| is(a2, t.0)) {
        let base = if *relative { now } else { 0 };
        match parse_deadline(args.get(3), "hgetex", *unit, base) {
            Ok(at) => (GetexTtl::At(at), 4),
            Err(e) => return ctx.error(&e),
        }
    } else if is(a2, "persist") {
        (GetexTtl::Persist, 3)
    } else {
        (GetexTtl::Keep, 2)
    };
    let fields = match parse_fields(&args, fields_at, NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return ctx.error(&e),
    };
    if !exists {
        return reply_values(ctx, vec![None; fields.len()]);
    }
    let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(fields.len());
    let mut due: Vec<&[u8]> = Vec::new();
    let mut updated = 0u64;
    let mut deleted: Vec<&[u8]> = Vec::new();
    if let Write::Found(h) = write(ctx.srv, db, key, now) {
        for &f in &fields {
            match h.lookup(f, now) {
                FieldLookup::Live(v) => {
                    values.push(Some(v.to_vec()));
                    match ttl {
                        GetexTtl::Keep => {}
                        GetexTtl::Persist => updated += h.persist_field(f) as u64,
                        GetexTtl::At(at) if at <= now => {
                            h.remove(f);
                            deleted.push(f);
                        }
                        GetexTtl::At(at) => {
                            h.set_field_expire(f, at);
                            updated += 1;
                        }
                    }
                }
                FieldLookup::Expired => {
                    values.push(None);
                    due.push(f);
                }
                FieldLookup::Missing => values.push(None),
            }
        }
    }
    let expired = remove_met(ctx, key, &due);
    for f in &deleted {
        let argv = vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()];
        ctx.srv.propagation.also.push((db, argv));
    }
    if expired || updated > 0 || !deleted.is_empty() {
        ctx.modified(updated + deleted.len() as u64);
        if expired {
            ctx.notify(NOTIFY_HASH, "hexpired", key);
        }
        if updated > 0 {
            let mut argv: Vec<&[u8]> = Vec::with_capacity(args.len());
            let at;
            if let GetexTtl::At(t) = ttl {
                ctx.notify(NOTIFY_HASH, "hexpire", key);
                at = t.to_string();
                argv.extend([&b"HPEXPIREAT"[..], key, at.as_bytes()]);
                refile(ctx, key);
            } else {
                ctx.notify(NOTIFY_HASH, "hpersist", key);
                argv.extend([&b"HPERSIST"[..], key]);
                unfile_if_no_ttl(ctx, key);
            }
            argv.extend(args.iter().skip(fields_at));
            ctx.rewrite(&argv);
        } else {
            if !deleted.is_empty() {
                ctx.notify(NOTIFY_HASH, "hdel", key);
            }
            ctx.srv.propagation.suppress = true;
        }
        drop_if_empty(ctx, key);
    }
    reply_values(ctx, values);
}

/// HSETEX key [FNX|FXX] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL] FIELDS
/// numfields field value... (Redis 8.0): sets every field (or none, 0,
/// when FNX/FXX fails), with a deadline, keeping theirs, or dropping them;
/// propagated with `PXAT` for a relative deadline, or as the `HDEL`s of a
/// past one. The arguments are read before the key.
fn hsetex(ctx: &mut Ctx, args: Args) {
    const ONE_EXPIRY: &str =
        "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified";
    let now = ctx.now_ms;
    let (mut fnx, mut fxx, mut keepttl) = (false, false, false);
    // (deadline, position of its argument, given as PXAT)
    let mut deadline: Option<(i64, usize, bool)> = None;
    let mut first = 0;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if is(a, "fields") {
            if i + 3 >= args.len() {
                return ctx.wrong_args("hsetex");
            }
            let n = match ferrokv_resp::parse_i64(args.get(i + 1)) {
                Some(n) if (1..=i32::MAX as i64).contains(&n) => n as usize,
                _ => return ctx.error("ERR invalid number of fields"),
            };
            let remaining = args.len() - i - 2;
            if !remaining.is_multiple_of(2) || n != remaining / 2 {
                return ctx.wrong_args("hsetex");
            }
            first = i + 2;
            break;
        }
        if let Some((w, unit, relative)) = TIMED.iter().find(|t| is(a, t.0)) {
            if deadline.is_some() || keepttl {
                return ctx.error(ONE_EXPIRY);
            }
            if i + 1 >= args.len() {
                return ctx.error("ERR missing expire time");
            }
            let base = if *relative { now } else { 0 };
            match parse_deadline(args.get(i + 1), "hsetex", *unit, base) {
                Ok(at) => deadline = Some((at, i + 1, *w == "pxat")),
                Err(e) => return ctx.error(&e),
            }
            i += 2;
            continue;
        }
        if is(a, "keepttl") {
            if deadline.is_some() || keepttl {
                return ctx.error(ONE_EXPIRY);
            }
            keepttl = true;
        } else if is(a, "fxx") || is(a, "fnx") {
            if fnx || fxx {
                return ctx.error("ERR Only one of FXX or FNX arguments can be specified");
            }
            fxx = is(a, "fxx");
            fnx = !fxx;
        } else {
            let text = String::from_utf8_lossy(crate::server::c_str(a, usize::MAX));
            return ctx.error(&format!("ERR unknown argument: {text}"));
        }
        i += 1;
    }
    if first == 0 {
        // Every word was an option and none was FIELDS.
        return ctx.wrong_args("hsetex");
    }
    let db = ctx.client.db;
    let key = args.get(1);
    let fields: Vec<&[u8]> = (first..args.len())
        .step_by(2)
        .map(|j| args.get(j))
        .collect();
    let exists = match read_for_write(ctx.srv, db, key, now) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing => false,
        Read::Found(_) => true,
    };
    if !exists && fxx {
        return ctx.client.out.int(0);
    }
    // FNX/FXX: a due field counts as missing (and is removed).
    let mut expired = false;
    if exists && (fnx || fxx) {
        let mut due: Vec<&[u8]> = Vec::new();
        let mut found = 0;
        if let Read::Found(h) = read_for_write(ctx.srv, db, key, now) {
            for &f in &fields {
                let live = match h.lookup(f, now) {
                    FieldLookup::Live(_) => true,
                    FieldLookup::Expired => {
                        due.push(f);
                        false
                    }
                    FieldLookup::Missing => false,
                };
                found += live as usize;
                if (fxx && !live) || (fnx && live) {
                    break;
                }
            }
        }
        expired = remove_met(ctx, key, &due);
        if (fnx && found != 0) || (fxx && found != fields.len()) {
            if expired {
                ctx.notify(NOTIFY_HASH, "hexpired", key);
                drop_if_empty(ctx, key);
            }
            return ctx.client.out.int(0);
        }
    }
    let limits = ctx.srv.config.hash_limits();
    if !exists {
        let lru = ctx.srv.lru_clock;
        let empty = ferrokv_store::Value::Hash(Hash::new());
        ctx.srv.keyspace.dbs[db].upsert(key, empty, ferrokv_store::NO_EXPIRE, lru);
    }
    let mut deleted: Vec<&[u8]> = Vec::new();
    let mut updated = 0;
    if let Write::Found(h) = write(ctx.srv, db, key, now) {
        for j in (first..args.len()).step_by(2) {
            let (f, v) = (args.get(j), args.get(j + 1));
            if deadline.is_some() || keepttl {
                h.update_keeping_ttl(f, v, limits);
            } else {
                h.insert(f, v, limits);
            }
            match deadline {
                Some((at, _, _)) if at <= now => {
                    h.remove(f);
                    deleted.push(f);
                }
                Some((at, _, _)) => {
                    h.set_field_expire(f, at);
                    updated += 1;
                }
                None => {}
            }
        }
    }
    ctx.modified(fields.len() as u64);
    if !exists {
        ctx.notify(crate::notify::NOTIFY_NEW, "new", key);
    }
    for f in &deleted {
        let argv = vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()];
        ctx.srv.propagation.also.push((db, argv));
    }
    if !deleted.is_empty() {
        ctx.srv.propagation.suppress = true;
    } else if let Some((at, pos, false)) = deadline {
        let at = at.to_string();
        let mut argv: Vec<&[u8]> = args.iter().collect();
        argv[pos - 1] = b"PXAT";
        argv[pos] = at.as_bytes();
        ctx.rewrite(&argv);
    }
    if updated > 0 {
        refile(ctx, key);
    }
    if expired {
        ctx.notify(NOTIFY_HASH, "hexpired", key);
    }
    ctx.notify(NOTIFY_HASH, "hset", key);
    if !deleted.is_empty() {
        ctx.notify(NOTIFY_HASH, "hdel", key);
    } else if updated > 0 {
        ctx.notify(NOTIFY_HASH, "hexpire", key);
    }
    drop_if_empty(ctx, key);
    ctx.client.out.int(1);
}
