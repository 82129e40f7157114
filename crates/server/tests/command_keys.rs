//! Guards the key specifications against redis-server 7.0: `COMMAND INFO`'s
//! key specs of every command and subcommand both servers have are
//! Redis's, and `COMMAND GETKEYS` and `COMMAND GETKEYSANDFLAGS` answer the
//! same as Redis (keys, their flags, and the errors) for generated
//! argument lists of every command — index, keyword and keynum searches,
//! ranges with limits, numkeys out of range, keywords at the end, and the
//! commands whose keys Redis finds by code (SORT, SORT_RO, MIGRATE, SET,
//! BITFIELD, the numkeys families).
//!
//! Needs both servers at once: ferrokv only (`FERROKV_TESTS_TARGET=redis`
//! skips it).
mod common;
use common::reply::against_redis;
use common::ServerProcess;
use ferrokv_resp::Frame;
use std::collections::BTreeMap;

/// name -> the key-specs element of its `COMMAND INFO` entry (index 8),
/// subcommands included.
fn key_specs(r: &mut common::Raw) -> BTreeMap<String, Frame> {
    let Frame::Array(all) = r.cmd(&["COMMAND"]) else {
        panic!("COMMAND")
    };
    let mut out = BTreeMap::new();
    fn walk(out: &mut BTreeMap<String, Frame>, e: &Frame) {
        let Frame::Array(f) = e else { panic!("entry") };
        let Frame::Bulk(name) = &f[0] else {
            panic!("name")
        };
        out.insert(String::from_utf8_lossy(name).into_owned(), f[8].clone());
        if let Frame::Array(subs) = &f[9] {
            for s in subs {
                walk(out, s);
            }
        }
    }
    for e in &all {
        walk(&mut out, e);
    }
    out
}

#[test]
fn command_info_key_specs_are_redis_s() {
    if against_redis() {
        return;
    }
    let f = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let ours = key_specs(&mut f.raw());
    let theirs = key_specs(&mut redis.raw());
    let mut compared = 0;
    for (name, spec) in &ours {
        if let Some(t) = theirs.get(name) {
            assert_eq!(spec, t, "{name}");
            compared += 1;
        }
    }
    assert!(compared > 200, "only {compared} commands in common");
}

const POOL: &[&str] = &[
    "k1",
    "k2",
    "k3",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "99999999999",
    "x",
    "STORE",
    "STOREDIST",
    "KEYS",
    "STREAMS",
    "GET",
    "BY",
    "LIMIT",
    "get",
    "set",
    "INCRBY",
    "OVERFLOW",
    "",
    "WEIGHTS",
    "FROMMEMBER",
    "COUNT",
    "i8",
    "#1",
];

#[test]
fn getkeys_and_getkeysandflags_answer_as_redis_for_every_command() {
    if against_redis() {
        return;
    }
    let f = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let mut fr = f.raw();
    let mut rr = redis.raw();
    let names: Vec<String> = key_specs(&mut fr).into_keys().collect();
    let theirs = key_specs(&mut rr);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut runs = 0;
    // ZRANK and ZREVRANK take a fourth word since Redis 7.2 (WITHSCORE):
    // with another count of words than 7.0's arity (3) they answer as 7.2
    // does (docs/compatibility.md; 7.4's COMMAND GETKEYS words its own
    // errors otherwise), so only 7.0's count is compared for them.
    let newer_arity = ["zrank", "zrevrank"];
    for name in names.iter().filter(|n| theirs.contains_key(*n)) {
        let words: Vec<&str> = name.split('|').collect();
        for case in 0..40 {
            let mut argv: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            let extra = (case % 10) + (next() % 3) as usize;
            for _ in 0..extra {
                argv.push(POOL[(next() % POOL.len() as u64) as usize].to_string());
            }
            if newer_arity.contains(&name.as_str()) && argv.len() != 3 {
                continue;
            }
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                let mut a = vec!["COMMAND".to_string(), sub.to_string()];
                a.extend(argv.iter().cloned());
                let ours = fr.cmd(&a);
                let want = rr.cmd(&a);
                assert_eq!(ours, want, "{a:?}");
                runs += 1;
            }
        }
    }
    assert!(runs > 10_000, "{runs}");
    // Fixed cases: each search kind and the code-found commands.
    for a in [
        &["SORT", "k", "BY", "w*", "STORE", "d", "GET", "#"][..],
        &["SORT_RO", "k", "GET", "x"],
        &["MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"],
        &["MIGRATE", "h", "1", "a", "0", "5"],
        &["SET", "k", "v", "GET"],
        &["SET", "k", "v", "EX", "1"],
        &["BITFIELD", "k", "GET", "u8", "0"],
        &["BITFIELD", "k", "SET", "u8", "0", "1"],
        &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
        &["ZUNIONSTORE", "d", "0", "a"],
        &["GEORADIUS", "k", "0", "0", "1", "m", "STORE", "d"],
        &["EVAL", "s", "2", "a", "b", "c"],
        &["EVAL", "s", "0"],
        &["LMPOP", "2", "a", "b", "LEFT"],
        &["OBJECT", "ENCODING", "k"],
        &["OBJECT", "NOSUCH", "k"],
        &["PING"],
        &["SPUBLISH", "ch", "m"],
        &["MSET", "a", "1", "b", "2"],
    ] {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let mut c = vec!["COMMAND", sub];
            c.extend_from_slice(a);
            assert_eq!(fr.cmd(&c), rr.cmd(&c), "{c:?}");
        }
    }
}
