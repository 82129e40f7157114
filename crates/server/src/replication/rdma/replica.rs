//! The replica's side of the RDMA full sync, on its `repl-sync` thread.
//!
//! That thread already runs the blocking handshake and the snapshot
//! reception of a TCP sync while the event loop keeps serving the old data,
//! so the RDMA receive runs there too: it sleeps in `poll(2)` on its
//! connection's EQ and CQ fds (after `fi_trywait`, never spinning), with a
//! short timeout only to notice a cancelled sync or a stalled master.
//!
//! Endpoints: the sync runs over N connections to the master at once
//! (`rdma-sync-endpoints`, N shrunk to the chunk count), each with its own
//! ring and credits, all sharing the offer's token: chunk `g` of the file
//! travels on endpoint `g mod N` as its chunk `g / N`. The receive loop
//! reads every endpoint's completion queue and hands chunks to the
//! consumers in the file's order, so the file, its CRC64 and the streaming
//! load see one sequence whatever N is; one endpoint failing fails the
//! sync (and the next attempt goes over TCP).
//!
//! Ring: K slots × C bytes per endpoint, registered once (`rdma-ring-slots`,
//! `rdma-chunk-size`, K shrunk for small snapshots). For each write that
//! lands (immediate = its 32-bit sequence) the slot goes to two consumer
//! threads: a writer, which writes it to the temp file (`O_DIRECT` from
//! the ring where it can) and folds it into the CRC64, and a loader, which
//! decodes it into the new keyspace; only once both are done with it is
//! its credit returned with an 8-byte `fi_send`. The consumers are threads
//! because the tcp provider moves data only while the target reads its CQ:
//! consuming on the reading thread serialised transfer and disk (measured
//! in docs/rdma.md). The master never has more than K writes in flight, so
//! a slot is never overwritten before it has been consumed.

use super::{set_state, SharedStats, SyncState};
use crate::persistence::direct::SnapshotWriter;
use crate::persistence::load::StreamLoad;
use ferrokv_fabric::{
    AcceptDescriptor, Access, CmEvent, Completion, CompletionKind, Connection, FabricError,
    Library, RingDescriptor,
};
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the sync thread needs for an RDMA attempt.
pub struct ReplicaRdma {
    pub lib: Arc<Library>,
    pub provider: Option<String>,
    pub slots: u32,
    pub chunk_size: u32,
    /// Endpoints the sync runs over (`rdma-sync-endpoints`).
    pub endpoints: u32,
    /// The master as the replica dials it (`host:port`): the key of what
    /// the tuner learns.
    pub peer: String,
    /// `rdma-autotune yes`: N, K and C come from the tuner, which learns
    /// from the sync's outcome.
    pub tuning: Option<Arc<std::sync::Mutex<super::tune::SyncTuning>>>,
    pub stats: SharedStats,
    /// Set when this attempt fails: the next ones go over TCP.
    pub fallback: Arc<AtomicBool>,
    /// The rings of the link's stream (`rdma-conn-slots`, `rdma-conn-slot-size`).
    pub link: ferrokv_fabric::StreamConfig,
}

/// A parsed `+RDMAFULLSYNC <replid> <offset> <endpoint> <length> <crc64> <token>`.
#[derive(Debug, Clone)]
pub struct RdmaOffer {
    pub replid: String,
    pub offset: i64,
    pub endpoint: SocketAddr,
    pub length: u64,
    pub crc: u64,
    pub token: [u8; 16],
}

impl RdmaOffer {
    /// Parses what follows `+RDMAFULLSYNC `.
    pub fn parse(rest: &str) -> Result<RdmaOffer, String> {
        let bad = || format!("bad RDMAFULLSYNC reply: +RDMAFULLSYNC {rest}");
        let p: Vec<&str> = rest.split(' ').collect();
        if p.len() != 6 || p[5].len() != 32 {
            return Err(bad());
        }
        let mut token = [0u8; 16];
        for (i, b) in token.iter_mut().enumerate() {
            *b = u8::from_str_radix(&p[5][2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(RdmaOffer {
            replid: p[0].to_string(),
            offset: p[1].parse().map_err(|_| bad())?,
            endpoint: p[2].parse().map_err(|_| bad())?,
            length: p[3].parse().map_err(|_| bad())?,
            crc: u64::from_str_radix(p[4], 16).map_err(|_| bad())?,
            token,
        })
    }
}

/// Why an attempt failed: a short reason (counted) and the details.
pub type Failure = (&'static str, String);

const CREDIT_BYTES: usize = 8;
/// How often a sleeping receiver looks at the cancel flag.
const POLL_SLICE_MS: i32 = 100;

fn fabric_failure(e: FabricError) -> Failure {
    match e {
        FabricError::Completion(c) => ("completion-error", c.to_string()),
        FabricError::Event(ev) => ("peer-shutdown", ev.to_string()),
        other => ("fabric-error", other.to_string()),
    }
}

/// What a successful [`receive`] leaves.
pub struct Received {
    /// The temp file, every byte written; [`SnapshotWriter::finish`]
    /// (padding, length, fsync) is the caller's once it is verified.
    pub file: SnapshotWriter,
    /// The CRC64 of all but the last 8 bytes, for the RDB trailer (`None`
    /// for a shorter file).
    pub content_crc: Option<u64>,
    /// Why the load stopped, if it did (it then skipped the rest).
    pub load_error: Option<String>,
    /// Connect to the last credit.
    pub transfer_secs: f64,
}

/// A slot consumed by one of the two threads.
enum Consumed {
    /// Written to the temp file (or why not).
    Written(Result<(), String>),
    /// Decoded by the loader.
    Loaded,
}

/// Receives the snapshot of `offer` into `file` (created by the caller,
/// empty; `O_DIRECT` when `direct` and the file system takes it) and,
/// slot by slot beside the file writes, into `load`; checks the length
/// and the CRC64 of the whole file. Every RDMA resource is released when
/// this returns, whatever the outcome.
#[allow(clippy::too_many_arguments)]
pub fn receive(
    rdma: &ReplicaRdma,
    offer: &RdmaOffer,
    file: std::fs::File,
    direct: bool,
    cancel: &AtomicBool,
    timeout: Duration,
    progress: &crate::replication::handshake::Progress,
    load: &mut StreamLoad<'_>,
) -> Result<Received, Failure> {
    let started = Instant::now();
    let defaults = (rdma.endpoints, rdma.slots, rdma.chunk_size);
    let choice = rdma
        .tuning
        .as_ref()
        .map(|t| t.lock().expect("rdma tuning").choose(&rdma.peer, defaults));
    let (endpoints, slots, chunk_size) = choice
        .as_ref()
        .map_or(defaults, |c| (c.endpoints, c.slots, c.chunk_size));
    let c = u64::from(chunk_size);
    let chunks = offer.length.div_ceil(c);
    // Every endpoint carries at least one chunk; its ring is K slots, K
    // shrunk for small snapshots.
    let n = u64::from(endpoints.clamp(1, u32::from(ferrokv_fabric::MAX_LANES))).min(chunks.max(1));
    let k = u64::from(slots).min(chunks.div_ceil(n).max(1)) as u32;
    set_state(&rdma.stats, SyncState::Connecting);
    let mut lanes: Vec<Lane> = Vec::with_capacity(n as usize);
    let mut rings: Vec<ferrokv_fabric::MemoryRegion> = Vec::with_capacity(n as usize);
    for lane in 0..n {
        let (l, ring) = connect_lane(rdma, offer, (k, chunk_size), lane as u8, n as u8, timeout)?;
        lanes.push(l);
        rings.push(ring);
    }
    set_state(&rdma.stats, SyncState::Transferring);
    let slots = u64::from(k);
    // Two threads consume each slot while this one keeps reading the CQ
    // (with the tcp provider data only lands while the target reads its
    // CQ, so consuming here would stall it): a writer (file write, CRC64)
    // and a loader (decoding into the new keyspace). A slot's credit goes
    // back once both are done with it.
    let (wake_rx, wake_tx) =
        std::os::unix::net::UnixStream::pair().map_err(|e| ("io", format!("wake-up pair: {e}")))?;
    // Both ends non-blocking: a consumer's wake-up byte that does not fit
    // is not needed (the bytes pending already wake the receiver), and a
    // consumer must never block on it — after a failure nobody reads them.
    for end in [&wake_rx, &wake_tx] {
        end.set_nonblocking(true)
            .map_err(|e| ("io", format!("wake-up pair: {e}")))?;
    }
    // Set when the receive fails: the consumers skip what is queued.
    let stop = AtomicBool::new(false);
    let stop = &stop;
    let rings_ref = &rings;
    let (writer, crc, content_crc, load_error) = std::thread::scope(|scope| {
        let (write_tx, write_rx) = std::sync::mpsc::channel::<Job>();
        let (load_tx, load_rx) = std::sync::mpsc::channel::<Job>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Consumed>();
        let (done_w, wake_w) = (done_tx.clone(), &wake_tx);
        let writer = scope.spawn(move || {
            let mut out = SnapshotWriter::new(file, direct);
            let mut crc = 0u64;
            // The CRC64 of the bytes before the RDB trailer, taken on the way.
            let trailer_at = offer.length.checked_sub(8);
            let mut content_crc = None;
            let mut at_file = 0u64;
            let mut wake = wake_w;
            let (mut write_time, mut crc_time) = (Duration::ZERO, Duration::ZERO);
            for (lane, at, len) in write_rx {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let data = rings_ref[lane].bytes(at..at + len);
                let t0 = Instant::now();
                let res = out
                    .write_all(data)
                    .map_err(|e| format!("writing the temp file: {e}"));
                let t1 = Instant::now();
                write_time += t1 - t0;
                if res.is_ok() {
                    match trailer_at {
                        Some(t) if (at_file..at_file + len as u64).contains(&t) => {
                            let (before, after) = data.split_at((t - at_file) as usize);
                            crc = ferrokv_rdb::crc64::crc64(crc, before);
                            content_crc = Some(crc);
                            crc = ferrokv_rdb::crc64::crc64(crc, after);
                        }
                        _ => crc = ferrokv_rdb::crc64::crc64(crc, data),
                    }
                    crc_time += t1.elapsed();
                    at_file += len as u64;
                    progress.read.fetch_add(len as u64, Ordering::Relaxed);
                }
                let failed = res.is_err();
                let _ = done_w.send(Consumed::Written(res));
                let _ = wake.write(&[1]);
                if failed {
                    break;
                }
            }
            tracing::info!(
                "RDMA receive: {:.1} ms writing the temp file ({}, {} bytes straight from the ring), {:.1} ms in CRC64",
                write_time.as_secs_f64() * 1e3,
                if out.is_direct() { "O_DIRECT" } else { "buffered" },
                out.written_in_place(),
                crc_time.as_secs_f64() * 1e3
            );
            (out, crc, content_crc)
        });
        let load = &mut *load;
        let wake_l = &wake_tx;
        let loader = scope.spawn(move || {
            let mut error = None;
            let mut wake = wake_l;
            let mut busy = Duration::ZERO;
            for (lane, at, len) in load_rx {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // After an error the rest is skipped, not decoded; the
                // transfer goes on so that the CRC64 is checked (a corrupt
                // chunk is reported as such).
                if error.is_none() {
                    let t0 = Instant::now();
                    if let Err(e) = load.feed(rings_ref[lane].bytes(at..at + len)) {
                        error = Some(e);
                    }
                    busy += t0.elapsed();
                }
                let _ = done_tx.send(Consumed::Loaded);
                let _ = wake.write(&[1]);
            }
            tracing::info!(
                "RDMA receive: {:.1} ms loading the slots into the new keyspace ({} large values filled in place)",
                busy.as_secs_f64() * 1e3,
                load.strings_filled_in_place()
            );
            error
        });
        let res = drive(
            &mut lanes,
            offer,
            c,
            slots,
            chunks,
            cancel,
            timeout,
            &[&write_tx, &load_tx],
            &done_rx,
            &wake_rx,
        );
        if res.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        drop(write_tx);
        drop(load_tx);
        let written = writer.join();
        let loaded = loader.join();
        res?;
        let (out, crc, content_crc) =
            written.map_err(|_| ("io", "the writer thread panicked".to_string()))?;
        let load_error = loaded.map_err(|_| ("load", "the loader thread panicked".to_string()))?;
        Ok::<_, Failure>((out, crc, content_crc, load_error))
    })?;
    // Every chunk is in: release the RDMA side before verifying.
    drop(lanes);
    drop(rings);
    set_state(&rdma.stats, SyncState::Verifying);
    let received = progress.read.load(Ordering::Relaxed);
    if received != offer.length {
        return Err((
            "length-mismatch",
            format!("received {received} bytes, announced {}", offer.length),
        ));
    }
    if crc != offer.crc {
        return Err((
            "crc-mismatch",
            format!(
                "CRC64 of the received snapshot is {crc:016x}, the master announced {:016x}",
                offer.crc
            ),
        ));
    }
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        "MASTER <-> REPLICA sync: {} bytes over RDMA ({n} endpoint(s), K = {k}, C = {c}) in {secs:.3}s ({:.1} MB/s), CRC64 verified",
        offer.length,
        offer.length as f64 / 1e6 / secs.max(1e-9)
    );
    rdma.stats.lock().expect("rdma stats").last_sync_endpoints = n as u32;
    if let (Some(t), Some(choice)) = (rdma.tuning.as_ref(), choice.as_ref()) {
        let state = t
            .lock()
            .expect("rdma tuning")
            .record(choice, offer.length, secs);
        state.write();
    }
    Ok(Received {
        transfer_secs: secs,
        file: writer,
        content_crc,
        load_error,
    })
}

/// A slot handed to the consumers: (lane, offset in its ring, length).
type Job = (usize, usize, usize);

/// One endpoint of the sync: its connection, its credit buffers (a
/// credit's buffer is reused only once its previous send completed) and
/// how many of its chunks landed. Its ring is kept apart, shared with the
/// consumer threads.
struct Lane {
    conn: Connection,
    credits: ferrokv_fabric::MemoryRegion,
    prepost: bool,
    landed: u64,
    credits_sent: u64,
    credits_done: u64,
    /// Every credit of this lane is sent and the master closed it (it
    /// does as soon as its last credit arrives, while other lanes may
    /// still be moving): nothing more is read from it.
    closed: bool,
}

/// Opens endpoint `lane` of `lanes`: registers its ring of K × C and its
/// credit buffers, and connects with the offer's token.
fn connect_lane(
    rdma: &ReplicaRdma,
    offer: &RdmaOffer,
    (k, chunk_size): (u32, u32),
    lane: u8,
    lanes: u8,
    timeout: Duration,
) -> Result<(Lane, ferrokv_fabric::MemoryRegion), Failure> {
    let c = chunk_size as usize;
    let cq_size = (k as usize * 4).max(64);
    let mut conn =
        Connection::prepare(&rdma.lib, rdma.provider.as_deref(), offer.endpoint, cq_size)
            .map_err(|e| ("connect", e.to_string()))?;
    let ring = conn
        .domain
        .register(k as usize * c, Access::REMOTE_WRITE)
        .map_err(|e| ("register", e.to_string()))?;
    let credits = conn
        .domain
        .register(2 * k as usize * CREDIT_BYTES, Access::SEND)
        .map_err(|e| ("register", e.to_string()))?;
    let prepost = conn.endpoint.requirements().prepost_receives;
    if prepost {
        for i in 0..k {
            conn.endpoint
                .recv_for_immediate(u64::from(i))
                .map_err(|e| ("register", e.to_string()))?;
        }
    }
    let desc = RingDescriptor {
        addr: ring.remote_addr(),
        key: ring.key(),
        slots: k,
        slot_size: chunk_size,
        token: offer.token,
        lane,
        lanes,
    };
    conn.connect(&desc.encode(), timeout.min(Duration::from_secs(10)))
        .map_err(|e| ("connect", format!("endpoint {lane} of {lanes}: {e}")))?;
    match AcceptDescriptor::decode(&conn.peer_data) {
        Ok(a) if a.token == offer.token => {}
        Ok(_) => return Err(("protocol", "the master accepted with another token".into())),
        Err(e) => return Err(("protocol", format!("the master's accept data: {e}"))),
    }
    let lane = Lane {
        conn,
        credits,
        prepost,
        landed: 0,
        credits_sent: 0,
        credits_done: 0,
        closed: false,
    };
    Ok((lane, ring))
}

/// The receive loop. Chunk `g` of the file arrives on lane `g mod n` as
/// that lane's chunk `g / n` (its immediate), in order within the lane but
/// in any order across lanes; the consumers get every chunk in the file's
/// order, as soon as its lane has it. A chunk's credit goes back to its
/// lane once every consumer is done with it, until every chunk is consumed
/// and its credit sent.
#[allow(clippy::too_many_arguments)]
fn drive(
    lanes: &mut [Lane],
    offer: &RdmaOffer,
    c: u64,
    slots: u64,
    chunks: u64,
    cancel: &AtomicBool,
    timeout: Duration,
    consumers: &[&std::sync::mpsc::Sender<Job>; 2],
    done: &std::sync::mpsc::Receiver<Consumed>,
    wake: &std::os::unix::net::UnixStream,
) -> Result<(), Failure> {
    let n = lanes.len() as u64;
    let lane_chunks = |lane: u64| chunks.saturating_sub(lane).div_ceil(n);
    // Chunks handed to the consumers, and credited, in the file's order.
    let (mut dispatched, mut credited) = (0u64, 0u64);
    // Chunks the writer and the loader are done with (each in order).
    let (mut by_writer, mut by_loader) = (0u64, 0u64);
    let mut batch: Vec<Completion> = Vec::with_capacity(64);
    let mut last_progress = Instant::now();
    let sends_pending = |lanes: &[Lane]| lanes.iter().any(|l| l.credits_done < l.credits_sent);
    while credited < chunks || sends_pending(lanes) {
        let mut busy = false;
        for (li, lane) in lanes.iter_mut().enumerate() {
            if lane.closed {
                continue;
            }
            let finished = lane.credits_sent == lane_chunks(li as u64);
            batch.clear();
            if let Err(e) = lane.conn.cq.read(&mut batch, 64) {
                if credited == chunks {
                    // Every credit is posted: a late error changes nothing.
                    return Ok(());
                }
                if finished {
                    // This lane's credits are all posted: its end (a
                    // flushed send) changes nothing either.
                    lane.closed = true;
                    lane.credits_done = lane.credits_sent;
                    continue;
                }
                return Err(fabric_failure(e));
            }
            for comp in batch.drain(..) {
                busy = true;
                match comp.kind() {
                    CompletionKind::Send => lane.credits_done += 1,
                    CompletionKind::RemoteWrite => {
                        let imm = comp
                            .immediate
                            .ok_or(("protocol", "a write without immediate".to_string()))?;
                        let seq = lane.landed;
                        if imm != seq & 0xffff_ffff || seq >= lane_chunks(li as u64) {
                            return Err((
                                "protocol",
                                format!("chunk {imm} arrived on endpoint {li}, expected {seq}"),
                            ));
                        }
                        if lane.prepost {
                            lane.conn
                                .endpoint
                                .recv_for_immediate(comp.tag)
                                .map_err(fabric_failure)?;
                        }
                        lane.landed += 1;
                        last_progress = Instant::now();
                    }
                    other => {
                        return Err(("protocol", format!("unexpected completion {other:?}")));
                    }
                }
            }
        }
        // Hand over, in the file's order, every chunk whose lane has it.
        while dispatched < chunks {
            let (li, seq) = ((dispatched % n) as usize, dispatched / n);
            if lanes[li].landed <= seq {
                break;
            }
            let at = (seq % slots) as usize * c as usize;
            let len = (offer.length - dispatched * c).min(c) as usize;
            for consumer in consumers {
                consumer
                    .send((li, at, len))
                    .map_err(|_| ("io", "a consumer thread stopped".to_string()))?;
            }
            dispatched += 1;
            busy = true;
        }
        while let Ok(d) = done.try_recv() {
            // A consumer finishing a slot is progress too: decoding a
            // slot that completes a large record may take a while.
            busy = true;
            last_progress = Instant::now();
            match d {
                Consumed::Written(r) => {
                    r.map_err(|e| ("io", e))?;
                    by_writer += 1;
                }
                Consumed::Loaded => by_loader += 1,
            }
        }
        // Each chunk both consumers are done with gets its credit back, on
        // its lane, numbered as the lane counts.
        while credited < by_writer.min(by_loader) {
            let (li, seq) = ((credited % n) as usize, credited / n);
            let lane = &mut lanes[li];
            if lane.credits_sent - lane.credits_done >= 2 * slots {
                break;
            }
            let cat = (lane.credits_sent % (2 * slots)) as usize * CREDIT_BYTES;
            lane.credits
                .bytes_mut(cat..cat + CREDIT_BYTES)
                .expect("owned")
                .copy_from_slice(&seq.to_le_bytes());
            match lane
                .conn
                .endpoint
                .send(&lane.credits, cat..cat + CREDIT_BYTES, seq)
            {
                Ok(()) => {
                    lane.credits_sent += 1;
                    credited += 1;
                    busy = true;
                    last_progress = Instant::now();
                }
                Err(e) if e.is_would_block() => break,
                Err(e) => return Err(fabric_failure(e)),
            }
        }
        if busy {
            continue;
        }
        if credited == chunks {
            // Only the last credits' sends are outstanding: let them leave
            // (an endpoint closed with a send queued may cancel it), within
            // reason — the data is all here.
            if last_progress.elapsed() > Duration::from_secs(5) {
                return Ok(());
            }
        } else {
            for (li, lane) in lanes.iter_mut().enumerate() {
                let finished = lane.credits_sent == lane_chunks(li as u64);
                while !lane.closed {
                    match lane.conn.eq.read().map_err(fabric_failure)? {
                        None => break,
                        Some(CmEvent::Shutdown { .. }) if finished => {
                            lane.closed = true;
                            lane.credits_done = lane.credits_sent;
                        }
                        Some(CmEvent::Shutdown { .. }) => {
                            return Err((
                                "peer-shutdown",
                                format!(
                                    "the master went away (endpoint {li} of {n}) after {dispatched} of {chunks} chunks"
                                ),
                            ))
                        }
                        Some(_) => {}
                    }
                }
            }
            if last_progress.elapsed() > timeout {
                return Err((
                    "timeout",
                    format!("no chunk within {timeout:?} ({dispatched} of {chunks} received)"),
                ));
            }
        }
        if let Err(e) = sleep(lanes, cancel, wake) {
            if credited == chunks {
                return Ok(());
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Sleeps on every lane's fds (and the consumers' wake-up) until
/// something may have arrived.
fn sleep(
    lanes: &[Lane],
    cancel: &AtomicBool,
    wake: &std::os::unix::net::UnixStream,
) -> Result<(), Failure> {
    if cancel.load(Ordering::Relaxed) {
        return Err(("cancelled", "the sync was cancelled".into()));
    }
    let open = || lanes.iter().filter(|l| !l.closed);
    for lane in open() {
        let conn = &lane.conn;
        match conn.fabric.trywait(&[&conn.cq, &conn.eq]) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => return Err(("fabric-error", format!("fi_trywait: {e}"))),
        }
    }
    let pollfd = |fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let mut fds: Vec<libc::pollfd> = open()
        .flat_map(|l| [pollfd(l.conn.cq.as_raw_fd()), pollfd(l.conn.eq.as_raw_fd())])
        .collect();
    fds.push(pollfd(wake.as_raw_fd()));
    // SAFETY: valid pollfds that live across the call, and their count.
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_SLICE_MS) };
    // Drain the writer's wake-ups (its results are read after this).
    let mut sink = [0u8; 64];
    let mut w = wake;
    while matches!(std::io::Read::read(&mut w, &mut sink), Ok(n) if n > 0) {}
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(("fabric-error", format!("poll: {e}")));
        }
    }
    Ok(())
}

/// Where the temp file goes (beside `dbfilename`, as a TCP sync's).
pub fn temp_path(dir: &Path) -> std::path::PathBuf {
    dir.join(format!(
        "temp-rdma-{}.{}.rdb",
        crate::server::unix_ms(),
        std::process::id()
    ))
}
