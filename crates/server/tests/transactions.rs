//! Guards MULTI/EXEC/DISCARD/WATCH/UNWATCH: queue-time errors abort EXEC
//! with Redis's texts, runtime errors land in EXEC's array, WATCH breaks on
//! any client's write, on expiry and on FLUSHALL/SWAPDB (RESP2 `*-1`, RESP3
//! `_`), and EXEC reaches the AOF as one MULTI/EXEC block that a restart
//! replays (and reverts when the file ends inside it).
mod common;

use common::node::Node;
use common::{wait_for, ServerProcess};
use ferrokv_resp::Frame;
use std::time::Duration;

/// Runs `script` (space-separated commands) on one connection and returns
/// each reply's exact bytes.
fn replies(s: &ServerProcess, script: &[&str]) -> Vec<String> {
    let mut raw = s.raw();
    script
        .iter()
        .map(|line| {
            let args: Vec<&str> = line.split(' ').collect();
            let (_, bytes) = raw.try_cmd_bytes(&args).unwrap();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            // Client ids (in HELLO's reply) differ between two servers.
            let text = match text.split_once("$2\r\nid\r\n:") {
                Some((head, rest)) => {
                    format!("{head}id{}", &rest[rest.find('\r').unwrap_or(0)..])
                }
                None => text,
            };
            format!("{line} => {text}")
        })
        .collect()
}

/// Compares the script's replies byte for byte with the real redis-server.
fn same_as_redis(script: &[&str]) {
    let ours = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let a = replies(&ours, script);
    let b = replies(&redis, script);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
}

#[test]
fn transaction_replies_match_redis_byte_for_byte() {
    same_as_redis(&[
        "multi",
        "multi",
        "set a 1",
        "exec",
        "multi",
        "nosuch x",
        "set a",
        "get a",
        "exec",
        "exec",
        "discard",
        "multi",
        "watch a",
        "incr a",
        "set b x",
        "incr b",
        "incrby b notanumber",
        "exec",
        "exec a",
        "multi",
        "exec x",
        "multi",
        "save",
        "exec",
        "multi",
        "set c 1",
        "discard",
        "get c",
        "multi",
        "unwatch",
        "ping",
        "echo hi",
        "exec",
        "multi",
        "exec",
        "hello 3",
        "multi",
        "incr n",
        "get n",
        "exec",
        "multi",
        "subscribe ch",
        "ping",
        "exec",
        "get a",
        "exec",
        "reset",
        "get a",
    ]);
}

#[test]
fn watched_key_written_by_another_client_fails_exec_resp2_and_resp3() {
    let s = ServerProcess::ferrokv(&[]);
    for (proto, null) in [("2", &b"*-1\r\n"[..]), ("3", &b"_\r\n"[..])] {
        let mut a = s.raw();
        let mut b = s.raw();
        a.cmd(&["hello", proto]);
        assert_eq!(a.cmd(&["set", "k", "1"]), Frame::Simple("OK".into()));
        assert_eq!(a.cmd(&["watch", "k"]), Frame::Simple("OK".into()));
        // Untouched keys and reads by others do not matter.
        b.cmd(&["set", "other", "x"]);
        b.cmd(&["get", "k"]);
        a.cmd(&["multi"]);
        a.cmd(&["incr", "k"]);
        // The race: another client writes between WATCH and EXEC.
        assert_eq!(b.cmd(&["incr", "k"]), Frame::Integer(2));
        let (_, bytes) = a.try_cmd_bytes(&["exec"]).unwrap();
        assert_eq!(bytes, null, "RESP{proto}");
        assert_eq!(a.cmd(&["get", "k"]), Frame::Bulk(b"2".to_vec()));
        // EXEC unwatched everything: the next transaction runs.
        a.cmd(&["multi"]);
        a.cmd(&["incr", "k"]);
        b.cmd(&["incr", "k"]);
        let (_, bytes) = a.try_cmd_bytes(&["exec"]).unwrap();
        assert_eq!(bytes, b"*1\r\n:4\r\n");
    }
}

#[test]
fn watch_without_changes_lets_exec_run_and_unwatch_forgets() {
    let s = ServerProcess::ferrokv(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    a.cmd(&["watch", "k", "j"]);
    b.cmd(&["set", "unrelated", "1"]);
    a.cmd(&["multi"]);
    a.cmd(&["set", "k", "mine"]);
    assert_eq!(
        a.cmd(&["exec"]),
        Frame::Array(vec![Frame::Simple("OK".into())])
    );
    // UNWATCH: a later change no longer matters.
    a.cmd(&["watch", "k"]);
    a.cmd(&["unwatch"]);
    b.cmd(&["set", "k", "theirs"]);
    a.cmd(&["multi"]);
    a.cmd(&["get", "k"]);
    assert_eq!(
        a.cmd(&["exec"]),
        Frame::Array(vec![Frame::Bulk(b"theirs".to_vec())])
    );
    // DISCARD unwatches too.
    a.cmd(&["watch", "k"]);
    a.cmd(&["multi"]);
    a.cmd(&["discard"]);
    b.cmd(&["set", "k", "again"]);
    a.cmd(&["multi"]);
    a.cmd(&["get", "k"]);
    assert_eq!(
        a.cmd(&["exec"]),
        Frame::Array(vec![Frame::Bulk(b"again".to_vec())])
    );
    // A client's own write to a key it watches breaks its transaction.
    a.cmd(&["watch", "k"]);
    a.cmd(&["set", "k", "self"]);
    a.cmd(&["multi"]);
    a.cmd(&["get", "k"]);
    assert_eq!(a.cmd(&["exec"]), Frame::Null);
}

#[test]
fn watched_key_changed_by_every_kind_of_write_fails_exec() {
    let s = ServerProcess::ferrokv(&[]);
    let mut b = s.raw();
    let cases: &[(&[&str], &[&str])] = &[
        (&["set", "k", "1"], &["del", "k"]),
        (&["set", "k", "1"], &["expire", "k", "100"]),
        (&["set", "k", "1"], &["rename", "k", "z"]),
        (&["set", "z", "1"], &["rename", "z", "k"]),
        (&["set", "k", "1"], &["append", "k", "x"]),
        (&["set", "k", "1"], &["mset", "a", "1", "k", "2"]),
        (&["set", "k", "1"], &["move", "k", "1"]),
        (&["set", "k", "1"], &["flushall"]),
        (&["set", "k", "1"], &["flushdb"]),
        (&["set", "k", "1"], &["swapdb", "0", "1"]),
    ];
    for (setup, write) in cases {
        b.cmd(&["flushall"]);
        b.cmd(setup);
        let mut a = s.raw();
        a.cmd(&["watch", "k"]);
        a.cmd(&["multi"]);
        a.cmd(&["ping"]);
        b.cmd(write);
        assert_eq!(a.cmd(&["exec"]), Frame::Null, "{write:?}");
    }
    // SMOVE into a set that already holds the member changes only the source.
    b.cmd(&["flushall"]);
    b.cmd(&["sadd", "src", "m", "n"]);
    b.cmd(&["sadd", "k", "m"]);
    let mut a = s.raw();
    a.cmd(&["watch", "k"]);
    b.cmd(&["smove", "src", "k", "m"]);
    a.cmd(&["multi"]);
    a.cmd(&["ping"]);
    assert_eq!(
        a.cmd(&["exec"]),
        Frame::Array(vec![Frame::Simple("PONG".into())])
    );
    a.cmd(&["watch", "k"]);
    b.cmd(&["smove", "src", "k", "n"]);
    a.cmd(&["multi"]);
    a.cmd(&["ping"]);
    assert_eq!(a.cmd(&["exec"]), Frame::Null);
    // A FLUSHALL that removes nothing watched, or a failed write, is no change.
    for write in [&["flushall"][..], &["incr", "k"][..], &["del", "k"][..]] {
        b.cmd(&["flushall"]);
        b.cmd(&["set", "k", "text"]);
        b.cmd(&["select", "1"]);
        let mut a = s.raw();
        a.cmd(&["select", "0"]);
        a.cmd(&["watch", "nokey"]);
        a.cmd(&["watch", "k"]);
        a.cmd(&["multi"]);
        a.cmd(&["ping"]);
        // In db 1: touches nothing a watches in db 0 (INCR/DEL on db 1's k).
        b.cmd(write);
        b.cmd(&["select", "0"]);
        let r = a.cmd(&["exec"]);
        if write[0] == "flushall" {
            assert_eq!(r, Frame::Null, "flushall removes k");
        } else {
            assert_eq!(r, Frame::Array(vec![Frame::Simple("PONG".into())]));
        }
    }
}

#[test]
fn watched_key_that_expires_fails_exec_but_an_already_expired_one_does_not() {
    let s = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let mut a = s.raw();
    a.cmd(&["debug", "set-active-expire", "0"]);
    a.cmd(&["set", "k", "1", "px", "100"]);
    a.cmd(&["watch", "k"]);
    a.cmd(&["multi"]);
    a.cmd(&["ping"]);
    std::thread::sleep(Duration::from_millis(200));
    // Nobody touched the key: it only expired (Redis 7.0 counts that).
    assert_eq!(a.cmd(&["exec"]), Frame::Null);
    // Watched when already expired: its lazy deletion changes nothing.
    a.cmd(&["set", "j", "1", "px", "50"]);
    std::thread::sleep(Duration::from_millis(100));
    a.cmd(&["watch", "j"]);
    a.cmd(&["get", "j"]);
    a.cmd(&["multi"]);
    a.cmd(&["ping"]);
    assert_eq!(
        a.cmd(&["exec"]),
        Frame::Array(vec![Frame::Simple("PONG".into())])
    );
}

#[test]
fn flushes_and_swaps_do_not_fail_exec_for_a_key_already_expired_when_watched() {
    // Redis 7.0 treats a watched key that had expired before the WATCH as
    // already gone: FLUSHDB, FLUSHALL and SWAPDB do not touch it; a live
    // one, or one the swap brings, does fail the EXEC.
    let run = |s: &ServerProcess| -> Vec<Frame> {
        let mut out = Vec::new();
        let cases: &[(&[&[&str]], &[&str])] = &[
            (&[&["set", "k", "v", "px", "1"]], &["flushdb"]),
            (&[&["set", "k", "v", "px", "1"]], &["flushall"]),
            (&[&["set", "k", "v", "px", "1"]], &["swapdb", "0", "1"]),
            (&[&["set", "k", "v"]], &["flushdb"]),
            (&[], &["flushall"]),
            (
                &[&["select", "1"], &["set", "k", "v"]],
                &["swapdb", "0", "1"],
            ),
            (
                &[
                    &["set", "k", "v", "px", "1"],
                    &["select", "1"],
                    &["set", "k", "v", "px", "1"],
                ],
                &["swapdb", "0", "1"],
            ),
        ];
        for (setup, change) in cases {
            let (mut a, mut b) = (s.raw(), s.raw());
            b.cmd(&["flushall"]);
            b.cmd(&["debug", "set-active-expire", "0"]);
            for c in *setup {
                b.cmd(c);
            }
            std::thread::sleep(Duration::from_millis(20));
            a.cmd(&["watch", "k"]);
            b.cmd(change);
            a.cmd(&["multi"]);
            a.cmd(&["ping"]);
            out.push(a.cmd(&["exec"]));
            b.cmd(&["debug", "set-active-expire", "1"]);
        }
        out
    };
    let ours = run(&ServerProcess::ferrokv(&["--enable-debug-command", "yes"]));
    let redis = run(&ServerProcess::redis(&[]));
    assert_eq!(ours, redis);
    let pong = Frame::Array(vec![Frame::Simple("PONG".into())]);
    assert_eq!(
        ours,
        [
            &pong,
            &pong,
            &pong,
            &Frame::Null,
            &pong,
            &Frame::Null,
            &pong
        ]
        .map(|f| f.clone())
    );
}

#[test]
fn exec_meets_the_write_checks_of_the_moment_it_runs() {
    // Queued while writes were allowed; then min-replicas-to-write, a
    // maxmemory nothing can meet, or REPLICAOF refuse writes: an EXEC of
    // writes is aborted with the reason, one of reads runs.
    let run = |s: &ServerProcess| -> Vec<Frame> {
        let mut out = Vec::new();
        let changes: &[(&[&str], &[&str])] = &[
            (
                &["config", "set", "min-replicas-to-write", "1"],
                &["config", "set", "min-replicas-to-write", "0"],
            ),
            (
                &["config", "set", "maxmemory", "1"],
                &["config", "set", "maxmemory", "0"],
            ),
            (
                &["replicaof", "127.0.0.1", "1"],
                &["replicaof", "no", "one"],
            ),
        ];
        for (change, undo) in changes {
            for queue in [&["set", "a", "1"][..], &["get", "a"]] {
                let (mut a, mut b) = (s.raw(), s.raw());
                a.cmd(&["multi"]);
                a.cmd(queue);
                b.cmd(change);
                out.push(a.cmd(&["exec"]));
                b.cmd(undo);
            }
        }
        out
    };
    let ours = run(&ServerProcess::ferrokv(&[]));
    let redis = run(&ServerProcess::redis(&[]));
    assert_eq!(ours, redis);
    assert!(
        matches!(&ours[0], Frame::Error(e) if e.starts_with(b"EXECABORT Transaction discarded because of: NOREPLICAS")),
        "{ours:?}"
    );
}

#[test]
fn watched_key_removed_by_active_expiry_fails_exec() {
    let s = ServerProcess::ferrokv(&["--hz", "100"]);
    let mut a = s.raw();
    a.cmd(&["set", "k", "1", "px", "30"]);
    a.cmd(&["watch", "k"]);
    a.cmd(&["multi"]);
    a.cmd(&["ping"]);
    let mut b = s.raw();
    wait_for("active expiry", 5, || {
        (b.cmd(&["dbsize"]) == Frame::Integer(0)).then_some(())
    });
    assert_eq!(a.cmd(&["exec"]), Frame::Null);
}

#[test]
fn exec_is_not_in_the_slowlog_but_its_commands_are() {
    let s = ServerProcess::ferrokv(&["--slowlog-log-slower-than", "0"]);
    let mut c = s.raw();
    c.cmd(&["slowlog", "reset"]);
    c.cmd(&["multi"]);
    c.cmd(&["set", "a", "1"]);
    c.cmd(&["get", "a"]);
    c.cmd(&["exec"]);
    let Frame::Array(entries) = c.cmd(&["slowlog", "get"]) else {
        panic!()
    };
    let names: Vec<Frame> = entries
        .iter()
        .map(|e| match e {
            Frame::Array(parts) => match &parts[3] {
                Frame::Array(argv) => argv[0].clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    // Newest first; MULTI is logged as Redis logs it, EXEC is not.
    let b = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
    assert_eq!(names, vec![b("get"), b("set"), b("multi"), b("slowlog")]);
    let Frame::Array(info) = c.cmd(&["command", "info", "exec"]) else {
        panic!()
    };
    let Frame::Array(row) = &info[0] else {
        panic!()
    };
    let simple = |v: &[&str]| {
        Frame::Array(
            v.iter()
                .map(|s| Frame::Simple(s.as_bytes().to_vec()))
                .collect(),
        )
    };
    assert_eq!(
        row[2],
        simple(&["noscript", "loading", "stale", "skip_slowlog"])
    );
    assert_eq!(row[6], simple(&["@slow", "@transaction"]));
}

#[test]
fn client_list_shows_the_open_transaction() {
    let s = ServerProcess::ferrokv(&[]);
    let mut a = s.raw();
    a.cmd(&["multi"]);
    a.cmd(&["set", "a", "1"]);
    a.cmd(&["set", "b", "2"]);
    let mut b = s.raw();
    let Frame::Bulk(list) = b.cmd(&["client", "list"]) else {
        panic!()
    };
    let list = String::from_utf8(list).unwrap();
    assert!(
        list.contains(&format!("{} ", common::client_flags("x"))) && list.contains(" multi=2 "),
        "{list}"
    );
    assert!(
        list.contains(&format!("{} ", common::client_flags("N"))) && list.contains(" multi=-1 "),
        "{list}"
    );
}

#[test]
fn redis_crate_atomic_pipeline_and_watch_loop() {
    let s = ServerProcess::ferrokv(&[]);
    let mut c = s.client();
    let (a, b): (i64, String) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg("n")
        .arg(5)
        .cmd("SET")
        .arg("s")
        .arg("v")
        .ignore()
        .cmd("GET")
        .arg("s")
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b.as_str()), (5, "v"));
    // The optimistic-locking loop of the redis crate's docs, racing another
    // client that increments the same key: every increment survives.
    let racer_url = s.url();
    let racer = std::thread::spawn(move || {
        let mut c = redis::Client::open(racer_url)
            .unwrap()
            .get_connection()
            .unwrap();
        for _ in 0..200 {
            let _: i64 = redis::cmd("INCR").arg("counter").query(&mut c).unwrap();
        }
    });
    let mut retries = 0;
    for _ in 0..200 {
        loop {
            let _: () = redis::cmd("WATCH").arg("counter").query(&mut c).unwrap();
            let v: Option<i64> = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
            let r: Option<(String,)> = redis::pipe()
                .atomic()
                .set("counter", v.unwrap_or(0) + 1)
                .query(&mut c)
                .unwrap();
            if r.is_some() {
                break;
            }
            retries += 1;
        }
    }
    racer.join().unwrap();
    let v: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(v, 400, "after {retries} retries");
}

fn aof_incr_file(dir: &std::path::Path) -> Vec<u8> {
    let d = dir.join("appendonlydir");
    let mut names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".incr.aof"))
        .collect();
    names.sort();
    std::fs::read(d.join(names.last().expect("an incremental AOF file"))).unwrap()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn exec_reaches_the_aof_as_one_multi_exec_block_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    {
        let n = Node::start(dir.path(), &args);
        let mut c = n.client();
        let _: () = redis::cmd("SET")
            .arg("before")
            .arg("1")
            .query(&mut c)
            .unwrap();
        let _: (String, i64, i64) = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("a")
            .arg("x")
            .cmd("INCR")
            .arg("n")
            .cmd("GET")
            .arg("a")
            .ignore()
            .cmd("INCR")
            .arg("n")
            .query(&mut c)
            .unwrap();
        let size = aof_incr_file(dir.path()).len();
        // A read-only transaction and one whose only write failed
        // propagate nothing.
        let _: (Option<String>, i64) = redis::pipe()
            .atomic()
            .get("a")
            .exists("n")
            .query(&mut c)
            .unwrap();
        let _: redis::RedisResult<()> = redis::pipe().atomic().cmd("INCR").arg("a").query(&mut c);
        assert_eq!(aof_incr_file(dir.path()).len(), size);
        // One write alone is atomic by itself: no MULTI around it (Redis 7.0).
        let _: (i64,) = redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg("single")
            .query(&mut c)
            .unwrap();
        let aof = aof_incr_file(dir.path());
        let block = b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nx\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nEXEC\r\n";
        assert!(
            find(&aof, block).is_some(),
            "{}",
            String::from_utf8_lossy(&aof)
        );
        let single = find(&aof, b"*2\r\n$4\r\nINCR\r\n$6\r\nsingle\r\n").unwrap();
        assert_eq!(
            aof[single..].windows(5).filter(|w| w == b"MULTI").count(),
            0
        );
        assert_eq!(aof.windows(5).filter(|w| w == b"MULTI").count(), 1);
    }
    let n = Node::start(dir.path(), &args);
    let mut c = n.client();
    let got: (String, i64, i64) = redis::pipe()
        .get("a")
        .get("n")
        .get("single")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ("x".into(), 2, 1));
}

#[test]
fn a_transaction_cut_off_at_the_end_of_the_aof_is_reverted() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    {
        let n = Node::start(dir.path(), &args);
        let mut c = n.client();
        let _: () = redis::cmd("SET")
            .arg("kept")
            .arg("1")
            .query(&mut c)
            .unwrap();
    }
    // A crash after MULTI and one command reached the disk, before EXEC.
    let d = dir.path().join("appendonlydir");
    let incr = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .unwrap();
    let complete = std::fs::read(&incr).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .unwrap();
    use std::io::Write;
    f.write_all(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$1\r\n1\r\n")
        .unwrap();
    drop(f);
    let n = Node::start(dir.path(), &args);
    let mut c = n.client();
    let kept: Option<String> = redis::cmd("GET").arg("kept").query(&mut c).unwrap();
    let lost: Option<String> = redis::cmd("GET").arg("lost").query(&mut c).unwrap();
    assert_eq!((kept.as_deref(), lost), (Some("1"), None));
    // The file was cut back to before the MULTI, so later writes replay.
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let file = std::fs::read(&incr).unwrap();
    assert!(file.len() > complete && find(&file, b"MULTI").is_none());
    drop(n);
    let n = Node::start(dir.path(), &args);
    let mut c = n.client();
    let after: Option<String> = redis::cmd("GET").arg("after").query(&mut c).unwrap();
    assert_eq!(after.as_deref(), Some("1"));
}

/// Waits until `replica`'s link to its master is up.
fn link_up(replica: &ServerProcess) {
    wait_for("the replica's link", 20, || {
        (replica
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up"))
        .then_some(())
    });
}

#[test]
fn exec_and_publish_reach_ferrokv_and_redis_replicas() {
    let master = ServerProcess::ferrokv(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let replica = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let real = ServerProcess::redis(&[]);
    for r in [&replica, &real] {
        let mut c = r.raw();
        c.cmd(&["replicaof", "127.0.0.1", &master.port.to_string()]);
        link_up(r);
    }
    // A subscriber on the replica gets what is published on the master.
    let mut sub = replica.raw();
    sub.send(&Frame::command(&["subscribe", "news"]));
    sub.read_frames(1);
    let mut m = master.raw();
    m.cmd(&["multi"]);
    m.cmd(&["set", "a", "1"]);
    m.cmd(&["incr", "n"]);
    m.cmd(&["get", "a"]);
    assert_eq!(
        m.cmd(&["exec"]),
        Frame::Array(vec![
            Frame::Simple("OK".into()),
            Frame::Integer(1),
            Frame::Bulk(b"1".to_vec())
        ])
    );
    assert_eq!(m.cmd(&["publish", "news", "hi"]), Frame::Integer(0));
    assert_eq!(
        sub.read_frame(),
        Frame::Array(vec![
            Frame::Bulk(b"message".to_vec()),
            Frame::Bulk(b"news".to_vec()),
            Frame::Bulk(b"hi".to_vec())
        ])
    );
    let want = m.cmd(&["debug", "digest"]);
    assert!(matches!(want, Frame::Simple(_)), "{want:?}");
    for r in [&replica, &real] {
        let mut c = r.raw();
        wait_for("the transaction on the replica", 10, || {
            (c.cmd(&["debug", "digest"]) == want).then_some(())
        });
        assert_eq!(c.cmd(&["get", "n"]), Frame::Bulk(b"1".to_vec()));
    }
}
