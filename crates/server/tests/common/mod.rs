//! Test harness: starts the real `ferrokv-server` binary (or the real
//! `redis-server`) on a free loopback port with a temporary data directory,
//! and stops it on drop.
#![allow(dead_code)]

pub mod node;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct ServerProcess {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub name: &'static str,
}

fn free_port() -> u16 {
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
        let mut args = vec![
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
        ];
        args.extend_from_slice(extra);
        Self::spawn("redis", "redis-server", &args)
    }

    fn spawn(name: &'static str, bin: &str, extra: &[&str]) -> ServerProcess {
        for _attempt in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let port_s = port.to_string();
            let mut args: Vec<&str> =
                vec!["--port", &port_s, "--dir", dir.path().to_str().unwrap()];
            args.extend_from_slice(extra);
            let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
            let child = Command::new(bin)
                .args(&args)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {bin}: {e} (is it installed?)"));
            let mut p = ServerProcess {
                child,
                port,
                dir,
                name,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return p;
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
        format!("redis://127.0.0.1:{}/", self.port)
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
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { s }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
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
    pub s: TcpStream,
}

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
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
            let n = self.s.read(&mut chunk).unwrap();
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
