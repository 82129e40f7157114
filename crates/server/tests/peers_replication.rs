//! Replication, files and DUMP payloads between ferrokv and the newer
//! servers of `../shared/peers/` (issue #42 item 4): Redis 7.2.6 and 7.4.1
//! (RDB versions 11 and 12) and Valkey 8.0.1 (version 11, listpack sets,
//! streams v3). ferrokv follows each as a replica (full sync, the stream,
//! a partial resync after the link drops) and serves each as a master,
//! with equal `DEBUG DIGEST`s; hashes whose fields carry TTLs (Redis 7.4)
//! replicate both ways with Redis 7.4.1, by full sync (RDB types 24 and 25),
//! the stream (`HPEXPIREAT`, `HPERSIST`, the `HDEL`s of expired fields) and
//! partial resync. Each peer is skipped with a printed line where this
//! clone has none.
mod common;

use common::repl::{digest, fill_dataset, info, num, wait_converged, Types};
use common::{wait_for, Peer, ServerProcess};
use ferrokv_resp::Frame;

const PEERS: [Peer; 3] = [Peer::Redis72, Peer::Redis74, Peer::Valkey80];

const ALL: Types = Types {
    hash: true,
    list: true,
    set: true,
    zset: true,
};

fn ferrokv(extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    ServerProcess::ferrokv(&args)
}

/// Streams with consumer groups and deleted entries (streams v3 in the
/// newer files), and more writes for the stream after the sync.
fn streams(p: &ServerProcess, tag: &str) {
    let mut r = p.raw();
    for i in 1..40 {
        let id = format!("{i}-1");
        r.cmd(&["XADD", &format!("st:{tag}"), &id, "f", &format!("v{i}")]);
    }
    r.cmd(&["XDEL", &format!("st:{tag}"), "3-1"]);
    r.cmd(&["XGROUP", "CREATE", &format!("st:{tag}"), "g", "0"]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "COUNT",
        "5",
        "STREAMS",
        &format!("st:{tag}"),
        ">",
    ]);
    r.cmd(&["SADD", &format!("set:{tag}"), "alpha", "beta", "7"]);
    r.cmd(&["HSET", &format!("hash:{tag}"), "a", "1", "b", "2"]);
}

fn link_up(replica: &ServerProcess) {
    wait_for("the link up", 60, || {
        (info(replica, "replication", "master_link_status") == "up").then_some(())
    });
}

/// Drops the replica's link (its master client killed on the master's
/// side) and waits for it to come back by a partial resync.
fn partial_resync(master: &ServerProcess, replica: &ServerProcess) {
    let before = num(master, "stats", "sync_partial_ok");
    let mut m = master.raw();
    let killed = m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(
        killed,
        Frame::Integer(1),
        "{} -> {}",
        master.name,
        replica.name
    );
    wait_for("a partial resync", 60, || {
        (num(master, "stats", "sync_partial_ok") > before).then_some(())
    });
    link_up(replica);
}

#[test]
fn ferrokv_follows_each_newer_master() {
    for peer in PEERS {
        let Some(master) = ServerProcess::peer(peer, &[]) else {
            continue;
        };
        fill_dataset(&master, 300, false, ALL);
        streams(&master, "before");
        let replica = ferrokv(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        wait_converged(&master, &replica, 60);
        // The stream after the full sync, then a partial resync.
        streams(&master, "after");
        fill_dataset(&master, 50, false, ALL);
        wait_converged(&master, &replica, 60);
        partial_resync(&master, &replica);
        streams(&master, "resumed");
        wait_converged(&master, &replica, 60);
        assert_eq!(digest(&master), digest(&replica), "{}", peer.name());
    }
}

#[test]
fn each_newer_server_follows_ferrokv() {
    for peer in PEERS {
        let master = ferrokv(&[]);
        fill_dataset(&master, 300, false, ALL);
        streams(&master, "before");
        let Some(replica) = ServerProcess::peer(
            peer,
            &["--replicaof", "127.0.0.1", &master.port.to_string()],
        ) else {
            continue;
        };
        wait_converged(&master, &replica, 60);
        streams(&master, "after");
        wait_converged(&master, &replica, 60);
        partial_resync(&master, &replica);
        streams(&master, "resumed");
        wait_converged(&master, &replica, 60);
    }
}

/// Hashes with field TTLs: a listpackex, a hashtable, deadlines far ahead
/// and some a few hundred ms ahead (their HDELs follow in the stream).
fn field_ttls(p: &ServerProcess, tag: &str) {
    let mut r = p.raw();
    for i in 0..30 {
        let key = format!("ttl:{tag}:{i}");
        let long = "v".repeat(if i % 3 == 0 { 80 } else { 3 });
        r.cmd(&["HSET", &key, "a", "1", "b", &long, "c", "3", "d", "4"]);
        let at = format!("{}", 4102444800000u64 + i * 1000);
        r.cmd(&["HPEXPIREAT", &key, &at, "FIELDS", "2", "a", "b"]);
        if i % 5 == 0 {
            r.cmd(&["HPEXPIRE", &key, "300", "FIELDS", "1", "c"]);
        }
        if i % 7 == 0 {
            r.cmd(&["HPERSIST", &key, "FIELDS", "1", "a"]);
        }
    }
}

fn deadlines(p: &ServerProcess, tag: &str) -> Vec<Frame> {
    let mut r = p.raw();
    (0..30)
        .map(|i| {
            r.cmd(&[
                "HPEXPIRETIME",
                &format!("ttl:{tag}:{i}"),
                "FIELDS",
                "4",
                "a",
                "b",
                "c",
                "d",
            ])
        })
        .collect()
}

#[test]
fn field_ttls_replicate_both_ways_with_redis_7_4() {
    for ferrokv_is_master in [true, false] {
        let (master, replica) = if ferrokv_is_master {
            let m = ferrokv(&[]);
            field_ttls(&m, "full");
            let Some(r) = ServerProcess::peer(
                Peer::Redis74,
                &["--replicaof", "127.0.0.1", &m.port.to_string()],
            ) else {
                return;
            };
            (m, r)
        } else {
            let Some(m) = ServerProcess::peer(Peer::Redis74, &[]) else {
                return;
            };
            field_ttls(&m, "full");
            let r = ferrokv(&["--replicaof", "127.0.0.1", &m.port.to_string()]);
            (m, r)
        };
        wait_converged(&master, &replica, 60);
        field_ttls(&master, "stream");
        // The short TTLs run out on the master; its HDELs converge them.
        wait_for("the short TTLs gone", 60, || {
            (num(&master, "stats", "expired_subkeys") >= 12).then_some(())
        });
        wait_converged(&master, &replica, 60);
        partial_resync(&master, &replica);
        field_ttls(&master, "resumed");
        wait_converged(&master, &replica, 60);
        for tag in ["full", "stream", "resumed"] {
            assert_eq!(
                deadlines(&master, tag),
                deadlines(&replica, tag),
                "{} -> {} ({tag})",
                master.name,
                replica.name
            );
        }
    }
}

#[test]
fn dump_payloads_of_the_newer_servers_restore() {
    for peer in PEERS {
        let Some(p) = ServerProcess::peer(peer, &[]) else {
            continue;
        };
        fill_dataset(&p, 20, false, ALL);
        streams(&p, "d");
        let f = ferrokv(&[]);
        let (mut pr, mut fr) = (p.raw(), f.raw());
        let Frame::Array(keys) = pr.cmd(&["KEYS", "*"]) else {
            panic!()
        };
        assert!(keys.len() > 50);
        for k in keys {
            let Frame::Bulk(k) = k else { panic!() };
            let Frame::Bulk(payload) = pr.cmd(&[b"DUMP".as_slice(), &k]) else {
                panic!()
            };
            // With its TTL: DIGEST-VALUE tells a volatile key apart.
            let ttl = match pr.cmd(&[b"PTTL".as_slice(), &k]) {
                Frame::Integer(t) if t > 0 => t.to_string(),
                _ => "0".to_string(),
            };
            assert_eq!(
                fr.cmd(&[b"RESTORE".as_slice(), &k, ttl.as_bytes(), &payload]),
                Frame::Simple(b"OK".to_vec()),
                "{} {}",
                peer.name(),
                String::from_utf8_lossy(&k)
            );
            assert_eq!(
                fr.cmd(&[b"DEBUG".as_slice(), b"DIGEST-VALUE", &k]),
                pr.cmd(&[b"DEBUG".as_slice(), b"DIGEST-VALUE", &k]),
                "{} {}",
                peer.name(),
                String::from_utf8_lossy(&k)
            );
        }
    }
}

#[test]
fn a_newer_servers_dump_rdb_loads_at_start() {
    for peer in PEERS {
        let Some(p) = ServerProcess::peer(peer, &[]) else {
            continue;
        };
        fill_dataset(&p, 200, false, ALL);
        streams(&p, "file");
        assert_eq!(p.raw().cmd(&["SAVE"]), Frame::Simple(b"OK".to_vec()));
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(p.dir.path().join("dump.rdb"), dir.path().join("dump.rdb")).unwrap();
        let f = ferrokv(&["--dir", dir.path().to_str().unwrap()]);
        assert_eq!(digest(&f), digest(&p), "{}", peer.name());
    }
}
