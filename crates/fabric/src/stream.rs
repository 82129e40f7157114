//! A duplex byte stream over one connected endpoint — what an RDMA client connection or an
//! RDMA replication link carries.
//!
//! Each side owns a receive ring of K slots × C bytes, registered once for remote writes and
//! described to the peer in the connection's private data ([`RingDescriptor`]: the connector's
//! in `fi_connect`, the acceptor's in `fi_accept`). A side sends by copying up to C bytes into
//! its registered send ring and writing them with `fi_writedata` into the peer's next slot, the
//! immediate carrying the byte count (32 bits: all verbs carries). It never waits for the peer
//! to post a buffer: the slots are there, and it may use every one the peer has not yet
//! handed back.
//!
//! The receiver reads bytes straight from its ring; once it has consumed `credit_every` slots
//! it tells the writer so with an 8-byte `fi_send` holding the *cumulative* count of consumed
//! slots — cumulative, so no credit message can be lost or double-counted. The writer's window
//! is K minus the slots written and not yet credited. Valkey's RDMA transport lets the sender
//! refill only after the receiver has consumed the whole buffer; here the granularity is
//! `credit_every` slots (K/4 by default), so a writer streaming into a reader that keeps up
//! never sees an empty window.
//!
//! On providers that consume a posted receive per incoming write (`FI_RX_CQ_DATA`, verbs) the
//! writes and the credit messages share the receive queue, so every posted receive is an
//! 8-byte buffer that either can consume; there are K + K of them (at most K writes and K
//! credit messages can be outstanding from the peer), each re-posted as it completes.
//!
//! Everything is non-blocking: [`Stream::read`] and [`Stream::write`] answer `WouldBlock` when
//! there is nothing to read or no window left; an event loop sleeps on [`Stream::fds`] after
//! [`Stream::trywait`] allowed it, and calls [`Stream::progress`] when they are readable.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use crate::connection::Connection;
use crate::domain::{Access, Completion, CompletionKind, MemoryRegion};
use crate::error::{FabricError, Result};
use crate::fabric::{CmEvent, ConnectionRequest};
use crate::library::Library;
use crate::private_data::RingDescriptor;

/// The token of a stream connection's [`RingDescriptor`]: it tells a listener shared with the
/// full-sync endpoint (whose connections carry a one-time token issued on the TCP link) that
/// this connection is a stream.
pub const STREAM_TOKEN: [u8; 16] = *b"ferrokv-stream\0\x01";

/// Bytes of one credit message.
const CREDIT_BYTES: usize = 8;

/// The shape of a side's rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// K: slots of the receive ring (and of the send ring).
    pub slots: u32,
    /// C: bytes per slot, the most one write carries.
    pub slot_size: u32,
    /// Consumed slots between two credit messages (1..=K).
    pub credit_every: u32,
    /// Inject writes small enough for the provider's `inject_size`.
    pub inject: bool,
    /// Ring writes per requested local completion (1..=K): the others are posted
    /// unsignalled on an endpoint with selective completions, and each signalled one's
    /// completion frees the send slots of the writes before it. 1: every write completes.
    pub signal_every: u32,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            slots: 16,
            slot_size: 64 * 1024,
            credit_every: 4,
            inject: true,
            signal_every: 4,
        }
    }
}

impl StreamConfig {
    fn check(&self) -> Result<()> {
        if self.slots == 0 || self.slot_size == 0 {
            return Err(FabricError::Invalid(
                "a stream ring needs slots of bytes".into(),
            ));
        }
        if self.slot_size >= 1 << 31 {
            return Err(FabricError::Invalid("slots must be under 2 GiB".into()));
        }
        if self.credit_every == 0 || self.credit_every > self.slots {
            return Err(FabricError::Invalid(format!(
                "credit_every must be 1..={}",
                self.slots
            )));
        }
        if self.signal_every == 0 || self.signal_every > self.slots {
            return Err(FabricError::Invalid(format!(
                "signal_every must be 1..={}",
                self.slots
            )));
        }
        Ok(())
    }

    fn ring_bytes(&self) -> usize {
        self.slots as usize * self.slot_size as usize
    }
}

/// Counters of one stream.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes written to the peer.
    pub bytes_written: u64,
    /// Writes that carried them (one slot each).
    pub writes: u64,
    /// Bytes read from the ring.
    pub bytes_read: u64,
    /// Posts retried because the endpoint's transmit queue was full.
    pub queue_full: u64,
    /// Times a write found no window left (the peer had not handed slots back).
    pub credit_stalls: u64,
    /// Credit messages sent.
    pub credits_sent: u64,
    /// Writes injected (small enough for the provider to copy: no local completion).
    pub injected: u64,
    /// Keepalives sent (empty writes, which the reader skips).
    pub keepalives: u64,
    /// Ring writes that asked for a local completion (all of them without selective
    /// completions; one in `signal_every` with).
    pub signalled: u64,
    /// Bytes parsed in place ([`Stream::peek`] / [`Stream::consume`]), never copied out of
    /// the ring (part of `bytes_read`).
    pub read_in_place: u64,
    /// Each write's post to the return of the credit that covers it.
    pub write_latency: WriteLatency,
}

/// Upper bounds (µs) of [`WriteLatency`]'s buckets; the last bucket is everything above.
pub const WRITE_LATENCY_BOUNDS_USEC: [u64; 16] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000,
];

/// A histogram of write latencies (fixed buckets, so that counters of many streams add up).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteLatency {
    pub buckets: [u64; WRITE_LATENCY_BOUNDS_USEC.len() + 1],
    pub count: u64,
    pub sum_usec: u64,
}

impl WriteLatency {
    fn record(&mut self, d: Duration) {
        let usec = d.as_micros().min(u128::from(u64::MAX)) as u64;
        let i = WRITE_LATENCY_BOUNDS_USEC.partition_point(|&b| b < usec);
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_usec += usec;
    }

    fn add(&mut self, other: &WriteLatency) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_usec += other.sum_usec;
    }
}

impl StreamStats {
    /// Adds `other`'s counts to these (totals over several streams).
    pub fn add(&mut self, other: &StreamStats) {
        self.bytes_written += other.bytes_written;
        self.writes += other.writes;
        self.bytes_read += other.bytes_read;
        self.signalled += other.signalled;
        self.read_in_place += other.read_in_place;
        self.write_latency.add(&other.write_latency);
        self.queue_full += other.queue_full;
        self.credit_stalls += other.credit_stalls;
        self.credits_sent += other.credits_sent;
        self.injected += other.injected;
        self.keepalives += other.keepalives;
    }
}

/// A connected stream (see the module documentation).
pub struct Stream {
    conn: Connection,
    config: StreamConfig,
    peer: RingDescriptor,
    /// The registered memory (taken back by the pool it came from when the stream ends).
    rings: Option<Rings>,
    /// Where `rings` go back to, if they came from a pool.
    pool: Option<RingPool>,
    /// Writes posted (each one peer slot), and consumed by the peer (its last credit).
    sent: u64,
    /// Writes posted from the send ring (the others were injected: small ones, which the
    /// provider copies and completes no locally), and their local completions.
    ring_writes: u64,
    write_done: u64,
    /// Writes of at most this many bytes are injected (the provider's `inject_size`).
    inject_max: usize,
    /// When this side last wrote (data or a keepalive).
    last_write: std::time::Instant,
    peer_consumed: u64,
    /// When each write not yet credited was posted (the front is write number
    /// `peer_consumed`): its credit's return gives its latency.
    posted_at: VecDeque<std::time::Instant>,
    /// Lengths of the slots that have landed and are not consumed yet, in order.
    landed: VecDeque<u32>,
    /// Slots consumed, and how far into the first landed slot reading is.
    consumed: u64,
    read_at: usize,
    /// The consumed count last sent as a credit; credit sends posted and completed.
    credited: u64,
    credit_posts: u64,
    credit_done: u64,
    /// The peer shut the connection down (reads drain what landed, then end).
    eof: bool,
    /// The connection failed; every later call fails with this.
    failed: Option<String>,
    completions: Vec<Completion>,
    pub stats: StreamStats,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("config", &self.config)
            .field("sent", &self.sent)
            .field("peer_consumed", &self.peer_consumed)
            .field("consumed", &self.consumed)
            .field("eof", &self.eof)
            .finish()
    }
}

/// The registered memory of one side, made before the connection is set up.
struct Rings {
    /// K × C bytes the peer writes into.
    recv_ring: MemoryRegion,
    /// K × C bytes writes go out from.
    send_ring: MemoryRegion,
    /// K × 8 bytes of outgoing credit messages.
    credit_tx: MemoryRegion,
    /// 2K × 8 bytes of posted receives (credit messages; on verbs also the writes).
    posted: MemoryRegion,
    prepost: bool,
    /// The shape they were registered for.
    config: StreamConfig,
}

impl Rings {
    fn register(conn: &Connection, config: &StreamConfig) -> Result<Rings> {
        let k = config.slots as usize;
        let rings = Rings {
            recv_ring: conn
                .domain
                .register(config.ring_bytes(), Access::REMOTE_WRITE)?,
            send_ring: conn.domain.register(config.ring_bytes(), Access::WRITE)?,
            credit_tx: conn.domain.register(k * CREDIT_BYTES, Access::SEND)?,
            posted: conn.domain.register(2 * k * CREDIT_BYTES, Access::RECV)?,
            prepost: conn.endpoint.requirements().prepost_receives,
            config: *config,
        };
        Ok(rings)
    }

    /// Posts the 2K receives (the connector before `fi_connect`, the acceptor once
    /// connected).
    fn post_receives(&self, conn: &Connection) -> Result<()> {
        for i in 0..self.posted.len() / CREDIT_BYTES {
            let at = i * CREDIT_BYTES;
            conn.endpoint
                .recv(&self.posted, at..at + CREDIT_BYTES, i as u64)?;
        }
        Ok(())
    }

    fn descriptor(&self, config: &StreamConfig) -> RingDescriptor {
        RingDescriptor {
            addr: self.recv_ring.remote_addr(),
            key: self.recv_ring.key(),
            slots: config.slots,
            slot_size: config.slot_size,
            token: STREAM_TOKEN,
            lane: 0,
            lanes: 1,
        }
    }
}

/// Registered rings kept for the next connection, so that registration is not on the path of
/// every connect (it pins memory and, on verbs, costs a kernel call per region). Connections
/// accepted through a pool share one domain, the regions' home. What the pool serves and
/// what it had to register are counted (`mr_cache_hit_rate` is `hits / (hits + misses)`).
#[derive(Clone)]
pub struct RingPool {
    inner: Arc<std::sync::Mutex<PoolInner>>,
}

struct PoolInner {
    domain: Option<crate::domain::Domain>,
    free: Vec<Rings>,
    keep: usize,
    hits: u64,
    misses: u64,
}

/// What a [`RingPool`] has done.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RingPoolStats {
    /// Connections served rings from the pool.
    pub hits: u64,
    /// Connections whose rings had to be registered.
    pub misses: u64,
    /// Ring sets waiting in the pool.
    pub free: usize,
}

impl RingPool {
    /// A pool keeping up to `keep` ring sets.
    pub fn new(keep: usize) -> RingPool {
        RingPool {
            inner: Arc::new(std::sync::Mutex::new(PoolInner {
                domain: None,
                free: Vec::new(),
                keep,
                hits: 0,
                misses: 0,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> RingPoolStats {
        let p = self.lock();
        RingPoolStats {
            hits: p.hits,
            misses: p.misses,
            free: p.free.len(),
        }
    }

    /// The pool's domain (opened with the first request's info).
    fn domain(
        &self,
        listener: &crate::connection::Listener,
        request: &ConnectionRequest,
    ) -> Result<crate::domain::Domain> {
        let mut p = self.lock();
        if let Some(d) = &p.domain {
            return Ok(d.clone());
        }
        let d = crate::domain::Domain::open(&listener.fabric, &request.info)?;
        p.domain = Some(d.clone());
        Ok(d)
    }

    /// Rings of `config`'s shape for `conn` (whose domain is the pool's).
    fn take(&self, conn: &Connection, config: &StreamConfig) -> Result<Rings> {
        {
            let mut p = self.lock();
            if let Some(i) = p.free.iter().position(|r| r.config == *config) {
                let mut r = p.free.swap_remove(i);
                p.hits += 1;
                r.prepost = conn.endpoint.requirements().prepost_receives;
                return Ok(r);
            }
            p.misses += 1;
        }
        Rings::register(conn, config)
    }

    fn give(&self, rings: Rings) {
        let mut p = self.lock();
        if p.free.len() < p.keep {
            p.free.push(rings);
        }
    }
}

fn cq_size(config: &StreamConfig) -> usize {
    (config.slots as usize * 6).max(64)
}

impl Stream {
    /// Connects to a stream listener at `addr` (blocking, up to `timeout`): for clients and
    /// tools; the server accepts without blocking ([`PendingStream`]).
    pub fn connect(
        lib: &Arc<Library>,
        provider: Option<&str>,
        addr: std::net::SocketAddr,
        config: StreamConfig,
        timeout: Duration,
    ) -> Result<Stream> {
        config.check()?;
        let mut conn = Connection::prepare_with(
            lib,
            provider,
            addr,
            cq_size(&config),
            config.signal_every > 1,
        )?;
        let rings = Rings::register(&conn, &config)?;
        rings.post_receives(&conn)?;
        conn.connect(&rings.descriptor(&config).encode(), timeout)?;
        let peer = RingDescriptor::decode(&conn.peer_data).map_err(|e| {
            FabricError::Invalid(format!("the listener answered no stream ring: {e}"))
        })?;
        Ok(Stream::new(conn, config, peer, rings))
    }

    fn new(conn: Connection, config: StreamConfig, peer: RingDescriptor, r: Rings) -> Stream {
        let inject_max = if config.inject {
            conn.endpoint.requirements().inject_size
        } else {
            0
        };
        Stream {
            conn,
            config,
            peer,
            rings: Some(r),
            pool: None,
            sent: 0,
            ring_writes: 0,
            write_done: 0,
            inject_max,
            last_write: std::time::Instant::now(),
            peer_consumed: 0,
            posted_at: VecDeque::new(),
            landed: VecDeque::new(),
            consumed: 0,
            read_at: 0,
            credited: 0,
            credit_posts: 0,
            credit_done: 0,
            eof: false,
            failed: None,
            completions: Vec::with_capacity(64),
            stats: StreamStats::default(),
        }
    }

    fn rings(&self) -> &Rings {
        self.rings.as_ref().expect("rings until drop")
    }

    fn rings_mut(&mut self) -> &mut Rings {
        self.rings.as_mut().expect("rings until drop")
    }

    /// The connection underneath (its fabric, queues and endpoint).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    pub fn config(&self) -> StreamConfig {
        self.config
    }

    /// Changes, on a live stream, how many ring writes share one local completion (clamped
    /// to 1..=K). Safe at any point: a signalled write's completion frees every write posted
    /// before it whatever the interval was. Without selective completions (a stream that
    /// connected with 1) every write completes anyway.
    pub fn set_signal_every(&mut self, n: u32) {
        self.config.signal_every = n.clamp(1, self.config.slots);
    }

    /// Changes, on a live stream, the largest write injected (`fi_inject_writedata`: no copy
    /// into the send ring, no local completion): at most the provider's `inject_size`, and
    /// none while the stream's `inject` is off. Returns the threshold now in force.
    pub fn set_inline_threshold(&mut self, bytes: usize) -> usize {
        self.inject_max = if self.config.inject {
            bytes.min(self.conn.endpoint.requirements().inject_size)
        } else {
            0
        };
        self.inject_max
    }

    /// The largest write injected now (0: none).
    pub fn inline_threshold(&self) -> usize {
        self.inject_max
    }

    /// The fds an event loop watches for readability: the CQ's and the EQ's.
    pub fn fds(&self) -> [RawFd; 2] {
        [self.conn.cq.as_raw_fd(), self.conn.eq.as_raw_fd()]
    }

    /// `fi_trywait` over both queues: `true` when it is safe to sleep on [`Stream::fds`];
    /// `false` means call [`Stream::progress`] again first.
    pub fn trywait(&self) -> Result<bool> {
        self.conn.fabric.trywait(&[&self.conn.cq, &self.conn.eq])
    }

    /// `poll(2)` on the queues' fds for up to `ms` milliseconds (-1: no limit, 0: just look):
    /// whether one is readable.
    fn poll_fds(&self, ms: i32) -> io::Result<bool> {
        let mut fds = self.fds().map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: two valid pollfds, alive for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(true)
            } else {
                Err(e)
            };
        }
        Ok(n > 0)
    }

    /// Whether an event loop may sleep on [`Stream::fds`] now. It drains the queues first;
    /// what that drain took off them (bytes that landed, credits, an end) raises no event
    /// later, so a stream with any of it must be served before sleeping (`Ok(false)`). Then
    /// `fi_trywait`; then a level-triggered look at the fds, which are the provider's own
    /// wait sets (epoll fds over its sockets): one still ready after a drain raises no new
    /// edge in an edge-triggered poll.
    pub fn rearm(&mut self) -> io::Result<bool> {
        if self.progress()? > 0 || self.readable() > 0 || self.is_closed() {
            return Ok(false);
        }
        if !self
            .trywait()
            .map_err(|e| io::Error::other(e.to_string()))?
        {
            return Ok(false);
        }
        Ok(!self.poll_fds(0)?)
    }

    /// Blocks (never spinning) until one of the queues' fds is readable, once `fi_trywait`
    /// allows sleeping; returns at once when it does not. For blocking users of the stream
    /// (clients, tools): call it after `read` or `write` answered `WouldBlock`, then retry.
    /// `TimedOut` past `limit` (`None`: no limit).
    pub fn wait(&self, limit: Option<Duration>) -> io::Result<()> {
        if !self
            .trywait()
            .map_err(|e| io::Error::other(e.to_string()))?
        {
            return Ok(());
        }
        let ms = limit.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as i32);
        if self.poll_fds(ms)? {
            Ok(())
        } else {
            Err(io::ErrorKind::TimedOut.into())
        }
    }

    /// [`Stream::read`], waiting (up to `limit` each time) while nothing has landed.
    pub fn read_blocking(&mut self, buf: &mut [u8], limit: Option<Duration>) -> io::Result<usize> {
        loop {
            match self.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(limit)?,
                other => return other,
            }
        }
    }

    /// [`Stream::write`], waiting (up to `limit` each time) while the window is shut.
    pub fn write_blocking(&mut self, buf: &[u8], limit: Option<Duration>) -> io::Result<usize> {
        loop {
            match self.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(limit)?,
                other => return other,
            }
        }
    }

    /// Bytes that can be read now without waiting.
    pub fn readable(&self) -> usize {
        let total: usize = self.landed.iter().map(|&l| l as usize).sum();
        total - self.read_at
    }

    /// Whether the peer is gone and everything it sent has been read.
    pub fn is_closed(&self) -> bool {
        (self.eof && self.landed.is_empty()) || self.failed.is_some()
    }

    /// Slots written and not yet handed back by the peer.
    pub fn in_flight(&self) -> u64 {
        self.sent - self.peer_consumed
    }

    fn fail(&mut self, why: String) -> io::Error {
        if self.failed.is_none() {
            self.failed = Some(why);
        }
        self.error()
    }

    fn error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionReset,
            self.failed.clone().unwrap_or_default(),
        )
    }

    /// Reads the completion and event queues until both are empty, applying what they say:
    /// landed slots, credits, finished sends and writes, a shutdown or an error. Returns how
    /// many completions and events it applied: an event loop that drained the queues this
    /// way must serve the stream before sleeping when that is not 0 (the queues' fds will
    /// not announce what was already taken off them).
    pub fn progress(&mut self) -> io::Result<usize> {
        if self.failed.is_some() {
            return Err(self.error());
        }
        let mut applied = 0;
        loop {
            let mut batch = std::mem::take(&mut self.completions);
            batch.clear();
            let read = self.conn.cq.read(&mut batch, 64);
            let n = batch.len();
            let mut bad = None;
            for &c in &batch {
                if let Err(e) = self.apply(c) {
                    bad = Some(e);
                    break;
                }
            }
            self.completions = batch;
            applied += n;
            if let Some(e) = bad {
                return Err(self.fail(e));
            }
            match read {
                // A posted receive flushed by the connection's end: the peer shut down (its
                // FI_SHUTDOWN may come after); what landed is still read, then the end.
                Err(FabricError::Completion(c))
                    if c.err == libc::ECANCELED && c.flags & crate::sys::FI_RECV as u64 != 0 =>
                {
                    self.eof = true;
                    break;
                }
                Err(e) => return Err(self.fail(format!("completion queue: {e}"))),
                Ok(_) => {}
            }
            if n == 0 {
                break;
            }
        }
        loop {
            match self.conn.eq.read() {
                Ok(None) => break,
                Ok(Some(CmEvent::Shutdown { .. })) => {
                    self.eof = true;
                    applied += 1;
                }
                Ok(Some(_)) => applied += 1,
                Err(e) => return Err(self.fail(format!("event queue: {e}"))),
            }
        }
        self.send_credit(false)?;
        Ok(applied)
    }

    fn apply(&mut self, c: Completion) -> std::result::Result<(), String> {
        match c.kind() {
            CompletionKind::RemoteWrite => {
                let len = c.immediate.ok_or("a write arrived without its length")?;
                if len > u64::from(self.config.slot_size) {
                    return Err(format!(
                        "a write of {len} bytes into slots of {}",
                        self.config.slot_size
                    ));
                }
                if self.landed.len() >= self.config.slots as usize {
                    return Err("the peer wrote past its window".into());
                }
                self.landed.push_back(len as u32);
                if self.rings().prepost {
                    self.repost(c.tag)?;
                }
            }
            CompletionKind::Recv => {
                let i = c.tag as usize;
                let at = i * CREDIT_BYTES;
                if c.len == CREDIT_BYTES && at + CREDIT_BYTES <= self.rings().posted.len() {
                    let v = u64::from_le_bytes(
                        self.rings()
                            .posted
                            .bytes(at..at + CREDIT_BYTES)
                            .try_into()
                            .unwrap(),
                    );
                    if v > self.sent {
                        return Err(format!("credit for {v} writes, {} were sent", self.sent));
                    }
                    if v > self.peer_consumed {
                        let now = std::time::Instant::now();
                        for _ in self.peer_consumed..v {
                            if let Some(at) = self.posted_at.pop_front() {
                                self.stats.write_latency.record(now - at);
                            }
                        }
                        self.peer_consumed = v;
                    }
                } else {
                    return Err(format!("a message of {} bytes where credits are 8", c.len));
                }
                self.repost(c.tag)?;
            }
            // The tag is the ring write's index; a signalled write's completion also
            // stands for the unsignalled ones posted before it (in-order completion).
            CompletionKind::Write => self.write_done = self.write_done.max(c.tag + 1),
            CompletionKind::Send => self.credit_done += 1,
            CompletionKind::Other => {}
        }
        Ok(())
    }

    fn repost(&mut self, tag: u64) -> std::result::Result<(), String> {
        let at = tag as usize * CREDIT_BYTES;
        if at + CREDIT_BYTES > self.rings().posted.len() {
            return Err(format!("a completion for an unknown receive {tag}"));
        }
        self.conn
            .endpoint
            .recv(&self.rings().posted, at..at + CREDIT_BYTES, tag)
            .map_err(|e| format!("re-posting a receive: {e}"))
    }

    /// Sends the consumed count when `credit_every` slots have been consumed since the last
    /// credit (or any, with `force`).
    fn send_credit(&mut self, force: bool) -> io::Result<()> {
        let owed = self.consumed - self.credited;
        if owed == 0 || (!force && owed < u64::from(self.config.credit_every)) {
            return Ok(());
        }
        let k = u64::from(self.config.slots);
        if self.credit_posts - self.credit_done >= k {
            // Every credit buffer is in flight: the next progress sends it.
            return Ok(());
        }
        let at = (self.credit_posts % k) as usize * CREDIT_BYTES;
        let consumed = self.consumed;
        self.rings_mut()
            .credit_tx
            .bytes_mut(at..at + CREDIT_BYTES)
            .expect("an owned region")
            .copy_from_slice(&consumed.to_le_bytes());
        match self.conn.endpoint.send(
            &self.rings().credit_tx,
            at..at + CREDIT_BYTES,
            self.credit_posts,
        ) {
            Ok(()) => {
                self.credit_posts += 1;
                self.credited = self.consumed;
                self.stats.credits_sent += 1;
                Ok(())
            }
            Err(e) if e.is_would_block() => {
                self.stats.queue_full += 1;
                Ok(())
            }
            Err(e) => Err(self.fail(format!("sending a credit: {e}"))),
        }
    }

    /// Copies what has landed into `buf`. `Ok(0)` once the peer has shut down and everything
    /// was read; `WouldBlock` when nothing is there yet.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A failed connection (a dead peer's flushed receives, an error completion) still
        // gives up the bytes that landed before it failed; the error comes after them.
        let progressed = self.progress();
        if let Err(e) = progressed {
            if self.landed.is_empty() {
                return Err(e);
            }
        }
        let mut n = 0;
        while n < buf.len() {
            let Some(&len) = self.landed.front() else {
                break;
            };
            let slot = (self.consumed % u64::from(self.config.slots)) as usize
                * self.config.slot_size as usize;
            let take = (len as usize - self.read_at).min(buf.len() - n);
            let from = slot + self.read_at;
            buf[n..n + take].copy_from_slice(self.rings().recv_ring.bytes(from..from + take));
            n += take;
            self.read_at += take;
            if self.read_at == len as usize {
                self.landed.pop_front();
                self.consumed += 1;
                self.read_at = 0;
            }
        }
        self.stats.bytes_read += n as u64;
        if n > 0 && self.failed.is_some() {
            return Ok(n);
        }
        if n > 0 {
            // Hand slots back at the granularity chosen (a writer blocks only with all K
            // slots in flight, so any granularity up to K keeps it moving).
            self.send_credit(false)?;
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if self.eof {
            return Ok(0);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// The unread bytes of the oldest slot that landed, in place in the receive ring, for a
    /// reader that parses straight from the ring instead of copying with [`Stream::read`];
    /// `None` when nothing has landed (after an end or a failure too: `read` reports those).
    /// The bytes stay where they are, unchanged, until [`Stream::consume`] hands their slot
    /// back: the peer writes a slot only after its credit. Empty slots (keepalives) are
    /// skipped.
    pub fn peek(&mut self) -> Option<&[u8]> {
        if self.landed.is_empty() {
            // Errors stay for `read`, after the bytes that landed before them.
            let _ = self.progress();
        }
        while let Some(&len) = self.landed.front() {
            if len as usize != self.read_at {
                break;
            }
            self.landed.pop_front();
            self.consumed += 1;
            self.read_at = 0;
        }
        let len = *self.landed.front()? as usize;
        let slot = (self.consumed % u64::from(self.config.slots)) as usize
            * self.config.slot_size as usize;
        let from = slot + self.read_at;
        Some(self.rings().recv_ring.bytes(from..slot + len))
    }

    /// Marks `n` bytes of what [`Stream::peek`] showed as read: a slot read to its end goes
    /// back to the peer with the next credit (at the usual granularity). `n` beyond the
    /// slot's unread bytes is cut to them.
    pub fn consume(&mut self, n: usize) -> io::Result<()> {
        let Some(&len) = self.landed.front() else {
            return Ok(());
        };
        let n = n.min(len as usize - self.read_at);
        self.read_at += n;
        self.stats.bytes_read += n as u64;
        self.stats.read_in_place += n as u64;
        if self.read_at == len as usize {
            self.landed.pop_front();
            self.consumed += 1;
            self.read_at = 0;
        }
        if self.failed.is_some() {
            return Ok(());
        }
        self.send_credit(false)
    }

    /// Writes as much of `buf` as the window allows, one slot per write. `WouldBlock` when
    /// not a byte could go (no slot handed back yet, or the transmit queue is full).
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.progress()?;
        if self.eof {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let own_k = u64::from(self.config.slots);
        let peer_k = u64::from(self.peer.slots);
        let chunk = self.config.slot_size.min(self.peer.slot_size) as usize;
        let mut n = 0;
        while n < buf.len() {
            if self.sent - self.peer_consumed >= peer_k {
                self.stats.credit_stalls += 1;
                break;
            }
            let take = chunk.min(buf.len() - n);
            let remote = self.peer.slot_addr((self.sent % peer_k) as u32);
            if take <= self.inject_max {
                // Small: injected straight from `buf`, no copy, no local completion.
                match self.conn.endpoint.inject_write_data(
                    &buf[n..n + take],
                    take as u64,
                    remote,
                    self.peer.key,
                ) {
                    Ok(()) => {
                        self.sent += 1;
                        self.posted_at.push_back(std::time::Instant::now());
                        n += take;
                        self.stats.writes += 1;
                        self.stats.injected += 1;
                        self.stats.bytes_written += take as u64;
                        continue;
                    }
                    Err(e) if e.is_would_block() => {
                        self.stats.queue_full += 1;
                        break;
                    }
                    Err(e) => return Err(self.fail(format!("fi_inject_writedata: {e}"))),
                }
            }
            if self.ring_writes - self.write_done >= own_k {
                // Our send slots all wait for their local completions.
                break;
            }
            let at = (self.ring_writes % own_k) as usize * self.config.slot_size as usize;
            self.rings_mut()
                .send_ring
                .bytes_mut(at..at + take)
                .expect("an owned region")
                .copy_from_slice(&buf[n..n + take]);
            // Signalled: every `signal_every`-th ring write, and the one that leaves
            // no send slot free (its completion is what frees them).
            let signal = (self.ring_writes + 1).is_multiple_of(u64::from(self.config.signal_every))
                || self.ring_writes + 1 - self.write_done >= own_k;
            match self.conn.endpoint.write_data_signalled(
                &self.rings().send_ring,
                at..at + take,
                take as u64,
                remote,
                self.peer.key,
                self.ring_writes,
                signal,
            ) {
                Ok(()) => {
                    self.sent += 1;
                    self.posted_at.push_back(std::time::Instant::now());
                    self.ring_writes += 1;
                    if signal || !self.conn.endpoint.is_selective() {
                        self.stats.signalled += 1;
                    }
                    n += take;
                    self.stats.writes += 1;
                    self.stats.bytes_written += take as u64;
                }
                Err(e) if e.is_would_block() => {
                    self.stats.queue_full += 1;
                    break;
                }
                Err(e) => return Err(self.fail(format!("fi_writedata: {e}"))),
            }
        }
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if n > 0 {
            self.last_write = std::time::Instant::now();
        }
        Ok(n)
    }

    /// How long since this side last wrote.
    pub fn idle(&self) -> Duration {
        self.last_write.elapsed()
    }

    /// Sends a keepalive: an empty write into the peer's next slot, which its reader skips.
    /// RDMA has no keepalive of its own; on a dead peer the write fails (an error completion,
    /// or a reset on tcp) and the stream with it. `Ok(false)` when the window is shut (the
    /// peer has not handed slots back: it is reading slowly, or gone; the stream's users
    /// see that through their output limits and `timeout`).
    pub fn keepalive(&mut self) -> io::Result<bool> {
        self.progress()?;
        if self.eof || self.sent - self.peer_consumed >= u64::from(self.peer.slots) {
            return Ok(false);
        }
        let remote = self
            .peer
            .slot_addr((self.sent % u64::from(self.peer.slots)) as u32);
        match self
            .conn
            .endpoint
            .inject_write_data(&[], 0, remote, self.peer.key)
        {
            Ok(()) => {
                self.sent += 1;
                self.posted_at.push_back(std::time::Instant::now());
                self.stats.keepalives += 1;
                self.last_write = std::time::Instant::now();
                Ok(true)
            }
            Err(e) if e.is_would_block() => {
                self.stats.queue_full += 1;
                Ok(false)
            }
            Err(e) => Err(self.fail(format!("keepalive: {e}"))),
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<std::net::SocketAddr> {
        self.conn.endpoint.peer_addr()
    }

    /// This end's address.
    pub fn local_addr(&self) -> Result<std::net::SocketAddr> {
        self.conn.endpoint.local_addr()
    }

    /// Shuts the connection down (the peer sees `FI_SHUTDOWN`).
    pub fn shutdown(&self) -> Result<()> {
        self.conn.endpoint.shutdown()
    }
}

impl Drop for Stream {
    /// The peer learns of the end at once (`FI_SHUTDOWN`), not when a write fails; pooled
    /// rings go back to their pool (the endpoint, closed right after, is the last thing that
    /// could have used them).
    fn drop(&mut self) {
        if self.failed.is_none() && !self.eof {
            let _ = self.conn.endpoint.shutdown();
        }
        if let (Some(pool), Some(rings)) = (self.pool.take(), self.rings.take()) {
            pool.give(rings);
        }
    }
}

/// A stream connection a listener has accepted and that is not established yet: the event
/// loop polls [`PendingStream::poll`] when its EQ fd is readable, without blocking.
pub struct PendingStream {
    conn: Connection,
    config: StreamConfig,
    peer: RingDescriptor,
    rings: Rings,
    pool: Option<RingPool>,
}

impl std::fmt::Debug for PendingStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingStream")
            .field("config", &self.config)
            .finish()
    }
}

impl PendingStream {
    /// Answers `request` (whose private data must be a stream's [`RingDescriptor`]; anything
    /// else is rejected) with this side's ring.
    pub fn accept(
        listener: &crate::connection::Listener,
        request: ConnectionRequest,
        config: StreamConfig,
    ) -> Result<PendingStream> {
        Self::accept_with(listener, request, config, None)
    }

    /// [`PendingStream::accept`] with rings from `pool` (and its domain); they go back to
    /// it when the stream ends.
    pub fn accept_pooled(
        listener: &crate::connection::Listener,
        request: ConnectionRequest,
        config: StreamConfig,
        pool: &RingPool,
    ) -> Result<PendingStream> {
        Self::accept_with(listener, request, config, Some(pool))
    }

    fn accept_with(
        listener: &crate::connection::Listener,
        request: ConnectionRequest,
        config: StreamConfig,
        pool: Option<&RingPool>,
    ) -> Result<PendingStream> {
        config.check()?;
        let peer = match RingDescriptor::decode(&request.private_data) {
            Ok(p) if p.token == STREAM_TOKEN => p,
            Ok(_) => {
                listener.pep.reject(request, b"not a stream")?;
                return Err(FabricError::Invalid("not a stream connection".into()));
            }
            Err(e) => {
                listener.pep.reject(request, b"bad ring")?;
                return Err(FabricError::Invalid(format!("bad stream ring: {e}")));
            }
        };
        let (conn, rings) = match pool {
            Some(pool) => {
                let domain = pool.domain(listener, &request)?;
                let conn = listener.prepare_accept_in(
                    &domain,
                    &request,
                    cq_size(&config),
                    config.signal_every > 1,
                )?;
                let rings = pool.take(&conn, &config)?;
                (conn, rings)
            }
            None => {
                let conn =
                    listener.prepare_accept(&request, cq_size(&config), config.signal_every > 1)?;
                let rings = Rings::register(&conn, &config)?;
                (conn, rings)
            }
        };
        conn.endpoint.accept(&rings.descriptor(&config).encode())?;
        Ok(PendingStream {
            conn,
            config,
            peer,
            rings,
            pool: pool.cloned(),
        })
    }

    /// The EQ fd to watch until the connection is established.
    pub fn eq_fd(&self) -> RawFd {
        self.conn.eq.as_raw_fd()
    }

    /// Reads the EQ: the stream once `FI_CONNECTED` arrived, or `self` back while it has not.
    pub fn poll(self) -> Result<std::result::Result<Stream, PendingStream>> {
        loop {
            match self.conn.eq.read()? {
                Some(CmEvent::Connected { id, .. }) if id == self.conn.endpoint.id() => {
                    let PendingStream {
                        conn,
                        config,
                        peer,
                        rings,
                        pool,
                    } = self;
                    rings.post_receives(&conn)?;
                    let mut stream = Stream::new(conn, config, peer, rings);
                    stream.pool = pool;
                    return Ok(Ok(stream));
                }
                Some(CmEvent::Shutdown { .. }) => {
                    return Err(FabricError::Call {
                        call: "fi_accept",
                        code: libc::ECONNRESET,
                        message: "peer shut down before the connection was established".into(),
                    })
                }
                Some(_) => {}
                None => return Ok(Err(self)),
            }
        }
    }
}
