//! Streams, as Redis 7.0 answers them (t_stream.c): the commands on a
//! stream's entries here (XADD XTRIM XDEL XLEN XRANGE XREVRANGE XSETID),
//! XREAD and its blocking in [`read`]. The structure — nodes, IDs,
//! trimming, groups — is `ferrokv_store::stream`; these files parse, look
//! up, reply, notify and propagate.
//!
//! # Propagation
//! What replicas and the AOF get is deterministic, as in Redis: XADD with
//! the ID it generated; an approximate trim (`~`, which depends on node
//! boundaries and LIMIT) as the exact trim it amounted to (`=` and the
//! length, or the first remaining ID, it left), so a replica whose nodes
//! differ converges.
//!
//! # Hostile input
//! COUNT never sizes an allocation: replies are written entry by entry as
//! the range iterator yields them, and the work is the entries returned
//! (or, for XDEL and XREAD, the IDs and keys given).

pub mod groups;
pub mod info;
pub mod read;

use super::flags::*;
use super::{err, is, CommandSpec, Ctx, Typed};
use crate::notify::{NOTIFY_NEW, NOTIFY_STREAM};
use ferrokv_resp::Args;
use ferrokv_store::stream::{
    IdRequest, IdSyntax, NodeLimits, ParsedId, Stream, StreamId, Trim, TrimStrategy,
};
use ferrokv_store::{Value, ValueRef, NO_EXPIRE};
use std::sync::Arc;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("stream")
        .keys(1, 1, 1)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("xadd", -5, WRITE | DENYOOM | FAST, xadd).since("5.0.0").complexity("O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.").doc("Appends a new message to a stream. Creates the key if it doesn't exist.", "key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]"),
    cmd("xtrim", -4, WRITE, xtrim).since("5.0.0").complexity("O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.").doc("Deletes messages from the beginning of a stream.", "key MAXLEN|MINID [=|~] threshold [LIMIT count]"),
    cmd("xdel", -3, WRITE | FAST, xdel).since("5.0.0").complexity("O(1) for each single item to delete in the stream, regardless of the stream size.").doc("Returns the number of messages after removing them from a stream.", "key id [id ...]"),
    cmd("xlen", 2, READONLY | FAST, xlen).since("5.0.0").complexity("O(1)").doc("Return the number of messages in a stream.", "key"),
    cmd("xrange", -4, READONLY, xrange).since("5.0.0").complexity("O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).").doc("Returns the messages from a stream within a range of IDs.", "key start end [COUNT count]"),
    cmd("xrevrange", -4, READONLY, xrevrange).since("5.0.0").complexity("O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).").doc("Returns the messages from a stream within a range of IDs in reverse order.", "key end start [COUNT count]"),
    cmd("xsetid", -3, WRITE | DENYOOM | FAST, xsetid).since("5.0.0").complexity("O(1)").doc("An internal command for replicating stream values.", "key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]"),
    read::XREAD,
];

pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// The node limits `stream-node-max-bytes` / `-entries` set.
pub fn limits(ctx: &Ctx) -> NodeLimits {
    NodeLimits {
        max_bytes: usize::try_from(ctx.srv.config.stream_node_max_bytes).unwrap_or(usize::MAX),
        max_entries: ctx.srv.config.stream_node_max_entries,
    }
}

/// Redis's `mustObeyClient`: our master's stream and the AOF loader,
/// whose commands were already checked where they first ran.
pub fn must_obey(ctx: &Ctx) -> bool {
    ctx.srv.loading_aof || ctx.srv.repl.master_client_id() == Some(ctx.client.id)
}

/// Parses an ID argument (`syntax`), replying Redis's error when it is not
/// one.
pub fn parse_id(ctx: &mut Ctx, a: &[u8], syntax: IdSyntax) -> Option<ParsedId> {
    match StreamId::parse(a, syntax) {
        Ok(id) => Some(id),
        Err(_) => {
            ctx.error(INVALID_ID);
            None
        }
    }
}

/// A strict ID (`streamParseStrictIDOrReply`): no `-`, `+` or `ms-*`; a
/// bare `<ms>` is `<ms>-missing_seq`.
pub fn parse_strict(ctx: &mut Ctx, a: &[u8], missing_seq: u64) -> Option<StreamId> {
    match parse_id(ctx, a, IdSyntax::strict(missing_seq))? {
        ParsedId::Id(id) => Some(id),
        ParsedId::AutoSeq(_) => {
            ctx.error(INVALID_ID);
            None
        }
    }
}

/// The stream at `key` for reading (a keyspace hit or miss).
pub fn read_stream<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Typed<&'a Stream> {
    let db = ctx.client.db;
    super::read_as(ctx.srv, db, key, ctx.now_ms, |v| match v {
        ValueRef::Stream(s) => Some(s),
        _ => None,
    })
}

/// The stream at `key` to change (copied first if a snapshot shares it).
pub fn write_stream<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Typed<&'a mut Stream> {
    let db = ctx.client.db;
    match super::write_as(ctx.srv, db, key, ctx.now_ms, |v| match v {
        Value::Stream(s) => Some(s),
        _ => None,
    }) {
        Typed::Found(s) => Typed::Found(Arc::make_mut(s)),
        Typed::Missing => Typed::Missing,
        Typed::WrongType => Typed::WrongType,
    }
}

/// Writes the entries of `st` from `start` to `end` (inclusive; reversed
/// with `rev`), at most `count` of them (0: all), as Redis's
/// `streamReplyWithRange`: an array of `[id, [field, value, ...]]`.
/// Returns how many were written.
pub fn reply_range(
    out: &mut crate::net::client::Reply,
    st: &Stream,
    start: StreamId,
    end: StreamId,
    count: u64,
    rev: bool,
) -> usize {
    // The entries go to a scratch buffer first: their number is known at
    // the end (Redis defers the array length the same way).
    let mut body = Vec::new();
    let mut n = 0usize;
    for (id, pairs) in st.range(start, end, rev) {
        if count != 0 && n as u64 == count {
            break;
        }
        encode_entry(&mut body, id, pairs);
        n += 1;
        if out.buf.len().saturating_add(body.len()) > out.cap {
            out.overflowed = true;
            return n;
        }
    }
    out.array(n);
    out.buf.extend_from_slice(&body);
    n
}

/// A scratch reply for the per-stream parts of an XREAD/XREADGROUP
/// reply, whose count is known only at the end; it may use what is left
/// of the client's output limit.
pub fn scratch_reply(out: &crate::net::client::Reply) -> crate::net::client::Reply {
    crate::net::client::Reply {
        buf: Vec::new(),
        proto: out.proto,
        error_codes: Vec::new(),
        judged_errors: 0,
        cap: out.cap.saturating_sub(out.buf.len()),
        overflowed: false,
        push_spans: None,
    }
}

/// Writes the `served` streams collected in `body`: an array of
/// `[key, entries]` pairs in RESP2, a map of key to entries in RESP3.
pub fn emit_streams(
    out: &mut crate::net::client::Reply,
    body: crate::net::client::Reply,
    served: usize,
) {
    if body.overflowed {
        out.overflowed = true;
    }
    if out.proto == ferrokv_resp::encode::Protocol::Resp2 {
        out.array(served);
    } else {
        out.map(served);
    }
    out.buf.extend_from_slice(&body.buf);
}

/// One entry: `[id, [field, value, ...]]`.
pub fn encode_entry(buf: &mut Vec<u8>, id: StreamId, pairs: ferrokv_store::stream::Pairs<'_>) {
    use ferrokv_resp::encode;
    encode::array(buf, 2);
    encode::bulk(buf, &id.format());
    encode::array(buf, pairs.len() * 2);
    for (f, v) in pairs {
        encode::bulk(buf, f);
        encode::bulk(buf, v);
    }
}

/// A parsed XADD / XTRIM trimming clause and where its parts are.
struct TrimArgs {
    trim: Option<Trim>,
    /// Index of the threshold argument (rewritten for propagation).
    threshold_at: usize,
    /// Index of the `~` (rewritten to `=`), when given.
    approx_at: Option<usize>,
    nomkstream: bool,
    /// XADD: the ID argument's index.
    id_at: usize,
    /// XADD: the ID asked for (parsed where the options end, as Redis's
    /// option loop does, before the checks that follow it).
    request: IdRequest,
}

/// `streamParseAddOrTrimArgsOrReply`. `None` when it replied an error.
fn parse_add_or_trim(ctx: &mut Ctx, args: &Args, xadd: bool) -> Option<TrimArgs> {
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut approx_at = None;
    let mut threshold_at = 0;
    let mut limit: Option<i64> = None;
    let mut nomkstream = false;
    let mut request = IdRequest::Auto;
    let mut i = 2;
    const BOTH: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    while i < args.len() {
        let more = args.len() - 1 - i;
        let a = args.get(i);
        if xadd && a == b"*" {
            break;
        } else if (is(a, "maxlen") || is(a, "minid")) && more > 0 {
            if strategy.is_some() {
                ctx.error(BOTH);
                return None;
            }
            approx = false;
            approx_at = None;
            let next = args.get(i + 1);
            if more >= 2 && next == b"~" {
                approx = true;
                approx_at = Some(i + 1);
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let v = args.get(i + 1);
            if is(a, "maxlen") {
                let n = super::parse_int(ctx, v)?;
                if n < 0 {
                    ctx.error("ERR The MAXLEN argument must be >= 0.");
                    return None;
                }
                strategy = Some(TrimStrategy::MaxLen(n as u64));
            } else {
                strategy = Some(TrimStrategy::MinId(parse_strict(ctx, v, 0)?));
            }
            i += 1;
            threshold_at = i;
        } else if is(a, "limit") && more > 0 {
            let n = super::parse_int(ctx, args.get(i + 1))?;
            if n < 0 {
                ctx.error("ERR The LIMIT argument must be >= 0.");
                return None;
            }
            limit = Some(n);
            i += 1;
        } else if xadd && is(a, "nomkstream") {
            nomkstream = true;
        } else if xadd {
            // The ID (or a syntax error, which the ID parse reports).
            request = match parse_id(ctx, a, IdSyntax::XADD)? {
                ParsedId::AutoSeq(ms) => IdRequest::AutoSeq(ms),
                ParsedId::Id(id) => IdRequest::Explicit(id),
            };
            break;
        } else {
            ctx.error(err::SYNTAX);
            return None;
        }
        i += 1;
    }
    if limit.is_some() && strategy.is_none() {
        ctx.error("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy");
        return None;
    }
    if !xadd && strategy.is_none() {
        ctx.error("ERR syntax error, XTRIM must be called with a trimming strategy");
        return None;
    }
    let limit = if must_obey(ctx) {
        0
    } else if let Some(l) = limit {
        if !approx {
            ctx.error("ERR syntax error, LIMIT cannot be used without the special ~ option");
            return None;
        }
        l as u64
    } else if approx {
        let l = 100u64.saturating_mul(ctx.srv.config.stream_node_max_entries);
        if l == 0 || l > 10_000 {
            10_000
        } else {
            l
        }
    } else {
        0
    };
    Some(TrimArgs {
        trim: strategy.map(|strategy| Trim {
            strategy,
            approx,
            limit,
        }),
        threshold_at,
        approx_at,
        nomkstream,
        id_at: i,
        request,
    })
}

/// The propagated form of an approximate trim (`streamRewriteApproxSpecifier`
/// and `streamRewriteTrimArgument`): `=` for `~`, and the threshold the
/// stream now has — its length, or the ID of its first entry (deleted
/// ones included; the largest ID when it has none).
fn rewrite_trim(argv: &mut [Vec<u8>], t: &TrimArgs, st: &Stream) {
    let (Some(trim), Some(at)) = (t.trim, t.approx_at) else {
        return;
    };
    argv[at] = b"=".to_vec();
    argv[t.threshold_at] = match trim.strategy {
        TrimStrategy::MaxLen(_) => st.len().to_string().into_bytes(),
        TrimStrategy::MinId(_) => {
            let first = st.nodes().keys().next().copied().unwrap_or(StreamId::MAX);
            first.format().to_vec()
        }
    };
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
fn xadd(ctx: &mut Ctx, args: Args) {
    let Some(t) = parse_add_or_trim(ctx, &args, true) else {
        return;
    };
    let id_at = t.id_at;
    let fields_at = id_at + 1;
    let request = t.request;
    if args.len() < fields_at + 2 || !(args.len() - fields_at).is_multiple_of(2) {
        return ctx.wrong_args("xadd");
    }
    if matches!(request, IdRequest::Explicit(id) if id.is_zero()) {
        return ctx.error("ERR The ID specified in XADD must be greater than 0-0");
    }
    let key = args.get(1);
    let db = ctx.client.db;
    let limits = limits(ctx);
    let now = ctx.now_ms.max(0) as u64;
    let created = match write_stream(ctx, key) {
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Missing if t.nomkstream => return ctx.out().null(),
        Typed::Missing => true,
        Typed::Found(_) => false,
    };
    let mut fresh = Stream::new();
    let id = {
        let st: &mut Stream = if created {
            &mut fresh
        } else {
            match write_stream(ctx, key) {
                Typed::Found(s) => s,
                _ => unreachable!("looked up above"),
            }
        };
        let id = match st.next_id(request, now) {
            Ok(id) => id,
            Err(ferrokv_store::stream::NextIdError::Exhausted) => {
                return ctx.error(
                    "ERR The stream has exhausted the last possible ID, unable to add more items",
                )
            }
            Err(ferrokv_store::stream::NextIdError::NotGreater) => return ctx.error(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            ),
        };
        let pairs = (fields_at..args.len())
            .step_by(2)
            .map(|i| (args.get(i), args.get(i + 1)));
        if let Err(e) = st.append(id, pairs, limits) {
            return ctx.error(match e {
                ferrokv_store::stream::AppendError::IdNotGreater => {
                    "ERR The ID specified in XADD is equal or smaller than the target stream top item"
                }
                ferrokv_store::stream::AppendError::TooLarge => {
                    "ERR Elements are too large to be stored"
                }
            });
        }
        id
    };
    if created {
        let lru = ctx.srv.lru_clock;
        let v = Value::Stream(Arc::new(std::mem::take(&mut fresh)));
        ctx.srv.keyspace.dbs[db].upsert(key, v, NO_EXPIRE, lru);
        ctx.notify(NOTIFY_NEW, "new", key);
    }
    let formatted = id.format();
    ctx.out().bulk(&formatted);
    ctx.notify(NOTIFY_STREAM, "xadd", key);
    ctx.modified(1);
    // Propagated as sent unless the ID was generated (or a bare `<ms>`) or
    // the trim was approximate: then with the ID and the exact trim.
    let id_given = matches!(request, IdRequest::Explicit(_)) && args.get(id_at).contains(&b'-');
    let mut argv: Option<Vec<Vec<u8>>> = (!id_given).then(|| {
        let mut v: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        v[id_at] = formatted.to_vec();
        v
    });
    if let Some(trim) = t.trim {
        let Typed::Found(st) = write_stream(ctx, key) else {
            unreachable!("just written")
        };
        let removed = st.trim(trim);
        if trim.approx {
            let v = argv.get_or_insert_with(|| args.iter().map(|a| a.to_vec()).collect());
            rewrite_trim(v, &t, st);
        }
        if removed > 0 {
            ctx.notify(NOTIFY_STREAM, "xtrim", key);
        }
    }
    if let Some(v) = argv {
        ctx.rewrite(&v);
    }
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(ctx: &mut Ctx, args: Args) {
    let Some(t) = parse_add_or_trim(ctx, &args, false) else {
        return;
    };
    let key = args.get(1);
    let trim = t.trim.expect("XTRIM has a strategy");
    let (removed, argv) = match write_stream(ctx, key) {
        Typed::Missing => return ctx.out().int(0),
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Found(st) => {
            let removed = st.trim(trim);
            let mut argv: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
            rewrite_trim(&mut argv, &t, st);
            (removed, argv)
        }
    };
    if removed > 0 {
        ctx.notify(NOTIFY_STREAM, "xtrim", key);
        ctx.modified(removed);
        if trim.approx {
            ctx.rewrite(&argv);
        }
    }
    ctx.out().int(removed as i64);
}

/// XDEL key id [id ...]
fn xdel(ctx: &mut Ctx, args: Args) {
    let key = args.get(1);
    match read_for_write(ctx, key) {
        Typed::Missing => return ctx.out().int(0),
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Found(()) => {}
    }
    // Every ID is checked before any is deleted.
    let mut ids = Vec::new();
    for a in args.iter().skip(2) {
        let Some(id) = parse_strict(ctx, a, 0) else {
            return;
        };
        ids.push(id);
    }
    let Typed::Found(st) = write_stream(ctx, key) else {
        unreachable!("looked up above")
    };
    let deleted = ids.iter().filter(|&&id| st.delete(id)).count();
    if deleted > 0 {
        ctx.notify(NOTIFY_STREAM, "xdel", key);
        ctx.modified(deleted as u64);
    }
    ctx.out().int(deleted as i64);
}

/// Whether `key` holds a stream, through a write lookup (no copy made).
fn read_for_write(ctx: &mut Ctx, key: &[u8]) -> Typed<()> {
    let db = ctx.client.db;
    match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => Typed::Missing,
        Some(e) if matches!(e.value(), ValueRef::Stream(_)) => Typed::Found(()),
        Some(_) => Typed::WrongType,
    }
}

/// XLEN key
fn xlen(ctx: &mut Ctx, args: Args) {
    let n = match read_stream(ctx, args.get(1)) {
        Typed::Missing => 0,
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Found(st) => st.len(),
    };
    ctx.out().int(n as i64);
}

/// XRANGE key start end [COUNT count]
fn xrange(ctx: &mut Ctx, args: Args) {
    range_generic(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count]
fn xrevrange(ctx: &mut Ctx, args: Args) {
    range_generic(ctx, args, true)
}

/// A range bound: `(` makes it exclusive (Redis's `exclude`), then an ID,
/// `-` or `+`; a bare `<ms>` takes `missing_seq`.
pub fn parse_bound(ctx: &mut Ctx, a: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
    let (a, exclusive) = if a.len() > 1 && a[0] == b'(' {
        (&a[1..], true)
    } else {
        (a, false)
    };
    // An exclusive bound must be an ID: `(-` and `(+` are not.
    if exclusive && (a == b"-" || a == b"+") {
        ctx.error(INVALID_ID);
        return None;
    }
    match parse_id(ctx, a, IdSyntax::range(missing_seq))? {
        ParsedId::Id(id) => Some((id, exclusive)),
        ParsedId::AutoSeq(_) => {
            ctx.error(INVALID_ID);
            None
        }
    }
}

fn range_generic(ctx: &mut Ctx, args: Args, rev: bool) {
    let (start_arg, end_arg) = if rev {
        (args.get(3), args.get(2))
    } else {
        (args.get(2), args.get(3))
    };
    let Some((mut start, startex)) = parse_bound(ctx, start_arg, 0) else {
        return;
    };
    if startex {
        match start.incr() {
            Some(s) => start = s,
            None => return ctx.error("ERR invalid start ID for the interval"),
        }
    }
    let Some((mut end, endex)) = parse_bound(ctx, end_arg, u64::MAX) else {
        return;
    };
    if endex {
        match end.decr() {
            Some(e) => end = e,
            None => return ctx.error("ERR invalid end ID for the interval"),
        }
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(args.get(j), "count") && j + 1 < args.len() {
            let Some(n) = super::parse_int(ctx, args.get(j + 1)) else {
                return;
            };
            count = n.max(0);
            j += 2;
        } else {
            return ctx.error(err::SYNTAX);
        }
    }
    let db = ctx.client.db;
    let Some(e) = ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) else {
        return ctx.out().array(0);
    };
    let ValueRef::Stream(st) = e.value() else {
        return ctx.error(err::WRONGTYPE);
    };
    if count == 0 {
        return ctx.client.out.null_array();
    }
    let count = if count < 0 { 0 } else { count as u64 };
    reply_range(&mut ctx.client.out, st, start, end, count, rev);
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
fn xsetid(ctx: &mut Ctx, args: Args) {
    let Some(id) = parse_strict(ctx, args.get(2), 0) else {
        return;
    };
    let mut entries_added: Option<u64> = None;
    let mut max_deleted: Option<StreamId> = None;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let a = args.get(i);
        if is(a, "entriesadded") && more > 0 {
            let Some(n) = super::parse_int(ctx, args.get(i + 1)) else {
                return;
            };
            if n < 0 {
                return ctx.error("ERR entries_added must be positive");
            }
            entries_added = Some(n as u64);
        } else if is(a, "maxdeletedid") && more > 0 {
            let Some(m) = parse_strict(ctx, args.get(i + 1), 0) else {
                return;
            };
            if id < m {
                return ctx.error(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                );
            }
            max_deleted = Some(m);
        } else {
            return ctx.error(err::SYNTAX);
        }
        i += 2;
    }
    let key = args.get(1);
    let st = match write_stream(ctx, key) {
        Typed::Missing => return ctx.error("ERR no such key"),
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Found(st) => st,
    };
    // (Redis 7.0.15 does not compare the ID with the current largest
    // deleted ID; later versions refuse one below it.)
    if !st.is_empty() {
        let top = st.last_live_id().unwrap_or(StreamId::MIN);
        if id < top {
            return ctx.error(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if entries_added.is_some_and(|n| st.len() > n) {
            return ctx.error(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
    }
    st.set_id(id, entries_added, max_deleted.filter(|m| !m.is_zero()));
    ctx.notify(NOTIFY_STREAM, "xsetid", key);
    ctx.modified(1);
    ctx.out().ok();
}
