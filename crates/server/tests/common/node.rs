//! A ferrokv-server process whose data directory outlives it, for tests
//! that restart, kill or crash the server and look at what it left.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A ferrokv-server whose data directory outlives it (for restarts).
pub struct Node {
    pub child: Child,
    pub port: u16,
}

/// No snapshots, the AOF on and synced before each reply: every
/// acknowledged write is in the file.
pub const AOF_ALWAYS: &[&str] = &[
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
];

impl Node {
    pub fn start(dir: &Path, extra: &[&str]) -> Node {
        Self::try_start(dir, extra).unwrap_or_else(|log| panic!("ferrokv did not start: {log}"))
    }

    pub fn try_start(dir: &Path, extra: &[&str]) -> Result<Node, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join(format!("server-{port}.log"))).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
            .args([
                "--port",
                &port.to_string(),
                "--dir",
                dir.to_str().unwrap(),
                "--enable-debug-command",
                "yes",
            ])
            .args(extra)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return Err(
                    std::fs::read_to_string(dir.join(format!("server-{port}.log")))
                        .unwrap_or_default(),
                );
            }
            match super::answers_as(port, child.id()) {
                Some(true) => return Ok(Node { child, port }),
                Some(false) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Self::try_start(dir, extra);
                }
                None => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err("timeout".into())
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `DEBUG DIGEST` through a `redis` crate connection.
pub fn digest(c: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap()
}

/// A field of `INFO persistence` ("" when absent).
pub fn persistence_field(c: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default()
}
