//! The connection layer: one connection type, one listener type and one
//! address type, whatever transport carries the bytes. The reactor, the
//! client and the commands see [`Conn`], [`Listener`] and [`Addr`]; only
//! this file knows what is underneath (`CLIENT LIST` and `INFO` ask it
//! through [`Conn::transport`]).
//!
//! The transports are plain TCP, Unix-domain sockets (`unixsocket`,
//! `unixsocketperm`, as Redis) and RDMA ([`ferrokv_fabric::Stream`]: rings
//! written with `fi_writedata`, accepted on the `rdma-bind` listener; see
//! `net/rdma.rs` and docs/rdma.md). Each is a variant of an enum rather than
//! a trait object, so a TCP read or write costs one predictable branch over
//! calling the socket directly. TLS (`tls.rs`) is one more variant:
//! a rustls session over the TCP socket, registered as the socket is, with
//! [`Conn::drain`] telling a flush whether rustls still holds ciphertext.
//!
//! An RDMA connection differs in one way the reactor sees: its readiness
//! comes from its completion and event queues' fds, which say "something
//! completed", not "readable" or "writable" — credits that let a stalled
//! reply go on arrive as completions. So it registers for readable events
//! only, [`Conn::readiness_is_shared`] tells the reactor to retry a stalled
//! write on them, and [`Conn::rearm`] must be called before the loop sleeps
//! (`fi_trywait`; `false` means progress was made meanwhile: serve it now).

use mio::event::Source;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::sync::Arc;

/// What carries a connection (`INFO clients` counts by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Unix,
    Rdma,
    Tls,
}

impl Transport {
    pub const ALL: [Transport; 4] = [
        Transport::Tcp,
        Transport::Unix,
        Transport::Rdma,
        Transport::Tls,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
            Transport::Rdma => "rdma",
            Transport::Tls => "tls",
        }
    }
}

/// A peer's or a listener's address as Redis prints it: `ip:port`
/// (`[v6]:port`), or `path:0` for a Unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    Ip(SocketAddr),
    /// The socket file (a Unix peer has no name of its own: Redis shows
    /// the server's path for both ends).
    Unix(Arc<Path>),
}

impl Addr {
    /// The address of a connection with no socket (the AOF client).
    pub fn none() -> Addr {
        Addr::Ip(([0, 0, 0, 0], 0).into())
    }

    /// The IP, or the socket path for a Unix peer (`INFO`'s `slaveN:ip=`).
    pub fn host(&self) -> String {
        match self {
            Addr::Ip(a) => a.ip().to_string(),
            Addr::Unix(p) => p.display().to_string(),
        }
    }

    /// The port (0 for a Unix socket, as Redis reports it).
    pub fn port(&self) -> u16 {
        match self {
            Addr::Ip(a) => a.port(),
            Addr::Unix(_) => 0,
        }
    }

    /// From 127.0.0.0/8 or ::1, or over a Unix socket: Redis's
    /// `connIsLocal` (protected mode lets these in).
    pub fn is_loopback(&self) -> bool {
        match self {
            Addr::Ip(a) => a.ip().is_loopback(),
            Addr::Unix(_) => true,
        }
    }

    /// From exactly 127.0.0.1 or ::1, or over a Unix socket: Redis's
    /// `islocalClient` (the `local` mode of protected commands).
    pub fn is_local(&self) -> bool {
        match self {
            Addr::Ip(a) => match a.ip() {
                std::net::IpAddr::V4(ip) => ip == std::net::Ipv4Addr::LOCALHOST,
                std::net::IpAddr::V6(ip) => ip == std::net::Ipv6Addr::LOCALHOST,
            },
            Addr::Unix(_) => true,
        }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Ip(a) => fmt::Display::fmt(a, f),
            Addr::Unix(p) => write!(f, "{}:0", p.display()),
        }
    }
}

/// An accepted client connection.
pub enum Conn {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
    Rdma(Box<ferrokv_fabric::Stream>),
    /// TLS over TCP (`tls-port`, or a replica's link with `tls-replication`):
    /// `tls.rs`.
    Tls(Box<crate::tls::TlsStream>),
    /// A TCP or Unix connection whose reads and writes go through the
    /// io_uring backend (`uring.rs`): the transport it reports is the
    /// socket's.
    Uring(Box<crate::uring::UringConn>, Transport),
}

impl Conn {
    pub fn transport(&self) -> Transport {
        match self {
            Conn::Tcp(_) => Transport::Tcp,
            Conn::Unix(_) => Transport::Unix,
            Conn::Rdma(_) => Transport::Rdma,
            Conn::Tls(_) => Transport::Tls,
            Conn::Uring(_, t) => *t,
        }
    }

    /// Reply bytes handed to the kernel and not yet sent (io_uring).
    #[inline]
    pub fn unsent(&self) -> usize {
        match self {
            Conn::Uring(u, _) => u.unsent(),
            _ => 0,
        }
    }

    /// Received bytes wait on the connection, unread (io_uring).
    pub fn has_landed(&self) -> bool {
        match self {
            Conn::Uring(u, _) => u.has_landed(),
            _ => false,
        }
    }

    /// Buffers the connection holds beyond the client's (io_uring).
    pub fn held_bytes(&self) -> usize {
        match self {
            Conn::Uring(u, _) => u.held_bytes(),
            _ => 0,
        }
    }

    /// After a reply was written whole: whether the transport sent all of
    /// it too (TLS keeps ciphertext the socket did not take yet); `false`
    /// means wait for writable.
    #[inline]
    pub fn drain(&mut self) -> io::Result<bool> {
        match self {
            Conn::Tls(s) => s.drain(),
            _ => Ok(true),
        }
    }

    /// A blocking duplicate of the socket, for a thread that writes a bulk
    /// transfer outside the loop (a replica's full sync) or shuts it down.
    /// An RDMA connection has no socket to hand over.
    pub fn try_clone_socket(&self) -> io::Result<socket2::Socket> {
        if let Conn::Rdma(_) | Conn::Tls(_) = self {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "an RDMA or TLS connection has no socket to hand to a sender thread",
            ));
        }
        Ok(socket2::Socket::from(self.as_fd().try_clone_to_owned()?))
    }

    /// Whether [`Conn::try_clone_socket`] can give a socket.
    pub fn has_socket(&self) -> bool {
        !matches!(self, Conn::Rdma(_) | Conn::Tls(_))
    }

    /// Back to non-blocking after a thread used its duplicate.
    pub fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Conn::Rdma(_) => Ok(()),
            _ => socket2::SockRef::from(self).set_nonblocking(true),
        }
    }

    /// Whether one readiness event stands for reads and writes alike (an
    /// RDMA connection's queue fds): a write stalled for room is retried on
    /// a readable event.
    #[inline]
    pub fn readiness_is_shared(&self) -> bool {
        matches!(self, Conn::Rdma(_))
    }

    /// Before the loop sleeps: `Ok(true)` when it may (sockets always; an
    /// RDMA connection as `Stream::rearm` decides), `Ok(false)` when it made
    /// progress meanwhile and must be served first.
    pub fn rearm(&mut self) -> io::Result<bool> {
        match self {
            Conn::Rdma(s) => s.rearm(),
            _ => Ok(true),
        }
    }

    /// An RDMA connection idle (nothing written) for `after` gets a
    /// keepalive; whether one went out.
    pub fn keepalive_if_idle(&mut self, after: std::time::Duration) -> io::Result<bool> {
        match self {
            Conn::Rdma(s) if s.idle() >= after => s.keepalive(),
            _ => Ok(false),
        }
    }

    /// Whether requests can be parsed where they landed
    /// ([`Conn::peek_in_place`]): an RDMA connection's receive ring, or the
    /// io_uring backend's provided buffers.
    #[inline]
    pub fn parses_in_place(&self) -> bool {
        matches!(self, Conn::Rdma(_) | Conn::Uring(..))
    }

    /// The unread bytes of the oldest slot of an RDMA connection's ring (or
    /// the oldest received buffer of an io_uring connection), in place;
    /// `None` for sockets, or when nothing landed.
    pub fn peek_in_place(&mut self) -> Option<&[u8]> {
        match self {
            Conn::Rdma(s) => s.peek(),
            Conn::Uring(u, _) => u.peek(),
            _ => None,
        }
    }

    /// Whether the ordinary `read` must go on: the stream ended or failed
    /// (the read says how), or an io_uring socket has more than landed.
    pub fn in_place_ended(&self) -> bool {
        match self {
            Conn::Rdma(s) => s.is_closed(),
            Conn::Uring(u, _) => u.ended_or_more(),
            _ => false,
        }
    }

    /// Marks `n` bytes [`Conn::peek_in_place`] showed as read.
    pub fn consume_in_place(&mut self, n: usize) -> io::Result<()> {
        match self {
            Conn::Rdma(s) => s.consume(n),
            Conn::Uring(u, _) => {
                u.consume(n);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The RDMA stream, to change its live knobs (autotune).
    pub fn rdma_stream_mut(&mut self) -> Option<&mut ferrokv_fabric::Stream> {
        match self {
            Conn::Rdma(s) => Some(s),
            _ => None,
        }
    }

    /// The RDMA stream's counters.
    pub fn rdma_stats(&self) -> Option<ferrokv_fabric::StreamStats> {
        match self {
            Conn::Rdma(s) => Some(s.stats),
            _ => None,
        }
    }
}

impl Read for Conn {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
            Conn::Rdma(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
            Conn::Uring(u, _) => u.read(buf),
        }
    }
}

impl Write for Conn {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
            Conn::Rdma(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
            Conn::Uring(u, _) => u.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Conn::Tcp(s) => s.as_fd(),
            Conn::Unix(s) => s.as_fd(),
            Conn::Tls(s) => s.sock.as_fd(),
            Conn::Uring(u, _) => u.as_fd(),
            // The completion queue's fd (what `CLIENT LIST` shows as `fd=`).
            // SAFETY: the fd is the CQ's, open as long as the stream is.
            Conn::Rdma(s) => unsafe { BorrowedFd::borrow_raw(s.fds()[0]) },
        }
    }
}

impl AsRawFd for Conn {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl Source for Conn {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.register(r, t, i),
            Conn::Unix(s) => s.register(r, t, i),
            Conn::Tls(s) => s.sock.register(r, t, i),
            // Not in the epoll set: its receives are on the ring, armed
            // again when the loop takes it back.
            Conn::Uring(u, _) => {
                u.park(false);
                Ok(())
            }
            // Both queues' fds, readable only (see the module documentation).
            Conn::Rdma(s) => {
                for fd in s.fds() {
                    r.register(&mut SourceFd(&fd), t, Interest::READABLE)?;
                }
                Ok(())
            }
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.reregister(r, t, i),
            Conn::Unix(s) => s.reregister(r, t, i),
            Conn::Tls(s) => s.sock.reregister(r, t, i),
            // (Writable interest: a send's completion says when it is done.)
            Conn::Uring(..) => Ok(()),
            Conn::Rdma(s) => {
                for fd in s.fds() {
                    r.reregister(&mut SourceFd(&fd), t, Interest::READABLE)?;
                }
                Ok(())
            }
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.deregister(r),
            Conn::Unix(s) => s.deregister(r),
            Conn::Tls(s) => s.sock.deregister(r),
            // Out of the loop (a replica's socket lent to its sender):
            // no receive is armed until it is registered again.
            Conn::Uring(u, _) => {
                u.park(true);
                Ok(())
            }
            Conn::Rdma(s) => {
                for fd in s.fds() {
                    r.deregister(&mut SourceFd(&fd))?;
                }
                Ok(())
            }
        }
    }
}

/// A connection a thread drives with blocking calls before the loop takes it
/// over: the replica's handshake and sync (`replication/handshake.rs`) run on
/// their own thread, over TCP or, with `replica-rdma`, over an RDMA stream.
/// Reads wait at most a short `poll` interval so the thread can notice a
/// cancelled sync; [`BlockingConn::into_conn`] gives the loop its [`Conn`].
pub enum BlockingConn {
    Tcp(std::net::TcpStream),
    Rdma(Box<ferrokv_fabric::Stream>),
    /// `tls-replication`: the master's certificate checked against the
    /// host the replica was pointed at.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>>),
}

impl BlockingConn {
    /// A TCP connection to `addr` within `timeout`, reads waiting `poll`.
    pub fn connect_tcp(
        addr: SocketAddr,
        timeout: std::time::Duration,
        poll: std::time::Duration,
    ) -> io::Result<BlockingConn> {
        let s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(poll))?;
        Ok(BlockingConn::Tcp(s))
    }

    /// A TLS connection to `addr` (`host` is what the master's
    /// certificate must name), handshake done within `timeout`.
    pub fn connect_tls(
        addr: SocketAddr,
        host: &str,
        cfg: Arc<rustls::ClientConfig>,
        timeout: std::time::Duration,
        poll: std::time::Duration,
    ) -> io::Result<BlockingConn> {
        let s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(poll))?;
        s.set_write_timeout(Some(timeout))?;
        let s = crate::tls::connect_blocking(s, host, cfg, timeout)?;
        Ok(BlockingConn::Tls(Box::new(s)))
    }

    /// An RDMA stream to the listener at `addr` (docs/rdma.md, "RDMA
    /// connections").
    pub fn connect_rdma(
        lib: &Arc<ferrokv_fabric::Library>,
        provider: Option<&str>,
        addr: SocketAddr,
        config: ferrokv_fabric::StreamConfig,
        timeout: std::time::Duration,
    ) -> Result<BlockingConn, ferrokv_fabric::FabricError> {
        ferrokv_fabric::Stream::connect(lib, provider, addr, config, timeout)
            .map(|s| BlockingConn::Rdma(Box::new(s)))
    }

    pub fn transport(&self) -> Transport {
        match self {
            BlockingConn::Tcp(_) => Transport::Tcp,
            BlockingConn::Rdma(_) => Transport::Rdma,
            BlockingConn::Tls(_) => Transport::Tls,
        }
    }

    /// Reads what is there; `WouldBlock` or `TimedOut` when nothing came
    /// within `poll`.
    pub fn read_within(&mut self, buf: &mut [u8], poll: std::time::Duration) -> io::Result<usize> {
        match self {
            BlockingConn::Tcp(s) => s.read(buf),
            BlockingConn::Rdma(s) => s.read_blocking(buf, Some(poll)),
            BlockingConn::Tls(s) => s.read(buf),
        }
    }

    /// Writes all of `buf`; `TimedOut` when the peer takes nothing for
    /// `limit`.
    pub fn write_all_within(
        &mut self,
        mut buf: &[u8],
        limit: std::time::Duration,
    ) -> io::Result<()> {
        match self {
            BlockingConn::Tcp(s) => {
                s.set_write_timeout(Some(limit))?;
                s.write_all(buf)
            }
            BlockingConn::Tls(s) => {
                s.sock.set_write_timeout(Some(limit))?;
                s.write_all(buf)?;
                s.flush()
            }
            BlockingConn::Rdma(s) => {
                while !buf.is_empty() {
                    let n = s.write_blocking(buf, Some(limit))?;
                    buf = &buf[n..];
                }
                Ok(())
            }
        }
    }

    /// The loop's connection, non-blocking, with the peer's and our
    /// addresses.
    pub fn into_conn(self) -> io::Result<(Conn, Addr, Addr)> {
        match self {
            BlockingConn::Tcp(s) => {
                s.set_nonblocking(true)?;
                s.set_read_timeout(None)?;
                s.set_write_timeout(None)?;
                let peer = s.peer_addr()?;
                let local = s.local_addr().unwrap_or(peer);
                Ok((
                    Conn::Tcp(mio::net::TcpStream::from_std(s)),
                    Addr::Ip(peer),
                    Addr::Ip(local),
                ))
            }
            BlockingConn::Tls(s) => {
                let peer = s.sock.peer_addr()?;
                let local = s.sock.local_addr().unwrap_or(peer);
                let s = crate::tls::from_blocking(*s)?;
                Ok((Conn::Tls(Box::new(s)), Addr::Ip(peer), Addr::Ip(local)))
            }
            BlockingConn::Rdma(s) => {
                let peer = s.peer_addr().map(Addr::Ip).unwrap_or_else(|_| Addr::none());
                let local = s
                    .local_addr()
                    .map(Addr::Ip)
                    .unwrap_or_else(|_| Addr::none());
                Ok((Conn::Rdma(s), peer, local))
            }
        }
    }
}

/// Socket options a TCP connection gets when accepted.
#[derive(Clone, Default)]
pub struct TcpOptions {
    /// `tcp-keepalive` seconds (0: off).
    pub keepalive_secs: u64,
    /// The TLS configuration new connections on a TLS listener get (the
    /// current one: a `CONFIG SET tls-cert-file` applies to the next).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// A listening socket of any transport.
pub enum Listener {
    Tcp(mio::net::TcpListener),
    /// `tls-port`: TCP whose connections start with a TLS handshake.
    Tls(mio::net::TcpListener),
    Unix {
        listener: mio::net::UnixListener,
        path: Arc<Path>,
    },
}

/// One accepted connection, with both ends' addresses.
pub struct Accepted {
    pub conn: Conn,
    pub peer: Addr,
    pub local: Addr,
}

/// A listening TCP socket on `addr` with `backlog` (plain or TLS).
fn listen_tcp(addr: SocketAddr, backlog: i32) -> io::Result<mio::net::TcpListener> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.bind(&addr.into()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("Could not create server TCP listening socket {addr}: {e}"),
        )
    })?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    let std_listener: std::net::TcpListener = sock.into();
    Ok(mio::net::TcpListener::from_std(std_listener))
}

impl Listener {
    /// A TCP listener on `addr` with `backlog`.
    pub fn bind_tcp(addr: SocketAddr, backlog: i32) -> io::Result<Listener> {
        listen_tcp(addr, backlog).map(Listener::Tcp)
    }

    /// A TLS listener on `addr` (`tls-port`).
    pub fn bind_tls(addr: SocketAddr, backlog: i32) -> io::Result<Listener> {
        listen_tcp(addr, backlog).map(Listener::Tls)
    }

    /// A Unix-socket listener at `path`, as Redis makes it: a stale file
    /// there is removed first, and a non-zero `perm` (`unixsocketperm`) is
    /// applied to the new socket file.
    pub fn bind_unix(path: &Path, perm: u32, backlog: i32) -> io::Result<Listener> {
        let fail = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("Failed opening Unix socket {}: {e}", path.display()),
            )
        };
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e)),
        }
        let sock = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)
            .map_err(fail)?;
        sock.bind(&socket2::SockAddr::unix(path).map_err(fail)?)
            .map_err(fail)?;
        if perm != 0 {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm)).map_err(fail)?;
        }
        sock.listen(backlog).map_err(fail)?;
        sock.set_nonblocking(true).map_err(fail)?;
        let std_listener: std::os::unix::net::UnixListener = sock.into();
        Ok(Listener::Unix {
            listener: mio::net::UnixListener::from_std(std_listener),
            path: Arc::from(path),
        })
    }

    /// The TCP port it listens on (`None` for a Unix socket).
    pub fn tcp_port(&self) -> Option<u16> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => l.local_addr().ok().map(|a| a.port()),
            Listener::Unix { .. } => None,
        }
    }

    /// The socket file of a Unix listener.
    pub fn unix_path(&self) -> Option<&Path> {
        match self {
            Listener::Tcp(_) | Listener::Tls(_) => None,
            Listener::Unix { path, .. } => Some(path),
        }
    }

    /// The next pending connection, set up for the server (TCP: no Nagle,
    /// keepalive as configured); `WouldBlock` when none is pending.
    pub fn accept(&self, opts: TcpOptions) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => {
                let (s, peer) = l.accept()?;
                let _ = s.set_nodelay(true);
                if opts.keepalive_secs > 0 {
                    let ka = socket2::TcpKeepalive::new()
                        .with_time(std::time::Duration::from_secs(opts.keepalive_secs));
                    let _ = socket2::SockRef::from(&s).set_tcp_keepalive(&ka);
                }
                let local = s.local_addr().unwrap_or(peer);
                let conn = match self {
                    Listener::Tls(_) => {
                        let cfg = opts.tls.clone().ok_or_else(|| {
                            io::Error::other("a TLS connection arrived with TLS not configured")
                        })?;
                        Conn::Tls(Box::new(crate::tls::TlsStream::accept(s, cfg)?))
                    }
                    _ => Conn::Tcp(s),
                };
                Ok(Accepted {
                    conn,
                    peer: Addr::Ip(peer),
                    local: Addr::Ip(local),
                })
            }
            Listener::Unix { listener, path } => {
                let (s, _) = listener.accept()?;
                Ok(Accepted {
                    conn: Conn::Unix(s),
                    peer: Addr::Unix(path.clone()),
                    local: Addr::Unix(path.clone()),
                })
            }
        }
    }
}

impl Source for Listener {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => l.register(r, t, i),
            Listener::Unix { listener, .. } => listener.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => l.reregister(r, t, i),
            Listener::Unix { listener, .. } => listener.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => l.deregister(r),
            Listener::Unix { listener, .. } => listener.deregister(r),
        }
    }
}

impl Drop for Listener {
    /// A Unix socket's file goes with it, as Redis removes it at shutdown.
    fn drop(&mut self) {
        if let Listener::Unix { path, .. } = self {
            let _ = std::fs::remove_file(&**path);
        }
    }
}
