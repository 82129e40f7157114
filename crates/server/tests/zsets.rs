//! Sorted sets end to end: replies byte-identical to redis-server 7.0 in
//! RESP2 and RESP3 (scores printed as `%.17g`, nested WITHSCORES arrays,
//! NaN errors, bounds), the listpack/skiplist encodings and when they
//! change, both encodings through SAVE + restart, DEBUG RELOAD, files
//! exchanged with a real Redis (same DEBUG DIGEST both ways), the AOF
//! (ZMPOP replayed as ZPOPMIN/ZPOPMAX), and ZSCAN over a changing skiplist.
mod common;

use common::node::{digest, Node, AOF_ALWAYS};
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::process::Command;

/// Sends each command to both servers and asserts identical reply bytes.
fn same_replies(ours: &mut Raw, redis: &mut Raw, script: &[&[&str]]) {
    for cmd in script {
        let (_, a) = redis.try_cmd_bytes(cmd).unwrap();
        let (_, b) = ours.try_cmd_bytes(cmd).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&b),
            String::from_utf8_lossy(&a),
            "reply to {cmd:?} differs (left: ferrokv, right: redis)"
        );
    }
}

fn pair() -> (ServerProcess, ServerProcess) {
    (
        ServerProcess::ferrokv(&["--enable-debug-command", "yes"]),
        ServerProcess::redis(&["--enable-debug-command", "yes"]),
    )
}

const SCRIPT: &[&[&str]] = &[
    &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
    &["ZADD", "z", "NX", "XX", "1", "a"],
    &["ZADD", "z", "GT", "LT", "1", "a"],
    &["ZADD", "z", "INCR", "1", "a", "2", "b"],
    &["ZADD", "z", "1", "a", "x"],
    &["ZADD", "z", "abc", "a"],
    &["ZADD", "z", "XX", "INCR", "5", "nosuch"],
    &["ZADD", "z", "GT", "INCR", "-100", "a"],
    &["ZADD", "z", "CH", "GT", "10", "a", "20", "b", "4", "d"],
    &[
        "ZADD", "z", "0.1", "e", "1e20", "f", "+inf", "g", "-inf", "h", "1.5e-7", "i",
    ],
    &[
        "ZADD",
        "z",
        "123456789.123",
        "j",
        "12345678901234567890",
        "k",
    ],
    &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    &["ZADD", "z", "INCR", "-inf", "g"],
    &["ZINCRBY", "z", "abc", "a"],
    &["ZINCRBY", "z", "0.1", "a"],
    &["ZMSCORE", "z", "a", "nosuch", "f"],
    &["ZCOUNT", "z", "(1", "+inf"],
    &["ZCOUNT", "z", "1", "x"],
    &[
        "ZRANGE",
        "z",
        "(1",
        "20",
        "BYSCORE",
        "LIMIT",
        "1",
        "2",
        "WITHSCORES",
    ],
    &["ZRANGE", "z", "20", "(1", "BYSCORE", "REV", "WITHSCORES"],
    &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"],
    &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
    &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "3"],
    &[
        "ZREVRANGEBYSCORE",
        "z",
        "+inf",
        "-inf",
        "WITHSCORES",
        "LIMIT",
        "2",
        "-1",
    ],
    &["ZREVRANGE", "z", "0", "2", "WITHSCORES"],
    &["ZRANK", "z", "a"],
    &["ZREVRANK", "z", "a"],
    &["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d"],
    &["ZRANGEBYLEX", "lex", "[b", "(d"],
    &["ZREVRANGEBYLEX", "lex", "+", "-", "LIMIT", "1", "2"],
    &["ZRANGEBYLEX", "lex", "b", "d"],
    &["ZLEXCOUNT", "lex", "(a", "+"],
    &["ZREMRANGEBYLEX", "lex", "[b", "[c"],
    &["ZREMRANGEBYRANK", "z", "0", "1"],
    &["ZREMRANGEBYSCORE", "z", "(10", "1e20"],
    &["ZPOPMIN", "z"],
    &["ZPOPMAX", "z", "2"],
    &["ZPOPMIN", "z", "-1"],
    &["ZMPOP", "2", "nokey", "z", "MAX", "COUNT", "2"],
    &["ZMPOP", "1", "nokey", "MIN"],
    &["ZMPOP", "0", "z", "MIN"],
    &["ZADD", "u1", "1", "a", "2", "b", "3", "c"],
    &["ZADD", "u2", "10", "b", "20", "c", "30", "d"],
    &["ZUNION", "2", "u1", "u2", "WEIGHTS", "2", "3", "WITHSCORES"],
    &["ZINTER", "2", "u1", "u2", "AGGREGATE", "MAX", "WITHSCORES"],
    &["ZDIFF", "2", "u1", "u2", "WITHSCORES"],
    &["ZUNION", "2", "u1", "u2", "WEIGHTS", "1"],
    &["ZUNION", "2", "u1", "u2", "WEIGHTS", "1", "x"],
    &["ZUNIONSTORE", "dst", "0", "u1"],
    &["ZINTERSTORE", "dst", "2", "u1", "u2"],
    &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
    &["ZDIFFSTORE", "dst", "2", "u1", "nokey"],
    &["ZRANGESTORE", "dst2", "u1", "1", "2", "BYSCORE", "REV"],
    &["ZRANGE", "dst2", "0", "-1", "WITHSCORES"],
    &["ZADD", "i1", "+inf", "a"],
    &["ZADD", "i2", "-inf", "a"],
    &["ZUNION", "2", "i1", "i2", "WITHSCORES"],
    &["ZINTER", "2", "i1", "i1", "WEIGHTS", "0", "1", "WITHSCORES"],
    &["SET", "str", "x"],
    &["ZADD", "str", "1", "a"],
    &["ZUNION", "2", "u1", "str"],
    &["ZRANDMEMBER", "nokey"],
    &["ZRANDMEMBER", "u1", "0"],
    &["ZRANDMEMBER", "u1", "5", "WITHSCORES"],
    &["ZRANDMEMBER", "u1", "1", "WITHSCORES", "x"],
    &["ZSCAN", "u1", "0"],
    &["ZSCAN", "nokey", "0", "COUNT", "0"],
    &["ZSCAN", "u1", "0", "COUNT", "0"],
    &["DEBUG", "DIGEST-VALUE", "u1", "u2", "dst", "i1"],
    &["DEBUG", "DIGEST"],
];

#[test]
fn replies_match_redis_in_resp2_and_resp3() {
    let (ours, redis) = pair();
    let (mut o, mut r) = (ours.raw(), redis.raw());
    same_replies(&mut o, &mut r, SCRIPT);
    same_replies(&mut o, &mut r, &[&["FLUSHALL"]]);
    // HELLO's own reply names the server: not compared.
    let (_, _) = (o.cmd(&["HELLO", "3"]), r.cmd(&["HELLO", "3"]));
    same_replies(&mut o, &mut r, SCRIPT);
}

#[test]
fn encodings_follow_the_listpack_limits_as_redis() {
    let (ours, redis) = pair();
    let (mut o, mut r) = (ours.raw(), redis.raw());
    let long = "x".repeat(65);
    let mut many = vec!["ZADD", "big"];
    let names: Vec<String> = (0..129).map(|i| format!("m{i}")).collect();
    for n in &names {
        many.push("1");
        many.push(n);
    }
    same_replies(
        &mut o,
        &mut r,
        &[
            &["ZADD", "small", "1", "a"],
            &["OBJECT", "ENCODING", "small"],
            &["ZADD", "small", "2", &long],
            &["OBJECT", "ENCODING", "small"],
            &["ZREM", "small", &long],
            // Never converts back by itself.
            &["OBJECT", "ENCODING", "small"],
            &many,
            &["OBJECT", "ENCODING", "big"],
            // A store destination gets the encoding its size calls for.
            &["ZUNIONSTORE", "u", "1", "small"],
            &["OBJECT", "ENCODING", "u"],
            &["ZRANGESTORE", "r", "big", "0", "-1"],
            &["OBJECT", "ENCODING", "r"],
            &["ZRANGESTORE", "r", "big", "0", "5"],
            &["OBJECT", "ENCODING", "r"],
            &["CONFIG", "SET", "zset-max-ziplist-entries", "2"],
            &["CONFIG", "GET", "zset-max-listpack-entries"],
            &["ZADD", "three", "1", "a", "2", "b", "3", "c"],
            &["OBJECT", "ENCODING", "three"],
            &["CONFIG", "SET", "zset-max-listpack-entries", "0"],
            &["ZADD", "zero", "1", "a"],
            &["OBJECT", "ENCODING", "zero"],
            &["CONFIG", "SET", "zset-max-listpack-value", "1kb"],
            &["CONFIG", "GET", "zset-max-ziplist-value"],
            &["DEBUG", "DIGEST"],
        ],
    );
}

fn fill_both_encodings(c: &mut redis::Connection) {
    let mut p = redis::pipe();
    p.cmd("ZADD")
        .arg("lp")
        .arg(1.5)
        .arg("a")
        .arg(-0.25)
        .arg("b")
        .ignore();
    p.cmd("ZADD")
        .arg("lp")
        .arg("+inf")
        .arg("c")
        .arg("1e20")
        .arg("d")
        .ignore();
    for i in 0..1000 {
        p.cmd("ZADD")
            .arg("sk")
            .arg(format!("{}", (i * 37 % 101) as f64 / 7.0))
            .arg(format!("member:{i}"))
            .ignore();
    }
    p.cmd("ZADD")
        .arg("long")
        .arg(1)
        .arg("y".repeat(100))
        .ignore();
    // A skiplist that shrank: Redis writes it as ZSET_2, loads a listpack.
    p.cmd("ZADD")
        .arg("shrunk")
        .arg(1)
        .arg("y".repeat(100))
        .ignore();
    p.cmd("ZADD").arg("shrunk").arg(2).arg("s").ignore();
    p.cmd("ZREM").arg("shrunk").arg("y".repeat(100)).ignore();
    p.cmd("ZADD").arg("ttl").arg(1).arg("a").ignore();
    p.cmd("PEXPIRE").arg("ttl").arg(100_000_000).ignore();
    p.query::<()>(c).unwrap();
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(c)
        .unwrap()
}

#[test]
fn both_encodings_survive_save_restart_and_debug_reload() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), &["--save", "", "--enable-debug-command", "yes"]);
        let mut c = n.client();
        fill_both_encodings(&mut c);
        assert_eq!(encoding(&mut c, "lp"), "listpack");
        assert_eq!(encoding(&mut c, "sk"), "skiplist");
        assert_eq!(encoding(&mut c, "shrunk"), "skiplist");
        before = digest(&mut c);
        let () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
        assert_eq!(digest(&mut c), before);
        // Loading picks the encoding by size, as Redis's loader does.
        assert_eq!(encoding(&mut c, "shrunk"), "listpack");
        assert_eq!(encoding(&mut c, "sk"), "skiplist");
        assert_eq!(encoding(&mut c, "long"), "skiplist");
        let () = redis::cmd("SAVE").query(&mut c).unwrap();
    }
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
    let rank: i64 = redis::cmd("ZRANK")
        .arg("sk")
        .arg("member:500")
        .query(&mut c)
        .unwrap();
    let range: Vec<String> = redis::cmd("ZRANGE")
        .arg("sk")
        .arg(rank)
        .arg(rank)
        .query(&mut c)
        .unwrap();
    assert_eq!(range, vec!["member:500"]);
    let ttl: i64 = redis::cmd("PTTL").arg("ttl").query(&mut c).unwrap();
    assert!(ttl > 0);
}

#[test]
fn files_move_between_ferrokv_and_redis_with_the_same_digest() {
    // ferrokv -> redis-check-rdb and redis-server.
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    fill_both_encodings(&mut c);
    let ours = digest(&mut c);
    let () = redis::cmd("SAVE").query(&mut c).unwrap();
    let rdb = dir.path().join("dump.rdb");
    let out = Command::new("redis-check-rdb").arg(&rdb).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
    let rdir = tempfile::tempdir().unwrap();
    std::fs::copy(&rdb, rdir.path().join("dump.rdb")).unwrap();
    let r = ServerProcess::redis(&["--dir", rdir.path().to_str().unwrap()]);
    let mut rc = r.client();
    assert_eq!(digest(&mut rc), ours);
    // redis -> ferrokv: a file Redis wrote (listpack and skiplist zsets).
    let () = redis::cmd("FLUSHALL").query(&mut rc).unwrap();
    fill_both_encodings(&mut rc);
    let theirs = digest(&mut rc);
    let () = redis::cmd("SAVE").query(&mut rc).unwrap();
    drop(n);
    let fdir = tempfile::tempdir().unwrap();
    std::fs::copy(rdir.path().join("dump.rdb"), fdir.path().join("dump.rdb")).unwrap();
    let n = Node::start(fdir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), theirs);
    assert_eq!(encoding(&mut c, "sk"), "skiplist");
    assert_eq!(encoding(&mut c, "lp"), "listpack");
}

#[test]
fn aof_replays_pops_and_stores_to_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), AOF_ALWAYS);
        let mut c = n.client();
        fill_both_encodings(&mut c);
        let mut p = redis::pipe();
        p.cmd("ZMPOP")
            .arg(2)
            .arg("nokey")
            .arg("sk")
            .arg("MAX")
            .arg("COUNT")
            .arg(3)
            .ignore();
        p.cmd("ZMPOP").arg(1).arg("lp").arg("MIN").ignore();
        p.cmd("ZPOPMIN").arg("sk").arg(10).ignore();
        p.cmd("ZUNIONSTORE")
            .arg("u")
            .arg(2)
            .arg("sk")
            .arg("lp")
            .arg("WEIGHTS")
            .arg(2)
            .arg(0.5)
            .ignore();
        p.cmd("ZINCRBY")
            .arg("u")
            .arg("0.1")
            .arg("member:3")
            .ignore();
        p.cmd("ZREMRANGEBYSCORE")
            .arg("sk")
            .arg("(5")
            .arg("+inf")
            .ignore();
        p.query::<()>(&mut c).unwrap();
        before = digest(&mut c);
    }
    let n = Node::start(dir.path(), &["--save", "", "--appendonly", "yes"]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
}

#[test]
fn zscan_returns_every_member_present_throughout_exactly_once() {
    let s = ServerProcess::ferrokv(&[]);
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..3000 {
        p.cmd("ZADD").arg("z").arg(i).arg(format!("m{i}")).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    let mut cursor = 0u64;
    let mut seen = std::collections::HashMap::new();
    let mut round = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("ZSCAN")
            .arg("z")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut c)
            .unwrap();
        for pair in batch.chunks(2) {
            *seen.entry(pair[0].clone()).or_insert(0) += 1;
        }
        // Meanwhile members come and go (only the odd ones).
        round += 1;
        let _: i64 = redis::cmd("ZREM")
            .arg("z")
            .arg(format!("m{}", 2 * round + 1))
            .query(&mut c)
            .unwrap();
        let _: i64 = redis::cmd("ZADD")
            .arg("z")
            .arg(-1)
            .arg(format!("new{round}"))
            .query(&mut c)
            .unwrap();
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    for i in (0..3000).step_by(2) {
        assert_eq!(seen.get(&format!("m{i}")), Some(&1), "m{i}");
    }
    assert!(seen.values().all(|&n| n == 1), "a member came back twice");
}

#[test]
fn rank_and_range_stay_fast_on_a_large_set() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..100_000 {
        p.cmd("ZADD")
            .arg("big")
            .arg(i)
            .arg(format!("m{i}"))
            .ignore();
    }
    p.query::<()>(&mut c).unwrap();
    let t = std::time::Instant::now();
    for i in (0..100_000).step_by(97) {
        let m = format!("m{i}");
        assert_eq!(r.cmd(&["ZRANK", "big", &m]), Frame::Integer(i));
        let rank = i.to_string();
        let f = r.cmd(&["ZRANGE", "big", &rank, &rank]);
        assert_eq!(f, Frame::Array(vec![Frame::Bulk(m.into_bytes())]));
    }
    assert_eq!(
        r.cmd(&["ZCOUNT", "big", "(1000", "50000"]),
        Frame::Integer(49_000)
    );
    // ~2000 rank lookups: a linear walk of 100k members each would take seconds.
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}

/// The keyspace events a script raises, in order, as (event, key).
fn events(server: &ServerProcess, script: &[&[&str]]) -> Vec<(String, String)> {
    let mut c = server.raw();
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAn"]);
    let mut conn = server.client();
    let mut sub = conn.as_pubsub();
    sub.psubscribe("__keyevent@*").unwrap();
    for cmd in script {
        c.cmd(cmd);
    }
    c.cmd(&["PUBLISH", "__keyevent@0__:end", "end"]);
    let mut out = Vec::new();
    loop {
        let m = sub.get_message().unwrap();
        let event = m
            .get_channel_name()
            .split(':')
            .nth(1)
            .unwrap_or("")
            .to_string();
        if event == "end" {
            return out;
        }
        out.push((event, m.get_payload::<String>().unwrap()));
    }
}

#[test]
fn keyspace_events_match_redis() {
    let (ours, redis) = pair();
    let script: &[&[&str]] = &[
        &["ZADD", "z", "1", "a", "2", "b"],
        &["ZADD", "z", "1", "a"],
        &["ZADD", "z", "INCR", "1", "a"],
        &["ZINCRBY", "z", "1", "b"],
        &["ZREM", "z", "nosuch"],
        &["ZREM", "z", "a"],
        &["ZPOPMIN", "z"],
        &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"],
        &["ZPOPMAX", "z", "2"],
        &["ZREMRANGEBYRANK", "z", "0", "0"],
        &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"],
        &["ZADD", "l", "0", "a", "0", "b"],
        &["ZREMRANGEBYLEX", "l", "-", "+"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["ZUNIONSTORE", "d", "1", "z"],
        &["ZINTERSTORE", "d", "1", "z"],
        &["ZDIFFSTORE", "d", "2", "z", "z"],
        &["ZRANGESTORE", "d", "z", "0", "-1"],
        &["ZRANGESTORE", "d", "z", "5", "6"],
        &["ZMPOP", "1", "z", "MIN", "COUNT", "5"],
    ];
    assert_eq!(events(&ours, script), events(&redis, script));
}

/// What a blocked pop answers once another client adds to its key.
fn woken_reply(server: &ServerProcess, resp3: bool, block: &[&str], feed: &[&str]) -> Vec<u8> {
    let mut waiter = server.raw();
    if resp3 {
        waiter.cmd(&["HELLO", "3"]);
    }
    waiter.send(&Frame::command(block));
    // The waiter is parked once the server counts it as blocked.
    let mut c = server.raw();
    common::wait_for("the client to block", 5, || {
        let Frame::Bulk(info) = c.cmd(&["INFO", "clients"]) else {
            return None;
        };
        String::from_utf8_lossy(&info)
            .contains("blocked_clients:1")
            .then_some(())
    });
    c.cmd(feed);
    let (_, bytes) = waiter.try_cmd_bytes(&["PING"]).unwrap();
    bytes
}

#[test]
fn blocking_pops_wake_and_reply_as_redis() {
    let (ours, redis) = pair();
    let cases: &[(bool, &[&str], &[&str])] = &[
        (
            false,
            &["BZPOPMIN", "k1", "k2", "5"],
            &["ZADD", "k2", "1", "a", "2", "b"],
        ),
        (
            true,
            &["BZPOPMAX", "k3", "0"],
            &["ZADD", "k3", "1.5", "a", "2", "b"],
        ),
        (
            false,
            &["BZMPOP", "5", "2", "k4", "k5", "MAX", "COUNT", "3"],
            &["ZADD", "k5", "1", "a", "2", "b"],
        ),
        (
            true,
            &["BZMPOP", "0", "1", "k6", "MIN"],
            &["ZADD", "k6", "1", "a", "2", "b"],
        ),
    ];
    for (resp3, block, feed) in cases {
        let a = woken_reply(&ours, *resp3, block, feed);
        let b = woken_reply(&redis, *resp3, block, feed);
        // The woken reply is read together with the PING's: compare the
        // prefix up to the PING reply, which both end with.
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{block:?}"
        );
    }
    let (mut o, mut r) = (ours.raw(), redis.raw());
    same_replies(
        &mut o,
        &mut r,
        &[
            &["ZADD", "ready", "1", "a", "2", "b"],
            &["BZPOPMIN", "nokey", "ready", "1"],
            &["BZMPOP", "1", "1", "ready", "MAX", "COUNT", "5"],
            &["BZPOPMIN", "nokey", "0.05"],
            &["BZMPOP", "0.05", "1", "nokey", "MIN"],
            &["BZPOPMIN", "nokey", "-1"],
            &["BZPOPMIN", "nokey", "abc"],
            &["BZMPOP", "0", "0", "nokey", "MIN"],
            &["SET", "str", "x"],
            &["BZPOPMAX", "str", "0"],
            &["MULTI"],
            &["BZPOPMIN", "nokey", "0"],
            &["EXEC"],
            &["ZRANGE", "k2", "0", "-1", "WITHSCORES"],
            &["DEBUG", "DIGEST"],
        ],
    );
}

#[test]
fn blocking_pops_reach_the_aof_as_zpop() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), AOF_ALWAYS);
        let mut c = n.client();
        let mut p = redis::pipe();
        p.cmd("ZADD")
            .arg("z")
            .arg(1)
            .arg("a")
            .arg(2)
            .arg("b")
            .arg(3)
            .arg("c")
            .ignore();
        p.cmd("BZPOPMAX").arg("z").arg(0).ignore();
        p.cmd("BZMPOP")
            .arg(0)
            .arg(1)
            .arg("z")
            .arg("MIN")
            .arg("COUNT")
            .arg(1)
            .ignore();
        p.query::<()>(&mut c).unwrap();
        before = digest(&mut c);
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg("z")
            .arg(0)
            .arg(-1)
            .query(&mut c)
            .unwrap();
        assert_eq!(members, vec!["b"]);
    }
    let aof = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .find(|d| d.windows(7).any(|w| w == b"ZPOPMAX"))
        .expect("an AOF file with the pops");
    let text = String::from_utf8_lossy(&aof);
    assert!(
        !text.contains("BZPOP") && !text.contains("BZMPOP"),
        "{text}"
    );
    assert!(text.contains("ZPOPMIN"), "{text}");
    let n = Node::start(dir.path(), &["--save", "", "--appendonly", "yes"]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
}

#[test]
fn set_algebra_takes_plain_sets_as_score_one() {
    let (ours, redis) = pair();
    let (mut o, mut r) = (ours.raw(), redis.raw());
    same_replies(
        &mut o,
        &mut r,
        &[
            &["SADD", "s1", "a", "b", "c"],
            &["SADD", "s2", "1", "2", "3"],
            &["ZADD", "z1", "5", "a", "7", "x", "2", "1"],
            &[
                "ZUNION",
                "3",
                "z1",
                "s1",
                "s2",
                "WEIGHTS",
                "2",
                "3",
                "4",
                "WITHSCORES",
            ],
            &["ZINTER", "2", "s2", "z1", "AGGREGATE", "MAX", "WITHSCORES"],
            &["ZDIFF", "2", "s1", "z1", "WITHSCORES"],
            &["ZUNIONSTORE", "d", "2", "s1", "s2"],
            &["ZRANGE", "d", "0", "-1", "WITHSCORES"],
            &["OBJECT", "ENCODING", "d"],
            &["LPUSH", "l", "a"],
            &["ZUNION", "2", "z1", "l"],
            &["DEBUG", "DIGEST"],
        ],
    );
}

/// The pops of the AOF files in `dir`'s appendonlydir, in order: the
/// `ZPOPMIN`/`ZPOPMAX` commands with their arguments.
fn aof_pops(dir: &std::path::Path) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".incr."))
        .collect();
    files.sort();
    let mut pops = Vec::new();
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        // RESP arrays: "*n", then "$len" / value pairs.
        let lines: Vec<&str> = text.split("\r\n").collect();
        let mut i = 0;
        while i < lines.len() {
            if let Some(n) = lines[i].strip_prefix('*') {
                let n: usize = n.parse().unwrap();
                let args: Vec<&str> = (0..n).map(|k| lines[i + 2 + 2 * k]).collect();
                if args[0].to_ascii_uppercase().starts_with("ZPOP") {
                    pops.push(args.join(" ").to_ascii_uppercase());
                }
                i += 1 + 2 * n;
            } else {
                i += 1;
            }
        }
    }
    pops
}

/// ZMPOP and BZMPOP reach the AOF (and replicas) as Redis writes them:
/// `ZPOPMIN|ZPOPMAX key <count actually popped>`, not the count asked
/// for (t_zset.c's genericZpopCommand); BZPOPMIN without a count.
/// Compared with redis-server's own AOF.
#[test]
fn zmpop_propagates_the_count_actually_popped() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let ours = ServerProcess::ferrokv(&aof);
    let redis = ServerProcess::redis(&aof);
    for s in [&ours, &redis] {
        let mut c = s.raw();
        for cmd in [
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"][..],
            &["ZMPOP", "1", "z", "MIN", "COUNT", "10"],
            &["ZADD", "y", "1", "a", "2", "b", "3", "c"],
            &["ZMPOP", "2", "nokey", "y", "MAX"],
            &["BZMPOP", "0", "1", "y", "MAX", "COUNT", "7"],
            &["ZADD", "x", "1", "a"],
            &["BZPOPMIN", "x", "0"],
        ] {
            assert!(!matches!(c.cmd(cmd), Frame::Error(_)), "{cmd:?}");
        }
    }
    let expected = ["ZPOPMIN Z 3", "ZPOPMAX Y 1", "ZPOPMAX Y 2", "ZPOPMIN X"];
    assert_eq!(aof_pops(redis.dir.path()), expected);
    assert_eq!(aof_pops(ours.dir.path()), expected);
}
