//! Serving the other clients while a script runs past
//! `busy-reply-threshold` (Redis's `processEventsWhileBlocked`).
//!
//! The script's instruction hook calls [`pump`] every few milliseconds
//! once the script is busy. Still on the execution thread, and while the
//! script keeps its hold on the data, the pump accepts new connections,
//! reads what every other client has sent and answers each command:
//! the few that Redis allows while busy (flagged `allow-busy`: `SCRIPT
//! KILL`, `FUNCTION KILL`, `FUNCTION STATS`, `SHUTDOWN NOSAVE`, `MULTI`,
//! `AUTH`, ...) run; everything else gets `-BUSY`. Replies are written
//! at once. The link to our master and our replicas' links are left
//! unread until the script ends (their streams must not be refused).
//!
//! The pump reads sockets directly rather than through the reactor's
//! epoll set: the set belongs to the loop the script was called from.
//! Each socket is read until it would block, so edge-triggered readiness
//! stays correct for the loop afterwards; a client with a partial command
//! is read again by the loop when the rest arrives.

use crate::commands::flags;
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::request::Limits;
use ferrokv_resp::Args;

pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// Bytes read from one client per pump.
const PUMP_READ: usize = 256 * 1024;

/// One round of serving the other clients.
pub fn pump(srv: &mut Server) {
    if let Some(reg) = srv.repl.registry.take() {
        for li in 0..srv.listeners.len() {
            srv.accept_clients(li, &reg);
        }
        srv.repl.registry = Some(reg);
    }
    let tokens: Vec<usize> = srv.clients.iter().map(|(t, _)| t).collect();
    let master = srv.repl.master_client_id();
    let replicas = srv.repl.master.replica_ids();
    for t in tokens {
        let Some(Some(mut c)) = srv.clients.get_mut(t).map(|s| s.take()) else {
            continue;
        };
        let skip = Some(c.id) == master
            || replicas.contains(&c.id)
            || c.blocked.is_some()
            || srv.repl.master.is_waiting(c.id)
            || c.stream.is_none();
        if !skip {
            serve(srv, &mut c);
        }
        let closing = c.close_asap || c.close_after_reply;
        let pending = c.pending_output() > 0;
        if pending && !c.pending_write {
            c.pending_write = true;
            srv.pending_writes.push(t);
        }
        srv.clients[t] = Some(c);
        if closing && !pending {
            srv.close_queue.push(t);
        }
    }
}

/// Reads a client's input, answers each complete command, writes.
fn serve(srv: &mut Server, c: &mut Client) {
    let mut budget = PUMP_READ;
    loop {
        match c.read_once() {
            Ok((0, _)) | Err(_) => {
                c.close_asap = true;
                return;
            }
            Ok((n, more)) => {
                if n == usize::MAX {
                    break;
                }
                srv.stats.net_input_bytes += n as u64;
                budget = budget.saturating_sub(n);
                if !more || budget == 0 {
                    break;
                }
            }
        }
    }
    let inbuf = std::mem::take(&mut c.inbuf);
    let mut decoder = std::mem::take(&mut c.decoder);
    let limits = Limits {
        max_bulk_len: srv.config.proto_max_bulk_len as usize,
        authenticated: c.authenticated,
    };
    while c.in_start < c.in_end && !c.close_after_reply && !c.close_asap {
        match decoder.decode(&inbuf[c.in_start..c.in_end], limits) {
            Ok(None) => break,
            Ok(Some(d)) => {
                let consumed = d.consumed;
                if !d.args.is_empty() {
                    command(srv, c, d.args);
                }
                c.in_start += consumed;
            }
            Err(e) => {
                c.out.error(&format!("ERR {}", e.0));
                c.close_after_reply = true;
                c.in_start = c.in_end;
            }
        }
    }
    c.inbuf = inbuf;
    c.decoder = decoder;
    srv.count_errors(c);
    let _ = c.flush();
}

/// One command while busy: run if allowed, else `-BUSY`. Unknown
/// commands, wrong arity and missing authentication get their own errors
/// first, as Redis checks those before the busy state.
fn command(srv: &mut Server, c: &mut Client, args: Args) {
    let mut spec = None;
    if let Some(idx) = srv.commands.lookup(args.get(0)) {
        let mut s = srv.commands.specs[idx];
        if !s.subcommands.is_empty() && args.len() >= 2 {
            if let Some(sub) = srv.commands.lookup_sub(s.name, args.get(1)) {
                s = srv.commands.specs[sub];
            }
        }
        spec = Some(s);
    }
    let refuse = match spec {
        Some(s)
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
    if refuse {
        let is_function = srv
            .scripting
            .running
            .as_ref()
            .is_some_and(|r| r.is_function);
        c.out.error(if is_function {
            BUSY_FUNCTION
        } else {
            BUSY_EVAL
        });
        srv.scripting.stats.busy_replies += 1;
        return;
    }
    srv.execute(c, args);
}
