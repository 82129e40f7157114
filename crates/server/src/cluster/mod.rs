//! Redis Cluster (`cluster-enabled yes`), byte-compatible with Redis 7.0's
//! cluster bus, so ferrokv nodes form clusters alone and with redis-server
//! nodes (docs/cluster.md). The layers, each in its file:
//! - `bus.rs`: the bus protocol, Redis 7.0's `clusterMsg`;
//! - `nodes.rs`: the node table's text form (`CLUSTER NODES` lines,
//!   `nodes.conf`);
//! - `state.rs`: the node table and Redis's rules over it (epoch
//!   collisions, PFAIL → FAIL, votes, replica rank, gossip);
//! - `link.rs`: the bus links (the listener on the bus port, one outbound
//!   link per node, the inbound ones), on the reactor's poll;
//! - `process.rs`: what each message does (`clusterProcessPacket`);
//! - `cron.rs`: the 100 ms cron (pings, failure detection, the cluster's
//!   state) and the replica's election;
//! - `redirect.rs`: which node serves a command (`-MOVED`, `-ASK`, ...);
//! - `command.rs`: `CLUSTER`, `ASKING`, `READONLY`, `READWRITE`.
//!
//! The key slots and the per-slot key index are in `crates/store`
//! (`slots.rs`).

pub mod bus;
pub mod command;
pub mod cron;
pub mod link;
pub mod nodes;
pub mod process;
pub mod redirect;
pub mod state;

use bus::{node_flags, Name};
use nodes::NodesConf;
use rand::Rng;
use state::{Announce, ClusterState, Node};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use tracing::{info, warn};

/// Message types counted in `CLUSTER INFO` (`cluster_stats_messages_*`),
/// by type number.
pub const MESSAGE_NAMES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// A replica's election in progress (`clusterHandleSlaveFailover`).
#[derive(Debug, Default, Clone)]
pub struct Election {
    /// When the election may begin (0: none scheduled).
    pub auth_time_ms: u64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub auth_rank: usize,
    pub auth_epoch: u64,
    pub cant_failover_logged_ms: u64,
}

/// A manual failover (`CLUSTER FAILOVER`), on either side.
#[derive(Debug, Default, Clone)]
pub struct ManualFailover {
    /// When it gives up (0: none in progress).
    pub end_ms: u64,
    /// Replica side: the master's offset once it paused (0: not yet).
    pub master_offset: Option<u64>,
    /// Replica side: may start the election.
    pub can_start: bool,
    /// Master side: the replica that asked.
    pub replica: Option<Name>,
}

/// The cluster as this node runs it: the table, the links, the slots in
/// migration, and what to do before the loop sleeps.
pub struct Cluster {
    pub state: ClusterState,
    /// `nodes.conf`, in `dir`.
    pub conf_path: PathBuf,
    pub bus_port: u16,
    pub links: link::Links,
    /// `CLUSTER SETSLOT MIGRATING`: slots we are moving out, to whom.
    pub migrating: BTreeMap<u16, Name>,
    /// `CLUSTER SETSLOT IMPORTING`: slots we are taking, from whom.
    pub importing: BTreeMap<u16, Name>,
    /// `cluster_state:ok`.
    pub ok: bool,
    /// Before the loop sleeps: write nodes.conf / recompute the state.
    pub todo_save: bool,
    pub todo_update_state: bool,
    pub sent: [u64; 11],
    pub received: [u64; 11],
    /// When the state was first computed (a master waits 2 s before it
    /// serves, Redis's `CLUSTER_WRITABLE_DELAY`).
    pub first_update_ms: u64,
    /// When we last saw ourselves in a minority partition.
    pub among_minority_ms: u64,
    pub cron_loops: u64,
    pub election: Election,
    pub manual: ManualFailover,
    /// Elections this node won (`/metrics`).
    pub failovers: u64,
    /// Replica migrations this node made to orphaned masters.
    pub migrations: u64,
    /// nodes.conf could not be written (Redis exits; we keep serving and
    /// report it in INFO and the log).
    pub save_error: Option<String>,
    /// How each command row's keys are found (`redirect.rs`).
    pub routes: Vec<redirect::Route>,
    /// `CLUSTER FORGET`: nodes gossip may not add back, until when.
    pub blacklist: HashMap<Name, u64>,
}

/// 40 random hex characters (a node id).
pub fn random_name(rng: &mut impl Rng) -> Name {
    let mut n = [0u8; 40];
    for b in n.iter_mut() {
        *b = b"0123456789abcdef"[rng.gen_range(0..16)];
    }
    n
}

pub fn name_str(n: &Name) -> &str {
    std::str::from_utf8(n).unwrap_or("?")
}

impl Cluster {
    /// The cluster is up, this node serves all 16384 slots and none is
    /// migrating or importing: a single-key command needs no redirection
    /// check (the common case of a one-node cluster, the cost of cluster
    /// mode on a single node).
    #[inline]
    pub fn serves_every_slot_stably(&self) -> bool {
        self.ok && self.state.mine_all() && self.migrating.is_empty() && self.importing.is_empty()
    }

    /// Loads `nodes.conf` or creates a new node (Redis's `clusterInit`).
    pub fn init(
        cfg: &crate::config::Config,
        rng: &mut impl Rng,
        now_ms: u64,
    ) -> Result<Cluster, String> {
        let conf_path = {
            let p = PathBuf::from(&cfg.cluster.config_file);
            if p.is_absolute() {
                p
            } else {
                PathBuf::from(&cfg.dir).join(p)
            }
        };
        if cfg.port > 65535 - 10000 && cfg.cluster.port == 0 {
            return Err(
                "Redis port number too high. Cluster communication port is 10,000 port numbers higher than your Redis port. Your Redis port number must be 55535 or less."
                    .into(),
            );
        }
        let timeout = cfg.cluster.node_timeout;
        let mut cl = Cluster {
            state: ClusterState::new(random_name(rng), timeout),
            conf_path,
            bus_port: cfg.cluster_bus_port(),
            links: link::Links::default(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            ok: false,
            todo_save: false,
            todo_update_state: true,
            sent: [0; 11],
            received: [0; 11],
            first_update_ms: 0,
            among_minority_ms: 0,
            cron_loops: 0,
            election: Election::default(),
            manual: ManualFailover::default(),
            failovers: 0,
            migrations: 0,
            save_error: None,
            blacklist: HashMap::new(),
            routes: Vec::new(),
        };
        match std::fs::read_to_string(&cl.conf_path) {
            Ok(text) if !text.trim().is_empty() => {
                let conf = NodesConf::parse(&text).map_err(|e| {
                    format!(
                        "Unrecoverable error: corrupted cluster config file \"{}\": {e}",
                        cl.conf_path.display()
                    )
                })?;
                cl.install_conf(&conf, now_ms)?;
                info!(
                    "Node configuration loaded, I'm {}",
                    name_str(&cl.state.myself)
                );
            }
            Ok(_) => cl.new_node_created(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => cl.new_node_created(),
            Err(e) => {
                return Err(format!(
                    "Can't open {} in order to load cluster configuration: {e}",
                    cl.conf_path.display()
                ))
            }
        }
        cl.save_config()?;
        Ok(cl)
    }

    fn new_node_created(&mut self) {
        info!(
            "No cluster configuration found, I'm {}",
            name_str(&self.state.myself)
        );
    }

    /// The table from a nodes.conf (`clusterLoadConfig`).
    fn install_conf(&mut self, conf: &NodesConf, now_ms: u64) -> Result<(), String> {
        let name = |s: &str| -> Result<Name, String> {
            s.as_bytes()
                .try_into()
                .map_err(|_| format!("bad node id {s}"))
        };
        let me = name(&conf.myself().id)?;
        let mut st = ClusterState::new(me, self.state.node_timeout_ms);
        st.nodes.clear();
        for e in &conf.nodes {
            let id = name(&e.id)?;
            let mut n = Node::new(id, e.flags);
            n.ip = e.ip.clone();
            n.port = e.port;
            n.cport = e.cport;
            n.hostname = e.hostname.clone();
            n.config_epoch = e.config_epoch;
            n.master = e.master.as_deref().map(name).transpose()?;
            n.ctime_ms = now_ms;
            // As Redis: the times of the file are not trusted.
            n.ping_sent_ms = 0;
            n.pong_received_ms = 0;
            // A node that was failing is only PFAIL-suspect until heard of.
            n.flags &= !(node_flags::PFAIL);
            if n.flags & node_flags::MYSELF != 0 {
                n.hostname = String::new();
            }
            st.nodes.insert(id, n);
            for (slot, to) in &e.migrating {
                self.migrating.insert(*slot, name(to)?);
            }
            for (slot, from) in &e.importing {
                self.importing.insert(*slot, name(from)?);
            }
        }
        // Masters with replicas in the file had them (MIGRATE_TO).
        let masters: Vec<Name> = st.nodes.values().filter_map(|n| n.master).collect();
        for m in masters {
            if let Some(n) = st.nodes.get_mut(&m) {
                n.flags |= node_flags::MIGRATE_TO;
            }
        }
        for e in &conf.nodes {
            let id = name(&e.id)?;
            for slot in 0..ferrokv_store::slots::SLOTS as u16 {
                if e.slots.get(slot) {
                    st.assign(slot, id);
                }
            }
        }
        st.current_epoch = conf.current_epoch;
        st.last_vote_epoch = conf.last_vote_epoch;
        // Redis: the current epoch is at least every node's config epoch.
        let max_epoch = st.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0);
        st.current_epoch = st.current_epoch.max(max_epoch);
        self.state = st;
        Ok(())
    }

    /// The table as `CLUSTER NODES` shows it and nodes.conf keeps it.
    pub fn to_conf(&self) -> NodesConf {
        let mut conf = self.state.to_conf();
        let text = |n: &Name| name_str(n).to_string();
        for e in &mut conf.nodes {
            let id: Name = e.id.as_bytes().try_into().expect("ids are 40 bytes");
            e.connected = self.links.outbound_connected(&id);
            // A replica is shown with its master's config epoch, as Redis
            // 7.0's `clusterGenNodeDescription` does.
            if let Some(m) = e.master.as_deref() {
                let m: Option<Name> = m.as_bytes().try_into().ok();
                if let Some(mn) = m.and_then(|m| self.state.nodes.get(&m)) {
                    e.config_epoch = mn.config_epoch;
                }
            }
            if e.flags & node_flags::MYSELF != 0 {
                e.migrating = self.migrating.iter().map(|(s, n)| (*s, text(n))).collect();
                e.importing = self.importing.iter().map(|(s, n)| (*s, text(n))).collect();
            }
        }
        conf
    }

    /// Writes nodes.conf whole: a temporary file, synced, renamed over the
    /// old one, the directory synced (a crash leaves the old or the new).
    pub fn save_config(&mut self) -> Result<(), String> {
        self.todo_save = false;
        let text = self.to_conf().render();
        let dir = self
            .conf_path
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from("."));
        let file = self
            .conf_path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "nodes.conf".into());
        let tmp = dir.join(format!("tmp-{}-{file}", std::process::id()));
        let r = (|| -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.conf_path)?;
            std::fs::File::open(&dir)?.sync_all()
        })();
        match r {
            Ok(()) => {
                self.save_error = None;
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                let msg = format!(
                    "Could not save the cluster configuration {}: {e}",
                    self.conf_path.display()
                );
                warn!("{msg}");
                self.save_error = Some(msg.clone());
                Err(msg)
            }
        }
    }

    pub fn me(&self) -> &Node {
        self.state.me()
    }

    pub fn me_mut(&mut self) -> &mut Node {
        let me = self.state.myself;
        self.state
            .nodes
            .get_mut(&me)
            .expect("myself is in the table")
    }

    pub fn i_am_master(&self) -> bool {
        self.me().is_master()
    }

    /// What we announce in our messages.
    pub fn announce(&self, cfg: &crate::config::Config, tcp_port: u16, offset: u64) -> Announce {
        let c = &cfg.cluster;
        let tls = cfg.tls.port;
        // With `tls-cluster`, the main port announced is the TLS one.
        let (port, pport) = if cfg.tls.cluster && tls != 0 {
            (
                if c.announce_tls_port != 0 {
                    c.announce_tls_port
                } else {
                    tls
                },
                if c.announce_port != 0 {
                    c.announce_port
                } else {
                    tcp_port
                },
            )
        } else {
            (
                if c.announce_port != 0 {
                    c.announce_port
                } else {
                    tcp_port
                },
                if tls != 0 {
                    if c.announce_tls_port != 0 {
                        c.announce_tls_port
                    } else {
                        tls
                    }
                } else {
                    0
                },
            )
        };
        Announce {
            ip: c.announce_ip.clone(),
            port,
            pport,
            cport: if c.announce_bus_port != 0 {
                c.announce_bus_port
            } else {
                self.bus_port
            },
            hostname: c.announce_hostname.clone(),
            offset,
        }
    }

    /// Our own address fields as announced (they show in CLUSTER NODES).
    pub fn refresh_myself(&mut self, a: &Announce) {
        let me = self.me_mut();
        if !a.ip.is_empty() {
            me.ip = a.ip.clone();
        }
        me.port = a.port;
        me.pport = a.pport;
        me.cport = a.cport;
        me.hostname = a.hostname.clone();
    }

    /// Adds a node we are to meet (`CLUSTER MEET`; `clusterStartHandshake`):
    /// false when one with that address is already in handshake.
    pub fn start_handshake(
        &mut self,
        ip: &str,
        port: u16,
        cport: u16,
        rng: &mut impl Rng,
        now: u64,
    ) -> bool {
        let exists = self.state.nodes.values().any(|n| {
            n.has(node_flags::HANDSHAKE) && n.ip == ip && n.port == port && n.cport == cport
        });
        if exists {
            return false;
        }
        let name = random_name(rng);
        let mut n = Node::new(name, node_flags::HANDSHAKE | node_flags::MEET);
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport;
        n.ctime_ms = now;
        self.state.nodes.insert(name, n);
        true
    }

    /// Removes a node and everything about it (`clusterDelNode`).
    pub fn del_node(&mut self, name: &Name, registry: Option<&mio::Registry>) {
        self.state.unassign_node(name);
        self.migrating.retain(|_, n| n != name);
        self.importing.retain(|_, n| n != name);
        for n in self.state.nodes.values_mut() {
            n.fail_reports.retain(|(r, _)| r != name);
            if n.master.as_ref() == Some(name) {
                n.master = None;
            }
        }
        self.links.drop_node_links(name, registry);
        self.state.nodes.remove(name);
    }

    /// Renames a handshake node to the id it answered with.
    pub fn rename_node(&mut self, old: &Name, new: Name) {
        if let Some(mut n) = self.state.nodes.remove(old) {
            n.name = new;
            self.state.nodes.insert(new, n);
            self.links.rename(old, new);
        }
    }

    /// `clusterBumpConfigEpochWithoutConsensus`: a new config epoch of
    /// our own unless ours is already the greatest (and not 0).
    pub fn bump_epoch_without_consensus(&mut self) -> Option<u64> {
        let max = self
            .state
            .nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0);
        let mine = self.me().config_epoch;
        if mine != 0 && mine == max {
            return None;
        }
        self.state.current_epoch += 1;
        let e = self.state.current_epoch;
        self.me_mut().config_epoch = e;
        self.todo_save = true;
        Some(e)
    }

    /// `n` is known as a replica of `master` (`clusterNodeAddSlave`): the
    /// master is marked as one that had replicas (MIGRATE_TO).
    pub fn note_replica_of(&mut self, master: &Name) {
        if let Some(m) = self.state.nodes.get_mut(master) {
            m.flags |= node_flags::MIGRATE_TO;
        }
    }

    /// Replicas of `master` not flagged FAIL
    /// (`clusterCountNonFailingSlaves`).
    pub fn working_replicas(&self, master: &Name) -> usize {
        self.state
            .nodes
            .values()
            .filter(|n| {
                n.master.as_ref() == Some(master)
                    && n.has(node_flags::SLAVE)
                    && !n.has(node_flags::FAIL)
            })
            .count()
    }

    /// The replicas of `master`, by id.
    pub fn replicas_of(&self, master: &Name) -> Vec<Name> {
        let mut v: Vec<Name> = self
            .state
            .nodes
            .values()
            .filter(|n| n.master.as_ref() == Some(master) && n.has(node_flags::SLAVE))
            .map(|n| n.name)
            .collect();
        v.sort();
        v
    }

    /// Makes `n` a master (`clusterSetNodeAsMaster`). Another node that
    /// was a replica takes the MIGRATE_TO mark: it failed over a master
    /// that had replicas, so replicas may migrate to it.
    pub fn set_node_as_master(&mut self, n: &Name) {
        let me = self.state.myself;
        if let Some(node) = self.state.nodes.get_mut(n) {
            if node.is_master() {
                return;
            }
            if node.master.is_some() && *n != me {
                node.flags |= node_flags::MIGRATE_TO;
            }
            node.flags = (node.flags & !node_flags::SLAVE) | node_flags::MASTER;
            node.master = None;
            self.todo_save = true;
            self.todo_update_state = true;
        }
    }

    /// `cluster_slots_assigned` and the slots whose owner is PFAIL / FAIL.
    pub fn slot_counts(&self) -> (usize, usize, usize, usize) {
        let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
        for (_, n, owner) in self.state.owner_runs() {
            let Some(owner) = owner else {
                continue;
            };
            assigned += n;
            match self.state.nodes.get(&owner) {
                Some(node) if node.has(node_flags::FAIL) => fail += n,
                Some(node) if node.has(node_flags::PFAIL) => pfail += n,
                _ => ok += n,
            }
        }
        (assigned, ok, pfail, fail)
    }

    /// `CLUSTER INFO`'s text.
    pub fn info_text(&self) -> String {
        let (assigned, ok, pfail, fail) = self.slot_counts();
        let mut s = String::new();
        let my_epoch = {
            let me = self.me();
            let master = me
                .master
                .filter(|_| me.has(node_flags::SLAVE))
                .and_then(|m| self.state.nodes.get(&m))
                .unwrap_or(me);
            master.config_epoch
        };
        s.push_str(&format!(
            "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
            if self.ok { "ok" } else { "fail" },
            self.state.nodes.len(),
            self.state.size(),
            self.state.current_epoch,
        ));
        let mut total = 0;
        for (i, n) in self.sent.iter().enumerate() {
            if *n > 0 {
                s.push_str(&format!(
                    "cluster_stats_messages_{}_sent:{n}\r\n",
                    MESSAGE_NAMES[i]
                ));
                total += n;
            }
        }
        s.push_str(&format!("cluster_stats_messages_sent:{total}\r\n"));
        let mut total = 0;
        for (i, n) in self.received.iter().enumerate() {
            if *n > 0 {
                s.push_str(&format!(
                    "cluster_stats_messages_{}_received:{n}\r\n",
                    MESSAGE_NAMES[i]
                ));
                total += n;
            }
        }
        s.push_str(&format!("cluster_stats_messages_received:{total}\r\n"));
        s.push_str(&format!(
            "total_cluster_links_buffer_limit_exceeded:{}\r\n",
            self.links.buffer_limit_exceeded
        ));
        s
    }

    /// Our master, when we are a replica.
    pub fn my_master(&self) -> Option<&Node> {
        let me = self.me();
        if !me.has(node_flags::SLAVE) {
            return None;
        }
        me.master.and_then(|m| self.state.nodes.get(&m))
    }
}

/// Where `INFO cluster`, `CLUSTER INFO`, the cron and the bus meet the rest
/// of the server.
impl crate::server::Server {
    /// Runs `f` on the cluster taken out of the server (so it can use the
    /// server too); `None` when cluster mode is off.
    pub fn with_cluster<R>(&mut self, f: impl FnOnce(&mut Self, &mut Cluster) -> R) -> Option<R> {
        let mut cl = self.cluster.take()?;
        let r = f(self, &mut cl);
        self.cluster = Some(cl);
        Some(r)
    }

    pub fn cluster_enabled(&self) -> bool {
        self.cluster.is_some()
    }

    /// What we announce, with our replication offset.
    pub fn cluster_announce(&self, cl: &Cluster) -> Announce {
        let offset = self.repl.master_repl_offset as u64;
        cl.announce(&self.config, self.tcp_port, offset)
    }

    /// The node table by name → the `CLUSTER NODES` text.
    pub fn cluster_nodes_text(cl: &Cluster) -> String {
        let conf = cl.to_conf();
        let mut s = String::new();
        for n in &conf.nodes {
            s.push_str(&n.line());
            s.push('\n');
        }
        s
    }

    /// Before the loop sleeps: save nodes.conf, recompute the state
    /// (`clusterBeforeSleep`).
    pub fn cluster_before_sleep(&mut self) {
        self.with_cluster(|srv, cl| {
            if cl.todo_update_state {
                cron::update_state(srv, cl);
            }
            if cl.todo_save {
                let _ = cl.save_config();
            }
        });
    }
}

/// `/metrics`: the cluster as `CLUSTER INFO` shows it (docs/metrics.md).
pub fn collect_cluster(srv: &crate::server::Server, r: &mut crate::metrics::Registry) {
    use crate::metrics::Kind;
    r.gauge(
        "ferrokv_cluster_enabled",
        "1 in cluster mode (cluster-enabled yes).",
        srv.cluster.is_some() as u8 as f64,
    );
    let Some(cl) = srv.cluster.as_deref() else {
        return;
    };
    r.gauge(
        "ferrokv_cluster_state_ok",
        "1 while cluster_state is ok (every slot served, a majority of masters reachable).",
        cl.ok as u8 as f64,
    );
    let (assigned, ok, pfail, fail) = cl.slot_counts();
    let f = r.family(
        "ferrokv_cluster_slots",
        "Slots by state (CLUSTER INFO cluster_slots_*).",
        Kind::Gauge,
    );
    for (state, n) in [
        ("assigned", assigned),
        ("ok", ok),
        ("pfail", pfail),
        ("fail", fail),
    ] {
        f.sample(&[("state", state)], n as f64);
    }
    r.gauge(
        "ferrokv_cluster_known_nodes",
        "Nodes in the node table, ourselves included.",
        cl.state.nodes.len() as f64,
    );
    r.gauge(
        "ferrokv_cluster_size",
        "Masters serving at least one slot.",
        cl.state.size() as f64,
    );
    r.gauge(
        "ferrokv_cluster_current_epoch",
        "The cluster's current epoch as this node knows it.",
        cl.state.current_epoch as f64,
    );
    r.gauge(
        "ferrokv_cluster_links",
        "Open cluster bus links (outbound and inbound).",
        cl.links.links.len() as f64,
    );
    r.counter(
        "ferrokv_cluster_failovers_total",
        "Elections this node won (it took over its master's slots).",
        cl.failovers as f64,
    );
    r.counter(
        "ferrokv_cluster_replica_migrations_total",
        "Times this replica moved to an orphaned master (replica migration).",
        cl.migrations as f64,
    );
    r.counter(
        "ferrokv_cluster_links_buffer_limit_exceeded_total",
        "Bus links freed for passing cluster-link-sendbuf-limit.",
        cl.links.buffer_limit_exceeded as f64,
    );
    for (name, help, counts) in [
        (
            "ferrokv_cluster_messages_sent_total",
            "Bus messages sent, by type.",
            &cl.sent,
        ),
        (
            "ferrokv_cluster_messages_received_total",
            "Bus messages received, by type.",
            &cl.received,
        ),
    ] {
        let f = r.family(name, help, Kind::Counter);
        for (i, n) in counts.iter().enumerate() {
            f.sample(&[("type", MESSAGE_NAMES[i])], *n as f64);
        }
    }
}
