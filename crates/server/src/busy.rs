//! Serving the clients while the execution thread is held by one long
//! piece of work (Redis's `processEventsWhileBlocked`): a Lua script run
//! past `busy-reply-threshold`, or the data set loading at start-up.
//!
//! The work calls [`pump`] every few milliseconds. Still on the execution
//! thread, the pump accepts new connections, reads what every client has
//! sent and answers each command by the rule of what holds the thread
//! ([`Holder`]):
//! - a script: the few commands flagged `allow-busy` run, everything else
//!   gets `-BUSY` (`scripting::busy`);
//! - loading: the command goes through the ordinary dispatch, which
//!   refuses every command not flagged `loading` with `-LOADING` (as
//!   Redis's `processCommand`, so MULTI and errors behave as there).
//!
//! Replies are written at once; a client that disconnected (or was told
//! to close) is closed at once too, so clients coming and going during a
//! long load hold no sockets. The link to our master and our replicas'
//! links are left unread until the work ends (their streams must not be
//! refused).
//!
//! The pump reads sockets directly rather than through the reactor's
//! epoll set: the set belongs to the loop the work was called from (or,
//! while loading, to the loop that has not started yet). Each socket is
//! read until it would block, so edge-triggered readiness stays correct
//! for the loop afterwards; a client with a partial command is read again
//! by the loop when the rest arrives.

use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::request::Limits;
use ferrokv_resp::Args;

/// What holds the execution thread while the pump serves the clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// A script past `busy-reply-threshold`.
    Script,
    /// The data set loading at start-up.
    Loading,
}

/// Bytes read from one client per pump.
const PUMP_READ: usize = 256 * 1024;

/// One round of serving the clients.
pub fn pump(srv: &mut Server, holder: Holder) {
    // (No registry: no reactor around this server, no listeners either.)
    let registry = srv.repl.registry.take();
    if let Some(reg) = &registry {
        for li in 0..srv.listeners.len() {
            srv.accept_clients(li, reg);
        }
    }
    // The io_uring backend: what landed since the loop last looked
    // (crates/net/src/uring.rs), and this round's sends submitted at its end.
    if let Some(u) = srv.uring.as_mut() {
        if let Err(e) = u.enter(std::time::Duration::ZERO) {
            tracing::warn!("io_uring: {e}");
        }
        srv.uring_reap();
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
            || srv.shutdown.blocks(c.id)
            || c.conn.stream.is_none();
        if !skip {
            serve(srv, &mut c, holder);
        }
        // What an io_uring connection was given and the pump left unread:
        // the loop reads it, since no new completion will say it is there.
        if c.conn.stream.as_ref().is_some_and(|s| s.has_landed()) {
            srv.pending_reads.push(t);
        }
        let pending = c.pending_output() > 0;
        let close = c.close_asap || (c.close_after_reply && !pending);
        if pending && !c.pending_write {
            c.pending_write = true;
            srv.pending_writes.push(t);
        }
        srv.clients[t] = Some(c);
        if close {
            match &registry {
                Some(reg) => {
                    if let Some(mut stream) = srv.close_client(t) {
                        let _ = reg.deregister(&mut stream);
                    }
                }
                None => srv.close_queue.push(t),
            }
        }
    }
    srv.repl.registry = registry;
    if let Some(u) = srv.uring.as_mut() {
        if let Err(e) = u.submit() {
            tracing::warn!("io_uring: {e}");
        }
    }
}

/// Reads a client's input, answers each complete command, writes.
fn serve(srv: &mut Server, c: &mut Client, holder: Holder) {
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
    let inbuf = std::mem::take(&mut c.conn.inbuf);
    let mut decoder = std::mem::take(&mut c.conn.decoder);
    let limits = Limits {
        max_bulk_len: srv.config.proto_max_bulk_len as usize,
        authenticated: c.authenticated,
    };
    while c.conn.in_start < c.conn.in_end && !c.close_after_reply && !c.close_asap {
        match decoder.decode(&inbuf[c.conn.in_start..c.conn.in_end], limits) {
            Ok(None) => break,
            Ok(Some(d)) => {
                let consumed = d.consumed;
                if !d.args.is_empty() {
                    command(srv, c, d.args, holder);
                }
                c.conn.in_start += consumed;
            }
            Err(e) => {
                c.out.error(&format!("ERR {}", e.0));
                c.close_after_reply = true;
                c.conn.in_start = c.conn.in_end;
            }
        }
    }
    c.conn.inbuf = inbuf;
    c.conn.decoder = decoder;
    srv.count_errors(c);
    if c.flush().is_err() {
        c.close_asap = true;
    }
}

fn command(srv: &mut Server, c: &mut Client, args: Args, holder: Holder) {
    match holder {
        Holder::Script => crate::scripting::busy::command(srv, c, args),
        // Dispatch refuses what may not run while loading (`Server::loading`).
        Holder::Loading => srv.execute(c, args),
    }
}
