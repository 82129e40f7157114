//! Replication with Redis 7.0's protocol, so that a real Redis can be our
//! master or our replica.
//!
//! ```text
//!   master side (master.rs)                        replica side (replica.rs)
//!   Server::propagate ─► feed ─► backlog ring      sync thread (handshake.rs):
//!                          └──► online replicas'     connect, PING, AUTH, REPLCONF,
//!                               output buffers       PSYNC, receive the RDB, load it
//!   PSYNC ─► +CONTINUE + backlog tail                into a fresh keyspace
//!         └► +FULLRESYNC ─► SnapshotJob ─► sender ─► (the loop keeps serving the
//!            threads (diskless: chunks; disk:        old data), then swapped in
//!            the file, mapped) ─► replica socket   master link = a client whose
//!                                                  commands are applied, offset counted
//! ```
//!
//! Everything runs on the loop except the blocking parts: a replica's
//! handshake, transfer and load run on one thread per sync, and a master
//! sends each snapshot to each replica from one thread per transfer, while
//! the socket is out of the loop's poll. The loop only swaps results in.
//!
//! Offsets, replication ids and the backlog follow Redis's `replication.c`:
//! `master_repl_offset` counts every byte of the stream; a replica applies
//! its master's stream and feeds the same bytes to its own backlog and
//! replicas (a chained replica sees the top master's exact stream); a
//! promoted replica keeps its old id as `replid2` so its siblings can
//! continue from where they were.

pub mod backlog;
pub mod failover;
pub mod handshake;
pub mod master;
pub mod rdma;
pub mod replica;
pub mod writable;

use crate::server::Server;
use backlog::ReplicationBacklog;
pub(crate) use master::token_of;
use std::fmt::Write as _;
use std::time::Instant;

/// The replication options (`replicaof`, `masterauth`, `repl-*`, ...).
#[derive(Debug, Clone)]
pub struct ReplConfig {
    pub replicaof: Option<(String, u16)>,
    pub masterauth: Option<Vec<u8>>,
    pub masteruser: Option<String>,
    pub replica_read_only: bool,
    pub replica_serve_stale_data: bool,
    pub backlog_size: u64,
    pub backlog_ttl: u64,
    pub diskless_sync: bool,
    pub diskless_sync_delay: u64,
    pub diskless_sync_max_replicas: u64,
    /// `repl-diskless-load`: how a replica takes a full sync's payload.
    pub diskless_load: DisklessLoad,
    pub ping_replica_period: u64,
    pub timeout: u64,
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag: u64,
    pub replica_announce_ip: String,
    /// `replica-announce-port`: the port sent as `REPLCONF listening-port`
    /// (0: the one we listen on), what the master lists in `slaveN:` and
    /// Sentinel connects to.
    pub replica_announce_port: u64,
    /// `replica-announced`: `replica_announced:` in INFO; Sentinel leaves
    /// an unannounced replica out of `SENTINEL REPLICAS`.
    pub replica_announced: bool,
    pub replica_priority: u64,
    /// RDMA full sync (`rdma-*`, `replica-rdma`; docs/rdma.md).
    pub rdma: rdma::RdmaConfig,
}

impl Default for ReplConfig {
    fn default() -> Self {
        ReplConfig {
            replicaof: None,
            masterauth: None,
            masteruser: None,
            replica_read_only: true,
            replica_serve_stale_data: true,
            backlog_size: 1024 * 1024,
            backlog_ttl: 3600,
            diskless_sync: true,
            diskless_sync_delay: 5,
            diskless_sync_max_replicas: 0,
            diskless_load: DisklessLoad::Disabled,
            ping_replica_period: 10,
            timeout: 60,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            replica_announce_ip: String::new(),
            replica_announce_port: 0,
            replica_announced: true,
            replica_priority: 100,
            rdma: rdma::RdmaConfig::default(),
        }
    }
}

/// `repl-diskless-load`, with Redis's values. Whatever the mode, ferrokv
/// loads into a fresh keyspace while the loop keeps serving the old one
/// (per `replica-serve-stale-data`) and swaps it in only after the whole
/// payload loaded and its checksum matched; the modes choose where the
/// payload goes on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisklessLoad {
    /// Written to a temp file renamed to `dbfilename`, then loaded.
    Disabled,
    /// Parsed from the socket as it arrives, only when the data set is
    /// empty at the start of the sync; otherwise as `Disabled`.
    OnEmptyDb,
    /// Always parsed from the socket as it arrives (Redis keeps the old
    /// data aside and swaps; so does ferrokv, always). No file is written.
    Swapdb,
}

impl DisklessLoad {
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "disabled" => Some(DisklessLoad::Disabled),
            "on-empty-db" => Some(DisklessLoad::OnEmptyDb),
            "swapdb" => Some(DisklessLoad::Swapdb),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DisklessLoad::Disabled => "disabled",
            DisklessLoad::OnEmptyDb => "on-empty-db",
            DisklessLoad::Swapdb => "swapdb",
        }
    }
}

/// Counters of `INFO stats` about syncs served.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplStats {
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// Replicas dropped for their output buffer.
    pub replica_outbuf_disconnections: u64,
    /// Full syncs this replica completed, and partial resyncs it got.
    pub replica_full_syncs: u64,
    pub replica_partial_syncs: u64,
    /// Bytes of RDB payload sent to replicas and received from a master.
    pub rdb_bytes_sent: u64,
    pub rdb_bytes_received: u64,
    /// Seconds the last full sync took on this replica (PSYNC to serving).
    pub last_full_sync_secs: f64,
    /// Role changes, as Sentinel or an operator makes them: replica to
    /// master (`REPLICAOF NO ONE`, FAILOVER), master to replica, and a
    /// replica re-pointed to another master.
    pub promotions: u64,
    pub demotions: u64,
    pub master_switches: u64,
}

/// How a client relates to replication (for `CLIENT LIST`/`KILL TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    Normal,
    Master,
    Replica,
}

/// All replication state the loop owns.
pub struct ReplState {
    pub replid: String,
    pub replid2: String,
    pub second_replid_offset: i64,
    pub master_repl_offset: i64,
    pub backlog: Option<ReplicationBacklog>,
    /// The database the replication stream last selected.
    pub stream_db: Option<usize>,
    /// When the last replica went away (for `repl-backlog-ttl`).
    pub no_replicas_since: Instant,
    pub stats: ReplStats,
    /// Master side: the replicas attached to us.
    pub master: master::MasterSide,
    /// Replica side: our link to our master, when we are a replica.
    pub link: Option<replica::MasterLink>,
    /// To (de)register sockets from outside the reactor.
    pub registry: Option<mio::Registry>,
    /// RDMA full sync: availability, counters, the master's listener.
    pub rdma: rdma::Rdma,
    /// `FAILOVER` in progress, if any.
    pub failover: failover::Failover,
    /// A writable replica's own keys with a TTL (writable.rs).
    pub local_expires: writable::LocalExpires,
    scratch: Vec<u8>,
    last_cron: Instant,
    /// The last `FACK` this replica sent its master.
    pub fack_sent: i64,
}

impl ReplState {
    pub fn new(cfg: &ReplConfig, rng: &mut rand::rngs::SmallRng) -> Self {
        let mut s = ReplState {
            replid: crate::server::random_hex(rng, 40),
            replid2: "0".repeat(40),
            second_replid_offset: -1,
            master_repl_offset: 0,
            backlog: None,
            stream_db: None,
            no_replicas_since: Instant::now(),
            stats: ReplStats::default(),
            master: master::MasterSide::new(),
            link: None,
            registry: None,
            rdma: rdma::Rdma::new(&cfg.rdma),
            failover: Default::default(),
            local_expires: Default::default(),
            scratch: Vec::new(),
            last_cron: Instant::now(),
            fack_sent: 0,
        };
        if let Some((host, port)) = &cfg.replicaof {
            s.link = Some(replica::MasterLink::new(host.clone(), *port, None));
        }
        s
    }

    /// Whether we replicate from a master.
    #[inline]
    pub fn is_replica(&self) -> bool {
        self.link.is_some()
    }

    /// The id of the client that is our master link, if connected.
    #[inline]
    pub fn master_client_id(&self) -> Option<u64> {
        self.link.as_ref().and_then(|l| l.client_id())
    }

    pub fn client_kind(&self, id: u64) -> ClientKind {
        if self.master_client_id() == Some(id) {
            ClientKind::Master
        } else if self.is_replica_client(id) {
            ClientKind::Replica
        } else {
            ClientKind::Normal
        }
    }

    /// Whether client `id` is one of our replicas (free when there are
    /// none: the list is empty).
    #[inline]
    pub fn is_replica_client(&self, id: u64) -> bool {
        self.master.replicas.iter().any(|r| r.client_id == id)
    }

    /// A new replication id, the old one kept as `replid2` up to the
    /// current offset (Redis's `shiftReplicationId`): replicas of the old
    /// history can continue with us.
    pub fn shift_replid(&mut self, rng: &mut rand::rngs::SmallRng) {
        self.replid2 = std::mem::replace(&mut self.replid, crate::server::random_hex(rng, 40));
        self.second_replid_offset = self.master_repl_offset + 1;
        tracing::info!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
            self.replid2,
            self.second_replid_offset,
            self.replid
        );
    }

    pub fn clear_replid2(&mut self) {
        self.replid2 = "0".repeat(40);
        self.second_replid_offset = -1;
    }

    /// Appends raw stream bytes to the backlog and counts them.
    fn account(&mut self, bytes: &[u8]) {
        if let Some(b) = self.backlog.as_mut() {
            b.append(bytes);
            self.master_repl_offset += bytes.len() as i64;
        }
    }
}

impl Server {
    /// `INFO replication`, with Redis 7.0's field names.
    pub fn info_replication(&self, o: &mut String) {
        macro_rules! f {
            ($($arg:tt)*) => {{ let _ = write!(o, $($arg)*); o.push_str("\r\n"); }};
        }
        let r = &self.repl;
        f!("# Replication");
        if let Some(l) = &r.link {
            f!("role:slave");
            f!("master_host:{}", l.host);
            f!("master_port:{}", l.port);
            f!(
                "master_link_status:{}",
                if l.is_up() { "up" } else { "down" }
            );
            f!(
                "master_last_io_seconds_ago:{}",
                if l.is_up() {
                    l.last_io.elapsed().as_secs() as i64
                } else {
                    -1
                }
            );
            f!("master_sync_in_progress:{}", l.syncing() as u8);
            let off = if l.is_up() { r.master_repl_offset } else { 0 };
            f!("slave_read_repl_offset:{off}");
            f!("slave_repl_offset:{off}");
            if let Some(p) = l.progress() {
                let total = p.total.load(std::sync::atomic::Ordering::Relaxed);
                let read = p.read.load(std::sync::atomic::Ordering::Relaxed) as i64;
                f!("master_sync_total_bytes:{total}");
                f!("master_sync_read_bytes:{read}");
                f!("master_sync_left_bytes:{}", (total - read).max(0));
                f!(
                    "master_sync_perc:{:.2}",
                    if total > 0 {
                        read as f64 * 100.0 / total as f64
                    } else {
                        0.0
                    }
                );
                f!(
                    "master_sync_last_io_seconds_ago:{}",
                    l.last_io.elapsed().as_secs()
                );
            }
            if !l.is_up() {
                f!(
                    "master_link_down_since_seconds:{}",
                    l.down_since.map_or(-1, |t| t.elapsed().as_secs() as i64)
                );
            }
            if let Some(e) = &l.link_error {
                f!("master_link_down_reason:{}", e.replace(['\r', '\n'], " "));
            }
            f!("slave_priority:{}", self.config.repl.replica_priority);
            f!(
                "slave_read_only:{}",
                self.config.repl.replica_read_only as u8
            );
            f!(
                "replica_announced:{}",
                self.config.repl.replica_announced as u8
            );
        } else {
            f!("role:master");
        }
        let online: Vec<&master::ReplicaLink> = r.master.replicas.iter().collect();
        f!("connected_slaves:{}", online.len());
        // Redis prints it on a replica too (for its own replicas).
        if self.config.repl.min_replicas_to_write > 0 && self.config.repl.min_replicas_max_lag > 0 {
            f!("min_slaves_good_slaves:{}", self.good_replicas());
        }
        for (i, s) in online.iter().enumerate() {
            f!(
                "slave{i}:ip={},port={},state={},offset={},lag={}",
                s.ip,
                s.listening_port,
                s.state_name(),
                s.ack_offset,
                s.ack_time.elapsed().as_secs()
            );
        }
        f!("master_failover_state:{}", r.failover.state.name());
        f!("master_replid:{}", r.replid);
        f!("master_replid2:{}", r.replid2);
        f!("master_repl_offset:{}", r.master_repl_offset);
        f!("second_repl_offset:{}", r.second_replid_offset);
        match &r.backlog {
            Some(b) => {
                f!("repl_backlog_active:1");
                f!("repl_backlog_size:{}", self.config.repl.backlog_size);
                f!("repl_backlog_first_byte_offset:{}", b.first_byte_offset());
                f!("repl_backlog_histlen:{}", b.histlen());
            }
            None => {
                f!("repl_backlog_active:0");
                f!("repl_backlog_size:{}", self.config.repl.backlog_size);
                f!("repl_backlog_first_byte_offset:0");
                f!("repl_backlog_histlen:0");
            }
        }
    }

    /// Replicas online whose last ACK is within `min-replicas-max-lag`.
    pub fn good_replicas(&self) -> usize {
        let lag = self.config.repl.min_replicas_max_lag;
        self.repl
            .master
            .replicas
            .iter()
            .filter(|r| r.is_online_for_redis() && r.ack_time.elapsed().as_secs() <= lag)
            .count()
    }

    /// Why a command may not run now for replication reasons: `READONLY`
    /// on a read-only replica, `MASTERDOWN` while the link is down and
    /// stale data is refused, `NOREPLICAS` below `min-replicas-to-write`.
    pub fn replication_refusal(&self, client_id: u64, flags: u32) -> Option<&'static str> {
        use crate::commands::flags::{STALE, WRITE};
        let from_master = self.repl.master_client_id() == Some(client_id);
        if from_master {
            return None;
        }
        let cfg = &self.config.repl;
        match &self.repl.link {
            None => {
                if flags & WRITE != 0
                    && cfg.min_replicas_to_write > 0
                    && cfg.min_replicas_max_lag > 0
                    && (self.good_replicas() as u64) < cfg.min_replicas_to_write
                {
                    return Some("NOREPLICAS Not enough good replicas to write.");
                }
            }
            Some(l) => {
                if flags & WRITE != 0 && cfg.replica_read_only {
                    return Some("READONLY You can't write against a read only replica.");
                }
                if !l.is_up() && !cfg.replica_serve_stale_data && flags & STALE == 0 {
                    return Some(
                        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
                    );
                }
            }
        }
        None
    }

    /// `ROLE`.
    pub fn role_reply(&self, out: &mut crate::net::client::Reply) {
        match &self.repl.link {
            None => {
                out.array(3);
                out.bulk(b"master");
                out.int(self.repl.master_repl_offset);
                let online: Vec<_> = self
                    .repl
                    .master
                    .replicas
                    .iter()
                    .filter(|r| r.is_online())
                    .collect();
                out.array(online.len());
                for r in online {
                    out.array(3);
                    out.bulk(r.ip.as_bytes());
                    out.bulk(r.listening_port.to_string().as_bytes());
                    out.bulk(r.ack_offset.to_string().as_bytes());
                }
            }
            Some(l) => {
                out.array(5);
                out.bulk(b"slave");
                out.bulk(l.host.as_bytes());
                out.int(l.port as i64);
                out.bulk(l.state_name().as_bytes());
                out.int(if l.is_up() {
                    self.repl.master_repl_offset
                } else {
                    -1
                });
            }
        }
    }
}

impl Server {
    /// Before the loop sleeps: both sides' work. Returns the tokens of
    /// clients whose buffered input must be processed now.
    pub fn replication_tick(&mut self) -> Vec<usize> {
        self.update_failover_status();
        let mut resume = self.replica_tick();
        resume.extend(self.master_tick());
        resume
    }

    /// From the cron: once a second, PINGs, ACKs and timeouts.
    pub fn replication_cron(&mut self) {
        if self.repl.last_cron.elapsed() < std::time::Duration::from_secs(1) {
            return;
        }
        self.repl.last_cron = Instant::now();
        self.replica_cron();
        self.master_cron();
    }

    /// A client connection closed (with `db` selected): it may have been a
    /// replica or our master.
    pub fn repl_client_closed(&mut self, id: u64, db: usize) {
        if self.repl.master_client_id() == Some(id) {
            self.master_link_closed(db);
        } else {
            self.replica_closed(id);
        }
    }

    /// Whether the loop should wake often (a transfer or a sync in flight).
    pub fn repl_busy(&self) -> bool {
        self.repl.transfers_in_flight()
            || self.repl.link.as_ref().is_some_and(|l| l.syncing())
            || !self.repl.master.waiters.is_empty()
    }
}

/// The replication series of `/metrics` (see docs/metrics.md).
pub fn collect_replication(srv: &Server, r: &mut crate::metrics::Registry) {
    use crate::metrics::Kind;
    let repl = &srv.repl;
    r.gauge(
        "ferrokv_replication_is_replica",
        "1 when this server replicates from a master (INFO role:slave).",
        repl.is_replica() as u8 as f64,
    );
    r.gauge(
        "ferrokv_replication_offset_bytes",
        "The replication stream's offset (INFO master_repl_offset).",
        repl.master_repl_offset as f64,
    );
    r.gauge(
        "ferrokv_replication_connected_replicas",
        "Replicas attached, in any state (INFO connected_slaves).",
        repl.master.replicas.len() as f64,
    );
    r.gauge(
        "ferrokv_replication_backlog_histlen_bytes",
        "Bytes of stream held in the backlog (INFO repl_backlog_histlen).",
        repl.backlog.as_ref().map_or(0, |b| b.histlen()) as f64,
    );
    let st = &repl.stats;
    r.counter(
        "ferrokv_replication_full_syncs_total",
        "Full syncs served to replicas (INFO sync_full).",
        st.sync_full as f64,
    );
    r.counter(
        "ferrokv_replication_partial_syncs_total",
        "Partial resyncs accepted (INFO sync_partial_ok).",
        st.sync_partial_ok as f64,
    );
    r.counter(
        "ferrokv_replication_partial_sync_errors_total",
        "Partial resyncs refused (INFO sync_partial_err).",
        st.sync_partial_err as f64,
    );
    r.counter(
        "ferrokv_replication_replica_outbuf_disconnections_total",
        "Replicas dropped for their output-buffer limit.",
        st.replica_outbuf_disconnections as f64,
    );
    r.counter(
        "ferrokv_replication_rdb_sent_bytes_total",
        "Snapshot payload bytes sent to replicas.",
        st.rdb_bytes_sent as f64,
    );
    r.counter(
        "ferrokv_replication_rdb_received_bytes_total",
        "Snapshot payload bytes received from the master.",
        st.rdb_bytes_received as f64,
    );
    r.gauge(
        "ferrokv_replication_last_full_sync_duration_seconds",
        "On a replica: PSYNC to serving the new data, last full sync (0 before one).",
        st.last_full_sync_secs,
    );
    r.gauge(
        "ferrokv_replication_master_link_up",
        "On a replica: 1 while the link to the master is up (INFO master_link_status).",
        repl.link.as_ref().is_some_and(|l| l.is_up()) as u8 as f64,
    );
    r.gauge(
        "ferrokv_replication_master_last_io_seconds",
        "On a replica: seconds since the master last sent something (-1 when not a replica).",
        repl.link
            .as_ref()
            .map_or(-1.0, |l| l.last_io.elapsed().as_secs_f64()),
    );
    let lag = r.family(
        "ferrokv_replication_replica_lag_seconds",
        "Per replica: seconds since its last REPLCONF ACK (INFO slaveN lag).",
        Kind::Gauge,
    );
    for s in &repl.master.replicas {
        let addr = format!("{}:{}", s.ip, s.listening_port);
        lag.sample(&[("replica", &addr)], s.ack_time.elapsed().as_secs_f64());
    }
    let acked = r.family(
        "ferrokv_replication_replica_acked_offset_bytes",
        "Per replica: the offset it last acknowledged (INFO slaveN offset).",
        Kind::Gauge,
    );
    for s in &repl.master.replicas {
        let addr = format!("{}:{}", s.ip, s.listening_port);
        acked.sample(&[("replica", &addr)], s.ack_offset as f64);
    }
    let changes = r.family(
        "ferrokv_replication_role_changes_total",
        "Role changes: promoted (replica to master), demoted (master to replica), \
         switched (a replica re-pointed to another master).",
        Kind::Counter,
    );
    changes.sample(&[("change", "promoted")], st.promotions as f64);
    changes.sample(&[("change", "demoted")], st.demotions as f64);
    changes.sample(&[("change", "switched")], st.master_switches as f64);
}
