//! RDMA client connections (docs/rdma.md, "RDMA connections"): the `rdma-bind` listener's
//! connection requests that carry a stream's token are accepted here, without blocking the
//! loop, and become clients like any other (`Conn::Rdma`). Requests with a full sync's token
//! stay with the replication code that issued it.
//!
//! An accepted request waits in [`RdmaPending`] (its event queue's fd in the loop's poll)
//! until `FI_CONNECTED`; then the usual admission checks (`maxclients`, protected mode) and
//! the client table. Before the loop sleeps, [`Server::rearm_rdma_clients`] asks each RDMA
//! client's queues whether sleeping is safe (`fi_trywait`) and serves those that made
//! progress meanwhile.
//!
//! With `rdma-autotune yes`, [`tune`] learns each client host's live knobs
//! (signalling interval, inline threshold, completion-queue polling time).

pub mod tune;

use crate::net::client::Client;
use crate::net::conn::{Addr, Conn};
use crate::server::Server;
use ferrokv_fabric::{ConnectionRequest, Listener, PendingStream, StreamConfig};
use mio::unix::SourceFd;
use mio::{Interest, Token};
use std::io::Write as _;

/// Tokens of pending RDMA connections: `PENDING_BASE..PENDING_END`, below the replication
/// RDMA tokens.
pub const PENDING_BASE: usize = crate::replication::rdma::master::TOKEN_BASE - 1024;
pub const PENDING_END: usize = crate::replication::rdma::master::TOKEN_BASE;

/// Accepted RDMA connections not yet established.
#[derive(Default)]
pub struct RdmaPending {
    pending: slab::Slab<PendingStream>,
    /// Slots of the RDMA clients in the client table: the loop re-arms them
    /// before sleeping and the cron keeps them alive, without going over
    /// every other client.
    pub tokens: Vec<usize>,
    /// Totals of closed RDMA connections (`INFO rdma`; live ones are added when shown).
    pub closed: ferrokv_fabric::StreamStats,
    /// Connections accepted and refused since start.
    pub accepted: u64,
    pub refused: u64,
    /// Registered rings kept for the next connection (`rdma-conn-pool`), made at the
    /// first connection.
    pub pool: Option<ferrokv_fabric::RingPool>,
    /// `rdma-autotune yes`: the per-host tuners (made at the first
    /// connection with autotune on).
    pub tuning: Option<tune::ConnTuning>,
    /// Polls before sleeping (`rdma-conn-poll-usec`) that found work, and
    /// those that ran out and slept.
    pub poll_found: u64,
    pub poll_slept: u64,
}

/// The rings a server-side RDMA connection gets.
pub fn stream_config(srv: &Server) -> StreamConfig {
    let c = &srv.config.repl.rdma;
    StreamConfig {
        slots: c.conn_slots,
        slot_size: c.conn_slot_size,
        credit_every: (c.conn_slots / 4).max(1),
        inject: c.conn_inject,
        // With autotune the interval changes live, which needs an endpoint
        // made for selective completions (interval > 1 at accept); the
        // tuner's value is set right after.
        signal_every: if c.autotune {
            c.conn_signal_every.max(2)
        } else {
            c.conn_signal_every
        }
        .min(c.conn_slots),
    }
}

impl Server {
    /// A stream connection request from the RDMA listener: answered now, established later.
    pub fn accept_rdma_request(&mut self, listener: &Listener, req: ConnectionRequest) {
        let config = stream_config(self);
        if self.rdma_conns.pending.len() >= PENDING_END - PENDING_BASE {
            self.rdma_conns.refused += 1;
            let _ = listener.pep.reject(req, b"busy");
            return;
        }
        let keep = self.config.repl.rdma.conn_pool;
        let pool = self
            .rdma_conns
            .pool
            .get_or_insert_with(|| ferrokv_fabric::RingPool::new(keep))
            .clone();
        let pending = match PendingStream::accept_pooled(listener, req, config, &pool) {
            Ok(p) => p,
            Err(e) => {
                self.rdma_conns.refused += 1;
                tracing::warn!("RDMA connection refused: {e}");
                return;
            }
        };
        let fd = pending.eq_fd();
        let slot = self.rdma_conns.pending.insert(pending);
        if let Some(reg) = &self.repl.registry {
            if let Err(e) = reg.register(
                &mut SourceFd(&fd),
                Token(PENDING_BASE + slot),
                Interest::READABLE,
            ) {
                tracing::warn!("Registering an RDMA connection: {e}");
                self.rdma_conns.pending.remove(slot);
                return;
            }
        }
        // FI_CONNECTED may be there already.
        self.rdma_pending_event(PENDING_BASE + slot);
    }

    /// A pending connection's event queue is readable.
    pub fn rdma_pending_event(&mut self, token: usize) {
        let slot = token - PENDING_BASE;
        if !self.rdma_conns.pending.contains(slot) {
            return;
        }
        let pending = self.rdma_conns.pending.remove(slot);
        let fd = pending.eq_fd();
        let stream = match pending.poll() {
            Ok(Ok(stream)) => stream,
            Ok(Err(still)) => {
                self.rdma_conns.pending.insert(still);
                return;
            }
            Err(e) => {
                self.rdma_conns.refused += 1;
                self.deregister_fd(fd);
                tracing::debug!("RDMA connection failed before it was established: {e}");
                return;
            }
        };
        self.deregister_fd(fd);
        self.admit_rdma_client(stream);
    }

    fn deregister_fd(&self, fd: i32) {
        if let Some(reg) = &self.repl.registry {
            let _ = reg.deregister(&mut SourceFd(&fd));
        }
    }

    /// The admission of `accept_clients`, for an established RDMA connection.
    fn admit_rdma_client(&mut self, stream: ferrokv_fabric::Stream) {
        let peer = stream
            .peer_addr()
            .map(Addr::Ip)
            .unwrap_or_else(|_| Addr::none());
        let local = stream
            .local_addr()
            .map(Addr::Ip)
            .unwrap_or_else(|_| Addr::none());
        let mut stream = stream;
        let mut knobs = self.rdma_conn_knobs();
        if let (true, Addr::Ip(ip)) = (self.config.repl.rdma.autotune, &peer) {
            let dir = std::path::PathBuf::from(&self.config.dir);
            knobs = self
                .rdma_conns
                .tuning
                .get_or_insert_with(|| tune::ConnTuning::new(&dir))
                .admit(ip.ip(), knobs, std::time::Instant::now());
        }
        apply_knobs(&mut stream, knobs);
        let mut conn = Conn::Rdma(Box::new(stream));
        self.stats.total_connections_received += 1;
        if let Some(refusal) = self.admission_refusal(&peer) {
            self.rdma_conns.refused += 1;
            let _ = conn.write_all(refusal);
            return;
        }
        let id = self.next_client_id;
        self.next_client_id += 1;
        let authenticated = self.acl.default_open();
        let entry = self.clients.vacant_entry();
        let token = entry.key();
        let mut client = Client::new(id, conn, peer, local, &mut self.pool, authenticated);
        client.token = token;
        let Some(reg) = &self.repl.registry else {
            return;
        };
        if let Err(e) = reg.register(
            client.conn.stream.as_mut().expect("a connection"),
            Token(token),
            Interest::READABLE,
        ) {
            tracing::warn!("Registering an RDMA client: {e}");
            return;
        }
        tracing::debug!("Accepted RDMA client {}", client.addr);
        entry.insert(Some(Box::new(client)));
        self.rdma_conns.tokens.push(token);
        self.rdma_conns.accepted += 1;
        // Commands may have landed before the registration.
        self.pending_reads.push(token);
    }

    /// Before the loop sleeps: each RDMA client's queues are asked whether sleeping is safe;
    /// one that made progress meanwhile is served at once (its reads, and a reply that was
    /// waiting for the peer's credits).
    pub fn rearm_rdma_clients(&mut self) {
        for i in 0..self.rdma_conns.tokens.len() {
            let t = self.rdma_conns.tokens[i];
            let Some(Some(c)) = self.clients.get_mut(t) else {
                continue;
            };
            let Some(conn) = c.conn.stream.as_mut() else {
                continue;
            };
            if !matches!(conn.rearm(), Ok(true)) {
                self.pending_reads.push(t);
                if c.pending_output() > 0 && !c.pending_write {
                    c.pending_write = true;
                    self.pending_writes.push(t);
                }
            }
        }
    }

    /// The knobs the configuration gives RDMA connections (what a cold
    /// tuner starts from, and what `rdma-autotune no` runs).
    pub fn rdma_conn_knobs(&self) -> tune::Knobs {
        let c = &self.config.repl.rdma;
        tune::Knobs {
            signal_every: c.conn_signal_every.min(c.conn_slots),
            inline: if c.conn_inject {
                c.conn_inline_bytes as usize
            } else {
                0
            },
            poll_usec: c.conn_poll_usec,
        }
    }

    /// How long the loop polls RDMA clients' queues before it sleeps:
    /// the tuners' choice under `rdma-autotune yes`, else
    /// `rdma-conn-poll-usec`; 0 without RDMA clients.
    pub fn rdma_poll_usec(&self) -> u64 {
        if self.rdma_conns.tokens.is_empty() {
            return 0;
        }
        let configured = self.config.repl.rdma.conn_poll_usec;
        match (&self.rdma_conns.tuning, self.config.repl.rdma.autotune) {
            (Some(t), true) => t.poll_usec(configured),
            _ => configured,
        }
    }

    /// The cron's autotune step for RDMA connections: windows are added
    /// up and recorded, and hosts whose setting changed get it on every
    /// connection. With autotune turned off, connections go back to the
    /// configured knobs and what was learned is saved.
    pub fn rdma_conn_tune_tick(&mut self) {
        let autotune = self.config.repl.rdma.autotune;
        if !autotune {
            if let Some(t) = self.rdma_conns.tuning.take() {
                for s in t.states() {
                    s.write_in_background();
                }
                let knobs = self.rdma_conn_knobs();
                for i in 0..self.rdma_conns.tokens.len() {
                    let tok = self.rdma_conns.tokens[i];
                    if let Some(s) = self.rdma_stream_mut(tok) {
                        apply_knobs(s, knobs);
                    }
                }
            }
            return;
        }
        if self.rdma_conns.tokens.is_empty() && self.rdma_conns.tuning.is_none() {
            return;
        }
        // (client id, host, counters) for the tuner, and each one's slot.
        let mut conns = Vec::with_capacity(self.rdma_conns.tokens.len());
        let mut slots = Vec::with_capacity(self.rdma_conns.tokens.len());
        for &t in &self.rdma_conns.tokens {
            let Some(Some(c)) = self.clients.get(t) else {
                continue;
            };
            let (Addr::Ip(ip), Some(stats)) =
                (&c.addr, c.conn.stream.as_ref().and_then(|s| s.rdma_stats()))
            else {
                continue;
            };
            conns.push((c.id, ip.ip(), stats));
            slots.push(t);
        }
        let defaults = self.rdma_conn_knobs();
        let window = std::time::Duration::from_millis(self.config.repl.rdma.tune_window_ms);
        let dir = std::path::PathBuf::from(&self.config.dir);
        // Autotune just turned on: the connections already open run on the
        // configured knobs until their host's tuner sets its own.
        let fresh = self.rdma_conns.tuning.is_none();
        let tuning = self
            .rdma_conns
            .tuning
            .get_or_insert_with(|| tune::ConnTuning::new(&dir));
        tuning.configure(&dir);
        let (mut changed, saves) = tuning.tick(&conns, window, defaults, std::time::Instant::now());
        for s in saves {
            s.write_in_background();
        }
        if fresh {
            let mut hosts: Vec<std::net::IpAddr> = conns.iter().map(|&(_, ip, _)| ip).collect();
            hosts.sort();
            hosts.dedup();
            changed = hosts
                .into_iter()
                .filter_map(|ip| Some((ip, tuning.knobs(&ip)?)))
                .collect();
        }
        for (host, knobs) in changed {
            for (&t, &(_, ip, _)) in slots.iter().zip(&conns) {
                if ip == host {
                    if let Some(s) = self.rdma_stream_mut(t) {
                        apply_knobs(s, knobs);
                    }
                }
            }
        }
    }

    fn rdma_stream_mut(&mut self, t: usize) -> Option<&mut ferrokv_fabric::Stream> {
        self.clients
            .get_mut(t)?
            .as_mut()?
            .conn
            .stream
            .as_mut()?
            .rdma_stream_mut()
    }

    /// The cron's keepalives (`rdma-keepalive`): the RDMA clients whose
    /// keepalive failed, to be closed.
    pub fn rdma_keepalives(&mut self) -> Vec<usize> {
        let after = self.config.repl.rdma.conn_keepalive;
        let mut dead = Vec::new();
        if after == 0 {
            return dead;
        }
        for &t in &self.rdma_conns.tokens {
            let Some(Some(c)) = self.clients.get_mut(t) else {
                continue;
            };
            let Some(conn) = c.conn.stream.as_mut() else {
                continue;
            };
            if conn
                .keepalive_if_idle(std::time::Duration::from_secs(after))
                .is_err()
            {
                tracing::debug!("RDMA keepalive failed: closing client id={}", c.id);
                dead.push(t);
            }
        }
        dead
    }

    /// An RDMA client leaves slot `t` of the table: its counters join the
    /// totals.
    pub fn rdma_client_closed(&mut self, t: usize, conn: &Conn) {
        if let Some(s) = conn.rdma_stats() {
            self.rdma_conns.tokens.retain(|&x| x != t);
            self.rdma_conns.closed.add(&s);
        }
    }

    /// Totals over every RDMA connection, open and closed.
    pub fn rdma_conn_totals(&self) -> ferrokv_fabric::StreamStats {
        let mut total = self.rdma_conns.closed;
        for &t in &self.rdma_conns.tokens {
            if let Some(Some(c)) = self.clients.get(t) {
                if let Some(s) = c.conn.stream.as_ref().and_then(|s| s.rdma_stats()) {
                    total.add(&s);
                }
            }
        }
        total
    }
}

/// Sets a live connection's signalling interval and inline threshold.
fn apply_knobs(s: &mut ferrokv_fabric::Stream, k: tune::Knobs) {
    s.set_signal_every(k.signal_every);
    s.set_inline_threshold(k.inline);
}

impl Server {
    /// `INFO rdma`'s fields of the connections' polling and autotune: the
    /// poll time in force, and the last host's tuner (its setting, the
    /// model's prediction and the last window's measurements).
    pub fn rdma_conn_tune_info(&self, o: &mut String) {
        use std::fmt::Write as _;
        macro_rules! f {
            ($($arg:tt)*) => {{ let _ = write!(o, $($arg)*); o.push_str("\r\n"); }};
        }
        let c = &self.rdma_conns;
        f!("rdma_conn_poll_usec:{}", self.rdma_poll_usec());
        f!("rdma_conn_polls_found:{}", c.poll_found);
        f!("rdma_conn_polls_slept:{}", c.poll_slept);
        let on = self.config.repl.rdma.autotune;
        f!("rdma_conn_autotune:{}", on as u8);
        let Some(t) = c.tuning.as_ref().filter(|_| on) else {
            return;
        };
        f!("rdma_conn_tune_windows:{}", t.windows);
        f!("rdma_conn_tune_idle_windows:{}", t.idle_windows);
        let Some((host, start, r, last)) = t.report() else {
            return;
        };
        let mbps = |v: Option<f64>| v.map_or(String::new(), |v| format!("{:.2}", v / 1e6));
        f!("rdma_conn_tune_host:{host}");
        f!("rdma_conn_tune_start:{}", start.name());
        for (name, value) in &r.current {
            f!("rdma_conn_tune_{name}:{value}");
        }
        f!("rdma_conn_tune_predicted_mbps:{}", mbps(r.predicted));
        f!(
            "rdma_conn_tune_measured_mbps:{}",
            mbps(last.map(|l| l.bytes as f64 / l.seconds))
        );
        if let Some(l) = last {
            f!(
                "rdma_conn_tune_window_ops_per_sec:{:.0}",
                l.ops as f64 / l.seconds
            );
            f!("rdma_conn_tune_window_p50_usec:{}", l.p50_us);
            f!("rdma_conn_tune_window_p99_usec:{}", l.p99_us);
            f!("rdma_conn_tune_window_credit_stalls:{}", l.credit_stalls);
            f!("rdma_conn_tune_window_cpu_share:{:.3}", l.cpu_share);
        }
        f!("rdma_conn_tune_explorations:{}", r.explorations);
        f!("rdma_conn_tune_rejections:{}", r.rejections);
        f!("rdma_conn_tune_converged:{}", r.converged as u8);
    }

    /// The same as series. Every family is always declared, with samples
    /// once a host's tuner recorded a window.
    pub fn rdma_conn_tune_metrics(&self, r: &mut crate::metrics::Registry) {
        use crate::metrics::Kind;
        let c = &self.rdma_conns;
        r.gauge(
            "ferrokv_rdma_conn_poll_usec",
            "Microseconds the loop polls RDMA clients' completion queues before it sleeps (rdma-conn-poll-usec or the autotuner's choice; INFO rdma_conn_poll_usec).",
            self.rdma_poll_usec() as f64,
        );
        r.family(
            "ferrokv_rdma_conn_polls_total",
            "Polls before sleeping that found work (result=found) or ran out and slept (result=slept).",
            Kind::Counter,
        )
        .sample(&[("result", "found")], c.poll_found as f64)
        .sample(&[("result", "slept")], c.poll_slept as f64);
        let on = self.config.repl.rdma.autotune;
        r.gauge(
            "ferrokv_rdma_conn_autotune",
            "1 while RDMA connections' signalling, inline threshold and polling time are tuned online (INFO rdma_conn_autotune).",
            on as u8 as f64,
        );
        let t = c.tuning.as_ref().filter(|_| on);
        let report = t.and_then(|t| t.report());
        let host = report
            .as_ref()
            .map_or(String::new(), |(h, ..)| h.to_string());
        let labels: [(&'static str, &str); 1] = [("host", host.as_str())];
        let setting = r.family(
            "ferrokv_rdma_conn_tune_setting",
            "The last tuned client host's setting, by parameter (INFO rdma_conn_tune_<param>).",
            Kind::Gauge,
        );
        if let Some((_, _, rep, _)) = &report {
            for (name, value) in &rep.current {
                setting.sample(&[("param", name), ("host", host.as_str())], *value as f64);
            }
        }
        let predicted = r.family(
            "ferrokv_rdma_conn_tune_predicted_bytes_per_second",
            "The tuner's prediction for that setting (INFO rdma_conn_tune_predicted_mbps x 10^6).",
            Kind::Gauge,
        );
        if let Some(p) = report.as_ref().and_then(|(_, _, rep, _)| rep.predicted) {
            predicted.sample(&labels, p);
        }
        let last = report.as_ref().and_then(|(.., l)| *l);
        for (name, help, value) in [
            (
                "ferrokv_rdma_conn_tune_measured_bytes_per_second",
                "Bytes both ways over the host's last recorded window (INFO rdma_conn_tune_measured_mbps x 10^6).",
                last.map(|l| l.bytes as f64 / l.seconds),
            ),
            (
                "ferrokv_rdma_conn_tune_window_p99_seconds",
                "The last window's write completion latency, 99th percentile (INFO rdma_conn_tune_window_p99_usec / 10^6).",
                last.map(|l| l.p99_us / 1e6),
            ),
            (
                "ferrokv_rdma_conn_tune_window_cpu_share",
                "Share of a CPU the event loop used over the last window (INFO rdma_conn_tune_window_cpu_share).",
                last.map(|l| l.cpu_share),
            ),
        ] {
            let f = r.family(name, help, Kind::Gauge);
            if let Some(v) = value {
                f.sample(&labels, v);
            }
        }
        let windows = r.family(
            "ferrokv_rdma_conn_tune_windows_total",
            "Windows of RDMA connections' traffic the tuners learned from (INFO rdma_conn_tune_windows).",
            Kind::Counter,
        );
        if let Some(t) = t {
            windows.sample(&[], t.windows as f64);
        }
        for (name, help, value) in [
            (
                "ferrokv_rdma_conn_tune_explorations_total",
                "The host's windows run on a setting being tried (INFO rdma_conn_tune_explorations, the last tuned host).",
                report.as_ref().map(|(_, _, rep, _)| rep.explorations),
            ),
            (
                "ferrokv_rdma_conn_tune_rejections_total",
                "The host's tried settings dropped below 0.9x its defaults (INFO rdma_conn_tune_rejections, the last tuned host).",
                report.as_ref().map(|(_, _, rep, _)| rep.rejections),
            ),
        ] {
            let f = r.family(name, help, Kind::Counter);
            if let Some(v) = value {
                f.sample(&labels, v as f64);
            }
        }
    }
}
