//! RDMA client connections (docs/rdma.md, "RDMA connections"): the `rdma-bind` listener's
//! connection requests that carry a stream's token are accepted here, without blocking the
//! loop, and become clients like any other (`Conn::Rdma`). Requests with a full sync's token
//! stay with the replication code that issued it.
//!
//! An accepted request waits in [`RdmaPending`] (its event queue's fd in the loop's poll)
//! until `FI_CONNECTED`; then the usual admission checks (`maxclients`, protected mode) and
//! the client table. Before the loop sleeps, [`Server::rearm_rdma_clients`] asks each RDMA
//! client's queues whether sleeping is safe (`fi_trywait`) and serves those that made
//! progress meanwhile.

use crate::net::client::Client;
use crate::net::conn::{Addr, Conn};
use crate::server::Server;
use ferrokv_fabric::{ConnectionRequest, Listener, PendingStream, StreamConfig};
use mio::unix::SourceFd;
use mio::{Interest, Token};
use std::io::Write as _;

/// Tokens of pending RDMA connections: `PENDING_BASE..PENDING_END`, below the replication
/// RDMA tokens.
pub const PENDING_BASE: usize = crate::replication::rdma::master::TOKEN_BASE - 1024;
pub const PENDING_END: usize = crate::replication::rdma::master::TOKEN_BASE;

/// Accepted RDMA connections not yet established.
#[derive(Default)]
pub struct RdmaPending {
    pending: slab::Slab<PendingStream>,
    /// Slots of the RDMA clients in the client table: the loop re-arms them
    /// before sleeping and the cron keeps them alive, without going over
    /// every other client.
    pub tokens: Vec<usize>,
    /// Totals of closed RDMA connections (`INFO rdma`; live ones are added when shown).
    pub closed: ferrokv_fabric::StreamStats,
    /// Connections accepted and refused since start.
    pub accepted: u64,
    pub refused: u64,
    /// Registered rings kept for the next connection (`rdma-conn-pool`), made at the
    /// first connection.
    pub pool: Option<ferrokv_fabric::RingPool>,
}

/// The rings a server-side RDMA connection gets.
pub fn stream_config(srv: &Server) -> StreamConfig {
    let c = &srv.config.repl.rdma;
    StreamConfig {
        slots: c.conn_slots,
        slot_size: c.conn_slot_size,
        credit_every: (c.conn_slots / 4).max(1),
        inject: c.conn_inject,
        signal_every: c.conn_signal_every.min(c.conn_slots),
    }
}

impl Server {
    /// A stream connection request from the RDMA listener: answered now, established later.
    pub fn accept_rdma_request(&mut self, listener: &Listener, req: ConnectionRequest) {
        let config = stream_config(self);
        if self.rdma_conns.pending.len() >= PENDING_END - PENDING_BASE {
            self.rdma_conns.refused += 1;
            let _ = listener.pep.reject(req, b"busy");
            return;
        }
        let keep = self.config.repl.rdma.conn_pool;
        let pool = self
            .rdma_conns
            .pool
            .get_or_insert_with(|| ferrokv_fabric::RingPool::new(keep))
            .clone();
        let pending = match PendingStream::accept_pooled(listener, req, config, &pool) {
            Ok(p) => p,
            Err(e) => {
                self.rdma_conns.refused += 1;
                tracing::warn!("RDMA connection refused: {e}");
                return;
            }
        };
        let fd = pending.eq_fd();
        let slot = self.rdma_conns.pending.insert(pending);
        if let Some(reg) = &self.repl.registry {
            if let Err(e) = reg.register(
                &mut SourceFd(&fd),
                Token(PENDING_BASE + slot),
                Interest::READABLE,
            ) {
                tracing::warn!("Registering an RDMA connection: {e}");
                self.rdma_conns.pending.remove(slot);
                return;
            }
        }
        // FI_CONNECTED may be there already.
        self.rdma_pending_event(PENDING_BASE + slot);
    }

    /// A pending connection's event queue is readable.
    pub fn rdma_pending_event(&mut self, token: usize) {
        let slot = token - PENDING_BASE;
        if !self.rdma_conns.pending.contains(slot) {
            return;
        }
        let pending = self.rdma_conns.pending.remove(slot);
        let fd = pending.eq_fd();
        let stream = match pending.poll() {
            Ok(Ok(stream)) => stream,
            Ok(Err(still)) => {
                self.rdma_conns.pending.insert(still);
                return;
            }
            Err(e) => {
                self.rdma_conns.refused += 1;
                self.deregister_fd(fd);
                tracing::debug!("RDMA connection failed before it was established: {e}");
                return;
            }
        };
        self.deregister_fd(fd);
        self.admit_rdma_client(stream);
    }

    fn deregister_fd(&self, fd: i32) {
        if let Some(reg) = &self.repl.registry {
            let _ = reg.deregister(&mut SourceFd(&fd));
        }
    }

    /// The admission of `accept_clients`, for an established RDMA connection.
    fn admit_rdma_client(&mut self, stream: ferrokv_fabric::Stream) {
        let peer = stream
            .peer_addr()
            .map(Addr::Ip)
            .unwrap_or_else(|_| Addr::none());
        let local = stream
            .local_addr()
            .map(Addr::Ip)
            .unwrap_or_else(|_| Addr::none());
        let mut conn = Conn::Rdma(Box::new(stream));
        self.stats.total_connections_received += 1;
        if let Some(refusal) = self.admission_refusal(&peer) {
            self.rdma_conns.refused += 1;
            let _ = conn.write_all(refusal);
            return;
        }
        let id = self.next_client_id;
        self.next_client_id += 1;
        let authenticated = self.acl.default_open();
        let entry = self.clients.vacant_entry();
        let token = entry.key();
        let mut client = Client::new(id, conn, peer, local, &mut self.pool, authenticated);
        client.token = token;
        let Some(reg) = &self.repl.registry else {
            return;
        };
        if let Err(e) = reg.register(
            client.stream.as_mut().expect("a connection"),
            Token(token),
            Interest::READABLE,
        ) {
            tracing::warn!("Registering an RDMA client: {e}");
            return;
        }
        tracing::debug!("Accepted RDMA client {}", client.addr);
        entry.insert(Some(Box::new(client)));
        self.rdma_conns.tokens.push(token);
        self.rdma_conns.accepted += 1;
        // Commands may have landed before the registration.
        self.pending_reads.push(token);
    }

    /// Before the loop sleeps: each RDMA client's queues are asked whether sleeping is safe;
    /// one that made progress meanwhile is served at once (its reads, and a reply that was
    /// waiting for the peer's credits).
    pub fn rearm_rdma_clients(&mut self) {
        for i in 0..self.rdma_conns.tokens.len() {
            let t = self.rdma_conns.tokens[i];
            let Some(Some(c)) = self.clients.get_mut(t) else {
                continue;
            };
            let Some(conn) = c.stream.as_mut() else {
                continue;
            };
            if !matches!(conn.rearm(), Ok(true)) {
                self.pending_reads.push(t);
                if c.pending_output() > 0 && !c.pending_write {
                    c.pending_write = true;
                    self.pending_writes.push(t);
                }
            }
        }
    }

    /// The cron's keepalives (`rdma-keepalive`): the RDMA clients whose
    /// keepalive failed, to be closed.
    pub fn rdma_keepalives(&mut self) -> Vec<usize> {
        let after = self.config.repl.rdma.conn_keepalive;
        let mut dead = Vec::new();
        if after == 0 {
            return dead;
        }
        for &t in &self.rdma_conns.tokens {
            let Some(Some(c)) = self.clients.get_mut(t) else {
                continue;
            };
            let Some(conn) = c.stream.as_mut() else {
                continue;
            };
            if conn
                .keepalive_if_idle(std::time::Duration::from_secs(after))
                .is_err()
            {
                tracing::debug!("RDMA keepalive failed: closing client id={}", c.id);
                dead.push(t);
            }
        }
        dead
    }

    /// An RDMA client leaves slot `t` of the table: its counters join the
    /// totals.
    pub fn rdma_client_closed(&mut self, t: usize, conn: &Conn) {
        if let Some(s) = conn.rdma_stats() {
            self.rdma_conns.tokens.retain(|&x| x != t);
            self.rdma_conns.closed.add(&s);
        }
    }

    /// Totals over every RDMA connection, open and closed.
    pub fn rdma_conn_totals(&self) -> ferrokv_fabric::StreamStats {
        let mut total = self.rdma_conns.closed;
        for &t in &self.rdma_conns.tokens {
            if let Some(Some(c)) = self.clients.get(t) {
                if let Some(s) = c.stream.as_ref().and_then(|s| s.rdma_stats()) {
                    total.add(&s);
                }
            }
        }
        total
    }
}
