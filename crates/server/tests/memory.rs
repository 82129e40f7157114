//! Guards MEMORY against Redis 7.0.15: HELP's text, every error, USAGE
//! (nil for a missing key, SAMPLES parsing, figures that follow the data:
//! a value's bytes are counted, sampling estimates a big table), STATS'
//! fields in Redis's order (RESP2 pairs and a RESP3 map), DOCTOR, PURGE,
//! MALLOC-STATS.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run them against the real
//! `redis-server`; the figures are checked as ranges both servers meet.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::Raw;
use ferrokv_resp::Frame;

fn int_of(f: Frame) -> i64 {
    match f {
        Frame::Integer(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn text_of(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Frame::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

#[test]
fn help_and_errors_are_redis_s() {
    let p = own_server(&[]);
    let mut r = p.raw();
    let help = r.cmd(&["MEMORY", "HELP"]);
    let lines: Vec<String> = match help {
        Frame::Array(v) => v
            .iter()
            .map(|l| match l {
                Frame::Simple(s) => String::from_utf8_lossy(s).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        lines[0],
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(lines.len(), 14);
    assert_eq!(lines[9], "USAGE <key> [SAMPLES <count>]");
    assert_eq!(lines[13], "    Prints this help.");
    for (args, want) in [
        (
            &["MEMORY"][..],
            "ERR wrong number of arguments for 'memory' command",
        ),
        (
            &["MEMORY", "FOO"],
            "ERR unknown subcommand 'FOO'. Try MEMORY HELP.",
        ),
        (
            &["MEMORY", "USAGE"],
            "ERR wrong number of arguments for 'memory|usage' command",
        ),
        (
            &["MEMORY", "USAGE", "k", "SAMPLES", "-1"],
            "ERR syntax error",
        ),
        (
            &["MEMORY", "USAGE", "k", "SAMPLES", "x"],
            "ERR value is not an integer or out of range",
        ),
        (&["MEMORY", "USAGE", "k", "SAMPLES"], "ERR syntax error"),
        (&["MEMORY", "USAGE", "k", "FOO"], "ERR syntax error"),
        (
            &["MEMORY", "STATS", "x"],
            "ERR wrong number of arguments for 'memory|stats' command",
        ),
        (
            &["MEMORY", "DOCTOR", "x"],
            "ERR wrong number of arguments for 'memory|doctor' command",
        ),
    ] {
        assert_eq!(r.cmd(args), err(want), "{args:?}");
    }
    // Options are checked before the key is looked up.
    assert_eq!(r.cmd(&["MEMORY", "USAGE", "missing"]), nil());
    assert_eq!(
        r.cmd(&["MEMORY", "USAGE", "missing", "SAMPLES", "0"]),
        nil()
    );
    assert_eq!(r.cmd(&["MEMORY", "PURGE"]), ok());
}

fn fill_hash(r: &mut Raw, key: &str, fields: usize, value_len: usize) {
    let v = "v".repeat(value_len);
    for chunk in (0..fields).collect::<Vec<_>>().chunks(100) {
        let mut args = vec!["HSET".to_string(), key.to_string()];
        for i in chunk {
            args.push(format!("field:{i:06}"));
            args.push(v.clone());
        }
        r.cmd(&args);
    }
}

#[test]
fn usage_follows_the_data() {
    let p = own_server(&[]);
    let mut r = p.raw();
    r.cmd(&["FLUSHALL"]);
    r.cmd(&["SET", "small", "1"]);
    let small = int_of(r.cmd(&["MEMORY", "USAGE", "small"]));
    assert!((16..=200).contains(&small), "small {small}");
    r.cmd(&["SET", "big", &"x".repeat(10_000)]);
    let big = int_of(r.cmd(&["MEMORY", "USAGE", "big"]));
    assert!((10_000..=12_000).contains(&big), "big {big}");
    // A table of 2000 fields of ~110 bytes each: about 220 KB of data.
    fill_hash(&mut r, "h", 2000, 100);
    let all = int_of(r.cmd(&["MEMORY", "USAGE", "h", "SAMPLES", "0"]));
    let sampled = int_of(r.cmd(&["MEMORY", "USAGE", "h"]));
    let few = int_of(r.cmd(&["MEMORY", "USAGE", "h", "SAMPLES", "1"]));
    for (what, n) in [("all", all), ("default", sampled), ("one sample", few)] {
        assert!((220_000..=600_000).contains(&n), "{what}: {n}");
    }
    // Fields of equal size: a sample is as good as all of them.
    assert!((all - sampled).abs() * 20 < all, "{all} vs {sampled}");
    // An expired key not yet removed is still sized, as Redis's dictFind
    // finds it; once gone, nil.
    r.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    r.cmd(&["SET", "gone", "v", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(int_of(r.cmd(&["MEMORY", "USAGE", "gone"])) > 0);
    r.cmd(&["GET", "gone"]);
    assert_eq!(r.cmd(&["MEMORY", "USAGE", "gone"]), nil());
    r.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    // Every type answers.
    r.cmd(&["RPUSH", "l", "a", "b"]);
    r.cmd(&["SADD", "s", "a", "b"]);
    r.cmd(&["ZADD", "z", "1", "a"]);
    r.cmd(&["XADD", "x", "1-1", "f", "v"]);
    for k in ["l", "s", "z", "x"] {
        assert!(int_of(r.cmd(&["MEMORY", "USAGE", k])) > 0, "{k}");
    }
}

/// The field names of MEMORY STATS, nested `db.N` maps flattened.
fn stats_names(f: &Frame) -> Vec<String> {
    let pairs: Vec<(Frame, Frame)> = match f {
        Frame::Array(v) => v.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect(),
        Frame::Map(m) => m.clone(),
        other => panic!("{other:?}"),
    };
    let mut out = Vec::new();
    for (k, v) in pairs {
        let k = text_of(&k);
        if k.starts_with("db.") {
            for n in stats_names(&v) {
                out.push(format!("{k}/{n}"));
            }
        } else {
            out.push(k);
        }
    }
    out
}

#[test]
fn stats_has_redis_s_fields_in_order() {
    let p = own_server(&[]);
    let mut r = p.raw();
    r.cmd(&["FLUSHALL"]);
    r.cmd(&["SET", "a", "1"]);
    r.cmd(&["SELECT", "2"]);
    r.cmd(&["SET", "b", "1"]);
    let names = stats_names(&r.cmd(&["MEMORY", "STATS"]));
    let want = [
        "peak.allocated",
        "total.allocated",
        "startup.allocated",
        "replication.backlog",
        "clients.slaves",
        "clients.normal",
        "cluster.links",
        "aof.buffer",
        "lua.caches",
        "functions.caches",
        "db.0/overhead.hashtable.main",
        "db.0/overhead.hashtable.expires",
        "db.0/overhead.hashtable.slot-to-keys",
        "db.2/overhead.hashtable.main",
        "db.2/overhead.hashtable.expires",
        "db.2/overhead.hashtable.slot-to-keys",
        "overhead.total",
        "keys.count",
        "keys.bytes-per-key",
        "dataset.bytes",
        "dataset.percentage",
        "peak.percentage",
        "allocator.allocated",
        "allocator.active",
        "allocator.resident",
        "allocator-fragmentation.ratio",
        "allocator-fragmentation.bytes",
        "allocator-rss.ratio",
        "allocator-rss.bytes",
        "rss-overhead.ratio",
        "rss-overhead.bytes",
        "fragmentation",
        "fragmentation.bytes",
    ];
    assert_eq!(names, want);
    // RESP3: a map, with doubles.
    r.cmd(&["HELLO", "3"]);
    let m = r.cmd(&["MEMORY", "STATS"]);
    let Frame::Map(pairs) = &m else {
        panic!("{m:?}")
    };
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| text_of(k) == name)
            .unwrap()
            .1
            .clone()
    };
    assert_eq!(get("keys.count"), int(2));
    assert!(
        matches!(get("dataset.percentage"), Frame::Double(_)),
        "{m:?}"
    );
    // The doctor talks to Sam; the allocator has something to say.
    let doctor = r.cmd(&["MEMORY", "DOCTOR"]);
    assert!(text_of(&doctor).contains("Sam"), "{doctor:?}");
    let stats = r.cmd(&["MEMORY", "MALLOC-STATS"]);
    assert!(!text_of(&stats).is_empty());
}
