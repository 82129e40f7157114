//! Guards SLOWLOG against Redis 7.0: which commands are logged for a
//! threshold, the entry's shape (id, time, µs, argv cut at 32 arguments
//! of at most 128 bytes, peer, client name), LEN, RESET, the length cap,
//! and the error texts.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same assertions against the
//! real `redis-server`.
mod common;
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;

fn start(extra: &[&str]) -> ServerProcess {
    if std::env::var("FERROKV_TESTS_TARGET").as_deref() == Ok("redis") {
        ServerProcess::redis(extra)
    } else {
        let mut args = vec!["--enable-debug-command", "yes"];
        args.extend_from_slice(extra);
        ServerProcess::ferrokv(&args)
    }
}

fn bulk(s: &[u8]) -> Frame {
    Frame::Bulk(s.to_vec())
}

fn entries(c: &mut Raw, count: &str) -> Vec<Vec<Frame>> {
    match c.cmd(&["SLOWLOG", "GET", count]) {
        Frame::Array(v) => v
            .into_iter()
            .map(|e| match e {
                Frame::Array(f) => f,
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn slowlog_with_threshold_zero_logs_every_command_newest_first() {
    let srv = start(&["--slowlog-log-slower-than", "0"]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "tester"]),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), Frame::Simple(b"OK".to_vec()));
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    c.cmd(&["SET", "k", "v"]);
    // RESET itself is logged after it ran, as in Redis.
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), Frame::Integer(2));
    let e = entries(&mut c, "-1");
    // LEN is now logged too: LEN, SET, RESET.
    assert_eq!(e.len(), 3);
    let peer = c.s.local_addr().unwrap().to_string();
    let set = &e[1];
    assert_eq!(set.len(), 6);
    let (Frame::Integer(id_set), Frame::Integer(id_reset)) = (&set[0], &e[2][0]) else {
        panic!("{e:?}")
    };
    assert_eq!(*id_set, id_reset + 1);
    let Frame::Integer(when) = set[1] else {
        panic!("{set:?}")
    };
    assert!((when - t0).abs() <= 2, "{when} vs {t0}");
    assert!(matches!(set[2], Frame::Integer(us) if us >= 0));
    assert_eq!(
        set[3],
        Frame::Array(vec![bulk(b"SET"), bulk(b"k"), bulk(b"v")])
    );
    assert_eq!(set[4], bulk(peer.as_bytes()));
    assert_eq!(set[5], bulk(b"tester"));
    assert_eq!(e[0][3], Frame::Array(vec![bulk(b"SLOWLOG"), bulk(b"LEN")]));
    // GET with a count returns that many, newest first.
    let two = entries(&mut c, "2");
    assert_eq!(two.len(), 2);
    assert_eq!(
        two[0][3],
        Frame::Array(vec![bulk(b"SLOWLOG"), bulk(b"GET"), bulk(b"-1")])
    );
}

#[test]
fn debug_sleep_is_logged_with_its_duration_and_fast_commands_are_not() {
    let srv = start(&["--slowlog-log-slower-than", "50000"]);
    let mut c = srv.raw();
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["GET", "x"]);
    assert_eq!(
        c.cmd(&["DEBUG", "SLEEP", "0.1"]),
        Frame::Simple(b"OK".to_vec())
    );
    let e = entries(&mut c, "10");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0][3],
        Frame::Array(vec![bulk(b"DEBUG"), bulk(b"SLEEP"), bulk(b"0.1")])
    );
    let Frame::Integer(us) = e[0][2] else {
        panic!("{e:?}")
    };
    assert!((100_000..5_000_000).contains(&us), "{us}");
    assert_eq!(e[0][5], bulk(b""));
    // -1 disables the log.
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    c.cmd(&["DEBUG", "SLEEP", "0.06"]);
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), Frame::Integer(1));
}

#[test]
fn slowlog_keeps_max_len_entries_and_cuts_long_arguments() {
    let srv = start(&["--slowlog-log-slower-than", "0", "--slowlog-max-len", "3"]);
    let mut c = srv.raw();
    for i in 0..5 {
        c.cmd(&["ECHO", &i.to_string()]);
    }
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), Frame::Integer(3));
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "10"]);
    let big = "x".repeat(200);
    let mut del: Vec<String> = vec!["DEL".into(), big.clone()];
    for i in 0..40 {
        del.push(format!("k{i}"));
    }
    c.cmd(&del);
    let e = entries(&mut c, "1");
    let Frame::Array(argv) = &e[0][3] else {
        panic!("{e:?}")
    };
    assert_eq!(argv.len(), 32);
    assert_eq!(argv[0], bulk(b"DEL"));
    assert_eq!(
        argv[1],
        bulk(format!("{}... (72 more bytes)", "x".repeat(128)).as_bytes())
    );
    assert_eq!(argv[30], bulk(b"k28"));
    assert_eq!(argv[31], bulk(b"... (11 more arguments)"));
}

#[test]
fn slowlog_errors_and_help_match_redis() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "-2"]),
        Frame::Error(b"ERR count should be greater than or equal to -1".to_vec())
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "abc"]),
        Frame::Error(b"ERR count should be greater than or equal to -1".to_vec())
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "LEN", "x"]),
        Frame::Error(b"ERR wrong number of arguments for 'slowlog|len' command".to_vec())
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "NOPE"]),
        Frame::Error(b"ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP.".to_vec())
    );
    let Frame::Array(help) = c.cmd(&["SLOWLOG", "HELP"]) else {
        panic!()
    };
    assert_eq!(help.len(), 12);
    assert_eq!(
        help[0],
        Frame::Simple(b"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".to_vec())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "slowlog-*"]),
        Frame::Array(vec![
            bulk(b"slowlog-log-slower-than"),
            bulk(b"10000"),
            bulk(b"slowlog-max-len"),
            bulk(b"128"),
        ])
    );
}
