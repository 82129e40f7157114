//! Guards FAILOVER against Redis 7.0.15: every error text, the coordinated
//! switch in each mixed pair (ferrokv master → ferrokv replica, ferrokv
//! master → redis-server replica, redis-server master → ferrokv replica:
//! the target promotes itself on `PSYNC <replid> <offset> FAILOVER`), the
//! write pause while the target catches up (`waiting-for-sync`), a TIMEOUT
//! that aborts, FORCE that goes on anyway, and FAILOVER ABORT.
//!
//! With `FERROKV_TESTS_TARGET=redis` the tests that need no mixed pair run
//! with redis-server in the master's place, so the expected replies are
//! Redis's.
mod common;
use common::repl::{info, replicaof, wait_converged};
#[allow(unused_imports)]
use common::reply::*;
use common::{wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::time::Duration;

fn ferrokv() -> ServerProcess {
    ServerProcess::ferrokv(&["--enable-debug-command", "yes"])
}

fn redis() -> ServerProcess {
    ServerProcess::redis(&[])
}

/// The master under test: ferrokv, or redis-server with
/// `FERROKV_TESTS_TARGET=redis`.
fn target() -> ServerProcess {
    if against_redis() {
        redis()
    } else {
        ferrokv()
    }
}

fn state(p: &ServerProcess) -> String {
    info(p, "replication", "master_failover_state")
}

fn role(p: &ServerProcess) -> String {
    info(p, "replication", "role")
}

fn send(r: &mut Raw, args: &[&str]) {
    r.send(&Frame::command(args));
}

#[test]
fn errors_have_redis_texts() {
    let m = target();
    let mut r = m.raw();
    assert_eq!(
        r.cmd(&["FAILOVER"]),
        err("ERR FAILOVER requires connected replicas.")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "ABORT"]),
        err("ERR No failover in progress.")
    );
    assert_eq!(r.cmd(&["FAILOVER", "TO"]), err("ERR syntax error"));
    assert_eq!(r.cmd(&["FAILOVER", "bogus"]), err("ERR syntax error"));
    assert_eq!(
        r.cmd(&["FAILOVER", "ABORT", "TIMEOUT", "5"]),
        err("ERR syntax error")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "TIMEOUT", "-1"]),
        err("ERR FAILOVER timeout must be greater than 0")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "TIMEOUT", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "TO", "127.0.0.1", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "TIMEOUT", "1", "TIMEOUT", "2"]),
        err("ERR syntax error")
    );
    assert_eq!(state(&m), "no-failover");

    // With a replica: the checks that need one.
    let rep = target();
    replicaof(&rep, &m);
    wait_converged(&m, &rep, 15);
    assert_eq!(
        r.cmd(&["FAILOVER", "FORCE"]),
        err("ERR FAILOVER with force option requires both a timeout and target HOST and IP.")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "TO", "127.0.0.1", "1", "FORCE"]),
        err("ERR FAILOVER with force option requires both a timeout and target HOST and IP.")
    );
    assert_eq!(
        r.cmd(&["FAILOVER", "TO", "127.0.0.1", "1"]),
        err("ERR FAILOVER target HOST and PORT is not a replica.")
    );
    let mut rr = rep.raw();
    assert_eq!(
        rr.cmd(&["FAILOVER"]),
        err("ERR FAILOVER is not valid when server is a replica.")
    );
    assert_eq!(
        rr.cmd(&["READONLY"]),
        err("ERR This instance has cluster support disabled")
    );
}

/// Starts `replica` as a replica of `master` with some data, fails over to
/// it, and checks the roles swapped with the data intact.
fn switch(master: ServerProcess, replica: ServerProcess) {
    replicaof(&replica, &master);
    let mut m = master.raw();
    for i in 0..50 {
        assert_eq!(m.cmd(&["SET", &format!("k{i}"), &i.to_string()]), ok());
    }
    wait_converged(&master, &replica, 15);
    let port = replica.port.to_string();
    // A diskless Redis master puts its replica online on the replica's
    // first ACK after the transfer, which may come after the offsets met.
    common::wait_for("the replica online on its master", 10, || {
        master
            .info_field("replication", "slave0")
            .filter(|s| s.contains("state=online"))
    });
    let reply = m.cmd(&["FAILOVER", "TO", "127.0.0.1", &port]);
    assert_eq!(reply, ok(), "{:?}", m.cmd(&["INFO", "replication"]));
    wait_for("the roles to swap", 15, || {
        (role(&master) == "slave"
            && role(&replica) == "master"
            && info(&master, "replication", "master_link_status") == "up"
            && state(&master) == "no-failover")
            .then_some(())
    });
    assert_eq!(
        info(&master, "replication", "master_port"),
        replica.port.to_string()
    );
    assert_eq!(state(&replica), "no-failover");
    let mut r = replica.raw();
    assert_eq!(r.cmd(&["GET", "k49"]), bulk("49"));
    assert_eq!(r.cmd(&["SET", "after", "1"]), ok());
    // The old master is a read-only replica of the new one, and follows.
    assert_eq!(
        m.cmd(&["SET", "x", "1"]),
        err("READONLY You can't write against a read only replica.")
    );
    wait_for("the write to reach the old master", 10, || {
        (m.cmd(&["GET", "after"]) == bulk("1")).then_some(())
    });
}

#[test]
fn ferrokv_master_fails_over_to_ferrokv_replica() {
    switch(ferrokv(), ferrokv());
}

#[test]
fn ferrokv_master_fails_over_to_redis_replica() {
    switch(ferrokv(), redis());
}

#[test]
fn redis_master_fails_over_to_ferrokv_replica() {
    switch(redis(), ferrokv());
}

#[test]
fn failover_to_any_replica_picks_the_caught_up_one() {
    let master = target();
    let replica = ferrokv();
    replicaof(&replica, &master);
    let mut m = master.raw();
    assert_eq!(m.cmd(&["SET", "k", "v"]), ok());
    wait_converged(&master, &replica, 15);
    assert_eq!(m.cmd(&["FAILOVER"]), ok());
    wait_for("the roles to swap", 15, || {
        (role(&master) == "slave" && role(&replica) == "master").then_some(())
    });
    assert_eq!(
        info(&master, "replication", "master_port"),
        replica.port.to_string()
    );
}

/// A replica that cannot acknowledge (it sleeps in DEBUG SLEEP) keeps the
/// failover waiting, with writes held; the TIMEOUT then aborts it and the
/// held writes run on the master.
#[test]
fn timeout_without_force_aborts_and_releases_writes() {
    let master = target();
    let replica = ferrokv();
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 15);
    let mut rr = replica.raw();
    send(&mut rr, &["DEBUG", "SLEEP", "3"]);
    std::thread::sleep(Duration::from_millis(100));
    let mut m = master.raw();
    assert_eq!(m.cmd(&["SET", "moved", "1"]), ok());
    assert_eq!(m.cmd(&["FAILOVER", "TIMEOUT", "1200"]), ok());
    assert_eq!(state(&master), "waiting-for-sync");
    assert_eq!(
        m.cmd(&["FAILOVER"]),
        err("ERR FAILOVER already in progress.")
    );
    // Writes wait; reads do not.
    let mut w = master.raw();
    send(&mut w, &["SET", "held", "1"]);
    wait_for("the write to be held", 5, || {
        (info(&master, "clients", "blocked_clients") == "1").then_some(())
    });
    assert_eq!(m.cmd(&["GET", "moved"]), bulk("1"));
    wait_for("the timeout to abort the failover", 10, || {
        (state(&master) == "no-failover").then_some(())
    });
    assert_eq!(w.read_frame(), ok());
    assert_eq!(role(&master), "master");
    assert_eq!(rr.read_frame(), ok());
}

#[test]
fn abort_ends_a_waiting_failover() {
    let master = target();
    let replica = ferrokv();
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 15);
    let mut rr = replica.raw();
    send(&mut rr, &["DEBUG", "SLEEP", "2"]);
    std::thread::sleep(Duration::from_millis(100));
    let mut m = master.raw();
    assert_eq!(m.cmd(&["SET", "moved", "1"]), ok());
    assert_eq!(m.cmd(&["FAILOVER"]), ok());
    assert_eq!(state(&master), "waiting-for-sync");
    let mut w = master.raw();
    send(&mut w, &["SET", "held", "1"]);
    wait_for("the write to be held", 5, || {
        (info(&master, "clients", "blocked_clients") == "1").then_some(())
    });
    assert_eq!(m.cmd(&["FAILOVER", "ABORT"]), ok());
    assert_eq!(state(&master), "no-failover");
    assert_eq!(w.read_frame(), ok());
    assert_eq!(role(&master), "master");
    assert_eq!(rr.read_frame(), ok());
}

/// FORCE: past the TIMEOUT the switch happens although the target has not
/// acknowledged our offset.
#[test]
fn force_fails_over_after_the_timeout() {
    let master = target();
    let replica = ferrokv();
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 15);
    let mut rr = replica.raw();
    send(&mut rr, &["DEBUG", "SLEEP", "2"]);
    std::thread::sleep(Duration::from_millis(100));
    let mut m = master.raw();
    assert_eq!(m.cmd(&["SET", "moved", "1"]), ok());
    let port = replica.port.to_string();
    assert_eq!(
        m.cmd(&[
            "FAILOVER",
            "TO",
            "127.0.0.1",
            &port,
            "TIMEOUT",
            "300",
            "FORCE"
        ]),
        ok()
    );
    wait_for("the forced switch", 15, || {
        (role(&master) == "slave" && role(&replica) == "master").then_some(())
    });
    assert_eq!(rr.read_frame(), ok());
    let mut r2 = replica.raw();
    assert_eq!(r2.cmd(&["GET", "moved"]), bulk("1"));
}
