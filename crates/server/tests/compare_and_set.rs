//! Compare-and-set on strings (issue #42 item 3): Valkey 8.1's `SET …
//! IFEQ comparison-value` (also Redis 8.4's) and Valkey 9.0's `DELIFEQ`.
//! No server in `../shared/peers/` has them, so the expected replies are
//! those of Valkey's own tests (`tests/unit/type/string.tcl`); what they
//! propagate is checked by a replica converging to the master's digest.
mod common;

use common::repl::{digest, wait_converged};
use common::ServerProcess;
use ferrokv_resp::Frame;

#[test]
fn set_ifeq_and_delifeq_as_valkey() {
    let master = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let port = master.port.to_string();
    let replica = ServerProcess::ferrokv(&[
        "--enable-debug-command",
        "yes",
        "--replicaof",
        "127.0.0.1",
        &port,
    ]);
    let mut r = master.raw();
    let ok = Frame::Simple(b"OK".to_vec());
    let bulk = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
    let wrongtype =
        Frame::Error(b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec());
    let syntax = Frame::Error(b"ERR syntax error".to_vec());
    r.cmd(&["SET", "foo", "initial_value"]);
    assert_eq!(
        r.cmd(&["SET", "foo", "new_value", "ifeq", "initial_value"]),
        ok
    );
    assert_eq!(r.cmd(&["GET", "foo"]), bulk("new_value"));
    assert_eq!(
        r.cmd(&["SET", "foo", "should_not_set", "IFEQ", "wrong_value"]),
        Frame::Null
    );
    assert_eq!(r.cmd(&["GET", "foo"]), bulk("new_value"));
    // An integer-encoded value compares as its text.
    r.cmd(&["SET", "n", "12"]);
    assert_eq!(r.cmd(&["SET", "n", "13", "IFEQ", "12", "PX", "100000"]), ok);
    assert_eq!(r.cmd(&["GET", "n"]), bulk("13"));
    r.cmd(&["SADD", "s", "some_set_value"]);
    assert_eq!(
        r.cmd(&["SET", "s", "v", "IFEQ", "some_set_value"]),
        wrongtype
    );
    assert_eq!(r.cmd(&["SET", "s", "v", "IFEQ", "x", "GET"]), wrongtype);
    assert_eq!(
        r.cmd(&["SET", "missing", "v", "IFEQ", "initial_value", "GET"]),
        Frame::Null
    );
    assert_eq!(r.cmd(&["EXISTS", "missing"]), Frame::Integer(0));
    assert_eq!(r.cmd(&["SET", "missing", "v", "IFEQ", "x"]), Frame::Null);
    r.cmd(&["SET", "g", "initial_value"]);
    assert_eq!(
        r.cmd(&["SET", "g", "new_value", "IFEQ", "initial_value", "GET"]),
        bulk("initial_value")
    );
    assert_eq!(r.cmd(&["GET", "g"]), bulk("new_value"));
    assert_eq!(r.cmd(&["SET", "g", "v", "IFEQ", "new_value", "XX"]), syntax);
    assert_eq!(r.cmd(&["SET", "g", "v", "NX", "IFEQ", "new_value"]), syntax);
    assert_eq!(r.cmd(&["SET", "g", "v", "IFEQ"]), syntax);
    // DELIFEQ
    assert_eq!(r.cmd(&["DELIFEQ", "nokey", "test"]), Frame::Integer(0));
    r.cmd(&["SET", "d", "test"]);
    assert_eq!(r.cmd(&["DELIFEQ", "d", "nope"]), Frame::Integer(0));
    assert_eq!(r.cmd(&["DELIFEQ", "d", "test"]), Frame::Integer(1));
    assert_eq!(r.cmd(&["EXISTS", "d"]), Frame::Integer(0));
    assert_eq!(r.cmd(&["DELIFEQ", "s", "some_set_value"]), wrongtype);
    assert_eq!(
        r.cmd(&["DELIFEQ", "d"]),
        Frame::Error(b"ERR wrong number of arguments for 'delifeq' command".to_vec())
    );
    // What was written reached the replica: the same data set.
    wait_converged(&master, &replica, 60);
    assert_eq!(digest(&master), digest(&replica));
}
