//! Guards against commands whose work or memory a client could drive with
//! a number or a string it chooses, rather than with the data touched and
//! the reply produced (issue #15, item 5): counts at `LONG_MIN`/`LONG_MAX`,
//! offsets and lengths past `proto-max-bulk-len`, expiry and increment
//! overflow, `numkeys` past the arguments, huge `COUNT`s and ids. Each
//! case asserts Redis 7.0.15's exact reply and that the server still
//! answers `PING` at once afterwards.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same assertions against the
//! real `redis-server`. The few cases where Redis itself hangs or exhausts
//! memory (a negative `SRANDMEMBER` count of `-LONG_MAX`) run against
//! ferrokv only, and say so.
mod common;
use common::reply::{against_redis, arr, bulk, bulks, check, err, int, nil, ok, server};
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::time::{Duration, Instant};

const LONG_MIN: &str = "-9223372036854775808";
const LONG_MAX: &str = "9223372036854775807";
const NEG_LONG_MAX: &str = "-9223372036854775807";
const LONG_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
const INT_RANGE: &str = "ERR value is out of range, value must between -2147483648 and 2147483647";
const SYNTAX: &str = "ERR syntax error";
const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
const REPLY_TOO_LARGE: &str = "ERR reply exceeds maximum allowed size (proto-max-bulk-len)";

/// A server of its own, for a test that changes a config or the expiry.
fn own_server() -> ServerProcess {
    common::reply::own_server(&["--enable-debug-command", "yes"])
}

/// A connection on database `db` that fails, rather than waits forever,
/// if the server stops answering.
fn conn(s: &ServerProcess, db: u32) -> Raw {
    let mut r = s.raw();
    r.s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(r.cmd(&["SELECT", &db.to_string()]), ok());
    r
}

/// The server answers a new connection's PING within a second: it did not
/// die, hang or fall behind on the command before.
fn still_answers(s: &ServerProcess) {
    let t = Instant::now();
    let mut r = s.raw();
    r.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "PING took {:?}",
        t.elapsed()
    );
}

/// Runs `args` and asserts it answered `expected` within `limit`.
fn check_quick(r: &mut Raw, args: &[&str], expected: Frame, limit: Duration) {
    let t = Instant::now();
    assert_eq!(r.cmd(args), expected, "{args:?}");
    assert!(t.elapsed() < limit, "{args:?} took {:?}", t.elapsed());
}

fn array_len(f: &Frame) -> usize {
    match f {
        Frame::Array(v) | Frame::Set(v) => v.len(),
        other => panic!("not an array: {other:?}"),
    }
}

// ------------------------------------------------------------ random counts

#[test]
fn random_picks_at_long_min_are_out_of_range() {
    let s = server();
    let mut r = conn(&s, 1);
    r.cmd(&["SADD", "rk:s", "a", "b", "c"]);
    r.cmd(&["HSET", "rk:h", "f", "v", "g", "w"]);
    r.cmd(&["ZADD", "rk:z", "1", "a", "2", "b"]);
    check(
        &mut r,
        &[
            (&["SRANDMEMBER", "rk:s", LONG_MIN], err(LONG_RANGE)),
            (&["HRANDFIELD", "rk:h", LONG_MIN], err(LONG_RANGE)),
            (
                &["HRANDFIELD", "rk:h", LONG_MIN, "WITHVALUES"],
                err(LONG_RANGE),
            ),
            (&["ZRANDMEMBER", "rk:z", LONG_MIN], err(LONG_RANGE)),
            (
                &["ZRANDMEMBER", "rk:z", LONG_MIN, "WITHSCORES"],
                err(LONG_RANGE),
            ),
            // With pairs, the count is halved first (the reply doubles it).
            (
                &["HRANDFIELD", "rk:h", "-4611686018427387904", "WITHVALUES"],
                err("ERR value is out of range"),
            ),
            (
                &["HRANDFIELD", "rk:h", LONG_MAX, "WITHVALUES"],
                err("ERR value is out of range"),
            ),
            (
                &["ZRANDMEMBER", "rk:z", "-4611686018427387904", "WITHSCORES"],
                err("ERR value is out of range"),
            ),
            (
                &["ZRANDMEMBER", "rk:z", LONG_MAX, "WITHSCORES"],
                err("ERR value is out of range"),
            ),
            // The range is checked before the key is looked up.
            (&["SRANDMEMBER", "rk:none", LONG_MIN], err(LONG_RANGE)),
            (&["HRANDFIELD", "rk:none", LONG_MIN], err(LONG_RANGE)),
            (&["ZRANDMEMBER", "rk:none", LONG_MIN], err(LONG_RANGE)),
        ],
    );
    // A huge positive count is the whole collection, once each.
    assert_eq!(array_len(&r.cmd(&["SRANDMEMBER", "rk:s", LONG_MAX])), 3);
    assert_eq!(array_len(&r.cmd(&["HRANDFIELD", "rk:h", LONG_MAX])), 2);
    assert_eq!(array_len(&r.cmd(&["ZRANDMEMBER", "rk:z", LONG_MAX])), 2);
    // A modest negative count still repeats picks.
    assert_eq!(array_len(&r.cmd(&["SRANDMEMBER", "rk:s", "-7"])), 7);
    assert_eq!(
        array_len(&r.cmd(&["HRANDFIELD", "rk:h", "-7", "WITHVALUES"])),
        14
    );
    assert_eq!(
        array_len(&r.cmd(&["ZRANDMEMBER", "rk:z", "-7", "WITHSCORES"])),
        14
    );
    still_answers(&s);
}

/// Redis 7.0.15 never answers these (it writes 2^63 picks into memory,
/// redis/redis#11671): ferrokv only.
#[test]
fn random_picks_past_the_reply_bound_are_refused_at_once() {
    if against_redis() {
        return;
    }
    let s = server();
    let mut r = conn(&s, 2);
    r.cmd(&["SADD", "rb:s", "a", "b", "c"]);
    r.cmd(&["SADD", "rb:ints", "1", "2", "3"]);
    r.cmd(&["HSET", "rb:h", "f", "v"]);
    r.cmd(&["ZADD", "rb:z", "1", "a"]);
    let quick = Duration::from_millis(500);
    for args in [
        &["SRANDMEMBER", "rb:s", NEG_LONG_MAX][..],
        &["SRANDMEMBER", "rb:ints", NEG_LONG_MAX],
        &["HRANDFIELD", "rb:h", NEG_LONG_MAX],
        &["HRANDFIELD", "rb:h", "-4611686018427387903", "WITHVALUES"],
        &["ZRANDMEMBER", "rb:z", NEG_LONG_MAX],
        &["ZRANDMEMBER", "rb:z", "-4611686018427387903", "WITHSCORES"],
    ] {
        check_quick(&mut r, args, err(REPLY_TOO_LARGE), quick);
    }
    // The connection is in step: the next reply is the next command's.
    assert_eq!(r.cmd(&["SCARD", "rb:s"]), int(3));
    still_answers(&s);
}

#[test]
fn random_picks_stop_at_proto_max_bulk_len_bytes() {
    if against_redis() {
        return; // Redis has no bound here (see the test above).
    }
    let s = own_server();
    let mut r = conn(&s, 0);
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1048576"]),
        ok()
    );
    let member = "m".repeat(1000);
    r.cmd(&["SADD", "s", &member]);
    r.cmd(&["HSET", "h", &member, "v"]);
    r.cmd(&["ZADD", "z", "1", &member]);
    // 1000 picks of `$1000\r\n...\r\n` (1007 bytes) fit in 1 MB ...
    assert_eq!(array_len(&r.cmd(&["SRANDMEMBER", "s", "-1000"])), 1000);
    assert_eq!(array_len(&r.cmd(&["HRANDFIELD", "h", "-1000"])), 1000);
    assert_eq!(array_len(&r.cmd(&["ZRANDMEMBER", "z", "-1000"])), 1000);
    // ... 2000 do not: refused after the bound, none of them sent.
    assert_eq!(r.cmd(&["SRANDMEMBER", "s", "-2000"]), err(REPLY_TOO_LARGE));
    assert_eq!(
        r.cmd(&["HRANDFIELD", "h", "-2000", "WITHVALUES"]),
        err(REPLY_TOO_LARGE)
    );
    assert_eq!(
        r.cmd(&["ZRANDMEMBER", "z", "-2000", "WITHSCORES"]),
        err(REPLY_TOO_LARGE)
    );
    assert_eq!(r.cmd(&["SCARD", "s"]), int(1));
    still_answers(&s);
}

#[test]
fn pop_and_position_counts_at_the_extremes() {
    let s = server();
    let mut r = conn(&s, 3);
    r.cmd(&["SADD", "pc:s", "a", "b", "c"]);
    r.cmd(&["RPUSH", "pc:l", "a", "b", "c", "a", "b", "c"]);
    r.cmd(&["ZADD", "pc:z", "1", "a", "2", "b"]);
    let positive = "ERR value is out of range, must be positive";
    check(
        &mut r,
        &[
            (&["SPOP", "pc:s", "-1"], err(positive)),
            (&["SPOP", "pc:s", LONG_MIN], err(positive)),
            (&["SPOP", "pc:none", LONG_MAX], arr(vec![])),
            (&["LPOP", "pc:l", "-1"], err(positive)),
            (&["ZPOPMIN", "pc:z", LONG_MIN], err(positive)),
            // RANK LONG_MIN: Redis negates it, it stays negative, every
            // match passes — the first match from the tail.
            (&["LPOS", "pc:l", "a", "RANK", LONG_MIN], int(3)),
            (&["LPOS", "pc:l", "a", "RANK", NEG_LONG_MAX], nil()),
            (&["LPOS", "pc:l", "a", "RANK", LONG_MAX], nil()),
            (
                &["LPOS", "pc:l", "a", "RANK", "0"],
                err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"),
            ),
            (&["LPOS", "pc:l", "a", "COUNT", "-1"], err("ERR COUNT can't be negative")),
            (&["LPOS", "pc:l", "a", "MAXLEN", LONG_MIN], err("ERR MAXLEN can't be negative")),
            (
                &["LPOS", "pc:l", "a", "COUNT", LONG_MAX, "MAXLEN", LONG_MAX, "RANK", NEG_LONG_MAX],
                arr(vec![]),
            ),
            (&["LPOS", "pc:l", "a", "COUNT", LONG_MAX, "RANK", LONG_MIN], arr(vec![int(3), int(0)])),
            (&["LPOS", "pc:l", "c", "COUNT", "0", "MAXLEN", LONG_MAX], arr(vec![int(2), int(5)])),
            (&["LRANGE", "pc:l", "0", "-1"], bulks(&["a", "b", "c", "a", "b", "c"])),
            (&["LPOP", "pc:l", LONG_MAX], bulks(&["a", "b", "c", "a", "b", "c"])),
            (&["ZPOPMAX", "pc:z", LONG_MAX], bulks(&["b", "2", "a", "1"])),
        ],
    );
    // SPOP of more than the set: the whole set, and the key is gone.
    assert_eq!(array_len(&r.cmd(&["SPOP", "pc:s", LONG_MAX])), 3);
    assert_eq!(r.cmd(&["EXISTS", "pc:s"]), int(0));
    still_answers(&s);
}

// ------------------------------------------------------- offsets, lengths

#[test]
fn string_offsets_past_proto_max_bulk_len_are_refused() {
    let s = server();
    let mut r = conn(&s, 4);
    r.cmd(&["SET", "so:k", "hello"]);
    check(
        &mut r,
        &[
            (&["SETRANGE", "so:k", LONG_MAX, "x"], err(TOO_BIG)),
            (&["SETRANGE", "so:k", "536870912", "x"], err(TOO_BIG)),
            (&["SETRANGE", "so:new", "536870912", "x"], err(TOO_BIG)),
            (
                &["SETRANGE", "so:k", "-1", "x"],
                err("ERR offset is out of range"),
            ),
            (
                &["SETRANGE", "so:k", LONG_MIN, "x"],
                err("ERR offset is out of range"),
            ),
            // Nothing to write: no size to check, nothing created.
            (&["SETRANGE", "so:new", LONG_MAX, ""], int(0)),
            (&["SETRANGE", "so:k", LONG_MAX, ""], int(5)),
            (&["EXISTS", "so:new"], int(0)),
            (&["GETRANGE", "so:k", LONG_MIN, LONG_MAX], bulk("hello")),
            (&["GETRANGE", "so:k", LONG_MAX, LONG_MIN], bulk("")),
            // Both negative and equal: each clamps to 0, the first byte.
            (&["GETRANGE", "so:k", LONG_MIN, LONG_MIN], bulk("h")),
            (&["GETRANGE", "so:k", "-1", LONG_MAX], bulk("o")),
            (&["GETRANGE", "so:none", LONG_MIN, LONG_MAX], bulk("")),
            (&["GET", "so:k"], bulk("hello")),
        ],
    );
    still_answers(&s);
}

#[test]
fn lcs_table_past_proto_max_bulk_len_is_refused() {
    let s = own_server();
    let mut r = conn(&s, 0);
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1048576"]),
        ok()
    );
    // (511+1)^2 cells of 4 bytes = 1048576: exactly the limit, allowed.
    r.cmd(&["SET", "a", &"x".repeat(511)]);
    r.cmd(&["SET", "b", &"x".repeat(511)]);
    assert_eq!(r.cmd(&["LCS", "a", "b", "LEN"]), int(511));
    // One byte more on one side and the table passes it.
    r.cmd(&["SET", "b", &"x".repeat(512)]);
    let refused =
        err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    assert_eq!(r.cmd(&["LCS", "a", "b", "LEN"]), refused);
    assert_eq!(r.cmd(&["LCS", "a", "b", "IDX"]), refused);
    assert_eq!(r.cmd(&["LCS", "a", "b"]), refused);
    // A missing key is an empty string: a table of one row.
    assert_eq!(r.cmd(&["LCS", "a", "none", "LEN"]), int(0));
    still_answers(&s);
}

#[test]
fn list_and_zset_ranges_clamp_extreme_indexes() {
    let s = server();
    let mut r = conn(&s, 5);
    r.cmd(&["RPUSH", "rg:l", "a", "b", "c"]);
    r.cmd(&["ZADD", "rg:z", "1", "a", "2", "b", "3", "c"]);
    check(
        &mut r,
        &[
            (
                &["LRANGE", "rg:l", LONG_MIN, LONG_MAX],
                bulks(&["a", "b", "c"]),
            ),
            (&["LRANGE", "rg:l", LONG_MAX, LONG_MIN], arr(vec![])),
            (&["LINDEX", "rg:l", LONG_MIN], nil()),
            (&["LINDEX", "rg:l", LONG_MAX], nil()),
            (
                &["LSET", "rg:l", LONG_MIN, "x"],
                err("ERR index out of range"),
            ),
            (
                &["LSET", "rg:l", LONG_MAX, "x"],
                err("ERR index out of range"),
            ),
            (&["LINSERT", "rg:l", "BEFORE", "nope", "x"], int(-1)),
            (&["LREM", "rg:l", LONG_MIN, "nope"], int(0)),
            (
                &["ZRANGE", "rg:z", LONG_MIN, LONG_MAX],
                bulks(&["a", "b", "c"]),
            ),
            (&["ZRANGE", "rg:z", LONG_MAX, LONG_MIN], arr(vec![])),
            (
                &[
                    "ZRANGE", "rg:z", "-inf", "+inf", "BYSCORE", "LIMIT", LONG_MAX, LONG_MAX,
                ],
                arr(vec![]),
            ),
            (
                &[
                    "ZRANGE", "rg:z", "-inf", "+inf", "BYSCORE", "LIMIT", LONG_MIN, "-1",
                ],
                arr(vec![]),
            ),
            (
                &[
                    "ZRANGE", "rg:z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", LONG_MIN,
                ],
                bulks(&["b", "c"]),
            ),
            (
                &[
                    "ZRANGEBYSCORE",
                    "rg:z",
                    "-inf",
                    "+inf",
                    "LIMIT",
                    "0",
                    LONG_MAX,
                ],
                bulks(&["a", "b", "c"]),
            ),
            (
                &[
                    "ZREVRANGEBYSCORE",
                    "rg:z",
                    "+inf",
                    "-inf",
                    "LIMIT",
                    LONG_MAX,
                    "1",
                ],
                arr(vec![]),
            ),
            (
                &["ZRANGEBYLEX", "rg:z", "-", "+", "LIMIT", LONG_MAX, "1"],
                arr(vec![]),
            ),
            (
                &[
                    "ZRANGESTORE",
                    "rg:dst",
                    "rg:z",
                    "-inf",
                    "+inf",
                    "BYSCORE",
                    "LIMIT",
                    "0",
                    LONG_MAX,
                ],
                int(3),
            ),
            (&["ZREMRANGEBYRANK", "rg:z", LONG_MAX, LONG_MIN], int(0)),
            (&["LTRIM", "rg:l", LONG_MIN, LONG_MAX], ok()),
            (&["LLEN", "rg:l"], int(3)),
            (&["LTRIM", "rg:l", LONG_MAX, LONG_MIN], ok()),
            (&["EXISTS", "rg:l"], int(0)),
        ],
    );
    still_answers(&s);
}

// --------------------------------------------------------------- overflow

#[test]
fn expire_times_that_overflow_are_invalid() {
    let s = server();
    let mut r = conn(&s, 6);
    r.cmd(&["SET", "ex:k", "v"]);
    let inv = |c: &str| err(&format!("ERR invalid expire time in '{c}' command"));
    check(
        &mut r,
        &[
            (&["SET", "ex:e", "v", "EX", LONG_MAX], inv("set")),
            (&["SET", "ex:e", "v", "EX", "9223372036854775"], inv("set")),
            (&["SET", "ex:e", "v", "PX", LONG_MAX], inv("set")),
            (&["SET", "ex:e", "v", "EXAT", LONG_MAX], inv("set")),
            (&["SET", "ex:e", "v", "EX", LONG_MIN], inv("set")),
            (&["SETEX", "ex:e", LONG_MAX, "v"], inv("setex")),
            (&["PSETEX", "ex:e", LONG_MAX, "v"], inv("psetex")),
            (&["GETEX", "ex:k", "EX", LONG_MAX], inv("getex")),
            (&["GETEX", "ex:k", "PX", LONG_MAX], inv("getex")),
            (&["EXISTS", "ex:e"], int(0)),
            (&["EXPIRE", "ex:k", LONG_MAX], inv("expire")),
            (&["EXPIRE", "ex:k", LONG_MIN], inv("expire")),
            (&["PEXPIRE", "ex:k", LONG_MAX], inv("pexpire")),
            (&["EXPIREAT", "ex:k", LONG_MAX], inv("expireat")),
            (&["TTL", "ex:k"], int(-1)),
            // The largest absolute time is a valid (far) expiry.
            (&["SET", "ex:far", "v", "PXAT", LONG_MAX], ok()),
            (&["PEXPIRETIME", "ex:far"], int(i64::MAX)),
            (&["PEXPIREAT", "ex:k", LONG_MAX], int(1)),
            (&["PEXPIRETIME", "ex:k"], int(i64::MAX)),
            // A relative time far in the past deletes the key.
            (&["PEXPIRE", "ex:k", LONG_MIN], int(1)),
            (&["EXISTS", "ex:k"], int(0)),
        ],
    );
    still_answers(&s);
}

#[test]
fn increments_past_the_limits_are_refused() {
    let s = server();
    let mut r = conn(&s, 7);
    let overflow = err("ERR increment or decrement would overflow");
    let nan_inf = err("ERR increment would produce NaN or Infinity");
    check(
        &mut r,
        &[
            (&["INCRBY", "ov:i", LONG_MAX], int(i64::MAX)),
            (&["INCRBY", "ov:i", "1"], overflow.clone()),
            (&["INCR", "ov:i"], overflow.clone()),
            (
                &["DECRBY", "ov:j", LONG_MIN],
                err("ERR decrement would overflow"),
            ),
            (&["DECRBY", "ov:j", LONG_MAX], int(-i64::MAX)),
            (&["DECR", "ov:j"], int(i64::MIN)),
            (&["DECR", "ov:j"], overflow.clone()),
            (&["INCRBY", "ov:j", LONG_MIN], overflow.clone()),
            (&["HINCRBY", "ov:h", "i", LONG_MAX], int(i64::MAX)),
            (&["HINCRBY", "ov:h", "i", "1"], overflow.clone()),
            (&["HINCRBY", "ov:h", "i", LONG_MIN], int(-1)),
            (&["INCRBYFLOAT", "ov:f", "inf"], nan_inf.clone()),
            (&["INCRBYFLOAT", "ov:f", "-inf"], nan_inf.clone()),
            (&["EXISTS", "ov:f"], int(0)),
            (&["SET", "ov:f", "1.7976931348623157e308"], ok()),
            (
                &["INCRBYFLOAT", "ov:f", "nan"],
                err("ERR value is not a valid float"),
            ),
            (
                &["HINCRBYFLOAT", "ov:h", "f", "inf"],
                err("ERR value is NaN or Infinity"),
            ),
            (&["ZINCRBY", "ov:z", "inf", "a"], bulk("inf")),
            (
                &["ZINCRBY", "ov:z", "-inf", "a"],
                err("ERR resulting score is not a number (NaN)"),
            ),
            (
                &["ZADD", "ov:z", "INCR", "-inf", "a"],
                err("ERR resulting score is not a number (NaN)"),
            ),
            (
                &["ZADD", "ov:z", "nan", "b"],
                err("ERR value is not a valid float"),
            ),
            (&["ZSCORE", "ov:z", "a"], bulk("inf")),
        ],
    );
    still_answers(&s);
}

// ----------------------------------------------------- numkeys, db indexes

#[test]
fn key_counts_beyond_the_arguments_are_refused() {
    let s = server();
    let mut r = conn(&s, 8);
    r.cmd(&["SADD", "nk:s", "a"]);
    r.cmd(&["ZADD", "nk:z", "1", "a"]);
    r.cmd(&["RPUSH", "nk:l", "a", "b"]);
    let at_least = |c: &str| {
        err(&format!(
            "ERR at least 1 input key is needed for '{c}' command"
        ))
    };
    check(
        &mut r,
        &[
            (&["ZUNIONSTORE", "nk:d", LONG_MAX, "nk:z"], err(SYNTAX)),
            (
                &["ZUNIONSTORE", "nk:d", LONG_MIN, "nk:z"],
                at_least("zunionstore"),
            ),
            (&["ZINTER", LONG_MAX, "nk:z"], err(SYNTAX)),
            (&["ZDIFF", LONG_MAX, "nk:z"], err(SYNTAX)),
            (
                &["SINTERCARD", LONG_MAX, "nk:s"],
                err("ERR Number of keys can't be greater than number of args"),
            ),
            (
                &["SINTERCARD", "1", "nk:s", "LIMIT", LONG_MIN],
                err("ERR LIMIT can't be negative"),
            ),
            (&["SINTERCARD", "1", "nk:s", "LIMIT", LONG_MAX], int(1)),
            (&["LMPOP", LONG_MAX, "nk:l", "LEFT"], err(SYNTAX)),
            (&["LMPOP", "2147483647", "nk:l", "LEFT"], err(SYNTAX)),
            (
                &["LMPOP", "1", "nk:l", "LEFT", "COUNT", "0"],
                err("ERR count should be greater than 0"),
            ),
            (&["ZMPOP", LONG_MAX, "nk:z", "MIN"], err(SYNTAX)),
            (
                &["LMPOP", "1", "nk:l", "LEFT", "COUNT", LONG_MAX],
                arr(vec![bulk("nk:l"), bulks(&["a", "b"])]),
            ),
            (
                &["ZMPOP", "1", "nk:z", "MIN", "COUNT", LONG_MAX],
                arr(vec![bulk("nk:z"), arr(vec![bulks(&["a", "1"])])]),
            ),
        ],
    );
    still_answers(&s);
}

#[test]
fn database_indexes_beyond_32_bits_are_refused() {
    let s = server();
    let mut r = conn(&s, 9);
    r.cmd(&["SET", "db:k", "v"]);
    check(
        &mut r,
        &[
            (&["SELECT", LONG_MAX], err(INT_RANGE)),
            (&["SELECT", "2147483648"], err(INT_RANGE)),
            (&["SELECT", "-1"], err("ERR DB index is out of range")),
            (&["MOVE", "db:k", LONG_MAX], err(INT_RANGE)),
            (
                &["MOVE", "db:k", "2147483647"],
                err("ERR DB index is out of range"),
            ),
            (&["COPY", "db:k", "db:c", "DB", LONG_MIN], err(INT_RANGE)),
            (
                &["SWAPDB", "9", LONG_MAX],
                err("ERR invalid second DB index"),
            ),
            (
                &["SWAPDB", LONG_MIN, "9"],
                err("ERR invalid first DB index"),
            ),
            (&["GET", "db:k"], bulk("v")),
        ],
    );
    still_answers(&s);
}

#[test]
fn blocking_timeouts_out_of_range_are_refused() {
    let s = server();
    let mut r = conn(&s, 10);
    let negative = err("ERR timeout is negative");
    check(
        &mut r,
        &[
            (&["BLPOP", "bt:none", LONG_MAX], negative.clone()),
            (&["BLPOP", "bt:none", "1e300"], negative.clone()),
            (&["BLPOP", "bt:none", "inf"], negative.clone()),
            (&["BRPOP", "bt:none", "-1"], negative.clone()),
            (
                &["BLMOVE", "bt:none", "bt:d", "LEFT", "LEFT", "-inf"],
                negative.clone(),
            ),
            (&["BZPOPMIN", "bt:none", "1e300"], negative.clone()),
            (
                &["BLPOP", "bt:none", "nan"],
                err("ERR timeout is not a float or out of range"),
            ),
        ],
    );
    still_answers(&s);
}

// ------------------------------------------------------- iteration, ids

#[test]
fn scan_count_beyond_the_keyspace_walks_it_once() {
    let s = server();
    let mut r = conn(&s, 11);
    // 50 000 keys in one MSET.
    let mut args: Vec<String> = vec!["MSET".into()];
    for i in 0..50_000 {
        args.push(format!("sc:{i}"));
        args.push("v".into());
    }
    assert_eq!(r.cmd(&args), ok());
    // A pattern that matches nothing, a COUNT of LONG_MAX: one pass over
    // the keyspace, cursor 0, nothing found.
    let t = Instant::now();
    let reply = r.cmd(&["SCAN", "0", "MATCH", "nomatch:*", "COUNT", LONG_MAX]);
    assert_eq!(reply, arr(vec![bulk("0"), arr(vec![])]));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "SCAN took {:?}",
        t.elapsed()
    );
    let all = r.cmd(&["SCAN", "0", "COUNT", LONG_MAX]);
    match &all {
        Frame::Array(v) => {
            assert_eq!(v[0], bulk("0"));
            assert_eq!(array_len(&v[1]), 50_000);
        }
        other => panic!("{other:?}"),
    }
    check(
        &mut r,
        &[
            (&["SCAN", "0", "COUNT", "0"], err(SYNTAX)),
            (&["SCAN", "0", "COUNT", LONG_MIN], err(SYNTAX)),
            (&["SCAN", "18446744073709551616"], err("ERR invalid cursor")),
            (
                &["SCAN", "18446744073709551615", "MATCH", "nomatch:*"],
                arr(vec![bulk("0"), arr(vec![])]),
            ),
            (&["FLUSHDB"], ok()),
        ],
    );
    still_answers(&s);
}

#[test]
fn client_list_id_lists_each_given_id_in_order() {
    let s = server();
    let mut r = conn(&s, 12);
    let mut other = conn(&s, 12);
    let Frame::Integer(me) = r.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID")
    };
    let Frame::Integer(them) = other.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID")
    };
    let (me, them) = (me.to_string(), them.to_string());
    let list = |f: Frame| -> Vec<String> {
        let text = match f {
            Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        };
        text.lines()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    };
    let got = list(r.cmd(&[
        "CLIENT", "LIST", "ID", &them, &me, "0", &them, LONG_MIN, LONG_MAX,
    ]));
    assert_eq!(
        got,
        vec![
            format!("id={them}"),
            format!("id={me}"),
            format!("id={them}")
        ]
    );
    // 100 000 ids that match nothing, one that does: answered at once.
    let mut args: Vec<String> = vec!["CLIENT".into(), "LIST".into(), "ID".into()];
    args.extend((0..100_000).map(|i| (1_000_000_000 + i).to_string()));
    args.push(me.clone());
    let t = Instant::now();
    assert_eq!(list(r.cmd(&args)), vec![format!("id={me}")]);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "CLIENT LIST took {:?}",
        t.elapsed()
    );
    assert_eq!(
        r.cmd(&["CLIENT", "LIST", "ID", &me, "x"]),
        err("ERR Invalid client ID")
    );
    still_answers(&s);
}

#[test]
fn randomkey_removes_expired_keys_until_it_finds_a_live_one() {
    let s = own_server();
    let mut r = conn(&s, 0);
    assert_eq!(r.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    let n = 3000;
    let mut pipeline = Vec::new();
    for i in 0..n {
        pipeline.extend(Frame::command(&[
            "SET",
            &format!("gone:{i}"),
            "v",
            "PX",
            "1",
        ]));
    }
    r.send(&pipeline);
    assert!(r.read_frames(n).iter().all(|f| *f == ok()));
    assert_eq!(r.cmd(&["SET", "live", "v"]), ok());
    std::thread::sleep(Duration::from_millis(20));
    // Redis draws until a live key, deleting each expired one it draws.
    assert_eq!(r.cmd(&["RANDOMKEY"]), bulk("live"));
    let Frame::Integer(left) = r.cmd(&["DBSIZE"]) else {
        panic!("DBSIZE")
    };
    assert!(left <= n as i64 + 1, "{left}");
    // Once only expired keys remain, RANDOMKEY empties the database.
    assert_eq!(r.cmd(&["DEL", "live"]), int(1));
    assert_eq!(r.cmd(&["RANDOMKEY"]), nil());
    assert_eq!(r.cmd(&["DBSIZE"]), int(0));
    still_answers(&s);
}

// ------------------------------------------------------------ DEBUG, misc

#[test]
fn debug_sleep_of_an_unrepresentable_time_returns_at_once() {
    let s = server();
    let mut r = conn(&s, 13);
    let quick = Duration::from_millis(500);
    for t in ["inf", "-inf", "1e300", LONG_MAX, "-1", "nan", "abc", "0"] {
        check_quick(&mut r, &["DEBUG", "SLEEP", t], ok(), quick);
    }
    still_answers(&s);
}

#[test]
fn introspection_counts_at_the_extremes() {
    let s = server();
    let mut r = conn(&s, 14);
    r.cmd(&["SET", "in:k", "v"]);
    check(
        &mut r,
        &[
            (&["SLOWLOG", "GET", "-2"], err("ERR count should be greater than or equal to -1")),
            (&["SLOWLOG", "GET", LONG_MIN], err("ERR count should be greater than or equal to -1")),
            (
                &["OBJECT", "FREQ", "in:k"],
                err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
            ),
            (&["OBJECT", "FREQ", "in:none"], nil()),
        ],
    );
    // The whole slow log (at most slowlog-max-len entries), however
    // large the count.
    assert!(array_len(&r.cmd(&["SLOWLOG", "GET", LONG_MAX])) <= 128);
    still_answers(&s);
}
