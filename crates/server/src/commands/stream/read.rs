//! XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
//! (Redis 7.0's `xreadCommand` without a group), and its blocking.
//!
//! A read serves at once every stream that has an entry above its ID; with
//! none and `BLOCK`, the client waits in the blocking machinery
//! (`crate::blocking`) on all its keys. `$` is resolved to the stream's
//! last ID when the client blocks: the command kept for running again
//! holds the resolved IDs, so an entry added meanwhile is what serves it.
//! `+` (Redis 7.4) reads the stream's last entry: it is resolved to the ID
//! just below it (0-0 for an empty or missing stream, so a blocked read
//! is served by the first entry added).
//! Run again for a key that became ready, it answers for that key alone
//! (as Redis serves the key that was signalled), and a stream whose new
//! entries are not above the ID waited for (an XADD with an explicit small
//! ID cannot happen, but a key replaced by another stream can) blocks
//! again with its first deadline. Inside MULTI/EXEC and scripts it never
//! blocks: it answers as a timeout would.

use super::{parse_strict, reply_range, CommandSpec};
use crate::commands::flags::*;
use crate::commands::{err, is, Ctx};
use ferrokv_resp::Args;
use ferrokv_store::stream::StreamId;
use ferrokv_store::{ValueRef, ValueType};

pub const XREAD: CommandSpec = CommandSpec::new("xread", -4, READONLY | BLOCKING, xread)
    .group("stream")
    .keys(0, 0, 0)
    .since("5.0.0")
    .complexity("For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.")
    .doc(
        "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
        "[COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]",
    );

/// `getTimeoutFromObjectOrReply` in milliseconds: an integer, not
/// negative; 0 waits forever. `None` when it replied an error.
pub fn parse_block_ms(ctx: &mut Ctx, a: &[u8]) -> Option<Option<i64>> {
    let Some(ms) = ferrokv_resp::parse_i64(a) else {
        ctx.error("ERR timeout is not an integer or out of range");
        return None;
    };
    if ms < 0 {
        ctx.error("ERR timeout is negative");
        return None;
    }
    if ms == 0 {
        return Some(None);
    }
    Some(Some(ctx.now_ms.saturating_add(ms)))
}

fn xread(ctx: &mut Ctx, args: Args) {
    let mut count: u64 = 0;
    let mut block: Option<Option<i64>> = None;
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let a = args.get(i);
        if is(a, "block") && more > 0 {
            if ctx.srv.scripting.running.is_some() {
                return ctx
                    .error("ERR xread command is not allowed with BLOCK option from scripts");
            }
            i += 1;
            match parse_block_ms(ctx, args.get(i)) {
                Some(d) => block = Some(d),
                None => return,
            }
        } else if is(a, "count") && more > 0 {
            i += 1;
            let Some(n) = crate::commands::parse_int(ctx, args.get(i)) else {
                return;
            };
            count = n.max(0) as u64;
        } else if is(a, "group") && more >= 2 {
            return ctx.error(
                "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
            );
        } else if is(a, "noack") {
            return ctx.error(
                "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
            );
        } else if is(a, "streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                return ctx.error("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.");
            }
            break;
        } else {
            return ctx.error(err::SYNTAX);
        }
        i += 1;
    }
    if streams_at == 0 {
        return ctx.error(err::SYNTAX);
    }
    let n = (args.len() - streams_at) / 2;
    let db = ctx.client.db;
    // The IDs, `$` resolved; every key checked for its type first.
    let mut ids: Vec<StreamId> = Vec::new();
    for k in 0..n {
        let key = args.get(streams_at + k);
        let a = args.get(streams_at + n + k);
        // `$`: the stream's last ID; `+` (Redis 7.4): just below its last
        // live entry, so that entry is read (0-0 for an empty stream). The
        // type is checked whatever the ID.
        let resolved = match ctx.srv.lookup_read(db, key, ctx.now_ms).map(|e| e.value()) {
            Some(ValueRef::Stream(st)) if a == b"$" => Some(st.last_id()),
            Some(ValueRef::Stream(st)) if a == b"+" => Some(
                st.last_live_id()
                    .and_then(StreamId::decr)
                    .unwrap_or(StreamId::MIN),
            ),
            None if a == b"$" || a == b"+" => Some(StreamId::MIN),
            None | Some(ValueRef::Stream(_)) => None,
            Some(_) => return ctx.error(err::WRONGTYPE),
        };
        if let Some(id) = resolved {
            ids.push(id);
            continue;
        }
        if a == b">" {
            return ctx.error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
        }
        let Some(id) = parse_strict(ctx, a, 0) else {
            return;
        };
        ids.push(id);
    }
    // Run again for a ready key: that key alone.
    let only = ctx.srv.blocking.serving_key().map(|k| k.to_vec());
    let mut served = 0usize;
    let mut body = super::scratch_reply(&ctx.client.out);
    for (k, &gt) in ids.iter().enumerate() {
        let key = args.get(streams_at + k);
        if only.as_deref().is_some_and(|o| o != key) {
            continue;
        }
        let Some(e) = ctx.srv.lookup_read(db, key, ctx.now_ms) else {
            continue;
        };
        let ValueRef::Stream(st) = e.value() else {
            continue;
        };
        if st.is_empty() {
            continue;
        }
        // The last live entry must be above the ID.
        let Some(top) = st.last_live_id() else {
            continue;
        };
        if top <= gt {
            continue;
        }
        let start = gt.incr().unwrap_or(StreamId::MAX);
        served += 1;
        if body.proto == ferrokv_resp::encode::Protocol::Resp2 {
            body.array(2);
        }
        body.bulk(key);
        reply_range(&mut body, st, start, StreamId::MAX, count, false);
    }
    if served > 0 {
        super::emit_streams(&mut ctx.client.out, body, served);
        return;
    }
    let Some(deadline) = block else {
        return ctx.client.out.null_array();
    };
    if !crate::blocking::may_block(ctx) {
        return ctx.client.out.null_array();
    }
    // Blocked again after running for a ready key: the first deadline.
    let deadline = ctx.srv.blocking.serving_deadline().unwrap_or(deadline);
    // The command to run again: `$` replaced by the IDs it meant now, and
    // BLOCK's time kept (the deadline above is what counts).
    let mut argv: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    for (k, id) in ids.iter().enumerate() {
        argv[streams_at + n + k] = id.format().to_vec();
    }
    let mut flat = Vec::new();
    let mut ranges = Vec::with_capacity(argv.len());
    for a in &argv {
        ranges.push((flat.len(), a.len()));
        flat.extend_from_slice(a);
    }
    let keys: Vec<Vec<u8>> = (0..n).map(|k| args.get(streams_at + k).to_vec()).collect();
    crate::blocking::block_for_keys(
        ctx,
        Args::new(&flat, &ranges),
        keys.iter().map(|k| k.as_slice()),
        ValueType::Stream,
        deadline,
    );
}
