//! The event loop: one thread, one mio `Poll` (epoll, edge-triggered).
//!
//! Each turn: wait for readiness (or the next cron tick); accept new
//! connections; for each readable client read what the socket has, decode
//! and execute every complete command and queue the client for writing;
//! then, before sleeping again, write the queued replies in one pass
//! (where the AOF will be written first, so a reply never precedes the
//! durability of its write) and close the clients marked for closing.

use crate::net::client::{Client, ReplyMode};
use crate::net::conn::{Accepted, Conn, Listener, TcpOptions, Transport};
use crate::net::io_threads::{Done, IoThreads, Job, Movable, Parsed, ReadJob, WriteJob};
use crate::net::rebind::{bind_kind, tcp_port_of};
use crate::server::{unix_ms, Server};
use ferrokv_resp::request::{Limits, RequestDecoder};
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

pub(crate) const LISTENER_BASE: usize = usize::MAX - 64;

/// Bytes one client may have read per turn before others get theirs.
const READ_BUDGET: usize = 1024 * 1024;

/// The same for a replica's link to its master, much smaller: under a write
/// load the link always has more, and at 1 MiB (about 20k SETs, twice a
/// turn) the replica's own clients waited tens of milliseconds a turn (the
/// lag probe's p99 was 58 ms with it, 6 ms with this: docs/benchmarks.md).
/// Redis reads 16 KiB of it per event.
const MASTER_LINK_READ_BUDGET: usize = 64 * 1024;

/// Commands one client may run in one pass before the others get theirs
/// (its pipeline goes on in a later pass of the same loop turn). With the
/// read budget alone, 1 MiB of pipelined `GET`s of a large value is ~35k
/// commands and gigabytes of replies in one go.
const PASS_COMMANDS: usize = 1024;

/// Pipelined commands whose keys are warmed in one go before they run
/// ([`Reactor::warm_keys`]): enough to overlap the misses of `-P 16`, few
/// enough that the first lines are still cached when their command runs.
const WARM_AHEAD: usize = 16;

/// Parsing in place (RDMA clients): a request cut by a ring slot's end is
/// completed with at least this many bytes of the next slot at a time...
const RING_COMPLETE_STEP: usize = 1024;
/// ...unless it is a bulk larger than this, which goes the ordinary way.
const RING_COMPLETE_MAX: usize = 64 * 1024;

/// How a pass over an RDMA client's ring ended.
enum RingPass {
    /// The ordinary read path goes on: every landed slot was parsed, or the
    /// client is blocked, or what a slot left is in the input buffer.
    Ordinary,
    /// Every landed slot was parsed and nothing more is there.
    Empty,
    /// The client stopped (paused, deferred, closing) or its budget ran
    /// out; what was left is in its input buffer.
    Stopped,
    /// The connection failed.
    Close,
}

pub struct Reactor {
    poll: Poll,
    pub srv: Server,
    /// Decodes a pipeline ahead of its execution to warm its keys
    /// ([`Reactor::warm_keys`]); holds no state between uses.
    lookahead: RequestDecoder,
}

impl Reactor {
    /// Binds every `bind` address on the configured port (none with
    /// `port 0`, as Redis), and the Unix socket when one is configured.
    pub fn bind(srv: Server) -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let backlog = srv.config.tcp_backlog as i32;
        // TCP, TLS, then the Unix socket (the order `rebind` keeps).
        let mut listeners = bind_kind(&srv.config.bind, srv.config.port, false, backlog)?;
        let tls = crate::net::tls::TlsContext::build(&srv.config.tls)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        listeners.extend(bind_kind(
            &srv.config.bind,
            srv.config.tls.port,
            true,
            backlog,
        )?);
        if srv.config.tls.port != 0 {
            info!(
                "Ready to accept connections tls on port {}",
                srv.config.tls.port
            );
        }
        if let Some(path) = &srv.config.unixsocket {
            let l = Listener::bind_unix(path.as_ref(), srv.config.unixsocketperm, backlog)?;
            info!("The server is now ready to accept connections at {path}");
            listeners.push(l);
        }
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Configured to not listen anywhere, exiting.",
            ));
        }
        for (i, l) in listeners.iter_mut().enumerate() {
            poll.registry()
                .register(l, Token(LISTENER_BASE + i), Interest::READABLE)?;
        }
        let mut srv = srv;
        srv.uring = open_backend(srv.config.io_backend, poll.as_raw_fd())?;
        srv.io_threads =
            IoThreads::start(srv.config.io_threads, srv.config.events_per_io_thread == 0)?
                .map(Box::new);
        if srv.config.io_threads > 1 {
            info!(
                "{} I/O threads started ({})",
                srv.config.io_threads - 1,
                if srv.config.io_threads_do_reads {
                    "reads and writes"
                } else {
                    "writes"
                }
            );
        }
        srv.tcp_port = tcp_port_of(&listeners);
        srv.repl.registry = Some(poll.registry().try_clone()?);
        if srv.config.cluster.enabled {
            // The bus port, and the node table from nodes.conf.
            let now = unix_ms() as u64;
            let mut cl = crate::cluster::Cluster::init(&srv.config, &mut srv.rng, now)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let port = cl.bus_port;
            if srv.config.tls.cluster {
                cl.links.tls = Some(tls.clone());
            }
            cl.links.bind(&srv.config.bind, port, poll.registry())?;
            let a = srv.cluster_announce(&cl);
            cl.refresh_myself(&a);
            cl.routes = crate::cluster::redirect::routes(&srv.commands);
            srv.cluster = Some(Box::new(cl));
        }
        srv.listeners = listeners;
        srv.tls = tls;
        Ok(Reactor {
            poll,
            srv,
            lookahead: RequestDecoder::new(),
        })
    }

    pub fn port(&self) -> u16 {
        self.srv.tcp_port
    }

    /// Runs until `SHUTDOWN`, SIGTERM or SIGINT (which save first when
    /// snapshots are configured, as Redis does).
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now();
        // The cluster's cron runs every 100 ms whatever `hz` (Redis's
        // `run_with_period(100)`).
        let mut next_cluster_cron = Instant::now();
        // When this turn's work began (the last poll returned).
        let mut turn_started = Instant::now();
        loop {
            let period = Duration::from_millis(1000 / self.srv.config.hz.max(1));
            // RDMA connections: safe to sleep on their fds? (else served now)
            self.srv.rearm_rdma_clients();
            let now = Instant::now();
            let timeout = if !self.srv.pending_reads.is_empty()
                || self.srv.eviction.pending
                || self.srv.persistence.job.as_ref().is_some_and(|j| j.eager())
            {
                // (A save with work ready comes back at once.)
                Duration::ZERO
            } else if self.srv.persistence.job.is_some()
                || self.srv.aof.as_ref().is_some_and(|a| a.has_pending())
                || self.srv.repl_busy()
            {
                // A save in progress advances every turn: wake up for it.
                next_cron
                    .saturating_duration_since(now)
                    .min(Duration::from_millis(1))
            } else {
                next_cron.saturating_duration_since(now)
            };
            // Wake up for the nearest blocked client's deadline, and for
            // the end of a client pause.
            let timeout = match self.srv.blocking.next_deadline() {
                Some(d) => timeout.min(Duration::from_millis((d - unix_ms()).max(0) as u64)),
                None => timeout,
            };
            let timeout = if self.srv.cluster.is_some() {
                timeout.min(next_cluster_cron.saturating_duration_since(Instant::now()))
            } else {
                timeout
            };
            let timeout = if self.srv.pause.active() {
                let left = (self.srv.pause.end_ms() - unix_ms()).max(0) as u64;
                timeout.min(Duration::from_millis(left + 1))
            } else {
                timeout
            };
            if self.srv.persistence.job.is_some() {
                // How busy the clients keep the loop (a save's pacing).
                let now = Instant::now();
                self.srv.persistence.loop_load.turn(turn_started, now);
            }
            if self.srv.uring.is_some() {
                if self.srv.rdma_poll_usec() > 0 && !timeout.is_zero() {
                    // This turn's sends go out and the ring is looked at
                    // first, without waiting; only a loop with nothing to
                    // do polls the RDMA clients' queues before it sleeps.
                    self.wait_uring(&mut events, Duration::ZERO)?;
                    let busy =
                        !events.is_empty()
                            || !self.srv.pending_reads.is_empty()
                            || self.srv.uring.as_ref().is_some_and(|u| {
                                !u.ready.is_empty() || u.epoll_more || u.epoll_ready
                            });
                    if !busy && !self.poll_rdma_before_sleeping(None, timeout)? {
                        self.wait_uring(&mut events, timeout)?;
                    }
                } else {
                    self.wait_uring(&mut events, timeout)?;
                }
            } else if !self.poll_rdma_before_sleeping(Some(&mut events), timeout)? {
                match self.poll.poll(&mut events, Some(timeout)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            turn_started = Instant::now();
            self.srv.now_ms = unix_ms();
            // With I/O threads doing reads, this turn's readable clients
            // are read as one batch (`read_batch`).
            let batch_reads = self.srv.io_threads.is_some() && self.srv.config.io_threads_do_reads;
            let mut readable = Vec::new();
            for ev in events.iter() {
                let t = ev.token().0;
                if t >= LISTENER_BASE {
                    self.accept(t - LISTENER_BASE);
                    continue;
                }
                if (crate::net::rdma::PENDING_BASE..crate::net::rdma::PENDING_END).contains(&t) {
                    self.srv.rdma_pending_event(t);
                    continue;
                }
                if (crate::cluster::link::TOKEN_BASE..crate::cluster::link::TOKEN_END).contains(&t)
                {
                    self.srv.cluster_event(
                        t,
                        ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                        ev.is_writable(),
                    );
                    continue;
                }
                if t >= crate::replication::rdma::master::TOKEN_BASE {
                    // An RDMA queue's fd (docs/rdma.md): drained until empty.
                    self.srv.rdma_event(t);
                    continue;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    if ev.is_read_closed() {
                        if let Some(Some(c)) = self.srv.clients.get_mut(t) {
                            c.conn.peer_closed = true;
                        }
                    }
                    if batch_reads {
                        readable.push(t);
                    } else {
                        self.handle_readable(t);
                    }
                }
                // One event for reads and writes (an RDMA connection's queues):
                // a reply waiting for room is retried on it.
                let shared = !self.srv.rdma_conns.tokens.is_empty()
                    && self.srv.clients.get(t).is_some_and(|c| {
                        c.as_ref().is_some_and(|c| {
                            c.conn.want_writable
                                && c.conn
                                    .stream
                                    .as_ref()
                                    .is_some_and(|s| s.readiness_is_shared())
                        })
                    });
                if ev.is_writable() || shared {
                    if let Some(Some(c)) = self.srv.clients.get(t) {
                        if c.pending_output() > 0 && !c.pending_write {
                            self.srv.pending_writes.push(t);
                            if let Some(Some(c)) = self.srv.clients.get_mut(t) {
                                c.pending_write = true;
                            }
                        }
                    }
                }
            }
            // io_uring connections whose receives completed.
            let ready = self
                .srv
                .uring
                .as_mut()
                .map(|u| std::mem::take(&mut u.ready));
            for t in ready.into_iter().flatten() {
                self.handle_readable(t);
            }
            if batch_reads {
                readable.append(&mut self.srv.pending_reads);
                self.read_batch(readable);
            } else {
                for t in std::mem::take(&mut self.srv.pending_reads) {
                    self.handle_readable(t);
                }
            }
            crate::blocking::expire_timeouts(&mut self.srv, unix_ms());
            if self.srv.pause.active() {
                self.srv.check_pause_end(unix_ms());
            }
            self.resume_unblocked();
            self.before_sleep();
            if self.srv.cluster.is_some()
                && !self.srv.cron_paused
                && Instant::now() >= next_cluster_cron
            {
                self.srv.cluster_cron();
                next_cluster_cron = Instant::now() + Duration::from_millis(100);
            }
            if Instant::now() >= next_cron {
                // (`DEBUG PAUSE-CRON 1` holds it, as Redis's serverCron.)
                if !self.srv.cron_paused {
                    self.srv.cron();
                    self.client_cron();
                }
                next_cron = Instant::now() + period;
            }
            // Signals, and a shutdown waiting for its replicas.
            self.srv.shutdown_cron();
            if self.srv.shutdown_requested {
                self.before_sleep();
                info!("ferrokv is now ready to exit, bye bye...");
                return Ok(());
            }
        }
    }

    /// The io_uring backend's wait: submit this turn's receives and sends
    /// and sleep until a completion (or `timeout`) in one `io_uring_enter`;
    /// the epoll set's events are fetched only when its watch fired.
    fn wait_uring(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        let Some(u) = self.srv.uring.as_mut() else {
            return Ok(());
        };
        let timeout = if u.epoll_more || u.epoll_ready || !u.ready.is_empty() {
            Duration::ZERO
        } else {
            timeout
        };
        u.enter(timeout)?;
        self.srv.uring_reap();
        let Some(u) = self.srv.uring.as_mut() else {
            return Ok(());
        };
        if std::mem::take(&mut u.epoll_ready) || std::mem::take(&mut u.epoll_more) {
            match self.poll.poll(events, Some(Duration::ZERO)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            // A full array may have left events behind, which raise no new
            // wake-up of the watch: fetch again next turn.
            u.epoll_more = events.iter().count() == events.capacity();
        } else {
            events.clear();
        }
        Ok(())
    }

    fn accept(&mut self, li: usize) {
        self.srv.accept_clients(li, self.poll.registry());
    }

    fn handle_readable(&mut self, t: usize) {
        let Some(slot) = self.srv.clients.get_mut(t) else {
            return;
        };
        let Some(mut c) = slot.take() else {
            return;
        };
        let keep = self.read_and_process(&mut c, t);
        self.after_input(t, c, keep);
    }

    /// After a client's input was read and run: its output limits, its
    /// place in the write queue, or its closing.
    fn after_input(&mut self, t: usize, mut c: Box<Client>, keep: bool) {
        let out_limit_hit = self.check_output_limits(&mut c);
        let pending = c.pending_output() > 0;
        let queue = pending && !c.pending_write;
        if queue {
            c.pending_write = true;
        }
        let closing = c.close_after_reply || c.close_asap;
        self.srv.clients[t] = Some(c);
        if !keep || out_limit_hit {
            self.close_client(t);
            return;
        }
        if queue || (closing && !pending) {
            if !queue {
                if let Some(Some(c)) = self.srv.clients.get_mut(t) {
                    c.pending_write = true;
                }
            }
            self.srv.pending_writes.push(t);
        }
    }

    /// Whether a client's socket may go to an I/O thread: a TCP, Unix or
    /// TLS connection of an ordinary client (the master link and replicas,
    /// whose sockets the replication code lends to its own threads, stay
    /// here, as do RDMA and io_uring connections: crates/net/src/io_threads.rs).
    fn movable(&self, c: &Client) -> bool {
        Movable::can_take(c.conn.stream.as_ref())
            && self.srv.repl.master_client_id() != Some(c.id)
            && !self.srv.repl.is_replica_client(c.id)
    }

    /// The readable clients of a turn, read by the I/O threads when the
    /// batch is large enough (`IoThreads::threads_for`), then run here in
    /// turn. A client with work left from an earlier pass (paused on its
    /// replies, or deferred for fairness) is served here as one thread
    /// would serve it.
    fn read_batch(&mut self, mut tokens: Vec<usize>) {
        if self
            .srv
            .io_threads
            .as_ref()
            .is_none_or(|io| io.allowed() == 0)
        {
            // No core for a thread now: served here, as without threads.
            if let Some(io) = self.srv.io_threads.as_mut() {
                io.active = false;
            }
            for t in tokens {
                self.handle_readable(t);
            }
            return;
        }
        // A client both readable and queued for a later read is read once.
        tokens.sort_unstable();
        tokens.dedup();
        let (jobs, direct, threads) =
            self.batch_for_threads(tokens, |c| !c.output_paused && !c.input_deferred);
        if threads == 0 {
            for t in jobs.into_iter().chain(direct) {
                self.handle_readable(t);
            }
            return;
        }
        let mut work = Vec::with_capacity(jobs.len());
        for t in jobs {
            let Some(Some(c)) = self.srv.clients.get_mut(t) else {
                continue;
            };
            let Some(stream) = Movable::take(&mut c.conn.stream) else {
                continue;
            };
            work.push(Job::Read(ReadJob {
                token: t,
                stream,
                inbuf: std::mem::take(&mut c.conn.inbuf),
                in_start: c.conn.in_start,
                in_end: c.conn.in_end,
                wanted: c.conn.decoder.wanted(),
                budget: READ_BUDGET,
                // Whole commands are decoded ahead on the thread when none
                // is partly decoded here and the pre-AUTH limits do not
                // apply.
                parse: (!c.conn.decoder.in_progress() && c.authenticated)
                    .then_some(self.srv.config.proto_max_bulk_len as usize),
                parsed: std::mem::take(&mut c.conn.parsed),
                peer_closed: c.conn.peer_closed,
            }));
        }
        let Some(io) = self.srv.io_threads.as_mut() else {
            return;
        };
        let done = io.run(work, threads);
        // Every socket and buffer back in its client before anything runs.
        let mut results = Vec::with_capacity(done.len());
        for d in done {
            let Done::Read(r) = d else { continue };
            let j = r.job;
            if let Some(Some(c)) = self.srv.clients.get_mut(j.token) {
                c.conn.stream = Some(j.stream.into_conn());
                c.conn.inbuf = j.inbuf;
                c.conn.in_start = j.in_start;
                c.conn.in_end = j.in_end;
                c.conn.parsed = j.parsed;
            }
            results.push((j.token, r.reads, r.bytes, r.eof, r.more, r.error));
        }
        self.warm_batch(results.iter().map(|r| r.0));
        for (t, reads, bytes, eof, more, error) in results {
            let Some(Some(mut c)) = self.srv.clients.get_mut(t).map(|s| s.take()) else {
                continue;
            };
            let keep = self.run_read(&mut c, t, reads, bytes, eof, more, error);
            self.after_input(t, c, keep);
        }
        for t in direct {
            self.handle_readable(t);
        }
    }

    /// Warms the first key of each client's next command in a batch the
    /// I/O threads read and decoded ahead ([`Server::prefetch_keys`]): the
    /// clients' lookups then miss the cache together, not one after the
    /// other, as a pipeline's do (`warm_keys`).
    fn warm_batch(&mut self, tokens: impl Iterator<Item = usize>) {
        let mut keys: Vec<(usize, usize, usize)> = Vec::new();
        for t in tokens {
            let Some(Some(c)) = self.srv.clients.get(t) else {
                continue;
            };
            if let Some(cmd) = c.conn.parsed.cmds.first() {
                let args = c.conn.parsed.args(&c.conn.inbuf, cmd);
                if (2..=9).contains(&args.len()) {
                    let key = args.get(1);
                    let at = key.as_ptr() as usize - c.conn.inbuf.as_ptr() as usize;
                    keys.push((t, at, key.len()));
                }
            }
        }
        if keys.len() < 2 {
            return;
        }
        for &(t, at, len) in &keys {
            if let Some(Some(c)) = self.srv.clients.get(t) {
                self.srv
                    .prefetch_keys(c.db, std::iter::once(&c.conn.inbuf[at..at + len]));
            }
        }
    }

    /// Whether the client's unprocessed input passed `limit`
    /// (`client-query-buffer-limit`): logged and counted, and the caller
    /// closes it.
    fn over_query_buffer_limit(&mut self, c: &Client, limit: usize) -> bool {
        let qbuf = c.conn.in_end - c.conn.in_start;
        if qbuf <= limit {
            return false;
        }
        warn!(
            "Closing client that reached max query buffer length: id={} addr={} qbuf={qbuf}",
            c.id, c.addr
        );
        self.srv.stats.client_qbuf_limit_disconnections += 1;
        true
    }

    /// Runs what an I/O thread read for a client, as `read_and_process`
    /// runs what it reads itself. Returns false when the connection must
    /// close now.
    #[allow(clippy::too_many_arguments)]
    fn run_read(
        &mut self,
        c: &mut Client,
        t: usize,
        reads: u64,
        bytes: usize,
        eof: bool,
        more: bool,
        error: Option<io::Error>,
    ) -> bool {
        if let Some(e) = error {
            debug!("Reading from client: {e}");
            return false;
        }
        if bytes > 0 {
            self.srv.stats.total_reads_processed += reads;
            self.srv.stats.net_input_bytes += bytes as u64;
            c.last_interaction = Instant::now();
            self.process_input(c);
            let limit = self.srv.config.client_query_buffer_limit as usize;
            if self.over_query_buffer_limit(c, limit) {
                return false;
            }
        }
        if eof {
            return Self::input_ended(c);
        }
        if more && !(c.close_after_reply || c.close_asap || c.input_deferred || c.output_paused) {
            self.srv.pending_reads.push(t);
        }
        c.shrink_input();
        true
    }

    /// The peer ended its input (a read returned 0): the connection closes,
    /// as Redis closes it, but after the replies to what it sent before
    /// (Redis writes those before it reads the end). Returns whether to
    /// keep the connection for that last write.
    fn input_ended(c: &mut Client) -> bool {
        if c.pending_output() == 0 {
            return false;
        }
        c.close_after_reply = true;
        true
    }

    /// Reads and runs commands, one read at a time so the input buffer
    /// stays small however fast the client sends. A client that still has
    /// data after [`READ_BUDGET`] bytes is queued to continue later in this
    /// loop turn, so one busy client cannot starve the others. Returns false
    /// when the connection must close now.
    fn read_and_process(&mut self, c: &mut Client, t: usize) -> bool {
        // Paused on its own unsent replies: it is read again once they
        // drain (`write_pending`), not before.
        if c.output_paused {
            return true;
        }
        // What an earlier pass left of its pipeline runs before more is read.
        if c.input_deferred {
            c.input_deferred = false;
            self.process_input(c);
            if c.input_deferred || c.output_paused {
                return true;
            }
        }
        let master_link = self.srv.repl.master_client_id() == Some(c.id);
        if !master_link && c.conn.stream.as_ref().is_some_and(|s| s.parses_in_place()) {
            match self.process_from_ring(c, t) {
                RingPass::Close => return false,
                RingPass::Stopped => {
                    c.shrink_input();
                    return true;
                }
                RingPass::Empty => {
                    c.shrink_input();
                    return true;
                }
                RingPass::Ordinary => {}
            }
        }
        let limit = self.srv.config.client_query_buffer_limit as usize;
        let mut budget = if master_link {
            MASTER_LINK_READ_BUDGET
        } else {
            READ_BUDGET
        };
        loop {
            let (n, more) = match c.read_once() {
                Ok(x) => x,
                Err(e) => {
                    debug!("Reading from client: {e}");
                    return false;
                }
            };
            if n == 0 {
                return Self::input_ended(c);
            }
            if n == usize::MAX {
                break;
            }
            self.srv.stats.total_reads_processed += 1;
            if self.srv.repl.master_client_id() == Some(c.id) {
                self.srv.stats.net_repl_input_bytes += n as u64;
            } else {
                self.srv.stats.net_input_bytes += n as u64;
            }
            c.last_interaction = Instant::now();
            self.process_input(c);
            if self.over_query_buffer_limit(c, limit) {
                return false;
            }
            if !more
                || c.close_after_reply
                || c.close_asap
                || c.input_deferred
                || c.output_paused
                || self.over_hard_output_limit(c)
            {
                break;
            }
            budget = budget.saturating_sub(n);
            if budget == 0 {
                self.srv.pending_reads.push(t);
                break;
            }
        }
        c.shrink_input();
        true
    }

    /// An RDMA client's requests parsed straight from its receive ring
    /// (docs/rdma.md, "Parsing in place"): each landed slot is decoded where
    /// it lies and handed back to the peer as it is consumed, with no copy
    /// into the input buffer. A request that a slot's end cuts in two has its
    /// head copied into the input buffer and is completed from the next slot
    /// with only the bytes it needs; parsing in place resumes after it. What
    /// a client that stopped (paused on its replies, deferred for fairness)
    /// leaves of a slot is copied into its input buffer for later; a blocked
    /// client reads on the ordinary way, as does a large bulk.
    fn process_from_ring(&mut self, c: &mut Client, t: usize) -> RingPass {
        let mut budget = READ_BUDGET;
        loop {
            if c.input_deferred || c.output_paused || c.close_after_reply || c.close_asap {
                return RingPass::Stopped;
            }
            if c.blocked.is_some() {
                // Read on into the input buffer, as a TCP client's would be
                // (and an end or an error seen), but run nothing.
                return RingPass::Ordinary;
            }
            if budget == 0 {
                self.srv.pending_reads.push(t);
                return RingPass::Stopped;
            }
            let head = c.conn.in_end - c.conn.in_start;
            if head > 0 && c.conn.decoder.wanted() > RING_COMPLETE_MAX {
                // A large bulk: the ordinary path sizes the buffer once, when
                // there is something to read (sizing it for a peer that
                // declared a bulk and sent nothing more costs memory).
                let any = c
                    .conn
                    .stream
                    .as_mut()
                    .is_some_and(|s| s.peek_in_place().is_some() || s.in_place_ended());
                return if any {
                    RingPass::Ordinary
                } else {
                    RingPass::Empty
                };
            }
            let Some(view) = c.conn.stream.as_mut().and_then(|s| s.peek_in_place()) else {
                // Nothing more landed (the peek just read the queues): no
                // second look through the ordinary read, unless the stream
                // ended, which that read reports.
                return if c.conn.stream.as_ref().is_some_and(|s| s.in_place_ended()) {
                    RingPass::Ordinary
                } else {
                    RingPass::Empty
                };
            };
            let (ptr, len) = (view.as_ptr(), view.len());
            // SAFETY: the bytes lie in the stream's registered receive ring,
            // which lives as long as the stream; `c.conn.stream` is not dropped
            // while this client runs commands (it is out of the client table,
            // and only `close_client`, on a client in the table, drops one).
            // They stay unchanged until `consume_in_place` below hands their
            // slot back (the peer writes a slot only after its credit, and
            // this side never writes its receive ring). The slice is not used
            // after that call, and commands copy what they keep of it.
            let view: &[u8] = unsafe { std::slice::from_raw_parts(ptr, len) };
            let used = if head > 0 {
                // The head of a cut request waits in the input buffer: copy
                // what completes it, run it, and leave in the ring whatever
                // of this piece was not needed.
                let take = len.min(
                    c.conn
                        .decoder
                        .wanted()
                        .saturating_sub(head)
                        .max(RING_COMPLETE_STEP),
                );
                c.conn.append_input(&view[..take]);
                self.process_input(c);
                let left = c.conn.in_end - c.conn.in_start;
                if left <= take {
                    // All of it came from this slot: parsed in place next.
                    c.conn.in_end -= left;
                    c.conn.decoder.reset();
                    take - left
                } else {
                    take
                }
            } else {
                let mut start = 0;
                self.run_commands(c, view, &mut start, false);
                if start < len {
                    // A request cut by the slot's end, or what a client that
                    // stopped (or blocked) left: into the input buffer.
                    c.conn.append_input(&view[start..]);
                    len
                } else {
                    start
                }
            };
            let Some(stream) = c.conn.stream.as_mut() else {
                return RingPass::Close;
            };
            if let Err(e) = stream.consume_in_place(used) {
                debug!("Reading from client: {e}");
                return RingPass::Close;
            }
            self.srv.stats.net_input_bytes += used as u64;
            c.last_interaction = Instant::now();
            budget = budget.saturating_sub(used.max(1));
        }
    }

    /// Decodes and executes the commands in the client's input buffer.
    pub fn process_input(&mut self, c: &mut Client) {
        if self.srv.repl.master_client_id() == Some(c.id) {
            crate::replication::replica::process_master_input(&mut self.srv, c);
            return;
        }
        let inbuf = std::mem::take(&mut c.conn.inbuf);
        let mut start = c.conn.in_start;
        self.run_commands(c, &inbuf[..c.conn.in_end], &mut start, true);
        c.conn.in_start = start;
        c.conn.inbuf = inbuf;
    }

    /// Decodes and executes the commands in `buf` from `*start`, advancing
    /// it past each one run: the client's input buffer (`in_inbuf`, whose
    /// `in_start` then follows, as `CLIENT LIST`'s `qbuf` reads it), or a
    /// slot of an RDMA client's ring.
    fn run_commands(&mut self, c: &mut Client, buf: &[u8], start: &mut usize, in_inbuf: bool) {
        let end = buf.len();
        let mut decoder = std::mem::take(&mut c.conn.decoder);
        let limits = Limits {
            max_bulk_len: self.srv.config.proto_max_bulk_len as usize,
            authenticated: c.authenticated,
        };
        let backpressure = self.srv.config.client_reply_backpressure as usize;
        c.out.cap = self.reply_cap(c);
        let mut commands = 0;
        // Commands before this point have had their keys warmed.
        let mut warmed = *start;
        // What an I/O thread decoded ahead (used once: the buffer may move
        // before the next pass).
        let mut parsed = std::mem::take(&mut c.conn.parsed);
        let mut next_parsed = 0;
        // A blocked client's pipeline waits until it is served.
        while *start < end && !c.close_after_reply && !c.close_asap && c.blocked.is_none() {
            // Like Redis, which checks the limit as each reply is added: a
            // client past its hard output limit runs nothing more, so a
            // pipeline of large replies cannot grow its buffer unbounded.
            if self.over_hard_output_limit(c) {
                break;
            }
            // Blocked in WAIT or SHUTDOWN: the rest waits until it is released.
            if self.srv.repl.master.is_waiting(c.id) || self.srv.shutdown.blocks(c.id) {
                break;
            }
            // Replies it does not read: its next commands wait for them to
            // drain (docs/hostile-input.md).
            if backpressure > 0 && c.pending_output() >= backpressure {
                c.output_paused = true;
                c.input_deferred = true;
                self.srv.stats.client_output_pauses += 1;
                break;
            }
            if commands == PASS_COMMANDS {
                c.input_deferred = true;
                self.srv.pending_reads.push(c.token);
                break;
            }
            // Decoded ahead by an I/O thread (the input buffer's own
            // commands, while the client stays authenticated).
            if let Some(&cmd) = parsed
                .cmds
                .get(next_parsed)
                .filter(|p| in_inbuf && p.start == *start && c.authenticated)
            {
                next_parsed += 1;
                if *start >= warmed {
                    warmed = self.warm_parsed(c.db, buf, &parsed, next_parsed - 1);
                }
                let args = parsed.args(buf, &cmd);
                if !args.is_empty() {
                    self.srv.execute(c, args);
                    commands += 1;
                }
                *start += cmd.len;
                c.conn.in_start = *start;
                if c.out.overflowed {
                    self.reply_overflowed(c);
                    break;
                }
                continue;
            }
            if *start >= warmed {
                warmed = self.warm_keys(c.db, &buf[..end], *start, limits);
            }
            match decoder.decode(&buf[*start..end], limits) {
                Ok(None) => break,
                Ok(Some(d)) => {
                    let consumed = d.consumed;
                    if !d.args.is_empty() {
                        self.srv.execute(c, d.args);
                        commands += 1;
                    }
                    *start += consumed;
                    if in_inbuf {
                        c.conn.in_start = *start;
                    }
                    if c.out.overflowed {
                        self.reply_overflowed(c);
                        break;
                    }
                }
                Err(e) => {
                    // Silenced like any reply under CLIENT REPLY OFF/SKIP;
                    // the connection closes either way.
                    if matches!(c.reply_mode, ReplyMode::On | ReplyMode::SkipNext) {
                        c.out.error(&format!("ERR {}", e.0));
                    }
                    debug!(
                        "Protocol error ({}) from client: id={} addr={}",
                        e.0, c.id, c.addr
                    );
                    c.close_after_reply = true;
                    *start = end;
                    if in_inbuf {
                        c.conn.in_start = *start;
                    }
                }
            }
        }
        c.out.cap = usize::MAX;
        c.conn.decoder = decoder;
        parsed.clear();
        c.conn.parsed = parsed;
        self.srv.count_errors(c);
    }

    /// [`Self::warm_keys`] for commands an I/O thread decoded ahead: the
    /// first keys of the next [`WARM_AHEAD`] from `from` on (short
    /// commands only), without decoding them again. Returns where the
    /// warmed run ends in the buffer.
    fn warm_parsed(&mut self, db: usize, buf: &[u8], parsed: &Parsed, from: usize) -> usize {
        let run = &parsed.cmds[from..(from + WARM_AHEAD).min(parsed.cmds.len())];
        let Some(last) = run.last() else {
            return buf.len();
        };
        if run.len() > 1 {
            self.srv.prefetch_keys(
                db,
                run.iter()
                    .map(|cmd| parsed.args(buf, cmd))
                    .filter(|a| (2..=9).contains(&a.len()))
                    .map(|a| a.get(1)),
            );
        }
        last.start + last.len
    }

    /// Warms the first key of each of the next [`WARM_AHEAD`] whole
    /// commands in `buf` from `from` ([`ferrokv_store::Db::prefetch`]) and
    /// returns where they end, or `buf`'s end when nothing more is to be
    /// warmed. A lone command is not warmed: there is nothing for its
    /// lookup to overlap with, and an unpipelined client pays nothing but
    /// this one decode. Only short multibulk commands (at most 9
    /// arguments, those whose lookup is a large share of their work) are
    /// decoded twice; the first other one ends the warming.
    fn warm_keys(&mut self, db: usize, buf: &[u8], from: usize, limits: Limits) -> usize {
        let end = buf.len();
        // The keys first, then their lookups in a tight loop, so that the
        // misses of several lookups are in flight at once.
        let mut keys = [(0usize, 0usize); WARM_AHEAD];
        let mut n = 0;
        let mut pos = from;
        let mut commands = 0;
        // A previous use may have stopped inside an incomplete command.
        self.lookahead.reset();
        while commands < WARM_AHEAD && pos < end {
            if !matches!(buf[pos..], [b'*', b'1'..=b'9', b'\r', ..]) {
                break;
            }
            let Ok(Some(d)) = self.lookahead.decode(&buf[pos..], limits) else {
                // Incomplete or malformed: the real decode deals with it.
                break;
            };
            if commands == 0 && d.consumed == end - pos {
                return end;
            }
            if d.args.len() >= 2 {
                // Kept as a place in `buf`: the slice also borrows the
                // decoder, which the next command needs.
                let key = d.args.get(1);
                keys[n] = (key.as_ptr() as usize - buf.as_ptr() as usize, key.len());
                n += 1;
            }
            pos += d.consumed;
            commands += 1;
        }
        self.srv
            .prefetch_keys(db, keys[..n].iter().map(|&(s, l)| &buf[s..s + l]));
        // A full run with more after it: the next is warmed when it comes.
        if commands == WARM_AHEAD && pos < end {
            pos
        } else {
            end
        }
    }

    /// Runs the pipelined commands of clients that were just unblocked
    /// (served, timed out, CLIENT UNBLOCK); they may unblock others.
    fn resume_unblocked(&mut self) {
        loop {
            // Clients a pause released run their held command first, one
            // at a time, each followed by the rest of its pipeline.
            let resumed = crate::blocking::has_resumable(&self.srv)
                && crate::blocking::resume_next_postponed(&mut self.srv);
            let tokens = std::mem::take(&mut self.srv.blocking.unblocked);
            if tokens.is_empty() && !resumed {
                return;
            }
            for t in tokens {
                let Some(Some(mut c)) = self.srv.clients.get_mut(t).map(|s| s.take()) else {
                    continue;
                };
                self.process_input(&mut c);
                let queue = (c.pending_output() > 0 || c.close_after_reply || c.close_asap)
                    && !c.pending_write;
                c.pending_write |= queue;
                self.srv.clients[t] = Some(c);
                if queue {
                    self.srv.pending_writes.push(t);
                }
            }
        }
    }

    /// The most bytes a client's replies may hold while its own commands
    /// run: its class's hard output limit, and no more than
    /// `maxmemory-clients` (a client that alone passes the budget of all
    /// clients would be the first evicted anyway) unless it is exempt.
    fn reply_cap(&self, c: &Client) -> usize {
        let cfg = &self.srv.config;
        let hard = self.srv.output_limit_for(c).hard;
        let clients = if c.no_evict {
            0
        } else {
            cfg.maxmemory_clients.bytes(cfg.maxmemory)
        };
        [hard, clients]
            .into_iter()
            .filter(|&l| l > 0)
            .min()
            .map_or(usize::MAX, |l| l.min(usize::MAX as u64) as usize)
    }

    /// A command's reply passed [`Self::reply_cap`]: the client is closed,
    /// what it was owed is dropped (Redis's `CLIENT_CLOSE_ASAP` on a hard
    /// limit), the data the command changed stays changed.
    fn reply_overflowed(&mut self, c: &mut Client) {
        c.out.overflowed = false;
        c.close_asap = true;
        c.out.buf.truncate(c.conn.out_sent);
        warn!(
            "Client id={} addr={} closed for overcoming of output buffer limits (a reply passed {} bytes).",
            c.id, c.addr, c.out.cap
        );
        self.srv.stats.client_outbuf_limit_disconnections += 1;
    }

    fn over_hard_output_limit(&self, c: &Client) -> bool {
        let hard = self.srv.output_limit_for(c).hard;
        hard > 0 && c.pending_output() as u64 >= hard
    }

    /// Applies `client-output-buffer-limit`. True when the client must go.
    fn check_output_limits(&mut self, c: &mut Client) -> bool {
        let lim = self.srv.output_limit_for(c);
        let pending = c.pending_output() as u64;
        let hard = lim.hard > 0 && pending >= lim.hard;
        let mut soft = false;
        if lim.soft > 0 && pending >= lim.soft {
            let since = *c.soft_limit_since.get_or_insert_with(Instant::now);
            soft = since.elapsed() >= Duration::from_secs(lim.soft_seconds);
        } else {
            c.soft_limit_since = None;
        }
        if hard || soft {
            warn!(
                "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                c.id, c.addr
            );
            self.srv.stats.client_outbuf_limit_disconnections += 1;
            return true;
        }
        false
    }

    /// Writes queued replies and closes clients that asked for it.
    fn before_sleep(&mut self) {
        // The AOF first: a reply is never sent before its write is in the
        // AOF (and synced, with `appendfsync always`).
        // An eviction round that ran out of time goes on each loop turn.
        if self.srv.eviction.pending {
            self.srv.perform_evictions();
        }
        // BCAST invalidations collected this turn go out with the replies.
        self.srv.tracking_broadcast();
        let aof_ok = self.srv.flush_aof();
        for t in self.srv.replication_tick() {
            self.resume_client(t);
        }
        self.write_pending(aof_ok);
        // The snapshot's slice of work after the replies are out: the
        // clients' next requests travel while it runs, instead of every
        // reply of this turn waiting for it. What it queued (a replica's
        // sync result) goes out now too.
        self.srv.drive_snapshot();
        if !self.srv.pending_writes.is_empty() {
            self.write_pending(aof_ok);
        }
        // nodes.conf and the cluster's state, after what changed them.
        if self.srv.cluster.is_some() {
            self.srv.cluster_before_sleep();
        }
        // Clients killed by others (CLIENT KILL).
        for t in std::mem::take(&mut self.srv.close_queue) {
            self.close_client(t);
        }
        self.evict_clients();
    }

    /// `maxmemory-clients` (Redis 7.0's client eviction): while the normal
    /// and pub/sub clients together hold more than the limit, the one
    /// holding the most is closed; `CLIENT NO-EVICT on` clients count but
    /// are never chosen, and replicas and the master link are neither.
    /// A scan of the clients, made only when the limit is set.
    fn evict_clients(&mut self) {
        let cfg = &self.srv.config;
        let limit = cfg.maxmemory_clients.bytes(cfg.maxmemory) as usize;
        if limit == 0 {
            return;
        }
        let master = self.srv.repl.master_client_id();
        let replicas = self.srv.repl.master.replica_ids();
        let mut total = 0usize;
        let mut candidates = Vec::new();
        for (t, c) in self.srv.clients.iter() {
            let Some(c) = c else { continue };
            if Some(c.id) == master || replicas.contains(&c.id) {
                continue;
            }
            let used = c.memory_usage();
            total += used;
            if !c.no_evict {
                candidates.push((used, t));
            }
        }
        if total <= limit {
            return;
        }
        candidates.sort_unstable_by_key(|&(used, _)| std::cmp::Reverse(used));
        for (used, t) in candidates {
            if total <= limit {
                break;
            }
            if let Some(Some(c)) = self.srv.clients.get(t) {
                warn!(
                    "Evicting client id={} addr={} tot-mem={used}: clients use {total} bytes, maxmemory-clients is {limit}",
                    c.id, c.addr
                );
            }
            self.srv.stats.evicted_clients += 1;
            total -= used;
            self.close_client(t);
        }
    }

    /// Flushes the clients with queued replies (those waiting for the AOF
    /// stay queued while it is failing).
    fn write_pending(&mut self, aof_ok: bool) {
        let mut pending = std::mem::take(&mut self.srv.pending_writes);
        let clients = &mut self.srv.clients;
        let held = &mut self.srv.pending_writes;
        pending.retain(|&t| match clients.get_mut(t) {
            Some(Some(c)) if c.awaiting_aof => {
                if !aof_ok {
                    // Held until the disk takes the write.
                    held.push(t);
                    return false;
                }
                c.awaiting_aof = false;
                true
            }
            Some(Some(_)) => true,
            _ => false,
        });
        // Clients paused on output whose replies drained: read and run again.
        let mut resumed = Vec::new();
        for (t, written, res) in self.threaded_writes(&mut pending) {
            self.after_flush(t, written, res, &mut resumed);
        }
        for t in pending {
            let Some(Some(c)) = self.srv.clients.get_mut(t) else {
                continue;
            };
            let before = c.pending_output();
            let res = c.flush();
            let written = before.saturating_sub(c.pending_output());
            self.after_flush(t, written, res, &mut resumed);
        }
        self.srv.pending_reads.extend(resumed);
    }

    /// The replies of `pending`'s movable clients written by the I/O
    /// threads, when there are enough of them (`IoThreads::threads_for`):
    /// those clients leave `pending`, and come back with the bytes written
    /// and what their flush returned.
    fn threaded_writes(
        &mut self,
        pending: &mut Vec<usize>,
    ) -> Vec<(usize, usize, io::Result<bool>)> {
        if self.srv.io_threads.is_none() {
            return Vec::new();
        }
        let (jobs, rest, threads) =
            self.batch_for_threads(std::mem::take(pending), |c| c.pending_output() > 0);
        *pending = rest;
        if threads == 0 {
            pending.extend(jobs);
            return Vec::new();
        }
        let mut work = Vec::with_capacity(jobs.len());
        for t in jobs {
            let Some(Some(c)) = self.srv.clients.get_mut(t) else {
                continue;
            };
            let Some(stream) = Movable::take(&mut c.conn.stream) else {
                continue;
            };
            work.push(Job::Write(WriteJob {
                token: t,
                stream,
                buf: std::mem::take(&mut c.out.buf),
                sent: c.conn.out_sent,
            }));
        }
        let Some(io) = self.srv.io_threads.as_mut() else {
            return Vec::new();
        };
        let done = io.run(work, threads);
        let mut out = Vec::with_capacity(done.len());
        for d in done {
            let Done::Write(w) = d else { continue };
            let j = w.job;
            if let Some(Some(c)) = self.srv.clients.get_mut(j.token) {
                c.conn.stream = Some(j.stream.into_conn());
                c.out.buf = j.buf;
                c.conn.out_sent = j.sent;
            }
            out.push((j.token, w.written, w.result));
        }
        out
    }

    /// Splits `tokens` into the clients a batch for the I/O threads would
    /// take (movable, and `wanted`) and the others, with the number of
    /// threads the batch goes to (`IoThreads::threads_for`; 0: none, and
    /// the execution thread serves them all).
    fn batch_for_threads(
        &mut self,
        tokens: Vec<usize>,
        wanted: impl Fn(&Client) -> bool,
    ) -> (Vec<usize>, Vec<usize>, usize) {
        if let Some(io) = self.srv.io_threads.as_mut().filter(|io| io.allowed() == 0) {
            // No core for a thread now: nothing to sort out.
            io.active = false;
            return (Vec::new(), tokens, 0);
        }
        let events_per_thread = self.srv.config.events_per_io_thread;
        let (jobs, rest): (Vec<usize>, Vec<usize>) = tokens.into_iter().partition(|&t| {
            self.srv
                .clients
                .get(t)
                .is_some_and(|c| c.as_ref().is_some_and(|c| wanted(c) && self.movable(c)))
        });
        let threads = self
            .srv
            .io_threads
            .as_mut()
            .map_or(0, |io| io.threads_for(jobs.len(), events_per_thread));
        (jobs, rest, threads)
    }

    /// After a client's replies were written (here or by an I/O thread):
    /// the counters, its closing, its pause on output, its interest in
    /// writable events.
    fn after_flush(
        &mut self,
        t: usize,
        written: usize,
        res: io::Result<bool>,
        resumed: &mut Vec<usize>,
    ) {
        let backpressure = self.srv.config.client_reply_backpressure as usize;
        let Some(Some(c)) = self.srv.clients.get_mut(t) else {
            return;
        };
        c.pending_write = false;
        let done = matches!(res, Ok(true));
        let close = res.is_err() || (done && c.close_after_reply) || c.close_asap;
        self.srv.stats.total_writes_processed += 1;
        if self.srv.repl.is_replica_client(c.id) {
            self.srv.stats.net_repl_output_bytes += written as u64;
        } else {
            self.srv.stats.net_output_bytes += written as u64;
        }
        if close {
            self.close_client(t);
            return;
        }
        if c.output_paused && c.pending_output() <= backpressure / 2 {
            c.output_paused = false;
            resumed.push(t);
        }
        // Writable readiness is asked for only while a reply is stuck
        // behind a full socket buffer: with it always on, every ACK that
        // drains the buffer would wake the loop (an edge per reply).
        if done == c.conn.want_writable {
            let interest = if done {
                Interest::READABLE
            } else {
                Interest::READABLE | Interest::WRITABLE
            };
            if let Some(stream) = c.conn.stream.as_mut() {
                if self
                    .poll
                    .registry()
                    .reregister(stream, Token(t), interest)
                    .is_ok()
                {
                    c.conn.want_writable = !done;
                }
            }
        }
    }

    /// Processes input a client already has buffered (released from
    /// `WAIT`, or a new master link with the first bytes of its stream).
    fn resume_client(&mut self, t: usize) {
        let Some(Some(mut c)) = self.srv.clients.get_mut(t).map(|s| s.take()) else {
            return;
        };
        self.process_input(&mut c);
        if c.pending_output() > 0 && !c.pending_write {
            c.pending_write = true;
            self.srv.pending_writes.push(t);
        }
        self.srv.clients[t] = Some(c);
        // And whatever arrived meanwhile.
        self.srv.pending_reads.push(t);
    }

    pub fn close_client(&mut self, t: usize) {
        if let Some(mut stream) = self.srv.close_client(t) {
            let _ = self.poll.registry().deregister(&mut stream);
        }
    }

    /// `rdma-conn-poll-usec` (or the autotuner's choice): with RDMA
    /// clients, before the loop sleeps it keeps looking — at the RDMA
    /// clients' completion queues, and with `events` at the poll set
    /// without waiting (epoll backend) — for up to that long. Whether it
    /// found work (the caller then skips the sleep); a loop with no RDMA
    /// client, or nothing to wait for, does not poll.
    fn poll_rdma_before_sleeping(
        &mut self,
        mut events: Option<&mut Events>,
        timeout: Duration,
    ) -> io::Result<bool> {
        let usec = self.srv.rdma_poll_usec();
        if usec == 0 || timeout.is_zero() {
            return Ok(false);
        }
        // Never past the loop's own deadline (cron, blocked clients).
        let until = Instant::now() + Duration::from_micros(usec).min(timeout);
        loop {
            if let Some(events) = events.as_deref_mut() {
                match self.poll.poll(events, Some(Duration::ZERO)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                if !events.is_empty() {
                    self.srv.rdma_conns.poll_found += 1;
                    return Ok(true);
                }
            }
            self.srv.rearm_rdma_clients();
            if !self.srv.pending_reads.is_empty() {
                self.srv.rdma_conns.poll_found += 1;
                return Ok(true);
            }
            if Instant::now() >= until {
                self.srv.rdma_conns.poll_slept += 1;
                return Ok(false);
            }
            std::hint::spin_loop();
        }
    }

    /// Per-cron client checks: idle timeouts and soft output limits.
    fn client_cron(&mut self) {
        if let Some(io) = self.srv.io_threads.as_mut() {
            io.tick(Instant::now(), self.srv.config.events_per_io_thread);
        }
        let timeout = self.srv.config.timeout;
        let mut doomed = Vec::new();
        for (t, c) in self.srv.clients.iter() {
            let Some(c) = c else { continue };
            // A blocked client is idle on purpose (as in Redis).
            if timeout > 0
                && c.blocked.is_none()
                && c.last_interaction.elapsed() >= Duration::from_secs(timeout)
            {
                debug!("Closing idle client id={}", c.id);
                doomed.push(t);
            }
        }
        // RDMA has no keepalive of its own (`rdma-keepalive`): an idle RDMA
        // client gets an empty write; one that fails closes the client.
        doomed.extend(self.srv.rdma_keepalives());
        self.srv.rdma_conn_tune_tick();
        for t in doomed {
            self.close_client(t);
        }
        // Soft output limits are time based: re-check clients that are over.
        let over: Vec<usize> = self
            .srv
            .clients
            .iter()
            .filter(|(_, c)| c.as_ref().is_some_and(|c| c.soft_limit_since.is_some()))
            .map(|(k, _)| k)
            .collect();
        for t in over {
            let Some(Some(mut c)) = self.srv.clients.get_mut(t).map(|s| s.take()) else {
                continue;
            };
            let hit = self.check_output_limits(&mut c);
            self.srv.clients[t] = Some(c);
            if hit {
                self.close_client(t);
            }
        }
    }
}

const PROTECTED_MODE_MSG: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

impl Server {
    /// Accepts every pending connection on listener `li` and registers it
    /// with `registry` (the reactor's, or, from a busy script's pump, a
    /// clone of it).
    /// Why a new connection from `peer` may not become a client
    /// (`maxclients`, protected mode), counted in `rejected_connections`:
    /// the error to write it before closing.
    pub fn admission_refusal(&mut self, peer: &crate::net::conn::Addr) -> Option<&'static [u8]> {
        let refusal: &'static [u8] = if self.clients.len() as u64 >= self.config.maxclients {
            b"-ERR max number of clients reached\r\n"
        } else if self.config.protected_mode
            && self.acl.default_user().nopass
            && !peer.is_loopback()
        {
            PROTECTED_MODE_MSG
        } else {
            return None;
        };
        self.stats.rejected_connections += 1;
        Some(refusal)
    }

    pub fn accept_clients(&mut self, li: usize, registry: &mio::Registry) {
        let opts = TcpOptions {
            keepalive_secs: self.config.tcp_keepalive,
            tls: self.tls.server.clone(),
        };
        loop {
            let Accepted {
                conn: mut stream,
                peer: addr,
                local,
            } = match self.listeners[li].accept(opts.clone()) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("Accepting client connection: {e}");
                    return;
                }
            };
            self.stats.total_connections_received += 1;
            if let Some(refusal) = self.admission_refusal(&addr) {
                let _ = stream.write_all(refusal);
                continue;
            }
            let id = self.next_client_id;
            self.next_client_id += 1;
            let authenticated = self.acl.default_open();
            let entry = self.clients.vacant_entry();
            let token = entry.key();
            debug!("Accepted {addr}");
            let stream = match (self.uring.as_ref(), stream) {
                // Plain sockets go on the ring (crates/net/src/uring.rs); TLS stays on
                // epoll.
                (Some(u), Conn::Tcp(s)) => {
                    Conn::Uring(Box::new(u.adopt(OwnedFd::from(s), token)), Transport::Tcp)
                }
                (Some(u), Conn::Unix(s)) => {
                    Conn::Uring(Box::new(u.adopt(OwnedFd::from(s), token)), Transport::Unix)
                }
                (_, s) => s,
            };
            let mut client = Client::new(id, stream, addr, local, &mut self.pool, authenticated);
            client.token = token;
            // (A connection on the ring registers nothing: its receive is
            // armed already.)
            if let Err(e) = registry.register(
                client
                    .conn
                    .stream
                    .as_mut()
                    .expect("a connection has a socket"),
                Token(token),
                Interest::READABLE,
            ) {
                warn!("Registering client: {e}");
                continue;
            }
            entry.insert(Some(Box::new(client)));
        }
    }
}

/// The ring for `io-backend` (crates/net/src/uring.rs): none for `epoll`; for `auto`,
/// none with one log line when the kernel (or a container's seccomp
/// profile) refuses io_uring; for `uring`, refused means no start.
fn open_backend(
    backend: crate::config::IoBackend,
    epoll_fd: std::os::fd::RawFd,
) -> io::Result<Option<Box<crate::net::uring::Uring>>> {
    use crate::config::IoBackend;
    if backend == IoBackend::Epoll {
        return Ok(None);
    }
    match crate::net::uring::Uring::new(epoll_fd) {
        Ok(u) => {
            info!("The event loop runs on io_uring");
            Ok(Some(Box::new(u)))
        }
        Err(e) if backend == IoBackend::Auto => {
            info!("io_uring is not available here ({e}): the event loop runs on epoll");
            Ok(None)
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("io-backend uring: io_uring is not available here: {e}"),
        )),
    }
}
