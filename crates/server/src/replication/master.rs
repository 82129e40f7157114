//! The master side: replicas attached with `PSYNC`/`SYNC`, the stream fed
//! to them, full syncs from the snapshot producer, `WAIT`.
//!
//! A replica is a client connection that asked for the stream. Its life:
//! `WaitStart` (a full sync waits for a snapshot to begin: another one may be
//! running, or `repl-diskless-sync-delay` gathers replicas into one
//! transfer) → `WaitEnd`/`Sending` (a snapshot is being made and/or sent;
//! the stream written meanwhile waits in `pending`) → `WaitAck` (diskless
//! only: the payload's end mark must be the last thing the replica reads
//! before it has loaded, so the stream waits for its first `REPLCONF ACK`, as
//! Redis 7.0 does) → `Online` (the stream goes to its output buffer).
//!
//! During a transfer the socket leaves the loop's poll and is handed,
//! switched to blocking with a `repl-timeout` write timeout, to a sender
//! thread: diskless, it forwards the producer's shared chunks as they come
//! (one copy in memory however many replicas); disk-based, it writes the
//! finished file from a memory mapping (`send` from a mapping measured
//! faster than `sendfile` over loopback on this machine). When the thread
//! is done the socket goes back to the loop.

use super::ReplState;
use crate::net::client::Client;
use crate::persistence::snapshot::SnapshotChunk;
use crate::persistence::SnapshotJob;
use crate::server::Server;
use std::collections::HashMap;
use std::io::Write;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    WaitStart,
    WaitEnd,
    Sending,
    WaitAck,
    /// RDMA full sync: `+RDMAFULLSYNC` sent; the snapshot moves over
    /// RDMA (rdma/master.rs) and the stream waits in `pending` until
    /// `REPLCONF rdma-done`.
    RdmaTransfer,
    Online,
}

/// One attached replica.
pub struct ReplicaLink {
    pub client_id: u64,
    pub ip: String,
    pub listening_port: u16,
    pub capa_eof: bool,
    pub capa_psync2: bool,
    /// `SYNC` rather than `PSYNC`: no `+FULLRESYNC` line.
    pub old_sync: bool,
    pub state: ReplicaState,
    /// Stream bytes written since its snapshot began, sent once it is online.
    pub pending: Vec<u8>,
    pub ack_offset: i64,
    /// The offset its AOF made durable (`REPLCONF ACK … FACK`, Redis 7.2;
    /// a replica without AOF, or an older one, never sends it).
    pub aof_ack_offset: i64,
    pub ack_time: Instant,
    pub since: Instant,
    /// A duplicate of the socket, to stop a sender thread when the
    /// replica is dropped.
    socket: Option<socket2::Socket>,
    /// Its slot in the client table, once looked up.
    token: Option<usize>,
    /// The `+FULLRESYNC` line of a disk-based sync, sent with its payload.
    head: Vec<u8>,
    soft_limit_since: Option<Instant>,
    diskless: bool,
    /// It offered `capa rdma` and this master offers RDMA: its full sync
    /// is disk-based and answered with `+RDMAFULLSYNC`.
    pub rdma: bool,
    /// The replication offset its snapshot starts at.
    pub sync_offset: i64,
}

impl ReplicaLink {
    pub fn is_online(&self) -> bool {
        self.state == ReplicaState::Online
    }
    /// Online as Redis counts it: also while the first ACK after a
    /// diskless transfer is awaited (Redis's ONLINE with
    /// `repl_start_cmd_stream_on_ack`), for `min_slaves_good_slaves`.
    pub fn is_online_for_redis(&self) -> bool {
        matches!(self.state, ReplicaState::WaitAck | ReplicaState::Online)
    }
    /// The state's name in `INFO replication`.
    pub fn state_name(&self) -> &'static str {
        match self.state {
            ReplicaState::WaitStart => "wait_bgsave",
            ReplicaState::WaitEnd | ReplicaState::Sending | ReplicaState::RdmaTransfer => {
                "send_bulk"
            }
            ReplicaState::WaitAck | ReplicaState::Online => "online",
        }
    }
}

/// What a replica told us with `REPLCONF` before its `PSYNC`.
#[derive(Debug, Default, Clone)]
pub struct Handshake {
    pub listening_port: u16,
    pub ip: Option<String>,
    pub capa_eof: bool,
    pub capa_psync2: bool,
    pub capa_rdma: bool,
}

/// The snapshot being made for replicas.
#[derive(Debug, Clone, Copy)]
pub struct SyncJob {
    pub diskless: bool,
    pub offset: i64,
}

/// A client blocked in `WAIT` or `WAITAOF`.
pub struct Waiter {
    pub client_id: u64,
    pub offset: i64,
    pub numreplicas: usize,
    pub deadline: Option<Instant>,
    /// `WAITAOF`: the replicas count by their AOF's offset, and with
    /// `numlocal` the local AOF must have synced up to `seq` too.
    pub aof: Option<AofWait>,
}

/// What a `WAITAOF` waits for beyond its replicas.
#[derive(Clone, Copy)]
pub struct AofWait {
    pub seq: u64,
    pub numlocal: bool,
}

pub struct MasterSide {
    pub replicas: Vec<ReplicaLink>,
    pub handshakes: HashMap<u64, Handshake>,
    pub sync_job: Option<SyncJob>,
    pub waiters: Vec<Waiter>,
    /// A `WAIT` wants fresh ACKs: send `REPLCONF GETACK *` before sleeping.
    pub getack_wanted: bool,
    done_tx: Sender<(u64, Result<u64, String>)>,
    done_rx: Receiver<(u64, Result<u64, String>)>,
    /// A TLS replica's connection, back from its sender thread (which
    /// wrote the payload through the connection's own TLS session).
    tls_back_tx: Sender<(u64, Box<crate::net::tls::TlsStream>)>,
    tls_back_rx: Receiver<(u64, Box<crate::net::tls::TlsStream>)>,
    last_ping: Instant,
}

impl MasterSide {
    pub fn new() -> Self {
        let (done_tx, done_rx) = channel();
        let (tls_back_tx, tls_back_rx) = channel();
        MasterSide {
            replicas: Vec::new(),
            handshakes: HashMap::new(),
            sync_job: None,
            waiters: Vec::new(),
            getack_wanted: false,
            done_tx,
            done_rx,
            tls_back_tx,
            tls_back_rx,
            last_ping: Instant::now(),
        }
    }

    /// The client ids of the replicas attached now.
    pub fn replica_ids(&self) -> Vec<u64> {
        self.replicas.iter().map(|r| r.client_id).collect()
    }

    /// Whether a client is blocked in `WAIT` (it runs nothing more until then).
    #[inline]
    pub fn is_waiting(&self, client_id: u64) -> bool {
        !self.waiters.is_empty() && self.waiters.iter().any(|w| w.client_id == client_id)
    }

    fn get(&mut self, client_id: u64) -> Option<&mut ReplicaLink> {
        self.replicas.iter_mut().find(|r| r.client_id == client_id)
    }
}

impl Default for MasterSide {
    fn default() -> Self {
        Self::new()
    }
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

/// The slab token of the client with this id.
pub(crate) fn token_of(srv: &Server, id: u64) -> Option<usize> {
    srv.clients
        .iter()
        .find(|(_, c)| c.as_ref().is_some_and(|c| c.id == id))
        .map(|(t, _)| t)
}

impl Server {
    /// Feeds one propagated command to the replication stream (backlog and
    /// replicas), with a `SELECT` first when the stream's database differs.
    /// A replica feeds nothing of its own: it proxies its master's stream.
    pub fn repl_feed<T: AsRef<[u8]>>(&mut self, db: usize, argv: &[T]) {
        let r = &mut self.repl;
        if r.link.is_some() || (r.backlog.is_none() && r.master.replicas.is_empty()) {
            return;
        }
        let mut buf = std::mem::take(&mut r.scratch);
        buf.clear();
        crate::propagate::encode_command(&mut buf, &mut r.stream_db, db, argv);
        self.repl_feed_bytes(&buf);
        self.repl.scratch = buf;
    }

    /// Appends stream bytes to the backlog and every replica.
    pub fn repl_feed_bytes(&mut self, bytes: &[u8]) {
        self.repl.account(bytes);
        if self.repl.master.replicas.is_empty() {
            return;
        }
        let lim = self.config.output_limit_replica;
        let mut doomed = Vec::new();
        for r in self.repl.master.replicas.iter_mut() {
            let queued: usize = match r.state {
                ReplicaState::WaitStart => continue,
                ReplicaState::WaitEnd
                | ReplicaState::Sending
                | ReplicaState::WaitAck
                | ReplicaState::RdmaTransfer => {
                    r.pending.extend_from_slice(bytes);
                    r.pending.len()
                }
                ReplicaState::Online => {
                    // The cached slot, checked (slots are reused).
                    let cached = r.token.filter(
                        |&t| matches!(self.clients.get(t), Some(Some(c)) if c.id == r.client_id),
                    );
                    let Some(t) = cached.or_else(|| token_of_in(&self.clients, r.client_id)) else {
                        continue;
                    };
                    r.token = Some(t);
                    let Some(Some(c)) = self.clients.get_mut(t) else {
                        continue;
                    };
                    c.out.buf.extend_from_slice(bytes);
                    if !c.pending_write {
                        c.pending_write = true;
                        self.pending_writes.push(t);
                    }
                    c.pending_output()
                }
            };
            let queued = queued as u64;
            let hard = lim.hard > 0 && queued >= lim.hard;
            let soft = if lim.soft > 0 && queued >= lim.soft {
                r.soft_limit_since
                    .get_or_insert_with(Instant::now)
                    .elapsed()
                    >= Duration::from_secs(lim.soft_seconds)
            } else {
                r.soft_limit_since = None;
                false
            };
            if hard || soft {
                doomed.push(r.client_id);
            }
        }
        for id in doomed {
            tracing::warn!(
                "Client id={id} (replica) scheduled to be closed ASAP for overcoming of output buffer limits."
            );
            self.repl.stats.replica_outbuf_disconnections += 1;
            self.stats.client_outbuf_limit_disconnections += 1;
            self.drop_replica(id);
        }
    }

    /// Closes a replica's connection at the end of this turn.
    pub(crate) fn drop_replica(&mut self, id: u64) {
        if let Some(r) = self.repl.master.get(id) {
            if let Some(s) = r.socket.take() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
        if let Some(t) = token_of(self, id) {
            if !self.close_queue.contains(&t) {
                self.close_queue.push(t);
            }
        }
    }

    /// Closes every replica (our replication id or data changed under them).
    pub fn disconnect_replicas(&mut self) {
        for id in self.repl.master.replica_ids() {
            self.drop_replica(id);
        }
    }

    /// `REPLCONF <option> <value> ...` from a replica.
    pub fn replconf(&mut self, c: &mut Client, args: &[&[u8]]) {
        if args.len() == 2 && args[1].eq_ignore_ascii_case(b"rdma-done") {
            // The replica loaded an RDMA snapshot; never answered (the
            // stream follows on this link).
            self.rdma_done(c);
            return;
        }
        if args.len() == 3 && args[1].eq_ignore_ascii_case(b"rdma-endpoint") {
            // A `replica-rdma` replica asks where to move its link
            // (docs/rdma.md, "The replication link over RDMA").
            match self.repl.rdma.master.as_ref() {
                Some(m) if args[2].eq_ignore_ascii_case(b"stream") => {
                    c.out.simple(&m.endpoint.to_string())
                }
                _ => c
                    .out
                    .error("ERR this master offers no RDMA stream endpoint"),
            }
            return;
        }
        if args.len().is_multiple_of(2) {
            c.out.error(crate::commands::err::SYNTAX);
            return;
        }
        let hs = self.repl.master.handshakes.entry(c.id).or_default();
        let mut i = 1;
        while i + 1 < args.len() {
            let (k, v) = (args[i].to_ascii_lowercase(), args[i + 1]);
            match &k[..] {
                b"listening-port" => match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok())
                {
                    Some(p) => hs.listening_port = p,
                    None => {
                        c.out.error(crate::commands::err::NOT_INTEGER);
                        return;
                    }
                },
                b"ip-address" => hs.ip = Some(String::from_utf8_lossy(v).into_owned()),
                b"capa" => {
                    if v.eq_ignore_ascii_case(b"eof") {
                        hs.capa_eof = true;
                    } else if v.eq_ignore_ascii_case(b"psync2") {
                        hs.capa_psync2 = true;
                    } else if v.eq_ignore_ascii_case(b"rdma") {
                        hs.capa_rdma = true;
                    }
                }
                b"ack" => {
                    // Sent by replicas, never answered; `FACK <offset>`
                    // after it (Redis 7.2) is what their AOF synced.
                    let num = |v: &[u8]| {
                        std::str::from_utf8(v)
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok())
                    };
                    let off = num(v);
                    let fack = match args.get(i + 2) {
                        Some(k) if k.eq_ignore_ascii_case(b"fack") => {
                            args.get(i + 3).and_then(|v| num(v))
                        }
                        _ => None,
                    };
                    self.replica_acked(c, off, fack);
                    return;
                }
                b"getack" => {
                    // Only a master asks; a replica answers in replica.rs.
                    return;
                }
                b"rdb-only" | b"rdb-filter-only" => {}
                _ => {
                    c.out.error(&format!(
                        "ERR Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&k)
                    ));
                    return;
                }
            }
            i += 2;
        }
        c.out.ok();
    }

    /// `REPLCONF ACK` from replica `c` (which is running this command, so
    /// it is out of the client table: its output is written directly).
    fn replica_acked(&mut self, c: &mut Client, off: Option<i64>, fack: Option<i64>) {
        let Some(r) = self.repl.master.get(c.id) else {
            return;
        };
        if let Some(off) = off {
            r.ack_offset = r.ack_offset.max(off);
        }
        if let Some(fack) = fack {
            r.aof_ack_offset = r.aof_ack_offset.max(fack);
        }
        r.ack_time = Instant::now();
        if r.state == ReplicaState::WaitAck {
            // The replica loaded the payload: now the stream may flow.
            r.state = ReplicaState::Online;
            let pending = std::mem::take(&mut r.pending);
            c.out.buf.extend_from_slice(&pending);
        }
    }

    /// `PSYNC <replid> <offset>` (or `SYNC` with `old_sync`).
    pub fn psync(&mut self, c: &mut Client, args: &[&[u8]], old_sync: bool) {
        if self.repl.master.get(c.id).is_some() {
            return;
        }
        // `PSYNC <replid> <offset> FAILOVER`: our master hands over.
        if !old_sync && args.len() > 3 && args[3].eq_ignore_ascii_case(b"failover") {
            let peer = format!("id={} addr={}", c.id, c.addr);
            if let Err(e) = self.psync_failover_request(args[1], &peer) {
                c.out.error(e);
                return;
            }
        }
        if self.repl.failover.state != super::failover::FailoverState::NoFailover {
            c.out.error("NOMASTERLINK Can't SYNC while failing over");
            return;
        }
        if let Some(l) = &self.repl.link {
            if !l.is_up() {
                c.out
                    .error("NOMASTERLINK Can't SYNC while not connected with my master");
                return;
            }
        }
        let hs = self
            .repl
            .master
            .handshakes
            .remove(&c.id)
            .unwrap_or_default();
        let ip = hs.ip.clone().unwrap_or_else(|| c.addr.host());
        let mut link = ReplicaLink {
            client_id: c.id,
            ip,
            listening_port: hs.listening_port,
            capa_eof: hs.capa_eof,
            capa_psync2: hs.capa_psync2,
            old_sync,
            state: ReplicaState::WaitStart,
            pending: Vec::new(),
            ack_offset: 0,
            aof_ack_offset: 0,
            ack_time: Instant::now(),
            since: Instant::now(),
            socket: None,
            token: (c.token != usize::MAX).then_some(c.token),
            head: Vec::new(),
            soft_limit_since: None,
            diskless: false,
            rdma: hs.capa_rdma && !old_sync && self.rdma_offered(),
            sync_offset: 0,
        };
        if !old_sync {
            let id = String::from_utf8_lossy(args[1]).into_owned();
            let off = std::str::from_utf8(args[2])
                .ok()
                .and_then(|s| s.parse::<i64>().ok());
            if let Some(off) = off {
                if self.try_partial_resync(c, &id, off, &mut link) {
                    self.repl.master.replicas.push(link);
                    return;
                }
            }
        }
        if !link.rdma
            && c.conn.stream.as_ref().is_some_and(|s| {
                !s.has_socket() && s.transport() != crate::net::conn::Transport::Tls
            })
        {
            // The payload's sender thread writes to a socket; over RDMA the
            // snapshot moves by the one-sided push only.
            c.out
                .error("ERR a full sync over an RDMA connection needs REPLCONF capa rdma");
            return;
        }
        self.repl.stats.sync_full += 1;
        tracing::info!(
            "Replica {}:{} asks for synchronization (full)",
            link.ip,
            link.listening_port
        );
        self.repl.master.replicas.push(link);
        if self.repl.backlog.is_none() {
            if self.repl.link.is_none() {
                // A backlog created from scratch starts a new history.
                self.repl.replid = crate::server::random_hex(&mut self.rng, 40);
                self.repl.clear_replid2();
            }
            self.create_backlog();
        }
        // The transfer starts from `replication_tick` before the loop sleeps.
    }

    pub(crate) fn create_repl_backlog(&mut self) {
        self.create_backlog();
    }

    fn create_backlog(&mut self) {
        let size = self.config.repl.backlog_size as usize;
        self.repl.backlog = Some(super::backlog::ReplicationBacklog::new(
            size,
            self.repl.master_repl_offset,
        ));
    }

    /// Redis's `masterTryPartialResynchronization`.
    fn try_partial_resync(
        &mut self,
        c: &mut Client,
        id: &str,
        off: i64,
        link: &mut ReplicaLink,
    ) -> bool {
        let r = &self.repl;
        let same_history = id == r.replid || (id == r.replid2 && off <= r.second_replid_offset);
        if !same_history {
            if id != "?" {
                if id != r.replid && id != r.replid2 {
                    tracing::info!(
                        "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{id}', my replication IDs are '{}' and '{}')",
                        r.replid,
                        r.replid2
                    );
                } else {
                    tracing::info!(
                        "Partial resynchronization not accepted: Requested offset for second ID was {off}, but I can reply up to {}",
                        r.second_replid_offset
                    );
                }
                self.repl.stats.sync_partial_err += 1;
            }
            return false;
        }
        let Some(b) = r.backlog.as_ref().filter(|b| b.covers(off)) else {
            tracing::info!(
                "Unable to partial resync with replica {}:{} for lack of backlog (Replica request was: {off}).",
                link.ip,
                link.listening_port
            );
            self.repl.stats.sync_partial_err += 1;
            return false;
        };
        if link.capa_psync2 {
            c.out
                .buf
                .extend_from_slice(format!("+CONTINUE {}\r\n", r.replid).as_bytes());
        } else {
            c.out.buf.extend_from_slice(b"+CONTINUE\r\n");
        }
        b.copy_from(off, &mut c.out.buf);
        link.state = ReplicaState::Online;
        link.ack_offset = off - 1;
        tracing::info!(
            "Partial resynchronization request from {}:{} accepted. Sending {} bytes of backlog starting from offset {off}.",
            link.ip,
            link.listening_port,
            r.master_repl_offset + 1 - off
        );
        self.repl.stats.sync_partial_ok += 1;
        true
    }

    /// The master side's work before the loop sleeps: start syncs, take
    /// finished transfers back, ask for ACKs, release `WAIT`ers. Returns the
    /// tokens of clients whose buffered input must be processed now.
    pub fn master_tick(&mut self) -> Vec<usize> {
        let mut resume = Vec::new();
        self.start_full_syncs();
        self.rdma_tick();
        while let Ok((id, res)) = self.repl.master.done_rx.try_recv() {
            self.transfer_done(id, res, &mut resume);
        }
        // Not during a client pause (the stream holds still, as Redis
        // 7.0's beforeSleep): WAIT then counts the replicas' own ACKs,
        // and the GETACK goes once the pause ends.
        if self.repl.master.getack_wanted && !self.pause.active() {
            self.repl.master.getack_wanted = false;
            self.send_getack();
        }
        if !self.repl.master.waiters.is_empty() {
            self.release_waiters(&mut resume);
        }
        resume
    }

    /// Starts the snapshot replicas in `WaitStart` need, or attaches them
    /// to a disk-based one in progress.
    fn start_full_syncs(&mut self) {
        let waiting: Vec<usize> = (0..self.repl.master.replicas.len())
            .filter(|&i| self.repl.master.replicas[i].state == ReplicaState::WaitStart)
            .collect();
        if waiting.is_empty() {
            return;
        }
        if let Some(job) = self.repl.master.sync_job {
            // A disk-based sync in progress serves late comers too: they
            // get a copy of the stream written since it began.
            if !job.diskless && self.persistence.job.is_some() {
                let donor = self
                    .repl
                    .master
                    .replicas
                    .iter()
                    .find(|r| r.state == ReplicaState::WaitEnd && !r.diskless)
                    .map(|r| r.pending.clone());
                if let Some(pending) = donor {
                    for &i in &waiting {
                        let r = &mut self.repl.master.replicas[i];
                        r.state = ReplicaState::WaitEnd;
                        r.pending = pending.clone();
                        r.sync_offset = job.offset;
                        if !r.old_sync {
                            r.head = format!("+FULLRESYNC {} {}\r\n", self.repl.replid, job.offset)
                                .into_bytes();
                        }
                    }
                    tracing::info!("Waiting for end of BGSAVE for SYNC");
                }
            }
            return;
        }
        if self.persistence.job.is_some() {
            return;
        }
        let cfg = &self.config.repl;
        // RDMA syncs are disk-based: the file is mapped and pushed.
        let diskless = cfg.diskless_sync
            && waiting.iter().all(|&i| {
                let r = &self.repl.master.replicas[i];
                r.capa_eof && !r.rdma
            });
        if diskless {
            let oldest = waiting
                .iter()
                .map(|&i| self.repl.master.replicas[i].since)
                .min()
                .expect("non-empty");
            let enough = cfg.diskless_sync_max_replicas > 0
                && waiting.len() as u64 >= cfg.diskless_sync_max_replicas;
            if !enough && oldest.elapsed() < Duration::from_secs(cfg.diskless_sync_delay) {
                return;
            }
        }
        let offset = self.repl.master_repl_offset;
        let started = if diskless {
            self.start_streaming_snapshot()
        } else {
            self.start_snapshot_for_replicas()
        };
        if let Err(e) = started {
            tracing::warn!("Can't start the snapshot for replicas: {e}");
            return;
        }
        tracing::info!(
            "Starting BGSAVE for SYNC with target: {}",
            if diskless { "replicas sockets" } else { "disk" }
        );
        self.repl.master.sync_job = Some(SyncJob { diskless, offset });
        // The stream after the snapshot starts with a SELECT.
        self.repl.stream_db = None;
        for i in waiting {
            let head = {
                let r = &self.repl.master.replicas[i];
                if r.old_sync {
                    Vec::new()
                } else {
                    format!("+FULLRESYNC {} {offset}\r\n", self.repl.replid).into_bytes()
                }
            };
            let r = &mut self.repl.master.replicas[i];
            r.state = ReplicaState::WaitEnd;
            r.diskless = diskless;
            r.sync_offset = offset;
            r.pending.clear();
            if diskless {
                let id = r.client_id;
                let rx = self
                    .persistence
                    .job
                    .as_mut()
                    .and_then(|j| j.subscribe())
                    .expect("a job that has sent nothing yet");
                let mark = crate::server::random_hex(&mut self.rng, 40).into_bytes();
                let mut head = head;
                head.extend_from_slice(b"$EOF:");
                head.extend_from_slice(&mark);
                head.extend_from_slice(b"\r\n");
                self.spawn_sender(id, head, Payload::Chunks(rx), mark);
            } else {
                // The +FULLRESYNC line goes out with the payload.
                self.repl.master.replicas[i].head = head;
            }
        }
    }

    /// A snapshot for replica sockets only (no file), with the replication
    /// id and offset in its header as Redis writes them.
    fn start_streaming_snapshot(&mut self) -> Result<(), String> {
        let meta = self.snapshot_meta(true, false, self.config.rdb_key_save_delay);
        let job = SnapshotJob::start_streaming(&mut self.keyspace, self.dirty, meta);
        self.persistence.job = Some(job);
        self.persistence.save_started(self.config.bgsave_loop_share);
        Ok(())
    }

    /// Called when a snapshot ends: a disk-based one replicas wait for is
    /// sent to them now; a streaming one has fed its senders already.
    pub fn repl_snapshot_done(&mut self, streaming: bool, path: &std::path::Path, ok: bool) {
        let Some(job) = self.repl.master.sync_job else {
            return;
        };
        if job.diskless != streaming {
            return;
        }
        self.repl.master.sync_job = None;
        if streaming {
            return;
        }
        let ids: Vec<u64> = self
            .repl
            .master
            .replicas
            .iter()
            .filter(|r| r.state == ReplicaState::WaitEnd && !r.diskless)
            .map(|r| r.client_id)
            .collect();
        let map = if ok {
            std::fs::File::open(path)
                .and_then(|f| {
                    // SAFETY: the file is ours; a later save replaces it by
                    // rename, which leaves this mapping's inode intact.
                    unsafe { memmap2::Mmap::map(&f) }
                })
                .map(Arc::new)
                .map_err(|e| tracing::warn!("Can't map {} for replicas: {e}", path.display()))
                .ok()
        } else {
            None
        };
        let mut rdma_ids = Vec::new();
        for id in ids {
            let Some(map) = map.clone() else {
                tracing::warn!("SYNC failed. BGSAVE child returned an error");
                self.drop_replica(id);
                continue;
            };
            if self.repl.master.get(id).is_some_and(|r| r.rdma) {
                rdma_ids.push(id);
                continue;
            }
            let r = self.repl.master.get(id).expect("listed above");
            let mut head = std::mem::take(&mut r.head);
            head.extend_from_slice(format!("${}\r\n", map.len()).as_bytes());
            self.spawn_sender(id, head, Payload::File(map), Vec::new());
        }
        if let (false, Some(map)) = (rdma_ids.is_empty(), map) {
            self.rdma_snapshot_ready(rdma_ids, map);
        }
    }

    /// Takes a replica's socket out of the loop and starts its sender.
    fn spawn_sender(&mut self, id: u64, head: Vec<u8>, payload: Payload, trailer: Vec<u8>) {
        let Some(t) = token_of(self, id) else {
            return;
        };
        let Some(Some(c)) = self.clients.get_mut(t) else {
            return;
        };
        let Some(stream) = c.conn.stream.as_mut() else {
            return;
        };
        if let Some(reg) = &self.repl.registry {
            let _ = reg.deregister(stream);
        }
        c.conn.want_writable = false;
        if let crate::net::conn::Conn::Tls(_) = stream {
            let Some(crate::net::conn::Conn::Tls(tls)) = c.conn.stream.take() else {
                unreachable!("checked above");
            };
            self.spawn_tls_sender(id, tls, head, payload, trailer);
            return;
        }
        let dup = stream.try_clone_socket();
        let dup = match dup {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("Can't hand the replica socket to a sender: {e}");
                self.drop_replica(id);
                return;
            }
        };
        let keep = dup.try_clone().ok();
        let timeout = Duration::from_secs(self.config.repl.timeout.max(1));
        let done = self.repl.master.done_tx.clone();
        if let Some(r) = self.repl.master.get(id) {
            r.state = ReplicaState::Sending;
            r.socket = keep;
        }
        let spawned = std::thread::Builder::new()
            .name("repl-sender".into())
            .spawn(move || {
                let res = send_payload(dup, &head, payload, &trailer, timeout);
                let _ = done.send((id, res));
            });
        if let Err(e) = spawned {
            tracing::warn!("Can't start a replica sender: {e}");
            self.drop_replica(id);
        }
    }

    /// [`Self::spawn_sender`] for a TLS replica: the thread takes the whole
    /// connection (its rustls session goes on encrypting the payload) and
    /// hands it back on `tls_back` before it reports.
    fn spawn_tls_sender(
        &mut self,
        id: u64,
        mut conn: Box<crate::net::tls::TlsStream>,
        head: Vec<u8>,
        payload: Payload,
        trailer: Vec<u8>,
    ) {
        use std::os::fd::AsFd;
        let keep = conn
            .sock
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .map(socket2::Socket::from);
        let timeout = Duration::from_secs(self.config.repl.timeout.max(1));
        let done = self.repl.master.done_tx.clone();
        let back = self.repl.master.tls_back_tx.clone();
        if let Some(r) = self.repl.master.get(id) {
            r.state = ReplicaState::Sending;
            r.socket = keep;
        }
        let spawned = std::thread::Builder::new()
            .name("repl-sender".into())
            .spawn(move || {
                let sock = socket2::SockRef::from(&conn.sock);
                let _ = sock.set_nonblocking(false);
                let _ = sock.set_write_timeout(Some(timeout));
                let res = write_payload(&mut *conn, &head, payload, &trailer).and_then(|n| {
                    // What rustls still holds goes out before the loop resumes.
                    let deadline = Instant::now() + timeout;
                    while !conn.drain().map_err(|e| e.to_string())? {
                        if Instant::now() >= deadline {
                            return Err("timeout writing to the replica".into());
                        }
                    }
                    Ok(n)
                });
                let sock = socket2::SockRef::from(&conn.sock);
                let _ = sock.set_write_timeout(None);
                let _ = sock.set_nonblocking(true);
                let _ = back.send((id, conn));
                let _ = done.send((id, res));
            });
        if let Err(e) = spawned {
            tracing::warn!("Can't start a replica sender: {e}");
            self.drop_replica(id);
        }
    }

    fn transfer_done(&mut self, id: u64, res: Result<u64, String>, resume: &mut Vec<usize>) {
        // A TLS replica's connection, back from its sender.
        while let Ok((cid, conn)) = self.repl.master.tls_back_rx.try_recv() {
            if let Some(t) = token_of(self, cid) {
                if let Some(Some(c)) = self.clients.get_mut(t) {
                    c.conn.stream = Some(crate::net::conn::Conn::Tls(conn));
                }
            }
        }
        let Some(r) = self.repl.master.get(id) else {
            return;
        };
        r.socket = None;
        let n = match res {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("Failed sending the snapshot to replica id={id}: {e}");
                self.drop_replica(id);
                return;
            }
        };
        self.repl.stats.rdb_bytes_sent += n;
        self.stats.net_repl_output_bytes += n;
        let r = self.repl.master.get(id).expect("found above");
        r.ack_time = Instant::now();
        let diskless = r.diskless;
        tracing::info!("Synchronization with replica id={id} succeeded ({n} bytes)");
        let Some(t) = token_of(self, id) else {
            return;
        };
        let Some(Some(c)) = self.clients.get_mut(t) else {
            return;
        };
        let Some(stream) = c.conn.stream.as_mut() else {
            return;
        };
        let back = stream
            .set_nonblocking()
            .and_then(|_| match &self.repl.registry {
                Some(reg) => reg.register(stream, mio::Token(t), mio::Interest::READABLE),
                None => Ok(()),
            });
        if let Err(e) = back {
            tracing::warn!("Can't give the replica socket back to the loop: {e}");
            self.drop_replica(id);
            return;
        }
        // Anything the replica sent meanwhile (its first ACK) is read now.
        resume.push(t);
        let r = self.repl.master.get(id).expect("found above");
        if diskless {
            r.state = ReplicaState::WaitAck;
        } else {
            r.state = ReplicaState::Online;
            let pending = std::mem::take(&mut r.pending);
            let c = self.clients[t].as_mut().expect("present");
            c.out.buf.extend_from_slice(&pending);
            if !c.pending_write {
                c.pending_write = true;
                self.pending_writes.push(t);
            }
        }
    }

    /// Asks every replica for an ACK now (`REPLCONF GETACK *` in the
    /// stream; a replica, whose stream is its master's, asks nothing).
    pub fn send_getack(&mut self) {
        if self.repl.link.is_none() && !self.repl.master.replicas.is_empty() {
            self.repl_feed_bytes(GETACK);
        }
    }

    /// `WAIT numreplicas timeout`: replies now if enough replicas have the
    /// stream up to now, else blocks the client (not the loop).
    pub fn wait_command(&mut self, c: &mut Client, numreplicas: usize, timeout_ms: u64) {
        let offset = self.repl.master_repl_offset;
        let acked = self.acked_replicas(offset);
        if acked >= numreplicas {
            c.out.int(acked as i64);
            return;
        }
        self.repl.master.waiters.push(Waiter {
            client_id: c.id,
            offset,
            numreplicas,
            deadline: (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms)),
            aof: None,
        });
        self.repl.master.getack_wanted = true;
    }

    /// `WAITAOF numlocal numreplicas timeout` (Redis 7.2), its arguments
    /// checked: answers `[local, replicas]` at once when the client's last
    /// write is already synced where asked (or it may not block: MULTI),
    /// else blocks it until it is or the timeout passes.
    pub fn waitaof_command(
        &mut self,
        c: &mut Client,
        numlocal: bool,
        numreplicas: usize,
        timeout_ms: u64,
        may_block: bool,
    ) {
        let w = AofWait {
            seq: c.wseq,
            numlocal,
        };
        let (local, acked) = self.aof_acks(c.woff, w);
        if (acked >= numreplicas && (local || !numlocal)) || !may_block {
            c.out.array(2);
            c.out.int(local as i64);
            c.out.int(acked as i64);
            return;
        }
        self.repl.master.waiters.push(Waiter {
            client_id: c.id,
            offset: c.woff,
            numreplicas,
            deadline: (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms)),
            aof: Some(w),
        });
        self.repl.master.getack_wanted = true;
    }

    /// Whether the local AOF synced the write `w` waits for, and how many
    /// online replicas' AOFs reached `offset`.
    fn aof_acks(&self, offset: i64, w: AofWait) -> (bool, usize) {
        let local = self.aof.is_some() && self.aof_durable.seq >= w.seq;
        let acked = self
            .repl
            .master
            .replicas
            .iter()
            .filter(|r| r.is_online() && r.aof_ack_offset >= offset)
            .count();
        (local, acked)
    }

    fn acked_replicas(&self, offset: i64) -> usize {
        self.repl
            .master
            .replicas
            .iter()
            .filter(|r| r.is_online() && r.ack_offset >= offset)
            .count()
    }

    fn release_waiters(&mut self, resume: &mut Vec<usize>) {
        let now = Instant::now();
        let waiters = std::mem::take(&mut self.repl.master.waiters);
        for w in waiters {
            let (local, acked) = match w.aof {
                Some(a) => self.aof_acks(w.offset, a),
                None => (true, self.acked_replicas(w.offset)),
            };
            let local_done = local || w.aof.is_some_and(|a| !a.numlocal);
            if (acked < w.numreplicas || !local_done) && w.deadline.is_none_or(|d| now < d) {
                self.repl.master.waiters.push(w);
                continue;
            }
            let Some(t) = token_of(self, w.client_id) else {
                continue;
            };
            if let Some(Some(c)) = self.clients.get_mut(t) {
                if w.aof.is_some() {
                    c.out.array(2);
                    c.out.int(local as i64);
                }
                c.out.int(acked as i64);
                if !c.pending_write {
                    c.pending_write = true;
                    self.pending_writes.push(t);
                }
                resume.push(t);
            }
        }
    }

    /// Once a second: PINGs in the stream, replica timeouts, the backlog's
    /// size and time to live.
    pub fn master_cron(&mut self) {
        let cfg = self.config.repl.clone();
        self.rdma_cron();
        // No PING while a failover waits for its target's offset to
        // match ours (Redis skips it during a failover's pause too).
        if self.repl.link.is_none()
            && self.repl.failover.state == super::failover::FailoverState::NoFailover
            && !self.repl.master.replicas.is_empty()
            && self.repl.master.last_ping.elapsed()
                >= Duration::from_secs(cfg.ping_replica_period.max(1))
        {
            self.repl.master.last_ping = Instant::now();
            self.repl_feed_bytes(PING);
        }
        let timed_out: Vec<u64> = self
            .repl
            .master
            .replicas
            .iter()
            .filter(|r| r.is_online() && r.ack_time.elapsed() > Duration::from_secs(cfg.timeout))
            .map(|r| r.client_id)
            .collect();
        for id in timed_out {
            tracing::warn!("Disconnecting timedout replica (streaming sync): id={id}");
            self.drop_replica(id);
        }
        if let Some(b) = &self.repl.backlog {
            if b.size() != cfg.backlog_size as usize {
                // As Redis: a new size starts an empty ring.
                self.create_backlog();
            }
        }
        if self.repl.master.replicas.is_empty()
            && self.repl.link.is_none()
            && self.repl.backlog.is_some()
            && cfg.backlog_ttl > 0
            && self.repl.no_replicas_since.elapsed() > Duration::from_secs(cfg.backlog_ttl)
        {
            tracing::info!(
                "Replication backlog freed after {} seconds without connected replicas.",
                cfg.backlog_ttl
            );
            self.repl.backlog = None;
            self.repl.replid = crate::server::random_hex(&mut self.rng, 40);
            self.repl.clear_replid2();
        }
        // The soft output limit is time based: check lagging replicas again.
        if self
            .repl
            .master
            .replicas
            .iter()
            .any(|r| r.soft_limit_since.is_some())
        {
            self.repl_feed_bytes(b"");
        }
    }

    /// A replica's connection closed.
    pub fn replica_closed(&mut self, id: u64) {
        self.rdma_replica_closed(id);
        self.repl.master.handshakes.remove(&id);
        self.repl.master.waiters.retain(|w| w.client_id != id);
        if let Some(i) = self
            .repl
            .master
            .replicas
            .iter()
            .position(|r| r.client_id == id)
        {
            let r = self.repl.master.replicas.remove(i);
            if let Some(s) = r.socket {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            tracing::info!(
                "Connection with replica {}:{} lost.",
                r.ip,
                r.listening_port
            );
            if self.repl.master.replicas.is_empty() {
                self.repl.no_replicas_since = Instant::now();
            }
        }
    }
}

fn token_of_in(clients: &slab::Slab<Option<Box<Client>>>, id: u64) -> Option<usize> {
    clients
        .iter()
        .find(|(_, c)| c.as_ref().is_some_and(|c| c.id == id))
        .map(|(t, _)| t)
}

/// What a sender thread sends after the head.
pub enum Payload {
    /// Diskless: the snapshot producer's chunks as they come.
    Chunks(crate::persistence::snapshot::Subscription),
    /// Disk-based: the finished file, mapped.
    File(Arc<memmap2::Mmap>),
}

/// The sender thread's work: head, payload, trailer, on a blocking socket
/// with a write timeout; the socket is left non-blocking again for the loop.
fn send_payload(
    mut s: socket2::Socket,
    head: &[u8],
    payload: Payload,
    trailer: &[u8],
    timeout: Duration,
) -> Result<u64, String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let res = write_payload(&mut s, head, payload, trailer);
    let _ = s.set_nonblocking(true);
    res
}

/// Writes a full sync's head, payload and trailer; the payload's length.
fn write_payload(
    s: &mut impl Write,
    head: &[u8],
    payload: Payload,
    trailer: &[u8],
) -> Result<u64, String> {
    (|| -> Result<u64, String> {
        let io = |e: std::io::Error| e.to_string();
        s.write_all(head).map_err(io)?;
        let mut n = 0u64;
        match payload {
            Payload::Chunks(rx) => loop {
                match rx.recv() {
                    Ok(SnapshotChunk::Data(d)) => {
                        s.write_all(&d).map_err(io)?;
                        n += d.len() as u64;
                    }
                    Ok(SnapshotChunk::End) => break,
                    Err(_) => return Err("the snapshot was abandoned".into()),
                }
            },
            Payload::File(m) => {
                s.write_all(&m).map_err(io)?;
                n = m.len() as u64;
            }
        }
        s.write_all(trailer).map_err(io)?;
        Ok(n)
    })()
}

impl ReplState {
    /// Whether any replica is mid-transfer (the loop then wakes often).
    pub fn transfers_in_flight(&self) -> bool {
        self.master
            .replicas
            .iter()
            .any(|r| matches!(r.state, ReplicaState::Sending | ReplicaState::WaitStart))
            || self.rdma.master.as_ref().is_some_and(|m| m.busy())
    }
}

impl Server {
    /// Bytes waiting for replicas (their output buffers and the stream
    /// held during their syncs): not counted for `maxmemory`, as in Redis.
    pub fn replica_buffered_bytes(&self) -> usize {
        self.repl
            .master
            .replicas
            .iter()
            .map(|r| {
                r.pending.len()
                    + r.token
                        .and_then(|t| self.clients.get(t))
                        .and_then(|c| c.as_ref())
                        .filter(|c| c.id == r.client_id)
                        .map_or(0, |c| c.pending_output())
            })
            .sum()
    }
}
