//! Guards DUMP and RESTORE: RESTORE's options and errors exactly as Redis
//! 7.0 answers them (both targets); values of every type and encoding
//! moved by DUMP → RESTORE from ferrokv to a real redis-server and back
//! with equal `DEBUG DIGEST-VALUE`s; corrupted payloads (bytes flipped,
//! the CRC64 made right again so that the decoder meets them) refused or
//! restored into readable values, never a crash; and a relative TTL
//! reaching a replica as the master's absolute expiry.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the protocol assertions against
//! the real `redis-server`.
mod common;
use common::repl::{ferrokv, fill_dataset, replicaof, types_of, wait_converged};
#[allow(unused_imports)]
use common::reply::*;
use common::ServerProcess;
use ferrokv_resp::Frame;

fn payload(r: &mut common::Raw, key: &str) -> Vec<u8> {
    match r.cmd(&["DUMP", key]) {
        Frame::Bulk(p) => p,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

#[test]
fn restore_options_and_errors_reply_as_redis() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "du:s", "du:n", "du:t", "du:x"]);
    r.cmd(&["SET", "du:s", "hello"]);
    let p = payload(&mut r, "du:s");
    let restore = |r: &mut common::Raw, args: &[&[u8]]| {
        let mut a: Vec<&[u8]> = vec![b"RESTORE"];
        a.extend_from_slice(args);
        r.cmd(&a)
    };
    let busy = err("BUSYKEY Target key name already exists.");
    assert_eq!(restore(&mut r, &[b"du:s", b"0", &p]), busy);
    assert_eq!(restore(&mut r, &[b"du:s", b"0", &p, b"REPLACE"]), ok());
    assert_eq!(restore(&mut r, &[b"du:n", b"0", &p]), ok());
    assert_eq!(r.cmd(&["GET", "du:n"]), bulk("hello"));
    assert_eq!(r.cmd(&["TTL", "du:n"]), int(-1));
    // The busy check comes before the TTL's.
    assert_eq!(restore(&mut r, &[b"du:n", b"-1", &p]), busy);
    for (args, reply) in [
        (
            vec![&b"du:x"[..], b"-1", &p],
            err("ERR Invalid TTL value, must be >= 0"),
        ),
        (
            vec![&b"du:x"[..], b"x", &p],
            err("ERR value is not an integer or out of range"),
        ),
        (
            vec![&b"du:x"[..], b"0", b"junk"],
            err("ERR DUMP payload version or checksum are wrong"),
        ),
        (
            vec![&b"du:x"[..], b"0", &p, b"BOGUS"],
            err("ERR syntax error"),
        ),
        (
            vec![&b"du:x"[..], b"0", &p, b"IDLETIME", b"-1"],
            err("ERR Invalid IDLETIME value, must be >= 0"),
        ),
        (
            vec![&b"du:x"[..], b"0", &p, b"FREQ", b"256"],
            err("ERR Invalid FREQ value, must be >= 0 and <= 255"),
        ),
        (
            vec![&b"du:x"[..], b"0", &p, b"IDLETIME", b"1", b"FREQ", b"1"],
            err("ERR syntax error"),
        ),
        (
            vec![&b"du:x"[..], b"0", &p, b"IDLETIME"],
            err("ERR syntax error"),
        ),
    ] {
        assert_eq!(restore(&mut r, &args), reply, "{args:?}");
    }
    // A payload of a newer RDB version, and one whose CRC64 is wrong.
    let mut newer = p.clone();
    let n = newer.len();
    newer[n - 10] = 11;
    assert_eq!(
        restore(&mut r, &[b"du:x", b"0", &newer]),
        err("ERR DUMP payload version or checksum are wrong")
    );
    let mut flipped = p.clone();
    flipped[2] ^= 1;
    assert_eq!(
        restore(&mut r, &[b"du:x", b"0", &flipped]),
        err("ERR DUMP payload version or checksum are wrong")
    );
    // TTLs: relative, absolute, already past (nothing created; REPLACE
    // deletes the old key).
    assert_eq!(restore(&mut r, &[b"du:t", b"100000", &p]), ok());
    let Frame::Integer(pttl) = r.cmd(&["PTTL", "du:t"]) else {
        panic!("PTTL")
    };
    assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
    assert_eq!(
        restore(
            &mut r,
            &[b"du:t", b"4102444800000", &p, b"ABSTTL", b"REPLACE"]
        ),
        ok()
    );
    assert_eq!(r.cmd(&["PEXPIRETIME", "du:t"]), int(4_102_444_800_000));
    assert_eq!(
        restore(&mut r, &[b"du:t", b"1", &p, b"ABSTTL", b"REPLACE"]),
        ok()
    );
    assert_eq!(r.cmd(&["EXISTS", "du:t"]), int(0));
    assert_eq!(restore(&mut r, &[b"du:x", b"1", &p, b"ABSTTL"]), ok());
    assert_eq!(r.cmd(&["EXISTS", "du:x"]), int(0));
    assert_eq!(r.cmd(&["DUMP", "du:missing"]), nil());
    // IDLETIME sets the idle time OBJECT IDLETIME reports.
    assert_eq!(
        restore(&mut r, &[b"du:x", b"0", &p, b"IDLETIME", b"1000"]),
        ok()
    );
    let Frame::Integer(idle) = r.cmd(&["OBJECT", "IDLETIME", "du:x"]) else {
        panic!("IDLETIME")
    };
    assert!((1000..1010).contains(&idle), "{idle}");
}

/// The keys of database 0.
fn keys(c: &mut redis::Connection) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    v.sort();
    v
}

fn digest_value(c: &mut redis::Connection, key: &[u8]) -> String {
    let v: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap();
    v[0].clone()
}

/// Moves every key of `from`'s database 0 into `to` with DUMP/RESTORE
/// (suffixed, so the two sets of keys sit side by side in `to` too).
fn move_all(from: &ServerProcess, to: &ServerProcess, suffix: &str) -> usize {
    let (mut f, mut t) = (from.client(), to.client());
    let ks = keys(&mut f);
    for k in &ks {
        let p: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut f).unwrap();
        // The expiry goes along (DIGEST-VALUE notes whether there is one).
        let pttl: i64 = redis::cmd("PTTL").arg(k).query(&mut f).unwrap();
        let mut to_key = k.clone();
        to_key.extend_from_slice(suffix.as_bytes());
        let () = redis::cmd("RESTORE")
            .arg(&to_key)
            .arg(pttl.max(0))
            .arg(p)
            .arg("REPLACE")
            .query(&mut t)
            .unwrap_or_else(|e| panic!("RESTORE {}: {e}", k.escape_ascii()));
        assert_eq!(
            digest_value(&mut f, k),
            digest_value(&mut t, &to_key),
            "{}",
            k.escape_ascii()
        );
    }
    ks.len()
}

#[test]
fn values_of_every_type_move_to_redis_and_back() {
    let fk = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let redis = ServerProcess::redis(&["--enable-debug-command", "yes"]);
    let t = types_of(&fk);
    fill_dataset(&fk, 400, false, t);
    // Both encodings of each collection, long and compressible strings.
    let mut c = fk.client();
    let big: Vec<String> = (0..3000).map(|i| format!("member:{i}")).collect();
    let () = redis::cmd("RPUSH")
        .arg("du:biglist")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg("du:bigset")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let () = redis::cmd("SET")
        .arg("du:zip")
        .arg("z".repeat(100_000))
        .query(&mut c)
        .unwrap();
    let () = redis::cmd("SETBIT")
        .arg("du:bits")
        .arg(100_000)
        .arg(1)
        .query(&mut c)
        .map(|_: i64| ())
        .unwrap();
    let n = move_all(&fk, &redis, ":fk");
    assert!(n > 400, "{n} keys");
    // And back: Redis's payloads into ferrokv.
    let back = ServerProcess::ferrokv(&["--enable-debug-command", "yes"]);
    let moved = move_all(&redis, &back, "");
    // Every key came back (Redis held only the copies).
    assert_eq!(moved, n);
}

/// A tiny xorshift, so the corruption cases are the same every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn corrupt_payloads_are_refused_or_restored_whole_never_a_crash() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    r.cmd(&["RPUSH", "src:l", "a", "bb", "ccc", "12", "-7"]);
    r.cmd(&["HSET", "src:h", "f", "v", "n", "123"]);
    r.cmd(&["SADD", "src:si", "1", "2", "300000"]);
    r.cmd(&["SADD", "src:ss", "x", "y"]);
    r.cmd(&["ZADD", "src:z", "1", "a", "2.5", "b"]);
    r.cmd(&["SET", "src:s", &"abc".repeat(30)]);
    let sources: Vec<Vec<u8>> = ["src:l", "src:h", "src:si", "src:ss", "src:z", "src:s"]
        .iter()
        .map(|k| payload(&mut r, k))
        .collect();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let (mut refused, mut restored) = (0, 0);
    for i in 0..3000 {
        let src = &sources[i % sources.len()];
        // The body (type byte and value), mutated, then sealed again so the
        // CRC64 holds and the decoder itself is tested.
        let mut body = src[..src.len() - 10].to_vec();
        for _ in 0..1 + rng.next() % 3 {
            let at = (rng.next() as usize) % body.len();
            match rng.next() % 3 {
                0 => body[at] ^= 1 << (rng.next() % 8),
                1 => body[at] = rng.next() as u8,
                _ => body.truncate(at.max(1)),
            }
        }
        ferrokv_rdb::dump::seal(&mut body);
        let key = format!("cor:{i}");
        match r.cmd(&[b"RESTORE".as_slice(), key.as_bytes(), b"0", &body]) {
            Frame::Simple(_) => {
                restored += 1;
                // Whatever was restored reads back whole.
                let Frame::Simple(t) = r.cmd(&["TYPE", &key]) else {
                    panic!("TYPE {key}")
                };
                let read = match &t[..] {
                    b"string" => r.cmd(&["GET", &key]),
                    b"list" => r.cmd(&["LRANGE", &key, "0", "-1"]),
                    b"hash" => r.cmd(&["HGETALL", &key]),
                    b"set" => r.cmd(&["SMEMBERS", &key]),
                    b"zset" => r.cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]),
                    other => panic!("type {other:?}"),
                };
                assert!(!matches!(read, Frame::Error(_)), "{key}: {read:?}");
                assert!(matches!(r.cmd(&["DUMP", &key]), Frame::Bulk(_)));
            }
            Frame::Error(e) => {
                assert_eq!(e, b"ERR Bad data format", "case {i}");
                refused += 1;
            }
            other => panic!("case {i}: {other:?}"),
        }
    }
    assert!(refused > 1000, "{refused} refused, {restored} restored");
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
}

#[test]
fn a_relative_ttl_reaches_the_replica_as_the_masters_absolute_expiry() {
    let master = ferrokv(&[]);
    let replica = ferrokv(&[]);
    replicaof(&replica, &master);
    let mut m = master.raw();
    m.cmd(&["SET", "du:src", "v"]);
    let p = payload(&mut m, "du:src");
    for i in 0..20 {
        let k = format!("du:ttl:{i}");
        assert_eq!(
            m.cmd(&[b"RESTORE".as_slice(), k.as_bytes(), b"100000", &p]),
            ok()
        );
    }
    wait_converged(&master, &replica, 30);
    let mut rr = replica.raw();
    for i in 0..20 {
        let k = format!("du:ttl:{i}");
        assert_eq!(
            m.cmd(&["PEXPIRETIME", &k]),
            rr.cmd(&["PEXPIRETIME", &k]),
            "{k}"
        );
    }
}

/// MIGRATE from `src` to `dst` (any mix of ferrokv and redis-server), with
/// every option and error the two servers must answer alike.
fn migrate_cases(src: &ServerProcess, dst: &ServerProcess, locked: &ServerProcess) -> Vec<Frame> {
    let mut r = src.raw();
    r.cmd(&["FLUSHALL"]);
    dst.raw().cmd(&["FLUSHALL"]);
    r.cmd(&["SET", "m:a", "1"]);
    r.cmd(&["RPUSH", "m:l", "x", "y"]);
    r.cmd(&["SET", "m:t", "v", "PX", "100000"]);
    r.cmd(&["SET", "m:b", "2"]);
    let (dp, lp) = (dst.port.to_string(), locked.port.to_string());
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let cases: Vec<Vec<&str>> = vec![
        vec!["MIGRATE", "127.0.0.1", &dp, "m:a", "0", "1000"],
        vec!["EXISTS", "m:a"],
        vec!["MIGRATE", "127.0.0.1", &dp, "m:missing", "0", "1000"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "",
            "2",
            "1000",
            "COPY",
            "KEYS",
            "m:l",
            "m:t",
            "m:missing",
        ],
        vec!["EXISTS", "m:l", "m:t"],
        vec!["MIGRATE", "127.0.0.1", &dp, "", "2", "1000", "KEYS", "m:l"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "",
            "2",
            "1000",
            "REPLACE",
            "KEYS",
            "m:l",
            "m:t",
        ],
        vec!["EXISTS", "m:l", "m:t"],
        vec!["MIGRATE", "127.0.0.1", &closed, "m:b", "0", "100"],
        vec!["MIGRATE", "127.0.0.1", &lp, "m:b", "0", "1000"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            &lp,
            "m:b",
            "0",
            "1000",
            "AUTH",
            "wrong",
        ],
        vec![
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "m:b",
            "0",
            "1000",
            "KEYS",
            "m:b",
        ],
        vec!["MIGRATE", "127.0.0.1", &dp, "m:b", "x", "1000"],
        vec!["MIGRATE", "127.0.0.1", &dp, "m:b", "0", "1000", "FOO"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            &lp,
            "m:b",
            "0",
            "1000",
            "AUTH2",
            "default",
            "pw",
        ],
        vec!["EXISTS", "m:b"],
    ];
    let mut out: Vec<Frame> = cases.iter().map(|c| r.cmd(c)).collect();
    let mut d = dst.raw();
    out.push(d.cmd(&["GET", "m:a"]));
    d.cmd(&["SELECT", "2"]);
    out.push(d.cmd(&["LRANGE", "m:l", "0", "-1"]));
    let Frame::Integer(pttl) = d.cmd(&["PTTL", "m:t"]) else {
        panic!("PTTL")
    };
    assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
    let mut l = locked.raw();
    l.cmd(&["AUTH", "pw"]);
    out.push(l.cmd(&["GET", "m:b"]));
    l.cmd(&["FLUSHALL"]);
    out
}

#[test]
fn migrate_answers_as_redis_between_ferrokv_and_redis_either_way() {
    let locked = ServerProcess::redis(&["--requirepass", "pw"]);
    // Redis to Redis is the reference; ferrokv as the source, and as the
    // target, must answer the same. Every run has fresh servers: Redis
    // keeps a MIGRATE connection (authenticated, with its database
    // selected) for 10 s, which would change a later run's answers.
    let fresh = |ferrokv: bool| {
        if ferrokv {
            ServerProcess::ferrokv(&[])
        } else {
            ServerProcess::redis(&[])
        }
    };
    let want = migrate_cases(&fresh(false), &fresh(false), &locked);
    assert_eq!(want[0], ok());
    assert_eq!(want[2], Frame::Simple(b"NOKEY".to_vec()));
    for (src, dst) in [(true, false), (false, true), (true, true)] {
        assert_eq!(
            migrate_cases(&fresh(src), &fresh(dst), &locked),
            want,
            "source ferrokv {src}, target ferrokv {dst}"
        );
    }
}

#[test]
fn keys_migrated_away_are_deleted_on_the_replica_too() {
    let master = ferrokv(&[]);
    let replica = ferrokv(&[]);
    let target = ServerProcess::ferrokv(&[]);
    replicaof(&replica, &master);
    let mut m = master.raw();
    for i in 0..10 {
        m.cmd(&["SET", &format!("mv:{i}"), "v"]);
    }
    wait_converged(&master, &replica, 30);
    let tp = target.port.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &tp, "", "0", "1000", "KEYS"];
    let keys: Vec<String> = (0..5).map(|i| format!("mv:{i}")).collect();
    args.extend(keys.iter().map(|s| s.as_str()));
    assert_eq!(m.cmd(&args), ok());
    wait_converged(&master, &replica, 30);
    let mut rr = replica.raw();
    assert_eq!(rr.cmd(&["DBSIZE"]), int(5));
    assert_eq!(target.raw().cmd(&["DBSIZE"]), int(5));
}
