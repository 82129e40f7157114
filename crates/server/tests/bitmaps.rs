//! Guards the bitmap family against Redis 7.0: SETBIT GETBIT BITCOUNT BITPOS
//! BITOP BITFIELD BITFIELD_RO with exact replies and error texts — bit and
//! byte ranges, Redis 7.0's "key first, then arguments" order of BITCOUNT
//! and BITPOS, the 512 MB offset limit, every BITFIELD overflow mode and
//! `#` offsets; bit writes on integers and inline strings (the value turns
//! `raw`, its TTL stays), BITOP's store rules (TTL dropped, an empty result
//! deletes), and bitmaps surviving SAVE + restart, DEBUG RELOAD and a load
//! into the real redis-server with equal digests.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the protocol assertions against
//! the real `redis-server`.
mod common;
use common::node::{digest, Node};
#[allow(unused_imports)]
use common::reply::*;
use common::ServerProcess;
use ferrokv_resp::Frame;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

#[test]
fn setbit_and_getbit_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "bm:a", "bm:n", "bm:l", "bm:s"]);
    r.cmd(&["RPUSH", "bm:l", "x"]);
    check(
        &mut r,
        &[
            (&["SETBIT", "bm:a", "7", "1"], int(0)),
            (&["SETBIT", "bm:a", "7", "1"], int(1)),
            (&["SETBIT", "bm:a", "7", "0"], int(1)),
            (&["SETBIT", "bm:a", "100", "1"], int(0)),
            (&["STRLEN", "bm:a"], int(13)),
            (&["GETBIT", "bm:a", "100"], int(1)),
            (&["GETBIT", "bm:a", "101"], int(0)),
            (&["GETBIT", "bm:a", "4294967295"], int(0)),
            (&["GETBIT", "bm:missing", "0"], int(0)),
            (&["OBJECT", "ENCODING", "bm:a"], bulk("raw")),
            // Offsets: negative, past 512 MB, not a number.
            (&["SETBIT", "bm:a", "-1", "1"], err(BAD_OFFSET)),
            (&["SETBIT", "bm:a", "4294967296", "1"], err(BAD_OFFSET)),
            (&["SETBIT", "bm:a", "1x", "1"], err(BAD_OFFSET)),
            (&["GETBIT", "bm:a", "4294967296"], err(BAD_OFFSET)),
            (&["GETBIT", "bm:a", "-1"], err(BAD_OFFSET)),
            // Bits: only 0 and 1.
            (&["SETBIT", "bm:a", "1", "2"], err(BAD_BIT)),
            (&["SETBIT", "bm:a", "1", "-1"], err(BAD_BIT)),
            (&["SETBIT", "bm:a", "1", "x"], err(BAD_BIT)),
            // The offset is checked before the type, the type before the write.
            (&["SETBIT", "bm:l", "-1", "1"], err(BAD_OFFSET)),
            (&["SETBIT", "bm:l", "0", "1"], err(WRONGTYPE)),
            (&["GETBIT", "bm:l", "0"], err(WRONGTYPE)),
            (&["LLEN", "bm:l"], int(1)),
        ],
    );
    // An integer reads as its decimal text; a bit write makes it raw.
    r.cmd(&["SET", "bm:n", "12345"]);
    check(
        &mut r,
        &[
            (&["OBJECT", "ENCODING", "bm:n"], bulk("int")),
            (&["GETBIT", "bm:n", "2"], int(1)),
            (&["GETBIT", "bm:n", "3"], int(1)),
            (&["GETBIT", "bm:n", "4"], int(0)),
            (&["SETBIT", "bm:n", "0", "1"], int(0)),
            (&["GET", "bm:n"], Frame::Bulk(b"\xb12345".to_vec())),
            (&["OBJECT", "ENCODING", "bm:n"], bulk("raw")),
        ],
    );
    // A short string keeps its TTL through bit writes.
    r.cmd(&["SET", "bm:s", "ab", "EX", "1000"]);
    assert_eq!(r.cmd(&["SETBIT", "bm:s", "20", "1"]), int(0));
    let Frame::Integer(ttl) = r.cmd(&["TTL", "bm:s"]) else {
        panic!("TTL")
    };
    assert!(ttl > 900, "{ttl}");
    assert_eq!(r.cmd(&["GET", "bm:s"]), Frame::Bulk(b"ab\x08".to_vec()));
}

#[test]
fn bitcount_and_bitpos_ranges_in_bytes_and_bits() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "bm:c", "bm:p", "bm:ones", "bm:lc"]);
    r.cmd(&["SET", "bm:c", "foobar"]);
    r.cmd(&["RPUSH", "bm:lc", "x"]);
    check(
        &mut r,
        &[
            (&["BITCOUNT", "bm:c"], int(26)),
            (&["BITCOUNT", "bm:c", "0", "0"], int(4)),
            (&["BITCOUNT", "bm:c", "1", "1"], int(6)),
            (&["BITCOUNT", "bm:c", "1", "1", "BYTE"], int(6)),
            (&["BITCOUNT", "bm:c", "1", "1", "bit"], int(1)),
            (&["BITCOUNT", "bm:c", "5", "30", "BIT"], int(17)),
            (&["BITCOUNT", "bm:c", "-1", "-2"], int(0)),
            (&["BITCOUNT", "bm:c", "-100", "100"], int(26)),
            (&["BITCOUNT", "bm:c", "0"], err("ERR syntax error")),
            (
                &["BITCOUNT", "bm:c", "0", "1", "BITS"],
                err("ERR syntax error"),
            ),
            (&["BITCOUNT", "bm:c", "a", "1"], err(NOT_INT)),
            // Redis 7.0 looks the key up first: a missing key is 0 whatever
            // follows; a wrong type is WRONGTYPE before a syntax error.
            (&["BITCOUNT", "bm:missing", "0", "1", "BITS"], int(0)),
            (&["BITCOUNT", "bm:missing"], int(0)),
            (&["BITCOUNT", "bm:lc", "0"], err(WRONGTYPE)),
        ],
    );
    r.cmd(&[b"SET".as_slice(), b"bm:p", b"\x00\xff\xf0"]);
    r.cmd(&[b"SET".as_slice(), b"bm:ones", b"\xff\xff"]);
    check(
        &mut r,
        &[
            (&["BITPOS", "bm:p", "1"], int(8)),
            (&["BITPOS", "bm:p", "0"], int(0)),
            (&["BITPOS", "bm:p", "1", "2"], int(16)),
            (&["BITPOS", "bm:p", "1", "2", "-1"], int(16)),
            (&["BITPOS", "bm:p", "1", "7", "15", "BIT"], int(8)),
            (&["BITPOS", "bm:p", "0", "8", "15", "BIT"], int(-1)),
            (&["BITPOS", "bm:p", "0", "1", "1"], int(-1)),
            (&["BITPOS", "bm:p", "0", "20", "-1", "bit"], int(20)),
            // All ones: the 0 after the end counts unless an end is given.
            (&["BITPOS", "bm:ones", "0"], int(16)),
            (&["BITPOS", "bm:ones", "0", "1"], int(16)),
            (&["BITPOS", "bm:ones", "0", "0", "-1"], int(-1)),
            (&["BITPOS", "bm:missing", "0"], int(0)),
            (&["BITPOS", "bm:missing", "1"], int(-1)),
            (&["BITPOS", "bm:missing", "1", "0", "1", "BITS"], int(-1)),
            (
                &["BITPOS", "bm:p", "2"],
                err("ERR The bit argument must be 1 or 0."),
            ),
            (&["BITPOS", "bm:p", "x"], err(NOT_INT)),
            (
                &["BITPOS", "bm:p", "1", "0", "1", "BITS"],
                err("ERR syntax error"),
            ),
            (&["BITPOS", "bm:p", "1", "x"], err(NOT_INT)),
            (&["BITPOS", "bm:lc", "1"], err(WRONGTYPE)),
        ],
    );
}

#[test]
fn bitop_stores_replaces_and_deletes_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "{bo}a", "{bo}b", "{bo}d", "{bo}l", "{bo}n"]);
    r.cmd(&["SET", "{bo}a", "foobar"]);
    r.cmd(&["SET", "{bo}b", "abc"]);
    r.cmd(&["SET", "{bo}n", "7"]);
    r.cmd(&["RPUSH", "{bo}l", "x"]);
    check(
        &mut r,
        &[
            (&["BITOP", "AND", "{bo}d", "{bo}a", "{bo}b"], int(6)),
            (&["GET", "{bo}d"], Frame::Bulk(b"`bc\x00\x00\x00".to_vec())),
            (&["BITOP", "or", "{bo}d", "{bo}a", "{bo}b"], int(6)),
            (&["GET", "{bo}d"], bulk("goobar")),
            (
                &["BITOP", "XOR", "{bo}d", "{bo}a", "{bo}b", "{bo}n"],
                int(6),
            ),
            (&["GET", "{bo}d"], Frame::Bulk(b"0\r\x0cbar".to_vec())),
            (&["BITOP", "NOT", "{bo}d", "{bo}b"], int(3)),
            (&["GET", "{bo}d"], Frame::Bulk(b"\x9e\x9d\x9c".to_vec())),
            (&["OBJECT", "ENCODING", "{bo}d"], bulk("raw")),
            (
                &["BITOP", "NOT", "{bo}d", "{bo}a", "{bo}b"],
                err("ERR BITOP NOT must be called with a single source key."),
            ),
            (
                &["BITOP", "NAND", "{bo}d", "{bo}a"],
                err("ERR syntax error"),
            ),
            (&["BITOP", "AND", "{bo}d", "{bo}a", "{bo}l"], err(WRONGTYPE)),
            // Missing sources read as empty; an empty result deletes.
            (&["BITOP", "AND", "{bo}d", "{bo}a", "{bo}missing"], int(6)),
            (&["GET", "{bo}d"], Frame::Bulk(vec![0; 6])),
            (&["BITOP", "OR", "{bo}d", "{bo}missing"], int(0)),
            (&["EXISTS", "{bo}d"], int(0)),
        ],
    );
    // The destination's TTL goes with its old value.
    r.cmd(&["SET", "{bo}d", "x", "EX", "1000"]);
    assert_eq!(r.cmd(&["BITOP", "OR", "{bo}d", "{bo}b"]), int(3));
    assert_eq!(r.cmd(&["TTL", "{bo}d"]), int(-1));
}

#[test]
fn bitfield_overflow_modes_offsets_and_errors() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "bm:f", "bm:lf"]);
    r.cmd(&["RPUSH", "bm:lf", "x"]);
    let nil = Frame::Null;
    check(
        &mut r,
        &[
            (
                &[
                    "BITFIELD", "bm:f", "SET", "u8", "0", "255", "GET", "u8", "0", "INCRBY", "u8",
                    "0", "10", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "300", "OVERFLOW", "FAIL",
                    "INCRBY", "u8", "0", "1",
                ],
                arr(vec![int(0), int(255), int(9), int(255), nil.clone()]),
            ),
            (
                &[
                    "BITFIELD", "bm:f", "SET", "i5", "#3", "-3", "GET", "i5", "#3", "GET", "u5",
                    "#3", "INCRBY", "i5", "#3", "-20", "OVERFLOW", "SAT", "INCRBY", "i5", "#3",
                    "-100",
                ],
                arr(vec![int(0), int(-3), int(29), int(9), int(-16)]),
            ),
            (
                &[
                    "BITFIELD", "bm:f", "GET", "i64", "0", "GET", "u63", "1", "GET", "u1", "7",
                ],
                arr(vec![
                    int(-71_776_119_061_217_280),
                    int(9_151_595_917_793_558_528),
                    int(1),
                ]),
            ),
            (
                &[
                    "BITFIELD",
                    "bm:f",
                    "OVERFLOW",
                    "WRAP",
                    "INCRBY",
                    "i64",
                    "64",
                    "9223372036854775807",
                    "INCRBY",
                    "i64",
                    "64",
                    "1",
                ],
                arr(vec![int(i64::MAX), int(i64::MIN)]),
            ),
            (&["BITFIELD", "bm:f"], arr(vec![])),
            (
                &["BITFIELD", "bm:missing", "GET", "u8", "0"],
                arr(vec![int(0)]),
            ),
            (&["EXISTS", "bm:missing"], int(0)),
            (&["BITFIELD", "bm:f", "GET", "u64", "0"], err(BAD_TYPE)),
            (&["BITFIELD", "bm:f", "GET", "i65", "0"], err(BAD_TYPE)),
            (&["BITFIELD", "bm:f", "GET", "x8", "0"], err(BAD_TYPE)),
            (&["BITFIELD", "bm:f", "GET", "u0", "0"], err(BAD_TYPE)),
            (&["BITFIELD", "bm:f", "GET", "u8", "-1"], err(BAD_OFFSET)),
            (&["BITFIELD", "bm:f", "GET", "u8", "#-1"], err(BAD_OFFSET)),
            (&["BITFIELD", "bm:f", "SET", "u8", "0", "x"], err(NOT_INT)),
            (
                &["BITFIELD", "bm:f", "OVERFLOW", "BAD"],
                err("ERR Invalid OVERFLOW type specified"),
            ),
            (&["BITFIELD", "bm:f", "GET", "u8"], err("ERR syntax error")),
            (
                &["BITFIELD", "bm:f", "FOO", "u8", "0"],
                err("ERR syntax error"),
            ),
            (&["BITFIELD", "bm:lf", "GET", "u8", "0"], err(WRONGTYPE)),
            (
                &["BITFIELD", "bm:lf", "SET", "u8", "0", "1"],
                err(WRONGTYPE),
            ),
            (
                &["BITFIELD_RO", "bm:f", "GET", "u8", "0"],
                arr(vec![int(255)]),
            ),
            (
                &["BITFIELD_RO", "bm:f", "SET", "u8", "0", "1"],
                err("ERR BITFIELD_RO only supports the GET subcommand"),
            ),
            (
                &["BITFIELD_RO", "bm:f", "INCRBY", "u8", "0", "1"],
                err("ERR BITFIELD_RO only supports the GET subcommand"),
            ),
        ],
    );
    // A write past the end grows the string with zeros.
    assert_eq!(
        r.cmd(&["BITFIELD", "bm:f", "SET", "u8", "#20", "1"]),
        arr(vec![int(0)])
    );
    assert_eq!(r.cmd(&["STRLEN", "bm:f"]), int(21));
}

#[test]
fn a_megabyte_bitmap_set_bit_by_bit_counts_and_searches_right() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "bm:big"]);
    // Every 7th bit of 8 Mbit, in one pipeline: each write extends the
    // string in place.
    let mut batch = Vec::new();
    let mut n = 0;
    for off in (0..8 * 1024 * 1024).step_by(7 * 1024 + 3) {
        batch.extend_from_slice(&Frame::command(&[
            "SETBIT",
            "bm:big",
            &off.to_string(),
            "1",
        ]));
        n += 1;
    }
    r.send(&batch);
    let replies = r.read_frames(n);
    assert!(replies.iter().all(|f| *f == int(0)));
    check(
        &mut r,
        &[
            (&["BITCOUNT", "bm:big"], int(n as i64)),
            (&["BITPOS", "bm:big", "1", "1"], int(7 * 1024 + 3)),
            (&["GETBIT", "bm:big", &(7 * 1024 + 3).to_string()], int(1)),
        ],
    );
}

/// Bitmaps of every shape: set bit by bit, grown from an integer, made by
/// BITOP and BITFIELD.
fn fill_bitmaps(c: &mut redis::Connection) {
    for i in 0..50 {
        let k = format!("bits:{i}");
        for off in [0, 3, 64 * i + 1, 1000 + i * 13] {
            let _: i64 = redis::cmd("SETBIT")
                .arg(&k)
                .arg(off)
                .arg(1)
                .query(c)
                .unwrap();
        }
    }
    let () = redis::cmd("SET")
        .arg("bits:int")
        .arg(987654)
        .query(c)
        .unwrap();
    let _: i64 = redis::cmd("SETBIT")
        .arg("bits:int")
        .arg(3)
        .arg(1)
        .query(c)
        .unwrap();
    let _: i64 = redis::cmd("BITOP")
        .arg("XOR")
        .arg("bits:xor")
        .arg("bits:1")
        .arg("bits:7")
        .query(c)
        .unwrap();
    let _: Vec<i64> = redis::cmd("BITFIELD")
        .arg("bits:f")
        .arg("SET")
        .arg("i32")
        .arg("#5")
        .arg(-123456)
        .query(c)
        .unwrap();
}

#[test]
fn bitmaps_survive_save_restart_reload_and_load_into_redis() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), &["--save", ""]);
        let mut c = n.client();
        fill_bitmaps(&mut c);
        before = digest(&mut c);
        let () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
        assert_eq!(digest(&mut c), before);
        let () = redis::cmd("SAVE").query(&mut c).unwrap();
    }
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
    let rdir = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("dump.rdb"), rdir.path().join("dump.rdb")).unwrap();
    let redis = ServerProcess::redis(&["--dir", rdir.path().to_str().unwrap()]);
    assert_eq!(digest(&mut redis.client()), before);
    // The same writes on a real Redis end in the same data.
    let fresh = ServerProcess::redis(&[]);
    let mut rc = fresh.client();
    fill_bitmaps(&mut rc);
    assert_eq!(digest(&mut rc), before);
}
