//! The pub/sub registry: which connections listen to which channels and
//! patterns, and the delivery of one message (Redis's `pubsub.c` data).
//!
//! Connections are named by their mio token (their slot in
//! `Server::clients`), so a publish reaches a subscriber with one slab
//! index and no lock. Each connection also keeps its own list of
//! subscriptions ([`Subscriptions`], on the `Client`), for its replies'
//! counts, `CLIENT LIST` and the clean-up when it closes.
//!
//! A message is written straight into the subscriber's output buffer (a
//! RESP3 `>` push frame, or the RESP2 array of a subscribed connection)
//! and counts against the `pubsub` class of `client-output-buffer-limit`:
//! a subscriber that cannot keep up is disconnected, as Redis does.
//!
//! Shard channels (`SSUBSCRIBE`/`SPUBLISH`) are a namespace of their own,
//! as in a Redis 7.0 that is not a cluster.

use crate::net::client::Client;
use crate::server::Server;
use ferrokv_store::pattern::glob_match;
use hashbrown::HashMap;

/// One connection's subscriptions, in the order they were made.
#[derive(Default, Debug)]
pub struct Subscriptions {
    pub channels: Vec<Vec<u8>>,
    pub patterns: Vec<Vec<u8>>,
    pub shard_channels: Vec<Vec<u8>>,
}

impl Subscriptions {
    /// `SUBSCRIBE` + `PSUBSCRIBE` count (what their replies report).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
    /// Whether the connection is a pub/sub client (Redis's `CLIENT_PUBSUB`).
    pub fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }
}

/// Which namespace a channel subscription lives in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Shard,
}

/// Server-wide: channel → subscribers, pattern → subscribers.
#[derive(Default)]
pub struct PubSub {
    channels: HashMap<Vec<u8>, Vec<usize>>,
    shard_channels: HashMap<Vec<u8>, Vec<usize>>,
    /// Few patterns are usual: a list in subscription order.
    patterns: Vec<(Vec<u8>, Vec<usize>)>,
}

impl PubSub {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<usize>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    fn map_ref(&self, kind: Kind) -> &HashMap<Vec<u8>, Vec<usize>> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Shard => &self.shard_channels,
        }
    }

    /// Adds `token` to `channel`. False if it was already there.
    pub fn subscribe(&mut self, kind: Kind, token: usize, channel: &[u8]) -> bool {
        let subs = self.map(kind).entry(channel.to_vec()).or_default();
        if subs.contains(&token) {
            return false;
        }
        subs.push(token);
        true
    }

    /// Removes `token` from `channel`. False if it was not there.
    pub fn unsubscribe(&mut self, kind: Kind, token: usize, channel: &[u8]) -> bool {
        let map = self.map(kind);
        let Some(subs) = map.get_mut(channel) else {
            return false;
        };
        let Some(i) = subs.iter().position(|&t| t == token) else {
            return false;
        };
        subs.remove(i);
        if subs.is_empty() {
            map.remove(channel);
        }
        true
    }

    pub fn psubscribe(&mut self, token: usize, pattern: &[u8]) -> bool {
        match self.patterns.iter_mut().find(|(p, _)| p == pattern) {
            Some((_, subs)) if subs.contains(&token) => false,
            Some((_, subs)) => {
                subs.push(token);
                true
            }
            None => {
                self.patterns.push((pattern.to_vec(), vec![token]));
                true
            }
        }
    }

    pub fn punsubscribe(&mut self, token: usize, pattern: &[u8]) -> bool {
        let Some(pi) = self.patterns.iter().position(|(p, _)| p == pattern) else {
            return false;
        };
        let subs = &mut self.patterns[pi].1;
        let Some(i) = subs.iter().position(|&t| t == token) else {
            return false;
        };
        subs.remove(i);
        if subs.is_empty() {
            self.patterns.remove(pi);
        }
        true
    }

    /// Channels with at least one subscriber (`INFO pubsub_channels`).
    pub fn channel_count(&self, kind: Kind) -> usize {
        self.map_ref(kind).len()
    }

    /// Distinct patterns (`PUBSUB NUMPAT`, `INFO pubsub_patterns`, as 7.0).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    pub fn subscribers(&self, kind: Kind, channel: &[u8]) -> usize {
        self.map_ref(kind).get(channel).map_or(0, |s| s.len())
    }

    /// Active channels matching `pattern` (all when `None`).
    pub fn active_channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        self.map_ref(kind)
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c)))
            .cloned()
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty()
    }

    /// Who gets a message published on `channel`: channel subscribers, then
    /// each matching pattern's subscribers with the pattern.
    fn receivers(&self, kind: Kind, channel: &[u8]) -> (Vec<usize>, Vec<(Vec<u8>, usize)>) {
        let direct = self.map_ref(kind).get(channel).cloned().unwrap_or_default();
        let mut by_pattern = Vec::new();
        if kind == Kind::Channel {
            for (p, subs) in &self.patterns {
                if glob_match(p, channel) {
                    by_pattern.extend(subs.iter().map(|&t| (p.clone(), t)));
                }
            }
        }
        (direct, by_pattern)
    }
}

impl Server {
    /// Publishes `msg` on `channel` and returns how many receivers got it
    /// (Redis's `pubsubPublishMessage`). `current` is the connection whose
    /// command runs, which is out of its slab slot meanwhile.
    pub fn publish(&mut self, current: Option<&mut Client>, channel: &[u8], msg: &[u8]) -> usize {
        self.publish_kind(current, Kind::Channel, channel, msg)
    }

    pub fn publish_kind(
        &mut self,
        mut current: Option<&mut Client>,
        kind: Kind,
        channel: &[u8],
        msg: &[u8],
    ) -> usize {
        if self.pubsub.is_empty() {
            return 0;
        }
        let (direct, by_pattern) = self.pubsub.receivers(kind, channel);
        let kind_name: &[u8] = match kind {
            Kind::Channel => b"message",
            Kind::Shard => b"smessage",
        };
        for &t in &direct {
            self.deliver(current.as_deref_mut(), t, |c| {
                c.out.push_with(3, |o| {
                    o.bulk(kind_name);
                    o.bulk(channel);
                    o.bulk(msg);
                })
            });
        }
        for (p, t) in &by_pattern {
            self.deliver(current.as_deref_mut(), *t, |c| {
                c.out.push_with(4, |o| {
                    o.bulk(b"pmessage");
                    o.bulk(p);
                    o.bulk(channel);
                    o.bulk(msg);
                })
            });
        }
        direct.len() + by_pattern.len()
    }

    /// Writes into connection `t`'s output buffer and queues it for
    /// writing, applying the `pubsub` output limits.
    fn deliver(&mut self, current: Option<&mut Client>, t: usize, write: impl FnOnce(&mut Client)) {
        if let Some(c) = current {
            if c.token == t {
                // Queued for writing when its command finishes.
                write(c);
                return;
            }
        }
        let Some(Some(c)) = self.clients.get_mut(t) else {
            return;
        };
        write(c);
        if !c.pending_write {
            c.pending_write = true;
            self.pending_writes.push(t);
        }
        let limit = self.config.output_limit_pubsub;
        let pending = c.pending_output() as u64;
        let hard = limit.hard > 0 && pending >= limit.hard;
        if limit.soft > 0 && pending >= limit.soft {
            c.soft_limit_since
                .get_or_insert_with(std::time::Instant::now);
        }
        if hard && !c.close_asap {
            tracing::warn!(
                "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                c.id,
                c.addr
            );
            c.close_asap = true;
            self.stats.client_outbuf_limit_disconnections += 1;
            self.close_queue.push(t);
        }
    }

    /// Drops every subscription of a closing connection.
    pub fn pubsub_forget_client(&mut self, c: &mut Client) {
        let subs = std::mem::take(&mut c.subs);
        for ch in &subs.channels {
            self.pubsub.unsubscribe(Kind::Channel, c.token, ch);
        }
        for ch in &subs.shard_channels {
            self.pubsub.unsubscribe(Kind::Shard, c.token, ch);
        }
        for p in &subs.patterns {
            self.pubsub.punsubscribe(c.token, p);
        }
    }

    /// The output limit class of a connection: `pubsub` while it has
    /// subscriptions, else `normal`.
    pub fn output_limit_for(&self, c: &Client) -> crate::config::OutputLimit {
        if c.subs.any() {
            self.config.output_limit_pubsub
        } else {
            self.config.output_limit_normal
        }
    }
}
