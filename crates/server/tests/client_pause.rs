//! Guards CLIENT PAUSE / CLIENT UNPAUSE against Redis 7.0.15's behaviour:
//! which commands a WRITE pause holds (writes, PUBLISH, EVAL that may write,
//! an EXEC with a write queued) and which it lets through (reads, EVAL_RO),
//! that held clients get no error but wait (flag `b`, `blocked_clients`) and
//! resume in order, that a later pause never shortens an earlier one, that
//! nothing expires during a pause (and a replica sees no DEL), the exact
//! error texts.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same checks against the real
//! `redis-server`.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::wait_blocked;
use common::{wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::time::{Duration, Instant};

fn server() -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(&[])
    } else {
        ServerProcess::ferrokv(&["--enable-debug-command", "yes"])
    }
}

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
fn bad_timeouts_and_modes_have_redis_errors() {
    let s = server();
    let mut r = s.raw();
    assert_eq!(
        r.cmd(&["CLIENT", "PAUSE"]),
        err("ERR wrong number of arguments for 'client|pause' command")
    );
    assert_eq!(
        r.cmd(&["CLIENT", "PAUSE", "abc"]),
        err("ERR timeout is not an integer or out of range")
    );
    assert_eq!(
        r.cmd(&["CLIENT", "PAUSE", "-1"]),
        err("ERR timeout is negative")
    );
    // The mode is checked first.
    assert_eq!(
        r.cmd(&["CLIENT", "PAUSE", "abc", "foo"]),
        err("ERR CLIENT PAUSE mode must be WRITE or ALL")
    );
    assert_eq!(
        r.cmd(&["CLIENT", "PAUSE", "10", "write", "extra"]),
        err("ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.")
    );
    assert_eq!(
        r.cmd(&["CLIENT", "UNPAUSE", "x"]),
        err("ERR wrong number of arguments for 'client|unpause' command")
    );
    // A zero timeout ends at once.
    assert_eq!(r.cmd(&["CLIENT", "PAUSE", "0", "write"]), ok());
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(r.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(r.cmd(&["CLIENT", "UNPAUSE"]), ok());
}

#[test]
fn write_pause_holds_writes_publish_and_eval_but_not_reads() {
    let s = server();
    let mut admin = s.raw();
    assert_eq!(admin.cmd(&["SET", "k", "old"]), ok());
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    let mut w = s.raw();
    send(&mut w, &["SET", "k", "new"]);
    wait_blocked(&s, 1);
    let mut p = s.raw();
    send(&mut p, &["PUBLISH", "ch", "m"]);
    wait_blocked(&s, 2);
    let mut e = s.raw();
    send(&mut e, &["EVAL", "return 1", "0"]);
    wait_blocked(&s, 3);
    // PFCOUNT may rewrite its key's representation and propagate it
    // (Redis's may-replicate flag, not shown by COMMAND INFO): held too.
    let mut hll = s.raw();
    send(&mut hll, &["PFCOUNT", "h"]);
    wait_blocked(&s, 4);
    let mut m = s.raw();
    assert_eq!(m.cmd(&["MULTI"]), ok());
    assert_eq!(m.cmd(&["GET", "k"]), Frame::Simple(b"QUEUED".to_vec()));
    // Queueing a write is itself held.
    send(&mut m, &["INCR", "n"]);
    wait_blocked(&s, 5);
    // Reads, read-only scripts and admin commands go on.
    assert_eq!(admin.cmd(&["GET", "k"]), bulk("old"));
    assert_eq!(admin.cmd(&["EVAL_RO", "return 7", "0"]), int(7));
    assert_eq!(
        admin.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 8", "0"]),
        int(8)
    );
    // Held, not refused: no reply at all.
    assert_silent(&mut w);
    let list = match admin.cmd(&["CLIENT", "LIST"]) {
        Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        f => panic!("{f:?}"),
    };
    let held: Vec<&str> = list
        .lines()
        .filter(|l| l.contains(" flags=b ") || l.contains(" flags=xb "))
        .collect();
    assert_eq!(held.len(), 5, "{list}");
    assert!(
        held[0].contains(" flags=b ") && held[0].contains(" cmd=set "),
        "{list}"
    );
    // The client in MULTI: `x` and `b`.
    assert!(held[4].contains(" flags=xb "), "{list}");
    assert_eq!(
        s.info_field("clients", "clients_in_timeout_table").unwrap(),
        "0"
    );
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(w.read_frame(), ok());
    assert_eq!(p.read_frame(), int(0));
    assert_eq!(e.read_frame(), int(1));
    assert_eq!(hll.read_frame(), int(0));
    assert_eq!(m.read_frame(), Frame::Simple(b"QUEUED".to_vec()));
    assert_eq!(m.cmd(&["EXEC"]), Frame::Array(vec![bulk("new"), int(1)]));
    wait_blocked(&s, 0);
}

#[test]
fn exec_with_a_queued_write_is_held_and_read_only_exec_is_not() {
    let s = server();
    let mut admin = s.raw();
    let mut m = s.raw();
    assert_eq!(m.cmd(&["MULTI"]), ok());
    assert_eq!(m.cmd(&["SET", "k", "1"]), Frame::Simple(b"QUEUED".to_vec()));
    let mut ro = s.raw();
    assert_eq!(ro.cmd(&["MULTI"]), ok());
    assert_eq!(ro.cmd(&["GET", "k"]), Frame::Simple(b"QUEUED".to_vec()));
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    send(&mut m, &["EXEC"]);
    wait_blocked(&s, 1);
    assert_eq!(ro.cmd(&["EXEC"]), Frame::Array(vec![nil()]));
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(m.read_frame(), Frame::Array(vec![ok()]));
}

#[test]
fn held_clients_resume_in_order_with_their_pipelines() {
    let s = server();
    let mut admin = s.raw();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    let mut a = s.raw();
    // A pipeline: the write and everything after it wait.
    a.send(
        &[
            Frame::command(&["RPUSH", "l", "a1"]),
            Frame::command(&["PING"]),
            Frame::command(&["RPUSH", "l", "a2"]),
        ]
        .concat(),
    );
    wait_blocked(&s, 1);
    let mut b = s.raw();
    send(&mut b, &["RPUSH", "l", "b1"]);
    wait_blocked(&s, 2);
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(
        a.read_frames(3),
        vec![int(1), Frame::Simple(b"PONG".to_vec()), int(2)]
    );
    assert_eq!(b.read_frame(), int(3));
    assert_eq!(
        admin.cmd(&["LRANGE", "l", "0", "-1"]),
        Frame::Array(vec![bulk("a1"), bulk("a2"), bulk("b1")])
    );
}

#[test]
fn all_pause_holds_every_command_until_it_ends() {
    let s = server();
    let mut admin = s.raw();
    let t0 = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "400", "ALL"]), ok());
    let mut r = s.raw();
    // Even a read, even PING.
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(350), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
}

#[test]
fn later_pause_never_shortens_nor_weakens_the_first() {
    let s = server();
    let mut admin = s.raw();
    let t0 = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "800", "WRITE"]), ok());
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "50", "WRITE"]), ok());
    assert_eq!(admin.cmd(&["SET", "k", "v"]), ok());
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
    // A stronger mode with a shorter time: ALL, for the longer time.
    let t0 = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "800", "WRITE"]), ok());
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "50", "ALL"]), ok());
    let mut r = s.raw();
    assert_eq!(r.cmd(&["GET", "k"]), bulk("v"));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
}

#[test]
fn nothing_expires_during_a_pause() {
    let s = server();
    let mut admin = s.raw();
    assert_eq!(admin.cmd(&["SET", "gone", "1", "PX", "100"]), ok());
    assert_eq!(admin.cmd(&["SET", "live", "1"]), ok());
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "1000", "WRITE"]), ok());
    std::thread::sleep(Duration::from_millis(300));
    // Logically gone, physically kept.
    assert_eq!(admin.cmd(&["GET", "gone"]), nil());
    assert_eq!(admin.cmd(&["EXISTS", "gone"]), int(0));
    assert_eq!(admin.cmd(&["PTTL", "gone"]), int(-2));
    assert_eq!(
        admin.cmd(&["SCAN", "0"]),
        Frame::Array(vec![bulk("0"), Frame::Array(vec![bulk("live")])])
    );
    assert_eq!(admin.cmd(&["DBSIZE"]), int(2));
    assert_eq!(s.info_field("stats", "expired_keys").unwrap(), "0");
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    wait_for("the key to expire after the pause", 5, || {
        (admin.cmd(&["DBSIZE"]) == int(1)).then_some(())
    });
    assert_eq!(s.info_field("stats", "expired_keys").unwrap(), "1");
}

#[test]
fn a_replica_sees_no_del_during_a_pause() {
    let s = server();
    let replica = if against_redis() {
        ServerProcess::redis(&[])
    } else {
        ServerProcess::ferrokv(&["--enable-debug-command", "yes"])
    };
    common::repl::replicaof(&replica, &s);
    let mut admin = s.raw();
    // Lazy expiry only, so the key goes exactly when it is read.
    assert_eq!(admin.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    common::repl::wait_converged(&s, &replica, 15);
    assert_eq!(admin.cmd(&["SET", "gone", "1", "PX", "1000"]), ok());
    let mut rr = replica.raw();
    wait_for("the key on the replica", 5, || {
        (rr.cmd(&["DBSIZE"]) == int(1)).then_some(())
    });
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    wait_for("the key's time to pass", 5, || {
        (admin.cmd(&["GET", "gone"]) == nil()).then_some(())
    });
    assert_eq!(admin.cmd(&["DBSIZE"]), int(1));
    // The replica still holds the key (its master sent no DEL).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(rr.cmd(&["DBSIZE"]), int(1));
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    // Read after the pause: now it is deleted, and the DEL replicated.
    assert_eq!(admin.cmd(&["GET", "gone"]), nil());
    wait_for("the DEL to reach the replica", 10, || {
        (rr.cmd(&["DBSIZE"]) == int(0)).then_some(())
    });
}

#[test]
fn replicas_are_not_paused_and_wait_counts_them() {
    let s = server();
    let replica = if against_redis() {
        ServerProcess::redis(&[])
    } else {
        ServerProcess::ferrokv(&["--enable-debug-command", "yes"])
    };
    common::repl::replicaof(&replica, &s);
    let mut admin = s.raw();
    assert_eq!(admin.cmd(&["SET", "k", "v"]), ok());
    common::repl::wait_converged(&s, &replica, 15);
    let offset = common::repl::num(&s, "replication", "master_repl_offset");
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    // WAIT is no write: it runs, and the replica has everything (its
    // periodic ACK says so: no GETACK enters the stream during a pause).
    assert_eq!(admin.cmd(&["WAIT", "1", "3000"]), int(1));
    assert_eq!(
        common::repl::num(&s, "replication", "master_repl_offset"),
        offset
    );
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
}
