//! I/O threads (`io-threads N`, crates/net/src/io_threads.rs): what handing a turn's
//! socket reads and reply writes to other threads could break. Each server
//! here runs `io-threads 4` with reads threaded and the threads used for
//! every batch (`events-per-io-thread 0`), so every client's socket goes
//! back and forth between the execution thread and the I/O threads. The
//! command suites themselves run again with the threads in CI
//! (scripts/test.sh, `FERROKV_TESTS_IO_THREADS`).
mod common;

use common::*;
use ferrokv_resp::Frame;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const THREADED: &[&str] = &[
    "--io-threads",
    "4",
    "--io-threads-do-reads",
    "yes",
    "--events-per-io-thread",
    "0",
];

fn threaded(extra: &[&str]) -> ServerProcess {
    let mut args = THREADED.to_vec();
    args.extend_from_slice(extra);
    ServerProcess::ferrokv(&args)
}

fn int(f: Frame) -> i64 {
    match f {
        Frame::Integer(i) => i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// Reads (the replies sent before the close) until the server closes the
/// connection: true when it did, false when nothing came for 60 s.
fn reads_to_close(s: &mut impl Read) -> bool {
    let mut b = [0u8; 4096];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// A connection's frames, read in order however the socket cuts them
/// (several MONITOR lines often come in one segment).
struct Frames {
    sock: TcpStream,
    buf: Vec<u8>,
}

impl Frames {
    fn new(sock: TcpStream) -> Self {
        sock.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Frames {
            sock,
            buf: Vec::new(),
        }
    }

    fn next(&mut self) -> Frame {
        loop {
            if let Ok((f, n)) = Frame::decode(&self.buf) {
                self.buf.drain(..n);
                return f;
            }
            let mut b = [0u8; 16384];
            let n = self.sock.read(&mut b).unwrap();
            assert!(n > 0, "closed");
            self.buf.extend_from_slice(&b[..n]);
        }
    }
}

fn info_u64(s: &ServerProcess, section: &str, field: &str) -> u64 {
    s.info_field(section, field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn threads_are_named_and_their_work_counted() {
    let s = threaded(&[]);
    let mut r = s.raw();
    for i in 0..50 {
        assert_eq!(int(r.cmd(&["INCR", "n"])), i + 1);
    }
    let pid = s.child.id();
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    names.sort();
    for i in 1..=3 {
        assert!(
            names.contains(&format!("io-thread-{i}")),
            "no io-thread-{i} among {names:?}"
        );
    }
    // The execution thread keeps the process's name.
    let main = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/comm")).unwrap();
    assert_eq!(main.trim(), "ferrokv-server");
    assert!(info_u64(&s, "stats", "io_threaded_reads_processed") >= 50);
    assert!(info_u64(&s, "stats", "io_threaded_writes_processed") >= 50);
    assert_eq!(info_u64(&s, "server", "io_threads_active"), 1);
    assert_eq!(info_u64(&s, "threads", "io_threads"), 4);
    let threads = s.info_field("threads", "io_thread_1").unwrap();
    assert!(threads.starts_with("name=io-thread-1,reads="), "{threads}");
    // The threads decoded the INCRs ahead: all the commands, among them.
    let parsed: u64 = (1..=3)
        .map(|i| {
            let line = s.info_field("threads", &format!("io_thread_{i}")).unwrap();
            line.split(',')
                .find_map(|f| f.strip_prefix("parsed="))
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert!(parsed >= 50, "{parsed} commands decoded ahead");
}

#[test]
fn one_client_alone_is_served_by_the_execution_thread() {
    // The default events-per-io-thread (2), whatever the harness sets: a
    // batch of one client's request is too small to wake a thread for.
    let s = ServerProcess::ferrokv(&[
        "--io-threads",
        "4",
        "--io-threads-do-reads",
        "yes",
        "--events-per-io-thread",
        "2",
    ]);
    let mut r = s.raw();
    for _ in 0..100 {
        r.roundtrip(b"PING\r\n", b"+PONG\r\n");
    }
    assert_eq!(info_u64(&s, "stats", "io_threaded_reads_processed"), 0);
    assert_eq!(info_u64(&s, "stats", "io_threaded_writes_processed"), 0);
    assert_eq!(info_u64(&s, "server", "io_threads_active"), 0);
}

#[test]
fn pipelined_replies_stay_in_order_across_batches() {
    let s = threaded(&[]);
    let port = s.port;
    let workers: Vec<_> = (0..8)
        .map(|w| {
            std::thread::spawn(move || {
                let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
                sock.set_read_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let key = format!("k{w}");
                let mut sent = 0u64;
                let mut buf = Vec::new();
                let mut got = Vec::new();
                // Pipelines of 1 to 300 commands, cut across batches by the
                // socket as it pleases.
                for round in 0..60u64 {
                    let n = 1 + (round * 37 + w) % 300;
                    buf.clear();
                    for _ in 0..n {
                        buf.extend_from_slice(&Frame::command(&["INCR", &key]));
                    }
                    sock.write_all(&buf).unwrap();
                    let mut want = Vec::new();
                    for i in 0..n {
                        want.extend_from_slice(format!(":{}\r\n", sent + i + 1).as_bytes());
                    }
                    got.resize(want.len(), 0);
                    sock.read_exact(&mut got).unwrap();
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want),
                        "client {w}, round {round}"
                    );
                    sent += n;
                }
                sent
            })
        })
        .collect();
    for w in workers {
        assert!(w.join().unwrap() > 0);
    }
}

#[test]
fn a_huge_reply_to_a_slow_reader_arrives_whole() {
    let s = threaded(&[]);
    let mut r = s.raw();
    let value: Vec<u8> = (0..(32 << 20)).map(|i| (i % 251) as u8).collect();
    let mut set = Frame::command(&[b"SET".as_slice(), b"big", &value]);
    r.send(&set);
    assert_eq!(r.read_frame(), Frame::Simple(b"OK".to_vec()));
    set.clear();
    // A reader that takes 4 KiB at a time while another client is served:
    // the reply is written over many turns by the threads.
    let mut slow = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    slow.write_all(b"GET big\r\n").unwrap();
    let header = format!("${}\r\n", value.len());
    let mut got = Vec::with_capacity(value.len() + header.len() + 2);
    let mut chunk = [0u8; 4096];
    let mut other = s.raw();
    let mut pings = 0;
    while got.len() < value.len() + header.len() + 2 {
        let n = slow.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {} bytes", got.len());
        got.extend_from_slice(&chunk[..n]);
        if got.len() % (1 << 20) < 4096 {
            other.roundtrip(b"PING\r\n", b"+PONG\r\n");
            pings += 1;
        }
    }
    assert!(pings > 0);
    assert_eq!(&got[..header.len()], header.as_bytes());
    assert!(got[header.len()..header.len() + value.len()] == value[..]);
    assert_eq!(&got[header.len() + value.len()..], b"\r\n");
}

#[test]
fn a_client_closed_with_its_reply_in_flight_is_cleaned_up() {
    let s = threaded(&[]);
    let mut r = s.raw();
    let value = vec![b'v'; 8 << 20];
    r.send(&Frame::command(&[b"SET".as_slice(), b"big", &value]));
    assert_eq!(r.read_frame(), Frame::Simple(b"OK".to_vec()));
    for _ in 0..20 {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        // Several large replies asked for, a few bytes read, then gone.
        c.write_all(b"GET big\r\nGET big\r\nGET big\r\n").unwrap();
        let mut b = [0u8; 16];
        c.read_exact(&mut b).unwrap();
        drop(c);
    }
    // (`r` and the connection INFO itself comes on.)
    wait_for("the closed clients to go", 30, || {
        (info_u64(&s, "clients", "connected_clients") == 2).then_some(())
    });
    r.roundtrip(b"PING\r\n", b"+PONG\r\n");
    assert_eq!(
        int(r.cmd(&["STRLEN", "big"])),
        value.len() as i64,
        "the data set is untouched"
    );
}

#[test]
fn client_kill_and_eviction_reach_threaded_clients() {
    let s = threaded(&[]);
    let mut admin = s.raw();
    // A busy client, killed by id while its requests go through the threads.
    let mut victim = s.raw();
    let id = int(victim.cmd(&["CLIENT", "ID"]));
    victim.send(&Frame::command(&["SET", "a", "1"]).repeat(100));
    assert_eq!(
        int(admin.cmd(&["CLIENT", "KILL", "ID", &id.to_string()])),
        1
    );
    assert!(reads_to_close(&mut victim.s), "the killed client is closed");
    // A client holding 4 MB of an unfinished request: evicted when
    // maxmemory-clients goes under it.
    let mut hog = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    hog.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    hog.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nh\r\n$8000000\r\n")
        .unwrap();
    hog.write_all(&vec![b'x'; 4 << 20]).unwrap();
    wait_for("the hog's query buffer to fill", 30, || {
        let list = admin.cmd(&["CLIENT", "LIST"]);
        let text = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
        text.lines()
            .any(|l| {
                l.split(' ')
                    .find_map(|f| f.strip_prefix("qbuf="))
                    .is_some_and(|q| q.parse::<u64>().unwrap() >= 4 << 20)
            })
            .then_some(())
    });
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "2mb"]),
        Frame::Simple(b"OK".to_vec())
    );
    wait_for("the hog's eviction", 30, || {
        (info_u64(&s, "stats", "evicted_clients") >= 1).then_some(())
    });
    assert!(reads_to_close(&mut hog), "the hog is closed");
    admin.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn a_blocked_client_is_woken_by_another_clients_write() {
    let s = threaded(&[]);
    let mut waiters = Vec::new();
    for i in 0..4 {
        let mut w = s.raw();
        w.send(&Frame::command(&["BLPOP", &format!("q{i}"), "0"]));
        waiters.push(w);
    }
    wait_blocked(&s, 4);
    let mut pusher = s.raw();
    for i in 0..4 {
        assert_eq!(int(pusher.cmd(&["RPUSH", &format!("q{i}"), "job"])), 1);
    }
    for (i, w) in waiters.iter_mut().enumerate() {
        assert_eq!(
            w.read_frame(),
            Frame::Array(vec![
                Frame::Bulk(format!("q{i}").into_bytes()),
                Frame::Bulk(b"job".to_vec())
            ])
        );
    }
}

#[test]
fn monitor_and_tracking_output_arrive_in_order() {
    let s = threaded(&[]);
    let mut mon = Frames::new(TcpStream::connect(("127.0.0.1", s.port)).unwrap());
    mon.sock.write_all(b"MONITOR\r\n").unwrap();
    assert_eq!(mon.next(), Frame::Simple(b"OK".to_vec()));
    let mut tracked = s.raw();
    tracked.cmd(&["HELLO", "3"]);
    assert_eq!(
        tracked.cmd(&["CLIENT", "TRACKING", "on"]),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(tracked.cmd(&["GET", "t1"]), Frame::Null);
    let mut writer = s.raw();
    for i in 0..20 {
        writer.cmd(&["SET", "t1", &i.to_string()]);
        // Tracking resets after each invalidation: read it again.
        if i < 19 {
            match tracked.read_frame() {
                Frame::Push(p) => assert_eq!(p[0], Frame::Bulk(b"invalidate".to_vec())),
                other => panic!("expected an invalidation, got {other:?}"),
            }
            assert_eq!(
                tracked.cmd(&["GET", "t1"]),
                Frame::Bulk(i.to_string().into_bytes())
            );
        }
    }
    // The monitor saw the writer's SETs in the order they ran.
    let mut seen = 0;
    while seen < 20 {
        let Frame::Simple(line) = mon.next() else {
            panic!("MONITOR sends simple strings")
        };
        let line = String::from_utf8_lossy(&line).into_owned();
        if line.contains("\"SET\" \"t1\"") {
            assert!(
                line.ends_with(&format!("\"SET\" \"t1\" \"{seen}\"")),
                "{line}"
            );
            seen += 1;
        }
    }
}

#[test]
fn a_replica_and_scripts_under_load_end_with_equal_digests() {
    let master = threaded(&[]);
    let replica = threaded(&[]);
    let mut r = replica.raw();
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        Frame::Simple(b"OK".to_vec())
    );
    wait_for("the replica's link", 60, || {
        (replica
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up"))
        .then_some(())
    });
    let port = master.port;
    let writers: Vec<_> = (0..6)
        .map(|w| {
            std::thread::spawn(move || {
                let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
                sock.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let script = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]); return redis.call('INCR', KEYS[2])";
                let mut replies = vec![0u8; 0];
                for i in 0..300 {
                    let mut buf = Vec::new();
                    for j in 0..10 {
                        let f = (i * 10 + j).to_string();
                        buf.extend_from_slice(&Frame::command(&[
                            "EVAL",
                            script,
                            "2",
                            &format!("h{w}"),
                            &format!("c{w}"),
                            &f,
                            &f,
                        ]));
                        buf.extend_from_slice(&Frame::command(&["LPUSH", &format!("l{w}"), &f]));
                    }
                    sock.write_all(&buf).unwrap();
                    // 20 integer replies.
                    let mut lines = 0;
                    let mut b = [0u8; 4096];
                    while lines < 20 {
                        let n = sock.read(&mut b).unwrap();
                        assert!(n > 0);
                        replies.extend_from_slice(&b[..n]);
                        lines += b[..n].iter().filter(|&&c| c == b'\n').count();
                    }
                    assert!(!replies.contains(&b'-'), "{}", String::from_utf8_lossy(&replies));
                    replies.clear();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut m = master.raw();
    assert_eq!(int(m.cmd(&["WAIT", "1", "60000"])), 1);
    let digest = |s: &ServerProcess| s.raw().cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(digest(&master), digest(&replica));
    assert_eq!(int(r.cmd(&["HLEN", "h3"])), 3000);
    assert_eq!(int(r.cmd(&["LLEN", "l5"])), 3000);
}

#[test]
fn shutdown_with_the_threads_busy_exits_cleanly() {
    let mut s = threaded(&[]);
    let port = s.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loaders: Vec<_> = (0..4)
        .map(|w| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
                sock.set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let buf = Frame::command(&["SET", &format!("k{w}"), "v"]).repeat(200);
                let mut b = vec![0u8; 64 * 1024];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if sock.write_all(&buf).is_err() {
                        return;
                    }
                    match sock.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            })
        })
        .collect();
    wait_for("the load to reach the threads", 30, || {
        (info_u64(&s, "stats", "io_threaded_reads_processed") > 100).then_some(())
    });
    let mut admin = s.raw();
    admin.send(b"SHUTDOWN NOSAVE\r\n");
    let status = wait_for("the server to exit", 60, || s.child.try_wait().unwrap());
    assert!(status.success(), "exit status {status:?}\n{}", s.log());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for l in loaders {
        l.join().unwrap();
    }
}
