//! Guards the HyperLogLog family against Redis 7.0: PFADD PFCOUNT PFMERGE
//! PFDEBUG PFSELFTEST with exact replies, error texts and bytes — the
//! sparse encoding's opcodes and the cached cardinality's stale bit, the
//! promotion to dense at `hll-sparse-max-bytes`, unions, type checks, and
//! corrupted or hostile HLL strings detected (never read out of bounds);
//! and HLL values crossing to a real redis-server and back by RDB,
//! DUMP/RESTORE and replication both ways with equal bytes and counts.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the protocol assertions against
//! the real `redis-server`.
mod common;
use common::repl::{ferrokv, replicaof, wait_converged};
#[allow(unused_imports)]
use common::reply::*;
use common::ServerProcess;
use ferrokv_resp::Frame;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn bytes(r: &mut common::Raw, key: &str) -> Vec<u8> {
    match r.cmd(&["GET", key]) {
        Frame::Bulk(b) => b,
        other => panic!("GET {key}: {other:?}"),
    }
}

fn rawbulk(b: &[u8]) -> Frame {
    Frame::Bulk(b.to_vec())
}

#[test]
fn pfadd_pfcount_and_the_cached_cardinality_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "pf:a", "pf:e", "pf:z"]);
    check(
        &mut r,
        &[
            // A key is created even with no elements, and that is a change.
            (&["PFADD", "pf:e"], int(1)),
            (&["PFADD", "pf:e"], int(0)),
            (&["PFCOUNT", "pf:e"], int(0)),
            (&["PFCOUNT", "pf:z"], int(0)),
            (&["EXISTS", "pf:z"], int(0)),
            (&["PFADD", "pf:a", "a", "b", "c"], int(1)),
            (&["PFADD", "pf:a", "a", "b", "c"], int(0)),
            (&["PFADD", "pf:a", ""], int(1)),
            (&["PFADD", "pf:a", ""], int(0)),
            (&["TYPE", "pf:a"], Frame::Simple("string".into())),
            (&["OBJECT", "ENCODING", "pf:a"], bulk("raw")),
        ],
    );
    // Redis's exact bytes: the header with the stale bit set, then the
    // opcodes.
    r.cmd(&["DEL", "pf:a"]);
    r.cmd(&["PFADD", "pf:a", "a", "b", "c"]);
    let stale =
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ";
    assert_eq!(bytes(&mut r, "pf:a"), stale);
    assert_eq!(
        r.cmd(&["PFDEBUG", "DECODE", "pf:a"]),
        bulk("Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
    );
    assert_eq!(r.cmd(&["PFCOUNT", "pf:a"]), int(3));
    // The count is cached in the header, little-endian, stale bit clear.
    let mut cached = stale.to_vec();
    cached[8] = 3;
    cached[15] = 0;
    assert_eq!(bytes(&mut r, "pf:a"), cached);
    assert_eq!(r.cmd(&["GETRANGE", "pf:a", "15", "15"]), rawbulk(b"\x00"));
    r.cmd(&["PFADD", "pf:a", "d"]);
    assert_eq!(r.cmd(&["GETRANGE", "pf:a", "15", "15"]), rawbulk(b"\x80"));
    assert_eq!(r.cmd(&["PFCOUNT", "pf:a"]), int(4));
    // A cached value is returned as it is, true or not (Redis trusts it).
    r.cmd(&["SETRANGE", "pf:a", "8", "\x2a\x00"]);
    assert_eq!(r.cmd(&["PFCOUNT", "pf:a"]), int(42));
}

#[test]
fn type_checks_and_pfdebug_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "pf:l", "pf:s", "pf:i", "pf:h", "pf:d"]);
    r.cmd(&["RPUSH", "pf:l", "x"]);
    r.cmd(&["SET", "pf:s", "not an hll at all"]);
    r.cmd(&["SET", "pf:i", "12345"]);
    r.cmd(&["PFADD", "pf:h", "x", "y"]);
    check(
        &mut r,
        &[
            (&["PFADD", "pf:l", "a"], err(WRONGTYPE)),
            (&["PFADD", "pf:s", "a"], err(NOT_HLL)),
            (&["PFADD", "pf:i", "a"], err(NOT_HLL)),
            (&["PFCOUNT", "pf:l"], err(WRONGTYPE)),
            (&["PFCOUNT", "pf:s"], err(NOT_HLL)),
            (&["PFCOUNT", "pf:h", "pf:s"], err(NOT_HLL)),
            (&["PFCOUNT", "pf:h", "pf:l"], err(WRONGTYPE)),
            (&["PFMERGE", "pf:d", "pf:h", "pf:i"], err(NOT_HLL)),
            (&["PFMERGE", "pf:l", "pf:h"], err(WRONGTYPE)),
            (&["EXISTS", "pf:d"], int(0)),
            (&["GET", "pf:i"], bulk("12345")),
            (
                &["PFDEBUG", "ENCODING", "pf:nope"],
                err("ERR The specified key does not exist"),
            ),
            (&["PFDEBUG", "ENCODING", "pf:s"], err(NOT_HLL)),
            // The key is checked before the subcommand.
            (
                &["PFDEBUG", "BOGUS", "pf:nope"],
                err("ERR The specified key does not exist"),
            ),
            (
                &["PFDEBUG", "BOGUS", "pf:h"],
                err("ERR Unknown PFDEBUG subcommand 'BOGUS'"),
            ),
            (
                &["PFDEBUG", "ENCODING"],
                err("ERR wrong number of arguments for 'pfdebug' command"),
            ),
            (
                &["PFDEBUG", "ENCODING", "pf:h"],
                Frame::Simple("sparse".into()),
            ),
            (&["PFDEBUG", "TODENSE", "pf:h"], int(1)),
            (&["PFDEBUG", "TODENSE", "pf:h"], int(0)),
            (
                &["PFDEBUG", "ENCODING", "pf:h"],
                Frame::Simple("dense".into()),
            ),
            (
                &["PFDEBUG", "DECODE", "pf:h"],
                err("ERR HLL encoding is not sparse"),
            ),
            (&["STRLEN", "pf:h"], int(12304)),
            (&["PFCOUNT", "pf:h"], int(2)),
            (&["PFSELFTEST"], ok()),
            (
                &["PFADD"],
                err("ERR wrong number of arguments for 'pfadd' command"),
            ),
        ],
    );
    let Frame::Array(regs) = r.cmd(&["PFDEBUG", "GETREG", "pf:h"]) else {
        panic!("GETREG is an array")
    };
    assert_eq!(regs.len(), 16384);
    let set: Vec<_> = regs.iter().filter(|f| **f != int(0)).collect();
    assert_eq!(set.len(), 2, "two elements, two registers");
}

#[test]
fn unions_count_and_merge_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "pf:u1", "pf:u2", "pf:u3", "pf:m", "pf:md"]);
    let add = |r: &mut common::Raw, key: &str, from: u32, to: u32| {
        let mut a = vec!["PFADD".to_string(), key.to_string()];
        a.extend((from..to).map(|i| format!("e{i}")));
        r.cmd(&a);
    };
    add(&mut r, "pf:u1", 0, 150);
    add(&mut r, "pf:u2", 100, 250);
    add(&mut r, "pf:u3", 0, 5000);
    let n1 = r.cmd(&["PFCOUNT", "pf:u1"]);
    let n12 = r.cmd(&["PFCOUNT", "pf:u1", "pf:u2", "pf:missing"]);
    let Frame::Integer(u) = n12 else {
        panic!("{n12:?}")
    };
    assert!((240..=260).contains(&u), "union of 250: {u}");
    assert_eq!(
        r.cmd(&["PFDEBUG", "ENCODING", "pf:u1"]),
        Frame::Simple("sparse".into())
    );
    assert_eq!(
        r.cmd(&["PFDEBUG", "ENCODING", "pf:u3"]),
        Frame::Simple("dense".into())
    );
    // Sparse sources keep a sparse destination; one dense source makes it
    // dense.
    check(
        &mut r,
        &[
            (&["PFMERGE", "pf:m", "pf:u1", "pf:u2"], ok()),
            (&["PFCOUNT", "pf:m"], n12.clone()),
            (
                &["PFDEBUG", "ENCODING", "pf:m"],
                Frame::Simple("sparse".into()),
            ),
            (&["PFMERGE", "pf:md", "pf:u1", "pf:u3"], ok()),
            (
                &["PFDEBUG", "ENCODING", "pf:md"],
                Frame::Simple("dense".into()),
            ),
            // The destination alone: created empty.
            (&["PFMERGE", "pf:new"], ok()),
            (&["PFCOUNT", "pf:new"], int(0)),
            (&["PFCOUNT", "pf:u1"], n1),
        ],
    );
    let m = bytes(&mut r, "pf:m");
    r.cmd(&["DEL", "pf:new"]);
    // The destination is a source too.
    r.cmd(&["PFMERGE", "pf:u1", "pf:u2"]);
    assert_eq!(r.cmd(&["PFCOUNT", "pf:u1"]), n12);
    assert_eq!(m.len(), bytes(&mut r, "pf:u1").len());
}

#[test]
fn the_sparse_encoding_turns_dense_at_hll_sparse_max_bytes() {
    let s = own_server(&[]);
    let mut r = s.raw();
    for max in ["3000", "500", "0"] {
        r.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", max]);
        let max: i64 = max.parse().unwrap();
        r.cmd(&["DEL", "pf:p"]);
        let mut i = 0;
        loop {
            let mut a = vec!["PFADD".to_string(), "pf:p".to_string()];
            a.extend((i..i + 10).map(|j| format!("el{j}")));
            i += 10;
            r.cmd(&a);
            let Frame::Integer(len) = r.cmd(&["STRLEN", "pf:p"]) else {
                panic!()
            };
            if r.cmd(&["PFDEBUG", "ENCODING", "pf:p"]) == Frame::Simple("dense".into()) {
                assert_eq!(len, 12304);
                break;
            }
            assert!(len <= max, "sparse of {len} bytes over {max}");
            assert!(i < 100_000, "never turned dense");
        }
    }
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "hll-sparse-max-bytes"]),
        bulks(&["hll-sparse-max-bytes", "0"])
    );
    assert!(matches!(
        r.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "-1"]),
        Frame::Error(_)
    ));
}

/// A sparse HLL string by hand: the header (stale) and the opcodes.
fn sparse(ops: &[u8]) -> Vec<u8> {
    let mut v = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
    v.extend_from_slice(ops);
    v
}

#[test]
fn corrupted_hlls_are_detected_as_redis_does() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "pf:c", "pf:ok"]);
    r.cmd(&["PFADD", "pf:ok", "a"]);
    // Extra bytes after the last register.
    r.cmd(&["PFADD", "pf:c", "a", "b", "c"]);
    r.cmd(&["APPEND", "pf:c", "hello"]);
    check(
        &mut r,
        &[
            (&["PFCOUNT", "pf:c"], err(CORRUPT)),
            (&["PFCOUNT", "pf:c", "pf:ok"], err(CORRUPT)),
            (&["PFMERGE", "pf:ok", "pf:c"], err(CORRUPT)),
            (&["PFDEBUG", "GETREG", "pf:c"], err(CORRUPT)),
            (&["PFDEBUG", "TODENSE", "pf:c"], err(CORRUPT)),
        ],
    );
    // A broken magic, an unknown encoding, a dense header on a short
    // string: not an HLL at all.
    for (at, with) in [("0", "0123"), ("4", "x"), ("4", "\x00")] {
        r.cmd(&["DEL", "pf:c"]);
        r.cmd(&["PFADD", "pf:c", "a", "b", "c"]);
        r.cmd(&["SETRANGE", "pf:c", at, with]);
        assert_eq!(r.cmd(&["PFCOUNT", "pf:c"]), err(NOT_HLL), "{at} {with:?}");
        assert_eq!(r.cmd(&["PFADD", "pf:c", "z"]), err(NOT_HLL));
    }
    // Too few registers: an element past them is refused.
    let short = sparse(&[0x3f]); // ZERO:64
    r.cmd(&[&b"SET"[..], b"pf:c", &short]);
    assert_eq!(r.cmd(&["PFCOUNT", "pf:c"]), err(CORRUPT));
    assert_eq!(r.cmd(&["PFADD", "pf:c", "a"]), err(CORRUPT));
    assert_eq!(r.cmd(&["PING"]), Frame::Simple("PONG".into()));
}

#[test]
fn runs_past_the_last_register_never_write_out_of_bounds() {
    // Redis 7.0.15 itself wrote out of bounds on these (CVE-2025-32023):
    // ferrokv only.
    if against_redis() {
        return;
    }
    let s = server();
    let mut r = s.raw();
    // 2^31 registers of XZEROs and then a VAL, and the same with ZEROs.
    let mut xz = Vec::new();
    for _ in 0..131_073 {
        xz.extend_from_slice(&[0x7f, 0xff]);
    }
    xz.push(0x80);
    let mut z = vec![0x3fu8; 4 * 1024 * 1024];
    z.push(0x80);
    for ops in [xz, z] {
        r.cmd(&[&b"SET"[..], b"pf:c", &sparse(&ops)]);
        for cmd in [
            vec!["PFCOUNT", "pf:c"],
            vec!["PFCOUNT", "pf:c", "pf:c"],
            vec!["PFMERGE", "pf:d", "pf:c"],
            vec!["PFDEBUG", "TODENSE", "pf:c"],
            vec!["PFDEBUG", "GETREG", "pf:c"],
        ] {
            assert_eq!(r.cmd(&cmd), err(CORRUPT), "{cmd:?}");
        }
    }
    assert_eq!(r.cmd(&["PING"]), Frame::Simple("PONG".into()));
}

#[test]
fn randomly_corrupted_hlls_never_crash_the_server() {
    let s = server();
    let mut r = s.raw();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..200 {
        r.cmd(&["DEL", "pf:f"]);
        let n = if round % 2 == 0 { 30 } else { 3000 };
        let mut a = vec!["PFADD".to_string(), "pf:f".to_string()];
        a.extend((0..n).map(|j| format!("f{round}:{j}")));
        r.cmd(&a);
        let mut v = bytes(&mut r, "pf:f");
        for _ in 0..1 + next() % 8 {
            // Past the header, so that the string stays an HLL to check.
            let at = 16 + (next() as usize) % (v.len() - 16);
            v[at] = next() as u8;
        }
        r.cmd(&[&b"SET"[..], b"pf:f", &v]);
        for cmd in [
            vec!["PFCOUNT", "pf:f"],
            vec!["PFADD", "pf:f", "x", "y", "z"],
            vec!["PFCOUNT", "pf:f", "pf:f"],
            vec!["PFMERGE", "pf:g", "pf:f"],
            vec!["PFDEBUG", "DECODE", "pf:f"],
            vec!["PFDEBUG", "GETREG", "pf:f"],
        ] {
            match r.cmd(&cmd) {
                Frame::Error(e) => assert!(
                    e == CORRUPT.as_bytes() || e == b"ERR HLL encoding is not sparse",
                    "{cmd:?}: {}",
                    String::from_utf8_lossy(&e)
                ),
                Frame::Integer(_) | Frame::Simple(_) | Frame::Bulk(_) | Frame::Array(_) => {}
                other => panic!("{cmd:?}: {other:?}"),
            }
        }
    }
    assert_eq!(r.cmd(&["PING"]), Frame::Simple("PONG".into()));
}

/// HLLs of every shape: empty, sparse small and large, dense, merged,
/// counted (cache valid) and not.
fn fill_hlls(r: &mut common::Raw) {
    for (k, n) in [
        ("hl:empty", 0),
        ("hl:3", 3),
        ("hl:200", 200),
        ("hl:5k", 5000),
    ] {
        let mut a = vec!["PFADD".to_string(), k.to_string()];
        a.extend((0..n).map(|j| format!("{k}:{j}")));
        r.cmd(&a);
    }
    r.cmd(&["PFCOUNT", "hl:200"]);
    r.cmd(&["PFCOUNT", "hl:5k"]);
    r.cmd(&["PFMERGE", "hl:m", "hl:3", "hl:200"]);
    r.cmd(&["PFMERGE", "hl:md", "hl:3", "hl:5k"]);
    r.cmd(&["PFADD", "hl:bin", "\x00\x01\x02", "", "\u{1F600}"]);
}

const HLL_KEYS: &[&str] = &[
    "hl:empty", "hl:3", "hl:200", "hl:5k", "hl:m", "hl:md", "hl:bin",
];

/// Per key: the SHA1 of its bytes (read before the PFCOUNT, which may
/// write the cache) and its count.
fn snapshot(r: &mut common::Raw) -> Vec<(String, Frame)> {
    HLL_KEYS
        .iter()
        .map(|k| (common::sha1_hex(&bytes(r, k)), r.cmd(&["PFCOUNT", k])))
        .collect()
}

#[test]
fn the_same_writes_give_redis_s_bytes_and_counts() {
    if against_redis() {
        return;
    }
    let f = ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let mut fr = f.raw();
    let mut rr = redis.raw();
    fill_hlls(&mut fr);
    fill_hlls(&mut rr);
    // Before any PFCOUNT of the stale ones, then after.
    for k in HLL_KEYS {
        assert!(bytes(&mut fr, k) == bytes(&mut rr, k), "{k}: bytes differ");
    }
    assert_eq!(snapshot(&mut fr), snapshot(&mut rr));
    assert_eq!(
        fr.cmd(&["PFCOUNT", "hl:3", "hl:5k", "hl:bin"]),
        rr.cmd(&["PFCOUNT", "hl:3", "hl:5k", "hl:bin"])
    );
}

#[test]
fn hlls_cross_to_redis_and_back_by_rdb_dump_and_replication() {
    if against_redis() {
        return;
    }
    // RDB: ferrokv's file loads into redis-server with the same bytes.
    let dir = tempfile::tempdir().unwrap();
    let f = ferrokv(&["--dir", dir.path().to_str().unwrap()]);
    let mut fr = f.raw();
    fill_hlls(&mut fr);
    // The first pass writes the stale caches; the second sees them.
    snapshot(&mut fr);
    let before = snapshot(&mut fr);
    assert_eq!(fr.cmd(&["SAVE"]), ok());
    let redis = ServerProcess::redis(&["--dir", dir.path().to_str().unwrap()]);
    let mut rr = redis.raw();
    assert_eq!(snapshot(&mut rr), before);

    // DUMP/RESTORE both ways, and both keep counting the same afterwards.
    let f2 = ferrokv(&[]);
    let mut f2r = f2.raw();
    for k in HLL_KEYS {
        let Frame::Bulk(p) = rr.cmd(&["DUMP", k]) else {
            panic!("DUMP {k}")
        };
        assert_eq!(f2r.cmd(&[&b"RESTORE"[..], k.as_bytes(), b"0", &p]), ok());
        let Frame::Bulk(back) = f2r.cmd(&["DUMP", k]) else {
            panic!("DUMP {k}")
        };
        let k2 = format!("{k}:back");
        assert_eq!(rr.cmd(&[&b"RESTORE"[..], k2.as_bytes(), b"0", &back]), ok());
        assert!(
            bytes(&mut rr, &k2) == bytes(&mut rr, k),
            "{k}: bytes differ"
        );
    }
    for r in [&mut f2r, &mut rr] {
        r.cmd(&["PFADD", "hl:200", "more", "elements"]);
        r.cmd(&["PFMERGE", "hl:5k", "hl:200"]);
    }
    assert_eq!(snapshot(&mut f2r), snapshot(&mut rr));

    // Replication: a ferrokv replica of a Redis master and a Redis replica
    // of a ferrokv master end with the master's bytes, the caches that
    // PFCOUNT wrote included.
    let rm = ServerProcess::redis(&[]);
    let fm = ferrokv(&[]);
    let frep = ferrokv(&[]);
    let rrep = ServerProcess::redis(&[]);
    replicaof(&frep, &rm);
    replicaof(&rrep, &fm);
    for m in [&rm, &fm] {
        let mut c = m.raw();
        fill_hlls(&mut c);
        c.cmd(&["PFCOUNT", "hl:m"]);
        c.cmd(&["PFDEBUG", "TODENSE", "hl:200"]);
    }
    wait_converged(&rm, &frep, 20);
    wait_converged(&fm, &rrep, 20);
    // Bytes of all four first: a PFCOUNT on a master would change its
    // replica's bytes under the comparison.
    let all = [&rm, &frep, &fm, &rrep];
    let of = |p: &ServerProcess| -> Vec<String> {
        let mut c = p.raw();
        HLL_KEYS
            .iter()
            .map(|k| common::sha1_hex(&bytes(&mut c, k)))
            .collect()
    };
    let want = of(&rm);
    for p in &all[1..] {
        assert_eq!(of(p), want);
    }
    let counts = |p: &ServerProcess| -> Vec<Frame> {
        let mut c = p.raw();
        HLL_KEYS.iter().map(|k| c.cmd(&["PFCOUNT", k])).collect()
    };
    let want = counts(&rm);
    for p in &all[1..] {
        assert_eq!(counts(p), want);
    }
}
