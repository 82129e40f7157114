//! Shared by the integration tests and the `fabric_sweep` example: opening libfabric the way
//! CI expects, and the credit-window ring protocol of the RDMA sync (ARCHITECTURE.md §6):
//! the replica registers K slots × C bytes and connects with their [`RingDescriptor`]; the
//! master writes chunk `i` into slot `i mod K` with `fi_writedata`, immediate `i`, never more
//! than `window` in flight; the replica consumes each slot and returns a credit with `fi_send`.
#![allow(dead_code)]

pub mod stream_io;

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use ferrokv_fabric::{
    AcceptDescriptor, Access, CmEvent, Completion, CompletionKind, Connection, FabricError,
    Library, Listener, MemoryRegion, RingDescriptor,
};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

pub const TEST_TOKEN: [u8; 16] = *b"ferrokv-test-tok";
pub const PROVIDER: Option<&str> = Some("tcp");
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a loop sleeps on its fds with work outstanding before calling the peer stuck.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens libfabric, or panics with the reason — unless `FERROKV_SKIP_RDMA_TESTS=1`, in which
/// case the caller skips (returns `None`). CI installs libfabric, so there the tests run.
pub fn library() -> Option<Arc<Library>> {
    match Library::open_default() {
        Ok(lib) => Some(lib),
        Err(e) if std::env::var("FERROKV_SKIP_RDMA_TESTS").as_deref() == Ok("1") => {
            eprintln!("skipping: {e} (FERROKV_SKIP_RDMA_TESTS=1)");
            None
        }
        Err(e) => panic!(
            "{e}\ninstall libfabric1 (Debian/Ubuntu: apt-get install libfabric1), or set \
             FERROKV_SKIP_RDMA_TESTS=1 to skip the RDMA tests"
        ),
    }
}

pub fn loopback() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Deterministic content of byte stream position `word * 8`: cheap to generate and to check.
#[inline]
pub fn pattern_word(word: u64) -> u64 {
    let mut z = word.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `buf` with the stream's bytes starting at `offset` (a multiple of 8).
pub fn fill_pattern(offset: u64, buf: &mut [u8]) {
    let first = offset / 8;
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = pattern_word(first + i as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Checks `buf` against the stream at `offset`; the index of the first bad byte otherwise.
pub fn check_pattern(offset: u64, buf: &[u8]) -> Result<(), usize> {
    let first = offset / 8;
    for (i, chunk) in buf.chunks(8).enumerate() {
        let w = pattern_word(first + i as u64).to_le_bytes();
        if chunk != &w[..chunk.len()] {
            let j = chunk.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
            return Err(i * 8 + j);
        }
    }
    Ok(())
}

/// How a loop sleeps when its queues are drained.
pub enum Waiter {
    /// `fi_trywait`, then `poll(2)` on the CQ fd (`CompletionQueue::wait`).
    Fd,
    /// `fi_trywait` over CQ and EQ, then a mio poll with both fds registered (edge-triggered).
    Mio {
        poll: Poll,
        events: Events,
        /// Times the poll returned with events.
        wakeups: u64,
        /// Times `fi_trywait` said "not yet, read again".
        trywait_refusals: u64,
    },
}

const CQ_TOKEN: Token = Token(1);
const EQ_TOKEN: Token = Token(2);

impl Waiter {
    pub fn mio(conn: &Connection) -> Waiter {
        let poll = Poll::new().unwrap();
        let cq_fd = conn.cq.as_raw_fd();
        let eq_fd = conn.eq.as_raw_fd();
        poll.registry()
            .register(&mut SourceFd(&cq_fd), CQ_TOKEN, Interest::READABLE)
            .unwrap();
        poll.registry()
            .register(&mut SourceFd(&eq_fd), EQ_TOKEN, Interest::READABLE)
            .unwrap();
        Waiter::Mio {
            poll,
            events: Events::with_capacity(8),
            wakeups: 0,
            trywait_refusals: 0,
        }
    }

    /// Called when both queues were just drained empty and nothing can be posted: sleeps until
    /// an fd is readable. Fails if nothing arrives within [`STALL_TIMEOUT`] — with work
    /// outstanding that means a lost wake-up (or a dead peer that raised no event).
    fn sleep(&mut self, conn: &Connection) -> Result<(), String> {
        match self {
            Waiter::Fd => {
                if !conn
                    .fabric
                    .trywait(&[&conn.cq, &conn.eq])
                    .map_err(|e| e.to_string())?
                {
                    return Ok(());
                }
                let mut fds = [
                    libc::pollfd {
                        fd: conn.cq.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: conn.eq.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: two valid pollfds.
                let ret =
                    unsafe { libc::poll(fds.as_mut_ptr(), 2, STALL_TIMEOUT.as_millis() as i32) };
                if ret == 0 {
                    return Err(format!("no completion or event within {STALL_TIMEOUT:?}"));
                }
                Ok(())
            }
            Waiter::Mio {
                poll,
                events,
                wakeups,
                trywait_refusals,
            } => {
                if !conn
                    .fabric
                    .trywait(&[&conn.cq, &conn.eq])
                    .map_err(|e| e.to_string())?
                {
                    *trywait_refusals += 1;
                    return Ok(());
                }
                poll.poll(events, Some(STALL_TIMEOUT))
                    .map_err(|e| e.to_string())?;
                if events.is_empty() {
                    // Stranded? Show whether a completion was sitting there unannounced.
                    let mut stranded = Vec::new();
                    let _ = conn.cq.read(&mut stranded, 16);
                    return Err(format!(
                        "mio poll slept {STALL_TIMEOUT:?} with work outstanding; \
                         {} completion(s) were waiting unannounced",
                        stranded.len()
                    ));
                }
                *wakeups += 1;
                Ok(())
            }
        }
    }
}

/// Drains the connection's EQ: an `FI_SHUTDOWN` or an error event ends the transfer.
fn check_eq(conn: &Connection) -> Result<(), String> {
    loop {
        match conn.eq.read() {
            Ok(None) => return Ok(()),
            Ok(Some(CmEvent::Shutdown { .. })) => return Err("peer shut down (FI_SHUTDOWN)".into()),
            Ok(Some(_)) => {}
            Err(e) => return Err(format!("event queue: {e}")),
        }
    }
}

/// Transfer parameters.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    pub slots: u32,
    pub slot_size: u32,
    pub total: u64,
    pub window: u32,
}

impl RingConfig {
    pub fn chunks(&self) -> u64 {
        self.total.div_ceil(u64::from(self.slot_size))
    }

    pub fn chunk_len(&self, seq: u64) -> usize {
        let start = seq * u64::from(self.slot_size);
        (self.total - start).min(u64::from(self.slot_size)) as usize
    }
}

/// The replica's side: everything registered and (on FI_RX_CQ_DATA providers) pre-posted
/// before `fi_connect`.
pub struct RingReceiver {
    pub conn: Connection,
    pub ring: MemoryRegion,
    credits: MemoryRegion,
    pub config: RingConfig,
}

/// Receives seen by the replica.
#[derive(Debug, Default)]
pub struct ReceiverStats {
    pub chunks: u64,
    pub bytes: u64,
}

const CREDIT_BYTES: usize = 8;

impl RingReceiver {
    pub fn connect(
        lib: &Arc<Library>,
        addr: std::net::SocketAddr,
        config: RingConfig,
        token: [u8; 16],
    ) -> Result<RingReceiver, FabricError> {
        let cq_size = (config.slots as usize * 4).max(64);
        let mut conn = Connection::prepare(lib, PROVIDER, addr, cq_size)?;
        let ring = conn.domain.register(
            config.slots as usize * config.slot_size as usize,
            Access::REMOTE_WRITE,
        )?;
        let credits = conn
            .domain
            .register(2 * config.slots as usize * CREDIT_BYTES, Access::SEND)?;
        if conn.endpoint.requirements().prepost_receives {
            for i in 0..config.slots {
                conn.endpoint.recv_for_immediate(u64::from(i))?;
            }
        }
        let descriptor = RingDescriptor {
            addr: ring.remote_addr(),
            key: ring.key(),
            slots: config.slots,
            slot_size: config.slot_size,
            token,
            lane: 0,
            lanes: 1,
        };
        conn.connect(&descriptor.encode(), SETUP_TIMEOUT)?;
        Ok(RingReceiver {
            conn,
            ring,
            credits,
            config,
        })
    }

    /// Runs until `config.total` bytes have arrived, calling `consume(seq, bytes)` per chunk
    /// (in order) before returning its credit. Any error, shutdown, or stall is an `Err`.
    pub fn run(
        &mut self,
        waiter: &mut Waiter,
        mut consume: impl FnMut(u64, &[u8]) -> Result<(), String>,
    ) -> Result<ReceiverStats, String> {
        let chunks = self.config.chunks();
        let slots = u64::from(self.config.slots);
        let credit_slots = 2 * slots;
        let mut stats = ReceiverStats::default();
        let (mut credits_sent, mut credits_done) = (0u64, 0u64);
        let mut pending: VecDeque<Completion> = VecDeque::new();
        let mut batch = Vec::with_capacity(64);
        let prepost = self.conn.endpoint.requirements().prepost_receives;
        while stats.chunks < chunks || credits_done < credits_sent {
            if pending.is_empty() {
                batch.clear();
                self.conn
                    .cq
                    .read(&mut batch, 64)
                    .map_err(|e| format!("receiver: {e}"))?;
                pending.extend(batch.drain(..));
            }
            if pending.is_empty() {
                check_eq(&self.conn)?;
                waiter.sleep(&self.conn)?;
                continue;
            }
            while let Some(c) = pending.pop_front() {
                match c.kind() {
                    CompletionKind::Send => credits_done += 1,
                    CompletionKind::RemoteWrite => {
                        let seq = stats.chunks;
                        let imm = c.immediate.ok_or("remote write without immediate")?;
                        if imm != seq {
                            return Err(format!(
                                "immediate {imm} arrived, expected {seq} (out of order)"
                            ));
                        }
                        let slot = (seq % slots) as usize * self.config.slot_size as usize;
                        let len = self.config.chunk_len(seq);
                        consume(seq, self.ring.bytes(slot..slot + len))?;
                        stats.chunks += 1;
                        stats.bytes += len as u64;
                        if prepost {
                            self.conn
                                .endpoint
                                .recv_for_immediate(c.tag)
                                .map_err(|e| e.to_string())?;
                        }
                        // The slot is consumed: return its credit. The credit buffer slot is
                        // reused only once its previous send has completed.
                        let at = (credits_sent % credit_slots) as usize * CREDIT_BYTES;
                        loop {
                            if credits_sent - credits_done < credit_slots {
                                self.credits
                                    .bytes_mut(at..at + CREDIT_BYTES)
                                    .unwrap()
                                    .copy_from_slice(&seq.to_le_bytes());
                                match self.conn.endpoint.send(
                                    &self.credits,
                                    at..at + CREDIT_BYTES,
                                    seq,
                                ) {
                                    Ok(()) => break,
                                    Err(e) if e.is_would_block() => {}
                                    Err(e) => return Err(format!("credit send: {e}")),
                                }
                            }
                            batch.clear();
                            self.conn
                                .cq
                                .read(&mut batch, 64)
                                .map_err(|e| format!("receiver: {e}"))?;
                            if batch.is_empty() {
                                check_eq(&self.conn)?;
                                waiter.sleep(&self.conn)?;
                            }
                            for c in batch.drain(..) {
                                if c.kind() == CompletionKind::Send {
                                    credits_done += 1;
                                } else {
                                    pending.push_back(c);
                                }
                            }
                        }
                        credits_sent += 1;
                    }
                    other => return Err(format!("unexpected completion {other:?}: {c:?}")),
                }
            }
        }
        Ok(stats)
    }
}

/// Produces the bytes of a chunk: `fill(stream offset, buffer)`.
pub type Fill<'a> = &'a mut dyn FnMut(u64, &mut [u8]);

/// The master's side.
pub struct RingSender {
    pub conn: Connection,
    pub ring: RingDescriptor,
    source: MemoryRegion,
    credit_rx: MemoryRegion,
    pub window: u32,
}

impl RingSender {
    /// Accepts one connection on `listener`, checks the ring descriptor's token, answers with
    /// an [`AcceptDescriptor`].
    pub fn accept(
        listener: &Listener,
        window: u32,
        token: [u8; 16],
    ) -> Result<RingSender, FabricError> {
        let request = listener.next_request(SETUP_TIMEOUT)?;
        let ring = match RingDescriptor::decode(&request.private_data) {
            Ok(ring) => ring,
            Err(e) => {
                listener.pep.reject(request, b"bad ring")?;
                return Err(e.into());
            }
        };
        if ring.token != token {
            listener.pep.reject(request, b"bad token")?;
            return Err(FabricError::Invalid(
                "connection with an unknown token".into(),
            ));
        }
        let window = window.min(ring.slots);
        let cq_size = (ring.slots as usize * 4).max(64);
        let reply = AcceptDescriptor { token, window }.encode();
        let conn = listener.accept(request, &reply, cq_size, SETUP_TIMEOUT)?;
        let source = conn
            .domain
            .register(window as usize * ring.slot_size as usize, Access::WRITE)?;
        let credit_rx = conn
            .domain
            .register(ring.slots as usize * CREDIT_BYTES, Access::RECV)?;
        for i in 0..ring.slots as usize {
            conn.endpoint.recv(
                &credit_rx,
                i * CREDIT_BYTES..(i + 1) * CREDIT_BYTES,
                i as u64,
            )?;
        }
        Ok(RingSender {
            conn,
            ring,
            source,
            credit_rx,
            window,
        })
    }

    /// Fills the whole source buffer once with the test pattern (for runs without `fill`).
    pub fn prefill_source(&mut self) {
        let len = self.source.len();
        fill_pattern(0, self.source.bytes_mut(0..len).unwrap());
    }

    /// Pushes `total` bytes; `fill(offset, buf)` produces each chunk (None: send the source
    /// buffer as is, for the benchmark). `remote_key` overrides the ring's key (to test a bad
    /// key). Returns when every chunk's credit is back.
    pub fn run(
        &mut self,
        total: u64,
        waiter: &mut Waiter,
        mut fill: Option<Fill<'_>>,
        remote_key: Option<u64>,
    ) -> Result<u64, String> {
        let c = u64::from(self.ring.slot_size);
        let chunks = total.div_ceil(c);
        let window = u64::from(self.window);
        let key = remote_key.unwrap_or(self.ring.key);
        let (mut next, mut written, mut credited) = (0u64, 0u64, 0u64);
        let mut completions = Vec::with_capacity(64);
        let ep = &self.conn.endpoint;
        while credited < chunks {
            let mut progressed = false;
            while next < chunks && next - credited < window && next - written < window {
                let src = (next % window) as usize * c as usize;
                let len = (total - next * c).min(c) as usize;
                if let Some(fill) = fill.as_mut() {
                    fill(next * c, self.source.bytes_mut(src..src + len).unwrap());
                }
                match ep.write_data(
                    &self.source,
                    src..src + len,
                    next,
                    self.ring
                        .slot_addr((next % u64::from(self.ring.slots)) as u32),
                    key,
                    next,
                ) {
                    Ok(()) => {
                        next += 1;
                        progressed = true;
                    }
                    Err(e) if e.is_would_block() => break,
                    Err(e) => return Err(format!("fi_writedata: {e}")),
                }
            }
            completions.clear();
            self.conn
                .cq
                .read(&mut completions, 64)
                .map_err(|e| format!("sender: {e}"))?;
            for comp in &completions {
                match comp.kind() {
                    CompletionKind::Write => written += 1,
                    CompletionKind::Recv => {
                        let at = comp.tag as usize * CREDIT_BYTES;
                        let seq = u64::from_le_bytes(
                            self.credit_rx
                                .bytes(at..at + CREDIT_BYTES)
                                .try_into()
                                .unwrap(),
                        );
                        if seq != credited {
                            return Err(format!("credit for {seq}, expected {credited}"));
                        }
                        credited += 1;
                        ep.recv(&self.credit_rx, at..at + CREDIT_BYTES, comp.tag)
                            .map_err(|e| format!("re-posting a credit receive: {e}"))?;
                    }
                    other => return Err(format!("unexpected completion {other:?}: {comp:?}")),
                }
            }
            if completions.is_empty() && !progressed {
                check_eq(&self.conn)?;
                waiter.sleep(&self.conn)?;
            }
        }
        Ok(credited)
    }
}
