//! Glob patterns against the real Redis 7.0 and against hostile input
//! (issue #15).
//!
//! Guards two things. First, that ferrokv's matcher gives Redis's answers:
//! a few hundred generated keys go into both servers and a few thousand
//! generated patterns (every special byte, unterminated classes, escapes,
//! signed-char ranges, the nesting limit) must select the same keys through
//! `KEYS`. Second, that no pattern can hang the event loop: the patterns that
//! made the old backtracking matcher exponential go through every entry
//! point (KEYS, SCAN/HSCAN/SSCAN/ZSCAN MATCH, PSUBSCRIBE on PUBLISH, PUBSUB
//! CHANNELS/SHARDCHANNELS, CONFIG GET, COMMAND LIST FILTERBY PATTERN), and
//! each reply, and a second connection's PING, must arrive within a generous
//! timeout (a hang fails the read; no assertion is made on speed).
//!
//! `FERROKV_TESTS_TARGET=redis` runs the hostile half against redis-server.

mod common;

use common::reply::{arr, bulk, bulks, int};
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::time::Duration;

const SEED: u64 = 0x0015_610B;
const KEYS: usize = 300;
const PATTERNS: usize = 3000;
/// Bytes the generated keys are made of: letters in both cases, the bytes
/// with a meaning in patterns, and bytes whose sign differs as a C `char`.
const KEY_BYTES: &[u8] = b"abcAB:1-][\\*?^\x00\x7f\x80\xff";
const PATTERN_BYTES: &[u8] = b"*?[]^-\\abAB:1\x00\xff";

fn key(rng: &mut SmallRng) -> Vec<u8> {
    let len = rng.gen_range(0..=10);
    (0..len)
        .map(|_| KEY_BYTES[rng.gen_range(0..KEY_BYTES.len())])
        .collect()
}

/// A pattern of random pattern bytes, or (half of the time) a key with some
/// bytes turned into wildcards, classes and escapes so that many match.
fn pattern(rng: &mut SmallRng, keys: &[Vec<u8>]) -> Vec<u8> {
    if rng.gen_bool(0.5) {
        let len = rng.gen_range(0..=10);
        return (0..len)
            .map(|_| PATTERN_BYTES[rng.gen_range(0..PATTERN_BYTES.len())])
            .collect();
    }
    let base = &keys[rng.gen_range(0..keys.len())];
    let mut p = Vec::new();
    for &b in base {
        match rng.gen_range(0..100) {
            0..=14 => p.push(b'?'),
            15..=26 => p.push(b'*'),
            27..=31 => p.extend_from_slice(&[b'*', b]),
            32..=37 => p.extend_from_slice(&[b'[', b, b']']),
            38..=41 => {
                let other = KEY_BYTES[rng.gen_range(0..KEY_BYTES.len())];
                p.extend_from_slice(&[b'[', other, b'-', b, b']']);
            }
            42..=44 => p.extend_from_slice(&[b'[', b'^', b, b']']),
            45..=49 => p.extend_from_slice(&[b'\\', b]),
            _ => p.push(b),
        }
    }
    match rng.gen_range(0..10) {
        0 => p.push(b'*'),
        1 => p.push(b'['),
        2 => p.push(b'\\'),
        3 if !p.is_empty() => {
            p.pop();
        }
        _ => {}
    }
    p
}

fn sorted_keys(reply: Frame) -> Vec<Vec<u8>> {
    let Frame::Array(items) = reply else {
        panic!("KEYS answered {reply:?}");
    };
    let mut keys: Vec<Vec<u8>> = items
        .into_iter()
        .map(|f| f.as_bytes().expect("a key").to_vec())
        .collect();
    keys.sort();
    keys
}

/// `KEYS` for each pattern, pipelined in batches.
fn keys_for(r: &mut Raw, patterns: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(patterns.len());
    for batch in patterns.chunks(200) {
        let mut req = Vec::new();
        for p in batch {
            req.extend_from_slice(&Frame::command(&[b"KEYS".as_slice(), p]));
        }
        r.send(&req);
        out.extend(r.read_frames(batch.len()).into_iter().map(sorted_keys));
    }
    out
}

fn load(r: &mut Raw, keys: &[Vec<u8>]) {
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for k in keys {
        mset.extend_from_slice(&[k, b"v"]);
    }
    assert_eq!(r.cmd(&mset), Frame::Simple(b"OK".to_vec()));
}

#[test]
fn keys_selects_what_redis_selects_for_generated_patterns() {
    let mut rng = SmallRng::seed_from_u64(SEED);
    let mut keys: BTreeSet<Vec<u8>> = (0..KEYS).map(|_| key(&mut rng)).collect();
    keys.insert(Vec::new());
    let keys: Vec<Vec<u8>> = keys.into_iter().collect();
    let patterns: Vec<Vec<u8>> = (0..PATTERNS).map(|_| pattern(&mut rng, &keys)).collect();

    let redis = ServerProcess::redis(&[]);
    let ferrokv = ServerProcess::ferrokv(&[]);
    let (mut r, mut f) = (redis.raw(), ferrokv.raw());
    load(&mut r, &keys);
    load(&mut f, &keys);

    let expected = keys_for(&mut r, &patterns);
    let got = keys_for(&mut f, &patterns);
    let mut differing = 0;
    let mut matched_something = 0;
    for ((p, want), have) in patterns.iter().zip(&expected).zip(&got) {
        matched_something += usize::from(!want.is_empty());
        if want != have {
            differing += 1;
            if differing <= 10 {
                eprintln!(
                    "KEYS {:?}: redis {:?}, ferrokv {:?}",
                    String::from_utf8_lossy(p),
                    want.iter()
                        .map(|k| String::from_utf8_lossy(k))
                        .collect::<Vec<_>>(),
                    have.iter()
                        .map(|k| String::from_utf8_lossy(k))
                        .collect::<Vec<_>>()
                );
            }
        }
    }
    assert_eq!(differing, 0, "{differing} of {PATTERNS} patterns differ");
    // The generator must exercise matches, not only misses.
    assert!(
        matched_something > PATTERNS / 4,
        "only {matched_something} patterns matched anything"
    );
}

#[test]
fn keys_honours_redis_nesting_limit_of_1000_star_groups() {
    let redis = ServerProcess::redis(&[]);
    let ferrokv = ServerProcess::ferrokv(&[]);
    let subject = vec![b'a'; 1200];
    let patterns: Vec<Vec<u8>> = [
        [b"a*".repeat(999), b"a".to_vec()].concat(),
        [b"a*".repeat(1000), b"a".to_vec()].concat(),
        [b"a*".repeat(1001), b"a".to_vec()].concat(),
        [b"*a".repeat(1000), b"*".to_vec()].concat(),
        [b"*a".repeat(1000), b"*a".to_vec()].concat(),
        [b"*a".repeat(1000), b"*b".to_vec()].concat(),
    ]
    .to_vec();
    let mut answers = Vec::new();
    for server in [&redis, &ferrokv] {
        let mut c = server.raw();
        load(&mut c, std::slice::from_ref(&subject));
        answers.push(keys_for(&mut c, &patterns));
    }
    let matched: Vec<bool> = answers[0].iter().map(|k| !k.is_empty()).collect();
    assert_eq!(matched, [true, true, false, true, false, false]);
    assert_eq!(answers[0], answers[1]);
}

/// The server the hostile half runs against.
fn target() -> ServerProcess {
    common::reply::own_server(&[])
}

/// A connection whose reads give up after `REPLY_TIMEOUT`: a hung server
/// fails the test instead of hanging it.
fn conn(server: &ServerProcess) -> Raw {
    let r = server.raw();
    r.s.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    r
}

const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// The pattern (20 stars, no `b` in the subject) and a heavier one;
/// both were exponential for the old matcher against `SUBJECT`.
fn attacks() -> Vec<Vec<u8>> {
    vec![
        [b"a*".repeat(20), b"b".to_vec()].concat(),
        [b"a*".repeat(60), b"b".to_vec()].concat(),
        [b"*?".repeat(40), b"*!".to_vec()].concat(),
    ]
}

fn subject() -> Vec<u8> {
    vec![b'a'; 100]
}

/// Sends `args` on `attacker`, then checks that `bystander` gets its PING
/// answered and that the attack's reply is `expected`.
fn answers_promptly(attacker: &mut Raw, bystander: &mut Raw, args: &[&[u8]], expected: Frame) {
    attacker.send(&Frame::command(args));
    assert_eq!(bystander.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert_eq!(attacker.read_frame(), expected, "{:?}", args.first());
}

#[test]
fn exponential_patterns_answer_promptly_through_every_keyspace_entry_point() {
    let server = target();
    let (mut a, mut b) = (conn(&server), conn(&server));
    let s = subject();
    assert_eq!(
        a.cmd(&[&b"SET"[..], &s, b"1"]),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(a.cmd(&[&b"HSET"[..], b"h", &s, b"1"]), int(1));
    assert_eq!(a.cmd(&[&b"SADD"[..], b"s", &s]), int(1));
    assert_eq!(a.cmd(&[&b"ZADD"[..], b"z", b"1", &s]), int(1));
    let empty_scan = arr(vec![bulk("0"), arr(vec![])]);
    for p in attacks() {
        answers_promptly(&mut a, &mut b, &[b"KEYS", &p], arr(vec![]));
        answers_promptly(
            &mut a,
            &mut b,
            &[b"SCAN", b"0", b"MATCH", &p, b"COUNT", b"1000"],
            empty_scan.clone(),
        );
        for (cmd, key) in [
            (&b"HSCAN"[..], &b"h"[..]),
            (b"SSCAN", b"s"),
            (b"ZSCAN", b"z"),
        ] {
            answers_promptly(
                &mut a,
                &mut b,
                &[cmd, key, b"0", b"MATCH", &p],
                empty_scan.clone(),
            );
        }
    }
    // The same shapes still match what they should.
    let star_tail = [b"a*".repeat(60), b"a".to_vec()].concat();
    answers_promptly(
        &mut a,
        &mut b,
        &[b"KEYS", &star_tail],
        arr(vec![Frame::Bulk(s)]),
    );
}

#[test]
fn exponential_patterns_answer_promptly_through_pubsub() {
    let server = target();
    let (mut subscriber, mut b) = (conn(&server), conn(&server));
    let mut publisher = conn(&server);
    let s = subject();
    let matching = [b"a*".repeat(60), b"a".to_vec()].concat();
    let mut patterns = attacks();
    patterns.push(matching.clone());
    for (i, p) in patterns.iter().enumerate() {
        let count = i64::try_from(i + 1).unwrap();
        let reply = subscriber.cmd(&[&b"PSUBSCRIBE"[..], p]);
        assert_eq!(
            reply,
            arr(vec![bulk("psubscribe"), Frame::Bulk(p.clone()), int(count)])
        );
    }
    // Only the last pattern matches the channel.
    answers_promptly(&mut publisher, &mut b, &[b"PUBLISH", &s, b"hello"], int(1));
    assert_eq!(
        subscriber.read_frame(),
        arr(vec![
            bulk("pmessage"),
            Frame::Bulk(matching),
            Frame::Bulk(s.clone()),
            bulk("hello")
        ])
    );

    // PUBSUB CHANNELS / SHARDCHANNELS over a channel named like the subject.
    let mut listener = conn(&server);
    assert_eq!(
        listener.cmd(&[&b"SUBSCRIBE"[..], &s]),
        arr(vec![bulk("subscribe"), Frame::Bulk(s.clone()), int(1)])
    );
    let mut shard = conn(&server);
    assert_eq!(
        shard.cmd(&[&b"SSUBSCRIBE"[..], &s]),
        arr(vec![bulk("ssubscribe"), Frame::Bulk(s.clone()), int(1)])
    );
    for p in attacks() {
        answers_promptly(
            &mut publisher,
            &mut b,
            &[b"PUBSUB", b"CHANNELS", &p],
            arr(vec![]),
        );
        answers_promptly(
            &mut publisher,
            &mut b,
            &[b"PUBSUB", b"SHARDCHANNELS", &p],
            arr(vec![]),
        );
    }
}

#[test]
fn exponential_patterns_answer_promptly_through_config_get_and_command_list() {
    let server = target();
    let (mut a, mut b) = (conn(&server), conn(&server));
    // Names are short, so the shapes that hurt are many stars each
    // followed by a byte every name has.
    let hostile: Vec<Vec<u8>> = vec![
        [b"*?".repeat(40), b"*!".to_vec()].concat(),
        [b"*-".repeat(2), b"*?".repeat(30), b"*!".to_vec()].concat(),
        [b"*e".repeat(30), b"*!".to_vec()].concat(),
    ];
    for p in &hostile {
        answers_promptly(&mut a, &mut b, &[b"CONFIG", b"GET", p], arr(vec![]));
        answers_promptly(
            &mut a,
            &mut b,
            &[b"COMMAND", b"LIST", b"FILTERBY", b"PATTERN", p],
            arr(vec![]),
        );
    }
    // Case-insensitive, as in Redis.
    assert_eq!(
        a.cmd(&["CONFIG", "GET", "MAXMEMORY-P*"]),
        bulks(&["maxmemory-policy", "noeviction"])
    );
}

#[test]
fn a_bare_star_pattern_selects_no_empty_channel_as_in_redis() {
    // Redis's matcher never matches an empty subject except with an empty
    // pattern; only KEYS and SCAN answer a bare `*` without it.
    let server = target();
    let (mut direct, mut by_pattern, mut c) = (conn(&server), conn(&server), conn(&server));
    assert_eq!(
        direct.cmd(&["SUBSCRIBE", ""]),
        arr(vec![bulk("subscribe"), bulk(""), int(1)])
    );
    assert_eq!(
        by_pattern.cmd(&["PSUBSCRIBE", "*"]),
        arr(vec![bulk("psubscribe"), bulk("*"), int(1)])
    );
    assert_eq!(c.cmd(&["PUBSUB", "CHANNELS", "*"]), arr(vec![]));
    assert_eq!(c.cmd(&["PUBSUB", "CHANNELS"]), bulks(&[""]));
    assert_eq!(c.cmd(&["PUBLISH", "", "one"]), int(1));
    assert_eq!(c.cmd(&["PUBLISH", "a", "two"]), int(1));
    assert_eq!(
        direct.read_frame(),
        arr(vec![bulk("message"), bulk(""), bulk("one")])
    );
    assert_eq!(
        by_pattern.read_frame(),
        arr(vec![bulk("pmessage"), bulk("*"), bulk("a"), bulk("two")])
    );
    // And the empty key is in `KEYS *` but not in `KEYS **`.
    assert_eq!(c.cmd(&["SET", "", "v"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(c.cmd(&["KEYS", "*"]), bulks(&[""]));
    assert_eq!(c.cmd(&["KEYS", "**"]), arr(vec![]));
}
