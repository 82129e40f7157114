//! `CLUSTER` and its subcommands, `ASKING`, `READONLY`, `READWRITE`, with
//! Redis 7.0's replies and error texts (its `clusterCommand`). Outside
//! cluster mode they answer Redis's "This instance has cluster support
//! disabled".

use super::bus::{kind, node_flags, Body, Message, Name};
use super::cron::{replace_my_master, reset_manual_failover, set_my_master, MF_TIMEOUT_MS};
use super::{name_str, Cluster};
use crate::commands::flags::*;
use crate::commands::{is, reply_help, CommandSpec, Ctx};
use ferrokv_resp::Args;
use ferrokv_store::slots::{key_slot, SLOTS};
use tracing::info;

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    h: crate::commands::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("cluster")
        .since("3.0.0")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("cluster", -2, 0, cluster_help)
        .doc("A container for Redis Cluster commands.", "")
        .subs(SUBS),
    cmd("asking", 1, FAST, asking).doc(
        "Signals that a cluster client is following an -ASK redirect.",
        "",
    ),
    cmd("readonly", 1, LOADING | STALE | FAST, readonly).doc(
        "Enables read-only queries for a connection to a Redis Cluster replica node.",
        "",
    ),
    cmd("readwrite", 1, LOADING | STALE | FAST, readwrite).doc(
        "Enables read-write queries for a connection to a Reids Cluster replica node.",
        "",
    ),
];

const A: u32 = ADMIN | STALE;

static SUBS: &[CommandSpec] = &[
    cmd("cluster|addslots", -3, A, addslots),
    cmd("cluster|addslotsrange", -4, A, addslotsrange).since("7.0.0"),
    cmd("cluster|bumpepoch", 2, A, bumpepoch),
    cmd("cluster|count-failure-reports", 3, A, count_failure_reports),
    cmd("cluster|countkeysinslot", 3, STALE, countkeysinslot),
    cmd("cluster|delslots", -3, A, delslots),
    cmd("cluster|delslotsrange", -4, A, delslotsrange).since("7.0.0"),
    cmd("cluster|failover", -2, A, failover),
    cmd("cluster|flushslots", 2, A, flushslots),
    cmd("cluster|forget", 3, A, forget),
    cmd("cluster|getkeysinslot", 4, STALE, getkeysinslot),
    cmd("cluster|help", 2, LOADING | STALE, cluster_help).since("5.0.0"),
    cmd("cluster|info", 2, STALE, info),
    cmd("cluster|keyslot", 3, STALE, keyslot),
    cmd("cluster|links", 2, STALE, links).since("7.0.0"),
    cmd("cluster|meet", -4, A, meet),
    cmd("cluster|myid", 2, STALE, myid),
    cmd("cluster|nodes", 2, STALE, nodes),
    cmd("cluster|replicas", 3, A, replicas).since("5.0.0"),
    cmd("cluster|replicate", 3, A, replicate),
    cmd("cluster|reset", -2, A | NOSCRIPT, reset),
    cmd("cluster|saveconfig", 2, A, saveconfig),
    cmd("cluster|set-config-epoch", 3, A, set_config_epoch),
    cmd("cluster|setslot", -4, A, setslot),
    cmd("cluster|shards", 2, STALE, shards).since("7.0.0"),
    cmd("cluster|slaves", 3, A, replicas),
    cmd("cluster|slots", 2, STALE, slots),
];

const DISABLED: &str = "ERR This instance has cluster support disabled";

const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];

/// Runs `f` with the cluster, or replies that cluster mode is off.
fn with(ctx: &mut Ctx, f: impl FnOnce(&mut Ctx, &mut Cluster)) {
    let Some(mut cl) = ctx.srv.cluster.take() else {
        return ctx.error(DISABLED);
    };
    f(ctx, &mut cl);
    ctx.srv.cluster = Some(cl);
}

fn cluster_help(ctx: &mut Ctx, args: Args) {
    // Redis answers even HELP this way outside cluster mode.
    if ctx.srv.cluster.is_none() {
        return ctx.error(DISABLED);
    }
    if args.len() == 2 && is(args.get(1), "help") {
        return reply_help(ctx, "CLUSTER", HELP);
    }
    let mut msg = b"ERR unknown subcommand '".to_vec();
    msg.extend_from_slice(crate::server::c_str(args.get(1), 128));
    msg.extend_from_slice(b"'. Try CLUSTER HELP.");
    ctx.client.out.error_bytes(&msg);
}

/// ASKING: the next command may touch an importing slot.
fn asking(ctx: &mut Ctx, _args: Args) {
    if ctx.srv.cluster.is_none() {
        return ctx.error(DISABLED);
    }
    ctx.client.asking = true;
    ctx.client.out.ok();
}

/// READONLY: reads of our master's slots are served here (a replica).
fn readonly(ctx: &mut Ctx, _args: Args) {
    if ctx.srv.cluster.is_none() {
        return ctx.error(DISABLED);
    }
    ctx.client.readonly = true;
    ctx.client.out.ok();
}

fn readwrite(ctx: &mut Ctx, _args: Args) {
    if ctx.srv.cluster.is_none() {
        return ctx.error(DISABLED);
    }
    ctx.client.readonly = false;
    ctx.client.out.ok();
}

fn parse_slot(a: &[u8]) -> Option<u16> {
    ferrokv_resp::parse_i64(a)
        .filter(|s| (0..SLOTS as i64).contains(s))
        .map(|s| s as u16)
}

fn node_name(a: &[u8]) -> Option<Name> {
    a.try_into().ok()
}

fn unknown_node(ctx: &mut Ctx, a: &[u8]) {
    ctx.error(&format!("ERR Unknown node {}", String::from_utf8_lossy(a)));
}

/// Assigns (`add`) or removes our claim on `slots` (`clusterAddSlot`,
/// `clusterDelSlot`), after checking every one as Redis does.
fn change_slots(ctx: &mut Ctx, cl: &mut Cluster, slots: Vec<u16>, add: bool) {
    let mut seen = vec![false; SLOTS];
    for &s in &slots {
        let owned = cl.state.owner(s).is_some();
        if add && owned {
            return ctx.error(&format!("ERR Slot {s} is already busy"));
        }
        if !add && !owned {
            return ctx.error(&format!("ERR Slot {s} is already unassigned"));
        }
        if seen[s as usize] {
            return ctx.error(&format!("ERR Slot {s} specified multiple times"));
        }
        seen[s as usize] = true;
    }
    let me = cl.state.myself;
    for s in slots {
        if add {
            // Importing a slot we now own ends the import.
            cl.importing.remove(&s);
            cl.state.assign(s, me);
        } else {
            cl.state.unassign(s);
            cl.migrating.remove(&s);
            cl.importing.remove(&s);
        }
    }
    cl.todo_save = true;
    cl.todo_update_state = true;
    ctx.client.out.ok();
}

fn addslots(ctx: &mut Ctx, args: Args) {
    slots_command(ctx, args, true, false)
}
fn delslots(ctx: &mut Ctx, args: Args) {
    slots_command(ctx, args, false, false)
}
fn addslotsrange(ctx: &mut Ctx, args: Args) {
    slots_command(ctx, args, true, true)
}
fn delslotsrange(ctx: &mut Ctx, args: Args) {
    slots_command(ctx, args, false, true)
}

fn slots_command(ctx: &mut Ctx, args: Args, add: bool, range: bool) {
    with(ctx, |ctx, cl| {
        let mut slots = Vec::new();
        if range {
            if args.len() % 2 == 1 {
                let name = if add {
                    "addslotsrange"
                } else {
                    "delslotsrange"
                };
                return ctx.error(&format!(
                    "ERR wrong number of arguments for 'cluster|{name}' command"
                ));
            }
            let mut i = 2;
            while i + 1 < args.len() {
                let (Some(a), Some(b)) = (parse_slot(args.get(i)), parse_slot(args.get(i + 1)))
                else {
                    return ctx.error("ERR Invalid or out of range slot");
                };
                if a > b {
                    return ctx.error(&format!(
                        "ERR start slot number {a} is greater than end slot number {b}"
                    ));
                }
                slots.extend(a..=b);
                i += 2;
            }
        } else {
            for a in args.iter().skip(2) {
                let Some(s) = parse_slot(a) else {
                    return ctx.error("ERR Invalid or out of range slot");
                };
                slots.push(s);
            }
        }
        change_slots(ctx, cl, slots, add);
    })
}

fn flushslots(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        if !ctx.srv.keyspace.dbs[0].is_empty() {
            return ctx.error("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.");
        }
        let me = cl.state.myself;
        cl.state.unassign_node(&me);
        cl.todo_save = true;
        cl.todo_update_state = true;
        ctx.client.out.ok();
    })
}

fn bumpepoch(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| match cl.bump_epoch_without_consensus() {
        Some(e) => {
            info!("New configEpoch set to {e}");
            ctx.client.out.simple(&format!("BUMPED {e}"));
        }
        None => {
            let mine = cl.me().config_epoch;
            ctx.client.out.simple(&format!("STILL {mine}"));
        }
    })
}

fn set_config_epoch(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let Some(e) = ferrokv_resp::parse_i64(args.get(2)) else {
            return ctx.error(crate::commands::err::NOT_INTEGER);
        };
        if e < 0 {
            return ctx.error(&format!("ERR Invalid config epoch specified: {e}"));
        }
        if cl.state.nodes.len() > 1 {
            return ctx.error("ERR The user can assign a config epoch only when the node does not know any other node.");
        }
        if cl.me().config_epoch != 0 {
            return ctx.error("ERR Node config epoch is already non-zero");
        }
        let e = e as u64;
        cl.me_mut().config_epoch = e;
        info!("configEpoch set to {e} via CLUSTER SET-CONFIG-EPOCH");
        if cl.state.current_epoch < e {
            cl.state.current_epoch = e;
        }
        cl.todo_save = true;
        cl.todo_update_state = true;
        ctx.client.out.ok();
    })
}

fn keyslot(ctx: &mut Ctx, args: Args) {
    // (Served with cluster mode off too, as Redis.)
    if ctx.srv.cluster.is_none() {
        return ctx.error(DISABLED);
    }
    ctx.client.out.int(key_slot(args.get(2)) as i64);
}

fn countkeysinslot(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, _cl| {
        let Some(s) = ferrokv_resp::parse_i64(args.get(2)) else {
            return ctx.error(crate::commands::err::NOT_INTEGER);
        };
        if !(0..SLOTS as i64).contains(&s) {
            return ctx.error("ERR Invalid slot");
        }
        let n = ctx.srv.keyspace.dbs[0].count_keys_in_slot(s as u16);
        ctx.client.out.int(n as i64);
    })
}

fn getkeysinslot(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, _cl| {
        let (Some(s), Some(max)) = (
            ferrokv_resp::parse_i64(args.get(2)),
            ferrokv_resp::parse_i64(args.get(3)),
        ) else {
            return ctx.error(crate::commands::err::NOT_INTEGER);
        };
        if max < 0 || !(0..SLOTS as i64).contains(&s) {
            return ctx.error("ERR Invalid slot or number of keys");
        }
        // Bounded by the keys there, whatever count the client asks.
        let keys = ctx.srv.keyspace.dbs[0].keys_in_slot(s as u16, max as usize);
        let out = &mut ctx.client.out;
        out.array(keys.len());
        for k in keys {
            out.bulk(k);
        }
    })
}

fn info(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        let text = cl.info_text();
        ctx.client.out.verbatim(text.as_bytes());
    })
}

fn nodes(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        let text = crate::server::Server::cluster_nodes_text(cl);
        ctx.client.out.verbatim(text.as_bytes());
    })
}

fn myid(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        let me = cl.state.myself;
        ctx.client.out.bulk(&me);
    })
}

fn meet(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        if args.len() > 5 {
            return ctx.error(crate::commands::err::SYNTAX);
        }
        let ip = String::from_utf8_lossy(args.get(2)).into_owned();
        let port_arg = String::from_utf8_lossy(args.get(3)).into_owned();
        let Some(port) = ferrokv_resp::parse_i64(args.get(3)).filter(|p| (0..=65535).contains(p))
        else {
            return ctx.error(&format!("ERR Invalid base port specified: {port_arg}"));
        };
        let cport = if args.len() == 5 {
            let c = String::from_utf8_lossy(args.get(4)).into_owned();
            match ferrokv_resp::parse_i64(args.get(4)).filter(|p| (0..=65535).contains(p)) {
                Some(c) => c,
                None => return ctx.error(&format!("ERR Invalid bus port specified: {c}")),
            }
        } else {
            port + 10000
        };
        let valid_ip = ip.parse::<std::net::IpAddr>().is_ok();
        if !valid_ip || port == 0 || cport == 0 || cport > 65535 {
            return ctx.error(&format!(
                "ERR Invalid node address specified: {ip}:{port_arg}"
            ));
        }
        let ip = ip.parse::<std::net::IpAddr>().expect("checked").to_string();
        let now = super::process::now_ms();
        cl.start_handshake(&ip, port as u16, cport as u16, &mut ctx.srv.rng, now);
        ctx.client.out.ok();
    })
}

fn forget(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let Some(n) = node_name(args.get(2)).filter(|n| cl.state.nodes.contains_key(n)) else {
            return unknown_node(ctx, args.get(2));
        };
        if n == cl.state.myself {
            return ctx.error("ERR I tried hard but I can't forget myself...");
        }
        if cl.my_master().is_some_and(|m| m.name == n) {
            return ctx.error("ERR Can't forget my master!");
        }
        let now = super::process::now_ms();
        cl.blacklist.insert(n, now + 60_000);
        cl.del_node(&n, ctx.srv.repl.registry.as_ref());
        cl.todo_save = true;
        cl.todo_update_state = true;
        ctx.client.out.ok();
    })
}

fn replicate(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let Some(n) = node_name(args.get(2)).filter(|n| cl.state.nodes.contains_key(n)) else {
            return unknown_node(ctx, args.get(2));
        };
        if n == cl.state.myself {
            return ctx.error("ERR Can't replicate myself");
        }
        if !cl.state.nodes[&n].is_master() {
            return ctx.error("ERR I can only replicate a master, not a replica.");
        }
        if cl.i_am_master() && (cl.me().slots.count() != 0 || !ctx.srv.keyspace.dbs[0].is_empty()) {
            return ctx
                .error("ERR To set a master the node must be empty and without assigned slots.");
        }
        set_my_master(ctx.srv, cl, n);
        ctx.client.out.ok();
    })
}

fn replicas(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let Some(n) = node_name(args.get(2)).filter(|n| cl.state.nodes.contains_key(n)) else {
            return unknown_node(ctx, args.get(2));
        };
        if !cl.state.nodes[&n].is_master() {
            return ctx.error("ERR The specified node is not a master");
        }
        let conf = cl.to_conf();
        let lines: Vec<String> = conf
            .nodes
            .iter()
            .filter(|e| e.master.as_deref() == Some(name_str(&n)))
            .map(|e| e.line())
            .collect();
        let out = &mut ctx.client.out;
        out.array(lines.len());
        for l in lines {
            out.bulk(l.as_bytes());
        }
    })
}

fn count_failure_reports(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let Some(n) = node_name(args.get(2)).and_then(|n| cl.state.nodes.get_mut(&n)) else {
            return unknown_node(ctx, args.get(2));
        };
        let now = super::process::now_ms();
        let validity = cl.state.node_timeout_ms * super::state::FAIL_REPORT_VALIDITY_MULT;
        n.fail_reports
            .retain(|(_, t)| now.saturating_sub(*t) <= validity);
        let count = n.fail_reports.len();
        ctx.client.out.int(count as i64);
    })
}

fn saveconfig(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| match cl.save_config() {
        Ok(()) => ctx.client.out.ok(),
        Err(e) => ctx.error(&format!("ERR error saving the cluster node config: {e}")),
    })
}

fn failover(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let (mut force, mut takeover) = (false, false);
        match args.len() {
            2 => {}
            3 if is(args.get(2), "force") => force = true,
            3 if is(args.get(2), "takeover") => {
                takeover = true;
                force = true;
            }
            _ => return ctx.error(crate::commands::err::SYNTAX),
        }
        if cl.i_am_master() {
            return ctx.error("ERR You should send CLUSTER FAILOVER to a replica");
        }
        let Some(master) = cl.my_master().map(|m| (m.name, m.has(node_flags::FAIL))) else {
            return ctx.error("ERR I'm a replica but my master is unknown to me");
        };
        let (master, failed) = master;
        if !force && (failed || !cl.links.outbound_connected(&master)) {
            return ctx.error("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE");
        }
        reset_manual_failover(ctx.srv, cl);
        let now = super::process::now_ms();
        cl.manual.end_ms = now + MF_TIMEOUT_MS;
        if takeover {
            // No election: a new epoch of our own, and the slots.
            info!("Taking over the master (user request).");
            cl.state.current_epoch += 1;
            let e = cl.state.current_epoch;
            cl.me_mut().config_epoch = e;
            replace_my_master(ctx.srv, cl, master);
        } else if force {
            info!("Forced failover user request accepted.");
            cl.manual.can_start = true;
            // Start now, whatever election was scheduled.
            cl.election.auth_time_ms = 0;
        } else {
            info!("Manual failover user request accepted.");
            if let Some(id) = cl.links.outbound_of(&master) {
                let m = Message::new(
                    super::process::header(ctx.srv, cl, kind::MFSTART),
                    Body::Empty,
                );
                super::process::send_on(ctx.srv, cl, id, &m);
            }
            cl.election.auth_time_ms = 0;
        }
        ctx.client.out.ok();
    })
}

fn reset(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        let hard = match args.len() {
            2 => false,
            3 if is(args.get(2), "hard") => true,
            3 if is(args.get(2), "soft") => false,
            _ => return ctx.error(crate::commands::err::SYNTAX),
        };
        if cl.i_am_master() && !ctx.srv.keyspace.dbs[0].is_empty() {
            return ctx
                .error("ERR CLUSTER RESET can't be called with master nodes containing keys");
        }
        // `clusterReset`.
        if !cl.i_am_master() {
            let me = cl.state.myself;
            cl.set_node_as_master(&me);
            ctx.srv.replicaof_no_one();
            let db = ctx.client.db;
            let _ = db;
            ctx.srv.keyspace.dbs[0].clear();
        }
        cl.migrating.clear();
        cl.importing.clear();
        reset_manual_failover(ctx.srv, cl);
        for s in 0..SLOTS as u16 {
            cl.state.unassign(s);
        }
        let others: Vec<Name> = cl
            .state
            .nodes
            .keys()
            .filter(|n| **n != cl.state.myself)
            .copied()
            .collect();
        for n in others {
            cl.del_node(&n, ctx.srv.repl.registry.as_ref());
        }
        if hard {
            cl.state.current_epoch = 0;
            cl.state.last_vote_epoch = 0;
            cl.me_mut().config_epoch = 0;
            let old = cl.state.myself;
            let new = super::random_name(&mut ctx.srv.rng);
            cl.rename_node(&old, new);
            cl.state.rename_myself(new);
            info!("Node hard reset, now I'm {}", name_str(&new));
        }
        cl.todo_save = true;
        cl.todo_update_state = true;
        ctx.client.out.ok();
    })
}

fn setslot(ctx: &mut Ctx, args: Args) {
    with(ctx, |ctx, cl| {
        if !cl.i_am_master() {
            return ctx.error("ERR Please use SETSLOT only with masters.");
        }
        let Some(slot) = parse_slot(args.get(2)) else {
            return ctx.error("ERR Invalid or out of range slot");
        };
        let me = cl.state.myself;
        let action = args.get(3);
        let target = |cl: &Cluster| {
            (args.len() == 5)
                .then(|| node_name(args.get(4)))
                .flatten()
                .filter(|n| cl.state.nodes.contains_key(n))
        };
        let owner = cl.state.owner(slot);
        let migrating = is(action, "migrating");
        if (migrating || is(action, "importing")) && args.len() == 5 {
            if migrating && owner != Some(me) {
                return ctx.error(&format!("ERR I'm not the owner of hash slot {slot}"));
            }
            if !migrating && owner == Some(me) {
                return ctx.error(&format!("ERR I'm already the owner of hash slot {slot}"));
            }
            let Some(n) = target(cl) else {
                return ctx.error(&format!(
                    "ERR I don't know about node {}",
                    String::from_utf8_lossy(args.get(4))
                ));
            };
            if !cl.state.nodes[&n].is_master() {
                return ctx.error("ERR Target node is not a master");
            }
            if migrating {
                cl.migrating.insert(slot, n);
            } else {
                cl.importing.insert(slot, n);
            }
        } else if is(action, "stable") && args.len() == 4 {
            cl.migrating.remove(&slot);
            cl.importing.remove(&slot);
        } else if is(action, "node") && args.len() == 5 {
            let Some(n) = target(cl) else {
                return ctx.error(&format!(
                    "ERR Unknown node {}",
                    String::from_utf8_lossy(args.get(4))
                ));
            };
            if !cl.state.nodes[&n].is_master() {
                return ctx.error("ERR Target node is not a master");
            }
            let keys = ctx.srv.keyspace.dbs[0].count_keys_in_slot(slot);
            if owner == Some(me) && n != me && keys != 0 {
                return ctx.error(&format!(
                    "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                ));
            }
            if keys == 0 {
                cl.migrating.remove(&slot);
            }
            let mut bump = false;
            if n == me && cl.importing.remove(&slot).is_some() {
                // The import is done: a new epoch makes our claim win
                // (`clusterBumpConfigEpochWithoutConsensus`).
                bump = true;
            }
            cl.state.assign(slot, n);
            if bump {
                if let Some(e) = cl.bump_epoch_without_consensus() {
                    info!("configEpoch updated after importing slot {slot}: {e}");
                }
                // Everyone hears it at once (`clusterBroadcastPong`).
                super::process::broadcast_pong(ctx.srv, cl, false);
            }
        } else {
            return ctx.error(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            );
        }
        cl.todo_save = true;
        cl.todo_update_state = true;
        ctx.client.out.ok();
    })
}

/// A node in CLUSTER SLOTS: endpoint, port, id, and the other addresses.
fn slots_node(ctx: &mut Ctx, cl: &Cluster, n: &Name) {
    let node = &cl.state.nodes[n];
    let pref = ctx.srv.config.cluster.preferred_endpoint_type.clone();
    let out = &mut ctx.client.out;
    out.array(4);
    match pref.as_str() {
        "ip" => out.bulk(node.ip.as_bytes()),
        "hostname" if !node.hostname.is_empty() => out.bulk(node.hostname.as_bytes()),
        _ => out.bulk(b"?"),
    }
    out.int(node.port as i64);
    out.bulk(&node.name);
    let with_ip = pref != "ip";
    let with_host = pref != "hostname" && !node.hostname.is_empty();
    out.map(with_ip as usize + with_host as usize);
    if with_ip {
        out.bulk(b"ip");
        out.bulk(node.ip.as_bytes());
    }
    if with_host {
        out.bulk(b"hostname");
        out.bulk(node.hostname.as_bytes());
    }
}

fn slots(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        let ranges: Vec<(u16, u16, Name)> = cl
            .state
            .owner_runs()
            .filter_map(|(at, n, o)| Some((at as u16, (at + n - 1) as u16, o?)))
            .collect();
        ctx.client.out.array(ranges.len());
        for (a, b, o) in ranges {
            let reps: Vec<Name> = cl
                .replicas_of(&o)
                .into_iter()
                .filter(|r| !cl.state.nodes[r].has(node_flags::FAIL))
                .collect();
            let out = &mut ctx.client.out;
            out.array(3 + reps.len());
            out.int(a as i64);
            out.int(b as i64);
            slots_node(ctx, cl, &o);
            for r in reps {
                slots_node(ctx, cl, &r);
            }
        }
    })
}

/// One node of CLUSTER SHARDS (`addNodeDetailsToShardReply`).
fn shard_node(ctx: &mut Ctx, cl: &Cluster, n: &Name) {
    let node = &cl.state.nodes[n];
    let me = cl.state.myself;
    let tls = ctx.srv.config.tls.port != 0 && ctx.srv.config.tls.cluster;
    let pref = ctx.srv.config.cluster.preferred_endpoint_type.clone();
    let offset = if *n == me {
        ctx.srv.repl.master_repl_offset.max(0) as u64
    } else {
        node.repl_offset
    };
    let health = if node.has(node_flags::FAIL | node_flags::PFAIL) {
        "fail"
    } else if !node.is_master() && node.repl_offset == 0 && *n != me {
        "loading"
    } else {
        "online"
    };
    let endpoint = match pref.as_str() {
        "ip" => node.ip.clone(),
        "hostname" if !node.hostname.is_empty() => node.hostname.clone(),
        _ => "?".into(),
    };
    let hostname = !node.hostname.is_empty();
    let out = &mut ctx.client.out;
    out.map(7 + hostname as usize);
    out.bulk(b"id");
    out.bulk(&node.name);
    out.bulk(if tls { b"tls-port" } else { b"port" });
    out.int(node.port as i64);
    out.bulk(b"ip");
    out.bulk(node.ip.as_bytes());
    out.bulk(b"endpoint");
    out.bulk(endpoint.as_bytes());
    if hostname {
        out.bulk(b"hostname");
        out.bulk(node.hostname.as_bytes());
    }
    out.bulk(b"role");
    out.bulk(if node.is_master() {
        b"master"
    } else {
        b"replica"
    });
    out.bulk(b"replication-offset");
    out.int(offset as i64);
    out.bulk(b"health");
    out.bulk(health.as_bytes());
}

fn shards(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        let mut masters: Vec<Name> = cl
            .state
            .nodes
            .values()
            .filter(|n| n.is_master())
            .map(|n| n.name)
            .collect();
        masters.sort();
        ctx.client.out.array(masters.len());
        for m in masters {
            let ranges = super::nodes::slot_ranges(&cl.state.nodes[&m].slots);
            let reps = cl.replicas_of(&m);
            let out = &mut ctx.client.out;
            out.map(2);
            out.bulk(b"slots");
            out.array(ranges.len() * 2);
            for (a, b) in ranges {
                out.int(a as i64);
                out.int(b as i64);
            }
            out.bulk(b"nodes");
            out.array(1 + reps.len());
            shard_node(ctx, cl, &m);
            for r in reps {
                shard_node(ctx, cl, &r);
            }
        }
    })
}

fn links(ctx: &mut Ctx, _args: Args) {
    with(ctx, |ctx, cl| {
        let now = super::process::now_ms();
        let rows: Vec<_> = cl
            .links
            .links
            .iter()
            .filter_map(|(_, l)| {
                let (dir, n) = match (l.node, l.inbound_of) {
                    (Some(n), _) => ("to", n),
                    (None, Some(n)) => ("from", n),
                    _ => return None,
                };
                Some((dir, n, l.ctime_ms, l.pending_out(), l.out_capacity()))
            })
            .collect();
        let _ = now;
        let out = &mut ctx.client.out;
        out.array(rows.len());
        for (dir, n, ctime, used, alloc) in rows {
            out.map(6);
            out.bulk(b"direction");
            out.bulk(dir.as_bytes());
            out.bulk(b"node");
            out.bulk(&n);
            out.bulk(b"create-time");
            out.int(ctime as i64);
            out.bulk(b"events");
            out.bulk(if used > 0 { b"rw" } else { b"r" });
            out.bulk(b"send-buffer-allocated");
            out.int(alloc as i64);
            out.bulk(b"send-buffer-used");
            out.int(used as i64);
        }
    })
}
