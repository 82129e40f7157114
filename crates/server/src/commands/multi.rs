//! The transactions family: MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis's
//! `multi.c`).
//!
//! Between MULTI and EXEC a connection's commands are checked (existence,
//! arity, authentication, ...) and queued instead of run; a command refused
//! at that point marks the transaction, and EXEC then answers `EXECABORT`.
//! EXEC runs the queue through the same `Server::call` a top-level command
//! goes through, so statistics, WATCH invalidation, keyspace events and
//! propagation need nothing special — except that the propagation stream
//! collects what the queue wrote and emits it as one `MULTI ... EXEC`
//! block (see `Server::end_exec_propagation`), so the AOF and replicas
//! apply it atomically.
//!
//! WATCH is optimistic locking: the registry ([`Watches`]) maps each
//! watched (db, key) to the connections (by token) that watch it. Any
//! change to the key — a write command whose key arguments include it
//! (`Server::call` touches a write command's keys from the command table's
//! key positions), expiry, FLUSHDB/FLUSHALL/SWAPDB — marks those
//! connections, and their EXEC answers a null array. As Redis 7.0, a
//! watched key that expired (even if nobody deleted it yet) counts as
//! changed at EXEC, unless it was already expired when it was watched.
//!
//! # Hostile input
//!
//! Audited (issue #15): no client-chosen number drives work here. A queue
//! holds what the client sent (its memory shows as `multi-mem` in
//! `CLIENT LIST`, as in Redis); `WATCH` is per key given;
//! EXEC's work is its queue's.

use super::flags::*;
use super::{CommandSpec, Ctx};
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::Args;
use hashbrown::HashMap;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("transactions")
        .keys(0, 0, 0)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        multi,
    )
    .since("1.2.0")
    .doc("Starts a transaction.", ""),
    cmd("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, exec)
        .since("1.2.0")
        .complexity("Depends on commands in the transaction")
        .doc("Executes all commands in a transaction.", ""),
    cmd(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        discard,
    )
    .since("2.0.0")
    .complexity("O(N), when N is the number of queued commands")
    .doc("Discards a transaction.", ""),
    cmd(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        watch,
    )
    .keys(1, -1, 1)
    .since("2.2.0")
    .complexity("O(1) for every key.")
    .doc(
        "Monitors changes to keys to determine the execution of a transaction.",
        "key [key ...]",
    ),
    cmd(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        unwatch,
    )
    .since("2.2.0")
    .doc("Forgets about watched keys of a transaction.", ""),
];

pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// One queued command: its arguments in one buffer, and its table row.
pub struct QueuedCommand {
    pub idx: usize,
    buf: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

impl QueuedCommand {
    pub fn new(idx: usize, args: &Args) -> Self {
        let mut buf = Vec::new();
        let mut ranges = Vec::with_capacity(args.len());
        for a in args.iter() {
            ranges.push((buf.len(), a.len()));
            buf.extend_from_slice(a);
        }
        QueuedCommand { idx, buf, ranges }
    }

    pub fn args(&self) -> Args<'_> {
        Args::new(&self.buf, &self.ranges)
    }

    /// Bytes held (`multi-mem` of `CLIENT LIST`).
    pub fn mem(&self) -> usize {
        self.buf.capacity() + self.ranges.capacity() * 16
    }
}

/// A connection's open transaction (Redis's `CLIENT_MULTI` + `mstate`).
#[derive(Default)]
pub struct Transaction {
    pub queued: Vec<QueuedCommand>,
    /// The sum of the queued commands' [`QueuedCommand::mem`], kept as they
    /// are queued (client eviction reads it every loop turn).
    pub queued_mem: usize,
    /// A command was refused while queueing (`CLIENT_DIRTY_EXEC`).
    pub aborted: bool,
    /// The queued commands' flags together (scripts' as their shebang
    /// declares), Redis's `mstate.cmd_flags`: EXEC is checked as a write
    /// when one of them is, at EXEC time.
    pub cmd_flags: u32,
}

/// `multi=` of `CLIENT LIST`: queued commands, or -1 outside MULTI.
pub fn queued_count(c: &Client) -> i64 {
    c.multi.as_ref().map_or(-1, |t| t.queued.len() as i64)
}

/// `multi-mem=` of `CLIENT LIST`.
pub fn queued_mem(c: &Client) -> usize {
    c.multi.as_ref().map_or(0, |t| {
        t.queued_mem + t.queued.capacity() * std::mem::size_of::<QueuedCommand>()
    })
}

/// The commands a connection in MULTI runs at once instead of queueing.
pub fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

struct WatchedKey {
    db: usize,
    key: Vec<u8>,
    /// Logically expired when watched: its deletion is then no change.
    expired: bool,
}

#[derive(Default)]
struct ClientWatch {
    keys: Vec<WatchedKey>,
    /// A watched key changed (`CLIENT_DIRTY_CAS`).
    dirty: bool,
}

/// Who watches which keys.
#[derive(Default)]
pub struct Watches {
    by_key: HashMap<(usize, Vec<u8>), Vec<usize>>,
    by_client: HashMap<usize, ClientWatch>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }

    fn watch(&mut self, token: usize, db: usize, key: &[u8], expired: bool) {
        let cw = self.by_client.entry(token).or_default();
        if cw.keys.iter().any(|k| k.db == db && k.key == key) {
            return;
        }
        cw.keys.push(WatchedKey {
            db,
            key: key.to_vec(),
            expired,
        });
        self.by_key
            .entry((db, key.to_vec()))
            .or_default()
            .push(token);
    }

    fn unwatch_all(&mut self, token: usize) {
        let Some(cw) = self.by_client.remove(&token) else {
            return;
        };
        for wk in cw.keys {
            let k = (wk.db, wk.key);
            if let Some(v) = self.by_key.get_mut(&k) {
                v.retain(|&t| t != token);
                if v.is_empty() {
                    self.by_key.remove(&k);
                }
            }
        }
    }

    /// Marks the watchers of (db, key) (Redis's `touchWatchedKey`);
    /// `exists`: whether the key is in the table now.
    fn touch(&mut self, db: usize, key: &[u8], exists: bool) {
        let Some(tokens) = self.by_key.get(&(db, key.to_vec())) else {
            return;
        };
        for t in tokens {
            let Some(cw) = self.by_client.get_mut(t) else {
                continue;
            };
            if let Some(wk) = cw
                .keys
                .iter_mut()
                .find(|k| k.db == db && k.key == key && k.expired)
            {
                if !exists {
                    // An already expired key was deleted: no change.
                    wk.expired = false;
                    continue;
                }
            }
            cw.dirty = true;
        }
    }

    /// A flush or swap emptied `db` of `key` (Redis's
    /// `touchAllWatchedKeysInDb`): a key watched when already expired is
    /// no logical change (its flag is cleared unless the swap brings the
    /// key back, `in_other`); any other watch breaks.
    fn touch_emptied(&mut self, db: usize, key: &[u8], in_other: bool) {
        let Some(tokens) = self.by_key.get(&(db, key.to_vec())) else {
            return;
        };
        for t in tokens {
            let Some(cw) = self.by_client.get_mut(t) else {
                continue;
            };
            match cw.keys.iter_mut().find(|k| k.db == db && k.key == key) {
                Some(wk) if wk.expired => {
                    if !in_other {
                        wk.expired = false;
                    }
                }
                _ => cw.dirty = true,
            }
        }
    }

    /// Watched keys of `db`, to check before a flush or swap.
    fn keys_in_db(&self, db: usize) -> Vec<Vec<u8>> {
        self.by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }
}

/// Of a write command's key positions, those it may write: a command that
/// also reads keys (the sources of a `*STORE` or of `BITOP`) touches only
/// its destination, the first key; COPY (whose destination may be in
/// another database), DEL/UNLINK (which change only the keys that existed)
/// and SMOVE (whose destination may already hold the member) touch what
/// they changed themselves.
fn written_keys(name: &str, keys: (i32, i32, i32)) -> Option<(i32, i32, i32)> {
    match name {
        // SORT and GEORADIUS touch their STORE destination themselves
        // (commands/sort.rs, commands/geo.rs): it is not a table key.
        "copy" | "del" | "unlink" | "smove" | "sort" | "georadius" | "georadiusbymember" => None,
        n if n.ends_with("store") || n == "bitop" => Some((keys.0, keys.0, 1)),
        _ => Some(keys),
    }
}

impl Server {
    /// A key changed (Redis's `signalModifiedKey`): WATCHes on it are
    /// broken, and client-side caches that may hold it are invalidated.
    /// Eviction, expiry and any other deletion call this too.
    pub fn touch_watched_key(&mut self, db: usize, key: &[u8]) {
        // Client-side caches hold it too (the rest of signalModifiedKey).
        self.tracking_invalidate_key(key, true);
        if self.watches.is_empty() {
            return;
        }
        let exists = self.keyspace.dbs[db].get(key).is_some();
        self.watches.touch(db, key, exists);
    }

    /// Before `db` is emptied or swapped with `other`: every watched key of
    /// `db` that exists in either breaks (Redis's `touchAllWatchedKeysInDb`).
    pub fn touch_watched_keys_in_db(&mut self, db: usize, other: Option<usize>) {
        if self.watches.is_empty() {
            return;
        }
        for key in self.watches.keys_in_db(db) {
            let in_db = self.keyspace.dbs[db].get(&key).is_some();
            let in_other = other.is_some_and(|o| self.keyspace.dbs[o].get(&key).is_some());
            if in_db || in_other {
                self.watches.touch_emptied(db, &key, in_other);
            }
        }
    }

    /// After a write command changed something: breaks the WATCHes on its
    /// key arguments, found from the command table's key positions.
    pub fn touch_command_keys(&mut self, idx: usize, db: usize, args: &Args) {
        if self.watches.is_empty() && !self.tracking.active() {
            return;
        }
        let spec = self.commands.specs[idx];
        let Some(range) = written_keys(spec.name, spec.keys) else {
            return;
        };
        for i in super::key_range_positions(range, args.len()) {
            self.touch_watched_key(db, args.get(i));
        }
    }

    /// Whether EXEC must fail for this connection: a watched key changed,
    /// or expired since it was watched.
    fn watch_broken(&mut self, token: usize, now_ms: i64) -> bool {
        let Some(cw) = self.watches.by_client.get(&token) else {
            return false;
        };
        cw.dirty
            || cw.keys.iter().any(|wk| {
                !wk.expired
                    && self.keyspace.dbs[wk.db]
                        .get(&wk.key)
                        .is_some_and(|e| e.has_expire() && e.expire_at <= now_ms)
            })
    }

    pub fn unwatch_all(&mut self, token: usize) {
        if !self.watches.is_empty() {
            self.watches.unwatch_all(token);
        }
    }
}

/// MULTI
fn multi(ctx: &mut Ctx, _args: Args) {
    if ctx.client.multi.is_some() {
        ctx.error("ERR MULTI calls can not be nested");
        return;
    }
    ctx.client.multi = Some(Box::default());
    ctx.client.out.ok();
}

/// DISCARD
fn discard(ctx: &mut Ctx, _args: Args) {
    if ctx.client.multi.is_none() {
        ctx.error("ERR DISCARD without MULTI");
        return;
    }
    discard_transaction(ctx.srv, ctx.client);
    ctx.client.out.ok();
}

/// Drops the queue and the WATCHes (Redis's `discardTransaction`).
pub fn discard_transaction(srv: &mut Server, client: &mut Client) {
    client.multi = None;
    srv.unwatch_all(client.token);
}

/// EXEC
fn exec(ctx: &mut Ctx, _args: Args) {
    let Some(tx) = ctx.client.multi.take() else {
        ctx.error("ERR EXEC without MULTI");
        return;
    };
    let token = ctx.client.token;
    if tx.aborted {
        ctx.srv.unwatch_all(token);
        ctx.error(EXECABORT);
        return;
    }
    if ctx.srv.watch_broken(token, ctx.now_ms) {
        ctx.srv.unwatch_all(token);
        ctx.client.out.null_array();
        return;
    }
    ctx.srv.unwatch_all(token);
    ctx.client.out.array(tx.queued.len());
    ctx.client.in_exec = true;
    ctx.srv.begin_exec_propagation();
    for q in &tx.queued {
        // Permissions may have changed since the command was queued.
        let args = q.args();
        if let Err((why, pos)) = ctx.srv.acl.check(ctx.client.user, q.idx, &args) {
            ctx.srv.acl_denied(
                ctx.client,
                q.idx,
                &args,
                why,
                pos,
                crate::acl::log::Context::Multi,
            );
            let reason = match why {
                crate::acl::Denied::Cmd => "no permission to execute the command or subcommand",
                crate::acl::Denied::Key => "no permission to touch the specified keys",
                crate::acl::Denied::Channel => {
                    "no permission to access one of the channels used as arguments"
                }
                crate::acl::Denied::Auth => "no permission",
            };
            ctx.client.out.error(&format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"));
            continue;
        }
        ctx.srv.call(ctx.client, q.idx, args);
    }
    ctx.client.in_exec = false;
    ctx.client.last_cmd = "exec";
    ctx.srv.end_exec_propagation();
}

/// WATCH key [key ...]
fn watch(ctx: &mut Ctx, args: Args) {
    if ctx.client.multi.is_some() {
        ctx.error("ERR WATCH inside MULTI is not allowed");
        return;
    }
    let db = ctx.client.db;
    let token = ctx.client.token;
    for key in args.iter().skip(1) {
        let expired = ctx.srv.keyspace.dbs[db]
            .get(key)
            .is_some_and(|e| e.has_expire() && e.expire_at <= ctx.now_ms);
        ctx.srv.watches.watch(token, db, key, expired);
    }
    ctx.client.out.ok();
}

/// UNWATCH
fn unwatch(ctx: &mut Ctx, _args: Args) {
    ctx.srv.unwatch_all(ctx.client.token);
    ctx.client.out.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_marks_watchers_and_spares_already_expired_deleted_keys() {
        let mut w = Watches::default();
        w.watch(1, 0, b"a", false);
        w.watch(2, 0, b"a", true);
        w.watch(2, 0, b"b", false);
        w.touch(0, b"a", false);
        assert!(w.by_client[&1].dirty);
        assert!(!w.by_client[&2].dirty);
        w.touch(0, b"a", true);
        assert!(w.by_client[&2].dirty);
        w.unwatch_all(1);
        w.unwatch_all(2);
        assert!(w.is_empty());
        assert!(w.by_key.is_empty());
    }
}
