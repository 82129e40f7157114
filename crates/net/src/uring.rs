//! The io_uring backend (`io-backend uring`, or `auto` where the kernel
//! allows it): plain TCP and Unix client connections receive and send
//! through one io_uring, so the kernel work of every client in a loop
//! turn costs one `io_uring_enter` instead of an `epoll_wait` plus a
//! `read` and a `write` per client. Everything else the loop watches
//! (listeners, TLS and RDMA connections, the master link, the cluster bus,
//! replication's fds) stays in the mio/epoll set, and that set's own fd is
//! watched by the ring (a multishot poll), so the loop sleeps in one place.
//! docs/io-uring.md has the design and the measurements.
//!
//! A connection on the ring is a [`UringConn`], one more variant of the
//! connection layer's [`crate::conn::Conn`]; above `net/` nothing
//! changes:
//! - **Receive**: one single-shot `RECV` at a time per connection, with the
//!   buffer chosen by the kernel from a ring of provided buffers (so an idle
//!   connection holds no buffer). Its completion queues the buffer on the
//!   connection, whose requests the reactor parses where they landed (the
//!   same "parse in place" path as an RDMA ring slot); a consumed buffer goes
//!   straight back to the ring. The next `RECV` is armed only when the
//!   connection has read everything it was given, so a client the loop stops
//!   reading (paused on its replies) is held back by TCP, as with epoll.
//!   When the kernel says more is waiting (`IORING_CQE_F_SOCK_NONEMPTY`), or
//!   the buffer ring ran dry (`ENOBUFS`), the connection reads the socket
//!   directly until it would block, which is safe then because no `RECV` is
//!   in flight that could hold earlier bytes.
//! - **Send**: the client's output buffer itself is handed to a `SEND` (it
//!   is swapped with the connection's spare buffer, so no byte is copied);
//!   one send in flight at a time, a short send resubmitted from where it
//!   stopped, the completion putting the client back on the write list.
//!
//! # Buffer lifetimes
//! The classic io_uring bug is memory the kernel may still write (or read)
//! being reused or freed. Here:
//! - The provided buffers and the ring of their descriptors are allocated
//!   once, when the ring is made, and never freed (the process ends with
//!   them): a late completion for a closed connection can only name a buffer
//!   that still exists, and it is given back to the ring.
//! - A provided buffer is written by the kernel only while it is in the ring;
//!   once a completion names it, it belongs to the connection until
//!   [`Shared::recycle`] puts it back, which happens only after the reactor
//!   is done with the bytes (`consume_in_place`, or a copy).
//! - A send's buffer is owned by its [`UringConn`] while the `SEND` is in
//!   flight; the client writes its new replies into the other buffer. A
//!   connection dropped with a send in flight moves that buffer into
//!   [`Shared::graveyard`] and cancels the operation; the buffer is freed only
//!   when the send's completion arrives.
//! - Completions carry the connection's generation beside its slot, so one
//!   for an earlier connection in a reused slot is recognised and dropped.
//!
//! `tests/io_backend.rs` kills connections mid-operation under load to
//! exercise these paths.

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

/// Provided buffers: how many, and the size of each. A connection holds at
/// most one between loop turns (see the module documentation), so this is
/// the number of connections whose data can land in one turn before the
/// rest read their sockets directly.
pub const BUF_COUNT: u16 = 1024;
pub const BUF_SIZE: usize = 4096;
/// Received bytes a connection may have waiting, unread, before its
/// multishot receive is cancelled (TCP then holds the client back).
const MAX_QUEUED: usize = 64 * 1024;
/// The group id of our provided buffers.
const BGID: u16 = 1;
/// Submission queue entries (the completion queue gets twice as many, and
/// the kernel keeps what overflows it).
const SQ_ENTRIES: u32 = 4096;

/// What a completion is for (the low byte of its `user_data`).
pub const KIND_RECV: u64 = 1;
const KIND_SEND: u64 = 2;
const KIND_EPOLL: u64 = 3;
const KIND_CANCEL: u64 = 4;

fn user_data(kind: u64, token: usize, gen: u32) -> u64 {
    kind | ((token as u64 & 0xff_ffff) << 8) | ((gen as u64) << 32)
}

/// A completion's parts: (kind, token, generation).
pub fn split(ud: u64) -> (u64, usize, u32) {
    (
        ud & 0xff,
        ((ud >> 8) & 0xff_ffff) as usize,
        (ud >> 32) as u32,
    )
}

/// Counters for `/metrics` and `INFO stats`.
#[derive(Default, Clone, Copy, Debug)]
pub struct UringStats {
    /// `io_uring_enter` calls (one per loop turn, plus any a full
    /// submission queue forced).
    pub enters: u64,
    pub submitted: u64,
    pub completions: u64,
    /// Receives that found the buffer ring empty (the connection then read
    /// its socket directly).
    pub recv_nobufs: u64,
    /// Direct reads of a socket the kernel said had more.
    pub direct_reads: u64,
    /// Sends that the socket took only in part (resubmitted).
    pub short_sends: u64,
}

/// The provided buffers and their ring, with what the connections stage
/// for submission: shared by the ring's owner and its connections (one
/// thread).
pub struct Shared {
    /// The descriptor ring the kernel takes buffers from (page aligned).
    entries: *mut types::BufRingEntry,
    /// Our copy of the ring's tail.
    tail: u16,
    /// The buffers, `BUF_COUNT * BUF_SIZE` bytes.
    bufs: *mut u8,
    /// Entries waiting for the next `io_uring_enter`.
    staged: Vec<squeue::Entry>,
    /// Send buffers of closed connections, until their completions.
    graveyard: hashbrown::HashMap<u64, Vec<u8>>,
    next_gen: u32,
    pub stats: UringStats,
}

impl Shared {
    /// Gives buffer `bid` back to the kernel.
    fn recycle(&mut self, bid: u16) {
        let mask = BUF_COUNT - 1;
        // SAFETY: `entries` points at `BUF_COUNT` descriptors that live for
        // the process; the slot at our tail is one the kernel has consumed
        // (it never holds more than `BUF_COUNT` buffers, and `bid` was out
        // of the ring until now). `bufs + bid * BUF_SIZE` is buffer `bid`.
        unsafe {
            let e = &mut *self.entries.add((self.tail & mask) as usize);
            e.set_addr(self.bufs.add(bid as usize * BUF_SIZE) as u64);
            e.set_len(BUF_SIZE as u32);
            e.set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
            // The tail lies in the first descriptor's reserved field; the
            // kernel reads it with acquire ordering.
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// The bytes `len` of buffer `bid` holds from `off`.
    fn bytes(&self, bid: u16, off: usize, len: usize) -> &[u8] {
        debug_assert!(off <= len && len <= BUF_SIZE && bid < BUF_COUNT);
        // SAFETY: buffer `bid` lies inside the allocation; the kernel wrote
        // `len` bytes into it and will not write it again before it is
        // recycled, which needs `&mut self` (so not while this borrow lives).
        unsafe {
            std::slice::from_raw_parts(self.bufs.add(bid as usize * BUF_SIZE + off), len - off)
        }
    }

    fn stage(&mut self, e: squeue::Entry) {
        self.staged.push(e);
    }
}

/// The ring a server's loop waits in.
pub struct Uring {
    ring: IoUring,
    pub shared: Rc<RefCell<Shared>>,
    /// The mio/epoll set's fd, watched by a multishot poll.
    epoll_fd: RawFd,
    /// The epoll set has events to fetch.
    pub epoll_ready: bool,
    /// The last fetch filled the event array: fetch again without waiting.
    pub epoll_more: bool,
    /// Connections whose receive completed since the reactor last looked.
    pub ready: Vec<usize>,
    cqes: Vec<(u64, i32, u32)>,
}

/// The running kernel's major and minor version (`uname -r`).
fn kernel_version() -> Option<(u32, u32)> {
    // SAFETY: `uname` fills the zeroed struct it is given.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let release: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    parse_release(std::str::from_utf8(&release).ok()?)
}

/// `6.18.44-fc-v1147` → (6, 18).
fn parse_release(r: &str) -> Option<(u32, u32)> {
    let mut parts = r.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

impl Uring {
    /// A ring with its provided buffers registered, watching `epoll_fd`.
    pub fn new(epoll_fd: RawFd) -> io::Result<Uring> {
        // Multishot receives are 6.0's (provided buffer rings 5.19's): an
        // older kernel would fail every receive, so it gets no ring at all.
        if let Some((major, minor)) = kernel_version() {
            if (major, minor) < (6, 0) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("kernel {major}.{minor} has no multishot receive (6.0)"),
                ));
            }
        }
        // One thread submits, and completions are processed only when it
        // enters the kernel to wait: fewer interruptions of the loop. Older
        // kernels without these get a plain ring.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(SQ_ENTRIES * 2)
            .build(SQ_ENTRIES)
            .or_else(|_| {
                IoUring::builder()
                    .setup_cqsize(SQ_ENTRIES * 2)
                    .build(SQ_ENTRIES)
            })?;
        let page = 4096;
        let ring_bytes =
            (BUF_COUNT as usize * std::mem::size_of::<types::BufRingEntry>()).max(page);
        let layout =
            std::alloc::Layout::from_size_align(ring_bytes, page).map_err(io::Error::other)?;
        let buf_layout = std::alloc::Layout::from_size_align(BUF_COUNT as usize * BUF_SIZE, page)
            .map_err(io::Error::other)?;
        // SAFETY: both layouts have non-zero sizes. The allocations are never
        // freed (the module documentation: the kernel may name a buffer in a
        // completion at any time the ring lives, which is the process's life).
        let (entries, bufs) = unsafe {
            let e = std::alloc::alloc_zeroed(layout) as *mut types::BufRingEntry;
            // Written, so its pages are touched now: the kernel fills the
            // buffers in turn, so all of them become resident soon anyway,
            // and the backend's fixed cost (4 MB) shows at start, not as
            // growth under the first load.
            let b = std::alloc::alloc(buf_layout);
            if e.is_null() || b.is_null() {
                return Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "io_uring buffers",
                ));
            }
            std::ptr::write_bytes(b, 0, buf_layout.size());
            (e, b)
        };
        // SAFETY: `entries` is page aligned, `BUF_COUNT` long, and lives
        // until the process ends (see above).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, BUF_COUNT, BGID, 0)?;
        }
        let mut shared = Shared {
            entries,
            tail: 0,
            bufs,
            staged: Vec::with_capacity(256),
            graveyard: hashbrown::HashMap::new(),
            next_gen: 1,
            stats: UringStats::default(),
        };
        for bid in 0..BUF_COUNT {
            shared.recycle(bid);
        }
        let mut u = Uring {
            ring,
            shared: Rc::new(RefCell::new(shared)),
            epoll_fd,
            epoll_ready: false,
            epoll_more: false,
            ready: Vec::new(),
            cqes: Vec::with_capacity(1024),
        };
        u.watch_epoll();
        Ok(u)
    }

    fn watch_epoll(&mut self) {
        let e = opcode::PollAdd::new(types::Fd(self.epoll_fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(user_data(KIND_EPOLL, 0, 0));
        self.shared.borrow_mut().stage(e);
    }

    /// A connection on the ring, its first receive staged.
    pub fn adopt(&self, fd: OwnedFd, token: usize) -> UringConn {
        let gen = {
            let mut s = self.shared.borrow_mut();
            let g = s.next_gen;
            s.next_gen = s.next_gen.wrapping_add(1).max(1);
            g
        };
        let mut c = UringConn {
            fd,
            shared: self.shared.clone(),
            token,
            gen,
            queue: VecDeque::new(),
            armed: false,
            cancelling: false,
            parked: false,
            more: false,
            eof: false,
            error: None,
            sending: None,
            spare: Vec::new(),
        };
        c.arm();
        c
    }

    /// Submits what was staged and waits up to `timeout` for a completion
    /// (not at all for zero), then collects the completions.
    pub fn enter(&mut self, timeout: Duration) -> io::Result<()> {
        self.push_staged()?;
        let ts = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        let submitted = self.ring.submission().len();
        let res = self.ring.submitter().submit_with_args(1, &args);
        {
            let mut s = self.shared.borrow_mut();
            s.stats.enters += 1;
            s.stats.submitted += submitted as u64;
        }
        match res {
            Ok(_) => {}
            Err(e)
                if e.raw_os_error() == Some(libc::ETIME)
                    || e.raw_os_error() == Some(libc::EINTR)
                    || e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => return Err(e),
        }
        self.cqes.clear();
        for cqe in self.ring.completion() {
            self.cqes.push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
        self.shared.borrow_mut().stats.completions += self.cqes.len() as u64;
        Ok(())
    }

    /// Submits what was staged without waiting (the busy pump's sends).
    pub fn submit(&mut self) -> io::Result<()> {
        self.push_staged()?;
        let n = self.ring.submission().len();
        if n > 0 {
            self.ring.submit()?;
            let mut s = self.shared.borrow_mut();
            s.stats.enters += 1;
            s.stats.submitted += n as u64;
        }
        Ok(())
    }

    fn push_staged(&mut self) -> io::Result<()> {
        let mut staged = std::mem::take(&mut self.shared.borrow_mut().staged);
        for e in &staged {
            // SAFETY: every entry's memory (a send's buffer, a receive's
            // provided buffers) outlives its operation, as the module
            // documentation shows.
            while unsafe { self.ring.submission().push(e) }.is_err() {
                // The queue is full: hand it to the kernel and go on.
                self.ring.submit()?;
                self.shared.borrow_mut().stats.enters += 1;
            }
        }
        // (Nothing stages while this runs: the vector is given back.)
        staged.clear();
        self.shared.borrow_mut().staged = staged;
        Ok(())
    }

    /// The completions collected by the last [`Uring::enter`], taken.
    pub fn take_completions(&mut self) -> Vec<(u64, i32, u32)> {
        std::mem::take(&mut self.cqes)
    }

    /// Gives the completion vector back for reuse.
    pub fn give_completions(&mut self, mut v: Vec<(u64, i32, u32)>) {
        v.clear();
        if self.cqes.is_empty() {
            self.cqes = v;
        }
    }

    /// A completion that is not a connection's: the epoll watch, a
    /// cancellation, or the send of a closed connection. True when it was
    /// one of those (handled here).
    pub fn handle_own(&mut self, ud: u64, flags: u32) -> bool {
        let (kind, _, _) = split(ud);
        match kind {
            KIND_EPOLL => {
                self.epoll_ready = true;
                if !cqueue::more(flags) {
                    self.watch_epoll();
                }
                true
            }
            KIND_CANCEL => true,
            KIND_SEND => {
                let mut s = self.shared.borrow_mut();
                // The kernel is done with it: now it may be freed.
                s.graveyard.remove(&ud).is_some()
            }
            KIND_RECV => false,
            _ => true,
        }
    }

    /// A receive completion whose connection is gone: its buffer goes back.
    pub fn orphan_recv(&mut self, flags: u32) {
        if let Some(bid) = cqueue::buffer_select(flags) {
            self.shared.borrow_mut().recycle(bid);
        }
    }

    pub fn stats(&self) -> UringStats {
        self.shared.borrow().stats
    }
}

/// What a send completion left to do.
pub enum SendDone {
    /// All written: `n` bytes in this completion; the client's next replies
    /// may go.
    Done(usize),
    /// Part written and the rest resubmitted.
    Partial(usize),
    /// The send failed: the connection must close.
    Failed,
}

/// A client connection on the ring.
pub struct UringConn {
    fd: OwnedFd,
    shared: Rc<RefCell<Shared>>,
    token: usize,
    gen: u32,
    /// Received buffers not yet read: (buffer id, bytes, read so far).
    queue: VecDeque<(u16, u32, u32)>,
    /// The multishot `RECV` is active (until a completion without
    /// `IORING_CQE_F_MORE`).
    armed: bool,
    /// Its cancellation is on the way.
    cancelling: bool,
    /// Taken out of the loop (a replica's socket lent to its sender
    /// thread): no receive is armed until it is registered again.
    parked: bool,
    /// The socket has more than the last completion brought, or the buffer
    /// ring was empty: read it directly before arming again.
    more: bool,
    eof: bool,
    error: Option<io::Error>,
    /// The send in flight: its buffer and how much of it is written.
    sending: Option<(Vec<u8>, usize)>,
    /// The buffer the client's replies go into next.
    spare: Vec<u8>,
}

impl UringConn {
    pub fn generation(&self) -> u32 {
        self.gen
    }

    /// Stages a receive, unless one is in flight or the connection is not
    /// to be read.
    fn arm(&mut self) {
        if self.armed || self.parked || self.eof || self.error.is_some() {
            return;
        }
        self.armed = true;
        let e = opcode::RecvMulti::new(types::Fd(self.fd.as_raw_fd()), BGID)
            .build()
            .user_data(user_data(KIND_RECV, self.token, self.gen));
        self.shared.borrow_mut().stage(e);
    }

    /// Cancels the multishot receive (its last completion, without
    /// `IORING_CQE_F_MORE`, says when it ended).
    fn cancel_recv(&mut self) {
        if !self.armed || self.cancelling {
            return;
        }
        self.cancelling = true;
        let e = opcode::AsyncCancel::new(user_data(KIND_RECV, self.token, self.gen))
            .build()
            .user_data(user_data(KIND_CANCEL, self.token, self.gen));
        self.shared.borrow_mut().stage(e);
    }

    /// Received bytes not yet read.
    fn queued(&self) -> usize {
        self.queue
            .iter()
            .map(|&(_, len, off)| (len - off) as usize)
            .sum()
    }

    /// A receive completed: a buffer of the multishot receive, or its end
    /// (no `IORING_CQE_F_MORE`: the stream ended or failed, the buffer ring
    /// ran dry, or we cancelled it).
    pub fn on_recv(&mut self, res: i32, flags: u32) {
        if !cqueue::more(flags) {
            self.armed = false;
            self.cancelling = false;
        }
        let bid = cqueue::buffer_select(flags);
        if res > 0 {
            match bid {
                Some(bid) => {
                    self.queue.push_back((bid, res as u32, 0));
                    if !self.armed {
                        // It ended after this buffer: the socket may have more.
                        self.more = true;
                    } else if self.queued() > MAX_QUEUED {
                        // Not being read as fast as it arrives (a client paused
                        // on its replies, or a large bulk): stop the receive,
                        // so TCP holds the client back; the reader goes on
                        // from the socket itself when it has read this.
                        self.cancel_recv();
                    }
                }
                None => self.error = Some(io::Error::other("a receive completed without a buffer")),
            }
            return;
        }
        if let Some(bid) = bid {
            self.shared.borrow_mut().recycle(bid);
        }
        match -res {
            0 => self.eof = true,
            libc::ENOBUFS => {
                // The ring ran dry: this connection reads its socket itself.
                self.shared.borrow_mut().stats.recv_nobufs += 1;
                self.more = true;
            }
            libc::ECANCELED | libc::EINTR | libc::EAGAIN => self.more = true,
            e => self.error = Some(io::Error::from_raw_os_error(e)),
        }
    }

    /// A send completed.
    pub fn on_send(&mut self, res: i32) -> SendDone {
        let Some((buf, off)) = self.sending.as_mut() else {
            return SendDone::Failed;
        };
        if res <= 0 {
            let e = if res == 0 {
                io::ErrorKind::WriteZero.into()
            } else {
                io::Error::from_raw_os_error(-res)
            };
            self.error = Some(e);
            return SendDone::Failed;
        }
        *off += res as usize;
        if *off < buf.len() {
            self.shared.borrow_mut().stats.short_sends += 1;
            self.stage_send();
            return SendDone::Partial(res as usize);
        }
        let (mut buf, _) = self.sending.take().expect("checked above");
        buf.clear();
        // Keep the larger of the two for the next swap, within reason.
        if buf.capacity() <= 1024 * 1024 {
            self.spare = buf;
        }
        SendDone::Done(res as usize)
    }

    fn stage_send(&mut self) {
        let Some((buf, off)) = self.sending.as_ref() else {
            return;
        };
        let left = &buf[*off..];
        let len = left.len().min(u32::MAX as usize) as u32;
        let e = opcode::Send::new(types::Fd(self.fd.as_raw_fd()), left.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data(KIND_SEND, self.token, self.gen));
        self.shared.borrow_mut().stage(e);
    }

    /// Hands the client's unsent replies (`buf[*sent..]`) to a send, giving
    /// the client the spare buffer to write its next replies into. Ok(true)
    /// when nothing is left to send and nothing is in flight.
    pub fn flush_from(&mut self, buf: &mut Vec<u8>, sent: &mut usize) -> io::Result<bool> {
        if let Some(e) = &self.error {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        if self.sending.is_some() {
            return Ok(false);
        }
        if *sent >= buf.len() {
            buf.clear();
            *sent = 0;
            return Ok(true);
        }
        let mut next = std::mem::take(&mut self.spare);
        if next.capacity() == 0 {
            next = Vec::with_capacity(crate::buffer::READ_CHUNK);
        }
        let out = std::mem::replace(buf, next);
        self.sending = Some((out, *sent));
        *sent = 0;
        self.stage_send();
        Ok(false)
    }

    /// Received bytes wait, unread.
    pub fn has_landed(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Reply bytes in flight (handed to the kernel, not yet sent).
    pub fn unsent(&self) -> usize {
        self.sending.as_ref().map_or(0, |(b, off)| b.len() - off)
    }

    /// The buffers it holds beyond the client's own (`tot-mem`).
    pub fn held_bytes(&self) -> usize {
        self.spare.capacity()
            + self.sending.as_ref().map_or(0, |(b, _)| b.capacity())
            + self.queue.len() * BUF_SIZE
    }

    /// The oldest received bytes not yet read, where they landed.
    pub fn peek(&mut self) -> Option<&[u8]> {
        let Some(&(bid, len, off)) = self.queue.front() else {
            if !self.more {
                self.arm();
            }
            return None;
        };
        let s = self.shared.borrow();
        let bytes = s.bytes(bid, off as usize, len as usize);
        let (ptr, n) = (bytes.as_ptr(), bytes.len());
        drop(s);
        // SAFETY: the bytes are in buffer `bid`, which this connection holds
        // (it is out of the kernel's ring) until `consume` gives it back;
        // `consume` needs `&mut self`, so not while this slice is borrowed.
        Some(unsafe { std::slice::from_raw_parts(ptr, n) })
    }

    /// Marks `n` bytes of what [`UringConn::peek`] showed as read; a buffer
    /// read to its end goes back to the ring.
    pub fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.queue.front_mut() else {
                return;
            };
            let left = (front.1 - front.2) as usize;
            let take = left.min(n);
            front.2 += take as u32;
            n -= take;
            if front.2 == front.1 {
                let bid = front.0;
                self.queue.pop_front();
                self.shared.borrow_mut().recycle(bid);
            }
        }
        self.drained();
    }

    /// Everything it was given is read: unless the socket is to be read
    /// directly first, the next receive is armed now (a reader may stop at
    /// a short read without asking again, as it may on epoll).
    fn drained(&mut self) {
        if self.queue.is_empty() && !self.more {
            self.arm();
        }
    }

    /// Whether reading must go the ordinary way ([`std::io::Read`]): the
    /// stream ended or failed, or the socket is to be read directly.
    pub fn ended_or_more(&self) -> bool {
        self.queue.is_empty() && (self.eof || self.error.is_some() || (self.more && !self.armed))
    }

    /// Taken out of the loop (`deregister`: its receive is cancelled, as
    /// an epoll socket taken out of the set is no longer read), or back in
    /// (`register`: armed again once what it holds is read).
    pub fn park(&mut self, parked: bool) {
        self.parked = parked;
        if parked {
            self.cancel_recv();
        } else {
            // A receive armed now brings whatever came meanwhile.
            self.more = false;
            self.drained();
        }
    }

    fn recv_direct(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes; the socket is ours.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl io::Read for UringConn {
    /// What landed first, then (when the kernel said there is more, and no
    /// receive is in flight that could hold earlier bytes) the socket
    /// itself; `WouldBlock` arms the next receive.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            let Some(&(bid, len, off)) = self.queue.front() else {
                break;
            };
            let took = {
                let s = self.shared.borrow();
                let bytes = s.bytes(bid, off as usize, len as usize);
                let took = bytes.len().min(buf.len() - n);
                buf[n..n + took].copy_from_slice(&bytes[..took]);
                took
            };
            self.consume(took);
            n += took;
        }
        if n == buf.len() {
            return Ok(n);
        }
        if n == 0 {
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            if self.eof {
                return Ok(0);
            }
        }
        if self.more && !self.armed && !self.parked && !self.eof && self.error.is_none() {
            self.shared.borrow_mut().stats.direct_reads += 1;
            match self.recv_direct(&mut buf[n..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(n);
                }
                Ok(m) => {
                    n += m;
                    if n < buf.len() {
                        // The socket is drained for now.
                        self.more = false;
                        self.arm();
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.more = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted && n == 0 => return Err(e),
                Err(_) if n > 0 => return Ok(n),
                Err(e) => return Err(e),
            }
        }
        self.arm();
        if n > 0 {
            return Ok(n);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }
}

impl io::Write for UringConn {
    /// A direct, non-blocking send, used only when no send is in flight
    /// (so the bytes keep their order); the loop's replies go by
    /// [`UringConn::flush_from`].
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.sending.is_some() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        // SAFETY: `buf` is valid for `buf.len()` bytes; the socket is ours.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for UringConn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for UringConn {
    /// Buffers it holds go back to the ring; operations in flight are
    /// cancelled, and a send's buffer waits in the graveyard for the
    /// send's completion (the socket itself closes when the kernel lets go
    /// of it).
    fn drop(&mut self) {
        self.cancel_recv();
        let mut s = self.shared.borrow_mut();
        for (bid, _, _) in self.queue.drain(..) {
            s.recycle(bid);
        }
        if let Some((buf, _)) = self.sending.take() {
            let ud = user_data(KIND_SEND, self.token, self.gen);
            s.graveyard.insert(ud, buf);
            let e = opcode::AsyncCancel::new(ud).build().user_data(user_data(
                KIND_CANCEL,
                self.token,
                self.gen,
            ));
            s.stage(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_parse() {
        assert_eq!(parse_release("6.18.44-fc-v1147"), Some((6, 18)));
        assert_eq!(parse_release("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(parse_release("6.0"), Some((6, 0)));
        assert_eq!(parse_release("weird"), None);
    }

    #[test]
    fn user_data_round_trips() {
        for (k, t, g) in [
            (KIND_RECV, 0, 1),
            (KIND_SEND, 0xff_ffff, u32::MAX),
            (KIND_EPOLL, 12345, 7),
        ] {
            assert_eq!(split(user_data(k, t, g)), (k, t, g));
        }
    }
}
