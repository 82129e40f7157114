//! Guards the stream commands on entries against Redis 7.0.15: XADD (IDs
//! generated, explicit, `ms-*`; NOMKSTREAM; MAXLEN/MINID with `=`, `~`
//! and LIMIT), XRANGE/XREVRANGE (exclusive bounds, COUNT), XDEL, XTRIM,
//! XLEN, XSETID, XREAD (several streams, `$`, COUNT, RESP2 and RESP3
//! shapes, BLOCK woken by another client, timeouts, MULTI), their error
//! texts, TYPE/OBJECT ENCODING, keyspace events, and what is propagated
//! (the AOF); and streams crossing to redis-server and back by RDB and
//! DUMP/RESTORE with equal digests.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run them against the real
//! `redis-server` (the cross-server tests need ferrokv and skip).
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::ServerProcess;
use ferrokv_resp::Frame;
use std::time::Duration;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const INVALID: &str = "ERR Invalid stream ID specified as stream command argument";
const TOP: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

fn entry(id: &str, fields: &[&str]) -> Frame {
    arr(vec![bulk(id), bulks(fields)])
}

#[test]
fn xadd_ids_options_and_errors_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "x1:s", "x1:str", "x1:none"]);
    r.cmd(&["SET", "x1:str", "v"]);
    check(
        &mut r,
        &[
            (&["XADD", "x1:s", "1-1", "a", "1"], bulk("1-1")),
            (&["XADD", "x1:s", "1-1", "a", "1"], err(TOP)),
            (&["XADD", "x1:s", "1", "a", "1"], err(TOP)),
            (&["XADD", "x1:s", "1-*", "a", "1"], bulk("1-2")),
            (&["XADD", "x1:s", "5", "a", "1"], bulk("5-0")),
            (&["XADD", "x1:s", "5-*", "b", ""], bulk("5-1")),
            (&["XADD", "x1:s", "0-0", "a", "1"], err("ERR The ID specified in XADD must be greater than 0-0")),
            (&["XADD", "x1:s", "0-*", "a", "1"], err(TOP)),
            (&["XADD", "x1:s", "abc", "a", "1"], err(INVALID)),
            (&["XADD", "x1:s", "1-x", "a", "1"], err(INVALID)),
            (&["XADD", "x1:s", "-", "a", "1"], err(INVALID)),
            (&["XADD", "x1:s", "+", "a", "1"], err(INVALID)),
            (&["XADD", "x1:s", "*", "a"], err("ERR wrong number of arguments for 'xadd' command")),
            (&["XADD", "x1:s", "*"], err("ERR wrong number of arguments for 'xadd' command")),
            (&["XADD", "x1:s", "NOMKSTREAM"], err("ERR wrong number of arguments for 'xadd' command")),
            (&["XADD", "x1:none", "NOMKSTREAM", "*", "a", "1"], nil()),
            (&["EXISTS", "x1:none"], int(0)),
            (&["XADD", "x1:str", "*", "a", "1"], err(WRONGTYPE)),
            (&["XADD", "x1:s", "MAXLEN", "-1", "*", "a", "1"], err("ERR The MAXLEN argument must be >= 0.")),
            (&["XADD", "x1:s", "MAXLEN", "x", "*", "a", "1"], err("ERR value is not an integer or out of range")),
            (&["XADD", "x1:s", "MAXLEN", "1", "MINID", "1", "*", "a", "1"], err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")),
            (&["XADD", "x1:s", "LIMIT", "1", "*", "a", "1"], err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")),
            (&["XADD", "x1:s", "MAXLEN", "1", "LIMIT", "1", "*", "a", "1"], err("ERR syntax error, LIMIT cannot be used without the special ~ option")),
            (&["XADD", "x1:s", "MAXLEN", "~", "1", "LIMIT", "-1", "*", "a", "1"], err("ERR The LIMIT argument must be >= 0.")),
            (&["XADD", "x1:s", "MINID", "x", "*", "a", "1"], err(INVALID)),
            (&["XLEN", "x1:s"], int(4)),
            (&["XADD", "x1:s", "MAXLEN", "=", "2", "9-0", "c", "3"], bulk("9-0")),
            (&["XLEN", "x1:s"], int(2)),
            (&["XRANGE", "x1:s", "-", "+"], arr(vec![entry("5-1", &["b", ""]), entry("9-0", &["c", "3"])])),
            (&["XADD", "x1:s", "MINID", "9", "10-0", "d", "4"], bulk("10-0")),
            (&["XRANGE", "x1:s", "-", "+"], arr(vec![entry("9-0", &["c", "3"]), entry("10-0", &["d", "4"])])),
            (&["XLEN", "x1:str"], err(WRONGTYPE)),
            (&["XLEN", "x1:none"], int(0)),
            (&["TYPE", "x1:s"], Frame::Simple(b"stream".to_vec())),
            (&["OBJECT", "ENCODING", "x1:s"], bulk("stream")),
        ],
    );
    // A generated ID is the clock's millisecond, or the last one's next.
    let Frame::Bulk(id) = r.cmd(&["XADD", "x1:s", "*", "e", "5"]) else {
        panic!("XADD *")
    };
    let id = String::from_utf8(id).unwrap();
    let (ms, seq) = id.split_once('-').unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(ms.parse::<u64>().unwrap().abs_diff(now) < 60_000, "{id}");
    assert_eq!(seq, "0");
    r.cmd(&[
        "XADD",
        "x1:max",
        "18446744073709551615-18446744073709551615",
        "a",
        "1",
    ]);
    check(
        &mut r,
        &[
            (
                &["XADD", "x1:max", "*", "a", "1"],
                err("ERR The stream has exhausted the last possible ID, unable to add more items"),
            ),
            (
                &["XADD", "x1:max2", "18446744073709551615-*", "a", "1"],
                bulk("18446744073709551615-0"),
            ),
            (&["DEL", "x1:max", "x1:max2", "x1:s", "x1:str"], int(4)),
        ],
    );
}

#[test]
fn ranges_deletes_and_setid_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "x2:s", "x2:str"]);
    r.cmd(&["SET", "x2:str", "v"]);
    for i in 1..=6 {
        r.cmd(&[
            "XADD",
            "x2:s",
            &format!("{i}-0"),
            "f",
            &i.to_string(),
            "g",
            "x",
        ]);
    }
    let e = |i: u32| entry(&format!("{i}-0"), &["f", &i.to_string(), "g", "x"]);
    check(
        &mut r,
        &[
            (&["XRANGE", "x2:s", "-", "+", "COUNT", "2"], arr(vec![e(1), e(2)])),
            (&["XRANGE", "x2:s", "(1-0", "3"], arr(vec![e(2), e(3)])),
            (&["XRANGE", "x2:s", "2", "(4-0"], arr(vec![e(2), e(3)])),
            // `(4` is below 4-MAX: 4-0 is in.
            (&["XRANGE", "x2:s", "(2", "(4"], arr(vec![e(3), e(4)])),
            (&["XREVRANGE", "x2:s", "+", "-", "COUNT", "2"], arr(vec![e(6), e(5)])),
            (&["XREVRANGE", "x2:s", "(5-0", "(2-0"], arr(vec![e(4), e(3)])),
            (&["XRANGE", "x2:s", "5", "2"], arr(vec![])),
            (&["XRANGE", "x2:s", "-", "+", "COUNT", "0"], Frame::Null),
            (&["XRANGE", "x2:s", "-", "+", "COUNT", "-5"], Frame::Null),
            (&["XRANGE", "x2:none", "-", "+", "COUNT", "0"], arr(vec![])),
            (&["XRANGE", "x2:s", "-", "+", "COUNT"], err("ERR syntax error")),
            (&["XRANGE", "x2:s", "-", "+", "FOO", "1"], err("ERR syntax error")),
            (&["XRANGE", "x2:s", "(-", "+"], err(INVALID)),
            (&["XREVRANGE", "x2:s", "(+", "-"], err(INVALID)),
            (&["XRANGE", "x2:s", "(18446744073709551615-18446744073709551615", "+"], err("ERR invalid start ID for the interval")),
            (&["XRANGE", "x2:s", "-", "(0-0"], err("ERR invalid end ID for the interval")),
            (&["XRANGE", "x2:s", "x", "+"], err(INVALID)),
            (&["XRANGE", "x2:str", "-", "+"], err(WRONGTYPE)),
            (&["XDEL", "x2:s", "2-0", "4", "9-9"], int(2)),
            (&["XDEL", "x2:s", "2-0"], int(0)),
            (&["XDEL", "x2:s", "3-0", "bad"], err(INVALID)),
            (&["XLEN", "x2:s"], int(4)),
            (&["XDEL", "x2:none", "1-0"], int(0)),
            (&["XDEL", "x2:str", "1-0"], err(WRONGTYPE)),
            (&["XRANGE", "x2:s", "-", "+"], arr(vec![e(1), e(3), e(5), e(6)])),
            (&["XSETID", "x2:s", "5-0"], err("ERR The ID specified in XSETID is smaller than the target stream top item")),
            (&["XSETID", "x2:s", "7-0", "ENTRIESADDED", "2"], err("ERR The entries_added specified in XSETID is smaller than the target stream length")),
            (&["XSETID", "x2:s", "7-0", "ENTRIESADDED", "-1"], err("ERR entries_added must be positive")),
            (&["XSETID", "x2:s", "7-0", "MAXDELETEDID", "8-0"], err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")),
            (&["XSETID", "x2:s", "7-0", "FOO"], err("ERR syntax error")),
            (&["XSETID", "x2:none", "7-0"], err("ERR no such key")),
            (&["XSETID", "x2:str", "7-0"], err(WRONGTYPE)),
            (&["XSETID", "x2:s", "-"], err(INVALID)),
            (&["XSETID", "x2:s", "7-0", "ENTRIESADDED", "10", "MAXDELETEDID", "4-0"], ok()),
            (&["XADD", "x2:s", "7-0", "a", "b"], err(TOP)),
            (&["XADD", "x2:s", "7-*", "a", "b"], bulk("7-1")),
            (&["XTRIM", "x2:s", "MAXLEN", "2"], int(3)),
            (&["XTRIM", "x2:s", "MAXLEN", "2"], int(0)),
            (&["XTRIM", "x2:s", "MINID", "7"], int(1)),
            (&["XTRIM", "x2:s"], err("ERR wrong number of arguments for 'xtrim' command")),
            (&["XTRIM", "x2:s", "FOO", "1"], err("ERR syntax error")),
            (&["XTRIM", "x2:s", "LIMIT", "1", "FOO"], err("ERR syntax error")),
            (&["XTRIM", "x2:none", "MAXLEN", "0"], int(0)),
            (&["XTRIM", "x2:str", "MAXLEN", "0"], err(WRONGTYPE)),
            (&["XRANGE", "x2:s", "-", "+"], arr(vec![entry("7-1", &["a", "b"])])),
            (&["XDEL", "x2:s", "7-1"], int(1)),
            (&["XLEN", "x2:s"], int(0)),
            (&["EXISTS", "x2:s"], int(1)),
            (&["DEL", "x2:s", "x2:str"], int(2)),
        ],
    );
}

#[test]
fn approximate_trims_drop_whole_nodes_as_redis() {
    let s = own_server(&[]);
    let mut r = s.raw();
    r.cmd(&["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for i in 1..=95 {
        r.cmd(&["XADD", "x3:s", &format!("{i}-0"), "f", "v"]);
    }
    check(
        &mut r,
        &[
            // Nodes of 10: ~ keeps whole nodes, LIMIT caps what goes.
            (&["XTRIM", "x3:s", "MAXLEN", "~", "42"], int(50)),
            (&["XLEN", "x3:s"], int(45)),
            (
                &["XTRIM", "x3:s", "MAXLEN", "~", "0", "LIMIT", "15"],
                int(10),
            ),
            (&["XTRIM", "x3:s", "MINID", "~", "77"], int(10)),
            (&["XLEN", "x3:s"], int(25)),
            (&["XTRIM", "x3:s", "MINID", "=", "90"], int(19)),
            (
                &["XRANGE", "x3:s", "-", "+", "COUNT", "1"],
                arr(vec![entry("90-0", &["f", "v"])]),
            ),
            (
                &["XADD", "x3:s", "MAXLEN", "~", "1", "96-0", "f", "v"],
                bulk("96-0"),
            ),
            (&["XLEN", "x3:s"], int(6)),
        ],
    );
}

#[test]
fn xread_serves_streams_above_their_ids_in_both_protocols() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "x4:a", "x4:b", "x4:str"]);
    r.cmd(&["SET", "x4:str", "v"]);
    r.cmd(&["XADD", "x4:a", "1-0", "f", "1"]);
    r.cmd(&["XADD", "x4:a", "2-0", "f", "2"]);
    r.cmd(&["XADD", "x4:b", "3-0", "g", "3"]);
    let a1 = entry("1-0", &["f", "1"]);
    let a2 = entry("2-0", &["f", "2"]);
    let b3 = entry("3-0", &["g", "3"]);
    check(
        &mut r,
        &[
            (&["XREAD", "STREAMS", "x4:a", "x4:b", "0", "0"], arr(vec![
                arr(vec![bulk("x4:a"), arr(vec![a1.clone(), a2.clone()])]),
                arr(vec![bulk("x4:b"), arr(vec![b3.clone()])]),
            ])),
            (&["XREAD", "COUNT", "1", "STREAMS", "x4:a", "x4:b", "0", "3"], arr(vec![
                arr(vec![bulk("x4:a"), arr(vec![a1.clone()])]),
            ])),
            (&["XREAD", "COUNT", "0", "STREAMS", "x4:a", "1-0"], arr(vec![
                arr(vec![bulk("x4:a"), arr(vec![a2.clone()])]),
            ])),
            (&["XREAD", "STREAMS", "x4:a", "$"], Frame::Null),
            (&["XREAD", "STREAMS", "x4:none", "0"], Frame::Null),
            (&["XREAD", "STREAMS", "x4:a", "x4:b", "0"], err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")),
            (&["XREAD", "STREAMS", "x4:a", ">"], err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")),
            (&["XREAD", "STREAMS", "x4:a", "-"], err(INVALID)),
            (&["XREAD", "COUNT", "1", "x4:a", "0"], err("ERR syntax error")),
            (&["XREAD", "GROUP", "g", "STREAMS", "x4:a", "0"], err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")),
            (&["XREAD", "NOACK", "STREAMS", "x4:a", "0"], err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")),
            (&["XREAD", "COUNT", "x", "STREAMS", "x4:a", "0"], err("ERR value is not an integer or out of range")),
            (&["XREAD", "BLOCK", "-1", "STREAMS", "x4:a", "0"], err("ERR timeout is negative")),
            (&["XREAD", "BLOCK", "x", "STREAMS", "x4:a", "0"], err("ERR timeout is not an integer or out of range")),
            (&["XREAD", "STREAMS", "x4:str", "0"], err(WRONGTYPE)),
            (&["XREAD", "STREAMS", "x4:a", "x4:str", "0", "0"], err(WRONGTYPE)),
            // Deleted entries: the last live one must be above the ID.
            (&["XDEL", "x4:b", "3-0"], int(1)),
            (&["XREAD", "STREAMS", "x4:b", "0"], Frame::Null),
        ],
    );
    // In a transaction BLOCK answers as a timeout.
    check(
        &mut r,
        &[
            (&["MULTI"], ok()),
            (
                &["XREAD", "BLOCK", "0", "STREAMS", "x4:a", "$"],
                Frame::Simple(b"QUEUED".to_vec()),
            ),
            (&["EXEC"], arr(vec![Frame::Null])),
        ],
    );
    // RESP3: a map of key to entries.
    r.cmd(&["HELLO", "3"]);
    assert_eq!(
        r.cmd(&["XREAD", "STREAMS", "x4:a", "1"]),
        Frame::Map(vec![(bulk("x4:a"), arr(vec![a2]))])
    );
    assert_eq!(r.cmd(&["XREAD", "STREAMS", "x4:a", "$"]), Frame::Null);
    r.cmd(&["DEL", "x4:a", "x4:b", "x4:str"]);
}

#[test]
fn a_blocked_xread_is_woken_by_xadd_only_for_new_entries() {
    let s = server();
    let mut w = s.raw();
    let mut r = s.raw();
    w.cmd(&["DEL", "x5:a", "x5:b"]);
    w.cmd(&["XADD", "x5:a", "5-0", "f", "old"]);
    // `$` means what the stream holds when the client blocks.
    r.send(b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$5\r\n10000\r\n$7\r\nSTREAMS\r\n$4\r\nx5:a\r\n$1\r\n$\r\n");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(w.cmd(&["XADD", "x5:a", "6-0", "f", "new"]), bulk("6-0"));
    assert_eq!(
        r.read_frame(),
        arr(vec![arr(vec![
            bulk("x5:a"),
            arr(vec![entry("6-0", &["f", "new"])])
        ])])
    );
    // Waiting on two streams: the first write serves it, for that key alone.
    r.send(b"*8\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n$7\r\nSTREAMS\r\n$4\r\nx5:b\r\n$4\r\nx5:a\r\n$1\r\n$\r\n$1\r\n$\r\n");
    std::thread::sleep(Duration::from_millis(100));
    w.cmd(&["XADD", "x5:b", "1-0", "g", "1"]);
    assert_eq!(
        r.read_frame(),
        arr(vec![arr(vec![
            bulk("x5:b"),
            arr(vec![entry("1-0", &["g", "1"])])
        ])])
    );
    // A timeout is a null array.
    let t0 = std::time::Instant::now();
    assert_eq!(
        r.cmd(&["XREAD", "BLOCK", "200", "STREAMS", "x5:a", "$"]),
        Frame::Null
    );
    assert!(t0.elapsed() >= Duration::from_millis(150));
    w.cmd(&["DEL", "x5:a", "x5:b"]);
}

use common::aof_text;

#[test]
fn xadd_and_trims_are_propagated_in_their_deterministic_form() {
    let p = if against_redis() {
        ServerProcess::redis(&["--appendonly", "yes", "--stream-node-max-entries", "2"])
    } else {
        ServerProcess::ferrokv(&["--appendonly", "yes", "--stream-node-max-entries", "2"])
    };
    let mut r = p.raw();
    let Frame::Bulk(id) = r.cmd(&["XADD", "x6:s", "*", "a", "1"]) else {
        panic!("XADD")
    };
    let id = String::from_utf8(id).unwrap();
    for i in 0..5 {
        r.cmd(&["XADD", "x6:s", "*", "n", &i.to_string()]);
    }
    r.cmd(&["XADD", "x6:s", "MAXLEN", "~", "3", "*", "t", "1"]);
    assert_eq!(r.cmd(&["XTRIM", "x6:s", "MINID", "~", "0"]), int(0));
    r.cmd(&["XTRIM", "x6:s", "MAXLEN", "1"]);
    r.cmd(&["XDEL", "x6:s", "1-0"]);
    std::thread::sleep(Duration::from_millis(1200));
    let aof = aof_text(&p);
    // The generated ID, not `*`.
    assert!(
        aof.contains(&format!(
            "$4\r\nXADD\r\n$4\r\nx6:s\r\n${}\r\n{id}\r\n",
            id.len()
        )),
        "{aof}"
    );
    assert!(!aof.contains("\r\n*\r\n"), "{aof}");
    // `~ 3` became `= 3`: of 7 entries in nodes of 2, two nodes dropped.
    assert!(
        aof.contains("$6\r\nMAXLEN\r\n$1\r\n=\r\n$1\r\n3\r\n"),
        "{aof}"
    );
    // A trim that removed nothing, and an XDEL that deleted nothing, are
    // not written.
    assert!(!aof.contains("MINID"), "{aof}");
    assert!(!aof.contains("XDEL"), "{aof}");
    assert!(
        aof.contains("$5\r\nXTRIM\r\n$4\r\nx6:s\r\n$6\r\nMAXLEN\r\n$1\r\n1\r\n"),
        "{aof}"
    );
}

#[test]
fn keyspace_events_name_each_change() {
    let s = own_server(&[]);
    let mut r = s.raw();
    r.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAn"]);
    let mut sub = s.raw();
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    r.cmd(&["XADD", "x7:s", "1-0", "a", "1"]);
    r.cmd(&["XADD", "x7:s", "MAXLEN", "0", "2-0", "a", "1"]);
    r.cmd(&["XADD", "x7:s", "3-0", "a", "1"]);
    r.cmd(&["XDEL", "x7:s", "3-0"]);
    r.cmd(&["XSETID", "x7:s", "5-0"]);
    r.cmd(&["XADD", "x7:s", "6-0", "a", "1"]);
    r.cmd(&["XTRIM", "x7:s", "MAXLEN", "0"]);
    let events: Vec<String> = sub
        .read_frames(9)
        .into_iter()
        .map(|f| match f {
            Frame::Array(v) | Frame::Push(v) => match &v[2] {
                Frame::Bulk(c) => String::from_utf8_lossy(c).into_owned(),
                o => panic!("{o:?}"),
            },
            o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(
        events,
        [
            "__keyevent@0__:new",
            "__keyevent@0__:xadd",
            "__keyevent@0__:xadd",
            "__keyevent@0__:xtrim",
            "__keyevent@0__:xadd",
            "__keyevent@0__:xdel",
            "__keyevent@0__:xsetid",
            "__keyevent@0__:xadd",
            "__keyevent@0__:xtrim",
        ]
    );
}

/// A stream with deletions, several nodes, odd values and a group (made
/// on redis-server, where XGROUP exists), moved by DUMP/RESTORE, by an RDB
/// file and by replication to ferrokv and back: same entries, same
/// digest, and ferrokv's DUMP byte for byte Redis's.
#[test]
fn streams_cross_to_redis_and_back_by_dump_rdb_and_replication() {
    if against_redis() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let redis = ServerProcess::redis(&["--stream-node-max-entries", "5"]);
    let fk = ServerProcess::ferrokv(&[
        "--stream-node-max-entries",
        "5",
        "--dir",
        d,
        "--enable-debug-command",
        "yes",
    ]);
    let mut rr = redis.raw();
    let mut fr = fk.raw();
    for i in 1..=30u32 {
        let v = if i % 3 == 0 {
            "x".repeat(300)
        } else {
            format!("{}", i * 1000)
        };
        rr.cmd(&["XADD", "s", &format!("{i}-{}", i % 2), "f", &v, "g", "-7"]);
    }
    rr.cmd(&["XDEL", "s", "4-0", "9-1", "30-0"]);
    rr.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    rr.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "3",
        "STREAMS",
        "s",
        ">",
    ]);
    let Frame::Bulk(dump) = rr.cmd(&["DUMP", "s"]) else {
        panic!("DUMP")
    };
    assert_eq!(fr.cmd(&[&b"RESTORE"[..], b"s", b"0", &dump]), ok());
    let range = rr.cmd(&["XRANGE", "s", "-", "+"]);
    assert_eq!(fr.cmd(&["XRANGE", "s", "-", "+"]), range);
    assert_eq!(fr.cmd(&["XLEN", "s"]), int(27));
    assert_eq!(
        fr.cmd(&["DEBUG", "DIGEST-VALUE", "s"]),
        rr.cmd(&["DEBUG", "DIGEST-VALUE", "s"])
    );
    // Back: ferrokv's payload restores on Redis to the same value, groups
    // included (the bytes may differ only in LZF's choices).
    let Frame::Bulk(back) = fr.cmd(&["DUMP", "s"]) else {
        panic!("DUMP on ferrokv")
    };
    assert_eq!(rr.cmd(&[&b"RESTORE"[..], b"s:back", b"0", &back]), ok());
    assert_eq!(
        rr.cmd(&["DEBUG", "DIGEST-VALUE", "s:back"]),
        rr.cmd(&["DEBUG", "DIGEST-VALUE", "s"])
    );
    assert_eq!(
        rr.cmd(&["XINFO", "GROUPS", "s:back"]),
        rr.cmd(&["XINFO", "GROUPS", "s"])
    );
    // By RDB: ferrokv saves, redis-server loads.
    fr.cmd(&["XADD", "s", "99-0", "new", "1"]);
    assert_eq!(fr.cmd(&["SAVE"]), ok());
    let redis2 = ServerProcess::redis(&["--dir", d]);
    let mut r2 = redis2.raw();
    assert_eq!(
        r2.cmd(&["XRANGE", "s", "-", "+"]),
        fr.cmd(&["XRANGE", "s", "-", "+"])
    );
    assert_eq!(
        r2.cmd(&["DEBUG", "DIGEST-VALUE", "s"]),
        fr.cmd(&["DEBUG", "DIGEST-VALUE", "s"])
    );
    assert_eq!(
        r2.cmd(&["XINFO", "GROUPS", "s"]),
        rr.cmd(&["XINFO", "GROUPS", "s"])
    );
    // Replication: a Redis replica of a ferrokv master, under XADDs with
    // generated IDs and approximate trims, ends with the master's digest.
    let rep = ServerProcess::redis(&["--stream-node-max-entries", "5"]);
    common::repl::replicaof(&rep, &fk);
    for i in 0..50 {
        fr.cmd(&[
            "XADD",
            "live",
            "MAXLEN",
            "~",
            "20",
            "*",
            "i",
            &i.to_string(),
        ]);
    }
    fr.cmd(&["XTRIM", "s", "MINID", "~", "20"]);
    common::repl::wait_converged(&fk, &rep, 30);
    let mut rp = rep.raw();
    assert_eq!(
        rp.cmd(&["XRANGE", "live", "-", "+"]),
        fr.cmd(&["XRANGE", "live", "-", "+"])
    );
}
