//! Starts the real `redis-server` and `ferrokv-server` on free loopback
//! ports with temporary directories, stopped on drop; runs the real
//! `ferrokv-bench` binary.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct ServerProcess {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// Where its Unix socket is, when it has one (a short path under /tmp).
    socket_dir: Option<tempfile::TempDir>,
    /// Its RDMA listener's port, when it has one.
    rdma_port: Option<u16>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl ServerProcess {
    pub fn redis() -> ServerProcess {
        Self::spawn("redis-server".into(), &["--save", "", "--appendonly", "no"])
    }

    /// ferrokv-server from this workspace's target directory, if built.
    pub fn ferrokv() -> Option<ServerProcess> {
        ferrokv_binary().map(|bin| Self::spawn(bin, &[]))
    }

    /// `ferrokv()` with its RDMA listener on a free loopback port
    /// ([`ServerProcess::rdma_endpoint`]).
    pub fn ferrokv_with_rdma() -> Option<ServerProcess> {
        let bin = ferrokv_binary()?;
        let port = free_port().to_string();
        let mut p = Self::spawn(bin, &["--rdma-bind", "127.0.0.1", "--rdma-port", &port]);
        p.rdma_port = Some(port.parse().unwrap());
        Some(p)
    }

    /// The RDMA listener of a server from [`ServerProcess::ferrokv_with_rdma`].
    pub fn rdma_endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.rdma_port.expect("an RDMA listener"))
    }

    /// `redis()` or `ferrokv()` (with `ferrokv`) also listening on a Unix
    /// socket in its data directory: `unix_socket()` names it.
    pub fn with_unix_socket(ferrokv: bool) -> Option<ServerProcess> {
        let bin = if ferrokv {
            ferrokv_binary()?
        } else {
            PathBuf::from("redis-server")
        };
        let d = tempfile::Builder::new()
            .prefix("fkvb-sock")
            .tempdir_in("/tmp")
            .unwrap();
        let path = d.path().join("s.sock");
        let mut p = Self::spawn(bin, &["--save", "", "--unixsocket", path.to_str().unwrap()]);
        p.socket_dir = Some(d);
        Some(p)
    }

    /// The Unix socket of a server from [`ServerProcess::with_unix_socket`].
    pub fn unix_socket(&self) -> Option<PathBuf> {
        self.socket_dir.as_ref().map(|d| d.path().join("s.sock"))
    }

    fn spawn(bin: PathBuf, extra: &[&str]) -> ServerProcess {
        for _attempt in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let port_s = port.to_string();
            let mut args: Vec<&str> =
                vec!["--port", &port_s, "--dir", dir.path().to_str().unwrap()];
            args.extend_from_slice(extra);
            let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
            let child = Command::new(&bin)
                .args(&args)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            let mut p = ServerProcess {
                child,
                port,
                dir,
                socket_dir: None,
                rdma_port: None,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                match answers_as(port, p.child.id()) {
                    Some(true) => return p,
                    // Another server took the port between our probe and
                    // this one's bind: try another port.
                    Some(false) => break,
                    None => {}
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("could not start {}", bin.display());
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// Whether the server on `port` is process `pid` (its `INFO server` says
/// `process_id:<pid>`); `None` while nothing answers. The same check as the
/// server crate's test harness.
fn answers_as(port: u16, pid: u32) -> Option<bool> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return Some(false);
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if text.contains("tcp_port:") {
            return Some(text.contains(&format!("process_id:{pid}\r\n")));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `$FERROKV_SERVER`, or `ferrokv-server` next to this test's target
/// directory (`cargo test --workspace` builds it for the server's tests).
pub fn ferrokv_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FERROKV_SERVER") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/<test> -> target/<profile>/ferrokv-server
    let candidate = exe.parent()?.parent()?.join("ferrokv-server");
    candidate.is_file().then_some(candidate)
}

/// Runs `ferrokv-bench` with the whitespace-separated arguments of
/// `command_line`, asserting it succeeds.
pub fn bench(command_line: &str) -> Output {
    let args: Vec<&str> = command_line.split_whitespace().collect();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrokv-bench"))
        .args(&args)
        .output()
        .expect("run ferrokv-bench");
    assert!(
        out.status.success(),
        "ferrokv-bench {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
