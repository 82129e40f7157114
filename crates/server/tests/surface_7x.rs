//! The additions of Redis 7.2 and 7.4 that leave 7.0's forms as they were
//! (issue #42): `ZRANK`/`ZREVRANK … WITHSCORE`, `HSCAN … NOVALUES`,
//! `XREAD … +`, `CLIENT KILL MAXAGE`, `CLIENT NO-TOUCH`. Each test runs on
//! ferrokv and on Redis 7.4.1 from `../shared/peers/` (skipped with a
//! printed line where this clone has none), and where the replies are
//! deterministic both servers' bytes are compared, in RESP2 and RESP3.
mod common;

use common::reply::{bulk, err, int, ok};
use common::{compare, wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;

/// ferrokv and, when this clone has it, Redis 7.4.1.
fn servers() -> Vec<ServerProcess> {
    compare::with_redis_7_4(&["--enable-debug-command", "yes"])
}

fn same_replies(setup: &[&[&str]], cmds: &[&[&str]]) -> Vec<Frame> {
    compare::same_replies(&servers(), setup, cmds)
}

#[test]
fn zrank_and_zrevrank_with_score() {
    let setup: &[&[&str]] = &[
        &["ZADD", "z", "1.5", "a", "2", "b", "inf", "c", "-inf", "d"],
        &["SET", "s", "v"],
        // A skiplist-encoded set as well as the listpack above.
        &["CONFIG", "SET", "zset-max-listpack-entries", "2"],
        &["ZADD", "big", "1", "x", "2", "y", "3", "z"],
    ];
    let cmds: &[&[&str]] = &[
        &["ZRANK", "z", "a", "WITHSCORE"],
        &["ZRANK", "z", "a", "withscore"],
        &["ZREVRANK", "z", "a", "WITHSCORE"],
        &["ZRANK", "z", "c", "WITHSCORE"],
        &["ZRANK", "z", "d", "WITHSCORE"],
        &["ZRANK", "z", "missing", "WITHSCORE"],
        &["ZREVRANK", "nokey", "a", "WITHSCORE"],
        &["ZRANK", "z", "a"],
        &["ZRANK", "z", "missing"],
        &["ZRANK", "big", "y", "WITHSCORE"],
        &["ZREVRANK", "big", "x", "WITHSCORE"],
        // The option is judged before the key's type; one word more is
        // an arity error.
        &["ZRANK", "z", "a", "WITHSCORES"],
        &["ZRANK", "s", "a", "WITHSCORE"],
        &["ZRANK", "s", "a", "nope"],
        &["ZRANK", "z", "a", "WITHSCORE", "x"],
        &["ZREVRANK", "z", "a", "WITHSCORE", "x"],
    ];
    let f = same_replies(setup, cmds);
    assert_eq!(f[0], Frame::Array(vec![int(1), bulk("1.5")]));
    assert_eq!(f[2], Frame::Array(vec![int(2), bulk("1.5")]));
    assert_eq!(f[5], Frame::Null);
    assert_eq!(f[11], err("ERR syntax error"));
    assert_eq!(
        f[14],
        err("ERR wrong number of arguments for 'zrank' command")
    );
}

#[test]
fn hscan_novalues() {
    let setup: &[&[&str]] = &[
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["SADD", "s", "x"],
        &["ZADD", "z", "1", "x"],
    ];
    let cmds: &[&[&str]] = &[
        &["HSCAN", "h", "0", "NOVALUES"],
        &["HSCAN", "h", "0", "novalues", "MATCH", "b*"],
        &["HSCAN", "h", "0", "MATCH", "*", "NOVALUES", "COUNT", "5"],
        &["HSCAN", "h", "0", "NOVALUES", "NOVALUES"],
        &["HSCAN", "h", "0"],
        &["HSCAN", "nokey", "0", "NOVALUES"],
        &["HSCAN", "h", "0", "NOVALUES", "COUNT"],
        &["HSCAN", "h", "0", "VALUES"],
        &["SSCAN", "s", "0", "NOVALUES"],
        &["ZSCAN", "z", "0", "NOVALUES"],
        &["SCAN", "0", "NOVALUES"],
        &["HSCAN", "s", "0", "NOVALUES"],
    ];
    let f = same_replies(setup, cmds);
    assert_eq!(
        f[0],
        Frame::Array(vec![
            bulk("0"),
            Frame::Array(vec![bulk("a"), bulk("b"), bulk("c")])
        ])
    );
    assert_eq!(f[8], err("ERR NOVALUES option can only be used in HSCAN"));

    // A hash table: a full walk with NOVALUES gives every field once, and
    // nothing else, on every server.
    for s in servers() {
        let mut r = s.raw();
        let mut args = vec!["HSET".to_string(), "big".to_string()];
        for i in 0..1000 {
            args.push(format!("field:{i}"));
            args.push(format!("value:{i}"));
        }
        assert_eq!(r.cmd(&args), int(1000), "{}", s.name);
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = "0".to_string();
        loop {
            let Frame::Array(v) = r.cmd(&["HSCAN", "big", &cursor, "NOVALUES", "COUNT", "50"])
            else {
                panic!()
            };
            let Frame::Bulk(c) = &v[0] else { panic!() };
            cursor = String::from_utf8(c.clone()).unwrap();
            let Frame::Array(items) = &v[1] else { panic!() };
            for it in items {
                let Frame::Bulk(b) = it else { panic!() };
                let name = String::from_utf8(b.clone()).unwrap();
                assert!(name.starts_with("field:"), "{}: {name}", s.name);
                seen.insert(name);
            }
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 1000, "{}", s.name);
    }
}

#[test]
fn xread_plus_reads_the_last_entry() {
    let setup: &[&[&str]] = &[
        &["XADD", "st", "1-1", "a", "1"],
        &["XADD", "st", "2-0", "b", "2"],
        &["XADD", "emptied", "5-5", "a", "1"],
        &["XDEL", "emptied", "5-5"],
        &["XADD", "gaps", "3-0", "a", "1"],
        &["XADD", "gaps", "4-0", "b", "2"],
        &["XDEL", "gaps", "4-0"],
        &["SET", "str", "x"],
        &["XGROUP", "CREATE", "st", "g", "0"],
    ];
    let cmds: &[&[&str]] = &[
        &["XREAD", "STREAMS", "st", "+"],
        &["XREAD", "COUNT", "5", "STREAMS", "st", "+"],
        &["XREAD", "STREAMS", "st", "nokey", "+", "+"],
        &["XREAD", "STREAMS", "st", "st", "+", "0"],
        &["XREAD", "STREAMS", "emptied", "+"],
        &["XREAD", "STREAMS", "nokey", "+"],
        &["XREAD", "STREAMS", "str", "+"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "st", "+"],
    ];
    let f = same_replies(setup, cmds);
    assert_eq!(
        f[0],
        Frame::Array(vec![Frame::Array(vec![
            bulk("st"),
            Frame::Array(vec![Frame::Array(vec![
                bulk("2-0"),
                Frame::Array(vec![bulk("b"), bulk("2")])
            ])])
        ])])
    );

    // The last entry deleted: `+` reads the last one left. (Redis 7.4.1
    // answers nil here, having taken the deleted entry's ID; later Redis
    // takes the last live entry's, as its comment says it must, and so
    // does ferrokv.)
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    for c in &setup[4..7] {
        r.cmd(c);
    }
    // A stream that never had an entry (MKSTREAM): nothing to read (Redis
    // 7.4.1 answers "ERR the stream last element ID is 0-0").
    r.cmd(&["XGROUP", "CREATE", "fresh", "g", "$", "MKSTREAM"]);
    assert_eq!(r.cmd(&["XREAD", "STREAMS", "fresh", "+"]), Frame::Null);
    assert_eq!(
        r.cmd(&["XREAD", "STREAMS", "gaps", "+"]),
        Frame::Array(vec![Frame::Array(vec![
            bulk("gaps"),
            Frame::Array(vec![Frame::Array(vec![
                bulk("3-0"),
                Frame::Array(vec![bulk("a"), bulk("1")])
            ])])
        ])])
    );

    // Blocked on `+` over a missing stream: the first entry added serves it.
    for s in servers() {
        let mut blocked = s.raw();
        blocked.send(&Frame::command(&[
            "XREAD", "BLOCK", "0", "STREAMS", "later", "+",
        ]));
        let mut r = s.raw();
        common::wait_blocked(&s, 1);
        r.cmd(&["XADD", "later", "7-1", "f", "v"]);
        assert_eq!(
            blocked.read_frame(),
            Frame::Array(vec![Frame::Array(vec![
                bulk("later"),
                Frame::Array(vec![Frame::Array(vec![
                    bulk("7-1"),
                    Frame::Array(vec![bulk("f"), bulk("v")])
                ])])
            ])]),
            "{}",
            s.name
        );
    }
}

fn client_age(r: &mut Raw, id: i64) -> Option<u64> {
    let Frame::Bulk(list) = r.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]) else {
        return None;
    };
    let line = String::from_utf8(list).unwrap();
    line.split(' ')
        .find_map(|f| f.strip_prefix("age="))
        .and_then(|a| a.parse().ok())
}

#[test]
fn client_kill_maxage() {
    let cmds: &[&[&str]] = &[
        &["CLIENT", "KILL", "MAXAGE", "0"],
        &["CLIENT", "KILL", "MAXAGE", "-1"],
        &["CLIENT", "KILL", "MAXAGE", "x"],
        &["CLIENT", "KILL", "MAXAGE", "1.5"],
        &["CLIENT", "KILL", "MAXAGE", "100000"],
        &["CLIENT", "KILL", "MAXAGE", "100000", "SKIPME", "no"],
        &["CLIENT", "KILL", "MAXAGE"],
    ];
    let f = same_replies(&[], cmds);
    assert_eq!(f[0], err("ERR maxage should be greater than 0"));
    assert_eq!(f[2], err("ERR maxage is not an integer or out of range"));
    assert_eq!(f[4], int(0));

    // A connection of at least MAXAGE seconds goes, a younger one stays.
    for s in servers() {
        let mut old = s.raw();
        let Frame::Integer(old_id) = old.cmd(&["CLIENT", "ID"]) else {
            panic!()
        };
        let mut r = s.raw();
        wait_for("the connection to be 2 seconds old", 30, || {
            client_age(&mut r, old_id).filter(|&a| a >= 2)
        });
        let mut young = s.raw();
        let Frame::Integer(young_id) = young.cmd(&["CLIENT", "ID"]) else {
            panic!()
        };
        // `r` itself is as old as `old` (skipped: SKIPME yes is the default).
        let age = client_age(&mut r, young_id).unwrap();
        if age < 2 {
            assert_eq!(
                r.cmd(&["CLIENT", "KILL", "MAXAGE", "2", "ID", &old_id.to_string()]),
                int(1),
                "{}",
                s.name
            );
            assert!(old.is_closed(), "{}", s.name);
            assert_eq!(
                r.cmd(&["CLIENT", "KILL", "MAXAGE", "2", "ID", &young_id.to_string()]),
                int(0),
                "{}",
                s.name
            );
            assert_eq!(young.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
        }
    }
}

fn idle(r: &mut Raw, key: &str) -> i64 {
    match r.cmd(&["OBJECT", "IDLETIME", key]) {
        Frame::Integer(n) => n,
        other => panic!("{other:?}"),
    }
}

fn flags(r: &mut Raw) -> String {
    let Frame::Bulk(line) = r.cmd(&["CLIENT", "INFO"]) else {
        panic!()
    };
    let line = String::from_utf8(line).unwrap();
    line.split(' ')
        .find_map(|f| f.strip_prefix("flags="))
        .unwrap()
        .to_string()
}

#[test]
fn client_no_touch_leaves_the_access_clock() {
    let cmds: &[&[&str]] = &[
        &["CLIENT", "NO-TOUCH", "maybe"],
        &["CLIENT", "NO-TOUCH"],
        &["CLIENT", "NO-TOUCH", "on", "off"],
        &["CLIENT", "NO-TOUCH", "ON"],
        &["CLIENT", "NO-TOUCH", "off"],
    ];
    let f = same_replies(&[], cmds);
    assert_eq!(f[0], err("ERR syntax error"));
    assert_eq!(f[3], ok());

    for s in servers() {
        let mut nt = s.raw();
        let mut plain = s.raw();
        assert_eq!(nt.cmd(&["CLIENT", "NO-TOUCH", "on"]), ok());
        assert_eq!(flags(&mut nt), "T", "{}", s.name);
        assert_eq!(nt.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
        assert_eq!(flags(&mut nt), "eT", "{}", s.name);
        for k in ["a", "b", "c", "d"] {
            plain.cmd(&["SET", k, "v"]);
        }
        wait_for("the keys to be idle 2 seconds", 30, || {
            (idle(&mut plain, "d") >= 2).then_some(())
        });
        // Reads and writes of a no-touch client, directly, in a
        // transaction and from a script, leave the clock alone.
        nt.cmd(&["GET", "a"]);
        nt.cmd(&["APPEND", "b", "x"]);
        nt.cmd(&["MULTI"]);
        nt.cmd(&["GET", "c"]);
        nt.cmd(&["EXEC"]);
        nt.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "d"]);
        for k in ["a", "b", "c", "d"] {
            assert!(idle(&mut plain, k) >= 2, "{}: {k}", s.name);
        }
        // TOUCH is an access even then; another client's read is one.
        assert_eq!(nt.cmd(&["TOUCH", "a"]), int(1));
        assert!(idle(&mut plain, "a") < 2, "{}", s.name);
        plain.cmd(&["GET", "b"]);
        assert!(idle(&mut plain, "b") < 2, "{}", s.name);
        // Turned off, its reads count again; RESET turns it off.
        assert_eq!(nt.cmd(&["CLIENT", "NO-TOUCH", "off"]), ok());
        nt.cmd(&["GET", "c"]);
        assert!(idle(&mut plain, "c") < 2, "{}", s.name);
        nt.cmd(&["CLIENT", "NO-TOUCH", "on"]);
        nt.cmd(&["RESET"]);
        assert_eq!(flags(&mut nt), "N", "{}", s.name);
    }
}
