//! Which node serves a command, as Redis 7.0's `getNodeByQuery`: every key
//! of the command (of the whole transaction, for EXEC) must hash to one
//! slot; that slot's owner serves it, unless it is migrating (a missing
//! key is asked of the target: `-ASK`) or importing (served after
//! `ASKING`). Replicas serve reads of their master's slots to `READONLY`
//! clients. The replies are Redis's `clusterRedirectClient` texts.

use super::bus::Name;
use super::Cluster;
use crate::commands::{flags, CommandSpec};
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::Args;
use ferrokv_store::slots::key_slot;

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";
pub const DOWN: &str = "CLUSTERDOWN The cluster is down";
pub const DOWN_RO: &str = "CLUSTERDOWN The cluster is down and only accepts read commands";
pub const UNBOUND: &str = "CLUSTERDOWN Hash slot not served";

/// How a command's keys are found, decided once per command row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// No keys: served anywhere, nothing to look at.
    Keyless,
    /// Keys at fixed positions (first, last — negative from the end —,
    /// step): read straight from the arguments.
    Fixed(i32, i32, i32),
    /// By the key specs and the command's own finder (and EXEC, shard
    /// channels).
    General,
}

impl Route {
    /// Names one key at most (SET, GET, INCR, ...).
    #[inline]
    pub fn single_key(self) -> bool {
        matches!(self, Route::Fixed(first, last, _) if first == last && first > 0)
    }
}

/// The route of every row of the command table.
pub fn routes(table: &crate::commands::CommandTable) -> Vec<Route> {
    table
        .specs
        .iter()
        .map(|spec| {
            if spec.name == "exec" || is_shard_pubsub(spec.name) {
                return Route::General;
            }
            let specs = crate::commands::keyspecs::of(spec.name);
            let keyless = spec.keys.0 == 0
                && specs.is_none_or(|s| {
                    s.iter()
                        .all(|k| k.flags & crate::commands::keyspecs::K_NOT_KEY != 0)
                });
            if keyless {
                return Route::Keyless;
            }
            fixed_route(spec).unwrap_or(Route::General)
        })
        .collect()
}

/// Key positions the command's key specs fix by themselves: each spec
/// begins at an index and takes a range, as most commands' one spec does;
/// single keys in consecutive positions (`RENAME`, `LMOVE`, `SMOVE`)
/// merge into one run. Only where the keys are matters here, not how they
/// are used (so `SET`'s variable flags do not matter, unlike for ACLs).
fn fixed_route(spec: &CommandSpec) -> Option<Route> {
    use crate::commands::keyspecs::{Begin, Find, K_INCOMPLETE, K_NOT_KEY};
    let mut run: Option<(i32, i32, i32)> = None;
    for s in crate::commands::keyspecs::of(spec.name)? {
        if s.flags & (K_NOT_KEY | K_INCOMPLETE) != 0 {
            return None;
        }
        let (
            Begin::Index(first),
            Find::Range {
                lastkey,
                keystep,
                limit: 0,
            },
        ) = (s.begin, s.find)
        else {
            return None;
        };
        if first <= 0 || keystep <= 0 {
            return None;
        }
        let last = if lastkey >= 0 {
            first + lastkey
        } else {
            lastkey
        };
        run = match run {
            None => Some((first, last, keystep)),
            Some((f, l, step))
                if l >= 0 && lastkey == 0 && first == l + 1 && (step == 1 || f == l) =>
            {
                Some((f, first, 1))
            }
            _ => return None,
        };
    }
    run.map(|(first, last, step)| Route::Fixed(first, last, step))
}

/// The keys of one call, without allocating on the fixed route.
enum Keys<'a> {
    Fixed {
        args: Args<'a>,
        at: usize,
        last: usize,
        step: usize,
    },
    List(std::vec::IntoIter<&'a [u8]>),
}

impl<'a> Iterator for Keys<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Keys::Fixed {
                args,
                at,
                last,
                step,
            } => {
                if *at > *last || *at >= args.len() {
                    return None;
                }
                let k = args.get(*at);
                *at += *step;
                Some(k)
            }
            Keys::List(it) => it.next(),
        }
    }
}

fn keys_by_route<'a>(route: Route, spec: &CommandSpec, args: Args<'a>) -> Keys<'a> {
    match route {
        Route::Fixed(first, last, step) => {
            let n = args.len() as i32;
            let last = if last < 0 { n + last } else { last };
            Keys::Fixed {
                args,
                at: first.max(1) as usize,
                last: last.max(0) as usize,
                step: step.max(1) as usize,
            }
        }
        Route::Keyless => Keys::List(Vec::new().into_iter()),
        Route::General => Keys::List(keys_of(spec, &args).into_iter()),
    }
}

/// The keys (or shard channels) of one command call.
fn keys_of<'a>(spec: &CommandSpec, args: &Args<'a>) -> Vec<&'a [u8]> {
    let argv: Vec<&[u8]> = args.iter().collect();
    let mut keys: Vec<&[u8]> = crate::commands::server::key_positions(spec, &argv)
        .into_iter()
        .map(|(i, _)| argv[i])
        .collect();
    // Shard channels route as keys (`SPUBLISH`, `SSUBSCRIBE`, ...).
    match spec.name {
        "spublish" if argv.len() > 1 => keys.push(argv[1]),
        "ssubscribe" | "sunsubscribe" => keys.extend(argv.iter().skip(1)),
        _ => {}
    }
    keys
}

fn is_shard_pubsub(name: &str) -> bool {
    matches!(name, "spublish" | "ssubscribe" | "sunsubscribe")
}

/// `Ok` when we serve the command here; else the error to reply.
pub fn check(
    srv: &Server,
    cl: &Cluster,
    client: &Client,
    idx: usize,
    cmd_flags: u32,
    args: &Args,
) -> Result<(), String> {
    let spec = srv.commands.specs[idx];
    let route = cl.routes.get(idx).copied().unwrap_or(Route::General);
    if matches!(route, Route::Fixed(..))
        && cl.ok
        && cl.migrating.is_empty()
        && cl.importing.is_empty()
    {
        if let Some(served) = served_here(cl, keys_by_route(route, spec, *args)) {
            return served;
        }
    }
    // The whole transaction at EXEC; each command alone when queued.
    let mut queued: Vec<(usize, u32, Args)> = Vec::new();
    let single = [(idx, cmd_flags, *args)];
    let calls: &[(usize, u32, Args)] = if spec.name == "exec" {
        let Some(tx) = client.multi.as_ref() else {
            return Ok(());
        };
        for q in &tx.queued {
            queued.push((q.idx, srv.commands.specs[q.idx].flags, q.args()));
        }
        &queued
    } else {
        &single
    };
    let me = cl.state.myself;
    let mut slot: Option<u16> = None;
    let mut owner: Option<Name> = None;
    let (mut migrating, mut importing) = (false, false);
    let (mut missing, mut existing) = (0usize, 0usize);
    let mut multiple_keys = false;
    let mut first_key: Option<&[u8]> = None;
    let mut is_write = false;
    let mut shard = false;
    for &(i, f, a) in calls {
        let s = srv.commands.specs[i];
        let route = cl.routes.get(i).copied().unwrap_or(Route::General);
        is_write |= f & flags::WRITE != 0;
        shard |= is_shard_pubsub(s.name);
        for key in keys_by_route(route, s, a) {
            let ks = key_slot(key);
            match slot {
                None => {
                    slot = Some(ks);
                    first_key = Some(key);
                    owner = cl.state.owner(ks);
                    let Some(o) = owner else {
                        // An unserved slot: down, for this key.
                        return Err(UNBOUND.into());
                    };
                    migrating = o == me && cl.migrating.contains_key(&ks);
                    importing = cl.importing.contains_key(&ks);
                }
                Some(prev) => {
                    if prev != ks {
                        return Err(CROSSSLOT.into());
                    }
                    if !multiple_keys && first_key != Some(key) {
                        multiple_keys = true;
                    }
                }
            }
            if (migrating || importing) && !is_shard_pubsub(s.name) {
                if srv.keyspace.dbs[0].get(key).is_some() {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
    }
    let Some(slot) = slot else {
        // No key at all: served anywhere.
        return Ok(());
    };
    if !cl.ok {
        if shard {
            if !srv.config.cluster.allow_pubsubshard_when_down {
                return Err(DOWN.into());
            }
        } else if !srv.config.cluster.allow_reads_when_down {
            return Err(DOWN.into());
        } else if is_write {
            return Err(DOWN_RO.into());
        }
    }
    let owner = owner.expect("a slot with keys has an owner here");
    // MIGRATE runs where the keys are.
    if (migrating || importing) && spec.name == "migrate" {
        return Ok(());
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Err(TRYAGAIN.into());
        }
        let target = cl.migrating[&slot];
        return Err(format!("ASK {slot} {}", endpoint(srv, cl, &target)));
    }
    if importing && (client.asking || spec.name == "restore-asking") {
        if multiple_keys && missing > 0 {
            return Err(TRYAGAIN.into());
        }
        return Ok(());
    }
    if client.readonly && !is_write && !cl.i_am_master() && cl.me().master == Some(owner) {
        return Ok(());
    }
    if owner != me {
        return Err(format!("MOVED {slot} {}", endpoint(srv, cl, &owner)));
    }
    Ok(())
}

/// The common case, decided without the owners table: the cluster is up,
/// no slot is moving, and the keys' one slot is ours (when all 16384 are,
/// a single key is not even hashed). `None` when the full check must
/// decide (another node's slot).
fn served_here<'a>(cl: &Cluster, mut keys: Keys<'a>) -> Option<Result<(), String>> {
    let Some(first) = keys.next() else {
        return Some(Ok(()));
    };
    let Some(second) = keys.next() else {
        return (cl.state.mine_all() || cl.state.is_mine(key_slot(first))).then_some(Ok(()));
    };
    let slot = key_slot(first);
    if !cl.state.is_mine(slot) {
        return None;
    }
    if key_slot(second) != slot || keys.any(|k| key_slot(k) != slot) {
        return Some(Err(CROSSSLOT.into()));
    }
    Some(Ok(()))
}

/// A command a script runs (`scriptVerifyClusterState`): its keys must be
/// served here and, unless the script allows cross-slot keys, hash to the
/// slot of the first key the script touched.
pub fn script_check(
    srv: &mut Server,
    client: &Client,
    idx: usize,
    args: &Args,
) -> Result<(), String> {
    let spec = srv.commands.specs[idx];
    let Some(cl) = srv.cluster.as_deref() else {
        return Ok(());
    };
    if let Err(e) = check(srv, cl, client, idx, spec.flags, args) {
        return Err(if e == DOWN_RO {
            "Script attempted to execute a write command while the cluster is down and readonly"
        } else if e.starts_with("CLUSTERDOWN") {
            "Script attempted to execute a command while the cluster is down"
        } else {
            "Script attempted to access a non local key in a cluster node"
        }
        .into());
    }
    let Some(slot) = keys_of(spec, args).first().map(|k| key_slot(k)) else {
        return Ok(());
    };
    if let Some(run) = srv.scripting.running.as_mut() {
        if !run.allow_cross_slot {
            match run.cluster_slot {
                None => run.cluster_slot = Some(slot),
                Some(s) if s != slot => {
                    return Err(
                        "Script attempted to access keys that do not hash to the same slot".into(),
                    )
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// `host:port` of a node as clients are told it
/// (`cluster-preferred-endpoint-type`).
pub fn endpoint(srv: &Server, cl: &Cluster, n: &Name) -> String {
    let Some(node) = cl.state.nodes.get(n) else {
        return "?:0".into();
    };
    let host = match srv.config.cluster.preferred_endpoint_type.as_str() {
        "hostname" if !node.hostname.is_empty() => node.hostname.clone(),
        "unknown-endpoint" => "?".into(),
        _ => node.ip.clone(),
    };
    format!("{host}:{}", node.port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::CommandTable;

    /// The fixed route finds exactly the keys the key specs do, for every
    /// command routed by it and every argument count its arity allows.
    #[test]
    fn fixed_routes_agree_with_the_key_specs() {
        let table = CommandTable::new();
        let routes = routes(&table);
        let mut fixed = 0;
        for (spec, route) in table.specs.iter().zip(&routes) {
            if !matches!(route, Route::Fixed(..)) {
                continue;
            }
            fixed += 1;
            for n in 1..=9usize {
                let ok = if spec.arity > 0 {
                    n == spec.arity as usize
                } else {
                    n >= (-spec.arity) as usize
                };
                if !ok {
                    continue;
                }
                let words: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
                let mut buf = Vec::new();
                let mut ranges = Vec::new();
                for w in &words {
                    ranges.push((buf.len(), w.len()));
                    buf.extend_from_slice(w.as_bytes());
                }
                let args = Args::new(&buf, &ranges);
                let mut by_route: Vec<&[u8]> = keys_by_route(*route, spec, args).collect();
                let mut by_specs = keys_of(spec, &args);
                by_route.sort();
                by_route.dedup();
                by_specs.sort();
                by_specs.dedup();
                assert_eq!(by_route, by_specs, "{} with {n} arguments", spec.name);
                // The single-key shortcut of `Server::execute` holds only
                // for routes that name one key at most.
                if let Route::Fixed(f, l, _) = *route {
                    if f == l && f > 0 {
                        assert!(by_specs.len() <= 1, "{} with {n} arguments", spec.name);
                    }
                }
            }
        }
        // SET (variable flags) and the two-key moves take the fixed route.
        for name in ["set", "get", "rename", "lmove", "smove", "mset", "del"] {
            let i = table.specs.iter().position(|s| s.name == name).unwrap();
            assert!(matches!(routes[i], Route::Fixed(..)), "{name}");
        }
        for name in ["set", "get", "incr", "hset", "lpush"] {
            let i = table.specs.iter().position(|s| s.name == name).unwrap();
            assert!(
                matches!(routes[i], Route::Fixed(1, 1, _)),
                "{name}: {:?}",
                routes[i]
            );
        }
        assert!(fixed > 150, "{fixed} commands on the fixed route");
    }
}
