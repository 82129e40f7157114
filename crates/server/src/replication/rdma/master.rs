//! The master's side of the RDMA full sync, run by the event loop.
//!
//! The listener's event queue and each transfer's event and completion
//! queues are `FI_WAIT_FD` queues whose fds sit in the reactor's `Poll`
//! (tokens in `TOKEN_BASE..TOKEN_END`; both fds of a transfer share its
//! token). A readiness event, or a tick while a pacing delay runs, calls
//! [`Server::rdma_event`]: it drains the EQ and the CQ until empty, posts
//! the writes the credits allow, and asks `fi_trywait` before going back to
//! sleep — `false` means something arrived meanwhile, so it drains again.
//! Nothing spins and no thread polls a queue.
//!
//! Source of the writes: the snapshot file is mapped (memmap2). A provider
//! that needs no registered local buffers (tcp: no `FI_MR_LOCAL`) is handed
//! each chunk straight from the mapping (`write_data_unregistered`; the
//! endpoint keeps the mapping alive until it closes): no copy on the master.
//! A provider with `FI_MR_LOCAL` (verbs), or `rdma-zero-copy no`, gets each
//! chunk copied into a registered bounce ring of `window` × C bytes first
//! (16 MiB at the defaults). Registering windows of the mapping instead
//! would save that copy on verbs too, but a region an endpoint has posted
//! from stays registered until the endpoint closes (see docs/fabric.md), so
//! the windows would pin the whole file by the end of the sync; the bounce
//! ring keeps pinned memory at a fixed 16 MiB per replica. Measured in
//! docs/benchmarks.md: on the tcp provider the copy cost ~0.2 s per GiB of
//! master CPU and halved the transfer rate.
//!
//! Endpoints: a replica may connect several endpoints for one sync
//! (`rdma-sync-endpoints` on the replica): each connection request carries
//! the offer's token, its index and the count. Each becomes a [`Transfer`]
//! (a lane) with its own queues, credits and window, writing the file's
//! chunks `lane`, `lane + N`, …; the sync is finished when every lane is,
//! and fails as a whole when one lane fails.
//!
//! Sequence: snapshot mapped → CRC64 on a helper thread (the loop keeps
//! serving) → `+RDMAFULLSYNC` with a one-time token (an *offer*) → the
//! replica's `FI_CONNREQ` carries that token, else `fi_reject` → transfer
//! → last credit back: the RDMA side is released, the replica is left in
//! `RdmaTransfer` until its `REPLCONF rdma-done`, then it goes online and
//! its buffered stream flows over TCP.

use super::{record_fallback, set_state, SharedStats, SyncState};
use crate::replication::master::ReplicaState;
use crate::server::Server;
use ferrokv_fabric::{
    AcceptDescriptor, Access, CmEvent, Completion, CompletionKind, Connection, Domain, FabricError,
    Library, Listener, MemoryRegion, RingDescriptor,
};
use mio::unix::SourceFd;
use mio::{Interest, Token};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Poll tokens of the RDMA queues: the listener's, then one per transfer.
pub const TOKEN_BASE: usize = usize::MAX - 64 - 4096;
pub const TOKEN_END: usize = usize::MAX - 64;
const LISTENER_TOKEN: usize = TOKEN_BASE;
const EQ_SIZE: usize = 64;
const CREDIT_BYTES: usize = 8;
/// A ring bigger than this is refused (pinned memory on both sides).
const MAX_RING_BYTES: u64 = 1 << 30;

/// An `+RDMAFULLSYNC` sent, its token not yet used by every endpoint the
/// replica connects (`rdma-sync-endpoints`; what connected so far is in
/// its [`Group`]).
struct Offer {
    client_id: u64,
    map: Arc<memmap2::Mmap>,
    issued: Instant,
}

/// A sync's endpoints taken together, from the first one's connection
/// request: it is done when every lane is, and fails with any of them.
struct Group {
    /// The endpoints the replica announced, and their slot size: chunks
    /// are cut alike for every endpoint.
    lanes: u8,
    slot_size: u32,
    /// Which of them connected (bit per lane).
    seen: u32,
    done: u8,
    started: Instant,
    /// The prefetch thread's progress counter, shared by the lanes.
    posted: Arc<std::sync::atomic::AtomicU64>,
    /// `rdma-autotune yes`: the writes in flight of every lane, tuned
    /// within the transfer (see [`RdmaMaster::tune_group`]).
    tuning: Option<WindowTuning>,
    /// Time the finished lanes spent copying into bounce rings (`None`:
    /// they wrote straight from the mapping).
    copy_time: Option<Duration>,
}

/// One endpoint (lane) of a replica's transfer in flight: it carries the
/// file's chunks `lane`, `lane + lanes`, `lane + 2 × lanes`, … into its
/// own ring, with its own credits; `next`, `written` and `credited` count
/// this lane's chunks.
struct Transfer {
    client_id: u64,
    lane: u64,
    lanes: u64,
    conn: Connection,
    ring: RingDescriptor,
    /// The registered copy ring, only where the provider needs registered
    /// local buffers (`FI_MR_LOCAL`: verbs); `None` writes straight from
    /// the mapping.
    bounce: Option<MemoryRegion>,
    credit_rx: MemoryRegion,
    map: Arc<memmap2::Mmap>,
    window: u64,
    chunks: u64,
    next: u64,
    written: u64,
    credited: u64,
    posted_at: VecDeque<Instant>,
    connected: bool,
    stalled: bool,
    started: Instant,
    last_progress: Instant,
    next_post: Instant,
    registered: bool,
    /// Time spent copying chunks into the bounce ring (logged at the end:
    /// the measured cost of not registering the mapping itself).
    copy_time: Duration,
    /// Bytes posted so far, for the prefetch thread (see [`prefetch`]).
    posted: Arc<std::sync::atomic::AtomicU64>,
}

/// Chunks credited across a transfer's lanes per window of its tuner.
const TUNE_WINDOW_CHUNKS: u64 = 32;

/// The tuning of one transfer's writes in flight W (1, 2, 4, … up to the
/// ring's K): the one knob the master holds that changes within a
/// transfer (the replica fixed N, K and C when it connected). Every
/// [`TUNE_WINDOW_CHUNKS`] credited chunks are a window of
/// `ferrokv_fabric::tune`; its decision applies to the next window, so a
/// 1 GiB sync in 2 MiB chunks gives it 16 windows to climb in.
struct WindowTuning {
    tuner: ferrokv_fabric::tune::Tuner,
    chunk: u32,
    started: Instant,
    credited_at_start: u64,
}

impl WindowTuning {
    fn new(slots: u32, chunk: u32) -> WindowTuning {
        use ferrokv_fabric::tune::{Limit, Param, Setting, Space, Tuner, TunerConfig};
        let mut values = vec![1u64];
        while values.last().is_some_and(|&w| w * 2 <= u64::from(slots)) {
            values.push(values.last().expect("non-empty") * 2);
        }
        if values.last() != Some(&u64::from(slots)) {
            values.push(u64::from(slots));
        }
        let top = values.len() - 1;
        let space = Space::new(
            vec![Param {
                name: "writes-in-flight",
                values,
            }],
            Limit::unlimited(),
        )
        .expect("a valid grid");
        WindowTuning {
            // It starts where an untuned transfer runs: W = K.
            tuner: Tuner::new(space, Setting(vec![top]), TunerConfig::default())
                .expect("the top of an unlimited grid"),
            chunk,
            started: Instant::now(),
            credited_at_start: 0,
        }
    }
}

/// A transfer's last credit came back; waiting for `REPLCONF rdma-done`.
struct Finished {
    bytes: u64,
    secs: f64,
}

/// Reads the mapped snapshot ahead of the writes, on a thread of its own:
/// where the file is not in the page cache (a BGSAVE the sync joined wrote
/// it with `rdb-direct-io yes`, or it was evicted since), the first touch of each page of the mapping
/// reads it from the disk, and inside `fi_writedata` on the loop that
/// would stall the loop and the transfer alike (the TCP sync's sender thread takes those faults itself).
/// The thread stays at most [`PREFETCH_AHEAD`] ahead of the bytes posted
/// (the returned counter) and ends with the transfer.
fn prefetch(map: Arc<memmap2::Mmap>) -> Arc<std::sync::atomic::AtomicU64> {
    use std::sync::atomic::Ordering;
    let posted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let progress = posted.clone();
    let spawned = std::thread::Builder::new()
        .name("rdma-prefetch".into())
        .spawn(move || {
            const STEP: usize = 2 << 20;
            let mut pos = 0usize;
            // Ends when the transfer (the counter's other owner) is gone.
            while pos < map.len() && Arc::strong_count(&progress) > 1 {
                let posted = progress.load(Ordering::Relaxed) as usize;
                if pos >= posted + PREFETCH_AHEAD {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                let end = (pos + STEP).min(map.len());
                let _ = map.advise_range(memmap2::Advice::WillNeed, pos, end - pos);
                let mut sum = 0u8;
                for page in (pos..end).step_by(4096) {
                    sum ^= map[page];
                }
                std::hint::black_box(sum);
                pos = end;
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("RDMA prefetch thread not started: {e}");
    }
    posted
}

/// How far the prefetch thread reads ahead of the posted writes.
const PREFETCH_AHEAD: usize = 64 << 20;

/// A snapshot mapped and its CRC64, for these replicas.
type CrcDone = (Vec<u64>, Arc<memmap2::Mmap>, u64);

pub struct RdmaMaster {
    listener: Listener,
    /// The address announced in `+RDMAFULLSYNC`.
    pub endpoint: SocketAddr,
    listener_registered: bool,
    offers: HashMap<[u8; 16], Offer>,
    transfers: slab::Slab<Transfer>,
    groups: HashMap<u64, Group>,
    finished: HashMap<u64, Finished>,
    crc_tx: Sender<CrcDone>,
    crc_rx: Receiver<CrcDone>,
    /// CRC threads running (the loop polls their channel meanwhile).
    crc_jobs: usize,
    chunk_delay: Duration,
    corrupt_chunk: i64,
    drop_endpoint: i64,
    /// `rdma-autotune`: tune each transfer's writes in flight.
    autotune: bool,
    /// `rdma-zero-copy`, as of the last connection request.
    zero_copy: bool,
    batch: Vec<Completion>,
}

/// Why a transfer failed: a short reason (counted) and the details (logged).
type Failure = (&'static str, String);

fn completion_failure(e: FabricError) -> Failure {
    match e {
        FabricError::Completion(c) => ("completion-error", c.to_string()),
        FabricError::Event(ev) => ("peer-shutdown", ev.to_string()),
        other => ("fabric-error", other.to_string()),
    }
}

impl RdmaMaster {
    /// Binds the listener on `rdma-bind`:`rdma-port`.
    pub fn bind(lib: &Arc<Library>, cfg: &super::RdmaConfig) -> Result<RdmaMaster, String> {
        let ip: std::net::IpAddr = cfg
            .bind
            .parse()
            .map_err(|e| format!("bad rdma-bind address {}: {e}", cfg.bind))?;
        let listener = Listener::bind(lib, cfg.provider(), SocketAddr::new(ip, cfg.port))
            .map_err(|e| e.to_string())?;
        let endpoint = listener.local_addr().map_err(|e| e.to_string())?;
        let (crc_tx, crc_rx) = channel();
        Ok(RdmaMaster {
            listener,
            endpoint,
            listener_registered: false,
            offers: HashMap::new(),
            transfers: slab::Slab::new(),
            groups: HashMap::new(),
            finished: HashMap::new(),
            crc_tx,
            crc_rx,
            crc_jobs: 0,
            chunk_delay: Duration::from_micros(cfg.chunk_delay_us),
            corrupt_chunk: cfg.debug_corrupt_chunk,
            drop_endpoint: cfg.debug_drop_endpoint,
            autotune: cfg.autotune,
            zero_copy: cfg.zero_copy,
            batch: Vec::with_capacity(64),
        })
    }

    /// Replicas with a transfer open (over one endpoint or several).
    pub fn transfers(&self) -> usize {
        self.groups.len()
    }

    /// Whether the loop must wake soon: a CRC is being computed, or a
    /// paced transfer waits for its next slot. Otherwise transfers wake the
    /// loop through their queues' fds alone.
    pub fn busy(&self) -> bool {
        self.crc_jobs > 0 || (!self.chunk_delay.is_zero() && !self.transfers.is_empty())
    }

    fn registry_add(reg: &mio::Registry, fds: &[i32], token: usize) -> std::io::Result<()> {
        for fd in fds {
            reg.register(&mut SourceFd(fd), Token(token), Interest::READABLE)?;
        }
        Ok(())
    }

    fn registry_remove(reg: Option<&mio::Registry>, t: &mut Transfer) {
        if let (Some(reg), true) = (reg, t.registered) {
            let _ = reg.deregister(&mut SourceFd(&t.conn.eq.as_raw_fd()));
            let _ = reg.deregister(&mut SourceFd(&t.conn.cq.as_raw_fd()));
        }
        t.registered = false;
    }

    /// Accepts a connection request whose token we issued (else rejects it).
    fn on_connreq(
        &mut self,
        req: ferrokv_fabric::ConnectionRequest,
        reg: Option<&mio::Registry>,
        stats: &SharedStats,
    ) -> Result<(), String> {
        let ring = match RingDescriptor::decode(&req.private_data) {
            Ok(r) => r,
            Err(e) => {
                let _ = self.listener.pep.reject(req, b"bad ring");
                stats.lock().expect("rdma stats").rejected_tokens += 1;
                return Err(format!("RDMA connection refused: {e}"));
            }
        };
        let Some(offer) = self.offers.get(&ring.token) else {
            let _ = self.listener.pep.reject(req, b"bad token");
            stats.lock().expect("rdma stats").rejected_tokens += 1;
            return Err("RDMA connection refused: unknown token".into());
        };
        let bytes = u64::from(ring.slots) * u64::from(ring.slot_size);
        if bytes > MAX_RING_BYTES {
            let _ = self.listener.pep.reject(req, b"ring too big");
            return Err(format!("RDMA connection refused: ring of {bytes} bytes"));
        }
        // Every endpoint of a sync names the same count and its own index,
        // once; each must carry at least one chunk.
        let total = (offer.map.len() as u64).div_ceil(u64::from(ring.slot_size));
        let lane_bit = 1u32 << ring.lane;
        let group = self.groups.get(&offer.client_id);
        if group.is_some_and(|g| {
            g.lanes != ring.lanes || g.slot_size != ring.slot_size || g.seen & lane_bit != 0
        }) || u64::from(ring.lanes) > total.max(1)
        {
            let _ = self.listener.pep.reject(req, b"bad lane");
            return Err(format!(
                "RDMA connection refused: endpoint {} of {} for a sync of {total} chunks",
                ring.lane, ring.lanes
            ));
        }
        let (lane, lanes) = (u64::from(ring.lane), u64::from(ring.lanes));
        let lane_chunks = total.saturating_sub(lane).div_ceil(lanes);
        let posted = group.map_or_else(|| prefetch(offer.map.clone()), |g| g.posted.clone());
        let (client_id, map) = (offer.client_id, offer.map.clone());
        let window = u64::from(ring.slots);
        let zero_copy = self.zero_copy;
        let fabric = self.listener.fabric.clone();
        let open = || -> Result<Transfer, FabricError> {
            let domain = Domain::open(&fabric, &req.info)?;
            let eq = fabric.event_queue(EQ_SIZE)?;
            let cq = domain.completion_queue((ring.slots as usize * 4).max(64))?;
            let endpoint = domain.endpoint(&req.info, &eq, &cq)?;
            let bounce = if endpoint.requirements().local_descriptors || !zero_copy {
                Some(domain.register(
                    window as usize * ring.slot_size as usize,
                    Access::WRITE | Access::SEND,
                )?)
            } else {
                None
            };
            let credit_rx = domain.register(ring.slots as usize * CREDIT_BYTES, Access::RECV)?;
            // Credits can come only after our writes, but post their
            // receives before accepting anyway: nothing may arrive unposted.
            for i in 0..ring.slots as usize {
                endpoint.recv(
                    &credit_rx,
                    i * CREDIT_BYTES..(i + 1) * CREDIT_BYTES,
                    i as u64,
                )?;
            }
            endpoint.accept(
                &AcceptDescriptor {
                    token: ring.token,
                    window: window as u32,
                }
                .encode(),
            )?;
            let now = Instant::now();
            Ok(Transfer {
                client_id,
                lane,
                lanes,
                conn: Connection {
                    fabric: fabric.clone(),
                    domain,
                    eq,
                    cq,
                    endpoint,
                    peer_data: Vec::new(),
                },
                ring,
                bounce,
                credit_rx,
                map: map.clone(),
                window,
                chunks: lane_chunks,
                next: 0,
                written: 0,
                credited: 0,
                posted_at: VecDeque::new(),
                connected: false,
                stalled: false,
                started: now,
                last_progress: now,
                next_post: now,
                registered: false,
                copy_time: Duration::ZERO,
                posted: posted.clone(),
            })
        };
        let mut t = open().map_err(|e| format!("accepting the RDMA connection: {e}"))?;
        let slot = self.transfers.vacant_key();
        if TOKEN_BASE + 1 + slot >= TOKEN_END {
            return Err("too many RDMA transfers".into());
        }
        if let Some(reg) = reg {
            Self::registry_add(
                reg,
                &[t.conn.eq.as_raw_fd(), t.conn.cq.as_raw_fd()],
                TOKEN_BASE + 1 + slot,
            )
            .map_err(|e| format!("registering the RDMA queues: {e}"))?;
            t.registered = true;
        }
        set_state(stats, SyncState::Connecting);
        self.transfers.insert(t);
        let autotune = self.autotune;
        let group = self.groups.entry(client_id).or_insert_with(|| Group {
            lanes: ring.lanes,
            slot_size: ring.slot_size,
            seen: 0,
            done: 0,
            started: Instant::now(),
            posted,
            copy_time: None,
            tuning: autotune.then(|| WindowTuning::new(ring.slots, ring.slot_size)),
        });
        group.seen |= lane_bit;
        if group.seen.count_ones() == u32::from(ring.lanes) {
            // Every endpoint is here: the token is spent.
            self.offers.remove(&ring.token);
        }
        Ok(())
    }

    /// Drives one transfer until its queues are empty and `fi_trywait`
    /// allows sleeping. `Ok(true)`: the last credit is back.
    fn pump(&mut self, slot: usize, stats: &SharedStats) -> Result<bool, Failure> {
        let delay = self.chunk_delay;
        let corrupt = self.corrupt_chunk;
        let drop_endpoint = self.drop_endpoint;
        let mut batch = std::mem::take(&mut self.batch);
        let t = &mut self.transfers[slot];
        let res = (|| loop {
            while let Some(ev) = t.conn.eq.read().map_err(completion_failure)? {
                match ev {
                    CmEvent::Connected { .. } => {
                        t.connected = true;
                        t.last_progress = Instant::now();
                        set_state(stats, SyncState::Transferring);
                    }
                    CmEvent::Shutdown { .. } => {
                        if t.credited == t.chunks {
                            return Ok(true);
                        }
                        return Err((
                            "peer-shutdown",
                            format!(
                                "the replica shut the connection down after {} of {} chunks",
                                t.credited, t.chunks
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            batch.clear();
            let n = t.conn.cq.read(&mut batch, 64).map_err(completion_failure)?;
            for c in &batch {
                match c.kind() {
                    CompletionKind::Write => t.written += 1,
                    CompletionKind::Recv => {
                        let at = c.tag as usize * CREDIT_BYTES;
                        let seq = u64::from_le_bytes(
                            t.credit_rx
                                .bytes(at..at + CREDIT_BYTES)
                                .try_into()
                                .expect("8 bytes"),
                        );
                        if seq != t.credited {
                            return Err((
                                "protocol",
                                format!("credit for chunk {seq}, expected {}", t.credited),
                            ));
                        }
                        t.credited += 1;
                        t.last_progress = Instant::now();
                        if let Some(at) = t.posted_at.pop_front() {
                            stats
                                .lock()
                                .expect("rdma stats")
                                .write_latency
                                .record(at.elapsed().as_micros() as u64);
                        }
                        if t.credited < t.chunks {
                            t.conn
                                .endpoint
                                .recv(&t.credit_rx, at..at + CREDIT_BYTES, c.tag)
                                .map_err(completion_failure)?;
                        }
                    }
                    _ => {}
                }
            }
            if t.credited == t.chunks {
                return Ok(true);
            }
            // The test fault hook: this endpoint dies mid-transfer.
            if t.lanes > 1 && drop_endpoint == t.lane as i64 && t.credited >= 2 {
                return Err((
                    "fabric-error",
                    format!("endpoint {} closed (rdma-debug-drop-endpoint)", t.lane),
                ));
            }
            let mut posted = false;
            let c = u64::from(t.ring.slot_size);
            let slots = u64::from(t.ring.slots);
            while t.connected
                && t.next < t.chunks
                && t.next - t.credited < t.window
                && t.next - t.written < t.window
                && Instant::now() >= t.next_post
            {
                // This lane's chunk `next` is the file's chunk `global`.
                let global = t.lane + t.next * t.lanes;
                let from = (global * c) as usize;
                let len = (t.map.len() - from).min(c as usize);
                let imm = t.next & 0xffff_ffff;
                let remote = t.ring.slot_addr((t.next % slots) as u32);
                let corrupt_this = corrupt >= 0 && global == corrupt as u64;
                let ep = &t.conn.endpoint;
                let res = match t.bounce.as_mut() {
                    Some(bounce) => {
                        // By the ring's K, which the bounce ring was sized
                        // for: the tuner may lower the window mid-transfer,
                        // and at most that many writes are in flight.
                        let src = (t.next % slots) as usize * c as usize;
                        let dst = bounce.bytes_mut(src..src + len).expect("an owned region");
                        let copy_started = Instant::now();
                        dst.copy_from_slice(&t.map[from..from + len]);
                        t.copy_time += copy_started.elapsed();
                        if corrupt_this {
                            dst[len / 2] ^= 0x5a;
                        }
                        ep.write_data(bounce, src..src + len, imm, remote, t.ring.key, t.next)
                    }
                    None if corrupt_this => {
                        // The test fault hook: a damaged copy of this chunk.
                        let mut bad = t.map[from..from + len].to_vec();
                        bad[len / 2] ^= 0x5a;
                        let bad = Arc::new(bad);
                        ep.write_data_unregistered(&bad, 0..len, imm, remote, t.ring.key, t.next)
                    }
                    None => ep.write_data_unregistered(
                        &t.map,
                        from..from + len,
                        imm,
                        remote,
                        t.ring.key,
                        t.next,
                    ),
                };
                match res {
                    Ok(()) => {
                        t.posted_at.push_back(Instant::now());
                        t.next += 1;
                        t.posted
                            .fetch_max((from + len) as u64, std::sync::atomic::Ordering::Relaxed);
                        posted = true;
                        if !delay.is_zero() {
                            t.next_post = Instant::now() + delay;
                        }
                    }
                    Err(e) if e.is_would_block() => break,
                    Err(e) => return Err(("fabric-error", format!("fi_writedata: {e}"))),
                }
            }
            let blocked = t.next < t.chunks && t.next - t.credited >= t.window;
            if blocked && !t.stalled {
                stats.lock().expect("rdma stats").credit_stalls += 1;
            }
            t.stalled = blocked;
            if n == 0 && !posted {
                match t.conn.fabric.trywait(&[&t.conn.cq, &t.conn.eq]) {
                    Ok(true) => return Ok(false),
                    Ok(false) => {}
                    Err(e) => return Err(("fabric-error", format!("fi_trywait: {e}"))),
                }
            }
        })();
        self.batch = batch;
        res
    }

    /// Releases a transfer's RDMA resources (queues out of the poll first).
    fn release(&mut self, slot: usize, reg: Option<&mio::Registry>) -> Transfer {
        let mut t = self.transfers.remove(slot);
        Self::registry_remove(reg, &mut t);
        t
    }

    /// `rdma-autotune`: when a window of credits is complete across the
    /// transfer's lanes, the tuner learns its throughput and sets every
    /// lane's writes in flight for the next one.
    fn tune_group(&mut self, client_id: u64, stats: &SharedStats) {
        let Some(tuning) = self
            .groups
            .get_mut(&client_id)
            .and_then(|g| g.tuning.as_mut())
        else {
            return;
        };
        let credited: u64 = self
            .transfers
            .iter()
            .filter(|(_, t)| t.client_id == client_id)
            .map(|(_, t)| t.credited)
            .sum();
        let chunks = credited.saturating_sub(tuning.credited_at_start);
        if chunks < TUNE_WINDOW_CHUNKS {
            return;
        }
        let secs = tuning.started.elapsed().as_secs_f64();
        let chunk = u64::from(tuning.chunk);
        tuning.tuner.record(&ferrokv_fabric::tune::Features {
            bytes: chunks * chunk,
            ops: chunks,
            seconds: secs,
            mean_payload: chunk as f64,
            ..Default::default()
        });
        tuning.started = Instant::now();
        tuning.credited_at_start = credited;
        let w = tuning.tuner.current_values()[0];
        for (_, t) in self.transfers.iter_mut() {
            if t.client_id == client_id {
                t.window = w.min(u64::from(t.ring.slots));
            }
        }
        let mut s = stats.lock().expect("rdma stats");
        s.tune_transfer_windows += 1;
        s.tune_writes_in_flight = w;
    }

    /// Forgets everything about a replica (its connection closed, or one
    /// of its endpoints failed: the whole sync fails with it).
    pub fn forget(&mut self, client_id: u64, reg: Option<&mio::Registry>) -> bool {
        self.offers.retain(|_, o| o.client_id != client_id);
        self.finished.remove(&client_id);
        self.groups.remove(&client_id);
        let slots: Vec<usize> = self
            .transfers
            .iter()
            .filter(|(_, t)| t.client_id == client_id)
            .map(|(s, _)| s)
            .collect();
        let had = !slots.is_empty();
        for s in slots {
            drop(self.release(s, reg));
        }
        had
    }
}

impl Server {
    /// Whether replicas asking `capa rdma` get `+RDMAFULLSYNC`.
    pub fn rdma_offered(&self) -> bool {
        self.repl.rdma.master.is_some()
    }

    /// A disk snapshot is ready for these RDMA replicas: its CRC64 is found
    /// off the loop ([`file_crc`]); [`Server::rdma_tick`] sends the offers.
    pub fn rdma_snapshot_ready(&mut self, ids: Vec<u64>, map: Arc<memmap2::Mmap>) {
        let Some(m) = self.repl.rdma.master.as_mut() else {
            return;
        };
        m.crc_jobs += 1;
        let tx = m.crc_tx.clone();
        let waiting = ids.clone();
        let spawned = std::thread::Builder::new()
            .name("rdma-crc".into())
            .spawn(move || {
                let crc = file_crc(&map);
                let _ = tx.send((ids, map, crc));
            });
        if let Err(e) = spawned {
            tracing::warn!("Can't start the CRC thread of an RDMA sync: {e}");
            m.crc_jobs -= 1;
            // They retry (over RDMA or not, as their next attempt decides).
            for id in waiting {
                self.drop_replica(id);
            }
        }
    }

    /// Before the loop sleeps: register the listener, send offers whose
    /// CRC is ready, drive paced transfers.
    pub fn rdma_tick(&mut self) {
        let Some(m) = self.repl.rdma.master.as_mut() else {
            return;
        };
        if !m.listener_registered {
            if let Some(reg) = self.repl.registry.as_ref() {
                match RdmaMaster::registry_add(reg, &[m.listener.eq.as_raw_fd()], LISTENER_TOKEN) {
                    Ok(()) => m.listener_registered = true,
                    Err(e) => tracing::warn!("Can't register the RDMA listener: {e}"),
                }
            }
            if m.listener_registered {
                // Requests that came before the registration.
                self.rdma_event(LISTENER_TOKEN);
            }
        }
        let m = self.repl.rdma.master.as_mut().expect("checked");
        m.chunk_delay = Duration::from_micros(self.config.repl.rdma.chunk_delay_us);
        let ready: Vec<CrcDone> = m.crc_rx.try_iter().collect();
        m.crc_jobs -= ready.len();
        for (ids, map, crc) in ready {
            for id in ids {
                self.rdma_offer(id, map.clone(), crc);
            }
        }
        let m = self.repl.rdma.master.as_ref().expect("checked");
        if self.config.repl.rdma.chunk_delay_us > 0 {
            let slots: Vec<usize> = m.transfers.iter().map(|(s, _)| s).collect();
            for s in slots {
                self.rdma_event(TOKEN_BASE + 1 + s);
            }
        }
    }

    /// Sends `+RDMAFULLSYNC` to a replica waiting for the snapshot.
    fn rdma_offer(&mut self, id: u64, map: Arc<memmap2::Mmap>, crc: u64) {
        let replid = self.repl.replid.clone();
        let Some(r) = self
            .repl
            .master
            .replicas
            .iter_mut()
            .find(|r| r.client_id == id)
        else {
            return;
        };
        if r.state != ReplicaState::WaitEnd {
            return;
        }
        let token: [u8; 16] = rand::random();
        let m = self
            .repl
            .rdma
            .master
            .as_mut()
            .expect("offers need a master");
        let line = format!(
            "+RDMAFULLSYNC {replid} {} {} {} {crc:016x} {}\r\n",
            r.sync_offset,
            m.endpoint,
            map.len(),
            hex(&token)
        );
        r.state = ReplicaState::RdmaTransfer;
        r.ack_time = Instant::now();
        m.offers.insert(
            token,
            Offer {
                client_id: id,
                map,
                issued: Instant::now(),
            },
        );
        tracing::info!(
            "Offering replica id={id} an RDMA full sync from {}",
            m.endpoint
        );
        set_state(&self.repl.rdma.stats, SyncState::Connecting);
        self.write_to_client(id, line.as_bytes());
    }

    /// Appends bytes to a client's output and queues it for writing.
    pub(crate) fn write_to_client(&mut self, id: u64, bytes: &[u8]) {
        let Some(t) = crate::replication::master::token_of(self, id) else {
            return;
        };
        if let Some(Some(c)) = self.clients.get_mut(t) {
            c.out.buf.extend_from_slice(bytes);
            if !c.pending_write {
                c.pending_write = true;
                self.pending_writes.push(t);
            }
        }
    }

    /// A readiness event (or a pacing tick) on an RDMA queue.
    pub fn rdma_event(&mut self, token: usize) {
        let stats = self.repl.rdma.stats.clone();
        let reg = self.repl.registry.as_ref().and_then(|r| r.try_clone().ok());
        let zero_copy = self.config.repl.rdma.zero_copy;
        let autotune = self.config.repl.rdma.autotune;
        let Some(m) = self.repl.rdma.master.as_mut() else {
            return;
        };
        m.zero_copy = zero_copy;
        m.autotune = autotune;
        if token == LISTENER_TOKEN {
            // Client connections (a stream's token) go to the connection layer.
            let mut streams = Vec::new();
            loop {
                loop {
                    match m.listener.eq.read() {
                        Ok(Some(CmEvent::ConnectionRequest(req)))
                            if RingDescriptor::decode(&req.private_data)
                                .is_ok_and(|r| r.token == ferrokv_fabric::STREAM_TOKEN) =>
                        {
                            streams.push(req);
                        }
                        Ok(Some(CmEvent::ConnectionRequest(req))) => {
                            if let Err(e) = m.on_connreq(req, reg.as_ref(), &stats) {
                                tracing::warn!("{e}");
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!("RDMA listener event: {e}");
                        }
                    }
                }
                match m.listener.eq.trywait() {
                    Ok(false) => continue,
                    _ => break,
                }
            }
            // A new transfer may already have events.
            let slots: Vec<usize> = m.transfers.iter().map(|(s, _)| s).collect();
            if !streams.is_empty() {
                let m = self.repl.rdma.master.take().expect("checked");
                for req in streams {
                    self.accept_rdma_request(&m.listener, req);
                }
                self.repl.rdma.master = Some(m);
            }
            for s in slots {
                self.rdma_pump(s);
            }
            return;
        }
        self.rdma_pump(token - TOKEN_BASE - 1);
    }

    fn rdma_pump(&mut self, slot: usize) {
        let stats = self.repl.rdma.stats.clone();
        let Some(m) = self.repl.rdma.master.as_mut() else {
            return;
        };
        if !m.transfers.contains(slot) {
            return;
        }
        // Test pacing and fault hooks follow CONFIG SET.
        m.chunk_delay = Duration::from_micros(self.config.repl.rdma.chunk_delay_us);
        m.corrupt_chunk = self.config.repl.rdma.debug_corrupt_chunk;
        m.drop_endpoint = self.config.repl.rdma.debug_drop_endpoint;
        let res = m.pump(slot, &stats);
        if res.is_ok() {
            let id = m.transfers[slot].client_id;
            m.tune_group(id, &stats);
        }
        let reg = self.repl.registry.as_ref();
        match res {
            Ok(false) => {}
            Ok(true) => {
                let t = m.release(slot, reg);
                let id = t.client_id;
                tracing::debug!(
                    "RDMA endpoint {} of {} to replica id={id} done in {:.3}s",
                    t.lane,
                    t.lanes,
                    t.started.elapsed().as_secs_f64()
                );
                let Some(g) = m.groups.get_mut(&id) else {
                    return;
                };
                g.done += 1;
                if t.bounce.is_some() {
                    *g.copy_time.get_or_insert(Duration::ZERO) += t.copy_time;
                }
                if g.done < g.lanes {
                    return;
                }
                let (lanes, started) = (g.lanes, g.started);
                if let Some(t) = g.tuning.as_ref() {
                    let r = t.tuner.report();
                    tracing::info!(
                        "RDMA writes in flight for replica id={id}: {} at the end, after {} windows ({} explorations, {} rejected, converged: {})",
                        t.tuner.current_values()[0],
                        r.windows,
                        r.explorations,
                        r.rejections,
                        r.converged
                    );
                }
                let source = match g.copy_time {
                    Some(copy) => format!(
                        "{:.1} ms of it copying into the bounce ring",
                        copy.as_secs_f64() * 1e3
                    ),
                    None => "written from the mapping, no copy".to_string(),
                };
                m.groups.remove(&id);
                let bytes = t.map.len() as u64;
                let secs = started.elapsed().as_secs_f64();
                tracing::info!(
                    "RDMA transfer to replica id={id} done: {bytes} bytes over {lanes} endpoint(s) in {secs:.3}s ({:.1} MB/s, {source}); waiting for rdma-done",
                    bytes as f64 / 1e6 / secs.max(1e-9),
                );
                m.finished.insert(id, Finished { bytes, secs });
                stats.lock().expect("rdma stats").last_sync_endpoints = u32::from(lanes);
                set_state(&stats, SyncState::Verifying);
            }
            Err((reason, detail)) => {
                let t = m.release(slot, reg);
                let (id, lane, lanes) = (t.client_id, t.lane, t.lanes);
                drop(t);
                // One endpoint failing fails the sync: its other endpoints go too.
                m.forget(id, reg);
                record_fallback(
                    &stats,
                    reason,
                    &format!("replica id={id}, endpoint {lane} of {lanes}: {detail}"),
                );
                // The replica retries, over TCP (it saw the failure too).
                self.drop_replica(id);
            }
        }
    }

    /// `REPLCONF rdma-done` (no reply: the stream follows on this link).
    /// `c` is the replica's client, out of the client table while its
    /// command runs: the buffered stream goes straight to its output.
    pub fn rdma_done(&mut self, c: &mut crate::net::client::Client) {
        let id = c.id;
        // The last credit and rdma-done can be ready in the same turn, the
        // TCP one handled first: finish the transfer's queue before deciding.
        let open: Vec<usize> = self
            .repl
            .rdma
            .master
            .as_ref()
            .map(|m| {
                m.transfers
                    .iter()
                    .filter(|(_, t)| t.client_id == id)
                    .map(|(s, _)| s)
                    .collect()
            })
            .unwrap_or_default();
        for s in open {
            self.rdma_pump(s);
        }
        let stats = self.repl.rdma.stats.clone();
        let finished = self
            .repl
            .rdma
            .master
            .as_mut()
            .and_then(|m| m.finished.remove(&id));
        let Some(r) = self
            .repl
            .master
            .replicas
            .iter_mut()
            .find(|r| r.client_id == id)
        else {
            return;
        };
        let Some(f) = finished.filter(|_| r.state == ReplicaState::RdmaTransfer) else {
            tracing::warn!(
                "REPLCONF rdma-done from replica id={id} without a finished RDMA transfer"
            );
            self.drop_replica(id);
            return;
        };
        r.state = ReplicaState::Online;
        r.ack_time = Instant::now();
        let pending = std::mem::take(&mut r.pending);
        super::record_done(&stats, f.bytes, f.secs);
        self.repl.stats.rdb_bytes_sent += f.bytes;
        tracing::info!(
            "Synchronization with replica id={id} succeeded over RDMA ({} bytes); streaming {} buffered bytes",
            f.bytes,
            pending.len()
        );
        c.out.buf.extend_from_slice(&pending);
    }

    /// A replica's connection closed: its offer or transfer goes too.
    pub fn rdma_replica_closed(&mut self, id: u64) {
        let reg = self.repl.registry.as_ref().and_then(|r| r.try_clone().ok());
        let stats = self.repl.rdma.stats.clone();
        if let Some(m) = self.repl.rdma.master.as_mut() {
            if m.forget(id, reg.as_ref()) {
                record_fallback(
                    &stats,
                    "replica-disconnected",
                    &format!("replica id={id} closed its link mid-transfer"),
                );
            }
        }
    }

    /// Once a second: `\n` keepalives to RDMA replicas waiting for the
    /// snapshot, and the timeouts of offers and stalled transfers.
    pub fn rdma_cron(&mut self) {
        if self.repl.rdma.master.is_none() {
            return;
        }
        let waiting: Vec<u64> = self
            .repl
            .master
            .replicas
            .iter()
            .filter(|r| r.rdma && r.state == ReplicaState::WaitEnd)
            .map(|r| r.client_id)
            .collect();
        let idle = self
            .repl
            .rdma
            .master
            .as_ref()
            .is_some_and(|m| m.transfers.is_empty());
        if !waiting.is_empty() && idle {
            set_state(&self.repl.rdma.stats, SyncState::WaitingSnapshot);
        }
        for id in waiting {
            self.write_to_client(id, b"\n");
        }
        let timeout = Duration::from_secs(self.config.repl.timeout.max(1));
        let stats = self.repl.rdma.stats.clone();
        let reg = self.repl.registry.as_ref().and_then(|r| r.try_clone().ok());
        let m = self.repl.rdma.master.as_mut().expect("checked");
        let mut doomed = Vec::new();
        m.offers.retain(|_, o| {
            let keep = o.issued.elapsed() < timeout;
            if !keep {
                doomed.push(o.client_id);
            }
            keep
        });
        let mut stuck: Vec<u64> = m
            .transfers
            .iter()
            .filter(|(_, t)| t.last_progress.elapsed() >= timeout)
            .map(|(_, t)| t.client_id)
            .collect();
        stuck.sort_unstable();
        stuck.dedup();
        for id in stuck {
            m.forget(id, reg.as_ref());
            doomed.push(id);
        }
        for id in doomed {
            record_fallback(
                &stats,
                "timeout",
                &format!("replica id={id}: no RDMA progress within repl-timeout"),
            );
            self.drop_replica(id);
        }
    }
}

/// The CRC64 of a whole snapshot file, as the replica computes it over
/// what it receives. An RDB written with `rdbchecksum yes` ends with the
/// CRC64 of everything before its last 8 bytes, so the whole file's CRC is
/// that value continued over those 8 bytes: no pass over a gigabyte before
/// the offer. Trusting the trailer is safe: if the body on disk no longer
/// matches it, the replica's CRC differs and nothing is installed (and the
/// RDB loader would refuse the body anyway). A file without a checksum
/// (trailer 0) is checksummed in full.
fn file_crc(file: &[u8]) -> u64 {
    if file.len() > 9 + 8 && file.starts_with(b"REDIS") {
        let trailer = &file[file.len() - 8..];
        let stored = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
        if stored != 0 {
            return ferrokv_rdb::crc64::crc64(stored, trailer);
        }
    }
    ferrokv_rdb::crc64::crc64(0, file)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::file_crc;
    use ferrokv_rdb::crc64::crc64;

    fn rdb(body_len: usize, checksum: bool) -> Vec<u8> {
        let mut f = b"REDIS0010".to_vec();
        f.extend((0..body_len).map(|i| (i * 31 % 251) as u8));
        f.push(0xff);
        let trailer = if checksum { crc64(0, &f) } else { 0 };
        f.extend_from_slice(&trailer.to_le_bytes());
        f
    }

    #[test]
    fn the_trailer_gives_the_whole_file_crc() {
        for len in [0, 1, 100, 5000] {
            let f = rdb(len, true);
            assert_eq!(file_crc(&f), crc64(0, &f), "len {len}");
            let f = rdb(len, false);
            assert_eq!(file_crc(&f), crc64(0, &f), "len {len} without checksum");
        }
    }

    #[test]
    fn a_body_that_no_longer_matches_its_trailer_is_caught_by_the_receiver() {
        let mut f = rdb(1000, true);
        let offered = file_crc(&f);
        f[500] ^= 1;
        assert_ne!(crc64(0, &f), offered);
    }
}
