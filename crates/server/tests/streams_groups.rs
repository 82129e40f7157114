//! Guards the consumer-group commands of streams against Redis 7.0.15:
//! XGROUP's subcommands with their replies, errors and events, XREADGROUP
//! (`>`, history with deleted entries as nil, NOACK, the consumer created
//! only when served), XACK, XPENDING in both forms, XCLAIM / XAUTOCLAIM
//! (deleted entries, LASTID, JUSTID), XINFO's fields in 7.0.15's order,
//! RESP3 shapes, a blocked XREADGROUP woken by XADD or ended by DEL and
//! XGROUP DESTROY, by FLUSHALL, SWAPDB or expiry, and what reaches the AOF (per-entry XCLAIMs, SETID for
//! NOACK, MULTI/EXEC around several).
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run them against the real
//! `redis-server`. Times (idle, delivery, seen-time) are checked as ranges
//! and masked before the exact comparison.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::{blocked_clients, wait_blocked};
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const REQUIRES_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn entry(id: &str, fv: &[&str]) -> Frame {
    arr(vec![bulk(id), bulks(fv)])
}

fn stream_reply(key: &str, entries: Vec<Frame>) -> Frame {
    arr(vec![arr(vec![bulk(key), arr(entries)])])
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Replaces every integer above 10^12 (a Unix time in ms) with 0, after
/// checking it lies in `[from, to]`.
fn mask_times(f: &mut Frame, from: i64, to: i64) {
    match f {
        Frame::Integer(t) if *t > 1_000_000_000_000 => {
            assert!(*t >= from && *t <= to, "time {t} not in [{from}, {to}]");
            *t = 0;
        }
        Frame::Array(v) => v.iter_mut().for_each(|x| mask_times(x, from, to)),
        Frame::Map(v) => v.iter_mut().for_each(|(_, x)| mask_times(x, from, to)),
        _ => {}
    }
}

/// Replaces the value after each `idle` field (RESP2 flat pairs) with 0,
/// after checking it is below `max`.
fn mask_idle(f: &mut Frame, max: i64) {
    if let Frame::Array(v) = f {
        for i in 0..v.len() {
            if i > 0 && v[i - 1] == bulk("idle") {
                match v[i] {
                    Frame::Integer(n) => assert!((0..max).contains(&n), "idle {n}"),
                    ref other => panic!("idle {other:?}"),
                }
                v[i] = int(0);
            } else {
                mask_idle(&mut v[i], max);
            }
        }
    }
}

fn setup(r: &mut Raw, key: &str) {
    r.cmd(&["DEL", key]);
    for (id, f, v) in [("1-1", "a", "1"), ("2-1", "b", "2"), ("3-1", "c", "3")] {
        assert_eq!(r.cmd(&["XADD", key, id, f, v]), bulk(id));
    }
}

#[test]
fn xgroup_subcommands_reply_and_fail_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "xg:s", "xg:none", "xg:str"]);
    r.cmd(&["SET", "xg:str", "x"]);
    let nogroup = "NOGROUP No such consumer group 'nog' for key name 'xg:s'";
    check(
        &mut r,
        &[
            (&["XGROUP", "CREATE", "xg:s", "g", "0"], err(REQUIRES_KEY)),
            (&["XGROUP", "CREATE", "xg:s", "g", "$", "MKSTREAM"], ok()),
            (&["TYPE", "xg:s"], Frame::Simple(b"stream".to_vec())),
            (
                &["XGROUP", "CREATE", "xg:s", "g", "$", "MKSTREAM"],
                err("BUSYGROUP Consumer Group name already exists"),
            ),
            (
                &["XGROUP", "CREATE", "xg:s", "g2", "0", "ENTRIESREAD", "5"],
                ok(),
            ),
            (
                &["XGROUP", "CREATE", "xg:s", "g3", "0", "ENTRIESREAD", "-2"],
                err("ERR value for ENTRIESREAD must be positive or -1"),
            ),
            (
                &["XGROUP", "CREATE", "xg:s", "g3", "0", "ENTRIESREAD", "x"],
                err("ERR value is not an integer or out of range"),
            ),
            (
                &["XGROUP", "CREATE", "xg:s", "g3", "0", "foo"],
                err("ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."),
            ),
            (&["XGROUP", "CREATE", "xg:s", "g3", "bad"], err(INVALID_ID)),
            (&["XGROUP", "CREATE", "xg:str", "g", "0"], err(WRONGTYPE)),
            (&["XGROUP", "CREATECONSUMER", "xg:s", "g", "c"], int(1)),
            (&["XGROUP", "CREATECONSUMER", "xg:s", "g", "c"], int(0)),
            (&["XGROUP", "CREATECONSUMER", "xg:s", "nog", "c"], err(nogroup)),
            (&["XGROUP", "CREATECONSUMER", "xg:none", "g", "c"], err(REQUIRES_KEY)),
            (&["XGROUP", "DELCONSUMER", "xg:s", "g", "zz"], int(0)),
            (&["XGROUP", "DELCONSUMER", "xg:s", "g", "c"], int(0)),
            (&["XGROUP", "DESTROY", "xg:s", "g9"], int(0)),
            (&["XGROUP", "DESTROY", "xg:none", "g"], err(REQUIRES_KEY)),
            (&["XGROUP", "DESTROY", "xg:str", "g"], err(WRONGTYPE)),
            (&["XGROUP", "SETID", "xg:s", "g", "5-5", "ENTRIESREAD", "3"], ok()),
            (&["XGROUP", "SETID", "xg:s", "nog", "0"], err(nogroup)),
            (&["XGROUP", "SETID", "xg:none", "g", "0"], err(REQUIRES_KEY)),
            (
                &["XGROUP", "SETID", "xg:s", "g", "0", "foo"],
                err("ERR unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP."),
            ),
            (&["XGROUP", "FOO"], err("ERR unknown subcommand 'FOO'. Try XGROUP HELP.")),
            (&["XGROUP"], err("ERR wrong number of arguments for 'xgroup' command")),
            (
                &["XGROUP", "CREATE", "xg:s"],
                err("ERR wrong number of arguments for 'xgroup|create' command"),
            ),
            (
                &["XGROUP", "DESTROY", "xg:s"],
                err("ERR wrong number of arguments for 'xgroup|destroy' command"),
            ),
        ],
    );
    let mut groups = r.cmd(&["XINFO", "GROUPS", "xg:s"]);
    mask_idle(&mut groups, 1000);
    assert_eq!(
        groups,
        arr(vec![
            arr(vec![
                bulk("name"),
                bulk("g"),
                bulk("consumers"),
                int(0),
                bulk("pending"),
                int(0),
                bulk("last-delivered-id"),
                bulk("5-5"),
                bulk("entries-read"),
                int(3),
                bulk("lag"),
                int(0),
            ]),
            arr(vec![
                bulk("name"),
                bulk("g2"),
                bulk("consumers"),
                int(0),
                bulk("pending"),
                int(0),
                bulk("last-delivered-id"),
                bulk("0-0"),
                bulk("entries-read"),
                int(5),
                bulk("lag"),
                int(0),
            ]),
        ])
    );
    assert_eq!(r.cmd(&["XGROUP", "DESTROY", "xg:s", "g2"]), int(1));
    match r.cmd(&["XGROUP", "HELP"]) {
        Frame::Array(lines) => {
            assert_eq!(lines.len(), 17);
            assert_eq!(
                lines[0],
                Frame::Simple(
                    b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".to_vec()
                )
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn xreadgroup_delivers_new_entries_history_and_noack() {
    let s = server();
    let mut r = s.raw();
    setup(&mut r, "xr:s");
    r.cmd(&["DEL", "xr:str", "xr:none"]);
    r.cmd(&["SET", "xr:str", "x"]);
    assert_eq!(r.cmd(&["XGROUP", "CREATE", "xr:s", "g", "0"]), ok());
    let g = |c: &str, more: &[&str]| {
        let mut v = vec!["XREADGROUP", "GROUP", "g"];
        v.push(c);
        v.extend_from_slice(more);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |r: &mut Raw, a: Vec<String>| r.cmd(&a);
    check(
        &mut r,
        &[
            (
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "xr:s", "$"],
                err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."),
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "xr:none", ">"],
                err("NOGROUP No such key 'xr:none' or consumer group 'g' in XREADGROUP with GROUP option"),
            ),
            (
                &["XREADGROUP", "GROUP", "nog", "c", "STREAMS", "xr:s", ">"],
                err("NOGROUP No such key 'xr:s' or consumer group 'nog' in XREADGROUP with GROUP option"),
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "xr:s", "xr:s", ">"],
                err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."),
            ),
            (
                &["XREADGROUP", "COUNT", "1", "BLOCK", "0", "STREAMS", "xr:s", ">"],
                err("ERR Missing GROUP option for XREADGROUP"),
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "xr:s", ">"],
                err("ERR timeout is negative"),
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "NOACK", "foo", "STREAMS", "xr:s", ">"],
                err("ERR syntax error"),
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "xr:s", "bad"],
                err(INVALID_ID),
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "xr:str", ">"],
                err(WRONGTYPE),
            ),
        ],
    );
    assert_eq!(
        run(&mut r, g("alice", &["COUNT", "2", "STREAMS", "xr:s", ">"])),
        stream_reply(
            "xr:s",
            vec![entry("1-1", &["a", "1"]), entry("2-1", &["b", "2"])]
        )
    );
    // Nothing new: nil, and no consumer made.
    assert_eq!(
        run(&mut r, g("bob", &["NOACK", "STREAMS", "xr:s", ">"])),
        stream_reply("xr:s", vec![entry("3-1", &["c", "3"])])
    );
    assert_eq!(run(&mut r, g("carol", &["STREAMS", "xr:s", ">"])), nil());
    // History: after the ID given, deleted entries as [id, nil].
    assert_eq!(r.cmd(&["XDEL", "xr:s", "1-1"]), int(1));
    assert_eq!(
        run(&mut r, g("alice", &["STREAMS", "xr:s", "0"])),
        stream_reply(
            "xr:s",
            vec![arr(vec![bulk("1-1"), nil()]), entry("2-1", &["b", "2"])]
        )
    );
    assert_eq!(
        run(
            &mut r,
            g("alice", &["COUNT", "1", "STREAMS", "xr:s", "1-1"])
        ),
        stream_reply("xr:s", vec![entry("2-1", &["b", "2"])])
    );
    // A history read creates the consumer; NOACK left nothing pending.
    assert_eq!(
        run(&mut r, g("dave", &["STREAMS", "xr:s", "0"])),
        stream_reply("xr:s", vec![])
    );
    let mut consumers = r.cmd(&["XINFO", "CONSUMERS", "xr:s", "g"]);
    mask_idle(&mut consumers, 5000);
    let c = |name: &str, pending: i64| {
        arr(vec![
            bulk("name"),
            bulk(name),
            bulk("pending"),
            int(pending),
            bulk("idle"),
            int(0),
        ])
    };
    assert_eq!(
        consumers,
        arr(vec![c("alice", 2), c("bob", 0), c("dave", 0)])
    );
    // The history read counted a delivery.
    match r.cmd(&["XPENDING", "xr:s", "g", "-", "+", "10"]) {
        Frame::Array(v) => {
            assert_eq!(v.len(), 2);
            let Frame::Array(first) = &v[0] else { panic!() };
            assert_eq!(first[0], bulk("1-1"));
            // Deleted: not delivered again, not counted.
            assert_eq!(first[3], int(1));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn xack_and_xpending_in_both_forms() {
    let s = server();
    let mut r = s.raw();
    setup(&mut r, "xp:s");
    r.cmd(&["DEL", "xp:str"]);
    r.cmd(&["SET", "xp:str", "x"]);
    r.cmd(&["XGROUP", "CREATE", "xp:s", "g", "0"]);
    r.cmd(&["XGROUP", "CREATE", "xp:s", "g2", "0"]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "2",
        "STREAMS",
        "xp:s",
        ">",
    ]);
    r.cmd(&["XREADGROUP", "GROUP", "g", "d", "STREAMS", "xp:s", ">"]);
    let nogroup = err("NOGROUP No such key 'xp:s' or consumer group 'nog'");
    check(
        &mut r,
        &[
            (&["XACK", "xp:s", "g", "1-1", "9-9"], int(1)),
            (&["XACK", "xp:s", "g", "1-1"], int(0)),
            (&["XACK", "xp:s", "nog", "1-1"], int(0)),
            (&["XACK", "xp:none", "g", "bad"], int(0)),
            (&["XACK", "xp:s", "g", "2-1", "bad"], err(INVALID_ID)),
            (&["XACK", "xp:str", "g", "bad"], err(WRONGTYPE)),
            (
                &["XPENDING", "xp:s", "g"],
                arr(vec![
                    int(2),
                    bulk("2-1"),
                    bulk("3-1"),
                    arr(vec![bulks(&["c", "1"]), bulks(&["d", "1"])]),
                ]),
            ),
            (
                &["XPENDING", "xp:s", "g2"],
                arr(vec![int(0), nil(), nil(), nil()]),
            ),
            (&["XPENDING", "xp:s", "nog"], nogroup.clone()),
            (&["XPENDING", "xp:s", "nog", "-", "+", "10"], nogroup),
            (&["XPENDING", "xp:str", "g"], err(WRONGTYPE)),
            (
                &["XPENDING", "xp:s", "g", "IDLE", "1000000", "-", "+", "10"],
                arr(vec![]),
            ),
            (&["XPENDING", "xp:s", "g", "-", "+", "0"], arr(vec![])),
            (&["XPENDING", "xp:s", "g", "-", "+", "-1"], arr(vec![])),
            (
                &["XPENDING", "xp:s", "g", "-", "+", "10", "nobody"],
                arr(vec![]),
            ),
            (&["XPENDING", "xp:s", "g", "5", "1", "10"], arr(vec![])),
            (
                &["XPENDING", "xp:s", "g", "IDLE", "10", "-", "+"],
                err("ERR syntax error"),
            ),
            (
                &["XPENDING", "xp:s", "g", "-", "+"],
                err("ERR syntax error"),
            ),
            (
                &["XPENDING", "xp:s", "g", "IDLE", "x", "-", "+", "10"],
                err("ERR value is not an integer or out of range"),
            ),
            (&["XPENDING", "xp:s", "g", "(", "+", "10"], err(INVALID_ID)),
            (
                &["XPENDING", "xp:s", "g", "-", "(0-0", "10"],
                err("ERR invalid end ID for the interval"),
            ),
        ],
    );
    let ext = |r: &mut Raw, a: &[&str]| -> Vec<(String, String, i64)> {
        match r.cmd(a) {
            Frame::Array(v) => v
                .into_iter()
                .map(|e| match e {
                    Frame::Array(f) => match (&f[0], &f[1], &f[2], &f[3]) {
                        (
                            Frame::Bulk(id),
                            Frame::Bulk(c),
                            Frame::Integer(idle),
                            Frame::Integer(n),
                        ) => {
                            assert!((0..5000).contains(idle), "idle {idle}");
                            (
                                String::from_utf8_lossy(id).into(),
                                String::from_utf8_lossy(c).into(),
                                *n,
                            )
                        }
                        _ => panic!("{f:?}"),
                    },
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{a:?}: {other:?}"),
        }
    };
    let t = |id: &str, c: &str, n: i64| (id.to_string(), c.to_string(), n);
    assert_eq!(
        ext(&mut r, &["XPENDING", "xp:s", "g", "-", "+", "10"]),
        vec![t("2-1", "c", 1), t("3-1", "d", 1)]
    );
    assert_eq!(
        ext(&mut r, &["XPENDING", "xp:s", "g", "-", "+", "10", "d"]),
        vec![t("3-1", "d", 1)]
    );
    assert_eq!(
        ext(&mut r, &["XPENDING", "xp:s", "g", "(2-1", "+", "10"]),
        vec![t("3-1", "d", 1)]
    );
    assert_eq!(
        ext(&mut r, &["XPENDING", "xp:s", "g", "-", "(3-1", "10"]),
        vec![t("2-1", "c", 1)]
    );
    assert_eq!(
        ext(
            &mut r,
            &["XPENDING", "xp:s", "g", "IDLE", "0", "-", "+", "1"]
        ),
        vec![t("2-1", "c", 1)]
    );
    assert_eq!(
        ext(
            &mut r,
            &["XPENDING", "xp:s", "g", "-", "+", "10", "d", "extra"]
        ),
        vec![t("3-1", "d", 1)]
    );
}

#[test]
fn xclaim_and_xautoclaim_move_and_drop_pending_entries() {
    let s = server();
    let mut r = s.raw();
    setup(&mut r, "xc:s");
    r.cmd(&["DEL", "xc:str"]);
    r.cmd(&["SET", "xc:str", "x"]);
    r.cmd(&["XGROUP", "CREATE", "xc:s", "g", "0"]);
    r.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "xc:s", ">"]);
    r.cmd(&["XDEL", "xc:s", "1-1"]);
    let ng = |k: &str| err(&format!("NOGROUP No such key '{k}' or consumer group 'g'"));
    check(
        &mut r,
        &[
            (
                &["XCLAIM", "xc:s", "g", "e", "0", "2-1"],
                arr(vec![entry("2-1", &["b", "2"])]),
            ),
            (
                &["XCLAIM", "xc:s", "g", "e", "0", "2-1", "3-1", "JUSTID"],
                bulks(&["2-1", "3-1"]),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "9-9", "FORCE"],
                arr(vec![]),
            ),
            (&["XCLAIM", "xc:s", "g", "f", "100000", "3-1"], arr(vec![])),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "3-1", "IDLE", "x"],
                err("ERR Invalid IDLE option argument for XCLAIM"),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "3-1", "TIME", "x"],
                err("ERR Invalid TIME option argument for XCLAIM"),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "3-1", "RETRYCOUNT", "x"],
                err("ERR Invalid RETRYCOUNT option argument for XCLAIM"),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "3-1", "LASTID", "bad"],
                err(INVALID_ID),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "3-1", "foo"],
                err("ERR Unrecognized XCLAIM option 'foo'"),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "0", "bad"],
                err("ERR Unrecognized XCLAIM option 'bad'"),
            ),
            (
                &["XCLAIM", "xc:s", "g", "f", "x", "3-1"],
                err("ERR Invalid min-idle-time argument for XCLAIM"),
            ),
            (&["XCLAIM", "xc:none", "g", "f", "x", "3-1"], ng("xc:none")),
            (&["XCLAIM", "xc:str", "g", "f", "0", "3-1"], err(WRONGTYPE)),
            (
                &[
                    "XCLAIM",
                    "xc:s",
                    "g",
                    "f",
                    "0",
                    "3-1",
                    "RETRYCOUNT",
                    "7",
                    "JUSTID",
                    "LASTID",
                    "10-0",
                ],
                bulks(&["3-1"]),
            ),
            (
                &["XAUTOCLAIM", "xc:s", "g", "z", "0", "0", "COUNT", "0"],
                err("ERR COUNT must be > 0"),
            ),
            (
                &[
                    "XAUTOCLAIM",
                    "xc:s",
                    "g",
                    "z",
                    "0",
                    "0",
                    "COUNT",
                    "1000000000000000000",
                ],
                err("ERR COUNT must be > 0"),
            ),
            (
                &["XAUTOCLAIM", "xc:s", "g", "z", "0", "0", "foo"],
                err("ERR syntax error"),
            ),
            (
                &["XAUTOCLAIM", "xc:s", "g", "z", "x", "0"],
                err("ERR Invalid min-idle-time argument for XAUTOCLAIM"),
            ),
            (
                &["XAUTOCLAIM", "xc:none", "g", "z", "x", "0"],
                err("ERR Invalid min-idle-time argument for XAUTOCLAIM"),
            ),
            (
                &["XAUTOCLAIM", "xc:s", "g", "z", "0", "bad"],
                err(INVALID_ID),
            ),
            (
                &["XAUTOCLAIM", "xc:none", "g", "z", "0", "0"],
                ng("xc:none"),
            ),
            (
                &["XAUTOCLAIM", "xc:str", "g", "z", "0", "0"],
                err(WRONGTYPE),
            ),
        ],
    );
    let mut pending = r.cmd(&["XPENDING", "xc:s", "g", "-", "+", "10"]);
    if let Frame::Array(v) = &mut pending {
        for e in v {
            if let Frame::Array(f) = e {
                f[2] = int(0);
            }
        }
    }
    // 1-1 (entry deleted) is still pending for c; 3-1 has RETRYCOUNT 7.
    assert_eq!(
        pending,
        arr(vec![
            arr(vec![bulk("1-1"), bulk("c"), int(0), int(1)]),
            arr(vec![bulk("2-1"), bulk("e"), int(0), int(2)]),
            arr(vec![bulk("3-1"), bulk("f"), int(0), int(7)]),
        ])
    );
    // XAUTOCLAIM drops the deleted entry and reports it; the cursor.
    check(
        &mut r,
        &[
            (
                &["XAUTOCLAIM", "xc:s", "g", "z", "0", "0", "COUNT", "2"],
                arr(vec![
                    bulk("3-1"),
                    arr(vec![entry("2-1", &["b", "2"])]),
                    bulks(&["1-1"]),
                ]),
            ),
            (
                &["XAUTOCLAIM", "xc:s", "g", "z", "0", "(2-1", "JUSTID"],
                arr(vec![bulk("0-0"), bulks(&["3-1"]), arr(vec![])]),
            ),
        ],
    );
    // XCLAIM of a deleted pending entry drops it too.
    r.cmd(&["XDEL", "xc:s", "3-1"]);
    assert_eq!(
        r.cmd(&["XCLAIM", "xc:s", "g", "q", "0", "3-1", "2-1", "JUSTID"]),
        bulks(&["2-1"])
    );
    assert_eq!(
        r.cmd(&["XPENDING", "xc:s", "g"]),
        arr(vec![
            int(1),
            bulk("2-1"),
            bulk("2-1"),
            arr(vec![bulks(&["q", "1"])])
        ])
    );
    let mut groups = r.cmd(&["XINFO", "GROUPS", "xc:s"]);
    mask_idle(&mut groups, 1);
    assert_eq!(
        groups,
        arr(vec![arr(vec![
            bulk("name"),
            bulk("g"),
            bulk("consumers"),
            int(5),
            bulk("pending"),
            int(1),
            bulk("last-delivered-id"),
            bulk("10-0"),
            bulk("entries-read"),
            int(3),
            bulk("lag"),
            int(0),
        ])])
    );
}

#[test]
fn xinfo_stream_groups_and_consumers_show_7_0_fields() {
    let s = server();
    let mut r = s.raw();
    setup(&mut r, "xi:s");
    r.cmd(&["DEL", "xi:e", "xi:str"]);
    r.cmd(&["SET", "xi:str", "x"]);
    r.cmd(&["XDEL", "xi:s", "2-1"]);
    r.cmd(&["XGROUP", "CREATE", "xi:s", "g", "0"]);
    let before = now_ms();
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "2",
        "STREAMS",
        "xi:s",
        ">",
    ]);
    r.cmd(&["XGROUP", "CREATECONSUMER", "xi:s", "g", "d"]);
    let after = now_ms() + 1;
    let head = |n: i64, nodes: i64| {
        vec![
            bulk("length"),
            int(n),
            bulk("radix-tree-keys"),
            int(if n > 0 { 1 } else { 0 }),
            bulk("radix-tree-nodes"),
            int(nodes),
        ]
    };
    let mut short = head(2, 2);
    short.extend([
        bulk("last-generated-id"),
        bulk("3-1"),
        bulk("max-deleted-entry-id"),
        bulk("2-1"),
        bulk("entries-added"),
        int(3),
        bulk("recorded-first-entry-id"),
        bulk("1-1"),
        bulk("groups"),
        int(1),
        bulk("first-entry"),
        entry("1-1", &["a", "1"]),
        bulk("last-entry"),
        entry("3-1", &["c", "3"]),
    ]);
    assert_eq!(r.cmd(&["XINFO", "STREAM", "xi:s"]), arr(short));
    let full = |count_one: bool| {
        let mut v = head(2, 2);
        let entries = if count_one {
            vec![entry("1-1", &["a", "1"])]
        } else {
            vec![entry("1-1", &["a", "1"]), entry("3-1", &["c", "3"])]
        };
        let pend = |with_owner: bool| {
            let ids: &[&str] = if count_one { &["1-1"] } else { &["1-1", "3-1"] };
            arr(ids
                .iter()
                .map(|id| {
                    if with_owner {
                        arr(vec![bulk(id), bulk("c"), int(0), int(1)])
                    } else {
                        arr(vec![bulk(id), int(0), int(1)])
                    }
                })
                .collect())
        };
        v.extend([
            bulk("last-generated-id"),
            bulk("3-1"),
            bulk("max-deleted-entry-id"),
            bulk("2-1"),
            bulk("entries-added"),
            int(3),
            bulk("recorded-first-entry-id"),
            bulk("1-1"),
            bulk("entries"),
            arr(entries),
            bulk("groups"),
            arr(vec![arr(vec![
                bulk("name"),
                bulk("g"),
                bulk("last-delivered-id"),
                bulk("3-1"),
                bulk("entries-read"),
                int(3),
                bulk("lag"),
                int(0),
                bulk("pel-count"),
                int(2),
                bulk("pending"),
                pend(true),
                bulk("consumers"),
                arr(vec![
                    arr(vec![
                        bulk("name"),
                        bulk("c"),
                        bulk("seen-time"),
                        int(0),
                        bulk("pel-count"),
                        int(2),
                        bulk("pending"),
                        pend(false),
                    ]),
                    arr(vec![
                        bulk("name"),
                        bulk("d"),
                        bulk("seen-time"),
                        int(0),
                        bulk("pel-count"),
                        int(0),
                        bulk("pending"),
                        arr(vec![]),
                    ]),
                ]),
            ])]),
        ]);
        arr(v)
    };
    let mut got = r.cmd(&["XINFO", "STREAM", "xi:s", "FULL"]);
    mask_times(&mut got, before, after);
    assert_eq!(got, full(false));
    let mut got = r.cmd(&["XINFO", "STREAM", "xi:s", "FULL", "COUNT", "1"]);
    mask_times(&mut got, before, after);
    assert_eq!(got, full(true));
    r.cmd(&["XGROUP", "CREATE", "xi:e", "g", "0", "MKSTREAM"]);
    let mut empty = head(0, 1);
    empty.extend([
        bulk("last-generated-id"),
        bulk("0-0"),
        bulk("max-deleted-entry-id"),
        bulk("0-0"),
        bulk("entries-added"),
        int(0),
        bulk("recorded-first-entry-id"),
        bulk("0-0"),
        bulk("groups"),
        int(1),
        bulk("first-entry"),
        nil(),
        bulk("last-entry"),
        nil(),
    ]);
    assert_eq!(r.cmd(&["XINFO", "STREAM", "xi:e"]), arr(empty));
    let sub_err =
        err("ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.");
    check(
        &mut r,
        &[
            (&["XINFO", "STREAM", "xi:none"], err("ERR no such key")),
            (&["XINFO", "STREAM", "xi:str"], err(WRONGTYPE)),
            (&["XINFO", "GROUPS", "xi:none"], err("ERR no such key")),
            (
                &["XINFO", "CONSUMERS", "xi:none", "g"],
                err("ERR no such key"),
            ),
            (
                &["XINFO", "CONSUMERS", "xi:s", "nog"],
                err("NOGROUP No such consumer group 'nog' for key name 'xi:s'"),
            ),
            (&["XINFO", "STREAM", "xi:s", "foo"], sub_err.clone()),
            (
                &["XINFO", "STREAM", "xi:s", "FULL", "COUNT"],
                sub_err.clone(),
            ),
            (
                &["XINFO", "STREAM", "xi:none", "foo"],
                err("ERR no such key"),
            ),
            (
                &["XINFO", "STREAM", "xi:s", "FULL", "COUNT", "x"],
                err("ERR value is not an integer or out of range"),
            ),
            (
                &["XINFO", "FOO"],
                err("ERR unknown subcommand 'FOO'. Try XINFO HELP."),
            ),
            (
                &["XINFO", "STREAM"],
                err("ERR wrong number of arguments for 'xinfo|stream' command"),
            ),
            (
                &["XINFO", "GROUPS", "xi:s", "x"],
                err("ERR wrong number of arguments for 'xinfo|groups' command"),
            ),
        ],
    );
    match r.cmd(&["XINFO", "HELP"]) {
        Frame::Array(lines) => assert_eq!(lines.len(), 9),
        other => panic!("{other:?}"),
    }
}

#[test]
fn radix_tree_nodes_follow_the_node_keys() {
    let p = own_server(&[]);
    let mut r = p.raw();
    r.cmd(&["CONFIG", "SET", "stream-node-max-entries", "2"]);
    // (entries, expected radix-tree-nodes), checked against 7.0.15.
    let mut got = Vec::new();
    for i in 1..=9u64 {
        r.cmd(&["XADD", "rt:s", &format!("{}-{}", i * 1000, i), "f", "v"]);
        if let Frame::Array(v) = r.cmd(&["XINFO", "STREAM", "rt:s"]) {
            got.push((v[3].clone(), v[5].clone()));
        }
    }
    r.cmd(&["XADD", "rt:s", "300000000000-1", "f", "v"]);
    r.cmd(&["XADD", "rt:s", "300000000000-2", "f", "v"]);
    r.cmd(&["XADD", "rt:s", "300000000000-3", "f", "v"]);
    if let Frame::Array(v) = r.cmd(&["XINFO", "STREAM", "rt:s"]) {
        got.push((v[3].clone(), v[5].clone()));
    }
    let want: Vec<(Frame, Frame)> = [
        (1, 2),
        (1, 2),
        (2, 6),
        (2, 6),
        (3, 8),
        (3, 8),
        (4, 10),
        (4, 10),
        (5, 12),
        (6, 16),
    ]
    .iter()
    .map(|&(k, n)| (int(k), int(n)))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn resp3_replies_are_maps() {
    let s = server();
    let mut r = s.raw();
    setup(&mut r, "x3:s");
    r.cmd(&["DEL", "x3:e"]);
    r.cmd(&["XGROUP", "CREATE", "x3:s", "g", "0"]);
    r.cmd(&["XGROUP", "CREATE", "x3:e", "g", "0", "MKSTREAM"]);
    r.cmd(&["HELLO", "3"]);
    assert_eq!(
        r.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "x3:s",
            ">"
        ]),
        Frame::Map(vec![(bulk("x3:s"), arr(vec![entry("1-1", &["a", "1"])]))])
    );
    r.cmd(&["XDEL", "x3:s", "1-1"]);
    assert_eq!(
        r.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x3:s", "0"]),
        Frame::Map(vec![(
            bulk("x3:s"),
            arr(vec![arr(vec![bulk("1-1"), nil()])])
        )])
    );
    assert_eq!(
        r.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "10",
            "STREAMS",
            "x3:e",
            ">"
        ]),
        nil()
    );
    assert_eq!(
        r.cmd(&["XPENDING", "x3:e", "g"]),
        arr(vec![int(0), nil(), nil(), nil()])
    );
    assert_eq!(
        r.cmd(&["XINFO", "GROUPS", "x3:e"]),
        arr(vec![Frame::Map(vec![
            (bulk("name"), bulk("g")),
            (bulk("consumers"), int(0)),
            (bulk("pending"), int(0)),
            (bulk("last-delivered-id"), bulk("0-0")),
            (bulk("entries-read"), nil()),
            (bulk("lag"), int(0)),
        ])])
    );
    match r.cmd(&["XINFO", "STREAM", "x3:e"]) {
        Frame::Map(m) => {
            let names: Vec<Frame> = m.into_iter().map(|(k, _)| k).collect();
            assert_eq!(
                names,
                bulks(&[
                    "length",
                    "radix-tree-keys",
                    "radix-tree-nodes",
                    "last-generated-id",
                    "max-deleted-entry-id",
                    "entries-added",
                    "recorded-first-entry-id",
                    "groups",
                    "first-entry",
                    "last-entry"
                ])
                .into_array()
            );
        }
        other => panic!("{other:?}"),
    }
}

trait IntoArray {
    fn into_array(self) -> Vec<Frame>;
}

impl IntoArray for Frame {
    fn into_array(self) -> Vec<Frame> {
        match self {
            Frame::Array(v) => v,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn blocked_xreadgroup_is_served_by_xadd_and_ended_by_del_or_destroy() {
    let p = own_server(&[]);
    let mut r = p.raw();
    r.cmd(&["XGROUP", "CREATE", "xb:s", "g", "$", "MKSTREAM"]);
    let mut w = p.raw();
    w.send(&Frame::command(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "xb:s",
        ">",
    ]));
    wait_blocked(&p, 1);
    // A write that brings nothing new keeps it waiting.
    r.cmd(&["XGROUP", "CREATECONSUMER", "xb:s", "g", "other"]);
    assert_eq!(r.cmd(&["XADD", "xb:s", "5-1", "f", "v"]), bulk("5-1"));
    assert_eq!(
        w.read_frame(),
        stream_reply("xb:s", vec![entry("5-1", &["f", "v"])])
    );
    assert_eq!(
        r.cmd(&["XPENDING", "xb:s", "g"]),
        arr(vec![
            int(1),
            bulk("5-1"),
            bulk("5-1"),
            arr(vec![bulks(&["c", "1"])])
        ])
    );
    // The group destroyed meanwhile.
    w.send(&Frame::command(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "xb:s",
        ">",
    ]));
    wait_blocked(&p, 1);
    assert_eq!(r.cmd(&["XGROUP", "DESTROY", "xb:s", "g"]), int(1));
    assert_eq!(
        w.read_frame(),
        err("NOGROUP the consumer group this client was blocked on no longer exists")
    );
    // The key deleted, or replaced by another type.
    for replace in [&["DEL", "xb:s"][..], &["SET", "xb:s", "x"][..]] {
        r.cmd(&["DEL", "xb:s"]);
        r.cmd(&["XGROUP", "CREATE", "xb:s", "g", "$", "MKSTREAM"]);
        w.send(&Frame::command(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "xb:s",
            ">",
        ]));
        wait_blocked(&p, 1);
        r.cmd(replace);
        assert_eq!(
            w.read_frame(),
            err("UNBLOCKED the stream key no longer exists")
        );
    }
    // A timeout.
    r.cmd(&["DEL", "xb:s"]);
    r.cmd(&["XGROUP", "CREATE", "xb:s", "g", "$", "MKSTREAM"]);
    assert_eq!(
        w.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "50",
            "STREAMS",
            "xb:s",
            ">"
        ]),
        nil()
    );
    // Inside MULTI it answers as a timeout.
    w.cmd(&["MULTI"]);
    w.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "xb:s",
        ">",
    ]);
    assert_eq!(w.cmd(&["EXEC"]), arr(vec![nil()]));
}

#[test]
fn blocked_xreadgroup_ends_when_its_stream_is_flushed_swapped_away_or_expires() {
    let p = own_server(&[]);
    let mut r = p.raw();
    let mut w = p.raw();
    let block = |w: &mut Raw| {
        w.send(&Frame::command(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "xf:s",
            ">",
        ]))
    };
    let gone = err("UNBLOCKED the stream key no longer exists");
    for end in [
        &["FLUSHALL"][..],
        &["FLUSHDB", "ASYNC"][..],
        &["SWAPDB", "0", "1"][..],
        &["PEXPIRE", "xf:s", "1"][..],
    ] {
        r.cmd(&["FLUSHALL"]);
        r.cmd(&["XGROUP", "CREATE", "xf:s", "g", "$", "MKSTREAM"]);
        block(&mut w);
        wait_blocked(&p, 1);
        r.cmd(end);
        // The expired key goes in the active cycle, nobody touches it.
        assert_eq!(w.read_frame(), gone, "after {end:?}");
        assert_eq!(blocked_clients(&p), 0);
    }
    // SWAPDB that brings a stream with the same group keeps it waiting,
    // and an XADD there serves it.
    r.cmd(&["FLUSHALL"]);
    r.cmd(&["XGROUP", "CREATE", "xf:s", "g", "$", "MKSTREAM"]);
    r.cmd(&["SELECT", "1"]);
    r.cmd(&["XGROUP", "CREATE", "xf:s", "g", "$", "MKSTREAM"]);
    block(&mut w);
    wait_blocked(&p, 1);
    assert_eq!(r.cmd(&["SWAPDB", "0", "1"]), Frame::Simple(b"OK".to_vec()));
    wait_blocked(&p, 1);
    r.cmd(&["SELECT", "0"]);
    assert_eq!(r.cmd(&["XADD", "xf:s", "7-1", "f", "v"]), bulk("7-1"));
    assert_eq!(
        w.read_frame(),
        stream_reply("xf:s", vec![entry("7-1", &["f", "v"])])
    );
    // A stream without the group: NOGROUP.
    r.cmd(&["FLUSHALL"]);
    r.cmd(&["XGROUP", "CREATE", "xf:s", "g", "$", "MKSTREAM"]);
    r.cmd(&["SELECT", "1"]);
    r.cmd(&["XADD", "xf:s", "1-1", "f", "v"]);
    block(&mut w);
    wait_blocked(&p, 1);
    r.cmd(&["SWAPDB", "0", "1"]);
    assert_eq!(
        w.read_frame(),
        err("NOGROUP the consumer group this client was blocked on no longer exists")
    );
}

use common::aof_text;

/// The AOF's commands as space-joined arguments, SELECTs left out and the
/// value after TIME masked.
fn aof_commands(p: &ServerProcess) -> Vec<String> {
    let text = aof_text(p);
    let mut buf = text.as_bytes();
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (f, n) = Frame::decode(buf).expect("AOF frame");
        buf = &buf[n..];
        let Frame::Array(args) = f else { panic!() };
        let mut words: Vec<String> = args
            .into_iter()
            .map(|a| match a {
                Frame::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect();
        if words[0].eq_ignore_ascii_case("select") {
            continue;
        }
        for i in 1..words.len() {
            if words[i - 1] == "TIME" {
                words[i] = "<t>".into();
            }
        }
        out.push(words.join(" "));
    }
    out
}

#[test]
fn group_changes_reach_the_aof_as_redis_7_0_writes_them() {
    let p = if against_redis() {
        ServerProcess::redis(&["--appendonly", "yes"])
    } else {
        ServerProcess::ferrokv(&["--appendonly", "yes"])
    };
    let mut r = p.raw();
    for id in ["1-1", "2-1", "3-1"] {
        r.cmd(&["XADD", "s", id, "f", "v"]);
    }
    r.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "NOACK",
        "STREAMS",
        "s",
        ">",
    ]);
    r.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]);
    r.cmd(&["XDEL", "s", "1-1"]);
    r.cmd(&["XCLAIM", "s", "g", "carol", "0", "1-1", "2-1"]);
    r.cmd(&["XAUTOCLAIM", "s", "g", "dave", "0", "0"]);
    r.cmd(&["XCLAIM", "s", "g", "dave", "0", "9-9", "LASTID", "9-0"]);
    r.cmd(&["XACK", "s", "g", "2-1"]);
    r.cmd(&["XACK", "s", "g", "2-1"]);
    r.cmd(&["XGROUP", "CREATECONSUMER", "s", "g", "eve"]);
    r.cmd(&["XGROUP", "DELCONSUMER", "s", "g", "eve"]);
    r.cmd(&["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"]);
    r.cmd(&["XGROUP", "DESTROY", "s", "g"]);
    r.cmd(&["PING"]);
    let want = [
        "XADD s 1-1 f v",
        "XADD s 2-1 f v",
        "XADD s 3-1 f v",
        "XGROUP CREATE s g 0",
        "MULTI",
        "XCLAIM s g alice 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
        "XCLAIM s g alice 0 2-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 2-1",
        "EXEC",
        "MULTI",
        "XGROUP CREATECONSUMER s g bob",
        "XGROUP SETID s g 3-1 ENTRIESREAD 3",
        "EXEC",
        "XDEL s 1-1",
        "MULTI",
        "XCLAIM s g alice 0 1-1 TIME <t> RETRYCOUNT 2 FORCE JUSTID LASTID 3-1",
        "XCLAIM s g carol 0 2-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 3-1",
        "EXEC",
        "XCLAIM s g dave 0 2-1 TIME <t> RETRYCOUNT 4 FORCE JUSTID LASTID 3-1",
        "XGROUP SETID s g 9-0 ENTRIESREAD 3",
        "XACK s g 2-1",
        "XGROUP CREATECONSUMER s g eve",
        "XGROUP DELCONSUMER s g eve",
        "XGROUP SETID s g 0 ENTRIESREAD 0",
        "XGROUP DESTROY s g",
    ];
    assert_eq!(aof_commands(&p), want);
}
