//! Input and output buffers of a connection: how a read sizes the input
//! buffer, and how a reply buffer is written out.

use std::io::{self, Read, Write};

/// Reads land in chunks of at least this much free space.
pub const READ_CHUNK: usize = 16 * 1024;

/// At most this much of the input buffer past the received bytes is made
/// resident for one read ([`read_into`]).
pub const READ_WINDOW: usize = 1024 * 1024;

/// A byte stream replies are written to: a [`Conn`](crate::conn::Conn), or the part of one an
/// I/O thread holds ([`crate::io_threads::Movable`]).
pub trait Transfer: Read + Write {
    /// After a write took everything: whether the transport sent it all
    /// too (TLS may keep ciphertext the socket did not take yet).
    fn drain(&mut self) -> io::Result<bool>;
}

impl Transfer for crate::conn::Conn {
    #[inline]
    fn drain(&mut self) -> io::Result<bool> {
        crate::conn::Conn::drain(self)
    }
}

/// One read from `stream` into `inbuf` (the received and unprocessed bytes
/// are `inbuf[*in_start..*in_end]`; `wanted` is what the decoder needs
/// buffered from the command's start). Returns the bytes read (0 at EOF,
/// `usize::MAX` when nothing was there) and whether the read filled all the
/// free space (so more may be waiting: edge-triggered epoll raises no new
/// event for it). The buffer is sized as ferrokv-server's `Client::read_once` says:
/// a large bulk whose header has arrived gets its whole size reserved at
/// once, but at most [`READ_WINDOW`] bytes past what has arrived are made
/// resident by one read.
pub fn read_into<S: Read + ?Sized>(
    stream: &mut S,
    inbuf: &mut Vec<u8>,
    in_start: &mut usize,
    in_end: &mut usize,
    wanted: usize,
) -> io::Result<(usize, bool)> {
    if *in_start == *in_end {
        *in_start = 0;
        *in_end = 0;
    }
    let pending = *in_end - *in_start;
    // What the buffer must hold from the command's start: a large bulk
    // in progress needs its full size; otherwise a chunk more.
    let need = wanted.max(pending + READ_CHUNK);
    if *in_start > 0 && *in_start + need > inbuf.len() {
        inbuf.copy_within(*in_start..*in_end, 0);
        *in_start = 0;
        *in_end = pending;
    }
    let need_end = *in_start + need;
    if need_end > inbuf.capacity() {
        inbuf.reserve_exact(need_end - inbuf.len());
    }
    let window_end = need_end.min(*in_end + READ_WINDOW);
    if window_end > inbuf.len() {
        inbuf.resize(window_end, 0);
    }
    let space = inbuf.len() - *in_end;
    loop {
        match stream.read(&mut inbuf[*in_end..]) {
            Ok(n) => {
                *in_end += n;
                return Ok((n, n > 0 && n == space));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((usize::MAX, false)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes `buf[*sent..]` to `stream`. Returns Ok(true) when everything was
/// written (the buffer is then emptied, and given back when one huge reply
/// left it large), Ok(false) when the socket is full.
pub fn flush_from<S: Transfer + ?Sized>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    sent: &mut usize,
) -> io::Result<bool> {
    while *sent < buf.len() {
        match stream.write(&buf[*sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    // TLS: the last of the ciphertext may still wait for the socket.
    if !stream.drain()? {
        return Ok(false);
    }
    buf.clear();
    *sent = 0;
    // Do not keep a huge buffer after one huge reply.
    if buf.capacity() > 1024 * 1024 {
        *buf = Vec::with_capacity(READ_CHUNK);
    }
    Ok(true)
}
