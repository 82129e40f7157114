//! The connection layer's transports other than TCP: the Unix-domain
//! socket (`unixsocket`, `unixsocketperm`), with Redis's conventions for
//! it (the `path:0` addresses, the `U` flag, the socket file's mode, its
//! removal at shutdown, `port 0`). Runs against the real redis-server too
//! (`FERROKV_TESTS_TARGET=redis`), except for ferrokv's own `INFO` fields.
//!
//! The command suites themselves run over the Unix socket with
//! `FERROKV_TESTS_TRANSPORT=unix` (scripts/test.sh does for several).

mod common;

use common::reply::against_redis;
use common::{wait_for, ServerProcess};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn server(extra: &[&str]) -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(extra)
    } else {
        ServerProcess::ferrokv(extra)
    }
}

fn binary() -> &'static str {
    if against_redis() {
        "redis-server"
    } else {
        env!("CARGO_BIN_EXE_ferrokv-server")
    }
}

/// A socket path in a directory of its own (short enough for `sun_path`).
fn sock_dir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("fkv-sock")
        .tempdir_in("/tmp")
        .unwrap();
    let p = d.path().join("s.sock");
    (d, p)
}

struct Unix {
    s: UnixStream,
    /// Received bytes not yet decoded (a read may hold several replies).
    buf: Vec<u8>,
}

impl Unix {
    fn connect(path: &Path) -> Unix {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Unix { s, buf: Vec::new() }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> ferrokv_resp::Frame {
        self.s
            .write_all(&ferrokv_resp::Frame::command(args))
            .unwrap();
        self.read_frame()
    }

    fn read_frame(&mut self) -> ferrokv_resp::Frame {
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match ferrokv_resp::Frame::decode(&self.buf) {
                Ok((f, used)) => {
                    self.buf.drain(..used);
                    return f;
                }
                Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
                Err(e) => panic!("bad frame {e:?}"),
            }
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn text(&mut self, args: &[&str]) -> String {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        match self.cmd(&args) {
            ferrokv_resp::Frame::Bulk(b)
            | ferrokv_resp::Frame::Simple(b)
            | ferrokv_resp::Frame::Error(b)
            | ferrokv_resp::Frame::Verbatim(_, b) => String::from_utf8(b).unwrap(),
            other => format!("{other:?}"),
        }
    }
}

#[test]
fn unix_socket_clients_look_as_redis_shows_them() {
    let (_d, path) = sock_dir();
    let p = path.to_str().unwrap();
    let srv = server(&["--unixsocket", p, "--unixsocketperm", "700"]);
    let meta = std::fs::metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);

    let mut u = Unix::connect(&path);
    assert_eq!(u.text(&["PING"]), "PONG");
    u.text(&["CLIENT", "SETNAME", "over-unix"]);
    let info = u.text(&["CLIENT", "INFO"]);
    assert!(
        info.contains(&format!(" addr={p}:0 laddr={p}:0 ")),
        "{info}"
    );
    assert!(info.contains(" flags=U "), "{info}");
    assert_eq!(u.text(&["SET", "k", "v"]), "OK");

    // A TCP client sees the same line, and the value written over the socket.
    let tcp_stream = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    tcp_stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tcp = common::Raw {
        s: common::Stream::Tcp(tcp_stream),
    };
    let list = tcp.cmd(&["CLIENT", "LIST"]);
    let list = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
    let line = list.lines().find(|l| l.contains("name=over-unix")).unwrap();
    assert!(line.contains(&format!("addr={p}:0 laddr={p}:0")), "{line}");
    assert!(line.contains("flags=U"), "{line}");
    assert_eq!(tcp.cmd(&["GET", "k"]).as_bytes().unwrap(), b"v");

    // The two options, immutable as in Redis.
    let got = tcp.cmd(&["CONFIG", "GET", "unixsocket*"]);
    let ferrokv_resp::Frame::Array(items) = got else {
        panic!("{got:?}")
    };
    let items: Vec<String> = items
        .iter()
        .map(|f| String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned())
        .collect();
    let mut pairs: Vec<(String, String)> = items
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        vec![
            ("unixsocket".to_string(), p.to_string()),
            ("unixsocketperm".to_string(), "700".to_string())
        ]
    );
    for (name, value) in [("unixsocket", "/tmp/other.sock"), ("unixsocketperm", "777")] {
        let e = tcp.cmd(&["CONFIG", "SET", name, value]);
        let e = String::from_utf8_lossy(e.as_bytes().unwrap()).into_owned();
        assert!(e.contains("can't set immutable config"), "{e}");
    }

    if !against_redis() {
        let clients = tcp.cmd(&["INFO", "clients"]);
        let clients = String::from_utf8_lossy(clients.as_bytes().unwrap()).into_owned();
        assert!(
            clients.contains("connected_clients_unix:1\r\n"),
            "{clients}"
        );
        // The asking TCP client itself is counted.
        let tcp_clients: usize = clients
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients_tcp:"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(tcp_clients >= 1, "{clients}");
    }

    // CLIENT KILL ADDR with the socket's address.
    let killed = tcp.cmd(&["CLIENT", "KILL", "ADDR", &format!("{p}:0")]);
    assert_eq!(killed, ferrokv_resp::Frame::Integer(1));
    // Closed: an end of file or a reset, not the read timeout.
    let mut b = [0u8; 1];
    let read = u.s.read(&mut b);
    assert!(
        matches!(&read, Ok(0))
            || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "killed connection still open: {read:?}"
    );

    // SHUTDOWN removes the socket file.
    let mut u = Unix::connect(&path);
    u.s.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    wait_for("the socket file to go", 10, || {
        (!path.exists()).then_some(())
    });
    drop(srv);
}

#[test]
fn a_stale_file_at_the_socket_path_is_replaced() {
    let (_d, path) = sock_dir();
    std::fs::write(&path, b"left over").unwrap();
    let _srv = server(&["--unixsocket", path.to_str().unwrap()]);
    assert!(std::fs::metadata(&path).unwrap().file_type().is_socket());
    let mut u = Unix::connect(&path);
    assert_eq!(u.text(&["PING"]), "PONG");
}

#[test]
fn port_zero_listens_on_the_unix_socket_only() {
    let (d, path) = sock_dir();
    let mut child = Command::new(binary())
        .args([
            "--port",
            "0",
            "--unixsocket",
            path.to_str().unwrap(),
            "--dir",
            d.path().to_str().unwrap(),
            "--save",
            "",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut u = wait_for("the socket", 10, || {
        UnixStream::connect(&path).ok().map(|s| {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            Unix { s, buf: Vec::new() }
        })
    });
    let info = u.text(&["INFO", "server"]);
    assert!(info.contains("tcp_port:0\r\n"), "{info}");
    // Many commands over it, pipelined in one write, and a value far
    // larger than the socket's buffers.
    let mut batch = Vec::new();
    for i in 0..10_000 {
        batch.extend_from_slice(&ferrokv_resp::Frame::command(&[
            "SET".as_bytes(),
            format!("key:{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
    }
    let mut w = u.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&batch).unwrap());
    for _ in 0..10_000 {
        assert_eq!(u.read_frame(), ferrokv_resp::Frame::Simple(b"OK".to_vec()));
    }
    writer.join().unwrap();
    assert_eq!(u.text(&["GET", "key:9999"]), "9999");
    let big = vec![b'x'; 32 << 20];
    assert_eq!(
        u.cmd(&[b"SET", b"big", &big]),
        ferrokv_resp::Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(u.cmd(&[b"GET", b"big"]), ferrokv_resp::Frame::Bulk(big));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn bad_unixsocketperm_values_are_refused_as_redis_refuses_them() {
    for (value, error) in [
        ("999", "argument couldn't be parsed as an octal number"),
        ("abc", "argument couldn't be parsed as an octal number"),
        ("1777", "argument must be between 0 and 777 inclusive"),
        ("-1", "argument must be between 0 and 777 inclusive"),
    ] {
        let out = Command::new(binary())
            .args(["--port", "0", "--unixsocketperm", value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{value} accepted");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(error), "{value}: {text}");
    }
}
