//! A server driven in-process, without sockets: connections are fake
//! clients (as the AOF loader's, [`Client::fake`]) that live in the
//! server's client table like accepted ones, and every command goes
//! through the real pipeline ([`Server::execute`]: lookup, arity, auth,
//! MULTI, the handler, propagation, blocked-key serving).
//!
//! It exists for the command fuzzer ([`crate::command_fuzz`]) and its
//! replay test: they need the whole command layer with nothing between it
//! and the input, and deterministic, fast turns. What the reactor does
//! around commands is reproduced here in the same order (the turn's clock,
//! error counting, evictions that ran out of time, the AOF write, a slice
//! of a background save, clients killed by others, the cron on demand) so
//! the state commands see is the state they would see behind a socket.
//!
//! What a fake client cannot do: block. [`crate::blocking::may_block`] is
//! false without a socket, so BLPOP and friends answer as their timeout
//! would (as inside MULTI), and nothing here can wait forever.

use crate::net::client::{Client, ReplyMode};
use crate::server::{unix_ms, Server};
use ferrokv_resp::Args;
use std::time::{Duration, Instant};

/// What one command did, seen from outside.
pub struct Executed {
    /// The bytes it answered (nothing under `CLIENT REPLY OFF`).
    pub reply: Vec<u8>,
    /// Wall-clock time of the command and the turn's work after it.
    pub elapsed: Duration,
    /// The connection closed after the command (`QUIT`, `CLIENT KILL` of
    /// itself, a protocol-level close): its handle is gone.
    pub closed: bool,
    /// The command asked the server to exit (`SHUTDOWN`): an embedded
    /// server notes it and keeps running.
    pub shutdown: bool,
}

/// The server and its fake connections, named by their slot in
/// `Server::clients` (the token every registry uses).
pub struct EmbeddedServer {
    pub srv: Server,
    /// Reused argument buffer: one command's bytes and ranges.
    argv: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

impl EmbeddedServer {
    pub fn new(srv: Server) -> Self {
        EmbeddedServer {
            srv,
            argv: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// A new connection: authenticated unless `requirepass` is set, as an
    /// accepted one, with replies on. Returns its token.
    pub fn connect(&mut self) -> usize {
        let id = self.srv.next_client_id;
        self.srv.next_client_id += 1;
        let mut c = Client::fake(id, &mut self.srv.pool);
        c.reply_mode = ReplyMode::On;
        c.authenticated = self.srv.acl.default_open();
        c.user = crate::acl::DEFAULT_USER;
        let entry = self.srv.clients.vacant_entry();
        c.token = entry.key();
        let token = c.token;
        entry.insert(Some(Box::new(c)));
        self.srv.stats.total_connections_received += 1;
        token
    }

    /// Whether the connection `token` is still open.
    pub fn is_connected(&self, token: usize) -> bool {
        matches!(self.srv.clients.get(token), Some(Some(_)))
    }

    /// The connection `token`, to read or adjust its state.
    pub fn client(&self, token: usize) -> Option<&Client> {
        self.srv.clients.get(token).and_then(|c| c.as_deref())
    }

    /// Runs one command for the connection `token` as one loop turn of the
    /// reactor would: the command, then the turn's work after it.
    ///
    /// # Panics
    /// If `token` is not connected, or `argv` is empty.
    pub fn execute<A: AsRef<[u8]>>(&mut self, token: usize, argv: &[A]) -> Executed {
        assert!(!argv.is_empty(), "a command has a name");
        self.argv.clear();
        self.ranges.clear();
        for a in argv {
            let a = a.as_ref();
            self.ranges.push((self.argv.len(), a.len()));
            self.argv.extend_from_slice(a);
        }
        let mut c = self
            .srv
            .clients
            .get_mut(token)
            .and_then(|s| s.take())
            .expect("executing for a connected client");
        let t0 = Instant::now();
        self.srv.now_ms = unix_ms();
        self.srv
            .execute(&mut c, Args::new(&self.argv, &self.ranges));
        self.srv.count_errors(&mut c);
        let reply = std::mem::take(&mut c.out.buf);
        c.conn.out_sent = 0;
        let closed = c.close_after_reply || c.close_asap;
        self.srv.clients[token] = Some(c);
        if closed {
            self.close(token);
        }
        self.after_turn();
        let shutdown = std::mem::take(&mut self.srv.shutdown_requested);
        Executed {
            reply,
            elapsed: t0.elapsed(),
            closed,
            shutdown,
        }
    }

    /// The reactor's work between a turn's commands and its sleep
    /// (`before_sleep`), for connections with nowhere to write: replies
    /// stay in their buffers for [`Self::take_output`].
    fn after_turn(&mut self) {
        // Fake clients never block; a served or timed-out waiter would
        // have its pipeline resumed here, and there is none.
        self.srv.blocking.unblocked.clear();
        if self.srv.eviction.pending {
            self.srv.perform_evictions();
        }
        self.srv.flush_aof();
        for t in std::mem::take(&mut self.srv.pending_writes) {
            if let Some(Some(c)) = self.srv.clients.get_mut(t) {
                c.pending_write = false;
                c.awaiting_aof = false;
            }
        }
        self.srv.drive_snapshot();
        for t in std::mem::take(&mut self.srv.close_queue) {
            self.close(t);
        }
        // A connection another one killed closes too (`close_asap`).
        let doomed: Vec<usize> = self
            .srv
            .clients
            .iter()
            .filter(|(_, c)| c.as_ref().is_some_and(|c| c.close_asap))
            .map(|(t, _)| t)
            .collect();
        for t in doomed {
            self.close(t);
        }
    }

    /// Replies and messages (pub/sub, served waits) queued for `token`
    /// since the last call; empty for a closed connection.
    pub fn take_output(&mut self, token: usize) -> Vec<u8> {
        match self.srv.clients.get_mut(token) {
            Some(Some(c)) => {
                c.conn.out_sent = 0;
                std::mem::take(&mut c.out.buf)
            }
            _ => Vec::new(),
        }
    }

    /// Closes a connection as the reactor does (its waits, subscriptions,
    /// WATCHes and replication role are forgotten).
    pub fn close(&mut self, token: usize) {
        self.srv.close_client(token);
    }

    /// One run of the periodic work (`serverCron`): active expiry, save
    /// rules, AOF rewrites, statistics.
    pub fn cron(&mut self) {
        self.srv.cron();
    }

    /// Runs a background save, if one is in progress, to its end.
    pub fn finish_background_save(&mut self) {
        while self.srv.persistence.job.is_some() {
            self.srv.drive_snapshot();
        }
    }
}
