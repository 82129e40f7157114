//! Every command of the server's own command table, run with extreme
//! arguments under a time and memory budget.
//!
//! The list of commands comes from the server (`COMMAND` for names, arity,
//! flags and key positions; `COMMAND DOCS` for the argument trees), so a
//! command added to the table later is covered without touching this file.
//! For each command and each subcommand a fixed number of argument lists
//! is generated from a seed (the seed mixes in the command's name, so one
//! command's lists do not change when another command is added):
//!
//! - two lists in three follow the docs' tree: key arguments get an
//!   existing key of every type (small and 10 000-element ones), tokens
//!   appear as the docs spell them, the values come from [`Pool`];
//! - the rest follow only the arity and key positions, so argument counts
//!   and orders the docs do not foresee are tried too.
//!
//! Each list runs on a fresh connection (per-connection state — SELECT,
//! MULTI, subscribed mode, RESP3, CLIENT REPLY — stays there) and must get a
//! reply, any reply, errors included, within [`REPLY_BOUND`]; meanwhile a
//! victim connection must keep getting PONGs, and the process's RSS must
//! stay under [`PER_COMMAND_RSS_GROWTH`] per command and
//! [`TOTAL_RSS_GROWTH`] overall. A failure names the command and its
//! arguments (truncated); the server is restarted when it stopped answering
//! or died, and the sweep goes on, so one run reports every failure.
//!
//! A monitor connection (`MONITOR`) reads the whole sweep: every command's
//! extreme and binary arguments also go through the monitor's line
//! formatting, and every line it gets must be one well-formed simple
//! string of printable ASCII (`well_formed_monitor_line`); `MONITOR` itself
//! is in the table like any command (a fresh connection answers `+OK`).
//!
//! What is not run as generated, and why:
//! - `SHUTDOWN`: ends the process by design.
//! - `DEBUG`: only the subcommands in [`DEBUG_SUBCOMMANDS`] (or a value of
//!   the pool, which names none), never `SLEEP` (stops the server for as
//!   long as asked, by design), `SEGFAULT`, `PANIC`, `ASSERT`, `OOM`,
//!   `RESTART`, `CRASH-AND-RECOVER` (crash by design), `POPULATE` (creates
//!   as many keys as asked, by design), `PAUSE-CRON` (stops the cron:
//!   expiry, timeouts, signals, by design).
//! - Timeouts (arguments named `timeout`, `BLOCK milliseconds`, the timeout
//!   of `CLIENT PAUSE` and `WAIT`) are never 0 or huge: a small value or an
//!   invalid one (`-1`, `nan`, `abc`, `LONG_MIN`), because a pause or a wait
//!   as long as asked is the documented behaviour. Commands flagged
//!   `blocking` may stay silent (they block, as asked) for [`SILENT_WAIT`].
//!   `CLIENT PAUSE` is followed by `CLIENT UNPAUSE`.
//! - The host of `REPLICAOF`/`SLAVEOF`/`MIGRATE`/`CLUSTER MEET` is always
//!   `127.0.0.1` (no DNS lookup of a generated name, no address beyond
//!   loopback), and `REPLICAOF NO ONE` follows.
//! - `CLIENT REPLY OFF|SKIP` and `REPLCONF` (from a non-replica) may stay
//!   silent by design; `SYNC`/`PSYNC` reply with a stream, so their first
//!   line is the reply.
//! - Numbers that are legal and make Redis itself do work as large as asked
//!   (`SETBIT key 2147483648`, a 256 MB string; `SRANDMEMBER key
//!   -4294967296`, four billion elements) are not in the pool: its huge
//!   values are beyond every limit (`2^32`, `2^53`, `LONG_MAX`, overflows).

use super::harness::*;
use crate::common::ServerProcess;
use ferrokv_resp::Frame;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a blocking command may stay silent before it is taken as
/// blocked-as-asked (its connection is then closed, which unblocks it).
pub const SILENT_WAIT: Duration = Duration::from_millis(400);

/// RSS growth allowed across one command: room for a 1 MB argument, its
/// reply, and Redis-sanctioned transient work such as an LCS matrix.
pub const PER_COMMAND_RSS_GROWTH: u64 = 256 << 20;

/// RSS growth allowed over the whole sweep (the dataset is reset whenever
/// `used_memory` grows by more than [`DATASET_RESET`]).
pub const TOTAL_RSS_GROWTH: u64 = 768 << 20;

/// When the dataset grew this much, it is flushed and prepared again.
const DATASET_RESET: u64 = 128 << 20;

/// The watch kills the server past this growth (protects the machine).
const HARD_CEILING: u64 = 2 << 30;

/// The server is restarted at most this many times before the sweep stops.
const MAX_RESTARTS: usize = 8;

pub const DEBUG_SUBCOMMANDS: &[&str] = &[
    "DIGEST",
    "DIGEST-VALUE",
    "OBJECT",
    "PROTOCOL",
    "SET-ACTIVE-EXPIRE",
    "CHANGE-REPL-ID",
    "LOG",
    "RELOAD",
    "HELP",
];

/// DEBUG subcommands that stop, crash or fill the server by design.
const DEBUG_DENIED: &[&str] = &[
    "SLEEP",
    "SEGFAULT",
    "PANIC",
    "ASSERT",
    "OOM",
    "RESTART",
    "CRASH-AND-RECOVER",
    "POPULATE",
    "PAUSE-CRON",
];

/// 40 `a`s: with `a*a*...*b` the worst subject of a backtracking matcher.
pub fn pattern_subject() -> String {
    "a".repeat(40)
}

/// `a*a*...*a*b` with 20 stars.
pub fn evil_pattern() -> String {
    format!("{}b", "a*".repeat(20))
}

/// The keys every command is given, by type; the big ones hold 10 000
/// elements.
pub const KEYS: &[(&str, &str)] = &[
    ("hostile:str", "string"),
    ("hostile:bigstr", "string"),
    ("hostile:hash", "hash"),
    ("hostile:bighash", "hash"),
    ("hostile:list", "list"),
    ("hostile:biglist", "list"),
    ("hostile:set", "set"),
    ("hostile:bigset", "set"),
    ("hostile:zset", "zset"),
    ("hostile:bigzset", "zset"),
    ("hostile:stream", "stream"),
    ("hostile:bigstream", "stream"),
];

const MISSING_KEY: &str = "hostile:missing";
const BIG: usize = 10_000;

/// The commands that build key `k` from nothing.
fn creation(k: &str) -> Vec<Vec<Vec<u8>>> {
    let a40 = pattern_subject();
    let w = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let big = |cmd: &str, each: &dyn Fn(usize) -> Vec<String>| {
        let mut v = vec![cmd.as_bytes().to_vec(), k.as_bytes().to_vec()];
        for i in 0..BIG {
            v.extend(each(i).into_iter().map(String::into_bytes));
        }
        v
    };
    let body = match k {
        "hostile:str" => w(&["SET", k, "value"]),
        "hostile:bigstr" => vec![b"SET".to_vec(), k.as_bytes().to_vec(), vec![b'x'; 1 << 20]],
        "hostile:hash" => w(&["HSET", k, "f", "v", &a40, "1", "field", "value"]),
        "hostile:bighash" => big("HSET", &|i| vec![format!("f{i}"), format!("v{i}")]),
        "hostile:list" => w(&["RPUSH", k, "a", "b", "c", &a40]),
        "hostile:biglist" => big("RPUSH", &|i| vec![format!("e{i}")]),
        "hostile:set" => w(&["SADD", k, "a", "b", "c", &a40]),
        "hostile:bigset" => big("SADD", &|i| vec![format!("m{i}")]),
        "hostile:zset" => w(&["ZADD", k, "1", "a", "2", "b", "3", &a40]),
        "hostile:bigzset" => big("ZADD", &|i| vec![i.to_string(), format!("m{i}")]),
        "hostile:stream" => w(&["XADD", k, "1-1", "f", "v", &a40, "1"]),
        // One XADD per entry: 10 000 entries in 100 nodes.
        "hostile:bigstream" => {
            let mut v = vec![w(&["DEL", k])];
            for i in 1..=BIG {
                v.push(w(&["XADD", k, &format!("{i}-0"), "f", &format!("v{i}")]));
            }
            return v;
        }
        _ => unreachable!("{k}"),
    };
    vec![w(&["DEL", k]), body]
}

/// One argument of `COMMAND DOCS`.
#[derive(Debug, Clone)]
pub struct ArgDoc {
    pub name: String,
    pub kind: String,
    pub token: Option<String>,
    pub optional: bool,
    pub multiple: bool,
    pub children: Vec<ArgDoc>,
}

/// One command or subcommand of the table.
#[derive(Debug, Clone)]
pub struct CommandEntry {
    /// `["config", "get"]` for a subcommand.
    pub words: Vec<String>,
    pub arity: i64,
    pub flags: Vec<String>,
    pub first_key: i64,
    pub last_key: i64,
    pub step: i64,
    pub docs: Vec<ArgDoc>,
    /// The docs' group (`string`, `hash`, `sorted-set`...).
    pub group: String,
}

impl CommandEntry {
    pub fn name(&self) -> String {
        self.words.join("|")
    }
    fn has_flag(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x.eq_ignore_ascii_case(f))
    }
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Simple(b) | Frame::Bulk(b) | Frame::Verbatim(_, b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn int(f: &Frame) -> i64 {
    match f {
        Frame::Integer(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn items(f: &Frame) -> &[Frame] {
    match f {
        Frame::Array(v) | Frame::Set(v) => v,
        _ => &[],
    }
}

/// A RESP2 map (a flat array of pairs) as pairs.
fn pairs(f: &Frame) -> Vec<(String, &Frame)> {
    match f {
        Frame::Map(m) => m.iter().map(|(k, v)| (text(k), v)).collect(),
        _ => items(f)
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (text(&c[0]), &c[1]))
            .collect(),
    }
}

fn parse_arg(f: &Frame) -> ArgDoc {
    let mut a = ArgDoc {
        name: String::new(),
        kind: String::new(),
        token: None,
        optional: false,
        multiple: false,
        children: vec![],
    };
    for (k, v) in pairs(f) {
        match k.as_str() {
            "name" => a.name = text(v),
            "type" => a.kind = text(v),
            "token" => a.token = Some(text(v)),
            "flags" => {
                for fl in items(v) {
                    match text(fl).as_str() {
                        "optional" => a.optional = true,
                        "multiple" => a.multiple = true,
                        _ => {}
                    }
                }
            }
            "arguments" => a.children = items(v).iter().map(parse_arg).collect(),
            _ => {}
        }
    }
    a
}

type Docs = std::collections::HashMap<String, (Vec<ArgDoc>, String)>;

fn collect_docs(reply: &Frame, prefix: &[String], out: &mut Docs) {
    for (name, doc) in pairs(reply) {
        // Redis names a subcommand `config|get`; a bare `get` is taken
        // to be under `prefix` too.
        let words: Vec<String> = if name.contains('|') || prefix.is_empty() {
            name.split('|').map(str::to_lowercase).collect()
        } else {
            let mut w = prefix.to_vec();
            w.push(name.to_lowercase());
            w
        };
        let entry = out.entry(words.join("|")).or_default();
        for (k, v) in pairs(doc) {
            match k.as_str() {
                "arguments" => entry.0 = items(v).iter().map(parse_arg).collect(),
                "group" => entry.1 = text(v),
                _ => {}
            }
        }
        for (k, v) in pairs(doc) {
            if k == "subcommands" {
                collect_docs(v, &words, out);
            }
        }
    }
}

fn parse_entry(f: &Frame, parent: Option<&str>, docs: &mut Docs, out: &mut Vec<CommandEntry>) {
    let v = items(f);
    let full = text(&v[0]).to_lowercase();
    let words: Vec<String> = match parent {
        Some(p) if !full.contains('|') => vec![p.to_string(), full.clone()],
        _ => full.split('|').map(str::to_string).collect(),
    };
    let name = words.join("|");
    out.push(CommandEntry {
        arity: int(&v[1]),
        flags: items(&v[2]).iter().map(text).collect(),
        first_key: int(&v[3]),
        last_key: int(&v[4]),
        step: int(&v[5]),
        docs: docs.get(&name).map(|d| d.0.clone()).unwrap_or_default(),
        group: docs.get(&name).map(|d| d.1.clone()).unwrap_or_default(),
        words: words.clone(),
    });
    if let Some(subs) = v.get(9) {
        for s in items(subs) {
            parse_entry(s, Some(&words[0]), docs, out);
        }
    }
}

/// The server's command table, subcommands included, sorted by name.
pub fn fetch_table(conn: &mut Conn) -> Vec<CommandEntry> {
    let docs_reply = conn.call(&["COMMAND", "DOCS"], "COMMAND DOCS");
    let mut docs = std::collections::HashMap::new();
    collect_docs(&docs_reply, &[], &mut docs);
    let reply = conn.call(&["COMMAND"], "COMMAND");
    let mut out = Vec::new();
    for e in items(&reply) {
        parse_entry(e, None, &mut docs, &mut out);
    }
    out.sort_by_key(|e| e.name());
    out
}

/// SplitMix64: a seeded generator that is the same on every platform and
/// every version of the `rand` crate, so a seed in a failure message
/// reproduces the same argument lists.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The values arguments are drawn from.
pub struct Pool {
    numbers: Vec<Vec<u8>>,
    patterns: Vec<Vec<u8>>,
    strings: Vec<Vec<u8>>,
    huge: Arc<Vec<u8>>,
    /// Every token of every command's docs.
    all_tokens: Vec<String>,
}

impl Pool {
    pub fn new(table: &[CommandEntry]) -> Pool {
        let b = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let mut all_tokens = Vec::new();
        for e in table {
            tokens_of(&e.docs, &mut all_tokens);
        }
        all_tokens.sort();
        all_tokens.dedup();
        let mut patterns = b(&[
            "*", "?", "[", "[^", "[a-", "\\", "[\\", "*[*", "[]]", "[a-z", "[z-a]", "*\\",
        ]);
        patterns.push(evil_pattern().into_bytes());
        patterns.push(format!("{}!", "*?".repeat(20)).into_bytes());
        patterns.push(format!("{}b", "*a".repeat(20)).into_bytes());
        patterns.push(vec![b'*'; 65_536]);
        Pool {
            numbers: b(&[
                "-9223372036854775808",
                "9223372036854775807",
                "-9223372036854775807",
                "9223372036854775808",
                "-9223372036854775809",
                "18446744073709551616",
                "0",
                "-1",
                "1",
                "2",
                "3",
                "10",
                "100",
                "10000",
                "-2",
                "-100",
                "1.5",
                "4294967296",
                "9007199254740993",
                "inf",
                "-inf",
                "+inf",
                "nan",
                "-nan",
                "1e308",
                "-1e308",
                "1e400",
                "4.9e-324",
                "0.1",
                "-0",
                "(1",
                "(-inf",
                "[a",
                "-",
                "+",
            ]),
            patterns,
            strings: {
                // Members and fields the prepared keys hold, so that
                // commands also take their found-it paths.
                let mut v = b(&[
                    "", "abc", " 1", "0x10", "\u{0}", "\r\n", "é", "#", "$", "-1.5e3", "a", "b",
                    "f", "field", "v", "e1", "m1", "f1", "m9999",
                ]);
                v.push(pattern_subject().into_bytes());
                v
            },
            huge: Arc::new(vec![b'x'; 1 << 20]),
            all_tokens,
        }
    }

    /// Any value: numbers most often, then patterns, this command's tokens,
    /// the 1 MB string, short odd strings, and (when `foreign`) another
    /// command's tokens.
    fn any(&self, rng: &mut Rng, own: &[String], foreign: bool) -> Vec<u8> {
        let roll = rng.below(100);
        match roll {
            0..=39 => rng.pick(&self.numbers).clone(),
            40..=54 => rng.pick(&self.patterns).clone(),
            55..=74 if !own.is_empty() => rng.pick(own).clone().into_bytes(),
            75..=81 => self.huge.to_vec(),
            82..=89 if foreign && !self.all_tokens.is_empty() => {
                rng.pick(&self.all_tokens).clone().into_bytes()
            }
            _ => rng.pick(&self.strings).clone(),
        }
    }

    fn number(&self, rng: &mut Rng, own: &[String]) -> Vec<u8> {
        if rng.chance(85) {
            rng.pick(&self.numbers).clone()
        } else {
            self.any(rng, own, false)
        }
    }

    fn pattern(&self, rng: &mut Rng, own: &[String]) -> Vec<u8> {
        if rng.chance(80) {
            rng.pick(&self.patterns).clone()
        } else {
            self.any(rng, own, false)
        }
    }
}

fn tokens_of(args: &[ArgDoc], out: &mut Vec<String>) {
    for a in args {
        if let Some(t) = &a.token {
            out.push(t.clone());
        }
        tokens_of(&a.children, out);
    }
}

/// A key for a command of `group`: most often one of the type the group
/// works on (small or big), else any type, the missing key, or the pattern
/// subject.
fn key(rng: &mut Rng, group: &str) -> Vec<u8> {
    let ty = match group {
        "string" | "bitmap" | "hyperloglog" => "string",
        "hash" => "hash",
        "list" => "list",
        "set" => "set",
        "sorted-set" | "geo" => "zset",
        "stream" => "stream",
        _ => "",
    };
    let typed: Vec<&str> = KEYS.iter().filter(|k| k.1 == ty).map(|k| k.0).collect();
    if !typed.is_empty() && rng.chance(70) {
        rng.pick(&typed).as_bytes().to_vec()
    } else if rng.chance(8) {
        MISSING_KEY.as_bytes().to_vec()
    } else if rng.chance(4) {
        pattern_subject().into_bytes()
    } else {
        rng.pick(KEYS).0.as_bytes().to_vec()
    }
}

/// A timeout that ends soon or is refused.
fn timeout(rng: &mut Rng, seconds: bool) -> Vec<u8> {
    let small = if seconds { "0.1" } else { "100" };
    let v = *rng.pick(&[
        small,
        small,
        small,
        "-1",
        "nan",
        "abc",
        "-9223372036854775808",
    ]);
    v.as_bytes().to_vec()
}

fn is_timeout(a: &ArgDoc) -> bool {
    a.name == "timeout"
        || a.token
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("BLOCK"))
}

struct Gen<'a> {
    pool: &'a Pool,
    group: String,
    own: Vec<String>,
    blocking: bool,
    out: Vec<Vec<u8>>,
}

impl Gen<'_> {
    fn value(&mut self, rng: &mut Rng, a: &ArgDoc) -> Vec<u8> {
        if is_timeout(a) {
            let seconds = self.blocking && a.token.is_none();
            return timeout(rng, seconds);
        }
        match a.kind.as_str() {
            "key" => key(rng, &self.group),
            "integer" | "double" | "unix-time" => self.pool.number(rng, &self.own),
            "pattern" => self.pool.pattern(rng, &self.own),
            _ => self.pool.any(rng, &self.own, false),
        }
    }

    fn one(&mut self, rng: &mut Rng, a: &ArgDoc) {
        if let Some(t) = &a.token {
            self.out.push(t.clone().into_bytes());
        }
        match a.kind.as_str() {
            "pure-token" => {}
            "oneof" if !a.children.is_empty() => {
                let c = rng.pick(&a.children).clone();
                self.arg(rng, &c);
            }
            "block" => {
                for c in a.children.clone() {
                    self.arg(rng, &c);
                }
            }
            _ => {
                let v = self.value(rng, a);
                self.out.push(v);
            }
        }
    }

    fn arg(&mut self, rng: &mut Rng, a: &ArgDoc) {
        if a.optional && rng.chance(50) {
            return;
        }
        let times = if a.multiple { 1 + rng.below(3) } else { 1 };
        for _ in 0..times {
            self.one(rng, a);
        }
    }
}

/// The `case`-th argument list of `e` (the command's words not included).
pub fn generate(e: &CommandEntry, pool: &Pool, seed: u64, case: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed ^ fnv(&e.name()) ^ case.wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut own = Vec::new();
    tokens_of(&e.docs, &mut own);
    let mut gen = Gen {
        pool,
        group: e.group.clone(),
        own,
        blocking: e.has_flag("blocking"),
        out: vec![],
    };
    let words = e.words.len() as i64;
    if !e.docs.is_empty() && case % 3 != 2 {
        for a in e.docs.clone() {
            gen.arg(&mut rng, &a);
        }
    } else {
        // Arity only: the exact count, or for a variadic command its
        // minimum plus up to four more.
        let min = e.arity.unsigned_abs() as i64 - words;
        let n = if e.arity < 0 {
            min + rng.below(5) as i64
        } else {
            min
        };
        // Another command's tokens could spell a config name (`TIMEOUT`,
        // `SAVE`): not for CONFIG SET.
        let foreign = e.name() != "config|set";
        let n = n.max(0);
        let argc = words + n;
        let last = if e.last_key < 0 {
            argc + e.last_key
        } else {
            e.last_key
        };
        for i in 0..n {
            // Positions in COMMAND's numbering: argv indices, the
            // command's words first.
            let pos = words + i;
            let is_key = e.first_key > 0
                && pos >= e.first_key
                && pos <= last
                && (pos - e.first_key) % e.step.max(1) == 0;
            let v = if is_key {
                key(&mut rng, &e.group)
            } else {
                pool.any(&mut rng, &gen.own, foreign)
            };
            gen.out.push(v);
        }
    }
    let mut args = gen.out;
    fix_up(e, &mut args, &mut rng);
    args
}

/// The replacements listed in the module docs.
fn fix_up(e: &CommandEntry, args: &mut Vec<Vec<u8>>, rng: &mut Rng) {
    let set = |args: &mut Vec<Vec<u8>>, i: usize, v: Vec<u8>| {
        if i < args.len() {
            args[i] = v;
        }
    };
    match e.name().as_str() {
        "client|pause" => set(args, 0, timeout(rng, false)),
        "wait" => set(args, 1, timeout(rng, false)),
        "replicaof" | "slaveof" if !(args.len() == 2 && args[0].eq_ignore_ascii_case(b"NO")) => {
            set(args, 0, b"127.0.0.1".to_vec())
        }
        // The bus connects only to loopback.
        "cluster|meet" => set(args, 0, b"127.0.0.1".to_vec()),
        "migrate" => {
            set(args, 0, b"127.0.0.1".to_vec());
            set(args, 4, timeout(rng, false));
        }
        "debug" => {
            if args.is_empty() || rng.chance(70) {
                let sub = rng.pick(DEBUG_SUBCOMMANDS).as_bytes().to_vec();
                if args.is_empty() {
                    args.push(sub);
                } else {
                    args[0] = sub;
                }
            }
            if DEBUG_DENIED
                .iter()
                .any(|d| args[0].eq_ignore_ascii_case(d.as_bytes()))
            {
                args[0] = b"HELP".to_vec();
            }
        }
        _ => {}
    }
}

/// A command line for failure messages: each argument cut to 40 bytes.
pub fn describe(words: &[String], args: &[Vec<u8>]) -> String {
    let mut s = words.join(" ").to_uppercase();
    for a in args {
        s.push(' ');
        if a.len() > 40 {
            let _ = write!(
                s,
                "{}...({} bytes)",
                String::from_utf8_lossy(&a[..40]),
                a.len()
            );
        } else {
            let _ = write!(s, "{:?}", String::from_utf8_lossy(a));
        }
    }
    s
}

/// Whether `e` may legitimately send nothing back.
fn may_stay_silent(e: &CommandEntry, args: &[Vec<u8>]) -> bool {
    let first = args.first().map(|a| a.to_ascii_uppercase());
    e.has_flag("blocking")
        || e.name() == "replconf"
        || (e.name() == "client|reply" && matches!(first.as_deref(), Some(b"OFF") | Some(b"SKIP")))
}

pub struct Failure {
    pub command: String,
    pub what: String,
}

/// Statistics of a sweep, printed at its end.
#[derive(Default)]
pub struct Stats {
    pub commands: usize,
    pub runs: usize,
    pub silent: usize,
    pub worst_reply: (Duration, String),
    pub worst_rss_step: (u64, String),
    pub restarts: usize,
    pub victim_reconnects: u32,
}

/// The server, its victim and its memory watch; rebuilt on a restart.
pub struct Session {
    pub server: ServerProcess,
    victim: Option<Victim>,
    /// A monitor reading the whole sweep (every command's arguments also
    /// go through MONITOR's formatting), and what earlier ones saw.
    monitor: Option<MonitorWatch>,
    monitor_seen: MonitorLog,
    watch: Option<RssWatch>,
    base_rss: u64,
    base_used: u64,
    reconnects: u32,
    /// The server runs in cluster mode: before each run's checks, it is
    /// made to serve all 16384 slots again (the sweep's `CLUSTER DELSLOTS`,
    /// `FLUSHSLOTS` and `RESET` take them away).
    cluster: bool,
}

impl Session {
    pub fn new(server: ServerProcess) -> Session {
        let mut s = Session {
            server,
            victim: None,
            monitor: None,
            monitor_seen: MonitorLog::default(),
            watch: None,
            base_rss: 0,
            base_used: 0,
            reconnects: 0,
            cluster: false,
        };
        let info = text(&Conn::open(&s.server).call(&["INFO", "cluster"], "INFO cluster"));
        s.cluster = info.contains("cluster_enabled:1");
        s.prepare();
        s
    }

    fn prepare(&mut self) {
        self.victim = None;
        self.watch = None;
        let mut c = Conn::open(&self.server);
        c.call(&["FLUSHALL"], "FLUSHALL before the sweep");
        if self.cluster {
            claim_all_slots(&mut c).unwrap_or_else(|e| panic!("{e}"));
        }
        let s = c.call(&["SET", &pattern_subject(), "1"], "SET the pattern subject");
        assert_eq!(s, Frame::Simple(b"OK".to_vec()));
        for (k, _) in KEYS {
            for cmd in creation(k) {
                c.call(&cmd, &format!("creating {k}"));
            }
        }
        self.base_used = used_memory(&mut c);
        self.watch = Some(RssWatch::new(&self.server, HARD_CEILING));
        self.base_rss = self.watch.as_ref().unwrap().start;
        self.victim = Some(Victim::start(&self.server));
        self.monitor = Some(MonitorWatch::start(&self.server));
    }

    /// What the sweep's monitors saw: lines, reconnections, malformed lines.
    pub fn monitor_report(&mut self) -> MonitorLog {
        self.collect_monitor();
        self.monitor_seen.clone()
    }

    fn collect_monitor(&mut self) {
        if let Some(m) = self.monitor.take() {
            let log = m.finish();
            self.monitor_seen.lines += log.lines;
            self.monitor_seen.reconnects += log.reconnects;
            self.monitor_seen.bad.extend(log.bad);
        }
    }

    /// Puts back the keys a command changed the type of, emptied or
    /// shrank, and resets the dataset when it grew past [`DATASET_RESET`].
    fn restore(&mut self) -> Result<(), String> {
        let mut c = Conn::open_port(self.server.port).map_err(|e| e.to_string())?;
        if self.cluster {
            claim_all_slots(&mut c)?;
        }
        let mut req = Vec::new();
        for (k, _) in KEYS {
            req.extend(Frame::command(&["TYPE", k]));
            let len = match *k {
                "hostile:bigstr" => "STRLEN",
                "hostile:bighash" => "HLEN",
                "hostile:biglist" => "LLEN",
                "hostile:bigset" => "SCARD",
                "hostile:bigzset" => "ZCARD",
                "hostile:bigstream" => "XLEN",
                _ => "EXISTS",
            };
            req.extend(Frame::command(&[len, k]));
        }
        req.extend(Frame::command(&["EXISTS", &pattern_subject()]));
        c.send(&req).map_err(|e| e.to_string())?;
        let mut redo = Vec::new();
        for (k, ty) in KEYS {
            let t = match c.read_frame_within(REPLY_BOUND) {
                Outcome::Frame(f) => f,
                o => return Err(format!("restore: TYPE {k}: {}", show(&o))),
            };
            let n = match c.read_frame_within(REPLY_BOUND) {
                Outcome::Frame(Frame::Integer(n)) => n,
                // WRONGTYPE: the type check below redoes it.
                Outcome::Frame(_) => 0,
                o => return Err(format!("restore: length of {k}: {}", show(&o))),
            };
            let want = if k.contains(":big") {
                if *ty == "string" {
                    1 << 19
                } else {
                    BIG as i64 / 2
                }
            } else {
                1
            };
            if t != Frame::Simple(ty.as_bytes().to_vec()) || n < want {
                redo.push(*k);
            }
        }
        let subject = c.read_frame_within(REPLY_BOUND);
        if !matches!(subject, Outcome::Frame(Frame::Integer(1))) {
            c.call(
                &["SET", &pattern_subject(), "1"],
                "restore the pattern subject",
            );
        }
        if used_memory(&mut c) > self.base_used + DATASET_RESET {
            c.call(&["FLUSHALL"], "restore: FLUSHALL");
            c.call(
                &["SET", &pattern_subject(), "1"],
                "restore the pattern subject",
            );
            redo = KEYS.iter().map(|(k, _)| *k).collect();
        }
        for k in redo {
            for cmd in creation(k) {
                c.send_cmd(&cmd).map_err(|e| e.to_string())?;
                match c.read_frame_within(REPLY_BOUND * 5) {
                    Outcome::Frame(Frame::Error(e)) => {
                        return Err(format!("restore {k}: {}", String::from_utf8_lossy(&e)))
                    }
                    Outcome::Frame(_) => {}
                    o => return Err(format!("restore {k}: {}", show(&o))),
                }
            }
        }
        Ok(())
    }

    fn count_reconnects(&mut self) {
        self.reconnects += self.victim.as_ref().map_or(0, |v| v.reconnects());
    }

    fn victim_failures(&self) -> usize {
        self.victim.as_ref().map_or(0, |v| v.failures().len())
    }

    /// Whether a fresh connection gets PONG within the bound.
    fn answers(&mut self) -> bool {
        if !self.server.alive() {
            return false;
        }
        let Ok(mut c) = Conn::open_port(self.server.port) else {
            return false;
        };
        let _ = c.send_cmd(&["PING"]);
        matches!(c.read_frame_within(REPLY_BOUND), Outcome::Frame(Frame::Simple(p)) if p == b"PONG")
    }

    fn restart(&mut self) {
        self.count_reconnects();
        self.collect_monitor();
        self.victim = None;
        self.watch = None;
        self.server.kill_and_restart();
        self.prepare();
    }
}

/// Makes a cluster-mode server serve every slot, with its cluster up: the
/// slots it lost are added back; if another node holds some, or adding
/// fails, the node is emptied and reset (`FLUSHALL`, `CLUSTER RESET
/// HARD`) and takes them all.
fn claim_all_slots(c: &mut Conn) -> Result<(), String> {
    let field = |c: &mut Conn, f: &str| {
        let info = text(&c.call(&["CLUSTER", "INFO"], "CLUSTER INFO"));
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{f}:")))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let me = text(&c.call(&["CLUSTER", "MYID"], "CLUSTER MYID"));
    let nodes = text(&c.call(&["CLUSTER", "NODES"], "CLUSTER NODES"));
    let mine = nodes
        .lines()
        .find(|l| l.starts_with(&me))
        .unwrap_or_default()
        .to_string();
    let is_master = mine.split(' ').nth(2).is_some_and(|f| f.contains("master"));
    if is_master && field(c, "cluster_state") == "ok" && field(c, "cluster_slots_ok") == "16384" {
        return Ok(());
    }
    let mut owned = vec![false; 16384];
    for r in mine.split(' ').skip(8).filter(|r| !r.starts_with('[')) {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            owned[a..=b.min(16383)].iter_mut().for_each(|o| *o = true);
        }
    }
    let mut added = is_master
        && field(c, "cluster_slots_assigned") == owned.iter().filter(|&&o| o).count().to_string();
    if added {
        let mut s = 0;
        while s < 16384 {
            if owned[s] {
                s += 1;
                continue;
            }
            let start = s;
            while s < 16384 && !owned[s] {
                s += 1;
            }
            let r = c.call(
                &[
                    "CLUSTER",
                    "ADDSLOTSRANGE",
                    &start.to_string(),
                    &(s - 1).to_string(),
                ],
                "CLUSTER ADDSLOTSRANGE",
            );
            if r != Frame::Simple(b"OK".to_vec()) {
                added = false;
                break;
            }
        }
    }
    eprintln!(
        "hostile sweep: the node had lost slots; {}",
        if added {
            "added back"
        } else {
            "reset and given all"
        }
    );
    if !added {
        c.call(&["FLUSHALL"], "FLUSHALL before CLUSTER RESET");
        let r = c.call(&["CLUSTER", "RESET", "HARD"], "CLUSTER RESET HARD");
        if r != Frame::Simple(b"OK".to_vec()) {
            return Err(format!("CLUSTER RESET HARD: {r:?}"));
        }
        let r = c.call(
            &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"],
            "CLUSTER ADDSLOTSRANGE",
        );
        if r != Frame::Simple(b"OK".to_vec()) {
            return Err(format!("CLUSTER ADDSLOTSRANGE 0 16383: {r:?}"));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(c, "cluster_state") != "ok" {
        if Instant::now() > deadline {
            return Err("the cluster did not come back up with every slot".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn used_memory(c: &mut Conn) -> u64 {
    let f = c.call(&["INFO", "memory"], "INFO memory");
    let t = text(&f);
    t.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Runs one argument list; `Err` says what broke the budget.
fn run_one(
    sess: &mut Session,
    e: &CommandEntry,
    args: &[Vec<u8>],
    stats: &mut Stats,
) -> Result<(), String> {
    let victim_before = sess.victim_failures();
    let rss_before = rss_bytes(sess.server.child.id());
    let mut c = Conn::open_port(sess.server.port).map_err(|e| format!("cannot connect: {e}"))?;
    let mut req: Vec<Vec<u8>> = e.words.iter().map(|w| w.clone().into_bytes()).collect();
    req.extend(args.iter().cloned());
    let t = Instant::now();
    // A write error (the server closed early, e.g. on a protocol error
    // while the argument was still arriving) is judged by what follows.
    let _ = c.send_cmd(&req);
    let silent_ok = may_stay_silent(e, args);
    let within = if silent_ok { SILENT_WAIT } else { REPLY_BOUND };
    let outcome = if matches!(e.name().as_str(), "sync" | "psync") {
        c.read_line_within(within)
    } else {
        c.read_frame_within(within)
    };
    let took = t.elapsed();
    if std::env::var_os("FERROKV_HOSTILE_VERBOSE").is_some() {
        eprintln!(
            "hostile sweep: {:.3} s {} -> {}",
            took.as_secs_f64(),
            describe(&e.words, args),
            show(&outcome)
        );
    }
    if took > stats.worst_reply.0 && !matches!(outcome, Outcome::TimedOut(_)) {
        stats.worst_reply = (took, describe(&e.words, args));
    }
    drop(c);
    let mut problem = match &outcome {
        Outcome::Frame(_) | Outcome::Closed(_) => None,
        Outcome::TimedOut(_) if silent_ok => {
            stats.silent += 1;
            None
        }
        Outcome::TimedOut(b) => Some(format!(
            "no reply within {:?} (received {})",
            REPLY_BOUND,
            truncate(b, 60)
        )),
        Outcome::Invalid(b) => Some(format!("a reply that is not RESP: {}", truncate(b, 80))),
    };
    // Undo what must not outlive the command.
    match e.name().as_str() {
        "client|pause" => {
            if let Ok(mut u) = Conn::open_port(sess.server.port) {
                let _ = u.send_cmd(&["CLIENT", "UNPAUSE"]);
                let _ = u.read_frame_within(REPLY_BOUND);
            }
        }
        "replicaof" | "slaveof" => {
            if let Ok(mut u) = Conn::open_port(sess.server.port) {
                let _ = u.send_cmd(&["REPLICAOF", "NO", "ONE"]);
                let _ = u.read_frame_within(REPLY_BOUND);
            }
        }
        _ => {}
    }
    if !sess.server.alive() {
        let status = sess.server.child.try_wait().ok().flatten();
        problem = Some(format!(
            "the server died ({status:?}){}; last log lines: {}",
            if sess.watch.as_ref().is_some_and(|w| w.killed()) {
                " — killed by the RSS watch at its hard ceiling"
            } else {
                ""
            },
            last_lines(&sess.server.log(), 5)
        ));
    } else if problem.is_some() && !sess.answers() {
        problem = Some(format!(
            "{}; the server then stopped answering PING",
            problem.unwrap()
        ));
    }
    if problem.is_none() && sess.victim_failures() > victim_before {
        problem = Some(format!(
            "the victim's PINGs went unanswered while it ran: {:?}",
            sess.victim.as_ref().unwrap().failures()
        ));
    }
    if problem.is_none() {
        let rss_after = rss_bytes(sess.server.child.id());
        let step = rss_after.saturating_sub(rss_before);
        if step > stats.worst_rss_step.0 {
            stats.worst_rss_step = (step, describe(&e.words, args));
        }
        if step > PER_COMMAND_RSS_GROWTH {
            problem = Some(format!(
                "RSS grew by {:.1} MB across the command (bound {:.0} MB)",
                mb(step),
                mb(PER_COMMAND_RSS_GROWTH)
            ));
        } else if rss_after > sess.base_rss + TOTAL_RSS_GROWTH {
            problem = Some(format!(
                "RSS reached {:.1} MB, {:.1} MB over the sweep's start (bound {:.0} MB)",
                mb(rss_after),
                mb(rss_after - sess.base_rss),
                mb(TOTAL_RSS_GROWTH)
            ));
        }
    }
    match problem {
        None => {
            if !e.has_flag("readonly") {
                sess.restore().map_err(|r| format!("after it, {r}"))?;
            }
            Ok(())
        }
        Some(p) => Err(p),
    }
}

fn last_lines(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Runs `cases` argument lists of every command of the table except
/// `SHUTDOWN`; returns the failures and the statistics.
pub fn sweep(
    sess: &mut Session,
    seed: u64,
    cases: u64,
    only: Option<&str>,
) -> (Vec<Failure>, Stats) {
    let mut stats = Stats::default();
    let mut failures = Vec::new();
    let table = fetch_table(&mut Conn::open(&sess.server));
    assert!(
        table.len() > 100,
        "COMMAND listed only {} commands",
        table.len()
    );
    let pool = Pool::new(&table);
    for e in &table {
        let name = e.name();
        if name == "shutdown" || only.is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        stats.commands += 1;
        for case in 0..cases {
            let args = generate(e, &pool, seed, case);
            stats.runs += 1;
            if let Err(what) = run_one(sess, e, &args, &mut stats) {
                let command = describe(&e.words, &args);
                eprintln!("hostile sweep: FAIL {command}: {what}");
                failures.push(Failure { command, what });
                if !sess.answers() || sess.victim_failures() > 0 {
                    if stats.restarts == MAX_RESTARTS {
                        failures.push(Failure {
                            command: "(sweep)".into(),
                            what: format!("stopped after {MAX_RESTARTS} restarts"),
                        });
                        sess.count_reconnects();
                        stats.victim_reconnects = sess.reconnects;
                        return (failures, stats);
                    }
                    stats.restarts += 1;
                    sess.restart();
                } else if let Err(r) = sess.restore() {
                    failures.push(Failure {
                        command: "(restore)".into(),
                        what: r,
                    });
                    stats.restarts += 1;
                    sess.restart();
                }
            }
        }
    }
    sess.count_reconnects();
    stats.victim_reconnects = sess.reconnects;
    (failures, stats)
}
