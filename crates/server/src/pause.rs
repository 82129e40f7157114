//! Client pauses: `CLIENT PAUSE timeout [WRITE|ALL]`, `CLIENT UNPAUSE`, and
//! the write pauses a `FAILOVER` holds while its replica catches up and a
//! shutdown holds while its replicas do (`crate::shutdown`) (Redis
//! 7.0's `pauseClients` / `unpauseClients` in `networking.c`).
//!
//! # How it works
//! - Each purpose (a client's `CLIENT PAUSE`, a failover) holds its own
//!   pause event; the effective pause is the strongest kind and the latest
//!   end of the events held ([`ClientPause::kind`]). A later `CLIENT PAUSE`
//!   never weakens nor shortens its purpose's event: the kind and the end
//!   only grow (as 7.0's `pauseClients` takes the max of both), and only
//!   `CLIENT UNPAUSE` (or the end time) lifts it.
//! - Dispatch checks the pause after every other check, right before a
//!   command would run or be queued in MULTI: under `ALL` every command of
//!   a client that is not one of our replicas is held; under `WRITE` the
//!   commands that may replicate (the `write` and `may_replicate` flags, so
//!   `PUBLISH`, `EVAL` of a script not declared `no-writes`, an `EXEC`
//!   whose queue holds such a command). A held client is *postponed*
//!   ([`crate::blocking::postpone`]): it gets no reply, its pipeline waits
//!   behind the held command, `CLIENT LIST` shows it with the `b` flag and
//!   `blocked_clients` counts it, as Redis's `BLOCKED_POSTPONE`.
//! - When the effective pause ends or gets weaker, every postponed client
//!   runs its held command again through dispatch, in the order they were
//!   held; a command the weaker pause still holds is postponed again, at
//!   the back ([`crate::blocking::resume_postponed`]).
//! - While any pause is on, the dataset stays as it is: lazy expiry answers
//!   "missing" for an expired key without deleting it (so no `DEL` reaches
//!   replicas or the AOF), the active expiry cycle is skipped, and eviction
//!   evicts nothing and refuses nothing (Redis's
//!   `checkClientPauseTimeoutAndReturnIfPaused` in `expireIfNeeded`,
//!   `activeExpireCycle` and `isSafeToPerformEvictions`).
//! - The end time is checked every loop turn ([`Server::check_pause_end`]),
//!   and the loop's poll timeout wakes up for it.

use crate::commands::{is, Ctx};
use crate::server::{unix_ms, Server};
use ferrokv_resp::Args;

/// How much a pause holds, weakest first (so `max` is the stronger).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum PauseKind {
    #[default]
    Off,
    /// Commands that may replicate.
    Write,
    /// Every command.
    All,
}

/// Who paused the clients (Redis's `pause_purpose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePurpose {
    ClientCommand = 0,
    Failover = 1,
    /// A shutdown waiting for its replicas (`crate::shutdown`).
    Shutdown = 2,
}

/// The pause events held, one per purpose, and their sum.
#[derive(Default)]
pub struct ClientPause {
    /// (kind, end in unix ms) per purpose.
    events: [Option<(PauseKind, i64)>; 3],
    kind: PauseKind,
    end_ms: i64,
}

impl ClientPause {
    /// The effective pause.
    #[inline]
    pub fn kind(&self) -> PauseKind {
        self.kind
    }

    /// Whether any pause is on (expiry and eviction hold still).
    #[inline]
    pub fn active(&self) -> bool {
        self.kind != PauseKind::Off
    }

    /// When the effective pause ends, unix ms (meaningful while active).
    pub fn end_ms(&self) -> i64 {
        self.end_ms
    }

    fn recompute(&mut self) {
        self.kind = PauseKind::Off;
        self.end_ms = 0;
        for (kind, end) in self.events.iter().flatten() {
            self.kind = self.kind.max(*kind);
            self.end_ms = self.end_ms.max(*end);
        }
    }
}

impl Server {
    /// Pauses clients for `purpose` until `end_ms` (unix ms): an event the
    /// purpose already holds only grows, in kind and in end.
    pub fn pause_clients(&mut self, purpose: PausePurpose, end_ms: i64, kind: PauseKind) {
        let before = self.pause.kind;
        let slot = &mut self.pause.events[purpose as usize];
        *slot = Some(match *slot {
            Some((k, e)) => (k.max(kind), e.max(end_ms)),
            None => (kind, end_ms),
        });
        self.pause.recompute();
        if self.pause.kind < before {
            crate::blocking::release_postponed(self);
        }
    }

    /// Lifts `purpose`'s pause; postponed clients run again if the
    /// effective pause got weaker.
    pub fn unpause_clients(&mut self, purpose: PausePurpose) {
        let before = self.pause.kind;
        self.pause.events[purpose as usize] = None;
        self.pause.recompute();
        if self.pause.kind < before {
            crate::blocking::release_postponed(self);
        }
    }

    /// Ends a `CLIENT PAUSE` whose time is up (Redis's
    /// `checkClientPauseTimeoutAndReturnIfPaused`). The failover's and the
    /// shutdown's pauses have no end of their own: they lift them.
    pub fn check_pause_end(&mut self, now_ms: i64) {
        if let Some((_, end)) = self.pause.events[PausePurpose::ClientCommand as usize] {
            if end < now_ms {
                self.unpause_clients(PausePurpose::ClientCommand);
            }
        }
    }

    /// Whether lazy and active expiry and eviction may delete keys now:
    /// not on a replica (its master's `DEL`s do), not during a pause.
    #[inline]
    pub fn deletes_expired_keys(&self) -> bool {
        !self.repl.is_replica() && !self.pause.active()
    }

    /// Whether dispatch must postpone a command with `cmd_flags` (and, for
    /// `EXEC`, the client's queue) from a client that is not a replica.
    pub fn pause_holds(
        &self,
        client: &crate::net::client::Client,
        name: &str,
        cmd_flags: u32,
    ) -> bool {
        use crate::commands::flags::{MAY_REPLICATE, WRITE};
        if self.repl.is_replica_client(client.id) {
            return false;
        }
        match self.pause.kind {
            PauseKind::Off => false,
            PauseKind::All => true,
            PauseKind::Write => {
                cmd_flags & (WRITE | MAY_REPLICATE) != 0
                    || (name == "exec"
                        && client.multi.as_ref().is_some_and(|tx| {
                            tx.queued.iter().any(|q| {
                                self.commands.specs[q.idx].flags & (WRITE | MAY_REPLICATE) != 0
                            })
                        }))
            }
        }
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL]
///
/// The mode is checked before the timeout, as Redis does; the timeout is
/// Redis's `getTimeoutFromObjectOrReply` in milliseconds (0 ends the pause
/// at once; a time that overflows the clock wraps as 7.0.15's does, which
/// also ends it at once).
pub fn client_pause(ctx: &mut Ctx, args: Args) {
    if args.len() > 4 {
        // (The subcommand as it was sent, as Redis echoes it.)
        let mut msg = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
        msg.extend_from_slice(args.get(1));
        msg.extend_from_slice(b"'. Try CLIENT HELP.");
        return ctx.client.out.error_bytes(&msg);
    }
    let kind = if args.len() == 4 {
        if is(args.get(3), "write") {
            PauseKind::Write
        } else if is(args.get(3), "all") {
            PauseKind::All
        } else {
            return ctx.error("ERR CLIENT PAUSE mode must be WRITE or ALL");
        }
    } else {
        PauseKind::All
    };
    let Some(ms) = ferrokv_resp::parse_i64(args.get(2)) else {
        return ctx.error("ERR timeout is not an integer or out of range");
    };
    if ms < 0 {
        return ctx.error("ERR timeout is negative");
    }
    let end = if ms > 0 {
        ms.wrapping_add(unix_ms())
    } else {
        0
    };
    ctx.srv
        .pause_clients(PausePurpose::ClientCommand, end, kind);
    ctx.out().ok();
}

/// CLIENT UNPAUSE
pub fn client_unpause(ctx: &mut Ctx, _args: Args) {
    ctx.srv.unpause_clients(PausePurpose::ClientCommand);
    ctx.out().ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_pause_is_the_strongest_kind_and_the_latest_end() {
        let mut p = ClientPause::default();
        p.events[0] = Some((PauseKind::Write, 500));
        p.events[1] = Some((PauseKind::All, 100));
        p.recompute();
        assert_eq!((p.kind(), p.end_ms()), (PauseKind::All, 500));
        p.events[1] = None;
        p.recompute();
        assert_eq!((p.kind(), p.end_ms()), (PauseKind::Write, 500));
        p.events[0] = None;
        p.recompute();
        assert!(!p.active());
    }
}
