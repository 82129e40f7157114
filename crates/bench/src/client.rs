//! A small blocking, pipelining RESP2 client over one connection (TCP,
//! or a Unix-domain socket for a `unix:/path` address).
//!
//! Each benchmark connection lives on its own thread, so blocking I/O is
//! the simplest thing that can keep a pipeline full: the caller appends any
//! number of commands to the write buffer, flushes them in one write, and
//! then reads exactly as many replies back, in order.

use ferrokv_resp::frame::FrameError;
use ferrokv_resp::Frame;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Why talking to a server failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    #[error("server closed the connection")]
    Closed,
    #[error("server sent invalid RESP: {0}")]
    Protocol(&'static str),
}

/// Batches up to this size are written with one blocking write: loopback
/// socket buffers hold them whole.
const BLOCKING_WRITE_LIMIT: usize = 256 * 1024;

/// The connection under a [`Connection`]: TCP (`host:port`), a Unix-domain
/// socket (`unix:/path`), or an RDMA connection to the server's `rdma-bind`
/// listener (`rdma:host:port`, libfabric's tcp provider unless
/// `FI_PROVIDER` says otherwise).
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// The stream, whether reads and writes block, the read timeout.
    Rdma(Box<ferrokv_fabric::Stream>, bool, Option<Duration>),
}

impl Stream {
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
            Stream::Rdma(_, blocking, _) => {
                *blocking = !on;
                Ok(())
            }
        }
    }

    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Rdma(_, _, timeout) => {
                *timeout = t;
                Ok(())
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Rdma(s, true, limit) => s.read_blocking(buf, *limit),
            Stream::Rdma(s, false, _) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Rdma(s, true, _) => s.write_blocking(buf, Some(Duration::from_secs(30))),
            Stream::Rdma(s, false, _) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct Connection {
    stream: Stream,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    /// Start of the unread part of `inbuf`.
    read_pos: usize,
}

impl Connection {
    /// Connects to `host:port`, the Unix socket of `unix:/path`, or the RDMA
    /// listener of `rdma:host:port`.
    pub fn connect(addr: &str) -> Result<Connection, ClientError> {
        let fail = |source| ClientError::Connect {
            addr: addr.to_string(),
            source,
        };
        let mut stream = if let Some(path) = addr.strip_prefix("unix:") {
            Stream::Unix(UnixStream::connect(path).map_err(fail)?)
        } else if let Some(host) = addr.strip_prefix("rdma:") {
            let target: std::net::SocketAddr = host
                .parse()
                .map_err(|e| fail(io::Error::new(io::ErrorKind::InvalidInput, format!("{e}"))))?;
            let lib = ferrokv_fabric::Library::open_default()
                .map_err(|e| fail(io::Error::other(e.to_string())))?;
            let provider = std::env::var(ferrokv_fabric::PROVIDER_ENV).ok();
            let s = ferrokv_fabric::Stream::connect(
                &lib,
                Some(provider.as_deref().unwrap_or("tcp")),
                target,
                ferrokv_fabric::StreamConfig::default(),
                Duration::from_secs(10),
            )
            .map_err(|e| fail(io::Error::other(e.to_string())))?;
            Stream::Rdma(Box::new(s), true, None)
        } else {
            let s = TcpStream::connect(addr).map_err(fail)?;
            s.set_nodelay(true)?;
            Stream::Tcp(s)
        };
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Connection {
            stream,
            out: Vec::with_capacity(64 * 1024),
            inbuf: Vec::with_capacity(64 * 1024),
            read_pos: 0,
        })
    }

    /// Queues one command.
    pub fn queue<T: AsRef<[u8]>>(&mut self, args: &[T]) {
        ferrokv_resp::encode::array(&mut self.out, args.len());
        for a in args {
            ferrokv_resp::encode::bulk(&mut self.out, a.as_ref());
        }
    }

    /// Sends every queued command.
    ///
    /// A batch larger than the socket buffers could deadlock a blocking
    /// write: the server stops reading while its replies to the start of
    /// the batch wait for us to read them. Large batches are therefore
    /// written without blocking, draining replies into the read buffer
    /// whenever the socket is full.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        if self.out.len() <= BLOCKING_WRITE_LIMIT {
            self.stream.write_all(&self.out)?;
            self.out.clear();
            return Ok(());
        }
        self.stream.set_nonblocking(true)?;
        let result = self.write_draining();
        self.stream.set_nonblocking(false)?;
        self.out.clear();
        result
    }

    fn write_draining(&mut self) -> Result<(), ClientError> {
        let mut pos = 0;
        while pos < self.out.len() {
            let mut progressed = false;
            match self.stream.write(&self.out[pos..]) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => {
                    pos += n;
                    progressed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
            let len = self.inbuf.len();
            self.inbuf.resize(len + 64 * 1024, 0);
            match self.stream.read(&mut self.inbuf[len..]) {
                Ok(0) => {
                    self.inbuf.truncate(len);
                    return Err(ClientError::Closed);
                }
                Ok(n) => {
                    self.inbuf.truncate(len + n);
                    progressed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.inbuf.truncate(len),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.inbuf.truncate(len),
                Err(e) => return Err(e.into()),
            }
            if !progressed {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    }

    /// Reads the next reply.
    pub fn read_reply(&mut self) -> Result<Frame, ClientError> {
        loop {
            if self.read_pos < self.inbuf.len() {
                match Frame::decode(&self.inbuf[self.read_pos..]) {
                    Ok((frame, used)) => {
                        self.read_pos += used;
                        if self.read_pos == self.inbuf.len() {
                            self.inbuf.clear();
                            self.read_pos = 0;
                        }
                        return Ok(frame);
                    }
                    Err(FrameError::Incomplete) => {}
                    Err(FrameError::Invalid(why)) => return Err(ClientError::Protocol(why)),
                }
            }
            if self.read_pos > 0 {
                self.inbuf.drain(..self.read_pos);
                self.read_pos = 0;
            }
            let len = self.inbuf.len();
            self.inbuf.resize(len + 64 * 1024, 0);
            let n = self.stream.read(&mut self.inbuf[len..])?;
            self.inbuf.truncate(len + n);
            if n == 0 {
                return Err(ClientError::Closed);
            }
        }
    }

    /// Sends one command and waits for its reply.
    pub fn call<T: AsRef<[u8]>>(&mut self, args: &[T]) -> Result<Frame, ClientError> {
        self.queue(args);
        self.flush()?;
        self.read_reply()
    }
}

/// Whether a reply is an "unknown command" error, which is how a server
/// tells that it lacks a data type.
pub fn is_unknown_command(reply: &Frame) -> bool {
    match reply {
        Frame::Error(e) => {
            let e = String::from_utf8_lossy(e).to_ascii_lowercase();
            e.contains("unknown command") || e.contains("unknown subcommand")
        }
        _ => false,
    }
}
