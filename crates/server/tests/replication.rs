//! Guards replication with Redis 7.0's protocol against real processes:
//! ferrokv → ferrokv, real redis-server → ferrokv and ferrokv → real
//! redis-server converge to the same `DEBUG DIGEST` after a full sync of a
//! data set (every type the server has, expiries, binary and 50 MB values)
//! and a write load; link drops end in partial resyncs; a lagging replica is
//! dropped by its output-buffer limit; `min-replicas-to-write`, `WAIT`, a
//! failover with `REPLICAOF NO ONE` (partial resync through `replid2`) and a
//! chained replica behave as Redis's do; consumer groups reach a ferrokv
//! replica as they reach a real one, from either master. Iteration counts
//! are fixed.
mod common;

use common::repl::*;
use common::{wait_for, wait_for_or, ServerProcess};
use std::time::{Duration, Instant};

fn redis(extra: &[&str]) -> ServerProcess {
    ServerProcess::redis(extra)
}

/// A command's error reply, byte for byte.
fn error_of(p: &ServerProcess, args: &[&str]) -> String {
    match p.raw().cmd(args) {
        ferrokv_resp::Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        other => panic!("{args:?} gave {other:?}, not an error"),
    }
}

/// Runs a command that may not exist yet in ferrokv (the collection types
/// land in parallel): `false` only for `ERR unknown command`.
fn try_cmd(c: &mut redis::Connection, args: &[&[u8]]) -> bool {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(_) => true,
        Err(e) if e.to_string().contains("unknown command") => false,
        Err(e) => panic!("{:?} failed: {e}", String::from_utf8_lossy(args[0])),
    }
}

/// A deterministic write load touching strings, expiries, deletes,
/// several databases and the collection types.
/// Waits out the 30 ms keys of `write_load`'s first `rounds` rounds and
/// reads them, so they are deleted (and the deletions propagated) now.
fn delete_expired_short_keys(c: &mut redis::Connection, rounds: usize) {
    std::thread::sleep(Duration::from_millis(100));
    for r in 0..rounds {
        let _: Option<String> = redis::cmd("GET")
            .arg(format!("short:{r}"))
            .query(c)
            .unwrap();
    }
}

fn write_load(port: u16, rounds: usize, seed: usize, t: Types) {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    for r in 0..rounds {
        let mut pipe = redis::pipe();
        for j in 0..50 {
            let i = (r * 50 + j) * 7 + seed;
            pipe.cmd("SET")
                .arg(format!("w:{}", i % 3000))
                .arg(format!("{r}-{j}"))
                .ignore();
            pipe.cmd("INCRBY")
                .arg(format!("ctr:{}", i % 17))
                .arg(3)
                .ignore();
            pipe.cmd("APPEND")
                .arg(format!("app:{}", i % 11))
                .arg("ab")
                .ignore();
            if j % 5 == 0 {
                pipe.cmd("DEL").arg(format!("k:{}", i % 500)).ignore();
                pipe.cmd("SET")
                    .arg(format!("ex:{}", i % 100))
                    .arg(r)
                    .arg("EX")
                    .arg(10_000)
                    .ignore();
                pipe.cmd("INCRBYFLOAT").arg("float").arg("0.25").ignore();
            }
        }
        pipe.cmd("SELECT").arg(2 + r % 3).ignore();
        pipe.cmd("SET").arg(format!("db-key:{r}")).arg(r).ignore();
        pipe.cmd("SELECT").arg(0).ignore();
        pipe.query::<()>(&mut c).unwrap();
        // A transaction (a MULTI/EXEC block in the stream) and keys that
        // expire during the load (DELs from lazy and active expiry).
        redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(format!("tx:{}", r % 7))
            .arg(r)
            .ignore()
            .cmd("INCR")
            .arg("tx:count")
            .ignore()
            .cmd("SET")
            .arg(format!("short:{r}"))
            .arg(r)
            .arg("PX")
            .arg(30)
            .ignore()
            .query::<()>(&mut c)
            .unwrap();
        if r >= 5 {
            let _: Option<String> = redis::cmd("GET")
                .arg(format!("short:{}", r - 5))
                .query(&mut c)
                .unwrap();
        }
        let k = format!("{}", r % 13);
        if t.hash {
            try_cmd(
                &mut c,
                &[b"HSET", b"h:load", k.as_bytes(), format!("{r}").as_bytes()],
            );
        }
        if t.list {
            try_cmd(&mut c, &[b"LPUSH", b"l:load", k.as_bytes()]);
        }
        if t.set {
            try_cmd(&mut c, &[b"SADD", b"s:load", k.as_bytes()]);
        }
        if t.zset {
            try_cmd(&mut c, &[b"ZINCRBY", b"z:load", b"1", k.as_bytes()]);
        }
    }
}

#[test]
fn ferrokv_master_to_ferrokv_replicas_in_both_framings() {
    let master = ferrokv(&["--repl-diskless-sync", "no"]);
    let t = types_of(&master);
    fill_dataset(&master, 3000, true, t);
    // Disk-based: `$<len>` from the saved file.
    let disk = ferrokv(&[]);
    replicaof(&disk, &master);
    wait_converged(&master, &disk, 60);
    // Diskless: `$EOF:<mark>` from the producer's chunks.
    let mut c = master.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let diskless = ferrokv(&[]);
    replicaof(&diskless, &master);
    wait_converged(&master, &diskless, 60);
    assert_eq!(num(&master, "stats", "sync_full"), 2);
    write_load(master.port, 40, 1, t);
    wait_converged(&master, &disk, 30);
    wait_converged(&master, &diskless, 30);

    // A read-only replica refuses writes, serves reads.
    let mut r = disk.client();
    assert_eq!(
        error_of(&disk, &["SET", "x", "1"]),
        "READONLY You can't write against a read only replica."
    );
    let v: String = redis::cmd("GET").arg("n:3").query(&mut r).unwrap();
    assert_eq!(v, (3 * 1_000_003 - 77).to_string());

    // ROLE and INFO on both sides.
    let role: (String, String, i64, String, i64) = redis::cmd("ROLE").query(&mut r).unwrap();
    assert_eq!(role.0, "slave");
    assert_eq!(role.1, "127.0.0.1");
    assert_eq!(role.2, master.port as i64);
    assert_eq!(role.3, "connected");
    // (The master's active expiry may have moved on since: at most its offset.)
    assert!(role.4 > 0 && role.4 <= num(&master, "replication", "master_repl_offset"));
    assert_eq!(num(&master, "replication", "connected_slaves"), 2);
    assert_eq!(info(&master, "replication", "role"), "master");
    let slave0 = info(&master, "replication", "slave0");
    assert!(slave0.contains("state=online"), "{slave0}");
    assert_eq!(
        info(&disk, "replication", "master_replid"),
        info(&master, "replication", "master_replid")
    );
    assert_eq!(info(&disk, "replication", "slave_read_only"), "1");
    assert_eq!(info(&disk, "replication", "master_sync_in_progress"), "0");
    assert_eq!(info(&master, "replication", "repl_backlog_active"), "1");

    // WAIT counts the replicas that acknowledged the write.
    // GETACK makes the replicas answer at once, not at their next
    // once-a-second ACK.
    for i in 0..5 {
        let _: () = redis::cmd("SET")
            .arg("waited")
            .arg(i)
            .query(&mut c)
            .unwrap();
        let t0 = Instant::now();
        let n: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut c).unwrap();
        assert_eq!(n, 2);
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
    }
    let t0 = Instant::now();
    let n: i64 = redis::cmd("WAIT").arg(3).arg(300).query(&mut c).unwrap();
    assert_eq!(n, 2);
    assert!(t0.elapsed() >= Duration::from_millis(250));
}

#[test]
fn wait_blocks_the_client_not_the_loop() {
    let master = ferrokv(&[]);
    let mut a = master.client();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut a).unwrap();
    let port = master.port;
    let waiter = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let t0 = Instant::now();
        let n: i64 = redis::cmd("WAIT").arg(1).arg(800).query(&mut c).unwrap();
        (n, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let pong: String = redis::cmd("PING").query(&mut a).unwrap();
    assert_eq!(pong, "PONG");
    assert!(t0.elapsed() < Duration::from_millis(300));
    let (n, took) = waiter.join().unwrap();
    assert_eq!(n, 0);
    assert!(took >= Duration::from_millis(700), "{took:?}");
    let e = redis::cmd("WAIT")
        .arg(1)
        .arg(-1)
        .query::<i64>(&mut a)
        .unwrap_err();
    assert!(e.to_string().contains("timeout is negative"), "{e}");
}

#[test]
fn redis_master_to_ferrokv_replica() {
    let master = redis(&["--repl-diskless-sync-delay", "0"]);
    let replica = ferrokv(&[]);
    let t = types_of(&replica);
    fill_dataset(&master, 3000, true, t);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    write_load(master.port, 40, 2, t);
    wait_converged(&master, &replica, 30);
    // Disk-based framing from a real master too.
    let mut m = master.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync")
        .arg("no")
        .query(&mut m)
        .unwrap();
    let second = ferrokv(&[]);
    replicaof(&second, &master);
    wait_converged(&master, &second, 60);

    // Streams replicate too: the XADD arrives with the ID the master
    // generated. (This was where an unimplemented command stopped the
    // link; a Redis 7.0 master now sends none that ferrokv lacks.)
    let id: String = redis::cmd("XADD")
        .arg("stream")
        .arg("*")
        .arg("f")
        .arg("v")
        .query(&mut m)
        .unwrap();
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &second, 30);
    let got: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("stream")
        .arg("-")
        .arg("+")
        .query(&mut replica.client())
        .unwrap();
    assert_eq!(got, vec![(id, vec![("f".to_string(), "v".to_string())])]);
}

#[test]
fn ferrokv_master_to_redis_replica() {
    let master = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    let t = types_of(&master);
    fill_dataset(&master, 3000, true, t);
    let replica = redis(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    write_load(master.port, 40, 3, t);
    wait_converged(&master, &replica, 30);
    let mut m = master.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync")
        .arg("no")
        .query(&mut m)
        .unwrap();
    let disk = redis(&[]);
    replicaof(&disk, &master);
    wait_converged(&master, &disk, 60);
    write_load(master.port, 10, 4, t);
    wait_converged(&master, &disk, 30);
    wait_converged(&master, &replica, 30);
    // The real replica acknowledges: WAIT sees both.
    let n: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut m).unwrap();
    assert_eq!(n, 2);
}

fn client_kill(p: &ServerProcess, kind: &str) -> i64 {
    let mut c = p.client();
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(kind)
        .query(&mut c)
        .unwrap()
}

#[test]
fn link_drops_mid_stream_end_in_partial_resyncs() {
    let master = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    let t = types_of(&master);
    fill_dataset(&master, 2000, false, t);
    let replica = ferrokv(&[]);
    let real = redis(&[]);
    replicaof(&replica, &master);
    replicaof(&real, &master);
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &real, 30);
    assert_eq!(num(&master, "stats", "sync_full"), 2);
    let port = master.port;
    let writer = std::thread::spawn(move || write_load(port, 120, 5, t));
    // Resyncs the master has served so far. Each kill, and the final
    // count, waits until the previous drop has ended in its resync
    // (counted on the master) and both links are up again. Flaky before
    // (#44, seen on a loaded CI machine: 8 partial resyncs of 9): the
    // replicas' own "up" was the only wait, and a replica whose link the
    // master has just cut still reports "up" (with equal offsets, once
    // the load has stopped) until it reads the EOF, so the count could
    // be read before the last drop's resync, and a kill could cut a link
    // already dead, making two drops one resync.
    let mut resyncs = 0;
    let settled = |resyncs: i64| {
        wait_for_or(
            "the last drop's resyncs, and both links up",
            30,
            || {
                (num(&master, "stats", "sync_full") + num(&master, "stats", "sync_partial_ok")
                    == 2 + resyncs
                    && num(&master, "replication", "connected_slaves") == 2
                    && info(&replica, "replication", "master_link_status") == "up"
                    && info(&real, "replication", "master_link_status") == "up")
                    .then_some(())
            },
            || format!("{}\n{}", master.log(), replica.log()),
        )
    };
    for i in 0..6 {
        std::thread::sleep(Duration::from_millis(100));
        settled(resyncs);
        if i % 2 == 0 {
            // From the replica's side: its master link.
            assert_eq!(client_kill(&replica, "master"), 1, "{}", replica.log());
            resyncs += 1;
        } else {
            // From the master's side: both replicas.
            assert_eq!(client_kill(&master, "replica"), 2, "{}", master.log());
            resyncs += 2;
        }
    }
    writer.join().unwrap();
    settled(resyncs);
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &real, 30);
    // Every drop ended in a partial resync: 3 of ours + 3×2 from the master.
    assert_eq!(num(&master, "stats", "sync_full"), 2);
    assert_eq!(num(&master, "stats", "sync_partial_ok"), 9);
}

#[test]
fn link_drops_mid_full_sync_end_in_a_full_sync() {
    // 2,000 keys at 1 ms each: the transfer takes about two seconds.
    let master = ferrokv(&[
        "--repl-diskless-sync-delay",
        "0",
        "--rdb-key-save-delay",
        "1000",
    ]);
    let t = types_of(&master);
    fill_dataset(&master, 2000, false, t);
    let replica = ferrokv(&["--key-load-delay", "100"]);
    replicaof(&replica, &master);
    for _ in 0..2 {
        wait_for("a transfer in progress", 10, || {
            (info(&replica, "replication", "master_sync_in_progress") == "1"
                && info(&master, "replication", "slave0").contains("send_bulk"))
            .then_some(())
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(client_kill(&master, "replica"), 1);
        // Nothing was loaded: the replica still has its old (empty) data.
        let mut r = replica.client();
        let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
        assert_eq!(n, 0);
    }
    let mut m = master.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg("0")
        .query(&mut m)
        .unwrap();
    write_load(master.port, 10, 6, t);
    wait_converged(&master, &replica, 60);
    assert_eq!(num(&master, "stats", "sync_full"), 3);
}

#[test]
fn lagging_replica_is_dropped_by_its_output_buffer_limit() {
    let master = ferrokv(&[
        "--repl-diskless-sync-delay",
        "0",
        "--client-output-buffer-limit",
        "replica 1mb 0 0",
    ]);
    let mut replica = ferrokv(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    let pid = replica.child.id().to_string();
    let sig = |s: &str| {
        assert!(std::process::Command::new("kill")
            .args([s, &pid])
            .status()
            .unwrap()
            .success())
    };
    sig("-STOP");
    let mut m = master.client();
    let value = vec![b'x'; 64 * 1024];
    for i in 0..600 {
        let _: () = redis::cmd("SET")
            .arg(format!("big:{}", i % 50))
            .arg(&value)
            .query(&mut m)
            .unwrap();
    }
    wait_for("the replica to be dropped", 10, || {
        (num(&master, "replication", "connected_slaves") == 0).then_some(())
    });
    sig("-CONT");
    assert!(
        num(
            &master,
            "stats",
            "client_output_buffer_limit_disconnections"
        ) >= 1
    );
    assert!(replica.alive());
    // It comes back and catches up (its offset fell out of the 1 MB backlog).
    wait_converged(&master, &replica, 30);
}

#[test]
fn min_replicas_to_write_refuses_writes_without_good_replicas() {
    let master = ferrokv(&[
        "--repl-diskless-sync-delay",
        "0",
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "10",
    ]);
    let mut m = master.client();
    assert_eq!(
        error_of(&master, &["SET", "a", "1"]),
        "NOREPLICAS Not enough good replicas to write."
    );
    let v: Option<String> = redis::cmd("GET").arg("a").query(&mut m).unwrap();
    assert_eq!(v, None);
    let replica = ferrokv(&[]);
    replicaof(&replica, &master);
    wait_for("a good replica", 20, || {
        redis::cmd("SET").arg("a").arg("1").query::<()>(&mut m).ok()
    });
    wait_converged(&master, &replica, 30);
}

#[test]
fn failover_promoted_replica_keeps_partial_resync_for_its_sibling_and_old_master() {
    // No PING in the stream during the test either (one between the last
    // convergence and the promotion would put the old master ahead too).
    let master = ferrokv(&[
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "3600",
    ]);
    let t = types_of(&master);
    fill_dataset(&master, 1000, false, t);
    let r1 = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    let r2 = ferrokv(&[]);
    replicaof(&r1, &master);
    replicaof(&r2, &master);
    wait_converged(&master, &r1, 30);
    wait_converged(&master, &r2, 30);
    write_load(master.port, 10, 7, t);
    // The load's `short:*` keys expire 30 ms after they are set, and each
    // expiry is a DEL in the stream: a planned failover starts once the old
    // master has stopped writing, so wait for the last of them (otherwise a
    // DEL the promoted replica never saw puts the old master ahead of it,
    // and its resync is rightly a full one).
    wait_for("the load's short keys to expire", 20, || {
        (num(&master, "stats", "expired_keys") >= 10).then_some(())
    });
    wait_converged(&master, &r1, 30);
    wait_converged(&master, &r2, 30);
    let old_id = info(&master, "replication", "master_replid");
    // A planned failover: the old master stops taking writes, the replica
    // is promoted, the sibling and then the old master follow it.
    let mut c1 = r1.client();
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut c1)
        .unwrap();
    assert_eq!(info(&r1, "replication", "role"), "master");
    assert_eq!(info(&r1, "replication", "master_replid2"), old_id);
    replicaof(&r2, &r1);
    wait_converged(&r1, &r2, 30);
    assert_eq!(num(&r1, "stats", "sync_partial_ok"), 1);
    assert_eq!(num(&r1, "stats", "sync_full"), 0);
    assert_eq!(
        info(&r2, "replication", "master_replid"),
        info(&r1, "replication", "master_replid")
    );
    let _: () = redis::cmd("SET")
        .arg("after-failover")
        .arg("1")
        .query(&mut c1)
        .unwrap();
    // The old master, demoted, continues from its own history: a partial
    // resync too.
    replicaof(&master, &r1);
    wait_converged(&r1, &master, 30);
    assert_eq!(num(&r1, "stats", "sync_partial_ok"), 2, "{}", r1.log());
    assert_eq!(num(&r1, "stats", "sync_full"), 0);
    assert_eq!(info(&master, "replication", "role"), "slave");
    write_load(r1.port, 5, 8, t);
    wait_converged(&r1, &r2, 30);
    wait_converged(&r1, &master, 30);
}

#[test]
fn chained_replica_receives_the_top_masters_exact_stream() {
    let master = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    let t = types_of(&master);
    fill_dataset(&master, 1000, false, t);
    let mid = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    // The leaf is configured with `replicaof` at start-up; it meets
    // -NOMASTERLINK until `mid` has synced, and retries.
    let leaf = ferrokv(&["--replicaof", "127.0.0.1", &mid.port.to_string()]);
    replicaof(&mid, &master);
    wait_converged(&master, &mid, 30);
    wait_converged(&mid, &leaf, 30);
    write_load(master.port, 20, 9, t);
    wait_converged(&master, &mid, 30);
    wait_converged(&mid, &leaf, 30);
    // The load's 30 ms keys go on expiring on the master after it ends, and
    // each expiry is a DEL in the stream: the leaf and the master agree
    // once none is left. (Flaky before: the leaf's offset and digest were
    // read once, and a key that expired on the master between those reads
    // and the master's own made the digests differ.) The master's offset
    // is read before and after the leaf's figures, so they are compared at
    // a point where the master did not change.
    wait_for_or(
        "the leaf to hold the master's data at the master's offset",
        30,
        || {
            let before = num(&master, "replication", "master_repl_offset");
            let leaf_offset = num(&leaf, "replication", "master_repl_offset");
            let (dl, dm) = (digest(&leaf), digest(&master));
            let after = num(&master, "replication", "master_repl_offset");
            (before == after && leaf_offset == after && dl == dm).then_some(())
        },
        || {
            format!(
                "--- master log\n{}\n--- leaf log\n{}",
                master.log(),
                leaf.log()
            )
        },
    );
    // Same history: the stream went through byte for byte (the offsets
    // and digests were compared above, where the master did not change;
    // not again here: flaky under load (#44), the master's stream goes on
    // after the wait — its PING every repl-ping-replica-period, the DEL of
    // a key of the load expiring later — and the leaf trails by that).
    let id = info(&master, "replication", "master_replid");
    assert_eq!(info(&mid, "replication", "master_replid"), id);
    assert_eq!(info(&leaf, "replication", "master_replid"), id);
}

#[test]
fn stale_reads_refused_when_asked_while_the_link_is_down() {
    let replica = ferrokv(&["--replica-serve-stale-data", "no"]);
    let mut c = replica.client();
    // A master that is not there: the link stays down.
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        error_of(&replica, &["GET", "a"]),
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
    );
    // INFO, ECHO, REPLICAOF still answer (flagged `stale`); PING is not,
    // in Redis 7.0.15 either (redis-server answers it MASTERDOWN too).
    assert_eq!(
        error_of(&replica, &["PING"]),
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
    );
    assert_eq!(
        replica.raw().cmd(&["ECHO", "x"]),
        ferrokv_resp::Frame::Bulk(b"x".to_vec())
    );
    let info: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap();
    assert!(info.contains("master_link_status:down"), "{info}");
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut c)
        .unwrap();
    let v: Option<String> = redis::cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(v, None);
}

#[test]
fn replication_figures_on_the_metrics_endpoint() {
    // A fresh metrics port at each start attempt (see common::FREE_PORT).
    let master = ferrokv(&[
        "--repl-diskless-sync-delay",
        "0",
        "--metrics-port",
        common::FREE_PORT,
    ]);
    let mport = master.free_port.expect("a metrics port");
    let t = types_of(&master);
    fill_dataset(&master, 500, false, t);
    let replica = ferrokv(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    write_load(master.port, 5, 10, t);
    wait_converged(&master, &replica, 30);
    let offset = num(&master, "replication", "master_repl_offset");
    let text = wait_for("the metrics to catch up", 10, || {
        let text = common::scrape_metrics(mport);
        let got: i64 = common::metric_value(&text, "ferrokv_replication_offset_bytes")?
            .parse()
            .ok()?;
        (got >= offset).then_some(text)
    });
    assert_eq!(
        common::metric_value(&text, "ferrokv_replication_connected_replicas").as_deref(),
        Some("1")
    );
    assert_eq!(
        common::metric_value(&text, "ferrokv_replication_full_syncs_total").as_deref(),
        Some("1")
    );
    assert_eq!(
        common::metric_value(&text, "ferrokv_replication_is_replica").as_deref(),
        Some("0")
    );
    let sent: f64 = common::metric_value(&text, "ferrokv_replication_rdb_sent_bytes_total")
        .unwrap()
        .parse()
        .unwrap();
    assert!(sent > 10_000.0, "{sent}");
    assert!(
        text.contains(&format!(
            "ferrokv_replication_replica_lag_seconds{{replica=\"127.0.0.1:{}\"}}",
            replica.port
        )),
        "{text}"
    );
}

#[test]
fn stopped_replica_during_a_diskless_sync_does_not_stall_the_master() {
    let master = ferrokv(&["--repl-diskless-sync-delay", "0", "--rdbcompression", "no"]);
    let mut m = master.client();
    // 80 values of 1 MB: 80 chunks, more than a subscriber's queue and the
    // socket buffers together.
    for i in 0..80u32 {
        let v: Vec<u8> = (0..1024 * 1024u32)
            .map(|j| (j.wrapping_mul(31) ^ i) as u8)
            .collect();
        let _: () = redis::cmd("SET")
            .arg(format!("mb:{i}"))
            .arg(v)
            .query(&mut m)
            .unwrap();
    }
    let replica = ferrokv(&[]);
    let pid = replica.child.id().to_string();
    replicaof(&replica, &master);
    wait_for("the transfer to start", 10, || {
        info(&master, "replication", "slave0")
            .contains("send_bulk")
            .then_some(())
    });
    assert!(std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    // The master goes on answering at once while the replica reads nothing.
    for _ in 0..20 {
        let t0 = Instant::now();
        let pong: String = redis::cmd("PING").query(&mut m).unwrap();
        assert_eq!(pong, "PONG");
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        let _: () = redis::cmd("SET")
            .arg("during")
            .arg("stop")
            .query(&mut m)
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    wait_converged(&master, &replica, 60);
}

#[test]
fn masterauth_lets_the_replica_in_and_a_wrong_one_is_reported() {
    let master = ferrokv(&["--requirepass", "s3cret", "--repl-diskless-sync-delay", "0"]);
    let mut m = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", master.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("guarded")
        .arg("yes")
        .query(&mut m)
        .unwrap();
    let wrong = ferrokv(&["--masterauth", "nope"]);
    replicaof(&wrong, &master);
    let good = ferrokv(&["--masterauth", "s3cret"]);
    replicaof(&good, &master);
    wait_for("the replica with the password to sync", 20, || {
        let mut r = good.client();
        redis::cmd("GET")
            .arg("guarded")
            .query::<Option<String>>(&mut r)
            .unwrap()
            .filter(|v| v == "yes")
    });
    let md: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut m).unwrap();
    assert_eq!(digest(&good), md);
    wait_for("the failed AUTH to show", 10, || {
        info(&wrong, "replication", "master_link_down_reason")
            .contains("Unable to AUTH to MASTER")
            .then_some(())
    });
    assert_eq!(info(&wrong, "replication", "master_link_status"), "down");
}

fn config_set(p: &ServerProcess, name: &str, value: &str) {
    let mut c = p.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(&mut c)
        .unwrap();
}

/// Old data on a replica, to see it kept (or replaced) by a sync.
fn put_old_data(p: &ServerProcess) -> String {
    let mut c = p.client();
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("old:{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    digest(p)
}

#[test]
fn diskless_load_modes_end_with_equal_digests() {
    // The option itself: Redis's name, values and error text.
    let master = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    assert_eq!(
        error_of(&master, &["CONFIG", "SET", "repl-diskless-load", "foo"]),
        "ERR CONFIG SET failed (possibly related to argument 'repl-diskless-load') - argument(s) must be one of the following: disabled, on-empty-db, swapdb"
    );
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("repl-diskless-load")
        .query(&mut master.client())
        .unwrap();
    assert_eq!(got, ["repl-diskless-load", "disabled"]);

    let t = types_of(&master);
    // The 50 MB value spans many received pieces.
    fill_dataset(&master, 3000, true, t);
    let from_socket = "from the socket as it arrives";
    // swapdb over old data, and on-empty-db on an empty replica: parsed
    // from the socket, no file written.
    let swapdb = ferrokv(&["--repl-diskless-load", "swapdb"]);
    put_old_data(&swapdb);
    let empty = ferrokv(&["--repl-diskless-load", "on-empty-db"]);
    // on-empty-db with data, and disabled: through a file.
    let not_empty = ferrokv(&["--repl-diskless-load", "on-empty-db"]);
    put_old_data(&not_empty);
    let disabled = ferrokv(&[]);
    for r in [&swapdb, &empty, &not_empty, &disabled] {
        replicaof(r, &master);
    }
    for r in [&swapdb, &empty, &not_empty, &disabled] {
        wait_converged(&master, r, 60);
    }
    for (r, streamed) in [
        (&swapdb, true),
        (&empty, true),
        (&not_empty, false),
        (&disabled, false),
    ] {
        assert_eq!(r.log().contains(from_socket), streamed, "{}", r.log());
        assert_eq!(r.dir.path().join("dump.rdb").exists(), !streamed);
    }
    // The `$<len>` framing of a disk-based master, parsed from the socket.
    config_set(&master, "repl-diskless-sync", "no");
    let disk_framed = ferrokv(&["--repl-diskless-load", "swapdb"]);
    put_old_data(&disk_framed);
    replicaof(&disk_framed, &master);
    wait_converged(&master, &disk_framed, 60);
    assert!(disk_framed.log().contains(from_socket));
    // And the stream keeps them equal afterwards.
    write_load(master.port, 20, 8, t);
    for r in [&swapdb, &empty, &not_empty, &disabled, &disk_framed] {
        wait_converged(&master, r, 30);
    }
}

#[test]
fn diskless_load_from_a_real_redis_master() {
    let real = redis(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let probe = ferrokv(&[]);
    let t = types_of(&probe);
    fill_dataset(&real, 2000, false, t);
    let replica = ferrokv(&["--repl-diskless-load", "swapdb"]);
    put_old_data(&replica);
    replicaof(&replica, &real);
    wait_converged(&real, &replica, 60);
    assert!(replica.log().contains("from the socket as it arrives"));
}

#[test]
fn diskless_load_keeps_the_old_data_when_the_link_drops_mid_transfer() {
    // About 2,000 keys at 1 ms each: the transfer takes about two seconds.
    let master = ferrokv(&[
        "--repl-diskless-sync-delay",
        "0",
        "--rdb-key-save-delay",
        "1000",
    ]);
    let t = types_of(&master);
    fill_dataset(&master, 300, false, t);
    // 2 KB of noise per value (LZF cannot shrink it): the producer's 1 MiB
    // chunks go out every few hundred keys, so the replica has parsed part
    // of the payload when the link drops.
    let mut m = master.client();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..1500 {
        let v: Vec<u8> = (0..2000)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (x >> 56) as u8
            })
            .collect();
        let _: () = redis::cmd("SET")
            .arg(format!("big:{i}"))
            .arg(v)
            .query(&mut m)
            .unwrap();
    }
    let replica = ferrokv(&["--repl-diskless-load", "swapdb"]);
    let old = put_old_data(&replica);
    replicaof(&replica, &master);
    for _ in 0..2 {
        wait_for("part of the payload in", 20, || {
            (num(&replica, "replication", "master_sync_read_bytes") > 0).then_some(())
        });
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(client_kill(&master, "replica"), 1);
        wait_for("the failed transfer to be reported", 10, || {
            info(&replica, "replication", "master_sync_in_progress")
                .eq("0")
                .then_some(())
        });
        // The old data is intact and still served.
        assert_eq!(digest(&replica), old, "{}", replica.log());
        let n: i64 = redis::cmd("DBSIZE").query(&mut replica.client()).unwrap();
        assert_eq!(n, 10);
    }
    config_set(&master, "rdb-key-save-delay", "0");
    wait_converged(&master, &replica, 60);
    assert_eq!(num(&master, "stats", "sync_full"), 3);
    let n: i64 = redis::cmd("EXISTS")
        .arg("old:1")
        .query(&mut replica.client())
        .unwrap();
    assert_eq!(n, 0, "the master's data replaced the old data");
    let log = replica.log();
    assert_eq!(
        log.matches("MASTER <-> REPLICA sync failed").count(),
        2,
        "{log}"
    );
}

/// A master that serves each connection a full sync whose payload is
/// given by `payloads` (one per connection, in order), waiting for a go
/// from the test before it accepts the next connection.
fn fake_master(
    payloads: Vec<Vec<u8>>,
    go: std::sync::mpsc::Receiver<()>,
) -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let mut held = Vec::new();
        for (i, payload) in payloads.into_iter().enumerate() {
            if i > 0 && go.recv().is_err() {
                return;
            }
            let (s, _) = listener.accept().unwrap();
            let mut rd = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            // Each command of the handshake, answered in turn.
            loop {
                let mut line = String::new();
                rd.read_line(&mut line).unwrap();
                let n: usize = line.trim_start_matches('*').trim().parse().unwrap();
                let mut args = Vec::new();
                for _ in 0..n {
                    let mut len = String::new();
                    rd.read_line(&mut len).unwrap();
                    let len: usize = len.trim_start_matches('$').trim().parse().unwrap();
                    let mut arg = vec![0; len + 2];
                    rd.read_exact(&mut arg).unwrap();
                    arg.truncate(len);
                    args.push(String::from_utf8_lossy(&arg).to_uppercase());
                }
                match args[0].as_str() {
                    "PING" => w.write_all(b"+PONG\r\n").unwrap(),
                    "PSYNC" => break,
                    _ => w.write_all(b"+OK\r\n").unwrap(),
                }
            }
            let mark = "m".repeat(40);
            let id = "a".repeat(40);
            w.write_all(format!("+FULLRESYNC {id} 0\r\n$EOF:{mark}\r\n").as_bytes())
                .unwrap();
            w.write_all(&payload).unwrap();
            w.write_all(mark.as_bytes()).unwrap();
            held.push(w);
        }
        // Keep the last link open until the test ends.
        let _ = go.recv();
    });
    (port, h)
}

#[test]
fn diskless_load_installs_nothing_when_the_checksum_is_wrong() {
    let mut enc = ferrokv_rdb::RdbEncoder::new(Default::default());
    let mut rdb = Vec::new();
    enc.header(&mut rdb, &[(b"redis-ver", b"7.0.15")]);
    enc.select_db(&mut rdb, 0);
    for i in 0..500 {
        let v = format!("value-{i}-{}", "z".repeat(i % 50));
        enc.string_entry(&mut rdb, format!("new:{i}").as_bytes(), v.as_bytes(), None);
    }
    enc.finish(&mut rdb);
    // One bit of a value flipped: the file still parses, only the CRC
    // tells.
    let mut bad = rdb.clone();
    let at = bad.windows(9).position(|w| w == b"value-250").unwrap();
    bad[at] ^= 0x20;
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let (port, fake) = fake_master(vec![bad, rdb], go_rx);
    let replica = ferrokv(&["--repl-diskless-load", "swapdb"]);
    let old = put_old_data(&replica);
    let mut c = replica.client();
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .query(&mut c)
        .unwrap();
    wait_for("the checksum mismatch to be reported", 20, || {
        replica.log().contains("checksum mismatch").then_some(())
    });
    assert_eq!(digest(&replica), old);
    go_tx.send(()).unwrap();
    wait_for("the good payload to be installed", 20, || {
        (info(&replica, "replication", "master_link_status") == "up").then_some(())
    });
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 500);
    let v: String = redis::cmd("GET").arg("new:250").query(&mut c).unwrap();
    assert_eq!(v, format!("value-250-{}", "z".repeat(0)));
    drop(go_tx);
    fake.join().unwrap();
}

#[test]
fn master_restart_with_persistence_ends_in_a_correct_resync() {
    // A master with `appendfsync always` is killed with -9 and started again
    // on the same port and directory: it comes back with every
    // acknowledged write and a new replication history, and its replicas
    // (ours and a real redis-server) resync to it — nothing stale kept,
    // writes made after the restart included.
    let mut master = ferrokv(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let t = types_of(&master);
    fill_dataset(&master, 1000, false, t);
    let replica = ferrokv(&[]);
    let real = redis(&[]);
    replicaof(&replica, &master);
    replicaof(&real, &master);
    write_load(master.port, 10, 11, t);
    let mut c = master.client();
    let _: () = redis::cmd("SET")
        .arg("victim")
        .arg("v")
        .query(&mut c)
        .unwrap();
    // The load's 30 ms keys: expired (and deleted, lazily) before the
    // digest is taken, so the restart cannot differ by their expiry.
    delete_expired_short_keys(&mut c, 10);
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &real, 30);
    let before = digest(&master);
    let old_id = info(&master, "replication", "master_replid");
    master.kill_and_restart();
    assert_eq!(digest(&master), before, "{}", master.log());
    assert_ne!(info(&master, "replication", "master_replid"), old_id);
    // Writes right after the restart, some while the replicas reconnect.
    let mut c = master.client();
    let _: () = redis::cmd("SET")
        .arg("after-restart")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let deleted: i64 = redis::cmd("DEL").arg("victim").query(&mut c).unwrap();
    assert_eq!(deleted, 1);
    write_load(master.port, 5, 12, t);
    wait_converged(&master, &replica, 60);
    wait_converged(&master, &real, 60);
    assert_eq!(num(&master, "stats", "sync_full"), 2, "{}", master.log());
    let mut rc = replica.client();
    let gone: Option<String> = redis::cmd("GET").arg("victim").query(&mut rc).unwrap();
    assert!(gone.is_none());
}

#[test]
fn master_restarted_from_its_shutdown_snapshot_continues_its_history() {
    // As Redis 7 after SHUTDOWN: the snapshot carries the master's
    // replication id and offset, the restarted master keeps them as its
    // secondary history, and replicas that hold exactly that data continue
    // with a partial resync (ours and a real redis-server).
    let mut master = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    let t = types_of(&master);
    fill_dataset(&master, 1000, false, t);
    let replica = ferrokv(&[]);
    let real = redis(&[]);
    replicaof(&replica, &master);
    replicaof(&real, &master);
    write_load(master.port, 5, 21, t);
    let mut c = master.client();
    delete_expired_short_keys(&mut c, 5);
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &real, 30);
    // Saving lowers the change counter: none of these may be propagated
    // (a replica executing the master's SHUTDOWN would stop).
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    wait_converged(&master, &replica, 30);
    // The master has both replicas' ACKs of the whole stream: SHUTDOWN
    // then does not wait for them (that wait sends a GETACK, which would
    // move the offset read here).
    let offset = num(&master, "replication", "master_repl_offset");
    wait_for_or(
        "the replicas' ACKs",
        20,
        || {
            (0..2)
                .all(|i| {
                    info(&master, "replication", &format!("slave{i}"))
                        .contains(&format!(",offset={offset},"))
                })
                .then_some(())
        },
        || master.log(),
    );
    let id = info(&master, "replication", "master_replid");
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<()>(&mut c);
    master.kill_and_restart();
    std::thread::sleep(Duration::from_millis(300));
    assert!(master.alive(), "{}", master.log());
    assert_eq!(info(&master, "replication", "master_replid2"), id);
    assert_eq!(
        num(&master, "replication", "second_repl_offset"),
        offset + 1,
        "{}",
        master.log()
    );
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &real, 30);
    assert_eq!(
        num(&master, "stats", "sync_partial_ok"),
        2,
        "{}",
        master.log()
    );
    assert_eq!(num(&master, "stats", "sync_full"), 0);
    // The stream goes on from there (a SELECT first: the restarted master
    // does not know which database its replicas had selected).
    write_load(master.port, 5, 22, t);
    wait_converged(&master, &replica, 30);
    wait_converged(&master, &real, 30);
    let mut rc = replica.client();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut rc)
        .unwrap();
    // (DEBUG is counted there too: the digests asked of the replica.)
    for never in ["cmdstat_save:", "cmdstat_shutdown:"] {
        assert!(
            !stats.contains(never),
            "{never} reached the replica: {stats}"
        );
    }
}

#[test]
fn a_partial_resync_continues_in_the_database_the_stream_had_selected() {
    // The master emits SELECT only when the stream's database changes, so
    // after a partial resync the replica must apply the next commands in
    // the database selected before the drop (Redis keeps it in the cached
    // master client). Both masters: ours and a real redis-server.
    for master in [
        ferrokv(&["--repl-diskless-sync-delay", "0"]),
        redis(&["--repl-diskless-sync-delay", "0"]),
    ] {
        let replica = ferrokv(&[]);
        replicaof(&replica, &master);
        wait_converged(&master, &replica, 30);
        let mut c = master.client();
        let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
        let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
        wait_converged(&master, &replica, 30);
        let partial = num(&master, "stats", "sync_partial_ok");
        assert_eq!(client_kill(&replica, "master"), 1);
        wait_for("the partial resync", 20, || {
            (num(&master, "stats", "sync_partial_ok") == partial + 1
                && info(&replica, "replication", "master_link_status") == "up")
                .then_some(())
        });
        // Still database 3 on the master's side: no SELECT in the stream.
        let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut c).unwrap();
        wait_converged(&master, &replica, 30);
        let mut rc = replica.client();
        let _: () = redis::cmd("SELECT").arg(3).query(&mut rc).unwrap();
        let b: Option<String> = redis::cmd("GET").arg("b").query(&mut rc).unwrap();
        assert_eq!(b.as_deref(), Some("2"), "{}", master.name);
    }
}

#[test]
fn replica_restarted_on_its_snapshot_continues_with_a_partial_resync() {
    // As Redis 7: the replica's snapshot carries its master's id, its
    // offset and the stream's selected database; restarted on it, the
    // replica asks `PSYNC <id> <offset+1>` and the master continues —
    // in the database the stream had selected. Our master and a real one.
    for master in [
        ferrokv(&["--repl-diskless-sync-delay", "0"]),
        redis(&["--repl-diskless-sync-delay", "0"]),
    ] {
        let port = master.port.to_string();
        let mut replica = ferrokv(&["--replicaof", "127.0.0.1", &port]);
        let mut c = master.client();
        for i in 0..200 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(i)
                .query(&mut c)
                .unwrap();
        }
        let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
        let _: () = redis::cmd("SET").arg("x").arg("1").query(&mut c).unwrap();
        wait_converged(&master, &replica, 30);
        let mut rc = replica.client();
        let _: () = redis::cmd("SAVE").query(&mut rc).unwrap();
        replica.kill_and_restart();
        wait_for("the replica's link", 20, || {
            (info(&replica, "replication", "master_link_status") == "up").then_some(())
        });
        assert_eq!(num(&master, "stats", "sync_full"), 1, "{}", replica.log());
        assert_eq!(
            num(&master, "stats", "sync_partial_ok"),
            1,
            "{}",
            replica.log()
        );
        // No SELECT in the stream: the restored database takes it.
        let _: () = redis::cmd("SET").arg("y").arg("2").query(&mut c).unwrap();
        wait_converged(&master, &replica, 30);
        let mut rc = replica.client();
        let _: () = redis::cmd("SELECT").arg(3).query(&mut rc).unwrap();
        let y: Option<String> = redis::cmd("GET").arg("y").query(&mut rc).unwrap();
        assert_eq!(y.as_deref(), Some("2"), "{}", master.name);
    }
}

/// Consumer-group work on the stream `q` of `p`: every group command
/// Redis 7.0 propagates in its own form (XREADGROUP as XCLAIMs and
/// XGROUP SETID, XAUTOCLAIM's deletions, NOACK, a served blocked read).
fn group_load(p: &ServerProcess) {
    use ferrokv_resp::Frame;
    let mut r = p.raw();
    let mut ids = Vec::new();
    for i in 0..20 {
        match r.cmd(&["XADD", "q", "*", "n", &i.to_string()]) {
            Frame::Bulk(id) => ids.push(String::from_utf8(id).unwrap()),
            other => panic!("XADD gave {other:?}"),
        }
    }
    let ok = |f: Frame, what: &str| {
        assert!(!matches!(f, Frame::Error(_)), "{what}: {f:?}");
    };
    ok(r.cmd(&["XGROUP", "CREATE", "q", "g1", "0"]), "create g1");
    ok(r.cmd(&["XGROUP", "CREATE", "q", "g2", "$"]), "create g2");
    ok(
        r.cmd(&["XGROUP", "CREATE", "q", "g3", "0", "ENTRIESREAD", "3"]),
        "create g3",
    );
    ok(
        r.cmd(&["XGROUP", "CREATECONSUMER", "q", "g1", "idle-one"]),
        "createconsumer",
    );
    ok(
        r.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g1",
            "c1",
            "COUNT",
            "5",
            "STREAMS",
            "q",
            ">",
        ]),
        "read c1",
    );
    ok(
        r.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g1",
            "c2",
            "COUNT",
            "3",
            "NOACK",
            "STREAMS",
            "q",
            ">",
        ]),
        "noack",
    );
    ok(
        r.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g1",
            "c2",
            "COUNT",
            "4",
            "STREAMS",
            "q",
            ">",
        ]),
        "read c2",
    );
    ok(r.cmd(&["XACK", "q", "g1", &ids[0], &ids[1]]), "xack");
    ok(
        r.cmd(&[
            "XCLAIM",
            "q",
            "g1",
            "c3",
            "0",
            &ids[2],
            &ids[3],
            "RETRYCOUNT",
            "7",
        ]),
        "xclaim",
    );
    ok(
        r.cmd(&["XCLAIM", "q", "g1", "c3", "0", &ids[15], "FORCE", "JUSTID"]),
        "force",
    );
    // A pending entry deleted: XAUTOCLAIM drops it from the PEL.
    ok(r.cmd(&["XDEL", "q", &ids[9]]), "xdel");
    ok(
        r.cmd(&["XAUTOCLAIM", "q", "g1", "c4", "0", "0-0", "COUNT", "10"]),
        "xautoclaim",
    );
    ok(
        r.cmd(&["XGROUP", "SETID", "q", "g2", &ids[5], "ENTRIESREAD", "6"]),
        "setid",
    );
    ok(
        r.cmd(&["XGROUP", "DELCONSUMER", "q", "g1", "c2"]),
        "delconsumer",
    );
    ok(
        r.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g2",
            "d1",
            "COUNT",
            "2",
            "STREAMS",
            "q",
            ">",
        ]),
        "read g2",
    );
    ok(
        r.cmd(&["XREADGROUP", "GROUP", "g2", "d1", "STREAMS", "q", "0"]),
        "history",
    );
    ok(r.cmd(&["XGROUP", "DESTROY", "q", "g3"]), "destroy");
    // A blocked read served by the next XADD.
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g2",
        "d1",
        "COUNT",
        "1",
        "STREAMS",
        "q",
        ">",
    ]);
    let mut w = p.raw();
    r.cmd(&["XGROUP", "CREATE", "q", "late", "$"]);
    w.send(&Frame::command(&[
        "XREADGROUP",
        "GROUP",
        "late",
        "d2",
        "BLOCK",
        "0",
        "STREAMS",
        "q",
        ">",
    ]));
    wait_for("the reader blocked", 5, || {
        (num(p, "clients", "blocked_clients") == 1).then_some(())
    });
    ok(r.cmd(&["XADD", "q", "*", "n", "late"]), "xadd late");
    ok(w.read_frame(), "served");
    ok(r.cmd(&["XTRIM", "q", "MAXLEN", "15"]), "xtrim");
}

/// `XINFO STREAM q FULL` with the consumers' seen-times masked (a
/// replica sets them when it applies the command).
fn stream_full(p: &ServerProcess) -> ferrokv_resp::Frame {
    use ferrokv_resp::Frame;
    fn mask(f: &mut Frame) {
        if let Frame::Array(v) = f {
            for i in 0..v.len() {
                if i > 0 && v[i - 1] == Frame::Bulk(b"seen-time".to_vec()) {
                    v[i] = Frame::Integer(0);
                } else {
                    mask(&mut v[i]);
                }
            }
        }
    }
    let mut f = p.raw().cmd(&["XINFO", "STREAM", "q", "FULL"]);
    mask(&mut f);
    f
}

/// A reply as indented text, for a readable assertion message.
fn render(f: &ferrokv_resp::Frame, depth: usize, out: &mut String) {
    use ferrokv_resp::Frame;
    let pad = "  ".repeat(depth);
    match f {
        Frame::Array(v) => {
            out.push_str(&format!("{pad}[\n"));
            v.iter().for_each(|x| render(x, depth + 1, out));
            out.push_str(&format!("{pad}]\n"));
        }
        Frame::Bulk(b) => out.push_str(&format!("{pad}{}\n", String::from_utf8_lossy(b))),
        other => out.push_str(&format!("{pad}{other:?}\n")),
    }
}

fn text(f: &ferrokv_resp::Frame) -> String {
    let mut s = String::new();
    render(f, 0, &mut s);
    s
}

#[test]
fn consumer_groups_replicate_both_ways_with_redis() {
    // A real replica and a ferrokv replica of the same master end with
    // the same groups. They need not equal the master: Redis 7.0
    // propagates XREADGROUP as XCLAIM ... LASTID and XGROUP SETID, which
    // leave entries-read, lag and delivery counts on a replica different
    // from its master's (a real master and replica differ the same way).
    // A full sync carries the groups exactly (RDB type 21 both ways).
    for ferrokv_master in [true, false] {
        let master = if ferrokv_master {
            ferrokv(&["--repl-diskless-sync-delay", "0"])
        } else {
            redis(&["--repl-diskless-sync-delay", "0"])
        };
        let (real, ours) = (redis(&[]), ferrokv(&[]));
        replicaof(&real, &master);
        replicaof(&ours, &master);
        wait_converged(&master, &real, 30);
        wait_converged(&master, &ours, 30);
        group_load(&master);
        wait_converged(&master, &real, 30);
        wait_converged(&master, &ours, 30);
        let want = stream_full(&real);
        assert!(matches!(want, ferrokv_resp::Frame::Array(_)), "{want:?}");
        assert_eq!(
            text(&stream_full(&ours)),
            text(&want),
            "ferrokv master: {ferrokv_master}"
        );
        let (late_real, late_ours) = (redis(&[]), ferrokv(&[]));
        replicaof(&late_real, &master);
        replicaof(&late_ours, &master);
        wait_converged(&master, &late_real, 30);
        wait_converged(&master, &late_ours, 30);
        let want = text(&stream_full(&master));
        assert_eq!(text(&stream_full(&late_real)), want);
        assert_eq!(
            text(&stream_full(&late_ours)),
            want,
            "ferrokv master: {ferrokv_master}"
        );
    }
}

/// A master that accepts the connection and never answers the handshake:
/// past `repl-timeout` the replica gives up with Redis's words and
/// connects again (ours and a real redis-server, side by side).
#[test]
fn a_replica_gives_up_on_a_master_silent_in_the_handshake_and_retries() {
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    fake.set_nonblocking(true).unwrap();
    let port = fake.local_addr().unwrap().port().to_string();
    let args = ["--repl-timeout", "1", "--replicaof", "127.0.0.1", &port];
    // One after the other: each replica's connections are its own.
    for start in [ferrokv as fn(&[&str]) -> ServerProcess, redis] {
        let replica = start(&args);
        // Held open, never answered.
        let mut held = Vec::new();
        let accept = |held: &mut Vec<std::net::TcpStream>| match fake.accept() {
            Ok((s, _)) => {
                held.push(s);
                true
            }
            Err(_) => false,
        };
        wait_for_or(
            "the replica to connect",
            20,
            || accept(&mut held).then_some(()),
            || replica.log(),
        );
        wait_for_or(
            "the handshake timeout and a new connection",
            20,
            || {
                accept(&mut held);
                (held.len() >= 2).then_some(())
            },
            || replica.log(),
        );
        assert!(
            replica
                .log()
                .contains("Timeout connecting to the MASTER..."),
            "{}: {}",
            replica.name,
            replica.log()
        );
        assert_eq!(info(&replica, "replication", "master_link_status"), "down");
    }
}

/// `DEBUG CHANGE-REPL-ID` (Redis's replication tests use it): a new
/// replication id and no secondary history, on both servers.
#[test]
fn debug_change_repl_id_starts_a_new_history() {
    for start in [ferrokv as fn(&[&str]) -> ServerProcess, redis] {
        let s = start(&[]);
        let before = info(&s, "replication", "master_replid");
        let mut c = s.client();
        let r: String = redis::cmd("DEBUG")
            .arg("CHANGE-REPL-ID")
            .query(&mut c)
            .unwrap();
        assert_eq!(r, "OK");
        let after = info(&s, "replication", "master_replid");
        assert_eq!(after.len(), 40);
        assert_ne!(after, before, "{}", s.name);
        assert_eq!(info(&s, "replication", "master_replid2"), "0".repeat(40));
        assert_eq!(num(&s, "replication", "second_repl_offset"), -1);
    }
}

/// Keys a client writes with a TTL on a writable replica expire by the
/// replica's own cycle (Redis's `expireSlaveKeys`): nobody else would
/// delete them. Keys without a TTL, and the master's keys, stay. Ours and
/// a real redis-server.
#[test]
fn a_writable_replica_expires_the_keys_written_on_it() {
    for start in [ferrokv as fn(&[&str]) -> ServerProcess, redis] {
        let master = start(&[]);
        let replica = start(&[
            "--replica-read-only",
            "no",
            "--replicaof",
            "127.0.0.1",
            &master.port.to_string(),
        ]);
        let mut mc = master.client();
        let _: () = redis::cmd("SET")
            .arg("from-master")
            .arg("1")
            .query(&mut mc)
            .unwrap();
        let mut rc = replica.client();
        wait_for("the master's key on the replica", 20, || {
            // (An error while the replica loads: try again.)
            let v: Option<String> = redis::cmd("GET")
                .arg("from-master")
                .query(&mut rc)
                .unwrap_or(None);
            (v.as_deref() == Some("1")).then_some(())
        });
        let _: () = redis::cmd("SET")
            .arg("a")
            .arg("1")
            .arg("PX")
            .arg("100")
            .query(&mut rc)
            .unwrap();
        let _: () = redis::cmd("SETEX")
            .arg("b")
            .arg("1")
            .arg("x")
            .query(&mut rc)
            .unwrap();
        let _: () = redis::cmd("SET").arg("c").arg("1").query(&mut rc).unwrap();
        let _: i64 = redis::cmd("PEXPIRE")
            .arg("c")
            .arg("100")
            .query(&mut rc)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("d")
            .arg("stays")
            .query(&mut rc)
            .unwrap();
        wait_for_or(
            "the replica's own keys to expire",
            20,
            || {
                let n: i64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
                (n == 2).then_some(())
            },
            || replica.log(),
        );
        assert!(
            num(&replica, "stats", "expired_keys") >= 3,
            "{}",
            replica.name
        );
        let v: Option<String> = redis::cmd("GET").arg("d").query(&mut rc).unwrap();
        assert_eq!(v.as_deref(), Some("stays"));
        let v: Option<String> = redis::cmd("GET").arg("from-master").query(&mut rc).unwrap();
        assert_eq!(v.as_deref(), Some("1"));
    }
}
