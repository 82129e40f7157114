//! Client-side caching (Redis 6+'s `CLIENT TRACKING`): which clients may
//! hold which keys, and the invalidation messages they get when a key
//! changes.
//!
//! The state lives here, not in [`Client`]: the connection whose command
//! runs is out of the server's client table while it runs, yet a write it
//! makes must see its own tracking flags (NOLOOP) and those of everyone
//! else. So every tracking client has a [`ClientTracking`] in
//! [`Tracking::clients`], keyed by its id, with the slot of its connection.
//!
//! - **Default mode**: a read-only command run by a tracking client puts
//!   its keys in the *tracking table* (key → ids of clients that may cache
//!   it). A change of the key sends those clients `invalidate [key]` and
//!   forgets the entry. As in Redis the table holds client ids and is
//!   cleaned lazily: a client that goes away leaves ids behind, skipped
//!   when their key is invalidated (`tracking_total_items` counts them).
//! - **BCAST**: no table; a changed key that starts with a prefix some
//!   client registered is collected under that prefix, and before the loop
//!   sleeps each prefix's clients get one `invalidate [k1 k2 ...]`.
//! - Keys are global, not per database (as in Redis: a write to `k` in any
//!   database invalidates `k`). FLUSHDB and FLUSHALL send every tracking
//!   client `invalidate` with a null and empty the table.
//! - Messages are RESP3 pushes on the client's own connection, or — with
//!   `REDIRECT id` — go to that connection: as a push when it speaks RESP3,
//!   as a `message` on `__redis__:invalidate` when it is a RESP2
//!   subscriber. A redirect target that went away makes the next message a
//!   `tracking-redir-broken` push to the tracking client (RESP3 only) and
//!   the `R` flag in `CLIENT LIST`.
//! - Messages for the client whose command runs wait until its reply is
//!   written (until after EXEC's for a transaction), as Redis 7.0's
//!   `tracking_pending_keys`; pushes ignore `CLIENT REPLY OFF`.
//! - `tracking-table-max-keys` bounds the table: before each command, while
//!   it is over, random keys are forgotten and their clients told they are
//!   invalid, ahead of the command's reply (Redis's `trackingLimitUsedSlots`, with its growing effort).
//!
//! With nobody tracking, every hook costs one branch ([`Tracking::active`]).

use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::encode;
use ferrokv_resp::Protocol;
use hashbrown::{HashMap, HashSet};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// The pub/sub channel RESP2 redirect targets receive invalidations on.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// One tracking client's mode (`CLIENT TRACKING ON ...`).
#[derive(Debug, Clone, Default)]
pub struct ClientTracking {
    /// Its slot in `Server::clients`.
    pub token: usize,
    /// `REDIRECT id` (0: none) and the slot that id had when it was given.
    pub redirect: u64,
    pub redirect_token: usize,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// `CLIENT CACHING YES|NO` given for the next command.
    pub caching: bool,
    /// The redirect target was found gone (`CLIENT LIST`'s `R`).
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted (as `CLIENT TRACKINGINFO` lists them).
    pub prefixes: BTreeSet<Vec<u8>>,
}

/// Keys changed this loop turn under one BCAST prefix, and who listens.
#[derive(Default)]
struct Broadcast {
    /// Key → id of the client that last changed it (0: none, as expiry),
    /// so a NOLOOP client is not told of its own writes.
    keys: BTreeMap<Vec<u8>, u64>,
    clients: BTreeSet<u64>,
}

/// The tracking table: key → ids of clients that may cache it. Keys sit in
/// a vector too, so that `tracking-table-max-keys` can pick a random one
/// in O(1) (hash maps have no random access).
#[derive(Default)]
struct KeyTable {
    index: HashMap<Vec<u8>, usize>,
    entries: Vec<(Vec<u8>, HashSet<u64>)>,
}

impl KeyTable {
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds `id` for `key`; whether it was new.
    fn insert(&mut self, key: &[u8], id: u64) -> bool {
        let at = match self.index.get(key) {
            Some(&i) => i,
            None => {
                self.index.insert(key.to_vec(), self.entries.len());
                self.entries.push((key.to_vec(), HashSet::new()));
                self.entries.len() - 1
            }
        };
        self.entries[at].1.insert(id)
    }

    fn remove(&mut self, key: &[u8]) -> Option<HashSet<u64>> {
        let at = self.index.remove(key)?;
        let (_, ids) = self.entries.swap_remove(at);
        if let Some((moved, _)) = self.entries.get(at) {
            if let Some(i) = self.index.get_mut(moved.as_slice()) {
                *i = at;
            }
        }
        Some(ids)
    }

    fn key_at(&self, i: usize) -> &[u8] {
        &self.entries[i].0
    }
}

/// What an invalidation says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Message {
    /// These keys changed.
    Keys(Vec<Vec<u8>>),
    /// Everything changed (FLUSHDB, FLUSHALL).
    All,
}

/// The server's client-side caching state.
#[derive(Default)]
pub struct Tracking {
    /// Clients with tracking on, by id.
    pub clients: HashMap<u64, ClientTracking>,
    table: KeyTable,
    /// Client ids across the table (`tracking_total_items`).
    total_items: u64,
    prefixes: BTreeMap<Vec<u8>, Broadcast>,
    /// Prefixes that collected keys this turn: the broadcast visits only
    /// them, not every registered prefix on every loop turn.
    changed_prefixes: Vec<Vec<u8>>,
    /// The clients whose commands run, innermost last: a command can run
    /// inside another's (a client woken from BLPOP by a write is served
    /// before the writer's command ends; a busy script lets a few
    /// commands through), and each of them is out of its slab slot.
    running: Vec<u64>,
    /// Messages for a running client (or for its redirect), sent once its
    /// reply is written: (tracking client id, message).
    pending: Vec<(u64, Message)>,
    /// While a tracking client's script runs: its id and the keys the
    /// script command declared. Redis 7.0 remembers, for a read made by a
    /// script, the keys of the script's caller (`EVAL ... 1 k` caches `k`,
    /// whatever the script read).
    script_keys: Option<(u64, Vec<Vec<u8>>)>,
    /// How many turns in a row the table stayed over its bound.
    over_limit_turns: u32,
    /// Totals for `/metrics`: invalidation messages sent, keys forgotten
    /// for `tracking-table-max-keys`.
    pub invalidations_sent: u64,
    pub keys_evicted: u64,
}

impl Tracking {
    /// Whether any client tracks: the one branch hooks pay otherwise.
    #[inline]
    pub fn active(&self) -> bool {
        !self.clients.is_empty()
    }

    pub fn total_keys(&self) -> usize {
        self.table.len()
    }

    pub fn total_items(&self) -> u64 {
        self.total_items
    }

    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// The mode of client `id`, when it tracks.
    pub fn of(&self, id: u64) -> Option<&ClientTracking> {
        self.clients.get(&id)
    }

    /// Stops tracking for `id` (`CLIENT TRACKING OFF`, RESET, disconnect):
    /// its BCAST prefixes go; its ids in the table are left to lazy cleanup.
    pub fn disable(&mut self, id: u64) {
        let Some(ct) = self.clients.remove(&id) else {
            return;
        };
        for p in &ct.prefixes {
            if let Some(b) = self.prefixes.get_mut(p) {
                b.clients.remove(&id);
                if b.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
        if self.clients.is_empty() && self.running.is_empty() {
            self.pending.clear();
        }
    }

    /// Whether `prefixes` overlap each other or one of `existing`; the
    /// error in Redis's words, naming the pair Redis names
    /// (`checkPrefixCollisionsOrReply`: the first prefix given that
    /// overlaps anything, with the smallest existing prefix it overlaps,
    /// else the first later one given).
    ///
    /// Two prefixes overlap when one starts the other. Redis compares every
    /// pair; here a prefix that overlaps nothing costs its length in
    /// lookups and a binary search, so a request of a million prefixes is
    /// checked in O(n log n), not O(n²).
    pub fn prefix_collision(existing: &BTreeSet<Vec<u8>>, prefixes: &[&[u8]]) -> Option<String> {
        let s = |b: &[u8]| String::from_utf8_lossy(c_str(b)).into_owned();
        // The prefixes given, sorted, with their positions: those that
        // start with `p` are one run from `p` on.
        let mut sorted: Vec<(&[u8], usize)> =
            prefixes.iter().enumerate().map(|(i, p)| (*p, i)).collect();
        sorted.sort_unstable();
        let mut first_at: HashMap<&[u8], usize> = HashMap::new();
        for (i, p) in prefixes.iter().enumerate() {
            first_at.entry(*p).or_insert(i);
        }
        /// Positions of the given prefixes that start with `p`.
        fn run<'a>(
            sorted: &'a [(&'a [u8], usize)],
            p: &'a [u8],
        ) -> impl Iterator<Item = usize> + 'a {
            let from = sorted.partition_point(|(q, _)| *q < p);
            sorted[from..]
                .iter()
                .take_while(move |(q, _)| q.starts_with(p))
                .map(|&(_, j)| j)
        }
        for (i, p) in prefixes.iter().enumerate() {
            // Existing ones first, in their (sorted) order: those that
            // start `p` sort before it, shortest first.
            let shorter = (0..p.len())
                .map(|l| &p[..l])
                .find(|e| existing.contains(*e));
            let longer = || {
                existing
                    .range(p.to_vec()..)
                    .next()
                    .filter(|e| e.starts_with(p))
                    .map(|e| e.as_slice())
            };
            if let Some(e) = shorter.or_else(longer) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    s(p),
                    s(e)
                ));
            }
            // Later ones given: those that start `p`, and those `p` starts.
            let later_longer = run(&sorted, p).filter(|&j| j > i).min();
            let later_shorter = (0..p.len())
                .filter_map(|l| {
                    let q = &p[..l];
                    // The first index > i holding q: the first one, or a
                    // scan of q's equal run when that is not past i.
                    match first_at.get(q) {
                        Some(&j) if j > i => Some(j),
                        Some(_) => run(&sorted, q).filter(|&j| j > i && prefixes[j] == q).min(),
                        None => None,
                    }
                })
                .min();
            if let Some(j) = [later_longer, later_shorter].into_iter().flatten().min() {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    s(p),
                    s(prefixes[j])
                ));
            }
        }
        None
    }

    /// Turns tracking on for `id` (Redis's `enableTracking`): the mode
    /// flags are replaced, BCAST prefixes added to those it had.
    pub fn enable(&mut self, id: u64, mut mode: ClientTracking, prefixes: &[&[u8]]) {
        let previous = self.clients.remove(&id);
        let mut registered = previous.map(|p| p.prefixes).unwrap_or_default();
        if mode.bcast {
            let wanted: Vec<&[u8]> = if prefixes.is_empty() {
                vec![&b""[..]]
            } else {
                prefixes.to_vec()
            };
            for p in wanted {
                self.prefixes
                    .entry(p.to_vec())
                    .or_default()
                    .clients
                    .insert(id);
                registered.insert(p.to_vec());
            }
        }
        mode.prefixes = registered;
        self.clients.insert(id, mode);
        // Turned on by a command that was not noted as running (nobody
        // tracked when it began): it runs from now on.
        if !self.is_running(id) {
            self.running.push(id);
        }
    }

    /// The innermost running client (0: none): the one changing keys.
    fn current(&self) -> u64 {
        self.running.last().copied().unwrap_or(0)
    }

    fn is_running(&self, id: u64) -> bool {
        id != 0 && self.running.contains(&id)
    }
}

/// A C string's view of bytes (Redis prints prefixes with `%s`).
fn c_str(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

/// Writes `invalidate` with `msg` into `target`'s output.
fn write_invalidation(
    target: &mut Client,
    msg: &Message,
    source_proto: Protocol,
    as_message: bool,
) {
    let buf = &mut target.out.buf;
    if as_message {
        encode::array(buf, 3);
        encode::bulk(buf, b"message");
        encode::bulk(buf, INVALIDATE_CHANNEL);
    } else {
        encode::push(buf, Protocol::Resp3, 2);
        encode::bulk(buf, b"invalidate");
    }
    match msg {
        Message::Keys(keys) => {
            encode::array(buf, keys.len());
            for k in keys {
                encode::bulk(buf, k);
            }
        }
        // Redis sends the null of the tracking client's protocol.
        Message::All => encode::null(buf, source_proto),
    }
}

impl Server {
    /// Before a top-level command of `client` (Redis's processCommand):
    /// notes who runs, and keeps the table within its bound.
    /// Returns whether it noted the client as running (pass it on to
    /// [`Self::tracking_after_command`]).
    #[inline]
    pub fn tracking_before_command(&mut self, client: &mut Client) -> bool {
        if !self.tracking.active() {
            return false;
        }
        self.tracking.running.push(client.id);
        self.tracking_limit_keys();
        // Redis trims in processCommand, before the command runs: what the
        // trim sends this client comes ahead of the command's reply.
        if !self.tracking.pending.is_empty() {
            self.send_pending(client);
        }
        true
    }

    /// Sends what waited for `client`, the running one; what waits for a
    /// client further out stays queued.
    fn send_pending(&mut self, client: &mut Client) {
        let pending = std::mem::take(&mut self.tracking.pending);
        let mut keep = Vec::new();
        for (source, msg) in pending {
            let redirect = self.tracking.of(source).map_or(0, |t| t.redirect);
            let mine =
                source == client.id || (redirect == client.id && !self.tracking.is_running(source));
            if mine {
                self.send_invalidation(Some(client), source, &msg);
            } else {
                keep.push((source, msg));
            }
        }
        self.tracking.pending.extend(keep);
    }

    /// After a top-level command of `client`, once its reply is final:
    /// sends what waited for it, and lets `CLIENT CACHING` lapse unless
    /// the command was a CLIENT one or a transaction is open (Redis's
    /// `resetClient`). `client_cmd`: the command looked up was CLIENT.
    #[inline]
    pub fn tracking_after_command(&mut self, client: &mut Client, client_cmd: bool, noted: bool) {
        // Before `active`: a command that turned the last tracking off
        // must still end its turn as the running client; one that turned
        // it on (inside a MULTI its later reads and writes count) was
        // noted by `enable`.
        if noted || self.tracking.running.last() == Some(&client.id) {
            if !self.tracking.pending.is_empty() {
                self.send_pending(client);
            }
            self.tracking.running.pop();
            if self.tracking.running.is_empty() {
                self.tracking.pending.clear();
            }
        }
        if !self.tracking.active() {
            return;
        }
        if !client_cmd && client.multi.is_none() {
            if let Some(ct) = self.tracking.clients.get_mut(&client.id) {
                ct.caching = false;
            }
        }
    }

    /// After a read-only command of `client_id`: remembers its keys for it
    /// (Redis's `trackingRememberKeys`), unless it is in BCAST mode or its
    /// OPTIN/OPTOUT mode says not this time.
    pub fn tracking_remember_keys(
        &mut self,
        client_id: u64,
        spec: &crate::commands::CommandSpec,
        args: &ferrokv_resp::Args,
    ) {
        if client_id == crate::scripting::SCRIPT_CLIENT_ID {
            return self.tracking_remember_script_keys(spec);
        }
        let Some(ct) = self.tracking.clients.get(&client_id) else {
            return;
        };
        if ct.bcast || (ct.optin && !ct.caching) || (ct.optout && ct.caching) {
            return;
        }
        // Shard channels are keys to the command table, not to caches.
        if spec.has(crate::commands::flags::PUBSUB) {
            return;
        }
        let argv: Vec<&[u8]> = args.iter().collect();
        for (i, _) in crate::commands::server::key_positions(spec, &argv) {
            if self.tracking.table.insert(argv[i], client_id) {
                self.tracking.total_items += 1;
            }
        }
    }

    /// A script command of a tracking client starts (`Some`: its call) or
    /// ends (`None`): the keys it declared are what its reads remember.
    pub fn tracking_script_call(
        &mut self,
        client_id: u64,
        call: Option<(&crate::commands::CommandSpec, &ferrokv_resp::Args)>,
    ) {
        self.tracking.script_keys = call.map(|(spec, args)| {
            let argv: Vec<&[u8]> = args.iter().collect();
            let keys = crate::commands::server::key_positions(spec, &argv)
                .into_iter()
                .map(|(i, _)| argv[i].to_vec())
                .collect();
            (client_id, keys)
        });
    }

    /// A read-only command inside a script: the caller's declared keys.
    fn tracking_remember_script_keys(&mut self, spec: &crate::commands::CommandSpec) {
        let Some((caller, keys)) = self.tracking.script_keys.take() else {
            return;
        };
        let wants = self.tracking.clients.get(&caller).is_some_and(|ct| {
            !(ct.bcast || (ct.optin && !ct.caching) || (ct.optout && ct.caching))
        });
        if wants && !spec.has(crate::commands::flags::PUBSUB) {
            for k in &keys {
                if self.tracking.table.insert(k, caller) {
                    self.tracking.total_items += 1;
                }
            }
        }
        self.tracking.script_keys = Some((caller, keys));
    }

    /// A key changed (Redis's `trackingInvalidateKey`): its BCAST prefixes
    /// collect it, and the clients that may cache it are told. `bcast` is
    /// false when the table forgets a key that did not change.
    pub fn tracking_invalidate_key(&mut self, key: &[u8], bcast: bool) {
        if !self.tracking.active() {
            return;
        }
        let current = self.tracking.current();
        if bcast && !self.tracking.prefixes.is_empty() {
            // Whichever is fewer: the registered prefixes, or the key's own
            // prefixes looked up (so a client registering a million
            // prefixes does not make every write scan them).
            let t = &mut self.tracking;
            let mut note = |p: &[u8], b: &mut Broadcast| {
                if b.keys.is_empty() {
                    t.changed_prefixes.push(p.to_vec());
                }
                b.keys.insert(key.to_vec(), current);
            };
            if t.prefixes.len() <= key.len() + 1 {
                for (p, b) in t.prefixes.iter_mut() {
                    if key.starts_with(p) {
                        note(p, b);
                    }
                }
            } else {
                for l in 0..=key.len() {
                    if let Some(b) = t.prefixes.get_mut(&key[..l]) {
                        note(&key[..l], b);
                    }
                }
            }
        }
        let Some(ids) = self.tracking.table.remove(key) else {
            return;
        };
        self.tracking.total_items -= ids.len() as u64;
        for id in ids {
            let Some(ct) = self.tracking.clients.get(&id) else {
                continue;
            };
            // A client that switched to BCAST gets no message for what it
            // read before.
            if ct.bcast || (ct.noloop && id == current) {
                continue;
            }
            let msg = Message::Keys(vec![key.to_vec()]);
            if self.tracking.is_running(id) {
                self.tracking.pending.push((id, msg));
            } else {
                self.send_invalidation(None, id, &msg);
            }
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told everything is
    /// invalid, and the table is emptied (Redis's
    /// `trackingInvalidateKeysOnFlush`).
    pub fn tracking_invalidate_all(&mut self) {
        if !self.tracking.active() {
            return;
        }
        let ids: Vec<u64> = self.tracking.clients.keys().copied().collect();
        for id in ids {
            if self.tracking.is_running(id) {
                self.tracking.pending.push((id, Message::All));
            } else {
                self.send_invalidation(None, id, &Message::All);
            }
        }
        let old = std::mem::take(&mut self.tracking.table);
        self.tracking.total_items = 0;
        // A big table is freed off the loop, as Redis's async flush does.
        if old.len() >= 1024 {
            self.lazy_free(old);
        }
    }

    /// Before the loop sleeps: each BCAST prefix's changed keys go to its
    /// clients in one message (Redis's `trackingBroadcastInvalidationMessages`).
    pub fn tracking_broadcast(&mut self) {
        if self.tracking.changed_prefixes.is_empty() {
            return;
        }
        let mut changed = std::mem::take(&mut self.tracking.changed_prefixes);
        // In prefix order, as Redis walks its prefix table.
        changed.sort_unstable();
        let mut sends: Vec<(u64, Message)> = Vec::new();
        for p in &changed {
            let Some(b) = self.tracking.prefixes.get_mut(p) else {
                continue;
            };
            if b.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut b.keys);
            for &id in &b.clients {
                let noloop = self.tracking.clients.get(&id).is_some_and(|c| c.noloop);
                let list: Vec<Vec<u8>> = keys
                    .iter()
                    .filter(|(_, &by)| !(noloop && by == id))
                    .map(|(k, _)| k.clone())
                    .collect();
                if !list.is_empty() {
                    sends.push((id, Message::Keys(list)));
                }
            }
        }
        for (id, msg) in sends {
            self.send_invalidation(None, id, &msg);
        }
    }

    /// While the table is over `tracking-table-max-keys`, forgets random
    /// keys, telling their clients; the effort grows each turn it stays over.
    fn tracking_limit_keys(&mut self) {
        let max = self.config.tracking_table_max_keys as usize;
        if max == 0 || self.tracking.table.len() <= max {
            self.tracking.over_limit_turns = 0;
            return;
        }
        let mut effort = 100 * (self.tracking.over_limit_turns as u64 + 1);
        while effort > 0 && self.tracking.table.len() > max {
            effort -= 1;
            let i = self.rng.gen_range(0..self.tracking.table.len());
            let key = self.tracking.table.key_at(i).to_vec();
            self.tracking.keys_evicted += 1;
            self.tracking_invalidate_key(&key, false);
        }
        if self.tracking.table.len() > max {
            self.tracking.over_limit_turns += 1;
        } else {
            self.tracking.over_limit_turns = 0;
        }
    }

    /// Sends `msg` for tracking client `source` (Redis's
    /// `sendTrackingMessage`): to it, or to its redirect target. `current`
    /// is the connection whose command just ended, out of the table; a
    /// message that needs the running connection while it runs waits in
    /// `pending`.
    fn send_invalidation(&mut self, mut current: Option<&mut Client>, source: u64, msg: &Message) {
        let Some(ct) = self.tracking.clients.get(&source) else {
            return;
        };
        let (token, redirect, redirect_token) = (ct.token, ct.redirect, ct.redirect_token);
        if current.is_none()
            && (self.tracking.is_running(source) || self.tracking.is_running(redirect))
        {
            self.tracking.pending.push((source, msg.clone()));
            return;
        }
        let cur_id = current.as_ref().map_or(0, |c| c.id);
        // The tracking client's protocol, and whether its connection is here.
        let source_proto = if source == cur_id {
            current.as_ref().map(|c| c.out.proto)
        } else {
            match self.clients.get(token) {
                Some(Some(c)) if c.id == source => Some(c.out.proto),
                _ => None,
            }
        };
        let Some(source_proto) = source_proto else {
            return;
        };
        let (target_id, target_token) = if redirect != 0 {
            let alive = redirect == cur_id
                || matches!(self.clients.get(redirect_token), Some(Some(c)) if c.id == redirect);
            if !alive {
                if let Some(ct) = self.tracking.clients.get_mut(&source) {
                    ct.broken_redirect = true;
                }
                if source_proto.is_resp3() {
                    self.with_client(current.as_deref_mut(), source, token, |c| {
                        encode::push(&mut c.out.buf, Protocol::Resp3, 2);
                        encode::bulk(&mut c.out.buf, b"tracking-redir-broken");
                        encode::integer(&mut c.out.buf, redirect as i64);
                    });
                }
                return;
            }
            (redirect, redirect_token)
        } else {
            (source, token)
        };
        let redirected = redirect != 0;
        let mut sent = false;
        self.with_client(current, target_id, target_token, |c| {
            if c.out.proto.is_resp3() {
                write_invalidation(c, msg, source_proto, false);
                sent = true;
            } else if redirected && c.subs.any() {
                write_invalidation(c, msg, source_proto, true);
                sent = true;
            }
        });
        if sent {
            self.tracking.invalidations_sent += 1;
        }
    }

    /// Runs `write` on client `id` (`current` when it is that one, else
    /// the table's slot `token`) and queues its output for writing.
    fn with_client(
        &mut self,
        current: Option<&mut Client>,
        id: u64,
        token: usize,
        write: impl FnOnce(&mut Client),
    ) {
        if let Some(c) = current {
            if c.id == id {
                write(c);
                return;
            }
        }
        let Some(Some(c)) = self.clients.get_mut(token) else {
            return;
        };
        if c.id != id {
            return;
        }
        write(c);
        if !c.pending_write {
            c.pending_write = true;
            self.pending_writes.push(token);
        }
    }

    /// The slot of the connection with id `id` (a scan, made once when a
    /// REDIRECT is given); `current` is the connection running.
    pub fn client_token_by_id(&self, current: &Client, id: u64) -> Option<usize> {
        if current.id == id {
            return Some(current.token);
        }
        self.clients
            .iter()
            .find_map(|(t, c)| c.as_deref().filter(|c| c.id == id).map(|_| t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn key_table_remove_keeps_the_index_of_the_moved_entry() {
        let mut t = KeyTable::default();
        assert!(t.insert(b"a", 1));
        assert!(t.insert(b"b", 1));
        assert!(t.insert(b"c", 2));
        assert!(!t.insert(b"c", 2));
        assert_eq!(t.remove(b"a").map(|s| s.len()), Some(1));
        // "c" moved into slot 0: it must still be found.
        assert_eq!(t.remove(b"c").map(|s| s.contains(&2)), Some(true));
        assert_eq!(t.len(), 1);
        assert_eq!(t.key_at(0), b"b");
        assert!(t.remove(b"zz").is_none());
    }

    #[test]
    fn prefix_collisions_use_redis_texts() {
        let none = BTreeSet::new();
        assert_eq!(
            Tracking::prefix_collision(&none, &[b"a", b"ab"]).unwrap(),
            "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."
        );
        let mut have = BTreeSet::new();
        have.insert(b"x".to_vec());
        assert_eq!(
            Tracking::prefix_collision(&have, &[b"z", b"xa"]).unwrap(),
            "ERR Prefix 'xa' overlaps with an existing prefix 'x'. Prefixes for a single client must not overlap."
        );
        assert!(Tracking::prefix_collision(&have, &[b"z", b"w"]).is_none());
    }

    /// The pair named is Redis's: the first prefix (in the order given)
    /// that overlaps anything, and the first later one it overlaps — found
    /// without comparing every pair.
    #[test]
    fn prefix_collision_names_the_pair_a_pairwise_scan_names() {
        /// Redis's scan: every pair, in its order.
        fn pairwise(existing: &BTreeSet<Vec<u8>>, p: &[&[u8]]) -> Option<String> {
            let ov = |a: &[u8], b: &[u8]| {
                let n = a.len().min(b.len());
                a[..n] == b[..n]
            };
            let text = |a: &[u8], kind: &str, b: &[u8]| {
                format!(
                    "ERR Prefix '{}' overlaps with {kind} '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(a),
                    String::from_utf8_lossy(b)
                )
            };
            for i in 0..p.len() {
                if let Some(e) = existing.iter().find(|e| ov(e, p[i])) {
                    return Some(text(p[i], "an existing prefix", e));
                }
                if let Some(q) = p[i + 1..].iter().find(|q| ov(p[i], q)) {
                    return Some(text(p[i], "another provided prefix", q));
                }
            }
            None
        }
        let words: [&[u8]; 9] = [b"", b"a", b"ab", b"abc", b"b", b"ba", b"c", b"abd", b"bb"];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..3000 {
            let n = rng.gen_range(1..6);
            let given: Vec<&[u8]> = (0..n)
                .map(|_| words[rng.gen_range(0..words.len())])
                .collect();
            let existing: BTreeSet<Vec<u8>> = (0..rng.gen_range(0..3))
                .map(|_| words[rng.gen_range(1..words.len())].to_vec())
                .collect();
            assert_eq!(
                Tracking::prefix_collision(&existing, &given),
                pairwise(&existing, &given),
                "{given:?} {existing:?}"
            );
        }
    }

    #[test]
    fn a_million_disjoint_prefixes_are_checked_quickly() {
        let owned: Vec<Vec<u8>> = (0..1_000_000u32)
            .map(|i| format!("{i:07}").into_bytes())
            .collect();
        let given: Vec<&[u8]> = owned.iter().map(|v| v.as_slice()).collect();
        let t = std::time::Instant::now();
        assert!(Tracking::prefix_collision(&BTreeSet::new(), &given).is_none());
        assert!(t.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn disable_drops_prefixes_nobody_else_uses() {
        let mut t = Tracking::default();
        let bcast = ClientTracking {
            bcast: true,
            ..Default::default()
        };
        t.enable(1, bcast.clone(), &[b"a", b"b"]);
        t.enable(2, bcast, &[b"a"]);
        assert_eq!(t.total_prefixes(), 2);
        t.disable(1);
        assert_eq!(t.total_prefixes(), 1);
        t.disable(2);
        assert_eq!(t.total_prefixes(), 0);
        assert!(!t.active());
    }
}
