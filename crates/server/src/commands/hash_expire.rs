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
    let Some(t) = ferrokv_resp::parse_i64(args.get(2)) else {
        return ctx.error(err::NOT_INTEGER);
    };
    if t < 0 {
        return ctx.error("ERR invalid expire time, must be >= 0");
    }
    let bad_time = format!("ERR invalid expire time in '{name}' command");
    if unit_ms != 1 && t > MAX_FIELD_DEADLINE_MS / unit_ms {
        return ctx.error(&bad_time);
    }
    let base = if relative { now } else { 0 };
    let t = t * unit_ms;
    if t > MAX_FIELD_DEADLINE_MS - base {
        return ctx.error(&bad_time);
    }
    let at = t + base;
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
