//! One client: its connection's I/O half (ferrokv-net's [`Connection`]:
//! socket, input buffer, decoder, reply progress) and its session — the
//! state commands read and change (selected database, protocol version,
//! name, authentication, transaction, subscriptions, blocking, reply mode)
//! and the reply buffer they write to.

use crate::net::conn::{Addr, Conn};
use crate::net::pool::BufferPool;
pub use ferrokv_net::connection::Connection;
use ferrokv_resp::encode::{self, Protocol};
use std::io;
use std::time::Instant;

pub use ferrokv_net::buffer::{flush_from, read_into, Transfer, READ_CHUNK, READ_WINDOW};

/// The reply buffer of a connection, with the protocol it speaks so that
/// writers choose the RESP2 or RESP3 shape.
pub struct Reply {
    pub buf: Vec<u8>,
    pub proto: Protocol,
    /// Codes of error replies written and not yet counted (`errorstats`).
    pub error_codes: Vec<String>,
    /// How many error replies calls of this client have been judged by
    /// (ever): a command run inside another (EXEC's queue) takes its
    /// errors as its own failures, and the outer call counts as failed
    /// only for errors of its own, as Redis's `call` does.
    pub judged_errors: u64,
    /// While the client's own commands run: the most bytes the buffer may
    /// hold (its hard output limit or `maxmemory-clients`). A bulk that
    /// would pass it is dropped and `overflowed` set, and the client is
    /// closed after the command, as Redis closes a client the moment a
    /// reply crosses its hard limit — so one command (an `EXEC` of a
    /// thousand `GET`s of a large value, an `MGET` naming one key a million
    /// times) cannot build an unbounded reply. `usize::MAX` otherwise.
    pub cap: usize,
    pub overflowed: bool,
    /// While the client's own command runs: where the pushes it was sent
    /// (pub/sub messages and confirmations) lie in `buf`, so that
    /// `CLIENT REPLY OFF|SKIP` drops the command's reply and keeps them,
    /// as Redis's `CLIENT_PUSHING` does. `None` otherwise.
    pub push_spans: Option<Vec<(usize, usize)>>,
}

impl Reply {
    /// Writes a push (RESP3 `>`, RESP2 array) of `n` elements with `body`,
    /// recording where it lies while the client's command runs.
    pub fn push_with(&mut self, n: usize, body: impl FnOnce(&mut Reply)) {
        let start = self.buf.len();
        encode::push(&mut self.buf, self.proto, n);
        body(self);
        if let Some(spans) = self.push_spans.as_mut() {
            spans.push((start, self.buf.len()));
        }
    }

    /// Drops what was written from `mark` on, but the pushes
    /// ([`Self::push_with`]), which are moved down in order.
    pub fn truncate_keeping_pushes(&mut self, mark: usize) {
        let spans = self.push_spans.as_deref().unwrap_or(&[]);
        let mut at = mark;
        for &(s, e) in spans.iter().filter(|(s, _)| *s >= mark) {
            self.buf.copy_within(s..e, at);
            at += e - s;
        }
        self.buf.truncate(at);
    }

    #[inline]
    pub fn ok(&mut self) {
        encode::ok(&mut self.buf)
    }
    #[inline]
    pub fn simple(&mut self, s: &str) {
        encode::simple(&mut self.buf, s.as_bytes())
    }
    #[inline]
    pub fn bulk(&mut self, s: &[u8]) {
        if self.buf.len().saturating_add(s.len()) > self.cap {
            self.overflowed = true;
            return;
        }
        encode::bulk(&mut self.buf, s)
    }
    #[inline]
    pub fn bulk_int(&mut self, i: i64) {
        encode::bulk_int(&mut self.buf, i)
    }
    #[inline]
    pub fn int(&mut self, i: i64) {
        encode::integer(&mut self.buf, i)
    }
    #[inline]
    pub fn null(&mut self) {
        encode::null(&mut self.buf, self.proto)
    }
    pub fn null_array(&mut self) {
        encode::null_array(&mut self.buf, self.proto)
    }
    #[inline]
    pub fn array(&mut self, n: usize) {
        encode::array(&mut self.buf, n)
    }
    pub fn map(&mut self, n: usize) {
        encode::map(&mut self.buf, self.proto, n)
    }
    pub fn set(&mut self, n: usize) {
        encode::set(&mut self.buf, self.proto, n)
    }
    pub fn double(&mut self, v: f64) {
        encode::double(&mut self.buf, self.proto, v)
    }
    pub fn boolean(&mut self, v: bool) {
        encode::boolean(&mut self.buf, self.proto, v)
    }
    pub fn verbatim(&mut self, s: &[u8]) {
        encode::verbatim(&mut self.buf, self.proto, "txt", s)
    }
    /// An error reply; `msg` includes its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn error(&mut self, msg: &str) {
        let code = msg.split(' ').next().unwrap_or("ERR");
        self.error_codes.push(code.to_string());
        encode::error(&mut self.buf, msg)
    }
    /// An error reply whose text echoes bytes a client sent.
    pub fn error_bytes(&mut self, msg: &[u8]) {
        let code = msg.split(|&c| c == b' ').next().unwrap_or(b"ERR");
        self.error_codes
            .push(String::from_utf8_lossy(code).into_owned());
        encode::error_bytes(&mut self.buf, msg)
    }
}

/// `CLIENT REPLY` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    SkipNext,
    /// Skipping the current command's reply (SkipNext became active).
    Skip,
}

pub struct Client {
    pub id: u64,
    /// The connection's slot in `Server::clients` (`usize::MAX` for the
    /// fake AOF client); pub/sub and WATCH registries name clients by it.
    pub token: usize,
    /// Pub/sub subscriptions.
    pub subs: crate::pubsub::Subscriptions,
    /// The open transaction, between MULTI and EXEC/DISCARD.
    pub multi: Option<Box<crate::commands::multi::Transaction>>,
    /// EXEC is running this client's queue (blocking commands must not block).
    pub in_exec: bool,
    /// The connection's I/O half (ferrokv-net's `Connection`): socket,
    /// input buffer and decoder, how far `out` has been written. Its
    /// socket is `None` for the fake client that replays the AOF (and the
    /// scripts' client). All the other fields are the session's.
    pub conn: Connection,
    pub addr: Addr,
    pub local_addr: Addr,
    /// The reply buffer the client's commands write to.
    pub out: Reply,
    pub db: usize,
    pub name: Option<Vec<u8>>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    pub authenticated: bool,
    /// The ACL user the connection runs as (`default` until `AUTH`).
    pub user: crate::acl::UserId,
    pub reply_mode: ReplyMode,
    pub no_evict: bool,
    /// `CLIENT NO-TOUCH ON` (Redis 7.2): its commands leave the keys'
    /// LRU/LFU clocks as they were (TOUCH still counts as an access).
    pub no_touch: bool,
    /// In monitor mode (`MONITOR`): every command the server runs is
    /// shown to it, and it may not touch the keyspace.
    pub monitor: bool,
    /// Close once the pending replies are written (`QUIT`, protocol errors).
    pub close_after_reply: bool,
    /// Close at the next chance (`CLIENT KILL`, output limits).
    pub close_asap: bool,
    pub created: Instant,
    pub last_interaction: Instant,
    /// When the output buffer first went over the soft limit.
    pub soft_limit_since: Option<Instant>,
    pub last_cmd: &'static str,
    /// Waiting in the server's list of clients with output to flush.
    pub pending_write: bool,
    /// Ran a write whose AOF data is not written yet: its replies wait.
    pub awaiting_aof: bool,
    /// Where its last write put the propagation stream (`WAITAOF`, Redis's
    /// `c->woff`): the replication offset and the count of commands fed
    /// to the AOF right after it.
    pub woff: i64,
    pub wseq: u64,
    /// Waiting on keys (BLPOP and friends): its next commands wait too.
    pub blocked: Option<Box<crate::blocking::Blocked>>,
    /// Its unsent replies reached `client-reply-backpressure`: neither read
    /// nor run its commands until they drain (the socket's receive window
    /// then holds the client back, as TCP intends).
    pub output_paused: bool,
    /// Stopped short of the end of its pipeline by the per-turn work bound:
    /// the rest runs on a later pass of the loop.
    pub input_deferred: bool,
    /// Cluster mode: `ASKING` was sent (the next command may use an
    /// importing slot).
    pub asking: bool,
    /// Cluster mode: `READONLY` (a replica serves this client's reads).
    pub readonly: bool,
}

impl Client {
    pub fn new(
        id: u64,
        stream: Conn,
        addr: Addr,
        local_addr: Addr,
        pool: &mut BufferPool,
        authenticated: bool,
    ) -> Self {
        let out = pool.take_empty();
        Self::with(
            id,
            Some(stream),
            addr,
            local_addr,
            pool,
            out,
            authenticated,
            ReplyMode::On,
        )
    }

    /// A client with no connection, that replays commands (the AOF loader,
    /// as Redis's `createAOFClient`): authenticated, its replies dropped.
    pub fn fake(id: u64, pool: &mut BufferPool) -> Self {
        let mut c = Self::with(
            id,
            None,
            Addr::none(),
            Addr::none(),
            pool,
            Vec::new(),
            true,
            ReplyMode::Off,
        );
        c.user = crate::acl::NO_USER;
        c
    }

    #[allow(clippy::too_many_arguments)]
    fn with(
        id: u64,
        stream: Option<Conn>,
        addr: Addr,
        local_addr: Addr,
        pool: &mut BufferPool,
        out: Vec<u8>,
        authenticated: bool,
        reply_mode: ReplyMode,
    ) -> Self {
        let now = Instant::now();
        Client {
            id,
            token: usize::MAX,
            subs: Default::default(),
            multi: None,
            in_exec: false,
            conn: Connection::new(stream, pool.take()),
            addr,
            local_addr,
            out: Reply {
                buf: out,
                proto: Protocol::Resp2,
                error_codes: Vec::new(),
                judged_errors: 0,
                cap: usize::MAX,
                overflowed: false,
                push_spans: None,
            },
            db: 0,
            name: None,
            lib_name: None,
            lib_ver: None,
            authenticated,
            user: crate::acl::DEFAULT_USER,
            reply_mode,
            no_evict: false,
            no_touch: false,
            monitor: false,
            close_after_reply: false,
            close_asap: false,
            created: now,
            last_interaction: now,
            soft_limit_since: None,
            last_cmd: "NULL",
            pending_write: false,
            awaiting_aof: false,
            woff: 0,
            wseq: 0,
            blocked: None,
            output_paused: false,
            input_deferred: false,
            asking: false,
            readonly: false,
        }
    }

    /// Gives the buffers back to the pool when the connection closes.
    pub fn release(self, pool: &mut BufferPool) {
        pool.give(self.conn.inbuf);
        pool.give(self.out.buf);
    }

    /// Whether the client is on a local connection, as Redis's
    /// `islocalClient` decides for the `local` mode of protected actions:
    /// from 127.0.0.1 or ::1, or over a Unix socket (a fake client, which
    /// replays the AOF, is local).
    pub fn is_local(&self) -> bool {
        self.conn.stream.is_none() || self.addr.is_local()
    }

    /// The memory the connection holds: the touched part of its input
    /// buffer, its output buffer and its queued transaction (what
    /// `maxmemory-clients` counts, and `tot-mem` of `CLIENT LIST`).
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Client>()
            + self.conn.memory_usage()
            + self.out.buf.capacity()
            + crate::commands::multi::queued_mem(self)
    }

    /// Bytes of replies not yet written to the socket.
    pub fn pending_output(&self) -> usize {
        self.out.buf.len() - self.conn.out_sent + self.conn.unsent()
    }

    /// One read from the socket into the input buffer
    /// ([`Connection::read_once`]).
    pub fn read_once(&mut self) -> io::Result<(usize, bool)> {
        self.conn.read_once()
    }

    /// Writes pending replies. Returns Ok(true) when everything was written.
    pub fn flush(&mut self) -> io::Result<bool> {
        self.conn.flush(&mut self.out.buf)
    }

    /// After processing: give back an oversized input buffer.
    pub fn shrink_input(&mut self) {
        self.conn.shrink_input()
    }
}
