//! Guards the semantics, options and exact error texts of the string,
//! keyspace, connection and server commands against Redis 7.0, driven
//! through the `redis` crate and, where the client would hide the exact
//! reply, through a raw socket.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same assertions against the
//! real `redis-server`.
mod common;
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use redis::Commands;
use std::sync::Arc;

fn against_redis() -> bool {
    std::env::var("FERROKV_TESTS_TARGET").as_deref() == Ok("redis")
}

fn server() -> Arc<ServerProcess> {
    if against_redis() {
        Arc::new(ServerProcess::redis(&[]))
    } else {
        common::shared_ferrokv()
    }
}

fn ok() -> Frame {
    Frame::Simple(b"OK".to_vec())
}
fn bulk(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}
fn int(i: i64) -> Frame {
    Frame::Integer(i)
}
fn nil() -> Frame {
    Frame::Null
}
fn err(s: &str) -> Frame {
    Frame::Error(s.as_bytes().to_vec())
}
fn arr(v: Vec<Frame>) -> Frame {
    Frame::Array(v)
}

/// Runs each command on `r` and asserts its exact reply.
fn check(r: &mut Raw, cases: &[(&[&str], Frame)]) {
    for (args, expected) in cases {
        let got = r.cmd(args);
        if &got != expected {
            let mut g = Vec::new();
            got.encode(&mut g);
            let mut e = Vec::new();
            expected.encode(&mut e);
            panic!(
                "{args:?}\n  got:      {:?}\n  expected: {:?}",
                String::from_utf8_lossy(&g),
                String::from_utf8_lossy(&e)
            );
        }
    }
}

/// A raw connection with database `db` selected.
fn raw_db(s: &ServerProcess, db: u32) -> Raw {
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SELECT", &db.to_string()]), ok());
    r
}

const INVALID_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

// ---------------------------------------------------------------- strings

#[test]
fn set_and_get_through_the_redis_client() {
    let s = server();
    let mut c = s.client();
    let _: () = c.set("str:plain", "value").unwrap();
    let v: String = c.get("str:plain").unwrap();
    assert_eq!(v, "value");
    let missing: Option<String> = c.get("str:missing").unwrap();
    assert_eq!(missing, None);
}

#[test]
fn set_nx_xx_get_options() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["SET", "setopt", "1", "NX"], ok()),
            (&["SET", "setopt", "2", "NX"], nil()),
            (&["SET", "setopt:none", "2", "XX"], nil()),
            (&["SET", "setopt", "3", "XX"], ok()),
            (&["SET", "setopt", "4", "GET"], bulk("3")),
            (&["SET", "setopt:new", "4", "GET"], nil()),
            (&["SET", "setopt", "5", "NX", "GET"], bulk("4")),
            (&["GET", "setopt"], bulk("4")),
            (&["SET", "setopt:none2", "5", "XX", "GET"], nil()),
            (&["EXISTS", "setopt:none2"], int(0)),
            (&["SET", "setopt", "v", "NX", "XX"], err(SYNTAX)),
            (&["SET", "setopt", "v", "XX", "NX"], err(SYNTAX)),
            (&["SET", "setopt", "v", "FOO"], err(SYNTAX)),
            (&["SET", "setopt", "v", "EX"], err(SYNTAX)),
            // Repeating the same option is allowed; the last value wins.
            (&["SET", "setopt", "v", "NX", "NX"], nil()),
            (&["SET", "setopt", "v", "XX", "XX"], ok()),
            (&["SET", "setopt", "w", "GET", "GET"], bulk("v")),
            (&["SET", "setopt", "v", "KEEPTTL", "KEEPTTL"], ok()),
            (&["SET", "setopt", "v", "EX", "100", "EX", "200"], ok()),
            (&["TTL", "setopt"], int(200)),
        ],
    );
}

#[test]
fn set_expire_options_and_errors() {
    let s = server();
    let mut r = s.raw();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let at_s = (now_ms / 1000 + 1000).to_string();
    let at_ms = (now_ms + 1_000_000).to_string();
    check(
        &mut r,
        &[
            (&["SET", "setex:a", "v", "EX", "100"], ok()),
            (&["TTL", "setex:a"], int(100)),
            (&["SET", "setex:a", "v", "PX", "100000"], ok()),
            (&["TTL", "setex:a"], int(100)),
            (&["SET", "setex:a", "v", "EXAT", &at_s], ok()),
            (&["EXPIRETIME", "setex:a"], int(now_ms / 1000 + 1000)),
            (&["SET", "setex:a", "v", "PXAT", &at_ms], ok()),
            (&["PEXPIRETIME", "setex:a"], int(now_ms + 1_000_000)),
            (&["SET", "setex:a", "w", "KEEPTTL"], ok()),
            (&["PEXPIRETIME", "setex:a"], int(now_ms + 1_000_000)),
            (&["SET", "setex:a", "w"], ok()),
            (&["TTL", "setex:a"], int(-1)),
            (
                &["SET", "setex:a", "v", "EX", "0"],
                err("ERR invalid expire time in 'set' command"),
            ),
            (
                &["SET", "setex:a", "v", "EX", "-1"],
                err("ERR invalid expire time in 'set' command"),
            ),
            (
                &["SET", "setex:a", "v", "PX", "0"],
                err("ERR invalid expire time in 'set' command"),
            ),
            (
                &["SET", "setex:a", "v", "EX", "9223372036854775807"],
                err("ERR invalid expire time in 'set' command"),
            ),
            (&["SET", "setex:a", "v", "EX", "x"], err(INVALID_INT)),
            // Option parsing comes before the value is validated.
            (&["SET", "setex:a", "v", "EX", "x", "FOO"], err(SYNTAX)),
            (
                &["SET", "setex:a", "v", "EX", "10", "PX", "100"],
                err(SYNTAX),
            ),
            (&["SET", "setex:a", "v", "KEEPTTL", "EX", "10"], err(SYNTAX)),
            (&["SET", "setex:a", "v", "EX", "10", "KEEPTTL"], err(SYNTAX)),
            // An absolute time in the past stores an already expired key.
            (&["SET", "setex:a", "v", "PXAT", "1"], ok()),
            (&["GET", "setex:a"], nil()),
            (&["SETEX", "setex:b", "100", "v"], ok()),
            (&["TTL", "setex:b"], int(100)),
            (
                &["SETEX", "setex:b", "0", "v"],
                err("ERR invalid expire time in 'setex' command"),
            ),
            (&["SETEX", "setex:b", "x", "v"], err(INVALID_INT)),
            (&["PSETEX", "setex:c", "100000", "v"], ok()),
            (&["TTL", "setex:c"], int(100)),
            (
                &["PSETEX", "setex:c", "-5", "v"],
                err("ERR invalid expire time in 'psetex' command"),
            ),
        ],
    );
}

#[test]
fn getex_getdel_getset_setnx() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["SET", "gx", "v"], ok()),
            (&["GETEX", "gx"], bulk("v")),
            (&["TTL", "gx"], int(-1)),
            (&["GETEX", "gx", "EX", "100"], bulk("v")),
            (&["TTL", "gx"], int(100)),
            (&["GETEX", "gx", "PERSIST"], bulk("v")),
            (&["TTL", "gx"], int(-1)),
            (&["GETEX", "gx", "PX", "100000"], bulk("v")),
            (&["TTL", "gx"], int(100)),
            (&["GETEX", "gx", "PERSIST", "PERSIST"], bulk("v")),
            (&["GETEX", "gx", "PERSIST", "EX", "1"], err(SYNTAX)),
            (&["GETEX", "gx", "FOO"], err(SYNTAX)),
            (&["GETEX", "gx", "EX"], err(SYNTAX)),
            (
                &["GETEX", "gx", "EX", "0"],
                err("ERR invalid expire time in 'getex' command"),
            ),
            (&["GETEX", "gx", "EX", "x"], err(INVALID_INT)),
            // A missing key answers nil before the time is validated.
            (&["GETEX", "gx:none", "EX", "0"], nil()),
            (&["GETEX", "gx", "PXAT", "1"], bulk("v")),
            (&["EXISTS", "gx"], int(0)),
            (&["GETDEL", "gd"], nil()),
            (&["SET", "gd", "1"], ok()),
            (&["GETDEL", "gd"], bulk("1")),
            (&["EXISTS", "gd"], int(0)),
            (&["GETSET", "gs", "a"], nil()),
            (&["SETEX", "gs", "100", "b"], ok()),
            (&["GETSET", "gs", "c"], bulk("b")),
            // GETSET drops the TTL, as SET does.
            (&["TTL", "gs"], int(-1)),
            (&["SETNX", "snx", "1"], int(1)),
            (&["SETNX", "snx", "2"], int(0)),
            (&["GET", "snx"], bulk("1")),
        ],
    );
}

#[test]
fn mset_msetnx_mget() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["MSET", "ms:a", "1", "ms:b", "2"], ok()),
            (
                &["MGET", "ms:a", "ms:b", "ms:c"],
                arr(vec![bulk("1"), bulk("2"), nil()]),
            ),
            (
                &["MSET", "ms:a", "1", "ms:b"],
                err("ERR wrong number of arguments for 'mset' command"),
            ),
            (
                &["MSETNX", "ms:a", "1", "ms:b"],
                err("ERR wrong number of arguments for 'msetnx' command"),
            ),
            (&["MSETNX", "ms:c", "3", "ms:a", "x"], int(0)),
            (&["EXISTS", "ms:c"], int(0)),
            (&["MSETNX", "ms:c", "3", "ms:d", "4"], int(1)),
            (&["MGET", "ms:c", "ms:d"], arr(vec![bulk("3"), bulk("4")])),
            // The last of duplicate keys wins.
            (&["MSET", "ms:e", "1", "ms:e", "2"], ok()),
            (&["GET", "ms:e"], bulk("2")),
        ],
    );
}

#[test]
fn append_strlen_getrange_setrange() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["APPEND", "ap", "hello"], int(5)),
            (&["APPEND", "ap", " world"], int(11)),
            (&["GET", "ap"], bulk("hello world")),
            (&["STRLEN", "ap"], int(11)),
            (&["STRLEN", "ap:none"], int(0)),
            (&["GETRANGE", "ap", "0", "4"], bulk("hello")),
            (&["GETRANGE", "ap", "-5", "-1"], bulk("world")),
            (&["GETRANGE", "ap", "0", "-1"], bulk("hello world")),
            (&["GETRANGE", "ap", "5", "2"], bulk("")),
            (&["GETRANGE", "ap", "-100", "100"], bulk("hello world")),
            (&["GETRANGE", "ap", "-1", "-5"], bulk("")),
            (&["GETRANGE", "ap", "x", "1"], err(INVALID_INT)),
            (&["GETRANGE", "ap:none", "0", "-1"], bulk("")),
            (&["SUBSTR", "ap", "0", "1"], bulk("he")),
            (&["SETRANGE", "ap", "6", "Redis"], int(11)),
            (&["GET", "ap"], bulk("hello Redis")),
            (
                &["SETRANGE", "ap", "-1", "x"],
                err("ERR offset is out of range"),
            ),
            (
                &["SETRANGE", "ap", "536870912", "x"],
                err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
            ),
            (&["SETRANGE", "ap", "536870911", ""], int(11)),
            (&["SETRANGE", "sr:new", "0", ""], int(0)),
            (&["EXISTS", "sr:new"], int(0)),
            (&["SETRANGE", "sr:pad", "3", "ab"], int(5)),
            (&["GET", "sr:pad"], Frame::Bulk(b"\0\0\0ab".to_vec())),
            (&["SET", "ap:int", "12345"], ok()),
            (&["STRLEN", "ap:int"], int(5)),
            (&["APPEND", "ap:int", "6"], int(6)),
            (&["GET", "ap:int"], bulk("123456")),
        ],
    );
}

#[test]
fn incr_decr_family_and_overflow() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["INCR", "ctr"], int(1)),
            (&["INCRBY", "ctr", "10"], int(11)),
            (&["DECR", "ctr"], int(10)),
            (&["DECRBY", "ctr", "20"], int(-10)),
            (&["INCRBY", "ctr", "x"], err(INVALID_INT)),
            (&["INCRBY", "ctr", "1.5"], err(INVALID_INT)),
            (&["SET", "ctr:s", "abc"], ok()),
            (&["INCR", "ctr:s"], err(INVALID_INT)),
            (&["SET", "ctr:s", " 1"], ok()),
            (&["INCR", "ctr:s"], err(INVALID_INT)),
            (&["SET", "ctr:max", "9223372036854775807"], ok()),
            (
                &["INCR", "ctr:max"],
                err("ERR increment or decrement would overflow"),
            ),
            (&["SET", "ctr:min", "-9223372036854775808"], ok()),
            (
                &["DECR", "ctr:min"],
                err("ERR increment or decrement would overflow"),
            ),
            (
                &["DECRBY", "ctr", "-9223372036854775808"],
                err("ERR decrement would overflow"),
            ),
            (&["SETEX", "ctr:ttl", "100", "5"], ok()),
            (&["INCR", "ctr:ttl"], int(6)),
            // Counting keeps the TTL.
            (&["TTL", "ctr:ttl"], int(100)),
        ],
    );
}

#[test]
fn incrbyfloat_formats_like_redis() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["SET", "fl", "10.50"], ok()),
            (&["INCRBYFLOAT", "fl", "0.1"], bulk("10.6")),
            (&["INCRBYFLOAT", "fl", "-5"], bulk("5.6")),
            (&["SET", "fl", "5.0e3"], ok()),
            (&["INCRBYFLOAT", "fl", "2.0e2"], bulk("5200")),
            (&["INCRBYFLOAT", "fl:new", "3"], bulk("3")),
            (
                &["INCRBYFLOAT", "fl:new", "x"],
                err("ERR value is not a valid float"),
            ),
            (&["SET", "fl:s", "abc"], ok()),
            (
                &["INCRBYFLOAT", "fl:s", "1"],
                err("ERR value is not a valid float"),
            ),
            (
                &["INCRBYFLOAT", "fl:inf", "inf"],
                err("ERR increment would produce NaN or Infinity"),
            ),
            (&["SET", "fl:inf", "-inf"], ok()),
            (
                &["INCRBYFLOAT", "fl:inf", "-1.5"],
                err("ERR increment would produce NaN or Infinity"),
            ),
            (
                &["INCRBYFLOAT", "fl:inf", "x"],
                err("ERR value is not a valid float"),
            ),
            (&["SET", "fl:big", "3000"], ok()),
            // Redis computes in long double and prints %.17Lf.
            (
                &["INCRBYFLOAT", "fl:big", "0.1"],
                bulk("3000.10000000000000009"),
            ),
            (
                &["INCRBYFLOAT", "fl:p", "1.23456789012345678901"],
                bulk("1.23456789012345679"),
            ),
            (&["INCRBYFLOAT", "fl:e", "5.0e-10"], bulk("0.0000000005")),
            (&["INCRBYFLOAT", "fl:e", "-5.0e-10"], bulk("0")),
        ],
    );
}

#[test]
fn lcs_plain_len_idx() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["MSET", "lcs:a", "ohmytext", "lcs:b", "mynewtext"], ok()),
            (&["LCS", "lcs:a", "lcs:b"], bulk("mytext")),
            (&["LCS", "lcs:a", "lcs:b", "LEN"], int(6)),
            (
                &[
                    "LCS",
                    "lcs:a",
                    "lcs:b",
                    "IDX",
                    "MINMATCHLEN",
                    "4",
                    "WITHMATCHLEN",
                ],
                arr(vec![
                    bulk("matches"),
                    arr(vec![arr(vec![
                        arr(vec![int(4), int(7)]),
                        arr(vec![int(5), int(8)]),
                        int(4),
                    ])]),
                    bulk("len"),
                    int(6),
                ]),
            ),
            (
                &["LCS", "lcs:a", "lcs:b", "IDX"],
                arr(vec![
                    bulk("matches"),
                    arr(vec![
                        arr(vec![arr(vec![int(4), int(7)]), arr(vec![int(5), int(8)])]),
                        arr(vec![arr(vec![int(2), int(3)]), arr(vec![int(0), int(1)])]),
                    ]),
                    bulk("len"),
                    int(6),
                ]),
            ),
            (
                &["LCS", "lcs:a", "lcs:b", "IDX", "LEN"],
                err("ERR If you want both the length and indexes, please just use IDX."),
            ),
            (&["LCS", "lcs:a", "lcs:b", "FOO"], err(SYNTAX)),
            (&["LCS", "lcs:a", "lcs:none"], bulk("")),
        ],
    );
}

#[test]
fn type_exists_and_the_ttl_readers_do_not_reset_the_idle_time() {
    // Redis looks these keys up with LOOKUP_NOTOUCH; a real read touches.
    let s = server();
    let mut r = s.raw();
    r.cmd(&["SET", "idle:k", "v"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for c in [
        &["TTL", "idle:k"][..],
        &["PTTL", "idle:k"],
        &["EXPIRETIME", "idle:k"],
        &["PEXPIRETIME", "idle:k"],
        &["TYPE", "idle:k"],
        &["EXISTS", "idle:k"],
        &["OBJECT", "ENCODING", "idle:k"],
    ] {
        r.cmd(c);
        match r.cmd(&["OBJECT", "IDLETIME", "idle:k"]) {
            Frame::Integer(n) => assert!(n >= 2, "{c:?} reset the idle time to {n}"),
            other => panic!("{other:?}"),
        }
    }
    r.cmd(&["GET", "idle:k"]);
    assert_eq!(r.cmd(&["OBJECT", "IDLETIME", "idle:k"]), Frame::Integer(0));
}

#[test]
fn object_encoding_refcount_idletime_freq() {
    let s = server();
    let mut r = s.raw();
    let long = "a".repeat(45);
    check(
        &mut r,
        &[
            (&["SET", "enc:int", "12345"], ok()),
            (&["OBJECT", "ENCODING", "enc:int"], bulk("int")),
            (&["SET", "enc:emb", "hello"], ok()),
            (&["OBJECT", "ENCODING", "enc:emb"], bulk("embstr")),
            (&["SET", "enc:raw", &long], ok()),
            (&["OBJECT", "ENCODING", "enc:raw"], bulk("raw")),
            (&["SET", "enc:lz", "007"], ok()),
            (&["OBJECT", "ENCODING", "enc:lz"], bulk("embstr")),
            // APPEND and SETRANGE leave a raw string, as in Redis.
            (&["APPEND", "enc:int", "6"], int(6)),
            (&["OBJECT", "ENCODING", "enc:int"], bulk("raw")),
            (&["SETRANGE", "enc:emb", "0", "J"], int(5)),
            (&["OBJECT", "ENCODING", "enc:emb"], bulk("raw")),
            (&["INCR", "enc:int"], int(123457)),
            (&["OBJECT", "ENCODING", "enc:int"], bulk("int")),
            (&["OBJECT", "ENCODING", "enc:none"], nil()),
            (&["SET", "enc:big", "100000"], ok()),
            (&["OBJECT", "REFCOUNT", "enc:big"], int(1)),
            (&["OBJECT", "REFCOUNT", "enc:none"], nil()),
            (&["OBJECT", "IDLETIME", "enc:big"], int(0)),
            (&["OBJECT", "IDLETIME", "enc:none"], nil()),
            (&["OBJECT", "FREQ", "enc:none"], nil()),
            (
                &["OBJECT", "FREQ", "enc:big"],
                err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
            ),
            (
                &["OBJECT", "FOO", "x"],
                err("ERR unknown subcommand 'FOO'. Try OBJECT HELP."),
            ),
            (
                &["OBJECT", "ENCODING"],
                err("ERR wrong number of arguments for 'object|encoding' command"),
            ),
        ],
    );
    // Small integers are shared objects in Redis, reported as immortal.
    check(
        &mut r,
        &[
            (&["SET", "enc:small", "100"], ok()),
            (&["OBJECT", "REFCOUNT", "enc:small"], int(2147483647)),
        ],
    );
}

#[test]
fn binary_keys_and_values_hold_every_byte() {
    let s = server();
    let mut c = s.client();
    let all: Vec<u8> = (0..=255u8).collect();
    for (i, value) in [
        all.clone(),
        b"line\r\nbreak".to_vec(),
        b"nul\0inside\0".to_vec(),
        b"".to_vec(),
        "ünïcødé ✓".as_bytes().to_vec(),
        b"$5\r\nfake\r\n*1\r\n".to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut key = b"bin:\0\r\n".to_vec();
        key.extend_from_slice(&all);
        key.push(i as u8);
        let _: () = c.set(&key, &value).unwrap();
        let got: Vec<u8> = c.get(&key).unwrap();
        assert_eq!(got, value, "value {i}");
        let n: i64 = c.strlen(&key).unwrap();
        assert_eq!(n as usize, value.len());
        let n: i64 = redis::cmd("EXISTS").arg(&key).query(&mut c).unwrap();
        assert_eq!(n, 1, "value {i}");
        let _: () = c.del(&key).unwrap();
    }
    // A value holding every byte, one per key named by the byte.
    for b in 0..=255u8 {
        let _: () = c.set(&[b'k', b][..], &[b, b'\r', b'\n', b][..]).unwrap();
    }
    for b in 0..=255u8 {
        let got: Vec<u8> = c.get(&[b'k', b][..]).unwrap();
        assert_eq!(got, vec![b, b'\r', b'\n', b]);
    }
}

// ---------------------------------------------------------------- keyspace

#[test]
fn del_unlink_exists_type_touch() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["MSET", "dk:a", "1", "dk:b", "2", "dk:c", "3"], ok()),
            (&["EXISTS", "dk:a", "dk:a", "dk:none"], int(2)),
            (&["TOUCH", "dk:a", "dk:none"], int(1)),
            (&["TYPE", "dk:a"], Frame::Simple(b"string".to_vec())),
            (&["TYPE", "dk:none"], Frame::Simple(b"none".to_vec())),
            (&["DEL", "dk:a", "dk:a", "dk:none"], int(1)),
            (&["UNLINK", "dk:b", "dk:c", "dk:none"], int(2)),
            (&["EXISTS", "dk:a", "dk:b", "dk:c"], int(0)),
            (
                &["DEL"],
                err("ERR wrong number of arguments for 'del' command"),
            ),
        ],
    );
}

#[test]
fn rename_renamenx_copy_move() {
    let s = server();
    let mut r = raw_db(&s, 3);
    let _ = raw_db(&s, 4).cmd(&["FLUSHDB"]);
    check(
        &mut r,
        &[
            (&["FLUSHDB"], ok()),
            (&["RENAME", "rn:none", "x"], err("ERR no such key")),
            (&["RENAMENX", "rn:none", "x"], err("ERR no such key")),
            (&["SETEX", "rn:a", "100", "1"], ok()),
            (&["RENAME", "rn:a", "rn:a"], ok()),
            (&["RENAMENX", "rn:a", "rn:a"], int(0)),
            (&["RENAME", "rn:a", "rn:b"], ok()),
            (&["TTL", "rn:b"], int(100)),
            (&["SET", "rn:c", "3"], ok()),
            (&["RENAMENX", "rn:b", "rn:c"], int(0)),
            (&["RENAMENX", "rn:b", "rn:d"], int(1)),
            (&["RENAME", "rn:d", "rn:c"], ok()),
            (&["GET", "rn:c"], bulk("1")),
            (&["TTL", "rn:c"], int(100)),
            (&["COPY", "rn:c", "cp:a"], int(1)),
            (&["COPY", "rn:c", "cp:a"], int(0)),
            (&["TTL", "cp:a"], int(100)),
            (&["SET", "rn:c", "new"], ok()),
            (&["COPY", "rn:c", "cp:a", "REPLACE"], int(1)),
            (&["GET", "cp:a"], bulk("new")),
            (&["COPY", "rn:c", "cp:a", "DB", "4"], int(1)),
            (
                &["COPY", "rn:c", "cp:a", "DB", "16"],
                err("ERR DB index is out of range"),
            ),
            (&["COPY", "rn:c", "cp:a", "DB", "x"], err(INVALID_INT)),
            (
                &["COPY", "rn:c", "rn:c"],
                err("ERR source and destination objects are the same"),
            ),
            (&["COPY", "rn:c", "cp:b", "FOO"], err(SYNTAX)),
            (&["COPY", "rn:none", "cp:b"], int(0)),
            (&["MOVE", "rn:c", "4"], int(1)),
            (&["EXISTS", "rn:c"], int(0)),
            (&["SET", "mv:a", "1"], ok()),
            (
                &["MOVE", "mv:a", "3"],
                err("ERR source and destination objects are the same"),
            ),
            (&["MOVE", "mv:a", "16"], err("ERR DB index is out of range")),
            (&["MOVE", "mv:a", "x"], err(INVALID_INT)),
            (&["MOVE", "rn:none", "4"], int(0)),
            (&["SET", "cp:a", "here"], ok()),
            // The destination already has cp:a.
            (&["MOVE", "cp:a", "4"], int(0)),
        ],
    );
    let mut r4 = raw_db(&s, 4);
    check(
        &mut r4,
        &[
            (&["GET", "rn:c"], bulk("new")),
            (&["GET", "cp:a"], bulk("new")),
            (&["FLUSHDB"], ok()),
        ],
    );
}

#[test]
fn keys_scan_randomkey() {
    let s = server();
    let mut c = s.client();
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
    for i in 0..300 {
        let _: () = c.set(format!("scan:{i}"), i).unwrap();
    }
    let _: () = c.set("other", 1).unwrap();
    let mut keys: Vec<String> = c.keys("scan:1?").unwrap();
    keys.sort();
    assert_eq!(
        keys,
        (10..20).map(|i| format!("scan:{i}")).collect::<Vec<_>>()
    );
    let keys: Vec<String> = c.keys("[o]ther").unwrap();
    assert_eq!(keys, vec!["other"]);
    // A full SCAN sees every key exactly once.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("scan:*")
            .arg("COUNT")
            .arg(50)
            .query(&mut c)
            .unwrap();
        for k in batch {
            assert!(seen.insert(k));
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
    let (_, strings): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("TYPE")
        .arg("hash")
        .arg("COUNT")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert!(strings.is_empty());
    let k: String = redis::cmd("RANDOMKEY").query(&mut c).unwrap();
    assert!(k.starts_with("scan:") || k == "other");
    let mut r = raw_db(&s, 5);
    check(
        &mut r,
        &[
            (&["SCAN", "x"], err("ERR invalid cursor")),
            (&["SCAN", "0", "COUNT", "0"], err(SYNTAX)),
            (&["SCAN", "0", "COUNT", "x"], err(INVALID_INT)),
            (&["SCAN", "0", "MATCH"], err(SYNTAX)),
            (&["SCAN", "0", "FOO", "bar"], err(SYNTAX)),
            (&["FLUSHDB"], ok()),
            (&["RANDOMKEY"], nil()),
            (&["SCAN", "0"], arr(vec![bulk("0"), arr(vec![])])),
        ],
    );
}

#[test]
fn expire_family_with_nx_xx_gt_lt() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["SET", "ex:a", "1"], ok()),
            (&["TTL", "ex:a"], int(-1)),
            (&["TTL", "ex:none"], int(-2)),
            (&["PTTL", "ex:none"], int(-2)),
            (&["EXPIRE", "ex:none", "100"], int(0)),
            (&["EXPIRE", "ex:a", "100", "XX"], int(0)),
            (&["EXPIRE", "ex:a", "100", "GT"], int(0)),
            (&["EXPIRE", "ex:a", "100", "LT"], int(1)),
            (&["EXPIRE", "ex:a", "200", "NX"], int(0)),
            (&["EXPIRE", "ex:a", "50", "GT"], int(0)),
            (&["EXPIRE", "ex:a", "500", "GT"], int(1)),
            (&["TTL", "ex:a"], int(500)),
            (&["EXPIRE", "ex:a", "5000", "LT"], int(0)),
            (&["PEXPIRE", "ex:a", "50000", "LT"], int(1)),
            (&["TTL", "ex:a"], int(50)),
            (&["EXPIRE", "ex:a", "60", "XX"], int(1)),
            (
                &["EXPIRE", "ex:a", "50", "NX", "XX"],
                err("ERR NX and XX, GT or LT options at the same time are not compatible"),
            ),
            (
                &["EXPIRE", "ex:a", "50", "GT", "LT"],
                err("ERR GT and LT options at the same time are not compatible"),
            ),
            (
                &["EXPIRE", "ex:a", "50", "FOO"],
                err("ERR Unsupported option FOO"),
            ),
            (&["EXPIRE", "ex:a", "x"], err(INVALID_INT)),
            (
                &["EXPIRE", "ex:a", "9223372036854775807"],
                err("ERR invalid expire time in 'expire' command"),
            ),
            (
                &["PEXPIRE", "ex:a", "9223372036854775807"],
                err("ERR invalid expire time in 'pexpire' command"),
            ),
            (
                &["EXPIREAT", "ex:a", "9223372036854775807"],
                err("ERR invalid expire time in 'expireat' command"),
            ),
            (&["PERSIST", "ex:a"], int(1)),
            (&["PERSIST", "ex:a"], int(0)),
            (&["PERSIST", "ex:none"], int(0)),
            (&["TTL", "ex:a"], int(-1)),
            (&["EXPIREAT", "ex:a", "4102444800"], int(1)),
            (&["EXPIRETIME", "ex:a"], int(4102444800)),
            (&["PEXPIRETIME", "ex:a"], int(4102444800000)),
            (&["PEXPIREAT", "ex:a", "4102444800123"], int(1)),
            (&["EXPIRETIME", "ex:a"], int(4102444800)),
            (&["PEXPIRETIME", "ex:a"], int(4102444800123)),
            (&["EXPIRETIME", "ex:none"], int(-2)),
            (&["SET", "ex:b", "1"], ok()),
            (&["EXPIRETIME", "ex:b"], int(-1)),
            (&["PEXPIRETIME", "ex:b"], int(-1)),
            // A time in the past deletes the key at once.
            (&["PEXPIRE", "ex:b", "-1"], int(1)),
            (&["EXISTS", "ex:b"], int(0)),
            (&["SET", "ex:c", "1"], ok()),
            (&["EXPIREAT", "ex:c", "1"], int(1)),
            (&["EXISTS", "ex:c"], int(0)),
        ],
    );
}

#[test]
fn expired_key_is_gone_after_pexpireat() {
    let s = server();
    let mut c = s.client();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _: () = c.set("pxat:k", "v").unwrap();
    let set: bool = redis::cmd("PEXPIREAT")
        .arg("pxat:k")
        .arg(now_ms + 150)
        .query(&mut c)
        .unwrap();
    assert!(set);
    let pttl: i64 = c.pttl("pxat:k").unwrap();
    assert!((0..=150).contains(&pttl), "{pttl}");
    common::wait_for("pxat:k to expire", 5, || {
        let v: Option<String> = c.get("pxat:k").unwrap();
        v.is_none().then_some(())
    });
    let ttl: i64 = c.ttl("pxat:k").unwrap();
    assert_eq!(ttl, -2);
}

// -------------------------------------------------------------- connection

#[test]
fn select_and_swapdb_and_dbsize() {
    let s = server();
    let mut r = raw_db(&s, 8);
    let mut r9 = raw_db(&s, 9);
    check(
        &mut r9,
        &[(&["FLUSHDB"], ok()), (&["SET", "in9", "1"], ok())],
    );
    check(
        &mut r,
        &[
            (&["FLUSHDB"], ok()),
            (&["MSET", "a", "1", "b", "2"], ok()),
            (&["DBSIZE"], int(2)),
            (&["SWAPDB", "8", "9"], ok()),
            (&["DBSIZE"], int(1)),
            (&["GET", "in9"], bulk("1")),
            (&["SWAPDB", "8", "x"], err("ERR invalid second DB index")),
            (&["SWAPDB", "x", "8"], err("ERR invalid first DB index")),
            (&["SWAPDB", "8", "16"], err("ERR DB index is out of range")),
            (&["SELECT", "16"], err("ERR DB index is out of range")),
            (&["SELECT", "-1"], err("ERR DB index is out of range")),
            (&["SELECT", "x"], err(INVALID_INT)),
            (
                &["DBSIZE", "x"],
                err("ERR wrong number of arguments for 'dbsize' command"),
            ),
        ],
    );
    // The other connection sees the swapped data in its own selected db.
    check(&mut r9, &[(&["DBSIZE"], int(2)), (&["FLUSHDB"], ok())]);
    check(
        &mut r,
        &[
            (&["FLUSHDB", "FOO"], err(SYNTAX)),
            (&["FLUSHDB", "ASYNC", "SYNC"], err(SYNTAX)),
            (&["FLUSHDB", "ASYNC"], ok()),
            (&["DBSIZE"], int(0)),
        ],
    );
}

#[test]
fn ping_echo_quit_and_auth_without_password() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (&["PING"], Frame::Simple(b"PONG".to_vec())),
            (&["PING", "hi"], bulk("hi")),
            (&["ECHO", "x"], bulk("x")),
            (&["ECHO"], err("ERR wrong number of arguments for 'echo' command")),
            (
                &["AUTH", "x"],
                err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
            ),
            (&["AUTH", "a", "b"], err("WRONGPASS invalid username-password pair or user is disabled.")),
            (&["AUTH", "a", "b", "c"], err(SYNTAX)),
        ],
    );
    let mut c = s.client();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("QUIT").query(&mut c).unwrap();
}

#[test]
fn client_id_setname_getname_info_list() {
    let s = server();
    let mut r = s.raw();
    let Frame::Integer(id) = r.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    check(
        &mut r,
        &[
            (&["CLIENT", "GETNAME"], nil()),
            (&["CLIENT", "SETNAME", "conn-1"], ok()),
            (&["CLIENT", "GETNAME"], bulk("conn-1")),
            (
                &["CLIENT", "SETNAME", "a b"],
                err("ERR Client names cannot contain spaces, newlines or special characters."),
            ),
            (&["CLIENT", "NO-EVICT", "on"], ok()),
            (&["CLIENT", "NO-EVICT", "maybe"], err(SYNTAX)),
            (
                &["CLIENT", "ID", "x"],
                err("ERR wrong number of arguments for 'client|id' command"),
            ),
            (
                &["CLIENT", "LIST", "TYPE", "foo"],
                err("ERR Unknown client type 'foo'"),
            ),
            (&["CLIENT", "LIST", "ID", "x"], err("ERR Invalid client ID")),
            (&["CLIENT", "LIST", "ID", "0"], bulk("")),
            (&["CLIENT", "LIST", "FOO"], err(SYNTAX)),
            (&["CLIENT", "LIST", "ID"], err(SYNTAX)),
            (
                &["CLIENT", "LIST", "TYPE", "normal", "ID", "1"],
                err(SYNTAX),
            ),
            (&["CLIENT", "LIST", "TYPE", "master"], bulk("")),
        ],
    );
    // CLIENT SETINFO is Redis 7.2's; clients such as redis-py send it.
    let lib = !against_redis();
    if lib {
        check(
            &mut r,
            &[
                (&["CLIENT", "SETINFO", "LIB-NAME", "mylib"], ok()),
                (&["CLIENT", "SETINFO", "LIB-VER", "1.2"], ok()),
                (
                    &["CLIENT", "SETINFO", "LIB-NAME", "a b"],
                    err("ERR lib-name cannot contain spaces, newlines or special characters."),
                ),
            ],
        );
    }
    let text = |f: Frame| String::from_utf8(f.as_bytes().unwrap().to_vec()).unwrap();
    let info = text(r.cmd(&["CLIENT", "INFO"]));
    let addr = r.s.local_addr().unwrap();
    assert!(info.starts_with(&format!("id={id} addr={addr} ")), "{info}");
    assert!(info.ends_with('\n'));
    for field in [" name=conn-1 ", " db=0 ", " cmd=client|info ", " resp=2"] {
        assert!(info.contains(field), "{field} in {info}");
    }
    if lib {
        assert!(info.contains(" lib-name=mylib lib-ver=1.2"), "{info}");
    }
    let list = text(r.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]));
    assert!(list.starts_with(&format!("id={id} ")), "{list}");
    assert!(list.contains(" cmd=client|list "), "{list}");
    assert_eq!(list.lines().count(), 1);
    // The default list has a line per connection, this one included.
    let mut other = s.raw();
    let Frame::Integer(other_id) = other.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let list = text(r.cmd(&["CLIENT", "LIST"]));
    assert!(list.contains(&format!("id={other_id} ")));
    assert!(list.contains(&format!("id={id} ")));
}

#[test]
fn client_kill_by_id_and_addr() {
    let s = server();
    let mut admin = s.raw();
    let mut victim = s.raw();
    let Frame::Integer(vid) = victim.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    check(
        &mut admin,
        &[
            (&["CLIENT", "KILL", "ID", &vid.to_string()], int(1)),
            (&["CLIENT", "KILL", "ID", &vid.to_string()], int(0)),
            (
                &["CLIENT", "KILL", "ID", "x"],
                err("ERR client-id should be greater than 0"),
            ),
            (&["CLIENT", "KILL", "1.2.3.4:5"], err("ERR No such client")),
            (&["CLIENT", "KILL", "ADDR", "1.2.3.4:5"], int(0)),
            (&["CLIENT", "KILL", "FOO", "bar"], err(SYNTAX)),
            (
                &["CLIENT", "KILL", "TYPE", "foo"],
                err("ERR Unknown client type 'foo'"),
            ),
            (
                &["CLIENT", "KILL", "USER", "bob"],
                err("ERR No such user 'bob'"),
            ),
        ],
    );
    assert!(victim.is_closed());
    if common::over_unix() {
        // Every Unix client has the socket's `path:0`: an address names
        // them all (transports.rs checks that form).
        return;
    }
    // By address: the old form and the ADDR filter.
    let mut v2 = s.raw();
    assert_eq!(v2.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    let addr = v2.s.local_addr().unwrap().to_string();
    assert_eq!(admin.cmd(&["CLIENT", "KILL", &addr]), ok());
    assert!(v2.is_closed());
    let mut v3 = s.raw();
    assert_eq!(v3.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    let addr = v3.s.local_addr().unwrap().to_string();
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ADDR", &addr]), int(1));
    assert!(v3.is_closed());
    // SKIPME yes (the default) spares the caller.
    let own = admin.s.local_addr().unwrap().to_string();
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ADDR", &own]), int(0));
    assert_eq!(admin.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "ADDR", &own, "SKIPME", "no"]),
        int(1)
    );
    assert!(admin.is_closed());
}

#[test]
fn client_reply_off_and_skip_silence_replies() {
    let s = server();
    let mut r = s.raw();
    r.send(b"CLIENT REPLY OFF\r\nSET rep:a 1\r\nGET rep:a\r\nCLIENT REPLY ON\r\n");
    r.roundtrip(b"", b"+OK\r\n");
    r.send(b"CLIENT REPLY SKIP\r\nSET rep:a 2\r\nGET rep:a\r\n");
    r.roundtrip(b"", b"$1\r\n2\r\n");
    r.roundtrip(b"CLIENT REPLY maybe\r\n", b"-ERR syntax error\r\n");
    // Rejected commands are silenced too, and SKIP covers whatever comes next.
    r.send(b"CLIENT REPLY OFF\r\nNOSUCH\r\nGET\r\nCLIENT REPLY ON\r\n");
    r.roundtrip(b"", b"+OK\r\n");
    r.send(b"CLIENT REPLY SKIP\r\nNOSUCH\r\nPING\r\n");
    r.roundtrip(b"", b"+PONG\r\n");
    r.send(b"CLIENT REPLY SKIP\r\nGET\r\nPING\r\n");
    r.roundtrip(b"", b"+PONG\r\n");
    // CLIENT REPLY ON cancels a pending SKIP and is answered.
    r.send(b"CLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nPING\r\n");
    r.roundtrip(b"", b"+OK\r\n+PONG\r\n");
    // Even a protocol error goes unanswered. ferrokv then closes the
    // connection; Redis 7.0 leaves it open and ignores all further input.
    r.send(b"CLIENT REPLY OFF\r\n*1\r\nx\r\nPING\r\n");
    if !against_redis() {
        assert_eq!(r.read_to_close(), b"");
    }
}

// ------------------------------------------------------------------ server

#[test]
fn info_sections_use_redis_field_names() {
    let s = server();
    let mut r = s.raw();
    let _ = r.cmd(&["SET", "info:k", "v"]);
    let text = |f: Frame| String::from_utf8(f.as_bytes().unwrap().to_vec()).unwrap();
    let all = text(r.cmd(&["INFO"]));
    for section in ["# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"] {
        assert!(all.contains(&format!("{section}\r\n")), "{section}");
    }
    assert!(!all.contains("# Commandstats"));
    for (section, fields) in [
        (
            "server",
            &[
                "redis_version:7.0.15",
                "redis_mode:standalone",
                "process_id:",
                "tcp_port:",
                "uptime_in_seconds:",
                "run_id:",
            ][..],
        ),
        (
            "clients",
            &[
                "connected_clients:",
                "maxclients:10000",
                "blocked_clients:0",
            ],
        ),
        (
            "memory",
            &[
                "used_memory:",
                "used_memory_human:",
                "used_memory_rss:",
                "used_memory_peak:",
                "mem_fragmentation_ratio:",
            ],
        ),
        (
            "stats",
            &[
                "total_connections_received:",
                "total_commands_processed:",
                "expired_keys:",
                "keyspace_hits:",
                "keyspace_misses:",
            ],
        ),
        ("keyspace", &["db0:keys="]),
    ] {
        let body = text(r.cmd(&["INFO", section]));
        assert!(body.starts_with("# "), "{section}: {body}");
        assert_eq!(body.matches("# ").count(), 1, "only {section}: {body}");
        for f in fields {
            assert!(body.contains(f), "{f} in INFO {section}");
        }
    }
    let stats = text(r.cmd(&["INFO", "commandstats"]));
    assert!(stats.starts_with("# Commandstats\r\n"));
    assert!(stats.contains("cmdstat_set:calls="), "{stats}");
    assert!(stats.contains(",rejected_calls=0,failed_calls=0\r\n"));
    let two = text(r.cmd(&["INFO", "server", "clients"]));
    assert!(two.contains("# Server") && two.contains("# Clients") && !two.contains("# Memory"));
    assert_eq!(r.cmd(&["INFO", "nosuch"]), bulk(""));
}

#[test]
fn command_count_info_docs_list() {
    let s = server();
    let mut r = s.raw();
    let Frame::Integer(n) = r.cmd(&["COMMAND", "COUNT"]) else {
        panic!()
    };
    let Frame::Array(list) = r.cmd(&["COMMAND", "LIST"]) else {
        panic!()
    };
    // COMMAND LIST names subcommands too (`config|get`); COUNT does not.
    let tops = list
        .iter()
        .filter(|f| !f.as_bytes().unwrap().contains(&b'|'))
        .count();
    assert_eq!(tops as i64, n);
    assert!(list.contains(&bulk("config|get")));
    for name in ["get", "set", "client", "config", "lcs", "getex"] {
        assert!(list.contains(&bulk(name)), "{name}");
    }
    let Frame::Array(all) = r.cmd(&["COMMAND"]) else {
        panic!()
    };
    assert_eq!(all.len() as i64, n);
    let Frame::Array(info) = r.cmd(&["COMMAND", "INFO", "get", "nosuch"]) else {
        panic!()
    };
    assert_eq!(info.len(), 2);
    assert_eq!(info[1], nil());
    let Frame::Array(get) = &info[0] else {
        panic!()
    };
    assert_eq!(
        &get[..6],
        &[
            bulk("get"),
            int(2),
            arr(vec![
                Frame::Simple(b"readonly".to_vec()),
                Frame::Simple(b"fast".to_vec())
            ]),
            int(1),
            int(1),
            int(1),
        ]
    );
    let Frame::Array(docs) = r.cmd(&["COMMAND", "DOCS", "get"]) else {
        panic!()
    };
    assert_eq!(docs[0], bulk("get"));
    let Frame::Array(fields) = &docs[1] else {
        panic!()
    };
    assert!(fields.contains(&bulk("summary")) && fields.contains(&bulk("arguments")));
    let Frame::Array(getfam) = r.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "getd*"]) else {
        panic!()
    };
    assert_eq!(getfam, vec![bulk("getdel")]);
    let Frame::Array(mut cfg) = r.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "config|[gs]*"])
    else {
        panic!()
    };
    cfg.sort_by(|a, b| a.as_bytes().cmp(&b.as_bytes()));
    assert_eq!(cfg, vec![bulk("config|get"), bulk("config|set")]);
    check(
        &mut r,
        &[
            (&["COMMAND", "LIST", "FOO"], err(SYNTAX)),
            (
                &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
                arr(vec![bulk("a"), bulk("b")]),
            ),
            (
                &["COMMAND", "GETKEYS", "object", "encoding", "k"],
                arr(vec![bulk("k")]),
            ),
            (
                &["COMMAND", "GETKEYS", "get"],
                err("ERR wrong number of arguments for 'command|getkeys' command"),
            ),
            (
                &["COMMAND", "GETKEYS", "nosuch", "a"],
                err("ERR Invalid command specified"),
            ),
            (
                &["COMMAND", "GETKEYS", "get", "a", "b"],
                err("ERR Invalid number of arguments specified for command"),
            ),
            (
                &["COMMAND", "COUNT", "x"],
                err("ERR wrong number of arguments for 'command|count' command"),
            ),
            // Keys that move with a numkeys argument.
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "zunionstore",
                    "d",
                    "2",
                    "a",
                    "b",
                    "WEIGHTS",
                    "1",
                    "2",
                ],
                arr(vec![bulk("d"), bulk("a"), bulk("b")]),
            ),
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "zintercard",
                    "2",
                    "a",
                    "b",
                    "LIMIT",
                    "1",
                ],
                arr(vec![bulk("a"), bulk("b")]),
            ),
            (
                &[
                    "COMMAND", "GETKEYS", "eval", "return 1", "2", "k1", "k2", "a1",
                ],
                arr(vec![bulk("k1"), bulk("k2")]),
            ),
            (
                &["COMMAND", "GETKEYS", "eval", "return 1", "0"],
                arr(vec![]),
            ),
            (
                &["COMMAND", "GETKEYS", "eval", "return 1", "x"],
                arr(vec![]),
            ),
            (
                &["COMMAND", "GETKEYS", "blmpop", "0", "2", "a", "b", "LEFT"],
                arr(vec![bulk("a"), bulk("b")]),
            ),
            (
                &["COMMAND", "GETKEYS", "zunion", "3", "a", "b"],
                err("ERR Invalid arguments specified for command"),
            ),
            (
                &["COMMAND", "GETKEYS", "zunion", "-1", "a"],
                err("ERR Invalid arguments specified for command"),
            ),
            (
                &["COMMAND", "GETKEYS", "bitop", "and", "d", "a", "b"],
                arr(vec![bulk("d"), bulk("a"), bulk("b")]),
            ),
        ],
    );
}

#[test]
fn config_get_set_and_redis_error_texts() {
    let s = server();
    let mut r = s.raw();
    let cset = |p: &str| format!("ERR CONFIG SET failed (possibly related to argument '{p}') - ");
    check(
        &mut r,
        &[
            (&["CONFIG", "GET", "maxclients"], arr(vec![bulk("maxclients"), bulk("10000")])),
            (&["CONFIG", "GET", "nosuch"], arr(vec![])),
            (&["CONFIG", "GET", "maxclient?"], arr(vec![bulk("maxclients"), bulk("10000")])),
            (&["CONFIG", "SET", "timeout", "0", "maxclients", "10000"], ok()),
            (&["CONFIG", "SET", "nosuch", "1"], err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")),
            (&["CONFIG", "SET", "timeout"], err("ERR wrong number of arguments for 'config|set' command")),
            (&["CONFIG", "SET", "timeout", "1", "timeout", "2"], err(&(cset("timeout") + "duplicate parameter"))),
            // Errors quote the name as given, except value errors (canonical).
            (&["CONFIG", "SET", "timeout", "1", "TIMEOUT", "2"], err(&(cset("TIMEOUT") + "duplicate parameter"))),
            (&["CONFIG", "SET", "NOSUCH", "1"], err("ERR Unknown option or number of arguments for CONFIG SET - 'NOSUCH'")),
            (&["CONFIG", "SET", "TIMEOUT", "x"], err(&(cset("timeout") + "argument couldn't be parsed into an integer"))),
            (&["CONFIG", "SET", "timeout", "x"], err(&(cset("timeout") + "argument couldn't be parsed into an integer"))),
            (&["CONFIG", "SET", "timeout", "-1"], err(&(cset("timeout") + "argument must be between 0 and 2147483647 inclusive"))),
            (&["CONFIG", "SET", "maxclients", "0"], err(&(cset("maxclients") + "argument must be between 1 and 4294967295 inclusive"))),
            (&["CONFIG", "SET", "protected-mode", "maybe"], err(&(cset("protected-mode") + "argument must be 'yes' or 'no'"))),
            (&["CONFIG", "SET", "loglevel", "foo"], err(&(cset("loglevel") + "argument(s) must be one of the following: debug, verbose, notice, warning"))),
            (&["CONFIG", "SET", "proto-max-bulk-len", "1000"], err(&(cset("proto-max-bulk-len") + "argument must be between 1048576 and 9223372036854775807 inclusive"))),
            (&["CONFIG", "SET", "proto-max-bulk-len", "x"], err(&(cset("proto-max-bulk-len") + "argument must be a memory value"))),
            (&["CONFIG", "SET", "client-output-buffer-limit", "normal 1mb"], err(&(cset("client-output-buffer-limit") + "Wrong number of arguments in buffer limit configuration."))),
            (&["CONFIG", "SET", "client-output-buffer-limit", "foo 1 1 1"], err(&(cset("client-output-buffer-limit") + "Invalid client class specified in buffer limit configuration."))),
            (&["CONFIG", "SET", "client-output-buffer-limit", "normal x 1 1"], err(&(cset("client-output-buffer-limit") + "Error in hard, soft or soft_seconds setting in buffer limit configuration."))),
            // A failed multi-parameter SET changes nothing.
            (&["CONFIG", "SET", "maxclients", "9000", "timeout", "x"], err(&(cset("timeout") + "argument couldn't be parsed into an integer"))),
            (&["CONFIG", "GET", "maxclients"], arr(vec![bulk("maxclients"), bulk("10000")])),
            // hz is clamped to 1..500, as Redis does.
            (&["CONFIG", "SET", "hz", "1000"], ok()),
            (&["CONFIG", "GET", "hz"], arr(vec![bulk("hz"), bulk("500")])),
            (&["CONFIG", "SET", "hz", "10"], ok()),
            (&["CONFIG", "REWRITE"], err("ERR The server is running without a config file")),
            (&["CONFIG", "RESETSTAT", "x"], err("ERR wrong number of arguments for 'config|resetstat' command")),
            (&["CONFIG", "FOO"], err("ERR unknown subcommand 'FOO'. Try CONFIG HELP.")),
        ],
    );
    // Both rebind at run time; an address that is not this host's fails
    // to bind (nothing is sent to it) and changes nothing.
    check(
        &mut r,
        &[(
            &["CONFIG", "SET", "bind", "10.255.255.1"],
            err(&(cset("bind") + "Failed to bind to specified addresses.")),
        )],
    );
}

/// Guards against the `CONFIG SET dir` + `CONFIG SET dbfilename` + `SAVE`
/// attack (a file of the attacker's choosing written anywhere): Redis 7.0
/// refuses the protected configs, MODULE LOAD/UNLOAD and DEBUG unless the
/// `enable-*` options allow them, and those options are immutable.
#[test]
fn protected_configs_and_commands_are_refused_by_default() {
    let s = if against_redis() {
        ServerProcess::redis(&["--enable-debug-command", "no"])
    } else {
        ServerProcess::ferrokv(&[])
    };
    let mut r = s.raw();
    let cset = |p: &str| format!("ERR CONFIG SET failed (possibly related to argument '{p}') - ");
    let module_refused = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
    #[rustfmt::skip]
    check(
        &mut r,
        &[
            (&["CONFIG", "SET", "dir", "/tmp"], err(&(cset("dir") + "can't set protected config"))),
            (&["CONFIG", "SET", "DIR", "/tmp"], err(&(cset("DIR") + "can't set protected config"))),
            (&["CONFIG", "SET", "dbfilename", "x.rdb"], err(&(cset("dbfilename") + "can't set protected config"))),
            // All or nothing: the allowed pair before it is not applied.
            (&["CONFIG", "SET", "timeout", "7", "dir", "/tmp"], err(&(cset("dir") + "can't set protected config"))),
            (&["CONFIG", "GET", "timeout"], arr(vec![bulk("timeout"), bulk("0")])),
            (&["CONFIG", "GET", "enable-protected-configs"], arr(vec![bulk("enable-protected-configs"), bulk("no")])),
            (&["CONFIG", "GET", "enable-debug-command"], arr(vec![bulk("enable-debug-command"), bulk("no")])),
            (&["CONFIG", "GET", "enable-module-command"], arr(vec![bulk("enable-module-command"), bulk("no")])),
            (&["CONFIG", "SET", "enable-protected-configs", "yes"], err(&(cset("enable-protected-configs") + "can't set immutable config"))),
            (&["CONFIG", "SET", "enable-debug-command", "yes"], err(&(cset("enable-debug-command") + "can't set immutable config"))),
            (&["CONFIG", "SET", "enable-module-command", "yes"], err(&(cset("enable-module-command") + "can't set immutable config"))),
            (&["DEBUG", "DIGEST"], err("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")),
            (&["MODULE", "LOAD", "/tmp/x.so"], err(module_refused)),
            (&["MODULE", "LOADEX", "/tmp/x.so"], err(module_refused)),
            (&["MODULE", "UNLOAD", "x"], err(module_refused)),
            (&["MODULE", "LIST"], arr(vec![])),
            (&["MODULE"], err("ERR wrong number of arguments for 'module' command")),
            (&["MODULE", "FOO"], err("ERR unknown subcommand 'FOO'. Try MODULE HELP.")),
            (&["MODULE", "LOAD"], err("ERR wrong number of arguments for 'module|load' command")),
            // Refused in dispatch, so never queued: the transaction aborts.
            (&["MULTI"], ok()),
            (&["MODULE", "LOAD", "/tmp/x.so"], err(module_refused)),
            (&["EXEC"], err("EXECABORT Transaction discarded because of previous errors.")),
        ],
    );
    let Frame::Array(help) = r.cmd(&["MODULE", "HELP"]) else {
        panic!("MODULE HELP is an array")
    };
    assert_eq!(help.len(), 11);
}

/// `local`: the protected actions are allowed from a local connection
/// (these tests connect from 127.0.0.1).
#[test]
fn protected_configs_allowed_locally_in_local_mode() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = dir.path().to_str().unwrap();
    let args = [
        "--enable-protected-configs",
        "local",
        "--enable-module-command",
        "local",
    ];
    let s = if against_redis() {
        ServerProcess::redis(&args)
    } else {
        ServerProcess::ferrokv(&args)
    };
    let mut r = s.raw();
    #[rustfmt::skip]
    check(
        &mut r,
        &[
            (&["CONFIG", "SET", "dir", dirs, "dbfilename", "elsewhere.rdb"], ok()),
            (&["CONFIG", "GET", "dbfilename"], arr(vec![bulk("dbfilename"), bulk("elsewhere.rdb")])),
            (&["SET", "k", "v"], ok()),
            (&["SAVE"], ok()),
            (&["MODULE", "LOAD", "/nonexistent/x.so"], err("ERR Error loading the extension. Please check the server logs.")),
            (&["MODULE", "UNLOAD", "x"], err("ERR Error unloading module: no such module with that name")),
        ],
    );
    assert!(dir.path().join("elsewhere.rdb").exists());
}

/// `maxmemory-clients`: bytes or a percentage of maxmemory, with Redis's
/// error texts.
#[test]
fn maxmemory_clients_parses_bytes_and_percentages() {
    let s = server();
    let mut r = s.raw();
    let cset = |p: &str| format!("ERR CONFIG SET failed (possibly related to argument '{p}') - ");
    #[rustfmt::skip]
    check(
        &mut r,
        &[
            (&["CONFIG", "GET", "maxmemory-clients"], arr(vec![bulk("maxmemory-clients"), bulk("0")])),
            (&["CONFIG", "SET", "maxmemory-clients", "10%"], ok()),
            (&["CONFIG", "GET", "maxmemory-clients"], arr(vec![bulk("maxmemory-clients"), bulk("10%")])),
            (&["CONFIG", "SET", "maxmemory-clients", "1gb"], ok()),
            (&["CONFIG", "GET", "maxmemory-clients"], arr(vec![bulk("maxmemory-clients"), bulk("1073741824")])),
            (&["CONFIG", "SET", "maxmemory-clients", "101%"], err(&(cset("maxmemory-clients") + "percentage argument must be less or equal to 100"))),
            (&["CONFIG", "SET", "maxmemory-clients", "abc"], err(&(cset("maxmemory-clients") + "argument must be a memory or percent value"))),
            (&["CONFIG", "SET", "maxmemory-clients", "-1"], err(&(cset("maxmemory-clients") + "argument must be a memory or percent value"))),
            (&["CONFIG", "SET", "maxmemory-clients", "1.5%"], err(&(cset("maxmemory-clients") + "argument must be a memory or percent value"))),
            (&["CONFIG", "SET", "maxmemory-clients", "0"], ok()),
        ],
    );
}

#[test]
fn time_lastsave_debug() {
    let s = server();
    let mut r = s.raw();
    let Frame::Array(t) = r.cmd(&["TIME"]) else {
        panic!()
    };
    let secs: u64 = std::str::from_utf8(t[0].as_bytes().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    let micros: u64 = std::str::from_utf8(t[1].as_bytes().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2 && micros < 1_000_000);
    let Frame::Integer(last) = r.cmd(&["LASTSAVE"]) else {
        panic!()
    };
    assert!(last as u64 <= now + 1);
    check(
        &mut r,
        &[
            (&["DEBUG", "SLEEP", "0"], ok()),
            (&["DEBUG", "SLEEP", "0.01"], ok()),
            (&["SET", "dbg:k", "hello"], ok()),
            (
                &["DEBUG", "DIGEST-VALUE", "dbg:none"],
                arr(vec![Frame::Simple(
                    b"0000000000000000000000000000000000000000".to_vec(),
                )]),
            ),
            (&["DEBUG", "OBJECT", "dbg:none"], err("ERR no such key")),
            (&["SHUTDOWN", "ABORT"], err("ERR No shutdown in progress.")),
            (&["SHUTDOWN", "FOO"], err(SYNTAX)),
            (&["SHUTDOWN", "SAVE", "NOSAVE"], err(SYNTAX)),
            (&["SHUTDOWN", "NOSAVE", "ABORT"], err(SYNTAX)),
        ],
    );
    let Frame::Simple(obj) = r.cmd(&["DEBUG", "OBJECT", "dbg:k"]) else {
        panic!()
    };
    let obj = String::from_utf8(obj).unwrap();
    assert!(
        obj.starts_with("Value at:0x")
            && obj.contains(" refcount:1 encoding:embstr serializedlength:6 lru:"),
        "{obj}"
    );
    let Frame::Array(d) = r.cmd(&["DEBUG", "DIGEST-VALUE", "dbg:k"]) else {
        panic!()
    };
    let Frame::Simple(hex) = &d[0] else { panic!() };
    assert_eq!(hex.len(), 40);
    assert_ne!(hex, &vec![b'0'; 40]);
    let Frame::Simple(digest) = r.cmd(&["DEBUG", "DIGEST"]) else {
        panic!()
    };
    assert_eq!(digest.len(), 40);
}

#[test]
fn debug_digest_is_zero_for_an_empty_server_and_matches_redis() {
    // A fresh server of each kind with the same writes gives the same digest.
    let mut digests = Vec::new();
    for s in [
        ServerProcess::ferrokv(&["--enable-debug-command", "yes"]),
        ServerProcess::redis(&[]),
    ] {
        let mut r = s.raw();
        assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), Frame::Simple(vec![b'0'; 40]));
        check(
            &mut r,
            &[
                (&["SET", "a", "1"], ok()),
                (&["SET", "b", "hello"], ok()),
                (&["SELECT", "3"], ok()),
                (&["SET", "c", &"x".repeat(100)], ok()),
                (&["PEXPIREAT", "c", "4102444800000"], int(1)),
            ],
        );
        digests.push((
            r.cmd(&["DEBUG", "DIGEST"]),
            r.cmd(&["DEBUG", "DIGEST-VALUE", "c", "a"]),
        ));
    }
    assert_eq!(digests[0], digests[1]);
}

#[test]
fn readonly_and_readwrite_answer_cluster_support_disabled() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (
                &["READONLY"],
                err("ERR This instance has cluster support disabled"),
            ),
            (
                &["readwrite"],
                err("ERR This instance has cluster support disabled"),
            ),
            (
                &["READONLY", "x"],
                err("ERR wrong number of arguments for 'readonly' command"),
            ),
        ],
    );
}

#[test]
fn lolwut_answers_each_version_as_redis_7_0() {
    let s = server();
    let mut r = s.raw();
    let line = "Redis ver. 7.0.15\n";
    check(
        &mut r,
        &[
            (&["LOLWUT"], bulk(line)),
            (&["LOLWUT", "VERSION", "0"], bulk(line)),
            (&["LOLWUT", "VERSION", "-1"], bulk(line)),
            (&["LOLWUT", "VERSION", "7"], bulk(line)),
            (&["LOLWUT", "1", "2"], bulk(line)),
            (&["LOLWUT", "VERSION"], bulk(line)),
            (
                &["LOLWUT", "VERSION", "x"],
                err("ERR value is not an integer or out of range"),
            ),
            (
                &["LOLWUT", "VERSION", "5", "x"],
                err("ERR value is not an integer or out of range"),
            ),
            // Version 5 with one row of squares draws without randomness.
            (
                &["LOLWUT", "VERSION", "5", "1", "1", "1"],
                bulk("\u{280b}\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"),
            ),
            // (unsigned) 4294967301 is 5.
            (
                &["LOLWUT", "VERSION", "4294967301", "1", "1", "1"],
                bulk("\u{280b}\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"),
            ),
        ],
    );
    // Version 6 one row high: the white sky only, byte for byte.
    let w = "\x1b[0;97;107m \x1b[0m";
    assert_eq!(
        r.cmd(&["LOLWUT", "VERSION", "6", "3", "1"]),
        bulk(&format!("{w}{w}{w}\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15\n"))
    );
    assert_eq!(
        r.cmd(&["LOLWUT", "VERSION", "6", "x"]),
        err("ERR value is not an integer or out of range")
    );
    // The default skyline: 80 x 20 pixels, one escape-wrapped space each.
    let city = match r.cmd(&["LOLWUT", "VERSION", "6"]) {
        Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        f => panic!("{f:?}"),
    };
    let rows: Vec<&str> = city.lines().collect();
    assert_eq!(rows.len(), 22, "{city}");
    assert!(rows[..20]
        .iter()
        .all(|l| l.matches(" \x1b[0m").count() == 80));
    assert_eq!(rows[0], w.repeat(80), "the sky's top row is empty");
    // The drawing of two rows of squares, byte for byte.
    let two_rows = match r.cmd(&["LOLWUT", "VERSION", "5", "7", "2", "2"]) {
        Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        f => panic!("{f:?}"),
    };
    assert_eq!(
        two_rows,
        "⢰⠒⠒⣶⠒⠒⡆\n⢸⣤⣤⣿⣤⣤⡇\n⢸⠀⠀⣿⠀⠀⡇\n⠈⠉⠉⠉⠉⠉⠁\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"
    );
    // The default drawing: 12 rows of squares, random below the second.
    let art = match r.cmd(&["LOLWUT", "VERSION", "5"]) {
        Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        f => panic!("{f:?}"),
    };
    assert_eq!(art.lines().count(), 51, "{art}");
    assert!(art
        .lines()
        .all(|l| l.is_empty() || l.starts_with("Georg") || l.chars().count() == 66));
}

/// Redis's "CONFIG sanity": every config `CONFIG GET *` returns takes its
/// own value back with `CONFIG SET` and reads the same afterwards (the
/// configs Redis's own test skips as immutable or special are skipped
/// here too); hidden configs answer only to their exact name. Runs against
/// redis-server too (`FERROKV_TESTS_TARGET=redis`).
#[test]
fn config_sanity_every_config_takes_its_own_value_back() {
    let s = common::reply::own_server(&[]);
    let mut c = s.client();
    let skip = [
        "rdbchecksum",
        "daemonize",
        "io-threads-do-reads",
        "tcp-backlog",
        "always-show-logo",
        "syslog-enabled",
        "cluster-enabled",
        "disable-thp",
        "aclfile",
        "unixsocket",
        "pidfile",
        "syslog-ident",
        "appendfilename",
        "appenddirname",
        "supervised",
        "syslog-facility",
        "databases",
        "io-threads",
        "logfile",
        "unixsocketperm",
        "replicaof",
        "slaveof",
        "requirepass",
        "server_cpulist",
        "bio_cpulist",
        "aof_rewrite_cpulist",
        "bgsave_cpulist",
        "set-proc-title",
        "cluster-config-file",
        "cluster-port",
        "oom-score-adj",
        "oom-score-adj-values",
        "enable-protected-configs",
        "enable-debug-command",
        "enable-module-command",
        "dbfilename",
        "dir",
        "socket-mark-id",
    ];
    let all: Vec<(String, String)> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut c)
        .unwrap();
    assert!(all.len() > 150, "{}", all.len());
    for (k, v) in &all {
        if skip.contains(&k.as_str()) {
            continue;
        }
        let r: redis::RedisResult<()> = redis::cmd("CONFIG").arg("SET").arg(k).arg(v).query(&mut c);
        assert!(r.is_ok(), "CONFIG SET {k} {v:?}: {r:?}");
        let back: Vec<(String, String)> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(k)
            .query(&mut c)
            .unwrap();
        assert_eq!(back, vec![(k.clone(), v.clone())], "{k}");
    }
    // Hidden configs: by exact name only.
    assert!(all.iter().all(|(k, _)| k != "key-load-delay"));
    let exact: Vec<(String, String)> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("key-load-delay")
        .query(&mut c)
        .unwrap();
    assert_eq!(exact, vec![("key-load-delay".to_string(), "0".to_string())]);
}

/// `DEBUG POPULATE count [prefix] [size]`, the helper Redis's own tests
/// and benchmarks fill a server with: the same keys and values as
/// redis-server's (equal `DEBUG DIGEST`), existing keys left alone, values
/// cut or zero-padded to the size, its errors, and no change counted (it
/// is not a write: nothing reaches the AOF or replicas).
#[test]
fn debug_populate_fills_as_redis_does() {
    let ours = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let redis = ServerProcess::redis(&[]);
    let script: &[&[&str]] = &[
        &["SET", "key:5", "mine"],
        &["DEBUG", "POPULATE", "1000"],
        &["DEBUG", "POPULATE", "10", "p", "20"],
        &["DEBUG", "POPULATE", "10", "q", "3"],
        &["DEBUG", "POPULATE", "0"],
        &["DEBUG", "POPULATE", "-1"],
        &["DEBUG", "POPULATE", "x"],
        &["DEBUG", "POPULATE", "3", "r", "-2"],
        &["DEBUG", "POPULATE", "1", "a", "1", "extra"],
        &["GET", "key:5"],
        &["GET", "p:7"],
        &["GET", "q:7"],
        &["STRLEN", "p:3"],
        &["DBSIZE"],
        &["DEBUG", "DIGEST"],
    ];
    let (mut o, mut r) = (ours.raw(), redis.raw());
    for cmd in script {
        assert_eq!(o.cmd(cmd), r.cmd(cmd), "{cmd:?}");
    }
    for s in [&ours, &redis] {
        assert_eq!(
            s.info_field("persistence", "rdb_changes_since_last_save")
                .as_deref(),
            Some("1"),
            "{}: only the SET counts",
            s.name
        );
    }
}
