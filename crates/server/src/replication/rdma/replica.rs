//! The replica's side of the RDMA full sync, on its `repl-sync` thread.
//!
//! That thread already runs the blocking handshake and the snapshot
//! reception of a TCP sync while the event loop keeps serving the old data,
//! so the RDMA receive runs there too: it sleeps in `poll(2)` on its
//! connection's EQ and CQ fds (after `fi_trywait`, never spinning), with a
//! short timeout only to notice a cancelled sync or a stalled master.
//!
//! Ring: K slots × C bytes registered once (`rdma-ring-slots`,
//! `rdma-chunk-size`, K shrunk for small snapshots). For each write that
//! lands (immediate = its 32-bit sequence) the slot goes to a writer
//! thread, which writes it to the temp file — a completed `write(2)` — and
//! folds it into the CRC64; only then is its credit returned with an
//! 8-byte `fi_send`. The writer exists because the tcp provider moves data
//! only while the target reads its CQ: consuming on the reading thread
//! serialised transfer and disk (measured in docs/rdma.md). The master never has more
//! than K writes in flight, so a slot is never overwritten before it has
//! been consumed.

use super::{set_state, SharedStats, SyncState};
use ferrokv_fabric::{
    AcceptDescriptor, Access, CmEvent, Completion, CompletionKind, Connection, FabricError,
    Library, RingDescriptor,
};
use std::collections::VecDeque;
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
    pub stats: SharedStats,
    /// Set when this attempt fails: the next ones go over TCP.
    pub fallback: Arc<AtomicBool>,
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

/// Receives the snapshot of `offer` into `file` (created by the caller),
/// checks its length and CRC64 and fsyncs it. Every RDMA resource is
/// released when this returns, whatever the outcome.
pub fn receive(
    rdma: &ReplicaRdma,
    offer: &RdmaOffer,
    file: &mut std::fs::File,
    cancel: &AtomicBool,
    timeout: Duration,
    progress: &crate::replication::handshake::Progress,
) -> Result<(), Failure> {
    let started = Instant::now();
    let c = u64::from(rdma.chunk_size);
    let chunks = offer.length.div_ceil(c);
    let k = u64::from(rdma.slots).min(chunks.max(1)) as u32;
    set_state(&rdma.stats, SyncState::Connecting);
    let cq_size = (k as usize * 4).max(64);
    let mut conn =
        Connection::prepare(&rdma.lib, rdma.provider.as_deref(), offer.endpoint, cq_size)
            .map_err(|e| ("connect", e.to_string()))?;
    let ring = conn
        .domain
        .register(k as usize * c as usize, Access::REMOTE_WRITE)
        .map_err(|e| ("register", e.to_string()))?;
    let mut credits = conn
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
        slot_size: rdma.chunk_size,
        token: offer.token,
    };
    conn.connect(&desc.encode(), timeout.min(Duration::from_secs(10)))
        .map_err(|e| ("connect", e.to_string()))?;
    match AcceptDescriptor::decode(&conn.peer_data) {
        Ok(a) if a.token == offer.token => {}
        Ok(_) => return Err(("protocol", "the master accepted with another token".into())),
        Err(e) => return Err(("protocol", format!("the master's accept data: {e}"))),
    }
    set_state(&rdma.stats, SyncState::Transferring);
    let slots = u64::from(k);
    // A writer thread consumes the slots (file write, CRC64) while this
    // one keeps reading the CQ: with the tcp provider data only lands
    // while the target reads its CQ, so consuming here would stall it.
    let (wake_rx, wake_tx) =
        std::os::unix::net::UnixStream::pair().map_err(|e| ("io", format!("wake-up pair: {e}")))?;
    wake_rx
        .set_nonblocking(true)
        .map_err(|e| ("io", format!("wake-up pair: {e}")))?;
    let ring_ref = &ring;
    let crc = std::thread::scope(|scope| -> Result<u64, Failure> {
        let (job_tx, job_rx) = std::sync::mpsc::channel::<(u64, usize, usize)>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<u64, String>>();
        let file = &mut *file;
        let writer = scope.spawn(move || {
            let mut crc = 0u64;
            let mut wake = &wake_tx;
            let (mut write_time, mut crc_time) = (Duration::ZERO, Duration::ZERO);
            let mut writeback = crate::persistence::writeback::Writeback::new(file);
            for (seq, at, len) in job_rx {
                let data = ring_ref.bytes(at..at + len);
                let t0 = Instant::now();
                let res = writeback
                    .write_all(file, data)
                    .map(|_| seq)
                    .map_err(|e| format!("writing the temp file: {e}"));
                let t1 = Instant::now();
                write_time += t1 - t0;
                if res.is_ok() {
                    crc = ferrokv_rdb::crc64::crc64(crc, data);
                    crc_time += t1.elapsed();
                    progress.read.fetch_add(len as u64, Ordering::Relaxed);
                }
                let failed = res.is_err();
                let _ = done_tx.send(res);
                let _ = wake.write(&[1]);
                if failed {
                    break;
                }
            }
            tracing::info!(
                "RDMA receive: {:.1} ms writing the temp file, {:.1} ms in CRC64",
                write_time.as_secs_f64() * 1e3,
                crc_time.as_secs_f64() * 1e3
            );
            crc
        });
        let res = drive(
            &conn,
            &mut credits,
            offer,
            c,
            slots,
            chunks,
            prepost,
            cancel,
            timeout,
            &job_tx,
            &done_rx,
            &wake_rx,
        );
        drop(job_tx);
        let crc = writer
            .join()
            .map_err(|_| ("io", "the writer thread panicked".to_string()))?;
        res.map(|()| crc)
    })?;
    // Every chunk is in: release the RDMA side before verifying and loading.
    drop(ring);
    drop(credits);
    drop(conn);
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
    file.sync_all()
        .map_err(|e| ("io", format!("fsync of the temp file: {e}")))?;
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        "MASTER <-> REPLICA sync: {} bytes over RDMA in {secs:.3}s ({:.1} MB/s), CRC64 verified",
        offer.length,
        offer.length as f64 / 1e6 / secs.max(1e-9)
    );
    let mut s = rdma.stats.lock().expect("rdma stats");
    s.bytes += offer.length;
    s.last_sync_mbps = offer.length as f64 / 1e6 / secs.max(1e-9);
    Ok(())
}

/// The receive loop: remote writes go to the writer as jobs (in order,
/// immediates checked), finished jobs get their credit, until every chunk
/// is written and its credit sent.
#[allow(clippy::too_many_arguments)]
fn drive(
    conn: &Connection,
    credits: &mut ferrokv_fabric::MemoryRegion,
    offer: &RdmaOffer,
    c: u64,
    slots: u64,
    chunks: u64,
    prepost: bool,
    cancel: &AtomicBool,
    timeout: Duration,
    jobs: &std::sync::mpsc::Sender<(u64, usize, usize)>,
    done: &std::sync::mpsc::Receiver<Result<u64, String>>,
    wake: &std::os::unix::net::UnixStream,
) -> Result<(), Failure> {
    let (mut seq, mut written, mut credits_sent, mut credits_done) = (0u64, 0u64, 0u64, 0u64);
    let mut batch: Vec<Completion> = Vec::with_capacity(64);
    let mut last_progress = Instant::now();
    let mut finished: VecDeque<u64> = VecDeque::new();
    while written < chunks || credits_done < credits_sent {
        let mut busy = false;
        batch.clear();
        let read = conn.cq.read(&mut batch, 64);
        if let Err(e) = read {
            if written == chunks {
                // Every credit is posted: a late error changes nothing.
                return Ok(());
            }
            return Err(fabric_failure(e));
        }
        for comp in batch.drain(..) {
            busy = true;
            match comp.kind() {
                CompletionKind::Send => credits_done += 1,
                CompletionKind::RemoteWrite => {
                    let imm = comp
                        .immediate
                        .ok_or(("protocol", "a write without immediate".to_string()))?;
                    if imm != seq & 0xffff_ffff || seq >= chunks {
                        return Err(("protocol", format!("chunk {imm} arrived, expected {seq}")));
                    }
                    let at = (seq % slots) as usize * c as usize;
                    let len = (offer.length - seq * c).min(c) as usize;
                    jobs.send((seq, at, len))
                        .map_err(|_| ("io", "the writer thread stopped".to_string()))?;
                    if prepost {
                        conn.endpoint
                            .recv_for_immediate(comp.tag)
                            .map_err(fabric_failure)?;
                    }
                    seq += 1;
                    last_progress = Instant::now();
                }
                other => {
                    return Err(("protocol", format!("unexpected completion {other:?}")));
                }
            }
        }
        while let Ok(r) = done.try_recv() {
            busy = true;
            finished.push_back(r.map_err(|e| ("io", e))?);
        }
        // Each slot written to the file gets its credit back. A credit
        // buffer is reused only once its previous send completed.
        while let Some(&s) = finished.front() {
            if credits_sent - credits_done >= 2 * slots {
                break;
            }
            let cat = (credits_sent % (2 * slots)) as usize * CREDIT_BYTES;
            credits
                .bytes_mut(cat..cat + CREDIT_BYTES)
                .expect("owned")
                .copy_from_slice(&s.to_le_bytes());
            match conn.endpoint.send(credits, cat..cat + CREDIT_BYTES, s) {
                Ok(()) => {
                    finished.pop_front();
                    credits_sent += 1;
                    written += 1;
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
        if written == chunks {
            // Only the last credits' sends are outstanding: let them leave
            // (an endpoint closed with a send queued may cancel it), within
            // reason — the data is all here.
            if last_progress.elapsed() > Duration::from_secs(5) {
                return Ok(());
            }
        } else {
            loop {
                match conn.eq.read().map_err(fabric_failure)? {
                    None => break,
                    Some(CmEvent::Shutdown { .. }) => {
                        return Err((
                            "peer-shutdown",
                            format!("the master went away after {seq} of {chunks} chunks"),
                        ))
                    }
                    Some(_) => {}
                }
            }
            if last_progress.elapsed() > timeout {
                return Err((
                    "timeout",
                    format!("no chunk within {timeout:?} ({seq} of {chunks} received)"),
                ));
            }
        }
        if let Err(e) = sleep(conn, cancel, wake) {
            if written == chunks {
                return Ok(());
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Sleeps on the connection's fds (and the writer's wake-up) until
/// something may have arrived.
fn sleep(
    conn: &Connection,
    cancel: &AtomicBool,
    wake: &std::os::unix::net::UnixStream,
) -> Result<(), Failure> {
    if cancel.load(Ordering::Relaxed) {
        return Err(("cancelled", "the sync was cancelled".into()));
    }
    match conn.fabric.trywait(&[&conn.cq, &conn.eq]) {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) => return Err(("fabric-error", format!("fi_trywait: {e}"))),
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
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: three valid pollfds that live across the call.
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), 3, POLL_SLICE_MS) };
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
