//! Guards the hash family against Redis 7.0: exact replies and error texts
//! (raw RESP2 and RESP3), the listpack → hashtable conversion at the
//! configured thresholds (never back), HINCRBYFLOAT's propagation as HSET,
//! HRANDFIELD's count semantics, HSCAN, generic commands on hashes, and
//! every encoding surviving SAVE + restart and DEBUG RELOAD with a digest
//! equal to the real Redis's.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the protocol assertions against
//! the real `redis-server`.
mod common;
use common::node::{digest, Node, AOF_ALWAYS};
#[allow(unused_imports)]
use common::reply::*;
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Redis with the thresholds ferrokv defaults to (Debian's redis-server
/// starts with 512 entries when no config file is given).
fn server() -> Arc<ServerProcess> {
    if against_redis() {
        Arc::new(ServerProcess::redis(&[
            "--hash-max-listpack-entries",
            "128",
        ]))
    } else {
        common::shared_ferrokv()
    }
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn hset_hget_and_friends_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "h:basic", "h:str"]);
    check(
        &mut r,
        &[
            (&["HSET", "h:basic", "a", "1", "b", "2", "c", "3"], int(3)),
            (&["HSET", "h:basic", "a", "10", "d", "4"], int(1)),
            (&["HGET", "h:basic", "a"], bulk("10")),
            (&["HGET", "h:basic", "zz"], Frame::Null),
            (&["HGET", "h:nokey", "a"], Frame::Null),
            (
                &["HMGET", "h:basic", "a", "zz", "b"],
                arr(vec![bulk("10"), Frame::Null, bulk("2")]),
            ),
            (&["HMGET", "h:nokey", "a"], arr(vec![Frame::Null])),
            // Insertion order is kept by the listpack encoding.
            (
                &["HGETALL", "h:basic"],
                bulks(&["a", "10", "b", "2", "c", "3", "d", "4"]),
            ),
            (&["HKEYS", "h:basic"], bulks(&["a", "b", "c", "d"])),
            (&["HVALS", "h:basic"], bulks(&["10", "2", "3", "4"])),
            (&["HLEN", "h:basic"], int(4)),
            (&["HSTRLEN", "h:basic", "a"], int(2)),
            (&["HSTRLEN", "h:basic", "zz"], int(0)),
            (&["HEXISTS", "h:basic", "b"], int(1)),
            (&["HEXISTS", "h:basic", "zz"], int(0)),
            (&["HSETNX", "h:basic", "a", "x"], int(0)),
            (&["HSETNX", "h:basic", "e", "5"], int(1)),
            (
                &["HMSET", "h:basic", "f", "6"],
                Frame::Simple(b"OK".to_vec()),
            ),
            (&["HDEL", "h:basic", "a", "zz", "b"], int(2)),
            (&["HGETALL", "h:nokey"], arr(vec![])),
            (&["HKEYS", "h:nokey"], arr(vec![])),
            (&["HLEN", "h:nokey"], int(0)),
            (&["HDEL", "h:nokey", "a"], int(0)),
            (&["TYPE", "h:basic"], Frame::Simple(b"hash".to_vec())),
            (&["HDEL", "h:basic", "c", "d", "e", "f"], int(4)),
            // The last field gone, the key is gone.
            (&["EXISTS", "h:basic"], int(0)),
            (
                &["HSET", "h:basic"],
                err("ERR wrong number of arguments for 'hset' command"),
            ),
            (
                &["HSET", "h:basic", "a"],
                err("ERR wrong number of arguments for 'hset' command"),
            ),
            (
                &["HSET", "h:basic", "a", "1", "b"],
                err("ERR wrong number of arguments for 'hset' command"),
            ),
            (
                &["HMSET", "h:basic", "a"],
                err("ERR wrong number of arguments for 'hmset' command"),
            ),
            (&["SET", "h:str", "x"], Frame::Simple(b"OK".to_vec())),
            (&["HSET", "h:str", "a", "1"], err(WRONGTYPE)),
            (&["HGET", "h:str", "a"], err(WRONGTYPE)),
            (&["HGETALL", "h:str"], err(WRONGTYPE)),
            (&["HDEL", "h:str", "a"], err(WRONGTYPE)),
            (&["HSETNX", "h:str", "a", "1"], err(WRONGTYPE)),
            (&["HLEN", "h:str"], err(WRONGTYPE)),
        ],
    );
}

#[test]
fn counters_parse_and_overflow_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "h:ctr", "h:ctr2"]);
    check(
        &mut r,
        &[
            (&["HINCRBY", "h:ctr", "n", "5"], int(5)),
            (&["HINCRBY", "h:ctr", "n", "-7"], int(-2)),
            (
                &["HINCRBY", "h:ctr", "n", "x"],
                err("ERR value is not an integer or out of range"),
            ),
            (
                &[
                    "HSET",
                    "h:ctr",
                    "t",
                    "abc",
                    "big",
                    "9223372036854775807",
                    "lz",
                    "007",
                ],
                int(3),
            ),
            (
                &["HINCRBY", "h:ctr", "t", "1"],
                err("ERR hash value is not an integer"),
            ),
            (
                &["HINCRBY", "h:ctr", "lz", "1"],
                err("ERR hash value is not an integer"),
            ),
            (
                &["HINCRBY", "h:ctr", "big", "1"],
                err("ERR increment or decrement would overflow"),
            ),
            (&["HINCRBYFLOAT", "h:ctr", "f", "1.5"], bulk("1.5")),
            (&["HINCRBYFLOAT", "h:ctr", "f", "0.25"], bulk("1.75")),
            (
                &["HINCRBYFLOAT", "h:ctr", "big", "1.5"],
                bulk("9223372036854775808"),
            ),
            (
                &["HINCRBYFLOAT", "h:ctr", "t", "1"],
                err("ERR hash value is not a float"),
            ),
            (
                &["HINCRBYFLOAT", "h:ctr", "f", "abc"],
                err("ERR value is not a valid float"),
            ),
            (
                &["HINCRBYFLOAT", "h:ctr2", "f", "inf"],
                err("ERR value is NaN or Infinity"),
            ),
            (&["EXISTS", "h:ctr2"], int(0)),
            (&["HINCRBYFLOAT", "h:ctr", "lz", "1"], bulk("8")),
        ],
    );
}

#[test]
fn hrandfield_counts_and_errors() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "h:rand"]);
    r.cmd(&["HSET", "h:rand", "a", "1", "b", "2", "c", "3"]);
    let fields: BTreeSet<Vec<u8>> = [b"a", b"b", b"c"].iter().map(|f| f.to_vec()).collect();
    let as_list = |f: Frame| match f {
        Frame::Array(v) => v
            .into_iter()
            .map(|x| match x {
                Frame::Bulk(b) => b,
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    // Positive: distinct fields, at most the hash's size.
    let got = as_list(r.cmd(&["HRANDFIELD", "h:rand", "2"]));
    assert_eq!(got.len(), 2);
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 2);
    assert!(got.iter().all(|f| fields.contains(f)));
    let got = as_list(r.cmd(&["HRANDFIELD", "h:rand", "10"]));
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), fields);
    // Negative: exactly |count|, repetitions allowed.
    let got = as_list(r.cmd(&["HRANDFIELD", "h:rand", "-20"]));
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|f| fields.contains(f)));
    // WITHVALUES: pairs that belong together (flat in RESP2).
    let got = as_list(r.cmd(&["HRANDFIELD", "h:rand", "-5", "WITHVALUES"]));
    assert_eq!(got.len(), 10);
    for p in got.chunks(2) {
        let expect = match &p[0][..] {
            b"a" => b"1",
            b"b" => b"2",
            _ => b"3",
        };
        assert_eq!(p[1], expect);
    }
    match r.cmd(&["HRANDFIELD", "h:rand"]) {
        Frame::Bulk(f) => assert!(fields.contains(&f)),
        other => panic!("{other:?}"),
    }
    check(
        &mut r,
        &[
            (&["HRANDFIELD", "h:nokey"], Frame::Null),
            (&["HRANDFIELD", "h:nokey", "3"], arr(vec![])),
            (&["HRANDFIELD", "h:rand", "0"], arr(vec![])),
            (&["HRANDFIELD", "h:rand", "1", "foo"], err("ERR syntax error")),
            (&["HRANDFIELD", "h:rand", "1", "WITHVALUES", "x"], err("ERR syntax error")),
            (&["HRANDFIELD", "h:rand", "x"], err("ERR value is not an integer or out of range")),
            (
                &["HRANDFIELD", "h:rand", "-9223372036854775808"],
                err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
            ),
            (
                &["HRANDFIELD", "h:rand", "9223372036854775807", "WITHVALUES"],
                err("ERR value is out of range"),
            ),
        ],
    );
    // RESP3: HGETALL is a map, HRANDFIELD WITHVALUES an array of pairs.
    r.cmd(&["HELLO", "3"]);
    assert_eq!(
        r.cmd(&["HGETALL", "h:rand"]),
        Frame::Map(vec![
            (bulk("a"), bulk("1")),
            (bulk("b"), bulk("2")),
            (bulk("c"), bulk("3")),
        ])
    );
    assert_eq!(r.cmd(&["HGETALL", "h:nokey"]), Frame::Map(vec![]));
    match r.cmd(&["HRANDFIELD", "h:rand", "-4", "WITHVALUES"]) {
        Frame::Array(pairs) => {
            assert_eq!(pairs.len(), 4);
            for p in pairs {
                let Frame::Array(p) = p else { panic!("{p:?}") };
                assert_eq!(p.len(), 2);
            }
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn listpack_converts_to_hashtable_past_either_threshold_and_never_back() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "h:enc1", "h:enc2"]);
    let enc = |r: &mut Raw, k: &str| r.cmd(&["OBJECT", "ENCODING", k]);
    for i in 0..128 {
        r.cmd(&["HSET", "h:enc1", &format!("f{i}"), "v"]);
    }
    assert_eq!(enc(&mut r, "h:enc1"), bulk("listpack"));
    r.cmd(&["HSET", "h:enc1", "f128", "v"]);
    assert_eq!(enc(&mut r, "h:enc1"), bulk("hashtable"));
    r.cmd(&["HDEL", "h:enc1", "f128", "f127", "f126"]);
    assert_eq!(enc(&mut r, "h:enc1"), bulk("hashtable"));
    assert_eq!(r.cmd(&["HLEN", "h:enc1"]), int(126));
    r.cmd(&["HSET", "h:enc2", "f", &"x".repeat(64)]);
    assert_eq!(enc(&mut r, "h:enc2"), bulk("listpack"));
    r.cmd(&["HSET", "h:enc2", &"y".repeat(65), "v"]);
    assert_eq!(enc(&mut r, "h:enc2"), bulk("hashtable"));
    assert_eq!(r.cmd(&["HGET", "h:enc2", &"y".repeat(65)]), bulk("v"));
}

#[test]
fn config_thresholds_and_ziplist_aliases() {
    let s = ServerProcess::ferrokv(&["--hash-max-ziplist-entries", "4"]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (
                &["CONFIG", "GET", "hash-max-listpack-entries"],
                bulks(&["hash-max-listpack-entries", "4"]),
            ),
            (
                &["CONFIG", "SET", "hash-max-listpack-value", "3"],
                Frame::Simple(b"OK".to_vec()),
            ),
            (
                &["CONFIG", "GET", "hash-max-ziplist-value"],
                bulks(&["hash-max-ziplist-value", "3"]),
            ),
            (&["HSET", "h", "a", "123"], int(1)),
            (&["OBJECT", "ENCODING", "h"], bulk("listpack")),
            // HINCRBY's result is checked against the value threshold too.
            (&["HINCRBY", "h", "a", "1000"], int(1123)),
            (&["OBJECT", "ENCODING", "h"], bulk("hashtable")),
            (
                &["HSET", "g", "a", "1", "b", "2", "c", "3", "d", "4"],
                int(4),
            ),
            (&["OBJECT", "ENCODING", "g"], bulk("listpack")),
            (&["HSET", "g", "e", "5"], int(1)),
            (&["OBJECT", "ENCODING", "g"], bulk("hashtable")),
        ],
    );
}

#[test]
fn hscan_returns_every_field_once_with_match_and_count() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "h:scan", "h:scansmall"]);
    for i in 0..500 {
        r.cmd(&["HSET", "h:scan", &format!("f{i}"), &format!("v{i}")]);
    }
    let mut cursor = "0".to_string();
    let mut seen = std::collections::BTreeMap::new();
    loop {
        let Frame::Array(v) = r.cmd(&["HSCAN", "h:scan", &cursor, "COUNT", "37"]) else {
            panic!()
        };
        let Frame::Bulk(c) = &v[0] else { panic!() };
        cursor = String::from_utf8(c.clone()).unwrap();
        let Frame::Array(items) = &v[1] else { panic!() };
        for p in items.chunks(2) {
            let (Frame::Bulk(f), Frame::Bulk(val)) = (&p[0], &p[1]) else {
                panic!()
            };
            seen.insert(f.clone(), val.clone());
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 500);
    assert_eq!(seen[&b"f42".to_vec()], b"v42".to_vec());
    r.cmd(&["HSET", "h:scansmall", "aa", "1", "ab", "2", "b", "3"]);
    check(
        &mut r,
        &[
            (
                &["HSCAN", "h:scansmall", "0", "MATCH", "a*"],
                arr(vec![bulk("0"), bulks(&["aa", "1", "ab", "2"])]),
            ),
            (
                &["HSCAN", "h:scansmall", "0", "COUNT", "0"],
                err("ERR syntax error"),
            ),
            (
                &["HSCAN", "h:scansmall", "0", "MATCH"],
                err("ERR syntax error"),
            ),
            (&["HSCAN", "h:scansmall", "x"], err("ERR invalid cursor")),
            // A missing key answers before its options are looked at.
            (
                &["HSCAN", "h:nokey", "0", "COUNT", "0"],
                arr(vec![bulk("0"), arr(vec![])]),
            ),
        ],
    );
}

#[test]
fn generic_commands_work_on_hashes() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "h:gen", "h:gen2", "h:gen3"]);
    r.cmd(&["HSET", "h:gen", "a", "1"]);
    check(
        &mut r,
        &[
            (&["COPY", "h:gen", "h:gen2"], int(1)),
            (&["HSET", "h:gen2", "a", "2"], int(0)),
            // The copy is independent of its source.
            (&["HGET", "h:gen", "a"], bulk("1")),
            (&["HGET", "h:gen2", "a"], bulk("2")),
            (
                &["RENAME", "h:gen2", "h:gen3"],
                Frame::Simple(b"OK".to_vec()),
            ),
            (&["HGET", "h:gen3", "a"], bulk("2")),
            (&["EXPIRE", "h:gen3", "100"], int(1)),
            (&["TTL", "h:gen3"], int(100)),
            (&["HSET", "h:gen3", "b", "3"], int(1)),
            (&["TTL", "h:gen3"], int(100)),
        ],
    );
}

/// Every encoding of a hash, in a few databases, with expiries.
fn fill_hashes(c: &mut redis::Connection) {
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("HSET")
            .arg(format!("small:{i}"))
            .arg("name")
            .arg(format!("user{i}"))
            .arg("n")
            .arg(i)
            .ignore();
    }
    for i in 0..300 {
        p.cmd("HSET")
            .arg("big")
            .arg(format!("f{i}"))
            .arg(i * 7)
            .ignore();
    }
    p.cmd("HSET")
        .arg("longval")
        .arg("f")
        .arg("z".repeat(300))
        .ignore();
    p.cmd("HSET")
        .arg(b"bin\x00\xff".as_slice())
        .arg(b"f\r\n".as_slice())
        .arg(vec![0u8, 255])
        .ignore();
    p.cmd("PEXPIRE").arg("small:3").arg(100_000_000).ignore();
    p.cmd("SELECT").arg(2).ignore();
    p.cmd("HSET").arg("other").arg("x").arg("-12").ignore();
    p.cmd("SELECT").arg(0).ignore();
    p.query::<()>(c).unwrap();
}

#[test]
fn every_hash_encoding_survives_save_restart_reload_and_loads_into_redis() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), &["--save", ""]);
        let mut c = n.client();
        fill_hashes(&mut c);
        before = digest(&mut c);
        let () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
        assert_eq!(digest(&mut c), before);
        let enc: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg("big")
            .query(&mut c)
            .unwrap();
        assert_eq!(enc, "hashtable");
        let enc: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg("small:1")
            .query(&mut c)
            .unwrap();
        assert_eq!(enc, "listpack");
        let () = redis::cmd("SAVE").query(&mut c).unwrap();
    }
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
    let ttl: i64 = redis::cmd("TTL").arg("small:3").query(&mut c).unwrap();
    assert!(ttl > 0);
    // The file is one a real Redis loads into the same data.
    let rdir = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("dump.rdb"), rdir.path().join("dump.rdb")).unwrap();
    let redis = ServerProcess::redis(&["--dir", rdir.path().to_str().unwrap()]);
    assert_eq!(digest(&mut redis.client()), before);
    // And the same commands on Redis give the same digest.
    let fresh = ServerProcess::redis(&[]);
    let mut rc = fresh.client();
    fill_hashes(&mut rc);
    let () = redis::cmd("PERSIST").arg("small:3").query(&mut rc).unwrap();
    let () = redis::cmd("PERSIST").arg("small:3").query(&mut c).unwrap();
    assert_eq!(digest(&mut rc), digest(&mut c));
}

#[test]
fn hincrbyfloat_propagates_as_hset_of_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), AOF_ALWAYS);
        let mut c = n.client();
        let _: String = redis::cmd("HINCRBYFLOAT")
            .arg("h")
            .arg("f")
            .arg("0.1")
            .query(&mut c)
            .unwrap();
        let _: String = redis::cmd("HINCRBYFLOAT")
            .arg("h")
            .arg("f")
            .arg("0.2")
            .query(&mut c)
            .unwrap();
        before = digest(&mut c);
    }
    let aof_dir = dir.path().join("appendonlydir");
    let incr = std::fs::read_dir(&aof_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .unwrap();
    let text = String::from_utf8_lossy(&std::fs::read(incr).unwrap()).into_owned();
    assert!(
        text.contains("HSET\r\n$1\r\nh\r\n$1\r\nf\r\n$3\r\n0.3"),
        "{text}"
    );
    assert!(!text.contains("HINCRBYFLOAT"), "{text}");
    let n = Node::start(dir.path(), &["--save", "", "--appendonly", "yes"]);
    assert_eq!(digest(&mut n.client()), before);
}
