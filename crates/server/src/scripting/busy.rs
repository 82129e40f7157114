//! What a client is answered while a script runs past
//! `busy-reply-threshold`: the commands Redis allows while busy (flagged
//! `allow-busy`: `SCRIPT KILL`, `FUNCTION KILL`, `FUNCTION STATS`,
//! `SHUTDOWN NOSAVE`, `MULTI`, `AUTH`, ...) run; everything else gets
//! `-BUSY`. The script's instruction hook serves the clients through
//! [`crate::blocked::pump`], which calls [`command`] for each request.

use crate::commands::flags;
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::Args;

pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// One command while busy: run if allowed, else `-BUSY`. Unknown
/// commands, wrong arity and missing authentication get their own errors
/// first, as Redis checks those before the busy state.
pub fn command(srv: &mut Server, c: &mut Client, args: Args) {
    let mut found = None;
    if let Some(mut idx) = srv.commands.lookup(args.get(0)) {
        let s = srv.commands.specs[idx];
        if !s.subcommands.is_empty() && args.len() >= 2 {
            if let Some(sub) = srv.commands.lookup_sub(s.name, args.get(1)) {
                idx = sub;
            }
        }
        found = Some(idx);
    }
    let refuse = match found.map(|i| (i, srv.commands.specs[i])) {
        Some((_, s))
            if s.arity_ok(args.len())
                && (c.authenticated || s.has(flags::NO_AUTH) || srv.acl.default_open()) =>
        {
            !s.has(flags::ALLOW_BUSY)
                || (s.name == "shutdown"
                    && !args
                        .iter()
                        .skip(1)
                        .any(|a| a.eq_ignore_ascii_case(b"nosave")))
        }
        _ => false,
    };
    if let (true, Some(idx)) = (refuse, found) {
        let is_function = srv
            .scripting
            .running
            .as_ref()
            .is_some_and(|r| r.is_function);
        let msg = if is_function {
            BUSY_FUNCTION
        } else {
            BUSY_EVAL
        };
        // As any refusal (Redis's rejectCommand): inside MULTI the
        // transaction is flagged, so its EXEC answers EXECABORT; a refused
        // EXEC discards the transaction with the reason; the command's
        // rejected_calls counts it.
        let name = srv.commands.specs[idx].name;
        let top = name.split('|').next().unwrap_or(name);
        srv.reject(c, Some(top), msg.as_bytes());
        srv.cmd_stats[idx].rejected_calls += 1;
        srv.scripting.stats.busy_replies += 1;
        return;
    }
    srv.execute(c, args);
}
