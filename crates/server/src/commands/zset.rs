//! The sorted set family: ZADD and friends, ranges by rank, score and lex,
//! pops, set algebra (ZUNION/ZINTER/ZDIFF and their STORE forms),
//! ZRANDMEMBER and ZSCAN, with Redis 7.0's replies and error texts.
//!
//! The data structure is `ferrokv_store::zset` (listpack or skiplist). Every
//! range command turns its bounds into a *rank interval* once and then reads,
//! counts or removes that interval, so the three kinds of range share one
//! code path. Scores are printed as Redis 7.0 prints doubles (`%.17g`).
//!
//! # Hostile input
//!
//! Audited for work or memory a client could choose (issue #15; cases in
//! `tests/limits.rs`). `ZRANDMEMBER` as `HRANDFIELD` (Redis's errors for
//! `LONG_MIN` and `WITHSCORES` outside `±LONG_MAX/2`, negative counts
//! bounded in bytes by `set::reply_repeated_picks`). `LIMIT offset count`
//! takes any `i64`: the rank interval is found in O(log n) and clamped, so
//! the walk is the size of the reply; `ZRANGESTORE` allocates only for the
//! interval. Pops stop at the set's size. `numkeys` past the arguments is
//! a syntax error before `WEIGHTS` is allocated (by `numkeys`, so by the
//! arguments). `ZINCRBY`/`ZADD INCR` to NaN are refused. `ZSCAN` walks at
//! most `COUNT` live arena slots of a skiplist (and the freed ones between).

use super::flags::*;
use super::{err, is, parse_f64, parse_int, CommandSpec, Ctx};
use crate::net::client::Reply;
use crate::notify::{NOTIFY_GENERIC, NOTIFY_NEW, NOTIFY_ZSET};
use ferrokv_resp::encode::Protocol;
use ferrokv_resp::Args;
use ferrokv_store::pattern::glob_match;
use ferrokv_store::zset::{write_score, LexBound, ScoreRange, ZSet, ZsetLimits};
use ferrokv_store::{Value, ValueRef, NO_EXPIRE};
use rand::Rng;
use std::sync::Arc;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("sorted-set")
        .keys(1, 1, 1)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("zadd", -4, WRITE | DENYOOM | FAST, zadd).since("1.2.0").complexity("O(log(N)) for each item added, where N is the number of elements in the sorted set.").doc("Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]"),
    cmd("zincrby", 4, WRITE | DENYOOM | FAST, zincrby).since("1.2.0").complexity("O(log(N)) where N is the number of elements in the sorted set.").doc("Increments the score of a member in a sorted set.", "key increment member"),
    cmd("zrem", -3, WRITE | FAST, zrem).since("1.2.0").complexity("O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.").doc("Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "key member [member ...]"),
    cmd("zscore", 3, READONLY | FAST, zscore).since("1.2.0").doc("Returns the score of a member in a sorted set.", "key member"),
    cmd("zmscore", -3, READONLY | FAST, zmscore).since("6.2.0").complexity("O(N) where N is the number of members being requested.").doc("Returns the score of one or more members in a sorted set.", "key member [member ...]"),
    cmd("zcard", 2, READONLY | FAST, zcard).since("1.2.0").doc("Returns the number of members in a sorted set.", "key"),
    cmd("zcount", 4, READONLY | FAST, zcount).since("2.0.0").complexity("O(log(N)) with N being the number of elements in the sorted set.").doc("Returns the count of members in a sorted set that have scores within a range.", "key min max"),
    cmd("zlexcount", 4, READONLY | FAST, zlexcount).since("2.8.9").complexity("O(log(N)) with N being the number of elements in the sorted set.").doc("Returns the number of members in a sorted set within a lexicographical range.", "key min max"),
    cmd("zrange", -4, READONLY, zrange).since("1.2.0").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.").doc("Returns members in a sorted set within a range of indexes.", "key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]"),
    cmd("zrangestore", -5, WRITE | DENYOOM, zrangestore).keys(1, 2, 1).since("6.2.0").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.").doc("Stores a range of members from sorted set in a key.", "dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]"),
    cmd("zrangebyscore", -4, READONLY, zrangebyscore).since("1.0.5").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned.").doc("Returns members in a sorted set within a range of scores.", "key min max [WITHSCORES] [LIMIT offset count]"),
    cmd("zrevrangebyscore", -4, READONLY, zrevrangebyscore).since("2.2.0").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned.").doc("Returns members in a sorted set within a range of scores in reverse order.", "key max min [WITHSCORES] [LIMIT offset count]"),
    cmd("zrangebylex", -4, READONLY, zrangebylex).since("2.8.9").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned.").doc("Returns members in a sorted set within a lexicographical range.", "key min max [LIMIT offset count]"),
    cmd("zrevrangebylex", -4, READONLY, zrevrangebylex).since("2.8.9").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned.").doc("Returns members in a sorted set within a lexicographical range in reverse order.", "key max min [LIMIT offset count]"),
    cmd("zrevrange", -4, READONLY, zrevrange).since("1.2.0").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.").doc("Returns members in a sorted set within a range of indexes in reverse order.", "key start stop [WITHSCORES]"),
    cmd("zrank", -3, READONLY | FAST, zrank).since("2.0.0").complexity("O(log(N))").doc("Returns the index of a member in a sorted set ordered by ascending scores.", "key member [WITHSCORE]"),
    cmd("zrevrank", -3, READONLY | FAST, zrevrank).since("2.0.0").complexity("O(log(N))").doc("Returns the index of a member in a sorted set ordered by descending scores.", "key member [WITHSCORE]"),
    cmd("zremrangebyrank", 4, WRITE, zremrangebyrank).since("2.0.0").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.").doc("Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", "key start stop"),
    cmd("zremrangebyscore", 4, WRITE, zremrangebyscore).since("1.2.0").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.").doc("Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", "key min max"),
    cmd("zremrangebylex", 4, WRITE, zremrangebylex).since("2.8.9").complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.").doc("Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", "key min max"),
    cmd("zpopmin", -2, WRITE | FAST, zpopmin).since("5.0.0").complexity("O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.").doc("Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "key [count]"),
    cmd("zpopmax", -2, WRITE | FAST, zpopmax).since("5.0.0").complexity("O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.").doc("Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "key [count]"),
    cmd("zmpop", -4, WRITE, zmpop).keys(0, 0, 0).since("7.0.0").complexity("O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.").doc("Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", "numkeys key [key ...] MIN|MAX [COUNT count]"),
    cmd("bzpopmin", -3, WRITE | NOSCRIPT | FAST | BLOCKING, bzpopmin).keys(1, -2, 1).since("5.0.0").complexity("O(log(N)) with N being the number of elements in the sorted set.").doc("Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "key [key ...] timeout"),
    cmd("bzpopmax", -3, WRITE | NOSCRIPT | FAST | BLOCKING, bzpopmax).keys(1, -2, 1).since("5.0.0").complexity("O(log(N)) with N being the number of elements in the sorted set.").doc("Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.", "key [key ...] timeout"),
    cmd("bzmpop", -5, WRITE | BLOCKING, bzmpop).keys(0, 0, 0).since("7.0.0").complexity("O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.").doc("Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "timeout numkeys key [key ...] MIN|MAX [COUNT count]"),
    cmd("zunionstore", -4, WRITE | DENYOOM, zunionstore).since("2.0.0").complexity("O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.").doc("Stores the union of multiple sorted sets in a key.", "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX]"),
    cmd("zinterstore", -4, WRITE | DENYOOM, zinterstore).since("2.0.0").complexity("O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.").doc("Stores the intersect of multiple sorted sets in a key.", "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX]"),
    cmd("zdiffstore", -4, WRITE | DENYOOM, zdiffstore).since("6.2.0").complexity("O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.").doc("Stores the difference of multiple sorted sets in a key.", "destination numkeys key [key ...]"),
    cmd("zunion", -3, READONLY, zunion).keys(0, 0, 0).since("6.2.0").complexity("O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.").doc("Returns the union of multiple sorted sets.", "numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]"),
    cmd("zintercard", -3, READONLY, zintercard).keys(0, 0, 0).since("7.0.0").complexity("O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.").doc("Returns the number of members of the intersect of multiple sorted sets.", "numkeys key [key ...] [LIMIT limit]"),
    cmd("zinter", -3, READONLY, zinter).keys(0, 0, 0).since("6.2.0").complexity("O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.").doc("Returns the intersect of multiple sorted sets.", "numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]"),
    cmd("zdiff", -3, READONLY, zdiff).keys(0, 0, 0).since("6.2.0").complexity("O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.").doc("Returns the difference between multiple sorted sets.", "numkeys key [key ...] [WITHSCORES]"),
    cmd("zrandmember", -2, READONLY, zrandmember).since("6.2.0").complexity("O(N) where N is the number of members returned").doc("Returns one or more random members from a sorted set.", "key [count [WITHSCORES]]"),
    cmd("zscan", -3, READONLY, zscan).since("2.8.0").complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.").doc("Iterates over members and scores of a sorted set.", "key cursor [MATCH pattern] [COUNT count]"),
];

const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";
const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";

fn limits(ctx: &Ctx) -> ZsetLimits {
    ZsetLimits {
        max_listpack_entries: ctx.srv.config.zset_max_listpack_entries as usize,
        max_listpack_value: ctx.srv.config.zset_max_listpack_value as usize,
    }
}

/// Writes a score as Redis's `addReplyDouble`: a bulk string in RESP2, a
/// double in RESP3, `%.17g` text either way.
#[inline]
pub fn reply_score(out: &mut Reply, v: f64) {
    let start = out.buf.len();
    match out.proto {
        Protocol::Resp2 => {
            // Format after a placeholder header, then fix the header up:
            // no temporary allocation on the hot path.
            out.buf.extend_from_slice(b"$00\r\n");
            let body = out.buf.len();
            write_score(&mut out.buf, v);
            let len = out.buf.len() - body;
            if len < 100 {
                out.buf[start + 1] = b'0' + (len / 10) as u8;
                out.buf[start + 2] = b'0' + (len % 10) as u8;
                if len < 10 {
                    out.buf.remove(start + 1);
                }
            } else {
                let text = out.buf.split_off(body);
                out.buf.truncate(start);
                out.bulk(&text);
                return;
            }
            out.buf.extend_from_slice(b"\r\n");
        }
        Protocol::Resp3 => {
            out.buf.push(b',');
            write_score(&mut out.buf, v);
            out.buf.extend_from_slice(b"\r\n");
        }
    }
}

/// A zset looked up for reading, with the reply buffer borrowed beside
/// it; `Err` after replying WRONGTYPE.
type Read<'a> = Result<(Option<&'a ZSet>, &'a mut Reply), ()>;

fn read_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Read<'a> {
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    match ctx.srv.lookup_read(db, key, ctx.now_ms) {
        None => Ok((None, out)),
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Ok((Some(z), out)),
            _ => {
                out.error(err::WRONGTYPE);
                Err(())
            }
        },
    }
}

type Write<'a> = Result<(Option<&'a mut ZSet>, &'a mut Reply), ()>;

/// A zset looked up for writing (copy-on-write if a snapshot shares it).
fn write_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Write<'a> {
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => Ok((None, out)),
        Some(e) => match e.value_mut() {
            Some(Value::ZSet(z)) => Ok((Some(Arc::make_mut(z)), out)),
            _ => {
                out.error(err::WRONGTYPE);
                Err(())
            }
        },
    }
}

/// Deletes `key` (a zset left empty by a removal, or a store destination
/// whose result is empty), announcing `del`.
fn delete_key(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.client.db;
    if let Some(e) = ctx.srv.keyspace.dbs[db].remove(key) {
        ctx.srv.drop_value(e);
    }
    ctx.notify(NOTIFY_GENERIC, "del", key);
}

/// Stores `z` under `key`, replacing any value and its TTL (`setKey`);
/// a key that did not exist is announced as `new`.
fn store_key(ctx: &mut Ctx, key: &[u8], z: ZSet) {
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    // Lazy expiry first, so an expired old value counts as absent.
    let existed = ctx.srv.lookup_write(db, key, ctx.now_ms).is_some();
    if let Some(old) =
        ctx.srv.keyspace.dbs[db].upsert(key, Value::ZSet(Arc::new(z)), NO_EXPIRE, lru)
    {
        ctx.srv.drop_value(old);
    }
    if !existed {
        ctx.notify(NOTIFY_NEW, "new", key);
    }
}

// ---------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------

/// C's `strtod` over the whole argument (as `zslParseRange` uses it): an
/// empty string is 0, leading spaces are skipped, out-of-range values
/// saturate to ±inf or 0, NaN is refused.
fn strtod_all(s: &[u8]) -> Option<f64> {
    if s.is_empty() {
        return Some(0.0);
    }
    let t = s.trim_ascii_start();
    if t.is_empty() || t.len() != s.len() && t.is_empty() {
        return None;
    }
    let text = std::str::from_utf8(t).ok()?;
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if unsigned.starts_with("nan") {
        return None;
    }
    if unsigned.starts_with("0x") {
        return parse_f64(t).or_else(|| {
            // Hex out of range: saturate as strtod does.
            let neg = lower.starts_with('-');
            unsigned[2..]
                .bytes()
                .all(|c| c.is_ascii_hexdigit() || c == b'.' || c == b'p' || c == b'+' || c == b'-')
                .then_some(if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                })
        });
    }
    match unsigned {
        "inf" | "infinity" => {
            return Some(if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        _ => {}
    }
    if !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    text.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// Redis's `zslParseRange`: `(x` exclusive, `-inf`/`+inf`.
fn parse_score_range(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
    let one = |a: &[u8]| -> Option<(f64, bool)> {
        match a.first() {
            Some(b'(') => strtod_all(&a[1..]).map(|v| (v, true)),
            _ => strtod_all(a).map(|v| (v, false)),
        }
    };
    let (min, minex) = one(min)?;
    let (max, maxex) = one(max)?;
    Some(ScoreRange {
        min,
        max,
        minex,
        maxex,
    })
}

/// Redis's `zslParseLexRangeItem`: `-`, `+`, `[m`, `(m`.
fn parse_lex_bound(a: &[u8]) -> Option<LexBound<'_>> {
    match a.first()? {
        b'+' if a.len() == 1 => Some(LexBound::PosInf),
        b'-' if a.len() == 1 => Some(LexBound::NegInf),
        b'(' => Some(LexBound::Excl(&a[1..])),
        b'[' => Some(LexBound::Incl(&a[1..])),
        _ => None,
    }
}

fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Option<(LexBound<'a>, LexBound<'a>)> {
    Some((parse_lex_bound(min)?, parse_lex_bound(max)?))
}

/// A rank range `start..=end` (negative from the end) as a clamped
/// half-open interval, as Redis sanitizes ZRANGE/ZREMRANGEBYRANK indexes.
fn rank_interval(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize + 1))
}

// ---------------------------------------------------------------------------
// ZADD / ZINCRBY
// ---------------------------------------------------------------------------

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What `zsetAdd` did for one element.
enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// Present with the same resulting score.
    Same(f64),
    Nop,
    Nan,
}

/// Redis's `zsetAdd` for one member.
fn zset_add(z: &mut ZSet, member: &[u8], score: f64, f: AddFlags, lim: &ZsetLimits) -> AddOutcome {
    match z.score(member) {
        Some(cur) => {
            if f.nx {
                return AddOutcome::Nop;
            }
            let mut score = score;
            if f.incr {
                score += cur;
                if score.is_nan() {
                    return AddOutcome::Nan;
                }
            }
            if (f.lt && score >= cur) || (f.gt && score <= cur) {
                return AddOutcome::Nop;
            }
            if score != cur {
                z.insert(member, score, lim);
                AddOutcome::Updated(score)
            } else {
                AddOutcome::Same(score)
            }
        }
        None if !f.xx => {
            z.insert(member, score, lim);
            AddOutcome::Added(score)
        }
        None => AddOutcome::Nop,
    }
}

#[derive(Default)]
struct AddTotals {
    added: i64,
    updated: i64,
    processed: i64,
    last: f64,
    nan: bool,
}

/// ZADD's loop over its pairs; stops at a NaN result.
fn apply_adds<'a>(
    z: &mut ZSet,
    pairs: usize,
    score_of: &dyn Fn(usize) -> f64,
    member: &dyn Fn(usize) -> &'a [u8],
    f: AddFlags,
    lim: &ZsetLimits,
) -> AddTotals {
    let mut t = AddTotals::default();
    for p in 0..pairs {
        match zset_add(z, member(p), score_of(p), f, lim) {
            AddOutcome::Added(s) => {
                t.added += 1;
                t.processed += 1;
                t.last = s;
            }
            AddOutcome::Updated(s) => {
                t.updated += 1;
                t.processed += 1;
                t.last = s;
            }
            AddOutcome::Same(s) => {
                t.processed += 1;
                t.last = s;
            }
            AddOutcome::Nop => {}
            AddOutcome::Nan => {
                t.nan = true;
                break;
            }
        }
    }
    t
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
/// (GEOADD runs it too, with the coordinates turned into scores).
pub(super) fn zadd(ctx: &mut Ctx, args: Args) {
    zadd_generic(ctx, args, AddFlags::default())
}

/// ZINCRBY key increment member
fn zincrby(ctx: &mut Ctx, args: Args) {
    zadd_generic(
        ctx,
        args,
        AddFlags {
            incr: true,
            ..Default::default()
        },
    )
}

fn zadd_generic(ctx: &mut Ctx, args: Args, mut f: AddFlags) {
    let key = args.get(1);
    let mut i = 2;
    if !f.incr {
        while i < args.len() {
            let a = args.get(i);
            if is(a, "nx") {
                f.nx = true;
            } else if is(a, "xx") {
                f.xx = true;
            } else if is(a, "ch") {
                f.ch = true;
            } else if is(a, "incr") {
                f.incr = true;
            } else if is(a, "gt") {
                f.gt = true;
            } else if is(a, "lt") {
                f.lt = true;
            } else {
                break;
            }
            i += 1;
        }
    }
    let pairs = args.len() - i;
    if pairs == 0 || !pairs.is_multiple_of(2) {
        ctx.error(err::SYNTAX);
        return;
    }
    let pairs = pairs / 2;
    if f.nx && f.xx {
        ctx.error("ERR XX and NX options at the same time are not compatible");
        return;
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        ctx.error("ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if f.incr && pairs > 1 {
        ctx.error("ERR INCR option supports a single increment-element pair");
        return;
    }
    // All scores are checked before anything changes.
    let mut scores = [0f64; 8];
    let mut many = Vec::new();
    for p in 0..pairs {
        let Some(s) = parse_f64(args.get(i + 2 * p)) else {
            ctx.error(err::NOT_FLOAT);
            return;
        };
        if pairs <= scores.len() {
            scores[p] = s;
        } else {
            many.push(s);
        }
    }
    let score_of = |p: usize| {
        if pairs <= 8 {
            scores[p]
        } else {
            many[p]
        }
    };
    let lim = limits(ctx);
    let members = |p: usize| args.get(i + 2 * p + 1);
    let res = match write_zset(ctx, key) {
        Err(()) => return,
        Ok((Some(z), _)) => apply_adds(z, pairs, &score_of, &members, f, &lim),
        Ok((None, _)) => {
            if f.xx {
                if f.incr {
                    ctx.client.out.null();
                } else {
                    ctx.client.out.int(0);
                }
                return;
            }
            // Redis 7.0 picks the encoding from the first member alone.
            let mut z = if lim.max_listpack_entries == 0
                || lim.max_listpack_value < args.get(i + 1).len()
            {
                ZSet::new_skiplist()
            } else {
                ZSet::new()
            };
            let res = apply_adds(&mut z, pairs, &score_of, &members, f, &lim);
            if !z.is_empty() {
                store_key(ctx, key, z);
            }
            res
        }
    };
    let AddTotals {
        added,
        updated,
        processed,
        last,
        nan,
    } = res;
    ctx.modified((added + updated) as u64);
    if added + updated > 0 {
        ctx.notify(NOTIFY_ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if nan {
        ctx.error(NAN_SCORE);
    } else if f.incr {
        if processed > 0 {
            reply_score(&mut ctx.client.out, last);
        } else {
            ctx.client.out.null();
        }
    } else {
        ctx.client
            .out
            .int(if f.ch { added + updated } else { added });
    }
}

// ---------------------------------------------------------------------------
// Point reads and removal
// ---------------------------------------------------------------------------

/// ZREM key member [member ...]
fn zrem(ctx: &mut Ctx, args: Args) {
    let key = args.get(1);
    let z = match write_zset(ctx, key) {
        Err(()) => return,
        Ok((None, out)) => {
            out.int(0);
            return;
        }
        Ok((Some(z), _)) => z,
    };
    let mut n = 0;
    for m in args.iter().skip(2) {
        if z.remove(m).is_some() {
            n += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    let empty = z.is_empty();
    if n > 0 {
        ctx.notify(NOTIFY_ZSET, "zrem", key);
    }
    if empty {
        delete_key(ctx, key);
    }
    ctx.modified(n as u64);
    ctx.client.out.int(n);
}

/// ZSCORE key member
fn zscore(ctx: &mut Ctx, args: Args) {
    let Ok((z, out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    match z.and_then(|z| z.score(args.get(2))) {
        Some(s) => reply_score(out, s),
        None => out.null(),
    }
}

/// ZMSCORE key member [member ...]
fn zmscore(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let z = match ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) {
        None => None,
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Some(z),
            _ => {
                ctx.client.out.error(err::WRONGTYPE);
                return;
            }
        },
    };
    let out = &mut ctx.client.out;
    out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match z.and_then(|z| z.score(m)) {
            Some(s) => reply_score(out, s),
            None => out.null(),
        }
    }
}

/// ZCARD key
fn zcard(ctx: &mut Ctx, args: Args) {
    let Ok((z, out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    out.int(z.map_or(0, |z| z.len()) as i64);
}

/// ZCOUNT key min max
fn zcount(ctx: &mut Ctx, args: Args) {
    let Some(r) = parse_score_range(args.get(2), args.get(3)) else {
        ctx.error(NOT_FLOAT_RANGE);
        return;
    };
    let Ok((z, out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    let n = z.map_or(0, |z| {
        let (a, b) = z.score_range_ranks(&r);
        b - a
    });
    out.int(n as i64);
}

/// ZLEXCOUNT key min max
fn zlexcount(ctx: &mut Ctx, args: Args) {
    let Some((min, max)) = parse_lex_range(args.get(2), args.get(3)) else {
        ctx.error(NOT_LEX_RANGE);
        return;
    };
    let Ok((z, out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    let n = z.map_or(0, |z| {
        let (a, b) = z.lex_range_ranks(&min, &max);
        b - a
    });
    out.int(n as i64);
}

/// ZRANK key member [WITHSCORE] (WITHSCORE: Redis 7.2)
fn zrank(ctx: &mut Ctx, args: Args) {
    rank_generic(ctx, args, false)
}

/// ZREVRANK key member [WITHSCORE] (WITHSCORE: Redis 7.2)
fn zrevrank(ctx: &mut Ctx, args: Args) {
    rank_generic(ctx, args, true)
}

/// Redis 7.2's `zrankGenericCommand`: the option is checked before the
/// key; with WITHSCORE a missing key or member is a null array and a hit
/// `[rank, score]`.
fn rank_generic(ctx: &mut Ctx, args: Args, rev: bool) {
    let withscore = match args.len() {
        3 => false,
        4 if is(args.get(3), "withscore") => true,
        4 => return ctx.error(err::SYNTAX),
        _ => return ctx.wrong_args(if rev { "zrevrank" } else { "zrank" }),
    };
    let Ok((z, out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    let hit = z.and_then(|z| {
        z.rank(args.get(2))
            .map(|(r, score)| (if rev { z.len() - 1 - r } else { r }, score))
    });
    match (hit, withscore) {
        (Some((r, _)), false) => out.int(r as i64),
        (Some((r, score)), true) => {
            out.array(2);
            out.int(r as i64);
            out.double(score);
        }
        (None, false) => out.null(),
        (None, true) => out.null_array(),
    }
}

// ---------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum RangeKind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Where a range's result goes: the client, or a destination key.
enum Sink {
    Client { withscores: bool },
    Store,
}

/// Redis's `zrangeGenericCommand`: `first` is the index of the source key;
/// `kind`/`rev` preset by the legacy commands (ZRANGEBYSCORE, ZREVRANGE, ...).
fn zrange_generic(
    ctx: &mut Ctx,
    args: Args,
    first: usize,
    store: bool,
    kind: RangeKind,
    rev: Option<bool>,
) {
    let mut kind = kind;
    let mut dir = rev;
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = first + 3;
    while j < args.len() {
        let a = args.get(j);
        let left = args.len() - j - 1;
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            let Some(o) = parse_int(ctx, args.get(j + 1)) else {
                return;
            };
            let Some(l) = parse_int(ctx, args.get(j + 2)) else {
                return;
            };
            offset = o;
            limit = l;
            j += 2;
        } else if dir.is_none() && is(a, "rev") {
            dir = Some(true);
        } else if kind == RangeKind::Auto && is(a, "bylex") {
            kind = RangeKind::Lex;
        } else if kind == RangeKind::Auto && is(a, "byscore") {
            kind = RangeKind::Score;
        } else {
            ctx.error(err::SYNTAX);
            return;
        }
        j += 1;
    }
    let rev = dir.unwrap_or(false);
    if kind == RangeKind::Auto {
        kind = RangeKind::Rank;
    }
    if limit != -1 && kind == RangeKind::Rank {
        ctx.error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return;
    }
    if withscores && kind == RangeKind::Lex {
        ctx.error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    let (mut lo, mut hi) = (args.get(first + 1), args.get(first + 2));
    if rev && kind != RangeKind::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    enum Parsed<'a> {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexBound<'a>, LexBound<'a>),
    }
    let parsed = match kind {
        RangeKind::Rank | RangeKind::Auto => {
            let Some(s) = parse_int(ctx, lo) else { return };
            let Some(e) = parse_int(ctx, hi) else { return };
            Parsed::Rank(s, e)
        }
        RangeKind::Score => match parse_score_range(lo, hi) {
            Some(r) => Parsed::Score(r),
            None => {
                ctx.error(NOT_FLOAT_RANGE);
                return;
            }
        },
        RangeKind::Lex => match parse_lex_range(lo, hi) {
            Some((a, b)) => Parsed::Lex(a, b),
            None => {
                ctx.error(NOT_LEX_RANGE);
                return;
            }
        },
    };
    let sink = if store {
        Sink::Store
    } else {
        Sink::Client { withscores }
    };
    let src = args.get(first);
    let lim = limits(ctx);
    let (z, out) = match read_zset(ctx, src) {
        Err(()) => return,
        Ok(r) => r,
    };
    // The rank interval (ascending ranks) and the order to walk it.
    let interval = z.and_then(|z| {
        let len = z.len();
        match parsed {
            Parsed::Rank(s, e) => {
                rank_interval(s, e, len).map(|(a, b)| if rev { (len - b, len - a) } else { (a, b) })
            }
            Parsed::Score(r) => Some(apply_limit(
                z.score_range_ranks(&r),
                offset,
                limit,
                rev,
                len,
            )),
            Parsed::Lex(min, max) => Some(apply_limit(
                z.lex_range_ranks(&min, &max),
                offset,
                limit,
                rev,
                len,
            )),
        }
    });
    let (from, to) = interval.unwrap_or((0, 0));
    match sink {
        Sink::Client { withscores } => {
            let n = to - from;
            let resp3 = out.proto == Protocol::Resp3;
            out.array(if withscores && !resp3 { n * 2 } else { n });
            if let Some(z) = z {
                z.visit_ranks(from, to, rev, |m, s| {
                    if withscores && resp3 {
                        out.array(2);
                    }
                    out.bulk(m);
                    if withscores {
                        reply_score(out, s);
                    }
                });
            }
        }
        Sink::Store => {
            let mut pairs: Vec<(Vec<u8>, f64)> = Vec::with_capacity(to - from);
            if let Some(z) = z {
                z.visit_ranks(from, to, rev, |m, s| pairs.push((m.to_vec(), s)));
            }
            let dst = args.get(1);
            store_result(ctx, dst, "zrangestore", pairs, &lim);
        }
    }
}

/// Applies `LIMIT offset count` to a rank interval of matches, walked
/// ascending or (`rev`) descending, as Redis's range walks do: a negative
/// offset yields nothing, a negative count means "all".
fn apply_limit(
    (from, to): (usize, usize),
    offset: i64,
    limit: i64,
    rev: bool,
    len: usize,
) -> (usize, usize) {
    if offset < 0 || (offset > 0 && offset as usize >= len) {
        return (0, 0);
    }
    let n = to - from;
    let skip = (offset as usize).min(n);
    let take = if limit < 0 {
        n - skip
    } else {
        (limit as usize).min(n - skip)
    };
    if rev {
        (to - skip - take, to - skip)
    } else {
        (from + skip, from + skip + take)
    }
}

/// Stores a result under `dst` in the encoding its size calls for, or
/// deletes `dst` when it is empty; replies with the cardinality.
fn store_result(
    ctx: &mut Ctx,
    dst: &[u8],
    event: &str,
    pairs: Vec<(Vec<u8>, f64)>,
    lim: &ZsetLimits,
) {
    let n = pairs.len();
    if n == 0 {
        let db = ctx.client.db;
        let existed = ctx.srv.exists(db, dst, ctx.now_ms);
        if existed {
            delete_key(ctx, dst);
            ctx.modified(1);
        }
        ctx.client.out.int(0);
        return;
    }
    let max_member = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let z = ZSet::from_pairs(
        pairs.iter().map(|(m, s)| (m.as_slice(), *s)),
        n,
        max_member,
        lim,
    );
    store_key(ctx, dst, z);
    ctx.notify(NOTIFY_ZSET, event, dst);
    ctx.modified(1);
    ctx.client.out.int(n as i64);
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
fn zrange(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 1, false, RangeKind::Auto, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
fn zrangestore(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 2, true, RangeKind::Auto, None)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
fn zrangebyscore(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 1, false, RangeKind::Score, Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
fn zrevrangebyscore(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 1, false, RangeKind::Score, Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
fn zrangebylex(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 1, false, RangeKind::Lex, Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
fn zrevrangebylex(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 1, false, RangeKind::Lex, Some(true))
}

/// ZREVRANGE key start stop [WITHSCORES]
fn zrevrange(ctx: &mut Ctx, args: Args) {
    zrange_generic(ctx, args, 1, false, RangeKind::Rank, Some(true))
}

/// ZREMRANGEBYRANK key start stop
fn zremrangebyrank(ctx: &mut Ctx, args: Args) {
    let Some(s) = parse_int(ctx, args.get(2)) else {
        return;
    };
    let Some(e) = parse_int(ctx, args.get(3)) else {
        return;
    };
    remove_range(ctx, args.get(1), "zremrangebyrank", |z| {
        rank_interval(s, e, z.len()).unwrap_or((0, 0))
    })
}

/// ZREMRANGEBYSCORE key min max
fn zremrangebyscore(ctx: &mut Ctx, args: Args) {
    let Some(r) = parse_score_range(args.get(2), args.get(3)) else {
        ctx.error(NOT_FLOAT_RANGE);
        return;
    };
    remove_range(ctx, args.get(1), "zremrangebyscore", |z| {
        z.score_range_ranks(&r)
    })
}

/// ZREMRANGEBYLEX key min max
fn zremrangebylex(ctx: &mut Ctx, args: Args) {
    let Some((min, max)) = parse_lex_range(args.get(2), args.get(3)) else {
        ctx.error(NOT_LEX_RANGE);
        return;
    };
    remove_range(ctx, args.get(1), "zremrangebylex", |z| {
        z.lex_range_ranks(&min, &max)
    })
}

fn remove_range(
    ctx: &mut Ctx,
    key: &[u8],
    event: &str,
    interval: impl FnOnce(&ZSet) -> (usize, usize),
) {
    let z = match write_zset(ctx, key) {
        Err(()) => return,
        Ok((None, out)) => {
            out.int(0);
            return;
        }
        Ok((Some(z), _)) => z,
    };
    let (a, b) = interval(z);
    let n = z.remove_ranks(a, b);
    let empty = z.is_empty();
    if n > 0 {
        ctx.notify(NOTIFY_ZSET, event, key);
    }
    if empty {
        delete_key(ctx, key);
    }
    ctx.modified(n as u64);
    ctx.client.out.int(n as i64);
}

// ---------------------------------------------------------------------------
// Pops
// ---------------------------------------------------------------------------

/// ZPOPMIN key [count]
fn zpopmin(ctx: &mut Ctx, args: Args) {
    zpop_command(ctx, args, false)
}

/// ZPOPMAX key [count]
fn zpopmax(ctx: &mut Ctx, args: Args) {
    zpop_command(ctx, args, true)
}

fn zpop_command(ctx: &mut Ctx, args: Args, max: bool) {
    if args.len() > 3 {
        ctx.error(err::SYNTAX);
        return;
    }
    let mut count = -1i64;
    if args.len() == 3 {
        // getPositiveLongFromObjectOrReply: one message for a bad integer
        // and a negative one.
        match ferrokv_resp::parse_i64(args.get(2)) {
            Some(c) if c >= 0 => count = c,
            _ => {
                ctx.error(err::POSITIVE);
                return;
            }
        }
    }
    let nested = ctx.client.out.proto == Protocol::Resp3 && count != -1;
    let key = args.get(1);
    zpop_generic(ctx, &[key], max, false, count, nested, false);
}

/// Redis's `genericZpopCommand`: pops from the first non-empty key of
/// `keys`; `emit_key` for ZMPOP's `[key, [[m, s], ...]]` shape. Returns
/// the key popped from and how many went.
fn zpop_generic(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    max: bool,
    emit_key: bool,
    count: i64,
    nested: bool,
    nil_when_empty: bool,
) -> Option<(Vec<u8>, usize)> {
    let mut found: Option<&[u8]> = None;
    let db = ctx.client.db;
    for &k in keys {
        match ctx.srv.lookup_write(db, k, ctx.now_ms) {
            None => continue,
            Some(e) => {
                if !matches!(e.value(), ValueRef::ZSet(_)) {
                    ctx.client.out.error(err::WRONGTYPE);
                    return None;
                }
                found = Some(k);
                break;
            }
        }
    }
    let Some(key) = found else {
        if nil_when_empty {
            ctx.client.out.null_array();
        } else {
            ctx.client.out.array(0);
        }
        return None;
    };
    if count == 0 {
        ctx.client.out.array(0);
        return None;
    }
    let count = if count == -1 { 1 } else { count as usize };
    let Ok((Some(z), out)) = write_zset(ctx, key) else {
        unreachable!("checked above")
    };
    let n = count.min(z.len());
    match (nested, emit_key) {
        (false, false) => out.array(n * 2),
        (true, false) => out.array(n),
        (false, true) => {
            out.array(n * 2 + 1);
            out.bulk(key);
        }
        (true, true) => {
            out.array(2);
            out.bulk(key);
            out.array(n);
        }
    }
    let len = z.len();
    let (from, to) = if max { (len - n, len) } else { (0, n) };
    z.visit_ranks(from, to, max, |m, s| {
        if nested {
            out.array(2);
        }
        out.bulk(m);
        reply_score(out, s);
    });
    z.remove_ranks(from, to);
    let empty = z.is_empty();
    ctx.notify(NOTIFY_ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
    if empty {
        delete_key(ctx, key);
    }
    // ZMPOP/BZMPOP's keys follow `numkeys`, out of the command table's key
    // positions: WATCH learns of the change here.
    let db = ctx.client.db;
    ctx.srv.touch_watched_key(db, key);
    ctx.modified(n as u64);
    Some((key.to_vec(), n))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
fn zmpop(ctx: &mut Ctx, args: Args) {
    let Some((keys_at, numkeys, max, count)) = parse_mpop(ctx, &args, 1) else {
        return;
    };
    let keys: Vec<&[u8]> = (keys_at..keys_at + numkeys).map(|i| args.get(i)).collect();
    if let Some((key, popped)) = zpop_generic(ctx, &keys, max, true, count, true, true) {
        // As Redis: the count actually popped, not the one asked for.
        let c = popped.to_string();
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        ctx.rewrite(&[name, &key, c.as_bytes()]);
    }
}

/// BZPOPMIN key [key ...] timeout
fn bzpopmin(ctx: &mut Ctx, args: Args) {
    bzpop(ctx, args, false)
}

/// BZPOPMAX key [key ...] timeout
fn bzpopmax(ctx: &mut Ctx, args: Args) {
    bzpop(ctx, args, true)
}

fn bzpop(ctx: &mut Ctx, args: Args, max: bool) {
    let Some(deadline) = super::list::parse_timeout(ctx, args.get(args.len() - 1)) else {
        return;
    };
    let keys = 1..args.len() - 1;
    if pop_first_ready(ctx, &args, keys.clone(), max, -1, false) {
        return;
    }
    block_or_give_up(ctx, args, keys, deadline);
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
fn bzmpop(ctx: &mut Ctx, args: Args) {
    let Some((keys_at, numkeys, max, count)) = parse_mpop(ctx, &args, 2) else {
        return;
    };
    let Some(deadline) = super::list::parse_timeout(ctx, args.get(1)) else {
        return;
    };
    let keys = keys_at..keys_at + numkeys;
    if pop_first_ready(ctx, &args, keys.clone(), max, count, true) {
        return;
    }
    block_or_give_up(ctx, args, keys, deadline);
}

/// Redis's `blockingGenericZpopCommand` before it blocks: pops from the
/// first key holding a zset (true: replied, popped or WRONGTYPE), and
/// propagates ZPOPMIN/ZPOPMAX (with the count when one was given).
fn pop_first_ready(
    ctx: &mut Ctx,
    args: &Args,
    keys: std::ops::Range<usize>,
    max: bool,
    count: i64,
    nested: bool,
) -> bool {
    let db = ctx.client.db;
    for i in keys {
        let key = args.get(i);
        match ctx.srv.lookup_write(db, key, ctx.now_ms) {
            None => continue,
            Some(e) if !matches!(e.value(), ValueRef::ZSet(_)) => {
                ctx.error(err::WRONGTYPE);
                return true;
            }
            Some(_) => {}
        }
        let popped = zpop_generic(ctx, &[key], max, true, count, nested, true).map_or(0, |p| p.1);
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        if count == -1 {
            ctx.rewrite(&[name, key]);
        } else {
            // As Redis: the count actually popped, not the one asked for.
            let c = popped.to_string();
            ctx.rewrite(&[name, key, c.as_bytes()]);
        }
        return true;
    }
    false
}

/// Blocks the client on `keys` until one holds a zset, or — where nothing
/// may block (MULTI/EXEC) — answers as a timeout would: a null array.
fn block_or_give_up(
    ctx: &mut Ctx,
    args: Args,
    keys: std::ops::Range<usize>,
    deadline: Option<i64>,
) {
    if !crate::blocking::may_block(ctx) {
        ctx.client.out.null_array();
        return;
    }
    crate::blocking::block_for_keys(
        ctx,
        args,
        keys.map(|i| args.get(i)),
        ferrokv_store::ValueType::ZSet,
        deadline,
    );
}

/// Parses `numkeys key... MIN|MAX [COUNT count]` from `args[at..]`:
/// (index of the first key, numkeys, max?, count).
fn parse_mpop(ctx: &mut Ctx, args: &Args, at: usize) -> Option<(usize, usize, bool, i64)> {
    // Redis's getRangeLongFromObjectOrReply: one message for both a bad
    // integer and one out of range.
    let numkeys = match ferrokv_resp::parse_i64(args.get(at)) {
        Some(n) if n >= 1 => n,
        _ => {
            ctx.error("ERR numkeys should be greater than 0");
            return None;
        }
    };
    let where_at = (at as i64).saturating_add(numkeys).saturating_add(1);
    if where_at >= args.len() as i64 {
        ctx.error(err::SYNTAX);
        return None;
    }
    let where_at = where_at as usize;
    let w = args.get(where_at);
    let max = if is(w, "min") {
        false
    } else if is(w, "max") {
        true
    } else {
        ctx.error(err::SYNTAX);
        return None;
    };
    let mut count = -1i64;
    let mut j = where_at + 1;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if count == -1 && is(args.get(j), "count") && more > 0 {
            j += 1;
            count = match ferrokv_resp::parse_i64(args.get(j)) {
                Some(c) if c >= 1 => c,
                _ => {
                    ctx.error("ERR count should be greater than 0");
                    return None;
                }
            };
        } else {
            ctx.error(err::SYNTAX);
            return None;
        }
        j += 1;
    }
    if count == -1 {
        count = 1;
    }
    Some((at + 1, numkeys as usize, max, count))
}

// ---------------------------------------------------------------------------
// Set algebra
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, v: f64, a: Aggregate) {
    match a {
        Aggregate::Sum => {
            *target += v;
            // inf + -inf: Redis keeps 0 rather than NaN.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *target {
                *target = v
            }
        }
        Aggregate::Max => {
            if v > *target {
                *target = v
            }
        }
    }
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX]
fn zunionstore(ctx: &mut Ctx, args: Args) {
    setop_generic(ctx, args, true, SetOp::Union, "zunionstore")
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX]
fn zinterstore(ctx: &mut Ctx, args: Args) {
    setop_generic(ctx, args, true, SetOp::Inter, "zinterstore")
}

/// ZDIFFSTORE destination numkeys key [key ...]
fn zdiffstore(ctx: &mut Ctx, args: Args) {
    setop_generic(ctx, args, true, SetOp::Diff, "zdiffstore")
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
fn zunion(ctx: &mut Ctx, args: Args) {
    setop_generic(ctx, args, false, SetOp::Union, "zunion")
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
/// A live sorted set or set under `key`, as an input of the set operations
/// (the caller checked the types).
fn source<'a>(db: &'a ferrokv_store::Db, key: &[u8], now: i64) -> Option<Src<'a>> {
    let e = db.get(key)?;
    if e.expire_at != NO_EXPIRE && e.expire_at <= now {
        return None;
    }
    match e.value() {
        ValueRef::ZSet(z) => Some(Src::Z(z)),
        ValueRef::Set(s) => Some(Src::S(s)),
        _ => None,
    }
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the
/// intersection (sets count too), counting stops at `limit` (0: none).
fn zintercard(ctx: &mut Ctx, args: Args) {
    let Some(setnum) = parse_int(ctx, args.get(1)) else {
        return;
    };
    if setnum < 1 {
        return ctx.error("ERR at least 1 input key is needed for 'zintercard' command");
    }
    if setnum > (args.len() - 2) as i64 {
        return ctx.error(err::SYNTAX);
    }
    let setnum = setnum as usize;
    let db = ctx.client.db;
    for i in 0..setnum {
        if let Some(e) = ctx.srv.lookup_read(db, args.get(2 + i), ctx.now_ms) {
            if !matches!(e.value(), ValueRef::ZSet(_) | ValueRef::Set(_)) {
                return ctx.error(err::WRONGTYPE);
            }
        }
    }
    let mut limit = 0usize;
    let mut j = 2 + setnum;
    while j < args.len() {
        if args.len() - j >= 2 && is(args.get(j), "limit") {
            match ferrokv_resp::parse_i64(args.get(j + 1)) {
                Some(l) if l >= 0 => limit = l as usize,
                // Redis's getPositiveLongFromObjectOrReply: one text for both.
                _ => return ctx.error("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return ctx.error(err::SYNTAX);
        }
    }
    let dbref = &ctx.srv.keyspace.dbs[db];
    let mut srcs: Vec<Option<Src>> = (0..setnum)
        .map(|i| source(dbref, args.get(2 + i), ctx.now_ms))
        .collect();
    if srcs.iter().any(|s| s.is_none()) {
        return ctx.client.out.int(0);
    }
    srcs.sort_by_key(|z| z.map_or(0, |z| z.len()));
    let srcs: Vec<Src> = srcs.into_iter().flatten().collect();
    let mut n = 0usize;
    srcs[0].each(&mut |m, _| {
        if limit > 0 && n >= limit {
            return;
        }
        if srcs[1..].iter().all(|z| z.score(m).is_some()) {
            n += 1;
        }
    });
    ctx.client.out.int(n as i64);
}

fn zinter(ctx: &mut Ctx, args: Args) {
    setop_generic(ctx, args, false, SetOp::Inter, "zinter")
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
fn zdiff(ctx: &mut Ctx, args: Args) {
    setop_generic(ctx, args, false, SetOp::Diff, "zdiff")
}

/// An input of ZUNION/ZINTER/ZDIFF: a sorted set, or a set whose members
/// all score 1 (Redis accepts both).
#[derive(Clone, Copy)]
enum Src<'a> {
    Z(&'a ZSet),
    S(&'a ferrokv_store::set::Set),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
        }
    }
    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Z(z) => z.score(m),
            Src::S(s) => s.contains(m).then_some(1.0),
        }
    }
    fn each(&self, f: &mut dyn FnMut(&[u8], f64)) {
        match self {
            Src::Z(z) => z.iter().for_each(|(m, s)| f(m, s)),
            Src::S(s) => s.iter().for_each(|m| m.with_bytes(|b| f(b, 1.0))),
        }
    }
}

/// Redis's `zunionInterDiffGenericCommand`.
fn setop_generic(ctx: &mut Ctx, args: Args, store: bool, op: SetOp, name: &str) {
    let numkeys_at = if store { 2 } else { 1 };
    let Some(setnum) = parse_int(ctx, args.get(numkeys_at)) else {
        return;
    };
    if setnum < 1 {
        ctx.error(&format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
        return;
    }
    if setnum > (args.len() - (numkeys_at + 1)) as i64 {
        ctx.error(err::SYNTAX);
        return;
    }
    let setnum = setnum as usize;
    let first = numkeys_at + 1;
    // Type checks come first (inputs are read before the options).
    let db = ctx.client.db;
    for i in 0..setnum {
        if let Some(e) = ctx.srv.lookup_read(db, args.get(first + i), ctx.now_ms) {
            if !matches!(e.value(), ValueRef::ZSet(_) | ValueRef::Set(_)) {
                ctx.error(err::WRONGTYPE);
                return;
            }
        }
    }
    let mut weights = vec![1.0f64; setnum];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut j = first + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = args.get(j);
        if op != SetOp::Diff && remaining > setnum && is(a, "weights") {
            j += 1;
            for w in weights.iter_mut() {
                match parse_f64(args.get(j)) {
                    Some(v) => *w = v,
                    None => {
                        ctx.error("ERR weight value is not a float");
                        return;
                    }
                }
                j += 1;
            }
        } else if op != SetOp::Diff && remaining >= 2 && is(a, "aggregate") {
            let v = args.get(j + 1);
            agg = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                ctx.error(err::SYNTAX);
                return;
            };
            j += 2;
        } else if !store && is(a, "withscores") {
            withscores = true;
            j += 1;
        } else {
            ctx.error(err::SYNTAX);
            return;
        }
    }
    let now = ctx.now_ms;
    // Sources in Redis's order: by cardinality for union and inter (a
    // stable sort, as glibc's qsort), as given for diff.
    let mut srcs: Vec<(Option<Src>, f64, usize)> = Vec::with_capacity(setnum);
    let dbref = &ctx.srv.keyspace.dbs[db];
    for (i, &weight) in weights.iter().enumerate() {
        srcs.push((source(dbref, args.get(first + i), now), weight, i));
    }
    if op != SetOp::Diff {
        srcs.sort_by_key(|(z, _, _)| z.map_or(0, |z| z.len()));
    }
    let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
    match op {
        SetOp::Union => {
            let mut acc: hashbrown::HashMap<Vec<u8>, usize> = hashbrown::HashMap::new();
            for (z, w, _) in &srcs {
                let Some(z) = z else { continue };
                z.each(&mut |m, s| {
                    let mut score = w * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get(m) {
                        Some(&i) => aggregate(&mut result[i].1, score, agg),
                        None => {
                            acc.insert(m.to_vec(), result.len());
                            result.push((m.to_vec(), score));
                        }
                    }
                });
            }
        }
        SetOp::Inter => {
            if let Some((Some(z0), w0, i0)) = srcs.first().copied() {
                z0.each(&mut |m, s| {
                    let mut score = w0 * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    for (z, w, i) in &srcs[1..] {
                        let Some(z) = z else { return };
                        let v = if args.get(first + *i) == args.get(first + i0) {
                            s * w
                        } else {
                            match z.score(m) {
                                Some(v) => v * w,
                                None => return,
                            }
                        };
                        aggregate(&mut score, v, agg);
                    }
                    result.push((m.to_vec(), score));
                });
            }
        }
        SetOp::Diff => {
            if let Some((Some(z0), _, _)) = srcs.first().copied() {
                z0.each(&mut |m, s| {
                    if srcs[1..]
                        .iter()
                        .all(|(z, _, _)| z.is_none_or(|z| z.score(m).is_none()))
                    {
                        result.push((m.to_vec(), s));
                    }
                });
            }
        }
    }
    // The result in (score, member) order, as a skiplist would hold it.
    result.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .expect("no NaN")
            .then_with(|| a.0.cmp(&b.0))
    });
    if store {
        let lim = limits(ctx);
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        store_result(ctx, args.get(1), event, result, &lim);
        return;
    }
    let out = &mut ctx.client.out;
    let resp3 = out.proto == Protocol::Resp3;
    out.array(if withscores && !resp3 {
        result.len() * 2
    } else {
        result.len()
    });
    for (m, s) in &result {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            reply_score(out, *s);
        }
    }
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN
// ---------------------------------------------------------------------------

/// ZRANDMEMBER key [count [WITHSCORES]]
fn zrandmember(ctx: &mut Ctx, args: Args) {
    if args.len() >= 3 {
        let Some(count) = parse_int(ctx, args.get(2)) else {
            return;
        };
        if count == i64::MIN {
            ctx.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
            return;
        }
        let withscores = args.len() == 4 && is(args.get(3), "withscores");
        if args.len() > 4 || (args.len() == 4 && !withscores) {
            ctx.error(err::SYNTAX);
            return;
        }
        if withscores && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
            ctx.error("ERR value is out of range");
            return;
        }
        zrandmember_count(ctx, args.get(1), count, withscores);
        return;
    }
    let Ok((z, out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    match z {
        None => out.null(),
        Some(z) => {
            let r = rand::thread_rng().gen_range(0..z.len());
            let (m, _) = z.at_rank(r).expect("in range");
            out.bulk(m);
        }
    }
}

fn zrandmember_count(ctx: &mut Ctx, key: &[u8], count: i64, withscores: bool) {
    let max_bytes = ctx.srv.config.proto_max_bulk_len;
    let Ok((z, out)) = read_zset(ctx, key) else {
        return;
    };
    let Some(z) = z else {
        out.array(0);
        return;
    };
    if count == 0 {
        out.array(0);
        return;
    }
    let resp3 = out.proto == Protocol::Resp3;
    let len = z.len();
    let mut rng = rand::thread_rng();
    let emit = |out: &mut Reply, m: &[u8], s: f64| {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            reply_score(out, s);
        }
    };
    let header =
        |out: &mut Reply, n: usize| out.array(if withscores && !resp3 { n * 2 } else { n });
    if count < 0 {
        // Repetitions allowed: `|count|` independent draws, a reply
        // bounded in bytes (see `set::reply_repeated_picks`).
        let n = count.unsigned_abs();
        let header_len = if withscores && !resp3 { n * 2 } else { n };
        // A score is at least a one-digit bulk (RESP2) or `,1\r\n` (RESP3).
        let min_bytes = super::set::MIN_BULK_BYTES + if withscores { 4 } else { 0 };
        super::set::reply_repeated_picks(out, max_bytes, n, header_len, min_bytes, |out| {
            let (m, s) = z.at_rank(rng.gen_range(0..len)).expect("in range");
            emit(out, m, s);
        });
        return;
    }
    let n = (count as usize).min(len);
    header(out, n);
    if n == len {
        // The whole set, highest score first (Redis 7.0 answers with its
        // reverse range by rank).
        z.visit_ranks(0, len, true, |m, s| emit(out, m, s));
        return;
    }
    // Distinct ranks, chosen by a partial Fisher-Yates over rank indexes.
    let picks = rand::seq::index::sample(&mut rng, len, n);
    for r in picks.iter() {
        let (m, s) = z.at_rank(r).expect("in range");
        emit(out, m, s);
    }
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
fn zscan(ctx: &mut Ctx, args: Args) {
    let Some(cursor) = super::keys::parse_cursor(args.get(2)) else {
        ctx.error("ERR invalid cursor");
        return;
    };
    // As Redis: the key is looked up (a missing one answers an empty
    // scan, a wrong type errs) before the options are parsed.
    let db = ctx.client.db;
    match ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) {
        None => return super::keys::reply_scan(&mut ctx.client.out, 0, &[]),
        Some(e) if !matches!(e.value(), ValueRef::ZSet(_)) => {
            ctx.error(err::WRONGTYPE);
            return;
        }
        Some(_) => {}
    }
    let opts = match super::keys::parse_scan_options(&args, 3, super::keys::ScanOf::Elements) {
        Ok(o) => o,
        Err(e) => return ctx.error(e),
    };
    let Ok((Some(z), out)) = read_zset(ctx, args.get(1)) else {
        return;
    };
    let mut found: Vec<(&[u8], f64)> = Vec::new();
    let next = z.scan(cursor, opts.count, |m, s| {
        if opts.pattern.is_none_or(|p| glob_match(p, m)) {
            found.push((m, s));
        }
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len() * 2);
    let mut text = Vec::with_capacity(24);
    for (m, s) in found {
        out.bulk(m);
        text.clear();
        write_score(&mut text, s);
        out.bulk(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_bounds_parse_as_zslparserange() {
        let r = parse_score_range(b"(1", b"+inf").unwrap();
        assert_eq!(
            (r.min, r.minex, r.max, r.maxex),
            (1.0, true, f64::INFINITY, false)
        );
        let r = parse_score_range(b"-inf", b"(5.5").unwrap();
        assert_eq!((r.min, r.max, r.maxex), (f64::NEG_INFINITY, 5.5, true));
        assert_eq!(parse_score_range(b"", b"(").unwrap().min, 0.0);
        assert!(parse_score_range(b"nan", b"1").is_none());
        assert!(parse_score_range(b"1x", b"1").is_none());
        assert!(parse_score_range(b"((1", b"1").is_none());
        assert_eq!(
            parse_score_range(b"1e400", b"1").unwrap().min,
            f64::INFINITY
        );
        assert_eq!(parse_score_range(b" 1", b"0x10").unwrap().max, 16.0);
    }

    #[test]
    fn lex_bounds_parse_as_zslparselexrangeitem() {
        assert_eq!(parse_lex_bound(b"-"), Some(LexBound::NegInf));
        assert_eq!(parse_lex_bound(b"+"), Some(LexBound::PosInf));
        assert_eq!(parse_lex_bound(b"[a"), Some(LexBound::Incl(b"a")));
        assert_eq!(parse_lex_bound(b"("), Some(LexBound::Excl(b"")));
        assert_eq!(parse_lex_bound(b"a"), None);
        assert_eq!(parse_lex_bound(b"+a"), None);
        assert_eq!(parse_lex_bound(b""), None);
    }

    #[test]
    fn limit_walks_like_redis() {
        // Matches at ranks 2..7 of a 10-member set.
        assert_eq!(apply_limit((2, 7), 0, -1, false, 10), (2, 7));
        assert_eq!(apply_limit((2, 7), 1, 2, false, 10), (3, 5));
        assert_eq!(apply_limit((2, 7), 1, 2, true, 10), (4, 6));
        assert_eq!(apply_limit((2, 7), -1, 2, false, 10), (0, 0));
        assert_eq!(apply_limit((2, 7), 10, 2, false, 10), (0, 0));
        assert_eq!(apply_limit((2, 7), 4, 5, false, 10), (6, 7));
        assert_eq!(apply_limit((2, 7), 0, 0, false, 10), (2, 2));
    }

    #[test]
    fn rank_intervals_are_sanitized_like_redis() {
        assert_eq!(rank_interval(0, -1, 5), Some((0, 5)));
        assert_eq!(rank_interval(-100, 100, 5), Some((0, 5)));
        assert_eq!(rank_interval(3, 1, 5), None);
        assert_eq!(rank_interval(5, 10, 5), None);
        assert_eq!(rank_interval(-2, -1, 5), Some((3, 5)));
    }
}
