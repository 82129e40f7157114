//! Clients blocked on keys (BLPOP and friends), Redis's `blocked.c`:
//! who waits on which key, in which order, until when, and how a waiter is
//! served once a key is ready.
//!
//! # How it works
//! - A blocking command that finds nothing to pop calls [`block_for_keys`]
//!   with the keys it waits on, the type that satisfies it and its deadline.
//!   The client keeps a copy of its command ([`Blocked`]); its token joins a
//!   FIFO per (database, key), so the client that blocked first on a key is
//!   served first. The reactor reads no further command of a blocked client:
//!   its pipeline waits in the input buffer.
//! - Any top-level write that changed data (`dirty` moved) signals its key
//!   arguments, taken from the command table's key positions
//!   ([`CommandSpec::keys`]) — so LPUSH, LMOVE, RENAME, COPY, MOVE (in any
//!   database), SORT..STORE-like commands and every command inside an EXEC
//!   wake waiters without knowing about them (Redis's `signalKeyAsReady`).
//!   Only keys somebody waits on are recorded.
//! - After the top-level command (for EXEC: after the whole transaction),
//!   [`serve_ready`] walks the ready keys: while the key holds the wanted
//!   type and has waiters, the first waiter is unblocked and its command is
//!   **run again** through [`Server::execute`] — this time it finds data, so
//!   it pops, replies, and propagates its non-blocking form through the one
//!   propagation point, exactly as if it had just been sent. A command run
//!   again may make other keys ready (BLMOVE's destination): they are served
//!   in the same pass.
//! - Deadlines are unix ms in an ordered set; the reactor's poll timeout
//!   looks at the nearest one ([`Blocking::next_deadline`]) and
//!   [`expire_timeouts`] answers the expired waiters with their null reply.
//! - A waiter that disconnects is forgotten ([`forget`]); `CLIENT UNBLOCK id
//!   [TIMEOUT|ERROR]` ends a wait early ([`client_unblock`]).
//! - Inside MULTI/EXEC (`Client::in_exec`) nothing blocks: the command
//!   answers as its timeout would ([`may_block`]).
//! - A command that blocked is counted in `INFO commandstats` once, when it
//!   ends (its run again when served, or [`unblock`]), as Redis 7.0 counts.
//! - Not done: SWAPDB (no key arguments) does not wake waiters of the
//!   swapped databases, as Redis's `scanDatabaseForReadyKeys` would.
//!
//! # Using it from another family (BZPOPMIN, BZMPOP, ...)
//! ```text
//! fn bzpopmin(ctx: &mut Ctx, args: Args) {
//!     let Some(deadline) = commands::list::parse_timeout(ctx, args.get(args.len() - 1)) else { return };
//!     // ... pop at once if any key holds a zset, ctx.rewrite(&[b"ZPOPMIN", key]) and return ...
//!     if !blocking::may_block(ctx) { return ctx.out().null_array(); }
//!     blocking::block_for_keys(ctx, args, keys_iter, ValueType::ZSet, deadline);
//! }
//! ```
//! The handler must be able to run again from the top: when it is, a key it
//! waits on holds a `ValueType::ZSet`, so it pops and replies. A command on
//! several keys should try [`Blocking::serving_key`] first (the key that
//! became ready; `None` on a first run), as `commands/list.rs`'s
//! `key_order` does. A timeout answers with a null array (what Redis 7.0
//! answers for list and zset waits alike).

use crate::commands::{err, CommandSpec, Ctx};
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::Args;
use ferrokv_store::ValueType;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// What a blocked client waits for; kept on its [`Client`].
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
    /// The type a key must hold to serve this client.
    pub wants: ValueType,
    /// Run the command again on any signal of its keys, whatever they
    /// hold now (XREADGROUP: a deleted key or group ends its wait with an
    /// error, as Redis 7.0 does).
    pub on_any_change: bool,
    /// Unix ms; `None` waits forever.
    pub deadline: Option<i64>,
    /// Held by a client pause (`crate::pause`), not waiting on keys.
    pub postponed: bool,
    /// The blocking command, to run again when a key is ready.
    argv: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

/// The server's registry of blocked clients.
#[derive(Default)]
pub struct Blocking {
    /// Waiters by key name: per database, client tokens in arrival order.
    waiters: HashMap<Vec<u8>, Vec<(usize, VecDeque<usize>)>>,
    /// (deadline in unix ms, token) of waiters with a timeout.
    timeouts: BTreeSet<(i64, usize)>,
    /// Keys signalled since the last serve, in signal order.
    ready: VecDeque<Vec<u8>>,
    /// Tokens of clients just unblocked, whose pipelined input the reactor
    /// must now process.
    pub unblocked: Vec<usize>,
    /// Clients held by a client pause, in the order they were held.
    postponed: VecDeque<usize>,
    /// Postponed clients released by the end of a pause, whose commands
    /// the reactor runs again (in this order) before anything else.
    to_resume: VecDeque<usize>,
    /// Serving is under way (a served command's own signals join the pass).
    serving: bool,
    /// Clients blocked now (`INFO clients` `blocked_clients`).
    count: usize,
    /// The key whose readiness is being served (a command run again tries
    /// it first, as Redis 7.0 serves the key that became ready).
    serving_key: Option<Vec<u8>>,
    /// While a blocked command runs again: the deadline it blocked with,
    /// so a command that blocks again (a stream read the new entry did not
    /// satisfy) keeps its original timeout.
    serving_deadline: Option<Option<i64>>,
}

impl Blocking {
    /// Clients blocked now.
    pub fn blocked_clients(&self) -> usize {
        self.count
    }

    /// Blocked clients with a deadline (`clients_in_timeout_table`).
    pub fn with_timeout(&self) -> usize {
        self.timeouts.len()
    }

    /// While a blocked command runs again: the ready key it is served for.
    /// A command waiting on several keys pops from this one first.
    pub fn serving_key(&self) -> Option<&[u8]> {
        self.serving_key.as_deref()
    }

    /// While a blocked command runs again: the deadline it first blocked
    /// with (`None` on a first run).
    pub fn serving_deadline(&self) -> Option<Option<i64>> {
        self.serving_deadline
    }

    /// Whether anybody waits on any key (the cheap test every write makes).
    #[inline]
    pub fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    #[inline]
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The nearest deadline of a blocked client, unix ms.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timeouts.first().map(|&(d, _)| d)
    }

    /// Records that `key` (in any database) may now serve its waiters.
    pub fn signal(&mut self, key: &[u8]) {
        if self.waiters.contains_key(key) && !self.ready.iter().any(|k| k == key) {
            self.ready.push_back(key.to_vec());
        }
    }

    /// The keys clients wait on in database `db` (FLUSHDB and SWAPDB
    /// signal them, as Redis's `scanDatabaseForReadyKeys` and
    /// `scanDatabaseForDeletedStreams` do).
    pub fn waited_keys_in(&self, db: usize) -> Vec<Vec<u8>> {
        self.waiters
            .iter()
            .filter(|(_, per_db)| per_db.iter().any(|(d, _)| *d == db))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn register(&mut self, token: usize, b: &Blocked) {
        for key in &b.keys {
            let per_db = self.waiters.entry(key.clone()).or_default();
            match per_db.iter_mut().find(|(db, _)| *db == b.db) {
                Some((_, q)) => {
                    if !q.contains(&token) {
                        q.push_back(token)
                    }
                }
                None => per_db.push((b.db, VecDeque::from([token]))),
            }
        }
        if let Some(d) = b.deadline {
            self.timeouts.insert((d, token));
        }
        self.count += 1;
    }

    fn unregister(&mut self, token: usize, b: &Blocked) {
        for key in &b.keys {
            if let Some(per_db) = self.waiters.get_mut(key.as_slice()) {
                for (db, q) in per_db.iter_mut() {
                    if *db == b.db {
                        q.retain(|&t| t != token);
                    }
                }
                per_db.retain(|(_, q)| !q.is_empty());
                if per_db.is_empty() {
                    self.waiters.remove(key.as_slice());
                }
            }
        }
        if let Some(d) = b.deadline {
            self.timeouts.remove(&(d, token));
        }
        self.count -= 1;
    }
}

/// Whether the calling client may block now: not inside MULTI/EXEC, and not
/// the AOF loader's fake client.
pub fn may_block(ctx: &Ctx) -> bool {
    !ctx.client.in_exec && ctx.client.conn.stream.is_some()
}

/// Parks the calling client on `keys` until one holds `wants` (or the
/// deadline, unix ms, passes). The handler has replied nothing; it will run
/// again, from the top, when a key is ready.
pub fn block_for_keys<'k>(
    ctx: &mut Ctx,
    args: Args,
    keys: impl Iterator<Item = &'k [u8]>,
    wants: ValueType,
    deadline: Option<i64>,
) {
    block_generic(ctx, args, keys, wants, false, deadline)
}

/// [`block_for_keys`] for a command that must also run again when a key
/// it waits on is deleted or changes type, or when anything else a write
/// there changed matters to it (XREADGROUP: its group may be gone). It
/// decides itself whether to reply or to block again.
pub fn block_for_keys_on_any_change<'k>(
    ctx: &mut Ctx,
    args: Args,
    keys: impl Iterator<Item = &'k [u8]>,
    wants: ValueType,
    deadline: Option<i64>,
) {
    block_generic(ctx, args, keys, wants, true, deadline)
}

fn block_generic<'k>(
    ctx: &mut Ctx,
    args: Args,
    keys: impl Iterator<Item = &'k [u8]>,
    wants: ValueType,
    on_any_change: bool,
    deadline: Option<i64>,
) {
    let mut argv = Vec::new();
    let mut ranges = Vec::with_capacity(args.len());
    for a in args.iter() {
        ranges.push((argv.len(), a.len()));
        argv.extend_from_slice(a);
    }
    let mut keys: Vec<Vec<u8>> = keys.map(|k| k.to_vec()).collect();
    // BLPOP k k: one place in the queue.
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    let b = Blocked {
        db: ctx.client.db,
        keys,
        wants,
        on_any_change,
        deadline,
        postponed: false,
        argv,
        ranges,
    };
    ctx.srv.blocking.register(ctx.client.token, &b);
    ctx.client.blocked = Some(Box::new(b));
}

/// After a write command changed data: signals its key arguments.
pub fn signal_command_keys(srv: &mut Server, spec: &CommandSpec, args: &Args) {
    for i in crate::commands::key_range_positions(spec.keys, args.len()) {
        srv.blocking.signal(args.get(i));
    }
}

/// What the blocked client at `t` waits for, and whether any change of
/// its keys serves it.
fn wants_of(srv: &Server, t: usize) -> Option<(ValueType, bool)> {
    srv.clients
        .get(t)
        .and_then(|c| c.as_deref())
        .and_then(|c| c.blocked.as_ref())
        .map(|b| (b.wants, b.on_any_change))
}

/// Whether `key` in `db` holds a value of type `t` (no access counted).
fn holds(srv: &mut Server, db: usize, key: &[u8], t: ValueType, now: i64) -> bool {
    srv.peek(db, key, now)
        .is_some_and(|e| e.value().value_type() == t)
}

/// Serves the waiters of every ready key, first come first served, while
/// the key holds what they wait for (Redis's `handleClientsBlockedOnKeys`).
pub fn serve_ready(srv: &mut Server) {
    if srv.blocking.serving {
        return;
    }
    srv.blocking.serving = true;
    while let Some(key) = srv.blocking.ready.pop_front() {
        let mut tried = std::collections::HashSet::new();
        loop {
            let now = srv.now_ms;
            // Find the first waiter whose database holds the right type
            // and that has not run again in this pass.
            let mut candidate = None;
            if let Some(per_db) = srv.blocking.waiters.get(key.as_slice()) {
                let dbs: Vec<(usize, usize)> = per_db
                    .iter()
                    .filter_map(|(db, q)| q.iter().find(|t| !tried.contains(*t)).map(|&t| (*db, t)))
                    .collect();
                for (db, t) in dbs {
                    if let Some((w, any)) = wants_of(srv, t) {
                        if any || holds(srv, db, &key, w, now) {
                            candidate = Some(t);
                            break;
                        }
                    }
                }
            }
            let Some(token) = candidate else { break };
            if !serve_one(srv, token, &key) {
                // The command blocked again although the key holds its type
                // (a stream read whose ID is not passed yet): it keeps
                // waiting, and the waiters behind it are still served.
                tried.insert(token);
            }
        }
    }
    srv.blocking.serving = false;
}

/// Unblocks one waiter and runs its command again. False when the
/// command blocked again.
fn serve_one(srv: &mut Server, token: usize, key: &[u8]) -> bool {
    let Some(mut c) = srv.clients.get_mut(token).and_then(|s| s.take()) else {
        return false;
    };
    let Some(b) = c.blocked.take() else {
        srv.clients[token] = Some(c);
        return false;
    };
    srv.blocking.unregister(token, &b);
    let args = Args::new(&b.argv, &b.ranges);
    let outer = srv.blocking.serving_key.replace(key.to_vec());
    let outer_deadline = srv.blocking.serving_deadline.replace(b.deadline);
    srv.execute(&mut c, args);
    srv.blocking.serving_key = outer;
    srv.blocking.serving_deadline = outer_deadline;
    let served = c.blocked.is_none();
    after_unblock(srv, token, c);
    served
}

/// Puts an unblocked client back, queues its reply and its pipeline.
fn after_unblock(srv: &mut Server, token: usize, mut c: Box<Client>) {
    if c.blocked.is_none() {
        srv.blocking.unblocked.push(token);
    }
    if !c.pending_write {
        c.pending_write = true;
        srv.pending_writes.push(token);
    }
    srv.clients[token] = Some(c);
}

/// How a wait ends without being served.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unblock {
    /// The null reply of an expired timeout.
    Timeout,
    /// `CLIENT UNBLOCK id ERROR`.
    Error,
}

/// Ends the wait of the client at `token` with `how`. False when that
/// client is not blocked.
pub fn unblock(srv: &mut Server, token: usize, how: Unblock) -> bool {
    let Some(mut c) = srv.clients.get_mut(token).and_then(|s| s.take()) else {
        return false;
    };
    let Some(b) = c.blocked.take() else {
        srv.clients[token] = Some(c);
        return false;
    };
    srv.blocking.unregister(token, &b);
    // The command ends here: count its call, as `Server::call` skipped it.
    if let Some(idx) = srv.commands.lookup(Args::new(&b.argv, &b.ranges).get(0)) {
        srv.cmd_stats[idx].calls += 1;
        srv.stats.total_commands_processed += 1;
        if how == Unblock::Error {
            srv.cmd_stats[idx].failed_calls += 1;
        }
    }
    match how {
        Unblock::Timeout => c.out.null_array(),
        Unblock::Error => c.out.error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
    }
    srv.count_errors(&mut c);
    after_unblock(srv, token, c);
    true
}

/// Answers the waiters whose deadline has passed.
pub fn expire_timeouts(srv: &mut Server, now_ms: i64) {
    while let Some(&(d, token)) = srv.blocking.timeouts.first() {
        if d > now_ms {
            break;
        }
        if !unblock(srv, token, Unblock::Timeout) {
            // A stale entry (should not happen): drop it.
            srv.blocking.timeouts.remove(&(d, token));
        }
    }
}

/// A blocked client is closing: its waits are forgotten.
pub fn forget(srv: &mut Server, token: usize, c: &mut Client) {
    if let Some(b) = c.blocked.take() {
        if b.postponed {
            srv.blocking.postponed.retain(|&t| t != token);
            srv.blocking.to_resume.retain(|&t| t != token);
        }
        srv.blocking.unregister(token, &b);
    }
}

/// Holds the calling client's command until the client pause that holds
/// it ends (Redis's `blockPostponeClient`): no reply now; the command runs
/// again, through dispatch, when the pause ends or weakens.
pub fn postpone(srv: &mut Server, client: &mut Client, args: &Args) {
    let mut argv = Vec::new();
    let mut ranges = Vec::with_capacity(args.len());
    for a in args.iter() {
        ranges.push((argv.len(), a.len()));
        argv.extend_from_slice(a);
    }
    let b = Blocked {
        db: client.db,
        keys: Vec::new(),
        wants: ValueType::String,
        on_any_change: false,
        deadline: None,
        postponed: true,
        argv,
        ranges,
    };
    srv.blocking.register(client.token, &b);
    srv.blocking.postponed.push_back(client.token);
    client.blocked = Some(Box::new(b));
}

/// The pause got weaker or ended: every postponed client is to run its
/// command again, in the order they were held (Redis's
/// `unblockPostponedClients`).
pub fn release_postponed(srv: &mut Server) {
    let held = std::mem::take(&mut srv.blocking.postponed);
    srv.blocking.to_resume.extend(held);
}

/// Runs again the command of the first postponed client a pause
/// released (one the pause still holds is postponed again, at the back);
/// the reactor runs the rest of its pipeline before the next one's, as
/// Redis does. False when none is left.
pub fn resume_next_postponed(srv: &mut Server) -> bool {
    while let Some(token) = srv.blocking.to_resume.pop_front() {
        let Some(mut c) = srv.clients.get_mut(token).and_then(|s| s.take()) else {
            continue;
        };
        let Some(b) = c.blocked.take_if(|b| b.postponed) else {
            srv.clients[token] = Some(c);
            continue;
        };
        srv.blocking.unregister(token, &b);
        srv.execute(&mut c, Args::new(&b.argv, &b.ranges));
        srv.count_errors(&mut c);
        after_unblock(srv, token, c);
        return true;
    }
    false
}

/// Whether postponed clients wait to run again.
pub fn has_resumable(srv: &Server) -> bool {
    !srv.blocking.to_resume.is_empty()
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]
pub fn client_unblock(ctx: &mut Ctx, args: Args) {
    if args.len() > 4 {
        return ctx.error("ERR syntax error");
    }
    let how = if args.len() == 4 {
        if crate::commands::is(args.get(3), "timeout") {
            Unblock::Timeout
        } else if crate::commands::is(args.get(3), "error") {
            Unblock::Error
        } else {
            return ctx.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        }
    } else {
        Unblock::Timeout
    };
    let Some(id) = ferrokv_resp::parse_i64(args.get(2)) else {
        return ctx.error(err::NOT_INTEGER);
    };
    let token = ctx
        .srv
        .clients
        .iter()
        .find(|(_, c)| {
            c.as_ref().is_some_and(|c| {
                c.id as i64 == id && c.blocked.as_ref().is_some_and(|b| !b.postponed)
            })
        })
        .map(|(t, _)| t);
    let done = token.is_some_and(|t| unblock(ctx.srv, t, how));
    ctx.out().int(done as i64);
}
