//! TLS (rustls with the `ring` provider; nothing of OpenSSL at build time):
//! the settings Redis 7.0 names `tls-*`, the rustls configurations built
//! from them, and the non-blocking stream the connection layer wraps as
//! [`crate::conn::Conn::Tls`].
//!
//! The stream never blocks the loop: a read pulls what the socket has into
//! rustls, answers the handshake's flights as they complete and hands back
//! plaintext; with nothing there it says `WouldBlock` like a socket, so a
//! peer that stalls mid-handshake costs the loop nothing but its slot. A
//! read fills the caller's buffer or stops at the socket's `WouldBlock`
//! (the reactor is edge-triggered: a read that stopped with plaintext still
//! inside rustls would strand it). A write takes at most [`WRITE_CHUNK`]
//! bytes of plaintext into rustls at a time and says `WouldBlock` while
//! earlier ciphertext is still waiting for the socket; [`TlsStream::drain`]
//! tells the client's flush whether the last of it went out.
//!
//! The configurations are rebuilt whole (`TlsContext::build`) at start-up
//! and on `CONFIG SET` of any `tls-*` option; connections keep the
//! configuration they were accepted with, new handshakes use the new one.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Completed TLS handshakes (incoming and outgoing), for `/metrics`.
pub static HANDSHAKES: AtomicU64 = AtomicU64::new(0);
/// Handshakes that failed (bad certificate, no client certificate, protocol
/// error), for `/metrics`.
pub static HANDSHAKE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Plaintext taken into rustls per write: bounds what one connection keeps
/// encrypted but unsent.
const WRITE_CHUNK: usize = 64 * 1024;

/// `tls-auth-clients`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthClients {
    Yes,
    No,
    Optional,
}

/// The `tls-*` configs, as Redis 7.0 has them.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    pub port: u16,
    pub cert_file: String,
    pub key_file: String,
    pub key_file_pass: String,
    pub client_cert_file: String,
    pub client_key_file: String,
    pub client_key_file_pass: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub dh_params_file: String,
    pub auth_clients: AuthClients,
    pub protocols: String,
    pub ciphers: String,
    pub ciphersuites: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: u64,
    pub session_cache_timeout: u64,
    pub replication: bool,
    pub cluster: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            port: 0,
            cert_file: String::new(),
            key_file: String::new(),
            key_file_pass: String::new(),
            client_cert_file: String::new(),
            client_key_file: String::new(),
            client_key_file_pass: String::new(),
            ca_cert_file: String::new(),
            ca_cert_dir: String::new(),
            dh_params_file: String::new(),
            auth_clients: AuthClients::Yes,
            protocols: String::new(),
            ciphers: String::new(),
            ciphersuites: String::new(),
            prefer_server_ciphers: false,
            session_caching: true,
            session_cache_size: 20 * 1024,
            session_cache_timeout: 300,
            replication: false,
            cluster: false,
        }
    }
}

impl TlsSettings {
    /// Whether anything uses TLS (Redis configures it only then).
    pub fn in_use(&self) -> bool {
        self.port != 0 || self.replication || self.cluster
    }
}

/// The rustls configurations in force: one for accepted connections, one
/// for outgoing links (a replica's link to its master).
#[derive(Clone, Default)]
pub struct TlsContext {
    pub server: Option<Arc<rustls::ServerConfig>>,
    pub client: Option<Arc<rustls::ClientConfig>>,
}

/// The TLS 1.3 suites by their OpenSSL (`tls-ciphersuites`) names.
fn tls13_suite(name: &str) -> Option<rustls::SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as cs;
    Some(match name {
        "TLS_AES_128_GCM_SHA256" => cs::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_256_GCM_SHA384" => cs::TLS13_AES_256_GCM_SHA384,
        "TLS_CHACHA20_POLY1305_SHA256" => cs::TLS13_CHACHA20_POLY1305_SHA256,
        _ => return None,
    })
}

/// The TLS 1.2 suites by their OpenSSL (`tls-ciphers`) names.
fn tls12_suite(name: &str) -> Option<rustls::SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as cs;
    Some(match name {
        "ECDHE-ECDSA-AES128-GCM-SHA256" => cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES256-GCM-SHA384" => cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-CHACHA20-POLY1305" => cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256" => cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES256-GCM-SHA384" => cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-CHACHA20-POLY1305" => cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        _ => return None,
    })
}

/// The cipher suites of `list` (colon-separated OpenSSL names), all of the
/// version's when empty; an unknown name is an error.
fn suites(
    list: &str,
    option: &str,
    by_name: fn(&str) -> Option<rustls::SupportedCipherSuite>,
    all: &[rustls::SupportedCipherSuite],
) -> Result<Vec<rustls::SupportedCipherSuite>, String> {
    if list.trim().is_empty() {
        return Ok(all.to_vec());
    }
    list.split(':')
        .filter(|n| !n.is_empty())
        .map(|n| {
            by_name(n).ok_or_else(|| {
                format!(
                    "Failed to configure {option}: '{n}' is not a cipher suite rustls (ring) has"
                )
            })
        })
        .collect()
}

/// Validates a `tls-ciphers`/`tls-ciphersuites` value (at `CONFIG SET`).
pub fn check_suites(list: &str, tls13: bool) -> Result<(), String> {
    if tls13 {
        suites(list, "tls-ciphersuites", tls13_suite, &[]).map(drop)
    } else {
        suites(list, "tls-ciphers", tls12_suite, &[]).map(drop)
    }
}

/// `tls-protocols` as rustls versions (empty: TLSv1.2 and TLSv1.3, as
/// Redis's default). Redis takes TLSv1 and TLSv1.1 too; rustls has neither.
pub fn protocol_versions(
    s: &str,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    if s.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut v = Vec::new();
    for w in s.split_whitespace() {
        match w.to_ascii_lowercase().as_str() {
            "tlsv1.2" => v.push(&rustls::version::TLS12),
            "tlsv1.3" => v.push(&rustls::version::TLS13),
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "{w} is not supported by ferrokv (rustls has TLSv1.2 and TLSv1.3 only)"
                ))
            }
            _ => return Err(format!("Invalid tls-protocols specified: {w}")),
        }
    }
    Ok(v)
}

fn read_file(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("Failed to load {what} {path}: {e}"))
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_file(path, "certificate")?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| format!("Failed to load certificate {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate {path}: no certificate in it"
        ));
    }
    Ok(certs)
}

fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_file(path, "private key")?;
    if pem.windows(19).any(|w| w == b"ENCRYPTED PRIVATE K") || !pass.is_empty() {
        // rustls reads PKCS#1, SEC1 and plain PKCS#8 keys; none of the
        // crates it builds on decrypts PKCS#8 (docs/tls.md).
        return Err(format!(
            "Failed to load private key {path}: encrypted private keys (tls-key-file-pass) are not supported by ferrokv; decrypt it first (openssl pkey -in {path} -out plain.key)"
        ));
    }
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| format!("Failed to load private key {path}: {e}"))?
        .ok_or_else(|| format!("Failed to load private key {path}: no private key in it"))
}

fn load_roots(s: &TlsSettings) -> Result<Arc<rustls::RootCertStore>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let mut add = |path: &str| -> Result<(), String> {
        for c in load_certs(path)? {
            roots.add(c).map_err(|e| {
                format!("Failed to configure CA certificate(s) file/directory: {e}")
            })?;
        }
        Ok(())
    };
    if !s.ca_cert_file.is_empty() {
        add(&s.ca_cert_file)?;
    }
    if !s.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&s.ca_cert_dir).map_err(|e| {
            format!(
                "Failed to configure CA certificate(s) file/directory: {}: {e}",
                s.ca_cert_dir
            )
        })?;
        for entry in dir.flatten() {
            let p = entry.path();
            if p.is_file() {
                // OpenSSL looks files up by hash name; every certificate
                // file of the folder is taken (a non-PEM file is skipped).
                let _ = add(&p.to_string_lossy());
            }
        }
    }
    Ok(Arc::new(roots))
}

impl TlsContext {
    /// The configurations for `s`, or Redis's kind of error; nothing when
    /// TLS is not in use.
    pub fn build(s: &TlsSettings) -> Result<TlsContext, String> {
        if !s.in_use() {
            return Ok(TlsContext::default());
        }
        if s.cert_file.is_empty() || s.key_file.is_empty() {
            return Err("No tls-cert-file or tls-key-file configured".into());
        }
        if s.ca_cert_file.is_empty() && s.ca_cert_dir.is_empty() {
            return Err(
                "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!"
                    .into(),
            );
        }
        let base = rustls::crypto::ring::default_provider();
        let mut all = suites(
            &s.ciphersuites,
            "tls-ciphersuites",
            tls13_suite,
            &base.cipher_suites,
        )?
        .into_iter()
        .filter(|c| c.version() == &rustls::version::TLS13)
        .collect::<Vec<_>>();
        all.extend(
            suites(&s.ciphers, "tls-ciphers", tls12_suite, &base.cipher_suites)?
                .into_iter()
                .filter(|c| c.version() == &rustls::version::TLS12),
        );
        let provider = Arc::new(rustls::crypto::CryptoProvider {
            cipher_suites: all,
            ..base
        });
        let versions = protocol_versions(&s.protocols)?;
        let roots = load_roots(s)?;
        let certs = load_certs(&s.cert_file)?;
        let key = load_key(&s.key_file, &s.key_file_pass)?;

        let verifier = match s.auth_clients {
            AuthClients::No => None,
            mode => {
                let b = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    roots.clone(),
                    provider.clone(),
                );
                let b = if mode == AuthClients::Optional {
                    b.allow_unauthenticated()
                } else {
                    b
                };
                Some(
                    b.build()
                        .map_err(|e| format!("Failed to configure TLS: {e}"))?,
                )
            }
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS: {e}"))?;
        let builder = match verifier {
            Some(v) => builder.with_client_cert_verifier(v),
            None => builder.with_no_client_auth(),
        };
        let mut server = builder
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| format!("Failed to configure TLS: tls-cert-file/tls-key-file: {e}"))?;
        server.ignore_client_order = s.prefer_server_ciphers;
        if s.session_caching {
            server.session_storage =
                rustls::server::ServerSessionMemoryCache::new(s.session_cache_size.max(1) as usize);
            server.ticketer = rustls::crypto::ring::Ticketer::new()
                .map_err(|e| format!("Failed to configure TLS session tickets: {e}"))?;
        } else {
            server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
            server.send_tls13_tickets = 0;
        }

        // Outgoing links: tls-client-cert-file/-key-file when set, else the
        // server's own pair (Redis falls back the same way).
        let (ccerts, ckey) = if !s.client_cert_file.is_empty() && !s.client_key_file.is_empty() {
            (
                load_certs(&s.client_cert_file)?,
                load_key(&s.client_key_file, &s.client_key_file_pass)?,
            )
        } else {
            (certs, key)
        };
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS: {e}"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(ccerts, ckey)
            .map_err(|e| format!("Failed to configure TLS: tls-client-cert-file: {e}"))?;
        Ok(TlsContext {
            server: Some(Arc::new(server)),
            client: Some(Arc::new(client)),
        })
    }
}

/// A TLS connection over a non-blocking socket: accepted (server side) or
/// a replica's link to its master (client side), driven by the loop.
pub struct TlsStream {
    pub sock: mio::net::TcpStream,
    tls: rustls::Connection,
    handshaken: bool,
}

impl TlsStream {
    pub fn accept(sock: mio::net::TcpStream, cfg: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        let tls = rustls::ServerConnection::new(cfg).map_err(io::Error::other)?;
        Ok(TlsStream {
            sock,
            tls: tls.into(),
            handshaken: false,
        })
    }

    /// The client side over a socket whose connect may not have completed
    /// (a cluster bus link): the handshake runs as the loop reads and
    /// writes; `host`'s address or name must be in the peer's certificate.
    pub fn connect(
        sock: mio::net::TcpStream,
        host: &str,
        cfg: Arc<rustls::ClientConfig>,
    ) -> io::Result<Self> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
        let tls = rustls::ClientConnection::new(cfg, name).map_err(io::Error::other)?;
        Ok(TlsStream {
            sock,
            tls: tls.into(),
            handshaken: false,
        })
    }

    /// Writes ciphertext rustls holds; `Ok(true)` when none is left.
    fn flush_tls(&mut self) -> io::Result<bool> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// After a write returned all it was given: whether the ciphertext is
    /// all on the socket too (`Ok(false)`: wait for writable).
    pub fn drain(&mut self) -> io::Result<bool> {
        self.flush_tls()
    }

    pub fn is_handshaking(&self) -> bool {
        self.tls.is_handshaking()
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        loop {
            match self.tls.reader().read(&mut buf[filled..]) {
                Ok(0) if filled < buf.len() => return Ok(filled), // close_notify
                Ok(n) => {
                    filled += n;
                    if filled == buf.len() {
                        return Ok(filled);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if filled > 0 => {
                    let _ = e;
                    return Ok(filled);
                }
                Err(e) => return Err(e),
            }
            match self.tls.read_tls(&mut self.sock) {
                Ok(0) => {
                    if self.tls.is_handshaking() && !self.handshaken {
                        HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
                        self.handshaken = true;
                    }
                    return Ok(filled);
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.flush_tls()?;
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.tls.process_new_packets() {
                if !self.handshaken {
                    HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
                    self.handshaken = true;
                }
                // The alert rustls queued tells the peer why.
                let _ = self.flush_tls();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            if !self.handshaken && !self.tls.is_handshaking() {
                self.handshaken = true;
                HANDSHAKES.fetch_add(1, Ordering::Relaxed);
            }
            self.flush_tls()?;
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.flush_tls()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self
            .tls
            .writer()
            .write(&buf[..buf.len().min(WRITE_CHUNK)])?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        // What the socket does not take now waits in rustls: the next
        // write, or `drain`, sends it.
        self.flush_tls()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_tls().map(drop)
    }
}

/// A blocking TLS client connection (the replica's handshake thread):
/// handshake completed within `timeout`, the master's certificate checked
/// against `host` (a DNS name or an IP address).
pub fn connect_blocking(
    sock: std::net::TcpStream,
    host: &str,
    cfg: Arc<rustls::ClientConfig>,
    timeout: std::time::Duration,
) -> io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let mut conn = rustls::ClientConnection::new(cfg, name).map_err(io::Error::other)?;
    let mut sock = sock;
    let deadline = std::time::Instant::now() + timeout;
    while conn.is_handshaking() {
        match conn.complete_io(&mut sock) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && std::time::Instant::now() < deadline => {}
            Err(e) => {
                HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        }
    }
    HANDSHAKES.fetch_add(1, Ordering::Relaxed);
    Ok(rustls::StreamOwned::new(conn, sock))
}

/// The loop's stream for a link whose handshake a thread completed.
pub fn from_blocking(
    s: rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
) -> io::Result<TlsStream> {
    let (conn, sock) = s.into_parts();
    sock.set_nonblocking(true)?;
    sock.set_read_timeout(None)?;
    sock.set_write_timeout(None)?;
    Ok(TlsStream {
        sock: mio::net::TcpStream::from_std(sock),
        tls: conn.into(),
        handshaken: true,
    })
}
