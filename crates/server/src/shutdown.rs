//! Shutting down: `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`, SIGTERM
//! and SIGINT, and the wait for lagging replicas before exiting (Redis
//! 7.0's `prepareForShutdown`, `finishShutdown`, `abortShutdown` in
//! `server.c`).
//!
//! # How it works
//! - A shutdown (the command, or a signal with the flags of
//!   `shutdown-on-sigterm` / `shutdown-on-sigint`) first checks the
//!   replicas: when one has not acknowledged the whole data stream yet,
//!   and neither `NOW` nor `shutdown-timeout 0` says otherwise, the server
//!   asks every replica for an ACK (`REPLCONF GETACK *`), pauses writes
//!   (its own pause purpose, `crate::pause`), logs `Waiting for replicas
//!   before shutting down.` and keeps serving reads. The client that sent
//!   `SHUTDOWN` is blocked meanwhile (its pipeline waits, as a `WAIT`'s
//!   does); `INFO server` shows `shutdown_in_milliseconds`.
//! - Every loop turn ([`Server::shutdown_cron`]) checks whether every
//!   replica now has the data or `shutdown-timeout` seconds have passed;
//!   then the shutdown finishes ([`Server::finish_shutdown`]): lagging
//!   replicas are logged by name, an AOF is synced, a final snapshot made
//!   when snapshots are configured (or `SAVE` asked), and the loop exits.
//! - When that fails (the snapshot cannot be written, the first AOF of an
//!   `appendonly yes` set at run time is not complete) without `FORCE`,
//!   the shutdown is cancelled: the error is logged, each blocked client
//!   gets `-ERR Errors trying to SHUTDOWN. Check logs.`, writes resume.
//!   `SHUTDOWN ABORT` cancels a waiting shutdown the same way, or a
//!   signal not acted on yet (while `DEBUG PAUSE-CRON 1` holds it), and
//!   logs `Shutdown manually aborted.`.
//! - A `SHUTDOWN` while one waits joins it (blocked too; its own flags do
//!   not change the one under way, as in Redis). A second SIGINT while
//!   waiting exits at once with status 1 (`You insist... exiting now.`).
//!
//! Where ferrokv differs: a replica counts as in sync once it acknowledged
//! every byte of data written before the shutdown began (Redis compares
//! with the current offset, which its own `GETACK` moved, so it usually
//! waits for the replica's next once-a-second ACK); during a start-up load
//! or a busy script a shutdown does not wait for replicas (the loop that
//! would check them is not running).

use crate::commands::{err, is, Ctx};
use crate::pause::{PauseKind, PausePurpose};
use crate::server::{unix_ms, Server};
use ferrokv_resp::Args;

/// `SHUTDOWN`'s flags, and `shutdown-on-sigterm`'s / `-sigint`'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub save: bool,
    pub nosave: bool,
    pub now: bool,
    pub force: bool,
}

impl Flags {
    /// `shutdown-on-sig*`'s value: `default`, or any of `save`, `nosave`,
    /// `now`, `force` (space-separated; `save` and `nosave` exclude each
    /// other). Redis's reason for refusing any other word.
    pub fn parse_config(v: &str) -> Result<Flags, String> {
        let mut f = Flags::default();
        for w in v.split_ascii_whitespace() {
            match w.to_ascii_lowercase().as_str() {
                "default" => {}
                "save" => f.save = true,
                "nosave" => f.nosave = true,
                "now" => f.now = true,
                "force" => f.force = true,
                _ => return Err(
                    "argument(s) must be one of the following: default, save, nosave, now, force"
                        .into(),
                ),
            }
        }
        if f.save && f.nosave {
            return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
        }
        Ok(f)
    }

    /// The value as `CONFIG GET` shows it (Redis's order; `default` when
    /// no flag is set).
    pub fn config_string(&self) -> String {
        let words: Vec<&str> = [
            (self.save, "save"),
            (self.nosave, "nosave"),
            (self.now, "now"),
            (self.force, "force"),
        ]
        .into_iter()
        .filter_map(|(on, w)| on.then_some(w))
        .collect();
        if words.is_empty() {
            "default".into()
        } else {
            words.join(" ")
        }
    }
}

/// The shutdown in progress, if any.
#[derive(Default)]
pub struct Shutdown {
    /// Unix ms when the wait for replicas gives up; `Some` while a
    /// shutdown waits (Redis's `shutdown_mstime`).
    deadline_ms: Option<i64>,
    /// The replication offset of the last data written before the wait:
    /// a replica that acknowledged it has everything.
    data_offset: i64,
    flags: Flags,
    /// A signal received but not acted on yet (Redis's `shutdown_asap`),
    /// while `DEBUG PAUSE-CRON` holds the cron.
    pending_signal: Option<&'static str>,
    /// The clients blocked in `SHUTDOWN`, by id.
    blocked: Vec<u64>,
}

impl Shutdown {
    /// Whether a shutdown waits for replicas.
    pub fn in_progress(&self) -> bool {
        self.deadline_ms.is_some()
    }

    /// Whether this client is blocked in `SHUTDOWN` (its pipeline waits).
    #[inline]
    pub fn blocks(&self, client_id: u64) -> bool {
        !self.blocked.is_empty() && self.blocked.contains(&client_id)
    }

    /// Clients blocked in `SHUTDOWN` (`blocked_clients` counts them).
    pub fn blocked_count(&self) -> usize {
        self.blocked.len()
    }

    /// `shutdown_in_milliseconds`: how long the wait may still last.
    pub fn remaining_ms(&self, now_ms: i64) -> Option<i64> {
        self.deadline_ms.map(|d| (d - now_ms).max(0))
    }

    /// A client that disconnected is no longer answered.
    pub fn forget(&mut self, client_id: u64) {
        self.blocked.retain(|&id| id != client_id);
    }
}

/// What starting a shutdown came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Ready: the loop exits.
    Exit,
    /// Waiting for replicas (or a shutdown already was).
    Waiting,
    /// It failed and was cancelled (the reason is logged).
    Failed,
}

impl Server {
    /// Starts a shutdown with `flags` (Redis's `prepareForShutdown`). With
    /// `wait` false (a load or a busy script holds the loop) it does not
    /// wait for replicas.
    pub fn prepare_for_shutdown(&mut self, mut flags: Flags, wait: bool) -> Outcome {
        if self.shutdown.in_progress() {
            return Outcome::Waiting;
        }
        // While loading, no save: it would overwrite the file with the
        // half of it loaded so far.
        if self.loading.is_some() {
            flags.save = false;
            flags.nosave = true;
        }
        self.shutdown.flags = flags;
        tracing::warn!("User requested shutdown...");
        if wait && !flags.now && self.config.shutdown_timeout() != 0 {
            let offset = self.repl.master_repl_offset;
            if !self.replicas_have(offset) {
                self.shutdown.data_offset = offset;
                self.shutdown.deadline_ms =
                    Some(unix_ms() + self.config.shutdown_timeout() as i64 * 1000);
                if !self.pause.active() {
                    self.send_getack();
                }
                self.pause_clients(PausePurpose::Shutdown, i64::MAX, PauseKind::Write);
                tracing::info!("Waiting for replicas before shutting down.");
                return Outcome::Waiting;
            }
            self.shutdown.data_offset = offset;
        } else {
            self.shutdown.data_offset = self.repl.master_repl_offset;
        }
        if self.finish_shutdown() {
            Outcome::Exit
        } else {
            Outcome::Failed
        }
    }

    /// Whether every replica acknowledged the stream up to `offset`.
    fn replicas_have(&self, offset: i64) -> bool {
        self.repl
            .master
            .replicas
            .iter()
            .all(|r| r.ack_offset >= offset)
    }

    /// Finishes a shutdown (Redis's `finishShutdown`): true when the loop
    /// may exit; false when it failed and was cancelled.
    pub fn finish_shutdown(&mut self) -> bool {
        let flags = self.shutdown.flags;
        let offset = self.shutdown.data_offset;
        let replicas = &self.repl.master.replicas;
        let lagging = replicas.iter().filter(|r| r.ack_offset < offset).count();
        for r in replicas.iter().filter(|r| r.ack_offset < offset) {
            let lag = if r.is_online() {
                r.ack_time.elapsed().as_secs()
            } else {
                0
            };
            tracing::warn!(
                "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
                r.ip,
                r.listening_port,
                offset - r.ack_offset,
                r.state_name()
            );
        }
        if !replicas.is_empty() {
            tracing::info!(
                "{} of {} replicas are in sync when shutting down.",
                replicas.len() - lagging,
                replicas.len()
            );
        }
        if self.aof_first_rewrite_pending() {
            if flags.force {
                tracing::warn!("Writing initial AOF. Exit anyway.");
            } else {
                tracing::warn!("Writing initial AOF, can't exit.");
                return self.shutdown_failed();
            }
        }
        if let Err(e) = self.persist_before_exit(flags.save, flags.nosave) {
            if flags.force {
                tracing::warn!("{e}");
                tracing::warn!("Error trying to save the DB. Exit anyway.");
            } else {
                tracing::warn!("{e}");
                return self.shutdown_failed();
            }
        }
        self.shutdown_requested = true;
        true
    }

    fn shutdown_failed(&mut self) -> bool {
        tracing::warn!(
            "Errors trying to shut down the server. Check the logs for more information."
        );
        self.cancel_shutdown();
        false
    }

    /// Ends a shutdown that will not happen: blocked clients get an
    /// error and run on, writes resume.
    fn cancel_shutdown(&mut self) {
        self.shutdown.deadline_ms = None;
        self.shutdown.pending_signal = None;
        self.shutdown.flags = Flags::default();
        for id in std::mem::take(&mut self.shutdown.blocked) {
            let Some(t) = crate::replication::token_of(self, id) else {
                continue;
            };
            if let Some(Some(c)) = self.clients.get_mut(t) {
                c.out.error("ERR Errors trying to SHUTDOWN. Check logs.");
                if !c.pending_write {
                    c.pending_write = true;
                    self.pending_writes.push(t);
                }
                self.blocking.unblocked.push(t);
            }
        }
        self.unpause_clients(PausePurpose::Shutdown);
    }

    /// `SHUTDOWN ABORT` (Redis's `abortShutdown`): false when there was
    /// nothing to abort.
    pub fn abort_shutdown(&mut self) -> bool {
        // A signal recorded and not acted on (the cron is held).
        let signal = self.shutdown.pending_signal.take().is_some()
            || (self.cron_paused && crate::signals::take().is_some());
        if self.shutdown.in_progress() {
            self.cancel_shutdown();
        } else if !signal {
            return false;
        }
        tracing::info!("Shutdown manually aborted.");
        true
    }

    /// Every loop turn: a signal received since (unless `DEBUG PAUSE-CRON`
    /// holds it), and the end of a wait for replicas.
    pub fn shutdown_cron(&mut self) {
        if self.cron_paused {
            return;
        }
        if let Some(sig) = crate::signals::take() {
            if self.shutdown.in_progress() && sig == "SIGINT" {
                tracing::warn!("You insist... exiting now.");
                std::process::exit(1);
            }
            tracing::warn!("Received {sig} scheduling shutdown...");
            self.shutdown.pending_signal = Some(sig);
        }
        if let Some(sig) = self.shutdown.pending_signal {
            if !self.shutdown.in_progress() {
                self.shutdown.pending_signal = None;
                let flags = self.config.shutdown_on_signal(sig);
                // (Exit and Failed are done; Waiting goes on below.)
                self.prepare_for_shutdown(flags, true);
                return;
            }
        }
        if let Some(deadline) = self.shutdown.deadline_ms {
            if unix_ms() >= deadline || self.replicas_have(self.shutdown.data_offset) {
                self.finish_shutdown();
            }
        }
    }
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]
pub fn command(ctx: &mut Ctx, args: Args) {
    let mut flags = Flags::default();
    let mut abort = false;
    for a in args.iter().skip(1) {
        if is(a, "nosave") {
            flags.nosave = true;
        } else if is(a, "save") {
            flags.save = true;
        } else if is(a, "now") {
            flags.now = true;
        } else if is(a, "force") {
            flags.force = true;
        } else if is(a, "abort") {
            abort = true;
        } else {
            return ctx.error(err::SYNTAX);
        }
    }
    if (abort && flags != Flags::default()) || (flags.save && flags.nosave) {
        return ctx.error(err::SYNTAX);
    }
    if abort {
        if ctx.srv.abort_shutdown() {
            ctx.client.out.ok();
        } else {
            ctx.error("ERR No shutdown in progress.");
        }
        return;
    }
    // A load or a busy script holds the loop that would check the
    // replicas: no wait then.
    let wait = ctx.srv.loading.is_none() && ctx.srv.scripting.running.is_none();
    match ctx.srv.prepare_for_shutdown(flags, wait) {
        Outcome::Exit => ctx.client.close_asap = true,
        Outcome::Waiting => {
            let id = ctx.client.id;
            ctx.srv.shutdown.blocked.push(id);
        }
        Outcome::Failed => ctx.error("ERR Errors trying to SHUTDOWN. Check logs."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_flags_parse_and_print_as_redis() {
        let f = Flags::parse_config("nosave now").unwrap();
        assert_eq!(f.config_string(), "nosave now");
        assert_eq!(
            Flags::parse_config("default now").unwrap().config_string(),
            "now"
        );
        assert_eq!(
            Flags::parse_config("default").unwrap().config_string(),
            "default"
        );
        assert!(Flags::parse_config("save nosave").is_err());
        assert!(Flags::parse_config("later").is_err());
    }
}
