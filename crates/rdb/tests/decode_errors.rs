//! Hand-built files for every opcode, legacy encoding and failure the
//! decoder must handle the way Redis 7.0 does — each error names its offset.

use std::borrow::Cow;

use ferrokv_rdb::consts::*;
use ferrokv_rdb::crc64::crc64;
use ferrokv_rdb::{
    decode, decode_with, Checksum, Dataset, DecodeError, DecodeOptions, Entry, OrderedScore,
    OwnedValue, RdbValue, RdbVisitor, VisitError,
};

/// `REDIS<version>` + body + EOF + CRC64 trailer (from version 5).
fn file(version: u32, body: &[u8]) -> Vec<u8> {
    let mut f = format!("REDIS{version:04}").into_bytes();
    f.extend_from_slice(body);
    f.push(OPCODE_EOF);
    if version >= 5 {
        let crc = crc64(0, &f);
        f.extend_from_slice(&crc.to_le_bytes());
    }
    f
}

fn s(bytes: &[u8]) -> Vec<u8> {
    assert!(bytes.len() < 64);
    let mut v = vec![bytes.len() as u8];
    v.extend_from_slice(bytes);
    v
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A ziplist of short strings and 0..=12 immediates, as Redis ≤ 6.2 wrote.
fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut tail = 10;
    for e in entries {
        tail = 10 + body.len();
        let start = body.len();
        body.push(prev as u8);
        match std::str::from_utf8(e)
            .ok()
            .and_then(|t| t.parse::<u8>().ok())
        {
            Some(v) if v <= 12 && v.to_string().as_bytes() == *e => body.push(0xF1 + v),
            _ => {
                body.push(e.len() as u8);
                body.extend_from_slice(e);
            }
        }
        prev = body.len() - start;
    }
    let mut zl = Vec::new();
    zl.extend_from_slice(&((10 + body.len() + 1) as u32).to_le_bytes());
    zl.extend_from_slice(&(tail as u32).to_le_bytes());
    zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(0xFF);
    zl
}

fn blob(bytes: &[u8]) -> Vec<u8> {
    // 14-bit length so blobs up to 16 KiB fit.
    let mut v = vec![0x40 | (bytes.len() >> 8) as u8, bytes.len() as u8];
    v.extend_from_slice(bytes);
    v
}

fn strings(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|x| x.as_bytes().to_vec()).collect()
}

#[test]
fn wrong_magic_and_versions_are_refused() {
    assert!(matches!(
        decode(b"REDIX0010\xff", &mut Dataset::default()),
        Err(DecodeError::BadMagic)
    ));
    assert!(matches!(
        decode(b"REDIS", &mut Dataset::default()),
        Err(DecodeError::BadMagic)
    ));
    let err = decode(&file(13, &[]), &mut Dataset::default()).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::UnsupportedVersion {
                version: 13,
                max: 12
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("version 13"), "{err}");
    assert!(matches!(
        decode(&file(0, &[]), &mut Dataset::default()),
        Err(DecodeError::UnsupportedVersion { version: 0, .. })
    ));
}

#[test]
fn version_11_set_listpack_is_read() {
    // Redis 7.2 writes small sets as SET_LISTPACK (20).
    let lp = [12, 0, 0, 0, 2, 0, 0x81, b'a', 2, 5, 1, 0xFF];
    let body = cat(&[&[TYPE_SET_LISTPACK], &s(b"s"), &blob(&lp)]);
    let (ds, summary) = Dataset::from_rdb(&file(11, &body)).unwrap();
    assert_eq!(summary.version, 11);
    assert_eq!(
        ds.get(0, b"s").unwrap().value,
        OwnedValue::Set(strings(&["a", "5"]).into_iter().collect())
    );
}

#[test]
fn version_12_slot_info_is_skipped_and_field_ttl_hashes_are_refused_by_name() {
    // Redis 7.4 in cluster mode: SLOT_INFO (slot, keys, keys with a TTL)
    // before a slot's keys.
    let body = cat(&[
        &[OPCODE_SELECTDB, 0],
        &[OPCODE_SLOT_INFO, 0x40 | 0x30, 0x39, 1, 0],
        &[TYPE_STRING],
        &s(b"k"),
        &s(b"v"),
    ]);
    let (ds, summary) = Dataset::from_rdb(&file(12, &body)).unwrap();
    assert_eq!(summary.version, 12);
    assert_eq!(
        ds.get(0, b"k").unwrap().value,
        OwnedValue::String(b"v".to_vec())
    );
    // Redis 7.4's hashes with field TTLs, in each of their four forms:
    // type 24 stores a deadline relative to the header's soonest one, plus
    // one (0: none); the others absolute.
    for ttl in [5u8, 0] {
        for t in [
            TYPE_HASH_METADATA_PRE_GA,
            TYPE_HASH_LISTPACK_EX_PRE_GA,
            TYPE_HASH_METADATA,
            TYPE_HASH_LISTPACK_EX,
        ] {
            let min_expire: &[u8] = match t {
                TYPE_HASH_METADATA | TYPE_HASH_LISTPACK_EX => &[0; 8],
                _ => &[],
            };
            let value = match t {
                TYPE_HASH_METADATA_PRE_GA | TYPE_HASH_METADATA => {
                    cat(&[&[1, ttl], &s(b"f"), &s(b"v")])
                }
                // A listpack of one (field, value, TTL) triplet.
                _ => blob(&[
                    15, 0, 0, 0, 3, 0, 0x81, b'f', 2, 0x81, b'v', 2, ttl, 1, 0xFF,
                ]),
            };
            let body = cat(&[
                &[OPCODE_SELECTDB, 0],
                &[t],
                &s(b"session:1"),
                min_expire,
                &value,
            ]);
            let (ds, _) = Dataset::from_rdb(&file(12, &body)).unwrap();
            let deadline = match (ttl, t) {
                (0, _) => None,
                (_, TYPE_HASH_METADATA) => Some(ttl as i64 - 1),
                _ => Some(ttl as i64),
            };
            assert_eq!(
                ds.get(0, b"session:1").unwrap().value,
                OwnedValue::HashWithTtls(
                    vec![(b"f".to_vec(), (b"v".to_vec(), deadline))]
                        .into_iter()
                        .collect()
                ),
                "type {t}"
            );
        }
    }
    // A deadline beyond 7.4's range is a corrupt file.
    let body = cat(&[
        &[OPCODE_SELECTDB, 0],
        &[TYPE_HASH_METADATA],
        &s(b"h"),
        &((1u64 << 48) + 1).to_le_bytes(),
        &[1, 0],
        &s(b"f"),
        &s(b"v"),
    ]);
    match Dataset::from_rdb(&file(12, &body)).unwrap_err() {
        DecodeError::Corrupt { reason, .. } => assert!(reason.contains("minExpire"), "{reason}"),
        e => panic!("{e}"),
    }
}

#[test]
fn checksum_mismatch_names_the_trailer_offset() {
    let mut f = file(10, &cat(&[&[TYPE_STRING], &s(b"k"), &s(b"v")]));
    let n = f.len();
    f[n - 1] ^= 1;
    match decode(&f, &mut Dataset::default()).unwrap_err() {
        DecodeError::ChecksumMismatch { offset, .. } => assert_eq!(offset, n - 8),
        e => panic!("{e}"),
    }
    // Skipping verification reads it anyway.
    let sum = decode_with(
        &f,
        &mut Dataset::default(),
        &DecodeOptions {
            verify_checksum: false,
        },
    )
    .unwrap();
    assert!(matches!(sum.checksum, Checksum::NotVerified(_)));
}

#[test]
fn module_keys_are_refused_naming_type_and_key() {
    let t = TYPE_MODULE_2;
    let body = cat(&[&[OPCODE_SELECTDB, 0], &[t], &s(b"my\x00key"), &[0, 0, 0]]);
    let err = decode(&file(10, &body), &mut Dataset::default()).unwrap_err();
    match &err {
        DecodeError::UnsupportedType {
            offset,
            type_byte,
            key,
            type_name,
        } => {
            assert_eq!(*offset, 11);
            assert_eq!(*type_byte, t);
            assert_eq!(key, "my\\x00key");
            assert!(type_name.starts_with("module"));
        }
        e => panic!("{e}"),
    }
    assert!(err.to_string().contains("my\\x00key"), "{err}");
}

/// A stream value whose framing is wrong is refused with Redis's reason;
/// the bytes after the key are `body`.
fn stream_error(t: u8, body: &[u8]) -> String {
    let file_body = cat(&[&[OPCODE_SELECTDB, 0], &[t], &s(b"k"), body]);
    match decode(&file(10, &file_body), &mut Dataset::default()).unwrap_err() {
        DecodeError::Corrupt { what, reason, .. } => {
            assert_eq!(what, "stream");
            reason.to_string()
        }
        e => e.to_string(),
    }
}

#[test]
fn hostile_stream_framing_is_refused_with_redis_reasons() {
    let id = |ms: u8, seq: u8| {
        let mut b = [0u8; 16];
        b[7] = ms;
        b[15] = seq;
        b
    };
    let lp = b"not decoded here";
    // A node key of 15 bytes.
    let r = stream_error(TYPE_STREAM_LISTPACKS_2, &cat(&[&[1], &s(&[0; 15]), &s(lp)]));
    assert_eq!(r, "Stream node key entry is not the size of a stream ID");
    // An empty listpack string.
    let r = stream_error(
        TYPE_STREAM_LISTPACKS_2,
        &cat(&[&[1], &s(&id(1, 0)), &s(b"")]),
    );
    assert_eq!(r, "Stream listpack integrity check failed.");
    // The same node twice.
    let two = cat(&[&[2], &s(&id(1, 0)), &s(lp), &s(&id(1, 0)), &s(lp)]);
    assert_eq!(
        stream_error(TYPE_STREAM_LISTPACKS_2, &two),
        "Listpack re-added with existing key"
    );
    // A consumer owning an ID the group's PEL lacks (type 15: no first
    // ID, tombstone, entries_added or entries_read).
    let meta = [0u8, 1, 0]; // length 0, last ID 1-0
    let group = cat(&[
        &[1],
        &s(b"g"),
        &[1, 0], // last ID
        &[1],    // PEL: one entry
        &id(1, 0),
        &[0; 8], // delivery time
        &[1],    // delivery count
        &[1],    // one consumer
        &s(b"c"),
        &[0; 8], // seen time
        &[1],
        &id(2, 0),
    ]);
    let r = stream_error(TYPE_STREAM_LISTPACKS, &cat(&[&[0], &meta, &group]));
    assert_eq!(r, "Consumer entry not found in group global PEL");
    // A count of 2^32 nodes with only the file's end behind it: an error
    // (the EOF opcode is no string), without allocating for the count.
    let r = stream_error(TYPE_STREAM_LISTPACKS_2, &[0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    assert!(r.contains("invalid string encoding"), "{r}");
}

#[test]
fn module_aux_is_refused_naming_the_module() {
    let mut id = 0u64;
    for c in b"graphdata" {
        let idx = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            .iter()
            .position(|x| x == c)
            .unwrap();
        id = (id << 6) | idx as u64;
    }
    id = (id << 10) | 1;
    let mut body = vec![OPCODE_MODULE_AUX, 0x81];
    body.extend_from_slice(&id.to_be_bytes());
    body.extend_from_slice(&[2, 2, 0]);
    match decode(&file(10, &body), &mut Dataset::default()).unwrap_err() {
        DecodeError::ModuleAux { offset, module } => {
            assert_eq!(offset, 9);
            assert_eq!(module, "graphdata");
        }
        e => panic!("{e}"),
    }
}

#[test]
fn function_libraries_are_refused_unless_the_visitor_takes_them() {
    let code = b"#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    let mut body = vec![OPCODE_FUNCTION2, 0x40, code.len() as u8];
    body.extend_from_slice(code);
    let f = file(10, &body);
    let err = decode(&f, &mut Dataset::default()).unwrap_err();
    assert!(
        matches!(err, DecodeError::Visitor { offset: 9, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("function"), "{err}");

    struct TakesFunctions(Vec<Vec<u8>>);
    impl RdbVisitor for TakesFunctions {
        fn function_library(&mut self, code: &[u8]) -> Result<(), VisitError> {
            self.0.push(code.to_vec());
            Ok(())
        }
        fn entry(&mut self, _: Entry<'_>) -> Result<(), VisitError> {
            Ok(())
        }
    }
    let mut v = TakesFunctions(vec![]);
    decode(&f, &mut v).unwrap();
    assert_eq!(v.0, vec![code.to_vec()]);
}

#[test]
fn unknown_opcode_and_truncation_carry_offsets() {
    let body = cat(&[&[TYPE_STRING], &s(b"k"), &s(b"v"), &[200]]);
    match decode(&file(10, &body), &mut Dataset::default()).unwrap_err() {
        DecodeError::UnknownType { offset, byte: 200 } => assert_eq!(offset, 9 + 5),
        e => panic!("{e}"),
    }
    let f = file(10, &cat(&[&[TYPE_STRING], &s(b"k"), &s(b"value")]));
    match decode(&f[..f.len() - 12], &mut Dataset::default()).unwrap_err() {
        DecodeError::Truncated { offset, needed } => {
            assert_eq!(offset, 9 + 4);
            assert_eq!(needed, 3);
        }
        e => panic!("{e}"),
    }
    // Missing trailer.
    assert!(matches!(
        decode(&f[..f.len() - 3], &mut Dataset::default()).unwrap_err(),
        DecodeError::Truncated { .. }
    ));
}

#[test]
fn lzf_string_with_wrong_length_is_corrupt() {
    // "aaaa..." (10 bytes): literal run of one 'a', then a back reference of
    // length 7+0+2 = 9 at distance 1.
    let good = cat(&[
        &[TYPE_STRING],
        &s(b"k"),
        &[0xC3, 5, 10, 0, b'a', 0xE0, 0, 0],
    ]);
    let (ds, _) = Dataset::from_rdb(&file(10, &good)).unwrap();
    assert_eq!(
        ds.get(0, b"k").unwrap().value,
        OwnedValue::String(vec![b'a'; 10])
    );
    let bad = cat(&[
        &[TYPE_STRING],
        &s(b"k"),
        &[0xC3, 5, 11, 0, b'a', 0xE0, 0, 0],
    ]);
    let err = decode(&file(10, &bad), &mut Dataset::default()).unwrap_err();
    assert!(matches!(err, DecodeError::Lzf { offset: 12, .. }), "{err}");
    let absurd = cat(&[
        &[TYPE_STRING],
        &s(b"k"),
        &[0xC3, 5, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0, b'a', 0xE0, 0, 0],
    ]);
    let err = decode(&file(10, &absurd), &mut Dataset::default()).unwrap_err();
    assert!(
        matches!(err, DecodeError::Corrupt { offset: 12, .. }),
        "{err}"
    );
}

#[test]
fn old_versions_and_legacy_encodings_decode() {
    // Version 3: no checksum, EXPIRETIME in seconds, linked list, text-score
    // zset, zipmap hash, and the ziplist encodings of 3.2..6.2.
    let mut body = Vec::new();
    body.extend_from_slice(&[OPCODE_SELECTDB, 2]);
    body.push(OPCODE_EXPIRETIME);
    body.extend_from_slice(&1_700_000_000i32.to_le_bytes());
    body.extend_from_slice(&cat(&[
        &[TYPE_LIST],
        &s(b"list"),
        &[3],
        &s(b"a"),
        &[0xC0, 7],
        &s(b""),
    ]));
    body.extend_from_slice(&cat(&[
        &[TYPE_SET],
        &s(b"set"),
        &[2],
        &s(b"x"),
        &[0xC1, 0x10, 0x27],
    ]));
    body.extend_from_slice(&cat(&[
        &[TYPE_ZSET],
        &s(b"zset"),
        &[3],
        &s(b"a"),
        &[3],
        b"1.5",
        &s(b"b"),
        &[254],
        &s(b"c"),
        &[255],
    ]));
    body.extend_from_slice(&cat(&[&[TYPE_HASH], &s(b"hash"), &[1], &s(b"f"), &s(b"v")]));
    let zm = [
        2, 1, b'a', 1, 0, b'1', 2, b'b', b'b', 3, 2, b'x', b'y', b'z', 0, 0, 0xFF,
    ];
    body.extend_from_slice(&cat(&[&[TYPE_HASH_ZIPMAP], &s(b"zipmap"), &blob(&zm)]));
    body.extend_from_slice(&cat(&[
        &[TYPE_LIST_ZIPLIST],
        &s(b"zl-list"),
        &blob(&ziplist(&[b"p", b"3", b"q"])),
    ]));
    body.extend_from_slice(&cat(&[
        &[TYPE_ZSET_ZIPLIST],
        &s(b"zl-zset"),
        &blob(&ziplist(&[b"m", b"2", b"n", b"2.25"])),
    ]));
    body.extend_from_slice(&cat(&[
        &[TYPE_HASH_ZIPLIST],
        &s(b"zl-hash"),
        &blob(&ziplist(&[b"f", b"12", b"g", b"w"])),
    ]));
    body.extend_from_slice(&cat(&[
        &[TYPE_LIST_QUICKLIST],
        &s(b"ql"),
        &[2],
        &blob(&ziplist(&[b"1", b"2"])),
        &blob(&ziplist(&[b"three"])),
    ]));
    let f = file(3, &body);
    let (ds, summary) = Dataset::from_rdb(&f).unwrap();
    assert_eq!(summary.version, 3);
    assert_eq!(summary.checksum, Checksum::Absent);
    assert_eq!(summary.len, f.len());
    let get = |k: &[u8]| {
        ds.get(2, k)
            .unwrap_or_else(|| panic!("{}", k.escape_ascii()))
    };
    assert_eq!(
        get(b"list").value,
        OwnedValue::List(strings(&["a", "7", ""]))
    );
    assert_eq!(get(b"list").expire_ms, Some(1_700_000_000_000));
    assert_eq!(get(b"set").expire_ms, None);
    assert_eq!(
        get(b"set").value,
        OwnedValue::Set(strings(&["x", "10000"]).into_iter().collect())
    );
    assert_eq!(
        get(b"zset").value,
        OwnedValue::SortedSet(
            [("a", 1.5), ("b", f64::INFINITY), ("c", f64::NEG_INFINITY)]
                .map(|(m, x)| (m.as_bytes().to_vec(), OrderedScore(x)))
                .into_iter()
                .collect()
        )
    );
    assert_eq!(
        get(b"hash").value,
        OwnedValue::Hash([(b"f".to_vec(), b"v".to_vec())].into_iter().collect())
    );
    assert_eq!(
        get(b"zipmap").value,
        OwnedValue::Hash(
            [
                (b"a".to_vec(), b"1".to_vec()),
                (b"bb".to_vec(), b"xyz".to_vec())
            ]
            .into_iter()
            .collect()
        )
    );
    assert_eq!(
        get(b"zl-list").value,
        OwnedValue::List(strings(&["p", "3", "q"]))
    );
    assert_eq!(
        get(b"zl-zset").value,
        OwnedValue::SortedSet(
            [
                (b"m".to_vec(), OrderedScore(2.0)),
                (b"n".to_vec(), OrderedScore(2.25))
            ]
            .into_iter()
            .collect()
        )
    );
    assert_eq!(
        get(b"zl-hash").value,
        OwnedValue::Hash(
            [
                (b"f".to_vec(), b"12".to_vec()),
                (b"g".to_vec(), b"w".to_vec())
            ]
            .into_iter()
            .collect()
        )
    );
    assert_eq!(
        get(b"ql").value,
        OwnedValue::List(strings(&["1", "2", "three"]))
    );
}

#[test]
fn nan_scores_are_refused() {
    let body = cat(&[&[TYPE_ZSET], &s(b"z"), &[1], &s(b"a"), &[253]]);
    assert!(matches!(
        decode(&file(10, &body), &mut Dataset::default()),
        Err(DecodeError::Corrupt { .. })
    ));
    let mut body = cat(&[&[TYPE_ZSET_2], &s(b"z"), &[1], &s(b"a")]);
    body.extend_from_slice(&f64::NAN.to_le_bytes());
    assert!(matches!(
        decode(&file(10, &body), &mut Dataset::default()),
        Err(DecodeError::Corrupt { .. })
    ));
}

#[test]
fn empty_collections_are_skipped_like_redis() {
    let body = cat(&[
        &[TYPE_SET],
        &s(b"empty"),
        &[0],
        &[TYPE_STRING],
        &s(b"k"),
        &s(b"v"),
    ]);
    let (ds, summary) = Dataset::from_rdb(&file(10, &body)).unwrap();
    assert_eq!(summary.empty_keys_skipped, 1);
    assert_eq!(summary.keys, 1);
    assert!(ds.get(0, b"empty").is_none());
}

#[test]
fn trailing_bytes_after_the_trailer_are_left_alone() {
    // An RDB-preamble AOF: the AOF commands follow the RDB.
    let mut f = file(10, &cat(&[&[TYPE_STRING], &s(b"k"), &s(b"v")]));
    let rdb_len = f.len();
    f.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    let (_, summary) = Dataset::from_rdb(&f).unwrap();
    assert_eq!(summary.len, rdb_len);
}

#[test]
fn entries_carry_lru_lfu_expiry_db_and_borrow_uncompressed_bytes() {
    let mut body = vec![OPCODE_SELECTDB, 5, OPCODE_RESIZEDB, 1, 1, OPCODE_AUX];
    body.extend_from_slice(&cat(&[&s(b"redis-ver"), &s(b"7.0.15")]));
    body.extend_from_slice(&[OPCODE_EXPIRETIME_MS]);
    body.extend_from_slice(&1_800_000_000_123i64.to_le_bytes());
    body.extend_from_slice(&[OPCODE_IDLE, 0x40, 100, OPCODE_FREQ, 7]);
    body.extend_from_slice(&cat(&[
        &[TYPE_HASH],
        &s(b"h"),
        &[1],
        &s(b"field"),
        &[0xC0, 5],
    ]));
    body.extend_from_slice(&cat(&[&[TYPE_STRING], &s(b"plain"), &s(b"v")]));

    #[derive(Default)]
    struct Recorder {
        events: Vec<String>,
    }
    impl RdbVisitor for Recorder {
        fn aux(&mut self, k: &[u8], v: &[u8]) -> Result<(), VisitError> {
            self.events
                .push(format!("aux {} {}", k.escape_ascii(), v.escape_ascii()));
            Ok(())
        }
        fn select_db(&mut self, db: u64) -> Result<(), VisitError> {
            self.events.push(format!("select {db}"));
            Ok(())
        }
        fn resize_db(&mut self, a: u64, b: u64) -> Result<(), VisitError> {
            self.events.push(format!("resize {a} {b}"));
            Ok(())
        }
        fn entry(&mut self, e: Entry<'_>) -> Result<(), VisitError> {
            let borrowed = matches!(e.key, Cow::Borrowed(_));
            let detail = match &e.value {
                RdbValue::Hash(h) => {
                    assert!(
                        matches!(h[0].0, Cow::Borrowed(_)),
                        "uncompressed field must borrow"
                    );
                    assert!(
                        matches!(h[0].1, Cow::Owned(_)),
                        "integer value is owned text"
                    );
                    format!("{}={}", h[0].0.escape_ascii(), h[0].1.escape_ascii())
                }
                RdbValue::String(v) => v.escape_ascii().to_string(),
                other => format!("{other:?}"),
            };
            self.events.push(format!(
                "entry db={} key={} borrowed={} {} exp={:?} idle={:?} freq={:?} type={} at={}",
                e.db,
                e.key.escape_ascii(),
                borrowed,
                detail,
                e.expire_ms,
                e.lru_idle_secs,
                e.lfu_freq,
                e.rdb_type,
                e.offset
            ));
            Ok(())
        }
    }
    let mut r = Recorder::default();
    decode(&file(10, &body), &mut r).unwrap();
    assert_eq!(
        r.events,
        vec![
            "select 5".to_string(),
            "resize 1 1".into(),
            "aux redis-ver 7.0.15".into(),
            "entry db=5 key=h borrowed=true field=5 exp=Some(1800000000123) idle=Some(100) freq=Some(7) type=4 at=32"
                .into(),
            "entry db=5 key=plain borrowed=true v exp=None idle=None freq=None type=0 at=58".into(),
        ]
    );
}

#[test]
fn visitor_errors_stop_decoding_with_the_entry_offset() {
    struct Refuses;
    impl RdbVisitor for Refuses {
        fn entry(&mut self, e: Entry<'_>) -> Result<(), VisitError> {
            Err(format!("no room for {}", e.key.escape_ascii()).into())
        }
    }
    let body = cat(&[&[OPCODE_SELECTDB, 0], &[TYPE_STRING], &s(b"k"), &s(b"v")]);
    let err = decode(&file(10, &body), &mut Refuses).unwrap_err();
    assert!(
        matches!(err, DecodeError::Visitor { offset: 11, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("no room for k"), "{err}");
}

#[test]
fn corrupt_listpack_inside_a_value_reports_blob_and_inner_offsets() {
    let mut lp = vec![12, 0, 0, 0, 2, 0, 0x81, b'a', 2, 5, 1, 0xFF];
    lp[8] = 3; // wrong backlen
    let body = cat(&[&[TYPE_HASH_LISTPACK], &s(b"h"), &blob(&lp)]);
    match decode(&file(10, &body), &mut Dataset::default()).unwrap_err() {
        DecodeError::CorruptBlob {
            offset,
            what,
            inner_offset,
            ..
        } => {
            assert_eq!((offset, what, inner_offset), (12, "listpack", 6));
        }
        e => panic!("{e}"),
    }
}
