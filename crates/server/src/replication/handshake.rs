//! The replica's side of a sync, on its own thread with blocking I/O:
//! connect, `PING`, `AUTH`, `REPLCONF listening-port`, `REPLCONF capa eof
//! capa psync2`, `PSYNC`, then either `+CONTINUE` (done: the stream follows)
//! or `+FULLRESYNC` and the snapshot in either framing (`$<len>` or
//! `$EOF:<40 chars>`), written to a temp file, renamed to `dbfilename` and
//! loaded into a fresh keyspace. The loop goes on serving the old data
//! meanwhile and swaps the new keyspace in when this thread hands it over;
//! a failed sync leaves the replica exactly as it was.

use crate::net::conn::BlockingConn;
use crate::persistence::load::{load_rdb, LoadStats};
use ferrokv_store::Keyspace;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Transfer progress, read by `INFO replication` while a sync runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Payload size, -1 while unknown (diskless framing).
    pub total: AtomicI64,
    pub read: AtomicU64,
    /// Set once the payload is in and the load began.
    pub loading: AtomicBool,
}

/// What the sync thread needs to know.
pub struct SyncRequest {
    pub host: String,
    pub port: u16,
    pub masteruser: Option<String>,
    pub masterauth: Option<Vec<u8>>,
    pub listening_port: u16,
    pub announce_ip: Option<String>,
    /// `(replid, offset)` of the history we hold, for `PSYNC`.
    pub psync: Option<(String, i64)>,
    pub dir: PathBuf,
    pub dbfilename: String,
    /// Parse the payload as it arrives instead of writing it to a file
    /// first (`repl-diskless-load`, decided by the loop when the sync
    /// starts).
    pub diskless_load: bool,
    pub databases: usize,
    /// The configuration the loader follows (key-load-delay, the compact
    /// encoding thresholds).
    pub load_config: Box<crate::config::Config>,
    pub timeout: Duration,
    pub cancel: Arc<AtomicBool>,
    pub progress: Arc<Progress>,
    /// Offer `capa rdma` and take `+RDMAFULLSYNC` (replica-rdma yes,
    /// libfabric usable, no RDMA failure since the last good sync).
    pub rdma: Option<super::rdma::replica::ReplicaRdma>,
    /// Our `FAILOVER` is under way: the PSYNC carries `FAILOVER`, which
    /// makes the target promote itself.
    pub failover: bool,
    /// `tls-replication`: the link is TLS, the master's certificate checked
    /// against `host`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// How a sync ended.
pub enum SyncOutcome {
    Full {
        replid: String,
        offset: i64,
        keyspace: Keyspace,
        load: Option<LoadStats>,
        rdb_bytes: u64,
        stream: BlockingConn,
        leftover: Vec<u8>,
    },
    Partial {
        new_replid: Option<String>,
        stream: BlockingConn,
        leftover: Vec<u8>,
    },
}

/// How long a read waits before the thread looks at the cancel flag again.
const POLL: Duration = Duration::from_millis(100);

/// A blocking connection with a read buffer, a cancel flag and an idle
/// timeout.
struct Conn<'a> {
    s: BlockingConn,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    req: &'a SyncRequest,
    last_io: Instant,
    /// The snapshot is coming (after `+FULLRESYNC`): a timeout now is one
    /// receiving bulk data, not one connecting (Redis's two messages).
    transfer: bool,
}

impl Conn<'_> {
    fn fill(&mut self) -> Result<usize, String> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        loop {
            if self.req.cancel.load(Ordering::Relaxed) {
                return Err("sync cancelled".into());
            }
            match self.s.read_within(&mut self.buf[self.end..], POLL) {
                Ok(0) => return Err("connection closed by the master".into()),
                Ok(n) => {
                    self.end += n;
                    self.last_io = Instant::now();
                    return Ok(n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    if self.last_io.elapsed() > self.req.timeout {
                        return Err(if self.transfer {
                            "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value."
                        } else {
                            "Timeout connecting to the MASTER..."
                        }
                        .into());
                    }
                }
                Err(e) => return Err(format!("error reading from the master: {e}")),
            }
        }
    }

    /// One line without its `\r\n`.
    fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(p) = self.buf[self.start..self.end]
                .iter()
                .position(|&c| c == b'\n')
            {
                let mut l = &self.buf[self.start..self.start + p];
                if l.last() == Some(&b'\r') {
                    l = &l[..l.len() - 1];
                }
                let s = String::from_utf8_lossy(l).into_owned();
                self.start += p + 1;
                return Ok(s);
            }
            self.fill()?;
        }
    }

    /// Sends a command and reads its one-line reply.
    fn command(&mut self, args: &[&[u8]]) -> Result<String, String> {
        let mut out = Vec::new();
        ferrokv_resp::encode::array(&mut out, args.len());
        for a in args {
            ferrokv_resp::encode::bulk(&mut out, a);
        }
        self.s
            .write_all_within(&out, self.req.timeout)
            .map_err(|e| format!("error writing to the master: {e}"))?;
        loop {
            let l = self.line()?;
            // Newlines are keepalives the master may send while preparing.
            if !l.is_empty() {
                return Ok(l);
            }
        }
    }

    fn take_leftover(&mut self) -> Vec<u8> {
        let v = self.buf[self.start..self.end].to_vec();
        self.start = self.end;
        v
    }
}

impl<'a> Conn<'a> {
    fn new(s: BlockingConn, req: &'a SyncRequest) -> Conn<'a> {
        Conn {
            s,
            buf: vec![0; 512 * 1024],
            start: 0,
            end: 0,
            req,
            last_io: Instant::now(),
            transfer: false,
        }
    }

    /// `PING`, then `AUTH` when configured.
    fn ping_and_auth(&mut self) -> Result<(), String> {
        let req = self.req;
        let pong = self.command(&[b"PING"])?;
        if pong.starts_with('-')
            && !pong.starts_with("-NOAUTH")
            && !pong.starts_with("-NOPERM")
            && !pong.starts_with("-ERR operation not permitted")
        {
            return Err(format!("Error reply to PING from master: '{pong}'"));
        }
        if let Some(pass) = &req.masterauth {
            let reply = match &req.masteruser {
                Some(u) => self.command(&[b"AUTH", u.as_bytes(), pass])?,
                None => self.command(&[b"AUTH", pass])?,
            };
            if reply.starts_with('-') {
                return Err(format!("Unable to AUTH to MASTER: {reply}"));
            }
        }
        Ok(())
    }
}

/// Runs one sync attempt. With `replica-rdma` the link moves to an RDMA
/// stream when the master has one (see [`rdma_link`]); an attempt that
/// fails on it makes the next one plain TCP.
pub fn run(req: &SyncRequest) -> Result<SyncOutcome, String> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(req.host.as_str(), req.port))
        .map_err(|e| format!("can't resolve {}: {e}", req.host))?
        .next()
        .ok_or_else(|| format!("can't resolve {}", req.host))?;
    let limit = req.timeout.min(Duration::from_secs(10));
    let s = match &req.tls {
        Some(cfg) => BlockingConn::connect_tls(addr, &req.host, cfg.clone(), limit, POLL),
        None => BlockingConn::connect_tcp(addr, limit, POLL),
    }
    .map_err(|e| format!("Error condition on socket for SYNC: {e}"))?;
    let mut c = Conn::new(s, req);
    c.ping_and_auth()?;
    if let Some(r) = &req.rdma {
        if let Some(link) = rdma_link(&mut c, r)? {
            c = link;
            let res = handshake(c);
            if let Err(e) = &res {
                // Counted once: an RDMA full sync that failed counted itself.
                if !r.fallback.swap(true, Ordering::Relaxed) {
                    super::rdma::record_fallback(&r.stats, "link", e);
                }
            }
            return res;
        }
    }
    handshake(c)
}

/// `replica-rdma`: asks the master on the TCP link for its RDMA stream
/// endpoint (`REPLCONF rdma-endpoint stream`, which a Redis master refuses
/// as an unknown option: the link then stays on TCP), connects a stream to
/// it and authenticates again there. The TCP connection is dropped.
fn rdma_link<'a>(
    c: &mut Conn<'a>,
    r: &super::rdma::replica::ReplicaRdma,
) -> Result<Option<Conn<'a>>, String> {
    let req = c.req;
    let reply = c.command(&[b"REPLCONF", b"rdma-endpoint", b"stream"])?;
    let Some(endpoint) = reply.strip_prefix('+') else {
        tracing::info!("The master offers no RDMA link ({reply}): the link stays on TCP");
        return Ok(None);
    };
    let addr: std::net::SocketAddr = match endpoint.parse() {
        Ok(a) => a,
        Err(_) => {
            super::rdma::record_fallback(&r.stats, "protocol", endpoint);
            r.fallback.store(true, Ordering::Relaxed);
            return Err(format!("bad RDMA endpoint from the master: {endpoint}"));
        }
    };
    let s = BlockingConn::connect_rdma(
        &r.lib,
        r.provider.as_deref(),
        addr,
        r.link,
        req.timeout.min(Duration::from_secs(10)),
    )
    .map_err(|e| {
        let e = e.to_string();
        super::rdma::record_fallback(&r.stats, "connect", &e);
        r.fallback.store(true, Ordering::Relaxed);
        format!("RDMA link to {addr} failed: {e}")
    })?;
    tracing::info!("MASTER <-> REPLICA link over RDMA to {addr}");
    let mut link = Conn::new(s, req);
    link.ping_and_auth()?;
    Ok(Some(link))
}

/// The handshake after `PING`/`AUTH`, on whatever carries the link:
/// `REPLCONF`s, `PSYNC` and what it answers.
fn handshake(mut c: Conn) -> Result<SyncOutcome, String> {
    let req = c.req;
    let port = req.listening_port.to_string();
    let reply = c.command(&[b"REPLCONF", b"listening-port", port.as_bytes()])?;
    if reply.starts_with('-') {
        tracing::info!(
            "(Non critical) Master does not understand REPLCONF listening-port: {reply}"
        );
    }
    if let Some(ip) = &req.announce_ip {
        let reply = c.command(&[b"REPLCONF", b"ip-address", ip.as_bytes()])?;
        if reply.starts_with('-') {
            tracing::info!(
                "(Non critical) Master does not understand REPLCONF ip-address: {reply}"
            );
        }
    }
    let reply = if req.rdma.is_some() {
        c.command(&[
            b"REPLCONF",
            b"capa",
            b"eof",
            b"capa",
            b"psync2",
            b"capa",
            b"rdma",
        ])?
    } else {
        c.command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?
    };
    if reply.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF capa: {reply}");
    }
    let (id, off) = match &req.psync {
        Some((id, off)) => (id.clone(), (off + 1).to_string()),
        None => ("?".to_string(), "-1".to_string()),
    };
    if req.psync.is_some() {
        tracing::info!("Trying a partial resynchronization (request {id}:{off}).");
    } else {
        tracing::info!("Partial resynchronization not possible (no cached master)");
    }
    if let Some(r) = &req.rdma {
        super::rdma::set_state(&r.stats, super::rdma::SyncState::WaitingSnapshot);
    }
    let reply = if req.failover {
        c.command(&[b"PSYNC", id.as_bytes(), off.as_bytes(), b"FAILOVER"])?
    } else {
        c.command(&[b"PSYNC", id.as_bytes(), off.as_bytes()])?
    };
    if let Some(rest) = reply.strip_prefix("+RDMAFULLSYNC ") {
        return rdma_full_sync(c, rest);
    }
    if let Some(r) = &req.rdma {
        // The master answered without RDMA (a Redis, or RDMA not offered).
        super::rdma::set_state(&r.stats, super::rdma::SyncState::Idle);
    }
    if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new = rest.trim();
        tracing::info!("Successful partial resynchronization with master.");
        let leftover = c.take_leftover();
        return Ok(SyncOutcome::Partial {
            new_replid: (new.len() == 40).then(|| new.to_string()),
            stream: c.s,
            leftover,
        });
    }
    let Some(rest) = reply.strip_prefix("+FULLRESYNC ") else {
        return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
    };
    let mut parts = rest.split(' ');
    let replid = parts.next().unwrap_or("").to_string();
    let offset: i64 = parts
        .next()
        .and_then(|o| o.parse().ok())
        .ok_or_else(|| format!("bad FULLRESYNC reply: {reply}"))?;
    tracing::info!("Full resync from master: {replid}:{offset}");
    c.transfer = true;
    let (ks, load, rdb_bytes) = if req.diskless_load {
        receive_and_load(&mut c)?
    } else {
        let (path, rdb_bytes) = receive_payload(&mut c)?;
        req.progress.loading.store(true, Ordering::Relaxed);
        tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
        let mut ks = Keyspace::new(req.databases);
        let load =
            load_rdb(&mut ks, &path, crate::server::unix_ms(), &req.load_config).map_err(|e| {
                format!("Failed trying to load the MASTER synchronization DB from disk: {e}")
            })?;
        (ks, load, rdb_bytes)
    };
    let leftover = c.take_leftover();
    Ok(SyncOutcome::Full {
        replid,
        offset,
        keyspace: ks,
        load,
        rdb_bytes,
        stream: c.s,
        leftover,
    })
}

/// `+RDMAFULLSYNC`: the snapshot comes over RDMA (rdma/replica.rs) into a
/// temp file, loaded while it arrives; once the file is checked, fsynced
/// and renamed the keyspace is installed, and `REPLCONF rdma-done` tells
/// the master to stream what it buffered.
/// A failure releases the RDMA side, installs nothing and makes the next
/// attempt plain TCP.
fn rdma_full_sync(mut c: Conn, rest: &str) -> Result<SyncOutcome, String> {
    use super::rdma::{self, replica::RdmaOffer, SyncState};
    let req = c.req;
    let Some(r) = req.rdma.as_ref() else {
        return Err(format!(
            "Unexpected reply to PSYNC from master: +RDMAFULLSYNC {rest}"
        ));
    };
    let fail = |reason: &'static str, detail: String| {
        rdma::record_fallback(&r.stats, reason, &detail);
        r.fallback.store(true, Ordering::Relaxed);
        format!("RDMA sync failed ({reason}): {detail}")
    };
    let offer = RdmaOffer::parse(rest).map_err(|e| fail("protocol", e))?;
    tracing::info!(
        "Full resync from master over RDMA: {}:{} ({} bytes from {})",
        offer.replid,
        offer.offset,
        offer.length,
        offer.endpoint
    );
    req.progress
        .total
        .store(offer.length as i64, Ordering::Relaxed);
    if offer.length == 0 {
        return Err(fail(
            "protocol",
            "the master offered an empty snapshot".into(),
        ));
    }
    let tmp = rdma::replica::temp_path(&req.dir);
    let started = Instant::now();
    let received = receive_and_load_rdma(req, r, &offer, &tmp);
    let loaded = match received {
        Ok(done) => done,
        Err((reason, detail)) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(reason, detail));
        }
    };
    let dest = req.dir.join(&req.dbfilename);
    if let Err(e) = std::fs::rename(&tmp, &dest) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("io", format!("renaming into {}: {e}", dest.display())));
    }
    c.s.write_all_within(b"*2\r\n$8\r\nREPLCONF\r\n$9\r\nrdma-done\r\n", req.timeout)
        .map_err(|e| format!("error writing to the master: {e}"))?;
    {
        let mut s = r.stats.lock().expect("rdma stats");
        s.state = SyncState::Done;
        s.syncs_done += 1;
        s.last_sync_secs = started.elapsed().as_secs_f64();
        s.last_sync_direct_io = loaded.direct_io;
        s.bytes += offer.length;
        s.last_sync_mbps = offer.length as f64 / 1e6 / loaded.transfer_secs.max(1e-9);
    }
    tracing::info!(
        "MASTER <-> REPLICA sync: RDMA full sync done in {:.3}s; REPLCONF rdma-done sent",
        started.elapsed().as_secs_f64()
    );
    let leftover = c.take_leftover();
    Ok(SyncOutcome::Full {
        replid: offer.replid,
        offset: offer.offset,
        keyspace: loaded.keyspace,
        load: Some(loaded.load),
        rdb_bytes: offer.length,
        stream: c.s,
        leftover,
    })
}

/// The RDMA transfer into the temp file `tmp` and, beside it, the load:
/// a loader thread decodes each ring slot into a fresh keyspace while the
/// writer writes it to the file (`O_DIRECT` straight from the registered
/// ring when `rdb-direct-io` allows), so the load runs during the
/// transfer instead of after it, and the file never fills the page cache.
/// The keyspace is returned only once the length, the CRC64 of the whole
/// file and the RDB trailer are verified and the file is fsynced; on any
/// failure it is dropped and nothing is installed.
fn receive_and_load_rdma(
    req: &SyncRequest,
    r: &super::rdma::replica::ReplicaRdma,
    offer: &super::rdma::replica::RdmaOffer,
    tmp: &Path,
) -> Result<RdmaLoaded, super::rdma::replica::Failure> {
    use super::rdma::{self, SyncState};
    let file = std::fs::File::create(tmp)
        .map_err(|e| ("io", format!("creating {}: {e}", tmp.display())))?;
    tracing::info!(
        "MASTER <-> REPLICA sync: loading the snapshot as its chunks arrive; it is installed only once its length and CRC64 are verified"
    );
    let mut ks = Keyspace::new(req.databases);
    let mut load = crate::persistence::load::StreamLoad::new(
        &mut ks,
        Some(offer.length),
        crate::server::unix_ms(),
        &req.load_config,
    );
    let received = rdma::replica::receive(
        r,
        offer,
        file,
        req.load_config.rdb_direct_io,
        &req.cancel,
        req.timeout,
        &req.progress,
        &mut load,
    )?;
    let after_transfer = Instant::now();
    rdma::set_state(&r.stats, SyncState::Loading);
    req.progress.loading.store(true, Ordering::Relaxed);
    if let Some(e) = received.load_error {
        return Err(("load", format!("loading the RDMA snapshot: {e}")));
    }
    let (stats, summary) = load
        .finish()
        .map_err(|e| ("load", format!("loading the RDMA snapshot: {e}")))?;
    if summary.len as u64 != offer.length {
        return Err((
            "load",
            format!(
                "the RDB ends after {} of the {} bytes",
                summary.len, offer.length
            ),
        ));
    }
    if let ferrokv_rdb::Checksum::NotVerified(stored) = summary.checksum {
        if received.content_crc != Some(stored) {
            return Err((
                "crc-mismatch",
                format!(
                    "the RDB trailer holds {stored:#018x}, the content hashes to {:#018x}",
                    received.content_crc.unwrap_or(0)
                ),
            ));
        }
    }
    let (direct_io, transfer_secs) = (received.file.is_direct(), received.transfer_secs);
    received
        .file
        .finish()
        .map_err(|e| ("io", format!("finishing {}: {e}", tmp.display())))?;
    tracing::info!(
        "MASTER <-> REPLICA sync: loaded {} keys during the transfer; file synced {:.3}s after its last chunk",
        stats.keys,
        after_transfer.elapsed().as_secs_f64()
    );
    Ok(RdmaLoaded {
        keyspace: ks,
        load: stats,
        direct_io,
        transfer_secs,
    })
}

/// What [`receive_and_load_rdma`] returns once everything checked out.
struct RdmaLoaded {
    keyspace: Keyspace,
    load: LoadStats,
    /// The temp file went to the disk with `O_DIRECT`.
    direct_io: bool,
    /// Connect to the last credit.
    transfer_secs: f64,
}

/// How the payload is framed.
enum Framing {
    /// `$EOF:<40 bytes>`: the payload ends with the same 40 bytes.
    Mark(Vec<u8>),
    /// `$<len>`.
    Len(u64),
}

/// The payload's `$...` line (after any `\n` keepalives).
fn payload_header(c: &mut Conn) -> Result<Framing, String> {
    let header = loop {
        let l = c.line()?;
        if l.is_empty() {
            continue;
        }
        if l.starts_with('-') {
            return Err(format!("MASTER aborted replication with an error: {l}"));
        }
        break l;
    };
    let Some(spec) = header.strip_prefix('$') else {
        return Err(format!(
            "Bad protocol from MASTER, the first byte is not '$' (we received '{header}'), are you sure the host and port are right?"
        ));
    };
    if let Some(mark) = spec.strip_prefix("EOF:") {
        if mark.len() != 40 {
            return Err(format!("bad EOF mark from master: {header}"));
        }
        c.req.progress.total.store(-1, Ordering::Relaxed);
        return Ok(Framing::Mark(mark.as_bytes().to_vec()));
    }
    let len: u64 = spec
        .parse()
        .map_err(|_| format!("bad payload length from master: {header}"))?;
    c.req.progress.total.store(len as i64, Ordering::Relaxed);
    Ok(Framing::Len(len))
}

/// Passes the payload, in the pieces it arrives in, to `sink`; returns
/// its length.
fn copy_payload(
    c: &mut Conn,
    framing: &Framing,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<u64, String> {
    match framing {
        Framing::Mark(mark) => copy_until_mark(c, sink, mark),
        Framing::Len(len) => copy_exact(c, sink, *len).map(|_| *len),
    }
}

/// Reads the snapshot into a temp file renamed to `dbfilename`.
fn receive_payload(c: &mut Conn) -> Result<(PathBuf, u64), String> {
    let framing = payload_header(c)?;
    let tmp = c.req.dir.join(format!(
        "temp-{}.{}.rdb",
        crate::server::unix_ms(),
        std::process::id()
    ));
    let file = std::fs::File::create(&tmp).map_err(|e| {
        format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}")
    })?;
    // As Redis's replica (`rdb_fsync_range` every 8 MiB received): the
    // disk writes while the payload arrives, and the final fsync below
    // finds little left to flush.
    let mut writeback = crate::persistence::writeback::Writeback::new(&file);
    let mut write = |d: &[u8]| {
        writeback
            .write_all(&file, d)
            .map_err(|e| format!("Write error writing to the DB on disk: {e}"))?;
        Ok(())
    };
    let n = match copy_payload(c, &framing, &mut write) {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let io = |e: std::io::Error| format!("Failed trying to write the synchronization DB: {e}");
    file.sync_all().map_err(io)?;
    drop(file);
    let dest = c.req.dir.join(&c.req.dbfilename);
    std::fs::rename(&tmp, &dest).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!(
            "Failed trying to rename the temp DB into {}: {e}",
            dest.display()
        )
    })?;
    tracing::info!("MASTER <-> REPLICA sync: received {n} bytes of payload");
    Ok((dest, n))
}

/// Pieces in flight between the socket and the loader: bounded, so a
/// loader slower than the link holds the master back (TCP) instead of
/// buffering the payload in memory.
const LOAD_QUEUE: usize = 32;

/// `repl-diskless-load`: the payload is parsed as it arrives (Redis's
/// `rdbLoadRio` on the socket) by a loader thread, into a fresh keyspace,
/// while this thread keeps reading the socket and checksums the bytes on
/// the way. Transfer and load overlap; nothing is written to disk. A
/// dropped link, a corrupt payload or a CRC mismatch returns an error and
/// the half-loaded keyspace is dropped: the loop never sees it.
fn receive_and_load(c: &mut Conn) -> Result<(Keyspace, Option<LoadStats>, u64), String> {
    let framing = payload_header(c)?;
    c.req.progress.loading.store(true, Ordering::Relaxed);
    tracing::info!(
        "MASTER <-> REPLICA sync: Loading DB in memory from the socket as it arrives (repl-diskless-load)"
    );
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(LOAD_QUEUE);
    let req = c.req;
    let started = Instant::now();
    let payload_len = match &framing {
        Framing::Len(n) => Some(*n),
        Framing::Mark(_) => None,
    };
    std::thread::scope(|s| {
        let loader = std::thread::Builder::new()
            .name("repl-load".into())
            .spawn_scoped(s, move || {
                let mut ks = Keyspace::new(req.databases);
                let now = crate::server::unix_ms();
                let r = crate::persistence::load::load_stream(
                    &mut ks,
                    rx.into_iter(),
                    payload_len,
                    now,
                    &req.load_config,
                );
                (ks, r)
            })
            .map_err(|e| format!("Can't start the loader thread: {e}"))?;
        let mut crc = PayloadCrc::default();
        let mut send = |d: &[u8]| {
            crc.update(d);
            tx.send(d.to_vec())
                .map_err(|_| "the loader stopped".to_string())
        };
        let received = copy_payload(c, &framing, &mut send);
        // The loader sees the end of the pieces (normal or not).
        drop(tx);
        let (ks, loaded) = loader
            .join()
            .map_err(|_| "the loader thread panicked".to_string())?;
        let fail = |e: String| {
            format!("Failed trying to load the MASTER synchronization DB from socket: {e}")
        };
        let err = match (received, loaded) {
            (Ok(n), Ok((stats, summary))) => {
                if summary.len as u64 != n {
                    return Err(fail(format!(
                        "the RDB ends after {} of the {n} bytes of payload",
                        summary.len
                    )));
                }
                if let ferrokv_rdb::Checksum::NotVerified(stored) = summary.checksum {
                    let computed = crc.crc;
                    if computed != stored {
                        return Err(fail(format!(
                            "RDB CRC error: checksum mismatch, the trailer holds {stored:#018x}, the payload hashes to {computed:#018x}"
                        )));
                    }
                }
                tracing::info!(
                    "MASTER <-> REPLICA sync: received and loaded {n} bytes of payload ({} keys) in {:.3}s",
                    stats.keys,
                    started.elapsed().as_secs_f64()
                );
                return Ok((ks, Some(stats), n));
            }
            // The link failed (the loader then saw a cut payload): the
            // link's error is the reason.
            (Err(e), Ok(_)) | (Err(e), Err(_)) if e != "the loader stopped" => e,
            // The loader failed (a corrupt payload) and stopped the reading.
            (_, Err(e)) => fail(e),
            (Err(e), Ok(_)) => e,
        };
        Err(err)
    })
}

/// CRC64 of the payload minus its last 8 bytes (the RDB's trailer, kept
/// aside), computed as the pieces pass.
#[derive(Default)]
struct PayloadCrc {
    crc: u64,
    last: [u8; 8],
    have: usize,
}

impl PayloadCrc {
    fn update(&mut self, d: &[u8]) {
        use ferrokv_rdb::crc64::crc64;
        if d.len() >= 8 {
            self.crc = crc64(self.crc, &self.last[..self.have]);
            let (body, tail) = d.split_at(d.len() - 8);
            self.crc = crc64(self.crc, body);
            self.last.copy_from_slice(tail);
            self.have = 8;
            return;
        }
        let spill = (self.have + d.len()).saturating_sub(8);
        if spill > 0 {
            self.crc = crc64(self.crc, &self.last[..spill]);
            self.last.copy_within(spill..self.have, 0);
            self.have -= spill;
        }
        self.last[self.have..self.have + d.len()].copy_from_slice(d);
        self.have += d.len();
    }
}

fn copy_exact(
    c: &mut Conn,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    len: u64,
) -> Result<(), String> {
    let mut left = len;
    while left > 0 {
        if c.start == c.end {
            c.fill()?;
        }
        let n = ((c.end - c.start) as u64).min(left) as usize;
        sink(&c.buf[c.start..c.start + n])?;
        c.start += n;
        left -= n as u64;
        c.req.progress.read.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Copies until the 40-byte end mark. As Redis's `readSyncBulkPayload`,
/// only the tail of what has arrived is compared with the mark: the master
/// sends nothing after it until our first `REPLCONF ACK`, so the mark is
/// always the last thing read. (Searching every position for it cost the
/// replica more CPU than the rest of the transfer.)
fn copy_until_mark(
    c: &mut Conn,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    mark: &[u8],
) -> Result<u64, String> {
    let mut written = 0u64;
    loop {
        let avail = &c.buf[c.start..c.end];
        if avail.ends_with(mark) {
            let p = avail.len() - mark.len();
            sink(&avail[..p])?;
            written += p as u64;
            c.req.progress.read.fetch_add(p as u64, Ordering::Relaxed);
            c.start = c.end;
            return Ok(written);
        }
        // Keep the last bytes that could be (the start of) the mark.
        let keep = avail.len().min(mark.len());
        let n = avail.len() - keep;
        if n > 0 {
            sink(&avail[..n])?;
            written += n as u64;
            c.req.progress.read.fetch_add(n as u64, Ordering::Relaxed);
            c.start += n;
        }
        c.fill()?;
    }
}
