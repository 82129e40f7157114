//! TLS (`tls-port`, `tls-*`; docs/tls.md) with certificates this file
//! generates (rcgen): the real tools (redis-cli, redis-benchmark's
//! cousin redis-py) connect, client authentication is required, optional
//! or off as configured, a wrong CA and an expired certificate are refused,
//! a client stalled mid-handshake holds nobody, large values and deep
//! pipelines cross intact, certificates reload on `CONFIG SET`, and a
//! ferrokv replica syncs from a real redis-server over TLS with the
//! master's certificate checked against its address.

mod common;

use common::{wait_for, ServerProcess, FREE_PORT};
use rustls::pki_types::pem::PemObject;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/pki.rs"]
mod pki;
use pki::{Pair, Pki};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A ferrokv (or redis-server) with TLS on [`FREE_PORT`] (its `free_port`)
/// and plain TCP on its `port` for the harness.
fn tls_server(redis: bool, pki: &Pki, pair: &Pair, extra: &[&str]) -> ServerProcess {
    let ca = pki_ca(pki);
    let mut args = vec![
        "--tls-port",
        FREE_PORT,
        "--tls-cert-file",
        s(&pair.cert),
        "--tls-key-file",
        s(&pair.key),
        "--tls-ca-cert-file",
        s(&ca),
    ];
    args.extend_from_slice(extra);
    if redis {
        ServerProcess::redis(&args)
    } else {
        ServerProcess::ferrokv(&args)
    }
}

fn pki_ca(pki: &Pki) -> PathBuf {
    pki.ca_file()
}

fn leak(p: PathBuf) -> &'static str {
    Box::leak(p.to_str().unwrap().to_string().into_boxed_str())
}

/// A test client: rustls over a blocking socket.
struct TlsClient {
    s: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

fn client_config(ca: &Path, cert: Option<&Pair>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for c in rustls_pemfile_certs(&pem) {
        roots.add(c).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match cert {
        Some(p) => {
            let certs = rustls_pemfile_certs(&std::fs::read(&p.cert).unwrap());
            let key =
                rustls::pki_types::PrivateKeyDer::from_pem_slice(&std::fs::read(&p.key).unwrap())
                    .unwrap();
            b.with_client_auth_cert(certs, key).unwrap()
        }
        None => b.with_no_client_auth(),
    })
}

fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .unwrap()
}

impl TlsClient {
    /// Connects and completes the handshake; then a `PING` round trip, so
    /// that a client certificate the server refuses (TLS 1.3 tells the
    /// client after its side of the handshake ended) is an error here.
    fn connect(port: u16, ca: &Path, cert: Option<&Pair>) -> std::io::Result<TlsClient> {
        let sock = TcpStream::connect(("127.0.0.1", port))?;
        sock.set_read_timeout(Some(Duration::from_secs(10)))?;
        let conn =
            rustls::ClientConnection::new(client_config(ca, cert), "localhost".try_into().unwrap())
                .map_err(std::io::Error::other)?;
        let mut c = TlsClient {
            s: rustls::StreamOwned::new(conn, sock),
            buf: Vec::new(),
        };
        let pong = c.try_cmd(&[b"PING"])?;
        assert_eq!(pong, b"+PONG\r\n");
        Ok(c)
    }

    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.s.write_all(bytes)?;
        self.s.flush()
    }

    /// One reply's raw bytes (simple replies and bulk strings).
    fn reply(&mut self) -> std::io::Result<Vec<u8>> {
        loop {
            if let Some(n) = complete_reply(&self.buf) {
                return Ok(self.buf.drain(..n).collect());
            }
            let mut chunk = vec![0u8; 256 * 1024];
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn try_cmd(&mut self, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
        self.send(&encode(args))?;
        self.reply()
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.try_cmd(args).unwrap()
    }
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// The length of the first complete reply in `b` (`+`, `-`, `:` lines and
/// `$` bulks), if there is one.
fn complete_reply(b: &[u8]) -> Option<usize> {
    let line = b.windows(2).position(|w| w == b"\r\n")? + 2;
    if b[0] != b'$' {
        return Some(line);
    }
    let len: i64 = std::str::from_utf8(&b[1..line - 2]).ok()?.parse().ok()?;
    if len < 0 {
        return Some(line);
    }
    let end = line + len as usize + 2;
    (b.len() >= end).then_some(end)
}

fn redis_cli(port: u16, tls: &[&str], args: &[&str]) -> std::process::Output {
    Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--tls"])
        .args(tls)
        .args(args)
        .output()
        .expect("redis-cli is required")
}

#[test]
fn redis_cli_with_tls_and_cacert_works_and_counts_as_tls() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let client = pki.issue("client", &["client"], true, false);
    let srv = tls_server(false, &pki, &pair, &[]);
    let port = srv.free_port.unwrap();
    let ca = s(&pki.ca_file()).to_string();
    let (cert, key) = (s(&client.cert).to_string(), s(&client.key).to_string());
    let tls = ["--cacert", &ca, "--cert", &cert, "--key", &key];
    let out = redis_cli(port, &tls, &["SET", "k", "over tls"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK", "{out:?}");
    let out = redis_cli(port, &tls, &["GET", "k"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "over tls");
    let out = redis_cli(port, &tls, &["INFO", "clients"]);
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(info.contains("connected_clients_tls:1"), "{info}");
    let out = redis_cli(port, &tls, &["CLIENT", "LIST"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(list.contains(&format!("laddr=127.0.0.1:{port}")), "{list}");
    assert!(list.contains("cmd=client|list"), "{list}");
}

#[test]
fn auth_clients_yes_refuses_a_client_without_certificate() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let client = pki.issue("client", &["client"], true, false);
    let srv = tls_server(false, &pki, &pair, &[]);
    let port = srv.free_port.unwrap();
    assert!(TlsClient::connect(port, &pki.ca_file(), None).is_err());
    let mut c = TlsClient::connect(port, &pki.ca_file(), Some(&client)).unwrap();
    assert_eq!(c.cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
}

#[test]
fn auth_clients_optional_takes_both_and_refuses_a_bad_certificate() {
    let pki = Pki::new("test CA");
    let other = Pki::new("other CA");
    let pair = pki.server();
    let client = pki.issue("client", &["client"], true, false);
    let stranger = other.issue("stranger", &["client"], true, false);
    let srv = tls_server(false, &pki, &pair, &["--tls-auth-clients", "optional"]);
    let port = srv.free_port.unwrap();
    TlsClient::connect(port, &pki.ca_file(), None).unwrap();
    TlsClient::connect(port, &pki.ca_file(), Some(&client)).unwrap();
    // Optional means "none, or a valid one".
    assert!(TlsClient::connect(port, &pki.ca_file(), Some(&stranger)).is_err());
}

#[test]
fn auth_clients_no_takes_a_client_without_certificate() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let srv = tls_server(false, &pki, &pair, &["--tls-auth-clients", "no"]);
    let mut c = TlsClient::connect(srv.free_port.unwrap(), &pki.ca_file(), None).unwrap();
    assert_eq!(c.cmd(&[b"ECHO", b"hi"]), b"$2\r\nhi\r\n");
}

#[test]
fn a_client_certificate_of_another_ca_is_refused() {
    let pki = Pki::new("test CA");
    let other = Pki::new("other CA");
    let pair = pki.server();
    let stranger = other.issue("stranger", &["client"], true, false);
    let mport = unused_port().to_string();
    let srv = tls_server(false, &pki, &pair, &["--metrics-port", &mport]);
    let mport: u16 = mport.parse().unwrap();
    let port = srv.free_port.unwrap();
    assert!(TlsClient::connect(port, &pki.ca_file(), Some(&stranger)).is_err());
    // And a client that trusts another CA refuses the server.
    assert!(TlsClient::connect(port, &other.ca_file(), None).is_err());
    let before = metrics_value(mport, "ferrokv_tls_handshakes_total");
    assert!(TlsClient::connect(port, &other.ca_file(), None).is_err());
    TlsClient::connect(
        port,
        &pki.ca_file(),
        Some(&pki.issue("ok", &["c"], true, false)),
    )
    .unwrap();
    // (The metrics snapshot is published by the loop's cron.)
    let (ok, failed) = wait_for("the TLS series", 10, || {
        let ok = metrics_value(mport, "ferrokv_tls_handshakes_total");
        let failed = metrics_value(mport, "ferrokv_tls_handshake_failures_total");
        (ok >= before + 1.0 && failed >= 3.0).then_some((ok, failed))
    });
    assert!(ok >= 1.0 && failed >= 3.0, "{ok} {failed}");
}

#[test]
fn an_expired_certificate_is_refused() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let expired = pki.issue("expired", &["client"], true, true);
    let srv = tls_server(false, &pki, &pair, &[]);
    let port = srv.free_port.unwrap();
    assert!(TlsClient::connect(port, &pki.ca_file(), Some(&expired)).is_err());
    // An expired server certificate: the client refuses the server.
    let expired_srv = pki.issue("expired-server", &["localhost", "127.0.0.1"], false, true);
    let srv2 = tls_server(false, &pki, &expired_srv, &["--tls-auth-clients", "no"]);
    assert!(TlsClient::connect(srv2.free_port.unwrap(), &pki.ca_file(), None).is_err());
}

#[test]
fn a_client_stalled_mid_handshake_does_not_hold_the_others() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let srv = tls_server(false, &pki, &pair, &["--tls-auth-clients", "no"]);
    let port = srv.free_port.unwrap();
    // Half a ClientHello, then nothing; and one that sends nothing at all.
    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])
        .unwrap();
    let _silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    for i in 0..20 {
        let mut c = TlsClient::connect(port, &pki.ca_file(), None).unwrap();
        let v = format!("v{i}");
        assert_eq!(c.cmd(&[b"SET", b"k", v.as_bytes()]), b"+OK\r\n");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The stalled ones are still connected (nothing closed them), and the
    // plain port serves too.
    assert_eq!(srv.raw().cmd(&["GET", "k"]).as_bytes().unwrap(), b"v19");
}

#[test]
fn large_values_and_deep_pipelines_cross_intact() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let srv = tls_server(false, &pki, &pair, &["--tls-auth-clients", "no"]);
    let mut c = TlsClient::connect(srv.free_port.unwrap(), &pki.ca_file(), None).unwrap();
    let big: Vec<u8> = (0..8 * 1024 * 1024u32)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    assert_eq!(c.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
    let got = c.cmd(&[b"GET", b"big"]);
    let head = format!("${}\r\n", big.len());
    assert_eq!(&got[..head.len()], head.as_bytes());
    assert!(
        got[head.len()..got.len() - 2] == big[..],
        "8 MiB value differs"
    );
    // 20k pipelined commands in one write, replies in order.
    let mut req = Vec::new();
    for i in 0..20_000 {
        req.extend(encode(&[b"INCR", b"n"]));
        if i % 1000 == 0 {
            req.extend(encode(&[b"GET", b"big"]));
        }
    }
    c.send(&req).unwrap();
    for i in 1..=20_000 {
        assert_eq!(c.reply().unwrap(), format!(":{i}\r\n").as_bytes());
        if i % 1000 == 1 {
            assert_eq!(c.reply().unwrap().len(), big.len() + head.len() + 2);
        }
    }
    // Several large replies pipelined: each whole.
    let mut pipe = Vec::new();
    for _ in 0..4 {
        pipe.extend(encode(&[b"GET", b"big"]));
    }
    c.send(&pipe).unwrap();
    for _ in 0..4 {
        assert_eq!(c.reply().unwrap().len(), big.len() + head.len() + 2);
    }
}

/// redis-py's `ssl=True`, with and without a client certificate.
#[test]
fn redis_py_ssl_with_and_without_client_certificate() {
    let import = Command::new("python3")
        .args(["-c", "import redis, ssl"])
        .output()
        .expect("python3 is required for this test");
    assert!(
        import.status.success(),
        "redis-py is required (`pip install redis`)"
    );
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let client = pki.issue("client", &["client"], true, false);
    let srv = tls_server(false, &pki, &pair, &["--tls-auth-clients", "optional"]);
    let script = r#"
import sys, redis
port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
r = redis.Redis(host="localhost", port=port, ssl=True, ssl_ca_certs=ca)
r.set("py", "plain")
print("no-cert", r.get("py").decode())
m = redis.Redis(host="localhost", port=port, ssl=True, ssl_ca_certs=ca,
                ssl_certfile=cert, ssl_keyfile=key)
p = m.pipeline()
for i in range(1000):
    p.incr("pyn")
print("mutual", p.execute()[-1], m.get("py").decode())
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(srv.free_port.unwrap().to_string())
        .arg(pki.ca_file())
        .arg(&client.cert)
        .arg(&client.key)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no-cert plain") && text.contains("mutual 1000 plain"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_set_tls_cert_file_reloads_for_new_handshakes() {
    let pki = Pki::new("test CA");
    let other = Pki::new("other CA");
    let pair = pki.server();
    let srv = tls_server(false, &pki, &pair, &["--tls-auth-clients", "no"]);
    let port = srv.free_port.unwrap();
    let mut old = TlsClient::connect(port, &pki.ca_file(), None).unwrap();
    // A bad file: an error, and the old certificate stays.
    let mut r = srv.raw();
    let e = r.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent.crt"]);
    assert_eq!(
        e,
        ferrokv_resp::Frame::Error(b"ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.".to_vec())
    );
    let got = r.cmd(&["CONFIG", "GET", "tls-cert-file"]);
    assert_eq!(
        got,
        ferrokv_resp::Frame::Array(vec![
            ferrokv_resp::Frame::Bulk(b"tls-cert-file".to_vec()),
            ferrokv_resp::Frame::Bulk(s(&pair.cert).as_bytes().to_vec()),
        ])
    );
    TlsClient::connect(port, &pki.ca_file(), None).unwrap();
    // A certificate of another CA, key and cert together.
    let new = other.issue("server2", &["localhost", "127.0.0.1"], false, false);
    let ok = r.cmd(&[
        "CONFIG",
        "SET",
        "tls-cert-file",
        s(&new.cert),
        "tls-key-file",
        s(&new.key),
    ]);
    assert_eq!(ok, ferrokv_resp::Frame::Simple(b"OK".to_vec()));
    assert!(TlsClient::connect(port, &pki.ca_file(), None).is_err());
    TlsClient::connect(port, &other.ca_file(), None).unwrap();
    // The connection made before keeps going.
    assert_eq!(old.cmd(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn startup_refuses_an_encrypted_key_and_a_missing_ca() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let bin = env!("CARGO_BIN_EXE_ferrokv-server");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args(["--port", "0", "--tls-port", "0", "--dir", s(dir.path())])
        .args(["--tls-replication", "yes", "--tls-cert-file", s(&pair.cert)])
        .args(["--tls-key-file", s(&pair.key)])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Either tls-ca-cert-file or tls-ca-cert-dir must be specified"),
        "{log}"
    );
    let out = Command::new(bin)
        .args(["--port", "0", "--tls-port", "0", "--dir", s(dir.path())])
        .args(["--tls-replication", "yes", "--tls-cert-file", s(&pair.cert)])
        .args([
            "--tls-key-file",
            s(&pair.key),
            "--tls-key-file-pass",
            "secret",
        ])
        .args(["--tls-ca-cert-file", s(&pki.ca_file())])
        .output()
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        log.contains("encrypted private keys (tls-key-file-pass) are not supported"),
        "{log}"
    );
}

#[test]
fn port_0_serves_tls_only() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--dir",
            s(dir.path()),
        ])
        .args([
            "--tls-cert-file",
            s(&pair.cert),
            "--tls-key-file",
            s(&pair.key),
        ])
        .args([
            "--tls-ca-cert-file",
            s(&pki.ca_file()),
            "--tls-auth-clients",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut c = wait_for("the TLS port", 10, || {
        TlsClient::connect(port, &pki.ca_file(), None).ok()
    });
    assert_eq!(c.cmd(&[b"CONFIG", b"GET", b"port"]), b"*2\r\n");
    let _ = c.send(&encode(&[b"SHUTDOWN", b"NOSAVE"]));
    let _ = child.wait();
}

fn unused_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A series' value from `/metrics` on `port`.
fn metrics_value(port: u16, name: &str) -> f64 {
    let text = common::scrape_metrics(port);
    common::metric_value(&text, name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Starts a replica (`redis`: redis-server, else ferrokv) of the TLS
/// master on `tls_port` with `tls-replication yes`, waits for its link,
/// then for a write made through `m` to reach it by the stream.
fn tls_replica_following(
    redis: bool,
    pki: &Pki,
    replica_pair: &Pair,
    tls_port: u16,
    m: &mut common::Raw,
) -> ServerProcess {
    let replica = tls_server(
        redis,
        pki,
        replica_pair,
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            leak(PathBuf::from(tls_port.to_string())),
        ],
    );
    wait_for("the replica's link", 20, || {
        (replica
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up"))
        .then_some(())
    });
    m.cmd(&["SET", "after", "sync"]);
    wait_for("the stream", 10, || {
        let v = replica.raw().cmd(&["GET", "after"]);
        (v.as_bytes() == Some(&b"sync"[..])).then_some(())
    });
    replica
}

#[test]
fn ferrokv_replica_syncs_from_a_redis_tls_master() {
    let pki = Pki::new("test CA");
    let master_pair = pki.server();
    let replica_pair = pki.issue("replica", &["localhost", "127.0.0.1"], false, false);
    let master = tls_server(true, &pki, &master_pair, &[]);
    let tls_port = master.free_port.unwrap();
    let mut m = master.raw();
    for i in 0..100 {
        m.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let replica = tls_replica_following(false, &pki, &replica_pair, tls_port, &mut m);
    assert_eq!(
        replica.raw().cmd(&["GET", "k42"]).as_bytes().unwrap(),
        b"v42"
    );
    assert_eq!(
        replica.raw().cmd(&["DBSIZE"]),
        ferrokv_resp::Frame::Integer(101)
    );
}

#[test]
fn the_replica_link_refuses_a_master_certificate_without_its_address() {
    let pki = Pki::new("test CA");
    let master_pair = pki.issue("elsewhere", &["elsewhere.example"], false, false);
    let replica_pair = pki.server();
    let master = tls_server(true, &pki, &master_pair, &[]);
    let tls_port = master.free_port.unwrap();
    master.raw().cmd(&["SET", "k", "v"]);
    let replica = tls_server(
        false,
        &pki,
        &replica_pair,
        &[
            "--tls-replication",
            "yes",
            "--replicaof",
            "127.0.0.1",
            leak(PathBuf::from(tls_port.to_string())),
        ],
    );
    wait_for("a refused attempt in the log", 20, || {
        replica
            .log()
            .contains("certificate not valid for name")
            .then_some(())
    });
    assert_eq!(
        replica
            .info_field("replication", "master_link_status")
            .as_deref(),
        Some("down")
    );
    assert_eq!(
        replica.raw().cmd(&["DBSIZE"]),
        ferrokv_resp::Frame::Integer(0)
    );
}

#[test]
fn a_redis_replica_syncs_from_a_ferrokv_tls_master() {
    let pki = Pki::new("test CA");
    let master_pair = pki.server();
    let replica_pair = pki.issue("replica", &["localhost", "127.0.0.1"], false, false);
    let master = tls_server(false, &pki, &master_pair, &[]);
    let tls_port = master.free_port.unwrap();
    let mut m = master.raw();
    let big = "x".repeat(1024 * 1024);
    for i in 0..50 {
        m.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    m.cmd(&["SET", "big", &big]);
    let replica = tls_replica_following(true, &pki, &replica_pair, tls_port, &mut m);
    assert_eq!(
        replica.raw().cmd(&["GET", "k42"]).as_bytes().unwrap(),
        b"v42"
    );
    assert_eq!(
        replica.raw().cmd(&["STRLEN", "big"]),
        ferrokv_resp::Frame::Integer(1024 * 1024)
    );
    assert_eq!(
        replica.raw().cmd(&["DBSIZE"]),
        ferrokv_resp::Frame::Integer(52)
    );
    // The master sees it as a TLS client, online.
    let line = master.info_field("replication", "slave0").unwrap();
    assert!(line.contains("state=online"), "{line}");
    assert_eq!(
        master
            .info_field("clients", "connected_clients_tls")
            .as_deref(),
        Some("1")
    );
}

#[test]
fn tls_configs_have_redis_names_defaults_and_checks() {
    let ours = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let (mut f, mut r) = (ours.raw(), redis.raw());
    let pairs = |fr: ferrokv_resp::Frame| -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
        match fr {
            ferrokv_resp::Frame::Array(v) => v
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
    let get = ["CONFIG", "GET", "tls-*"];
    let ours_all = pairs(f.cmd(&get));
    assert_eq!(ours_all.len(), 20, "{ours_all:?}");
    assert_eq!(ours_all, pairs(r.cmd(&get)));
    for args in [
        &["CONFIG", "SET", "tls-auth-clients", "maybe"][..],
        &["CONFIG", "SET", "tls-auth-clients", "optional"],
        &["CONFIG", "SET", "tls-session-cache-size", "-1"],
        &["CONFIG", "SET", "tls-replication", "x"],
        &["CONFIG", "SET", "tls-prefer-server-ciphers", "yes"],
        // TLS not in use: paths are kept unchecked, as Redis does.
        &["CONFIG", "SET", "tls-cert-file", "/nonexistent"],
    ] {
        assert_eq!(f.cmd(args), r.cmd(args), "{args:?}");
    }
    assert_eq!(pairs(f.cmd(&get)), pairs(r.cmd(&get)));
}
