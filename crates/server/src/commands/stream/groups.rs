//! Consumer groups, as Redis 7.0.15 answers them (t_stream.c): XGROUP
//! (CREATE CREATECONSUMER DELCONSUMER DESTROY SETID HELP), XREADGROUP
//! with BLOCK, XACK, XPENDING, XCLAIM, XAUTOCLAIM. The group state and its
//! rules are `ferrokv_store::stream` (`group.rs`); these handlers parse,
//! look up, reply, notify and propagate.
//!
//! # Propagation
//! As in 7.0, the reads and claims never propagate themselves: what a
//! replica gets is the effect, entry by entry, so it converges whatever
//! its clock and its own consumers say.
//! - Each entry XREADGROUP delivers (and each one XCLAIM / XAUTOCLAIM
//!   claims) is `XCLAIM key group consumer 0 id TIME <ms> RETRYCOUNT <n>
//!   FORCE JUSTID LASTID <group last id>` with the NACK's state after the
//!   change (`streamPropagateXCLAIM`); a pending ID whose entry is gone
//!   goes as the same XCLAIM with the NACK as it was before it was
//!   dropped (the replica's XCLAIM drops it too).
//! - XREADGROUP NOACK delivers without NACKs: it propagates the group's
//!   new position, `XGROUP SETID key group <id> ENTRIESREAD <n>`, preceded
//!   by `XGROUP CREATECONSUMER` when the read created the consumer. Reads
//!   without NOACK propagate no SETID (7.0.15 does not; the replica's
//!   `entries_read` then lags, as Redis's does).
//! - XCLAIM with a LASTID that moved the group and claimed nothing
//!   propagates that SETID.
//! - Several commands go out as one MULTI/EXEC block, as 7.0's
//!   `propagatePendingCommands` wraps them; inside EXEC or a script they
//!   join its block ([`propagate_instead`]).
//! - XACK and the XGROUP subcommands propagate as sent.
//!
//! # Blocking
//! Only `>` blocks. The waiter is parked with
//! `blocking::block_for_keys_on_any_change`, so any write on its key runs
//! it again: new entries serve it, a key deleted or replaced by another
//! type answers `-UNBLOCKED the stream key no longer exists`, a destroyed
//! group `-NOGROUP the consumer group this client was blocked on no longer
//! exists` (what 7.0.15 replies), and anything else blocks it again with
//! its first deadline.

use super::{encode_entry, parse_bound, parse_id, parse_strict, read::parse_block_ms};
use super::{read_stream, write_stream};
use crate::commands::flags::*;
use crate::commands::{err, is, parse_int, reply_help, CommandSpec, Ctx, Typed};
use crate::notify::{NOTIFY_NEW, NOTIFY_STREAM};
use ferrokv_resp::encode::{self, Protocol};
use ferrokv_resp::Args;
use ferrokv_store::stream::{
    AutoClaimOptions, ClaimOptions, ConsumerGroup, IdSyntax, Nack, ParsedId, Stream, StreamId,
    ENTRIES_READ_INVALID,
};
use ferrokv_store::{Value, ValueRef, ValueType, NO_EXPIRE};
use std::sync::Arc;

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    h: crate::commands::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("stream")
        .keys(1, 1, 1)
        .since("5.0.0")
}

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    h: crate::commands::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("stream")
        .keys(2, 2, 1)
        .since("5.0.0")
}

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("xgroup", -2, 0, xgroup_help).group("stream").since("5.0.0").complexity("Depends on subcommand.").doc("A container for consumer groups commands", "").subs(XGROUP_SUBS),
    CommandSpec::new("xreadgroup", -7, WRITE | BLOCKING, xreadgroup).group("stream").since("5.0.0").complexity("For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.").doc("Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", "GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key [key ...] id [id ...]"),
    cmd("xack", -4, WRITE | FAST, xack).complexity("O(1) for each message ID processed.").doc("Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", "key group id [id ...]"),
    cmd("xpending", -3, READONLY, xpending).complexity("O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.").doc("Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", "key group [[IDLE min-idle-time] start end count [consumer]]"),
    cmd("xclaim", -6, WRITE | FAST, xclaim).complexity("O(log N) with N being the number of messages in the PEL of the consumer group.").doc("Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", "key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]"),
    cmd("xautoclaim", -6, WRITE | FAST, xautoclaim).since("6.2.0").complexity("O(1) if COUNT is small.").doc("Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", "key group consumer min-idle-time start [COUNT count] [JUSTID]"),
];

static XGROUP_SUBS: &[CommandSpec] = &[
    sub("xgroup|create", -5, WRITE | DENYOOM, xgroup_create).doc(
        "Create a consumer group.",
        "key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]",
    ),
    sub(
        "xgroup|createconsumer",
        5,
        WRITE | DENYOOM,
        xgroup_createconsumer,
    )
    .since("6.2.0")
    .doc(
        "Create a consumer in a consumer group.",
        "key group consumer",
    ),
    sub("xgroup|delconsumer", 5, WRITE, xgroup_delconsumer).doc(
        "Delete a consumer from a consumer group.",
        "key group consumer",
    ),
    sub("xgroup|destroy", 4, WRITE, xgroup_destroy)
        .complexity(
            "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        )
        .doc("Destroy a consumer group.", "key group"),
    sub("xgroup|setid", -5, WRITE, xgroup_setid).doc(
        "Set a consumer group to an arbitrary last delivered ID value.",
        "key group id|$ [ENTRIESREAD entries-read]",
    ),
    CommandSpec::new("xgroup|help", 2, LOADING | STALE, xgroup_help)
        .group("stream")
        .since("5.0.0")
        .doc("Show helpful text about the different subcommands", ""),
];

/// The time stamps groups keep (delivery, seen-time): the server's clock,
/// also when the master's stream runs (whose `ctx.now_ms` is 0 so that
/// keys live until the master deletes them).
fn clock_ms(ctx: &Ctx) -> i64 {
    ctx.srv.now_ms
}

/// The stream at `key` to change, borrowing only the server (so the
/// client's reply buffer stays free); `None` unless a stream is there.
fn stream_mut<'a>(
    srv: &'a mut crate::server::Server,
    db: usize,
    key: &[u8],
    now: i64,
) -> Option<&'a mut Stream> {
    match crate::commands::write_as(srv, db, key, now, |v| match v {
        Value::Stream(s) => Some(s),
        _ => None,
    }) {
        Typed::Found(s) => Some(Arc::make_mut(s)),
        _ => None,
    }
}

/// An error reply built from text and argument bytes (Redis's `%s`).
fn error_with(ctx: &mut Ctx, parts: &[&[u8]]) {
    let msg: Vec<u8> = parts.concat();
    ctx.client.out.error_bytes(&msg);
}

/// A name as C's `%s` prints it in Redis's formatted errors: up to its
/// first NUL byte.
fn c_str(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

fn nogroup(ctx: &mut Ctx, key: &[u8], group: &[u8]) {
    error_with(
        ctx,
        &[
            b"NOGROUP No such key '",
            c_str(key),
            b"' or consumer group '",
            c_str(group),
            b"'",
        ],
    );
}

/// `addReplySubcommandSyntaxError`.
fn subcommand_syntax(ctx: &mut Ctx, container: &str, sub: &[u8]) {
    let sub = &sub[..sub.len().min(128)];
    error_with(
        ctx,
        &[
            b"ERR unknown subcommand or wrong number of arguments for '",
            sub,
            format!("'. Try {container} HELP.").as_bytes(),
        ],
    );
}

/// Sends `cmds` down the propagation stream instead of the command
/// itself (Redis's `alsoPropagate` plus `preventCommandPropagation`):
/// several go as one MULTI/EXEC block; inside EXEC or a script they join
/// its block. With none, nothing is propagated although `dirty` moved.
pub fn propagate_instead(ctx: &mut Ctx, cmds: Vec<Vec<Vec<u8>>>) {
    let db = ctx.client.db;
    let srv = &mut *ctx.srv;
    let nested = srv.propagation.exec_ops.is_some();
    if !nested {
        srv.begin_exec_propagation();
        // Keys this command found expired go first, in the same block.
        for (edb, argv) in std::mem::take(&mut srv.propagation.also) {
            srv.propagate(edb, &argv);
        }
    }
    let any = !cmds.is_empty();
    for argv in cmds {
        srv.propagate_owned(db, argv);
    }
    if nested {
        srv.propagation.exec_done = Some(any);
    } else {
        srv.end_exec_propagation();
    }
}

/// `streamPropagateXCLAIM`.
fn xclaim_argv(
    key: &[u8],
    group: &[u8],
    id: StreamId,
    nack: &Nack,
    last_id: StreamId,
) -> Vec<Vec<u8>> {
    let id_text = id.format().to_vec();
    let last_text = if last_id == id {
        id_text.clone()
    } else {
        last_id.format().to_vec()
    };
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        nack.consumer.to_vec(),
        b"0".to_vec(),
        id_text,
        b"TIME".to_vec(),
        nack.delivery_time.to_string().into_bytes(),
        b"RETRYCOUNT".to_vec(),
        nack.delivery_count.to_string().into_bytes(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        last_text,
    ]
}

/// `streamPropagateGroupID`.
fn setid_argv(key: &[u8], group: &[u8], g: &ConsumerGroup) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group.to_vec(),
        g.last_id.format().to_vec(),
        b"ENTRIESREAD".to_vec(),
        g.entries_read.to_string().into_bytes(),
    ]
}

/// `streamPropagateConsumerCreation`.
fn createconsumer_argv(key: &[u8], group: &[u8], consumer: &[u8]) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"CREATECONSUMER".to_vec(),
        key.to_vec(),
        group.to_vec(),
        consumer.to_vec(),
    ]
}

// ---------------------------------------------------------------
// XGROUP
// ---------------------------------------------------------------

/// XGROUP HELP
fn xgroup_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
}

/// `ENTRIESREAD n`: positive or -1.
fn parse_entries_read(ctx: &mut Ctx, a: &[u8]) -> Option<i64> {
    let n = parse_int(ctx, a)?;
    if n < 0 && n != ENTRIES_READ_INVALID {
        ctx.error("ERR value for ENTRIESREAD must be positive or -1");
        return None;
    }
    Some(n)
}

const REQUIRES_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

/// The stream of an XGROUP subcommand: WRONGTYPE, or the "requires the
/// key to exist" error when missing (unless `may_create`). `Some(None)`:
/// missing and may be created.
fn xgroup_stream(ctx: &mut Ctx, key: &[u8], may_create: bool) -> Option<Option<()>> {
    match write_stream(ctx, key) {
        Typed::WrongType => {
            ctx.error(err::WRONGTYPE);
            None
        }
        Typed::Missing if may_create => Some(None),
        Typed::Missing => {
            ctx.error(REQUIRES_KEY);
            None
        }
        Typed::Found(_) => Some(Some(())),
    }
}

/// The stream and group of CREATECONSUMER, DELCONSUMER, SETID (both must
/// exist).
fn xgroup_target<'a>(ctx: &'a mut Ctx, key: &[u8], group: &[u8]) -> Option<&'a mut Stream> {
    xgroup_stream(ctx, key, false)?;
    let has_group = matches!(write_stream(ctx, key), Typed::Found(st) if st.group(group).is_some());
    if !has_group {
        error_with(
            ctx,
            &[
                b"NOGROUP No such consumer group '",
                group,
                b"' for key name '",
                key,
                b"'",
            ],
        );
        return None;
    }
    match write_stream(ctx, key) {
        Typed::Found(st) => Some(st),
        _ => unreachable!("looked up above"),
    }
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
fn xgroup_create(ctx: &mut Ctx, args: Args) {
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    if args.len() > 8 {
        return subcommand_syntax(ctx, "XGROUP", args.get(1));
    }
    let mut i = 5;
    while i < args.len() {
        if is(args.get(i), "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(args.get(i), "entriesread") && i + 1 < args.len() {
            let Some(n) = parse_entries_read(ctx, args.get(i + 1)) else {
                return;
            };
            entries_read = n;
            i += 2;
        } else {
            return subcommand_syntax(ctx, "XGROUP", args.get(1));
        }
    }
    let (key, group) = (args.get(2), args.get(3));
    let Some(exists) = xgroup_stream(ctx, key, mkstream) else {
        return;
    };
    let id = if args.get(4) == b"$" {
        match write_stream(ctx, key) {
            Typed::Found(st) => st.last_id(),
            _ => StreamId::MIN,
        }
    } else {
        let Some(id) = parse_strict(ctx, args.get(4), 0) else {
            return;
        };
        id
    };
    if exists.is_none() {
        let db = ctx.client.db;
        let lru = ctx.srv.lru_clock;
        let v = Value::Stream(Arc::new(Stream::new()));
        ctx.srv.keyspace.dbs[db].upsert(key, v, NO_EXPIRE, lru);
        ctx.notify(NOTIFY_NEW, "new", key);
        ctx.modified(1);
    }
    let Typed::Found(st) = write_stream(ctx, key) else {
        unreachable!("exists or just created")
    };
    if st.create_group(group, id, entries_read) {
        ctx.out().ok();
        ctx.modified(1);
        ctx.notify(NOTIFY_STREAM, "xgroup-create", key);
    } else {
        ctx.error("BUSYGROUP Consumer Group name already exists");
    }
}

/// XGROUP CREATECONSUMER key group consumer
fn xgroup_createconsumer(ctx: &mut Ctx, args: Args) {
    let (key, group, consumer) = (args.get(2), args.get(3), args.get(4));
    let now = clock_ms(ctx);
    let Some(st) = xgroup_target(ctx, key, group) else {
        return;
    };
    let created = st
        .group_mut(group)
        .expect("checked")
        .create_consumer(consumer, now);
    if created {
        ctx.modified(1);
        ctx.notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
    }
    ctx.out().int(created as i64);
}

/// XGROUP DELCONSUMER key group consumer
fn xgroup_delconsumer(ctx: &mut Ctx, args: Args) {
    let (key, group, consumer) = (args.get(2), args.get(3), args.get(4));
    let Some(st) = xgroup_target(ctx, key, group) else {
        return;
    };
    let pending = st
        .group_mut(group)
        .expect("checked")
        .delete_consumer(consumer);
    if pending.is_some() {
        ctx.modified(1);
        ctx.notify(NOTIFY_STREAM, "xgroup-delconsumer", key);
    }
    ctx.out().int(pending.unwrap_or(0) as i64);
}

/// XGROUP DESTROY key group
fn xgroup_destroy(ctx: &mut Ctx, args: Args) {
    let (key, group) = (args.get(2), args.get(3));
    if xgroup_stream(ctx, key, false).is_none() {
        return;
    }
    let Typed::Found(st) = write_stream(ctx, key) else {
        unreachable!("looked up above")
    };
    if st.destroy_group(group) {
        // The write signals the key: blocked XREADGROUPs of the group
        // run again and answer NOGROUP.
        ctx.modified(1);
        ctx.notify(NOTIFY_STREAM, "xgroup-destroy", key);
        ctx.out().int(1);
    } else {
        ctx.out().int(0);
    }
}

/// XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
fn xgroup_setid(ctx: &mut Ctx, args: Args) {
    let mut entries_read = ENTRIES_READ_INVALID;
    match args.len() {
        5 => {}
        7 if is(args.get(5), "entriesread") => match parse_entries_read(ctx, args.get(6)) {
            Some(n) => entries_read = n,
            None => return,
        },
        _ => return subcommand_syntax(ctx, "XGROUP", args.get(1)),
    }
    let (key, group) = (args.get(2), args.get(3));
    if xgroup_target(ctx, key, group).is_none() {
        return;
    }
    let id = if args.get(4) == b"$" {
        None
    } else {
        // `streamParseIDOrReply`: `-` and `+` are IDs here.
        match parse_id(ctx, args.get(4), IdSyntax::range(0)) {
            Some(ParsedId::Id(id)) => Some(id),
            Some(ParsedId::AutoSeq(_)) => return ctx.error(super::INVALID_ID),
            None => return,
        }
    };
    let Typed::Found(st) = write_stream(ctx, key) else {
        unreachable!("looked up above")
    };
    let id = id.unwrap_or_else(|| st.last_id());
    st.group_mut(group)
        .expect("checked")
        .set_id(id, entries_read);
    ctx.modified(1);
    ctx.notify(NOTIFY_STREAM, "xgroup-setid", key);
    ctx.out().ok();
}

// ---------------------------------------------------------------
// XREADGROUP
// ---------------------------------------------------------------

/// What XREADGROUP reads from one stream.
#[derive(Clone, Copy)]
enum ReadFrom {
    /// `>`: entries never delivered to the group.
    New,
    /// The consumer's pending entries after this ID.
    History(StreamId),
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key [key ...] id [id ...]
fn xreadgroup(ctx: &mut Ctx, args: Args) {
    let mut count: u64 = 0;
    let mut block: Option<Option<i64>> = None;
    let mut noack = false;
    let mut group_consumer: Option<(usize, usize)> = None;
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let a = args.get(i);
        if is(a, "block") && more > 0 {
            if ctx.srv.scripting.running.is_some() {
                let mut msg = args.get(0).to_vec();
                msg.extend_from_slice(b" command is not allowed with BLOCK option from scripts");
                return error_with(ctx, &[b"ERR ", &msg]);
            }
            i += 1;
            match parse_block_ms(ctx, args.get(i)) {
                Some(d) => block = Some(d),
                None => return,
            }
        } else if is(a, "count") && more > 0 {
            i += 1;
            let Some(n) = parse_int(ctx, args.get(i)) else {
                return;
            };
            count = n.max(0) as u64;
        } else if is(a, "streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                return ctx.error("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.");
            }
            break;
        } else if is(a, "group") && more >= 2 {
            group_consumer = Some((i + 1, i + 2));
            i += 2;
        } else if is(a, "noack") {
            noack = true;
        } else {
            return ctx.error(err::SYNTAX);
        }
        i += 1;
    }
    if streams_at == 0 {
        return ctx.error(err::SYNTAX);
    }
    let Some((gi, ci)) = group_consumer else {
        return ctx.error("ERR Missing GROUP option for XREADGROUP");
    };
    let (group, consumer) = (args.get(gi), args.get(ci));
    let n = (args.len() - streams_at) / 2;
    let db = ctx.client.db;
    // Run again for a ready key: that key alone, and a key or group gone
    // meanwhile ends the wait.
    let only = ctx.srv.blocking.serving_key().map(|k| k.to_vec());
    let mut froms: Vec<ReadFrom> = Vec::with_capacity(n);
    for k in 0..n {
        let key = args.get(streams_at + k);
        if only.as_deref().is_some_and(|o| o != key) {
            froms.push(ReadFrom::New);
            continue;
        }
        let has_group = match ctx.srv.lookup_read(db, key, ctx.now_ms).map(|e| e.value()) {
            None => None,
            Some(ValueRef::Stream(st)) => Some(st.group(group).is_some()),
            Some(_) if only.is_some() => None,
            Some(_) => return ctx.error(err::WRONGTYPE),
        };
        match (has_group, only.is_some()) {
            (Some(true), _) => {}
            (None, true) => return ctx.error("UNBLOCKED the stream key no longer exists"),
            (Some(false), true) => {
                return ctx.error(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                )
            }
            (_, false) => {
                return error_with(
                    ctx,
                    &[
                        b"NOGROUP No such key '",
                        c_str(key),
                        b"' or consumer group '",
                        c_str(group),
                        b"' in XREADGROUP with GROUP option",
                    ],
                )
            }
        }
        let a = args.get(streams_at + n + k);
        if a == b"$" {
            return ctx.error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
        }
        if a == b"+" {
            return ctx.error("ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.");
        }
        if a == b">" {
            froms.push(ReadFrom::New);
            continue;
        }
        let Some(id) = parse_strict(ctx, a, 0) else {
            return;
        };
        // Redis marks `>` as the largest ID: given explicitly, it is `>`.
        froms.push(if id == StreamId::MAX {
            ReadFrom::New
        } else {
            ReadFrom::History(id)
        });
    }
    let now = clock_ms(ctx);
    let mut served = 0usize;
    let mut props: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut body = super::scratch_reply(&ctx.client.out);
    for (k, from) in froms.iter().enumerate() {
        let key = args.get(streams_at + k);
        if only.as_deref().is_some_and(|o| o != key) {
            continue;
        }
        let Typed::Found(st) = write_stream(ctx, key) else {
            unreachable!("checked above")
        };
        if let ReadFrom::New = from {
            let last_live = st.last_live_id();
            let behind = st.group(group).expect("checked").last_id;
            if last_live.is_none_or(|top| top <= behind) {
                continue;
            }
        }
        let created = st
            .group_mut(group)
            .expect("checked")
            .touch_consumer(consumer, now);
        if body.proto == Protocol::Resp2 {
            body.array(2);
        }
        body.bulk(key);
        match *from {
            ReadFrom::New => {
                let d = st
                    .deliver_new(group, consumer, count as usize, noack, now)
                    .expect("checked");
                super::reply_range(&mut body, st, d.first(), d.last(), d.count() as u64, false);
                let g = st.group(group).expect("checked");
                if noack {
                    if created {
                        props.push(createconsumer_argv(key, group, consumer));
                    }
                    if d.count() > 0 {
                        props.push(setid_argv(key, group, g));
                    }
                } else {
                    for id in &d.ids {
                        let nack = g.pel().get(id).expect("just delivered");
                        props.push(xclaim_argv(key, group, *id, nack, *id));
                    }
                }
            }
            ReadFrom::History(after) => {
                let start = after.incr().unwrap_or(StreamId::MAX);
                let ids = st
                    .deliver_pending(group, consumer, start, count as usize, now)
                    .expect("checked");
                body.array(ids.len());
                for (id, exists) in ids {
                    match st.get(id).filter(|_| exists) {
                        Some(pairs) => encode_entry(&mut body.buf, id, pairs),
                        None => {
                            encode::array(&mut body.buf, 2);
                            encode::bulk(&mut body.buf, &id.format());
                            body.null_array();
                        }
                    }
                }
            }
        }
        if created {
            ctx.notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
        }
        served += 1;
        ctx.modified(1);
    }
    if served > 0 {
        propagate_instead(ctx, props);
        super::emit_streams(&mut ctx.client.out, body, served);
        return;
    }
    let Some(deadline) = block else {
        return ctx.client.out.null_array();
    };
    if !crate::blocking::may_block(ctx) {
        return ctx.client.out.null_array();
    }
    let deadline = ctx.srv.blocking.serving_deadline().unwrap_or(deadline);
    let keys: Vec<Vec<u8>> = (0..n).map(|k| args.get(streams_at + k).to_vec()).collect();
    crate::blocking::block_for_keys_on_any_change(
        ctx,
        args,
        keys.iter().map(|k| k.as_slice()),
        ValueType::Stream,
        deadline,
    );
}

// ---------------------------------------------------------------
// XACK, XPENDING
// ---------------------------------------------------------------

/// XACK key group id [id ...]
fn xack(ctx: &mut Ctx, args: Args) {
    let (key, group) = (args.get(1), args.get(2));
    let has_group = match read_stream(ctx, key) {
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Missing => false,
        Typed::Found(st) => st.group(group).is_some(),
    };
    if !has_group {
        return ctx.out().int(0);
    }
    // All or nothing: every ID is checked before any is acknowledged.
    let mut ids = Vec::with_capacity(args.len() - 3);
    for a in args.iter().skip(3) {
        let Some(id) = parse_strict(ctx, a, 0) else {
            return;
        };
        ids.push(id);
    }
    let Typed::Found(st) = write_stream(ctx, key) else {
        unreachable!("looked up above")
    };
    let g = st.group_mut(group).expect("checked");
    let acked = ids.into_iter().filter(|&id| g.ack(id)).count();
    if acked > 0 {
        ctx.modified(acked as u64);
    }
    ctx.out().int(acked as i64);
}

/// XPENDING's extended form.
struct PendingQuery<'a> {
    start: StreamId,
    end: StreamId,
    /// 0: an empty reply.
    count: u64,
    consumer: Option<&'a [u8]>,
    /// 0: no filter.
    min_idle: i64,
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
fn xpending(ctx: &mut Ctx, args: Args) {
    let (key, group) = (args.get(1), args.get(2));
    let justinfo = args.len() == 3;
    if !justinfo && (args.len() < 6 || args.len() > 9) {
        return ctx.error(err::SYNTAX);
    }
    let mut range: Option<PendingQuery> = None;
    if !justinfo {
        let mut at = 3;
        let mut min_idle = 0i64;
        if is(args.get(3), "idle") {
            let Some(n) = parse_int(ctx, args.get(4)) else {
                return;
            };
            if args.len() < 8 {
                return ctx.error(err::SYNTAX);
            }
            min_idle = n;
            at += 2;
        }
        let Some(count) = parse_int(ctx, args.get(at + 2)) else {
            return;
        };
        let Some((mut start, startex)) = parse_bound(ctx, args.get(at), 0) else {
            return;
        };
        if startex {
            match start.incr() {
                Some(s) => start = s,
                None => return ctx.error("ERR invalid start ID for the interval"),
            }
        }
        let Some((mut end, endex)) = parse_bound(ctx, args.get(at + 1), u64::MAX) else {
            return;
        };
        if endex {
            match end.decr() {
                Some(e) => end = e,
                None => return ctx.error("ERR invalid end ID for the interval"),
            }
        }
        let consumer = (at + 3 < args.len()).then(|| args.get(at + 3));
        range = Some(PendingQuery {
            start,
            end,
            count: count.max(0) as u64,
            consumer,
            min_idle,
        });
    }
    let now = clock_ms(ctx);
    let has_group = match read_stream(ctx, key) {
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Missing => false,
        Typed::Found(st) => st.group(group).is_some(),
    };
    if !has_group {
        return nogroup(ctx, key, group);
    }
    let db = ctx.client.db;
    let Some(ValueRef::Stream(st)) = ctx.srv.peek(db, key, ctx.now_ms).map(|e| e.value()) else {
        unreachable!("looked up above")
    };
    let g = st.group(group).expect("checked");
    let out = &mut ctx.client.out;
    let Some(PendingQuery {
        start,
        end,
        count,
        consumer,
        min_idle,
    }) = range
    else {
        let summary = g.pending_summary();
        out.array(4);
        out.int(summary.count as i64);
        match summary.bounds {
            None => {
                out.null();
                out.null();
                out.null_array();
            }
            Some((first, last)) => {
                out.bulk(&first.format());
                out.bulk(&last.format());
                let owners: Vec<(&[u8], usize)> = g
                    .consumers()
                    .filter(|(_, c)| !c.pending().is_empty())
                    .map(|(name, c)| (name, c.pending().len()))
                    .collect();
                out.array(owners.len());
                for (name, n) in owners {
                    out.array(2);
                    out.bulk(name);
                    out.bulk_int(n as i64);
                }
            }
        }
        return;
    };
    let mut body = Vec::new();
    let mut n = 0u64;
    if count > 0 {
        for (id, nack) in g.pending_range(start, end, consumer) {
            let idle = (now - nack.delivery_time).max(0);
            if min_idle != 0 && idle < min_idle {
                continue;
            }
            encode::array(&mut body, 4);
            encode::bulk(&mut body, &id.format());
            encode::bulk(&mut body, &nack.consumer);
            encode::integer(&mut body, idle);
            encode::integer(&mut body, nack.delivery_count as i64);
            n += 1;
            if n == count {
                break;
            }
            if out.buf.len().saturating_add(body.len()) > out.cap {
                out.overflowed = true;
                return;
            }
        }
    }
    out.array(n as usize);
    out.buf.extend_from_slice(&body);
}

// ---------------------------------------------------------------
// XCLAIM, XAUTOCLAIM
// ---------------------------------------------------------------

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
fn xclaim(ctx: &mut Ctx, args: Args) {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let has_group = match read_stream(ctx, key) {
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Missing => false,
        Typed::Found(st) => st.group(group).is_some(),
    };
    if !has_group {
        return nogroup(ctx, key, group);
    }
    let Some(min_idle) = ferrokv_resp::parse_i64(args.get(4)) else {
        return ctx.error("ERR Invalid min-idle-time argument for XCLAIM");
    };
    // The IDs run up to the first argument that is not one.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match StreamId::parse_id(args.get(j), IdSyntax::strict(0)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = clock_ms(ctx);
    let mut delivery_time: Option<i64> = None;
    let mut retry_count: Option<i64> = None;
    let (mut force, mut justid) = (false, false);
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - j - 1;
        let a = args.get(j);
        let value = |ctx: &mut Ctx, what: &str| match ferrokv_resp::parse_i64(args.get(j + 1)) {
            Some(v) => Some(v),
            None => {
                ctx.error(&format!("ERR Invalid {what} option argument for XCLAIM"));
                None
            }
        };
        if is(a, "force") {
            force = true;
        } else if is(a, "justid") {
            justid = true;
        } else if is(a, "idle") && more > 0 {
            let Some(v) = value(ctx, "IDLE") else { return };
            delivery_time = Some(now.saturating_sub(v));
            j += 1;
        } else if is(a, "time") && more > 0 {
            let Some(v) = value(ctx, "TIME") else { return };
            delivery_time = Some(v);
            j += 1;
        } else if is(a, "retrycount") && more > 0 {
            let Some(v) = value(ctx, "RETRYCOUNT") else {
                return;
            };
            retry_count = Some(v);
            j += 1;
        } else if is(a, "lastid") && more > 0 {
            let Some(id) = parse_strict(ctx, args.get(j + 1), 0) else {
                return;
            };
            last_id = id;
            j += 1;
        } else {
            let a = &a[..a.len().min(128)];
            return error_with(ctx, &[b"ERR Unrecognized XCLAIM option '", a, b"'"]);
        }
        j += 1;
    }
    // A bogus delivery time (negative or in the future) is now.
    let delivery_time = match delivery_time {
        Some(t) if (0..=now).contains(&t) => t,
        _ => now,
    };
    let db = ctx.client.db;
    let st = stream_mut(ctx.srv, db, key, ctx.now_ms).expect("looked up above");
    let mut props = Vec::new();
    let mut moved_last_id = false;
    {
        let g = st.group_mut(group).expect("checked");
        if last_id > g.last_id {
            g.last_id = last_id;
            moved_last_id = true;
        }
    }
    // The NACKs of pending IDs whose entry is gone, as they are before
    // the claim drops them (they propagate so).
    let gone: Vec<(StreamId, Nack)> = {
        let g = st.group(group).expect("checked");
        ids.iter()
            .filter(|id| !st.contains(**id))
            .filter_map(|id| g.pel().get(id).map(|n| (*id, n.clone())))
            .collect()
    };
    let claimed = st
        .claim(
            group,
            consumer,
            &ids,
            ClaimOptions {
                min_idle_ms: min_idle.max(0),
                delivery_time_ms: delivery_time,
                retry_count: retry_count.filter(|&c| c >= 0).map(|c| c as u64),
                force,
                justid,
                now_ms: now,
            },
        )
        .expect("checked");
    let g = st.group(group).expect("checked");
    let (mut ci, mut di) = (0, 0);
    for id in &ids {
        if claimed.claimed.get(ci) == Some(id) {
            ci += 1;
            props.push(xclaim_argv(key, group, *id, &g.pel()[id], g.last_id));
        } else if claimed.deleted.get(di) == Some(id) {
            di += 1;
            if let Some((_, nack)) = gone.iter().find(|(gid, _)| gid == id) {
                props.push(xclaim_argv(key, group, *id, nack, g.last_id));
            }
        }
    }
    if moved_last_id && props.is_empty() {
        props.push(setid_argv(key, group, g));
    }
    let out = &mut ctx.client.out;
    out.array(claimed.claimed.len());
    for id in &claimed.claimed {
        if justid {
            out.bulk(&id.format());
        } else if let Some(pairs) = st.get(*id) {
            encode_entry(&mut out.buf, *id, pairs);
        }
    }
    let changes = props.len() as u64 + claimed.consumer_created as u64;
    if claimed.consumer_created {
        ctx.notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
    }
    if changes > 0 {
        ctx.modified(changes);
    }
    propagate_instead(ctx, props);
}

/// `LONG_MAX / attempts_factor`: XAUTOCLAIM's largest COUNT.
const AUTOCLAIM_MAX_COUNT: i64 = i64::MAX / 10;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
fn xautoclaim(ctx: &mut Ctx, args: Args) {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let has_group = match read_stream(ctx, key) {
        Typed::WrongType => return ctx.error(err::WRONGTYPE),
        Typed::Missing => false,
        Typed::Found(st) => st.group(group).is_some(),
    };
    let Some(min_idle) = ferrokv_resp::parse_i64(args.get(4)) else {
        return ctx.error("ERR Invalid min-idle-time argument for XAUTOCLAIM");
    };
    let Some((mut start, startex)) = parse_bound(ctx, args.get(5), 0) else {
        return;
    };
    if startex {
        match start.incr() {
            Some(s) => start = s,
            None => return ctx.error("ERR invalid start ID for the interval"),
        }
    }
    let mut count = 100i64;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - j - 1;
        if is(args.get(j), "count") && more > 0 {
            match ferrokv_resp::parse_i64(args.get(j + 1)) {
                Some(n) if (1..=AUTOCLAIM_MAX_COUNT).contains(&n) => count = n,
                _ => return ctx.error("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if is(args.get(j), "justid") {
            justid = true;
        } else {
            return ctx.error(err::SYNTAX);
        }
        j += 1;
    }
    if !has_group {
        return nogroup(ctx, key, group);
    }
    let now = clock_ms(ctx);
    let db = ctx.client.db;
    let st = stream_mut(ctx.srv, db, key, ctx.now_ms).expect("looked up above");
    // The NACKs the walk may drop (entry gone), before it drops them.
    let gone: Vec<(StreamId, Nack)> = {
        let g = st.group(group).expect("checked");
        g.pel()
            .range(start..)
            .take((count as usize).saturating_mul(10))
            .filter(|(id, _)| !st.contains(**id))
            .map(|(id, n)| (*id, n.clone()))
            .collect()
    };
    let claimed = st
        .autoclaim(
            group,
            consumer,
            AutoClaimOptions {
                start,
                count: count as u64,
                min_idle_ms: min_idle.max(0),
                justid,
                now_ms: now,
            },
        )
        .expect("checked");
    let g = st.group(group).expect("checked");
    // Claimed and dropped IDs in the order of the walk.
    let mut props = Vec::new();
    let (mut ci, mut di) = (0, 0);
    while ci < claimed.claimed.len() || di < claimed.deleted.len() {
        let take_claimed = match (claimed.claimed.get(ci), claimed.deleted.get(di)) {
            (Some(c), Some(d)) => c < d,
            (Some(_), None) => true,
            _ => false,
        };
        if take_claimed {
            let id = claimed.claimed[ci];
            props.push(xclaim_argv(key, group, id, &g.pel()[&id], g.last_id));
            ci += 1;
        } else {
            let id = claimed.deleted[di];
            if let Some((_, nack)) = gone.iter().find(|(gid, _)| *gid == id) {
                props.push(xclaim_argv(key, group, id, nack, g.last_id));
            }
            di += 1;
        }
    }
    let out = &mut ctx.client.out;
    out.array(3);
    out.bulk(&claimed.next.format());
    out.array(claimed.claimed.len());
    for id in &claimed.claimed {
        if justid {
            out.bulk(&id.format());
        } else if let Some(pairs) = st.get(*id) {
            encode_entry(&mut out.buf, *id, pairs);
        }
    }
    out.array(claimed.deleted.len());
    for id in &claimed.deleted {
        out.bulk(&id.format());
    }
    let changes = props.len() as u64 + claimed.consumer_created as u64;
    if claimed.consumer_created {
        ctx.notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
    }
    if changes > 0 {
        ctx.modified(changes);
    }
    propagate_instead(ctx, props);
}
