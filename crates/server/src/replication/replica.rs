//! The replica side: `REPLICAOF`, the link to the master, applying its
//! stream.
//!
//! The link is `Connect` (a sync is due), `Syncing` (a thread of
//! handshake.rs is connecting, handshaking, receiving and loading), or
//! `Connected`: the socket is then an ordinary client of the loop whose
//! input is the master's command stream. Each command is executed with its
//! reply dropped, and its exact bytes are added to our offset, our backlog
//! and our own replicas (so a chained replica gets the top master's
//! stream byte for byte). `REPLCONF GETACK` is answered with `REPLCONF ACK
//! <offset>`, as is every second.
//!
//! A command we do not implement stops the link with the reason in `INFO
//! replication` (`master_link_down_reason`) instead of being skipped, which
//! would leave the data silently different; the link then stays down until
//! the next `REPLICAOF`.

use super::handshake::{self, Progress, SyncOutcome, SyncRequest};
use super::rdma::tune::SyncTuning;
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::request::Limits;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub enum LinkState {
    /// A sync attempt is due at `next_attempt`.
    Connect,
    Syncing {
        cancel: Arc<AtomicBool>,
        progress: Arc<Progress>,
        rx: Receiver<Result<SyncOutcome, String>>,
        started: Instant,
    },
    Connected {
        client_id: u64,
        token: usize,
    },
    /// Stopped after a command it could not apply (see the module docs).
    Halted,
}

pub struct MasterLink {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// `(replid, offset)` of the history we hold, for `PSYNC`.
    pub cached: Option<(String, i64)>,
    /// The database the master's stream had selected when the link went
    /// down (Redis keeps it in the cached master client): a partial resync
    /// continues the stream there, without a new `SELECT`.
    pub stream_db: usize,
    pub last_io: Instant,
    pub down_since: Option<Instant>,
    pub link_error: Option<String>,
    next_attempt: Instant,
    last_ack: Instant,
}

impl MasterLink {
    pub fn new(host: String, port: u16, cached: Option<(String, i64)>) -> Self {
        MasterLink {
            host,
            port,
            state: LinkState::Connect,
            cached,
            stream_db: 0,
            last_io: Instant::now(),
            down_since: None,
            link_error: None,
            next_attempt: Instant::now(),
            last_ack: Instant::now(),
        }
    }

    pub fn client_id(&self) -> Option<u64> {
        match self.state {
            LinkState::Connected { client_id, .. } => Some(client_id),
            _ => None,
        }
    }

    pub fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Connected { .. })
    }

    pub fn syncing(&self) -> bool {
        matches!(self.state, LinkState::Syncing { .. })
    }

    pub fn progress(&self) -> Option<&Progress> {
        match &self.state {
            LinkState::Syncing { progress, .. } => Some(progress),
            _ => None,
        }
    }

    /// The state's name in `ROLE`.
    pub fn state_name(&self) -> &'static str {
        match &self.state {
            LinkState::Connect | LinkState::Halted => "connect",
            LinkState::Syncing { progress, .. } => {
                if progress.read.load(std::sync::atomic::Ordering::Relaxed) > 0
                    || progress.loading.load(std::sync::atomic::Ordering::Relaxed)
                {
                    "sync"
                } else {
                    "handshake"
                }
            }
            LinkState::Connected { .. } => "connected",
        }
    }

    fn cancel(&mut self) {
        if let LinkState::Syncing { cancel, .. } = &self.state {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Server {
    /// `REPLICAOF host port`: becomes (or re-points) a replica. Our own
    /// history is offered to the new master with `PSYNC`, so a sibling
    /// promoted to master can continue us.
    pub fn replicaof(&mut self, host: String, port: u16) -> bool {
        // `CONFIG GET replicaof` and CONFIG REWRITE follow the role.
        self.config.repl.replicaof = Some((host.clone(), port));
        if let Some(l) = self.repl.link.as_mut() {
            if l.host == host && l.port == port {
                if matches!(l.state, LinkState::Halted) {
                    // Stopped by a command it could not apply: start over.
                    l.state = LinkState::Connect;
                    l.cached = None;
                    l.link_error = None;
                    l.next_attempt = Instant::now();
                    return true;
                }
                return false;
            }
        }
        if self.repl.link.is_some() {
            self.repl.stats.master_switches += 1;
        } else {
            self.repl.stats.demotions += 1;
        }
        let cached = match self.repl.link.take() {
            Some(mut old) => {
                old.cancel();
                if let LinkState::Connected { token, .. } = old.state {
                    self.close_queue.push(token);
                }
                if old.is_up() {
                    Some((self.repl.replid.clone(), self.repl.master_repl_offset))
                } else {
                    old.cached
                }
            }
            // A master offers its own history (`replicationCacheMasterUsingMyself`).
            None => Some((self.repl.replid.clone(), self.repl.master_repl_offset)),
        };
        // Our replicas must follow the new history too.
        self.disconnect_replicas();
        self.repl.master.waiters.clear();
        tracing::info!("Connecting to MASTER {host}:{port}");
        self.repl.link = Some(MasterLink::new(host, port, cached));
        true
    }

    /// `REPLICAOF NO ONE`: becomes a master that keeps its data and
    /// history (the old id stays valid as `replid2`).
    pub fn replicaof_no_one(&mut self) {
        self.config.repl.replicaof = None;
        let Some(mut old) = self.repl.link.take() else {
            return;
        };
        self.repl.stats.promotions += 1;
        old.cancel();
        if let LinkState::Connected { token, .. } = old.state {
            self.close_queue.push(token);
        }
        if self.repl.backlog.is_none() {
            let size = self.config.repl.backlog_size as usize;
            self.repl.backlog = Some(super::backlog::ReplicationBacklog::new(
                size,
                self.repl.master_repl_offset,
            ));
        }
        self.repl.shift_replid(&mut self.rng);
        self.repl.stream_db = None;
        // They continue with us by partial resync under the new id.
        self.disconnect_replicas();
    }

    /// The replica side's work before the loop sleeps: start a sync when
    /// one is due, install a finished one. Returns the tokens of clients
    /// with input to process now (the new master link's first bytes).
    pub fn replica_tick(&mut self) -> Vec<usize> {
        // Its AOF synced further: the master hears at once (`WAITAOF`).
        if self.aof.is_some()
            && self.aof_durable.reploff > self.repl.fack_sent
            && self.repl.link.as_ref().is_some_and(|l| l.is_up())
        {
            self.send_ack();
        }
        let Some(link) = self.repl.link.as_mut() else {
            return Vec::new();
        };
        match &link.state {
            LinkState::Connect if Instant::now() >= link.next_attempt => {
                self.start_sync();
                Vec::new()
            }
            LinkState::Syncing { rx, .. } => match rx.try_recv() {
                Ok(res) => {
                    let accepted = res.is_ok();
                    let resume = self.sync_finished(res);
                    // A FAILOVER's PSYNC to its target: done, or aborted.
                    self.failover_sync_done(accepted);
                    resume
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => Vec::new(),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.sync_finished(Err("sync thread vanished".into()))
                }
            },
            _ => Vec::new(),
        }
    }

    fn start_sync(&mut self) {
        let link_config = crate::net::rdma::stream_config(self);
        let cfg = &self.config;
        let link = self.repl.link.as_mut().expect("checked by the caller");
        let cancel = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Progress::default());
        let req = SyncRequest {
            host: link.host.clone(),
            port: link.port,
            masteruser: cfg.repl.masteruser.clone(),
            masterauth: cfg.repl.masterauth.clone(),
            // `replica-announce-port` first; else Redis announces its TLS
            // port when the link is TLS.
            listening_port: if cfg.repl.replica_announce_port != 0 {
                cfg.repl.replica_announce_port as u16
            } else if cfg.tls.replication && cfg.tls.port != 0 {
                cfg.tls.port
            } else {
                self.tcp_port
            },
            announce_ip: (!cfg.repl.replica_announce_ip.is_empty())
                .then(|| cfg.repl.replica_announce_ip.clone()),
            psync: link.cached.clone(),
            dir: std::path::PathBuf::from(&cfg.dir),
            dbfilename: cfg.dbfilename.clone(),
            diskless_load: match cfg.repl.diskless_load {
                super::DisklessLoad::Disabled => false,
                super::DisklessLoad::Swapdb => true,
                // Redis: only when the data set is empty (nothing to keep).
                super::DisklessLoad::OnEmptyDb => self.keyspace.dbs.iter().all(|d| d.is_empty()),
            },
            databases: cfg.databases as usize,
            load_config: Box::new(crate::config::Config {
                keeps_due_hash_fields: true,
                ..cfg.clone()
            }),
            timeout: Duration::from_secs(cfg.repl.timeout.max(1)),
            cancel: cancel.clone(),
            progress: progress.clone(),
            rdma: None,
            failover: self.repl.failover.in_progress(),
            tls: if cfg.tls.replication {
                self.tls.client.clone()
            } else {
                None
            },
        };
        let mut req = req;
        let rdma = &mut self.repl.rdma;
        if let (true, Some(lib)) = (cfg.repl.rdma.replica_rdma, rdma.lib.as_ref()) {
            if rdma
                .fallback_pending
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                // The last RDMA attempt failed: this one is plain TCP.
                rdma.stats.lock().expect("rdma stats").retries += 1;
                tracing::info!("Retrying the sync over TCP after an RDMA failure");
            } else {
                let tuning = cfg.repl.rdma.autotune.then(|| {
                    let (dir, budget) = (Path::new(&cfg.dir), cfg.repl.rdma.autotune_memory);
                    let t = rdma
                        .tuning
                        .get_or_insert_with(|| Arc::new(Mutex::new(SyncTuning::new(dir, budget))));
                    t.lock().expect("rdma tuning").configure(dir, budget);
                    t.clone()
                });
                req.rdma = Some(super::rdma::replica::ReplicaRdma {
                    lib: lib.clone(),
                    provider: cfg.repl.rdma.provider().map(str::to_owned),
                    slots: cfg.repl.rdma.ring_slots,
                    endpoints: cfg.repl.rdma.sync_endpoints,
                    chunk_size: cfg.repl.rdma.chunk_size,
                    peer: format!("{}:{}", req.host, req.port),
                    tuning,
                    stats: rdma.stats.clone(),
                    fallback: rdma.fallback_pending.clone(),
                    link: link_config,
                });
            }
        }
        let (tx, rx) = channel();
        let spawned = std::thread::Builder::new()
            .name("repl-sync".into())
            .spawn(move || {
                let _ = tx.send(handshake::run(&req));
            });
        match spawned {
            Ok(_) => {
                link.state = LinkState::Syncing {
                    cancel,
                    progress,
                    rx,
                    started: Instant::now(),
                };
            }
            Err(e) => {
                tracing::warn!("Can't start the sync thread: {e}");
                link.next_attempt = Instant::now() + Duration::from_secs(1);
            }
        }
    }

    fn sync_finished(&mut self, res: Result<SyncOutcome, String>) -> Vec<usize> {
        let link = self.repl.link.as_mut().expect("checked by the caller");
        let started = match &link.state {
            LinkState::Syncing { started, .. } => *started,
            _ => Instant::now(),
        };
        let outcome = match res {
            Ok(o) => {
                // A good sync: RDMA may be tried again next time.
                self.repl
                    .rdma
                    .fallback_pending
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                o
            }
            Err(e) => {
                tracing::warn!("MASTER <-> REPLICA sync failed: {e}");
                link.link_error = Some(e);
                link.state = LinkState::Connect;
                link.next_attempt = Instant::now() + Duration::from_secs(1);
                link.down_since.get_or_insert_with(Instant::now);
                return Vec::new();
            }
        };
        let (stream, leftover, db) = match outcome {
            SyncOutcome::Full {
                replid,
                offset,
                keyspace,
                load,
                rdb_bytes,
                stream,
                leftover,
            } => {
                // A save of the old data set has nothing left to save.
                if let Some(job) = self.persistence.job.take() {
                    tracing::warn!(
                        "Abandoning a background save: the data set is replaced by the master's"
                    );
                    job.abandon(&mut self.keyspace);
                    self.repl.master.sync_job = None;
                }
                let old = std::mem::replace(&mut self.keyspace, keyspace);
                self.lazy_free(old);
                // The keys written here went with the old data set.
                self.repl.local_expires.clear();
                if let Some(st) = load {
                    if let Err(e) = self.install_loaded_functions(&st.functions) {
                        tracing::warn!("MASTER <-> REPLICA sync: {e}");
                    }
                    tracing::info!(
                        "MASTER <-> REPLICA sync: Finished with success ({} keys, {rdb_bytes} bytes)",
                        st.keys
                    );
                }
                self.repl.replid = replid;
                self.repl.master_repl_offset = offset;
                self.repl.clear_replid2();
                self.repl.backlog = Some(super::backlog::ReplicationBacklog::new(
                    self.config.repl.backlog_size as usize,
                    offset,
                ));
                self.repl.stats.replica_full_syncs += 1;
                self.repl.stats.rdb_bytes_received += rdb_bytes;
                self.stats.net_repl_input_bytes += rdb_bytes;
                self.repl.stats.last_full_sync_secs = started.elapsed().as_secs_f64();
                // Our replicas held the old data: they sync again.
                self.disconnect_replicas();
                if self.aof.is_some() {
                    self.aof_rewrite_scheduled = true;
                }
                (stream, leftover, 0)
            }
            SyncOutcome::Partial {
                new_replid,
                stream,
                leftover,
            } => {
                if let Some(new) = new_replid.filter(|n| *n != self.repl.replid) {
                    // The master's history continues ours under a new id.
                    self.repl.replid2 = std::mem::replace(&mut self.repl.replid, new);
                    self.repl.second_replid_offset = self.repl.master_repl_offset + 1;
                    self.disconnect_replicas();
                }
                if self.repl.backlog.is_none() {
                    self.repl.backlog = Some(super::backlog::ReplicationBacklog::new(
                        self.config.repl.backlog_size as usize,
                        self.repl.master_repl_offset,
                    ));
                }
                self.repl.stats.replica_partial_syncs += 1;
                let db = self.repl.link.as_ref().map_or(0, |l| l.stream_db);
                (stream, leftover, db)
            }
        };
        match self.attach_master(stream, leftover, db) {
            Ok(t) => vec![t],
            Err(e) => {
                tracing::warn!("Can't attach the master link: {e}");
                let link = self.repl.link.as_mut().expect("present");
                link.state = LinkState::Connect;
                link.cached = Some((self.repl.replid.clone(), self.repl.master_repl_offset));
                link.next_attempt = Instant::now() + Duration::from_secs(1);
                Vec::new()
            }
        }
    }

    /// Makes the synced connection the master client of the loop.
    fn attach_master(
        &mut self,
        stream: crate::net::conn::BlockingConn,
        leftover: Vec<u8>,
        db: usize,
    ) -> std::io::Result<usize> {
        let (mut stream, addr, local) = stream.into_conn()?;
        let rdma = stream.rdma_stats().is_some();
        let id = self.next_client_id;
        self.next_client_id += 1;
        let entry = self.clients.vacant_entry();
        let token = entry.key();
        if let Some(reg) = &self.repl.registry {
            reg.register(&mut stream, mio::Token(token), mio::Interest::READABLE)?;
        }
        if rdma {
            // Re-armed before each sleep and kept alive like any RDMA client.
            self.rdma_conns.tokens.push(token);
        }
        let mut c = Client::new(id, stream, addr, local, &mut self.pool, true);
        // The master's stream is applied whatever the users' permissions.
        c.user = crate::acl::NO_USER;
        c.token = token;
        c.db = db;
        if c.conn.inbuf.len() < leftover.len() {
            c.conn.inbuf.resize(leftover.len(), 0);
        }
        c.conn.inbuf[..leftover.len()].copy_from_slice(&leftover);
        c.conn.in_end = leftover.len();
        entry.insert(Some(Box::new(c)));
        let link = self.repl.link.as_mut().expect("present");
        link.state = LinkState::Connected {
            client_id: id,
            token,
        };
        link.cached = None;
        link.last_io = Instant::now();
        link.down_since = None;
        link.link_error = None;
        tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization or finished the full sync; streaming");
        // The first ACK right away: a diskless master starts the stream on it.
        self.send_ack();
        Ok(token)
    }

    /// `REPLCONF ACK <offset>` to the master.
    fn send_ack(&mut self) {
        let Some(LinkState::Connected { token, .. }) = self.repl.link.as_ref().map(|l| &l.state)
        else {
            return;
        };
        let token = *token;
        if !matches!(self.clients.get(token), Some(Some(_))) {
            return;
        }
        let (off, fack) = self.ack_offsets();
        let Some(Some(c)) = self.clients.get_mut(token) else {
            return;
        };
        encode_ack(&mut c.out.buf, off, fack);
        if !c.pending_write {
            c.pending_write = true;
            self.pending_writes.push(token);
        }
        if let Some(l) = self.repl.link.as_mut() {
            l.last_ack = Instant::now();
        }
    }

    /// Once per cron: the ACK every second, the master's timeout.
    pub fn replica_cron(&mut self) {
        let timeout = Duration::from_secs(self.config.repl.timeout.max(1));
        let Some(l) = self.repl.link.as_ref() else {
            return;
        };
        if let LinkState::Connected { token, .. } = l.state {
            if l.last_io.elapsed() > timeout {
                tracing::warn!("MASTER timeout: no data nor PING received...");
                if let Some(l) = self.repl.link.as_mut() {
                    l.link_error = Some("MASTER timeout".into());
                }
                self.close_queue.push(token);
                return;
            }
            if l.last_ack.elapsed() >= Duration::from_secs(1) {
                self.send_ack();
            }
        }
    }

    /// The master link closed (its client had `db` selected): keep our
    /// history for a partial resync and try again soon.
    pub fn master_link_closed(&mut self, db: usize) {
        let (replid, off) = (self.repl.replid.clone(), self.repl.master_repl_offset);
        let Some(l) = self.repl.link.as_mut() else {
            return;
        };
        tracing::info!("Connection with master lost. Caching the disconnected master state.");
        l.cached = Some((replid, off));
        l.stream_db = db;
        l.down_since = Some(Instant::now());
        if !matches!(l.state, LinkState::Halted) {
            l.state = LinkState::Connect;
            l.next_attempt = Instant::now() + Duration::from_millis(100);
        }
    }
}

/// Applies what the master sent: each complete command is executed (reply
/// dropped), then its bytes are counted and proxied to our replicas.
pub fn process_master_input(srv: &mut Server, c: &mut Client) {
    let inbuf = std::mem::take(&mut c.conn.inbuf);
    let mut decoder = std::mem::take(&mut c.conn.decoder);
    let limits = Limits {
        max_bulk_len: srv.config.proto_max_bulk_len as usize,
        authenticated: true,
    };
    // One clock read per command: the end of one is the start of the next.
    let mut now = Instant::now();
    if let Some(l) = srv.repl.link.as_mut() {
        l.last_io = now;
    }
    // Applied commands' bytes not yet counted and proxied: they go as one
    // slice, before anything reads the offset and at the end.
    let mut unfed = c.conn.in_start;
    // The stream repeats a few command names: the last one's row is kept.
    let mut last_cmd = CommandCache::default();
    while c.conn.in_start < c.conn.in_end && !c.close_asap {
        match decoder.decode(&inbuf[c.conn.in_start..c.conn.in_end], limits) {
            Ok(None) => break,
            Ok(Some(d)) => {
                let consumed = d.consumed;
                if !d.args.is_empty() {
                    let args = d.args;
                    let name = args.get(0);
                    if name.eq_ignore_ascii_case(b"REPLCONF")
                        && args.len() >= 2
                        && args.get(1).eq_ignore_ascii_case(b"GETACK")
                    {
                        // The master client is out of the table while its
                        // input runs: the answer goes straight to its buffer.
                        feed_applied(srv, &inbuf, &mut unfed, c.conn.in_start);
                        let (off, fack) = srv.ack_offsets();
                        encode_ack(&mut c.out.buf, off, fack);
                        if let Some(l) = srv.repl.link.as_mut() {
                            l.last_ack = Instant::now();
                        }
                    } else if let Some(idx) = last_cmd.lookup(srv, name) {
                        let mark = c.out.buf.len();
                        now = srv.execute_from_master(c, idx, args, now);
                        if c.out.buf.len() > mark && c.out.buf[mark] == b'-' {
                            let reply = &c.out.buf[mark..];
                            let text = String::from_utf8_lossy(reply).trim_end().to_string();
                            if text.starts_with("-ERR unknown") {
                                c.out.buf.truncate(mark);
                                stop_link(
                                    srv,
                                    c,
                                    (&inbuf, &mut unfed),
                                    format!(
                                        "the master's stream has a command ferrokv does not implement ({}): replication stopped",
                                        &text[1..]
                                    ),
                                );
                                break;
                            }
                            tracing::warn!(
                                "== CRITICAL == This replica is sending an error to its master: '{}' after processing the command '{}'",
                                &text[1..],
                                String::from_utf8_lossy(name)
                            );
                        }
                        // The reply is dropped: the master is not answered.
                        c.out.buf.truncate(mark);
                        c.out.error_codes.clear();
                    } else {
                        // The offset in the message counts what was applied.
                        feed_applied(srv, &inbuf, &mut unfed, c.conn.in_start);
                        stop_link(
                            srv,
                            c,
                            (&inbuf, &mut unfed),
                            format!(
                                "unknown command '{}' in the master's stream at offset {}: ferrokv does not implement it, replication stopped",
                                String::from_utf8_lossy(name),
                                srv.repl.master_repl_offset + 1
                            ),
                        );
                        break;
                    }
                }
                c.conn.in_start += consumed;
            }
            Err(e) => {
                stop_link(
                    srv,
                    c,
                    (&inbuf, &mut unfed),
                    format!("protocol error in the master's stream: {}", e.0),
                );
                break;
            }
        }
    }
    feed_applied(srv, &inbuf, &mut unfed, c.conn.in_start);
    c.conn.inbuf = inbuf;
    c.conn.decoder = decoder;
}

/// Counts the applied bytes `unfed..upto` of the master's stream into our
/// offset and backlog and proxies them to our own replicas.
fn feed_applied(srv: &mut Server, inbuf: &[u8], unfed: &mut usize, upto: usize) {
    if upto > *unfed {
        srv.repl_feed_bytes(&inbuf[*unfed..upto]);
        *unfed = upto;
    }
}

/// The row of the last command name looked up, so that a stream of one
/// command (a write load is mostly SETs) is looked up once per read.
#[derive(Default)]
struct CommandCache {
    name: [u8; 16],
    len: usize,
    idx: Option<usize>,
}

impl CommandCache {
    fn lookup(&mut self, srv: &Server, name: &[u8]) -> Option<usize> {
        if self.idx.is_some() && name.eq_ignore_ascii_case(&self.name[..self.len]) {
            return self.idx;
        }
        let idx = srv.commands.lookup(name);
        if idx.is_some() && name.len() <= self.name.len() {
            self.name[..name.len()].copy_from_slice(name);
            self.len = name.len();
            self.idx = idx;
        }
        idx
    }
}

/// `REPLCONF ACK <offset>`, and `FACK <offset>` (what the AOF synced,
/// Redis 7.2) when the AOF is on. A 7.0 master reads the offset and
/// ignores the rest, as Redis 7.0 does.
fn encode_ack(out: &mut Vec<u8>, off: i64, fack: Option<i64>) {
    ferrokv_resp::encode::array(out, if fack.is_some() { 5 } else { 3 });
    ferrokv_resp::encode::bulk(out, b"REPLCONF");
    ferrokv_resp::encode::bulk(out, b"ACK");
    ferrokv_resp::encode::bulk(out, off.to_string().as_bytes());
    if let Some(f) = fack {
        ferrokv_resp::encode::bulk(out, b"FACK");
        ferrokv_resp::encode::bulk(out, f.to_string().as_bytes());
    }
}

impl Server {
    /// What an ACK says now: the offset applied and, with the AOF on,
    /// the offset it synced (remembered as sent).
    fn ack_offsets(&mut self) -> (i64, Option<i64>) {
        let fack = self.aof.is_some().then_some(self.aof_durable.reploff);
        if let Some(f) = fack {
            self.repl.fack_sent = f;
        }
        (self.repl.master_repl_offset, fack)
    }
}

/// Stops the link on a command that cannot be applied: what was applied
/// before it is counted first; the rest of the input is dropped.
fn stop_link(
    srv: &mut Server,
    c: &mut Client,
    (inbuf, unfed): (&[u8], &mut usize),
    reason: String,
) {
    feed_applied(srv, inbuf, unfed, c.conn.in_start);
    tracing::error!("Replication stopped: {reason}");
    c.close_asap = true;
    c.conn.in_start = c.conn.in_end;
    *unfed = c.conn.in_end;
    if let Some(l) = srv.repl.link.as_mut() {
        l.link_error = Some(reason);
        l.state = LinkState::Halted;
        l.down_since = Some(Instant::now());
    }
}
