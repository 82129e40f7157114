//! I/O threads (`io-threads N`, Redis's and Valkey's name): N−1 threads
//! that take the socket work of a loop turn off the execution thread —
//! the `read(2)`s of the clients that became readable, the `write(2)`s of
//! the replies the turn produced, and with them TLS's decryption and
//! encryption, which happen inside those reads and writes.
//!
//! # The hand-off
//! Work moves by ownership, never by sharing. For a batch, the execution
//! thread takes each client's connection (a TCP, Unix or TLS socket:
//! [`Movable`]) and its input or output buffer out of the client, sends
//! them to a thread as a [`Job`], and waits, asleep on a channel, until
//! every job has come back as a [`Done`]; then it puts them back and goes
//! on. Nothing else runs on the execution thread while a batch is out, so
//! no part of the server can meet a client whose socket is away, and the
//! order of everything the execution thread does (every write, the AOF,
//! the replication stream, `MONITOR`, notifications, tracking,
//! `CLIENT KILL`, output limits) is exactly the order of one thread. No
//! `unsafe` is involved: the channels move owned values.
//!
//! A thread that read also decodes what it read into whole commands
//! ([`parse_ahead`]: multibulk commands of an authenticated client, as
//! argument places in the input buffer), which the execution thread runs
//! without decoding them again.
//!
//! Connections that cannot move stay on the execution thread: RDMA
//! connections (their completion queues belong to the fabric domain the
//! loop polls), io_uring connections (their buffers are registered with
//! the loop's ring), the master link and replicas (whose sockets are
//! lent to the full sync's sender threads).
//!
//! # When threads are used
//! A thread woken for one read costs more than the read. As Valkey does,
//! a batch goes to the threads only when it holds at least
//! `events-per-io-thread` jobs per thread used (default 2; 0 uses the
//! threads for every batch), so a lightly loaded server does its I/O
//! itself. And threads help only when there is a core for them: every
//! half second [`IoThreads::tick`] reads `/proc/stat` and the process's
//! own CPU time, and allows as many threads as there are cores that
//! neither this process's execution thread nor any other process is using
//! (`io_threads_allowed` in `INFO`). On a 2-core machine beside a load
//! generator that takes a core, that is none, and `io-threads 2` costs
//! nothing; on a large machine it is every thread configured.
//! `events-per-io-thread 0` skips that check too (the tests force the
//! threads with it).
//!
//! A thread with nothing to do sleeps on its channel.

use crate::buffer::{flush_from, read_into, Transfer};
use crate::conn::Conn;
use crate::tls::TlsStream;
use ferrokv_resp::request::{Args, Limits, RequestDecoder};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The part of a connection an I/O thread can hold: a socket, or TLS over
/// one.
pub enum Movable {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
    Tls(Box<TlsStream>),
}

impl Movable {
    /// Takes the connection out of `slot` when it can move to a thread;
    /// leaves it (an RDMA or io_uring connection, or none) otherwise.
    pub fn take(slot: &mut Option<Conn>) -> Option<Movable> {
        match slot.take() {
            Some(Conn::Tcp(s)) => Some(Movable::Tcp(s)),
            Some(Conn::Unix(s)) => Some(Movable::Unix(s)),
            Some(Conn::Tls(s)) => Some(Movable::Tls(s)),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Whether [`Movable::take`] would take this connection.
    pub fn can_take(conn: Option<&Conn>) -> bool {
        matches!(conn, Some(Conn::Tcp(_) | Conn::Unix(_) | Conn::Tls(_)))
    }

    pub fn into_conn(self) -> Conn {
        match self {
            Movable::Tcp(s) => Conn::Tcp(s),
            Movable::Unix(s) => Conn::Unix(s),
            Movable::Tls(s) => Conn::Tls(s),
        }
    }
}

impl Read for Movable {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Movable::Tcp(s) => s.read(buf),
            Movable::Unix(s) => s.read(buf),
            Movable::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Movable {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Movable::Tcp(s) => s.write(buf),
            Movable::Unix(s) => s.write(buf),
            Movable::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transfer for Movable {
    #[inline]
    fn drain(&mut self) -> io::Result<bool> {
        match self {
            Movable::Tls(s) => s.drain(),
            _ => Ok(true),
        }
    }
}

/// Whole commands an I/O thread decoded from what it read, so that the
/// execution thread runs them without decoding: each a place in the input
/// buffer and its arguments. Multibulk commands only, from the start of
/// the unprocessed input, up to the first one that is incomplete, inline,
/// or malformed (the execution thread decodes those itself, and reports
/// the error as it always does). Kept by the client between reads so its
/// vectors are reused.
#[derive(Default, Debug)]
pub struct Parsed {
    pub cmds: Vec<ParsedCmd>,
    /// Arguments as (start, length), relative to their command's start.
    pub ranges: Vec<(usize, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedCmd {
    /// Where the command starts in the input buffer, and its length.
    pub start: usize,
    pub len: usize,
    /// Its arguments: `ranges[args.0..args.0 + args.1]`.
    pub args: (usize, usize),
}

impl Parsed {
    pub fn clear(&mut self) {
        self.cmds.clear();
        self.ranges.clear();
    }

    /// The arguments of `cmd` over the input buffer `buf`.
    pub fn args<'a>(&'a self, buf: &'a [u8], cmd: &ParsedCmd) -> Args<'a> {
        Args::new(
            &buf[cmd.start..cmd.start + cmd.len],
            &self.ranges[cmd.args.0..cmd.args.0 + cmd.args.1],
        )
    }
}

/// At most this many commands are decoded ahead for one client: what the
/// execution thread runs of one client in a pass (its fairness bound).
pub const PARSE_AHEAD: usize = 1024;

/// Decodes whole multibulk commands from `buf[from..]` into `out` (see
/// [`Parsed`]). `decoder` is a scratch decoder; `max_bulk_len` is
/// `proto-max-bulk-len` (only authenticated clients' input is decoded
/// ahead: the pre-AUTH limits stay with the execution thread).
pub fn parse_ahead(
    decoder: &mut RequestDecoder,
    buf: &[u8],
    from: usize,
    max_bulk_len: usize,
    out: &mut Parsed,
) {
    out.clear();
    decoder.reset();
    let limits = Limits {
        max_bulk_len,
        authenticated: true,
    };
    let mut pos = from;
    while pos < buf.len() && out.cmds.len() < PARSE_AHEAD && buf[pos] == b'*' {
        let Ok(Some(d)) = decoder.decode(&buf[pos..], limits) else {
            break;
        };
        let first = out.ranges.len();
        out.ranges.extend(d.args.ranges());
        out.cmds.push(ParsedCmd {
            start: pos,
            len: d.consumed,
            args: (first, out.ranges.len() - first),
        });
        pos += d.consumed;
    }
    // An incomplete command leaves the scratch decoder mid-way.
    decoder.reset();
}

/// A client's input, handed to a thread to read into.
pub struct ReadJob {
    pub token: usize,
    pub stream: Movable,
    pub inbuf: Vec<u8>,
    pub in_start: usize,
    pub in_end: usize,
    /// What the decoder needs buffered from the command's start.
    pub wanted: usize,
    /// Read until the socket is empty or this many bytes came.
    pub budget: usize,
    /// Decode whole commands ahead into `parsed` (`proto-max-bulk-len`),
    /// or not (`None`: a command is partly decoded already, or the client
    /// has not authenticated).
    pub parse: Option<usize>,
    pub parsed: Parsed,
    /// The peer ended its input ([`crate::connection::Connection::peer_closed`]):
    /// read on until a read returns 0.
    pub peer_closed: bool,
}

/// What a thread read for a [`ReadJob`].
pub struct ReadDone {
    pub job: ReadJob,
    /// Successful reads that returned data, and their bytes.
    pub reads: u64,
    pub bytes: usize,
    /// The peer closed the connection (after `bytes`).
    pub eof: bool,
    /// The budget ran out with more waiting: read again later this turn.
    pub more: bool,
    pub error: Option<io::Error>,
}

/// A client's replies, handed to a thread to write.
pub struct WriteJob {
    pub token: usize,
    pub stream: Movable,
    pub buf: Vec<u8>,
    pub sent: usize,
}

pub struct WriteDone {
    pub job: WriteJob,
    /// Bytes written.
    pub written: usize,
    /// As ferrokv-server's `Client::flush`: all written, or not.
    pub result: io::Result<bool>,
}

pub enum Job {
    Read(ReadJob),
    Write(WriteJob),
}

pub enum Done {
    Read(ReadDone),
    Write(WriteDone),
}

/// One thread's counters, written by it and read by `INFO` and `/metrics`.
#[derive(Default)]
pub struct ThreadStats {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
    pub batches: AtomicU64,
    /// Commands it decoded ahead for the execution thread.
    pub parsed: AtomicU64,
    /// The thread's id in `/proc/self/task` (0 until it started).
    pub tid: AtomicU64,
}

struct Worker {
    jobs: Option<Sender<Vec<Job>>>,
    stats: Arc<ThreadStats>,
    handle: Option<JoinHandle<()>>,
}

/// A snapshot of the CPU counters [`IoThreads::tick`] compares.
#[derive(Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// All CPUs' busy and total jiffies (`/proc/stat`).
    sys_busy: u64,
    sys_total: u64,
    /// This process's user+system jiffies (`/proc/self/stat`).
    own: u64,
    /// The CPUs `/proc/stat` counts.
    cpus: usize,
}

/// The I/O threads and the execution thread's side of the hand-off.
pub struct IoThreads {
    workers: Vec<Worker>,
    done: Receiver<Vec<Done>>,
    /// Threads the CPU check allows now (≤ the workers).
    allowed: usize,
    /// Whether the last batch used the threads (`io_threads_active`).
    pub active: bool,
    last: Option<CpuSample>,
    /// Reads and writes the threads made (`io_threaded_reads_processed`,
    /// `io_threaded_writes_processed`).
    pub threaded_reads: u64,
    pub threaded_writes: u64,
    /// Batches given to the threads, and the jobs in them.
    pub batches: u64,
    pub batch_jobs: u64,
}

/// How often [`IoThreads::tick`] looks at the CPUs.
const TICK: Duration = Duration::from_millis(500);

impl IoThreads {
    /// `io-threads n`: n−1 threads (`None` for 1, Redis's default, which
    /// is the execution thread alone).
    /// `forced` (`events-per-io-thread 0`): the threads are allowed from
    /// the start, without the CPU check.
    pub fn start(n: usize, forced: bool) -> io::Result<Option<Self>> {
        if n <= 1 {
            return Ok(None);
        }
        let (done_tx, done) = channel();
        let mut workers = Vec::with_capacity(n - 1);
        for i in 1..n {
            let (tx, rx) = channel::<Vec<Job>>();
            let stats = Arc::new(ThreadStats::default());
            let back = done_tx.clone();
            let st = stats.clone();
            // The name is what `top -H` and /proc/PID/task/*/comm show.
            let handle = std::thread::Builder::new()
                .name(format!("io-thread-{i}"))
                .spawn(move || run(rx, back, st))?;
            workers.push(Worker {
                jobs: Some(tx),
                stats,
                handle: Some(handle),
            });
        }
        drop(done_tx);
        Ok(Some(IoThreads {
            allowed: if forced { n - 1 } else { 0 },
            workers,
            done,
            active: false,
            last: None,
            threaded_reads: 0,
            threaded_writes: 0,
            batches: 0,
            batch_jobs: 0,
        }))
    }

    /// The threads configured (`io-threads` − 1).
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// The threads the CPU check allows now.
    pub fn allowed(&self) -> usize {
        self.allowed
    }

    pub fn thread_stats(&self) -> impl Iterator<Item = &ThreadStats> {
        self.workers.iter().map(|w| &*w.stats)
    }

    /// How many threads a batch of `jobs` jobs goes to (0: the execution
    /// thread does them itself), each to get at least `events_per_thread`
    /// (`events-per-io-thread`; 0: any batch).
    pub fn threads_for(&mut self, jobs: usize, events_per_thread: usize) -> usize {
        let by_load = jobs.checked_div(events_per_thread).unwrap_or(jobs);
        let n = by_load.min(self.allowed).min(jobs);
        self.active = n > 0;
        n
    }

    /// Runs `jobs` on `threads` threads (from [`Self::threads_for`]) and
    /// returns what they did, once all are back. The jobs are split into
    /// `threads` runs of consecutive jobs.
    pub fn run(&mut self, jobs: Vec<Job>, threads: usize) -> Vec<Done> {
        let total = jobs.len();
        let threads = threads.clamp(1, self.workers.len()).min(total.max(1));
        let per = total.div_ceil(threads);
        let mut sent = 0;
        let mut jobs = jobs.into_iter();
        for w in &self.workers[..threads] {
            let part: Vec<Job> = jobs.by_ref().take(per).collect();
            if part.is_empty() {
                break;
            }
            if let Some(tx) = &w.jobs {
                // A thread never exits while its sender lives.
                tx.send(part).expect("an I/O thread is gone");
                sent += 1;
            }
        }
        self.batches += 1;
        self.batch_jobs += total as u64;
        let mut out = Vec::with_capacity(total);
        for _ in 0..sent {
            let done = self.done.recv().expect("an I/O thread is gone");
            for d in &done {
                match d {
                    Done::Read(r) => self.threaded_reads += r.reads,
                    Done::Write(_) => self.threaded_writes += 1,
                }
            }
            out.extend(done);
        }
        out
    }

    /// Every [`TICK`]: how many threads have a core of their own. The
    /// execution thread needs one; what other processes use is the
    /// machine's busy time less this process's; what is left, rounded to
    /// the nearest whole core, is what threads may use.
    pub fn tick(&mut self, now: Instant, events_per_thread: usize) {
        if events_per_thread == 0 {
            self.allowed = self.workers.len();
            return;
        }
        if self.last.is_some_and(|l| now.duration_since(l.at) < TICK) {
            return;
        }
        let Some(sample) = cpu_sample(now) else {
            // No /proc: the threads are used as configured.
            self.allowed = self.workers.len();
            return;
        };
        if let Some(last) = self.last.replace(sample) {
            let total = sample.sys_total.saturating_sub(last.sys_total);
            if total == 0 {
                return;
            }
            let wall = now.duration_since(last.at).as_secs_f64();
            let hz = clock_ticks() as f64;
            let machine_cpus = sample.cpus as f64;
            let busy =
                sample.sys_busy.saturating_sub(last.sys_busy) as f64 / total as f64 * machine_cpus;
            let own = sample.own.saturating_sub(last.own) as f64 / hz / wall;
            let others = (busy - own).max(0.0);
            let spare = machine_cpus - others - 1.0;
            self.allowed = (spare + 0.5).floor().clamp(0.0, self.workers.len() as f64) as usize;
        }
    }
}

impl Drop for IoThreads {
    fn drop(&mut self) {
        // Closing a thread's channel ends its loop.
        for w in &mut self.workers {
            w.jobs = None;
        }
        for w in &mut self.workers {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
    }
}

/// An I/O thread: sleeps on its channel, does each batch, sends it back.
fn run(jobs: Receiver<Vec<Job>>, done: Sender<Vec<Done>>, stats: Arc<ThreadStats>) {
    stats.tid.store(gettid(), Relaxed);
    let mut decoder = RequestDecoder::new();
    while let Ok(batch) = jobs.recv() {
        let out: Vec<Done> = batch
            .into_iter()
            .map(|j| work(j, &stats, &mut decoder))
            .collect();
        stats.batches.fetch_add(1, Relaxed);
        if done.send(out).is_err() {
            return;
        }
    }
}

fn work(job: Job, stats: &ThreadStats, decoder: &mut RequestDecoder) -> Done {
    match job {
        Job::Read(j) => {
            let mut r = read_job(j);
            if let Some(max_bulk_len) = r.job.parse.filter(|_| r.bytes > 0) {
                let j = &mut r.job;
                parse_ahead(
                    decoder,
                    &j.inbuf[..j.in_end],
                    j.in_start,
                    max_bulk_len,
                    &mut j.parsed,
                );
                stats.parsed.fetch_add(j.parsed.cmds.len() as u64, Relaxed);
            }
            stats.reads.fetch_add(r.reads, Relaxed);
            stats.read_bytes.fetch_add(r.bytes as u64, Relaxed);
            Done::Read(r)
        }
        Job::Write(mut j) => {
            let before = j.buf.len() - j.sent;
            let result = flush_from(&mut j.stream, &mut j.buf, &mut j.sent);
            let after = if matches!(result, Ok(true)) {
                0
            } else {
                j.buf.len() - j.sent
            };
            stats.writes.fetch_add(1, Relaxed);
            let written = before.saturating_sub(after);
            stats.write_bytes.fetch_add(written as u64, Relaxed);
            Done::Write(WriteDone {
                job: j,
                written,
                result,
            })
        }
    }
}

/// Reads until the socket is empty, the peer closed, or the budget is
/// spent. Where the execution thread decodes after each read, a thread
/// reads on: the buffer grows by doubling what it holds, so a budget's
/// worth of small reads is not a copy per read.
pub fn read_job(mut j: ReadJob) -> ReadDone {
    let mut reads = 0;
    let mut bytes = 0usize;
    let mut eof = false;
    let mut more = false;
    let mut error = None;
    loop {
        let pending = j.in_end - j.in_start;
        let wanted = j.wanted.max(pending.saturating_mul(2));
        match read_into(
            &mut j.stream,
            &mut j.inbuf,
            &mut j.in_start,
            &mut j.in_end,
            wanted,
        ) {
            Ok((0, _)) => {
                eof = true;
                break;
            }
            Ok((usize::MAX, _)) => break,
            Ok((n, m)) => {
                reads += 1;
                bytes += n;
                if !m && !j.peer_closed {
                    break;
                }
                if bytes >= j.budget {
                    more = true;
                    break;
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    ReadDone {
        job: j,
        reads,
        bytes,
        eof,
        more,
        error,
    }
}

fn gettid() -> u64 {
    // SAFETY: gettid(2) takes no arguments and cannot fail.
    (unsafe { libc::syscall(libc::SYS_gettid) }) as u64
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

fn cpu_sample(at: Instant) -> Option<CpuSample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    let own = own_cpu_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    // Its `cpuN` lines: the CPUs the busy share is a share of.
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count()
        .max(1);
    Some(CpuSample {
        at,
        cpus,
        sys_busy: total.saturating_sub(idle),
        sys_total: total,
        own,
    })
}

/// utime + stime of a `/proc/.../stat` line, in clock ticks.
pub fn own_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name may hold spaces: fields count from its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(0) ... utime(11) stime(12).
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// A thread's CPU seconds (`/proc/self/task/TID/stat`), for `INFO`.
pub fn thread_cpu_seconds(tid: u64) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    Some(own_cpu_ticks(&s)? as f64 / clock_ticks() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (mio::net::UnixStream, mio::net::UnixStream) {
        mio::net::UnixStream::pair().unwrap()
    }

    #[test]
    fn reads_and_writes_go_round_trip_through_the_threads() {
        let mut io = IoThreads::start(3, true).unwrap().unwrap();
        assert_eq!(io.threads(), 2);
        let mut peers = Vec::new();
        let mut jobs = Vec::new();
        for token in 0..5 {
            let (a, mut b) = pair();
            b.write_all(format!("hello {token}").as_bytes()).unwrap();
            peers.push(b);
            jobs.push(Job::Read(ReadJob {
                token,
                stream: Movable::Unix(a),
                inbuf: Vec::new(),
                in_start: 0,
                in_end: 0,
                wanted: 0,
                budget: 1 << 20,
                parse: None,
                parsed: Parsed::default(),
                peer_closed: false,
            }));
        }
        let n = io.threads_for(jobs.len(), 0);
        assert_eq!(n, 2);
        let done = io.run(jobs, n);
        assert_eq!(done.len(), 5);
        let mut writes = Vec::new();
        for d in done {
            let Done::Read(r) = d else {
                panic!("a write came back")
            };
            let j = r.job;
            assert_eq!(
                &j.inbuf[j.in_start..j.in_end],
                format!("hello {}", j.token).as_bytes()
            );
            assert!(!r.eof && !r.more && r.error.is_none());
            writes.push(Job::Write(WriteJob {
                token: j.token,
                stream: j.stream,
                buf: format!("reply {}", j.token).into_bytes(),
                sent: 0,
            }));
        }
        assert_eq!(io.threaded_reads, 5);
        let done = io.run(writes, 2);
        for d in done {
            let Done::Write(w) = d else {
                panic!("a read came back")
            };
            assert!(matches!(w.result, Ok(true)));
            assert_eq!(w.written, format!("reply {}", w.job.token).len());
            assert!(w.job.buf.is_empty());
            let mut got = vec![0u8; 64];
            let n = peers[w.job.token].read(&mut got).unwrap();
            assert_eq!(&got[..n], format!("reply {}", w.job.token).as_bytes());
        }
        assert_eq!(io.threaded_writes, 5);
    }

    #[test]
    fn a_closed_peer_is_reported_after_its_last_bytes() {
        let (a, mut b) = pair();
        b.write_all(b"last").unwrap();
        drop(b);
        let job = |stream, inbuf, in_end| ReadJob {
            token: 0,
            stream,
            inbuf,
            in_start: 0,
            in_end,
            wanted: 0,
            budget: 1 << 20,
            parse: None,
            parsed: Parsed::default(),
            peer_closed: false,
        };
        // A short read empties the socket and ends the job, as on the
        // execution thread; the end is what the next readiness event reads.
        let r = read_job(job(Movable::Unix(a), Vec::new(), 0));
        assert_eq!(r.bytes, 4);
        assert!(!r.more && r.error.is_none());
        assert_eq!(&r.job.inbuf[..r.job.in_end], b"last");
        let j = r.job;
        let r = read_job(job(j.stream, j.inbuf, j.in_end));
        assert!(r.eof);
        assert_eq!(r.bytes, 0);
        assert_eq!(&r.job.inbuf[..r.job.in_end], b"last");
    }

    #[test]
    fn a_budget_stops_a_read_with_more_waiting() {
        let (a, mut b) = pair();
        let data = vec![b'x'; 200 * 1024];
        // (mio's sockets are non-blocking: the buffer takes what it can.)
        let mut off = 0;
        while off < data.len() {
            match b.write(&data[off..]) {
                Ok(n) => off += n,
                Err(_) => break,
            }
        }
        assert!(off > 64 * 1024, "the socket took only {off} bytes");
        let r = read_job(ReadJob {
            token: 0,
            stream: Movable::Unix(a),
            inbuf: Vec::new(),
            in_start: 0,
            in_end: 0,
            wanted: 0,
            budget: 32 * 1024,
            parse: None,
            parsed: Parsed::default(),
            peer_closed: false,
        });
        assert!(r.more, "read {} bytes in {} reads", r.bytes, r.reads);
        assert!(r.bytes >= 32 * 1024 && r.bytes < off);
    }

    #[test]
    fn the_execution_thread_alone_under_light_load() {
        let mut io = IoThreads::start(4, false).unwrap().unwrap();
        io.allowed = 3;
        assert_eq!(io.threads_for(1, 2), 0);
        assert!(!io.active);
        assert_eq!(io.threads_for(4, 2), 2);
        assert_eq!(io.threads_for(100, 2), 3);
        assert!(io.active);
        io.allowed = 0;
        assert_eq!(io.threads_for(100, 2), 0);
    }

    #[test]
    fn whole_multibulk_commands_are_decoded_ahead() {
        let mut d = RequestDecoder::new();
        let mut p = Parsed::default();
        let buf = b"xx*2\r\n$3\r\nGET\r\n$1\r\na\r\n*0\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET";
        parse_ahead(&mut d, buf, 2, 1 << 20, &mut p);
        assert_eq!(p.cmds.len(), 3, "{p:?}");
        let got: Vec<Vec<Vec<u8>>> = p.cmds.iter().map(|c| p.args(buf, c).to_vecs()).collect();
        assert_eq!(
            got,
            [
                vec![b"GET".to_vec(), b"a".to_vec()],
                vec![],
                vec![b"PING".to_vec()]
            ]
        );
        assert_eq!(p.cmds[0].start, 2);
        assert_eq!(p.cmds[2].start + p.cmds[2].len, buf.len() - 11);
        // An inline command, or a malformed one, ends it; the rest is the
        // execution thread's.
        parse_ahead(
            &mut d,
            b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$4\r\nPING\r\n",
            0,
            1 << 20,
            &mut p,
        );
        assert_eq!(p.cmds.len(), 1);
        parse_ahead(&mut d, b"*1\r\n$x\r\n", 0, 1 << 20, &mut p);
        assert!(p.cmds.is_empty());
        // A bulk over proto-max-bulk-len is not decoded ahead.
        parse_ahead(&mut d, b"*1\r\n$100\r\n", 0, 10, &mut p);
        assert!(p.cmds.is_empty());
    }

    #[test]
    fn cpu_ticks_of_a_stat_line_with_spaces_in_its_name() {
        let line = "123 (a b) S 1 2 3 4 5 6 7 8 9 10 40 2 0 0 20";
        assert_eq!(own_cpu_ticks(line), Some(42));
    }
}
