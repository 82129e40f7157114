//! The cluster's timed work, as Redis 7.0's `clusterCron` (every 100 ms):
//! links to every known node, pings, failure detection (PFAIL), the
//! cluster's state (`clusterUpdateState`), and a replica's election when
//! its master failed (`clusterHandleSlaveFailover`), with the votes masters
//! give (`clusterSendFailoverAuthIfNeeded`) and manual failovers.

use super::bus::{self, kind, mflags0, node_flags, Body, Message, Name};
use super::process::{broadcast, broadcast_pong, header, send_ping};
use super::state::VoteRequest;
use super::{name_str, Cluster};
use crate::server::Server;
use ferrokv_store::slots::SLOTS;
use rand::Rng;
use std::net::ToSocketAddrs;
use tracing::{info, warn};

/// A master paused for a manual failover waits this long.
pub const MF_TIMEOUT_MS: u64 = 5000;
/// Redis's `CLUSTER_WRITABLE_DELAY`.
const WRITABLE_DELAY_MS: u64 = 2000;

impl Server {
    /// The cluster part of the server's cron (called every 100 ms).
    pub fn cluster_cron(&mut self) {
        self.with_cluster(cron);
    }
}

pub fn cron(srv: &mut Server, cl: &mut Cluster) {
    let now = super::process::now_ms();
    cl.cron_loops += 1;
    cl.state.node_timeout_ms = srv.config.cluster.node_timeout;
    let a = srv.cluster_announce(cl);
    cl.refresh_myself(&a);
    let timeout = cl.state.node_timeout_ms;
    let handshake_timeout = timeout.max(1000);
    let mut update = false;

    // Links to every node we know.
    let names: Vec<Name> = cl.state.nodes.keys().copied().collect();
    for name in &names {
        let Some(n) = cl.state.nodes.get(name) else {
            continue;
        };
        if n.has(node_flags::MYSELF | node_flags::NOADDR) {
            continue;
        }
        if n.has(node_flags::HANDSHAKE) && now.saturating_sub(n.ctime_ms) > handshake_timeout {
            cl.del_node(name, srv.repl.registry.as_ref());
            cl.todo_save = true;
            continue;
        }
        if cl.links.outbound_of(name).is_some() {
            continue;
        }
        let (ip, cport, meet) = (n.ip.clone(), n.cport, n.has(node_flags::MEET));
        let addr = (ip.as_str(), cport)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next());
        let Some(reg) = srv.repl.registry.as_ref() else {
            return;
        };
        let linked = addr
            .ok_or_else(|| std::io::Error::other("bad address"))
            .and_then(|addr| cl.links.connect(*name, addr, reg, now));
        match linked {
            Ok(id) => {
                let old_ping = cl.state.nodes[name].ping_sent_ms;
                send_ping(srv, cl, id, if meet { kind::MEET } else { kind::PING });
                let n = cl.state.nodes.get_mut(name).expect("known");
                if old_ping != 0 {
                    n.ping_sent_ms = old_ping;
                }
                n.flags &= !node_flags::MEET;
            }
            Err(e) => {
                let n = cl.state.nodes.get_mut(name).expect("known");
                if n.ping_sent_ms == 0 {
                    n.ping_sent_ms = now;
                }
                tracing::debug!("Unable to connect to Cluster Node [{ip}]:{cport} -> {e}");
            }
        }
    }

    // Once a second, the node of five random ones we heard from longest ago.
    if cl.cron_loops.is_multiple_of(10) {
        let candidates: Vec<Name> = cl
            .state
            .nodes
            .values()
            .filter(|n| !n.has(node_flags::MYSELF | node_flags::HANDSHAKE))
            .filter(|n| n.ping_sent_ms == 0 && cl.links.outbound_of(&n.name).is_some())
            .map(|n| n.name)
            .collect();
        let mut best: Option<Name> = None;
        for _ in 0..5.min(candidates.len()) {
            let c = candidates[srv.rng.gen_range(0..candidates.len())];
            let older = match best {
                None => true,
                Some(b) => {
                    cl.state.nodes[&c].pong_received_ms < cl.state.nodes[&b].pong_received_ms
                }
            };
            if older {
                best = Some(c);
            }
        }
        if let Some(b) = best {
            if let Some(id) = cl.links.outbound_of(&b) {
                send_ping(srv, cl, id, kind::PING);
            }
        }
    }

    // Failure detection, and pings to anyone silent for half the timeout.
    let names: Vec<Name> = cl.state.nodes.keys().copied().collect();
    for name in &names {
        let Some(n) = cl.state.nodes.get(name) else {
            continue;
        };
        if n.has(node_flags::MYSELF | node_flags::NOADDR | node_flags::HANDSHAKE) {
            continue;
        }
        let link = cl.links.outbound_of(name);
        let ping_delay = now.saturating_sub(n.ping_sent_ms);
        let data_delay = now.saturating_sub(n.data_received_ms);
        if let Some(id) = link {
            let ctime = cl.links.links[id].ctime_ms;
            if now.saturating_sub(ctime) > timeout
                && n.ping_sent_ms != 0
                && ping_delay > timeout / 2
                && data_delay > timeout / 2
            {
                // Connected, but nothing answers: a new link next time.
                cl.links.free(id, srv.repl.registry.as_ref());
                continue;
            }
            if n.ping_sent_ms == 0 && now.saturating_sub(n.pong_received_ms) > timeout / 2 {
                send_ping(srv, cl, id, kind::PING);
                continue;
            }
            // A manual failover: ping the other side at every turn.
            let mf_peer = cl.manual.end_ms != 0
                && ((cl.i_am_master() && cl.manual.replica == Some(*name))
                    || (!cl.i_am_master() && cl.me().master == Some(*name)));
            if mf_peer {
                send_ping(srv, cl, id, kind::PING);
                continue;
            }
        }
        let n = &cl.state.nodes[name];
        if n.ping_sent_ms == 0 {
            continue;
        }
        let delay = ping_delay.min(data_delay);
        if delay > timeout && !n.has(node_flags::PFAIL | node_flags::FAIL) {
            info!("*** NODE {} possibly failing", name_str(name));
            cl.state.nodes.get_mut(name).expect("known").flags |= node_flags::PFAIL;
            update = true;
        }
    }

    // A replica replicates from its master.
    if let Some(m) = cl.my_master() {
        let (ip, port) = (m.ip.clone(), m.port);
        let linked = srv
            .repl
            .link
            .as_ref()
            .is_some_and(|l| l.host == ip && l.port == port);
        if !linked && !ip.is_empty() && !m.has(node_flags::NOADDR) {
            srv.replicaof(ip, port);
        }
    }

    manual_failover_check_timeout(srv, cl, now);
    if !cl.i_am_master() {
        manual_failover_check_ready(srv, cl);
        handle_replica_failover(srv, cl, now);
        if srv.config.cluster.allow_replica_migration {
            handle_replica_migration(srv, cl, now);
        }
    }
    if update || !cl.ok {
        update_state(srv, cl);
    }
}

/// `clusterUpdateState`: ok unless a slot is unserved (with
/// `cluster-require-full-coverage`) or we are in a minority.
pub fn update_state(srv: &mut Server, cl: &mut Cluster) {
    let now = super::process::now_ms();
    if cl.first_update_ms == 0 {
        cl.first_update_ms = now;
    }
    // A master that just started waits for the others' word first.
    if cl.i_am_master() && !cl.ok && now - cl.first_update_ms < WRITABLE_DELAY_MS {
        return;
    }
    cl.todo_update_state = false;
    let mut ok = true;
    if srv.config.cluster.require_full_coverage {
        for (_, _, owner) in cl.state.owner_runs() {
            match owner.and_then(|o| cl.state.nodes.get(&o)) {
                Some(n) if !n.has(node_flags::FAIL) => {}
                _ => {
                    ok = false;
                    break;
                }
            }
        }
    }
    let (mut size, mut reachable) = (0, 0);
    for n in cl.state.nodes.values() {
        if n.is_master() && n.slots.count() > 0 {
            size += 1;
            if !n.has(node_flags::FAIL | node_flags::PFAIL) {
                reachable += 1;
            }
        }
    }
    if reachable < size / 2 + 1 {
        ok = false;
        cl.among_minority_ms = now;
    }
    if ok != cl.ok {
        let rejoin = cl.state.node_timeout_ms.clamp(500, 5000);
        if ok && cl.i_am_master() && now.saturating_sub(cl.among_minority_ms) < rejoin {
            return;
        }
        info!("Cluster state changed: {}", if ok { "ok" } else { "fail" });
        cl.ok = ok;
    }
}

/// Becomes a replica of `master` (`clusterSetMaster`).
pub fn set_my_master(srv: &mut Server, cl: &mut Cluster, master: Name) {
    let me = cl.me_mut();
    if me.is_master() {
        me.flags = (me.flags & !(node_flags::MASTER | node_flags::MIGRATE_TO)) | node_flags::SLAVE;
    }
    cl.me_mut().master = Some(master);
    cl.note_replica_of(&master);
    cl.migrating.clear();
    cl.importing.clear();
    if let Some(m) = cl.state.nodes.get(&master) {
        if !m.ip.is_empty() {
            let (ip, port) = (m.ip.clone(), m.port);
            srv.replicaof(ip, port);
        }
    }
    reset_manual_failover(srv, cl);
    cl.todo_save = true;
    cl.todo_update_state = true;
}

/// A FAILOVER_AUTH_REQUEST from `sender`: our vote, if Redis's rules give it.
pub fn maybe_vote(srv: &mut Server, cl: &mut Cluster, sender: Name, h: &bus::Header, now: u64) {
    let req = VoteRequest {
        sender,
        current_epoch: h.current_epoch,
        config_epoch: h.config_epoch,
        slots: &h.slots,
        force_ack: h.mflags[0] & mflags0::FORCEACK != 0,
    };
    match cl.state.vote(&req, now) {
        Ok(()) => {
            cl.todo_save = true;
            info!(
                "Failover auth granted to {} for epoch {}",
                name_str(&sender),
                cl.state.current_epoch
            );
            if let Some(id) = cl.links.outbound_of(&sender) {
                let m = Message::new(header(srv, cl, kind::FAILOVER_AUTH_ACK), Body::Empty);
                super::process::send_on(srv, cl, id, &m);
            }
        }
        Err(why) => {
            tracing::debug!("Failover auth denied to {}: {why:?}", name_str(&sender));
        }
    }
}

/// The replica's offset, for its rank and its election.
fn my_offset(srv: &Server) -> u64 {
    srv.repl.master_repl_offset.max(0) as u64
}

/// How old the replica's data is, in ms (Redis's `data_age`).
fn data_age_ms(srv: &Server) -> u64 {
    match srv.repl.link.as_ref() {
        Some(l) if l.is_up() => l.last_io.elapsed().as_millis() as u64,
        Some(l) => l
            .down_since
            .map_or(u64::MAX / 4, |t| t.elapsed().as_millis() as u64),
        None => u64::MAX / 4,
    }
}

/// `clusterHandleSlaveFailover`.
fn handle_replica_failover(srv: &mut Server, cl: &mut Cluster, now: u64) {
    let size = cl.state.size();
    let needed = size / 2 + 1;
    let manual = cl.manual.end_ms != 0 && cl.manual.can_start;
    let timeout = cl.state.node_timeout_ms;
    let auth_timeout = (timeout * 2).max(2000);
    let auth_retry = auth_timeout * 2;
    let Some(master) = cl
        .my_master()
        .map(|m| (m.name, m.has(node_flags::FAIL), m.slots.count()))
    else {
        return;
    };
    let (master_name, master_failed, master_slots) = master;
    if (!manual && (!master_failed || srv.config.cluster.replica_no_failover)) || master_slots == 0
    {
        return;
    }
    let mut age = data_age_ms(srv);
    if age > timeout {
        age -= timeout;
    }
    let factor = srv.config.cluster.replica_validity_factor;
    let ping_period = srv.config.repl.ping_replica_period * 1000;
    if factor > 0 && age > ping_period + timeout * factor && !manual {
        if now.saturating_sub(cl.election.cant_failover_logged_ms) > 10_000 {
            cl.election.cant_failover_logged_ms = now;
            warn!("Currently unable to failover: Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.");
        }
        return;
    }
    if now.saturating_sub(cl.election.auth_time_ms) > auth_retry {
        // Schedule an election: later for replicas further behind.
        let e = &mut cl.election;
        e.auth_time_ms = now + 500 + srv.rng.gen_range(0..500);
        e.auth_count = 0;
        e.auth_sent = false;
        e.auth_rank = cl.state.replica_rank(my_offset(srv));
        e.auth_time_ms += e.auth_rank as u64 * 1000;
        if manual {
            e.auth_time_ms = now;
            e.auth_rank = 0;
        }
        info!(
            "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
            cl.election.auth_time_ms - now,
            cl.election.auth_rank,
            my_offset(srv)
        );
        broadcast_pong(srv, cl, true);
        return;
    }
    if !cl.election.auth_sent && !manual {
        let rank = cl.state.replica_rank(my_offset(srv));
        if rank > cl.election.auth_rank {
            let added = (rank - cl.election.auth_rank) as u64 * 1000;
            cl.election.auth_time_ms += added;
            cl.election.auth_rank = rank;
            info!("Replica rank updated to #{rank}, added {added} milliseconds of delay.");
        }
    }
    if now < cl.election.auth_time_ms {
        return;
    }
    if now - cl.election.auth_time_ms > auth_timeout {
        if now.saturating_sub(cl.election.cant_failover_logged_ms) > 10_000 {
            cl.election.cant_failover_logged_ms = now;
            warn!("Currently unable to failover: Failover attempt expired.");
        }
        return;
    }
    if !cl.election.auth_sent {
        cl.state.current_epoch += 1;
        cl.election.auth_epoch = cl.state.current_epoch;
        info!(
            "Starting a failover election for epoch {}.",
            cl.state.current_epoch
        );
        let mut h = header(srv, cl, kind::FAILOVER_AUTH_REQUEST);
        if manual {
            h.mflags[0] |= mflags0::FORCEACK;
        }
        broadcast(srv, cl, &Message::new(h, Body::Empty));
        cl.election.auth_sent = true;
        cl.todo_save = true;
        return;
    }
    if cl.election.auth_count >= needed {
        info!("Failover election won: I'm the new master.");
        if cl.me().config_epoch < cl.election.auth_epoch {
            let e = cl.election.auth_epoch;
            cl.me_mut().config_epoch = e;
            info!("configEpoch set to {e} after successful failover");
        }
        replace_my_master(srv, cl, master_name);
    }
}

/// `clusterFailoverReplaceYourMaster`: we serve our old master's slots.
/// How long a master must stay orphaned before a replica migrates to it
/// (`CLUSTER_SLAVE_MIGRATION_DELAY`): the time for its own replicas to
/// announce that they follow a new master after a failover.
const MIGRATION_DELAY_MS: u64 = 5000;

/// Replica migration (`clusterHandleSlaveMigration`): when a master that
/// serves slots and had replicas has none working (orphaned), a replica
/// of a master with the most working replicas — at least two, and more
/// than `cluster-migration-barrier` after it leaves — moves to it. Among
/// the replicas of those masters, the one with the smallest id goes, once
/// the master has been orphaned for [`MIGRATION_DELAY_MS`].
fn handle_replica_migration(srv: &mut Server, cl: &mut Cluster, now: u64) {
    let Some(my_master) = cl.me().master else {
        return;
    };
    // Working replicas of every working master; orphans, oldest first.
    let masters: Vec<Name> = cl
        .state
        .nodes
        .values()
        .filter(|n| n.is_master() && !n.has(node_flags::FAIL))
        .map(|n| n.name)
        .collect();
    let mut counts: Vec<(Name, usize)> = Vec::with_capacity(masters.len());
    for m in &masters {
        counts.push((*m, cl.working_replicas(m)));
    }
    let max = counts.iter().map(|&(_, c)| c).max().unwrap_or(0);
    let mine = counts
        .iter()
        .find(|(m, _)| *m == my_master)
        .map_or(0, |&(_, c)| c);
    let mut target: Option<Name> = None;
    let mut any_orphan = false;
    let mut names: Vec<Name> = cl.state.nodes.keys().copied().collect();
    names.sort();
    for name in names {
        let working = counts.iter().find(|(m, _)| *m == name).map(|&(_, c)| c);
        let n = cl.state.nodes.get_mut(&name).expect("listed");
        let orphaned = working == Some(0) && n.has(node_flags::MIGRATE_TO);
        if orphaned {
            if n.slots.count() > 0 {
                any_orphan = true;
                if target.is_none() {
                    target = Some(name);
                }
            }
            if n.orphaned_ms == 0 {
                n.orphaned_ms = now;
            }
        } else {
            n.orphaned_ms = 0;
        }
    }
    if !any_orphan || max < 2 || mine != max || !cl.ok {
        return;
    }
    // My master keeps more than the barrier without me (replicas neither
    // FAIL nor PFAIL).
    let left = cl
        .state
        .nodes
        .values()
        .filter(|n| {
            n.master == Some(my_master)
                && n.has(node_flags::SLAVE)
                && !n.has(node_flags::FAIL | node_flags::PFAIL)
        })
        .count();
    if left as u64 <= srv.config.cluster.migration_barrier {
        return;
    }
    // The candidate: the smallest id among the replicas of the masters
    // with the most working replicas (myself included).
    let me = cl.state.myself;
    let candidate = counts
        .iter()
        .filter(|&&(_, c)| c == max)
        .flat_map(|(m, _)| cl.replicas_of(m))
        .chain(std::iter::once(me))
        .min()
        .expect("myself at least");
    let Some(target) = target else {
        return;
    };
    if candidate != me
        || now.saturating_sub(cl.state.nodes[&target].orphaned_ms) <= MIGRATION_DELAY_MS
    {
        return;
    }
    info!("Migrating to orphaned master {}", name_str(&target));
    cl.migrations += 1;
    set_my_master(srv, cl, target);
}

pub fn replace_my_master(srv: &mut Server, cl: &mut Cluster, old: Name) {
    let me = cl.state.myself;
    cl.set_node_as_master(&me);
    cl.me_mut().master = None;
    srv.replicaof_no_one();
    for slot in 0..SLOTS as u16 {
        if cl.state.owner(slot) == Some(old) {
            cl.state.assign(slot, me);
        }
    }
    cl.failovers += 1;
    update_state(srv, cl);
    let _ = cl.save_config();
    broadcast_pong(srv, cl, false);
    reset_manual_failover(srv, cl);
}

/// The master's side of `CLUSTER FAILOVER`: pause writes, tell the
/// replica our offset with every ping until it takes over.
pub fn manual_failover_master_side(srv: &mut Server, cl: &mut Cluster, replica: Name, now: u64) {
    reset_manual_failover(srv, cl);
    cl.manual.end_ms = now + MF_TIMEOUT_MS;
    cl.manual.replica = Some(replica);
    // Redis pauses writes for twice the manual failover's time.
    srv.pause_clients(
        crate::pause::PausePurpose::Failover,
        (now + MF_TIMEOUT_MS * 2) as i64,
        crate::pause::PauseKind::Write,
    );
    info!(
        "Manual failover requested by replica {}.",
        name_str(&replica)
    );
    if let Some(id) = cl.links.outbound_of(&replica) {
        send_ping(srv, cl, id, kind::PING);
    }
}

pub fn reset_manual_failover(srv: &mut Server, cl: &mut Cluster) {
    if cl.manual.end_ms != 0 && cl.i_am_master() {
        srv.unpause_clients(crate::pause::PausePurpose::Failover);
    }
    cl.manual = super::ManualFailover::default();
}

fn manual_failover_check_timeout(srv: &mut Server, cl: &mut Cluster, now: u64) {
    if cl.manual.end_ms != 0 && cl.manual.end_ms < now {
        warn!("Manual failover timed out.");
        reset_manual_failover(srv, cl);
    }
}

/// The replica may start its election once it has the master's offset
/// (`clusterHandleManualFailover`).
fn manual_failover_check_ready(srv: &Server, cl: &mut Cluster) {
    if cl.manual.end_ms == 0 || cl.manual.can_start {
        return;
    }
    if cl.manual.master_offset.is_some_and(|o| my_offset(srv) >= o) {
        cl.manual.can_start = true;
        info!("All master replication stream processed, manual failover can start.");
    }
}
