//! What every hostile-input test shares: the server under test (ferrokv,
//! or the real redis-server with `FERROKV_TESTS_TARGET=redis`), a victim
//! connection that keeps asking PING while an attack runs, a watch on the
//! process's resident memory, and reads that give up at a deadline.
//!
//! Every wait here is bounded: an attack that hangs the server must make
//! its test fail within seconds with a message naming the attack, never
//! hang the suite. The memory watch kills the server when it passes a hard
//! ceiling, so that a test of today's memory bugs cannot take the machine
//! (shared with other builds) down with it.

use crate::common::ServerProcess;
use ferrokv_resp::frame::FrameError;
use ferrokv_resp::Frame;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long any reply may take: a liveness bound, not a speed target
/// (CI machines are noisy and the test profile is unoptimised).
pub const REPLY_BOUND: Duration = Duration::from_secs(2);

/// How often the victim asks PING.
pub const VICTIM_PERIOD: Duration = Duration::from_millis(100);

pub use crate::common::reply::against_redis;

/// Starts the server under test with extra `--option value` arguments.
pub fn start(extra: &[&str]) -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(extra)
    } else {
        let mut args = vec!["--enable-debug-command", "yes"];
        args.extend_from_slice(extra);
        ServerProcess::ferrokv(&args)
    }
}

/// The process's resident set size in bytes (`VmRSS` of
/// `/proc/<pid>/status`); 0 once the process is gone.
pub fn rss_bytes(pid: u32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Polls the server's RSS every 20 ms, remembers the peak, and kills the
/// process with SIGKILL if it passes `ceiling` bytes: the test then fails on
/// the peak instead of the machine running out of memory.
pub struct RssWatch {
    pub pid: u32,
    pub start: u64,
    peak: Arc<AtomicU64>,
    killed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl RssWatch {
    pub fn new(server: &ServerProcess, ceiling_growth: u64) -> RssWatch {
        let pid = server.child.id();
        let start = rss_bytes(pid);
        let peak = Arc::new(AtomicU64::new(start));
        let killed = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, k, s) = (peak.clone(), killed.clone(), stop.clone());
        let ceiling = start + ceiling_growth;
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let now = rss_bytes(pid);
                p.fetch_max(now, Ordering::Relaxed);
                if now > ceiling {
                    // Our own child, by its pid.
                    let _ = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status();
                    k.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RssWatch {
            pid,
            start,
            peak,
            killed,
            stop,
            handle: Some(handle),
        }
    }

    pub fn now(&self) -> u64 {
        rss_bytes(self.pid)
    }

    /// Growth of the peak over the RSS at the start.
    pub fn peak_growth(&self) -> u64 {
        self.peak
            .load(Ordering::Relaxed)
            .max(self.now())
            .saturating_sub(self.start)
    }

    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Panics unless the peak RSS stayed within `bound` bytes of the start.
    pub fn assert_growth_under(&self, bound: u64, what: &str) {
        let growth = self.peak_growth();
        assert!(
            !self.killed() && growth <= bound,
            "{what}: the server's RSS grew by {:.1} MB (from {:.1} MB), more than the bound of {:.1} MB{}",
            mb(growth),
            mb(self.start),
            mb(bound),
            if self.killed() {
                " (the watch killed it at its hard ceiling)"
            } else {
                ""
            }
        );
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[derive(Default)]
struct VictimLog {
    pings: u64,
    worst: Duration,
    failures: Vec<String>,
    reconnects: u32,
}

/// A connection that sends PING every [`VICTIM_PERIOD`] and requires each
/// `+PONG` within [`REPLY_BOUND`]. When the server closes it (a `CLIENT
/// KILL` of the command sweep) it reconnects and counts that.
pub struct Victim {
    log: Arc<Mutex<VictimLog>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

fn victim_connect(port: u16, password: Option<&str>) -> Option<TcpStream> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_nodelay(true).ok()?;
    s.set_read_timeout(Some(REPLY_BOUND)).ok()?;
    s.set_write_timeout(Some(REPLY_BOUND)).ok()?;
    if let Some(pw) = password {
        s.write_all(&Frame::command(&["AUTH", pw])).ok()?;
        let mut ok = [0u8; 5];
        s.read_exact(&mut ok).ok()?;
    }
    Some(s)
}

impl Victim {
    pub fn start(server: &ServerProcess) -> Victim {
        Self::start_with_password(server, None)
    }

    pub fn start_with_password(server: &ServerProcess, password: Option<&str>) -> Victim {
        let port = server.port;
        let password = password.map(str::to_string);
        let log = Arc::new(Mutex::new(VictimLog::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (log.clone(), stop.clone());
        let mut conn = victim_connect(port, password.as_deref()).expect("victim connects");
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let t = Instant::now();
                let mut pong = [0u8; 7];
                let r = conn
                    .write_all(b"*1\r\n$4\r\nPING\r\n")
                    .and_then(|_| conn.read_exact(&mut pong));
                let took = t.elapsed();
                let mut log = l.lock().unwrap();
                match r {
                    Ok(()) if &pong == b"+PONG\r\n" => {
                        log.pings += 1;
                        log.worst = log.worst.max(took);
                        if took > REPLY_BOUND {
                            let n = log.pings;
                            log.failures.push(format!(
                                "PING #{n} answered after {:.2} s",
                                took.as_secs_f64()
                            ));
                        }
                    }
                    Ok(()) => log.failures.push(format!(
                        "PING answered {:?}",
                        String::from_utf8_lossy(&pong)
                    )),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        let n = log.pings + 1;
                        log.failures.push(format!(
                            "PING #{n} unanswered after {:.2} s",
                            took.as_secs_f64()
                        ));
                        // The server is stuck: one failure says it; stop
                        // asking so the log stays short.
                        return;
                    }
                    Err(_) => {
                        // Closed by the server (CLIENT KILL): reconnect.
                        log.reconnects += 1;
                        drop(log);
                        match victim_connect(port, password.as_deref()) {
                            Some(c) => conn = c,
                            None => {
                                l.lock()
                                    .unwrap()
                                    .failures
                                    .push("cannot reconnect: the server is gone".into());
                                return;
                            }
                        }
                        continue;
                    }
                }
                drop(log);
                std::thread::sleep(VICTIM_PERIOD);
            }
        });
        Victim {
            log,
            stop,
            handle: Some(handle),
        }
    }

    /// The failures so far (empty while every PING was answered in time).
    pub fn failures(&self) -> Vec<String> {
        self.log.lock().unwrap().failures.clone()
    }

    pub fn reconnects(&self) -> u32 {
        self.log.lock().unwrap().reconnects
    }

    /// Waits until the victim got `n` more PONGs (proof it still gets
    /// answers after an attack), bounded by a few periods plus the reply
    /// bound.
    pub fn wait_more_pongs(&self, n: u64) {
        let start = self.log.lock().unwrap().pings;
        let deadline = Instant::now() + REPLY_BOUND + VICTIM_PERIOD * (n as u32 + 5);
        while Instant::now() < deadline {
            let log = self.log.lock().unwrap();
            if log.pings >= start + n || !log.failures.is_empty() {
                break;
            }
            drop(log);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Panics unless every PING so far got its PONG within the bound; `what`
    /// names the attack.
    pub fn assert_alive(&self, what: &str) {
        let log = self.log.lock().unwrap();
        assert!(
            log.failures.is_empty(),
            "{what}: the victim's PINGs were not answered within {:?}: {:?} (worst answered: {:.2} s, {} answered)",
            REPLY_BOUND,
            log.failures,
            log.worst.as_secs_f64(),
            log.pings
        );
        assert!(log.pings > 0, "{what}: the victim got no PONG at all");
    }

    /// Waits for a few more PONGs after the attack, then stops; panics like
    /// [`Victim::assert_alive`].
    pub fn finish(mut self, what: &str) {
        self.wait_more_pongs(3);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.assert_alive(what);
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A connection in `MONITOR` mode that reads everything the server shows
/// it, checking that each line is one well-formed simple string:
/// `+<secs>.<6 digits> [<db> ...] ...` made of printable ASCII only (the
/// escaping of the arguments keeps a `\r\n` or a raw byte of an argument
/// from breaking the frame). When the server closes it (`CLIENT KILL`, an
/// output limit) it reconnects and counts that.
pub struct MonitorWatch {
    log: Arc<Mutex<MonitorLog>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

#[derive(Default, Clone)]
pub struct MonitorLog {
    pub lines: u64,
    pub reconnects: u32,
    /// The first malformed lines (truncated), at most ten.
    pub bad: Vec<String>,
}

fn monitor_connect(port: u16) -> Option<TcpStream> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(REPLY_BOUND)).ok()?;
    s.write_all(&Frame::command(&["MONITOR"])).ok()?;
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).ok()?;
    (&ok == b"+OK\r\n").then_some(())?;
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    Some(s)
}

/// Whether `line` (without its `\r\n`) is a monitor line as Redis shapes it.
pub fn well_formed_monitor_line(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"+") else {
        return false;
    };
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    let mut parts = rest.splitn(3, |&b| b == b' ');
    let (Some(ts), Some(db), Some(tail)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let ts_ok = match ts.iter().position(|&b| b == b'.') {
        Some(dot) => digits(&ts[..dot]) && ts.len() - dot - 1 == 6 && digits(&ts[dot + 1..]),
        None => false,
    };
    ts_ok
        && db.first() == Some(&b'[')
        && digits(&db[1..])
        && tail.contains(&b']')
        && line.iter().all(|&b| (0x20..=0x7e).contains(&b))
}

impl MonitorWatch {
    pub fn start(server: &ServerProcess) -> MonitorWatch {
        let port = server.port;
        let log = Arc::new(Mutex::new(MonitorLog::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, st) = (log.clone(), stop.clone());
        let mut conn = monitor_connect(port).expect("the monitor connects");
        let handle = std::thread::spawn(move || {
            let mut buf: Vec<u8> = Vec::new();
            // Where the search for the next `\r\n` resumes (a 1 MB
            // argument makes a 4 MB line, read in many chunks).
            let mut scan = 0;
            let mut chunk = vec![0u8; 1 << 16];
            while !st.load(Ordering::Relaxed) {
                match conn.read(&mut chunk) {
                    Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        continue
                    }
                    _ => {
                        l.lock().unwrap().reconnects += 1;
                        buf.clear();
                        scan = 0;
                        match monitor_connect(port) {
                            Some(c) => conn = c,
                            // The server is gone (the sweep restarts it with
                            // a new watch): stop.
                            None => return,
                        }
                        continue;
                    }
                }
                let mut start = 0;
                while let Some(at) = buf[scan..].windows(2).position(|w| w == b"\r\n") {
                    let end = scan + at;
                    let line = &buf[start..end];
                    let mut log = l.lock().unwrap();
                    log.lines += 1;
                    if !well_formed_monitor_line(line) && log.bad.len() < 10 {
                        log.bad.push(truncate(line, 80));
                    }
                    drop(log);
                    start = end + 2;
                    scan = start;
                }
                buf.drain(..start);
                scan = buf.len().saturating_sub(1);
            }
        });
        MonitorWatch {
            log,
            stop,
            handle: Some(handle),
        }
    }

    /// Stops reading (after the lines already received) and says what it saw.
    pub fn finish(mut self) -> MonitorLog {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.log.lock().unwrap().clone()
    }
}

impl Drop for MonitorWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// What a read with a deadline saw.
#[derive(Debug)]
pub enum Outcome {
    Frame(Frame),
    /// The server closed the connection (after these bytes).
    Closed(Vec<u8>),
    /// Nothing complete before the deadline (these bytes had arrived).
    TimedOut(Vec<u8>),
    /// The bytes are not RESP.
    Invalid(Vec<u8>),
}

/// A raw connection whose every read is bounded.
pub struct Conn {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(server: &ServerProcess) -> Conn {
        Self::open_port(server.port).expect("connect to the server")
    }

    pub fn open_port(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_write_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn { s, buf: Vec::new() })
    }

    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.s.write_all(bytes)
    }

    pub fn send_cmd<T: AsRef<[u8]>>(&mut self, args: &[T]) -> std::io::Result<()> {
        self.s.write_all(&Frame::command(args))
    }

    /// Reads until one complete frame arrived, the server closed, or
    /// `within` passed.
    pub fn read_frame_within(&mut self, within: Duration) -> Outcome {
        self.read_until(within, |buf| match Frame::decode(buf) {
            Ok((f, n)) => Some(Ok((f, n))),
            Err(FrameError::Incomplete) => None,
            Err(FrameError::Invalid(_)) => Some(Err(())),
        })
    }

    /// Reads until the first line (up to `\n`) arrived: for replies that
    /// are streams rather than frames (SYNC's payload).
    pub fn read_line_within(&mut self, within: Duration) -> Outcome {
        self.read_until(within, |buf| {
            buf.iter().position(|&b| b == b'\n').map(|i| {
                Ok((
                    Frame::Simple(buf[..i].strip_suffix(b"\r").unwrap_or(&buf[..i]).to_vec()),
                    i + 1,
                ))
            })
        })
    }

    fn read_until(
        &mut self,
        within: Duration,
        mut complete: impl FnMut(&[u8]) -> Option<Result<(Frame, usize), ()>>,
    ) -> Outcome {
        let deadline = Instant::now() + within;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match complete(&self.buf) {
                Some(Ok((f, n))) => {
                    self.buf.drain(..n);
                    return Outcome::Frame(f);
                }
                Some(Err(())) => return Outcome::Invalid(std::mem::take(&mut self.buf)),
                None => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Outcome::TimedOut(std::mem::take(&mut self.buf));
            }
            self.s.set_read_timeout(Some(left)).unwrap();
            match self.s.read(&mut chunk) {
                Ok(0) => return Outcome::Closed(std::mem::take(&mut self.buf)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Outcome::TimedOut(std::mem::take(&mut self.buf))
                }
                Err(_) => return Outcome::Closed(std::mem::take(&mut self.buf)),
            }
        }
    }

    /// Sends a command and requires its reply within [`REPLY_BOUND`];
    /// panics naming `what` otherwise.
    pub fn call<T: AsRef<[u8]>>(&mut self, args: &[T], what: &str) -> Frame {
        self.send_cmd(args)
            .unwrap_or_else(|e| panic!("{what}: cannot send: {e}"));
        self.expect_frame(what)
    }

    /// The next frame within [`REPLY_BOUND`]; panics naming `what` otherwise.
    pub fn expect_frame(&mut self, what: &str) -> Frame {
        self.expect_frame_within(REPLY_BOUND, what)
    }

    /// The next frame within `within`: for a reply whose size alone (a
    /// million elements) makes 2 s a claim about the machine's load rather
    /// than about the server.
    pub fn expect_frame_within(&mut self, within: Duration, what: &str) -> Frame {
        match self.read_frame_within(within) {
            Outcome::Frame(f) => f,
            other => panic!("{what}: no reply within {within:?}: {}", show(&other)),
        }
    }

    /// Everything the server sends until it closes, within `within`; panics
    /// naming `what` when the connection stays open.
    pub fn read_to_close_within(&mut self, within: Duration, what: &str) -> Vec<u8> {
        let deadline = Instant::now() + within;
        let mut out = std::mem::take(&mut self.buf);
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{what}: the connection was still open after {within:?} (received {:?})",
                truncate(&out, 120)
            );
            self.s.set_read_timeout(Some(left)).unwrap();
            match self.s.read(&mut chunk) {
                Ok(0) => return out,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                // A reset after the reply (unread request bytes): closed.
                Err(_) => return out,
            }
        }
    }

    /// True when nothing arrives within `within` and the connection stays
    /// open (a server waiting for the rest of a request).
    pub fn stays_silent_for(&mut self, within: Duration) -> bool {
        matches!(self.read_frame_within(within), Outcome::TimedOut(b) if b.is_empty())
    }
}

/// A short printable form of bytes for failure messages.
pub fn truncate(b: &[u8], max: usize) -> String {
    if b.len() <= max {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        format!(
            "{:?}... ({} bytes)",
            String::from_utf8_lossy(&b[..max]),
            b.len()
        )
    }
}

/// A frame for failure messages, its strings as text.
pub fn show_frame(f: &Frame) -> String {
    match f {
        Frame::Simple(b) => format!("+{}", String::from_utf8_lossy(b)),
        Frame::Error(b) => format!("-{}", String::from_utf8_lossy(b)),
        Frame::Bulk(b) => truncate(b, 80),
        Frame::Array(v) if v.len() > 8 => format!("an array of {}", v.len()),
        Frame::Array(v) => format!(
            "[{}]",
            v.iter().map(show_frame).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

pub fn show(o: &Outcome) -> String {
    match o {
        Outcome::Frame(f) => format!("reply {}", show_frame(f)),
        Outcome::Closed(b) => format!("connection closed after {}", truncate(b, 80)),
        Outcome::TimedOut(b) => format!("timed out after receiving {}", truncate(b, 80)),
        Outcome::Invalid(b) => format!("not RESP: {}", truncate(b, 80)),
    }
}
