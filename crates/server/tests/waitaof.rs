//! `WAITAOF numlocal numreplicas timeout` (Redis 7.2): a client's last write
//! fsynced by the local AOF and by its replicas' AOFs (`REPLCONF ACK …
//! FACK`). Every test runs on ferrokv and on Redis 7.4.1 from
//! `../shared/peers/` (skipped with a printed line where this clone has
//! none), and a Redis 7.4.1 replica of a ferrokv master shows the `FACK`
//! exchange between the two.
mod common;

use common::reply::{err, int};
use common::{wait_for, Peer, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::time::Instant;

type Start = fn(&[&str]) -> Option<ServerProcess>;

fn ferrokv(extra: &[&str]) -> Option<ServerProcess> {
    Some(ServerProcess::ferrokv(extra))
}

fn redis74(extra: &[&str]) -> Option<ServerProcess> {
    ServerProcess::peer(Peer::Redis74, extra)
}

const SERVERS: [(&str, Start); 2] = [("ferrokv", ferrokv), ("redis-7.4.1", redis74)];

fn pair(local: bool, replicas: i64) -> Frame {
    Frame::Array(vec![int(local as i64), int(replicas)])
}

/// Starts `extra` with `appendonly yes` and waits for its first base (a
/// log turned on at start is ready at once; the wait is for Redis, which
/// writes it by a child).
fn with_aof(start: Start, extra: &[&str]) -> Option<ServerProcess> {
    let mut args = vec!["--appendonly", "yes"];
    args.extend_from_slice(extra);
    let s = start(&args)?;
    wait_for("the AOF on", 30, || {
        let on = s.info_field("persistence", "aof_enabled").as_deref() == Some("1");
        let idle = s
            .info_field("persistence", "aof_rewrite_in_progress")
            .as_deref()
            == Some("0");
        (on && idle).then_some(())
    });
    Some(s)
}

#[test]
fn arguments_and_refusals_as_redis() {
    for (name, start) in SERVERS {
        let Some(s) = start(&[]) else { continue };
        let mut r = s.raw();
        let cases: &[(&[&str], Frame)] = &[
            (
                &["WAITAOF", "2", "0", "0"],
                err("ERR value is out of range, value must between 0 and 1"),
            ),
            (
                &["WAITAOF", "-1", "0", "0"],
                err("ERR value is out of range, value must between 0 and 1"),
            ),
            (
                &["WAITAOF", "x", "0", "0"],
                err("ERR value is not an integer or out of range"),
            ),
            (
                &["WAITAOF", "0", "-1", "0"],
                err("ERR value is out of range, must be positive"),
            ),
            (
                &["WAITAOF", "0", "x", "0"],
                err("ERR value is out of range, must be positive"),
            ),
            (&["WAITAOF", "0", "0", "-1"], err("ERR timeout is negative")),
            (
                &["WAITAOF", "0", "0", "1.5"],
                err("ERR timeout is not an integer or out of range"),
            ),
            (
                &["WAITAOF", "1", "0", "0"],
                err("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."),
            ),
            (&["WAITAOF", "0", "0", "0"], pair(false, 0)),
            (
                &["WAITAOF", "0", "0"],
                err("ERR wrong number of arguments for 'waitaof' command"),
            ),
        ];
        for (c, want) in cases {
            assert_eq!(&r.cmd(c), want, "{name} {c:?}");
        }
        // No replica: a wait for one ends with the timeout.
        assert_eq!(r.cmd(&["SET", "k", "v"]), Frame::Simple(b"OK".to_vec()));
        let t0 = Instant::now();
        assert_eq!(
            r.cmd(&["WAITAOF", "0", "1", "150"]),
            pair(false, 0),
            "{name}"
        );
        assert!(t0.elapsed().as_millis() >= 140, "{name}");
        // A replica refuses it.
        let Some(replica) = start(&["--replicaof", "127.0.0.1", &s.port.to_string()]) else {
            continue;
        };
        assert_eq!(
            replica.raw().cmd(&["WAITAOF", "0", "0", "0"]),
            err("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."),
            "{name}"
        );
    }
}

fn set_and_wait(r: &mut Raw, wait: &[&str]) -> Frame {
    let f = r.cmd(&["INCR", "counter"]);
    assert!(matches!(f, Frame::Integer(_)), "{f:?}");
    r.cmd(wait)
}

#[test]
fn local_fsync_by_policy() {
    for (name, start) in SERVERS {
        let Some(s) = with_aof(start, &["--appendfsync", "always"]) else {
            continue;
        };
        let mut r = s.raw();
        // always: synced before the reply; nothing written yet counts too.
        assert_eq!(r.cmd(&["WAITAOF", "1", "0", "0"]), pair(true, 0), "{name}");
        assert_eq!(
            set_and_wait(&mut r, &["WAITAOF", "1", "0", "0"]),
            pair(true, 0)
        );
        // everysec: within the second (no timeout: it must come).
        r.cmd(&["CONFIG", "SET", "appendfsync", "everysec"]);
        assert_eq!(
            set_and_wait(&mut r, &["WAITAOF", "1", "0", "0"]),
            pair(true, 0),
            "{name}"
        );
        // no: never fsynced by the server, so the wait ends with its
        // timeout; inside MULTI it answers at once.
        r.cmd(&["CONFIG", "SET", "appendfsync", "no"]);
        let t0 = Instant::now();
        assert_eq!(
            set_and_wait(&mut r, &["WAITAOF", "1", "0", "200"]),
            pair(false, 0),
            "{name}"
        );
        assert!(t0.elapsed().as_millis() >= 190, "{name}");
        r.cmd(&["MULTI"]);
        r.cmd(&["WAITAOF", "1", "0", "0"]);
        assert_eq!(
            r.cmd(&["EXEC"]),
            Frame::Array(vec![pair(false, 0)]),
            "{name}"
        );
        // Another client's write does not concern this one: its own last
        // write (before `no`) was synced.
        let mut other = s.raw();
        assert_eq!(
            other.cmd(&["WAITAOF", "1", "0", "0"]),
            pair(true, 0),
            "{name}"
        );
    }
}

/// A master (`master`) and a replica (`replica`) with their own AOF
/// settings, linked and in sync.
fn linked(
    master: Start,
    replica: Start,
    replica_aof: bool,
) -> Option<(ServerProcess, ServerProcess)> {
    let m = with_aof(master, &["--appendfsync", "always"])?;
    let port = m.port.to_string();
    let args = ["--replicaof", "127.0.0.1", &port, "--appendfsync", "always"];
    let r = if replica_aof {
        with_aof(replica, &args)?
    } else {
        replica(&args)?
    };
    wait_for("the link up", 30, || {
        (r.info_field("replication", "master_link_status").as_deref() == Some("up")).then_some(())
    });
    Some((m, r))
}

#[test]
fn replicas_count_by_their_aof() {
    let combos: [(&str, Start, Start); 3] = [
        ("ferrokv -> ferrokv", ferrokv, ferrokv),
        ("redis-7.4.1 -> redis-7.4.1", redis74, redis74),
        // ferrokv reads 7.4's FACK.
        ("ferrokv -> redis-7.4.1", ferrokv, redis74),
    ];
    for (name, master, replica) in combos {
        let Some((m, _r)) = linked(master, replica, true) else {
            continue;
        };
        let mut c = m.raw();
        // Blocks until the replica's AOF has the write (no timeout).
        assert_eq!(
            set_and_wait(&mut c, &["WAITAOF", "1", "1", "0"]),
            pair(true, 1),
            "{name}"
        );
        // Two replicas asked for the same write, one there (it acked
        // above): the timeout, with the one.
        assert_eq!(
            c.cmd(&["WAITAOF", "1", "2", "200"]),
            pair(true, 1),
            "{name}"
        );
        // While blocked, it is a blocked client.
        c.send(&Frame::command(&["WAITAOF", "0", "2", "0"]));
        common::wait_blocked(&m, 1);
    }
    // A replica without AOF never counts.
    for (name, start) in SERVERS {
        let Some((m, _r)) = linked(start, start, false) else {
            continue;
        };
        let mut c = m.raw();
        assert_eq!(
            set_and_wait(&mut c, &["WAITAOF", "1", "1", "300"]),
            pair(true, 0),
            "{name}"
        );
        // WAIT still counts it.
        assert_eq!(c.cmd(&["WAIT", "1", "0"]), int(1), "{name}");
    }
}
