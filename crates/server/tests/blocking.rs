//! Guards the blocking list commands with several real connections:
//! first-come-first-served fairness, timeouts (and their precision), wake-up
//! by a push, by RENAME, by MOVE into another database, by SWAPDB and by a served
//! BLMOVE, a waiter that disconnects, CLIENT UNBLOCK, the pipeline behind a
//! blocked command, INFO's blocked_clients, and the AOF seeing the
//! non-blocking forms of served pops.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same checks against the real
//! `redis-server`.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::{blocked_clients, wait_blocked};
use common::{wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::time::{Duration, Instant};

fn server(extra: &[&str]) -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(extra)
    } else {
        ServerProcess::ferrokv(extra)
    }
}

fn arr(v: &[&str]) -> Frame {
    Frame::Array(v.iter().map(|s| bulk(s)).collect())
}

/// Sends a command without reading its reply.
fn send(r: &mut Raw, args: &[&str]) {
    r.send(&Frame::command(args));
}

/// Asserts that nothing arrives on `r` for a short while.
fn assert_silent(r: &mut Raw) {
    r.s.set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    let mut b = [0u8; 1];
    let got = std::io::Read::read(&mut r.s, &mut b);
    assert!(got.is_err(), "unexpected reply byte {got:?} {b:?}");
    r.s.set_read_timeout(None).unwrap();
}

#[test]
fn first_blocked_is_first_served() {
    let s = server(&[]);
    let (mut c1, mut c2, mut c3, mut p) = (s.raw(), s.raw(), s.raw(), s.raw());
    send(&mut c1, &["BLPOP", "q", "0"]);
    wait_blocked(&s, 1);
    send(&mut c2, &["BRPOP", "other", "q", "0"]);
    wait_blocked(&s, 2);
    send(&mut c3, &["BLPOP", "q", "0"]);
    wait_blocked(&s, 3);
    assert_eq!(p.cmd(&["RPUSH", "q", "a", "b"]), int(2));
    assert_eq!(c1.read_frame(), arr(&["q", "a"]));
    assert_eq!(c2.read_frame(), arr(&["q", "b"]));
    assert_silent(&mut c3);
    assert_eq!(p.cmd(&["EXISTS", "q"]), int(0));
    assert_eq!(blocked_clients(&s), 1);
    assert_eq!(p.cmd(&["LPUSH", "q", "c"]), int(1));
    assert_eq!(c3.read_frame(), arr(&["q", "c"]));
    assert_eq!(blocked_clients(&s), 0);
    // Each BLPOP/BRPOP counts once, when it ended (as Redis 7.0 counts).
    let stats = s.info_field("commandstats", "cmdstat_blpop").unwrap();
    assert!(stats.starts_with("calls=2,"), "{stats}");
    let stats = s.info_field("commandstats", "cmdstat_brpop").unwrap();
    assert!(stats.starts_with("calls=1,"), "{stats}");
}

#[test]
fn data_already_there_is_served_without_blocking() {
    let s = server(&[]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["RPUSH", "b", "1", "2", "3"]), int(3));
    assert_eq!(r.cmd(&["BLPOP", "a", "b", "0"]), arr(&["b", "1"]));
    assert_eq!(r.cmd(&["BRPOP", "a", "b", "0"]), arr(&["b", "3"]));
    assert_eq!(
        r.cmd(&["BLMOVE", "b", "c", "LEFT", "RIGHT", "0"]),
        bulk("2")
    );
    assert_eq!(r.cmd(&["BRPOPLPUSH", "c", "d", "0"]), bulk("2"));
    assert_eq!(r.cmd(&["RPUSH", "e", "1", "2", "3"]), int(3));
    assert_eq!(
        r.cmd(&["BLMPOP", "0", "2", "a", "e", "RIGHT", "COUNT", "2"]),
        Frame::Array(vec![bulk("e"), arr(&["3", "2"])])
    );
    assert_eq!(r.cmd(&["SET", "str", "x"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(
        r.cmd(&["BLPOP", "str", "0"]),
        Frame::Error(b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec())
    );
}

#[test]
fn timeouts_answer_null_and_bad_timeouts_are_refused() {
    let s = server(&[]);
    let mut r = s.raw();
    for (cmd, want) in [
        (vec!["BLPOP", "nx", "0.1"], &b"*-1\r\n"[..]),
        (vec!["BRPOP", "nx", "0.05"], b"*-1\r\n"),
        (
            vec!["BLMOVE", "nx", "y", "LEFT", "LEFT", "0.05"],
            b"*-1\r\n",
        ),
        (vec!["BRPOPLPUSH", "nx", "y", "0.05"], b"*-1\r\n"),
        (vec!["BLMPOP", "0.05", "1", "nx", "LEFT"], b"*-1\r\n"),
    ] {
        let t0 = Instant::now();
        send(&mut r, &cmd);
        assert_eq!(r.recv_exact(want.len()), want, "{cmd:?}");
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(45),
            "{cmd:?} after {waited:?}"
        );
        assert!(
            waited < Duration::from_millis(600),
            "{cmd:?} after {waited:?}"
        );
    }
    let err = |s: &str| Frame::Error(s.as_bytes().to_vec());
    assert_eq!(
        r.cmd(&["BLPOP", "nx", "-1"]),
        err("ERR timeout is negative")
    );
    assert_eq!(
        r.cmd(&["BLPOP", "nx", "abc"]),
        err("ERR timeout is not a float or out of range")
    );
    assert_eq!(
        r.cmd(&["BLPOP", "nx", "inf"]),
        err("ERR timeout is negative")
    );
    assert_eq!(
        r.cmd(&["BLMOVE", "nx", "y", "UP", "LEFT", "abc"]),
        err("ERR syntax error")
    );
    assert_eq!(
        r.cmd(&["BLMPOP", "abc", "1", "nx", "LEFT", "COUNT", "0"]),
        err("ERR count should be greater than 0")
    );
    assert_eq!(
        r.cmd(&["BLMPOP", "abc", "1", "nx", "LEFT"]),
        err("ERR timeout is not a float or out of range")
    );
    assert_eq!(blocked_clients(&s), 0);
}

#[test]
fn rename_and_move_make_a_key_ready() {
    let s = server(&[]);
    let (mut c1, mut c2, mut p) = (s.raw(), s.raw(), s.raw());
    send(&mut c1, &["BLPOP", "dst", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(p.cmd(&["RPUSH", "src", "x"]), int(1));
    assert_eq!(
        p.cmd(&["RENAME", "src", "dst"]),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(c1.read_frame(), arr(&["dst", "x"]));
    // A waiter in database 1, fed by MOVE from database 0.
    assert_eq!(c2.cmd(&["SELECT", "1"]), Frame::Simple(b"OK".to_vec()));
    send(&mut c2, &["BRPOP", "m", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(p.cmd(&["RPUSH", "m", "y"]), int(1));
    assert_eq!(p.cmd(&["MOVE", "m", "1"]), int(1));
    assert_eq!(c2.read_frame(), arr(&["m", "y"]));
    assert_eq!(blocked_clients(&s), 0);
}

#[test]
fn swapdb_serves_a_waiter_whose_key_arrives_with_the_other_database() {
    let s = server(&[]);
    let (mut c1, mut p) = (s.raw(), s.raw());
    assert_eq!(p.cmd(&["SELECT", "1"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(p.cmd(&["RPUSH", "sw", "x"]), int(1));
    send(&mut c1, &["BLPOP", "sw", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(p.cmd(&["SWAPDB", "0", "1"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(c1.read_frame(), arr(&["sw", "x"]));
    // What database 0 held went to database 1, and the served pop
    // emptied what database 0 holds now.
    assert_eq!(p.cmd(&["EXISTS", "sw"]), int(0));
    assert_eq!(blocked_clients(&s), 0);
}

#[test]
fn a_served_blmove_feeds_the_next_waiter() {
    let s = server(&[]);
    let (mut c1, mut c2, mut c3, mut p) = (s.raw(), s.raw(), s.raw(), s.raw());
    send(&mut c1, &["BLMOVE", "a", "b", "RIGHT", "LEFT", "0"]);
    wait_blocked(&s, 1);
    send(&mut c2, &["BLPOP", "b", "0"]);
    wait_blocked(&s, 2);
    send(
        &mut c3,
        &["BLMPOP", "0", "2", "zz", "a", "LEFT", "COUNT", "5"],
    );
    wait_blocked(&s, 3);
    assert_eq!(p.cmd(&["RPUSH", "a", "x"]), int(1));
    assert_eq!(c1.read_frame(), bulk("x"));
    assert_eq!(c2.read_frame(), arr(&["b", "x"]));
    assert_eq!(p.cmd(&["EXISTS", "a", "b"]), int(0));
    assert_eq!(p.cmd(&["RPUSH", "a", "1", "2", "3"]), int(3));
    // c1 and c2 are served; c3 now waits alone on `a` and takes all three.
    assert_eq!(
        c3.read_frame(),
        Frame::Array(vec![bulk("a"), arr(&["1", "2", "3"])])
    );
}

#[test]
fn a_waiter_that_disconnects_is_forgotten() {
    let s = server(&[]);
    let mut c1 = s.raw();
    let mut p = s.raw();
    send(&mut c1, &["BLPOP", "gone", "0"]);
    wait_blocked(&s, 1);
    drop(c1);
    wait_blocked(&s, 0);
    assert_eq!(p.cmd(&["RPUSH", "gone", "x"]), int(1));
    assert_eq!(p.cmd(&["LRANGE", "gone", "0", "-1"]), arr(&["x"]));
}

#[test]
fn client_unblock_ends_a_wait_with_a_timeout_or_an_error() {
    let s = server(&[]);
    let (mut c1, mut p) = (s.raw(), s.raw());
    let Frame::Integer(id) = c1.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID")
    };
    let id = id.to_string();
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", &id]), int(0));
    send(&mut c1, &["BLPOP", "u", "0"]);
    wait_blocked(&s, 1);
    let Frame::Bulk(line) = p.cmd(&["CLIENT", "LIST", "ID", &id]) else {
        panic!("CLIENT LIST")
    };
    let flags = format!(" {} ", common::client_flags("b"));
    assert!(
        String::from_utf8_lossy(&line).contains(&flags),
        "{}",
        String::from_utf8_lossy(&line)
    );
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", &id, "TIMEOUT"]), int(1));
    assert_eq!(c1.recv_exact(5), b"*-1\r\n");
    send(&mut c1, &["BLMOVE", "u", "v", "LEFT", "LEFT", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(
        p.cmd(&["CLIENT", "UNBLOCK", &id, "foo"]),
        Frame::Error(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".to_vec())
    );
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), int(1));
    assert_eq!(
        c1.read_frame(),
        Frame::Error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK".to_vec())
    );
    assert_eq!(blocked_clients(&s), 0);
    assert_eq!(c1.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
}

#[test]
fn the_pipeline_behind_a_blocked_command_waits_for_it() {
    let s = server(&[]);
    let (mut c1, mut p) = (s.raw(), s.raw());
    let mut req = Frame::command(&["BLPOP", "pipe", "0"]);
    req.extend_from_slice(&Frame::command(&["RPUSH", "after", "1"]));
    req.extend_from_slice(&Frame::command(&["PING"]));
    c1.send(&req);
    wait_blocked(&s, 1);
    assert_silent(&mut c1);
    assert_eq!(p.cmd(&["EXISTS", "after"]), int(0));
    assert_eq!(p.cmd(&["RPUSH", "pipe", "v"]), int(1));
    // The three replies may arrive in one read.
    assert_eq!(
        c1.read_frames(3),
        vec![arr(&["pipe", "v"]), int(1), Frame::Simple(b"PONG".to_vec())]
    );
    assert_eq!(p.cmd(&["EXISTS", "after"]), int(1));
}

#[test]
fn served_pops_reach_the_aof_in_their_non_blocking_forms() {
    if against_redis() {
        return;
    }
    let s = server(&["--appendonly", "yes", "--enable-debug-command", "yes"]);
    let (mut c1, mut c2, mut c3, mut p) = (s.raw(), s.raw(), s.raw(), s.raw());
    send(&mut c1, &["BLPOP", "k", "0"]);
    wait_blocked(&s, 1);
    send(&mut c2, &["BLMOVE", "m", "n", "LEFT", "RIGHT", "0"]);
    wait_blocked(&s, 2);
    send(&mut c3, &["BLMPOP", "0", "1", "z", "RIGHT", "COUNT", "3"]);
    wait_blocked(&s, 3);
    assert_eq!(p.cmd(&["RPUSH", "k", "a", "b"]), int(2));
    assert_eq!(c1.read_frame(), arr(&["k", "a"]));
    assert_eq!(p.cmd(&["RPUSH", "m", "x"]), int(1));
    assert_eq!(c2.read_frame(), bulk("x"));
    assert_eq!(p.cmd(&["RPUSH", "z", "1", "2"]), int(2));
    assert_eq!(
        c3.read_frame(),
        Frame::Array(vec![bulk("z"), arr(&["2", "1"])])
    );
    let digest = p.cmd(&["DEBUG", "DIGEST"]);
    let aof_dir = s.dir.path().join("appendonlydir");
    let aof = wait_for("the AOF to hold the served pops", 5, || {
        let mut all = Vec::new();
        for e in std::fs::read_dir(&aof_dir).ok()? {
            let path = e.ok()?.path();
            if path.to_string_lossy().ends_with(".incr.aof") {
                all.extend(std::fs::read(path).ok()?);
            }
        }
        let text = String::from_utf8_lossy(&all).into_owned();
        text.contains("RPOP").then_some(text)
    });
    assert!(aof.contains("$4\r\nLPOP\r\n$1\r\nk\r\n"), "{aof:?}");
    assert!(
        aof.contains("$5\r\nLMOVE\r\n$1\r\nm\r\n$1\r\nn\r\n$4\r\nLEFT\r\n$5\r\nRIGHT\r\n"),
        "{aof:?}"
    );
    assert!(
        aof.contains("$4\r\nRPOP\r\n$1\r\nz\r\n$1\r\n2\r\n"),
        "{aof:?}"
    );
    for blocking in ["BLPOP", "BLMOVE", "BLMPOP"] {
        assert!(!aof.contains(blocking), "{blocking} in {aof:?}");
    }
    // Replaying the AOF gives the same data.
    assert_eq!(p.cmd(&["DEBUG", "LOADAOF"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(p.cmd(&["DEBUG", "DIGEST"]), digest);
}

#[test]
fn exec_wakes_waiters_after_the_transaction_and_nothing_blocks_inside_it() {
    let s = server(&[]);
    let (mut c1, mut p) = (s.raw(), s.raw());
    send(&mut c1, &["BLPOP", "tx", "0"]);
    wait_blocked(&s, 1);
    p.send(&Frame::command(&["MULTI"]));
    p.send(&Frame::command(&["RPUSH", "tx", "a"]));
    p.send(&Frame::command(&["RPUSH", "tx", "b"]));
    p.send(&Frame::command(&["EXEC"]));
    let replies = p.read_frames(4);
    assert_eq!(replies[3], Frame::Array(vec![int(1), int(2)]));
    // Served once the whole transaction ran: both pushes were seen.
    assert_eq!(c1.read_frame(), arr(&["tx", "a"]));
    assert_eq!(p.cmd(&["LRANGE", "tx", "0", "-1"]), arr(&["b"]));
    // A waiter on several keys is served from the key that became ready
    // first, not the first in its arguments.
    send(&mut c1, &["BLPOP", "ka", "kb", "0"]);
    wait_blocked(&s, 1);
    p.send(&Frame::command(&["MULTI"]));
    p.send(&Frame::command(&["RPUSH", "kb", "1"]));
    p.send(&Frame::command(&["RPUSH", "ka", "2"]));
    p.send(&Frame::command(&["EXEC"]));
    let _ = p.read_frames(4);
    assert_eq!(c1.read_frame(), arr(&["kb", "1"]));
    // Inside MULTI a blocking command answers as if it timed out.
    p.send(&Frame::command(&["MULTI"]));
    p.send(&Frame::command(&["BLPOP", "none", "0"]));
    p.send(&Frame::command(&[
        "BLMOVE", "none", "x", "LEFT", "LEFT", "0",
    ]));
    p.send(&Frame::command(&["BLMPOP", "0", "1", "none", "LEFT"]));
    p.send(&Frame::command(&["EXEC"]));
    let _ = p.recv_exact(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n".len());
    assert_eq!(
        p.recv_exact(b"*3\r\n*-1\r\n$-1\r\n*-1\r\n".len()),
        b"*3\r\n*-1\r\n$-1\r\n*-1\r\n"
    );
    assert_eq!(blocked_clients(&s), 0);
}

#[test]
fn a_replica_applies_served_pops_as_their_non_blocking_forms() {
    if against_redis() {
        return;
    }
    let master = server(&[
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
    ]);
    let port = master.port.to_string();
    let replica = server(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--enable-debug-command",
        "yes",
    ]);
    wait_for("the replica's link", 10, || {
        (replica
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up"))
        .then_some(())
    });
    let (mut c1, mut c2, mut p) = (master.raw(), master.raw(), master.raw());
    send(&mut c1, &["BLPOP", "r", "0"]);
    wait_blocked(&master, 1);
    send(&mut c2, &["BLMOVE", "r2", "r3", "RIGHT", "LEFT", "0"]);
    wait_blocked(&master, 2);
    assert_eq!(p.cmd(&["RPUSH", "r", "a", "b"]), int(2));
    assert_eq!(c1.read_frame(), arr(&["r", "a"]));
    assert_eq!(p.cmd(&["RPUSH", "r2", "x", "y"]), int(2));
    assert_eq!(c2.read_frame(), bulk("y"));
    let digest = p.cmd(&["DEBUG", "DIGEST"]);
    let mut r = replica.raw();
    wait_for("the replica to hold the master's data", 10, || {
        (r.cmd(&["DEBUG", "DIGEST"]) == digest).then_some(())
    });
    assert_eq!(r.cmd(&["LRANGE", "r3", "0", "-1"]), arr(&["y"]));
}
