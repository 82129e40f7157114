//! Guards SORT and SORT_RO against Redis 7.0: numeric and ALPHA orders,
//! ASC/DESC, LIMIT clamping, BY patterns (string keys, `->field` of
//! hashes, missing keys, a constant pattern that does not sort), GET
//! patterns (`#`, missing values), STORE (a list, an empty result deleting
//! the destination, a set stored in ALPHA order, a BLPOP waiting on the
//! destination woken), and the errors (wrong type, scores that are not
//! doubles, syntax, STORE refused by SORT_RO).
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run them against the real
//! `redis-server`.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use ferrokv_resp::Frame;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn sort_orders_limits_and_patterns_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    for k in [
        "so:l", "so:w_1", "so:w_2", "so:w_3", "so:w_10", "so:h_1", "so:h_2", "so:h_3", "so:h_10",
        "so:a", "so:z", "so:str", "so:bad", "so:e",
    ] {
        r.cmd(&["DEL", k]);
    }
    r.cmd(&["RPUSH", "so:l", "3", "1", "10", "2"]);
    r.cmd(&["MSET", "so:w_1", "40", "so:w_2", "30", "so:w_3", "20"]);
    r.cmd(&["HSET", "so:h_1", "name", "one"]);
    r.cmd(&["HSET", "so:h_2", "name", "two"]);
    r.cmd(&["HSET", "so:h_10", "name", "ten"]);
    r.cmd(&["RPUSH", "so:a", "b", "a", "c", "B"]);
    r.cmd(&["ZADD", "so:z", "1", "30", "2", "5", "3", "100"]);
    r.cmd(&["SET", "so:str", "x"]);
    r.cmd(&["RPUSH", "so:bad", "1", "x"]);
    check(
        &mut r,
        &[
            (&["SORT", "so:l"], bulks(&["1", "2", "3", "10"])),
            (&["SORT", "so:l", "DESC"], bulks(&["10", "3", "2", "1"])),
            (&["SORT", "so:l", "ALPHA"], bulks(&["1", "10", "2", "3"])),
            (&["SORT", "so:l", "LIMIT", "1", "2"], bulks(&["2", "3"])),
            (&["SORT", "so:l", "LIMIT", "-5", "2"], bulks(&["1", "2"])),
            (&["SORT", "so:l", "LIMIT", "2", "-1"], bulks(&["3", "10"])),
            (&["SORT", "so:l", "LIMIT", "10", "5"], bulks(&[])),
            (&["SORT", "so:l", "LIMIT", "1", "0"], bulks(&[])),
            // BY a string key; a missing one sorts as 0, ties by element.
            (
                &["SORT", "so:l", "BY", "so:w_*"],
                bulks(&["10", "3", "2", "1"]),
            ),
            (
                &["SORT", "so:l", "BY", "so:w_*", "DESC", "LIMIT", "0", "2"],
                bulks(&["1", "2"]),
            ),
            // A pattern without `*` does not sort: the list's own order.
            (
                &["SORT", "so:l", "BY", "nosort"],
                bulks(&["3", "1", "10", "2"]),
            ),
            (
                &["SORT", "so:l", "BY", "nosort", "DESC"],
                bulks(&["2", "10", "1", "3"]),
            ),
            (
                &["SORT", "so:l", "BY", "nosort", "LIMIT", "1", "2"],
                bulks(&["1", "10"]),
            ),
            (
                &["SORT", "so:l", "GET", "#", "GET", "so:h_*->name"],
                arr(vec![
                    bulk("1"),
                    bulk("one"),
                    bulk("2"),
                    bulk("two"),
                    bulk("3"),
                    nil(),
                    bulk("10"),
                    bulk("ten"),
                ]),
            ),
            (
                &[
                    "SORT",
                    "so:l",
                    "BY",
                    "so:h_*->name",
                    "ALPHA",
                    "GET",
                    "so:h_*->name",
                ],
                arr(vec![nil(), bulk("one"), bulk("ten"), bulk("two")]),
            ),
            (
                &["SORT", "so:l", "GET", "so:w_*", "LIMIT", "0", "3"],
                arr(vec![bulk("40"), bulk("30"), bulk("20")]),
            ),
            (
                &["SORT", "so:l", "GET", "constant"],
                arr(vec![nil(), nil(), nil(), nil()]),
            ),
            (&["SORT", "so:a", "ALPHA"], bulks(&["B", "a", "b", "c"])),
            (
                &["SORT", "so:a", "ALPHA", "DESC"],
                bulks(&["c", "b", "a", "B"]),
            ),
            (&["SORT", "so:z"], bulks(&["5", "30", "100"])),
            (
                &["SORT", "so:z", "BY", "nosort"],
                bulks(&["30", "5", "100"]),
            ),
            (
                &["SORT", "so:z", "BY", "nosort", "DESC", "LIMIT", "0", "2"],
                bulks(&["100", "5"]),
            ),
            (&["SORT", "so:missing"], bulks(&[])),
            (&["SORT_RO", "so:l", "DESC"], bulks(&["10", "3", "2", "1"])),
            (&["SORT", "so:str"], err(WRONGTYPE)),
            (
                &["SORT", "so:bad"],
                err("ERR One or more scores can't be converted into double"),
            ),
            (
                &["SORT", "so:a"],
                err("ERR One or more scores can't be converted into double"),
            ),
            (&["SORT", "so:l", "FOO"], err("ERR syntax error")),
            (&["SORT", "so:l", "LIMIT", "1"], err("ERR syntax error")),
            (
                &["SORT", "so:l", "LIMIT", "x", "1"],
                err("ERR value is not an integer or out of range"),
            ),
            (&["SORT", "so:str", "FOO"], err("ERR syntax error")),
            (
                &["SORT_RO", "so:l", "STORE", "so:e"],
                err("ERR syntax error"),
            ),
        ],
    );
}

#[test]
fn sort_store_makes_a_list_deletes_on_empty_and_wakes_a_blpop() {
    let s = server();
    let mut r = s.raw();
    for k in ["st:src", "st:set", "st:dst", "st:d2", "st:woke"] {
        r.cmd(&["DEL", k]);
    }
    r.cmd(&["RPUSH", "st:src", "3", "1", "2"]);
    r.cmd(&["SADD", "st:set", "b", "c", "a", "zz", "10"]);
    r.cmd(&["SET", "st:dst", "old", "EX", "1000"]);
    check(
        &mut r,
        &[
            (&["SORT", "st:src", "STORE", "st:dst"], int(3)),
            (&["TYPE", "st:dst"], Frame::Simple(b"list".to_vec())),
            (&["TTL", "st:dst"], int(-1)),
            (&["LRANGE", "st:dst", "0", "-1"], bulks(&["1", "2", "3"])),
            (
                &["SORT", "st:src", "GET", "nosuch_*", "STORE", "st:dst"],
                int(3),
            ),
            (&["LRANGE", "st:dst", "0", "-1"], bulks(&["", "", ""])),
            // A set not sorted, but stored: ALPHA order, on every server.
            (
                &["SORT", "st:set", "BY", "nosort", "STORE", "st:d2"],
                int(5),
            ),
            (
                &["LRANGE", "st:d2", "0", "-1"],
                bulks(&["10", "a", "b", "c", "zz"]),
            ),
            (&["SORT", "st:missing", "STORE", "st:dst"], int(0)),
            (&["EXISTS", "st:dst"], int(0)),
        ],
    );
    // A client blocked on the destination is served by the store.
    let mut waiter = s.raw();
    waiter.send(&Frame::command(&["BLPOP", "st:woke", "5"]));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        r.cmd(&["SORT", "st:src", "DESC", "STORE", "st:woke"]),
        int(3)
    );
    assert_eq!(waiter.read_frame(), bulks(&["st:woke", "3"]));
    assert_eq!(r.cmd(&["LRANGE", "st:woke", "0", "-1"]), bulks(&["2", "1"]));
}
