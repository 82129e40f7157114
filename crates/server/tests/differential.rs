//! Differential test of the server core against the real Redis 7.0: the same
//! generated command sequences run on `redis-server` (Debian's package) and
//! on ferrokv, every reply is compared (byte-exact RESP unless the command
//! belongs to a documented class of nondeterminism, see `generator.rs`), and
//! after each sequence `DEBUG DIGEST` proves both hold the same data.
//!
//! Guards against any divergence from Redis in the string, generic, hash,
//! list, set, sorted-set, bitmap, sort and geo families: replies, error texts, option
//! parsing, expiry, encodings, single-session transactions
//! (MULTI/EXEC/DISCARD/WATCH on two connections), and Lua scripts and
//! Functions calling all of them (`differential/script_gen.rs`).
//!
//! One redis-server and one ferrokv serve every sequence (FLUSHALL before
//! each). A sequence runs over two connections per server: the first speaks
//! RESP3 (`HELLO 3`) in a quarter of the sequences, the second RESP2, and
//! one command in five goes to the second, so per-connection state
//! (SELECT) meets shared state (SWAPDB, MOVE). RESP3 replies must be the
//! same bytes as Redis's RESP3 replies, as RESP2 ones as RESP2 ones.
//!
//! Knobs (environment):
//! - `FERROKV_DIFF_SEED`: the first seed (case `i` uses seed + i).
//! - `FERROKV_DIFF_CASES`: how many sequences (default 2000, ~6 s).
//! - `FERROKV_DIFF_LEN`: commands per sequence (default 50).
//! - `FERROKV_DIFF_MAX_FAILURES`: keep going until this many failing
//!   sequences were seen (default 1).
//! - `FERROKV_DIFF_SCRIPTS=0`: leave out the scripting family.
//! - `FERROKV_DIFF_STREAM`: the share of stream commands (default 0.05).
//! - `FERROKV_DIFF_GEO`: the share of geo commands (default 0.06;
//!   `0.8` focuses a run on them, `differential/geo_gen.rs`).
//! - `FERROKV_TESTS_TARGET=redis`: compare Redis with a second Redis, to
//!   check that the generator only makes deterministic sequences.
//!
//! A failure prints the seed, the index of the first differing command, the
//! command, both replies, and a shrunk sequence that still differs.

mod common;
#[path = "differential/generator.rs"]
mod generator;

use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use generator::{quote, Check, Command, Generator, ABSOLUTE_EPOCH_S};
use std::time::Instant;

const DEFAULT_SEED: u64 = 0x00F3_2207_0D1F;
const DEFAULT_CASES: u64 = 2000;
const DEFAULT_LEN: usize = 50;
/// Databases the generator touches; digests of single keys are listed
/// from these on a mismatch.
const DBS_USED: usize = 3;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} does not parse")),
        Err(_) => default,
    }
}

/// One sequence: its seed, its protocol and its commands.
#[derive(Clone)]
struct Case {
    seed: u64,
    resp3: bool,
    commands: Vec<Command>,
}

impl Case {
    fn generate(mut gen: Generator, seed: u64, len: usize) -> Case {
        let resp3 = gen.chance(0.25);
        let commands = (0..len).map(|_| gen.command()).collect();
        Case {
            seed,
            resp3,
            commands,
        }
    }
}

/// Where and how the two servers parted.
struct Mismatch {
    /// Index of the differing command; `commands.len()` for the digest.
    index: usize,
    what: String,
}

/// Redis started with ferrokv's defaults where Debian's redis-server,
/// started without a config file, differs (512 hash listpack entries).
const REDIS_ARGS: &[&str] = &["--hash-max-listpack-entries", "128"];

/// The server compared with Redis: ferrokv, or with
/// `FERROKV_TESTS_TARGET=redis` a second redis-server, which checks that
/// the generator is deterministic (Redis against itself never differs).
fn subject() -> ServerProcess {
    if common::reply::against_redis() {
        ServerProcess::redis(REDIS_ARGS)
    } else {
        ServerProcess::ferrokv(&["--enable-debug-command", "yes"])
    }
}

struct Servers {
    redis: ServerProcess,
    ferrokv: ServerProcess,
    /// The reference when it is not Debian's redis-server 7.0.
    peer: Option<common::Peer>,
}

impl Servers {
    fn start() -> Servers {
        let redis = ServerProcess::redis(REDIS_ARGS);
        let ferrokv = subject();
        Servers {
            redis,
            ferrokv,
            peer: None,
        }
    }

    /// ferrokv beside a reference from `../shared/peers/` (`None` where
    /// this clone has none).
    fn start_beside(peer: common::Peer) -> Option<Servers> {
        let redis = ServerProcess::peer(peer, REDIS_ARGS)?;
        Some(Servers {
            redis,
            ferrokv: subject(),
            peer: Some(peer),
        })
    }

    /// After a mismatch: if ferrokv stopped answering (a crash is still
    /// printing its backtrace), waits for it to exit and restarts it, so
    /// the next run does not fail for the previous one's crash.
    fn settle(&mut self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while Instant::now() < deadline {
            if !self.ferrokv.alive() {
                break;
            }
            if ping(&self.ferrokv) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.revive();
    }

    /// Restarts a server that died (or stopped answering), so shrinking
    /// can go on; its log goes to stderr.
    fn revive(&mut self) {
        fn answers(p: &mut ServerProcess) -> bool {
            p.alive() && std::net::TcpStream::connect(("127.0.0.1", p.port)).is_ok()
        }
        if !answers(&mut self.ferrokv) {
            eprintln!("ferrokv died; its log:\n{}", self.ferrokv.log());
            self.ferrokv = subject();
        }
        if !answers(&mut self.redis) {
            eprintln!("redis died; its log:\n{}", self.redis.log());
            self.redis = match self.peer {
                Some(p) => ServerProcess::peer(p, REDIS_ARGS).unwrap(),
                None => ServerProcess::redis(REDIS_ARGS),
            };
        }
    }
}

/// Whether a server answers PING on a new connection.
fn ping(p: &ServerProcess) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", p.port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Two connections to each server, so per-connection state (selected
/// database, protocol) meets shared state (SWAPDB, keys another connection
/// wrote). Connection 0 speaks the case's protocol, connection 1 RESP2.
struct Session {
    redis: [Raw; 2],
    ferrokv: [Raw; 2],
    /// The connection the next commands go to.
    conn: usize,
}

/// A reply, or why there is none.
type Reply = Result<(Frame, Vec<u8>), String>;

impl Session {
    fn open(servers: &Servers, resp3: bool) -> Session {
        let mut s = Session {
            redis: [servers.redis.raw(), servers.redis.raw()],
            ferrokv: [servers.ferrokv.raw(), servers.ferrokv.raw()],
            conn: 0,
        };
        if resp3 {
            // The HELLO reply names the server and the client: not compared.
            let (r, f) = s.both(&["HELLO", "3"]);
            assert!(matches!(r, Ok((Frame::Map(_), _))), "redis HELLO 3: {r:?}");
            assert!(
                matches!(f, Ok((Frame::Map(_), _))),
                "ferrokv HELLO 3: {f:?}"
            );
        }
        s
    }

    fn both<T: AsRef<[u8]>>(&mut self, args: &[T]) -> (Reply, Reply) {
        (
            self.redis[self.conn].try_cmd_bytes(args),
            self.ferrokv[self.conn].try_cmd_bytes(args),
        )
    }
}

fn show(r: &Reply) -> String {
    match r {
        Ok((f, _)) => show_frame(f),
        Err(e) => format!("<no reply: {e}>"),
    }
}

fn show_frame(f: &Frame) -> String {
    let list = |v: &[Frame]| v.iter().map(show_frame).collect::<Vec<_>>().join(", ");
    match f {
        Frame::Simple(s) => format!("+{}", String::from_utf8_lossy(s)),
        Frame::Error(s) => format!("-{}", String::from_utf8_lossy(s)),
        Frame::Integer(i) => format!("(integer) {i}"),
        Frame::Bulk(b) if b.len() > 120 => format!("{}...({} bytes)", quote(&b[..60]), b.len()),
        Frame::Bulk(b) => quote(b),
        Frame::Null => "(nil)".into(),
        Frame::Array(v) => format!("[{}]", list(v)),
        Frame::Set(v) => format!("~{{{}}}", list(v)),
        Frame::Push(v) => format!(">[{}]", list(v)),
        Frame::Map(v) => format!(
            "%{{{}}}",
            v.iter()
                .map(|(k, x)| format!("{} => {}", show_frame(k), show_frame(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// The class a TTL reply compares as.
fn ttl_class(v: i64) -> &'static str {
    match v {
        -2 => "-2 (missing)",
        -1 => "-1 (no expiry)",
        0 => "0",
        v if v > 0 => "positive",
        _ => "other negative",
    }
}

/// Compares one command's replies; `Some(reason)` when they differ.
fn compare(s: &mut Session, cmd: &Command) -> Option<String> {
    if cmd.check == Check::Scan || cmd.check == Check::ZScan {
        return compare_scan(s, cmd);
    }
    let (r, f) = s.both(&cmd.args);
    let (Ok((rf, rb)), Ok((ff, fb))) = (&r, &f) else {
        return Some(format!("redis: {}\nferrokv: {}", show(&r), show(&f)));
    };
    // The same bytes always agree (`+QUEUED` for any command in MULTI).
    if rb == fb {
        return None;
    }
    let differ = |why: &str| {
        Some(format!(
            "{why}\nredis:   {}\nferrokv: {}",
            show_frame(rf),
            show_frame(ff)
        ))
    };
    // Errors always compare exactly, whatever the command's check.
    let any_error = matches!(rf, Frame::Error(_)) || matches!(ff, Frame::Error(_));
    match cmd.check {
        _ if any_error || cmd.check == Check::Exact => {
            if rb != fb {
                let why = if rf == ff {
                    format!(
                        "same frame, different bytes: redis {:?} ferrokv {:?}",
                        String::from_utf8_lossy(rb),
                        String::from_utf8_lossy(fb)
                    )
                } else {
                    "replies differ".to_string()
                };
                return differ(&why);
            }
            None
        }
        Check::MemoryUsage => match (rf, ff) {
            (Frame::Integer(a), Frame::Integer(b)) if *a > 0 && *b > 0 => None,
            (a, b) if a == b && !matches!(a, Frame::Integer(_)) => None,
            _ => differ("MEMORY USAGE classes differ"),
        },
        Check::TtlClass => match (rf, ff) {
            (Frame::Integer(a), Frame::Integer(b)) if ttl_class(*a) == ttl_class(*b) => None,
            _ => differ("TTL classes differ"),
        },
        Check::ExpireTime { ms } => {
            let epoch = if ms {
                ABSOLUTE_EPOCH_S * 1000
            } else {
                ABSOLUTE_EPOCH_S
            };
            match (rf, ff) {
                (Frame::Integer(a), Frame::Integer(b)) if *a >= epoch || *b >= epoch => {
                    (a != b).then(|| differ("absolute expiry times differ").unwrap())
                }
                (Frame::Integer(a), Frame::Integer(b)) if ttl_class(*a) == ttl_class(*b) => None,
                _ => differ("expiry time classes differ"),
            }
        }
        Check::SortedPairs | Check::ScanOnce { .. } | Check::RandomShape => {
            compare_collection(rf, ff, cmd.check).and_then(|why| differ(&why))
        }
        Check::Sorted => match (rf, ff) {
            (Frame::Array(a), Frame::Array(b)) | (Frame::Set(a), Frame::Set(b)) => {
                let key = |f: &Frame| format!("{f:?}");
                let mut a = a.clone();
                let mut b = b.clone();
                a.sort_by_key(key);
                b.sort_by_key(key);
                (a != b).then(|| differ("sorted replies differ").unwrap())
            }
            _ => differ("replies differ"),
        },
        Check::RandomKey => match (rf, ff) {
            (Frame::Null, Frame::Null) => None,
            (Frame::Bulk(a), Frame::Bulk(b)) => {
                // Each server's pick must exist on the other one too.
                for k in [a, b] {
                    let (r, f) = s.both(&[b"EXISTS".as_slice(), k]);
                    let one = |x: &Reply| matches!(x, Ok((Frame::Integer(1), _)));
                    if !one(&r) || !one(&f) {
                        return differ(&format!("RANDOMKEY {} not on both", quote(k)));
                    }
                }
                None
            }
            _ => differ("RANDOMKEY: null on one side only"),
        },
        Check::RandomMembers => {
            let shape = |f: &Frame| match f {
                Frame::Array(a) => format!("array of {}", a.len()),
                Frame::Null => "null".to_string(),
                Frame::Bulk(_) => "bulk".to_string(),
                other => format!("{other:?}"),
            };
            (shape(rf) != shape(ff)).then(|| differ("random replies differ in shape").unwrap())
        }
        Check::Exact | Check::Scan | Check::ZScan => unreachable!(),
    }
}

/// Compares collection replies whose order (or picks) differ by design;
/// `Some(reason)` when they differ in what they may not.
fn compare_collection(rf: &Frame, ff: &Frame, check: Check) -> Option<String> {
    let key = |f: &Frame| format!("{f:?}");
    let sorted_pairs = |v: &[Frame]| {
        let mut p: Vec<String> = v.chunks(2).map(|c| format!("{c:?}")).collect();
        p.sort();
        p
    };
    match (check, rf, ff) {
        (Check::SortedPairs, Frame::Array(a), Frame::Array(b)) => {
            (sorted_pairs(a) != sorted_pairs(b)).then(|| "sorted pairs differ".into())
        }
        (Check::SortedPairs, Frame::Map(a), Frame::Map(b)) => {
            let mut a: Vec<String> = a.iter().map(|p| format!("{p:?}")).collect();
            let mut b: Vec<String> = b.iter().map(|p| format!("{p:?}")).collect();
            a.sort();
            b.sort();
            (a != b).then(|| "sorted map entries differ".into())
        }
        (Check::ScanOnce { pairs }, Frame::Array(a), Frame::Array(b)) => {
            let ([Frame::Bulk(ca), Frame::Array(ia)], [Frame::Bulk(cb), Frame::Array(ib)]) =
                (a.as_slice(), b.as_slice())
            else {
                return Some("not SCAN replies".into());
            };
            if ca != b"0" || cb != b"0" {
                return Some("a scan of a small collection did not finish in one call".into());
            }
            let same = if pairs {
                sorted_pairs(ia) == sorted_pairs(ib)
            } else {
                let mut x = ia.clone();
                let mut y = ib.clone();
                x.sort_by_key(key);
                y.sort_by_key(key);
                x == y
            };
            (!same).then(|| "scanned elements differ".into())
        }
        (Check::RandomShape, Frame::Array(a), Frame::Array(b)) => (a.len() != b.len()
            || a.iter()
                .zip(b)
                .any(|(x, y)| std::mem::discriminant(x) != std::mem::discriminant(y)))
        .then(|| "random picks differ in shape".into()),
        (Check::RandomShape, Frame::Bulk(_), Frame::Bulk(_)) => None,
        (_, a, b) if a == b => None,
        _ => Some("replies differ".into()),
    }
}

/// Runs a `SCAN 0 ...` (or `ZSCAN key 0 ...`, whose member/score pairs
/// come back joined) to completion on one server.
fn scan_all(raw: &mut Raw, cmd: &Command) -> Result<Vec<Vec<u8>>, String> {
    let zscan = cmd.check == Check::ZScan;
    let cursor_at = if zscan { 2 } else { 1 };
    let mut args = cmd.args.clone();
    let mut keys = Vec::new();
    for _ in 0..100_000 {
        let (f, _) = raw.try_cmd_bytes(&args)?;
        let Frame::Array(parts) = &f else {
            return Err(format!("not an array: {}", show_frame(&f)));
        };
        let [Frame::Bulk(cursor), Frame::Array(batch)] = parts.as_slice() else {
            return Err(format!("bad SCAN reply: {}", show_frame(&f)));
        };
        let mut items = Vec::new();
        for k in batch {
            match k {
                Frame::Bulk(k) => items.push(k.clone()),
                other => return Err(format!("bad SCAN key: {}", show_frame(other))),
            }
        }
        if zscan {
            for pair in items.chunks(2) {
                keys.push([pair[0].as_slice(), b" score=", pair[1].as_slice()].concat());
            }
        } else {
            keys.extend(items);
        }
        if cursor == b"0" {
            keys.sort();
            keys.dedup();
            return Ok(keys);
        }
        args[cursor_at] = cursor.clone();
    }
    Err("SCAN did not finish in 100000 calls".into())
}

fn compare_scan(s: &mut Session, cmd: &Command) -> Option<String> {
    // Errors (bad cursor, bad option) compare exactly from the first call.
    let (r, f) = s.both(&cmd.args);
    let is_err = |x: &Reply| matches!(x, Ok((Frame::Error(_), _)));
    if is_err(&r) || is_err(&f) {
        let same = matches!((&r, &f), (Ok((_, a)), Ok((_, b))) if a == b);
        return (!same).then(|| format!("redis:   {}\nferrokv: {}", show(&r), show(&f)));
    }
    let r = scan_all(&mut s.redis[s.conn], cmd);
    let f = scan_all(&mut s.ferrokv[s.conn], cmd);
    if r == f {
        return None;
    }
    let list = |x: &Result<Vec<Vec<u8>>, String>| match x {
        Ok(v) => v.iter().map(|k| quote(k)).collect::<Vec<_>>().join(" "),
        Err(e) => format!("<{e}>"),
    };
    Some(format!(
        "SCAN unions differ\nredis:   {}\nferrokv: {}",
        list(&r),
        list(&f)
    ))
}

/// Lists the keys whose `DEBUG DIGEST-VALUE` differs (or that exist on one
/// side only), with their values, to point at the culprit.
fn digest_details(s: &mut Session) -> String {
    s.conn = 0;
    let mut out = String::new();
    for db in 0..DBS_USED {
        let db_s = db.to_string();
        let _ = s.both(&["SELECT", &db_s]);
        let (r, f) = s.both(&["KEYS", "*"]);
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for reply in [&r, &f] {
            if let Ok((Frame::Array(v), _)) = reply {
                keys.extend(v.iter().filter_map(|k| k.as_bytes().map(<[u8]>::to_vec)));
            }
        }
        keys.sort();
        keys.dedup();
        for k in keys {
            let (rd, fd) = s.both(&[b"DEBUG".as_slice(), b"DIGEST-VALUE", &k]);
            if rd.as_ref().map(|x| &x.1) == fd.as_ref().map(|x| &x.1) {
                continue;
            }
            let (rv, fv) = s.both(&[b"GET".as_slice(), &k]);
            let (rt, ft) = s.both(&[b"PTTL".as_slice(), &k]);
            out += &format!(
                "  db {db} key {}: redis value {} pttl {} / ferrokv value {} pttl {}\n",
                quote(&k),
                show(&rv),
                show(&rt),
                show(&fv),
                show(&ft)
            );
        }
    }
    out
}

/// Runs a case on fresh connections and flushed servers.
fn run(servers: &mut Servers, case: &Case) -> Result<(), Mismatch> {
    let result = run_once(servers, case);
    if result.is_err() {
        servers.settle();
    }
    result
}

fn run_once(servers: &mut Servers, case: &Case) -> Result<(), Mismatch> {
    servers.revive();
    let mut s = Session::open(servers, case.resp3);
    let (r, f) = s.both(&["FLUSHALL"]);
    assert!(
        matches!(
            (&r, &f),
            (Ok((Frame::Simple(_), _)), Ok((Frame::Simple(_), _)))
        ),
        "FLUSHALL: redis {} ferrokv {}",
        show(&r),
        show(&f)
    );
    // The script cache and the function libraries outlive FLUSHALL: empty
    // them, so EVALSHA and FCALL depend on this sequence alone. Only for a
    // sequence that scripts: nothing else reads them, and Redis 7.4.1
    // exits after about 4,000 FUNCTION FLUSHes ("Failed creating the lua
    // jemalloc tcache", a bug of that version).
    let scripts = case.commands.iter().any(|c| {
        let name = c.args[0].to_ascii_uppercase();
        [&b"EVAL"[..], b"FCALL", b"FUNCTION", b"SCRIPT"]
            .iter()
            .any(|p| name.starts_with(p))
    });
    let flushes: &[[&str; 2]] = if generator::scripts_enabled() && scripts {
        &[["SCRIPT", "FLUSH"], ["FUNCTION", "FLUSH"]]
    } else {
        &[]
    };
    for flush in flushes {
        let (r, f) = s.both(flush);
        if show(&r) != show(&f) {
            return Err(Mismatch {
                index: 0,
                what: format!(
                    "{} before the sequence differs: redis {} ferrokv {}",
                    flush.join(" "),
                    show(&r),
                    show(&f)
                ),
            });
        }
    }
    // A sequence may move the zset listpack threshold: start each at the default.
    let _ = s.both(&["CONFIG", "SET", "zset-max-listpack-entries", "128"]);
    for (index, cmd) in case.commands.iter().enumerate() {
        s.conn = cmd.conn;
        if let Some(what) = compare(&mut s, cmd) {
            return Err(Mismatch { index, what });
        }
    }
    // A transaction left open would queue the DIGEST: close it (DISCARD
    // outside MULTI is the same error on both).
    for conn in 0..2 {
        s.conn = conn;
        let (r, f) = s.both(&["DISCARD"]);
        if show(&r) != show(&f) {
            return Err(Mismatch {
                index: case.commands.len(),
                what: format!(
                    "closing DISCARD on conn {conn} differs: redis {} ferrokv {}",
                    show(&r),
                    show(&f)
                ),
            });
        }
    }
    s.conn = 0;
    let (r, f) = s.both(&["DEBUG", "DIGEST"]);
    match (&r, &f) {
        (Ok((_, a)), Ok((_, b))) if a == b => Ok(()),
        _ => Err(Mismatch {
            index: case.commands.len(),
            what: format!(
                "DEBUG DIGEST differs: redis {} ferrokv {}\n{}",
                show(&r),
                show(&f),
                digest_details(&mut s)
            ),
        }),
    }
}

/// Drops commands one at a time while the case still differs (anywhere):
/// a greedy shrink, bounded so a failure report stays quick.
fn shrink(servers: &mut Servers, case: &Case, first: &Mismatch) -> (Case, Mismatch) {
    let mut best = case.clone();
    best.commands.truncate(first.index + 1);
    let mut best_mismatch = Mismatch {
        index: first.index,
        what: first.what.clone(),
    };
    let mut i = 0;
    let mut budget = 400;
    while i < best.commands.len() && budget > 0 {
        budget -= 1;
        let mut candidate = best.clone();
        candidate.commands.remove(i);
        match run(servers, &candidate) {
            Err(m) => {
                candidate.commands.truncate(m.index + 1);
                best = candidate;
                best_mismatch = m;
            }
            Ok(()) => i += 1,
        }
    }
    (best, best_mismatch)
}

fn report(case: &Case, m: &Mismatch, shrunk: &(Case, Mismatch)) -> String {
    let cmd = case
        .commands
        .get(m.index)
        .map(|c| c.display())
        .unwrap_or_else(|| "(after the sequence) DEBUG DIGEST".into());
    let mut out = format!(
        "seed {} ({}), command #{}: {}\n{}\nreproduce: FERROKV_DIFF_SEED={} FERROKV_DIFF_CASES=1 cargo test -p ferrokv-server --test differential\n",
        case.seed,
        if case.resp3 { "RESP3" } else { "RESP2" },
        m.index,
        cmd,
        m.what,
        case.seed
    );
    let (small, sm) = shrunk;
    out += &format!(
        "shrunk to {} commands ({}), differing at #{}:\n",
        small.commands.len(),
        if small.resp3 {
            "HELLO 3 first"
        } else {
            "RESP2"
        },
        sm.index
    );
    for c in &small.commands {
        out += &format!("  {}\n", c.display());
    }
    out += &format!("  => {}\n", sm.what.replace('\n', "\n     "));
    out
}

/// Runs `cases` generated sequences (`FERROKV_DIFF_*` knobs; `generator`
/// makes each case's generator from its seed) on both servers, shrinking
/// and reporting each that differs, up to `FERROKV_DIFF_MAX_FAILURES`.
fn sweep(servers: &mut Servers, oracle: &str, default_cases: u64, generator: fn(u64) -> Generator) {
    let base: u64 = env_or("FERROKV_DIFF_SEED", DEFAULT_SEED);
    let cases: u64 = env_or("FERROKV_DIFF_CASES", default_cases);
    let len: usize = env_or("FERROKV_DIFF_LEN", DEFAULT_LEN);
    let max_failures: usize = env_or("FERROKV_DIFF_MAX_FAILURES", 1);
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut commands = 0;
    for i in 0..cases {
        let seed = base.wrapping_add(i);
        let case = Case::generate(generator(seed), seed, len);
        commands += case.commands.len();
        if let Err(m) = run(servers, &case) {
            let shrunk = shrink(servers, &case, &m);
            let text = report(&case, &m, &shrunk);
            eprintln!("MISMATCH {text}");
            failures.push(text);
            if failures.len() >= max_failures {
                break;
            }
        }
    }
    eprintln!(
        "differential ({oracle}): {cases} sequences, {commands} commands, {} failing, {:.1}s",
        failures.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} sequence(s) differ from {oracle}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn string_and_generic_commands_match_redis_7_0() {
    let mut servers = Servers::start();
    {
        let mut r = servers.redis.raw();
        let info = r.cmd(&["INFO", "server"]);
        let text = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).to_string();
        assert!(
            text.contains("redis_version:7.0."),
            "the oracle must be Redis 7.0: {text}"
        );
    }
    sweep(&mut servers, "Redis 7.0", DEFAULT_CASES, Generator::new);
}

/// The forms Redis 7.2 and 7.4 added without changing 7.0's
/// (`differential/newer_gen.rs`), compared with Redis 7.4.1 from
/// `../shared/peers/` (skipped where this clone has none); the same knobs,
/// a tenth of the cases by default.
#[test]
fn newer_forms_match_redis_7_4() {
    let Some(mut servers) = Servers::start_beside(common::Peer::Redis74) else {
        return;
    };
    sweep(
        &mut servers,
        "Redis 7.4",
        DEFAULT_CASES / 10,
        Generator::newer,
    );
}
