//! SORT and SORT_RO, as Redis 7.0 answers them (sort.c): the elements of
//! a list, set or sorted set, ordered numerically (or with `ALPHA` as
//! bytes) by themselves or by the keys a `BY` pattern names (`*` is the
//! element; `key->field` reads a hash field), cut by `LIMIT`, with the
//! values `GET` patterns name (`#` is the element itself) in place of the
//! elements, or stored as a list (`STORE`).
//!
//! A `BY` pattern with no `*` means "do not sort": lists and sorted sets
//! keep their order (reversed by `DESC`), and a set is sorted `ALPHA`
//! anyway when the result is stored, as Redis does so that replicas and
//! the AOF get the same list. A score that does not parse as a double is
//! Redis's "One or more scores can't be converted into double". Equal
//! sort values keep the order the elements were read in (a stable sort).
//!
//! # Hostile input
//!
//! The work is the source's size times the patterns given (each a key
//! lookup), as in Redis; `LIMIT` is clamped to the source, never
//! allocated from.

use super::flags::*;
use super::{err, is, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_LIST, NOTIFY_NEW};
use ferrokv_resp::Args;
use ferrokv_store::set::MemberText;
use ferrokv_store::value::itoa_buf;
use ferrokv_store::{Value, ValueRef, NO_EXPIRE};
use std::cmp::Ordering;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sort", -2, WRITE | DENYOOM, sort)
        .group("generic")
        .keys(1, 1, 1)
        .since("1.0.0")
        .complexity("O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).")
        .doc(
            "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.",
            "key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC|DESC] [ALPHA] [STORE destination]",
        ),
    CommandSpec::new("sort_ro", -2, READONLY, sort_ro)
        .group("generic")
        .keys(1, 1, 1)
        .since("7.0.0")
        .complexity("O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).")
        .doc(
            "Returns the sorted elements of a list, a set, or a sorted set.",
            "key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC|DESC] [ALPHA]",
        ),
];

fn sort(ctx: &mut Ctx, args: Args) {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx, args: Args) {
    sort_generic(ctx, args, true)
}

/// One element and what it sorts by. The element borrows from the source
/// (a shared handle of it, so nothing is copied to sort).
struct Item<'a> {
    elem: MemberText<'a>,
    score: f64,
    /// The `BY` value of an `ALPHA` sort by pattern (`None`: no such key).
    by: Option<Vec<u8>>,
}

/// The value `pattern` names for `elem` (Redis's `lookupKeyByPattern`):
/// `#` is the element; otherwise the first `*` is replaced by it, and a
/// `->field` after the `*` reads that hash field instead of a string.
fn lookup_by_pattern(ctx: &mut Ctx, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let (post, field) = match after.windows(2).position(|w| w == b"->") {
        Some(f) if f + 2 < after.len() => (&after[..f], Some(&after[f + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(star + elem.len() + post.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let e = ctx.srv.lookup_read(db, &key, now)?;
    match (e.value(), field) {
        // A field whose TTL passed is not there (not removed here).
        (ValueRef::Hash(h), Some(f)) => h.get_live(f, now).map(|v| v.to_vec()),
        (v, None) => {
            let mut buf = itoa_buf::Buf::new();
            v.as_bytes(&mut buf).map(|b| b.to_vec())
        }
        _ => None,
    }
}

/// C's `strtod` over the whole string (Redis's check: all of it consumed,
/// no overflow, not NaN).
fn parse_score(s: &[u8]) -> Option<f64> {
    // The common case first: a plain integer (exact as a double up to
    // 2^53, and what strtod gives beyond).
    if let Some(i) = ferrokv_resp::parse_i64(s) {
        return Some(i as f64);
    }
    // strtod reads a C string: it ends at the first NUL, and an empty one
    // is a score of 0 (nothing parsed, and the end is right there).
    let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    if s.is_empty() {
        return Some(0.0);
    }
    let t = std::str::from_utf8(s).ok()?;
    // strtod skips leading white space; Rust's parser does not.
    let t = t.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    if t.is_empty() {
        return None;
    }
    let v: f64 = match t.parse() {
        Ok(v) => v,
        Err(_) => hex_float(t)?,
    };
    if v.is_nan() || (v.is_infinite() && !t.to_ascii_lowercase().contains("inf")) {
        return None;
    }
    Some(v)
}

/// strtod's hexadecimal form: `[+-]0x<hex>[.<hex>][p[+-]<dec>]`, all of it.
fn hex_float(t: &str) -> Option<f64> {
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    let (mant, exp) = match t.find(['p', 'P']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let (int, frac) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    if let Some(e) = exp {
        let e: i32 = e.parse().ok()?;
        v *= 2f64.powi(e);
    }
    Some(if neg { -v } else { v })
}

fn sort_generic(ctx: &mut Ctx, args: Args, readonly: bool) {
    let (mut desc, mut alpha) = (false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut store: Option<&[u8]> = None;
    let mut by: Option<&[u8]> = None;
    let mut dontsort = false;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args.get(j);
        if is(a, "asc") {
            desc = false;
        } else if is(a, "desc") {
            desc = true;
        } else if is(a, "alpha") {
            alpha = true;
        } else if is(a, "limit") && left >= 2 {
            let (Some(s), Some(c)) = (
                ferrokv_resp::parse_i64(args.get(j + 1)),
                ferrokv_resp::parse_i64(args.get(j + 2)),
            ) else {
                return ctx.error(err::NOT_INTEGER);
            };
            limit_start = s;
            limit_count = c;
            j += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            store = Some(args.get(j + 1));
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = args.get(j + 1);
            by = Some(p);
            dontsort = !p.contains(&b'*');
            j += 1;
        } else if is(a, "get") && left >= 1 {
            gets.push(args.get(j + 1));
            j += 1;
        } else {
            return ctx.error(err::SYNTAX);
        }
        j += 1;
    }
    let db = ctx.client.db;
    let key = args.get(1);
    // Redis converts a listpack sorted set to a skiplist for good before
    // it sorts it (`zsetConvert` in sortCommandGeneric): OBJECT ENCODING
    // shows it afterwards, so do the same.
    let listpack_zset = matches!(
        ctx.srv.lookup_read(db, key, ctx.now_ms).map(|e| e.value()),
        Some(ValueRef::ZSet(z)) if z.is_listpack()
    );
    if listpack_zset {
        if let Some(e) = ctx.srv.lookup_write(db, key, ctx.now_ms) {
            if let Some(Value::ZSet(z)) = e.value_mut() {
                std::sync::Arc::make_mut(z).convert_to_skiplist();
            }
        }
    }
    // The source's elements, in its own order, borrowed from a handle of
    // it (the BY and GET lookups below need the keyspace meanwhile).
    let source: Option<Value> = match ctx.srv.lookup_read(db, key, ctx.now_ms) {
        None => None,
        Some(e) => match e.value() {
            ValueRef::List(_) | ValueRef::Set(_) | ValueRef::ZSet(_) => e.shared_collection(),
            _ => return ctx.error(err::WRONGTYPE),
        },
    };
    let (mut elems, is_set, ordered): (Vec<MemberText>, bool, bool) = match &source {
        None => (Vec::new(), false, true),
        Some(Value::List(l)) => (l.iter().map(MemberText::Bytes).collect(), false, true),
        Some(Value::Set(s)) => (s.iter().map(|m| m.text()).collect(), true, false),
        Some(Value::ZSet(z)) => (
            z.iter().map(|(m, _)| MemberText::Bytes(m)).collect(),
            false,
            true,
        ),
        Some(_) => unreachable!("shared_collection gives collections only"),
    };
    if dontsort && is_set && store.is_some() {
        // Stored results must not depend on a set's iteration order.
        dontsort = false;
        alpha = true;
        by = None;
    }
    let len = elems.len() as i64;
    let mut start = limit_start.max(0);
    let mut end = if limit_count < 0 {
        len - 1
    } else {
        start.saturating_add(limit_count).saturating_sub(1)
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    if dontsort && ordered && desc {
        // Lists and sorted sets keep their order, reversed by DESC.
        elems.reverse();
    }
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            by: None,
        })
        .collect();
    let mut bad_score = false;
    if !dontsort {
        for it in items.iter_mut() {
            match by {
                Some(p) => {
                    let Some(val) = lookup_by_pattern(ctx, p, it.elem.as_ref()) else {
                        continue;
                    };
                    if alpha {
                        it.by = Some(val);
                    } else {
                        match parse_score(&val) {
                            Some(s) => it.score = s,
                            None => bad_score = true,
                        }
                    }
                }
                // By the element itself: nothing to copy.
                None if !alpha => match parse_score(it.elem.as_ref()) {
                    Some(s) => it.score = s,
                    None => bad_score = true,
                },
                None => {}
            }
        }
        let by_pattern = by.is_some();
        // ALPHA compares as Redis does: binary when storing
        // (compareStringObjects), else strcoll on C strings, which end at
        // the first NUL (the C locale: byte order up to there).
        let stored = store.is_some();
        let text = |x: &[u8], y: &[u8]| {
            if stored {
                x.cmp(y)
            } else {
                let cut = |v: &[u8]| v.iter().position(|&c| c == 0).unwrap_or(v.len());
                x[..cut(x)].cmp(&y[..cut(y)])
            }
        };
        let cmp = |a: &Item, b: &Item| {
            let c = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.elem.as_ref().cmp(b.elem.as_ref()))
            } else if by_pattern {
                match (&a.by, &b.by) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => text(x, y),
                }
            } else {
                text(a.elem.as_ref(), b.elem.as_ref())
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        if !alpha && !by_pattern {
            // A total order (ties broken by the element; equal elements
            // are indistinguishable): an unstable sort gives the same, and
            // so does ordering only what LIMIT keeps: the first `end + 1`
            // selected, then sorted (O(n + k log k)).
            let keep = end + 1;
            if end >= start && start >= 0 && (keep as usize) < items.len() {
                items.select_nth_unstable_by(end as usize, cmp);
                items[..keep as usize].sort_unstable_by(cmp);
            } else {
                items.sort_unstable_by(cmp);
            }
        } else {
            items.sort_by(cmp);
        }
    }
    if bad_score {
        return ctx.error("ERR One or more scores can't be converted into double");
    }
    let range: &[Item] = if end >= start && start >= 0 {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    // The output: the elements, or each GET's value per element.
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for it in range {
        if gets.is_empty() {
            out.push(Some(it.elem.as_ref().to_vec()));
        }
        for g in &gets {
            out.push(lookup_by_pattern(ctx, g, it.elem.as_ref()));
        }
    }
    let Some(dst) = store else {
        ctx.client.out.array(out.len());
        for v in out {
            match v {
                Some(b) => ctx.client.out.bulk(&b),
                None => ctx.client.out.null(),
            }
        }
        return;
    };
    let n = out.len();
    // WATCHes on the destination break when it changes (the source is
    // only read): an empty result on a missing destination changes nothing.
    if n > 0 {
        ctx.srv.touch_watched_key(db, dst);
        let list: ferrokv_store::list::List =
            out.iter().map(|v| v.as_deref().unwrap_or(b"")).collect();
        let lru = ctx.srv.lru_clock;
        let value = Value::List(std::sync::Arc::new(list));
        match ctx.srv.keyspace.dbs[db].upsert(dst, value, NO_EXPIRE, lru) {
            Some(old) => ctx.srv.drop_value(old),
            None => ctx.notify(NOTIFY_NEW, "new", dst),
        }
        ctx.srv.blocking.signal(dst);
        ctx.notify(NOTIFY_LIST, "sortstore", dst);
        ctx.modified(n as u64);
    } else if ctx.srv.exists(db, dst, ctx.now_ms) {
        ctx.srv.touch_watched_key(db, dst);
        if let Some(old) = ctx.srv.keyspace.dbs[db].remove(dst) {
            ctx.srv.drop_value(old);
        }
        ctx.notify(NOTIFY_GENERIC, "del", dst);
        ctx.modified(1);
    }
    ctx.client.out.int(n as i64);
}
