//! Guards pub/sub and keyspace notifications: the subscribed-mode rules and
//! confirmations of RESP2, RESP3 push frames, delivery across connections
//! (channels, patterns, shard channels), PUBSUB introspection, the
//! `pubsub` output-buffer limit, and the keyspace events of the string and
//! generic commands — the same events, in the same order, as the real
//! redis-server publishes, expiry by the active cycle included.
mod common;
#[allow(unused_imports)]
use common::reply::*;

use common::{wait_for, ServerProcess};
use ferrokv_resp::Frame;
use std::time::Duration;

/// A connection that reads frames through a buffer, so that several
/// messages arriving in one segment are all seen.
struct Subscriber {
    raw: common::Raw,
    buf: Vec<u8>,
}

impl Subscriber {
    fn new(s: &ServerProcess) -> Subscriber {
        Subscriber {
            raw: s.raw(),
            buf: Vec::new(),
        }
    }

    fn send(&mut self, args: &[&str]) {
        self.raw.send(&Frame::command(args));
    }

    fn next(&mut self) -> Frame {
        use std::io::Read;
        let mut chunk = [0u8; 65536];
        loop {
            match Frame::decode(&self.buf) {
                Ok((f, n)) => {
                    self.buf.drain(..n);
                    return f;
                }
                Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
                Err(e) => panic!("bad frame {e:?}"),
            }
            let n = self.raw.s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Runs `script` on one connection; each reply's exact bytes.
fn replies(s: &ServerProcess, script: &[&str]) -> Vec<String> {
    let mut raw = s.raw();
    script
        .iter()
        .map(|line| {
            let args: Vec<&str> = line.split(' ').collect();
            let (_, bytes) = raw.try_cmd_bytes(&args).unwrap();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let text = match text.split_once("$2\r\nid\r\n:") {
                Some((head, rest)) => format!("{head}id{}", &rest[rest.find('\r').unwrap()..]),
                None => text,
            };
            format!("{line} => {text}")
        })
        .collect()
}

#[test]
fn subscribed_mode_replies_match_redis_byte_for_byte() {
    // Every command here answers with exactly one frame (one channel per
    // (un)subscription), so reply-by-reply comparison is exact.
    let script = [
        "unsubscribe",
        "punsubscribe",
        "unsubscribe a",
        "subscribe a",
        "subscribe b",
        "subscribe a",
        "ping",
        "ping x",
        "get a",
        "set a 1",
        "multi",
        "psubscribe p*",
        "punsubscribe q*",
        "unsubscribe b",
        "punsubscribe p*",
        "ssubscribe s",
        "ping",
        "sunsubscribe s",
        "unsubscribe a",
        "ping",
        "pubsub numpat",
        "hello 3",
        "subscribe a",
        "get a",
        "ping",
        "publish a hi",
        "pubsub numsub a b",
        "pubsub channels",
        "pubsub channels x*",
        "pubsub shardnumsub a",
        "pubsub help",
        "pubsub numpat x",
        "pubsub foo",
        "unsubscribe",
        "unsubscribe",
        "punsubscribe",
        "sunsubscribe",
        "ssubscribe x",
        "spublish x m",
        "sunsubscribe",
        "reset",
        "ping",
    ];
    let ours = replies(&ServerProcess::ferrokv(&[]), &script);
    let redis = replies(&ServerProcess::redis(&[]), &script);
    for (a, b) in ours.iter().zip(&redis) {
        assert_eq!(a, b);
    }
}

/// Everything that arrives on `raw` within a short while.
fn drain(raw: &mut common::Raw) -> Vec<u8> {
    use std::io::Read;
    raw.s
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    while let Ok(n) = raw.s.read(&mut chunk) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    raw.s.set_read_timeout(None).unwrap();
    out
}

#[test]
fn pushes_reach_a_client_whose_replies_are_off() {
    // Redis writes pub/sub confirmations and messages as pushes, which
    // CLIENT REPLY OFF|SKIP does not silence, in RESP2 as in RESP3; the
    // command replies around them are dropped.
    let run = |s: &ServerProcess| -> Vec<String> {
        let mut got = Vec::new();
        for proto in ["2", "3"] {
            let (mut a, mut b) = (s.raw(), s.raw());
            if proto == "3" {
                a.cmd(&["HELLO", "3"]);
            }
            for args in [
                &["CLIENT", "REPLY", "OFF"][..],
                &["SUBSCRIBE", "ch"],
                &["PSUBSCRIBE", "c*"],
                &["PING"],
            ] {
                a.send(&Frame::command(args));
            }
            got.push(String::from_utf8_lossy(&drain(&mut a)).into_owned());
            b.cmd(&["PUBLISH", "ch", "hello"]);
            got.push(String::from_utf8_lossy(&drain(&mut a)).into_owned());
            if proto == "3" {
                // Its own PUBLISH: the message stays, the reply goes.
                for args in [
                    &["CLIENT", "REPLY", "ON"][..],
                    &["CLIENT", "REPLY", "SKIP"],
                    &["PUBLISH", "ch", "x"],
                    &["PING"],
                ] {
                    a.send(&Frame::command(args));
                }
                got.push(String::from_utf8_lossy(&drain(&mut a)).into_owned());
            }
        }
        got
    };
    let ours = run(&ServerProcess::ferrokv(&[]));
    let redis = run(&ServerProcess::redis(&[]));
    assert_eq!(ours, redis);
    assert!(ours[1].contains("hello"), "{ours:?}");
}

#[test]
fn messages_reach_channel_and_pattern_subscribers_on_other_connections() {
    let s = ServerProcess::ferrokv(&[]);
    let mut sub = Subscriber::new(&s);
    let mut psub = Subscriber::new(&s);
    let mut resp3 = Subscriber::new(&s);
    let mut publisher = s.raw();
    sub.send(&["subscribe", "news", "sport"]);
    sub.next();
    sub.next();
    psub.send(&["psubscribe", "n*"]);
    psub.next();
    resp3.send(&["hello", "3"]);
    resp3.next();
    resp3.send(&["subscribe", "news"]);
    resp3.next();

    assert_eq!(
        publisher.cmd(&["publish", "news", "hello"]),
        Frame::Integer(3)
    );
    assert_eq!(
        sub.next(),
        Frame::Array(vec![bulk("message"), bulk("news"), bulk("hello")])
    );
    assert_eq!(
        psub.next(),
        Frame::Array(vec![
            bulk("pmessage"),
            bulk("n*"),
            bulk("news"),
            bulk("hello")
        ])
    );
    assert_eq!(
        resp3.next(),
        Frame::Push(vec![bulk("message"), bulk("news"), bulk("hello")])
    );
    // RESP3: ordinary commands still work while subscribed.
    resp3.send(&["set", "k", "v"]);
    assert_eq!(resp3.next(), Frame::Simple("OK".into()));
    assert_eq!(publisher.cmd(&["publish", "other", "x"]), Frame::Integer(0));
    assert_eq!(publisher.cmd(&["publish", "sport", "x"]), Frame::Integer(1));
    assert_eq!(
        sub.next(),
        Frame::Array(vec![bulk("message"), bulk("sport"), bulk("x")])
    );

    assert_eq!(
        publisher.cmd(&["pubsub", "numsub", "news", "sport", "none"]),
        Frame::Array(vec![
            bulk("news"),
            Frame::Integer(2),
            bulk("sport"),
            Frame::Integer(1),
            bulk("none"),
            Frame::Integer(0)
        ])
    );
    assert_eq!(publisher.cmd(&["pubsub", "numpat"]), Frame::Integer(1));
    let Frame::Array(mut chans) = publisher.cmd(&["pubsub", "channels"]) else {
        panic!()
    };
    chans.sort_by_key(|f| format!("{f:?}"));
    assert_eq!(chans, vec![bulk("news"), bulk("sport")]);
    assert_eq!(
        publisher.cmd(&["pubsub", "channels", "s*"]),
        Frame::Array(vec![bulk("sport")])
    );
    assert_eq!(
        s.info_field("stats", "pubsub_channels").as_deref(),
        Some("2")
    );
    assert_eq!(
        s.info_field("stats", "pubsub_patterns").as_deref(),
        Some("1")
    );
    let Frame::Bulk(list) = publisher.cmd(&["client", "list", "type", "pubsub"]) else {
        panic!()
    };
    let list = String::from_utf8(list).unwrap();
    assert_eq!(list.lines().count(), 3, "{list}");
    let subscriber = format!("{} db=0 sub=2 psub=0 ssub=0", common::client_flags("P"));
    assert!(list.contains(&subscriber), "{list}");
    assert!(list.contains("sub=0 psub=1 ssub=0"), "{list}");

    // A closed subscriber leaves the registry.
    drop(sub);
    wait_for("the closed subscriber to be forgotten", 5, || {
        (publisher.cmd(&["pubsub", "numsub", "sport"])
            == Frame::Array(vec![bulk("sport"), Frame::Integer(0)]))
        .then_some(())
    });
    // Shard channels are their own namespace.
    let mut ssub = Subscriber::new(&s);
    ssub.send(&["ssubscribe", "news"]);
    ssub.next();
    assert_eq!(publisher.cmd(&["spublish", "news", "s"]), Frame::Integer(1));
    assert_eq!(
        ssub.next(),
        Frame::Array(vec![bulk("smessage"), bulk("news"), bulk("s")])
    );
}

#[test]
fn client_kill_type_pubsub_closes_only_subscribers() {
    let s = ServerProcess::ferrokv(&[]);
    let mut sub = Subscriber::new(&s);
    sub.send(&["psubscribe", "*"]);
    sub.next();
    let mut other = s.raw();
    let mut admin = s.raw();
    assert_eq!(
        admin.cmd(&["client", "kill", "type", "pubsub"]),
        Frame::Integer(1)
    );
    assert!(sub.raw.is_closed());
    assert_eq!(other.cmd(&["ping"]), Frame::Simple("PONG".into()));
    assert_eq!(
        admin.cmd(&["client", "kill", "type", "normal", "skipme", "yes"]),
        Frame::Integer(1)
    );
    assert!(other.is_closed());
}

#[test]
fn a_subscriber_past_the_pubsub_output_limit_is_disconnected() {
    let s = ServerProcess::ferrokv(&["--client-output-buffer-limit", "pubsub 64kb 0 0"]);
    let mut sub = s.raw();
    sub.send(&Frame::command(&["subscribe", "flood"]));
    sub.read_frames(1);
    // The subscriber does not read: once the socket buffers are full,
    // its output buffer passes 64 KB.
    let mut publisher = s.raw();
    let payload = "x".repeat(1 << 20);
    for _ in 0..64 {
        publisher.cmd(&["publish", "flood", &payload]);
    }
    wait_for("the subscriber to be dropped", 5, || {
        (publisher.cmd(&["pubsub", "numsub", "flood"])
            == Frame::Array(vec![bulk("flood"), Frame::Integer(0)]))
        .then_some(())
    });
    assert_eq!(
        s.info_field("stats", "client_output_buffer_limit_disconnections")
            .as_deref(),
        Some("1")
    );
    // A normal client's limit is not the pubsub one.
    assert_eq!(publisher.cmd(&["ping"]), Frame::Simple("PONG".into()));
}

/// Subscribes to every keyspace and keyevent channel, runs `script` on a
/// second connection, and returns what the subscriber got.
fn keyspace_events(s: &ServerProcess, flags: &str, script: &[&[&str]]) -> Vec<String> {
    let mut admin = s.raw();
    admin.cmd(&["config", "set", "notify-keyspace-events", flags]);
    let mut sub = Subscriber::new(s);
    sub.send(&["psubscribe", "__key*__:*"]);
    sub.next();
    for cmd in script {
        admin.cmd(cmd);
    }
    // A marker published last: everything before it has arrived.
    admin.cmd(&["publish", "__keyspace@0__:end", "end"]);
    let mut got = Vec::new();
    loop {
        let Frame::Array(parts) = sub.next() else {
            panic!("not a message")
        };
        let text: Vec<String> = parts[2..]
            .iter()
            .map(|p| match p {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        if text[1] == "end" {
            return got;
        }
        got.push(text.join(" "));
    }
}

#[test]
fn keyspace_events_are_those_redis_publishes() {
    let script: &[&[&str]] = &[
        &["set", "s", "1"],
        &["set", "s", "2", "ex", "100"],
        &["setnx", "s", "3"],
        &["setnx", "t", "3"],
        &["setex", "u", "100", "v"],
        &["psetex", "u", "100000", "v"],
        &["mset", "a", "1", "b", "2"],
        &["msetnx", "c", "1", "d", "2"],
        &["getset", "a", "9"],
        &["append", "a", "x"],
        &["append", "new", "x"],
        &["setrange", "a", "1", "yy"],
        &["setrange", "nothing", "0", ""],
        &["incr", "n"],
        &["incrby", "n", "5"],
        &["decr", "n"],
        &["decrby", "n", "2"],
        &["incrbyfloat", "f", "1.5"],
        &["incr", "a"],
        &["getex", "b", "px", "100000"],
        &["getex", "b", "persist"],
        &["getex", "b"],
        &["getdel", "b"],
        &["expire", "c", "100"],
        &["pexpire", "c", "0", "gt"],
        &["persist", "c"],
        &["persist", "c"],
        &["expireat", "d", "1"],
        &["rename", "c", "r"],
        &["renamenx", "r", "a"],
        &["copy", "r", "r2"],
        &["copy", "r", "r3", "db", "2"],
        &["move", "r2", "3"],
        &["del", "r", "missing", "t"],
        &["unlink", "u"],
        &["get", "missing"],
        &["exists", "missing"],
        &["hset", "h", "f", "1", "g", "2"],
        &["hset", "h", "f", "3"],
        &["hsetnx", "h", "f", "4"],
        &["hsetnx", "h", "n", "4"],
        &["hmset", "h2", "a", "1"],
        &["hincrby", "h", "f", "2"],
        &["hincrby", "h3", "f", "2"],
        &["hincrbyfloat", "h", "x", "1.5"],
        &["hdel", "h", "nope"],
        &["hdel", "h", "f", "g"],
        &["hdel", "h2", "a"],
        &["hget", "h", "n"],
        &["sadd", "s1", "a", "b", "c"],
        &["sadd", "s1", "a"],
        &["sadd", "s2", "c", "d"],
        &["srem", "s1", "zz"],
        &["srem", "s1", "a"],
        &["smove", "s1", "s3", "b"],
        &["smove", "s1", "s2", "c"],
        &["smove", "s2", "s2", "c"],
        &["sinterstore", "s4", "s2", "s3"],
        &["sunionstore", "s4", "s2", "s3"],
        &["sunionstore", "s4", "s4"],
        &["sdiffstore", "s4", "s2", "s2"],
        &["sdiffstore", "s4", "s2", "s2"],
        &["sadd", "p", "1", "2", "3"],
        &["spop", "p", "0"],
        &["spop", "p", "1"],
        &["spop", "p", "5"],
        &["sadd", "p", "1"],
        &["spop", "p"],
        &["sismember", "p", "1"],
        &["flushall"],
    ];
    for flags in ["KEA", "Kg$", "El", "KEAmn", "Ex", "Khs", "Kgn"] {
        let ours = keyspace_events(&ServerProcess::ferrokv(&[]), flags, script);
        let redis = keyspace_events(&ServerProcess::redis(&[]), flags, script);
        if ours != redis {
            let at = ours
                .iter()
                .zip(&redis)
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(redis.len()));
            let from = at.saturating_sub(4);
            panic!(
                "flags {flags}: events differ at #{at}\nferrokv: {:?}\nredis:   {:?}",
                &ours[from..(at + 4).min(ours.len())],
                &redis[from..(at + 4).min(redis.len())]
            );
        }
    }
}

#[test]
fn keymiss_events_come_from_the_lookups_redis_counts_as_misses() {
    let script: &[&[&str]] = &[
        &["get", "m1"],
        &["set", "m2", "v", "get"],
        &["set", "m3", "v", "nx"],
        &["exists", "m4", "m3"],
        &["type", "m5"],
        &["ttl", "m6"],
        &["pttl", "m7"],
        &["expiretime", "m8"],
        &["strlen", "m9"],
        &["getrange", "m10", "0", "1"],
        &["mget", "m11", "m3", "m12"],
        &["getex", "m13"],
        &["getdel", "m14"],
        &["incr", "m15"],
        &["append", "m16", "x"],
        &["lcs", "m17", "m3"],
        &["object", "encoding", "m18"],
        &["touch", "m19"],
        &["copy", "m20", "m21"],
        &["rename", "m22", "m23"],
        &["expire", "m24", "10"],
        &["persist", "m25"],
        &["hget", "m26", "f"],
        &["hgetall", "m27"],
        &["hexists", "m28", "f"],
        &["smembers", "m29"],
        &["sismember", "m30", "x"],
        &["scard", "m31"],
        &["sinter", "m3", "m32"],
        &["srandmember", "m33"],
    ];
    let ours = keyspace_events(&ServerProcess::ferrokv(&[]), "KEm", script);
    let redis = keyspace_events(&ServerProcess::redis(&[]), "KEm", script);
    assert_eq!(ours, redis);
}

#[test]
fn expired_events_come_from_lazy_and_active_expiry() {
    let s = ServerProcess::ferrokv(&["--hz", "100", "--enable-debug-command", "yes"]);
    let mut admin = s.raw();
    admin.cmd(&["config", "set", "notify-keyspace-events", "Ex"]);
    let mut sub = Subscriber::new(&s);
    sub.send(&["subscribe", "__keyevent@0__:expired"]);
    sub.next();
    // Active: nobody reads the key.
    admin.cmd(&["set", "active", "1", "px", "20"]);
    assert_eq!(
        sub.next(),
        Frame::Array(vec![
            bulk("message"),
            bulk("__keyevent@0__:expired"),
            bulk("active")
        ])
    );
    // Lazy: the active cycle is off, a read finds the key expired.
    admin.cmd(&["debug", "set-active-expire", "0"]);
    admin.cmd(&["set", "lazy", "1", "px", "20"]);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(admin.cmd(&["get", "lazy"]), Frame::Null);
    assert_eq!(
        sub.next(),
        Frame::Array(vec![
            bulk("message"),
            bulk("__keyevent@0__:expired"),
            bulk("lazy")
        ])
    );
}

#[test]
fn notify_keyspace_events_config_is_validated_and_canonical() {
    let s = ServerProcess::ferrokv(&[]);
    let mut c = s.raw();
    for (set, get) in [("KAn", "AK"), ("Kgn", "gnK"), ("Eml", "lEm"), ("", "")] {
        assert_eq!(
            c.cmd(&["config", "set", "notify-keyspace-events", set]),
            Frame::Simple("OK".into())
        );
        assert_eq!(
            c.cmd(&["config", "get", "notify-keyspace-events"]),
            Frame::Array(vec![bulk("notify-keyspace-events"), bulk(get)])
        );
    }
    assert_eq!(
        c.cmd(&["config", "set", "notify-keyspace-events", "KX"]),
        Frame::Error(b"ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_vec())
    );
}

#[test]
fn redis_py_pubsub_and_transactions() {
    let s = ServerProcess::ferrokv(&[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_pubsub_multi.py"
    );
    for proto in ["2", "3"] {
        let out = std::process::Command::new("python3")
            .arg(script)
            .arg(s.port.to_string())
            .arg(proto)
            .output()
            .expect("python3 with redis-py is required");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("ALL OK"),
            "RESP{proto}: {text}"
        );
    }
}
