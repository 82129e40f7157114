//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO
//! HELP, with Redis 7.0.15's fields in its order (maps in RESP3, flat
//! arrays of name/value pairs in RESP2).
//!
//! `radix-tree-nodes` is Redis's rax node count. We keep nodes in a
//! B-tree, not a rax, so it is computed from the node keys (the 128-bit
//! big-endian master IDs) as the node count of the compressed radix tree
//! that holds exactly those keys ([`rax_nodes`]): a compressed node for
//! each run of bytes all keys below a point share, a branching node where
//! they part, a leaf per key. It matches Redis for a rax built by inserts;
//! after node deletions Redis's rax may keep a split that recompression
//! does not undo, so the counts can then differ.

use super::encode_entry;
use crate::commands::flags::*;
use crate::commands::{err, is, reply_help, CommandSpec, Ctx};
use crate::net::client::Reply;
use ferrokv_resp::encode;
use ferrokv_resp::Args;
use ferrokv_store::stream::{ConsumerGroup, Stream, StreamId, ENTRIES_READ_INVALID};
use ferrokv_store::ValueRef;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new("xinfo", -2, 0, xinfo_help)
    .group("stream")
    .since("5.0.0")
    .complexity("Depends on subcommand.")
    .doc("A container for stream introspection commands", "")
    .subs(XINFO_SUBS)];

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    h: crate::commands::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("stream")
        .since("5.0.0")
        .keys(2, 2, 1)
}

static XINFO_SUBS: &[CommandSpec] = &[
    sub("xinfo|stream", -3, READONLY, xinfo_stream)
        .doc("Get information about a stream", "key [FULL [COUNT count]]"),
    sub("xinfo|groups", 3, READONLY, xinfo_groups)
        .doc("List the consumer groups of a stream", "key"),
    sub("xinfo|consumers", 4, READONLY, xinfo_consumers)
        .doc("List the consumers in a consumer group", "key group"),
    CommandSpec::new("xinfo|help", 2, LOADING | STALE, xinfo_help)
        .group("stream")
        .since("5.0.0")
        .doc("Show helpful text about the different subcommands", ""),
];

/// XINFO HELP
fn xinfo_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
}

/// The stream at `key` (`lookupKeyReadOrReply` with "no such key"), or
/// `None` after replying the error.
fn lookup<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Option<(&'a Stream, &'a mut Reply, i64)> {
    let db = ctx.client.db;
    let now = ctx.srv.now_ms;
    match ctx.srv.lookup_read(db, key, ctx.now_ms).map(|e| e.value()) {
        None => {
            ctx.client.out.error(err::NO_SUCH_KEY);
            None
        }
        Some(ValueRef::Stream(st)) => Some((st, &mut ctx.client.out, now)),
        Some(_) => {
            ctx.client.out.error(err::WRONGTYPE);
            None
        }
    }
}

/// A map of `n` fields in RESP3, an array of `2n` in RESP2.
fn map(out: &mut Reply, n: usize) {
    if out.proto == encode::Protocol::Resp2 {
        out.array(n * 2);
    } else {
        out.map(n);
    }
}

fn id(out: &mut Reply, id: StreamId) {
    out.bulk(&id.format());
}

fn entries_read(out: &mut Reply, g: &ConsumerGroup) {
    if g.entries_read == ENTRIES_READ_INVALID {
        out.null();
    } else {
        out.int(g.entries_read);
    }
}

fn lag(out: &mut Reply, st: &Stream, g: &ConsumerGroup) {
    match st.meta().lag(g) {
        Some(l) => out.int(l),
        None => out.null(),
    }
}

/// One entry, or nil (`first-entry` / `last-entry` of an empty stream).
fn edge_entry(out: &mut Reply, st: &Stream, rev: bool) {
    match st.range(StreamId::MIN, StreamId::MAX, rev).next() {
        Some((eid, pairs)) => encode_entry(&mut out.buf, eid, pairs),
        None => out.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
fn xinfo_stream(ctx: &mut Ctx, args: Args) {
    // The options are read first, but their errors come after the key's.
    let mut full = false;
    let mut count: i64 = 10;
    let mut bad: Option<Vec<u8>> = None;
    if args.len() > 3 {
        if args.len() > 6 || !is(args.get(3), "full") {
            bad = Some(sub_syntax(args.get(1)));
        } else {
            full = true;
            if args.len() == 6 && is(args.get(4), "count") {
                match ferrokv_resp::parse_i64(args.get(5)) {
                    Some(n) => count = if n < 0 { 10 } else { n },
                    None => bad = Some(err::NOT_INTEGER.as_bytes().to_vec()),
                }
            } else if args.len() != 4 {
                bad = Some(sub_syntax(args.get(1)));
            }
        }
    }
    let Some((st, out, _)) = lookup(ctx, args.get(2)) else {
        return;
    };
    if let Some(msg) = bad {
        return out.error_bytes(&msg);
    }
    let meta = st.meta();
    map(out, if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(meta.length as i64);
    out.bulk(b"radix-tree-keys");
    out.int(st.nodes().len() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(rax_nodes(st) as i64);
    out.bulk(b"last-generated-id");
    id(out, meta.last_id);
    out.bulk(b"max-deleted-entry-id");
    id(out, meta.max_deleted_entry_id);
    out.bulk(b"entries-added");
    out.int(meta.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    id(out, meta.first_id);
    if !full {
        out.bulk(b"groups");
        out.int(st.groups().count() as i64);
        out.bulk(b"first-entry");
        edge_entry(out, st, false);
        out.bulk(b"last-entry");
        edge_entry(out, st, true);
        return;
    }
    // COUNT 0: everything.
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    out.bulk(b"entries");
    super::reply_range(out, st, StreamId::MIN, StreamId::MAX, count as u64, false);
    out.bulk(b"groups");
    let groups: Vec<(&[u8], &ConsumerGroup)> = st.groups().collect();
    out.array(groups.len());
    for (name, g) in groups {
        map(out, 7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        id(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read(out, g);
        out.bulk(b"lag");
        lag(out, st, g);
        out.bulk(b"pel-count");
        out.int(g.pel().len() as i64);
        out.bulk(b"pending");
        let n = g.pel().len().min(limit);
        out.array(n);
        for (pid, nack) in g.pel().iter().take(n) {
            out.array(4);
            id(out, *pid);
            out.bulk(&nack.consumer);
            out.int(nack.delivery_time);
            out.int(nack.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array(g.consumer_count());
        for (cname, c) in g.consumers() {
            map(out, 4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(c.seen_time);
            out.bulk(b"pel-count");
            out.int(c.pending().len() as i64);
            out.bulk(b"pending");
            let n = c.pending().len().min(limit);
            out.array(n);
            for pid in c.pending().iter().take(n) {
                let nack = &g.pel()[pid];
                out.array(3);
                id(out, *pid);
                out.int(nack.delivery_time);
                out.int(nack.delivery_count as i64);
            }
        }
    }
}

/// `addReplySubcommandSyntaxError`'s text.
fn sub_syntax(sub: &[u8]) -> Vec<u8> {
    let sub = &sub[..sub.len().min(128)];
    let mut msg = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    msg.extend_from_slice(sub);
    msg.extend_from_slice(b"'. Try XINFO HELP.");
    msg
}

/// XINFO GROUPS key
fn xinfo_groups(ctx: &mut Ctx, args: Args) {
    let Some((st, out, _)) = lookup(ctx, args.get(2)) else {
        return;
    };
    let groups: Vec<(&[u8], &ConsumerGroup)> = st.groups().collect();
    out.array(groups.len());
    for (name, g) in groups {
        map(out, 6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumer_count() as i64);
        out.bulk(b"pending");
        out.int(g.pel().len() as i64);
        out.bulk(b"last-delivered-id");
        id(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read(out, g);
        out.bulk(b"lag");
        lag(out, st, g);
    }
}

/// XINFO CONSUMERS key group
fn xinfo_consumers(ctx: &mut Ctx, args: Args) {
    let (key, group) = (args.get(2), args.get(3));
    let Some((st, out, now)) = lookup(ctx, key) else {
        return;
    };
    let Some(g) = st.group(group) else {
        let mut msg = b"NOGROUP No such consumer group '".to_vec();
        msg.extend_from_slice(group);
        msg.extend_from_slice(b"' for key name '");
        msg.extend_from_slice(key);
        msg.push(b'\'');
        return out.error_bytes(&msg);
    };
    out.array(g.consumer_count());
    for (name, c) in g.consumers() {
        map(out, 3);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(c.pending().len() as i64);
        out.bulk(b"idle");
        out.int((now - c.seen_time).max(0));
    }
}

/// The node count of a rax holding the stream's node keys (see the module
/// docs).
pub fn rax_nodes(st: &Stream) -> usize {
    let keys: Vec<[u8; 16]> = st.nodes().keys().map(|k| encode_key(*k)).collect();
    if keys.is_empty() {
        return 1;
    }
    subtree(&keys, 0)
}

/// `streamEncodeID`: ms then seq, big-endian.
fn encode_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

/// Nodes of the subtree at `depth` holding `keys` (sorted, distinct, all
/// sharing their first `depth` bytes, all 16 bytes long).
fn subtree(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        return 1; // a leaf: the key's own node
    }
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    let mut common = depth;
    while common < 16 && first[common] == last[common] {
        common += 1;
    }
    if common > depth {
        // A compressed node for the shared run, then what follows it.
        return 1 + branch(keys, common);
    }
    branch(keys, depth)
}

/// A branching point at `depth` (or a leaf at 16): one node plus its
/// children, one per distinct byte.
fn branch(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        return 1;
    }
    let mut n = 1;
    let mut i = 0;
    while i < keys.len() {
        let b = keys[i][depth];
        let mut j = i;
        while j < keys.len() && keys[j][depth] == b {
            j += 1;
        }
        n += subtree(&keys[i..j], depth + 1);
        i = j;
    }
    n
}
