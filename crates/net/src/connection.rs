//! A client connection's I/O half: its socket, its input buffer and the
//! decoder that finds whole commands in it, what an I/O thread decoded
//! ahead, and how far its reply buffer has been written. The server's
//! client (`ferrokv-server`'s `net/client.rs`) holds one beside its
//! session (database, user, transaction, tracking, blocking, reply mode and
//! the reply buffer its commands write to), and only this half moves to an
//! I/O thread.

use crate::buffer::{flush_from, read_into, READ_CHUNK, READ_WINDOW};
use crate::conn::Conn;
use crate::io_threads::Parsed;
use ferrokv_resp::RequestDecoder;
use std::io;

pub struct Connection {
    /// The socket; `None` for the fake client that replays the AOF (and
    /// the scripts' client).
    pub stream: Option<Conn>,
    /// Input bytes: `inbuf[in_start..in_end]` is received and unprocessed.
    pub inbuf: Vec<u8>,
    pub in_start: usize,
    pub in_end: usize,
    pub decoder: RequestDecoder,
    /// Commands an I/O thread decoded ahead from the input buffer
    /// (io_threads.rs), for the next pass to run.
    pub parsed: Parsed,
    /// Bytes of the reply buffer already written to the socket.
    pub out_sent: usize,
    /// Whether the socket is registered for writable events.
    pub want_writable: bool,
    /// The reactor saw the peer end its input (`EPOLLRDHUP`). Readiness is
    /// edge-triggered: the end may have come with the last data, and no
    /// further event would tell of it, so reads go on until one returns 0.
    pub peer_closed: bool,
}

impl Connection {
    /// A connection over `stream` (or none: a fake client) with `inbuf`
    /// from the pool.
    pub fn new(stream: Option<Conn>, inbuf: Vec<u8>) -> Self {
        Connection {
            stream,
            inbuf,
            in_start: 0,
            in_end: 0,
            decoder: RequestDecoder::new(),
            parsed: Parsed::default(),
            out_sent: 0,
            want_writable: false,
            peer_closed: false,
        }
    }

    /// One read from the socket into the input buffer. Returns the bytes
    /// read (0 at EOF, `usize::MAX` when nothing was there) and whether the
    /// read filled all the free space (so more may be waiting:
    /// edge-triggered epoll raises no new event for it).
    ///
    /// `inbuf.len()` is the part of the buffer that has been touched; its
    /// capacity beyond that is reserved address space only. A large bulk
    /// whose header has arrived gets its whole size reserved at once (one
    /// allocation, no doubling copies, as Redis's `sdsMakeRoomForNonGreedy`),
    /// but each read touches at most [`READ_WINDOW`] bytes past what has
    /// arrived: a peer that declares `$536870912` and sends nothing costs
    /// address space, not resident memory.
    pub fn read_once(&mut self) -> io::Result<(usize, bool)> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok((usize::MAX, false));
        };
        let wanted = self.decoder.wanted();
        let (n, more) = read_into(
            stream,
            &mut self.inbuf,
            &mut self.in_start,
            &mut self.in_end,
            wanted,
        )?;
        Ok((n, more || (self.peer_closed && n != usize::MAX && n > 0)))
    }

    /// Appends `bytes` to the unparsed input: the head of a request that an
    /// RDMA ring slot's end cut off, or the piece of the next slot that
    /// completes it (parsing in place).
    pub fn append_input(&mut self, bytes: &[u8]) {
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        }
        let end = self.in_end + bytes.len();
        if end > self.inbuf.len() {
            self.inbuf.resize(end, 0);
        }
        self.inbuf[self.in_end..end].copy_from_slice(bytes);
        self.in_end = end;
    }

    /// Writes what of `out` is not written yet. Returns Ok(true) when
    /// everything was written (`out` is then empty).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        match self.stream.as_mut() {
            Some(Conn::Uring(u, _)) => {
                // The buffer itself goes to the kernel (uring.rs).
                let done = u.flush_from(out, &mut self.out_sent)?;
                if done && out.capacity() > 1024 * 1024 {
                    *out = Vec::with_capacity(READ_CHUNK);
                }
                Ok(done)
            }
            Some(stream) => flush_from(stream, out, &mut self.out_sent),
            None => {
                // A fake client has nowhere to write: replies are dropped.
                out.clear();
                self.out_sent = 0;
                Ok(true)
            }
        }
    }

    /// After processing: give back an oversized input buffer.
    pub fn shrink_input(&mut self) {
        if self.in_start == self.in_end && self.inbuf.capacity() > 1024 * 1024 + READ_WINDOW {
            self.inbuf = vec![0; READ_CHUNK];
            self.in_start = 0;
            self.in_end = 0;
        }
    }

    /// Bytes handed to the transport and not yet sent (io_uring).
    pub fn unsent(&self) -> usize {
        self.stream.as_ref().map_or(0, |s| s.unsent())
    }

    /// Memory the connection holds beyond its reply buffer: the touched
    /// part of its input buffer and what the transport keeps.
    pub fn memory_usage(&self) -> usize {
        self.inbuf.len() + self.stream.as_ref().map_or(0, |s| s.held_bytes())
    }
}
