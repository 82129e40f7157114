//! Guards the set family against Redis 7.0: exact replies and error texts
//! (raw RESP2 and RESP3), intset → hashtable conversion (a text member or
//! `set-max-intset-entries`, never back), the algebra and its STORE forms,
//! SPOP/SRANDMEMBER count semantics and SPOP's propagation as SREM/DEL,
//! SSCAN, and both encodings surviving SAVE + restart and DEBUG RELOAD with
//! a digest equal to the real Redis's.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the protocol assertions against
//! the real `redis-server`.
mod common;
use common::node::{digest, Node, AOF_ALWAYS};
#[allow(unused_imports)]
use common::reply::*;
use common::ServerProcess;
use ferrokv_resp::Frame;
use std::collections::BTreeSet;

/// The members of an array or set reply, sorted.
fn members(f: Frame) -> BTreeSet<Vec<u8>> {
    match f {
        Frame::Array(v) | Frame::Set(v) => v
            .into_iter()
            .map(|x| match x {
                Frame::Bulk(b) => b,
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn set_of(v: &[&str]) -> BTreeSet<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn membership_commands_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "s:m", "s:str"]);
    check(
        &mut r,
        &[
            (&["SADD", "s:m", "3", "1", "2", "1"], int(3)),
            (&["SADD", "s:m", "2"], int(0)),
            // An intset answers in ascending order.
            (&["SMEMBERS", "s:m"], bulks(&["1", "2", "3"])),
            (&["OBJECT", "ENCODING", "s:m"], bulk("intset")),
            (&["SISMEMBER", "s:m", "2"], int(1)),
            (&["SISMEMBER", "s:m", "02"], int(0)),
            (
                &["SMISMEMBER", "s:m", "1", "x", "3"],
                arr(vec![int(1), int(0), int(1)]),
            ),
            (&["SMISMEMBER", "s:nokey", "1"], arr(vec![int(0)])),
            (&["SCARD", "s:m"], int(3)),
            (&["SCARD", "s:nokey"], int(0)),
            (&["SREM", "s:m", "1", "9"], int(1)),
            (&["SREM", "s:nokey", "1"], int(0)),
            (&["SMEMBERS", "s:nokey"], arr(vec![])),
            (&["SREM", "s:m", "2", "3"], int(2)),
            (&["EXISTS", "s:m"], int(0)),
            (&["SET", "s:str", "x"], Frame::Simple(b"OK".to_vec())),
            (&["SADD", "s:str", "1"], err(WRONGTYPE)),
            (&["SREM", "s:str", "1"], err(WRONGTYPE)),
            (&["SISMEMBER", "s:str", "1"], err(WRONGTYPE)),
            (&["SMEMBERS", "s:str"], err(WRONGTYPE)),
            (&["SCARD", "s:str"], err(WRONGTYPE)),
            (
                &["SMISMEMBER", "s:m"],
                err("ERR wrong number of arguments for 'smismember' command"),
            ),
            (
                &["SADD", "s:m"],
                err("ERR wrong number of arguments for 'sadd' command"),
            ),
        ],
    );
}

#[test]
fn intset_converts_on_text_member_or_size_and_never_back() {
    let s = ServerProcess::ferrokv(&["--set-max-intset-entries", "4"]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["SADD", "a", "1", "2", "3", "4"], int(4)),
            (&["OBJECT", "ENCODING", "a"], bulk("intset")),
            (&["SADD", "a", "5"], int(1)),
            (&["OBJECT", "ENCODING", "a"], bulk("hashtable")),
            (&["SREM", "a", "5", "4"], int(2)),
            (&["OBJECT", "ENCODING", "a"], bulk("hashtable")),
            (
                &["SADD", "b", "-9223372036854775808", "9223372036854775807"],
                int(2),
            ),
            (&["OBJECT", "ENCODING", "b"], bulk("intset")),
            // Not canonical integers: text members.
            (&["SADD", "b", "007"], int(1)),
            (&["OBJECT", "ENCODING", "b"], bulk("hashtable")),
            (&["SISMEMBER", "b", "007"], int(1)),
            (&["SISMEMBER", "b", "7"], int(0)),
            (&["SADD", "c", "x"], int(1)),
            (&["OBJECT", "ENCODING", "c"], bulk("hashtable")),
            (
                &["CONFIG", "GET", "set-max-intset-entries"],
                bulks(&["set-max-intset-entries", "4"]),
            ),
        ],
    );
}

#[test]
fn algebra_and_store_forms() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "{s}a", "{s}b", "{s}c", "{s}d", "{s}str"]);
    r.cmd(&["SADD", "{s}a", "1", "2", "3", "4"]);
    r.cmd(&["SADD", "{s}b", "3", "4", "5"]);
    r.cmd(&["SADD", "{s}c", "x", "3"]);
    r.cmd(&["SET", "{s}str", "v"]);
    assert_eq!(
        members(r.cmd(&["SINTER", "{s}a", "{s}b"])),
        set_of(&["3", "4"])
    );
    assert_eq!(
        members(r.cmd(&["SINTER", "{s}a", "{s}b", "{s}c"])),
        set_of(&["3"])
    );
    assert_eq!(
        members(r.cmd(&["SUNION", "{s}a", "{s}b", "{s}c"])),
        set_of(&["1", "2", "3", "4", "5", "x"])
    );
    assert_eq!(
        members(r.cmd(&["SDIFF", "{s}a", "{s}b", "{s}nokey"])),
        set_of(&["1", "2"])
    );
    check(
        &mut r,
        &[
            // All-integer results are intsets: ascending order.
            (
                &["SUNION", "{s}a", "{s}b"],
                bulks(&["1", "2", "3", "4", "5"]),
            ),
            (&["SINTER", "{s}a", "{s}nokey"], arr(vec![])),
            (&["SDIFF", "{s}nokey", "{s}a"], arr(vec![])),
            (&["SINTER", "{s}nokey", "{s}str"], err(WRONGTYPE)),
            (&["SUNION", "{s}a", "{s}str"], err(WRONGTYPE)),
            (&["SINTERSTORE", "{s}d", "{s}a", "{s}b"], int(2)),
            (&["SMEMBERS", "{s}d"], bulks(&["3", "4"])),
            (&["OBJECT", "ENCODING", "{s}d"], bulk("intset")),
            (&["SUNIONSTORE", "{s}d", "{s}a", "{s}c"], int(5)),
            (&["OBJECT", "ENCODING", "{s}d"], bulk("hashtable")),
            (&["SDIFFSTORE", "{s}d", "{s}a", "{s}b"], int(2)),
            (&["SMEMBERS", "{s}d"], bulks(&["1", "2"])),
            // An empty result deletes the destination, whatever it held.
            (&["SDIFFSTORE", "{s}str", "{s}nokey", "{s}a"], int(0)),
            (&["EXISTS", "{s}str"], int(0)),
            (&["EXPIRE", "{s}d", "100"], int(1)),
            (&["SUNIONSTORE", "{s}d", "{s}a"], int(4)),
            (&["TTL", "{s}d"], int(-1)),
            (&["SINTERCARD", "2", "{s}a", "{s}b"], int(2)),
            (&["SINTERCARD", "2", "{s}a", "{s}b", "LIMIT", "1"], int(1)),
            (&["SINTERCARD", "2", "{s}a", "{s}b", "LIMIT", "0"], int(2)),
            (&["SINTERCARD", "1", "{s}nokey"], int(0)),
            (
                &["SINTERCARD", "0", "{s}a"],
                err("ERR numkeys should be greater than 0"),
            ),
            (
                &["SINTERCARD", "x", "{s}a"],
                err("ERR numkeys should be greater than 0"),
            ),
            (
                &["SINTERCARD", "3", "{s}a"],
                err("ERR Number of keys can't be greater than number of args"),
            ),
            (
                &["SINTERCARD", "1", "{s}a", "LIMIT", "-1"],
                err("ERR LIMIT can't be negative"),
            ),
            (
                &["SINTERCARD", "1", "{s}a", "LIMIT"],
                err("ERR syntax error"),
            ),
            (
                &["SINTERCARD", "1", "{s}a", "FOO", "1"],
                err("ERR syntax error"),
            ),
        ],
    );
}

#[test]
fn smove_moves_one_member() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "{m}a", "{m}b", "{m}str"]);
    r.cmd(&["SADD", "{m}a", "1", "2"]);
    r.cmd(&["SET", "{m}str", "v"]);
    check(
        &mut r,
        &[
            (&["SMOVE", "{m}a", "{m}b", "1"], int(1)),
            (&["SMEMBERS", "{m}b"], bulks(&["1"])),
            (&["SMOVE", "{m}a", "{m}b", "9"], int(0)),
            (&["SMOVE", "{m}a", "{m}a", "2"], int(1)),
            (&["SMOVE", "{m}nokey", "{m}str", "2"], int(0)),
            (&["SMOVE", "{m}a", "{m}str", "2"], err(WRONGTYPE)),
            (&["SMOVE", "{m}str", "{m}a", "2"], err(WRONGTYPE)),
            (&["SMOVE", "{m}a", "{m}b", "2"], int(1)),
            (&["EXISTS", "{m}a"], int(0)),
            (&["SMEMBERS", "{m}b"], bulks(&["1", "2"])),
        ],
    );
}

#[test]
fn spop_and_srandmember_counts() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "s:r", "s:p", "s:pstr"]);
    r.cmd(&["SADD", "s:r", "a", "b", "c", "d", "e"]);
    let all = set_of(&["a", "b", "c", "d", "e"]);
    let got = r.cmd(&["SRANDMEMBER", "s:r", "3"]);
    let Frame::Array(v) = &got else { panic!() };
    assert_eq!(v.len(), 3);
    let got = members(got);
    assert_eq!(got.len(), 3, "distinct");
    assert!(got.is_subset(&all));
    assert_eq!(members(r.cmd(&["SRANDMEMBER", "s:r", "50"])), all);
    let Frame::Array(v) = r.cmd(&["SRANDMEMBER", "s:r", "-50"]) else {
        panic!()
    };
    assert_eq!(v.len(), 50);
    assert_eq!(
        r.cmd(&["SCARD", "s:r"]),
        int(5),
        "SRANDMEMBER removes nothing"
    );
    r.cmd(&["SADD", "s:p", "1", "2", "3", "4", "5", "6"]);
    let popped = members(r.cmd(&["SPOP", "s:p", "2"]));
    assert_eq!(popped.len(), 2);
    let rest = members(r.cmd(&["SMEMBERS", "s:p"]));
    assert_eq!(rest.len(), 4);
    assert!(popped.is_disjoint(&rest));
    let Frame::Bulk(one) = r.cmd(&["SPOP", "s:p"]) else {
        panic!()
    };
    assert!(rest.contains(&one));
    assert_eq!(members(r.cmd(&["SPOP", "s:p", "10"])).len(), 3);
    r.cmd(&["SET", "s:pstr", "v"]);
    check(
        &mut r,
        &[
            (&["EXISTS", "s:p"], int(0)),
            (&["SPOP", "s:p"], Frame::Null),
            (&["SPOP", "s:p", "3"], arr(vec![])),
            (&["SPOP", "s:r", "0"], arr(vec![])),
            (&["SPOP", "s:r", "-1"], err("ERR value is out of range, must be positive")),
            (&["SPOP", "s:r", "x"], err("ERR value is out of range, must be positive")),
            (&["SPOP", "s:r", "1", "2"], err("ERR syntax error")),
            (&["SPOP", "s:pstr"], err(WRONGTYPE)),
            (&["SPOP", "s:pstr", "0"], err(WRONGTYPE)),
            (&["SRANDMEMBER", "s:nokey"], Frame::Null),
            (&["SRANDMEMBER", "s:nokey", "3"], arr(vec![])),
            (&["SRANDMEMBER", "s:r", "0"], arr(vec![])),
            (&["SRANDMEMBER", "s:r", "1", "2"], err("ERR syntax error")),
            (
                &["SRANDMEMBER", "s:r", "-9223372036854775808"],
                err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
            ),
            (&["SRANDMEMBER", "s:pstr", "1"], err(WRONGTYPE)),
        ],
    );
    // RESP3: SMEMBERS and SPOP with a count answer sets, SRANDMEMBER an array.
    r.cmd(&["HELLO", "3"]);
    assert!(matches!(r.cmd(&["SMEMBERS", "s:r"]), Frame::Set(v) if v.len() == 5));
    assert!(matches!(r.cmd(&["SMEMBERS", "s:nokey"]), Frame::Set(v) if v.is_empty()));
    assert!(matches!(r.cmd(&["SRANDMEMBER", "s:r", "2"]), Frame::Array(v) if v.len() == 2));
    assert!(matches!(r.cmd(&["SPOP", "s:r", "1"]), Frame::Set(v) if v.len() == 1));
    assert!(matches!(r.cmd(&["SPOP", "s:nokey", "1"]), Frame::Set(v) if v.is_empty()));
    assert!(matches!(r.cmd(&["SINTER", "s:r"]), Frame::Set(v) if v.len() == 4));
}

#[test]
fn sscan_returns_every_member_once() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "s:scan", "s:iscan"]);
    for i in 0..300 {
        r.cmd(&["SADD", "s:scan", &format!("m{i}")]);
    }
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    loop {
        let Frame::Array(v) = r.cmd(&["SSCAN", "s:scan", &cursor, "COUNT", "20"]) else {
            panic!()
        };
        let Frame::Bulk(c) = &v[0] else { panic!() };
        cursor = String::from_utf8(c.clone()).unwrap();
        seen.extend(members(v[1].clone()));
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 300);
    r.cmd(&["SADD", "s:iscan", "10", "2", "11"]);
    check(
        &mut r,
        &[
            (
                &["SSCAN", "s:iscan", "0", "MATCH", "1*"],
                arr(vec![bulk("0"), bulks(&["10", "11"])]),
            ),
            (
                &["SSCAN", "s:iscan", "0", "COUNT", "-1"],
                err("ERR syntax error"),
            ),
            (&["SSCAN", "s:iscan", "-x"], err("ERR invalid cursor")),
        ],
    );
}

#[test]
fn spop_propagates_as_srem_and_del() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), AOF_ALWAYS);
        let mut c = n.client();
        let _: i64 = redis::cmd("SADD")
            .arg("s")
            .arg(&["a", "b", "c", "d", "e"])
            .query(&mut c)
            .unwrap();
        let _: String = redis::cmd("SPOP").arg("s").query(&mut c).unwrap();
        let _: Vec<String> = redis::cmd("SPOP").arg("s").arg(2).query(&mut c).unwrap();
        let _: i64 = redis::cmd("SADD")
            .arg("t")
            .arg(&["1", "2"])
            .query(&mut c)
            .unwrap();
        let _: Vec<String> = redis::cmd("SPOP").arg("t").arg(5).query(&mut c).unwrap();
        before = digest(&mut c);
    }
    let aof_dir = dir.path().join("appendonlydir");
    let incr = std::fs::read_dir(&aof_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .unwrap();
    let text = String::from_utf8_lossy(&std::fs::read(incr).unwrap()).into_owned();
    assert!(!text.contains("SPOP"), "{text}");
    assert_eq!(text.matches("SREM").count(), 2, "{text}");
    assert!(text.contains("*3\r\n$4\r\nSREM\r\n$1\r\ns\r\n"), "{text}");
    assert!(text.contains("*4\r\n$4\r\nSREM\r\n$1\r\ns\r\n"), "{text}");
    assert!(text.contains("*2\r\n$3\r\nDEL\r\n$1\r\nt\r\n"), "{text}");
    let n = Node::start(dir.path(), &["--save", "", "--appendonly", "yes"]);
    assert_eq!(digest(&mut n.client()), before);
}

fn fill_sets(c: &mut redis::Connection) {
    let mut p = redis::pipe();
    for i in 0..100 {
        p.cmd("SADD")
            .arg(format!("ints:{i}"))
            .arg(&[i, i + 1, -i])
            .ignore();
        p.cmd("SADD")
            .arg(format!("texts:{i}"))
            .arg(&["a", "b", "007"])
            .ignore();
    }
    for i in 0..1000 {
        p.cmd("SADD").arg("bigints").arg(i * 3).ignore();
    }
    p.cmd("SADD")
        .arg(b"bin\x00".as_slice())
        .arg(vec![0u8, 255, 13, 10])
        .ignore();
    p.cmd("PEXPIRE").arg("ints:5").arg(100_000_000).ignore();
    p.cmd("SELECT").arg(1).ignore();
    p.cmd("SADD").arg("other").arg("-1").ignore();
    p.cmd("SELECT").arg(0).ignore();
    p.query::<()>(c).unwrap();
}

#[test]
fn every_set_encoding_survives_save_restart_reload_and_loads_into_redis() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), &["--save", ""]);
        let mut c = n.client();
        fill_sets(&mut c);
        before = digest(&mut c);
        let () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
        assert_eq!(digest(&mut c), before);
        for (k, e) in [
            ("ints:1", "intset"),
            ("texts:1", "hashtable"),
            ("bigints", "hashtable"),
        ] {
            let enc: String = redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(k)
                .query(&mut c)
                .unwrap();
            assert_eq!(enc, e, "{k}");
        }
        let () = redis::cmd("SAVE").query(&mut c).unwrap();
    }
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
    let rdir = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("dump.rdb"), rdir.path().join("dump.rdb")).unwrap();
    let redis = ServerProcess::redis(&["--dir", rdir.path().to_str().unwrap()]);
    assert_eq!(digest(&mut redis.client()), before);
    let fresh = ServerProcess::redis(&[]);
    let mut rc = fresh.client();
    fill_sets(&mut rc);
    let () = redis::cmd("PERSIST").arg("ints:5").query(&mut rc).unwrap();
    let () = redis::cmd("PERSIST").arg("ints:5").query(&mut c).unwrap();
    assert_eq!(digest(&mut rc), digest(&mut c));
}

#[test]
fn zset_algebra_takes_sets_as_inputs_scored_one() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "{z}s", "{z}z", "{z}d"]);
    r.cmd(&["SADD", "{z}s", "100", "c"]);
    r.cmd(&["ZADD", "{z}z", "0.5", "c", "2", "x"]);
    check(
        &mut r,
        &[
            (
                &[
                    "ZUNION",
                    "2",
                    "{z}z",
                    "{z}s",
                    "WEIGHTS",
                    "1",
                    "3",
                    "WITHSCORES",
                ],
                bulks(&["x", "2", "100", "3", "c", "3.5"]),
            ),
            (
                &["ZINTER", "2", "{z}z", "{z}s", "WITHSCORES"],
                bulks(&["c", "1.5"]),
            ),
            (&["ZUNIONSTORE", "{z}d", "1", "{z}s"], int(2)),
            (
                &["ZRANGE", "{z}d", "0", "-1", "WITHSCORES"],
                bulks(&["100", "1", "c", "1"]),
            ),
        ],
    );
}
