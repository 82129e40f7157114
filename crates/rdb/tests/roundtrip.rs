//! Property tests: whatever the encoder writes, under any limits and
//! options, the decoder reads back exactly, in the encoding the limits
//! dictate. Guards the encoder/decoder pair against drifting apart.

use std::collections::{BTreeMap, BTreeSet};

use ferrokv_rdb::consts::*;
use ferrokv_rdb::{
    Checksum, Dataset, EncoderOptions, EncodingLimits, OrderedScore, OwnedValue, RdbEncoder,
};
use proptest::prelude::*;

fn element() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        (-200i64..200).prop_map(|i| i.to_string().into_bytes()),
        (0usize..300, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        Just(b"-0".to_vec()),
        Just(b"007".to_vec()),
        Just(b"\r\n\0".to_vec()),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
        (-1000i64..1000).prop_map(|i| i as f64),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(4_503_599_627_370_496.0),
    ]
}

fn value() -> impl Strategy<Value = OwnedValue> {
    prop_oneof![
        element().prop_map(OwnedValue::String),
        proptest::collection::vec(element(), 1..40).prop_map(OwnedValue::List),
        proptest::collection::btree_set(element(), 1..30).prop_map(OwnedValue::Set),
        proptest::collection::btree_set(
            any::<i64>().prop_map(|i| i.to_string().into_bytes()),
            1..30
        )
        .prop_map(OwnedValue::Set),
        proptest::collection::btree_set(
            any::<i16>().prop_map(|i| i.to_string().into_bytes()),
            1..30
        )
        .prop_map(OwnedValue::Set),
        proptest::collection::btree_map(element(), score(), 1..30).prop_map(|m| {
            OwnedValue::SortedSet(m.into_iter().map(|(k, s)| (k, OrderedScore(s))).collect())
        }),
        proptest::collection::btree_map(element(), element(), 1..30).prop_map(OwnedValue::Hash),
        // Redis 7.4's hashes with field TTLs (some fields without one).
        proptest::collection::btree_map(
            element(),
            (element(), proptest::option::of(1i64..(1 << 46))),
            1..30
        )
        .prop_map(OwnedValue::HashWithTtls),
    ]
}

type Model = BTreeMap<u64, BTreeMap<Vec<u8>, (OwnedValue, Option<i64>)>>;

fn model() -> impl Strategy<Value = Model> {
    proptest::collection::btree_map(
        0u64..20,
        proptest::collection::btree_map(
            element(),
            (value(), proptest::option::of(any::<i64>())),
            1..8,
        ),
        1..3,
    )
}

fn limits() -> impl Strategy<Value = EncodingLimits> {
    (
        1usize..40,
        1usize..70,
        1usize..40,
        1usize..70,
        1usize..40,
        prop_oneof![Just(-2), Just(-1), 1i32..5],
        prop_oneof![Just(1usize << 30), 10usize..300],
    )
        .prop_map(|(he, hv, ze, zv, se, lsize, plain)| EncodingLimits {
            hash_max_listpack_entries: he,
            hash_max_listpack_value: hv,
            zset_max_listpack_entries: ze,
            zset_max_listpack_value: zv,
            set_max_intset_entries: se,
            list_max_listpack_size: lsize,
            list_packed_threshold: plain,
        })
}

/// The RDB type Redis (and so our encoder) picks for `v` under `l`.
fn expected_type(v: &OwnedValue, l: &EncodingLimits) -> u8 {
    let canonical_int = |m: &[u8]| {
        let s = std::str::from_utf8(m).unwrap_or("x");
        s.parse::<i64>().is_ok_and(|i| i.to_string() == s)
    };
    match v {
        OwnedValue::String(_) => TYPE_STRING,
        OwnedValue::List(_) => TYPE_LIST_QUICKLIST_2,
        OwnedValue::Set(s)
            if s.len() <= l.set_max_intset_entries && s.iter().all(|m| canonical_int(m)) =>
        {
            TYPE_SET_INTSET
        }
        OwnedValue::Set(_) => TYPE_SET,
        OwnedValue::SortedSet(z)
            if z.len() <= l.zset_max_listpack_entries
                && z.keys().all(|m| m.len() <= l.zset_max_listpack_value) =>
        {
            TYPE_ZSET_LISTPACK
        }
        OwnedValue::SortedSet(_) => TYPE_ZSET_2,
        OwnedValue::Hash(h)
            if h.len() <= l.hash_max_listpack_entries
                && h.iter().all(|(f, v)| {
                    f.len() <= l.hash_max_listpack_value && v.len() <= l.hash_max_listpack_value
                }) =>
        {
            TYPE_HASH_LISTPACK
        }
        OwnedValue::Hash(_) => TYPE_HASH,
        OwnedValue::HashWithTtls(h)
            if h.len() <= l.hash_max_listpack_entries
                && h.iter().all(|(f, (v, _))| {
                    f.len() <= l.hash_max_listpack_value && v.len() <= l.hash_max_listpack_value
                }) =>
        {
            TYPE_HASH_LISTPACK_EX
        }
        OwnedValue::HashWithTtls(_) => TYPE_HASH_METADATA,
        OwnedValue::Stream(_) => TYPE_STREAM_LISTPACKS_2,
    }
}

fn encode(model: &Model, options: EncoderOptions) -> Vec<u8> {
    let mut enc = RdbEncoder::new(options);
    let mut out = Vec::new();
    enc.header(&mut out, &[(b"redis-ver", b"7.0.15"), (b"k", b"")]);
    for (db, keys) in model {
        enc.select_db(&mut out, *db);
        enc.resize_db(&mut out, keys.len() as u64, 0);
        for (k, (v, exp)) in keys {
            match v {
                OwnedValue::String(s) => enc.string_entry(&mut out, k, s, *exp),
                OwnedValue::List(l) => enc.list_entry(&mut out, k, l, *exp),
                OwnedValue::Set(s) => enc.set_entry(&mut out, k, s, *exp),
                OwnedValue::SortedSet(z) => {
                    enc.zset_entry(&mut out, k, z.iter().map(|(m, s)| (m, s.0)), *exp)
                }
                OwnedValue::Hash(h) => enc.hash_entry(&mut out, k, h, *exp),
                OwnedValue::HashWithTtls(h) => {
                    let fields: Vec<(&[u8], &[u8], Option<i64>)> =
                        h.iter().map(|(f, (v, at))| (&f[..], &v[..], *at)).collect();
                    enc.hash_ttl_entry(&mut out, k, &fields, *exp)
                }
                OwnedValue::Stream(st) => enc.stream_entry(&mut out, k, st, *exp),
            }
        }
    }
    let crc = enc.finish(&mut out);
    assert_eq!(out[out.len() - 8..], crc.to_le_bytes());
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn everything_encoded_decodes_back_exactly(model in model(), limits in limits(), compression in any::<bool>(), checksum in any::<bool>()) {
        let options = EncoderOptions { compression, checksum, limits: limits.clone(), ..EncoderOptions::default() };
        let rdb = encode(&model, options);
        let (ds, summary) = Dataset::from_rdb(&rdb).unwrap();
        prop_assert_eq!(summary.len, rdb.len());
        if checksum {
            prop_assert!(matches!(summary.checksum, Checksum::Verified(_)));
        } else {
            prop_assert_eq!(summary.checksum, Checksum::Disabled);
        }
        prop_assert_eq!(ds.aux_value(b"redis-ver"), Some(&b"7.0.15"[..]));
        prop_assert_eq!(ds.dbs.len(), model.len());
        for (db, keys) in &model {
            let got = &ds.dbs[db];
            prop_assert_eq!(got.len(), keys.len());
            for (k, (v, exp)) in keys {
                let e = &got[k];
                prop_assert_eq!(&e.value, v);
                prop_assert_eq!(e.expire_ms, *exp);
                prop_assert_eq!(e.rdb_type, expected_type(v, &limits));
            }
        }
    }

    #[test]
    fn lists_split_into_nodes_keep_order(items in proptest::collection::vec(element(), 1..400), fill in prop_oneof![Just(-1), Just(-2), 1i32..10], plain in prop_oneof![Just(1usize << 30), 5usize..100]) {
        let limits = EncodingLimits { list_max_listpack_size: fill, list_packed_threshold: plain, ..EncodingLimits::default() };
        let model: Model = BTreeMap::from([(0, BTreeMap::from([(b"l".to_vec(), (OwnedValue::List(items), None))]))]);
        let rdb = encode(&model, EncoderOptions { limits, ..EncoderOptions::default() });
        let (ds, _) = Dataset::from_rdb(&rdb).unwrap();
        prop_assert_eq!(&ds.get(0, b"l").unwrap().value, &model[&0][&b"l".to_vec()].0);
    }
}

#[test]
fn empty_collections_are_not_written() {
    let mut enc = RdbEncoder::new(EncoderOptions::default());
    let mut out = Vec::new();
    enc.header(&mut out, &[]);
    let before = out.len();
    enc.list_entry(&mut out, b"l", Vec::<Vec<u8>>::new(), Some(5));
    enc.set_entry(&mut out, b"s", &BTreeSet::<Vec<u8>>::new(), None);
    enc.zset_entry(&mut out, b"z", Vec::<(Vec<u8>, f64)>::new(), None);
    enc.hash_entry(&mut out, b"h", Vec::<(Vec<u8>, Vec<u8>)>::new(), None);
    assert_eq!(out.len(), before);
    enc.finish(&mut out);
    let (ds, summary) = Dataset::from_rdb(&out).unwrap();
    assert!(ds.dbs.is_empty());
    assert_eq!(summary.keys, 0);
}
