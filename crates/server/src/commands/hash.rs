//! The hash family: HSET and friends, counters, random fields, HSCAN.
//!
//! The data work is in `ferrokv_store::hash` (encodings, conversion at the
//! `hash-max-listpack-*` thresholds); this file parses arguments, checks
//! types, writes replies and says what propagates. Replies and errors are
//! Redis 7.0's, including the RESP3 shapes (`HGETALL` a map, `HRANDFIELD
//! .. WITHVALUES` an array of pairs).
//!
//! # Hostile input
//!
//! Audited for work or memory a client could choose (issue #15; cases in
//! `tests/limits.rs`). `HRANDFIELD`: `LONG_MIN`, and with `WITHVALUES` a
//! count outside `±LONG_MAX/2`, answer Redis's errors; a positive count
//! gives at most the hash; a negative one (picks with repetition, a reply
//! sized by the client) is bounded at `proto-max-bulk-len` bytes by
//! `set::reply_repeated_picks` — Redis 7.0 has no bound there and never
//! answers `-LONG_MAX`. The pairs are indexed only for a (small) listpack.
//! `HINCRBY` overflow and `HINCRBYFLOAT` to an infinity are refused.
//! `HSCAN` costs O(fields) per call whatever `COUNT` (see `Dense::scan`).

use super::flags::*;
use super::keys::{parse_scan_options, reply_scan, ScanOf};
use super::long_double::LongDouble;
use super::{err, is, parse_f64, parse_int, CommandSpec, Ctx};
use crate::field_expiry::{Propagate, Which};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_NEW};
use ferrokv_resp::encode::Protocol;
use ferrokv_resp::Args;
use ferrokv_store::hash::{FieldLookup, Hash};
use ferrokv_store::pattern::glob_match;
use ferrokv_store::value::parse_canonical_i64;
use ferrokv_store::{Value, NO_EXPIRE};

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("hash")
        .keys(1, 1, 1)
        .since("2.0.0")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("hset", -4, WRITE | DENYOOM | FAST, hset).complexity("O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.").doc("Creates or modifies the value of a field in a hash.", "key field value [field value ...]"),
    cmd("hsetnx", 4, WRITE | DENYOOM | FAST, hsetnx).doc("Sets the value of a field in a hash only when the field doesn't exist.", "key field value"),
    cmd("hmset", -4, WRITE | DENYOOM | FAST, hmset).complexity("O(N) where N is the number of fields being set.").doc("Sets the values of multiple fields.", "key field value [field value ...]"),
    cmd("hget", 3, READONLY | FAST, hget).doc("Returns the value of a field in a hash.", "key field"),
    cmd("hmget", -3, READONLY | FAST, hmget).complexity("O(N) where N is the number of fields being requested.").doc("Returns the values of all fields in a hash.", "key field [field ...]"),
    cmd("hdel", -3, WRITE | FAST, hdel).complexity("O(N) where N is the number of fields to be removed.").doc("Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "key field [field ...]"),
    cmd("hexists", 3, READONLY | FAST, hexists).doc("Determines whether a field exists in a hash.", "key field"),
    cmd("hlen", 2, READONLY | FAST, hlen).doc("Returns the number of fields in a hash.", "key"),
    cmd("hstrlen", 3, READONLY | FAST, hstrlen).since("3.2.0").doc("Returns the length of the value of a field.", "key field"),
    cmd("hkeys", 2, READONLY, hkeys).complexity("O(N) where N is the size of the hash.").doc("Returns all fields in a hash.", "key"),
    cmd("hvals", 2, READONLY, hvals).complexity("O(N) where N is the size of the hash.").doc("Returns all values in a hash.", "key"),
    cmd("hgetall", 2, READONLY, hgetall).complexity("O(N) where N is the size of the hash.").doc("Returns all fields and values in a hash.", "key"),
    cmd("hincrby", 4, WRITE | DENYOOM | FAST, hincrby).doc("Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "key field increment"),
    cmd("hincrbyfloat", 4, WRITE | DENYOOM | FAST, hincrbyfloat).since("2.6.0").doc("Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "key field increment"),
    cmd("hrandfield", -2, READONLY, hrandfield).since("6.2.0").complexity("O(N) where N is the number of fields returned").doc("Returns one or more random fields from a hash.", "key [count [WITHVALUES]]"),
    cmd("hscan", -3, READONLY, hscan).since("2.8.0").complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.").doc("Iterates over fields and values of a hash.", "key cursor [MATCH pattern] [COUNT count] [NOVALUES]"),
];

super::typed_lookups!(Hash, Hash);

/// Removes fields of the hash at `key` that are due — those a command met
/// (`Which::Named`), or all (`HRANDFIELD` samples from live fields only, as
/// Redis 7.4) — their `HDEL`s propagated before the command's own change
/// (`field_expiry.rs`).
fn expire_due(ctx: &mut Ctx, key: &[u8], which: Which) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let client = Some(&mut *ctx.client);
    ctx.srv
        .expire_hash_fields(client, db, key, now, which, Propagate::BeforeCommand);
}

/// A field of the hash at `key` as a command that touches one sees it: a
/// due field is removed and reads as missing. `for_write`: the lookup of a
/// write command (no keyspace hit or miss counted). `Err` once WRONGTYPE
/// is replied.
fn met_field(
    ctx: &mut Ctx,
    key: &[u8],
    field: &[u8],
    for_write: bool,
) -> Result<Option<Vec<u8>>, ()> {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let found = if for_write {
        read_for_write(ctx.srv, db, key, now)
    } else {
        read(ctx.srv, db, key, now)
    };
    let expired = match found {
        Read::WrongType => {
            ctx.error(err::WRONGTYPE);
            return Err(());
        }
        Read::Missing => return Ok(None),
        Read::Found(h) => match h.lookup(field, now) {
            FieldLookup::Live(v) => return Ok(Some(v.to_vec())),
            FieldLookup::Missing => return Ok(None),
            FieldLookup::Expired => true,
        },
    };
    if expired {
        expire_due(ctx, key, Which::Named(&[field]));
    }
    Ok(None)
}

/// The (field, value) pairs of `args[first..]`.
fn pairs<'a>(
    args: &'a Args<'a>,
    first: usize,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a {
    (first..args.len())
        .step_by(2)
        .map(move |i| (args.get(i), args.get(i + 1)))
}

/// Sets the pairs `args[first..]` in the hash at `key` (created when
/// missing). Returns the number of new fields, or None after WRONGTYPE.
fn set_pairs(ctx: &mut Ctx, args: &Args, first: usize) -> Option<i64> {
    let db = ctx.client.db;
    let key = args.get(1);
    let limits = ctx.srv.config.hash_limits();
    let added = match write(ctx.srv, db, key, ctx.now_ms) {
        Write::WrongType => {
            ctx.error(err::WRONGTYPE);
            return None;
        }
        Write::Found(h) => h.insert_many(pairs(args, first), limits) as i64,
        Write::Missing => {
            let (h, added) = Hash::from_new_pairs(pairs(args, first), limits);
            let lru = ctx.srv.lru_clock;
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Hash(h), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
            added as i64
        }
    };
    ctx.modified(((args.len() - first) / 2) as u64);
    ctx.notify(NOTIFY_HASH, "hset", key);
    Some(added)
}

/// HSET key field value [field value ...]
fn hset(ctx: &mut Ctx, args: Args) {
    if !args.len().is_multiple_of(2) {
        ctx.wrong_args("hset");
        return;
    }
    if let Some(n) = set_pairs(ctx, &args, 2) {
        ctx.client.out.int(n);
    }
}

/// HMSET key field value [field value ...]
fn hmset(ctx: &mut Ctx, args: Args) {
    if !args.len().is_multiple_of(2) {
        ctx.wrong_args("hmset");
        return;
    }
    if set_pairs(ctx, &args, 2).is_some() {
        ctx.client.out.ok();
    }
}

/// HSETNX key field value
fn hsetnx(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let (key, field) = (args.get(1), args.get(2));
    let expired = match read_for_write(ctx.srv, db, key, ctx.now_ms) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Found(h) => match h.lookup(field, ctx.now_ms) {
            FieldLookup::Live(_) => return ctx.client.out.int(0),
            FieldLookup::Expired => true,
            FieldLookup::Missing => false,
        },
        Read::Missing => false,
    };
    if expired {
        expire_due(ctx, key, Which::Named(&[field]));
    }
    if set_pairs(ctx, &args, 2).is_some() {
        ctx.client.out.int(1);
    }
}

/// HGET key field
fn hget(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let (key, field) = (args.get(1), args.get(2));
    let out = &mut ctx.client.out;
    match read(ctx.srv, db, key, now) {
        Read::WrongType => return out.error(err::WRONGTYPE),
        Read::Found(h) => match h.lookup(field, now) {
            FieldLookup::Live(v) => return out.bulk(v),
            FieldLookup::Missing => return out.null(),
            FieldLookup::Expired => {}
        },
        Read::Missing => return out.null(),
    }
    expire_due(ctx, key, Which::Named(&[field]));
    ctx.client.out.null();
}

/// HMGET key field [field ...]
fn hmget(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => out.error(err::WRONGTYPE),
        Read::Found(h) => {
            let now = ctx.now_ms;
            let mut due: Vec<&[u8]> = Vec::new();
            out.array(args.len() - 2);
            for f in args.iter().skip(2) {
                match h.lookup(f, now) {
                    FieldLookup::Live(v) => out.bulk(v),
                    FieldLookup::Missing => out.null(),
                    FieldLookup::Expired => {
                        due.push(f);
                        out.null()
                    }
                }
            }
            if !due.is_empty() {
                expire_due(ctx, args.get(1), Which::Named(&due));
            }
        }
        Read::Missing => {
            out.array(args.len() - 2);
            for _ in 2..args.len() {
                out.null();
            }
        }
    }
}

/// HDEL key field [field ...]
fn hdel(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    let (removed, empty) = match write(ctx.srv, db, key, ctx.now_ms) {
        Write::WrongType => return ctx.error(err::WRONGTYPE),
        Write::Missing => return ctx.client.out.int(0),
        Write::Found(h) => {
            let mut n = 0;
            for f in args.iter().skip(2) {
                if h.remove(f) {
                    n += 1;
                    if h.is_empty() {
                        break;
                    }
                }
            }
            (n, h.is_empty())
        }
    };
    if removed > 0 {
        ctx.notify(NOTIFY_HASH, "hdel", key);
    }
    if empty {
        ctx.srv.keyspace.dbs[db].remove(key);
        ctx.notify(NOTIFY_GENERIC, "del", key);
    }
    ctx.modified(removed as u64);
    ctx.client.out.int(removed);
}

/// HEXISTS key field
fn hexists(ctx: &mut Ctx, args: Args) {
    if let Ok(v) = met_field(ctx, args.get(1), args.get(2), false) {
        ctx.client.out.int(v.is_some() as i64);
    }
}

/// HLEN key
fn hlen(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => ctx.client.out.error(err::WRONGTYPE),
        Read::Found(h) => ctx.client.out.int(h.len() as i64),
        Read::Missing => ctx.client.out.int(0),
    }
}

/// HSTRLEN key field
fn hstrlen(ctx: &mut Ctx, args: Args) {
    if let Ok(v) = met_field(ctx, args.get(1), args.get(2), false) {
        ctx.client.out.int(v.map_or(0, |v| v.len() as i64));
    }
}

/// What HKEYS, HVALS and HGETALL reply with.
#[derive(Clone, Copy, PartialEq)]
enum Parts {
    Fields,
    Values,
    Both,
}

fn get_all(ctx: &mut Ctx, args: Args, parts: Parts) {
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => out.error(err::WRONGTYPE),
        Read::Missing if parts == Parts::Both => out.map(0),
        Read::Missing => out.array(0),
        Read::Found(h) => {
            // Due fields are left out, not removed (as Redis 7.4).
            let now = ctx.now_ms;
            let n = h.len_live(now);
            match parts {
                Parts::Both => out.map(n),
                _ => out.array(n),
            }
            for (f, v) in h.iter_live(now) {
                if parts != Parts::Values {
                    out.bulk(f);
                }
                if parts != Parts::Fields {
                    out.bulk(v);
                }
            }
        }
    }
}

/// HKEYS key
fn hkeys(ctx: &mut Ctx, args: Args) {
    get_all(ctx, args, Parts::Fields)
}

/// HVALS key
fn hvals(ctx: &mut Ctx, args: Args) {
    get_all(ctx, args, Parts::Values)
}

/// HGETALL key
fn hgetall(ctx: &mut Ctx, args: Args) {
    get_all(ctx, args, Parts::Both)
}

/// Replaces a field's value after a read-modify-write (HINCRBY*): the key
/// exists as a hash, or is created. The field keeps its TTL (Redis 7.4).
/// Returns the field's deadline.
fn store_field(ctx: &mut Ctx, key: &[u8], field: &[u8], value: &[u8]) -> Option<i64> {
    let db = ctx.client.db;
    let limits = ctx.srv.config.hash_limits();
    let mut deadline = None;
    match write(ctx.srv, db, key, ctx.now_ms) {
        Write::Found(h) => {
            h.update_keeping_ttl(field, value, limits);
            deadline = h.field_expire(field);
        }
        _ => {
            let mut h = Hash::new();
            h.insert(field, value, limits);
            let lru = ctx.srv.lru_clock;
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Hash(h), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
        }
    }
    ctx.modified(1);
    deadline
}

/// HINCRBY key field increment
fn hincrby(ctx: &mut Ctx, args: Args) {
    let Some(by) = parse_int(ctx, args.get(3)) else {
        return;
    };
    let (key, field) = (args.get(1), args.get(2));
    let Ok(cur) = met_field(ctx, key, field, true) else {
        return;
    };
    let cur = match cur {
        None => 0,
        Some(v) => match parse_canonical_i64(&v) {
            Some(i) => i,
            None => return ctx.error("ERR hash value is not an integer"),
        },
    };
    let Some(n) = cur.checked_add(by) else {
        return ctx.error(err::OVERFLOW);
    };
    let mut buf = ferrokv_store::value::itoa_buf::Buf::new();
    store_field(ctx, key, field, buf.format(n));
    ctx.notify(NOTIFY_HASH, "hincrby", key);
    ctx.client.out.int(n);
}

/// HINCRBYFLOAT key field increment
fn hincrbyfloat(ctx: &mut Ctx, args: Args) {
    // As INCRBYFLOAT: Redis adds in `long double`. Ok(None) is a valid
    // infinite operand, refused after the sum.
    let parse = |s: &[u8]| match LongDouble::parse(s, parse_f64(s)) {
        Some(v) => Ok(Some(v)),
        None if parse_f64(s).is_some_and(f64::is_infinite) => Ok(None),
        None => Err(()),
    };
    let by = match parse(args.get(3)) {
        Ok(Some(by)) => by,
        Ok(None) => return ctx.error("ERR value is NaN or Infinity"),
        Err(()) => return ctx.error(err::NOT_FLOAT),
    };
    let (key, field) = (args.get(1), args.get(2));
    let Ok(cur) = met_field(ctx, key, field, true) else {
        return;
    };
    let cur = match cur {
        None => Some(LongDouble::ZERO),
        Some(v) => match parse(&v) {
            Ok(v) => v,
            Err(()) => return ctx.error("ERR hash value is not a float"),
        },
    };
    let Some(n) = cur.and_then(|cur| cur.checked_add(by)) else {
        return ctx.error("ERR increment would produce NaN or Infinity");
    };
    let text = n.to_human_string();
    let deadline = store_field(ctx, key, field, text.as_bytes());
    ctx.notify(NOTIFY_HASH, "hincrbyfloat", key);
    ctx.rewrite(&[&b"HSET"[..], key, field, text.as_bytes()]);
    if let Some(at) = deadline {
        // The HSET drops a field's TTL where it is replayed (Redis 7.4.1
        // loses it on its replicas): the TTL follows it.
        let at = at.to_string();
        let argv = [
            &b"HPEXPIREAT"[..],
            key,
            at.as_bytes(),
            b"FIELDS",
            b"1",
            field,
        ];
        let db = ctx.client.db;
        let argv = argv.iter().map(|a| a.to_vec()).collect();
        ctx.srv.propagation.after.push((db, argv));
    }
    ctx.client.out.bulk(text.as_bytes());
}

/// HRANDFIELD key [count [WITHVALUES]]
fn hrandfield(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    if args.len() == 2 {
        expire_due(ctx, key, Which::Due(usize::MAX));
        let h = match read(ctx.srv, db, key, ctx.now_ms) {
            Read::WrongType => return ctx.error(err::WRONGTYPE),
            Read::Missing => return ctx.client.out.null(),
            Read::Found(h) => h.clone(),
        };
        use rand::Rng;
        let i = ctx.srv.rng.gen_range(0..h.len());
        ctx.client.out.bulk(h.nth(i).0);
        return;
    }
    let Some(count) = super::set::parse_range_long(ctx, args.get(2)) else {
        return;
    };
    let withvalues = match args.len() {
        3 => false,
        4 if is(args.get(3), "withvalues") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
                return ctx.error("ERR value is out of range");
            }
            true
        }
        _ => return ctx.error(err::SYNTAX),
    };
    expire_due(ctx, key, Which::Due(usize::MAX));
    let h = match read(ctx.srv, db, key, ctx.now_ms) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing => return ctx.client.out.array(0),
        Read::Found(h) => h.clone(),
    };
    if count == 0 {
        return ctx.client.out.array(0);
    }
    let size = h.len();
    // A listpack walks to a position: index its pairs once (a hashtable
    // finds a position in O(1), and may be large: no index for it).
    let pairs: Vec<(&[u8], &[u8])> = if h.encoding() == "hashtable" {
        Vec::new()
    } else {
        h.iter().collect()
    };
    let pair = |i: usize| if pairs.is_empty() { h.nth(i) } else { pairs[i] };
    let resp3 = ctx.client.out.proto == Protocol::Resp3;
    if count < 0 {
        // Repetitions allowed: `|count|` draws, a reply bounded in bytes
        // (see `set::reply_repeated_picks`).
        use rand::Rng;
        let max = ctx.srv.config.proto_max_bulk_len;
        let rng = &mut ctx.srv.rng;
        let n = count.unsigned_abs();
        let per_pick = 1 + withvalues as u64;
        let header_len = if withvalues && !resp3 { n * 2 } else { n };
        let min_bytes = super::set::MIN_BULK_BYTES * per_pick;
        return super::set::reply_repeated_picks(
            &mut ctx.client.out,
            max,
            n,
            header_len,
            min_bytes,
            |out| {
                let (f, v) = pair(rng.gen_range(0..size));
                if withvalues && resp3 {
                    out.array(2);
                }
                out.bulk(f);
                if withvalues {
                    out.bulk(v);
                }
            },
        );
    }
    let picks: Vec<usize> = if count as usize >= size {
        (0..size).collect()
    } else {
        rand::seq::index::sample(&mut ctx.srv.rng, size, count as usize).into_vec()
    };
    let out = &mut ctx.client.out;
    if withvalues && !resp3 {
        out.array(picks.len() * 2);
    } else {
        out.array(picks.len());
    }
    for i in picks {
        let (f, v) = pair(i);
        if withvalues && resp3 {
            out.array(2);
        }
        out.bulk(f);
        if withvalues {
            out.bulk(v);
        }
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES] (NOVALUES: Redis 7.4)
fn hscan(ctx: &mut Ctx, args: Args) {
    let Some(cursor) = super::keys::parse_cursor(args.get(2)) else {
        return ctx.error("ERR invalid cursor");
    };
    let db = ctx.client.db;
    let opts = parse_scan_options(&args, 3, ScanOf::Hash);
    let out = &mut ctx.client.out;
    // As Redis: the key is looked up (and its type checked) before an
    // error in the options is reported.
    let h = match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => return out.error(err::WRONGTYPE),
        Read::Missing => return reply_scan(out, 0, &[]),
        Read::Found(h) => h,
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => return out.error(e),
    };
    let mut items = Vec::new();
    let now = ctx.now_ms;
    let next = h.scan(cursor, opts.count, |f, v| {
        if opts.pattern.is_none_or(|p| glob_match(p, f)) && !h.is_due(f, now) {
            items.push(f.to_vec());
            if !opts.novalues {
                items.push(v.to_vec());
            }
        }
    });
    reply_scan(out, next, &items);
}
