//! The command fuzzer's harness: arbitrary bytes become a sequence of
//! commands for an in-process server ([`crate::embedded`]), run through
//! the real dispatch, with three kinds of failure, each a `panic!` so that
//! libFuzzer (`fuzz/fuzz_targets/server_commands.rs`) and the replay test
//! (`crates/server/tests/fuzz_replay.rs`) report it the same way:
//!
//! - a panic inside the server;
//! - a command over its time budget ([`Options::step_budget`]): a wall
//!   clock per command, the command and the loop turn's work after it.
//!   Wall time rather than an instruction count because the commands run
//!   real code we cannot instrument (allocator, fsync), and the class of
//!   bug we look for — super-linear work on a client-chosen argument —
//!   shows up as orders of magnitude, not percents; the fuzz target uses
//!   1 s in its release build, the test a looser budget for debug code;
//! - a broken invariant: every reply parses as RESP with the
//!   `ferrokv-resp` frame decoder and every command answers with exactly
//!   one reply (RESP2, replies on, outside pub/sub subscriptions, not a
//!   monitor's own commands); after the sequence, for every database,
//!   a full SCAN, `KEYS *`, `DBSIZE` and `INFO keyspace` agree, each key's
//!   `TYPE` matches its `OBJECT ENCODING`, and `DEBUG DIGEST` is the same
//!   after `DEBUG RELOAD` (a snapshot saved and loaded back).
//!
//! # How bytes become commands
//! Structured, so that the fuzzer reaches deep code quickly instead of
//! learning the protocol: the first byte chooses the configuration (a
//! small `maxmemory` and its policy, tiny encoding limits so conversions
//! happen, keyspace events). Then each command is: a byte for the
//! connection (three of them, so pub/sub, WATCH and CLIENT KILL have
//! someone to act on), a byte for the command (every row of the real
//! command table, subcommands as `CONFIG GET`), a byte for the argument
//! count (half the time what the arity asks), and a byte per argument that
//! picks from a small dictionary: five key names (so commands collide on
//! the same keys), numbers at the edges (`0`, `-1`, `LONG_MIN`,
//! `LONG_MAX`, `inf`, `nan`, `1e308`, ...), the option keywords harvested
//! from the table's syntax strings and the config parameter names, glob
//! patterns (pathological ones included), long strings up to 16 KB, or
//! raw bytes from the input.
//!
//! # What the harness refuses to run
//! Only what would leave the process or wait by design, never a class of
//! input: `DEBUG SLEEP` (a hang on purpose), replication commands that
//! connect out or wait for replicas (`REPLICAOF host port`, `SYNC`,
//! `PSYNC`, `REPLCONF`, `WAIT n>0`, `FAILOVER`), `CLIENT PAUSE` (it holds
//! the other connections' commands for as long as asked, by design; its
//! rules have their own suite, `tests/client_pause.rs`), and `CONFIG SET` of parameters that
//! name files or sockets (`dir`, `dbfilename`, `logfile`, ...), that slow
//! the server on purpose (`rdb-key-save-delay`, `key-load-delay`) or that
//! lift the argument size limit the harness sets (`proto-max-bulk-len`,
//! 1 MB here, so a string cannot be grown to 512 MB on request — that is
//! memory by configuration, not a bug). Blocking commands run: without a
//! socket a client cannot block, so they answer as their timeout would.

use crate::config::{Config, ProtectedAction};
use crate::embedded::EmbeddedServer;
use crate::server::Server;
use ferrokv_resp::frame::FrameError;
use ferrokv_resp::Frame;
use rand::SeedableRng;
use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Duration;

/// How a run is bounded.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// No command may take longer (the command and its turn's work).
    pub step_budget: Duration,
    /// Commands decoded from one input at most.
    pub max_commands: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            step_budget: Duration::from_secs(1),
            max_commands: 256,
        }
    }
}

/// Connections a program uses.
pub const CONNECTIONS: usize = 3;

/// Key names: few, so that commands meet on the same keys (`{a}b` shares
/// `a`'s hash tag; the empty name is a valid key).
const KEYS: &[&str] = &["a", "b", "c", "{a}b", ""];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "5",
    "10",
    "100",
    "1000",
    "-100",
    "65535",
    "2147483647",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775806",
    "-9223372036854775807",
    "18446744073709551615",
    "536870911",
    "536870912",
    "1048576",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e308",
    "-1e308",
    "1e400",
    "5e-324",
    "1.5",
    "0.1",
    "-0.5",
    "3.0e-5",
    "0x10",
    "00",
    "-0",
    "1.",
    " 1",
    "1 ",
];

const PATTERNS: &[&str] = &[
    "*",
    "?",
    "a*",
    "*a*",
    "[a-z]*",
    "[^a]",
    "\\*",
    "[",
    "[a-",
    "[]]",
    "\\",
    "h?llo",
    "*:*",
    "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
    "*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?b",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

/// Short values that are not keys: members, fields, config values.
const VALUES: &[&str] = &[
    "v",
    "1",
    "2",
    "x",
    "hello",
    " ",
    "\0",
    "\u{e9}",
    "yes",
    "no",
    "KEA",
    "Ex",
    "allkeys-lru",
    "allkeys-lfu",
    "volatile-ttl",
    "noeviction",
];

/// What long strings are made of (repeated up to the chosen length).
const FILLS: &[&str] = &["a", "1", "*", "a*", "\0", "ab", "?", "[a"];

/// Every command of the table as the words that name it (`["config",
/// "get"]`), and the dictionary of keywords.
struct Vocabulary {
    commands: Vec<Vec<&'static str>>,
    /// Arity of each command, as the table row counts it (names included).
    arities: Vec<i32>,
    keywords: Vec<String>,
}

fn vocabulary() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| {
        let table = crate::commands::CommandTable::new();
        let mut commands = Vec::new();
        let mut arities = Vec::new();
        let mut keywords: Vec<String> = Vec::new();
        for spec in table.top_level() {
            commands.push(vec![spec.name]);
            arities.push(spec.arity);
            harvest(spec.syntax, &mut keywords);
            for sub in spec.subcommands {
                let word = sub.name.split('|').nth(1).unwrap_or(sub.name);
                commands.push(vec![spec.name, word]);
                arities.push(sub.arity);
                harvest(sub.syntax, &mut keywords);
            }
        }
        for (name, _) in Config::default().get_matching(b"*") {
            keywords.push(name.to_string());
        }
        Vocabulary {
            commands,
            arities,
            keywords,
        }
    })
}

/// The option keywords of a syntax string (`[NX|XX] [GET]`: `NX`, `XX`,
/// `GET`): its upper-case words.
fn harvest(syntax: &str, keywords: &mut Vec<String>) {
    for w in syntax.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')) {
        let upper = w.len() >= 2
            && w.chars()
                .all(|c| c.is_ascii_uppercase() || c == '-' || c == '_');
        if upper && !keywords.iter().any(|k| k == w) {
            keywords.push(w.to_string());
        }
    }
}

/// The server configuration a program chose.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// `maxmemory` this far above the memory in use at the start.
    pub maxmemory_headroom: Option<usize>,
    pub maxmemory_policy: &'static str,
    /// Encoding limits of 2-4 elements, so listpacks and intsets convert.
    pub small_encodings: bool,
    /// `notify-keyspace-events KEA`.
    pub keyspace_events: bool,
}

/// One command of a program.
#[derive(Clone, Debug)]
pub struct Step {
    /// Which of the [`CONNECTIONS`] runs it.
    pub connection: usize,
    pub argv: Vec<Vec<u8>>,
}

/// What an input decodes to.
#[derive(Clone, Debug)]
pub struct Program {
    pub setup: Setup,
    pub steps: Vec<Step>,
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let end = (self.pos + n).min(self.data.len());
        let s = &self.data[self.pos..end];
        self.pos = end;
        s
    }
}

const POLICIES: &[&str] = &[
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "noeviction",
];

/// Decodes an input into its program (a pure function of the bytes).
pub fn decode(data: &[u8], max_commands: usize) -> Program {
    let voc = vocabulary();
    let mut cur = Cursor { data, pos: 0 };
    let flags = cur.byte().unwrap_or(0);
    let setup = Setup {
        maxmemory_headroom: (flags & 3 == 3).then(|| (64 * 1024) << ((flags >> 2) & 7)),
        maxmemory_policy: POLICIES[((flags >> 2) & 7) as usize],
        small_encodings: flags & 0x20 != 0,
        keyspace_events: flags & 0x40 != 0,
    };
    let mut steps = Vec::new();
    while steps.len() < max_commands {
        let (Some(conn), Some(which)) = (cur.byte(), cur.byte()) else {
            break;
        };
        let i = which as usize % voc.commands.len();
        let mut argv: Vec<Vec<u8>> = voc.commands[i]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect();
        let count = cur.byte().unwrap_or(0);
        let named = argv.len() as i32;
        let wanted = if count & 0x80 == 0 {
            // What the arity asks (plus a few for variadic commands).
            let arity = voc.arities[i];
            if arity >= 0 {
                (arity - named).max(0) as usize
            } else {
                (-arity - named).max(0) as usize + (count & 7) as usize
            }
        } else {
            (count & 15) as usize
        };
        for _ in 0..wanted {
            let Some(t) = cur.byte() else { break };
            argv.push(argument(t, &mut cur, voc));
        }
        steps.push(Step {
            connection: conn as usize % CONNECTIONS,
            argv,
        });
    }
    Program { setup, steps }
}

fn argument(t: u8, cur: &mut Cursor, voc: &Vocabulary) -> Vec<u8> {
    let pick = |d: &[&str], b: u8| d[b as usize % d.len()].as_bytes().to_vec();
    let (patterns, fills) = (PATTERNS, FILLS);
    match t {
        0..=79 => pick(KEYS, t),
        80..=127 => pick(NUMBERS, t),
        128..=175 => {
            let b = cur.byte().unwrap_or(t);
            voc.keywords[b as usize % voc.keywords.len()]
                .as_bytes()
                .to_vec()
        }
        176..=191 => pick(patterns, t),
        192..=215 => pick(VALUES, t),
        216..=231 => {
            let size = cur.byte().unwrap_or(0);
            let len = 1usize << (size % 15);
            let fill = fills[(size >> 4) as usize % fills.len()].as_bytes();
            fill.iter().copied().cycle().take(len).collect()
        }
        232..=255 => {
            let n = cur.byte().unwrap_or(0) as usize % 32;
            cur.bytes(n).to_vec()
        }
    }
}

/// Whether the harness refuses to run a command (see the module docs).
pub fn refused(argv: &[Vec<u8>]) -> bool {
    let word = |i: usize| argv.get(i).map(|a| a.to_ascii_lowercase());
    let name = word(0).unwrap_or_default();
    match name.as_slice() {
        b"debug" => matches!(
            word(1).as_deref(),
            Some(b"sleep" | b"segfault" | b"panic" | b"restart" | b"crash-and-recover" | b"oom")
        ),
        b"replicaof" | b"slaveof" => {
            !(word(1).as_deref() == Some(b"no") && word(2).as_deref() == Some(b"one"))
        }
        b"sync" | b"psync" | b"replconf" | b"failover" => true,
        b"client" => word(1).as_deref() == Some(b"pause"),
        b"wait" => argv
            .get(1)
            .and_then(|a| ferrokv_resp::parse_i64(a))
            .is_none_or(|n| n > 0),
        b"config" if word(1).as_deref() == Some(b"set") => argv
            .iter()
            .skip(2)
            .step_by(2)
            .any(|p| UNSAFE_CONFIGS.contains(&p.to_ascii_lowercase().as_slice())),
        _ => false,
    }
}

const UNSAFE_CONFIGS: &[&[u8]] = &[
    b"dir",
    b"dbfilename",
    b"appenddirname",
    b"appendfilename",
    b"logfile",
    b"pidfile",
    b"unixsocket",
    b"port",
    b"bind",
    b"metrics-port",
    b"metrics-bind",
    b"replicaof",
    b"slaveof",
    b"rdb-key-save-delay",
    b"key-load-delay",
    b"proto-max-bulk-len",
];

/// A command in `redis-cli` form, for failure messages.
pub fn show(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if a.len() > 64 {
                let head: String = s.chars().take(16).collect();
                format!("<{} bytes {head:?}...>", a.len())
            } else if !a.is_empty() && a.iter().all(|c| c.is_ascii_graphic()) {
                s.into_owned()
            } else {
                format!("{s:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A program as text, one command a line (`conn: COMMAND args`).
pub fn describe(p: &Program) -> String {
    let mut s = format!("{:?}\n", p.setup);
    for st in &p.steps {
        let mark = if refused(&st.argv) { " (refused)" } else { "" };
        s.push_str(&format!("{}: {}{mark}\n", st.connection, show(&st.argv)));
    }
    s
}

/// Splits a reply buffer into RESP frames. Attributes (`|`, which the
/// frame decoder does not know) are taken apart here: only `DEBUG
/// PROTOCOL attrib` sends them, before a reply.
pub fn frames(buf: &[u8]) -> Result<Vec<Frame>, String> {
    let mut pos = 0;
    let mut out = Vec::new();
    let one = |pos: &mut usize| -> Result<Frame, String> {
        match Frame::decode(&buf[*pos..]) {
            Ok((f, n)) => {
                *pos += n;
                Ok(f)
            }
            Err(FrameError::Incomplete) => Err(format!("reply cut short at byte {pos}")),
            Err(FrameError::Invalid(e)) => Err(format!("invalid RESP at byte {pos}: {e}")),
        }
    };
    while pos < buf.len() {
        if buf[pos] == b'|' {
            let end = buf[pos..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("attribute header cut short")?;
            let n: usize = std::str::from_utf8(&buf[pos + 1..pos + end])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or("bad attribute length")?;
            pos += end + 2;
            for _ in 0..2 * n {
                one(&mut pos)?;
            }
            continue;
        }
        out.push(one(&mut pos)?);
    }
    Ok(out)
}

/// The (un)subscriptions: one reply per channel.
fn per_channel(name: &[u8]) -> bool {
    [
        "subscribe",
        "psubscribe",
        "ssubscribe",
        "unsubscribe",
        "punsubscribe",
        "sunsubscribe",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
}

/// Whether a command answers with exactly one reply (replies on, RESP2, so
/// no push can join it): all but the (un)subscriptions, `CLIENT REPLY`,
/// which silences its own, and an EXEC whose queue holds a subscription —
/// Redis 7.0 too answers `MULTI`, `SUBSCRIBE x y`, `EXEC` with an array
/// of one element followed by the second channel's reply. Nor does any
/// command of a monitor (`MONITOR`): its line follows its reply, and a
/// second MONITOR answers nothing, as in Redis.
fn answers_once(emb: &EmbeddedServer, token: usize, argv: &[Vec<u8>]) -> bool {
    if emb.client(token).is_some_and(|c| c.monitor) {
        return false;
    }
    let name = argv[0].as_slice();
    if name.eq_ignore_ascii_case(b"exec") {
        let specs = &emb.srv.commands.specs;
        return !emb
            .client(token)
            .and_then(|c| c.multi.as_ref())
            .is_some_and(|tx| {
                tx.queued
                    .iter()
                    .any(|q| per_channel(specs[q.idx].name.as_bytes()))
            });
    }
    let client_reply = name.eq_ignore_ascii_case(b"client")
        && argv
            .get(1)
            .is_some_and(|a| a.eq_ignore_ascii_case(b"reply"));
    !per_channel(name) && !client_reply
}

/// The command running now, for the watchdog: when it started, how long
/// it may take before the process is aborted, and what it is.
type Running = Option<(std::time::Instant, Duration, Vec<Vec<u8>>)>;

/// The step budget is checked when a command returns; one that never
/// returns (exponential work) would hang the run instead of failing it.
/// The watchdog thread aborts the process, naming the command, once one
/// has run for three times its budget (at least five seconds more), so
/// the replay test fails instead of hanging CI, and libFuzzer records the
/// input as a crash even without `-timeout`.
fn watchdog() -> &'static std::sync::Mutex<Running> {
    static RUNNING: OnceLock<&'static std::sync::Mutex<Running>> = OnceLock::new();
    RUNNING.get_or_init(|| {
        let running: &'static std::sync::Mutex<Running> =
            Box::leak(Box::new(std::sync::Mutex::new(None)));
        std::thread::Builder::new()
            .name("fuzz-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(250));
                let r = running.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((t0, limit, argv)) = r.as_ref() {
                    if t0.elapsed() > *limit {
                        // Straight to the process's stderr: `eprintln!` in a
                        // test is captured, and lost with the abort.
                        use std::io::Write;
                        let _ = writeln!(
                            std::io::stderr(),
                            "step budget exceeded: `{}` still running after {:?}; aborting",
                            show(argv),
                            t0.elapsed()
                        );
                        std::process::abort();
                    }
                }
            })
            .expect("spawn the fuzz watchdog");
        running
    })
}

/// A fresh directory for one run's files, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        // Memory-backed when the system has it: `SAVE` and `DEBUG RELOAD`
        // wait for fsync, which on a disk would be most of a run's time.
        let shm = std::path::Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let p = base.join(format!(
            "ferrokv-command-fuzz-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create the fuzz run's directory");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The configuration of a program's server.
fn config_for(setup: &Setup, dir: &std::path::Path) -> Config {
    let mut c = Config {
        dir: dir.to_string_lossy().into_owned(),
        save_rules: Vec::new(),
        appendonly: false,
        enable_debug_command: ProtectedAction::Yes,
        proto_max_bulk_len: 1024 * 1024,
        ..Config::default()
    };
    let mut set = |k: &str, v: &str| c.set(k, v).expect("harness config value");
    set("maxmemory-policy", setup.maxmemory_policy);
    if setup.small_encodings {
        for (k, v) in [
            ("hash-max-listpack-entries", "2"),
            ("hash-max-listpack-value", "4"),
            ("set-max-intset-entries", "2"),
            ("zset-max-listpack-entries", "2"),
            ("zset-max-listpack-value", "4"),
            ("list-max-listpack-size", "2"),
        ] {
            set(k, v);
        }
    }
    if setup.keyspace_events {
        set("notify-keyspace-events", "KEA");
    }
    if let Some(h) = setup.maxmemory_headroom {
        c.maxmemory = (crate::alloc::used_memory() + h) as u64;
    }
    c
}

/// Runs one input: decodes it, runs its commands, checks the invariants.
/// Panics on any failure, with the program's text.
pub fn run(data: &[u8], opts: &Options) {
    let program = decode(data, opts.max_commands);
    run_program(&program, opts);
}

/// Runs a decoded program (see [`run`]).
pub fn run_program(program: &Program, opts: &Options) {
    let dir = TempDir::new();
    let mut srv = Server::new(config_for(&program.setup, &dir.0));
    srv.rng = rand::rngs::SmallRng::seed_from_u64(0);
    let mut emb = EmbeddedServer::new(srv);
    let mut conns: Vec<usize> = (0..CONNECTIONS).map(|_| emb.connect()).collect();
    let fail = |what: String| -> ! { panic!("{what}\nprogram:\n{}", describe(program)) };
    for (n, step) in program.steps.iter().enumerate() {
        if refused(&step.argv) {
            continue;
        }
        let token = conns[step.connection];
        let one_reply = emb.client(token).is_some_and(|c| {
            c.reply_mode == crate::net::client::ReplyMode::On
                && c.out.proto == ferrokv_resp::Protocol::Resp2
        }) && answers_once(&emb, token, &step.argv);
        let limit = (opts.step_budget * 3).max(opts.step_budget + Duration::from_secs(5));
        *watchdog().lock().unwrap_or_else(|e| e.into_inner()) =
            Some((std::time::Instant::now(), limit, step.argv.clone()));
        let ex = emb.execute(token, &step.argv);
        *watchdog().lock().unwrap_or_else(|e| e.into_inner()) = None;
        if ex.elapsed > opts.step_budget {
            fail(format!(
                "step budget exceeded: command {n} `{}` took {:?} (budget {:?})",
                show(&step.argv),
                ex.elapsed,
                opts.step_budget
            ));
        }
        match frames(&ex.reply) {
            Err(e) => fail(format!(
                "command {n} `{}`: {e}: {:?}",
                show(&step.argv),
                String::from_utf8_lossy(&ex.reply[..ex.reply.len().min(512)])
            )),
            // A SHUTDOWN that succeeds answers nothing: the server exits.
            Ok(f) if one_reply && f.len() != 1 && !(ex.shutdown && f.is_empty()) => fail(format!(
                "command {n} `{}` answered {} replies: {:?}",
                show(&step.argv),
                f.len(),
                String::from_utf8_lossy(&ex.reply[..ex.reply.len().min(512)])
            )),
            Ok(_) => {}
        }
        for (i, &t) in conns.iter().enumerate() {
            let out = emb.take_output(t);
            if let Err(e) = frames(&out) {
                fail(format!(
                    "after command {n} `{}`, connection {i}'s output: {e}",
                    show(&step.argv)
                ));
            }
        }
        for t in conns.iter_mut() {
            if !emb.is_connected(*t) {
                *t = emb.connect();
            }
        }
        if n % 32 == 31 {
            emb.cron();
        }
    }
    if let Err(e) = check_invariants(&mut emb) {
        fail(format!("invariant broken after the program: {e}"));
    }
}

/// The checks after a program (see the module docs). An `Err` names the
/// broken invariant.
pub fn check_invariants(emb: &mut EmbeddedServer) -> Result<(), String> {
    // The checks must see a still keyspace: nothing evicted under them,
    // no save half done, and every key that will have expired by the time
    // a reloaded snapshot is read gone now (ten seconds ahead).
    emb.srv.config.maxmemory = 0;
    emb.finish_background_save();
    let ahead = crate::server::unix_ms() + 10_000;
    for db in 0..emb.srv.keyspace.dbs.len() {
        let keys: Vec<Vec<u8>> = emb.srv.keyspace.dbs[db]
            .iter()
            .map(|e| e.key().to_vec())
            .collect();
        for k in keys {
            emb.srv.exists(db, &k, ahead);
        }
    }
    let check = emb.connect();
    if let Some(Some(c)) = emb.srv.clients.get_mut(check) {
        c.authenticated = true;
    }
    let cmd = |emb: &mut EmbeddedServer, argv: &[&[u8]]| call(emb, check, argv);
    let mut per_db_keys = Vec::new();
    for db in 0..emb.srv.keyspace.dbs.len() {
        let dbs = db.to_string();
        cmd(emb, &[b"SELECT", dbs.as_bytes()])?;
        let mut scanned = HashSet::new();
        let mut cursor = b"0".to_vec();
        for round in 0.. {
            if round > 1_000_000 {
                return Err(format!("db{db}: SCAN did not come back to cursor 0"));
            }
            let Frame::Array(mut parts) = cmd(emb, &[b"SCAN", &cursor, b"COUNT", b"7"])? else {
                return Err("SCAN answered no array".into());
            };
            let (Some(Frame::Array(keys)), Some(Frame::Bulk(next))) = (parts.pop(), parts.pop())
            else {
                return Err("SCAN answered no cursor and keys".into());
            };
            for k in keys {
                scanned.insert(text(k)?);
            }
            if next == b"0" {
                break;
            }
            cursor = next;
        }
        let dbsize = int(cmd(emb, &[b"DBSIZE"])?)?;
        if dbsize as usize != scanned.len() {
            return Err(format!(
                "db{db}: DBSIZE is {dbsize} but a full SCAN returned {} keys",
                scanned.len()
            ));
        }
        let Frame::Array(all) = cmd(emb, &[b"KEYS", b"*"])? else {
            return Err("KEYS answered no array".into());
        };
        let all: HashSet<Vec<u8>> = all.into_iter().map(text).collect::<Result<_, _>>()?;
        if all != scanned {
            return Err(format!(
                "db{db}: KEYS * and a full SCAN disagree ({} and {} keys)",
                all.len(),
                scanned.len()
            ));
        }
        let mut expires = 0;
        for k in &scanned {
            if int(cmd(emb, &[b"PTTL", k])?)? >= 0 {
                expires += 1;
            }
        }
        let info = String::from_utf8_lossy(&text(cmd(emb, &[b"INFO", b"keyspace"])?)?).into_owned();
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("db{db}:")))
            .map(|l| l.trim().to_string());
        let expected =
            (dbsize > 0).then(|| format!("db{db}:keys={dbsize},expires={expires},avg_ttl="));
        let agrees = match (&line, &expected) {
            (None, None) => true,
            (Some(l), Some(e)) => l.starts_with(e.as_str()),
            _ => false,
        };
        if !agrees {
            return Err(format!(
                "db{db}: INFO keyspace says {line:?}, the keys say {expected:?}"
            ));
        }
        check_encodings(emb, check, db, &scanned)?;
        per_db_keys.push(scanned);
    }
    let before = text(cmd(emb, &[b"DEBUG", b"DIGEST"])?)?;
    cmd(emb, &[b"DEBUG", b"RELOAD"])?;
    let after = text(cmd(emb, &[b"DEBUG", b"DIGEST"])?)?;
    if before != after {
        return Err(format!(
            "DEBUG DIGEST is {} before DEBUG RELOAD and {} after",
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after)
        ));
    }
    for (db, keys) in per_db_keys.iter().enumerate() {
        if emb.srv.keyspace.dbs[db].len() != keys.len() {
            return Err(format!(
                "db{db}: {} keys before DEBUG RELOAD, {} after",
                keys.len(),
                emb.srv.keyspace.dbs[db].len()
            ));
        }
        check_encodings(emb, check, db, keys)?;
    }
    emb.close(check);
    Ok(())
}

/// One command of the checks: its one reply, which is no error.
fn call(emb: &mut EmbeddedServer, check: usize, argv: &[&[u8]]) -> Result<Frame, String> {
    let ex = emb.execute(check, argv);
    let mut f = frames(&ex.reply)?;
    let text = show(&argv.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
    if f.len() != 1 {
        return Err(format!("`{text}` answered {} frames", f.len()));
    }
    match f.pop() {
        Some(Frame::Error(e)) => Err(format!(
            "`{text}` answered -{}",
            String::from_utf8_lossy(&e)
        )),
        Some(f) => Ok(f),
        None => Err(format!("`{text}` answered nothing")),
    }
}

fn int(f: Frame) -> Result<i64, String> {
    match f {
        Frame::Integer(i) => Ok(i),
        other => Err(format!("expected an integer, got {other:?}")),
    }
}

fn text(f: Frame) -> Result<Vec<u8>, String> {
    match f {
        Frame::Simple(s) | Frame::Bulk(s) | Frame::Verbatim(_, s) => Ok(s),
        other => Err(format!("expected a string, got {other:?}")),
    }
}

/// Each key's `TYPE` is the family of its `OBJECT ENCODING`.
fn check_encodings(
    emb: &mut EmbeddedServer,
    check: usize,
    db: usize,
    keys: &HashSet<Vec<u8>>,
) -> Result<(), String> {
    let dbs = db.to_string();
    emb.execute(check, &[b"SELECT".as_slice(), dbs.as_bytes()]);
    for k in keys {
        let t = emb
            .execute(check, &[b"TYPE".as_slice(), k.as_slice()])
            .reply;
        let e = emb
            .execute(check, &[b"OBJECT".as_slice(), b"ENCODING", k.as_slice()])
            .reply;
        let ok = matches!(
            (t.as_slice(), e.as_slice()),
            (
                b"+string\r\n",
                b"$3\r\nint\r\n" | b"$6\r\nembstr\r\n" | b"$3\r\nraw\r\n"
            ) | (b"+list\r\n", b"$8\r\nlistpack\r\n" | b"$9\r\nquicklist\r\n")
                | (
                    b"+set\r\n",
                    b"$6\r\nintset\r\n" | b"$8\r\nlistpack\r\n" | b"$9\r\nhashtable\r\n"
                )
                | (b"+zset\r\n", b"$8\r\nlistpack\r\n" | b"$8\r\nskiplist\r\n")
                | (b"+hash\r\n", b"$8\r\nlistpack\r\n" | b"$9\r\nhashtable\r\n")
                | (b"+stream\r\n", b"$6\r\nstream\r\n")
        );
        if !ok {
            return Err(format!(
                "db{db} key {}: TYPE answered {:?} and OBJECT ENCODING {:?}",
                show(std::slice::from_ref(k)),
                String::from_utf8_lossy(&t),
                String::from_utf8_lossy(&e)
            ));
        }
    }
    Ok(())
}
