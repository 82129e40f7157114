//! Guards what only shows on a whole server process: huge values and
//! pipelines, active expiry, authentication, client limits (maxclients,
//! idle timeout, output-buffer limits with bounded memory), the config file
//! and its command-line overrides, start-up errors, FLUSHALL and SHUTDOWN.
mod common;
use common::{wait_for, ServerProcess};
use ferrokv_resp::Frame;
use std::io::{Read, Write};
use std::time::Duration;

fn ok() -> Frame {
    Frame::Simple(b"OK".to_vec())
}
fn err(s: &str) -> Frame {
    Frame::Error(s.as_bytes().to_vec())
}

/// Deterministic pseudo-random bytes (xorshift), every byte value present.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes()[..(len - v.len()).min(8)]);
    }
    v
}

fn set_raw(r: &mut common::Raw, key: &str, value: &[u8]) {
    let mut req = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n",
        key.len(),
        value.len()
    )
    .into_bytes();
    r.send(&req);
    r.send(value);
    req.clear();
    r.send(b"\r\n");
    assert_eq!(r.recv_exact(5), b"+OK\r\n");
}

fn get_raw(r: &mut common::Raw, key: &str, len: usize) -> Vec<u8> {
    r.send(&Frame::command(&["GET", key]));
    let head = format!("${len}\r\n");
    assert_eq!(r.recv_exact(head.len()), head.as_bytes());
    let body = r.recv_exact(len + 2);
    assert_eq!(&body[len..], b"\r\n");
    body[..len].to_vec()
}

#[test]
fn hundred_megabyte_value_comes_back_byte_identical() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    r.s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let len = 100 * 1024 * 1024;
    let value = pattern(len, 0x9e3779b97f4a7c15);
    set_raw(&mut r, "big", &value);
    assert_eq!(r.cmd(&["STRLEN", "big"]), Frame::Integer(len as i64));
    assert!(get_raw(&mut r, "big", len) == value, "GET differs from SET");
    assert_eq!(r.cmd(&["DEL", "big"]), Frame::Integer(1));
    // Built by APPEND, 1 MB at a time.
    let chunk = 1024 * 1024;
    for (i, part) in value.chunks(chunk).enumerate() {
        let mut req =
            format!("*3\r\n$6\r\nAPPEND\r\n$3\r\nbig\r\n${}\r\n", part.len()).into_bytes();
        req.extend_from_slice(part);
        req.extend_from_slice(b"\r\n");
        r.send(&req);
        let n = format!(":{}\r\n", (i + 1) * chunk);
        assert_eq!(r.recv_exact(n.len()), n.as_bytes());
    }
    assert!(
        get_raw(&mut r, "big", len) == value,
        "APPEND-built value differs"
    );
    assert_eq!(
        r.cmd(&["GETRANGE", "big", "-3", "-1"]),
        Frame::Bulk(value[len - 3..].to_vec())
    );
}

#[test]
fn ten_thousand_pipelined_commands_in_one_write_all_answered() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    let mut req = Vec::new();
    for i in 0..10_000 {
        let args: Vec<String> = match i % 4 {
            0 => vec!["SET".into(), format!("p:{i}"), i.to_string()],
            1 => vec!["GET".into(), format!("p:{}", i - 1)],
            2 => vec!["INCR".into(), "p:counter".into()],
            _ => vec!["ECHO".into(), format!("e{i}")],
        };
        req.extend_from_slice(&Frame::command(&args));
    }
    r.send(&req);
    let replies = r.read_frames(10_000);
    for (i, f) in replies.into_iter().enumerate() {
        let expected = match i % 4 {
            0 => ok(),
            1 => Frame::Bulk((i - 1).to_string().into_bytes()),
            2 => Frame::Integer((i / 4 + 1) as i64),
            _ => Frame::Bulk(format!("e{i}").into_bytes()),
        };
        assert_eq!(f, expected, "reply {i}");
    }
    assert_eq!(r.cmd(&["DBSIZE"]), Frame::Integer(2501));
}

#[test]
fn keys_with_a_ttl_disappear_without_being_read() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    for i in 0..200 {
        let ttl = if i % 2 == 0 { "PX" } else { "EX" };
        let v = if i % 2 == 0 { "50" } else { "1" };
        assert_eq!(r.cmd(&["SET", &format!("ttl:{i}"), "v", ttl, v]), ok());
    }
    assert_eq!(r.cmd(&["SET", "forever", "v"]), ok());
    // One INFO read: avg_ttl moves with the clock between two reads.
    let db0 = s.info_field("keyspace", "db0").unwrap();
    let avg_ttl = db0.rsplit('=').next().unwrap().trim().to_string();
    assert_eq!(
        db0.trim(),
        format!("keys=201,expires=200,avg_ttl={avg_ttl}")
    );
    assert!(avg_ttl.parse::<i64>().unwrap() <= 1000);
    // Nobody reads the keys: only the active expiry cycle can remove them.
    wait_for("active expiry to empty db0 of volatile keys", 10, || {
        (r.cmd(&["DBSIZE"]) == Frame::Integer(1)).then_some(())
    });
    assert_eq!(
        s.info_field("keyspace", "db0").unwrap(),
        "keys=1,expires=0,avg_ttl=0"
    );
    let expired: u64 = s
        .info_field("stats", "expired_keys")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(expired, 200);
    assert_eq!(r.cmd(&["GET", "forever"]), Frame::Bulk(b"v".to_vec()));
}

#[test]
fn requirepass_needs_auth_before_commands() {
    let s = ServerProcess::ferrokv(&["--requirepass", "secret"]);
    let mut r = s.raw();
    r.roundtrip(b"PING\r\n", b"-NOAUTH Authentication required.\r\n");
    r.roundtrip(b"GET k\r\n", b"-NOAUTH Authentication required.\r\n");
    // Existence and arity are checked first, as in Redis.
    r.roundtrip(
        b"FOO\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: \r\n",
    );
    r.roundtrip(
        b"GET\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    r.roundtrip(
        b"HELLO 3\r\n",
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n",
    );
    let wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    r.roundtrip(b"AUTH wrong\r\n", wrongpass);
    r.roundtrip(b"AUTH default wrong\r\n", wrongpass);
    r.roundtrip(b"AUTH someone secret\r\n", wrongpass);
    r.roundtrip(b"HELLO 3 AUTH default wrong\r\n", wrongpass);
    r.roundtrip(b"PING\r\n", b"-NOAUTH Authentication required.\r\n");
    r.roundtrip(b"AUTH secret\r\n", b"+OK\r\n");
    r.roundtrip(b"PING\r\n", b"+PONG\r\n");
    // HELLO AUTH authenticates and switches protocol in one step.
    let mut r = s.raw();
    match r.cmd(&["HELLO", "3", "AUTH", "default", "secret"]) {
        Frame::Map(m) => assert_eq!(m[2], (Frame::Bulk(b"proto".to_vec()), Frame::Integer(3))),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.cmd(&["GET", "nokey"]), Frame::Null);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["AUTH", "default", "secret"]), ok());
    // The redis crate authenticates from the URL.
    let url = format!("redis://:secret@127.0.0.1:{}/", s.port);
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    // QUIT needs no authentication.
    let mut r = s.raw();
    r.roundtrip(b"QUIT\r\n", b"+OK\r\n");
    assert!(r.is_closed());
}

#[test]
fn client_that_never_reads_is_disconnected_and_memory_stays_bounded() {
    let s = ServerProcess::ferrokv(&[]);
    let mut admin = s.raw();
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 512kb 10"
        ]),
        ok()
    );
    let value = pattern(512 * 1024, 7);
    set_raw(&mut admin, "large", &value);
    let before: u64 = s
        .info_field("memory", "used_memory")
        .unwrap()
        .parse()
        .unwrap();
    // Pipeline GETs of the large value and never read a reply.
    let mut hog = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let get = Frame::command(&["GET", "large"]);
    let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * 1000).collect();
    let mut sent = 0;
    for _ in 0..20 {
        match hog.write_all(&batch) {
            Ok(()) => sent += 1000,
            Err(_) => break, // closed by the server
        }
    }
    assert!(sent >= 1000);
    wait_for("the output-buffer-limit disconnection", 10, || {
        let n: u64 = s
            .info_field("stats", "client_output_buffer_limit_disconnections")
            .unwrap()
            .parse()
            .unwrap();
        (n == 1).then_some(())
    });
    // The hog's connection is gone: reading ends (EOF or reset), with at
    // most what the socket buffers held.
    hog.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0usize;
    loop {
        match hog.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < 1000 * value.len(), "read {got} bytes");
    let after: u64 = s
        .info_field("memory", "used_memory")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        after < before + 16 * 1024 * 1024,
        "used_memory grew from {before} to {after}"
    );
    let peak: u64 = s
        .info_field("memory", "used_memory_peak")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        peak < before + 64 * 1024 * 1024,
        "used_memory_peak {peak} (before {before}): the output buffer was not bounded"
    );
    // Other clients are unaffected.
    assert_eq!(
        admin.cmd(&["STRLEN", "large"]),
        Frame::Integer(value.len() as i64)
    );
}

#[test]
fn client_over_the_soft_output_limit_for_too_long_is_disconnected() {
    let s = ServerProcess::ferrokv(&["--client-output-buffer-limit", "normal 0 256kb 1"]);
    let mut admin = s.raw();
    set_raw(&mut admin, "softv", &pattern(512 * 1024, 3));
    let mut slow = s.raw();
    let Frame::Integer(id) = slow.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let start = std::time::Instant::now();
    // 20 MB of replies the client never reads: over the soft limit, under
    // no hard limit, so only the time spent over it gets the client closed.
    slow.send(&Frame::command(&["GET", "softv"]).repeat(40));
    wait_for("the soft-limit disconnection", 10, || {
        let list = admin.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]);
        (list == Frame::Bulk(Vec::new())).then_some(())
    });
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        s.info_field("stats", "client_output_buffer_limit_disconnections")
            .unwrap(),
        "1"
    );
}

#[test]
fn maxclients_refuses_the_extra_connection() {
    let s = ServerProcess::ferrokv(&["--maxclients", "2"]);
    let mut a = s.raw();
    a.roundtrip(b"PING\r\n", b"+PONG\r\n");
    // The harness's start-up probe may still hold a slot for a moment.
    let mut b = wait_for("a second client slot", 5, || {
        let mut b = s.raw();
        b.send(b"PING\r\n");
        let mut buf = [0u8; 7];
        b.s.read_exact(&mut buf).ok()?;
        (&buf == b"+PONG\r\n").then_some(b)
    });
    let mut c = s.raw();
    assert_eq!(c.read_to_close(), b"-ERR max number of clients reached\r\n");
    drop(a);
    // A slot frees up once a client leaves.
    wait_for("a free client slot", 5, || {
        let mut d = s.raw();
        d.send(b"PING\r\n");
        let mut buf = [0u8; 64];
        let n = d.s.read(&mut buf).ok()?;
        (&buf[..n] == b"+PONG\r\n").then_some(())
    });
    b.roundtrip(
        b"CONFIG GET maxclients\r\n",
        b"*2\r\n$10\r\nmaxclients\r\n$1\r\n2\r\n",
    );
}

#[test]
fn maxclients_fits_the_open_files_limit() {
    // Without the privilege to raise the limit, maxclients shrinks to fit
    // it (Redis's adjustOpenFilesLimit); with it, the limit is raised.
    let s = ServerProcess::ferrokv_with_nofile(128, &[]);
    let mut admin = s.raw();
    let maxclients: usize = match admin.cmd(&["CONFIG", "GET", "maxclients"]) {
        Frame::Array(v) => std::str::from_utf8(v[1].as_bytes().unwrap())
            .unwrap()
            .parse()
            .unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(maxclients == 96 || maxclients == 10000, "{maxclients}");
    // Every extra connection is answered, none hangs unaccepted.
    let mut conns = Vec::new();
    for _ in 0..150 {
        let mut c = s.raw();
        c.send(b"PING\r\n");
        conns.push(c);
    }
    let mut pong = 0;
    for c in &mut conns {
        let mut buf = [0u8; 7];
        c.s.read_exact(&mut buf).unwrap();
        if &buf == b"+PONG\r\n" {
            pong += 1;
        } else {
            assert_eq!(&buf, b"-ERR ma");
        }
    }
    assert_eq!(pong, 150.min(maxclients - 1));
    drop(conns);
    if maxclients == 96 {
        // Raising maxclients past what the limit allows is refused.
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "maxclients", "200"]),
            err("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 96")
        );
        assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "50"]), ok());
    }
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let s = ServerProcess::ferrokv(&["--timeout", "1"]);
    let mut idle = s.raw();
    idle.roundtrip(b"PING\r\n", b"+PONG\r\n");
    let start = std::time::Instant::now();
    idle.s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(idle.is_closed());
    assert!(start.elapsed() >= Duration::from_millis(900));
    // A busy client stays.
    let mut busy = s.raw();
    for _ in 0..6 {
        busy.roundtrip(b"PING\r\n", b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn config_file_is_read_and_command_line_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("ferrokv.conf");
    std::fs::write(
        &conf,
        "# test configuration\nmaxclients 123\ntimeout 7\nrequirepass \"a b\"\nhz 20\n",
    )
    .unwrap();
    let s = ServerProcess::ferrokv_with_conf(conf.to_str().unwrap(), &["--timeout", "9"]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["AUTH", "a b"]), ok());
    let get = |r: &mut common::Raw, p: &str| match r.cmd(&["CONFIG", "GET", p]) {
        Frame::Array(v) => String::from_utf8(v[1].as_bytes().unwrap().to_vec()).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(get(&mut r, "maxclients"), "123");
    assert_eq!(get(&mut r, "timeout"), "9");
    assert_eq!(get(&mut r, "hz"), "20");
    let info = s.info_field("server", "config_file");
    assert_eq!(info, None, "INFO needs AUTH");
    match r.cmd(&["INFO", "server"]) {
        Frame::Bulk(t) => {
            let t = String::from_utf8(t).unwrap();
            let canonical = std::fs::canonicalize(&conf).unwrap();
            assert!(
                t.contains(&format!("config_file:{}\r\n", canonical.display())),
                "{t}"
            );
        }
        other => panic!("{other:?}"),
    }
    // CONFIG REWRITE writes the running values back to the file.
    assert_eq!(r.cmd(&["CONFIG", "SET", "maxclients", "55"]), ok());
    assert_eq!(r.cmd(&["CONFIG", "REWRITE"]), ok());
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("# test configuration"), "{text}");
    assert!(text.lines().any(|l| l == "maxclients 55"), "{text}");
    assert!(text.lines().any(|l| l == "timeout 9"), "{text}");
    assert!(text.lines().any(|l| l == "requirepass \"a b\""), "{text}");
    // The replication options and the accepted-only ones are rewritten
    // too (Sentinel relies on `replicaof` reaching the file), and a
    // master's `replicaof` line goes away.
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", "1"]), ok());
    assert_eq!(r.cmd(&["CONFIG", "SET", "replica-priority", "7"]), ok());
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]),
        ok()
    );
    assert_eq!(r.cmd(&["CONFIG", "REWRITE"]), ok());
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.lines().any(|l| l == "replicaof 127.0.0.1 1"), "{text}");
    assert!(text.lines().any(|l| l == "replica-priority 7"), "{text}");
    assert!(
        text.lines().any(|l| l == "lazyfree-lazy-user-del yes"),
        "{text}"
    );
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), ok());
    assert_eq!(r.cmd(&["CONFIG", "REWRITE"]), ok());
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(!text.contains("replicaof"), "{text}");
}

#[test]
fn every_redis_config_but_tls_is_known_and_checked_as_redis_checks_it() {
    // TLS's configs land with TLS (docs/config.md).
    let ours = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let names = |p: &ServerProcess| -> std::collections::BTreeSet<String> {
        match p.raw().cmd(&["CONFIG", "GET", "*"]) {
            Frame::Array(v) => v
                .chunks(2)
                .map(|c| String::from_utf8_lossy(c[0].as_bytes().unwrap()).into_owned())
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    let (a, b) = (names(&ours), names(&redis));
    let missing: Vec<&String> = b
        .difference(&a)
        .filter(|n| !n.starts_with("tls-"))
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
    let (mut fr, mut rr) = (ours.raw(), redis.raw());
    for args in [
        &["CONFIG", "SET", "activerehashing", "maybe"][..],
        &["CONFIG", "SET", "acllog-max-len", "x"],
        &["CONFIG", "SET", "active-defrag-cycle-max", "100"],
        &["CONFIG", "SET", "active-expire-effort", "0"],
        &["CONFIG", "SET", "propagation-error-behavior", "x"],
        &["CONFIG", "SET", "shutdown-on-sigint", "x"],
        &["CONFIG", "SET", "oom-score-adj", "x"],
        &["CONFIG", "SET", "cluster-node-timeout", "-1"],
        &["CONFIG", "SET", "active-defrag-ignore-bytes", "10x"],
        &["CONFIG", "SET", "acl-pubsub-default", "x"],
        &["CONFIG", "SET", "daemonize", "yes"],
        &["CONFIG", "SET", "io-threads", "4"],
        &["CONFIG", "SET", "socket-mark-id", "5"],
        &["CONFIG", "SET", "lazyfree-lazy-user-del", "YES"],
        &["CONFIG", "GET", "lazyfree-lazy-user-del"],
        &["CONFIG", "SET", "slave-lazy-flush", "yes"],
        &["CONFIG", "GET", "replica-lazy-flush"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2 3"],
        &["CONFIG", "GET", "oom-score-adj-values"],
        &["CONFIG", "SET", "maxmemory", "100", "activerehashing", "x"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "hz", "20", "hz", "30"],
    ] {
        assert_eq!(fr.cmd(args), rr.cmd(args), "{args:?}");
    }
    // Several patterns: Redis answers in its hash table's order.
    let pairs = |f: Frame| -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
        match f {
            Frame::Array(v) => v
                .chunks(2)
                .map(|c| {
                    (
                        c[0].as_bytes().unwrap().to_vec(),
                        c[1].as_bytes().unwrap().to_vec(),
                    )
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    let get = [
        "CONFIG",
        "GET",
        "maxmemory",
        "hz",
        "lazyfree-lazy-user-*",
        "replicaof",
    ];
    assert_eq!(pairs(fr.cmd(&get)), pairs(rr.cmd(&get)));
}

#[test]
fn config_set_loglevel_takes_effect_at_run_time() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    // Accepting a client is logged at debug level only.
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert!(!s.log().contains("Accepted"), "{}", s.log());
    assert_eq!(r.cmd(&["CONFIG", "SET", "loglevel", "debug"]), ok());
    let mut other = s.raw();
    assert_eq!(other.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    wait_for("a debug line in the log", 5, || {
        s.log().contains("Accepted").then_some(())
    });
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "loglevel"]),
        Frame::Array(vec![
            Frame::Bulk(b"loglevel".to_vec()),
            Frame::Bulk(b"debug".to_vec()),
        ])
    );
}

/// Runs the binary with `args` and returns its exit status and stderr.
fn run_to_exit(args: &[&str]) -> (std::process::ExitStatus, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn bad_options_stop_startup_with_an_error_naming_them() {
    for (args, named) in [
        (&["--nosuch-option", "1"][..], "nosuch-option"),
        (&["--maxclients", "0"], "maxclients"),
        (&["--port", "x"], "port"),
        (&["--loglevel", "loud"], "loglevel"),
    ] {
        let (status, text) = run_to_exit(args);
        assert!(!status.success(), "{args:?} started");
        assert!(text.contains(named), "{args:?}: {text}");
        assert!(text.contains("FATAL CONFIG FILE ERROR"), "{args:?}: {text}");
    }
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.conf");
    std::fs::write(&conf, "port 0\nbogus-directive yes\n").unwrap();
    let (status, text) = run_to_exit(&[conf.to_str().unwrap()]);
    assert!(!status.success());
    assert!(
        text.contains("line 2") && text.contains("bogus-directive"),
        "{text}"
    );
    let (status, text) = run_to_exit(&["/nonexistent/ferrokv.conf"]);
    assert!(!status.success());
    assert!(text.contains("/nonexistent/ferrokv.conf"), "{text}");
}

#[test]
fn flushall_sync_and_async_empty_every_database() {
    let s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    for mode in [None, Some("SYNC"), Some("ASYNC")] {
        for db in ["0", "5", "15"] {
            assert_eq!(r.cmd(&["SELECT", db]), ok());
            assert_eq!(r.cmd(&["MSET", "a", "1", "b", &"x".repeat(100_000)]), ok());
        }
        let reply = match mode {
            None => r.cmd(&["FLUSHALL"]),
            Some(m) => r.cmd(&["FLUSHALL", m]),
        };
        assert_eq!(reply, ok(), "{mode:?}");
        for db in ["0", "5", "15"] {
            assert_eq!(r.cmd(&["SELECT", db]), ok());
            assert_eq!(r.cmd(&["DBSIZE"]), Frame::Integer(0), "{mode:?} db{db}");
        }
    }
    assert_eq!(r.cmd(&["FLUSHALL", "FOO"]), err("ERR syntax error"));
    assert_eq!(s.info_field("keyspace", "db0"), None);
}

#[test]
fn config_resetstat_clears_counters() {
    let mut s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    // Many commands, then a cron run, so the ops/sec sampler has seen a
    // count larger than what follows the reset.
    r.send(&b"PING\r\n".repeat(1000));
    assert_eq!(r.recv_exact(7 * 1000), b"+PONG\r\n".repeat(1000));
    // DBSIZE does not expire keys itself: only the cron's active expiry
    // brings it back down.
    let cron_ran = |r: &mut common::Raw| {
        let before = r.cmd(&["DBSIZE"]);
        assert_eq!(r.cmd(&["SET", "gone", "v", "PX", "1"]), ok());
        wait_for("a cron run (active expiry)", 10, || {
            (r.cmd(&["DBSIZE"]) == before).then_some(())
        });
    };
    cron_ran(&mut r);
    assert_eq!(r.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(r.cmd(&["GET", "k"]), Frame::Bulk(b"v".to_vec()));
    assert_eq!(r.cmd(&["GET", "nokey"]), Frame::Null);
    let _ = r.cmd(&["NOSUCH"]);
    assert_eq!(s.info_field("stats", "keyspace_hits").unwrap(), "1");
    assert_eq!(r.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(s.info_field("stats", "keyspace_hits").unwrap(), "0");
    assert_eq!(s.info_field("stats", "keyspace_misses").unwrap(), "0");
    assert_eq!(s.info_field("stats", "total_error_replies").unwrap(), "0");
    let stats = match r.cmd(&["INFO", "commandstats"]) {
        Frame::Bulk(t) => String::from_utf8(t).unwrap(),
        other => panic!("{other:?}"),
    };
    // Only the INFO calls made since the reset.
    assert!(!stats.contains("cmdstat_get:"), "{stats}");
    assert!(!stats.contains("cmdstat_set:"), "{stats}");
    // The periodic ops/sec sampling copes with counters that went back to
    // zero (it used to panic on the subtraction).
    cron_ran(&mut r);
    cron_ran(&mut r);
    assert!(s.alive());
    assert_eq!(
        s.info_field("stats", "instantaneous_ops_per_sec")
            .map(|v| v.parse::<u64>().is_ok()),
        Some(true)
    );
}

#[test]
fn shutdown_ends_the_process() {
    let mut s = ServerProcess::ferrokv(&[]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SET", "k", "v"]), ok());
    r.send(b"SHUTDOWN NOSAVE\r\n");
    // No reply: the connection just closes.
    assert_eq!(r.read_to_close(), b"");
    let status = wait_for("the process to exit", 10, || s.child.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    assert!(!s.alive());
    assert!(std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err());
}

#[test]
fn sigterm_shuts_down_cleanly_and_removes_the_pid_file() {
    let pidfile = tempfile::tempdir().unwrap();
    let pidpath = pidfile.path().join("ferrokv.pid");
    let mut s = ServerProcess::ferrokv(&["--pidfile", pidpath.to_str().unwrap()]);
    let pid = std::fs::read_to_string(&pidpath).unwrap();
    assert_eq!(pid.trim(), s.child.id().to_string());
    let status = std::process::Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = wait_for("the process to exit", 10, || s.child.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    assert!(!pidpath.exists());
    assert!(
        s.log().contains("Received SIGTERM scheduling shutdown..."),
        "{}",
        s.log()
    );
}

#[test]
fn a_log_that_cannot_be_written_does_not_stop_the_server() {
    // stdout and stderr on /dev/full: every log line fails with ENOSPC, as
    // on a full disk. The lines are dropped; the server keeps serving.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .args([
            "--port",
            &port.to_string(),
            "--dir",
            dir.path().to_str().unwrap(),
        ])
        .args(["--save", "", "--loglevel", "verbose"])
        .stdout(full())
        .stderr(full())
        .spawn()
        .unwrap();
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = wait_for("the server to answer", 10, || client.get_connection().ok());
    for _ in 0..3 {
        // Each of these logs a line or more.
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
        let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
        wait_for("the BGSAVE to end", 10, || {
            let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
            info.contains("rdb_bgsave_in_progress:0").then_some(())
        });
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("loglevel")
        .arg("debug")
        .query(&mut c)
        .unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    assert!(child.try_wait().unwrap().is_none(), "the server exited");
    let _ = child.kill();
    let _ = child.wait();
}

/// `CONFIG SET port` and `bind` take effect at run time, as in Redis 7.0:
/// the new port answers, the old one no longer does, connections already
/// open stay; a port already taken (or an address that is not this
/// host's) fails the whole `CONFIG SET` with Redis's words and rolls back
/// every option it named. Runs against redis-server too
/// (`FERROKV_TESTS_TARGET=redis`).
#[test]
fn config_set_port_and_bind_rebind_at_run_time_or_roll_back() {
    let mut s = common::reply::own_server(&[]);
    let mut open = s.client();
    let connect = |port: u16| {
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
    };
    let old = s.port;
    let new = common::free_port();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(new)
        .query(&mut open)
        .unwrap();
    s.port = new;
    let mut c = connect(new).expect("the new port answers");
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    assert!(connect(old).is_err(), "the old port still answers");
    // The connection made before the change is still served.
    let port: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("port")
        .query(&mut open)
        .unwrap();
    assert_eq!(port[1], new.to_string());
    // A port someone else holds: nothing of the CONFIG SET applies.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let e = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("10000001")
        .arg("port")
        .arg(taken_port)
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string().contains("Unable to listen on this port"),
        "{e}"
    );
    let mm: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut c)
        .unwrap();
    assert_eq!(mm[1], "0");
    assert!(connect(new).is_ok(), "the port before the failed change");
    // An address that is not this host's (TEST-NET-1: never routed, only
    // bound here, which fails): refused, the listeners stay as they were.
    let e = redis::cmd("CONFIG")
        .arg("SET")
        .arg("bind")
        .arg("127.0.0.1 192.0.2.1")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Failed to bind to specified addresses"),
        "{e}"
    );
    let mut c2 = connect(new).expect("still listening after a failed bind");
    let pong: String = redis::cmd("PING").query(&mut c2).unwrap();
    assert_eq!(pong, "PONG");
}

/// `oom-score-adj` is applied to the process as Redis 7.0 applies it:
/// `/proc/PID/oom_score_adj` gets the master's value (added to the
/// starting score with `yes`, as given with `absolute`), the replica's
/// value once the server replicates, and the starting score back with
/// `no`. Runs against redis-server too (`FERROKV_TESTS_TARGET=redis`).
#[test]
fn oom_score_adj_is_applied_to_the_process_by_role() {
    let s = common::reply::own_server(&[]);
    let path = format!("/proc/{}/oom_score_adj", s.child.id());
    let score = || -> i32 {
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let base = score();
    let mut c = s.client();
    let set = |c: &mut redis::Connection, k: &str, v: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query(c)
            .unwrap();
    };
    set(&mut c, "oom-score-adj-values", "7 20 30");
    set(&mut c, "oom-score-adj", "yes");
    assert_eq!(score(), (base + 7).clamp(-1000, 1000));
    set(&mut c, "oom-score-adj", "absolute");
    set(&mut c, "oom-score-adj-values", "9 21 30");
    assert_eq!(score(), 9);
    // A replica (of a port nobody listens on: the role is what counts).
    let nobody = common::free_port();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(nobody)
        .query(&mut c)
        .unwrap();
    wait_for("the replica's score", 10, || (score() == 21).then_some(()));
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut c)
        .unwrap();
    wait_for("the master's score again", 10, || {
        (score() == 9).then_some(())
    });
    set(&mut c, "oom-score-adj", "no");
    assert_eq!(score(), base);
}
