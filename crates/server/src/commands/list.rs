//! The list family: pushes and pops at both ends, ranges, edits in the
//! middle, LPOS, LMOVE/RPOPLPUSH, LMPOP, and the blocking pops (BLPOP,
//! BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP), with Redis 7.0's replies and errors.
//!
//! Data lives in [`ferrokv_store::list::List`] behind an `Arc`: a write goes
//! through `Arc::make_mut`, which copies only while a snapshot still holds
//! the old list. An emptied list is deleted, as Redis does.
//!
//! The blocking commands pop at once when they can; otherwise they park the
//! client with [`crate::blocking::block_for_keys`] and are run again when a
//! key they wait on holds a list (see `blocking.rs`). A served pop is
//! propagated as its non-blocking form (`BLPOP` → `LPOP key`, `BLMOVE` →
//! `LMOVE`, `BLMPOP` → `LPOP key count`) through `ctx.rewrite`.
//!
//! # Hostile input
//!
//! Audited for work or memory a client could choose (issue #15; cases in
//! `tests/limits.rs`). Indexes (`LRANGE`, `LTRIM`, `LINDEX`, `LSET`) clamp
//! any `i64` to the list; nothing is allocated from an index. `LPOS`:
//! `RANK LONG_MIN` behaves as in Redis (negated, it stays negative: the
//! first match from the tail), negative `COUNT`/`MAXLEN` are refused and
//! huge ones are bounded by the list. `LPOP`/`RPOP`/`LMPOP` counts stop at
//! the list's length; an `LMPOP` `numkeys` past the arguments is a syntax
//! error (saturating arithmetic). Blocking timeouts too large for
//! milliseconds answer "timeout is negative" as Redis's cast does; a
//! deadline past `i64` saturates (blocks forever, as Redis's overflow).

use super::flags::*;
use super::{err, is, parse_int, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_LIST, NOTIFY_NEW};
use crate::server::Server;
use ferrokv_resp::Args;
use ferrokv_store::list::List;
use ferrokv_store::{Value, ValueRef, ValueType, NO_EXPIRE};
use std::sync::Arc;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("list")
        .keys(1, 1, 1)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("lpush", -3, WRITE | DENYOOM | FAST, lpush).complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").doc("Prepends one or more elements to a list. Creates the key if it doesn't exist.", "key element [element ...]"),
    cmd("rpush", -3, WRITE | DENYOOM | FAST, rpush).complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").doc("Appends one or more elements to a list. Creates the key if it doesn't exist.", "key element [element ...]"),
    cmd("lpushx", -3, WRITE | DENYOOM | FAST, lpushx).since("2.2.0").complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").doc("Prepends one or more elements to a list only when the list exists.", "key element [element ...]"),
    cmd("rpushx", -3, WRITE | DENYOOM | FAST, rpushx).since("2.2.0").complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").doc("Appends an element to a list only when the list exists.", "key element [element ...]"),
    cmd("lpop", -2, WRITE | FAST, lpop).complexity("O(N) where N is the number of elements returned").doc("Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "key [count]"),
    cmd("rpop", -2, WRITE | FAST, rpop).complexity("O(N) where N is the number of elements returned").doc("Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "key [count]"),
    cmd("llen", 2, READONLY | FAST, llen).doc("Returns the length of a list.", "key"),
    cmd("lrange", 4, READONLY, lrange).complexity("O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.").doc("Returns a range of elements from a list.", "key start stop"),
    cmd("lindex", 3, READONLY, lindex).complexity("O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).").doc("Returns an element from a list by its index.", "key index"),
    cmd("lset", 4, WRITE | DENYOOM, lset).complexity("O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).").doc("Sets the value of an element in a list by its index.", "key index element"),
    cmd("linsert", 5, WRITE | DENYOOM, linsert).since("2.2.0").complexity("O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).").doc("Inserts an element before or after another element in a list.", "key BEFORE|AFTER pivot element"),
    cmd("lrem", 4, WRITE, lrem).complexity("O(N+M) where N is the length of the list and M is the number of elements removed.").doc("Removes elements from a list. Deletes the list if the last element was removed.", "key count element"),
    cmd("ltrim", 4, WRITE, ltrim).complexity("O(N) where N is the number of elements to be removed by the operation.").doc("Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "key start stop"),
    cmd("lpos", -3, READONLY, lpos).since("6.0.6").complexity("O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.").doc("Returns the index of matching elements in a list.", "key element [RANK rank] [COUNT num-matches] [MAXLEN len]"),
    cmd("rpoplpush", 3, WRITE | DENYOOM, rpoplpush).keys(1, 2, 1).since("1.2.0").doc("Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "source destination"),
    cmd("lmove", 5, WRITE | DENYOOM, lmove).keys(1, 2, 1).since("6.2.0").doc("Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "source destination LEFT|RIGHT LEFT|RIGHT"),
    // The keys of LMPOP/BLMPOP follow `numkeys` (Redis describes them with
    // key specs; the first/last/step triple cannot).
    cmd("lmpop", -4, WRITE, lmpop).keys(0, 0, 0).since("7.0.0").complexity("O(N+M) where N is the number of provided keys and M is the number of elements returned.").doc("Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "numkeys key [key ...] LEFT|RIGHT [COUNT count]"),
    cmd("blpop", -3, WRITE | NOSCRIPT | BLOCKING, blpop).keys(1, -2, 1).since("2.0.0").complexity("O(N) where N is the number of provided keys.").doc("Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "key [key ...] timeout"),
    cmd("brpop", -3, WRITE | NOSCRIPT | BLOCKING, brpop).keys(1, -2, 1).since("2.0.0").complexity("O(N) where N is the number of provided keys.").doc("Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "key [key ...] timeout"),
    cmd("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, brpoplpush).keys(1, 2, 1).since("2.2.0").doc("Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "source destination timeout"),
    cmd("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, blmove).keys(1, 2, 1).since("6.2.0").doc("Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "source destination LEFT|RIGHT LEFT|RIGHT timeout"),
    cmd("blmpop", -5, WRITE | BLOCKING, blmpop).keys(0, 0, 0).since("7.0.0").complexity("O(N+M) where N is the number of provided keys and M is the number of elements returned.").doc("Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]"),
];

/// The key holds another type (the handler replies `WRONGTYPE`).
pub struct WrongType;

/// The list at `key`, for reading.
fn read_list<'s>(
    srv: &'s mut Server,
    db: usize,
    key: &[u8],
    now: i64,
) -> Result<Option<&'s List>, WrongType> {
    match srv.lookup_read(db, key, now) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::List(l) => Ok(Some(l)),
            _ => Err(WrongType),
        },
    }
}

/// The list at `key`, for changing (copied first only if a snapshot in
/// progress still shares it).
pub fn write_list<'s>(
    srv: &'s mut Server,
    db: usize,
    key: &[u8],
    now: i64,
) -> Result<Option<&'s mut List>, WrongType> {
    match srv.lookup_write(db, key, now) {
        None => Ok(None),
        Some(e) => match e.value_mut() {
            Some(Value::List(l)) => Ok(Some(Arc::make_mut(l))),
            _ => Err(WrongType),
        },
    }
}

/// Stores a new list under `key` (which must not exist) and announces it.
fn create_list(ctx: &mut Ctx, key: &[u8], list: List) {
    let (db, lru) = (ctx.client.db, ctx.srv.lru_clock);
    ctx.srv.keyspace.dbs[db].upsert(key, Value::List(Arc::new(list)), NO_EXPIRE, lru);
    ctx.notify(NOTIFY_NEW, "new", key);
}

/// Deletes `key` when its list has become empty (announced as `del`).
fn delete_if_empty(ctx: &mut Ctx, key: &[u8]) {
    let (db, now) = (ctx.client.db, ctx.now_ms);
    if let Ok(Some(l)) = write_list(ctx.srv, db, key, now) {
        if l.is_empty() {
            if let Some(e) = ctx.srv.keyspace.dbs[db].remove(key) {
                ctx.srv.drop_value(e);
            }
            ctx.notify(NOTIFY_GENERIC, "del", key);
        }
    }
}

/// After elements left one end of `key`: the pop event, then `del` if
/// that emptied it (Redis's `listElementsRemoved`).
fn elements_removed(ctx: &mut Ctx, key: &[u8], end: End) {
    ctx.notify(NOTIFY_LIST, end.pop_event(), key);
    delete_if_empty(ctx, key);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }

    fn name(self) -> &'static [u8] {
        match self {
            End::Left => b"LEFT",
            End::Right => b"RIGHT",
        }
    }
}

/// `LEFT|RIGHT` (Redis's `getListPositionFromObjectOrReply`).
fn parse_end(ctx: &mut Ctx, a: &[u8]) -> Option<End> {
    if is(a, "left") {
        Some(End::Left)
    } else if is(a, "right") {
        Some(End::Right)
    } else {
        ctx.error(err::SYNTAX);
        None
    }
}

fn push_end(l: &mut List, end: End, v: &[u8]) {
    match end {
        End::Left => l.push_front(v),
        End::Right => l.push_back(v),
    }
}

/// Parses an integer in `0..=i64::MAX` as Redis's
/// `getPositiveLongFromObjectOrReply`: `msg` for both a non-number and a
/// negative one.
fn parse_non_negative(ctx: &mut Ctx, a: &[u8], msg: &str) -> Option<i64> {
    match ferrokv_resp::parse_i64(a) {
        Some(v) if v >= 0 => Some(v),
        _ => {
            ctx.error(msg);
            None
        }
    }
}

/// Parses an integer at least 1 (`getRangeLongFromObjectOrReply(.., 1,
/// LONG_MAX, msg)`).
fn parse_positive(ctx: &mut Ctx, a: &[u8], msg: &str) -> Option<i64> {
    match ferrokv_resp::parse_i64(a) {
        Some(v) if v >= 1 => Some(v),
        _ => {
            ctx.error(msg);
            None
        }
    }
}

// ---------------------------------------------------------------- pushes

/// LPUSH key element [element ...]
fn lpush(ctx: &mut Ctx, args: Args) {
    push_generic(ctx, args, End::Left, false)
}

/// RPUSH key element [element ...]
fn rpush(ctx: &mut Ctx, args: Args) {
    push_generic(ctx, args, End::Right, false)
}

/// LPUSHX key element [element ...]
fn lpushx(ctx: &mut Ctx, args: Args) {
    push_generic(ctx, args, End::Left, true)
}

/// RPUSHX key element [element ...]
fn rpushx(ctx: &mut Ctx, args: Args) {
    push_generic(ctx, args, End::Right, true)
}

fn push_generic(ctx: &mut Ctx, args: Args, end: End, only_existing: bool) {
    let db = ctx.client.db;
    let key = args.get(1);
    let len = match write_list(ctx.srv, db, key, ctx.now_ms) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(Some(l)) => {
            for v in args.iter().skip(2) {
                push_end(l, end, v);
            }
            l.len()
        }
        Ok(None) if only_existing => return ctx.out().int(0),
        Ok(None) => {
            let mut l = List::new();
            for v in args.iter().skip(2) {
                push_end(&mut l, end, v);
            }
            let n = l.len();
            create_list(ctx, key, l);
            n
        }
    };
    ctx.notify(NOTIFY_LIST, end.push_event(), key);
    ctx.modified(args.len() as u64 - 2);
    ctx.out().int(len as i64);
}

// ---------------------------------------------------------------- pops

/// LPOP key [count]
fn lpop(ctx: &mut Ctx, args: Args) {
    pop_generic(ctx, args, End::Left)
}

/// RPOP key [count]
fn rpop(ctx: &mut Ctx, args: Args) {
    pop_generic(ctx, args, End::Right)
}

fn pop_generic(ctx: &mut Ctx, args: Args, end: End) {
    if args.len() > 3 {
        return ctx.wrong_args(if end == End::Left { "lpop" } else { "rpop" });
    }
    let count = if args.len() == 3 {
        match parse_non_negative(
            ctx,
            args.get(2),
            "ERR value is out of range, must be positive",
        ) {
            Some(c) => Some(c as usize),
            None => return,
        }
    } else {
        None
    };
    let db = ctx.client.db;
    let key = args.get(1);
    let now = ctx.now_ms;
    let out = &mut ctx.client.out;
    let popped = match write_list(ctx.srv, db, key, now) {
        Err(WrongType) => return out.error(err::WRONGTYPE),
        Ok(None) => {
            return match count {
                Some(_) => out.null_array(),
                None => out.null(),
            }
        }
        Ok(Some(l)) => match count {
            None => {
                pop_into(l, end, 1, out, false);
                1
            }
            Some(0) => return out.array(0),
            Some(n) => pop_into(l, end, n, out, true),
        },
    };
    elements_removed(ctx, key, end);
    ctx.modified(popped as u64);
}

/// Pops up to `n` elements from one end, writing them as bulk strings
/// (under an array header when `array`). Returns how many went.
fn pop_into(
    l: &mut List,
    end: End,
    n: usize,
    out: &mut crate::net::client::Reply,
    array: bool,
) -> usize {
    let n = n.min(l.len());
    if array {
        out.array(n);
    }
    for _ in 0..n {
        match end {
            End::Left => {
                out.bulk(l.front().expect("n <= len"));
                l.drop_front();
            }
            End::Right => {
                out.bulk(l.back().expect("n <= len"));
                l.drop_back();
            }
        }
    }
    n
}

// ---------------------------------------------------------------- reads

/// LLEN key
fn llen(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    match read_list(ctx.srv, db, args.get(1), ctx.now_ms) {
        Err(WrongType) => ctx.client.out.error(err::WRONGTYPE),
        Ok(l) => ctx.client.out.int(l.map_or(0, |l| l.len() as i64)),
    }
}

/// Turns Redis's inclusive, possibly negative `start stop` into a
/// half-open range of `len` elements (empty when out of range).
fn clamp_range(start: i64, stop: i64, len: usize) -> std::ops::Range<usize> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return 0..0;
    }
    if stop >= len {
        stop = len - 1;
    }
    start as usize..stop as usize + 1
}

/// The `start stop` arguments of LRANGE and LTRIM (the error is replied).
fn start_stop(ctx: &mut Ctx, args: Args) -> Option<(i64, i64)> {
    let start = parse_int(ctx, args.get(2))?;
    let stop = parse_int(ctx, args.get(3))?;
    Some((start, stop))
}

/// LRANGE key start stop
fn lrange(ctx: &mut Ctx, args: Args) {
    let Some((start, stop)) = start_stop(ctx, args) else {
        return;
    };
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    match read_list(ctx.srv, db, args.get(1), ctx.now_ms) {
        Err(WrongType) => out.error(err::WRONGTYPE),
        Ok(None) => out.array(0),
        Ok(Some(l)) => {
            let r = clamp_range(start, stop, l.len());
            out.array(r.len());
            for v in l.iter_from(r.start).take(r.len()) {
                out.bulk(v);
            }
        }
    }
}

/// LINDEX key index
fn lindex(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    // As Redis: the key first (a missing key answers nil whatever the index).
    let len = match read_list(ctx.srv, db, args.get(1), now) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(None) => return ctx.out().null(),
        Ok(Some(l)) => l.len() as i64,
    };
    let Some(i) = parse_int(ctx, args.get(2)) else {
        return;
    };
    let i = if i < 0 { len + i } else { i };
    let out = &mut ctx.client.out;
    match read_list(ctx.srv, db, args.get(1), now) {
        Ok(Some(l)) if (0..len).contains(&i) => out.bulk(l.get(i as usize).expect("in range")),
        _ => out.null(),
    }
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
fn lpos(ctx: &mut Ctx, args: Args) {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = j + 1 < args.len();
        if is(opt, "rank") && more {
            j += 1;
            rank = match parse_int(ctx, args.get(j)) {
                Some(0) => return ctx.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"),
                Some(r) => r,
                None => return,
            };
        } else if is(opt, "count") && more {
            j += 1;
            match parse_non_negative(ctx, args.get(j), "ERR COUNT can't be negative") {
                Some(c) => count = Some(c),
                None => return,
            }
        } else if is(opt, "maxlen") && more {
            j += 1;
            match parse_non_negative(ctx, args.get(j), "ERR MAXLEN can't be negative") {
                Some(m) => maxlen = m,
                None => return,
            }
        } else {
            return ctx.error(err::SYNTAX);
        }
        j += 1;
    }
    let from_tail = rank < 0;
    // Redis negates a negative rank; LONG_MIN stays negative there, so
    // every match satisfies it (as -1 would) and, with COUNT, its
    // `matches - rank + 1 >= count` overflows and never stops the scan.
    let rank_overflows = rank == i64::MIN;
    let rank = if rank_overflows { 1 } else { rank.abs() };
    let db = ctx.client.db;
    let elem = args.get(2);
    let out = &mut ctx.client.out;
    let l = match read_list(ctx.srv, db, args.get(1), ctx.now_ms) {
        Err(WrongType) => return out.error(err::WRONGTYPE),
        Ok(None) => {
            return match count {
                Some(_) => out.array(0),
                None => out.null(),
            }
        }
        Ok(Some(l)) => l,
    };
    let len = l.len();
    let scan_limit = if maxlen == 0 {
        len
    } else {
        (maxlen as usize).min(len)
    };
    let mut found: Vec<i64> = Vec::new();
    let mut matches: i64 = 0;
    let want = count.map(|c| {
        if c == 0 || rank_overflows {
            i64::MAX
        } else {
            c
        }
    });
    let mut visit = |index: usize, v: &[u8]| -> bool {
        if v == elem {
            matches += 1;
            if matches >= rank {
                let pos = if from_tail { len - index - 1 } else { index };
                found.push(pos as i64);
                match want {
                    None => return true,
                    Some(w) => return found.len() as i64 >= w,
                }
            }
        }
        false
    };
    if from_tail {
        for (i, v) in l.iter().rev().take(scan_limit).enumerate() {
            if visit(i, v) {
                break;
            }
        }
    } else {
        for (i, v) in l.iter().take(scan_limit).enumerate() {
            if visit(i, v) {
                break;
            }
        }
    }
    match count {
        Some(_) => {
            out.array(found.len());
            for p in found {
                out.int(p);
            }
        }
        None => match found.first() {
            Some(&p) => out.int(p),
            None => out.null(),
        },
    }
}

// ---------------------------------------------------------------- edits

/// LSET key index element
fn lset(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    match write_list(ctx.srv, db, args.get(1), now) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(None) => return ctx.error(err::NO_SUCH_KEY),
        Ok(Some(_)) => {}
    }
    let Some(i) = parse_int(ctx, args.get(2)) else {
        return;
    };
    let Ok(Some(l)) = write_list(ctx.srv, db, args.get(1), now) else {
        unreachable!("checked above")
    };
    let len = l.len() as i64;
    let i = if i < 0 { len + i } else { i };
    if !(0..len).contains(&i) {
        return ctx.error("ERR index out of range");
    }
    l.set(i as usize, args.get(3));
    ctx.notify(NOTIFY_LIST, "lset", args.get(1));
    ctx.modified(1);
    ctx.out().ok();
}

/// LINSERT key BEFORE|AFTER pivot element
fn linsert(ctx: &mut Ctx, args: Args) {
    let after = if is(args.get(2), "after") {
        true
    } else if is(args.get(2), "before") {
        false
    } else {
        return ctx.error(err::SYNTAX);
    };
    let db = ctx.client.db;
    let reply = match write_list(ctx.srv, db, args.get(1), ctx.now_ms) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(None) => 0,
        Ok(Some(l)) => match l.iter().position(|v| v == args.get(3)) {
            None => -1,
            Some(p) => {
                l.insert(if after { p + 1 } else { p }, args.get(4));
                l.len() as i64
            }
        },
    };
    if reply > 0 {
        ctx.notify(NOTIFY_LIST, "linsert", args.get(1));
        ctx.modified(1);
    }
    ctx.out().int(reply);
}

/// LREM key count element
fn lrem(ctx: &mut Ctx, args: Args) {
    let Some(count) = parse_int(ctx, args.get(2)) else {
        return;
    };
    let db = ctx.client.db;
    let key = args.get(1);
    let now = ctx.now_ms;
    let removed = match write_list(ctx.srv, db, key, now) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(None) => 0,
        Ok(Some(l)) => {
            let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
            l.remove_matching(args.get(3), limit, count < 0)
        }
    };
    if removed > 0 {
        ctx.notify(NOTIFY_LIST, "lrem", key);
        delete_if_empty(ctx, key);
        ctx.modified(removed as u64);
    }
    ctx.out().int(removed as i64);
}

/// LTRIM key start stop
fn ltrim(ctx: &mut Ctx, args: Args) {
    let Some((start, stop)) = start_stop(ctx, args) else {
        return;
    };
    let db = ctx.client.db;
    let key = args.get(1);
    let now = ctx.now_ms;
    let removed = match write_list(ctx.srv, db, key, now) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(None) => return ctx.out().ok(),
        Ok(Some(l)) => {
            let len = l.len();
            let keep = clamp_range(start, stop, len);
            let (left, right) = if keep.is_empty() {
                (len, 0)
            } else {
                (keep.start, len - keep.end)
            };
            l.remove_front(left);
            l.remove_back(right);
            left + right
        }
    };
    ctx.notify(NOTIFY_LIST, "ltrim", key);
    delete_if_empty(ctx, key);
    ctx.modified(removed as u64);
    ctx.out().ok();
}

// ---------------------------------------------------------------- moves

/// RPOPLPUSH source destination
fn rpoplpush(ctx: &mut Ctx, args: Args) {
    lmove_generic(ctx, args, End::Right, End::Left)
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
fn lmove(ctx: &mut Ctx, args: Args) {
    let Some(from) = parse_end(ctx, args.get(3)) else {
        return;
    };
    let Some(to) = parse_end(ctx, args.get(4)) else {
        return;
    };
    lmove_generic(ctx, args, from, to)
}

/// Moves one element (Redis's `lmoveGenericCommand`): a missing source
/// answers nil; the destination's type is checked before anything moves.
fn lmove_generic(ctx: &mut Ctx, args: Args, from: End, to: End) {
    let db = ctx.client.db;
    let (src, dst) = (args.get(1), args.get(2));
    let now = ctx.now_ms;
    match write_list(ctx.srv, db, src, now) {
        Err(WrongType) => return ctx.error(err::WRONGTYPE),
        Ok(None) => return ctx.out().null(),
        Ok(Some(_)) => {}
    }
    if matches!(write_list(ctx.srv, db, dst, now), Err(WrongType)) {
        return ctx.error(err::WRONGTYPE);
    }
    let Ok(Some(l)) = write_list(ctx.srv, db, src, now) else {
        unreachable!("checked above")
    };
    let v = match from {
        End::Left => l.pop_front(),
        End::Right => l.pop_back(),
    }
    .expect("a stored list is never empty");
    // As Redis: the push (and its events) first, then the pop's.
    if src == dst {
        push_end(l, to, &v);
    } else {
        match write_list(ctx.srv, db, dst, now) {
            Ok(Some(d)) => push_end(d, to, &v),
            _ => {
                let mut d = List::new();
                d.push_back(&v);
                create_list(ctx, dst, d);
            }
        }
    }
    ctx.notify(NOTIFY_LIST, to.push_event(), dst);
    elements_removed(ctx, src, from);
    ctx.modified(1);
    ctx.out().bulk(&v);
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
fn lmpop(ctx: &mut Ctx, args: Args) {
    let Some(p) = parse_mpop(ctx, args, 1) else {
        return;
    };
    if !mpop_now(ctx, args, &p) {
        ctx.out().null_array();
    }
}

/// The parsed arguments of LMPOP/BLMPOP.
struct MPop {
    keys: std::ops::Range<usize>,
    end: End,
    count: usize,
}

/// Parses `numkeys key.. LEFT|RIGHT [COUNT n]` from `args[at..]`, with
/// Redis's errors and in its order.
fn parse_mpop(ctx: &mut Ctx, args: Args, at: usize) -> Option<MPop> {
    let numkeys = parse_positive(ctx, args.get(at), "ERR numkeys should be greater than 0")?;
    let where_idx = (at as i64).saturating_add(numkeys).saturating_add(1);
    if where_idx >= args.len() as i64 {
        ctx.error(err::SYNTAX);
        return None;
    }
    let where_idx = where_idx as usize;
    let end = parse_end(ctx, args.get(where_idx))?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(args.get(j), "count") && j + 1 < args.len() {
            j += 1;
            count = Some(parse_positive(
                ctx,
                args.get(j),
                "ERR count should be greater than 0",
            )?);
        } else {
            ctx.error(err::SYNTAX);
            return None;
        }
        j += 1;
    }
    Some(MPop {
        keys: at + 1..where_idx,
        end,
        count: count.unwrap_or(1) as usize,
    })
}

/// Pops from the first non-empty list among the keys, replying
/// `[key, [elements]]` and propagating `LPOP|RPOP key n`. False (nothing
/// replied) when every key is missing; a wrong type replies an error.
fn mpop_now(ctx: &mut Ctx, args: Args, p: &MPop) -> bool {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    for i in key_order(ctx, args, p.keys.clone()) {
        let key = args.get(i);
        let out = &mut ctx.client.out;
        let n = match write_list(ctx.srv, db, key, now) {
            Err(WrongType) => {
                out.error(err::WRONGTYPE);
                return true;
            }
            Ok(None) => continue,
            Ok(Some(l)) => {
                out.array(2);
                out.bulk(key);
                pop_into(l, p.end, p.count, out, true)
            }
        };
        elements_removed(ctx, key, p.end);
        // Its keys come after `numkeys`, where the command table's key
        // positions cannot point: WATCH learns of the change here.
        ctx.srv.touch_watched_key(db, key);
        ctx.modified(n as u64);
        let op: &[u8] = if p.end == End::Left { b"LPOP" } else { b"RPOP" };
        ctx.rewrite(&[op, key, n.to_string().as_bytes()]);
        return true;
    }
    false
}

// ---------------------------------------------------------------- blocking

/// Parses a blocking command's timeout (seconds, a double) into a deadline
/// in unix ms (`None` = forever), with Redis 7.0's errors
/// (`getTimeoutFromObjectOrReply`).
pub fn parse_timeout(ctx: &mut Ctx, a: &[u8]) -> Option<Option<i64>> {
    let secs = match super::parse_f64(a) {
        Some(v) => v,
        None => {
            // A number too large for a double is still a float to Redis
            // (`strtold`); it overflows the conversion to milliseconds and
            // comes out negative.
            match std::str::from_utf8(a)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
            {
                Some(v) if v.is_infinite() => {
                    ctx.error("ERR timeout is negative");
                    return None;
                }
                _ => {
                    ctx.error("ERR timeout is not a float or out of range");
                    return None;
                }
            }
        }
    };
    let ms = (secs * 1000.0).ceil();
    // `(long long)` of a value out of range is LLONG_MIN on x86-64.
    if !(0.0..9.223_372_036_854_775e18).contains(&ms) {
        ctx.error("ERR timeout is negative");
        return None;
    }
    let ms = ms as i64;
    if ms == 0 {
        return Some(None);
    }
    Some(Some(ctx.now_ms.saturating_add(ms)))
}

/// BLPOP key [key ...] timeout
fn blpop(ctx: &mut Ctx, args: Args) {
    blocking_pop(ctx, args, End::Left)
}

/// BRPOP key [key ...] timeout
fn brpop(ctx: &mut Ctx, args: Args) {
    blocking_pop(ctx, args, End::Right)
}

fn blocking_pop(ctx: &mut Ctx, args: Args, end: End) {
    let Some(deadline) = parse_timeout(ctx, args.get(args.len() - 1)) else {
        return;
    };
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let keys = 1..args.len() - 1;
    for i in key_order(ctx, args, keys.clone()) {
        let key = args.get(i);
        let out = &mut ctx.client.out;
        match write_list(ctx.srv, db, key, now) {
            Err(WrongType) => return out.error(err::WRONGTYPE),
            Ok(None) => continue,
            Ok(Some(l)) => {
                out.array(2);
                out.bulk(key);
                pop_into(l, end, 1, out, false);
            }
        }
        elements_removed(ctx, key, end);
        ctx.modified(1);
        let op: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
        ctx.rewrite(&[op, key]);
        return;
    }
    block_or_give_up(ctx, args, keys, deadline, false);
}

/// The order in which a multi-key pop tries its keys: argument order, but
/// when it runs again to be served, the key that became ready first.
fn key_order(ctx: &Ctx, args: Args, keys: std::ops::Range<usize>) -> Vec<usize> {
    let mut order: Vec<usize> = keys.collect();
    if let Some(ready) = ctx.srv.blocking.serving_key() {
        if let Some(p) = order.iter().position(|&i| args.get(i) == ready) {
            let i = order.remove(p);
            order.insert(0, i);
        }
    }
    order
}

/// Blocks the client on `keys`, or — inside MULTI/EXEC, where nothing may
/// block — answers as if the timeout had expired.
fn block_or_give_up(
    ctx: &mut Ctx,
    args: Args,
    keys: std::ops::Range<usize>,
    deadline: Option<i64>,
    null_bulk_when_denied: bool,
) {
    if !crate::blocking::may_block(ctx) {
        return if null_bulk_when_denied {
            ctx.out().null()
        } else {
            ctx.out().null_array()
        };
    }
    crate::blocking::block_for_keys(
        ctx,
        args,
        keys.map(|i| args.get(i)),
        ValueType::List,
        deadline,
    );
}

/// BRPOPLPUSH source destination timeout
fn brpoplpush(ctx: &mut Ctx, args: Args) {
    let Some(deadline) = parse_timeout(ctx, args.get(3)) else {
        return;
    };
    blocking_move(ctx, args, End::Right, End::Left, deadline, false)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
fn blmove(ctx: &mut Ctx, args: Args) {
    let Some(from) = parse_end(ctx, args.get(3)) else {
        return;
    };
    let Some(to) = parse_end(ctx, args.get(4)) else {
        return;
    };
    let Some(deadline) = parse_timeout(ctx, args.get(5)) else {
        return;
    };
    blocking_move(ctx, args, from, to, deadline, true)
}

fn blocking_move(
    ctx: &mut Ctx,
    args: Args,
    from: End,
    to: End,
    deadline: Option<i64>,
    lmove: bool,
) {
    let db = ctx.client.db;
    match write_list(ctx.srv, db, args.get(1), ctx.now_ms) {
        Err(WrongType) => ctx.error(err::WRONGTYPE),
        Ok(None) => block_or_give_up(ctx, args, 1..2, deadline, true),
        Ok(Some(_)) => {
            let dirty = ctx.srv.dirty;
            lmove_generic(ctx, args, from, to);
            if ctx.srv.dirty != dirty {
                if lmove {
                    ctx.rewrite(&[
                        b"LMOVE" as &[u8],
                        args.get(1),
                        args.get(2),
                        from.name(),
                        to.name(),
                    ]);
                } else {
                    ctx.rewrite(&[b"RPOPLPUSH" as &[u8], args.get(1), args.get(2)]);
                }
            }
        }
    }
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
fn blmpop(ctx: &mut Ctx, args: Args) {
    let Some(p) = parse_mpop(ctx, args, 2) else {
        return;
    };
    let Some(deadline) = parse_timeout(ctx, args.get(1)) else {
        return;
    };
    if !mpop_now(ctx, args, &p) {
        block_or_give_up(ctx, args, p.keys, deadline, false);
    }
}

#[cfg(test)]
mod tests {
    use super::clamp_range;

    #[test]
    fn ranges_clamp_as_redis_does() {
        assert_eq!(clamp_range(0, -1, 5), 0..5);
        assert_eq!(clamp_range(-100, 100, 5), 0..5);
        assert_eq!(clamp_range(3, 1, 5), 0..0);
        assert_eq!(clamp_range(5, 10, 5), 0..0);
        assert_eq!(clamp_range(-2, -1, 5), 3..5);
        assert_eq!(clamp_range(0, 0, 0), 0..0);
    }
}
