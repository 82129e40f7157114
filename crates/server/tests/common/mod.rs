//! Test harness: starts the real `ferrokv-server` binary (or the real
//! `redis-server`) on a free loopback port with a temporary data directory,
//! and stops it on drop.
#![allow(dead_code)]

/// SHA-1 in lowercase hex (the script cache's digests, `redis.sha1hex`).
pub fn sha1_hex(data: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    Sha1::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub mod compare;
pub mod memdisk;
pub mod netns;
pub mod node;
pub mod repl;
pub mod reply;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether the suites talk to the server over its Unix socket
/// (`FERROKV_TESTS_TRANSPORT=unix`) rather than TCP (the default). Every
/// server the harness starts then also listens on a Unix socket in its
/// data directory, and [`ServerProcess::client`] and
/// [`ServerProcess::raw`] connect through it; tests that open their own
/// `TcpStream` stay on TCP.
pub fn over_unix() -> bool {
    transport() == "unix"
}

/// `FERROKV_TESTS_TRANSPORT=rdma`: ferrokv servers also listen for RDMA
/// connections (`rdma-bind 127.0.0.1`, libfabric's tcp provider) and
/// [`ServerProcess::raw`] connects through one (`client()`, the redis
/// crate's, stays on TCP). ferrokv only: a redis-server started beside it
/// stays on TCP.
pub fn over_rdma() -> bool {
    transport() == "rdma"
}

fn transport() -> &'static str {
    match std::env::var("FERROKV_TESTS_TRANSPORT").as_deref() {
        Ok("unix") => "unix",
        Ok("rdma") => "rdma",
        Ok("tcp") | Err(_) => "tcp",
        Ok(other) => panic!("FERROKV_TESTS_TRANSPORT={other}: expected tcp, unix or rdma"),
    }
}

/// `FERROKV_TESTS_IO_BACKEND=epoll|uring|auto`: the `io-backend` every
/// ferrokv server the harness starts gets (unset: the server's default,
/// `auto`). The CI runs the network-facing suites under both backends.
pub fn io_backend() -> Option<String> {
    match std::env::var("FERROKV_TESTS_IO_BACKEND").as_deref() {
        Ok(b @ ("epoll" | "uring" | "auto")) => Some(b.to_string()),
        Ok(other) => panic!("FERROKV_TESTS_IO_BACKEND={other}: expected epoll, uring or auto"),
        Err(_) => None,
    }
}

/// `FERROKV_TESTS_IO_THREADS=N`: every ferrokv server the harness starts
/// runs `io-threads N` with reads threaded too and the threads used for
/// every batch (`events-per-io-thread 0`), so that the suites drive the
/// hand-off to the I/O threads whatever the load (crates/net/src/io_threads.rs).
pub fn io_threads() -> Option<String> {
    match std::env::var("FERROKV_TESTS_IO_THREADS") {
        Ok(n) if n.parse::<u32>().is_ok_and(|n| n >= 1) => Some(n),
        Ok(other) => panic!("FERROKV_TESTS_IO_THREADS={other}: expected a number of threads"),
        Err(_) => None,
    }
}

/// `flags=<f>` of a `CLIENT LIST` line of a harness connection: over a
/// Unix socket Redis adds `U` (and `N`, "no flags", gives way to it); an
/// RDMA connection has no flag of its own.
pub fn client_flags(f: &str) -> String {
    if over_unix() {
        format!("flags={}U", if f == "N" { "" } else { f })
    } else {
        format!("flags={f}")
    }
}

/// See [`ServerProcess::free_port`].
pub const FREE_PORT: &str = "{free-port}";

pub struct ServerProcess {
    pub child: Child,
    pub port: u16,
    /// The Unix socket it listens on too, under `FERROKV_TESTS_TRANSPORT=unix`.
    pub unix: Option<PathBuf>,
    /// Its RDMA listener, under `FERROKV_TESTS_TRANSPORT=rdma`.
    pub rdma: Option<std::net::SocketAddr>,
    /// The port that replaced [`FREE_PORT`] in its arguments, if any.
    pub free_port: Option<u16>,
    pub dir: tempfile::TempDir,
    pub name: &'static str,
    /// The binary and its arguments, for [`ServerProcess::kill_and_restart`].
    command: (String, Vec<String>),
}

/// A port free on 127.0.0.1 now (it may be taken again before use).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl ServerProcess {
    /// Starts ferrokv-server with extra `--option value` arguments.
    pub fn ferrokv(extra: &[&str]) -> ServerProcess {
        Self::spawn("ferrokv", env!("CARGO_BIN_EXE_ferrokv-server"), extra)
    }

    /// Starts the real redis-server from Debian's packages.
    pub fn redis(extra: &[&str]) -> ServerProcess {
        Self::spawn("redis", "redis-server", &Self::reference_args(extra))
    }

    /// What a reference server (Redis, a peer) starts with: no snapshots,
    /// no AOF, DEBUG on; then `extra`.
    fn reference_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
        ];
        args.extend_from_slice(extra);
        args
    }

    /// Starts a reference server from `../shared/peers/` (beside the
    /// project's root; CI always has it) with the arguments
    /// [`ServerProcess::redis`] gives, or `None` after a printed line when
    /// this clone has no such peer.
    pub fn peer(peer: Peer, extra: &[&str]) -> Option<ServerProcess> {
        let bin = peer.path()?;
        let args = Self::reference_args(extra);
        Some(Self::spawn(peer.name(), bin.to_str().unwrap(), &args))
    }

    fn spawn(name: &'static str, bin: &str, extra: &[&str]) -> ServerProcess {
        Self::spawn_after(name, bin, &[], extra)
    }

    /// Like `spawn`, with `leading` arguments before `--port` (a config file).
    /// An argument replaced by a port picked afresh at each start attempt
    /// (`--metrics-port {free-port}`): a port taken between the pick and
    /// the server's bind makes the attempt fail, and the next one picks
    /// another, as for the main port.
    fn spawn_after(
        name: &'static str,
        bin: &str,
        leading: &[&str],
        extra: &[&str],
    ) -> ServerProcess {
        for _attempt in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let port_s = port.to_string();
            let mut args: Vec<&str> = leading.to_vec();
            args.extend_from_slice(&["--port", &port_s, "--dir", dir.path().to_str().unwrap()]);
            let unix = over_unix().then(|| dir.path().join("server.sock"));
            let unix_s = unix.as_ref().map(|p| p.to_str().unwrap().to_string());
            if let Some(u) = &unix_s {
                args.extend_from_slice(&["--unixsocket", u]);
            }
            let rdma_port = free_port().to_string();
            // (redis-server, which has no RDMA, stays on TCP: the suites that
            // compare the two then compare ferrokv over RDMA with Redis.)
            let rdma = over_rdma() && name == "ferrokv";
            if rdma {
                args.extend_from_slice(&["--rdma-bind", "127.0.0.1", "--rdma-port", &rdma_port]);
            }
            let backend = io_backend().filter(|_| name == "ferrokv");
            let threads = io_threads().filter(|_| name == "ferrokv");
            if let Some(n) = &threads {
                args.extend_from_slice(&[
                    "--io-threads",
                    n,
                    "--io-threads-do-reads",
                    "yes",
                    "--events-per-io-thread",
                    "0",
                ]);
            }
            if let Some(b) = &backend {
                args.extend_from_slice(&["--io-backend", b]);
            }
            let free = free_port();
            let free_s = free.to_string();
            let mut used_free = false;
            for a in extra {
                if *a == FREE_PORT {
                    args.push(&free_s);
                    used_free = true;
                } else {
                    args.push(a);
                }
            }
            let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
            let child = Command::new(bin)
                .args(&args)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {bin}: {e} (is it installed?)"));
            let command = (
                bin.to_string(),
                args.iter().map(|a| a.to_string()).collect(),
            );
            let mut p = ServerProcess {
                child,
                port,
                rdma: rdma.then(|| format!("127.0.0.1:{rdma_port}").parse().unwrap()),
                free_port: used_free.then_some(free),
                unix,
                dir,
                name,
                command,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                match answers_as(port, p.child.id()) {
                    // Under FERROKV_TESTS_TRANSPORT=rdma the RDMA port was
                    // picked free too, and may have been taken meanwhile (the
                    // server then runs without its RDMA listener): another try.
                    Some(true) if rdma && p.log().contains("can't listen on") => {
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                        break;
                    }
                    Some(true) => return p,
                    // Another process holds the port (a free-port race with a
                    // server started at the same moment): try another port.
                    Some(false) => break,
                    None => {}
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!("{name} did not start on port {port}: {}", p.log());
        }
        panic!("could not start {name}");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        match &self.unix {
            Some(path) => format!("unix://{}", path.display()),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    /// A connection of the `redis` crate.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A raw socket speaking bytes.
    pub fn raw(&self) -> Raw {
        if let Some(endpoint) = self.rdma {
            return Raw {
                s: Stream::rdma(endpoint),
            };
        }
        let s = match &self.unix {
            Some(path) => Stream::Unix(UnixStream::connect(path).unwrap()),
            None => {
                let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
                s.set_nodelay(true).unwrap();
                Stream::Tcp(s)
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { s }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `kill -9`, then the same binary with the same arguments on the same
    /// port and data directory (what it persisted is what it finds).
    /// Returns once it answers with its data set loaded.
    pub fn kill_and_restart(&mut self) {
        self.restart(true)
    }

    /// [`kill_and_restart`](Self::kill_and_restart), returning as soon as
    /// the new process answers, while it may still be loading.
    pub fn kill_and_restart_no_wait(&mut self) {
        self.restart(false)
    }

    fn restart(&mut self, loaded: bool) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (bin, args) = &self.command;
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("server.log"))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.child = Command::new(bin)
                .args(args)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log.try_clone().unwrap()))
                .spawn()
                .unwrap();
            // The old socket may linger a moment: retry until it answers.
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                if answers_as_loading(self.port, self.child.id(), loaded) == Some(true) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
            assert!(
                Instant::now() < deadline,
                "{} did not restart: {}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw RESP connection for byte-exact tests.
pub struct Raw {
    pub s: Stream,
}

/// The socket of a [`Raw`] connection: TCP, the server's Unix socket, or
/// an RDMA connection (blocking reads and writes over the non-blocking
/// stream, waiting on its queue fds).
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Rdma(
        Box<ferrokv_fabric::Stream>,
        std::cell::Cell<Option<Duration>>,
    ),
}

impl ServerProcess {
    /// The RDMA listener's address (the `rdma-port` the harness chose).
    pub fn rdma_endpoint(&self) -> std::net::SocketAddr {
        self.rdma.expect("FERROKV_TESTS_TRANSPORT=rdma")
    }
}

impl Stream {
    /// An RDMA connection to `addr` (libfabric's tcp provider).
    pub fn rdma(addr: std::net::SocketAddr) -> Stream {
        let lib = ferrokv_fabric::Library::open_default()
            .expect("libfabric (apt-get install libfabric1)");
        let s = ferrokv_fabric::Stream::connect(
            &lib,
            Some("tcp"),
            addr,
            ferrokv_fabric::StreamConfig::default(),
            Duration::from_secs(10),
        )
        .unwrap();
        Stream::Rdma(
            Box::new(s),
            std::cell::Cell::new(Some(Duration::from_secs(10))),
        )
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Rdma(_, timeout) => {
                timeout.set(t);
                Ok(())
            }
        }
    }

    pub fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Rdma(..) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "an RDMA stream has one owner",
                ))
            }
        })
    }

    /// This end's address as the server shows it as the peer (`CLIENT
    /// LIST addr=`, the slow log): `ip:port`, or `path:0` over a Unix socket.
    pub fn local_addr(&self) -> std::io::Result<String> {
        match self {
            Stream::Tcp(s) => Ok(s.local_addr()?.to_string()),
            Stream::Unix(s) => {
                let peer = s.peer_addr()?;
                let path = peer.as_pathname().expect("the server's socket has a path");
                Ok(format!("{}:0", path.display()))
            }
            Stream::Rdma(s, _) => Ok(s
                .local_addr()
                .map_err(|e| std::io::Error::other(e.to_string()))?
                .to_string()),
        }
    }

    pub fn shutdown(&self, how: std::net::Shutdown) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
            Stream::Rdma(s, _) => s
                .shutdown()
                .map_err(|e| std::io::Error::other(e.to_string())),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Rdma(s, limit) => s.read_blocking(buf, limit.get()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Rdma(s, _) => s.write_blocking(buf, Some(Duration::from_secs(30))),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// One read, again after a signal interrupted it (a test that starts
    /// processes gets SIGCHLD; `read` alone does not retry on EINTR).
    fn read_some(&mut self, chunk: &mut [u8]) -> usize {
        loop {
            match self.s.read(chunk) {
                Ok(n) => return n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Reads until exactly `n` bytes arrived.
    pub fn recv_exact(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        self.s.read_exact(&mut buf).unwrap();
        buf
    }

    /// Sends `req` and expects exactly `expected` back.
    pub fn roundtrip(&mut self, req: &[u8], expected: &[u8]) {
        self.send(req);
        let got = self.recv_exact(expected.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected),
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Reads one complete RESP frame.
    pub fn read_frame(&mut self) -> ferrokv_resp::Frame {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            match ferrokv_resp::Frame::decode(&buf) {
                Ok((f, _)) => return f,
                Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
                Err(e) => panic!("bad frame {e:?}: {:?}", String::from_utf8_lossy(&buf)),
            }
            let n = self.read_some(&mut chunk);
            assert!(n > 0, "connection closed");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends a command and reads its reply.
    pub fn cmd<T: AsRef<[u8]>>(&mut self, args: &[T]) -> ferrokv_resp::Frame {
        self.send(&ferrokv_resp::Frame::command(args));
        self.read_frame()
    }

    /// True when the server closed the connection.
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0))
    }
}

impl Raw {
    /// Sends a command and reads its reply as a frame and as the exact
    /// bytes the server sent; an I/O or protocol failure is an `Err` rather
    /// than a panic, so a caller can report which command broke the link.
    pub fn try_cmd_bytes<T: AsRef<[u8]>>(
        &mut self,
        args: &[T],
    ) -> Result<(ferrokv_resp::Frame, Vec<u8>), String> {
        self.s
            .write_all(&ferrokv_resp::Frame::command(args))
            .map_err(|e| format!("write: {e}"))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            match ferrokv_resp::Frame::decode(&buf) {
                Ok((f, n)) => {
                    buf.truncate(n);
                    return Ok((f, buf));
                }
                Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
                Err(e) => {
                    return Err(format!(
                        "bad frame {e:?}: {:?}",
                        String::from_utf8_lossy(&buf)
                    ))
                }
            }
            match self.s.read(&mut chunk) {
                Ok(0) => return Err("connection closed".into()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
}

/// Polls `check` until it returns `Some` or `deadline_secs` pass; panics
/// with `what` on timeout. Tests wait for asynchronous effects (expiry,
/// disconnection) this way instead of sleeping a fixed time.
pub fn wait_for<T>(what: &str, deadline_secs: u64, check: impl FnMut() -> Option<T>) -> T {
    wait_for_or(what, deadline_secs, check, String::new)
}

/// [`wait_for`], with what `explain` tells (the servers' logs, say) in
/// the panic on timeout.
pub fn wait_for_or<T>(
    what: &str,
    deadline_secs: u64,
    mut check: impl FnMut() -> Option<T>,
    explain: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(deadline_secs);
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", explain());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl ServerProcess {
    /// Starts ferrokv-server as `ferrokv-server <conf_path> --port P --dir D
    /// [extra...]`: the file first, command-line options overriding it.
    pub fn ferrokv_with_conf(conf_path: &str, extra: &[&str]) -> ServerProcess {
        Self::spawn_after(
            "ferrokv",
            env!("CARGO_BIN_EXE_ferrokv-server"),
            &[conf_path],
            extra,
        )
    }

    /// Starts the real redis-server as `redis-server <conf_path> --port P ...`.
    pub fn redis_with_conf(conf_path: &str) -> ServerProcess {
        Self::spawn_after(
            "redis",
            "redis-server",
            &[conf_path],
            &["--save", "", "--appendonly", "no"],
        )
    }

    /// Starts ferrokv-server under `ulimit -n <nofile>` (through `sh`).
    pub fn ferrokv_with_nofile(nofile: u32, extra: &[&str]) -> ServerProcess {
        let script = format!("ulimit -n {nofile} && exec \"$0\" \"$@\"");
        Self::spawn_after(
            "ferrokv",
            "sh",
            &["-c", &script, env!("CARGO_BIN_EXE_ferrokv-server")],
            extra,
        )
    }

    /// The value of one `INFO` field (`used_memory`, `db0`, ...), read over
    /// a fresh connection; `None` when the field is absent.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let mut r = self.raw();
        // A failed read names the server and shows the end of its log (a
        // connection reset here once hid a replica's state: rdma_sync.rs).
        let reply = match r.try_cmd_bytes(&["INFO", section]) {
            Ok((f, _)) => f,
            Err(e) => {
                let log = self.log();
                let start = (log.len().saturating_sub(6000)..log.len())
                    .find(|&i| log.is_char_boundary(i))
                    .unwrap_or(log.len());
                let tail = &log[start..];
                panic!(
                    "INFO {section} of {}: {e}\n--- the end of its log\n{tail}",
                    self.name
                )
            }
        };
        let text =
            String::from_utf8_lossy(reply.as_bytes().expect("INFO is a string")).into_owned();
        let prefix = format!("{field}:");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()).map(str::to_string))
    }
}

impl Raw {
    /// Reads exactly `n` complete frames (for pipelines whose replies may
    /// arrive in one segment).
    pub fn read_frames(&mut self, n: usize) -> Vec<ferrokv_resp::Frame> {
        let mut out = Vec::with_capacity(n);
        let mut buf = Vec::new();
        let mut start = 0;
        let mut chunk = vec![0u8; 1 << 16];
        while out.len() < n {
            match ferrokv_resp::Frame::decode(&buf[start..]) {
                Ok((f, used)) => {
                    out.push(f);
                    start += used;
                    continue;
                }
                Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
                Err(e) => panic!("bad frame {e:?}"),
            }
            let got = self.read_some(&mut chunk);
            assert!(
                got > 0,
                "connection closed after {} of {n} replies",
                out.len()
            );
            buf.drain(..start);
            start = 0;
            buf.extend_from_slice(&chunk[..got]);
        }
        assert_eq!(start, buf.len(), "more bytes than {n} replies");
        out
    }

    /// Everything the server sends until it closes the connection.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        self.s.read_to_end(&mut v).unwrap();
        v
    }
}

/// One default ferrokv-server shared by the tests of a file that run at the
/// same time (each test uses its own keys or database). It stops when the
/// last test holding it ends, so no process outlives the test binary.
/// Whether the server listening on `port` is the process `pid` (its
/// `INFO server` says `process_id:<pid>`); `None` while nothing answers.
/// A server still loading its data set (it answers `INFO` meanwhile) is
/// not ready: `None`.
pub fn answers_as(port: u16, pid: u32) -> Option<bool> {
    answers_as_loading(port, pid, true)
}

/// [`answers_as`]; with `loaded` false, a server still loading counts.
pub fn answers_as_loading(port: u16, pid: u32, loaded: bool) -> Option<bool> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"*3\r\n$4\r\nINFO\r\n$6\r\nserver\r\n$11\r\npersistence\r\n")
        .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let want = format!("process_id:{pid}\r\n");
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return Some(false);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.starts_with(b"-") {
            // NOAUTH (requirepass): the process cannot be asked; a server
            // that answers at all is taken to be ours, as before.
            return Some(true);
        }
        let text = String::from_utf8_lossy(&buf);
        // The reply is whole once the persistence section's `loading:` line
        // is in (it comes after the server section).
        let Some(at) = text.find("loading:") else {
            continue;
        };
        if !text[at..].contains("\r\n") {
            continue;
        }
        if !text.contains(&want) {
            return Some(false);
        }
        if loaded && text[at..].starts_with("loading:1") {
            return None;
        }
        return Some(true);
    }
}

pub fn shared_ferrokv() -> std::sync::Arc<ServerProcess> {
    use std::sync::{Arc, Mutex, Weak};
    static SHARED: Mutex<Weak<ServerProcess>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slot.upgrade() {
        return s;
    }
    let s = Arc::new(ServerProcess::ferrokv(&["--enable-debug-command", "yes"]));
    *slot = Arc::downgrade(&s);
    s
}

/// The text of a server's incremental AOF files (`appendonlydir/*.incr.aof`).
pub fn aof_text(p: &ServerProcess) -> String {
    let dir = p.dir.path().join("appendonlydir");
    let mut text = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
        }
    }
    text
}

/// `INFO clients`' `blocked_clients`.
pub fn blocked_clients(s: &ServerProcess) -> usize {
    s.info_field("clients", "blocked_clients")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits until `n` clients are blocked, so the order of arrival is known.
pub fn wait_blocked(s: &ServerProcess, n: usize) {
    wait_for(&format!("{n} blocked clients"), 5, || {
        (blocked_clients(s) == n).then_some(())
    });
}

/// `GET /metrics` on a port, the body only.
pub fn scrape_metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The value of the sample line `series` (a name with its labels).
pub fn metric_value(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_string)
}

/// The reference servers built from their sources in `../shared/peers/`
/// (see its README): the oracles for behaviour newer than Debian's
/// redis-server 7.0.15.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Peer {
    Redis72,
    Redis74,
    Valkey80,
}

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Redis72 => "redis-7.2.6",
            Peer::Redis74 => "redis-7.4.1",
            Peer::Valkey80 => "valkey-8.0.1",
        }
    }

    /// The binary, or `None` (with a printed line saying what is skipped)
    /// when this clone has no `../shared/peers`.
    pub fn path(self) -> Option<PathBuf> {
        let bin = match self {
            Peer::Valkey80 => "valkey-server",
            _ => "redis-server",
        };
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/peers")
            .join(self.name())
            .join(bin);
        if p.is_file() {
            Some(p)
        } else {
            println!(
                "skipped against {}: {} is missing (a clone without ../shared)",
                self.name(),
                p.display()
            );
            None
        }
    }
}
