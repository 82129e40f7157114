//! The cluster's state as one node sees it, and the rules Redis 7.0's
//! `cluster.c` applies to it, as functions of that state and the time
//! (milliseconds, passed in, so each rule is tested on its own):
//!
//! - config-epoch collisions (`clusterHandleConfigEpochCollision`): of two
//!   masters with the same config epoch, the one with the smaller id takes
//!   a new epoch;
//! - failure detection (`markNodeAsFailingIfNeeded`): a node we see as
//!   PFAIL becomes FAIL once a majority of the masters serving slots
//!   reported it within twice the node timeout (our own view counts when
//!   we are such a master);
//! - votes (`clusterSendFailoverAuthIfNeeded`): one per epoch, for a
//!   replica of a failed master (or any, with FORCEACK), at most once per
//!   master in twice the node timeout, and never for slots whose owner has
//!   a newer config epoch;
//! - a replica's rank among its master's replicas (`clusterGetSlaveRank`);
//! - gossip sections (`clusterProcessGossipSection`): failure reports,
//!   PONG times, new nodes;
//! - the PING/PONG/MEET it sends (`clusterSendPing`).
//!
//! The bus links and the cron that drive these come next (#24).

use super::bus::{node_flags, Name, SlotBitmap};
use super::nodes::{NodeEntry, NodesConf};
use ferrokv_store::slots::SLOTS;
use std::collections::HashMap;

/// Reports older than this many node timeouts are forgotten
/// (`CLUSTER_FAIL_REPORT_VALIDITY_MULT`).
pub const FAIL_REPORT_VALIDITY_MULT: u64 = 2;

/// One node of the table.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: Name,
    pub flags: u16,
    pub config_epoch: u64,
    pub slots: SlotBitmap,
    pub master: Option<Name>,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    /// The other client port (TLS when the plain one is the main).
    pub pport: u16,
    pub hostname: String,
    /// When the node was added (a handshake times out from it).
    pub ctime_ms: u64,
    /// When anything last arrived from it.
    pub data_received_ms: u64,
    pub ping_sent_ms: u64,
    pub pong_received_ms: u64,
    pub fail_time_ms: u64,
    /// When we last voted for a replica of this master.
    pub voted_time_ms: u64,
    pub repl_offset: u64,
    /// Who reported this node as failing, and when.
    pub fail_reports: Vec<(Name, u64)>,
    /// Since when this master has been orphaned: slots, no working
    /// replica, and one before (replica migration waits for it to last).
    pub orphaned_ms: u64,
}

impl Node {
    pub fn new(name: Name, flags: u16) -> Node {
        Node {
            name,
            flags,
            config_epoch: 0,
            slots: SlotBitmap::default(),
            master: None,
            ip: String::new(),
            port: 0,
            cport: 0,
            pport: 0,
            hostname: String::new(),
            ctime_ms: 0,
            data_received_ms: 0,
            ping_sent_ms: 0,
            pong_received_ms: 0,
            fail_time_ms: 0,
            voted_time_ms: 0,
            repl_offset: 0,
            fail_reports: Vec::new(),
            orphaned_ms: 0,
        }
    }

    pub fn is_master(&self) -> bool {
        self.flags & node_flags::MASTER != 0
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// Why a vote was not given (Redis logs each of these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoVote {
    /// We are a replica, or a master without slots: not a voter.
    NotAVoter,
    /// The request's epoch is behind ours.
    OldEpoch,
    /// We already voted in this epoch.
    AlreadyVoted,
    /// The requester is not a replica of a master we know.
    NotAReplica,
    /// Its master is not FAIL and FORCEACK was not asked.
    MasterUp,
    /// We voted for a replica of this master less than twice the node
    /// timeout ago.
    TooSoon,
    /// A slot it claims is served with a newer config epoch.
    StaleSlots(u16),
}

/// What a FAILOVER_AUTH_REQUEST carries that the vote depends on.
pub struct VoteRequest<'a> {
    pub sender: Name,
    pub current_epoch: u64,
    pub config_epoch: u64,
    /// The slots it claims (its master's).
    pub slots: &'a SlotBitmap,
    pub force_ack: bool,
}

#[derive(Debug, Clone)]
pub struct ClusterState {
    pub myself: Name,
    pub nodes: HashMap<Name, Node>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    /// Each slot's owner; changed only through [`ClusterState::assign`]
    /// and [`ClusterState::unassign`], which keep the nodes' bitmaps and
    /// `mine` in step.
    owners: Vec<Option<Name>>,
    /// The slots myself serves (2 KiB, so the redirect check of every
    /// command reads it from cache rather than `owners`), and their count.
    mine: SlotBitmap,
    mine_count: usize,
    pub node_timeout_ms: u64,
}

impl ClusterState {
    /// A fresh node alone in its cluster: a master without slots.
    pub fn new(myself: Name, node_timeout_ms: u64) -> ClusterState {
        let mut nodes = HashMap::new();
        nodes.insert(
            myself,
            Node::new(myself, node_flags::MYSELF | node_flags::MASTER),
        );
        ClusterState {
            myself,
            nodes,
            current_epoch: 0,
            last_vote_epoch: 0,
            owners: vec![None; SLOTS],
            mine: SlotBitmap::default(),
            mine_count: 0,
            node_timeout_ms,
        }
    }

    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    fn me_mut(&mut self) -> &mut Node {
        self.nodes
            .get_mut(&self.myself)
            .expect("myself is in the table")
    }

    /// Gives `slot` to `owner` (both in the node's bitmap and the map).
    pub fn assign(&mut self, slot: u16, owner: Name) {
        if self.nodes.contains_key(&owner) {
            self.unassign(slot);
            if let Some(n) = self.nodes.get_mut(&owner) {
                n.slots.set(slot, true);
            }
            self.set_owner(slot, Some(owner));
        }
    }

    /// Leaves `slot` unassigned; returns the node that served it.
    pub fn unassign(&mut self, slot: u16) -> Option<Name> {
        let old = self.owners[slot as usize]?;
        if let Some(n) = self.nodes.get_mut(&old) {
            n.slots.set(slot, false);
        }
        self.set_owner(slot, None);
        Some(old)
    }

    /// Unassigns every slot `name` serves.
    pub fn unassign_node(&mut self, name: &Name) {
        for slot in 0..SLOTS as u16 {
            if self.owners[slot as usize].as_ref() == Some(name) {
                self.unassign(slot);
            }
        }
    }

    fn set_owner(&mut self, slot: u16, owner: Option<Name>) {
        let was = self.owners[slot as usize] == Some(self.myself);
        let is = owner == Some(self.myself);
        self.owners[slot as usize] = owner;
        if was != is {
            self.mine.set(slot, is);
            if is {
                self.mine_count += 1;
            } else {
                self.mine_count -= 1;
            }
        }
    }

    /// The node serving `slot`.
    #[inline]
    pub fn owner(&self, slot: u16) -> Option<Name> {
        self.owners[slot as usize]
    }

    /// The slots' owners as runs of consecutive slots with one owner, slot
    /// 0 first: the first slot of a run, its length and its owner. A
    /// cluster has a few runs, so a walk over the slots that looks their
    /// owner up does it once a run, not 16384 times.
    pub fn owner_runs(&self) -> impl Iterator<Item = (usize, usize, Option<Name>)> + '_ {
        self.owners.chunk_by(|a, b| a == b).scan(0, |first, run| {
            let at = *first;
            *first += run.len();
            Some((at, run.len(), run[0]))
        })
    }

    /// Does myself serve `slot`?
    #[inline]
    pub fn is_mine(&self, slot: u16) -> bool {
        self.mine.get(slot)
    }

    /// Does myself serve all 16384 slots (a cluster of one master)?
    #[inline]
    pub fn mine_all(&self) -> bool {
        self.mine_count == SLOTS
    }

    /// Myself takes a new name (`CLUSTER RESET HARD`, after its slots
    /// were unassigned).
    pub fn rename_myself(&mut self, new: Name) {
        debug_assert_eq!(self.mine_count, 0, "renamed while serving slots");
        self.myself = new;
    }

    /// Masters serving at least one slot (`server.cluster->size`).
    pub fn size(&self) -> usize {
        self.nodes
            .values()
            .filter(|n| n.is_master() && n.slots.count() > 0)
            .count()
    }

    /// `clusterHandleConfigEpochCollision`: returns whether we took a new
    /// epoch (the caller then saves nodes.conf).
    pub fn handle_config_epoch_collision(&mut self, sender: &Name) -> bool {
        let Some(s) = self.nodes.get(sender) else {
            return false;
        };
        let me = self.me();
        if s.config_epoch != me.config_epoch || !s.is_master() || !me.is_master() {
            return false;
        }
        // The node with the smaller id moves.
        if s.name <= me.name {
            return false;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        true
    }

    /// A failure report about `about` from `reporter` at `now`.
    pub fn add_failure_report(&mut self, about: &Name, reporter: Name, now: u64) {
        if let Some(n) = self.nodes.get_mut(about) {
            match n.fail_reports.iter_mut().find(|(r, _)| *r == reporter) {
                Some(r) => r.1 = now,
                None => n.fail_reports.push((reporter, now)),
            }
        }
    }

    /// `markNodeAsFailingIfNeeded`: PFAIL → FAIL on a majority of the
    /// slot-serving masters; returns whether the node became FAIL (the
    /// caller then broadcasts FAIL).
    pub fn mark_failing_if_needed(&mut self, about: &Name, now: u64) -> bool {
        let needed = self.size() / 2 + 1;
        let validity = self.node_timeout_ms * FAIL_REPORT_VALIDITY_MULT;
        let me_votes = self.me().is_master() as usize;
        let Some(n) = self.nodes.get_mut(about) else {
            return false;
        };
        if !n.has(node_flags::PFAIL) || n.has(node_flags::FAIL) {
            return false;
        }
        n.fail_reports
            .retain(|(_, t)| now.saturating_sub(*t) <= validity);
        if n.fail_reports.len() + me_votes < needed {
            return false;
        }
        n.flags = (n.flags & !node_flags::PFAIL) | node_flags::FAIL;
        n.fail_time_ms = now;
        true
    }

    /// `clusterSendFailoverAuthIfNeeded`: `Ok` when we vote (and have
    /// recorded the vote), else why not.
    pub fn vote(&mut self, req: &VoteRequest, now: u64) -> Result<(), NoVote> {
        let me = self.me();
        if !me.is_master() || me.slots.count() == 0 {
            return Err(NoVote::NotAVoter);
        }
        if req.current_epoch < self.current_epoch {
            return Err(NoVote::OldEpoch);
        }
        if self.last_vote_epoch == self.current_epoch {
            return Err(NoVote::AlreadyVoted);
        }
        let master = match self.nodes.get(&req.sender) {
            Some(n) if n.has(node_flags::SLAVE) => n.master,
            _ => None,
        };
        let Some(master) = master.and_then(|m| self.nodes.get(&m)) else {
            return Err(NoVote::NotAReplica);
        };
        if !master.has(node_flags::FAIL) && !req.force_ack {
            return Err(NoVote::MasterUp);
        }
        if now.saturating_sub(master.voted_time_ms) < self.node_timeout_ms * 2
            && master.voted_time_ms != 0
        {
            return Err(NoVote::TooSoon);
        }
        for slot in 0..SLOTS as u16 {
            if !req.slots.get(slot) {
                continue;
            }
            let Some(owner) = self.owners[slot as usize].and_then(|o| self.nodes.get(&o)) else {
                continue;
            };
            if owner.config_epoch > req.config_epoch {
                return Err(NoVote::StaleSlots(slot));
            }
        }
        let m = master.name;
        self.last_vote_epoch = self.current_epoch;
        self.nodes
            .get_mut(&m)
            .expect("looked up above")
            .voted_time_ms = now;
        Ok(())
    }

    /// `clusterGetSlaveRank`: how many other replicas of our master have
    /// a greater replication offset than `my_offset` (0 is the best; the
    /// election waits 1 s per rank).
    pub fn replica_rank(&self, my_offset: u64) -> usize {
        let Some(master) = self.me().master else {
            return 0;
        };
        self.nodes
            .values()
            .filter(|n| {
                n.name != self.myself
                    && n.master == Some(master)
                    && !n.has(node_flags::NOFAILOVER)
                    && n.repl_offset > my_offset
            })
            .count()
    }

    /// The table as nodes.conf holds it (timings as last seen).
    pub fn to_conf(&self) -> NodesConf {
        let text = |n: &Name| String::from_utf8_lossy(n).into_owned();
        let mut names: Vec<&Name> = self.nodes.keys().collect();
        names.sort();
        NodesConf {
            nodes: names
                .into_iter()
                .map(|k| {
                    let n = &self.nodes[k];
                    NodeEntry {
                        id: text(&n.name),
                        ip: n.ip.clone(),
                        port: n.port,
                        cport: n.cport,
                        hostname: n.hostname.clone(),
                        flags: n.flags,
                        master: n.master.as_ref().map(text),
                        ping_sent_ms: n.ping_sent_ms,
                        pong_received_ms: n.pong_received_ms,
                        config_epoch: n.config_epoch,
                        connected: n.has(node_flags::MYSELF),
                        slots: n.slots.clone(),
                        migrating: Vec::new(),
                        importing: Vec::new(),
                    }
                })
                .collect(),
            current_epoch: self.current_epoch,
            last_vote_epoch: self.last_vote_epoch,
        }
    }
}

/// What a node announces of itself that the table does not hold.
#[derive(Debug, Clone, Default)]
pub struct Announce {
    /// `cluster-announce-ip`: empty for "the address the packet came
    /// from".
    pub ip: String,
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    pub hostname: String,
    /// The replication offset to send.
    pub offset: u64,
}

impl ClusterState {
    /// `clusterBuildMessageHdr`: a replica sends its master's slots and
    /// config epoch, and names it in `slaveof`.
    pub fn header(&self, kind: u16, me: &Announce) -> super::bus::Header {
        let my = self.me();
        let master = my
            .master
            .filter(|_| my.has(node_flags::SLAVE))
            .and_then(|m| self.nodes.get(&m))
            .unwrap_or(my);
        super::bus::Header {
            kind,
            port: me.port,
            current_epoch: self.current_epoch,
            config_epoch: master.config_epoch,
            offset: me.offset,
            sender: self.myself,
            slots: master.slots.clone(),
            slaveof: my.master.unwrap_or(super::bus::NULL_NAME),
            myip: me.ip.clone(),
            pport: me.pport,
            cport: me.cport,
            flags: my.flags,
            state: 0,
            mflags: [0; 3],
        }
    }

    /// `clusterSendPing`'s message: max(3, nodes/10) gossip entries drawn
    /// with `pick(n)` (a random index below `n`) among the nodes worth
    /// telling about (not us, not in handshake or without address, not a
    /// slot-less node we have no link to: `linked`), then every PFAIL
    /// node; the hostname extension when we announce one.
    pub fn ping(
        &self,
        kind: u16,
        me: &Announce,
        linked: impl Fn(&Name) -> bool,
        mut pick: impl FnMut(usize) -> usize,
    ) -> super::bus::Message {
        use super::bus::{Body, Ext, Gossip, Message};
        let fresh = self.nodes.len().saturating_sub(2);
        let wanted = (self.nodes.len() / 10).max(3).min(fresh);
        let mut names: Vec<&Name> = self.nodes.keys().collect();
        names.sort();
        let skip = |n: &Node| {
            n.name == self.myself
                || n.has(node_flags::HANDSHAKE | node_flags::NOADDR)
                || (!linked(&n.name) && n.slots.count() == 0)
        };
        let mut chosen: Vec<Name> = Vec::new();
        for _ in 0..wanted * 3 {
            if chosen.len() >= wanted || names.is_empty() {
                break;
            }
            let n = &self.nodes[names[pick(names.len())]];
            if skip(n) || n.has(node_flags::PFAIL) || chosen.contains(&n.name) {
                continue;
            }
            chosen.push(n.name);
        }
        for name in names {
            let n = &self.nodes[name];
            if n.has(node_flags::PFAIL) && !skip(n) && !chosen.contains(&n.name) {
                chosen.push(n.name);
            }
        }
        let gossip = chosen
            .iter()
            .map(|name| {
                let n = &self.nodes[name];
                Gossip {
                    name: n.name,
                    ping_sent: (n.ping_sent_ms / 1000) as u32,
                    pong_received: (n.pong_received_ms / 1000) as u32,
                    ip: n.ip.clone(),
                    port: n.port,
                    cport: n.cport,
                    flags: n.flags,
                    pport: n.pport,
                }
            })
            .collect();
        let exts = if me.hostname.is_empty() {
            Vec::new()
        } else {
            vec![Ext::Hostname(me.hostname.clone())]
        };
        Message::new(self.header(kind, me), Body::Ping { gossip, exts })
    }
}

/// What a gossip section changed that the caller acts on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GossipOutcome {
    /// Nodes that became FAIL (to broadcast FAIL about).
    pub failed: Vec<Name>,
    /// Nodes heard of for the first time (to connect to).
    pub added: Vec<Name>,
}

impl ClusterState {
    /// `clusterProcessGossipSection`, for a message from `sender` (`None`
    /// while the sender is not in the table yet):
    /// - a master's PFAIL/FAIL word about a node is a failure report, its
    ///   silence withdraws one, and enough reports make the node FAIL;
    /// - a healthy node's PONG time is taken from gossip when we have no
    ///   PING pending to it and no reports against it;
    /// - a failing node reported healthy at another address moves there;
    /// - a known sender's word about a node we do not know adds it (not
    ///   one without address).
    pub fn process_gossip(
        &mut self,
        sender: Option<&Name>,
        gossip: &[super::bus::Gossip],
        now: u64,
    ) -> GossipOutcome {
        let mut out = GossipOutcome::default();
        let sender_is_master = sender
            .and_then(|s| self.nodes.get(s))
            .is_some_and(Node::is_master);
        let failing = node_flags::PFAIL | node_flags::FAIL;
        for g in gossip {
            if let std::collections::hash_map::Entry::Vacant(e) = self.nodes.entry(g.name) {
                if sender.is_some() && g.flags & node_flags::NOADDR == 0 {
                    let mut n = Node::new(g.name, 0);
                    n.ip = g.ip.clone();
                    n.port = g.port;
                    n.cport = g.cport;
                    e.insert(n);
                    out.added.push(g.name);
                }
                continue;
            }
            if sender_is_master && g.name != self.myself {
                let reporter = *sender.expect("a master sender");
                if g.flags & failing != 0 {
                    self.add_failure_report(&g.name, reporter, now);
                    if self.mark_failing_if_needed(&g.name, now) {
                        out.failed.push(g.name);
                    }
                } else if let Some(n) = self.nodes.get_mut(&g.name) {
                    n.fail_reports.retain(|(r, _)| *r != reporter);
                }
            }
            let n = self.nodes.get_mut(&g.name).expect("checked above");
            if g.flags & failing == 0 && n.ping_sent_ms == 0 && n.fail_reports.is_empty() {
                let pong = g.pong_received as u64 * 1000;
                if pong <= now + 500 && pong > n.pong_received_ms {
                    n.pong_received_ms = pong;
                }
            }
            if n.has(failing)
                && g.flags & (node_flags::NOADDR | failing) == 0
                && (n.ip != g.ip || n.port != g.port || n.cport != g.cport)
            {
                n.ip = g.ip.clone();
                n.port = g.port;
                n.cport = g.cport;
                n.flags &= !node_flags::NOADDR;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(c: u8) -> Name {
        [c; 40]
    }

    /// `me` (`b'm'`) a master with slots 0..100, masters `a` and `b`
    /// with slots too, `r` a replica of `a`.
    fn cluster() -> ClusterState {
        let mut s = ClusterState::new(name(b'm'), 15_000);
        for (c, flags) in [
            (b'a', node_flags::MASTER),
            (b'b', node_flags::MASTER),
            (b'r', node_flags::SLAVE),
        ] {
            s.nodes.insert(name(c), Node::new(name(c), flags));
        }
        s.nodes.get_mut(&name(b'r')).unwrap().master = Some(name(b'a'));
        for slot in 0..100 {
            s.assign(slot, name(b'm'));
            s.assign(slot + 100, name(b'a'));
            s.assign(slot + 200, name(b'b'));
        }
        s.current_epoch = 5;
        s.nodes.get_mut(&name(b'a')).unwrap().config_epoch = 2;
        s
    }

    #[test]
    fn the_smaller_id_takes_a_new_epoch_on_collision() {
        let mut s = cluster();
        s.me_mut().config_epoch = 2;
        // a < m: the sender is smaller, it is the one to move.
        assert!(!s.handle_config_epoch_collision(&name(b'a')));
        s.nodes
            .insert(name(b'z'), Node::new(name(b'z'), node_flags::MASTER));
        s.nodes.get_mut(&name(b'z')).unwrap().config_epoch = 2;
        assert!(s.handle_config_epoch_collision(&name(b'z')));
        assert_eq!((s.current_epoch, s.me().config_epoch), (6, 6));
        // Different epochs now: nothing more.
        assert!(!s.handle_config_epoch_collision(&name(b'z')));
    }

    #[test]
    fn pfail_becomes_fail_on_a_majority_of_slot_masters() {
        let mut s = cluster();
        // Three slot-serving masters: 2 needed; ours counts.
        assert_eq!(s.size(), 3);
        let a = name(b'a');
        assert!(!s.mark_failing_if_needed(&a, 1000), "not PFAIL yet");
        s.nodes.get_mut(&a).unwrap().flags |= node_flags::PFAIL;
        assert!(!s.mark_failing_if_needed(&a, 1000), "only our view");
        // A report too old does not count.
        s.add_failure_report(&a, name(b'b'), 1000);
        assert!(!s.mark_failing_if_needed(&a, 1000 + 30_001));
        s.add_failure_report(&a, name(b'b'), 40_000);
        assert!(s.mark_failing_if_needed(&a, 40_001));
        let n = &s.nodes[&a];
        assert!(n.has(node_flags::FAIL) && !n.has(node_flags::PFAIL));
        assert!(!s.mark_failing_if_needed(&a, 40_002), "already FAIL");
    }

    #[test]
    fn votes_follow_redis_rules() {
        let mut s = cluster();
        let slots = s.nodes[&name(b'a')].slots.clone();
        let req = |epoch, cfg, force| VoteRequest {
            sender: name(b'r'),
            current_epoch: epoch,
            config_epoch: cfg,
            slots: &slots,
            force_ack: force,
        };
        assert_eq!(s.vote(&req(4, 2, false), 1), Err(NoVote::OldEpoch));
        assert_eq!(s.vote(&req(5, 2, false), 1), Err(NoVote::MasterUp));
        // FORCEACK (manual failover) votes for a master still up.
        assert_eq!(s.vote(&req(5, 2, true), 1), Ok(()));
        assert_eq!(s.vote(&req(5, 2, true), 2), Err(NoVote::AlreadyVoted));
        // A new epoch, but the same master within 2 × node timeout.
        s.current_epoch = 6;
        s.nodes.get_mut(&name(b'a')).unwrap().flags |= node_flags::FAIL;
        assert_eq!(s.vote(&req(6, 2, false), 1000), Err(NoVote::TooSoon));
        // Later, with a stale claim on the slots: refused.
        assert_eq!(
            s.vote(&req(6, 1, false), 40_000),
            Err(NoVote::StaleSlots(100))
        );
        assert_eq!(s.vote(&req(6, 2, false), 40_000), Ok(()));
        assert_eq!(s.last_vote_epoch, 6);
        // A master without slots, or a replica, does not vote.
        let mut lone = ClusterState::new(name(b'q'), 15_000);
        lone.current_epoch = 1;
        assert_eq!(lone.vote(&req(1, 0, true), 1), Err(NoVote::NotAVoter));
    }

    #[test]
    fn rank_counts_replicas_ahead() {
        let mut s = ClusterState::new(name(b'm'), 15_000);
        s.me_mut().flags = node_flags::MYSELF | node_flags::SLAVE;
        s.me_mut().master = Some(name(b'a'));
        for (c, off) in [(b'x', 100), (b'y', 300), (b'z', 500)] {
            let mut n = Node::new(name(c), node_flags::SLAVE);
            n.master = Some(name(b'a'));
            n.repl_offset = off;
            s.nodes.insert(name(c), n);
        }
        assert_eq!(s.replica_rank(400), 1);
        assert_eq!(s.replica_rank(50), 3);
        assert_eq!(s.replica_rank(600), 0);
    }

    #[test]
    fn a_replica_sends_its_masters_slots_and_epoch() {
        let mut s = cluster();
        s.me_mut().flags = node_flags::MYSELF | node_flags::SLAVE;
        s.me_mut().master = Some(name(b'a'));
        let h = s.header(super::super::bus::kind::PING, &Announce::default());
        assert_eq!(h.slaveof, name(b'a'));
        assert_eq!(h.config_epoch, 2);
        assert_eq!(h.slots, s.nodes[&name(b'a')].slots);
        assert_eq!(h.flags, node_flags::MYSELF | node_flags::SLAVE);
    }

    #[test]
    fn gossip_takes_three_then_every_pfail_node() {
        use super::super::bus::{kind, Body, Ext};
        let mut s = ClusterState::new(name(b'm'), 15_000);
        for c in b'a'..=b'h' {
            let mut n = Node::new(name(c), node_flags::MASTER);
            n.slots.set(c as u16, true);
            s.nodes.insert(name(c), n);
        }
        s.nodes.get_mut(&name(b'h')).unwrap().flags |= node_flags::PFAIL;
        s.nodes
            .insert(name(b'x'), Node::new(name(b'x'), node_flags::HANDSHAKE));
        let me = Announce {
            hostname: "me.example".into(),
            ..Announce::default()
        };
        let mut i = 0;
        let m = s.ping(
            kind::PING,
            &me,
            |_| true,
            |n| {
                i += 1;
                i % n
            },
        );
        let Body::Ping { gossip, exts } = &m.body else {
            panic!()
        };
        // 10 nodes: wanted max(3, 1) = 3, plus the PFAIL one; never us,
        // never the handshake node.
        assert_eq!(gossip.len(), 4, "{gossip:?}");
        assert!(gossip.iter().any(|g| g.name == name(b'h')));
        assert!(gossip
            .iter()
            .all(|g| g.name != name(b'm') && g.name != name(b'x')));
        assert_eq!(exts, &vec![Ext::Hostname("me.example".into())]);
        // It encodes and decodes as it was built.
        let back = super::super::bus::Message::decode(&m.encode()).unwrap();
        assert_eq!(back.body, m.body);
    }

    fn gossip_about(c: u8, flags: u16) -> super::super::bus::Gossip {
        super::super::bus::Gossip {
            name: name(c),
            ping_sent: 0,
            pong_received: 50,
            ip: "10.0.0.9".into(),
            port: 7000,
            cport: 17000,
            flags,
            pport: 0,
        }
    }

    #[test]
    fn gossip_reports_failures_learns_nodes_and_pong_times() {
        let mut s = cluster();
        let a = name(b'a');
        s.nodes.get_mut(&a).unwrap().flags |= node_flags::PFAIL;
        // b (a master) says a is PFAIL: with our own view, 2 of 3.
        let out = s.process_gossip(
            Some(&name(b'b')),
            &[gossip_about(b'a', node_flags::MASTER | node_flags::PFAIL)],
            60_000,
        );
        assert_eq!(out.failed, vec![a]);
        // A replica's word is no report.
        let mut t = cluster();
        t.nodes.get_mut(&a).unwrap().flags |= node_flags::PFAIL;
        let out = t.process_gossip(
            Some(&name(b'r')),
            &[gossip_about(b'a', node_flags::PFAIL)],
            60_000,
        );
        assert!(out.failed.is_empty() && t.nodes[&a].fail_reports.is_empty());
        // A new node is added with its address; not without one, and not
        // from an unknown sender.
        let out = s.process_gossip(
            Some(&name(b'b')),
            &[
                gossip_about(b'n', node_flags::MASTER),
                gossip_about(b'o', node_flags::NOADDR),
            ],
            60_000,
        );
        assert_eq!(out.added, vec![name(b'n')]);
        assert_eq!(s.nodes[&name(b'n')].cport, 17000);
        assert!(s
            .process_gossip(None, &[gossip_about(b'p', 0)], 60_000)
            .added
            .is_empty());
        // b's healthy word about the new node carries its PONG time, and
        // withdraws nothing it did not report.
        assert_eq!(s.nodes[&name(b'n')].pong_received_ms, 0);
        s.process_gossip(Some(&name(b'b')), &[gossip_about(b'n', 1)], 60_000);
        assert_eq!(s.nodes[&name(b'n')].pong_received_ms, 50_000);
    }

    #[test]
    fn the_table_renders_as_nodes_conf() {
        let s = cluster();
        let text = s.to_conf().render();
        let back = NodesConf::parse(&text).unwrap();
        assert_eq!(back.render(), text);
        assert_eq!(back.myself().slots.count(), 100);
        assert!(text.ends_with("vars currentEpoch 5 lastVoteEpoch 0\n"));
    }
}
