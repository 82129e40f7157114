//! The event loop's kernel interface (`io-backend`, docs/io-uring.md):
//! the choice `auto` makes, its fallback where io_uring is refused (the
//! server started under a seccomp filter that refuses `io_uring_setup`, as
//! container runtimes' default profiles do), and the io_uring backend's
//! buffer lifetimes under connections killed in the middle of receives and
//! sends. The command suites themselves run under both backends in CI
//! (scripts/test.sh, `FERROKV_TESTS_IO_BACKEND`).
mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this process may make an io_uring at all (the tests of the
/// io_uring backend are skipped, saying so, where it may not).
fn io_uring_allowed() -> bool {
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup(2) with a zeroed `struct io_uring_params`
    // (120 bytes); the fd it returns, if any, is closed at once.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
    if fd < 0 {
        return false;
    }
    // SAFETY: a fd we just got.
    unsafe { libc::close(fd as i32) };
    true
}

/// A seccomp filter that makes `io_uring_setup` fail with EPERM, installed
/// in the child before it executes the server (what Docker's and
/// Podman's default profiles do).
fn refuse_io_uring() -> std::io::Result<()> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
    let arch = if cfg!(target_arch = "x86_64") {
        AUDIT_ARCH_X86_64
    } else {
        AUDIT_ARCH_AARCH64
    };
    let stmt = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    let ld = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let filter = [
        // seccomp_data.arch at offset 4: another ABI goes through.
        stmt(ld, 4),
        jump(jeq, arch, 0, 3),
        // seccomp_data.nr at offset 0.
        stmt(ld, 0),
        jump(jeq, libc::SYS_io_uring_setup as u32, 0, 1),
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl calls with a filter that lives across them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The server with `args`, io_uring refused to it; its log, and its
/// process if it started (which the caller kills and waits for).
#[allow(clippy::zombie_processes)]
fn start_without_io_uring(args: &[&str]) -> (Option<std::process::Child>, u16, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrokv-server"));
    cmd.args([
        "--port",
        &port.to_string(),
        "--dir",
        dir.path().to_str().unwrap(),
    ])
    .args(args)
    .stdout(Stdio::from(log.try_clone().unwrap()))
    .stderr(Stdio::from(log));
    // SAFETY: the closure only makes two prctl calls (async-signal-safe).
    unsafe {
        cmd.pre_exec(refuse_io_uring);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            let _ = child.wait();
            return (None, port, dir);
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (Some(child), port, dir);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server neither started nor exited");
}

fn info_server(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while !String::from_utf8_lossy(&out).contains("server_time_usec") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed the connection");
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn auto_runs_on_io_uring_where_allowed_and_on_epoll_where_refused() {
    if !io_uring_allowed() {
        eprintln!("SKIPPED: this process may not use io_uring (auto runs on epoll here)");
        return;
    }
    let s = ServerProcess::ferrokv(&["--io-backend", "auto"]);
    let info = s.info_field("server", "multiplexing_api");
    assert_eq!(info.as_deref(), Some("io_uring"));
    let mut c = s.client();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("io-backend")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["io-backend", "auto"]);
    // Chosen at start: not settable at run time (Redis's immutable configs).
    let e = redis::cmd("CONFIG")
        .arg("SET")
        .arg("io-backend")
        .arg("epoll")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("immutable"), "{e}");
    let epoll = ServerProcess::ferrokv(&["--io-backend", "epoll"]);
    assert_eq!(
        epoll.info_field("server", "multiplexing_api").as_deref(),
        Some("epoll")
    );

    // auto where io_uring is refused: epoll, with one log line saying why.
    let (child, port, dir) = start_without_io_uring(&["--io-backend", "auto"]);
    let mut child = child.expect("auto starts without io_uring");
    let info = info_server(port);
    let _ = child.kill();
    let _ = child.wait();
    assert!(info.contains("multiplexing_api:epoll"), "{info}");
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert_eq!(
        log.matches("io_uring is not available here").count(),
        1,
        "{log}"
    );
    assert!(log.contains("Operation not permitted"), "{log}");

    // uring where it is refused: no start, and the reason.
    let (child, _, dir) = start_without_io_uring(&["--io-backend", "uring"]);
    assert!(child.is_none(), "io-backend uring started without io_uring");
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(
        log.contains("io-backend uring: io_uring is not available here"),
        "{log}"
    );
}

/// One connection of the killer threads: a pipeline of writes and large
/// reads sent, a part of the replies read (or none), then a reset (linger
/// 0) while the server still receives and sends.
fn kill_mid_operation(port: u16, round: usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = Vec::new();
    for i in 0..64 {
        let key = format!("k:{}:{}", round % 7, i % 5);
        let val = "v".repeat(100 + (round * 131 + i * 17) % 4000);
        req.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{val}\r\n",
                key.len(),
                val.len()
            )
            .as_bytes(),
        );
        // Large replies: 200 KB each, so sends are in flight when it dies.
        req.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    }
    // Sometimes cut the request itself in the middle.
    let cut = if round.is_multiple_of(3) {
        req.len() / 2 + 7
    } else {
        req.len()
    };
    let _ = s.write_all(&req[..cut]);
    let mut buf = vec![0u8; 1 + (round * 7919) % 300_000];
    if round.is_multiple_of(2) {
        let _ = s.read(&mut buf);
    }
    let sock = socket2::SockRef::from(&s);
    let _ = sock.set_linger(Some(Duration::ZERO));
    drop(s);
}

#[test]
fn connections_killed_mid_receive_and_mid_send_leave_the_server_whole() {
    let backend = if io_uring_allowed() { "uring" } else { "epoll" };
    if backend == "epoll" {
        eprintln!("SKIPPED for io_uring: this process may not use it (run on epoll)");
    }
    let s = ServerProcess::ferrokv(&["--io-backend", backend, "--metrics-port", FREE_PORT]);
    let mut c = s.client();
    let big = "b".repeat(200_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let port = s.port;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for r in 0..60 {
                    kill_mid_operation(port, t * 1000 + r);
                }
            })
        })
        .collect();
    // A bystander meanwhile: every INCR acknowledged is counted, and every
    // large reply arrives whole.
    let mut acked = 0i64;
    let mut bystander = s.client();
    while threads.iter().any(|t| !t.is_finished()) {
        let n: i64 = redis::cmd("INCR")
            .arg("counter")
            .query(&mut bystander)
            .unwrap();
        acked += 1;
        assert_eq!(n, acked);
        let v: Vec<u8> = redis::cmd("GET").arg("big").query(&mut bystander).unwrap();
        assert_eq!(v.len(), big.len());
    }
    for t in threads {
        t.join().unwrap();
    }
    // Every killed connection is gone; the server holds none of them
    // (the two clients here and the one that asks remain).
    wait_for("the killed connections to be closed", 20, || {
        (s.info_field("clients", "connected_clients").as_deref() == Some("3")).then_some(())
    });
    let n: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(n, acked);
    // And the server goes on serving new connections, small and large.
    for _ in 0..50 {
        let mut c = s.client();
        let v: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
        assert_eq!(v.len(), big.len());
    }
    if backend == "uring" {
        // The ring's counters moved, in INFO and in /metrics.
        let done: u64 = s
            .info_field("stats", "io_uring_completions")
            .unwrap()
            .parse()
            .unwrap();
        assert!(done > 1000, "io_uring_completions:{done}");
        let m = scrape_metrics(s.free_port.unwrap());
        let v: f64 = metric_value(&m, "ferrokv_io_uring_completions_total")
            .unwrap()
            .parse()
            .unwrap();
        assert!(v > 1000.0, "{m}");
    }
}

#[test]
fn a_client_that_does_not_read_is_held_back_by_tcp_on_io_uring() {
    if !io_uring_allowed() {
        eprintln!("SKIPPED: this process may not use io_uring");
        return;
    }
    let s = ServerProcess::ferrokv(&["--io-backend", "uring"]);
    let mut c = s.client();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg("x".repeat(100_000))
        .query(&mut c)
        .unwrap();
    let rss0: u64 = s
        .info_field("memory", "used_memory_rss")
        .unwrap()
        .parse()
        .unwrap();
    // 2,000,000 pipelined GETs of 100 KB (44 MB of requests, 200 GB of
    // replies), never read.
    let mut hog = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let one = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(1000);
    let mut sent = 0;
    for _ in 0..2000 {
        match hog.write_all(&one) {
            Ok(()) => sent += 1,
            Err(_) => break,
        }
    }
    // The server stopped reading it (its replies wait), so its writes stall.
    assert!(sent < 2000, "the server read all 44 MB of requests");
    let mut other = s.client();
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
    let rss1: u64 = s
        .info_field("memory", "used_memory_rss")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        rss1 < rss0 + 256 * 1024 * 1024,
        "RSS grew from {rss0} to {rss1} for a client that does not read"
    );
    drop(hog);
}
