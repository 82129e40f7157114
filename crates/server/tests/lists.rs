//! Guards the list commands' semantics, nil forms (RESP2 and RESP3) and
//! exact error texts against Redis 7.0, and that lists survive SAVE,
//! restart and DEBUG RELOAD and load into the real redis-server with the
//! same DEBUG DIGEST.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the reply tests against the real
//! `redis-server` (that is how the expected replies were checked).
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;

fn arr(v: &[&str]) -> Frame {
    Frame::Array(v.iter().map(|s| bulk(s)).collect())
}
fn ok() -> Frame {
    Frame::Simple(b"OK".to_vec())
}

/// A fresh key name per test, so tests can share one server.
fn k(test: &str, name: &str) -> String {
    format!("lists:{test}:{name}")
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn push_pop_and_lengths_with_counts() {
    let s = server();
    let mut r = s.raw();
    let l = k("pushpop", "l");
    let (l, s1) = (l.as_str(), k("pushpop", "s"));
    let s1 = s1.as_str();
    check(
        &mut r,
        &[
            (&["DEL", l, s1], int(0)),
            (&["LPUSHX", l, "a"], int(0)),
            (&["RPUSH", l, "a", "b", "c"], int(3)),
            (&["LPUSH", l, "z", "y"], int(5)),
            (&["LRANGE", l, "0", "-1"], arr(&["y", "z", "a", "b", "c"])),
            (&["RPUSHX", l, "d"], int(6)),
            (&["LLEN", l], int(6)),
            (&["LPOP", l], bulk("y")),
            (&["RPOP", l], bulk("d")),
            (&["LPOP", l, "0"], Frame::Array(vec![])),
            (&["LPOP", l, "2"], arr(&["z", "a"])),
            (&["RPOP", l, "5"], arr(&["c", "b"])),
            (&["EXISTS", l], int(0)),
            (&["LLEN", l], int(0)),
            (
                &["LPOP", l, "-1"],
                err("ERR value is out of range, must be positive"),
            ),
            (
                &["LPOP", l, "x"],
                err("ERR value is out of range, must be positive"),
            ),
            (
                &["LPOP", l, "1", "2"],
                err("ERR wrong number of arguments for 'lpop' command"),
            ),
            (&["SET", s1, "v"], ok()),
            (&["LPUSH", s1, "a"], err(WRONGTYPE)),
            (&["LPOP", s1], err(WRONGTYPE)),
            (&["LLEN", s1], err(WRONGTYPE)),
            (&["LRANGE", s1, "0", "1"], err(WRONGTYPE)),
        ],
    );
}

#[test]
fn nil_forms_of_pops_are_redis_s_in_resp2_and_resp3() {
    let s = server();
    let mut r = s.raw();
    let nx = k("nil", "missing");
    let req = |cmd: &str| {
        let parts: Vec<&str> = cmd.split(' ').collect();
        let mut v = parts.clone();
        v[1] = nx.as_str();
        Frame::command(&v)
    };
    r.send(&req("LPOP x"));
    assert_eq!(r.recv_exact(5), b"$-1\r\n");
    r.send(&req("LPOP x 2"));
    assert_eq!(r.recv_exact(5), b"*-1\r\n");
    r.send(&req("LPOP x 0"));
    assert_eq!(r.recv_exact(5), b"*-1\r\n");
    r.send(&req("LINDEX x 0"));
    assert_eq!(r.recv_exact(5), b"$-1\r\n");
    r.send(&req("LPOS x a"));
    assert_eq!(r.recv_exact(5), b"$-1\r\n");
    r.send(&req("LPOS x a COUNT 0"));
    assert_eq!(r.recv_exact(4), b"*0\r\n");
    r.send(&req("RPOPLPUSH x y"));
    assert_eq!(r.recv_exact(5), b"$-1\r\n");
    r.send(&Frame::command(&["LMPOP", "1", nx.as_str(), "LEFT"]));
    assert_eq!(r.recv_exact(5), b"*-1\r\n");
    let _ = r.cmd(&["HELLO", "3"]);
    for c in ["LPOP x", "LPOP x 2", "LINDEX x 0", "LPOS x a"] {
        r.send(&req(c));
        assert_eq!(r.recv_exact(3), b"_\r\n", "{c}");
    }
}

#[test]
fn ranges_index_set_insert_rem_trim() {
    let s = server();
    let mut r = s.raw();
    let l = k("edit", "l");
    let l = l.as_str();
    let nx = k("edit", "nx");
    let nx = nx.as_str();
    check(
        &mut r,
        &[
            (&["DEL", l], int(0)),
            (&["RPUSH", l, "a", "b", "c", "b", "a"], int(5)),
            (&["LRANGE", l, "1", "2"], arr(&["b", "c"])),
            (&["LRANGE", l, "-2", "100"], arr(&["b", "a"])),
            (&["LRANGE", l, "3", "1"], arr(&[])),
            (
                &["LRANGE", l, "x", "1"],
                err("ERR value is not an integer or out of range"),
            ),
            (&["LRANGE", nx, "0", "-1"], arr(&[])),
            (&["LINDEX", l, "-1"], bulk("a")),
            (&["LINDEX", l, "2"], bulk("c")),
            (&["LINDEX", l, "9"], Frame::Null),
            (
                &["LINDEX", l, "x"],
                err("ERR value is not an integer or out of range"),
            ),
            (&["LINDEX", nx, "x"], Frame::Null),
            (&["LSET", l, "-1", "A"], ok()),
            (&["LSET", l, "5", "A"], err("ERR index out of range")),
            (&["LSET", nx, "0", "A"], err("ERR no such key")),
            (&["LINSERT", l, "BEFORE", "c", "x"], int(6)),
            (&["LINSERT", l, "after", "c", "y"], int(7)),
            (&["LINSERT", l, "after", "zz", "y"], int(-1)),
            (&["LINSERT", nx, "after", "zz", "y"], int(0)),
            (&["LINSERT", l, "middle", "c", "y"], err("ERR syntax error")),
            (
                &["LRANGE", l, "0", "-1"],
                arr(&["a", "b", "x", "c", "y", "b", "A"]),
            ),
            (&["RPUSH", l, "b"], int(8)),
            (&["LREM", l, "-1", "b"], int(1)),
            (&["LREM", l, "1", "b"], int(1)),
            (&["LREM", l, "0", "nope"], int(0)),
            (
                &["LREM", l, "x", "b"],
                err("ERR value is not an integer or out of range"),
            ),
            (
                &["LRANGE", l, "0", "-1"],
                arr(&["a", "x", "c", "y", "b", "A"]),
            ),
            (&["LTRIM", l, "1", "-2"], ok()),
            (&["LRANGE", l, "0", "-1"], arr(&["x", "c", "y", "b"])),
            (&["LTRIM", nx, "0", "1"], ok()),
            (&["LTRIM", l, "5", "1"], ok()),
            (&["EXISTS", l], int(0)),
        ],
    );
}

#[test]
fn lpos_options_and_errors() {
    let s = server();
    let mut r = s.raw();
    let l = k("lpos", "l");
    let l = l.as_str();
    let ints = |v: &[i64]| Frame::Array(v.iter().map(|&i| int(i)).collect());
    check(
        &mut r,
        &[
            (&["DEL", l], int(0)),
            (&["RPUSH", l, "a", "b", "c", "1", "2", "3", "c", "c"], int(8)),
            (&["LPOS", l, "c"], int(2)),
            (&["LPOS", l, "c", "RANK", "2"], int(6)),
            (&["LPOS", l, "c", "RANK", "-1"], int(7)),
            (&["LPOS", l, "c", "COUNT", "0"], ints(&[2, 6, 7])),
            (&["LPOS", l, "c", "COUNT", "2", "RANK", "-1"], ints(&[7, 6])),
            (&["LPOS", l, "c", "COUNT", "0", "MAXLEN", "3"], ints(&[2])),
            (&["LPOS", l, "c", "RANK", "-1", "MAXLEN", "1"], int(7)),
            (&["LPOS", l, "c", "RANK", "-9223372036854775808", "COUNT", "1"], ints(&[7, 6, 2])),
            (&["LPOS", l, "zz"], Frame::Null),
            (&["LPOS", l, "zz", "COUNT", "1"], ints(&[])),
            (
                &["LPOS", l, "c", "RANK", "0"],
                err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"),
            ),
            (&["LPOS", l, "c", "COUNT", "-1"], err("ERR COUNT can't be negative")),
            (&["LPOS", l, "c", "COUNT", "x"], err("ERR COUNT can't be negative")),
            (&["LPOS", l, "c", "MAXLEN", "-1"], err("ERR MAXLEN can't be negative")),
            (&["LPOS", l, "c", "RANK"], err("ERR syntax error")),
            (&["LPOS", l, "c", "FOO", "1"], err("ERR syntax error")),
        ],
    );
}

#[test]
fn lmove_rpoplpush_and_lmpop() {
    let s = server();
    let mut r = s.raw();
    let (a, b, st) = (k("move", "a"), k("move", "b"), k("move", "str"));
    let (a, b, st) = (a.as_str(), b.as_str(), st.as_str());
    check(
        &mut r,
        &[
            (&["DEL", a, b, st], int(0)),
            (&["RPUSH", a, "1", "2", "3"], int(3)),
            (&["LMOVE", a, a, "LEFT", "RIGHT"], bulk("1")),
            (&["LRANGE", a, "0", "-1"], arr(&["2", "3", "1"])),
            (&["RPOPLPUSH", a, b], bulk("1")),
            (&["LMOVE", a, b, "left", "right"], bulk("2")),
            (&["LRANGE", b, "0", "-1"], arr(&["1", "2"])),
            (&["LMOVE", a, b, "UP", "LEFT"], err("ERR syntax error")),
            (&["SET", st, "x"], ok()),
            (&["LMOVE", a, st, "LEFT", "LEFT"], err(WRONGTYPE)),
            (&["LRANGE", a, "0", "-1"], arr(&["3"])),
            (&["LMOVE", st, a, "LEFT", "LEFT"], err(WRONGTYPE)),
            (&["LMOVE", a, b, "LEFT", "LEFT"], bulk("3")),
            (&["EXISTS", a], int(0)),
            (
                &["LMPOP", "2", a, b, "RIGHT", "COUNT", "5"],
                Frame::Array(vec![bulk(b), arr(&["2", "1", "3"])]),
            ),
            (
                &["LMPOP", "0", a, "LEFT"],
                err("ERR numkeys should be greater than 0"),
            ),
            (&["LMPOP", "2", a, "LEFT"], err("ERR syntax error")),
            (&["LMPOP", "1", a, "MIDDLE"], err("ERR syntax error")),
            (
                &["LMPOP", "1", a, "LEFT", "COUNT", "0"],
                err("ERR count should be greater than 0"),
            ),
            (
                &["LMPOP", "1", a, "LEFT", "COUNT", "1", "COUNT", "1"],
                err("ERR syntax error"),
            ),
            (&["LMPOP", "2", a, st, "LEFT"], err(WRONGTYPE)),
            (&["DEL", st], int(1)),
        ],
    );
}

#[test]
fn object_encoding_type_and_list_config() {
    let s = server();
    let mut r = s.raw();
    let l = k("enc", "l");
    let l = l.as_str();
    let big = "x".repeat(10_000);
    check(
        &mut r,
        &[
            (&["DEL", l], int(0)),
            (&["RPUSH", l, "a"], int(1)),
            (&["OBJECT", "ENCODING", l], bulk("quicklist")),
            (&["TYPE", l], Frame::Simple(b"list".to_vec())),
            (&["RPUSH", l, &big], int(2)),
            (&["OBJECT", "ENCODING", l], bulk("quicklist")),
            (&["CONFIG", "GET", "list-max-listpack-size"], arr(&["list-max-listpack-size", "-2"])),
            (&["CONFIG", "GET", "list-max-ziplist-size"], arr(&["list-max-ziplist-size", "-2"])),
            (&["CONFIG", "GET", "list-compress-depth"], arr(&["list-compress-depth", "0"])),
            (
                &["CONFIG", "SET", "list-compress-depth", "-1"],
                err("ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive"),
            ),
            (
                &["CONFIG", "SET", "list-max-ziplist-size", "abc"],
                err("ERR CONFIG SET failed (possibly related to argument 'list-max-ziplist-size') - argument couldn't be parsed into an integer"),
            ),
            (&["CONFIG", "SET", "list-max-ziplist-size", "5"], ok()),
            (&["CONFIG", "GET", "list-max-listpack-size"], arr(&["list-max-listpack-size", "5"])),
            (&["CONFIG", "SET", "list-max-listpack-size", "-2"], ok()),
            (&["OBJECT", "ENCODING", l], bulk("quicklist")),
            (&["DEL", l], int(1)),
        ],
    );
}

#[test]
fn long_lists_keep_order_through_both_ends_and_the_middle() {
    let s = server();
    let mut r = s.raw();
    let l = k("long", "l");
    let l = l.as_str();
    let _ = r.cmd(&["DEL", l]);
    let mut model: std::collections::VecDeque<String> = Default::default();
    for i in 0..3000 {
        let v = format!("v{i}");
        if i % 3 == 0 {
            let _ = r.cmd(&["LPUSH", l, &v]);
            model.push_front(v);
        } else {
            let _ = r.cmd(&["RPUSH", l, &v]);
            model.push_back(v);
        }
    }
    let _ = r.cmd(&["LINSERT", l, "BEFORE", "v1500", "mid"]);
    let p = model.iter().position(|x| x == "v1500").unwrap();
    model.insert(p, "mid".into());
    let _ = r.cmd(&["LSET", l, "1234", "set"]);
    model[1234] = "set".into();
    let got = r.cmd(&["LRANGE", l, "0", "-1"]);
    let want = Frame::Array(model.iter().map(|s| bulk(s)).collect());
    assert_eq!(got, want);
    assert_eq!(r.cmd(&["LINDEX", l, "2000"]), bulk(&model[2000]));
    assert_eq!(
        r.cmd(&["LRANGE", l, "1000", "1002"]),
        Frame::Array(model.range(1000..1003).map(|s| bulk(s)).collect())
    );
    let _ = r.cmd(&["DEL", l]);
}

fn digest(r: &mut Raw) -> Frame {
    r.cmd(&["DEBUG", "DIGEST"])
}

/// Lists of every shape: tiny, integers, a large element, many nodes,
/// with an expiry.
fn fill_lists(r: &mut Raw) {
    let _ = r.cmd(&["RPUSH", "small", "a", "b", "c"]);
    let _ = r.cmd(&["RPUSH", "ints", "1", "-2", "300000", "12345678901", "x"]);
    let big = "B".repeat(20_000);
    let _ = r.cmd(&["RPUSH", "big", "a", &big, "z"]);
    for chunk in 0..20 {
        let vals: Vec<String> = (0..500).map(|i| format!("elem-{chunk}-{i}")).collect();
        let mut args = vec!["LPUSH".to_string(), "many".to_string()];
        args.extend(vals);
        let _ = r.cmd(&args);
    }
    let _ = r.cmd(&["RPUSH", "ttl", "a"]);
    let _ = r.cmd(&["PEXPIRE", "ttl", "1000000"]);
    let _ = r.cmd(&["SET", "str", "v"]);
}

#[test]
fn lists_survive_save_restart_and_debug_reload() {
    let mut s = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let mut r = s.raw();
    fill_lists(&mut r);
    let d = digest(&mut r);
    assert_ne!(d, bulk(&"0".repeat(40)));
    assert_eq!(r.cmd(&["DEBUG", "RELOAD"]), ok());
    assert_eq!(digest(&mut r), d);
    assert_eq!(r.cmd(&["SAVE"]), ok());
    drop(r);
    // Restart on the same directory.
    let dir = s.dir.path().to_path_buf();
    let _ = s.child.kill();
    let _ = s.child.wait();
    let s2 = ServerProcess::ferrokv(&[
        "--enable-debug-command",
        "yes",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let mut r2 = s2.raw();
    assert_eq!(digest(&mut r2), d);
    assert_eq!(r2.cmd(&["LRANGE", "big", "0", "0"]), arr(&["a"]));
    assert_eq!(r2.cmd(&["OBJECT", "ENCODING", "many"]), bulk("quicklist"));
    // The file loads into the real redis-server with the same digest.
    let redis = ServerProcess::redis(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let mut rr = redis.raw();
    assert_eq!(digest(&mut rr), d);
    assert_eq!(rr.cmd(&["LLEN", "many"]), int(10_000));
}

#[test]
fn digest_of_lists_equals_redis_s() {
    if against_redis() {
        return;
    }
    let ours = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let redis = ServerProcess::redis(&[]);
    let mut a = ours.raw();
    let mut b = redis.raw();
    fill_lists(&mut a);
    fill_lists(&mut b);
    assert_eq!(digest(&mut a), digest(&mut b));
    for key in ["small", "ints", "big", "many"] {
        assert_eq!(
            a.cmd(&["DEBUG", "DIGEST-VALUE", key]),
            b.cmd(&["DEBUG", "DIGEST-VALUE", key]),
            "{key}"
        );
    }
}

/// Reads pub/sub messages until `n` arrived; returns (channel, payload).
/// (Several messages may arrive in one read, so frames are cut from one
/// buffer.)
fn events(r: &mut Raw, n: usize) -> Vec<(String, String)> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    r.s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    while out.len() < n {
        match Frame::decode(&buf) {
            Ok((f, used)) => {
                buf.drain(..used);
                let parts = match f {
                    Frame::Array(p) | Frame::Push(p) => p,
                    other => panic!("not a message: {other:?}"),
                };
                let text = |f: &Frame| String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned();
                if parts.len() == 4 && text(&parts[0]) == "pmessage" {
                    out.push((text(&parts[2]), text(&parts[3])));
                }
                continue;
            }
            Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
            Err(e) => panic!("bad frame {e:?}"),
        }
        let got =
            r.s.read(&mut chunk)
                .unwrap_or_else(|e| panic!("after {out:?}: {e}"));
        assert!(got > 0, "closed");
        buf.extend_from_slice(&chunk[..got]);
    }
    out
}

#[test]
fn list_commands_announce_redis_s_keyspace_events() {
    let s = own_server(&[]);
    let mut r = s.raw();
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Elgn"]),
        ok()
    );
    let mut sub = s.raw();
    sub.send(&Frame::command(&["PSUBSCRIBE", "__keyevent@0__:*"]));
    let _ = sub.read_frame();
    for c in [
        &["RPUSH", "ev", "a", "b", "c"][..],
        &["LPUSHX", "ev", "z"],
        &["LSET", "ev", "0", "y"],
        &["LINSERT", "ev", "BEFORE", "a", "q"],
        &["LREM", "ev", "1", "q"],
        &["LTRIM", "ev", "0", "-1"],
        &["LMOVE", "ev", "ev2", "LEFT", "RIGHT"],
        &["RPOP", "ev", "5"],
        &["LPOP", "ev2"],
    ] {
        let _ = r.cmd(c);
    }
    let ev = |e: &str, k: &str| (format!("__keyevent@0__:{e}"), k.to_string());
    assert_eq!(
        events(&mut sub, 14),
        vec![
            ev("new", "ev"),
            ev("rpush", "ev"),
            ev("lpush", "ev"),
            ev("lset", "ev"),
            ev("linsert", "ev"),
            ev("lrem", "ev"),
            ev("ltrim", "ev"),
            ev("new", "ev2"),
            ev("rpush", "ev2"),
            ev("lpop", "ev"),
            ev("rpop", "ev"),
            ev("del", "ev"),
            ev("lpop", "ev2"),
            ev("del", "ev2"),
        ]
    );
}

#[test]
fn a_redis_written_snapshot_of_lists_loads_with_the_same_digest() {
    if against_redis() {
        return;
    }
    let redis = ServerProcess::redis(&[]);
    let mut rr = redis.raw();
    fill_lists(&mut rr);
    // Small nodes, so Redis writes many quicklist nodes per list.
    assert_eq!(
        rr.cmd(&["CONFIG", "SET", "list-max-listpack-size", "4"]),
        ok()
    );
    let _ = rr.cmd(&[
        "RPUSH", "fill4", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    ]);
    let d = digest(&mut rr);
    assert_eq!(rr.cmd(&["SAVE"]), ok());
    let dir = redis.dir.path().to_str().unwrap().to_string();
    let ours = ServerProcess::ferrokv(&["--enable-debug-command", "yes", "--dir", &dir]);
    let mut r = ours.raw();
    assert_eq!(digest(&mut r), d);
    assert_eq!(r.cmd(&["LRANGE", "fill4", "2", "4"]), arr(&["3", "4", "5"]));
}
