//! What each bus message does, as Redis 7.0's `clusterProcessPacket`, and
//! the messages we send (`clusterSendPing`, `clusterSendFail`,
//! `clusterSendUpdate`, `clusterSendPublish`, the failover's auth messages).

use super::bus::{self, kind, mflags0, node_flags, Body, Message, Name, SlotBitmap, NULL_NAME};
use super::link::Event;
use super::{name_str, Cluster};
use crate::server::Server;
use ferrokv_store::slots::SLOTS;
use rand::Rng;
use tracing::{info, warn};

pub fn now_ms() -> u64 {
    crate::server::unix_ms() as u64
}

impl Server {
    /// A readiness event on a bus token.
    pub fn cluster_event(&mut self, token: usize, readable: bool, writable: bool) {
        self.with_cluster(|srv, cl| {
            let now = now_ms();
            if super::link::Links::is_listener(token) {
                if let Some(reg) = srv.repl.registry.as_ref() {
                    cl.links.accept(token - super::link::TOKEN_BASE, reg, now);
                }
                return;
            }
            let id = super::link::Links::id_of(token);
            match cl.links.event(id, readable, writable) {
                Event::Messages(msgs) => {
                    for m in msgs {
                        if !cl.links.links.contains(id) {
                            break;
                        }
                        process_packet(srv, cl, id, &m, now);
                    }
                }
                Event::Closed => {}
            }
            free_closed_links(srv, cl);
        });
    }
}

/// Frees the links that failed or were marked to close.
pub fn free_closed_links(srv: &mut Server, cl: &mut Cluster) {
    for id in cl.links.closed() {
        cl.links.free(id, srv.repl.registry.as_ref());
    }
}

fn count_sent(cl: &mut Cluster, k: u16) {
    if let Some(n) = cl.sent.get_mut(k as usize) {
        *n += 1;
    }
}

/// Sends a message on link `id`.
pub fn send_on(srv: &Server, cl: &mut Cluster, id: usize, m: &Message) {
    count_sent(cl, m.header.kind);
    let limit = srv.config.cluster.link_sendbuf_limit;
    cl.links.send(id, &m.encode(), limit);
}

/// A header for a message of ours, with the flags of the moment.
pub fn header(srv: &Server, cl: &Cluster, k: u16) -> bus::Header {
    let a = srv.cluster_announce(cl);
    let mut h = cl.state.header(k, &a);
    h.state = if cl.ok { 0 } else { 1 };
    if cl.i_am_master() && cl.manual.end_ms != 0 {
        h.mflags[0] |= mflags0::PAUSED;
    }
    h
}

/// PING, PONG or MEET on link `id`, with gossip (`clusterSendPing`).
pub fn send_ping(srv: &mut Server, cl: &mut Cluster, id: usize, k: u16) {
    let a = srv.cluster_announce(cl);
    let rng = &mut srv.rng;
    let links = &cl.links;
    let mut m = cl.state.ping(
        k,
        &a,
        |n| links.outbound_of(n).is_some(),
        |n| rng.gen_range(0..n.max(1)),
    );
    m.header.state = if cl.ok { 0 } else { 1 };
    if cl.i_am_master() && cl.manual.end_ms != 0 {
        m.header.mflags[0] |= mflags0::PAUSED;
    }
    if k == kind::PING {
        if let Some(node) = cl.links.links.get(id).and_then(|l| l.node) {
            if let Some(n) = cl.state.nodes.get_mut(&node) {
                n.ping_sent_ms = now_ms();
            }
        }
    }
    send_on(srv, cl, id, &m);
}

/// Sends to every node we have a link to (`clusterBroadcastMessage`).
pub fn broadcast(srv: &Server, cl: &mut Cluster, m: &Message) {
    let targets: Vec<usize> = cl
        .state
        .nodes
        .values()
        .filter(|n| !n.has(node_flags::MYSELF | node_flags::HANDSHAKE))
        .filter_map(|n| cl.links.outbound_of(&n.name))
        .collect();
    let bytes = m.encode();
    let limit = srv.config.cluster.link_sendbuf_limit;
    for id in targets {
        count_sent(cl, m.header.kind);
        cl.links.send(id, &bytes, limit);
    }
}

/// PONG to every node, or to our master's other replicas only
/// (`clusterBroadcastPong`).
pub fn broadcast_pong(srv: &mut Server, cl: &mut Cluster, local_only: bool) {
    let me = cl.state.myself;
    let my_master = cl.me().master.filter(|_| !cl.i_am_master()).unwrap_or(me);
    let targets: Vec<usize> = cl
        .state
        .nodes
        .values()
        .filter(|n| !n.has(node_flags::MYSELF | node_flags::HANDSHAKE))
        .filter(|n| !local_only || n.master == Some(my_master) || n.name == my_master)
        .filter_map(|n| cl.links.outbound_of(&n.name))
        .collect();
    for id in targets {
        send_ping(srv, cl, id, kind::PONG);
    }
}

pub fn send_fail(srv: &Server, cl: &mut Cluster, about: Name) {
    let m = Message::new(header(srv, cl, kind::FAIL), Body::Fail { about });
    broadcast(srv, cl, &m);
}

/// Tells the node on `to`'s link that `about` now serves slots with a
/// newer config epoch (`clusterSendUpdate`).
fn send_update(srv: &Server, cl: &mut Cluster, to: &Name, about: &Name) {
    let Some(id) = cl.links.outbound_of(to) else {
        return;
    };
    let Some(n) = cl.state.nodes.get(about) else {
        return;
    };
    let body = Body::Update {
        config_epoch: n.config_epoch,
        name: n.name,
        slots: n.slots.clone(),
    };
    let m = Message::new(header(srv, cl, kind::UPDATE), body);
    send_on(srv, cl, id, &m);
}

/// PUBLISH over the bus: every node delivers it to its subscribers.
pub fn send_publish(srv: &Server, cl: &mut Cluster, channel: &[u8], message: &[u8], shard: bool) {
    let k = if shard {
        kind::PUBLISHSHARD
    } else {
        kind::PUBLISH
    };
    let m = Message::new(
        header(srv, cl, k),
        Body::Publish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        },
    );
    if !shard {
        return broadcast(srv, cl, &m);
    }
    // A shard message goes to the nodes of our shard only.
    let me = cl.state.myself;
    let master = cl.me().master.filter(|_| !cl.i_am_master()).unwrap_or(me);
    let targets: Vec<usize> = cl
        .state
        .nodes
        .values()
        .filter(|n| !n.has(node_flags::MYSELF | node_flags::HANDSHAKE))
        .filter(|n| n.name == master || n.master == Some(master))
        .filter_map(|n| cl.links.outbound_of(&n.name))
        .collect();
    let bytes = m.encode();
    for id in targets {
        count_sent(cl, k);
        cl.links
            .send(id, &bytes, srv.config.cluster.link_sendbuf_limit);
    }
}

/// The ip of a message's sender: what it announced, else the link's peer.
fn sender_ip(cl: &Cluster, id: usize, h: &bus::Header) -> String {
    if !h.myip.is_empty() {
        return h.myip.clone();
    }
    cl.links
        .links
        .get(id)
        .and_then(|l| {
            l.sock()
                .peer_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .or(l.peer)
        })
        .map(|a| a.ip().to_string())
        .unwrap_or_default()
}

/// `nodeUpdateAddressIfNeeded`: the node moved; reconnects to it.
fn update_address_if_needed(
    srv: &mut Server,
    cl: &mut Cluster,
    name: &Name,
    id: usize,
    h: &bus::Header,
) -> bool {
    if cl.links.outbound_of(name) == Some(id) {
        return false;
    }
    let ip = sender_ip(cl, id, h);
    let Some(n) = cl.state.nodes.get_mut(name) else {
        return false;
    };
    if n.port == h.port && n.cport == h.cport && n.pport == h.pport && n.ip == ip {
        return false;
    }
    n.ip = ip.clone();
    n.port = h.port;
    n.pport = h.pport;
    n.cport = h.cport;
    n.flags &= !node_flags::NOADDR;
    let port = n.port;
    if let Some(l) = cl.links.outbound_of(name) {
        cl.links.free(l, srv.repl.registry.as_ref());
    }
    info!(
        "Address updated for node {}, now {ip}:{port}",
        name_str(name)
    );
    if cl.my_master().is_some_and(|m| m.name == *name) {
        srv.replicaof(ip, port);
    }
    true
}

/// `clusterProcessPacket`.
pub fn process_packet(srv: &mut Server, cl: &mut Cluster, id: usize, bytes: &[u8], now: u64) {
    let msg = match Message::decode(bytes) {
        Ok(m) => m,
        Err(bus::DecodeError::Framing) => {
            if let Some(l) = cl.links.links.get_mut(id) {
                l.closed = true;
            }
            return;
        }
        // Another version, or a length that does not add up: ignored.
        Err(_) => return,
    };
    let h = &msg.header;
    let k = h.kind;
    if let Some(n) = cl.received.get_mut(k as usize) {
        *n += 1;
    }
    let link_node = cl.links.links.get(id).and_then(|l| l.node);
    let sender: Option<Name> = cl
        .state
        .nodes
        .get(&h.sender)
        .filter(|n| !n.has(node_flags::HANDSHAKE))
        .map(|n| n.name);
    if let Some(s) = sender {
        if link_node.is_none() {
            if let Some(l) = cl.links.links.get_mut(id) {
                l.inbound_of = Some(s);
            }
        }
        if h.current_epoch > cl.state.current_epoch {
            cl.state.current_epoch = h.current_epoch;
            cl.todo_save = true;
        }
        let n = cl.state.nodes.get_mut(&s).expect("looked up");
        n.data_received_ms = now;
        if h.config_epoch > n.config_epoch {
            n.config_epoch = h.config_epoch;
            cl.todo_save = true;
            cl.todo_update_state = true;
        }
        n.repl_offset = h.offset;
        // A manual failover: the master paused, at this offset.
        if cl.manual.end_ms != 0
            && !cl.i_am_master()
            && cl.me().master == Some(s)
            && h.mflags[0] & mflags0::PAUSED != 0
            && cl.manual.master_offset.is_none()
        {
            cl.manual.master_offset = Some(h.offset);
            info!(
                "Received replication offset for paused master manual failover: {}",
                h.offset
            );
        }
    }

    if k == kind::PING || k == kind::MEET {
        // Our own address, as the other side sees it.
        if srv.config.cluster.announce_ip.is_empty() && (k == kind::MEET || cl.me().ip.is_empty()) {
            if let Some(ip) = cl.links.links.get(id).and_then(|l| l.local_ip()) {
                if cl.me().ip != ip {
                    cl.me_mut().ip = ip;
                    cl.todo_save = true;
                }
            }
        }
        if sender.is_none() && k == kind::MEET {
            let ip = sender_ip(cl, id, h);
            let name = super::random_name(&mut srv.rng);
            let mut n = super::state::Node::new(name, node_flags::HANDSHAKE);
            n.ip = ip;
            n.port = h.port;
            n.pport = h.pport;
            n.cport = h.cport;
            n.ctime_ms = now;
            cl.state.nodes.insert(name, n);
            cl.todo_save = true;
        }
        send_ping(srv, cl, id, kind::PONG);
    }

    if k == kind::PING || k == kind::PONG || k == kind::MEET {
        if let Some(ln) = link_node {
            let in_handshake = cl
                .state
                .nodes
                .get(&ln)
                .is_some_and(|n| n.has(node_flags::HANDSHAKE));
            if in_handshake {
                if let Some(s) = sender {
                    // We knew it already, under its real id.
                    if update_address_if_needed(srv, cl, &s, id, h) {
                        cl.todo_save = true;
                        cl.todo_update_state = true;
                    }
                    cl.del_node(&ln, srv.repl.registry.as_ref());
                    return;
                }
                cl.rename_node(&ln, h.sender);
                let n = cl.state.nodes.get_mut(&h.sender).expect("renamed");
                n.flags &= !node_flags::HANDSHAKE;
                n.flags |= h.flags & (node_flags::MASTER | node_flags::SLAVE);
                info!("Handshake with node {} completed.", name_str(&h.sender));
                cl.todo_save = true;
            } else if ln != h.sender {
                // The node at this address has another id now.
                info!(
                    "PONG contains mismatching sender ID. About node {} added {} ms ago, having flags {}",
                    name_str(&ln),
                    now.saturating_sub(cl.state.nodes.get(&ln).map_or(now, |n| n.ctime_ms)),
                    cl.state.nodes.get(&ln).map_or(0, |n| n.flags)
                );
                if let Some(n) = cl.state.nodes.get_mut(&ln) {
                    n.flags |= node_flags::NOADDR;
                    n.ip.clear();
                    n.port = 0;
                    n.pport = 0;
                    n.cport = 0;
                }
                if let Some(l) = cl.links.links.get_mut(id) {
                    l.closed = true;
                }
                cl.todo_save = true;
                return;
            }
        }
        if let Some(s) = sender {
            let n = cl.state.nodes.get_mut(&s).expect("known");
            n.flags = (n.flags & !node_flags::NOFAILOVER) | (h.flags & node_flags::NOFAILOVER);
            if k == kind::PING && update_address_if_needed(srv, cl, &s, id, h) {
                cl.todo_save = true;
                cl.todo_update_state = true;
            }
        }
        // A PONG on our own link: the node is alive.
        if k == kind::PONG {
            if let Some(ln) = cl.links.links.get(id).and_then(|l| l.node) {
                let timeout = cl.state.node_timeout_ms;
                let masters_owning = |n: &super::state::Node| n.is_master() && n.slots.count() > 0;
                if let Some(n) = cl.state.nodes.get_mut(&ln) {
                    n.pong_received_ms = now;
                    n.ping_sent_ms = 0;
                    if n.has(node_flags::PFAIL) {
                        n.flags &= !node_flags::PFAIL;
                        cl.todo_update_state = true;
                    } else if n.has(node_flags::FAIL) {
                        // `clearNodeFailureIfNeeded`: a replica or a
                        // slot-less master at once; a master with slots
                        // once it failed long ago and nobody took them.
                        let undo =
                            !masters_owning(n) || now.saturating_sub(n.fail_time_ms) > timeout * 2;
                        if undo {
                            info!(
                                "Clear FAIL state for node {}: {} is reachable again.",
                                name_str(&ln),
                                if n.is_master() {
                                    "master without slots"
                                } else {
                                    "replica"
                                }
                            );
                            n.flags &= !node_flags::FAIL;
                            cl.todo_update_state = true;
                            cl.todo_save = true;
                        }
                    }
                }
            }
        }
        // Role changes.
        if let Some(s) = sender {
            if h.slaveof == NULL_NAME {
                cl.set_node_as_master(&s);
            } else {
                let master = cl.state.nodes.get(&h.slaveof).map(|n| n.name);
                let n = cl.state.nodes.get_mut(&s).expect("known");
                if n.is_master() {
                    // A master turned replica: it serves no slots now.
                    n.flags = (n.flags & !(node_flags::MASTER | node_flags::MIGRATE_TO))
                        | node_flags::SLAVE;
                    cl.state.unassign_node(&s);
                    cl.todo_save = true;
                    cl.todo_update_state = true;
                }
                let n = cl.state.nodes.get_mut(&s).expect("known");
                if let Some(m) = master {
                    if n.master != Some(m) {
                        n.master = Some(m);
                        cl.note_replica_of(&m);
                        cl.todo_save = true;
                    }
                }
            }
        }
        // Slots.
        if let Some(s) = sender {
            let sender_is_master = cl.state.nodes[&s].is_master();
            let sender_master = if sender_is_master {
                Some(s)
            } else {
                cl.state.nodes[&s].master
            };
            let dirty = sender_master
                .and_then(|m| cl.state.nodes.get(&m))
                .is_some_and(|m| m.slots != h.slots);
            if sender_is_master && dirty {
                update_slots_config_with(srv, cl, s, h.config_epoch, &h.slots);
            }
            if dirty {
                // Someone claims slots a newer epoch serves: tell it.
                for slot in 0..SLOTS as u16 {
                    if !h.slots.get(slot) {
                        continue;
                    }
                    let Some(owner) = cl.state.owner(slot) else {
                        continue;
                    };
                    if owner == s {
                        continue;
                    }
                    if cl.state.nodes[&owner].config_epoch > h.config_epoch {
                        send_update(srv, cl, &s, &owner);
                        break;
                    }
                }
            }
            if cl.i_am_master()
                && sender_is_master
                && h.config_epoch == cl.me().config_epoch
                && cl.state.handle_config_epoch_collision(&s)
            {
                warn!(
                    "WARNING: configEpoch collision with node {}. configEpoch set to {}",
                    name_str(&s),
                    cl.me().config_epoch
                );
                cl.todo_save = true;
            }
        }
        // Gossip, and the extensions.
        if let Some(s) = sender {
            if let Body::Ping { gossip, exts } = &msg.body {
                let out = cl.state.process_gossip(Some(&s), gossip, now);
                for f in out.failed {
                    info!("Marking node {} as failing (quorum reached).", name_str(&f));
                    send_fail(srv, cl, f);
                    cl.todo_save = true;
                    cl.todo_update_state = true;
                }
                for a in out.added {
                    if cl.blacklisted(&a, now) {
                        cl.state.nodes.remove(&a);
                        continue;
                    }
                    if let Some(n) = cl.state.nodes.get_mut(&a) {
                        n.ctime_ms = now;
                        if let Some(g) = gossip.iter().find(|g| g.name == a) {
                            n.flags = g.flags
                                & !(node_flags::MYSELF | node_flags::PFAIL | node_flags::FAIL);
                            n.pport = g.pport;
                        }
                    }
                    cl.todo_save = true;
                }
                let hostname = exts.iter().find_map(|e| match e {
                    bus::Ext::Hostname(h) => Some(h.clone()),
                    _ => None,
                });
                let n = cl.state.nodes.get_mut(&s).expect("known");
                let hostname = hostname.unwrap_or_default();
                if n.hostname != hostname {
                    n.hostname = hostname;
                    cl.todo_save = true;
                }
            }
        }
        return;
    }

    match (&msg.body, k) {
        (Body::Fail { about }, kind::FAIL) => {
            let Some(s) = sender else { return };
            let me = cl.state.myself;
            if let Some(n) = cl.state.nodes.get_mut(about) {
                if !n.has(node_flags::FAIL) && *about != me {
                    info!(
                        "FAIL message received from {} about {}",
                        name_str(&s),
                        name_str(about)
                    );
                    n.flags = (n.flags | node_flags::FAIL) & !node_flags::PFAIL;
                    n.fail_time_ms = now;
                    cl.todo_save = true;
                    cl.todo_update_state = true;
                }
            }
        }
        (Body::Publish { channel, message }, kind::PUBLISH | kind::PUBLISHSHARD) => {
            if sender.is_none() {
                return;
            }
            let which = if k == kind::PUBLISH {
                crate::pubsub::Kind::Channel
            } else {
                crate::pubsub::Kind::Shard
            };
            srv.publish_kind(None, which, channel, message);
        }
        (_, kind::FAILOVER_AUTH_REQUEST) => {
            let Some(s) = sender else { return };
            super::cron::maybe_vote(srv, cl, s, h, now);
        }
        (_, kind::FAILOVER_AUTH_ACK) => {
            let Some(s) = sender else { return };
            let n = &cl.state.nodes[&s];
            if n.is_master() && n.slots.count() > 0 && h.current_epoch >= cl.election.auth_epoch {
                cl.election.auth_count += 1;
            }
        }
        (_, kind::MFSTART) => {
            let Some(s) = sender else { return };
            if cl.state.nodes[&s].master != Some(cl.state.myself) {
                return;
            }
            super::cron::manual_failover_master_side(srv, cl, s, now);
        }
        (
            Body::Update {
                config_epoch,
                name,
                slots,
            },
            kind::UPDATE,
        ) => {
            if sender.is_none() {
                return;
            }
            let Some(n) = cl.state.nodes.get(name) else {
                return;
            };
            if n.config_epoch >= *config_epoch {
                return;
            }
            let name = *name;
            if !n.is_master() {
                cl.set_node_as_master(&name);
            }
            cl.state.nodes.get_mut(&name).expect("known").config_epoch = *config_epoch;
            update_slots_config_with(srv, cl, name, *config_epoch, slots);
            cl.todo_save = true;
        }
        _ => {}
    }
}

/// `clusterUpdateSlotsConfigWith`: `sender` serves `slots` with
/// `epoch`; slots of older epochs move to it, and if our master (or we)
/// lost every slot to it, we follow it as a replica.
pub fn update_slots_config_with(
    srv: &mut Server,
    cl: &mut Cluster,
    sender: Name,
    epoch: u64,
    slots: &SlotBitmap,
) {
    let me = cl.state.myself;
    if sender == me {
        info!("Discarding UPDATE message about myself.");
        return;
    }
    let cur_master = if cl.i_am_master() {
        Some(me)
    } else {
        cl.me().master
    };
    let mut new_master = None;
    let mut dirty: Vec<u16> = Vec::new();
    let (mut sender_slots, mut migrated_ours) = (0usize, 0usize);
    for slot in 0..SLOTS as u16 {
        if !slots.get(slot) {
            continue;
        }
        sender_slots += 1;
        let owner = cl.state.owner(slot);
        if owner == Some(sender) || cl.importing.contains_key(&slot) {
            continue;
        }
        let older = match owner {
            None => true,
            Some(o) => cl
                .state
                .nodes
                .get(&o)
                .is_none_or(|n| n.config_epoch < epoch),
        };
        if !older {
            continue;
        }
        if owner == Some(me) && srv.keyspace.dbs[0].count_keys_in_slot(slot) > 0 {
            dirty.push(slot);
        }
        if owner.is_some() && owner == cur_master {
            new_master = Some(sender);
            migrated_ours += 1;
        }
        cl.state.assign(slot, sender);
        cl.migrating.remove(&slot);
        cl.todo_save = true;
        cl.todo_update_state = true;
    }
    let cur_master_empty = cur_master
        .and_then(|m| cl.state.nodes.get(&m))
        .is_some_and(|m| m.slots.count() == 0);
    if new_master.is_some()
        && cur_master_empty
        && (srv.config.cluster.allow_replica_migration || sender_slots == migrated_ours)
    {
        info!(
            "Configuration change detected. Reconfiguring myself as a replica of {}",
            name_str(&sender)
        );
        super::cron::set_my_master(srv, cl, sender);
    } else if !dirty.is_empty() {
        // Keys of slots we lost (a partition healed): they are stale.
        for slot in dirty {
            srv.del_keys_in_slot(slot);
        }
    }
}

impl Cluster {
    /// `CLUSTER FORGET`'s 60 s ban: gossip does not add the node back.
    pub fn blacklisted(&mut self, n: &Name, now: u64) -> bool {
        self.blacklist.retain(|_, until| *until > now);
        self.blacklist.contains_key(n)
    }
}

impl Server {
    /// PUBLISH (`shard`: SPUBLISH) over the bus; false outside cluster mode.
    pub fn cluster_publish(&mut self, channel: &[u8], message: &[u8], shard: bool) -> bool {
        self.with_cluster(|srv, cl| send_publish(srv, cl, channel, message, shard))
            .is_some()
    }

    /// Deletes every key of `slot` (`delKeysInSlot`), propagated as DELs.
    pub fn del_keys_in_slot(&mut self, slot: u16) -> usize {
        let keys: Vec<Vec<u8>> = self.keyspace.dbs[0]
            .keys_in_slot(slot, usize::MAX)
            .into_iter()
            .map(|k| k.to_vec())
            .collect();
        for k in &keys {
            if let Some(e) = self.keyspace.dbs[0].remove(k) {
                self.drop_value(e);
            }
            self.touch_watched_key(0, k);
            self.propagate(0, &[&b"DEL"[..], k]);
            self.dirty += 1;
        }
        keys.len()
    }
}
