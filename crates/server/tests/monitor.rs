//! Guards MONITOR against Redis 7.0.15: the line format and its escaping,
//! which commands are shown and in what order (after they ran: refused,
//! admin and AOF-replayed commands never; MULTI/queued/EXEC; a blocked
//! command once; scripts, then their calls as `lua`), the redaction of
//! AUTH/HELLO/MIGRATE secrets, the monitor connection's own rules (no
//! keyspace, flag `O`, a second MONITOR unanswered, RESET, RESP3, CLIENT
//! REPLY), Unix-socket peers, the normal output limit closing a monitor
//! that does not read, a replica's monitor showing its master's stream,
//! and redis-py's `monitor()`.
//!
//! Lines are compared exactly but for the timestamp, which is checked to
//! be `<secs>.<6 digits>` within the test's wall-clock window; peers are
//! the test connections' own addresses. Set `FERROKV_TESTS_TARGET=redis`
//! to run the same assertions against the real `redis-server`.
mod common;
use common::reply::against_redis;
use common::{wait_for, Raw, ServerProcess, Stream};
use ferrokv_resp::Frame;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn start(extra: &[&str]) -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(extra)
    } else {
        ServerProcess::ferrokv(extra)
    }
}

/// A TCP connection whatever `FERROKV_TESTS_TRANSPORT` says: the lines
/// name peers, and these tests name them by their TCP address.
fn tcp(srv: &ServerProcess) -> Raw {
    let s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    Raw { s: Stream::Tcp(s) }
}

fn peer(c: &Raw) -> String {
    c.s.local_addr().unwrap()
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A connection in monitor mode, reading its lines.
struct Monitor {
    s: Raw,
    buf: Vec<u8>,
}

impl Monitor {
    fn start(srv: &ServerProcess) -> Monitor {
        let mut s = tcp(srv);
        assert_eq!(s.cmd(&["MONITOR"]), Frame::Simple(b"OK".to_vec()));
        Monitor { s, buf: Vec::new() }
    }

    fn from(s: Raw) -> Monitor {
        Monitor { s, buf: Vec::new() }
    }

    /// The next `\r\n`-terminated line, whole (`+...` or any reply line).
    fn raw_line(&mut self) -> Vec<u8> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..end].to_vec();
                self.buf.drain(..end + 2);
                return line;
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.s.read(&mut chunk).expect("a monitor line");
            assert!(n > 0, "monitor connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next monitor line with its timestamp checked and cut off:
    /// `[db peer] "arg" ...`.
    fn line(&mut self) -> String {
        let t0 = now_secs();
        let raw = self.raw_line();
        let text = String::from_utf8(raw).expect("monitor lines are ASCII");
        let rest = text
            .strip_prefix('+')
            .unwrap_or_else(|| panic!("not a simple string: {text:?}"));
        let (ts, rest) = rest.split_once(' ').expect("timestamp");
        let (secs, usecs) = ts.split_once('.').expect("secs.usecs");
        assert!(
            usecs.len() == 6 && usecs.bytes().all(|b| b.is_ascii_digit()),
            "{text:?}"
        );
        let t: f64 = format!("{secs}.{usecs}").parse().unwrap();
        // Shown before this read began (the test's commands ran first) but
        // not in the future.
        assert!(t <= now_secs() + 1.0 && t >= t0 - 60.0, "{text:?}");
        rest.to_string()
    }

    /// The next line, a monitor line as [`Monitor::line`] gives it behind
    /// `M `, any other reply line as it is.
    fn any_line(&mut self) -> String {
        let raw = self.raw_line();
        let is_monitor_line = raw.len() > 1 && raw[0] == b'+' && raw[1].is_ascii_digit();
        if is_monitor_line {
            let mut rest = raw;
            rest.extend_from_slice(b"\r\n");
            rest.extend_from_slice(&self.buf);
            self.buf = rest;
            format!("M {}", self.line())
        } else {
            String::from_utf8(raw).unwrap()
        }
    }

    /// Lines up to and including the one ending in `"ECHO" "<mark>"`.
    fn lines_until(&mut self, mark: &str) -> Vec<String> {
        let end = format!("\"ECHO\" \"{mark}\"");
        let mut out = Vec::new();
        loop {
            let l = self.line();
            let done = l.ends_with(&end);
            out.push(l);
            if done {
                return out;
            }
        }
    }

    /// Nothing arrives within `ms`.
    fn assert_silent(&mut self, ms: u64) {
        assert!(
            self.buf.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&self.buf)
        );
        self.s
            .s
            .set_read_timeout(Some(Duration::from_millis(ms)))
            .unwrap();
        let mut b = [0u8; 256];
        match self.s.s.read(&mut b) {
            Ok(n) => panic!("unexpected: {:?}", String::from_utf8_lossy(&b[..n])),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{e}"
            ),
        }
        self.s
            .s
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
    }
}

/// Sends each command and reads its reply (the replies themselves are
/// other suites' business), then `ECHO <mark>`.
fn run(c: &mut Raw, cmds: &[&[&[u8]]], mark: &str) {
    for cmd in cmds {
        c.cmd(cmd);
    }
    c.cmd(&["ECHO", mark]);
}

fn lines(db: usize, p: &str, cmds: &[&str]) -> Vec<String> {
    cmds.iter().map(|c| format!("[{db} {p}] {c}")).collect()
}

#[test]
fn commands_are_shown_after_they_ran_in_redis_line_format() {
    let srv = start(&[]);
    let mut m = Monitor::start(&srv);
    let mut c = tcp(&srv);
    let p = peer(&c);
    run(
        &mut c,
        &[
            &[b"SET", b"k", b"v"],
            &[b"GET", b"k"],
            &[
                b"SET",
                b"bin",
                b"a\\b\"c\n\r\t\x07\x08\x00\xff\x7f \xc3\xa9",
            ],
            &[b"NOSUCH", b"x"],
            &[b"GET"],
            &[b"CONFIG", b"GET", b"maxmemory"],
            &[b"CLIENT", b"LIST"],
            &[b"CLIENT", b"NO-EVICT", b"on"],
            &[b"SLOWLOG", b"GET"],
            &[b"CLIENT", b"SETNAME", b"mon"],
            &[b"INCR", b"k"],
            &[b"SELECT", b"3"],
            &[b"SET", b"z", b"1"],
            &[b"PING"],
            &[b"SELECT", b"0"],
        ],
        "end",
    );
    let mut want = lines(
        0,
        &p,
        &[
            r#""SET" "k" "v""#,
            r#""GET" "k""#,
            r#""SET" "bin" "a\\b\"c\n\r\t\a\b\x00\xff\x7f \xc3\xa9""#,
            r#""CLIENT" "SETNAME" "mon""#,
            // Failed, and shown: it ran.
            r#""INCR" "k""#,
        ],
    );
    want.extend(lines(
        3,
        &p,
        &[r#""SELECT" "3""#, r#""SET" "z" "1""#, r#""PING""#],
    ));
    want.extend(lines(0, &p, &[r#""SELECT" "0""#, r#""ECHO" "end""#]));
    assert_eq!(m.lines_until("end"), want);
    m.assert_silent(100);
}

#[test]
fn transactions_show_multi_then_their_commands_then_exec() {
    let srv = start(&[]);
    let mut m = Monitor::start(&srv);
    let mut c = tcp(&srv);
    let p = peer(&c);
    run(
        &mut c,
        &[
            &[b"MULTI"],
            &[b"SET", b"a", b"1"],
            &[b"SELECT", b"5"],
            &[b"INCR", b"a"],
            &[b"EXEC"],
            &[b"SELECT", b"0"],
            &[b"MULTI"],
            &[b"GET", b"a"],
            &[b"DISCARD"],
            // Refused while queueing: EXEC still runs (and aborts).
            &[b"MULTI"],
            &[b"SET", b"a"],
            &[b"EXEC"],
            &[b"MULTI"],
            &[b"MONITOR"],
            &[b"EXEC"],
        ],
        "end",
    );
    let mut want = lines(0, &p, &[r#""MULTI""#, r#""SET" "a" "1""#]);
    want.extend(lines(
        5,
        &p,
        &[r#""SELECT" "5""#, r#""INCR" "a""#, r#""EXEC""#],
    ));
    want.extend(lines(
        0,
        &p,
        &[
            r#""SELECT" "0""#,
            r#""MULTI""#,
            r#""DISCARD""#,
            r#""MULTI""#,
            r#""EXEC""#,
            r#""MULTI""#,
            r#""EXEC""#,
            r#""ECHO" "end""#,
        ],
    ));
    assert_eq!(m.lines_until("end"), want);
    // MONITOR inside EXEC is refused with Redis's text.
    assert_eq!(c.cmd(&["MULTI"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(c.cmd(&["MONITOR"]), Frame::Simple(b"QUEUED".to_vec()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![Frame::Error(
            b"ERR MONITOR isn't allowed for DENY BLOCKING client".to_vec()
        )])
    );
}

#[test]
fn scripts_show_themselves_then_their_calls_as_lua() {
    let srv = start(&[]);
    let mut m = Monitor::start(&srv);
    let mut c = tcp(&srv);
    let p = peer(&c);
    let lib = b"#!lua name=monlib\nredis.register_function('f', function(k, a) return redis.call('set', k[1], a[1]) end)\nredis.register_function{function_name='g', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}";
    run(
        &mut c,
        &[
            &[b"SELECT", b"1"],
            &[
                b"EVAL",
                b"redis.call('set', KEYS[1], 'x'); return redis.call('get', KEYS[1])",
                b"1",
                b"s",
            ],
            &[
                b"EVALSHA",
                b"0000000000000000000000000000000000000000",
                b"0",
            ],
            // The inner call is refused: only EVAL is shown.
            &[b"EVAL", b"return redis.pcall('get')", b"0"],
            &[b"EVAL_RO", b"return redis.call('get', 's')", b"0"],
            &[b"SCRIPT", b"LOAD", b"return 1"],
            &[
                b"EVALSHA",
                b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
                b"0",
            ],
            &[b"FUNCTION", b"LOAD", lib],
            &[b"FCALL", b"f", b"1", b"fk", b"fv"],
            &[b"FCALL_RO", b"g", b"1", b"fk"],
            &[b"FCALL", b"nosuch", b"0"],
            &[b"FUNCTION", b"DELETE", b"monlib"],
        ],
        "end",
    );
    let mut want = lines(0, &p, &[]);
    want.extend(lines(
        1,
        &p,
        &[
            r#""SELECT" "1""#,
            r#""EVAL" "redis.call('set', KEYS[1], 'x'); return redis.call('get', KEYS[1])" "1" "s""#,
        ],
    ));
    want.extend(lines(1, "lua", &[r#""set" "s" "x""#, r#""get" "s""#]));
    want.extend(lines(
        1,
        &p,
        &[
            r#""EVALSHA" "0000000000000000000000000000000000000000" "0""#,
            r#""EVAL" "return redis.pcall('get')" "0""#,
            r#""EVAL_RO" "return redis.call('get', 's')" "0""#,
        ],
    ));
    want.extend(lines(1, "lua", &[r#""get" "s""#]));
    want.extend(lines(
        1,
        &p,
        &[
            r#""SCRIPT" "LOAD" "return 1""#,
            r#""EVALSHA" "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" "0""#,
            r##""FUNCTION" "LOAD" "#!lua name=monlib\nredis.register_function('f', function(k, a) return redis.call('set', k[1], a[1]) end)\nredis.register_function{function_name='g', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}""##,
            r#""FCALL" "f" "1" "fk" "fv""#,
        ],
    ));
    want.extend(lines(1, "lua", &[r#""set" "fk" "fv""#]));
    want.extend(lines(1, &p, &[r#""FCALL_RO" "g" "1" "fk""#]));
    want.extend(lines(1, "lua", &[r#""get" "fk""#]));
    want.extend(lines(
        1,
        &p,
        &[
            r#""FCALL" "nosuch" "0""#,
            r#""FUNCTION" "DELETE" "monlib""#,
            r#""ECHO" "end""#,
        ],
    ));
    assert_eq!(m.lines_until("end"), want);
}

#[test]
fn auth_hello_and_migrate_secrets_are_redacted_as_redis_7_0_does() {
    let srv = start(&[]);
    let mut m = Monitor::start(&srv);
    let mut c = tcp(&srv);
    let p = peer(&c);
    let mig = |rest: &[&'static [u8]]| {
        let mut v: Vec<&[u8]> = vec![b"MIGRATE", b"127.0.0.1", b"1", b"k", b"0", b"10"];
        v.extend_from_slice(rest);
        v
    };
    let cmds: Vec<Vec<&[u8]>> = vec![
        vec![b"AUTH", b"secret"],
        vec![b"AUTH", b"user", b"secret"],
        vec![b"AUTH", b"a", b"b", b"c"],
        vec![b"HELLO", b"2", b"AUTH", b"default", b"pw", b"SETNAME", b"n"],
        vec![b"HELLO", b"2", b"SETNAME", b"n", b"AUTH", b"default", b"pw"],
        vec![
            b"HELLO", b"2", b"AUTH", b"default", b"p1", b"AUTH", b"default", b"p2",
        ],
        // A failed authentication ends HELLO's option loop.
        vec![
            b"HELLO", b"2", b"AUTH", b"nobody", b"p1", b"AUTH", b"v", b"p2",
        ],
        vec![b"HELLO", b"x", b"AUTH", b"u", b"p"],
        vec![b"HELLO", b"4", b"AUTH", b"u", b"p"],
        vec![b"HELLO", b"2", b"FOO", b"AUTH", b"u", b"p"],
        vec![b"HELLO", b"2", b"AUTH", b"u"],
        mig(&[b"AUTH", b"pw", b"BAD", b"AUTH", b"pw2"]),
        mig(&[b"COPY", b"REPLACE", b"auth2", b"u", b"p"]),
        mig(&[b"AUTH"]),
        mig(&[b"AUTH2", b"u"]),
        vec![
            b"MIGRATE",
            b"127.0.0.1",
            b"1",
            b"",
            b"0",
            b"10",
            b"KEYS",
            b"AUTH",
            b"pw",
        ],
    ];
    for cmd in &cmds {
        c.cmd(cmd);
    }
    c.cmd(&["ECHO", "end"]);
    let want = lines(
        0,
        &p,
        &[
            r#""AUTH" "(redacted)""#,
            r#""AUTH" "(redacted)" "(redacted)""#,
            r#""AUTH" "a" "b" "c""#,
            r#""HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n""#,
            r#""HELLO" "2" "SETNAME" "n" "AUTH" "(redacted)" "(redacted)""#,
            r#""HELLO" "2" "AUTH" "(redacted)" "(redacted)" "AUTH" "(redacted)" "(redacted)""#,
            r#""HELLO" "2" "AUTH" "(redacted)" "(redacted)" "AUTH" "v" "p2""#,
            r#""HELLO" "x" "AUTH" "u" "p""#,
            r#""HELLO" "4" "AUTH" "u" "p""#,
            r#""HELLO" "2" "FOO" "AUTH" "u" "p""#,
            r#""HELLO" "2" "AUTH" "u""#,
            r#""MIGRATE" "127.0.0.1" "1" "k" "0" "10" "AUTH" "(redacted)" "BAD" "AUTH" "pw2""#,
            r#""MIGRATE" "127.0.0.1" "1" "k" "0" "10" "COPY" "REPLACE" "auth2" "(redacted)" "(redacted)""#,
            r#""MIGRATE" "127.0.0.1" "1" "k" "0" "10" "AUTH""#,
            r#""MIGRATE" "127.0.0.1" "1" "k" "0" "10" "AUTH2" "u""#,
            r#""MIGRATE" "127.0.0.1" "1" "" "0" "10" "KEYS" "AUTH" "pw""#,
            r#""ECHO" "end""#,
        ],
    );
    assert_eq!(m.lines_until("end"), want);
}

#[test]
fn a_blocked_command_is_shown_once_when_it_blocks() {
    let srv = start(&[]);
    let mut m = Monitor::start(&srv);
    let mut c = tcp(&srv);
    let mut b = tcp(&srv);
    let (pc, pb) = (peer(&c), peer(&b));
    b.send(&Frame::command(&["BLPOP", "l", "0"]));
    assert_eq!(m.line(), format!(r#"[0 {pb}] "BLPOP" "l" "0""#));
    c.cmd(&["RPUSH", "l", "a"]);
    assert_eq!(
        b.read_frame(),
        Frame::Array(vec![Frame::Bulk(b"l".to_vec()), Frame::Bulk(b"a".to_vec())])
    );
    assert_eq!(b.cmd(&["BLPOP", "l", "0.05"]), Frame::Null);
    b.send(&Frame::command(&[
        "XREAD", "BLOCK", "0", "STREAMS", "s", "$",
    ]));
    assert_eq!(
        m.line(),
        format!(r#"[0 {pc}] "RPUSH" "l" "a""#),
        "the served BLPOP is not shown again"
    );
    assert_eq!(m.line(), format!(r#"[0 {pb}] "BLPOP" "l" "0.05""#));
    assert_eq!(
        m.line(),
        format!(r#"[0 {pb}] "XREAD" "BLOCK" "0" "STREAMS" "s" "$""#)
    );
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    assert!(matches!(b.read_frame(), Frame::Array(_)));
    c.cmd(&["ECHO", "end"]);
    assert_eq!(
        m.lines_until("end"),
        lines(0, &pc, &[r#""XADD" "s" "1-1" "f" "v""#, r#""ECHO" "end""#])
    );
}

#[test]
fn the_monitor_connection_follows_redis_rules() {
    let srv = start(&[]);
    let mut s = tcp(&srv);
    let pm = peer(&s);
    s.cmd(&["SELECT", "2"]);
    assert_eq!(s.cmd(&["MONITOR"]), Frame::Simple(b"OK".to_vec()));
    let mut m = Monitor::from(s);
    // A second MONITOR is not answered; its own commands come back as its
    // reply, then its line.
    m.s.send(&Frame::command(&["MONITOR"]));
    m.s.send(&Frame::command(&["PING"]));
    assert_eq!(m.raw_line(), b"+PONG");
    assert_eq!(m.line(), format!(r#"[2 {pm}] "PING""#));
    // No keyspace, and nothing shown for the refusal.
    m.s.send(&Frame::command(&["GET", "k"]));
    assert_eq!(
        m.raw_line(),
        b"-ERR Replica can't interact with the keyspace"
    );
    m.s.send(&Frame::command(&["SET", "k", "v"]));
    assert_eq!(
        m.raw_line(),
        b"-ERR Replica can't interact with the keyspace"
    );
    m.s.send(&Frame::command(&["CLIENT", "INFO"]));
    assert!(m.raw_line().starts_with(b"$"), "a bulk reply");
    let info = String::from_utf8(m.raw_line()).unwrap();
    assert!(info.contains(" flags=O "), "{info}");
    assert!(info.contains(" cmd=client|info "), "{info}");
    assert_eq!(m.line(), format!(r#"[2 {pm}] "CLIENT" "INFO""#));
    // CLIENT REPLY OFF silences the lines too.
    let mut c = tcp(&srv);
    let pc = peer(&c);
    m.s.send(&Frame::command(&["CLIENT", "REPLY", "OFF"]));
    m.s.send(&Frame::command(&["PING"]));
    std::thread::sleep(Duration::from_millis(50));
    c.cmd(&["SET", "quiet", "1"]);
    m.s.send(&Frame::command(&["CLIENT", "REPLY", "ON"]));
    assert_eq!(m.raw_line(), b"+OK");
    assert_eq!(m.line(), format!(r#"[2 {pm}] "CLIENT" "REPLY" "ON""#));
    c.cmd(&["SET", "loud", "1"]);
    assert_eq!(m.line(), format!(r#"[0 {pc}] "SET" "loud" "1""#));
    // RESET leaves monitor mode.
    m.s.send(&Frame::command(&["RESET"]));
    assert_eq!(m.raw_line(), b"+RESET");
    c.cmd(&["SET", "after", "1"]);
    m.assert_silent(100);
    let info = m.s.cmd(&["CLIENT", "INFO"]);
    let info = String::from_utf8(info.as_bytes().unwrap().to_vec()).unwrap();
    assert!(info.contains(" flags=N "), "{info}");
    assert_eq!(m.s.cmd(&["GET", "after"]), Frame::Bulk(b"1".to_vec()));
}

#[test]
fn a_resp3_monitor_gets_the_same_simple_string_lines() {
    let srv = start(&[]);
    let mut s = tcp(&srv);
    assert!(matches!(s.cmd(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(s.cmd(&["MONITOR"]), Frame::Simple(b"OK".to_vec()));
    let mut m = Monitor::from(s);
    let mut c = tcp(&srv);
    let p = peer(&c);
    c.cmd(&["SUBSCRIBE", "ch"]);
    assert_eq!(m.line(), format!(r#"[0 {p}] "SUBSCRIBE" "ch""#));
}

#[test]
fn unix_socket_peers_show_the_servers_socket_path() {
    let own = std::env::temp_dir().join(format!("ferrokv-monitor-{}.sock", std::process::id()));
    let own_s = own.display().to_string();
    let srv = match common::over_unix() {
        true => start(&[]),
        false => start(&["--unixsocket", &own_s]),
    };
    let path = srv.unix.clone().unwrap_or(own);
    let mut m = Monitor::start(&srv);
    let u = std::os::unix::net::UnixStream::connect(&path).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut u = Raw { s: Stream::Unix(u) };
    u.cmd(&["SET", "uk", "1"]);
    assert_eq!(
        m.line(),
        format!(r#"[0 unix:{}] "SET" "uk" "1""#, path.display())
    );
}

#[test]
fn a_monitor_that_does_not_read_is_closed_by_the_normal_output_limit() {
    let srv = start(&[]);
    let mut c = tcp(&srv);
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0"
        ]),
        Frame::Simple(b"OK".to_vec())
    );
    // A small receive window, so the kernel holds little for it.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", srv.port).parse().unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut mon: TcpStream = sock.into();
    mon.write_all(&Frame::command(&["MONITOR"])).unwrap();
    let mut ok = [0u8; 5];
    mon.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    let big = vec![b'x'; 100_000];
    let mut closed = false;
    // At most 200 MB of lines (it goes within the first few MB).
    for i in 0..2000 {
        c.cmd(&[&b"SET"[..], b"big", &big]);
        if i % 10 == 9 {
            let list = c.cmd(&["CLIENT", "LIST"]);
            let list = String::from_utf8(list.as_bytes().unwrap().to_vec()).unwrap();
            if !list.contains("flags=O") {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "the monitor was never closed");
    // What it is sent ends: the connection is closed, not stalled.
    mon.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    mon.read_to_end(&mut got).expect("closed by the server");
    assert!(got.starts_with(b"+"), "lines before the close");
    assert_eq!(c.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
}

#[test]
fn a_replicas_monitor_shows_its_masters_stream() {
    replica_monitor_shows_the_stream_of(start(&["--repl-diskless-sync-delay", "0"]));
}

/// The same with redis-server 7.0.15 as the master of the server under
/// test: a ferrokv replica shows a Redis master's stream as a Redis replica
/// does.
#[test]
fn a_replicas_monitor_shows_a_redis_masters_stream() {
    replica_monitor_shows_the_stream_of(ServerProcess::redis(&["--repl-diskless-sync-delay", "0"]));
}

fn replica_monitor_shows_the_stream_of(master: ServerProcess) {
    let port = master.port.to_string();
    let replica = start(&["--replicaof", "127.0.0.1", &port]);
    wait_for("the replica's link", 30, || {
        replica
            .info_field("replication", "master_link_status")
            .filter(|s| s == "up")
    });
    let mut m = Monitor::start(&replica);
    let mut c = tcp(&master);
    for cmd in [
        &["SET", "rk", "1"][..],
        &["SELECT", "4"],
        &["INCR", "rk"],
        &["SET", "e", "1", "PXAT", "4102444800000"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["SET", "b", "2"],
        &["EXEC"],
        &["EVAL", "redis.call('set', 's', '1')", "0"],
        &["ECHO", "not propagated"],
        &["SET", "last", "1"],
    ] {
        c.cmd(cmd);
    }
    let src = format!("127.0.0.1:{port}");
    let mut got = Vec::new();
    while !got
        .last()
        .is_some_and(|l: &String| l.ends_with(r#""last" "1""#))
    {
        let l = m.line();
        // The master's pings come every 10 s, whenever.
        if !l.ends_with(r#"] "ping""#) && !l.ends_with(r#"] "PING""#) {
            got.push(l);
        }
    }
    let mut want = lines(0, &src, &[r#""SELECT" "0""#, r#""SET" "rk" "1""#]);
    want.extend(lines(
        4,
        &src,
        &[
            r#""SELECT" "4""#,
            r#""INCR" "rk""#,
            r#""SET" "e" "1" "PXAT" "4102444800000""#,
            r#""MULTI""#,
            r#""SET" "a" "1""#,
            r#""SET" "b" "2""#,
            r#""EXEC""#,
            r#""set" "s" "1""#,
            r#""SET" "last" "1""#,
        ],
    ));
    assert_eq!(got, want);
}

#[test]
fn redis_py_monitor_parses_the_lines() {
    let srv = start(&[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_monitor.py"
    );
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(srv.port.to_string())
        .output()
        .expect("python3 with redis-py is required");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("monitor: OK"), "{text}");
}

#[test]
fn command_docs_and_flags_of_monitor_are_redis_s() {
    let srv = start(&[]);
    let mut c = tcp(&srv);
    let b = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
    let docs = match c.cmd(&["COMMAND", "DOCS", "monitor"]) {
        // RESP2: a flat array of name, then the docs as a flat array.
        Frame::Array(v) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        docs,
        vec![
            b("monitor"),
            Frame::Array(vec![
                b("summary"),
                b("Listen for all requests received by the server in real time"),
                b("since"),
                b("1.0.0"),
                b("group"),
                b("server"),
            ])
        ]
    );
    let Frame::Array(info) = c.cmd(&["COMMAND", "INFO", "monitor"]) else {
        panic!("COMMAND INFO");
    };
    let Frame::Array(row) = &info[0] else {
        panic!("{info:?}");
    };
    assert_eq!(row[0], b("monitor"));
    assert_eq!(row[1], Frame::Integer(1));
    let flags = ["admin", "noscript", "loading", "stale"]
        .iter()
        .map(|f| Frame::Simple(f.as_bytes().to_vec()))
        .collect();
    assert_eq!(row[2], Frame::Array(flags));
}

#[test]
fn a_monitors_own_transaction_and_reply_modes_interleave_as_in_redis() {
    let srv = start(&[]);
    let mut m = Monitor::start(&srv);
    let p = peer(&m.s);
    let mut req = Vec::new();
    for cmd in [
        &["MULTI"][..],
        &["PING"],
        &["ECHO", "x"],
        &["EXEC"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PING"],
        &["ECHO", "after"],
    ] {
        req.extend(Frame::command(cmd));
    }
    m.s.send(&req);
    let got: Vec<String> = (0..14).map(|_| m.any_line()).collect();
    let l = |c: &str| format!("M [0 {p}] {c}");
    assert_eq!(
        got,
        vec![
            "+OK".to_string(),
            l(r#""MULTI""#),
            "+QUEUED".into(),
            "+QUEUED".into(),
            // Each queued command's line follows its reply, inside EXEC's.
            "*2".into(),
            "+PONG".into(),
            l(r#""PING""#),
            "$1".into(),
            "x".into(),
            l(r#""ECHO" "x""#),
            l(r#""EXEC""#),
            // SKIP silences the next command's reply and its line.
            l(r#""CLIENT" "REPLY" "SKIP""#),
            "$5".into(),
            "after".into(),
        ]
    );
    assert_eq!(m.line(), format!(r#"[0 {p}] "ECHO" "after""#));
}
