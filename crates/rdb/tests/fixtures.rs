//! Golden files written by a real Redis 7.0 (see fixtures/make_fixtures.sh):
//! guards against a decoder that only understands its own encoder's output.
//! The expected content mirrors fixtures/fixture_data.py.

mod common;
use common::lcg_bytes;

use std::collections::{BTreeMap, BTreeSet};

use ferrokv_rdb::consts::*;
use ferrokv_rdb::{
    decode, Checksum, Dataset, DecodeError, EncoderOptions, OrderedScore, OwnedEntry, OwnedValue,
    RdbEncoder,
};

const FAR_FUTURE_MS: i64 = 4_102_444_800_123;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn b(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

fn string(s: impl AsRef<[u8]>) -> OwnedValue {
    OwnedValue::String(b(s))
}

fn list<S: AsRef<[u8]>>(items: impl IntoIterator<Item = S>) -> OwnedValue {
    OwnedValue::List(items.into_iter().map(b).collect())
}

fn set<S: AsRef<[u8]>>(items: impl IntoIterator<Item = S>) -> OwnedValue {
    OwnedValue::Set(items.into_iter().map(b).collect::<BTreeSet<_>>())
}

fn zset<S: AsRef<[u8]>>(items: impl IntoIterator<Item = (S, f64)>) -> OwnedValue {
    OwnedValue::SortedSet(
        items
            .into_iter()
            .map(|(m, s)| (b(m), OrderedScore(s)))
            .collect(),
    )
}

fn hash<F: AsRef<[u8]>, V: AsRef<[u8]>>(items: impl IntoIterator<Item = (F, V)>) -> OwnedValue {
    OwnedValue::Hash(items.into_iter().map(|(f, v)| (b(f), b(v))).collect())
}

fn entry(value: OwnedValue, expire_ms: Option<i64>, rdb_type: u8) -> OwnedEntry {
    OwnedEntry {
        value,
        expire_ms,
        rdb_type,
    }
}

fn expected_all_types() -> BTreeMap<u64, BTreeMap<Vec<u8>, OwnedEntry>> {
    let mut db0 = BTreeMap::new();
    let mut put = |k: &[u8], e: OwnedEntry| assert!(db0.insert(b(k), e).is_none());
    put(b"str:int", entry(string("12345"), None, TYPE_STRING));
    put(b"str:neg", entry(string("-7"), None, TYPE_STRING));
    put(
        b"str:bigint",
        entry(string("12345678901"), None, TYPE_STRING),
    );
    put(b"str:empty", entry(string(""), None, TYPE_STRING));
    put(
        b"str:bin",
        entry(string(b"a\x00b\r\nc\xff"), None, TYPE_STRING),
    );
    put(
        b"str:lzf",
        entry(string("ab".repeat(500)), None, TYPE_STRING),
    );
    put(
        b"str:random",
        entry(string(lcg_bytes(300, 1)), None, TYPE_STRING),
    );
    let large: String = (0..10000).map(|i| format!("line {i}\r\n")).collect();
    put(b"str:large", entry(string(large), None, TYPE_STRING));
    put(
        b"str:ttl",
        entry(string("v"), Some(FAR_FUTURE_MS), TYPE_STRING),
    );
    put(
        b"\x00key\r\n",
        entry(string("binary key"), None, TYPE_STRING),
    );
    put(
        b"list:small",
        entry(
            list([&b"a"[..], b"b", b"1", b"-2", b"x\r\n\x00"]),
            None,
            TYPE_LIST_QUICKLIST_2,
        ),
    );
    let mut big: Vec<String> = (0..3000).map(|i| format!("item-{i}")).collect();
    big.insert(1500, "L".repeat(20000));
    put(b"list:big", entry(list(big), None, TYPE_LIST_QUICKLIST_2));
    put(
        b"set:ints",
        entry(set(["1", "2", "3", "-100", "70000"]), None, TYPE_SET_INTSET),
    );
    put(
        b"set:ints64",
        entry(set(["1", "5000000000"]), None, TYPE_SET_INTSET),
    );
    put(
        b"set:strs",
        entry(set([&b"a"[..], b"b", b"c\x00"]), None, TYPE_SET),
    );
    put(
        b"set:bigints",
        entry(set((0..600).map(|i| (i * 7).to_string())), None, TYPE_SET),
    );
    put(
        b"zset:small",
        entry(
            zset([
                ("a", 1.0),
                ("b", 2.5),
                ("c", f64::NEG_INFINITY),
                ("d", f64::INFINITY),
                ("e", 0.0),
                ("f", -3.0),
            ]),
            None,
            TYPE_ZSET_LISTPACK,
        ),
    );
    put(
        b"zset:big",
        entry(
            zset((0..200).map(|i| (format!("m{i}"), i as f64 * 1.5))),
            None,
            TYPE_ZSET_2,
        ),
    );
    put(
        b"zset:longmember",
        entry(
            zset([("x".repeat(100), 1.0), ("y".to_string(), 2.0)]),
            Some(FAR_FUTURE_MS + 1),
            TYPE_ZSET_2,
        ),
    );
    put(
        b"hash:small",
        entry(
            hash([
                (&b"f1"[..], &b"v1"[..]),
                (b"f2", b"2"),
                (b"bin\x00", b"\r\n"),
            ]),
            Some(FAR_FUTURE_MS),
            TYPE_HASH_LISTPACK,
        ),
    );
    put(
        b"hash:big",
        entry(
            hash((0..600).map(|i| (format!("field{i}"), format!("value{i}")))),
            None,
            TYPE_HASH,
        ),
    );
    put(
        b"hash:longval",
        entry(
            hash([("f", "v".repeat(100)), ("g", "1".into())]),
            None,
            TYPE_HASH,
        ),
    );

    let mut db1 = BTreeMap::new();
    db1.insert(b("db1:str"), entry(string("in db one"), None, TYPE_STRING));
    db1.insert(
        b("db1:list"),
        entry(list(["1", "2", "3"]), None, TYPE_LIST_QUICKLIST_2),
    );
    BTreeMap::from([(0, db0), (1, db1)])
}

fn assert_same_dbs(
    got: &BTreeMap<u64, BTreeMap<Vec<u8>, OwnedEntry>>,
    want: &BTreeMap<u64, BTreeMap<Vec<u8>, OwnedEntry>>,
) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "databases"
    );
    for (db, keys) in want {
        let got_keys = &got[db];
        assert_eq!(
            got_keys
                .keys()
                .map(|k| k.escape_ascii().to_string())
                .collect::<Vec<_>>(),
            keys.keys()
                .map(|k| k.escape_ascii().to_string())
                .collect::<Vec<_>>(),
            "keys of db {db}"
        );
        for (k, e) in keys {
            let g = &got_keys[k];
            let name = k.escape_ascii().to_string();
            assert_eq!(g.rdb_type, e.rdb_type, "RDB type of db {db} key {name}");
            assert_eq!(g.expire_ms, e.expire_ms, "expiry of db {db} key {name}");
            // Values can be large: report where they differ, not all of them.
            if g.value != e.value {
                let (gs, es) = (format!("{:?}", g.value), format!("{:?}", e.value));
                let at = gs
                    .bytes()
                    .zip(es.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let from = at.saturating_sub(80);
                panic!(
                    "value of db {db} key {name} differs at char {at}:\n got: ...{}\nwant: ...{}",
                    &gs[from..(at + 80).min(gs.len())],
                    &es[from..(at + 80).min(es.len())]
                );
            }
        }
    }
}

#[test]
fn redis_7_0_all_types_fixture_decodes_to_exact_contents() {
    let data = fixture("all_types.rdb");
    let (ds, summary) = Dataset::from_rdb(&data).unwrap();
    assert_eq!(summary.version, 10);
    assert!(
        matches!(summary.checksum, Checksum::Verified(_)),
        "{:?}",
        summary.checksum
    );
    assert_eq!(summary.len, data.len());
    assert_eq!(summary.empty_keys_skipped, 0);
    assert_eq!(ds.aux_value(b"redis-ver"), Some(&b"7.0.15"[..]));
    assert_eq!(ds.aux_value(b"redis-bits"), Some(&b"64"[..]));
    assert_eq!(ds.aux_value(b"aof-base"), Some(&b"0"[..]));
    assert_same_dbs(&ds.dbs, &expected_all_types());
    assert_eq!(summary.keys, 24);
}

#[test]
fn redis_7_0_compressed_quicklist_nodes_and_disabled_checksum_decode() {
    let data = fixture("compressed_nodes.rdb");
    let (ds, summary) = Dataset::from_rdb(&data).unwrap();
    assert_eq!(summary.checksum, Checksum::Disabled);
    assert_eq!(&data[data.len() - 8..], &[0; 8]);
    // The nodes really are LZF blobs in this file: with list-compress-depth 1
    // every node but the first and last is compressed, and a 0xC3 string
    // marker follows the PACKED container length (2) of such a node.
    assert!(data.windows(2).any(|w| w == [0x02, 0xC3]));
    let items: Vec<String> = (0..100)
        .map(|i| format!("compressible-item-{i:04}-xxxxxxxxxxxxxxxx"))
        .collect();
    let want = BTreeMap::from([(
        0,
        BTreeMap::from([
            (
                b("list:compressed"),
                entry(list(items), None, TYPE_LIST_QUICKLIST_2),
            ),
            (
                b("str:long"),
                entry(string("ab".repeat(500)), None, TYPE_STRING),
            ),
        ]),
    )]);
    assert_same_dbs(&ds.dbs, &want);
}

#[test]
fn decoded_fixture_reencodes_to_the_same_contents() {
    let data = fixture("all_types.rdb");
    let (ds, _) = Dataset::from_rdb(&data).unwrap();
    let mut enc = RdbEncoder::new(EncoderOptions::default());
    let mut out = Vec::new();
    enc.header(&mut out, &[(b"redis-ver", b"7.0.15")]);
    for (db, keys) in &ds.dbs {
        enc.select_db(&mut out, *db);
        for (k, e) in keys {
            match &e.value {
                OwnedValue::String(s) => enc.string_entry(&mut out, k, s, e.expire_ms),
                OwnedValue::List(l) => enc.list_entry(&mut out, k, l, e.expire_ms),
                OwnedValue::Set(s) => enc.set_entry(&mut out, k, s, e.expire_ms),
                OwnedValue::SortedSet(z) => {
                    enc.zset_entry(&mut out, k, z.iter().map(|(m, s)| (m, s.0)), e.expire_ms)
                }
                OwnedValue::Hash(h) => enc.hash_entry(&mut out, k, h, e.expire_ms),
                OwnedValue::HashWithTtls(h) => {
                    let fields: Vec<(&[u8], &[u8], Option<i64>)> =
                        h.iter().map(|(f, (v, at))| (&f[..], &v[..], *at)).collect();
                    enc.hash_ttl_entry(&mut out, k, &fields, e.expire_ms)
                }
                OwnedValue::Stream(st) => enc.stream_entry(&mut out, k, st, e.expire_ms),
            }
        }
    }
    enc.finish(&mut out);
    let (again, _) = Dataset::from_rdb(&out).unwrap();
    // Same encodings too: our encoder chooses what Redis chose.
    assert_same_dbs(&again.dbs, &ds.dbs);
}

#[test]
fn any_flipped_byte_in_a_fixture_is_detected() {
    let data = fixture("all_types.rdb");
    for pos in (9..data.len() - 8).step_by(997) {
        let mut bad = data.clone();
        bad[pos] ^= 0x20;
        match Dataset::from_rdb(&bad) {
            Err(e) => assert!(e.offset().is_some(), "{e}"),
            Ok(_) => panic!("flip at {pos} went unnoticed"),
        }
    }
}

#[test]
fn truncated_fixture_reports_truncation_with_offset() {
    let data = fixture("all_types.rdb");
    for cut in (9..data.len()).step_by(1013) {
        let err = decode(&data[..cut], &mut Dataset::default()).unwrap_err();
        let off = err.offset().unwrap();
        assert!(off <= cut, "{err} at cut {cut}");
        assert!(
            !matches!(err, DecodeError::ChecksumMismatch { .. }),
            "{err}"
        );
    }
}

#[test]
fn compact_encodings_are_byte_identical_to_redis() {
    // Our listpack, intset, integer and length encodings must be Redis's own,
    // not merely readable: each entry as we encode it (expiry opcode, type,
    // key, value) appears verbatim in the file Redis wrote. (LZF output may
    // legitimately differ from liblzf's, so compression is off and the
    // values chosen are ones Redis stored uncompressed.)
    let data = fixture("all_types.rdb");
    let opts = EncoderOptions {
        compression: false,
        ..EncoderOptions::default()
    };
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut enc = RdbEncoder::new(opts);
    let mut out = Vec::new();
    enc.string_entry(&mut out, b"str:int", b"12345", None);
    cases.push(("str:int", std::mem::take(&mut out)));
    enc.string_entry(&mut out, b"str:bigint", b"12345678901", None);
    cases.push(("str:bigint", std::mem::take(&mut out)));
    enc.string_entry(&mut out, b"str:ttl", b"v", Some(FAR_FUTURE_MS));
    cases.push(("str:ttl", std::mem::take(&mut out)));
    enc.list_entry(
        &mut out,
        b"list:small",
        [&b"a"[..], b"b", b"1", b"-2", b"x\r\n\x00"],
        None,
    );
    cases.push(("list:small", std::mem::take(&mut out)));
    enc.set_entry(
        &mut out,
        b"set:ints",
        ["1", "2", "3", "-100", "70000"],
        None,
    );
    cases.push(("set:ints", std::mem::take(&mut out)));
    enc.set_entry(&mut out, b"set:ints64", ["1", "5000000000"], None);
    cases.push(("set:ints64", std::mem::take(&mut out)));
    enc.zset_entry(
        &mut out,
        b"zset:small",
        [
            ("a", 1.0),
            ("b", 2.5),
            ("c", f64::NEG_INFINITY),
            ("d", f64::INFINITY),
            ("e", 0.0),
            ("f", -3.0),
        ],
        None,
    );
    cases.push(("zset:small", std::mem::take(&mut out)));
    enc.hash_entry(
        &mut out,
        b"hash:small",
        [
            (&b"f1"[..], &b"v1"[..]),
            (b"f2", b"2"),
            (b"bin\x00", b"\r\n"),
        ],
        Some(FAR_FUTURE_MS),
    );
    cases.push(("hash:small", std::mem::take(&mut out)));
    enc.list_entry(&mut out, b"db1:list", ["1", "2", "3"], None);
    cases.push(("db1:list", std::mem::take(&mut out)));
    for (name, bytes) in cases {
        assert!(
            data.windows(bytes.len()).any(|w| w == bytes.as_slice()),
            "{name}: our bytes {bytes:02x?} are not in Redis's file"
        );
    }
}

#[test]
fn sixty_four_bit_lengths_are_read() {
    // Redis writes 0x81 + u64 only past 4 GiB, but readers must accept it.
    let mut f = b"REDIS0010".to_vec();
    f.extend_from_slice(&[
        TYPE_STRING,
        0x81,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        1,
        b'k',
        0x80,
        0,
        0,
        0,
        2,
        b'v',
        b'w',
        OPCODE_EOF,
    ]);
    let crc = ferrokv_rdb::crc64::crc64(0, &f);
    f.extend_from_slice(&crc.to_le_bytes());
    let (ds, _) = Dataset::from_rdb(&f).unwrap();
    assert_eq!(
        ds.get(0, b"k").unwrap().value,
        OwnedValue::String(b"vw".to_vec())
    );
}
