//! The set family: membership, random pops and picks, the algebra
//! (SINTER/SUNION/SDIFF and their STORE forms, SINTERCARD), SSCAN.
//!
//! The data work is in `ferrokv_store::set` (intset/hashtable, conversion
//! at `set-max-intset-entries`). Random commands propagate their effect:
//! `SPOP` as `SREM` of the popped members (or `DEL` when it emptied the
//! set), as Redis does. RESP3 shapes are Redis 7.0's: SMEMBERS, the
//! algebra and SPOP with a count answer sets; SRANDMEMBER an array.
//!
//! # Hostile input
//!
//! Audited for work or memory a client could choose (issue #15; cases in
//! `tests/limits.rs`). `SRANDMEMBER`: `LONG_MIN` is out of range (Redis's
//! text), a positive count gives at most the set, and a negative one —
//! picks with repetition, a reply sized by the client alone — goes through
//! [`reply_repeated_picks`], bounded at `proto-max-bulk-len` bytes (Redis
//! 7.0 writes all `-LONG_MAX` picks and never answers). `SPOP` refuses a
//! negative count and pops at most the set. `SINTERCARD` refuses a
//! `numkeys` past the arguments; the algebra costs O(sum of the inputs).
//! `SSCAN` costs O(members) per call whatever `COUNT` (see `Dense::scan`).

use super::flags::*;
use super::keys::{parse_scan_options, reply_scan, ScanOf};
use super::{err, parse_int, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_NEW, NOTIFY_SET};
use ferrokv_resp::Args;
use ferrokv_store::pattern::glob_match;
use ferrokv_store::set::Set;
use ferrokv_store::{Value, NO_EXPIRE};
use rand::Rng;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("set")
        .keys(1, 1, 1)
        .since("1.0.0")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("sadd", -3, WRITE | DENYOOM | FAST, sadd).complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").doc("Adds one or more members to a set. Creates the key if it doesn't exist.", "key member [member ...]"),
    cmd("srem", -3, WRITE | FAST, srem).complexity("O(N) where N is the number of members to be removed.").doc("Removes one or more members from a set. Deletes the set if the last member was removed.", "key member [member ...]"),
    cmd("sismember", 3, READONLY | FAST, sismember).doc("Determines whether a member belongs to a set.", "key member"),
    cmd("smismember", -3, READONLY | FAST, smismember).since("6.2.0").complexity("O(N) where N is the number of elements being checked for membership").doc("Determines whether multiple members belong to a set.", "key member [member ...]"),
    cmd("smembers", 2, READONLY, smembers).complexity("O(N) where N is the set cardinality.").doc("Returns all members of a set.", "key"),
    cmd("scard", 2, READONLY | FAST, scard).doc("Returns the number of members in a set.", "key"),
    cmd("spop", -2, WRITE | FAST, spop).complexity("Without the count argument O(1), otherwise O(N) where N is the value of the passed count.").doc("Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "key [count]"),
    cmd("srandmember", -2, READONLY, srandmember).complexity("Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.").doc("Get one or multiple random members from a set", "key [count]"),
    cmd("smove", 4, WRITE | FAST, smove).keys(1, 2, 1).doc("Moves a member from one set to another.", "source destination member"),
    cmd("sinter", -2, READONLY, sinter).keys(1, -1, 1).complexity("O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.").doc("Returns the intersect of multiple sets.", "key [key ...]"),
    cmd("sintercard", -3, READONLY, sintercard).keys(0, 0, 0).since("7.0.0").complexity("O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.").doc("Returns the number of members of the intersect of multiple sets.", "numkeys key [key ...] [LIMIT limit]"),
    cmd("sunion", -2, READONLY, sunion).keys(1, -1, 1).complexity("O(N) where N is the total number of elements in all given sets.").doc("Returns the union of multiple sets.", "key [key ...]"),
    cmd("sdiff", -2, READONLY, sdiff).keys(1, -1, 1).complexity("O(N) where N is the total number of elements in all given sets.").doc("Returns the difference of multiple sets.", "key [key ...]"),
    cmd("sinterstore", -3, WRITE | DENYOOM, sinterstore).keys(1, -1, 1).complexity("O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.").doc("Stores the intersect of multiple sets in a key.", "destination key [key ...]"),
    cmd("sunionstore", -3, WRITE | DENYOOM, sunionstore).keys(1, -1, 1).complexity("O(N) where N is the total number of elements in all given sets.").doc("Stores the union of multiple sets in a key.", "destination key [key ...]"),
    cmd("sdiffstore", -3, WRITE | DENYOOM, sdiffstore).keys(1, -1, 1).complexity("O(N) where N is the total number of elements in all given sets.").doc("Stores the difference of multiple sets in a key.", "destination key [key ...]"),
    cmd("sscan", -3, READONLY, sscan).since("2.8.0").complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.").doc("Iterates over members of a set.", "key cursor [MATCH pattern] [COUNT count]"),
];

super::typed_lookups!(Set, Set);

/// Parses a count in `-LONG_MAX..=LONG_MAX` as Redis's
/// `getRangeLongFromObjectOrReply` (SRANDMEMBER, HRANDFIELD).
pub(super) fn parse_range_long(ctx: &mut Ctx, a: &[u8]) -> Option<i64> {
    let v = parse_int(ctx, a)?;
    if v == i64::MIN {
        ctx.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
        return None;
    }
    Some(v)
}

/// The error for a reply with repetition (a negative count) that would
/// pass `proto-max-bulk-len` bytes. Redis 7.0 has no such limit: it writes
/// every pick, so `SRANDMEMBER s -9223372036854775807` never returns and
/// takes the server's memory with it (redis/redis#11671).
pub(super) const REPLY_TOO_LARGE: &str =
    "ERR reply exceeds maximum allowed size (proto-max-bulk-len)";

/// Writes the reply of a negative count (`SRANDMEMBER`, `HRANDFIELD`,
/// `ZRANDMEMBER`): `picks` calls of `emit_one`, each writing one random
/// pick, under an array header of `header_len`. Its size is chosen by the
/// client, not by the data, so it is bounded in bytes: a count that could
/// not fit even at `min_pick_bytes` a pick is refused at once, and the
/// picks are written only while they stay within `max_bytes`; past it they
/// are taken back and the error replaces them. The header goes in front
/// once the picks are known to fit (one move of the reply).
pub(super) fn reply_repeated_picks(
    out: &mut crate::net::client::Reply,
    max_bytes: u64,
    picks: u64,
    header_len: u64,
    min_pick_bytes: u64,
    mut emit_one: impl FnMut(&mut crate::net::client::Reply),
) {
    if picks.saturating_mul(min_pick_bytes) > max_bytes {
        return out.error(REPLY_TOO_LARGE);
    }
    let start = out.buf.len();
    for _ in 0..picks {
        emit_one(out);
        if (out.buf.len() - start) as u64 > max_bytes {
            out.buf.truncate(start);
            out.buf.shrink_to(start.max(crate::net::client::READ_CHUNK));
            return out.error(REPLY_TOO_LARGE);
        }
    }
    let mut header = Vec::with_capacity(24);
    ferrokv_resp::encode::array(&mut header, header_len as usize);
    out.buf.splice(start..start, header);
}

/// The RESP size of the shortest bulk string (`$0\r\n\r\n`): a lower
/// bound of one pick's reply, for [`reply_repeated_picks`].
pub(super) const MIN_BULK_BYTES: u64 = 6;

/// SADD key member [member ...]
fn sadd(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let key = args.get(1);
    let max = ctx.srv.config.set_max_intset();
    let mut added = 0;
    match write(ctx.srv, db, key, ctx.now_ms) {
        Write::WrongType => return ctx.error(err::WRONGTYPE),
        Write::Found(s) => {
            for m in args.iter().skip(2) {
                added += s.insert(m, max) as i64;
            }
        }
        Write::Missing => {
            let mut s = Set::new();
            for m in args.iter().skip(2) {
                added += s.insert(m, max) as i64;
            }
            let lru = ctx.srv.lru_clock;
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Set(s), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
        }
    }
    ctx.modified(added as u64);
    if added > 0 {
        ctx.notify(NOTIFY_SET, "sadd", key);
    }
    ctx.client.out.int(added);
}

/// Removes members from the set at `key`, deleting the key when it
/// empties, and announces `event` (`srem`, `spop`) and the deletion.
/// Returns the number removed, or None after WRONGTYPE.
fn remove_members<'m>(
    ctx: &mut Ctx,
    event: &str,
    key: &[u8],
    members: impl Iterator<Item = &'m [u8]>,
) -> Option<usize> {
    let db = ctx.client.db;
    let (n, empty) = match write(ctx.srv, db, key, ctx.now_ms) {
        Write::WrongType => {
            ctx.error(err::WRONGTYPE);
            return None;
        }
        Write::Missing => return Some(0),
        Write::Found(s) => {
            let mut n = 0;
            for m in members {
                if s.remove(m) {
                    n += 1;
                    if s.is_empty() {
                        break;
                    }
                }
            }
            (n, s.is_empty())
        }
    };
    if n > 0 {
        ctx.notify(NOTIFY_SET, event, key);
    }
    if empty {
        ctx.srv.keyspace.dbs[db].remove(key);
        ctx.notify(NOTIFY_GENERIC, "del", key);
    }
    ctx.modified(n as u64);
    Some(n)
}

/// SREM key member [member ...]
fn srem(ctx: &mut Ctx, args: Args) {
    if let Some(n) = remove_members(ctx, "srem", args.get(1), args.iter().skip(2)) {
        ctx.client.out.int(n as i64);
    }
}

/// SISMEMBER key member
fn sismember(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => ctx.client.out.error(err::WRONGTYPE),
        Read::Found(s) => ctx.client.out.int(s.contains(args.get(2)) as i64),
        Read::Missing => ctx.client.out.int(0),
    }
}

/// SMISMEMBER key member [member ...]
fn smismember(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    let s = match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => return out.error(err::WRONGTYPE),
        Read::Found(s) => Some(s),
        Read::Missing => None,
    };
    out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        out.int(s.is_some_and(|s| s.contains(m)) as i64);
    }
}

/// Writes a whole set as a RESP3 set (an array in RESP2).
fn reply_members(out: &mut crate::net::client::Reply, s: &Set) {
    out.set(s.len());
    for m in s.iter() {
        match m {
            ferrokv_store::set::Member::Int(i) => out.bulk_int(i),
            ferrokv_store::set::Member::Bytes(b) => out.bulk(b),
        }
    }
}

/// SMEMBERS key
fn smembers(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => out.error(err::WRONGTYPE),
        Read::Found(s) => reply_members(out, s),
        Read::Missing => out.set(0),
    }
}

/// SCARD key
fn scard(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => ctx.client.out.error(err::WRONGTYPE),
        Read::Found(s) => ctx.client.out.int(s.len() as i64),
        Read::Missing => ctx.client.out.int(0),
    }
}

/// SPOP key [count]
fn spop(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 {
        return ctx.error(err::SYNTAX);
    }
    let db = ctx.client.db;
    let key = args.get(1);
    // Redis's `getPositiveLongFromObjectOrReply`: one message for a
    // negative number and for no number at all.
    let count = if args.len() == 3 {
        match ferrokv_resp::parse_i64(args.get(2)) {
            Some(c) if c >= 0 => Some(c as u64),
            _ => return ctx.error(err::POSITIVE),
        }
    } else {
        None
    };
    // A handle on the set (a reference count) while the random picks are
    // made; dropped before the set is changed, so nothing is copied.
    let s = match read_for_write(ctx.srv, db, key, ctx.now_ms) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing if count.is_some() => return ctx.client.out.set(0),
        Read::Missing => return ctx.client.out.null(),
        Read::Found(s) => s.clone(),
    };
    let size = s.len();
    let Some(count) = count else {
        let m = s.nth(ctx.srv.rng.gen_range(0..size)).to_vec();
        drop(s);
        remove_members(ctx, "spop", key, std::iter::once(&m[..]));
        ctx.rewrite(&[&b"SREM"[..], key, &m]);
        ctx.client.out.bulk(&m);
        return;
    };
    if count == 0 {
        return ctx.client.out.set(0);
    }
    if count as usize >= size {
        // The whole set: its members, then the key goes (propagated as DEL).
        reply_members(&mut ctx.client.out, &s);
        drop(s);
        ctx.srv.keyspace.dbs[db].remove(key);
        ctx.modified(1);
        ctx.notify(NOTIFY_SET, "spop", key);
        ctx.notify(NOTIFY_GENERIC, "del", key);
        ctx.rewrite(&[&b"DEL"[..], key]);
        return;
    }
    let picks = rand::seq::index::sample(&mut ctx.srv.rng, size, count as usize);
    let popped: Vec<Vec<u8>> = picks.iter().map(|i| s.nth(i).to_vec()).collect();
    drop(s);
    remove_members(ctx, "spop", key, popped.iter().map(|m| &m[..]));
    let mut srem: Vec<&[u8]> = Vec::with_capacity(popped.len() + 2);
    srem.push(b"SREM");
    srem.push(key);
    srem.extend(popped.iter().map(|m| &m[..]));
    ctx.rewrite(&srem);
    let out = &mut ctx.client.out;
    out.set(popped.len());
    for m in &popped {
        out.bulk(m);
    }
}

/// SRANDMEMBER key [count]
fn srandmember(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 {
        return ctx.error(err::SYNTAX);
    }
    let db = ctx.client.db;
    let count = if args.len() == 3 {
        let Some(c) = parse_range_long(ctx, args.get(2)) else {
            return;
        };
        Some(c)
    } else {
        None
    };
    let s = match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Missing if count.is_some() => return ctx.client.out.array(0),
        Read::Missing => return ctx.client.out.null(),
        Read::Found(s) => s.clone(),
    };
    let size = s.len();
    let Some(count) = count else {
        let i = ctx.srv.rng.gen_range(0..size);
        return s.nth(i).with_bytes(|b| ctx.client.out.bulk(b));
    };
    if count < 0 {
        let max = ctx.srv.config.proto_max_bulk_len;
        let rng = &mut ctx.srv.rng;
        let n = count.unsigned_abs();
        return reply_repeated_picks(&mut ctx.client.out, max, n, n, MIN_BULK_BYTES, |out| {
            s.nth(rng.gen_range(0..size)).with_bytes(|b| out.bulk(b))
        });
    }
    let picks: Vec<usize> = if count as usize >= size {
        (0..size).collect()
    } else {
        rand::seq::index::sample(&mut ctx.srv.rng, size, count as usize).into_vec()
    };
    let out = &mut ctx.client.out;
    out.array(picks.len());
    for i in picks {
        s.nth(i).with_bytes(|b| out.bulk(b));
    }
}

/// SMOVE source destination member
fn smove(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let (src, dst, member) = (args.get(1), args.get(2), args.get(3));
    let now = ctx.now_ms;
    let is_member = match read_for_write(ctx.srv, db, src, now) {
        Read::Missing => return ctx.client.out.int(0),
        Read::WrongType => return ctx.error(err::WRONGTYPE),
        Read::Found(s) => s.contains(member),
    };
    if let Read::WrongType = read_for_write(ctx.srv, db, dst, now) {
        return ctx.error(err::WRONGTYPE);
    }
    if src == dst || !is_member {
        return ctx.client.out.int(is_member as i64);
    }
    remove_members(ctx, "srem", src, std::iter::once(member));
    ctx.srv.touch_watched_key(db, src);
    let max = ctx.srv.config.set_max_intset();
    let added = match write(ctx.srv, db, dst, now) {
        Write::Found(s) => s.insert(member, max),
        _ => {
            let mut s = Set::new();
            s.insert(member, max);
            let lru = ctx.srv.lru_clock;
            ctx.srv.keyspace.dbs[db].upsert(dst, Value::Set(s), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", dst);
            true
        }
    };
    ctx.modified(1);
    if added {
        ctx.srv.touch_watched_key(db, dst);
        ctx.notify(NOTIFY_SET, "sadd", dst);
    }
    ctx.client.out.int(1);
}

/// Looks up every source key of the algebra commands: a handle per key
/// (None for a missing one), or None after WRONGTYPE (every key is checked
/// before anything is computed, as Redis does).
fn load_sets<'k>(ctx: &mut Ctx, keys: impl Iterator<Item = &'k [u8]>) -> Option<Vec<Option<Set>>> {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let mut sets = Vec::new();
    for k in keys {
        match read(ctx.srv, db, k, now) {
            Read::WrongType => {
                ctx.error(err::WRONGTYPE);
                return None;
            }
            Read::Missing => sets.push(None),
            Read::Found(s) => sets.push(Some(s.clone())),
        }
    }
    Some(sets)
}

/// The intersection, iterating the smallest set; stops at `limit` members
/// (0: no limit).
fn intersect(sets: &[Option<Set>], limit: usize, max_intset: usize) -> Set {
    let mut out = Set::new();
    if sets.iter().any(Option::is_none) {
        return out;
    }
    let mut sets: Vec<&Set> = sets.iter().flatten().collect();
    sets.sort_by_key(|s| s.len());
    for m in sets[0].iter() {
        let keep = m.with_bytes(|b| sets[1..].iter().all(|o| o.contains(b)));
        if keep {
            m.with_bytes(|b| out.insert(b, max_intset));
            if limit != 0 && out.len() >= limit {
                break;
            }
        }
    }
    out
}

fn union(sets: &[Option<Set>], max_intset: usize) -> Set {
    let mut out = Set::new();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            m.with_bytes(|b| out.insert(b, max_intset));
        }
    }
    out
}

fn difference(sets: &[Option<Set>], max_intset: usize) -> Set {
    let mut out = Set::new();
    let Some(Some(first)) = sets.first() else {
        return out;
    };
    for m in first.iter() {
        let keep = m.with_bytes(|b| sets[1..].iter().flatten().all(|o| !o.contains(b)));
        if keep {
            m.with_bytes(|b| out.insert(b, max_intset));
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

fn compute(sets: &[Option<Set>], op: Op, max_intset: usize) -> Set {
    match op {
        Op::Inter => intersect(sets, 0, max_intset),
        Op::Union => union(sets, max_intset),
        Op::Diff => difference(sets, max_intset),
    }
}

/// SINTER / SUNION / SDIFF: the result as a set reply.
fn algebra(ctx: &mut Ctx, args: Args, op: Op) {
    let Some(sets) = load_sets(ctx, args.iter().skip(1)) else {
        return;
    };
    let max = ctx.srv.config.set_max_intset();
    let result = compute(&sets, op, max);
    reply_members(&mut ctx.client.out, &result);
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE: the result replaces the
/// destination (its TTL goes too); an empty result deletes it.
fn algebra_store(ctx: &mut Ctx, args: Args, op: Op) {
    let Some(sets) = load_sets(ctx, args.iter().skip(2)) else {
        return;
    };
    let max = ctx.srv.config.set_max_intset();
    let result = compute(&sets, op, max);
    drop(sets);
    let db = ctx.client.db;
    let dst = args.get(1);
    let n = result.len();
    if n == 0 {
        if ctx.srv.exists(db, dst, ctx.now_ms) {
            ctx.srv.keyspace.dbs[db].remove(dst);
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "del", dst);
        }
    } else {
        let lru = ctx.srv.lru_clock;
        match ctx.srv.keyspace.dbs[db].upsert(dst, Value::Set(result), NO_EXPIRE, lru) {
            Some(old) => ctx.srv.drop_value(old),
            None => ctx.notify(NOTIFY_NEW, "new", dst),
        }
        ctx.modified(1);
        let event = match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        };
        ctx.notify(NOTIFY_SET, event, dst);
    }
    ctx.client.out.int(n as i64);
}

/// SINTER key [key ...]
fn sinter(ctx: &mut Ctx, args: Args) {
    algebra(ctx, args, Op::Inter)
}

/// SUNION key [key ...]
fn sunion(ctx: &mut Ctx, args: Args) {
    algebra(ctx, args, Op::Union)
}

/// SDIFF key [key ...]
fn sdiff(ctx: &mut Ctx, args: Args) {
    algebra(ctx, args, Op::Diff)
}

/// SINTERSTORE destination key [key ...]
fn sinterstore(ctx: &mut Ctx, args: Args) {
    algebra_store(ctx, args, Op::Inter)
}

/// SUNIONSTORE destination key [key ...]
fn sunionstore(ctx: &mut Ctx, args: Args) {
    algebra_store(ctx, args, Op::Union)
}

/// SDIFFSTORE destination key [key ...]
fn sdiffstore(ctx: &mut Ctx, args: Args) {
    algebra_store(ctx, args, Op::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
fn sintercard(ctx: &mut Ctx, args: Args) {
    let numkeys = match ferrokv_resp::parse_i64(args.get(1)) {
        Some(n) if n > 0 => n as usize,
        _ => return ctx.error("ERR numkeys should be greater than 0"),
    };
    if numkeys > args.len() - 2 {
        return ctx.error("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = 0usize;
    let mut i = 2 + numkeys;
    while i < args.len() {
        if super::is(args.get(i), "limit") && i + 1 < args.len() {
            match ferrokv_resp::parse_i64(args.get(i + 1)) {
                Some(l) if l >= 0 => limit = l as usize,
                _ => return ctx.error("ERR LIMIT can't be negative"),
            }
            i += 2;
        } else {
            return ctx.error(err::SYNTAX);
        }
    }
    let Some(sets) = load_sets(ctx, args.iter().skip(2).take(numkeys)) else {
        return;
    };
    let max = ctx.srv.config.set_max_intset();
    let n = intersect(&sets, limit, max).len();
    ctx.client.out.int(n as i64);
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
fn sscan(ctx: &mut Ctx, args: Args) {
    let Some(cursor) = super::keys::parse_cursor(args.get(2)) else {
        return ctx.error("ERR invalid cursor");
    };
    let db = ctx.client.db;
    let opts = parse_scan_options(&args, 3, ScanOf::Elements);
    let out = &mut ctx.client.out;
    // As Redis: the key is looked up (and its type checked) before an
    // error in the options is reported.
    let s = match read(ctx.srv, db, args.get(1), ctx.now_ms) {
        Read::WrongType => return out.error(err::WRONGTYPE),
        Read::Missing => return reply_scan(out, 0, &[]),
        Read::Found(s) => s,
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => return out.error(e),
    };
    let mut items = Vec::new();
    let next = s.scan(cursor, opts.count, |m| {
        m.with_bytes(|b| {
            if opts.pattern.is_none_or(|p| glob_match(p, b)) {
                items.push(b.to_vec());
            }
        })
    });
    reply_scan(out, next, &items);
}
