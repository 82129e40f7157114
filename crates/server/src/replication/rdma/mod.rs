//! RDMA full sync (ARCHITECTURE.md §6, docs/rdma.md): the control stays on
//! the TCP replication link, the snapshot file moves by one-sided
//! write-with-immediate into the replica's registered ring.
//!
//! ```text
//!  replica (repl-sync thread)                      master (event loop)
//!  REPLCONF capa rdma ───────────────────────────► remembers the capability
//!  PSYNC ? -1 ───────────────────────────────────► disk snapshot (joined or
//!                     ◄─────────── "\n" keepalives  started), mapped, CRC64
//!                     ◄── +RDMAFULLSYNC <replid> <offset> <endpoint>
//!                                   <length> <crc64> <token>
//!  register ring K×C, fi_connect(RingDescriptor
//!    {addr,key,K,C,token}) ──────────────────────► FI_CONNREQ: token known?
//!                                                  else fi_reject
//!                     ◄─────────────── fi_writedata(slot i mod K, imm = i)
//!  slot → temp file (write done) → fi_send credit ► one more write allowed
//!  length + CRC64, fsync, rename, load
//!  REPLCONF rdma-done ───────────────────────────► buffered stream → TCP
//! ```
//!
//! `master.rs` is the loop's side: the listener's and every transfer's
//! EQ/CQ fds are registered in the reactor's `Poll` and drained until
//! `-FI_EAGAIN`, with `fi_trywait` before sleeping (no spinning, no
//! thread). `replica.rs` runs on the replica's `repl-sync` thread, which
//! already owns the blocking handshake and snapshot reception; it sleeps in
//! `poll(2)` on its two fds. Any RDMA failure tears everything down,
//! installs nothing and makes the next attempt a plain TCP sync.

pub mod master;
pub mod replica;
pub mod tune;

use crate::metrics::LatencyHistogram;
use ferrokv_fabric::tune::Report;
use ferrokv_fabric::{Hints, Info, Library};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// The `rdma-*` options.
#[derive(Debug, Clone)]
pub struct RdmaConfig {
    /// Address the master's RDMA listener binds (empty: no RDMA offered).
    pub bind: String,
    /// Its port (0: any free port).
    pub port: u16,
    /// libfabric provider (`tcp` here, `verbs` on InfiniBand/RoCE).
    pub provider: String,
    /// Replica: offer `REPLCONF capa rdma`.
    pub replica_rdma: bool,
    /// Replica: ring slots K (of each endpoint's ring).
    pub ring_slots: u32,
    /// Replica: endpoints a full sync runs over (`rdma-sync-endpoints`).
    pub sync_endpoints: u32,
    /// Replica: learn N, K and C per master (`rdma-autotune`), within
    /// this much pinned memory (`rdma-autotune-memory`).
    pub autotune: bool,
    pub autotune_memory: u64,
    /// Replica: bytes per slot C.
    pub chunk_size: u32,
    /// RDMA client connections: slots K of each side's receive ring, and
    /// bytes per slot C (`rdma-conn-slots`, `rdma-conn-slot-size`).
    pub conn_slots: u32,
    pub conn_slot_size: u32,
    /// Ring sets kept registered for the next connection (`rdma-conn-pool`).
    pub conn_pool: usize,
    /// Inject small writes (`rdma-conn-inject`).
    pub conn_inject: bool,
    /// `rdma-conn-signal-every`.
    pub conn_signal_every: u32,
    /// Microseconds the loop polls RDMA clients' completion queues before
    /// it sleeps on their fds (`rdma-conn-poll-usec`, 0: it sleeps at once).
    pub conn_poll_usec: u64,
    /// The largest write injected (`rdma-conn-inline-bytes`, capped at the
    /// provider's `inject_size`).
    pub conn_inline_bytes: u64,
    /// RDMA connections' autotune: the length of one measurement window
    /// (`rdma-autotune-window-ms`).
    pub tune_window_ms: u64,
    /// Seconds of silence before an RDMA client gets a keepalive
    /// (`rdma-keepalive`, 0: none).
    pub conn_keepalive: u64,
    /// Master: write from the snapshot mapping when the provider allows.
    pub zero_copy: bool,
    /// Master: pause between chunk writes (tests act mid-transfer).
    pub chunk_delay_us: u64,
    /// Master: flip a byte of this chunk (tests the CRC check); -1 off.
    pub debug_corrupt_chunk: i64,
    /// Master: close endpoint N of a several-endpoint sync after two of
    /// its chunks (tests one endpoint dying mid-transfer); -1 off.
    pub debug_drop_endpoint: i64,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            bind: String::new(),
            port: 0,
            provider: "tcp".into(),
            replica_rdma: false,
            ring_slots: 8,
            sync_endpoints: 1,
            autotune: false,
            autotune_memory: 64 << 20,
            chunk_size: 2 * 1024 * 1024,
            conn_slots: 16,
            conn_slot_size: 64 * 1024,
            conn_pool: 8,
            conn_inject: true,
            conn_signal_every: 4,
            conn_poll_usec: 0,
            conn_inline_bytes: 256,
            tune_window_ms: 250,
            conn_keepalive: 60,
            zero_copy: true,
            chunk_delay_us: 0,
            debug_corrupt_chunk: -1,
            debug_drop_endpoint: -1,
        }
    }
}

impl RdmaConfig {
    /// The provider to ask for (`FI_PROVIDER` decides when the option is empty).
    pub fn provider(&self) -> Option<&str> {
        (!self.provider.is_empty()).then_some(self.provider.as_str())
    }
}

/// The sync state machine, as `INFO rdma` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncState {
    Idle,
    WaitingSnapshot,
    Connecting,
    Transferring,
    Verifying,
    Loading,
    Done,
    Failed,
}

impl SyncState {
    pub fn name(self) -> &'static str {
        match self {
            SyncState::Idle => "idle",
            SyncState::WaitingSnapshot => "waiting-snapshot",
            SyncState::Connecting => "connecting",
            SyncState::Transferring => "transferring",
            SyncState::Verifying => "verifying",
            SyncState::Loading => "loading",
            SyncState::Done => "done",
            SyncState::Failed => "failed",
        }
    }
}

/// Counters shared by the loop (master side) and the sync thread (replica
/// side); a mutex held for a few adds.
#[derive(Debug)]
pub struct RdmaStats {
    pub state: SyncState,
    pub syncs_done: u64,
    pub bytes: u64,
    pub last_sync_mbps: f64,
    /// Replica: the last RDMA sync, from `+RDMAFULLSYNC` to the keyspace
    /// loaded and verified (the load runs during the transfer).
    pub last_sync_secs: f64,
    /// Replica: whether the last RDMA sync's temp file was written with
    /// `O_DIRECT` straight from the ring (`rdb-direct-io`, and a file
    /// system that takes it).
    pub last_sync_direct_io: bool,
    /// The endpoints the last RDMA sync ran over (`rdma-sync-endpoints`).
    pub last_sync_endpoints: u32,
    /// Master with `rdma-autotune yes`: windows of credits its tuner has
    /// learned from, and the writes in flight it set last.
    pub tune_transfer_windows: u64,
    pub tune_writes_in_flight: u64,
    pub credit_stalls: u64,
    pub retries: u64,
    pub rejected_tokens: u64,
    /// Fallbacks to TCP by reason (`peer-shutdown`, `completion-error`,
    /// `timeout`, `crc-mismatch`, `length-mismatch`, `connect`, ...).
    pub fallbacks: BTreeMap<&'static str, u64>,
    /// Post of a chunk's write to the return of its credit.
    pub write_latency: LatencyHistogram,
}

impl Default for RdmaStats {
    fn default() -> Self {
        RdmaStats {
            state: SyncState::Idle,
            syncs_done: 0,
            bytes: 0,
            last_sync_mbps: 0.0,
            last_sync_secs: 0.0,
            last_sync_direct_io: false,
            last_sync_endpoints: 0,
            tune_transfer_windows: 0,
            tune_writes_in_flight: 0,
            credit_stalls: 0,
            retries: 0,
            rejected_tokens: 0,
            fallbacks: BTreeMap::new(),
            write_latency: LatencyHistogram::default(),
        }
    }
}

pub type SharedStats = Arc<Mutex<RdmaStats>>;

/// Sets the state.
pub fn set_state(stats: &SharedStats, s: SyncState) {
    stats.lock().expect("rdma stats").state = s;
}

/// Records a failed RDMA sync: state `failed`, one more fallback for `reason`.
pub fn record_fallback(stats: &SharedStats, reason: &'static str, detail: &str) {
    tracing::warn!("RDMA sync failed ({reason}): {detail}; the sync is retried over TCP");
    let mut s = stats.lock().expect("rdma stats");
    s.state = SyncState::Failed;
    *s.fallbacks.entry(reason).or_default() += 1;
}

/// Records a completed transfer.
pub fn record_done(stats: &SharedStats, bytes: u64, secs: f64) {
    let mut s = stats.lock().expect("rdma stats");
    s.state = SyncState::Done;
    s.syncs_done += 1;
    s.bytes += bytes;
    s.last_sync_mbps = if secs > 0.0 {
        bytes as f64 / 1e6 / secs
    } else {
        0.0
    };
}

/// The process's RDMA side: whether it can be used, and its counters.
pub struct Rdma {
    pub lib: Option<Arc<Library>>,
    pub provider: String,
    pub unavailable_reason: Option<String>,
    pub stats: SharedStats,
    /// The master's listener and transfers, when `rdma-bind` is set and
    /// the provider works.
    pub master: Option<master::RdmaMaster>,
    /// Replica: the last sync over RDMA failed, the next ones go over TCP
    /// until one succeeds.
    pub fallback_pending: Arc<std::sync::atomic::AtomicBool>,
    /// Replica with `rdma-autotune yes`: what it learned per master.
    pub tuning: Option<Arc<Mutex<tune::SyncTuning>>>,
}

impl Rdma {
    /// Opens libfabric and checks the provider when either side wants
    /// RDMA; binds the master's listener. Failures are logged and kept as
    /// `rdma_unavailable_reason`; syncs then go over TCP.
    pub fn new(cfg: &RdmaConfig) -> Self {
        let mut r = Rdma {
            lib: None,
            provider: cfg.provider.clone(),
            unavailable_reason: None,
            stats: Arc::new(Mutex::new(RdmaStats::default())),
            master: None,
            fallback_pending: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            tuning: None,
        };
        if cfg.bind.is_empty() && !cfg.replica_rdma {
            r.unavailable_reason = Some("not configured (rdma-bind empty, replica-rdma no)".into());
            return r;
        }
        let lib = match Library::open_default() {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("RDMA sync disabled, syncs go over TCP: {e}");
                r.unavailable_reason = Some(e.to_string());
                return r;
            }
        };
        // The provider must offer what the sync needs (MSG endpoints, RMA
        // write with remote CQ data): ask it for a connection's info.
        let probe: std::net::SocketAddr = "127.0.0.1:1".parse().expect("literal");
        match Info::get(&lib, &Hints::connect(cfg.provider(), probe)) {
            Ok(info) => r.provider = info.provider_name(),
            Err(e) => {
                tracing::warn!(
                    "RDMA sync disabled, syncs go over TCP: provider '{}' lacks what the sync needs: {e}",
                    cfg.provider
                );
                r.unavailable_reason = Some(format!("provider {}: {e}", cfg.provider));
                return r;
            }
        }
        if !cfg.bind.is_empty() {
            match master::RdmaMaster::bind(&lib, cfg) {
                Ok(m) => {
                    tracing::info!(
                        "RDMA full sync offered on {} (provider {})",
                        m.endpoint,
                        r.provider
                    );
                    r.master = Some(m);
                }
                Err(e) => {
                    tracing::warn!(
                        "RDMA sync disabled, syncs go over TCP: can't listen on {}:{}: {e}",
                        cfg.bind,
                        cfg.port
                    );
                    r.unavailable_reason = Some(format!("listen {}:{}: {e}", cfg.bind, cfg.port));
                    return r;
                }
            }
        }
        r.lib = Some(lib);
        r
    }

    /// `CONFIG RESETSTAT`: counters from zero, the state machine kept.
    pub fn reset_stats(&self) {
        let mut s = self.stats.lock().expect("rdma stats");
        let state = s.state;
        *s = RdmaStats::default();
        s.state = state;
    }

    pub fn available(&self) -> bool {
        self.lib.is_some()
    }

    /// `INFO rdma`.
    pub fn info(&self, o: &mut String) {
        macro_rules! f {
            ($($arg:tt)*) => {{ let _ = write!(o, $($arg)*); o.push_str("\r\n"); }};
        }
        let s = self.stats.lock().expect("rdma stats");
        f!("# Rdma");
        f!("rdma_available:{}", self.available() as u8);
        f!("rdma_provider:{}", self.provider);
        f!(
            "rdma_unavailable_reason:{}",
            self.unavailable_reason
                .as_deref()
                .unwrap_or("")
                .replace(['\r', '\n'], " ")
        );
        f!(
            "rdma_endpoint:{}",
            self.master
                .as_ref()
                .map(|m| m.endpoint.to_string())
                .unwrap_or_default()
        );
        f!("rdma_sync_state:{}", s.state.name());
        f!("rdma_syncs_done:{}", s.syncs_done);
        f!("rdma_bytes:{}", s.bytes);
        f!("rdma_last_sync_mbps:{:.2}", s.last_sync_mbps);
        f!("rdma_last_sync_seconds:{:.3}", s.last_sync_secs);
        f!("rdma_last_sync_direct_io:{}", s.last_sync_direct_io as u8);
        f!("rdma_last_sync_endpoints:{}", s.last_sync_endpoints);
        f!("rdma_tune_transfer_windows:{}", s.tune_transfer_windows);
        f!("rdma_tune_writes_in_flight:{}", s.tune_writes_in_flight);
        f!("rdma_credit_stalls:{}", s.credit_stalls);
        f!("rdma_retries:{}", s.retries);
        f!("rdma_rejected_tokens:{}", s.rejected_tokens);
        f!(
            "rdma_transfers_in_flight:{}",
            self.master.as_ref().map_or(0, |m| m.transfers())
        );
        let total: u64 = s.fallbacks.values().sum();
        f!("rdma_fallbacks:{total}");
        for (reason, n) in &s.fallbacks {
            f!("rdma_fallbacks_{}:{n}", reason.replace('-', "_"));
        }
        drop(s);
        self.tune_info(o);
    }

    /// `INFO rdma`'s autotune fields (replica): the setting of the next
    /// sync from the last master, the tuner's prediction for it and the
    /// last sync's measured throughput.
    fn tune_info(&self, o: &mut String) {
        macro_rules! f {
            ($($arg:tt)*) => {{ let _ = write!(o, $($arg)*); o.push_str("\r\n"); }};
        }
        let report = self
            .tuning
            .as_ref()
            .and_then(|t| t.lock().expect("rdma tuning").report());
        f!("rdma_autotune:{}", report.is_some() as u8);
        let Some((peer, start, r, measured)) = report else {
            return;
        };
        let mbps = |v: Option<f64>| v.map_or(String::new(), |v| format!("{:.2}", v / 1e6));
        f!("rdma_tune_peer:{peer}");
        f!("rdma_tune_start:{}", start.name());
        for (name, value) in &r.current {
            f!("rdma_tune_{name}:{value}");
        }
        f!("rdma_tune_predicted_mbps:{}", mbps(r.predicted));
        f!("rdma_tune_measured_mbps:{}", mbps(measured));
        f!("rdma_tune_windows:{}", r.windows);
        f!("rdma_tune_explorations:{}", r.explorations);
        f!("rdma_tune_rejections:{}", r.rejections);
        f!("rdma_tune_converged:{}", r.converged as u8);
    }
}

impl crate::server::Server {
    /// Replica: what carries the link to the master now (`tcp`, `rdma`), or
    /// `none` while it is down (`INFO rdma` `rdma_repl_link`).
    pub fn repl_link_transport(&self) -> &'static str {
        match self.repl.link.as_ref().map(|l| &l.state) {
            Some(super::replica::LinkState::Connected { token, .. }) => self
                .clients
                .get(*token)
                .and_then(|c| c.as_ref())
                .and_then(|c| c.conn.stream.as_ref())
                .map_or("none", |s| s.transport().name()),
            _ => "none",
        }
    }

    /// Master: attached replicas whose link is an RDMA connection
    /// (`rdma_repl_replicas`).
    pub fn rdma_replicas(&self) -> usize {
        let ids = self.repl.master.replica_ids();
        self.rdma_conns
            .tokens
            .iter()
            .filter_map(|&t| self.clients.get(t).and_then(|c| c.as_ref()))
            .filter(|c| ids.contains(&c.id))
            .count()
    }
}

/// The RDMA series of `/metrics` (docs/metrics.md, docs/rdma.md).
pub fn collect_rdma(srv: &crate::server::Server, r: &mut crate::metrics::Registry) {
    use crate::metrics::Kind;
    let rdma = &srv.repl.rdma;
    let s = rdma.stats.lock().expect("rdma stats");
    r.gauge(
        "ferrokv_rdma_available",
        "1 when libfabric and the configured provider can carry RDMA syncs (INFO rdma_available).",
        rdma.available() as u8 as f64,
    );
    let state = r.family(
        "ferrokv_rdma_sync_state",
        "1 for the RDMA sync state machine's current state (INFO rdma_sync_state).",
        Kind::Gauge,
    );
    for st in [
        SyncState::Idle,
        SyncState::WaitingSnapshot,
        SyncState::Connecting,
        SyncState::Transferring,
        SyncState::Verifying,
        SyncState::Loading,
        SyncState::Done,
        SyncState::Failed,
    ] {
        state.sample(&[("state", st.name())], (st == s.state) as u8 as f64);
    }
    r.counter(
        "ferrokv_rdma_syncs_done_total",
        "Full syncs whose snapshot went over RDMA (INFO rdma_syncs_done).",
        s.syncs_done as f64,
    );
    r.counter(
        "ferrokv_rdma_bytes_total",
        "Snapshot bytes moved over RDMA (INFO rdma_bytes).",
        s.bytes as f64,
    );
    r.gauge(
        "ferrokv_rdma_last_sync_bytes_per_second",
        "Throughput of the last RDMA transfer (INFO rdma_last_sync_mbps × 10^6).",
        s.last_sync_mbps * 1e6,
    );
    r.gauge(
        "ferrokv_rdma_last_sync_seconds",
        "Replica: the last RDMA sync, +RDMAFULLSYNC to the keyspace loaded and verified (INFO rdma_last_sync_seconds).",
        s.last_sync_secs,
    );
    r.gauge(
        "ferrokv_rdma_last_sync_direct_io",
        "Replica: 1 when the last RDMA sync's temp file was written with O_DIRECT from the ring (INFO rdma_last_sync_direct_io).",
        s.last_sync_direct_io as u8 as f64,
    );
    r.counter(
        "ferrokv_rdma_tune_transfer_windows_total",
        "Master with rdma-autotune yes: windows of credits its writes-in-flight tuner learned from (INFO rdma_tune_transfer_windows).",
        s.tune_transfer_windows as f64,
    );
    r.gauge(
        "ferrokv_rdma_tune_writes_in_flight",
        "Master with rdma-autotune yes: the writes in flight it set last (INFO rdma_tune_writes_in_flight).",
        s.tune_writes_in_flight as f64,
    );
    r.gauge(
        "ferrokv_rdma_last_sync_endpoints",
        "The endpoints the last RDMA sync ran over (INFO rdma_last_sync_endpoints).",
        f64::from(s.last_sync_endpoints),
    );
    r.counter(
        "ferrokv_rdma_credit_stalls_total",
        "Times the master had a chunk ready but all K slots in flight (INFO rdma_credit_stalls).",
        s.credit_stalls as f64,
    );
    r.counter(
        "ferrokv_rdma_retries_total",
        "Syncs retried over TCP after an RDMA failure (INFO rdma_retries).",
        s.retries as f64,
    );
    r.counter(
        "ferrokv_rdma_rejected_tokens_total",
        "RDMA connections refused for an unknown token.",
        s.rejected_tokens as f64,
    );
    let fb = r.family(
        "ferrokv_rdma_fallbacks_total",
        "RDMA syncs abandoned for TCP, by reason (INFO rdma_fallbacks_*).",
        Kind::Counter,
    );
    for (reason, n) in &s.fallbacks {
        fb.sample(&[("reason", reason)], *n as f64);
    }
    r.gauge(
        "ferrokv_rdma_repl_link",
        "Replica: 1 while the link to the master (handshake, stream, ACKs) runs over an RDMA connection (INFO rdma_repl_link).",
        (srv.repl_link_transport() == "rdma") as u8 as f64,
    );
    r.gauge(
        "ferrokv_rdma_repl_replicas",
        "Master: attached replicas whose link is an RDMA connection (INFO rdma_repl_replicas).",
        srv.rdma_replicas() as f64,
    );
    r.histogram(
        "ferrokv_rdma_write_latency_seconds",
        "Master: a chunk's fi_writedata post to the return of its credit (rdma_write_latency).",
        &s.write_latency,
    );
    drop(s);
    collect_tune(rdma, r);
}

/// The autotune series (replica, `rdma-autotune yes`). Every family is
/// always declared, with samples once a tuned sync chose its setting, so
/// dashboards and alerts can name them on any server.
fn collect_tune(rdma: &Rdma, r: &mut crate::metrics::Registry) {
    use crate::metrics::Kind;
    let report = rdma
        .tuning
        .as_ref()
        .and_then(|t| t.lock().expect("rdma tuning").report());
    r.gauge(
        "ferrokv_rdma_autotune",
        "Replica: 1 while the full sync's endpoints, slots and chunk size are tuned online (INFO rdma_autotune).",
        report.is_some() as u8 as f64,
    );
    let report = report.as_ref();
    let peer = report.map_or("", |(p, ..)| p.as_str());
    let setting = r.family(
        "ferrokv_rdma_tune_setting",
        "Replica: the setting of the next RDMA sync from the last master, by parameter (INFO rdma_tune_<param>).",
        Kind::Gauge,
    );
    for (name, value) in report.map_or(&[][..], |(_, _, rep, _)| &rep.current[..]) {
        setting.sample(&[("param", name), ("peer", peer)], *value as f64);
    }
    let predicted = r.family(
        "ferrokv_rdma_tune_predicted_bytes_per_second",
        "Replica: the tuner's prediction for that setting (INFO rdma_tune_predicted_mbps × 10^6).",
        Kind::Gauge,
    );
    if let Some(p) = report.and_then(|(_, _, rep, _)| rep.predicted) {
        predicted.sample(&[("peer", peer)], p);
    }
    let measured = r.family(
        "ferrokv_rdma_tune_measured_bytes_per_second",
        "Replica: the last RDMA sync's measured throughput (INFO rdma_tune_measured_mbps × 10^6).",
        Kind::Gauge,
    );
    if let Some(m) = report.and_then(|(_, _, _, m)| *m) {
        measured.sample(&[("peer", peer)], m);
    }
    /// A counter's name, help and value in the report.
    type Counter = (&'static str, &'static str, fn(&Report) -> u64);
    let counters: [Counter; 3] = [
        (
            "ferrokv_rdma_tune_windows_total",
            "Replica: syncs the tuner has learned from since it started (INFO rdma_tune_windows).",
            |r| r.windows,
        ),
        (
            "ferrokv_rdma_tune_explorations_total",
            "Replica: syncs run on a setting being tried (INFO rdma_tune_explorations).",
            |r| r.explorations,
        ),
        (
            "ferrokv_rdma_tune_rejections_total",
            "Replica: tried settings dropped below 0.9x the defaults (INFO rdma_tune_rejections).",
            |r| r.rejections,
        ),
    ];
    for (name, help, value) in counters {
        let f = r.family(name, help, Kind::Counter);
        if let Some((_, _, rep, _)) = report {
            f.sample(&[("peer", peer)], value(rep) as f64);
        }
    }
    let converged = r.family(
        "ferrokv_rdma_tune_converged",
        "Replica: 1 when no neighbouring setting can beat the current one (INFO rdma_tune_converged).",
        Kind::Gauge,
    );
    if let Some((_, _, rep, _)) = report {
        converged.sample(&[("peer", peer)], rep.converged as u8 as f64);
    }
}
