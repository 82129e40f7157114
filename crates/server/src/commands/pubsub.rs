//! The pub/sub family: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! PUBLISH, the shard variants (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH) and the
//! PUBSUB container.
//!
//! The registry and the delivery of messages live in `crate::pubsub`;
//! these handlers only change subscriptions and write the confirmations.
//! Every confirmation is a push frame (RESP3) or a three-element array
//! (RESP2), one per channel, as Redis writes them.
//!
//! # Hostile input
//!
//! Audited (issue #15): every handler here works per argument. `PUBLISH`
//! costs O(receivers + patterns) plus the pattern matching
//! (`ferrokv_store::pattern`), and its copies land in output buffers under
//! the `pubsub` client-output-buffer limits (`crate::pubsub`).

use super::flags::*;
use super::{reply_help, CommandSpec, Ctx};
use crate::pubsub::Kind;
use ferrokv_resp::Args;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("pubsub")
        .since("2.0.0")
        .keys(0, 0, 0)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, subscribe)
        .complexity("O(N) where N is the number of channels to subscribe to.")
        .doc("Listens for messages published to channels.", "channel [channel ...]"),
    cmd("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, unsubscribe)
        .complexity("O(N) where N is the number of clients already subscribed to a channel.")
        .doc("Stops listening to messages posted to channels.", "[channel [channel ...]]"),
    cmd("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, psubscribe)
        .complexity("O(N) where N is the number of patterns the client is already subscribed to.")
        .doc("Listens for messages published to channels that match one or more patterns.", "pattern [pattern ...]"),
    cmd("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, punsubscribe)
        .complexity("O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).")
        .doc("Stops listening to messages published to channels that match one or more patterns.", "[pattern [pattern ...]]"),
    cmd("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, publish)
        .complexity("O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).")
        .doc("Posts a message to a channel.", "channel message"),
    cmd("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, ssubscribe)
        .keys(1, -1, 1)
        .since("7.0.0")
        .complexity("O(N) where N is the number of shard channels to subscribe to.")
        .doc("Listens for messages published to shard channels.", "shardchannel [shardchannel ...]"),
    cmd("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, sunsubscribe)
        .keys(1, -1, 1)
        .since("7.0.0")
        .complexity("O(N) where N is the number of clients already subscribed to a shard channel.")
        .doc("Stops listening to messages posted to shard channels.", "[shardchannel [shardchannel ...]]"),
    cmd("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, spublish)
        .keys(1, 1, 1)
        .since("7.0.0")
        .complexity("O(N) where N is the number of clients subscribed to the receiving shard channel.")
        .doc("Post a message to a shard channel", "shardchannel message"),
    cmd("pubsub", -2, 0, pubsub_help)
        .since("2.8.0")
        .complexity("Depends on subcommand.")
        .doc("A container for Pub/Sub commands.", "")
        .subs(PUBSUB_SUBS),
];

static PUBSUB_SUBS: &[CommandSpec] = &[
    cmd("pubsub|channels", -2, PUBSUB | LOADING | STALE, pubsub_channels)
        .since("2.8.0")
        .complexity("O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)")
        .doc("Returns the active channels.", "[pattern]"),
    cmd("pubsub|numpat", 2, PUBSUB | LOADING | STALE, pubsub_numpat)
        .since("2.8.0")
        .complexity("O(1)")
        .doc("Returns a count of unique pattern subscriptions.", ""),
    cmd("pubsub|numsub", -2, PUBSUB | LOADING | STALE, pubsub_numsub)
        .since("2.8.0")
        .complexity("O(N) for the NUMSUB subcommand, where N is the number of requested channels")
        .doc("Returns a count of subscribers to channels.", "[channel [channel ...]]"),
    cmd("pubsub|shardchannels", -2, PUBSUB | LOADING | STALE, pubsub_shardchannels)
        .since("7.0.0")
        .complexity("O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).")
        .doc("Returns the active shard channels.", "[pattern]"),
    cmd("pubsub|shardnumsub", -2, PUBSUB | LOADING | STALE, pubsub_shardnumsub)
        .since("7.0.0")
        .complexity("O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels")
        .doc("Returns the count of subscribers of shard channels.", "[shardchannel [shardchannel ...]]"),
    cmd("pubsub|help", 2, LOADING | STALE, pubsub_help)
        .since("6.2.0")
        .complexity("O(1)")
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// The commands a RESP2 connection in subscribed mode may still run.
pub fn allowed_when_subscribed(name: &str) -> bool {
    matches!(
        name,
        "ping"
            | "subscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "sunsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "quit"
            | "reset"
    )
}

/// One confirmation: `[kind, channel-or-null, count]`.
fn confirm(ctx: &mut Ctx, kind: &[u8], channel: Option<&[u8]>, count: usize) {
    ctx.client.out.push_with(3, |o| {
        o.bulk(kind);
        match channel {
            Some(c) => o.bulk(c),
            None => o.null(),
        }
        o.int(count as i64);
    });
}

/// SUBSCRIBE channel [channel ...]
fn subscribe(ctx: &mut Ctx, args: Args) {
    subscribe_kind(ctx, args, Kind::Channel)
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
fn ssubscribe(ctx: &mut Ctx, args: Args) {
    subscribe_kind(ctx, args, Kind::Shard)
}

fn subscribe_kind(ctx: &mut Ctx, args: Args, kind: Kind) {
    let token = ctx.client.token;
    for ch in args.iter().skip(1) {
        if ctx.srv.pubsub.subscribe(kind, token, ch) {
            match kind {
                Kind::Channel => ctx.client.subs.channels.push(ch.to_vec()),
                Kind::Shard => ctx.client.subs.shard_channels.push(ch.to_vec()),
            }
        }
        let (name, count): (&[u8], usize) = match kind {
            Kind::Channel => (b"subscribe", ctx.client.subs.count()),
            Kind::Shard => (b"ssubscribe", ctx.client.subs.shard_channels.len()),
        };
        confirm(ctx, name, Some(ch), count);
    }
}

/// UNSUBSCRIBE [channel [channel ...]]
fn unsubscribe(ctx: &mut Ctx, args: Args) {
    unsubscribe_kind(ctx, args, Kind::Channel)
}

/// SUNSUBSCRIBE [shardchannel [shardchannel ...]]
fn sunsubscribe(ctx: &mut Ctx, args: Args) {
    unsubscribe_kind(ctx, args, Kind::Shard)
}

fn unsubscribe_kind(ctx: &mut Ctx, args: Args, kind: Kind) {
    let name: &[u8] = match kind {
        Kind::Channel => b"unsubscribe",
        Kind::Shard => b"sunsubscribe",
    };
    let channels: Vec<Vec<u8>> = if args.len() > 1 {
        args.iter().skip(1).map(|c| c.to_vec()).collect()
    } else {
        match kind {
            Kind::Channel => ctx.client.subs.channels.clone(),
            Kind::Shard => ctx.client.subs.shard_channels.clone(),
        }
    };
    if channels.is_empty() {
        let count = match kind {
            Kind::Channel => ctx.client.subs.count(),
            Kind::Shard => ctx.client.subs.shard_channels.len(),
        };
        confirm(ctx, name, None, count);
        return;
    }
    for ch in &channels {
        unsubscribe_one(ctx, kind, ch, true);
    }
}

/// Drops one channel subscription, confirming it when `reply`.
fn unsubscribe_one(ctx: &mut Ctx, kind: Kind, ch: &[u8], reply: bool) {
    let token = ctx.client.token;
    if ctx.srv.pubsub.unsubscribe(kind, token, ch) {
        let list = match kind {
            Kind::Channel => &mut ctx.client.subs.channels,
            Kind::Shard => &mut ctx.client.subs.shard_channels,
        };
        list.retain(|c| c != ch);
    }
    if reply {
        let (name, count): (&[u8], usize) = match kind {
            Kind::Channel => (b"unsubscribe", ctx.client.subs.count()),
            Kind::Shard => (b"sunsubscribe", ctx.client.subs.shard_channels.len()),
        };
        confirm(ctx, name, Some(ch), count);
    }
}

/// PSUBSCRIBE pattern [pattern ...]
fn psubscribe(ctx: &mut Ctx, args: Args) {
    let token = ctx.client.token;
    for p in args.iter().skip(1) {
        if ctx.srv.pubsub.psubscribe(token, p) {
            ctx.client.subs.patterns.push(p.to_vec());
        }
        let count = ctx.client.subs.count();
        confirm(ctx, b"psubscribe", Some(p), count);
    }
}

/// PUNSUBSCRIBE [pattern [pattern ...]]
fn punsubscribe(ctx: &mut Ctx, args: Args) {
    let patterns: Vec<Vec<u8>> = if args.len() > 1 {
        args.iter().skip(1).map(|c| c.to_vec()).collect()
    } else {
        ctx.client.subs.patterns.clone()
    };
    if patterns.is_empty() {
        let count = ctx.client.subs.count();
        confirm(ctx, b"punsubscribe", None, count);
        return;
    }
    for p in &patterns {
        punsubscribe_one(ctx, p, true);
    }
}

fn punsubscribe_one(ctx: &mut Ctx, p: &[u8], reply: bool) {
    let token = ctx.client.token;
    if ctx.srv.pubsub.punsubscribe(token, p) {
        ctx.client.subs.patterns.retain(|c| c != p);
    }
    if reply {
        let count = ctx.client.subs.count();
        confirm(ctx, b"punsubscribe", Some(p), count);
    }
}

/// Drops every subscription of the client without replies (`RESET`).
pub fn unsubscribe_all_silently(ctx: &mut Ctx) {
    for ch in ctx.client.subs.channels.clone() {
        unsubscribe_one(ctx, Kind::Channel, &ch, false);
    }
    for ch in ctx.client.subs.shard_channels.clone() {
        unsubscribe_one(ctx, Kind::Shard, &ch, false);
    }
    for p in ctx.client.subs.patterns.clone() {
        punsubscribe_one(ctx, &p, false);
    }
}

/// PUBLISH channel message
///
/// Like Redis outside a cluster, the message also goes to the replicas
/// (not to the AOF), so their subscribers receive it too.
fn publish(ctx: &mut Ctx, args: Args) {
    let n = ctx
        .srv
        .publish_kind(Some(ctx.client), Kind::Channel, args.get(1), args.get(2));
    // In cluster mode every node hears it over the bus (replicas too),
    // not through the replication stream.
    if !ctx.srv.cluster_publish(args.get(1), args.get(2), false) {
        ctx.srv
            .repl_feed(ctx.client.db, &[&b"PUBLISH"[..], args.get(1), args.get(2)]);
    }
    ctx.client.out.int(n as i64);
}

/// SPUBLISH shardchannel message
fn spublish(ctx: &mut Ctx, args: Args) {
    let n = ctx
        .srv
        .publish_kind(Some(ctx.client), Kind::Shard, args.get(1), args.get(2));
    // In cluster mode the nodes of our shard hear it over the bus.
    if !ctx.srv.cluster_publish(args.get(1), args.get(2), true) {
        ctx.srv
            .repl_feed(ctx.client.db, &[&b"SPUBLISH"[..], args.get(1), args.get(2)]);
    }
    ctx.client.out.int(n as i64);
}

/// PUBSUB CHANNELS [pattern]
fn pubsub_channels(ctx: &mut Ctx, args: Args) {
    channels_kind(ctx, args, Kind::Channel)
}

/// PUBSUB SHARDCHANNELS [pattern]
fn pubsub_shardchannels(ctx: &mut Ctx, args: Args) {
    channels_kind(ctx, args, Kind::Shard)
}

fn channels_kind(ctx: &mut Ctx, args: Args, kind: Kind) {
    if args.len() > 3 {
        ctx.wrong_args(&format!(
            "pubsub|{}",
            String::from_utf8_lossy(args.get(1)).to_ascii_lowercase()
        ));
        return;
    }
    let pattern = (args.len() == 3).then(|| args.get(2));
    let list = ctx.srv.pubsub.active_channels(kind, pattern);
    ctx.client.out.array(list.len());
    for c in &list {
        ctx.client.out.bulk(c);
    }
}

/// PUBSUB NUMPAT
fn pubsub_numpat(ctx: &mut Ctx, _args: Args) {
    let n = ctx.srv.pubsub.pattern_count();
    ctx.client.out.int(n as i64);
}

/// PUBSUB NUMSUB [channel [channel ...]]
fn pubsub_numsub(ctx: &mut Ctx, args: Args) {
    numsub_kind(ctx, args, Kind::Channel)
}

/// PUBSUB SHARDNUMSUB [shardchannel [shardchannel ...]]
fn pubsub_shardnumsub(ctx: &mut Ctx, args: Args) {
    numsub_kind(ctx, args, Kind::Shard)
}

fn numsub_kind(ctx: &mut Ctx, args: Args, kind: Kind) {
    ctx.client.out.array((args.len() - 2) * 2);
    for ch in args.iter().skip(2) {
        let n = ctx.srv.pubsub.subscribers(kind, ch);
        ctx.client.out.bulk(ch);
        ctx.client.out.int(n as i64);
    }
}

/// PUBSUB HELP
fn pubsub_help(ctx: &mut Ctx, args: Args) {
    if args.len() != 2 || !super::is(args.get(1), "help") {
        ctx.wrong_args("pubsub");
        return;
    }
    reply_help(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
}
